//===- FuseResidualLayerNorm.cpp - Residual add + layer norm --------------===//
//
// Opset 13 exporters spell LayerNorm as ReduceMean, Sub, Pow, ReduceMean, Add,
// Sqrt, Div, Mul, Add. The recognition rebuilds it bottom-up: the
// normalization (the Div) first, with unit scale, then the Mul by gamma and
// the Add of beta fold in. Then an Add feeding a layer norm becomes
// tfm.add_layer_norm, returning the sum too when others read it (pre-LN).
//
// RMSNorm (Llama, T5) has no ONNX op before opset 23; exporters spell it
// Pow (or Mul), ReduceMean, Add, Sqrt, then Reciprocal (or a Div of one)
// and Mul, or a Div by the root; then the Mul by the weight. It becomes
// tfm.layer_norm {rms} the same way, and is reported as its own kind,
// residual-rmsnorm.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSERESIDUALLAYERNORMPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-residual-layernorm";
constexpr StringLiteral kRMSFlag = "tfm-fuse-residual-rmsnorm";

/// The first normalized axis when `axes` are exactly the trailing dimensions
/// of a rank-`rank` tensor.
std::optional<int64_t> trailingAxis(ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> sorted;
  for (int64_t a : axes)
    sorted.push_back(a < 0 ? a + rank : a);
  llvm::sort(sorted);
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != rank - static_cast<int64_t>(sorted.size() - i))
      return std::nullopt;
  if (sorted.empty())
    return std::nullopt;
  return sorted.front();
}

/// (x - mean(x)) / sqrt(mean((x - mean(x))²) + eps) is layer_norm(x) with
/// unit scale.
struct RecognizeLayerNorm : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op,
                                PatternRewriter &rewriter) const override {
    auto centered = op.getLhs().getDefiningOp<SubOp>();
    auto root = op.getRhs().getDefiningOp<math::SqrtOp>();
    if (!centered || !root)
      return rewriter.notifyMatchFailure(op, "not (x - mean) / sqrt(...)");
    auto mean = centered.getRhs().getDefiningOp<ReduceOp>();
    Value x = centered.getLhs();
    if (!mean || mean.getKind() != ReduceKind::mean || !mean.getKeepdims() ||
        mean.getInput() != x)
      return rewriter.notifyMatchFailure(op, "the subtrahend is not mean(x)");
    auto plusEps = root.getOperand().getDefiningOp<AddOp>();
    if (!plusEps)
      return rewriter.notifyMatchFailure(op, "sqrt does not read var + eps");
    Value var;
    std::optional<double> eps;
    for (unsigned i = 0; i < 2 && !eps; ++i)
      if ((eps = splatValue(plusEps->getOperand(i))))
        var = plusEps->getOperand(1 - i);
    auto varMean = var ? var.getDefiningOp<ReduceOp>() : ReduceOp();
    if (!eps || !varMean || varMean.getKind() != ReduceKind::mean ||
        varMean.getAxes() != mean.getAxes())
      return rewriter.notifyMatchFailure(op, "no variance over the same axes "
                                             "plus a constant epsilon");
    Value sq = varMean.getInput();
    bool isSquare = false;
    if (auto p = sq.getDefiningOp<PowOp>())
      isSquare = p.getLhs() == centered && splatValue(p.getRhs()) == 2.0;
    else if (auto m = sq.getDefiningOp<MulOp>())
      isSquare = m.getLhs() == centered && m.getRhs() == centered;
    if (!isSquare)
      return rewriter.notifyMatchFailure(op, "the variance is not of "
                                             "(x - mean)²");
    auto type = cast<RankedTensorType>(x.getType());
    auto axis = trailingAxis(mean.getAxes(), type.getRank());
    if (!axis)
      return rewriter.notifyMatchFailure(
          op, "normalizes over axes that are not the trailing dimensions, "
              "which tfm.layer_norm does not support");
    if (!(*eps > 0) || op.getType() != type)
      return rewriter.notifyMatchFailure(op, "epsilon is not positive");
    auto normType = RankedTensorType::get(type.getShape().drop_front(*axis),
                                          type.getElementType());
    auto one = DenseElementsAttr::get(
        normType, rewriter.getFloatAttr(type.getElementType(), 1.0));
    Value scale = rewriter.create<arith::ConstantOp>(op.getLoc(), one);
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        op, type, x, scale, Value(), rewriter.getI64IntegerAttr(*axis),
        rewriter.getF64FloatAttr(*eps), UnitAttr());
    return success();
  }
};

