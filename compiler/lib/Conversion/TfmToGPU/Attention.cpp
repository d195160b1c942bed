//===- Attention.cpp - Fused attention and its backward pass on the GPU ---===//
//
// tfm.attention and tfm.attention_grad in f32, without the [Sq, Sk] scores
// in memory: kernels of a warp per row (WarpRows.h), the lanes striding
// over the head's columns, so that each row read is one coalesced load of
// the warp and a score q_i · k_j reaches every lane after five xor
// shuffles. A block's eight warps take eight neighbouring rows of one
// batch, which read the same key (or query) rows at once, from L1.
//
// The forward kernel walks the keys once with the online softmax (the
// running maximum m, the running sum l of exp(s - m), and the output row,
// rescaled by exp(m_old - m_new) whenever the maximum grows) and writes
// acc / l. A causal block stops at its last row's position, and a row's
// scores past its own are -inf. A key whose score is -inf (a masked key)
// adds nothing; a row whose every key is masked divides 0 by 0, as the
// unfused softmax's exp(-inf - -inf) does. A rotary embedding of the query
// that the plan computes here (rotatedInAttention) is applied as each warp
// loads its query row, once a row: the tables at the row's position, and
// each column's partner read from the same row.
//
// The backward pass recomputes the probabilities, FlashAttention-2's way,
// as two kernels that never write P:
//   1. a warp per query row i: the row's log-sum-exp L_i (an online pass
//      over the keys) and D_i = dO_i · O_i, then a second pass
//      p = exp(s - L_i), dp = dO_i · v_j, ds = p (dp - D_i),
//      dQ_i = scale Σ_j ds k_j. L and D go to [rows] scratch buffers;
//   2. a warp per key row j, over the queries that see it:
//      dV_j = Σ_i p dO_i and dK_j = scale Σ_i ds q_i, with p and ds
//      recomputed from L_i and D_i.
// Each kernel owns the rows it writes, so no atomics are needed and the
// sums run in a fixed order: a step is reproducible.
//
//===----------------------------------------------------------------------===//

#include "BufferPlace.h"
#include "WarpRows.h"
#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

// The strategy keeps heads and value rows this wide, so a row is never one
// of WarpRows' wide rows, which take a block of warps each.
static_assert(kFlashAttentionMaxValueWidth < kWideRowColumns);

namespace {

/// What the attention kernels share: the operands (whole-rank buffers,
/// possibly strided views of the projections), the sizes, and the rules
/// for a score.
struct AttentionOperands {
  Location loc;
  Value q, k, v, mask;
  MaskKind kind;
  AffineMap maskMap;
  double scale;
  bool causal;
  SmallVector<int64_t> batch;
  int64_t sq, sk, d, dv;
  /// The query heads that read each key and value head (grouped-query
  /// attention; the backward pass takes them repeated, so 1 there).
  int64_t group = 1;
  /// The query's rotary embedding, applied as a query row is loaded:
  /// its tables and their maps from a query element's indices.
  Value qCos, qSin;
  AffineMap qCosMap, qSinMap;
  bool qInterleaved = false;

  AttentionOperands(BufferizedEntry &e, Location loc, Value query, Value key,
                    Value value, Value maskTensor, MaskKind kind, double scale,
                    bool causal)
      : loc(loc), kind(kind), scale(scale), causal(causal) {
    ArrayRef<int64_t> qs = cast<RankedTensorType>(query.getType()).getShape();
    int64_t rank = qs.size();
    batch.assign(qs.begin(), qs.end() - 2);
    sq = qs[rank - 2];
    d = qs.back();
    sk = cast<RankedTensorType>(key.getType()).getShape()[rank - 2];
    dv = cast<RankedTensorType>(value.getType()).getShape().back();
    if (RotaryOp rotary = rotatedInAttention(query)) {
      q = e.bufferOf(rotary.getInput());
      qCos = e.bufferOf(rotary.getCos());
      qSin = e.bufferOf(rotary.getSin());
      qCosMap = e.broadcastMap(cast<MemRefType>(qCos.getType()).getShape(), qs);
      qSinMap = e.broadcastMap(cast<MemRefType>(qSin.getType()).getShape(), qs);
      qInterleaved = rotary.getInterleaved();
    } else {
      q = e.bufferOf(query);
    }
    k = e.bufferOf(key);
    v = e.bufferOf(value);
    if (maskTensor) {
      mask = e.bufferOf(maskTensor);
      // The mask broadcasts to [B..., Sq, Sk] from the right.
      SmallVector<int64_t> scores(batch);
      scores.append({sq, sk});
      maskMap =
          e.broadcastMap(cast<MemRefType>(mask.getType()).getShape(), scores);
    }
  }

