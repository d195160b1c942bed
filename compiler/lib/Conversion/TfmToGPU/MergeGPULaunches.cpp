//===- MergeGPULaunches.cpp - tfm-merge-gpu-launches ----------------------===//
//
// A training step launches many small kernels that do not depend on each
// other: an optimizer update per parameter, the fills that start the
// gradients, the copies of independent layouts. Each launch costs the GPU a
// few microseconds whatever its size, so neighbours that touch disjoint
// memory become one launch whose blocks run them side by side: the merged
// grid is the parts' grids end to end, and each block runs the part its
// index falls in, with its index rebased. The branch depends on the block
// index alone, so every thread of a block takes the same one.
//
//===----------------------------------------------------------------------===//

#include "BufferPlace.h"

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/Statistic.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_MERGEGPULAUNCHESPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// A launch that may run beside others, with the buffers it touches.
struct Part {
  gpu::LaunchOp launch;
  int64_t threads = 0;
  SmallVector<Value> reads, writes;
};

/// Whether `buffer` is the kernel's own (a view of an alloca in its body),
/// which no other part sees.
bool isPrivate(Value buffer, gpu::LaunchOp launch) {
  while (auto view = buffer.getDefiningOp<ViewLikeOpInterface>())
    buffer = view.getViewSource();
  Operation *owner = isa<BlockArgument>(buffer)
                         ? cast<BlockArgument>(buffer).getOwner()->getParentOp()
                         : buffer.getDefiningOp();
  return owner && launch->isProperAncestor(owner);
}

bool isOne(Value v) {
  std::optional<int64_t> c = getConstantIntValue(v);
  return c && *c == 1;
}

