//===- Elementwise.cpp - ONNX elementwise ops -----------------------------===//
//
// Arithmetic with broadcasting maps to tfm's binary ops, comparisons to
// tfm.compare, Where to tfm.select, and transcendental functions to the math
// dialect, which works on tensors and which the lowerings already know.
//
//===----------------------------------------------------------------------===//

#include "../ImporterImpl.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

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

/// And, Or and Xor of booleans, as selects and a compare, which broadcast.
Converter logicalOp(StringRef kind) {
  return [kind = kind.str()](NodeContext &n) -> LogicalResult {
    Value a = n.input(0), b = n.input(1);
    if (!elementType(a).isInteger(1) || !elementType(b).isInteger(1))
      return n.fail(kind + " needs boolean inputs");
    Type i1 = n.builder.getI1Type();
    if (kind == "And")
      return n.push(n.select(a, b, n.scalar(i1, 0)));
    if (kind == "Or")
      return n.push(n.select(a, n.scalar(i1, 1), b));
    return n.push(n.compare(ComparePredicate::ne, a, b));
  };
}

/// max(lo, min(hi, alpha·x + beta)), HardSigmoid's form.
FailureOr<Value> hardSigmoid(NodeContext &n, Value x, double alpha,
                             double beta) {
  Type t = elementType(x);
  Value ax, shifted, upper;
  if (!take(n.binary<MulOp>(x, n.scalar(t, alpha)), ax) ||
      !take(n.binary<AddOp>(ax, n.scalar(t, beta)), shifted) ||
      !take(n.binary<MinOp>(shifted, n.scalar(t, 1)), upper))
    return failure();
  return n.binary<MaxOp>(upper, n.scalar(t, 0));
}

/// `negative` where x < 0, else x: the piecewise activations.
FailureOr<Value> whereNegative(NodeContext &n, Value x, Value negative) {
  Value isNeg;
  if (!take(n.compare(ComparePredicate::lt, x, n.scalar(elementType(x), 0)),
            isNeg))
    return failure();
  return n.select(isNeg, negative, x);
}

