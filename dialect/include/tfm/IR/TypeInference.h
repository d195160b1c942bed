//===- TypeInference.h - Shape and type rules of tfm ops --------*- C++ -*-===//
//
// Every shape rule of the dialect lives here, once. The verifiers and the
// InferTypeOpInterface implementations both call these functions, so the
// builder's inferred type and the verifier's check can never disagree.
// Each function emits its diagnostic at `loc` when one is given.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_TYPEINFERENCE_H
#define TFM_IR_TYPEINFERENCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeRange.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include <optional>

namespace mlir::tfm {

/// Where and on behalf of which op a shape rule reports.
struct ShapeDiag {
  std::optional<Location> loc;
  StringRef opName; // e.g. "tfm.matmul"

  template <typename... Args>
  LogicalResult fail(Args &&...args) const {
    return emitOptionalError(loc, "'", opName, "' op ",
                             std::forward<Args>(args)...);
  }
};

/// Returns `v`'s type as a ranked, static tensor, or fails naming `what`.
FailureOr<RankedTensorType> staticTensor(const ShapeDiag &d, Type t,
                                         StringRef what);

/// Normalizes an axis in [-rank, rank) to [0, rank), or fails naming `what`.
FailureOr<int64_t> normalizeAxis(const ShapeDiag &d, int64_t axis,
                                 int64_t rank, StringRef what);

/// The numpy broadcast of two shapes, or failure naming both operands.
FailureOr<SmallVector<int64_t>> broadcastShapes(const ShapeDiag &d,
                                                ArrayRef<int64_t> a,
                                                StringRef aName,
                                                ArrayRef<int64_t> b,
                                                StringRef bName);

/// Whether `from` broadcasts to exactly `to` (numpy rules, one direction).
bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to);

FailureOr<Type> inferMatmulType(const ShapeDiag &d, Type lhs, Type rhs,
                                bool transposeLhs, bool transposeRhs);
/// tfm.gated_linear: tfm.linear's rule for the packed projection, whose
/// width must be even; the result is half as wide.
FailureOr<Type> inferGatedLinearType(const ShapeDiag &d, Type input,
                                     Type weight, Type bias);
FailureOr<Type> inferLinearType(const ShapeDiag &d, Type input, Type weight,
                                Type bias);
/// tfm.conv2d's result: [N, M, OH, OW] (see the op's shape rules).
FailureOr<Type> inferConv2DType(const ShapeDiag &d, Type input, Type weight,
                                Type bias, ArrayRef<int64_t> strides,
                                ArrayRef<int64_t> pads,
                                ArrayRef<int64_t> dilations, int64_t group);
FailureOr<Type> inferBroadcastType(const ShapeDiag &d, Type lhs, Type rhs,
                                   StringRef lhsName = "lhs",
                                   StringRef rhsName = "rhs");
FailureOr<Type> inferLayerNormType(const ShapeDiag &d, Type input, Type scale,
                                   Type bias, int64_t axis, double epsilon);
FailureOr<Type> inferEmbeddingType(const ShapeDiag &d, Type table,
                                   Type indices);
FailureOr<Type> inferTransposeType(const ShapeDiag &d, Type input,
                                   ArrayRef<int64_t> permutation);
FailureOr<Type> inferConcatType(const ShapeDiag &d, TypeRange inputs,
                                int64_t axis);
LogicalResult inferSplitTypes(const ShapeDiag &d, Type input, int64_t axis,
                              ArrayRef<int64_t> sizes,
                              SmallVectorImpl<Type> &results);
/// tfm.rotary: the input's type, of even width, which `cos` and `sin`
/// broadcast to.
FailureOr<Type> inferRotaryType(const ShapeDiag &d, Type input, Type cos,
                                Type sin);
FailureOr<Type> inferAttentionType(const ShapeDiag &d, Type query, Type key,
                                   Type value, Type mask,
                                   std::optional<double> scale);
