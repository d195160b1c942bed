//===- ConstantData.h - Building large constants with one copy -*- C++ -*-===//
//
// Weights rearranged at compile time (transposed for tfm.linear, stacked
// for tfm.qkv_projection), built in a reused buffer that the attribute then
// copies: a large model's weights fault in fresh pages once, not twice.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_CONSTANTDATA_H
#define TFM_IR_CONSTANTDATA_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::tfm {

/// The bytes one element of `elem` (an integer or float type) takes in a
/// buffer, and in a constant's raw data but for i1 (bit-packed there):
/// types narrower than a byte (i1, i4) take a whole one.
inline size_t elementBytes(Type elem) {
  unsigned bits = elem.getIntOrFloatBitWidth();
  return bits < 8 ? 1 : bits / 8;
}

/// A constant weight [K, N] transposed to [N, K], as tfm.linear wants it.
DenseElementsAttr transpose2D(DenseElementsAttr weight);

/// The [N, K] constant of the row-major bytes `raw` of a [K, N] tensor of
/// `type`, whose elements are a whole number of bytes wide.
DenseElementsAttr transpose2D(RankedTensorType type, ArrayRef<char> raw);

/// Constants stacked along dimension 0 (all share the other dimensions).
DenseElementsAttr concatRows(ArrayRef<DenseElementsAttr> parts);

/// The constant `input` sliced as tfm.slice does: along dimension d, result
/// index i reads input index starts[d] + i * steps[d], for i < sizes[d].
/// The caller has checked that every index read is in range.
DenseElementsAttr sliceConstant(DenseElementsAttr input,
                                ArrayRef<int64_t> starts,
                                ArrayRef<int64_t> sizes,
                                ArrayRef<int64_t> steps);

/// The constant `input` gathered as tfm.gather does, along `axis` (already
/// non-negative) at the constant `indices`; null where an index lies
/// outside [-n, n), which is an error to report at run time, not now.
DenseElementsAttr gatherConstant(DenseElementsAttr input,
                                 DenseElementsAttr indices, int64_t axis);

} // namespace mlir::tfm

#endif // TFM_IR_CONSTANTDATA_H
