//===- Bindings.cpp - tfm._tfm: the runtime's C API for Python ------------===//
//
// A thin layer over runtime.h: contexts, modules, sessions, runs,
// training state and generation. The friendly API (tfm.load, sessions that
// take dicts, InferenceSession) is Python, in tfm/__init__.py. Arrays cross
// without copies where they can: a C-contiguous input of the entry's dtype
// becomes a view the compiled code reads in place, a given output array a
// view it writes, and every new output an array over the runtime's own
// buffer, which the array keeps alive. A GPU's arrays cross the same way,
// through DLPack or __cuda_array_interface__ (a torch.Tensor, CuPy), and
// outputs made on the device come back as DeviceTensors, which export
// both. Runs release the GIL.
//
//===----------------------------------------------------------------------===//

#include "tfm/mpi.h"
#include "tfm/runtime.h"

#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

/// Raises the tfm.Error subclass of status `code`.
[[noreturn]] void raise(int code, const std::string &message) {
  py::object error =
      py::module_::import("tfm._errors").attr("error_for")(code, message);
  PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(error.ptr())),
                  error.ptr());
  throw py::error_already_set();
}

/// Raises the tfm.Error subclass of a failed status, freeing it.
void check(tfm_status_t status) {
  if (!status)
    return;
  int code = tfm_status_code(status);
  std::string message = tfm_status_message(status);
  tfm_status_free(status);
  raise(code, message);
}

py::dtype numpyDtype(tfm_dtype_t dtype) {
  switch (dtype) {
  case TFM_DTYPE_F32: return py::dtype("float32");
  case TFM_DTYPE_F16: return py::dtype("float16");
  // numpy has no bfloat16: its bits, as the runtime stores them.
  case TFM_DTYPE_BF16: return py::dtype("uint16");
  case TFM_DTYPE_I32: return py::dtype("int32");
  case TFM_DTYPE_I64: return py::dtype("int64");
  case TFM_DTYPE_BOOL: return py::dtype("bool");
  case TFM_DTYPE_F64: return py::dtype("float64");
  case TFM_DTYPE_I8: return py::dtype("int8");
  case TFM_DTYPE_I16: return py::dtype("int16");
  case TFM_DTYPE_U8: return py::dtype("uint8");
  case TFM_DTYPE_U16: return py::dtype("uint16");
  case TFM_DTYPE_U32: return py::dtype("uint32");
  case TFM_DTYPE_U64: return py::dtype("uint64");
  }
  throw std::invalid_argument("unknown tfm dtype " + std::to_string(dtype));
}

const char *dtypeName(tfm_dtype_t dtype) {
  switch (dtype) {
  case TFM_DTYPE_F32: return "float32";
  case TFM_DTYPE_F16: return "float16";
  case TFM_DTYPE_BF16: return "bfloat16";
  case TFM_DTYPE_I32: return "int32";
  case TFM_DTYPE_I64: return "int64";
  case TFM_DTYPE_BOOL: return "bool";
  case TFM_DTYPE_F64: return "float64";
  case TFM_DTYPE_I8: return "int8";
  case TFM_DTYPE_I16: return "int16";
  case TFM_DTYPE_U8: return "uint8";
  case TFM_DTYPE_U16: return "uint16";
  case TFM_DTYPE_U32: return "uint32";
  case TFM_DTYPE_U64: return "uint64";
  }
  return "unknown";
}

/// An owned tensor as an array over its buffer; the array's base keeps the
/// tensor alive.
py::array adopt(tfm_tensor_t *t) {
  py::capsule owner(t, [](void *p) {
    tfm_tensor_release(static_cast<tfm_tensor_t *>(p));
  });
  const int64_t *d = tfm_tensor_dims(t);
  std::vector<py::ssize_t> dims(d, d + tfm_tensor_rank(t));
  return py::array(numpyDtype(tfm_tensor_dtype(t)), dims, tfm_tensor_data(t),
                   owner);
}

struct TensorDeleter {
  void operator()(tfm_tensor_t *t) const { tfm_tensor_release(t); }
};
using TensorPtr = std::unique_ptr<tfm_tensor_t, TensorDeleter>;

