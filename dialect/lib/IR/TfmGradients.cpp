//===- TfmGradients.cpp - Gradient rules of the tfm ops -------------------===//
//
// Each rule builds a vector-Jacobian product out of tfm ops, so a gradient
// is itself a tfm program: the reference interpreter evaluates it, the
// fusion passes see it, and the backends lower it like any forward op. Rules
// recompute cheap intermediates (a layer norm's mean and variance) rather
// than asking the forward op for them, which keeps the forward ops as they
// are for inference.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TfmOps.h"
#include "tfm/IR/TypeInference.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::tfm;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Builds the small tensor expressions the rules are written in.
struct GradBuilder {
  OpBuilder &b;
  Location loc;

  /// A rank-0 constant of `elt`, which broadcasts against anything.
  Value scalar(Type elt, double v) {
    auto type = RankedTensorType::get({}, elt);
    return b.create<arith::ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getFloatAttr(elt, v).getValue()));
  }
  Value scalarLike(Value like, double v) {
    return scalar(tensorType(like).getElementType(), v);
  }
  Value zeros(RankedTensorType type) {
    return b.create<arith::ConstantOp>(
        loc, DenseElementsAttr::get(
                 type, b.getFloatAttr(type.getElementType(), 0.0).getValue()));
  }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<arith::NegFOp>(loc, x); }
  Value mulScalar(Value x, double s) { return mul(x, scalarLike(x, s)); }
  Value compare(ComparePredicate p, Value x, Value y) {
    return b.create<CompareOp>(loc, ComparePredicateAttr::get(b.getContext(), p),
                               x, y);
  }
  Value select(Value c, Value x, Value y) {
    return b.create<SelectOp>(loc, c, x, y);
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(shape, tensorType(v).getElementType());
    if (type == v.getType())
      return v;
    return b.create<ReshapeOp>(loc, type, v);
  }
  Value reduce(ReduceKind kind, Value v, ArrayRef<int64_t> axes,
               bool keepdims) {
    if (axes.empty())
      return v;
    return b.create<ReduceOp>(loc, ReduceKindAttr::get(b.getContext(), kind),
                              v, b.getDenseI64ArrayAttr(axes),
                              keepdims ? b.getUnitAttr() : UnitAttr());
  }
  Value matmul(Value x, Value y, bool tx, bool ty) {
    return b.create<MatmulOp>(loc, x, y, tx ? b.getUnitAttr() : UnitAttr(),
                              ty ? b.getUnitAttr() : UnitAttr());
  }
  Value broadcastTo(Value v, RankedTensorType type) {
    if (v.getType() == type)
      return v;
    return b.create<BroadcastOp>(loc, type, v);
  }

  /// Undoes numpy broadcasting: sums `g` over the dimensions that
  /// broadcasting added or stretched, giving a value of `target`'s shape.
  Value sumToShape(Value g, RankedTensorType target) {
    ArrayRef<int64_t> gs = tensorType(g).getShape(), ts = target.getShape();
    if (gs == ts)
      return g;
    int64_t lead = static_cast<int64_t>(gs.size() - ts.size());
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < lead; ++i)
      axes.push_back(i);
    for (auto [i, d] : llvm::enumerate(ts))
      if (d == 1 && gs[lead + i] != 1)
        axes.push_back(lead + static_cast<int64_t>(i));
    return reshape(reduce(ReduceKind::sum, g, axes, /*keepdims=*/true), ts);
  }

  /// Flattens `v` to [prod(leading), last].
  Value flatten2D(Value v) {
    ArrayRef<int64_t> s = tensorType(v).getShape();
    int64_t rows = 1;
    for (int64_t d : s.drop_back())
      rows *= d;
    return reshape(v, {rows, s.back()});
  }

  /// The gradient of a weight `w` ([N, K]) of `y = x·wᵀ`: dyᵀ·x as one GEMM
  /// over all leading dimensions.
  Value weightGradient(Value dy, Value x) {
    return matmul(flatten2D(dy), flatten2D(x), /*tx=*/true, /*ty=*/false);
  }

  /// Sums `dy` over every dimension but the last (a bias gradient).
  Value biasGradient(Value dy) {
    int64_t rank = tensorType(dy).getRank();
    SmallVector<int64_t> axes(rank - 1);
    std::iota(axes.begin(), axes.end(), 0);
    return reduce(ReduceKind::sum, dy, axes, /*keepdims=*/false);
  }

  /// softmax's vector-Jacobian product along `axis`: scale·y·(dy - Σ dy·y).
  Value softmaxBackward(Value y, Value dy, int64_t axis, double scale = 1.0) {
    return b.create<SoftmaxGradOp>(loc, y, dy, b.getI64IntegerAttr(axis),
                                   b.getF64FloatAttr(scale));
  }

  /// The derivative of gelu at `x`.
  Value geluDerivative(Value x, bool tanhApprox) {
    if (!tanhApprox) {
      // Φ(x) + x·φ(x)
      Value cdf = mulScalar(
          b.create<AddOp>(loc, scalarLike(x, 1.0),
                          b.create<math::ErfOp>(loc, mulScalar(x, M_SQRT1_2))),
          0.5);
      Value pdf = mulScalar(
          b.create<math::ExpOp>(loc, mulScalar(mul(x, x), -0.5)),
          0.5 * M_2_SQRTPI * M_SQRT1_2);
      return add(cdf, mul(x, pdf));
    }
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    Value x2 = mul(x, x);
    Value inner = mulScalar(add(x, mulScalar(mul(x2, x), c)), k);
    Value t = b.create<math::TanhOp>(loc, inner);
    Value one = scalarLike(x, 1.0);
    Value left = mulScalar(add(one, t), 0.5);
    Value sech2 = sub(one, mul(t, t));
    Value dinner = mulScalar(add(one, mulScalar(x2, 3 * c)), k);
    return add(left, mulScalar(mul(mul(x, sech2), dinner), 0.5));
  }

  /// The derivative of `activation` given its input `z` and output `y`.
  Value activationBackward(Activation act, Value z, Value y, Value dy) {
    switch (act) {
    case Activation::none:
      return dy;
    case Activation::relu:
      return select(compare(ComparePredicate::gt, y, scalarLike(y, 0.0)), dy,
                    scalarLike(dy, 0.0));
    case Activation::gelu:
      return mul(dy, geluDerivative(z, false));
    case Activation::gelu_tanh:
      return mul(dy, geluDerivative(z, true));
    case Activation::silu: {
      // d/dz z·s(z) = s·(1 + z·(1 − s)), s the sigmoid.
      Value one = scalarLike(z, 1.0);
      Value s = div(one, add(one, b.create<math::ExpOp>(loc, neg(z))));
      return mul(dy, mul(s, add(one, mul(z, sub(one, s)))));
    }
    }
    return dy;
  }

  struct LayerNormGradients {
    Value input, scale, bias;
  };

  /// Layer norm's vector-Jacobian products, from the input alone: the mean
  /// and the inverse deviation are recomputed inside tfm.layer_norm_grad,
  /// which saves keeping them alive from the forward pass.
  LayerNormGradients layerNormBackward(Value x, Value scale, bool hasBias,
                                       int64_t axis, double eps, bool rms,
                                       Value dy) {
    auto op = b.create<LayerNormGradOp>(
        loc, TypeRange{x.getType(), scale.getType(), scale.getType()}, x, scale,
        dy, b.getI64IntegerAttr(axis), b.getF64FloatAttr(eps),
        rms ? b.getUnitAttr() : UnitAttr());
    LayerNormGradients out;
    out.input = op.getInputGrad();
    out.scale = op.getScaleGrad();
    if (hasBias)
      out.bias = op.getBiasGrad();
    return out;
  }
};

