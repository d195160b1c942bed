//===- EmulateGPUKernels.cpp - tfm-emulate-gpu-kernels --------------------===//
//
// Runs GPU kernels on the CPU with the GPU's semantics between threads:
// serial loops over the threads would let a thread read shared memory that
// the others have not written yet, which a barrier exists to prevent, and
// cannot run an op that reads other lanes' registers at all. So the body is
// cut at each gpu.barrier and each warp collective into phases, and each
// phase runs for every thread of the block before the next begins. A value
// that one phase defines and a later one uses is kept per thread; a warp
// collective reads its lanes' values from there and computes what the PTX
// instruction computes (WarpSemantics.h). Workgroup memory is one buffer
// per block, filled with a poison pattern, so that a read before any write
// (a missing barrier) gives NaN or an out-of-pattern integer rather than a
// plausible value.
//
// Outlined kernels are put back at their launches first, so that what runs
// is the code the GPU runs: after outlining, the bf16 retyping and the
// distribution of the tensor-core tiles over the lanes.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/GPUEmulation/Emulation.h"
#include "tfm/Conversion/GPUEmulation/WarpSemantics.h"
#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>

namespace mlir::tfm {
#define GEN_PASS_DEF_EMULATEGPUKERNELSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The ops that read other lanes' registers, run for a whole warp at once.
bool isWarpCollective(Operation *op) {
  return isa<gpu::ShuffleOp, nvgpu::MmaSyncOp, nvgpu::LdMatrixOp>(op);
}

/// Whether `op` or anything nested in it waits for other threads: a
/// gpu.barrier, or a warp collective.
bool containsBarrier(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        return isa<gpu::BarrierOp>(nested) || isWarpCollective(nested)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Views that are the same for every thread (a stage's subview, a typed
/// view of dynamic shared memory) made again at each use, since the
/// emulation keeps no memrefs per thread across phases.
void rematerializeUniformViews(gpu::LaunchOp launch) {
  SmallVector<Operation *> views;
  launch.getBody().walk([&](Operation *op) {
    if (op->getNumResults() == 1 &&
        isa<MemRefType>(op->getResult(0).getType()) &&
        op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
        isLaunchUniform(launch, op->getResult(0)))
      views.push_back(op);
  });
  for (Operation *view : llvm::reverse(views)) {
    for (OpOperand &use : llvm::make_early_inc_range(view->getUses())) {
      OpBuilder b(use.getOwner());
      IRMapping map;
      use.set(uniformAt(b, launch, view->getResult(0), map));
    }
    view->erase();
  }
}

/// Dynamic shared memory as one more workgroup attribution of its bytes,
/// which the emulation then runs like the others: its size must be a
/// constant.
LogicalResult dynamicSharedMemoryAsAttribution(gpu::LaunchOp launch) {
  Value size = launch.getDynamicSharedMemorySize();
  if (!size)
    return success();
  std::optional<int64_t> bytes = getConstantIntValue(size);
  if (!bytes || *bytes < 0)
    return launch.emitOpError()
           << "takes dynamic shared memory of a size that is not a "
              "constant, which the emulation cannot allocate per block";
  auto type =
      MemRefType::get({*bytes}, IntegerType::get(launch.getContext(), 8),
                      MemRefLayoutAttrInterface(),
                      gpu::AddressSpaceAttr::get(launch.getContext(),
                                                 gpu::AddressSpace::Workgroup));
  Value buffer = launch.addWorkgroupAttribution(type, launch.getLoc());
  SmallVector<gpu::DynamicSharedMemoryOp> uses;
  launch.getBody().walk(
      [&](gpu::DynamicSharedMemoryOp op) { uses.push_back(op); });
  for (gpu::DynamicSharedMemoryOp op : uses) {
    OpBuilder b(op);
    op.replaceAllUsesWith(
        b.create<memref::CastOp>(op.getLoc(), op.getType(), buffer)
            .getResult());
    op.erase();
  }
  launch.getDynamicSharedMemorySizeMutable().clear();
  return success();
}

/// Views of workgroup buffers made inside `launch` (a pipeline stage's
/// subview) typed without the workgroup address space, as the per-block
/// buffers that the emulation puts in place of the attributions are.
void stripWorkgroupSpace(gpu::LaunchOp launch) {
  retypeValues(launch, [](Type t) -> Type {
    auto type = dyn_cast<MemRefType>(t);
    if (!type || !gpu::GPUDialect::hasWorkgroupMemoryAddressSpace(type))
      return Type();
    return MemRefType::get(type.getShape(), type.getElementType(),
                           type.getLayout());
  });
}

/// The mma.sync shape of `mma`, or none when the emulation (and the
/// kernels) use no such shape.
std::optional<warp::MmaShape> mmaShapeOf(nvgpu::MmaSyncOp mma) {
  std::array<int64_t, 3> shape = mma.getMmaShapeAsArray();
  if (shape == std::array<int64_t, 3>{16, 8, 16})
    return warp::MmaShape::M16N8K16;
  if (shape == std::array<int64_t, 3>{16, 8, 8})
    return warp::MmaShape::M16N8K8;
  if (shape == std::array<int64_t, 3>{16, 8, 4})
    return warp::MmaShape::M16N8K4;
  return std::nullopt;
}

/// The vector type in which a lane holds its fragment of `operand`:
/// registers of two 16-bit values, or of one f32 (tf32 operands); the
/// accumulators are pairs of f32.
VectorType fragmentType(warp::MmaShape shape, warp::MmaOperand operand,
                        Type element) {
  int64_t size = warp::fragmentSize(shape, operand);
  int64_t perRegister =
      operand == warp::MmaOperand::C || element.getIntOrFloatBitWidth() == 16
          ? 2
          : 1;
  return VectorType::get({size / perRegister, perRegister}, element);
}

/// A launch body as the emulation runs it: phases that run per thread,
/// separated by barriers and warp collectives, and uniform loops whose
/// bodies hold them, which run once per block with their own phases
/// inside.
struct Step {
  /// The phase's number, unique across the whole body.
  unsigned id = 0;
  /// The ops of a phase, run for every thread in turn.
  SmallVector<Operation *> phase;
  /// A loop around barriers, run once per block.
  scf::ForOp loop;
  std::vector<Step> body;
  /// Whether a loop holds a gpu.barrier, and so runs for the whole block,
  /// rather than only warp collectives.
  bool synchronizesBlock = false;
  /// Whether a gpu.barrier precedes the phase.
  bool afterBarrier = false;
  /// A warp collective, run once all the warp's lanes have computed its
  /// operands.
  Operation *collective = nullptr;
};

/// Whether `op` holds a gpu.barrier.
bool containsBlockBarrier(Operation *op) {
  return op->walk([](gpu::BarrierOp) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

/// The phase of a value that every phase reads from its slot: what a loop
/// around barriers carries from one iteration to the next.
constexpr unsigned kCarried = ~0u;

struct Emulator {
  gpu::LaunchOp launch;
  OpBuilder b;
  Location loc;
  /// The phase of each op placed in one, of each op nested in such an op,
  /// of each warp collective, and of the yield of each loop around
  /// barriers (the loop's last phase).
  DenseMap<Operation *, unsigned> phaseOf;
  unsigned numPhases = 0;
  /// The iteration arguments and results of loops around barriers, which
  /// share one slot each.
  DenseMap<Value, unsigned> carriedIndex;
  SmallVector<scf::ForOp> carryingLoops;
  SetVector<Value> crossing;
  DenseMap<Value, Value> slots;
  Value zero, one, threads, warpSize;
  /// The threads that the steps being emitted run for: the block's, or
  /// one warp's.
  Value rangeBegin, rangeEnd;
  /// What each warp's mma.sync gathers its lanes' fragments into.
  DenseMap<nvgpu::MmaSyncOp, SmallVector<Value, 3>> scratch;

  explicit Emulator(gpu::LaunchOp launch)
      : launch(launch), b(launch), loc(launch.getLoc()) {}

  bool isThreadId(Value v) {
    return llvm::is_contained(ValueRange{launch.getThreadIds().x,
                                         launch.getThreadIds().y,
                                         launch.getThreadIds().z},
                              v);
  }

  bool isUniform(Value v) { return isLaunchUniform(launch, v); }

  /// The phase that defines `v`, kCarried for what a loop around barriers
  /// carries, none for what every thread has at hand (values from outside,
  /// the launch's ids and sizes, a loop's induction variable).
  std::optional<unsigned> phaseOfValue(Value v) {
    if (carriedIndex.count(v))
      return kCarried;
    Operation *def = v.getDefiningOp();
    if (!def)
      return std::nullopt;
    auto at = phaseOf.find(def);
    if (at == phaseOf.end())
      return std::nullopt;
    return at->second;
  }

  LogicalResult checkCollective(Operation *op) {
    if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
      std::optional<int64_t> offset = getConstantIntValue(shuffle.getOffset());
      std::optional<int64_t> width = getConstantIntValue(shuffle.getWidth());
      if (!offset || !width || *width < 1 || *width > warp::kWarpSize)
        return op->emitOpError()
               << "takes an offset or width that is not a constant (width "
                  "1 to 32); the emulation reads its lanes from a table";
      return success();
    }
    if (auto mma = dyn_cast<nvgpu::MmaSyncOp>(op)) {
      std::optional<warp::MmaShape> shape = mmaShapeOf(mma);
      Type a = mma.getMatrixA().getType().getElementType();
      bool tf32 = a.isF32();
      bool supported =
          shape && (tf32 ? *shape != warp::MmaShape::M16N8K16
                         : a.isF16() && *shape == warp::MmaShape::M16N8K16);
      if (supported)
        supported =
            mma.getMatrixA().getType() ==
                fragmentType(*shape, warp::MmaOperand::A, a) &&
            mma.getMatrixB().getType() ==
                fragmentType(*shape, warp::MmaOperand::B, a) &&
            mma.getMatrixC().getType() ==
                fragmentType(*shape, warp::MmaOperand::C, b.getF32Type());
      if (!supported)
        return op->emitOpError()
               << "is not one of the emulated forms: m16n8k16 of f16 (or "
                  "bf16 held as f16) and m16n8k8 or m16n8k4 of tf32, into "
                  "f32 accumulators";
      return success();
    }
    auto load = cast<nvgpu::LdMatrixOp>(op);
    unsigned tiles = load.getNumTiles();
    auto type = load.getRes().getType();
    if ((tiles != 1 && tiles != 2 && tiles != 4) ||
        type.getElementTypeBitWidth() != 16 ||
        type.getShape() != ArrayRef<int64_t>{tiles, 2} ||
        load.getSrcMemref().getType().getRank() < 1)
      return op->emitOpError()
             << "is not an ldmatrix of 1, 2 or 4 matrices of 16-bit values "
                "into a vector<Nx2>, the form the emulation runs";
    return success();
  }

  /// Splits `ops` into steps, numbering the phases.
  FailureOr<std::vector<Step>> plan(Block &ops) {
    std::vector<Step> steps;
    // What follows a barrier, a collective or a loop around barriers.
    auto newPhase = [&](bool afterBarrier) {
      steps.emplace_back();
      steps.back().id = numPhases++;
      steps.back().afterBarrier = afterBarrier;
    };
    newPhase(true);
    for (Operation &op : ops.without_terminator()) {
      if (isa<gpu::BarrierOp>(op)) {
        newPhase(true);
        continue;
      }
      if (isWarpCollective(&op)) {
        if (failed(checkCollective(&op)))
          return failure();
        Step step;
        step.collective = &op;
        step.id = numPhases++;
        phaseOf[&op] = step.id;
        steps.push_back(std::move(step));
        newPhase(false);
        continue;
      }
      if (!containsBarrier(&op)) {
        steps.back().phase.push_back(&op);
        unsigned id = steps.back().id;
        op.walk([&](Operation *nested) { phaseOf[nested] = id; });
        continue;
      }
      auto loop = dyn_cast<scf::ForOp>(op);
      if (!loop)
        return op.emitOpError()
               << "holds a gpu.barrier or a warp collective inside its "
                  "regions; the emulation runs them at the top level of a "
                  "gpu.launch or in an scf.for";
      for (Value bound :
           {loop.getLowerBound(), loop.getUpperBound(), loop.getStep()})
        if (!isUniform(bound))
          return op.emitOpError()
                 << "runs around a gpu.barrier or a warp collective with "
                    "bounds that may differ between threads, which "
                    "deadlocks a GPU";
      for (auto [i, arg, result] :
           llvm::enumerate(loop.getRegionIterArgs(), loop.getResults())) {
        unsigned index = carriedIndex.size();
        carriedIndex[arg] = index;
        carriedIndex[result] = index;
      }
      carryingLoops.push_back(loop);
      Step step;
      step.loop = loop;
      step.synchronizesBlock = containsBlockBarrier(loop);
      FailureOr<std::vector<Step>> inner = plan(*loop.getBody());
      if (failed(inner))
        return failure();
      step.body = std::move(*inner);
      phaseOf[loop.getBody()->getTerminator()] = step.body.back().id;
      bool synchronizesBlock = step.synchronizesBlock;
      steps.push_back(std::move(step));
      newPhase(synchronizesBlock);
    }
    return steps;
  }

  /// The uniform `v` at block level: outside values as they are, launch
  /// arguments mapped, pure ops of the body cloned.
  Value uniformAt(Value v, IRMapping &blockMap) {
    return mlir::tfm::uniformAt(b, launch, v, blockMap);
  }

  /// Maps, for thread `t` at `tb`, the values that the phase `id` reads
  /// from their slots.
  void loadCrossing(OpBuilder &tb, IRMapping &map, unsigned id, Value t) {
    for (Value v : crossing)
      if (phaseOfValue(v) != id)
        map.map(v, tb.create<memref::LoadOp>(loc, slots[v], t));
  }

  /// Clones `step`'s ops for thread `t` at `tb`, reading the values that
  /// other phases defined from their slots and storing those that others
  /// use. `map` holds the thread's values afterwards.
  void clonePhase(OpBuilder &tb, const Step &step, IRMapping &map, Value t) {
    loadCrossing(tb, map, step.id, t);
    for (Operation *op : step.phase) {
      Operation *clone = tb.clone(*op, map);
      for (auto [r, c] : llvm::zip(op->getResults(), clone->getResults()))
        if (crossing.contains(r))
          tb.create<memref::StoreOp>(loc, c, slots[r], t);
    }
  }

  /// The warps of `count` threads, the last one partial. (Not
  /// arith.ceildivui, which the CPU's conversions do not lower.)
  Value warpsOf(Value count) {
    return b.create<arith::DivUIOp>(
        loc,
        b.create<arith::AddIOp>(
            loc, count,
            b.create<arith::ConstantIndexOp>(loc, warp::kWarpSize - 1)),
        warpSize);
  }

  /// Thread t is (t mod bx, t / bx mod by, t / (bx by)), x fastest, as the
  /// GPU numbers the lanes of its warps.
  void mapThread(OpBuilder &tb, IRMapping &map, Value t) {
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    Value tx = tb.create<arith::RemUIOp>(loc, t, block.x);
    Value rest = tb.create<arith::DivUIOp>(loc, t, block.x);
    Value ty = tb.create<arith::RemUIOp>(loc, rest, block.y);
    Value tz = tb.create<arith::DivUIOp>(loc, rest, block.y);
    map.map(launch.getThreadIds().x, tx);
    map.map(launch.getThreadIds().y, ty);
    map.map(launch.getThreadIds().z, tz);
  }

  /// A loop over the block's threads, whose body `body` builds with the
  /// thread's index and ids mapped.
  void threadLoop(const IRMapping &blockMap,
                  function_ref<void(OpBuilder &, IRMapping &, Value)> body) {
    auto loop = b.create<scf::ForOp>(loc, rangeBegin, rangeEnd, one);
    OpBuilder tb = OpBuilder::atBlockBegin(loop.getBody());
    Value t = loop.getInductionVar();
    IRMapping map = blockMap;
    mapThread(tb, map, t);
    body(tb, map, t);
  }

  /// Thread `t`'s value of a collective's operand `v`: from its slot, its
  /// id, or the same for every thread. (An op that computes a collective's
  /// operand sits in an earlier phase, so its result has a slot.)
  Value operandAt(OpBuilder &tb, Value v, Value t, const IRMapping &map) {
    if (crossing.contains(v))
      return tb.create<memref::LoadOp>(loc, slots[v], t);
    if (isThreadId(v)) {
      IRMapping ids;
      mapThread(tb, ids, t);
      return ids.lookup(v);
    }
    return map.lookupOrDefault(v);
  }

  /// A constant table of i32 entries, one per module and name.
  Value table(StringRef name, ArrayRef<int32_t> entries) {
    auto type = MemRefType::get({int64_t(entries.size())}, b.getI32Type());
    auto module = launch->getParentOfType<ModuleOp>();
    if (!module.lookupSymbol(name)) {
      OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
      mb.create<memref::GlobalOp>(
          loc, name, mb.getStringAttr("private"), type,
          DenseElementsAttr::get(
              RankedTensorType::get({int64_t(entries.size())}, b.getI32Type()),
              entries),
          /*constant=*/true, /*alignment=*/nullptr);
    }
    return b.create<memref::GetGlobalOp>(loc, type, name);
  }

  /// Entry `i` of a table of coordinates packed as `row << 8 | col`.
  std::pair<Value, Value> coordAt(OpBuilder &tb, Value table, Value i) {
    Value entry = tb.create<memref::LoadOp>(loc, table, i);
    auto index = [&](Value v) {
      return tb.create<arith::IndexCastOp>(loc, tb.getIndexType(), v);
    };
    Value row = tb.create<arith::ShRUIOp>(
        loc, entry, tb.create<arith::ConstantIntOp>(loc, 8, 32));
    Value col = tb.create<arith::AndIOp>(
        loc, entry, tb.create<arith::ConstantIntOp>(loc, 255, 32));
    return {index(row), index(col)};
  }

  /// Each lane's source lane of `shuffle`, and whether it is valid, as
  /// shfl.sync reads them where MLIR's lowering calls it: a table of 32
  /// entries `valid << 5 | lane`, from WarpSemantics.h.
  Value shuffleTable(gpu::ShuffleOp shuffle) {
    warp::ShuffleMode mode = warp::ShuffleMode::Xor;
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
    SmallVector<int32_t> entries;
    for (int lane = 0; lane < warp::kWarpSize; ++lane) {
      warp::ShuffleSource src = warp::shflSync(
          mode, lane, offset, warp::gpuShuffleClamp(mode, width));
      entries.push_back(int32_t(src.valid) << 5 | src.lane);
    }
    // One table per mode, offset and width, shared by every shuffle that
    // reads its lanes so.
    return table(llvm::formatv("__tfm_shuffle_lanes_{0}_{1}_{2}",
                               gpu::stringifyShuffleMode(shuffle.getMode()),
                               offset, width)
                     .str(),
                 entries);
  }

  /// Every thread reads its source lane's value, which the phases before
  /// have left in that thread's slot.
  void emitShuffle(gpu::ShuffleOp shuffle, const IRMapping &blockMap) {
    Value lanes = shuffleTable(shuffle);
    Value input = shuffle.getValue();
    threadLoop(blockMap, [&](OpBuilder &tb, IRMapping &map, Value t) {
      Value lane = tb.create<arith::RemUIOp>(loc, t, warpSize);
      Value entry = tb.create<memref::LoadOp>(loc, lanes, lane);
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
      Value value = operandAt(tb, input, from, map);
      Value results[] = {value, valid};
      for (auto [r, v] : llvm::zip(shuffle.getResults(), results))
        if (crossing.contains(r))
          tb.create<memref::StoreOp>(loc, v, slots[r], t);
    });
  }

  /// The table of where each lane's fragment elements lie in `operand`,
  /// `row << 8 | col` at lane * size + element.
  Value fragmentTable(warp::MmaShape shape, warp::MmaOperand operand) {
    int size = warp::fragmentSize(shape, operand);
    SmallVector<int32_t> entries;
    for (int lane = 0; lane < warp::kWarpSize; ++lane)
      for (int i = 0; i < size; ++i) {
        warp::Coord c = warp::fragmentCoord(shape, operand, lane, i);
        entries.push_back(c.row << 8 | c.col);
      }
    static const char *shapes[] = {"m16n8k16", "m16n8k8", "m16n8k4"};
    static const char *operands[] = {"a", "b", "c"};
    return table(llvm::formatv("__tfm_mma_fragment_{0}_{1}", shapes[int(shape)],
                               operands[int(operand)])
                     .str(),
                 entries);
  }

  /// A fragment element as the tensor cores read it, in f32: bf16 held as
  /// f16 patterns (tfm-retype-bf16-tiles) is bf16; an f32 operand is read
  /// as tf32, the low 13 bits of its mantissa ignored.
  Value operandValue(OpBuilder &tb, Value element, Type mmaType) {
    Type f32 = tb.getF32Type();
    if (element.getType().isF32()) {
      Value bits = tb.create<arith::BitcastOp>(loc, tb.getI32Type(), element);
      Value kept = tb.create<arith::AndIOp>(
          loc, bits,
          tb.create<arith::ConstantIntOp>(loc, int32_t(0xffffe000), 32));
      return tb.create<arith::BitcastOp>(loc, f32, kept);
    }
    if (mmaType && mmaType.isBF16())
      element = tb.create<arith::BitcastOp>(loc, mmaType, element);
    return tb.create<arith::ExtFOp>(loc, f32, element);
  }

  /// The warp's operands gathered into whole matrices in f32, multiplied
  /// with the accumulator added (the products of 16-bit and tf32 values are
  /// exact in f32), and the result handed back to each lane as its D
  /// fragment. A lane missing from a partial warp leaves NaN.
  void emitMma(nvgpu::MmaSyncOp mma, IRMapping &blockMap) {
    warp::MmaShape shape = *mmaShapeOf(mma);
    auto typeAttr = mma->getAttrOfType<TypeAttr>(kMmaOperandTypeAttrName);
    if (!typeAttr)
      typeAttr = launch->getAttrOfType<TypeAttr>(kMmaOperandTypeAttrName);
    Type mmaType = typeAttr ? typeAttr.getValue() : Type();
    const SmallVector<Value, 3> &mats = scratch.lookup(mma);
    Value nan = emulatedPoison(b, loc, b.getF32Type());
    warp::MmaOperand which[] = {warp::MmaOperand::A, warp::MmaOperand::B,
                                warp::MmaOperand::C};
    Value operands[] = {mma.getMatrixA(), mma.getMatrixB(), mma.getMatrixC()};
    Value tables[3];
    for (int o = 0; o < 3; ++o)
      tables[o] = fragmentTable(shape, which[o]);
    auto warpLoop = b.create<scf::ForOp>(
        loc, b.create<arith::DivUIOp>(loc, rangeBegin, warpSize),
        warpsOf(rangeEnd), one);
    OpBuilder wb = OpBuilder::atBlockBegin(warpLoop.getBody());
    Value base =
        wb.create<arith::MulIOp>(loc, warpLoop.getInductionVar(), warpSize);
    for (Value mat : mats) {
      auto type = cast<MemRefType>(mat.getType());
      SmallVector<Value> from(2, zero), by(2, one);
      SmallVector<Value> to{
          wb.create<arith::ConstantIndexOp>(loc, type.getDimSize(0)),
          wb.create<arith::ConstantIndexOp>(loc, type.getDimSize(1))};
      scf::buildLoopNest(wb, loc, from, to, by,
                         [&](OpBuilder &fb, Location, ValueRange ivs) {
                           fb.create<memref::StoreOp>(loc, nan, mat, ivs);
                         });
    }
    // Each lane's fragments into the matrices.
    auto lanes =
        [&](function_ref<void(OpBuilder &, IRMapping &, Value, Value)> body) {
          auto laneLoop = wb.create<scf::ForOp>(loc, zero, warpSize, one);
          OpBuilder lb = OpBuilder::atBlockBegin(laneLoop.getBody());
          Value lane = laneLoop.getInductionVar();
          Value t = lb.create<arith::AddIOp>(loc, base, lane);
          auto present = lb.create<scf::IfOp>(
              loc, lb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, t,
                                            threads));
          OpBuilder pb = OpBuilder::atBlockBegin(present.thenBlock());
          IRMapping map = blockMap;
          mapThread(pb, map, t);
          body(pb, map, lane, t);
        };
    lanes([&](OpBuilder &pb, IRMapping &map, Value lane, Value t) {
      for (int o = 0; o < 3; ++o) {
        Value fragment = operandAt(pb, operands[o], t, map);
        auto type = cast<VectorType>(fragment.getType());
        int64_t size = type.getNumElements(), perRegister = type.getDimSize(1);
        Value first = pb.create<arith::MulIOp>(
            loc, lane, pb.create<arith::ConstantIndexOp>(loc, size));
        for (int64_t i = 0; i < size; ++i) {
          Value element = pb.create<vector::ExtractOp>(
              loc, fragment,
              ArrayRef<int64_t>{i / perRegister, i % perRegister});
          Value value = o == 2 ? element : operandValue(pb, element, mmaType);
          auto [row, col] = coordAt(
              pb, tables[o],
              pb.create<arith::AddIOp>(
                  loc, first, pb.create<arith::ConstantIndexOp>(loc, i)));
          pb.create<memref::StoreOp>(loc, value, mats[o], ValueRange{row, col});
        }
      }
    });
    // C += A B, into C.
    {
      int64_t k = warp::mmaK(shape);
      SmallVector<Value> from(2, zero), by(2, one);
      SmallVector<Value> to{
          wb.create<arith::ConstantIndexOp>(loc, warp::mmaM(shape)),
          wb.create<arith::ConstantIndexOp>(loc, warp::mmaN(shape))};
      Value kEnd = wb.create<arith::ConstantIndexOp>(loc, k);
      scf::buildLoopNest(
          wb, loc, from, to, by, [&](OpBuilder &nb, Location, ValueRange ivs) {
            Value init = nb.create<memref::LoadOp>(loc, mats[2], ivs);
            auto sum =
                nb.create<scf::ForOp>(loc, zero, kEnd, one, ValueRange{init});
            OpBuilder kb = OpBuilder::atBlockBegin(sum.getBody());
            Value kk = sum.getInductionVar();
            Value a =
                kb.create<memref::LoadOp>(loc, mats[0], ValueRange{ivs[0], kk});
            Value bv =
                kb.create<memref::LoadOp>(loc, mats[1], ValueRange{kk, ivs[1]});
            Value acc =
                kb.create<arith::AddFOp>(loc, sum.getRegionIterArgs()[0],
                                         kb.create<arith::MulFOp>(loc, a, bv));
            kb.create<scf::YieldOp>(loc, acc);
            nb.create<memref::StoreOp>(loc, sum.getResult(0), mats[2], ivs);
          });
    }
    // Each lane's D fragment out of C.
    lanes([&](OpBuilder &pb, IRMapping &, Value lane, Value t) {
      auto type = cast<VectorType>(mma.getType());
      int64_t size = type.getNumElements(), perRegister = type.getDimSize(1);
      Value result = pb.create<arith::ConstantOp>(loc, pb.getZeroAttr(type));
      Value first = pb.create<arith::MulIOp>(
          loc, lane, pb.create<arith::ConstantIndexOp>(loc, size));
      for (int64_t i = 0; i < size; ++i) {
        auto [row, col] =
            coordAt(pb, tables[2],
                    pb.create<arith::AddIOp>(
                        loc, first, pb.create<arith::ConstantIndexOp>(loc, i)));
        Value value =
            pb.create<memref::LoadOp>(loc, mats[2], ValueRange{row, col});
        result = pb.create<vector::InsertOp>(
            loc, value, result,
            ArrayRef<int64_t>{i / perRegister, i % perRegister});
      }
      if (crossing.contains(mma.getResult()))
        pb.create<memref::StoreOp>(loc, result, slots[mma.getResult()], t);
    });
  }

  /// Each lane receives, from every matrix j, the elements that
  /// ldmatrixCoord gives it, from the row whose address lane
  /// ldmatrixAddressLane(j, row) gives: its indices, the last one advanced
  /// by the column.
  void emitLdMatrix(nvgpu::LdMatrixOp load, IRMapping &blockMap) {
    bool transpose = load.getTranspose();
    SmallVector<int32_t> entries;
    for (int lane = 0; lane < warp::kWarpSize; ++lane)
      for (int e = 0; e < 2; ++e) {
        warp::Coord c = warp::ldmatrixCoord(lane, e, transpose);
        entries.push_back(c.row << 8 | c.col);
      }
    Value coords = table(transpose ? "__tfm_ldmatrix_elements_trans"
                                   : "__tfm_ldmatrix_elements",
                         entries);
    Value memory = uniformAt(load.getSrcMemref(), blockMap);
    auto type = cast<VectorType>(load.getType());
    Value nan = emulatedPoison(b, loc, type.getElementType());
    threadLoop(blockMap, [&](OpBuilder &tb, IRMapping &map, Value t) {
      Value lane = tb.create<arith::RemUIOp>(loc, t, warpSize);
      Value base = tb.create<arith::SubIOp>(loc, t, lane);
      Value result = tb.create<arith::ConstantOp>(loc, tb.getZeroAttr(type));
      for (int64_t j = 0; j < type.getDimSize(0); ++j)
        for (int64_t e = 0; e < 2; ++e) {
          Value at = tb.create<arith::AddIOp>(
              loc,
              tb.create<arith::MulIOp>(
                  loc, lane, tb.create<arith::ConstantIndexOp>(loc, 2)),
              tb.create<arith::ConstantIndexOp>(loc, e));
          auto [row, col] = coordAt(tb, coords, at);
          // The lane that gives the row's address: 8 j + row.
          Value source = tb.create<arith::AddIOp>(
              loc, base,
              tb.create<arith::AddIOp>(
                  loc, tb.create<arith::ConstantIndexOp>(loc, 8 * j), row));
          Value present = tb.create<arith::CmpIOp>(
              loc, arith::CmpIPredicate::ult, source, threads);
          auto read = tb.create<scf::IfOp>(
              loc, TypeRange{type.getElementType()}, present,
              /*withElseRegion=*/true);
          {
            OpBuilder rb = read.getThenBodyBuilder();
            SmallVector<Value> indices;
            for (Value index : load.getIndices())
              indices.push_back(operandAt(rb, index, source, map));
            indices.back() = rb.create<arith::AddIOp>(loc, indices.back(), col);
            rb.create<scf::YieldOp>(
                loc,
                rb.create<memref::LoadOp>(loc, memory, indices).getResult());
            OpBuilder eb = read.getElseBodyBuilder();
            eb.create<scf::YieldOp>(loc, nan);
          }
          result = tb.create<vector::InsertOp>(loc, read.getResult(0), result,
                                               ArrayRef<int64_t>{j, e});
        }
      if (crossing.contains(load.getResult()))
        tb.create<memref::StoreOp>(loc, result, slots[load.getResult()], t);
    });
  }

  /// Runs `steps` for the threads of the current range, which are those of
  /// one warp when `inWarp`. Otherwise the steps between two barriers that
  /// hold warp collectives run warp by warp: a collective waits for its own
  /// warp's lanes only, so one warp's collective runs before the next warp
  /// has begun, and a read of what another warp writes before the barrier
  /// that orders them shows, as on a GPU it may.
  void emit(ArrayRef<Step> steps, IRMapping &blockMap, bool inWarp) {
    for (size_t i = 0; i < steps.size();) {
      const Step &step = steps[i];
      if (inWarp || (step.loop && step.synchronizesBlock)) {
        emitStep(step, blockMap);
        ++i;
        continue;
      }
      size_t end = i + 1;
      while (end < steps.size() && !steps[end].afterBarrier &&
             !(steps[end].loop && steps[end].synchronizesBlock))
        ++end;
      ArrayRef<Step> segment = steps.slice(i, end - i);
      i = end;
      bool warpwise = llvm::any_of(
          segment, [](const Step &s) { return s.collective || s.loop; });
      if (!warpwise) {
        for (const Step &s : segment)
          emitStep(s, blockMap);
        continue;
      }
      Value begin = rangeBegin, end_ = rangeEnd;
      auto warpLoop = b.create<scf::ForOp>(loc, zero, warpsOf(threads), one);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(warpLoop.getBody()->getTerminator());
      rangeBegin =
          b.create<arith::MulIOp>(loc, warpLoop.getInductionVar(), warpSize);
      rangeEnd = b.create<arith::MinUIOp>(
          loc, b.create<arith::AddIOp>(loc, rangeBegin, warpSize), threads);
      for (const Step &s : segment)
        emitStep(s, blockMap);
      rangeBegin = begin;
      rangeEnd = end_;
    }
  }

  void emitStep(const Step &step, IRMapping &blockMap) {
    if (step.collective) {
      if (auto shuffle = dyn_cast<gpu::ShuffleOp>(step.collective))
        emitShuffle(shuffle, blockMap);
      else if (auto mma = dyn_cast<nvgpu::MmaSyncOp>(step.collective))
        emitMma(mma, blockMap);
      else
        emitLdMatrix(cast<nvgpu::LdMatrixOp>(step.collective), blockMap);
      return;
    }
    if (step.loop) {
      emitLoop(step, blockMap);
      return;
    }
    // A barrier right after another, or after a loop, leaves nothing to
    // run.
    if (step.phase.empty())
      return;
    threadLoop(blockMap, [&](OpBuilder &tb, IRMapping &map, Value t) {
      clonePhase(tb, step, map, t);
    });
  }

  /// A loop around barriers or collectives. What it carries lives in slots,
  /// its iteration arguments and results sharing one per value. Its last
  /// phase and the next iteration's first are not separated by a barrier,
  /// so each thread runs them together, as a GPU may: a tile buffer
  /// overwritten by the next iteration before the other threads have read
  /// it (a missing barrier at the loop's end) then shows in the result.
  void emitLoop(const Step &step, IRMapping &blockMap) {
    scf::ForOp loop = step.loop;
    Value lb = uniformAt(loop.getLowerBound(), blockMap);
    Value ub = uniformAt(loop.getUpperBound(), blockMap);
    Value st = uniformAt(loop.getStep(), blockMap);
    Value iv = loop.getInductionVar();
    ArrayRef<Step> body = step.body;
    const Step &first = body.front();
    const Step &last = body.back();
    ArrayRef<Step> middle = body.drop_front().drop_back();
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    if (loop.getNumRegionIterArgs() != 0)
      threadLoop(blockMap, [&](OpBuilder &tb, IRMapping &map, Value t) {
        for (auto [init, arg] :
             llvm::zip(loop.getInitArgs(), loop.getRegionIterArgs()))
          tb.create<memref::StoreOp>(loc, operandAt(tb, init, t, map),
                                     slots[arg], t);
      });
    // The first phase of the first iteration.
    Value any = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, lb, ub);
    auto guard = b.create<scf::IfOp>(loc, any);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(guard.thenBlock()->getTerminator());
      IRMapping at = blockMap;
      at.map(iv, lb);
      threadLoop(at, [&](OpBuilder &tb, IRMapping &map, Value t) {
        clonePhase(tb, first, map, t);
      });
    }
    auto outer = b.create<scf::ForOp>(loc, lb, ub, st);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPoint(outer.getBody()->getTerminator());
    IRMapping inner = blockMap;
    Value k = outer.getInductionVar();
    inner.map(iv, k);
    // A loop around collectives only runs within its warp's range; one
    // around barriers starts each iteration's body for the whole block.
    emit(middle, inner, /*inWarp=*/!step.synchronizesBlock);
    Value next = b.create<arith::AddIOp>(loc, k, st);
    Value more =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, next, ub);
    threadLoop(inner, [&](OpBuilder &tb, IRMapping &map, Value t) {
      clonePhase(tb, last, map, t);
      // The carried values, before the next iteration reads them.
      for (auto [value, arg] :
           llvm::zip(yield.getOperands(), loop.getRegionIterArgs()))
        tb.create<memref::StoreOp>(loc, map.lookupOrDefault(value), slots[arg],
                                   t);
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
    // What a loop around barriers starts from and carries is always.
    for (scf::ForOp loop : carryingLoops) {
      crossing.insert(loop.getRegionIterArgs().begin(),
                      loop.getRegionIterArgs().end());
      for (Value init : loop.getInitArgs())
        if (phaseOfValue(init))
          crossing.insert(init);
    }
    launch.getBody().walk([&](Operation *user) {
      auto at = phaseOf.find(user);
      if (at == phaseOf.end())
        return;
      for (Value v : user->getOperands()) {
        std::optional<unsigned> phase = phaseOfValue(v);
        if (phase && *phase != at->second)
          crossing.insert(v);
      }
    });
    for (Value v : crossing)
      if (!v.getType().isIntOrIndexOrFloat() && !isa<VectorType>(v.getType())) {
        Operation *at = v.getDefiningOp();
        if (!at)
          at = v.getParentBlock()->getParentOp();
        return at->emitOpError()
               << "defines a " << v.getType()
               << " that a later phase uses across a gpu.barrier or a warp "
                  "collective; the emulation keeps only scalars and vectors "
                  "per thread";
      }

    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    zero = b.create<arith::ConstantIndexOp>(loc, 0);
    one = b.create<arith::ConstantIndexOp>(loc, 1);
    warpSize = b.create<arith::ConstantIndexOp>(loc, warp::kWarpSize);
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
               loc, MemRefType::get(type.getShape(), type.getElementType()),
               b.getI64IntegerAttr(kWorkgroupAlignment))});
    }
    DenseMap<unsigned, Value> carriedSlots;
    for (Value v : crossing) {
      auto index = carriedIndex.find(v);
      Value &slot =
          index == carriedIndex.end() ? slots[v] : carriedSlots[index->second];
      if (!slot)
        slot = b.create<memref::AllocaOp>(
            loc, MemRefType::get({ShapedType::kDynamic}, v.getType()),
            ValueRange{threads});
      slots[v] = slot;
    }
    launch.getBody().walk([&](nvgpu::MmaSyncOp mma) {
      warp::MmaShape shape = *mmaShapeOf(mma);
      int64_t m = warp::mmaM(shape), n = warp::mmaN(shape),
              k = warp::mmaK(shape);
      for (auto [rows, cols] : {std::pair{m, k}, {k, n}, {m, n}})
        scratch[mma].push_back(b.create<memref::AllocaOp>(
            loc, MemRefType::get({rows, cols}, b.getF32Type())));
    });

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
            Value poison = emulatedPoison(b, loc, type.getElementType());
            scf::buildLoopNest(
                b, loc, from, extents, by,
                [&, buffer = buffer](OpBuilder &fb, Location, ValueRange ivs) {
                  fb.create<memref::StoreOp>(loc, poison, buffer, ivs);
                });
            blockMap.map(arg, buffer);
          }
          rangeBegin = zero;
          rangeEnd = threads;
          emit(*steps, blockMap, /*inWarp=*/false);
        });
    launch.erase();
    return success();
  }
};

