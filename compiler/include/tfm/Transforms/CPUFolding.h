//===- CPUFolding.h - Layout decisions shared by planner and lowering -*- C++ -*-===//
//
// The CPU lowering reads some tensors through strided views instead of
// materializing them: a transpose that feeds only GEMMs, a transpose that a
// GEMM can write directly, and the parts of a packed QKV projection. The
// memory plan must know, since these values share storage. Both ask these
// predicates, so the two never disagree.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TRANSFORMS_CPUFOLDING_H
#define TFM_TRANSFORMS_CPUFOLDING_H

#include "tfm/IR/TfmOps.h"
#include "tfm/abi.h"

namespace mlir::tfm {

/// Buffers (arena slots, weights, state slots) start at multiples of this
/// many bytes.
constexpr int64_t kBufferAlignment = TFM_BUFFER_ALIGNMENT;

/// The bytes a tensor of `type` occupies in a buffer; an i1 takes a byte.
int64_t bufferBytes(ShapedType type);

/// `bytes` rounded up to kBufferAlignment.
inline int64_t alignBuffer(int64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

/// A transpose that only moves dimensions of size 1, so the data keeps its
/// order: a reshape in disguise, lowered as one (the exporters emit such
/// transposes for batch 1, between batch-first and sequence-first layouts).
bool movesOnlyUnitDims(TransposeOp op);

/// A matmul the BATCH_MATMUL kernel runs with strided operands: f32, equal
/// ranks of 2 to 4 and equal batch dimensions, no empty dimension. A
/// transposed operand is the same buffer read with swapped strides, which
/// is how the backward pass's weight and attention gradients (Xᵀ·dY, dSᵀ·Q)
/// reach the kernel without a copy.
bool isStridedMatmul(MatmulOp op);

/// A transpose whose users are all strided matmuls: it becomes a view of
/// its operand, with permuted strides.
bool foldsIntoMatmulOperand(TransposeOp op);

/// A transpose of a strided matmul's only result, right after it: the
/// matmul writes the transposed layout directly. Its buffer is live from the
/// matmul on.
bool foldsIntoMatmulResult(TransposeOp op);

/// A QKV projection computed as one GEMM into one packed buffer
/// [rows, Σsizes]; its results are column windows of that buffer.
bool isPackedQKV(QKVProjectionOp op);

/// A compare that only selects read, each at the compare's shape: every
/// select computes it inline, so the i1 tensor is never stored and the
/// compare's operands are read at the selects, which is where their
/// storage must still be alive.
bool computedInsideSelects(CompareOp op);

/// Whether a reshape can read its input in place. Every reshape of a dense
/// buffer can; a reshape of a packed QKV part (a column window of the packed
/// buffer) can only keep the window's columns together as its trailing
/// dimensions.
bool reshapeKeepsView(ReshapeOp op);

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_CPUFOLDING_H
