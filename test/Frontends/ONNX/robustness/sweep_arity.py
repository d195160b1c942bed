#!/usr/bin/python3
"""Imports every op type the importer supports with every number of inputs
from 0 to 4 (and of outputs from 1 to 2), and with each attribute of its
schema given a value of the wrong type: each model must import or be refused
with exit code 1 and a message that names the node, never crash. A node the
schema refuses must be refused. Op types without a schema at the opset
(Gelu before 20, ...) are skipped. Past opset 17, which the ONNX library here
knows last, only the "never crash, always name the node" half is checked.

usage: sweep_arity.py --tfmc TFMC [--opset 17] [-j N]"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile

from onnx import AttributeProto, TensorProto, defs, helper

WRONG = {  # a value of another type for each attribute type
    AttributeProto.INT: "a string",
    AttributeProto.FLOAT: "a string",
    AttributeProto.STRING: 3,
    AttributeProto.INTS: 2.5,
    AttributeProto.FLOATS: "a string",
    AttributeProto.STRINGS: 7,
    AttributeProto.TENSOR: 1,
    AttributeProto.GRAPH: 1,
}


def model(op, n_in, n_out, attrs):
    ins = [f"x{i}" for i in range(n_in)]
    outs = [f"y{i}" for i in range(n_out)]
    # Another domain's ops are listed as "domain.OpType".
    domain, _, op_type = op.rpartition(".")
    node = helper.make_node(op_type, ins, outs, name="n0", domain=domain, **attrs)
    graph = helper.make_graph(
        [node], "sweep",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 3]) for x in ins],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None) for y in outs])
    imports = [helper.make_opsetid("", ARGS.opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=imports)


def schema_of(op):
    if "." in op:  # no schema in the ONNX library: arity only
        return None
    try:
        return defs.get_schema(op, min(ARGS.opset, 17))
    except defs.SchemaError:
        return None


def cases(op):
    schema = schema_of(op)
    if schema is None:  # an op after opset 17: arity only, never judged
        for n_in in range(0, 5):
            for n_out in (1, 2):
                yield f"{op}_in{n_in}_out{n_out}", model(op, n_in, n_out, {}), True
        return
    for n_in in range(0, 5):
        for n_out in (1, 2):
            ok = (schema.min_input <= n_in <= schema.max_input and
                  schema.min_output <= n_out <= schema.max_output)
            yield f"{op}_in{n_in}_out{n_out}", model(op, n_in, n_out, {}), ok
    n_in = max(schema.min_input, 1)
    for name, attr in schema.attributes.items():
        if attr.type in WRONG:
            yield (f"{op}_attr_{name}",
                   model(op, min(n_in, schema.max_input), 1, {name: WRONG[attr.type]}),
                   False)


def run(case):
    name, m, schema_ok = case
    path = os.path.join(ARGS.work, name + ".onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    # Inputs that give shapes would need --bind; every input is a graph
    # input here, so their refusal is an expected, clean error too.
    r = subprocess.run([ARGS.tfmc, "compile", path, "--emit=tfm", "-o", os.devnull],
                       capture_output=True, text=True)
    if r.returncode < 0 or r.returncode > 1:
        return f"CRASH {name}: exit {r.returncode}\n{r.stderr[-2000:]}"
    if r.returncode == 1 and "n0" not in r.stderr and "node" not in r.stderr and \
            "graph input" not in r.stderr:
        return f"UNNAMED {name}: {r.stderr.strip()[:300]}"
    if not schema_ok and r.returncode == 0 and ARGS.opset <= 17:
        return f"ACCEPTED {name}: the schema refuses it"
    return None


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--tfmc", required=True)
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("-j", type=int, default=2)
    ARGS = p.parse_args()
    ops = subprocess.run([ARGS.tfmc, "--list-onnx-ops"], capture_output=True,
                         text=True, check=True).stdout.split()
    ops = [op for op in ops if op not in ("Constant",)]  # no inputs by design
    if ARGS.opset <= 17:
        ops = [op for op in ops if schema_of(op)]
    with tempfile.TemporaryDirectory() as work:
        ARGS.work = work
        all_cases = [c for op in ops for c in cases(op)]
        with concurrent.futures.ThreadPoolExecutor(ARGS.j) as pool:
            problems = [r for r in pool.map(run, all_cases) if r]
    for r in problems:
        print(r)
    print(f"{len(all_cases)} models of {len(ops)} op types: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
