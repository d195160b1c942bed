//===- Kernels.cpp - Kernel descriptors to oneDNN-backed kernels ------------===//

#include "Engine.h"
#include "Kernels.h"

#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

using namespace tfm::runtime::cpu;

std::string tfm::runtime::cpu::libraryVersion() {
  const dnnl_version_t *v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

std::shared_ptr<Engine> tfm::runtime::cpu::makeEngine() {
  return std::make_shared<Engine>();
}

VectorIsa tfm::runtime::cpu::vectorIsa() {
  static const VectorIsa isa = [] {
#if defined(__x86_64__)
    std::string limit;
    if (const char *env = std::getenv("DNNL_MAX_CPU_ISA"))
      for (const char *c = env; *c; ++c)
        limit += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
    bool wide = limit.empty() || limit == "all" ||
                limit.compare(0, 6, "avx512") == 0 ||
                limit.compare(0, 5, "avx10") == 0;
    bool avx2 = wide || limit.compare(0, 4, "avx2") == 0;
    if (wide && __builtin_cpu_supports("avx512f"))
      return VectorIsa::AVX512;
    if (avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return VectorIsa::AVX2;
#endif
    return VectorIsa::Scalar;
  }();
  return isa;
}

int32_t tfm::runtime::cpu::setThreads(int32_t threads) {
  int32_t before = omp_get_max_threads();
  if (threads <= 0 || before == threads)
    return 0;
  omp_set_num_threads(threads);
  return before;
}

void tfm::runtime::cpu::parallelFor(tfm_abi_task_fn_t task,
                                    void *const *args, int64_t n) {
  int64_t threads = std::min<int64_t>(omp_get_max_threads(), n);
  if (threads <= 1) {
    task(args, 0, n);
    return;
  }
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    int64_t part = omp_get_thread_num(), parts = omp_get_num_threads();
    int64_t begin = n * part / parts, end = n * (part + 1) / parts;
    if (begin < end)
      task(args, begin, end);
  }
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeKernel(const std::shared_ptr<Engine> &device,
                              const tfm_abi_kernel_desc_t &d,
                              std::string &error) {
  if (d.dtype != TFM_DTYPE_F32 &&
      !(d.dtype == TFM_DTYPE_BF16 && d.kind == TFM_KERNEL_LINEAR)) {
    error = "kernels compute in f32 (and LINEAR in bf16) only";
    return nullptr;
  }
  // The leading params of each kind are sizes, up to its first flag.
  int64_t rank = d.params[TFM_REORDER_RANK];
  if (d.kind == TFM_KERNEL_REORDER && (rank < 1 || rank > TFM_REORDER_MAX_RANK)) {
    error = "a reorder has rank 1 to 6";
    return nullptr;
  }
  int sizes = d.kind == TFM_KERNEL_BATCH_MATMUL ? TFM_BATCH_MATMUL_NUM_PARAMS
              : d.kind == TFM_KERNEL_MASKED_SOFTMAX ? TFM_MASKED_SOFTMAX_CAUSAL
              : d.kind == TFM_KERNEL_LAYER_NORM ? TFM_LAYER_NORM_HAS_RESIDUAL
              : d.kind == TFM_KERNEL_LAYER_NORM_BACKWARD
                  ? TFM_LAYER_NORM_BACKWARD_NUM_PARAMS
              : d.kind == TFM_KERNEL_ADAM || d.kind == TFM_KERNEL_SGD
                  ? TFM_OPTIMIZER_NUM_PARAMS
              : d.kind == TFM_KERNEL_CONV_2D ? TFM_CONV_2D_NUM_PARAMS
              : d.kind == TFM_KERNEL_ATTENTION ? TFM_ATTENTION_FLAGS
              : d.kind == TFM_KERNEL_REORDER
                  ? TFM_REORDER_DIMS + static_cast<int>(rank)
                  : TFM_LINEAR_HAS_BIAS;
  for (int i = 0; i < sizes; ++i)
    if (d.params[i] <= 0) {
      error = "kernel sizes must be positive";
      return nullptr;
    }
  try {
    switch (d.kind) {
    case TFM_KERNEL_LINEAR:
      return makeLinearKernel(device, d);
    case TFM_KERNEL_BATCH_MATMUL:
      return makeBatchMatmulKernel(device, d);
    case TFM_KERNEL_MASKED_SOFTMAX:
      return makeMaskedSoftmaxKernel(device, d);
    case TFM_KERNEL_LAYER_NORM:
      return makeLayerNormKernel(device, d);
    case TFM_KERNEL_REORDER:
      return makeReorderKernel(device, d);
    case TFM_KERNEL_LAYER_NORM_BACKWARD:
      return makeLayerNormBackwardKernel(device, d);
    case TFM_KERNEL_CONV_2D:
      return makeConv2DKernel(device, d);
    case TFM_KERNEL_ATTENTION:
      return makeAttentionKernel(device, d);
    case TFM_KERNEL_ADAM:
      return makeAdamKernel(d);
    case TFM_KERNEL_SGD:
      return makeSGDKernel(d);
    default:
      error = "unknown kernel kind " + std::to_string(d.kind);
      return nullptr;
    }
  } catch (const dnnl::error &e) {
    error = std::string("oneDNN rejected the kernel: ") + e.what();
    return nullptr;
  }
}
