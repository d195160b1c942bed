//===- CheckVectorAlignment.cpp - tfm-check-vector-alignment --------------===//
//
// A vector access that tfm-vectorize-gpu-loops or an attention kernel marks
// `tfm.alignment` becomes, on the GPU, a load or store that faults when its
// address is not that multiple; the CPU, which the emulation runs on,
// would take it silently. So that every check of the GPU schedule on the
// CPU tests the alignment proofs as well as the values, a marked access
// at an address off its claim reads, or writes, poison there (NaN; for
// integers the emulation's 0x5eed5eed), which the value checks then show,
// as the emulation shows its other faults.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_CHECKVECTORALIGNMENTPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Whether `memref[indices]` lies at a multiple of `align` bytes,
/// computed before `b`'s point.
Value isAligned(OpBuilder &b, Location loc, Value memref, ValueRange indices,
                int64_t align) {
  auto type = cast<MemRefType>(memref.getType());
  auto metadata = b.create<memref::ExtractStridedMetadataOp>(loc, memref);
  Value element = metadata.getOffset();
  for (auto [index, stride] : llvm::zip(indices, metadata.getStrides()))
    element = b.create<arith::AddIOp>(
        loc, element, b.create<arith::MulIOp>(loc, index, stride));
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  Value address = b.create<arith::AddIOp>(
      loc, b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, memref),
      b.create<arith::MulIOp>(loc, element,
                              b.create<arith::ConstantIndexOp>(loc, bytes)));
  Value off = b.create<arith::RemUIOp>(
      loc, address, b.create<arith::ConstantIndexOp>(loc, align));
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, off,
                                 b.create<arith::ConstantIndexOp>(loc, 0));
}

/// A vector of `type` that a value check cannot take for a result.
Value poison(OpBuilder &b, Location loc, VectorType type) {
  Type element = type.getElementType();
  TypedAttr value;
  if (auto f = dyn_cast<FloatType>(element))
    value = b.getFloatAttr(f, APFloat::getNaN(f.getFloatSemantics()));
  else
    value = b.getIntegerAttr(element, 0x5eed5eed);
  return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(type, value));
}

struct CheckVectorAlignmentPass
    : public mlir::tfm::impl::CheckVectorAlignmentPassBase<
          CheckVectorAlignmentPass> {
  void runOnOperation() override {
    getOperation()->walk([](Operation *op) {
      auto align = op->getAttrOfType<IntegerAttr>(kVectorAlignmentAttrName);
      if (!align)
        return;
      Location loc = op->getLoc();
      OpBuilder b(op);
      if (auto load = dyn_cast<vector::LoadOp>(op)) {
        Value aligned = isAligned(b, loc, load.getBase(), load.getIndices(),
                                  align.getInt());
        b.setInsertionPointAfter(load);
        auto shown =
            b.create<arith::SelectOp>(loc, aligned, load.getResult(),
                                      poison(b, loc, load.getVectorType()));
        load.getResult().replaceAllUsesExcept(shown, shown);
      } else if (auto store = dyn_cast<vector::StoreOp>(op)) {
        Value aligned = isAligned(b, loc, store.getBase(), store.getIndices(),
                                  align.getInt());
        store.getValueToStoreMutable().assign(
            b.create<arith::SelectOp>(loc, aligned, store.getValueToStore(),
                                      poison(b, loc, store.getVectorType())));
      }
    });
  }
};

} // namespace
