//===- Quantization.cpp - ONNX's quantized ops ----------------------------===//
//
// QDQ (QuantizeLinear, DequantizeLinear) and the QOperator forms
// (DynamicQuantizeLinear, MatMulInteger, QLinearMatMul) become tfm's
// quantization ops one for one, or a few of them, exactly: the fusion
// pass, not the importer, decides what runs as a quantized linear layer.
// ConvInteger and QLinearConv live with Conv (Convolution.cpp) and use
// the helpers here.
//
// A scale or zero point of one element is the tensor's (rank 0), whatever
// its rank. Constant scales are checked here, where the node can be
// named: a scale of zero, below zero or not finite has no meaning, and
// would turn every value into the zero point or a NaN at run time.
//
//===----------------------------------------------------------------------===//

#include "../ImporterImpl.h"

#include "llvm/Support/Format.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

FailureOr<Value> mlir::tfm::onnx_import::quantizationParameter(NodeContext &n,
                                                               unsigned i,
                                                               StringRef name) {
  Value v = n.input(i);
  auto type = n.inputType(i);
  if (type.getNumElements() == 1 && type.getRank() <= 1)
    return n.reshape(v, {});
  if (type.getRank() > 0 && n.opset < 13 &&
      (n.node.op_type() == "QuantizeLinear" ||
       n.node.op_type() == "DequantizeLinear"))
    return n.fail(n.node.op_type() + "'s " + name + " must hold one value " +
                  "before opset 13 (per-axis scales came with it), got " +
                  llvm::formatv("{0}", type).str());
  return v;
}

LogicalResult mlir::tfm::onnx_import::checkScale(NodeContext &n, unsigned i,
                                                 StringRef name,
                                                 bool allowNegative) {
  DenseElementsAttr attr = n.constantAttr(i);
  if (!attr || !isa<FloatType>(attr.getElementType()))
    return success();
  int64_t at = 0;
  for (APFloat v : attr.getValues<APFloat>()) {
    double d = v.convertToDouble();
    if (!(allowNegative ? d != 0 : d > 0) || !std::isfinite(d))
      return n.fail(n.node.op_type() + "'s " + name + " holds " +
                    llvm::formatv("{0}", llvm::format("%g", d)).str() +
                    " at index " + Twine(at) +
                    (allowNegative ? ": a scale must be finite and not 0"
                                   : ": a scale must be positive and finite"));
    if (attr.isSplat())
      break;
    ++at;
  }
  return success();
}

FailureOr<Value> mlir::tfm::onnx_import::dequantize(NodeContext &n, Value x,
                                                    Value scale, Value zp,
                                                    int64_t axis,
                                                    int64_t blockSize) {
  auto t = inferDequantizeType(n.diag(DequantizeOp::getOperationName()),
                               x.getType(), scale.getType(),
                               zp ? zp.getType() : Type(), axis, blockSize);
  if (failed(t))
    return failure();
  return Value(n.builder.create<DequantizeOp>(
      n.loc, *t, x, scale, zp, n.builder.getI64IntegerAttr(axis),
      n.builder.getI64IntegerAttr(blockSize)));
}

FailureOr<Value> mlir::tfm::onnx_import::quantize(NodeContext &n, Value x,
                                                  Value scale, Value zp,
                                                  Type resultElement,
                                                  int64_t axis,
                                                  int64_t blockSize) {
  auto resultType = RankedTensorType::get(
      cast<RankedTensorType>(x.getType()).getShape(), resultElement);
  if (failed(verifyQuantizeTypes(n.diag(QuantizeOp::getOperationName()),
                                 x.getType(), scale.getType(),
                                 zp ? zp.getType() : Type(), resultType, axis,
                                 blockSize)))
    return failure();
  return Value(n.builder.create<QuantizeOp>(
      n.loc, resultType, x, scale, zp, n.builder.getI64IntegerAttr(axis),
      n.builder.getI64IntegerAttr(blockSize)));
}

