//===- MapToGPU.cpp - tfm-map-to-gpu --------------------------------------===//
//
// After convert-linalg-to-parallel-loops, each linalg op of a GPU entry is
// an scf.parallel over its parallel dimensions (reductions are scf.for
// inside). This pass maps every such nest to a grid: its iteration space is
// flattened, row-major, into one index that runs over blocks × threads, so
// that consecutive threads write consecutive elements of a row-major
// result. A loop nest with no parallel dimension (a reduction to a scalar)
// runs on one thread. convert-parallel-loops-to-gpu then makes each mapped
// nest a gpu.launch.
//
// What stays in the entry runs on the host: index arithmetic, views of
// device buffers, calls into the runtime and control flow. Anything else
// that touches memory is an error here, since the host cannot read device
// memory.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_MAPTOGPUPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

gpu::ParallelLoopDimMappingAttr mappingOf(MLIRContext *ctx,
                                          gpu::Processor processor) {
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  return gpu::ParallelLoopDimMappingAttr::get(ctx, processor, id, id);
}

/// Builds a grid of ceil(n / workers) blocks of `workers` workers whose
/// body `body(builder, loc, index)` runs for every flat index in [0, n). A
/// worker is a thread, or with `lanes` > 1 a group of that many threads
/// (thread_x) that all run the body for the same index (thread_y picks the
/// group).
void buildGrid(OpBuilder &b, Location loc, int64_t n, int64_t workers,
               function_ref<void(OpBuilder &, Location, Value)> body,
               int64_t lanes = 1) {
  int64_t perBlock = std::min(n, workers);
  int64_t blocks = (n + perBlock - 1) / perBlock;
  MLIRContext *ctx = b.getContext();
  auto c = [&](OpBuilder &ob, int64_t v) -> Value {
    return ob.create<arith::ConstantIndexOp>(loc, v);
  };
  auto outer = b.create<scf::ParallelOp>(
      loc, ValueRange{c(b, 0)}, ValueRange{c(b, blocks)}, ValueRange{c(b, 1)},
      [&](OpBuilder &ob, Location l, ValueRange block) {
        SmallVector<Value> lbs{c(ob, 0)}, ubs{c(ob, perBlock)}, steps{c(ob, 1)};
        if (lanes > 1) {
          lbs.insert(lbs.begin(), c(ob, 0));
          ubs.insert(ubs.begin(), c(ob, lanes));
          steps.insert(steps.begin(), c(ob, 1));
        }
        auto inner = ob.create<scf::ParallelOp>(
            l, lbs, ubs, steps,
            [&](OpBuilder &ib, Location il, ValueRange thread) {
              Value flat = ib.create<arith::AddIOp>(
                  il, ib.create<arith::MulIOp>(il, block[0], c(ib, perBlock)),
                  thread.back());
              if (blocks * perBlock == n) {
                body(ib, il, flat);
                return;
              }
              Value inside = ib.create<arith::CmpIOp>(
                  il, arith::CmpIPredicate::ult, flat, c(ib, n));
              ib.create<scf::IfOp>(il, inside, [&](OpBuilder &tb, Location tl) {
                body(tb, tl, flat);
                tb.create<scf::YieldOp>(tl);
              });
            });
        if (lanes > 1)
          (void)gpu::setMappingAttr(
              inner, {mappingOf(ctx, gpu::Processor::ThreadX),
                      mappingOf(ctx, gpu::Processor::ThreadY)});
        else
          (void)gpu::setMappingAttr(
              inner, {mappingOf(ctx, gpu::Processor::ThreadX)});
      });
  (void)gpu::setMappingAttr(outer, {mappingOf(ctx, gpu::Processor::BlockX)});
}

std::optional<int64_t> constantIndex(Value v) {
  if (auto c = v.getDefiningOp<arith::ConstantIndexOp>())
    return c.value();
  return std::nullopt;
}

/// Whether the host may run `op`: it computes on values alone, or is a view
/// of a buffer, a call into the runtime, host stack memory or control flow.
bool runsOnHost(Operation *op) {
  // A kernel call is a call into the runtime, which runs it on the device;
  // a launch, a kernel built whole (a warp per row), is already one; a TMA
  // tensor map is made by the runtime too (tfm-lower-tensor-maps).
  if (isa<func::CallOp, func::ReturnOp, cf::BranchOp, cf::CondBranchOp,
          KernelCallOp, gpu::LaunchOp, nvgpu::TmaCreateDescriptorOp>(op))
    return true;
  if (op->getDialect() &&
      op->getDialect()->getNamespace() == LLVM::LLVMDialect::getDialectNamespace())
    return true;
  return isMemoryEffectFree(op);
}

struct MapToGPUPass : public mlir::tfm::impl::MapToGPUPassBase<MapToGPUPass> {
  using MapToGPUPassBase::MapToGPUPassBase;

