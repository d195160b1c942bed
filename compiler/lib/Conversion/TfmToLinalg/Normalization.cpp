//===- Normalization.cpp - Masked softmax and layer norm as linalg --------===//
//
// The fused normalizations as generic code: masked softmax as one
// elementwise pass (scale, mask, causal triangle) and the softmax over the
// last axis; layer norm, with its residual add, and its gradient as row
// statistics followed by elementwise passes. Targets with library kernels
// replace them; these are what a target without one runs.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <array>
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::lowerGenericMaskedSoftmax(BufferizedEntry &e, Value x,
                                          Value mask, MaskKind kind,
                                          double scale, bool causal,
                                          Value out) {
  auto type = cast<MemRefType>(x.getType());
  Type elem = type.getElementType();
  int64_t rank = type.getRank();
  SmallVector<Value> ins{x};
  if (mask)
    ins.push_back(mask);
  e.elementwise(ins, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    auto c = [&](double v) {
      return BufferizedEntry::constantScalar(ob, l, elem, v);
    };
    Value s = ob.create<arith::MulFOp>(l, a[0], c(scale));
    if (mask) {
      Value m = a[1];
      if (kind == MaskKind::boolean) {
        s = ob.create<arith::SelectOp>(l, m, s, c(-INFINITY));
      } else {
        if (m.getType() != elem)
          m = m.getType().getIntOrFloatBitWidth() > elem.getIntOrFloatBitWidth()
                  ? ob.create<arith::TruncFOp>(l, elem, m).getResult()
                  : ob.create<arith::ExtFOp>(l, elem, m).getResult();
        s = ob.create<arith::AddFOp>(l, s, m);
      }
    }
    if (causal) {
      // Column j of row i is masked when j > i.
      Value col = ob.create<linalg::IndexOp>(l, rank - 1);
      Value row = rank >= 2 ? ob.create<linalg::IndexOp>(l, rank - 2).getResult()
                            : ob.create<arith::ConstantIndexOp>(l, 0).getResult();
      Value later =
          ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::ugt, col, row);
      s = ob.create<arith::SelectOp>(l, later, c(-INFINITY), s);
    }
    return s;
  });
  lowerGenericSoftmax(e, out, rank - 1, out);
}

/// The maps of the generics over an [m, n] row view: the element, its
/// row's statistic, its column's parameter.
static std::array<AffineMap, 3> rowViewMaps(MLIRContext *ctx) {
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  return {AffineMap::getMultiDimIdentityMap(2, ctx),
          AffineMap::get(2, 0, {d(0)}, ctx), AffineMap::get(2, 0, {d(1)}, ctx)};
}

/// x̂ = (x - mean) · rstd.
static Value xhat(OpBuilder &ob, Location l, Value x, Value mean, Value rstd) {
  return ob.create<arith::MulFOp>(l, ob.create<arith::SubFOp>(l, x, mean),
                                  rstd);
}

void mlir::tfm::layerNormColumnGradients(BufferizedEntry &e, Value x, Value dy,
                                         Value mean, Value rstd, Value dscale,
                                         Value dbias) {
  MLIRContext *ctx = e.ctx;
  auto [id, row, col] = rowViewMaps(ctx);
  using IT = utils::IteratorType;
  Type elem = cast<MemRefType>(dscale.getType()).getElementType();
  e.fill(dscale, e.b.getFloatAttr(elem, 0.0));
  e.fill(dbias, e.b.getFloatAttr(elem, 0.0));
  // Σ over rows, each column on its own; both sums in one walk of dy (on
  // the GPU, one kernel).
  e.b.create<linalg::GenericOp>(
      e.loc, TypeRange{}, ValueRange{dy, x, mean, rstd},
      ValueRange{dscale, dbias},
      ArrayRef<AffineMap>{id, id, row, row, col, col},
      ArrayRef<IT>{IT::reduction, IT::parallel},
      [&](OpBuilder &ob, Location l, ValueRange a) {
        Value scaleSum = ob.create<arith::AddFOp>(
            l, a[4],
            ob.create<arith::MulFOp>(l, a[0], xhat(ob, l, a[1], a[2], a[3])));
        Value biasSum = ob.create<arith::AddFOp>(l, a[5], a[0]);
        ob.create<linalg::YieldOp>(l, ValueRange{scaleSum, biasSum});
      });
}