int64_t normalized(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// Sets `grads[i] = make()` when operand `i` is wanted.
template <typename Fn>
void want(ArrayRef<bool> wanted, SmallVectorImpl<Value> &grads, unsigned i,
          Fn &&make) {
  if (i < wanted.size() && wanted[i])
    grads[i] = make();
}

} // namespace

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildGradients(OpBuilder &b, ValueRange dys,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  Value dy = dys[0], lhs = getLhs(), rhs = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  // With op(A) = A or Aᵀ: d op(A) = dY·op(B)ᵀ and d op(B) = op(A)ᵀ·dY,
  // each written so that no operand is transposed explicitly.
  want(wanted, grads, 0, [&] {
    Value d = ta ? g.matmul(rhs, dy, tb, true) : g.matmul(dy, rhs, false, !tb);
    return g.sumToShape(d, tensorType(lhs));
  });
  want(wanted, grads, 1, [&] {
    RankedTensorType rt = tensorType(rhs);
    // A weight shared by every batch: one GEMM over the flattened batch.
    if (rt.getRank() == 2 && tensorType(lhs).getRank() > 2 && !ta)
      return tb ? g.matmul(g.flatten2D(dy), g.flatten2D(lhs), true, false)
                : g.matmul(g.flatten2D(lhs), g.flatten2D(dy), true, false);
    Value d = tb ? g.matmul(dy, lhs, true, ta) : g.matmul(lhs, dy, !ta, false);
    return g.sumToShape(d, rt);
  });
  return success();
}

namespace {

/// Reshapes, zero padding and flips along one axis, which the convolution
/// gradients are written in.
struct AxisEdits {
  GradBuilder &g;

