//===- Ops.h - Semantics of the tfm ops, one function each ------*- C++ -*-===//
//
// Each tfm op's definition in TfmOps.td as a pure function on host tensors,
// in double precision, with the result's shape given (the op's verified
// result type); the dispatcher (Interpreter.cpp) maps ops to them. They
// favour the obvious loop over the fast one. Ops whose operands can be out
// of their domain (indices, labels) fail with a message instead.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_REFERENCE_OPS_H
#define TFM_REFERENCE_OPS_H

#include "tfm/IR/TfmOps.h"
#include "tfm/Reference/Tensor.h"

#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>

namespace mlir::tfm::reference {

using Shape = llvm::ArrayRef<int64_t>;

/// The number of elements of `dims`.
int64_t product(Shape dims);
/// Row-major strides of `shape`, in elements.
std::vector<int64_t> stridesOf(Shape shape);

/// For every element of `out` (row-major), the flat index of the element of
/// `in` that numpy broadcasting reads.
std::vector<int64_t> broadcastMap(Shape in, Shape out);

//===----------------------------------------------------------------------===//
// Elementwise (ElementwiseOps.cpp)
//===----------------------------------------------------------------------===//

enum class BinaryKind { Add, Sub, Mul, Div, Pow, Max, Min };

/// `lhs op rhs`, broadcast to `outShape`, in the result's kind: integers
/// exactly (wrapping, division truncating), floats in double precision.
Tensor evalBinary(BinaryKind op, const Tensor &lhs, const Tensor &rhs,
                  ElementKind kind, Shape outShape);
Tensor evalCompare(ComparePredicate p, const Tensor &lhs, const Tensor &rhs,
                   Shape outShape);
Tensor evalSelect(const Tensor &cond, const Tensor &t, const Tensor &f,
                  ElementKind kind, Shape outShape);
/// Each element converted to `kind`, rounded as the type holds it.
Tensor evalCast(const Tensor &in, ElementKind kind);
/// `f` of every element of a float tensor.
Tensor evalUnary(Tensor in, double (*f)(double));
double evalActivation(double x, Activation act);
Tensor evalGelu(Tensor in, GeluApproximation approximate);
/// Dropout with the counter-based RNG of CounterRNG.h; `step` mixes the
/// training step into the stream.
Tensor evalDropout(Tensor in, double rate, bool training, uint64_t seed,
                   std::optional<int64_t> step);

//===----------------------------------------------------------------------===//
// Data movement (DataMovementOps.cpp)
//===----------------------------------------------------------------------===//

Tensor evalBroadcast(const Tensor &in, Shape outShape);
/// `result.shape[i] = in.shape[perm[i]]`.
Tensor evalTranspose(const Tensor &in, Shape perm);
Tensor evalReshape(const Tensor &in, Shape outShape);
Tensor evalSlice(const Tensor &in, Shape starts, Shape steps, Shape outShape);
/// Gathers along `axis`; an index outside [-n, n) fails.
FailureOr<Tensor> evalGather(const Tensor &in, const Tensor &indices,
                             int64_t axis, Shape outShape, std::string &error);
/// ONNX ScatterND into a copy of `in`, combining by `reduction`; an index
/// outside [-n, n) fails.
FailureOr<Tensor> evalScatterND(const Tensor &in, const Tensor &indices,
                                const Tensor &updates,
                                ScatterReduction reduction, std::string &error);
/// The `k` largest (or smallest) elements along `axis` and their indices;
/// equal elements keep their order, NaN is larger than every number.
std::vector<Tensor> evalTopK(const Tensor &in, int64_t k, int64_t axis,
                             bool smallest);
/// Rows of `table`; an index outside [0, rows) fails.
FailureOr<Tensor> evalEmbedding(const Tensor &table, const Tensor &indices,
                                Shape outShape, std::string &error);
Tensor evalConcat(llvm::ArrayRef<const Tensor *> inputs, int64_t axis,
                  Shape outShape);
std::vector<Tensor> evalSplit(const Tensor &in, int64_t axis, Shape sizes);
Tensor evalPositionalEncoding(ElementKind kind, Shape outShape);

//===----------------------------------------------------------------------===//
// Neural-network ops (NNOps.cpp)
//===----------------------------------------------------------------------===//

Tensor evalMatmul(const Tensor &a, const Tensor &b, bool ta, bool tb,
                  ElementKind kind, Shape outShape);
/// x·Wᵀ + b over the last dimension, then an activation.
Tensor evalLinear(const Tensor &x, const Tensor &w, const Tensor *bias,
                  Activation act, Shape outShape);
/// act(h[..., :F]) · h[..., F:] for h = x·wᵀ + bias of width 2F.
Tensor evalGatedLinear(const Tensor &x, const Tensor &w, const Tensor *bias,
                       Activation act, Shape outShape);
/// tfm.rotary: x · cos + rotate(x) · sin over the last axis (2h wide),
/// rotate pairing i with i + h, or with `interleaved` 2j with 2j + 1.
Tensor evalRotary(const Tensor &x, const Tensor &cos, const Tensor &sin,
                  bool interleaved);
/// tfm.conv2d: input [N, C, H, W], weight [M, C/group, KH, KW], zero
/// padding; strides and dilations (h, w), pads (top, left, bottom, right).
Tensor evalConv2D(const Tensor &x, const Tensor &w, const Tensor *bias,
                  ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                  ArrayRef<int64_t> dilations, int64_t group, Shape outShape);
std::vector<Tensor> evalQKVProjection(const Tensor &x, const Tensor &w,
                                      const Tensor *bias, Shape sizes);
Tensor evalSoftmax(const Tensor &in, int64_t axis);
/// scale · y · (dy - Σ dy · y) along `axis`: the gradient of a softmax
/// whose result is `y`.
Tensor evalSoftmaxGrad(const Tensor &y, const Tensor &dy, int64_t axis,
                       double scale);
/// softmax(scale·x ⊕ mask) over the last axis, with an optional causal
/// triangle over the last two axes: the one definition behind attention and
/// masked_softmax.
Tensor evalMaskedSoftmax(const Tensor &x, const Tensor *mask, bool booleanMask,
                         bool causal, double scale);
/// Layer norm over the dimensions from `axis`; with `rms`, RMSNorm (no
/// mean subtracted).
Tensor evalLayerNorm(const Tensor &x, const Tensor &scale, const Tensor *bias,
                     int64_t axis, double eps, bool rms);
Tensor evalAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor *mask, bool causal,
                     std::optional<double> scale, Shape outShape);
