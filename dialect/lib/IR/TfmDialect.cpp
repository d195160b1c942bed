//===- TfmDialect.cpp - The tfm dialect -----------------------------------===//

#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/IR/TypeInference.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tfm;

#include "tfm/IR/TfmDialect.cpp.inc"
#include "tfm/IR/TfmEnums.cpp.inc"
#include "tfm/IR/TfmInterfaces.cpp.inc"

void TfmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tfm/IR/TfmOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *TfmDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

LogicalResult mlir::tfm::OpTrait::verifyStaticShapes(Operation *op) {
  auto check = [&](Type t, StringRef kind, unsigned idx) -> LogicalResult {
    auto ranked = dyn_cast<RankedTensorType>(t);
    if (!ranked)
      return success(); // Left to the op's type constraints.
    for (auto [i, dim] : llvm::enumerate(ranked.getShape()))
      if (ShapedType::isDynamic(dim))
        return op->emitOpError()
               << kind << " #" << idx << " has a dynamic dimension at index "
               << i << " in " << t << "; tfm requires static shapes";
    return success();
  };
  for (auto [i, t] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(t, "operand", i)))
      return failure();
  for (auto [i, t] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(t, "result", i)))
      return failure();
  return success();
}

LogicalResult mlir::tfm::OpTrait::verifyResultTypes(Operation *op,
                                                    TypeRange expected) {
  TypeRange actual = op->getResultTypes();
  if (actual.size() != expected.size())
    return op->emitOpError() << "has " << actual.size()
                             << " results but its operands imply "
                             << expected.size();
  for (auto [i, want] : llvm::enumerate(expected))
    if (actual[i] != want)
      return op->emitOpError() << "result #" << i << " has type " << actual[i]
                               << " but the operands imply " << want;
  return success();
}
