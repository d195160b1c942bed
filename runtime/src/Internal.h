//===- Internal.h - Shared internals of the runtime -------------*- C++ -*-===//
//
// The runtime links no LLVM or MLIR: only the C++ standard library, fmt and
// (for kernels) oneDNN. Exceptions stay inside; every C entry point catches.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_INTERNAL_H
#define TFM_RUNTIME_SRC_INTERNAL_H

#include "tfm/runtime.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
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

/// Storage aligned as the ABI promises compiled code (oneDNN prefers it too).
struct AlignedBuffer {
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> ptr;
  size_t size = 0;
  /// Returns false when the allocation fails.
  bool allocate(size_t bytes) {
    constexpr size_t align = TFM_BUFFER_ALIGNMENT;
    size_t rounded = (bytes + align - 1) / align * align;
    void *p = std::aligned_alloc(align, rounded ? rounded : align);
    if (!p)
      return false;
    ptr.reset(p);
    size = bytes;
    return true;
  }
};

/// Runs `f`, turning any escaping exception into an internal status.
template <typename F> tfm_status_t guarded(const char *what, F &&f) {
  try {
    return f();
  } catch (const std::bad_alloc &) {
    return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED, "{}: out of memory",
                      what);
  } catch (const std::exception &e) {
    return makeStatus(TFM_STATUS_INTERNAL, "{}: {}", what, e.what());
  } catch (...) {
    return makeStatus(TFM_STATUS_INTERNAL, "{}: unknown error", what);
  }
}

const char *dtypeName(int32_t dtype);

/// The bytes of a dense tensor of descriptor `d`.
uint64_t tensorBytes(const tfm_abi_tensor_desc_t &d);

namespace cpu {
struct Device;
class Kernel;
} // namespace cpu
struct Profile;

} // namespace tfm::runtime

struct tfm_tensor_s {
  tfm_dtype_t dtype;
  std::vector<int64_t> dims;
  tfm::runtime::AlignedBuffer buffer;
};

struct tfm_context_s : tfm::runtime::RefCounted {
  int32_t numThreads = 1;
};

struct tfm_module_s : tfm::runtime::RefCounted {
  ~tfm_module_s() override;
  tfm_context_s *context = nullptr;
  void *handle = nullptr; // from dlopen
  const tfm_abi_model_t *model = nullptr;
  std::string path;
  std::vector<char> externalWeights;
  const void *weights = nullptr;

  const tfm_abi_entry_t *findEntry(const char *name) const;
};

struct tfm_session_s {
  tfm_module_s *module = nullptr;
  tfm::runtime::AlignedBuffer arena;
  /// Parameters, optimizer moments and the step count (tfm_abi_state_desc_t).
  tfm::runtime::AlignedBuffer state;
  std::shared_ptr<tfm::runtime::cpu::Device> device;
  std::vector<std::unique_ptr<tfm::runtime::cpu::Kernel>> kernels;
  std::unique_ptr<tfm::runtime::Profile> profile;
  // Why the run failed (a kernel's exception, a failed check), for its
  // status.
  std::string failure;
  // The entry being run, for messages about its inputs.
  const tfm_abi_entry_t *running = nullptr;
  ~tfm_session_s();

  /// The state slot of `kind` named `name`, or null.
  const tfm_abi_state_desc_t *findState(const char *name, int32_t kind) const;
};

#endif // TFM_RUNTIME_SRC_INTERNAL_H
