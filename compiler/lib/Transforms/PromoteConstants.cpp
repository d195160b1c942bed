//===- PromoteConstants.cpp - tfm-promote-constants -----------------------===//
//
// A model written as MLIR has no initializers to mark trainable, so
// training it trains its float constants; a module that names its
// parameters (every ONNX import does) is left alone.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Autodiff.h"
#include "tfm/Transforms/Passes.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_PROMOTECONSTANTSPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::promoteConstantsToParameters(func::FuncOp fn) {
  int counter = 0;
  SmallVector<arith::ConstantOp> constants;
  fn.walk([&](arith::ConstantOp c) { constants.push_back(c); });
  for (arith::ConstantOp c : constants) {
    auto type = dyn_cast<RankedTensorType>(c.getType());
    auto value = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!type || !value || !isa<FloatType>(type.getElementType()) ||
        type.getNumElements() < 2)
      continue;
    std::string name;
    if (auto loc = dyn_cast<NameLoc>(c.getLoc()))
      name = loc.getName().str();
    else
      name = "param_" + std::to_string(counter);
    ++counter;
    OpBuilder b(c);
    auto p = b.create<ParameterOp>(c.getLoc(), type, b.getStringAttr(name),
                                   value);
    c.replaceAllUsesWith(p.getResult());
    c.erase();
  }
}

namespace {
struct PromoteConstantsPass
    : public mlir::tfm::impl::PromoteConstantsPassBase<PromoteConstantsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool hasParameters = false;
    module.walk([&](ParameterOp) { hasParameters = true; });
    if (hasParameters)
      return;
    for (auto fn : module.getOps<func::FuncOp>())
      promoteConstantsToParameters(fn);
  }
};
} // namespace
