//===- Session.cpp - Sessions and runs ------------------------------------===//
//
// A session owns the arena its entry points compute in, allocated once at
// creation, so a run allocates only its outputs. Every input is checked
// against the entry's descriptor before compiled code sees it.
//
//===----------------------------------------------------------------------===//

#include "Binding.h"
#include "Exchange.h"
#include "Internal.h"
#include "Profile.h"
#include "Shards.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

using namespace tfm::runtime;

namespace {
using Clock = std::chrono::steady_clock;
} // namespace

const tfm_abi_state_desc_t *tfm_session_s::findState(const char *name,
                                                     int32_t kind) const {
  const tfm_abi_model_t *m = module->model;
  for (int32_t i = 0; i < m->num_states; ++i)
    if (m->states[i].kind == kind && std::strcmp(m->states[i].tensor.name, name) == 0)
      return &m->states[i];
  return nullptr;
}

namespace {

/// What run_kernel and check_failed return to compiled code, which returns
/// it from the entry.
constexpr int32_t kKernelFailed = -2;
constexpr int32_t kCheckFailed = -3;
constexpr int32_t kCorrupt = -5;
constexpr int32_t kCancelled = -6;
constexpr int32_t kDeadlineExceeded = -7;

/// Whether the run in progress must stop before its next kernel: its
/// cancel flag is raised or its deadline has passed.
int32_t interruption(tfm_session_s *s) {
  if (!s->interruptible)
    return 0;
  if (s->cancel && s->cancel->raised.load(std::memory_order_relaxed))
    return kCancelled;
  if (s->hasDeadline && Clock::now() >= s->deadline)
    return kDeadlineExceeded;
  return 0;
}

/// The kernel entry point compiled code calls through tfm_abi_host_t. Each
/// argument must lie, with the bytes the kernel touches, in one buffer of
/// the run: the arena, the weights, the state, an input or an output. A
/// model whose code passes anything else is corrupt.
int32_t runKernel(const tfm_abi_host_t *host, int32_t index,
                  void *const *args) {
  auto *session = static_cast<tfm_session_s *>(host->session);
  const tfm_abi_model_t *m = session->module->model;
  if (index < 0 || index >= m->num_kernels) {
    session->failure = fmt::format("the code called kernel {}, which the "
                                   "model does not have",
                                   index);
    return kCorrupt;
  }
  // The code runs its own kernels for it, which check for interruption.
  if (session->device->declined(index))
    return TFM_ABI_STATUS_KERNEL_DECLINED;
  if (int32_t rc = interruption(session))
    return rc;
  int32_t kind = m->kernels[index].kind;
  // Once the ranks exchange, one that stops leaves the others waiting.
  if (kind == TFM_KERNEL_ADAM || kind == TFM_KERNEL_SGD ||
      (kind == TFM_KERNEL_ALL_REDUCE && session->exchange))
    session->interruptible = false;
  const auto &footprint = session->footprints[index];
  for (int a = 0; a < TFM_KERNEL_MAX_ARGS; ++a) {
    if (!footprint[a])
      continue;
    auto *p = static_cast<const char *>(args[a]);
    bool inside = false;
    for (const auto &[base, bytes] : session->regions)
      if (p >= base && footprint[a] <= bytes &&
          static_cast<uint64_t>(p - base) <= bytes - footprint[a]) {
        inside = true;
        break;
      }
    if (!inside) {
      session->failure = fmt::format(
          "kernel {} ({}) was handed {} bytes at argument {} outside the "
          "buffers of the run",
          index, kernelName(m->kernels[index].kind), footprint[a], a);
      return kCorrupt;
    }
  }
  std::string error;
  // In one process an average across processes is the tensor itself.
  auto run = [&] {
    if (kind == TFM_KERNEL_ADAM &&
        m->kernels[index].params[TFM_OPTIMIZER_SHARDED])
      return session->shards->update(m->kernels[index], args,
                                     session->exchange.get(), error);
    if (kind != TFM_KERNEL_ALL_REDUCE)
      return session->device->runKernel(index, args, error);
    return session->exchange
               ? session->exchange->run(m->kernels[index], args, error)
               : 0;
  };
  int32_t rc;
  if (!session->profile) {
    rc = run();
  } else {
    auto start = Clock::now();
    rc = run();
    // A GPU's kernel runs after the call returns: waited on, it is timed,
    // and a fault names it.
    if (rc == 0 && !session->device->hostAddressable()) {
      try {
        session->device->synchronize();
      } catch (const DeviceError &e) {
        error = e.what();
        rc = -1;
      }
    }
    auto end = Clock::now();
    session->profile->kernelMs[index] +=
        std::chrono::duration<double, std::milli>(end - start).count();
    session->profile->kernelCalls[index]++;
    session->profile->record(index, nullptr, start, end);
  }
  // A kernel created at its first run may be declined then.
  if (rc == TFM_ABI_STATUS_KERNEL_DECLINED && session->device->declined(index))
    return rc;
  if (rc != 0) {
    session->failure = fmt::format("kernel {} ({}) failed: {}", index,
                                   kernelName(m->kernels[index].kind),
                                   error.empty() ? "no reason given" : error);
    return kKernelFailed;
  }
  return 0;
}

/// Why check `c` failed in a run of `e`: the element at flat `position` of
/// the indices holds `value`.
std::string describeCheck(const tfm_abi_check_desc_t &c,
                          const tfm_abi_entry_t *e, int64_t position,
                          int64_t value) {
  // The position as a multi-index when the indices are an entry input.
  std::string where = fmt::format("at position {}", position);
  if (e && c.input >= 0 && c.input < e->num_inputs) {
    const tfm_abi_tensor_desc_t &d = e->inputs[c.input];
    std::vector<int64_t> index(static_cast<size_t>(d.rank));
    int64_t rest = position;
    for (int32_t i = d.rank - 1; i >= 0; --i) {
      index[i] = d.dims[i] ? rest % d.dims[i] : 0;
      rest = d.dims[i] ? rest / d.dims[i] : 0;
    }
    where = "at " + shapeString(index.data(), index.size());
  }
  return fmt::format("{} holds {} {}, outside [{}, {}) that {} reads", c.tensor,
                     value, where, c.lower, c.upper, c.op);
}

/// The check entry point compiled code calls through tfm_abi_host_t: an
/// index it was about to read is out of range.
int32_t checkFailed(const tfm_abi_host_t *host, int32_t check, int64_t position,
                    int64_t value) {
  auto *session = static_cast<tfm_session_s *>(host->session);
  const tfm_abi_model_t *m = session->module->model;
  if (check < 0 || check >= m->num_checks) {
    session->failure = fmt::format("an unknown check {} failed", check);
    return kCorrupt;
  }
  session->failure =
      describeCheck(m->checks[check], session->running, position, value);
  return kCheckFailed;
}

/// Where the checks of a model in TFM_CHECKS_IN_STATE write their
/// outcomes in the session's state, or null for another model.
char *checkSlots(const tfm_session_s &session) {
  const tfm_abi_model_t *m = session.module->model;
  if (checkMode(m) != TFM_CHECKS_IN_STATE || m->num_checks <= 0)
    return nullptr;
  return static_cast<char *>(session.state.get()) + m->check_slots_offset;
}

/// Sets every check's slot to "passed" before a run. (A copy from
/// pageable memory returns once the source is read, so the session's one
/// host copy of the slots serves again after the run.)
void clearCheckSlots(tfm_session_s &session) {
  char *slots = checkSlots(session);
  if (!slots)
    return;
  std::vector<int64_t> &outcome = session.checkOutcome;
  outcome.assign(
      size_t(session.module->model->num_checks) * TFM_CHECK_SLOT_BYTES / 8, -1);
  session.device->copyToDevice(slots, outcome.data(),
                               outcome.size() * sizeof(int64_t));
}

/// After a run of `e`: the first check (in the code's order) whose slot
/// holds a failure, described into session.failure; kCheckFailed, or 0
/// when every check passed.
int32_t readCheckSlots(tfm_session_s &session, const tfm_abi_entry_t *e) {
  char *slots = checkSlots(session);
  if (!slots)
    return 0;
  const tfm_abi_model_t *m = session.module->model;
  std::vector<int64_t> &outcome = session.checkOutcome;
  session.device->copyToHost(outcome.data(), slots,
                             outcome.size() * sizeof(int64_t));
  constexpr size_t stride = TFM_CHECK_SLOT_BYTES / 8;
  for (int32_t i = 0; i < m->num_checks; ++i) {
    int64_t position = outcome[i * stride], value = outcome[i * stride + 1];
    if (position < 0)
      continue;
    session.failure = describeCheck(m->checks[i], e, position, value);
    return kCheckFailed;
  }
  return 0;
}

/// The launch entry point compiled code for a GPU calls through
/// tfm_abi_host_t. Under TFM_PROFILE each launch is waited on, which times
/// it and names the kernel that fails while running.
int32_t launchKernel(const tfm_abi_host_t *host, int32_t kernel,
                     const int64_t grid[3], const int64_t block[3],
                     int64_t sharedBytes, void **args) {
  auto *session = static_cast<tfm_session_s *>(host->session);
  if (int32_t rc = interruption(session))
    return rc;
  Device &device = *session->device;
  std::string error;
  int32_t rc;
  try {
    if (!session->profile) {
      rc = device.launch(kernel, grid, block, sharedBytes, args, error);
    } else {
      auto start = Clock::now();
      rc = device.launch(kernel, grid, block, sharedBytes, args, error);
      if (rc == 0) {
        device.synchronize();
        auto end = Clock::now();
        // The descriptors' rows come first.
        int32_t row = session->module->model->num_kernels + kernel;
        session->profile->kernelMs[row] +=
            std::chrono::duration<double, std::milli>(end - start).count();
        session->profile->kernelCalls[row]++;
        session->profile->record(row, nullptr, start, end);
      }
    }
  } catch (const DeviceError &e) {
    error = fmt::format("kernel '{}' failed: {}",
                        session->module->model->device_kernels[kernel],
                        e.what());
    rc = -1;
  }
  if (rc != 0) {
    session->failure = std::move(error);
    return kKernelFailed;
  }
  return 0;
}

/// The device read compiled code for a GPU calls through tfm_abi_host_t
/// (for its run-time checks).
int32_t readDevice(const tfm_abi_host_t *host, void *dst, const void *src,
                   uint64_t bytes) {
  auto *session = static_cast<tfm_session_s *>(host->session);
  try {
    session->device->copyToHost(dst, src, bytes);
  } catch (const DeviceError &e) {
    session->failure = e.what();
    return kKernelFailed;
  }
  return 0;
}

/// The tensor maps compiled code asks for (tfm_abi_tensor_map_fn_t), made
/// by the session's device.
int32_t tensorMap(const tfm_abi_host_t *host,
                  const tfm_abi_tensor_map_desc_t *desc, const void *base,
                  void **map) {
  auto *session = static_cast<tfm_session_s *>(host->session);
  std::string error;
  try {
    *map = session->device->tensorMap(*desc, base, error);
  } catch (const DeviceError &e) {
    *map = nullptr;
    error = e.what();
  }
  if (*map)
    return 0;
  session->failure = "cannot make a tensor map for a TMA load: " + error;
  return kKernelFailed;
}

/// Why a GPU session's entries cannot run as graphs, or "" when they can:
/// a graph replays the launches it recorded, so nothing may read device
/// memory mid-run or time each kernel.
std::string whyNoGraphs(const Device &device, const tfm_abi_model_t &m,
                        bool profiled) {
  const char *env = std::getenv("TFM_CUDA_GRAPHS");
  if (env && std::strcmp(env, "off") == 0)
    return "turned off (TFM_CUDA_GRAPHS=off)";
  if (std::string why = device.whyNoGraphs(); !why.empty())
    return why;
  if (profiled)
    return "the profile times each kernel";
  if (m.num_checks > 0 && checkMode(&m) != TFM_CHECKS_IN_STATE)
    return fmt::format("the code reads {} index check{} back mid-run",
                       m.num_checks, m.num_checks == 1 ? "" : "s");
  return "";
}

void parallelFor(const tfm_abi_host_t *host, tfm_abi_task_fn_t task,
                 void *const *args, int64_t n) {
  static_cast<tfm_session_s *>(host->session)
      ->device->parallelFor(task, args, n);
}

} // namespace

