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

/// The form tfm-fuse-grouped-query leaves a grouped-query attention in:
/// scores [.., H/G, G, Sq, Sk], keys and values [.., H/G, 1, S, D].
struct GroupedForm {
  int64_t group, kvHeads;
};

std::optional<GroupedForm> groupedForm(RankedTensorType scores,
                                       RankedTensorType key,
                                       RankedTensorType value) {
  int64_t rank = scores.getRank();
  if (rank < 4 || key.getRank() != rank || value.getRank() != rank)
    return std::nullopt;
  ArrayRef<int64_t> ss = scores.getShape();
  int64_t group = ss[rank - 3];
  for (ArrayRef<int64_t> x : {key.getShape(), value.getShape()})
    for (int64_t i = 0; i + 2 < rank; ++i)
      if (x[i] != (i == rank - 3 ? 1 : ss[i]))
        return std::nullopt;
  if (group <= 1)
    return std::nullopt;
  return GroupedForm{group, ss[rank - 4]};
}

/// `v` with axis `axis` removed: merged into the one before it, or dropped
/// (a unit axis).
Value collapseAxis(PatternRewriter &rewriter, Location loc, Value v,
                   int64_t axis, bool merge) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  if (merge) {
    shape[axis] *= shape[axis + 1];
    shape.erase(shape.begin() + axis + 1);
  } else {
    shape.erase(shape.begin() + axis);
  }
  return rewriter.create<ReshapeOp>(loc, type.clone(shape), v);
}

/// The grouped form's mask, which broadcasts to [.., H/G, G, Sq, Sk], as
/// one that broadcasts to the attention's [.., H, Sq, Sk]; null where it
/// cannot without a copy (it varies over one of H/G and G only).
Value groupedMask(PatternRewriter &rewriter, Location loc, Value mask,
                  const GroupedForm &g, int64_t rank) {
  auto mt = cast<RankedTensorType>(mask.getType());
  int64_t mrank = mt.getRank();
  // The mask's axes against the scores' groups (rank - 3) and key heads
  // (rank - 4), aligned from the right; absent ones broadcast.
  int64_t groupAxis = mrank - 3, headAxis = mrank - 4;
  if (groupAxis < 0)
    return mask;
  int64_t groups = mt.getDimSize(groupAxis);
  int64_t heads = headAxis >= 0 ? mt.getDimSize(headAxis) : 1;
  if (groups == 1 && heads == 1)
    return collapseAxis(rewriter, loc, mask, groupAxis, /*merge=*/false);
  if (groups == g.group && headAxis >= 0 && heads == g.kvHeads)
    return collapseAxis(rewriter, loc, mask, headAxis, /*merge=*/true);
  return Value();
}

/// Anchored on the masked softmax: its input must be q·kᵀ and its only
/// reader p·v.
struct FuseAttention : public OpRewritePattern<MaskedSoftmaxOp> {
  FuseAttention(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern(ctx), log(log) {}

  LogicalResult matchAndRewrite(MaskedSoftmaxOp softmax,
                                PatternRewriter &rewriter) const override {
    std::string why;
    FailureOr<AttentionProducts> products = attentionProducts(softmax, why);
    if (failed(products))
      return rewriter.notifyMatchFailure(softmax, why);
    auto [scores, weighted] = *products;
    if (!scores->hasOneUse())
      return rewriter.notifyMatchFailure(softmax,
                                         "the scores have other readers");
    auto st = scores.getType(), ot = weighted.getType();
    auto qt = scores.getLhs().getType(), kt = scores.getRhs().getType(),
         vt = weighted.getRhs().getType();
    // tfm.attention takes equal batch dimensions, no broadcast, but for the
    // grouped form of tfm-fuse-grouped-query.
    ArrayRef<int64_t> batch = st.getShape().drop_back(2);
    int64_t rank = st.getRank();
    std::optional<GroupedForm> grouped = groupedForm(st, kt, vt);
    if (qt.getRank() != rank || kt.getRank() != rank || vt.getRank() != rank ||
        qt.getShape().drop_back(2) != batch ||
        (!grouped && (kt.getShape().drop_back(2) != batch ||
                      vt.getShape().drop_back(2) != batch)))
      return rewriter.notifyMatchFailure(
          softmax, "the query, key and value batch dimensions differ");
    Value mask = softmax.getMask();
    if (grouped && mask) {
      mask = groupedMask(rewriter, softmax.getLoc(), mask, *grouped, rank);
      if (!mask)
        return rewriter.notifyMatchFailure(
            softmax, "the mask varies over the key heads or the groups but "
                     "not over both");
    }
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
    Type resultType = ot;
    if (grouped) {
      // [.., H/G, G, S, D] queries as [.., H, S, D]; the keys and values
      // lose their unit axis.
      q = collapseAxis(rewriter, loc, q, rank - 4, /*merge=*/true);
      k = collapseAxis(rewriter, loc, k, rank - 3, /*merge=*/false);
      v = collapseAxis(rewriter, loc, v, rank - 3, /*merge=*/false);
      SmallVector<int64_t> shape(ot.getShape());
      shape[rank - 4] *= shape[rank - 3];
      shape.erase(shape.begin() + rank - 3);
      resultType = ot.clone(shape);
    }
    Value attention = rewriter.create<AttentionOp>(
        loc, resultType, q, k, v, mask,
        rewriter.getF64FloatAttr(softmax.getScale().convertToDouble()),
        softmax.getCausal());
    // Back to the grouped form, which the grouped pass's reshape to the
    // heads undoes (ReshapeOp's fold).
    if (grouped)
      attention = rewriter.create<ReshapeOp>(loc, ot, attention);
    if (log)
      log->fused.push_back(softmax.getLoc());
    rewriter.replaceOp(weighted, attention);
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
