//===- StagedGemm.cpp - The generated GEMM, staged through shared memory --===//
//
// A GEMM of f16 or bf16 operands with f32 accumulators (the neutral
// lowering's under --dtype=f16 or bf16, which runs where the GEMM library
// is absent or declines) as one kernel that stages its operands through
// shared memory, as the library's own kernels do. Step by step:
//
// 1. A block of 4 warps takes a 128 x 128 tile of one batch element's
//    output (grid: column tiles x row tiles x batch). Its warps split it
//    2 x 2: each computes 64 x 64 outputs as 4 x 8 mma.sync m16n8k16
//    tiles, 128 f32 accumulators per lane, started at the fill's value.
// 2. The reduction goes in steps of 32. A step's A tile (128 x 32) and B
//    tile (32 x 128) are copied into shared memory by cp.async, each in
//    the orientation it has in global memory so that every copy moves 16
//    contiguous bytes, into one of three stages: while the block
//    multiplies step s, the copies of steps s + 1 and s + 2 are in flight.
//    Rows and columns past the matrix's edges are zero-filled by the
//    copies (a source count of 0), so the products there are zero and
//    never stored. Each tile's 16-byte chunks are swizzled by row
//    (swizzledColumn), so that ldmatrix reads them without bank conflicts.
// 3. Per step: wait until step s's group has landed (cp.async.wait_group
//    1: only step s + 1's may still be in flight), then a barrier; start
//    step s + 2's copies into the stage step s - 1 used, which every warp
//    has finished reading since all passed the barrier; then, for each 16
//    of the step's 32, each warp reads its 4 A fragments (ldmatrix.x4,
//    .trans when A lies [K, M]) and 8 B fragments (two to an ldmatrix.x4,
//    .trans when B lies [K, N]) and issues 32 mma.sync.
// 4. Each lane applies the epilogue (the elementwise op that rewrote the
//    GEMM's output in place: a linear layer's bias and activation) to its
//    accumulators, and stores those inside the matrix.
//
// Shared memory: three stages of two [128, 32] 16-bit tiles, 48 KB, the
// most a block has without asking for more.
//
//===----------------------------------------------------------------------===//

#include "StagedGemm.h"
#include "TensorCoreTiles.h"
#include "tfm/Conversion/GPUEmulation/WarpSemantics.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr int64_t kTileM = 128, kTileN = 128, kTileK = 32, kStages = 3;
constexpr int64_t kWarpTileM = 64, kWarpTileN = 64;
constexpr int64_t kWarpsN = kTileN / kWarpTileN;
constexpr int64_t kThreads = kTileM / kWarpTileM * kWarpsN * warp::kWarpSize;
constexpr int64_t kFragsM = kWarpTileM / 16, kFragsN = kWarpTileN / 8;

/// The f16 view of a bf16 operand's bytes (cp.async and ldmatrix move
/// f16; the mma.sync are marked to multiply bf16), or the operand itself.
Value asF16(OpBuilder &b, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getElementType().isF16())
    return buffer;
  return retypedView(b, buffer, b.getF16Type());
}

struct StagedGemm : GemmKernelBuilder {
  Type operandType;
  Value lane, warpRow, warpCol;

  using GemmKernelBuilder::GemmKernelBuilder;

  /// Starts the copies of `o`'s tile for reduction step `step` into stage
  /// `stage`: 16 bytes a copy, 4 a thread.
  void issueCopies(const GemmOperand &o, Value step, Value stage) override {
    int64_t chunks = o.cols / kChunk;
    for (int64_t j = 0; j < o.rows * chunks / kThreads; ++j) {
      Value i = add(tx, j * kThreads);
      Value r = div(i, chunks);
      Value c = mul(rem(i, chunks), kChunk);
      copyChunk(o, step, r, c,
                ValueRange{stage, r, swizzledColumn(kb, loc, r, c, o.cols)});
    }
  }

  /// An ldmatrix of `count` 8 x 8 matrices from `o`'s tile in `stage`,
  /// this lane giving the address of (row, col), col a multiple of 8.
  Value ldmatrix(const GemmOperand &o, Value stage, Value row, Value col,
                 int64_t count, bool transpose) {
    return kb.create<nvgpu::LdMatrixOp>(
        loc, VectorType::get({count, 2}, kb.getF16Type()), o.tiles,
        ValueRange{stage, row, swizzledColumn(kb, loc, row, col, o.cols)},
        transpose, count);
  }

