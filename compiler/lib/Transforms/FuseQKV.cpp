//===- FuseQKV.cpp - Q, K and V projections into one GEMM -----------------===//
//
// Two forms reach this pass: separate projections that read one input (two
// or three tfm.linear ops with constant weights), and one packed projection
// whose output is only sliced or split along the last axis (the
// nn.MultiheadAttention export). Both become tfm.qkv_projection; the
// separate weights are concatenated at compile time.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/Reference/Interpreter.h"
#include "tfm/Transforms/Passes.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEQKVPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-qkv";

/// A projection that can take part: no activation, constant parameters.
bool isFusableProjection(LinearOp op) {
  return op.getActivation() == Activation::none && constantOf(op.getWeight()) &&
         (!op.getBias() || constantOf(op.getBias()));
}

/// Whether `op` is a packed projection: its output is only sliced or split,
/// or reshaped and transposed and then only gathered. Such a projection is
/// already Q/K/V (or K/V) of one attention and fuses on its own.
bool isPackedProjection(LinearOp op) {
  if (op->use_empty())
    return false;
  if (llvm::all_of(op->getUsers(),
                   [](Operation *u) { return isa<SliceOp, SplitOp>(u); }))
    return true;
  Value v = op.getResult();
  while (v.hasOneUse() && isa<ReshapeOp, TransposeOp>(*v.getUsers().begin()))
    v = (*v.getUsers().begin())->getResult(0);
  return v != op.getResult() && !v.use_empty() &&
         llvm::all_of(v.getUsers(), [](Operation *u) { return isa<GatherOp>(u); });
}

/// The separate projections that read `input` and could fuse, in block
/// order. Packed projections are left out: grouping the K/V projections of
/// two decoder layers that read the same encoder memory would be wrong.
SmallVector<LinearOp> projectionsOf(Value input) {
  SmallVector<LinearOp> out;
  for (Operation *user : input.getUsers())
    if (auto l = dyn_cast<LinearOp>(user))
      if (l.getInput() == input && isFusableProjection(l) &&
          !isPackedProjection(l))
        out.push_back(l);
  llvm::sort(out, [](LinearOp a, LinearOp b) {
    return a->isBeforeInBlock(b);
  });
  return out;
}

/// Builds one qkv_projection computing `parts` of `input` with `weight` and
/// `bias` (already concatenated), in front of `before`.
QKVProjectionOp buildFused(PatternRewriter &rewriter, Operation *before,
                           Value input, DenseElementsAttr weight,
                           DenseElementsAttr bias, ArrayRef<int64_t> sizes,
                           TypeRange types) {
  rewriter.setInsertionPoint(before);
  Location loc = before->getLoc();
  Value w = rewriter.create<arith::ConstantOp>(loc, weight);
  Value b = bias ? rewriter.create<arith::ConstantOp>(loc, bias).getResult()
                 : Value();
  return rewriter.create<QKVProjectionOp>(loc, types, input, w, b, sizes);
}

/// Separate Q/K/V (or K/V) linears over one input.
struct FuseSeparateProjections : OpRewritePattern<LinearOp> {
  FuseSeparateProjections(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern(ctx), log(log) {}
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    if (!isFusableProjection(op) || isPackedProjection(op))
      return failure();
    SmallVector<LinearOp> group = projectionsOf(op.getInput());
    if (group.size() < 2)
      return failure(); // Not a site: nothing else reads this input.
    if (group.front() != op)
      return failure(); // The group is rewritten from its first member.
    if (group.size() > 3)
      return rewriter.notifyMatchFailure(
          op, std::to_string(group.size()) +
                  " projections read the same input; cannot tell which are "
                  "one attention's Q, K and V");
    Type elt = op.getType().getElementType();
    SmallVector<DenseElementsAttr> weights, biases;
    SmallVector<int64_t> sizes;
    SmallVector<Type> types;
    bool anyBias = false;
    for (LinearOp l : group) {
      if (l.getType().getElementType() != elt)
        return rewriter.notifyMatchFailure(op, "the projections differ in "
                                               "element type");
      int64_t n = l.getWeight().getType().getDimSize(0);
      weights.push_back(constantOf(l.getWeight()));
      biases.push_back(l.getBias() ? constantOf(l.getBias()) : zeros(elt, n));
      anyBias |= static_cast<bool>(l.getBias());
      sizes.push_back(n);
      types.push_back(l.getType());
    }
    auto fused = buildFused(rewriter, op, op.getInput(), concatRows(weights),
                            anyBias ? concatRows(biases) : DenseElementsAttr(),
                            sizes, types);
    for (auto [l, r] : llvm::zip(group, fused.getResults()))
      rewriter.replaceOp(l, r);
    if (log)
      log->fused.push_back(fused.getLoc());
    return success();
  }
  FusionLog *log;
};