  Value slice(Value v, int64_t axis, int64_t start, int64_t size,
              int64_t step = 1) {
    RankedTensorType t = tensorType(v);
    SmallVector<int64_t> starts(t.getRank(), 0), sizes(t.getShape()),
        steps(t.getRank(), 1);
    starts[axis] = start;
    sizes[axis] = size;
    steps[axis] = step;
    if (start == 0 && size == t.getDimSize(axis) && step == 1)
      return v;
    return g.b.create<SliceOp>(g.loc, v, g.b.getDenseI64ArrayAttr(starts),
                               g.b.getDenseI64ArrayAttr(sizes),
                               g.b.getDenseI64ArrayAttr(steps));
  }
  Value zerosLike(Value v, int64_t axis, int64_t size) {
    RankedTensorType t = tensorType(v);
    SmallVector<int64_t> shape(t.getShape());
    shape[axis] = size;
    return g.zeros(RankedTensorType::get(shape, t.getElementType()));
  }
  /// `before` and `after` zeros along `axis`; a negative count crops.
  Value pad(Value v, int64_t axis, int64_t before, int64_t after) {
    int64_t n = tensorType(v).getDimSize(axis);
    v = slice(v, axis, std::max<int64_t>(-before, 0),
              n - std::max<int64_t>(-before, 0) - std::max<int64_t>(-after, 0));
    SmallVector<Value> parts;
    if (before > 0)
      parts.push_back(zerosLike(v, axis, before));
    parts.push_back(v);
    if (after > 0)
      parts.push_back(zerosLike(v, axis, after));
    if (parts.size() == 1)
      return v;
    return g.b.create<ConcatOp>(g.loc, parts, axis);
  }
  /// `s - 1` zeros between neighbours along `axis`.
  Value dilate(Value v, int64_t axis, int64_t s) {
    if (s == 1)
      return v;
    RankedTensorType t = tensorType(v);
    int64_t n = t.getDimSize(axis);
    SmallVector<int64_t> split(t.getShape());
    split.insert(split.begin() + axis + 1, 1);
    Value u = g.reshape(v, split);
    Value spaced = pad(u, axis + 1, 0, s - 1);
    SmallVector<int64_t> merged(t.getShape());
    merged[axis] = n * s;
    return slice(g.reshape(spaced, merged), axis, 0, (n - 1) * s + 1);
  }
  Value flip(Value v, int64_t axis) {
    int64_t n = tensorType(v).getDimSize(axis);
    return n > 1 ? slice(v, axis, n - 1, n, -1) : v;
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    return g.b.create<TransposeOp>(g.loc, v, g.b.getDenseI64ArrayAttr(perm));
  }
};

} // namespace

LogicalResult Conv2DOp::buildGradients(OpBuilder &b, ValueRange dys,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  AxisEdits ax{g};
  Value dy = dys[0], x = getInput(), w = getWeight();
  RankedTensorType xt = tensorType(x), wt = tensorType(w), yt = getType();
  int64_t group = getGroup();
  int64_t c = xt.getDimSize(1), m = wt.getDimSize(0);
  int64_t cg = c / group, mg = m / group;
  ArrayRef<int64_t> s = getStrides(), d = getDilations(), p = getPads();
  int64_t k[2] = {wt.getDimSize(2), wt.getDimSize(3)};
  int64_t in[2] = {xt.getDimSize(2), xt.getDimSize(3)};
  int64_t out[2] = {yt.getDimSize(2), yt.getDimSize(3)};
  // dx is the convolution of dy, spread out by the strides and padded to a
  // full convolution, with each group's kernels flipped and their in and
  // out channels swapped; its dilations stay.
  want(wanted, grads, 0, [&] {
    Value spread = dy;
    for (int a = 0; a < 2; ++a) {
      spread = ax.dilate(spread, 2 + a, s[a]);
      int64_t before = d[a] * (k[a] - 1) - p[a];
      int64_t after = in[a] + p[a] - (out[a] - 1) * s[a] - 1;
      spread = ax.pad(spread, 2 + a, before, after);
    }
    Value kernels = g.reshape(w, {group, mg, cg, k[0], k[1]});
    kernels = ax.transpose(kernels, {0, 2, 1, 3, 4});
    kernels = g.reshape(kernels, {c, mg, k[0], k[1]});
    kernels = ax.flip(ax.flip(kernels, 2), 3);
    return b.create<Conv2DOp>(
                getLoc(), spread, kernels, Value(), b.getDenseI64ArrayAttr({1, 1}),
                b.getDenseI64ArrayAttr({0, 0, 0, 0}), getDilationsAttr(),
                static_cast<uint64_t>(group))
        .getResult();
  });
  // dw[m, c, i, j] = Σ dy[n, m, oy, ox] · x[n, g·Cg + c, oy·s + i·d - p]
  // with g = m / Mg: a grouped convolution whose batch is the group's
  // channel c, whose channels are (group, image) and whose kernels are dy,
  // with strides and dilations exchanged; its output [Cg, M, ...] is dw
  // with the first two axes swapped, past any rows beyond the kernel.
  want(wanted, grads, 1, [&] {
    int64_t n = xt.getDimSize(0);
    Value images = g.reshape(x, {n, group, cg, in[0], in[1]});
    images = ax.transpose(images, {2, 1, 0, 3, 4});
    images = g.reshape(images, {cg, group * n, in[0], in[1]});
    Value kernels = ax.transpose(dy, {1, 0, 2, 3});
    Value full = b.create<Conv2DOp>(getLoc(), images, kernels, Value(),
                                    getDilationsAttr(), getPadsAttr(),
                                    getStridesAttr(),
                                    static_cast<uint64_t>(group))
                     .getResult();
    full = ax.slice(ax.slice(full, 2, 0, k[0]), 3, 0, k[1]);
    return ax.transpose(full, {1, 0, 2, 3});
  });
  if (getBias())
    want(wanted, grads, 2, [&] { return g.reduce(ReduceKind::sum, dy, {0, 2, 3}, false); });
  return success();
}

LogicalResult LinearOp::buildGradients(OpBuilder &b, ValueRange dys,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  Value z;
  if (getActivation() == Activation::gelu ||
      getActivation() == Activation::gelu_tanh ||
      getActivation() == Activation::silu)
    // tfm-autodiff splits activations off before differentiating; this
    // recomputation only serves a caller that did not.
    z = b.create<LinearOp>(getLoc(), getInput(), getWeight(), getBias(),
                           ActivationAttr::get(getContext(), Activation::none));
  Value dz = g.activationBackward(getActivation(), z, getResult(), dys[0]);
  want(wanted, grads, 0, [&] { return g.matmul(dz, getWeight(), false, false); });
  want(wanted, grads, 1, [&] { return g.weightGradient(dz, getInput()); });
  if (getBias())
    want(wanted, grads, 2, [&] { return g.biasGradient(dz); });
  return success();
}