/// Puts the kernel that `call` launches back at the call, as the gpu.launch
/// it was outlined from: its arguments mapped to the call's operands, its
/// ids and sizes to the launch's.
FailureOr<gpu::LaunchOp> inlineKernel(gpu::LaunchFuncOp call,
                                      SymbolTableCollection &symbols) {
  auto kernel =
      symbols.lookupNearestSymbolFrom<gpu::GPUFuncOp>(call, call.getKernel());
  if (!kernel)
    return call.emitOpError()
           << "launches " << call.getKernel() << ", which is not a gpu.func";
  if (call.getAsyncToken() || !call.getAsyncDependencies().empty() ||
      call.hasClusterSize())
    return call.emitOpError()
           << "is asynchronous, or takes clusters, which the emulation does "
              "not run yet";
  if (kernel.getNumPrivateAttributions() != 0 ||
      !kernel.getBody().hasOneBlock())
    return kernel.emitOpError()
           << "has private attributions or several blocks; the emulation "
              "runs structured kernels with workgroup memory only";
  OpBuilder b(call);
  Location loc = call.getLoc();
  SmallVector<Type> workgroup;
  for (BlockArgument arg : kernel.getWorkgroupAttributions())
    workgroup.push_back(arg.getType());
  gpu::KernelDim3 grid = call.getGridSizeOperandValues();
  gpu::KernelDim3 block = call.getBlockSizeOperandValues();
  auto launch = b.create<gpu::LaunchOp>(
      loc, grid.x, grid.y, grid.z, block.x, block.y, block.z,
      call.getDynamicSharedMemorySize(), /*asyncTokenType=*/nullptr,
      ValueRange{}, workgroup);
  if (Attribute type = kernel->getAttr(kMmaOperandTypeAttrName))
    launch->setAttr(kMmaOperandTypeAttrName, type);
  IRMapping map;
  for (auto [arg, operand] :
       llvm::zip(kernel.getArguments(), call.getKernelOperands()))
    map.map(arg, operand);
  for (auto [from, to] : llvm::zip(kernel.getWorkgroupAttributions(),
                                   launch.getWorkgroupAttributions()))
    map.map(from, to);
  OpBuilder lb = OpBuilder::atBlockEnd(&launch.getBody().front());
  for (Operation &op : kernel.getBody().front()) {
    if (isa<gpu::ReturnOp>(op)) {
      lb.create<gpu::TerminatorOp>(loc);
      continue;
    }
    lb.clone(op, map);
  }
  auto pick = [](const gpu::KernelDim3 &dims, gpu::Dimension d) {
    return d == gpu::Dimension::x   ? dims.x
           : d == gpu::Dimension::y ? dims.y
                                    : dims.z;
  };
  SmallVector<Operation *> ids;
  launch.getBody().walk([&](Operation *op) {
    if (isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp>(
            op))
      ids.push_back(op);
  });
  for (Operation *op : ids) {
    Value with;
    if (auto id = dyn_cast<gpu::ThreadIdOp>(op))
      with = pick(launch.getThreadIds(), id.getDimension());
    else if (auto id = dyn_cast<gpu::BlockIdOp>(op))
      with = pick(launch.getBlockIds(), id.getDimension());
    else if (auto dim = dyn_cast<gpu::BlockDimOp>(op))
      with = pick(launch.getBlockSize(), dim.getDimension());
    else
      with =
          pick(launch.getGridSize(), cast<gpu::GridDimOp>(op).getDimension());
    op->getResult(0).replaceAllUsesWith(with);
    op->erase();
  }
  call.erase();
  return launch;
}