FailureOr<Value> mlir::tfm::onnx_import::matmulInteger(NodeContext &n, Value a,
                                                       Value b, Value aZp,
                                                       Value bZp) {
  // numpy's 1-D operands: a vector gains a unit dimension and loses it
  // after, as MatMul's do.
  auto at = cast<RankedTensorType>(a.getType());
  auto bt = cast<RankedTensorType>(b.getType());
  bool vecA = at.getRank() == 1, vecB = bt.getRank() == 1;
  if ((vecA && !take(n.reshape(a, {1, at.getDimSize(0)}), a)) ||
      (vecB && !take(n.reshape(b, {bt.getDimSize(0), 1}), b)))
    return failure();
  // A per-row zero point [M] of the left operand reads along its rows.
  if (aZp && cast<RankedTensorType>(aZp.getType()).getRank() == 1 &&
      !take(n.reshape(aZp, {cast<RankedTensorType>(aZp.getType()).getDimSize(0),
                            1}),
            aZp))
    return failure();
  auto t = inferMatmulIntegerType(
      n.diag(MatmulIntegerOp::getOperationName()), a.getType(), b.getType(),
      aZp ? aZp.getType() : Type(), bZp ? bZp.getType() : Type());
  if (failed(t))
    return failure();
  Value y = n.builder.create<MatmulIntegerOp>(n.loc, *t, a, b, aZp, bZp);
  if (!vecA && !vecB)
    return y;
  SmallVector<int64_t> shape(cast<RankedTensorType>(y.getType()).getShape());
  if (vecB)
    shape.pop_back();
  if (vecA)
    shape.erase(shape.end() - (vecB ? 1 : 2));
  return n.reshape(y, shape);
}

FailureOr<Value> mlir::tfm::onnx_import::requantize(NodeContext &n, Value acc,
                                                    Value factor, Value zp) {
  // acc · factor rounded once: quantize's x / scale with scale = 1 / factor
  // would round twice. So the product is taken first, then quantized by 1.
  Value f, y;
  Type f32 = n.builder.getF32Type();
  if (!take(n.castTo(acc, f32), f) || !take(n.binary<MulOp>(f, factor), y))
    return failure();
  Type elem = cast<RankedTensorType>(zp.getType()).getElementType();
  return quantize(n, y, n.scalar(f32, 1.0), zp, elem, 1, 0);
}

