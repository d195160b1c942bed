#!/usr/bin/env python3
"""Runs every exported model family of test/models (model.onnx and PyTorch's
outputs in test_data_set_0) through `tfmc run` with the given flags and
checks the outputs (rtol 1e-4, atol 1e-5).

usage: run_models.py TFMC MODELS_DIR [--skip=PREFIX ...]
                     [--compile=FLAG ...] [TFMC_RUN_FLAGS...]

Folders whose names start with a --skip prefix are left out (a family known
not to import, which its own test checks). With --compile flags, each model
is first compiled by `tfmc compile` with them (into a temporary folder), and
the artifact is run.
"""
import os
import subprocess
import sys
import tempfile

tfmc, root = sys.argv[1:3]
skips = [a[len("--skip="):] for a in sys.argv[3:] if a.startswith("--skip=")]
compile_flags = [a[len("--compile="):] for a in sys.argv[3:]
                 if a.startswith("--compile=")]
flags = [a for a in sys.argv[3:]
         if not a.startswith("--skip=") and not a.startswith("--compile=")]
scratch = tempfile.TemporaryDirectory()
passed, failures = 0, []
for name in sorted(os.listdir(root)):
    folder = os.path.join(root, name)
    if not os.path.isfile(os.path.join(folder, "model.onnx")) or \
            any(name.startswith(p) for p in skips):
        continue
    # BERT's batch and sequence are dynamic; its test data is 2x8.
    shape = (["--shape", "input_ids=2x8", "--shape", "attention_mask=2x8"]
             if name.startswith("bert") else [])
    model = os.path.join(folder, "model.onnx")
    if compile_flags:
        artifact = os.path.join(scratch.name, name + ".so")
        p = subprocess.run([tfmc, "compile", model, "-o", artifact] + shape +
                           compile_flags, capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"{name}: compile: exit {p.returncode}: {p.stderr}")
            continue
        model, shape = artifact, []
    p = subprocess.run([tfmc, "run", model, "--test-data-dir",
                        os.path.join(folder, "test_data_set_0")] + shape + flags,
                       capture_output=True, text=True)
    if p.returncode == 0:
        passed += 1
    else:
        failures.append(f"{name}: exit {p.returncode}: {p.stdout}{p.stderr}")
for f in failures:
    print("FAIL", f)
print(f"{passed} models match PyTorch, {len(failures)} do not")
sys.exit(1 if failures else 0)
