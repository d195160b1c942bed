//===- ExactPadding.cpp - tfm-exact-padding -------------------------------===//
//
// One artifact for a range of sizes (`--shape sequence=1..512`) is a few
// static functions, the buckets, and a rule: a run of size n takes the
// smallest bucket L >= n with its inputs padded with zeros from n to L, and
// returns the outputs' first n rows. That is only sound if no output row
// below n reads a padded position, so this pass proves it for every bucket,
// op by op, or names the op that breaks it. It follows each padded axis
// from the inputs: row-wise ops keep it; a product that contracts over it
// is exact when one side is exactly zero on the padding (attention weights
// after a masked softmax, a mask input multiplied in); a softmax over it
// gets a key mask, an input the runtime fills with 0 below n and -inf from
// n on, unless a causal mask already hides every later key.
//
// Constants that are as long as a padded axis (a causal triangle, position
// embeddings) are taken to be a prefix of themselves at every length: the
// importer folds them from the same graph at each bucket's size.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Transforms/Passes.h"
#include "ShapeUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/MapVector.h"

#include <limits>
#include <numeric>

namespace mlir::tfm {
#define GEN_PASS_DEF_EXACTPADDINGPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// What an axis holds past the run's size.
struct Axis {
  int symbol = -1;     // the dimension symbol it follows, or -1
  bool merged = false; // the symbol is its outer factor ([S·B, D])
  bool zero = false;   // exactly 0 at padded positions
};
using Axes = SmallVector<Axis, 6>;

/// How an elementwise op keeps zeros: a product is zero where any factor
/// is, a sum where every term is, a unary map where its operand is.
enum class ZeroRule { none, any, all, first };

class Prover {
public:
  Prover(func::FuncOp fn, ArrayRef<StringAttr> symbols,
         ArrayRef<int64_t> sizes, ArrayRef<int64_t> served,
         ArrayRef<Value> keyMasks)
      : fn(fn), symbols(symbols), sizes(sizes), served(served),
        keyMasks(keyMasks), b(fn.getContext()) {}

  /// Proves the bucket exact for every size from `served` up to `sizes`,
  /// adding the key masks it needs; fills `outputs` and `maskUsed`.
  LogicalResult run(ArrayRef<SmallVector<int64_t>> inputs);

  SmallVector<SmallVector<int64_t>> outputs;
  SmallVector<bool> maskUsed;

private:
  LogicalResult visit(Operation &op);
  LogicalResult fail(Operation &op, const Twine &why);
  Axes axesOf(Value v) const;
  bool follows(Value v) const;
  StringRef name(int symbol) const { return symbols[symbol].getValue(); }

  /// Numpy broadcasting of `operands` against the result's axes.
  LogicalResult aligned(Operation &op, ArrayRef<unsigned> operands,
                        ZeroRule zeros, Axes &result);
  void set(Operation &op, const Axes &axes) {
    for (Value r : op.getResults())
      followed[r] = axes;
  }
  /// The additive mask that hides symbol `s`'s padded keys, combined with
  /// `mask` (of `kind`); its kind is additive.
  Value withKeyMask(Location loc, Value mask, MaskKind kind, int symbol,
                    Type elementType);

  LogicalResult visitMatmul(MatmulOp op);
  LogicalResult visitSoftmax(Operation &op, Value input, Value mask,
                             MaskKind kind, bool causal, int64_t axis);
  LogicalResult visitReshape(ReshapeOp op);

