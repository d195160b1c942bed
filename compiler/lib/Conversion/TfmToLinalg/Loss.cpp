//===- Loss.cpp - Cross-entropy and its gradient as linalg ----------------===//
//
// Both are row reductions over the classes (the maximum, the sum of
// exponentials, the sum of the logits) followed by one pass per row; the
// loss sums and counts the rows in f64.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/IR/InputValues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The row maximum `mx` and the row sum of exp(x - mx) `se` of x[rows, k].
void rowStatistics(BufferizedEntry &e, Value x, Value mx, Value se) {
  MLIRContext *ctx = e.ctx;
  Type elem = cast<MemRefType>(x.getType()).getElementType();
  AffineMap rk = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap r = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  SmallVector<utils::IteratorType> red = {utils::IteratorType::parallel,
                                          utils::IteratorType::reduction};
  e.fill(mx, e.b.getFloatAttr(elem, -INFINITY));
  e.generic({x}, {rk}, mx, r, red,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::MaximumFOp>(l, a[0], a[1]);
            });
  e.fill(se, e.b.getFloatAttr(elem, 0.0));
  e.generic({x, mx}, {rk, r}, se, r, red,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value d = ob.create<math::ExpOp>(
                  l, ob.create<arith::SubFOp>(l, a[0], a[1]));
              return ob.create<arith::AddFOp>(l, a[2], d);
            });
}

/// Mean cross-entropy over the last axis: the rows' statistics, then the
/// loss from them (crossEntropyFromRowStatistics).
LogicalResult lowerCrossEntropy(CrossEntropyOp op, BufferizedEntry &e) {
  FailureOr<CrossEntropyRows> rows =
      crossEntropyRows(e, op, op.getLogits(), op.getLabelsMutable(),
                       static_cast<int64_t>(op.getIgnoreIndex()));
  if (failed(rows))
    return failure();
  MLIRContext *ctx = e.ctx;
  Type elem = op.getLogits().getType().getElementType();
  auto rowType = MemRefType::get({rows->rows}, elem);
  Value mx = e.temporary(rowType), se = e.temporary(rowType),
        sx = e.temporary(rowType);
  rowStatistics(e, rows->x, mx, se);
  AffineMap rk = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap r = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  SmallVector<utils::IteratorType> red = {utils::IteratorType::parallel,
                                          utils::IteratorType::reduction};
  e.fill(sx, e.b.getFloatAttr(elem, 0.0));
  e.generic({rows->x}, {rk}, sx, r, red,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::AddFOp>(l, a[0], a[1]);
            });
  crossEntropyFromRowStatistics(e, op, *rows, mx, se, sx);
  return success();
}

LogicalResult lowerCrossEntropyGrad(CrossEntropyGradOp op, BufferizedEntry &e) {
  MLIRContext *ctx = e.ctx;
  auto lt = op.getLogits().getType();
  Type elem = lt.getElementType();
  if (!elem.isF32())
    return op.emitError("the ")
           << e.targetName()
           << " backend lowers the cross-entropy gradient for f32 logits "
              "only";
  auto ignore = static_cast<int64_t>(op.getIgnoreIndex());
  FailureOr<CrossEntropyRows> rows =
      crossEntropyRows(e, op, op.getLogits(), op.getLabelsMutable(), ignore);
  if (failed(rows))
    return failure();
  int64_t k = rows->classes;
  Value x = rows->x, labels = rows->labels;
  Type labelType = op.getLabels().getType().getElementType();
  Value out = e.reshape(e.destination(op.getResult()),
                        MemRefType::get({rows->rows, k}, elem));
  auto rowType = MemRefType::get({rows->rows}, elem);
  Value mx = e.temporary(rowType), se = e.temporary(rowType);
  rowStatistics(e, x, mx, se);
  AffineMap rk = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap r = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
  Value count = crossEntropyValidCount(e, labels, ignore);
  Value grad = e.bufferOf(op.getGrad());
  double eps = op.getLabelSmoothing().convertToDouble();
  AffineMap scalar2 = AffineMap::get(2, 0, {}, ctx);
  SmallVector<utils::IteratorType> par(2, utils::IteratorType::parallel);
  e.generic(
      {x, mx, se, labels, grad, count}, {rk, r, r, r, scalar2, scalar2}, out,
      rk, par, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
        auto c = [&](double v) {
          return BufferizedEntry::constantScalar(ob, l, elem, v);
        };
        Value p = ob.create<arith::DivFOp>(
            l,
            ob.create<math::ExpOp>(l, ob.create<arith::SubFOp>(l, a[0], a[1])),
            a[2]);
        Value col = ob.create<arith::IndexCastOp>(
            l, labelType, ob.create<linalg::IndexOp>(l, 1));
        Value hit =
            ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, col, a[3]);
        Value target = ob.create<arith::SelectOp>(
            l, hit, c(1 - eps + eps / double(k)), c(eps / double(k)));
        Value g =
            ob.create<arith::MulFOp>(l, ob.create<arith::DivFOp>(l, a[4], a[5]),
                                     ob.create<arith::SubFOp>(l, p, target));
        return ob.create<arith::SelectOp>(l, labelCounts(ob, l, a[3], ignore),
                                          g, c(0.0));
      });
  return success();
}

} // namespace

