//===- Device.cpp - Devices by name and their memory ----------------------===//

#include "Device.h"
#include "Internal.h"

#include <cstdlib>
#include <cstring>
#include <utility>

using namespace tfm::runtime;

bool tfm::runtime::poisonMemory() {
  static const bool poison = [] {
    const char *v = std::getenv("TFM_POISON_MEMORY");
    return v && std::strcmp(v, "1") == 0;
  }();
  return poison;
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
  std::swap(device, o.device);
  std::swap(ptr, o.ptr);
  std::swap(size, o.size);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (device && ptr)
    device->deallocateRaw(ptr);
}

StagingBuffer &StagingBuffer::operator=(StagingBuffer &&o) noexcept {
  std::swap(device, o.device);
  std::swap(ptr, o.ptr);
  return *this;
}

StagingBuffer::~StagingBuffer() {
  if (device && ptr)
    device->freeStaging(ptr);
}

Device::~Device() = default;

bool Device::declineIfFallback(const tfm_abi_model_t &model, int32_t index,
                               const std::string &why) {
  if (!(kernelFlags(&model, index) & TFM_KERNEL_FLAG_FALLBACK))
    return false;
  declineReasons[index] = why;
  return true;
}

DeviceBuffer Device::allocate(size_t bytes) {
  void *p = allocateRaw(bytes);
  return p ? DeviceBuffer(this, p, bytes) : DeviceBuffer();
}

bool tfm::runtime::parseDeviceName(const std::string &name, int32_t &target,
                                   int &ordinal) {
  ordinal = 0;
  if (name == "cpu") {
    target = TFM_TARGET_CPU;
    return true;
  }
  if (name.rfind("cuda", 0) != 0)
    return false;
  target = TFM_TARGET_CUDA;
  if (name.size() == 4)
    return true;
  if (name[4] != ':' || name.size() == 5 || name.size() > 9)
    return false;
  for (char c : name.substr(5))
    if (c < '0' || c > '9')
      return false;
  ordinal = std::stoi(name.substr(5));
  return true;
}

std::unique_ptr<Device> tfm::runtime::makeDevice(const std::string &name) {
  int32_t target;
  int ordinal;
  if (!parseDeviceName(name, target, ordinal))
    throw DeviceError(TFM_STATUS_INVALID_ARGUMENT,
                      "unknown device '" + name +
                          "'; devices are 'cpu', 'cuda' and 'cuda:N'");
  if (target == TFM_TARGET_CPU)
    return cpu::makeCPUDevice();
  return cuda::makeCUDADevice(ordinal);
}