  func::FuncOp fn;
  ArrayRef<StringAttr> symbols;
  ArrayRef<int64_t> sizes, served;
  ArrayRef<Value> keyMasks;
  OpBuilder b;
  // The axes of each value that follows a symbol.
  DenseMap<Value, Axes> followed;
};

LogicalResult Prover::fail(Operation &op, const Twine &why) {
  return op.emitError() << "padding to a bucket is not exact here, so one "
                           "artifact cannot serve a range of sizes: "
                        << why << "; compile each size on its own (--shape "
                        << "SYMBOL=N)";
}

Axes Prover::axesOf(Value v) const {
  auto it = followed.find(v);
  if (it != followed.end())
    return it->second;
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return Axes(t ? t.getRank() : 0);
}

bool Prover::follows(Value v) const {
  return llvm::any_of(axesOf(v), [](const Axis &a) { return a.symbol >= 0; });
}

LogicalResult Prover::aligned(Operation &op, ArrayRef<unsigned> operands,
                              ZeroRule zeros, Axes &result) {
  auto rt = cast<RankedTensorType>(op.getResult(0).getType());
  int64_t rank = rt.getRank();
  result.assign(rank, Axis());
  SmallVector<int> zeroCount(rank, 0), present(rank, 0);
  for (unsigned i : operands) {
    Value v = op.getOperand(i);
    Axes in = axesOf(v);
    int64_t lead = rank - static_cast<int64_t>(in.size());
    for (auto [a, axis] : llvm::enumerate(in)) {
      if (shapeOf(v)[a] != 1)
        ++present[lead + a];
      if (axis.zero)
        ++zeroCount[lead + a];
      if (axis.symbol < 0)
        continue;
      Axis &out = result[lead + a];
      if (out.symbol >= 0 &&
          (out.symbol != axis.symbol || out.merged != axis.merged))
        return fail(op, "it combines '" + name(out.symbol) + "' with '" +
                            name(axis.symbol) + "' on one axis");
      out.symbol = axis.symbol;
      out.merged = axis.merged;
    }
  }
  // An operand as long as a padded axis that does not follow it is a
  // constant read there (a position table), unless it follows the sizes on
  // another axis: then the two would mix positions.
  for (unsigned i : operands) {
    Value v = op.getOperand(i);
    Axes in = axesOf(v);
    int64_t lead = rank - static_cast<int64_t>(in.size());
    for (auto [a, axis] : llvm::enumerate(in))
      if (result[lead + a].symbol >= 0 && axis.symbol < 0 &&
          shapeOf(v)[a] != 1 && follows(v))
        return fail(op, "an operand is as long as '" +
                            name(result[lead + a].symbol) +
                            "' on an axis that does not follow it");
  }
  for (int64_t a = 0; a < rank; ++a) {
    if (result[a].symbol < 0)
      continue;
    switch (zeros) {
    case ZeroRule::none:
      break;
    case ZeroRule::any:
      result[a].zero = zeroCount[a] > 0;
      break;
    case ZeroRule::all:
      result[a].zero = zeroCount[a] == static_cast<int>(operands.size());
      break;
    case ZeroRule::first: {
      Axes first = axesOf(op.getOperand(operands.front()));
      int64_t lead = rank - static_cast<int64_t>(first.size());
      result[a].zero = a >= lead && first[a - lead].zero;
      break;
    }
    }
  }
  return success();
}

Value Prover::withKeyMask(Location loc, Value mask, MaskKind kind, int symbol,
                          Type elementType) {
  maskUsed[symbol] = true;
  auto castTo = [&](Value v, Type type) -> Value {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getElementType() == type ? v
                                      : b.create<CastOp>(loc, t.clone(type), v);
  };
  Value keys = keyMasks[symbol];
  if (kind == MaskKind::none || !mask)
    return castTo(keys, elementType);
  if (kind == MaskKind::additive)
    return b.create<AddOp>(
        loc, mask,
        castTo(keys, cast<RankedTensorType>(mask.getType()).getElementType()));
  // A boolean mask: the key mask where it keeps a score, -inf elsewhere.
  auto scalar = RankedTensorType::get({}, elementType);
  Value hidden = b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(
               scalar, b.getFloatAttr(elementType,
                                      -std::numeric_limits<double>::infinity())
                           .getValue()));
  return b.create<SelectOp>(loc, mask, castTo(keys, elementType), hidden);
}