tfm_session_s::~tfm_session_s() {
  for (const EntryGraph &g : graphs)
    if (g.graph)
      device->releaseGraph(g.graph);
  if (profile && profile->printAtRelease)
    printProfile(*this, stderr);
  if (module)
    module->release();
}

extern "C" {

void tfm_session_options_init(tfm_session_options_t *options) {
  if (!options)
    return;
  *options = tfm_session_options_t{};
  options->struct_size = sizeof(tfm_session_options_t);
}

tfm_status_t tfm_session_create(tfm_module_t *module,
                                const tfm_session_options_t *options,
                                tfm_session_t **out_session) {
  if (!module || !out_session)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_create: module and out_session must not "
                      "be NULL");
  *out_session = nullptr;
  tfm_session_options_t opts;
  tfm_session_options_init(&opts);
  if (tfm_status_t s = readOptions(options, opts, "tfm_session_options_t",
                                   "tfm_session_options_init"))
    return s;
  if (!module->cpuRefusal.empty())
    return makeStatus(TFM_STATUS_INCOMPATIBLE, "{}", module->cpuRefusal);
  return guarded("tfm_session_create", [&]() -> tfm_status_t {
    auto s = std::make_unique<tfm_session_s>();
    s->module = module;
    module->retain();
    const tfm_abi_model_t *m = module->model;
    std::string deviceName = module->context->device;
    if (deviceName.empty())
      deviceName = m->target == TFM_TARGET_CUDA ? "cuda:0" : "cpu";
    s->device = makeDevice(deviceName);
    s->deviceName = s->device->name();
    if (s->device->target() != m->target)
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}' was compiled for {}; it cannot run on {}",
                        module->path, targetName(m->target), s->deviceName);
    uint64_t arena = 0;
    for (int32_t i = 0; i < m->num_entries; ++i)
      arena = std::max(arena, m->entries[i].arena_bytes);
    auto allocate = [&](DeviceBuffer &buffer, uint64_t bytes,
                        const char *what) -> tfm_status_t {
      buffer = s->device->allocate(bytes);
      if (buffer.get())
        return nullptr;
      return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED,
                        "tfm_session_create: {} cannot allocate {} of {} "
                        "bytes",
                        s->deviceName, what, bytes);
    };
    if (tfm_status_t st = allocate(s->arena, arena, "an arena"))
      return st;
    // The training state starts at the parameters' initial values, the
    // moments and the step count at zero.
    if (tfm_status_t st = allocate(s->state, m->state_bytes, "a state"))
      return st;
    std::vector<char> initial(m->state_bytes, 0);
    for (int32_t i = 0; i < m->num_states; ++i) {
      const tfm_abi_state_desc_t &st = m->states[i];
      if (st.init_offset >= 0)
        std::memcpy(initial.data() + st.offset,
                    static_cast<const char *>(module->weights) + st.init_offset,
                    tensorBytes(st.tensor));
    }
    s->device->copyToDevice(s->state.get(), initial.data(), initial.size());
    std::string why;
    s->shards = Shards::create(*m, why);
    if (!why.empty())
      return makeStatus(TFM_STATUS_DATA_LOSS,
                        "tfm_session_create: '{}' is corrupt: {}", module->path,
                        why);
    if (s->shards && !s->device->hostAddressable())
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}' shards Adam's moments (--shard-optimizer), "
                        "which runs on the CPU only so far",
                        module->path);
    if (!s->device->hostAddressable()) {
      if (tfm_status_t st =
              allocate(s->weights, m->weights_bytes, "the weights"))
        return st;
      s->device->copyToDevice(s->weights.get(), module->weights,
                              m->weights_bytes);
      s->staging.resize(m->num_entries);
    }
    // Every kernel is prepared here, once; runs only execute them.
    try {
      ThreadsScope threads(*s->device, module->context->numThreads);
      Device::KernelOptions kernelOptions;
      kernelOptions.allowTF32 = opts.allow_tf32 != 0;
      s->device->prepare(*m, kernelOptions);
    } catch (const DeviceError &e) {
      return makeStatus(e.code, "'{}': {}", module->path, e.what());
    }
    std::string error;
    s->footprints.resize(m->num_kernels);
    for (int32_t i = 0; i < m->num_kernels; ++i)
      kernelFootprint(m->kernels[i], kernelFlags(m, i), s->footprints[i].data(),
                      error);
    const char *env = std::getenv("TFM_PROFILE");
    bool printAtRelease = env && *env && *env != '0';
    if (printAtRelease || opts.profile)
      s->profile = makeProfile(*m, printAtRelease);
    s->description = describeKernels(*s->device, *m);
    if (std::string warned = s->device->loadWarnings(); !warned.empty())
      s->description += "; the GPU's compiler warned: " + warned;
    if (!s->device->hostAddressable()) {
      s->whyNoGraphs = whyNoGraphs(*s->device, *m, s->profile != nullptr);
      s->graphs.resize(static_cast<size_t>(m->num_entries));
      s->description += s->whyNoGraphs.empty()
                            ? "; runs replay CUDA graphs"
                            : "; no CUDA graphs: " + s->whyNoGraphs;
    }
    *out_session = s.release();
    return nullptr;
  });
}