/// ONNX Mod: with fmod = 1 the remainder has the dividend's sign (C fmod);
/// with fmod = 0 (integers only) the divisor's (Python's %).
LogicalResult convertMod(NodeContext &n) {
  Value a = n.input(0), b = n.input(1);
  Type t = elementType(a);
  bool isFloat = isa<FloatType>(t);
  bool cStyle = n.intAttr("fmod", 0);
  if (isFloat && !cStyle)
    return n.fail("Mod of floats needs fmod = 1");
  // a - b·trunc(a/b); integer division truncates already.
  Value q, r, prod;
  if (!take(n.binary<DivOp>(a, b), q))
    return failure();
  if (isFloat && !take(n.floatUnary<math::TruncOp>(q), q))
    return failure();
  if (!take(n.binary<MulOp>(q, b), prod) ||
      !take(n.binary<SubOp>(a, prod), r))
    return failure();
  if (cStyle)
    return n.push(r);
  // Python's sign rule: add b where r is nonzero and its sign differs.
  Value zero = n.scalar(t, 0), rNeg, bNeg, differ, nonzero, fix, rPlusB;
  if (!take(n.compare(ComparePredicate::lt, r, zero), rNeg) ||
      !take(n.compare(ComparePredicate::lt, b, zero), bNeg) ||
      !take(n.compare(ComparePredicate::ne, rNeg, bNeg), differ) ||
      !take(n.compare(ComparePredicate::ne, r, zero), nonzero) ||
      !take(n.select(nonzero, differ, n.scalar(n.builder.getI1Type(), 0)),
            fix) ||
      !take(n.binary<AddOp>(r, b), rPlusB))
    return failure();
  return n.push(n.select(fix, rPlusB, r));
}

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
  r.onOp("Sin", 7, floatUnaryOp<math::SinOp>());
  r.onOp("Cos", 7, floatUnaryOp<math::CosOp>());
  r.onOp("Floor", 1, floatUnaryOp<math::FloorOp>());
  r.onOp("Ceil", 1, floatUnaryOp<math::CeilOp>());
  r.onOp("Round", 11, floatUnaryOp<math::RoundEvenOp>());
  r.onOp("Sign", 9, [](NodeContext &n) -> LogicalResult {
    // x itself where x is neither positive nor negative: keeps 0 and NaN.
    Value x = n.input(0);
    Type t = elementType(x);
    Value pos, neg, inner;
    if (!take(n.compare(ComparePredicate::gt, x, n.scalar(t, 0)), pos) ||
        !take(n.compare(ComparePredicate::lt, x, n.scalar(t, 0)), neg) ||
        !take(n.select(neg, n.scalar(t, -1), x), inner))
      return failure();
    return n.push(n.select(pos, n.scalar(t, 1), inner));
  });
  r.onOp("IsNaN", 9, [](NodeContext &n) -> LogicalResult {
    if (failed(n.requireFloat(n.input(0))))
      return failure();
    return n.push(n.compare(ComparePredicate::ne, n.input(0), n.input(0)));
  });
  r.onOp("IsInf", 10, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0);
    if (failed(n.requireFloat(x)))
      return failure();
    Type t = elementType(x);
    bool pos = n.intAttr("detect_positive", 1),
         neg = n.intAttr("detect_negative", 1);
    Value isPos, isNeg;
    if (!take(n.compare(ComparePredicate::eq, x,
                        n.scalar(t, std::numeric_limits<double>::infinity())),
              isPos) ||
        !take(n.compare(ComparePredicate::eq, x,
                        n.scalar(t, -std::numeric_limits<double>::infinity())),
              isNeg))
      return failure();
    Value none = n.scalar(n.builder.getI1Type(), 0);
    if (!pos)
      isPos = none;
    if (!neg)
      isNeg = none;
    return n.push(n.select(isPos, n.scalar(n.builder.getI1Type(), 1), isNeg));
  });
  r.onOp("And", 7, logicalOp("And"));
  r.onOp("Or", 7, logicalOp("Or"));
  r.onOp("Xor", 7, logicalOp("Xor"));
  r.onOp("Mod", 10, convertMod);
  r.onOp("Clip", 11, [](NodeContext &n) -> LogicalResult {
    Value v = n.input(0);
    if (Value lo = n.input(1); lo && !take(n.binary<MaxOp>(v, lo), v))
      return failure();
    if (Value hi = n.input(2); hi && !take(n.binary<MinOp>(v, hi), v))
      return failure();
    n.results.push_back(v);
    return success();
  });
  r.onOp("HardSigmoid", 6, [](NodeContext &n) -> LogicalResult {
    if (failed(n.requireFloat(n.input(0))))
      return failure();
    return n.push(hardSigmoid(n, n.input(0), n.floatAttr("alpha", 0.2f),
                              n.floatAttr("beta", 0.5f)));
  });
  r.onOp("HardSwish", 14, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0), gate;
    if (failed(n.requireFloat(x)) ||
        !take(hardSigmoid(n, x, 1.0 / 6, 0.5), gate))
      return failure();
    return n.push(n.binary<MulOp>(x, gate));
  });
  r.onOp("LeakyRelu", 6, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0), scaled;
    if (failed(n.requireFloat(x)) ||
        !take(n.binary<MulOp>(x, n.scalar(elementType(x),
                                          n.floatAttr("alpha", 0.01f))),
              scaled))
      return failure();
    return n.push(whereNegative(n, x, scaled));
  });
  r.onOp("PRelu", 9, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0), scaled;
    if (failed(n.requireFloat(x)) ||
        !take(n.binary<MulOp>(x, n.input(1)), scaled))
      return failure();
    return n.push(whereNegative(n, x, scaled));
  });
  r.onOp("Elu", 6, [](NodeContext &n) -> LogicalResult {
    // alpha·(exp(x) - 1) where x < 0.
    Value x = n.input(0), e, em1, scaled;
    Type t = elementType(x);
    if (!take(n.floatUnary<math::ExpOp>(x), e) ||
        !take(n.binary<SubOp>(e, n.scalar(t, 1)), em1) ||
        !take(n.binary<MulOp>(em1, n.scalar(t, n.floatAttr("alpha", 1.0f))),
              scaled))
      return failure();
    return n.push(whereNegative(n, x, scaled));
  });
  r.onOp("Softplus", 1, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0), e, e1;
    if (!take(n.floatUnary<math::ExpOp>(x), e) ||
        !take(n.binary<AddOp>(e, n.scalar(elementType(x), 1)), e1))
      return failure();
    return n.push(n.floatUnary<math::LogOp>(e1));
  });
  r.onOp("Softsign", 1, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0), a, a1;
    if (!take(n.floatUnary<math::AbsFOp>(x), a) ||
        !take(n.binary<AddOp>(a, n.scalar(elementType(x), 1)), a1))
      return failure();
    return n.push(n.binary<DivOp>(x, a1));
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
              static_cast<int64_t>(n.floatAttr("seed", 0))),
          /*training=*/UnitAttr(), /*trainable=*/n.builder.getUnitAttr()));
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
