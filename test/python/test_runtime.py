"""The runtime from Python: entries, zero-copy inputs and outputs, every
error as an exception with its status code, and the GIL released during
runs. The stand-in models (test/unittests/Runtime/fake_model.c) report the
buffers the compiled entry was handed."""

import ctypes
import os
import re
import tempfile
import threading

import numpy as np
import pytest

import tfm
from conftest import FAKE, UNITTESTS, built


def fake(variant=""):
    return built(os.path.join(FAKE, f"libfake_model{variant}.so"))


def probe(variant=""):
    # The same path: the loader hands back the library tfm already mapped.
    lib = ctypes.CDLL(fake(variant))
    lib.fake_seen_buffer.restype = ctypes.c_void_p
    lib.fake_seen_buffer.argtypes = [ctypes.c_int]
    return lib


def test_entries_describe_the_library():
    m = tfm.load(built(os.path.join(UNITTESTS, "tiny_train.so")))
    assert [e.name for e in m.entries] == ["infer", "train_step"]
    step = m.entry("train_step")
    assert [(p.name, p.dtype, p.shape) for p in step.inputs] == [
        ("x", "float32", (4, 3)), ("labels", "int64", (4,))]
    assert [(p.name, p.dtype, p.shape) for p in step.outputs] == [
        ("loss", "float32", ())]


def test_a_session_says_what_runs_its_kernels():
    s = tfm.load(built(os.path.join(UNITTESTS, "tiny_train.so"))).session()
    assert s.device == "cpu"
    assert re.fullmatch(r"cpu; \d+ kernels? in oneDNN \d+\.\d+\.\d+",
                        s.description), s.description
    # TF32 is a GPU's; the CPU ignores it.
    m = tfm.load(built(os.path.join(UNITTESTS, "tiny_train.so")))
    assert m.session(allow_tf32=True).description == s.description


def test_ranges_show_as_none_with_their_bounds():
    m = tfm.load(built(os.path.join(UNITTESTS, "lengths_encoder.so")))
    x = m.entry("infer").inputs[0]
    assert x.shape == (2, None, 32)
    assert x.min_shape == (2, 1, 32) and x.max_shape == (2, 40, 32)


def test_inputs_and_given_outputs_are_used_in_place():
    s = tfm.load(fake()).session()
    lib = probe()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, 2, 3], dtype=np.float32)
    y = np.empty((2, 3), dtype=np.float32)
    out = s.run({"x": x, "bias": b}, out={"y": y})
    assert out["y"] is y
    assert lib.fake_seen_buffer(0) == x.ctypes.data
    assert lib.fake_seen_buffer(1) == b.ctypes.data
    assert lib.fake_seen_buffer(2) == y.ctypes.data
    # x + b + the model's weights [100, 200, 300].
    np.testing.assert_array_equal(y, x + b + np.array([100, 200, 300]))


def test_other_arrays_are_converted_and_still_right():
    s = tfm.load(fake()).session()
    lib = probe()
    x = np.arange(12, dtype=np.float64).reshape(2, 6)[:, ::2]  # strided, f64
    b = [1, 2, 3]
    y = s.run([x, b])["y"]
    assert lib.fake_seen_buffer(0) != x.ctypes.data
    np.testing.assert_array_equal(y, x + np.array(b) + np.array([100, 200, 300]))


def test_new_outputs_are_arrays_over_the_runtimes_buffer():
    s = tfm.load(fake()).session()
    lib = probe()
    y = s.run([np.zeros((2, 3), np.float32), np.zeros(3, np.float32)])["y"]
    assert y.ctypes.data == lib.fake_seen_buffer(2)
    assert y.flags.owndata is False and y.base is not None


def code_of(excinfo):
    return excinfo.value.code, excinfo.value.message


