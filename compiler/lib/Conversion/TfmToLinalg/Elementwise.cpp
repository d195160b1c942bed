//===- Elementwise.cpp - Elementwise tfm ops as linalg --------------------===//
//
// Binary arithmetic and comparisons broadcast numpy-style through the
// operands' indexing maps; a compare that only selects read is computed
// inside each select (the memory plan gives it no buffer).
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

Value mlir::tfm::applyActivation(OpBuilder &ob, Location l, Activation act,
                                 Value x) {
  Type elem = x.getType();
  auto c = [&](double v) {
    return ob.create<arith::ConstantOp>(l, ob.getFloatAttr(elem, v));
  };
  auto half = [&](Value y) { return ob.create<arith::MulFOp>(l, c(0.5), y); };
  switch (act) {
  case Activation::none:
    return x;
  case Activation::relu:
    return ob.create<arith::MaximumFOp>(l, x, c(0));
  case Activation::gelu: {
    // 0.5·x·(1 + erf(x/√2))
    Value e = ob.create<math::ErfOp>(
        l, ob.create<arith::MulFOp>(l, x, c(M_SQRT1_2)));
    return ob.create<arith::MulFOp>(l, half(x),
                                    ob.create<arith::AddFOp>(l, c(1), e));
  }
  case Activation::gelu_tanh: {
    // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    Value x3 =
        ob.create<arith::MulFOp>(l, x, ob.create<arith::MulFOp>(l, x, x));
    Value inner = ob.create<arith::AddFOp>(
        l, x, ob.create<arith::MulFOp>(l, c(0.044715), x3));
    Value t = ob.create<math::TanhOp>(
        l, ob.create<arith::MulFOp>(l, c(std::sqrt(2.0 / M_PI)), inner));
    return ob.create<arith::MulFOp>(l, half(x),
                                    ob.create<arith::AddFOp>(l, c(1), t));
  }
  case Activation::silu: {
    // x / (1 + exp(-x))
    Value e = ob.create<math::ExpOp>(l, ob.create<arith::NegFOp>(l, x));
    return ob.create<arith::DivFOp>(l, x, ob.create<arith::AddFOp>(l, c(1), e));
  }
  }
  return x;
}

namespace {

/// `x pred y` for one element pair of a compare's operands, integers
/// compared unsigned when `isUnsigned`.
Value compareValues(OpBuilder &ob, Location l, CompareOp c, Value x, Value y,
                    bool isUnsigned) {
  Type elem = x.getType();
  if (isa<FloatType>(elem)) {
    arith::CmpFPredicate p = arith::CmpFPredicate::OEQ;
    switch (c.getPredicate()) {
    case ComparePredicate::eq: p = arith::CmpFPredicate::OEQ; break;
    case ComparePredicate::ne: p = arith::CmpFPredicate::UNE; break;
    case ComparePredicate::lt: p = arith::CmpFPredicate::OLT; break;
    case ComparePredicate::le: p = arith::CmpFPredicate::OLE; break;
    case ComparePredicate::gt: p = arith::CmpFPredicate::OGT; break;
    case ComparePredicate::ge: p = arith::CmpFPredicate::OGE; break;
    }
    return ob.create<arith::CmpFOp>(l, p, x, y);
  }
  // i1 compares as unsigned, the way the interpreter reads booleans as 0
  // and 1.
  bool u = isUnsigned || elem.isInteger(1);
  arith::CmpIPredicate p = arith::CmpIPredicate::eq;
  switch (c.getPredicate()) {
  case ComparePredicate::eq: p = arith::CmpIPredicate::eq; break;
  case ComparePredicate::ne: p = arith::CmpIPredicate::ne; break;
  case ComparePredicate::lt: p = u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt; break;
  case ComparePredicate::le: p = u ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle; break;
  case ComparePredicate::gt: p = u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt; break;
  case ComparePredicate::ge: p = u ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge; break;
  }
  return ob.create<arith::CmpIOp>(l, p, x, y);
}

/// x / y for integers, truncating, as the interpreter defines the cases the
/// hardware traps on: x / 0 = 0, and the signed minimum / -1 wraps to itself
/// (= 0 - x, as for every x / -1).
Value integerDivide(OpBuilder &ob, Location l, Value x, Value y,
                    bool isUnsigned) {
  Type t = x.getType();
  Value zero = BufferizedEntry::constantScalar(ob, l, t, 0);
  Value one = BufferizedEntry::constantScalar(ob, l, t, 1);
  Value byZero = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, y, zero);
  if (isUnsigned) {
    Value q = ob.create<arith::DivUIOp>(
        l, x, ob.create<arith::SelectOp>(l, byZero, one, y));
    return ob.create<arith::SelectOp>(l, byZero, zero, q);
  }
  Value minusOne = BufferizedEntry::constantScalar(ob, l, t, -1);
  Value byMinusOne =
      ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, y, minusOne);
  Value trap = ob.create<arith::OrIOp>(l, byZero, byMinusOne);
  Value q = ob.create<arith::DivSIOp>(
      l, x, ob.create<arith::SelectOp>(l, trap, one, y));
  Value negated = ob.create<arith::SubIOp>(l, zero, x);
  return ob.create<arith::SelectOp>(
      l, byZero, zero, ob.create<arith::SelectOp>(l, byMinusOne, negated, q));
}

