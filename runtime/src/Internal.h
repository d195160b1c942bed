//===- Internal.h - Shared internals of the runtime -------------*- C++ -*-===//
//
// The runtime links no LLVM or MLIR: only the C++ standard library, fmt and
// (for kernels) oneDNN. Exceptions stay inside; every C entry point catches.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_INTERNAL_H
#define TFM_RUNTIME_SRC_INTERNAL_H

#include "Device.h"
#include "tfm/abi.h"
#include "tfm/runtime.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

struct tfm_status_s {
  tfm_status_code_t code;
  std::string message;
};

namespace tfm::runtime {

template <typename... Args>
tfm_status_t makeStatus(tfm_status_code_t code, fmt::format_string<Args...> f,
                        Args &&...args) {
  return new (std::nothrow)
      tfm_status_s{code, fmt::format(f, std::forward<Args>(args)...)};
}

/// Objects handed out as handles count their references, so a module keeps
/// its context alive and a session its module.
struct RefCounted {
  std::atomic<int> refs{1};
  virtual ~RefCounted() = default;
  void retain() { refs.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete this;
  }
};

/// Frees an AlignedBuffer's memory, unless it is borrowed: a view
/// (tfm_tensor_create_view) does not own its memory.
struct BufferFree {
  bool owned = true;
  void operator()(void *p) const {
    if (owned)
      std::free(p);
  }
};

/// Host storage aligned as the ABI promises compiled code (oneDNN prefers
/// it too).
struct AlignedBuffer {
  using Free = BufferFree;
  std::unique_ptr<void, Free> ptr;
  size_t size = 0;
  /// Returns false when the allocation fails.
  bool allocate(size_t bytes) {
    constexpr size_t align = TFM_BUFFER_ALIGNMENT;
    if (bytes > SIZE_MAX - align)
      return false;
    size_t rounded = (bytes + align - 1) / align * align;
    void *p = std::aligned_alloc(align, rounded ? rounded : align);
    if (!p)
      return false;
    ptr.reset(p);
    size = bytes;
    return true;
  }
};

/// Runs `f`, turning any escaping exception into a status: a device's
/// failure into its own, anything else into an internal one.
template <typename F> tfm_status_t guarded(const char *what, F &&f) {
  try {
    return f();
  } catch (const DeviceError &e) {
    return makeStatus(e.code, "{}: {}", what, e.what());
  } catch (const std::bad_alloc &) {
    return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED, "{}: out of memory",
                      what);
  } catch (const std::exception &e) {
    return makeStatus(TFM_STATUS_INTERNAL, "{}: {}", what, e.what());
  } catch (...) {
    return makeStatus(TFM_STATUS_INTERNAL, "{}: unknown error", what);
  }
}

/// Copies the caller's options struct over `out` (already its defaults):
/// the fields its struct_size covers, so a caller built with older headers
/// keeps the newer fields' defaults. A size no version of the struct has
/// is refused: the caller did not initialize it.
template <typename Options>
tfm_status_t readOptions(const Options *given, Options &out,
                         const char *type, const char *init) {
  if (!given)
    return nullptr;
  if (given->struct_size < sizeof(size_t) ||
      given->struct_size > sizeof(Options))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "{}: struct_size {} is not one this runtime knows (at "
                      "most {}); initialize it with {}",
                      type, given->struct_size, sizeof(Options), init);
  std::memcpy(&out, given, given->struct_size);
  return nullptr;
}

const char *dtypeName(int32_t dtype);