def test_every_failure_is_an_exception_with_its_code(tmp_path):
    with pytest.raises(tfm.NotFound) as e:
        tfm.load(str(tmp_path / "missing.so"))
    assert e.value.code == 2 and "no such model file" in e.value.message
    corrupt = tmp_path / "corrupt.so"
    corrupt.write_bytes(b"\x7fELF" + b"\0" * 60)
    with pytest.raises(tfm.DataLoss):
        tfm.load(str(corrupt))
    with pytest.raises(tfm.Incompatible):
        tfm.load(fake("_abi99"))

    s = tfm.load(fake()).session()
    with pytest.raises(tfm.InvalidArgument) as e:  # shape
        s.run([np.zeros((3, 3), np.float32), np.zeros(3, np.float32)])
    assert e.value.code == 1 and "x" in e.value.message
    with pytest.raises(tfm.InvalidArgument):  # count
        s.run([np.zeros((2, 3), np.float32)])
    with pytest.raises(tfm.InvalidArgument):  # floats for integer token ids
        tfm.load(built(os.path.join(UNITTESTS, "generation_gpt.so"))).session(
        ).run(np.zeros((3, 24), np.float32), entry="infer")
    with pytest.raises(tfm.NotFound) as e:  # input name
        s.run({"z": np.zeros((2, 3), np.float32)})
    assert "x, bias" in e.value.message
    with pytest.raises(tfm.NotFound):  # entry
        s.run([], entry="train_step")
    with pytest.raises(tfm.InvalidArgument):  # a read-only output
        y = np.zeros((2, 3), np.float32)
        y.flags.writeable = False
        s.run([np.zeros((2, 3), np.float32), np.zeros(3, np.float32)],
              out={"y": y})
    with pytest.raises(tfm.InvalidArgument):  # threads
        tfm.load(fake()).session(threads=-1)
    assert issubclass(tfm.InvalidArgument, ValueError)

    lengths = tfm.load(built(os.path.join(UNITTESTS, "lengths_encoder.so")))
    with pytest.raises(tfm.OutOfRange) as e:
        lengths.session().run(np.zeros((2, 41, 32), np.float32))
    assert e.value.code == 9

    train = tfm.load(built(os.path.join(UNITTESTS, "tiny_train.so"))).session()
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(tfm.DataLoss):
        train.load_checkpoint(str(bad))
    with pytest.raises(tfm.NotFound):
        train.load_checkpoint(str(tmp_path / "none.ckpt"))
    with pytest.raises(tfm.FailedPrecondition):
        train.write_profile(str(tmp_path / "p.txt"))  # not a profiling session

    with pytest.raises(tfm.CompileError) as e:
        tfm.compile(b"this is not an ONNX model")
    assert "holds text, not an ONNX model" in e.value.message
    # Named as the caller gave it, not as the temporary file tfmc read.
    assert "'<the model's bytes>'" in e.value.message
    assert tempfile.gettempdir() not in e.value.message
    # And the flags by the arguments they came from.
    bert = os.path.join(os.environ["TFM_SOURCE_DIR"], "test", "models",
                        "bert_opset13", "model.onnx")
    with pytest.raises(tfm.CompileError) as e:
        tfm.compile(bert)
    assert "fix them by symbol (shapes={'batch': N} shapes={'sequence': N})" \
        in e.value.message, e.value.message
    assert "--shape" not in e.value.message
    with pytest.raises(tfm.CompileError) as e:
        tfm.compile(bert, shapes={"nope": 3})
    assert "shapes= names 'nope'" in e.value.message, e.value.message
    assert e.value.exit_code == 1
    with pytest.raises(tfm.InvalidArgument) as e:
        tfm.compile(b"", target="gpu")
    assert "the targets are cpu and cuda" in e.value.message


def test_a_gpu_session_without_a_driver_is_unavailable(monkeypatch):
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has a GPU")
    with pytest.raises((tfm.Unavailable, tfm.Incompatible)) as e:
        tfm.load(built(os.path.join(UNITTESTS, "tiny_train_cuda.so"))).session()
    assert e.value.code in (3, 8)


