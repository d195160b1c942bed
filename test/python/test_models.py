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


EXTERNAL = os.path.join(SOURCE, "test", "Frontends", "ONNX", "Inputs")
GPT = os.path.join(MODELS, "gpt_opset13", "model.onnx")


def test_inference_session_compiles_from_the_path_with_external_data(tmp_path):
    # The model keeps its weights in external_weights.bin beside it: it is
    # compiled where it lies, not from a copy of its bytes elsewhere.
    for f in ("external.onnx", "external_weights.bin"):
        with open(os.path.join(EXTERNAL, f), "rb") as src:
            (tmp_path / f).write_bytes(src.read())
    model = str(tmp_path / "external.onnx")
    inputs, expected = onnx_test_data(os.path.join(EXTERNAL, "external_case"))
    first = tfm.InferenceSession(model)
    (got,) = first.run(None, {"x": inputs[0]})
    np.testing.assert_allclose(got, expected[0], rtol=1e-5, atol=1e-6)
    # Other weights in the side file (the model's bytes unchanged): another
    # artifact, with other outputs.
    weights = tmp_path / "external_weights.bin"
    weights.write_bytes(bytes(reversed(weights.read_bytes())))
    second = tfm.InferenceSession(model)
    assert second.artifact_path != first.artifact_path
    (other,) = second.run(None, {"x": inputs[0]})
    assert not np.allclose(other, got)


def test_inference_session_loads_a_library_and_takes_providers(tmp_path):
    so = tmp_path / "gpt.so"
    tfm.compile(GPT, output=so)
    session = tfm.InferenceSession(str(so), providers=["CPUExecutionProvider"])
    assert session.artifact_path == str(so)
    assert session.get_providers() == ["CPUExecutionProvider"]
    (y,) = session.run(None, {"input_ids": np.zeros((2, 8), np.int64)})
    assert y.shape == (2, 8, 50)
    with pytest.raises(tfm.InvalidArgument,
                       match="unknown provider 'TensorrtExecutionProvider'"):
        tfm.InferenceSession(str(so), providers=["TensorrtExecutionProvider"])
    available = tfm.get_available_providers()
    assert available[-1] == "CPUExecutionProvider"
    assert set(available) <= {"CUDAExecutionProvider", "CPUExecutionProvider"}


def test_session_options_threads_and_profiling(tmp_path):
    options = tfm.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = tfm.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "gpt")
    with pytest.raises(AttributeError):
        options.intra_op_threads = 1  # misspelled: never dropped silently
    session = tfm.InferenceSession(GPT, options)
    assert session.get_session_options() is options
    session.run(None, {"input_ids": np.zeros((2, 8), np.int64)})
    path = session.end_profiling()
    assert path.startswith(str(tmp_path / "gpt_")) and path.endswith(".json")
    with open(path) as f:
        assert '"traceEvents"' in f.read()
    assert tfm.InferenceSession(GPT).end_profiling() == ""


def test_inference_session_refuses_an_array_of_another_dtype():
    session = tfm.InferenceSession(GPT)
    with pytest.raises(tfm.InvalidArgument,
                       match=r"input 'input_ids' is tensor\(int64\); the "
                             r"array given is tensor\(int32\)"):
        session.run(None, {"input_ids": np.zeros((2, 8), np.int32)})


BERT = os.path.join(MODELS, "bert_opset13", "model.onnx")


@pytest.mark.parametrize("shapes", [
    {"input_ids": (2, 8), "attention_mask": (2, 8)},  # inputs' shapes
    {"input_ids": [2, 8], "attention_mask": "2x8"},
    {"batch": 2, "sequence": 8},                       # symbols
    {"batch": 2, "sequence": "8"},
])
def test_every_documented_form_of_a_fixed_shape(shapes):
    module = tfm.compile(BERT, shapes=shapes)
    ports = module.entry("infer").inputs
    assert [(p.name, p.shape) for p in ports] == [("input_ids", (2, 8)),
                                                  ("attention_mask", (2, 8))]


@pytest.mark.parametrize("sequence", [(4, 6), "4..6", range(4, 7)])
def test_every_documented_form_of_a_range(sequence):
    module = tfm.compile(BERT, shapes={"batch": 1, "sequence": sequence})
    (ids, _) = module.entry("infer").inputs
    assert (ids.shape, ids.min_shape, ids.max_shape) == ((1, None), (1, 4),
                                                         (1, 6))


def test_inference_session_names_varying_sizes_and_gives_the_models_metadata(
        tmp_path):
    session = tfm.InferenceSession(BERT, shapes={"batch": 1,
                                                 "sequence": (4, 6)})
    ids = session.get_inputs()[0]
    assert (ids.name, ids.shape) == ("input_ids", [1, "sequence"])
    meta = session.get_modelmeta()
    # What the exporter wrote into the model (read independently here).
    import onnx
    proto = onnx.load(BERT, load_external_data=False)
    assert (meta.producer_name, meta.graph_name, meta.version) == (
        proto.producer_name, proto.graph.name, proto.model_version)
    assert meta.producer_name == "pytorch"
    # A compiled library keeps none of it.
    so = tmp_path / "gpt.so"
    tfm.compile(GPT, output=so)
    assert tfm.InferenceSession(str(so)).get_modelmeta().producer_name == ""


def test_io_binding_runs_bound_inputs_into_bound_outputs():
    session = tfm.InferenceSession(GPT)
    ids = np.arange(16, dtype=np.int64).reshape(2, 8) % 50
    (want,) = session.run(None, {"input_ids": ids})
    binding = session.io_binding()
    with pytest.raises(tfm.FailedPrecondition):
        binding.get_outputs()
    binding.bind_cpu_input("input_ids", ids)
    binding.bind_output("output")
    with pytest.raises(tfm.NotFound):
        binding.bind_output("logits")
    session.run_with_iobinding(binding)
    (got,) = binding.copy_outputs_to_cpu()
    np.testing.assert_array_equal(got, want)
    binding.bind_input("input_ids", "cpu", 0, np.int64, ids.shape, ids)
    session.run_with_iobinding(binding)
    np.testing.assert_array_equal(binding.get_outputs()[0], want)
    with pytest.raises(tfm.InvalidArgument):
        binding.bind_input("input_ids", "cuda", 0, None, None, 0)


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