LogicalResult Prover::visitSoftmax(Operation &op, Value input, Value mask,
                                   MaskKind kind, bool causal, int64_t axis) {
  Axes in = axesOf(input);
  int64_t rank = in.size();
  SmallVector<unsigned> operands{0};
  if (mask)
    operands.push_back(1);
  Axes result;
  if (failed(aligned(op, operands, ZeroRule::none, result)))
    return failure();
  const Axis &keys = result[axis];
  if (keys.symbol < 0) {
    set(op, result);
    return success();
  }
  if (axis != rank - 1 || keys.merged)
    return fail(op, "a softmax runs over '" + name(keys.symbol) +
                        "' on an axis that is not its last, or merged "
                        "with others");
  // A causal softmax over a query axis of the same size never reads a key
  // after its row: rows below n see no padding.
  bool hidden = causal && rank >= 2 && result[rank - 2].symbol == keys.symbol &&
                !result[rank - 2].merged;
  if (!hidden) {
    b.setInsertionPoint(&op);
    Value newMask =
        withKeyMask(op.getLoc(), mask, kind, keys.symbol,
                    cast<RankedTensorType>(input.getType()).getElementType());
    FloatAttr scale = b.getF64FloatAttr(1.0);
    if (auto ms = dyn_cast<MaskedSoftmaxOp>(op))
      scale = ms.getScaleAttr();
    auto softmax = b.create<MaskedSoftmaxOp>(
        op.getLoc(), input.getType(), input, newMask, scale,
        MaskKindAttr::get(b.getContext(), MaskKind::additive),
        causal ? b.getUnitAttr() : UnitAttr());
    op.getResult(0).replaceAllUsesWith(softmax.getResult());
    result[axis].zero = true;
    followed[softmax.getResult()] = result;
    op.erase();
    return success();
  }
  result[axis].zero = true;
  set(op, result);
  return success();
}

LogicalResult Prover::visitMatmul(MatmulOp op) {
  Axes lhs = axesOf(op.getLhs()), rhs = axesOf(op.getRhs());
  int64_t lr = lhs.size(), rr = rhs.size();
  if (lr < 2 || rr < 2)
    return fail(*op, "a matmul of a vector follows the sizes");
  auto [lm, lk, rk, rn] =
      matmulAxes(lr, rr, op.getTransposeLhs(), op.getTransposeRhs());
  int64_t rank = cast<RankedTensorType>(op.getType()).getRank();
  Axes result(rank);
  for (auto [in, n] : {std::make_pair(&lhs, lr), std::make_pair(&rhs, rr)})
    for (int64_t a = 0; a < n - 2; ++a) {
      const Axis &axis = (*in)[a];
      if (axis.symbol < 0)
        continue;
      Axis &out = result[rank - n + a];
      if (out.symbol >= 0 && out.symbol != axis.symbol)
        return fail(*op, "a matmul batches over two different symbols");
      out.symbol = axis.symbol;
      out.merged = axis.merged;
    }
  const Axis &l = lhs[lk], &r = rhs[rk];
  if (l.symbol >= 0 || r.symbol >= 0) {
    if (l.symbol >= 0 && r.symbol >= 0 &&
        (l.symbol != r.symbol || l.merged != r.merged))
      return fail(*op, "a matmul contracts '" + name(l.symbol) +
                           "' against '" + name(r.symbol) + "'");
    if (!(l.symbol >= 0 && l.zero) && !(r.symbol >= 0 && r.zero))
      return fail(*op, "a matmul sums over '" +
                           name(l.symbol >= 0 ? l.symbol : r.symbol) +
                           "', and neither side is zero on the padding "
                           "(attention weights without a mask over it?)");
    if ((l.symbol < 0 && follows(op.getLhs())) ||
        (r.symbol < 0 && follows(op.getRhs())))
      return fail(*op, "a matmul contracts a padded axis against one that "
                       "does not follow it");
  }
  result[rank - 2] = lhs[lm];
  result[rank - 1] = rhs[rn];
  set(*op, result);
  return success();
}