  int64_t batches() const { return product(batch); }

  Value index(OpBuilder &b, int64_t value) const {
    return b.create<arith::ConstantIndexOp>(loc, value);
  }
  Value f32(OpBuilder &b, double value) const {
    return b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(value));
  }

  /// The batch indices and the position of row `row` of [B..., S] rows.
  std::pair<SmallVector<Value>, Value> split(OpBuilder &b, Value row,
                                             int64_t s) const {
    SmallVector<Value> idx(batch.size());
    Value pos = b.create<arith::RemUIOp>(loc, row, index(b, s));
    Value rest = b.create<arith::DivUIOp>(loc, row, index(b, s));
    for (int64_t dim = int64_t(batch.size()) - 1; dim >= 0; --dim) {
      idx[dim] = b.create<arith::RemUIOp>(loc, rest, index(b, batch[dim]));
      rest = b.create<arith::DivUIOp>(loc, rest, index(b, batch[dim]));
    }
    return {idx, pos};
  }

  /// The keys' and values' batch indices for a query's: its head divided by
  /// the group.
  SmallVector<Value> keyBatch(OpBuilder &b, ArrayRef<Value> batchIdx) const {
    SmallVector<Value> idx(batchIdx);
    if (group != 1)
      idx.back() = b.create<arith::DivUIOp>(loc, idx.back(), index(b, group));
    return idx;
  }

  static SmallVector<Value> at(ArrayRef<Value> batchIdx, Value pos, Value col) {
    SmallVector<Value> idx(batchIdx);
    idx.push_back(pos);
    idx.push_back(col);
    return idx;
  }

  /// A lane's columns of a row `width` wide: lane, lane + 32, ...; or, in
  /// a row of a multiple of 64 columns, as many consecutive ones from
  /// lane · slots on, which it reads and writes as vectors (of up to 16
  /// bytes) where the buffer's alignment allows. Every buffer of one width
  /// takes the same map, so that the slots of two rows pair the same
  /// columns.
  static int64_t slots(int64_t width) {
    return (width + warp::kWarpSize - 1) / warp::kWarpSize;
  }
  static bool consecutive(int64_t width) {
    return width % (2 * warp::kWarpSize) == 0;
  }
  /// The elements of one vector access in a consecutive row.
  static int64_t vectorElements(int64_t width) {
    int64_t n = 4;
    while (slots(width) % n)
      n /= 2;
    return n;
  }
  Value column(OpBuilder &b, Value lane, int64_t slot, int64_t width) const {
    if (consecutive(width))
      return b.create<arith::AddIOp>(
          loc, b.create<arith::MulIOp>(loc, lane, index(b, slots(width))),
          index(b, slot));
    return b.create<arith::AddIOp>(loc, lane, index(b, slot * warp::kWarpSize));
  }
  /// Whether `slot` holds a column for every lane; past a ragged end it
  /// does for some.
  static bool whole(int64_t width, int64_t slot) {
    return (slot + 1) * warp::kWarpSize <= width;
  }
  /// Whether a consecutive row of `buffer` is read and written in vectors.
  static bool inVectors(Value buffer, int64_t width) {
    auto type = cast<MemRefType>(buffer.getType());
    SmallVector<std::optional<int64_t>> leading(type.getRank() - 1);
    return consecutive(width) &&
           vectorAligned(buffer, leading, vectorElements(width));
  }

