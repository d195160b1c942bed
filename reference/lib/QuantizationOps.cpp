//===- QuantizationOps.cpp - Semantics of quantized tensors ---------------===//
//
// Quantization is where rounding is the result, not an error to bound: a
// quotient a half-ulp off lands on the other integer. So the rounding
// steps follow the ONNX definitions exactly, in f32 where they say f32
// (QuantizeLinear's x / scale, all of DynamicQuantizeLinear), and the
// integer products are exact; dequantized values and the products of
// dequantized operands are doubles, as everywhere in the interpreter.
//
//===----------------------------------------------------------------------===//

#include "tfm/Reference/Ops.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::reference;

namespace {

/// For every element of a tensor of `shape`, the flat index of the scale
/// (and zero point) element it reads: 0 for one scale, its index along
/// `axis` for a scale per index, its block's for a blocked scale.
std::vector<int64_t> scaleIndices(Shape shape, Shape scaleShape, int64_t axis,
                                  int64_t blockSize) {
  int64_t n = product(shape);
  std::vector<int64_t> out(n, 0);
  if (scaleShape.empty())
    return out;
  int64_t rank = shape.size();
  axis = axis < 0 ? axis + rank : axis;
  std::vector<int64_t> strides = stridesOf(shape);
  std::vector<int64_t> scaleStrides = stridesOf(scaleShape);
  for (int64_t i = 0; i < n; ++i) {
    if (blockSize == 0) {
      out[i] = i / strides[axis] % shape[axis];
      continue;
    }
    int64_t at = 0;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t c = i / strides[d] % shape[d];
      at += (d == axis ? c / blockSize : c) * scaleStrides[d];
    }
    out[i] = at;
  }
  return out;
}

/// round(q) + zp saturated to `kind`, halves to even; NaN gives zp.
int64_t saturate(double q, int64_t zp, ElementKind kind) {
  auto [lo, hi] = integerRange(kind);
  if (std::isnan(q))
    return std::clamp<int64_t>(zp, lo, hi);
  double v = std::nearbyint(q) + static_cast<double>(zp);
  if (v <= static_cast<double>(lo))
    return lo;
  if (v >= static_cast<double>(hi))
    return hi;
  return static_cast<int64_t>(v);
}

} // namespace

Tensor mlir::tfm::reference::evalQuantize(const Tensor &x, const Tensor &scale,
                                          const Tensor *zeroPoint,
                                          ElementKind kind, int64_t axis,
                                          int64_t blockSize) {
  Tensor out(kind, x.shape);
  std::vector<int64_t> at = scaleIndices(x.shape, scale.shape, axis, blockSize);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    // The quotient of the two f32 values, rounded to f32: double's exact
    // enough quotient rounds the same way (it has more than 2·24 + 2 bits).
    float q = static_cast<float>(static_cast<float>(x.data[i]) /
                                 static_cast<float>(scale.get(at[i])));
    int64_t zp = zeroPoint ? zeroPoint->getInt(at[i]) : 0;
    out.ints[i] = saturate(q, zp, kind);
  }
  return out;
}

Tensor mlir::tfm::reference::evalDequantize(const Tensor &x,
                                            const Tensor &scale,
                                            const Tensor *zeroPoint,
                                            ElementKind kind, int64_t axis,
                                            int64_t blockSize) {
  Tensor out(kind, x.shape);
  std::vector<int64_t> at = scaleIndices(x.shape, scale.shape, axis, blockSize);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    int64_t zp = zeroPoint ? zeroPoint->getInt(at[i]) : 0;
    out.data[i] = static_cast<double>(x.getInt(i) - zp) * scale.get(at[i]);
  }
  return out;
}

std::vector<Tensor> mlir::tfm::reference::evalDynamicQuantize(const Tensor &x) {
  // All in f32, as DynamicQuantizeLinear's definition computes.
  float lo = 0.f, hi = 0.f;
  for (double v : x.data)
    if (!std::isnan(v)) {
      lo = std::min(lo, static_cast<float>(v));
      hi = std::max(hi, static_cast<float>(v));
    }
  // The range always holds 0, so it is empty only when every element is 0;
  // the scale is then 1 (every result and the zero point are 0).
  float scale = hi == lo ? 1.f : (hi - lo) / 255.f;
  float initial = 0.f - lo / scale;
  int64_t zp = static_cast<int64_t>(
      std::nearbyint(std::clamp(initial, 0.f, 255.f)));
  Tensor s(ElementKind::F32, {}), z(ElementKind::U8, {});
  s.data[0] = scale;
  z.ints[0] = zp;
  Tensor q = evalQuantize(x, s, &z, ElementKind::U8, 0, 0);
  return {std::move(q), std::move(s), std::move(z)};
}

