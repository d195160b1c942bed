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
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/GPUEmulation/Emulation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

struct TransactionBarriers {
  gpu::LaunchOp launch;
  Location loc;
  /// The state buffer of each mbarrier.create.
  DenseMap<Value, Value> states;

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
