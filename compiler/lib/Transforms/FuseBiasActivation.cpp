//===- FuseBiasActivation.cpp - Bias and activation into tfm.linear -------===//
//
// Exporters write nn.Linear on 3-D inputs as MatMul by a transposed weight
// plus Add, and GELU as its formula (Erf, or Tanh and Pow/Mul). These
// patterns rebuild `tfm.linear` and `tfm.gelu` from those pieces, then fold
// relu, gelu or SiLU (x·sigmoid(x)) into the linear's activation, also
// through a reshape of the linear's output (an activation is elementwise).
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEBIASACTIVATIONPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-bias-activation";

/// The factors of a product of three written as two binary Muls, in any
/// association; `keep(v)` says whether a Mul operand stays whole.
SmallVector<Value> threeFactors(MulOp op, function_ref<bool(MulOp)> keep) {
  SmallVector<Value> factors;
  for (Value v : op->getOperands()) {
    auto m = v.getDefiningOp<MulOp>();
    if (m && m->hasOneUse() && !keep(m))
      factors.append({m.getLhs(), m.getRhs()});
    else
      factors.push_back(v);
  }
  return factors;
}

/// matmul(x, W) with a constant 2-D W is tfm.linear(x, Wᵀ). A training
/// graph's weights are parameters, which the exporter writes as
/// matmul(x, transpose(W)): that is tfm.linear(x, W), W read as it is.
struct MatmulToLinear : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getTransposeLhs())
      return rewriter.notifyMatchFailure(op, "lhs is transposed");
    Value rhs = op.getRhs();
    if (cast<RankedTensorType>(rhs.getType()).getRank() != 2)
      return rewriter.notifyMatchFailure(op, "rhs is not a 2-D weight");
    Value weight;
    if (DenseElementsAttr w = constantOf(rhs)) {
      weight = rewriter.create<arith::ConstantOp>(
          op.getLoc(), op.getTransposeRhs() ? w : transpose2D(w));
    } else if (op.getTransposeRhs()) {
      weight = rhs;
    } else if (auto t = rhs.getDefiningOp<TransposeOp>()) {
      weight = t.getInput(); // A 2-D transpose swaps the two dimensions.
    } else {
      return rewriter.notifyMatchFailure(
          op, "the weight is neither a constant nor the transpose of a "
              "[N, K] value, so a linear would have to copy it transposed");
    }
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), op.getLhs(), weight,
                                          Value(), Activation::none);
    return success();
  }
};

/// `linear` (a tfm.linear or tfm.quantized_linear) again with `bias` and
/// `act`: the epilogue both kinds of linear share.
Value withEpilogue(PatternRewriter &rewriter, Location loc, Operation *linear,
                   Value bias, Activation act) {
  if (auto l = dyn_cast<LinearOp>(linear))
    return rewriter.create<LinearOp>(loc, l.getType(), l.getInput(),
                                     l.getWeight(), bias, act);
  auto q = cast<QuantizedLinearOp>(linear);
  return rewriter.create<QuantizedLinearOp>(
      loc, q.getType(), q.getInput(), q.getWeight(), q.getWeightScale(),
      q.getWeightZeroPoint(), bias, q.getInputScale(), q.getInputZeroPoint(),
      q.getInputQuantization(), act, q.getBlockSize());
}

/// The linear that defines `v` (float or quantized), its bias and its
/// activation; null when it is neither.
struct AnyLinear {
  Operation *op = nullptr;
  Value bias;
  Activation act = Activation::none;
  explicit operator bool() const { return op; }
};
AnyLinear linearOf(Value v) {
  if (auto l = v.getDefiningOp<LinearOp>())
    return {l, l.getBias(), l.getActivation()};
  if (auto q = v.getDefiningOp<QuantizedLinearOp>())
    return {q, q.getBias(), q.getActivation()};
  return {};
}

/// linear(x, W) + c, with c a bias of [N] (possibly with leading 1s), is
/// linear(x, W, c). The bias is a constant, or a training graph's parameter.
/// The same for a quantized linear.
struct FoldBiasIntoLinear : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    AnyLinear linear = linearOf(op.getLhs());
    Value other = op.getRhs();
    if (!linear) {
      linear = linearOf(op.getRhs());
      other = op.getLhs();
    }
    if (!linear)
      return rewriter.notifyMatchFailure(op, "no operand is a linear");
    if (linear.bias || linear.act != Activation::none ||
        !linear.op->hasOneUse())
      return rewriter.notifyMatchFailure(
          op, "the linear already has a bias or activation, or other users");
    auto linearType = cast<RankedTensorType>(linear.op->getResult(0).getType());
    int64_t n = linearType.getShape().back();
    auto bt = cast<RankedTensorType>(other.getType());
    if (op.getType() != linearType || !bt.hasStaticShape() ||
        bt.getRank() == 0 || bt.getNumElements() != n ||
        bt.getShape().back() != n ||
        bt.getElementType() != linearType.getElementType())
      return rewriter.notifyMatchFailure(op, "the addend is not a bias of [N]");
    auto biasType = RankedTensorType::get({n}, bt.getElementType());
    Value b;
    if (DenseElementsAttr bias = constantOf(other))
      b = rewriter.create<arith::ConstantOp>(op.getLoc(),
                                             bias.reshape(biasType));
    else if (bt.getRank() == 1)
      b = other;
    else
      b = rewriter.create<ReshapeOp>(op.getLoc(), biasType, other);
    rewriter.replaceOp(op, withEpilogue(rewriter, op.getLoc(), linear.op, b,
                                        Activation::none));
    return success();
  }
};