def test_runs_release_the_gil():
    # One thread's run blocks inside the compiled entry; this thread keeps
    # running Python meanwhile, and a second call on that session is refused.
    m = tfm.load(fake("_blocking"))
    lib = ctypes.CDLL(fake("_blocking"))
    lib.fake_entered_infer.restype = ctypes.c_int
    s = m.session()
    inputs = [np.zeros((2, 3), np.float32), np.zeros(3, np.float32)]
    lib.fake_block(1)
    result = {}
    t = threading.Thread(target=lambda: result.update(s.run(inputs)))
    t.start()
    while not lib.fake_entered_infer():
        pass  # Python runs here only if the run let go of the GIL
    with pytest.raises(tfm.FailedPrecondition) as e:
        s.run(inputs)
    assert "another thread" in e.value.message
    lib.fake_block(0)
    t.join()
    np.testing.assert_array_equal(result["y"][0], [100, 200, 300])


def test_a_run_past_its_timeout_raises_and_changes_nothing():
    s = tfm.load(built(os.path.join(UNITTESTS, "tiny_train.so"))).session()
    x = np.zeros((4, 3), np.float32)
    labels = np.zeros(4, np.int64)
    with pytest.raises(tfm.DeadlineExceeded) as e:
        # A deadline that has passed before the first kernel.
        s.run({"x": x, "labels": labels}, entry="train_step", timeout_ms=1e-9)
    assert e.value.code == 11 and isinstance(e.value, TimeoutError)
    assert s.step_count == 0


def test_versions():
    assert tfm.__version__.count(".") == 2
    assert tfm.model_abi_version >= 5


class OnlyDLPack:
    """An array that offers nothing but DLPack (as PyTorch's tensors do
    besides numpy's protocols), recording the stream it was asked for."""

    def __init__(self, array):
        self.array = array
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.array.__dlpack__() if stream is None else \
            self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_arrays_on_the_host_are_read_in_place():
    s = tfm.load(fake()).session()
    lib = probe()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, 2, 3], dtype=np.float32)
    y = s.run([OnlyDLPack(x), OnlyDLPack(b)], device_outputs=True)["y"]
    assert lib.fake_seen_buffer(0) == x.ctypes.data
    # A CPU session's outputs are numpy arrays, device_outputs or not.
    assert isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, x + b + np.array([100, 200, 300]))
    with pytest.raises(tfm.InvalidArgument) as e:
        s.run([x, b], stream=7)
    assert "use_stream orders a run with a CUDA stream, but the session " \
           "computes on cpu" in str(e.value)


# Runs in a child process: the stand-in CUDA driver is the process's once
# opened, and other tests open none.
GPU_ARRAYS = r'''
import sys
import numpy as np
import tfm
sys.path.insert(0, sys.argv[2])
from test_runtime import OnlyDLPack


class Interface:
    """A GPU array as CuPy hands one over: __cuda_array_interface__ only."""

    def __init__(self, d):
        self.__cuda_array_interface__ = d


def refused(fn, message):
    try:
        fn()
    except tfm.InvalidArgument as e:
        assert message in str(e), (message, str(e))
    else:
        raise AssertionError("accepted: " + message)


s = tfm.load(sys.argv[1]).session()
assert s.device == "cuda:0"
x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
y = s.run({"x": x}, entry="project", device_outputs=True)["y"]
assert isinstance(y, tfm.DeviceTensor), type(y)
assert (y.shape, y.dtype, y.device) == ((2, 3), "float32", "cuda:0"), y
assert y.__dlpack_device__() == (2, 0)
np.testing.assert_array_equal(y.numpy(), 2 * x)
# Back in through DLPack: the capsule tfm exported, asked for on the
# default stream (1).
through = OnlyDLPack(y)
z = s.run([through], entry="project", device_outputs=True)["y"]
assert through.streams == [1], through.streams
np.testing.assert_array_equal(z.numpy(), 4 * x)
# And through the CUDA array interface, to a host output.
cai = dict(z.__cuda_array_interface__)
assert cai["typestr"] == "<f4" and cai["shape"] == (2, 3), cai
w = s.run([Interface(cai)], entry="project")["y"]
assert isinstance(w, np.ndarray)
np.testing.assert_array_equal(w, 8 * x)
# Written into a GPU array the caller gave, on the caller's stream.
given = Interface(cai)
out = s.run({"x": x}, entry="project", out={"y": given}, stream=1234)
assert out["y"] is given
s.synchronize()
np.testing.assert_array_equal(z.numpy(), 2 * x)
# Refused by name.
refused(lambda: s.run([Interface(dict(cai, typestr="<f2"))], entry="project"),
        "entry 'project': input 'x': the array is float16, not float32")
refused(lambda: s.run([Interface(dict(cai, strides=(4, 8)))],
                      entry="project"),
        "entry 'project': input 'x': the array is not C-contiguous")
refused(lambda: s.run({"x": x}, entry="project",
                      out={"y": Interface(dict(cai, data=(cai["data"][0],
                                                          True)))}),
        "output 'y': the array is read-only")
host = np.zeros((2, 3), np.float32)
refused(lambda: s.run([Interface(dict(cai, data=(host.ctypes.data, False)))],
                      entry="project"),
        "is not memory the CUDA driver allocated")
# numpy takes host memory only; the copy is numpy().
try:
    np.from_dlpack(z)
except (RuntimeError, BufferError, TypeError):
    pass
else:
    raise AssertionError("numpy read a GPU's memory")
print("ok")
'''


