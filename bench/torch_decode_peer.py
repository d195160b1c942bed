#!/usr/bin/python3
"""The PyTorch peer of W7 and W10: the decoder of w7_model (or the module
named) in eager mode with its own KV cache (the keys and values of the
earlier positions concatenated step by step), 2 threads, greedy. Prints the
prompt's time, the median time per new token, and the tokens.
Usage: torch_decode_peer.py [w7_model|w10_model]"""
import importlib
import statistics
import sys
import time

import torch

w7_model = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "w7_model")

torch.set_num_threads(2)
model = w7_model.build()
with torch.inference_mode():
    ids = w7_model.prompt_ids()
    for _ in range(2):  # warm-up
        model.forward_past(ids, *w7_model.empty_past())
    t = time.perf_counter()
    logits, k, v = model.forward_past(ids, *w7_model.empty_past())
    prompt_ms = (time.perf_counter() - t) * 1e3
    tokens, steps = [int(logits[0, -1].argmax())], []
    for _ in range(w7_model.NEW - 1):
        t = time.perf_counter()
        logits, k, v = model.forward_past(torch.tensor([[tokens[-1]]]), k, v)
        tokens.append(int(logits[0, -1].argmax()))
        steps.append((time.perf_counter() - t) * 1e3)
print(f"{prompt_ms:.3f} {statistics.median(steps):.4f} {','.join(map(str, tokens))}")
