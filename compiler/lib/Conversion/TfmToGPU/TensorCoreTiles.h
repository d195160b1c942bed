//===- TensorCoreTiles.h - Shared-memory tiles for mma.sync -----*- C++ -*-===//
//
// What the tensor-core kernels (FlashAttentionMma.cpp, StagedGemm.cpp)
// share: 16-bit tiles in shared memory, filled by cp.async 16 bytes at a
// time and read by ldmatrix, their 16-byte chunks swizzled so that the
// eight rows one ldmatrix reads fall on eight different bank groups; and
// mma.sync m16n8k16 on 16-bit operands, bf16 held as f16 bit patterns
// (nvgpu's mma.sync and ldmatrix take f16 only).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOGPU_TENSORCORETILES_H
#define TFM_CONVERSION_TFMTOGPU_TENSORCORETILES_H

#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::tfm {

/// The f16 values of a 16-byte cp.async or one ldmatrix row.
inline constexpr int64_t kChunk = 8;

/// Where column `col` of row `row` lies in a tile whose rows hold
/// `rowElems` 16-bit values: its 16-byte chunk XORed with bits of the row.
/// A 128-byte line holds 8 chunks, so 8 / chunks rows share one; the eight
/// rows that one ldmatrix reads (consecutive rows, one chunk each) span
/// 8 / (8 / chunks) = chunks lines, each landing at the same chunk but for
/// the XOR with (row / rowsPerLine) mod min(chunks, 8), which spreads them
/// over the eight 16-byte bank groups. The XOR stays within the row.
inline Value swizzledColumn(OpBuilder &b, Location loc, Value row, Value col,
                            int64_t rowElems) {
  int64_t chunks = rowElems / kChunk;
  int64_t rowsPerLine = std::max<int64_t>(1, 8 / chunks);
  int64_t spread = std::min<int64_t>(chunks, 8);
  if (spread <= 1)
    return col;
  auto c = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); };
  Value chunk = b.create<arith::DivUIOp>(loc, col, c(kChunk));
  Value within = b.create<arith::RemUIOp>(loc, col, c(kChunk));
  Value line = rowsPerLine == 1
                   ? row
                   : b.create<arith::DivUIOp>(loc, row, c(rowsPerLine));
  Value moved = b.create<arith::XOrIOp>(
      loc, chunk, b.create<arith::RemUIOp>(loc, line, c(spread)));
  return b.create<arith::AddIOp>(
      loc, b.create<arith::MulIOp>(loc, moved, c(kChunk)), within);
}

/// `value` rounded to the tensor cores' `operandType` (f16 or bf16) and
/// held as f16, the type nvgpu's ldmatrix and mma.sync take: bf16 as its
/// bit pattern.
inline Value roundToOperand(OpBuilder &b, Location loc, Value value,
                            Type operandType) {
  Value rounded = b.create<arith::TruncFOp>(loc, operandType, value);
  if (operandType.isF16())
    return rounded;
  return b.create<arith::BitcastOp>(loc, b.getF16Type(), rounded);
}

/// mma.sync m16n8k16 with f32 accumulators; bf16 operands are marked for
/// tfm-lower-bf16-mma-sync and the emulation.
inline Value mmaSync(OpBuilder &b, Location loc, Value a, Value bFrag, Value c,
                     Type operandType) {
  auto op = b.create<nvgpu::MmaSyncOp>(loc, a, bFrag, c,
                                       b.getI64ArrayAttr({16, 8, 16}));
  if (operandType.isBF16())
    op->setAttr(kMmaOperandTypeAttrName, TypeAttr::get(operandType));
  return op;
}

/// The two B fragments (each two registers) that one ldmatrix.x4 of two
/// adjacent n8 tiles reads: its matrices 0 and 1, then 2 and 3.
inline std::pair<Value, Value> splitFragmentPair(OpBuilder &b, Location loc,
                                                 Value x4) {
  auto part = [&](int64_t at) -> Value {
    return b.create<vector::ExtractStridedSliceOp>(
        loc, x4, ArrayRef<int64_t>{at, 0}, ArrayRef<int64_t>{2, 2},
        ArrayRef<int64_t>{1, 1});
  };
  return {part(0), part(2)};
}

/// Closes the copies this thread started since its last group into one
/// (cp.async.commit_group).
inline Value commitGroup(OpBuilder &b, Location loc) {
  return b.create<nvgpu::DeviceAsyncCreateGroupOp>(
      loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
}

/// Waits until no more than `pending` of this thread's groups are in
/// flight (cp.async.wait_group). `token` names a group for the op's sake:
/// the wait counts groups, whichever it names. The other threads' copies
/// need a barrier after it.
inline void waitGroups(OpBuilder &b, Location loc, Value token,
                       int32_t pending) {
  b.create<nvgpu::DeviceAsyncWaitOp>(loc, token,
                                     b.getI32IntegerAttr(pending));
}

/// One 16-byte cp.async of `src` at `srcIndices` (the last one a chunk's
/// first column) into `dst` at `dstIndices`; `count` (null: all 8) values
/// read, the rest zero-filled. It bypasses L1: the tiles are read once
/// from shared memory, and other blocks find them in L2.
inline void copyChunkAsync(OpBuilder &b, Location loc, Value dst,
                           ValueRange dstIndices, Value src,
                           ValueRange srcIndices, Value count) {
  b.create<nvgpu::DeviceAsyncCopyOp>(
      loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), dst, dstIndices,
      src, srcIndices, b.getIndexAttr(kChunk), count, b.getUnitAttr());
}

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOGPU_TENSORCORETILES_H