LogicalResult Prover::visitReshape(ReshapeOp op) {
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op);
  Axes inAxes = axesOf(op.getInput());
  Axes result(out.size());
  for (auto [i, axis] : llvm::enumerate(inAxes)) {
    if (axis.symbol < 0)
      continue;
    int64_t size = sizes[axis.symbol];
    int64_t before = prefixProduct(in, i);
    bool found = false;
    for (size_t j = 0; j < out.size() && !found; ++j) {
      // The axis keeps the symbol as its outer factor: it merges with the
      // axes after it, or splits them off again.
      if (prefixProduct(out, j) != before || out[j] % size != 0 ||
          result[j].symbol >= 0)
        continue;
      if (out[j] == size && out[j] != in[i] && in[i] % size != 0)
        continue;
      result[j] = axis;
      result[j].merged = out[j] != size;
      found = true;
    }
    if (!found)
      return fail(*op, "a reshape moves '" + name(axis.symbol) +
                           "' inside another axis");
  }
  set(*op, result);
  return success();
}

LogicalResult Prover::visit(Operation &op) {
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    for (Value v : ret.getOperands()) {
      SmallVector<int64_t> symbolsOf;
      for (const Axis &a : axesOf(v)) {
        if (a.symbol >= 0 && a.merged)
          return fail(op, "an output merges '" + name(a.symbol) +
                              "' with another axis, so its padded rows are "
                              "not a suffix the runtime can cut off");
        symbolsOf.push_back(a.symbol);
      }
      outputs.push_back(std::move(symbolsOf));
    }
    return success();
  }
  if (!llvm::any_of(op.getOperands(), [&](Value v) { return follows(v); }))
    return success();
  Axes result;
  auto all = [&] {
    SmallVector<unsigned> operands;
    for (unsigned i = 0; i < op.getNumOperands(); ++i)
      operands.push_back(i);
    return operands;
  };

  if (auto m = dyn_cast<MatmulOp>(op))
    return visitMatmul(m);
  if (auto r = dyn_cast<ReshapeOp>(op))
    return visitReshape(r);
  if (auto s = dyn_cast<MaskedSoftmaxOp>(op))
    return visitSoftmax(op, s.getInput(), s.getMask(), s.getMaskKind(),
                        s.getCausal(), shapeOf(s.getInput()).size() - 1);
  if (auto s = dyn_cast<SoftmaxOp>(op))
    return visitSoftmax(op, s.getInput(), Value(), MaskKind::none, false,
                        axisOf(s.getAxis(), shapeOf(s.getInput()).size()));
  if (isa<MulOp>(op) || isa<AddOp, SubOp>(op) || isa<DivOp>(op) ||
      isa<PowOp, MaxOp, MinOp, CompareOp, SelectOp>(op)) {
    ZeroRule rule = isa<MulOp>(op)           ? ZeroRule::any
                    : isa<AddOp, SubOp>(op) ? ZeroRule::all
                    : isa<DivOp>(op)        ? ZeroRule::first
                                            : ZeroRule::none;
    if (failed(aligned(op, all(), rule, result)))
      return failure();
    set(op, result);
    return success();
  }
  if (isa<CastOp, ReluOp, GeluOp, DropoutOp, BroadcastOp>(op)) {
    if (failed(aligned(op, {0}, ZeroRule::first, result)))
      return failure();
    set(op, result);
    return success();
  }
  if (op.hasTrait<mlir::OpTrait::Elementwise>() && op.getNumResults() == 1) {
    if (failed(aligned(op, all(), ZeroRule::none, result)))
      return failure();
    set(op, result);
    return success();
  }
  auto normalize = [&](ArrayRef<unsigned> operands,
                       int64_t axis) -> LogicalResult {
    if (failed(aligned(op, operands, ZeroRule::none, result)))
      return failure();
    for (int64_t a = axisOf(axis, result.size());
         a < static_cast<int64_t>(result.size()); ++a)
      if (result[a].symbol >= 0)
        return fail(op, "it normalizes over '" + name(result[a].symbol) + "'");
    set(op, result);
    return success();
  };
  if (auto ln = dyn_cast<LayerNormOp>(op))
    return normalize({0}, ln.getAxis());
  if (auto ln = dyn_cast<AddLayerNormOp>(op))
    return normalize({0, 1}, ln.getAxis());
  if (isa<LinearOp, QKVProjectionOp>(op)) {
    Axes in = axesOf(op.getOperand(0));
    for (unsigned i = 1; i < op.getNumOperands(); ++i)
      if (follows(op.getOperand(i)))
        return fail(op, "its weights follow the sizes");
    if (in.back().symbol >= 0)
      return fail(op, "it contracts over '" + name(in.back().symbol) + "'");
    for (Axis &a : in)
      a.zero = false;
    set(op, in);
    return success();
  }
  if (auto e = dyn_cast<EmbeddingOp>(op)) {
    if (follows(e.getTable()))
      return fail(op, "its table follows the sizes");
    result = axesOf(e.getIndices());
    for (Axis &a : result)
      a.zero = false;
    result.push_back(Axis());
    set(op, result);
    return success();
  }
  if (auto g = dyn_cast<GatherOp>(op)) {
    Axes in = axesOf(g.getInput()), idx = axesOf(g.getIndices());
    int64_t axis = axisOf(g.getAxis(), in.size());
    if (in[axis].symbol >= 0) {
      // Fixed positions below the smallest size served read no padding.
      DenseIntElementsAttr values;
      bool below = matchPattern(g.getIndices(), m_Constant(&values)) &&
                   !in[axis].merged;
      if (below)
        for (APInt v : values)
          below = below && !v.isNegative() &&
                  v.getSExtValue() < served[in[axis].symbol];
      if (!below)
        return fail(op, "it picks positions out of '" +
                            name(in[axis].symbol) +
                            "' that may lie in the padding (the last "
                            "token, counted from the end?)");
      in[axis] = Axis();
    }
    for (Axis &a : idx)
      a.zero = false;
    result.assign(in.begin(), in.begin() + axis);
    result.append(idx.begin(), idx.end());
    result.append(in.begin() + axis + 1, in.end());
    set(op, result);
    return success();
  }
  if (auto t = dyn_cast<TransposeOp>(op)) {
    Axes in = axesOf(t.getInput());
    for (int64_t p : t.getPermutation())
      result.push_back(in[p]);
    set(op, result);
    return success();
  }
  if (auto r = dyn_cast<ReduceOp>(op)) {
    Axes in = axesOf(r.getInput());
    int64_t rank = in.size();
    SmallVector<bool> reduced = axisSet(r.getAxes(), rank);
    for (int64_t a = 0; a < rank; ++a) {
      if (!reduced[a]) {
        result.push_back(in[a]);
        continue;
      }
      if (in[a].symbol >= 0 &&
          !(r.getKind() == ReduceKind::sum && in[a].zero))
        return fail(op, "it reduces over '" + name(in[a].symbol) +
                            "' (a mean or a maximum over positions, or a sum "
                            "that no mask input zeroes on the padding)");
      if (r.getKeepdims())
        result.push_back(Axis());
    }
    for (Axis &a : result)
      a.zero = false;
    set(op, result);
    return success();
  }
  if (auto s = dyn_cast<SliceOp>(op)) {
    Axes in = axesOf(s.getInput());
    for (auto [a, axis] : llvm::enumerate(in)) {
      if (axis.symbol < 0)
        continue;
      int64_t start = s.getStarts()[a], step = s.getSteps()[a],
              size = s.getSizes()[a];
      if (start == 0 && step == 1 && size == shapeOf(s.getInput())[a])
        continue;
      // Fixed positions below the smallest size served read no padding.
      if (!axis.merged && step > 0 && size > 0 &&
          start + (size - 1) * step < served[axis.symbol]) {
        axis = Axis();
        continue;
      }
      return fail(op, "it slices '" + name(axis.symbol) +
                          "' at positions that may lie in the padding");
    }
    set(op, in);
    return success();
  }
  if (auto s = dyn_cast<SplitOp>(op)) {
    Axes in = axesOf(s.getInput());
    if (in[axisOf(s.getAxis(), in.size())].symbol >= 0)
      return fail(op, "it splits '" +
                          name(in[axisOf(s.getAxis(), in.size())].symbol) +
                          "'");
    set(op, in);
    return success();
  }
  if (auto c = dyn_cast<ConcatOp>(op)) {
    if (failed(aligned(op, all(), ZeroRule::all, result)))
      return failure();
    int64_t axis = axisOf(c.getAxis(), result.size());
    if (result[axis].symbol >= 0)
      return fail(op, "it concatenates along '" +
                          name(result[axis].symbol) +
                          "', which would put padding between rows");
    set(op, result);
    return success();
  }
  if (auto t = dyn_cast<TopKOp>(op)) {
    Axes in = axesOf(t.getInput());
    int64_t axis = axisOf(t.getAxis(), in.size());
    if (in[axis].symbol >= 0)
      return fail(op, "it ranks over '" + name(in[axis].symbol) + "'");
    for (Axis &a : in)
      a.zero = false;
    set(op, in);
    return success();
  }
  return fail(op, "'" + op.getName().getStringRef() +
                      "' has no rule for padded sizes yet");
}

