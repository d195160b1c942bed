//===- WarpRows.h - Kernels of a warp per row -------------------*- C++ -*-===//
//
// The shape the GPU's row kernels share (Normalization.cpp, Loss.cpp): each
// warp takes a row of an [m, n] view, its lanes striding over the columns
// so that each load of the warp is one coalesced transaction, and a row's
// statistic reaches every lane after five xor shuffles. Each pass reads the
// row again (from L1) rather than keeping it in registers, so any width
// fits.
//
// A block holds kRowsPerBlock warps. The last block's spare warps compute
// the last row again without storing it, so that no shuffle sits in a
// branch: every lane of a warp reaches each shuffle.
//
// A row of kWideRowColumns or more (a vocabulary's logits) takes a block of
// kWarpsPerWideRow warps instead: a warp alone would make 1571 loads per
// lane per pass over GPT-2's 50257, and a decoding step's single row would
// run on one warp of the whole chip. The warps' partial statistics meet in
// shared memory between two barriers, which every thread reaches.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOGPU_WARPROWS_H
#define TFM_CONVERSION_TFMTOGPU_WARPROWS_H

#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Conversion/GPUEmulation/WarpSemantics.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Transforms/LayoutRules.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::tfm {

inline constexpr int64_t kRowsPerBlock = 8;
inline constexpr int64_t kWideRowColumns = 2048;
inline constexpr int64_t kWarpsPerWideRow = 8;

