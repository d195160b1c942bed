//===- EmulateAsyncCopies.cpp - cp.async in the emulation of kernels ------===//
//
// A cp.async is in flight from its issue until a cp.async.wait_group
// retires its group, and a read of its destination in between may see the
// old contents or the new. So that such a read shows in a test, the
// emulation poisons the destination at the issue and copies at the latest
// moment the program allows, the wait: a kernel that waits for too few
// groups, or reads a stage before the wait that covers it, reads NaN.
//
// Each thread keeps a list of its pending copies: which copy op, its group
// (none until committed), how many elements it reads from the source, and
// its source and destination indices. The list lives in buffers allocated
// around the launch, one row per thread. The ops are rewritten in place,
// before the emulation cuts the body into phases, so the records are
// per-thread code like any other.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/GPUEmulation/Emulation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// A record's fields, then its source and its destination indices, padded
/// to the deepest rank of the launch's copies.
enum Field : int64_t { kCopy = 0, kGroup = 1, kSourceElements = 2, kIndices };
/// The group of a copy not yet committed: above any group number.
constexpr int64_t kUncommitted = int64_t(1) << 40;
/// A thread's state: how many records it holds, and how many groups it has
/// committed.
enum State : int64_t { kCount = 0, kCommitted = 1 };

struct AsyncCopies {
  gpu::LaunchOp launch;
  Location loc;
  SmallVector<nvgpu::DeviceAsyncCopyOp> copies;
  int64_t rank = 1;
  Value records, state;

  explicit AsyncCopies(gpu::LaunchOp launch)
      : launch(launch), loc(launch.getLoc()) {}

  Value constant(OpBuilder &b, int64_t v) {
    return b.create<arith::ConstantIndexOp>(loc, v);
  }

  /// The thread's row in the records.
  Value thread(OpBuilder &b) { return linearThreadIndex(b, loc, launch); }

  Value field(OpBuilder &b, Value t, Value i, int64_t f) {
    return b.create<memref::LoadOp>(loc, records,
                                    ValueRange{t, i, constant(b, f)});
  }
  void setField(OpBuilder &b, Value v, Value t, Value i, int64_t f) {
    b.create<memref::StoreOp>(loc, v, records,
                              ValueRange{t, i, constant(b, f)});
  }
  Value stateOf(OpBuilder &b, Value t, State s) {
    return b.create<memref::LoadOp>(loc, state, ValueRange{t, constant(b, s)});
  }
  void setState(OpBuilder &b, Value v, Value t, State s) {
    b.create<memref::StoreOp>(loc, v, state, ValueRange{t, constant(b, s)});
  }

  /// The copy of record `i` of thread `t`, done now: its source's elements,
  /// then zeros past the count it reads (cp.async's zero fill).
  void complete(OpBuilder &b, Value t, Value i) {
    Value which = field(b, t, i, kCopy);
    Value reads = field(b, t, i, kSourceElements);
    switchOverCases(
        b, loc, which, copies.size(), [&](OpBuilder &cb, int64_t c) {
          nvgpu::DeviceAsyncCopyOp copy = copies[c];
          IRMapping map;
          Value src = uniformAt(cb, launch, copy.getSrc(), map);
          Value dst = uniformAt(cb, launch, copy.getDst(), map);
          SmallVector<Value> from, to;
          for (size_t d = 0; d < copy.getSrcIndices().size(); ++d)
            from.push_back(field(cb, t, i, kIndices + d));
          for (size_t d = 0; d < copy.getDstIndices().size(); ++d)
            to.push_back(field(cb, t, i, kIndices + rank + d));
          Type element =
              cast<MemRefType>(copy.getDst().getType()).getElementType();
          auto elements = cb.create<scf::ForOp>(
              loc, constant(cb, 0),
              constant(cb, copy.getDstElements().getZExtValue()),
              constant(cb, 1));
          {
            OpBuilder eb = OpBuilder::atBlockBegin(elements.getBody());
            Value e = elements.getInductionVar();
            Value read = eb.create<arith::CmpIOp>(
                loc, arith::CmpIPredicate::ult, e, reads);
            auto value = eb.create<scf::IfOp>(loc, TypeRange{element}, read,
                                              /*withElseRegion=*/true);
            OpBuilder rb = value.getThenBodyBuilder();
            SmallVector<Value> at = from;
            at.back() = rb.create<arith::AddIOp>(loc, at.back(), e);
            rb.create<scf::YieldOp>(
                loc, rb.create<memref::LoadOp>(loc, src, at).getResult());
            OpBuilder zb = value.getElseBodyBuilder();
            zb.create<scf::YieldOp>(
                loc, zb.create<arith::ConstantOp>(loc, zb.getZeroAttr(element))
                         .getResult());
            at = to;
            at.back() = eb.create<arith::AddIOp>(loc, at.back(), e);
            eb.create<memref::StoreOp>(loc, value.getResult(0), dst, at);
          }
        });
  }

