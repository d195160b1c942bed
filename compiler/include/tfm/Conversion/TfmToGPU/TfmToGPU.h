//===- TfmToGPU.h - The CUDA target -----------------------------*- C++ -*-===//
//
// The GPU target compiles a whole entry to device code: every op becomes
// linalg on buffers (the backend-neutral TfmToLinalg lowerings), every
// linalg op a loop nest mapped to blocks and threads (tfm-map-to-gpu), and
// each nest one kernel, which MLIR's NVVM pipeline compiles to PTX. GEMMs
// are calls of the runtime's GEMM kernels (cuBLASLt), with those generated
// kernels as the fallback a session without the library runs. The entry
// function stays on the host: it offsets device pointers into the arena,
// the weights and the state, calls the GEMMs through host->run_kernel, and
// launches the kernels in order through host->launch
// (tfm-lower-gpu-launches); the runtime's CUDA device loads the PTX once
// per session.
//
// Host code never reads device memory, except through host->read_device
// where it must: the index checks read the first position out of range.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOGPU_TFMTOGPU_H
#define TFM_CONVERSION_TFMTOGPU_TFMTOGPU_H

#include "tfm/Conversion/Common/OpLowering.h"
#include "tfm/Conversion/ComputeType.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::tfm {

/// The type the GPU's GEMMs read f32 operands in under `computeType`: bf16
/// or f16, and null under f32 (no rounding).
Type narrowOperandType(ComputeType computeType, MLIRContext *ctx);

/// One entry function of the GPU target.
class GPUEntry : public BufferizedEntry {
public:
  GPUEntry(func::FuncOp fn, ModuleLayout &layout, ComputeType computeType)
      : BufferizedEntry(Kind::GPU, fn, layout), computeType(computeType) {}

  static bool classof(const BufferizedEntry *e) {
    return e->getKind() == Kind::GPU;
  }

  StringRef targetName() const override { return "CUDA"; }
  bool hostReadsBuffers() const override { return false; }
  /// Writes the check's outcome to its slot in the state, which the
  /// runtime reads after the run (TFM_CHECKS_IN_STATE); the run goes on.
  void reportCheck(int32_t check, Value first, Value flat) override;
  int64_t indexCheckRuns(int64_t n) const override;

  /// f16 for f32 GEMMs under --dtype=f16: tensor cores multiply 16-bit
  /// operands (tfm-tile-gpu-matmul).
  Type gemmOperandType(Type elem) const override;

  /// The dtype of the GEMM kernels' descriptors: the compute type.
  int32_t gemmKernelDtype() const;
  /// narrowOperandType of this entry's compute type.
  Type narrowOperandType() const {
    return mlir::tfm::narrowOperandType(computeType, ctx);
  }

  /// The device address of `buffer`'s first element, as an !llvm.ptr.
  Value devicePointer(Value buffer);

private:
  ComputeType computeType;
};

/// The attribute on an scf.parallel whose iterations are each run by a
/// warp, `tfm.lanes = 32`: tfm-tile-gpu-matmul's tensor-core tiles, whose
/// vector ops every lane of the warp executes together. tfm-map-to-gpu
/// gives such a loop a thread dimension of that many lanes.
constexpr llvm::StringLiteral kLanesAttrName = "tfm.lanes";

/// On an scf.for of a row kernel (WarpRows::pass) over the columns lb,
/// lb + step, ... of a row whose threads share the columns and combine
/// what they carry: any other split of the columns among the threads
/// computes the same, so tfm-vectorize-gpu-loops may give each thread
/// consecutive columns instead.
constexpr llvm::StringLiteral kColumnPassAttrName = "tfm.column_pass";

/// On a vector.load or vector.store that tfm-vectorize-gpu-loops proved
/// aligned: the bytes its address is a multiple of, which
/// tfm-lower-aligned-vector-access states on the LLVM access.
constexpr llvm::StringLiteral kVectorAlignmentAttrName = "tfm.alignment";

/// On a kernel whose tensor-core tiles multiply bf16 read as f16 bit
/// patterns: `tfm.mma_operand_type = bf16`, which tfm-retype-bf16-tiles
/// sets and tfm-lower-bf16-mma-sync reads; or on one nvgpu.mma.sync, as the
/// kernels built whole (FlashAttentionMma.cpp) mark theirs.
constexpr llvm::StringLiteral kMmaOperandTypeAttrName = "tfm.mma_operand_type";

/// The host's view `passed` of 16-bit bytes as `elem` (bf16 read as f16
/// bit patterns): a view of the arena or the weights (a rounded copy, a
/// weight stored rounded), or a window of one (a part of a packed
/// projection's weight). Null when it is neither.
Value retypedView(OpBuilder &b, Value passed, Type elem);

/// Whether every result of `map` is a loop dimension or a constant: the
/// maps the GPU's hand-built loop nests read buffers through.
bool readsByLoopsOrConstants(AffineMap map);
/// A float mask's element `x` as f32, the type the kernels' scores are in.
Value maskValueAsF32(OpBuilder &b, Location loc, Value x);
/// The position such a map reads at the loop indices `loops`.
SmallVector<Value> indicesAt(OpBuilder &b, Location loc, AffineMap map,
                             ArrayRef<Value> loops);
/// An scf.parallel over [0, trips[d]) in each dimension d, built around
/// `body`.
scf::ParallelOp buildParallelLoop(
    OpBuilder &b, Location loc, ArrayRef<int64_t> trips,
    function_ref<void(OpBuilder &, Location, ValueRange)> body);

