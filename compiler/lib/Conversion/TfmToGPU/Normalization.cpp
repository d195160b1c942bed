//===- Normalization.cpp - Row kernels on the GPU, a warp per row ---------===//
//
// Layer norm (with its residual add), its backward pass (the input's
// gradient; the scale's and bias's are sums over the rows, left to the
// neutral lowering's column reductions from the statistics kept here) and
// the softmaxes (with the masked softmax's scale, mask and causal triangle)
// as one kernel each of a warp per row (WarpRows.h), where the neutral
// lowering makes six to eight (fills, row reductions of a thread per row,
// elementwise passes), each a trip through memory.
//
//===----------------------------------------------------------------------===//

#include "WarpRows.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

LogicalResult mlir::tfm::lowerWarpLayerNorm(BufferizedEntry &e, Value input,
                                            Value residual, Value scale,
                                            Value bias, int64_t axis,
                                            double epsilon, bool rms,
                                            Value result, Value sum) {
  Location loc = result.getLoc();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(result.getType()).getShape();
  if (axis < 0)
    axis += shape.size();
  int64_t m = product(shape.take_front(axis)),
          n = product(shape.drop_front(axis));
  Value out = e.destination(result);
  Value sumOut = sum ? e.destination(sum) : Value();
  if (!out || (sum && !sumOut))
    return failure();
  if (m == 0 || n == 0)
    return success();
  // Either operand may broadcast over the leading dimensions (position
  // embeddings added to each sequence of a batch).
  ArrayRef<int64_t> lead = shape.take_front(axis);
  int64_t trailing = int64_t(shape.size()) - axis;
  auto [x, xStrides] = broadcastRows(e, input, lead, trailing, n);
  auto [r, rStrides] = residual ? broadcastRows(e, residual, lead, trailing, n)
                                : std::pair<Value, SmallVector<int64_t>>();
  Value gamma = viewAs(e, e.denseOf(scale), {n});
  Value beta = bias ? viewAs(e, e.denseOf(bias), {n}) : Value();
  Value y = viewAs(e, out, {m, n});
  Value s = sumOut ? viewAs(e, sumOut, {m, n}) : Value();

  WarpRows w(e.b, loc, m, n);
  Value xRow = w.rowOf(lead, xStrides);
  Value rRow = r ? w.rowOf(lead, rStrides) : Value();
  // input (+ residual) at the column.
  auto element = [&](OpBuilder &lb, Value col) -> Value {
    Value v = lb.create<memref::LoadOp>(loc, x, ValueRange{xRow, col});
    if (r)
      v = lb.create<arith::AddFOp>(
          loc, v, lb.create<memref::LoadOp>(loc, r, ValueRange{rRow, col}));
    return v;
  };
  // The sum (and the residual stream's s, written once); then the squared
  // deviations, two passes rather than E[x^2] - mean^2, which cancels badly
  // for rows far from zero. RMSNorm's mean is zero: one pass writes s and
  // sums the squares.
  OpBuilder &kb = w.kb;
  Value mean = w.f32(kb, 0.0);
  if (!rms) {
    Value total = w.pass(w.f32(kb, 0.0),
                         [&](OpBuilder &lb, Value col, Value acc) -> Value {
                           Value v = element(lb, col);
                           if (s)
                             w.storeIfLive(lb, v, s, col);
                           return lb.create<arith::AddFOp>(loc, acc, v);
                         });
    mean = kb.create<arith::DivFOp>(loc, w.allReduce(total, false),
                                    w.f32(kb, double(n)));
  }
  Value squares =
      w.pass(w.f32(kb, 0.0), [&](OpBuilder &lb, Value col, Value acc) -> Value {
        Value v = element(lb, col);
        if (s && rms)
          w.storeIfLive(lb, v, s, col);
        Value d = lb.create<arith::SubFOp>(loc, v, mean);
        return lb.create<arith::AddFOp>(loc, acc,
                                        lb.create<arith::MulFOp>(loc, d, d));
      });
  Value var = kb.create<arith::DivFOp>(loc, w.allReduce(squares, false),
                                       w.f32(kb, double(n)));
  Value rstd = kb.create<arith::DivFOp>(
      loc, w.f32(kb, 1.0),
      kb.create<math::SqrtOp>(
          loc, kb.create<arith::AddFOp>(loc, var, w.f32(kb, epsilon))));
  w.pass(Value(), [&](OpBuilder &lb, Value col, Value) -> Value {
    Value v = lb.create<arith::MulFOp>(
        loc,
        lb.create<arith::MulFOp>(
            loc, lb.create<arith::SubFOp>(loc, element(lb, col), mean), rstd),
        lb.create<memref::LoadOp>(loc, gamma, col));
    if (beta)
      v = lb.create<arith::AddFOp>(loc, v,
                                   lb.create<memref::LoadOp>(loc, beta, col));
    w.storeIfLive(lb, v, y, col);
    return Value();
  });
  return success();
}

