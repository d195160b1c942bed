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
#include "tfm/abi.h"

namespace mlir::tfm {

/// A pointer argument of a kernel call: a buffer and an element offset
/// into it, or nothing (NULL).
struct KernelArg {
  Value buffer;
  int64_t elementOffset = 0;
  KernelArg() = default;
  KernelArg(Value buffer, int64_t offset = 0)
      : buffer(buffer), elementOffset(offset) {}
};

/// The aligned pointer of `buffer`, a view of an entry's argument, as an
/// index: the argument's plus the byte shifts of the memref.views between
/// (the strided-metadata expansion folds a view's aligned pointer to its
/// source's, and so would drop the shift). A reinterpret_cast keeps its
/// source's pointer, and with `throughOffsetViews` so do subviews and
/// reshapes, whose offset the result type holds. Kernels take their
/// buffers dense, at offsets of their own: they leave it false.
FailureOr<Value> alignedAddressOf(OpBuilder &b, Location loc, Value buffer,
                                  bool throughOffsetViews);

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

  /// Calls kernel `kind` (a tfm_kernel_kind_t) on `args`; the run stops if
  /// it fails.
  void callKernel(int32_t kind, ArrayRef<int64_t> params,
                  ArrayRef<double> fparams, ArrayRef<KernelArg> args,
                  ArrayRef<int64_t> strides = {},
                  int32_t dtype = TFM_DTYPE_F32);
  /// c = a · b on views [.., M, K], [.., K, N], [.., M, N] with at most two
  /// batch dimensions, through BATCH_MATMUL.
  void batchMatmul(const StridedView &a, const StridedView &bv,
                   const StridedView &c);
  /// The dtype of LINEAR kernels: F32, or BF16 for compute type bf16.
  int32_t linearKernelDtype() const { return linearDtype; }

private:
  int32_t linearDtype;
};

/// A matmul the BATCH_MATMUL kernel runs with strided operands and result:
/// f32, equal ranks of 2 to 4 and equal batch dimensions, no empty
/// dimension. A transposed operand is the same buffer read with swapped
/// strides, which is how the backward pass's weight and attention gradients
/// (Xᵀ·dY, dSᵀ·Q) reach the kernel without a copy.
bool isStridedMatmul(MatmulOp op);

/// An attention the ATTENTION kernel computes, without its scores in
/// memory: f32, at most two batch dimensions, no empty operand. It reads
/// query, key and value and writes its result at any row strides.
bool usesAttentionKernel(AttentionOp op);

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
