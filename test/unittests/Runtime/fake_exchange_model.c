/*===- fake_exchange_model.c - A GPU model that only averages -------------===*\
|*                                                                            *|
|* A hand-written model for a GPU whose entry "average" does what a         *|
|* data-parallel training step does with its gradients, and nothing else:   *|
|* it stages a [3] and b [6] in its arena and averages them across the      *|
|* ranks, weighted by w, through the ALL_REDUCE kernel: a in bucket 0       *|
|* alone, b as two members (2 and 4 elements) of bucket 1, started in the   *|
|* order a step completes them and waited for before they are read. Its     *|
|* code runs on the host, which the stand-in CUDA driver's device memory    *|
|* is, so the test sees the runtime's GPU exchange without a GPU.           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "tfm/abi.h"

#include <stdint.h>
#include <string.h>

static const int64_t kA[] = {3}, kB[] = {6}, kW[] = {1};
static const tfm_abi_tensor_desc_t kInputs[] = {
    {"a", TFM_DTYPE_F32, 1, kA},
    {"b", TFM_DTYPE_F32, 1, kB},
    {"w", TFM_DTYPE_F32, 1, kW},
};
static const tfm_abi_tensor_desc_t kOutputs[] = {
    {"a_average", TFM_DTYPE_F32, 1, kA},
    {"b_average", TFM_DTYPE_F32, 1, kB},
};

/* params: N, bucket, phase, offset, bucket elements, members, parts */
static const tfm_abi_kernel_desc_t kKernels[] = {
    {TFM_KERNEL_ALL_REDUCE,
     TFM_DTYPE_F32,
     {3, 0, TFM_ALL_REDUCE_START, 0, 3, 1, 0}},
    {TFM_KERNEL_ALL_REDUCE,
     TFM_DTYPE_F32,
     {4, 1, TFM_ALL_REDUCE_START, 2, 6, 2, 0}},
    {TFM_KERNEL_ALL_REDUCE,
     TFM_DTYPE_F32,
     {2, 1, TFM_ALL_REDUCE_START, 0, 6, 2, 0}},
    {TFM_KERNEL_ALL_REDUCE,
     TFM_DTYPE_F32,
     {3, 0, TFM_ALL_REDUCE_WAIT, 0, 3, 1, 0}},
    {TFM_KERNEL_ALL_REDUCE,
     TFM_DTYPE_F32,
     {2, 1, TFM_ALL_REDUCE_WAIT, 0, 6, 2, 0}},
    {TFM_KERNEL_ALL_REDUCE,
     TFM_DTYPE_F32,
     {4, 1, TFM_ALL_REDUCE_WAIT, 2, 6, 2, 0}},
};

static int32_t average(const tfm_abi_host_t *host, const void *const *inputs,
                       void *const *outputs) {
  float *a = (float *)host->arena, *b = a + 4;
  memcpy(a, inputs[0], 3 * sizeof(float));
  memcpy(b, inputs[1], 6 * sizeof(float));
  void *w = (void *)(uintptr_t)inputs[2];
  /* b's second member is complete first, as a backward pass may. */
  void *start[][2] = {{a, w}, {b + 2, w}, {b, w}};
  void *wait[][2] = {{a, 0}, {b, 0}, {b + 2, 0}};
  for (int k = 0; k < 6; ++k) {
    int32_t rc = host->run_kernel(host, k, k < 3 ? start[k] : wait[k - 3]);
    if (rc)
      return rc;
  }
  memcpy(outputs[0], a, 3 * sizeof(float));
  memcpy(outputs[1], b, 6 * sizeof(float));
  return 0;
}

static const tfm_abi_entry_t kEntries[] = {
    {"average", 3, kInputs, 2, kOutputs, 16 * sizeof(float), average},
};

static const tfm_abi_model_t kModel = {
    .abi_version = TFM_ABI_VERSION,
    .struct_size = sizeof(tfm_abi_model_t),
    .producer = "runtime tests",
    .num_entries = 1,
    .entries = kEntries,
    .num_kernels = sizeof(kKernels) / sizeof(kKernels[0]),
    .kernels = kKernels,
    .target = TFM_TARGET_CUDA,
    .device_arch = "sm_80",
    .device_code = "// no kernels of its own\n",
    .device_code_bytes = sizeof("// no kernels of its own\n"),
    .check_mode = TFM_CHECKS_IN_STATE,
};

__attribute__((visibility("default"))) const tfm_abi_model_t *
tfm_model_v1(void) {
  return &kModel;
}