void tfm_session_release(tfm_session_t *session) { delete session; }

const char *tfm_session_device(const tfm_session_t *session) {
  return session ? session->deviceName.c_str() : "";
}

const char *tfm_session_describe(const tfm_session_t *session) {
  return session ? session->description.c_str() : "";
}

tfm_status_t tfm_session_run(tfm_session_t *session, const char *entry,
                             tfm_tensor_t *const *inputs, size_t num_inputs,
                             tfm_tensor_t **out_outputs, size_t num_outputs) {
  if (!session || !entry || (num_inputs && !inputs) ||
      (num_outputs && !out_outputs))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_run: NULL argument");
  // By position, every output a new tensor: the slots the caller gave are
  // for receiving, whatever they held.
  std::fill(out_outputs, out_outputs + num_outputs, nullptr);
  return tfm_session_run_with(session, entry, nullptr, nullptr, inputs,
                              num_inputs, nullptr, out_outputs, num_outputs);
}

tfm_status_t tfm_session_synchronize(tfm_session_t *session) {
  if (!session)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_synchronize: session is NULL");
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_synchronize");
  return guarded("tfm_session_synchronize", [&]() -> tfm_status_t {
    session->device->synchronize();
    session->devicePending = false;
    return nullptr;
  });
}

tfm_status_t tfm_cancel_flag_create(tfm_cancel_flag_t **out_flag) {
  if (!out_flag)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_cancel_flag_create: out_flag is NULL");
  *out_flag = new (std::nothrow) tfm_cancel_flag_s;
  return *out_flag ? nullptr
                   : makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED,
                                "tfm_cancel_flag_create: out of memory");
}

