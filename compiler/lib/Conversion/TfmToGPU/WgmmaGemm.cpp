//===- WgmmaGemm.cpp - The generated GEMM on sm_90a's warpgroups ----------===//
//
// The staged GEMM (StagedGemm.cpp) for sm_90a: the same 128 x 128 output
// tiles and three cp.async stages, but multiplied by wgmma, which reads
// both operands straight from shared memory and keeps the accumulators of
// a whole warpgroup, instead of ldmatrix into mma.sync per warp. Step by
// step:
//
// 1. A block is one warpgroup (4 warps, 128 threads) and takes a 128 x 128
//    tile of one batch element's output (grid: column tiles x row tiles x
//    batch), as two accumulators of 64 x 128 (rows 0-63 and 64-127), 64
//    f32 registers a thread each.
// 2. The reduction goes in steps of 64. A step's tiles of A (128 x 64) and
//    B (64 x 128), 16 KB each, are loaded by TMA (or, where TMA cannot
//    load an operand or --gpu-tma=false, copied by cp.async, 16 bytes a
//    copy), each in its orientation in global memory, into one of three
//    stages in dynamic shared memory (96 KB, past the 48 KB a block has
//    unasked).
//    wgmma reads only the canonical layouts: per 64 values of the
//    operand's contiguous dimension, rows of 128 bytes whose 16-byte
//    chunks are XORed with the row mod 8 (the 128-byte swizzle, which the
//    hardware applies to bits 4-6 of the address from bits 7-9, so the
//    stages start 1024-byte aligned). So each stage holds two such halves
//    of 64 x 64 per operand: along M (or N) for an operand read along K
//    (K-major: [M, K] A, a linear layer's [N, K] weight), along K for one
//    read along M or N ([K, M] A, [K, N] B). Past the edges the copies
//    zero-fill. TMA loads a half as one box of 64 x 64, whose 128-byte
//    swizzle is the same XOR; thread 0 issues a stage's four boxes and
//    counts their 32 KB on the stage's mbarrier.
// 3. Per step: wait on the stage's mbarrier for the parity of its use
//    (step / 3); or, for copies, wait for them (cp.async.wait_group 1:
//    only the next step's may still be in flight), fence them into the
//    async proxy that wgmma reads through (fence.proxy.async; TMA writes
//    through it already), and a barrier. Then per 16
//    of the step's 64 and per block of 64 rows, one wgmma m64n128k16
//    (nvgpu.warpgroup.mma of exactly that shape, so that MLIR 19's
//    lowering advances no descriptor: it advances them right only for a
//    K-major A and an N-major B of K = 64), through descriptors of the
//    16-wide (K-major) or 16-deep (M/N-major) slice of the stage. Each
//    wgmma commits a group and waits until no more than 8 are in flight,
//    so after a step's 8 the previous step's have all read their stage;
//    after a barrier, the loads or copies of the step after next go into
//    it.
// 4. After the last step, a wait for every group and a barrier; the
//    accumulators are stored (nvgpu.warpgroup.mma.store) into shared
//    memory over the stages, rows padded to 136 floats so that a warp's
//    stores spread over the banks; after a barrier, thread t takes column
//    t of each row, adds the fill's value, applies the epilogue (a linear
//    layer's bias and activation) and stores it if inside the matrix:
//    neighbouring threads store neighbouring elements.
//
// The tensor maps TMA reads are made in the host code before the launch
// (nvgpu.tma.create.descriptor, which tfm-lower-tensor-maps turns into the
// runtime's). The one nvgpu.warpgroup.generate.descriptor takes is read
// by MLIR 19's lowering for its type only (the box's first dimension gives
// the leading byte offset: 64 x 128 bytes, the distance between the two
// halves of an M/N-major tile), so the kernel passes a null one of that
// type.
//
//===----------------------------------------------------------------------===//

#include "StagedGemm.h"
#include "TensorCoreTiles.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/abi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr int64_t kTileM = 128, kTileN = 128, kTileK = 64, kStages = 3;
/// One warpgroup; a wgmma's shape, m64n128k16.
constexpr int64_t kThreads = 128, kBlockRows = 64, kStepK = 16;
/// A half of an operand's stage: 64 values of its contiguous dimension
/// (128 bytes, the swizzle's width) by 64 rows.
constexpr int64_t kHalf = 64;
constexpr int64_t kTileBytes = 2 * kHalf * kHalf * 2;
/// The swizzle pattern repeats every 8 rows of 128 bytes.
constexpr int64_t kSwizzleAlign = 1024;
/// The staged accumulators' row, padded: a warp's stores of one register
/// (8 rows, 4 pairs of columns) then fall on 16 different pairs of banks.
constexpr int64_t kStagingRow = kTileN + 8;
/// wgmma groups in flight after each: one step's.
constexpr int32_t kGroupsInFlight = kTileK / kStepK * (kTileM / kBlockRows);
/// A hint of how long one try of an mbarrier wait may suspend the thread
/// (the lowering retries until the phase completes).
constexpr int64_t kWaitTicks = 10000000;