/// One packed projection whose output is only sliced or split along the last
/// axis into two or three parts.
struct FusePackedProjection : OpRewritePattern<LinearOp> {
  FusePackedProjection(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern(ctx), log(log) {}

  /// The other packed export: reshape and transpose the projection so the
  /// parts lie along one axis, then Gather each part by a constant index
  /// (unflatten, unsqueeze, transpose, squeeze, then [0], [1], [2]). Rather
  /// than reason about every permutation, the chain is run by the reference
  /// interpreter on a probe whose elements are their own indices: each
  /// gathered part must read exactly one consecutive slice of the last axis,
  /// in order, which proves the rewrite for every input.
  LogicalResult matchGatherForm(LinearOp op, PatternRewriter &rewriter) const {
    SmallVector<Operation *> chain;
    Value v = op.getResult();
    while (v.hasOneUse() &&
           isa<ReshapeOp, TransposeOp>(*v.getUsers().begin())) {
      chain.push_back(*v.getUsers().begin());
      v = chain.back()->getResult(0);
    }
    SmallVector<GatherOp> gathers;
    for (Operation *u : v.getUsers()) {
      auto g = dyn_cast<GatherOp>(u);
      if (!g || !constantOf(g.getIndices()) ||
          g.getIndices().getType().getNumElements() != 1)
        return failure(); // Not this form: not a site.
      gathers.push_back(g);
    }
    int64_t parts = gathers.size();
    int64_t n = op.getType().getShape().back();
    if (chain.empty() || parts < 2 || parts > 3 || n % parts != 0)
      return rewriter.notifyMatchFailure(
          op, "the packed projection is reshaped and gathered, but not into "
              "2 or 3 equal parts");
    // The probe: every element holds its own flat index.
    reference::Tensor probe(
        *reference::elementKindOf(op.getType().getElementType()),
        std::vector<int64_t>(op.getType().getShape().begin(),
                             op.getType().getShape().end()));
    for (int64_t i = 0; i < probe.numElements(); ++i)
      probe.set(i, static_cast<double>(i));
    reference::Interpreter interpreter;
    reference::Tensor cur = probe;
    for (Operation *c : chain) {
      auto r = interpreter.evaluate(c, {cur});
      if (failed(r))
        return rewriter.notifyMatchFailure(op, "could not trace the chain");
      cur = (*r)[0];
    }
    int64_t width = n / parts;
    SmallVector<int64_t> partOf(parts, -1);
    for (auto [gi, g] : llvm::enumerate(gathers)) {
      reference::Tensor idx = *reference::Interpreter::fromAttr(
          constantOf(g.getIndices()));
      auto r = interpreter.evaluate(g, {cur, idx});
      if (failed(r))
        return rewriter.notifyMatchFailure(op, "could not trace a gather");
      std::vector<double> got = (*r)[0].asDoubles();
      // Which part this gather reads, from its first element.
      int64_t part = (static_cast<int64_t>(got.empty() ? 0 : got[0]) % n) /
                     width;
      size_t k = 0;
      for (int64_t row = 0; row < probe.numElements() / n; ++row)
        for (int64_t col = 0; col < width; ++col, ++k)
          if (k >= got.size() ||
              got[k] != static_cast<double>(row * n + part * width + col))
            return rewriter.notifyMatchFailure(
                op, "a gathered part is not one consecutive slice of the "
                    "packed projection");
      if (k != got.size() || partOf[part] != -1)
        return rewriter.notifyMatchFailure(op, "the gathered parts overlap");
      partOf[part] = gi;
    }
    SmallVector<int64_t> sizes(parts, width);
    SmallVector<Type> types;
    for (int64_t p = 0; p < parts; ++p) {
      SmallVector<int64_t> shape(op.getType().getShape());
      shape.back() = width;
      types.push_back(
          RankedTensorType::get(shape, op.getType().getElementType()));
    }
    auto fused = buildFused(
        rewriter, op, op.getInput(), constantOf(op.getWeight()),
        op.getBias() ? constantOf(op.getBias()) : DenseElementsAttr(), sizes,
        types);
    for (int64_t p = 0; p < parts; ++p) {
      GatherOp g = gathers[partOf[p]];
      rewriter.setInsertionPoint(g);
      Value r = rewriter.create<ReshapeOp>(g.getLoc(), g.getType(),
                                           fused.getResult(p));
      rewriter.replaceOp(g, r);
    }
    if (log)
      log->fused.push_back(fused.getLoc());
    return success();
  }
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    // Only a projection that is wholly sliced or split is a site; others
    // stay quiet so their reasons do not mask the separate form's.
    if (!isFusableProjection(op) || op->use_empty())
      return failure();
    if (!llvm::all_of(op->getUsers(),
                      [](Operation *u) { return isa<SliceOp, SplitOp>(u); }))
      return matchGatherForm(op, rewriter);
    int64_t rank = op.getType().getRank();
    int64_t n = op.getType().getShape().back();
    // (start, size, value to replace)
    SmallVector<std::tuple<int64_t, int64_t, Value>> parts;
    for (Operation *user : op->getUsers()) {
      if (auto split = dyn_cast<SplitOp>(user)) {
        auto axis = static_cast<int64_t>(split.getAxis());
        if (axis != -1 && axis != rank - 1)
          return rewriter.notifyMatchFailure(
              op, "the packed projection is split along another axis");
        int64_t start = 0;
        for (auto [size, r] : llvm::zip(split.getSizes(), split.getResults())) {
          parts.emplace_back(start, size, r);
          start += size;
        }
        continue;
      }
      auto slice = cast<SliceOp>(user);
      ArrayRef<int64_t> starts = slice.getStarts(), sizes = slice.getSizes(),
                        steps = slice.getSteps();
      for (int64_t d = 0; d + 1 < rank; ++d)
        if (starts[d] != 0 || steps[d] != 1 ||
            sizes[d] != op.getType().getDimSize(d))
          return rewriter.notifyMatchFailure(
              op, "a slice of the packed projection cuts other than the "
                  "last axis");
      if (steps.back() != 1)
        return rewriter.notifyMatchFailure(op, "a slice is strided");
      parts.emplace_back(starts.back(), sizes.back(), slice.getResult());
    }
    llvm::sort(parts, [](const auto &a, const auto &b) {
      return std::get<0>(a) < std::get<0>(b);
    });
    int64_t next = 0;
    for (auto &[start, size, v] : parts) {
      if (start != next)
        return rewriter.notifyMatchFailure(
            op, "the slices do not tile the packed projection");
      next += size;
    }
    if (next != n || parts.size() < 2 || parts.size() > 3)
      return rewriter.notifyMatchFailure(
          op, "the slices do not cut the packed projection into 2 or 3 "
              "parts");
    SmallVector<int64_t> sizes;
    SmallVector<Type> types;
    for (auto &[start, size, v] : parts) {
      sizes.push_back(size);
      types.push_back(v.getType());
    }
    auto fused = buildFused(
        rewriter, op, op.getInput(), constantOf(op.getWeight()),
        op.getBias() ? constantOf(op.getBias()) : DenseElementsAttr(), sizes,
        types);
    for (auto [part, r] : llvm::zip(parts, fused.getResults()))
      rewriter.replaceAllUsesWith(std::get<2>(part), r);
    if (log)
      log->fused.push_back(fused.getLoc());
    return success();
  }
  FusionLog *log;
};