void tfm_cancel_flag_raise(tfm_cancel_flag_t *flag) {
  if (flag)
    flag->raised.store(true, std::memory_order_relaxed);
}

void tfm_cancel_flag_reset(tfm_cancel_flag_t *flag) {
  if (flag)
    flag->raised.store(false, std::memory_order_relaxed);
}

int tfm_cancel_flag_is_raised(const tfm_cancel_flag_t *flag) {
  return flag && flag->raised.load(std::memory_order_relaxed);
}

void tfm_cancel_flag_release(tfm_cancel_flag_t *flag) { delete flag; }

tfm_status_t tfm_session_write_profile(tfm_session_t *session,
                                       const char *path,
                                       tfm_profile_format_t format) {
  if (!session || !path)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_write_profile: NULL argument");
  if (format != TFM_PROFILE_TABLE && format != TFM_PROFILE_TRACE)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_write_profile: unknown format {}",
                      static_cast<int>(format));
  if (!session->profile)
    return makeStatus(TFM_STATUS_FAILED_PRECONDITION,
                      "tfm_session_write_profile: the session was created "
                      "without profile in its options");
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_write_profile");
  bool toStderr = std::strcmp(path, "-") == 0;
  std::FILE *out = toStderr ? stderr : std::fopen(path, "w");
  if (!out)
    return makeStatus(TFM_STATUS_NOT_FOUND,
                      "tfm_session_write_profile: cannot write '{}': {}",
                      path, std::strerror(errno));
  return guarded("tfm_session_write_profile", [&]() -> tfm_status_t {
    if (format == TFM_PROFILE_TABLE)
      printProfile(*session, out);
    else
      writeTrace(*session, out);
    bool failed = std::ferror(out) != 0;
    if (!toStderr)
      failed = std::fclose(out) != 0 || failed;
    if (failed)
      return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED,
                        "tfm_session_write_profile: writing '{}' failed",
                        path);
    return nullptr;
  });
}

