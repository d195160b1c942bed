//===- Device.h - Where a session's memory lives and kernels run -*- C++ -*-===//
//
// A session computes on one device. The device owns the memory the compiled
// code reads (the arena, the state) and the kernels the model's descriptors
// ask for, which it prepares once per session. The CPU device (cpu/) keeps
// memory on the host and runs oneDNN primitives; the CUDA device (cuda/)
// keeps device memory and launches the kernels the compiler embedded as
// PTX.
//
// Calls the runtime makes outside compiled code report failure by throwing
// DeviceError, which the C API turns into a status of its code. Calls made
// from compiled code (runKernel, launch) return a code instead: nothing may
// unwind through generated frames.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_DEVICE_H
#define TFM_RUNTIME_SRC_DEVICE_H

#include "tfm/abi.h"
#include "tfm/runtime.h"

#include <array>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tfm::runtime {

class Device;

/// A device's failure outside compiled code, with the status it becomes.
class DeviceError : public std::runtime_error {
public:
  DeviceError(tfm_status_code_t code, const std::string &message)
      : std::runtime_error(message), code(code) {}
  tfm_status_code_t code;
};

/// Device memory that frees itself.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(Device *device, void *ptr, size_t size)
      : device(device), ptr(ptr), size(size) {}
  DeviceBuffer(DeviceBuffer &&o) noexcept { *this = std::move(o); }
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  void *get() const { return ptr; }
  size_t bytes() const { return size; }

private:
  Device *device = nullptr;
  void *ptr = nullptr;
  size_t size = 0;
};

/// Staging memory (Device::allocateStaging) that frees itself.
class StagingBuffer {
public:
  StagingBuffer() = default;
  StagingBuffer(Device *device, void *ptr) : device(device), ptr(ptr) {}
  StagingBuffer(StagingBuffer &&o) noexcept { *this = std::move(o); }
  StagingBuffer &operator=(StagingBuffer &&o) noexcept;
  StagingBuffer(const StagingBuffer &) = delete;
  StagingBuffer &operator=(const StagingBuffer &) = delete;
  ~StagingBuffer();

  char *get() const { return static_cast<char *>(ptr); }

private:
  Device *device = nullptr;
  void *ptr = nullptr;
};

class Device {
public:
  virtual ~Device();
  /// "cpu", or "cuda:0" for a GPU.
  virtual std::string name() const = 0;
  /// The code target the device runs (TFM_TARGET_CPU, TFM_TARGET_CUDA).
  virtual int32_t target() const = 0;
  /// Whether compiled code reads host memory directly, so the weights and
  /// the tensors of a run need no copies.
  virtual bool hostAddressable() const { return false; }

  /// `bytes` of device memory aligned to TFM_BUFFER_ALIGNMENT; an empty
  /// buffer (null) when there is not enough.
  DeviceBuffer allocate(size_t bytes);
  /// Copies between host memory and device memory, in order with the work
  /// before them; copyToHost returns once the bytes are on the host.
  virtual void copyToDevice(void *device, const void *host, size_t bytes) = 0;
  virtual void copyToHost(void *host, const void *device, size_t bytes) = 0;
  /// Copies between two buffers of device memory, in order with the work
  /// before it; returns before the copy is done.
  virtual void copyOnDevice(void *dst, const void *src, size_t bytes) {
    std::memmove(dst, src, bytes);
  }
  /// Host memory the device copies to and from at full speed (page-locked
  /// on a GPU), for staging a run's host tensors; null when there is not
  /// enough. freeStaging gives it back.
  virtual void *allocateStaging(size_t bytes) { return std::malloc(bytes); }
  virtual void freeStaging(void *p) { std::free(p); }

  /// Why [p, p + bytes) is not memory of this device that its code may use,
  /// or "" when it is: checks a caller's device tensor.
  virtual std::string checkMemory(const void *p, size_t bytes) const {
    return "";
  }
  /// A caller's stream (a CUstream on a GPU): waitForStream orders the
  /// device's next work after the work queued on `stream` so far, and
  /// signalStream the work queued on `stream` from now on after the
  /// device's work so far.
  virtual void waitForStream(void *stream) {}
  virtual void signalStream(void *stream) {}

