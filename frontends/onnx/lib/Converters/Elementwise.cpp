//===- Elementwise.cpp - ONNX elementwise ops -----------------------------===//
//
// Arithmetic with broadcasting maps to tfm's binary ops, comparisons to
// tfm.compare, Where to tfm.select, and transcendental functions to the math
// dialect, which works on tensors and which the lowerings already know.
//
//===----------------------------------------------------------------------===//

#include "../ImporterImpl.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

namespace {

template <typename OpTy> Converter binaryOp() {
  return [](NodeContext &n) {
    return n.push(n.binary<OpTy>(n.input(0), n.input(1)));
  };
}

/// Max and Min take any number of inputs.
template <typename OpTy> Converter variadicOp() {
  return [](NodeContext &n) -> LogicalResult {
    Value acc = n.input(0);
    for (unsigned i = 1; i < n.numInputs(); ++i) {
      auto next = n.binary<OpTy>(acc, n.input(i));
      if (failed(next))
        return failure();
      acc = *next;
    }
    n.results.push_back(acc);
    return success();
  };
}

Converter compareOp(ComparePredicate p) {
  return [p](NodeContext &n) {
    return n.push(n.compare(p, n.input(0), n.input(1)));
  };
}

template <typename OpTy> Converter floatUnaryOp() {
  return [](NodeContext &n) {
    return n.push(n.floatUnary<OpTy>(n.input(0)));
  };
}

Type elementType(Value v) { return getElementTypeOrSelf(v.getType()); }

} // namespace

