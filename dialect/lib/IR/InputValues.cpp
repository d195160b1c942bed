//===- InputValues.cpp - What values a model takes at an input ------------===//

#include "tfm/IR/InputValues.h"
#include "tfm/IR/TfmOps.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Whether `op` passes its operand's values on unchanged (the same values,
/// moved, repeated or cut) to its results.
bool carriesValues(Operation *op) {
  if (auto cast = dyn_cast<CastOp>(op))
    return !isa<FloatType>(cast.getResult().getType().getElementType());
  return isa<ReshapeOp, TransposeOp, BroadcastOp, SliceOp, ConcatOp, SplitOp>(
      op);
}

/// Whether `use` reads its values as a mask's: cast to a float, compared,
/// or selected on.
bool readsAsMask(OpOperand &use) {
  Operation *op = use.getOwner();
  if (auto cast = dyn_cast<CastOp>(op))
    return isa<FloatType>(cast.getResult().getType().getElementType());
  if (auto select = dyn_cast<SelectOp>(op))
    return use.get() == select.getCondition();
  return isa<CompareOp>(op);
}

} // namespace

std::optional<std::pair<int64_t, int64_t>>
mlir::tfm::indexRangeOf(OpOperand &use) {
  Operation *op = use.getOwner();
  auto dim = [](Value v, int64_t axis) {
    return cast<ShapedType>(v.getType()).getDimSize(axis);
  };
  if (auto e = dyn_cast<EmbeddingOp>(op))
    if (&use == &e.getIndicesMutable())
      return std::pair<int64_t, int64_t>{0, dim(e.getTable(), 0)};
  if (auto g = dyn_cast<GatherOp>(op))
    if (&use == &g.getIndicesMutable()) {
      int64_t axis = g.getAxis();
      if (axis < 0)
        axis += g.getInput().getType().getRank();
      // Negative indices count from the end.
      int64_t n = dim(g.getInput(), axis);
      return std::pair<int64_t, int64_t>{-n, n};
    }
  auto classes = [&](Value logits) {
    return std::pair<int64_t, int64_t>{
        0, cast<ShapedType>(logits.getType()).getShape().back()};
  };
  if (auto c = dyn_cast<CrossEntropyOp>(op))
    if (&use == &c.getLabelsMutable())
      return classes(c.getLogits());
  if (auto c = dyn_cast<CrossEntropyGradOp>(op))
    if (&use == &c.getLabelsMutable())
      return classes(c.getLogits());
  if (auto u = dyn_cast<CacheUpdateOp>(op))
    if (&use == &u.getPositionMutable()) {
      // A position past the room would write past the slot.
      int64_t room =
          dim(u.getResult(), u.getAxis()) - dim(u.getValue(), u.getAxis());
      return std::pair<int64_t, int64_t>{0, room + 1};
    }
  return std::nullopt;
}

InputValues mlir::tfm::inputValuesOf(BlockArgument input) {
  InputValues values;
  auto type = dyn_cast<ShapedType>(input.getType());
  if (!type || !type.getElementType().isIntOrIndex())
    return values;
  bool mask = type.getElementType().isInteger(1);
  bool indices = false;
  SmallVector<Value> work{input};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *op = use.getOwner();
      if (auto range = indexRangeOf(use)) {
        values.lower =
            indices ? std::max(values.lower, range->first) : range->first;
        values.upper =
            indices ? std::min(values.upper, range->second) : range->second;
        indices = true;
      } else if (readsAsMask(use)) {
        mask = true;
      } else if (carriesValues(op) && seen.insert(op).second) {
        for (Value r : op->getResults())
          work.push_back(r);
      }
    }
  }
  // Ops that disagree leave no index every one accepts.
  if (indices && values.lower < values.upper)
    values.kind = TFM_INPUT_VALUES_INDICES;
  else if (mask)
    values.kind = TFM_INPUT_VALUES_MASK;
  else
    values = InputValues();
  return values;
}