  /// How a session wants its kernels made.
  struct KernelOptions {
    /// f32 GEMMs may multiply in TF32 (tfm_session_options_t.allow_tf32).
    bool allowTF32 = false;
  };
  /// Prepares what the model's code calls, once per session: its kernel
  /// descriptors (CPU), its device code (GPU).
  virtual void prepare(const tfm_abi_model_t &model,
                       const KernelOptions &options) = 0;
  /// Whether prepare() declined kernel `index`, which the model's code then
  /// computes itself (TFM_KERNEL_FLAG_FALLBACK), and why.
  bool declined(int32_t index) const {
    return index < static_cast<int32_t>(declineReasons.size()) &&
           !declineReasons[index].empty();
  }
  const std::string &declineReason(int32_t index) const {
    return declineReasons[index];
  }
  /// The library that runs the kernels prepare() took ("oneDNN 3.0.0",
  /// "cuBLASLt 13.0.2, TF32 allowed"), for the session's description.
  virtual std::string kernelLibrary() const { return ""; }
  /// What the device's compiler warned of when prepare loaded the model's
  /// code (the CUDA driver's JIT log, when it holds a warning); empty
  /// otherwise.
  virtual std::string loadWarnings() const { return ""; }

  /// Runs prepared kernel `index` on `args` (device pointers); returns 0, or
  /// non-zero with the reason in `error`. The session calls no kernel that
  /// prepare() declined.
  virtual int32_t runKernel(int32_t index, void *const *args,
                            std::string &error) {
    error = "device " + name() + " runs no kernel descriptors";
    return -1;
  }
  /// Launches kernel `kernel` of the device code (tfm_abi_launch_fn_t);
  /// returns 0, or non-zero with the reason in `error`.
  virtual int32_t launch(int32_t kernel, const int64_t grid[3],
                         const int64_t block[3], int64_t sharedBytes,
                         void **args, std::string &error) {
    error = "device " + name() + " has no device code";
    return -1;
  }
  /// Runs task(args, begin, end) over [0, n) in parts on the threads
  /// setThreads gave, for code that runs on the host.
  virtual void parallelFor(tfm_abi_task_fn_t task, void *const *args,
                           int64_t n) {
    task(args, 0, n);
  }
  /// Waits until the work handed to the device so far is done.
  virtual void synchronize() {}
  /// The queue the device's work goes to, in order (a CUstream on a GPU):
  /// a communicator's calls on device memory are ordered with it. Null
  /// where work runs as it is called (the CPU).
  virtual void *workStream() { return nullptr; }
  /// A second stream of the device's (null where it has no streams), for
  /// work that runs beside the work stream's: a data-parallel step's sums,
  /// during the rest of the backward pass. waitForStream and signalStream
  /// order it with the work stream.
  virtual void *sideStream() { return nullptr; }

  /// Graphs: the work compiled code hands the device between beginCapture
  /// and endCapture is recorded instead of run, and replay runs it again,
  /// the same launches on the same addresses. Why a device cannot (empty
  /// when it can).
  virtual std::string whyNoGraphs() const { return "the device has none"; }
  virtual void beginCapture() {}
  /// The recorded work, or null when `keep` is false (the code failed
  /// while it was recorded, which discards it).
  virtual void *endCapture(bool keep) { return nullptr; }
  /// Runs a recorded graph, in order with the work before it.
  virtual void replay(void *graph) {}
  virtual void releaseGraph(void *graph) {}
  /// Sets the threads kernels may use on the calling thread (0: the
  /// device's choice); returns the count to put back, or 0 for none.
  virtual int32_t setThreads(int32_t threads) { return 0; }