static_assert(kStagingRow * kTileM * 4 <= kStages * 2 * kTileBytes,
              "the staged accumulators fit over the stages");

/// The bytes a stage's TMA loads bring: two boxes of 64 x 64 per operand.
constexpr int64_t kStageBytes = 2 * kTileBytes;

/// Why TMA cannot load `o`'s tiles (named `name`), or "" when it can: its
/// memref's last two dims must be the two it is read along (so that a box
/// is [1, ..., 1, 64, 64], the tile's half), and its other indices loops
/// or constants.
std::string whyNotLoadableByTma(const GemmOperand &o, StringRef name) {
  ArrayRef<AffineExpr> results = o.map.getResults();
  int64_t rank = results.size();
  if (rank > TFM_TENSOR_MAP_MAX_RANK)
    return (name + " has " + Twine(rank) + " dims, more than a tensor map's " +
            Twine(TFM_TENSOR_MAP_MAX_RANK))
        .str();
  auto dimAt = [&](int64_t i) {
    auto d = dyn_cast<AffineDimExpr>(results[i]);
    return d ? int64_t(d.getPosition()) : int64_t(-1);
  };
  if (rank < 2 || dimAt(rank - 1) != o.inner || dimAt(rank - 2) != o.outer)
    return (name + "'s last two dims are not the two the GEMM reads it along")
        .str();
  if (!llvm::all_of(results.drop_back(2), [](AffineExpr e) {
        return isa<AffineDimExpr, AffineConstantExpr>(e);
      }))
    return (name + " is indexed by a sum of loops").str();
  return "";
}

/// The tensor map of `o`'s whole memref, in boxes of one tile half,
/// swizzled by 128 bytes as wgmma reads the half: made at `b`, in the host
/// code before the launch (tfm-lower-tensor-maps turns it into the
/// runtime's map).
Value tensorMapOf(OpBuilder &b, Location loc, const GemmOperand &o,
                  FloatType half) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<MemRefType>(o.buffer.getType());
  SmallVector<int64_t> box(type.getRank(), 1);
  box[type.getRank() - 2] = box[type.getRank() - 1] = kHalf;
  auto mapType = nvgpu::TensorMapDescriptorType::get(
      ctx,
      MemRefType::get(
          box, half, MemRefLayoutAttrInterface(),
          gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)),
      nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
  Value unranked = b.create<memref::CastOp>(
      loc, UnrankedMemRefType::get(half, type.getMemorySpace()), o.buffer);
  SmallVector<Value> sizes;
  for (int64_t d : box)
    sizes.push_back(b.create<arith::ConstantIndexOp>(loc, d));
  return b.create<nvgpu::TmaCreateDescriptorOp>(loc, mapType, unranked, sizes);
}

struct WgmmaGemm : GemmKernelBuilder {
  FloatType half;
  Value map;
  /// With TMA: each operand's tensor map, the stages' barriers, and the
  /// dynamic shared memory and the stages' byte offset in it.
  Value aMap, bMap, bars, dynamic, pad;

  using GemmKernelBuilder::GemmKernelBuilder;

  /// Thread 0 starts the TMA loads of step `step`'s tiles into stage
  /// `stage`, two boxes per operand, each a half as issueCopies lays it
  /// out (the map's swizzle is the same XOR of chunk and row), counted on
  /// the stage's barrier. Past the edges TMA fills zeros, as the copies
  /// do.
  void loadStep(Value step, Value stage) {
    onThreadZero([&] {
      kb.create<nvgpu::MBarrierArriveExpectTxOp>(loc, bars, index(kStageBytes),
                                                 stage, Value());
      for (auto [o, tensorMap, base] : {std::tuple{&a, aMap, int64_t(0)},
                                        {&bOp, bMap, kStages * kTileBytes}}) {
        // The box, as the map's type gives it, where the half lies.
        MemRefType box =
            cast<nvgpu::TensorMapDescriptorType>(tensorMap.getType())
                .getTensor();
        for (int64_t h = 0; h < 2; ++h) {
          Value outerAt = tileStart(o->outer, step),
                innerAt = tileStart(o->inner, step);
          Value &along = o->reductionInner ? outerAt : innerAt;
          along = add(along, h * kHalf);
          SmallVector<Value> at = indicesOf(*o, outerAt, innerAt);
          std::reverse(at.begin(), at.end());
          Value shift =
              add(add(pad, mul(stage, kTileBytes)), base + h * kTileBytes / 2);
          Value dst =
              kb.create<memref::ViewOp>(loc, box, dynamic, shift, ValueRange{});
          kb.create<nvgpu::TmaAsyncLoadOp>(loc, dst, bars, tensorMap, at, stage,
                                           Value(), Value());
        }
      }
    });
  }

