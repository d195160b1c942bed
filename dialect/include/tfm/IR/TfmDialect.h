//===- TfmDialect.h - The tfm dialect ---------------------------*- C++ -*-===//
//
// Declares the dialect class and the dialect-wide op traits.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_TFMDIALECT_H
#define TFM_IR_TFMDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

#include "tfm/IR/TfmDialect.h.inc"

namespace mlir::tfm::OpTrait {

/// Fails, with a diagnostic that names the operand or result and the
/// dimension, when any tensor the op touches has a dynamic dimension.
LogicalResult verifyStaticShapes(Operation *op);

/// Marks ops whose tensors must all have static shapes.
template <typename ConcreteType>
class StaticShapes
    : public ::mlir::OpTrait::TraitBase<ConcreteType, StaticShapes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyStaticShapes(op);
  }
};

} // namespace mlir::tfm::OpTrait

#endif // TFM_IR_TFMDIALECT_H
