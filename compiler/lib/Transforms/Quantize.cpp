//===- Quantize.cpp - A float model's linear layers quantized -------------===//
//
// `tfmc compile --quantize`: every product of an activation by a constant
// 2-D float weight (a tfm.matmul or tfm.linear) becomes the
// `tfm.quantized_linear` that a quantized export of the same model fuses
// to, so that the float model gets the quantized kernels without a
// quantizer of another tool:
//
// * int8: the weight symmetric in [-127, 127] with one scale per output
//   feature (max |w| / 127), the input quantized to uint8 at every run by
//   its range, as quantize_dynamic with per_channel does. 127 rather than
//   128 keeps the weight's range symmetric, so no zero point is needed.
//   With `seven-bit`, 64 instead (quantize_dynamic's reduce_range): a CPU
//   without VNNI sums pairs of u8 · s8 products in 16 bits, exact only
//   while 2 · 255 · |w| fits.
// * int4: weight-only, unsigned 4-bit with a scale and a zero point per
//   block of `block-size` along K, as MatMulNBits' asymmetric quantizer
//   writes them: the block's range widened to hold 0, s = (max - min) / 15,
//   z = round(-min / s), q = clamp(round(w / s) + z, 0, 15).
//
// It runs before the fusions, which then fold biases and activations into
// the quantized linears as into float ones (tfm-fuse-bias-activation);
// the QKV and gated-MLP fusions, which pack float weights, leave them
// alone. A layer it cannot quantize stays float, and its remark says why.
// Rounding is to nearest, ties to even, as the ONNX quantizers round.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/IR/TypeInference.h"
#include "tfm/Transforms/Passes.h"

#include <cmath>

namespace mlir::tfm {
#define GEN_PASS_DEF_QUANTIZEPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-quantize";

/// A product by a constant weight: what the quantized linear replaces.
struct Layer {
  Operation *op;
  Value input, bias;
  DenseElementsAttr weight;
  bool isNK; // the weight is [N, K] (else [K, N])
  Activation activation = Activation::none;
};

/// The layer `op` is, if it multiplies by a constant: std::nullopt for a
/// product of two computed values (attention's), which is no layer.
/// `why` is set when it is a layer that stays float.
std::optional<Layer> layerOf(Operation *op, std::string &why) {
  Layer layer{op, {}, {}, {}, true};
  Value weight;
  if (auto m = dyn_cast<MatmulOp>(op)) {
    layer.input = m.getLhs();
    weight = m.getRhs();
    layer.isNK = m.getTransposeRhs();
    if (m.getTransposeLhs())
      why = "the input is transposed";
  } else if (auto l = dyn_cast<LinearOp>(op)) {
    layer.input = l.getInput();
    weight = l.getWeight();
    layer.bias = l.getBias();
    layer.activation = l.getActivation();
  } else {
    return std::nullopt;
  }
  layer.weight = constantOf(weight);
  if (!layer.weight)
    return std::nullopt;
  auto type = cast<RankedTensorType>(weight.getType());
  if (why.empty() && type.getRank() != 2)
    why = "the weight is " + std::to_string(type.getRank()) +
          "-D: a batched product by a constant, not a linear layer";
  return layer;
}

float toFloat(APFloat v) {
  bool lost;
  v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
  return v.convertToFloat();
}

/// The weight as f32, [N, K] row-major.
std::vector<float> weightRows(const Layer &layer, int64_t n, int64_t k) {
  if (layer.weight.isSplat())
    return std::vector<float>(n * k,
                              toFloat(layer.weight.getSplatValue<APFloat>()));
  std::vector<float> stored;
  stored.reserve(n * k);
  if (layer.weight.getElementType().isF32())
    stored.assign(layer.weight.getValues<float>().begin(),
                  layer.weight.getValues<float>().end());
  else
    for (const APFloat &v : layer.weight.getValues<APFloat>())
      stored.push_back(toFloat(v));
  if (layer.isNK)
    return stored;
  std::vector<float> rows(n * k);
  for (int64_t c = 0; c < k; ++c)
    for (int64_t r = 0; r < n; ++r)
      rows[r * k + c] = stored[c * n + r];
  return rows;
}

/// A float constant of `shape` and element type `element`.
DenseElementsAttr floatConstant(ArrayRef<int64_t> shape, Type element,
                                ArrayRef<float> values) {
  auto type = RankedTensorType::get(shape, element);
  if (element.isF32())
    return DenseElementsAttr::get(type, values);
  auto &semantics = cast<FloatType>(element).getFloatSemantics();
  SmallVector<APFloat> converted;
  converted.reserve(values.size());
  for (float v : values) {
    APFloat f(v);
    bool lost;
    f.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
    converted.push_back(f);
  }
  return DenseElementsAttr::get(type, converted);
}

/// An integer constant of `shape` from one byte per element: MLIR stores
/// 4- and 8-bit elements a byte each.
DenseElementsAttr integerConstant(MLIRContext *ctx, ArrayRef<int64_t> shape,
                                  unsigned bits, bool isUnsigned,
                                  ArrayRef<int8_t> bytes) {
  auto type = RankedTensorType::get(
      shape, IntegerType::get(ctx, bits,
                              isUnsigned ? IntegerType::Unsigned
                                         : IntegerType::Signless));
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(reinterpret_cast<const char *>(bytes.data()),
                           bytes.size()));
}

