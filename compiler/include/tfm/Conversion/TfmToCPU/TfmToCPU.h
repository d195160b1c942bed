//===- TfmToCPU.h - The oneDNN-backed CPU lowering --------------*- C++ -*-===//
//
// The CPU target: heavy ops (GEMMs, masked softmax, layer norm, the
// optimizers) become `tfm.kernel_call`s of runtime kernels backed by oneDNN
// primitives, which a session creates once from the descriptors
// (tfm-lower-kernel-calls collects them in `tfm.kernels` and turns each
// call into a call through `host->run_kernel`); everything else is the
// backend-neutral linalg of TfmToLinalg, which tfm-cpu-pipeline lowers to
// loops and LLVM. The CPU's layout rules let the plan keep transposes that
// feed or leave a GEMM, and the parts of a packed projection, as views.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOCPU_TFMTOCPU_H
#define TFM_CONVERSION_TFMTOCPU_TFMTOCPU_H

#include "tfm/Conversion/Common/OpLowering.h"
#include "tfm/Conversion/ComputeType.h"

namespace mlir::tfm {

/// One entry function of the CPU target.
class CPUEntry : public BufferizedEntry {
public:
  CPUEntry(func::FuncOp fn, ModuleLayout &layout, ComputeType computeType)
      : BufferizedEntry(Kind::CPU, fn, layout),
        linearDtype(computeType == ComputeType::BF16 ? TFM_DTYPE_BF16
                                                     : TFM_DTYPE_F32) {}

  static bool classof(const BufferizedEntry *e) {
    return e->getKind() == Kind::CPU;
  }

  StringRef targetName() const override { return "CPU"; }
  /// f32 through oneDNN's reorder (parallel and vectorized), else linalg.
  void copyView(const StridedView &from, const StridedView &to,
                Type elementType) override;

  /// The dtype of LINEAR kernels: F32, or BF16 for compute type bf16.
  int32_t linearKernelDtype() const { return linearDtype; }

private:
  int32_t linearDtype;
};

/// An attention the ATTENTION kernel computes, without its scores in
/// memory: f32, at most two batch dimensions, no empty operand. It reads
/// query, key and value and writes its result at any row strides.
bool usesAttentionKernel(AttentionOp op);

/// A rotary embedding that the ATTENTION kernel applies while it loads the
/// query or the keys, so that it is never stored (the plan computes it
/// inline): the one reader is such an attention, as its query or its keys;
/// the tables are f32 rows as wide as the head; and the keys' rotation
/// shares the query's tables when the query is rotated there too, since
/// the kernel takes one pair.
bool rotatesInAttentionKernel(RotaryOp op);

/// The dims of `op`'s tables as ATTENTION reads them, [T1, T2, S, D]: the
/// tables padded on the left to the rotated operand's rank and then to two
/// batch dimensions, each of T1, T2 and S either 1 or the operand's.
SmallVector<int64_t, 4> attentionTableDims(RotaryOp op);

/// A QKV projection computed as one GEMM into one packed buffer
/// [rows, Σsizes]; its results are column windows of that buffer.
bool isPackedQKV(QKVProjectionOp op);

/// Registers the CPU's layout rules with tfm-plan-memory and its lowerings
/// (target "cpu"). Idempotent.
void registerCPUTarget();

/// Adapts `fn(OpTy, CPUEntry &)` to an OpLoweringSet entry.
template <typename OpTy>
std::function<LogicalResult(OpTy, BufferizedEntry &)>
onCPU(LogicalResult (*fn)(OpTy, CPUEntry &)) {
  return [fn](OpTy op, BufferizedEntry &e) {
    return fn(op, cast<CPUEntry>(e));
  };
}

/// softmax(scale·x + mask) over the last axis of buffer `x` into `out`
/// (which may be `x`), on the MASKED_SOFTMAX kernel for f32; `op` is the op
/// being lowered, for diagnostics.
LogicalResult lowerCPUSoftmax(CPUEntry &e, Value x, Value mask, MaskKind kind,
                              double scale, bool causal, Value out,
                              Operation *op);

/// `mask` (a buffer) as the additive f32 mask the softmax and attention
/// kernels read: itself when it is one, else a converted temporary (0 or
/// -inf for a boolean mask).
Value additiveMask(CPUEntry &e, Value mask, MaskKind kind);

/// linear, matmul, QKV projections and attention on the GEMM kernels
/// (Gemm.cpp).
void populateCPUGemmLowerings(OpLoweringSet &set);
/// softmax, masked softmax, layer norm and its gradient (Normalization.cpp).
void populateCPUNormalizationLowerings(OpLoweringSet &set);
/// 2-D convolution on the oneDNN convolution kernel (Convolution.cpp).
void populateCPUConvolutionLowerings(OpLoweringSet &set);
/// SGD and Adam updates (Optimizer.cpp).
void populateCPUOptimizerLowerings(OpLoweringSet &set);

/// The backend-neutral lowerings, then the CPU's kernels over them.
void populateTfmToCPULowerings(OpLoweringSet &set);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOCPU_TFMTOCPU_H
