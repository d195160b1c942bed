//===- TfmOps.cpp - Operations of the tfm dialect -------------------------===//
//
// Type inference and verifiers. The rules themselves are in
// TypeInference.cpp; this file only adapts ops to them.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TfmOps.h"
#include "tfm/IR/TypeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

/// Appends a single inferred type, or propagates the failure.
static LogicalResult push(FailureOr<Type> t, SmallVectorImpl<Type> &out) {
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

//===----------------------------------------------------------------------===//
// Type inference
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  return push(inferMatmulType({loc, getOperationName()}, a.getLhs().getType(),
                              a.getRhs().getType(), a.getTransposeLhs(),
                              a.getTransposeRhs()),
              out);
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  Type bias = a.getBias() ? a.getBias().getType() : Type();
  return push(inferLinearType({loc, getOperationName()},
                              a.getInput().getType(), a.getWeight().getType(),
                              bias),
              out);
}

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  Type bias = a.getBias() ? a.getBias().getType() : Type();
  return push(inferConv2DType({loc, getOperationName()},
                              a.getInput().getType(), a.getWeight().getType(),
                              bias, a.getStrides(), a.getPads(),
                              a.getDilations(), a.getGroup()),
              out);
}

#define TFM_BINARY_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc, Adaptor a,   \
                                     SmallVectorImpl<Type> &out) {             \
    return push(inferBroadcastType({loc, getOperationName()},                  \
                                   a.getLhs().getType(),                       \
                                   a.getRhs().getType()),                      \
                out);                                                          \
  }
TFM_BINARY_INFER(AddOp)
TFM_BINARY_INFER(SubOp)
TFM_BINARY_INFER(MulOp)
TFM_BINARY_INFER(DivOp)
TFM_BINARY_INFER(PowOp)
TFM_BINARY_INFER(MaxOp)
TFM_BINARY_INFER(MinOp)
#undef TFM_BINARY_INFER

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  Type bias = a.getBias() ? a.getBias().getType() : Type();
  return push(inferLayerNormType({loc, getOperationName()},
                                 a.getInput().getType(),
                                 a.getScale().getType(), bias,
                                 static_cast<int64_t>(a.getAxis()),
                                 a.getEpsilon().convertToDouble()),
              out);
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  return push(inferEmbeddingType({loc, getOperationName()},
                                 a.getTable().getType(),
                                 a.getIndices().getType()),
              out);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  return push(inferTransposeType({loc, getOperationName()},
                                 a.getInput().getType(), a.getPermutation()),
              out);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  return push(inferConcatType({loc, getOperationName()},
                              a.getInputs().getTypes(),
                              static_cast<int64_t>(a.getAxis())),
              out);
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor a,
                                        SmallVectorImpl<Type> &out) {
  return inferSplitTypes({loc, getOperationName()}, a.getInput().getType(),
                         static_cast<int64_t>(a.getAxis()), a.getSizes(), out);
}

/// An attention's (or its gradient's) mask type, or none, and its scale.
template <typename Adaptor>
static std::pair<Type, std::optional<double>> maskAndScale(Adaptor a) {
  Type mask = a.getMask() ? a.getMask().getType() : Type();
  std::optional<double> scale;
  if (auto s = a.getScaleAttr())
    scale = s.getValueAsDouble();
  return {mask, scale};
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  auto [mask, scale] = maskAndScale(a);
  return push(inferAttentionType({loc, getOperationName()},
                                 a.getQuery().getType(), a.getKey().getType(),
                                 a.getValue().getType(), mask, scale),
              out);
}

int64_t AttentionOp::getKVGroup() {
  return attentionKVGroup(getQuery().getType().getShape(),
                          getKey().getType().getShape());
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor a,
                                                SmallVectorImpl<Type> &out) {
  auto [mask, scale] = maskAndScale(a);
  return inferAttentionGradTypes(
      {loc, getOperationName()}, a.getQuery().getType(), a.getKey().getType(),
      a.getValue().getType(), a.getOutput().getType(), a.getGrad().getType(),
      mask, scale, out);
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor a,
                                               SmallVectorImpl<Type> &out) {
  return push(inferCrossEntropyType({loc, getOperationName()},
                                    a.getLogits().getType(),
                                    a.getLabels().getType(),
                                    a.getLabelSmoothing().convertToDouble()),
              out);
}

LogicalResult RotaryOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc, Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  return push(inferRotaryType({loc, getOperationName()}, a.getInput().getType(),
                              a.getCos().getType(), a.getSin().getType()),
              out);
}

LogicalResult GatedLinearOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor a,
                                              SmallVectorImpl<Type> &out) {
  Type bias = a.getBias() ? a.getBias().getType() : Type();
  return push(inferGatedLinearType({loc, getOperationName()},
                                   a.getInput().getType(),
                                   a.getWeight().getType(), bias),
              out);
}

