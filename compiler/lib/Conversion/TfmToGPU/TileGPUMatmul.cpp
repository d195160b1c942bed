//===- TileGPUMatmul.cpp - tfm-tile-gpu-matmul ----------------------------===//
//
// The backend-neutral lowering writes every GEMM as a zero fill and one
// linalg.generic whose last loop is the reduction. Mapped as it is, each
// GPU thread computes one output by a serial dot product, loading two
// operands for every multiply-add. This pass gives each thread a tile of
// `tile-m` × `tile-n` outputs instead, kept in registers across the
// reduction: per step of the reduction a thread loads tile-m values of the
// operand that does not vary along the columns and tile-n of the one that
// does not vary along the rows, and does tile-m × tile-n multiply-adds.
//
//   linalg.fill ins(%zero) outs(%C)
//   linalg.generic {... ["parallel", "parallel", "reduction"]}
//       ins(%A, %B) outs(%C)
//     =>
//   scf.parallel (%ti, %tj) = ... to (ceil(M / tm), ceil(N / tn)) {
//     %acc:tm*tn = scf.for %k = 0 to K iter_args(%zero, ...) {
//       loads of %A (tm) and %B (tn); tm * tn copies of the body
//     }
//     guarded stores of %acc into %C
//   }
//
// Every output still folds the body over the reduction in the same order
// from the same start; the backend may now fuse the body's multiply and
// add. Rows and columns past the matrix's edge are clamped for loads and
// skipped for stores. tfm-map-to-gpu then spreads the parallel loop over
// the grid, as for every other nest.
//
//===----------------------------------------------------------------------===//

#include "StagedGemm.h"
#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TILEGPUMATMULPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Whether `op` is a contraction this pass tiles: two inputs and one
/// output on buffers, static loops, at least two parallel loops followed by
/// one reduction, the output indexed by the parallel loops in order, the
/// inputs by single loops or constants, and each of the two innermost
/// parallel loops skipped by some input, so that a tile reuses loads.
bool isTileableContraction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1)
    return false;
  auto iterators = op.getIteratorTypesArray();
  unsigned loops = iterators.size();
  if (loops < 3 || iterators.back() != utils::IteratorType::reduction)
    return false;
  for (unsigned i = 0; i + 1 < loops; ++i)
    if (iterators[i] != utils::IteratorType::parallel)
      return false;
  if (llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return false;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned parallel = loops - 1;
  AffineMap outMap = maps[2];
  if (outMap.getNumResults() != parallel)
    return false;
  for (unsigned i = 0; i < parallel; ++i) {
    auto d = dyn_cast<AffineDimExpr>(outMap.getResult(i));
    if (!d || d.getPosition() != i)
      return false;
  }
  bool rowsReused = false, columnsReused = false;
  for (AffineMap map : ArrayRef(maps).take_front(2)) {
    if (!readsByLoopsOrConstants(map))
      return false;
    rowsReused |= !map.isFunctionOfDim(parallel - 1);
    columnsReused |= !map.isFunctionOfDim(parallel - 2);
  }
  if (!rowsReused || !columnsReused)
    return false;
  // A body that asks for its position would need the tile's indices.
  return op.getBody()->getOps<linalg::IndexOp>().empty();
}

/// The fill of `op`'s output that the contraction starts from, when nothing
/// between them touches memory: its value then starts every accumulator
/// and the fill goes away. The neutral lowering's fills are generics that
/// yield a constant; linalg.fill is taken too.
Operation *startingFill(linalg::GenericOp op) {
  Value out = op.getDpsInits()[0];
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(prev))
      if (fill.hasPureBufferSemantics() && fill.getDpsInits()[0] == out)
        return fill;
    if (auto fill = dyn_cast<linalg::GenericOp>(prev))
      if (fill.hasPureBufferSemantics() && fill.getNumDpsInputs() == 0 &&
          fill.getNumDpsInits() == 1 && fill.getDpsInits()[0] == out &&
          fill.getNumParallelLoops() == fill.getNumLoops() &&
          fill.getIndexingMapsArray()[0].isIdentity() &&
          fill.getBody()->getArgument(0).use_empty() &&
          llvm::all_of(fill.getBody()->without_terminator(), [](Operation &o) {
            return isa<arith::ConstantOp>(o);
          }))
        return fill;
    if (!isMemoryEffectFree(prev))
      return nullptr;
  }
  return nullptr;
}

