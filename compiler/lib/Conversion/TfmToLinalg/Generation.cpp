//===- Generation.cpp - The generation caches as linalg -------------------===//
//
// A cache lives in the session state; the op's result is that slot, so the
// attention that reads the cache reads the state directly, and the write of
// the new rows is one copy into a window that starts at the run-time
// position.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/IR/InputValues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

LogicalResult lowerCacheUpdate(CacheUpdateOp op, BufferizedEntry &e) {
  RankedTensorType value = op.getValue().getType();
  int64_t axis = op.getAxis();
  // A position past the room would write past the slot.
  auto [lower, upper] = *indexRangeOf(op.getPositionMutable());
  if (failed(e.checkIndices(op, op.getPosition(), lower, upper)))
    return failure();
  int64_t room = upper - 1;
  if (value.getNumElements() == 0)
    return success();
  Value slot = e.bufferOf(op.getResult());
  Value position = e.bufferOf(op.getPosition());
  Value src = e.materialize(e.viewOf(op.getValue()), value.getElementType());
  // Each element to its place, the position read where the element is
  // written (on a GPU, in the kernel: the host cannot read device memory)
  // and clamped into the room, so that a position the check rejects, when
  // the run goes on past it, still writes inside the cache.
  OpBuilder &b = e.b;
  Location loc = e.loc;
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d : value.getShape()) {
    lbs.push_back(b.create<arith::ConstantIndexOp>(loc, 0));
    ubs.push_back(b.create<arith::ConstantIndexOp>(loc, d));
    steps.push_back(b.create<arith::ConstantIndexOp>(loc, 1));
  }
  b.create<scf::ParallelOp>(
      loc, lbs, ubs, steps, [&](OpBuilder &ob, Location l, ValueRange ivs) {
        Value raw = ob.create<memref::LoadOp>(l, position, ValueRange{});
        Value at = ob.create<arith::IndexCastOp>(l, ob.getIndexType(), raw);
        at = ob.create<arith::MaxSIOp>(l, at,
                                       ob.create<arith::ConstantIndexOp>(l, 0));
        at = ob.create<arith::MinSIOp>(
            l, at, ob.create<arith::ConstantIndexOp>(l, room));
        SmallVector<Value> dst(ivs.begin(), ivs.end());
        dst[axis] = ob.create<arith::AddIOp>(l, at, ivs[axis]);
        Value v = ob.create<memref::LoadOp>(l, src, ivs);
        ob.create<memref::StoreOp>(l, v, slot, dst);
      });
  return success();
}

} // namespace

void mlir::tfm::populateGenerationLowerings(OpLoweringSet &set) {
  set.add<CacheUpdateOp>(lowerCacheUpdate);
}