  /// What `body` builds, run by thread 0 only.
  void onThreadZero(function_ref<void()> body) {
    auto first = kb.create<scf::IfOp>(
        loc,
        kb.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, tx, index(0)),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(kb);
    kb.setInsertionPointToStart(first.thenBlock());
    body();
  }

  /// Starts the copies of `o`'s tile for reduction step `step` into stage
  /// `stage`: 1024 chunks of 16 bytes, 8 a thread, neighbouring threads
  /// reading neighbouring chunks of a row. Chunk c of the tile's row r
  /// lands in half (K-major: r / 64; else c / 8), at row (r mod 64; else
  /// r), chunk (c mod 8) XOR (that row mod 8).
  void issueCopies(const GemmOperand &o, Value step, Value stage) override {
    int64_t chunks = o.cols / kChunk;
    for (int64_t j = 0; j < o.rows * chunks / kThreads; ++j) {
      Value i = add(tx, j * kThreads);
      Value r = div(i, chunks), c = rem(i, chunks);
      Value halfAt = o.reductionInner ? div(r, kHalf) : div(c, kHalf / kChunk);
      Value row = o.reductionInner ? rem(r, kHalf) : r;
      Value chunk =
          kb.create<arith::XOrIOp>(loc, rem(c, kHalf / kChunk), rem(row, 8));
      copyChunk(o, step, r, mul(c, kChunk),
                ValueRange{stage, halfAt, row, mul(chunk, kChunk)});
    }
  }

  /// The descriptor of `o`'s slice that one wgmma reads in `stage`: the
  /// k-th 16 of the step along K, and for a K-major operand the rows of
  /// block `block` (its 64 rows are one half). `logical` is the shape the
  /// wgmma sees ([64, 16] of A, [16, 128] of B).
  Value descriptor(const GemmOperand &o, Value stage, int64_t block, int64_t k,
                   ArrayRef<int64_t> logical) {
    SmallVector<OpFoldResult> offsets{stage, kb.getIndexAttr(block)};
    SmallVector<int64_t> sizes{1, 1};
    if (o.reductionInner) {
      offsets.append({kb.getIndexAttr(0), kb.getIndexAttr(k * kStepK)});
      sizes.append({kHalf, kStepK});
    } else {
      offsets.append({kb.getIndexAttr(k * kStepK), kb.getIndexAttr(0)});
      sizes.append({kStepK, kHalf});
    }
    SmallVector<OpFoldResult> sizeAttrs =
        getAsIndexOpFoldResult(kb.getContext(), sizes);
    SmallVector<OpFoldResult> unit(4, kb.getIndexAttr(1));
    auto tilesType = cast<MemRefType>(o.tiles.getType());
    auto sliceType =
        cast<MemRefType>(memref::SubViewOp::inferRankReducedResultType(
            {sizes[2], sizes[3]}, tilesType, offsets, sizeAttrs, unit));
    Value slice = kb.create<memref::SubViewOp>(loc, sliceType, o.tiles, offsets,
                                               sizeAttrs, unit);
    auto type = nvgpu::WarpgroupMatrixDescriptorType::get(
        kb.getContext(),
        MemRefType::get(logical, half, MemRefLayoutAttrInterface(),
                        tilesType.getMemorySpace()));
    return kb.create<nvgpu::WarpgroupGenerateDescriptorOp>(loc, type, slice,
                                                           map);
  }