  /// The lane's elements of row `pos` of `buffer` ([B..., S, width]); 0
  /// past the row's end, read at its last column so that every load is in
  /// bounds and no lane branches.
  SmallVector<Value> loadRow(OpBuilder &b, Value lane, Value buffer,
                             ArrayRef<Value> batchIdx, Value pos,
                             int64_t width) const {
    SmallVector<Value> row;
    if (inVectors(buffer, width)) {
      int64_t n = vectorElements(width);
      for (int64_t slot = 0; slot < slots(width); slot += n)
        row.append(loadAlignedVector(
            b, loc, buffer, at(batchIdx, pos, column(b, lane, slot, width)),
            n));
      return row;
    }
    for (int64_t slot = 0; slot < slots(width); ++slot) {
      Value col = column(b, lane, slot, width);
      if (whole(width, slot)) {
        row.push_back(
            b.create<memref::LoadOp>(loc, buffer, at(batchIdx, pos, col)));
        continue;
      }
      Value inside = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult,
                                             col, index(b, width));
      Value clamped = b.create<arith::MinUIOp>(loc, col, index(b, width - 1));
      Value x =
          b.create<memref::LoadOp>(loc, buffer, at(batchIdx, pos, clamped));
      row.push_back(b.create<arith::SelectOp>(loc, inside, x, f32(b, 0.0)));
    }
    return row;
  }

  /// The lane's elements of query row `pos`, rotated where the query's
  /// rotary embedding is applied here: x·cos − x'·sin for the first
  /// element of a pair, x·cos + x'·sin for the second, x' the pair's other
  /// element (the other half of the row, or the neighbour when
  /// interleaved); 0 past the row's end, as loadRow gives.
  SmallVector<Value> loadQueryRow(OpBuilder &b, Value lane,
                                  ArrayRef<Value> batchIdx, Value pos) const {
    SmallVector<Value> row = loadRow(b, lane, q, batchIdx, pos, d);
    if (!qCos)
      return row;
    for (int64_t slot = 0; slot < slots(d); ++slot) {
      // Past a ragged row's end, read at its last column (as loadRow does)
      // and give 0.
      Value unclamped = column(b, lane, slot, d);
      Value col = whole(d, slot) ? unclamped
                                 : b.create<arith::MinUIOp>(loc, unclamped,
                                                            index(b, d - 1));
      Value first, partner;
      if (qInterleaved) {
        Value odd = b.create<arith::AndIOp>(loc, col, index(b, 1));
        first = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, odd,
                                        index(b, 0));
        partner = b.create<arith::XOrIOp>(loc, col, index(b, 1));
      } else {
        first = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, col,
                                        index(b, d / 2));
        partner = b.create<arith::SelectOp>(
            loc, first, b.create<arith::AddIOp>(loc, col, index(b, d / 2)),
            b.create<arith::SubIOp>(loc, col, index(b, d / 2)));
      }
      SmallVector<Value> own = at(batchIdx, pos, col);
      Value x = b.create<memref::LoadOp>(loc, q, at(batchIdx, pos, partner));
      Value c =
          b.create<memref::LoadOp>(loc, qCos, indicesAt(b, loc, qCosMap, own));
      Value sn =
          b.create<memref::LoadOp>(loc, qSin, indicesAt(b, loc, qSinMap, own));
      Value direct = b.create<arith::MulFOp>(loc, row[slot], c);
      Value turned = b.create<arith::MulFOp>(loc, x, sn);
      Value rotated = b.create<arith::SelectOp>(
          loc, first, b.create<arith::SubFOp>(loc, direct, turned),
          b.create<arith::AddFOp>(loc, direct, turned));
      if (!whole(d, slot))
        rotated = b.create<arith::SelectOp>(
            loc,
            b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, unclamped,
                                    index(b, d)),
            rotated, f32(b, 0.0));
      row[slot] = rotated;
    }
    return row;
  }

  /// Stores the lane's elements of a row where `live` and inside the row.
  void storeRow(OpBuilder &b, Value lane, Value live, Value buffer,
                ArrayRef<Value> batchIdx, Value pos, ArrayRef<Value> row,
                int64_t width) const {
    OpBuilder gb = b.create<scf::IfOp>(loc, live).getThenBodyBuilder();
    if (inVectors(buffer, width)) {
      int64_t n = vectorElements(width);
      for (int64_t slot = 0; slot < slots(width); slot += n)
        storeAlignedVector(gb, loc, row.slice(slot, n), buffer,
                           at(batchIdx, pos, column(gb, lane, slot, width)));
      return;
    }
    for (auto [slot, x] : llvm::enumerate(row)) {
      Value col = column(gb, lane, slot, width);
      OpBuilder sb = gb;
      if (!whole(width, slot))
        sb = gb.create<scf::IfOp>(
                   loc, gb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult,
                                                 col, index(gb, width)))
                 .getThenBodyBuilder();
      sb.create<memref::StoreOp>(loc, x, buffer, at(batchIdx, pos, col));
    }
  }

  /// Σ a · b over the row, in every lane of the warp.
  Value dot(OpBuilder &b, ArrayRef<Value> x, ArrayRef<Value> y) const {
    Value partial = f32(b, 0.0);
    for (auto [xs, ys] : llvm::zip(x, y))
      partial = b.create<arith::AddFOp>(loc, partial,
                                        b.create<arith::MulFOp>(loc, xs, ys));
    return xorButterfly(b, loc, partial, warp::kWarpSize,
                        [&](OpBuilder &ob, Value l, Value r) -> Value {
                          return ob.create<arith::AddFOp>(loc, l, r);
                        });
  }

  /// The score of query row `i` and key row `j` of batch `batchIdx`, from
  /// their dot product: scaled, masked, and -inf above the causal diagonal.
  Value score(OpBuilder &b, Value qk, ArrayRef<Value> batchIdx, Value i,
              Value j) const {
    Value s = b.create<arith::MulFOp>(loc, qk, f32(b, scale));
    if (causal)
      s = b.create<arith::SelectOp>(
          loc, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ugt, j, i),
          f32(b, -INFINITY), s);
    if (!mask)
      return s;
    SmallVector<Value> scoreIdx(batchIdx);
    scoreIdx.append({i, j});
    Value m = b.create<memref::LoadOp>(loc, mask,
                                       indicesAt(b, loc, maskMap, scoreIdx));
    if (kind == MaskKind::boolean)
      return b.create<arith::SelectOp>(loc, m, s, f32(b, -INFINITY));
    return b.create<arith::AddFOp>(loc, s, maskValueAsF32(b, loc, m));
  }

  /// The positions of the rows of `w`'s block in [B..., S] rows: the
  /// least and the greatest (0 and S - 1 where the block spans two
  /// batches). They are the same for every thread of the block.
  std::pair<Value, Value> blockPositions(OpBuilder &b, const WarpRows &w,
                                         int64_t s) const {
    Value first = b.create<arith::RemUIOp>(loc, w.firstRow, index(b, s));
    Value last = b.create<arith::RemUIOp>(loc, w.lastRow, index(b, s));
    Value spans = b.create<arith::CmpIOp>(
        loc, arith::CmpIPredicate::ne,
        b.create<arith::DivUIOp>(loc, w.firstRow, index(b, s)),
        b.create<arith::DivUIOp>(loc, w.lastRow, index(b, s)));
    return {b.create<arith::SelectOp>(loc, spans, index(b, 0), first),
            b.create<arith::SelectOp>(loc, spans, index(b, s - 1), last)};
  }

  // A loop around the warps' shuffles runs over bounds that every thread
  // of the block shares, as the emulation, which steps a block's threads
  // together, requires; a row past its own causal bound sees -inf scores,
  // which add nothing. A block's rows are neighbours, so the extra steps
  // number fewer than its warps.

  /// The keys that the query rows of `w`'s block see: all, or those up to
  /// the block's last position.
  Value keyEnd(OpBuilder &b, const WarpRows &w) const {
    if (!causal)
      return index(b, sk);
    return b.create<arith::MinUIOp>(
        loc,
        b.create<arith::AddIOp>(loc, blockPositions(b, w, sq).second,
                                index(b, 1)),
        index(b, sk));
  }
  /// The first query that sees a key row of `w`'s block.
  Value queryBegin(OpBuilder &b, const WarpRows &w) const {
    if (!causal)
      return index(b, 0);
    return b.create<arith::MinUIOp>(loc, blockPositions(b, w, sk).first,
                                    index(b, sq));
  }

  /// The running maximum `m` as exponentials subtract it: 0 while every
  /// score is -inf.
  Value shiftOf(OpBuilder &b, Value m) const {
    Value finite = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::ONE, m,
                                           f32(b, -INFINITY));
    return b.create<arith::SelectOp>(loc, finite, m, f32(b, 0.0));
  }

  /// One step of the online softmax: the new maximum, the shift that
  /// exponentials take (0 while every score is -inf, so that exp gives 0,
  /// not NaN), and the factor the old sum and accumulator are rescaled by.
  struct OnlineStep {
    Value m, shift, rescale;
  };
  OnlineStep online(OpBuilder &b, Value m, Value s) const {
    Value mNew = b.create<arith::MaximumFOp>(loc, m, s);
    Value shift = shiftOf(b, mNew);
    Value rescale =
        b.create<math::ExpOp>(loc, b.create<arith::SubFOp>(loc, m, shift));
    return {mNew, shift, rescale};
  }

  Value exp(OpBuilder &b, Value x, Value shift) const {
    return b.create<math::ExpOp>(loc, b.create<arith::SubFOp>(loc, x, shift));
  }
};

