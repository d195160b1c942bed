//===- Tensor.cpp - Tensors of the runtime, on the host or a device -------===//

#include "Internal.h"

#include <cstdint>
#include <cstring>
#include <limits>

using namespace tfm::runtime;

namespace {

/// Checks a tensor's dtype and dims for `call`; sets the element width and
/// count.
tfm_status_t checkShape(const char *call, tfm_dtype_t dtype,
                        const int64_t *dims, size_t rank, size_t &width,
                        size_t &count) {
  width = tfm_dtype_size(dtype);
  if (!width)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT, "{}: unknown dtype {}",
                      call, static_cast<int>(dtype));
  if (rank && !dims)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "{}: dims is NULL for rank {}", call, rank);
  count = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] < 0)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "{}: dimension {} is negative ({})", call, i, dims[i]);
    if (dims[i] &&
        count > std::numeric_limits<size_t>::max() / width /
                    static_cast<size_t>(dims[i]))
      return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED,
                        "{}: the shape overflows memory", call);
    count *= static_cast<size_t>(dims[i]);
  }
  return nullptr;
}

} // namespace

tfm_status_t tfm::runtime::createOnDevice(const std::shared_ptr<Device> &device,
                                          tfm_dtype_t dtype,
                                          const int64_t *dims, size_t rank,
                                          tfm_tensor_t **out_tensor) {
  *out_tensor = nullptr;
  if (device->hostAddressable())
    return tfm_tensor_create(dtype, dims, rank, out_tensor);
  size_t width = 0, count = 0;
  if (tfm_status_t s =
          checkShape("tfm_session_run", dtype, dims, rank, width, count))
    return s;
  auto t = std::make_unique<tfm_tensor_s>();
  t->dtype = dtype;
  t->dims.assign(dims, dims + rank);
  t->device = device->name();
  t->owner = device;
  t->deviceMemory = device->allocate(count * width);
  if (!t->deviceMemory.get())
    return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED,
                      "{} cannot allocate {} bytes for an output", t->device,
                      count * width);
  t->buffer.ptr = std::unique_ptr<void, AlignedBuffer::Free>(
      t->deviceMemory.get(), AlignedBuffer::Free{false});
  t->buffer.size = count * width;
  *out_tensor = t.release();
  return nullptr;
}

extern "C" {

size_t tfm_dtype_size(tfm_dtype_t dtype) {
  switch (dtype) {
  case TFM_DTYPE_F32:
  case TFM_DTYPE_I32:
  case TFM_DTYPE_U32:
    return 4;
  case TFM_DTYPE_F16:
  case TFM_DTYPE_BF16:
  case TFM_DTYPE_I16:
  case TFM_DTYPE_U16:
    return 2;
  case TFM_DTYPE_F64:
  case TFM_DTYPE_I64:
  case TFM_DTYPE_U64:
    return 8;
  case TFM_DTYPE_BOOL:
  case TFM_DTYPE_I8:
  case TFM_DTYPE_U8:
    return 1;
  }
  return 0;
}

tfm_status_t tfm_tensor_create(tfm_dtype_t dtype, const int64_t *dims,
                               size_t rank, tfm_tensor_t **out_tensor) {
  if (!out_tensor)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_tensor_create: out_tensor is NULL");
  *out_tensor = nullptr;
  size_t width = 0, count = 0;
  if (tfm_status_t s =
          checkShape("tfm_tensor_create", dtype, dims, rank, width, count))
    return s;
  return guarded("tfm_tensor_create", [&]() -> tfm_status_t {
    auto t = std::make_unique<tfm_tensor_s>();
    t->dtype = dtype;
    t->dims.assign(dims, dims + rank);
    if (!t->buffer.allocate(count * width))
      return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED,
                        "tfm_tensor_create: cannot allocate {} bytes",
                        count * width);
    std::memset(t->buffer.ptr.get(), 0, count * width);
    *out_tensor = t.release();
    return nullptr;
  });
}

tfm_status_t tfm_tensor_create_copy(tfm_dtype_t dtype, const int64_t *dims,
                                    size_t rank, const void *data,
                                    size_t byte_size,
                                    tfm_tensor_t **out_tensor) {
  tfm_status_t s = tfm_tensor_create(dtype, dims, rank, out_tensor);
  if (s)
    return s;
  if ((*out_tensor)->buffer.size != byte_size || (byte_size && !data)) {
    size_t want = (*out_tensor)->buffer.size;
    tfm_tensor_release(*out_tensor);
    *out_tensor = nullptr;
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_tensor_create_copy: the shape needs {} bytes but "
                      "{} were given",
                      want, byte_size);
  }
  if (byte_size)
    std::memcpy((*out_tensor)->buffer.ptr.get(), data, byte_size);
  return nullptr;
}