/// Drops the kernel's dead values before they are given slots: ops whose
/// results nothing uses (collectives aside, which are checked whatever
/// their use), then what loops carry to nothing. convert-vector-to-gpu
/// leaves each warp's vector.contract so, dead beside its mma.sync, with
/// its accumulator carried around the loop; the GPU's LLVM deletes them,
/// but kept here they would be slots per thread and the whole tile's
/// product computed in every lane.
void dropDeadValues(gpu::LaunchOp launch) {
  SmallVector<Operation *> dead;
  launch.getBody().walk<WalkOrder::PostOrder>([&](Operation *op) {
    if (!isWarpCollective(op) && isOpTriviallyDead(op))
      dead.push_back(op);
  });
  // Post-order puts users before what they use.
  for (Operation *op : dead)
    if (op->use_empty())
      op->erase();
  SmallVector<Operation *> loops;
  launch.getBody().walk([&](scf::ForOp loop) {
    if (loop.getNumRegionIterArgs() != 0)
      loops.push_back(loop);
  });
  if (loops.empty())
    return;
  RewritePatternSet patterns(launch.getContext());
  scf::ForOp::getCanonicalizationPatterns(patterns, launch.getContext());
  GreedyRewriteConfig config;
  config.strictMode = GreedyRewriteStrictness::ExistingOps;
  (void)applyOpPatternsAndFold(loops, std::move(patterns), config);
}