  /// A's fragment i (rows 16 i of the warp's 64) at reduction offset k0 of
  /// the tile. Stored [M, K], lanes 0-15 give rows 0-15 at k0 and lanes
  /// 16-31 the same rows at k0 + 8; stored [K, M], lane 8 j + r gives row
  /// k0 + 8 (j / 2) + r at column 8 (j % 2), which .trans turns into the
  /// same four matrices.
  Value fragmentA(Value stage, int64_t i, int64_t k0) {
    Value first = add(warpRow, 16 * i);
    if (a.reductionInner)
      return ldmatrix(a, stage, add(first, rem(lane, 16)),
                      add(mul(div(lane, 16), 8), k0), 4, false);
    Value j = div(lane, 8);
    Value row = add(add(mul(div(j, 2), 8), rem(lane, 8)), k0);
    return ldmatrix(a, stage, row, add(first, mul(rem(j, 2), 8)), 4, true);
  }

  /// B's fragments j and j + 1 (columns 8 j to 8 j + 15 of the warp's 64)
  /// at reduction offset k0, by one ldmatrix.x4 whose matrices 0 and 1 are
  /// fragment j's two registers and 2 and 3 fragment j + 1's. Lane
  /// 8 q + r gives, stored [N, K], row 8 (q / 2) + r at k0 + 8 (q % 2);
  /// stored [K, N], row k0 + 8 (q % 2) + r at column 8 (q / 2), read
  /// transposed.
  std::pair<Value, Value> fragmentsB(Value stage, int64_t j, int64_t k0) {
    Value first = add(warpCol, 8 * j);
    Value q = div(lane, 8), r = rem(lane, 8);
    Value half = mul(rem(q, 2), 8), pair = mul(div(q, 2), 8);
    Value both = bOp.reductionInner
                     ? ldmatrix(bOp, stage, add(add(first, pair), r),
                                add(half, k0), 4, false)
                     : ldmatrix(bOp, stage, add(add(half, r), k0),
                                add(first, pair), 4, true);
    return splitFragmentPair(kb, loc, both);
  }

  void build() {
    int64_t steps = (ranges[redDim] + kTileK - 1) / kTileK;
    auto fragment = VectorType::get({2, 2}, kb.getF32Type());
    Value zero = kb.create<arith::ConstantOp>(
        loc, fragment,
        DenseElementsAttr::get(fragment, kb.getFloatAttr(kb.getF32Type(),
                                                         start)));
    // 1: the warp's place in the block's tile.
    Value warpIndex = div(tx, warp::kWarpSize);
    warpRow = mul(div(warpIndex, kWarpsN), kWarpTileM);
    warpCol = mul(rem(warpIndex, kWarpsN), kWarpTileN);

    // 2: the first two steps' copies, a group each (empty past the end).
    Value firstGroup = copyFirstSteps(kStages, steps);

    SmallVector<Value> init(kFragsM * kFragsN, zero);
    auto loop = kb.create<scf::ForOp>(loc, index(0), index(steps), index(1),
                                      init);
    {
      OpBuilder::InsertionGuard g(kb);
      kb.setInsertionPointToStart(loop.getBody());
      Value step = loop.getInductionVar();
      SmallVector<Value> acc(loop.getRegionIterArgs());
      // 3: this step's tiles in place; the step after next on its way.
      waitGroups(kb, loc, firstGroup, kStages - 2);
      kb.create<gpu::BarrierOp>(loc);
      copyStepAhead(step, kStages, steps);
      Value stage = rem(step, kStages);
      for (int64_t k0 = 0; k0 < kTileK; k0 += 16) {
        SmallVector<Value> as, bs;
        for (int64_t i = 0; i < kFragsM; ++i)
          as.push_back(fragmentA(stage, i, k0));
        for (int64_t j = 0; j < kFragsN; j += 2) {
          auto [even, odd] = fragmentsB(stage, j, k0);
          bs.push_back(even);
          bs.push_back(odd);
        }
        for (int64_t i = 0; i < kFragsM; ++i)
          for (int64_t j = 0; j < kFragsN; ++j)
            acc[i * kFragsN + j] =
                mmaSync(kb, loc, as[i], bs[j], acc[i * kFragsN + j],
                        operandType);
      }
      kb.create<scf::YieldOp>(loc, acc);
    }

    // 4: the epilogue and the stores. Lane (g, t) holds rows g and g + 8
    // of each m16n8 tile, columns 2 t and 2 t + 1.
    Value group = div(lane, 4);
    Value pair = mul(rem(lane, 4), 2);
    for (int64_t i = 0; i < kFragsM; ++i)
      for (int64_t j = 0; j < kFragsN; ++j)
        for (int64_t r = 0; r < 2; ++r)
          for (int64_t e = 0; e < 2; ++e) {
            Value row = add(add(rowBase, warpRow), add(group, 16 * i + 8 * r));
            Value col = add(add(colBase, warpCol), add(pair, 8 * j + e));
            SmallVector<Value> at(batchIvs);
            at.push_back(row);
            at.push_back(col);
            Value value = kb.create<vector::ExtractOp>(
                loc, loop.getResult(i * kFragsN + j), ArrayRef<int64_t>{r, e});
            storeOutput(at, [&](OpBuilder &, Location) { return value; });
          }
  }
};

} // namespace

