//===- CPUFolding.cpp - Layout decisions shared by planner and lowering ---===//

#include "tfm/Transforms/CPUFolding.h"

using namespace mlir;
using namespace mlir::tfm;

int64_t mlir::tfm::bufferBytes(ShapedType type) {
  int64_t bits = type.getElementTypeBitWidth();
  return type.getNumElements() * (bits == 1 ? 8 : bits) / 8;
}

bool mlir::tfm::movesOnlyUnitDims(TransposeOp op) {
  auto shape = op.getInput().getType().getShape();
  int64_t last = -1;
  for (int64_t p : op.getPermutation()) {
    if (shape[p] == 1)
      continue;
    if (p < last)
      return false;
    last = p;
  }
  return true;
}

bool mlir::tfm::isStridedMatmul(MatmulOp op) {
  auto lt = op.getLhs().getType(), rt = op.getRhs().getType();
  auto ot = op.getType();
  if (!lt.getElementType().isF32() || lt.getRank() != rt.getRank() ||
      lt.getRank() != ot.getRank() || ot.getRank() > 4 ||
      ot.getNumElements() == 0 ||
      lt.getNumElements() == 0 || rt.getNumElements() == 0)
    return false;
  return lt.getShape().drop_back(2) == ot.getShape().drop_back(2) &&
         rt.getShape().drop_back(2) == ot.getShape().drop_back(2);
}

bool mlir::tfm::foldsIntoMatmulResult(TransposeOp op) {
  if (movesOnlyUnitDims(op))
    return false;
  auto mm = op.getInput().getDefiningOp<MatmulOp>();
  return mm && isStridedMatmul(mm) && mm->hasOneUse() &&
         mm->getNextNode() == op.getOperation();
}

bool mlir::tfm::foldsIntoMatmulOperand(TransposeOp op) {
  if (movesOnlyUnitDims(op) || foldsIntoMatmulResult(op) ||
      op.getResult().use_empty())
    return false;
  for (Operation *user : op->getUsers()) {
    auto mm = dyn_cast<MatmulOp>(user);
    if (!mm || !isStridedMatmul(mm))
      return false;
  }
  return true;
}

bool mlir::tfm::computedInsideSelects(CompareOp op) {
  if (op->use_empty())
    return false;
  for (OpOperand &use : op->getUses()) {
    auto sel = dyn_cast<SelectOp>(use.getOwner());
    if (!sel || use.getOperandNumber() != 0 ||
        sel.getType() != op.getType().clone(sel.getType().getElementType()))
      return false;
  }
  return true;
}

bool mlir::tfm::isPackedQKV(QKVProjectionOp op) {
  auto in = op.getInput().getType();
  return in.getElementType().isF32() && in.getNumElements() > 0 &&
         op.getWeight().getType().getNumElements() > 0;
}

/// The input of a reshape, or of a transpose lowered as one; else null.
static Value reshapedFrom(Value v) {
  if (auto r = v.getDefiningOp<ReshapeOp>())
    return r.getInput();
  if (auto t = v.getDefiningOp<TransposeOp>(); t && movesOnlyUnitDims(t))
    return t.getInput();
  return {};
}

bool mlir::tfm::reshapeKeepsView(ReshapeOp op) {
  Value in = op.getInput();
  while (Value from = reshapedFrom(in))
    in = from;
  auto qkv = in.getDefiningOp<QKVProjectionOp>();
  if (!qkv || !isPackedQKV(qkv))
    return true;
  int64_t columns = cast<RankedTensorType>(in.getType()).getShape().back();
  // Walk back along the chain: each step must end in dimensions whose
  // product is exactly the window's width.
  for (Value v = op.getResult(); v != in; v = reshapedFrom(v)) {
    auto shape = cast<RankedTensorType>(v.getType()).getShape();
    int64_t trailing = 1;
    bool boundary = columns == 1;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1;
         d >= 0 && trailing < columns; --d) {
      trailing *= shape[d];
      boundary = trailing == columns;
    }
    if (!boundary)
      return false;
  }
  return true;
}