void mlir::tfm::populateLossLowerings(OpLoweringSet &set) {
  set.add<CrossEntropyOp>(lowerCrossEntropy);
  set.add<CrossEntropyGradOp>(lowerCrossEntropyGrad);
}

std::pair<Value, Value>
mlir::tfm::crossEntropyRowTerm(OpBuilder &ob, Location l, CrossEntropyOp op,
                               const CrossEntropyRows &rows, Value row,
                               Value mx, Value se, Value sx, Value label) {
  Type f64 = ob.getF64Type();
  int64_t k = rows.classes;
  double eps = op.getLabelSmoothing().convertToDouble();
  auto ignore = static_cast<int64_t>(op.getIgnoreIndex());
  auto c = [&](double v) {
    return BufferizedEntry::constantScalar(ob, l, f64, v);
  };
  auto wide = [&](Value v) -> Value {
    return v.getType().isF64() ? v : ob.create<arith::ExtFOp>(l, f64, v);
  };
  Value lse = ob.create<arith::AddFOp>(l, wide(mx),
                                       ob.create<math::LogOp>(l, wide(se)));
  Value valid = labelCounts(ob, l, label, ignore);
  Value idx = ob.create<arith::IndexCastOp>(l, ob.getIndexType(), label);
  idx = ob.create<arith::MaxSIOp>(l, idx,
                                  ob.create<arith::ConstantIndexOp>(l, 0));
  idx = ob.create<arith::MinSIOp>(l, idx,
                                  ob.create<arith::ConstantIndexOp>(l, k - 1));
  Value xl = wide(ob.create<memref::LoadOp>(l, rows.x, ValueRange{row, idx}));
  Value picked = ob.create<arith::SubFOp>(l, xl, lse);
  Value sumLogp = ob.create<arith::SubFOp>(
      l, wide(sx), ob.create<arith::MulFOp>(l, c(double(k)), lse));
  Value loss = ob.create<arith::SubFOp>(
      l, ob.create<arith::MulFOp>(l, c(-(1 - eps)), picked),
      ob.create<arith::MulFOp>(l, c(eps / double(k)), sumLogp));
  return {ob.create<arith::SelectOp>(l, valid, loss, c(0)), valid};
}