std::string mlir::tfm::stagedGemmOperands(linalg::GenericOp op, int64_t tileM,
                                          int64_t tileN, int64_t tileK,
                                          int64_t minK,
                                          std::optional<GemmOperand> &a,
                                          std::optional<GemmOperand> &b) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned redDim = ranges.size() - 1, rowDim = redDim - 2, colDim = redDim - 1;
  int64_t m = ranges[rowDim], n = ranges[colDim], k = ranges[redDim];
  if (m < tileM / 2 || n < tileN / 2 || k < minK)
    return llvm::formatv("it is {0} x {1} x {2} (M x N x K), smaller than "
                         "{3} x {4} x {5}",
                         m, n, k, tileM / 2, tileN / 2, minK)
        .str();
  std::string whyNot;
  a = gemmOperandOf(op, 0, rowDim, redDim, tileM, tileK, whyNot);
  if (a)
    b = gemmOperandOf(op, 1, colDim, redDim, tileN, tileK, whyNot);
  return whyNot;
}

std::optional<GemmOperand>
mlir::tfm::gemmOperandOf(linalg::GenericOp op, unsigned input, unsigned own,
                         unsigned red, int64_t ownTile, int64_t tileK,
                         std::string &whyNot) {
  MLIRContext *ctx = op.getContext();
  Value buffer = op.getDpsInputs()[input];
  auto type = cast<MemRefType>(buffer.getType());
  AffineMap map = op.getIndexingMapsArray()[input];
  StringRef name = input == 0 ? "A" : "B";
  StringRef ownName = input == 0 ? "M" : "N";
  auto misfit = [&](const Twine &why) {
    whyNot = (name + " " + why).str();
    return std::nullopt;
  };
  auto last = map.getNumResults() < 2
                  ? nullptr
                  : dyn_cast<AffineDimExpr>(map.getResults().back());
  if (!last || (last.getPosition() != own && last.getPosition() != red))
    return misfit("is contiguous along neither " + ownName + " nor K");
  GemmOperand o;
  o.map = map;
  o.inner = last.getPosition();
  o.outer = o.inner == own ? red : own;
  o.reductionInner = o.inner == red;
  if (!map.getResultPosition(getAffineDimExpr(o.outer, ctx)))
    return misfit("is broadcast along " +
                  (o.reductionInner ? ownName : StringRef("K")));
  SmallVector<int64_t> strides;
  int64_t offset;
  bool aligned = succeeded(getStridesAndOffset(type, strides, offset)) &&
                 strides.back() == 1 && !ShapedType::isDynamic(offset) &&
                 offset % kChunk == 0;
  for (int64_t s : ArrayRef<int64_t>(strides).drop_back())
    aligned &= !ShapedType::isDynamic(s) && s % kChunk == 0;
  if (!aligned)
    return misfit("has rows that do not start 16-byte aligned");
  if (op.getStaticLoopRanges()[o.inner] % kChunk != 0)
    return misfit("has rows of a length that is not a multiple of 8");
  o.rows = o.reductionInner ? ownTile : tileK;
  o.cols = o.reductionInner ? tileK : ownTile;
  o.buffer = buffer;
  return o;
}