LogicalResult QKVProjectionOp::buildGradients(OpBuilder &b, ValueRange dys,
                                              ArrayRef<bool> wanted,
                                              SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  SmallVector<Value> parts;
  for (auto [r, d] : llvm::zip(getResults(), dys))
    parts.push_back(d ? d : g.zeros(tensorType(r)));
  int64_t last = tensorType(getInput()).getRank() - 1;
  Value dcat = b.create<ConcatOp>(getLoc(), parts, b.getI64IntegerAttr(last));
  want(wanted, grads, 0,
       [&] { return g.matmul(dcat, getWeight(), false, false); });
  want(wanted, grads, 1, [&] { return g.weightGradient(dcat, getInput()); });
  if (getBias())
    want(wanted, grads, 2, [&] { return g.biasGradient(dcat); });
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise arithmetic
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &b, ValueRange dys,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  want(wanted, grads, 0, [&] { return g.sumToShape(dys[0], tensorType(getLhs())); });
  want(wanted, grads, 1, [&] { return g.sumToShape(dys[0], tensorType(getRhs())); });
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ValueRange dys,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  want(wanted, grads, 0, [&] { return g.sumToShape(dys[0], tensorType(getLhs())); });
  want(wanted, grads, 1, [&] {
    return g.neg(g.sumToShape(dys[0], tensorType(getRhs())));
  });
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ValueRange dys,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  want(wanted, grads, 0, [&] {
    return g.sumToShape(g.mul(dys[0], getRhs()), tensorType(getLhs()));
  });
  want(wanted, grads, 1, [&] {
    return g.sumToShape(g.mul(dys[0], getLhs()), tensorType(getRhs()));
  });
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ValueRange dys,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  Value dx = g.div(dys[0], getRhs());
  want(wanted, grads, 0, [&] { return g.sumToShape(dx, tensorType(getLhs())); });
  // d(a/b)/db = -(a/b)/b
  want(wanted, grads, 1, [&] {
    return g.neg(g.sumToShape(g.mul(dx, getResult()), tensorType(getRhs())));
  });
  return success();
}

LogicalResult PowOp::buildGradients(OpBuilder &b, ValueRange dys,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  Value a = getLhs(), e = getRhs(), dy = dys[0];
  want(wanted, grads, 0, [&] {
    Value em1 = g.sub(e, g.scalarLike(e, 1.0));
    Value d = g.mul(dy, g.mul(e, b.create<PowOp>(getLoc(), a, em1)));
    return g.sumToShape(d, tensorType(a));
  });
  want(wanted, grads, 1, [&] {
    Value d = g.mul(dy, g.mul(getResult(), b.create<math::LogOp>(getLoc(), a)));
    return g.sumToShape(d, tensorType(e));
  });
  return success();
}

/// max and min pass the gradient to the operand they chose (the left one on
/// a tie).
static void minMaxGradients(GradBuilder &g, ComparePredicate pick, Value lhs,
                            Value rhs, Value dy, ArrayRef<bool> wanted,
                            SmallVectorImpl<Value> &grads) {
  Value zero = g.scalarLike(dy, 0.0);
  Value takesLhs = g.compare(pick, lhs, rhs);
  want(wanted, grads, 0, [&] {
    return g.sumToShape(g.select(takesLhs, dy, zero), tensorType(lhs));
  });
  want(wanted, grads, 1, [&] {
    return g.sumToShape(g.select(takesLhs, zero, dy), tensorType(rhs));
  });
}

LogicalResult MaxOp::buildGradients(OpBuilder &b, ValueRange dys,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  minMaxGradients(g, ComparePredicate::ge, getLhs(), getRhs(), dys[0], wanted,
                  grads);
  return success();
}

LogicalResult MinOp::buildGradients(OpBuilder &b, ValueRange dys,
                                    ArrayRef<bool> wanted,
                                    SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  minMaxGradients(g, ComparePredicate::le, getLhs(), getRhs(), dys[0], wanted,
                  grads);
  return success();
}

LogicalResult SelectOp::buildGradients(OpBuilder &b, ValueRange dys,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  Value dy = dys[0], zero = g.scalarLike(dy, 0.0);
  want(wanted, grads, 1, [&] {
    return g.sumToShape(g.select(getCondition(), dy, zero),
                        tensorType(getTrueValue()));
  });
  want(wanted, grads, 2, [&] {
    return g.sumToShape(g.select(getCondition(), zero, dy),
                        tensorType(getFalseValue()));
  });
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ValueRange dys,
                                     ArrayRef<bool> wanted,
                                     SmallVectorImpl<Value> &grads) {
  RankedTensorType in = tensorType(getInput());
  if (!isa<FloatType>(in.getElementType()))
    return success(); // a cast from an integer carries no gradient
  want(wanted, grads, 0,
       [&] { return b.create<CastOp>(getLoc(), in, dys[0]).getResult(); });
  return success();
}

//===----------------------------------------------------------------------===//
// Activations and normalization
//===----------------------------------------------------------------------===//

