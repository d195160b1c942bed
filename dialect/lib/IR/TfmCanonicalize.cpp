//===- TfmCanonicalize.cpp - Folders and canonicalizations of tfm ---------===//
//
// Only rewrites that are obviously profitable and always legal live here; the
// fusion passes rely on canonicalization to strip exporter noise (identity
// transposes, chained reshapes, additions of zero) before they match.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/ConstantData.h"
#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::tfm;

/// Whether `attr` is a splat constant equal to `value`.
static bool isSplatOf(Attribute attr, double value) {
  auto splat = dyn_cast_or_null<SplatElementsAttr>(attr);
  if (!splat)
    return false;
  Type elt = splat.getElementType();
  if (isa<FloatType>(elt))
    return splat.getSplatValue<APFloat>().convertToDouble() == value;
  if (elt.isIntOrIndex())
    return splat.getSplatValue<APInt>().getSExtValue() ==
           static_cast<int64_t>(value);
  return false;
}

/// Folds `x op c` to `x` when `c` is the splat identity and broadcasting does
/// not change `x`'s type.
static OpFoldResult foldRightIdentity(Operation *op, Value lhs, Attribute rhs,
                                      double identity) {
  if (lhs.getType() == op->getResult(0).getType() && isSplatOf(rhs, identity))
    return lhs;
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor a) {
  if (OpFoldResult r = foldRightIdentity(*this, getLhs(), a.getRhs(), 0.0))
    return r;
  return foldRightIdentity(*this, getRhs(), a.getLhs(), 0.0);
}

namespace {
/// One operand of a concatenation and where it lies along the axis; `value`
/// is null where the operand is a splat of zeros.
struct Part {
  int64_t begin, size;
  Value value;
};

/// The parts of `concat` along `axis` (its axis, counted from the front)
/// that are not zeros.
SmallVector<Part> nonZeroParts(ConcatOp concat, int64_t axis) {
  SmallVector<Part> parts;
  int64_t at = 0;
  for (Value in : concat.getInputs()) {
    int64_t size = cast<RankedTensorType>(in.getType()).getDimSize(axis);
    Attribute attr;
    if (!(matchPattern(in, m_Constant(&attr)) && isSplatOf(attr, 0.0)))
      parts.push_back({at, size, in});
    at += size;
  }
  return parts;
}

/// a + b, each a concatenation along one axis of zeros and other parts,
/// where no part of one that is not zeros meets one of the other: the
/// concatenation of both's parts, zeros only where both are. A slice's
/// gradient is its input's shape padded with zeros, so the slices that
/// split a packed projection into Q, K and V give three such gradients,
/// whose sum otherwise costs the zero padding and two additions over the
/// whole tensor.
struct SumOfDisjointPaddings : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    auto a = op.getLhs().getDefiningOp<ConcatOp>();
    auto b = op.getRhs().getDefiningOp<ConcatOp>();
    auto type = op.getType();
    if (!a || !b || a.getType() != type || b.getType() != type ||
        !type.hasStaticShape())
      return failure();
    int64_t rank = type.getRank();
    int64_t axis = (a.getAxis() + rank) % rank;
    if (axis != (b.getAxis() + rank) % rank)
      return failure();
    SmallVector<Part> parts = nonZeroParts(a, axis);
    llvm::append_range(parts, nonZeroParts(b, axis));
    llvm::sort(parts,
               [](const Part &x, const Part &y) { return x.begin < y.begin; });
    for (size_t i = 1; i < parts.size(); ++i)
      if (parts[i - 1].begin + parts[i - 1].size > parts[i].begin)
        return failure(); // Both add something there.
    SmallVector<Value> inputs;
    auto zeros = [&](int64_t size) {
      SmallVector<int64_t> shape(type.getShape());
      shape[axis] = size;
      auto t = RankedTensorType::get(shape, type.getElementType());
      inputs.push_back(rewriter.create<arith::ConstantOp>(
          op.getLoc(), DenseElementsAttr::get(
                           t, rewriter.getZeroAttr(type.getElementType()))));
    };
    int64_t at = 0;
    for (const Part &part : parts) {
      if (part.begin > at)
        zeros(part.begin - at);
      inputs.push_back(part.value);
      at = part.begin + part.size;
    }
    if (at < type.getDimSize(axis))
      zeros(type.getDimSize(axis) - at);
    rewriter.replaceOpWithNewOp<ConcatOp>(op, type, inputs,
                                          rewriter.getI64IntegerAttr(axis));
    return success();
  }
};
} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<SumOfDisjointPaddings>(context);
}

OpFoldResult SubOp::fold(FoldAdaptor a) {
  return foldRightIdentity(*this, getLhs(), a.getRhs(), 0.0);
}

