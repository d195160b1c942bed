//===- RunCompiled.cpp - tfmc run on compiled code ------------------------===//
//
// Loads a model library through the runtime's C API (tfmc is built without
// exceptions, so not through the C++ wrapper), runs it on the inputs that
// `runWith` gathers, and with --bench times the runs.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/Frontends/ONNX/TensorProto.h"
#include "tfm/runtime.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

using namespace mlir;
using namespace mlir::tfm::tfmc;
using mlir::tfm::reference::ElementKind;
using mlir::tfm::reference::Tensor;

bool mlir::tfm::tfmc::ok(tfm_status_t s) {
  if (!s)
    return true;
  error() << tfm_status_message(s) << "\n";
  tfm_status_free(s);
  return false;
}

namespace {

/// The ABI's element type codes beside the interpreter's kinds.
constexpr std::pair<tfm_dtype_t, ElementKind> kDtypeKinds[] = {
    {TFM_DTYPE_F32, ElementKind::F32}, {TFM_DTYPE_F16, ElementKind::F16},
    {TFM_DTYPE_BF16, ElementKind::BF16}, {TFM_DTYPE_F64, ElementKind::F64},
    {TFM_DTYPE_BOOL, ElementKind::I1},  {TFM_DTYPE_I8, ElementKind::I8},
    {TFM_DTYPE_I16, ElementKind::I16},  {TFM_DTYPE_I32, ElementKind::I32},
    {TFM_DTYPE_I64, ElementKind::I64},  {TFM_DTYPE_U8, ElementKind::U8},
    {TFM_DTYPE_U16, ElementKind::U16},  {TFM_DTYPE_U32, ElementKind::U32},
    {TFM_DTYPE_U64, ElementKind::U64},
};

std::optional<ElementKind> kindOf(int32_t dtype) {
  for (auto [d, k] : kDtypeKinds)
    if (d == dtype)
      return k;
  return std::nullopt;
}

tfm_dtype_t dtypeOf(ElementKind kind) {
  for (auto [d, k] : kDtypeKinds)
    if (k == kind)
      return d;
  return TFM_DTYPE_F32;
}

template <typename T> void put(void *dst, int64_t i, T v) {
  static_cast<T *>(dst)[i] = v;
}
template <typename T> T at(const void *src, int64_t i) {
  return static_cast<const T *>(src)[i];
}

void store(const Tensor &t, void *dst) {
  for (int64_t i = 0; i < t.numElements(); ++i) {
    // Integers are written from their exact values, wrapping to the width.
    int64_t n = t.isInt() ? t.ints[i] : 0;
    double v = t.isInt() ? 0.0 : t.data[i];
    switch (t.kind) {
    case ElementKind::F32: put(dst, i, static_cast<float>(v)); break;
    case ElementKind::F64: put(dst, i, v); break;
    case ElementKind::I1: put<uint8_t>(dst, i, v != 0); break;
    // 4-bit values take a byte each in tfm's buffers.
    case ElementKind::I4:
    case ElementKind::U4:
    case ElementKind::I8:
    case ElementKind::U8: put(dst, i, static_cast<uint8_t>(n)); break;
    case ElementKind::I16:
    case ElementKind::U16: put(dst, i, static_cast<uint16_t>(n)); break;
    case ElementKind::I32:
    case ElementKind::U32: put(dst, i, static_cast<uint32_t>(n)); break;
    case ElementKind::I64:
    case ElementKind::U64: put(dst, i, n); break;
    case ElementKind::F16:
      put(dst, i, mlir::tfm::onnx_io::doubleToHalfBits(v));
      break;
    case ElementKind::BF16:
      put(dst, i, mlir::tfm::onnx_io::doubleToBf16Bits(v));
      break;
    }
  }
}

void load(const void *src, Tensor &t) {
  for (int64_t i = 0; i < t.numElements(); ++i) {
    switch (t.kind) {
    case ElementKind::F32: t.data[i] = at<float>(src, i); break;
    case ElementKind::F64: t.data[i] = at<double>(src, i); break;
    case ElementKind::I1: t.data[i] = at<uint8_t>(src, i) ? 1 : 0; break;
    case ElementKind::I4:
    case ElementKind::I8: t.ints[i] = at<int8_t>(src, i); break;
    case ElementKind::U4:
    case ElementKind::U8: t.ints[i] = at<uint8_t>(src, i); break;
    case ElementKind::I16: t.ints[i] = at<int16_t>(src, i); break;
    case ElementKind::U16: t.ints[i] = at<uint16_t>(src, i); break;
    case ElementKind::I32: t.ints[i] = at<int32_t>(src, i); break;
    case ElementKind::U32: t.ints[i] = at<uint32_t>(src, i); break;
    case ElementKind::I64:
    case ElementKind::U64: t.ints[i] = at<int64_t>(src, i); break;
    case ElementKind::F16:
      t.data[i] = mlir::tfm::onnx_io::halfBitsToDouble(at<uint16_t>(src, i));
      break;
    case ElementKind::BF16:
      t.data[i] = mlir::tfm::onnx_io::bf16BitsToDouble(at<uint16_t>(src, i));
      break;
    }
  }
}

/// The signature of `entry` from a library's metadata. Refuses tensors too
/// large for tfmc to hold, so a corrupt or huge model ends in a message,
/// not in an allocation that aborts.
bool signatureOfEntry(tfm_module_t *module, const std::string &entry,
                      Signature &sig) {
  // The reference interpreter's limit: values are held as doubles.
  constexpr int64_t kMaxElements = int64_t(1) << 30;
  sig.entry = entry;
  for (int isOutput = 0; isOutput < 2; ++isOutput) {
    size_t count = 0;
    if (!ok(tfm_module_entry_num_io(module, entry.c_str(), isOutput, &count)))
      return false;
    for (size_t i = 0; i < count; ++i) {
      tfm_tensor_desc_t d;
      if (!ok(tfm_module_entry_io(module, entry.c_str(), isOutput, i, &d)))
        return false;
      Port p;
      p.name = d.name;
      p.kind = *kindOf(d.dtype);
      p.shape.assign(d.dims, d.dims + d.rank);
      if (llvm::is_contained(p.shape, -1)) {
        // A size that may vary: random inputs take the largest.
        p.largest.resize(d.rank);
        std::vector<int64_t> smallest(d.rank);
        if (!ok(tfm_module_entry_io_range(module, entry.c_str(), isOutput, i,
                                          smallest.data(), p.largest.data())))
          return false;
      }
      p.graphPosition = i;
      if (!isOutput) {
        tfm_input_values_t kind;
        if (!ok(tfm_module_entry_input_values(module, entry.c_str(), i, &kind,
                                              &p.values.lower,
                                              &p.values.upper)))
          return false;
        p.values.kind = kind;
      }
      int64_t elements = 1;
      for (int64_t dim : p.largest.empty() ? p.shape : p.largest)
        if (dim && elements > kMaxElements / dim)
          elements = kMaxElements + 1;
        else
          elements *= dim;
      if (elements > kMaxElements) {
        error() << "entry '" << entry << "': " << (isOutput ? "output" : "input")
                << " '" << p.name << "' has more than " << kMaxElements
                << " elements, more than tfmc holds\n";
        return false;
      }
      (isOutput ? sig.outputs : sig.inputs).push_back(std::move(p));
    }
  }
  return true;
}

} // namespace

