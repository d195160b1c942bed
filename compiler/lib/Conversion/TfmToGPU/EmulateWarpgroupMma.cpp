//===- EmulateWarpgroupMma.cpp - wgmma in the emulation of kernels --------===//
//
// nvgpu.warpgroup.mma multiplies tiles that lie in shared memory, which
// each of the warpgroup's 128 threads reads through two descriptors, into
// accumulators of which each thread holds its fragment. The emulation runs
// what MLIR 19's NVVM lowering makes of the ops and what the hardware then
// does, so that a tile laid out otherwise than the descriptors say reads
// the wrong elements here too:
//
// * generate.descriptor: the tile's start in its workgroup buffer (16-byte
//   units, low bits dropped), its leading byte offset (the tensor map box's
//   first dimension times 128), its stride byte offset (1024) and the
//   128-byte swizzle (the only one the op takes);
// * mma: M/64 x K/16 instructions m64nNk16, the A descriptor advanced by
//   (16 k + K K i) elements and the B descriptor by 16 B.dim0 k, each
//   reading A and B by the ISA's canonical layouts (K-major, or M/N-major
//   under transposeA/transposeB) and the 128-byte swizzle (bits 4-6 of a
//   byte address XORed with bits 7-9; the emulation takes each workgroup
//   buffer to start at a multiple of 1024 bytes);
// * each thread's fragment in the ISA's order: for rows [64 i, 64 i + 64),
//   register r of lane l of warp w (of the warpgroup) holds row 16 w + l/4
//   + 8 ((r/2) mod 2), column 8 (r/4) + 2 (l mod 4) + r mod 2;
// * mma.store: the lowering's indices, from the raw thread id and with the
//   second block of 64 rows at row N/2 (right for N = 128 only);
// * the asynchrony: an mma commits a group and waits until `waitGroup`
//   groups are left in flight, nvvm.wgmma.wait.group.sync.aligned N until
//   N are; a store while one is in flight stores NaN.
//
// The accumulators become vectors of the thread's fragment, so that they
// can cross the emulation's phases like any per-thread value.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/GPUEmulation/Emulation.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The byte offset between two 8-row groups of a 128-byte-swizzled tile,
/// as the lowering encodes it.
constexpr int64_t kStrideBytes = 1024;

/// The groups in flight a thread's records cover, and each record's words.
constexpr int64_t kRecords = 32, kRecordWords = 6;

/// A descriptor as the lowering builds it: its tile's start (bytes from
/// the workgroup buffer's first), its leading byte offset, and the buffer.
struct Descriptor {
  Value start;
  int64_t leading = 0;
  Value root;
  Type element;
};

/// The workgroup buffer `root` as a number, for the records.
int64_t bufferNumber(Value root) {
  return cast<BlockArgument>(root).getArgNumber();
}

struct WarpgroupMma {
  gpu::LaunchOp launch;
  Location loc;
  /// Each descriptor's emulated form.
  DenseMap<Value, Descriptor> descriptors;
  /// Per thread: how many groups of wgmma it has in flight, how many it
  /// has committed, and, per group among the last kRecords, the bytes of
  /// shared memory its A and B span (buffer, first, end: kRecordWords).
  Value inFlight, committed, records;
  /// Per thread: whether copies it waited for are not fenced into the
  /// async proxy yet.
  Value unfenced;
  Value threads;

  explicit WarpgroupMma(gpu::LaunchOp launch)
      : launch(launch), loc(launch.getLoc()) {}

  Value index(OpBuilder &b, int64_t v) {
    return b.create<arith::ConstantIndexOp>(loc, v);
  }
  Value add(OpBuilder &b, Value x, Value y) {
    return b.create<arith::AddIOp>(loc, x, y);
  }
  Value mul(OpBuilder &b, Value x, int64_t y) {
    return b.create<arith::MulIOp>(loc, x, index(b, y));
  }
  Value div(OpBuilder &b, Value x, int64_t y) {
    return b.create<arith::DivUIOp>(loc, x, index(b, y));
  }
  Value rem(OpBuilder &b, Value x, int64_t y) {
    return b.create<arith::RemUIOp>(loc, x, index(b, y));
  }

  static VectorType fragmentType(nvgpu::WarpgroupAccumulatorType type) {
    VectorType tile = type.getFragmented();
    return VectorType::get({tile.getDimSize(0) * tile.getDimSize(1) / 128},
                           tile.getElementType());
  }