LogicalResult ReluOp::buildGradients(OpBuilder &b, ValueRange dys,
                                     ArrayRef<bool> wanted,
                                     SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  want(wanted, grads, 0, [&] {
    return g.activationBackward(Activation::relu, getInput(), getResult(),
                                dys[0]);
  });
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ValueRange dys,
                                     ArrayRef<bool> wanted,
                                     SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  want(wanted, grads, 0, [&] {
    return g.mul(dys[0],
                 g.geluDerivative(getInput(), getApproximate() ==
                                                  GeluApproximation::tanh));
  });
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ValueRange dys,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  int64_t axis = normalized(static_cast<int64_t>(getAxis()),
                            getType().getRank());
  want(wanted, grads, 0,
       [&] { return g.softmaxBackward(getResult(), dys[0], axis); });
  return success();
}

LogicalResult MaskedSoftmaxOp::buildGradients(OpBuilder &b, ValueRange dys,
                                              ArrayRef<bool> wanted,
                                              SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  // Masked entries have probability 0, so their gradient vanishes by itself.
  // An additive mask enters like the scaled scores, without the scale.
  double scale = getScale().convertToDouble();
  Value d; // the scores' gradient, made once for both operands
  auto scores = [&] {
    if (!d)
      d = g.softmaxBackward(getResult(), dys[0], getType().getRank() - 1,
                            scale);
    return d;
  };
  want(wanted, grads, 0, scores);
  if (getMaskKind() == MaskKind::additive)
    want(wanted, grads, 1, [&] {
      Value dm = scale == 1.0 ? scores() : g.mulScalar(scores(), 1.0 / scale);
      return g.sumToShape(dm, tensorType(getMask()));
    });
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ValueRange dys,
                                          ArrayRef<bool> wanted,
                                          SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  int64_t axis = normalized(static_cast<int64_t>(getAxis()),
                            getType().getRank());
  auto d =
      g.layerNormBackward(getInput(), getScale(), bool(getBias()), axis,
                          getEpsilon().convertToDouble(), getRms(), dys[0]);
  want(wanted, grads, 0, [&] { return d.input; });
  want(wanted, grads, 1, [&] { return d.scale; });
  if (getBias())
    want(wanted, grads, 2, [&] { return d.bias; });
  return success();
}

LogicalResult AddLayerNormOp::buildGradients(OpBuilder &b, ValueRange dys,
                                             ArrayRef<bool> wanted,
                                             SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  Value sum = getSum() ? getSum() : g.add(getInput(), getResidual());
  RankedTensorType st = tensorType(sum);
  int64_t axis = normalized(static_cast<int64_t>(getAxis()), st.getRank());
  Value dOut = dys[0], dSum = dys.size() > 1 ? dys[1] : Value();
  GradBuilder::LayerNormGradients d;
  Value ds = dSum;
  if (dOut) {
    d = g.layerNormBackward(sum, getScale(), bool(getBias()), axis,
                            getEpsilon().convertToDouble(), getRms(), dOut);
    ds = ds ? g.add(d.input, ds) : d.input;
  }
  if (!ds)
    return success();
  want(wanted, grads, 0, [&] { return g.sumToShape(ds, tensorType(getInput())); });
  want(wanted, grads, 1,
       [&] { return g.sumToShape(ds, tensorType(getResidual())); });
  if (dOut) {
    want(wanted, grads, 2, [&] { return d.scale; });
    if (getBias())
      want(wanted, grads, 3, [&] { return d.bias; });
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Embeddings and data movement
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildGradients(OpBuilder &b, ValueRange dys,
                                          ArrayRef<bool> wanted,
                                          SmallVectorImpl<Value> &grads) {
  want(wanted, grads, 0, [&] {
    return b.create<EmbeddingGradOp>(getLoc(), getTable().getType(), dys[0],
                                     getIndices())
        .getResult();
  });
  return success();
}

LogicalResult GatherOp::buildGradients(OpBuilder &b, ValueRange dys,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &grads) {
  if (!wanted.empty() && !wanted[0])
    return success();
  RankedTensorType in = tensorType(getInput());
  int64_t rank = in.getRank();
  int64_t axis = normalized(static_cast<int64_t>(getAxis()), rank);
  int64_t idxRank = tensorType(getIndices()).getRank();
  GradBuilder g{b, getLoc()};
  auto transpose = [&](Value v, ArrayRef<int64_t> perm) -> Value {
    return b.create<TransposeOp>(getLoc(), v, b.getDenseI64ArrayAttr(perm));
  };
  // A gather along `axis` is a row lookup of the input with `axis` moved
  // first: dy's index dimensions go first too, and the rows' gradient goes
  // back to the input's layout at the end.
  Value dy = dys[0];
  SmallVector<int64_t> perm{axis};
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis)
      perm.push_back(i);
  if (axis != 0) {
    SmallVector<int64_t> dyPerm;
    for (int64_t i = 0; i < idxRank; ++i)
      dyPerm.push_back(axis + i);
    for (int64_t i = 0; i < axis; ++i)
      dyPerm.push_back(i);
    for (int64_t i = axis + idxRank; i < tensorType(dy).getRank(); ++i)
      dyPerm.push_back(i);
    dy = transpose(dy, dyPerm);
  }
  // Negative indices count from the end, so they are wrapped first.
  Value idx = getIndices();
  int64_t rows = in.getDimSize(axis);
  Type idxElt = tensorType(idx).getElementType();
  auto idxScalar = [&](int64_t v) -> Value {
    auto t = RankedTensorType::get({}, idxElt);
    return b.create<arith::ConstantOp>(
        getLoc(), DenseElementsAttr::get(t, b.getIntegerAttr(idxElt, v).getValue()));
  };
  Value wrapped = g.select(
      g.compare(ComparePredicate::lt, idx, idxScalar(0)),
      b.create<AddOp>(getLoc(), idx, idxScalar(rows)), idx);
  int64_t rowSize = in.getNumElements() / std::max<int64_t>(rows, 1);
  SmallVector<int64_t> gradShape(tensorType(idx).getShape());
  gradShape.push_back(rowSize);
  auto tableType = RankedTensorType::get({rows, rowSize}, in.getElementType());
  Value table = b.create<EmbeddingGradOp>(getLoc(), tableType,
                                          g.reshape(dy, gradShape), wrapped);
  SmallVector<int64_t> movedShape;
  for (int64_t p : perm)
    movedShape.push_back(in.getDimSize(p));
  Value moved = g.reshape(table, movedShape);
  if (axis == 0) {
    grads[0] = moved;
    return success();
  }
  SmallVector<int64_t> inverse(rank);
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = static_cast<int64_t>(i);
  grads[0] = transpose(moved, inverse);
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ValueRange dys,
                                          ArrayRef<bool> wanted,
                                          SmallVectorImpl<Value> &grads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = static_cast<int64_t>(i);
  want(wanted, grads, 0, [&] {
    return b.create<TransposeOp>(getLoc(), dys[0],
                                 b.getDenseI64ArrayAttr(inverse))
        .getResult();
  });
  return success();
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ValueRange dys,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  want(wanted, grads, 0, [&] {
    return g.reshape(dys[0], tensorType(getInput()).getShape());
  });
  return success();
}

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, ValueRange dys,
                                          ArrayRef<bool> wanted,
                                          SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  want(wanted, grads, 0,
       [&] { return g.sumToShape(dys[0], tensorType(getInput())); });
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ValueRange dys,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &grads) {
  RankedTensorType out = getType();
  int64_t axis = normalized(static_cast<int64_t>(getAxis()), out.getRank());
  int64_t offset = 0;
  for (auto [i, in] : llvm::enumerate(getInputs())) {
    RankedTensorType t = tensorType(in);
    want(wanted, grads, i, [&] {
      SmallVector<int64_t> starts(out.getRank(), 0), steps(out.getRank(), 1);
      starts[axis] = offset;
      return b.create<SliceOp>(getLoc(), dys[0],
                               b.getDenseI64ArrayAttr(starts),
                               b.getDenseI64ArrayAttr(t.getShape()),
                               b.getDenseI64ArrayAttr(steps))
          .getResult();
    });
    offset += t.getDimSize(axis);
  }
  return success();
}

