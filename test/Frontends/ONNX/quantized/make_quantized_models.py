#!/usr/bin/python3
"""Writes small quantized models in every form the importer reads, with
expected outputs computed by ONNX Runtime: QDQ per tensor, per axis and in
blocks of int4 (opsets 13 and 21), the QOperator pattern that
quantize_dynamic writes (DynamicQuantizeLinear, MatMulInteger, Cast, Mul),
and ONNX Runtime's com.microsoft ops: MatMulNBits (4 and 8 bits, with and
without zero points, uint8 and float zero points, a K that does not fill its
last block, a bias, accuracy_level 4), MatMulIntegerToFloat, DynamicQuantizeMatMul and
GatherBlockQuantized (int4 and packed uint8 tables).

Each case is a folder in the ONNX backend-test layout; bad/ holds models
that must be refused with a message naming the node. Needs node and the
onnxruntime-node package that ./tfm.sh bench installs:

  NODE_PATH=build/bench/node_modules /usr/bin/python3 \\
      test/Frontends/ONNX/quantized/make_quantized_models.py
"""
import json
import os
import shutil
import subprocess

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_OUTPUTS = os.path.join(HERE, "..", "opsets", "ort_outputs.js")
rng = np.random.default_rng(66)
MS = "com.microsoft"
UINT4, INT4 = 21, 22  # TensorProto types the ONNX library here predates