/// The widest query or value row the f32 attention kernels keep in a
/// warp's registers; a wider one takes the neutral lowering (scores in
/// memory).
constexpr int64_t kFlashAttentionMaxValueWidth = 256;

/// tfm.attention in f32 as one kernel of a warp per query row with the
/// online softmax over the keys: no [Sq, Sk] scores in memory
/// (Attention.cpp).
/// Its query may be rotated in it (rotatedInAttention); its keys may not.
LogicalResult lowerFlashAttention(AttentionOp op, BufferizedEntry &e);
/// tfm.attention_grad in f32 as two kernels of a warp per row, which
/// recompute the probabilities from each query row's log-sum-exp: dQ by
/// query rows, then dK and dV by key rows.
LogicalResult lowerFlashAttentionGrad(AttentionGradOp op, BufferizedEntry &e);
/// tfm.attention under --dtype=f16 as one kernel of tensor-core products
/// and the online softmax, a block per 64 query rows
/// (FlashAttentionMma.cpp).
LogicalResult lowerFlashAttentionMma(AttentionOp op, BufferizedEntry &e);
/// The widest head the tensor-core attention takes: three [64, d] f16 tiles
/// fill the 48 KB of shared memory a block has without asking for more.
constexpr int64_t kFlashAttentionMmaMaxHead = 128;

/// tfm.layer_norm or tfm.add_layer_norm (with `residual`, its sum written
/// to `sum`'s buffer when asked) as one kernel of a warp per row, the
/// statistics summed by shuffles (Normalization.cpp); RMSNorm with `rms`.
LogicalResult lowerWarpLayerNorm(BufferizedEntry &e, Value input,
                                 Value residual, Value scale, Value bias,
                                 int64_t axis, double epsilon, bool rms,
                                 Value result, Value sum);

/// tfm.layer_norm_grad: the input's gradient and the rows' statistics in
/// one kernel of a warp per row, then the scale's and bias's gradients as
/// column sums (Normalization.cpp).
LogicalResult lowerWarpLayerNormGrad(LayerNormGradOp op, BufferizedEntry &e);

/// tfm.softmax_grad along the last axis as one kernel of a warp per row:
/// Σ dy · y, then scale · y · (dy - Σ).
LogicalResult lowerWarpSoftmaxGrad(SoftmaxGradOp op, BufferizedEntry &e);
/// tfm.softmax over the last axis, or tfm.masked_softmax (the scores
/// scaled, masked by `mask` of `kind` and the causal triangle), as one
/// kernel of a warp per row (Normalization.cpp).
LogicalResult lowerWarpSoftmax(BufferizedEntry &e, Value input, Value mask,
                               MaskKind kind, double scale, bool causal,
                               Value result);

/// tfm.reduce over the last axes as one kernel of a warp per row
/// (Reduction.cpp).
LogicalResult lowerWarpRowReduction(ReduceOp op, BufferizedEntry &e);
/// The row groups of a block of the column reduction: each of its 32
/// columns' rows are split over this many threads.
constexpr int64_t kBlockColumnsRowGroups = 16;
/// tfm.reduce over the leading axes as one kernel of a block per 32
/// columns, each column's rows split over kBlockColumnsRowGroups threads
/// whose partials meet in shared memory (Reduction.cpp).
LogicalResult lowerBlockColumnReduction(ReduceOp op, BufferizedEntry &e);

/// tfm.cross_entropy: the rows' statistics in one kernel of a warp per row,
/// then the neutral lowering's mean over the rows.
LogicalResult lowerWarpCrossEntropy(CrossEntropyOp op, BufferizedEntry &e);
/// tfm.cross_entropy_grad in one kernel of a warp per row, after the
/// neutral lowering's count of the labels not ignored.
LogicalResult lowerWarpCrossEntropyGrad(CrossEntropyGradOp op,
                                        BufferizedEntry &e);

/// linear, matmul and QKV projections as calls of the runtime's GEMM
/// kernels (cuBLASLt), each with the generated GEMM as its fallback
/// (Gemm.cpp).
void populateGPUGemmLowerings(OpLoweringSet &set);
/// Whether a matmul multiplies f32 rows (its batch folded in) by one 2-D
/// right operand, which the library takes as one GEMM.
bool matmulHasSharedRightOperand(MatmulOp op);
/// tfm.conv2d as its patches (im2col) and one BATCH_MATMUL call over them,
/// the generated GEMM as the call's fallback (Convolution.cpp).
LogicalResult lowerConv2DAsGemm(Conv2DOp op, GPUEntry &e);

/// Whether the GEMM lowerings read `use` only rounded to the narrower
/// operand type (under bf16 or f16): a linear's, a projection's or a
/// convolution's weight, either operand of an f32 matmul. A constant read so
/// alone is stored in that type alone (layOutModule).
bool readsGemmOperandNarrow(OpOperand &use);

/// The backend-neutral lowerings, the GEMM kernels, and the fused attention
/// where it fits.
void populateTfmToGPULowerings(OpLoweringSet &set);

/// Registers the GPU's layout rules with tfm-plan-memory and its lowerings
/// (target "cuda"). Idempotent.
void registerGPUTarget();

/// The PTX features LLVM's NVPTX backend needs for `arch` ("sm_80",
/// "sm_90", "sm_90a"), or an empty string for an architecture tfm does not
/// build for.
StringRef ptxFeaturesOf(StringRef arch);

/// Whether `arch` has the warpgroup instructions (wgmma), which only the
/// architecture-specific sm_90a target assembles.
bool hasWarpgroupMma(StringRef arch);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOGPU_TFMTOGPU_H