/// The value `fill` writes, built at `b`.
Value fillValue(OpBuilder &b, Operation *fill) {
  if (auto f = dyn_cast<linalg::FillOp>(fill))
    return f.getInputs()[0];
  Block *body = cast<linalg::GenericOp>(fill).getBody();
  IRMapping map;
  for (Operation &o : body->without_terminator())
    b.clone(o, map);
  return map.lookupOrDefault(body->getTerminator()->getOperand(0));
}

/// Lets the backend fuse a multiply and the add of its product into one
/// instruction (an FMA, which rounds once where the pair rounds twice): it
/// halves a tile's arithmetic.
void allowContraction(Operation *op) {
  auto fm = dyn_cast<arith::ArithFastMathInterface>(op);
  if (!fm)
    return;
  arith::FastMathFlagsAttr attr = fm.getFastMathFlagsAttr();
  arith::FastMathFlags flags =
      attr ? attr.getValue() : arith::FastMathFlags::none;
  op->setAttr(fm.getFastMathAttrName(),
              arith::FastMathFlagsAttr::get(
                  op->getContext(), flags | arith::FastMathFlags::contract));
}

/// The shape of one tensor-core instruction (mma.sync m16n8k16, f16 or
/// bf16 operands, f32 accumulators), which vector-to-nvgpu distributes over
/// a warp's 32 lanes.
constexpr int64_t kMmaM = 16, kMmaN = 8, kMmaK = 16;

/// The operands' type when the generic's body is `acc + extf(a) * extf(b)`
/// with f16 or bf16 `a` and `b` of one type and an f32 `acc`: the neutral
/// lowering's GEMM under --dtype=f16 or bf16.
FloatType halfOperandsOf(linalg::GenericOp op) {
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || !add.getType().isF32() || add.getLhs() != body->getArgument(2) ||
      body->getOperations().size() != 5)
    return {};
  auto mul = add.getRhs().getDefiningOp<arith::MulFOp>();
  if (!mul)
    return {};
  auto extended = [&](Value v, unsigned arg) -> FloatType {
    auto ext = v.getDefiningOp<arith::ExtFOp>();
    if (!ext || ext.getIn() != body->getArgument(arg))
      return {};
    Type in = ext.getIn().getType();
    return in.isF16() || in.isBF16() ? cast<FloatType>(in) : FloatType();
  };
  FloatType lhs = extended(mul.getLhs(), 0);
  return lhs && lhs == extended(mul.getRhs(), 1) ? lhs : FloatType();
}

/// The elementwise op right after `op` that rewrites its output in place
/// (the neutral lowering's bias and activation of a linear layer), when
/// nothing between them touches memory: all-parallel over the output's
/// dimensions, reading the output by the identity and its other inputs by
/// single loops or constants, with no position asked. Its body then runs
/// on each accumulator before the store, saving a kernel and a pass over
/// the output.
linalg::GenericOp followingEpilogue(linalg::GenericOp op) {
  Value out = op.getDpsInits()[0];
  unsigned rank = cast<MemRefType>(out.getType()).getRank();
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    auto epilogue = dyn_cast<linalg::GenericOp>(next);
    if (!epilogue) {
      if (!isMemoryEffectFree(next))
        return nullptr;
      continue;
    }
    if (!epilogue.hasPureBufferSemantics() || epilogue.getNumDpsInits() != 1 ||
        epilogue.getDpsInits()[0] != out ||
        epilogue.getNumLoops() != rank ||
        epilogue.getNumParallelLoops() != rank ||
        !epilogue.getBody()->getOps<linalg::IndexOp>().empty())
      return nullptr;
    SmallVector<AffineMap> maps = epilogue.getIndexingMapsArray();
    if (!maps.back().isIdentity())
      return nullptr;
    bool readsOut = false;
    for (auto [input, map] :
         llvm::zip(epilogue.getDpsInputs(), ArrayRef(maps).drop_back())) {
      if (input == out) {
        // Another element of the output may not be computed yet.
        if (!map.isIdentity())
          return nullptr;
        readsOut = true;
        continue;
      }
      if (!readsByLoopsOrConstants(map))
        return nullptr;
    }
    return readsOut ? epilogue : nullptr;
  }
  return nullptr;
}

/// Whether `type`'s innermost dimension is contiguous, as the fragments'
/// vector loads need.
bool innermostContiguous(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(getStridesAndOffset(type, strides, offset)) &&
         strides.back() == 1;
}