  void build() {
    MLIRContext *ctx = kb.getContext();
    dynamic = kb.create<gpu::DynamicSharedMemoryOp>(
        loc,
        MemRefType::get(
            {ShapedType::kDynamic}, kb.getI8Type(), MemRefLayoutAttrInterface(),
            gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup)));
    int64_t steps = (ranges[redDim] + kTileK - 1) / kTileK;
    Attribute workgroup =
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);

    // The stages, 1024-byte aligned, and the accumulators' staging over
    // them.
    Value address =
        kb.create<memref::ExtractAlignedPointerAsIndexOp>(loc, dynamic);
    pad = rem(kb.create<arith::SubIOp>(loc, index(kSwizzleAlign),
                                       rem(address, kSwizzleAlign)),
              kSwizzleAlign);
    auto view = [&](Value shift, ArrayRef<int64_t> shape, Type element) {
      return kb.create<memref::ViewOp>(
          loc,
          MemRefType::get(shape, element, MemRefLayoutAttrInterface(),
                          workgroup),
          dynamic, shift, ValueRange{});
    };
    a.tiles = view(pad, {kStages, 2, kHalf, kHalf}, half);
    bOp.tiles =
        view(add(pad, kStages * kTileBytes), {kStages, 2, kHalf, kHalf}, half);
    Value staging = view(pad, {kTileM, kStagingRow}, kb.getF32Type());

    // The tensor map's type, which alone the descriptors read.
    auto mapType = nvgpu::TensorMapDescriptorType::get(
        ctx,
        MemRefType::get({kHalf, kHalf}, half, MemRefLayoutAttrInterface(),
                        workgroup),
        nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
        nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
        nvgpu::TensorMapOOBKind::OOB_ZERO,
        nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
    Value null = kb.create<LLVM::ZeroOp>(loc, LLVM::LLVMPointerType::get(ctx));
    map =
        kb.create<UnrealizedConversionCastOp>(loc, mapType, null).getResult(0);

    // 2: the first two steps' copies, a group each (empty past the end);
    // with TMA, each stage's barrier made first, then their loads.
    Value firstGroup;
    if (aMap) {
      bars = kb.create<nvgpu::MBarrierCreateOp>(
          loc, nvgpu::MBarrierGroupType::get(ctx, workgroup, kStages));
      onThreadZero([&] {
        for (int64_t s = 0; s < kStages; ++s)
          kb.create<nvgpu::MBarrierInitOp>(loc, bars, index(1), index(s),
                                           Value());
      });
      kb.create<gpu::BarrierOp>(loc);
      for (int64_t s = 0; s < std::min(kStages - 1, steps); ++s)
        loadStep(index(s), index(s));
    } else {
      firstGroup = copyFirstSteps(kStages, steps);
    }

    auto accType = nvgpu::WarpgroupAccumulatorType::get(
        ctx, VectorType::get({kBlockRows, kTileN}, kb.getF32Type()));
    SmallVector<Value> init;
    for (int64_t i = 0; i < kTileM / kBlockRows; ++i)
      init.push_back(
          kb.create<nvgpu::WarpgroupMmaInitAccumulatorOp>(loc, accType));
    auto loop =
        kb.create<scf::ForOp>(loc, index(0), index(steps), index(1), init);
    {
      OpBuilder::InsertionGuard g(kb);
      kb.setInsertionPointToStart(loop.getBody());
      Value step = loop.getInductionVar();
      SmallVector<Value> acc(loop.getRegionIterArgs());
      // 3: this step's tiles in place and visible to wgmma.
      Value stage = rem(step, kStages);
      if (aMap) {
        // The stage's barrier completes a phase per use: step / 3's.
        Value parity = kb.create<arith::TruncIOp>(
            loc, kb.getI1Type(),
            kb.create<arith::IndexCastOp>(loc, kb.getI32Type(),
                                          rem(div(step, kStages), 2)));
        kb.create<nvgpu::MBarrierTryWaitParityOp>(loc, bars, parity,
                                                  index(kWaitTicks), stage);
      } else {
        waitGroups(kb, loc, firstGroup, kStages - 2);
        kb.create<NVVM::FenceProxyOp>(
            loc, NVVM::ProxyKind::async_shared,
            NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
        kb.create<gpu::BarrierOp>(loc);
      }
      UnitAttr transposeA = a.reductionInner ? UnitAttr() : kb.getUnitAttr();
      UnitAttr transposeB = bOp.reductionInner ? UnitAttr() : kb.getUnitAttr();
      for (int64_t kk = 0; kk < kTileK / kStepK; ++kk) {
        Value dB = descriptor(bOp, stage, 0, kk, {kStepK, kTileN});
        for (int64_t i = 0; i < kTileM / kBlockRows; ++i) {
          // An M-major A's 64 rows are the half's columns; a K-major A's
          // are the half itself. Either way block i is half i.
          Value dA = descriptor(a, stage, i, kk, {kBlockRows, kStepK});
          acc[i] = kb.create<nvgpu::WarpgroupMmaOp>(
              loc, accType, dA, dB, kb.getI32IntegerAttr(kGroupsInFlight),
              transposeA, transposeB, acc[i]);
        }
      }
      // Every thread's wgmma of the previous step has read its stage.
      kb.create<gpu::BarrierOp>(loc);
      if (aMap) {
        forStepAhead(step, kStages, steps,
                     [&](Value ahead, Value stage) { loadStep(ahead, stage); });
      } else {
        copyStepAhead(step, kStages, steps);
      }
      kb.create<scf::YieldOp>(loc, acc);
    }

    // 4: the accumulators through shared memory to the epilogue.
    kb.create<NVVM::WgmmaWaitGroupSyncOp>(loc, 0);
    kb.create<gpu::BarrierOp>(loc);
    for (int64_t i = 0; i < kTileM / kBlockRows; ++i) {
      auto rowsType = cast<MemRefType>(memref::SubViewOp::inferResultType(
          cast<MemRefType>(staging.getType()),
          ArrayRef<int64_t>{i * kBlockRows, 0},
          ArrayRef<int64_t>{kBlockRows, kTileN}, ArrayRef<int64_t>{1, 1}));
      Value rows = kb.create<memref::SubViewOp>(
          loc, rowsType, staging, ArrayRef<int64_t>{i * kBlockRows, 0},
          ArrayRef<int64_t>{kBlockRows, kTileN}, ArrayRef<int64_t>{1, 1});
      kb.create<nvgpu::WarpgroupMmaStoreOp>(loc, loop.getResult(i), rows);
    }
    kb.create<gpu::BarrierOp>(loc);
    Value col = add(colBase, tx);
    Value first = kb.create<arith::ConstantOp>(
        loc, kb.getFloatAttr(kb.getF32Type(), start));
    bool zeroStart = start.isPosZero();
    auto rowsLoop =
        kb.create<scf::ForOp>(loc, index(0), index(kTileM), index(1));
    OpBuilder::InsertionGuard g(kb);
    kb.setInsertionPointToStart(rowsLoop.getBody());
    Value r = rowsLoop.getInductionVar();
    Value row = add(rowBase, r);
    SmallVector<Value> at(batchIvs);
    at.push_back(row);
    at.push_back(col);
    storeOutput(at, [&](OpBuilder &sb, Location sl) {
      Value value = sb.create<memref::LoadOp>(sl, staging, ValueRange{r, tx});
      return zeroStart ? value
                       : sb.create<arith::AddFOp>(sl, first, value).getResult();
    });
  }
};

} // namespace