/// The quantized weight's parts, as the op takes them.
struct Quantized {
  DenseElementsAttr weight, scale, zeroPoint;
  int64_t blockSize = 0;
};

/// int8, symmetric in [-top, top], per output feature.
Quantized quantizeInt8(MLIRContext *ctx, ArrayRef<float> w, int64_t n,
                       int64_t k, float top, Type element) {
  std::vector<int8_t> q(n * k);
  std::vector<float> scales(n);
  for (int64_t r = 0; r < n; ++r) {
    float most = 0;
    for (int64_t c = 0; c < k; ++c)
      most = std::max(most, std::fabs(w[r * k + c]));
    // An all-zero row quantizes to zeros by any scale; 1 is a valid one.
    float s = most > 0 ? most / top : 1.0f;
    scales[r] = s;
    for (int64_t c = 0; c < k; ++c)
      q[r * k + c] = static_cast<int8_t>(
          std::clamp(std::nearbyint(w[r * k + c] / s), -top, top));
  }
  return {integerConstant(ctx, {n, k}, 8, false, q),
          floatConstant({n}, element, scales), {}, 0};
}

/// uint4 with a zero point, per block of `block` along K.
Quantized quantizeInt4(MLIRContext *ctx, ArrayRef<float> w, int64_t n,
                       int64_t k, int64_t block, Type element) {
  int64_t blocks = (k + block - 1) / block;
  std::vector<int8_t> q(n * k), zeros(n * blocks);
  std::vector<float> scales(n * blocks);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t begin = b * block, end = std::min(k, begin + block);
      float lo = 0, hi = 0; // the range holds 0, so 0 is exact
      for (int64_t c = begin; c < end; ++c) {
        lo = std::min(lo, w[r * k + c]);
        hi = std::max(hi, w[r * k + c]);
      }
      float s = hi > lo ? (hi - lo) / 15.0f : 1.0f;
      float z = std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
      scales[r * blocks + b] = s;
      zeros[r * blocks + b] = static_cast<int8_t>(z);
      for (int64_t c = begin; c < end; ++c)
        q[r * k + c] = static_cast<int8_t>(
            std::clamp(std::nearbyint(w[r * k + c] / s) + z, 0.0f, 15.0f));
    }
  return {integerConstant(ctx, {n, k}, 4, true, q),
          floatConstant({n, blocks}, element, scales),
          integerConstant(ctx, {n, blocks}, 4, true, zeros), block};
}