std::unique_ptr<CompiledModel>
CompiledModel::load(StringRef soPath, int32_t threads,
                    const std::string &device, bool profile, bool allowTF32) {
  std::unique_ptr<CompiledModel> m(new CompiledModel);
  tfm_context_options_t co;
  tfm_context_options_init(&co);
  co.num_threads = threads;
  co.device = device.c_str();
  if (!ok(tfm_context_create(&co, &m->context)) ||
      !ok(tfm_module_load(m->context, soPath.str().c_str(), &m->module)))
    return nullptr;
  tfm_session_options_t so;
  tfm_session_options_init(&so);
  so.profile = profile;
  so.allow_tf32 = allowTF32;
  if (!ok(tfm_session_create(m->module, &so, &m->session)))
    return nullptr;
  m->path = soPath.str();
  return m;
}

CompiledModel::~CompiledModel() {
  tfm_session_release(session);
  tfm_module_release(module);
  tfm_context_release(context);
}

std::string CompiledModel::entryNamed(StringRef requested) const {
  if (!requested.empty())
    return requested.str();
  size_t numEntries = tfm_module_num_entries(module);
  for (size_t i = 0; i < numEntries; ++i)
    if (std::strcmp(tfm_module_entry_name(module, i), "infer") == 0)
      return "infer";
  if (numEntries == 1)
    return tfm_module_entry_name(module, 0);
  error() << "'" << path << "' has " << numEntries
          << " entry points and none is 'infer'; name one with --entry\n";
  return "";
}

