//===- Quantization.cpp - Quantized tensors as linalg ---------------------===//
//
// The portable code of the quantization ops, elementwise passes whose
// scale (and zero point) is read through a map: none of the loops for one
// scale, the axis's loop for a scale per index, that loop divided by the
// block size for a blocked scale. Integers come signless and 4-bit ones as
// bytes (BufferizedEntry::declaredElementType keeps what they were), so
// every integer is extended to i32 by its declared signedness before use.
// The rounding follows the reference interpreter step for step: the
// quotient x / scale in f32, halves to even, then the zero point and the
// saturation; a NaN quotient gives the zero point.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The map from the loops over a tensor of rank `rank` to the elements of
/// its scale of type `scale`, covering it along `axis` (in blocks of
/// `blockSize` when not 0).
AffineMap scaleMap(MLIRContext *ctx, int64_t rank, Type scale, int64_t axis,
                   int64_t blockSize) {
  auto scaleType = cast<ShapedType>(scale);
  if (scaleType.getRank() == 0)
    return AffineMap::get(rank, 0, ctx);
  if (axis < 0)
    axis += rank;
  if (blockSize == 0)
    return AffineMap::get(rank, 0, {getAffineDimExpr(axis, ctx)}, ctx);
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d) {
    AffineExpr e = getAffineDimExpr(d, ctx);
    exprs.push_back(d == axis ? e.floorDiv(blockSize) : e);
  }
  return AffineMap::get(rank, 0, exprs, ctx);
}

/// `v` (a signless integer) as an i32 of the value it holds.
Value toI32(OpBuilder &ob, Location l, Value v, bool isUnsigned) {
  Type i32 = ob.getI32Type();
  unsigned width = v.getType().getIntOrFloatBitWidth();
  if (width == 32)
    return v;
  if (width > 32)
    return ob.create<arith::TruncIOp>(l, i32, v);
  if (isUnsigned)
    return ob.create<arith::ExtUIOp>(l, i32, v);
  return ob.create<arith::ExtSIOp>(l, i32, v);
}

/// `v` (a float) converted to the float type `to`.
Value toFloat(OpBuilder &ob, Location l, Value v, Type to) {
  unsigned from = v.getType().getIntOrFloatBitWidth(),
           want = to.getIntOrFloatBitWidth();
  if (v.getType() == to)
    return v;
  if (from < want)
    return ob.create<arith::ExtFOp>(l, to, v);
  return ob.create<arith::TruncFOp>(l, to, v);
}

/// The range of the declared integer type `elem`.
std::pair<double, double> rangeOf(Type elem) {
  unsigned w = elem.getIntOrFloatBitWidth();
  if (elem.isUnsignedInteger())
    return {0.0, std::ldexp(1.0, w) - 1};
  return {-std::ldexp(1.0, w - 1), std::ldexp(1.0, w - 1) - 1};
}

/// What one element's quantization reads beyond its value.
struct Quantization {
  Type declared;      // the integer type saturated to
  Type stored;        // its buffer's element type
  bool zpUnsigned;    // how the zero point's buffer holds it
};

/// saturate(round(x / scale) + zero_point) for one element: `zp` (the
/// zero point's element, stored) may be null for 0.
Value quantizeValue(OpBuilder &ob, Location l, Value x, Value scale, Value zp,
                    const Quantization &q) {
  Type f32 = ob.getF32Type();
  auto c = [&](double v) {
    return ob.create<arith::ConstantOp>(l, ob.getFloatAttr(f32, v));
  };
  Value quotient = ob.create<arith::DivFOp>(l, toFloat(ob, l, x, f32),
                                            toFloat(ob, l, scale, f32));
  Value z = zp ? ob.create<arith::SIToFPOp>(l, f32,
                                            toI32(ob, l, zp, q.zpUnsigned))
                     .getResult()
               : c(0).getResult();
  auto [lo, hi] = rangeOf(q.declared);
  Value v = ob.create<arith::AddFOp>(
      l, ob.create<math::RoundEvenOp>(l, quotient), z);
  v = ob.create<arith::MinimumFOp>(l, ob.create<arith::MaximumFOp>(l, v, c(lo)),
                                   c(hi));
  Value isNaN = ob.create<arith::CmpFOp>(l, arith::CmpFPredicate::UNO,
                                         quotient, quotient);
  v = ob.create<arith::SelectOp>(l, isNaN, z, v);
  Value i = ob.create<arith::FPToSIOp>(l, ob.getI32Type(), v);
  if (q.stored.getIntOrFloatBitWidth() == 32)
    return i;
  return ob.create<arith::TruncIOp>(l, q.stored, i);
}

