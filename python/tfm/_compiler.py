"""tfm.compile: the compiler is tfmc, run as a separate process, so that
the package links the runtime alone and a compiler crash cannot take the
interpreter down with it."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from ._errors import CompileError, InvalidArgument
from ._session import Module

__all__ = ["compile", "tfmc_path"]


def tfmc_path():
    """The tfmc that tfm.compile runs: $TFM_TFMC, else the one this package
    was built or installed with, else the first on PATH."""
    candidates = [os.environ.get("TFM_TFMC")]
    try:
        from . import _config
        candidates += _config.tfmc_candidates(os.path.dirname(__file__))
    except ImportError:
        pass
    candidates.append(shutil.which("tfmc"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.normpath(c)
    raise CompileError("tfmc was not found: set TFM_TFMC to its path, or "
                       "put it on PATH")


# tfmc's flags that are on unless turned off: False must say so.
_ON_BY_DEFAULT = {"quantize-check", "gpu-tma"}


def _flag(name, value):
    """--name=value as tfmc spells it (underscores become dashes)."""
    name = name.replace("_", "-")
    if value is True:
        return [f"--{name}"]
    if value is False and name in _ON_BY_DEFAULT:
        return [f"--{name}=false"]
    if value is False or value is None:
        return []
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return [f"--{name}={value}"]


def _graph_inputs(model):
    """The names of an ONNX model's inputs (initializers left out), or None
    when the onnx package is missing or the model is not ONNX."""
    try:
        import onnx
    except ImportError:
        return None
    try:
        if isinstance(model, (bytes, bytearray, memoryview)):
            proto = onnx.load_from_string(bytes(model))
        else:
            proto = onnx.load(os.fspath(model), load_external_data=False)
    except Exception:
        return None
    initializers = {t.name for t in proto.graph.initializer}
    return {i.name for i in proto.graph.input if i.name not in initializers}


def _shape_flags(shapes, model):
    """tfmc's --shape flags for `shapes`: {symbol: n}, {symbol: (lo, hi)}
    (or "lo..hi", or range(lo, hi + 1)) for a range of sizes, {input:
    (2, 128)} for an input's whole shape. A pair is a range for a symbol and
    a shape for an input, which the model's inputs tell apart."""
    flags, inputs = [], None
    for name, size in (shapes or {}).items():
        if isinstance(size, range):
            if size.step != 1 or len(size) == 0:
                raise InvalidArgument(
                    f"shapes['{name}']: a range of sizes is range(lo, hi + 1)")
            flags.append(f"--shape={name}={size.start}..{size.stop - 1}")
        elif isinstance(size, (tuple, list)):
            if len(size) == 2 and all(isinstance(s, int) for s in size):
                if inputs is None:
                    inputs = _graph_inputs(model)
                if inputs is None:
                    raise InvalidArgument(
                        f"shapes['{name}'] = {tuple(size)} is a range of a "
                        "symbol or an input's shape, and without the onnx "
                        f"package tfm cannot tell which: write "
                        f"'{size[0]}..{size[1]}' for a range or "
                        f"'{size[0]}x{size[1]}' for a shape")
                if name not in inputs:
                    # A symbol's range: (1, 512) -> sequence=1..512.
                    flags.append(f"--shape={name}={size[0]}..{size[1]}")
                    continue
            # An input's whole shape: x=(2, 128) -> x=2x128.
            flags.append(f"--shape={name}=" + "x".join(str(s) for s in size))
        else:
            flags.append(f"--shape={name}={size}")
    return flags


