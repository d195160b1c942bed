#!/usr/bin/env python3
"""Trains the small character-level GPT (examples/training/gpt.onnx) on the
bundled text from Python, then samples from it, streaming.

    PYTHONPATH=build/python python3 examples/python/train_gpt.py [--steps N]

Each step reads 32 random windows of 64 characters and learns every next
character; every tenth block of 256 characters is held out, and the loss on
it is computed from the inference entry's logits. Exits 1 unless training
lowers the held-out loss by at least one nat.
"""
import argparse
import os
import sys

import numpy as np

import tfm

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINING = os.path.join(HERE, "..", "training")
BATCH, LENGTH, BLOCK = 32, 64, 256


def held_out_loss(session, held):
    windows = len(held) - LENGTH - 1
    starts = [b * windows // BATCH for b in range(BATCH)]
    ids = np.stack([held[s:s + LENGTH] for s in starts])
    (logits,) = session.run(ids).values()
    logits = logits.astype(np.float64)
    logits -= logits.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(logits).sum(axis=-1))
    nxt = np.stack([held[s + 1:s + LENGTH + 1] for s in starts])
    picked = np.take_along_axis(logits, nxt[..., None], axis=-1)[..., 0]
    return float(np.mean(log_z - picked))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()

    with open(os.path.join(TRAINING, "corpus.txt"), encoding="latin-1") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    codes = np.array([index[c] for c in text], np.int64)
    blocks = [codes[i:i + BLOCK] for i in range(0, len(codes), BLOCK)]
    train = np.concatenate([b for i, b in enumerate(blocks) if i % 10 != 9])
    held = np.concatenate([b for i, b in enumerate(blocks) if i % 10 == 9])

    print("compiling gpt.onnx for training and generation ...")
    module = tfm.compile(os.path.join(TRAINING, "gpt.onnx"),
                         train={"optimizer": "adam", "lr": 2e-3},
                         generate={"prefill_chunk": 16})
    session = module.session(threads=args.threads)
    initial = best = held_out_loss(session, held)
    print(f"{len(train)} characters to train on, {len(held)} held out, "
          f"vocabulary {len(chars)}; held-out loss {initial:.3f}")

    rng = np.random.default_rng(1)
    for step in range(1, args.steps + 1):
        starts = rng.integers(0, len(train) - LENGTH - 1, BATCH)
        ids = np.stack([train[s:s + LENGTH] for s in starts])
        labels = np.stack([train[s + 1:s + LENGTH + 1] for s in starts])
        loss = session.train_step(ids, labels)
        if step % 50 == 0 or step == args.steps:
            best = min(best, held_out_loss(session, held))
            print(f"step {step:4d}  loss {loss:.3f}  held-out {best:.3f}")

    prompt = "The "
    print(f"sampling at temperature 0.7 from {prompt!r}:")
    sys.stdout.write(prompt)
    for step in session.generate([index[c] for c in prompt],
                                 max_new_tokens=48, temperature=0.7, seed=3,
                                 stream=True):
        sys.stdout.write(chars[step[0]])
        sys.stdout.flush()
    print()
    improved = initial - best
    print(f"held-out loss {initial:.3f} -> {best:.3f}")
    return 0 if improved >= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
