#!/usr/bin/python3
"""The PyTorch eager peer: times one workload of export_workloads.py on 2
threads and prints its median in ms. Usage: torch_peer.py WORKLOAD REPS"""
import statistics
import sys
import time

import torch
import torch.nn as nn

torch.set_num_threads(2)
torch.manual_seed(0)
name, reps = sys.argv[1], int(sys.argv[2])
if name == "w4":
    d, h, ff, layers, b, s = 512, 8, 2048, 6, 8, 64
    model = nn.Transformer(d, h, layers, layers, ff, dropout=0.0, batch_first=True).eval()
    src, tgt = torch.randn(b, s, d), torch.randn(b, s, d)
    mask = model.generate_square_subsequent_mask(s)
    run = lambda: model(src, tgt, tgt_mask=mask)
else:
    d, h, ff, b, s = {"w1": (768, 12, 3072, 1, 128), "w2": (768, 12, 3072, 8, 128),
                      "w3": (256, 4, 1024, 1, 32)}[name]
    layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True).eval()
    x = torch.randn(b, s, d)
    run = lambda: layer(x)
with torch.inference_mode():
    for _ in range(3):
        run()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
print(f"{statistics.median(times):.4f}")
