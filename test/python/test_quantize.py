"""tfm.compile(quantize=...): a float model's linear layers quantized by tfm
itself, against numpy's quantization of the same weights, written here from
the schemes' definitions (quantize_dynamic's per-channel int8 with
DynamicQuantizeLinear on each input; MatMulNBits' asymmetric 4-bit blocks),
and the report's error against numpy's float result."""

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx import TensorProto, helper

import tfm

F32 = np.float32


def two_layer_model(rng):
    """x [4, 64] -> MatMul [64, 48] + b1 -> Relu -> Gemm (transB, [32, 48])
    + b2: the two forms a linear layer is exported in. The second layer's
    K (48) is not a multiple of the 32-wide blocks."""
    w1 = rng.standard_normal((64, 48)).astype(F32) * F32(0.2)
    b1 = rng.standard_normal(48).astype(F32) * F32(0.1)
    w2 = rng.standard_normal((32, 48)).astype(F32) * F32(0.2)
    b2 = rng.standard_normal(32).astype(F32) * F32(0.1)
    inits = [onnx.numpy_helper.from_array(a, n)
             for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m"], name="fc1"),
        helper.make_node("Add", ["m", "b1"], ["h"], name="fc1_bias"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], name="fc2",
                         transB=1),
    ]
    graph = helper.make_graph(
        nodes, "two_layers",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    # [N, K] weights, as the layers read them.
    return model, (w1.T.copy(), b1), (w2, b2)


def int8_layer(x, w, b, top):
    """quantize_dynamic's layer: w symmetric int8 per output feature
    (max |w| / top: 127, or 64 with reduce_range), x through
    DynamicQuantizeLinear (uint8 over its range widened to hold 0), the
    integer product scaled back, plus the bias."""
    ws = np.abs(w).max(axis=1) / F32(top)
    wq = np.clip(np.round(w / ws[:, None]), -top, top)
    lo, hi = min(F32(0), x.min()), max(F32(0), x.max())
    xs = F32((hi - lo) / F32(255))
    xz = np.clip(np.round(-lo / xs), 0, 255)
    xq = np.clip(np.round(x / xs) + xz, 0, 255)
    acc = (xq - xz).astype(np.float64) @ wq.T.astype(np.float64)
    return (acc * xs * ws + b).astype(F32)


def int4_layer(x, w, b, block):
    """MatMulNBits' asymmetric layer: per block of K, the range widened to
    hold 0, s = (max - min) / 15, z = round(-min / s), q = clamp(round(w /
    s) + z, 0, 15); x times the dequantized weight, plus the bias."""
    n, k = w.shape
    deq = np.empty_like(w)
    for start in range(0, k, block):
        blk = w[:, start:start + block]
        lo = np.minimum(blk.min(axis=1), 0)
        hi = np.maximum(blk.max(axis=1), 0)
        s = ((hi - lo) / F32(15)).astype(F32)
        z = np.clip(np.round(-lo / s), 0, 15)
        q = np.clip(np.round(blk / s[:, None]) + z[:, None], 0, 15)
        deq[:, start:start + block] = (q - z[:, None]) * s[:, None]
    return (x.astype(np.float64) @ deq.T.astype(np.float64) + b).astype(F32)


def has_vnni():
    """Whether this CPU multiplies u8 · s8 without 16-bit pair sums, for
    which tfm keeps int8 weights within 7 bits (docs/quantization.md)."""
    with open("/proc/cpuinfo") as f:
        flags = f.read().split()
    return "avx512_vnni" in flags or "avx_vnni" in flags


def f32_layers(x, l1, l2):
    h = np.maximum(x @ l1[0].T + l1[1], 0)
    return h @ l2[0].T + l2[1]


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_quantize_matches_the_schemes_definition(tmp_path, mode):
    rng = np.random.default_rng(7)
    model, l1, l2 = two_layer_model(rng)
    path = tmp_path / "two_layers.onnx"
    onnx.save(model, str(path))
    x = rng.standard_normal((4, 64)).astype(F32)
    x_pb = tmp_path / "x.pb"
    x_pb.write_bytes(onnx.numpy_helper.from_array(x, "x").SerializeToString())

    module = tfm.compile(str(path), quantize=mode, input=f"x={x_pb}")
    (got,) = module.session(threads=2).run([x]).values()
    report = module.quantization_report
    if mode == "int8":
        top = 127 if has_vnni() else 64
        assert report["weight_bits"] == (8 if top == 127 else 7)
        want = int8_layer(np.maximum(int8_layer(x, *l1, top), 0), *l2, top)
    else:
        want = int4_layer(np.maximum(int4_layer(x, *l1, 32), 0), *l2, 32)
    # The products are summed in another order than numpy's.
    np.testing.assert_allclose(got, want, rtol=0,
                               atol=1e-4 * np.abs(want).max())

    assert report["mode"] == mode
    assert report["quantized"] == 2 and report["kept_in_float"] == []
    assert report["inputs"] == "the inputs given"
    (out,) = report["outputs"]
    # The report's error is that of the quantized library against the
    # float model on x, which numpy's float layers give.
    f32 = f32_layers(x, l1, l2)
    rel = np.linalg.norm(got - f32) / np.linalg.norm(f32)
    assert out["name"] == "y"
    assert out["rel_l2"] == pytest.approx(rel, rel=1e-3)
    assert 0 < out["rel_l2"] < 0.1
    assert out["max_abs"] == pytest.approx(np.abs(got - f32).max(), rel=1e-3)


def test_quantize_refuses_training_and_odd_blocks(tmp_path):
    rng = np.random.default_rng(0)
    model, _, _ = two_layer_model(rng)
    path = tmp_path / "two_layers.onnx"
    onnx.save(model, str(path))
    with pytest.raises(tfm.InvalidArgument, match="a quantized model does "
                       "not train"):
        tfm.compile(str(path), quantize="int8", train=True)
    with pytest.raises(tfm.InvalidArgument, match="multiple of 16"):
        tfm.compile(str(path), quantize="int4", quantize_block_size=24)