  /// The element at byte `at` of `flat` (a descriptor's buffer read flat,
  /// flatView), in f32; 16-bit values held as f16 are bf16 where the launch
  /// says its tiles are.
  Value element(OpBuilder &b, Value flat, Value at) {
    int64_t bytes =
        cast<MemRefType>(flat.getType()).getElementTypeBitWidth() / 8;
    Value v = b.create<memref::LoadOp>(loc, flat, div(b, at, bytes));
    auto retyped = launch->getAttrOfType<TypeAttr>(kMmaOperandTypeAttrName);
    if (retyped && retyped.getValue().isBF16() && v.getType().isF16())
      v = b.create<arith::BitcastOp>(loc, retyped.getValue(), v);
    return b.create<arith::ExtFOp>(loc, b.getF32Type(), v);
  }

  /// The byte at which a canonical 128-byte-swizzled layout holds element
  /// (x, kk) of a k-step, x a row of A or a column of B: along K (K-major)
  /// or along x (M/N-major), then swizzled.
  Value canonical(OpBuilder &b, Value start, Value x, Value kk, bool kMajor,
                  int64_t leading, int64_t bytes) {
    Value pre;
    if (kMajor) {
      pre = add(b, add(b, start, mul(b, rem(b, x, 8), 128)),
                add(b, mul(b, div(b, x, 8), kStrideBytes), mul(b, kk, bytes)));
    } else {
      int64_t perRow = 128 / bytes;
      pre = add(b,
                add(b, add(b, start, mul(b, rem(b, x, perRow), bytes)),
                    mul(b, div(b, x, perRow), leading)),
                add(b, mul(b, rem(b, kk, 8), 128),
                    mul(b, div(b, kk, 8), kStrideBytes)));
    }
    Value row = b.create<arith::AndIOp>(loc, div(b, pre, 128), index(b, 7));
    return b.create<arith::XOrIOp>(loc, pre, mul(b, row, 16));
  }

  /// The thread's warp within its warpgroup and its lane.
  std::pair<Value, Value> warpAndLane(OpBuilder &b, bool rawWarp) {
    Value t = rawWarp ? Value(launch.getThreadIds().x)
                      : linearThreadIndex(b, loc, launch);
    Value warp = div(b, t, 32);
    return {rawWarp ? warp : rem(b, warp, 4), rem(b, t, 32)};
  }

  /// Fragment register r's row (within its 64) and column.
  std::pair<Value, Value> placeOf(OpBuilder &b, Value warp, Value lane,
                                  Value r) {
    Value row = add(b, add(b, mul(b, warp, 16), div(b, lane, 4)),
                    mul(b, rem(b, div(b, r, 2), 2), 8));
    Value col =
        add(b, add(b, mul(b, div(b, r, 4), 8), mul(b, rem(b, lane, 4), 2)),
            rem(b, r, 2));
    return {row, col};
  }

  Value threadSlot(OpBuilder &b) { return linearThreadIndex(b, loc, launch); }

  /// A thread's fragment of `elements` values while an op is emulated,
  /// allocated once before the launch: an alloca in the emulated loops
  /// would grow the stack per iteration.
  DenseMap<int64_t, Value> scratch;
  Value scratchOf(int64_t elements) {
    Value &buffer = scratch[elements];
    if (!buffer)
      buffer = OpBuilder(launch).create<memref::AllocaOp>(
          loc,
          MemRefType::get({elements}, Float32Type::get(launch.getContext())));
    return buffer;
  }

