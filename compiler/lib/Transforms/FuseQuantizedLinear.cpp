//===- FuseQuantizedLinear.cpp - Quantized weights into one linear --------===//
//
// Every quantized export multiplies by a weight that it dequantizes first;
// these patterns make each such product one `tfm.quantized_linear`, whose
// kernel reads the integers and applies the scales in its epilogue:
//
// * a linear or matmul of `dequantize(W)`, W a constant ([N, K] as
//   MatMulNBits imports it, or [K, N] as QDQ writes it, transposed here at
//   compile time), per tensor, per output feature or in blocks along K;
//   its input, when it is `dequantize(quantize(x))` by one scale and zero
//   point (QDQ's activations), quantized statically;
// * `cast(matmul_integer(dynamic_quantize(x), W)) · (x_scale · w_scale)`,
//   the QOperator form of quantize_dynamic (and DynamicQuantizeMatMul),
//   with the input quantized dynamically.
//
// A MatMulNBits at accuracy_level 4 arrives fused, its input `blocked` (the
// importer builds it); it is reported with the sites fused here.
//
// Biases and activations fold in afterwards, in tfm-fuse-bias-activation,
// as they do into a float linear. What stays unfused is reported with its
// reason: a dequantized weight that a product reads, and an integer matmul.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"
#include "tfm/IR/TypeInference.h"
#include "tfm/Transforms/Passes.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEQUANTIZEDLINEARPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kFlag = "tfm-fuse-quantized-linear";

/// A quantized linear's weight as the op reads it: [N, K] integers, their
/// scale (and zero point) per tensor, per row, or in blocks along K.
struct QuantizedWeight {
  Value weight, scale, zeroPoint;
  int64_t blockSize = 0;
};

bool isWeightInteger(Type t) {
  auto i = dyn_cast<IntegerType>(t);
  return i && (i.getWidth() == 4 || i.getWidth() == 8);
}

/// The weight of `dq` (a dequantized 2-D constant) as [N, K]: as it is
/// when `isNK`, else transposed (with its scale and zero point) at compile
/// time. Fails with the reason.
FailureOr<QuantizedWeight> quantizedWeight(DequantizeOp dq, bool isNK,
                                           PatternRewriter &rewriter,
                                           std::string &why) {
  auto type = dq.getInput().getType();
  if (type.getRank() != 2) {
    why = "the dequantized weight is not 2-D";
    return failure();
  }
  if (!isWeightInteger(type.getElementType())) {
    why = "the weight is " + std::to_string(type.getElementTypeBitWidth()) +
          "-bit; quantized linears take 4- and 8-bit weights";
    return failure();
  }
  DenseElementsAttr q = constantOf(dq.getInput());
  if (!q) {
    why = "the quantized weight is not a constant";
    return failure();
  }
  int64_t rank = dq.getScale().getType().getRank();
  int64_t axis = dq.getAxis() < 0 ? dq.getAxis() + 2 : dq.getAxis();
  int64_t block = dq.getBlockSize();
  // Output features run along axis 0 of [N, K], 1 of [K, N].
  int64_t featureAxis = isNK ? 0 : 1, kAxis = 1 - featureAxis;
  if (rank == 1 && axis != featureAxis) {
    why = "the weight's scale is per input feature (along K), which a "
          "linear's epilogue cannot apply";
    return failure();
  }
  if (rank == 2 && axis != kAxis) {
    why = "the weight's blocks run along the output features, not along K";
    return failure();
  }
  Location loc = dq.getLoc();
  QuantizedWeight w{dq.getInput(), dq.getScale(), dq.getZeroPoint(), block};
  if (isNK)
    return w;
  // [K, N] to [N, K]: the integers, and a blocked scale [K / B, N].
  w.weight = rewriter.create<arith::ConstantOp>(loc, transpose2D(q));
  auto transposeParameter = [&](Value v) -> FailureOr<Value> {
    if (!v || rank != 2)
      return v;
    DenseElementsAttr c = constantOf(v);
    if (!c) {
      why = "a blocked weight's scale or zero point is not a constant";
      return failure();
    }
    return Value(rewriter.create<arith::ConstantOp>(loc, transpose2D(c)));
  };
  auto scale = transposeParameter(w.scale);
  auto zp = transposeParameter(w.zeroPoint);
  if (failed(scale) || failed(zp))
    return failure();
  w.scale = *scale;
  w.zeroPoint = *zp;
  return w;
}