OpFoldResult MulOp::fold(FoldAdaptor a) {
  if (OpFoldResult r = foldRightIdentity(*this, getLhs(), a.getRhs(), 1.0))
    return r;
  return foldRightIdentity(*this, getRhs(), a.getLhs(), 1.0);
}

OpFoldResult DivOp::fold(FoldAdaptor a) {
  return foldRightIdentity(*this, getLhs(), a.getRhs(), 1.0);
}

OpFoldResult PowOp::fold(FoldAdaptor a) {
  return foldRightIdentity(*this, getLhs(), a.getRhs(), 1.0);
}

OpFoldResult MaxOp::fold(FoldAdaptor) {
  // max(x, x) = x.
  if (getLhs() == getRhs() && getLhs().getType() == getType())
    return getLhs();
  return {};
}

OpFoldResult MinOp::fold(FoldAdaptor) {
  if (getLhs() == getRhs() && getLhs().getType() == getType())
    return getLhs();
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult SliceOp::fold(FoldAdaptor a) {
  if (auto input = dyn_cast_or_null<DenseElementsAttr>(a.getInput()))
    return sliceConstant(input, getStarts(), getSizes(), getSteps());
  // A slice that reads every element in order is the identity.
  if (getInput().getType() != getType())
    return {};
  for (auto [start, step] : llvm::zip(getStarts(), getSteps()))
    if (start != 0 || step != 1)
      return {};
  return getInput();
}

OpFoldResult GatherOp::fold(FoldAdaptor a) {
  auto input = dyn_cast_or_null<DenseElementsAttr>(a.getInput());
  auto indices = dyn_cast_or_null<DenseElementsAttr>(a.getIndices());
  if (!input || !indices)
    return {};
  int64_t axis = getAxis();
  if (axis < 0)
    axis += getInput().getType().getRank();
  return gatherConstant(input, indices, axis);
}

OpFoldResult ScatterNDOp::fold(FoldAdaptor a) {
  // Indices that name every element of the input's leading axes once, in
  // row-major order, replace the whole input by the updates: a cache
  // buffer written at positions 0..n-1 of its n (an export with a
  // fixed-size cache, its positions bound to the whole length).
  auto indices = llvm::dyn_cast_if_present<DenseIntElementsAttr>(a.getIndices());
  if (!indices || getReduction() != ScatterReduction::none ||
      getUpdates().getType() != getType())
    return {};
  auto idxType = llvm::cast<RankedTensorType>(indices.getType());
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t k = idxType.getShape().back();
  if (idxType.getRank() != k + 1 || k > static_cast<int64_t>(shape.size()) ||
      idxType.getShape().drop_back() != shape.take_front(k))
    return {};
  SmallVector<int64_t> expected(k, 0);
  int64_t component = 0;
  for (APInt v : indices.getValues<APInt>()) {
    if (v.getSExtValue() != expected[component])
      return {};
    if (++component == k) {
      component = 0;
      // The next element of the leading axes, row-major.
      for (int64_t d = k - 1; d >= 0 && ++expected[d] == shape[d]; --d)
        expected[d] = 0;
    }
  }
  return getUpdates();
}

OpFoldResult ReluOp::fold(FoldAdaptor) {
  // relu is idempotent.
  if (getInput().getDefiningOp<ReluOp>())
    return getInput();
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if (static_cast<int64_t>(i) != p)
      return {};
  return getInput();
}

namespace {
/// transpose(transpose(x, p1), p2) -> transpose(x, p1 ∘ p2).
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<TransposeOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(op, "input is not a transpose");
    ArrayRef<int64_t> p1 = inner.getPermutation(), p2 = op.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t p : p2)
      composed.push_back(p1[p]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(),
                                             inner.getInput(), composed);
    return success();
  }
};

/// reshape(reshape(x)) -> reshape(x): only the final shape matters.
struct ComposeReshapes : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<ReshapeOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(op, "input is not a reshape");
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), inner.getInput());
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<ComposeTransposes>(context);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // A reshape back to the shape a reshape started from.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>())
    if (inner.getInput().getType() == getType())
      return inner.getInput();
  return {};
}

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<ComposeReshapes>(context);
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}

LogicalResult SplitOp::fold(FoldAdaptor, SmallVectorImpl<OpFoldResult> &out) {
  if (getSizes().size() != 1)
    return failure();
  out.push_back(getInput());
  return success();
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  // Outside training, and at rate 0, dropout is the identity; one kept for
  // a training step waits for tfm-autodiff.
  if ((!getTraining() && !getTrainable()) || getRate().isZero())
    return getInput();
  return {};
}