struct QuantizePass
    : public mlir::tfm::impl::QuantizePassBase<QuantizePass> {
  using QuantizePassBase::QuantizePassBase;

  void runOnOperation() override {
    if (mode == QuantizeMode::None)
      return;
    if (mode == QuantizeMode::Int4 && (blockSize < 16 || blockSize % 16)) {
      getOperation().emitError()
          << kFlag << ": block-size " << static_cast<int64_t>(blockSize)
          << " is not a multiple of 16 (the 4-bit kernel's blocks are; "
             "32 and 128 are usual)";
      return signalPassFailure();
    }
    SmallVector<Layer> layers;
    SmallVector<std::pair<Location, std::string>> missed;
    getOperation().walk([&](Operation *op) {
      std::string why;
      if (isa<Conv2DOp>(op) && constantOf(op->getOperand(1))) {
        missed.emplace_back(op->getLoc(),
                            "a convolution; --quantize takes linear layers");
        return;
      }
      std::optional<Layer> layer = layerOf(op, why);
      if (!layer)
        return;
      if (why.empty())
        why = refusal(*layer);
      if (why.empty())
        layers.push_back(*layer);
      else
        missed.emplace_back(op->getLoc(), why);
    });
    FusionLog log;
    for (const Layer &layer : layers) {
      std::string why;
      if (succeeded(quantize(layer, why)))
        log.fused.push_back(layer.op->getLoc());
      else
        missed.emplace_back(layer.op->getLoc(), why);
    }
    if (remarks)
      reportSites(kFlag, log, missed);
  }

  /// Why `layer` stays float, or "".
  std::string refusal(const Layer &layer) const {
    Type element = getElementTypeOrSelf(layer.input.getType());
    if (mode == QuantizeMode::Int8 && !element.isF32())
      return "its input is " + typeName(element) +
             "; int8 quantizes f32 inputs at run time";
    return "";
  }

  static std::string typeName(Type t) {
    std::string s;
    llvm::raw_string_ostream os(s);
    t.print(os);
    return s;
  }

  LogicalResult quantize(const Layer &layer, std::string &why) {
    auto type = cast<RankedTensorType>(layer.weight.getType());
    int64_t n = type.getDimSize(layer.isNK ? 0 : 1),
            k = type.getDimSize(layer.isNK ? 1 : 0);
    Type element = getElementTypeOrSelf(layer.input.getType());
    std::vector<float> w = weightRows(layer, n, k);
    if (!llvm::all_of(w, [](float v) { return std::isfinite(v); })) {
      why = "the weight holds NaN or infinity";
      return failure();
    }
    MLIRContext *ctx = &getContext();
    Quantized q = mode == QuantizeMode::Int8
                      ? quantizeInt8(ctx, w, n, k, sevenBit ? 64.f : 127.f,
                                     element)
                      : quantizeInt4(ctx, w, n, k, blockSize, element);
    InputQuantization input = mode == QuantizeMode::Int8
                                  ? InputQuantization::dynamic
                                  : InputQuantization::none;
    Type result = layer.op->getResult(0).getType();
    // Checked quietly: a refusal keeps the layer float, with the reason.
    auto diag = ShapeDiag{layer.op->getLoc(),
                          QuantizedLinearOp::getOperationName()};
    {
      ScopedDiagnosticHandler quiet(ctx, [&](Diagnostic &d) {
        why = "the shape rule refuses it: " + d.str();
        return success();
      });
      auto inferred = inferQuantizedLinearType(
          diag, layer.input.getType(), q.weight.getType(),
          q.scale.getType(), q.zeroPoint ? q.zeroPoint.getType() : Type(),
          layer.bias ? layer.bias.getType() : Type(), Type(), Type(),
          static_cast<int>(input), q.blockSize);
      if (failed(inferred))
        return failure();
      if (*inferred != result) {
        why = "the quantized linear's type differs from the product's";
        return failure();
      }
    }
    OpBuilder b(layer.op);
    Location loc = layer.op->getLoc();
    auto constant = [&](DenseElementsAttr a) -> Value {
      return a ? b.create<arith::ConstantOp>(loc, a).getResult() : Value();
    };
    Value fused = b.create<QuantizedLinearOp>(
        loc, result, layer.input, constant(q.weight), constant(q.scale),
        constant(q.zeroPoint), layer.bias, Value(), Value(), input,
        layer.activation, q.blockSize);
    layer.op->getResult(0).replaceAllUsesWith(fused);
    layer.op->erase();
    return success();
  }
};

} // namespace
