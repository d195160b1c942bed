//===- Bindings.cpp - tfm._tfm: the runtime's C API for Python ------------===//
//
// A thin layer over runtime.h: contexts, modules, sessions, runs,
// training state and generation. The friendly API (tfm.load, sessions that
// take dicts, InferenceSession) is Python, in tfm/__init__.py. Arrays cross
// without copies where they can: a C-contiguous input of the entry's dtype
// becomes a view the compiled code reads in place, a given output array a
// view it writes, and every new output an array over the runtime's own
// buffer, which the array keeps alive. Runs release the GIL.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

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

struct Session {
  std::shared_ptr<Module> module;
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

  /// Runs `entry` with named inputs (arrays already of the entry's dtypes,
  /// C-contiguous) and returns the named outputs; `given` maps output names
  /// to arrays the run writes into.
  py::dict run(const std::string &entry, py::dict inputs,
               std::vector<std::string> outputNames, py::dict given,
               double timeoutMs) {
    std::vector<std::string> inNames;
    std::vector<TensorPtr> inTensors;
    for (auto [k, v] : inputs) {
      std::string name = py::cast<std::string>(k);
      tfm_dtype_t dtype = module->dtypeOf(entry, 0, name);
      inNames.push_back(name);
      inTensors.push_back(viewOf(py::cast<py::array>(v), dtype, false));
    }
    std::vector<TensorPtr> outTensors(outputNames.size());
    std::vector<py::object> results(outputNames.size());
    for (size_t i = 0; i < outputNames.size(); ++i) {
      py::str key(outputNames[i]);
      if (!given.contains(key))
        continue;
      py::array a = py::cast<py::array>(given[key]);
      outTensors[i] = viewOf(a, module->dtypeOf(entry, 1, outputNames[i]), true);
      results[i] = a;
    }
    std::vector<const char *> inNamePtrs, outNamePtrs;
    std::vector<tfm_tensor_t *> ins, outs;
    for (size_t i = 0; i < inNames.size(); ++i) {
      inNamePtrs.push_back(inNames[i].c_str());
      ins.push_back(inTensors[i].get());
    }
    for (size_t i = 0; i < outputNames.size(); ++i) {
      outNamePtrs.push_back(outputNames[i].c_str());
      outs.push_back(outTensors[i].get());
    }
    tfm_run_options_t o;
    tfm_run_options_init(&o);
    o.timeout_ms = timeoutMs;
    tfm_status_t status;
    {
      py::gil_scoped_release unlocked;
      status = tfm_session_run_with(s, entry.c_str(), &o, inNamePtrs.data(),
                                    ins.data(), ins.size(), outNamePtrs.data(),
                                    outs.data(), outs.size());
    }
    check(status);
    py::dict out;
    for (size_t i = 0; i < outputNames.size(); ++i)
      out[py::str(outputNames[i])] =
          outTensors[i] ? results[i] : py::object(adopt(outs[i]));
    return out;
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
  void saveCheckpoint(const std::string &path) {
    tfm_status_t status;
    {
      py::gil_scoped_release unlocked;
      status = tfm_session_save_checkpoint(s, path.c_str());
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
      .def("parameter_names", &Session::parameterNames)
      .def("get_parameter", &Session::getParameter)
      .def("set_parameter", &Session::setParameter)
      .def_property_readonly(
          "step_count",
          [](const Session &s) { return tfm_session_step_count(s.s); })
      .def("save_checkpoint", &Session::saveCheckpoint)
      .def("load_checkpoint", &Session::loadCheckpoint)
      .def("write_profile", &Session::writeProfile)
      .def("generate", &Session::generate);
}
