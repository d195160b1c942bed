#!/usr/bin/env python3
"""Compiles the bundled encoder layer and runs it from Python, against the
output PyTorch computed for the same input.

    PYTHONPATH=build/python python3 examples/python/run_model.py
"""
import os
import sys
import time

import numpy as np
import onnx.numpy_helper

import tfm

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "models")


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return onnx.numpy_helper.to_array(t)


def main():
    module = tfm.compile(os.path.join(MODELS, "encoder_layer.mlir"),
                         fusion_report=True)
    print(module)
    for kind, n in module.fusion_report["kinds"].items():
        print(f"  {kind:20} fused {n['fused']}, missed {n['missed']}")
    entry = module.entry("infer")
    print("inputs: ", entry.inputs)
    print("outputs:", entry.outputs)

    data = os.path.join(MODELS, "encoder_layer_data")
    inputs = [read_pb(os.path.join(data, f"input_{i}.pb"))
              for i in range(len(entry.inputs))]
    expected = read_pb(os.path.join(data, "output_0.pb"))

    session = module.session(threads=2)
    (output,) = session.run(inputs).values()
    error = float(np.max(np.abs(output - expected)))
    print(f"largest difference from PyTorch: {error:.2e}")

    runs = 200
    start = time.perf_counter()
    for _ in range(runs):
        session.run(inputs)
    print(f"{(time.perf_counter() - start) / runs * 1e3:.3f} ms per run")
    return 0 if error < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