/// (x - zero_point) · scale for one element, in `out`'s float type. The
/// product is taken in f32 where it is exact there or rounded once to an
/// f32 result (as the reference's double product is), else in f64.
Value dequantizeValue(OpBuilder &ob, Location l, Value x, bool xUnsigned,
                      Value scale, Value zp, bool zpUnsigned, Type out) {
  unsigned width = x.getType().getIntOrFloatBitWidth();
  Type compute = (width <= 8 || (width <= 16 && out.isF32()))
                     ? Type(ob.getF32Type())
                     : Type(ob.getF64Type());
  Value d;
  if (width <= 16) {
    d = toI32(ob, l, x, xUnsigned);
    if (zp)
      d = ob.create<arith::SubIOp>(l, d, toI32(ob, l, zp, zpUnsigned));
    d = ob.create<arith::SIToFPOp>(l, compute, d);
  } else {
    // An i32 (a quantized bias) takes no zero point.
    d = xUnsigned ? ob.create<arith::UIToFPOp>(l, compute, x).getResult()
                  : ob.create<arith::SIToFPOp>(l, compute, x).getResult();
  }
  Value p = ob.create<arith::MulFOp>(l, d, toFloat(ob, l, scale, compute));
  return toFloat(ob, l, p, out);
}

/// Elementwise maps of a pass over a tensor of rank `rank`: the value's,
/// the scale's and (when there is one) the zero point's.
SmallVector<AffineMap> quantizationMaps(MLIRContext *ctx, int64_t rank,
                                        Type scale, bool zeroPoint,
                                        int64_t axis, int64_t blockSize) {
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap s = scaleMap(ctx, rank, scale, axis, blockSize);
  SmallVector<AffineMap> maps{id, s};
  if (zeroPoint)
    maps.push_back(s);
  return maps;
}

SmallVector<utils::IteratorType> parallel(int64_t rank) {
  return SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel);
}

LogicalResult lowerQuantize(QuantizeOp op, BufferizedEntry &e) {
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  int64_t rank = op.getInput().getType().getRank();
  Value zpT = op.getZeroPoint();
  Quantization q{e.declaredElementType(op.getResult()),
                 cast<MemRefType>(out.getType()).getElementType(),
                 zpT && e.isUnsigned(zpT)};
  SmallVector<Value> ins{e.bufferOf(op.getInput()), e.bufferOf(op.getScale())};
  if (zpT)
    ins.push_back(e.bufferOf(zpT));
  e.generic(ins,
            quantizationMaps(e.ctx, rank, op.getScale().getType(), zpT != nullptr,
                             op.getAxis(), op.getBlockSize()),
            out, AffineMap::getMultiDimIdentityMap(rank, e.ctx), parallel(rank),
            [&](OpBuilder &ob, Location l, ValueRange a) {
              return quantizeValue(ob, l, a[0], a[1], zpT ? a[2] : Value(), q);
            });
  return success();
}

