"""Modules and sessions: tfm.load, Module.session, Session.run and friends."""

import os
import queue
import threading

import numpy as np

from . import _tfm
from ._errors import InvalidArgument, NotFound

__all__ = ["load", "Module", "Session", "Entry", "Port", "Generation",
           "DeviceTensor", "Communicator", "mpi_communicator",
           "nccl_communicator"]

#: The processes of a data-parallel run: rank and size (docs/training.md).
Communicator = _tfm.Communicator

_mpi_world = None


def mpi_communicator():
    """The MPI job this process was started in (`mpirun -np N python3
    ...`), as a Communicator for Session.train_step. MPI is initialized here
    unless the application (mpi4py, say) did, and finalized when Python
    exits. Needs tfm built with Open MPI (libtfm_mpi)."""
    global _mpi_world
    if _mpi_world is None:
        import atexit
        _mpi_world = _tfm.mpi_communicator()
        atexit.register(_tfm.mpi_finalize)
    return _mpi_world


def nccl_communicator(device=0, bootstrap=None):
    """A Communicator over NCCL for sessions on GPU `device` (the N of
    "cuda:N"), for Session.train_step on a GPU. The ranks agree on NCCL's
    unique id through `bootstrap` (tfm.mpi_communicator() under mpirun), or,
    without one, at the TCP rendezvous the environment describes: TFM_RANK,
    TFM_WORLD_SIZE, and TFM_RENDEZVOUS (host:port, where rank 0 listens).
    NCCL is opened at run time (libnccl.so.2, as PyTorch's CUDA wheels
    install it; TFM_NCCL_LIBRARY names another)."""
    return _tfm.nccl_communicator(device, bootstrap)

#: An output a run made on the GPU (Session.run(..., device_outputs=True)):
#: shape, dtype, device; __dlpack__ and __cuda_array_interface__ hand it to
#: PyTorch or CuPy without a copy (torch.from_dlpack(t)), numpy() copies it
#: to the host.
DeviceTensor = _tfm.DeviceTensor

# DLPack's device types of a GPU's memory (CUDA, CUDA managed).
_DLPACK_GPU = (2, 13)


def _on_gpu(value):
    """Whether `value` is a GPU's array that the runtime takes as it is."""
    if hasattr(value, "__cuda_array_interface__"):
        return True
    if isinstance(value, np.ndarray) or not hasattr(value, "__dlpack__"):
        return False
    return value.__dlpack_device__()[0] in _DLPACK_GPU


def _is_array(value):
    """One array (numpy, or any with __dlpack__ or __cuda_array_interface__),
    not a sequence of them."""
    return (isinstance(value, np.ndarray) or np.isscalar(value)
            or hasattr(value, "__dlpack__")
            or hasattr(value, "__cuda_array_interface__"))


def _stream_handle(stream):
    """A CUDA stream as its handle: an int, or an object with cuda_stream
    (torch.cuda.Stream) or ptr (CuPy's)."""
    if stream is None or isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise InvalidArgument(f"stream must be a CUDA stream handle (an int) or a "
                          f"stream object, not {type(stream).__name__}")


class Port:
    """An input or output of an entry point. `shape` has None where a size
    varies (an entry compiled for a range); `min_shape` and `max_shape` give
    the range, and `symbols` the dimension symbol it follows."""

    def __init__(self, d):
        self.name = d["name"]
        self.dtype = d["dtype"]
        self.shape = tuple(None if s < 0 else s for s in d["shape"])
        self.min_shape = tuple(d["min_shape"])
        self.max_shape = tuple(d["max_shape"])
        #: The dimension symbol each varying size follows ("sequence"),
        #: None where the size is fixed.
        self.symbols = tuple(s or None for s in d["symbols"])

    def __repr__(self):
        dims = ", ".join("?" if s is None else str(s) for s in self.shape)
        return f"Port({self.name!r}, {self.dtype}[{dims}])"


