/*===- fake_model.c - A hand-written model library for runtime tests ------===*\
|*                                                                            *|
|* Implements the model ABI by hand: one entry point, "infer", computing      *|
|* out[i][j] = x[i][j] + bias[j] + weights[j], so the runtime's loading,      *|
|* validation, arena and weight plumbing can be tested before the compiler    *|
|* emits libraries. Compile definitions make the broken variants:            *|
|* FAKE_ABI_VERSION (a foreign version), FAKE_CORRUPT (bad metadata),        *|
|* FAKE_EXTERNAL (weights in a file beside the library), FAKE_BAD_NAME (a    *|
|* name pointer outside the library), FAKE_BAD_CODE (an entry point into     *|
|* data), FAKE_BLOCKING (an entry that waits until the test releases it),   *|
|* FAKE_CUDA (FAKE_KERNELS' model for a GPU: no PTX, its LINEAR through     *|
|* cuBLASLt, one check of x written to the state as a GPU's code does).     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "tfm/abi.h"

#include <stdint.h>
#include <string.h>

#ifdef FAKE_CUDA
#define FAKE_KERNELS 1
#endif

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
/* The bias-like weights of "infer", then 2·I for "project" (kernels read
 * only the run's buffers). */
static const float kWeights[12] __attribute__((aligned(64))) = {
    100.0f, 200.0f, 300.0f, 2, 0, 0, 0, 2, 0, 0, 0, 2};

static const tfm_abi_tensor_desc_t kInputs[] = {
    {"x", TFM_DTYPE_F32, 2, kXDims},
    {"bias", TFM_DTYPE_F32, 1, kBiasDims},
};
static const tfm_abi_tensor_desc_t kOutputs[] = {
    {"y", TFM_DTYPE_F32, 2, kOutDims},
};

#ifdef FAKE_BLOCKING
static int fake_blocked = 0, fake_entered = 0;
/* Makes "infer" wait, once entered, until called with 0. */
__attribute__((visibility("default"))) void fake_block(int on) {
  __atomic_store_n(&fake_blocked, on, __ATOMIC_SEQ_CST);
}
/* Whether a run has entered "infer". */
__attribute__((visibility("default"))) int fake_entered_infer(void) {
  return __atomic_load_n(&fake_entered, __ATOMIC_SEQ_CST);
}
#endif

/* The buffers the last run of "infer" was handed, so that tests can tell
 * a caller's memory read or written in place from a copy. */
static const void *fake_seen[3];
__attribute__((visibility("default"))) const void *fake_seen_buffer(int i) {
  return i >= 0 && i < 3 ? fake_seen[i] : 0;
}

__attribute__((unused)) static int32_t
infer(const tfm_abi_host_t *host, const void *const *inputs,
      void *const *outputs) {
  fake_seen[0] = inputs[0];
  fake_seen[1] = inputs[1];
  fake_seen[2] = outputs[0];
#ifdef FAKE_BLOCKING
  __atomic_store_n(&fake_entered, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&fake_blocked, __ATOMIC_SEQ_CST))
    ;
#endif
  /* The arena must be usable scratch memory of the promised size and
   * alignment: stage the sum there. */
  if (!host->arena || ((uintptr_t)host->arena % 64) != 0 ||
      host->arena_bytes < 6 * sizeof(float) ||
      host->weights_bytes != sizeof(kWeights))
    return TFM_ABI_STATUS_SIZE_MISMATCH;
  const float *x = (const float *)inputs[0];
  const float *b = (const float *)inputs[1];
  const float *w = (const float *)host->weights;
  float *scratch = (float *)host->arena;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      scratch[i * 3 + j] = x[i * 3 + j] + b[j] + w[j];
  memcpy(outputs[0], scratch, 6 * sizeof(float));
#ifdef FAKE_CUDA
  /* Its check, as a GPU's code writes it to its slot in the state: x's
   * first element, read as an index, must lie in [0, 100). (A run that
   * replays a graph does not run this code: the stand-in driver replays
   * launches, and this is host code.) */
  if (x[0] < 0 || x[0] >= 100) {
    int64_t outcome[2] = {0, (int64_t)x[0]};
    memcpy(host->state, outcome, sizeof outcome);
  }
#endif
  return 0;
}

#ifdef FAKE_CUDA
/* The one check of "infer", whose outcome the code writes to the state. */
static const tfm_abi_check_desc_t kChecks[] = {
    {"node 'Gather_1' (Gather)", "input 'x'", 0, 0, 100},
};
#endif