namespace {

/// The element type a QuantizeLinear writes: its zero point's, else
/// output_dtype's (opset 21), else uint8.
FailureOr<Type> quantizedElement(NodeContext &n) {
  int64_t dtype = n.opset >= 21 ? n.intAttr("output_dtype", 0) : 0;
  Type fromAttr;
  if (dtype != 0) {
    fromAttr = elementTypeOf(n.builder.getContext(), dtype);
    if (!fromAttr || !isa<IntegerType>(fromAttr) ||
        fromAttr.getIntOrFloatBitWidth() > 16)
      return n.fail("QuantizeLinear's output_dtype " + Twine(dtype) + " (" +
                    dataTypeName(dtype) +
                    ") is not a type tfm quantizes to (int4, uint4, int8, "
                    "uint8, int16, uint16)");
  }
  if (Value zp = n.input(2)) {
    Type z = n.inputType(2).getElementType();
    if (fromAttr && fromAttr != z)
      return n.fail("QuantizeLinear's output_dtype " + dataTypeName(dtype) +
                    " disagrees with its zero point's type " +
                    llvm::formatv("{0}", z).str());
    return z;
  }
  return fromAttr ? fromAttr
                  : Type(IntegerType::get(n.builder.getContext(), 8,
                                          IntegerType::Unsigned));
}

/// The float an integer input of QuantizeLinear is divided in.
FailureOr<Value> floatInput(NodeContext &n, Value x) {
  Type elem = cast<RankedTensorType>(x.getType()).getElementType();
  if (isa<FloatType>(elem))
    return x;
  // int32 (opsets 10 and 13): f32 holds every value a quantized range
  // reaches exactly; larger ones saturate either way.
  if (elem.isInteger(32))
    return n.castTo(x, n.builder.getF32Type());
  return n.fail("QuantizeLinear quantizes floats and int32, not " +
                llvm::formatv("{0}", elem).str());
}

LogicalResult convertQuantizeLinear(NodeContext &n) {
  auto elem = quantizedElement(n);
  Value x, scale, zp;
  if (failed(elem) || !take(floatInput(n, n.input(0)), x) ||
      failed(checkScale(n, 1, "y_scale")) ||
      !take(quantizationParameter(n, 1, "y_scale"), scale) ||
      (n.input(2) && !take(quantizationParameter(n, 2, "y_zero_point"), zp)))
    return failure();
  // The quotient's float type is the input's; a scale of another width
  // (f32 scale, bf16 input) is brought to it.
  Type xElem = cast<RankedTensorType>(x.getType()).getElementType();
  if (!take(n.castTo(scale, xElem), scale))
    return failure();
  int64_t axis = n.opset >= 13 ? n.intAttr("axis", 1) : 1;
  int64_t block = n.opset >= 21 ? n.intAttr("block_size", 0) : 0;
  return n.push(quantize(n, x, scale, zp, *elem, axis, block));
}

LogicalResult convertDequantizeLinear(NodeContext &n) {
  Value x = n.input(0), scale, zp;
  if (failed(checkScale(n, 1, "x_scale")) ||
      !take(quantizationParameter(n, 1, "x_scale"), scale) ||
      (n.input(2) && !take(quantizationParameter(n, 2, "x_zero_point"), zp)))
    return failure();
  Type elem = n.inputType(0).getElementType();
  if (!isa<IntegerType>(elem) || elem.getIntOrFloatBitWidth() > 32 ||
      elem.isInteger(1))
    return n.fail("DequantizeLinear dequantizes 4-, 8-, 16- and 32-bit "
                  "integers, not " +
                  llvm::formatv("{0}", elem).str());
  // An int32 input (a quantized bias) has zero point 0; a constant zero
  // point of 0 is dropped, any other is an error.
  if (zp && elem.isInteger(32)) {
    DenseElementsAttr z = n.constantAttr(2);
    if (!z || !llvm::all_of(z.getValues<APInt>(),
                            [](const APInt &v) { return v.isZero(); }))
      return n.fail("DequantizeLinear of int32 takes no zero point but 0");
    zp = Value();
  }
  int64_t axis = n.opset >= 13 ? n.intAttr("axis", 1) : 1;
  int64_t block = n.opset >= 21 ? n.intAttr("block_size", 0) : 0;
  Value y;
  if (!take(dequantize(n, x, scale, zp, axis, block), y))
    return failure();
  return n.push(y);
}

LogicalResult convertDynamicQuantizeLinear(NodeContext &n) {
  Value x = n.input(0);
  if (!n.inputType(0).getElementType().isF32())
    return n.fail("DynamicQuantizeLinear quantizes f32, not " +
                  llvm::formatv("{0}", n.inputType(0).getElementType()).str());
  SmallVector<Type> types;
  if (failed(inferDynamicQuantizeTypes(
          n.diag(DynamicQuantizeOp::getOperationName()), x.getType(), types)))
    return failure();
  auto op = n.builder.create<DynamicQuantizeOp>(n.loc, types, x);
  for (Value r : op->getResults())
    n.results.push_back(r);
  return success();
}

LogicalResult convertMatMulInteger(NodeContext &n) {
  return n.push(matmulInteger(n, n.input(0), n.input(1), n.input(2),
                              n.input(3)));
}

/// A scale as a factor of the [.., M, N] product: a per-row one (of the
/// left operand) [M] becomes [M, 1].
FailureOr<Value> rowFactor(NodeContext &n, Value s) {
  auto t = cast<RankedTensorType>(s.getType());
  if (t.getRank() != 1)
    return s;
  return n.reshape(s, {t.getDimSize(0), 1});
}

LogicalResult convertQLinearMatMul(NodeContext &n) {
  // y = saturate(round((a - a_zp)·(b - b_zp) · (a_scale · b_scale / y_scale))
  //     + y_zp), the product exact in i32.
  Value as, az, bs, bz, ys, yz, acc, ab, factor;
  if (failed(checkScale(n, 1, "a_scale")) ||
      failed(checkScale(n, 4, "b_scale")) ||
      failed(checkScale(n, 6, "y_scale")) ||
      !take(quantizationParameter(n, 1, "a_scale"), as) ||
      !take(quantizationParameter(n, 2, "a_zero_point"), az) ||
      !take(quantizationParameter(n, 4, "b_scale"), bs) ||
      !take(quantizationParameter(n, 5, "b_zero_point"), bz) ||
      !take(quantizationParameter(n, 6, "y_scale"), ys) ||
      !take(quantizationParameter(n, 7, "y_zero_point"), yz))
    return failure();
  if (cast<RankedTensorType>(ys.getType()).getRank() != 0)
    return n.fail("QLinearMatMul's y_scale must hold one value");
  Type f32 = n.builder.getF32Type();
  if (!take(n.castTo(as, f32), as) || !take(n.castTo(bs, f32), bs) ||
      !take(n.castTo(ys, f32), ys) ||
      !take(matmulInteger(n, n.input(0), n.input(3), az, bz), acc) ||
      !take(rowFactor(n, as), as) || !take(n.binary<MulOp>(as, bs), ab) ||
      !take(n.binary<DivOp>(ab, ys), factor))
    return failure();
  return n.push(requantize(n, acc, factor, yz));
}

//===----------------------------------------------------------------------===//
// com.microsoft
//===----------------------------------------------------------------------===//

/// The unsigned `bits`-wide values packed low bits first in `bytes`, each
/// row of `rowBytes` bytes holding `count` of them (and maybe padding);
/// `packed` is a uint8 constant, maybe a splat.
SmallVector<uint8_t> unpackRows(DenseElementsAttr packed, int64_t rows,
                                int64_t rowBytes, int64_t count,
                                unsigned bits) {
  ArrayRef<char> bytes = packed.getRawData();
  bool splat = packed.isSplat();
  SmallVector<uint8_t> out;
  out.reserve(rows * count);
  unsigned perByte = 8 / bits, mask = (1u << bits) - 1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < count; ++i) {
      auto byte = static_cast<uint8_t>(
          bytes[splat ? 0 : r * rowBytes + i / perByte]);
      out.push_back((byte >> (bits * (i % perByte))) & mask);
    }
  return out;
}

