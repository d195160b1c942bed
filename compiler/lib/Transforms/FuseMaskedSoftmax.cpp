//===- FuseMaskedSoftmax.cpp - Scale + mask + softmax ---------------------===//
//
// Attention exports differ in where they scale (the scores, or q before the
// product) and how they mask (an added float tensor, a constant -inf
// triangle, a padding bias computed from attention_mask, or Where with a
// boolean). The pattern peels the layers off the softmax input in a fixed
// order: mask, then scale, then the q·kᵀ product, with an optional scale on q.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/IR/TypeInference.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>
#include <functional>

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEMASKEDSOFTMAXPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-masked-softmax";

/// Scores below this count as masked out: exporters fill with -inf, -1e4,
/// -1e9 or the dtype's lowest value, and exp() of any of them is 0.
constexpr double kMaskedBelow = -1e4;

/// The element (i, j) of the last two dimensions of every leading slice of a
/// constant, read as doubles; calls `f` until it returns false.
bool allTriangle(DenseElementsAttr c, function_ref<bool(int64_t, int64_t, double)> f) {
  auto type = cast<RankedTensorType>(c.getType());
  if (type.getRank() < 2)
    return false;
  int64_t rows = type.getShape()[type.getRank() - 2];
  int64_t cols = type.getShape().back();
  int64_t idx = 0;
  auto visit = [&](double v) {
    int64_t j = idx % cols, i = (idx / cols) % rows;
    ++idx;
    return f(i, j, v);
  };
  if (c.getElementType().isInteger(1)) {
    for (bool b : c.getValues<bool>())
      if (!visit(b ? 1.0 : 0.0))
        return false;
    return true;
  }
  for (APFloat v : c.getValues<APFloat>()) {
    bool lost;
    v.convert(APFloat::IEEEdouble(), llvm::RoundingMode::NearestTiesToEven,
              &lost);
    if (!visit(v.convertToDouble()))
      return false;
  }
  return true;
}

/// Whether the last two dimensions of `c` have the scores' [Sq, Sk] shape.
bool coversScores(DenseElementsAttr c, RankedTensorType scores) {
  auto t = cast<RankedTensorType>(c.getType());
  int64_t r = scores.getRank();
  return t.getRank() >= 2 &&
         t.getShape().take_back(2) == scores.getShape().take_back(2) &&
         broadcastsTo(t.getShape(), scores.getShape()) && r >= 2;
}

/// Whether `r` reduces `of` with `kind` over its last axis, keeping it.
bool reducesLastAxis(ReduceOp r, ReduceKind kind, Value of) {
  int64_t rank = cast<RankedTensorType>(of.getType()).getRank();
  return r && r.getKind() == kind && r.getInput() == of && r.getKeepdims() &&
         r.getAxes().size() == 1 &&
         (r.getAxes()[0] == -1 || r.getAxes()[0] == rank - 1);
}

/// exp(x - max(x)) / sum(exp(x - max(x))), or without the max, over the
/// last axis: a softmax written out, which then fuses like any other.
struct RecognizeSoftmax : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op,
                                PatternRewriter &rewriter) const override {
    auto exp = op.getLhs().getDefiningOp<math::ExpOp>();
    if (!exp || op.getLhs().getType() != op.getType() ||
        !reducesLastAxis(op.getRhs().getDefiningOp<ReduceOp>(),
                         ReduceKind::sum, exp.getResult()) ||
        std::distance(exp->use_begin(), exp->use_end()) != 2 ||
        !op.getRhs().hasOneUse())
      return failure();
    Value x = exp.getOperand();
    if (auto sub = x.getDefiningOp<SubOp>();
        sub && reducesLastAxis(sub.getRhs().getDefiningOp<ReduceOp>(),
                               ReduceKind::max, sub.getLhs()) &&
        sub.getLhs().getType() == op.getType())
      x = sub.getLhs();
    rewriter.replaceOpWithNewOp<SoftmaxOp>(op, op.getType(), x,
                                           rewriter.getI64IntegerAttr(-1));
    return success();
  }
};

