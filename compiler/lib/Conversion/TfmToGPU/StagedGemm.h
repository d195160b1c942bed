//===- StagedGemm.h - The generated GEMM on the tensor cores ----*- C++ -*-===//
//
// tfm-tile-gpu-matmul's kernels for a GEMM of 16-bit operands: on sm_90a
// the warpgroup kernel of WgmmaGemm.cpp, elsewhere the staged kernel of
// StagedGemm.cpp for large ones, warp tiles reading global memory
// (TileGPUMatmul.cpp) for the rest; and what the two staged kernels share,
// the operands' tiles and their copies.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOGPU_STAGEDGEMM_H
#define TFM_CONVERSION_TFMTOGPU_STAGEDGEMM_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::tfm {

/// An operand as a staged kernel reads it: its tile's rows run along loop
/// dimension `outer` and its contiguous columns along `inner`, one of them
/// the reduction.
struct GemmOperand {
  Value buffer;
  AffineMap map;
  unsigned outer = 0, inner = 0;
  int64_t rows = 0, cols = 0; // the tile, [rows, cols] per stage
  bool reductionInner = false;
  Value tiles; // the stages in shared memory
};

/// Input `input` of `op` as a GemmOperand of tiles `ownTile` along loop
/// dimension `own` (M or N) and `tileK` along `red` (K), when its last index
/// is one of the two, it reads the other too, and each 16-byte chunk of a
/// row starts 16-byte aligned: every stride but the last (1) and the offset
/// a multiple of 8 values, and the contiguous extent too. Otherwise none,
/// and `whyNot` says which of these the operand fails.
std::optional<GemmOperand> gemmOperandOf(linalg::GenericOp op, unsigned input,
                                         unsigned own, unsigned red,
                                         int64_t ownTile, int64_t tileK,
                                         std::string &whyNot);

/// `op`'s operands A and B as a staged kernel of `tileM` x `tileN` x
/// `tileK` tiles reads them (gemmOperandOf), when `op` is at least half a
/// tile along M and N and `minK` along K (smaller GEMMs would leave most of
/// a block's tile idle). Returns "" then, and otherwise why not.
std::string stagedGemmOperands(linalg::GenericOp op, int64_t tileM,
                               int64_t tileN, int64_t tileK, int64_t minK,
                               std::optional<GemmOperand> &a,
                               std::optional<GemmOperand> &b);

/// What the staged kernels share while they are built: their GEMM (loop
/// ranges and dimensions, operands, output, epilogue, the fill's value),
/// the launch and the block's place in the GEMM, and index arithmetic at
/// the kernel's builder `kb`.
struct GemmKernelBuilder {
  OpBuilder kb;
  Location loc;
  APFloat start;
  int64_t tileM, tileN, tileK;
  SmallVector<int64_t> ranges;
  unsigned rowDim = 0, colDim = 0, redDim = 0;
  GemmOperand a, bOp;
  Value out;
  linalg::GenericOp epilogue;
  gpu::LaunchOp launch;
  /// The thread in its block, the first row and column of the block's
  /// tile, and the batch indices of its output.
  Value tx, rowBase, colBase;
  SmallVector<Value> batchIvs;

  /// Opens the launch that replaces `op`: column tiles x row tiles x batch
  /// blocks of `threads` threads, `dynamicShared` bytes of dynamic shared
  /// memory (0: none) and `workgroup` buffers; `kb` at its body's start,
  /// where the block's place is computed first.
  GemmKernelBuilder(linalg::GenericOp op, const GemmOperand &a,
                    const GemmOperand &b, linalg::GenericOp epilogue,
                    const APFloat &start, int64_t tileM, int64_t tileN,
                    int64_t tileK, int64_t threads, int64_t dynamicShared,
                    TypeRange workgroup);

  Value index(int64_t v);
  Value add(Value x, Value y);
  Value add(Value x, int64_t y);
  Value mul(Value x, int64_t y);
  Value div(Value x, int64_t y);
  Value rem(Value x, int64_t y);

  /// The first index of the block's tile along loop dimension `dim`, for
  /// the reduction step `step`.
  Value tileStart(unsigned dim, Value step);

  /// The indices into `o`'s memref of the block's element at `outerAt` and
  /// `innerAt` along the two loop dimensions it is read along.
  SmallVector<Value> indicesOf(const GemmOperand &o, Value outerAt,
                               Value innerAt);

  /// Starts the cp.async of the 16-byte chunk of `o` at row `r` and column
  /// `c` of its tile for reduction step `step` into `o.tiles` at
  /// `dstIndices`. A chunk past the matrix's edge reads nothing (its source
  /// clamped inside) and is zero-filled.
  void copyChunk(const GemmOperand &o, Value step, Value r, Value c,
                 ValueRange dstIndices);

  virtual ~GemmKernelBuilder() = default;

  /// Starts the copies of `o`'s tile for reduction step `step` into stage
  /// `stage`, each kernel into its layout.
  virtual void issueCopies(const GemmOperand &o, Value step, Value stage) = 0;

  /// The copies of the first `stages` - 1 of `steps` steps, a group each
  /// (empty past the last step); returns the first group.
  Value copyFirstSteps(int64_t stages, int64_t steps);

  /// Calls `issue(ahead, stage)` for step `ahead` = `step` + `stages` - 1,
  /// into the stage that step `step` - 1 used, if there is such a step.
  void forStepAhead(Value step, int64_t stages, int64_t steps,
                    function_ref<void(Value, Value)> issue);

  /// The copies of step `step` + `stages` - 1 into the stage that step
  /// `step` - 1 used, if there is such a step, and a group (empty if not).
  void copyStepAhead(Value step, int64_t stages, int64_t steps);

  /// Stores the output's element at `at` (batch indices, row, column),
  /// which `value` computes at the builder it is given, through the
  /// epilogue (if any); where the block's tiles can be partial, only
  /// inside the matrix.
  void storeOutput(ArrayRef<Value> at,
                   function_ref<Value(OpBuilder &, Location)> value);

  /// Erases what the kernel replaced: `op`, its `fill`, the epilogue.
  void replaced(linalg::GenericOp op, Operation *fill);
};

/// Replaces `op` (with its starting fill, which writes `start`, and its
/// `epilogue`, when given) by the staged tensor-core kernel, if `op` is
/// large enough for it and its operands lie as it reads them; `half` is
/// their type. Returns an empty string then; otherwise why not, changing
/// nothing.
std::string stageGemmOnTensorCores(linalg::GenericOp op, FloatType half,
                                   const APFloat &start, Operation *fill,
                                   linalg::GenericOp epilogue);

/// The same on sm_90a, by the warpgroup kernel (WgmmaGemm.cpp): wgmma
/// reading tiles that cp.async stages in shared memory, or with `tma`
/// that TMA loads, where the operands allow it; where they do not,
/// `whyNoTma` says why.
std::string stageGemmOnWarpgroups(linalg::GenericOp op, FloatType half,
                                  const APFloat &start, Operation *fill,
                                  linalg::GenericOp epilogue, bool tma,
                                  std::string &whyNoTma);

/// `epilogue`'s body on `value`, the output's element at `indices`, with
/// its other inputs loaded at their positions.
Value applyGemmEpilogue(OpBuilder &b, Location loc, linalg::GenericOp epilogue,
                        Value out, Value value, ArrayRef<Value> indices);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOGPU_STAGEDGEMM_H
