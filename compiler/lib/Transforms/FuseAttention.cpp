//===- FuseAttention.cpp - q·kᵀ, masked softmax, ·v into one attention ---===//
//
// After the masked-softmax fusion an exported attention is three ops:
// scores = q·kᵀ, p = masked_softmax(scores), p·v. When the scores and p
// have no other reader (inference: training keeps p for the backward pass),
// the three become one tfm.attention, which a target computes without the
// [Sq, Sk] scores in memory. The key and value reach the op in their
// [.., S, D] form: a transpose that made kᵀ is folded into the key's.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/Transforms/Passes.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-attention";

/// `v` with its last two dimensions swapped: the input of a transpose that
/// swapped them, a transpose composed with the one that defines `v`, or a
/// new transpose.
Value swapLastTwo(PatternRewriter &rewriter, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> perm;
  Value input = v;
  if (auto t = v.getDefiningOp<TransposeOp>()) {
    perm.assign(t.getPermutation().begin(), t.getPermutation().end());
    input = t.getInput();
  } else {
    for (int64_t i = 0; i < rank; ++i)
      perm.push_back(i);
  }
  std::swap(perm[rank - 1], perm[rank - 2]);
  bool identity = true;
  for (int64_t i = 0; i < rank; ++i)
    identity &= perm[i] == i;
  if (identity)
    return input;
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 1], shape[rank - 2]);
  return rewriter.create<TransposeOp>(
      loc, RankedTensorType::get(shape, type.getElementType()), input,
      rewriter.getDenseI64ArrayAttr(perm));
}

/// Anchored on the masked softmax: its input must be q·kᵀ and its only
/// reader p·v.
struct FuseAttention : public OpRewritePattern<MaskedSoftmaxOp> {
  FuseAttention(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern(ctx), log(log) {}

  LogicalResult matchAndRewrite(MaskedSoftmaxOp softmax,
                                PatternRewriter &rewriter) const override {
    auto scores = softmax.getInput().getDefiningOp<MatmulOp>();
    if (!scores)
      return rewriter.notifyMatchFailure(softmax,
                                         "the softmax does not read q·kᵀ");
    if (!softmax->hasOneUse())
      return rewriter.notifyMatchFailure(
          softmax, "the probabilities have other readers (a backward pass)");
    auto weighted = dyn_cast<MatmulOp>(*softmax->getUsers().begin());
    if (!weighted || weighted.getLhs() != softmax.getResult() ||
        weighted.getTransposeLhs())
      return rewriter.notifyMatchFailure(
          softmax, "the probabilities do not multiply the values");
    if (!scores->hasOneUse())
      return rewriter.notifyMatchFailure(softmax,
                                         "the scores have other readers");
    auto st = scores.getType(), ot = weighted.getType();
    auto qt = scores.getLhs().getType(), kt = scores.getRhs().getType(),
         vt = weighted.getRhs().getType();
    // tfm.attention takes equal batch dimensions, no broadcast.
    ArrayRef<int64_t> batch = st.getShape().drop_back(2);
    if (qt.getRank() != st.getRank() || kt.getRank() != st.getRank() ||
        vt.getRank() != st.getRank() ||
        qt.getShape().drop_back(2) != batch ||
        kt.getShape().drop_back(2) != batch ||
        vt.getShape().drop_back(2) != batch)
      return rewriter.notifyMatchFailure(
          softmax, "the query, key and value batch dimensions differ");
    Location loc = weighted.getLoc();
    // The value may be computed after the softmax.
    rewriter.setInsertionPoint(weighted);
    Value q = scores.getLhs();
    if (scores.getTransposeLhs())
      q = swapLastTwo(rewriter, loc, q);
    // The key as [.., Sk, D]: kᵀ read transposed, or kᵀ transposed back.
    Value k = scores.getRhs();
    if (!scores.getTransposeRhs())
      k = swapLastTwo(rewriter, loc, k);
    Value v = weighted.getRhs();
    if (weighted.getTransposeRhs())
      v = swapLastTwo(rewriter, loc, v);
    auto attention = rewriter.create<AttentionOp>(
        loc, ot, q, k, v, softmax.getMask(),
        rewriter.getF64FloatAttr(softmax.getScale().convertToDouble()),
        softmax.getCausal());
    if (log)
      log->fused.push_back(softmax.getLoc());
    rewriter.replaceOp(weighted, attention.getResult());
    rewriter.eraseOp(softmax);
    rewriter.eraseOp(scores);
    return success();
  }

  FusionLog *log;
};

struct FuseAttentionPass
    : public mlir::tfm::impl::FuseAttentionPassBase<FuseAttentionPass> {
  using FuseAttentionPassBase::FuseAttentionPassBase;

  void runOnOperation() override {
    FusionLog log;
    FailureRecorder recorder;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttention>(&getContext(), &log);
    if (failed(applyRecording(getOperation(), std::move(patterns), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    SmallVector<std::pair<Location, std::string>> missed;
    getOperation().walk([&](MaskedSoftmaxOp op) {
      missed.emplace_back(op.getLoc(),
                          recorder.reasonAt(op.getLoc(), "not fused"));
    });
    reportSites(kFlag, log, missed);
  }
};

} // namespace