def _in_python_terms(message):
    """tfmc's message with its --shape flags written as the shapes=
    argument they came from: "--shape batch=N" becomes
    "shapes={'batch': N}", a bare "--shape" "shapes="; the keyword options
    by their keyword ("--dtype" as "dtype=")."""
    def one(m):
        name, value = m.group(1), m.group(2)
        if "x" in value and not value.isidentifier():
            value = "(" + value.replace("x", ", ") + ")"
        elif ".." in value:
            value = "(" + value.replace("..", ", ") + ")"
        return f"shapes={{'{name}': {value}}}"
    # A flag stands after a space, a parenthesis or a quote, never inside
    # a path ("/tmp/a--b.onnx").
    flag = r"(?<![\w/.-])--"
    message = re.sub(flag + r"shape ([\w./:-]+)=(\S+?)(?=[\s),;]|$)", one,
                     message)
    message = re.sub(flag + r"shape\b", "shapes=", message)
    return re.sub(flag + r"([a-z]+(?:-[a-z]+)*)(?==|\b)",
                  lambda m: m.group(1).replace("-", "_") + "=", message)


def compile(model, output=None, target="cpu", shapes=None, dtype="f32",
            train=None, generate=None, fusion_report=False, **options):
    """Compiles an ONNX (or tfm MLIR) model and returns the loaded Module.

    model: a path, or the bytes of an ONNX model.
    output: where the library goes; None for a temporary file.
    target: "cpu" or "cuda" (gpu_arch="sm_90" chooses the GPU).
    shapes: {symbol: size}; {symbol: (lo, hi)} (or "lo..hi", or
      range(lo, hi + 1)) for a range one artifact serves; {input: (2, 128)}
      (or "2x128") for an input's whole shape (tfmc --shape). A pair names
      a range or a shape as the model's inputs tell.
    dtype: the type the linear layers multiply in: "f32" or "bf16".
    train: True, or the training options as a dict ({"optimizer": "adam",
      "lr": 1e-3, ...}, named as tfmc's flags).
    generate: True, or {"max_length": ..., "prefill_chunk": ...}.
    fusion_report: keep the fusion report, as a dict, in
      module.fusion_report.
    quantize="int8" or "int4" (a tfmc flag, as below) quantizes the float
      linear layers' weights; module.quantization_report then holds, as a
      dict, the layers quantized and kept float and each output's error
      against the float model (quantize_check=False skips the latter;
      quantize_block_size=128 sets int4's blocks).
    Any other keyword is a tfmc compile flag (external_weights=True).
    Raises tfm.CompileError with tfmc's message when the model is refused."""
    keep = None
    if output is None:
        keep = tempfile.TemporaryDirectory(prefix="tfm-")
        output = os.path.join(keep.name, "model.so")
    output = os.fspath(output)
    args = [tfmc_path(), "compile"]
    source = None
    if isinstance(model, (bytes, bytearray, memoryview)):
        source = tempfile.NamedTemporaryFile(suffix=".onnx", delete=False)
        source.write(bytes(model))
        source.close()
        args.append(source.name)
    else:
        args.append(os.fspath(model))
    args += ["-o", output, f"--target={target}", "--quiet"]
    args += _shape_flags(shapes, model)
    if dtype != "f32":
        args.append(f"--dtype={dtype}")
    for group, flag in ((train, "train"), (generate, "generate")):
        if group:
            args.append(f"--{flag}")
            if isinstance(group, dict):
                for k, v in group.items():
                    args += _flag(k, v)
        elif group not in (None, False):
            raise InvalidArgument(f"{flag} takes True or a dict of options")
    for k, v in options.items():
        args += _flag(k, v)
    quantized = options.get("quantize") not in (None, "none")
    if fusion_report or quantized:
        args.append("--fusion-report=json")
    try:
        proc = subprocess.run(args, capture_output=True, text=True)
    finally:
        if source:
            os.unlink(source.name)
    if proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip()
                   or f"tfmc exited with {proc.returncode}")
        if source:
            # The file is ours, not the caller's: name what they gave.
            message = message.replace(source.name, "<the model's bytes>")
        message = _in_python_terms(message)
        # Exit 2 is the CLI's usage error: an option tfm.compile was given.
        error = (InvalidArgument(message) if proc.returncode == 2
                 else CompileError(message))
        error.exit_code = proc.returncode
        raise error
    module = Module(output, _keep=keep)
    if fusion_report or quantized:
        report = json.loads(proc.stdout)
        if fusion_report:
            module.fusion_report = report
        if quantized:
            module.quantization_report = report.get("quantization")
    return module
