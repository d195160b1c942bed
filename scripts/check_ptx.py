#!/usr/bin/python3
"""Compiles every test case (the exported models, their training steps, the
op fixtures and the runnable ONNX node tests) for the CUDA target and
assembles its PTX with a CUDA toolkit's ptxas: a check that the PTX is valid
for the architecture, for machines that have a toolkit (CI does not; tfm
needs none). Every kernel must also keep its values in registers: a kernel
that spills to local memory (ptxas -v) fails the module.

With --bench, the GPU pack's bench workloads instead (W1-W4, BERT-base, the
attention and GEMM ones: the sizes at which the tensor-core kernels run),
exported here by scripts/gpu_workloads.py (which needs python3-torch).

usage: check_ptx.py --tfmc TFMC [--ptxas PTXAS] [--arch sm_90] [--dtype f16]
                    [--bench]
Needs Debian's python3-onnx (run it with /usr/bin/python3)."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "conformance"))
import run_node_suite as suite  # noqa: E402


def cases(tfmc):
    models = os.path.join(ROOT, "test", "models")
    for name in sorted(os.listdir(models)):
        path = os.path.join(models, name, "model.onnx")
        if os.path.isfile(path):
            shape = (["--shape", "input_ids=2x8", "--shape", "attention_mask=2x8"]
                     if name.startswith("bert") else [])
            yield name, path, shape
    training = os.path.join(ROOT, "test", "models", "training")
    for name in sorted(os.listdir(training)):
        path = os.path.join(training, name, "model.onnx")
        if os.path.isfile(path):
            yield "train/" + name, path, ["--train", "--optimizer=adam"]
    fixtures = os.path.join(ROOT, "test", "fixtures", "reference")
    for name in sorted(os.listdir(fixtures)):
        path = os.path.join(fixtures, name, "model.mlir")
        if os.path.isfile(path):
            yield name, path, []
    if not os.path.isdir(suite.DEFAULT_DATA):
        return
    supported = set(subprocess.run([tfmc, "--list-onnx-ops"], check=True,
                                   capture_output=True, text=True).stdout.split())
    expected = suite.load_expected(os.path.join(ROOT, "test", "conformance",
                                                "node-expected-failures.txt"))
    for name in sorted(os.listdir(suite.DEFAULT_DATA)):
        path = os.path.join(suite.DEFAULT_DATA, name)
        if not os.path.isfile(os.path.join(path, "model.onnx")) or name in expected:
            continue
        ops, opset, unsupported = suite.classify(path, supported)
        if unsupported or not 13 <= opset <= 17:
            continue
        # Shape operands bound to their test data, as `tfmc run` does.
        graph = onnx.load(os.path.join(path, "model.onnx"), load_external_data=False).graph
        inits = {t.name for t in graph.initializer}
        names = [i.name for i in graph.input if i.name not in inits]
        yield name, os.path.join(path, "model.onnx"), ("bind", path, names)


def bench_cases(tmp):
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import gpu_workloads as W
    for name in W.WORKLOADS:
        path = os.path.join(tmp, name + ".onnx")
        W.export(name, path)
        yield "bench/" + name, path, []


def kernels(ptxas_log):
    """Each kernel's registers and spilled bytes, from ptxas -v's log."""
    found, name = {}, None
    for line in ptxas_log.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            name = m.group(1)
            found.setdefault(name, [0, 0])
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            found[name][1] = int(m.group(1)) + int(m.group(2))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            found[name][0] = int(m.group(1))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--ptxas", default="ptxas")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--dtype", default="f32",
                    help="what the GEMMs multiply in (f16: tensor cores)")
    ap.add_argument("--bench", action="store_true",
                    help="the bench workloads instead of the test cases")
    args = ap.parse_args()
    ok, failed, f32_only = 0, [], 0
    count, most = 0, (0, "")
    with tempfile.TemporaryDirectory() as tmp:
        ptx = os.path.join(tmp, "kernels.ptx")
        for name, model, extra in (bench_cases(tmp) if args.bench
                                   else cases(args.tfmc)):
            # Training compiles in f32 only (tfmc refuses --train with a
            # narrower --dtype); the f32 sweep covers those cases.
            if "--train" in extra and args.dtype != "f32":
                f32_only += 1
                continue
            base = ["--target=cuda", "--gpu-arch=" + args.arch, "--dtype=" + args.dtype]
            flags = base + ["--emit=ptx", "-o", ptx]
            if extra and extra[0] == "bind":
                _, path, names = extra
                p = suite.compile_ptx(args.tfmc, path, base + ["-o", ptx])
            else:
                p = subprocess.run([args.tfmc, "compile", model] + flags + extra,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if p.returncode != 0:
                failed.append(f"{name}: compile: {p.stdout.decode().strip()[-200:]}")
                continue
            if os.path.getsize(ptx) == 0:  # no kernels at all
                ok += 1
                continue
            q = subprocess.run([args.ptxas, "-v", "-arch=" + args.arch, ptx,
                                "-o", os.devnull], capture_output=True, text=True)
            if q.returncode != 0:
                failed.append(f"{name}: ptxas: {q.stderr.strip()[-300:]}")
                continue
            found = kernels(q.stdout + q.stderr)
            spilled = [f"{k} ({b} bytes)" for k, (_, b) in found.items() if b]
            count += len(found)
            for k, (r, _) in found.items():
                most = max(most, (r, f"{name}: {k}"))
            if spilled:
                failed.append(f"{name}: spills: {', '.join(spilled)}")
            else:
                ok += 1
    for f in failed:
        print("FAIL", f)
    skipped = f" ({f32_only} training steps left to the f32 sweep)" if f32_only else ""
    print(f"ptxas {args.arch} ({args.dtype}): {ok} modules assemble without "
          f"spills, {len(failed)} do not{skipped}; {count} kernels, at most "
          f"{most[0]} registers ({most[1]})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