/// The value a QDQ pair reads, `x` in `dequantize(quantize(x, s, z), s,
/// z)` with one scale and zero point for the tensor, and those parameters.
struct StaticInput {
  Value x, scale, zeroPoint;
};
std::optional<StaticInput> staticInput(Value v) {
  auto dq = v.getDefiningOp<DequantizeOp>();
  auto q = dq ? dq.getInput().getDefiningOp<QuantizeOp>() : QuantizeOp();
  if (!q || dq.getScale().getType().getRank() != 0 ||
      q.getScale().getType().getRank() != 0 ||
      !q.getType().getElementType().isInteger(8) ||
      q.getInput().getType().getElementType() != dq.getType().getElementType())
    return std::nullopt;
  auto same = [](Value a, Value b) {
    if (a == b)
      return true;
    DenseElementsAttr ca = constantOf(a), cb = constantOf(b);
    return ca && cb && ca == cb;
  };
  if (!same(q.getScale(), dq.getScale()) ||
      !(q.getZeroPoint() && dq.getZeroPoint()
            ? same(q.getZeroPoint(), dq.getZeroPoint())
            : !q.getZeroPoint() && !dq.getZeroPoint()))
    return std::nullopt;
  return StaticInput{q.getInput(), q.getScale(), q.getZeroPoint()};
}

/// The quantized linear of `x` by `w`, with `bias` and `act`, the input
/// quantized as `mode` (`input` the static one's parameters); null, with
/// the reason, when the shape rule refuses it.
Value buildQuantizedLinear(PatternRewriter &rewriter, Location loc, Type type,
                           Value x, const QuantizedWeight &w, Value bias,
                           Activation act, InputQuantization mode,
                           const StaticInput *input, std::string &why) {
  Value inputScale, inputZp;
  if (input) {
    inputScale = input->scale;
    inputZp = input->zeroPoint;
    if (!inputZp) {
      // A QuantizeLinear without a zero point writes uint8 around 0.
      auto zt = RankedTensorType::get(
          {}, IntegerType::get(rewriter.getContext(), 8,
                               IntegerType::Unsigned));
      inputZp = rewriter.create<arith::ConstantOp>(
          loc, DenseElementsAttr::get(zt, APInt(8, 0)));
    }
  }
  auto diag = ShapeDiag{loc, QuantizedLinearOp::getOperationName()};
  // Checked quietly: a refusal is a miss, not an error.
  ScopedDiagnosticHandler quiet(rewriter.getContext(), [&](Diagnostic &d) {
    why = "the shape rule refuses it: " + d.str();
    return success();
  });
  auto inferred = inferQuantizedLinearType(
      diag, x.getType(), w.weight.getType(), w.scale.getType(),
      w.zeroPoint ? w.zeroPoint.getType() : Type(),
      bias ? bias.getType() : Type(), inputScale ? inputScale.getType() : Type(),
      inputZp ? inputZp.getType() : Type(), static_cast<int>(mode),
      w.blockSize);
  if (failed(inferred) || *inferred != type) {
    if (succeeded(inferred))
      why = "the quantized linear's type differs from the product's";
    return {};
  }
  return rewriter.create<QuantizedLinearOp>(
      loc, type, x, w.weight, w.scale, w.zeroPoint, bias, inputScale, inputZp,
      mode, act, w.blockSize);
}

