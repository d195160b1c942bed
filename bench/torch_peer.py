#!/usr/bin/python3
"""The PyTorch eager peer: times one workload of export_workloads.py on 2
threads and prints its median in ms. W5 is one training step of W4: forward,
cross-entropy over the last axis against fixed labels, backward, and an
Adam step, the same graph tfmc compiles with --train.
Usage: torch_peer.py WORKLOAD REPS"""
import contextlib
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(2)
torch.manual_seed(0)
name, reps = sys.argv[1], int(sys.argv[2])
if name in ("w4", "w5"):
    d, h, ff, layers, b, s = 512, 8, 2048, 6, 8, 64
    model = nn.Transformer(d, h, layers, layers, ff, dropout=0.0, batch_first=True)
    src, tgt = torch.randn(b, s, d), torch.randn(b, s, d)
    mask = model.generate_square_subsequent_mask(s)
    if name == "w4":
        model.eval()
        run = lambda: model(src, tgt, tgt_mask=mask)
    else:
        labels = torch.randint(0, d, (b, s))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def run():
            opt.zero_grad(set_to_none=True)
            y = model(src, tgt, tgt_mask=mask)
            F.cross_entropy(y.reshape(-1, d), labels.reshape(-1)).backward()
            opt.step()
elif name == "w9":
    layer = nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 24, enable_nested_tensor=False).eval()
    x = torch.randn(1, 128, 1024)
    run = lambda: enc(x)
else:
    d, h, ff, b, s = {"w1": (768, 12, 3072, 1, 128), "w2": (768, 12, 3072, 8, 128),
                      "w3": (256, 4, 1024, 1, 32), "w8-1k": (768, 12, 3072, 1, 1024),
                      "w8-4k": (768, 12, 3072, 1, 4096)}[name]
    layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True).eval()
    x = torch.randn(b, s, d)
    run = lambda: layer(x)
with torch.inference_mode() if name != "w5" else contextlib.nullcontext():
    for _ in range(3):
        run()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
print(f"{statistics.median(times):.4f}")
