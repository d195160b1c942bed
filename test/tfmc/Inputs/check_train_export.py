#!/usr/bin/env python3
"""Checks resuming and exporting a compiled training run with `tfmc train`:

  A  trains 7 steps straight through;
  B  trains 4 steps, saving a checkpoint and exporting the ONNX model;
  C  resumes B's checkpoint for 3 more steps: its losses must be A's 5..7;
  D  trains the exported model with lr 0: its loss is A's step 5.

usage: check_train_export.py TFMC MODEL_DIR WORK
"""
import os
import subprocess
import sys


def losses(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL:", " ".join(cmd), "\n", r.stderr)
        sys.exit(1)
    return [float(l.split()[3]) for l in r.stdout.splitlines() if l.startswith("step ")]


def main():
    tfmc, model_dir, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    model, data = os.path.join(model_dir, "model.onnx"), os.path.join(model_dir, "data")
    ck, exported = os.path.join(work, "ck"), os.path.join(work, "trained.onnx")
    flags = ["--optimizer=adam", "--lr=0.01"]
    a = losses([tfmc, "train", model, "--data", data, "--steps", "7"] + flags)
    b = losses([tfmc, "train", model, "--data", data, "--steps", "4", "--checkpoint", ck,
                "--export-onnx", exported] + flags)
    c = losses([tfmc, "train", model, "--data", data, "--steps", "3", "--resume", ck] + flags)
    d = losses([tfmc, "train", exported, "--data", data, "--steps", "1", "--optimizer=sgd",
                "--lr=0"])
    print("straight", a)
    print("resumed", b + c)
    print("exported", d)
    assert b == a[:4], "the first steps differ"
    assert c == a[4:], "resuming does not continue the run exactly"
    assert abs(d[0] - a[4]) <= 1e-6 * abs(a[4]), "the exported model has other weights"
    leftovers = [f for f in os.listdir(work) if ".tmp" in f]
    assert not leftovers, f"temporary files left: {leftovers}"
    print("resume and export agree")


if __name__ == "__main__":
    main()
