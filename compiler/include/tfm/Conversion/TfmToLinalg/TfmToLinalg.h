//===- TfmToLinalg.h - Backend-neutral lowerings of tfm ---------*- C++ -*-===//
//
// tfm ops as linalg on the buffers of a BufferizedEntry: what every target
// can run as generated code. One file per op family, each with one populate
// function; a target populates all of them first, then replaces the ops it
// runs through library kernels. The generic GEMM, softmax and linear here
// are also the fallbacks a target's kernel lowerings call for what their
// kernels do not take (other element types, broadcast batches, empty
// shapes).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOLINALG_TFMTOLINALG_H
#define TFM_CONVERSION_TFMTOLINALG_TFMTOLINALG_H

#include "tfm/Conversion/Common/OpLowering.h"

namespace mlir::tfm {

/// Arithmetic, comparisons, select, cast, activations, math functions,
/// broadcast and dropout outside training (Elementwise.cpp).
void populateElementwiseLowerings(OpLoweringSet &set);
/// Reductions and softmax over any axis (Reduction.cpp).
void populateReductionLowerings(OpLoweringSet &set);
/// Gather, embedding, slice, concat, split, reshape, transpose and
/// positional encoding (DataMovement.cpp).
void populateDataMovementLowerings(OpLoweringSet &set);
/// Cross-entropy and its gradient (Loss.cpp).
void populateLossLowerings(OpLoweringSet &set);
/// The step count, dropout in training and the embedding gradient
/// (Training.cpp).
void populateTrainingLowerings(OpLoweringSet &set);
/// The ALL_REDUCE call of `start`'s member, its START or its WAIT, on
/// `work` (the member's dense storage).
void callAllReduce(AllReduceStartOp start, bool isStart, Value work,
                   BufferizedEntry &e);
/// Generation: the caches' writes (Generation.cpp).
void populateGenerationLowerings(OpLoweringSet &set);
/// matmul, linear, unpacked QKV projections and attention as generic
/// contractions (Matmul.cpp).
void populateMatmulLowerings(OpLoweringSet &set);
/// masked softmax, layer norm (with the residual add) and its gradient
/// (Normalization.cpp).
void populateNormalizationLowerings(OpLoweringSet &set);
/// SGD and Adam updates of the session state (Optimizer.cpp).
void populateOptimizerLowerings(OpLoweringSet &set);

/// tfm.embedding_grad: each position's gradient row added into the table
/// at its token, over the positions in order; with `threadPerColumn`, as
/// a parallel loop over the columns (the GPU's threads), each walking the
/// positions, else as the positions' rows in turn (Training.cpp).
LogicalResult emitEmbeddingGrad(EmbeddingGradOp op, BufferizedEntry &e,
                                bool threadPerColumn);
/// Rotary position embeddings (Rotary.cpp).
void populateRotaryLowerings(OpLoweringSet &set);
/// Writes buffer `x` rotated as tfm.rotary does, by the tables `cos` and
/// `sin` (broadcast to it), into `out`, each element passed through
/// `finish` on its way (when given): the GPU's attention rounds its
/// operands to 16 bits so, rotating them in the same pass.
void emitRotary(
    BufferizedEntry &e, Value x, Value cos, Value sin, bool interleaved,
    Value out,
    llvm::function_ref<Value(OpBuilder &, Location, Value)> finish = nullptr);
/// 2-D convolution (Convolution.cpp).
void populateConvolutionLowerings(OpLoweringSet &set);
/// Quantize, dequantize, dynamic quantize, the integer matmul and the
/// quantized linear (Quantization.cpp).
void populateQuantizationLowerings(OpLoweringSet &set);
/// tfm.quantized_linear as generated code: the weight dequantized into a
/// temporary, the input quantized and dequantized in one pass (unless it
/// is read as it is), then the generic linear. The fallback of a target's
/// integer kernels.
LogicalResult lowerGenericQuantizedLinear(QuantizedLinearOp op,
                                          BufferizedEntry &e);
/// Every populate function above.
void populateTfmToLinalgLowerings(OpLoweringSet &set);

/// `act(x)` in the element type of `x`; relu, gelu and gelu_tanh as the
/// tfm ops define them.
Value applyActivation(OpBuilder &ob, Location l, Activation act, Value x);

/// out[..., m, n] = Σ_k lhs[..., m, k] · rhs[..., k, n] on buffers, with
/// transposes and broadcast batch dimensions; floats or (wrapping)
/// integers of one type.
void lowerGenericMatmul(BufferizedEntry &e, Value lhs, Value rhs, bool tl,
                        bool tr, Value out);

/// result = act(input · weight[rows]ᵀ + bias[rows]) as a generic matmul,
/// where `rows` are the result's columns starting at `rowOffset` of weight
/// (a part of a packed projection). `x`, `w` and `bias` are dense buffers,
/// `out` the result's.
void lowerGenericLinear(BufferizedEntry &e, Value x, Value w, Value bias,
                        int64_t rowOffset, Activation act, Value out);

/// tfm.gated_linear's epilogue: out = act(h[..., :F]) · h[..., F:], for the
/// packed projection `h` (a dense buffer [..., 2F]) and the result's buffer
/// `out` [..., F]; one pass over h, whichever GEMM wrote it.
void lowerGatedProduct(BufferizedEntry &e, Value h, Activation act, Value out);

/// The buffer a gated linear's packed projection goes to: a temporary of
/// the input's leading dimensions and the weight's rows.
Value gatedProjectionBuffer(BufferizedEntry &e, GatedLinearOp op);

/// tfm.conv2d as a padded copy and one generic contraction.
void lowerGenericConv2D(BufferizedEntry &e, Conv2DOp op);
/// Softmax of `input` over `axis` into `out` (buffers of one shape).
void lowerGenericSoftmax(BufferizedEntry &e, Value input, int64_t axis,
                         Value out);

/// The gradients of a layer norm's scale and bias from rows x and dy
/// [m, n] and the rows' mean and rstd [m]: Σ dy · x̂ and Σ dy over the
/// rows, into dscale and dbias [n].
void layerNormColumnGradients(BufferizedEntry &e, Value x, Value dy, Value mean,
                              Value rstd, Value dscale, Value dbias);

/// The operands of a cross-entropy (or its gradient) as rows: the logits
/// [rows, classes] and the labels [rows], dense, the labels checked.
struct CrossEntropyRows {
  Value x, labels;
  int64_t rows, classes;
};
/// Fails, naming `op`, on logits without classes.
FailureOr<CrossEntropyRows> crossEntropyRows(BufferizedEntry &e, Operation *op,
                                             Value logits, OpOperand &labels,
                                             int64_t ignore);

/// tfm.cross_entropy's result from the rows' maximum `mx`, sum of
/// exp(x - mx) `se` and sum of the logits `sx` [rows]: the smoothed loss of
/// each row whose label is not ignored, summed and counted in f64, then
/// the mean.
void crossEntropyFromRowStatistics(BufferizedEntry &e, CrossEntropyOp op,
                                   const CrossEntropyRows &rows, Value mx,
                                   Value se, Value sx);
/// One row's term of that sum, in f64 (0 where the label is ignored), and
/// whether its label counts (i1): from the row's statistics `mx`, `se` and
/// `sx` (scalars, f32 or f64), its `label` and its `row` in rows.x. Every
/// target's reduction over the rows builds it with this.
std::pair<Value, Value> crossEntropyRowTerm(OpBuilder &b, Location loc,
                                            CrossEntropyOp op,
                                            const CrossEntropyRows &rows,
                                            Value row, Value mx, Value se,
                                            Value sx, Value label);

/// Whether `label` counts in a cross-entropy (i1): it is not `ignore`.
Value labelCounts(OpBuilder &b, Location loc, Value label, int64_t ignore);

/// A 0-d f32 buffer holding how many of `labels` are not `ignore`: the
/// denominator of the cross-entropy's mean.
Value crossEntropyValidCount(BufferizedEntry &e, Value labels, int64_t ignore);

/// tfm.masked_softmax of `x` (with `mask` broadcast to it, or none) over
/// the last axis into `out`, which may be `x`.
void lowerGenericMaskedSoftmax(BufferizedEntry &e, Value x, Value mask,
                               MaskKind kind, double scale, bool causal,
                               Value out);

/// The factor tfm.attention scales its scores by (1/sqrt(head dim) unless
/// the op gives one) and the kind of its mask.
double attentionScale(AttentionOp op);
MaskKind attentionMaskKind(AttentionOp op);
/// The same of the attention whose gradient `op` is.
double attentionScale(AttentionGradOp op);
MaskKind attentionMaskKind(AttentionGradOp op);

/// scale · y · (dy - Σ dy · y) along `axis` into `out` (buffers of one
/// shape; `out` may be `dy`): tfm.softmax_grad.
void lowerGenericSoftmaxGrad(BufferizedEntry &e, Value y, Value dy,
                             int64_t axis, double scale, Value out);

/// Lowers a reshape (or a transpose that only moves unit dimensions) that
/// the plan does not keep as a view: a copy of `input` into the buffer of
/// `result`.
LogicalResult lowerReshape(BufferizedEntry &e, Value input, Value result);

/// The step count `step` (i64) as f64, and the learning rate of
/// `schedule` at that step, computed with `ob` at `l`.
std::pair<Value, Value> stepAndRate(OpBuilder &ob, Location l, Value step,
                                    LRSchedule schedule, double lr,
                                    int64_t dModel, int64_t warmup);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOLINALG_TFMTOLINALG_H
