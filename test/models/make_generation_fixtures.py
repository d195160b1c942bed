#!/usr/bin/python3
"""The generation test model and what PyTorch generates with it.

A GPT-style decoder (the family of make_models.py: separate Q/K/V Linear
layers, a causal mask sliced from a lower-triangle buffer, tanh GELU, pre-LN,
tied LM head), briefly trained to continue periodic sequences, so that each
token depends on the one a period back (what the cache must hold), and
exported with dynamic batch and sequence axes, the way decoders are exported
for generation. The expected tokens are computed by
rerunning the whole model on the whole prefix at every step, in float64,
with no cache: greedy decoding, and beam search as the runtime defines it
(make_search_cases.py's definition, on this model's logits). Every greedy
choice and every beam's ranking is checked to be decided by a margin far
above float32 rounding, so a correct float32 implementation cannot differ.

The second model is the paper's encoder-decoder (nn.Transformer, post-LN,
sinusoidal positions, a causal target mask, tied embeddings), trained to
reverse sequences of digits, exported with the source and the target ids
as inputs; its expected tokens decode the target from a begin token for
given sources.

Writes test/models/generation/{gpt,transformer}/{model.onnx, expected.txt},
and the GPT exported twice more with its own cache: gpt_past (past_key_values,
concatenated) and gpt_static (a fixed-size buffer written by ScatterND, with
the zeros.pb and positions.pb that bind it).

  /usr/bin/python3 test/models/make_generation_fixtures.py
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "unittests", "Runtime"))
from make_search_cases import beam_search  # noqa: E402

D, H, FF, VOCAB, MAXLEN, LAYERS = 32, 4, 64, 50, 24, 2
# The smallest gap between the chosen log-probability and the next one.
MARGIN = 1e-3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.proj = nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, FF), nn.Linear(FF, D)
        self.register_buffer("causal", torch.tril(torch.ones(MAXLEN, MAXLEN)).view(1, 1, MAXLEN, MAXLEN))

    def forward(self, x, past=None):
        b, n, _ = x.shape
        h = self.ln1(x)
        q, k, v = (t(h).view(b, n, H, D // H).transpose(1, 2) for t in (self.q, self.k, self.v))
        p = 0
        if past is not None:
            p = past[0].shape[2]
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // H)
        att = att.masked_fill(self.causal[:, :, p:p + n, :p + n] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, n, D)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x if past is None else (x, k, v)


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(MAXLEN, D)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln = nn.LayerNorm(D)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.tok(ids) + self.pos(positions)
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()


class GPTWithPast(nn.Module):
    """The same model as exporters write it for generation: the keys and
    values of the earlier positions in (past_key_values, one pair per
    layer), the extended ones out (present)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, ids, *past):
        g, p = self.gpt, past[0].shape[2]
        x = g.tok(ids) + g.pos(torch.arange(p, p + ids.shape[1]).unsqueeze(0))
        presents = []
        for i, blk in enumerate(g.blocks):
            x, k, v = blk(x, (past[2 * i], past[2 * i + 1]))
            presents += [k, v]
        return (g.ln(x) @ g.tok.weight.t(), *presents)