/// Each gpu.lane_id as the linear thread index modulo the warp size, where
/// it stands.
void replaceLaneIds(gpu::LaunchOp launch) {
  SmallVector<gpu::LaneIdOp> laneIds;
  launch.getBody().walk([&](gpu::LaneIdOp op) { laneIds.push_back(op); });
  for (gpu::LaneIdOp op : laneIds) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value linear = linearThreadIndex(b, loc, launch);
    op.replaceAllUsesWith(
        b.create<arith::RemUIOp>(
             loc, linear,
             b.create<arith::ConstantIndexOp>(loc, warp::kWarpSize))
            .getResult());
    op.erase();
  }
}

struct EmulateGPUKernelsPass
    : public mlir::tfm::impl::EmulateGPUKernelsPassBase<EmulateGPUKernelsPass> {
  void runOnOperation() override {
    Operation *root = getOperation();
    SymbolTableCollection symbols;
    SmallVector<gpu::LaunchFuncOp> calls;
    root->walk([&](gpu::LaunchFuncOp call) { calls.push_back(call); });
    for (gpu::LaunchFuncOp call : calls)
      if (failed(inlineKernel(call, symbols)))
        return signalPassFailure();
    // The kernels now run where they were launched.
    SmallVector<gpu::GPUModuleOp> modules;
    root->walk([&](gpu::GPUModuleOp module) { modules.push_back(module); });
    for (gpu::GPUModuleOp module : modules)
      module.erase();
    root->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());

    SmallVector<gpu::LaunchOp> launches;
    root->walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    for (gpu::LaunchOp launch : launches) {
      if (launch->getNumResults() != 0) {
        launch.emitOpError() << "is asynchronous, which the emulation does "
                                "not run yet";
        return signalPassFailure();
      }
      if (failed(dynamicSharedMemoryAsAttribution(launch)))
        return signalPassFailure();
      if (!launch.getBody().hasOneBlock()) {
        launch.emitOpError() << "has a body of several blocks; the emulation "
                                "runs structured control flow only";
        return signalPassFailure();
      }
      replaceLaneIds(launch);
      dropDeadValues(launch);
      // wgmma first: it checks the copies against the groups in flight.
      if (failed(emulateWarpgroupMma(launch)) ||
          failed(emulateAsyncCopies(launch)) ||
          failed(emulateTransactionBarriers(launch)))
        return signalPassFailure();
      stripWorkgroupSpace(launch);
      rematerializeUniformViews(launch);
      // What no emulation runs yet would otherwise fail far later, in the
      // CPU's conversions, without naming the kernel.
      WalkResult unknown = launch.getBody().walk([&](Operation *op) {
        Dialect *dialect = op->getDialect();
        bool gpuOp =
            dialect && isa<gpu::GPUDialect, nvgpu::NVGPUDialect>(dialect);
        if (!gpuOp || isa<gpu::BarrierOp, gpu::TerminatorOp>(op) ||
            isWarpCollective(op))
          return WalkResult::advance();
        op->emitOpError() << "is not run by the emulation of GPU kernels";
        return WalkResult::interrupt();
      });
      if (unknown.wasInterrupted())
        return signalPassFailure();
      if (failed(Emulator(launch).run()))
        return signalPassFailure();
    }
  }
};

} // namespace

