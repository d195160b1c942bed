//===- Gemm.cpp - GEMMs on the GPU through the runtime's library ----------===//
//
// A linear, each part of a QKV projection, and a matmul that BATCH_MATMUL
// reads become kernel calls that the CUDA device runs in cuBLASLt, bias and
// ReLU or tanh-GELU fused into the call's epilogue. Each call carries the
// generated GEMM (TfmToLinalg's) as its fallback, which runs where the
// session declines the call: no library on the machine, a GEMM the library
// cannot express, or TFM_CUBLASLT=off. An activation the library has no
// epilogue for is applied after the call, on either path.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// A linear or a part of a projection: one LINEAR call, the activation
/// in its epilogue where cuBLASLt has one and after it where not.
void lowerLinear(GPUEntry &e, Value input, Value weight, Value bias,
                 int64_t rowOffset, Activation act, Value result) {
  bool fused = TFM_CUDA_LINEAR_FUSES_ACTIVATION(abiActivation(act));
  lowerLinearKernel(e, input, weight, bias, rowOffset,
                    fused ? act : Activation::none, e.destination(result),
                    e.gemmKernelDtype(),
                    /*narrowOperands=*/bool(e.narrowOperandType()),
                    /*withFallback=*/true);
  if (fused)
    return;
  Value out = e.destination(result);
  e.elementwise({out}, out, [&](OpBuilder &ob, Location l, ValueRange a) {
    return applyActivation(ob, l, act, a[0]);
  });
}

/// The row-major strides of `shape`, the last two exchanged (and the
/// shape's with them) when `transposed`: a dense operand read as op().
StridedView denseView(Value buffer, bool transposed) {
  auto shape = cast<MemRefType>(buffer.getType()).getShape();
  StridedView v{buffer, 0, SmallVector<int64_t>(shape), rowMajorStrides(shape)};
  if (transposed) {
    size_t r = shape.size();
    std::swap(v.shape[r - 1], v.shape[r - 2]);
    std::swap(v.strides[r - 1], v.strides[r - 2]);
  }
  return v;
}

LogicalResult lowerMatmul(MatmulOp op, GPUEntry &e) {
  auto lt = op.getLhs().getType(), rt = op.getRhs().getType();
  auto ls = lt.getShape(), os = op.getType().getShape();
  int64_t n = os.back();
  int64_t k = op.getTransposeLhs() ? ls[ls.size() - 2] : ls.back();
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
  // The fallback's operands, materialized here: a strided view's memref
  // is made once, and must dominate every later use.
  Value lhs = e.bufferOf(op.getLhs()), rhs = e.bufferOf(op.getRhs());
  Value out = e.destination(op.getResult());
  // Under bf16 and f16 the library reads its operands in that type, as
  // PyTorch's GEMMs do: half the bytes of f32 operands, and its fastest
  // kernels.
  Type narrow = isF32(lt) && isF32(rt) ? e.narrowOperandType() : Type();
  auto own = [&] { lowerGenericMatmul(e, lhs, rhs, tl, tr, out); };
  if (isStridedMatmul(op)) {
    auto shape = op.getType().getShape();
    StridedView c{out, 0, SmallVector<int64_t>(shape), rowMajorStrides(shape)};
    if (!narrow) {
      auto [a, bv] = e.matmulOperandViews(op);
      e.batchMatmul(a, bv, c, e.gemmKernelDtype(), own);
      return success();
    }
    // Rounded into dense copies (a weight at compile time), which the
    // fallback reads too.
    lhs = e.narrowed(lhs, narrow);
    rhs = e.narrowed(rhs, narrow);
    e.batchMatmul(denseView(lhs, tl), denseView(rhs, tr), c,
                  e.gemmKernelDtype(), own);
    return success();
  }
  if (matmulHasSharedRightOperand(op)) {
    // A shared right operand: the batch folded into the rows.
    int64_t rows = product(ls.drop_back());
    Value a = e.denseOf(op.getLhs()), bv = e.denseOf(op.getRhs());
    if (narrow) {
      lhs = a = e.narrowed(a, narrow);
      rhs = bv = e.narrowed(bv, narrow);
    }
    e.batchMatmul({a, 0, {rows, k}, {k, 1}}, denseView(bv, tr),
                  {out, 0, {rows, n}, {n, 1}}, e.gemmKernelDtype(), own);
    return success();
  }
  own();
  return success();
}