namespace {

/// A dense buffer viewed as [rows, n].
Value asRows(BufferizedEntry &e, Value buffer, int64_t rows, int64_t n) {
  Type elem = cast<MemRefType>(buffer.getType()).getElementType();
  return e.reshape(buffer, MemRefType::get({rows, n}, elem));
}

/// Per row of x [m, n]: the mean and 1 / sqrt(var + eps), into [m] buffers.
/// RMSNorm's mean is zero, so that the same formulas give its statistics.
void rowStatistics(BufferizedEntry &e, Value x, double epsilon, bool rms,
                   Value mean, Value rstd) {
  MLIRContext *ctx = e.ctx;
  auto shape = cast<MemRefType>(x.getType()).getShape();
  Type elem = cast<MemRefType>(x.getType()).getElementType();
  double n = static_cast<double>(shape[1]);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap row = AffineMap::get(2, 0, {d(0)}, ctx);
  SmallVector<utils::IteratorType> its{utils::IteratorType::parallel,
                                       utils::IteratorType::reduction};
  e.fill(mean, e.b.getFloatAttr(elem, 0.0));
  if (!rms) {
    e.generic({x}, {id}, mean, row, its,
              [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                return ob.create<arith::AddFOp>(l, a[1], a[0]);
              });
    e.elementwise(
        {mean}, mean, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
          return ob.create<arith::DivFOp>(
              l, a[0], BufferizedEntry::constantScalar(ob, l, elem, n));
        });
  }
  e.fill(rstd, e.b.getFloatAttr(elem, 0.0));
  e.generic({x, mean}, {id, row}, rstd, row, its,
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value c = ob.create<arith::SubFOp>(l, a[0], a[1]);
              return ob.create<arith::AddFOp>(
                  l, a[2], ob.create<arith::MulFOp>(l, c, c));
            });
  e.elementwise({rstd}, rstd, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    auto c = [&](double v) {
      return BufferizedEntry::constantScalar(ob, l, elem, v);
    };
    Value var = ob.create<arith::DivFOp>(l, a[0], c(n));
    return ob.create<arith::DivFOp>(
        l, c(1.0),
        ob.create<math::SqrtOp>(l, ob.create<arith::AddFOp>(l, var, c(epsilon))));
  });
}

/// layer_norm and add_layer_norm: result = (s - mean) · rstd · scale + bias
/// over the dimensions from `axis`, s = input (+ residual), which is also
/// written to `sum` when asked.
LogicalResult lowerLayerNorm(BufferizedEntry &e, Value input, Value residual,
                             Value scale, Value bias, int64_t axis,
                             double epsilon, bool rms, Value result,
                             Value sum) {
  MLIRContext *ctx = e.ctx;
  auto type = cast<RankedTensorType>(result.getType());
  ArrayRef<int64_t> shape = type.getShape();
  Type elem = type.getElementType();
  if (axis < 0)
    axis += shape.size();
  int64_t m = product(shape.take_front(axis)), n = product(shape.drop_front(axis));
  Value s;
  if (residual) {
    s = sum ? e.destination(sum)
            : e.temporary(MemRefType::get(shape, elem));
    e.elementwise({e.bufferOf(input), e.bufferOf(residual)}, s,
                  [](OpBuilder &ob, Location l, ValueRange a) -> Value {
                    return ob.create<arith::AddFOp>(l, a[0], a[1]);
                  });
  } else {
    s = e.denseOf(input);
  }
  Value out = e.destination(result);
  if (m == 0 || n == 0)
    return success();
  Value x = asRows(e, s, m, n);
  Value mean = e.temporary(MemRefType::get({m}, elem));
  Value rstd = e.temporary(MemRefType::get({m}, elem));
  rowStatistics(e, x, epsilon, rms, mean, rstd);
  auto [id, row, col] = rowViewMaps(ctx);
  SmallVector<Value> ins{x, mean, rstd,
                         e.reshape(e.denseOf(scale), MemRefType::get({n}, elem))};
  SmallVector<AffineMap> maps{id, row, row, col};
  if (bias) {
    ins.push_back(e.reshape(e.denseOf(bias), MemRefType::get({n}, elem)));
    maps.push_back(col);
  }
  e.generic(ins, maps, asRows(e, out, m, n), id,
            {utils::IteratorType::parallel, utils::IteratorType::parallel},
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value y = ob.create<arith::MulFOp>(
                  l, ob.create<arith::MulFOp>(
                         l, ob.create<arith::SubFOp>(l, a[0], a[1]), a[2]),
                  a[3]);
              return bias ? ob.create<arith::AddFOp>(l, y, a[4]).getResult() : y;
            });
  return success();
}

