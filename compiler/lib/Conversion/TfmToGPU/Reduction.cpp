//===- Reduction.cpp - Reductions over the last axes on the GPU -----------===//
//
// A reduction over the trailing axes (a row's sum, mean, maximum or
// minimum: the softmax backward's Σ dy·y, the statistics of a norm written
// out by an exporter) takes rows of contiguous elements. The neutral
// lowering gives each row a thread, whose loads stride by the row's length
// across the warp, and launches as many threads as rows. Here each row is
// a warp's (WarpRows.h): coalesced loads, and 32 times the threads.
//
//===----------------------------------------------------------------------===//

#include "WarpRows.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

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
  ReduceKind kind = op.getKind();
  bool sums = kind == ReduceKind::sum || kind == ReduceKind::mean;
  WarpRows w(e.b, op.getLoc(), m, n);
  OpBuilder &kb = w.kb;
  Location loc = w.loc;
  auto combine = [&](OpBuilder &b, Value acc, Value v) -> Value {
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
  };
  double init = sums ? 0.0 : kind == ReduceKind::max ? -INFINITY : INFINITY;
  Value partial =
      w.pass(w.f32(kb, init), [&](OpBuilder &lb, Value col, Value acc) {
        return combine(
            lb, acc, lb.create<memref::LoadOp>(loc, x, ValueRange{w.row, col}));
      });
  Value v = w.allReduce(partial, combine);
  if (kind == ReduceKind::mean)
    v = kb.create<arith::DivFOp>(loc, v, w.f32(kb, double(n)));
  OpBuilder tb = kb.create<scf::IfOp>(loc, w.storesRow()).getThenBodyBuilder();
  tb.create<memref::StoreOp>(loc, v, y, w.row);
  return success();
}