Value mlir::tfm::emulatedPoison(OpBuilder &b, Location loc, Type element) {
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

Value mlir::tfm::linearThreadIndex(OpBuilder &b, Location loc,
                                   gpu::LaunchOp launch) {
  gpu::KernelDim3 ids = launch.getThreadIds();
  gpu::KernelDim3 size = launch.getBlockSize();
  return b.create<arith::AddIOp>(
      loc, ids.x,
      b.create<arith::MulIOp>(
          loc, size.x,
          b.create<arith::AddIOp>(
              loc, ids.y, b.create<arith::MulIOp>(loc, size.y, ids.z))));
}

void mlir::tfm::retypeValues(gpu::LaunchOp launch,
                             function_ref<Type(Type)> retyped) {
  auto retype = [&](Value v) {
    if (Type to = retyped(v.getType()))
      v.setType(to);
  };
  launch.getBody().walk([&](Operation *op) {
    for (Value r : op->getResults())
      retype(r);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          retype(arg);
  });
}

void mlir::tfm::switchOverCases(OpBuilder &b, Location loc, Value which,
                                int64_t cases,
                                function_ref<void(OpBuilder &, int64_t)> emit) {
  SmallVector<int64_t> values(cases);
  std::iota(values.begin(), values.end(), 0);
  auto dispatch =
      b.create<scf::IndexSwitchOp>(loc, TypeRange{}, which, values, cases);
  OpBuilder::atBlockBegin(&dispatch.getDefaultRegion().emplaceBlock())
      .create<scf::YieldOp>(loc);
  for (int64_t c = 0; c < cases; ++c) {
    OpBuilder cb =
        OpBuilder::atBlockBegin(&dispatch.getCaseRegions()[c].emplaceBlock());
    emit(cb, c);
    cb.create<scf::YieldOp>(loc);
  }
}

Value mlir::tfm::workgroupBufferOf(Value memref) {
  while (Operation *def = memref.getDefiningOp()) {
    if (auto view = dyn_cast<memref::SubViewOp>(def))
      memref = view.getSource();
    else if (auto view = dyn_cast<memref::ViewOp>(def))
      memref = view.getSource();
    else if (auto cast = dyn_cast<memref::CastOp>(def))
      memref = cast.getSource();
    else
      break;
  }
  auto arg = dyn_cast<BlockArgument>(memref);
  return arg && gpu::GPUDialect::hasWorkgroupMemoryAddressSpace(
                    cast<MemRefType>(arg.getType()))
             ? memref
             : Value();
}

Value mlir::tfm::flatView(OpBuilder &b, Location loc, Value buffer,
                          Type element) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getElementType() == element) {
    auto row =
        MemRefType::get({type.getNumElements()}, element,
                        MemRefLayoutAttrInterface(), type.getMemorySpace());
    return b.create<memref::ReinterpretCastOp>(
        loc, row, buffer, 0, row.getShape(), ArrayRef<int64_t>{1});
  }
  // Dynamic shared memory: bytes, viewed as the elements they hold.
  auto row = MemRefType::get(
      {type.getNumElements() * 8 / element.getIntOrFloatBitWidth()}, element,
      MemRefLayoutAttrInterface(), type.getMemorySpace());
  return b.create<memref::ViewOp>(
      loc, row, buffer, b.create<arith::ConstantIndexOp>(loc, 0), ValueRange{});
}

