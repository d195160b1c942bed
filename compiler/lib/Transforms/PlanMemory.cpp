//===- PlanMemory.cpp - One activation arena, liveness-based offsets ------===//
//
// Works on the tensor program before bufferization. First it decides, in
// block order, where each tensor an op produces lives:
//
//   - a returned tensor is written straight into the caller's output buffer;
//   - a view reads another tensor's storage in place, at an element offset
//     and strides counted from that storage's start: reshapes the strides
//     allow, and what the target's LayoutRules take (a transpose its users
//     read strided, a transpose its producer writes directly, the parts of
//     a packed projection), and a gather of one constant index (a slice)
//     or a transpose whose readers take them strided through such views
//     (the unbound Q, K and V of a packed projection's permuted heads);
//   - a compare only selects read is computed inside them;
//   - everything else has storage of its own in the arena, possibly the
//     storage of an operand that dies at the op (in place).
//
// Storage that views share is one buffer, alive from its first write to the
// last read of any view of it. Buffers are then placed at the lowest offset
// free over their whole lifetime, trying a few orders and keeping the
// smallest arena. Every decision is recorded as `tfm.plan` (TfmAttrs.td),
// which the backends' lowering reads.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TfmOps.h"
#include "tfm/Transforms/LayoutRules.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"

#include <functional>

namespace mlir::tfm {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Where one tensor's elements lie.
struct Placement {
  enum Kind { External, Arena, View, Inline, Output } kind = External;
  /// The tensor whose storage holds the elements (itself unless a view).
  Value root;
  /// Element offset and strides in the root's storage.
  int64_t offset = 0;
  SmallVector<int64_t> strides;
  /// Arena: the storage's bytes (0: the tensor's own), the operand it
  /// overwrites (-1: none). View: the operand or result it reads (one is
  /// -1). Output: the output's index.
  int64_t bytes = 0, reuses = -1, operand = -1, result = -1, index = -1;