/// A view of `a`'s memory as a tensor of `dtype`; `a` must be C-contiguous,
/// aligned and of that dtype (the Python layer converts what is not).
TensorPtr viewOf(py::array a, tfm_dtype_t dtype, bool writable) {
  if (!(a.flags() & py::array::c_style))
    raise(TFM_STATUS_INVALID_ARGUMENT, "the array is not C-contiguous");
  if (!a.dtype().is(numpyDtype(dtype)))
    raise(TFM_STATUS_INVALID_ARGUMENT,
          std::string("the array is not of dtype ") + dtypeName(dtype));
  if (writable && !a.writeable())
    raise(TFM_STATUS_INVALID_ARGUMENT,
          "an output array is read-only; the run cannot write into it");
  std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
  tfm_tensor_t *t = nullptr;
  check(tfm_tensor_create_view(dtype, dims.data(), dims.size(),
                               const_cast<void *>(a.data()),
                               static_cast<size_t>(a.nbytes()), &t));
  return TensorPtr(t);
}

/// DLPack's code for bool, which came after the version Debian ships.
constexpr uint8_t kDLBoolCode = 6;

/// The DLPack type of a tfm dtype.
DLDataType dlpackTypeOf(tfm_dtype_t dtype) {
  auto bits = static_cast<uint8_t>(8 * tfm_dtype_size(dtype));
  switch (dtype) {
  case TFM_DTYPE_F32:
  case TFM_DTYPE_F16:
  case TFM_DTYPE_F64:
    return {kDLFloat, bits, 1};
  case TFM_DTYPE_BF16:
    return {kDLBfloat, bits, 1};
  case TFM_DTYPE_BOOL:
    return {kDLBoolCode, bits, 1};
  case TFM_DTYPE_U8:
  case TFM_DTYPE_U16:
  case TFM_DTYPE_U32:
  case TFM_DTYPE_U64:
    return {kDLUInt, bits, 1};
  default:
    return {kDLInt, bits, 1};
  }
}

/// The tfm dtype of a DLPack type; 0 for one tfm has not.
tfm_dtype_t dtypeOfDLPack(DLDataType t) {
  for (int d = 1; d <= TFM_DTYPE_U64; ++d) {
    auto dtype = static_cast<tfm_dtype_t>(d);
    DLDataType want = dlpackTypeOf(dtype);
    if (tfm_dtype_size(dtype) && t.code == want.code &&
        t.bits == want.bits && t.lanes == want.lanes)
      return dtype;
  }
  return static_cast<tfm_dtype_t>(0);
}

/// The tfm dtype of a __cuda_array_interface__ typestr ("<f4"); 0 for one
/// tfm has not. bfloat16 has none.
tfm_dtype_t dtypeOfTypestr(const std::string &typestr) {
  if (typestr.size() != 3 || typestr[0] == '>')
    return static_cast<tfm_dtype_t>(0);
  std::string kind = typestr.substr(1);
  for (int d = 1; d <= TFM_DTYPE_U64; ++d) {
    auto dtype = static_cast<tfm_dtype_t>(d);
    if (dtype == TFM_DTYPE_BF16 || !tfm_dtype_size(dtype))
      continue;
    py::dtype nd = numpyDtype(dtype);
    std::string want =
        std::string(1, nd.kind()) + std::to_string(nd.itemsize());
    if (kind == want)
      return dtype;
  }
  return static_cast<tfm_dtype_t>(0);
}

/// Whether `strides` (in units of `unit`; null: compact) lay out `dims`
/// densely in row-major order; a dim of size 1 may have any stride.
bool rowMajor(const std::vector<int64_t> &dims, const int64_t *strides,
              int64_t unit) {
  if (!strides)
    return true;
  int64_t expected = unit;
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] != 1 && strides[i] != expected)
      return false;
    expected *= dims[i];
  }
  return true;
}

struct ManagedDeleter {
  void operator()(DLManagedTensor *m) const {
    if (m->deleter)
      m->deleter(m);
  }
};
/// A DLPack tensor consumed from a capsule, released when the run is done.
using ManagedPtr = std::unique_ptr<DLManagedTensor, ManagedDeleter>;

/// Why a foreign array cannot be `what` (an entry's input 'x'): raises.
[[noreturn]] void refuse(const std::string &what, const std::string &why) {
  raise(TFM_STATUS_INVALID_ARGUMENT, what + ": " + why);
}