/// What an RMSNorm's root mean square reads: `x` for
/// sqrt(mean(x²) + eps), with x² a Pow by 2 or x · x.
struct RootMeanSquare {
  Value x;
  double epsilon;
  SmallVector<int64_t> axes;
};

/// Whether `v` is y - mean(y): a layer norm's deviation, whose root mean
/// square is the layer norm's deviation, not an RMSNorm's.
bool isCentered(Value v) {
  auto sub = v.getDefiningOp<SubOp>();
  auto mean = sub ? sub.getRhs().getDefiningOp<ReduceOp>() : ReduceOp();
  return mean && mean.getKind() == ReduceKind::mean &&
         mean.getInput() == sub.getLhs();
}

/// `v` = mean(x²) + eps, with a constant eps on either side.
std::optional<RootMeanSquare> meanSquarePlusEps(Value v) {
  auto plusEps = v.getDefiningOp<AddOp>();
  if (!plusEps)
    return std::nullopt;
  for (unsigned i = 0; i < 2; ++i) {
    std::optional<double> eps = splatValue(plusEps->getOperand(i));
    auto mean = plusEps->getOperand(1 - i).getDefiningOp<ReduceOp>();
    if (!eps || !mean || mean.getKind() != ReduceKind::mean ||
        !mean.getKeepdims())
      continue;
    Value sq = mean.getInput(), x;
    if (auto p = sq.getDefiningOp<PowOp>()) {
      if (splatValue(p.getRhs()) == 2.0)
        x = p.getLhs();
    } else if (auto m = sq.getDefiningOp<MulOp>()) {
      if (m.getLhs() == m.getRhs())
        x = m.getLhs();
    }
    if (x && !isCentered(x))
      return RootMeanSquare{x, *eps, llvm::to_vector(mean.getAxes())};
  }
  return std::nullopt;
}

/// `r` = 1 / sqrt(mean(x²) + eps), as ONNX's Reciprocal imports.
std::optional<RootMeanSquare> inverseRootMeanSquare(Value r) {
  auto div = r.getDefiningOp<DivOp>();
  if (!div || splatValue(div.getLhs()) != 1.0)
    return std::nullopt;
  auto root = div.getRhs().getDefiningOp<math::SqrtOp>();
  return root ? meanSquarePlusEps(root.getOperand()) : std::nullopt;
}

/// The RMSNorm that `op` computes with unit scale, if it is
/// x · (1 / sqrt(mean(x²) + eps)) (the factors in either order) or
/// x / sqrt(mean(x²) + eps).
std::optional<RootMeanSquare> rmsNormAt(Operation *op) {
  if (isa<MulOp>(op)) {
    for (unsigned i = 0; i < 2; ++i) {
      std::optional<RootMeanSquare> rms =
          inverseRootMeanSquare(op->getOperand(i));
      if (rms && rms->x == op->getOperand(1 - i))
        return rms;
    }
  } else if (auto div = dyn_cast<DivOp>(op)) {
    auto root = div.getRhs().getDefiningOp<math::SqrtOp>();
    std::optional<RootMeanSquare> rms =
        root ? meanSquarePlusEps(root.getOperand()) : std::nullopt;
    if (rms && rms->x == div.getLhs())
      return rms;
  }
  return std::nullopt;
}

/// Why tfm.layer_norm {rms} cannot replace the RMSNorm at `op`; empty if it
/// can. One rule for the rewrite and for the report of what it missed.
std::string rmsNormMisfit(Operation *op, const RootMeanSquare &rms) {
  auto type = cast<RankedTensorType>(rms.x.getType());
  if (!trailingAxis(rms.axes, type.getRank()))
    return "the root mean square is over axes that are not the trailing "
           "dimensions, which tfm.layer_norm does not support";
  if (!(rms.epsilon > 0))
    return "epsilon is not positive";
  if (op->getResult(0).getType() != type)
    return "the normalized result broadcasts beyond its input";
  return "";
}

/// An RMSNorm spelled out (rmsNormAt) becomes tfm.layer_norm {rms} with
/// unit scale, which the weight's Mul then folds into. Ops of other forms
/// are not its sites, and it records no reason for them.
template <typename OpTy> struct RecognizeRMSNorm : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    std::optional<RootMeanSquare> rms = rmsNormAt(op);
    if (!rms)
      return failure();
    std::string misfit = rmsNormMisfit(op, *rms);
    if (!misfit.empty())
      return rewriter.notifyMatchFailure(op, misfit);
    auto type = cast<RankedTensorType>(rms->x.getType());
    int64_t axis = *trailingAxis(rms->axes, type.getRank());
    auto normType = RankedTensorType::get(type.getShape().drop_front(axis),
                                          type.getElementType());
    auto one = DenseElementsAttr::get(
        normType, rewriter.getFloatAttr(type.getElementType(), 1.0));
    Value scale = rewriter.create<arith::ConstantOp>(op.getLoc(), one);
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        op, type, rms->x, scale, Value(), rewriter.getI64IntegerAttr(axis),
        rewriter.getF64FloatAttr(rms->epsilon), rewriter.getUnitAttr());
    return success();
  }
};