LogicalResult lowerQKV(QKVProjectionOp op, GPUEntry &e) {
  // One GEMM per part over consecutive weight rows.
  int64_t row = 0;
  for (auto [r, size] : llvm::zip(op.getResults(), op.getSizes())) {
    lowerLinear(e, op.getInput(), op.getWeight(), op.getBias(), row,
                Activation::none, r);
    row += size;
  }
  return success();
}

} // namespace

bool mlir::tfm::matmulHasSharedRightOperand(MatmulOp op) {
  auto lt = op.getLhs().getType(), rt = op.getRhs().getType();
  ArrayRef<int64_t> ls = lt.getShape(), os = op.getType().getShape();
  int64_t m = os[os.size() - 2], n = os.back();
  int64_t k = op.getTransposeLhs() ? ls[ls.size() - 2] : ls.back();
  return isF32(lt) && !op.getTransposeLhs() && m > 0 && n > 0 && k > 0 &&
         rt.getRank() == 2;
}

bool mlir::tfm::readsGemmOperandNarrow(OpOperand &use) {
  Operation *op = use.getOwner();
  auto f32 = [](Value v) { return isF32(cast<RankedTensorType>(v.getType())); };
  if (auto linear = dyn_cast<LinearOp>(op))
    return use.get() == linear.getWeight() && &use != &op->getOpOperand(0) &&
           f32(linear.getInput()) && f32(linear.getResult());
  if (auto qkv = dyn_cast<QKVProjectionOp>(op))
    return use.get() == qkv.getWeight() && &use != &op->getOpOperand(0) &&
           f32(qkv.getInput()) &&
           llvm::all_of(qkv.getResults(), [&](Value r) { return f32(r); });
  if (auto gated = dyn_cast<GatedLinearOp>(op))
    return use.get() == gated.getWeight() && &use != &op->getOpOperand(0) &&
           f32(gated.getInput()) && f32(gated.getResult());
  if (auto mm = dyn_cast<MatmulOp>(op))
    return f32(mm.getLhs()) && f32(mm.getRhs()) && f32(mm.getResult());
  if (auto conv = dyn_cast<Conv2DOp>(op))
    return use.get() == conv.getWeight() && &use != &op->getOpOperand(0) &&
           getsGPUKernel(conv, GPUKernel::LibraryGemm);
  return false;
}

int32_t GPUEntry::gemmKernelDtype() const {
  switch (computeType) {
  case ComputeType::F32:
    return TFM_DTYPE_F32;
  case ComputeType::BF16:
    return TFM_DTYPE_BF16;
  case ComputeType::F16:
    return TFM_DTYPE_F16;
  }
  llvm_unreachable("unknown compute type");
}

void mlir::tfm::populateGPUGemmLowerings(OpLoweringSet &set) {
  set.add<LinearOp>([](LinearOp op, BufferizedEntry &e) {
    lowerLinear(cast<GPUEntry>(e), op.getInput(), op.getWeight(), op.getBias(),
                0, op.getActivation(), op.getResult());
    return success();
  });
  set.add<MatmulOp>([](MatmulOp op, BufferizedEntry &e) {
    return lowerMatmul(op, cast<GPUEntry>(e));
  });
  set.add<QKVProjectionOp>([](QKVProjectionOp op, BufferizedEntry &e) {
    return lowerQKV(op, cast<GPUEntry>(e));
  });
  set.add<GatedLinearOp>([](GatedLinearOp op, BufferizedEntry &e) {
    auto &gpu = cast<GPUEntry>(e);
    lowerGatedLinearKernel(e, op, gpu.gemmKernelDtype(),
                           /*narrowOperands=*/bool(gpu.narrowOperandType()),
                           /*withFallback=*/true);
    return success();
  });
}