  /// A parallel nest over the flat index space of its bounds.
  LogicalResult mapParallel(scf::ParallelOp loop) {
    if (loop.getNumReductions() != 0)
      return loop.emitError("tfm-map-to-gpu: a parallel loop with "
                            "reductions cannot be mapped yet");
    SmallVector<int64_t> lbs, steps, trips;
    for (auto [lb, ub, step] : llvm::zip(loop.getLowerBound(),
                                         loop.getUpperBound(), loop.getStep())) {
      auto l = constantIndex(lb), u = constantIndex(ub), s = constantIndex(step);
      if (!l || !u || !s || *s <= 0)
        return loop.emitError("tfm-map-to-gpu: the loop's bounds are not "
                              "constants");
      lbs.push_back(*l);
      steps.push_back(*s);
      trips.push_back(*u > *l ? (*u - *l + *s - 1) / *s : 0);
    }
    int64_t n = 1;
    for (int64_t t : trips)
      n *= t;
    // A loop of warps (tfm-tile-gpu-matmul's tensor-core tiles) spreads
    // its iterations over the block's warps instead of its threads.
    int64_t lanes = 1;
    if (auto attr = loop->getAttrOfType<IntegerAttr>(kLanesAttrName))
      lanes = attr.getInt();
    if (lanes < 1 || threads % lanes)
      return loop.emitError("tfm-map-to-gpu: ")
             << lanes << " lanes do not divide a block of "
             << static_cast<int64_t>(threads)
             << " threads";
    if (n > 0) {
      OpBuilder b(loop);
      buildGrid(b, loop.getLoc(), n, threads / lanes,
                [&](OpBuilder &ob, Location l, Value flat) {
                  // Row-major: the last dimension varies fastest.
                  IRMapping map;
                  Value rest = flat;
                  for (int64_t d = static_cast<int64_t>(trips.size()) - 1;
                       d >= 0; --d) {
                    Value t = ob.create<arith::ConstantIndexOp>(l, trips[d]);
                    Value k = d ? ob.create<arith::RemUIOp>(l, rest, t).getResult()
                                : rest;
                    if (d)
                      rest = ob.create<arith::DivUIOp>(l, rest, t);
                    Value iv = ob.create<arith::AddIOp>(
                        l, ob.create<arith::ConstantIndexOp>(l, lbs[d]),
                        ob.create<arith::MulIOp>(
                            l, k, ob.create<arith::ConstantIndexOp>(l, steps[d])));
                    map.map(loop.getInductionVars()[d], iv);
                  }
                  for (Operation &op : loop.getBody()->without_terminator())
                    ob.clone(op, map);
                },
                lanes);
    }
    loop.erase();
    return success();
  }

  /// A loop nest with no parallel dimension, on one thread.
  LogicalResult mapSequential(scf::ForOp loop) {
    if (loop.getNumResults() != 0)
      return loop.emitError("tfm-map-to-gpu: the host cannot use a value "
                            "computed on the device");
    OpBuilder b(loop);
    buildGrid(b, loop.getLoc(), 1, 1,
              [&](OpBuilder &ob, Location, Value) { ob.clone(*loop); });
    loop.erase();
    return success();
  }

  /// Stores outside any loop (a linalg op on rank-0 buffers has none), on
  /// one thread with the loads and arithmetic they store the results of.
  /// The stores of one multi-result op (a fused chain that keeps an
  /// intermediate) go to one kernel, their ops in the host's order: a
  /// kernel each, each recomputing its chain, would read a buffer its
  /// sibling had already overwritten in place.
  LogicalResult mapStores(MutableArrayRef<memref::StoreOp> stores) {
    Block *top = stores.front()->getBlock();
    BackwardSliceOptions options;
    options.filter = [&](Operation *op) { return op->getBlock() == top; };
    SetVector<Operation *> slice;
    for (memref::StoreOp store : stores)
      getBackwardSlice(store.getOperation(), &slice, options);
    SmallVector<Operation *> ops(slice.begin(), slice.end());
    for (memref::StoreOp store : stores)
      ops.push_back(store);
    llvm::sort(ops, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    OpBuilder b(stores.back());
    buildGrid(b, stores.back().getLoc(), 1, 1,
              [&](OpBuilder &ob, Location, Value) {
                IRMapping map;
                for (Operation *op : ops)
                  ob.clone(*op, map);
              });
    for (memref::StoreOp store : stores)
      store.erase();
    // What only the stores used goes with them; a load the host still uses
    // is reported as such.
    for (Operation *op : llvm::reverse(slice))
      if (op->use_empty() && !isa<memref::StoreOp>(op))
        op->erase();
    return success();
  }

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isDeclaration())
      return;
    SmallVector<Operation *> topLevel;
    for (Block &block : fn.getBody())
      for (Operation &op : block)
        topLevel.push_back(&op);
    // Stores first: they take loads with them, which the walk below would
    // otherwise report. Consecutive ones, with nothing but loads and pure
    // arithmetic between them, are one op's results.
    SmallVector<memref::StoreOp> run;
    auto flush = [&]() -> LogicalResult {
      LogicalResult mapped = run.empty() ? success() : mapStores(run);
      run.clear();
      return mapped;
    };
    for (Operation *op : topLevel) {
      if (auto store = dyn_cast<memref::StoreOp>(op)) {
        run.push_back(store);
        continue;
      }
      if (isa<memref::LoadOp>(op) || isPure(op))
        continue;
      if (failed(flush()))
        return signalPassFailure();
    }
    if (failed(flush()))
      return signalPassFailure();
    topLevel.clear();
    for (Block &block : fn.getBody())
      for (Operation &op : block)
        topLevel.push_back(&op);
    for (Operation *op : topLevel) {
      LogicalResult mapped = success();
      if (auto loop = dyn_cast<scf::ParallelOp>(op))
        mapped = loop->hasAttr(gpu::getMappingAttrName()) ? success()
                                                          : mapParallel(loop);
      else if (auto loop = dyn_cast<scf::ForOp>(op))
        mapped = mapSequential(loop);

      else if (!runsOnHost(op))
        mapped = op->emitError("the CUDA target cannot run '")
                 << op->getName()
                 << "' on the host, which cannot read device memory";
      if (failed(mapped))
        return signalPassFailure();
    }
  }
};

} // namespace
