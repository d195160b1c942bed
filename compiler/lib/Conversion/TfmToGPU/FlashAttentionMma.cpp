//===- FlashAttentionMma.cpp - Flash attention on the tensor cores --------===//
//
// tfm.attention under --dtype=f16 or bf16 as one kernel whose products run
// on the tensor cores (mma.sync m16n8k16, 16-bit operands, f32
// accumulators), its [Sq, Sk] scores never in memory. Q, K and V are first
// rounded into 16-bit copies (an elementwise kernel each, which may merge
// into their producers' kernels), so that the attention reads half the
// bytes and copies them into shared memory with cp.async, untouched by
// registers. Step by step:
//
// 1. A block takes 64 query rows of one batch element (grid: query tiles x
//    batch), with 4 warps of 16 rows each. It copies its Q tile and the
//    first K tile into shared memory (cp.async, 16 bytes a copy, rows past
//    the end zero-filled), waits for them, and each warp loads its rows of
//    Q as A fragments, one ldmatrix.x4 per 16 columns of the head, kept in
//    registers for the whole run.
// 2. For each tile of 64 keys (up to the one holding the block's last row
//    when causal), the copies overlap the products, one tile ahead:
//    a. wait for K's tile, then a barrier (every warp has also finished
//       reading the last V tile); start copying this tile's V;
//    b. S = Q Kᵀ: for each 8 keys, the head's 16-column steps multiply the
//       Q fragments by K's rows read as B fragments (K's rows are Kᵀ's
//       columns), two 8-key tiles to an ldmatrix.x4;
//    c. the scores are scaled by log2(e) / sqrt(d) (or the op's scale), so
//       that exp2 (ex2.approx) computes the softmax's exponentials, and
//       those past Sk or after the row (causal) become -inf;
//    d. the online softmax: each lane holds two rows (g and g + 8 of its
//       warp's 16), 16 scores of each; the row's maximum and sum reach the
//       four lanes that share it by two xor shuffles. The running sums and
//       output are rescaled by exp2(m_old - m_new);
//    e. wait for V's tile, then a barrier (every warp is done with K's);
//       start copying the next K tile;
//    f. O += P V: the probabilities, rounded to 16 bits, are already the A
//       fragments of the next product (an m16n8 accumulator pair is an
//       m16k16 operand's register layout), and V's rows are read as B
//       fragments with ldmatrix.x4.trans, two 8-column tiles to one.
// 3. Each lane divides its rows by their sums and writes them.
//
// Shared memory holds three [64, d] 16-bit tiles: 48 KB at d = 128, the
// most a block has without asking for more, so d is at most 128. Their
// 16-byte chunks are swizzled by row (swizzledColumn), so that ldmatrix reads
// without bank conflicts.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreTiles.h"
#include "WarpRows.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr int64_t kQueryRows = 64;
constexpr int64_t kKeys = 64;
constexpr int64_t kWarps = kQueryRows / 16;
constexpr int64_t kThreads = kWarps * warp::kWarpSize;

struct FlashKernel {
  OpBuilder &kb;
  Location loc;
  int64_t sq = 0, sk = 0, d = 0;
  double scale = 1.0;
  bool causal = false;
  Value q, k, v;             // [batch, S, d] 16-bit copies (as f16)
  Value out;                 // [B..., Sq, d] f32, at the plan's strides
  Value qTile, kTile, vTile; // [64, d] f16 in shared memory
  Value tx, warpIndex, lane, batch, firstRow;
  Value kvBatch; // the keys' and values' batch element: batch / G
  /// The mask, read through `maskMap` at (the batch's leading indices, row,
  /// key), and its kind; none without one.
  Value mask;
  AffineMap maskMap;
  MaskKind maskKind = MaskKind::none;
  SmallVector<int64_t> lead; // the dimensions `batch` flattens
  SmallVector<Value> leadIndices; // `batch` split into them
  /// The type the tensor cores read: f16, or bf16 held as f16 patterns.
  Type operandType;

  FlashKernel(OpBuilder &kb, Location loc) : kb(kb), loc(loc) {}