  /// D = A B + C for this thread's fragment, as the lowering's
  /// instructions compute it.
  Value emulateMma(OpBuilder &b, nvgpu::WarpgroupMmaOp mma, Value c) {
    const Descriptor &da = descriptors[mma.getDescriptorA()],
                     &db = descriptors[mma.getDescriptorB()];
    MemRefType at = mma.getDescriptorA().getType().getTensor(),
               bt = mma.getDescriptorB().getType().getTensor();
    int64_t m = at.getDimSize(0), k = at.getDimSize(1), n = bt.getDimSize(1);
    int64_t bytes = at.getElementTypeBitWidth() / 8, half = n / 2;
    bool aKMajor = !mma.getTransposeA(), bKMajor = !mma.getTransposeB();
    auto fragment = cast<VectorType>(c.getType());
    Value scratch = scratchOf(fragment.getNumElements());
    b.create<vector::StoreOp>(loc, c, scratch, ValueRange{index(b, 0)});
    auto [warp, lane] = warpAndLane(b, /*rawWarp=*/false);
    Value flatA = flatView(b, loc, da.root, da.element),
          flatB = flatView(b, loc, db.root, db.element);
    for (int64_t i = 0; i < m / 64; ++i)
      for (int64_t s = 0; s < k / 16; ++s) {
        Value startA = add(
            b, da.start, index(b, (16 * s + k * at.getDimSize(1) * i) * bytes));
        Value startB =
            add(b, db.start, index(b, bt.getDimSize(0) * 16 * s * bytes));
        auto regs =
            b.create<scf::ForOp>(loc, index(b, 0), index(b, half), index(b, 1));
        OpBuilder rb = OpBuilder::atBlockBegin(regs.getBody());
        Value r = regs.getInductionVar();
        auto [row, col] = placeOf(rb, warp, lane, r);
        Value slot = add(rb, r, index(rb, i * half));
        Value acc = rb.create<memref::LoadOp>(loc, scratch, slot);
        auto steps = rb.create<scf::ForOp>(loc, index(rb, 0), index(rb, 16),
                                           index(rb, 1), ValueRange{acc});
        {
          OpBuilder kb = OpBuilder::atBlockBegin(steps.getBody());
          Value kk = steps.getInductionVar();
          Value x = element(
              kb, flatA,
              canonical(kb, startA, row, kk, aKMajor, da.leading, bytes));
          Value y = element(
              kb, flatB,
              canonical(kb, startB, col, kk, bKMajor, db.leading, bytes));
          Value sum =
              kb.create<arith::AddFOp>(loc, steps.getRegionIterArgs()[0],
                                       kb.create<arith::MulFOp>(loc, x, y));
          kb.create<scf::YieldOp>(loc, sum);
        }
        rb.create<memref::StoreOp>(loc, steps.getResult(0), scratch, slot);
      }
    return b.create<vector::LoadOp>(loc, fragment, scratch,
                                    ValueRange{index(b, 0)});
  }

  /// Groups in flight after a commit and a wait down to `left`.
  void commitAndWait(OpBuilder &b, bool commit, int64_t left) {
    Value t = threadSlot(b);
    Value now = b.create<memref::LoadOp>(loc, inFlight, t);
    if (commit)
      now = add(b, now, index(b, 1));
    b.create<memref::StoreOp>(
        loc, b.create<arith::MinUIOp>(loc, now, index(b, left)), inFlight, t);
  }

  /// The bytes from the 128-byte line of `d`'s start that a wgmma reads
  /// through it: `rows` rows of a K-major operand (8 lines of 128 bytes per
  /// 1024), or, M/N-major, `k` rows of 128 bytes (1024 per 8) per 64 of
  /// `rows`, the 64s `leading` bytes apart.
  static int64_t footprint(const Descriptor &d, bool kMajor, int64_t rows,
                           int64_t k) {
    if (kMajor)
      return (rows + 7) / 8 * kStrideBytes;
    return ((rows + 63) / 64 - 1) * d.leading + (k + 7) / 8 * kStrideBytes;
  }

