#!/usr/bin/python3
"""Builds the GPU check pack (scripts/gpu-check.sh runs this): the runtime
and the shared libraries it needs, every test case compiled for the CUDA
target with its inputs and expected outputs, the training fixtures and the
bench workloads, and the runner, in one folder that runs on a machine with
an NVIDIA GPU, its driver, Python with numpy (and PyTorch for the bench),
and no compiler. Expected values come from PyTorch (the exported models,
the fixtures, the trajectories, the bench workloads in float64) and from the
ONNX node suite's data.

usage: gpu_pack.py --tfmc TFMC --runtime LIBTFM_RUNTIME --out DIR [--arch sm_90]
Needs Debian's python3-onnx and python3-torch (run it with /usr/bin/python3)."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "conformance"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import tfm_runtime  # noqa: E402


class Packer:
    def __init__(self, args):
        self.args = args
        self.rt = tfm_runtime.Runtime(args.runtime)
        self.skipped = []

    def compile(self, model, so, extra=()):
        # The pack runs on another machine: host code any AVX2 CPU runs,
        # where the build host's own CPU (--cpu=native) would be refused.
        flags = ["--target=cuda", "--gpu-arch=" + self.args.arch, "--cpu=x86-64-v3"]
        if self.args.schedule_on_cpu:
            flags = ["--target=cuda", "--gpu-schedule-on-cpu", "--cpu=x86-64-v3"]
        p = subprocess.run([self.args.tfmc, "compile", model, "-o", so] + flags + list(extra),
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr else "failed")

    def case(self, group, name, model, inputs, outputs, extra=(), names=None, files=None,
             rel_l2=None):
        """Compiles `model` and stores its inputs and expected outputs in the
        order of the entry's ports, checked against their shapes. With the
        graph's input `names` (and their .pb `files`), the inputs are taken
        by port name, and a shape operand the compiler asks for is bound
        from its file, as `tfmc run` does. With `rel_l2`, the runner judges
        the outputs normwise at that tolerance."""
        folder = os.path.join(self.args.out, "cases", group, name)
        os.makedirs(folder, exist_ok=True)
        so = os.path.join(folder, "model.so")
        try:
            extra = list(extra)
            for _ in range(8):
                try:
                    self.compile(model, so, extra)
                    break
                except RuntimeError as e:
                    bind = re.search(r"bind it with --bind (\S+)=FILE\.pb", str(e))
                    if not bind or not names or bind.group(1) not in names:
                        raise
                    extra.append(f"--bind={bind.group(1)}="
                                 f"{files[names.index(bind.group(1))]}")
            m = tfm_runtime.Model(self.rt, so)
            if names:
                inputs = [inputs[names.index(port)] for port, _, _ in m.inputs]
            if len(m.inputs) != len(inputs) or len(m.outputs) != len(outputs):
                raise RuntimeError("the data does not cover the entry's ports")
            ports = m.inputs + m.outputs
            data = [a.reshape(want[2]) if a.size == int(np.prod(want[2])) else a
                    for want, a in zip(ports, inputs + outputs)]
            for want, got in zip(ports, data):
                if tuple(want[2]) != got.shape:
                    raise RuntimeError(f"port {want[0]} is {want[2]}, data {got.shape}")
            inputs, outputs = data[:len(inputs)], data[len(inputs):]
            m.close()
        except (RuntimeError, tfm_runtime.Error) as e:
            shutil.rmtree(folder)
            self.skipped.append(f"{group}/{name}: {e}")
            return
        judged = {} if rel_l2 is None else {"rel_l2": np.float64(rel_l2)}
        np.savez_compressed(os.path.join(folder, "case.npz"),
                            **{f"in{i}": a for i, a in enumerate(inputs)},
                            **{f"out{i}": a for i, a in enumerate(outputs)}, **judged)


def load_dir(folder, prefix):
    files = sorted((f for f in os.listdir(folder) if f.startswith(prefix) and f.endswith(".pb")),
                   key=lambda f: int(f[len(prefix):-3]))
    return [nh.to_array(onnx.load_tensor(os.path.join(folder, f))) for f in files]


def pack_models(p):
    root = os.path.join(ROOT, "test", "models")
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if not os.path.isfile(os.path.join(folder, "model.onnx")):
            continue
        data = os.path.join(folder, "test_data_set_0")
        shape = (["--shape", "input_ids=2x8", "--shape", "attention_mask=2x8"]
                 if name.startswith("bert") else [])
        p.case("models", name, os.path.join(folder, "model.onnx"), load_dir(data, "input_"),
               load_dir(data, "output_"), shape)
        # GEMMs on the tensor cores, judged normwise like bf16 on the CPU.
        # Opset 17 only: the opsets differ in import, not in kernels.
        if name.endswith("_opset17"):
            for dtype in ("bf16", "f16"):
                p.case("models-" + dtype, name, os.path.join(folder, "model.onnx"),
                       load_dir(data, "input_"), load_dir(data, "output_"),
                       shape + ["--dtype=" + dtype], rel_l2=1e-2)


def pack_quantized(p):
    # The quantized formats (docs/quantization.md), ONNX Runtime's outputs
    # expected: the GPU runs their dequantizations and integer products as
    # generated kernels.
    root = os.path.join(ROOT, "test", "Frontends", "ONNX", "quantized")
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if not os.path.isfile(os.path.join(folder, "model.onnx")):
            continue
        data = os.path.join(folder, "test_data_set_0")
        p.case("quantized", name, os.path.join(folder, "model.onnx"),
               load_dir(data, "input_"), load_dir(data, "output_"))


def pack_fixtures(p):
    root = os.path.join(ROOT, "test", "fixtures", "reference")
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if os.path.isfile(os.path.join(folder, "model.mlir")):
            p.case("fixtures", name, os.path.join(folder, "model.mlir"),
                   load_dir(folder, "input_"), load_dir(folder, "output_"))
            # The GEMMs sized for the staged tensor-core kernels (the
            # warpgroup one under --arch sm_90a), judged normwise as the
            # models are in bf16 and f16.
            if name.startswith("gemm_tiles"):
                for dtype in ("bf16", "f16"):
                    p.case("gemms-" + dtype, name, os.path.join(folder, "model.mlir"),
                           load_dir(folder, "input_"), load_dir(folder, "output_"),
                           ["--dtype=" + dtype], rel_l2=1e-2)


def pack_node_suite(p):
    import run_node_suite as suite
    data = suite.DEFAULT_DATA
    if not os.path.isdir(data):
        p.skipped.append("node suite: no data (Debian package libonnx-testdata)")
        return
    supported = set(subprocess.run([p.args.tfmc, "--list-onnx-ops"], check=True,
                                   capture_output=True, text=True).stdout.split())
    expected = suite.load_expected(os.path.join(ROOT, "test", "conformance",
                                                "node-expected-failures.txt"))
    for name in sorted(os.listdir(data)):
        path = os.path.join(data, name)
        if not os.path.isfile(os.path.join(path, "model.onnx")) or name in expected:
            continue
        ops, opset, unsupported = suite.classify(path, supported)
        if unsupported or not 13 <= opset <= 17:
            continue
        case = os.path.join(path, "test_data_set_0")
        graph = onnx.load(os.path.join(path, "model.onnx"), load_external_data=False).graph
        inits = {t.name for t in graph.initializer}
        names = [i.name for i in graph.input if i.name not in inits]
        files = [os.path.join(case, f"input_{i}.pb") for i in range(len(names))]
        p.case("node", name, os.path.join(path, "model.onnx"), load_dir(case, "input_"),
               load_dir(case, "output_"), names=names, files=files)


def pack_training(p):
    root = os.path.join(ROOT, "test", "models", "training")
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if not os.path.isfile(os.path.join(folder, "trajectory.json")):
            continue
        fixture = json.load(open(os.path.join(folder, "trajectory.json")))
        graph = onnx.load(os.path.join(folder, "model.onnx")).graph
        inits = {t.name for t in graph.initializer}
        positions = [i.name for i in graph.input if i.name not in inits]
        for run in fixture["runs"]:
            label = f"{name}-{run['optimizer']}"
            out = os.path.join(p.args.out, "train", label)
            os.makedirs(out, exist_ok=True)
            so = os.path.join(out, "model.so")
            try:
                p.compile(os.path.join(folder, "model.onnx"), so,
                          ["--train", "--optimizer=" + run["optimizer"], "--lr=%r" % run["lr"],
                           "--label-smoothing=%r" % run["label_smoothing"]])
                m = tfm_runtime.Model(p.rt, so, entry="train_step")
                batch = []
                for port, _, _ in m.inputs:
                    file = ("labels.pb" if port == "labels"
                            else f"input_{positions.index(port)}.pb")
                    batch.append(nh.to_array(onnx.load_tensor(os.path.join(folder, "data",
                                                                           file))))
                m.close()
            except (RuntimeError, ValueError, tfm_runtime.Error) as e:
                shutil.rmtree(out)
                p.skipped.append(f"train/{label}: {e}")
                continue
            np.savez_compressed(os.path.join(out, "batch.npz"),
                                **{f"in{i}": a for i, a in enumerate(batch)})
            json.dump({"losses": run["losses"]}, open(os.path.join(out, "losses.json"), "w"))


def pack_bench(p):
    """The workloads' libraries only: the GPU machine builds their inputs
    and PyTorch's reference from gpu_workloads.py."""
    import gpu_workloads as W
    for name in W.WORKLOADS:
        out = os.path.join(p.args.out, "bench", name)
        os.makedirs(out, exist_ok=True)
        onnx_path = os.path.join(out, "model.onnx")
        W.export(name, onnx_path)
        # f32, and bf16 and f16 GEMMs on the tensor cores.
        for so, extra in (("model.so", []), ("model-bf16.so", ["--dtype=bf16"]),
                          ("model-f16.so", ["--dtype=f16"])):
            try:
                p.compile(onnx_path, os.path.join(out, so), extra)
            except RuntimeError as e:
                p.skipped.append(f"bench/{name}/{so}: {e}")
        # On sm_90a the generated GEMM once more with cp.async in place of
        # TMA, so that the bench says which pays (b16c).
        if p.args.arch == "sm_90a" and name == "gemm-4096":
            try:
                p.compile(onnx_path, os.path.join(out, "model-bf16-cpasync.so"),
                          ["--dtype=bf16", "--gpu-tma=false"])
            except RuntimeError as e:
                p.skipped.append(f"bench/{name}/model-bf16-cpasync.so: {e}")
        if name in [w for w in W.TRAINING.values()]:
            for train in (t for t, src in W.TRAINING.items() if src == name):
                folder = os.path.join(p.args.out, "bench", train)
                os.makedirs(folder, exist_ok=True)
                try:
                    p.compile(onnx_path, os.path.join(folder, "model.so"),
                              ["--train", "--optimizer=adam", "--lr=1e-3"])
                except RuntimeError as e:
                    p.skipped.append(f"bench/{train}: {e}")
        os.remove(onnx_path)
    pack_decode(p)