/// A constant reshaped to the normalized shape, when it has as many elements.
Value asNormalizedParam(PatternRewriter &rewriter, Location loc, Value v,
                        RankedTensorType normType) {
  DenseElementsAttr c = constantOf(v);
  if (!c || c.getNumElements() != normType.getNumElements() ||
      c.getElementType() != normType.getElementType())
    return {};
  return rewriter.create<arith::ConstantOp>(loc, c.reshape(normType));
}

/// layer_norm(x) · gamma, with the layer norm's scale all ones, folds gamma.
struct FoldLayerNormScale : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    Value gamma;
    auto ln = operandOfType<LayerNormOp>(op, gamma);
    if (!ln || ln.getBias() || !ln->hasOneUse() || op.getType() != ln.getType())
      return rewriter.notifyMatchFailure(op, "not a scale of a bias-free "
                                             "layer norm");
    auto one = splatValue(ln.getScale());
    if (!one || *one != 1.0)
      return rewriter.notifyMatchFailure(op, "the layer norm has a scale");
    auto normType = cast<RankedTensorType>(ln.getScale().getType());
    Value g = asNormalizedParam(rewriter, op.getLoc(), gamma, normType);
    if (!g)
      return rewriter.notifyMatchFailure(op, "gamma is not a constant of the "
                                             "normalized shape");
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        op, ln.getType(), ln.getInput(), g, Value(), ln.getAxisAttr(),
        ln.getEpsilonAttr(), ln.getRmsAttr());
    return success();
  }
};

/// layer_norm(x) + beta, without a bias yet, folds beta.
struct FoldLayerNormBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    Value beta;
    auto ln = operandOfType<LayerNormOp>(op, beta);
    if (!ln || ln.getBias() || !ln->hasOneUse() || op.getType() != ln.getType())
      return rewriter.notifyMatchFailure(op, "not a shift of a bias-free "
                                             "layer norm");
    auto normType = cast<RankedTensorType>(ln.getScale().getType());
    Value b = asNormalizedParam(rewriter, op.getLoc(), beta, normType);
    if (!b)
      return rewriter.notifyMatchFailure(op, "beta is not a constant of the "
                                             "normalized shape");
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        op, ln.getType(), ln.getInput(), ln.getScale(), b, ln.getAxisAttr(),
        ln.getEpsilonAttr(), ln.getRmsAttr());
    return success();
  }
};

/// layer_norm(a + b) is add_layer_norm(a, b), which also returns a + b when
/// others read it.
struct FuseAddLayerNorm : OpRewritePattern<LayerNormOp> {
  FuseAddLayerNorm(MLIRContext *ctx, FusionLog *log, FusionLog *rmsLog)
      : OpRewritePattern(ctx), log(log), rmsLog(rmsLog) {}
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    auto add = op.getInput().getDefiningOp<AddOp>();
    if (!add)
      return rewriter.notifyMatchFailure(
          op, "the layer norm's input is not produced by an add");
    if (!isa<FloatType>(add.getType().getElementType()))
      return rewriter.notifyMatchFailure(op, "the add is not on floats");
    // The fused op replaces the sum where the layer norm stands, so every
    // other reader of the sum must come after it.
    bool others = false;
    for (Operation *user : add->getUsers()) {
      if (user == op)
        continue;
      others = true;
      if (user->getBlock() != op->getBlock() || user->isBeforeInBlock(op))
        return rewriter.notifyMatchFailure(
            op, "the residual sum has a reader before the layer norm, so it "
                "cannot be computed by the fused op");
    }
    SmallVector<Type> types{op.getType()};
    if (others)
      types.push_back(add.getType());
    auto fused = rewriter.create<AddLayerNormOp>(
        op.getLoc(), types, add.getLhs(), add.getRhs(), op.getScale(),
        op.getBias(), op.getAxisAttr(), op.getEpsilonAttr(), op.getRmsAttr());
    if (others)
      rewriter.replaceAllUsesExcept(add, fused.getSum(), op);
    if (FusionLog *l = op.getRms() ? rmsLog : log)
      l->fused.push_back(op.getLoc());
    rewriter.replaceOp(op, fused.getOutput());
    return success();
  }
  FusionLog *log, *rmsLog;
};