/// Operands may differ in type (ONNX Pow): computed in f64 like the
/// reference, then converted to the result type.
LogicalResult lowerPow(PowOp op, BufferizedEntry &e) {
  Value lhs = e.bufferOf(op.getLhs()), rhs = e.bufferOf(op.getRhs());
  Value out = e.destination(op.getResult());
  Type outElem = op.getType().getElementType();
  bool unsignedIn[2] = {e.isUnsigned(op.getLhs()), e.isUnsigned(op.getRhs())};
  bool unsignedOut = e.isUnsigned(op.getResult());
  e.elementwise({lhs, rhs}, out,
                [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                  Type f64 = ob.getF64Type();
                  auto widen = [&](Value v, bool isUnsigned) -> Value {
                    Type t = v.getType();
                    if (t.isF64())
                      return v;
                    if (isa<FloatType>(t))
                      return ob.create<arith::ExtFOp>(l, f64, v);
                    if (isUnsigned)
                      return ob.create<arith::UIToFPOp>(l, f64, v);
                    return ob.create<arith::SIToFPOp>(l, f64, v);
                  };
                  Value p = ob.create<math::PowFOp>(
                      l, widen(a[0], unsignedIn[0]), widen(a[1], unsignedIn[1]));
                  if (outElem.isF64())
                    return p;
                  if (isa<FloatType>(outElem))
                    return ob.create<arith::TruncFOp>(l, outElem, p);
                  if (unsignedOut)
                    return ob.create<arith::FPToUIOp>(l, outElem, p);
                  return ob.create<arith::FPToSIOp>(l, outElem, p);
                });
  return success();
}

/// add, sub, mul, div, max, min and compare: one element pair at a time.
LogicalResult lowerBinary(Operation *op, BufferizedEntry &e) {
  Type elem = cast<ShapedType>(op->getOperand(0).getType()).getElementType();
  bool isFloat = isa<FloatType>(elem);
  bool u = e.isUnsigned(op->getOperand(0));
  Value lhs = e.bufferOf(op->getOperand(0));
  Value rhs = e.bufferOf(op->getOperand(1));
  Value out = e.destination(op->getResult(0));
  e.elementwise({lhs, rhs}, out,
                [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                  Value x = a[0], y = a[1];
                  return TypeSwitch<Operation *, Value>(op)
                      .Case([&](AddOp) -> Value {
                        return isFloat ? ob.create<arith::AddFOp>(l, x, y)
                                       : ob.create<arith::AddIOp>(l, x, y).getResult();
                      })
                      .Case([&](SubOp) -> Value {
                        return isFloat ? ob.create<arith::SubFOp>(l, x, y)
                                       : ob.create<arith::SubIOp>(l, x, y).getResult();
                      })
                      .Case([&](MulOp) -> Value {
                        return isFloat ? ob.create<arith::MulFOp>(l, x, y)
                                       : ob.create<arith::MulIOp>(l, x, y).getResult();
                      })
                      .Case([&](DivOp) -> Value {
                        if (isFloat)
                          return ob.create<arith::DivFOp>(l, x, y);
                        return integerDivide(ob, l, x, y, u);
                      })
                      .Case([&](MaxOp) -> Value {
                        if (isFloat)
                          return ob.create<arith::MaximumFOp>(l, x, y);
                        return u ? ob.create<arith::MaxUIOp>(l, x, y).getResult()
                                 : ob.create<arith::MaxSIOp>(l, x, y).getResult();
                      })
                      .Case([&](MinOp) -> Value {
                        if (isFloat)
                          return ob.create<arith::MinimumFOp>(l, x, y);
                        return u ? ob.create<arith::MinUIOp>(l, x, y).getResult()
                                 : ob.create<arith::MinSIOp>(l, x, y).getResult();
                      })
                      .Case([&](CompareOp c) -> Value {
                        return compareValues(ob, l, c, x, y, u);
                      });
                });
  return success();
}

LogicalResult lowerSelect(SelectOp s, BufferizedEntry &e) {
  Value out = e.destination(s.getResult());
  // A compare the plan computes inside its selects.
  auto c = s.getCondition().getDefiningOp<CompareOp>();
  if (c && BufferizedEntry::isInline(c)) {
    bool u = e.isUnsigned(c.getLhs());
    e.elementwise({e.bufferOf(c.getLhs()), e.bufferOf(c.getRhs()),
                   e.bufferOf(s.getTrueValue()), e.bufferOf(s.getFalseValue())},
                  out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                    return ob.create<arith::SelectOp>(
                        l, compareValues(ob, l, c, a[0], a[1], u), a[2], a[3]);
                  });
    return success();
  }
  e.elementwise({e.bufferOf(s.getCondition()), e.bufferOf(s.getTrueValue()),
                 e.bufferOf(s.getFalseValue())},
                out, [](OpBuilder &ob, Location l, ValueRange a) -> Value {
                  return ob.create<arith::SelectOp>(l, a[0], a[1], a[2]);
                });
  return success();
}

