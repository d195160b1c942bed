/*===- fake_model.c - A hand-written model library for runtime tests ------===*\
|*                                                                            *|
|* Implements the model ABI by hand: one entry point, "infer", computing      *|
|* out[i][j] = x[i][j] + bias[j] + weights[j], so the runtime's loading,      *|
|* validation, arena and weight plumbing can be tested before the compiler    *|
|* emits libraries. Compile definitions make the broken variants:            *|
|* FAKE_ABI_VERSION (a foreign version), FAKE_CORRUPT (bad metadata),        *|
|* FAKE_EXTERNAL (weights in a file beside the library).                     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "tfm/abi.h"

#include <stdint.h>
#include <string.h>

#ifndef FAKE_ABI_VERSION
#define FAKE_ABI_VERSION TFM_ABI_VERSION
#endif

static const int64_t kXDims[] = {2, 3};
static const int64_t kBiasDims[] = {3};
#ifdef FAKE_CORRUPT
static const int64_t kOutDims[] = {2, -3};
#else
static const int64_t kOutDims[] = {2, 3};
#endif
static const float kWeights[3] = {100.0f, 200.0f, 300.0f};

static const tfm_abi_tensor_desc_t kInputs[] = {
    {"x", TFM_DTYPE_F32, 2, kXDims},
    {"bias", TFM_DTYPE_F32, 1, kBiasDims},
};
static const tfm_abi_tensor_desc_t kOutputs[] = {
    {"y", TFM_DTYPE_F32, 2, kOutDims},
};

static int32_t infer(const tfm_abi_host_t *host, const void *const *inputs,
                     void *const *outputs) {
  /* The arena must be usable scratch memory of the promised size and
   * alignment: stage the sum there. */
  if (!host->arena || ((uintptr_t)host->arena % 64) != 0)
    return 7;
  const float *x = (const float *)inputs[0];
  const float *b = (const float *)inputs[1];
  const float *w = (const float *)host->weights;
  float *scratch = (float *)host->arena;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      scratch[i * 3 + j] = x[i * 3 + j] + b[j] + w[j];
  memcpy(outputs[0], scratch, 6 * sizeof(float));
  return 0;
}

#ifdef FAKE_KERNELS
/* A second entry that calls a runtime kernel: y = x · Wᵀ with W = 2·I. */
static float kIdentity2[9] = {2, 0, 0, 0, 2, 0, 0, 0, 2};
static const tfm_abi_kernel_desc_t kKernels[] = {
    {TFM_KERNEL_LINEAR, TFM_DTYPE_F32, {2, 3, 3, 0, 0, 0, 0, 0}, {0, 0}},
};
static int32_t project(const tfm_abi_host_t *host, const void *const *inputs,
                       void *const *outputs) {
  /* Kernel arguments are untyped; inputs are only read. */
  void *args[] = {(void *)(uintptr_t)inputs[0], kIdentity2, NULL, NULL,
                  outputs[0]};
  return host->run_kernel(host, 0, args);
}
#endif

static const tfm_abi_entry_t kEntries[] = {
    {"infer", 2, kInputs, 1, kOutputs, 6 * sizeof(float), infer},
#ifdef FAKE_KERNELS
    {"project", 1, kInputs, 1, kOutputs, 0, project},
#endif
};

static const tfm_abi_model_t kModel = {
    FAKE_ABI_VERSION,
    sizeof(tfm_abi_model_t),
    "runtime tests",
    sizeof(kEntries) / sizeof(kEntries[0]),
    kEntries,
#ifdef FAKE_EXTERNAL
    NULL,
    sizeof(kWeights),
    "fake_weights.bin",
#else
    kWeights,
    sizeof(kWeights),
    NULL,
#endif
#ifdef FAKE_KERNELS
    1,
    kKernels,
#else
    0,
    NULL,
#endif
};

__attribute__((visibility("default"))) const tfm_abi_model_t *
tfm_model_v1(void) {
  return &kModel;
}
