#!/usr/bin/env python3
"""Runs the GPU check pack (made by scripts/gpu-check.sh) on a machine with
an NVIDIA GPU: no compiler, only the runtime and the compiled models.

  check  every packed case (exported model families, op fixtures, ONNX node
         tests) on the GPU against its expected outputs: floats within rtol
         1e-4 and atol 1e-5 (the models whose GEMMs multiply in bf16 or f16
         within 1e-2 normwise), integers exactly
  train  every training fixture for its steps, each loss within 1e-3
         (relative) of PyTorch's: alone, and again as the one rank of a
         data-parallel job over NCCL (the path of several GPUs; NCCL comes
         from PyTorch's wheels)
  bench  the workloads of gpu_workloads.py (inference, W5's training step,
         W7's decoding) against PyTorch on the same GPU in the same run, in
         every form a user would pick (eager in the type, autocast,
         torch.compile), inputs and outputs on the GPU for both, timed by
         CUDA events, with the GEMM peak measured by cuBLAS through PyTorch
  all    the three, in that order

The check and train cases run in child processes and print a line each as
they finish, so a run cut off by a time limit still tells something. A
kernel fault poisons a process's CUDA context: after one (or a crash, or a
case past --case-timeout) a fresh process goes on with the next case, and
the faulting case runs once more alone with TFM_PROFILE=1, which names the
kernel. Prints one summary line per part, the last lines of the output.
usage: run.sh [check|train|bench|all] [--device cuda:0] [--reps N]
              [--case-timeout SECONDS] [--workloads w1,bert-base,...]
              [--compile none|bf16|all]"""
import argparse
import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tfm_runtime  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def compare(got, want, rel_l2=None):
    """None when `got` matches `want` (elementwise, or normwise within
    `rel_l2`), else why not."""
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if rel_l2 is not None and want.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        err = np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30)
        return None if err <= rel_l2 else f"normwise error {err:.3g} > {rel_l2:g}"
    if want.dtype.kind in "iub":
        bad = np.count_nonzero(got != want)
        return f"{bad} of {want.size} elements differ" if bad else None
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.all(np.isfinite(g) == np.isfinite(w)):
        return "non-finite values where the expected ones are finite (or the reverse)"
    fin = np.isfinite(w)
    err = np.abs(g[fin] - w[fin])
    bad = np.count_nonzero(err > ATOL + RTOL * np.abs(w[fin]))
    if bad:
        return (f"{bad} of {want.size} elements off, max abs error {err.max():.3g}")
    return None


def cases(root):
    for group in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, group))):
            yield group, name, os.path.join(root, group, name)


class Fault(Exception):
    """The runtime failed (not a mismatch): the process's CUDA context may
    be poisoned, so the cases after it run in a fresh process."""


def run_model(rt, path, device, ins, entry="infer", times=1, nccl=False):
    """The outputs of `times` runs; the model is closed whatever happens.
    With `nccl`, the session is rank 0 of a job of one over NCCL."""
    m = None
    try:
        m = tfm_runtime.Model(rt, path, device, entry=entry)
        if nccl:
            os.environ.update(TFM_RANK="0", TFM_WORLD_SIZE="1")
            m.join_nccl()
        return [m.run(ins) for _ in range(times)]
    except tfm_runtime.Error as e:
        raise Fault(str(e)) from None
    finally:
        if m is not None:
            try:
                m.close()
            except tfm_runtime.Error:
                pass


def check_items(pack):
    return [(f"{group}/{name}", folder)
            for group, name, folder in cases(os.path.join(pack, "cases"))]


def check_case(rt, args, folder):
    data = np.load(os.path.join(folder, "case.npz"))
    ins = [data[f"in{i}"] for i in range(sum(k.startswith("in") for k in data))]
    outs = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data))]
    rel_l2 = float(data["rel_l2"]) if "rel_l2" in data else None
    got = run_model(rt, os.path.join(folder, "model.so"), args.device, ins)[0]
    return next((f"output {i}: {w}" for i, w in
                 enumerate(compare(g, e, rel_l2) for g, e in zip(got, outs))
                 if w), None)


def train_items(pack):
    root = os.path.join(pack, "train")
    if not os.path.isdir(root):
        return []
    return [(label, os.path.join(root, label)) for label in sorted(os.listdir(root))]


