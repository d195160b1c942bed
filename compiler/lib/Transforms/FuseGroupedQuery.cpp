//===- FuseGroupedQuery.cpp - K/V heads read per group, not repeated -----===//
//
// Grouped-query attention (and multi-query, one key head) gives H query
// heads H/G key and value heads. Exporters repeat each key and value head G
// times before the products, the way `transformers` writes it: a new axis
// after the heads (Unsqueeze, here a reshape), `expand` over it, and a
// reshape merging it with the heads, [.., H/G, S, D] -> [.., H, S, D].
//
// That repeat is a copy of the keys and values per step, and a KV cache
// derived after it would hold every query head. This pass removes it: the
// query and the scores take the heads as [.., H/G, G, ..], the keys and
// values as [.., H/G, 1, ..], and the products broadcast over G, so each
// key head is read by its group. The softmax is per row, so it is the same
// on the split scores; the mask is split (or given a unit axis) to match.
// A KV cache derived afterwards stores the H/G heads, and
// tfm-fuse-attention makes of the three ops one grouped tfm.attention.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/IR/TypeInference.h"
#include "tfm/Transforms/Passes.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEGROUPEDQUERYPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-grouped-query";

/// A tensor [.., H, R, C] whose heads (the third axis from the end) repeat
/// those of `source` [.., H/G, R, C], each G times in a row.
struct RepeatedHeads {
  Value source;
  int64_t group;
};

/// `v` as reshape(broadcast(reshape(source))): source [.., h, R, C] with a
/// unit axis after h, broadcast along it to G, and the two axes merged.
std::optional<RepeatedHeads> repeatedHeads(Value v) {
  auto merge = v.getDefiningOp<ReshapeOp>();
  if (!merge)
    return std::nullopt;
  auto wide = merge.getInput().getDefiningOp<BroadcastOp>();
  if (!wide)
    return std::nullopt;
  auto split = wide.getInput().getDefiningOp<ReshapeOp>();
  if (!split)
    return std::nullopt;
  auto out = cast<RankedTensorType>(merge.getType());
  auto mid = cast<RankedTensorType>(wide.getType());
  auto in = cast<RankedTensorType>(wide.getInput().getType());
  auto src = cast<RankedTensorType>(split.getInput().getType());
  int64_t rank = out.getRank();
  if (rank < 3 || src.getRank() != rank || mid.getRank() != rank + 1 ||
      in.getRank() != rank + 1 || !out.hasStaticShape() ||
      !src.hasStaticShape())
    return std::nullopt;
  int64_t heads = rank - 3;
  ArrayRef<int64_t> os = out.getShape(), ms = mid.getShape(),
                    is = in.getShape(), ss = src.getShape();
  // [.., h, R, C] -> [.., h, 1, R, C] -> [.., h, G, R, C] -> [.., h·G, R, C]
  int64_t h = ss[heads], g = ms[heads + 1];
  for (int64_t i = 0; i < rank + 1; ++i) {
    int64_t from = i <= heads ? i : i - 1;
    if (i == heads + 1) {
      if (is[i] != 1)
        return std::nullopt;
      continue;
    }
    if (is[i] != ss[from] || ms[i] != ss[from])
      return std::nullopt;
  }
  if (g <= 1 || os[heads] != h * g ||
      os.drop_front(heads + 1) != ss.drop_front(heads + 1) ||
      os.take_front(heads) != ss.take_front(heads))
    return std::nullopt;
  return RepeatedHeads{split.getInput(), g};
}

/// A product's operand as the repeated heads of [.., h, R, C] rows, and
/// whether the product reads them transposed: either the repeat itself, or
/// a transpose of its last two axes (kᵀ made after the repeat).
struct GroupedOperand {
  RepeatedHeads repeat;
  bool transposed;
};

std::optional<GroupedOperand> groupedOperand(Value v, bool transposed) {
  if (auto r = repeatedHeads(v))
    return GroupedOperand{*r, transposed};
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t)
    return std::nullopt;
  ArrayRef<int64_t> perm = t.getPermutation();
  int64_t rank = perm.size();
  for (int64_t i = 0; i + 2 < rank; ++i)
    if (perm[i] != i)
      return std::nullopt;
  if (rank < 3 || perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return std::nullopt;
  if (auto r = repeatedHeads(t.getInput()))
    return GroupedOperand{*r, !transposed};
  return std::nullopt;
}

Value reshapeTo(PatternRewriter &rewriter, Location loc, Value v,
                ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  return rewriter.create<ReshapeOp>(loc, type.clone(shape), v);
}