class Entry:
    """An entry point of a compiled model: "infer", "train_step", ..."""

    def __init__(self, d):
        self.name = d["name"]
        self.inputs = [Port(p) for p in d["inputs"]]
        self.outputs = [Port(p) for p in d["outputs"]]

    def __repr__(self):
        return f"Entry({self.name!r}, inputs={self.inputs}, outputs={self.outputs})"


def _numpy_dtype(name):
    # numpy has no bfloat16: the runtime's bits, as uint16.
    return np.dtype("uint16" if name == "bfloat16" else name)


def _to_bfloat16_bits(a):
    """Rounds float values to the nearest bfloat16 (ties to even), as bits."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = bits + (0x7FFF + ((bits >> 16) & 1))
    out = (rounded >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    out[nan] = 0x7FC0
    return out


def _as_input(value, port):
    """`value` as an array the runtime reads in place: the same array when
    it is C-contiguous, aligned and of the port's dtype, else a converted
    copy. A GPU's array is passed as it is (the runtime checks it); another
    with __dlpack__ (a CPU torch.Tensor) is viewed as a numpy array."""
    if _on_gpu(value):
        return value
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        value = np.from_dlpack(value)
    want = _numpy_dtype(port.dtype)
    if not isinstance(value, np.ndarray):
        value = np.asarray(value, dtype=None if port.dtype == "bfloat16" else want)
    a = value
    if port.dtype == "bfloat16" and a.dtype != np.uint16:
        return _to_bfloat16_bits(a)
    if a.dtype == want and a.flags.c_contiguous and a.flags.aligned:
        return a
    if a.dtype.kind in "fc" and want.kind in "iub":
        # Floats fed to an integer input (token ids, labels) are a mistake,
        # not a conversion to make quietly.
        raise InvalidArgument(
            f"input '{port.name}' is {port.dtype}; got an array of {a.dtype}")
    return np.ascontiguousarray(a, dtype=want)


class Module:
    """A compiled model library (model.so), loaded. Sessions of one module
    share its code and weights."""

    def __init__(self, path, _keep=None):
        self.path = os.fspath(path)
        self._modules = {}
        self._keep = _keep  # a temporary folder the library lives in
        self.fusion_report = None
        self._default = self._module(0, "")
        self.entries = [Entry(e) for e in self._default.entries()]

    def _module(self, threads, device):
        key = (threads, device)
        if key not in self._modules:
            ctx = _tfm.Context(threads, device)
            self._modules[key] = _tfm.Module(ctx, self.path)
        return self._modules[key]

    def entry(self, name):
        for e in self.entries:
            if e.name == name:
                return e
        raise NotFound(f"the model has no entry '{name}'; its entries are "
                       + ", ".join(e.name for e in self.entries))

    @property
    def generation_max_length(self):
        """The longest sequence of a model compiled with generate; else 0."""
        return self._default.generation_max_length

    def session(self, threads=0, device=None, profile=False,
                allow_tf32=False):
        """A new session: its own arena and, for a training model, its own
        parameters and optimizer state. `threads` 0 lets the runtime choose;
        `device` is "cpu", "cuda" or "cuda:N" (None: what the model was
        compiled for). `allow_tf32` lets a GPU multiply f32 GEMMs in TF32
        (10-bit mantissa operands, f32 accumulation), as PyTorch's flag of
        that name; f32 runs as f32 without it."""
        if threads < 0:
            raise InvalidArgument(f"threads must be 0 or more, not {threads}")
        return Session(self, self._module(int(threads), device or ""), profile,
                       allow_tf32)

    def __repr__(self):
        return f"tfm.Module({self.path!r}, entries={[e.name for e in self.entries]})"


def load(path):
    """Loads a library that `tfmc compile` (or tfm.compile) wrote."""
    return Module(path)


class Generation:
    """The result of Session.generate: the new tokens, best first."""

    def __init__(self, d):
        self.sequences = d["sequences"]
        self.scores = d["scores"]
        self.prompt_ms = d["prompt_ms"]
        self.decode_ms = d["decode_ms"]
        self.steps = d["steps"]

    @property
    def tokens(self):
        """The best sequence's new tokens."""
        return self.sequences[0]

    def __repr__(self):
        return f"Generation(tokens={self.tokens}, steps={self.steps})"


