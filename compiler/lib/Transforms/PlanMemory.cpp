//===- PlanMemory.cpp - One activation arena, liveness-based offsets ------===//
//
// Works on the tensor program before bufferization: every tensor an op
// produces is a buffer with a static size and a lifetime in block order.
// Buffers that may share storage (a reshape and its input; an elementwise
// result and an operand that dies there) are merged first; the merged
// buffers are then placed largest first at the lowest offset that is free
// over their whole lifetime.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TfmOps.h"
#include "tfm/Transforms/CPUFolding.h"
#include "tfm/Transforms/Passes.h"

#include <functional>


namespace mlir::tfm {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

int64_t bytesOf(Type t) { return bufferBytes(cast<ShapedType>(t)); }

/// Ops whose result may overwrite an operand of its own type: elementwise
/// ops, and softmaxes, whose CPU lowering reads each row of an operand
/// before writing the same row of the result.
bool isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, ReluOp, GeluOp,
             DropoutOp, SelectOp, SoftmaxOp, MaskedSoftmaxOp>(op);
}

struct Buffer {
  int64_t bytes = 0, start = 0, end = 0, offset = -1;
};

struct PlanMemoryPass
    : public mlir::tfm::impl::PlanMemoryPassBase<PlanMemoryPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (!fn.getBody().hasOneBlock())
      return;
    Block &block = fn.getBody().front();

    // Block order and last uses.
    DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(block))
      index[&op] = i;
    DenseSet<Value> returned;
    if (auto ret = dyn_cast<func::ReturnOp>(block.getTerminator()))
      returned.insert(ret.getOperands().begin(), ret.getOperands().end());
    // A compare computed inside its selects has no storage of its own.
    auto inlinedCompare = [](Operation *op) {
      auto c = dyn_cast_or_null<CompareOp>(op);
      return c && computedInsideSelects(c);
    };
    auto inArena = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && !isa<arith::ConstantOp, ParameterOp>(def) &&
             !inlinedCompare(def) && !returned.contains(v) &&
             isa<RankedTensorType>(v.getType());
    };
    // Where a value's storage starts being written: a transpose that its
    // matmul writes directly starts at the matmul.
    auto firstDef = [&](Value v) {
      if (auto t = v.getDefiningOp<TransposeOp>(); t && foldsIntoMatmulResult(t))
        return index[t.getInput().getDefiningOp()];
      return index[v.getDefiningOp()];
    };
    // A packed QKV projection stores all its parts in its first result's
    // buffer.
    auto storageBytes = [&](Value v) {
      if (auto qkv = v.getDefiningOp<QKVProjectionOp>(); qkv && isPackedQKV(qkv)) {
        if (cast<OpResult>(v).getResultNumber() != 0)
          return int64_t(0);
        int64_t total = 0;
        for (Value r : qkv.getResults())
          total += bytesOf(r.getType());
        return total;
      }
      return bytesOf(v.getType());
    };
    // The last op that reads v's storage: the selects of a compare that
    // they compute inline read its operands.
    auto lastUse = [&](Value v) {
      int64_t last = index[v.getDefiningOp()];
      for (Operation *u : v.getUsers()) {
        last = std::max(last, index[u]);
        if (inlinedCompare(u))
          for (Operation *sel : u->getUsers())
            last = std::max(last, index[sel]);
      }
      return last;
    };

    // Merge buffers that may share storage (union-find over arena values).
    SmallVector<Value> values;
    DenseMap<Value, unsigned> id;
    for (Operation &op : block)
      for (Value r : op.getResults())
        if (inArena(r)) {
          id[r] = values.size();
          values.push_back(r);
        }
    SmallVector<unsigned> parent(values.size());
    for (unsigned i = 0; i < parent.size(); ++i)
      parent[i] = i;
    std::function<unsigned(unsigned)> find = [&](unsigned i) {
      return parent[i] == i ? i : parent[i] = find(parent[i]);
    };
    auto classEnd = [&](unsigned cls) {
      int64_t end = 0;
      for (unsigned i = 0; i < values.size(); ++i)
        if (find(i) == cls)
          end = std::max(end, lastUse(values[i]));
      return end;
    };
    auto merge = [&](Value a, Value b) {
      if (inArena(a) && inArena(b))
        parent[find(id[a])] = find(id[b]);
    };
    for (Operation &op : block) {
      // Values the CPU lowering keeps as views of another's storage.
      if (auto qkv = dyn_cast<QKVProjectionOp>(op); qkv && isPackedQKV(qkv)) {
        for (Value r : qkv.getResults().drop_front())
          merge(r, qkv.getResult(0));
        continue;
      }
      if (auto t = dyn_cast<TransposeOp>(op)) {
        if (movesOnlyUnitDims(t))
          merge(t.getResult(), t.getInput());
        else if (foldsIntoMatmulOperand(t))
          merge(t.getResult(), t.getInput());
        else if (foldsIntoMatmulResult(t))
          merge(t.getInput(), t.getResult());
      }
      if (op.getNumResults() != 1 || !inArena(op.getResult(0)))
        continue;
      Value r = op.getResult(0);
      if (auto reshape = dyn_cast<ReshapeOp>(op)) {
        if (inArena(reshape.getInput()) && reshapeKeepsView(reshape))
          parent[find(id[r])] = find(id[reshape.getInput()]);
        continue;
      }
      if (!isElementwise(&op))
        continue;
      for (Value operand : op.getOperands()) {
        // In place over an operand of the result's type whose whole buffer
        // (every alias of it) is dead after this op.
        if (!inArena(operand) || operand.getType() != r.getType() ||
            classEnd(find(id[operand])) > index[&op])
          continue;
        parent[find(id[r])] = find(id[operand]);
        break;
      }
    }

    // One buffer per class: the largest member's size, the union lifetime.
    DenseMap<Value, unsigned> bufferOf;
    DenseMap<unsigned, unsigned> bufferOfClass;
    SmallVector<Buffer> buffers;
    for (auto [i, v] : llvm::enumerate(values)) {
      unsigned cls = find(i);
      auto [it, fresh] = bufferOfClass.try_emplace(cls, buffers.size());
      if (fresh) {
        Buffer b;
        b.start = INT64_MAX;
        buffers.push_back(b);
      }
      Buffer &b = buffers[it->second];
      b.bytes = std::max(b.bytes, alignBuffer(storageBytes(v)));
      b.start = std::min(b.start, firstDef(v));
      b.end = std::max(b.end, lastUse(v));
      bufferOf[v] = it->second;
    }

    // Place buffers one by one, each at the lowest offset free over its
    // life. No single order is best for every graph, so try a few (largest
    // first, longest-lived first, and by size over life) and keep the
    // smallest arena; each try is quadratic in the buffers, which is cheap.
    auto place = [&](ArrayRef<unsigned> order, SmallVectorImpl<int64_t> &out) {
      int64_t arena = 0;
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
        arena = std::max(arena, offset + b.bytes);
        placed.push_back(i);
      }
      return arena;
    };
    auto life = [&](const Buffer &b) { return b.end - b.start + 1; };
    SmallVector<std::function<bool(unsigned, unsigned)>> orders = {
        [&](unsigned a, unsigned b) {
          return buffers[a].bytes > buffers[b].bytes;
        },
        [&](unsigned a, unsigned b) {
          return life(buffers[a]) > life(buffers[b]);
        },
        [&](unsigned a, unsigned b) {
          return buffers[a].bytes * life(buffers[a]) >
                 buffers[b].bytes * life(buffers[b]);
        }};
    int64_t arena = INT64_MAX;
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
    if (buffers.empty())
      arena = 0;

    // The lower bound: the most bytes alive at one point of the program.
    int64_t bound = 0;
    for (int64_t t = 0; t < static_cast<int64_t>(block.getOperations().size());
         ++t) {
      int64_t live = 0;
      for (const Buffer &b : buffers)
        if (b.start <= t && t <= b.end)
          live += b.bytes;
      bound = std::max(bound, live);
    }

    Builder builder(&getContext());
    for (Operation &op : block) {
      if (op.getNumResults() == 0 || isa<arith::ConstantOp, ParameterOp>(op))
        continue;
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults()) {
        auto it = bufferOf.find(r);
        offsets.push_back(it == bufferOf.end() ? -1
                                                : buffers[it->second].offset);
      }
      op.setAttr("tfm.arena_offsets", builder.getDenseI64ArrayAttr(offsets));
    }
    fn->setAttr("tfm.arena_bytes", builder.getI64IntegerAttr(arena));
    fn->setAttr("tfm.arena_lower_bound", builder.getI64IntegerAttr(bound));
  }
};

} // namespace