/// `values` and then `more`, as one list of loop-carried values.
SmallVector<Value> concat(ArrayRef<Value> values, ArrayRef<Value> more) {
  SmallVector<Value> all(values);
  all.append(more.begin(), more.end());
  return all;
}

SmallVector<Value> scaled(OpBuilder &b, Location loc, ArrayRef<Value> row,
                          Value factor) {
  SmallVector<Value> out;
  for (Value x : row)
    out.push_back(b.create<arith::MulFOp>(loc, x, factor));
  return out;
}

/// acc + w · x, elementwise.
SmallVector<Value> axpy(OpBuilder &b, Location loc, ArrayRef<Value> acc,
                        Value w, ArrayRef<Value> x) {
  SmallVector<Value> out;
  for (auto [a, xs] : llvm::zip(acc, x))
    out.push_back(
        b.create<arith::AddFOp>(loc, a, b.create<arith::MulFOp>(loc, w, xs)));
  return out;
}

/// Whether the op's shapes leave no work.
bool empty(const AttentionOperands &a) {
  return a.batches() == 0 || a.sq == 0 || a.d == 0 || a.dv == 0;
}

/// The backward pass that reads the log-sum-exp of `fwd`'s rows from it
/// instead of computing it again: the attention_grad of the same operands
/// that takes `fwd`'s result as its output, when both get a warp per row
/// (the forward's kernel has each row's running maximum and sum at its
/// end, in the order the backward's own pass would take them). Null when
/// there is none.
AttentionGradOp gradReadingLogSumExp(AttentionOp fwd, BufferizedEntry &e) {
  Type narrow = cast<GPUEntry>(e).narrowOperandType();
  if (fwd.getKVGroup() != 1 ||
      !getsGPUKernel(fwd, GPUKernel::AttentionRows, narrow))
    return {};
  for (Operation *user : fwd.getResult().getUsers()) {
    auto grad = dyn_cast<AttentionGradOp>(user);
    if (grad && grad.getOutput() == fwd.getResult() &&
        grad.getQuery() == fwd.getQuery() && grad.getKey() == fwd.getKey() &&
        grad.getValue() == fwd.getValue() && grad.getMask() == fwd.getMask() &&
        attentionScale(grad) == attentionScale(fwd) &&
        attentionMaskKind(grad) == attentionMaskKind(fwd) &&
        grad.getCausal() == fwd.getCausal() &&
        getsGPUKernel(grad, GPUKernel::AttentionRows, narrow))
      return grad;
  }
  return {};
}