/// `values` (each in [0, 2^bits)) as a constant of `shape`: unsigned, or
/// less `offset` and signed (a symmetric default zero point folded in).
DenseElementsAttr integerConstant(MLIRContext *ctx, ArrayRef<int64_t> shape,
                                  ArrayRef<uint8_t> values, unsigned bits,
                                  int offset) {
  auto type = RankedTensorType::get(
      shape, IntegerType::get(ctx, bits,
                              offset ? IntegerType::Signless
                                     : IntegerType::Unsigned));
  SmallVector<APInt> ints;
  ints.reserve(values.size());
  for (uint8_t v : values)
    ints.push_back(APInt(bits, static_cast<uint64_t>(int64_t(v) - offset),
                         /*isSigned=*/true));
  return DenseElementsAttr::get(type, ints);
}

/// A float scale or zero point of MatMulNBits: [N, blocks], or the same
/// row-major as one dimension.
FailureOr<Value> perBlock(NodeContext &n, unsigned i, StringRef name,
                          int64_t rows, int64_t blocks) {
  auto t = n.inputType(i);
  if (t.getNumElements() != rows * blocks || t.getRank() > 2 ||
      (t.getRank() == 2 && t.getDimSize(0) != rows))
    return n.fail("MatMulNBits's " + name + " " +
                  llvm::formatv("{0}", t).str() + " must be [" + Twine(rows) +
                  ", " + Twine(blocks) + "] (N and K's blocks) or [" +
                  Twine(rows * blocks) + "]");
  return n.reshape(n.input(i), {rows, blocks});
}

