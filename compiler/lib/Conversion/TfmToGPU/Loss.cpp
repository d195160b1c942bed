//===- Loss.cpp - Cross-entropy on the GPU, a warp per row ----------------===//
//
// The cross-entropy and its gradient read each row of logits for three
// statistics (the maximum, the sum of exponentials, the sum of the
// logits), which the neutral lowering takes in a kernel each, a thread per
// row, and the gradient then writes each row in a fourth. Here a warp per
// row (WarpRows.h) takes them all in one kernel: the maximum and the sum
// of the logits in one pass, the exponentials in a second, and for the
// gradient the row itself in a third. The loss's mean over the rows and
// the gradient's count of the labels not ignored, which the neutral
// lowering walks on one thread, take a warp too (or a wide row's warps):
// each lane sums its rows' terms (crossEntropyRowTerm, the neutral
// lowering's) in f64, and the lanes' sums are added in f32.
//
//===----------------------------------------------------------------------===//

#include "WarpRows.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The row's maximum and sum of exp(x - maximum), in every lane, and the
/// sum of its logits when `sum` is asked for.
struct RowStatistics {
  Value max, expSum, sum;
};

RowStatistics rowStatistics(WarpRows &w, Value x, bool sum) {
  OpBuilder &kb = w.kb;
  Location loc = w.loc;
  auto at = [&](OpBuilder &lb, Value col) -> Value {
    return lb.create<memref::LoadOp>(loc, x, ValueRange{w.row, col});
  };
  SmallVector<Value> inits{w.f32(kb, -INFINITY)};
  if (sum)
    inits.push_back(w.f32(kb, 0.0));
  ValueRange first =
      w.pass(inits, [&](OpBuilder &lb, Value col, ValueRange acc) {
        Value v = at(lb, col);
        SmallVector<Value> next{lb.create<arith::MaximumFOp>(loc, acc[0], v)};
        if (sum)
          next.push_back(lb.create<arith::AddFOp>(loc, acc[1], v));
        return next;
      });
  RowStatistics s;
  s.max = w.allReduce(first[0], /*maximum=*/true);
  if (sum)
    s.sum = w.allReduce(first[1], /*maximum=*/false);
  Value partial =
      w.pass(w.f32(kb, 0.0), [&](OpBuilder &lb, Value col, Value acc) -> Value {
        return lb.create<arith::AddFOp>(
            loc, acc,
            lb.create<math::ExpOp>(
                loc, lb.create<arith::SubFOp>(loc, at(lb, col), s.max)));
      });
  s.expSum = w.allReduce(partial, /*maximum=*/false);
  return s;
}

/// Σ over the `n` rows of the f64 terms `terms` gives for each (its lanes'
/// shares in f64, then added across them in f32), in every thread of the
/// warps of one row of `w`'s kernel; `w` reads no other row.
SmallVector<Value>
sumOverRows(WarpRows &w, int64_t count,
            function_ref<SmallVector<Value>(OpBuilder &, Value)> terms) {
  OpBuilder &kb = w.kb;
  Location loc = w.loc;
  Value zero = kb.create<arith::ConstantOp>(loc, kb.getF64FloatAttr(0));
  ValueRange partial =
      w.pass(SmallVector<Value>(count, zero),
             [&](OpBuilder &lb, Value r, ValueRange acc) -> SmallVector<Value> {
               SmallVector<Value> next;
               for (auto [a, t] : llvm::zip(acc, terms(lb, r)))
                 next.push_back(lb.create<arith::AddFOp>(loc, a, t));
               return next;
             });
  SmallVector<Value> sums;
  for (Value p : partial)
    sums.push_back(w.allReduce(
        kb.create<arith::TruncFOp>(loc, kb.getF32Type(), p), false));
  return sums;
}

/// 1 where `valid` holds, else 0 (f64).
Value oneIf(OpBuilder &b, Location loc, Value valid) {
  return b.create<arith::SelectOp>(
      loc, valid, b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(1)),
      b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(0)));
}

/// The loss: the mean over the rows whose label counts, from their
/// statistics, in a kernel of one row of `rows.rows` columns.
void warpCrossEntropyMean(BufferizedEntry &e, CrossEntropyOp op,
                          const CrossEntropyRows &rows, Value mx, Value se,
                          Value sx) {
  Location loc = op.getLoc();
  Value out = e.destination(op.getResult());
  WarpRows w(e.b, loc, /*m=*/1, rows.rows);
  OpBuilder &kb = w.kb;
  SmallVector<Value> sums =
      sumOverRows(w, 2, [&](OpBuilder &lb, Value r) -> SmallVector<Value> {
        auto at = [&](Value buffer) {
          return lb.create<memref::LoadOp>(loc, buffer, r);
        };
        auto [term, valid] = crossEntropyRowTerm(
            lb, loc, op, rows, r, at(mx), at(se), at(sx), at(rows.labels));
        return {term, oneIf(lb, loc, valid)};
      });
  // Like PyTorch, every label ignored gives NaN (0 / 0).
  Value mean = kb.create<arith::DivFOp>(loc, sums[0], sums[1]);
  OpBuilder tb = kb.create<scf::IfOp>(loc, w.storesRow()).getThenBodyBuilder();
  tb.create<memref::StoreOp>(loc, mean, out, ValueRange{});
}