  /// Records the bytes that `mma`'s new group reads, as this thread's
  /// newest record.
  void record(OpBuilder &b, nvgpu::WarpgroupMmaOp mma) {
    const Descriptor &da = descriptors[mma.getDescriptorA()],
                     &db = descriptors[mma.getDescriptorB()];
    MemRefType at = mma.getDescriptorA().getType().getTensor(),
               bt = mma.getDescriptorB().getType().getTensor();
    int64_t m = at.getDimSize(0), k = at.getDimSize(1), n = bt.getDimSize(1);
    Value t = threadSlot(b);
    Value count = b.create<memref::LoadOp>(loc, committed, t);
    Value slot = rem(b, count, kRecords);
    SmallVector<Value> words;
    for (auto [d, kMajor, rows] : {std::tuple{&da, !mma.getTransposeA(), m},
                                   {&db, !mma.getTransposeB(), n}}) {
      Value first = b.create<arith::AndIOp>(loc, d->start, index(b, ~127));
      words.push_back(index(b, bufferNumber(d->root)));
      words.push_back(first);
      words.push_back(add(b, first, index(b, footprint(*d, kMajor, rows, k))));
    }
    for (auto [w, value] : llvm::enumerate(words))
      b.create<memref::StoreOp>(loc, value, records,
                                ValueRange{t, slot, index(b, w)});
    b.create<memref::StoreOp>(loc, add(b, count, index(b, 1)), committed, t);
    Value pending = b.create<memref::LoadOp>(loc, inFlight, t);
    b.create<cf::AssertOp>(
        loc,
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, pending,
                                index(b, kRecords)),
        "more than 32 groups of wgmma in flight, which the emulation does "
        "not track");
  }

  /// Stops the run if `copy` writes bytes that a group of wgmma this
  /// thread has in flight reads: the hardware may read them after the copy.
  void checkCopy(OpBuilder &b, nvgpu::DeviceAsyncCopyOp copy) {
    Value root = workgroupBufferOf(copy.getDst());
    if (!root)
      return;
    auto type = cast<MemRefType>(copy.getDst().getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(getStridesAndOffset(type, strides, offset)) ||
        llvm::any_of(strides, ShapedType::isDynamic))
      return;
    int64_t bytes = type.getElementTypeBitWidth() / 8;
    Value first = byteOffsetIn(b, loc, copy.getDst(), root);
    for (auto [i, stride] : llvm::zip(copy.getDstIndices(), strides))
      first = add(b, first, mul(b, i, stride * bytes));
    Value end =
        add(b, first, index(b, copy.getDstElements().getZExtValue() * bytes));
    checkWrite(b, root, first, end,
               "cp.async writes shared memory that a group of wgmma still in "
               "flight reads: wait for the group (wgmma.wait_group) before "
               "the copy");
  }

  /// The same for a TMA load, whose box the issuing thread's groups must
  /// not read (a warpgroup's threads issue the same wgmma, so one thread's
  /// groups are its warpgroup's).
  void checkLoad(OpBuilder &b, nvgpu::TmaAsyncLoadOp load) {
    Value root = workgroupBufferOf(load.getDst());
    if (!root)
      return;
    auto type = cast<MemRefType>(load.getDst().getType());
    Value first = byteOffsetIn(b, loc, load.getDst(), root);
    Value end = add(
        b, first,
        index(b, type.getNumElements() * (type.getElementTypeBitWidth() / 8)));
    checkWrite(b, root, first, end,
               "a TMA load writes shared memory that a group of wgmma still "
               "in flight reads: wait for the group (wgmma.wait_group) "
               "before the load");
  }

  /// Stops the run with `message` if bytes [first, end) of workgroup buffer
  /// `root` are read by a group of wgmma this thread has in flight.
  void checkWrite(OpBuilder &b, Value root, Value first, Value end,
                  StringRef message) {
    Value t = threadSlot(b);
    Value pending = b.create<memref::LoadOp>(loc, inFlight, t);
    Value count = b.create<memref::LoadOp>(loc, committed, t);
    Value falseValue = b.create<arith::ConstantIntOp>(loc, false, 1);
    auto scan = b.create<scf::ForOp>(
        loc, index(b, 0), pending, index(b, 1), ValueRange{falseValue},
        [&](OpBuilder &fb, Location, Value j, ValueRange seen) {
          Value slot = rem(
              fb,
              fb.create<arith::SubIOp>(loc, count, add(fb, j, index(fb, 1))),
              kRecords);
          Value hit = seen[0];
          for (int64_t w = 0; w < kRecordWords; w += 3) {
            auto word = [&](int64_t at) -> Value {
              return fb.create<memref::LoadOp>(
                  loc, records, ValueRange{t, slot, index(fb, w + at)});
            };
            auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) {
              return fb.create<arith::CmpIOp>(loc, p, x, y);
            };
            Value overlaps = fb.create<arith::AndIOp>(
                loc,
                cmp(arith::CmpIPredicate::eq, word(0),
                    index(fb, bufferNumber(root))),
                fb.create<arith::AndIOp>(
                    loc, cmp(arith::CmpIPredicate::ult, first, word(2)),
                    cmp(arith::CmpIPredicate::ult, word(1), end)));
            hit = fb.create<arith::OrIOp>(loc, hit, overlaps);
          }
          fb.create<scf::YieldOp>(loc, hit);
        });
    b.create<cf::AssertOp>(loc, notOf(b, scan.getResult(0)), message);
  }

  Value notOf(OpBuilder &b, Value x) {
    return b.create<arith::XOrIOp>(
        loc, x, b.create<arith::ConstantIntOp>(loc, true, 1));
  }

  void markUnfenced(OpBuilder &b, bool value) {
    b.create<memref::StoreOp>(loc,
                              b.create<arith::ConstantIntOp>(loc, value, 1),
                              unfenced, threadSlot(b));
  }

  /// Stops the run if a thread of the block has copies landed and not
  /// fenced into the async proxy, through which wgmma reads.
  void checkFenced(OpBuilder &b) {
    Value falseValue = b.create<arith::ConstantIntOp>(loc, false, 1);
    auto any = b.create<scf::ForOp>(
        loc, index(b, 0), threads, index(b, 1), ValueRange{falseValue},
        [&](OpBuilder &fb, Location, Value t, ValueRange seen) {
          fb.create<scf::YieldOp>(
              loc,
              ValueRange{fb.create<arith::OrIOp>(
                  loc, seen[0], fb.create<memref::LoadOp>(loc, unfenced, t))});
        });
    b.create<cf::AssertOp>(
        loc, notOf(b, any.getResult(0)),
        "nvgpu.warpgroup.mma reads shared memory that cp.async wrote and no "
        "fence.proxy.async made visible to the async proxy, through which "
        "wgmma reads");
  }

  LogicalResult check(Operation *op) {
    if (auto gen = dyn_cast<nvgpu::WarpgroupGenerateDescriptorOp>(op)) {
      auto tensor = gen.getTensor().getType();
      if (!workgroupBufferOf(gen.getTensor()) ||
          tensor.getElementTypeBitWidth() != 16)
        return op->emitOpError()
               << "describes a tile that is not a view of a workgroup buffer "
                  "of 16-bit elements, which the emulation runs";
      if (!llvm::all_of(gen.getDescriptor().getUsers(), [](Operation *u) {
            return isa<nvgpu::WarpgroupMmaOp>(u);
          }))
        return op->emitOpError()
               << "makes a descriptor that flows elsewhere than into an "
                  "nvgpu.warpgroup.mma, which the emulation cannot follow";
      return success();
    }
    if (auto mma = dyn_cast<nvgpu::WarpgroupMmaOp>(op)) {
      for (Value d : {mma.getDescriptorA(), mma.getDescriptorB()})
        if (!d.getDefiningOp<nvgpu::WarpgroupGenerateDescriptorOp>())
          return op->emitOpError()
                 << "reads a descriptor that no "
                    "nvgpu.warpgroup.generate.descriptor of its launch "
                    "makes, which the emulation cannot follow";
      MemRefType at = mma.getDescriptorA().getType().getTensor();
      int64_t m = at.getDimSize(0), k = at.getDimSize(1);
      if (m % 64 != 0 || k % 16 != 0)
        return op->emitOpError()
               << "multiplies a " << m << " x " << k
               << " tile of A; the lowering issues m64nNk16 instructions, "
                  "so M must be a multiple of 64 and K of 16";
      if (k != 64 && m > 64)
        return op->emitOpError()
               << "multiplies an A of " << m << " rows and K = " << k
               << ": MLIR 19's lowering advances A by K x K elements per 64 "
                  "rows, which is 64 rows only for K = 64";
      // Each step of 16 advances A by 16 elements, the step along a row of
      // a K-major A, and B by 16 of its rows of 128 bytes, the step of an
      // N-major B of 64 rows: other layouts read the wrong elements from
      // the second step on.
      if (k > 16 && mma.getTransposeA())
        return op->emitOpError()
               << "reads A M-major (transposeA): MLIR 19's lowering advances "
                  "A by 16 elements per step of 16, right for a K-major A only";
      if (k > 16 && (!mma.getTransposeB() || k != 64))
        return op->emitOpError()
               << "reads B " << (mma.getTransposeB() ? "N-major" : "K-major")
               << " with K = " << k
               << ": MLIR 19's lowering advances B by 16 x K x 2 bytes per "
                  "step of 16, right for an N-major B (transposeB) of K = 64 "
                  "only";
      return success();
    }
    if (auto store = dyn_cast<nvgpu::WarpgroupMmaStoreOp>(op)) {
      VectorType tile = store.getMatrixD().getType().getFragmented();
      if (tile.getDimSize(0) > 64 && tile.getDimSize(1) != 128)
        return op->emitOpError()
               << "stores " << tile.getDimSize(0) << " x " << tile.getDimSize(1)
               << " accumulators: MLIR 19's lowering puts the second block "
                  "of 64 rows at row N/2, which is right for N = 128 only";
    }
    return success();
  }

  LogicalResult run() {
    SmallVector<Operation *> ops;
    launch.getBody().walk([&](Operation *op) {
      if (isa<nvgpu::WarpgroupGenerateDescriptorOp, nvgpu::WarpgroupMmaOp,
              nvgpu::WarpgroupMmaStoreOp, nvgpu::WarpgroupMmaInitAccumulatorOp,
              NVVM::WgmmaWaitGroupSyncOp, NVVM::FenceProxyOp>(op))
        ops.push_back(op);
    });
    if (!llvm::any_of(ops, [](Operation *op) {
          return isa<nvgpu::WarpgroupMmaOp>(op);
        })) {
      // Without wgmma, nothing reads through the async proxy that a fence
      // would order (TMA writes through it).
      for (Operation *op : ops)
        if (isa<NVVM::FenceProxyOp>(op))
          op->erase();
      return success();
    }
    // The copies and their waits, which the emulation of cp.async replaces
    // after this.
    SmallVector<Operation *> copies;
    launch.getBody().walk([&](Operation *op) {
      if (isa<nvgpu::DeviceAsyncCopyOp, nvgpu::DeviceAsyncWaitOp,
              nvgpu::TmaAsyncLoadOp>(op))
        copies.push_back(op);
    });
    for (Operation *op : ops)
      if (failed(check(op)))
        return failure();
    // The tiles the stores write, read before their accumulators become
    // vectors.
    DenseMap<Operation *, VectorType> tiles;
    for (Operation *op : ops)
      if (auto store = dyn_cast<nvgpu::WarpgroupMmaStoreOp>(op))
        tiles[op] = store.getMatrixD().getType().getFragmented();

    // Accumulators become their fragments, so from here on the ops' typed
    // accessors of them would not hold: they are read untyped.
    retypeValues(launch, [](Type t) -> Type {
      auto acc = dyn_cast<nvgpu::WarpgroupAccumulatorType>(t);
      return acc ? fragmentType(acc) : Type();
    });

    {
      OpBuilder b(launch);
      threads = b.create<arith::MulIOp>(
          loc,
          b.create<arith::MulIOp>(loc, launch.getBlockSizeX(),
                                  launch.getBlockSizeY()),
          launch.getBlockSizeZ());
      auto perThread = [&](ArrayRef<int64_t> shape, Type element) {
        SmallVector<int64_t> dims{ShapedType::kDynamic};
        dims.append(shape.begin(), shape.end());
        return b.create<memref::AllocaOp>(loc, MemRefType::get(dims, element),
                                          ValueRange{threads});
      };
      inFlight = perThread({}, b.getIndexType());
      committed = perThread({}, b.getIndexType());
      records = perThread({kRecords, kRecordWords}, b.getIndexType());
      unfenced = perThread({}, b.getI1Type());
      OpBuilder top = OpBuilder::atBlockBegin(&launch.getBody().front());
      for (Value counter : {inFlight, committed})
        top.create<memref::StoreOp>(loc, index(top, 0), counter,
                                    threadSlot(top));
      markUnfenced(top, false);
    }

    for (Operation *op : copies) {
      if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op)) {
        OpBuilder b(op);
        checkCopy(b, copy);
        continue;
      }
      // TMA writes through the async proxy that wgmma reads: no fence.
      if (auto load = dyn_cast<nvgpu::TmaAsyncLoadOp>(op)) {
        OpBuilder b(op);
        checkLoad(b, load);
        continue;
      }
      // The copies landed through the generic proxy.
      OpBuilder after(op->getContext());
      after.setInsertionPointAfter(op);
      markUnfenced(after, true);
    }

    for (Operation *op : ops) {
      OpBuilder b(op);
      if (auto gen = dyn_cast<nvgpu::WarpgroupGenerateDescriptorOp>(op)) {
        auto tensor = gen.getTensor().getType();
        // A tile made in an earlier phase (a stage's subview) is made
        // again here, since the emulation keeps no views per thread.
        IRMapping map;
        Value tile = isLaunchUniform(launch, gen.getTensor())
                         ? uniformAt(b, launch, gen.getTensor(), map)
                         : gen.getTensor();
        // The start field holds bits 4-17 of the address.
        Value start = b.create<arith::AndIOp>(
            loc, byteOffsetIn(b, loc, tile, workgroupBufferOf(tile)),
            index(b, 0x3fff0));
        int64_t box = gen.getTensorMap().getType().getTensor().getDimSize(0);
        descriptors[gen.getDescriptor()] = {start, box * 128,
                                            workgroupBufferOf(gen.getTensor()),
                                            tensor.getElementType()};
        continue;
      }
      if (isa<nvgpu::WarpgroupMmaInitAccumulatorOp>(op)) {
        auto type = cast<VectorType>(op->getResult(0).getType());
        Value zeros = b.create<arith::ConstantOp>(
            loc, DenseElementsAttr::get(type, b.getZeroAttr(b.getF32Type())));
        op->getResult(0).replaceAllUsesWith(zeros);
        continue;
      }
      if (auto fence = dyn_cast<NVVM::FenceProxyOp>(op)) {
        if (fence.getKind() == NVVM::ProxyKind::async ||
            fence.getKind() == NVVM::ProxyKind::async_shared)
          markUnfenced(b, false);
        continue;
      }
      if (auto mma = dyn_cast<nvgpu::WarpgroupMmaOp>(op)) {
        checkFenced(b);
        // The accumulator operand is a fragment by now: read it untyped.
        Value d = emulateMma(b, mma, op->getOperand(2));
        record(b, mma);
        commitAndWait(b, /*commit=*/true, mma.getWaitGroup());
        op->getResult(0).replaceAllUsesWith(d);
        continue;
      }
      if (auto wait = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op)) {
        commitAndWait(b, /*commit=*/false, wait.getGroup());
        continue;
      }
      auto store = cast<nvgpu::WarpgroupMmaStoreOp>(op);
      VectorType tile = tiles[op];
      int64_t n = tile.getDimSize(1), half = n / 2;
      Value fragment = op->getOperand(0);
      Value scratch = scratchOf(tile.getNumElements() / 128);
      b.create<vector::StoreOp>(loc, fragment, scratch,
                                ValueRange{index(b, 0)});
      Value busy = b.create<arith::CmpIOp>(
          loc, arith::CmpIPredicate::ne,
          b.create<memref::LoadOp>(loc, inFlight, threadSlot(b)), index(b, 0));
      Value nan = emulatedPoison(b, loc, b.getF32Type());
      auto [warp, lane] = warpAndLane(b, /*rawWarp=*/true);
      for (int64_t i = 0; i < tile.getDimSize(0) / 64; ++i) {
        auto regs =
            b.create<scf::ForOp>(loc, index(b, 0), index(b, half), index(b, 1));
        OpBuilder rb = OpBuilder::atBlockBegin(regs.getBody());
        Value r = regs.getInductionVar();
        auto [row, col] = placeOf(rb, warp, lane, r);
        Value v = rb.create<memref::LoadOp>(loc, scratch,
                                            add(rb, r, index(rb, i * half)));
        v = rb.create<arith::SelectOp>(loc, busy, nan, v);
        rb.create<memref::StoreOp>(
            loc, v, store.getDstMemref(),
            ValueRange{add(rb, row, index(rb, i * half)), col});
      }
    }
    // Each map once: descriptors share them.
    SetVector<Operation *> maps;
    for (Operation *op : ops)
      if (auto gen = dyn_cast<nvgpu::WarpgroupGenerateDescriptorOp>(op))
        if (Operation *def = gen.getTensorMap().getDefiningOp())
          if (launch->isAncestor(def))
            maps.insert(def);
    for (Operation *op : llvm::reverse(ops))
      op->erase();
    // A map made inside the launch for its type alone (a null pointer
    // cast), now unused.
    for (Operation *def : maps) {
      if (!def->use_empty() || !isa<UnrealizedConversionCastOp>(def))
        continue;
      Operation *source = def->getOperand(0).getDefiningOp();
      def->erase();
      if (source && source->use_empty() && isMemoryEffectFree(source))
        source->erase();
    }
    return success();
  }
};

} // namespace

LogicalResult mlir::tfm::emulateWarpgroupMma(gpu::LaunchOp launch) {
  return WarpgroupMma(launch).run();
}