std::string mlir::tfm::stageGemmOnWarpgroups(
    linalg::GenericOp op, FloatType half, const APFloat &start, Operation *fill,
    linalg::GenericOp epilogue, bool tma, std::string &whyNoTma) {
  std::optional<GemmOperand> a, bOp;
  if (std::string whyNot =
          stagedGemmOperands(op, kTileM, kTileN, kTileK, kTileK / 2, a, bOp);
      !whyNot.empty())
    return whyNot;
  if (!a->reductionInner && bOp->reductionInner)
    return "A is contiguous along M and B along K: wgmma reads an M-major A "
           "only with an N-major B";
  for (const GemmOperand &o : {*a, *bOp})
    if (cast<MemRefType>(o.buffer.getType()).getElementType() != half)
      return "an operand is stored in f32 and rounded as it is read, where "
             "wgmma reads shared memory as stored";

  // TMA loads the tiles where both operands allow it; the maps are made in
  // the host code, before the launch.
  Value aMap, bMap;
  if (tma) {
    whyNoTma = whyNotLoadableByTma(*a, "A");
    if (whyNoTma.empty())
      whyNoTma = whyNotLoadableByTma(*bOp, "B");
  }
  if (tma && whyNoTma.empty()) {
    OpBuilder hb(op);
    aMap = tensorMapOf(hb, op.getLoc(), *a, half);
    bMap = tensorMapOf(hb, op.getLoc(), *bOp, half);
  }
  WgmmaGemm kernel(op, *a, *bOp, epilogue, start, kTileM, kTileN, kTileK,
                   kThreads, kStages * 2 * kTileBytes + kSwizzleAlign,
                   TypeRange{});
  kernel.half = half;
  kernel.aMap = aMap;
  kernel.bMap = bMap;
  kernel.build();
  kernel.replaced(op, fill);
  return "";
}
