#!/usr/bin/python3
"""Benchmarks tfm against ONNX Runtime and PyTorch on the workloads of
PERFORMANCE.md, in one run: the systems take turns, round after round, and
oneDNN's sgemm rate (the practical ceiling) is measured in every round.
Prints a table of medians with tfm's time over each peer's and each
system's share of the ceiling, and writes it as Markdown to OUT/results.md.

W1-I8, W2-I8 and W9-I8 are W1, W2 and W9 after quantize_dynamic's rewrite,
and W7-I4 and W10-I4 the decoders with 4-bit MatMulNBits weights
(quantize_workloads.py), W7-I4A4 and W10-I4A4 the same at accuracy_level 4
(the input may be rounded to int8 in each block, as ONNX Runtime and tfm
then do), each run by every system from the same file; their
accuracy is reported beside their speed, and the int8 workloads' share is
of the int8 ceiling (oneDNN's u8 x s8 GEMM), measured in every round.

W7 and W10 (decoding) have tables of their own: the prompt's time and the time per
new token, against the bytes a token reads (the weights, and the KV cache of
the positions before it) over the memory bandwidth
(a read of a buffer far larger than the last-level cache, on 2 threads,
measured in every round). So has "lengths":
W1's layer from one artifact compiled for sequence=1..512 against static
compiles of the lengths it runs.

Usage: run.py --tfmc TFMC --ceiling SGEMM_CEILING --int8-ceiling INT8_CEILING
              --bandwidth READ_BANDWIDTH --out DIR [--rounds N]
              [--workloads w1,...,w7,w8-1k,w8-4k,w9,w10,w1-i8,w2-i8,w9-i8,w1-q8,w2-q8,w7-i4,w10-i4,w7-i4a4,w10-i4a4,lengths]
              [--skip ort,torch]
Needs Debian's python3-torch and python3-onnx (run it with /usr/bin/python3),
and node with npm for ONNX Runtime (installed into OUT on first use)."""
import argparse
import datetime
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_VERSION = "1.30.0"
# Timed runs per measurement: more for the short workloads.
REPS = {"w1": 30, "w2": 8, "w3": 200, "w4": 8, "w5": 6, "w6": 8, "w4-bf16": 8,
        "w8-1k": 5, "w8-4k": 2, "w9": 5, "w1-i8": 30, "w2-i8": 8, "w9-i8": 5,
        "w1-q8": 30, "w2-q8": 8}
# The quantized workloads and the float ones they are made of
# (quantize_workloads.py): int8 encoders, 4-bit decoders.
INT8_OF = {"w1-i8": "w1", "w2-i8": "w2", "w9-i8": "w9", "w1-q8": "w1",
           "w2-q8": "w2"}
# Quantized by tfm itself (tfmc compile --quantize=int8, per output feature)
# from the float model; the peers run the file their own tools wrote.
QUANTIZED_BY_TFM = {"w1-q8": "w1-i8", "w2-q8": "w2-i8"}
INT4_OF = {"w7-i4": "w7", "w10-i4": "w10"}
INT4A4_OF = {"w7-i4a4": "w7", "w10-i4a4": "w10"}
# Workloads that are another compiled with --dtype=bf16 (tfm only): W6 is
# PERFORMANCE.md's W2 in bf16; W4 in bf16 is issue 16's addition.
BF16_OF = {"w6": "w2", "w4-bf16": "w4"}
BF16_TARGET = {"w6": "≥ 1.7× f32 W2, rel. error ≤ 1e-2",
               "w4-bf16": "faster than f32 W4, rel. error ≤ 1e-2"}
# PERFORMANCE.md's targets (of the ceiling).
TARGETS = {"w1": "≥ 95%", "w2": "≥ 95%", "w3": "≥ 70%", "w4": "≥ 88%", "w5": "≥ 70%",
           "w8-1k": "≥ 90%", "w8-4k": "≥ 85%",
           "w9": "compile ≤ 30 s, peak ≤ 4 GB; session ≤ 1 s",
           "w1-i8": "VNNI: ≥ 2.5× tfm's f32 and ≥ 1.2× ORT; AVX2: ahead of ORT",
           "w2-i8": "VNNI: ≥ 2.5× tfm's f32 and ≥ 1.2× ORT; AVX2: ahead of ORT",
           "w9-i8": "ahead of ORT; compile ≤ 30 s, peak ≤ 2 GB",
           "w1-q8": "as W1-I8", "w2-q8": "as W2-I8"}
DESCRIPTION = {
    "w1": "encoder layer d768 h12 ff3072, B1 S128",
    "w2": "encoder layer d768 h12 ff3072, B8 S128",
    "w3": "encoder layer d256 h4 ff1024, B1 S32",
    "w8-1k": "encoder layer d768 h12 ff3072, B1 S1024 (attention's 4·B·S²·d counted)",
    "w8-4k": "encoder layer d768 h12 ff3072, B1 S4096 (attention's 4·B·S²·d counted)",
    "w9": "24-layer encoder d1024 h16 ff4096 (1.2 GB of weights), B1 S128",
    "w4": "Transformer base 6+6, d512 h8 ff2048, B8 S64",
    "w5": "W4 as a training step (forward, backward, Adam)",
    "w1-i8": "W1 after quantize_dynamic (int8 weights per tensor, u8 activations)",
    "w2-i8": "W2 after quantize_dynamic (int8 weights per tensor, u8 activations)",
    "w9-i8": "W9 after quantize_dynamic (int8 weights per tensor, u8 activations)",
    "w1-q8": "W1 by tfmc --quantize=int8 (int8 weights per output feature, u8 "
             "activations); the peers on W1-I8",
    "w2-q8": "W2 by tfmc --quantize=int8 (int8 weights per output feature, u8 "
             "activations); the peers on W2-I8",
}