Tensor mlir::tfm::reference::evalMatmulInteger(const Tensor &a, const Tensor &b,
                                               const Tensor *aZeroPoint,
                                               const Tensor *bZeroPoint,
                                               Shape outShape) {
  // Each operand less its zero point, broadcast as the op's rule reads it
  // (a row's for the left, a column's for the right), then an exact
  // product in doubles: |terms| < 2^16, so sums stay exact far beyond any
  // K a model has.
  auto shifted = [](const Tensor &v, const Tensor *zp, int64_t contracted) {
    Tensor out(ElementKind::F64, v.shape);
    std::vector<int64_t> reduced = v.shape;
    reduced[reduced.size() - contracted] = 1;
    std::vector<int64_t> zpAt;
    std::vector<int64_t> rowOf;
    if (zp) {
      zpAt = broadcastMap(zp->shape, reduced);
      rowOf = broadcastMap(reduced, v.shape);
    }
    for (int64_t i = 0; i < v.numElements(); ++i)
      out.data[i] = static_cast<double>(
          v.getInt(i) - (zp ? zp->getInt(zpAt[rowOf[i]]) : 0));
    return out;
  };
  Tensor p = evalMatmul(shifted(a, aZeroPoint, 1), shifted(b, bZeroPoint, 2),
                        false, false, ElementKind::F64, outShape);
  Tensor out(ElementKind::I32, outShape.vec());
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.setInt(i, static_cast<int64_t>(p.data[i]));
  return out;
}

namespace {

/// x with each row's blocks of `block` along its last axis rounded to
/// symmetric int8, in f32 as a kernel computes it: s = max|x| / 127 over
/// the block, x' = s · clamp(round_half_even(x / s), -127, 127); NaNs take
/// no part in the maximum and become 0, as does a block whose maximum is 0.
Tensor blockRoundedInput(const Tensor &x, int64_t block) {
  Tensor out(x.kind, x.shape);
  const int64_t k = x.shape.empty() ? 1 : x.shape.back();
  const int64_t rows = k ? x.numElements() / k : 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b0 = 0; b0 < k; b0 += block) {
      const int64_t b1 = std::min(k, b0 + block);
      float amax = 0.f;
      for (int64_t i = b0; i < b1; ++i) {
        float v = static_cast<float>(x.data[r * k + i]);
        if (!std::isnan(v))
          amax = std::max(amax, std::fabs(v));
      }
      const float s = amax / 127.f;
      for (int64_t i = b0; i < b1; ++i) {
        float v = static_cast<float>(x.data[r * k + i]);
        float q = s > 0.f && !std::isnan(v)
                      ? std::clamp(std::nearbyint(v / s), -127.f, 127.f)
                      : 0.f;
        out.data[r * k + i] = roundToKind(q * s, x.kind);
      }
    }
  return out;
}

} // namespace

Tensor mlir::tfm::reference::evalQuantizedLinear(
    const Tensor &x, const Tensor &weight, const Tensor &weightScale,
    const Tensor *weightZeroPoint, const Tensor *bias, const Tensor *inputScale,
    const Tensor *inputZeroPoint, InputQuantization mode, Activation act,
    int64_t blockSize, Shape outShape) {
  Tensor w = evalDequantize(weight, weightScale, weightZeroPoint, x.kind,
                            blockSize ? 1 : 0, blockSize);
  switch (mode) {
  case InputQuantization::none:
    return evalLinear(x, w, bias, act, outShape);
  case InputQuantization::dynamic: {
    std::vector<Tensor> q = evalDynamicQuantize(x);
    return evalLinear(evalDequantize(q[0], q[1], &q[2], x.kind, 0, 0), w, bias,
                      act, outShape);
  }
  case InputQuantization::static_: {
    Tensor q = evalQuantize(x, *inputScale, inputZeroPoint,
                            inputZeroPoint->kind, 0, 0);
    return evalLinear(evalDequantize(q, *inputScale, inputZeroPoint, x.kind, 0,
                                     0),
                      w, bias, act, outShape);
  }
  case InputQuantization::blocked:
    return evalLinear(blockRoundedInput(x, blockSize), w, bias, act, outShape);
  }
  return evalLinear(x, w, bias, act, outShape);
}