LogicalResult convertMatMulNBits(NodeContext &n) {
  // y = a · w'ᵀ + bias, w'[n, k] = (q[n, k] - zp[n, b]) · scale[n, b] with
  // b = k / block_size (or g_idx[k]); q unsigned, packed low bits first,
  // the K of each row padded to whole blocks.
  MLIRContext *ctx = n.builder.getContext();
  int64_t k = n.intAttr("K", -1), nOut = n.intAttr("N", -1);
  int64_t bits = n.intAttr("bits", 4), bs = n.intAttr("block_size", -1);
  if (k <= 0 || nOut <= 0)
    return n.fail("MatMulNBits needs positive K and N attributes, got K = " +
                  Twine(k) + " and N = " + Twine(nOut));
  if (bits != 4 && bits != 8)
    return n.fail("MatMulNBits with bits = " + Twine(bits) +
                  " is not supported (4 and 8 are)");
  if (bs < 16 || (bs & (bs - 1)) != 0)
    return n.fail("MatMulNBits's block_size must be a power of 2 of at least "
                  "16, got " + Twine(bs));
  if (n.intAttr("weight_prepacked", 0) != 0)
    return n.fail("MatMulNBits's weight_prepacked layouts are one device's; "
                  "only the portable layout (0) is supported");
  auto at = n.inputType(0);
  if (!isa<FloatType>(at.getElementType()) || at.getRank() < 1 ||
      at.getShape().back() != k)
    return n.fail("MatMulNBits's input " + llvm::formatv("{0}", at).str() +
                  " must be a float tensor [..., K = " + Twine(k) + "]");
  int64_t blocks = (k + bs - 1) / bs, blob = bs * bits / 8;
  auto bt = n.inputType(1);
  SmallVector<int64_t> wantB{nOut, blocks, blob};
  if (!bt.getElementType().isUnsignedInteger(8) || bt.getShape() != ArrayRef(wantB))
    return n.fail("MatMulNBits's packed weight " +
                  llvm::formatv("{0}", bt).str() + " must be uint8 [N = " +
                  Twine(nOut) + ", " + Twine(blocks) + " blocks, " +
                  Twine(blob) + " bytes a block] for K = " + Twine(k) +
                  ", bits = " + Twine(bits) + ", block_size = " + Twine(bs));
  DenseElementsAttr bAttr = n.constantAttr(1);
  if (!bAttr)
    return n.fail("MatMulNBits's packed weight must be a constant (an "
                  "initializer)");
  if (failed(checkScale(n, 2, "scales", /*allowNegative=*/true)))
    return failure();
  Value scales;
  if (!take(perBlock(n, 2, "scales", nOut, blocks), scales))
    return failure();
  Type elem = at.getElementType();
  if (cast<RankedTensorType>(scales.getType()).getElementType() != elem)
    return n.fail("MatMulNBits's scales must have its input's type " +
                  llvm::formatv("{0}", elem).str());
  SmallVector<uint8_t> q =
      unpackRows(bAttr, nOut, blocks * blob, k, static_cast<unsigned>(bits));
  Value zp, floatZp;
  int offset = 1 << (bits - 1);
  if (Value z = n.input(3)) {
    auto zt = n.inputType(3);
    if (isa<FloatType>(zt.getElementType())) {
      if (zt.getElementType() != elem)
        return n.fail("MatMulNBits's float zero points must have its "
                      "scales' type");
      if (!take(perBlock(n, 3, "zero_points", nOut, blocks), floatZp))
        return failure();
    } else {
      int64_t rowBytes = (blocks * bits + 7) / 8;
      if (!zt.getElementType().isUnsignedInteger(8) ||
          zt.getNumElements() != nOut * rowBytes)
        return n.fail("MatMulNBits's packed zero points " +
                      llvm::formatv("{0}", zt).str() + " must be uint8 [N = " +
                      Twine(nOut) + ", " + Twine(rowBytes) + "] (or [" +
                      Twine(nOut * rowBytes) + "])");
      DenseElementsAttr zAttr = n.constantAttr(3);
      if (!zAttr)
        return n.fail("MatMulNBits's packed zero points must be a constant");
      zp = n.constant(integerConstant(
          ctx, {nOut, blocks},
          unpackRows(zAttr, nOut, rowBytes, blocks, bits), bits, 0));
    }
    offset = 0;
  }
  Value w = n.constant(
      integerConstant(ctx, {nOut, k}, q, static_cast<unsigned>(bits), offset));
  // g_idx: each k's block. The one of k / block_size says nothing; any
  // other gathers each column's scale and zero point (blocks of 1).
  int64_t block = bs;
  if (n.input(4)) {
    auto g = n.constantInts(4, "g_idx");
    if (failed(g))
      return failure();
    if (static_cast<int64_t>(g->size()) < k)
      return n.fail("MatMulNBits's g_idx holds " + Twine(g->size()) +
                    " block indices; it needs one for each of K = " +
                    Twine(k));
    bool trivial = true;
    for (int64_t i = 0; i < k; ++i) {
      if ((*g)[i] < 0 || (*g)[i] >= blocks)
        return n.fail("MatMulNBits's g_idx[" + Twine(i) + "] = " +
                      Twine((*g)[i]) + " is not a block in [0, " +
                      Twine(blocks) + ")");
      trivial &= (*g)[i] == i / bs;
    }
    if (!trivial) {
      SmallVector<int64_t> cols(g->begin(), g->begin() + k);
      Value idx = n.constant(DenseElementsAttr::get(
          RankedTensorType::get({k}, n.builder.getI64Type()),
          ArrayRef<int64_t>(cols)));
      if (!take(n.gather(scales, idx, 1), scales) ||
          (zp && !take(n.gather(zp, idx, 1), zp)) ||
          (floatZp && !take(n.gather(floatZp, idx, 1), floatZp)))
        return failure();
      block = 1;
    }
  }
  Value bias = n.input(5);
  if (bias) {
    auto bt2 = n.inputType(5);
    if (bt2.getRank() != 1 || bt2.getDimSize(0) != nOut)
      return n.fail("MatMulNBits's bias " + llvm::formatv("{0}", bt2).str() +
                    " must be [N = " + Twine(nOut) + "]");
  }
  // accuracy_level 4 lets the input be rounded to int8 in each block, which
  // the kernels then multiply in integers: the linear is built here, its
  // input `blocked`. Any other level, or a layout that op does not take
  // (float zero points, a g_idx that gathers, a K that does not fill its
  // last block), computes in the input's type, as a higher accuracy may.
  if (n.intAttr("accuracy_level", 0) == 4 && !floatZp && block == bs &&
      k % bs == 0) {
    auto diag = ShapeDiag{n.loc, QuantizedLinearOp::getOperationName()};
    auto type = inferQuantizedLinearType(
        diag, n.input(0).getType(), w.getType(), scales.getType(),
        zp ? zp.getType() : Type(), bias ? bias.getType() : Type(), Type(),
        Type(), static_cast<int>(InputQuantization::blocked), bs);
    if (failed(type))
      return failure();
    return n.push(n.builder
                      .create<QuantizedLinearOp>(
                          n.loc, *type, n.input(0), w, scales, zp, bias,
                          Value(), Value(), InputQuantization::blocked,
                          Activation::none, bs)
                      .getResult());
  }
  Value dq;
  if (!take(dequantize(n, w, scales, zp, 1, block), dq))
    return failure();
  if (floatZp) {
    // (q - zp) · scale = q · scale - zp · scale, the second term each
    // block's, spread over its columns.
    Value zs, spread;
    SmallVector<int64_t> cols;
    for (int64_t i = 0; i < k; ++i)
      cols.push_back(i / block);
    Value idx = n.constant(DenseElementsAttr::get(
        RankedTensorType::get({k}, n.builder.getI64Type()),
        ArrayRef<int64_t>(cols)));
    if (!take(n.binary<MulOp>(floatZp, scales), zs) ||
        !take(n.gather(zs, idx, 1), spread) ||
        !take(n.binary<SubOp>(dq, spread), dq))
      return failure();
  }
  return n.push(n.linear(n.input(0), dq, bias));
}

