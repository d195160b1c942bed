#!/usr/bin/env python3
"""Trains every fixture model of test/models/training with `tfmc train` and
compares the loss of each step with PyTorch's (trajectory.json, made by
make_training_fixtures.py), relative tolerance 1e-3 per step.

usage: check_trajectories.py TFMC TRAINING_DIR [--alternate-library] [tfmc options]

With --alternate-library, every other run turns the GEMM library off
(TFM_CUBLASLT=off): a GPU model's GEMMs then run its generated kernels, so
one pass covers both paths of each model's forward and backward GEMMs (its
two runs differ only in the optimizer).
"""
import json
import os
import subprocess
import sys

RTOL = 1e-3


def main():
    tfmc, root = sys.argv[1], sys.argv[2]
    extra = sys.argv[3:]
    alternate = "--alternate-library" in extra
    if alternate:
        extra.remove("--alternate-library")
    matched = failed = runs = 0
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if not os.path.isfile(os.path.join(folder, "trajectory.json")):
            continue
        with open(os.path.join(folder, "trajectory.json")) as f:
            fixture = json.load(f)
        for run in fixture["runs"]:
            cmd = [tfmc, "train", os.path.join(folder, "model.onnx"),
                   "--data", os.path.join(folder, "data"),
                   "--steps", str(fixture["steps"]),
                   "--optimizer=" + run["optimizer"], "--lr=%r" % run["lr"],
                   "--label-smoothing=%r" % run["label_smoothing"]] + extra
            env = dict(os.environ)
            off = alternate and runs % 2 == 1
            if off:
                env["TFM_CUBLASLT"] = "off"
            runs += 1
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            got = [float(line.split()[3]) for line in r.stdout.splitlines()
                   if line.startswith("step ")]
            label = f"{name} {run['optimizer']}" + (
                " (library off)" if off else "")
            if r.returncode != 0 or len(got) != len(run["losses"]):
                print(f"FAIL {label}: exit {r.returncode}\n{r.stderr}")
                failed += 1
                continue
            worst = max(abs(a - b) / abs(b) for a, b in zip(got, run["losses"]))
            ok = worst <= RTOL
            print(f"{'ok  ' if ok else 'FAIL'} {label}: {len(got)} steps, "
                  f"largest relative error {worst:.2e}")
            matched += ok
            failed += not ok
    print(f"{matched} trajectories match PyTorch, {failed} do not")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