LogicalResult lowerCast(CastOp op, BufferizedEntry &e) {
  Type from = op.getInput().getType().getElementType();
  Type to = op.getType().getElementType();
  // Booleans convert as unsigned, reading as 0 and 1.
  bool fromU = from.isInteger(1) || e.isUnsigned(op.getInput());
  bool toU = e.isUnsigned(op.getResult());
  Value in = e.bufferOf(op.getInput());
  Value out = e.destination(op.getResult());
  e.elementwise({in}, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value x = a[0];
    if (from == to)
      return x;
    auto fromF = dyn_cast<FloatType>(from), toF = dyn_cast<FloatType>(to);
    if (fromF && toF)
      return fromF.getWidth() < toF.getWidth()
                 ? ob.create<arith::ExtFOp>(l, to, x).getResult()
                 : ob.create<arith::TruncFOp>(l, to, x).getResult();
    if (fromF) {
      if (to.isInteger(1))
        return ob.create<arith::CmpFOp>(
            l, arith::CmpFPredicate::UNE, x,
            BufferizedEntry::constantScalar(ob, l, from, 0));
      return toU ? ob.create<arith::FPToUIOp>(l, to, x).getResult()
                 : ob.create<arith::FPToSIOp>(l, to, x).getResult();
    }
    // From an integer or a boolean.
    if (toF)
      return fromU ? ob.create<arith::UIToFPOp>(l, to, x).getResult()
                   : ob.create<arith::SIToFPOp>(l, to, x).getResult();
    if (to.isInteger(1))
      return ob.create<arith::CmpIOp>(
          l, arith::CmpIPredicate::ne, x,
          BufferizedEntry::constantScalar(ob, l, from, 0));
    unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
    if (fw == tw)
      return x; // a change of signedness only
    if (fw < tw)
      return fromU ? ob.create<arith::ExtUIOp>(l, to, x).getResult()
                   : ob.create<arith::ExtSIOp>(l, to, x).getResult();
    return ob.create<arith::TruncIOp>(l, to, x);
  });
  return success();
}

/// relu, gelu and the math dialect's functions on tensors.
LogicalResult lowerUnaryFloat(Operation *op, BufferizedEntry &e) {
  Value in = e.bufferOf(op->getOperand(0));
  Value out = e.destination(op->getResult(0));
  e.elementwise({in}, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value x = a[0];
    return TypeSwitch<Operation *, Value>(op)
        .Case([&](ReluOp) { return applyActivation(ob, l, Activation::relu, x); })
        .Case([&](GeluOp g) {
          return applyActivation(ob, l,
                                 g.getApproximate() == GeluApproximation::tanh
                                     ? Activation::gelu_tanh
                                     : Activation::gelu,
                                 x);
        })
        .Case([&](math::SqrtOp) -> Value { return ob.create<math::SqrtOp>(l, x); })
        .Case([&](math::ErfOp) -> Value { return ob.create<math::ErfOp>(l, x); })
        .Case([&](math::TanhOp) -> Value { return ob.create<math::TanhOp>(l, x); })
        .Case([&](math::ExpOp) -> Value { return ob.create<math::ExpOp>(l, x); })
        .Case([&](math::LogOp) -> Value { return ob.create<math::LogOp>(l, x); })
        .Case([&](math::AbsFOp) -> Value { return ob.create<math::AbsFOp>(l, x); })
        .Case([&](math::SinOp) -> Value { return ob.create<math::SinOp>(l, x); })
        .Case([&](math::CosOp) -> Value { return ob.create<math::CosOp>(l, x); })
        .Case([&](math::FloorOp) -> Value { return ob.create<math::FloorOp>(l, x); })
        .Case([&](math::CeilOp) -> Value { return ob.create<math::CeilOp>(l, x); })
        .Case([&](math::TruncOp) -> Value { return ob.create<math::TruncOp>(l, x); })
        .Case([&](math::RoundEvenOp) -> Value { return ob.create<math::RoundEvenOp>(l, x); })
        .Case([&](arith::NegFOp) -> Value { return ob.create<arith::NegFOp>(l, x); });
  });
  return success();
}

} // namespace

void mlir::tfm::populateElementwiseLowerings(OpLoweringSet &set) {
  set.addGeneric<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp>(lowerBinary);
  set.add<PowOp>(lowerPow);
  set.addGeneric<CompareOp>(lowerBinary);
  set.add<SelectOp>(lowerSelect);
  set.add<CastOp>(lowerCast);
  set.addGeneric<ReluOp, GeluOp, math::SqrtOp, math::ErfOp, math::TanhOp,
                 math::ExpOp, math::LogOp, math::AbsFOp, math::SinOp,
                 math::CosOp, math::FloorOp, math::CeilOp, math::TruncOp,
                 math::RoundEvenOp, arith::NegFOp>(
      lowerUnaryFloat);
  set.add<BroadcastOp>([](BroadcastOp o, BufferizedEntry &e) {
    e.copy(e.bufferOf(o.getInput()), e.destination(o.getResult()));
    return success();
  });
}
