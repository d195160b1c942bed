//===- ShapeUtils.h - Axis arithmetic shared by the passes ------*- C++ -*-===//
//
// The passes that follow an axis through a model (tfm-derive-kv-cache,
// tfm-exact-padding) read shapes and axis attributes the same way.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TRANSFORMS_SHAPEUTILS_H
#define TFM_TRANSFORMS_SHAPEUTILS_H

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

/// The product of the first `n` sizes: the stride, in rows, of axis n - 1
/// once the axes before it are merged.
inline int64_t prefixProduct(ArrayRef<int64_t> shape, size_t n) {
  int64_t p = 1;
  for (size_t i = 0; i < n; ++i)
    p *= shape[i];
  return p;
}

/// Which of `rank` axes the (possibly negative) `axes` name.
inline SmallVector<bool> axisSet(ArrayRef<int64_t> axes, size_t rank) {
  SmallVector<bool> in(rank, false);
  for (int64_t a : axes)
    in[axisOf(a, rank)] = true;
  return in;
}

/// The axes of a matmul's operands: lhs [..., M, K] (or [..., K, M] when
/// transposed), rhs [..., K, N] (or [..., N, K]).
struct MatmulAxes {
  int64_t lhsRows, lhsSum, rhsSum, rhsColumns;
};
inline MatmulAxes matmulAxes(int64_t lhsRank, int64_t rhsRank,
                             bool transposeLhs, bool transposeRhs) {
  return {transposeLhs ? lhsRank - 1 : lhsRank - 2,
          transposeLhs ? lhsRank - 2 : lhsRank - 1,
          transposeRhs ? rhsRank - 1 : rhsRank - 2,
          transposeRhs ? rhsRank - 2 : rhsRank - 1};
}

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_SHAPEUTILS_H
