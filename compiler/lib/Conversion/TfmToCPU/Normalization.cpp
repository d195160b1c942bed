//===- Normalization.cpp - Softmax and layer norm on oneDNN kernels -------===//

#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

Value mlir::tfm::additiveMask(CPUEntry &e, Value mask, MaskKind kind) {
  auto mt = cast<MemRefType>(mask.getType());
  if (kind != MaskKind::boolean && mt.getElementType().isF32())
    return mask;
  // The kernels add a float mask: 0 where kept, -inf where dropped.
  Value additive =
      e.temporary(MemRefType::get(mt.getShape(), e.b.getF32Type()));
  bool boolean = kind == MaskKind::boolean;
  e.elementwise(
      {mask}, additive, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
        Type f32 = ob.getF32Type();
        if (boolean)
          return ob.create<arith::SelectOp>(
              l, a[0], BufferizedEntry::constantScalar(ob, l, f32, 0),
              BufferizedEntry::constantScalar(ob, l, f32, -INFINITY));
        if (a[0].getType().getIntOrFloatBitWidth() > 32)
          return ob.create<arith::TruncFOp>(l, f32, a[0]);
        return ob.create<arith::ExtFOp>(l, f32, a[0]);
      });
  return additive;
}

LogicalResult mlir::tfm::lowerCPUSoftmax(CPUEntry &e, Value x, Value mask,
                                         MaskKind kind, double scale,
                                         bool causal, Value out,
                                         Operation *op) {
  auto type = cast<MemRefType>(x.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rank = shape.size();
  int64_t c = shape.back(), q = rank >= 2 ? shape[rank - 2] : 1;
  int64_t g = product(shape.drop_back(rank >= 2 ? 2 : 1));
  if (type.getElementType().isF32() && product(shape) > 0) {
    int64_t div = 1, gstride = 0, qstride = 0;
    Value maskBuf;
    if (mask) {
      auto mt = cast<MemRefType>(mask.getType());
      maskBuf = additiveMask(e, mask, kind);
      // The kernel reads row q of group g at (g / div)·gstride + q·qstride.
      SmallVector<int64_t> ms(rank - mt.getRank(), 1);
      llvm::append_range(ms, mt.getShape());
      bool fits = ms.back() == c;
      if (rank >= 2)
        qstride = ms[rank - 2] == 1 ? 0 : c;
      int64_t rowBlock = (rank >= 2 ? ms[rank - 2] : 1) * c;
      // Leading mask dims: a prefix equal to the input's, then ones.
      int64_t lead = rank >= 2 ? rank - 2 : 0, j = 0;
      while (j < lead && ms[j] == shape[j] && ms[j] != 1)
        ++j;
      for (int64_t i = j; i < lead; ++i)
        fits &= ms[i] == 1;
      if (j == 0) {
        gstride = 0;
      } else {
        gstride = rowBlock;
        div = product(shape.slice(j, lead - j));
      }
      if (!fits) {
        // An unusual broadcast: materialize the full mask.
        Value full = e.temporary(MemRefType::get(shape, e.b.getF32Type()));
        e.copy(maskBuf, full);
        maskBuf = full;
        div = 1;
        gstride = q * c;
        qstride = c;
      }
    }
    int64_t params[TFM_MASKED_SOFTMAX_NUM_PARAMS] = {};
    params[TFM_MASKED_SOFTMAX_G] = g;
    params[TFM_MASKED_SOFTMAX_Q] = q;
    params[TFM_MASKED_SOFTMAX_C] = c;
    params[TFM_MASKED_SOFTMAX_CAUSAL] = causal;
    params[TFM_MASKED_SOFTMAX_HAS_MASK] = bool(mask);
    params[TFM_MASKED_SOFTMAX_DIV] = div;
    params[TFM_MASKED_SOFTMAX_GSTRIDE] = gstride;
    params[TFM_MASKED_SOFTMAX_QSTRIDE] = qstride;
    e.callKernel(TFM_KERNEL_MASKED_SOFTMAX, params, {scale},
                 {KernelArg(x), KernelArg(maskBuf), KernelArg(out)});
    return success();
  }
  if (mask || causal || scale != 1.0)
    return op->emitError("the CPU backend computes masked softmax in f32 "
                         "only; this one is ")
           << type.getElementType();
  lowerGenericSoftmax(e, x, rank - 1, out);
  return success();
}

namespace {

LogicalResult lowerLayerNorm(CPUEntry &e, Value input, Value residual,
                             Value scale, Value bias, int64_t axis,
                             double epsilon, bool rms, Value result, Value sum,
                             Operation *op) {
  auto type = cast<RankedTensorType>(result.getType());
  ArrayRef<int64_t> shape = type.getShape();
  if (axis < 0)
    axis += shape.size();
  int64_t m = product(shape.take_front(axis)),
          n = product(shape.drop_front(axis));
  if (!isF32(type) || m == 0 || n == 0)
    return op->emitError("the CPU backend computes layer norm on non-empty "
                         "f32 tensors only; this one is ")
           << type;
  Value x = e.denseOf(input);
  Value r = residual ? e.denseOf(residual) : Value();
  // The kernel adds same-shaped operands; broadcast the others first.
  auto full = [&](Value v, Value buf) {
    if (cast<RankedTensorType>(v.getType()).getShape() == shape)
      return buf;
    Value t = e.temporary(MemRefType::get(shape, type.getElementType()));
    e.copy(buf, t);
    return t;
  };
  if (residual) {
    x = full(input, x);
    r = full(residual, r);
  }
  Value out = e.destination(result);
  Value s = sum ? e.destination(sum) : Value();
  int64_t params[TFM_LAYER_NORM_NUM_PARAMS] = {};
  params[TFM_LAYER_NORM_M] = m;
  params[TFM_LAYER_NORM_N] = n;
  params[TFM_LAYER_NORM_HAS_RESIDUAL] = bool(residual);
  params[TFM_LAYER_NORM_HAS_BIAS] = bool(bias);
  params[TFM_LAYER_NORM_WRITES_SUM] = bool(sum);
  e.callKernel(rms ? TFM_KERNEL_RMS_NORM : TFM_KERNEL_LAYER_NORM, params,
               {epsilon},
               {KernelArg(x), KernelArg(r), KernelArg(e.denseOf(scale)),
                bias ? KernelArg(e.denseOf(bias)) : KernelArg(), KernelArg(out),
                KernelArg(s)});
  return success();
}

LogicalResult lowerSoftmax(SoftmaxOp s, CPUEntry &e) {
  int64_t rank = s.getType().getRank();
  int64_t axis = static_cast<int64_t>(s.getAxis());
  if (axis < 0)
    axis += rank;
  if (axis == rank - 1)
    return lowerCPUSoftmax(e, e.denseOf(s.getInput()), Value(), MaskKind::none,
                           1.0, false, e.destination(s.getResult()), s);
  lowerGenericSoftmax(e, e.bufferOf(s.getInput()), axis,
                      e.destination(s.getResult()));
  return success();
}

LogicalResult lowerMaskedSoftmax(MaskedSoftmaxOp s, CPUEntry &e) {
  Value mask = s.getMask() ? e.denseOf(s.getMask()) : Value();
  return lowerCPUSoftmax(e, e.denseOf(s.getInput()), mask, s.getMaskKind(),
                         s.getScale().convertToDouble(), s.getCausal(),
                         e.destination(s.getResult()), s);
}

LogicalResult lowerLayerNormGrad(LayerNormGradOp g, CPUEntry &e) {
  auto xt = g.getInput().getType();
  if (!xt.getElementType().isF32())
    return g.emitError("the CPU backend trains in f32 only");
  int64_t n = g.getScale().getType().getNumElements();
  int64_t m = n ? xt.getNumElements() / n : 0;
  if (m == 0 || n == 0) {
    for (Value r : g.getResults())
      e.fill(e.destination(r), e.b.getFloatAttr(xt.getElementType(), 0.0));
    return success();
  }
  int64_t params[TFM_LAYER_NORM_BACKWARD_NUM_PARAMS] = {};
  params[TFM_LAYER_NORM_BACKWARD_M] = m;
  params[TFM_LAYER_NORM_BACKWARD_N] = n;
  e.callKernel(g.getRms() ? TFM_KERNEL_RMS_NORM_BACKWARD
                          : TFM_KERNEL_LAYER_NORM_BACKWARD,
               params, {g.getEpsilon().convertToDouble()},
               {KernelArg(e.denseOf(g.getInput())),
                KernelArg(e.denseOf(g.getScale())),
                KernelArg(e.denseOf(g.getGrad())),
                KernelArg(e.destination(g.getInputGrad())),
                KernelArg(e.destination(g.getScaleGrad())),
                KernelArg(e.destination(g.getBiasGrad()))});
  return success();
}

} // namespace

void mlir::tfm::populateCPUNormalizationLowerings(OpLoweringSet &set) {
  set.add<SoftmaxOp>(onCPU<SoftmaxOp>(lowerSoftmax));
  set.add<MaskedSoftmaxOp>(onCPU<MaskedSoftmaxOp>(lowerMaskedSoftmax));
  set.add<LayerNormOp>([](LayerNormOp n, BufferizedEntry &e) {
    return lowerLayerNorm(
        cast<CPUEntry>(e), n.getInput(), Value(), n.getScale(), n.getBias(),
        static_cast<int64_t>(n.getAxis()), n.getEpsilon().convertToDouble(),
        n.getRms(), n.getResult(), Value(), n);
  });
  set.add<AddLayerNormOp>([](AddLayerNormOp n, BufferizedEntry &e) {
    return lowerLayerNorm(cast<CPUEntry>(e), n.getInput(), n.getResidual(),
                          n.getScale(), n.getBias(),
                          static_cast<int64_t>(n.getAxis()),
                          n.getEpsilon().convertToDouble(), n.getRms(),
                          n.getOutput(), n.getSum(), n);
  });
  set.add<LayerNormGradOp>(onCPU<LayerNormGradOp>(lowerLayerNormGrad));
}
