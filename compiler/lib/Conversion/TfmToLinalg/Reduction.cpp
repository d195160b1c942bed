//===- Reduction.cpp - Reductions and softmax as linalg -------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// What a softmax's passes along `axis` share: a temporary of the shape
/// with that axis kept at 1, the maps to it and to the whole, and the
/// iterators of a pass that reduces along the axis and one that does not.
struct AlongAxis {
  Value reduced;
  AffineMap id, toReduced;
  SmallVector<utils::IteratorType> reducing, parallel;

  AlongAxis(BufferizedEntry &e, MemRefType type, int64_t axis) {
    MLIRContext *ctx = e.ctx;
    int64_t rank = type.getRank();
    SmallVector<int64_t> reducedShape(type.getShape());
    reducedShape[axis] = 1;
    reduced = e.temporary(MemRefType::get(reducedShape, type.getElementType()));
    SmallVector<AffineExpr> exprs;
    for (int64_t i = 0; i < rank; ++i)
      exprs.push_back(i == axis ? getAffineConstantExpr(0, ctx)
                                : getAffineDimExpr(i, ctx));
    id = AffineMap::getMultiDimIdentityMap(rank, ctx);
    toReduced = AffineMap::get(rank, 0, exprs, ctx);
    parallel.assign(rank, utils::IteratorType::parallel);
    reducing = parallel;
    reducing[axis] = utils::IteratorType::reduction;
  }
};

} // namespace

void mlir::tfm::lowerGenericSoftmax(BufferizedEntry &e, Value input,
                                    int64_t axis, Value out) {
  auto type = cast<MemRefType>(input.getType());
  Type elem = type.getElementType();
  AlongAxis along(e, type, axis);
  Value red = along.reduced;
  AffineMap id = along.id, redMap = along.toReduced;
  ArrayRef<utils::IteratorType> its = along.reducing, par = along.parallel;
  e.fill(red, e.b.getFloatAttr(elem, -INFINITY));
  e.generic({input}, {id}, red, redMap, its,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::MaximumFOp>(l, a[0], a[1]);
            });
  e.generic({input, red}, {id, redMap}, out, id, par,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<math::ExpOp>(
                  l, ob.create<arith::SubFOp>(l, a[0], a[1]));
            });
  e.fill(red, e.b.getFloatAttr(elem, 0.0));
  e.generic({out}, {id}, red, redMap, its,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::AddFOp>(l, a[0], a[1]);
            });
  e.generic({out, red}, {id, redMap}, out, id, par,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::DivFOp>(l, a[0], a[1]);
            });
}

