//===- EmulateTransactionBarriers.cpp - mbarriers in the emulation --------===//
//
// An mbarrier counts the arrivals its current phase still waits for and
// the bytes of asynchronous transactions (TMA's copies) it still expects;
// when both reach zero the phase completes, the count of arrivals starts
// again, and the phase's number goes up by one. A thread waits for the
// phase of a given parity: the wait ends once that phase has completed,
// which is at once if it is the phase before the current one.
//
// The emulation keeps each barrier's state in a workgroup buffer of the
// block ([arrivals pending, arrivals expected, transaction bytes, phase]),
// and the ops update it as per-thread code. Since the emulation runs each
// phase of a body for every thread before the next, a wait becomes a
// gpu.barrier, so that the arrivals every thread makes before it in
// program order have happened, and then a check of the phase: a wait whose
// phase cannot have completed by then would never end on a GPU, and the
// emulation stops with a message instead of reading what was never
// written. The cost of that choice: every thread of the block must reach
// each wait, as a gpu.barrier requires (kernels of one warpgroup waiting
// while another produces are not run), and writes to workgroup memory made
// without an arrival become visible at the wait as if the barrier had
// covered them.
//
// A TMA load (nvgpu.tma.async.load) is in flight from its issue until the
// phase of its barrier completes, and what its destination holds in
// between is undefined. So the emulation poisons the destination at the
// issue, keeps a record of the load (which op, its barrier, the byte where
// its destination starts in its workgroup buffer, its coordinates), and copies
// at the latest moment allowed: a wait on its barrier, which then counts
// the box's bytes off the barrier's transactions. The copy reads the
// tensor map as the emulation's runtime writes it (EmulatedTensorMapWord),
// fills what lies outside the tensor with zeros, and places each 16-byte
// chunk of the box where the map's swizzle puts it.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/GPUEmulation/Emulation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The fields of a barrier's state.
enum Field : int64_t {
  kPending = 0,
  kExpected = 1,
  kTransactions = 2,
  kPhase = 3,
  kFields
};

/// A pending TMA load's record: its op, its barrier, the byte where its
/// destination starts in its workgroup buffer, then its coordinates.
enum Record : int64_t {
  kLoad = 0,
  kBarrier = 1,
  kStart = 2,
  kCoordinates = 3,
  kRecordWords = kCoordinates + kTensorMapMaxRank
};
/// How many loads a block keeps in flight before the emulation completes
/// its oldest, which the hardware may also do.
constexpr int64_t kPendingLoads = 32;

/// The byte offset `at` in a workgroup buffer, swizzled as TMA writes it:
/// the 16-byte chunk's index XORed with bits 7.. of the offset (the row of
/// 128 bytes within 1024), as many bits as the swizzle's width has chunks.
Value swizzled(OpBuilder &b, Location loc, Value at,
               nvgpu::TensorMapSwizzleKind kind) {
  int64_t bits = kind == nvgpu::TensorMapSwizzleKind::SWIZZLE_128B  ? 3
                 : kind == nvgpu::TensorMapSwizzleKind::SWIZZLE_64B ? 2
                 : kind == nvgpu::TensorMapSwizzleKind::SWIZZLE_32B ? 1
                                                                    : 0;
  if (bits == 0)
    return at;
  auto c = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); };
  Value row = b.create<arith::AndIOp>(
      loc, b.create<arith::ShRUIOp>(loc, at, c(7)), c((1 << bits) - 1));
  return b.create<arith::XOrIOp>(loc, at,
                                 b.create<arith::ShLIOp>(loc, row, c(4)));
}

struct TransactionBarriers {
  gpu::LaunchOp launch;
  Location loc;
  /// The state buffer of each mbarrier.create.
  DenseMap<Value, Value> states;
  /// The launch's TMA loads, and the block's records of those in flight
  /// with their count.
  SmallVector<nvgpu::TmaAsyncLoadOp> loads;
  Value records, count;

  explicit TransactionBarriers(gpu::LaunchOp launch)
      : launch(launch), loc(launch.getLoc()) {}

