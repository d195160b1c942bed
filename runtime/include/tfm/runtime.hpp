//===- runtime.hpp - A C++ RAII wrapper of the tfm runtime ------*- C++ -*-===//
//
// Header-only and on the application's side of the C ABI: it owns handles
// with RAII and turns a failed status into a tfm::Error exception, which
// never crosses into the runtime itself.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_HPP
#define TFM_RUNTIME_HPP

#include "tfm/runtime.h"

#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tfm {

/// A failed runtime call: its code and message.
class Error : public std::runtime_error {
public:
  Error(tfm_status_code_t code, const std::string &message)
      : std::runtime_error(message), code_(code) {}
  tfm_status_code_t code() const { return code_; }

private:
  tfm_status_code_t code_;
};

/// Throws tfm::Error for a failed status, freeing it.
inline void check(tfm_status_t status) {
  if (!status)
    return;
  Error e(tfm_status_code(status), tfm_status_message(status));
  tfm_status_free(status);
  throw e;
}

namespace detail {
template <typename T, void (*Release)(T *)> class Handle {
public:
  Handle() = default;
  explicit Handle(T *p) : p_(p) {}
  Handle(Handle &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Handle &operator=(Handle &&o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  ~Handle() {
    if (p_)
      Release(p_);
  }
  T *get() const { return p_; }
  T *release() { return std::exchange(p_, nullptr); }

private:
  T *p_ = nullptr;
};
} // namespace detail

/// The runtime library's version ("0.1.0"); the headers' is
/// TFM_VERSION_STRING.
inline std::string version() { return tfm_runtime_version(); }

class Tensor : public detail::Handle<tfm_tensor_t, tfm_tensor_release> {
public:
  explicit Tensor(tfm_tensor_t *t) : Handle(t) {}
  Tensor(tfm_dtype_t dtype, std::vector<int64_t> dims) {
    tfm_tensor_t *t = nullptr;
    check(tfm_tensor_create(dtype, dims.data(), dims.size(), &t));
    *this = Tensor(t);
  }
  /// A tensor over the caller's memory, without a copy (see
  /// tfm_tensor_create_view): `data` must outlive it.
  static Tensor view(tfm_dtype_t dtype, const std::vector<int64_t> &dims,
                     void *data, size_t byteSize) {
    tfm_tensor_t *t = nullptr;
    check(tfm_tensor_create_view(dtype, dims.data(), dims.size(), data,
                                 byteSize, &t));
    return Tensor(t);
  }
  /// A view of a float vector's elements as `dims`.
  static Tensor view(std::vector<float> &data,
                     const std::vector<int64_t> &dims) {
    return view(TFM_DTYPE_F32, dims, data.data(), data.size() * sizeof(float));
  }
  /// A tensor over the caller's memory on `device` ("cpu", "cuda:N"),
  /// without a copy (see tfm_tensor_create_device_view): a GPU's memory is
  /// a device pointer, which must outlive the tensor.
  static Tensor deviceView(tfm_dtype_t dtype, const std::vector<int64_t> &dims,
                           const std::string &device, void *data,
                           size_t byteSize) {
    tfm_tensor_t *t = nullptr;
    check(tfm_tensor_create_device_view(dtype, dims.data(), dims.size(),
                                        device.c_str(), data, byteSize, &t));
    return Tensor(t);
  }
  bool isView() const { return tfm_tensor_is_view(get()) != 0; }
  /// Where the memory lives: "cpu" or "cuda:N".
  std::string device() const { return tfm_tensor_device(get()); }
  /// A host copy (of a host tensor, or of one a run made on a device).
  Tensor toHost() const {
    tfm_tensor_t *t = nullptr;
    check(tfm_tensor_copy_to_host(get(), &t));
    return Tensor(t);
  }
  template <typename T> T *data() {
    return static_cast<T *>(tfm_tensor_data(get()));
  }
  std::vector<int64_t> dims() const {
    const int64_t *d = tfm_tensor_dims(get());
    return std::vector<int64_t>(d, d + tfm_tensor_rank(get()));
  }
  tfm_dtype_t dtype() const { return tfm_tensor_dtype(get()); }
};

class Context : public detail::Handle<tfm_context_t, tfm_context_release> {
public:
  /// `num_threads` 0 lets the runtime choose; `device` ("cpu", "cuda:N")
  /// null runs each model on what it was compiled for.
  explicit Context(int32_t num_threads = 0, const char *device = nullptr) {
    tfm_context_options_t opts;
    tfm_context_options_init(&opts);
    opts.num_threads = num_threads;
    opts.device = device;
    tfm_context_t *c = nullptr;
    check(tfm_context_create(&opts, &c));
    *this = Context(c, 0);
  }

private:
  Context(tfm_context_t *c, int) : Handle(c) {}
};

/// An input or output of an entry point: a dim of -1 varies within
/// [minDims, maxDims] (a model compiled for a range of sizes).
struct TensorInfo {
  std::string name;
  tfm_dtype_t dtype;
  std::vector<int64_t> dims, minDims, maxDims;
};

/// An entry point ("infer", "train_step", ...) and its inputs and outputs.
struct EntryInfo {
  std::string name;
  std::vector<TensorInfo> inputs, outputs;
};

class Module : public detail::Handle<tfm_module_t, tfm_module_release> {
public:
  Module(const Context &context, const std::string &path) {
    tfm_module_t *m = nullptr;
    check(tfm_module_load(context.get(), path.c_str(), &m));
    *this = Module(m);
  }
  /// The entry points, with their inputs and outputs.
  std::vector<EntryInfo> entries() const {
    std::vector<EntryInfo> result;
    for (size_t e = 0, n = tfm_module_num_entries(get()); e < n; ++e)
      result.push_back(entry(tfm_module_entry_name(get(), e)));
    return result;
  }
  EntryInfo entry(const std::string &name) const {
    return describe(get(), name);
  }
  static EntryInfo describe(const tfm_module_t *module,
                            const std::string &name) {
    EntryInfo info{name, {}, {}};
    for (int io = 0; io < 2; ++io) {
      size_t count = 0;
      check(tfm_module_entry_num_io(module, name.c_str(), io, &count));
      for (size_t i = 0; i < count; ++i) {
        tfm_tensor_desc_t d;
        check(tfm_module_entry_io(module, name.c_str(), io, i, &d));
        TensorInfo t{d.name, d.dtype,
                     std::vector<int64_t>(d.dims, d.dims + d.rank),
                     std::vector<int64_t>(d.rank),
                     std::vector<int64_t>(d.rank)};
        check(tfm_module_entry_io_range(module, name.c_str(), io, i,
                                        t.minDims.data(), t.maxDims.data()));
        (io ? info.outputs : info.inputs).push_back(std::move(t));
      }
    }
    return info;
  }

private:
  explicit Module(tfm_module_t *m) : Handle(m) {}
};

/// How Session::generate chooses tokens: tfm_generate_options_t with its
/// defaults.
struct GenerateOptions : tfm_generate_options_t {
  GenerateOptions() { tfm_generate_options_init(this); }
};

/// What Session::generate returns: the new tokens of each sequence, best
/// first, with its score, and the time the prompt and the steps took.
struct Generation {
  std::vector<std::vector<int64_t>> sequences;
  std::vector<double> scores;
  double promptMs = 0, decodeMs = 0;
  int64_t steps = 0;
};

/// Called after every step with the last token of each live hypothesis;
/// returning false stops the generation.
using TokenCallback =
    std::function<bool(int64_t step, const std::vector<int64_t> &tokens)>;

/// Raised from any thread, it cancels the runs given it (RunOptions).
class CancelFlag
    : public detail::Handle<tfm_cancel_flag_t, tfm_cancel_flag_release> {
public:
  CancelFlag() {
    tfm_cancel_flag_t *f = nullptr;
    check(tfm_cancel_flag_create(&f));
    *this = CancelFlag(f);
  }
  void raise() { tfm_cancel_flag_raise(get()); }
  void reset() { tfm_cancel_flag_reset(get()); }
  bool raised() const { return tfm_cancel_flag_is_raised(get()) != 0; }

private:
  explicit CancelFlag(tfm_cancel_flag_t *f) : Handle(f) {}
};

/// How one run goes (a timeout, a cancel flag, where its outputs live,
/// the caller's stream): tfm_run_options_t with its defaults.
struct RunOptions : tfm_run_options_t {
  RunOptions() { tfm_run_options_init(this); }
  RunOptions &timeoutMs(double ms) {
    timeout_ms = ms;
    return *this;
  }
  RunOptions &cancelWith(const CancelFlag &flag) {
    cancel = flag.get();
    return *this;
  }
  /// New outputs live on the session's device.
  RunOptions &outputsOnDevice(bool on = true) {
    outputs_on_device = on;
    return *this;
  }
  /// Orders the run with the caller's CUDA stream (a CUstream or
  /// cudaStream_t; nullptr is the default stream) and returns without
  /// waiting for the GPU.
  RunOptions &onStream(void *cudaStream) {
    use_stream = 1;
    stream = cudaStream;
    return *this;
  }
};

class Session : public detail::Handle<tfm_session_t, tfm_session_release> {
public:
  /// `profile`: time every kernel call, for writeProfile; `allowTF32`: a
  /// GPU may multiply f32 GEMMs in TF32 (tfm_session_options_t).
  explicit Session(const Module &module, bool profile = false,
                   bool allowTF32 = false) {
    tfm_session_options_t opts;
    tfm_session_options_init(&opts);
    opts.profile = profile;
    opts.allow_tf32 = allowTF32;
    tfm_session_t *s = nullptr;
    check(tfm_session_create(module.get(), &opts, &s));
    *this = Session(s, module.get());
  }

  /// The device the session computes on ("cpu", "cuda:0").
  std::string device() const { return tfm_session_device(get()); }
  /// The device and what runs the model's kernels, for people
  /// (tfm_session_describe).
  std::string describe() const { return tfm_session_describe(get()); }

  /// Makes the session one rank of a data-parallel run (NULL: one process
  /// again); see tfm_session_set_communicator.
  void setCommunicator(const tfm_communicator_t *communicator) {
    check(tfm_session_set_communicator(get(), communicator));
  }

  /// Runs `entry` on inputs by name and returns the outputs by name. An
  /// output found in `into` is written there (a view writes the caller's
  /// memory) instead of into a new tensor.
  std::map<std::string, Tensor>
  run(const std::string &entry, const std::map<std::string, Tensor *> &inputs,
      const RunOptions &options = {},
      const std::map<std::string, Tensor *> &into = {}) {
    std::vector<const char *> inNames;
    std::vector<tfm_tensor_t *> in;
    for (const auto &[name, t] : inputs) {
      inNames.push_back(name.c_str());
      in.push_back(t->get());
    }
    EntryInfo info = Module::describe(module_, entry);
    for (const auto &given : into) {
      bool known = false;
      for (const TensorInfo &o : info.outputs)
        known = known || o.name == given.first;
      if (!known)
        throw Error(TFM_STATUS_NOT_FOUND, "entry '" + entry +
                                              "' has no output '" +
                                              given.first + "'");
    }
    std::vector<const char *> outNames;
    std::vector<tfm_tensor_t *> out;
    for (const TensorInfo &o : info.outputs) {
      outNames.push_back(o.name.c_str());
      auto given = into.find(o.name);
      out.push_back(given == into.end() ? nullptr : given->second->get());
    }
    check(tfm_session_run_with(get(), entry.c_str(), &options, inNames.data(),
                               in.data(), in.size(), outNames.data(),
                               out.data(), out.size()));
    std::map<std::string, Tensor> result;
    for (size_t i = 0; i < out.size(); ++i)
      if (!into.count(outNames[i]))
        result.emplace(outNames[i], Tensor(out[i]));
    return result;
  }

  /// Waits for the device to finish the session's runs (those ordered
  /// with a caller's stream return before).
  void synchronize() { check(tfm_session_synchronize(get())); }

  /// The profile of the runs so far (a session created with profile):
  /// the table, or a trace viewers open.
  void writeProfile(const std::string &path,
                    tfm_profile_format_t format = TFM_PROFILE_TABLE) {
    check(tfm_session_write_profile(get(), path.c_str(), format));
  }

  /// Runs `entry` and returns its outputs, which the caller then owns.
  std::vector<Tensor> run(const char *entry,
                          std::initializer_list<Tensor *> inputs) {
    return run(entry, std::vector<Tensor *>(inputs));
  }

  std::vector<Tensor> run(const char *entry,
                          const std::vector<Tensor *> &inputs) {
    std::vector<tfm_tensor_t *> in;
    for (Tensor *t : inputs)
      in.push_back(t->get());
    // Count the entry's outputs; an unknown entry is reported by the run.
    size_t n = 0;
    for (;; ++n) {
      tfm_tensor_desc_t d;
      tfm_status_t s = tfm_module_entry_io(module_, entry, 1, n, &d);
      if (s) {
        tfm_status_free(s);
        break;
      }
    }
    std::vector<tfm_tensor_t *> out(n, nullptr);
    check(tfm_session_run(get(), entry, in.data(), in.size(), out.data(),
                          out.size()));
    std::vector<Tensor> result;
    for (tfm_tensor_t *t : out)
      result.emplace_back(t);
    return result;
  }

  /// The trainable parameters' names (a model compiled with --train).
  std::vector<std::string> parameterNames() const {
    std::vector<std::string> names;
    for (size_t i = 0, n = tfm_session_num_parameters(get()); i < n; ++i)
      names.emplace_back(tfm_session_parameter_name(get(), i));
    return names;
  }
  /// A copy of a parameter's current value.
  Tensor parameter(const std::string &name) {
    tfm_tensor_t *t = nullptr;
    check(tfm_session_get_parameter(get(), name.c_str(), &t));
    return Tensor(t);
  }
  void setParameter(const std::string &name, const Tensor &value) {
    check(tfm_session_set_parameter(get(), name.c_str(), value.get()));
  }
  int64_t stepCount() const { return tfm_session_step_count(get()); }
  /// Atomic: a crash or a full disk never leaves a partial file.
  void saveCheckpoint(const std::string &path) {
    check(tfm_session_save_checkpoint(get(), path.c_str()));
  }
  /// Checked whole before anything changes.
  void loadCheckpoint(const std::string &path) {
    check(tfm_session_load_checkpoint(get(), path.c_str()));
  }

  /// Extends `prompt` (a model compiled with --generate); `onToken`
  /// streams the tokens as they are chosen.
  Generation generate(const std::vector<int64_t> &prompt,
                      GenerateOptions options = {},
                      TokenCallback onToken = {}) {
    struct Stream {
      TokenCallback *fn;
      std::exception_ptr error;
    } stream{&onToken, nullptr};
    if (onToken) {
      options.user_data = &stream;
      options.on_token = [](void *user, int64_t step, const int64_t *tokens,
                             size_t n) -> int32_t {
        auto *s = static_cast<Stream *>(user);
        try {
          return (*s->fn)(step, std::vector<int64_t>(tokens, tokens + n)) ? 0
                                                                         : 1;
        } catch (...) {
          s->error = std::current_exception(); // rethrown after the C call
          return 1;
        }
      };
    }
    tfm_generation_t *g = nullptr;
    tfm_status_t status = tfm_session_generate(get(), prompt.data(),
                                               prompt.size(), &options, &g);
    if (stream.error) {
      tfm_status_free(status);
      tfm_generation_release(g);
      std::rethrow_exception(stream.error);
    }
    check(status);
    Generation result;
    for (size_t i = 0, n = tfm_generation_num_sequences(g); i < n; ++i) {
      size_t length = 0;
      const int64_t *t = tfm_generation_tokens(g, i, &length);
      result.sequences.emplace_back(t, t + length);
      result.scores.push_back(tfm_generation_score(g, i));
    }
    result.promptMs = tfm_generation_prompt_ms(g);
    result.decodeMs = tfm_generation_decode_ms(g);
    result.steps = tfm_generation_steps(g);
    tfm_generation_release(g);
    return result;
  }

private:
  Session(tfm_session_t *s, tfm_module_t *m) : Handle(s), module_(m) {}
  tfm_module_t *module_ = nullptr;
};

} // namespace tfm

#endif // TFM_RUNTIME_HPP