/// A view of the memory of `obj`, an array with __cuda_array_interface__
/// or __dlpack__ (a torch.Tensor, CuPy): dense, row-major, of `dtype`.
/// `gpu` names the GPU a CUDA array interface's pointer is taken for
/// (checked by the run); `stream` is the CUDA stream the run is ordered on
/// (0: the default), which a DLPack producer orders its work before.
/// `keep` receives what must live until the run ends.
TensorPtr viewOfForeign(py::handle obj, const std::string &what,
                        tfm_dtype_t dtype, bool writable,
                        const std::string &gpu, intptr_t stream,
                        std::vector<ManagedPtr> &keep) {
  tfm_tensor_t *t = nullptr;
  if (py::hasattr(obj, "__cuda_array_interface__")) {
    py::dict cai = obj.attr("__cuda_array_interface__");
    std::string typestr = py::cast<std::string>(cai["typestr"]);
    tfm_dtype_t got = dtypeOfTypestr(typestr);
    if (got != dtype)
      refuse(what, std::string("the array is ") +
                       (got ? dtypeName(got) : typestr.c_str()) + ", not " +
                       dtypeName(dtype));
    py::tuple data = cai["data"];
    if (writable && py::cast<bool>(data[1]))
      refuse(what, "the array is read-only; the run cannot write into it");
    std::vector<int64_t> dims = py::cast<std::vector<int64_t>>(cai["shape"]);
    std::vector<int64_t> strides;
    if (cai.contains("strides") && !cai["strides"].is_none())
      strides = py::cast<std::vector<int64_t>>(cai["strides"]);
    size_t width = tfm_dtype_size(dtype);
    if (!rowMajor(dims, strides.empty() ? nullptr : strides.data(),
                  static_cast<int64_t>(width)))
      refuse(what, "the array is not C-contiguous");
    size_t bytes = width;
    for (int64_t d : dims)
      bytes *= static_cast<size_t>(d);
    auto *p = reinterpret_cast<void *>(py::cast<uintptr_t>(data[0]));
    check(tfm_tensor_create_device_view(dtype, dims.data(), dims.size(),
                                        gpu.c_str(), p, bytes, &t));
    return TensorPtr(t);
  }
  if (!py::hasattr(obj, "__dlpack__"))
    refuse(what, "expected an array (numpy, or one with __dlpack__ or "
                 "__cuda_array_interface__), not " +
                     py::cast<std::string>(py::str(obj.get_type())));
  py::tuple device = obj.attr("__dlpack_device__")();
  int type = py::cast<int>(device[0]), id = py::cast<int>(device[1]);
  bool onGpu = type == kDLCUDA || type == kDLCUDAManaged;
  if (!onGpu && type != kDLCPU && type != kDLCUDAHost)
    refuse(what, "the array is on a device tfm does not run on (DLPack "
                 "device type " +
                     std::to_string(type) + ")");
  // DLPack's streams: 1 is the default (legacy) stream, 0 is not allowed.
  py::object capsule =
      onGpu ? obj.attr("__dlpack__")(py::arg("stream") = stream ? stream : 1)
            : obj.attr("__dlpack__")();
  auto *managed = static_cast<DLManagedTensor *>(
      PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed)
    throw py::error_already_set();
  // Consumed: the producer's capsule no longer frees it; `keep` does.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  keep.emplace_back(managed);
  const DLTensor &dl = managed->dl_tensor;
  tfm_dtype_t got = dtypeOfDLPack(dl.dtype);
  if (got != dtype)
    refuse(what, std::string("the array is ") +
                     (got ? dtypeName(got) : "of a type tfm has not") +
                     ", not " + dtypeName(dtype));
  std::vector<int64_t> dims(dl.shape, dl.shape + dl.ndim);
  if (!rowMajor(dims, dl.strides, 1))
    refuse(what, "the array is not C-contiguous");
  size_t bytes = tfm_dtype_size(dtype);
  for (int64_t d : dims)
    bytes *= static_cast<size_t>(d);
  std::string name = onGpu ? "cuda:" + std::to_string(id) : "cpu";
  check(tfm_tensor_create_device_view(
      dtype, dims.data(), dims.size(), name.c_str(),
      static_cast<char *>(dl.data) + dl.byte_offset, bytes, &t));
  return TensorPtr(t);
}

struct Session;

/// An output a run made on the GPU. It exports itself through DLPack and
/// __cuda_array_interface__ without a copy, and to numpy with one.
struct DeviceTensor {
  std::shared_ptr<tfm_tensor_t> t;
  std::shared_ptr<Session> session;
  /// The CUDA stream the run was ordered on (0: the default).
  intptr_t stream = 0;