  bool isDenseFromStart(ArrayRef<int64_t> shape) const {
    return offset == 0 && isRowMajor(shape, strides);
  }
};

/// Ops the plan gives no place: those without results, and those whose
/// result lives outside the arena (weights, parameters, caches in the
/// session state).
bool isUnplanned(Operation &op) {
  return op.getNumResults() == 0 ||
         isa<arith::ConstantOp, ParameterOp, CacheUpdateOp, CacheReadOp>(op);
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

int64_t gatherAxis(GatherOp g) {
  int64_t rank = shapeOf(g.getInput()).size();
  // The attribute holds a signed axis; its getter reads it unsigned.
  auto axis = static_cast<int64_t>(g.getAxis());
  return axis < 0 ? axis + rank : axis;
}

/// The position a gather of one constant index in range takes along its
/// axis (the gather is then a slice), or none.
std::optional<int64_t> slicePosition(GatherOp g) {
  DenseIntElementsAttr index;
  if (!matchPattern(g.getIndices(), m_Constant(&index)) ||
      index.getType().getRank() != 0)
    return std::nullopt;
  int64_t size = shapeOf(g.getInput())[gatherAxis(g)];
  int64_t i = (*index.getValues<APInt>().begin()).getSExtValue();
  if (i < 0)
    i += size;
  if (i < 0 || i >= size)
    return std::nullopt;
  return i;
}

class Planner {
public:
  Planner(func::FuncOp fn, const LayoutRules &rules, ComputeType computeType)
      : fn(fn), rules(rules), computeType(computeType),
        block(fn.getBody().front()) {}

  void run();

private:
  Placement &placementOf(Value v);
  void decide(Operation &op);
  /// Plans result `r` as storage of its own.
  void planArena(Value r, int64_t reuses = -1);
  void planView(Value r, const Placement &source, int64_t operand,
                int64_t result, int64_t offset, SmallVector<int64_t> strides);
  /// Whether every reader of `v`, were it a view at `strides`, would read
  /// it there: one that reads the operand strided (LayoutRules), or a
  /// reshape the strides allow, a slice (slicePosition) or a transpose,
  /// whose own readers all do, and which the plan then makes views too.
  bool readThroughViews(Value v, ArrayRef<int64_t> strides, int depth = 0);
  int64_t lastUse(Value v);
  void assignOffsets(int64_t &arena, int64_t &bound);
  void record(int64_t arena, int64_t bound);

  func::FuncOp fn;
  const LayoutRules &rules;
  ComputeType computeType;
  Block &block;
  DenseMap<Operation *, int64_t> index;
  // The first output position of each returned value.
  DenseMap<Value, int64_t> returned;
  DenseMap<Value, Placement> placements;
  // Arena storage: the root tensors in order, and each one's offset.
  SmallVector<Value> roots;
  DenseMap<Value, int64_t> offsetOf;
};

Placement &Planner::placementOf(Value v) {
  auto it = placements.find(v);
  if (it != placements.end())
    return it->second;
  // Arguments, constants, parameters and caches live outside the arena.
  Placement p;
  p.root = v;
  p.strides = rowMajorStrides(shapeOf(v));
  return placements[v] = p;
}

void Planner::planArena(Value r, int64_t reuses) {
  Placement p;
  p.kind = Placement::Arena;
  p.root = r;
  p.strides = rowMajorStrides(shapeOf(r));
  p.reuses = reuses;
  placements[r] = p;
}

void Planner::planView(Value r, const Placement &source, int64_t operand,
                       int64_t result, int64_t offset,
                       SmallVector<int64_t> strides) {
  Placement p;
  p.kind = Placement::View;
  p.root = source.root;
  p.offset = offset;
  p.strides = std::move(strides);
  p.operand = operand;
  p.result = result;
  placements[r] = p;
}

bool Planner::readThroughViews(Value v, ArrayRef<int64_t> strides, int depth) {
  if (v.use_empty() || returned.count(v) || depth > 8)
    return false;
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (rules.readsStrided(user, use.getOperandNumber()))
      continue;
    Value r = user->getNumResults() == 1 ? user->getResult(0) : Value();
    std::optional<SmallVector<int64_t>> next;
    if (isa<ReshapeOp>(user)) {
      next = reshapeStrides(shapeOf(v), strides, shapeOf(r));
    } else if (auto t = dyn_cast<TransposeOp>(user)) {
      next.emplace();
      for (int64_t d : t.getPermutation())
        next->push_back(strides[d]);
    } else if (auto g = dyn_cast<GatherOp>(user);
               g && use.getOperandNumber() == 0 && slicePosition(g)) {
      next.emplace(strides.begin(), strides.end());
      next->erase(next->begin() + gatherAxis(g));
    } else if (isa<RotaryOp>(user) && use.getOperandNumber() == 0 &&
               rules.computedInline(user, computeType)) {
      // Rotated by its reader as that reader loads it, so read as the
      // reader reads the rotation.
      next.emplace(strides.begin(), strides.end());
    }
    if (!next || !readThroughViews(r, *next, depth + 1))
      return false;
  }
  return true;
}

void Planner::decide(Operation &op) {
  if (isUnplanned(op))
    return;
  // Returned tensors go to the caller's buffers, except the parts of a
  // packed result (copied out at the end) and empty ones (which cross the
  // boundary as rank-1 buffers).
  std::optional<LayoutRules::PackedResults> packed = rules.packsResults(&op);
  if (packed) {
    Value first = op.getResult(0);
    planArena(first);
    Placement &p = placements[first];
    p.bytes = packed->bytes;
    p.strides = packed->strides[0];
    p.offset = packed->offsets[0];
    for (unsigned i = 1; i < op.getNumResults(); ++i)
      planView(op.getResult(i), p, -1, 0, packed->offsets[i],
               packed->strides[i]);
    return;
  }
  for (Value r : op.getResults()) {
    auto it = returned.find(r);
    if (it == returned.end() ||
        cast<RankedTensorType>(r.getType()).getNumElements() == 0)
      continue;
    Placement p;
    p.kind = Placement::Output;
    p.root = r;
    p.strides = rowMajorStrides(shapeOf(r));
    p.index = it->second;
    placements[r] = p;
  }
  if (op.getNumResults() == 1 && placements.count(op.getResult(0)))
    return;

  if (op.getNumResults() == 1 && rules.computedInline(&op, computeType)) {
    Placement p;
    p.kind = Placement::Inline;
    p.root = op.getResult(0);
    placements[p.root] = p;
    return;
  }

  // A collective works in place on dense storage: the tensor in flight is
  // its input's storage, which then stays alive until the wait reads it.
  if (isa<AllReduceStartOp, AllReduceWaitOp>(op)) {
    Value in = op.getOperand(0), r = op.getResult(0);
    Placement &src = placementOf(in);
    if ((src.kind == Placement::Arena || src.kind == Placement::View) &&
        placements[src.root].kind == Placement::Arena &&
        src.isDenseFromStart(shapeOf(in))) {
      planView(r, src, 0, -1, src.offset, src.strides);
      return;
    }
    planArena(r);
    return;
  }

  // A reshape, or a transpose of unit dimensions, reads its input in place
  // where the input's strides allow the new shape.
  auto transpose = dyn_cast<TransposeOp>(op);
  if (isa<ReshapeOp>(op) || (transpose && movesOnlyUnitDims(transpose))) {
    Value in = op.getOperand(0), r = op.getResult(0);
    Placement &src = placementOf(in);
    if (src.kind != Placement::Inline)
      if (auto st = reshapeStrides(shapeOf(in), src.strides, shapeOf(r))) {
        planView(r, src, 0, -1, src.offset, *st);
        return;
      }
    planArena(r);
    return;
  }

  // A slice read in place, where its readers take it so.
  if (auto gather = dyn_cast<GatherOp>(op)) {
    Value in = gather.getInput(), r = gather.getResult();
    Placement &src = placementOf(in);
    if (std::optional<int64_t> at = slicePosition(gather);
        at && src.kind != Placement::Inline) {
      int64_t axis = gatherAxis(gather);
      SmallVector<int64_t> strides(src.strides);
      strides.erase(strides.begin() + axis);
      if (readThroughViews(r, strides)) {
        planView(r, src, 0, -1, src.offset + *at * src.strides[axis], strides);
        return;
      }
    }
  }

  if (transpose) {
    Value in = transpose.getInput(), r = transpose.getResult();
    ArrayRef<int64_t> perm = transpose.getPermutation();
    // Written directly by its producer, right before it, in the transposed
    // layout: the producer's result becomes strided storage of the
    // transpose's shape, and the transpose a dense view of it.
    Operation *producer = in.getDefiningOp();
    if (producer && producer->getNextNode() == &op && in.hasOneUse() &&
        rules.writesStrided(producer, cast<OpResult>(in).getResultNumber())) {
      Placement &p = placementOf(in);
      if (p.kind == Placement::Arena && p.bytes == 0 && p.reuses < 0) {
        SmallVector<int64_t> dense = rowMajorStrides(shapeOf(r));
        p.strides.assign(perm.size(), 0);
        for (auto [k, d] : llvm::enumerate(perm))
          p.strides[d] = dense[k];
        planView(r, p, 0, -1, 0, dense);
        return;
      }
    }
    // Read strided by every user, or through views: a view with permuted
    // strides.
    Placement &src = placementOf(in);
    SmallVector<int64_t> strides;
    for (int64_t d : perm)
      strides.push_back(src.strides[d]);
    if (src.kind != Placement::Inline && readThroughViews(r, strides)) {
      planView(r, src, 0, -1, src.offset, strides);
      return;
    }
    planArena(r);
    return;
  }

  for (Value r : op.getResults()) {
    if (placements.count(r))
      continue;
    planArena(r);
  }
  // In place over an operand of the result's type, dense from the start of
  // its storage, whose storage every reader has finished with here.
  if (op.getNumResults() != 1 || !rules.worksInPlace(&op))
    return;
  Value r = op.getResult(0);
  for (OpOperand &operand : op.getOpOperands()) {
    Value v = operand.get();
    if (v.getType() != r.getType() || !placements.count(v))
      continue;
    const Placement &src = placements[v];
    if ((src.kind != Placement::Arena && src.kind != Placement::View) ||
        placements[src.root].kind != Placement::Arena ||
        !src.isDenseFromStart(shapeOf(v)))
      continue;
    bool dead = true;
    for (auto &[value, p] : placements)
      if ((p.kind == Placement::Arena || p.kind == Placement::View) &&
          p.root == src.root && lastUse(value) > index[&op])
        dead = false;
    if (!dead)
      continue;
    Placement &p = placements[r];
    p.reuses = operand.getOperandNumber();
    p.root = src.root; // the same storage
    return;
  }
}

int64_t Planner::lastUse(Value v) {
  int64_t last = v.getDefiningOp() ? index[v.getDefiningOp()] : 0;
  for (Operation *u : v.getUsers()) {
    last = std::max(last, index[u]);
    // A tensor computed inside its readers (a compare inside its selects)
    // reads its operands there.
    if (u->getNumResults() == 1 && placements.count(u->getResult(0)) &&
        placements[u->getResult(0)].kind == Placement::Inline)
      last = std::max(last, lastUse(u->getResult(0)));
  }
  return last;
}

void Planner::assignOffsets(int64_t &arena, int64_t &bound) {
  // One buffer per storage root: its bytes and the union of the lifetimes
  // of every tensor in it.
  struct Buffer {
    int64_t bytes = 0, start = INT64_MAX, end = 0, offset = 0;
  };
  DenseMap<Value, unsigned> bufferOf;
  SmallVector<Buffer> buffers;
  for (Operation &op : block)
    for (Value r : op.getResults()) {
      auto it = placements.find(r);
      if (it == placements.end())
        continue;
      const Placement &p = it->second;
      if (p.kind != Placement::Arena && p.kind != Placement::View)
        continue;
      auto rootIt = placements.find(p.root);
      if (rootIt == placements.end() ||
          rootIt->second.kind != Placement::Arena)
        continue; // a view of an input, a constant or an output
      auto [b, fresh] = bufferOf.try_emplace(p.root, buffers.size());
      if (fresh) {
        buffers.emplace_back();
        roots.push_back(p.root);
      }
      Buffer &buf = buffers[b->second];
      const Placement &root = rootIt->second;
      int64_t own = bufferBytes(cast<ShapedType>(p.root.getType()));
      buf.bytes = std::max(buf.bytes, alignBuffer(std::max(root.bytes, own)));
      if (r == p.root || p.kind == Placement::Arena) {
        // The root, or a tensor computed in place over it.
        buf.bytes = std::max(
            buf.bytes, alignBuffer(bufferBytes(cast<ShapedType>(r.getType()))));
      }
      buf.start = std::min(buf.start, index[r.getDefiningOp()]);
      buf.end = std::max(buf.end, lastUse(r));
    }

  // Place buffers one by one, each at the lowest offset free over its
  // life. No single order is best for every graph, so try a few (largest
  // first, longest-lived first, and by size over life) and keep the
  // smallest arena; each try is quadratic in the buffers, which is cheap.
  auto place = [&](ArrayRef<unsigned> order, SmallVectorImpl<int64_t> &out) {
    int64_t size = 0;
    out.assign(buffers.size(), -1);
    SmallVector<unsigned> placed;
    for (unsigned i : order) {
      const Buffer &b = buffers[i];
      SmallVector<std::pair<int64_t, int64_t>> taken;
      for (unsigned j : placed) {
        const Buffer &o = buffers[j];
        if (o.start <= b.end && b.start <= o.end)
          taken.emplace_back(out[j], out[j] + o.bytes);
      }
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [lo, hi] : taken) {
        if (offset + b.bytes <= lo)
          break;
        offset = std::max(offset, hi);
      }
      out[i] = offset;
      size = std::max(size, offset + b.bytes);
      placed.push_back(i);
    }
    return size;
  };
  auto life = [&](const Buffer &b) { return b.end - b.start + 1; };
  SmallVector<std::function<bool(unsigned, unsigned)>> orders = {
      [&](unsigned a, unsigned b) { return buffers[a].bytes > buffers[b].bytes; },
      [&](unsigned a, unsigned b) {
        return life(buffers[a]) > life(buffers[b]);
      },
      [&](unsigned a, unsigned b) {
        return buffers[a].bytes * life(buffers[a]) >
               buffers[b].bytes * life(buffers[b]);
      }};
  arena = buffers.empty() ? 0 : INT64_MAX;
  for (auto &cmp : orders) {
    SmallVector<unsigned> order(buffers.size());
    for (unsigned i = 0; i < order.size(); ++i)
      order[i] = i;
    llvm::stable_sort(order, cmp);
    SmallVector<int64_t> offsets;
    int64_t size = place(order, offsets);
    if (size < arena) {
      arena = size;
      for (auto [b, o] : llvm::zip(buffers, offsets))
        b.offset = o;
    }
  }
  for (auto [root, b] : llvm::zip(roots, buffers))
    offsetOf[root] = b.offset;

