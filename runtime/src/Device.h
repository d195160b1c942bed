//===- Device.h - Where a session's memory lives and kernels run -*- C++ -*-===//
//
// A session computes on one device. The device owns the memory the compiled
// code reads (the arena, the state) and the kernels the model's descriptors
// ask for, which it prepares once per session. The CPU device (cpu/) keeps
// memory on the host and runs oneDNN primitives; a GPU device beside it
// keeps device memory and runs kernels the compiler embedded as PTX.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_DEVICE_H
#define TFM_RUNTIME_SRC_DEVICE_H

#include "tfm/abi.h"

#include <array>
#include <cstddef>
#include <memory>
#include <string>

namespace tfm::runtime {

class Device;

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

class Device {
public:
  virtual ~Device();
  /// "cpu", or "cuda:0" for a GPU.
  virtual std::string name() const = 0;

  /// `bytes` of device memory aligned to TFM_BUFFER_ALIGNMENT; an empty
  /// buffer (null) when there is not enough.
  DeviceBuffer allocate(size_t bytes);
  /// Copies between host memory and device memory.
  virtual void copyToDevice(void *device, const void *host, size_t bytes) = 0;
  virtual void copyToHost(void *host, const void *device, size_t bytes) = 0;

  /// Prepares the kernel of each of `count` descriptors, once; on failure
  /// returns false and names the kernel and the reason in `error`.
  virtual bool prepareKernels(const tfm_abi_kernel_desc_t *kernels,
                              int32_t count, std::string &error) = 0;
  /// Runs prepared kernel `index` on `args` (device pointers); returns 0, or
  /// non-zero with the reason in `error`.
  virtual int32_t runKernel(int32_t index, void *const *args,
                            std::string &error) = 0;
  /// The threads kernels may use (0: the device's choice).
  virtual void setThreads(int32_t threads) {}

protected:
  virtual void *allocateRaw(size_t bytes) = 0;
  virtual void deallocateRaw(void *ptr) = 0;
  friend class DeviceBuffer;
};

/// The device named `name` ("cpu"); null, with the reason in `error`, for
/// one this build does not have.
std::unique_ptr<Device> makeDevice(const std::string &name,
                                   std::string &error);

namespace cpu {
/// The CPU device: host memory, oneDNN kernels.
std::unique_ptr<Device> makeCPUDevice();
} // namespace cpu

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_DEVICE_H
