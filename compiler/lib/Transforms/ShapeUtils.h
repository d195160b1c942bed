//===- ShapeUtils.h - Axis arithmetic shared by the passes ------*- C++ -*-===//
//
// The passes that follow an axis through a model (tfm-derive-kv-cache,
// tfm-exact-padding) read shapes and axis attributes the same way; how
// each op maps axes is its AxisMapOpInterface (tfm/IR/AxisMap.h).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TRANSFORMS_SHAPEUTILS_H
#define TFM_TRANSFORMS_SHAPEUTILS_H

#include "tfm/IR/TfmOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

namespace mlir::tfm {

/// The shape of a ranked tensor value.
inline ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// An axis attribute (possibly negative) as an index into `rank` axes.
inline int64_t axisOf(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

/// The axis map of `op`; where it has none, fails through `fail` with the
/// reason, which both passes give alike.
inline FailureOr<AxisMap>
axisMapOf(Operation &op, llvm::function_ref<LogicalResult(const Twine &)> fail) {
  auto mapped = dyn_cast<AxisMapOpInterface>(op);
  if (!mapped) {
    (void)fail("'" + op.getName().getStringRef() +
               "' has no rule for how its results' axes follow its "
               "operands' (AxisMapOpInterface)");
    return failure();
  }
  return mapped.getAxisMap();
}

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_SHAPEUTILS_H
