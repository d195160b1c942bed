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

/// A constant weight [K, N] transposed to [N, K], as tfm.linear wants it.
DenseElementsAttr transpose2D(DenseElementsAttr weight);

/// The [N, K] constant of the row-major bytes `raw` of a [K, N] tensor of
/// `type`, whose elements are a whole number of bytes wide.
DenseElementsAttr transpose2D(RankedTensorType type, ArrayRef<char> raw);

/// Constants stacked along dimension 0 (all share the other dimensions).
DenseElementsAttr concatRows(ArrayRef<DenseElementsAttr> parts);

} // namespace mlir::tfm

#endif // TFM_IR_CONSTANTDATA_H
