"""Paths the tests share: the source tree, the build folder (the models the
runtime's tests compile, the stand-in models), and .pb tensors."""

import os

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

SOURCE = os.environ.get("TFM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("TFM_BUILD_DIR") or os.path.join(SOURCE, "build")
UNITTESTS = os.path.join(BUILD, "test", "unittests")
FAKE = os.path.join(UNITTESTS, "fake_models")


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return onnx.numpy_helper.to_array(t)


def onnx_test_data(folder):
    """The inputs and outputs of an ONNX test-data folder, in order."""
    def numbered(prefix):
        out, i = [], 0
        while os.path.exists(os.path.join(folder, f"{prefix}_{i}.pb")):
            out.append(read_pb(os.path.join(folder, f"{prefix}_{i}.pb")))
            i += 1
        return out
    return numbered("input"), numbered("output")


def built(path):
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: build the project first")
    return path
