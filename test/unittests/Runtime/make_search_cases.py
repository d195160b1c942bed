#!/usr/bin/python3
"""Expected results of greedy decoding, beam search and sampling, written from
their definitions with PyTorch, for SearchTest.cpp.

The model is a toy whose next-token logits are a pure function of the prefix,
6·u - 3 with u from tfm's counter-based generator keyed by a hash of the
prefix, so the C++ test computes the same logits. Beam search keeps the best
2K continuations of the live beams each step; one that ends among the best K
ends a hypothesis, the others go on until K are live; a hypothesis scores its
log-probability over ((5 + length) / 6)^alpha. Sampling draws token t with
u = uniform(seed, t) among the top-k, then top-p, tokens at temperature T.

  /usr/bin/python3 test/unittests/Runtime/make_search_cases.py
"""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MASK = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def uniform(seed, counter):
    return (mix64(seed ^ mix64(counter)) >> 11) * (1.0 / 9007199254740992.0)


def logits(model, prefix, vocab):
    h = mix64(model)
    for t in prefix:
        h = mix64(h ^ (t + 1))
    return torch.tensor([6 * uniform(h, v) - 3 for v in range(vocab)], dtype=torch.float32)


def penalty(length, alpha):
    return ((5 + length) / 6) ** alpha


def beam_search(c, next_logits=None):
    """Beam search over next_logits(tokens) (default: the toy model's); the
    generation fixtures call it with a real model's logits."""
    if next_logits is None:
        next_logits = lambda tokens: logits(c["model"], tokens, c["vocab"])
    live = [([], 0.0)]
    ended = []
    for _ in range(c["max"]):
        scores = []
        for row, (tokens, lp) in enumerate(live):
            logp = torch.log_softmax(next_logits(tokens).double(), -1)
            for v in range(c["vocab"]):
                scores.append((lp + logp[v].item(), row, v))
        scores.sort(key=lambda s: (-s[0], s[1], s[2]))
        nxt = []
        for rank, (s, row, v) in enumerate(scores[:2 * c["beam"]]):
            if len(nxt) == c["beam"]:
                break
            hyp = (live[row][0] + [v], s)
            if v == c["end"]:
                if rank < c["beam"]:
                    ended.append(hyp)
            else:
                nxt.append(hyp)
        live = nxt
        ended = sorted(ended, key=lambda h: -h[1] / penalty(len(h[0]), c["alpha"]))[:c["beam"]]
        if not live or (c["early"] and len(ended) >= c["beam"]):
            break
    rank = lambda h: -h[1] / penalty(len(h[0]), c["alpha"])
    out = sorted(ended, key=rank)
    for h in sorted(live, key=rank):
        if len(out) < c["beam"]:
            out.append(h)
    return out[:c["beam"]]


def sampling(c):
    tokens, lp = [], 0.0
    for t in range(c["max"]):
        logp = torch.log_softmax(logits(c["model"], tokens, c["vocab"]).double() / c["temp"], -1)
        probs = logp.exp()
        order = sorted(range(c["vocab"]), key=lambda v: (-logp[v].item(), v))
        keep = order[:c["topk"]] if c["topk"] else order
        if c["topp"] < 1:
            mass, cut = 0.0, []
            for v in keep:
                cut.append(v)
                mass += probs[v].item()
                if mass >= c["topp"]:
                    break
            keep = cut
        total = sum(probs[v].item() for v in keep)
        u = uniform(c["seed"], t) * total
        acc, pick = 0.0, keep[-1]
        for v in keep:
            acc += probs[v].item()
            if u < acc:
                pick = v
                break
        tokens.append(pick)
        lp += float(torch.log(probs[pick] / total))
        if pick == c["end"]:
            break
    return [(tokens, lp)]


CASES = [
    dict(name="greedy", vocab=11, beam=1, alpha=0.0, end=-1, early=1, sample=0, temp=1.0,
         topk=0, topp=1.0, seed=0, max=9, model=3),
    dict(name="greedy_ends", vocab=6, beam=1, alpha=0.0, end=2, early=1, sample=0, temp=1.0,
         topk=0, topp=1.0, seed=0, max=30, model=5),
    dict(name="beam4_paper_penalty", vocab=9, beam=4, alpha=0.6, end=0, early=1, sample=0,
         temp=1.0, topk=0, topp=1.0, seed=0, max=12, model=11),
    dict(name="beam3_no_end", vocab=7, beam=3, alpha=0.0, end=-1, early=1, sample=0,
         temp=1.0, topk=0, topp=1.0, seed=0, max=6, model=17),
    dict(name="beam5_late_stop", vocab=8, beam=5, alpha=1.0, end=1, early=0, sample=0,
         temp=1.0, topk=0, topp=1.0, seed=0, max=10, model=23),
    dict(name="sample_topk_topp", vocab=13, beam=1, alpha=0.0, end=-1, early=1, sample=1,
         temp=0.8, topk=5, topp=0.9, seed=7, max=20, model=29),
    dict(name="sample_hot_nucleus", vocab=10, beam=1, alpha=0.0, end=4, early=1, sample=1,
         temp=1.7, topk=0, topp=0.5, seed=99, max=25, model=31),
]


def main():
    lines = ["# Made by make_search_cases.py: the results of greedy decoding, beam",
             "# search and sampling on a toy model, written from their definitions."]
    for c in CASES:
        hyps = sampling(c) if c["sample"] else beam_search(c)
        lines.append("case " + " ".join(f"{k} {v}" for k, v in c.items()))
        for tokens, lp in hyps:
            score = lp / penalty(len(tokens), c["alpha"])
            lines.append(f"hyp {score!r} {lp!r} " + " ".join(map(str, tokens)))
    with open(os.path.join(HERE, "search_cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