/// split(reshape(linear)) along the last axis, where the reshape keeps the
/// last dimension (GPT-2's Conv1D views its 2-D product back to 3-D before
/// splitting Q, K and V), becomes reshapes of split(linear), so the packed
/// projection is split directly.
struct SplitBeforeReshape : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitOp op,
                                PatternRewriter &rewriter) const override {
    auto reshape = op.getInput().getDefiningOp<ReshapeOp>();
    if (!reshape || !reshape->hasOneUse() ||
        !reshape.getInput().getDefiningOp<LinearOp>())
      return failure();
    auto from = cast<RankedTensorType>(reshape.getInput().getType());
    auto to = cast<RankedTensorType>(reshape.getType());
    auto axis = static_cast<int64_t>(op.getAxis());
    if ((axis != -1 && axis != to.getRank() - 1) ||
        from.getShape().back() != to.getShape().back())
      return failure();
    SmallVector<Type> types;
    for (int64_t size : op.getSizes()) {
      SmallVector<int64_t> shape(from.getShape());
      shape.back() = size;
      types.push_back(RankedTensorType::get(shape, from.getElementType()));
    }
    auto split = rewriter.create<SplitOp>(
        op.getLoc(), types, reshape.getInput(),
        rewriter.getI64IntegerAttr(from.getRank() - 1), op.getSizesAttr());
    SmallVector<Value> parts;
    for (auto [r, old] : llvm::zip(split.getResults(), op.getResults()))
      parts.push_back(
          rewriter.create<ReshapeOp>(reshape.getLoc(), old.getType(), r));
    rewriter.replaceOp(op, parts);
    return success();
  }
};

