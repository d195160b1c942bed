#!/usr/bin/python3
"""Writes small models at opsets 18 to 21, whose changed ops the ONNX library
here (1.12, opsets up to 17) does not know, with expected outputs computed by
ONNX Runtime: reductions taking axes as an input, Split's num_outputs, Gelu,
Cast's saturate, and an attention block at opset 21 that uses them together.
Also Softmax and LogSoftmax at opsets 11 and 12 over a middle axis, whose
meaning (flatten to 2-D at the axis) changed at 13, the Einsum forms
exporters write (attention contractions, ellipses, implicit outputs), and
ScatterND at 18 as a cache update (run-time and negative positions) and with
the reductions (repeated positions combine), TopK and MaxPool's Indices
with ties, Einsum's diagonals, Conv and AveragePool over 3 axes, and uint8
through the data-movement ops (expected outputs from numpy).

Each case is a folder in the ONNX backend-test layout. Needs node and the
onnxruntime-node package that ./tfm.sh bench installs:

  NODE_PATH=build/bench/node_modules /usr/bin/python3 \\
      test/Frontends/ONNX/opsets/make_opset_models.py
"""
import json
import os
import shutil
import subprocess

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.mapping import NP_TYPE_TO_TENSOR_TYPE

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(18)
ORT_TYPES = {np.float32: "float32", np.int64: "int64"}