  Value index(int64_t value) {
    return kb.create<arith::ConstantIndexOp>(loc, value);
  }
  Value f32(double value) {
    return kb.create<arith::ConstantOp>(loc, kb.getF32FloatAttr(value));
  }
  Value add(Value a, Value b) { return kb.create<arith::AddIOp>(loc, a, b); }
  Value mul(Value a, int64_t b) {
    return kb.create<arith::MulIOp>(loc, a, index(b));
  }

  Value swizzle(Value row, Value col) {
    return swizzledColumn(kb, loc, row, col, d);
  }

  /// Starts the copies of rows [first, first + 64) of `src` into `tile`,
  /// 16 bytes a copy; rows at or past `rows` are zero-filled (their source
  /// clamped to the last row, which the copy reads nothing of).
  void issueCopies(Value src, Value first, int64_t rows, Value tile) {
    // A grouped-query attention's keys and values have a batch element per
    // group of query heads, which are the innermost batch dimension.
    Value from = src == q ? batch : kvBatch;
    int64_t chunks = d / kChunk;
    bool ragged = rows % kQueryRows != 0;
    for (int64_t j = 0; j < kQueryRows * chunks / kThreads; ++j) {
      Value i = add(tx, index(j * kThreads));
      Value r = kb.create<arith::DivUIOp>(loc, i, index(chunks));
      Value c = mul(kb.create<arith::RemUIOp>(loc, i, index(chunks)), 8);
      Value row = add(first, r);
      Value count;
      if (ragged) {
        Value inside = kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult,
                                                row, index(rows));
        count = kb.create<arith::SelectOp>(loc, inside, index(8), index(0));
        row = kb.create<arith::MinUIOp>(loc, row, index(rows - 1));
      }
      copyChunkAsync(kb, loc, tile, ValueRange{r, swizzle(r, c)}, src,
                     ValueRange{from, row, c}, count);
    }
  }

  /// Waits for all of this thread's copies (a barrier makes the other
  /// threads' visible).
  void commitAndWait() { waitGroups(kb, loc, commitGroup(kb, loc), 0); }

  /// An ldmatrix of `tiles` 8 x 8 matrices, each lane giving the address of
  /// (row, col) of the unswizzled tile, col a multiple of 8.
  Value ldmatrix(Value tile, Value row, Value col, int64_t tiles,
                 bool transpose) {
    return kb.create<nvgpu::LdMatrixOp>(
        loc, VectorType::get({tiles, 2}, kb.getF16Type()), tile,
        ValueRange{row, swizzle(row, col)}, transpose, tiles);
  }

  /// `value` rounded to the operand type, as the f16 the tiles hold: bf16
  /// goes as its bit pattern.
  Value narrow(Value value) {
    return roundToOperand(kb, loc, value, operandType);
  }

  Value mma(Value a, Value b, Value c) {
    return mmaSync(kb, loc, a, b, c, operandType);
  }

  /// 2^value as ex2.approx computes it (math.exp2 becomes libdevice's
  /// exp2f, which tfm-gpu-math-library defines as that instruction): the
  /// one exponential the special function unit has.
  Value exp2(Value value) { return kb.create<math::Exp2Op>(loc, value); }

  /// `value` combined over the four lanes that hold a row (lane / 4).
  Value quad(Value value, bool maximum) {
    return xorButterfly(kb, loc, value, /*lanes=*/4,
                        [&](OpBuilder &b, Value x, Value y) -> Value {
                          if (maximum)
                            return b.create<arith::MaximumFOp>(loc, x, y);
                          return b.create<arith::AddFOp>(loc, x, y);
                        });
  }

  /// The score at (row, key) with the mask applied as the neutral lowering
  /// does: added, or -inf where a boolean mask is false. Rows and keys past
  /// the ends read the last ones (their scores are dropped anyway).
  /// The indices of the block's batch element in the leading dimensions,
  /// made once at the kernel's start (leadIndices).
  void splitBatch() {
    leadIndices.assign(lead.size(), Value());
    Value rest = batch;
    for (int64_t i = int64_t(lead.size()) - 1; i >= 0; --i) {
      leadIndices[i] = kb.create<arith::RemUIOp>(loc, rest, index(lead[i]));
      rest = kb.create<arith::DivUIOp>(loc, rest, index(lead[i]));
    }
  }

  Value applyMask(Value score, Value row, Value key) {
    SmallVector<Value> at(leadIndices);
    at.push_back(kb.create<arith::MinUIOp>(loc, row, index(sq - 1)));
    at.push_back(kb.create<arith::MinUIOp>(loc, key, index(sk - 1)));
    Value value =
        kb.create<memref::LoadOp>(loc, mask, indicesAt(kb, loc, maskMap, at));
    if (maskKind == MaskKind::boolean)
      return kb.create<arith::SelectOp>(loc, value, score, f32(-INFINITY));
    value = maskValueAsF32(kb, loc, value);
    // The scores are in base 2 by now, so is what is added to them.
    return kb.create<arith::AddFOp>(
        loc, score, kb.create<arith::MulFOp>(loc, value, f32(M_LOG2E)));
  }

  /// A vector of `type` from `values` in row-major order.
  Value pack(VectorType type, ArrayRef<Value> values) {
    Value packed = kb.create<arith::ConstantOp>(loc, kb.getZeroAttr(type));
    int64_t cols = type.getDimSize(1);
    for (auto [i, value] : llvm::enumerate(values))
      packed = kb.create<vector::InsertOp>(
          loc, value, packed,
          ArrayRef<int64_t>{int64_t(i) / cols, int64_t(i) % cols});
    return packed;
  }

  Value element(Value fragment, int64_t r, int64_t e) {
    return kb.create<vector::ExtractOp>(loc, fragment, ArrayRef<int64_t>{r, e});
  }

  void build() {
    auto fragment = VectorType::get({2, 2}, kb.getF32Type());
    int64_t steps = d / 16, outTiles = d / 8;
    // Row g of the lane's group, and the first column it holds in an n8 tile.
    Value group = kb.create<arith::DivUIOp>(loc, lane, index(4));
    Value pair = mul(kb.create<arith::RemUIOp>(loc, lane, index(4)), 2);
    Value warpRow = mul(warpIndex, 16);

    // 1: Q and the first K tile into shared memory, then each warp's A
    // fragments.
    issueCopies(q, firstRow, sq, qTile);
    issueCopies(k, index(0), sk, kTile);
    commitAndWait();
    kb.create<gpu::BarrierOp>(loc);
    SmallVector<Value> qa;
    Value aRow = add(warpRow, kb.create<arith::RemUIOp>(loc, lane, index(16)));
    Value aCol = mul(kb.create<arith::DivUIOp>(loc, lane, index(16)), 8);
    for (int64_t s = 0; s < steps; ++s)
      qa.push_back(ldmatrix(qTile, aRow, add(aCol, index(16 * s)), 4, false));

    // 2: the key tiles, up to the one holding the block's last row when
    // causal (the same bound for every thread of the block).
    int64_t tiles = (sk + kKeys - 1) / kKeys;
    Value end = index(tiles);
    if (causal)
      end = kb.create<arith::MinUIOp>(
          loc, end,
          kb.create<arith::DivUIOp>(
              loc, add(firstRow, index(kQueryRows + kKeys - 1)), index(kKeys)));
    Value zero = kb.create<arith::ConstantOp>(
        loc, fragment, DenseElementsAttr::get(fragment, kb.getF32FloatAttr(0)));
    SmallVector<Value> inits{f32(-INFINITY), f32(-INFINITY), f32(0), f32(0)};
    inits.append(outTiles, zero);
    auto loop = kb.create<scf::ForOp>(loc, index(0), end, index(1), inits);
    {
      OpBuilder::InsertionGuard g(kb);
      kb.setInsertionPointToStart(loop.getBody());
      Value tile = loop.getInductionVar();
      ValueRange carried = loop.getRegionIterArgs();
      Value m[2] = {carried[0], carried[1]}, l[2] = {carried[2], carried[3]};
      SmallVector<Value> o(carried.drop_front(4));
      Value firstKey = mul(tile, kKeys);

      // a: K's tile in place, V's on its way.
      commitAndWait();
      kb.create<gpu::BarrierOp>(loc);
      issueCopies(v, firstKey, sk, vTile);

      // b: S = Q Kᵀ, eight n8 tiles of keys, two to an ldmatrix.x4: lane
      // 8 q + r gives key row 8 (q / 2) + r at column 8 (q % 2) of the step.
      Value q8 = kb.create<arith::DivUIOp>(loc, lane, index(8));
      Value r8 = kb.create<arith::RemUIOp>(loc, lane, index(8));
      Value half = mul(kb.create<arith::RemUIOp>(loc, q8, index(2)), 8);
      Value pairOffset = mul(kb.create<arith::DivUIOp>(loc, q8, index(2)), 8);
      Value accs[kKeys / 8];
      for (int64_t n = 0; n < kKeys / 8; n += 2) {
        accs[n] = accs[n + 1] = zero;
        for (int64_t s = 0; s < steps; ++s) {
          auto [even, odd] = splitFragmentPair(
              kb, loc,
              ldmatrix(kTile, add(add(pairOffset, r8), index(8 * n)),
                       add(half, index(16 * s)), 4, false));
          accs[n] = mma(qa[s], even, accs[n]);
          accs[n + 1] = mma(qa[s], odd, accs[n + 1]);
        }
      }
      // scores[n][r][e]: row g + 8 r, key 8 n + pair + e of the tile.
      Value scores[kKeys / 8][2][2];
      for (int64_t n = 0; n < kKeys / 8; ++n) {
        Value acc = accs[n];
        // c: scaled into base 2, and -inf past Sk or after the row.
        for (int64_t r = 0; r < 2; ++r)
          for (int64_t e = 0; e < 2; ++e) {
            Value score = kb.create<arith::MulFOp>(loc, element(acc, r, e),
                                                   f32(scale * M_LOG2E));
            Value key = add(firstKey, add(pair, index(8 * n + e)));
            Value row = add(firstRow, add(warpRow, add(group, index(8 * r))));
            Value masked;
            auto orMasked = [&](Value also) {
              masked =
                  masked ? kb.create<arith::OrIOp>(loc, masked, also) : also;
            };
            // Every tile is whole when the keys fill them.
            if (sk % kKeys != 0)
              orMasked(kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge,
                                                key, index(sk)));
            if (causal)
              orMasked(kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ugt,
                                                key, row));
            if (mask)
              score = applyMask(score, row, key);
            scores[n][r][e] = masked ? kb.create<arith::SelectOp>(
                                             loc, masked, f32(-INFINITY), score)
                                           .getResult()
                                     : score;
          }
      }

      // d: the online softmax of the lane's two rows.
      Value mNew[2], shift[2], rescale[2];
      for (int64_t r = 0; r < 2; ++r) {
        Value peak = m[r];
        for (int64_t n = 0; n < kKeys / 8; ++n)
          for (int64_t e = 0; e < 2; ++e)
            peak = kb.create<arith::MaximumFOp>(loc, peak, scores[n][r][e]);
        mNew[r] = quad(peak, /*maximum=*/true);
        // While a row has seen only -inf, exp(-inf - 0) = 0 rather than NaN.
        Value finite = kb.create<arith::CmpFOp>(loc, arith::CmpFPredicate::ONE,
                                                mNew[r], f32(-INFINITY));
        shift[r] = kb.create<arith::SelectOp>(loc, finite, mNew[r], f32(0));
        rescale[r] = exp2(kb.create<arith::SubFOp>(loc, m[r], shift[r]));
      }
      Value weights[kKeys / 8][2][2];
      Value sums[2] = {f32(0), f32(0)};
      for (int64_t n = 0; n < kKeys / 8; ++n)
        for (int64_t r = 0; r < 2; ++r)
          for (int64_t e = 0; e < 2; ++e) {
            weights[n][r][e] =
                exp2(kb.create<arith::SubFOp>(loc, scores[n][r][e], shift[r]));
            sums[r] = kb.create<arith::AddFOp>(loc, sums[r], weights[n][r][e]);
          }
      Value lNew[2];
      for (int64_t r = 0; r < 2; ++r)
        lNew[r] = kb.create<arith::AddFOp>(
            loc, kb.create<arith::MulFOp>(loc, l[r], rescale[r]),
            quad(sums[r], /*maximum=*/false));
      Value scaleRows =
          pack(fragment, {rescale[0], rescale[0], rescale[1], rescale[1]});
      for (Value &tileOut : o)
        tileOut = kb.create<arith::MulFOp>(loc, tileOut, scaleRows);

      // e: V's tile in place, the next K tile on its way.
      commitAndWait();
      kb.create<gpu::BarrierOp>(loc);
      Value next = add(tile, index(1));
      auto more = kb.create<scf::IfOp>(
          loc,
          kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, next, end),
          /*withElseRegion=*/false);
      {
        OpBuilder::InsertionGuard g(kb);
        kb.setInsertionPointToStart(more.thenBlock());
        issueCopies(k, mul(next, kKeys), sk, kTile);
      }

      // f: O += P V. Keys 16 t to 16 t + 15 are the A fragment of n8 tiles
      // 2 t and 2 t + 1: registers (g, lo), (g + 8, lo), (g, hi), (g + 8, hi).
      // V's rows are read transposed, two n8 tiles of the output to an
      // ldmatrix.x4: lane 8 q + r gives key row 8 (q % 2) + r of the 16 at
      // column 8 (q / 2) of the pair.
      auto halves = VectorType::get({4, 2}, kb.getF16Type());
      for (int64_t t = 0; t < kKeys / 16; ++t) {
        SmallVector<Value> parts;
        for (int64_t n : {2 * t, 2 * t + 1})
          for (int64_t r = 0; r < 2; ++r)
            for (int64_t e = 0; e < 2; ++e)
              parts.push_back(narrow(weights[n][r][e]));
        Value pa = pack(halves, parts);
        for (int64_t n = 0; n < outTiles; n += 2) {
          auto [even, odd] = splitFragmentPair(
              kb, loc,
              ldmatrix(vTile, add(add(half, r8), index(16 * t)),
                       add(pairOffset, index(8 * n)), 4, true));
          o[n] = mma(pa, even, o[n]);
          o[n + 1] = mma(pa, odd, o[n + 1]);
        }
      }
      SmallVector<Value> yielded{mNew[0], mNew[1], lNew[0], lNew[1]};
      yielded.append(o.begin(), o.end());
      kb.create<scf::YieldOp>(loc, yielded);
    }

    // 3: each lane's rows, divided by their sums.
    ValueRange results = loop.getResults();
    for (int64_t r = 0; r < 2; ++r) {
      Value row = add(firstRow, add(warpRow, add(group, index(8 * r))));
      Value inside = kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult,
                                              row, index(sq));
      auto store = kb.create<scf::IfOp>(loc, inside);
      OpBuilder sb = store.getThenBodyBuilder();
      for (int64_t n = 0; n < outTiles; ++n)
        for (int64_t e = 0; e < 2; ++e) {
          Value value = sb.create<arith::DivFOp>(
              loc,
              sb.create<vector::ExtractOp>(loc, results[4 + n],
                                           ArrayRef<int64_t>{r, e}),
              results[2 + r]);
          Value col = sb.create<arith::AddIOp>(
              loc, pair, sb.create<arith::ConstantIndexOp>(loc, 8 * n + e));
          SmallVector<Value> at(leadIndices);
          at.append({row, col});
          sb.create<memref::StoreOp>(loc, value, out, at);
        }
    }
  }
};

} // namespace

