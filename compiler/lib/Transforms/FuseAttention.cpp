//===- FuseAttention.cpp - q·kᵀ, masked softmax, ·v into one attention ---===//
//
// After the masked-softmax fusion an exported attention is three ops:
// scores = q·kᵀ, p = masked_softmax(scores), p·v. When the scores and p
// have no other reader (inference: training keeps p for the backward pass),
// the three become one tfm.attention, which a target computes without the
// [Sq, Sk] scores in memory. The key and value reach the op in their
// [.., S, D] form: a transpose that made kᵀ is folded into the key's.
//
// PyTorch's multi-head attention on sequence-first tensors reshapes each
// projection [S, B, H·D] to [S, B·H, D]. Where the projections are column
// windows of one packed buffer, that merged dimension has two strides (B's
// and H's), so it is no view and a target copies each operand. The
// attention then takes B and H as two batch dimensions, which read the
// projections in place.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/Transforms/LayoutRules.h"
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

/// An operand [B·H, S, D] made by transposing [1, 0, 2] a reshape of
/// `source` [S, B, H·D] to [S, B·H, D], with B and H both above 1.
struct MergedHeads {
  Value source;
  int64_t batch, heads;
};

std::optional<MergedHeads> mergedHeads(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t || !llvm::equal(t.getPermutation(), std::array<int64_t, 3>{1, 0, 2}))
    return std::nullopt;
  auto r = t.getInput().getDefiningOp<ReshapeOp>();
  if (!r)
    return std::nullopt;
  auto in = cast<RankedTensorType>(r.getInput().getType());
  auto out = cast<RankedTensorType>(r.getType());
  if (in.getRank() != 3 || out.getRank() != 3 || !in.hasStaticShape() ||
      !out.hasStaticShape())
    return std::nullopt;
  int64_t s = in.getDimSize(0), b = in.getDimSize(1), c = in.getDimSize(2),
          d = out.getDimSize(2);
  if (out.getDimSize(0) != s || d <= 0 || c % d != 0 ||
      out.getDimSize(1) != b * (c / d) || b == 1 || c / d == 1)
    return std::nullopt;
  return MergedHeads{r.getInput(), b, c / d};
}

/// [S, B, H·D] as [B, H, S, D]: a split of the last dimension, which is a
/// view of any row layout, then a transpose.
Value splitHeads(PatternRewriter &rewriter, Location loc,
                 const MergedHeads &m) {
  auto type = cast<RankedTensorType>(m.source.getType());
  int64_t s = type.getDimSize(0), d = type.getDimSize(2) / m.heads;
  Type f = type.getElementType();
  Value split = rewriter.create<ReshapeOp>(
      loc, RankedTensorType::get({s, m.batch, m.heads, d}, f), m.source);
  return rewriter.create<TransposeOp>(
      loc, RankedTensorType::get({m.batch, m.heads, s, d}, f), split,
      rewriter.getDenseI64ArrayAttr({1, 2, 0, 3}));
}

/// Anchored on the attention: q, k and v are merged heads of one split,
/// the result is only read back as [Sq, B·H, Dv] (a transpose [1, 0, 2]),
/// and the target reads the operands strided. (Where it copies them anyway,
/// as the CPU does for attention it computes unfused, the split costs more
/// copies, not fewer.)
struct SplitMergedHeads : public OpRewritePattern<AttentionOp> {
  SplitMergedHeads(MLIRContext *ctx, const LayoutRules *rules)
      : OpRewritePattern(ctx), rules(rules) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto ot = op.getType();
    if (ot.getRank() != 3 || !op->hasOneUse() ||
        !rules->readsStrided(op, 0))
      return failure();
    auto back = dyn_cast<TransposeOp>(*op->getUsers().begin());
    if (!back ||
        !llvm::equal(back.getPermutation(), std::array<int64_t, 3>{1, 0, 2}))
      return failure();
    auto q = mergedHeads(op.getQuery()), k = mergedHeads(op.getKey()),
         v = mergedHeads(op.getValue());
    if (!q || !k || !v || k->batch != q->batch || v->batch != q->batch ||
        k->heads != q->heads || v->heads != q->heads)
      return failure();
    int64_t b = q->batch, h = q->heads, sq = ot.getDimSize(1),
            dv = ot.getDimSize(2);
    // A mask broadcast over the groups broadcasts over B and H alike; one
    // per group splits as the groups do.
    Location loc = op.getLoc();
    Value mask = op.getMask();
    if (mask) {
      auto mt = cast<RankedTensorType>(mask.getType());
      if (mt.getRank() == 3 && mt.getDimSize(0) == b * h)
        mask = rewriter.create<ReshapeOp>(
            loc,
            RankedTensorType::get(
                {b, h, mt.getDimSize(1), mt.getDimSize(2)},
                mt.getElementType()),
            mask);
      else if (mt.getRank() == 3 && mt.getDimSize(0) != 1)
        return failure();
    }
    Type f = ot.getElementType();
    Value query = splitHeads(rewriter, loc, *q);
    Value key = splitHeads(rewriter, loc, *k);
    Value value = splitHeads(rewriter, loc, *v);
    auto attention = rewriter.create<AttentionOp>(
        loc, RankedTensorType::get({b, h, sq, dv}, f), query, key, value,
        mask, op.getScaleAttr(), op.getCausal());
    Value rows = rewriter.create<TransposeOp>(
        loc, RankedTensorType::get({sq, b, h, dv}, f), attention,
        rewriter.getDenseI64ArrayAttr({2, 0, 1, 3}));
    rewriter.replaceOpWithNewOp<ReshapeOp>(back, back.getType(), rows);
    rewriter.eraseOp(op);
    return success();
  }

  const LayoutRules *rules;
};

struct FuseAttentionPass
    : public mlir::tfm::impl::FuseAttentionPassBase<FuseAttentionPass> {
  using FuseAttentionPassBase::FuseAttentionPassBase;

  void runOnOperation() override {
    FusionLog log;
    FailureRecorder recorder;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttention>(&getContext(), &log);
    if (!target.empty()) {
      const LayoutRules *rules = lookupLayoutRules(target);
      if (!rules) {
        getOperation().emitError()
            << "tfm-fuse-attention: no layout rules for target '" << target
            << "'; its backend is not linked in";
        return signalPassFailure();
      }
      patterns.add<SplitMergedHeads>(&getContext(), rules);
    }
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