  std::vector<int64_t> shape() const {
    const int64_t *d = tfm_tensor_dims(t.get());
    return std::vector<int64_t>(d, d + tfm_tensor_rank(t.get()));
  }
  std::string dtype() const { return dtypeName(tfm_tensor_dtype(t.get())); }
  std::string device() const { return tfm_tensor_device(t.get()); }
  int ordinal() const { return std::stoi(device().substr(5)); }
  /// Makes the data safe to use on `consumer` (a DLPack stream: None or 1
  /// the default, 2 the per-thread one, else a handle).
  void readyFor(py::object consumer);
  py::object dlpack(py::object consumer);
  py::tuple dlpackDevice() const {
    return py::make_tuple(static_cast<int>(kDLCUDA), ordinal());
  }
  py::dict cudaArrayInterface() const;
  py::array numpy() const {
    tfm_tensor_t *host = nullptr;
    check(tfm_tensor_copy_to_host(t.get(), &host));
    return adopt(host);
  }
};

/// What a DLPack capsule of a DeviceTensor owns.
struct Exported {
  DLManagedTensor managed;
  std::shared_ptr<tfm_tensor_t> keep;
  std::vector<int64_t> shape;
};

py::object DeviceTensor::dlpack(py::object consumer) {
  readyFor(consumer);
  auto *e = new Exported{};
  e->keep = t;
  e->shape = shape();
  DLTensor &dl = e->managed.dl_tensor;
  dl.data = tfm_tensor_data(t.get());
  dl.device = {kDLCUDA, ordinal()};
  dl.ndim = static_cast<int32_t>(e->shape.size());
  dl.dtype = dlpackTypeOf(tfm_tensor_dtype(t.get()));
  dl.shape = e->shape.data();
  dl.strides = nullptr;
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = [](DLManagedTensor *m) {
    delete static_cast<Exported *>(m->manager_ctx);
  };
  PyObject *capsule = PyCapsule_New(&e->managed, "dltensor", [](PyObject *c) {
    // Never consumed: still ours to free.
    if (PyCapsule_IsValid(c, "dltensor")) {
      auto *m =
          static_cast<DLManagedTensor *>(PyCapsule_GetPointer(c, "dltensor"));
      m->deleter(m);
    }
  });
  if (!capsule) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

py::dict DeviceTensor::cudaArrayInterface() const {
  tfm_dtype_t dtype = tfm_tensor_dtype(t.get());
  if (dtype == TFM_DTYPE_BF16)
    throw py::attribute_error(
        "__cuda_array_interface__ has no bfloat16; use __dlpack__");
  py::dtype nd = numpyDtype(dtype);
  py::dict d;
  d["shape"] = py::tuple(py::cast(shape()));
  d["typestr"] = std::string(dtype == TFM_DTYPE_BOOL ? "|" : "<") + nd.kind() +
                 std::to_string(nd.itemsize());
  d["data"] = py::make_tuple(
      reinterpret_cast<uintptr_t>(tfm_tensor_data(t.get())), false);
  d["strides"] = py::none();
  d["version"] = 3;
  // The stream the data is ready on; the consumer orders its work after.
  d["stream"] = stream ? stream : 1;
  return d;
}

struct Context {
  tfm_context_t *ctx = nullptr;
  Context(int32_t threads, const std::string &device) {
    tfm_context_options_t o;
    tfm_context_options_init(&o);
    o.num_threads = threads;
    o.device = device.empty() ? nullptr : device.c_str();
    check(tfm_context_create(&o, &ctx));
  }
  ~Context() { tfm_context_release(ctx); }
  Context(const Context &) = delete;
};

struct Module {
  std::shared_ptr<Context> context;
  tfm_module_t *m = nullptr;
  Module(std::shared_ptr<Context> c, const std::string &path) : context(c) {
    tfm_status_t status;
    {
      py::gil_scoped_release unlocked;
      status = tfm_module_load(c->ctx, path.c_str(), &m);
    }
    check(status);
  }
  ~Module() { tfm_module_release(m); }
  Module(const Module &) = delete;

  py::dict port(const std::string &entry, int isOutput, size_t i) const {
    tfm_tensor_desc_t d;
    check(tfm_module_entry_io(m, entry.c_str(), isOutput, i, &d));
    std::vector<int64_t> dims(d.dims, d.dims + d.rank), lo(d.rank), hi(d.rank);
    check(tfm_module_entry_io_range(m, entry.c_str(), isOutput, i,
                                    d.rank ? lo.data() : nullptr,
                                    d.rank ? hi.data() : nullptr));
    py::dict p;
    p["name"] = d.name;
    p["dtype"] = dtypeName(d.dtype);
    p["shape"] = py::tuple(py::cast(dims));
    p["min_shape"] = py::tuple(py::cast(lo));
    p["max_shape"] = py::tuple(py::cast(hi));
    std::vector<std::string> symbols(d.rank);
    for (size_t r = 0; r < d.rank; ++r) {
      const char *symbol = "";
      check(tfm_module_entry_io_symbol(m, entry.c_str(), isOutput, i, r,
                                       &symbol));
      symbols[r] = symbol;
    }
    p["symbols"] = py::tuple(py::cast(symbols));
    return p;
  }

  py::list entries() const {
    py::list out;
    for (size_t e = 0, n = tfm_module_num_entries(m); e < n; ++e) {
      std::string name = tfm_module_entry_name(m, e);
      py::dict entry;
      entry["name"] = name;
      for (int isOutput = 0; isOutput < 2; ++isOutput) {
        size_t count = 0;
        check(tfm_module_entry_num_io(m, name.c_str(), isOutput, &count));
        py::list ports;
        for (size_t i = 0; i < count; ++i)
          ports.append(port(name, isOutput, i));
        entry[isOutput ? "outputs" : "inputs"] = ports;
      }
      out.append(entry);
    }
    return out;
  }

  /// The dtype of `entry`'s input or output `name`; NOT_FOUND for none.
  tfm_dtype_t dtypeOf(const std::string &entry, int isOutput,
                      const std::string &name) const {
    size_t count = 0;
    check(tfm_module_entry_num_io(m, entry.c_str(), isOutput, &count));
    for (size_t i = 0; i < count; ++i) {
      tfm_tensor_desc_t d;
      check(tfm_module_entry_io(m, entry.c_str(), isOutput, i, &d));
      if (name == d.name)
        return d.dtype;
    }
    raise(TFM_STATUS_NOT_FOUND, "entry '" + entry + "' has no " +
                                    (isOutput ? "output" : "input") + " '" +
                                    name + "'");
  }
};

/// Python's on_token callback, called with the GIL from the generation.
struct TokenCallback {
  py::function fn;
  std::optional<py::error_already_set> error;
  static int32_t call(void *self, int64_t step, const int64_t *tokens,
                      size_t live) {
    auto *cb = static_cast<TokenCallback *>(self);
    py::gil_scoped_acquire locked;
    try {
      py::object stop = cb->fn(step, std::vector<int64_t>(tokens, tokens + live));
      return stop.is_none() ? 0 : static_cast<int32_t>(py::bool_(stop));
    } catch (py::error_already_set &e) {
      cb->error = std::move(e);
      return 1; // stop; the error is raised once the generation returns
    }
  }
};

/// The processes of a data-parallel run (docs/training.md), as the runtime
/// sees them; made over MPI by libtfm_mpi, which is opened when asked for,
/// so that the package needs no MPI otherwise, or over NCCL by the runtime.
struct Communicator {
  tfm_communicator_t c{};
  bool overNccl = false;
  Communicator() = default;
  Communicator(const Communicator &) = delete;
  ~Communicator() {
    if (overNccl)
      tfm_nccl_communicator_destroy(&c);
  }
};

/// GPU `device`'s communicator over NCCL; the ranks meet through
/// `bootstrap` (mpi_communicator()) or, without one, where the environment
/// says (TFM_RANK, TFM_WORLD_SIZE, TFM_RENDEZVOUS).
std::shared_ptr<Communicator>
ncclCommunicator(int32_t device, std::shared_ptr<Communicator> bootstrap) {
  auto comm = std::make_shared<Communicator>();
  tfm_status_t status;
  {
    py::gil_scoped_release release;
    status = tfm_nccl_communicator(device, bootstrap ? &bootstrap->c : nullptr,
                                   &comm->c);
  }
  // Raising needs the interpreter's lock back.
  check(status);
  comm->overNccl = true;
  return comm;
}

namespace mpi {
tfm_mpi_library_t library;

std::shared_ptr<Communicator> join() {
#ifdef TFM_MPI_LIBRARY
  char error[512] = {0};
  if (!library.communicator &&
      tfm_mpi_open(TFM_MPI_LIBRARY, &library, error, sizeof(error)))
    raise(TFM_STATUS_UNAVAILABLE, std::string(error) +
                                      ": Open MPI (openmpi-bin) is not "
                                      "installed");
  auto comm = std::make_shared<Communicator>();
  if (library.communicator(nullptr, nullptr, &comm->c, error, sizeof(error)))
    raise(TFM_STATUS_UNAVAILABLE,
          std::string("cannot join the MPI job: ") + error);
  return comm;
#else
  raise(TFM_STATUS_UNAVAILABLE, "this tfm was built without Open MPI, so it "
                                "cannot train across processes");
#endif
}
} // namespace mpi

struct Session : std::enable_shared_from_this<Session> {
  std::shared_ptr<Module> module;
  /// Kept while the session uses it (what its functions are handed).
  std::shared_ptr<Communicator> communicator;
  tfm_session_t *s = nullptr;
  Session(std::shared_ptr<Module> m, bool profile, bool allowTF32) : module(m) {
    tfm_session_options_t o;
    tfm_session_options_init(&o);
    o.profile = profile;
    o.allow_tf32 = allowTF32;
    check(tfm_session_create(m->m, &o, &s));
  }
  ~Session() { tfm_session_release(s); }
  Session(const Session &) = delete;

  /// Runs `entry` with named inputs (numpy arrays already of the entry's
  /// dtypes, C-contiguous, or a GPU's arrays) and returns the named
  /// outputs; `given` maps output names to arrays the run writes into.
  /// On a GPU, a run with a GPU's arrays or outputs on the device is
  /// ordered on `stream` (None: the default stream).
  py::dict run(const std::string &entry, py::dict inputs,
               std::vector<std::string> outputNames, py::dict given,
               double timeoutMs, bool outputsOnDevice,
               std::optional<intptr_t> stream) {
    std::string gpu = tfm_session_device(s);
    if (gpu.rfind("cuda", 0) != 0)
      gpu = "cuda:0";
    std::vector<ManagedPtr> keep;
    auto tensorOf = [&](py::handle v, const std::string &what,
                        tfm_dtype_t dtype, bool writable) {
      if (py::isinstance<py::array>(v))
        return viewOf(py::reinterpret_borrow<py::array>(v), dtype, writable);
      return viewOfForeign(v, what, dtype, writable, gpu, stream.value_or(0),
                           keep);
    };
    std::vector<std::string> inNames;
    std::vector<TensorPtr> inTensors;
    for (auto [k, v] : inputs) {
      std::string name = py::cast<std::string>(k);
      tfm_dtype_t dtype = module->dtypeOf(entry, 0, name);
      inNames.push_back(name);
      inTensors.push_back(tensorOf(
          v, "entry '" + entry + "': input '" + name + "'", dtype, false));
    }
    std::vector<TensorPtr> outTensors(outputNames.size());
    std::vector<py::object> results(outputNames.size());
    for (size_t i = 0; i < outputNames.size(); ++i) {
      py::str key(outputNames[i]);
      if (!given.contains(key))
        continue;
      py::object a = given[key];
      outTensors[i] =
          tensorOf(a, "entry '" + entry + "': output '" + outputNames[i] + "'",
                   module->dtypeOf(entry, 1, outputNames[i]), true);
      results[i] = a;
    }
    std::vector<const char *> inNamePtrs, outNamePtrs;
    std::vector<tfm_tensor_t *> ins, outs;
    bool onGpu = outputsOnDevice;
    for (size_t i = 0; i < inNames.size(); ++i) {
      inNamePtrs.push_back(inNames[i].c_str());
      ins.push_back(inTensors[i].get());
      onGpu = onGpu || std::strcmp(tfm_tensor_device(ins.back()), "cpu") != 0;
    }
    for (size_t i = 0; i < outputNames.size(); ++i) {
      outNamePtrs.push_back(outputNames[i].c_str());
      outs.push_back(outTensors[i].get());
      onGpu =
          onGpu || (outs.back() &&
                    std::strcmp(tfm_tensor_device(outs.back()), "cpu") != 0);
    }
    tfm_run_options_t o;
    tfm_run_options_init(&o);
    o.timeout_ms = timeoutMs;
    o.outputs_on_device = outputsOnDevice;
    // As PyTorch's work is: ordered on a stream, the default one unless
    // named.
    bool gpuSession = std::strcmp(tfm_session_device(s), "cpu") != 0;
    if (stream || (gpuSession && onGpu)) {
      o.use_stream = 1;
      o.stream = reinterpret_cast<void *>(stream.value_or(0));
    }
    tfm_status_t status;
    {
      py::gil_scoped_release unlocked;
      status = tfm_session_run_with(s, entry.c_str(), &o, inNamePtrs.data(),
                                    ins.data(), ins.size(), outNamePtrs.data(),
                                    outs.data(), outs.size());
    }
    check(status);
    py::dict out;
    for (size_t i = 0; i < outputNames.size(); ++i) {
      py::str key(outputNames[i]);
      if (outTensors[i]) {
        out[key] = results[i];
      } else if (std::strcmp(tfm_tensor_device(outs[i]), "cpu") == 0) {
        out[key] = adopt(outs[i]);
      } else {
        DeviceTensor d;
        d.t = std::shared_ptr<tfm_tensor_t>(outs[i], tfm_tensor_release);
        d.session = shared_from_this();
        d.stream = stream.value_or(0);
        out[key] = py::cast(std::move(d));
      }
    }
    return out;
  }

  void synchronize() {
    tfm_status_t status;
    {
      py::gil_scoped_release unlocked;
      status = tfm_session_synchronize(s);
    }
    check(status);
  }

  std::vector<std::string> parameterNames() const {
    std::vector<std::string> names;
    for (size_t i = 0, n = tfm_session_num_parameters(s); i < n; ++i)
      names.push_back(tfm_session_parameter_name(s, i));
    return names;
  }
  py::array getParameter(const std::string &name) {
    tfm_tensor_t *t = nullptr;
    check(tfm_session_get_parameter(s, name.c_str(), &t));
    return adopt(t);
  }
  void setParameter(const std::string &name, py::array value) {
    tfm_tensor_t *t = nullptr;
    py::array a = py::array::ensure(value, py::array::c_style);
    std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
    // The dtype is checked by the runtime against the parameter's.
    tfm_dtype_t dtype = TFM_DTYPE_F32;
    for (int d = 1; d <= TFM_DTYPE_U64; ++d)
      if (a.dtype().is(numpyDtype(static_cast<tfm_dtype_t>(d)))) {
        dtype = static_cast<tfm_dtype_t>(d);
        break;
      }
    check(tfm_tensor_create_copy(dtype, dims.data(), dims.size(), a.data(),
                                 static_cast<size_t>(a.nbytes()), &t));
    TensorPtr owned(t);
    check(tfm_session_set_parameter(s, name.c_str(), t));
  }
  void saveCheckpoint(std::optional<std::string> path) {
    tfm_status_t status;
    {
      py::gil_scoped_release unlocked;
      status = tfm_session_save_checkpoint(s, path ? path->c_str() : nullptr);
    }
    check(status);
  }
  void loadCheckpoint(const std::string &path) {
    tfm_status_t status;
    {
      py::gil_scoped_release unlocked;
      status = tfm_session_load_checkpoint(s, path.c_str());
    }
    check(status);
  }
  void writeProfile(const std::string &path, bool trace) {
    check(tfm_session_write_profile(
        s, path.c_str(), trace ? TFM_PROFILE_TRACE : TFM_PROFILE_TABLE));
  }

  py::dict generate(std::vector<int64_t> prompt, int64_t maxNewTokens,
                    int64_t beam, double lengthPenalty, int64_t endToken,
                    bool sample, double temperature, int64_t topK,
                    double topP, uint64_t seed,
                    std::optional<std::vector<int64_t>> source,
                    std::optional<py::function> onToken) {
    tfm_generate_options_t o;
    tfm_generate_options_init(&o);
    o.max_new_tokens = maxNewTokens;
    o.beam_width = beam;
    o.length_penalty = lengthPenalty;
    o.end_token = endToken;
    o.sample = sample;
    o.temperature = temperature;
    o.top_k = topK;
    o.top_p = topP;
    o.seed = seed;
    if (source) {
      o.source = source->data();
      o.source_length = source->size();
    }
    TokenCallback cb;
    if (onToken) {
      cb.fn = *onToken;
      o.on_token = &TokenCallback::call;
      o.user_data = &cb;
    }
    tfm_generation_t *g = nullptr;
    tfm_status_t status;
    {
      py::gil_scoped_release unlocked;
      status = tfm_session_generate(s, prompt.data(), prompt.size(), &o, &g);
    }
    if (cb.error) {
      tfm_status_free(status);
      tfm_generation_release(g);
      throw std::move(*cb.error);
    }
    check(status);
    py::list sequences, scores;
    for (size_t i = 0, n = tfm_generation_num_sequences(g); i < n; ++i) {
      size_t length = 0;
      const int64_t *tokens = tfm_generation_tokens(g, i, &length);
      sequences.append(std::vector<int64_t>(tokens, tokens + length));
      scores.append(tfm_generation_score(g, i));
    }
    py::dict out;
    out["sequences"] = sequences;
    out["scores"] = scores;
    out["prompt_ms"] = tfm_generation_prompt_ms(g);
    out["decode_ms"] = tfm_generation_decode_ms(g);
    out["steps"] = tfm_generation_steps(g);
    tfm_generation_release(g);
    return out;
  }
};

void DeviceTensor::readyFor(py::object consumer) {
  auto legacy = [](intptr_t v) { return v == 0 || v == 1; };
  intptr_t want = consumer.is_none() ? 1 : py::cast<intptr_t>(consumer);
  if (want == stream || (legacy(want) && legacy(stream)))
    return;
  session->synchronize();
}

} // namespace