  /// Completes thread `t`'s records for which `retires` holds, in the order
  /// they were issued, and keeps the others in order.
  void retire(OpBuilder &b, Value t,
              function_ref<Value(OpBuilder &, Value, Value)> retires) {
    Value kept = retireRecords(
        b, loc, stateOf(b, t, kCount),
        [&](OpBuilder &rb, Value i) {
          return retires(rb, i, field(rb, t, i, kGroup));
        },
        [&](OpBuilder &cb, Value i) { complete(cb, t, i); },
        [&](OpBuilder &mb, Value from, Value to) {
          for (int64_t f = 0; f < kIndices + 2 * rank; ++f)
            setField(mb, field(mb, t, from, f), t, to, f);
        });
    setState(b, kept, t, kCount);
  }

  void rewriteCopy(nvgpu::DeviceAsyncCopyOp copy, int64_t which) {
    OpBuilder b(copy);
    Value t = thread(b);
    // A full list completes its oldest copy first.
    Value full = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge,
                                         stateOf(b, t, kCount),
                                         constant(b, kEmulatedPendingCopies));
    auto ifFull = b.create<scf::IfOp>(loc, full);
    {
      OpBuilder fb = ifFull.getThenBodyBuilder();
      retire(fb, t, [&](OpBuilder &rb, Value i, Value) {
        return rb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, i,
                                        constant(rb, 0));
      });
    }
    Value count = stateOf(b, t, kCount);
    int64_t elements = copy.getDstElements().getZExtValue();
    setField(b, constant(b, which), t, count, kCopy);
    setField(b, constant(b, kUncommitted), t, count, kGroup);
    setField(b,
             copy.getSrcElements() ? copy.getSrcElements()
                                   : constant(b, elements),
             t, count, kSourceElements);
    for (auto [d, index] : llvm::enumerate(copy.getSrcIndices()))
      setField(b, index, t, count, kIndices + d);
    for (auto [d, index] : llvm::enumerate(copy.getDstIndices()))
      setField(b, index, t, count, kIndices + rank + d);
    setState(b, b.create<arith::AddIOp>(loc, count, constant(b, 1)), t, kCount);
    // Until the wait, the destination holds neither its old contents nor
    // the new for certain.
    Type element = cast<MemRefType>(copy.getDst().getType()).getElementType();
    Value poison = emulatedPoison(b, loc, element);
    auto fill = b.create<scf::ForOp>(loc, constant(b, 0), constant(b, elements),
                                     constant(b, 1));
    OpBuilder pb = OpBuilder::atBlockBegin(fill.getBody());
    SmallVector<Value> at(copy.getDstIndices());
    at.back() =
        pb.create<arith::AddIOp>(loc, at.back(), fill.getInductionVar());
    pb.create<memref::StoreOp>(loc, poison, copy.getDst(), at);
  }

  /// cp.async.commit_group: the thread's uncommitted copies become its
  /// next group, an empty one if there are none.
  void rewriteGroup(nvgpu::DeviceAsyncCreateGroupOp group) {
    OpBuilder b(group);
    Value t = thread(b);
    Value committed = stateOf(b, t, kCommitted);
    auto walk = b.create<scf::ForOp>(loc, constant(b, 0), stateOf(b, t, kCount),
                                     constant(b, 1));
    {
      OpBuilder wb = OpBuilder::atBlockBegin(walk.getBody());
      Value i = walk.getInductionVar();
      auto open = wb.create<scf::IfOp>(
          loc, wb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                        field(wb, t, i, kGroup),
                                        constant(wb, kUncommitted)));
      OpBuilder ob = open.getThenBodyBuilder();
      setField(ob, committed, t, i, kGroup);
    }
    setState(b, b.create<arith::AddIOp>(loc, committed, constant(b, 1)), t,
             kCommitted);
  }

  /// cp.async.wait_group N: every committed group but the N newest is
  /// complete; copies not yet committed are not waited for.
  void rewriteWait(nvgpu::DeviceAsyncWaitOp wait) {
    OpBuilder b(wait);
    Value t = thread(b);
    int64_t newest = wait.getNumGroups().value_or(0);
    Value limit = b.create<arith::SubIOp>(loc, stateOf(b, t, kCommitted),
                                          constant(b, newest));
    retire(b, t, [&](OpBuilder &rb, Value, Value group) {
      return rb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, group,
                                      limit);
    });
  }

  LogicalResult run() {
    SmallVector<nvgpu::DeviceAsyncCreateGroupOp> groups;
    SmallVector<nvgpu::DeviceAsyncWaitOp> waits;
    WalkResult walk = launch.getBody().walk([&](Operation *op) {
      if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op)) {
        if (!isLaunchUniform(launch, copy.getSrc()) ||
            !isLaunchUniform(launch, copy.getDst())) {
          op->emitOpError()
              << "copies from or to a memref that differs between threads or "
                 "iterations; the emulation of cp.async records a copy by its "
                 "indices into memrefs fixed for the launch";
          return WalkResult::interrupt();
        }
        copies.push_back(copy);
        rank = std::max<int64_t>({rank, int64_t(copy.getSrcIndices().size()),
                                  int64_t(copy.getDstIndices().size())});
      } else if (auto group = dyn_cast<nvgpu::DeviceAsyncCreateGroupOp>(op)) {
        groups.push_back(group);
      } else if (auto wait = dyn_cast<nvgpu::DeviceAsyncWaitOp>(op)) {
        waits.push_back(wait);
      } else {
        return WalkResult::advance();
      }
      for (Operation *user : op->getUsers())
        if (!isa<nvgpu::DeviceAsyncCreateGroupOp, nvgpu::DeviceAsyncWaitOp>(
                user)) {
          user->emitOpError()
              << "takes an asynchronous copy's token; the emulation of "
                 "cp.async follows tokens into groups and waits only";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (copies.empty() && groups.empty() && waits.empty())
      return success();

    OpBuilder b(launch);
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    Value threads = b.create<arith::MulIOp>(
        loc, b.create<arith::MulIOp>(loc, block.x, block.y), block.z);
    records = b.create<memref::AllocOp>(
        loc,
        MemRefType::get(
            {ShapedType::kDynamic, kEmulatedPendingCopies, kIndices + 2 * rank},
            b.getIndexType()),
        ValueRange{threads});
    state = b.create<memref::AllocOp>(
        loc, MemRefType::get({ShapedType::kDynamic, 2}, b.getIndexType()),
        ValueRange{threads});
    b.setInsertionPointAfter(launch);
    b.create<memref::DeallocOp>(loc, records);
    b.create<memref::DeallocOp>(loc, state);
    // Each block's threads start with nothing pending.
    OpBuilder sb = OpBuilder::atBlockBegin(&launch.getBody().front());
    Value t = thread(sb);
    setState(sb, constant(sb, 0), t, kCount);
    setState(sb, constant(sb, 0), t, kCommitted);

    for (auto [which, copy] : llvm::enumerate(copies))
      rewriteCopy(copy, which);
    for (nvgpu::DeviceAsyncCreateGroupOp group : groups)
      rewriteGroup(group);
    for (nvgpu::DeviceAsyncWaitOp wait : waits)
      rewriteWait(wait);
    // Tokens flow only among these ops, which all go.
    SmallVector<Operation *> erased(copies.begin(), copies.end());
    erased.append(groups.begin(), groups.end());
    erased.append(waits.begin(), waits.end());
    for (Operation *op : erased)
      op->dropAllUses();
    for (Operation *op : erased)
      op->erase();
    return success();
  }
};

} // namespace

