#!/usr/bin/python3
"""Runs the ONNX node conformance suite through `tfmc run`.

With --mode=reference every test runs in the reference interpreter; with
--mode=compiled it is compiled for the CPU (tfm-cpu-pipeline, model.so) and
run through the runtime; with --mode=gpu-schedule it is compiled for the CUDA
target with its kernels' schedule of blocks and threads run as serial loops
on the CPU (--gpu-schedule-on-cpu), which checks the GPU path's lowering and
indexing without a GPU, and compiled to PTX as well; --mode=gpu-schedule-reversed
runs that schedule with each grid's blocks and threads in descending order
(--reverse-grid), where a kernel whose threads read each other's writes, a
race on a GPU, gives another result; with --mode=cuda it runs on the GPU.

Every test whose ops the importer supports (`tfmc --list-onnx-ops`) and whose
opset lies in 7..21 runs (7 to 12 through the ONNX version converter), and must match its expected outputs, unless it is
listed with a reason in node-expected-failures.txt. A listed test that passes
is an error too, so the list stays true. With --table, writes the per-op
Markdown table for docs/conformance.md.

Needs Debian's python3-onnx (run it with /usr/bin/python3).
"""
import argparse
import collections
import concurrent.futures
import os
import re
import subprocess
import sys

import onnx

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"


def default_opset(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 0


def classify(path, supported):
    model = onnx.load(os.path.join(path, "model.onnx"), load_external_data=False)
    ops = sorted({n.op_type for n in model.graph.node})
    domains = {n.domain for n in model.graph.node} - {"", "ai.onnx"}
    unsupported = [op for op in ops if op not in supported] + sorted(domains)
    return ops, default_opset(model), unsupported


def run_one(tfmc, path, mode):
    flags = {"reference": ["--reference"], "compiled": [],
             "gpu-schedule": ["--device=cuda", "--gpu-schedule-on-cpu"],
             "gpu-schedule-reversed": ["--device=cuda", "--gpu-schedule-on-cpu",
                                       "--reverse-grid"],
             "cuda": ["--device=cuda"]}[mode]
    # Forwards, the GEMMs run through the library's stand-in (oneDNN for
    # cuBLASLt); backwards, as the generated kernels, whose races the
    # reversed grid shows.
    env = dict(os.environ)
    if mode == "gpu-schedule-reversed":
        env["TFM_CUBLASLT"] = "off"
    proc = subprocess.run(
        [tfmc, "run", os.path.join(path, "model.onnx")] + flags +
        ["--test-data-dir", os.path.join(path, "test_data_set_0")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
        env=env)
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if mode == "gpu-schedule" and proc.returncode == 0:
        # The schedule ran on the CPU; the kernels must also become PTX
        # (an op without an NVVM lowering fails only here).
        proc = compile_ptx(tfmc, path)
        lines = proc.stdout.decode(errors="replace").strip().splitlines()
    return proc.returncode, (lines[-1] if lines else "")


def compile_ptx(tfmc, path, flags=("--target=cuda", "-o", os.devnull)):
    """Compiles the test to PTX with `flags`, binding the shape operands the
    compiler asks for to their test data, as `tfmc run` does."""
    model = onnx.load(os.path.join(path, "model.onnx"), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    binds = []
    while True:
        proc = subprocess.run(
            [tfmc, "compile", os.path.join(path, "model.onnx"), "--emit=ptx"] +
            list(flags) + binds,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        ask = re.search(r"bind it with --bind (\S+)=FILE\.pb", proc.stdout.decode())
        if proc.returncode == 0 or not ask or ask.group(1) not in names or len(binds) > 8:
            return proc
        binds.append("--bind=%s=%s" % (ask.group(1), os.path.join(
            path, "test_data_set_0", "input_%d.pb" % names.index(ask.group(1)))))


def load_expected(path):
    expected = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(":")
            expected[name.strip()] = reason.strip()
    return expected


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--expected", required=True, help="expected failures")
    ap.add_argument("--mode", choices=["reference", "compiled", "gpu-schedule",
                                       "gpu-schedule-reversed", "cuda"],
                    default="reference")
    ap.add_argument("--table", help="write the per-op Markdown table here")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()

    if not os.path.isdir(args.data):
        print(f"conformance data not found at {args.data} "
              "(Debian package libonnx-testdata)")
        return 1
    supported = set(subprocess.run([args.tfmc, "--list-onnx-ops"], check=True,
                                   stdout=subprocess.PIPE).stdout.decode().split())
    expected = load_expected(args.expected)

    tests = sorted(d for d in os.listdir(args.data)
                   if os.path.isfile(os.path.join(args.data, d, "model.onnx")))
    runnable, skipped = [], collections.Counter()
    per_op = collections.defaultdict(lambda: collections.Counter())
    info = {}
    for name in tests:
        ops, opset, unsupported = classify(os.path.join(args.data, name), supported)
        info[name] = ops
        if unsupported:
            skipped["unsupported op"] += 1
            continue
        if not 7 <= opset <= 21:
            skipped[f"opset {opset}"] += 1
            for op in ops:
                per_op[op]["other opset"] += 1
            continue
        runnable.append(name)

    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as pool:
        futures = {pool.submit(run_one, args.tfmc, os.path.join(args.data, n),
                               args.mode): n
                   for n in runnable}
        for fut in concurrent.futures.as_completed(futures):
            results[futures[fut]] = fut.result()

    unexpected_fail, unexpected_pass, passed, xfailed = [], [], 0, 0
    for name in runnable:
        code, last = results[name]
        ok = code == 0
        for op in info[name]:
            per_op[op]["run"] += 1
            per_op[op]["passed" if ok else "expected failure"] += 1
        if ok:
            passed += 1
            if name in expected:
                unexpected_pass.append(name)
        else:
            if name in expected:
                xfailed += 1
            else:
                unexpected_fail.append(f"{name}: exit {code}: {last}")

    for line in unexpected_fail:
        print("FAIL", line)
    for name in unexpected_pass:
        print(f"UNEXPECTED PASS {name} (remove it from the expected failures)")
    stale = sorted(set(expected) - set(runnable))
    for name in stale:
        print(f"STALE {name} is listed as an expected failure but does not run")
    print(f"node suite ({args.mode}): {len(tests)} tests; {len(runnable)} run "
          f"(supported ops, opset 7-21): {passed} passed, {xfailed} expected "
          f"failures, {len(unexpected_fail)} unexpected failures; skipped: "
          + ", ".join(f"{v} {k}" for k, v in sorted(skipped.items())))

    if args.table:
        with open(args.table, "w") as f:
            f.write("| op | tests run | passed | expected failures | other opset |\n")
            f.write("| --- | ---: | ---: | ---: | ---: |\n")
            for op in sorted(per_op):
                c = per_op[op]
                f.write(f"| {op} | {c['run']} | {c['passed']} | "
                        f"{c['expected failure']} | {c['other opset']} |\n")
    bad = unexpected_fail or unexpected_pass or stale
    print(f"{passed} passed, "
          f"{len(unexpected_fail) + len(unexpected_pass) + len(stale)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