LogicalResult Prover::run(ArrayRef<SmallVector<int64_t>> inputs) {
  maskUsed.assign(symbols.size(), false);
  for (auto [i, symbolsOf] : llvm::enumerate(inputs)) {
    Axes axes(symbolsOf.size());
    for (auto [a, s] : llvm::enumerate(symbolsOf)) {
      axes[a].symbol = s;
      // The runtime pads inputs with zeros.
      axes[a].zero = s >= 0;
    }
    followed[fn.getArgument(i)] = axes;
  }
  // Visiting may replace an op (a softmax with its key mask), so take the
  // list first.
  SmallVector<Operation *> ops;
  for (Operation &op : fn.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops)
    if (failed(visit(*op)))
      return failure();
  return success();
}

/// The axes of each argument that follow a symbol, from its `tfm.symbols`.
FailureOr<SmallVector<SmallVector<int64_t>>>
inputSymbols(func::FuncOp fn, unsigned numInputs,
             ArrayRef<StringAttr> symbols, SmallVectorImpl<int64_t> &sizes) {
  SmallVector<SmallVector<int64_t>> result;
  for (unsigned i = 0; i < numInputs; ++i) {
    auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
    SmallVector<int64_t> axes(type ? type.getRank() : 0, -1);
    if (auto names = fn.getArgAttrOfType<ArrayAttr>(i, "tfm.symbols")) {
      if (!type || names.size() != axes.size())
        return fn.emitError() << "argument " << i
                              << ": tfm.symbols needs one name per axis";
      for (auto [a, n] : llvm::enumerate(names)) {
        auto str = dyn_cast<StringAttr>(n);
        if (!str)
          return fn.emitError() << "argument " << i
                                << ": tfm.symbols holds strings";
        if (str.getValue().empty())
          continue;
        const auto *it = llvm::find(symbols, str);
        if (it == symbols.end())
          return fn.emitError() << "argument " << i << " follows '" << str
                                << "', which tfm.symbol_ranges lacks";
        int64_t s = it - symbols.begin();
        int64_t extent = type.getDimSize(a);
        if (sizes[s] && sizes[s] != extent)
          return fn.emitError() << "'" << str << "' is " << sizes[s]
                                << " long in one argument and " << extent
                                << " in argument " << i;
        sizes[s] = extent;
        axes[a] = s;
      }
    }
    result.push_back(std::move(axes));
  }
  return result;
}

