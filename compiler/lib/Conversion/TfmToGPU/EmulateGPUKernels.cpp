//===- EmulateGPUKernels.cpp - tfm-emulate-gpu-kernels
//---------------------===//
//
// Runs a gpu.launch on the CPU with the GPU's semantics between threads:
// serial loops over the threads would let a thread read shared memory that
// the others have not written yet, which a barrier exists to prevent. So
// the body is cut at each gpu.barrier into phases, and each phase runs for
// every thread of the block before the next begins. A value that one phase
// defines and a later one uses is kept per thread; workgroup memory is one
// buffer per block, filled with a poison pattern, so that a read before any
// write (a missing barrier) gives NaN or an out-of-pattern integer rather
// than a plausible value.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_EMULATEGPUKERNELSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The fill of workgroup memory before a block runs: NaN for floats, and
/// for integers a pattern no kernel computes by chance.
Value poisonOf(OpBuilder &b, Location loc, Type element) {
  if (auto f = dyn_cast<FloatType>(element))
    return b.create<arith::ConstantOp>(
        loc, b.getFloatAttr(f, APFloat::getNaN(f.getFloatSemantics())));
  if (element.isIndex())
    return b.create<arith::ConstantIndexOp>(loc, 0x5eed5eed);
  return b.create<arith::ConstantOp>(
      loc,
      b.getIntegerAttr(
          element,
          APInt(64, 0x5eed5eedull).trunc(element.getIntOrFloatBitWidth())));
}

