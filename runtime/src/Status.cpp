//===- Status.cpp - Statuses and the names in messages --------------------===//

#include "Internal.h"

using namespace tfm::runtime;

extern "C" {

tfm_status_code_t tfm_status_code(tfm_status_t status) {
  return status ? status->code : TFM_STATUS_OK;
}

const char *tfm_status_message(tfm_status_t status) {
  return status ? status->message.c_str() : "";
}

void tfm_status_free(tfm_status_t status) { delete status; }

} // extern "C"

tfm_status_t tfm::runtime::sessionInUse(const char *call) {
  return makeStatus(TFM_STATUS_FAILED_PRECONDITION,
                    "{}: another thread is using this session; a session "
                    "serves one call at a time (create one per thread)",
                    call);
}

const char *tfm::runtime::dtypeName(int32_t dtype) {
  switch (dtype) {
  case TFM_DTYPE_F32:
    return "f32";
  case TFM_DTYPE_F16:
    return "f16";
  case TFM_DTYPE_BF16:
    return "bf16";
  case TFM_DTYPE_I32:
    return "i32";
  case TFM_DTYPE_I64:
    return "i64";
  case TFM_DTYPE_BOOL:
    return "bool";
  case TFM_DTYPE_F64:
    return "f64";
  case TFM_DTYPE_I8:
    return "i8";
  case TFM_DTYPE_I16:
    return "i16";
  case TFM_DTYPE_U8:
    return "u8";
  case TFM_DTYPE_U16:
    return "u16";
  case TFM_DTYPE_U32:
    return "u32";
  case TFM_DTYPE_U64:
    return "u64";
  }
  return "unknown";
}

std::string tfm::runtime::shapeString(const int64_t *dims, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

const char *tfm::runtime::targetName(int32_t target) {
  switch (target) {
  case TFM_TARGET_CPU: return "the CPU";
  case TFM_TARGET_CUDA: return "CUDA GPUs";
  default: return "an unknown target";
  }
}

const char *tfm::runtime::kernelName(int32_t kind) {
  switch (kind) {
  case TFM_KERNEL_LINEAR: return "linear";
  case TFM_KERNEL_BATCH_MATMUL: return "batch_matmul";
  case TFM_KERNEL_MASKED_SOFTMAX: return "masked_softmax";
  case TFM_KERNEL_LAYER_NORM: return "layer_norm";
  case TFM_KERNEL_REORDER: return "reorder";
  case TFM_KERNEL_ADAM: return "adam";
  case TFM_KERNEL_SGD: return "sgd";
  case TFM_KERNEL_LAYER_NORM_BACKWARD: return "layer_norm_backward";
  case TFM_KERNEL_CONV_2D: return "conv_2d";
  case TFM_KERNEL_ATTENTION: return "attention";
  case TFM_KERNEL_RMS_NORM:
    return "rms_norm";
  case TFM_KERNEL_RMS_NORM_BACKWARD:
    return "rms_norm_backward";
  case TFM_KERNEL_ALL_REDUCE:
    return "all_reduce";
  case TFM_KERNEL_QUANTIZED_LINEAR:
    return "quantized_linear";
  default: return "?";
  }
}
