//===- Rotary.cpp - Rotary position embeddings as linalg ------------------===//
//
// tfm.rotary pairs the elements of the last axis: i with i + h (rotate_half)
// or 2j with 2j + 1 (interleaved). Each half of the pairs is one
// elementwise pass over strided windows of the last axis, the first
// `x·cos - x'·sin`, the second `x·cos + x'·sin` with x' the partner: two
// passes where the exporter's form takes seven ops and a concatenation.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The first (`second` false) or second elements of the pairs of
/// `buffer`'s last axis; a table broadcast along it (width 1, or a scalar,
/// as the gradient's are) is itself.
Value pairHalf(BufferizedEntry &e, Value buffer, bool interleaved,
               bool second) {
  auto type = cast<MemRefType>(buffer.getType());
  int64_t rank = type.getRank();
  if (rank == 0 || type.getShape().back() == 1)
    return buffer;
  int64_t width = type.getShape().back();
  SmallVector<OpFoldResult> offsets(rank, e.b.getIndexAttr(0)),
      strides(rank, e.b.getIndexAttr(1)), sizes;
  for (int64_t d : type.getShape())
    sizes.push_back(e.b.getIndexAttr(d));
  sizes.back() = e.b.getIndexAttr(width / 2);
  offsets.back() = e.b.getIndexAttr(second ? (interleaved ? 1 : width / 2) : 0);
  strides.back() = e.b.getIndexAttr(interleaved ? 2 : 1);
  return e.b.create<memref::SubViewOp>(e.loc, buffer, offsets, sizes, strides);
}

LogicalResult lowerRotary(RotaryOp op, BufferizedEntry &e) {
  Value out = e.stridedDestination(op.getResult());
  if (!out)
    return failure();
  emitRotary(e, e.bufferOf(op.getInput()), e.bufferOf(op.getCos()),
             e.bufferOf(op.getSin()), op.getInterleaved(), out);
  return success();
}

} // namespace

void mlir::tfm::emitRotary(
    BufferizedEntry &e, Value x, Value cos, Value sin, bool interleaved,
    Value out, llvm::function_ref<Value(OpBuilder &, Location, Value)> finish) {
  for (bool second : {false, true}) {
    Value own = pairHalf(e, x, interleaved, second),
          partner = pairHalf(e, x, interleaved, !second);
    e.elementwise(
        {own, partner, pairHalf(e, cos, interleaved, second),
         pairHalf(e, sin, interleaved, second)},
        pairHalf(e, out, interleaved, second),
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value direct = b.create<arith::MulFOp>(l, a[0], a[2]);
          Value turned = b.create<arith::MulFOp>(l, a[1], a[3]);
          Value rotated =
              second ? b.create<arith::AddFOp>(l, direct, turned).getResult()
                     : b.create<arith::SubFOp>(l, direct, turned).getResult();
          return finish ? finish(b, l, rotated) : rotated;
        });
  }
}

void mlir::tfm::populateRotaryLowerings(OpLoweringSet &set) {
  set.add<RotaryOp>(lowerRotary);
}