def test_gpu_arrays_cross_without_the_host(tmp_path):
    import subprocess
    import sys
    lib = os.path.join(os.path.dirname(UNITTESTS), "..", "lib")
    env = dict(os.environ,
               TFM_CUDA_DRIVER=built(os.path.join(lib, "libfake_cuda_driver.so")),
               TFM_CUBLASLT=built(os.path.join(lib, "libfake_cublaslt.so")))
    script = tmp_path / "gpu_arrays.py"
    script.write_text(GPU_ARRAYS)
    r = subprocess.run([sys.executable, str(script), fake("_cuda"),
                        os.path.dirname(__file__)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


NCCL_JOB = r'''
import sys
import numpy as np
import tfm

world = tfm.nccl_communicator(0)
assert (world.rank, world.size) == (0, 1), (world.rank, world.size)
s = tfm.load(sys.argv[1]).session()
assert s.device == "cuda:0"
s._s.set_communicator(world)
a = np.array([1, 2, 3], np.float32)
b = np.arange(4, 10, dtype=np.float32)
out = s.run({"a": a, "b": b, "w": np.array([5], np.float32)}, entry="average")
# One rank's average is its own tensor.
assert (out["a_average"] == a).all() and (out["b_average"] == b).all(), out
try:
    tfm.nccl_communicator(7)
except tfm.InvalidArgument as e:
    assert "there is no GPU cuda:7" in str(e), str(e)
else:
    raise AssertionError("cuda:7 accepted")
# A communicator the session refuses raises (with the lock held again).
cpu = tfm.load(sys.argv[2]).session()
try:
    cpu._s.set_communicator(world)
except tfm.Error as e:
    assert "averages nothing across processes" in str(e), str(e)
else:
    raise AssertionError("a model without exchanges joined")
print("ok")
'''


def test_a_gpu_session_averages_through_nccl(tmp_path):
    """tfm.nccl_communicator through the stand-in driver and NCCL, as the
    one rank of a job the environment describes."""
    import subprocess
    import sys
    lib = os.path.join(os.path.dirname(UNITTESTS), "..", "lib")
    log = tmp_path / "calls.log"
    env = dict(os.environ,
               TFM_CUDA_DRIVER=built(os.path.join(lib, "libfake_cuda_driver.so")),
               TFM_NCCL_LIBRARY=built(os.path.join(lib, "libfake_nccl.so")),
               TFM_FAKE_CUDA_LOG=str(log), TFM_RANK="0", TFM_WORLD_SIZE="1")
    script = tmp_path / "nccl_job.py"
    script.write_text(NCCL_JOB)
    r = subprocess.run([sys.executable, str(script),
                        built(os.path.join(FAKE, "libfake_exchange_model.so")),
                        fake()],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
    calls = log.read_text().splitlines()
    assert "nccl init rank 0 of 1 id -" in calls
    assert "nccl all_reduce 6 type 7 op 5 scale 1 on a stream" in calls