/// The part that `launch` can be, when it is a one-dimensional grid of
/// one-dimensional blocks, with no shared memory, no barrier, no warp
/// collective, and only memory effects on buffers whose places it names.
std::optional<Part> partOf(gpu::LaunchOp launch) {
  if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty() ||
      launch.hasClusterSize() || launch.getDynamicSharedMemorySize() ||
      launch.getNumWorkgroupAttributions() ||
      launch.getNumPrivateAttributions() || !launch.getBody().hasOneBlock())
    return std::nullopt;
  std::optional<int64_t> threads = getConstantIntValue(launch.getBlockSizeX());
  if (!threads || !isOne(launch.getBlockSizeY()) ||
      !isOne(launch.getBlockSizeZ()) || !isOne(launch.getGridSizeY()) ||
      !isOne(launch.getGridSizeZ()))
    return std::nullopt;
  Part part{launch, *threads};
  WalkResult walk = launch.getBody().walk([&](Operation *op) {
    // A barrier or a warp collective in a branch that a whole block takes
    // is legal on the GPU, but the emulation splits a body into phases at
    // them only at its top level or in loops. And a masked-off thread must
    // not leave its warp's shuffle.
    if (isa<gpu::BarrierOp, gpu::ShuffleOp, gpu::SubgroupReduceOp,
            gpu::AllReduceOp>(op))
      return WalkResult::interrupt();
    StringRef dialect = op->getDialect()->getNamespace();
    if (dialect == "nvgpu" || dialect == "nvvm")
      return WalkResult::interrupt();
    if (op->hasTrait<::mlir::OpTrait::HasRecursiveMemoryEffects>() ||
        op->hasTrait<::mlir::OpTrait::IsTerminator>())
      return WalkResult::advance();
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return isMemoryEffectFree(op) ? WalkResult::advance()
                                    : WalkResult::interrupt();
    SmallVector<MemoryEffects::EffectInstance> list;
    effects.getEffects(list);
    for (MemoryEffects::EffectInstance &effect : list) {
      Value buffer = effect.getValue();
      if (!buffer)
        return WalkResult::interrupt();
      if (isPrivate(buffer, launch))
        continue;
      if (isa<MemoryEffects::Read>(effect.getEffect()))
        part.reads.push_back(buffer);
      else if (isa<MemoryEffects::Write>(effect.getEffect()))
        part.writes.push_back(buffer);
      else
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return std::nullopt;
  return part;
}

/// Whether `next` may run at the same time as every part of `group`: it
/// writes nothing they touch and reads nothing they write.
bool independent(ArrayRef<Part> group, const Part &next) {
  auto anyOverlap = [](ArrayRef<Value> xs, ArrayRef<Value> ys) {
    return llvm::any_of(xs, [&](Value x) {
      return llvm::any_of(ys, [&](Value y) { return mayOverlap(x, y); });
    });
  };
  return llvm::none_of(group, [&](const Part &p) {
    return anyOverlap(next.writes, p.writes) ||
           anyOverlap(next.writes, p.reads) || anyOverlap(next.reads, p.writes);
  });
}

/// One launch for `group`, where its last part was.
void merge(MutableArrayRef<Part> group) {
  gpu::LaunchOp last = group.back().launch;
  MLIRContext *ctx = last.getContext();
  SmallVector<Location> locs;
  for (Part &p : group)
    locs.push_back(p.launch.getLoc());
  Location loc = FusedLoc::get(ctx, locs);
  OpBuilder b(last);
  int64_t widest = 0;
  for (Part &p : group)
    widest = std::max(widest, p.threads);

  // Where each part's blocks end in the merged grid; the next part's
  // start there.
  SmallVector<Value> ends{group.front().launch.getGridSizeX()};
  for (Part &p : group.drop_front())
    ends.push_back(b.createOrFold<arith::AddIOp>(loc, ends.back(),
                                                 p.launch.getGridSizeX()));
  gpu::LaunchOp first = group.front().launch;
  Value one = first.getGridSizeY();
  Value width = llvm::find_if(group, [&](const Part &p) {
                  return p.threads == widest;
                })->launch.getBlockSizeX();
  auto merged =
      b.create<gpu::LaunchOp>(loc, ends.back(), one, one, width, one, one);

  Block &body = merged.getBody().front();
  b.setInsertionPointToStart(&body);
  Value block = merged.getBlockIds().x, thread = merged.getThreadIds().x;
  for (auto [i, p] : llvm::enumerate(group)) {
    Value start = i ? ends[i - 1] : Value();
    Value inPart =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, block, ends[i]);
    if (start)
      inPart = b.create<arith::AndIOp>(
          loc, inPart,
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge, block,
                                  start));
    // The part's own threads only, when its block is narrower.
    if (p.threads < widest)
      inPart = b.create<arith::AndIOp>(
          loc, inPart,
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, thread,
                                  p.launch.getBlockSizeX()));
    auto branch = b.create<scf::IfOp>(loc, inPart, /*withElseRegion=*/false);
    OpBuilder inner = OpBuilder::atBlockBegin(branch.thenBlock());

    IRMapping map;
    gpu::LaunchOp from = p.launch;
    map.map(from.getBlockIds().x,
            start ? inner.create<arith::SubIOp>(loc, block, start).getResult()
                  : block);
    map.map(from.getBlockIds().y, merged.getBlockIds().y);
    map.map(from.getBlockIds().z, merged.getBlockIds().z);
    map.map(from.getThreadIds().x, thread);
    map.map(from.getThreadIds().y, merged.getThreadIds().y);
    map.map(from.getThreadIds().z, merged.getThreadIds().z);
    map.map(from.getGridSize().x, from.getGridSizeX());
    map.map(from.getGridSize().y, merged.getGridSize().y);
    map.map(from.getGridSize().z, merged.getGridSize().z);
    map.map(from.getBlockSize().x, from.getBlockSizeX());
    map.map(from.getBlockSize().y, merged.getBlockSize().y);
    map.map(from.getBlockSize().z, merged.getBlockSize().z);
    for (Operation &op : from.getBody().front().without_terminator())
      inner.clone(op, map);
  }
  b.create<gpu::TerminatorOp>(loc);
  for (Part &p : group)
    p.launch.erase();
}

struct MergeGPULaunchesPass
    : public mlir::tfm::impl::MergeGPULaunchesPassBase<MergeGPULaunchesPass> {
  void runOnOperation() override {
    getOperation().walk([&](Block *block) {
      SmallVector<Part> group;
      auto flush = [&]() {
        if (group.size() > 1) {
          merge(group);
          ++numMerged;
          numParts += group.size();
        }
        group.clear();
      };
      for (Operation &op : llvm::make_early_inc_range(*block)) {
        auto launch = dyn_cast<gpu::LaunchOp>(op);
        if (!launch) {
          // A pure op (a view, a constant) may stand between two parts,
          // which then run where the last one did.
          if (!isMemoryEffectFree(&op))
            flush();
          continue;
        }
        std::optional<Part> part = partOf(launch);
        if (!part) {
          flush();
          continue;
        }
        if (!independent(group, *part))
          flush();
        group.push_back(std::move(*part));
      }
      flush();
    });
  }
};

} // namespace