def pack_decode(p):
    """W7 and W10: the decoders compiled for cached decoding, the cache on
    the GPU."""
    import importlib
    import torch
    import gpu_workloads as W
    for name in ("w7", "w10"):
        module = importlib.import_module(f"{name}_model")
        out = os.path.join(p.args.out, "bench", name)
        os.makedirs(out, exist_ok=True)
        onnx_path = os.path.join(out, "model.onnx")
        torch.onnx.export(getattr(W, name)(), (module.prompt_ids(),), onnx_path,
                          input_names=["input_ids"], output_names=["logits"],
                          dynamic_axes={"input_ids": {1: "sequence"},
                                        "logits": {1: "sequence"}},
                          opset_version=17)
        for so, extra in (("model.so", []), ("model-bf16.so", ["--dtype=bf16"])):
            try:
                p.compile(onnx_path, os.path.join(out, so),
                          ["--generate", "--max-length", str(module.MAXLEN)] + extra)
            except RuntimeError as e:
                p.skipped.append(f"bench/{name}/{so}: {e}")
        os.remove(onnx_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tfmc", required=True)
    ap.add_argument("--runtime", required=True, help="libtfm_runtime.so")
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--schedule-on-cpu", action="store_true",
                    help="compile the GPU schedule for this CPU (a dry run of the pack)")
    ap.add_argument("--parts", default="models,quantized,fixtures,node,train,bench")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    p = Packer(args)
    parts = {"models": pack_models, "quantized": pack_quantized,
             "fixtures": pack_fixtures, "node": pack_node_suite,
             "train": pack_training, "bench": pack_bench}
    for part in args.parts.split(","):
        print(f"packing {part}", flush=True)
        parts[part](p)
    for line in p.skipped:
        print("not packed:", line)
    json.dump({"arch": args.arch, "schedule_on_cpu": args.schedule_on_cpu,
               "not_packed": p.skipped}, open(os.path.join(args.out, "pack.json"), "w"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