LogicalResult mlir::tfm::lowerWarpLayerNormGrad(LayerNormGradOp op,
                                                BufferizedEntry &e) {
  Location loc = op.getLoc();
  int64_t n = op.getScale().getType().getNumElements();
  int64_t m = op.getInput().getType().getNumElements() / n;
  Value dx = e.destination(op.getInputGrad());
  Value dscale = e.destination(op.getScaleGrad());
  Value dbias = e.destination(op.getBiasGrad());
  if (!dx || !dscale || !dbias)
    return failure();
  Value x = viewAs(e, e.denseOf(op.getInput()), {m, n});
  Value dy = viewAs(e, e.denseOf(op.getGrad()), {m, n});
  Value gamma = viewAs(e, e.denseOf(op.getScale()), {n});
  Value dxRows = viewAs(e, dx, {m, n});
  // The rows' statistics, kept for the column sums of the scale's gradient.
  auto f32 = Float32Type::get(e.ctx);
  Value means = e.temporary(MemRefType::get({m}, f32));
  Value rstds = e.temporary(MemRefType::get({m}, f32));
  double epsilon = op.getEpsilon().convertToDouble();
  bool rms = op.getRms();

  WarpRows w(e.b, loc, m, n);
  OpBuilder &kb = w.kb;
  auto load = [&](OpBuilder &lb, Value rows, Value col) -> Value {
    return lb.create<memref::LoadOp>(loc, rows, ValueRange{w.row, col});
  };
  auto sumOver = [&](function_ref<Value(OpBuilder &, Value)> term) {
    Value partial = w.pass(
        w.f32(kb, 0.0), [&](OpBuilder &lb, Value col, Value acc) -> Value {
          return lb.create<arith::AddFOp>(loc, acc, term(lb, col));
        });
    return kb.create<arith::DivFOp>(loc, w.allReduce(partial, false),
                                    w.f32(kb, double(n)));
  };
  // RMSNorm's mean is held at zero, and so is the mean(g) term that
  // differentiates layer norm's.
  Value mean =
      rms ? w.f32(kb, 0.0)
          : sumOver([&](OpBuilder &lb, Value col) { return load(lb, x, col); });
  Value var = sumOver([&](OpBuilder &lb, Value col) -> Value {
    Value d = lb.create<arith::SubFOp>(loc, load(lb, x, col), mean);
    return lb.create<arith::MulFOp>(loc, d, d);
  });
  Value rstd = kb.create<arith::DivFOp>(
      loc, w.f32(kb, 1.0),
      kb.create<math::SqrtOp>(
          loc, kb.create<arith::AddFOp>(loc, var, w.f32(kb, epsilon))));
  // g = dy · scale and x̂ = (x - mean) · rstd at the column.
  auto g = [&](OpBuilder &lb, Value col) -> Value {
    return lb.create<arith::MulFOp>(loc, load(lb, dy, col),
                                    lb.create<memref::LoadOp>(loc, gamma, col));
  };
  auto xhat = [&](OpBuilder &lb, Value col) -> Value {
    return lb.create<arith::MulFOp>(
        loc, lb.create<arith::SubFOp>(loc, load(lb, x, col), mean), rstd);
  };
  Value meanG = rms ? w.f32(kb, 0.0) : sumOver(g);
  Value meanGX = sumOver([&](OpBuilder &lb, Value col) -> Value {
    return lb.create<arith::MulFOp>(loc, g(lb, col), xhat(lb, col));
  });
  w.pass(Value(), [&](OpBuilder &lb, Value col, Value) -> Value {
    Value t = lb.create<arith::SubFOp>(
        loc, lb.create<arith::SubFOp>(loc, g(lb, col), meanG),
        lb.create<arith::MulFOp>(loc, xhat(lb, col), meanGX));
    w.storeIfLive(lb, lb.create<arith::MulFOp>(loc, rstd, t), dxRows, col);
    return Value();
  });
  // Lane 0 of each warp keeps its row's statistics.
  auto keep = kb.create<scf::IfOp>(loc, w.storesRow());
  OpBuilder tb = keep.getThenBodyBuilder();
  tb.create<memref::StoreOp>(loc, mean, means, w.row);
  tb.create<memref::StoreOp>(loc, rstd, rstds, w.row);

  layerNormColumnGradients(e, x, dy, means, rstds, viewAs(e, dscale, {n}),
                           viewAs(e, dbias, {n}));
  return success();
}