  Value index(OpBuilder &b, int64_t v) {
    return b.create<arith::ConstantIndexOp>(loc, v);
  }
  Value i64(OpBuilder &b, int64_t v) {
    return b.create<arith::ConstantIntOp>(loc, v, 64);
  }
  Value field(OpBuilder &b, Value state, Value barrier, Field f) {
    return b.create<memref::LoadOp>(loc, state,
                                    ValueRange{barrier, index(b, f)});
  }
  void setField(OpBuilder &b, Value state, Value barrier, Field f, Value v) {
    b.create<memref::StoreOp>(loc, v, state, ValueRange{barrier, index(b, f)});
  }
  Value asI64(OpBuilder &b, Value v) {
    return b.create<arith::IndexCastOp>(loc, b.getI64Type(), v);
  }

  /// The phase of `barrier` completes if it waits for nothing more: its
  /// arrivals start again and its number goes up.
  void completeIfDone(OpBuilder &b, Value state, Value barrier) {
    Value none = b.create<arith::AndIOp>(
        loc,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                field(b, state, barrier, kPending), i64(b, 0)),
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                field(b, state, barrier, kTransactions),
                                i64(b, 0)));
    auto done = b.create<scf::IfOp>(loc, none, /*withElseRegion=*/false);
    OpBuilder db = done.getThenBodyBuilder();
    setField(db, state, barrier, kPending,
             field(db, state, barrier, kExpected));
    setField(db, state, barrier, kPhase,
             db.create<arith::AddIOp>(loc, field(db, state, barrier, kPhase),
                                      i64(db, 1)));
  }

  /// `count` arrivals on `barrier`, completing its phase when `complete`.
  void arrive(OpBuilder &b, Value state, Value barrier, Value count,
              bool complete) {
    setField(b, state, barrier, kPending,
             b.create<arith::SubIOp>(loc, field(b, state, barrier, kPending),
                                     count));
    if (complete)
      completeIfDone(b, state, barrier);
  }

  /// Word `w` of the tensor map at `map` (an !llvm.ptr).
  Value mapWord(OpBuilder &b, Value map, int64_t w) {
    auto ptr = LLVM::LLVMPointerType::get(b.getContext());
    Value at = b.create<LLVM::GEPOp>(loc, ptr, b.getI64Type(), map,
                                     ArrayRef<LLVM::GEPArg>{int32_t(w)});
    Value word = b.create<LLVM::LoadOp>(loc, b.getI64Type(), at);
    return b.create<arith::IndexCastOp>(loc, b.getIndexType(), word);
  }

  /// Whether the emulation runs `load`; an error naming it otherwise.
  LogicalResult checkLoad(nvgpu::TmaAsyncLoadOp load) {
    if (load.getMulticastMask())
      return load.emitOpError()
             << "multicasts to a cluster, which the emulation does not run";
    auto box = load.getTensorMapDescriptor().getType().getTensor();
    if (box.getRank() > kTensorMapMaxRank ||
        int64_t(load.getCoordinates().size()) != box.getRank())
      return load.emitOpError()
             << "loads a box of rank " << box.getRank()
             << "; the emulation runs boxes of rank 1 to " << kTensorMapMaxRank
             << " with a coordinate per dimension";
    auto dst = load.getDst().getType();
    if (!workgroupBufferOf(load.getDst()) || dst.getShape() != box.getShape() ||
        !dst.getElementType().isIntOrFloat() ||
        dst.getElementType() != box.getElementType())
      return load.emitOpError()
             << "writes somewhere other than a box-shaped view of a "
                "workgroup buffer of the map's element type";
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(getStridesAndOffset(dst, strides, offset)) ||
        strides != computeSuffixProduct(dst.getShape()))
      return load.emitOpError()
             << "writes a view whose rows are not one after another, as "
                "TMA writes a box";
    Value map = load.getTensorMapDescriptor();
    auto cast = map.getDefiningOp<UnrealizedConversionCastOp>();
    if (!cast || cast->getNumOperands() != 1 ||
        !isa<LLVM::LLVMPointerType>(cast->getOperand(0).getType()) ||
        !isLaunchUniform(launch, map))
      return load.emitOpError()
             << "reads a tensor map that is not a pointer made outside the "
                "launch, as the emulation's runtime passes one";
    return success();
  }

  /// At the top of each block, thread 0 (the first to run) forgets the
  /// previous block's loads.
  void resetLoads() {
    OpBuilder b = OpBuilder::atBlockBegin(&launch.getBody().front());
    Value first =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                linearThreadIndex(b, loc, launch), index(b, 0));
    auto when = b.create<scf::IfOp>(loc, first, /*withElseRegion=*/false);
    OpBuilder wb = when.getThenBodyBuilder();
    wb.create<memref::StoreOp>(loc, index(wb, 0), count,
                               ValueRange{index(wb, 0)});
  }

  Value recordWord(OpBuilder &b, Value i, int64_t w) {
    Value word =
        b.create<memref::LoadOp>(loc, records, ValueRange{i, index(b, w)});
    return b.create<arith::IndexCastOp>(loc, b.getIndexType(), word);
  }

  /// The load of record `i` done now: the box from the tensor, zeros
  /// outside it, swizzled into the destination; its bytes counted off its
  /// barrier, which must expect them.
  void completeLoad(OpBuilder &b, Value i) {
    switchOverCases(
        b, loc, recordWord(b, i, kLoad), loads.size(),
        [&](OpBuilder &cb, int64_t c) {
          nvgpu::TmaAsyncLoadOp load = loads[c];
          IRMapping map;
          auto desc = load.getTensorMapDescriptor().getType();
          MemRefType box = desc.getTensor();
          Type element = box.getElementType();
          int64_t rank = box.getRank(),
                  bytes = element.getIntOrFloatBitWidth() / 8;
          Value tensorMap =
              uniformAt(cb, launch,
                        load.getTensorMapDescriptor()
                            .getDefiningOp<UnrealizedConversionCastOp>()
                            ->getOperand(0),
                        map);
          Value state = states.lookup(load.getBarriers());
          Value root =
              flatView(cb, loc, workgroupBufferOf(load.getDst()), element);
          Value start = recordWord(cb, i, kStart);
          Value base = mapWord(cb, tensorMap, kTensorMapBase);
          SmallVector<Value> zeros(rank, index(cb, 0)),
              ones(rank, index(cb, 1)), extents;
          for (int64_t d : box.getShape())
            extents.push_back(index(cb, d));
          scf::buildLoopNest(
              cb, loc, zeros, extents, ones,
              [&](OpBuilder &eb, Location, ValueRange at) {
                // The map counts its dimensions innermost first: its d is the
                // box's rank - 1 - d.
                Value inside = eb.create<arith::ConstantIntOp>(loc, 1, 1);
                Value address = base;
                for (int64_t d = 0; d < rank; ++d) {
                  Value coordinate = eb.create<arith::AddIOp>(
                      loc, recordWord(eb, i, kCoordinates + d),
                      at[rank - 1 - d]);
                  Value dim = mapWord(eb, tensorMap, kTensorMapDims + d);
                  inside = eb.create<arith::AndIOp>(
                      loc, inside,
                      eb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult,
                                               coordinate, dim));
                  Value stride = d == 0 ? index(eb, bytes)
                                        : mapWord(eb, tensorMap,
                                                  kTensorMapStrides + d - 1);
                  address = eb.create<arith::AddIOp>(
                      loc, address,
                      eb.create<arith::MulIOp>(loc, coordinate, stride));
                }
                auto read =
                    eb.create<scf::IfOp>(loc, TypeRange{element}, inside,
                                         /*withElseRegion=*/true);
                OpBuilder rb = read.getThenBodyBuilder();
                Value pointer = rb.create<LLVM::IntToPtrOp>(
                    loc, LLVM::LLVMPointerType::get(rb.getContext()),
                    rb.create<arith::IndexCastOp>(loc, rb.getI64Type(),
                                                  address));
                rb.create<scf::YieldOp>(
                    loc,
                    rb.create<LLVM::LoadOp>(loc, element, pointer).getResult());
                OpBuilder zb = read.getElseBodyBuilder();
                zb.create<scf::YieldOp>(loc, zb.create<arith::ConstantOp>(
                                                   loc, zb.getZeroAttr(element))
                                                 .getResult());
                // The element's byte in the buffer, swizzled.
                Value linear = index(eb, 0);
                for (int64_t d = 0; d < rank; ++d)
                  linear = eb.create<arith::AddIOp>(
                      loc,
                      eb.create<arith::MulIOp>(loc, linear,
                                               index(eb, box.getShape()[d])),
                      at[d]);
                Value byte = eb.create<arith::AddIOp>(
                    loc, start,
                    eb.create<arith::MulIOp>(loc, linear, index(eb, bytes)));
                Value to = eb.create<arith::DivUIOp>(
                    loc, swizzled(eb, loc, byte, desc.getSwizzle()),
                    index(eb, bytes));
                eb.create<memref::StoreOp>(loc, read.getResult(0), root, to);
              });
          Value barrier = recordWord(cb, i, kBarrier);
          Value left = cb.create<arith::SubIOp>(
              loc, field(cb, state, barrier, kTransactions),
              i64(cb, box.getNumElements() * bytes));
          cb.create<cf::AssertOp>(
              loc,
              cb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, left,
                                       i64(cb, 0)),
              "tfm-emulate-gpu-kernels: an nvgpu.tma.async.load completes more "
              "bytes than its barrier's phase expects (mbarrier.arrive."
              "expect_tx)");
          setField(cb, state, barrier, kTransactions, left);
          completeIfDone(cb, state, barrier);
        });
  }

  /// Completes the block's loads for which `done(i)` holds, in the order
  /// they were issued, and keeps the others in order.
  void retire(OpBuilder &b, function_ref<Value(OpBuilder &, Value)> done) {
    Value kept = retireRecords(
        b, loc, b.create<memref::LoadOp>(loc, count, ValueRange{index(b, 0)}),
        done, [&](OpBuilder &cb, Value i) { completeLoad(cb, i); },
        [&](OpBuilder &mb, Value from, Value to) {
          for (int64_t w = 0; w < kRecordWords; ++w)
            mb.create<memref::StoreOp>(
                loc,
                mb.create<memref::LoadOp>(loc, records,
                                          ValueRange{from, index(mb, w)}),
                records, ValueRange{to, index(mb, w)});
        });
    b.create<memref::StoreOp>(loc, kept, count, ValueRange{index(b, 0)});
  }

  /// Load `load` issued by this thread: its destination poisoned and a
  /// record kept, the oldest completed first when the list is full.
  void issue(OpBuilder &b, nvgpu::TmaAsyncLoadOp load, int64_t which) {
    Value n = b.create<memref::LoadOp>(loc, count, ValueRange{index(b, 0)});
    Value full = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, n,
                                         index(b, kPendingLoads));
    auto oldest = b.create<scf::IfOp>(loc, full, /*withElseRegion=*/false);
    {
      OpBuilder ob = oldest.getThenBodyBuilder();
      retire(ob, [&](OpBuilder &rb, Value i) {
        return rb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, i,
                                        index(rb, 0));
      });
    }
    MemRefType box = load.getDst().getType();
    Value poison = emulatedPoison(b, loc, box.getElementType());
    SmallVector<Value> zeros(box.getRank(), index(b, 0)),
        ones(box.getRank(), index(b, 1)), extents;
    for (int64_t d : box.getShape())
      extents.push_back(index(b, d));
    scf::buildLoopNest(b, loc, zeros, extents, ones,
                       [&](OpBuilder &pb, Location, ValueRange at) {
                         pb.create<memref::StoreOp>(loc, poison, load.getDst(),
                                                    at);
                       });
    n = b.create<memref::LoadOp>(loc, count, ValueRange{index(b, 0)});
    auto store = [&](Value v, int64_t w) {
      b.create<memref::StoreOp>(
          loc, b.create<arith::IndexCastOp>(loc, b.getI64Type(), v), records,
          ValueRange{n, index(b, w)});
    };
    store(index(b, which), kLoad);
    store(load.getMbarId(), kBarrier);
    store(byteOffsetIn(b, loc, load.getDst(), workgroupBufferOf(load.getDst())),
          kStart);
    for (auto [d, c] : llvm::enumerate(load.getCoordinates()))
      store(c, kCoordinates + d);
    b.create<memref::StoreOp>(loc, b.create<arith::AddIOp>(loc, n, index(b, 1)),
                              count, ValueRange{index(b, 0)});
  }

  /// `body` at `op`, under `predicate` when there is one.
  void guarded(OpBuilder &b, Value predicate,
               function_ref<void(OpBuilder &)> body) {
    if (!predicate)
      return body(b);
    auto when = b.create<scf::IfOp>(loc, predicate, /*withElseRegion=*/false);
    OpBuilder wb = when.getThenBodyBuilder();
    body(wb);
  }

  LogicalResult run() {
    // The groups first, so that every op finds its group's state.
    SmallVector<nvgpu::MBarrierCreateOp> creates;
    launch.getBody().walk(
        [&](nvgpu::MBarrierCreateOp c) { creates.push_back(c); });
    for (nvgpu::MBarrierCreateOp create : creates) {
      auto group = create.getBarriers().getType();
      if (!gpu::GPUDialect::hasWorkgroupMemoryAddressSpace(MemRefType::get(
              {1}, IntegerType::get(launch.getContext(), 64),
              MemRefLayoutAttrInterface(), group.getMemorySpace())))
        return create.emitOpError()
               << "creates barriers outside workgroup memory, which no GPU "
                  "has";
      auto type = MemRefType::get(
          {int64_t(group.getNumBarriers()), kFields},
          IntegerType::get(launch.getContext(), 64),
          MemRefLayoutAttrInterface(),
          gpu::AddressSpaceAttr::get(launch.getContext(),
                                     gpu::AddressSpace::Workgroup));
      states[create.getBarriers()] = launch.addWorkgroupAttribution(type, loc);
    }

    launch.getBody().walk([&](nvgpu::TmaAsyncLoadOp l) { loads.push_back(l); });
    for (nvgpu::TmaAsyncLoadOp load : loads)
      if (failed(checkLoad(load)))
        return failure();
    if (!loads.empty()) {
      OpBuilder b(launch);
      records = b.create<memref::AllocaOp>(
          loc, MemRefType::get({kPendingLoads, kRecordWords}, b.getI64Type()));
      count = b.create<memref::AllocaOp>(
          loc, MemRefType::get({1}, b.getIndexType()));
      resetLoads();
    }
    for (auto [which, load] : llvm::enumerate(loads)) {
      if (!states.lookup(load.getBarriers()))
        return load.emitOpError()
               << "names barriers that no nvgpu.mbarrier.create of its "
                  "launch makes, which the emulation cannot follow";
      OpBuilder b(load);
      guarded(b, load.getPredicate(),
              [&](OpBuilder &gb) { issue(gb, load, int64_t(which)); });
    }

    SmallVector<Operation *> ops;
    launch.getBody().walk([&](Operation *op) {
      if (isa<nvgpu::MBarrierInitOp, nvgpu::MBarrierArriveOp,
              nvgpu::MBarrierArriveNoCompleteOp,
              nvgpu::MBarrierArriveExpectTxOp, nvgpu::MBarrierTryWaitParityOp,
              nvgpu::MBarrierTestWaitOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      Value group = op->getOperand(0);
      auto state = states.lookup(group);
      if (!state)
        return op->emitOpError()
               << "names barriers that no nvgpu.mbarrier.create of its "
                  "launch makes, which the emulation cannot follow";
      OpBuilder b(op);
      LogicalResult done =
          TypeSwitch<Operation *, LogicalResult>(op)
              .Case([&](nvgpu::MBarrierInitOp init) -> LogicalResult {
                guarded(b, init.getPredicate(), [&](OpBuilder &gb) {
                  Value id = init.getMbarId();
                  Value count = asI64(gb, init.getCount());
                  setField(gb, state, id, kPending, count);
                  setField(gb, state, id, kExpected, count);
                  setField(gb, state, id, kTransactions, i64(gb, 0));
                  setField(gb, state, id, kPhase, i64(gb, 0));
                });
                return success();
              })
              .Case([&](nvgpu::MBarrierArriveOp arrive) -> LogicalResult {
                if (!arrive.getToken().use_empty())
                  return arrive.emitOpError()
                         << "has its token used; the emulation runs waits "
                            "by phase parity (mbarrier.try_wait.parity)";
                this->arrive(b, state, arrive.getMbarId(), i64(b, 1),
                             /*complete=*/true);
                return success();
              })
              .Case([&](nvgpu::MBarrierArriveNoCompleteOp arrive)
                        -> LogicalResult {
                if (!arrive.getToken().use_empty())
                  return arrive.emitOpError()
                         << "has its token used; the emulation runs waits "
                            "by phase parity (mbarrier.try_wait.parity)";
                this->arrive(b, state, arrive.getMbarId(),
                             asI64(b, arrive.getCount()),
                             /*complete=*/false);
                return success();
              })
              .Case(
                  [&](nvgpu::MBarrierArriveExpectTxOp expect) -> LogicalResult {
                    guarded(b, expect.getPredicate(), [&](OpBuilder &gb) {
                      Value id = expect.getMbarId();
                      setField(gb, state, id, kTransactions,
                               gb.create<arith::AddIOp>(
                                   loc, field(gb, state, id, kTransactions),
                                   asI64(gb, expect.getTxcount())));
                      this->arrive(gb, state, id, i64(gb, 1),
                                   /*complete=*/true);
                    });
                    return success();
                  })
              .Case([&](nvgpu::MBarrierTryWaitParityOp wait) -> LogicalResult {
                Operation *parent = wait->getParentOp();
                if (parent != launch.getOperation() && !isa<scf::ForOp>(parent))
                  return wait.emitOpError()
                         << "waits inside a region that not every thread "
                            "may enter; the emulation runs a wait that the "
                            "whole block reaches, at the top level of its "
                            "launch or in an scf.for";
                b.create<gpu::BarrierOp>(loc);
                Value id = wait.getMbarId();
                // The loads this wait may see land now.
                if (!loads.empty())
                  retire(b, [&](OpBuilder &rb, Value i) {
                    return rb.create<arith::CmpIOp>(
                        loc, arith::CmpIPredicate::eq,
                        recordWord(rb, i, kBarrier), id);
                  });
                Value phase = field(b, state, id, kPhase);
                Value parity =
                    b.create<arith::TruncIOp>(loc, b.getI1Type(), phase);
                // The phase of the parity waited for has completed when the
                // current phase has the other parity.
                Value over =
                    b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne,
                                            parity, wait.getPhaseParity());
                b.create<cf::AssertOp>(
                    loc, over,
                    "tfm-emulate-gpu-kernels: an nvgpu.mbarrier.try_wait."
                    "parity waits for a phase that nothing left in the "
                    "block can complete (too few arrivals or transaction "
                    "bytes, or the parity of a later phase); on a GPU the "
                    "kernel would hang");
                return success();
              })
              .Default([&](Operation *other) -> LogicalResult {
                return other->emitOpError()
                       << "is not run by the emulation of GPU kernels: it "
                          "runs waits by phase parity "
                          "(mbarrier.try_wait.parity)";
              });
      if (failed(done))
        return failure();
      op->erase();
    }
    for (nvgpu::TmaAsyncLoadOp load : loads)
      load.erase();
    for (nvgpu::MBarrierCreateOp create : creates) {
      if (!create.getBarriers().use_empty())
        return create.emitOpError()
               << "has barriers that flow elsewhere than into the "
                  "mbarrier ops the emulation runs";
      create.erase();
    }
    return success();
  }
};

} // namespace

LogicalResult mlir::tfm::emulateTransactionBarriers(gpu::LaunchOp launch) {
  return TransactionBarriers(launch).run();
}
