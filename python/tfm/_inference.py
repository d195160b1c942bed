"""tfm.InferenceSession: the part of ONNX Runtime's session API that most
scripts use, so that a script moves over by changing its import. The model
is compiled once; the library is cached by the hash of the model's bytes
and of the options, in $TFM_CACHE_DIR (default ~/.cache/tfm)."""

import hashlib
import os
import tempfile
import time
import warnings

import numpy as np

from ._compiler import compile as _compile
from ._errors import Error, FailedPrecondition, InvalidArgument, NotFound
from ._session import DeviceTensor, load

__all__ = ["InferenceSession", "IOBinding", "NodeArg", "ModelMetadata",
           "SessionOptions",
           "GraphOptimizationLevel", "get_available_providers", "cache_dir"]

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
    ("tensor(float)") and shape (a varying size by its symbol's name)."""

    def __init__(self, port):
        self.name = port.name
        self.type = _ONNX_TYPES.get(port.dtype, port.dtype)
        # A size that varies is named by its symbol ("sequence").
        self.shape = [sym if dim is None else dim
                      for dim, sym in zip(port.shape, port.symbols)]

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"


def cache_dir():
    return os.environ.get("TFM_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tfm")


_CPU, _CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"


def get_available_providers():
    """The providers this runtime can run on, best first:
    CUDAExecutionProvider where the CUDA driver finds a GPU, and
    CPUExecutionProvider."""
    from . import _tfm
    try:
        _tfm.Context(0, "cuda")
    except Error:
        return [_CPU]
    return [_CUDA, _CPU]


class GraphOptimizationLevel:
    """Accepted for scripts that set it; tfm compiles every model with all
    its fusions, whatever the level."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class SessionOptions:
    """The session options that scripts set. An attribute of another name
    is an error, not a setting silently dropped."""
    __slots__ = ("intra_op_num_threads", "inter_op_num_threads",
                 "graph_optimization_level", "enable_profiling",
                 "profile_file_prefix", "log_severity_level")

    def __init__(self):
        self.intra_op_num_threads = 0  # 0: one per core
        self.inter_op_num_threads = 0  # accepted; a run is one parallel op at a time
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.enable_profiling = False
        self.profile_file_prefix = "tfm_profile"
        self.log_severity_level = 2


def _provider_name(p):
    # A provider is named alone or as (name, options).
    return p[0] if isinstance(p, (tuple, list)) else p


def _choose_target(providers):
    """The target the first usable provider of `providers` names: an unknown
    provider is an error; CUDA without a GPU falls back to the CPU, with a
    warning, as a script written for either expects."""
    if providers is None:
        return "cpu"
    names = [_provider_name(p) for p in providers]
    for n in names:
        if n not in (_CPU, _CUDA):
            raise InvalidArgument(
                f"unknown provider '{n}'; tfm provides {_CUDA} and {_CPU}")
    available = get_available_providers()
    for n in names:
        if n in available:
            return "cuda" if n == _CUDA else "cpu"
    warnings.warn(f"{', '.join(names)} not available here; running on the "
                  f"CPU ({_CPU})")
    return "cpu"


def _external_files(path, data):
    """The files an ONNX model keeps its large tensors in: each
    TensorProto's external_data entry whose key is "location"
    (StringStringEntryProto: field 1 "location", field 2 the file)."""
    files = set()
    marker = b"\n\x08location\x12"
    at = data.find(marker)
    while at >= 0:
        i, length, shift = at + len(marker), 0, 0
        while i < len(data):
            byte = data[i]
            length |= (byte & 0x7F) << shift
            i, shift = i + 1, shift + 7
            if byte < 0x80:
                break
        name = data[i:i + length].decode("utf-8", "replace")
        files.add(os.path.join(os.path.dirname(os.path.abspath(path)), name))
        at = data.find(marker, i + length)
    return sorted(files)


class ModelMetadata:
    """What the ONNX model says of itself (ModelProto's fields and
    metadata_props); empty for a compiled library, which keeps none of it,
    or without the onnx package, which reads it."""

    def __init__(self, proto=None):
        self.producer_name = proto.producer_name if proto else ""
        self.domain = proto.domain if proto else ""
        self.description = proto.doc_string if proto else ""
        self.version = proto.model_version if proto else 0
        self.graph_name = proto.graph.name if proto else ""
        self.graph_description = proto.graph.doc_string if proto else ""
        self.custom_metadata_map = (
            {p.key: p.value for p in proto.metadata_props} if proto else {})


class _DevicePointer:
    """A GPU buffer given by address (io_binding's bind_input), as
    __cuda_array_interface__ describes one, for the session to read."""

    def __init__(self, ptr, shape, dtype):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": np.dtype(dtype).str,
            "data": (int(ptr), False), "version": 3, "strides": None}


class IOBinding:
    """Inputs and outputs bound ahead of a run (InferenceSession.io_binding):
    host arrays, a GPU's arrays (anything with __dlpack__ or
    __cuda_array_interface__, or an address with its type and shape), and
    outputs left on the session's device."""

    def __init__(self, session):
        self._session = session
        self._inputs, self._outputs, self._on_device = {}, [], False
        self._results = None

    def bind_cpu_input(self, name, array):
        self._inputs[name] = np.asarray(array)

    def bind_input(self, name, device_type="cpu", device_id=0,
                   element_type=None, shape=None, buffer_ptr=None):
        """A host array (`device_type` "cpu" and `buffer_ptr` an array), or
        a GPU buffer at address `buffer_ptr` of `element_type` and
        `shape`."""
        if device_type == "cpu":
            self.bind_cpu_input(name, buffer_ptr)
        elif device_type == "cuda":
            if element_type is None or shape is None:
                raise InvalidArgument(
                    f"bind_input('{name}', 'cuda', ...) needs element_type "
                    "and shape beside buffer_ptr")
            self._inputs[name] = _DevicePointer(buffer_ptr, shape, element_type)
        else:
            raise InvalidArgument(
                f"device_type '{device_type}': tfm binds 'cpu' and 'cuda'")

    def bind_ortvalue_input(self, name, value):
        # A GPU's array (torch.Tensor, CuPy) or a host array, as given.
        self._inputs[name] = value

    def bind_output(self, name, device_type="cpu", device_id=0):
        known = [p.name for p in self._session._entry.outputs]
        if name not in known:
            raise NotFound(f"the model has no output '{name}'; its outputs "
                           "are " + ", ".join(known))
        self._outputs.append(name)
        self._on_device = self._on_device or device_type == "cuda"

    def clear_binding_inputs(self):
        self._inputs = {}

    def clear_binding_outputs(self):
        self._outputs, self._on_device = [], False

    def get_outputs(self):
        """The last run's outputs, in the order bound: numpy arrays, or
        tfm.DeviceTensor where an output was bound to the GPU."""
        if self._results is None:
            raise FailedPrecondition("run_with_iobinding has not run yet")
        return [self._results[n] for n in self._bound_outputs()]

    def copy_outputs_to_cpu(self):
        return [o.numpy() if isinstance(o, DeviceTensor) else o
                for o in self.get_outputs()]

    def _bound_outputs(self):
        return self._outputs or [p.name for p in self._session._entry.outputs]


class InferenceSession:
    """InferenceSession(path_or_bytes, sess_options=None, providers=None,
    shapes=None, threads=0, **compile_options).

    A model file is compiled from its path, so its external data (every
    model over 2 GB) is read where it lies; a compiled library (model.so) is
    loaded as it is. `providers` chooses the device (CUDAExecutionProvider
    where get_available_providers() has it); `sess_options` its threads and
    profiling. A model with symbolic sizes needs `shapes` ({"batch": 1,
    "sequence": (1, 512)}), as tfm.compile does."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None,
                 provider_options=None, shapes=None, threads=0,
                 **compile_options):
        options = sess_options or SessionOptions()
        if not isinstance(options, SessionOptions):
            raise InvalidArgument("sess_options is a tfm.SessionOptions")
        threads = threads or options.intra_op_num_threads
        target = _choose_target(providers)
        if "target" not in compile_options and target != "cpu":
            compile_options["target"] = target
        path = None
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
        else:
            path = os.fspath(path_or_bytes)
            with open(path, "rb") as f:
                data = f.read()
        if data.startswith(b"\x7fELF"):
            # Already compiled: nothing to compile or cache.
            if path is None:
                raise InvalidArgument(
                    "the bytes given are a compiled library; give its path")
            self._module = load(path)
            self.artifact_path = path
        else:
            self.artifact_path = self._compiled(path, data, shapes,
                                                compile_options)
            self._module = load(self.artifact_path)
        self._entry = self._module.entry("infer")
        self._session = self._module.session(
            threads=threads, profile=bool(options.enable_profiling))
        self._profile_prefix = options.profile_file_prefix
        self._options = options
        self._source = None if data.startswith(b"\x7fELF") else (
            path if path is not None else data)

    def _compiled(self, path, data, shapes, compile_options):
        """The cached library of the model: keyed by its bytes, its external
        data files' sizes and times, the options and the runtime."""
        key = hashlib.sha256(data)
        if path is not None:
            for f in _external_files(path, data):
                st = os.stat(f) if os.path.exists(f) else None
                key.update(repr((os.path.basename(f), st and st.st_size,
                                 st and st.st_mtime_ns)).encode())
        key.update(repr((sorted((shapes or {}).items()),
                         sorted(compile_options.items()))).encode())
        from . import _tfm  # the runtime that will load it
        key.update(_tfm.runtime_version().encode())
        folder = cache_dir()
        os.makedirs(folder, exist_ok=True)
        cached = os.path.join(folder, key.hexdigest()[:32] + ".so")
        if os.path.exists(cached):
            return cached
        # Compiled beside the cache entry, then renamed: a concurrent or
        # interrupted compile never leaves a partial library there.
        fd, partial = tempfile.mkstemp(suffix=".so", dir=folder)
        os.close(fd)
        try:
            _compile(data if path is None else path, output=partial,
                     shapes=shapes, **compile_options)
            os.replace(partial, cached)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        return cached

    def get_inputs(self):
        return [NodeArg(p) for p in self._entry.inputs]

    def get_outputs(self):
        return [NodeArg(p) for p in self._entry.outputs]

    def get_providers(self):
        return [_CPU] if self._session.device == "cpu" else [_CUDA, _CPU]

    def io_binding(self):
        return IOBinding(self)

    def run_with_iobinding(self, binding, run_options=None):
        names = binding._bound_outputs()
        binding._results = self._session.run(
            binding._inputs, outputs=names,
            device_outputs=binding._on_device)

    def get_modelmeta(self):
        """The model's metadata, read (by the onnx package) when asked."""
        if self._source is None:
            return ModelMetadata()
        try:
            import onnx
            source = self._source
            proto = (onnx.load(source, load_external_data=False)
                     if isinstance(source, str) else onnx.load_from_string(source))
        except Exception:
            return ModelMetadata()
        return ModelMetadata(proto)

    def get_session_options(self):
        return self._options

    def end_profiling(self):
        """Writes the profile of the runs so far (a trace, Chrome's trace
        event format) to PREFIX_TIME.json and returns its path; "" when the
        session was not made with enable_profiling."""
        if not self._options.enable_profiling:
            return ""
        path = f"{self._profile_prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        self._session.write_profile(path)
        return path

    def run(self, output_names, input_feed, run_options=None):
        """Returns the outputs named (all when None), in that order. An
        array of another element type than its input's is an error, not a
        conversion made quietly."""
        if not isinstance(input_feed, dict):
            raise InvalidArgument("input_feed is a dict of input name to array")
        names = list(output_names) if output_names else [
            p.name for p in self._entry.outputs]
        known = {p.name for p in self._entry.outputs}
        for n in names:
            if n not in known:
                raise NotFound(f"the model has no output '{n}'; its outputs "
                               "are " + ", ".join(sorted(known)))
        for port in self._entry.inputs:
            value = input_feed.get(port.name)
            dtype = getattr(value, "dtype", None)
            if isinstance(value, (np.ndarray, np.generic)) and \
                    port.dtype != "bfloat16" and dtype != np.dtype(port.dtype):
                raise InvalidArgument(
                    f"input '{port.name}' is {_ONNX_TYPES.get(port.dtype)}; "
                    f"the array given is {_ONNX_TYPES.get(str(dtype), dtype)}")
        result = self._session.run(input_feed, outputs=names)
        return [result[n] for n in names]