LogicalResult QKVProjectionOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor a,
                                                SmallVectorImpl<Type> &out) {
  Type bias = a.getBias() ? a.getBias().getType() : Type();
  return inferQKVProjectionTypes({loc, getOperationName()},
                                 a.getInput().getType(),
                                 a.getWeight().getType(), bias, a.getSizes(),
                                 out);
}

LogicalResult MaskedSoftmaxOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor a,
                                                SmallVectorImpl<Type> &out) {
  Type mask = a.getMask() ? a.getMask().getType() : Type();
  return push(inferMaskedSoftmaxType({loc, getOperationName()},
                                     a.getInput().getType(), mask,
                                     a.getCausal()),
              out);
}

LogicalResult CompareOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor a,
                                          SmallVectorImpl<Type> &out) {
  return push(inferCompareType({loc, getOperationName()},
                               a.getLhs().getType(), a.getRhs().getType()),
              out);
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  return push(inferSelectType({loc, getOperationName()},
                              a.getCondition().getType(),
                              a.getTrueValue().getType(),
                              a.getFalseValue().getType()),
              out);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor a,
                                        SmallVectorImpl<Type> &out) {
  return push(inferSliceType({loc, getOperationName()},
                             a.getInput().getType(), a.getStarts(),
                             a.getSizes(), a.getSteps()),
              out);
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  return push(inferGatherType({loc, getOperationName()},
                              a.getInput().getType(),
                              a.getIndices().getType(),
                              static_cast<int64_t>(a.getAxis())),
              out);
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  return push(inferScatterNDType({loc, getOperationName()},
                                 a.getInput().getType(),
                                 a.getIndices().getType(),
                                 a.getUpdates().getType()),
              out);
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc, Adaptor a,
                                       SmallVectorImpl<Type> &out) {
  return inferTopKTypes({loc, getOperationName()}, a.getInput().getType(),
                        static_cast<int64_t>(a.getK()),
                        static_cast<int64_t>(a.getAxis()), out);
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  return push(inferReduceType({loc, getOperationName()},
                              a.getInput().getType(), a.getAxes(),
                              a.getKeepdims(),
                              a.getKind() == ReduceKind::mean),
              out);
}

/// An optional operand's type, or null.
static Type typeOrNull(Value v) { return v ? v.getType() : Type(); }

LogicalResult DequantizeOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor a,
                                             SmallVectorImpl<Type> &out) {
  return push(inferDequantizeType({loc, getOperationName()},
                                  a.getInput().getType(), a.getScale().getType(),
                                  typeOrNull(a.getZeroPoint()), a.getAxis(),
                                  a.getBlockSize()),
              out);
}

LogicalResult DynamicQuantizeOp::inferReturnTypes(MLIRContext *,
                                                  std::optional<Location> loc,
                                                  Adaptor a,
                                                  SmallVectorImpl<Type> &out) {
  return inferDynamicQuantizeTypes({loc, getOperationName()},
                                   a.getInput().getType(), out);
}

LogicalResult MatmulIntegerOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor a,
                                                SmallVectorImpl<Type> &out) {
  return push(inferMatmulIntegerType({loc, getOperationName()},
                                     a.getLhs().getType(), a.getRhs().getType(),
                                     typeOrNull(a.getLhsZeroPoint()),
                                     typeOrNull(a.getRhsZeroPoint())),
              out);
}

LogicalResult QuantizedLinearOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor a,
    SmallVectorImpl<Type> &out) {
  return push(inferQuantizedLinearType(
                  {loc, getOperationName()}, a.getInput().getType(),
                  a.getWeight().getType(), a.getWeightScale().getType(),
                  typeOrNull(a.getWeightZeroPoint()), typeOrNull(a.getBias()),
                  typeOrNull(a.getInputScale()),
                  typeOrNull(a.getInputZeroPoint()),
                  static_cast<int>(a.getInputQuantization()), a.getBlockSize()),
              out);
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return normalizeAxis({getLoc(), getOperationName()},
                       static_cast<int64_t>(getAxis()),
                       getType().getRank(), "axis");
}

LogicalResult SoftmaxGradOp::verify() {
  return normalizeAxis({getLoc(), getOperationName()},
                       static_cast<int64_t>(getAxis()), getType().getRank(),
                       "axis");
}