LogicalResult mlir::tfm::lowerFlashAttentionMma(AttentionOp op,
                                                BufferizedEntry &e) {
  OpBuilder &b = e.b;
  Location loc = op.getLoc();
  ArrayRef<int64_t> qs = op.getQuery().getType().getShape();
  int64_t sq = qs[qs.size() - 2], d = qs.back();
  int64_t sk = op.getKey().getType().getShape().drop_back().back();
  int64_t batches = product(qs.drop_back(2));
  // At the plan's strides: a transpose right after is a view.
  Value out = e.stridedDestination(op.getResult());
  if (!out)
    return failure();
  if (sq == 0 || batches == 0)
    return success();
  Type f16 = b.getF16Type();
  Type operandType = cast<GPUEntry>(e).narrowOperandType();
  // The operands rounded to the tensor cores' type, bf16 held as its f16
  // bit pattern (the type mma.sync and ldmatrix take), into dense copies;
  // an operand that is a view (heads split from a projection by a
  // transpose) is read through its strides, so the split costs no kernel.
  // A rotary embedding of the query or the keys (rotatedInAttention) is
  // applied in the same pass, so the rotated operand is never stored.
  int64_t group = op.getKVGroup();
  auto narrowed = [&](Value operand, int64_t rows) {
    auto shape = cast<RankedTensorType>(operand.getType()).getShape();
    Value copy = e.temporary(MemRefType::get(shape, f16));
    auto round = [&](OpBuilder &ob, Location l, Value x) -> Value {
      return roundToOperand(ob, l, x, operandType);
    };
    if (RotaryOp rotary = rotatedInAttention(operand))
      emitRotary(e, e.bufferOf(rotary.getInput()), e.bufferOf(rotary.getCos()),
                 e.bufferOf(rotary.getSin()), rotary.getInterleaved(), copy,
                 round);
    else
      e.elementwise({e.bufferOf(operand)}, copy,
                    [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                      return round(ob, l, a[0]);
                    });
    int64_t elements = operand == op.getQuery() ? batches : batches / group;
    return e.reshape(copy, MemRefType::get({elements, rows, d}, f16));
  };
  Value q = narrowed(op.getQuery(), sq);
  Value k = op.getKey() == op.getQuery() ? q : narrowed(op.getKey(), sk);
  Value v = op.getValue() == op.getKey()     ? k
            : op.getValue() == op.getQuery() ? q
                                             : narrowed(op.getValue(), sk);
  Value maskBuffer = op.getMask() ? e.bufferOf(op.getMask()) : Value();
  auto shared = MemRefType::get(
      {kQueryRows, d}, b.getF16Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  auto c = [&](int64_t value) -> Value {
    return b.create<arith::ConstantIndexOp>(loc, value);
  };
  auto launch = b.create<gpu::LaunchOp>(
      loc, c((sq + kQueryRows - 1) / kQueryRows), c(batches), c(1), c(kThreads),
      c(1), c(1), /*dynamicSharedMemorySize=*/nullptr,
      /*asyncTokenType=*/nullptr, ValueRange{},
      TypeRange{shared, shared, shared});
  // Left to itself, ptxas holds this kernel to 128 registers for four
  // blocks per SM and, at head dim 64, spills a register to local memory.
  // Asking for one block lets it take what the tiles need (144 at head dim
  // 64, 222 at 128): three blocks of four warps still fit an SM.
  launch->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  b.getI32IntegerAttr(1));
  OpBuilder kb(b.getContext());
  kb.setInsertionPointToStart(&launch.getBody().front());
  kb.create<gpu::TerminatorOp>(loc);
  kb.setInsertionPointToStart(&launch.getBody().front());
  FlashKernel kernel(kb, loc);
  kernel.sq = sq;
  kernel.sk = sk;
  kernel.d = d;
  kernel.scale = attentionScale(op);
  kernel.causal = op.getCausal();
  kernel.q = q;
  kernel.k = k;
  kernel.v = v;
  kernel.out = out;
  ArrayRef<BlockArgument> tiles = launch.getWorkgroupAttributions();
  kernel.qTile = tiles[0];
  kernel.kTile = tiles[1];
  kernel.vTile = tiles[2];
  kernel.tx = launch.getThreadIds().x;
  kernel.batch = launch.getBlockIds().y;
  kernel.kvBatch = group == 1
                       ? kernel.batch
                       : kb.create<arith::DivUIOp>(
                             loc, kernel.batch,
                             kb.create<arith::ConstantIndexOp>(loc, group));
  kernel.lead.assign(qs.begin(), qs.end() - 2);
  kernel.splitBatch();
  kernel.operandType = operandType;
  if (maskBuffer) {
    // The mask broadcasts to the scores [B..., Sq, Sk] from the right.
    kernel.mask = maskBuffer;
    SmallVector<int64_t> scores(qs.drop_back());
    scores.push_back(sk);
    kernel.maskMap = e.broadcastMap(
        cast<MemRefType>(kernel.mask.getType()).getShape(), scores);
    kernel.maskKind = attentionMaskKind(op);
  }
  Value warpSize = kb.create<arith::ConstantIndexOp>(loc, warp::kWarpSize);
  kernel.warpIndex = kb.create<arith::DivUIOp>(loc, kernel.tx, warpSize);
  kernel.lane = kb.create<arith::RemUIOp>(loc, kernel.tx, warpSize);
  kernel.firstRow = kb.create<arith::MulIOp>(
      loc, launch.getBlockIds().x,
      kb.create<arith::ConstantIndexOp>(loc, kQueryRows));
  kernel.build();
  return success();
}