/// 64-bit FNV-1a of `n` bytes, continuing from `h` (a checkpoint's
/// checksum, a model library's identity across ranks).
inline uint64_t fnv1a(const char *data, size_t n,
                      uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

/// "[2, 3]".
std::string shapeString(const int64_t *dims, size_t rank);

/// The bytes of a dense tensor of descriptor `d` (validated dims).
uint64_t tensorBytes(const tfm_abi_tensor_desc_t &d);

/// Whether the runtime keeps a state slot of `kind` outside the state: a
/// sharded Adam moment (Shards.h).
inline bool isShardedMoment(int32_t kind) {
  return kind == TFM_STATE_ADAM_M_SHARD || kind == TFM_STATE_ADAM_V_SHARD;
}

/// Whether checkpoints hold slots of `kind`: what training learns, not a
/// generation cache or the rank.
inline bool isCheckpointed(int32_t kind) {
  return (kind >= TFM_STATE_PARAMETER && kind <= TFM_STATE_STEP) ||
         isShardedMoment(kind);
}

/// The target's name in messages ("the CPU").
const char *targetName(int32_t target);

/// The kernel kind's name in messages ("linear").
const char *kernelName(int32_t kind);

/// How many dynamic entries `m` has: none in a description from before
/// their append to version 5.
inline int32_t numDynamicEntries(const tfm_abi_model_t *m) {
  return m->struct_size >= offsetof(tfm_abi_model_t, dynamic_entries) +
                               sizeof(m->dynamic_entries)
             ? m->num_dynamic_entries
             : 0;
}

/// The kernels' origins (for profiles), or null: absent in a description
/// from before their append to version 5.
inline const char *const *kernelOrigins(const tfm_abi_model_t *m) {
  return m->struct_size >= offsetof(tfm_abi_model_t, kernel_origins) +
                               sizeof(m->kernel_origins)
             ? m->kernel_origins
             : nullptr;
}

/// Where each of the model's device kernels came from, or null.
inline const char *const *deviceKernelOrigins(const tfm_abi_model_t *m) {
  return m->struct_size >= offsetof(tfm_abi_model_t, device_kernel_origins) +
                               sizeof(m->device_kernel_origins)
             ? m->device_kernel_origins
             : nullptr;
}

/// The model's kernel flags, or null (an older model, or none flagged).
inline const uint32_t *kernelFlagTable(const tfm_abi_model_t *m) {
  return m->struct_size >= offsetof(tfm_abi_model_t, kernel_flags) +
                               sizeof(m->kernel_flags)
             ? m->kernel_flags
             : nullptr;
}

/// How the model's code reports its checks (a tfm_check_mode_t):
/// TFM_CHECKS_MID_RUN in a description from before the append.
inline int32_t checkMode(const tfm_abi_model_t *m) {
  return m->struct_size >= offsetof(tfm_abi_model_t, check_slots_offset) +
                               sizeof(m->check_slots_offset)
             ? m->check_mode
             : TFM_CHECKS_MID_RUN;
}

/// The CPU the model's code was generated for and the features it may use
/// (comma-separated), or null in a description from before the append.
inline const char *modelCpu(const tfm_abi_model_t *m) {
  return m->struct_size >= offsetof(tfm_abi_model_t, cpu_features) +
                               sizeof(m->cpu_features)
             ? m->cpu
             : nullptr;
}
inline const char *modelCpuFeatures(const tfm_abi_model_t *m) {
  return modelCpu(m) ? m->cpu_features : nullptr;
}

/// What each entry input takes, three values an input (entries in order),
/// or null: none said, or a description from before the append.
inline const int64_t *inputValueTable(const tfm_abi_model_t *m) {
  return m->struct_size >= offsetof(tfm_abi_model_t, input_values) +
                               sizeof(m->input_values)
             ? m->input_values
             : nullptr;
}

/// Kernel `index`'s tfm_kernel_flag_t bits.
inline uint32_t kernelFlags(const tfm_abi_model_t *m, int32_t index) {
  const uint32_t *flags = kernelFlagTable(m);
  return flags ? flags[index] : 0;
}

/// Whether TFM_POISON_MEMORY=1 asks the CPU's memory to start as NaNs
/// (every byte 0xff: -1 in integers): the tests set it, so that code
/// reading memory it never wrote (a fill dropped, a reduction started from
/// a buffer's stale contents) shows in the outputs instead of reading the
/// zeros of fresh pages. It covers the CPU device's buffers (the arena, the
/// state before its initial values) and the outputs a run allocates.
bool poisonMemory();

/// A new tensor of `dtype` and `dims` in `device`'s memory (the host's for
/// the CPU), which keeps the device alive; *out_tensor is the caller's.
tfm_status_t createOnDevice(const std::shared_ptr<Device> &device,
                            tfm_dtype_t dtype, const int64_t *dims, size_t rank,
                            tfm_tensor_t **out_tensor);

/// Checks the model's metadata whole against the library's mapped image
/// (every pointer inside it, every string terminated there, every entry
/// point in code) and against itself (counts, shapes, offsets, kernel
/// descriptors); a failure is DATA_LOSS naming the first problem.
tfm_status_t validateModel(const std::string &path, const void *handle,
                           const tfm_abi_model_t *model);

/// Whether [p, p + bytes) lies in the loaded image of the library `handle`
/// (from dlopen).
bool pointsIntoLibrary(const void *handle, const void *p, uint64_t bytes);

/// The bytes kernel `d`, with `flags` (its tfm_kernel_flag_t bits), touches
/// from each of its pointer arguments (0 for an argument it does not read).
/// False, with `why`, for a descriptor that is not one the compiler writes
/// (an unknown kind, a non-positive size, an overflowing product).
bool kernelFootprint(const tfm_abi_kernel_desc_t &d, uint32_t flags,
                     uint64_t bytes[TFM_KERNEL_MAX_ARGS], std::string &why);

} // namespace tfm::runtime