OpFoldResult PositionalEncodingOp::fold(FoldAdaptor) {
  RankedTensorType t = getType();
  auto ft = dyn_cast<FloatType>(t.getElementType());
  if (!ft || t.getRank() != 2 || t.getDimSize(1) % 2 != 0)
    return {};
  int64_t len = t.getDimSize(0), dim = t.getDimSize(1);
  SmallVector<APFloat> values;
  values.reserve(len * dim);
  for (int64_t pos = 0; pos < len; ++pos)
    for (int64_t c = 0; c < dim; ++c) {
      // In double precision, rounded once, as the reference interpreter.
      double angle = static_cast<double>(pos) /
                     std::pow(10000.0, static_cast<double>(c - c % 2) / dim);
      APFloat v(c % 2 ? std::cos(angle) : std::sin(angle));
      bool lost = false;
      v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v);
    }
  return DenseElementsAttr::get(t, values);
}

LogicalResult PositionalEncodingOp::verify() {
  RankedTensorType t = getType();
  if (t.getRank() != 2)
    return emitOpError() << "result must be [S, D] (rank 2), got " << t;
  if (t.getDimSize(1) % 2 != 0)
    return emitOpError() << "model dimension D = " << t.getDimSize(1)
                         << " must be even (sin and cos alternate)";
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType()
                         << " differs from the input's "
                         << in.getElementType();
  if (in.hasStaticShape() && out.hasStaticShape() &&
      in.getNumElements() != out.getNumElements())
    return emitOpError() << "input " << in << " has " << in.getNumElements()
                         << " elements but result " << out << " has "
                         << out.getNumElements();
  return success();
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError() << "result " << getType()
                         << " must have the shape of the input "
                         << getInput().getType();
  return success();
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType()
                         << " differs from the input's "
                         << in.getElementType();
  if (!broadcastsTo(in.getShape(), out.getShape()))
    return emitOpError() << "input " << in << " does not broadcast to "
                         << out;
  return success();
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0 && rate < 1))
    return emitOpError() << "'rate' must be in [0, 1), got " << rate;
  return success();
}

LogicalResult MaskedSoftmaxOp::verify() {
  MaskKind kind = getMaskKind();
  Value mask = getMask();
  if (!mask && kind != MaskKind::none)
    return emitOpError() << "mask_kind is '" << stringifyMaskKind(kind)
                         << "' but there is no 'mask' operand";
  if (mask) {
    bool isBool = getElementTypeOrSelf(mask.getType()).isInteger(1);
    MaskKind implied = isBool ? MaskKind::boolean : MaskKind::additive;
    if (kind != implied)
      return emitOpError() << "mask_kind is '" << stringifyMaskKind(kind)
                           << "' but the 'mask' of type " << mask.getType()
                           << " is " << stringifyMaskKind(implied);
  }
  return success();
}

LogicalResult QuantizeOp::verify() {
  return verifyQuantizeTypes({getLoc(), getOperationName()},
                             getInput().getType(), getScale().getType(),
                             typeOrNull(getZeroPoint()), getType(), getAxis(),
                             getBlockSize());
}

LogicalResult AddLayerNormOp::verify() {
  ShapeDiag d{getLoc(), getOperationName()};
  auto sum = inferBroadcastType(d, getInput().getType(),
                                getResidual().getType(), "input", "residual");
  if (failed(sum))
    return failure();
  Type bias = getBias() ? getBias().getType() : Type();
  auto norm = inferLayerNormType(d, *sum, getScale().getType(), bias,
                                 static_cast<int64_t>(getAxis()),
                                 getEpsilon().convertToDouble());
  if (failed(norm))
    return failure();
  SmallVector<Type> expected{*norm};
  if (getSum())
    expected.push_back(*sum);
  return OpTrait::verifyResultTypes(*this, expected);
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

LogicalResult ParameterOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty 'name'";
  if (getInitialValue().getType() != getType())
    return emitOpError() << "'initial_value' has type "
                         << getInitialValue().getType()
                         << " but the parameter is " << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Generation
//===----------------------------------------------------------------------===//

LogicalResult CacheUpdateOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty 'name'";
  RankedTensorType value = getValue().getType(), cache = getType();
  if (value.getRank() != cache.getRank() ||
      value.getElementType() != cache.getElementType())
    return emitOpError() << "'value' " << value << " and the cache " << cache
                         << " must have the same rank and element type";
  int64_t axis = getAxis();
  if (axis < 0 || axis >= cache.getRank())
    return emitOpError() << "'axis' " << axis << " is not an axis of "
                         << cache;
  for (int64_t i = 0; i < cache.getRank(); ++i) {
    int64_t v = value.getDimSize(i), c = cache.getDimSize(i);
    if (i == axis ? v > c : v != c)
      return emitOpError() << "'value' " << value << " does not fit the cache "
                           << cache << " at dimension " << i;
  }
  return success();
}

