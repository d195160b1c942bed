//===- DeriveKVCache.cpp - tfm-derive-kv-cache ----------------------------===//
//
// Incremental decoding from a model exported to process whole sequences.
// Everything a causal language model does is row-wise except attention, so
// the step that adds C tokens at `position` is the same graph with a query
// axis C long, in which each attention appends its new keys and values to a
// cache and reads the cache back whole, and in which every tensor that
// depends on the position alone (position embeddings, masks) is read at rows
// position..position+C-1. The pass finds the query axis by following it from
// the token ids, op by op, rather than by matching one exporter's patterns;
// an op that would mix positions in a way a cache cannot reproduce is an
// error at its location.
//
//===----------------------------------------------------------------------===//

#include "ShapeUtils.h"
#include "tfm/IR/InputValues.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Reference/Interpreter.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

namespace mlir::tfm {
#define GEN_PASS_DEF_DERIVEKVCACHEPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// What an axis of a tensor stands for, followed from the token ids.
enum class Role : uint8_t {
  None,
  Batch,      // the ids' axis 0, or the outer factor of an axis merged with it
  Query,      // the new tokens: S long in the model, C long in a step; an axis
              // that merges the sequence with the axes after it (S·f long, as
              // in [S·B, D]) has it too, and is C·f long in a step
  Key,        // the positions attended to: the cache's length
  BatchQuery, // the batch merged with the query axis and the axes after
              // it ([B·S, D], as a Conv1D's view(-1, D) makes): B·S·f
              // long in the model, B·C·f in a step
};
using Roles = SmallVector<Role, 6>;

class Deriver {
public:
  Deriver(ModuleOp module, func::FuncOp forward, unsigned idsIndex,
          ArrayRef<unsigned> maskIndices, int64_t length)
      : module(module), forward(forward), idsIndex(idsIndex),
        maskIndices(maskIndices), length(length), b(module.getContext()) {}

  /// Adds @`name`, which computes `chunk` tokens at a time.
  LogicalResult build(StringRef name, int64_t chunk);

  /// The caches the last build made.
  int numCaches() const { return keys + values; }

  /// Adds @encode(source inputs), which computes what the steps read of
  /// the source (an encoder-decoder's encoder and cross-attention keys and
  /// values) and keeps it in the session; nothing when there is none.
  LogicalResult buildEncode();

private:
  LogicalResult visit(Operation &op);
  LogicalResult fail(Operation &op, const Twine &why);

  Roles rolesOf(Value v) const;
  bool hasRoles(Value v) const;
  /// The step's type of a tensor whose axes have `roles`.
  RankedTensorType stepType(Value original, ArrayRef<Role> roles) const;
  /// Operand `v` (mapped) read at the step's positions along `axis`.
  Value rows(Value v, int64_t axis);
  Value positions();

  /// The results' roles from the operand axes they are read from (the
  /// op's axis map): the union of their roles. An operand that is S long
  /// where the result's axis is the query axis, but is not itself on it, is
  /// a tensor of positions and is read at the step's rows.
  LogicalResult combine(Operation &op, const AxisMap &map, Roles &result);
  /// What the op does across an axis that follows the tokens: a product
  /// over the query axis reads a cache (q · kᵀ the keys, p · v the values).
  LogicalResult across(Operation &op, const AxisMap &map, Roles &result);
  /// Clones `op` with results of the step's types for `roles` (one per
  /// result, or one for all).
  Operation *cloneWith(Operation &op, ArrayRef<Roles> roles);

  /// Whether `mask` (depending on no token) hides every key after its
  /// query: its value, computed with the reference interpreter, is false
  /// (boolean) or at most -1e4 (additive) wherever the last index exceeds
  /// the one before it.
  bool isCausalMask(Value mask, MaskKind kind);
  FailureOr<reference::Tensor> evaluate(Value v);

  LogicalResult visitMaskedSoftmax(MaskedSoftmaxOp op);
  LogicalResult visitReshape(Operation &op, const AxisMap &map);
  Value cache(Operation &op, Value operand, int64_t axis, bool isKeys);
  /// Replaces operand `operand` of `op` with the cache of it along `axis`.
  LogicalResult cacheOperand(Operation &op, unsigned operand, int64_t axis,
                             bool isKeys);