/// linear(x, dequantize(W)) and matmul(x, dequantize(W)).
template <typename OpTy>
struct DequantizedWeightProduct : OpRewritePattern<OpTy> {
  DequantizedWeightProduct(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern<OpTy>(ctx), log(log) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Value x, wv, bias;
    Activation act = Activation::none;
    bool isNK = true;
    if constexpr (std::is_same_v<OpTy, LinearOp>) {
      x = op.getInput();
      wv = op.getWeight();
      bias = op.getBias();
      act = op.getActivation();
    } else {
      if (op.getTransposeLhs())
        return rewriter.notifyMatchFailure(op, "the input is transposed");
      x = op.getLhs();
      wv = op.getRhs();
      isNK = op.getTransposeRhs();
    }
    auto dq = wv.template getDefiningOp<DequantizeOp>();
    if (!dq)
      return rewriter.notifyMatchFailure(op, "the weight is not dequantized");
    std::string why;
    auto w = quantizedWeight(dq, isNK, rewriter, why);
    if (failed(w))
      return rewriter.notifyMatchFailure(op, why);
    std::optional<StaticInput> input = staticInput(x);
    Value fused = buildQuantizedLinear(
        rewriter, op.getLoc(), op.getType(), input ? input->x : x, *w, bias,
        act, input ? InputQuantization::static_ : InputQuantization::none,
        input ? &*input : nullptr, why);
    if (!fused)
      return rewriter.notifyMatchFailure(op, why);
    if (log)
      log->fused.push_back(op.getLoc());
    rewriter.replaceOp(op, fused);
    return success();
  }
  FusionLog *log;
};

/// The factors of `mul` when one of them is the product of the two others'
/// kind: `mul(f, mul(a, b))` in any order. Sets `f` to the operand that is
/// not a Mul, and `a`, `b` to the inner product's operands.
bool splitProduct(MulOp mul, Value f, Value &a, Value &b) {
  Value other = mul.getLhs() == f ? mul.getRhs() : mul.getLhs();
  auto inner = other.getDefiningOp<MulOp>();
  if (!inner || (mul.getLhs() != f && mul.getRhs() != f))
    return false;
  a = inner.getLhs();
  b = inner.getRhs();
  return true;
}

/// float(matmul_integer(q, W, z, wz)) · (s · ws) with (q, s, z) =
/// dynamic_quantize(x): the linear of x by W, x quantized dynamically.
struct DynamicIntegerProduct : OpRewritePattern<MatmulIntegerOp> {
  DynamicIntegerProduct(MLIRContext *ctx, FusionLog *log)
      : OpRewritePattern<MatmulIntegerOp>(ctx), log(log) {}