  // The lower bound: the most bytes alive at one point of the program.
  bound = 0;
  for (int64_t t = 0; t < static_cast<int64_t>(block.getOperations().size());
       ++t) {
    int64_t live = 0;
    for (const Buffer &b : buffers)
      if (b.start <= t && t <= b.end)
        live += b.bytes;
    bound = std::max(bound, live);
  }
}

void Planner::record(int64_t arena, int64_t bound) {
  MLIRContext *ctx = fn.getContext();
  Builder b(ctx);
  for (Operation &op : block) {
    if (isUnplanned(op))
      continue;
    SmallVector<Attribute> plan;
    for (Value r : op.getResults()) {
      const Placement &p = placements[r];
      switch (p.kind) {
      case Placement::Arena: {
        bool dense = isRowMajor(shapeOf(r), p.strides);
        plan.push_back(ArenaAttr::get(
            ctx, offsetOf.lookup(p.root), p.bytes,
            dense ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(p.strides),
            p.reuses));
        break;
      }
      case Placement::View:
        plan.push_back(ViewAttr::get(ctx, p.operand, p.result, p.offset,
                                     b.getDenseI64ArrayAttr(p.strides)));
        break;
      case Placement::Inline:
        plan.push_back(InlineAttr::get(ctx));
        break;
      case Placement::Output:
        plan.push_back(OutputAttr::get(ctx, p.index));
        break;
      case Placement::External:
        llvm_unreachable("every op result is planned");
      }
    }
    op.setAttr(kPlanAttrName, b.getArrayAttr(plan));
  }
  fn->setAttr("tfm.arena_bytes", b.getI64IntegerAttr(arena));
  fn->setAttr("tfm.arena_lower_bound", b.getI64IntegerAttr(bound));
}

void Planner::run() {
  for (auto [i, op] : llvm::enumerate(block))
    index[&op] = i;
  if (auto ret = dyn_cast<func::ReturnOp>(block.getTerminator()))
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      returned.try_emplace(v, i);
  for (Operation &op : block)
    decide(op);
  int64_t arena = 0, bound = 0;
  assignOffsets(arena, bound);
  record(arena, bound);
}

struct PlanMemoryPass
    : public mlir::tfm::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (!fn.getBody().hasOneBlock())
      return;
    const LayoutRules *rules = lookupLayoutRules(target);
    if (!rules) {
      fn.emitError() << "tfm-plan-memory: no layout rules for target '"
                     << target << "'; its backend is not linked in";
      return signalPassFailure();
    }
    Planner(fn, *rules, computeType).run();
  }
};

} // namespace