  ModuleOp module;
  func::FuncOp forward;
  unsigned idsIndex;
  // Padding masks over the ids' positions ([batch, sequence], 1 where a
  // position is kept): inputs of the steps over the whole cache.
  SmallVector<unsigned> maskIndices;
  int64_t length, chunk = 1;
  OpBuilder b;
  IRMapping mapping;
  DenseMap<Value, Roles> roles;
  // Operands replaced for one clone: (operand number, value).
  SmallVector<std::pair<unsigned, Value>> replaced;
  DenseMap<std::pair<Value, int64_t>, Value> rowsOf;
  Value position, positionsValue;
  // Values that depend on a source input and on no token: computed by
  // @encode, never in a step. The frontier is those a step reads (through
  // tfm.cache_read), in the order the first build met them.
  DenseSet<Value> sourceSide;
  SmallVector<Value> frontier;
  DenseMap<Value, int64_t> frontierIndex;
  Value readSource(Value v);
  reference::Interpreter interpreter;
  DenseMap<Value, reference::Tensor> evaluated;
  int keys = 0, values = 0;
  int64_t batch = 1;
};

LogicalResult Deriver::fail(Operation &op, const Twine &why) {
  return op.emitError() << "cannot derive a KV cache: " << why;
}

Roles Deriver::rolesOf(Value v) const {
  auto it = roles.find(v);
  if (it != roles.end())
    return it->second;
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return Roles(t ? t.getRank() : 0, Role::None);
}

bool Deriver::hasRoles(Value v) const {
  return llvm::any_of(rolesOf(v), [](Role r) { return r != Role::None; });
}

RankedTensorType Deriver::stepType(Value original,
                                   ArrayRef<Role> axes) const {
  auto t = cast<RankedTensorType>(original.getType());
  SmallVector<int64_t> shape(t.getShape());
  for (auto [i, r] : llvm::enumerate(axes))
    if (r == Role::Query || r == Role::BatchQuery)
      shape[i] = shape[i] / length * chunk;
  return t.clone(shape);
}

Value Deriver::positions() {
  if (!positionsValue) {
    SmallVector<int64_t> iota(chunk);
    for (int64_t i = 0; i < chunk; ++i)
      iota[i] = i;
    auto type = RankedTensorType::get({chunk}, b.getI64Type());
    Value offsets = b.create<arith::ConstantOp>(
        forward.getLoc(), DenseElementsAttr::get(type, ArrayRef(iota)));
    positionsValue = b.create<AddOp>(forward.getLoc(), offsets, position);
  }
  return positionsValue;
}

Value Deriver::rows(Value v, int64_t axis) {
  Value &r = rowsOf[{v, axis}];
  if (!r)
    r = b.create<GatherOp>(v.getLoc(), mapping.lookup(v), positions(),
                           b.getI64IntegerAttr(axis));
  return r;
}

StringRef nameOf(Role r) {
  switch (r) {
  case Role::None:
    return "no";
  case Role::Batch:
    return "batch";
  case Role::Query:
    return "query";
  case Role::Key:
    return "key";
  case Role::BatchQuery:
    return "batch-and-query";
  }
  return "";
}

bool isSequence(Role r) {
  return r == Role::Query || r == Role::Key || r == Role::BatchQuery;
}

LogicalResult Deriver::combine(Operation &op, const AxisMap &map,
                               Roles &result) {
  for (unsigned i : map.whole)
    if (hasRoles(op.getOperand(i)))
      return fail(op, "it reads operand #" + Twine(i) +
                          " whole (weights, a table, a norm's scale), and "
                          "that follows the tokens");
  result.assign(map.results.size(), Role::None);
  for (auto [r, sources] : llvm::enumerate(map.results))
    for (const OperandAxis &s : sources) {
      Role role = rolesOf(op.getOperand(s.operand))[s.axis];
      if (role == Role::None)
        continue;
      if (result[r] != Role::None && result[r] != role)
        return fail(op, "it mixes the " + nameOf(result[r]) +
                            " axis with the " + nameOf(role) + " axis");
      result[r] = role;
    }
  replaced.clear();
  SmallVector<unsigned> read;
  for (auto [r, sources] : llvm::enumerate(map.results)) {
    if (result[r] != Role::Query)
      continue;
    for (const OperandAxis &s : sources) {
      Value v = op.getOperand(s.operand);
      if (rolesOf(v)[s.axis] == Role::Query || shapeOf(v)[s.axis] == 1 ||
          llvm::is_contained(read, s.operand))
        continue;
      if (hasRoles(v) || shapeOf(v)[s.axis] != length)
        return fail(op, "an operand is as long as the sequence on the query "
                        "axis but does not follow the tokens");
      replaced.push_back({s.operand, rows(v, s.axis)});
      read.push_back(s.operand);
    }
  }
  return success();
}

LogicalResult Deriver::across(Operation &op, const AxisMap &map,
                              Roles &result) {
  for (const AxisUseOf &u : map.uses) {
    Value v = op.getOperand(u.axis.operand);
    Role role = rolesOf(v)[u.axis.axis];
    switch (u.use) {
    case AxisUse::Contracted: {
      // Each pair once, from its lower operand.
      if (u.partner->operand < u.axis.operand)
        break;
      Role other = rolesOf(op.getOperand(u.partner->operand))[u.partner->axis];
      // p · v: the values, along the axis the weights sum over.
      if (other == Role::Query && role == Role::Key) {
        if (failed(cacheOperand(op, u.partner->operand, u.partner->axis,
                                /*isKeys=*/false)))
          return failure();
        break;
      }
      if (role == Role::Query || other == Role::Query)
        return fail(op, role == Role::Query
                            ? Twine("it contracts over the query axis of its "
                                    "first operand")
                            : Twine("it contracts over the query axis of an "
                                    "operand, but not against attention "
                                    "weights"));
      // A sum over the keys against what does not follow the tokens reads
      // the whole cache's length, as the model does.
      if ((role != Role::None && role != Role::Key) ||
          (other != Role::None && other != Role::Key) ||
          (role == Role::Key && other == Role::Key))
        return fail(op, "it contracts over an axis that follows the tokens");
      break;
    }
    case AxisUse::Summed:
    case AxisUse::Reduced:
      if (isSequence(role))
        return fail(op, "it reduces over the sequence");
      break;
    case AxisUse::Normalized:
      if (role == Role::Key)
        return fail(op, "an attention has no causal mask, so a token would "
                        "see the positions after it, which a cache does not "
                        "hold yet");
      if (role != Role::None)
        return fail(op, "it normalizes over the " + nameOf(role) + " axis");
      break;
    case AxisUse::Indexed:
      if (role != Role::None)
        return fail(op, "it picks positions out of an axis that follows the "
                        "tokens");
      break;
    case AxisUse::Sliced:
      if (isSequence(role))
        return fail(op, "it slices the sequence");
      break;
    case AxisUse::Split:
      if (role != Role::None)
        return fail(op, "it splits an axis that follows the tokens");
      break;
    case AxisUse::Concatenated:
      if (isSequence(role))
        return fail(op, "it concatenates along an axis that follows the "
                        "tokens");
      // Stacking along a batch axis of one (a past_key_values export's
      // presents) keeps no batch there.
      for (auto [r, sources] : llvm::enumerate(map.results))
        if (llvm::is_contained(sources, u.axis))
          result[r] = Role::None;
      break;
    case AxisUse::Ranked:
      if (role != Role::None)
        return fail(op, "it ranks over an axis that follows the tokens");
      break;
    case AxisUse::Windowed:
      if (role != Role::None)
        return fail(op, "it reads windows of an axis that follows the tokens "
                        "(a convolution)");
      break;
    }
  }
  // q · kᵀ: a result axis that only the second operand's query axis feeds
  // is the keys attended to.
  bool product = llvm::any_of(map.uses, [](const AxisUseOf &u) {
    return u.use == AxisUse::Contracted;
  });
  if (!product)
    return success();
  for (auto [r, sources] : llvm::enumerate(map.results)) {
    if (sources.size() != 1 || sources.front().operand == 0)
      continue;
    const OperandAxis &s = sources.front();
    if (rolesOf(op.getOperand(s.operand))[s.axis] != Role::Query)
      continue;
    if (failed(cacheOperand(op, s.operand, s.axis, /*isKeys=*/true)))
      return failure();
    result[r] = Role::Key;
  }
  return success();
}

LogicalResult Deriver::cacheOperand(Operation &op, unsigned operand,
                                    int64_t axis, bool isKeys) {
  Value v = op.getOperand(operand);
  Roles r = rolesOf(v);
  for (int64_t a = 0; a < static_cast<int64_t>(r.size()); ++a)
    if (a != axis && isSequence(r[a]))
      return fail(op, "the keys or values are on the query axis twice");
  if (r[axis] != Role::Query)
    return fail(op, "the keys or values merge the query axis with another");
  if (batch > 1 && r[0] != Role::Batch)
    return fail(op, "the cached keys or values do not keep the batch as "
                    "their outer axis, which a beam search reorders");
  for (auto &[i, value] : replaced)
    if (i == operand)
      return fail(op, "the keys or values are read at the step's rows");
  replaced.push_back({operand, cache(op, v, axis, isKeys)});
  return success();
}

Operation *Deriver::cloneWith(Operation &op, ArrayRef<Roles> resultRoles) {
  Operation *copy = b.clone(op, mapping);
  for (auto [i, v] : replaced)
    copy->setOperand(i, v);
  replaced.clear();
  for (OpResult r : op.getResults()) {
    const Roles &rr =
        resultRoles[resultRoles.size() == 1 ? 0 : r.getResultNumber()];
    roles[r] = rr;
    copy->getResult(r.getResultNumber()).setType(stepType(r, rr));
  }
  return copy;
}

Value Deriver::cache(Operation &op, Value operand, int64_t axis,
                     bool isKeys) {
  std::string name = "attention" + std::to_string(isKeys ? keys++ : values++) +
                     (isKeys ? ".keys" : ".values");
  return b.create<CacheUpdateOp>(op.getLoc(), operand.getType(),
                                 b.getStringAttr(name), mapping.lookup(operand),
                                 position, b.getI64IntegerAttr(axis),
                                 UnitAttr());
}

FailureOr<reference::Tensor> Deriver::evaluate(Value v) {
  if (auto it = evaluated.find(v); it != evaluated.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  if (!def || def->getNumRegions())
    return failure();
  std::vector<reference::Tensor> operands;
  for (Value o : def->getOperands()) {
    FailureOr<reference::Tensor> t = evaluate(o);
    if (failed(t))
      return failure();
    operands.push_back(std::move(*t));
  }
  // A model's own diagnostics would be confusing here: failing to evaluate
  // only means the mask is not known to be causal.
  ScopedDiagnosticHandler quiet(def->getContext(),
                                [](Diagnostic &) { return success(); });
  FailureOr<std::vector<reference::Tensor>> results =
      interpreter.evaluate(def, operands);
  if (failed(results))
    return failure();
  for (auto [r, t] : llvm::zip(def->getResults(), *results))
    evaluated[r] = t;
  return evaluated[v];
}

bool Deriver::isCausalMask(Value mask, MaskKind kind) {
  auto type = cast<RankedTensorType>(mask.getType());
  if (type.getRank() < 2 || type.getNumElements() > (int64_t{1} << 24))
    return false;
  FailureOr<reference::Tensor> t = evaluate(mask);
  if (failed(t))
    return false;
  int64_t rows = type.getDimSize(type.getRank() - 2),
          cols = type.getDimSize(type.getRank() - 1);
  for (int64_t i = 0; i < t->numElements(); ++i) {
    int64_t col = i % cols, row = (i / cols) % rows;
    // A broadcast query axis (1 row) stands for every query.
    if (col <= (rows == 1 ? -1 : row))
      continue;
    double x = t->get(i);
    if (kind == MaskKind::boolean ? x != 0 : x > -1e4)
      return false;
  }
  return true;
}

LogicalResult Deriver::visitMaskedSoftmax(MaskedSoftmaxOp op) {
  Roles in = rolesOf(op.getInput());
  int64_t rank = in.size();
  if (rank < 1)
    return fail(*op, "a masked softmax of a scalar follows the tokens");
  // The input and the mask broadcast against each other.
  AxisMap map = op.getAxisMap();
  Roles result;
  if (in[rank - 1] != Role::Key) {
    // Over the source (cross-attention) or any axis of its own: row-wise.
    if (in[rank - 1] == Role::Query)
      return fail(*op, "a masked softmax runs over the query axis");
    if (op.getCausal())
      return fail(*op, "a causal mask over an axis that is not the "
                       "positions decoded");
    if (failed(combine(*op, map, result)))
      return failure();
    cloneWith(*op, {result});
    return success();
  }
  if (rank < 2)
    return fail(*op, "the attention's scores have no query axis");
  if (in[rank - 2] != Role::Query)
    return fail(*op, "the attention's scores do not have the query axis "
                     "second to last");
  // A mask that is causal by its value (a buffer the fusion could not
  // prove constant, such as a parameter of a model compiled for training)
  // needs no triangle of its own: its rows at the step's positions are it.
  bool causalByValue = !op.getCausal() && op.getMask() &&
                       !hasRoles(op.getMask()) &&
                       isCausalMask(op.getMask(), op.getMaskKind());
  if (!op.getCausal() && !causalByValue)
    return fail(*op, "the attention is not causal, so a token would see the "
                     "positions after it, which a cache does not hold yet");
  if (failed(combine(*op, map, result)))
    return failure();
  Value input = mapping.lookup(op.getInput());
  for (auto [i, v] : replaced)
    if (i == 0)
      input = v;
  Value mask;
  if (op.getMask()) {
    mask = mapping.lookup(op.getMask());
    for (auto [i, v] : replaced)
      if (i == 1)
        mask = v;
  }
  replaced.clear();
  Location loc = op.getLoc();
  if (causalByValue) {
    // The mask's rows at the step's positions, as they are.
    auto softmax = b.create<MaskedSoftmaxOp>(
        loc, stepType(op, result), input, mask, op.getScaleAttr(),
        op.getMaskKindAttr(), UnitAttr());
    mapping.map(op.getResult(), softmax.getResult());
    roles[op.getResult()] = result;
    return success();
  }

  // The causal triangle, read at the step's rows.
  Type elem = op.getType().getElementType();
  auto triangleType = RankedTensorType::get({length, length}, elem);
  SmallVector<APFloat> triangle;
  const llvm::fltSemantics &sem = cast<FloatType>(elem).getFloatSemantics();
  for (int64_t i = 0; i < length; ++i)
    for (int64_t j = 0; j < length; ++j)
      triangle.push_back(j <= i ? APFloat::getZero(sem)
                                : APFloat::getInf(sem, /*Negative=*/true));
  Value full = b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(triangleType, triangle));
  Value causal = b.create<GatherOp>(loc, full, positions(),
                                    b.getI64IntegerAttr(0));
  Value newMask = causal;
  switch (op.getMaskKind()) {
  case MaskKind::none:
    break;
  case MaskKind::additive:
    newMask = b.create<AddOp>(loc, mask, causal);
    break;
  case MaskKind::boolean: {
    auto scalar = RankedTensorType::get({}, elem);
    Value hidden = b.create<arith::ConstantOp>(
        loc, DenseElementsAttr::get(scalar, APFloat::getInf(sem, true)));
    newMask = b.create<SelectOp>(loc, mask, causal, hidden);
    break;
  }
  }
  auto softmax = b.create<MaskedSoftmaxOp>(
      loc, stepType(op, result), input, newMask, op.getScaleAttr(),
      MaskKindAttr::get(b.getContext(), MaskKind::additive), UnitAttr());
  mapping.map(op.getResult(), softmax.getResult());
  roles[op.getResult()] = result;
  return success();
}

LogicalResult Deriver::visitReshape(Operation &op, const AxisMap &map) {
  Value input = op.getOperand(0);
  ArrayRef<int64_t> in = shapeOf(input), out = shapeOf(op.getResult(0));
  Roles inRoles = rolesOf(input);
  Roles result(out.size(), Role::None);
  for (const ReshapeGroup &g : map.groups) {
    // The role of the group's elements as one axis, outer factor first:
    // a role, then axes of none (features) after it.
    Role merged = Role::None;
    bool noneBefore = false, noneSince = false;
    for (int64_t i = g.inBegin; i < g.inEnd; ++i) {
      if (in[i] == 1)
        continue;
      Role r = inRoles[i];
      if (r == Role::None) {
        noneBefore = noneBefore || merged == Role::None;
        noneSince = merged != Role::None;
        continue;
      }
      if (r == Role::Batch && (noneBefore || merged != Role::None))
        continue; // a batch inside another axis is no batch a beam reorders
      if (noneBefore)
        return fail(op, "a reshape merges the " + nameOf(r) +
                            " axis inside another axis");
      if (merged == Role::None)
        merged = r;
      else if (merged == Role::Batch && r == Role::Query && !noneSince)
        merged = Role::BatchQuery;
      else
        return fail(op, "a reshape merges the " + nameOf(merged) +
                            " axis with the " + nameOf(r) + " axis");
    }
    if (merged == Role::None)
      continue;
    // The group's result axes: the outermost holds the role, or for the
    // batch merged with the query, the batch then the query.
    SmallVector<int64_t> axes;
    for (int64_t j = g.outBegin; j < g.outEnd; ++j)
      if (out[j] != 1)
        axes.push_back(j);
    auto place = [&](size_t k, Role r) {
      if (k >= axes.size())
        return false;
      if ((r == Role::Query || r == Role::Key) && out[axes[k]] % length != 0)
        return false;
      if (r == Role::BatchQuery && out[axes[k]] % (batch * length) != 0)
        return false;
      result[axes[k]] = r;
      return true;
    };
    bool placed = merged == Role::BatchQuery && !axes.empty() &&
                          out[axes.front()] == batch
                      ? place(0, Role::Batch) && place(1, Role::Query)
                      : place(0, merged);
    if (!placed)
      return fail(op, "a reshape splits the " + nameOf(merged) +
                          " axis across other axes");
  }
  cloneWith(op, {result});
  return success();
}

Value Deriver::readSource(Value v) {
  auto [it, fresh] = frontierIndex.try_emplace(v, frontier.size());
  if (fresh)
    frontier.push_back(v);
  return b.create<CacheReadOp>(v.getLoc(), v.getType(),
                               b.getStringAttr("source" +
                                               std::to_string(it->second)),
                               b.getUnitAttr());
}

LogicalResult Deriver::visit(Operation &op) {
  bool follows = llvm::any_of(op.getOperands(),
                              [&](Value v) { return hasRoles(v); });
  bool fromSource = llvm::any_of(op.getOperands(),
                                 [&](Value v) { return sourceSide.count(v); });
  if (!follows && fromSource) {
    // The encoder's side: @encode computes it once per source.
    for (Value r : op.getResults())
      sourceSide.insert(r);
    return success();
  }
  // What the step reads of the source comes from the session.
  for (Value v : op.getOperands())
    if (sourceSide.count(v) && !mapping.contains(v))
      mapping.map(v, readSource(v));
  if (!follows) {
    // Depends on no token: the same in every step (weights, constant
    // masks and tables, which the ops that read them index at the step's
    // rows).
    b.clone(op, mapping);
    return success();
  }
  if (auto s = dyn_cast<MaskedSoftmaxOp>(op))
    return visitMaskedSoftmax(s);
  if (auto c = dyn_cast<ConcatOp>(op)) {
    int64_t axis = axisOf(c.getAxis(), shapeOf(c).size());
    // An export with past_key_values, bound to an empty past: the
    // concatenation of the past with the new keys is the new keys.
    Value only;
    int nonEmpty = 0;
    for (Value v : op.getOperands())
      if (shapeOf(v)[axis] != 0) {
        only = v;
        ++nonEmpty;
      }
    if (nonEmpty == 1 && only.getType() == c.getType()) {
      mapping.map(c.getResult(), mapping.lookup(only));
      roles[c.getResult()] = rolesOf(only);
      return success();
    }
  }
  FailureOr<AxisMap> map =
      axisMapOf(op, [&](const Twine &why) { return fail(op, why); });
  if (failed(map))
    return failure();
  if (map->isReshape)
    return visitReshape(op, *map);
  Roles result;
  if (failed(combine(op, *map, result)) || failed(across(op, *map, result)))
    return failure();
  Operation *copy = cloneWith(op, {result});
  // A slice keeps the whole query axis, which a step has C of.
  if (auto s = dyn_cast<SliceOp>(copy)) {
    SmallVector<int64_t> sizes(s.getSizes());
    for (auto [a, role] : llvm::enumerate(result))
      if (role == Role::Query || role == Role::BatchQuery)
        sizes[a] = s.getType().getDimSize(a);
    s.setSizes(sizes);
  }
  return success();
}

LogicalResult Deriver::build(StringRef name, int64_t c) {
  chunk = c;
  mapping.clear();
  roles.clear();
  rowsOf.clear();
  positionsValue = {};
  keys = values = 0;
  MLIRContext *ctx = module.getContext();
  Value ids = forward.getArgument(idsIndex);
  auto idsType = cast<RankedTensorType>(ids.getType());
  batch = idsType.getDimSize(0);
  auto stepIds = idsType.clone({batch, chunk});
  auto positionType = RankedTensorType::get({}, IntegerType::get(ctx, 64));
  SmallVector<Type> inputs{stepIds, positionType};
  for (unsigned m : maskIndices)
    inputs.push_back(forward.getArgument(m).getType());

  b.setInsertionPointToEnd(module.getBody());
  auto fn = b.create<func::FuncOp>(forward.getLoc(), name,
                                   FunctionType::get(ctx, inputs, {}));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  if (DictionaryAttr attrs = forward.getArgAttrDict(idsIndex))
    fn.setArgAttrs(0, attrs);
  fn.setArgAttr(0, "tfm.input_index", b.getI64IntegerAttr(0));
  fn.setArgAttr(1, "tfm.name", b.getStringAttr("position"));
  fn.setArgAttr(1, "tfm.input_index", b.getI64IntegerAttr(1));
  fn->setAttr("tfm.num_graph_inputs", b.getI64IntegerAttr(inputs.size()));
  mapping.map(ids, entry->getArgument(0));
  roles[ids] = {Role::Batch, Role::Query};
  position = entry->getArgument(1);
  // A padding mask covers every position the cache holds: the keys.
  for (auto [k, m] : llvm::enumerate(maskIndices)) {
    unsigned at = 2 + k;
    if (DictionaryAttr attrs = forward.getArgAttrDict(m))
      fn.setArgAttrs(at, attrs);
    fn.setArgAttr(at, "tfm.input_index", b.getI64IntegerAttr(at));
    mapping.map(forward.getArgument(m), entry->getArgument(at));
    roles[forward.getArgument(m)] = {Role::Batch, Role::Key};
  }
  sourceSide.clear();
  for (BlockArgument a : forward.getArguments()) {
    if (a.getArgNumber() == idsIndex ||
        llvm::is_contained(maskIndices, a.getArgNumber()))
      continue;
    auto t = cast<RankedTensorType>(a.getType());
    if (t.getNumElements() == 0)
      // An empty past (past_key_values bound to length 0): a constant.
      mapping.map(a, b.create<arith::ConstantOp>(
                         a.getLoc(), DenseElementsAttr::get(t, ArrayRef<Attribute>{})));
    else
      sourceSide.insert(a);
  }

  Block &body = forward.getBody().front();
  for (Operation &op : body.without_terminator())
    if (failed(visit(op))) {
      fn.erase();
      return failure();
    }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Value> results;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (sourceSide.count(v) && !mapping.contains(v))
      mapping.map(v, readSource(v));
    Roles r = rolesOf(v);
    if (i == 0 && (r.size() != 3 || r[1] != Role::Query)) {
      fn.erase();
      return ret.emitError()
             << "cannot derive a KV cache: output #0 must be the logits "
                "[batch, sequence, vocabulary] of every position";
    }
    results.push_back(mapping.lookupOrDefault(v));
  }
  if (numCaches() == 0) {
    fn.erase();
    return forward.emitError()
           << "cannot derive a KV cache: found no causal self-attention";
  }
  b.create<func::ReturnOp>(ret.getLoc(), results);
  fn.setFunctionType(
      FunctionType::get(ctx, fn.getArgumentTypes(), ValueRange(results).getTypes()));
  for (unsigned i = 0; i < forward.getNumResults(); ++i)
    if (DictionaryAttr attrs = forward.getResultAttrDict(i))
      fn.setResultAttrs(i, attrs);
  return success();
}