/// 0.5 · x · (1 + erf(x / √2)), in any operand order, is gelu(x).
struct RecognizeGeluErf : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    // Either 0.5 · (x · (1 + erf)) or (0.5 · x) · (1 + erf) and the like.
    SmallVector<Value> factors =
        threeFactors(op, [](MulOp) { return false; });
    if (factors.size() != 3)
      return rewriter.notifyMatchFailure(op, "not a product of three factors");
    Value half, onePlusErf, x;
    for (Value f : factors) {
      auto s = splatValue(f);
      if (s && std::fabs(*s - 0.5) < 1e-6)
        half = f;
      else if (f.getDefiningOp<AddOp>() && otherThanSplat(f.getDefiningOp(), 1.0) &&
               otherThanSplat(f.getDefiningOp(), 1.0).getDefiningOp<math::ErfOp>())
        onePlusErf = f;
      else
        x = f;
    }
    if (!half || !onePlusErf || !x)
      return rewriter.notifyMatchFailure(op, "not 0.5 · x · (1 + erf(...))");
    auto erf = otherThanSplat(onePlusErf.getDefiningOp(), 1.0)
                   .getDefiningOp<math::ErfOp>();
    Operation *scaled = erf.getOperand().getDefiningOp();
    Value erfInput;
    if (isa_and_nonnull<DivOp>(scaled) &&
        cast<DivOp>(scaled).getLhs() == x)
      erfInput = otherThanSplat(scaled, M_SQRT2) == x ? x : Value();
    else if (isa_and_nonnull<MulOp>(scaled))
      erfInput = otherThanSplat(scaled, M_SQRT1_2);
    if (erfInput != x || x.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "erf does not read x / √2");
    rewriter.replaceOpWithNewOp<GeluOp>(op, x, GeluApproximation::none);
    return success();
  }
};

/// 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))) is gelu(x, tanh).
struct RecognizeGeluTanh : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// Whether `v` is x³, written as pow(x, 3) or a product of three x.
  static bool isCube(Value v, Value x) {
    if (auto p = v.getDefiningOp<PowOp>()) {
      auto e = splatValue(p.getRhs());
      return p.getLhs() == x && e && *e == 3.0;
    }
    auto m = v.getDefiningOp<MulOp>();
    if (!m)
      return false;
    Value other;
    if (auto sq = operandOfType<MulOp>(m, other))
      return other == x && sq.getLhs() == x && sq.getRhs() == x;
    return false;
  }

  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> factors = threeFactors(op, [](MulOp m) {
      return static_cast<bool>(m.getLhs().getDefiningOp<math::TanhOp>());
    });
    if (factors.size() != 3)
      return rewriter.notifyMatchFailure(op, "not a product of three factors");
    Value half, onePlusTanh, x;
    for (Value f : factors) {
      auto s = splatValue(f);
      Value t = f.getDefiningOp<AddOp>() ? otherThanSplat(f.getDefiningOp(), 1.0)
                                         : Value();
      if (s && std::fabs(*s - 0.5) < 1e-6)
        half = f;
      else if (t && t.getDefiningOp<math::TanhOp>())
        onePlusTanh = f;
      else
        x = f;
    }
    if (!half || !onePlusTanh || !x)
      return rewriter.notifyMatchFailure(op, "not 0.5 · x · (1 + tanh(...))");
    auto tanh = otherThanSplat(onePlusTanh.getDefiningOp(), 1.0)
                    .getDefiningOp<math::TanhOp>();
    Value inner = otherThanSplat(tanh.getOperand().getDefiningOp(),
                                 std::sqrt(2.0 / M_PI));
    auto sum = inner ? inner.getDefiningOp<AddOp>() : AddOp();
    if (!sum)
      return rewriter.notifyMatchFailure(op, "tanh does not read √(2/π)·(...)");
    Value cubeTerm = sum.getLhs() == x ? sum.getRhs() : sum.getLhs();
    Value cube = otherThanSplat(cubeTerm.getDefiningOp(), 0.044715);
    if ((sum.getLhs() != x && sum.getRhs() != x) || !cube || !isCube(cube, x) ||
        x.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "not x + 0.044715·x³ inside tanh");
    rewriter.replaceOpWithNewOp<GeluOp>(op, x, GeluApproximation::tanh);
    return success();
  }
};

/// Why `source`, an activation's input, is not a linear: a matmul (maybe
/// plus a bias) that the recognition above left alone, or something else.
StringRef notLinearReason(Value source) {
  Value bias;
  if (auto add = source.getDefiningOp<AddOp>())
    if (auto matmul = operandOfType<MatmulOp>(add, bias))
      source = matmul.getResult();
  if (source.getDefiningOp<MatmulOp>())
    return "the input is a matmul that is not a linear (its weight is "
           "neither a constant nor transposed)";
  return "the input is not a linear";
}