/// Where the rows' log-sum-exp of `fwd` waits for its backward pass: a
/// float per query row, in the entry's scratch memory.
Value logSumExpRows(AttentionOp fwd, BufferizedEntry &e, bool &fresh) {
  auto q = cast<RankedTensorType>(fwd.getQuery().getType()).getShape();
  std::string key;
  llvm::raw_string_ostream(key) << "attention-lse-" << fwd.getOperation();
  return e.entryScratch(
      key,
      MemRefType::get({std::max<int64_t>(product(q.drop_back()), 1)},
                      e.b.getF32Type()),
      fresh);
}

} // namespace

LogicalResult mlir::tfm::lowerFlashAttention(AttentionOp op,
                                             BufferizedEntry &e) {
  Location loc = op.getLoc();
  // Asked for before anything takes scratch memory of the op's own.
  Value keptLse;
  if (gradReadingLogSumExp(op, e)) {
    bool fresh = false;
    keptLse = logSumExpRows(op, e, fresh);
  }
  // At the plan's strides: a transpose right after is a view.
  Value out = e.stridedDestination(op.getResult());
  if (!out)
    return failure();
  if (rotatedInAttention(op.getKey()))
    return op.emitError("internal error: the attention of a warp per row "
                        "cannot rotate its keys; the plan computes their "
                        "rotary embedding inline");
  AttentionOperands a(e, loc, op.getQuery(), op.getKey(), op.getValue(),
                      op.getMask(), attentionMaskKind(op), attentionScale(op),
                      op.getCausal());
  a.group = op.getKVGroup();
  if (empty(a))
    return success();
  WarpRows w(e.b, loc, a.batches() * a.sq, a.d);
  OpBuilder &kb = w.kb;
  auto [batchIdx, i] = a.split(kb, w.row, a.sq);
  SmallVector<Value> qRow = a.loadQueryRow(kb, w.lane, batchIdx, i);
  SmallVector<Value> kvIdx = a.keyBatch(kb, batchIdx);
  int64_t cv = AttentionOperands::slots(a.dv);
  SmallVector<Value> inits{a.f32(kb, -INFINITY), a.f32(kb, 0.0)};
  inits.append(cv, a.f32(kb, 0.0));
  auto keys = kb.create<scf::ForOp>(
      loc, a.index(kb, 0), a.keyEnd(kb, w), a.index(kb, 1), inits,
      [&](OpBuilder &fb, Location, Value j, ValueRange carried) {
        Value m = carried[0], sum = carried[1];
        ValueRange acc = carried.drop_front(2);
        SmallVector<Value> kRow = a.loadRow(fb, w.lane, a.k, kvIdx, j, a.d);
        Value s = a.score(fb, a.dot(fb, qRow, kRow), batchIdx, i, j);
        auto step = a.online(fb, m, s);
        Value weight = a.exp(fb, s, step.shift);
        Value sumNew = fb.create<arith::AddFOp>(
            loc, fb.create<arith::MulFOp>(loc, sum, step.rescale), weight);
        SmallVector<Value> vRow = a.loadRow(fb, w.lane, a.v, kvIdx, j, a.dv);
        SmallVector<Value> accNew = axpy(
            fb, loc, scaled(fb, loc, SmallVector<Value>(acc), step.rescale),
            weight, vRow);
        fb.create<scf::YieldOp>(loc, concat({step.m, sumNew}, accNew));
      });
  SmallVector<Value> result;
  for (Value x : keys.getResults().drop_front(2))
    result.push_back(kb.create<arith::DivFOp>(loc, x, keys.getResult(1)));
  a.storeRow(kb, w.lane, w.live, out, batchIdx, i, result, a.dv);
  if (keptLse) {
    // L = m + log l, for the backward pass (lowerFlashAttentionGrad).
    Value l = kb.create<arith::AddFOp>(
        loc, a.shiftOf(kb, keys.getResult(0)),
        kb.create<math::LogOp>(loc, keys.getResult(1)));
    OpBuilder sb =
        kb.create<scf::IfOp>(loc, w.storesRow()).getThenBodyBuilder();
    sb.create<memref::StoreOp>(loc, l, keptLse, w.row);
  }
  return success();
}