class Session:
    """A model in use. One call at a time: a call while another thread is
    inside one on the same session raises tfm.FailedPrecondition. Runs
    release the GIL, so sessions on several threads run in parallel."""

    def __init__(self, module, native_module, profile, allow_tf32=False):
        self.module = module
        self._s = _tfm.Session(native_module, bool(profile), bool(allow_tf32))
        self._communicator = None

    @property
    def device(self):
        return self._s.device

    @property
    def description(self):
        """The device and what runs the model's kernels, for people:
        "cpu; 3 kernels in oneDNN 2.6.3", "cuda:0; 14 kernels in cuBLASLt
        13.0.2", or the kernels the session declined and why."""
        return self._s.description

    def _default_entry(self):
        names = [e.name for e in self.module.entries]
        if "infer" in names:
            return "infer"
        if len(names) == 1:
            return names[0]
        raise InvalidArgument("the model has entries " + ", ".join(names)
                              + "; name one with entry=")

    def _feed(self, entry, inputs):
        """Named, converted inputs of `entry` from a dict, a sequence (by
        position) or one array."""
        if isinstance(inputs, dict):
            ports = {p.name: p for p in entry.inputs}
            feed = {}
            for name, value in inputs.items():
                if name not in ports:
                    raise NotFound(
                        f"entry '{entry.name}' has no input '{name}'; its "
                        "inputs are " + ", ".join(ports))
                feed[name] = _as_input(value, ports[name])
            return feed
        if _is_array(inputs):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(entry.inputs):
            raise InvalidArgument(
                f"entry '{entry.name}' takes {len(entry.inputs)} inputs ("
                + ", ".join(p.name for p in entry.inputs)
                + f"); got {len(inputs)}")
        return {p.name: _as_input(v, p) for p, v in zip(entry.inputs, inputs)}

    def run(self, inputs, entry=None, outputs=None, out=None, timeout_ms=0,
            device_outputs=False, stream=None):
        """Runs `entry` (default "infer") and returns {output name: array}.

        inputs: {name: array}, a list by position, or one array. An array
          that is C-contiguous and of the input's dtype is read in place: a
          numpy array, or on a GPU session a GPU's array (any object with
          __dlpack__ or __cuda_array_interface__: a torch.Tensor on the
          GPU, CuPy), which never passes through the host.
        outputs: the output names wanted (default all).
        out: {name: array} written in place (C-contiguous, writable, of the
          output's dtype and shape, on the host or the session's GPU); the
          result holds the same arrays.
        timeout_ms: raise tfm.DeadlineExceeded past this (0: no limit).
        device_outputs: new outputs stay on the session's GPU, as
          tfm.DeviceTensor (torch.from_dlpack takes them without a copy);
          a CPU session's are numpy arrays either way.
        stream: the CUDA stream (a handle, or a torch.cuda.Stream) a run
          with a GPU's arrays is ordered on, as PyTorch orders its work;
          None: the default stream. Such a run returns before the GPU is
          done, unless an output is on the host or the model checks
          indices (token ids), whose outcome is read after the run."""
        e = self.module.entry(entry or self._default_entry())
        feed = self._feed(e, inputs)
        names = list(outputs) if outputs is not None else [p.name for p in e.outputs]
        for n in (out or {}):
            if n not in names:
                raise NotFound(f"entry '{e.name}' has no output '{n}' among "
                               "those asked for: " + ", ".join(names))
        return self._s.run(e.name, feed, names, dict(out or {}),
                           float(timeout_ms), bool(device_outputs),
                           _stream_handle(stream))

    def synchronize(self):
        """Waits until the GPU has finished the session's runs (a run with
        a GPU's arrays returns before)."""
        self._s.synchronize()

    def train_step(self, inputs, labels, communicator=None):
        """Runs one step of "train_step" (a model compiled with train) and
        returns the loss. `inputs` are the model's inputs (a dict, a list or
        one array); `labels` fills the entry's remaining input.

        With a `communicator` (tfm.mpi_communicator() on CPUs,
        tfm.nccl_communicator() on GPUs), the session is one
        rank of a data-parallel run: each rank passes its own rows, and the
        step averages the loss and the gradients over all ranks, weighted by
        the labels each counts, so they step as one process would on all the
        rows. The first such step copies rank 0's parameters and optimizer
        state to every rank; every rank must call it, with the same
        model."""
        if communicator is not self._communicator:
            self._s.set_communicator(communicator)
            self._communicator = communicator
        e = self.module.entry("train_step")
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if _is_array(inputs):
                inputs = [inputs]
            feed = {p.name: v for p, v in zip(e.inputs, inputs)}
        rest = [p.name for p in e.inputs if p.name not in feed]
        if len(rest) != 1:
            raise InvalidArgument(
                "train_step's inputs are " + ", ".join(p.name for p in e.inputs)
                + "; the labels must fill exactly one left by the inputs")
        feed[rest[0]] = labels
        result = self.run(feed, entry="train_step")
        return float(np.asarray(next(iter(result.values()))).reshape(()))

    def compare_parameters(self):
        """Raises tfm.FailedPrecondition, naming them, when some ranks of
        the session's data-parallel run hold other parameters than rank 0
        (every rank calls it); does nothing in one process."""
        self._s.compare_parameters()

    def parameters(self):
        """{name: array}: copies of the trainable parameters, in order."""
        return {n: self._s.get_parameter(n) for n in self._s.parameter_names()}

    def set_parameter(self, name, value):
        self._s.set_parameter(name, np.asarray(value))

    @property
    def step_count(self):
        return self._s.step_count

    def save_checkpoint(self, path):
        """Writes the training state to `path`. In a data-parallel run every
        rank calls it (a model compiled with --shard-optimizer gathers the
        moments' parts); a rank that only contributes passes None."""
        self._s.save_checkpoint(None if path is None else os.fspath(path))

    def load_checkpoint(self, path):
        self._s.load_checkpoint(os.fspath(path))

    def write_profile(self, path):
        """The kernels' times (a session made with profile=True): a Chrome
        trace when `path` ends in .json, else the table."""
        path = os.fspath(path)
        self._s.write_profile(path, path.endswith(".json"))

    def generate(self, prompt_ids, max_new_tokens=16, beam=1, temperature=None,
                 top_k=None, top_p=None, seed=None, length_penalty=0.0,
                 end_token=-1, source_ids=None, stream=False):
        """Extends `prompt_ids` with the model's @prefill and @decode_step (a
        model compiled with generate). Greedy by default; `beam` > 1 for beam
        search; `temperature`, `top_k`, `top_p` or `seed` to sample.
        Returns a Generation; with stream=True, an iterator over each step's
        tokens (one per live hypothesis) as they come."""
        sample = any(v is not None for v in (temperature, top_k, top_p, seed))
        if sample and beam != 1:
            raise InvalidArgument("sampling keeps one hypothesis; beam must be 1")
        args = ([int(t) for t in prompt_ids], int(max_new_tokens), int(beam),
                float(length_penalty), int(end_token), sample,
                1.0 if temperature is None else float(temperature),
                0 if top_k is None else int(top_k),
                1.0 if top_p is None else float(top_p),
                0 if seed is None else int(seed),
                None if source_ids is None else [int(t) for t in source_ids])
        if not stream:
            return Generation(self._s.generate(*args, None))
        return self._stream(args)

    def _stream(self, args):
        # The generation runs on a thread of its own (without the GIL); each
        # step's tokens come through a queue. Closing the iterator early
        # stops the generation at its next step.
        tokens = queue.Queue()
        stop = threading.Event()
        done = object()
        failure = []

        def on_token(step, live):
            tokens.put(live)
            return stop.is_set()

        def work():
            try:
                self._s.generate(*args, on_token)
            except BaseException as e:  # raised in the consumer
                failure.append(e)
            finally:
                tokens.put(done)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        try:
            while True:
                item = tokens.get()
                if item is done:
                    break
                yield item
        finally:
            stop.set()
            thread.join()
        if failure:
            raise failure[0]