/// dequantize(x, scale, zp) of the buffers `x`, `scale` and `zp` (or null)
/// into `out`, as tfm.dequantize reads them.
void emitDequantize(BufferizedEntry &e, Value x, bool xUnsigned, Value scale,
                    Value zp, bool zpUnsigned, Type scaleType, int64_t axis,
                    int64_t blockSize, Value out) {
  auto outType = cast<MemRefType>(out.getType());
  int64_t rank = outType.getRank();
  Type elem = outType.getElementType();
  SmallVector<Value> ins{x, scale};
  if (zp)
    ins.push_back(zp);
  e.generic(ins,
            quantizationMaps(e.ctx, rank, scaleType, zp != nullptr, axis,
                             blockSize),
            out, AffineMap::getMultiDimIdentityMap(rank, e.ctx), parallel(rank),
            [&](OpBuilder &ob, Location l, ValueRange a) {
              return dequantizeValue(ob, l, a[0], xUnsigned, a[1],
                                     zp ? a[2] : Value(), zpUnsigned, elem);
            });
}

LogicalResult lowerDequantize(DequantizeOp op, BufferizedEntry &e) {
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  Value zpT = op.getZeroPoint();
  emitDequantize(e, e.bufferOf(op.getInput()), e.isUnsigned(op.getInput()),
                 e.bufferOf(op.getScale()), zpT ? e.bufferOf(zpT) : Value(),
                 zpT && e.isUnsigned(zpT), op.getScale().getType(),
                 op.getAxis(), op.getBlockSize(), out);
  return success();
}

/// DynamicQuantizeLinear's scale and zero point of the f32 buffer `x`,
/// into the 0-d buffers `scale` (f32) and `zp` (i8, holding a ui8).
void emitDynamicRange(BufferizedEntry &e, Value x, Value scale, Value zp) {
  MLIRContext *ctx = e.ctx;
  Type f32 = e.b.getF32Type();
  auto xType = cast<MemRefType>(x.getType());
  Value flat =
      e.reshape(x, MemRefType::get({xType.getNumElements()}, f32));
  auto scalar = MemRefType::get({}, f32);
  Value lo = e.temporary(scalar), hi = e.temporary(scalar);
  // The range holds 0; minnum and maxnum pass NaN elements over.
  e.fill(lo, e.b.getF32FloatAttr(0));
  e.fill(hi, e.b.getF32FloatAttr(0));
  AffineMap all = AffineMap::get(1, 0, {getAffineDimExpr(0, ctx)}, ctx);
  AffineMap none = AffineMap::get(1, 0, ctx);
  SmallVector<utils::IteratorType> reducing{utils::IteratorType::reduction};
  e.generic({flat}, {all}, lo, none, reducing,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::MinNumFOp>(l, a[1], a[0]);
            });
  e.generic({flat}, {all}, hi, none, reducing,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::MaxNumFOp>(l, a[1], a[0]);
            });
  auto c = [&](OpBuilder &ob, Location l, double v) {
    return ob.create<arith::ConstantOp>(l, ob.getF32FloatAttr(v));
  };
  // Every element 0: scale 1, so that no quotient is 0 / 0.
  e.elementwise({lo, hi}, scale,
                [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                  Value span = ob.create<arith::SubFOp>(l, a[1], a[0]);
                  Value empty = ob.create<arith::CmpFOp>(
                      l, arith::CmpFPredicate::OEQ, a[1], a[0]);
                  return ob.create<arith::SelectOp>(
                      l, empty, c(ob, l, 1),
                      ob.create<arith::DivFOp>(l, span, c(ob, l, 255)));
                });
  Type zpElem = cast<MemRefType>(zp.getType()).getElementType();
  e.elementwise({lo, scale}, zp,
                [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                  Value initial = ob.create<arith::SubFOp>(
                      l, c(ob, l, 0), ob.create<arith::DivFOp>(l, a[0], a[1]));
                  Value clamped = ob.create<arith::MinimumFOp>(
                      l, ob.create<arith::MaximumFOp>(l, initial, c(ob, l, 0)),
                      c(ob, l, 255));
                  Value r = ob.create<math::RoundEvenOp>(l, clamped);
                  return ob.create<arith::TruncIOp>(
                      l, zpElem,
                      ob.create<arith::FPToSIOp>(l, ob.getI32Type(), r));
                });
}

