#!/usr/bin/python3
"""Writes the small, deliberately broken ONNX models of the importer's error
tests. Run with Debian's python:
  /usr/bin/python3 test/Frontends/ONNX/Inputs/make_error_models.py"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, graph, opset=17, domains=()):
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=imports, producer_name="tfm-tests")
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(model.SerializeToString())
    return model


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def main():
    # Two unsupported nodes among supported ones: both must be reported.
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu0"),
         helper.make_node("Hardmax", ["r"], ["h"], name="act1"),
         helper.make_node("Det", ["h"], ["y"], name="mix2")],
        "unsupported", [vi("x", [2, 3])], [vi("y", [2, 3])])
    valid = save("unsupported.onnx", g)

    data = valid.SerializeToString()
    with open(os.path.join(HERE, "truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])

    g = helper.make_graph(
        [helper.make_node("FancyOp", ["x"], ["y"], name="custom0", domain="com.example")],
        "domain", [vi("x", [2])], [vi("y", [2])])
    save("unknown_domain.onnx", g, domains=["com.example"])

    g = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["y"], name="add0")],
        "missing", [vi("x", [2])], [vi("y", [2])])
    save("missing_initializer.onnx", g)

    w = numpy_helper.from_array(np.ones((4, 5), dtype=np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="proj0")],
        "shapes", [vi("x", [2, 3])], [vi("y", [2, 5])], initializer=[w])
    save("bad_shape.onnx", g)

    g = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], name="softmax0", axis=-1)],
        "dynamic", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
    save("dynamic.onnx", g)

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu0")],
        "old", [vi("x", [2])], [vi("y", [2])])
    save("opset11.onnx", g, opset=11)
    save("opset6.onnx", g, opset=6)
    save("opset22.onnx", g, opset=22)

    # A shape that comes from a graph input must be bound at compile time.
    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape0")],
        "bind", [vi("x", [2, 3]), vi("shape", [2], TensorProto.INT64)], [vi("y", [3, 2])])
    save("shape_input.onnx", g)
    with open(os.path.join(HERE, "shape_3x2.pb"), "wb") as f:
        f.write(numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "shape").SerializeToString())

    # Nodes that break their op's schema: all problems at once, before any
    # converter sees them.
    g = helper.make_graph(
        [helper.make_node("Mul", ["x"], ["m"], name="mul0"),
         helper.make_node("Softmax", ["m"], ["s"], name="softmax0", axis="last"),
         helper.make_node("Gemm", ["s", "", "x"], ["y"], name="gemm0", beta=1.0,
                          colour=3)],
        "schema", [vi("x", [2, 2])], [vi("y", [2, 2])])
    save("schema.onnx", g)

    # External data: a weight and a bias in one file beside the models, at
    # offsets, read by a model at opset 17 and by one at opset 11 (which goes
    # through the version converter); then the ways a reference can be bad.
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
    b = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32)
    with open(os.path.join(HERE, "external_weights.bin"), "wb") as f:
        f.write(b"\0" * 16 + w.tobytes() + b.tobytes())

    def external(name, dims, location, offset, length):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", offset), ("length", length)):
            if value is not None:
                t.external_data.add(key=key, value=str(value))
        return t

    def affine(name, location="external_weights.bin", offset=16, opset=17):
        g = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul0"),
             helper.make_node("Add", ["xw", "b"], ["y"], name="add0")],
            "external", [vi("x", [2, 3])], [vi("y", [2, 4])],
            [external("w", [3, 4], location, offset, 48),
             external("b", [4], "external_weights.bin", 64, None)])
        save(name, g, opset=opset)

    affine("external.onnx")
    affine("external_opset11.onnx", opset=11)
    affine("external_missing.onnx", location="absent.bin")
    affine("external_escape.onnx", location="../external_weights.bin")
    affine("external_range.onnx", offset=48)
    x = np.array([[1, 2, 3], [-1, 0, 0.5]], dtype=np.float32)
    os.makedirs(os.path.join(HERE, "external_case"), exist_ok=True)
    with open(os.path.join(HERE, "external_case", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    with open(os.path.join(HERE, "external_case", "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x @ w + b, "y").SerializeToString())

    with open(os.path.join(HERE, "not_protobuf.onnx"), "wb") as f:
        f.write(b"\xff\xfe this is not a protobuf \x00\x01\x02" * 4)


if __name__ == "__main__":
    main()
