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

/// One symbol's share of an axis: the axis is `before` times the symbol's
/// size times `after` long, the symbol's index in the middle ([S·B, D] has
/// after = B; [B·S, D] has before = B, its padded rows interleaved with
/// real ones).
struct Factor {
  int symbol;
  int64_t before = 1, after = 1;
  bool operator==(const Factor &o) const {
    return symbol == o.symbol && before == o.before && after == o.after;
  }
  bool operator!=(const Factor &o) const { return !(*this == o); }
};

/// What an axis holds past the run's size.
struct Axis {
  // The symbols it follows, outermost first; none for an axis that does
  // not change with the sizes.
  SmallVector<Factor, 1> factors;
  bool zero = false; // exactly 0 at padded positions

  bool follows() const { return !factors.empty(); }
  /// The symbol of an axis that is one symbol and nothing else, or -1.
  int plainSymbol() const {
    return factors.size() == 1 && factors[0].before == 1 &&
                   factors[0].after == 1
               ? factors[0].symbol
               : -1;
  }
  int firstSymbol() const { return factors.empty() ? -1 : factors[0].symbol; }
};
using Axes = SmallVector<Axis, 6>;

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
  /// How an axis is named in a message: its outermost symbol.
  StringRef name(const Axis &a) const { return name(a.firstSymbol()); }

  /// The results' axes from the axes they are read from (the op's axis
  /// map), and what the op does across a padded axis.
  LogicalResult combine(Operation &op, const AxisMap &map, Axes &result);
  LogicalResult across(Operation &op, const AxisMap &map, Axes &result);
  LogicalResult visitReshape(Operation &op, const AxisMap &map);
  LogicalResult visitSoftmax(Operation &op, Value input, Value mask,
                             MaskKind kind, bool causal, int64_t axis);
  void set(Operation &op, const Axes &axes) {
    for (Value r : op.getResults())
      followed[r] = axes;
  }
  /// The additive mask that hides symbol `s`'s padded keys, combined with
  /// `mask` (of `kind`); its kind is additive.
  Value withKeyMask(Location loc, Value mask, MaskKind kind, int symbol,
                    Type elementType);

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
  return llvm::any_of(axesOf(v), [](const Axis &a) { return a.follows(); });
}

LogicalResult Prover::combine(Operation &op, const AxisMap &map, Axes &result) {
  for (unsigned i : map.whole)
    if (follows(op.getOperand(i)))
      return fail(op, "it reads operand #" + Twine(i) +
                          " whole (weights, a table, a norm's scale), and "
                          "that follows the sizes");
  result.assign(map.results.size(), Axis());
  SmallVector<unsigned> operands;
  for (const auto &sources : map.results)
    for (const OperandAxis &s : sources)
      if (!llvm::is_contained(operands, s.operand))
        operands.push_back(s.operand);
  for (auto [r, sources] : llvm::enumerate(map.results)) {
    Axis &out = result[r];
    for (const OperandAxis &s : sources) {
      Axis in = axesOf(op.getOperand(s.operand))[s.axis];
      if (!in.follows())
        continue;
      if (out.follows() && out.factors != in.factors)
        return fail(op, "it combines '" + name(out) + "' with '" + name(in) +
                            "' on one axis");
      out.factors = in.factors;
    }
    if (!out.follows())
      continue;
    // An operand as long as a padded axis that does not follow it is a
    // constant read there (a position table), unless it follows the sizes
    // on another axis: then the two would mix positions.
    int zeros = 0, present = 0;
    bool firstZero = false; // operand #0's
    for (const OperandAxis &s : sources) {
      Value v = op.getOperand(s.operand);
      Axis in = axesOf(v)[s.axis];
      if (!in.follows() && shapeOf(v)[s.axis] != 1 && follows(v))
        return fail(op, "an operand is as long as '" + name(out) +
                            "' on an axis that does not follow it");
      ++present;
      if (in.zero) {
        ++zeros;
        firstZero = firstZero || s.operand == 0;
      }
    }
    switch (map.zeros) {
    case ZeroRule::none:
      break;
    case ZeroRule::any:
      out.zero = zeros > 0;
      break;
    case ZeroRule::all:
      // Every operand, including one that broadcasts along the axis.
      out.zero = zeros == static_cast<int>(operands.size()) && present == zeros;
      break;
    case ZeroRule::first:
      out.zero = firstZero;
      break;
    }
  }
  return success();
}