struct tfm_tensor_s {
  tfm_dtype_t dtype;
  std::vector<int64_t> dims;
  /// The memory, wherever it lives: owned here for a host tensor, borrowed
  /// for a view, and for a tensor on a device owned by `deviceMemory`.
  tfm::runtime::AlignedBuffer buffer;
  /// Where the memory lives: "cpu" (the host), or a GPU ("cuda:0").
  std::string device = "cpu";
  /// A tensor a session made on its device keeps the device alive, which
  /// frees the memory (declared first, so it outlives the memory).
  std::shared_ptr<tfm::runtime::Device> owner;
  tfm::runtime::DeviceBuffer deviceMemory;

  bool onHost() const { return device == "cpu"; }
};

struct tfm_cancel_flag_s {
  std::atomic<bool> raised{false};
};

struct tfm_context_s : tfm::runtime::RefCounted {
  int32_t numThreads = 1;
  /// The device every session uses; empty: each model's own target.
  std::string device;
  /// Modules are read, not run: see tfm_context_options_t.inspect_only.
  bool inspectOnly = false;
};

struct tfm_module_s : tfm::runtime::RefCounted {
  ~tfm_module_s() override;
  tfm_context_s *context = nullptr;
  void *handle = nullptr; // from dlopen
  const tfm_abi_model_t *model = nullptr;
  std::string path;
  /// Why this CPU cannot run the module's code; set only when an
  /// inspect_only context loaded it anyway, for tfm_session_create to say.
  std::string cpuRefusal;
  std::vector<char> externalWeights;
  const void *weights = nullptr;
  /// The largest buffer a kernel may touch: no valid descriptor exceeds it.
  uint64_t largestBuffer = 0;

  const tfm_abi_entry_t *findEntry(const char *name) const;

  /// An entry as the C API lists it: a static entry that is no bucket, or
  /// a dynamic one, whose dims are -1 where they follow a symbol.
  struct PublicEntry {
    const char *name;
    const tfm_abi_entry_t *fixed = nullptr;
    const tfm_abi_dynamic_entry_t *dynamic = nullptr;
    std::vector<std::vector<int64_t>> inputDims, outputDims;
  };
  std::vector<PublicEntry> publicEntries;
  const PublicEntry *findPublic(const char *name) const;
  /// The names of the public entries, for messages: "infer, prefill".
  std::string entryNames() const;
};

namespace tfm::runtime {
struct Profile;
class Exchange;
class Shards;
} // namespace tfm::runtime