LogicalResult lowerLayerNormGrad(LayerNormGradOp op, BufferizedEntry &e) {
  MLIRContext *ctx = e.ctx;
  auto type = op.getInput().getType();
  Type elem = type.getElementType();
  int64_t n = op.getScale().getType().getNumElements();
  int64_t m = n ? type.getNumElements() / n : 0;
  Value dx = e.destination(op.getInputGrad());
  Value dscale = e.reshape(e.destination(op.getScaleGrad()),
                           MemRefType::get({n}, elem));
  Value dbias =
      e.reshape(e.destination(op.getBiasGrad()), MemRefType::get({n}, elem));
  if (m == 0 || n == 0) {
    e.fill(dscale, e.b.getFloatAttr(elem, 0.0));
    e.fill(dbias, e.b.getFloatAttr(elem, 0.0));
    e.fill(dx, e.b.getFloatAttr(elem, 0.0));
    return success();
  }
  Value x = asRows(e, e.denseOf(op.getInput()), m, n);
  Value dy = asRows(e, e.denseOf(op.getGrad()), m, n);
  Value scale = e.reshape(e.denseOf(op.getScale()), MemRefType::get({n}, elem));
  Value mean = e.temporary(MemRefType::get({m}, elem));
  Value rstd = e.temporary(MemRefType::get({m}, elem));
  rowStatistics(e, x, op.getEpsilon().convertToDouble(), op.getRms(), mean,
                rstd);

  auto [id, row, col] = rowViewMaps(ctx);
  using IT = utils::IteratorType;
  double inv = 1.0 / static_cast<double>(n);
  // mean(g) and mean(g · x̂) per row, g = dy · scale. mean(g) is the
  // derivative of the mean layer norm subtracts: zero for RMSNorm.
  Value meanG = e.temporary(MemRefType::get({m}, elem));
  Value meanGX = e.temporary(MemRefType::get({m}, elem));
  e.fill(meanG, e.b.getFloatAttr(elem, 0.0));
  e.fill(meanGX, e.b.getFloatAttr(elem, 0.0));
  if (!op.getRms())
    e.generic(
        {dy, scale}, {id, col}, meanG, row, {IT::parallel, IT::reduction},
        [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
          Value g = ob.create<arith::MulFOp>(l, a[0], a[1]);
          return ob.create<arith::AddFOp>(
              l, a[2],
              ob.create<arith::MulFOp>(
                  l, g, BufferizedEntry::constantScalar(ob, l, elem, inv)));
        });
  e.generic({dy, scale, x, mean, rstd}, {id, col, id, row, row}, meanGX, row,
            {IT::parallel, IT::reduction},
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value g = ob.create<arith::MulFOp>(l, a[0], a[1]);
              Value gx = ob.create<arith::MulFOp>(l, g, xhat(ob, l, a[2], a[3], a[4]));
              return ob.create<arith::AddFOp>(
                  l, a[5],
                  ob.create<arith::MulFOp>(
                      l, gx, BufferizedEntry::constantScalar(ob, l, elem, inv)));
            });
  e.generic({dy, scale, x, mean, rstd, meanG, meanGX},
            {id, col, id, row, row, row, row}, asRows(e, dx, m, n), id,
            {IT::parallel, IT::parallel},
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value g = ob.create<arith::MulFOp>(l, a[0], a[1]);
              Value h = xhat(ob, l, a[2], a[3], a[4]);
              Value t = ob.create<arith::SubFOp>(
                  l, ob.create<arith::SubFOp>(l, g, a[5]),
                  ob.create<arith::MulFOp>(l, h, a[6]));
              return ob.create<arith::MulFOp>(l, a[4], t);
            });
  layerNormColumnGradients(e, x, dy, mean, rstd, dscale, dbias);
  return success();
}

} // namespace

void mlir::tfm::populateNormalizationLowerings(OpLoweringSet &set) {
  set.add<MaskedSoftmaxOp>([](MaskedSoftmaxOp s, BufferizedEntry &e) {
    lowerGenericMaskedSoftmax(
        e, e.denseOf(s.getInput()),
        s.getMask() ? e.bufferOf(s.getMask()) : Value(), s.getMaskKind(),
        s.getScale().convertToDouble(), s.getCausal(),
        e.destination(s.getResult()));
    return success();
  });
  set.add<LayerNormOp>([](LayerNormOp n, BufferizedEntry &e) {
    return lowerLayerNorm(e, n.getInput(), Value(), n.getScale(), n.getBias(),
                          static_cast<int64_t>(n.getAxis()),
                          n.getEpsilon().convertToDouble(), n.getRms(),
                          n.getResult(), Value());
  });
  set.add<AddLayerNormOp>([](AddLayerNormOp n, BufferizedEntry &e) {
    return lowerLayerNorm(e, n.getInput(), n.getResidual(), n.getScale(),
                          n.getBias(), static_cast<int64_t>(n.getAxis()),
                          n.getEpsilon().convertToDouble(), n.getRms(),
                          n.getOutput(), n.getSum());
  });
  set.add<LayerNormGradOp>(lowerLayerNormGrad);
}