LogicalResult Deriver::buildEncode() {
  if (frontier.empty())
    return success();
  MLIRContext *ctx = module.getContext();
  SmallVector<BlockArgument> sources;
  for (BlockArgument a : forward.getArguments())
    if (a.getArgNumber() != idsIndex &&
        !llvm::is_contained(maskIndices, a.getArgNumber()) &&
        cast<RankedTensorType>(a.getType()).getNumElements() != 0)
      sources.push_back(a);
  SmallVector<Type> types;
  for (BlockArgument a : sources)
    types.push_back(a.getType());
  b.setInsertionPointToEnd(module.getBody());
  auto fn = b.create<func::FuncOp>(forward.getLoc(), "encode",
                                   FunctionType::get(ctx, types, {}));
  Block *entry = fn.addEntryBlock();
  IRMapping m;
  b.setInsertionPointToStart(entry);
  for (BlockArgument a : forward.getArguments())
    if (auto t = cast<RankedTensorType>(a.getType()); t.getNumElements() == 0)
      m.map(a, b.create<arith::ConstantOp>(
                   a.getLoc(), DenseElementsAttr::get(t, ArrayRef<Attribute>{})));
  for (auto [i, a] : llvm::enumerate(sources)) {
    if (DictionaryAttr attrs = forward.getArgAttrDict(a.getArgNumber()))
      fn.setArgAttrs(i, attrs);
    fn.setArgAttr(i, "tfm.input_index", b.getI64IntegerAttr(i));
    m.map(a, entry->getArgument(i));
  }
  fn->setAttr("tfm.num_graph_inputs", b.getI64IntegerAttr(sources.size()));
  // The ops the frontier needs, in the forward function's order.
  DenseSet<Operation *> needed;
  SmallVector<Value> work(frontier.begin(), frontier.end());
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !needed.insert(def).second)
      continue;
    for (Value v : def->getOperands())
      work.push_back(v);
  }
  for (Operation &op : forward.getBody().front().without_terminator())
    if (needed.count(&op))
      b.clone(op, m);
  Location loc = forward.getLoc();
  auto i64 = RankedTensorType::get({}, b.getI64Type());
  Value zero = b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(i64, int64_t{0}));
  for (auto [i, v] : llvm::enumerate(frontier)) {
    auto type = cast<RankedTensorType>(v.getType());
    if (!isa<FloatType>(type.getElementType()) || type.getRank() < 1)
      return v.getDefiningOp()->emitError()
             << "cannot derive a KV cache: the decoder reads " << type
             << " of the source, and generation caches hold float tensors";
    b.create<CacheUpdateOp>(loc, type,
                            b.getStringAttr("source" + std::to_string(i)),
                            m.lookup(v), zero, b.getI64IntegerAttr(0),
                            b.getUnitAttr());
  }
  b.create<func::ReturnOp>(loc);
  return success();
}