/// acc (i32) as a float times `scale`, plus `bias` when given.
FailureOr<Value> scaledAccumulator(NodeContext &n, Value acc, Value scale,
                                   Value bias) {
  Value f, y;
  if (!take(n.castTo(acc, n.builder.getF32Type()), f) ||
      !take(n.binary<MulOp>(f, scale), y) ||
      (bias && !take(n.binary<AddOp>(y, bias), y)))
    return failure();
  return y;
}

LogicalResult convertMatMulIntegerToFloat(NodeContext &n) {
  // y = float((a - a_zp) · (b - b_zp)) · (a_scale · b_scale) + bias.
  Value as, bs, acc, s, az, bz;
  if (failed(checkScale(n, 2, "a_scale")) ||
      failed(checkScale(n, 3, "b_scale")) ||
      !take(quantizationParameter(n, 2, "a_scale"), as) ||
      !take(quantizationParameter(n, 3, "b_scale"), bs) ||
      (n.input(4) && !take(quantizationParameter(n, 4, "a_zero_point"), az)) ||
      (n.input(5) && !take(quantizationParameter(n, 5, "b_zero_point"), bz)) ||
      !take(matmulInteger(n, n.input(0), n.input(1), az, bz), acc) ||
      !take(rowFactor(n, as), as) || !take(n.binary<MulOp>(as, bs), s))
    return failure();
  return n.push(scaledAccumulator(n, acc, s, n.input(6)));
}

LogicalResult convertDynamicQuantizeMatMul(NodeContext &n) {
  // DynamicQuantizeLinear of the input, then MatMulIntegerToFloat.
  if (!n.inputType(0).getElementType().isF32())
    return n.fail("DynamicQuantizeMatMul's input must be f32");
  SmallVector<Type> types;
  if (failed(inferDynamicQuantizeTypes(
          n.diag(DynamicQuantizeOp::getOperationName()), n.input(0).getType(),
          types)))
    return failure();
  auto q = n.builder.create<DynamicQuantizeOp>(n.loc, types, n.input(0));
  Value bs, bz, acc, s;
  if (failed(checkScale(n, 2, "b_scale")) ||
      !take(quantizationParameter(n, 2, "b_scale"), bs) ||
      (n.input(3) && !take(quantizationParameter(n, 3, "b_zero_point"), bz)) ||
      !take(matmulInteger(n, q.getResult(), n.input(1), q.getZeroPoint(), bz),
            acc) ||
      !take(n.binary<MulOp>(q.getScale(), bs), s))
    return failure();
  return n.push(scaledAccumulator(n, acc, s, n.input(4)));
}