struct tfm_session_s {
  tfm_module_s *module = nullptr;
  /// Where the session's memory lives and its kernels run; tensors the
  /// session makes on it share it.
  std::shared_ptr<tfm::runtime::Device> device;
  /// Scratch memory of the largest entry, and the training state
  /// (parameters, optimizer moments, the step count), in device memory.
  tfm::runtime::DeviceBuffer arena, state;
  /// On a device compiled code cannot read host memory from: the weights
  /// in device memory, and each entry's staging (allocated at its first
  /// run): a device buffer per input and output, and one page-locked host
  /// buffer that host tensors pass through.
  tfm::runtime::DeviceBuffer weights;
  struct EntryStaging {
    std::vector<tfm::runtime::DeviceBuffer> device;
    tfm::runtime::StagingBuffer host;
    std::vector<size_t> hostOffsets;
  };
  std::vector<EntryStaging> staging;
  /// Set when the last run returned before the device finished it (it was
  /// ordered on a caller's stream): its copies may still read the host
  /// staging, which the next run must wait for before writing it.
  bool devicePending = false;
  /// The host's copy of the checks' slots in the state
  /// (TFM_CHECKS_IN_STATE): written before a run, read back after it.
  std::vector<int64_t> checkOutcome;
  /// On a GPU, each entry's runs recorded once as a graph and replayed,
  /// unless `whyNoGraphs` says why not: its first run goes eagerly, its
  /// second is recorded.
  struct EntryGraph {
    bool warmedUp = false;
    void *graph = nullptr;
  };
  std::vector<EntryGraph> graphs;
  std::string whyNoGraphs;
  std::string deviceName;
  // tfm_session_describe's text.
  std::string description;
  /// The bytes each kernel touches from each argument (kernelFootprint).
  std::vector<std::array<uint64_t, TFM_KERNEL_MAX_ARGS>> footprints;
  std::unique_ptr<tfm::runtime::Profile> profile;
  /// The other ranks of a data-parallel run (tfm_session_set_communicator);
  /// null in one process.
  std::unique_ptr<tfm::runtime::Exchange> exchange;
  /// Adam's moments of a model compiled with --shard-optimizer, which the
  /// runtime keeps (this rank's part of them); null otherwise.
  std::unique_ptr<tfm::runtime::Shards> shards;
  /// Set while a call uses the session: a second thread's call fails.
  std::atomic<bool> busy{false};
  // Why the run failed (a kernel's exception, a failed check), for its
  // status.
  std::string failure;
  // The entry being run and the buffers of its run, for messages about its
  // inputs and for checking kernel arguments.
  const tfm_abi_entry_t *running = nullptr;
  std::vector<std::pair<const char *, uint64_t>> regions;
  /// What may interrupt the run in progress (checked before each kernel):
  /// a cancel flag, a deadline. `interruptible` turns false once a kernel
  /// that updates the training state has begun.
  const tfm_cancel_flag_s *cancel = nullptr;
  bool hasDeadline = false, interruptible = true;
  std::chrono::steady_clock::time_point deadline;
  ~tfm_session_s();

  /// The state slot of `kind` named `name`, or null.
  const tfm_abi_state_desc_t *findState(const char *name, int32_t kind) const;
};

namespace tfm::runtime {
/// Marks `session` busy for the lifetime of the guard; `acquired()` is false
/// when another thread holds it.
class SessionUse {
public:
  explicit SessionUse(tfm_session_s *s)
      : s(s), held(!s->busy.exchange(true, std::memory_order_acquire)) {}
  ~SessionUse() {
    if (held)
      s->busy.store(false, std::memory_order_release);
  }
  bool acquired() const { return held; }

private:
  tfm_session_s *s;
  bool held;
};

/// The status of a call on a session another thread is using.
tfm_status_t sessionInUse(const char *call);
/// Runs entry `e` of the session's model on inputs already checked against
/// it; the caller holds the session (SessionUse). On success out_outputs
/// (e->num_outputs of them) receives new tensors the caller owns, except
/// where `given` (null, or e->num_outputs entries) holds a tensor, already
/// checked against the output, which the run writes into instead.
/// A run's say over where its tensors go (tfm_run_options_t).
struct RunPlacement {
  /// New outputs live on the session's device, not the host.
  bool outputsOnDevice = false;
  /// The caller's stream to order the run with, when `useStream`.
  bool useStream = false;
  void *stream = nullptr;
};
tfm_status_t runEntry(tfm_session_t *session, const tfm_abi_entry_t *e,
                      tfm_tensor_t *const *inputs, size_t num_inputs,
                      tfm_tensor_t **out_outputs,
                      tfm_tensor_t *const *given = nullptr,
                      const RunPlacement &placement = {});
/// Runs dynamic entry `d` (Dynamic.cpp): checks the inputs' sizes against
/// its ranges, pads them to the bucket that serves them, and cuts the
/// outputs back. The caller holds the session.
tfm_status_t runDynamic(tfm_session_t *session,
                        const tfm_abi_dynamic_entry_t &d,
                        tfm_tensor_t *const *inputs, size_t num_inputs,
                        tfm_tensor_t **out_outputs);
} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_INTERNAL_H