def vi(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def save(name, opset, nodes, inputs, outputs, feeds, initializers=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "test_data_set_0"))
    path = os.path.join(folder, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    manifest = {}
    for i, (key, value) in enumerate(feeds.items()):
        manifest[key] = {"type": ORT_TYPES[value.dtype.type], "dims": list(value.shape),
                         "data": value.ravel().tolist()}
        with open(os.path.join(folder, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, key).SerializeToString())
    manifest_path = os.path.join(folder, "inputs.json")
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    result = subprocess.run(["node", os.path.join(HERE, "ort_outputs.js"), path, manifest_path],
                            check=True, stdout=subprocess.PIPE)
    os.remove(manifest_path)
    got = json.loads(result.stdout)
    for i, out in enumerate(outputs):
        t = got[out.name]
        dtype = {"float32": np.float32, "int64": np.int64, "float16": np.float16}[t["type"]]
        value = np.array(t["data"], dtype=dtype).reshape(t["dims"])
        with open(os.path.join(folder, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, out.name).SerializeToString())


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def main():
    x = randn(2, 3, 4)
    for op, axes, keep in [("ReduceMean", [-1], 1), ("ReduceMax", [0, 2], 0),
                           ("ReduceMin", [1], 1)]:
        save(f"{op.lower()}_axes_input_18", 18,
             [helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)],
             [vi("x", [2, 3, 4])], [vi("y", None)], {"x": x}, [ints("axes", axes)])
    # No axes and noop_with_empty_axes: the identity.
    save("reducemax_noop_18", 18,
         [helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1)],
         [vi("x", [2, 3, 4])], [vi("y", None)], {"x": x})
    # An uneven split: the last part is the short one.
    save("split_num_outputs_18", 18,
         [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)],
         [vi("x", [2, 7])], [vi("a", None), vi("b", None), vi("c", None)],
         {"x": randn(2, 7)})
    save("gelu_20", 20,
         [helper.make_node("Gelu", ["x"], ["exact"]),
          helper.make_node("Gelu", ["x"], ["tanh"], approximate="tanh")],
         [vi("x", [3, 5])], [vi("exact", None), vi("tanh", None)],
         {"x": 3 * randn(3, 5)})
    save("cast_saturate_19", 19,
         [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64, saturate=1)],
         [vi("x", [4])], [vi("y", None, TensorProto.INT64)],
         {"x": np.array([1.5, -2.5, 3.0, 7.9], dtype=np.float32)})

    # Self-attention and a feed-forward block at opset 21: one packed QKV
    # projection split by num_outputs, a ReduceMean with an axes input,
    # LayerNormalization and Gelu.
    d, h, s = 16, 2, 5
    w = {"wqkv": randn(d, 3 * d) / 4, "wo": randn(d, d) / 4, "w1": randn(d, 2 * d) / 4,
         "w2": randn(2 * d, d) / 4, "g": 1 + randn(d) / 10, "b": randn(d) / 10}
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    inits += [ints("heads", [1, s, h, d // h]), ints("merged", [1, s, d]),
              ints("last", [-1]),
              numpy_helper.from_array(np.array(1 / np.sqrt(d // h), np.float32), "scale")]
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
        n("MatMul", ["ln", "wqkv"], ["qkv"]),
        n("Split", ["qkv"], ["q0", "k0", "v0"], axis=-1, num_outputs=3),
        n("Reshape", ["q0", "heads"], ["q1"]), n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        n("Reshape", ["k0", "heads"], ["k1"]), n("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        n("Reshape", ["v0", "heads"], ["v1"]), n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["s0"]), n("Mul", ["s0", "scale"], ["s1"]),
        n("Softmax", ["s1"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["o0"]),
        n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]), n("Reshape", ["o1", "merged"], ["o2"]),
        n("MatMul", ["o2", "wo"], ["o3"]), n("Add", ["x", "o3"], ["r1"]),
        n("MatMul", ["r1", "w1"], ["f0"]), n("Gelu", ["f0"], ["f1"]),
        n("MatMul", ["f1", "w2"], ["f2"]), n("Add", ["r1", "f2"], ["r2"]),
        n("ReduceMean", ["r2", "last"], ["centre"], keepdims=1),
        n("Sub", ["r2", "centre"], ["y"]),
    ]
    save("attention_block_21", 21, nodes, [vi("x", [1, s, d])], [vi("y", None)],
         {"x": randn(1, s, d)}, inits)

    # Shapes are left unknown, as exporters often leave them, so the version
    # converter cannot see the rank.
    save("softmax_axis1_11", 11, [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
         [vi("x", [2, 3, 4])], [vi("y", None)], {"x": randn(2, 3, 4)})
    save("logsoftmax_axis2_12", 12, [helper.make_node("LogSoftmax", ["x"], ["y"], axis=2)],
         [vi("x", [2, 3, 4])], [vi("y", None)], {"x": randn(2, 3, 4)})
    save("softmax_default_axis_11", 11, [helper.make_node("Softmax", ["x"], ["y"])],
         [vi("x", [2, 3, 4])], [vi("y", None)], {"x": randn(2, 3, 4)})
    save("einsum_forms_12", 12,
         [helper.make_node("Einsum", ["q", "k"], ["scores"], equation="bhqd,bhkd->bhqk"),
          helper.make_node("Einsum", ["a", "b"], ["batched"], equation="...ij,...jk->...ik"),
          helper.make_node("Einsum", ["a", "w"], ["broadcast"], equation="...ij, jk"),
          helper.make_node("Einsum", ["q"], ["total"], equation="bhqd->")],
         [vi("q", [2, 3, 4, 5]), vi("k", [2, 3, 6, 5]), vi("a", [2, 3, 4, 5]),
          vi("b", [2, 3, 5, 2]), vi("w", [5, 3])],
         [vi("scores", None), vi("batched", None), vi("broadcast", None), vi("total", None)],
         {"q": randn(2, 3, 4, 5), "k": randn(2, 3, 6, 5), "a": randn(2, 3, 4, 5),
          "b": randn(2, 3, 5, 2), "w": randn(5, 3)})

    # A cache [batch, length, width] written at run-time (batch, position)
    # pairs, one negative; then the reductions, with repeated positions.
    sn = lambda out, idx, upd, **kw: helper.make_node(
        "ScatterND", ["cache", idx, upd], [out], **kw)
    save("scatternd_cache_18", 18,
         [sn("written", "pos", "kv"),
          sn("summed", "rows", "slab", reduction="add"),
          sn("maxed", "pos", "kv", reduction="max"),
          sn("minned", "rows", "slab", reduction="min")],
         [vi("cache", [2, 6, 4]), vi("pos", [2, 1, 2], TensorProto.INT64),
          vi("kv", [2, 1, 4]), vi("rows", [3, 1], TensorProto.INT64),
          vi("slab", [3, 6, 4])],
         [vi("written", None), vi("summed", None), vi("maxed", None), vi("minned", None)],
         {"cache": randn(2, 6, 4), "pos": np.array([[[0, 3]], [[1, -1]]], np.int64),
          "kv": randn(2, 1, 4), "rows": np.array([[1], [1], [0]], np.int64),
          "slab": randn(3, 6, 4)})
    # A batch position past the two batches, for the run-time check.
    with open(os.path.join(HERE, "scatternd_cache_18", "bad_pos.pb"), "wb") as f:
        f.write(numpy_helper.from_array(
            np.array([[[0, 3]], [[2, 1]]], np.int64), "pos").SerializeToString())

    # TopK with ties (equal elements keep their order), along a middle axis,
    # smallest first, and on integers.
    tied = np.round(randn(2, 7, 3) * 2).astype(np.float32)
    save("topk_ties_11", 11,
         [helper.make_node("TopK", ["x", "k3"], ["top", "top_i"], axis=1),
          helper.make_node("TopK", ["x", "k2"], ["low", "low_i"], axis=-1, largest=0),
          helper.make_node("TopK", ["n", "k3"], ["itop", "itop_i"], axis=0)],
         [vi("x", [2, 7, 3]), vi("n", [7, 2], TensorProto.INT64)],
         [vi("top", None), vi("top_i", None, TensorProto.INT64), vi("low", None),
          vi("low_i", None, TensorProto.INT64), vi("itop", None, TensorProto.INT64),
          vi("itop_i", None, TensorProto.INT64)],
         {"x": tied, "n": np.array([[3, -1], [5, 5], [3, 2], [-4, 5], [5, 0],
                                    [1, 5], [3, 9]], np.int64)},
         [ints("k3", [3]), ints("k2", [2])])

    # MaxPool's Indices with ties (the first maximum of a window), padding,
    # and both storage orders; Einsum's diagonals.
    pooled = np.round(randn(2, 2, 5, 6)).astype(np.float32)
    save("maxpool_indices_12", 12,
         [helper.make_node("MaxPool", ["x"], ["y", "y_i"], kernel_shape=[3, 2],
                           strides=[2, 1], pads=[1, 0, 1, 1]),
          helper.make_node("MaxPool", ["x"], ["z", "z_i"], kernel_shape=[2, 2],
                           strides=[1, 2], storage_order=1)],
         [vi("x", [2, 2, 5, 6])],
         [vi("y", None), vi("y_i", None, TensorProto.INT64), vi("z", None),
          vi("z_i", None, TensorProto.INT64)],
         {"x": pooled})
    save("einsum_diagonal_12", 12,
         [helper.make_node("Einsum", ["a"], ["trace"], equation="bii->b"),
          helper.make_node("Einsum", ["a"], ["diag"], equation="bii->bi"),
          helper.make_node("Einsum", ["a", "w"], ["mixed"], equation="bii,ij->bj")],
         [vi("a", [2, 4, 4]), vi("w", [4, 3])],
         [vi("trace", None), vi("diag", None), vi("mixed", None)],
         {"a": randn(2, 4, 4), "w": randn(4, 3)})

    # Convolution and average pooling over 3 spatial axes: a video model's
    # tubelet embedding (stride = kernel), and one with every attribute.
    save("conv3d_13", 13,
         [helper.make_node("Conv", ["clip", "tubelet", "tb"], ["tokens"],
                           kernel_shape=[2, 4, 4], strides=[2, 4, 4]),
          helper.make_node("Conv", ["clip", "wg"], ["general"], group=3,
                           strides=[2, 1, 2], pads=[1, 0, 2, 0, 1, 1],
                           dilations=[1, 2, 1]),
          helper.make_node("AveragePool", ["clip"], ["pooled"], kernel_shape=[2, 3, 3],
                           strides=[1, 2, 2], pads=[1, 1, 0, 0, 1, 1],
                           count_include_pad=0)],
         [vi("clip", [1, 3, 5, 8, 8])],
         [vi("tokens", None), vi("general", None), vi("pooled", None)],
         {"clip": randn(1, 3, 5, 8, 8)},
         [numpy_helper.from_array(randn(4, 3, 2, 4, 4), "tubelet"),
          numpy_helper.from_array(randn(4), "tb"),
          numpy_helper.from_array(randn(6, 1, 3, 2, 3), "wg")])

    save_uint8_data_movement()


def save_uint8_data_movement():
    """uint8 through data movement, a cast, a reduction, a comparison and a
    select, with numpy's results as the expected ones (the ONNX Runtime
    package here takes no uint8 feeds through this script's manifest)."""
    x = np.random.default_rng(8).integers(0, 256, (2, 3, 4)).astype(np.uint8)
    idx = np.array([2, 0], np.int64)
    n = helper.make_node
    nodes = [n("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             n("Concat", ["x", "x"], ["c"], axis=1),
             n("Gather", ["x", "i"], ["g"], axis=2),
             n("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
             n("ReduceMax", ["x"], ["m"], axes=[2], keepdims=0),
             n("Greater", ["x", "k"], ["gt"]),
             n("Where", ["gt", "x", "k"], ["w"])]
    outs = {"t": x.transpose(2, 0, 1), "c": np.concatenate([x, x], 1), "g": x[:, :, idx],
            "f": x.astype(np.float32), "m": x.max(2), "gt": x > 128,
            "w": np.where(x > 128, x, np.uint8(128))}
    graph = helper.make_graph(
        nodes, "uint8_data_movement",
        [vi("x", [2, 3, 4], TensorProto.UINT8), vi("i", [2], TensorProto.INT64)],
        [helper.make_tensor_value_info(k, NP_TYPE_TO_TENSOR_TYPE[v.dtype], None)
         for k, v in outs.items()],
        [numpy_helper.from_array(np.array([128], np.uint8), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    folder = os.path.join(HERE, "uint8_data_movement_13")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "test_data_set_0"))
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for prefix, tensors in (("input", {"x": x, "i": idx}), ("output", outs)):
        for i, (name, value) in enumerate(tensors.items()):
            with open(os.path.join(folder, "test_data_set_0", f"{prefix}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(value, name).SerializeToString())


if __name__ == "__main__":
    main()