void populateRecognition(RewritePatternSet &patterns) {
  patterns.add<RecognizeLayerNorm, RecognizeRMSNorm<MulOp>,
               RecognizeRMSNorm<DivOp>, FoldLayerNormScale, FoldLayerNormBias>(
      patterns.getContext());
}

struct FuseResidualLayerNormPass
    : public mlir::tfm::impl::FuseResidualLayerNormPassBase<FuseResidualLayerNormPass> {
  using FuseResidualLayerNormPassBase::FuseResidualLayerNormPassBase;
  void runOnOperation() override {
    FusionLog log, rmsLog;
    FailureRecorder recorder;
    // Recognize first, so that the fusion sees whole layer norms.
    RewritePatternSet recognize(&getContext());
    populateRecognition(recognize);
    if (failed(applyRecording(getOperation(), std::move(recognize), recorder)))
      return signalPassFailure();
    RewritePatternSet fuse(&getContext());
    fuse.add<FuseAddLayerNorm>(&getContext(), &log, &rmsLog);
    if (failed(applyRecording(getOperation(), std::move(fuse), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    SmallVector<std::pair<Location, std::string>> missed, rmsMissed;
    getOperation().walk([&](Operation *op) {
      // A layer norm over a sum is a site; one over anything else (the final
      // norm of an encoder stack, say) has no residual to fuse.
      if (auto ln = dyn_cast<LayerNormOp>(op)) {
        auto &sites = ln.getRms() ? rmsMissed : missed;
        if (ln.getInput().getDefiningOp<AddOp>())
          sites.emplace_back(op->getLoc(),
                             recorder.reasonAt(op->getLoc(), "not fused"));
        // A sum that reaches the norm through a transpose or a reshape
        // (Conformer's convolution module) is a site too, not fused: the
        // fused op reads the sum's own layout.
        Operation *between = ln.getInput().getDefiningOp();
        if (isa_and_nonnull<TransposeOp, ReshapeOp>(between) &&
            between->getOperand(0).getDefiningOp<AddOp>())
          sites.emplace_back(
              op->getLoc(),
              (Twine("the sum reaches the layer norm through a ") +
               between->getName().getStringRef() +
               ", which the fused op cannot see through")
                  .str());
        return;
      }
      // A mean that is subtracted from its own input starts a layer norm
      // that was not recognized.
      auto mean = dyn_cast<ReduceOp>(op);
      if (!mean || mean.getKind() != ReduceKind::mean)
        return;
      // mean(x²) + eps under a root (not a variance about the mean, which
      // the layer norm's check below covers) is an RMSNorm that was not.
      for (Operation *plus : mean->getUsers()) {
        if (!isa<AddOp>(plus) || !meanSquarePlusEps(plus->getResult(0)))
          continue;
        for (Operation *root : plus->getUsers()) {
          if (!isa<math::SqrtOp>(root))
            continue;
          // The normalizing Mul or Div reads the root or its reciprocal.
          std::string why = "the root mean square does not divide its own "
                            "input";
          SmallVector<Operation *> tried(root->getUsers());
          for (Operation *u : root->getUsers())
            llvm::append_range(tried, u->getUsers());
          for (Operation *t : tried)
            if (std::optional<RootMeanSquare> rms = rmsNormAt(t)) {
              why = rmsNormMisfit(t, *rms);
              break;
            }
          rmsMissed.emplace_back(
              op->getLoc(), "a decomposed RMSNorm was not recognized: " + why);
          return;
        }
      }
      for (Operation *user : mean->getUsers()) {
        auto sub = dyn_cast<SubOp>(user);
        if (!sub || sub.getLhs() != mean.getInput())
          continue;
        std::string reason = "a decomposed layer norm was not recognized";
        for (Operation *u : sub->getUsers())
          if (isa<DivOp>(u))
            reason = "a decomposed layer norm was not recognized: " +
                     recorder.reasonAt(u->getLoc(), "unknown form");
        missed.emplace_back(op->getLoc(), reason);
        break;
      }
    });
    reportSites(kFlag, log, missed);
    reportSites(kRMSFlag, rmsLog, rmsMissed);
  }
};

} // namespace

void mlir::tfm::populateLayerNormRecognitionPatterns(
    RewritePatternSet &patterns) {
  populateRecognition(patterns);
}

void mlir::tfm::populateResidualLayerNormPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseAddLayerNorm>(patterns.getContext(), nullptr, nullptr);
}