/// Whether `op` or anything nested in it is a gpu.barrier.
bool containsBarrier(Operation *op) {
  return op->walk([](gpu::BarrierOp) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

struct Emulator {
  gpu::LaunchOp launch;
  OpBuilder b;
  Location loc;

  explicit Emulator(gpu::LaunchOp launch)
      : launch(launch), b(launch), loc(launch.getLoc()) {}

  LogicalResult run() {
    Block &body = launch.getBody().front();
    // Phases: the top-level ops between barriers. A barrier inside a loop
    // or a branch needs that control flow to be uniform, which this pass
    // does not check yet, so it refuses it.
    SmallVector<SmallVector<Operation *>> phases(1);
    for (Operation &op : body.without_terminator()) {
      if (isa<gpu::BarrierOp>(op)) {
        phases.emplace_back();
        continue;
      }
      if (containsBarrier(&op))
        return op.emitOpError()
               << "holds a gpu.barrier inside its regions; the emulation "
                  "runs barriers at the top level of a gpu.launch only";
      phases.back().push_back(&op);
    }
    // Values that outlive their phase, kept per thread.
    DenseMap<Operation *, unsigned> phaseOf;
    for (auto [i, phase] : llvm::enumerate(phases))
      for (Operation *op : phase)
        phaseOf[op] = i;
    SetVector<Value> crossing;
    for (auto [i, phase] : llvm::enumerate(phases))
      for (Operation *op : phase)
        op->walk([&](Operation *user) {
          for (Value v : user->getOperands()) {
            Operation *def = v.getDefiningOp();
            if (def && phaseOf.count(def) && phaseOf[def] < i)
              crossing.insert(v);
          }
        });
    for (Value v : crossing)
      if (!v.getType().isIntOrIndexOrFloat() && !isa<VectorType>(v.getType()))
        return v.getDefiningOp()->emitOpError()
               << "defines a " << v.getType()
               << " that a later phase uses across a gpu.barrier; the "
                  "emulation keeps only scalars and vectors per thread";

    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    Value threads = b.create<arith::MulIOp>(
        loc, b.create<arith::MulIOp>(loc, block.x, block.y), block.z);

    auto blockLoops = [&](auto bodyBuilder) {
      b.create<scf::ForOp>(
          loc, zero, grid.z, one, ValueRange{},
          [&](OpBuilder &bz, Location, Value z, ValueRange) {
            bz.create<scf::ForOp>(
                loc, zero, grid.y, one, ValueRange{},
                [&](OpBuilder &by, Location, Value y, ValueRange) {
                  by.create<scf::ForOp>(
                      loc, zero, grid.x, one, ValueRange{},
                      [&](OpBuilder &bx, Location, Value x, ValueRange) {
                        OpBuilder::InsertionGuard guard(b);
                        b.setInsertionPoint(bx.getInsertionBlock(),
                                            bx.getInsertionPoint());
                        bodyBuilder(x, y, z);
                        bx.create<scf::YieldOp>(loc);
                      });
                  by.create<scf::YieldOp>(loc);
                });
            bz.create<scf::YieldOp>(loc);
          });
    };

    // The buffers are allocated once, outside the grid's loops, so that a
    // large grid does not grow the stack block by block.
    SmallVector<std::pair<BlockArgument, Value>> workgroup;
    for (BlockArgument arg : launch.getWorkgroupAttributions()) {
      auto type = cast<MemRefType>(arg.getType());
      workgroup.push_back(
          {arg,
           b.create<memref::AllocaOp>(
               loc, MemRefType::get(type.getShape(), type.getElementType()))});
    }
    DenseMap<Value, Value> slots;
    for (Value v : crossing)
      slots[v] = b.create<memref::AllocaOp>(
          loc, MemRefType::get({ShapedType::kDynamic}, v.getType()),
          ValueRange{threads});

    blockLoops([&](Value bx, Value by, Value bz) {
      IRMapping blockMap;
      blockMap.map(launch.getBlockIds().x, bx);
      blockMap.map(launch.getBlockIds().y, by);
      blockMap.map(launch.getBlockIds().z, bz);
      blockMap.map(launch.getGridSize().x, grid.x);
      blockMap.map(launch.getGridSize().y, grid.y);
      blockMap.map(launch.getGridSize().z, grid.z);
      blockMap.map(launch.getBlockSize().x, block.x);
      blockMap.map(launch.getBlockSize().y, block.y);
      blockMap.map(launch.getBlockSize().z, block.z);
      // Workgroup memory starts each block poisoned.
      for (auto [arg, buffer] : workgroup) {
        auto type = cast<MemRefType>(buffer.getType());
        SmallVector<Value> ubs;
        for (int64_t d : type.getShape())
          ubs.push_back(b.create<arith::ConstantIndexOp>(loc, d));
        SmallVector<Value> lbs(ubs.size(), zero), steps(ubs.size(), one);
        Value poison = poisonOf(b, loc, type.getElementType());
        scf::buildLoopNest(
            b, loc, lbs, ubs, steps,
            [&, buffer = buffer](OpBuilder &nb, Location, ValueRange ivs) {
              nb.create<memref::StoreOp>(loc, poison, buffer, ivs);
            });
        blockMap.map(arg, buffer);
      }
      for (auto [i, phase] : llvm::enumerate(phases)) {
        auto loop = b.create<scf::ForOp>(loc, zero, threads, one);
        OpBuilder tb = OpBuilder::atBlockBegin(loop.getBody());
        Value t = loop.getInductionVar();
        // Thread t is (t mod bx, t / bx mod by, t / (bx by)), x fastest.
        Value tx = tb.create<arith::RemUIOp>(loc, t, block.x);
        Value rest = tb.create<arith::DivUIOp>(loc, t, block.x);
        Value ty = tb.create<arith::RemUIOp>(loc, rest, block.y);
        Value tz = tb.create<arith::DivUIOp>(loc, rest, block.y);
        IRMapping map = blockMap;
        map.map(launch.getThreadIds().x, tx);
        map.map(launch.getThreadIds().y, ty);
        map.map(launch.getThreadIds().z, tz);
        for (Value v : crossing)
          if (phaseOf[v.getDefiningOp()] < i)
            map.map(v, tb.create<memref::LoadOp>(loc, slots[v], t));
        for (Operation *op : phase) {
          Operation *clone = tb.clone(*op, map);
          for (auto [r, c] : llvm::zip(op->getResults(), clone->getResults()))
            if (crossing.contains(r))
              tb.create<memref::StoreOp>(loc, c, slots[r], t);
        }
      }
    });
    launch.erase();
    return success();
  }
};

struct EmulateGPUKernelsPass
    : public mlir::tfm::impl::EmulateGPUKernelsPassBase<EmulateGPUKernelsPass> {
  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation()->walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    for (gpu::LaunchOp launch : launches) {
      if (launch->getNumResults() != 0 || launch.getDynamicSharedMemorySize()) {
        launch.emitOpError() << "is asynchronous or takes dynamic shared "
                                "memory, which the emulation does not run yet";
        return signalPassFailure();
      }
      if (!launch.getBody().hasOneBlock()) {
        launch.emitOpError() << "has a body of several blocks; the emulation "
                                "runs structured control flow only";
        return signalPassFailure();
      }
      if (failed(Emulator(launch).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
