//===- Reduction.cpp - Reductions over the last or first axes on the GPU -===//
//
// A reduction over the trailing axes (a row's sum, mean, maximum or
// minimum: the softmax backward's Σ dy·y, the statistics of a norm written
// out by an exporter) takes rows of contiguous elements. The neutral
// lowering gives each row a thread, whose loads stride by the row's length
// across the warp, and launches as many threads as rows. Here each row is
// a warp's (WarpRows.h): coalesced loads, and 32 times the threads.
//
// A reduction over the leading axes (a bias's gradient: the sum over every
// row of a batch) takes columns. The neutral lowering gives each column a
// thread that walks all the rows: as few threads as columns (512 for a
// layer of width 512, four blocks of a GPU of 132 multiprocessors), each
// with as many dependent loads as rows. Here a block takes 32 columns and
// splits their rows over 16 row groups: each warp still reads 32
// neighbouring columns of a row at once, each thread walks a sixteenth of
// the rows, and the 16 partials of a column meet in shared memory.
//
//===----------------------------------------------------------------------===//

#include "WarpRows.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// How a reduction combines two values, and what it starts from.
struct Combiner {
  ReduceKind kind;
  Location loc;

  Value operator()(OpBuilder &b, Value acc, Value v) const {
    switch (kind) {
    case ReduceKind::sum:
    case ReduceKind::mean:
      return b.create<arith::AddFOp>(loc, acc, v);
    case ReduceKind::max:
      return b.create<arith::MaximumFOp>(loc, acc, v);
    case ReduceKind::min:
      return b.create<arith::MinimumFOp>(loc, acc, v);
    }
    llvm_unreachable("unknown reduce kind");
  }
  double init() const {
    if (kind == ReduceKind::sum || kind == ReduceKind::mean)
      return 0.0;
    return kind == ReduceKind::max ? -INFINITY : INFINITY;
  }
  /// The combined value of `count` elements as the op's result: a mean
  /// divides.
  Value finish(OpBuilder &b, Value v, int64_t count) const {
    if (kind != ReduceKind::mean)
      return v;
    return b.create<arith::DivFOp>(
        loc, v, b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(count)));
  }
};

} // namespace

LogicalResult mlir::tfm::lowerWarpRowReduction(ReduceOp op,
                                               BufferizedEntry &e) {
  auto type = op.getInput().getType();
  int64_t rank = type.getRank();
  int64_t lead = rank - static_cast<int64_t>(op.getAxes().size());
  int64_t n = product(type.getShape().drop_front(lead));
  int64_t m = type.getNumElements() / n;
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  Value x = viewAs(e, e.denseOf(op.getInput()), {m, n});
  Value y = viewAs(e, out, {m});
  Combiner combine{op.getKind(), op.getLoc()};
  WarpRows w(e.b, op.getLoc(), m, n);
  OpBuilder &kb = w.kb;
  Location loc = w.loc;
  Value partial = w.pass(w.f32(kb, combine.init()), [&](OpBuilder &lb,
                                                        Value col, Value acc) {
    return combine(lb, acc,
                   lb.create<memref::LoadOp>(loc, x, ValueRange{w.row, col}));
  });
  Value v = combine.finish(kb, w.allReduce(partial, combine), n);
  OpBuilder tb = kb.create<scf::IfOp>(loc, w.storesRow()).getThenBodyBuilder();
  tb.create<memref::StoreOp>(loc, v, y, w.row);
  return success();
}

LogicalResult mlir::tfm::lowerBlockColumnReduction(ReduceOp op,
                                                   BufferizedEntry &e) {
  auto type = op.getInput().getType();
  int64_t reduced = static_cast<int64_t>(op.getAxes().size());
  int64_t m = product(type.getShape().take_front(reduced));
  int64_t n = type.getNumElements() / m;
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  Value x = viewAs(e, e.denseOf(op.getInput()), {m, n});
  Value y = viewAs(e, out, {n});
  Location loc = op.getLoc();
  Combiner combine{op.getKind(), loc};
  OpBuilder &b = e.b;
  auto c = [&](OpBuilder &ob, int64_t v) -> Value {
    return ob.create<arith::ConstantIndexOp>(loc, v);
  };
  constexpr int64_t kColumns = warp::kWarpSize;
  constexpr int64_t kGroups = kBlockColumnsRowGroups;
  auto partials = MemRefType::get(
      {kGroups, kColumns}, b.getF32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  auto launch = b.create<gpu::LaunchOp>(
      loc, c(b, (n + kColumns - 1) / kColumns), c(b, 1), c(b, 1),
      c(b, kColumns), c(b, kGroups), c(b, 1),
      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
      ValueRange{}, TypeRange{partials});
  OpBuilder kb(b.getContext());
  kb.setInsertionPointToStart(&launch.getBody().front());
  kb.create<gpu::TerminatorOp>(loc);
  kb.setInsertionPointToStart(&launch.getBody().front());
  Value lane = launch.getThreadIds().x, group = launch.getThreadIds().y;
  Value shared = launch.getWorkgroupAttributions()[0];
  Value wanted = kb.create<arith::AddIOp>(
      loc,
      kb.create<arith::MulIOp>(loc, launch.getBlockIds().x, c(kb, kColumns)),
      lane);
  // Past the last column a lane reads the last one and stores nothing, so
  // that every thread reaches the barrier.
  Value live = kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, wanted,
                                        c(kb, n));
  Value col = kb.create<arith::MinUIOp>(loc, wanted, c(kb, n - 1));
  // 1. Each thread combines rows group, group + 16, ... of its column.
  auto walk = kb.create<scf::ForOp>(
      loc, group, c(kb, m), c(kb, kGroups),
      ValueRange{kb.create<arith::ConstantOp>(
          loc, kb.getF32FloatAttr(combine.init()))},
      [&](OpBuilder &lb, Location, Value row, ValueRange acc) {
        Value v = lb.create<memref::LoadOp>(loc, x, ValueRange{row, col});
        lb.create<scf::YieldOp>(loc, combine(lb, acc.front(), v));
      });
  kb.create<memref::StoreOp>(loc, walk.getResult(0), shared,
                             ValueRange{group, lane});
  kb.create<gpu::BarrierOp>(loc);
  // 2. The first row group combines each column's partials in the order of
  // the groups and stores the result.
  Value first =
      kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, group, c(kb, 0));
  OpBuilder tb =
      kb.create<scf::IfOp>(loc, kb.create<arith::AndIOp>(loc, first, live))
          .getThenBodyBuilder();
  Value v = tb.create<memref::LoadOp>(loc, shared, ValueRange{c(tb, 0), lane});
  for (int64_t g = 1; g < kGroups; ++g)
    v = combine(
        tb, v,
        tb.create<memref::LoadOp>(loc, shared, ValueRange{c(tb, g), lane}));
  tb.create<memref::StoreOp>(loc, combine.finish(tb, v, m), y, wanted);
  return success();
}
