//===- Kernels.cpp - Kernel descriptors to oneDNN-backed kernels ------------===//

#include "Engine.h"
#include "Kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

using namespace tfm::runtime::cpu;

std::string tfm::runtime::cpu::libraryVersion() {
  const dnnl_version_t *v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

std::shared_ptr<Engine> tfm::runtime::cpu::makeEngine() {
  return std::make_shared<Engine>();
}

bool tfm::runtime::cpu::multipliesBf16() {
  // Each oneDNN ISA's bits include those of the ISAs below it.
  static const bool bf16 =
      (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) &
       dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
  return bf16;
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

namespace {

/// The f32 value of a 16-bit float's pattern: bf16 is f32's upper half; an
/// IEEE half is rebuilt from its fields. Both are exact.
float widen(uint16_t h, bool half) {
  uint32_t bits;
  if (!half) {
    bits = uint32_t(h) << 16;
  } else {
    uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 31,
             m = h & 1023u;
    if (e == 31) {
      bits = sign | 0x7f800000u | (m << 13);
    } else if (e) {
      bits = sign | ((e + 112) << 23) | (m << 13);
    } else {
      float v = std::ldexp(static_cast<float>(m), -24);
      std::memcpy(&bits, &v, 4);
      bits |= sign;
    }
  }
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

/// The nearest bf16 value of `v` (ties to even), in f32: what a bf16
/// GEMM multiplies. A NaN stays a NaN.
float roundedToBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits = (bits & 0x7fffffffu) > 0x7f800000u
             ? (bits | 0x00400000u) & 0xffff0000u
             : (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}

/// What a GEMM's two operands hold when an f32 kernel multiplies them.
enum class Operands {
  /// bf16 or IEEE half patterns (TFM_KERNEL_FLAG_NARROW_OPERANDS): a GPU
  /// model's GEMM in the CPU emulation of its schedule.
  Bf16Bits,
  HalfBits,
  /// f32 values, for a bf16 LINEAR on a CPU without bf16 instructions.
  F32RoundedToBf16,
};

/// A GEMM on operands of 16-bit precision run by the f32 kernel, on
/// operands widened (or rounded) to f32 values. Products of 16-bit values
/// are exact in f32, as on bf16 hardware and the GPU's tensor cores, so the
/// results differ in the order of the sums only; and no host lacks the
/// kernel.
class F32Operands : public Kernel {
public:
  F32Operands(std::unique_ptr<Kernel> inner, Operands operands, int32_t numArgs,
              const uint64_t elements[2], bool constantSecond)
      : inner(std::move(inner)), operands(operands), numArgs(numArgs),
        constantSecond(constantSecond) {
    for (int i = 0; i < 2; ++i)
      sizes[i] = elements[i];
  }

  int32_t run(void *const *args) override {
    void *converted[TFM_KERNEL_MAX_ARGS] = {};
    std::copy(args, args + numArgs, converted);
    for (int i = 0; i < 2; ++i) {
      // A LINEAR's constant weights are converted once each: the f32 kernel
      // packs them at their first call, keyed by their address, so every
      // layer that shares the kernel needs its own.
      bool constant = i == 1 && constantSecond;
      std::vector<float> &to = constant ? constants[args[i]] : scratch[i];
      if (constant && !to.empty()) {
        converted[i] = to.data();
        continue;
      }
      to.resize(sizes[i]);
      convert(args[i], to);
      converted[i] = to.data();
    }
    return inner->run(converted);
  }

private:
  void convert(const void *from, std::vector<float> &to) const {
    if (operands == Operands::F32RoundedToBf16) {
      const auto *f = static_cast<const float *>(from);
      for (size_t e = 0; e < to.size(); ++e)
        to[e] = roundedToBf16(f[e]);
      return;
    }
    const auto *h = static_cast<const uint16_t *>(from);
    bool half = operands == Operands::HalfBits;
    for (size_t e = 0; e < to.size(); ++e)
      to[e] = widen(h[e], half);
  }

  std::unique_ptr<Kernel> inner;
  Operands operands;
  int32_t numArgs;
  bool constantSecond;
  uint64_t sizes[2];
  std::vector<float> scratch[2];
  std::unordered_map<const void *, std::vector<float>> constants;
};

/// The elements each of a GEMM's two operands spans (the model was
/// validated at load).
void gemmOperandElements(const tfm_abi_kernel_desc_t &d, uint64_t elements[2]) {
  const int64_t *p = d.params;
  if (d.kind == TFM_KERNEL_LINEAR) {
    elements[0] = uint64_t(p[TFM_LINEAR_M]) * uint64_t(p[TFM_LINEAR_K]);
    elements[1] = uint64_t(p[TFM_LINEAR_N]) * uint64_t(p[TFM_LINEAR_K]);
    return;
  }
  int64_t b1 = p[TFM_BATCH_MATMUL_B1], b2 = p[TFM_BATCH_MATMUL_B2],
          m = p[TFM_BATCH_MATMUL_M], k = p[TFM_BATCH_MATMUL_K],
          n = p[TFM_BATCH_MATMUL_N];
  const int64_t dims[2][4] = {{b1, b2, m, k}, {b1, b2, k, n}};
  for (int i = 0; i < 2; ++i) {
    elements[i] = 1;
    for (int j = 0; j < 4; ++j)
      elements[i] += uint64_t(dims[i][j] - 1) * uint64_t(d.strides[4 * i + j]);
  }
}

/// A kernel the session runs itself (ALL_REDUCE, a sharded ADAM), never the
/// device.
class NoKernel : public Kernel {
public:
  int32_t run(void *const *) override { return -1; }
};

/// `d` run by the f32 kernel on its operands converted as `operands` says.
std::unique_ptr<Kernel> onF32Operands(const std::shared_ptr<Engine> &device,
                                      const tfm_abi_kernel_desc_t &d,
                                      Operands operands, std::string &error) {
  uint64_t elements[2];
  gemmOperandElements(d, elements);
  tfm_abi_kernel_desc_t wide = d;
  wide.dtype = TFM_DTYPE_F32;
  std::unique_ptr<Kernel> inner = makeKernel(device, wide, 0, error);
  if (!inner)
    return nullptr;
  bool linear = d.kind == TFM_KERNEL_LINEAR;
  return std::make_unique<F32Operands>(
      std::move(inner), operands, linear ? 5 : 3, elements,
      linear && d.params[TFM_LINEAR_CONSTANT_WEIGHTS] != 0);
}

} // namespace

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeKernel(const std::shared_ptr<Engine> &device,
                              const tfm_abi_kernel_desc_t &d, uint32_t flags,
                              std::string &error) {
  if (flags & TFM_KERNEL_FLAG_NARROW_OPERANDS) {
    bool gemm =
        d.kind == TFM_KERNEL_LINEAR || d.kind == TFM_KERNEL_BATCH_MATMUL;
    if (!gemm || (d.dtype != TFM_DTYPE_BF16 && d.dtype != TFM_DTYPE_F16)) {
      error = "only a bf16 or f16 GEMM reads 16-bit operands";
      return nullptr;
    }
    return onF32Operands(device, d,
                         d.dtype == TFM_DTYPE_F16 ? Operands::HalfBits
                                                  : Operands::Bf16Bits,
                         error);
  }
  // Without bf16 instructions oneDNN has no bf16 GEMM (2.6 on AVX2: "could
  // not create a primitive descriptor iterator"), and the model must still
  // run where its code does.
  if (d.dtype == TFM_DTYPE_BF16 && d.kind == TFM_KERNEL_LINEAR &&
      !multipliesBf16())
    return onF32Operands(device, d, Operands::F32RoundedToBf16, error);
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
              : d.kind == TFM_KERNEL_LAYER_NORM || d.kind == TFM_KERNEL_RMS_NORM
                  ? TFM_LAYER_NORM_HAS_RESIDUAL
              : d.kind == TFM_KERNEL_LAYER_NORM_BACKWARD ||
                      d.kind == TFM_KERNEL_RMS_NORM_BACKWARD
                  ? TFM_LAYER_NORM_BACKWARD_NUM_PARAMS
              : d.kind == TFM_KERNEL_ADAM || d.kind == TFM_KERNEL_SGD
                  ? TFM_OPTIMIZER_SHARDED
              : d.kind == TFM_KERNEL_CONV_2D    ? TFM_CONV_2D_NUM_PARAMS
              : d.kind == TFM_KERNEL_ATTENTION  ? TFM_ATTENTION_FLAGS
              : d.kind == TFM_KERNEL_ALL_REDUCE ? TFM_ALL_REDUCE_BUCKET
              : d.kind == TFM_KERNEL_QUANTIZED_LINEAR
                  ? TFM_QUANTIZED_LINEAR_HAS_BIAS
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
    case TFM_KERNEL_RMS_NORM:
      return makeLayerNormKernel(device, d);
    case TFM_KERNEL_REORDER:
      return makeReorderKernel(device, d);
    case TFM_KERNEL_LAYER_NORM_BACKWARD:
      return makeLayerNormBackwardKernel(device, d);
    case TFM_KERNEL_RMS_NORM_BACKWARD:
      return makeRMSNormBackwardKernel(d);
    case TFM_KERNEL_CONV_2D:
      return makeConv2DKernel(device, d);
    case TFM_KERNEL_ATTENTION:
      return makeAttentionKernel(device, d);
    case TFM_KERNEL_ADAM:
      // A sharded update's moments are the session's (Shards.h).
      if (d.params[TFM_OPTIMIZER_SHARDED])
        return std::make_unique<NoKernel>();
      return makeAdamKernel(d);
    case TFM_KERNEL_SGD:
      return makeSGDKernel(d);
    case TFM_KERNEL_ALL_REDUCE:
      // The session runs it (Exchange.h): it is the processes', not the
      // device's.
      return std::make_unique<NoKernel>();
    case TFM_KERNEL_QUANTIZED_LINEAR:
      if (d.params[TFM_QUANTIZED_LINEAR_FLAGS] &
          TFM_QUANTIZED_LINEAR_WEIGHT_ONLY) {
        int64_t block = d.params[TFM_QUANTIZED_LINEAR_BLOCK_SIZE];
        if (block % 16 != 0 && block < d.params[TFM_QUANTIZED_LINEAR_K]) {
          error = "a weight-only QUANTIZED_LINEAR takes blocks of a "
                  "multiple of 16 columns, or of all K, not " +
                  std::to_string(block);
          return nullptr;
        }
        return makeWeightOnlyLinearKernel(device, d);
      }
      if (!multipliesInt8Exactly() && vectorIsa() == VectorIsa::Scalar) {
        error = "this CPU (within DNNL_MAX_CPU_ISA) has neither VNNI nor "
                "AVX2: oneDNN would sum u8 · s8 pairs in 16 bits, which "
                "saturate, and the kernel's exact 16-bit product needs AVX2";
        return nullptr;
      }
      return makeQuantizedLinearKernel(device, d);
    default:
      error = "unknown kernel kind " + std::to_string(d.kind);
      return nullptr;
    }
  } catch (const dnnl::error &e) {
    error = std::string("oneDNN rejected the kernel: ") + e.what();
    return nullptr;
  }
}