def train_case(rt, args, folder):
    want = json.load(open(os.path.join(folder, "losses.json")))["losses"]
    batch = np.load(os.path.join(folder, "batch.npz"))
    ins = [batch[f"in{i}"] for i in range(len(batch.files))]
    # The GPU's data-parallel path needs NCCL, which a dry run on the CPU
    # has not.
    for nccl in ((False, True) if args.device.startswith("cuda") else (False,)):
        runs = run_model(rt, os.path.join(folder, "model.so"), args.device, ins,
                         entry="train_step", times=len(want), nccl=nccl)
        got = [float(r[0].reshape(-1)[0]) for r in runs]
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        if worst > 1e-3:
            return (("through NCCL: " if nccl else "") +
                    f"largest relative error {worst:.2e}")
    return None


PARTS = {"check": (check_items, check_case), "train": (train_items, train_case)}


def worker(args, pack):
    """Runs the part's cases from --start (or only --only) in this process,
    a line before and after each; exits 3 after a fault, so that a fresh
    process goes on."""
    rt = tfm_runtime.Runtime(os.path.join(pack, "lib", "libtfm_runtime.so"))
    items_of, case = PARTS[args.part]
    items = items_of(pack)
    todo = [args.only] if args.only is not None else range(args.start, len(items))
    for i in todo:
        print(f"START {i}", flush=True)
        # The dry run's stand-in for a kernel fault: the case's process dies.
        if os.environ.get("TFM_PACK_CRASH") == items[i][0]:
            os.kill(os.getpid(), signal.SIGSEGV)
        try:
            why, fault = case(rt, args, items[i][1]), False
        except Fault as e:
            why, fault = str(e), True
        print(f"DONE {i} " + ("ok" if not why else
                              ("FAULT " if fault else "FAIL ") + why.replace("\n", " ")),
              flush=True)
        if fault:
            return 3
    return 0


def isolated(args, pack, part):
    """Runs a part's cases in child processes, one line per case as it
    finishes. After a fault, a crash or a case past --case-timeout, the
    child is replaced and the cases after it go on; a faulting case runs
    once more alone with TFM_PROFILE=1, which waits on every launch and so
    names the kernel."""
    items = PARTS[part][0](pack)
    results = {}

    def child(start=None, only=None, env=None):
        cmd = [sys.executable, os.path.abspath(__file__), "_worker", part,
               "--device", args.device]
        cmd += ["--only", str(only)] if only is not None else ["--start", str(start)]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)

    def follow(proc, record):
        """Reads `proc`'s lines; returns the case it was in when it stopped
        answering (None when it ended between cases) and why."""
        current = None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            if not sel.select(timeout=args.case_timeout):
                proc.kill()
                proc.wait()
                return current, f"no answer within {args.case_timeout} s"
            line = proc.stdout.readline()
            if not line:
                rc = proc.wait()
                return current, (f"the process died (signal {-rc})" if rc < 0
                                 else f"the process exited with {rc}")
            words = line.rstrip("\n").split(" ", 2)
            if words[0] == "START":
                current = int(words[1])
            elif words[0] == "DONE":
                record(int(words[1]), words[2] if len(words) > 2 else "ok")
                current = None

    def record(i, outcome):
        results[i] = outcome
        print(("ok   " if outcome == "ok" else "FAIL ") + items[i][0] +
              ("" if outcome == "ok" else ": " + outcome), flush=True)

    start = 0
    while start < len(items):
        proc = child(start=start)
        stuck, why = follow(proc, record)
        if stuck is not None:
            record(stuck, "FAULT " + why)
        done = [i for i in results if i >= start]
        if not done:
            break
        last = max(done)
        if results[last].startswith("FAULT"):
            env = dict(os.environ, TFM_PROFILE="1")
            again = {}
            _, ended = follow(child(only=last, env=env),
                              lambda i, o: again.setdefault(i, o))
            alone = again.get(last, ended)
            results[last] += f"; alone with TFM_PROFILE=1: {alone}"
            print(f"     {items[last][0]}: alone with TFM_PROFILE=1: {alone}",
                  flush=True)
        start = last + 1
    return [(items[i][0], results.get(i, "not run")) for i in range(len(items))]