LogicalResult mlir::tfm::lowerWarpSoftmax(BufferizedEntry &e, Value input,
                                          Value mask, MaskKind kind,
                                          double scale, bool causal,
                                          Value result) {
  Location loc = result.getLoc();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(input.getType()).getShape();
  int64_t rank = shape.size();
  int64_t n = shape.back(), m = product(shape.drop_back());
  Value out = e.destination(result);
  if (!out)
    return failure();
  if (m == 0 || n == 0)
    return success();
  Value x = viewAs(e, e.denseOf(input), {m, n});
  Value y = viewAs(e, out, {m, n});
  Value maskBuffer = mask ? e.bufferOf(mask) : Value();
  AffineMap maskMap =
      mask ? e.broadcastMap(cast<MemRefType>(maskBuffer.getType()).getShape(),
                            shape)
           : AffineMap();

  WarpRows w(e.b, loc, m, n);
  OpBuilder &kb = w.kb;
  // The row's position in the input's leading dimensions, for the mask's
  // broadcast and the causal triangle (row i of each [.., n] matrix).
  SmallVector<Value> lead(rank - 1);
  Value rest = w.row;
  for (int64_t d = rank - 2; d >= 0; --d) {
    lead[d] = kb.create<arith::RemUIOp>(loc, rest, w.index(kb, shape[d]));
    rest = kb.create<arith::DivUIOp>(loc, rest, w.index(kb, shape[d]));
  }
  // The score at the column, as the neutral lowering computes it.
  auto score = [&](OpBuilder &lb, Value col) -> Value {
    Value s = lb.create<arith::MulFOp>(
        loc, lb.create<memref::LoadOp>(loc, x, ValueRange{w.row, col}),
        w.f32(lb, scale));
    if (mask) {
      SmallVector<Value> at(lead);
      at.push_back(col);
      Value mv = lb.create<memref::LoadOp>(loc, maskBuffer,
                                           indicesAt(lb, loc, maskMap, at));
      if (kind == MaskKind::boolean) {
        s = lb.create<arith::SelectOp>(loc, mv, s, w.f32(lb, -INFINITY));
      } else {
        s = lb.create<arith::AddFOp>(loc, s, maskValueAsF32(lb, loc, mv));
      }
    }
    if (causal) {
      Value i = rank >= 2 ? lead.back() : w.index(lb, 0);
      Value later =
          lb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ugt, col, i);
      s = lb.create<arith::SelectOp>(loc, later, w.f32(lb, -INFINITY), s);
    }
    return s;
  };
  Value peak = w.pass(
      w.f32(kb, -INFINITY), [&](OpBuilder &lb, Value col, Value acc) -> Value {
        return lb.create<arith::MaximumFOp>(loc, acc, score(lb, col));
      });
  Value max = w.allReduce(peak, true);
  auto weight = [&](OpBuilder &lb, Value col) -> Value {
    return lb.create<math::ExpOp>(
        loc, lb.create<arith::SubFOp>(loc, score(lb, col), max));
  };
  Value partial =
      w.pass(w.f32(kb, 0.0), [&](OpBuilder &lb, Value col, Value acc) -> Value {
        return lb.create<arith::AddFOp>(loc, acc, weight(lb, col));
      });
  Value total = w.allReduce(partial, false);
  w.pass(Value(), [&](OpBuilder &lb, Value col, Value) -> Value {
    w.storeIfLive(lb, lb.create<arith::DivFOp>(loc, weight(lb, col), total), y,
                  col);
    return Value();
  });
  return success();
}

LogicalResult mlir::tfm::lowerWarpSoftmaxGrad(SoftmaxGradOp op,
                                              BufferizedEntry &e) {
  Location loc = op.getLoc();
  ArrayRef<int64_t> shape = op.getType().getShape();
  int64_t n = shape.back(), m = product(shape.drop_back());
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  if (m == 0 || n == 0)
    return success();
  Value y = viewAs(e, e.denseOf(op.getOutput()), {m, n});
  Value dy = viewAs(e, e.denseOf(op.getGrad()), {m, n});
  Value dx = viewAs(e, out, {m, n});
  double scale = op.getScale().convertToDouble();
  WarpRows w(e.b, loc, m, n);
  OpBuilder &kb = w.kb;
  auto at = [&](OpBuilder &lb, Value rows, Value col) -> Value {
    return lb.create<memref::LoadOp>(loc, rows, ValueRange{w.row, col});
  };
  // As the neutral lowering: Σ dy · y, then y · (dy - Σ), times the scale.
  Value partial =
      w.pass(w.f32(kb, 0.0), [&](OpBuilder &lb, Value col, Value acc) -> Value {
        return lb.create<arith::AddFOp>(
            loc, acc,
            lb.create<arith::MulFOp>(loc, at(lb, dy, col), at(lb, y, col)));
      });
  Value dot = w.allReduce(partial, false);
  w.pass(Value(), [&](OpBuilder &lb, Value col, Value) -> Value {
    Value v = lb.create<arith::MulFOp>(
        loc, at(lb, y, col),
        lb.create<arith::SubFOp>(loc, at(lb, dy, col), dot));
    if (scale != 1.0)
      v = lb.create<arith::MulFOp>(loc, v, w.f32(lb, scale));
    w.storeIfLive(lb, v, dx, col);
    return Value();
  });
  return success();
}