/// `v` combined by `combine` over each aligned group of `lanes` lanes (a
/// power of two, at most a warp), in every lane of the group: xor shuffles
/// at offsets 1, 2, ..., lanes / 2.
inline Value
xorButterfly(OpBuilder &b, Location loc, Value v, int64_t lanes,
             function_ref<Value(OpBuilder &, Value, Value)> combine) {
  Value width = b.create<arith::ConstantIntOp>(loc, warp::kWarpSize, 32);
  for (int64_t offset = lanes / 2; offset >= 1; offset /= 2) {
    Value other = b.create<gpu::ShuffleOp>(
                       loc, v, b.create<arith::ConstantIntOp>(loc, offset, 32),
                       width, gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    v = combine(b, v, other);
  }
  return v;
}

/// The body of a kernel of a warp (or, for wide rows, a block of warps) per
/// row of an [m, n] view: the row this warp takes, whether it stores it, and
/// passes over its columns.
struct WarpRows {
  OpBuilder kb;
  Location loc;
  int64_t m, n;
  /// Warps per row: 1, or kWarpsPerWideRow for a row of kWideRowColumns.
  int64_t warps;
  /// The lane in the warp, the warp in its row (0 for a warp per row), and
  /// the first column this thread takes.
  Value lane, warpInRow, first;
  Value row, live;
  /// The first and last rows of the block's warps (the last row of all,
  /// for the last block's spare warps).
  Value firstRow, lastRow;
  /// A wide row's partials, one per warp, in shared memory.
  Value partials;

  WarpRows(OpBuilder &b, Location loc, int64_t m, int64_t n)
      : kb(b.getContext()), loc(loc), m(m), n(n),
        warps(n >= kWideRowColumns ? kWarpsPerWideRow : 1) {
    bool wide = warps > 1;
    int64_t rowsPerBlock = wide ? 1 : kRowsPerBlock;
    int64_t blocks = (m + rowsPerBlock - 1) / rowsPerBlock;
    SmallVector<Type, 1> shared;
    if (wide)
      shared.push_back(
          MemRefType::get({warps}, b.getF32Type(), MemRefLayoutAttrInterface(),
                          gpu::AddressSpaceAttr::get(
                              b.getContext(), gpu::AddressSpace::Workgroup)));
    auto launch = b.create<gpu::LaunchOp>(
        loc, index(b, blocks), index(b, 1), index(b, 1),
        index(b, warp::kWarpSize), index(b, wide ? warps : rowsPerBlock),
        index(b, 1), /*dynamicSharedMemorySize=*/nullptr,
        /*asyncTokenType=*/nullptr, ValueRange{}, shared);
    kb.setInsertionPointToStart(&launch.getBody().front());
    kb.create<gpu::TerminatorOp>(loc);
    kb.setInsertionPointToStart(&launch.getBody().front());
    lane = launch.getThreadIds().x;
    firstRow = kb.create<arith::MulIOp>(loc, launch.getBlockIds().x,
                                        index(kb, rowsPerBlock));
    lastRow = kb.create<arith::MinUIOp>(
        loc,
        kb.create<arith::AddIOp>(loc, firstRow, index(kb, rowsPerBlock - 1)),
        index(kb, m - 1));
    if (wide) {
      partials = launch.getWorkgroupAttributions()[0];
      warpInRow = launch.getThreadIds().y;
      first = kb.create<arith::AddIOp>(
          loc, lane,
          kb.create<arith::MulIOp>(loc, warpInRow, index(kb, warp::kWarpSize)));
      row = launch.getBlockIds().x;
      live = kb.create<arith::ConstantIntOp>(loc, 1, 1);
      return;
    }
    warpInRow = index(kb, 0);
    first = lane;
    Value wanted = kb.create<arith::AddIOp>(
        loc,
        kb.create<arith::MulIOp>(loc, launch.getBlockIds().x,
                                 index(kb, rowsPerBlock)),
        launch.getThreadIds().y);
    live = kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, wanted,
                                    index(kb, m));
    row = kb.create<arith::MinUIOp>(loc, wanted, index(kb, m - 1));
  }

  Value index(OpBuilder &b, int64_t v) {
    return b.create<arith::ConstantIndexOp>(loc, v);
  }
  Value f32(OpBuilder &b, double v) {
    return b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(v));
  }

  /// A pass over this thread's columns of the row: first, first + 32 ·
  /// warps, ...; `body` gets the column and what the pass carries (`inits`
  /// at first) and returns what it carries on.
  ValueRange
  pass(ValueRange inits,
       function_ref<SmallVector<Value>(OpBuilder &, Value, ValueRange)> body) {
    auto loop = kb.create<scf::ForOp>(
        loc, first, index(kb, n), index(kb, warp::kWarpSize * warps), inits,
        [&](OpBuilder &lb, Location, Value col, ValueRange carried) {
          lb.create<scf::YieldOp>(loc, body(lb, col, carried));
        });
    loop->setAttr(kColumnPassAttrName, kb.getUnitAttr());
    return loop.getResults();
  }
  /// A pass carrying one value (`init`), or nothing.
  Value pass(Value init, function_ref<Value(OpBuilder &, Value, Value)> body) {
    SmallVector<Value, 1> inits;
    if (init)
      inits.push_back(init);
    ValueRange results =
        pass(inits, [&](OpBuilder &lb, Value col, ValueRange carried) {
          SmallVector<Value> next;
          if (Value v = body(lb, col, init ? carried.front() : Value()))
            next.push_back(v);
          return next;
        });
    return init ? results.front() : Value();
  }

  /// The row of an operand whose rows broadcast to the result's (leading
  /// dimensions `lead`, the operand's row strides `strides`, 0 where it
  /// broadcasts; broadcastRows) that this warp's row reads.
  Value rowOf(ArrayRef<int64_t> lead, ArrayRef<int64_t> strides) {
    if (llvm::equal(strides, rowMajorStrides(lead)))
      return row;
    Value at = index(kb, 0), rest = row;
    for (int64_t d = int64_t(lead.size()) - 1; d >= 0; --d) {
      Value coord = kb.create<arith::RemUIOp>(loc, rest, index(kb, lead[d]));
      rest = kb.create<arith::DivUIOp>(loc, rest, index(kb, lead[d]));
      if (strides[d] != 0)
        at = kb.create<arith::AddIOp>(
            loc, at,
            kb.create<arith::MulIOp>(loc, coord, index(kb, strides[d])));
    }
    return at;
  }

  /// Whether this thread stores what its row's warps computed for the row
  /// once: lane 0 of the row's first warp, where the row is its own.
  Value storesRow() {
    return kb.create<arith::AndIOp>(
        loc, live,
        kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, first,
                                 index(kb, 0)));
  }

  void storeIfLive(OpBuilder &b, Value v, Value rows, Value col) {
    auto guard = b.create<scf::IfOp>(loc, live);
    OpBuilder gb = guard.getThenBodyBuilder();
    gb.create<memref::StoreOp>(loc, v, rows, ValueRange{row, col});
  }

  /// `v` combined over the row's threads by `combine` (associative and
  /// commutative), in every thread.
  Value allReduce(Value v,
                  function_ref<Value(OpBuilder &, Value, Value)> combine) {
    v = xorButterfly(kb, loc, v, /*lanes=*/warp::kWarpSize, combine);
    if (warps == 1)
      return v;
    // Lane 0 of each warp leaves its warp's value; every thread then
    // combines them in the order of the warps, so all get the same. The
    // first barrier keeps the last reduction's reads ahead of these writes.
    kb.create<gpu::BarrierOp>(loc);
    Value leader = kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane,
                                            index(kb, 0));
    OpBuilder tb = kb.create<scf::IfOp>(loc, leader).getThenBodyBuilder();
    tb.create<memref::StoreOp>(loc, v, partials, warpInRow);
    kb.create<gpu::BarrierOp>(loc);
    Value all = kb.create<memref::LoadOp>(loc, partials, index(kb, 0));
    for (int64_t w = 1; w < warps; ++w)
      all = combine(kb, all,
                    kb.create<memref::LoadOp>(loc, partials, index(kb, w)));
    return all;
  }
  /// `v` summed, or its maximum, over the warp's lanes, in every lane.
  Value allReduce(Value v, bool maximum) {
    return allReduce(v, [&](OpBuilder &b, Value x, Value y) -> Value {
      return maximum ? b.create<arith::MaximumFOp>(loc, x, y).getResult()
                     : b.create<arith::AddFOp>(loc, x, y).getResult();
    });
  }
};

/// `buffer` viewed as [rows, n] (or [n]) of f32.
inline Value viewAs(BufferizedEntry &e, Value buffer, ArrayRef<int64_t> shape) {
  return e.reshape(buffer, MemRefType::get(shape, Float32Type::get(e.ctx)));
}

/// `operand`, whose last `trailing` dimensions are a result row's `n`
/// elements and whose leading ones broadcast to the result's `lead`
/// (right-aligned), as rows [rows, n], with its row stride for each
/// dimension of `lead`: 0 where it broadcasts.
inline std::pair<Value, SmallVector<int64_t>>
broadcastRows(BufferizedEntry &e, Value operand, ArrayRef<int64_t> lead,
              int64_t trailing, int64_t n) {
  ArrayRef<int64_t> ownLead =
      cast<RankedTensorType>(operand.getType()).getShape().drop_back(trailing);
  SmallVector<int64_t> own(lead.size() - ownLead.size(), 1);
  own.append(ownLead.begin(), ownLead.end());
  SmallVector<int64_t> strides = rowMajorStrides(own);
  for (size_t d = 0; d < lead.size(); ++d)
    if (own[d] == 1 && lead[d] != 1)
      strides[d] = 0;
  return {viewAs(e, e.denseOf(operand), {product(ownLead), n}), strides};
}

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOGPU_WARPROWS_H