struct ExactPaddingPass
    : public mlir::tfm::impl::ExactPaddingPassBase<ExactPaddingPass> {
  void runOnOperation() override;
};

void ExactPaddingPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto ranges = module->getAttrOfType<DictionaryAttr>("tfm.symbol_ranges");
  if (!ranges)
    return;
  MLIRContext *ctx = &getContext();
  Builder builder(ctx);
  SmallVector<StringAttr> symbols;
  SmallVector<int64_t> minSizes, maxSizes;
  for (NamedAttribute r : ranges) {
    auto bounds = dyn_cast<DenseI64ArrayAttr>(r.getValue());
    if (!bounds || bounds.size() != 2 || bounds[0] < 1 ||
        bounds[0] > bounds[1]) {
      module.emitError() << "tfm.symbol_ranges: '" << r.getName()
                         << "' needs array<i64: min, max> with 1 <= min <= "
                            "max";
      return signalPassFailure();
    }
    symbols.push_back(r.getName());
    minSizes.push_back(bounds[0]);
    maxSizes.push_back(bounds[1]);
  }
  size_t n = symbols.size();

  // The buckets of each entry, in the order they appear.
  llvm::MapVector<StringAttr, SmallVector<func::FuncOp>> groups;
  for (auto fn : module.getOps<func::FuncOp>())
    if (auto of = fn->getAttrOfType<StringAttr>("tfm.bucket_of"))
      groups[of].push_back(fn);

  SmallVector<Attribute> entries;
  for (auto &[entry, fns] : groups) {
    // Each bucket's size of each symbol, and the inputs' axes.
    unsigned numInputs = fns.front().getNumArguments();
    SmallVector<SmallVector<int64_t>> sizes;
    SmallVector<SmallVector<int64_t>> inputs;
    for (func::FuncOp fn : fns) {
      SmallVector<int64_t> s(n, 0);
      auto in = inputSymbols(fn, fn.getNumArguments(), symbols, s);
      if (failed(in))
        return signalPassFailure();
      if (fn.getNumArguments() != numInputs ||
          (!inputs.empty() && *in != inputs)) {
        fn.emitError() << "the buckets of '" << entry.getValue()
                       << "' take different inputs";
        return signalPassFailure();
      }
      inputs = *in;
      for (size_t k = 0; k < n; ++k)
        if (!s[k])
          s[k] = maxSizes[k]; // a symbol the entry does not use
      sizes.push_back(std::move(s));
    }
    // By increasing cost; the last must hold every largest size.
    SmallVector<unsigned> order(fns.size());
    std::iota(order.begin(), order.end(), 0);
    auto cost = [&](unsigned i) {
      int64_t p = 1;
      for (int64_t s : sizes[i])
        p *= s;
      return std::make_pair(p, sizes[i]);
    };
    llvm::stable_sort(order,
                      [&](unsigned a, unsigned b) { return cost(a) < cost(b); });

    // One key-mask argument per symbol in every bucket; those no bucket
    // reads are taken out again below.
    SmallVector<SmallVector<Value>> masks(fns.size());
    for (auto [i, fn] : llvm::enumerate(fns)) {
      for (size_t s = 0; s < n; ++s) {
        auto type = RankedTensorType::get({sizes[i][s]}, builder.getF32Type());
        unsigned at = fn.getNumArguments();
        (void)fn.insertArgument(at, type, {}, fn.getLoc());
        fn.setArgAttr(at, "tfm.name",
                      builder.getStringAttr("key_mask." +
                                            symbols[s].getValue()));
        fn.setArgAttr(at, "tfm.input_index", builder.getI64IntegerAttr(at));
        masks[i].push_back(fn.getArgument(at));
      }
    }
    SmallVector<bool> maskUsed(n, false);
    std::optional<SmallVector<SmallVector<int64_t>>> outputs;
    for (auto [i, fn] : llvm::enumerate(fns)) {
      // The sizes it serves: above the next smaller size of each symbol
      // among the buckets, or from the symbol's minimum.
      SmallVector<int64_t> served(n);
      bool onlyItsOwn = true;
      for (size_t s = 0; s < n; ++s) {
        int64_t below = minSizes[s] - 1;
        for (auto &other : sizes)
          if (other[s] < sizes[i][s])
            below = std::max(below, other[s]);
        served[s] = below + 1;
        onlyItsOwn = onlyItsOwn && served[s] == sizes[i][s];
      }
      if (onlyItsOwn)
        continue; // never padded: exact by itself
      if (!fn.getBody().hasOneBlock()) {
        fn.emitError() << "padding is proven on one-block functions";
        return signalPassFailure();
      }
      Prover prover(fn, symbols, sizes[i], served, masks[i]);
      if (failed(prover.run(inputs)))
        return signalPassFailure();
      for (size_t s = 0; s < n; ++s)
        maskUsed[s] = maskUsed[s] || prover.maskUsed[s];
      if (outputs && *outputs != prover.outputs) {
        fn.emitError() << "the buckets of '" << entry.getValue()
                       << "' pad their outputs along different axes";
        return signalPassFailure();
      }
      outputs = prover.outputs;
    }
    // An output axis whose length changes with the bucket must follow a
    // symbol, or the entry's outputs would have no fixed shape.
    if (outputs)
      for (unsigned r = 0; r < fns.front().getNumResults(); ++r)
        for (auto [a, s] : llvm::enumerate((*outputs)[r])) {
          if (s >= 0)
            continue;
          for (func::FuncOp fn : fns)
            if (cast<RankedTensorType>(fn.getResultTypes()[r]).getDimSize(a) !=
                cast<RankedTensorType>(fns.front().getResultTypes()[r])
                    .getDimSize(a)) {
              fn.emitError() << "output " << r << "'s axis " << a
                             << " changes length with the bucket but does "
                                "not follow a symbol of the inputs";
              return signalPassFailure();
            }
        }
    // Where no bucket needed proving (each serves its own size only), an
    // output axis follows a symbol when it is that long in every bucket.
    if (!outputs) {
      outputs.emplace();
      for (unsigned r = 0; r < fns.front().getNumResults(); ++r) {
        auto type = dyn_cast<RankedTensorType>(fns.front().getResultTypes()[r]);
        SmallVector<int64_t> axes(type ? type.getRank() : 0, -1);
        for (size_t a = 0; a < axes.size(); ++a)
          for (size_t s = 0; s < n && axes[a] < 0; ++s) {
            bool tracks = fns.size() > 1;
            for (auto [i, fn] : llvm::enumerate(fns))
              tracks = tracks &&
                       cast<RankedTensorType>(fn.getResultTypes()[r])
                               .getDimSize(a) == sizes[i][s];
            if (tracks)
              axes[a] = s;
          }
        outputs->push_back(std::move(axes));
      }
    }
    SmallVector<int64_t> keyMasks;
    for (auto [i, fn] : llvm::enumerate(fns))
      for (size_t s = n; s-- > 0;)
        if (!maskUsed[s]) {
          if (!masks[i][s].use_empty()) {
            fn.emitError() << "internal error: an unused key mask is read";
            return signalPassFailure();
          }
          (void)fn.eraseArgument(cast<BlockArgument>(masks[i][s]).getArgNumber());
        }
    for (size_t s = 0; s < n; ++s)
      if (maskUsed[s])
        keyMasks.push_back(s);

    SmallVector<Attribute> inputAttrs, outputAttrs, buckets;
    SmallVector<int64_t> bucketSizes;
    for (auto &axes : inputs)
      inputAttrs.push_back(builder.getDenseI64ArrayAttr(axes));
    for (auto &axes : *outputs)
      outputAttrs.push_back(builder.getDenseI64ArrayAttr(axes));
    for (unsigned i : order) {
      buckets.push_back(FlatSymbolRefAttr::get(fns[i].getSymNameAttr()));
      bucketSizes.append(sizes[i].begin(), sizes[i].end());
    }
    SmallVector<Attribute> symbolAttrs(symbols.begin(), symbols.end());
    auto attr = DynamicEntryAttr::getChecked(
        [&] { return module.emitError(); }, ctx, entry.getValue(),
        builder.getArrayAttr(symbolAttrs),
        builder.getDenseI64ArrayAttr(minSizes),
        builder.getDenseI64ArrayAttr(maxSizes),
        builder.getArrayAttr(inputAttrs), builder.getArrayAttr(outputAttrs),
        builder.getDenseI64ArrayAttr(keyMasks), builder.getArrayAttr(buckets),
        builder.getDenseI64ArrayAttr(bucketSizes));
    if (!attr)
      return signalPassFailure();
    entries.push_back(attr);
    for (func::FuncOp fn : fns)
      fn->removeAttr("tfm.bucket_of");
  }
  module->removeAttr("tfm.symbol_ranges");
  if (!entries.empty())
    module->setAttr("tfm.dynamic_entries", builder.getArrayAttr(entries));
}

} // namespace