Value mlir::tfm::byteOffsetIn(OpBuilder &b, Location loc, Value view,
                              Value buffer) {
  // Followed view by view: MLIR 19's expand-strided-metadata reports a
  // memref.view's elements as starting where its source does, so the
  // strided metadata of a view of dynamic shared memory loses its shift.
  auto c = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); };
  Value bytes = c(0);
  while (view != buffer) {
    Operation *def = view.getDefiningOp();
    if (auto sub = dyn_cast_or_null<memref::SubViewOp>(def)) {
      auto source = cast<MemRefType>(sub.getSource().getType());
      SmallVector<int64_t> strides;
      int64_t offset;
      bool known = succeeded(getStridesAndOffset(source, strides, offset)) &&
                   llvm::none_of(strides, ShapedType::isDynamic);
      auto metadata = known ? memref::ExtractStridedMetadataOp()
                            : b.create<memref::ExtractStridedMetadataOp>(
                                  loc, sub.getSource());
      for (auto [d, at] : llvm::enumerate(sub.getMixedOffsets())) {
        Value stride = known ? c(strides[d]) : Value(metadata.getStrides()[d]);
        bytes = b.create<arith::AddIOp>(
            loc, bytes,
            b.create<arith::MulIOp>(
                loc,
                b.create<arith::MulIOp>(
                    loc, getValueOrCreateConstantIndexOp(b, loc, at), stride),
                c(source.getElementTypeBitWidth() / 8)));
      }
      view = sub.getSource();
    } else if (auto shifted = dyn_cast_or_null<memref::ViewOp>(def)) {
      bytes = b.create<arith::AddIOp>(loc, bytes, shifted.getByteShift());
      view = shifted.getSource();
    } else if (auto cast = dyn_cast_or_null<memref::CastOp>(def)) {
      view = cast.getSource();
    } else {
      break;
    }
  }
  return bytes;
}

bool mlir::tfm::isLaunchUniform(gpu::LaunchOp launch, Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    gpu::KernelDim3 ids = launch.getThreadIds();
    if (arg.getOwner() == &launch.getBody().front())
      return v != ids.x && v != ids.y && v != ids.z;
    // A loop's induction variable inside the launch varies; a function's
    // argument outside it does not.
    return !launch->isAncestor(arg.getOwner()->getParentOp());
  }
  Operation *def = v.getDefiningOp();
  if (!launch->isProperAncestor(def))
    return true;
  return def->getNumRegions() == 0 && isMemoryEffectFree(def) &&
         llvm::all_of(def->getOperands(),
                      [&](Value o) { return isLaunchUniform(launch, o); });
}

Value mlir::tfm::uniformAt(OpBuilder &b, gpu::LaunchOp launch, Value v,
                           IRMapping &map) {
  if (Value mapped = map.lookupOrNull(v))
    return mapped;
  Operation *def = v.getDefiningOp();
  if (!def || !launch->isProperAncestor(def))
    return v;
  for (Value o : def->getOperands())
    uniformAt(b, launch, o, map);
  Operation *clone = b.clone(*def, map);
  return clone->getResult(cast<OpResult>(v).getResultNumber());
}