/// Anchored on the masked softmax of q·kᵀ whose only reader is p·v, where
/// the keys and the values are repeats of G heads each.
struct GroupKVHeads : public OpRewritePattern<MaskedSoftmaxOp> {
  GroupKVHeads(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern(ctx), log(log) {}

  LogicalResult matchAndRewrite(MaskedSoftmaxOp softmax,
                                PatternRewriter &rewriter) const override {
    std::string why;
    FailureOr<AttentionProducts> products = attentionProducts(softmax, why);
    if (failed(products))
      return failure();
    auto [scores, weighted] = *products;
    auto key = groupedOperand(scores.getRhs(), scores.getTransposeRhs());
    auto value = groupedOperand(weighted.getRhs(), weighted.getTransposeRhs());
    if (!key && !value)
      return failure();
    if (!key || !value)
      return rewriter.notifyMatchFailure(
          softmax, Twine("the ") + (key ? "values" : "keys") +
                       " are not a repeat of fewer heads, as the " +
                       (key ? "keys" : "values") + " are");
    if (key->repeat.group != value->repeat.group)
      return rewriter.notifyMatchFailure(
          softmax, "the keys and values repeat their heads " +
                       Twine(key->repeat.group) + " and " +
                       Twine(value->repeat.group) + " times");
    if (!scores->hasOneUse())
      return rewriter.notifyMatchFailure(softmax,
                                         "the scores have other readers");
    auto st = scores.getType();
    int64_t rank = st.getRank(), group = key->repeat.group;
    auto qt = scores.getLhs().getType();
    if (qt.getRank() != rank || weighted.getType().getRank() != rank ||
        !st.hasStaticShape())
      return rewriter.notifyMatchFailure(
          softmax, "the query is broadcast over the attention's batch");
    // The mask broadcasts to the scores [.., H, Sq, Sk] from the right; one
    // that reaches their heads splits them as the scores do.
    Value mask = softmax.getMask();
    SmallVector<int64_t> maskShape;
    if (mask) {
      auto mt = cast<RankedTensorType>(mask.getType());
      maskShape.assign(mt.getShape().begin(), mt.getShape().end());
      if (mt.getRank() >= 3) {
        int64_t heads = maskShape[mt.getRank() - 3];
        if (heads != 1 && heads != st.getDimSize(rank - 3))
          return rewriter.notifyMatchFailure(softmax,
                                             "the mask's heads do not split");
        maskShape = splitHeadsShape(maskShape, heads == 1 ? 1 : group);
      }
    }
    Location loc = softmax.getLoc();
    rewriter.setInsertionPoint(weighted);
    Value q = reshapeTo(rewriter, loc, scores.getLhs(),
                        splitHeadsShape(qt.getShape(), group));
    auto operand = [&](const GroupedOperand &g) {
      auto type = cast<RankedTensorType>(g.repeat.source.getType());
      return reshapeTo(rewriter, loc, g.repeat.source,
                       splitHeadsShape(type.getShape(), 1));
    };
    Value k = operand(*key), v = operand(*value);
    UnitAttr unit = rewriter.getUnitAttr();
    Value s = rewriter.create<MatmulOp>(
        loc, q, k, scores.getTransposeLhs() ? unit : UnitAttr(),
        key->transposed ? unit : UnitAttr());
    if (mask && maskShape.size() !=
                    static_cast<size_t>(
                        cast<RankedTensorType>(mask.getType()).getRank()))
      mask = reshapeTo(rewriter, loc, mask, maskShape);
    Value p = rewriter.create<MaskedSoftmaxOp>(
        loc, s, mask, softmax.getScaleAttr(), softmax.getMaskKindAttr(),
        softmax.getCausalAttr());
    Value o = rewriter.create<MatmulOp>(loc, p, v, UnitAttr(),
                                        value->transposed ? unit : UnitAttr());
    if (log)
      log->fused.push_back(softmax.getLoc());
    rewriter.replaceOp(
        weighted, reshapeTo(rewriter, loc, o, weighted.getType().getShape()));
    rewriter.eraseOp(softmax);
    rewriter.eraseOp(scores);
    return success();
  }

  FusionLog *log;
};

struct FuseGroupedQueryPass
    : public mlir::tfm::impl::FuseGroupedQueryPassBase<FuseGroupedQueryPass> {
  using FuseGroupedQueryPassBase::FuseGroupedQueryPassBase;

  void runOnOperation() override {
    FusionLog log;
    FailureRecorder recorder;
    RewritePatternSet patterns(&getContext());
    patterns.add<GroupKVHeads>(&getContext(), &log);
    if (failed(applyRecording(getOperation(), std::move(patterns), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    // A site: an attention whose keys or values are still a repeat.
    SmallVector<std::pair<Location, std::string>> missed;
    getOperation().walk([&](MaskedSoftmaxOp op) {
      std::string why;
      FailureOr<AttentionProducts> p = attentionProducts(op, why);
      if (succeeded(p) &&
          (groupedOperand(p->scores.getRhs(), p->scores.getTransposeRhs()) ||
           groupedOperand(p->weighted.getRhs(), p->weighted.getTransposeRhs())))
        missed.emplace_back(op.getLoc(),
                            recorder.reasonAt(op.getLoc(), "not fused"));
    });
    reportSites(kFlag, log, missed);
  }
};

} // namespace