/// How many query heads read each key and value head of an attention with
/// these operand shapes: 1, or G for grouped-query attention, whose key and
/// value have 1/G of the query's heads (the last batch dimension) and whose
/// query head h reads key head h / G.
int64_t attentionKVGroup(ArrayRef<int64_t> query, ArrayRef<int64_t> key);
/// `shape` [.., H, R, C] with its heads split as [.., H/G, G, R, C]: the
/// form in which a grouped-query attention's products broadcast each key
/// head over its group; `group` 1 gives the key heads their unit axis.
SmallVector<int64_t> splitHeadsShape(ArrayRef<int64_t> shape, int64_t group);
/// tfm.attention_grad: the attention's rule, `output` and `grad` of its
/// result type, and the query's, key's and value's types appended to `out`.
LogicalResult inferAttentionGradTypes(const ShapeDiag &d, Type query, Type key,
                                      Type value, Type output, Type grad,
                                      Type mask, std::optional<double> scale,
                                      SmallVectorImpl<Type> &out);
FailureOr<Type> inferCrossEntropyType(const ShapeDiag &d, Type logits,
                                      Type labels, double labelSmoothing);
LogicalResult inferQKVProjectionTypes(const ShapeDiag &d, Type input,
                                      Type weight, Type bias,
                                      ArrayRef<int64_t> sizes,
                                      SmallVectorImpl<Type> &results);
FailureOr<Type> inferMaskedSoftmaxType(const ShapeDiag &d, Type input,
                                       Type mask, bool causal);

FailureOr<Type> inferCompareType(const ShapeDiag &d, Type lhs, Type rhs);
FailureOr<Type> inferSelectType(const ShapeDiag &d, Type condition,
                                Type trueValue, Type falseValue);
FailureOr<Type> inferSliceType(const ShapeDiag &d, Type input,
                               ArrayRef<int64_t> starts,
                               ArrayRef<int64_t> sizes,
                               ArrayRef<int64_t> steps);
FailureOr<Type> inferGatherType(const ShapeDiag &d, Type input, Type indices,
                                int64_t axis);
FailureOr<Type> inferScatterNDType(const ShapeDiag &d, Type input,
                                   Type indices, Type updates);
LogicalResult inferTopKTypes(const ShapeDiag &d, Type input, int64_t k,
                            int64_t axis, SmallVectorImpl<Type> &out);
FailureOr<Type> inferReduceType(const ShapeDiag &d, Type input,
                                ArrayRef<int64_t> axes, bool keepdims,
                                bool isMean);

/// How a quantization's scale covers the tensor it quantizes (the ops of
/// TfmOps.td's "Quantization" section).
enum class QuantizationGranularity { PerTensor, PerAxis, Blocked };
/// The granularity of `scale` over a tensor of type `value` (named
/// `valueName`) with `axis` and `blockSize`; `zeroPoint`, when given, must
/// have the scale's shape and the element type `integerElement`. Fails
/// naming the operand that breaks the rule.
FailureOr<QuantizationGranularity>
checkQuantizationParameters(const ShapeDiag &d, Type value,
                            StringRef valueName, Type scale, Type zeroPoint,
                            Type integerElement, int64_t axis,
                            int64_t blockSize);
/// tfm.quantize: the parameters' rule for the input, an integer result of
/// the input's shape.
LogicalResult verifyQuantizeTypes(const ShapeDiag &d, Type input, Type scale,
                                  Type zeroPoint, Type result, int64_t axis,
                                  int64_t blockSize);
/// tfm.dequantize: the input's shape in the scale's element type.
FailureOr<Type> inferDequantizeType(const ShapeDiag &d, Type input, Type scale,
                                    Type zeroPoint, int64_t axis,
                                    int64_t blockSize);
/// tfm.dynamic_quantize: the ui8 result and its rank-0 scale and zero point.
LogicalResult inferDynamicQuantizeTypes(const ShapeDiag &d, Type input,
                                        SmallVectorImpl<Type> &out);
/// tfm.matmul_integer: tfm.matmul's shapes, the zero points' rule, i32.
FailureOr<Type> inferMatmulIntegerType(const ShapeDiag &d, Type lhs, Type rhs,
                                       Type lhsZeroPoint, Type rhsZeroPoint);
/// tfm.quantized_linear (see the op's shape rules). `inputQuantization` is
/// an InputQuantization: 0 none, 1 dynamic, 2 static, 3 blocked.
FailureOr<Type> inferQuantizedLinearType(const ShapeDiag &d, Type input,
                                         Type weight, Type weightScale,
                                         Type weightZeroPoint, Type bias,
                                         Type inputScale, Type inputZeroPoint,
                                         int inputQuantization,
                                         int64_t blockSize);

} // namespace mlir::tfm

#endif // TFM_IR_TYPEINFERENCE_H
