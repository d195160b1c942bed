#!/usr/bin/python3
"""The PyTorch eager peer: times one workload of export_workloads.py on 2
threads and prints its median in ms. W5 is one training step of W4: forward,
cross-entropy over the last axis against fixed labels, backward, and an
Adam step, the same graph tfmc compiles with --train. A name ending in -i8
(W1-I8, W2-I8, W9-I8) is the float workload after PyTorch's own dynamic
quantization, torch.ao.quantization.quantize_dynamic over its nn.Linear
layers in qint8, as its users quantize. W5-DDP is W5 on 2
processes of 1 thread, each on its own 8 rows, under DistributedDataParallel
over gloo on the loopback (tfm's w5-dp against 1 process of 2 threads).
Usage: torch_peer.py WORKLOAD REPS"""
import contextlib
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

name, reps = sys.argv[1], int(sys.argv[2])


def ddp_rank(rank, reps, port, out):
    import torch.distributed as dist
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    d, h, ff, layers, b, s = 512, 8, 2048, 6, 8, 64
    model = nn.parallel.DistributedDataParallel(
        nn.Transformer(d, h, layers, layers, ff, dropout=0.0, batch_first=True))
    src, tgt = torch.randn(b, s, d), torch.randn(b, s, d)
    mask = nn.Transformer.generate_square_subsequent_mask(s)
    labels = torch.randint(0, d, (b, s))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    times = []
    for i in range(reps + 3):
        dist.barrier()
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        y = model(src, tgt, tgt_mask=mask)
        F.cross_entropy(y.reshape(-1, d), labels.reshape(-1)).backward()
        opt.step()
        if i >= 3:
            times.append((time.perf_counter() - t) * 1e3)
    if rank == 0:
        out.put(statistics.median(times))
    dist.destroy_process_group()


if name == "w5-ddp":
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=ddp_rank, args=(r, reps, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    median = out.get(timeout=1800)
    for p in procs:
        p.join(timeout=60)
    print(f"{median:.4f}")
    sys.exit(0)

torch.set_num_threads(2)
torch.manual_seed(0)
# A quantized layer takes the encoder's standard path: the fused one of
# PyTorch 1.13 reads linear1.weight as a tensor, which a dynamically
# quantized Linear's is not (it fails), and it is chosen only where the
# activation is ReLU or GELU, which the flag says.
quantized = name.endswith("-i8")
name = name.removesuffix("-i8")
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
    if quantized:
        enc = torch.ao.quantization.quantize_dynamic(enc, {nn.Linear}, dtype=torch.qint8)
        for layer in enc.layers:
            layer.activation_relu_or_gelu = 0  # see below
    x = torch.randn(1, 128, 1024)
    run = lambda: enc(x)
else:
    d, h, ff, b, s = {"w1": (768, 12, 3072, 1, 128), "w2": (768, 12, 3072, 8, 128),
                      "w3": (256, 4, 1024, 1, 32), "w8-1k": (768, 12, 3072, 1, 1024),
                      "w8-4k": (768, 12, 3072, 1, 4096)}[name]
    layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True).eval()
    if quantized:
        layer = torch.ao.quantization.quantize_dynamic(layer, {nn.Linear}, dtype=torch.qint8)
        layer.activation_relu_or_gelu = 0  # see below
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