void tfm_run_options_init(tfm_run_options_t *options) {
  if (!options)
    return;
  *options = tfm_run_options_t{};
  options->struct_size = sizeof(tfm_run_options_t);
}

tfm_status_t tfm_session_run_with(tfm_session_t *session, const char *entry,
                                  const tfm_run_options_t *options,
                                  const char *const *input_names,
                                  tfm_tensor_t *const *inputs,
                                  size_t num_inputs,
                                  const char *const *output_names,
                                  tfm_tensor_t **outputs,
                                  size_t num_outputs) {
  if (!session || !entry || (num_inputs && !inputs) ||
      (num_outputs && !outputs))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_run_with: NULL argument");
  tfm_run_options_t opts;
  tfm_run_options_init(&opts);
  if (tfm_status_t s = readOptions(options, opts, "tfm_run_options_t",
                                   "tfm_run_options_init"))
    return s;
  if (!(opts.timeout_ms >= 0))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_run_options_t: timeout_ms must be 0 or positive, "
                      "not {}",
                      opts.timeout_ms);
  const tfm_module_s *module = session->module;
  const tfm_module_s::PublicEntry *pub = module->findPublic(entry);
  const tfm_abi_dynamic_entry_t *d = pub ? pub->dynamic : nullptr;
  const tfm_abi_entry_t *e = d ? nullptr : module->findEntry(entry);
  if (!d && !e)
    return makeStatus(TFM_STATUS_NOT_FOUND,
                      "'{}' has no entry point '{}'; it has: {}", module->path,
                      entry, module->entryNames());
  EntryPorts ports{entry,
                   d ? d->inputs : e->inputs,
                   d ? d->outputs : e->outputs,
                   static_cast<size_t>(d ? d->num_inputs : e->num_inputs),
                   static_cast<size_t>(d ? d->num_outputs : e->num_outputs),
                   d != nullptr};
  size_t wantOutputs = ports.numOutputs;
  Binding bound;
  if (tfm_status_t st =
          bindArguments(*session, ports, input_names, inputs, num_inputs,
                        output_names, outputs, num_outputs, bound))
    return st;
  RunPlacement placement;
  placement.outputsOnDevice = opts.outputs_on_device != 0;
  placement.useStream = opts.use_stream != 0;
  placement.stream = opts.stream;
  if (placement.useStream && session->device->hostAddressable())
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_run_options_t: use_stream orders a run with a "
                      "CUDA stream, but the session computes on {}",
                      session->deviceName);
  // A dynamic entry pads its inputs and cuts its outputs on the host.
  if (d && !session->device->hostAddressable()) {
    auto offHost = [](const tfm_tensor_t *t) { return t && !t->onHost(); };
    if (placement.outputsOnDevice || placement.useStream ||
        std::any_of(bound.inputs.begin(), bound.inputs.end(), offHost) ||
        std::any_of(bound.given.begin(), bound.given.end(), offHost))
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "entry '{}' takes a range of sizes, which a run "
                        "pads on the host: give it host tensors, without "
                        "outputs_on_device or a stream",
                        entry);
  }
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_run_with");
  session->cancel = opts.cancel;
  session->hasDeadline = opts.timeout_ms > 0;
  if (session->hasDeadline)
    session->deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double, std::milli>(
                               opts.timeout_ms));
  struct Limits {
    tfm_session_s *s;
    ~Limits() {
      s->cancel = nullptr;
      s->hasDeadline = false;
    }
  } limits{session};
  std::vector<tfm_tensor_t *> results(wantOutputs, nullptr);
  std::vector<tfm_tensor_t *> &given = bound.given;
  tfm_status_t st =
      d ? runDynamic(session, *d, bound.inputs.data(), bound.inputs.size(),
                     results.data())
        : runEntry(session, e, bound.inputs.data(), bound.inputs.size(),
                   results.data(), given.data(), placement);
  if (st)
    return st;
  // A dynamic entry's outputs are cut back from its bucket's, so they are
  // copied into the tensors given, once their sizes are known.
  for (size_t i = 0; d && i < wantOutputs; ++i) {
    if (!given[i])
      continue;
    tfm_tensor_t *r = results[i];
    if (r->dims != given[i]->dims)
      st = st ? st
              : makeStatus(
                    TFM_STATUS_INVALID_ARGUMENT,
                    "entry '{}': output '{}' is {} in this run, but the "
                    "tensor given for it is {}",
                    entry, ports.outputs[i].name,
                    shapeString(r->dims.data(), r->dims.size()),
                    shapeString(given[i]->dims.data(), given[i]->dims.size()));
    else
      std::memcpy(given[i]->buffer.ptr.get(), r->buffer.ptr.get(),
                  r->buffer.size);
    tfm_tensor_release(r);
    results[i] = given[i];
  }
  if (st) {
    for (size_t i = 0; i < wantOutputs; ++i)
      if (!given[i])
        tfm_tensor_release(results[i]);
    return st;
  }
  std::vector<bool> handed(wantOutputs, false);
  for (size_t i = 0; i < bound.source.size(); ++i) {
    outputs[i] = results[bound.source[i]];
    handed[bound.source[i]] = true;
  }
  for (size_t i = 0; i < wantOutputs; ++i)
    if (!handed[i] && !given[i])
      tfm_tensor_release(results[i]);
  return nullptr;
}

} // extern "C"