# PyTorch at its best: without the variables that pin OpenBLAS to older
# kernels (some environments set them; docs/performance.md).
PINNING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
TORCH_ENV = {k: v for k, v in os.environ.items() if k not in PINNING}
# DNNL_MAX_CPU_ISA caps oneDNN's kernels and tfm's own (the runtime reads it
# too), so that a wider host stands in for a narrower one: tfm's code is then
# compiled for the portable level of the cap, and PyTorch's OpenBLAS pinned
# to the cap's kernels. ONNX Runtime has no such cap.
ISA_CAP = os.environ.get("DNNL_MAX_CPU_ISA", "").upper()
CAPPED_LEVEL = {"AVX2": ("x86-64-v3", "Haswell"), "SSE41": ("x86-64-v2", "Nehalem")}
COMPILE_CPU = [f"--cpu={CAPPED_LEVEL[ISA_CAP][0]}"] if ISA_CAP in CAPPED_LEVEL else []
if ISA_CAP in CAPPED_LEVEL:
    TORCH_ENV["OPENBLAS_CORETYPE"] = CAPPED_LEVEL[ISA_CAP][1]


def host():
    """The CPU's model and the vector ISAs the bench's kernels may use."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    isas = [name for name, flag in (("AVX2", "avx2"), ("AVX-512", "avx512f"),
                                    ("AVX512-BF16", "avx512_bf16"), ("AMX", "amx_tile"))
            if flag in flags]
    text = f"{model}, {os.cpu_count()} cores, ISA {', '.join(isas) or 'below AVX2'}"
    if ISA_CAP:
        text += (f"; capped at {ISA_CAP} by DNNL_MAX_CPU_ISA for tfm and the ceiling"
                 + (f" (tfm compiled with {COMPILE_CPU[0]}, PyTorch's OpenBLAS pinned "
                    f"to {CAPPED_LEVEL[ISA_CAP][1]})" if COMPILE_CPU else "")
                 + ", ONNX Runtime on the host's full ISA")
    return text


def compile_peak(cmd):
    """Runs a compile; its seconds and its peak resident memory in MB (the
    child's own rusage, so one compile's, not the largest so far)."""
    import tempfile
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode:
            out.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.read().decode()}")
    return time.perf_counter() - t, usage.ru_maxrss / 1024


def session_ms(tfmc, so):
    """Loading `so` and creating a session through the C API, after a first
    load has paged the library in: the milliseconds of each."""
    import ctypes
    rt = ctypes.CDLL(os.path.join(os.path.dirname(tfmc), "..", "lib", "libtfm_runtime.so"))
    ms = []
    for _ in range(2):
        ctx, mod, ses = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        rt.tfm_context_create(None, ctypes.byref(ctx))
        t0 = time.perf_counter()
        assert not rt.tfm_module_load(ctx, so.encode(), ctypes.byref(mod))
        t1 = time.perf_counter()
        assert not rt.tfm_session_create(mod, None, ctypes.byref(ses))
        t2 = time.perf_counter()
        ms = [(t1 - t0) * 1e3, (t2 - t1) * 1e3]
        rt.tfm_session_release(ses)
        rt.tfm_module_release(mod)
        rt.tfm_context_release(ctx)
    return ms


def log(msg):
    print(f"==> {msg}", file=sys.stderr, flush=True)


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout.decode()}{p.stderr.decode()}")
    return p.stdout.decode()


def ensure_ort(out):
    if os.path.isdir(os.path.join(out, "node_modules", "onnxruntime-node")):
        return True
    log(f"installing onnxruntime-node {ORT_VERSION} into {out} (npm, --ignore-scripts)")
    p = subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund",
                        "--prefix", out, f"onnxruntime-node@{ORT_VERSION}"])
    return p.returncode == 0


def train_step_ms(tfmc, so, out, reps):
    """The median of `reps` training steps after two warm-up steps, as
    `tfmc train` reports each one."""
    lines = run([tfmc, "train", so, "--data", os.path.join(out, "w5-data"),
                 "--steps", str(reps + 2), "--threads", "2"]).splitlines()
    steps = [float(l.rsplit("(", 1)[1].split(" s)")[0]) * 1e3
             for l in lines if l.startswith("step ")]
    return statistics.median(steps[2:])


def decode_table(args, skip, node_env, name="w7", f32_tokens=None):
    """W7 (and W10, name="w10"): tfm's cached decoding (--generate) against
    PyTorch's own KV-cache loop and ONNX Runtime on the past_key_values
    export. W7-I4 and W10-I4 (name="w7-i4") are the same with 4-bit
    MatMulNBits weights, against ONNX Runtime on the same files (PyTorch
    has no such operator): the bandwidth limit counts the weights' bytes in
    the quantized file (NAME-i4.json), with the same f32 KV cache, and the greedy tokens are compared with
    the f32 model's (`f32_tokens`, or a run of it). For W7 also tfm's uncached model rerun per token: at the longest
    length (160, the library's own @infer, what a static compile reruns
    without the cache), and at the length each token is decoded at (32 to
    159), from one library compiled for that range (docs/dynamic-shapes.md):
    timed every 8 lengths and averaged over all 128 by linear
    interpolation."""
    sys.path.insert(0, HERE)
    import importlib
    import numpy as np
    from onnx import numpy_helper
    base = name.split("-")[0]
    decoder = importlib.import_module(f"{base}_model")
    reruns = name == "w7"
    quantized = name != base
    if quantized:
        skip = skip | {"torch"}
        with open(os.path.join(args.out, f"{name}.json")) as f:
            step_bytes = json.load(f)["weight_bytes_per_token"]
    else:
        step_bytes = decoder.weight_bytes_per_token()
    # A token reads the KV cache of the positions before it too, in f32
    # for every variant (../shared/PERFORMANCE.md: weights plus the cache).
    weight_bytes, kv_bytes = step_bytes, decoder.kv_bytes_per_token()
    step_bytes = weight_bytes + kv_bytes
    out = args.out
    prompt = ",".join(map(str, decoder.prompt_ids()[0].tolist()))
    so, rerun = os.path.join(out, f"{name}.so"), os.path.join(out, f"{name}-rerun.so")
    first, last = decoder.PROMPT, decoder.MAXLEN - 1
    sampled = list(range(first, last, 8)) + [last]
    log(f"compiling {name} with --generate" +
        (f", and uncached for sequence={first}..{last}" if reruns else ""))
    t = time.perf_counter()
    run([args.tfmc, "compile", *COMPILE_CPU, os.path.join(out, f"{name}.onnx"), "--generate",
         "--max-length", str(decoder.MAXLEN), "-o", so])
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    if reruns:
        run([args.tfmc, "compile", *COMPILE_CPU, os.path.join(out, f"{name}.onnx"), "--shape",
             "batch=1", "--shape", f"sequence={first}..{last}", "-o", rerun])
    rerun_compile_s = time.perf_counter() - t
    ids_pb = {}
    for n in sampled if reruns else []:
        ids_pb[n] = os.path.join(out, f"{name}-ids-{n}.pb")
        ids = (np.arange(n, dtype=np.int64) * 37 % decoder.VOCAB).reshape(1, n)
        with open(ids_pb[n], "wb") as f:
            f.write(numpy_helper.from_array(ids, "input_ids").SerializeToString())
    res = {k: [] for k in ("bw", "tfm_p", "tfm_t", "ort_p", "ort_t", "pt_p", "pt_t",
                           "rerun", "rerun160")}
    tokens = {}
    for r in range(args.rounds):
        log(f"{name.upper()} round {r + 1} of {args.rounds}")
        res["bw"].append(float(run([args.bandwidth, "5"],
                                   env=dict(os.environ, OMP_NUM_THREADS="2"))))
        p = subprocess.run([args.tfmc, "generate", so, "--prompt-ids", prompt,
                            "--max-new-tokens", str(decoder.NEW), "--threads", "2",
                            "--bench", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           check=True)
        tokens["tfm"] = p.stdout.decode().strip()
        bench = [l for l in p.stderr.decode().splitlines() if l.startswith("bench:")][0]
        res["tfm_p"].append(float(bench.split("prompt median ")[1].split(" ms")[0]))
        res["tfm_t"].append(float(bench.split("per token median ")[1].split(" ms")[0]))
        def rerun_ms(cmd):
            text = run([args.tfmc, "run"] + cmd + ["--threads", "2", "--bench", "3"])
            return float([l for l in text.splitlines() if l.startswith("bench:")][0]
                         .split("median ")[1].split(" ms")[0])
        if reruns:
            res["rerun160"].append(rerun_ms([so, "--entry", "infer"]))
            at = [rerun_ms([rerun, "--input", f"input_ids={ids_pb[n]}"]) for n in sampled]
            res["rerun"].append(float(np.mean(np.interp(np.arange(first, last + 1),
                                                         sampled, at))))
        if "ort" not in skip:
            empty = decoder.empty_past()[0]
            pm, tm, tok = run(["node", os.path.join(HERE, "ort_decode_peer.js"),
                               os.path.join(out, f"{name}-past.onnx"), prompt,
                               str(decoder.NEW), str(empty.shape[0]), str(empty.shape[2]),
                               str(empty.shape[4])], env=node_env).split()
            res["ort_p"].append(float(pm))
            res["ort_t"].append(float(tm))
            tokens["ort"] = tok
        if "torch" not in skip:
            pm, tm, tok = run(["/usr/bin/python3", os.path.join(HERE, "torch_decode_peer.py"),
                               f"{name}_model"], env=TORCH_ENV).split()
            res["pt_p"].append(float(pm))
            res["pt_t"].append(float(tm))
            tokens["torch"] = tok
    med = {k: statistics.median(v) if v else None for k, v in res.items()}
    limit = step_bytes / (med["bw"] * 1e9) * 1e3
    agree = all(t == tokens["tfm"] for t in tokens.values())
    greedy = ""
    if quantized:
        if f32_tokens is None:
            f32_so = os.path.join(out, f"{base}.so")
            if not os.path.exists(f32_so):
                run([args.tfmc, "compile", *COMPILE_CPU, os.path.join(out, f"{base}.onnx"),
                     "--generate", "--max-length", str(decoder.MAXLEN), "-o", f32_so])
            f32_tokens = run([args.tfmc, "generate", f32_so, "--prompt-ids", prompt,
                              "--max-new-tokens", str(decoder.NEW), "--threads", "2"]).strip()
        mine, theirs = tokens["tfm"].split(","), f32_tokens.split(",")
        same = sum(a == b for a, b in zip(mine, theirs))
        first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), None)
        greedy = (f" Greedy tokens against the f32 model's: {same} of {len(theirs)} agree"
                  + (f", the first difference at token {first + 1}" if first is not None else "")
                  + ".")

    def f(v, digits=2):
        return f"{v:.{digits}f}" if v else "—"

    def share(v):
        return f"{limit / v * 100:.0f}%" if v else "—"

    # A step cannot read its weights faster than memory serves them: a share
    # above 100% means the measured bandwidth is not this host's bound.
    over = [name for name, key in (("tfm", "tfm_t"), ("ONNX Runtime", "ort_t"),
                                   ("PyTorch", "pt_t"))
            if med[key] and limit / med[key] > 1.0]
    if over:
        log(f"{name.upper()}: {', '.join(over)} above 100% of the bandwidth limit; "
            "the measured bandwidth understates this host's")
    peers = [
        f"| tfm (KV cache derived by the compiler) | {f(med['tfm_p'])} | {f(med['tfm_t'])} | "
        f"{share(med['tfm_t'])} | 1.00 |",
        f"| ONNX Runtime (past_key_values export) | {f(med['ort_p'])} | {f(med['ort_t'])} | "
        f"{share(med['ort_t'])} | {f(med['tfm_t'] / med['ort_t']) if med['ort_t'] else '—'} |",
        f"| PyTorch eager (its own KV-cache loop) | {f(med['pt_p'])} | {f(med['pt_t'])} | "
        f"{share(med['pt_t'])} | {f(med['tfm_t'] / med['pt_t']) if med['pt_t'] else '—'} |",
    ]
    # A shared host's bandwidth can move by half between rounds.
    bw_rounds = (f" (rounds: {min(res['bw']):.1f}–{max(res['bw']):.1f})"
                 if len(res["bw"]) > 1 else "")
    header = (
        f"{name.upper()}, decoding: {decoder.DESCRIPTION}"
        f"{', 4-bit MatMulNBits weights (block 32, zero points)' if quantized else ''}"
        f"{', accuracy_level 4' if name.endswith('a4') else ''}, "
        f"B1, {decoder.PROMPT}-token prompt + {decoder.NEW} new tokens, greedy. "
        f"Memory bandwidth (read, 2 threads) {med['bw']:.1f} GB/s{bw_rounds}; a step reads "
        f"{weight_bytes / 1e6:.0f} MB of weights"
        f"{' (4-bit values, their scales and zero points)' if quantized else ''} and "
        f"{kv_bytes / 1e6:.1f} MB of KV cache on average: "
        f"limit {limit:.2f} ms per token. Tokens {'identical' if agree else 'DIFFER'} across "
        f"{', '.join(sorted(tokens))}.{greedy} tfm compile {compile_s:.1f} s.")
    table = ["| system | prompt ms | ms per token | % of the bandwidth limit | tfm / system |",
             "| --- | ---: | ---: | ---: | ---: |"]
    warning = ([f"**Above 100% of the limit: {', '.join(over)}.** The measured bandwidth "
                "understates this host's; the percentages are not bounds."] if over else [])
    DECODED[name] = tokens["tfm"]
    if quantized:
        return [header, ""] + table + peers[:2] + [
            "", "Targets: ≥ 70% of the bandwidth limit, ahead of ONNX Runtime."] + warning
    if not reruns:
        return [header, ""] + table + peers + [
            "", "Targets: ≥ 70% of the bandwidth limit, ahead of ONNX Runtime and "
            "PyTorch."] + warning
    return [header, ""] + table + peers + [
        f"| tfm uncached: the model rerun per token at length 160 | — | "
        f"{f(med['rerun160'])} | {share(med['rerun160'])} | "
        f"{f(med['tfm_t'] / med['rerun160'], 3)} |",
        f"| tfm uncached: the model rerun per token at its own length ({first}..{last}, one "
        f"library for the range, compiled in {rerun_compile_s:.0f} s) | — | {f(med['rerun'])} | "
        f"{share(med['rerun'])} | {f(med['tfm_t'] / med['rerun'], 3)} |",
        "",
        f"Targets: ≥ 70% of the bandwidth limit and ahead of both peers; the 128-token "
        f"decode ≥ 10× faster than the uncached rerun (measured "
        f"{med['rerun160'] / med['tfm_t']:.1f}× against the rerun at 160, "
        f"{med['rerun'] / med['tfm_t']:.1f}× against the rerun at each token's length).",
    ] + warning

# The greedy tokens of each decoder tfm ran, for the quantized ones'
# agreement.
DECODED = {}

LENGTHS = (17, 128, 500)
LENGTH_RANGE = (1, 512)


def lengths_table(args):
    """W1's layer compiled once for sequence=1..512 (one artifact, static
    buckets with exact padding) against static compiles of exactly 17, 128
    and 500, taking turns in every round; the one artifact's outputs are
    checked against each static compile's on the same input."""
    onnx = os.path.join(args.out, "w1-dyn.onnx")
    lo, hi = LENGTH_RANGE
    dyn = os.path.join(args.out, "w1-lengths.so")
    log(f"compiling W1 for sequence={lo}..{hi}, and for each length")
    t = time.perf_counter()
    run([args.tfmc, "compile", *COMPILE_CPU, onnx, "--shape", f"sequence={lo}..{hi}", "-o", dyn])
    dyn_s = time.perf_counter() - t
    static, static_s, cases = {}, {}, {}
    for n in LENGTHS:
        static[n] = os.path.join(args.out, f"w1-static-{n}.so")
        t = time.perf_counter()
        run([args.tfmc, "compile", *COMPILE_CPU, onnx, "--shape", f"sequence={n}", "-o", static[n]])
        static_s[n] = time.perf_counter() - t
        cases[n] = os.path.join(args.out, f"w1-case-{n}")
        run([args.tfmc, "run", static[n], "--output-dir", cases[n]])

    def bench(so, n):
        out = run([args.tfmc, "run", so, "--test-data-dir", cases[n], "--threads", "2",
                   "--bench", str(REPS["w1"])])
        line = [l for l in out.splitlines() if l.startswith("bench:")][0]
        return float(line.split("median ")[1].split(" ms")[0])

    times = {(k, n): [] for k in ("static", "dyn") for n in LENGTHS}
    for r in range(args.rounds):
        log(f"lengths round {r + 1} of {args.rounds}")
        for n in LENGTHS:
            times[("static", n)].append(bench(static[n], n))
            times[("dyn", n)].append(bench(dyn, n))
    med = {k: statistics.median(v) for k, v in times.items()}
    mb = lambda path: os.path.getsize(path) / 1e6  # noqa: E731
    lines = [
        f"Lengths: W1's layer (d768 h12 ff3072, B1) compiled once for sequence={lo}..{hi} "
        f"({dyn_s:.1f} s, {mb(dyn):.1f} MB) against a static compile of each length "
        f"({statistics.mean(static_s.values()):.1f} s and {mb(static[LENGTHS[0]]):.1f} MB "
        f"each); outputs checked equal to the static compile's on the same input.",
        "",
        "| length | static compile ms | one artifact ms | one artifact / static | target |",
        "| ---: | ---: | ---: | ---: | --- |",
    ]
    for n in LENGTHS:
        s_, d_ = med[("static", n)], med[("dyn", n)]
        lines.append(f"| {n} | {s_:.2f} | {d_:.2f} | {d_ / s_:.2f} | ≤ 1.25 |")
    return lines