struct DeriveKVCachePass
    : public mlir::tfm::impl::DeriveKVCachePassBase<DeriveKVCachePass> {
  using DeriveKVCachePassBase::DeriveKVCachePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The forward function; a model compiled for training as well has
    // @train_step beside it, whose parameters the generation entries read.
    func::FuncOp fwd = findForward(module, forward);
    if (!fwd && forward.empty()) {
      SmallVector<func::FuncOp> candidates;
      for (auto fn : module.getOps<func::FuncOp>())
        if (fn.isPublic() && !fn.isExternal() && fn.getName() != "train_step")
          candidates.push_back(fn);
      if (candidates.size() == 1)
        fwd = candidates.front();
    }
    if (!fwd) {
      module.emitError() << (forward.empty()
                                 ? std::string("generation needs exactly one "
                                               "public function, or a name")
                                 : "no function named '" + forward + "'");
      return signalPassFailure();
    }
    if (!fwd.getBody().hasOneBlock()) {
      fwd.emitError() << "generation derives caches of one-block functions";
      return signalPassFailure();
    }
    for (StringRef name : {"prefill", "decode_step"})
      if (module.lookupSymbol(name)) {
        module.emitError() << "the module already has a @" << name;
        return signalPassFailure();
      }
    // The token ids: the last input that is not empty (a decoder's, after
    // an encoder's source); another one is the source, which @encode reads.
    // Empty inputs are a past_key_values export's past, bound to length 0.
    // A mask input as large as the ids is their padding mask (Hugging
    // Face's attention_mask), which the steps take over the whole cache.
    SmallVector<unsigned> inputs, masks;
    for (BlockArgument a : fwd.getArguments()) {
      auto t = dyn_cast<RankedTensorType>(a.getType());
      if (t && t.hasStaticShape() && t.getNumElements() == 0)
        continue;
      if (t && t.getRank() == 2 &&
          inputValuesOf(a).kind == TFM_INPUT_VALUES_MASK)
        masks.push_back(a.getArgNumber());
      else
        inputs.push_back(a.getArgNumber());
    }
    if (inputs.empty() || inputs.size() > 2) {
      fwd.emitError() << "cannot derive a KV cache: generation takes a model "
                         "whose inputs are the token ids, after a source for "
                         "an encoder-decoder, and padding masks of the ids, "
                         "but it has "
                      << inputs.size()
                      << " inputs that are neither empty nor masks";
      return signalPassFailure();
    }
    unsigned idsIndex = inputs.back();
    auto ids = dyn_cast<RankedTensorType>(fwd.getArgument(idsIndex).getType());
    // A mask of another shape (a source's) belongs to the source.
    for (unsigned m : llvm::make_early_inc_range(masks))
      if (!ids ||
          fwd.getArgument(m).getType() !=
              ids.clone(cast<RankedTensorType>(fwd.getArgument(m).getType())
                            .getElementType())) {
        inputs.insert(inputs.begin(), m);
        llvm::erase(masks, m);
      }
    if (inputs.size() > 2) {
      fwd.emitError() << "cannot derive a KV cache: an encoder-decoder takes "
                         "one source input, but this model has "
                      << inputs.size() - 1;
      return signalPassFailure();
    }
    if (inputs.size() == 2) {
      auto src = dyn_cast<RankedTensorType>(fwd.getArgument(inputs[0]).getType());
      if (!src || src.getRank() != 2 ||
          !isa<IntegerType>(src.getElementType()) || !src.hasStaticShape()) {
        fwd.emitError() << "cannot derive a KV cache: an encoder-decoder's "
                           "source must be token ids [batch, length], not "
                        << fwd.getArgument(inputs[0]).getType();
        return signalPassFailure();
      }
    }
    if (!ids || ids.getRank() != 2 ||
        !isa<IntegerType>(ids.getElementType()) || !ids.hasStaticShape()) {
      fwd.emitError() << "cannot derive a KV cache: the input must be token "
                         "ids [batch, sequence] of a static shape, not "
                      << fwd.getArgument(idsIndex).getType();
      return signalPassFailure();
    }
    int64_t length = ids.getDimSize(1);
    if (maxLength > 0 && maxLength != length) {
      fwd.emitError() << "the model's sequence is " << length
                      << " long, but --max-length is "
                      << static_cast<int64_t>(maxLength)
                      << "; bind the sequence to it with --shape";
      return signalPassFailure();
    }
    if (prefillChunk < 1) {
      module.emitError() << "prefill-chunk must be at least 1";
      return signalPassFailure();
    }
    for (StringRef name : {"encode"})
      if (inputs.size() == 2 && module.lookupSymbol(name)) {
        module.emitError() << "the module already has a @" << name;
        return signalPassFailure();
      }
    Deriver deriver(module, fwd, idsIndex, masks, length);
    if (failed(deriver.build("prefill", std::min(prefillChunk.getValue(),
                                                 length))) ||
        failed(deriver.build("decode_step", 1)) ||
        failed(deriver.buildEncode()))
      return signalPassFailure();
    module->setAttr("tfm.generation_max_length",
                    Builder(module.getContext()).getI64IntegerAttr(length));
  }
};

} // namespace