  LogicalResult matchAndRewrite(MatmulIntegerOp op,
                                PatternRewriter &rewriter) const override {
    auto dq = op.getLhs().getDefiningOp<DynamicQuantizeOp>();
    if (!dq || op.getLhsZeroPoint() != dq.getZeroPoint())
      return rewriter.notifyMatchFailure(
          op, "the input is not dynamically quantized (a static uint8 "
              "input multiplies as integers)");
    DenseElementsAttr wq = constantOf(op.getRhs());
    if (!wq || op.getRhs().getType().getRank() != 2)
      return rewriter.notifyMatchFailure(op,
                                         "the weight is not a 2-D constant");
    if (!op->hasOneUse())
      return rewriter.notifyMatchFailure(
          op, "the integer product has other users than its conversion");
    auto toFloat = dyn_cast<CastOp>(*op->getUsers().begin());
    if (!toFloat || !toFloat.getType().getElementType().isF32() ||
        !toFloat->hasOneUse())
      return rewriter.notifyMatchFailure(
          op, "the integer product is not converted to f32 for one product");
    auto mul = dyn_cast<MulOp>(*toFloat->getUsers().begin());
    Value a, b;
    if (!mul || !splitProduct(mul, toFloat.getResult(), a, b))
      return rewriter.notifyMatchFailure(
          op, "the converted product is not scaled by x_scale · w_scale");
    Value ws = a == dq.getScale() ? b : b == dq.getScale() ? a : Value();
    int64_t n = op.getRhs().getType().getDimSize(1);
    auto wsType = ws ? cast<RankedTensorType>(ws.getType()) : RankedTensorType();
    if (!ws || !constantOf(ws) ||
        !(wsType.getRank() == 0 ||
          (wsType.getRank() == 1 && wsType.getDimSize(0) == n)))
      return rewriter.notifyMatchFailure(
          op, "the scale is not x_scale times a constant weight scale per "
              "tensor or per output feature");
    // The weight's zero point: none when it is all 0; else it has the
    // scale's shape (a per-tensor scale spread over the columns when the
    // zero point is per column).
    Location loc = op.getLoc();
    Value wz = op.getRhsZeroPoint(), scale = ws;
    if (wz) {
      DenseElementsAttr z = constantOf(wz);
      auto zt = cast<RankedTensorType>(wz.getType());
      if (!z || zt.getNumElements() != (zt.getRank() ? n : 1) ||
          (zt.getRank() > 1))
        return rewriter.notifyMatchFailure(
            op, "the weight's zero point is not a constant per tensor or per "
                "output feature");
      if (z.isSplat() && z.getSplatValue<APInt>().isZero()) {
        wz = Value();
      } else if (zt.getRank() == 1 && wsType.getRank() == 0) {
        DenseElementsAttr s = constantOf(ws);
        scale = rewriter.create<arith::ConstantOp>(
            loc, DenseElementsAttr::get(
                     RankedTensorType::get({n}, wsType.getElementType()),
                     s.getSplatValue<APFloat>()));
      } else if (zt.getRank() == 0 && wsType.getRank() == 1) {
        wz = rewriter.create<arith::ConstantOp>(
            loc, DenseElementsAttr::get(
                     RankedTensorType::get({n}, zt.getElementType()),
                     z.getSplatValue<APInt>()));
      }
    }
    QuantizedWeight w{rewriter.create<arith::ConstantOp>(loc, transpose2D(wq)),
                      scale, wz, 0};
    std::string why;
    Value fused = buildQuantizedLinear(
        rewriter, loc, mul.getType(), dq.getInput(), w, Value(),
        Activation::none, InputQuantization::dynamic, nullptr, why);
    if (!fused)
      return rewriter.notifyMatchFailure(op, why);
    if (log)
      log->fused.push_back(loc);
    rewriter.replaceOp(mul, fused);
    rewriter.eraseOp(toFloat);
    rewriter.eraseOp(op);
    return success();
  }
  FusionLog *log;
};

void populate(RewritePatternSet &patterns, FusionLog *log) {
  patterns.add<DequantizedWeightProduct<LinearOp>,
               DequantizedWeightProduct<MatmulOp>, DynamicIntegerProduct>(
      patterns.getContext(), log);
}

struct FuseQuantizedLinearPass
    : public mlir::tfm::impl::FuseQuantizedLinearPassBase<
          FuseQuantizedLinearPass> {
  using FuseQuantizedLinearPassBase::FuseQuantizedLinearPassBase;
  void runOnOperation() override {
    FusionLog log;
    // The importer's own sites: MatMulNBits at accuracy_level 4, whose
    // blocked input no pattern here could recover.
    getOperation().walk([&](QuantizedLinearOp q) {
      if (q.getInputQuantization() == InputQuantization::blocked)
        log.fused.push_back(q.getLoc());
    });
    RewritePatternSet patterns(&getContext());
    populate(patterns, &log);
    FailureRecorder recorder;
    if (failed(applyRecording(getOperation(), std::move(patterns), recorder)))
      return signalPassFailure();
    if (!remarks)
      return;
    // The misses: products that still read a dequantized weight, and
    // integer products.
    SmallVector<std::pair<Location, std::string>> missed;
    getOperation().walk([&](Operation *op) {
      Value weight;
      if (auto m = dyn_cast<MatmulOp>(op))
        weight = m.getRhs();
      else if (auto l = dyn_cast<LinearOp>(op))
        weight = l.getWeight();
      if ((weight && weight.getDefiningOp<DequantizeOp>()) ||
          isa<MatmulIntegerOp>(op))
        missed.emplace_back(op->getLoc(),
                            recorder.reasonAt(op->getLoc(),
                                              "no pattern applies"));
    });
    reportSites(kFlag, log, missed);
  }
};

} // namespace

void mlir::tfm::populateQuantizedLinearPatterns(RewritePatternSet &patterns) {
  populate(patterns, nullptr);
}