/// A 0-d f32 buffer holding how many of `labels` [rows] are not `ignore`.
Value warpValidCount(BufferizedEntry &e, Location loc, Value labels,
                     int64_t rows, int64_t ignore) {
  Value count = e.temporary(MemRefType::get({}, e.b.getF32Type()));
  WarpRows w(e.b, loc, /*m=*/1, rows);
  SmallVector<Value> sums =
      sumOverRows(w, 1, [&](OpBuilder &lb, Value r) -> SmallVector<Value> {
        return {oneIf(lb, loc,
                      labelCounts(lb, loc,
                                  lb.create<memref::LoadOp>(loc, labels, r),
                                  ignore))};
      });
  OpBuilder tb =
      w.kb.create<scf::IfOp>(loc, w.storesRow()).getThenBodyBuilder();
  tb.create<memref::StoreOp>(loc, sums[0], count, ValueRange{});
  return count;
}

} // namespace

LogicalResult mlir::tfm::lowerWarpCrossEntropy(CrossEntropyOp op,
                                               BufferizedEntry &e) {
  FailureOr<CrossEntropyRows> rows =
      crossEntropyRows(e, op, op.getLogits(), op.getLabelsMutable(),
                       static_cast<int64_t>(op.getIgnoreIndex()));
  if (failed(rows))
    return failure();
  auto rowType = MemRefType::get({rows->rows}, Float32Type::get(e.ctx));
  Value mx = e.temporary(rowType), se = e.temporary(rowType),
        sx = e.temporary(rowType);
  WarpRows w(e.b, op.getLoc(), rows->rows, rows->classes);
  RowStatistics s = rowStatistics(w, rows->x, /*sum=*/true);
  OpBuilder tb =
      w.kb.create<scf::IfOp>(w.loc, w.storesRow()).getThenBodyBuilder();
  for (auto [v, buffer] : {std::pair{s.max, mx}, {s.expSum, se}, {s.sum, sx}})
    tb.create<memref::StoreOp>(w.loc, v, buffer, w.row);
  warpCrossEntropyMean(e, op, *rows, mx, se, sx);
  return success();
}

LogicalResult mlir::tfm::lowerWarpCrossEntropyGrad(CrossEntropyGradOp op,
                                                   BufferizedEntry &e) {
  auto ignore = static_cast<int64_t>(op.getIgnoreIndex());
  FailureOr<CrossEntropyRows> rows =
      crossEntropyRows(e, op, op.getLogits(), op.getLabelsMutable(), ignore);
  if (failed(rows))
    return failure();
  int64_t k = rows->classes;
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  Value dx = viewAs(e, out, {rows->rows, k});
  Value count =
      warpValidCount(e, op.getLoc(), rows->labels, rows->rows, ignore);
  Value grad = e.bufferOf(op.getGrad());
  double eps = op.getLabelSmoothing().convertToDouble();

  WarpRows w(e.b, op.getLoc(), rows->rows, k);
  OpBuilder &kb = w.kb;
  Location loc = w.loc;
  RowStatistics s = rowStatistics(w, rows->x, /*sum=*/false);
  Value label = kb.create<memref::LoadOp>(loc, rows->labels, w.row);
  Value valid = labelCounts(kb, loc, label, ignore);
  Value factor = kb.create<arith::DivFOp>(
      loc, kb.create<memref::LoadOp>(loc, grad, ValueRange{}),
      kb.create<memref::LoadOp>(loc, count, ValueRange{}));
  Value target = kb.create<arith::IndexCastOp>(loc, kb.getIndexType(), label);
  w.pass(Value(), [&](OpBuilder &lb, Value col, Value) -> Value {
    Value p = lb.create<arith::DivFOp>(
        loc,
        lb.create<math::ExpOp>(
            loc,
            lb.create<arith::SubFOp>(
                loc,
                lb.create<memref::LoadOp>(loc, rows->x, ValueRange{w.row, col}),
                s.max)),
        s.expSum);
    Value hit =
        lb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, col, target);
    Value q = lb.create<arith::SelectOp>(loc, hit,
                                         w.f32(lb, 1 - eps + eps / double(k)),
                                         w.f32(lb, eps / double(k)));
    Value g = lb.create<arith::MulFOp>(loc, factor,
                                       lb.create<arith::SubFOp>(loc, p, q));
    // Exactly 0 where the label is ignored, whatever the row holds.
    w.storeIfLive(lb, lb.create<arith::SelectOp>(loc, valid, g, w.f32(lb, 0.0)),
                  dx, col);
    return Value();
  });
  return success();
}
