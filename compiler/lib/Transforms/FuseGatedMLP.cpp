//===- FuseGatedMLP.cpp - Gate and up projections into tfm.gated_linear --===//
//
// Llama's MLP is down(silu(gate(x)) * up(x)): two projections of one input,
// the first activated, multiplied elementwise (SwiGLU; GeGLU with GELU,
// ReGLU with relu). Exporters write the activation out (SiLU as
// x · sigmoid(x), the sigmoid as 1 / (1 + exp(-x)); GELU with Erf or Tanh,
// which the recognition of tfm-fuse-bias-activation rebuilds first). The
// product and its two projections become one tfm.gated_linear over the
// weights concatenated at compile time: one GEMM, with the product as its
// epilogue. It runs before tfm-fuse-qkv, so that the gate and up
// projections are not packed as if they were one attention's.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEGATEDMLPPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-gated-mlp";

/// One factor of the product: `gate` activated by `act`, and the op that
/// applies it (the SiLU's product, a gelu or a relu), which the fusion
/// absorbs.
struct ActivatedGate {
  Value gate;
  Activation act;
  Operation *activation;
};

/// If `v` is an activation of some value, which and of what.
std::optional<ActivatedGate> activationOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (auto mul = dyn_cast_or_null<MulOp>(def))
    if (Value x = siluInput(mul))
      return ActivatedGate{x, Activation::silu, def};
  if (auto gelu = dyn_cast_or_null<GeluOp>(def))
    return ActivatedGate{gelu.getInput(),
                         gelu.getApproximate() == GeluApproximation::tanh
                             ? Activation::gelu_tanh
                             : Activation::gelu,
                         def};
  if (auto relu = dyn_cast_or_null<ReluOp>(def))
    return ActivatedGate{relu.getInput(), Activation::relu, def};
  return std::nullopt;
}

/// A projection that can be packed: a linear with no activation and
/// constant parameters.
LinearOp packableProjection(Value v) {
  auto l = v.getDefiningOp<LinearOp>();
  return l && l.getActivation() == Activation::none &&
                 constantOf(l.getWeight()) &&
                 (!l.getBias() || constantOf(l.getBias()))
             ? l
             : LinearOp();
}

/// Whether `v` is a projection: a linear, or a matmul by a 2-D weight that
/// could not become one (a parameter in [K, N] order).
bool isProjection(Value v) {
  if (v.getDefiningOp<LinearOp>())
    return true;
  auto mm = v.getDefiningOp<MatmulOp>();
  return mm && !mm.getTransposeLhs() && mm.getRhs().getType().getRank() == 2;
}

/// The product and the two projections it multiplies, when it is a gated
/// MLP's (the activated factor on either side).
struct GatedProduct {
  ActivatedGate gate;
  Value up;
};

std::optional<GatedProduct> gatedProductOf(MulOp op) {
  for (unsigned i = 0; i < 2; ++i) {
    std::optional<ActivatedGate> a = activationOf(op->getOperand(i));
    Value up = op->getOperand(1 - i);
    if (a && isProjection(a->gate) && isProjection(up))
      return GatedProduct{*a, up};
  }
  return std::nullopt;
}

/// act(gate(x)) · up(x) becomes tfm.gated_linear(x, [Wgate; Wup]).
struct FuseGatedProduct : OpRewritePattern<MulOp> {
  FuseGatedProduct(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern(ctx), log(log) {}
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<GatedProduct> p = gatedProductOf(op);
    if (!p)
      return failure(); // Not a gated product: not a site.
    auto gate = p->gate.gate.getDefiningOp<LinearOp>();
    auto up = p->up.getDefiningOp<LinearOp>();
    if (!gate || !up)
      return rewriter.notifyMatchFailure(
          op, "a projection is a matmul that is not a linear (its weight is "
              "neither a constant nor transposed)");
    if (gate.getInput() != up.getInput())
      return rewriter.notifyMatchFailure(
          op, "the gate and up projections read different inputs");
    if (gate.getActivation() != Activation::none ||
        up.getActivation() != Activation::none)
      return rewriter.notifyMatchFailure(op, "a projection has an activation");
    if (!packableProjection(gate) || !packableProjection(up))
      return rewriter.notifyMatchFailure(
          op, "a projection's weight is not a constant (a training graph's "
              "parameter), so the two cannot be packed at compile time");
    if (gate == up || gate.getType() != up.getType() ||
        gate.getType() != op.getType())
      return rewriter.notifyMatchFailure(
          op, "the gate and up projections differ in shape, or the product "
              "broadcasts");
    // The fused op replaces all three; nothing else may read the gate, its
    // activation or the up projection.
    unsigned gateUses = p->gate.act == Activation::silu ? 2 : 1;
    if (!llvm::hasNItems(gate->getUses(), gateUses) ||
        !p->gate.activation->hasOneUse() || !up->hasOneUse())
      return rewriter.notifyMatchFailure(
          op, "the gate, its activation or the up projection has other "
              "readers, which need it unfused");
    Type elt = gate.getType().getElementType();
    int64_t f = gate.getWeight().getType().getDimSize(0);
    DenseElementsAttr weight = concatRows(
        {constantOf(gate.getWeight()), constantOf(up.getWeight())});
    DenseElementsAttr bias;
    if (gate.getBias() || up.getBias())
      bias = concatRows(
          {gate.getBias() ? constantOf(gate.getBias()) : zeros(elt, f),
           up.getBias() ? constantOf(up.getBias()) : zeros(elt, f)});
    Location loc = op.getLoc();
    Value w = rewriter.create<arith::ConstantOp>(loc, weight);
    Value b = bias ? rewriter.create<arith::ConstantOp>(loc, bias).getResult()
                   : Value();
    rewriter.replaceOpWithNewOp<GatedLinearOp>(
        op, op.getType(), gate.getInput(), w, b,
        ActivationAttr::get(getContext(), p->gate.act));
    if (log)
      log->fused.push_back(loc);
    return success();
  }
  FusionLog *log;
};

struct FuseGatedMLPPass
    : public mlir::tfm::impl::FuseGatedMLPPassBase<FuseGatedMLPPass> {
  using FuseGatedMLPPassBase::FuseGatedMLPPassBase;
  void runOnOperation() override {
    FailureRecorder recorder;
    // The projections and activations first, so that the product sees
    // whole linears whichever op the driver visits first.
    RewritePatternSet recognize(&getContext());
    populateLinearRecognitionPatterns(recognize);
    populateActivationRecognitionPatterns(recognize);
    if (failed(applyRecording(getOperation(), std::move(recognize), recorder)))
      return signalPassFailure();
    FusionLog log;
    RewritePatternSet fuse(&getContext());
    fuse.add<FuseGatedProduct>(&getContext(), &log);
    if (failed(applyRecording(getOperation(), std::move(fuse), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    SmallVector<std::pair<Location, std::string>> missed;
    getOperation().walk([&](MulOp op) {
      if (gatedProductOf(op))
        missed.emplace_back(op.getLoc(),
                            recorder.reasonAt(op.getLoc(), "not fused"));
    });
    reportSites(kFlag, log, missed);
  }
};

} // namespace

void mlir::tfm::populateGatedMLPPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseGatedProduct>(patterns.getContext(), nullptr);
}