std::optional<Signature>
CompiledModel::signature(const std::string &entry) const {
  Signature sig;
  if (!signatureOfEntry(module, entry, sig))
    return std::nullopt;
  sig.numGraphInputs = sig.inputs.size();
  return sig;
}

namespace {

/// Runtime tensors for a set of inputs; released by the caller.
bool makeInputs(const std::vector<Tensor> &args,
                std::vector<tfm_tensor_t *> &out) {
  for (const Tensor &t : args) {
    tfm_tensor_t *rtT = nullptr;
    if (!ok(tfm_tensor_create(dtypeOf(t.kind), t.shape.data(), t.shape.size(),
                              &rtT)))
      return false;
    store(t, tfm_tensor_data(rtT));
    out.push_back(rtT);
  }
  return true;
}

void releaseAll(std::vector<tfm_tensor_t *> &ts) {
  for (tfm_tensor_t *t : ts)
    tfm_tensor_release(t);
  ts.clear();
}

} // namespace

std::optional<std::vector<Tensor>>
CompiledModel::run(const Signature &sig, const std::vector<Tensor> &args) {
  std::vector<tfm_tensor_t *> in, out(sig.outputs.size(), nullptr);
  if (!makeInputs(args, in)) {
    releaseAll(in);
    return std::nullopt;
  }
  bool good = ok(tfm_session_run(session, sig.entry.c_str(), in.data(),
                                 in.size(), out.data(), out.size()));
  releaseAll(in);
  if (!good)
    return std::nullopt;
  std::vector<Tensor> results;
  for (auto [i, t] : llvm::enumerate(out)) {
    // A dynamic entry's outputs have the run's sizes.
    const int64_t *dims = tfm_tensor_dims(t);
    Tensor r(sig.outputs[i].kind,
             std::vector<int64_t>(dims, dims + tfm_tensor_rank(t)));
    ::load(tfm_tensor_data(t), r);
    results.push_back(std::move(r));
  }
  releaseAll(out);
  return results;
}