LogicalResult lowerDynamicQuantize(DynamicQuantizeOp op, BufferizedEntry &e) {
  Value out = e.destination(op.getResult());
  Value scale = e.destination(op.getScale());
  Value zp = e.destination(op.getZeroPoint());
  if (!out || !scale || !zp)
    return failure();
  emitDynamicRange(e, e.denseOf(op.getInput()), scale, zp);
  Quantization q{e.declaredElementType(op.getResult()),
                 cast<MemRefType>(out.getType()).getElementType(), true};
  e.elementwise({e.bufferOf(op.getInput()), scale, zp}, out,
                [&](OpBuilder &ob, Location l, ValueRange a) {
                  return quantizeValue(ob, l, a[0], a[1], a[2], q);
                });
  return success();
}

/// x rounded per block to symmetric int8, as tfm.quantized_linear's
/// `blocked` reads its input, into a temporary of x's type: the blocks' |x|
/// maxima in one reduction (maxnum passes NaNs over), then each element
/// against its block's scale.
Value emitBlockRounding(BufferizedEntry &e, Value x, int64_t block) {
  MLIRContext *ctx = e.ctx;
  Type f32 = e.b.getF32Type();
  auto xType = cast<MemRefType>(x.getType());
  Type elem = xType.getElementType();
  int64_t k = xType.getShape().back(), rows = xType.getNumElements() / k,
          blocks = k / block;
  Value cut = e.reshape(x, MemRefType::get({rows, blocks, block}, elem));
  Value amax = e.temporary(MemRefType::get({rows, blocks}, f32));
  e.fill(amax, e.b.getF32FloatAttr(0));
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx),
             d2 = getAffineDimExpr(2, ctx);
  AffineMap all = AffineMap::get(3, 0, {d0, d1, d2}, ctx),
            perBlock = AffineMap::get(3, 0, {d0, d1}, ctx);
  e.generic({cut}, {all}, amax, perBlock,
            {utils::IteratorType::parallel, utils::IteratorType::parallel,
             utils::IteratorType::reduction},
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value v = toFloat(ob, l, a[0], f32);
              return ob.create<arith::MaxNumFOp>(
                  l, a[1], ob.create<math::AbsFOp>(l, v));
            });
  Value rounded =
      e.temporary(MemRefType::get({rows, blocks, block}, elem));
  auto c = [&](OpBuilder &ob, Location l, double v) -> Value {
    return ob.create<arith::ConstantOp>(l, ob.getF32FloatAttr(v));
  };
  e.elementwise(
      {cut, e.reshape(amax, MemRefType::get({rows, blocks, 1}, f32))},
      rounded,
      [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
        Value v = toFloat(ob, l, a[0], f32);
        Value s = ob.create<arith::DivFOp>(l, a[1], c(ob, l, 127));
        Value q = ob.create<math::RoundEvenOp>(
            l, ob.create<arith::DivFOp>(l, v, s));
        q = ob.create<arith::MaximumFOp>(
            l, ob.create<arith::MinimumFOp>(l, q, c(ob, l, 127)),
            c(ob, l, -127));
        // A zero scale or a NaN element: 0.
        Value usable = ob.create<arith::AndIOp>(
            l,
            ob.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, s,
                                     c(ob, l, 0)),
            ob.create<arith::CmpFOp>(l, arith::CmpFPredicate::ORD, v, v));
        Value y = ob.create<arith::SelectOp>(
            l, usable, ob.create<arith::MulFOp>(l, q, s), c(ob, l, 0));
        return toFloat(ob, l, y, elem);
      });
  return e.reshape(rounded, xType);
}

/// `v - zp` in i32, into a temporary of `v`'s shape: the operand of the
/// integer product, its zero point broadcast numpy-style.
Value shiftedOperand(BufferizedEntry &e, Value tensor, Value zpTensor) {
  Value v = e.bufferOf(tensor);
  auto type = cast<MemRefType>(v.getType());
  Value out = e.temporary(MemRefType::get(type.getShape(), e.b.getI32Type()));
  bool vUnsigned = e.isUnsigned(tensor);
  bool zUnsigned = zpTensor && e.isUnsigned(zpTensor);
  SmallVector<Value> ins{v};
  if (zpTensor)
    ins.push_back(e.bufferOf(zpTensor));
  e.elementwise(ins, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value x = toI32(ob, l, a[0], vUnsigned);
    if (!zpTensor)
      return x;
    return ob.create<arith::SubIOp>(l, x, toI32(ob, l, a[1], zUnsigned));
  });
  return out;
}