class GPTWithStaticCache(nn.Module):
    """The same model with a fixed-size cache, as static-cache exporters
    write it: one [B, H, MAXLEN, Dh] buffer per layer for the keys and one
    for the values, written at `cache_position` by an indexed assignment
    (ScatterND in ONNX), attention over the whole buffer with the positions
    after each row hidden, the written buffers out (present)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, ids, cache_position, *caches):
        g = self.gpt
        x = g.tok(ids) + g.pos(cache_position.unsqueeze(0))
        hide = torch.arange(MAXLEN)[None, :] > cache_position[:, None]
        presents = []
        for i, blk in enumerate(g.blocks):
            b, n, _ = x.shape
            h = blk.ln1(x)
            q, k, v = (t(h).view(b, n, H, D // H).transpose(1, 2)
                       for t in (blk.q, blk.k, blk.v))
            kc, vc = caches[2 * i].clone(), caches[2 * i + 1].clone()
            kc[:, :, cache_position] = k
            vc[:, :, cache_position] = v
            att = ((q @ kc.transpose(-2, -1)) / math.sqrt(D // H)).masked_fill(hide, float("-inf"))
            y = (F.softmax(att, dim=-1) @ vc).transpose(1, 2).reshape(b, n, D)
            x = x + blk.proj(y)
            x = x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x)), approximate="tanh"))
            presents += [kc, vc]
        return (g.ln(x) @ g.tok.weight.t(), *presents)


def decoder_logits(model, prompt):
    """The logits after prompt + tokens, rerunning the whole decoder."""
    def next_logits(tokens):
        with torch.no_grad():
            return model(torch.tensor([prompt + tokens]))[0, -1]
    return next_logits


def greedy(next_logits, n, what):
    out = []
    for _ in range(n):
        lp = torch.log_softmax(next_logits(out).double(), -1)
        top = torch.topk(lp, 2).values
        assert top[0] - top[1] > MARGIN, f"a near tie in greedy decoding of {what}"
        out.append(int(lp.argmax()))
    return out


def beams(next_logits, c, what):
    hyps = beam_search(c, next_logits)
    # Ranking margin: neighbouring hypotheses' scores are well apart.
    scores = [lp / ((5 + len(t)) / 6) ** c["alpha"] for t, lp in hyps]
    for a, b in zip(scores, scores[1:]):
        assert a - b > MARGIN, f"a near tie among the beams of {what}"
    return hyps


def periodic_batch(n):
    rows = []
    for _ in range(n):
        period = int(torch.randint(2, 6, ()))
        pattern = torch.randint(0, VOCAB, (period,))
        rows.append(pattern.repeat(MAXLEN // period + 2)[:MAXLEN + 1])
    return torch.stack(rows)


def train(model, steps=400):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        seq = periodic_batch(32)
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss)


SRC_LEN, DIGITS, BEGIN = 8, 10, 10


class Seq2Seq(nn.Module):
    """The paper's Transformer at a small size; the target may be shorter
    than the longest one, as a decoder's prefix is."""

    def __init__(self, d=32, heads=4, ff=64, layers=2):
        super().__init__()
        self.d = d
        self.embed = nn.Embedding(DIGITS + 1, d)
        self.core = nn.Transformer(d, heads, layers, layers, ff, dropout=0.0, batch_first=True)
        pos = torch.arange(SRC_LEN).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(SRC_LEN, d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.register_buffer("causal", torch.triu(torch.ones(SRC_LEN, SRC_LEN, dtype=torch.bool), 1))

    def forward(self, src, tgt):
        n = tgt.shape[1]
        x = self.embed(src) * math.sqrt(self.d) + self.pe
        y = self.embed(tgt) * math.sqrt(self.d) + self.pe[:n]
        h = self.core(x, y, tgt_mask=self.causal[:n, :n])
        return h @ self.embed.weight.t()


def train_reversal(model, steps=300):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        src = torch.randint(0, DIGITS, (32, SRC_LEN))
        out = src.flip(1)
        tgt = torch.cat([torch.full((32, 1), BEGIN), out[:, :-1]], 1)
        loss = F.cross_entropy(model(src, tgt).reshape(-1, DIGITS + 1), out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss)


def seq2seq_fixture():
    torch.manual_seed(11)
    model = Seq2Seq()
    print("reversal training loss", train_reversal(model))
    model.eval()
    folder = os.path.join(HERE, "generation", "transformer")
    os.makedirs(folder, exist_ok=True)
    src = torch.randint(0, DIGITS, (2, SRC_LEN))
    torch.onnx.export(model, (src, src), os.path.join(folder, "model.onnx"),
                      input_names=["src", "tgt"], output_names=["logits"],
                      opset_version=17, do_constant_folding=True,
                      dynamic_axes={"src": {0: "batch"}, "tgt": {0: "batch", 1: "sequence"},
                                    "logits": {0: "batch", 1: "sequence"}})
    model = model.double()
    lines = ["# Made by make_generation_fixtures.py: tokens PyTorch decodes by",
             "# rerunning the whole encoder-decoder on the whole prefix at every step.",
             f"# max_length {SRC_LEN} vocab {DIGITS + 1}"]
    sources = [[3, 1, 4, 1, 5, 9, 2, 6], [0, 0, 7, 7, 2, 2, 9, 9], [8, 6, 4, 2, 1, 3, 5, 7]]

    def logits_of(source):
        def next_logits(tokens):
            with torch.no_grad():
                out = model(torch.tensor([source]), torch.tensor([[BEGIN] + tokens]))[0, -1]
            return out
        return next_logits

    for s in sources:
        out = greedy(logits_of(s), SRC_LEN, s)
        lines.append(f"greedy {BEGIN} {','.join(map(str, out))} source {','.join(map(str, s))}")
    for s, (k, alpha) in zip(sources, [(3, 0.6), (2, 0.0), (3, 1.0)]):
        c = {"beam": k, "alpha": alpha, "end": -1, "early": True, "max": SRC_LEN,
             "vocab": DIGITS + 1}
        hyps = beams(logits_of(s), c, s)
        lines.append(f"beam {BEGIN} width {k} alpha {alpha} end -1 max {SRC_LEN} "
                     f"source {','.join(map(str, s))}")
        for tokens, lp in hyps:
            lines.append("hyp " + ",".join(map(str, tokens)))
    with open(os.path.join(folder, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", folder)


def main():
    seq2seq_fixture()
    torch.manual_seed(7)
    model = GPT()
    print("final training loss", train(model))
    model.eval()
    folder = os.path.join(HERE, "generation", "gpt")
    os.makedirs(folder, exist_ok=True)
    ids = torch.randint(0, VOCAB, (2, MAXLEN))
    torch.onnx.export(model, (ids,), os.path.join(folder, "model.onnx"),
                      input_names=["input_ids"], output_names=["logits"],
                      opset_version=17, do_constant_folding=True,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                    "logits": {0: "batch", 1: "sequence"}})
    # The same weights exported with past_key_values (test/tfmc/generate.test
    # generates the same tokens from it).
    past_folder = os.path.join(HERE, "generation", "gpt_past")
    os.makedirs(past_folder, exist_ok=True)
    empty = [torch.zeros(1, H, 0, D // H) for _ in range(2 * LAYERS)]
    names = [f"past_{i // 2}_{'kv'[i % 2]}" for i in range(2 * LAYERS)]
    torch.onnx.export(GPTWithPast(model), (ids[:1, :1], *empty),
                      os.path.join(past_folder, "model.onnx"),
                      input_names=["input_ids"] + names,
                      output_names=["logits"] + [n.replace("past", "present") for n in names],
                      opset_version=17, do_constant_folding=True,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                    **{n: {0: "batch", 2: "past"} for n in names}})
    # And with a fixed-size cache written by ScatterND; the files bind it
    # to zeros and its positions to the whole length for a batch of 3, which
    # folds the writes away (test/tfmc/generate.test).
    static_folder = os.path.join(HERE, "generation", "gpt_static")
    os.makedirs(static_folder, exist_ok=True)
    # Traced at the sizes it is compiled for: the exporter bakes the traced
    # sizes into the reshapes of the indexed assignment.
    caches = [torch.zeros(3, H, MAXLEN, D // H) for _ in range(2 * LAYERS)]
    names = [f"cache_{i // 2}_{'kv'[i % 2]}" for i in range(2 * LAYERS)]
    torch.onnx.export(GPTWithStaticCache(model),
                      (torch.cat([ids, ids[:1]]), torch.arange(MAXLEN), *caches),
                      os.path.join(static_folder, "model.onnx"),
                      input_names=["input_ids", "cache_position"] + names,
                      output_names=["logits"] + [n.replace("cache", "present") for n in names],
                      opset_version=17, do_constant_folding=True)
    for name, value in (("zeros", torch.zeros(3, H, MAXLEN, D // H)),
                        ("positions", torch.arange(MAXLEN))):
        with open(os.path.join(static_folder, f"{name}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value.numpy(), name).SerializeToString())
    model = model.double()
    lines = ["# Made by make_generation_fixtures.py: tokens PyTorch generates by",
             "# rerunning the whole model on the whole prefix at every step.",
             f"# max_length {MAXLEN} vocab {VOCAB}"]
    # Periodic prompts (the model continues them through attention), and a
    # one-token one and an irregular one, which it continues its own way.
    prompts = [[5, 17, 3, 5, 17, 3], [1], [42, 7, 30, 11, 42, 7, 30, 11, 42, 7],
               [9, 14, 21, 33, 8]]
    for p in prompts:
        n = MAXLEN - len(p) if len(p) > 1 else 12
        lines.append("greedy " + ",".join(map(str, p)) + " " +
                     ",".join(map(str, greedy(decoder_logits(model, p), n, p))))
    for p, (k, alpha, end) in zip(prompts, [(3, 0.6, -1), (2, 0.0, 4), (3, 0.6, 11),
                                            (3, 1.0, 33)]):
        c = {"beam": k, "alpha": alpha, "end": end, "early": True, "max": 10,
             "vocab": VOCAB}
        hyps = beams(decoder_logits(model, p), c, p)
        lines.append(f"beam {','.join(map(str, p))} width {k} alpha {alpha} end {end} "
                     f"max {c['max']}")
        for tokens, lp in hyps:
            lines.append("hyp " + ",".join(map(str, tokens)))
    with open(os.path.join(folder, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", folder)


if __name__ == "__main__":
    main()
