//===- Device.cpp - Devices by name and their memory ----------------------===//

#include "Device.h"
#include "Internal.h"

#include <fmt/format.h>

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

std::string tfm::runtime::checkTensorMap(const tfm_abi_tensor_map_desc_t &d,
                                         const void *base) {
  if (d.dtype != TFM_DTYPE_F32 && d.dtype != TFM_DTYPE_F16 &&
      d.dtype != TFM_DTYPE_BF16)
    return fmt::format("its elements are {}, not f32, f16 or bf16",
                       dtypeName(static_cast<int32_t>(d.dtype)));
  if (d.rank < 1 || d.rank > TFM_TENSOR_MAP_MAX_RANK)
    return fmt::format("its rank is {}, not 1 to {}", d.rank,
                       TFM_TENSOR_MAP_MAX_RANK);
  if (d.swizzle != 0 && d.swizzle != 32 && d.swizzle != 64 && d.swizzle != 128)
    return fmt::format("its swizzle spans {} bytes, not 0, 32, 64 or 128",
                       d.swizzle);
  // The address and the strides in 16-byte units, the dims and the
  // strides in the driver's ranges.
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return "its base address is not 16-byte aligned";
  int64_t element =
      static_cast<int64_t>(tfm_dtype_size(static_cast<tfm_dtype_t>(d.dtype)));
  for (int64_t i = 0; i < d.rank; ++i) {
    if (d.dims[i] < 1 || d.dims[i] > (int64_t(1) << 32))
      return fmt::format("its dim {} is {}, not 1 to 2^32", i, d.dims[i]);
    if (d.box[i] < 1 || d.box[i] > 256)
      return fmt::format("its box's dim {} is {}, not 1 to 256", i, d.box[i]);
    if (i > 0 && (d.strides[i - 1] <= 0 || d.strides[i - 1] % 16 != 0 ||
                  d.strides[i - 1] >= (int64_t(1) << 40)))
      return fmt::format("its stride along dim {} is {} bytes, not a "
                         "positive multiple of 16 below 2^40",
                         i, d.strides[i - 1]);
  }
  if (d.box[0] * element % 16 != 0)
    return fmt::format("its box's rows are {} bytes, not a multiple of 16",
                       d.box[0] * element);
  if (d.swizzle != 0 && d.box[0] * element > d.swizzle)
    return fmt::format("its box's rows are {} bytes, wider than its "
                       "swizzle's span of {}",
                       d.box[0] * element, d.swizzle);
  return "";
}

void *Device::tensorMap(const tfm_abi_tensor_map_desc_t &desc, const void *base,
                        std::string &error) {
  TensorMapKey key;
  std::memcpy(key.data(), &desc, sizeof desc);
  key.back() = static_cast<int64_t>(reinterpret_cast<uintptr_t>(base));
  if (auto it = tensorMaps.find(key); it != tensorMaps.end())
    return it->second;
  error = checkTensorMap(desc, base);
  if (!error.empty())
    return nullptr;
  void *map = encodeTensorMap(desc, base, error);
  if (map)
    tensorMaps.emplace(key, map);
  return map;
}

void *Device::encodeTensorMap(const tfm_abi_tensor_map_desc_t &desc,
                              const void *base, std::string &error) {
  auto words = std::make_unique<int64_t[]>(TFM_EMULATED_TENSOR_MAP_WORDS);
  words[TFM_EMULATED_TENSOR_MAP_BASE] =
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(base));
  for (int64_t i = 0; i < TFM_TENSOR_MAP_MAX_RANK; ++i)
    words[TFM_EMULATED_TENSOR_MAP_DIMS + i] = i < desc.rank ? desc.dims[i] : 1;
  for (int64_t i = 0; i + 1 < TFM_TENSOR_MAP_MAX_RANK; ++i)
    words[TFM_EMULATED_TENSOR_MAP_STRIDES + i] =
        i + 1 < desc.rank ? desc.strides[i] : 0;
  emulatedTensorMaps.push_back(std::move(words));
  return emulatedTensorMaps.back().get();
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