/// tfm.attention_grad from the probabilities written out (the decomposed
/// backward pass): the query's, key's and value's gradients. `dO·O`, which
/// the fused kernels take from the result, comes here from `P` and `dO·Vᵀ`.
std::vector<Tensor> evalAttentionGrad(const Tensor &q, const Tensor &k,
                                      const Tensor &v, const Tensor &dout,
                                      const Tensor *mask, bool causal,
                                      std::optional<double> scale);
Tensor evalReduce(ReduceKind kind, const Tensor &in, Shape axes,
                  Shape outShape);

//===----------------------------------------------------------------------===//
// Quantization (QuantizationOps.cpp)
//===----------------------------------------------------------------------===//

/// ONNX QuantizeLinear into the integer `kind`: round(f32(x / scale)) +
/// zero point (0 when null), halves to even, saturated; NaN gives the zero
/// point. The scale's granularity is the op's (axis, blockSize).
Tensor evalQuantize(const Tensor &x, const Tensor &scale,
                    const Tensor *zeroPoint, ElementKind kind, int64_t axis,
                    int64_t blockSize);
/// ONNX DequantizeLinear into the float `kind`: (x - zero point) · scale.
Tensor evalDequantize(const Tensor &x, const Tensor &scale,
                      const Tensor *zeroPoint, ElementKind kind, int64_t axis,
                      int64_t blockSize);
/// ONNX DynamicQuantizeLinear: the ui8 values, the f32 scale and the ui8
/// zero point, computed in f32 as its definition does.
std::vector<Tensor> evalDynamicQuantize(const Tensor &x);
/// ONNX MatMulInteger: exact, wrapped to i32.
Tensor evalMatmulInteger(const Tensor &a, const Tensor &b,
                         const Tensor *aZeroPoint, const Tensor *bZeroPoint,
                         Shape outShape);
/// tfm.quantized_linear: the linear of the input as `mode` quantizes it
/// and the dequantized weight.
Tensor evalQuantizedLinear(const Tensor &x, const Tensor &weight,
                           const Tensor &weightScale,
                           const Tensor *weightZeroPoint, const Tensor *bias,
                           const Tensor *inputScale,
                           const Tensor *inputZeroPoint,
                           InputQuantization mode, Activation act,
                           int64_t blockSize, Shape outShape);

//===----------------------------------------------------------------------===//
// Training (TrainingOps.cpp)
//===----------------------------------------------------------------------===//

/// Mean cross-entropy with label smoothing; a label outside [0, K) that is
/// not `ignoreIndex` fails.
FailureOr<Tensor> evalCrossEntropy(const Tensor &logits, const Tensor &labels,
                                   double labelSmoothing, int64_t ignoreIndex,
                                   ElementKind kind, std::string &error);
FailureOr<Tensor> evalCrossEntropyGrad(const Tensor &logits,
                                       const Tensor &labels, double grad,
                                       double labelSmoothing,
                                       int64_t ignoreIndex, Shape outShape,
                                       std::string &error);
/// dx, dscale and dbias of layer norm (RMSNorm with `rms`) without a
/// residual.
std::vector<Tensor> evalLayerNormGrad(const Tensor &x, const Tensor &scale,
                                      const Tensor &dy, double eps, bool rms);
Tensor evalEmbeddingGrad(const Tensor &grad, const Tensor &indices,
                         Shape outShape);
/// One SGD step on `p` with learning rate `lr`.
void evalSGD(Tensor &p, const Tensor &g, double lr, double weightDecay);
/// One Adam step on `p` and its moments at step `step` (from 1).
void evalAdam(Tensor &p, Tensor &m, Tensor &v, const Tensor &g, double lr,
              double beta1, double beta2, double eps, double weightDecay,
              int64_t step);

} // namespace mlir::tfm::reference

#endif // TFM_REFERENCE_OPS_H