struct TileGPUMatmulPass
    : public mlir::tfm::impl::TileGPUMatmulPassBase<TileGPUMatmulPass> {
  using TileGPUMatmulPassBase::TileGPUMatmulPassBase;

  void tile(linalg::GenericOp op) {
    Location loc = op.getLoc();
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    unsigned parallel = ranges.size() - 1, rowDim = parallel - 2,
             colDim = parallel - 1;
    int64_t m = ranges[rowDim], n = ranges[colDim], k = ranges[parallel];
    int64_t tm = std::min<int64_t>(tileM, m), tn = std::min<int64_t>(tileN, n);
    Value out = op.getDpsInits()[0];
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    Operation *fill = startingFill(op);
    linalg::GenericOp epilogue = followingEpilogue(op);

    OpBuilder b(op);
    auto c = [&](OpBuilder &ob, int64_t v) -> Value {
      return ob.create<arith::ConstantIndexOp>(loc, v);
    };
    SmallVector<int64_t> trips(ranges.begin(), ranges.end() - 1);
    trips[rowDim] = (m + tm - 1) / tm;
    trips[colDim] = (n + tn - 1) / tn;
    buildParallelLoop(
        b, loc, trips, [&](OpBuilder &pb, Location l, ValueRange ivs) {
          // The tile's rows and columns, clamped to the last one for loads,
          // and whether each is inside the matrix (null: always). Its rows
          // are consecutive; its columns are strided by the number of
          // column tiles, so that neighbouring threads (which differ in
          // their column tile) store neighbouring elements and read a
          // [K, N] operand at neighbouring addresses.
          auto positions = [&](Value tileIv, int64_t size, int64_t extent,
                               bool strided, SmallVector<Value> &inside) {
            SmallVector<Value> at;
            int64_t tiles = (extent + size - 1) / size;
            Value first =
                strided ? tileIv
                        : pb.create<arith::MulIOp>(l, tileIv, c(pb, size))
                              .getResult();
            for (int64_t i = 0; i < size; ++i) {
              Value p = pb.create<arith::AddIOp>(
                  l, first, c(pb, strided ? i * tiles : i));
              inside.push_back(nullptr);
              if (extent % size) {
                inside.back() = pb.create<arith::CmpIOp>(
                    l, arith::CmpIPredicate::ult, p, c(pb, extent));
                p = pb.create<arith::MinUIOp>(l, p, c(pb, extent - 1));
              }
              at.push_back(p);
            }
            return at;
          };
          SmallVector<Value> rowInside, colInside;
          SmallVector<Value> rows =
              positions(ivs[rowDim], tm, m, /*strided=*/false, rowInside);
          SmallVector<Value> cols =
              positions(ivs[colDim], tn, n, /*strided=*/true, colInside);
          auto outIndices = [&](int64_t i, int64_t j) {
            SmallVector<Value> idx(ivs.take_front(rowDim));
            idx.push_back(rows[i]);
            idx.push_back(cols[j]);
            return idx;
          };
          Value start = fill ? fillValue(pb, fill) : Value();
          SmallVector<Value> init;
          for (int64_t i = 0; i < tm; ++i)
            for (int64_t j = 0; j < tn; ++j)
              init.push_back(start ? start
                                   : pb.create<memref::LoadOp>(l, out,
                                                               outIndices(i, j))
                                         .getResult());
          auto loop = pb.create<scf::ForOp>(
              l, c(pb, 0), c(pb, k), c(pb, 1), init,
              [&](OpBuilder &fb, Location fl, Value kIv, ValueRange acc) {
                // Each input's loads, once per row and column it varies
                // along (one of each where it does not).
                SmallVector<Value> loops(ivs);
                loops.push_back(kIv);
                int64_t rowsOf[2], colsOf[2];
                SmallVector<SmallVector<Value>> loads(2);
                for (unsigned input = 0; input < 2; ++input) {
                  rowsOf[input] = maps[input].isFunctionOfDim(rowDim) ? tm : 1;
                  colsOf[input] = maps[input].isFunctionOfDim(colDim) ? tn : 1;
                  for (int64_t i = 0; i < rowsOf[input]; ++i)
                    for (int64_t j = 0; j < colsOf[input]; ++j) {
                      loops[rowDim] = rows[i];
                      loops[colDim] = cols[j];
                      loads[input].push_back(fb.create<memref::LoadOp>(
                          fl, op.getDpsInputs()[input],
                          indicesAt(fb, fl, maps[input], loops)));
                    }
                }
                auto loaded = [&](unsigned input, int64_t i, int64_t j) {
                  return loads[input][std::min(i, rowsOf[input] - 1) *
                                          colsOf[input] +
                                      std::min(j, colsOf[input] - 1)];
                };
                SmallVector<Value> next;
                Block *body = op.getBody();
                for (int64_t i = 0; i < tm; ++i)
                  for (int64_t j = 0; j < tn; ++j) {
                    IRMapping map;
                    map.map(body->getArgument(0), loaded(0, i, j));
                    map.map(body->getArgument(1), loaded(1, i, j));
                    map.map(body->getArgument(2), acc[i * tn + j]);
                    for (Operation &bodyOp : body->without_terminator())
                      allowContraction(fb.clone(bodyOp, map));
                    next.push_back(map.lookup(
                        body->getTerminator()->getOperand(0)));
                  }
                fb.create<scf::YieldOp>(fl, next);
              });
          // Only the outputs inside the matrix are stored.
          for (int64_t i = 0; i < tm; ++i)
            for (int64_t j = 0; j < tn; ++j) {
              Value rowIn = rowInside[i], colIn = colInside[j];
              Value cond = rowIn && colIn
                               ? pb.create<arith::AndIOp>(l, rowIn, colIn)
                               : rowIn ? rowIn : colIn;
              auto store = [&](OpBuilder &sb, Location sl) {
                Value result = loop.getResult(i * tn + j);
                if (epilogue)
                  result = applyGemmEpilogue(sb, sl, epilogue, out, result,
                                             outIndices(i, j));
                sb.create<memref::StoreOp>(sl, result, out, outIndices(i, j));
              };
              if (!cond) {
                store(pb, l);
                continue;
              }
              pb.create<scf::IfOp>(l, cond, [&](OpBuilder &tb, Location tl) {
                store(tb, tl);
                tb.create<scf::YieldOp>(tl);
              });
            }
        });
    op.erase();
    if (fill)
      fill->erase();
    if (epilogue)
      epilogue.erase();
  }

  /// The f32 constant `fill` writes, if it writes one.
  static std::optional<APFloat> constantFill(Operation *fill) {
    Value v;
    if (auto f = dyn_cast<linalg::FillOp>(fill))
      v = f.getInputs()[0];
    else
      v = cast<linalg::GenericOp>(fill).getBody()->getTerminator()->getOperand(0);
    FloatAttr attr;
    if (!matchPattern(v, m_Constant(&attr)) || !attr.getType().isF32())
      return std::nullopt;
    return attr.getValue();
  }

  /// Tiles a GEMM of f16 or bf16 operands into warp tiles of mma.sync
  /// shapes, when its sizes are multiples of them and a constant fill
  /// starts it: each iteration of the parallel loop is one warp
  /// (`tfm.lanes` = 32, which tfm-map-to-gpu reads), whose accumulators are
  /// vectors of 16 x 8 and whose operands are read 16 x 16 (A) and 8 x 16
  /// (B, as N x K) per step of 16 along the reduction.
  /// convert-vector-to-gpu{use-nvgpu} later distributes each
  /// vector.contract over the warp's lanes as one mma.sync (bf16 by way of
  /// tfm-retype-bf16-tiles and tfm-lower-bf16-mma-sync). The warp's stores
  /// do not depend on the lane, so the CPU check of the schedule, which
  /// runs every lane, writes the same values 32 times.
  ///
  /// Returns the kernel `op` got, none if it is left to the register
  /// tiles; `whyNot` says why it misses the best kernel, if it does.
  std::optional<GemmKernel> tileForTensorCores(linalg::GenericOp op,
                                               std::string &whyNot) {
    FloatType half = halfOperandsOf(op);
    if (!half) {
      bool f32 = llvm::any_of(op.getDpsInputs(), [](Value v) {
        return cast<MemRefType>(v.getType()).getElementType().isF32();
      });
      whyNot = f32 ? "its operands are f32, which the tensor cores would "
                     "round (--dtype=bf16 or f16 lets them)"
                   : "it is not acc + a * b of 16-bit operands into f32";
      return std::nullopt;
    }
    Operation *fill = startingFill(op);
    std::optional<APFloat> start = fill ? constantFill(fill) : std::nullopt;
    if (!start) {
      whyNot = "no constant fill starts its accumulators";
      return std::nullopt;
    }
    if (warpgroupMma) {
      std::string whyNoTma;
      whyNot = stageGemmOnWarpgroups(op, half, *start, fill,
                                     followingEpilogue(op), tma, whyNoTma);
      if (whyNot.empty()) {
        whyNot = whyNoTma;
        return tma && whyNoTma.empty() ? GemmKernel::WarpgroupTma
                                       : GemmKernel::WarpgroupMma;
      }
    }
    std::string staged =
        stageGemmOnTensorCores(op, half, *start, fill, followingEpilogue(op));
    if (staged.empty())
      return GemmKernel::StagedMma;
    if (!warpgroupMma)
      whyNot = staged;
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    unsigned parallel = ranges.size() - 1, rowDim = parallel - 2,
             colDim = parallel - 1;
    int64_t m = ranges[rowDim], n = ranges[colDim], k = ranges[parallel];
    if (m % kMmaM || n % kMmaN || k % kMmaK)
      return std::nullopt;
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    // Each operand's two fragment dimensions: A's (m, k), B's (n, k), as
    // positions among its memref's dimensions.
    SmallVector<std::array<int64_t, 2>> fragmentDims;
    for (auto [input, dims] : llvm::enumerate(
             SmallVector<std::array<unsigned, 2>>{{rowDim, parallel},
                                                  {colDim, parallel}})) {
      auto type = cast<MemRefType>(op.getDpsInputs()[input].getType());
      std::optional<unsigned> a = maps[input].getResultPosition(
          getAffineDimExpr(dims[0], op.getContext()));
      std::optional<unsigned> b = maps[input].getResultPosition(
          getAffineDimExpr(dims[1], op.getContext()));
      if (!a || !b || !innermostContiguous(type))
        return std::nullopt;
      fragmentDims.push_back({*a, *b});
    }
    if (!innermostContiguous(cast<MemRefType>(op.getDpsInits()[0].getType())))
      return std::nullopt;

    // A warp's tile: up to 32 x 32 outputs, 2 x 4 instructions per step.
    int64_t wm = m % 32 == 0 ? 32 : kMmaM;
    int64_t wn = n % 32 == 0 ? 32 : n % 16 == 0 ? 16 : kMmaN;
    int64_t fm = wm / kMmaM, fn = wn / kMmaN;
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    Value out = op.getDpsInits()[0];
    OpBuilder b(op);
    auto c = [&](OpBuilder &ob, int64_t v) -> Value {
      return ob.create<arith::ConstantIndexOp>(loc, v);
    };
    SmallVector<int64_t> trips(ranges.begin(), ranges.end() - 1);
    trips[rowDim] = m / wm;
    trips[colDim] = n / wn;
    auto f32 = Float32Type::get(ctx);
    auto accType = VectorType::get({kMmaM, kMmaN}, f32);
    auto aType = VectorType::get({kMmaM, kMmaK}, half);
    auto bType = VectorType::get({kMmaN, kMmaK}, half);
    auto loop = buildParallelLoop(
        b, loc, trips, [&](OpBuilder &pb, Location l, ValueRange ivs) {
          Value m0 = pb.create<arith::MulIOp>(l, ivs[rowDim], c(pb, wm));
          Value n0 = pb.create<arith::MulIOp>(l, ivs[colDim], c(pb, wn));
          Value zero = pb.create<arith::ConstantOp>(
              l, accType, DenseElementsAttr::get(accType, *start));
          SmallVector<Value> init(fm * fn, zero);
          auto kLoop = pb.create<scf::ForOp>(
              l, c(pb, 0), c(pb, k), c(pb, kMmaK), init,
              [&](OpBuilder &fb, Location fl, Value kIv, ValueRange acc) {
                // The fragment of `input` whose first dimension starts at
                // `first` and whose reduction dimension starts at kIv.
                auto read = [&](unsigned input, Value first, VectorType type) {
                  Value buffer = op.getDpsInputs()[input];
                  // A reads no column and B no row: `first` stands for
                  // whichever the operand reads.
                  SmallVector<Value> loops(ivs);
                  loops[rowDim] = loops[colDim] = first;
                  loops.push_back(kIv);
                  SmallVector<Value> idx =
                      indicesAt(fb, fl, maps[input], loops);
                  int64_t rank = idx.size();
                  AffineMap perm = AffineMap::get(
                      rank, 0,
                      {getAffineDimExpr(fragmentDims[input][0], ctx),
                       getAffineDimExpr(fragmentDims[input][1], ctx)},
                      ctx);
                  return fb.create<vector::TransferReadOp>(
                      fl, type, buffer, idx, perm,
                      ArrayRef<bool>{true, true});
                };
                SmallVector<Value> as, bs;
                for (int64_t i = 0; i < fm; ++i)
                  as.push_back(read(
                      0,
                      fb.create<arith::AddIOp>(fl, m0, c(fb, i * kMmaM)),
                      aType));
                for (int64_t j = 0; j < fn; ++j)
                  bs.push_back(read(
                      1,
                      fb.create<arith::AddIOp>(fl, n0, c(fb, j * kMmaN)),
                      bType));
                auto dm = getAffineDimExpr(0, ctx), dn = getAffineDimExpr(1, ctx),
                     dk = getAffineDimExpr(2, ctx);
                auto contractMaps = b.getAffineMapArrayAttr(
                    {AffineMap::get(3, 0, {dm, dk}, ctx),
                     AffineMap::get(3, 0, {dn, dk}, ctx),
                     AffineMap::get(3, 0, {dm, dn}, ctx)});
                auto iterators = b.getArrayAttr(
                    {vector::IteratorTypeAttr::get(ctx, vector::IteratorType::parallel),
                     vector::IteratorTypeAttr::get(ctx, vector::IteratorType::parallel),
                     vector::IteratorTypeAttr::get(ctx, vector::IteratorType::reduction)});
                SmallVector<Value> next;
                for (int64_t i = 0; i < fm; ++i)
                  for (int64_t j = 0; j < fn; ++j)
                    next.push_back(fb.create<vector::ContractionOp>(
                        fl, as[i], bs[j], acc[i * fn + j], contractMaps,
                        iterators));
                fb.create<scf::YieldOp>(fl, next);
              });
          for (int64_t i = 0; i < fm; ++i)
            for (int64_t j = 0; j < fn; ++j) {
              SmallVector<Value> idx(ivs.take_front(rowDim));
              idx.push_back(pb.create<arith::AddIOp>(l, m0, c(pb, i * kMmaM)));
              idx.push_back(pb.create<arith::AddIOp>(l, n0, c(pb, j * kMmaN)));
              pb.create<vector::TransferWriteOp>(
                  l, kLoop.getResult(i * fn + j), out, idx,
                  ArrayRef<bool>{true, true});
            }
        });
    loop->setAttr(kLanesAttrName, b.getI64IntegerAttr(32));
    op.erase();
    fill->erase();
    return GemmKernel::WarpMma;
  }

  void runOnOperation() override {
    if (tileM < 1 || tileN < 1) {
      getOperation().emitError("tfm-tile-gpu-matmul: tile-m and tile-n must "
                               "be at least 1");
      return signalPassFailure();
    }
    SmallVector<linalg::GenericOp> contractions;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isTileableContraction(op))
        contractions.push_back(op);
    });
    for (linalg::GenericOp op : contractions) {
      Location loc = op.getLoc();
      std::string whyNot;
      std::optional<GemmKernel> kernel = tileForTensorCores(op, whyNot);
      if (!kernel) {
        tile(op);
        kernel = GemmKernel::RegisterTiles;
      }
      if (!remarks)
        continue;
      GemmKernel best = !warpgroupMma ? GemmKernel::StagedMma
                        : tma         ? GemmKernel::WarpgroupTma
                                      : GemmKernel::WarpgroupMma;
      InFlightDiagnostic remark = emitRemark(loc);
      remark << kGemmKernelRemarkPrefix << gemmKernelName(*kernel);
      if (*kernel != best)
        remark << "; not " << gemmKernelName(best) << ": " << whyNot;
    }
  }
};

} // namespace

Value mlir::tfm::applyGemmEpilogue(OpBuilder &b, Location loc,
                                   linalg::GenericOp epilogue, Value out,
                                   Value value, ArrayRef<Value> indices) {
  Block *body = epilogue.getBody();
  IRMapping map;
  SmallVector<AffineMap> maps = epilogue.getIndexingMapsArray();
  for (auto [k, input] : llvm::enumerate(epilogue.getDpsInputs())) {
    if (input == out) {
      map.map(body->getArgument(k), value);
      continue;
    }
    map.map(body->getArgument(k),
            b.create<memref::LoadOp>(loc, input,
                                     indicesAt(b, loc, maps[k], indices))
                .getResult());
  }
  // The output's own argument holds the GEMM's result there too.
  map.map(body->getArguments().back(), value);
  for (Operation &bodyOp : body->without_terminator())
    b.clone(bodyOp, map);
  return map.lookupOrDefault(body->getTerminator()->getOperand(0));
}