struct FuseQKVPass : public mlir::tfm::impl::FuseQKVPassBase<FuseQKVPass> {
  using FuseQKVPassBase::FuseQKVPassBase;
  void runOnOperation() override {
    FusionLog log;
    FailureRecorder recorder;
    // Linears first: a group formed while one of its matmuls is not yet a
    // linear would leave that projection out.
    RewritePatternSet recognize(&getContext());
    populateLinearRecognitionPatterns(recognize);
    if (failed(applyRecording(getOperation(), std::move(recognize), recorder)))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseSeparateProjections, FusePackedProjection>(&getContext(),
                                                                &log);
    patterns.add<SplitBeforeReshape>(&getContext());
    if (failed(applyRecording(getOperation(), std::move(patterns), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    // Sites left: inputs read by several projections, and packed projections
    // that are only sliced.
    SmallVector<std::pair<Location, std::string>> missed;
    llvm::SmallPtrSet<Value, 8> seen;
    getOperation().walk([&](LinearOp op) {
      if (!isFusableProjection(op)) {
        // A training graph's projections read parameters, which change
        // every step: packing them would copy the weights each step.
        if (op.getActivation() != Activation::none ||
            constantOf(op.getWeight()) || !seen.insert(op.getInput()).second)
          return;
        // Q, K and V are split into heads; a gated MLP's two projections
        // of one input, which its own pass reports, are not.
        auto siblings =
            llvm::count_if(op.getInput().getUsers(), [&](Operation *u) {
              auto l = dyn_cast<LinearOp>(u);
              return l && l.getInput() == op.getInput() &&
                     l.getActivation() == Activation::none &&
                     !isPackedProjection(l) &&
                     llvm::any_of(l->getUsers(), [](Operation *r) {
                       return isa<ReshapeOp>(r);
                     });
            });
        if (siblings >= 2 && siblings <= 3)
          missed.emplace_back(op.getLoc(),
                              "a projection's weight is not a constant (a "
                              "training graph's parameter), so the projections "
                              "cannot be packed at compile time");
        return;
      }
      SmallVector<LinearOp> group = projectionsOf(op.getInput());
      bool sliced = isPackedProjection(op);
      if ((group.size() >= 2 && seen.insert(op.getInput()).second) || sliced)
        missed.emplace_back(op.getLoc(),
                            recorder.reasonAt(op.getLoc(), "not fused"));
    });
    reportSites(kFlag, log, missed);
  }
};

} // namespace

void mlir::tfm::populateQKVPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseSeparateProjections, FusePackedProjection>(
      patterns.getContext(), nullptr);
  patterns.add<SplitBeforeReshape>(patterns.getContext());
}