def vi(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def tensor(name, value):
    return numpy_helper.from_array(value, name)


def int4_tensor(name, values, signed):
    """An INT4 or UINT4 initializer: two a byte, the first in the low nibble."""
    flat = (np.asarray(values).astype(np.int64).ravel() & 0xF).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    t = TensorProto()
    t.name = name
    t.data_type = INT4 if signed else UINT4
    t.dims.extend(np.asarray(values).shape)
    t.raw_data = (flat[0::2] | (flat[1::2] << 4)).tobytes()
    return t


def save(name, nodes, inputs, outputs, feeds, initializers=(), opset=13,
         microsoft=False, ir_version=8):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    imports = [helper.make_opsetid("", opset)]
    if microsoft:
        imports.append(helper.make_opsetid(MS, 1))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = ir_version
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "test_data_set_0"))
    path = os.path.join(folder, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    manifest = {}
    for i, (key, value) in enumerate(feeds.items()):
        manifest[key] = {"type": {np.float32: "float32", np.int64: "int64"}[value.dtype.type],
                         "dims": list(value.shape), "data": value.ravel().tolist()}
        with open(os.path.join(folder, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, key).SerializeToString())
    manifest_path = os.path.join(folder, "inputs.json")
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    result = subprocess.run(["node", ORT_OUTPUTS, path, manifest_path], check=True,
                            stdout=subprocess.PIPE)
    os.remove(manifest_path)
    got = json.loads(result.stdout)
    types = {"float32": np.float32, "int64": np.int64, "uint8": np.uint8,
             "int8": np.int8, "int32": np.int32}
    for i, out in enumerate(outputs):
        t = got[out.name]
        value = np.array(t["data"], dtype=types[t["type"]]).reshape(t["dims"])
        with open(os.path.join(folder, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, out.name).SerializeToString())


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def pack_rows(q, bits, row_bytes):
    """Rows of unsigned `bits`-wide values packed low bits first, each row
    padded to `row_bytes` bytes."""
    per = 8 // bits
    rows, count = q.shape
    out = np.zeros((rows, row_bytes), np.uint8)
    for i in range(count):
        out[:, i // per] |= (q[:, i].astype(np.uint8) << (bits * (i % per))).astype(np.uint8)
    return out


def nbits_weight(w, bits, block, symmetric):
    """MatMulNBits's B, scales and zero points of w [N, K], as ONNX
    Runtime's quantizer computes them."""
    n, k = w.shape
    blocks = -(-k // block)
    padded = np.zeros((n, blocks * block), np.float32)
    padded[:, :k] = w
    wb = padded.reshape(n, blocks, block)
    top = (1 << bits) - 1
    if symmetric:
        idx = np.abs(wb).argmax(axis=2)
        absmax = np.take_along_axis(wb, idx[..., None], 2)[..., 0]
        scale = -absmax / (1 << (bits - 1))
        scale[scale == 0] = 1
        zp = np.full((n, blocks), 1 << (bits - 1))
    else:
        lo = np.minimum(wb.min(2), 0)
        hi = np.maximum(wb.max(2), 0)
        scale = (hi - lo) / top
        scale[scale == 0] = 1
        zp = np.clip(np.rint(-lo / scale), 0, top)
    q = np.clip(np.rint(wb / scale[..., None]) + zp[..., None], 0, top).astype(np.uint8)
    blob = block * bits // 8
    b = pack_rows(q.reshape(n, -1), bits, blocks * blob).reshape(n, blocks, blob)
    zp_packed = pack_rows(zp.astype(np.uint8), bits, -(-blocks * bits // 8))
    return b, scale.astype(np.float32), zp_packed, zp.astype(np.float32)


def main():
    n = helper.make_node
    # QDQ around a MatMul, per tensor (uint8 activations) and per column
    # (int8 weights, axis 1 of the [K, N] weight), as quantize_static writes.
    x = randn(2, 5, 16)
    w = randn(16, 8) / 4
    ws = (np.abs(w).max(0) / 127).astype(np.float32)
    wq = np.clip(np.rint(w / ws), -127, 127).astype(np.int8)
    save("qdq_matmul_13",
         [n("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
          n("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
          n("DequantizeLinear", ["wq", "ws"], ["wd"], axis=1),
          n("MatMul", ["xd", "wd"], ["y"])],
         [vi("x", [2, 5, 16])], [vi("y", None)], {"x": x},
         [tensor("xs", np.array(0.02, np.float32)), tensor("xz", np.array(128, np.uint8)),
          tensor("wq", wq), tensor("ws", ws)])
    # int4 weights in blocks of 16 along K (axis 0 of [K, N]) with uint4 zero
    # points, and a blocked QuantizeLinear of the input to int4 and back.
    k, cols, block = 48, 6, 16
    w = randn(k, cols) / 4
    lo, hi = np.minimum(w.reshape(3, block, cols).min(1), 0), np.maximum(w.reshape(3, block, cols).max(1), 0)
    s4 = ((hi - lo) / 15).astype(np.float32)
    z4 = np.clip(np.rint(-lo / s4), 0, 15).astype(np.uint8)
    q4 = np.clip(np.rint(w / np.repeat(s4, block, 0)) + np.repeat(z4, block, 0), 0, 15)
    xs = np.abs(randn(2, 3)).astype(np.float32) / 4 + 0.05
    save("qdq_int4_blocked_21",
         [n("QuantizeLinear", ["x", "xs"], ["xq"], axis=1, block_size=16, output_dtype=INT4),
          n("DequantizeLinear", ["xq", "xs"], ["xd"], axis=1, block_size=16),
          n("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0, block_size=16),
          n("MatMul", ["xd", "wd"], ["y"])],
         [vi("x", [2, k])], [vi("y", None)], {"x": randn(2, k)},
         [tensor("xs", xs), int4_tensor("wq", q4, False), tensor("ws", s4),
          int4_tensor("wz", z4, False)], opset=21, ir_version=10)
    # An odd count of int4 values: the last byte's high nibble is padding.
    save("dequantize_int4_odd_21",
         [n("DequantizeLinear", ["w", "s"], ["wd"]), n("Add", ["x", "wd"], ["y"])],
         [vi("x", [5])], [vi("y", None)], {"x": randn(5)},
         [int4_tensor("w", np.array([-8, -1, 0, 5, 7]), True),
          tensor("s", np.array(0.25, np.float32))], opset=21, ir_version=10)
    # quantize_dynamic's QOperator pattern: one DynamicQuantizeLinear, an
    # int8 weight per column, MatMulInteger, Cast and the two Muls.
    w = randn(16, 8) / 4
    ws = (np.abs(w).max(0) / 127).astype(np.float32)
    wq = np.clip(np.rint(w / ws), -127, 127).astype(np.int8)
    save("dynamic_matmul_integer_13",
         [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
          n("MatMulInteger", ["xq", "wq", "xz", "wz"], ["acc"]),
          n("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
          n("Mul", ["xs", "ws"], ["s"]),
          n("Mul", ["accf", "s"], ["y"])],
         [vi("x", [2, 5, 16])], [vi("y", None)], {"x": 3 * randn(2, 5, 16)},
         [tensor("wq", wq), tensor("ws", ws), tensor("wz", np.zeros(8, np.int8))])
    # uint8 weights with a zero point per column, a bias and a Relu after,
    # over a K and an N that fill no vector evenly.
    k, cols = 300, 40
    w = randn(k, cols) / 8
    lo, hi = np.minimum(w.min(0), 0), np.maximum(w.max(0), 0)
    ws = ((hi - lo) / 255).astype(np.float32)
    wz = np.clip(np.rint(-lo / ws), 0, 255).astype(np.uint8)
    wq = np.clip(np.rint(w / ws) + wz, 0, 255).astype(np.uint8)
    save("dynamic_matmul_integer_uint8_13",
         [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
          n("MatMulInteger", ["xq", "wq", "xz", "wz"], ["acc"]),
          n("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
          n("Mul", ["xs", "ws"], ["s"]),
          n("Mul", ["accf", "s"], ["m"]),
          n("Add", ["m", "bias"], ["a"]),
          n("Relu", ["a"], ["y"])],
         [vi("x", [2, 7, k])], [vi("y", None)], {"x": randn(2, 7, k)},
         [tensor("wq", wq), tensor("ws", ws), tensor("wz", wz),
          tensor("bias", randn(cols))])
    # Products that saturate 16-bit pair sums (2 · 255 · 127 > 32767, what
    # vpmaddubsw computes without VNNI): inputs near their maximum, which
    # quantize to about 255, and weights of ±127.
    w = np.where(rng.random((64, 16)) < 0.5, 127, -127).astype(np.int8)
    w[:, :8] = 127
    save("dynamic_matmul_integer_saturating_13",
         [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
          n("MatMulInteger", ["xq", "wq", "xz"], ["acc"]),
          n("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
          n("Mul", ["xs", "ws"], ["s"]),
          n("Mul", ["accf", "s"], ["y"])],
         [vi("x", [4, 64])], [vi("y", None)],
         {"x": (0.95 + 0.05 * rng.random((4, 64))).astype(np.float32)},
         [tensor("wq", w), tensor("ws", np.array(0.01, np.float32))])
    # MatMulNBits in each form, K = 80 in blocks of 32 (the last one short).
    k, cols = 80, 12
    x = randn(3, k)
    for bits, block, sym, kind, bias in [(4, 32, True, "", False), (4, 32, False, "zp", True),
                                         (8, 16, False, "zp", False), (4, 16, False, "fzp", False),
                                         (8, 32, True, "", True)]:
        w = randn(cols, k) / 4
        b, scale, zp, fzp = nbits_weight(w, bits, block, sym)
        ins = ["x", "b", "s"]
        inits = [tensor("b", b), tensor("s", scale.ravel())]
        if kind == "zp":
            ins.append("z")
            inits.append(tensor("z", zp.ravel()))
        elif kind == "fzp":
            ins.append("z")
            inits.append(tensor("z", fzp.ravel()))
        if bias:  # input 5; g_idx (4) and maybe the zero points (3) absent
            ins += [""] * (5 - len(ins)) + ["bias"]
            inits.append(tensor("bias", randn(cols)))
        name = f"matmulnbits_{bits}bit_b{block}_{kind or 'sym'}{'_bias' if bias else ''}"
        save(name, [n("MatMulNBits", ins, ["y"], domain=MS, K=k, N=cols, bits=bits,
                      block_size=block)],
             [vi("x", [3, k])], [vi("y", None)], {"x": x}, inits, microsoft=True)
    # MatMulIntegerToFloat and DynamicQuantizeMatMul, per-column weights.
    w = randn(16, 8) / 4
    ws = (np.abs(w).max(0) / 127).astype(np.float32)
    wq = np.clip(np.rint(w / ws), -127, 127).astype(np.int8)
    xq = rng.integers(0, 256, (4, 16)).astype(np.uint8)
    save("matmulintegertofloat",
         [n("Cast", ["xi"], ["xq"], to=TensorProto.UINT8),
          n("MatMulIntegerToFloat", ["xq", "wq", "xs", "ws", "xz", "", "bias"], ["y"],
            domain=MS)],
         [vi("xi", [4, 16], TensorProto.INT64)], [vi("y", None)],
         {"xi": xq.astype(np.int64)},
         [tensor("wq", wq), tensor("ws", ws), tensor("xs", np.array(0.03, np.float32)),
          tensor("xz", np.array(120, np.uint8)), tensor("bias", randn(8))], microsoft=True)
    save("dynamicquantizematmul",
         [n("DynamicQuantizeMatMul", ["x", "wq", "ws", "", "bias"], ["y"], domain=MS)],
         [vi("x", [2, 3, 16])], [vi("y", None)], {"x": 2 * randn(2, 3, 16)},
         [tensor("wq", wq), tensor("ws", ws), tensor("bias", randn(8))], microsoft=True)
    # GatherBlockQuantized: a uint4 table with zero points in blocks of 16
    # along its rows, and a packed uint8 table (4 bits, no zero points).
    vocab, d = 10, 32
    table = randn(vocab, d)
    tb = table.reshape(vocab, 2, 16)
    lo, hi = np.minimum(tb.min(2), 0), np.maximum(tb.max(2), 0)
    ts = ((hi - lo) / 15).astype(np.float32)
    tz = np.clip(np.rint(-lo / ts), 0, 15).astype(np.uint8)
    tq = np.clip(np.rint(tb / ts[..., None]) + tz[..., None], 0, 15).reshape(vocab, d)
    ids = np.array([[3, 0, 9], [9, 2, 3]], np.int64)
    save("gatherblockquantized_uint4",
         [n("GatherBlockQuantized", ["t", "ids", "s", "z"], ["y"], domain=MS,
            gather_axis=0, quantize_axis=1, block_size=16)],
         [vi("ids", [2, 3], TensorProto.INT64)], [vi("y", None)], {"ids": ids},
         [int4_tensor("t", tq, False), tensor("s", ts), int4_tensor("z", tz, False)],
         microsoft=True, ir_version=10)
    b, scale, _, _ = nbits_weight(table, 4, 16, True)
    save("gatherblockquantized_packed",
         [n("GatherBlockQuantized", ["t", "ids", "s"], ["y"], domain=MS,
            gather_axis=0, quantize_axis=1, block_size=16, bits=4)],
         [vi("ids", [2, 3], TensorProto.INT64)], [vi("y", None)], {"ids": ids},
         [tensor("t", b.reshape(vocab, d // 2)), tensor("s", scale)], microsoft=True)


def bad(name, nodes, inputs, inits, opset=13, ir_version=8):
    """A model that must be refused, naming its node: no outputs needed."""
    graph = helper.make_graph(nodes, name, inputs, [vi("y", None)], list(inits))
    imports = [helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = ir_version
    os.makedirs(os.path.join(HERE, "bad"), exist_ok=True)
    with open(os.path.join(HERE, "bad", name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())


def bad_models():
    n = helper.make_node
    f32 = lambda v: tensor("s", np.array(v, np.float32))
    x = [vi("x", [2, 4])]
    bad("scale_zero", [n("QuantizeLinear", ["x", "s"], ["y"], name="q0")], x, [f32(0.0)])
    bad("scale_negative", [n("QuantizeLinear", ["x", "s"], ["y"], name="q0")], x, [f32(-0.5)])
    bad("scale_nan", [n("DequantizeLinear", ["w", "s"], ["y"], name="dq0", axis=0)], [],
        [tensor("w", np.ones((4, 2), np.int8)), f32([0.1, 0.2, np.nan, 0.4])])
    bad("scale_axis_length", [n("DequantizeLinear", ["w", "s"], ["y"], name="dq0", axis=1)], [],
        [tensor("w", np.ones((4, 2), np.int8)), f32([0.1, 0.2, 0.3])])
    bad("zero_point_type", [n("DequantizeLinear", ["w", "s", "z"], ["y"], name="dq0")], [],
        [tensor("w", np.ones((4, 2), np.int8)), f32(0.1), tensor("z", np.array(3, np.uint8))])
    w = int4_tensor("w", np.arange(5) - 2, True)
    w.raw_data = w.raw_data[:2]  # 5 values need 3 bytes
    bad("int4_odd_count_short", [n("DequantizeLinear", ["w", "s"], ["y"], name="dq0")], [],
        [w, f32(0.1)], opset=21, ir_version=10)
    # MatMulNBits: K = 64 in blocks of 32 at 4 bits needs B [8, 2, 16].
    xk = [vi("x", [2, 64])]
    good_b = tensor("b", np.zeros((8, 2, 16), np.uint8))
    scales = tensor("s", np.ones(16, np.float32))
    attrs = dict(domain=MS, K=64, N=8, bits=4, block_size=32)
    bad("nbits_k_mismatch", [n("MatMulNBits", ["x", "b", "s"], ["y"], name="mm0",
                               **{**attrs, "K": 80})], [vi("x", [2, 80])], [good_b, scales])
    bad("nbits_short", [n("MatMulNBits", ["x", "b", "s"], ["y"], name="mm0", **attrs)], xk,
        [tensor("b", np.zeros((8, 2, 15), np.uint8)), scales])
    bad("nbits_bits", [n("MatMulNBits", ["x", "b", "s"], ["y"], name="mm0",
                         **{**attrs, "bits": 3})], xk, [good_b, scales])
    bad("nbits_block", [n("MatMulNBits", ["x", "b", "s"], ["y"], name="mm0",
                          **{**attrs, "block_size": 24})], xk, [good_b, scales])
    bad("nbits_zero_points", [n("MatMulNBits", ["x", "b", "s", "z"], ["y"], name="mm0", **attrs)],
        xk, [good_b, scales, tensor("z", np.zeros(16, np.uint8))])
    bad("nbits_scale_zero", [n("MatMulNBits", ["x", "b", "s"], ["y"], name="mm0", **attrs)], xk,
        [good_b, tensor("s", np.zeros(16, np.float32))])
    # MatMulNBits at accuracy_level 4, which lets ONNX Runtime round the
    # input to int8 in each block: K = 128 in blocks of 32 and 64, 4 bits.
    k, cols = 128, 12
    x = randn(3, k)
    for block, sym, bias in [(32, False, True), (64, True, False)]:
        w = randn(cols, k) / 4
        b, scale, zp, _ = nbits_weight(w, 4, block, sym)
        ins = ["x", "b", "s"]
        inits = [tensor("b", b), tensor("s", scale.ravel())]
        if not sym:
            ins.append("z")
            inits.append(tensor("z", zp.ravel()))
        if bias:
            ins += [""] * (5 - len(ins)) + ["bias"]
            inits.append(tensor("bias", randn(cols)))
        name = f"matmulnbits_4bit_b{block}_{'sym' if sym else 'zp'}_acc4"
        save(name, [n("MatMulNBits", ins, ["y"], domain=MS, K=k, N=cols, bits=4,
                      block_size=block, accuracy_level=4)],
             [vi("x", [3, k])], [vi("y", None)], {"x": x}, inits, microsoft=True)


if __name__ == "__main__":
    main()
    bad_models()
