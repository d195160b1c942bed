//===- EmulateGPUKernels.cpp - tfm-emulate-gpu-kernels --------------------===//
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

#include "tfm/Conversion/GPUEmulation/WarpSemantics.h"
#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

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

/// Whether `op` or anything nested in it waits for other threads: a
/// gpu.barrier, or a warp collective, which reads the other lanes' values.
bool containsBarrier(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        return isa<gpu::BarrierOp, gpu::ShuffleOp>(nested)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// A launch body as the emulation runs it: phases that run per thread,
/// separated by barriers, and uniform loops whose bodies hold barriers,
/// which run once per block with their own phases inside.
struct Step {
  /// The ops of a phase, run for every thread in turn; empty for a loop.
  SmallVector<Operation *> phase;
  /// A loop around barriers, run once per block.
  scf::ForOp loop;
  /// A warp collective, run for every thread from its lanes' values once
  /// all of them have computed theirs.
  gpu::ShuffleOp shuffle;
  std::vector<Step> body;
};

struct Emulator {
  gpu::LaunchOp launch;
  OpBuilder b;
  Location loc;
  /// The phase (a number unique across the whole body) of each op placed
  /// in one, and of each op nested in such an op.
  DenseMap<Operation *, unsigned> phaseOf;
  unsigned numPhases = 0;
  SetVector<Value> crossing;
  DenseMap<Value, Value> slots;
  Value zero, one, threads;
  gpu::KernelDim3 block;

  explicit Emulator(gpu::LaunchOp launch)
      : launch(launch), b(launch), loc(launch.getLoc()) {}

  /// Whether `v` is the same for every thread of a block: defined outside
  /// the launch, a block or size argument, or computed from such values by
  /// ops without memory effects.
  bool isUniform(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &launch.getBody().front())
        return false;
      for (Value t : {launch.getThreadIds().x, launch.getThreadIds().y,
                      launch.getThreadIds().z})
        if (v == t)
          return false;
      return true;
    }
    Operation *def = v.getDefiningOp();
    if (!launch->isProperAncestor(def))
      return true;
    if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
      return false;
    return llvm::all_of(def->getOperands(),
                        [&](Value o) { return isUniform(o); });
  }

  /// Splits `ops` into steps, numbering the phases.
  FailureOr<std::vector<Step>> plan(Block &ops) {
    std::vector<Step> steps;
    unsigned current = 0;
    // What follows a barrier, a collective or a loop around barriers.
    auto newPhase = [&] {
      steps.emplace_back();
      current = numPhases++;
    };
    newPhase();
    for (Operation &op : ops.without_terminator()) {
      if (isa<gpu::BarrierOp>(op)) {
        newPhase();
        continue;
      }
      if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
        std::optional<int64_t> offset =
            getConstantIntValue(shuffle.getOffset());
        std::optional<int64_t> width = getConstantIntValue(shuffle.getWidth());
        if (!offset || !width || *width < 1 || *width > warp::kWarpSize)
          return op.emitOpError()
                 << "takes an offset or width that is not a constant (width "
                    "1 to 32); the emulation reads its lanes from a table";
        Step step;
        step.shuffle = shuffle;
        phaseOf[shuffle] = numPhases++;
        steps.push_back(std::move(step));
        newPhase();
        continue;
      }
      if (!containsBarrier(&op)) {
        steps.back().phase.push_back(&op);
        op.walk([&](Operation *nested) { phaseOf[nested] = current; });
        continue;
      }
      auto loop = dyn_cast<scf::ForOp>(op);
      if (!loop)
        return op.emitOpError()
               << "holds a gpu.barrier inside its regions; the emulation "
                  "runs barriers at the top level of a gpu.launch or in "
                  "an scf.for";
      if (loop.getNumResults() != 0)
        return op.emitOpError()
               << "carries values around a gpu.barrier; the emulation runs "
                  "loops around barriers without iter_args only";
      for (Value bound :
           {loop.getLowerBound(), loop.getUpperBound(), loop.getStep()})
        if (!isUniform(bound))
          return op.emitOpError()
                 << "runs around a gpu.barrier with bounds that may differ "
                    "between threads, which deadlocks a GPU";
      Step step;
      step.loop = loop;
      FailureOr<std::vector<Step>> inner = plan(*loop.getBody());
      if (failed(inner))
        return failure();
      step.body = std::move(*inner);
      steps.push_back(std::move(step));
      newPhase();
    }
    return steps;
  }

  /// The uniform `v` at block level: outside values as they are, launch
  /// arguments mapped, pure ops of the body cloned.
  Value uniformAt(Value v, IRMapping &blockMap) {
    if (Value mapped = blockMap.lookupOrNull(v))
      return mapped;
    Operation *def = v.getDefiningOp();
    if (!def || !launch->isProperAncestor(def))
      return v;
    for (Value o : def->getOperands())
      uniformAt(o, blockMap);
    Operation *clone = b.clone(*def, blockMap);
    return clone->getResult(cast<OpResult>(v).getResultNumber());
  }

  /// Clones `phase` for thread `t` at `tb`, reading the values that other
  /// phases defined from their slots and storing those that others use.
  void clonePhase(OpBuilder &tb, ArrayRef<Operation *> phase, IRMapping map,
                  Value t) {
    if (phase.empty())
      return;
    unsigned id = phaseOf.lookup(phase.front());
    for (Value v : crossing)
      if (phaseOf.lookup(v.getDefiningOp()) != id)
        map.map(v, tb.create<memref::LoadOp>(loc, slots[v], t));
    for (Operation *op : phase) {
      Operation *clone = tb.clone(*op, map);
      for (auto [r, c] : llvm::zip(op->getResults(), clone->getResults()))
        if (crossing.contains(r))
          tb.create<memref::StoreOp>(loc, c, slots[r], t);
    }
  }

  /// A loop over the block's threads, whose body `body` builds with the
  /// thread's index and ids mapped.
  void
  threadLoop(const IRMapping &blockMap,
             function_ref<void(OpBuilder &, const IRMapping &, Value)> body) {
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
    body(tb, map, t);
  }

  /// Each lane's source lane of `shuffle`, and whether it is valid, as
  /// shfl.sync reads them where MLIR's lowering calls it: a table of 32
  /// entries `valid << 5 | lane`, from WarpSemantics.h.
  Value shuffleTable(gpu::ShuffleOp shuffle) {
    warp::ShuffleMode mode;
    switch (shuffle.getMode()) {
    case gpu::ShuffleMode::XOR:
      mode = warp::ShuffleMode::Xor;
      break;
    case gpu::ShuffleMode::UP:
      mode = warp::ShuffleMode::Up;
      break;
    case gpu::ShuffleMode::DOWN:
      mode = warp::ShuffleMode::Down;
      break;
    case gpu::ShuffleMode::IDX:
      mode = warp::ShuffleMode::Idx;
      break;
    }
    int32_t offset = *getConstantIntValue(shuffle.getOffset());
    int32_t width = *getConstantIntValue(shuffle.getWidth());
    auto type = MemRefType::get({warp::kWarpSize}, b.getI32Type());
    auto module = launch->getParentOfType<ModuleOp>();
    // One table per mode, offset and width, shared by every shuffle that
    // reads its lanes so.
    std::string name =
        llvm::formatv("__tfm_shuffle_lanes_{0}_{1}_{2}",
                      gpu::stringifyShuffleMode(shuffle.getMode()), offset,
                      width)
            .str();
    if (module.lookupSymbol(name))
      return b.create<memref::GetGlobalOp>(loc, type, name);
    SmallVector<int32_t> entries;
    for (int lane = 0; lane < warp::kWarpSize; ++lane) {
      warp::ShuffleSource src = warp::shflSync(
          mode, lane, offset, warp::gpuShuffleClamp(mode, width));
      entries.push_back(int32_t(src.valid) << 5 | src.lane);
    }
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    mb.create<memref::GlobalOp>(
        loc, name, mb.getStringAttr("private"), type,
        DenseElementsAttr::get(
            RankedTensorType::get({warp::kWarpSize}, b.getI32Type()),
            ArrayRef<int32_t>(entries)),
        /*constant=*/true, /*alignment=*/nullptr);
    return b.create<memref::GetGlobalOp>(loc, type, name);
  }

  /// Every thread reads its source lane's value, which the phases before
  /// have left in that thread's slot.
  void emitShuffle(gpu::ShuffleOp shuffle, const IRMapping &blockMap) {
    Value table = shuffleTable(shuffle);
    Value input = shuffle.getValue();
    Value warpSize = b.create<arith::ConstantIndexOp>(loc, warp::kWarpSize);
    threadLoop(blockMap, [&](OpBuilder &tb, const IRMapping &map, Value t) {
      Value lane = tb.create<arith::RemUIOp>(loc, t, warpSize);
      Value entry = tb.create<memref::LoadOp>(loc, table, lane);
      Value c5 = tb.create<arith::ConstantIntOp>(loc, 5, 32);
      Value c31 = tb.create<arith::ConstantIntOp>(loc, 31, 32);
      Value source = tb.create<arith::IndexCastOp>(
          loc, tb.getIndexType(), tb.create<arith::AndIOp>(loc, entry, c31));
      Value valid = tb.create<arith::TruncIOp>(
          loc, tb.getI1Type(), tb.create<arith::ShRUIOp>(loc, entry, c5));
      // A lane past the end of a partial last warp reads nothing.
      Value from = tb.create<arith::AddIOp>(
          loc, tb.create<arith::SubIOp>(loc, t, lane), source);
      valid = tb.create<arith::AndIOp>(
          loc, valid,
          tb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, from,
                                   threads));
      from = tb.create<arith::SelectOp>(loc, valid, from, t);
      Value value;
      if (crossing.contains(input))
        value = tb.create<memref::LoadOp>(loc, slots[input], from);
      else
        value = map.lookupOrDefault(input);
      Value results[] = {value, valid};
      for (auto [r, v] : llvm::zip(shuffle.getResults(), results))
        if (crossing.contains(r))
          tb.create<memref::StoreOp>(loc, v, slots[r], t);
    });
  }

  void emit(ArrayRef<Step> steps, IRMapping &blockMap) {
    for (const Step &step : steps) {
      if (step.shuffle) {
        emitShuffle(step.shuffle, blockMap);
        continue;
      }
      if (!step.loop) {
        // A barrier right after another, or after a loop, leaves nothing
        // to run.
        if (step.phase.empty())
          continue;
        threadLoop(blockMap, [&](OpBuilder &tb, const IRMapping &map, Value t) {
          clonePhase(tb, step.phase, map, t);
        });
        continue;
      }
      emitLoop(step, blockMap);
    }
  }

  /// A loop around barriers. Its last phase and the next iteration's first
  /// are not separated by a barrier, so each thread runs them together, as
  /// a GPU may: a tile buffer overwritten by the next iteration before the
  /// other threads have read it (a missing barrier at the loop's end) then
  /// shows in the result.
  void emitLoop(const Step &step, IRMapping &blockMap) {
    scf::ForOp loop = step.loop;
    Value lb = uniformAt(loop.getLowerBound(), blockMap);
    Value ub = uniformAt(loop.getUpperBound(), blockMap);
    Value st = uniformAt(loop.getStep(), blockMap);
    Value iv = loop.getInductionVar();
    ArrayRef<Step> body = step.body;
    ArrayRef<Operation *> first = body.front().phase;
    ArrayRef<Operation *> last = body.back().phase;
    ArrayRef<Step> middle = body.drop_front().drop_back();
    // The first phase of the first iteration.
    Value any = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, lb, ub);
    auto guard = b.create<scf::IfOp>(loc, any);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(guard.thenBlock()->getTerminator());
      IRMapping at = blockMap;
      at.map(iv, lb);
      threadLoop(at, [&](OpBuilder &tb, const IRMapping &map, Value t) {
        clonePhase(tb, first, map, t);
      });
    }
    auto outer = b.create<scf::ForOp>(loc, lb, ub, st);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(outer.getBody()->getTerminator());
    IRMapping inner = blockMap;
    Value k = outer.getInductionVar();
    inner.map(iv, k);
    emit(middle, inner);
    Value next = b.create<arith::AddIOp>(loc, k, st);
    Value more =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, next, ub);
    threadLoop(inner, [&](OpBuilder &tb, const IRMapping &map, Value t) {
      clonePhase(tb, last, map, t);
      auto then = tb.create<scf::IfOp>(loc, more);
      OpBuilder nb = OpBuilder::atBlockBegin(then.thenBlock());
      IRMapping following = map;
      following.map(iv, next);
      clonePhase(nb, first, following, t);
    });
  }

  LogicalResult run() {
    FailureOr<std::vector<Step>> steps = plan(launch.getBody().front());
    if (failed(steps))
      return failure();
    // Values that one phase defines and another uses, kept per thread.
    launch.getBody().walk([&](Operation *user) {
      auto at = phaseOf.find(user);
      if (at == phaseOf.end())
        return;
      for (Value v : user->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && phaseOf.count(def) && phaseOf[def] != at->second)
          crossing.insert(v);
      }
    });
    WalkResult direct = launch.getBody().walk([&](gpu::ShuffleOp shuffle) {
      Value input = shuffle.getValue();
      if (crossing.contains(input) || isUniform(input))
        return WalkResult::advance();
      shuffle.emitOpError()
          << "shuffles a thread id itself; the emulation reads the other "
             "lanes' values from what an earlier op computed";
      return WalkResult::interrupt();
    });
    if (direct.wasInterrupted())
      return failure();
    for (Value v : crossing)
      if (!v.getType().isIntOrIndexOrFloat() && !isa<VectorType>(v.getType()))
        return v.getDefiningOp()->emitOpError()
               << "defines a " << v.getType()
               << " that a later phase uses across a gpu.barrier; the "
                  "emulation keeps only scalars and vectors per thread";

    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    block = launch.getBlockSizeOperandValues();
    zero = b.create<arith::ConstantIndexOp>(loc, 0);
    one = b.create<arith::ConstantIndexOp>(loc, 1);
    threads = b.create<arith::MulIOp>(
        loc, b.create<arith::MulIOp>(loc, block.x, block.y), block.z);

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
    for (Value v : crossing)
      slots[v] = b.create<memref::AllocaOp>(
          loc, MemRefType::get({ShapedType::kDynamic}, v.getType()),
          ValueRange{threads});

    SmallVector<Value> lbs(3, zero), ubs{grid.z, grid.y, grid.x}, unit(3, one);
    scf::buildLoopNest(
        b, loc, lbs, ubs, unit, [&](OpBuilder &nb, Location, ValueRange ids) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          IRMapping blockMap;
          blockMap.map(launch.getBlockIds().x, ids[2]);
          blockMap.map(launch.getBlockIds().y, ids[1]);
          blockMap.map(launch.getBlockIds().z, ids[0]);
          blockMap.map(launch.getGridSize().x, grid.x);
          blockMap.map(launch.getGridSize().y, grid.y);
          blockMap.map(launch.getGridSize().z, grid.z);
          blockMap.map(launch.getBlockSize().x, block.x);
          blockMap.map(launch.getBlockSize().y, block.y);
          blockMap.map(launch.getBlockSize().z, block.z);
          // Workgroup memory starts each block poisoned.
          for (auto [arg, buffer] : workgroup) {
            auto type = cast<MemRefType>(buffer.getType());
            SmallVector<Value> extents;
            for (int64_t d : type.getShape())
              extents.push_back(b.create<arith::ConstantIndexOp>(loc, d));
            SmallVector<Value> from(extents.size(), zero),
                by(extents.size(), one);
            Value poison = poisonOf(b, loc, type.getElementType());
            scf::buildLoopNest(
                b, loc, from, extents, by,
                [&, buffer = buffer](OpBuilder &fb, Location, ValueRange ivs) {
                  fb.create<memref::StoreOp>(loc, poison, buffer, ivs);
                });
            blockMap.map(arg, buffer);
          }
          emit(*steps, blockMap);
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