struct FuseMaskedSoftmax : OpRewritePattern<SoftmaxOp> {
  FuseMaskedSoftmax(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern(ctx), log(log) {}

  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    auto axis = static_cast<int64_t>(op.getAxis());
    if (rank < 2 || (axis != -1 && axis != rank - 1))
      return rewriter.notifyMatchFailure(
          op, "the softmax is not over the last axis of a rank >= 2 tensor");
    Location loc = op.getLoc();
    Value s = op.getInput();
    bool causal = false, invertMask = false;
    Value boolMask, addMask;

    // softmax(x - max(x)) is softmax(x): the stabilizer exporters write out.
    if (auto sub = s.getDefiningOp<SubOp>();
        sub && sub.getLhs().getType() == type &&
        reducesLastAxis(sub.getRhs().getDefiningOp<ReduceOp>(),
                        ReduceKind::max, sub.getLhs()))
      s = sub.getLhs();

    // Whether `v` is q·kᵀ, maybe scaled, maybe behind a boolean mask.
    std::function<bool(Value)> fromScores = [&](Value v) {
      Operation *d = v.getDefiningOp();
      if (auto sel = dyn_cast_or_null<SelectOp>(d))
        return fromScores(sel.getTrueValue()) ||
               fromScores(sel.getFalseValue());
      if (isa_and_nonnull<MulOp, DivOp>(d))
        for (Value o : d->getOperands())
          if (o.getDefiningOp<MatmulOp>())
            return true;
      return isa_and_nonnull<MatmulOp>(d);
    };

    // The masks, peeled in either order: at most one where(cond, fill, x) or
    // where(cond, x, fill), and at most one x + mask. A causal triangle in
    // either becomes the causal flag; the op takes one other mask.
    bool seenSelect = false, seenAdd = false;
    for (int layer = 0; layer < 2; ++layer) {
      if (auto sel = s.getDefiningOp<SelectOp>(); sel && !seenSelect) {
        seenSelect = true;
        auto fillTrue = splatValue(sel.getTrueValue());
        auto fillFalse = splatValue(sel.getFalseValue());
        bool dropWhenTrue = fillTrue && *fillTrue <= kMaskedBelow;
        bool dropWhenFalse = fillFalse && *fillFalse <= kMaskedBelow;
        if (dropWhenTrue == dropWhenFalse)
          return rewriter.notifyMatchFailure(
              op, "the select does not fill masked scores with a large "
                  "negative constant");
        s = dropWhenTrue ? sel.getFalseValue() : sel.getTrueValue();
        Value cond = sel.getCondition();
        if (!broadcastsTo(cast<RankedTensorType>(cond.getType()).getShape(),
                          type.getShape()) ||
            s.getType() != type)
          return rewriter.notifyMatchFailure(
              op, "the boolean mask does not broadcast to the scores");
        DenseElementsAttr c = constantOf(cond);
        if (c && coversScores(c, type) &&
            allTriangle(c, [&](int64_t i, int64_t j, double v) {
              bool keep = dropWhenTrue ? v == 0 : v != 0;
              return keep == (j <= i);
            })) {
          causal = true;
        } else {
          boolMask = cond;
          invertMask = dropWhenTrue;
        }
        continue;
      }
      if (auto add = s.getDefiningOp<AddOp>(); add && !seenAdd) {
        seenAdd = true;
        // The scores come from a matmul, possibly scaled or masked; the
        // other side is the mask.
        bool lhsScores = fromScores(add.getLhs());
        if (!lhsScores && !fromScores(add.getRhs()))
          return rewriter.notifyMatchFailure(
              op, "neither addend of the masked scores is q·kᵀ");
        s = lhsScores ? add.getLhs() : add.getRhs();
        Value m = lhsScores ? add.getRhs() : add.getLhs();
        auto mt = cast<RankedTensorType>(m.getType());
        // The mask must broadcast to the scores, not the scores to the mask.
        if (!broadcastsTo(mt.getShape(), type.getShape()) ||
            s.getType() != type ||
            mt.getElementType() != type.getElementType())
          return rewriter.notifyMatchFailure(
              op, "the additive mask does not broadcast to the scores");
        DenseElementsAttr c = constantOf(m);
        if (c && coversScores(c, type) &&
            allTriangle(c, [](int64_t i, int64_t j, double v) {
              return j <= i ? v == 0 : v <= kMaskedBelow;
            }))
          causal = true;
        else
          addMask = m;
        continue;
      }
      break;
    }
    if (boolMask && addMask)
      return rewriter.notifyMatchFailure(
          op, "the scores have both a boolean mask that is not causal and an "
              "additive one; the fused op takes one");
    Value mask = boolMask ? boolMask : addMask;
    MaskKind kind = boolMask  ? MaskKind::boolean
                    : addMask ? MaskKind::additive
                              : MaskKind::none;

    // The scale on the scores.
    double scale = 1.0;
    auto peelScale = [&](Value v, Value &inner) -> bool {
      Operation *d = v.getDefiningOp();
      if (!isa_and_nonnull<MulOp, DivOp>(d) || !d->hasOneUse())
        return false;
      bool div = isa<DivOp>(d);
      for (unsigned i = 0; i < 2; ++i) {
        if (div && i == 0)
          continue; // c / x is not a scale of x
        auto c = splatValue(d->getOperand(i));
        if (c && *c != 0 && d->getOperand(1 - i).getType() == v.getType()) {
          scale *= div ? 1.0 / *c : *c;
          inner = d->getOperand(1 - i);
          return true;
        }
      }
      return false;
    };
    Value inner;
    if (peelScale(s, inner))
      s = inner;
    auto mm = s.getDefiningOp<MatmulOp>();
    if (!mm)
      return rewriter.notifyMatchFailure(
          op, "the softmax input is not (scaled, masked) attention scores "
              "q·kᵀ");
    // A scale applied to q (or k) before the product moves onto the scores.
    Value q = mm.getLhs(), k = mm.getRhs();
    Value qInner, kInner;
    if (mm->hasOneUse() && peelScale(q, qInner))
      q = qInner;
    else if (mm->hasOneUse() && peelScale(k, kInner))
      k = kInner;
    if (!(scale > 0))
      return rewriter.notifyMatchFailure(op, "the scale is not positive");
    // Nothing is created before this point, so every failure above leaves
    // the IR as it was.
    if (invertMask) {
      // tfm's boolean masks keep where true; where(cond, -inf, x) drops there.
      Value f = rewriter.create<arith::ConstantOp>(
          loc, DenseElementsAttr::get(
                   RankedTensorType::get({}, rewriter.getI1Type()), false));
      mask = rewriter.create<CompareOp>(loc, ComparePredicate::eq, mask, f);
    }
    Value scores = mm;
    if (q != mm.getLhs() || k != mm.getRhs())
      scores = rewriter.create<MatmulOp>(mm.getLoc(), mm.getType(), q, k,
                                         mm.getTransposeLhs(),
                                         mm.getTransposeRhs());
    if (log)
      log->fused.push_back(loc);
    rewriter.replaceOpWithNewOp<MaskedSoftmaxOp>(
        op, type, scores, mask, rewriter.getF64FloatAttr(scale),
        MaskKindAttr::get(getContext(), kind),
        causal ? rewriter.getUnitAttr() : UnitAttr());
    return success();
  }
  FusionLog *log;
};

struct FuseMaskedSoftmaxPass
    : public mlir::tfm::impl::FuseMaskedSoftmaxPassBase<FuseMaskedSoftmaxPass> {
  using FuseMaskedSoftmaxPassBase::FuseMaskedSoftmaxPassBase;
  void runOnOperation() override {
    FusionLog log;
    FailureRecorder recorder;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseMaskedSoftmax>(&getContext(), &log);
    patterns.add<RecognizeSoftmax>(&getContext());
    if (failed(applyRecording(getOperation(), std::move(patterns), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    SmallVector<std::pair<Location, std::string>> missed;
    getOperation().walk([&](SoftmaxOp op) {
      missed.emplace_back(op.getLoc(),
                          recorder.reasonAt(op.getLoc(), "not fused"));
    });
    reportSites(kFlag, log, missed);
  }
};

} // namespace

void mlir::tfm::populateMaskedSoftmaxPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseMaskedSoftmax>(patterns.getContext(), nullptr);
  patterns.add<RecognizeSoftmax>(patterns.getContext());
}