LogicalResult Prover::across(Operation &op, const AxisMap &map, Axes &result) {
  for (const AxisUseOf &u : map.uses) {
    Value v = op.getOperand(u.axis.operand);
    Axis in = axesOf(v)[u.axis.axis];
    switch (u.use) {
    case AxisUse::Contracted: {
      // Each pair once, from its lower operand.
      if (u.partner->operand < u.axis.operand)
        break;
      Value w = op.getOperand(u.partner->operand);
      Axis other = axesOf(w)[u.partner->axis];
      if (!in.follows() && !other.follows())
        break;
      if (in.follows() && other.follows() && in.factors != other.factors)
        return fail(op, "it contracts '" + name(in) + "' against '" +
                            name(other) + "'");
      if (!(in.follows() && in.zero) && !(other.follows() && other.zero))
        return fail(op, "it sums over '" + name(in.follows() ? in : other) +
                            "', and neither side is zero on the padding "
                            "(attention weights without a mask over it?)");
      if ((!in.follows() && follows(v)) || (!other.follows() && follows(w)))
        return fail(op, "it contracts a padded axis against one that does "
                        "not follow it");
      break;
    }
    case AxisUse::Summed:
    case AxisUse::Reduced:
      if (in.follows() && !(u.use == AxisUse::Summed && in.zero))
        return fail(op, "it reduces over '" + name(in) +
                            "' (a mean or a maximum over positions, or a sum "
                            "that no mask input zeroes on the padding)");
      break;
    case AxisUse::Normalized:
      if (in.follows())
        return fail(op, "it normalizes over '" + name(in) + "'");
      break;
    case AxisUse::Indexed:
    case AxisUse::Sliced: {
      if (!in.follows())
        break;
      // Fixed positions below the smallest size served read no padding.
      int s = in.plainSymbol();
      if (s >= 0 && u.highest && *u.lowest >= 0 && *u.highest < served[s]) {
        for (auto [r, sources] : llvm::enumerate(map.results))
          if (llvm::is_contained(sources, u.axis))
            result[r] = Axis();
        break;
      }
      if (u.use == AxisUse::Indexed)
        return fail(op, "it picks positions out of '" + name(in) +
                            "' that may lie in the padding (the last "
                            "token, counted from the end?)");
      return fail(op, "it slices '" + name(in) +
                          "' at positions that may lie in the padding");
    }
    case AxisUse::Split:
      if (in.follows())
        return fail(op, "it splits '" + name(in) + "'");
      break;
    case AxisUse::Concatenated:
      if (in.follows())
        return fail(op, "it concatenates along '" + name(in) +
                            "', which would put padding between rows");
      break;
    case AxisUse::Ranked:
      if (in.follows())
        return fail(op, "it ranks over '" + name(in) + "'");
      break;
    case AxisUse::Windowed:
      if (in.follows())
        return fail(op, "it reads windows of '" + name(in) +
                            "' (a convolution), which reach into the padding");
      break;
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
  int64_t rank = shapeOf(input).size();
  Axes result;
  if (failed(combine(op, cast<AxisMapOpInterface>(op).getAxisMap(), result)))
    return failure();
  for (Axis &a : result)
    a.zero = false;
  const Axis &keys = result[axis];
  if (!keys.follows()) {
    set(op, result);
    return success();
  }
  int symbol = keys.plainSymbol();
  if (axis != rank - 1 || symbol < 0)
    return fail(op, "a softmax runs over '" + name(keys) +
                        "' on an axis that is not its last, or merged "
                        "with others");
  // A causal softmax over a query axis of the same size never reads a key
  // after its row: rows below n see no padding.
  bool hidden = causal && rank >= 2 && result[rank - 2].plainSymbol() == symbol;
  if (!hidden) {
    b.setInsertionPoint(&op);
    Value newMask =
        withKeyMask(op.getLoc(), mask, kind, symbol,
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

LogicalResult Prover::visitReshape(Operation &op, const AxisMap &map) {
  Value input = op.getOperand(0);
  ArrayRef<int64_t> in = shapeOf(input), out = shapeOf(op.getResult(0));
  Axes inAxes = axesOf(input);
  Axes result(out.size());
  for (const ReshapeGroup &g : map.groups) {
    // Each symbol's factor, wherever it lies in the group's elements
    // (outermost first), must fall whole within one result axis.
    int64_t outer = 1;
    for (int64_t i = g.inBegin; i < g.inEnd; outer *= in[i++]) {
      for (const Factor &f : inAxes[i].factors) {
        int64_t size = sizes[f.symbol];
        int64_t before = outer * f.before;
        bool found = false;
        int64_t p = 1;
        for (int64_t j = g.outBegin; j < g.outEnd && !found; p *= out[j++]) {
          if (before % p != 0 || (p * out[j]) % (before * size) != 0)
            continue;
          // Zero at a padded position of every factor it holds.
          result[j].zero =
              (result[j].factors.empty() || result[j].zero) && inAxes[i].zero;
          result[j].factors.push_back(
              {f.symbol, before / p, p * out[j] / (before * size)});
          found = true;
        }
        // A symbol of size 1 here (a batch of one) is never padded in this
        // bucket, and may vanish.
        if (!found && size != 1)
          return fail(op, "a reshape splits '" + name(f.symbol) +
                              "' across two axes");
      }
    }
  }
  set(op, result);
  return success();
}

LogicalResult Prover::visit(Operation &op) {
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    for (Value v : ret.getOperands()) {
      SmallVector<int64_t> symbolsOf;
      for (const Axis &a : axesOf(v)) {
        if (a.follows() && a.plainSymbol() < 0)
          return fail(op, "an output merges '" + name(a) +
                              "' with another axis, so its padded rows are "
                              "not a suffix the runtime can cut off");
        symbolsOf.push_back(a.plainSymbol());
      }
      outputs.push_back(std::move(symbolsOf));
    }
    return success();
  }
  if (!llvm::any_of(op.getOperands(), [&](Value v) { return follows(v); }))
    return success();
  // A softmax over a padded axis gets a key mask.
  if (auto s = dyn_cast<MaskedSoftmaxOp>(op))
    return visitSoftmax(op, s.getInput(), s.getMask(), s.getMaskKind(),
                        s.getCausal(), shapeOf(s.getInput()).size() - 1);
  if (auto s = dyn_cast<SoftmaxOp>(op))
    return visitSoftmax(op, s.getInput(), Value(), MaskKind::none, false,
                        axisOf(s.getAxis(), shapeOf(s.getInput()).size()));
  FailureOr<AxisMap> map =
      axisMapOf(op, [&](const Twine &why) { return fail(op, why); });
  if (failed(map))
    return failure();
  if (map->isReshape)
    return visitReshape(op, *map);
  Axes result;
  if (failed(combine(op, *map, result)) || failed(across(op, *map, result)))
    return failure();
  set(op, result);
  return success();
}

LogicalResult Prover::run(ArrayRef<SmallVector<int64_t>> inputs) {
  maskUsed.assign(symbols.size(), false);
  for (auto [i, symbolsOf] : llvm::enumerate(inputs)) {
    Axes axes(symbolsOf.size());
    for (auto [a, s] : llvm::enumerate(symbolsOf)) {
      if (s < 0)
        continue;
      axes[a].factors.push_back({static_cast<int>(s)});
      // The runtime pads inputs with zeros.
      axes[a].zero = true;
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
    SmallVector<int64_t> outputsFrom; // the sizes of the bucket they came from
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
      // A symbol that is 1 in a bucket may vanish in a reshape there (a
      // batch of one): the other buckets say which output axis follows it.
      auto agree = [&](int64_t mine, int64_t theirs, ArrayRef<int64_t> size,
                       ArrayRef<int64_t> theirSize) {
        return mine == theirs || (mine < 0 && size[theirs] == 1) ||
               (theirs < 0 && theirSize[mine] == 1);
      };
      if (outputs) {
        bool same = outputs->size() == prover.outputs.size();
        for (size_t r = 0; same && r < outputs->size(); ++r) {
          auto &mine = prover.outputs[r], &theirs = (*outputs)[r];
          same = mine.size() == theirs.size();
          for (size_t a = 0; same && a < mine.size(); ++a) {
            same = agree(mine[a], theirs[a], sizes[i], outputsFrom);
            if (same && theirs[a] < 0)
              theirs[a] = mine[a];
          }
        }
        if (!same) {
          fn.emitError() << "the buckets of '" << entry.getValue()
                         << "' pad their outputs along different axes";
          return signalPassFailure();
        }
      } else {
        outputs = prover.outputs;
        outputsFrom = sizes[i];
      }
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
