//===- Device.cpp - Devices by name and their memory ----------------------===//

#include "Device.h"

#include <utility>

using namespace tfm::runtime;

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

Device::~Device() = default;

DeviceBuffer Device::allocate(size_t bytes) {
  void *p = allocateRaw(bytes);
  return p ? DeviceBuffer(this, p, bytes) : DeviceBuffer();
}

std::unique_ptr<Device> tfm::runtime::makeDevice(const std::string &name,
                                                 std::string &error) {
  if (name.empty() || name == "cpu")
    return cpu::makeCPUDevice();
  if (name.rfind("cuda", 0) == 0)
    error = "device '" + name +
            "': this runtime has no CUDA device yet; use 'cpu'";
  else
    error = "unknown device '" + name + "'; use 'cpu'";
  return nullptr;
}