LogicalResult SplitOp::buildGradients(OpBuilder &b, ValueRange dys,
                                      ArrayRef<bool> wanted,
                                      SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  SmallVector<Value> parts;
  for (auto [r, d] : llvm::zip(getResults(), dys))
    parts.push_back(d ? d : g.zeros(tensorType(r)));
  want(wanted, grads, 0, [&] {
    return b.create<ConcatOp>(getLoc(), parts, getAxisAttr()).getResult();
  });
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ValueRange dys,
                                      ArrayRef<bool> wanted,
                                      SmallVectorImpl<Value> &grads) {
  if (!wanted.empty() && !wanted[0])
    return success();
  if (llvm::any_of(getSteps(), [](int64_t s) { return s != 1; }))
    return emitOpError() << "has no gradient rule for steps other than 1";
  GradBuilder g{b, getLoc()};
  // Pads the gradient back with zeros, one dimension at a time.
  RankedTensorType in = tensorType(getInput());
  Value d = dys[0];
  for (int64_t dim = 0; dim < in.getRank(); ++dim) {
    int64_t start = getStarts()[dim], size = getSizes()[dim];
    int64_t after = in.getDimSize(dim) - start - size;
    if (start == 0 && after == 0)
      continue;
    SmallVector<Value> pieces;
    auto zerosOf = [&](int64_t n) {
      SmallVector<int64_t> shape(tensorType(d).getShape());
      shape[dim] = n;
      return g.zeros(RankedTensorType::get(shape, in.getElementType()));
    };
    if (start > 0)
      pieces.push_back(zerosOf(start));
    pieces.push_back(d);
    if (after > 0)
      pieces.push_back(zerosOf(after));
    d = b.create<ConcatOp>(getLoc(), pieces, b.getI64IntegerAttr(dim));
  }
  grads[0] = d;
  return success();
}

LogicalResult DropoutOp::buildGradients(OpBuilder &b, ValueRange dys,
                                        ArrayRef<bool> wanted,
                                        SmallVectorImpl<Value> &grads) {
  // The mask is a pure function of (seed, step, element), so applying the
  // same dropout to the gradient multiplies it by the same mask and scale.
  want(wanted, grads, 0, [&] {
    return b
        .create<DropoutOp>(getLoc(), getType(), dys[0], getStep(),
                           getRateAttr(), getSeedAttr(), getTrainingAttr(),
                           UnitAttr())
        .getResult();
  });
  return success();
}