#ifdef FAKE_KERNELS
/* A second entry that calls a runtime kernel: y = x · Wᵀ with W = 2·I. */
static const tfm_abi_kernel_desc_t kKernels[] = {
    {TFM_KERNEL_LINEAR, TFM_DTYPE_F32, {2, 3, 3, 0, 0, 0, 0, 0}, {0, 0}},
};
static int32_t project(const tfm_abi_host_t *host, const void *const *inputs,
                       void *const *outputs) {
  /* Kernel arguments are untyped; inputs are only read. */
  void *args[] = {(void *)(uintptr_t)inputs[0],
                  (void *)((uintptr_t)host->weights + 3 * sizeof(float)), NULL,
                  NULL, outputs[0]};
  return host->run_kernel(host, 0, args);
}
#endif

#ifdef FAKE_KERNELS
/* Entries that ask the runtime for a TMA tensor map of the weights, as 3
 * rows of 4 floats read in boxes of 2 rows: "map" twice, which must give
 * one map, holding on a GPU (whose stand-in driver's memory is the host's)
 * what the stand-in encoded, on the CPU the emulation's words; it returns
 * 1 to 3 where the map is not so. "bad_map" asks for rows 12 bytes apart,
 * which TMA cannot read. */
static const tfm_abi_tensor_map_desc_t kMap = {
    TFM_DTYPE_F32, 2, 0, {4, 3, 0, 0, 0}, {16, 0, 0, 0}, {4, 2, 0, 0, 0}};
static const tfm_abi_tensor_map_desc_t kBadMap = {
    TFM_DTYPE_F32, 2, 0, {3, 4, 0, 0, 0}, {12, 0, 0, 0}, {3, 2, 0, 0, 0}};
static int32_t map(const tfm_abi_host_t *host, const void *const *inputs,
                   void *const *outputs) {
  void *first = NULL, *again = NULL;
  int32_t rc = host->tensor_map(host, &kMap, host->weights, &first);
  if (rc == 0)
    rc = host->tensor_map(host, &kMap, host->weights, &again);
  if (rc != 0)
    return rc;
  if (first != again)
    return 1;
  const int64_t *words = (const int64_t *)first;
  if (words[0] != (int64_t)(uintptr_t)host->weights)
    return 2;
#ifdef FAKE_CUDA
  /* The stand-in's words: address, type (FLOAT32), rank, swizzle, the
   * dims from index 4, the box from 9. */
  if (words[1] != 7 || words[2] != 2 || words[4] != 4 || words[5] != 3 ||
      words[9] != 4 || words[10] != 2)
    return 2;
  if ((uintptr_t)first % 64 != 0)
    return 3;
#else
  if (words[TFM_EMULATED_TENSOR_MAP_DIMS] != 4 ||
      words[TFM_EMULATED_TENSOR_MAP_DIMS + 1] != 3 ||
      words[TFM_EMULATED_TENSOR_MAP_STRIDES] != 16)
    return 2;
#endif
  return 0;
}
static int32_t bad_map(const tfm_abi_host_t *host, const void *const *inputs,
                       void *const *outputs) {
  void *m = NULL;
  return host->tensor_map(host, &kBadMap, host->weights, &m);
}
#endif

#if defined(FAKE_BAD_NAME)
#define FAKE_INFER_NAME ((const char *)(uintptr_t)0x10)
#else
#define FAKE_INFER_NAME "infer"
#endif
#if defined(FAKE_BAD_CODE)
#define FAKE_INFER_FN ((tfm_abi_entry_fn_t)(uintptr_t)kWeights)
#else
#define FAKE_INFER_FN infer
#endif

static const tfm_abi_entry_t kEntries[] = {
    {FAKE_INFER_NAME, 2, kInputs, 1, kOutputs, 6 * sizeof(float),
     FAKE_INFER_FN},
#ifdef FAKE_KERNELS
    {"project", 1, kInputs, 1, kOutputs, 0, project},
    {"map", 1, kInputs, 1, kOutputs, 0, map},
    {"bad_map", 1, kInputs, 1, kOutputs, 0, bad_map},
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
#ifdef FAKE_CUDA
    TFM_CHECK_SLOT_BYTES,
    0,
    NULL,
    1,
    kChecks,
    TFM_TARGET_CUDA,
    "sm_80",
    "// no kernels of its own\n",
    sizeof("// no kernels of its own\n"),
    0,
    NULL,
    0,
    0,
    NULL,
    NULL,
    NULL,
    NULL,
    TFM_CHECKS_IN_STATE,
    0,
#endif
};

__attribute__((visibility("default"))) const tfm_abi_model_t *
tfm_model_v1(void) {
  return &kModel;
}