void mlir::tfm::onnx_import::populateElementwiseConverters(Registry &r) {
  r.onOp("Add", 1, binaryOp<AddOp>());
  r.onOp("Sub", 1, binaryOp<SubOp>());
  r.onOp("Mul", 1, binaryOp<MulOp>());
  r.onOp("Div", 1, binaryOp<DivOp>());
  r.onOp("Pow", 1, [](NodeContext &n) -> LogicalResult {
    // ONNX lets the exponent have another type (x ** 2 with an integer 2).
    auto exponent = n.castTo(n.input(1), elementType(n.input(0)));
    if (failed(exponent))
      return failure();
    return n.push(n.binary<PowOp>(n.input(0), *exponent));
  });
  r.onOp("Max", 1, variadicOp<MaxOp>());
  r.onOp("Min", 1, variadicOp<MinOp>());
  r.onOp("Equal", 1, compareOp(ComparePredicate::eq));
  r.onOp("Less", 1, compareOp(ComparePredicate::lt));
  r.onOp("LessOrEqual", 12, compareOp(ComparePredicate::le));
  r.onOp("Greater", 1, compareOp(ComparePredicate::gt));
  r.onOp("GreaterOrEqual", 12, compareOp(ComparePredicate::ge));
  r.onOp("Not", 1, [](NodeContext &n) {
    Value f = n.scalar(n.builder.getI1Type(), 0);
    return n.push(n.compare(ComparePredicate::eq, n.input(0), f));
  });
  r.onOp("Where", 1, [](NodeContext &n) {
    return n.push(n.select(n.input(0), n.input(1), n.input(2)));
  });
  r.onOp("Sqrt", 1, floatUnaryOp<math::SqrtOp>());
  r.onOp("Erf", 1, floatUnaryOp<math::ErfOp>());
  r.onOp("Tanh", 1, floatUnaryOp<math::TanhOp>());
  r.onOp("Exp", 1, floatUnaryOp<math::ExpOp>());
  r.onOp("Log", 1, floatUnaryOp<math::LogOp>());
  r.onOp("Abs", 1, floatUnaryOp<math::AbsFOp>());
  r.onOp("Neg", 1, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0);
    if (isa<FloatType>(elementType(x)))
      return n.push(n.floatUnary<arith::NegFOp>(x));
    return n.push(n.binary<SubOp>(n.scalar(elementType(x), 0), x));
  });
  r.onOp("Reciprocal", 1, [](NodeContext &n) -> LogicalResult {
    if (failed(n.requireFloat(n.input(0))))
      return failure();
    Value one = n.scalar(elementType(n.input(0)), 1);
    return n.push(n.binary<DivOp>(one, n.input(0)));
  });
  r.onOp("Sigmoid", 1, [](NodeContext &n) -> LogicalResult {
    // 1 / (1 + exp(-x)); the lowering recognizes the chain.
    Value x = n.input(0);
    auto neg = n.floatUnary<arith::NegFOp>(x);
    if (failed(neg))
      return failure();
    auto e = n.floatUnary<math::ExpOp>(*neg);
    Value one = n.scalar(elementType(x), 1);
    auto denom = n.binary<AddOp>(one, *e);
    if (failed(denom))
      return failure();
    return n.push(n.binary<DivOp>(one, *denom));
  });
  r.onOp("Relu", 1, [](NodeContext &n) -> LogicalResult {
    if (failed(n.requireFloat(n.input(0))))
      return failure();
    n.results.push_back(n.create<ReluOp>(n.input(0)));
    return success();
  });
  r.onOp("Gelu", 20, [](NodeContext &n) -> LogicalResult {
    if (failed(n.requireFloat(n.input(0))))
      return failure();
    std::string mode = n.stringAttr("approximate", "none");
    if (mode != "none" && mode != "tanh")
      return n.fail("Gelu's approximate must be 'none' or 'tanh', not '" +
                    mode + "'");
    n.results.push_back(n.create<GeluOp>(
        n.input(0), mode == "tanh" ? GeluApproximation::tanh
                                   : GeluApproximation::none));
    return success();
  });
  r.onOp("Cast", 1, [](NodeContext &n) -> LogicalResult {
    Type to = elementTypeOf(n.builder.getContext(), n.intAttr("to", 0));
    if (!to)
      return n.fail("Cast to data type " + Twine(n.intAttr("to", 0)) +
                    " is not supported");
    return n.push(n.castTo(n.input(0), to));
  });
  r.onOp("Identity", 1, [](NodeContext &n) {
    n.results.push_back(n.input(0));
    return success();
  });
  r.onOp("Dropout", 1, [](NodeContext &n) -> LogicalResult {
    // Imported graphs are inference graphs: dropout is the identity.
    // Training-mode dropout at ratio 0 is still the identity; at any other
    // ratio it draws from a generator no other framework shares.
    DenseElementsAttr ratio = n.constantAttr(1);
    if (n.input(1) && !ratio)
      return n.fail("Dropout's ratio must be a constant");
    double rate = ratio ? ratio.getSplatValue<APFloat>().convertToDouble()
                        : (n.opset < 12 ? n.floatAttr("ratio", 0.5) : 0.5);
    bool zeroRatio = rate == 0;
    if (n.input(2) && !n.constantAttr(2))
      return n.fail("Dropout's training_mode must be a constant");
    if (n.trainable && !zeroRatio && !n.hasOutput(1)) {
      // Kept for the training step, which activates it; seed 0 lets
      // tfm-autodiff give every dropout a stream of its own.
      if (!(rate > 0 && rate < 1))
        return n.fail("Dropout's ratio must be in [0, 1)");
      n.results.push_back(n.builder.create<mlir::tfm::DropoutOp>(
          n.loc, n.inputType(0), n.input(0), Value(),
          n.builder.getF64FloatAttr(rate),
          n.builder.getI64IntegerAttr(
              static_cast<int64_t>(n.floatAttr("seed", 0))), UnitAttr()));
      return success();
    }
    if (DenseElementsAttr training = n.constantAttr(2))
      if (training.getSplatValue<bool>() && !zeroRatio)
        return n.fail("Dropout with training_mode = true is not supported "
                      "when importing an inference graph");
    n.results.push_back(n.input(0));
    if (n.hasOutput(1)) {
      auto type = n.inputType(0);
      auto maskType = RankedTensorType::get(type.getShape(),
                                            n.builder.getI1Type());
      n.results.push_back(
          n.constant(DenseElementsAttr::get(maskType, true)));
    }
    return success();
  });
}
