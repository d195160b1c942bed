"""The runtime's C API (tfm/runtime.h) through ctypes, for the scripts that
run compiled models where no compiler is installed (the GPU check pack).
Tensors go in and out as numpy arrays, or stay on the GPU as PyTorch's
(Model.device_runner)."""
import ctypes

import numpy as np

# tfm_dtype_t (tfm/dtype.h) and numpy's types. numpy has no bf16: such
# tensors travel as their uint16 bits.
DTYPES = {1: np.float32, 2: np.float16, 4: np.int32, 5: np.int64, 6: np.bool_,
          7: np.float64, 8: np.int8, 9: np.int16, 10: np.uint8, 11: np.uint16,
          12: np.uint32, 13: np.uint64}
CODES = {np.dtype(v): k for k, v in DTYPES.items()}
BF16 = 3


class ContextOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("num_threads", ctypes.c_int32),
                ("device", ctypes.c_char_p)]


class TensorDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_size_t), ("dims", ctypes.POINTER(ctypes.c_int64))]


class RunOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("timeout_ms", ctypes.c_double),
                ("cancel", ctypes.c_void_p), ("outputs_on_device", ctypes.c_int32),
                ("use_stream", ctypes.c_int32), ("stream", ctypes.c_void_p)]


class GenerateOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("max_new_tokens", ctypes.c_int64),
                ("beam_width", ctypes.c_int64), ("length_penalty", ctypes.c_double),
                ("end_token", ctypes.c_int64), ("early_stopping", ctypes.c_int32),
                ("sample", ctypes.c_int32), ("temperature", ctypes.c_double),
                ("top_k", ctypes.c_int64), ("top_p", ctypes.c_double),
                ("seed", ctypes.c_uint64), ("on_token", ctypes.c_void_p),
                ("user_data", ctypes.c_void_p), ("source", ctypes.c_void_p),
                ("source_length", ctypes.c_size_t)]


