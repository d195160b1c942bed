//===- GPUEntry.cpp - Entry functions of the GPU target -------------------===//

#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/Target/Symbols.h"
#include "tfm/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::populateTfmToGPULowerings(OpLoweringSet &set) {
  populateTfmToLinalgLowerings(set);
  populateGPUGemmLowerings(set);
  OpLoweringFn neutralConv = *set.lookup(Conv2DOp::getOperationName());
  set.add<Conv2DOp>([neutralConv](Conv2DOp op, BufferizedEntry &e) {
    if (!getsGPUKernel(op, GPUKernel::LibraryGemm))
      return neutralConv(op.getOperation(), e);
    return lowerConv2DAsGemm(op, cast<GPUEntry>(e));
  });
  OpLoweringFn neutral = *set.lookup(AttentionOp::getOperationName());
  set.add<AttentionOp>([neutral](AttentionOp op, BufferizedEntry &e) {
    std::optional<GPUKernelChoice> choice =
        chooseGPUKernel(op, cast<GPUEntry>(e).narrowOperandType());
    if (choice->kernel == GPUKernel::FlashAttentionMma)
      return lowerFlashAttentionMma(op, e);
    if (choice->kernel == GPUKernel::AttentionRows)
      return lowerFlashAttention(op, e);
    return neutral(op.getOperation(), e);
  });
  OpLoweringFn neutralSoftmax = *set.lookup(SoftmaxOp::getOperationName());
  set.add<SoftmaxOp>([neutralSoftmax](SoftmaxOp op, BufferizedEntry &e) {
    if (!getsGPUKernel(op, GPUKernel::WarpRows))
      return neutralSoftmax(op.getOperation(), e);
    return lowerWarpSoftmax(e, op.getInput(), Value(), MaskKind::boolean, 1.0,
                            /*causal=*/false, op.getResult());
  });
  OpLoweringFn neutralMasked = *set.lookup(MaskedSoftmaxOp::getOperationName());
  set.add<MaskedSoftmaxOp>([neutralMasked](MaskedSoftmaxOp op,
                                           BufferizedEntry &e) {
    if (!getsGPUKernel(op, GPUKernel::WarpRows))
      return neutralMasked(op.getOperation(), e);
    return lowerWarpSoftmax(e, op.getInput(), op.getMask(), op.getMaskKind(),
                            op.getScale().convertToDouble(), op.getCausal(),
                            op.getResult());
  });
  OpLoweringFn neutralNormGrad =
      *set.lookup(LayerNormGradOp::getOperationName());
  set.add<LayerNormGradOp>(
      [neutralNormGrad](LayerNormGradOp op, BufferizedEntry &e) {
        if (!getsGPUKernel(op, GPUKernel::WarpRows))
          return neutralNormGrad(op.getOperation(), e);
        return lowerWarpLayerNormGrad(op, e);
      });
  OpLoweringFn neutralReduce = *set.lookup(ReduceOp::getOperationName());
  set.add<ReduceOp>([neutralReduce](ReduceOp op, BufferizedEntry &e) {
    if (!getsGPUKernel(op, GPUKernel::WarpRows))
      return neutralReduce(op.getOperation(), e);
    return lowerWarpRowReduction(op, e);
  });
  OpLoweringFn neutralLoss = *set.lookup(CrossEntropyOp::getOperationName());
  set.add<CrossEntropyOp>([neutralLoss](CrossEntropyOp op, BufferizedEntry &e) {
    if (!getsGPUKernel(op, GPUKernel::WarpRows))
      return neutralLoss(op.getOperation(), e);
    return lowerWarpCrossEntropy(op, e);
  });
  OpLoweringFn neutralLossGrad =
      *set.lookup(CrossEntropyGradOp::getOperationName());
  set.add<CrossEntropyGradOp>(
      [neutralLossGrad](CrossEntropyGradOp op, BufferizedEntry &e) {
        if (!getsGPUKernel(op, GPUKernel::WarpRows))
          return neutralLossGrad(op.getOperation(), e);
        return lowerWarpCrossEntropyGrad(op, e);
      });
  OpLoweringFn neutralNorm = *set.lookup(LayerNormOp::getOperationName());
  set.add<LayerNormOp>([neutralNorm](LayerNormOp op, BufferizedEntry &e) {
    if (!getsGPUKernel(op, GPUKernel::WarpRows))
      return neutralNorm(op.getOperation(), e);
    return lowerWarpLayerNorm(e, op.getInput(), Value(), op.getScale(),
                              op.getBias(), static_cast<int64_t>(op.getAxis()),
                              op.getEpsilon().convertToDouble(), op.getResult(),
                              Value());
  });
  OpLoweringFn neutralAddNorm = *set.lookup(AddLayerNormOp::getOperationName());
  set.add<AddLayerNormOp>([neutralAddNorm](AddLayerNormOp op,
                                           BufferizedEntry &e) {
    if (!getsGPUKernel(op, GPUKernel::WarpRows))
      return neutralAddNorm(op.getOperation(), e);
    return lowerWarpLayerNorm(e, op.getInput(), op.getResidual(), op.getScale(),
                              op.getBias(), static_cast<int64_t>(op.getAxis()),
                              op.getEpsilon().convertToDouble(), op.getOutput(),
                              op.getSum());
  });
}