/// relu(linear) and gelu(linear) become a linear with that activation.
template <typename ActOp>
struct FoldActivation : OpRewritePattern<ActOp> {
  FoldActivation(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern<ActOp>(ctx), log(log) {}
  LogicalResult matchAndRewrite(ActOp op,
                                PatternRewriter &rewriter) const override {
    // An activation commutes with a reshape between it and the linear
    // (GPT-2's Conv1D views its 2-D product back to 3-D).
    auto reshape = op.getInput().template getDefiningOp<ReshapeOp>();
    Value source = reshape && reshape->hasOneUse() ? reshape.getInput()
                                                   : op.getInput();
    AnyLinear linear = linearOf(source);
    if (!linear)
      return rewriter.notifyMatchFailure(op, notLinearReason(source));
    if (linear.act != Activation::none)
      return rewriter.notifyMatchFailure(op, "the linear has an activation");
    if (!linear.op->hasOneUse())
      return rewriter.notifyMatchFailure(
          op, "the linear's output has other users, which need it before "
              "the activation");
    Activation act = Activation::relu;
    if constexpr (std::is_same_v<ActOp, GeluOp>)
      act = op.getApproximate() == GeluApproximation::tanh
                ? Activation::gelu_tanh
                : Activation::gelu;
    if (log)
      log->fused.push_back(op.getLoc());
    Value fused = withEpilogue(rewriter, linear.op->getLoc(), linear.op,
                               linear.bias, act);
    if (source != op.getInput())
      fused = rewriter.create<ReshapeOp>(reshape.getLoc(), op.getType(), fused);
    rewriter.replaceOp(op, fused);
    return success();
  }
  FusionLog *log;
};

/// x·sigmoid(x) of a linear (maybe through a reshape) becomes the linear's
/// silu activation.
struct FoldSiLU : OpRewritePattern<MulOp> {
  FoldSiLU(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern<MulOp>(ctx), log(log) {}
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    Value x = siluInput(op);
    if (!x)
      return rewriter.notifyMatchFailure(op, "not x·sigmoid(x)");
    auto reshape = x.getDefiningOp<ReshapeOp>();
    Value source = reshape ? reshape.getInput() : x;
    AnyLinear linear = linearOf(source);
    if (!linear)
      return rewriter.notifyMatchFailure(op, notLinearReason(source));
    if (linear.act != Activation::none)
      return rewriter.notifyMatchFailure(op, "the linear has an activation");
    // x feeds the product and the sigmoid's negation, and nothing else.
    unsigned uses = std::distance(x.getUses().begin(), x.getUses().end());
    if (uses != 2 || (reshape && !linear.op->hasOneUse()))
      return rewriter.notifyMatchFailure(
          op, "the linear's output has other users, which need it before "
              "the activation");
    if (log)
      log->fused.push_back(op.getLoc());
    Value fused = withEpilogue(rewriter, linear.op->getLoc(), linear.op,
                               linear.bias, Activation::silu);
    if (reshape)
      fused = rewriter.create<ReshapeOp>(reshape.getLoc(), op.getType(), fused);
    rewriter.replaceOp(op, fused);
    return success();
  }
  FusionLog *log;
};

void populate(RewritePatternSet &patterns, FusionLog *log) {
  populateLinearRecognitionPatterns(patterns);
  populateActivationRecognitionPatterns(patterns);
  patterns.add<FoldActivation<ReluOp>, FoldActivation<GeluOp>, FoldSiLU>(
      patterns.getContext(), log);
}

struct FuseBiasActivationPass
    : public mlir::tfm::impl::FuseBiasActivationPassBase<FuseBiasActivationPass> {
  using FuseBiasActivationPassBase::FuseBiasActivationPassBase;
  void runOnOperation() override {
    FusionLog log;
    RewritePatternSet patterns(&getContext());
    populate(patterns, &log);
    FailureRecorder recorder;
    if (failed(applyRecording(getOperation(), std::move(patterns), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    SmallVector<std::pair<Location, std::string>> missed;
    getOperation().walk([&](Operation *op) {
      auto mul = dyn_cast<MulOp>(op);
      if (isa<ReluOp, GeluOp>(op) || (mul && siluInput(mul)))
        missed.emplace_back(op->getLoc(),
                            recorder.reasonAt(op->getLoc(),
                                              "the input is not a linear"));
    });
    reportSites(kFlag, log, missed);
  }
};

} // namespace

void mlir::tfm::populateLinearRecognitionPatterns(RewritePatternSet &patterns) {
  patterns.add<MatmulToLinear, FoldBiasIntoLinear>(patterns.getContext());
}

void mlir::tfm::populateActivationRecognitionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<RecognizeGeluErf, RecognizeGeluTanh>(patterns.getContext());
}

void mlir::tfm::populateBiasActivationPatterns(RewritePatternSet &patterns) {
  populate(patterns, nullptr);
}