class Communicator(ctypes.Structure):
    """tfm_communicator_t: its functions stay opaque here."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("rank", ctypes.c_int32),
                ("size", ctypes.c_int32), ("user", ctypes.c_void_p),
                ("all_reduce_sum", ctypes.c_void_p), ("broadcast", ctypes.c_void_p),
                ("all_gather", ctypes.c_void_p), ("reduce_scatter_sum", ctypes.c_void_p),
                ("all_reduce_scaled_sum", ctypes.c_void_p),
                ("device_memory", ctypes.c_int32), ("lagging", ctypes.c_void_p)]


def torch_code(dtype):
    """The tfm_dtype_t of a torch dtype."""
    import torch
    return {torch.float32: 1, torch.float16: 2, torch.bfloat16: BF16, torch.int32: 4,
            torch.int64: 5, torch.bool: 6, torch.float64: 7}[dtype]


def torch_dtype(code):
    import torch
    return {1: torch.float32, 2: torch.float16, BF16: torch.bfloat16, 4: torch.int32,
            5: torch.int64, 6: torch.bool, 7: torch.float64}[code]


class Error(Exception):
    pass


class Runtime:
    def __init__(self, path):
        lib = self.lib = ctypes.CDLL(path)
        p = ctypes.c_void_p
        for name, res, args in [
            ("tfm_status_message", ctypes.c_char_p, [p]),
            ("tfm_status_free", None, [p]),
            ("tfm_context_options_init", None, [ctypes.POINTER(ContextOptions)]),
            ("tfm_context_create", p, [ctypes.POINTER(ContextOptions), ctypes.POINTER(p)]),
            ("tfm_context_release", None, [p]),
            ("tfm_module_load", p, [p, ctypes.c_char_p, ctypes.POINTER(p)]),
            ("tfm_module_release", None, [p]),
            ("tfm_module_entry_num_io", p, [p, ctypes.c_char_p, ctypes.c_int,
                                            ctypes.POINTER(ctypes.c_size_t)]),
            ("tfm_module_entry_io", p, [p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t,
                                        ctypes.POINTER(TensorDesc)]),
            ("tfm_session_create", p, [p, p, ctypes.POINTER(p)]),
            ("tfm_session_release", None, [p]),
            ("tfm_session_device", ctypes.c_char_p, [p]),
            ("tfm_session_describe", ctypes.c_char_p, [p]),
            ("tfm_session_run", p, [p, ctypes.c_char_p, ctypes.POINTER(p), ctypes.c_size_t,
                                    ctypes.POINTER(p), ctypes.c_size_t]),
            ("tfm_tensor_create_copy", p, [ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                                           ctypes.c_size_t, p, ctypes.c_size_t,
                                           ctypes.POINTER(p)]),
            ("tfm_tensor_release", None, [p]),
            ("tfm_tensor_create_device_view", p, [ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                                                  ctypes.c_size_t, ctypes.c_char_p, p,
                                                  ctypes.c_size_t, ctypes.POINTER(p)]),
            ("tfm_run_options_init", None, [ctypes.POINTER(RunOptions)]),
            ("tfm_session_run_with", p, [p, ctypes.c_char_p, ctypes.POINTER(RunOptions), p,
                                         ctypes.POINTER(p), ctypes.c_size_t, p,
                                         ctypes.POINTER(p), ctypes.c_size_t]),
            ("tfm_session_synchronize", p, [p]),
            ("tfm_generate_options_init", None, [ctypes.POINTER(GenerateOptions)]),
            ("tfm_session_generate", p, [p, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
                                         ctypes.POINTER(GenerateOptions), ctypes.POINTER(p)]),
            ("tfm_generation_tokens", ctypes.POINTER(ctypes.c_int64),
             [p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
            ("tfm_generation_prompt_ms", ctypes.c_double, [p]),
            ("tfm_generation_decode_ms", ctypes.c_double, [p]),
            ("tfm_generation_steps", ctypes.c_int64, [p]),
            ("tfm_generation_release", None, [p]),
            ("tfm_nccl_communicator", p, [ctypes.c_int32, p,
                                          ctypes.POINTER(Communicator)]),
            ("tfm_nccl_communicator_destroy", None, [ctypes.POINTER(Communicator)]),
            ("tfm_session_set_communicator", p, [p, ctypes.POINTER(Communicator)]),
            ("tfm_tensor_data", p, [p]),
            ("tfm_tensor_byte_size", ctypes.c_size_t, [p]),
        ]:
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args

    def check(self, status):
        if status:
            message = self.lib.tfm_status_message(status).decode()
            self.lib.tfm_status_free(status)
            raise Error(message)


class Model:
    """A model library loaded into a context on `device`, with one session."""

    def __init__(self, rt, path, device=None, entry="infer"):
        self.rt, self.entry = rt, entry.encode()
        lib = rt.lib
        opts = ContextOptions()
        lib.tfm_context_options_init(ctypes.byref(opts))
        opts.device = device.encode() if device else None
        self.ctx, self.module, self.session = (ctypes.c_void_p() for _ in range(3))
        self._views = []  # the device views of device_runner's calls
        self._communicator = None
        rt.check(lib.tfm_context_create(ctypes.byref(opts), ctypes.byref(self.ctx)))
        rt.check(lib.tfm_module_load(self.ctx, path.encode(), ctypes.byref(self.module)))
        (self.inputs, self.input_codes), (self.outputs, self.output_codes) = \
            self._io(0), self._io(1)

    def _io(self, is_output):
        n = ctypes.c_size_t()
        self.rt.check(self.rt.lib.tfm_module_entry_num_io(self.module, self.entry, is_output,
                                                          ctypes.byref(n)))
        descs, codes = [], []
        for i in range(n.value):
            d = TensorDesc()
            self.rt.check(self.rt.lib.tfm_module_entry_io(self.module, self.entry, is_output,
                                                          i, ctypes.byref(d)))
            code = d.dtype
            descs.append((d.name.decode(),
                          np.uint16 if code == BF16 else DTYPES.get(code),
                          tuple(d.dims[r] for r in range(d.rank))))
            codes.append(code)
        return descs, codes

    def open(self):
        """Creates the session (where a device's failures show)."""
        if not self.session:
            self.rt.check(self.rt.lib.tfm_session_create(self.module, None,
                                                         ctypes.byref(self.session)))
        return self.rt.lib.tfm_session_device(self.session).decode()

    def join_nccl(self):
        """Makes the session one rank of a data-parallel job over NCCL, on
        its GPU: the job the environment describes (TFM_RANK,
        TFM_WORLD_SIZE, TFM_RENDEZVOUS)."""
        device = self.open()
        c = Communicator()
        self.rt.check(self.rt.lib.tfm_nccl_communicator(
            int(device.split(":")[1]), None, ctypes.byref(c)))
        self._communicator = c
        self.rt.check(self.rt.lib.tfm_session_set_communicator(self.session,
                                                               ctypes.byref(c)))

    def describe(self):
        """The session's device and what runs its kernels (cuBLASLt, or the
        model's own code, and why)."""
        self.open()
        return self.rt.lib.tfm_session_describe(self.session).decode()

    def run(self, arrays):
        lib = self.rt.lib
        self.open()
        ins = (ctypes.c_void_p * len(arrays))()
        try:
            for i, a in enumerate(arrays):
                a = np.require(a, requirements="C")  # keeps a 0-d array 0-d
                dims = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
                t = ctypes.c_void_p()
                code = CODES[a.dtype]
                if i < len(self.input_codes) and self.input_codes[i] == BF16 and \
                        a.dtype == np.uint16:
                    code = BF16
                self.rt.check(lib.tfm_tensor_create_copy(
                    code, dims, a.ndim, a.ctypes.data_as(ctypes.c_void_p),
                    a.nbytes, ctypes.byref(t)))
                ins[i] = t.value
            outs = (ctypes.c_void_p * len(self.outputs))()
            self.rt.check(lib.tfm_session_run(self.session, self.entry, ins, len(arrays),
                                              outs, len(self.outputs)))
        finally:
            for t in ins:
                lib.tfm_tensor_release(t)
        results = []
        for t, (_, dtype, shape) in zip(outs, self.outputs):
            n = lib.tfm_tensor_byte_size(t)
            buf = (ctypes.c_char * n).from_address(lib.tfm_tensor_data(t))
            results.append(np.frombuffer(bytes(buf), dtype=dtype).reshape(shape))
            lib.tfm_tensor_release(t)
        return results

    def device_runner(self, inputs, outputs, stream):
        """A call that runs the entry on PyTorch tensors already on the
        session's GPU, `inputs` read and `outputs` written in place,
        ordered on the CUDA stream `stream` (a handle) and returning before
        the GPU is done, as PyTorch's own calls do."""
        lib = self.rt.lib
        device = self.open()

        def view(t):
            assert t.is_contiguous(), "device_runner takes contiguous tensors"
            dims = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
            v = ctypes.c_void_p()
            self.rt.check(lib.tfm_tensor_create_device_view(
                torch_code(t.dtype), dims, t.dim(), device.encode(),
                ctypes.c_void_p(t.data_ptr()), t.numel() * t.element_size(),
                ctypes.byref(v)))
            self._views.append(v.value)  # released by close()
            return v.value

        ins = (ctypes.c_void_p * len(inputs))(*[view(t) for t in inputs])
        outs = (ctypes.c_void_p * len(outputs))(*[view(t) for t in outputs])
        opts = RunOptions()
        lib.tfm_run_options_init(ctypes.byref(opts))
        if device != "cpu":
            opts.use_stream, opts.stream = 1, stream

        def run():
            self.rt.check(lib.tfm_session_run_with(self.session, self.entry,
                                                   ctypes.byref(opts), None, ins,
                                                   len(inputs), None, outs, len(outputs)))
        return run

    def generate(self, prompt, new_tokens):
        """Greedy tokens after `prompt` (a list of ids) through the model's
        cached decoding, with the prompt's and the steps' milliseconds."""
        lib = self.rt.lib
        self.open()
        opts = GenerateOptions()
        lib.tfm_generate_options_init(ctypes.byref(opts))
        opts.max_new_tokens = new_tokens
        ids = (ctypes.c_int64 * len(prompt))(*prompt)
        g = ctypes.c_void_p()
        self.rt.check(lib.tfm_session_generate(self.session, ids, len(prompt),
                                               ctypes.byref(opts), ctypes.byref(g)))
        n = ctypes.c_size_t()
        tokens = lib.tfm_generation_tokens(g, 0, ctypes.byref(n))
        out = ([tokens[i] for i in range(n.value)], lib.tfm_generation_prompt_ms(g),
               lib.tfm_generation_decode_ms(g), lib.tfm_generation_steps(g))
        lib.tfm_generation_release(g)
        return out

    def close(self):
        lib = self.rt.lib
        for v in self._views:
            lib.tfm_tensor_release(v)
        self._views = []
        lib.tfm_session_release(self.session)
        lib.tfm_module_release(self.module)
        lib.tfm_context_release(self.ctx)
        if self._communicator is not None:
            lib.tfm_nccl_communicator_destroy(ctypes.byref(self._communicator))
            self._communicator = None
        self.session = self.module = self.ctx = None
