//===- Kernels.h - oneDNN-backed kernels of the CPU device ------*- C++ -*-===//
//
// One object per kernel descriptor of a model, created when a session is
// created (that is when oneDNN builds its primitives), then run any number
// of times. Semantics are those of the tfm ops, documented in tfm/abi.h.
// One file per family: Gemm.cpp (LINEAR, BATCH_MATMUL), QuantizedLinear.cpp,
// Normalization.cpp
// (MASKED_SOFTMAX, LAYER_NORM and its backward pass), Attention.cpp,
// Convolution.cpp, Reorder.cpp, Optimizer.cpp (ADAM, SGD).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CPU_KERNELS_H
#define TFM_RUNTIME_SRC_CPU_KERNELS_H

#include "tfm/abi.h"

#include <memory>
#include <string>

namespace tfm::runtime::cpu {

class Kernel {
public:
  virtual ~Kernel() = default;
  /// Runs on `args` (see tfm/abi.h); returns 0 on success.
  virtual int32_t run(void *const *args) = 0;
};

/// The oneDNN engine and stream a session's kernels share (Engine.h).
class Engine;

std::shared_ptr<Engine> makeEngine();
/// oneDNN's version, "3.0.0".
std::string libraryVersion();

/// Whether this CPU multiplies bf16, within DNNL_MAX_CPU_ISA. Where it does,
/// a bf16 LINEAR runs in oneDNN's bf16 GEMM; elsewhere in the f32 GEMM on
/// operands rounded to bf16, which gives the same products. Read once per
/// process.
bool multipliesBf16();

/// Sets the threads the kernels use on the calling thread and returns the
/// count it had, or 0 where nothing changed. oneDNN reads it when a
/// primitive is created, to split its work, as well as when one runs.
int32_t setThreads(int32_t threads);

/// Runs task(args, begin, end) over [0, n) in one contiguous part per
/// thread of the calling thread's OpenMP count.
void parallelFor(tfm_abi_task_fn_t task, void *const *args, int64_t n);

/// Builds the kernel for `desc` with `flags` (its tfm_kernel_flag_t bits),
/// or returns null and sets `error`.
std::unique_ptr<Kernel> makeKernel(const std::shared_ptr<Engine> &engine,
                                   const tfm_abi_kernel_desc_t &desc,
                                   uint32_t flags, std::string &error);

// The families' constructors, for makeKernel; `desc` has been validated.
std::unique_ptr<Kernel> makeLinearKernel(std::shared_ptr<Engine> engine,
                                         const tfm_abi_kernel_desc_t &desc);
/// Whether the LINEAR of `desc` runs on PackedLinear.cpp's kernel here: in
/// f32, with more rows than a GEMV's, on a CPU whose widest vectors (within
/// DNNL_MAX_CPU_ISA) are AVX2's.
bool linearOnPackedAvx2(const tfm_abi_kernel_desc_t &desc);
/// LINEAR in f32 on AVX2, its weights packed once for a register tile of
/// our own (PackedLinear.cpp); null on other architectures.
std::unique_ptr<Kernel>
makePackedLinearKernel(std::shared_ptr<Engine> engine,
                       const tfm_abi_kernel_desc_t &desc);
/// Whether oneDNN sums u8 · s8 products on this CPU (within
/// DNNL_MAX_CPU_ISA) without saturating: it has VNNI (AVX-512 or AVX). Read
/// once per process.
bool multipliesInt8Exactly();
/// Whether this CPU has AVX-512's VNNI (vpdpbusd on 64 bytes), within
/// DNNL_MAX_CPU_ISA, for the weight-only kernel's integer body. Read once
/// per process.
bool hasAvx512Vnni();
/// QUANTIZED_LINEAR (QuantizedLinear.cpp): on oneDNN's u8 · s8 matmul
/// where it multipliesInt8Exactly, else (AVX2) on the kernel's own product
/// of the operands widened to 16 bits.
std::unique_ptr<Kernel>
makeQuantizedLinearKernel(std::shared_ptr<Engine> engine,
                          const tfm_abi_kernel_desc_t &desc);
/// QUANTIZED_LINEAR with WEIGHT_ONLY: the weights dequantized in registers
/// for a few rows, in panels for sgemm for more (WeightOnlyLinear.cpp); any
/// CPU, blocks of a multiple of 16.
std::unique_ptr<Kernel>
makeWeightOnlyLinearKernel(std::shared_ptr<Engine> engine,
                           const tfm_abi_kernel_desc_t &desc);
/// act(v) for a tfm_activation_t, as LINEAR applies it (Gemm.cpp).
float activate(float v, int64_t act);
/// y[i] = act(y[i]) over y[0, n): in vector lanes (activateRow) where the
/// CPU has them within vectorIsa(), else one at a time; nothing for NONE.
void activateRowInLanes(float *y, int64_t n, int64_t act);
std::unique_ptr<Kernel>
makeBatchMatmulKernel(std::shared_ptr<Engine> engine,
                      const tfm_abi_kernel_desc_t &desc);
std::unique_ptr<Kernel>
makeMaskedSoftmaxKernel(std::shared_ptr<Engine> engine,
                        const tfm_abi_kernel_desc_t &desc);
std::unique_ptr<Kernel> makeLayerNormKernel(std::shared_ptr<Engine> engine,
                                            const tfm_abi_kernel_desc_t &desc);
std::unique_ptr<Kernel>
makeLayerNormBackwardKernel(std::shared_ptr<Engine> engine,
                            const tfm_abi_kernel_desc_t &desc);
/// RMS_NORM_BACKWARD, by loops of its own: oneDNN 2.6 has no RMSNorm.
std::unique_ptr<Kernel>
makeRMSNormBackwardKernel(const tfm_abi_kernel_desc_t &desc);
std::unique_ptr<Kernel> makeReorderKernel(std::shared_ptr<Engine> engine,
                                          const tfm_abi_kernel_desc_t &desc);
std::unique_ptr<Kernel> makeAttentionKernel(std::shared_ptr<Engine> engine,
                                            const tfm_abi_kernel_desc_t &d);
std::unique_ptr<Kernel> makeConv2DKernel(std::shared_ptr<Engine> engine,
                                         const tfm_abi_kernel_desc_t &desc);
std::unique_ptr<Kernel> makeAdamKernel(const tfm_abi_kernel_desc_t &desc);
/// ADAM's update of `n` elements on every thread: the parameter `p` from
/// its gradient `g` and its moments `m` and `v`, with the step's eight
/// `coefficients` as the compiled code computes them.
void adamUpdate(float *p, const float *g, float *m, float *v, int64_t n,
                const float *coefficients);
std::unique_ptr<Kernel> makeSGDKernel(const tfm_abi_kernel_desc_t &desc);

} // namespace tfm::runtime::cpu

#endif // TFM_RUNTIME_SRC_CPU_KERNELS_H
