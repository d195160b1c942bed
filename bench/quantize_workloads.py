#!/usr/bin/python3
"""Quantizes exported workloads the way the peers' own tools do, with numpy
and onnx only, so that every system reads the same file:

  int8   (W1-I8, W2-I8, W9-I8): quantize_dynamic's rewrite. Each MatMul with a
         constant 2-D weight becomes DynamicQuantizeLinear on its input (one
         per input, shared by the MatMuls that read it), MatMulInteger with
         the weight in int8, symmetric per tensor (scale max|W|/127, zero
         point 0), Cast to float and the two scales' product: Mul, Mul.
         MatMuls of two activations stay in float (quantize_dynamic's
         MatMulConstBOnly).
  int4   (W7-I4, W10-I4): the 4-bit weight quantizer's rewrite. Each MatMul
         with a constant 2-D weight becomes com.microsoft.MatMulNBits, bits 4,
         block 32 along K, asymmetric: per block, scale (max - min) / 15 over
         the range widened to hold 0, zero point round(-min / scale), values
         clamp(round(w / scale) + zero point, 0, 15), two a byte low nibble
         first, zero points packed the same way.
  int4a4 (W7-I4A4, W10-I4A4): int4's rewrite with accuracy_level 4 on every
         MatMulNBits, which lets a runtime round the input to int8 in each
         block (ONNX Runtime's int8 kernels; tfm's `blocked` input).

Writes NAME-i8.onnx, NAME-i4.onnx or NAME-i4a4.onnx beside NAME.onnx, and
NAME-i4.json (NAME-i4a4.json) with
the bytes of weights a decoding step reads in the quantized file.
Usage: quantize_workloads.py int8|int4|int4a4 DIR NAME..."""
import json
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

BLOCK = 32


def constants(model):
    return {t.name: t for t in model.graph.initializer}


def weight_of(node, inits):
    """The MatMul's constant 2-D float weight, or None."""
    if node.op_type != "MatMul" or node.input[1] not in inits:
        return None
    t = inits[node.input[1]]
    if t.data_type != TensorProto.FLOAT or len(t.dims) != 2:
        return None
    return numpy_helper.to_array(t)


def rewrite(model, convert):
    """Replaces each MatMul `convert` takes by the nodes it returns (and
    the initializers it adds), in place, keeping the graph's order; drops
    the float weights nothing reads any more."""
    inits = constants(model)
    nodes, added = [], []
    for node in model.graph.node:
        w = weight_of(node, inits)
        out = convert(node, w, added) if w is not None else None
        nodes.extend(out if out is not None else [node])
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(added)
    read = {i for n in model.graph.node for i in n.input}
    keep = [t for t in model.graph.initializer if t.name in read]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)


def int8(model):
    quantized = {}  # input name -> (q, scale, zero point)

    def convert(node, w, added):
        x, y = node.input[0], node.output[0]
        nodes = []
        if x not in quantized:
            names = tuple(f"{x}_{s}" for s in ("quantized", "scale", "zero_point"))
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(names),
                                          name=f"{x}_DynamicQuantizeLinear"))
            quantized[x] = names
        q, xs, xz = quantized[x]
        scale = np.float32(np.abs(w).max() / 127.0) or np.float32(1.0)
        wq = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        base = node.input[1]
        added += [numpy_helper.from_array(wq, f"{base}_quantized"),
                  numpy_helper.from_array(np.array(scale, np.float32), f"{base}_scale"),
                  numpy_helper.from_array(np.array(0, np.int8), f"{base}_zero_point")]
        nodes += [
            helper.make_node("MatMulInteger", [q, f"{base}_quantized", xz, f"{base}_zero_point"],
                             [f"{y}_quantized"], name=f"{node.name}_quant"),
            helper.make_node("Cast", [f"{y}_quantized"], [f"{y}_cast"], to=TensorProto.FLOAT,
                             name=f"{node.name}_cast"),
            helper.make_node("Mul", [xs, f"{base}_scale"], [f"{y}_scales"],
                             name=f"{node.name}_scales_mul"),
            helper.make_node("Mul", [f"{y}_cast", f"{y}_scales"], [y],
                             name=f"{node.name}_output_scale_mul"),
        ]
        return nodes

    rewrite(model, convert)


def quantize_blocks(w):
    """w [K, N] float: MatMulNBits's packed B [N, blocks, 16], scales
    [N * blocks] and packed zero points [N * ceil(blocks / 2)]."""
    k, n = w.shape
    blocks = (k + BLOCK - 1) // BLOCK
    padded = np.zeros((blocks * BLOCK, n), np.float32)
    padded[:k] = w
    b = padded.T.reshape(n, blocks, BLOCK)
    lo = np.minimum(b.min(axis=2), 0.0)
    hi = np.maximum(b.max(axis=2), 0.0)
    scale = ((hi - lo) / 15.0).astype(np.float32)
    scale[scale == 0] = 1.0
    zp = np.clip(np.rint(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.rint(b / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zrow = np.zeros((n, (blocks + 1) // 2 * 2), np.uint8)
    zrow[:, :blocks] = zp
    zpacked = (zrow[:, 0::2] | (zrow[:, 1::2] << 4)).astype(np.uint8)
    return packed, scale.reshape(-1), zpacked.reshape(-1)


def int4(model, accuracy_level=0):
    def convert(node, w, added):
        k, n = w.shape
        packed, scale, zp = quantize_blocks(w)
        base = node.input[1]
        added += [numpy_helper.from_array(packed, f"{base}_Q4"),
                  numpy_helper.from_array(scale, f"{base}_scales"),
                  numpy_helper.from_array(zp, f"{base}_zero_points")]
        return [helper.make_node(
            "MatMulNBits", [node.input[0], f"{base}_Q4", f"{base}_scales",
                            f"{base}_zero_points"],
            list(node.output), name=f"{node.name}_Q4", domain="com.microsoft",
            K=k, N=n, bits=4, block_size=BLOCK,
            **({"accuracy_level": accuracy_level} if accuracy_level else {}))]

    rewrite(model, convert)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))


def step_bytes(model, float_bytes_per_token):
    """A decoding step's weight bytes in the quantized file: the float
    model's less the float matrices that became MatMulNBits, plus what those
    read instead (packed values, scales, zero points)."""
    inits = constants(model)
    saved = 0
    for node in model.graph.node:
        if node.op_type == "MatMulNBits":
            k = next(a.i for a in node.attribute if a.name == "K")
            n = next(a.i for a in node.attribute if a.name == "N")
            saved += 4 * k * n
            saved -= sum(numpy_helper.to_array(inits[i]).nbytes for i in node.input[1:4])
    return float_bytes_per_token - saved


def main():
    kind, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    suffix = {"int8": "i8", "int4": "i4", "int4a4": "i4a4"}[kind]
    for name in names:
        for variant in ("", "-past"):
            src = os.path.join(out, f"{name}{variant}.onnx")
            dst = os.path.join(out, f"{name}-{suffix}{variant}.onnx")
            if not os.path.exists(src) or os.path.exists(dst):
                continue
            model = onnx.load(src)
            if kind == "int8":
                int8(model)
            else:
                int4(model, 4 if kind == "int4a4" else 0)
            onnx.save(model, dst)
            if kind != "int8" and not variant:
                sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
                import importlib
                decoder = importlib.import_module(f"{name}_model")
                with open(os.path.join(out, f"{name}-{suffix}.json"), "w") as f:
                    json.dump({"weight_bytes_per_token":
                               step_bytes(model, decoder.weight_bytes_per_token())}, f)


if __name__ == "__main__":
    main()
