"""Compiling and running real models from Python, against outputs PyTorch
computed (the test data stored with each model), through tfm.compile and
through tfm.InferenceSession."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tfm
from conftest import SOURCE, onnx_test_data

MODELS = os.path.join(SOURCE, "test", "models")
FAMILIES = ["encoder_layer", "decoder_layer", "transformer", "gpt", "bert",
            "packed_mha"]


def test_the_bundled_example_against_pytorch():
    model = os.path.join(SOURCE, "examples", "models", "encoder_layer.mlir")
    inputs, expected = onnx_test_data(
        os.path.join(SOURCE, "examples", "models", "encoder_layer_data"))
    module = tfm.compile(model, fusion_report=True)
    kinds = module.fusion_report["kinds"]
    assert kinds["qkv"] == {"fused": 1, "missed": 0}
    out = module.session(threads=2).run(inputs)
    (y,) = out.values()
    np.testing.assert_allclose(y, expected[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_inference_session_on_the_exported_families(family):
    folder = os.path.join(MODELS, f"{family}_opset13")
    data = os.path.join(folder, "test_data_set_0")
    inputs, expected = onnx_test_data(data)
    session = tfm.InferenceSession(os.path.join(folder, "model.onnx"),
                                   shapes=_shapes(family))
    names = [i.name for i in session.get_inputs()]
    assert len(names) == len(inputs)
    outputs = session.run(None, dict(zip(names, inputs)))
    assert [o.name for o in session.get_outputs()][: len(outputs)]
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _shapes(family):
    # bert_opset13 has dimension symbols; the test data fixes them.
    if family == "bert":
        inputs, _ = onnx_test_data(os.path.join(MODELS, "bert_opset13",
                                           "test_data_set_0"))
        b, s = inputs[0].shape
        return {"batch": b, "sequence": s}
    return None


def test_inference_session_describes_like_onnx_runtime():
    session = tfm.InferenceSession(os.path.join(MODELS, "gpt_opset13",
                                                "model.onnx"))
    (i,) = session.get_inputs()
    assert (i.name, i.type, i.shape) == ("input_ids", "tensor(int64)", [2, 8])
    (o,) = session.get_outputs()
    assert (o.name, o.type, o.shape) == ("output", "tensor(float)", [2, 8, 50])
    with pytest.raises(tfm.NotFound):
        session.run(["logits"], {"input_ids": np.zeros((2, 8), np.int64)})


def test_the_artifact_is_cached_by_the_models_hash():
    path = os.path.join(MODELS, "gpt_opset13", "model.onnx")
    with open(path, "rb") as f:
        data = f.read()
    first = tfm.InferenceSession(data)
    stamp = os.path.getmtime(first.artifact_path)
    second = tfm.InferenceSession(path)  # the same bytes, from the file
    assert second.artifact_path == first.artifact_path
    assert os.path.getmtime(second.artifact_path) == stamp
    # Other options, another artifact.
    third = tfm.InferenceSession(data, dtype="bf16")
    assert third.artifact_path != first.artifact_path


def test_python_m_tfm_is_tfmc(tmp_path):
    model = os.path.join(MODELS, "gpt_opset13", "model.onnx")
    so = tmp_path / "gpt.so"
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "tfm", "compile", model, "-o",
                        str(so), "--quiet"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    mine = subprocess.run([sys.executable, "-m", "tfm", "inspect", str(so)],
                          capture_output=True, text=True, env=env)
    theirs = subprocess.run([tfm.tfmc_path(), "inspect", str(so)],
                            capture_output=True, text=True)
    assert mine.returncode == 0 and mine.stdout == theirs.stdout
    assert "entry infer" in mine.stdout
    usage = subprocess.run([sys.executable, "-m", "tfm", "run", "--threads=-1",
                            str(so)], capture_output=True, text=True, env=env)
    assert usage.returncode == 2  # the CLI contract's usage error


OPSETS = os.path.join(SOURCE, "test", "Frontends", "ONNX", "opsets")
# Their expected outputs are ONNX Runtime's (make_opset_models.py), but for
# the uint8 case, whose are numpy's.
ORT_CASES = sorted(c for c in os.listdir(OPSETS)
                   if os.path.isdir(os.path.join(OPSETS, c))
                   and c != "uint8_data_movement_13")


@pytest.mark.parametrize("case", ORT_CASES)
def test_inference_session_agrees_with_onnx_runtime(case):
    inputs, expected = onnx_test_data(os.path.join(OPSETS, case,
                                                   "test_data_set_0"))
    session = tfm.InferenceSession(os.path.join(OPSETS, case, "model.onnx"))
    feed = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
    outputs = session.run(None, feed)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
