//===- GPUEntry.cpp - Entry functions of the GPU target -------------------===//

#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/Target/Symbols.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::populateTfmToGPULowerings(OpLoweringSet &set) {
  populateTfmToLinalgLowerings(set);
  populateGPUGemmLowerings(set);
  OpLoweringFn neutral = *set.lookup(AttentionOp::getOperationName());
  set.add<AttentionOp>([neutral](AttentionOp op, BufferizedEntry &e) {
    if (!fitsFlashAttention(op))
      return neutral(op.getOperation(), e);
    return lowerFlashAttention(op, e);
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

Type GPUEntry::gemmOperandType(Type elem) const {
  if (!elem.isF32())
    return elem;
  if (computeType == ComputeType::F16)
    return Float16Type::get(elem.getContext());
  if (computeType == ComputeType::BF16)
    return BFloat16Type::get(elem.getContext());
  return elem;
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

void GPUEntry::exitIfCheckFailed(int32_t check, Value first, Value flat) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  auto i64c = [&](OpBuilder &ob, Location l, int64_t v) -> Value {
    return ob.create<LLVM::ConstantOp>(l, i64, v);
  };
  // Reads `bytes` from the device at `src` into a new stack slot of `type`.
  auto read = [&](OpBuilder &ob, Location l, Type type, Value src,
                  int64_t bytes) {
    Value slot = ob.create<LLVM::AllocaOp>(l, ptrTy, type, i64c(ob, l, 1));
    ob.create<LLVM::StoreOp>(l, ob.create<LLVM::ZeroOp>(l, type), slot);
    Value rc = ob.create<func::CallOp>(l, kReadDeviceSymbol, TypeRange{i32},
                                       ValueRange{hostPointer(), slot, src,
                                                  i64c(ob, l, bytes)})
                   .getResult(0);
    return std::make_pair(slot, rc);
  };
  int64_t n = cast<MemRefType>(flat.getType()).getNumElements();
  auto [slot, rc] = read(b, loc, i64, devicePointer(first), 8);
  exitIfNonZero(rc);
  Value position = b.create<LLVM::LoadOp>(loc, i64, slot);
  Value found = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt,
                                        position, i64c(b, loc, n));
  Value indices = devicePointer(flat);
  Type elem = cast<MemRefType>(flat.getType()).getElementType();
  int64_t width = elem.getIntOrFloatBitWidth() / 8;
  exitIf(found, [&](OpBuilder &ob, Location l) -> Value {
    Value at = ob.create<LLVM::GEPOp>(
        l, ptrTy, ob.getI8Type(), indices,
        ValueRange{ob.create<LLVM::MulOp>(l, position, i64c(ob, l, width))});
    auto [valueSlot, readRc] = read(ob, l, elem, at, width);
    Value value = ob.create<LLVM::LoadOp>(l, elem, valueSlot);
    if (elem != i64)
      value = ob.create<arith::ExtSIOp>(l, i64, value);
    Value id = ob.create<arith::ConstantIntOp>(l, check, 32);
    Value status =
        ob.create<func::CallOp>(l, kCheckFailedSymbol, TypeRange{i32},
                                ValueRange{hostPointer(), id, position, value})
            .getResult(0);
    // A failed read is reported as itself, not as the check.
    Value readFailed = ob.create<arith::CmpIOp>(
        l, arith::CmpIPredicate::ne, readRc,
        ob.create<arith::ConstantIntOp>(l, 0, 32));
    return ob.create<arith::SelectOp>(l, readFailed, readRc, status);
  });
}
