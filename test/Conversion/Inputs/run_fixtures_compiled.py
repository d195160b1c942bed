"""Compiles every PyTorch fixture of the reference interpreter
(test/fixtures/reference/*/model.mlir) for the CPU and checks its outputs
against PyTorch's (rtol 1e-4, atol 1e-5), except those listed with a reason.
Further arguments go to `tfmc run`: `--device=cuda --gpu-schedule-on-cpu`
checks the CUDA target's schedule on the CPU, `--device=cuda` runs on a GPU.
Usage: run_fixtures_compiled.py TFMC FIXTURES_DIR [TFMC_RUN_FLAGS...]"""
import os
import subprocess
import sys

# Fixtures of ops the CPU backend does not lower, with the reason.
NOT_LOWERED = {}

tfmc, root = sys.argv[1:3]
flags = sys.argv[3:]
passed, failures = 0, []
for name in sorted(os.listdir(root)):
    case = os.path.join(root, name)
    if not os.path.isfile(os.path.join(case, "model.mlir")):
        continue
    p = subprocess.run([tfmc, "run", os.path.join(case, "model.mlir"),
                        "--test-data-dir", case] + flags, capture_output=True)
    ok = p.returncode == 0
    if name in NOT_LOWERED:
        if ok:
            failures.append(f"{name}: passes; remove it from NOT_LOWERED")
        continue
    if ok:
        passed += 1
    else:
        failures.append(f"{name}: {p.stdout.decode()}{p.stderr.decode()}")
for f in failures:
    print("FAIL", f)
print(f"{passed} fixtures match PyTorch compiled, {len(NOT_LOWERED)} not lowered, "
      f"{len(failures)} failures")
sys.exit(1 if failures else 0)