  /// A tensor map of the tensor `desc` describes at `base`, which the
  /// device's TMA loads read (tfm_abi_tensor_map_fn_t): made on the first
  /// call for each (base, desc), the same address after. Null, with the
  /// reason in `error`, for a description the runtime or the driver
  /// refuses.
  void *tensorMap(const tfm_abi_tensor_map_desc_t &desc, const void *base,
                  std::string &error);

protected:
  /// Makes a tensor map of a checked description. The CPU's, which the
  /// emulation of a GPU model's kernels reads, is its
  /// TFM_EMULATED_TENSOR_MAP_WORDS words in host memory.
  virtual void *encodeTensorMap(const tfm_abi_tensor_map_desc_t &desc,
                                const void *base, std::string &error);

  /// Declines kernel `index` of `model` for `why` when it has a fallback
  /// (TFM_KERNEL_FLAG_FALLBACK); returns whether it did.
  bool declineIfFallback(const tfm_abi_model_t &model, int32_t index,
                         const std::string &why);
  /// Forgets the last model's declined kernels.
  void resetDeclined(int32_t numKernels) {
    declineReasons.assign(static_cast<size_t>(numKernels), std::string());
  }

  virtual void *allocateRaw(size_t bytes) = 0;
  virtual void deallocateRaw(void *ptr) = 0;
  friend class DeviceBuffer;

private:
  std::vector<std::string> declineReasons;
  /// The maps made, by description (its words) and base, and the CPU's
  /// words.
  using TensorMapKey =
      std::array<int64_t,
                 sizeof(tfm_abi_tensor_map_desc_t) / sizeof(int64_t) + 1>;
  std::map<TensorMapKey, void *> tensorMaps;
  std::vector<std::unique_ptr<int64_t[]>> emulatedTensorMaps;
};

/// Why the runtime refuses a tensor map of the tensor `desc` describes at
/// `base`, or "" when it takes it: TMA's limits as the driver documents
/// them for cuTensorMapEncodeTiled.
std::string checkTensorMap(const tfm_abi_tensor_map_desc_t &desc,
                           const void *base);

/// Whether TFM_CUBLASLT=off asks the kernels that have a fallback to run
/// the model's own code: on a GPU, and in the CPU emulation of a GPU
/// model's schedule, where oneDNN stands in for cuBLASLt. Inline: the CUDA
/// device's library, which the tests link alone, reads it too.
inline bool libraryKernelsOff() {
  const char *v = std::getenv("TFM_CUBLASLT");
  return v && std::strcmp(v, "off") == 0;
}

/// The context's threads for the kernels created or run in a scope; the
/// calling thread's own count comes back after, so an embedder's OpenMP code
/// keeps its setting. Kernels are created with it too: a oneDNN primitive
/// made for more threads runs on as many, whatever the count at its run.
class ThreadsScope {
public:
  ThreadsScope(Device &device, int32_t threads)
      : device(device), before(device.setThreads(threads)) {}
  ~ThreadsScope() {
    if (before > 0)
      device.setThreads(before);
  }
  ThreadsScope(const ThreadsScope &) = delete;
  ThreadsScope &operator=(const ThreadsScope &) = delete;

private:
  Device &device;
  int32_t before;
};

/// The device named `name`: "cpu", "cuda" (the first GPU) or "cuda:N".
/// Throws DeviceError when this machine has no such device.
std::unique_ptr<Device> makeDevice(const std::string &name);

/// Whether `name` spells a device ("cpu", "cuda", "cuda:N"); the target it
/// runs in `target`.
bool parseDeviceName(const std::string &name, int32_t &target,
                     int &ordinal);

namespace cpu {
/// The CPU device: host memory, oneDNN kernels.
std::unique_ptr<Device> makeCPUDevice();
} // namespace cpu

namespace cuda {
/// GPU `ordinal` through the CUDA driver; throws DeviceError when there is
/// no driver or no such GPU.
std::unique_ptr<Device> makeCUDADevice(int ordinal);
} // namespace cuda

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_DEVICE_H