LogicalResult mlir::tfm::lowerFlashAttentionGrad(AttentionGradOp op,
                                                 BufferizedEntry &e) {
  Location loc = op.getLoc();
  // The rows' log-sum-exp, when the forward kernel kept it; asked for
  // before anything takes scratch memory of the op's own.
  Value keptLse;
  auto fwd = op.getOutput().getDefiningOp<AttentionOp>();
  if (fwd && gradReadingLogSumExp(fwd, e) == op) {
    bool fresh = false;
    keptLse = logSumExpRows(fwd, e, fresh);
    if (fresh)
      return op.emitError("internal error: the attention's backward pass "
                          "reads a log-sum-exp that its forward pass did not "
                          "keep");
  }
  // At the plan's strides: a transpose right after is a view.
  Value dq = e.stridedDestination(op.getQueryGrad()),
        dk = e.stridedDestination(op.getKeyGrad()),
        dv = e.stridedDestination(op.getValueGrad());
  if (!dq || !dk || !dv)
    return failure();
  AttentionOperands a(e, loc, op.getQuery(), op.getKey(), op.getValue(),
                      op.getMask(), attentionMaskKind(op), attentionScale(op),
                      op.getCausal());
  if (a.batches() == 0 || a.d == 0 || a.dv == 0)
    return success();
  Value o = e.bufferOf(op.getOutput()), dout = e.bufferOf(op.getGrad());
  int64_t queryRows = a.batches() * a.sq, keyRows = a.batches() * a.sk;
  auto rowsType =
      MemRefType::get({std::max<int64_t>(queryRows, 1)}, e.b.getF32Type());
  Value lse = keptLse ? keptLse : e.temporary(rowsType),
        delta = e.temporary(rowsType);

  // 1. A warp per query row: L_i (unless the forward kept it) and D_i,
  // then dQ_i.
  if (queryRows > 0) {
    WarpRows w(e.b, loc, queryRows, a.d);
    OpBuilder &kb = w.kb;
    auto [batchIdx, i] = a.split(kb, w.row, a.sq);
    SmallVector<Value> qRow = a.loadRow(kb, w.lane, a.q, batchIdx, i, a.d);
    SmallVector<Value> doRow = a.loadRow(kb, w.lane, dout, batchIdx, i, a.dv);
    Value d = a.dot(kb, doRow, a.loadRow(kb, w.lane, o, batchIdx, i, a.dv));
    Value end = a.keyEnd(kb, w);
    // L = m + log l. A row whose every key is masked has l = 0 and L = -inf,
    // and its p = exp(-inf - -inf) is NaN, as the unfused softmax's.
    Value l;
    if (keptLse) {
      l = kb.create<memref::LoadOp>(loc, keptLse, w.row);
    } else {
      auto stats = kb.create<scf::ForOp>(
          loc, a.index(kb, 0), end, a.index(kb, 1),
          ValueRange{a.f32(kb, -INFINITY), a.f32(kb, 0.0)},
          [&](OpBuilder &fb, Location, Value j, ValueRange carried) {
            SmallVector<Value> kRow =
                a.loadRow(fb, w.lane, a.k, batchIdx, j, a.d);
            Value s = a.score(fb, a.dot(fb, qRow, kRow), batchIdx, i, j);
            auto step = a.online(fb, carried[0], s);
            Value sum = fb.create<arith::AddFOp>(
                loc, fb.create<arith::MulFOp>(loc, carried[1], step.rescale),
                a.exp(fb, s, step.shift));
            fb.create<scf::YieldOp>(loc, ValueRange{step.m, sum});
          });
      l = kb.create<arith::AddFOp>(
          loc, a.shiftOf(kb, stats.getResult(0)),
          kb.create<math::LogOp>(loc, stats.getResult(1)));
    }
    int64_t cd = AttentionOperands::slots(a.d);
    auto grads = kb.create<scf::ForOp>(
        loc, a.index(kb, 0), end, a.index(kb, 1),
        SmallVector<Value>(cd, a.f32(kb, 0.0)),
        [&](OpBuilder &fb, Location, Value j, ValueRange carried) {
          SmallVector<Value> kRow =
              a.loadRow(fb, w.lane, a.k, batchIdx, j, a.d);
          Value s = a.score(fb, a.dot(fb, qRow, kRow), batchIdx, i, j);
          Value p = a.exp(fb, s, l);
          Value dp =
              a.dot(fb, doRow, a.loadRow(fb, w.lane, a.v, batchIdx, j, a.dv));
          Value ds = fb.create<arith::MulFOp>(
              loc, p, fb.create<arith::SubFOp>(loc, dp, d));
          fb.create<scf::YieldOp>(
              loc, axpy(fb, loc, SmallVector<Value>(carried), ds, kRow));
        });
    a.storeRow(kb, w.lane, w.live, dq, batchIdx, i,
               scaled(kb, loc, SmallVector<Value>(grads.getResults()),
                      a.f32(kb, a.scale)),
               a.d);
    OpBuilder sb =
        kb.create<scf::IfOp>(loc, w.storesRow()).getThenBodyBuilder();
    if (!keptLse)
      sb.create<memref::StoreOp>(loc, l, lse, w.row);
    sb.create<memref::StoreOp>(loc, d, delta, w.row);
  }

  // 2. A warp per key row j, over the query rows that see it: dK_j, dV_j.
  if (keyRows > 0) {
    WarpRows w(e.b, loc, keyRows, a.d);
    OpBuilder &kb = w.kb;
    auto [batchIdx, j] = a.split(kb, w.row, a.sk);
    SmallVector<Value> kRow = a.loadRow(kb, w.lane, a.k, batchIdx, j, a.d);
    SmallVector<Value> vRow = a.loadRow(kb, w.lane, a.v, batchIdx, j, a.dv);
    // The flat index of this batch's query row 0 in L and D.
    Value first = kb.create<arith::MulIOp>(
        loc, kb.create<arith::DivUIOp>(loc, w.row, a.index(kb, a.sk)),
        a.index(kb, a.sq));
    Value begin = a.queryBegin(kb, w);
    int64_t cd = AttentionOperands::slots(a.d),
            cv = AttentionOperands::slots(a.dv);
    SmallVector<Value> inits(cd + cv, a.f32(kb, 0.0));
    auto grads = kb.create<scf::ForOp>(
        loc, begin, a.index(kb, a.sq), a.index(kb, 1), inits,
        [&](OpBuilder &fb, Location, Value i, ValueRange carried) {
          SmallVector<Value> qRow =
              a.loadRow(fb, w.lane, a.q, batchIdx, i, a.d);
          SmallVector<Value> doRow =
              a.loadRow(fb, w.lane, dout, batchIdx, i, a.dv);
          Value s = a.score(fb, a.dot(fb, qRow, kRow), batchIdx, i, j);
          Value flat = fb.create<arith::AddIOp>(loc, first, i);
          Value p = a.exp(fb, s, fb.create<memref::LoadOp>(loc, lse, flat));
          Value dp = a.dot(fb, doRow, vRow);
          Value ds = fb.create<arith::MulFOp>(
              loc, p,
              fb.create<arith::SubFOp>(
                  loc, dp, fb.create<memref::LoadOp>(loc, delta, flat)));
          SmallVector<Value> dkNew = axpy(
              fb, loc, SmallVector<Value>(carried.take_front(cd)), ds, qRow);
          SmallVector<Value> dvNew = axpy(
              fb, loc, SmallVector<Value>(carried.drop_front(cd)), p, doRow);
          fb.create<scf::YieldOp>(loc, concat(dkNew, dvNew));
        });
    ValueRange results = grads.getResults();
    a.storeRow(kb, w.lane, w.live, dk, batchIdx, j,
               scaled(kb, loc, SmallVector<Value>(results.take_front(cd)),
                      a.f32(kb, a.scale)),
               a.d);
    a.storeRow(kb, w.lane, w.live, dv, batchIdx, j,
               SmallVector<Value>(results.drop_front(cd)), a.dv);
  }
  return success();
}