def check(rt, args, pack):
    per_group, failures = {}, []
    for name, outcome in isolated(args, pack, "check"):
        ok = per_group.setdefault(name.split("/")[0], [0, 0])
        ok[1] += 1
        if outcome == "ok":
            ok[0] += 1
        else:
            failures.append(f"{name}: {outcome}")
    for f in failures:
        print("FAIL", f)
    summary = ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in per_group.items())
    print(f"gpu-check check on {args.device}: {summary}; "
          f"{'all match' if not failures else f'{len(failures)} failures'}", flush=True)
    return not failures


def train(rt, args, pack):
    if not train_items(pack):
        print("gpu-check train: nothing packed")
        return True
    matched, failures = 0, []
    for label, outcome in isolated(args, pack, "train"):
        if outcome == "ok":
            matched += 1
        else:
            failures.append(f"{label}: {outcome}")
    for f in failures:
        print("FAIL train", f)
    print(f"gpu-check train on {args.device}: {matched} of {matched + len(failures)} "
          f"trajectories match PyTorch (rtol 1e-3)"
          + (", alone and through NCCL with one rank" if args.device.startswith("cuda")
             else ""), flush=True)
    return not failures


def gpu_timer(torch):
    """Times a call that queues GPU work on PyTorch's current stream:
    CUDA events around each of `reps` calls after 3 warm-ups, the median
    in milliseconds. A call's host time shows too, as a gap the GPU
    waits through."""
    def timed(fn, reps):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(reps)]
        for start, end in marks:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in marks)
    return timed


def wall(fn, reps):
    """The median wall time of a call that returns when done (tfm with host
    tensors), in milliseconds."""
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def fmt_ms(ms):
    return f"{ms:9.3f}" if ms == ms else f"{'-':>9s}"


def bench(rt, args, pack):
    """Every system at its best on the same GPU in the same run, inputs and
    outputs on the device for each: tfm through device tensors ordered on
    PyTorch's stream, PyTorch eager in the precision itself, under
    autocast, and compiled (torch.compile, default and reduce-overhead).
    Each time is a median of CUDA-event intervals; tfm's time with its
    host tensors (copies in and out) is a column of its own."""
    import torch
    import gpu_workloads as W
    timed = gpu_timer(torch)
    dev = torch.device("cuda")
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    peak_bf16 = 2 * n ** 3 / timed(lambda: a @ b, 20) / 1e9
    a16, b16 = a.half(), b.half()
    peak_f16 = 2 * n ** 3 / timed(lambda: a16 @ b16, 20) / 1e9
    a16 = b16 = None
    a32, b32 = a.float(), b.float()
    torch.backends.cuda.matmul.allow_tf32 = False
    peak_f32 = 2 * n ** 3 / timed(lambda: a32 @ b32, 10) / 1e9
    a = b = a32 = b32 = None  # frees the GEMM's operands
    big = torch.empty(1 << 28, dtype=torch.float32, device=dev)
    copy = torch.empty_like(big)
    bandwidth = 2 * big.numel() * 4 / timed(lambda: copy.copy_(big), 10) / 1e6  # GB/s
    big = copy = None
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}: cuBLAS GEMM {n}^3 "
          f"bf16 {peak_bf16:.0f} TFLOP/s, f16 {peak_f16:.0f} TFLOP/s, f32 {peak_f32:.1f} "
          f"TFLOP/s (no TF32); copy {bandwidth:.0f} GB/s", flush=True)
    wanted = args.workloads.split(",") if args.workloads else None
    compiled = {"none": (), "bf16": ("bf16",), "all": ("f32", "bf16", "f16")}[args.compile]
    print(f"{'workload':10s} {'type':>4s} {'GFLOP':>7s} {'tfm ms':>9s} {'%peak':>6s} "
          f"{'err':>7s} {'+copies':>9s} {'eager':>9s} {'autocast':>9s} {'compile':>9s} "
          f"{'c-ro':>9s} {'best peer':>20s} {'%peak':>6s} {'tfm/best':>8s}", flush=True)
    precisions = (("f32", "model.so", torch.float32, peak_f32),
                  ("bf16", "model-bf16.so", torch.bfloat16, peak_bf16),
                  ("f16", "model-f16.so", torch.float16, peak_f16),
                  ("b16c", "model-bf16-cpasync.so", torch.bfloat16, peak_bf16))
    for name in W.WORKLOADS:
        if wanted is None or name in wanted:
            inference_bench(rt, args, pack, name, timed, precisions, compiled)
    for name in W.TRAINING:
        if wanted is None or name in wanted:
            train_bench(rt, args, pack, name, timed, peak_f32)
    for name in ("w7", "w10"):
        if wanted is None or name in wanted:
            decode_bench(rt, args, pack, bandwidth, name)
    print("gpu-check bench: times are medians of CUDA-event intervals with inputs and "
          "outputs on the GPU for every system ('+copies': tfm given host arrays, copied "
          "in and out, by wall clock); eager runs the model in the type itself, autocast "
          "the f32 model under autocast, compile and c-ro torch.compile's default and "
          "reduce-overhead modes ('-': not run, see --compile); tfm's bf16 and f16 "
          "multiply their GEMMs in that type with f32 accumulation; b16c is bf16 with the "
          "generated GEMM's tiles copied by cp.async instead of loaded by TMA "
          "(sm_90a, gemm-4096, TFM_CUBLASLT=off to time it)", flush=True)
    return True


