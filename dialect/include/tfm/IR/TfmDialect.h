//===- TfmDialect.h - The tfm dialect ---------------------------*- C++ -*-===//
//
// Declares the dialect class and the dialect-wide op traits.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_TFMDIALECT_H
#define TFM_IR_TFMDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include "tfm/IR/TfmDialect.h.inc"

namespace mlir::tfm::OpTrait {

/// Fails, with a diagnostic that names the operand or result and the
/// dimension, when any tensor the op touches has a dynamic dimension.
LogicalResult verifyStaticShapes(Operation *op);

/// Fails, naming the result and both types, when a result's type differs
/// from what the op's shape rule infers.
LogicalResult verifyResultTypes(Operation *op, TypeRange expected);

/// Verifies the dialect-wide shape invariants: every tensor is static, and,
/// for ops that infer their result types, the shape rule holds. Running the
/// rule here, before InferTypeOpInterface's own check, means a shape error is
/// reported once, in the rule's words, instead of being followed by a generic
/// "failed to infer returned types".
template <typename ConcreteType>
class ShapeRules
    : public ::mlir::OpTrait::TraitBase<ConcreteType, ShapeRules> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    if (failed(verifyStaticShapes(op)))
      return failure();
    if constexpr (ConcreteType::template hasTrait<
                      InferTypeOpInterface::Trait>()) {
      SmallVector<Type> inferred;
      if (failed(ConcreteType::inferReturnTypes(
              op->getContext(), op->getLoc(), op->getOperands(),
              op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
              op->getRegions(), inferred)))
        return failure();
      return verifyResultTypes(op, inferred);
    }
    return success();
  }
};

} // namespace mlir::tfm::OpTrait

#endif // TFM_IR_TFMDIALECT_H