def data_parallel_table(args, skip):
    """W5 trained by 1 process of 2 threads against 2 processes of 1 thread
    (mpirun, docs/training.md), on the CI machine's 2 cores: samples per
    second, and from rank 0's profile the share of the step in the ALL_REDUCE
    calls, apart: START (each gradient scaled into its bucket) and WAIT
    (waiting for the exchange, then the average copied back). The 2
    processes' global batch is two W5 batches, so each rank takes W5's 8
    rows. The peer, in the same rounds: PyTorch the same two ways, one
    process of 2 threads and DistributedDataParallel over gloo."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    so = os.path.join(args.out, "w5.so")
    if not os.path.exists(so):
        run([args.tfmc, "compile", *COMPILE_CPU, os.path.join(args.out, "w4.onnx"),
             "--train", "--optimizer=adam", "--lr=1e-3", "-o", so])
    one_data, two_data = (os.path.join(args.out, d) for d in ("w5-data", "w5-data-dp"))
    os.makedirs(two_data, exist_ok=True)
    rows = 0
    for name in os.listdir(one_data):
        a = numpy_helper.to_array(onnx.load_tensor(os.path.join(one_data, name)))
        if name == "labels.pb":
            rows = a.shape[0]
        onnx.save_tensor(numpy_helper.from_array(np.concatenate([a, a]) if a.shape[0] == 8 else a),
                         os.path.join(two_data, name))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", TFM_PROFILE="1")
    steps = REPS["w5"] + 2
    one, two, start, wait, torch_one, torch_two = [], [], [], [], [], []
    torch = "torch" not in skip
    for r in range(args.rounds):
        log(f"data-parallel round {r + 1} of {args.rounds}")
        one.append(train_step_ms(args.tfmc, so, args.out, REPS["w5"]))
        if torch:
            for peer, times in (("w5", torch_one), ("w5-ddp", torch_two)):
                times.append(float(run(["/usr/bin/python3", os.path.join(HERE, "torch_peer.py"),
                                        peer, str(REPS["w5"])], env=TORCH_ENV)))
        logs = os.path.join(args.out, "w5-dp-logs")
        shutil.rmtree(logs, ignore_errors=True)
        p = subprocess.run(["mpirun", "-np", "2", "-x", "TFM_PROFILE", "--output-filename",
                            logs, args.tfmc, "train", so, "--data", two_data, "--steps",
                            str(steps), "--threads", "1", "--quiet"],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            sys.exit(f"mpirun failed:\n{p.stdout}{p.stderr}")
        ms = [float(l.rsplit("(", 1)[1].split(" s)")[0]) * 1e3
              for l in p.stdout.splitlines() if l.startswith("step ")]
        two.append(statistics.median(ms[2:]))
        # Rank 0's profile, apart from rank 1's: ms per run of each phase.
        (rank0,) = glob.glob(os.path.join(logs, "*", "rank.0", "stderr"))
        with open(rank0) as f:
            profile = f.read()
        phase = {0: 0.0, 1: 0.0}
        for line in profile.splitlines():
            f = line.split()
            if len(f) > 4 and f[1] == "all_reduce":
                phase[int(f[2].split(",")[2])] += float(f[4])
        start.append(phase[0])
        wait.append(phase[1])
    t1, t2 = statistics.median(one), statistics.median(two)
    s_, w_ = statistics.median(start), statistics.median(wait)
    peers = []
    if torch:
        p1, p2 = statistics.median(torch_one), statistics.median(torch_two)
        peers = [
            f"| PyTorch, 1 process × 2 threads | {rows} | {p1:.0f} | {rows / p1 * 1e3:.1f} | "
            f"{(rows / p1) / (rows / t1):.2f} | – | – |",
            f"| PyTorch DDP (gloo), 2 processes × 1 thread | {2 * rows} | {p2:.0f} | "
            f"{2 * rows / p2 * 1e3:.1f} | {(2 * rows / p2) / (rows / t1):.2f} | – | – |",
        ]
    return [
        "Data parallel: W5 (the base Transformer's training step, Adam, B8 S64 per process) in "
        "one process of 2 threads against 2 processes of 1 thread under mpirun, each rank "
        f"taking {rows} rows of a 2×{rows}-row batch; the 2 processes' step is profiled "
        "(TFM_PROFILE), which waits for nothing on the CPU.",
        "",
        "| configuration | rows per step | ms per step | samples/s | samples/s vs tfm's 1 process | "
        "ALL_REDUCE start ms (share) | ALL_REDUCE wait ms (share) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| 1 process × 2 threads | {rows} | {t1:.0f} | {rows / t1 * 1e3:.1f} | 1.00 | – | – |",
        f"| 2 processes × 1 thread | {2 * rows} | {t2:.0f} | {2 * rows / t2 * 1e3:.1f} | "
        f"{(2 * rows / t2) / (rows / t1):.2f} | {s_:.1f} ({s_ / t2:.1%}) | {w_:.1f} ({w_ / t2:.1%}) |",
    ] + peers


def int8_error(args, w, f32_so):
    """A quantized encoder against its float model in tfm, on one random
    input: the normwise relative error of its output and the share of rows
    whose argmax (over the last axis) agrees."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    source = INT8_OF[w]
    if not f32_so:
        f32_so = os.path.join(args.out, f"{source}-f32.so")
        run([args.tfmc, "compile", *COMPILE_CPU, os.path.join(args.out, f"{source}.onnx"),
             "-o", f32_so])
    case, got = (os.path.join(args.out, f"{w}-{d}") for d in ("case", "outputs"))
    run([args.tfmc, "run", f32_so, "--output-dir", case])
    out = run([args.tfmc, "run", os.path.join(args.out, f"{w}.so"), "--test-data-dir", case,
               "--rtol", "1", "--atol", "1", "--output-dir", got])
    error = max(float(part.split(":")[0]) for part in out.split("rel l2 error ")[1:])
    want = numpy_helper.to_array(onnx.load_tensor(os.path.join(case, "output_0.pb")))
    have = numpy_helper.to_array(onnx.load_tensor(os.path.join(got, "output_0.pb")))
    agree = float(np.mean(want.argmax(-1) == have.argmax(-1)))
    return error, agree


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--ceiling", required=True)
    ap.add_argument("--int8-ceiling", help="tfm-int8-ceiling, for the int8 workloads' share")
    ap.add_argument("--bandwidth", help="tfm-read-bandwidth, for W7's limit")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workloads",
                    default="w1,w2,w3,w4,w5,w6,w4-bf16,w7,w8-1k,w8-4k,w9,w10,"
                    "w1-i8,w2-i8,w9-i8,w1-q8,w2-q8,w7-i4,w10-i4,w7-i4a4,w10-i4a4,lengths,w5-dp",
                    help="w5 trains w4 (no ONNX Runtime peer: it runs inference "
                    "graphs); w6 and w4-bf16 are w2 and w4 compiled with "
                    "--dtype=bf16 (tfm only); "
                    "lengths: w1 from one artifact for sequence=1..512; "
                    "w5-dp: w5 in 1 process of 2 threads against 2 "
                    "processes of 1 thread (mpirun)")
    ap.add_argument("--skip", default="")
    args = ap.parse_args()
    workloads = args.workloads.split(",")
    decoders = [w for w in ("w7", "w10", "w7-i4", "w10-i4", "w7-i4a4", "w10-i4a4")
                if w in workloads]
    lengths = "lengths" in workloads
    data_parallel = "w5-dp" in workloads
    workloads = [w for w in workloads if w not in decoders + ["lengths", "w5-dp"]]
    if decoders and not args.bandwidth:
        ap.error("W7 and W10 need --bandwidth")
    skip = set(filter(None, args.skip.split(",")))
    os.makedirs(args.out, exist_ok=True)

    blas = "skipped"
    if "torch" not in skip:
        # Debian's PyTorch takes whichever BLAS the alternatives system
        # gives; the reference BLAS would make its column meaningless.
        blas = run(["/usr/bin/python3", os.path.join(HERE, "torch_blas.py")],
                   env=TORCH_ENV).strip()
        log(f"PyTorch's BLAS: {blas}")
        if blas.startswith("reference"):
            log("PyTorch runs on the reference BLAS, about 1% of this machine's "
                "GEMM rate: no PyTorch column (install libopenblas0-openmp, which "
                "./tfm.sh bench does)")
            skip.add("torch")
            blas = "reference BLAS: column left out"
    log("exporting the workloads")
    run(["/usr/bin/python3", os.path.join(HERE, "export_workloads.py"), args.out])
    for kind, of in (("int8", INT8_OF), ("int4", INT4_OF), ("int4a4", INT4A4_OF)):
        sources = list(dict.fromkeys(of[w] for w in workloads + decoders if w in of))
        if sources:
            log(f"quantizing {', '.join(sources)} ({kind})")
            run(["/usr/bin/python3", os.path.join(HERE, "quantize_workloads.py"), kind,
                 args.out] + sources)
    if "ort" not in skip and not ensure_ort(args.out):
        log("ONNX Runtime is not available; its column stays empty")
        skip.add("ort")

    flops, compile_s, peak_mb, sos = {}, {}, {}, {}
    for w in workloads:
        # W6 and W4-BF16 have their linear layers in bf16; W5 trains W4.
        source = {**BF16_OF, **{q: INT8_OF[q] for q in QUANTIZED_BY_TFM},
                  "w5": "w4"}.get(w, w)
        model = os.path.join(args.out, f"{source}.onnx")
        # A quantized workload does the float one's products, in int8.
        flops[w] = json.loads(run([args.tfmc, "inspect",
                                   os.path.join(args.out, f"{INT8_OF.get(w, source)}.onnx"),
                                   "--json"]))["gemm_flops"]
        if w == "w5":
            # The backward pass has two GEMMs for each forward one (the
            # gradients of both operands), PERFORMANCE.md's accounting.
            flops[w] *= 3
        sos[w] = os.path.join(args.out, f"{w}.so")
        log(f"compiling {w}")
        compile_s[w], peak_mb[w] = compile_peak(
            [args.tfmc, "compile", *COMPILE_CPU, model, "-o", sos[w]] +
            (["--dtype=bf16"] if w in BF16_OF else []) +
            (["--quantize=int8", "--quantize-check=false"]
             if w in QUANTIZED_BY_TFM else []) +
            (["--train", "--optimizer=adam", "--lr=1e-3"] if w == "w5" else []))
    bf16_error = {}
    for w in (w for w in workloads if w in BF16_OF):
        # bf16 against tfm's own f32 result on the same random input.
        source = BF16_OF[w]
        case = os.path.join(args.out, f"{source}-f32-case")
        run([args.tfmc, "compile", *COMPILE_CPU, os.path.join(args.out, f"{source}.onnx"), "-o",
             os.path.join(args.out, f"{source}-f32.so")])
        run([args.tfmc, "run", os.path.join(args.out, f"{source}-f32.so"),
             "--output-dir", case])
        # The criterion is normwise (the relative l2 error): through W4's
        # twelve layers a few elements of 262144 differ by more than 1e-2.
        out = run([args.tfmc, "run", sos[w], "--test-data-dir", case,
                   "--rtol", "1", "--atol", "1"])
        bf16_error[w] = max(float(part.split(":")[0])
                            for part in out.split("rel l2 error ")[1:])

    int8_accuracy = {w: int8_error(args, w, sos.get(INT8_OF[w]))
                     for w in workloads if w in INT8_OF}

    node_env = dict(os.environ, NODE_PATH=os.path.join(args.out, "node_modules"))
    times = {(s, w): [] for s in ("tfm", "ort", "torch") for w in workloads}
    ceilings, int8_ceilings = [], []
    measure_int8 = args.int8_ceiling and any(w in INT8_OF for w in workloads)
    for r in range(args.rounds):
        log(f"round {r + 1} of {args.rounds}")
        ceilings.append(float(run([args.ceiling, "5"])))
        if measure_int8:
            int8_ceilings.append(float(run([args.int8_ceiling, "5"])))
        for w in workloads:
            if w == "w5":
                times[("tfm", w)].append(train_step_ms(args.tfmc, sos[w], args.out, REPS[w]))
            else:
                out = run([args.tfmc, "run", sos[w], "--threads", "2", "--bench",
                           str(REPS[w])])
                median = [l for l in out.splitlines() if l.startswith("bench:")][0]
                times[("tfm", w)].append(float(median.split("median ")[1].split(" ms")[0]))
            if w in BF16_OF:
                continue  # bf16 is compared with tfm's own f32 model
            if "ort" not in skip and w != "w5":  # ONNX Runtime does not train
                times[("ort", w)].append(float(run(
                    ["node", os.path.join(HERE, "ort_peer.js"),
                     os.path.join(args.out, f"{QUANTIZED_BY_TFM.get(w, w)}.onnx"),
                     str(REPS[w])], env=node_env)))
            if "torch" not in skip:
                times[("torch", w)].append(float(run(
                    ["/usr/bin/python3", os.path.join(HERE, "torch_peer.py"),
                     QUANTIZED_BY_TFM.get(w, w), str(REPS[w])], env=TORCH_ENV)))

    ceiling = statistics.median(ceilings)
    int8_ceiling = statistics.median(int8_ceilings) if int8_ceilings else None
    med = {k: statistics.median(v) if v else None for k, v in times.items()}

    def ms(v):
        return f"{v:.3f}" if v is not None and v < 1 else (f"{v:.2f}" if v else "—")

    def pct(w, v):
        top = int8_ceiling if w in INT8_OF else ceiling
        return f"{flops[w] / (v * 1e6) / top * 100:.0f}%" if v and top else "—"

    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else "—"

    lines = [
        f"Measured {datetime.date.today().isoformat()} on {host()}; {args.rounds} rounds, "
        "2 threads; "
        f"oneDNN sgemm ceiling {ceiling:.0f} GFLOP/s (median of the rounds: "
        f"{min(ceilings):.0f}–{max(ceilings):.0f})"
        + (f"; int8 ceiling (oneDNN's u8·s8→s32 GEMM, the share of the -I8 rows) "
           f"{int8_ceiling:.0f} GOP/s" if int8_ceiling else "")
        + f". PyTorch's BLAS: {blas}, with "
        + (f"OPENBLAS_CORETYPE={TORCH_ENV['OPENBLAS_CORETYPE']}." if COMPILE_CPU else
         f"{' and '.join(PINNING)} unset (its best kernels)."),
        "",
        "| workload | GFLOP | tfm ms | ONNX Runtime ms | PyTorch ms | tfm / ORT | tfm / PyTorch "
        "| tfm % of ceiling | ORT % | PyTorch % | target | tfm compile s | compile peak MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    if not workloads:
        del lines[1:]  # only the tables below
    for w in workloads:
        t, o, p = med[("tfm", w)], med[("ort", w)], med[("torch", w)]
        if w in BF16_OF:
            source = BF16_OF[w].upper()
            f32 = med.get(("tfm", BF16_OF[w]))
            speedup = f"{f32 / t:.2f}× tfm's f32 {source}" if f32 else "—"
            lines.append(
                f"| {w.upper()}: {source} with bf16 linear layers (f32 accumulation) | "
                f"{flops[w] / 1e9:.3g} | {ms(t)} | — | — | — | — | {pct(w, t)} | — | — | "
                f"{BF16_TARGET[w]}: {speedup}, rel. l2 error {bf16_error[w]:.2g}"
                f"{'' if bf16_error[w] <= 1e-2 else ' (over 1e-2)'} | "
                f"{compile_s[w]:.2f} | {peak_mb[w]:.0f} |")
            continue
        target = TARGETS[w]
        if w in INT8_OF:
            f32 = med.get(("tfm", INT8_OF[w]))
            error, agree = int8_accuracy[w]
            target += (f": {f32 / t:.2f}× tfm's f32" if f32 else "") + \
                (f", {o / t:.2f}× ORT" if o else "") + \
                f"; rel. l2 error {error:.2g} against f32, argmax agreement {agree:.1%}"
        if w == "w9":
            load, session = session_ms(args.tfmc, sos[w])
            target += f": load {load:.0f} ms, session {session:.0f} ms"
        lines.append(
            f"| {w.upper()}: {DESCRIPTION[w]} | {flops[w] / 1e9:.3g} | {ms(t)} | {ms(o)} | "
            f"{ms(p)} | {ratio(t, o)} | {ratio(t, p)} | {pct(w, t)} | {pct(w, o)} | "
            f"{pct(w, p)} | {target} | {compile_s[w]:.2f} | {peak_mb[w]:.0f} |")
    for name in decoders:
        lines += [""] + decode_table(args, skip, node_env, name,
                                     DECODED.get({**INT4_OF, **INT4A4_OF}.get(name, name)))
    if lengths:
        lines += [""] + lengths_table(args)
    if data_parallel:
        lines += [""] + data_parallel_table(args, skip)
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