def inference_bench(rt, args, pack, name, timed, precisions, compiled):
    import copy
    import torch
    import gpu_workloads as W
    folder = os.path.join(pack, "bench", name)
    flops = W.flops(name)
    model, tin, _ = W.build(name)
    dev = torch.device("cuda")
    model = model.to(dev)
    tin = [t.to(dev) for t in tin]
    with torch.no_grad():
        # The reference: the same model in float64 on the GPU.
        ref = model.double()(*[t.double() for t in tin]).cpu().numpy()
        model.float()
    stream = torch.cuda.current_stream().cuda_stream
    for label, so_name, dtype, peak in precisions:
        tfm_ms = host_ms = float("nan")
        err = "-"
        so = os.path.join(folder, so_name)
        # The cp.async variant of the warpgroup GEMM is packed for sm_90a's
        # GEMM workload only; elsewhere its row would time the peers again.
        if label == "b16c" and not os.path.exists(so):
            continue
        if os.path.exists(so):
            try:
                m = tfm_runtime.Model(rt, so, args.device)
                print(f"  tfm's kernels ({name}, {so_name}): {m.describe()}", flush=True)
                ins = [t.to(tfm_runtime.torch_dtype(code)).contiguous()
                       for t, code in zip(tin, m.input_codes)]
                outs = [torch.empty(shape, dtype=tfm_runtime.torch_dtype(code), device=dev)
                        for (_, _, shape), code in zip(m.outputs, m.output_codes)]
                run = m.device_runner(ins, outs, stream)
                run()
                torch.cuda.synchronize()
                got = outs[0].double().cpu().numpy()
                err = f"{np.linalg.norm(got - ref) / np.linalg.norm(ref):.1e}"
                tfm_ms = timed(run, args.reps)
                host_in = [t.cpu().numpy() if t.dtype != torch.bfloat16
                           else t.cpu().view(torch.int16).numpy().view(np.uint16)
                           for t in ins]
                host_ms = wall(lambda: m.run(host_in), args.reps)
                m.close()
            except tfm_runtime.Error as e:
                err = "error"
                print(f"  tfm ({name}, {so_name}): {e}", flush=True)
        peers = {}

        def peer(key, fn):
            """Times one form of PyTorch; one that does not run here (an
            old PyTorch without torch.compile, no compiler for it) is left
            out, saying why."""
            try:
                peers[key] = timed(fn, args.reps)
            except Exception as e:  # noqa: BLE001 - whatever stops a peer
                print(f"  {key} ({name}, {label}): {type(e).__name__}: {str(e)[:100]}",
                      flush=True)
        with torch.inference_mode():
            pure = copy.deepcopy(model).to(dtype)
            pin = [t.to(dtype) for t in tin]
            peer("eager", lambda: pure(*pin))
            if dtype != torch.float32:
                def autocast():
                    with torch.autocast("cuda", dtype=dtype):
                        return model(*tin)
                peer("autocast", autocast)
            compile_fn = getattr(torch, "compile", None)
            for mode, key in ((None, "compile"), ("reduce-overhead", "c-ro")):
                if label not in compiled:
                    continue
                if compile_fn is None:
                    print(f"  {key} ({name}, {label}): PyTorch {torch.__version__} has no "
                          "torch.compile", flush=True)
                    continue
                fn = compile_fn(pure, mode=mode)  # compiles at its first call
                peer(key, lambda: fn(*pin))
                torch._dynamo.reset()
        line = (f"{name:10s} {label:>4s} {flops / 1e9:7.1f} {fmt_ms(tfm_ms)} "
                f"{100 * flops / tfm_ms / 1e9 / peak:5.1f}% {err:>7s} {fmt_ms(host_ms)}")
        for key in ("eager", "autocast", "compile", "c-ro"):
            line += " " + fmt_ms(peers.get(key, float("nan")))
        if peers:
            best = min(peers, key=peers.get)
            line += (f" {best + ' ' + format(peers[best], '.3f'):>20s} "
                     f"{100 * flops / peers[best] / 1e9 / peak:5.1f}% "
                     f"{tfm_ms / peers[best]:8.2f}")
        print(line, flush=True)
        pure = pin = None
    model = tin = None
    torch.cuda.empty_cache()