PYBIND11_MODULE(_tfm, m) {
  m.doc() = "tfm's runtime (the C API of libtfm_runtime); use the tfm package";
  m.def("runtime_version", [] { return std::string(tfm_runtime_version()); });
  m.def("model_abi_version", &tfm_runtime_model_abi_version);

  py::class_<Context, std::shared_ptr<Context>>(m, "Context")
      .def(py::init<int32_t, const std::string &>(), py::arg("threads") = 0,
           py::arg("device") = "")
      .def_property_readonly("threads", [](const Context &c) {
        return tfm_context_num_threads(c.ctx);
      });

  py::class_<Module, std::shared_ptr<Module>>(m, "Module")
      .def(py::init<std::shared_ptr<Context>, const std::string &>())
      .def("entries", &Module::entries)
      .def_property_readonly("generation_max_length", [](const Module &mod) {
        return tfm_module_generation_max_length(mod.m);
      });

  py::class_<DeviceTensor>(m, "DeviceTensor")
      .def_property_readonly(
          "shape",
          [](const DeviceTensor &d) { return py::tuple(py::cast(d.shape())); })
      .def_property_readonly("dtype", &DeviceTensor::dtype)
      .def_property_readonly("device", &DeviceTensor::device)
      .def("__dlpack__", &DeviceTensor::dlpack, py::kw_only(),
           py::arg("stream") = py::none())
      .def("__dlpack_device__", &DeviceTensor::dlpackDevice)
      .def_property_readonly("__cuda_array_interface__",
                             &DeviceTensor::cudaArrayInterface)
      .def("numpy", &DeviceTensor::numpy)
      .def("__repr__", [](const DeviceTensor &d) {
        std::string dims;
        for (int64_t v : d.shape())
          dims += (dims.empty() ? "" : ", ") + std::to_string(v);
        return "DeviceTensor(" + d.dtype() + "[" + dims + "], device='" +
               d.device() + "')";
      });

  py::class_<Session, std::shared_ptr<Session>>(m, "Session")
      .def(py::init<std::shared_ptr<Module>, bool, bool>())
      .def_property_readonly(
          "device",
          [](const Session &s) { return std::string(tfm_session_device(s.s)); })
      .def_property_readonly("description",
                             [](const Session &s) {
                               return std::string(tfm_session_describe(s.s));
                             })
      .def("run", &Session::run)
      .def("synchronize", &Session::synchronize)
      .def("parameter_names", &Session::parameterNames)
      .def("get_parameter", &Session::getParameter)
      .def("set_parameter", &Session::setParameter)
      .def_property_readonly(
          "step_count",
          [](const Session &s) { return tfm_session_step_count(s.s); })
      .def("save_checkpoint", &Session::saveCheckpoint)
      .def("load_checkpoint", &Session::loadCheckpoint)
      .def("write_profile", &Session::writeProfile)
      .def("generate", &Session::generate)
      .def("set_communicator",
           [](Session &s, std::shared_ptr<Communicator> c) {
             tfm_status_t status;
             {
               py::gil_scoped_release release;
               status = tfm_session_set_communicator(s.s, c ? &c->c : nullptr);
             }
             check(status);
             s.communicator = c;
           })
      .def("compare_parameters", [](Session &s) {
        tfm_status_t status;
        {
          py::gil_scoped_release release;
          status = tfm_session_compare_parameters(s.s);
        }
        check(status);
      });

  py::class_<Communicator, std::shared_ptr<Communicator>>(m, "Communicator")
      .def_property_readonly("rank",
                             [](const Communicator &c) { return c.c.rank; })
      .def_property_readonly("size",
                             [](const Communicator &c) { return c.c.size; });
  m.def("mpi_communicator", &mpi::join);
  m.def("nccl_communicator", &ncclCommunicator, py::arg("device") = 0,
        py::arg("bootstrap") = nullptr);
  m.def("mpi_finalize", [] {
    if (mpi::library.finalize)
      mpi::library.finalize();
  });
}
