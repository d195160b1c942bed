//===- StagedGemm.h - The generated GEMM on the tensor cores ----*- C++ -*-===//
//
// tfm-tile-gpu-matmul's kernels for a GEMM of 16-bit operands: the staged
// kernel of StagedGemm.cpp for large ones, warp tiles reading global memory
// (TileGPUMatmul.cpp) for the rest.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOGPU_STAGEDGEMM_H
#define TFM_CONVERSION_TFMTOGPU_STAGEDGEMM_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::tfm {

/// Replaces `op` (with its starting fill, which writes `start`, and its
/// `epilogue`, when given) by the staged tensor-core kernel, if `op` is
/// large enough for it and its operands lie as it reads them; `half` is
/// their type. Returns false, changing nothing, otherwise.
bool stageGemmOnTensorCores(linalg::GenericOp op, FloatType half,
                            const APFloat &start, Operation *fill,
                            linalg::GenericOp epilogue);

/// `epilogue`'s body on `value`, the output's element at `indices`, with
/// its other inputs loaded at their positions.
Value applyGemmEpilogue(OpBuilder &b, Location loc, linalg::GenericOp epilogue,
                        Value out, Value value, ArrayRef<Value> indices);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOGPU_STAGEDGEMM_H