void mlir::tfm::crossEntropyFromRowStatistics(BufferizedEntry &e,
                                              CrossEntropyOp op,
                                              const CrossEntropyRows &rows,
                                              Value mx, Value se, Value sx) {
  MLIRContext *ctx = e.ctx;
  OpBuilder &b = e.b;
  Type elem = op.getLogits().getType().getElementType();
  // Sum and count over the rows, in f64.
  Type f64 = b.getF64Type();
  Value total = e.temporary(MemRefType::get({}, f64));
  Value count = e.temporary(MemRefType::get({}, f64));
  e.fill(total, b.getF64FloatAttr(0));
  e.fill(count, b.getF64FloatAttr(0));
  AffineMap id1 = AffineMap::getMultiDimIdentityMap(1, ctx);
  AffineMap scalar = AffineMap::get(1, 0, {}, ctx);
  b.create<linalg::GenericOp>(
      e.loc, TypeRange{}, ValueRange{mx, se, sx, rows.labels},
      ValueRange{total, count},
      ArrayRef<AffineMap>{id1, id1, id1, id1, scalar, scalar},
      ArrayRef<utils::IteratorType>{utils::IteratorType::reduction},
      [&](OpBuilder &ob, Location l, ValueRange a) {
        auto [term, valid] = crossEntropyRowTerm(
            ob, l, op, rows, ob.create<linalg::IndexOp>(l, 0), a[0], a[1], a[2],
            a[3]);
        auto c = [&](double v) {
          return BufferizedEntry::constantScalar(ob, l, f64, v);
        };
        Value t = ob.create<arith::AddFOp>(l, a[4], term);
        Value n = ob.create<arith::AddFOp>(
            l, a[5], ob.create<arith::SelectOp>(l, valid, c(1), c(0)));
        ob.create<linalg::YieldOp>(l, ValueRange{t, n});
      });
  // Like PyTorch, every label ignored gives NaN (0 / 0).
  AffineMap none = AffineMap::get(0, 0, {}, ctx);
  e.generic({total, count}, {none, none}, e.destination(op.getResult()), none,
            {}, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value mean = ob.create<arith::DivFOp>(l, a[0], a[1]);
              return elem.isF64()
                         ? mean
                         : ob.create<arith::TruncFOp>(l, elem, mean).getResult();
            });
}

Value mlir::tfm::labelCounts(OpBuilder &b, Location loc, Value label,
                             int64_t ignore) {
  return b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::ne, label,
      b.create<arith::ConstantOp>(loc,
                                  b.getIntegerAttr(label.getType(), ignore)));
}

Value mlir::tfm::crossEntropyValidCount(BufferizedEntry &e, Value labels,
                                        int64_t ignore) {
  MLIRContext *ctx = e.ctx;
  Type elem = Float32Type::get(ctx);
  Value count = e.temporary(MemRefType::get({}, elem));
  e.fill(count, e.b.getFloatAttr(elem, 0.0));
  e.generic({labels}, {AffineMap::getMultiDimIdentityMap(1, ctx)}, count,
            AffineMap::get(1, 0, {}, ctx), {utils::IteratorType::reduction},
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value one = ob.create<arith::SelectOp>(
                  l, labelCounts(ob, l, a[0], ignore),
                  BufferizedEntry::constantScalar(ob, l, elem, 1.0),
                  BufferizedEntry::constantScalar(ob, l, elem, 0.0));
              return ob.create<arith::AddFOp>(l, a[1], one);
            });
  return count;
}

FailureOr<CrossEntropyRows>
mlir::tfm::crossEntropyRows(BufferizedEntry &e, Operation *op, Value logits,
                            OpOperand &labels, int64_t ignore) {
  auto lt = cast<RankedTensorType>(logits.getType());
  Type elem = lt.getElementType();
  int64_t k = lt.getShape().back(), rows = product(lt.getShape().drop_back());
  if (k == 0)
    return op->emitError("the ")
           << e.targetName() << " backend needs at least one class";
  auto [lower, upper] = *indexRangeOf(labels);
  if (failed(e.checkIndices(op, labels.get(), lower, upper, ignore)))
    return failure();
  Type labelType =
      cast<RankedTensorType>(labels.get().getType()).getElementType();
  return CrossEntropyRows{
      e.reshape(e.denseOf(logits), MemRefType::get({rows, k}, elem)),
      e.reshape(e.denseOf(labels.get()), MemRefType::get({rows}, labelType)),
      rows, k};
}
