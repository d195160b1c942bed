"""tfm.InferenceSession: the part of ONNX Runtime's session API that most
scripts use, so that a script moves over by changing its import. The model
is compiled once; the library is cached by the hash of the model's bytes
and of the options, in $TFM_CACHE_DIR (default ~/.cache/tfm)."""

import hashlib
import os
import tempfile

from ._compiler import compile as _compile
from ._errors import InvalidArgument, NotFound

__all__ = ["InferenceSession", "NodeArg", "cache_dir"]

_ONNX_TYPES = {
    "float32": "tensor(float)", "float16": "tensor(float16)",
    "bfloat16": "tensor(bfloat16)", "float64": "tensor(double)",
    "int32": "tensor(int32)", "int64": "tensor(int64)", "bool": "tensor(bool)",
    "int8": "tensor(int8)", "int16": "tensor(int16)", "uint8": "tensor(uint8)",
    "uint16": "tensor(uint16)", "uint32": "tensor(uint32)",
    "uint64": "tensor(uint64)",
}


class NodeArg:
    """An input or output as ONNX Runtime describes it: name, type
    ("tensor(float)") and shape (None where a size varies)."""

    def __init__(self, port):
        self.name = port.name
        self.type = _ONNX_TYPES.get(port.dtype, port.dtype)
        self.shape = list(port.shape)

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"


def cache_dir():
    return os.environ.get("TFM_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tfm")


class InferenceSession:
    """InferenceSession(path_or_bytes, shapes=None, threads=0, **compile_options).

    `sess_options` and `providers` are accepted and ignored (the device is
    the compile's target). A model with symbolic sizes needs `shapes`
    ({"batch": 1, "sequence": (1, 512)}), as tfm.compile does."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None,
                 shapes=None, threads=0, **compile_options):
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
        else:
            with open(os.fspath(path_or_bytes), "rb") as f:
                data = f.read()
        key = hashlib.sha256(data)
        key.update(repr((sorted((shapes or {}).items()),
                         sorted(compile_options.items()))).encode())
        from . import _tfm  # the runtime that will load it
        key.update(_tfm.runtime_version().encode())
        folder = cache_dir()
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, key.hexdigest()[:32] + ".so")
        if os.path.exists(path):
            from ._session import load
            self._module = load(path)
        else:
            # Compiled beside the cache entry, then renamed: a concurrent
            # or interrupted compile never leaves a partial library there.
            fd, partial = tempfile.mkstemp(suffix=".so", dir=folder)
            os.close(fd)
            try:
                _compile(data, output=partial, shapes=shapes, **compile_options)
                os.replace(partial, path)
            finally:
                if os.path.exists(partial):
                    os.unlink(partial)
            from ._session import load
            self._module = load(path)
        self._entry = self._module.entry("infer")
        self._session = self._module.session(threads=threads)
        self.artifact_path = path

    def get_inputs(self):
        return [NodeArg(p) for p in self._entry.inputs]

    def get_outputs(self):
        return [NodeArg(p) for p in self._entry.outputs]

    def get_providers(self):
        return ["CPUExecutionProvider"] if self._session.device == "cpu" else [
            "CUDAExecutionProvider"]

    def run(self, output_names, input_feed, run_options=None):
        """Returns the outputs named (all when None), in that order."""
        if not isinstance(input_feed, dict):
            raise InvalidArgument("input_feed is a dict of input name to array")
        names = list(output_names) if output_names else [
            p.name for p in self._entry.outputs]
        known = {p.name for p in self._entry.outputs}
        for n in names:
            if n not in known:
                raise NotFound(f"the model has no output '{n}'; its outputs "
                               "are " + ", ".join(sorted(known)))
        result = self._session.run(input_feed, outputs=names)
        return [result[n] for n in names]