Value mlir::tfm::retireRecords(
    OpBuilder &b, Location loc, Value count,
    function_ref<Value(OpBuilder &, Value)> done,
    function_ref<void(OpBuilder &, Value)> complete,
    function_ref<void(OpBuilder &, Value, Value)> move) {
  auto c = [&](OpBuilder &ob, int64_t v) {
    return ob.create<arith::ConstantIndexOp>(loc, v);
  };
  auto walk =
      b.create<scf::ForOp>(loc, c(b, 0), count, c(b, 1), ValueRange{c(b, 0)});
  OpBuilder wb = OpBuilder::atBlockBegin(walk.getBody());
  Value i = walk.getInductionVar();
  Value kept = walk.getRegionIterArgs()[0];
  auto now = wb.create<scf::IfOp>(loc, TypeRange{wb.getIndexType()},
                                  done(wb, i), /*withElseRegion=*/true);
  OpBuilder db = now.getThenBodyBuilder();
  complete(db, i);
  db.create<scf::YieldOp>(loc, kept);
  OpBuilder kb = now.getElseBodyBuilder();
  move(kb, i, kept);
  kb.create<scf::YieldOp>(
      loc, kb.create<arith::AddIOp>(loc, kept, c(kb, 1)).getResult());
  wb.create<scf::YieldOp>(loc, now.getResult(0));
  return walk.getResult(0);
}

LogicalResult mlir::tfm::emulateAsyncCopies(gpu::LaunchOp launch) {
  return AsyncCopies(launch).run();
}