tfm_status_t tfm_tensor_create_view(tfm_dtype_t dtype, const int64_t *dims,
                                    size_t rank, void *data, size_t byte_size,
                                    tfm_tensor_t **out_tensor) {
  if (!out_tensor)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_tensor_create_view: out_tensor is NULL");
  *out_tensor = nullptr;
  size_t width = 0, count = 0;
  if (tfm_status_t s = checkShape("tfm_tensor_create_view", dtype, dims, rank,
                                  width, count))
    return s;
  if (byte_size != count * width)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_tensor_create_view: the shape needs {} bytes but "
                      "{} were given",
                      count * width, byte_size);
  if (byte_size && !data)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_tensor_create_view: data is NULL");
  if (reinterpret_cast<uintptr_t>(data) % width)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_tensor_create_view: data at {} is not aligned to "
                      "its {}-byte elements",
                      data, width);
  return guarded("tfm_tensor_create_view", [&]() -> tfm_status_t {
    auto t = std::make_unique<tfm_tensor_s>();
    t->dtype = dtype;
    t->dims.assign(dims, dims + rank);
    t->buffer.ptr = std::unique_ptr<void, AlignedBuffer::Free>(
        data, AlignedBuffer::Free{false});
    t->buffer.size = byte_size;
    *out_tensor = t.release();
    return nullptr;
  });
}

tfm_status_t tfm_tensor_create_device_view(tfm_dtype_t dtype,
                                           const int64_t *dims, size_t rank,
                                           const char *device, void *data,
                                           size_t byte_size,
                                           tfm_tensor_t **out_tensor) {
  std::string name = device ? device : "cpu";
  int32_t target = 0;
  int ordinal = 0;
  if (!parseDeviceName(name, target, ordinal))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_tensor_create_device_view: unknown device '{}'; "
                      "devices are 'cpu', 'cuda' and 'cuda:N'",
                      name);
  tfm_status_t s =
      tfm_tensor_create_view(dtype, dims, rank, data, byte_size, out_tensor);
  if (s || target == TFM_TARGET_CPU)
    return s;
  return guarded("tfm_tensor_create_device_view", [&]() -> tfm_status_t {
    (*out_tensor)->device = fmt::format("cuda:{}", ordinal);
    return nullptr;
  });
}

const char *tfm_tensor_device(const tfm_tensor_t *tensor) {
  return tensor ? tensor->device.c_str() : "";
}

tfm_status_t tfm_tensor_copy_to_host(const tfm_tensor_t *tensor,
                                     tfm_tensor_t **out_tensor) {
  if (!tensor || !out_tensor)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_tensor_copy_to_host: NULL argument");
  *out_tensor = nullptr;
  if (!tensor->onHost() && !tensor->owner)
    return makeStatus(TFM_STATUS_FAILED_PRECONDITION,
                      "tfm_tensor_copy_to_host: the tensor views memory of "
                      "{} that the caller allocated; copy it with the "
                      "library that did",
                      tensor->device);
  tfm_status_t s = tfm_tensor_create(tensor->dtype, tensor->dims.data(),
                                     tensor->dims.size(), out_tensor);
  if (s)
    return s;
  s = guarded("tfm_tensor_copy_to_host", [&]() -> tfm_status_t {
    void *dst = (*out_tensor)->buffer.ptr.get();
    const void *src = tensor->buffer.ptr.get();
    if (tensor->onHost())
      std::memcpy(dst, src, tensor->buffer.size);
    else
      tensor->owner->copyToHost(dst, src, tensor->buffer.size);
    return nullptr;
  });
  if (s) {
    tfm_tensor_release(*out_tensor);
    *out_tensor = nullptr;
  }
  return s;
}

int tfm_tensor_is_view(const tfm_tensor_t *tensor) {
  return tensor && !tensor->buffer.ptr.get_deleter().owned && !tensor->owner;
}

void tfm_tensor_release(tfm_tensor_t *tensor) { delete tensor; }

tfm_dtype_t tfm_tensor_dtype(const tfm_tensor_t *tensor) {
  return tensor ? tensor->dtype : static_cast<tfm_dtype_t>(0);
}

size_t tfm_tensor_rank(const tfm_tensor_t *tensor) {
  return tensor ? tensor->dims.size() : 0;
}

const int64_t *tfm_tensor_dims(const tfm_tensor_t *tensor) {
  return tensor ? tensor->dims.data() : nullptr;
}

size_t tfm_tensor_byte_size(const tfm_tensor_t *tensor) {
  return tensor ? tensor->buffer.size : 0;
}

void *tfm_tensor_data(tfm_tensor_t *tensor) {
  return tensor ? tensor->buffer.ptr.get() : nullptr;
}

} // extern "C"