LogicalResult CacheReadOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty 'name'";
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  ShapeDiag d{getLoc(), getOperationName()};
  if (failed(inferCrossEntropyType(d, getLogits().getType(),
                                   getLabels().getType(),
                                   getLabelSmoothing().convertToDouble())))
    return failure();
  if (getGrad().getType().getElementType() !=
      getLogits().getType().getElementType())
    return emitOpError() << "'grad' " << getGrad().getType()
                         << " must have the logits' element type "
                         << getLogits().getType().getElementType();
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  RankedTensorType x = getInput().getType(), scale = getScale().getType();
  int64_t rank = x.getRank(), axis = getAxis();
  if (axis < -rank || axis >= rank)
    return emitOpError() << "axis " << axis << " is out of range for rank "
                         << rank;
  if (axis < 0)
    axis += rank;
  if (getGrad().getType() != x)
    return emitOpError() << "'grad' " << getGrad().getType()
                         << " must have the input's type " << x;
  if (scale.getShape() != x.getShape().drop_front(axis) ||
      scale.getElementType() != x.getElementType())
    return emitOpError() << "'scale' " << scale
                         << " must have the normalized shape of " << x;
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError() << "'epsilon' must be > 0";
  if (getInputGrad().getType() != x || getScaleGrad().getType() != scale ||
      getBiasGrad().getType() != scale)
    return emitOpError() << "results must be " << x << ", " << scale << ", "
                         << scale;
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType grad = getGrad().getType(), out = getType();
  ArrayRef<int64_t> idx = getIndices().getType().getShape();
  if (out.getRank() != 2)
    return emitOpError() << "result must be a [V, D] table, got " << out;
  if (grad.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType()
                         << " differs from the gradient's "
                         << grad.getElementType();
  SmallVector<int64_t> expected(idx);
  expected.push_back(out.getDimSize(1));
  if (grad.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "'grad' " << grad << " must be [indices..., D] = "
                         << RankedTensorType::get(expected,
                                                  grad.getElementType());
  return success();
}

/// The checks every optimizer update shares.
template <typename Op>
static LogicalResult verifyOptimizer(Op op) {
  if (op.getParameter().empty())
    return op.emitOpError() << "needs a non-empty 'parameter' name";
  double lr = op.getLr().convertToDouble();
  if (!(lr >= 0) || !std::isfinite(lr))
    return op.emitOpError() << "'lr' must be finite and >= 0, got " << lr;
  if (!(op.getWeightDecay().convertToDouble() >= 0))
    return op.emitOpError() << "'weight_decay' must be >= 0";
  if (op.getSchedule() == LRSchedule::noam &&
      (static_cast<int64_t>(op.getDModel()) <= 0 ||
       static_cast<int64_t>(op.getWarmup()) <= 0))
    return op.emitOpError()
           << "the noam schedule needs d_model > 0 and warmup > 0";
  return success();
}

LogicalResult SGDUpdateOp::verify() { return verifyOptimizer(*this); }

LogicalResult AdamUpdateOp::verify() {
  if (failed(verifyOptimizer(*this)))
    return failure();
  for (auto [name, beta] : {std::pair{"beta1", getBeta1()},
                            std::pair{"beta2", getBeta2()}}) {
    double v = beta.convertToDouble();
    if (!(v >= 0 && v < 1))
      return emitOpError() << "'" << name << "' must be in [0, 1), got " << v;
  }
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "'eps' must be > 0";
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  if (!getInput().getType().getElementType().isF32())
    return emitOpError() << "averages f32 tensors only, got "
                         << getInput().getType();
  auto w = getWeight().getType();
  if (w.getRank() != 0 || !w.getElementType().isF32())
    return emitOpError() << "'weight' must be a tensor<f32>, got " << w;
  if (getBucket() < 0)
    return emitOpError() << "'bucket' must be >= 0";
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  auto start = getPending().getDefiningOp<AllReduceStartOp>();
  if (!start)
    return emitOpError() << "waits on a value no tfm.all_reduce_start "
                            "defines";
  if (start.getBucket() != getBucket())
    return emitOpError() << "waits in bucket " << getBucket()
                         << " on a start in bucket " << start.getBucket();
  return success();
}

double mlir::tfm::learningRateAt(LRSchedule schedule, double lr,
                                 int64_t dModel, int64_t warmup,
                                 int64_t step) {
  if (schedule == LRSchedule::constant)
    return lr;
  double t = static_cast<double>(std::max<int64_t>(step, 1));
  return lr / std::sqrt(static_cast<double>(dModel)) *
         std::min(1.0 / std::sqrt(t),
                  t / std::pow(static_cast<double>(warmup), 1.5));
}

#define GET_OP_CLASSES
#include "tfm/IR/TfmOps.cpp.inc"