LogicalResult ReduceOp::buildGradients(OpBuilder &b, ValueRange dys,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  RankedTensorType in = tensorType(getInput());
  if (!isa<FloatType>(in.getElementType()))
    return success();
  SmallVector<int64_t> keptShape(in.getShape());
  int64_t count = 1;
  for (int64_t a : getAxes()) {
    int64_t axis = normalized(a, in.getRank());
    count *= keptShape[axis];
    keptShape[axis] = 1;
  }
  want(wanted, grads, 0, [&]() -> Value {
    Value dy = g.reshape(dys[0], keptShape);
    switch (getKind()) {
    case ReduceKind::sum:
      return g.broadcastTo(dy, in);
    case ReduceKind::mean:
      return g.broadcastTo(g.mulScalar(dy, 1.0 / double(count)), in);
    case ReduceKind::max:
    case ReduceKind::min: {
      // Every element equal to the extremum receives the gradient.
      Value y = g.reshape(getResult(), keptShape);
      Value hit = g.compare(ComparePredicate::eq, getInput(), y);
      return g.select(hit, g.broadcastTo(dy, in), g.scalarLike(dy, 0.0));
    }
    }
    return Value();
  });
  return success();
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::buildGradients(OpBuilder &b, ValueRange dys,
                                          ArrayRef<bool> wanted,
                                          SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  Value q = getQuery(), k = getKey(), v = getValue(), dy = dys[0];
  // Grouped-query attention differentiates as the attention of the keys and
  // values repeated to every query head, whose gradients then sum over each
  // group: the backward kernels stay those of plain attention.
  int64_t group = getKVGroup();
  auto repeated = [&](Value x) {
    if (group == 1)
      return x;
    RankedTensorType type = tensorType(x);
    SmallVector<int64_t> full(type.getShape());
    full[full.size() - 3] *= group;
    Value split = g.reshape(x, splitHeadsShape(type.getShape(), 1));
    Value wide = g.broadcastTo(split, type.clone(splitHeadsShape(full, group)));
    return g.reshape(wide, full);
  };
  auto grouped = [&](Value dx, Value x) {
    if (group == 1)
      return dx;
    SmallVector<int64_t> split =
        splitHeadsShape(tensorType(dx).getShape(), group);
    int64_t groups = split.size() - 3; // the axis after the key heads
    return g.reshape(g.reduce(ReduceKind::sum, g.reshape(dx, split), {groups},
                              /*keepdims=*/false),
                     tensorType(x).getShape());
  };
  Value kr = repeated(k), vr = repeated(v);
  double scale = getScale() ? getScale()->convertToDouble()
                            : 1.0 / std::sqrt(double(tensorType(q).getShape().back()));
  MaskKind kind = !getMask() ? MaskKind::none
                  : getElementTypeOrSelf(getMask().getType()).isInteger(1)
                      ? MaskKind::boolean
                      : MaskKind::additive;
  // Attention keeps no intermediate, so its backward pass recomputes the
  // probabilities: in one op, which a backend computes without the scores
  // in memory, unless the mask wants their gradient too.
  bool maskGradWanted =
      kind == MaskKind::additive && wanted.size() > 3 && wanted[3];
  if (!maskGradWanted) {
    auto op =
        b.create<AttentionGradOp>(getLoc(), q, kr, vr, getResult(), dy,
                                  getMask(), getScaleAttr(), getCausalAttr());
    want(wanted, grads, 0, [&] { return op.getQueryGrad(); });
    want(wanted, grads, 1, [&] { return grouped(op.getKeyGrad(), k); });
    want(wanted, grads, 2, [&] { return grouped(op.getValueGrad(), v); });
    return success();
  }
  Value s = g.matmul(q, kr, false, true);
  Value p = b.create<MaskedSoftmaxOp>(
      getLoc(), s, getMask(), b.getF64FloatAttr(scale),
      MaskKindAttr::get(getContext(), kind),
      getCausal() ? b.getUnitAttr() : UnitAttr());
  Value dp = g.matmul(dy, vr, false, true);
  Value ds = g.softmaxBackward(p, dp, tensorType(p).getRank() - 1, scale);
  want(wanted, grads, 0, [&] { return g.matmul(ds, kr, false, false); });
  want(wanted, grads, 1,
       [&] { return grouped(g.matmul(ds, q, true, false), k); });
  want(wanted, grads, 2,
       [&] { return grouped(g.matmul(p, dy, true, false), v); });
  if (kind == MaskKind::additive)
    want(wanted, grads, 3, [&] {
      return g.sumToShape(g.mulScalar(ds, 1.0 / scale), tensorType(getMask()));
    });
  return success();
}

// rotate is linear with rotateᵀ = -rotate (in both pairings), so with
// y = x·cos + rotate(x)·sin: dx = dy·cos - rotate(dy·sin).
LogicalResult RotaryOp::buildGradients(OpBuilder &b, ValueRange dys,
                                       ArrayRef<bool> wanted,
                                       SmallVectorImpl<Value> &grads) {
  GradBuilder g{b, getLoc()};
  Value x = getInput(), dy = dys[0];
  UnitAttr interleaved = getInterleavedAttr();
  // rotate(v)·k, as the op with cos 0 and sin k.
  auto rotated = [&](Value v, double k) -> Value {
    return b.create<RotaryOp>(getLoc(), v.getType(), v, g.scalarLike(v, 0.0),
                              g.scalarLike(v, k), interleaved);
  };
  want(wanted, grads, 0, [&] {
    return g.add(g.mul(dy, getCos()), rotated(g.mul(dy, getSin()), -1.0));
  });
  want(wanted, grads, 1,
       [&] { return g.sumToShape(g.mul(dy, x), tensorType(getCos())); });
  want(wanted, grads, 2, [&] {
    return g.sumToShape(g.mul(dy, rotated(x, 1.0)), tensorType(getSin()));
  });
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ValueRange dys,
                                             ArrayRef<bool> wanted,
                                             SmallVectorImpl<Value> &grads) {
  want(wanted, grads, 0, [&] {
    return b.create<CrossEntropyGradOp>(getLoc(), getLogits().getType(),
                                        getLogits(), getLabels(), dys[0],
                                        getLabelSmoothingAttr(),
                                        getIgnoreIndexAttr())
        .getResult();
  });
  return success();
}

//===----------------------------------------------------------------------===//
// Rules for the arith and math ops that imported models apply to tensors
//===----------------------------------------------------------------------===//

namespace {

template <typename ConcreteOp, typename Rule>
struct UnaryGradient
    : public DifferentiableOpInterface::ExternalModel<
          UnaryGradient<ConcreteOp, Rule>, ConcreteOp> {
  LogicalResult buildGradients(Operation *op, OpBuilder &b, ValueRange dys,
                               ArrayRef<bool> wanted,
                               SmallVectorImpl<Value> &grads) const {
    if (!isa<RankedTensorType>(op->getResult(0).getType()))
      return op->emitOpError() << "has a gradient rule only on tensors";
    GradBuilder g{b, op->getLoc()};
    want(wanted, grads, 0, [&] {
      return Rule()(g, op->getOperand(0), op->getResult(0), dys[0]);
    });
    return success();
  }
};

struct NegRule {
  Value operator()(GradBuilder &g, Value, Value, Value dy) { return g.neg(dy); }
};
struct SqrtRule {
  Value operator()(GradBuilder &g, Value, Value y, Value dy) {
    return g.div(dy, g.mulScalar(y, 2.0));
  }
};
struct ExpRule {
  Value operator()(GradBuilder &g, Value, Value y, Value dy) {
    return g.mul(dy, y);
  }
};
struct LogRule {
  Value operator()(GradBuilder &g, Value x, Value, Value dy) {
    return g.div(dy, x);
  }
};
struct TanhRule {
  Value operator()(GradBuilder &g, Value, Value y, Value dy) {
    return g.mul(dy, g.sub(g.scalarLike(y, 1.0), g.mul(y, y)));
  }
};
struct ErfRule {
  Value operator()(GradBuilder &g, Value x, Value, Value dy) {
    Value e = g.b.create<math::ExpOp>(g.loc, g.neg(g.mul(x, x)));
    return g.mul(dy, g.mulScalar(e, M_2_SQRTPI));
  }
};
struct AbsRule {
  Value operator()(GradBuilder &g, Value x, Value, Value dy) {
    return g.select(g.compare(ComparePredicate::ge, x, g.scalarLike(x, 0.0)),
                    dy, g.neg(dy));
  }
};
struct SinRule {
  Value operator()(GradBuilder &g, Value x, Value, Value dy) {
    return g.mul(dy, g.b.create<math::CosOp>(g.loc, x));
  }
};
struct CosRule {
  Value operator()(GradBuilder &g, Value x, Value, Value dy) {
    return g.neg(g.mul(dy, g.b.create<math::SinOp>(g.loc, x)));
  }
};
/// Floor, Ceil, Trunc and rounding are flat almost everywhere.
struct StepRule {
  Value operator()(GradBuilder &g, Value x, Value, Value dy) {
    return g.mulScalar(dy, 0.0);
  }
};

} // namespace

void mlir::tfm::registerGradientExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    arith::NegFOp::attachInterface<UnaryGradient<arith::NegFOp, NegRule>>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    math::SqrtOp::attachInterface<UnaryGradient<math::SqrtOp, SqrtRule>>(*ctx);
    math::ExpOp::attachInterface<UnaryGradient<math::ExpOp, ExpRule>>(*ctx);
    math::LogOp::attachInterface<UnaryGradient<math::LogOp, LogRule>>(*ctx);
    math::TanhOp::attachInterface<UnaryGradient<math::TanhOp, TanhRule>>(*ctx);
    math::ErfOp::attachInterface<UnaryGradient<math::ErfOp, ErfRule>>(*ctx);
    math::AbsFOp::attachInterface<UnaryGradient<math::AbsFOp, AbsRule>>(*ctx);
    math::SinOp::attachInterface<UnaryGradient<math::SinOp, SinRule>>(*ctx);
    math::CosOp::attachInterface<UnaryGradient<math::CosOp, CosRule>>(*ctx);
    math::FloorOp::attachInterface<UnaryGradient<math::FloorOp, StepRule>>(*ctx);
    math::CeilOp::attachInterface<UnaryGradient<math::CeilOp, StepRule>>(*ctx);
    math::TruncOp::attachInterface<UnaryGradient<math::TruncOp, StepRule>>(*ctx);
    math::RoundEvenOp::attachInterface<UnaryGradient<math::RoundEvenOp, StepRule>>(*ctx);
  });
}