LogicalResult lowerMatmulInteger(MatmulIntegerOp op, BufferizedEntry &e) {
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  // The differences fit in 9 bits, so the i32 products are exact and the
  // sum wraps as the reference's does.
  Value lhs = shiftedOperand(e, op.getLhs(), op.getLhsZeroPoint());
  Value rhs = shiftedOperand(e, op.getRhs(), op.getRhsZeroPoint());
  lowerGenericMatmul(e, lhs, rhs, false, false, out);
  return success();
}

} // namespace

LogicalResult mlir::tfm::lowerGenericQuantizedLinear(QuantizedLinearOp op,
                                                     BufferizedEntry &e) {
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  Type elem = op.getType().getElementType();
  RankedTensorType wType = op.getWeight().getType();
  Value w = e.temporary(MemRefType::get(wType.getShape(), elem));
  Value wzp = op.getWeightZeroPoint();
  int64_t block = op.getBlockSize();
  emitDequantize(e, e.bufferOf(op.getWeight()), e.isUnsigned(op.getWeight()),
                 e.bufferOf(op.getWeightScale()),
                 wzp ? e.bufferOf(wzp) : Value(), wzp && e.isUnsigned(wzp),
                 op.getWeightScale().getType(), block ? 1 : 0, block, w);
  Value x = e.denseOf(op.getInput());
  if (op.getInputQuantization() == InputQuantization::blocked) {
    x = emitBlockRounding(e, x, block);
  } else if (op.getInputQuantization() != InputQuantization::none) {
    // x' = dequantize(quantize(x)) in one pass, with the scale and zero
    // point given (static) or of x's range (dynamic).
    auto xType = cast<MemRefType>(x.getType());
    Value scale, zp;
    bool zpUnsigned = true;
    Quantization q{};
    if (op.getInputQuantization() == InputQuantization::dynamic) {
      scale = e.temporary(MemRefType::get({}, e.b.getF32Type()));
      zp = e.temporary(MemRefType::get({}, e.b.getI8Type()));
      emitDynamicRange(e, x, scale, zp);
      q = {IntegerType::get(e.ctx, 8, IntegerType::Unsigned), e.b.getI8Type(),
           true};
    } else {
      scale = e.bufferOf(op.getInputScale());
      zp = e.bufferOf(op.getInputZeroPoint());
      zpUnsigned = e.isUnsigned(op.getInputZeroPoint());
      q = {e.declaredElementType(op.getInputZeroPoint()), e.b.getI8Type(),
           zpUnsigned};
    }
    Value xq = e.temporary(MemRefType::get(xType.getShape(), elem));
    e.elementwise({x, scale, zp}, xq,
                  [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                    Value i = quantizeValue(ob, l, a[0], a[1], a[2], q);
                    return dequantizeValue(ob, l, i, zpUnsigned, a[1], a[2],
                                           zpUnsigned, elem);
                  });
    x = xq;
  }
  Value bias = op.getBias() ? e.denseOf(op.getBias()) : Value();
  lowerGenericLinear(e, x, w, bias, 0, op.getActivation(), out);
  return success();
}

void mlir::tfm::populateQuantizationLowerings(OpLoweringSet &set) {
  set.add<QuantizeOp>(lowerQuantize);
  set.add<DequantizeOp>(lowerDequantize);
  set.add<DynamicQuantizeOp>(lowerDynamicQuantize);
  set.add<MatmulIntegerOp>(lowerMatmulInteger);
  set.add<QuantizedLinearOp>(lowerGenericQuantizedLinear);
}