GemmKernelBuilder::GemmKernelBuilder(linalg::GenericOp op, const GemmOperand &a,
                                     const GemmOperand &b,
                                     linalg::GenericOp epilogue,
                                     const APFloat &start, int64_t tileM,
                                     int64_t tileN, int64_t tileK,
                                     int64_t threads, int64_t dynamicShared,
                                     TypeRange workgroup)
    : kb(op.getContext()), loc(op.getLoc()), start(start), tileM(tileM),
      tileN(tileN), tileK(tileK), ranges(op.getStaticLoopRanges()), a(a),
      bOp(b), out(op.getDpsInits()[0]), epilogue(epilogue) {
  redDim = ranges.size() - 1;
  rowDim = redDim - 2;
  colDim = redDim - 1;
  int64_t m = ranges[rowDim], n = ranges[colDim], batches = 1;
  for (unsigned d = 0; d < rowDim; ++d)
    batches *= ranges[d];
  OpBuilder ob(op);
  auto c = [&](int64_t v) -> Value {
    return ob.create<arith::ConstantIndexOp>(loc, v);
  };
  Value shared = dynamicShared
                     ? ob.create<arith::ConstantIntOp>(loc, dynamicShared, 32)
                     : Value();
  launch = ob.create<gpu::LaunchOp>(
      loc, c((n + tileN - 1) / tileN), c((m + tileM - 1) / tileM), c(batches),
      c(threads), c(1), c(1), shared, /*asyncTokenType=*/nullptr, ValueRange{},
      workgroup);
  kb.setInsertionPointToStart(&launch.getBody().front());
  kb.create<gpu::TerminatorOp>(loc);
  kb.setInsertionPointToStart(&launch.getBody().front());
  tx = launch.getThreadIds().x;
  rowBase = mul(launch.getBlockIds().y, tileM);
  colBase = mul(launch.getBlockIds().x, tileN);
  // The batch's indices, from the flattened block index.
  Value rest = launch.getBlockIds().z;
  batchIvs.resize(rowDim);
  for (int64_t d = int64_t(rowDim) - 1; d >= 0; --d) {
    batchIvs[d] = rem(rest, ranges[d]);
    rest = div(rest, ranges[d]);
  }
}

Value GemmKernelBuilder::index(int64_t v) {
  return kb.create<arith::ConstantIndexOp>(loc, v);
}
Value GemmKernelBuilder::add(Value x, Value y) {
  return kb.create<arith::AddIOp>(loc, x, y);
}
Value GemmKernelBuilder::add(Value x, int64_t y) { return add(x, index(y)); }
Value GemmKernelBuilder::mul(Value x, int64_t y) {
  return kb.create<arith::MulIOp>(loc, x, index(y));
}
Value GemmKernelBuilder::div(Value x, int64_t y) {
  return kb.create<arith::DivUIOp>(loc, x, index(y));
}
Value GemmKernelBuilder::rem(Value x, int64_t y) {
  return kb.create<arith::RemUIOp>(loc, x, index(y));
}

Value GemmKernelBuilder::tileStart(unsigned dim, Value step) {
  if (dim == redDim)
    return mul(step, tileK);
  return dim == rowDim ? rowBase : colBase;
}

void GemmKernelBuilder::copyChunk(const GemmOperand &o, Value step, Value r,
                                  Value c, ValueRange dstIndices) {
  Value outerAt = add(tileStart(o.outer, step), r);
  Value innerAt = add(tileStart(o.inner, step), c);
  int64_t outerExtent = ranges[o.outer], innerExtent = ranges[o.inner];
  Value inside;
  auto bound = [&](Value &at, int64_t extent, int64_t last) {
    Value in = kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, at,
                                        index(extent));
    inside = inside ? kb.create<arith::AndIOp>(loc, inside, in) : in;
    at = kb.create<arith::MinUIOp>(loc, at, index(last));
  };
  if (outerExtent % o.rows != 0)
    bound(outerAt, outerExtent, outerExtent - 1);
  if (innerExtent % o.cols != 0)
    bound(innerAt, innerExtent, innerExtent - kChunk);
  Value count =
      inside ? kb.create<arith::SelectOp>(loc, inside, index(kChunk), index(0))
                   .getResult()
             : Value();
  copyChunkAsync(kb, loc, o.tiles, dstIndices, o.buffer,
                 indicesOf(o, outerAt, innerAt), count);
}

