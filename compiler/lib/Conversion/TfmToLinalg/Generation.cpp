//===- Generation.cpp - The generation caches as linalg -------------------===//
//
// A cache lives in the session state; the op's result is that slot, so the
// attention that reads the cache reads the state directly, and the write of
// the new rows is one copy into a window that starts at the run-time
// position.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

LogicalResult lowerCacheUpdate(CacheUpdateOp op, BufferizedEntry &e) {
  RankedTensorType value = op.getValue().getType(), cache = op.getType();
  int64_t axis = op.getAxis();
  int64_t room = cache.getDimSize(axis) - value.getDimSize(axis);
  // A position past the room would write past the slot.
  e.checkIndices(op, op.getPosition(), 0, room + 1);
  Value slot = e.bufferOf(op.getResult());
  Value at = e.b.create<memref::LoadOp>(e.loc, e.bufferOf(op.getPosition()),
                                        ValueRange{});
  SmallVector<OpFoldResult> offsets(cache.getRank(), e.b.getIndexAttr(0)),
      sizes, strides(cache.getRank(), e.b.getIndexAttr(1));
  offsets[axis] =
      e.b.create<arith::IndexCastOp>(e.loc, e.b.getIndexType(), at).getResult();
  for (int64_t d : value.getShape())
    sizes.push_back(e.b.getIndexAttr(d));
  Value window =
      e.b.create<memref::SubViewOp>(e.loc, slot, offsets, sizes, strides);
  e.copy(e.materialize(e.viewOf(op.getValue()), value.getElementType()),
         window);
  return success();
}

} // namespace

void mlir::tfm::populateGenerationLowerings(OpLoweringSet &set) {
  set.add<CacheUpdateOp>(lowerCacheUpdate);
}