namespace {

LogicalResult lowerReduce(ReduceOp op, BufferizedEntry &e) {
  MLIRContext *ctx = e.ctx;
  OpBuilder &b = e.b;
  auto inType = op.getInput().getType();
  Type elem = inType.getElementType();
  int64_t rank = inType.getRank();
  SmallVector<bool> reduced(rank, false);
  for (int64_t a : op.getAxes())
    reduced[a < 0 ? a + rank : a] = true;
  Value out = e.destination(op.getResult());
  SmallVector<AffineExpr> exprs;
  SmallVector<utils::IteratorType> its;
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i) {
    its.push_back(reduced[i] ? utils::IteratorType::reduction
                             : utils::IteratorType::parallel);
    if (reduced[i]) {
      count *= inType.getDimSize(i);
      if (op.getKeepdims())
        exprs.push_back(getAffineConstantExpr(0, ctx));
    } else {
      exprs.push_back(getAffineDimExpr(i, ctx));
    }
  }
  bool isFloat = isa<FloatType>(elem);
  bool u = e.isUnsigned(op.getInput());
  ReduceKind kind = op.getKind();
  Attribute init;
  if (kind == ReduceKind::sum || kind == ReduceKind::mean)
    init = isFloat ? Attribute(b.getFloatAttr(elem, 0.0))
                   : Attribute(b.getIntegerAttr(elem, 0));
  else if (isFloat)
    init = b.getFloatAttr(elem, kind == ReduceKind::max ? -INFINITY : INFINITY);
  else {
    unsigned w = elem.getIntOrFloatBitWidth();
    APInt lowest = u ? APInt::getMinValue(w) : APInt::getSignedMinValue(w);
    APInt highest = u ? APInt::getMaxValue(w) : APInt::getSignedMaxValue(w);
    init = b.getIntegerAttr(elem, kind == ReduceKind::max ? lowest : highest);
  }
  // `fm` applies to floats only.
  auto combine = [&](OpBuilder &ob, Location l, Value acc, Value x,
                     arith::FastMathFlags fm) -> Value {
    auto flags = arith::FastMathFlagsAttr::get(ctx, fm);
    switch (kind) {
    case ReduceKind::sum:
    case ReduceKind::mean:
      return isFloat ? ob.create<arith::AddFOp>(l, acc, x, flags).getResult()
                     : ob.create<arith::AddIOp>(l, acc, x).getResult();
    case ReduceKind::max:
      if (isFloat)
        return ob.create<arith::MaximumFOp>(l, acc, x, flags);
      return u ? ob.create<arith::MaxUIOp>(l, acc, x).getResult()
               : ob.create<arith::MaxSIOp>(l, acc, x).getResult();
    case ReduceKind::min:
      if (isFloat)
        return ob.create<arith::MinimumFOp>(l, acc, x, flags);
      return u ? ob.create<arith::MinUIOp>(l, acc, x).getResult()
               : ob.create<arith::MinSIOp>(l, acc, x).getResult();
    }
    return x;
  };
  int64_t lead = 0;
  while (lead < rank && !reduced[lead])
    ++lead;
  bool trailing = llvm::all_of(ArrayRef<bool>(reduced).drop_front(lead),
                               [](bool r) { return r; });
  Location loc = e.loc;
  if (isFloat && trailing && count > 1) {
    // Reduced axes last (layer norm's statistics, a loss over classes):
    // rows of `count` contiguous elements, each summed in a register with
    // reassociation allowed so that the loop vectorizes. Written as a
    // generic, the accumulator would be a store to the result every
    // element, which the vectorizer cannot keep in a register because it
    // cannot tell the result from the input (both live in the arena).
    int64_t rows = inType.getNumElements() / count;
    Value in2 = e.reshape(e.denseOf(op.getInput()),
                          MemRefType::get({rows, count}, elem));
    Value out1 = e.reshape(out, MemRefType::get({rows}, elem));
    Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    Value initValue = b.create<arith::ConstantOp>(loc, cast<TypedAttr>(init));
    // Rows are independent: a parallel loop, which the GPU maps to
    // threads and the CPU runs in order.
    b.create<scf::ParallelOp>(
        loc, ValueRange{zero},
        ValueRange{b.create<arith::ConstantIndexOp>(loc, rows)},
        ValueRange{one}, [&](OpBuilder &ob, Location l, ValueRange ivs) {
          Value i = ivs[0];
          auto inner = ob.create<scf::ForOp>(
              l, zero, ob.create<arith::ConstantIndexOp>(l, count), one,
              ValueRange{initValue},
              [&](OpBuilder &ib, Location il, Value j, ValueRange acc) {
                Value x = ib.create<memref::LoadOp>(il, in2, ValueRange{i, j});
                ib.create<scf::YieldOp>(
                    il, combine(ib, il, acc[0], x, arith::FastMathFlags::reassoc));
              });
          Value r = inner.getResult(0);
          if (kind == ReduceKind::mean)
            r = ob.create<arith::DivFOp>(
                l, r,
                BufferizedEntry::constantScalar(ob, l, elem,
                                                static_cast<double>(count)));
          ob.create<memref::StoreOp>(l, r, out1, ValueRange{i});
        });
    return success();
  }
  e.fill(out, init);
  e.generic({e.bufferOf(op.getInput())},
            {AffineMap::getMultiDimIdentityMap(rank, ctx)}, out,
            AffineMap::get(rank, 0, exprs, ctx), its,
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return combine(ob, l, a[1], a[0], arith::FastMathFlags::none);
            });
  if (kind == ReduceKind::mean)
    e.elementwise({out}, out,
                  [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                    return ob.create<arith::DivFOp>(
                        l, a[0],
                        BufferizedEntry::constantScalar(
                            ob, l, elem, static_cast<double>(count)));
                  });
  return success();
}

} // namespace

/// The sum into a temporary, then one elementwise pass.
void mlir::tfm::lowerGenericSoftmaxGrad(BufferizedEntry &e, Value y, Value dy,
                                        int64_t axis, double scale, Value out) {
  auto type = cast<MemRefType>(y.getType());
  Type elem = type.getElementType();
  AlongAxis along(e, type, axis);
  Value dot = along.reduced;
  AffineMap id = along.id, redMap = along.toReduced;
  e.fill(dot, e.b.getFloatAttr(elem, 0.0));
  e.generic({dy, y}, {id, id}, dot, redMap, along.reducing,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::AddFOp>(
                  l, a[2], ob.create<arith::MulFOp>(l, a[0], a[1]));
            });
  e.generic({y, dy, dot}, {id, id, redMap}, out, id, along.parallel,
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value v = ob.create<arith::MulFOp>(
                  l, a[0], ob.create<arith::SubFOp>(l, a[1], a[2]));
              if (scale == 1.0)
                return v;
              return ob.create<arith::MulFOp>(
                  l, v,
                  ob.create<arith::ConstantOp>(
                      l, ob.getFloatAttr(a[0].getType(), scale)));
            });
}

static LogicalResult lowerSoftmaxGrad(SoftmaxGradOp op, BufferizedEntry &e) {
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (axis < 0)
    axis += op.getType().getRank();
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  lowerGenericSoftmaxGrad(e, e.bufferOf(op.getOutput()),
                          e.bufferOf(op.getGrad()), axis,
                          op.getScale().convertToDouble(), out);
  return success();
}

void mlir::tfm::populateReductionLowerings(OpLoweringSet &set) {
  set.add<SoftmaxGradOp>(lowerSoftmaxGrad);
  set.add<ReduceOp>(lowerReduce);
  set.add<SoftmaxOp>([](SoftmaxOp s, BufferizedEntry &e) -> LogicalResult {
    int64_t rank = s.getType().getRank();
    int64_t axis = static_cast<int64_t>(s.getAxis());
    lowerGenericSoftmax(e, e.bufferOf(s.getInput()), axis < 0 ? axis + rank : axis,
                        e.destination(s.getResult()));
    return success();
  });
}