def train_bench(rt, args, pack, name, timed, peak_f32):
    """A training step: tfm's train_step (inputs, labels and the loss on
    the GPU) against PyTorch's forward, cross-entropy, backward and Adam
    on the same model and batch, eager."""
    import torch
    import torch.nn.functional as F
    import gpu_workloads as W
    source = W.TRAINING[name]
    d = W.WORKLOADS[source][1]
    model, tin, names = W.build(source)
    labels = W.labels(source)
    flops = W.flops(name)
    dev = torch.device("cuda")
    model = model.to(dev).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tdev, ldev = [t.to(dev) for t in tin], labels.to(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        y = model(*tdev)
        F.cross_entropy(y.reshape(-1, d), ldev.reshape(-1)).backward()
        opt.step()
    reps = max(args.reps // 4, 3)
    torch_ms = timed(step, reps)
    tfm_ms = host_ms = float("nan")
    so = os.path.join(pack, "bench", name, "model.so")
    if os.path.exists(so):
        try:
            m = tfm_runtime.Model(rt, so, args.device, entry="train_step")
            feed = dict(zip(names, tdev))
            feed["labels"] = ldev
            ins = [feed[port].contiguous() for port, _, _ in m.inputs]
            loss = torch.empty((), dtype=torch.float32, device=dev)
            tfm_ms = timed(m.device_runner(ins, [loss], torch.cuda.current_stream().cuda_stream),
                           reps)
            host_in = [t.cpu().numpy() for t in ins]
            host_ms = wall(lambda: m.run(host_in), reps)
            m.close()
        except (tfm_runtime.Error, KeyError) as e:
            print(f"  tfm ({name}): {e}", flush=True)
    print(f"{name:10s} {'f32':>4s} {flops / 1e9:7.1f} {fmt_ms(tfm_ms)} "
          f"{100 * flops / tfm_ms / 1e9 / peak_f32:5.1f}% {'-':>7s} {fmt_ms(host_ms)} "
          f"{fmt_ms(torch_ms)} {'-':>9s} {'-':>9s} {'-':>9s} "
          f"{'eager ' + format(torch_ms, '.3f'):>20s} "
          f"{100 * flops / torch_ms / 1e9 / peak_f32:5.1f}% {tfm_ms / torch_ms:8.2f}",
          flush=True)
    model = opt = tdev = None
    torch.cuda.empty_cache()


def decode_bench(rt, args, pack, bandwidth, name="w7"):
    """W7 (and W10, name="w10"): greedy decoding of 128 tokens after a
    32-token prompt, tfm's cached decoding (--generate, the cache on the
    GPU; f32, and bf16 GEMMs) against PyTorch's own KV-cache loop in f32 and
    in bf16, each token read back to the host as a server does; milliseconds
    per token, against the bandwidth limit (the weights a step reads, in the
    precision's width, over the copy bandwidth measured)."""
    import importlib
    import torch
    import gpu_workloads as W
    decoder = importlib.import_module(f"{name}_model")
    dev = torch.device("cuda")
    prompt = decoder.prompt_ids()[0].tolist()
    limit_f32 = decoder.weight_bytes_per_token() / (bandwidth * 1e9) * 1e3
    peers, peer_tokens = {}, {}
    for label, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        model = getattr(W, name)().to(dev, dtype)
        with torch.inference_mode():
            steps = []
            for rep in range(2):
                ids = torch.tensor([prompt], device=dev)
                logits, k, v = model.forward_past(ids, *decoder.empty_past(device=dev,
                                                                            dtype=dtype))
                tokens = [int(logits[0, -1].argmax())]
                for _ in range(decoder.NEW - 1):
                    t = time.perf_counter()
                    logits, k, v = model.forward_past(
                        torch.tensor([[tokens[-1]]], device=dev), k, v)
                    tokens.append(int(logits[0, -1].argmax()))
                    if rep:
                        steps.append((time.perf_counter() - t) * 1e3)
            peers["eager " + label] = statistics.median(steps)
            peer_tokens[label] = tokens
        model = None
        torch.cuda.empty_cache()
    best = min(peers, key=peers.get)
    for label, so_name, width in (("f32", "model.so", 1.0), ("bf16", "model-bf16.so", 0.5)):
        tfm_ms = float("nan")
        so = os.path.join(pack, "bench", name, so_name)
        if os.path.exists(so):
            try:
                m = tfm_runtime.Model(rt, so, args.device, entry="decode_step")
                print(f"  tfm's kernels ({name}, {so_name}): {m.describe()}", flush=True)
                m.generate(prompt, 4)  # warm-up: kernels loaded, graphs recorded
                tokens, _, decode_ms, steps = m.generate(prompt, decoder.NEW)
                tfm_ms = decode_ms / max(steps, 1)
                same = sum(a == b for a, b in zip(tokens, peer_tokens[label]))
                print(f"  {name} {label}: tfm's tokens match PyTorch's {label} greedy tokens "
                      f"at {same} of {len(tokens)}", flush=True)
                m.close()
            except tfm_runtime.Error as e:
                print(f"  tfm ({name}, {so_name}): {e}", flush=True)
        limit = limit_f32 * width
        print(f"{name:10s} {label:>4s} {'ms/tok':>7s} {fmt_ms(tfm_ms)} "
              f"{100 * limit / tfm_ms:5.1f}%bw {fmt_ms(peers['eager ' + label])} "
              f"{best + ' ' + format(peers[best], '.3f'):>20s} "
              f"{tfm_ms / peers[best]:8.2f}  (limit {limit:.3f} ms/token in {label}; "
              f"columns: tfm, PyTorch eager in {label}, best peer, tfm/best)", flush=True)


def main():
    pack = HERE
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        wp = argparse.ArgumentParser()
        wp.add_argument("part", choices=sorted(PARTS))
        wp.add_argument("--device", default="cuda:0")
        wp.add_argument("--start", type=int, default=0)
        wp.add_argument("--only", type=int)
        return worker(wp.parse_args(sys.argv[2:]), pack)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", nargs="?", default="all", choices=["check", "train", "bench", "all"])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--workloads", default="",
                    help="the bench's workloads, comma-separated (default: all; "
                         "w1,w2,w3,w4,bert-base,attn-2048,attn-causal-4096,gemm-4096,w5,w7,w10)")
    ap.add_argument("--compile", default="bf16", choices=["none", "bf16", "all"],
                    help="the precisions torch.compile is a peer in (each compiles "
                         "for a minute or more)")
    ap.add_argument("--case-timeout", type=float, default=600,
                    help="seconds a check or training case may take")
    args = ap.parse_args()
    rt = tfm_runtime.Runtime(os.path.join(pack, "lib", "libtfm_runtime.so"))
    info = json.load(open(os.path.join(pack, "pack.json")))
    if info.get("schedule_on_cpu"):
        args.device = "cpu"
    ok = True
    for part, fn in (("check", check), ("train", train), ("bench", bench)):
        if args.part in (part, "all") and not (part == "bench" and args.device == "cpu"):
            ok &= fn(rt, args, pack)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
