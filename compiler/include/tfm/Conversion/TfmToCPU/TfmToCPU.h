//===- TfmToCPU.h - The oneDNN-backed CPU lowering --------------*- C++ -*-===//
//
// The CPU target: heavy ops (GEMMs, masked softmax, layer norm, the
// optimizers) become calls through `host->run_kernel` to runtime kernels
// backed by oneDNN primitives, which a session creates once from the
// descriptors the module collects in `tfm.kernels`; everything else is the
// backend-neutral linalg of TfmToLinalg, which tfm-cpu-pipeline lowers to
// loops and LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOCPU_TFMTOCPU_H
#define TFM_CONVERSION_TFMTOCPU_TFMTOCPU_H

#include "tfm/Conversion/Common/OpLowering.h"
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

/// The module's kernel descriptors, one per distinct configuration.
struct KernelTable {
  SmallVector<Attribute> descs;
  DenseMap<Attribute, int32_t> indexOf;

  /// The index of the descriptor, or -1 when its arrays do not fit the
  /// ABI's (an internal error of the lowering).
  int32_t add(MLIRContext *ctx, int32_t kind, ArrayRef<int64_t> params,
              ArrayRef<double> fparams, ArrayRef<int64_t> strides,
              int32_t dtype);
};

/// One entry function of the CPU target.
class CPUEntry : public BufferizedEntry {
public:
  CPUEntry(func::FuncOp fn, WeightsLayout &weights, StateLayout &state,
           KernelTable &kernels, bool bf16)
      : BufferizedEntry(Kind::CPU, fn, weights, state), kernels(kernels),
        linearDtype(bf16 ? TFM_DTYPE_BF16 : TFM_DTYPE_F32) {}

  static bool classof(const BufferizedEntry *e) {
    return e->getKind() == Kind::CPU;
  }

  StringRef targetName() const override { return "CPU"; }
  /// f32 through oneDNN's reorder (parallel and vectorized), else linalg.
  void copyView(const StridedView &from, const StridedView &to,
                Type elementType) override;

  /// Calls kernel `kind` (a tfm_kernel_kind_t) on `args`.
  void callKernel(int32_t kind, ArrayRef<int64_t> params,
                  ArrayRef<double> fparams, ArrayRef<KernelArg> args,
                  ArrayRef<int64_t> strides = {},
                  int32_t dtype = TFM_DTYPE_F32);
  /// c = a · b on views [.., M, K], [.., K, N], [.., M, N] with at most two
  /// batch dimensions, through BATCH_MATMUL.
  void batchMatmul(const StridedView &a, const StridedView &bv,
                   const StridedView &c);
  /// The dtype of LINEAR kernels: F32, or BF16 with --dtype=bf16.
  int32_t linearKernelDtype() const { return linearDtype; }

protected:
  LogicalResult beginEntry() override;
  LogicalResult endOp(Operation *op) override;
  Value returnCode() override { return errorCode; }

private:
  KernelTable &kernels;
  int32_t linearDtype;
  Value argsArray, errorCode;
  // Set when a kernel call could not be described (reported already).
  bool kernelCallFailed = false;
};

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

/// linear, matmul, QKV projections and attention on the GEMM kernels
/// (Gemm.cpp).
void populateCPUGemmLowerings(OpLoweringSet &set);
/// softmax, masked softmax, layer norm and its gradient (Normalization.cpp).
void populateCPUNormalizationLowerings(OpLoweringSet &set);
/// SGD and Adam updates (Optimizer.cpp).
void populateCPUOptimizerLowerings(OpLoweringSet &set);

/// The backend-neutral lowerings, then the CPU's kernels over them.
void populateTfmToCPULowerings(OpLoweringSet &set);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOCPU_TFMTOCPU_H