bool mlir::tfm::readsByLoopsOrConstants(AffineMap map) {
  return llvm::all_of(map.getResults(), [](AffineExpr e) {
    return isa<AffineDimExpr, AffineConstantExpr>(e);
  });
}

SmallVector<Value> mlir::tfm::indicesAt(OpBuilder &b, Location loc,
                                        AffineMap map, ArrayRef<Value> loops) {
  SmallVector<Value> idx;
  for (AffineExpr e : map.getResults()) {
    if (auto cst = dyn_cast<AffineConstantExpr>(e))
      idx.push_back(b.create<arith::ConstantIndexOp>(loc, cst.getValue()));
    else
      idx.push_back(loops[cast<AffineDimExpr>(e).getPosition()]);
  }
  return idx;
}

scf::ParallelOp mlir::tfm::buildParallelLoop(
    OpBuilder &b, Location loc, ArrayRef<int64_t> trips,
    function_ref<void(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t t : trips) {
    lbs.push_back(b.create<arith::ConstantIndexOp>(loc, 0));
    ubs.push_back(b.create<arith::ConstantIndexOp>(loc, t));
    steps.push_back(b.create<arith::ConstantIndexOp>(loc, 1));
  }
  return b.create<scf::ParallelOp>(loc, lbs, ubs, steps, body);
}

StringRef mlir::tfm::ptxFeaturesOf(StringRef arch) {
  // The oldest PTX ISA that has each architecture, so that older drivers
  // load it: 7.0 brought sm_80, 7.8 sm_90, 8.0 sm_90a.
  return llvm::StringSwitch<StringRef>(arch)
      .Case("sm_80", "+ptx70")
      .Case("sm_86", "+ptx71")
      .Case("sm_89", "+ptx78")
      .Case("sm_90", "+ptx78")
      .Case("sm_90a", "+ptx80")
      .Default("");
}

Type mlir::tfm::narrowOperandType(ComputeType computeType, MLIRContext *ctx) {
  switch (computeType) {
  case ComputeType::F32:
    return {};
  case ComputeType::BF16:
    return BFloat16Type::get(ctx);
  case ComputeType::F16:
    return Float16Type::get(ctx);
  }
  llvm_unreachable("unknown compute type");
}

Type GPUEntry::gemmOperandType(Type elem) const {
  Type narrow = narrowOperandType();
  return elem.isF32() && narrow ? narrow : elem;
}

Value GPUEntry::devicePointer(Value buffer) {
  // From the buffer the view was cut from, plus the byte offset: the
  // aligned pointer of a memref.view folds to its source's.
  auto [base, offset] = placeOf(buffer);
  Value root = base ? base : buffer;
  Type i64 = b.getI64Type();
  Value address = b.create<arith::IndexCastOp>(
      loc, i64, b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, root));
  if (offset)
    address = b.create<arith::AddIOp>(
        loc, address, b.create<arith::ConstantIntOp>(loc, offset, 64));
  return b.create<LLVM::IntToPtrOp>(loc, LLVM::LLVMPointerType::get(ctx),
                                    address);
}

void GPUEntry::reportCheck(int32_t check, Value first, Value flat) {
  // The run goes on (every index is clamped into range); one thread writes
  // the outcome to the check's slot: the position and the value there, or
  // -1 and -1.
  Type i64 = b.getI64Type();
  auto flatType = cast<MemRefType>(flat.getType());
  int64_t n = flatType.getNumElements();
  Value slot = view(stateBuffer(),
                    layout.checkSlotsOffset + TFM_CHECK_SLOT_BYTES * check,
                    MemRefType::get({TFM_CHECK_SLOT_BYTES / 8}, i64));
  generic({first}, {AffineMap::get(1, 0, {}, ctx)}, slot,
          AffineMap::getMultiDimIdentityMap(1, ctx),
          {utils::IteratorType::parallel},
          [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
            auto c = [&](int64_t v) -> Value {
              return ob.create<arith::ConstantIntOp>(l, v, 64);
            };
            Value position = a[0];
            Value found = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt,
                                                   position, c(n));
            Value at = ob.create<arith::IndexCastOp>(
                l, ob.getIndexType(),
                ob.create<arith::MinSIOp>(l, position, c(n - 1)));
            Value value = ob.create<memref::LoadOp>(l, flat, ValueRange{at});
            if (value.getType() != i64)
              value = ob.create<arith::ExtSIOp>(l, i64, value);
            Value isPosition = ob.create<arith::CmpIOp>(
                l, arith::CmpIPredicate::eq, ob.create<linalg::IndexOp>(l, 0),
                ob.create<arith::ConstantIndexOp>(l, 0));
            Value outcome =
                ob.create<arith::SelectOp>(l, isPosition, position, value);
            return ob.create<arith::SelectOp>(l, found, outcome, c(-1));
          });
}