LogicalResult convertGatherBlockQuantized(NodeContext &n) {
  // out = dequantize(data, scales, zp)[indices] along gather_axis, the
  // blocks along quantize_axis; gathered before it is dequantized, so that
  // an embedding table's rows are dequantized as they are read.
  MLIRContext *ctx = n.builder.getContext();
  auto dt = n.inputType(0);
  int64_t rank = dt.getRank();
  int64_t gAxis = n.intAttr("gather_axis", 0);
  int64_t qAxis = n.intAttr("quantize_axis", 1);
  int64_t bs = n.intAttr("block_size", 128), bits = n.intAttr("bits", 4);
  if (gAxis < 0)
    gAxis += rank;
  if (qAxis < 0)
    qAxis += rank;
  if (gAxis < 0 || gAxis >= rank || qAxis < 0 || qAxis >= rank)
    return n.fail("GatherBlockQuantized's gather_axis and quantize_axis must "
                  "lie in [-r, r) for its data " +
                  llvm::formatv("{0}", dt).str());
  if (bs < 16 || (bs & (bs - 1)) != 0)
    return n.fail("GatherBlockQuantized's block_size must be a power of 2 of "
                  "at least 16, got " + Twine(bs));
  DenseElementsAttr data = n.constantAttr(0);
  if (!data)
    return n.fail("GatherBlockQuantized's data must be a constant");
  Type delem = dt.getElementType();
  // 4-bit values are gathered as bytes (tfm.gather moves whole bytes).
  unsigned width = delem.getIntOrFloatBitWidth();
  Value table, zp;
  SmallVector<int64_t> shape(dt.getShape());
  if (width == 4) {
    if (bits != 4)
      return n.fail("GatherBlockQuantized of 4-bit data needs bits = 4");
    SmallVector<uint8_t> v;
    for (const APInt &x : data.getValues<APInt>())
      v.push_back(static_cast<uint8_t>(delem.isUnsignedInteger()
                                           ? x.getZExtValue()
                                           : x.getSExtValue()));
    auto t8 = RankedTensorType::get(
        shape, IntegerType::get(ctx, 8, delem.isUnsignedInteger()
                                            ? IntegerType::Unsigned
                                            : IntegerType::Signless));
    table = n.constant(DenseElementsAttr::getFromRawBuffer(
        t8, ArrayRef<char>(reinterpret_cast<const char *>(v.data()),
                           v.size())));
    if (n.input(3)) {
      DenseElementsAttr z = n.constantAttr(3);
      if (!z || z.getElementType() != delem)
        return n.fail("GatherBlockQuantized's zero points must be a constant "
                      "of its data's type");
      SmallVector<uint8_t> zv;
      for (const APInt &x : z.getValues<APInt>())
        zv.push_back(static_cast<uint8_t>(delem.isUnsignedInteger()
                                              ? x.getZExtValue()
                                              : x.getSExtValue()));
      auto zt8 = RankedTensorType::get(
          cast<RankedTensorType>(z.getType()).getShape(), t8.getElementType());
      zp = n.constant(DenseElementsAttr::getFromRawBuffer(
          zt8, ArrayRef<char>(reinterpret_cast<const char *>(zv.data()),
                              zv.size())));
    }
  } else if (delem.isUnsignedInteger(8)) {
    // Packed bytes (gather_axis 0, blocks along the last axis): 8 / bits
    // values a byte, the default zero point 2^(bits - 1).
    if (bits != 4 && bits != 8)
      return n.fail("GatherBlockQuantized of packed uint8 data with bits = " +
                    Twine(bits) + " is not supported (4 and 8 are)");
    if (gAxis != 0 || qAxis != rank - 1)
      return n.fail("GatherBlockQuantized of packed uint8 data needs "
                    "gather_axis 0 and quantize_axis the last");
    int64_t rows = dt.getNumElements() / std::max<int64_t>(1, shape.back());
    int64_t rowBytes = shape.back(), count = rowBytes * 8 / bits;
    shape.back() = count;
    int offset = n.input(3) ? 0 : 1 << (bits - 1);
    SmallVector<uint8_t> v = unpackRows(data, rows, rowBytes, count, bits);
    auto t8 = RankedTensorType::get(
        shape, IntegerType::get(ctx, 8, offset ? IntegerType::Signless
                                               : IntegerType::Unsigned));
    SmallVector<int8_t> shifted;
    for (uint8_t x : v)
      shifted.push_back(static_cast<int8_t>(int(x) - offset));
    table = n.constant(DenseElementsAttr::getFromRawBuffer(
        t8, ArrayRef<char>(reinterpret_cast<const char *>(shifted.data()),
                           shifted.size())));
    if (n.input(3)) {
      DenseElementsAttr z = n.constantAttr(3);
      int64_t blocks = (count + bs - 1) / bs, zRow = (blocks * bits + 7) / 8;
      auto zt = n.inputType(3);
      if (!z || !zt.getElementType().isUnsignedInteger(8) ||
          zt.getNumElements() != rows * zRow)
        return n.fail("GatherBlockQuantized's packed zero points must be a "
                      "uint8 constant of " + Twine(zRow) + " bytes a row");
      SmallVector<uint8_t> zv = unpackRows(z, rows, zRow, blocks, bits);
      SmallVector<int64_t> zShape(shape);
      zShape.back() = blocks;
      zp = n.constant(DenseElementsAttr::getFromRawBuffer(
          RankedTensorType::get(zShape, t8.getElementType()),
          ArrayRef<char>(reinterpret_cast<const char *>(zv.data()),
                         zv.size())));
    }
  } else {
    return n.fail("GatherBlockQuantized of " +
                  llvm::formatv("{0}", delem).str() +
                  " data is not supported (int4, uint4 and packed uint8 are)");
  }
  if (failed(checkScale(n, 2, "scales", /*allowNegative=*/true)))
    return failure();
  Value scales = n.input(2), indices = n.input(1);
  int64_t iRank = n.inputType(1).getRank();
  Value rows, rowScales, rowZp, out;
  if (qAxis == gAxis) {
    // Blocks along the gathered axis: the whole table is dequantized first.
    Value dq;
    if (!take(dequantize(n, table, scales, zp, qAxis, bs), dq))
      return failure();
    return n.push(n.gather(dq, indices, gAxis));
  }
  // Check the table's blocks before the gathers hide them.
  if (failed(checkQuantizationParameters(
          n.diag(DequantizeOp::getOperationName()), table.getType(), "data",
          scales.getType(), zp ? zp.getType() : Type(),
          cast<RankedTensorType>(table.getType()).getElementType(), qAxis,
          bs)))
    return failure();
  int64_t newAxis = qAxis > gAxis ? qAxis + iRank - 1 : qAxis;
  if (!take(n.gather(table, indices, gAxis), rows) ||
      !take(n.gather(scales, indices, gAxis), rowScales) ||
      (zp && !take(n.gather(zp, indices, gAxis), rowZp)) ||
      !take(dequantize(n, rows, rowScales, rowZp, newAxis, bs), out))
    return failure();
  return n.push(out);
}

} // namespace

