//===- FuseRotary.cpp - Rotary position embeddings into tfm.rotary -------===//
//
// Exporters write RoPE out as `x · cos + rotate(x) · sin`, with rotate
// built of slices of the last axis, a negation and a concatenation:
//   rotate_half (Llama):     concat(-x[.., h:], x[.., :h])
//   interleaved (GPT-J and NeoX-style models): the odd and even elements
//     taken with step-2 slices, stacked as (-odd, even) pairs on a new axis
//     and merged back, [-x1, x0, -x3, x2, ..].
// The sum, the two products and the rotation become one tfm.rotary, which
// a target computes in one pass. A rotation that is not summed this way is
// a reported miss.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/IR/TypeInference.h"
#include "tfm/Transforms/Passes.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEROTARYPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-rotary";

/// `v` as a slice of the last axis of some x, whole along every other:
/// x, and the slice's start, size and step there.
struct LastAxisSlice {
  Value source;
  int64_t start, size, step;
};

std::optional<LastAxisSlice> lastAxisSlice(Value v) {
  auto s = v.getDefiningOp<SliceOp>();
  if (!s)
    return std::nullopt;
  auto in = cast<RankedTensorType>(s.getInput().getType());
  int64_t rank = in.getRank();
  if (rank < 1 || !in.hasStaticShape())
    return std::nullopt;
  ArrayRef<int64_t> starts = s.getStarts(), sizes = s.getSizes(),
                    steps = s.getSteps();
  for (int64_t i = 0; i + 1 < rank; ++i)
    if (starts[i] != 0 || sizes[i] != in.getDimSize(i) || steps[i] != 1)
      return std::nullopt;
  return LastAxisSlice{s.getInput(), starts.back(), sizes.back(), steps.back()};
}

/// `v` without a negation: the negated value, or null.
Value negated(Value v) {
  if (auto n = v.getDefiningOp<arith::NegFOp>())
    return n.getOperand();
  return Value();
}

/// A rotation of x: x, and whether its pairs are interleaved.
struct Rotation {
  Value source;
  bool interleaved;
};

/// concat(-x[.., h:], x[.., :h]) along the last axis.
std::optional<Rotation> halfRotation(ConcatOp c) {
  auto type = cast<RankedTensorType>(c.getType());
  int64_t rank = type.getRank();
  if (c.getInputs().size() != 2 || rank < 1 ||
      (static_cast<int64_t>(c.getAxis()) != rank - 1 &&
       static_cast<int64_t>(c.getAxis()) != -1))
    return std::nullopt;
  Value high = negated(c.getInputs()[0]);
  auto hi = high ? lastAxisSlice(high) : std::nullopt;
  auto lo = lastAxisSlice(c.getInputs()[1]);
  if (!hi || !lo || hi->source != lo->source)
    return std::nullopt;
  int64_t width =
      cast<RankedTensorType>(lo->source.getType()).getShape().back();
  int64_t h = width / 2;
  if (width % 2 != 0 || type.getShape().back() != width || lo->start != 0 ||
      lo->size != h || lo->step != 1 || hi->start != h || hi->size != h ||
      hi->step != 1)
    return std::nullopt;
  return Rotation{lo->source, false};
}

/// reshape(concat(reshape(-x[.., 1::2]), reshape(x[.., 0::2])) on a new
/// last axis) back to x's shape.
std::optional<Rotation> interleavedRotation(ReshapeOp merge) {
  auto c = merge.getInput().getDefiningOp<ConcatOp>();
  if (!c || c.getInputs().size() != 2)
    return std::nullopt;
  auto pairs = cast<RankedTensorType>(c.getType());
  int64_t rank = pairs.getRank();
  if (rank < 2 || pairs.getShape().back() != 2 ||
      (static_cast<int64_t>(c.getAxis()) != rank - 1 &&
       static_cast<int64_t>(c.getAxis()) != -1))
    return std::nullopt;
  auto column = [](Value v) -> Value {
    auto r = v.getDefiningOp<ReshapeOp>();
    return r ? r.getInput() : Value();
  };
  Value oddNeg = column(c.getInputs()[0]), evenV = column(c.getInputs()[1]);
  Value oddV = oddNeg ? negated(oddNeg) : Value();
  auto odd = oddV ? lastAxisSlice(oddV) : std::nullopt;
  auto even = evenV ? lastAxisSlice(evenV) : std::nullopt;
  if (!odd || !even || odd->source != even->source)
    return std::nullopt;
  auto x = cast<RankedTensorType>(odd->source.getType());
  int64_t width = x.getShape().back(), h = width / 2;
  if (width % 2 != 0 || merge.getType() != x || odd->start != 1 ||
      odd->step != 2 || odd->size != h || even->start != 0 || even->step != 2 ||
      even->size != h ||
      pairs.getShape().drop_back() !=
          cast<RankedTensorType>(oddV.getType()).getShape())
    return std::nullopt;
  return Rotation{odd->source, true};
}