tfm_status_t
tfm::runtime::runEntry(tfm_session_t *session, const tfm_abi_entry_t *e,
                       tfm_tensor_t *const *inputs, size_t num_inputs,
                       tfm_tensor_t **out_outputs, tfm_tensor_t *const *given,
                       const RunPlacement &placement) {
  const tfm_module_s *module = session->module;
  const char *entry = e->name;
  return guarded("tfm_session_run", [&]() -> tfm_status_t {
    std::vector<tfm_tensor_t *> outs(e->num_outputs, nullptr);
    auto isGiven = [&](size_t i) { return given && given[i]; };
    auto releaseAll = [&] {
      for (size_t i = 0; i < outs.size(); ++i)
        if (!isGiven(i))
          tfm_tensor_release(outs[i]);
    };
    for (int32_t i = 0; i < e->num_outputs; ++i) {
      const tfm_abi_tensor_desc_t &d = e->outputs[i];
      if (isGiven(i)) {
        outs[i] = given[i];
        continue;
      }
      auto dtype = static_cast<tfm_dtype_t>(d.dtype);
      auto rank = static_cast<size_t>(d.rank);
      if (tfm_status_t s =
              placement.outputsOnDevice
                  ? createOnDevice(session->device, dtype, d.dims, rank,
                                   &outs[i])
                  : tfm_tensor_create(dtype, d.dims, rank, &outs[i])) {
        releaseAll();
        return s;
      }
      if (poisonMemory() && outs[i]->device == "cpu")
        std::memset(tfm_tensor_data(outs[i]), 0xff, outs[i]->buffer.size);
    }
    Device &device = *session->device;
    bool onHost = device.hostAddressable();
    // A run that may be cancelled or time out launches kernel by kernel,
    // which checks before each; a replay is one call.
    // A data-parallel step's exchange keeps count of its buckets at each
    // call, which a replay would skip.
    bool graphed = !onHost && session->whyNoGraphs.empty() &&
                   !session->cancel && !session->hasDeadline &&
                   !session->exchange;
    const void *weights = onHost ? module->weights : session->weights.get();
    RunAddresses at;
    tfm_abi_host_t host{};
    host.struct_size = sizeof(tfm_abi_host_t);
    host.arena = session->arena.get();
    host.weights = weights;
    host.run_kernel = runKernel;
    host.session = session;
    host.state = session->state.get();
    host.check_failed = checkFailed;
    host.arena_bytes = session->arena.bytes();
    host.weights_bytes = module->model->weights_bytes;
    host.state_bytes = session->state.bytes();
    if (!onHost)
      host.launch = launchKernel;
    else
      host.parallel_for = parallelFor;
    host.read_device = readDevice;
    host.tensor_map = tensorMap;
    ThreadsScope threads(device, module->context->numThreads);
    // An interrupted training step leaves the state as it was: the kernels
    // that update the parameters are never interrupted, and the step count,
    // which the step's code advances first, is put back.
    session->interruptible = true;
    const tfm_abi_state_desc_t *step = nullptr;
    int64_t stepBefore = 0;
    if (session->cancel || session->hasDeadline) {
      const tfm_abi_model_t *m = module->model;
      for (int32_t i = 0; i < m->num_states && !step; ++i)
        if (m->states[i].kind == TFM_STATE_STEP)
          step = &m->states[i];
      if (step)
        device.copyToHost(&stepBefore,
                          static_cast<char *>(session->state.get()) +
                              step->offset,
                          sizeof(stepBefore));
      // Device code launches its updates as kernels of its own, which the
      // runtime cannot tell apart: a GPU training step runs whole.
      if (!onHost && step)
        session->interruptible = false;
    }
    int32_t rc;
    auto start = Clock::now();
    try {
      if (placement.useStream)
        device.waitForStream(placement.stream);
      tfm_session_s::EntryGraph *g =
          graphed ? &session->graphs[e - module->model->entries] : nullptr;
      // A graph's first run goes eagerly, on the tensors in place.
      bool replays = g && g->warmedUp;
      if (tfm_status_t st =
              placeTensors(*session, *e, inputs, outs.data(), replays, at)) {
        releaseAll();
        return st;
      }
      // The buffers of the run, which kernel arguments must lie in.
      auto &regions = session->regions;
      regions.clear();
      regions.emplace_back(static_cast<const char *>(session->arena.get()),
                           session->arena.bytes());
      regions.emplace_back(static_cast<const char *>(weights),
                           module->model->weights_bytes);
      regions.emplace_back(static_cast<const char *>(session->state.get()),
                           session->state.bytes());
      for (size_t i = 0; i < at.in.size(); ++i)
        regions.emplace_back(static_cast<const char *>(at.in[i]),
                             at.inBytes[i]);
      for (size_t i = 0; i < at.out.size(); ++i)
        regions.emplace_back(static_cast<const char *>(at.out[i]),
                             at.outBytes[i]);
      host.input_bytes = at.inBytes.data();
      host.output_bytes = at.outBytes.data();
      clearCheckSlots(*session);
      session->running = e;
      if (replays) {
        // The second run records the entry's work; every run replays it.
        rc = 0;
        if (!g->graph) {
          device.beginCapture();
          rc = e->fn(&host, at.in.data(), at.out.data());
          g->graph = device.endCapture(rc == 0);
        }
        if (rc == 0)
          device.replay(g->graph);
      } else {
        // A graph's first run goes eagerly, which loads what the libraries
        // load lazily (their kernels, their handles' state) outside a
        // recording.
        if (g)
          g->warmedUp = true;
        rc = e->fn(&host, at.in.data(), at.out.data());
      }
      // The parameters' parts of a sharded update may still be on their
      // way between the ranks.
      if (session->exchange) {
        std::string why;
        if (int32_t drained = session->exchange->drain(why); drained && !rc) {
          session->failure = why;
          rc = kKernelFailed;
        }
      }
      session->running = nullptr;
      if (rc == 0)
        rc = readCheckSlots(*session, e);
      if (rc == 0)
        collectOutputs(*session, *e, outs.data(), at);
      // Ordered with the caller's stream, the run may still be going; else
      // its outputs are done when the call returns.
      if (!onHost && placement.useStream) {
        device.signalStream(placement.stream);
        session->devicePending = true;
      } else if (!onHost) {
        device.synchronize();
      }
    } catch (const DeviceError &err) {
      session->running = nullptr;
      releaseAll();
      return makeStatus(err.code, "entry '{}' of '{}': {}", entry,
                        module->path, err.what());
    }
    if (session->profile) {
      auto end = Clock::now();
      session->profile->endRun(
          std::chrono::duration<double, std::milli>(end - start).count());
      session->profile->record(-1, e->name, start, end);
    }
    if (rc != 0) {
      releaseAll();
      std::string why = std::exchange(session->failure, std::string());
      if ((rc == kCancelled || rc == kDeadlineExceeded) && step)
        device.copyToDevice(static_cast<char *>(session->state.get()) +
                                step->offset,
                            &stepBefore, sizeof(stepBefore));
      double ms = std::chrono::duration<double, std::milli>(Clock::now() -
                                                            start)
                      .count();
      switch (rc) {
      case kCancelled:
        return makeStatus(TFM_STATUS_CANCELLED,
                          "entry '{}' was cancelled after {:.3f} ms", entry,
                          ms);
      case kDeadlineExceeded:
        return makeStatus(TFM_STATUS_DEADLINE_EXCEEDED,
                          "entry '{}' stopped at its timeout, after {:.3f} "
                          "ms",
                          entry, ms);
      case kKernelFailed:
        return makeStatus(TFM_STATUS_INTERNAL, "entry '{}' of '{}': {}", entry,
                          module->path, why);
      case kCheckFailed:
        return makeStatus(TFM_STATUS_INVALID_ARGUMENT, "entry '{}': {}", entry,
                          why);
      case kCorrupt:
        return makeStatus(TFM_STATUS_DATA_LOSS,
                          "entry '{}' of '{}': the model library is corrupt: "
                          "{}",
                          entry, module->path, why);
      case TFM_ABI_STATUS_NO_TENSOR_MAPS:
        return makeStatus(TFM_STATUS_FAILED_PRECONDITION,
                          "entry '{}' of '{}' reads through TMA, which needs "
                          "a runtime that makes tensor maps",
                          entry, module->path);
      case TFM_ABI_STATUS_SIZE_MISMATCH:
        return makeStatus(TFM_STATUS_DATA_LOSS,
                          "entry '{}' of '{}': the model library is corrupt: "
                          "its code needs other buffer sizes than its "
                          "metadata describes",
                          entry, module->path);
      default:
        return makeStatus(TFM_STATUS_INTERNAL,
                          "entry '{}' of '{}' failed with code {}{}{}", entry,
                          module->path, rc, why.empty() ? "" : ": ", why);
      }
    }
    for (size_t i = 0; i < outs.size(); ++i)
      out_outputs[i] = outs[i];
    return nullptr;
  });
}
