//===- KernelStrategy.h - Which kernel each op gets on the GPU --*- C++ -*-===//
//
// The GPU target has several kernels for some ops: the library's GEMMs,
// a warp per row, a fused attention, and the neutral lowering's loops,
// which every op has. Which one an op gets is decided here and only here,
// so that the lowerings and the report (--fusion-report on the cuda
// target) cannot disagree, and an op that misses a better kernel says why.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOGPU_KERNELSTRATEGY_H
#define TFM_CONVERSION_TFMTOGPU_KERNELSTRATEGY_H

#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace mlir::tfm {

enum class GPUKernel {
  /// A call of the runtime's GEMMs (cuBLASLt), with the generated GEMM as
  /// the fallback a session without the library runs (Gemm.cpp).
  LibraryGemm,
  /// A warp per row, statistics by shuffles (WarpRows.h).
  WarpRows,
  /// A reduction over the leading axes: a block per 32 columns, its rows
  /// split over the block's row groups, their partials combined in shared
  /// memory (Reduction.cpp).
  BlockColumns,
  /// tfm.attention with an online softmax, a thread per query row, its
  /// scores never in memory (Attention.cpp).
  AttentionRows,
  /// tfm.attention on the tensor cores, a block per 64 query rows
  /// (FlashAttentionMma.cpp).
  FlashAttentionMma,
  /// No kernel of its own: tfm.rotary applied by the attention that reads
  /// it, while that loads its query or keys; the rotated tensor is never
  /// stored (tfm-plan-memory places it #tfm.inline).
  InAttention,
  /// The neutral lowering: loops mapped to threads (tfm-map-to-gpu).
  Loops,
};

/// Every kernel, in the report's order.
constexpr GPUKernel kGPUKernels[] = {
    GPUKernel::LibraryGemm,   GPUKernel::WarpRows,
    GPUKernel::BlockColumns,  GPUKernel::FlashAttentionMma,
    GPUKernel::AttentionRows, GPUKernel::InAttention,
    GPUKernel::Loops};

/// The kernel's name in the report: library-gemm, warp-rows, ...
StringRef gpuKernelName(GPUKernel kernel);

struct GPUKernelChoice {
  GPUKernel kernel;
  /// A better kernel that `op` does not get, by name, and why; both empty
  /// when it gets the best there is.
  std::string better, whyNot;
};

/// The kernel `op` gets on the GPU, for the ops that have more than one;
/// none for the others (elementwise ops, copies: loops only). `narrow` is
/// the type --dtype lets the tensor cores read f32 operands in (null under
/// f32).
std::optional<GPUKernelChoice> chooseGPUKernel(Operation *op,
                                               Type narrow = Type());

/// Whether `op` gets `kernel`.
inline bool getsGPUKernel(Operation *op, GPUKernel kernel,
                          Type narrow = Type()) {
  std::optional<GPUKernelChoice> choice = chooseGPUKernel(op, narrow);
  return choice && choice->kernel == kernel;
}

/// The kernel a GEMM gets when it is generated: a library GEMM's fallback
/// (TFM_CUBLASLT=off, or no library on the machine) and every GEMM that
/// has no call. tfm-tile-gpu-matmul chooses it, on the contraction the
/// neutral lowering made, since it depends on the operands' layouts in
/// memory, which the memory plan fixes after chooseGPUKernel ran.
enum class GemmKernel {
  /// sm_90a: a warpgroup per 128 x 128 tile, wgmma reading tiles that TMA
  /// loads into shared memory (WgmmaGemm.cpp).
  WarpgroupTma,
  /// The same, its tiles copied by cp.async: operands TMA cannot load, or
  /// --gpu-tma=false.
  WarpgroupMma,
  /// 4 warps per 128 x 128 tile, ldmatrix and mma.sync on tiles staged by
  /// cp.async (StagedGemm.cpp).
  StagedMma,
  /// A warp per tile of up to 32 x 32, mma.sync on operands read from
  /// global memory (TileGPUMatmul.cpp).
  WarpMma,
  /// A thread per tile of outputs, in registers: f32, and GEMMs the
  /// tensor cores cannot take (TileGPUMatmul.cpp).
  RegisterTiles,
};

/// Every generated GEMM kernel, in the report's order.
constexpr GemmKernel kGemmKernels[] = {
    GemmKernel::WarpgroupTma, GemmKernel::WarpgroupMma, GemmKernel::StagedMma,
    GemmKernel::WarpMma, GemmKernel::RegisterTiles};

/// The kernel's name in the report: warpgroup-mma, staged-mma, ...
StringRef gemmKernelName(GemmKernel kernel);

/// The remark tfm-tile-gpu-matmul{remarks} gives each GEMM it tiles:
/// "tfm-gpu-gemm: <kernel>", then "; not <better>: <why>" where it misses
/// the best kernel the architecture (and --gpu-tma) has.
constexpr llvm::StringLiteral kGemmKernelRemarkPrefix = "tfm-gpu-gemm: ";

/// The remark tfm-lower-to-gpu{remarks} gives each op that has a choice:
/// "tfm-gpu-kernel: <op>: <kernel>", then "; not <better>: <why>" where
/// it misses one.
constexpr llvm::StringLiteral kGPUKernelRemarkPrefix = "tfm-gpu-kernel: ";

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOGPU_KERNELSTRATEGY_H