int mlir::tfm::tfmc::runCompiled(StringRef soPath, const RunOptions &opts,
                                  const Signature *known) {
  std::unique_ptr<CompiledModel> rt =
      CompiledModel::load(soPath, opts.threads, opts.device,
                          !opts.profile.empty(), opts.allowTF32);
  if (!rt)
    return kExitInputError;
  std::string entry = rt->entryNamed(opts.entry);
  if (entry.empty())
    return kExitInputError;
  std::optional<Signature> found = rt->signature(entry);
  if (!found)
    return kExitInputError;
  Signature &sig = *found;
  if (known) {
    // Same types by construction; take the ONNX numbering.
    for (auto [mine, theirs] : llvm::zip(sig.inputs, known->inputs))
      mine.graphPosition = theirs.graphPosition;
    sig.numGraphInputs = known->numGraphInputs;
  }

  // The profile covers the checked run and the timed ones.
  auto writeProfile = [&]() {
    if (opts.profile.empty())
      return kExitOk;
    tfm_profile_format_t format = StringRef(opts.profile).ends_with(".json")
                                      ? TFM_PROFILE_TRACE
                                      : TFM_PROFILE_TABLE;
    return ok(tfm_session_write_profile(rt->session, opts.profile.c_str(),
                                        format))
               ? kExitOk
               : kExitInputError;
  };

  std::vector<Tensor> fed;
  int rc = runWith(
      sig, opts,
      [&](const std::vector<Tensor> &args) { return rt->run(sig, args); },
      &fed);
  if (rc != kExitOk || opts.bench == 0) {
    int written = writeProfile();
    return rc != kExitOk ? rc : written;
  }

  // Timed runs on the same inputs; the session already holds every
  // primitive, so these measure steady-state latency.
  std::vector<tfm_tensor_t *> in, out(sig.outputs.size(), nullptr);
  if (!makeInputs(fed, in)) {
    releaseAll(in);
    return kExitInputError;
  }
  std::vector<double> ms;
  for (unsigned i = 0; i < opts.bench + 1; ++i) {
    auto start = std::chrono::steady_clock::now();
    bool good = ok(tfm_session_run(rt->session, entry.c_str(), in.data(),
                                   in.size(), out.data(), out.size()));
    auto end = std::chrono::steady_clock::now();
    if (!good) {
      releaseAll(in);
      return kExitInputError;
    }
    releaseAll(out);
    out.assign(sig.outputs.size(), nullptr);
    if (i > 0) // the first run warms caches and is not counted
      ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  releaseAll(in);
  std::sort(ms.begin(), ms.end());
  double median = ms.size() % 2 ? ms[ms.size() / 2]
                                : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  llvm::outs() << llvm::format("bench: %u runs, median %.3f ms, min %.3f ms, "
                               "max %.3f ms, threads %d, device %s\n",
                               opts.bench, median, ms.front(), ms.back(),
                               tfm_context_num_threads(rt->context),
                               tfm_session_device(rt->session));
  llvm::outs() << "kernels: " << tfm_session_describe(rt->session) << "\n";
  return writeProfile();
}

namespace {

/// Owns the runtime handles of one training run.
struct Loaded {
  tfm_context_t *context = nullptr;
  tfm_module_t *module = nullptr;
  tfm_session_t *session = nullptr;
  ~Loaded() {
    tfm_session_release(session);
    tfm_module_release(module);
    tfm_context_release(context);
  }
};

int trainOnRank(StringRef soPath, const TrainOptions &opts,
                const Signature *known, DataParallel &dp) {
  Loaded rt;
  tfm_context_options_t co;
  tfm_context_options_init(&co);
  co.num_threads = dp.threads(opts.threads);
  std::string device = dp.gpu(opts.device);
  co.device = device.c_str();
  if (!ok(tfm_context_create(&co, &rt.context)) ||
      !ok(tfm_module_load(rt.context, soPath.str().c_str(), &rt.module)))
    return kExitInputError;
  bool hasStep = false;
  for (size_t i = 0; i < tfm_module_num_entries(rt.module); ++i)
    hasStep |= std::strcmp(tfm_module_entry_name(rt.module, i), "train_step") == 0;
  if (!hasStep) {
    error() << "'" << soPath << "' has no train_step; compile it with --train\n";
    return kExitInputError;
  }
  Signature sig;
  if (!signatureOfEntry(rt.module, "train_step", sig))
    return kExitInputError;
  if (known)
    for (auto [mine, theirs] : llvm::zip(sig.inputs, known->inputs))
      mine.graphPosition = theirs.graphPosition;
  std::vector<std::vector<Tensor>> batches;
  BatchShard shard{dp.rank, dp.size, opts.ignoreIndex};
  if (!readTrainingData(sig, opts.dataDir, batches, shard))
    return kExitInputError;
  if (!ok(tfm_session_create(rt.module, nullptr, &rt.session)))
    return kExitInputError;
  // Rank 0 alone reads the checkpoint; joining the others copies its state
  // to them, so any number of ranks resumes it.
  bool lead = dp.rank == 0;
  if (lead && !opts.resume.empty() &&
      !ok(tfm_session_load_checkpoint(rt.session, opts.resume.c_str())))
    return kExitInputError;
  if (dp.distributed()) {
    if (!dp.joinOnDevice(rt.session) ||
        !ok(tfm_session_set_communicator(rt.session, dp.sessionCommunicator())))
      return kExitInputError;
    int32_t threads = tfm_context_num_threads(rt.context);
    if (lead)
      llvm::outs() << "data-parallel: " << dp.size << " processes"
                   << (dp.hasNccl
                           ? std::string(" on GPUs (NCCL)")
                           : llvm::formatv(" on {0} thread{1} each (--threads)",
                                           threads, threads == 1 ? "" : "s")
                                 .str())
                   << ", each training on its part of every batch's rows; "
                      "the steps average over all of them\n";
  }

  // Runtime tensors of every batch, made once.
  std::vector<std::vector<tfm_tensor_t *>> inputs(batches.size());
  auto releaseInputs = [&] {
    for (auto &b : inputs)
      for (tfm_tensor_t *t : b)
        tfm_tensor_release(t);
  };
  for (size_t b = 0; b < batches.size(); ++b)
    for (const Tensor &t : batches[b]) {
      tfm_tensor_t *rtT = nullptr;
      if (!ok(tfm_tensor_create(dtypeOf(t.kind), t.shape.data(), t.shape.size(),
                                &rtT))) {
        releaseInputs();
        return kExitInputError;
      }
      store(t, tfm_tensor_data(rtT));
      inputs[b].push_back(rtT);
    }
  int rc = kExitOk;
  int64_t first = tfm_session_step_count(rt.session);
  for (unsigned step = 1; step <= opts.steps && rc == kExitOk; ++step) {
    auto &in = inputs[(step - 1) % inputs.size()];
    tfm_tensor_t *loss = nullptr;
    auto start = std::chrono::steady_clock::now();
    if (!ok(tfm_session_run(rt.session, "train_step", in.data(), in.size(),
                            &loss, 1))) {
      rc = kExitInputError;
      break;
    }
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    Tensor value(sig.outputs[0].kind, sig.outputs[0].shape);
    load(tfm_tensor_data(loss), value);
    tfm_tensor_release(loss);
    if (lead)
      reportStep(static_cast<unsigned>(first) + step,
                 static_cast<unsigned>(first) + opts.steps, value.get(0),
                 seconds, !opts.quiet);
    if (!std::isfinite(value.get(0))) {
      error() << "the loss is not finite at step " << first + step << "\n";
      rc = kExitInputError;
    }
    bool periodic = opts.checkpointEvery && step % opts.checkpointEvery == 0;
    // Rank 0 writes the file; the others give it their parts of sharded
    // moments (--shard-optimizer).
    if (!opts.checkpoint.empty() && (periodic || step == opts.steps) &&
        (lead || dp.size > 1) &&
        !ok(tfm_session_save_checkpoint(
            rt.session, lead ? opts.checkpoint.c_str() : nullptr)))
      rc = kExitInputError;
  }
  releaseInputs();
  // Every rank ends with rank 0's parameters, or is named.
  if (rc == kExitOk && dp.size > 1) {
    if (!ok(tfm_session_compare_parameters(rt.session)))
      rc = kExitInputError;
    else if (lead)
      llvm::outs() << "parameters identical on all " << dp.size
                   << " processes\n";
  }
  if (!lead)
    return rc;
  if (rc == kExitOk && !opts.exportOnnx.empty()) {
    // The trained values replace the initializers they started from.
    std::vector<mlir::tfm::onnx_io::NamedTensor> trained;
    for (size_t i = 0, n = tfm_session_num_parameters(rt.session); i < n; ++i) {
      const char *name = tfm_session_parameter_name(rt.session, i);
      tfm_tensor_t *t = nullptr;
      if (!ok(tfm_session_get_parameter(rt.session, name, &t)))
        return kExitInputError;
      auto kind = kindOf(tfm_tensor_dtype(t));
      const int64_t *dims = tfm_tensor_dims(t);
      Tensor value(*kind, std::vector<int64_t>(dims, dims + tfm_tensor_rank(t)));
      load(tfm_tensor_data(t), value);
      tfm_tensor_release(t);
      trained.push_back({name, std::move(value)});
    }
    std::string err;
    if (!mlir::tfm::onnx_io::writeModelWithInitializers(
            opts.onnxModel, opts.exportOnnx, trained, err)) {
      error() << err << "\n";
      return kExitInputError;
    }
    llvm::outs() << "trained model written to " << opts.exportOnnx << "\n";
  }
  if (rc == kExitOk && !opts.checkpoint.empty())
    llvm::outs() << "checkpoint saved to " << opts.checkpoint << " (step "
                 << tfm_session_step_count(rt.session) << ")\n";
  return rc;
}

} // namespace

int mlir::tfm::tfmc::trainCompiled(StringRef soPath, const TrainOptions &opts,
                                   const Signature *known) {
  // Outlives the session, whose exchanges end before MPI does.
  DataParallel dp;
  if (!dp.join())
    return kExitInputError;
  int rc = trainOnRank(soPath, opts, known, dp);
  if (rc != kExitOk && dp.size > 1) {
    error() << "rank " << dp.rank << " of " << dp.size
            << " failed; ending the job\n";
    return dp.abortJob(rc);
  }
  return rc;
}

int mlir::tfm::tfmc::inspectCompiled(StringRef soPath, bool json) {
  Loaded rt;
  // Inspecting a library for another CPU reads it; it runs nothing.
  tfm_context_options_t co;
  tfm_context_options_init(&co);
  co.inspect_only = 1;
  if (!ok(tfm_context_create(&co, &rt.context)) ||
      !ok(tfm_module_load(rt.context, soPath.str().c_str(), &rt.module)))
    return kExitInputError;
  llvm::json::Array entries;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "library " << soPath << " (loaded by runtime "
     << tfm_runtime_version() << ", model ABI "
     << tfm_runtime_model_abi_version() << ")\n";
  std::string cpu = tfm_module_cpu(rt.module),
              features = tfm_module_cpu_features(rt.module);
  os << "target " << tfm_module_target(rt.module) << "; host code for CPU "
     << (cpu.empty() ? "(not recorded)" : "'" + cpu + "'") << " using "
     << (features.empty() ? "no recorded features" : features) << "\n";
  for (size_t e = 0, n = tfm_module_num_entries(rt.module); e < n; ++e) {
    const char *name = tfm_module_entry_name(rt.module, e);
    os << "entry " << name << "\n";
    llvm::json::Object entry{{"name", name}};
    for (int io = 0; io < 2; ++io) {
      size_t count = 0;
      if (!ok(tfm_module_entry_num_io(rt.module, name, io, &count)))
        return kExitInputError;
      llvm::json::Array ports;
      for (size_t i = 0; i < count; ++i) {
        tfm_tensor_desc_t d;
        if (!ok(tfm_module_entry_io(rt.module, name, io, i, &d)))
          return kExitInputError;
        std::vector<int64_t> lo(d.rank), hi(d.rank);
        if (!ok(tfm_module_entry_io_range(rt.module, name, io, i, lo.data(),
                                          hi.data())))
          return kExitInputError;
        auto kind = kindOf(d.dtype);
        const char *dtype =
            kind ? reference::elementKindName(*kind) : "unknown";
        os << "  " << (io ? "output " : "input  ") << d.name << ": " << dtype
           << "[";
        llvm::json::Array dims, mins, maxs;
        for (size_t r = 0; r < d.rank; ++r) {
          os << (r ? ", " : "");
          if (lo[r] == hi[r])
            os << lo[r];
          else
            os << lo[r] << ".." << hi[r];
          dims.push_back(d.dims[r]);
          mins.push_back(lo[r]);
          maxs.push_back(hi[r]);
        }
        os << "]";
        llvm::json::Object port{{"name", d.name},
                                {"dtype", dtype},
                                {"dims", std::move(dims)},
                                {"min", std::move(mins)},
                                {"max", std::move(maxs)}};
        tfm_input_values_t values = TFM_INPUT_VALUES_ANY;
        int64_t lower = 0, upper = 0;
        if (!io && !ok(tfm_module_entry_input_values(rt.module, name, i,
                                                     &values, &lower, &upper)))
          return kExitInputError;
        if (values == TFM_INPUT_VALUES_INDICES) {
          os << ": indices in [" << lower << ", " << upper << ")";
          port["values"] = llvm::json::Object{
              {"kind", "indices"}, {"lower", lower}, {"upper", upper}};
        } else if (values == TFM_INPUT_VALUES_MASK) {
          os << ": a mask (1 keeps a position)";
          port["values"] = llvm::json::Object{{"kind", "mask"}};
        }
        os << "\n";
        ports.push_back(std::move(port));
      }
      entry[io ? "outputs" : "inputs"] = std::move(ports);
    }
    entries.push_back(std::move(entry));
  }
  if (json)
    llvm::outs() << llvm::formatv(
        "{0:2}\n", llvm::json::Value(llvm::json::Object{
                       {"library", soPath.str()},
                       {"runtime", tfm_runtime_version()},
                       {"model_abi", tfm_runtime_model_abi_version()},
                       {"target", tfm_module_target(rt.module)},
                       {"cpu", cpu},
                       {"cpu_features", features},
                       {"entries", std::move(entries)}}));
  else
    llvm::outs() << text;
  return kExitOk;
}
