//===- Emulation.h - Parts of tfm-emulate-gpu-kernels -----------*- C++ -*-===//
//
// What the files of the emulation of GPU kernels share: the poison that
// stands for memory no one has written yet, a thread's linear index, the
// values every thread of a launch has alike, and
// the rewriting of asynchronous copies (EmulateAsyncCopies.cpp) and of
// transaction barriers (EmulateTransactionBarriers.cpp) that the pass
// (EmulateGPUKernels.cpp) runs before cutting a body into phases.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_GPUEMULATION_EMULATION_H
#define TFM_CONVERSION_GPUEMULATION_EMULATION_H

#include "tfm/abi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::tfm {

/// What memory holds before anything is written to it in the emulation:
/// NaN for floats, and for integers a pattern no kernel computes by chance.
Value emulatedPoison(OpBuilder &b, Location loc, Type element);

/// The linear index of the calling thread in `launch`'s block, x fastest,
/// as the GPU numbers the lanes of its warps.
Value linearThreadIndex(OpBuilder &b, Location loc, gpu::LaunchOp launch);

/// How many copies a thread keeps pending before it completes its oldest,
/// as the hardware may at any time.
constexpr int64_t kEmulatedPendingCopies = 32;

/// Gives every value defined inside `launch` (op results and the arguments
/// of nested blocks) the type `retyped` returns for its type, where that
/// is not null.
void retypeValues(gpu::LaunchOp launch, function_ref<Type(Type)> retyped);

/// A switch at `b` over `which`, one of `cases` records' ops: `emit` fills
/// case c (its builder inside it, before the yield it adds).
void switchOverCases(OpBuilder &b, Location loc, Value which, int64_t cases,
                     function_ref<void(OpBuilder &, int64_t)> emit);

/// The workgroup buffer (a launch's workgroup attribution, dynamic shared
/// memory included) that `memref` is, or a view of through subviews,
/// views and casts; null otherwise.
Value workgroupBufferOf(Value memref);

/// `buffer` (a workgroup buffer) as one row of `element`s: its own
/// elements, or those its bytes hold when it is dynamic shared memory.
Value flatView(OpBuilder &b, Location loc, Value buffer, Type element);

/// The byte at which `view` starts in `buffer`, its workgroup buffer.
Value byteOffsetIn(OpBuilder &b, Location loc, Value view, Value buffer);

/// Whether `v` is the same for every thread of `launch` and every
/// iteration of its loops: defined outside the launch, one of its block
/// ids or sizes (not a thread id), or computed from such by ops without
/// regions or memory effects.
bool isLaunchUniform(gpu::LaunchOp launch, Value v);

/// The uniform `v` at `b`'s insertion point: what `map` holds for it, a
/// value from outside the launch as it is, or the launch's ops that compute
/// it cloned there (and recorded in `map`).
Value uniformAt(OpBuilder &b, gpu::LaunchOp launch, Value v, IRMapping &map);

/// Walks the first `count` of a list of records of pending transfers in
/// issue order: completes record i by `complete(i)` where `done(i)` holds,
/// and moves each other one up by `move(from, to)`, in order. Returns how
/// many are kept.
Value retireRecords(OpBuilder &b, Location loc, Value count,
                    function_ref<Value(OpBuilder &, Value)> done,
                    function_ref<void(OpBuilder &, Value)> complete,
                    function_ref<void(OpBuilder &, Value, Value)> move);

/// Replaces, in `launch`, each nvgpu.device_async_copy by a record of the
/// copy in its thread's list of pending copies (its destination poisoned),
/// each nvgpu.device_async_create_group by the commit of the thread's
/// uncommitted records as one group, and each nvgpu.device_async_wait by
/// the copies of every group but the `numGroups` newest: what
/// cp.async.commit_group and cp.async.wait_group do, whatever tokens the
/// ops name. A destination so reads as poison until the wait that covers
/// its copy. Fails, naming the op, on a copy whose memrefs differ between
/// threads or iterations, or on a token that flows elsewhere than into a
/// group or a wait.
LogicalResult emulateAsyncCopies(gpu::LaunchOp launch);

/// The alignment of each block's workgroup buffers: the 128-byte swizzle
/// that TMA writes and wgmma reads takes bits 7-9 of the address, so a
/// kernel aligns its tiles to 1024 bytes, and the emulation computes the
/// swizzle from the offset within the buffer.
constexpr int64_t kWorkgroupAlignment = 1024;

/// The highest rank of a TMA box (and of its tensor).
constexpr int64_t kTensorMapMaxRank = TFM_TENSOR_MAP_MAX_RANK;

/// The tensor map an emulated nvgpu.tma.async.load reads where a GPU reads
/// a CUtensorMap, as the runtime's CPU device makes it
/// (tfm_abi_tensor_map_fn_t): 64-bit words holding what
/// cuTensorMapEncodeTiled is given beyond the descriptor's type (which has
/// the box, the element type and the swizzle).
enum EmulatedTensorMapWord : int64_t {
  /// The address of the tensor's first element.
  kTensorMapBase = TFM_EMULATED_TENSOR_MAP_BASE,
  /// Its dims, innermost first, as many as the box's rank.
  kTensorMapDims = TFM_EMULATED_TENSOR_MAP_DIMS,
  /// The bytes between neighbours along its dims 1 and up (along dim 0,
  /// the element's size).
  kTensorMapStrides = TFM_EMULATED_TENSOR_MAP_STRIDES,
  kTensorMapWords = TFM_EMULATED_TENSOR_MAP_WORDS,
};

/// Replaces, in `launch`, the warpgroup ops (nvgpu.warpgroup.generate.
/// descriptor, mma, mma.store, mma.init.accumulator, and
/// nvvm.wgmma.wait.group.sync.aligned) by per-thread code that computes
/// what MLIR 19's NVVM lowering and the hardware compute
/// (EmulateWarpgroupMma.cpp); the accumulators become vectors of each
/// thread's fragment. Where a GPU could read other values, the run stops
/// with a message: an mma reading shared memory that cp.async wrote
/// without a fence.proxy.async after the wait (wgmma reads through the
/// async proxy), or a cp.async writing bytes that a group still in flight
/// reads. Runs before emulateAsyncCopies, which replaces the copies.
/// Fails, naming the op, on a shape the lowering mis-addresses, a
/// descriptor that flows elsewhere than into an mma, or a tile that is not
/// a view of a workgroup buffer of 16-bit elements.
LogicalResult emulateWarpgroupMma(gpu::LaunchOp launch);

/// Replaces, in `launch`, each nvgpu.mbarrier.create by a workgroup buffer
/// of its barriers' states, the inits and arrivals by updates of them, and
/// each nvgpu.mbarrier.try_wait.parity by a gpu.barrier and a check that
/// the phase waited for has completed, which stops the run with a message
/// where a GPU would hang (EmulateTransactionBarriers.cpp). Each
/// nvgpu.tma.async.load poisons its destination and lands at a wait on its
/// barrier, read through an EmulatedTensorMapWord map. Fails, naming the
/// op, on a token that is used, a wait inside a region that not every
/// thread may enter, barriers that flow elsewhere, or a load the emulation
/// does not run (multicast, a map made inside the launch, a destination
/// that is not a dense view of a workgroup buffer).
LogicalResult emulateTransactionBarriers(gpu::LaunchOp launch);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_GPUEMULATION_EMULATION_H