SmallVector<Value> GemmKernelBuilder::indicesOf(const GemmOperand &o,
                                                Value outerAt, Value innerAt) {
  SmallVector<Value> loops(batchIvs);
  loops.append(ranges.size() - batchIvs.size(), index(0));
  loops[o.outer] = outerAt;
  loops[o.inner] = innerAt;
  return indicesAt(kb, loc, o.map, loops);
}

Value GemmKernelBuilder::copyFirstSteps(int64_t stages, int64_t steps) {
  Value first;
  for (int64_t s = 0; s < stages - 1; ++s) {
    if (s < steps) {
      issueCopies(a, index(s), index(s));
      issueCopies(bOp, index(s), index(s));
    }
    Value group = commitGroup(kb, loc);
    if (!first)
      first = group;
  }
  return first;
}

void GemmKernelBuilder::forStepAhead(Value step, int64_t stages, int64_t steps,
                                     function_ref<void(Value, Value)> issue) {
  Value ahead = add(step, stages - 1);
  auto more = kb.create<scf::IfOp>(
      loc,
      kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, ahead,
                               index(steps)),
      /*withElseRegion=*/false);
  OpBuilder::InsertionGuard g(kb);
  kb.setInsertionPointToStart(more.thenBlock());
  issue(ahead, rem(ahead, stages));
}

void GemmKernelBuilder::copyStepAhead(Value step, int64_t stages,
                                      int64_t steps) {
  forStepAhead(step, stages, steps, [&](Value ahead, Value stage) {
    issueCopies(a, ahead, stage);
    issueCopies(bOp, ahead, stage);
  });
  commitGroup(kb, loc);
}

void GemmKernelBuilder::storeOutput(
    ArrayRef<Value> at, function_ref<Value(OpBuilder &, Location)> value) {
  auto store = [&](OpBuilder &b, Location l) {
    Value v = value(b, l);
    if (epilogue)
      v = applyGemmEpilogue(b, l, epilogue, out, v, at);
    b.create<memref::StoreOp>(l, v, out, at);
  };
  int64_t m = ranges[rowDim], n = ranges[colDim];
  if (m % tileM == 0 && n % tileN == 0) {
    store(kb, loc);
    return;
  }
  Value inside = kb.create<arith::AndIOp>(
      loc,
      kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, at[rowDim],
                               index(m)),
      kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, at[colDim],
                               index(n)));
  kb.create<scf::IfOp>(loc, inside, [&](OpBuilder &tb, Location tl) {
    store(tb, tl);
    tb.create<scf::YieldOp>(tl);
  });
}

void GemmKernelBuilder::replaced(linalg::GenericOp op, Operation *fill) {
  op.erase();
  fill->erase();
  if (epilogue)
    epilogue.erase();
}

std::string mlir::tfm::stageGemmOnTensorCores(linalg::GenericOp op,
                                              FloatType half,
                                              const APFloat &start,
                                              Operation *fill,
                                              linalg::GenericOp epilogue) {
  // Smaller GEMMs are the warp tiles'.
  std::optional<GemmOperand> a, bOp;
  if (std::string whyNot =
          stagedGemmOperands(op, kTileM, kTileN, kTileK, kTileK, a, bOp);
      !whyNot.empty())
    return whyNot;
  OpBuilder b(op);
  Value a16 = asF16(b, a->buffer), b16 = asF16(b, bOp->buffer);
  if (!a16 || !b16) {
    // The view made of one operand, unused.
    for (auto [made, original] : {std::pair{a16, a->buffer}, {b16, bOp->buffer}})
      if (made && made != original)
        made.getDefiningOp()->erase();
    return "an operand's buffer cannot be viewed as 16-bit values";
  }
  a->buffer = a16;
  bOp->buffer = b16;

  auto workgroup =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto tileType = [&](const GemmOperand &o) {
    return MemRefType::get({kStages, o.rows, o.cols}, b.getF16Type(),
                           MemRefLayoutAttrInterface(), workgroup);
  };
  StagedGemm kernel(op, *a, *bOp, epilogue, start, kTileM, kTileN, kTileK,
                    kThreads, /*dynamicShared=*/0,
                    TypeRange{tileType(*a), tileType(*bOp)});
  kernel.operandType = half;
  kernel.a.tiles = kernel.launch.getWorkgroupAttributions()[0];
  kernel.bOp.tiles = kernel.launch.getWorkgroupAttributions()[1];
  kernel.lane = kernel.rem(kernel.tx, warp::kWarpSize);
  kernel.build();
  kernel.replaced(op, fill);
  return "";
}