std::string mlir::tfm::onnx_import::dataTypeName(int64_t dataType) {
  // The ONNX library here predates the 8- and 4-bit types.
  switch (dataType) {
  case 17: return "FLOAT8E4M3FN";
  case 18: return "FLOAT8E4M3FNUZ";
  case 19: return "FLOAT8E5M2";
  case 20: return "FLOAT8E5M2FNUZ";
  case 21: return "UINT4";
  case 22: return "INT4";
  case 23: return "FLOAT4E2M1";
  default:
    break;
  }
  if (onnx::TensorProto::DataType_IsValid(static_cast<int>(dataType)))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(dataType));
  return "unknown type " + std::to_string(dataType);
}

void mlir::tfm::onnx_import::populateQuantizationConverters(Registry &r) {
  r.onOp("QuantizeLinear", 10, convertQuantizeLinear);
  r.onOp("DequantizeLinear", 10, convertDequantizeLinear);
  r.onOp("DynamicQuantizeLinear", 11, convertDynamicQuantizeLinear);
  r.onOp("MatMulInteger", 10, convertMatMulInteger);
  r.onOp("QLinearMatMul", 10, convertQLinearMatMul);
  r.onOp("MatMulNBits", 1, convertMatMulNBits, kMicrosoftDomain);
  r.onOp("MatMulIntegerToFloat", 1, convertMatMulIntegerToFloat,
         kMicrosoftDomain);
  r.onOp("DynamicQuantizeMatMul", 1, convertDynamicQuantizeMatMul,
         kMicrosoftDomain);
  r.onOp("GatherBlockQuantized", 1, convertGatherBlockQuantized,
         kMicrosoftDomain);
}