std::optional<Rotation> rotationOf(Value v) {
  if (auto c = v.getDefiningOp<ConcatOp>())
    return halfRotation(c);
  if (auto r = v.getDefiningOp<ReshapeOp>())
    return interleavedRotation(r);
  return std::nullopt;
}

/// The factor of `mul` other than `v`, or null.
Value otherFactor(MulOp mul, Value v) {
  if (mul.getLhs() == v)
    return mul.getRhs();
  if (mul.getRhs() == v)
    return mul.getLhs();
  return Value();
}

/// Anchored on the sum x·cos + rotate(x)·sin, in either order.
struct FuseRotarySum : public OpRewritePattern<AddOp> {
  FuseRotarySum(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern(ctx), log(log) {}

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (unsigned turned = 0; turned < 2; ++turned) {
      auto direct = add->getOperand(1 - turned).getDefiningOp<MulOp>();
      auto rotated = add->getOperand(turned).getDefiningOp<MulOp>();
      if (!direct || !rotated)
        continue;
      for (Value factor : {rotated.getLhs(), rotated.getRhs()}) {
        std::optional<Rotation> r = rotationOf(factor);
        if (!r)
          continue;
        Value cos = otherFactor(direct, r->source);
        Value sin = otherFactor(rotated, factor);
        if (!cos)
          return rewriter.notifyMatchFailure(
              add, "the rotated input is not also multiplied by a table");
        auto type =
            inferRotaryType({add.getLoc(), "tfm.rotary"}, r->source.getType(),
                            cos.getType(), sin.getType());
        if (failed(type) || *type != add.getType())
          return rewriter.notifyMatchFailure(
              add, "the cos and sin tables do not broadcast to the rotated "
                   "input");
        if (log)
          log->fused.push_back(add.getLoc());
        rewriter.replaceOpWithNewOp<RotaryOp>(
            add, add.getType(), r->source, cos, sin,
            r->interleaved ? rewriter.getUnitAttr() : UnitAttr());
        return success();
      }
    }
    return failure();
  }

  FusionLog *log;
};

struct FuseRotaryPass
    : public mlir::tfm::impl::FuseRotaryPassBase<FuseRotaryPass> {
  using FuseRotaryPassBase::FuseRotaryPassBase;

  void runOnOperation() override {
    FusionLog log;
    FailureRecorder recorder;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRotarySum>(&getContext(), &log);
    if (failed(applyRecording(getOperation(), std::move(patterns), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    // A site: every rotation left, at the sum that reads its product, or
    // at the rotation itself when nothing sums it.
    SmallVector<std::pair<Location, std::string>> missed;
    getOperation().walk([&](Operation *op) {
      if (!isa<ConcatOp, ReshapeOp>(op) || !rotationOf(op->getResult(0)))
        return;
      Location at = op->getLoc();
      for (Operation *user : op->getUsers())
        if (isa<MulOp>(user))
          for (Operation *sum : user->getUsers())
            if (isa<AddOp>(sum))
              at = sum->getLoc();
      missed.emplace_back(
          at, recorder.reasonAt(at, "the rotation is not summed as x · cos + "
                                    "rotate(x) · sin"));
    });
    reportSites(kFlag, log, missed);
  }
};

} // namespace
