//===- Convolution.cpp - tfm.conv2d on the GPU as a library GEMM ----------===//
//
// A convolution is a GEMM over its input's patches (im2col). One kernel
// writes the patches of image n and group g, P[n][g][k][p], k = (c, i, j)
// running over the group's channels and the kernel's taps and p = (y, x)
// over the output's positions, zero where a tap falls in the padding; then
// out[n][g·Mg + m][p] = Σ_k W[g][m][k] · P[n][g][k][p] is one BATCH_MATMUL
// call whose result is the output in its NCHW layout, with no transpose,
// and which reads the weight in place ([M, Cg, KH, KW] is [G][Mg][K] row
// by row). Under bf16 and f16 the patches are written in that type and the
// weight is stored so. The bias is added after the call. The call's
// fallback is the generated batched GEMM over the same patches.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tfm;

LogicalResult mlir::tfm::lowerConv2DAsGemm(Conv2DOp op, GPUEntry &e) {
  ArrayRef<int64_t> xs = op.getInput().getType().getShape(),
                    ws = op.getWeight().getType().getShape(),
                    os = op.getType().getShape();
  ArrayRef<int64_t> pads = op.getPads(), st = op.getStrides(),
                    dil = op.getDilations();
  int64_t n = xs[0], h = xs[2], w = xs[3];
  int64_t m = ws[0], cg = ws[1], kh = ws[2], kw = ws[3], g = op.getGroup();
  int64_t mg = m / g, ow = os[3], k = cg * kh * kw, p = os[2] * ow;
  Type f32 = e.b.getF32Type(), operand = e.gemmOperandType(f32);

  Value x = e.denseOf(op.getInput());
  Value patches = e.temporary(MemRefType::get({n, g, k, p}, operand));
  SmallVector<utils::IteratorType> its(4, utils::IteratorType::parallel);
  e.generic(
      {}, {}, patches, AffineMap::getMultiDimIdentityMap(4, e.ctx), its,
      [&](OpBuilder &ob, Location l, ValueRange) -> Value {
        auto index = [&](unsigned d) {
          return ob.create<linalg::IndexOp>(l, d).getResult();
        };
        auto c = [&](int64_t v) {
          return ob.create<arith::ConstantIndexOp>(l, v).getResult();
        };
        auto mul = [&](Value a, int64_t b) {
          return ob.create<arith::MulIOp>(l, a, c(b)).getResult();
        };
        auto add = [&](Value a, Value b) {
          return ob.create<arith::AddIOp>(l, a, b).getResult();
        };
        Value tap = index(2), at = index(3);
        Value channel = add(mul(index(1), cg),
                            ob.create<arith::DivUIOp>(l, tap, c(kh * kw)));
        Value inKernel = ob.create<arith::RemUIOp>(l, tap, c(kh * kw));
        Value i = ob.create<arith::DivUIOp>(l, inKernel, c(kw));
        Value j = ob.create<arith::RemUIOp>(l, inKernel, c(kw));
        Value y = ob.create<arith::DivUIOp>(l, at, c(ow));
        Value xx = ob.create<arith::RemUIOp>(l, at, c(ow));
        // The input's row and column, negative in the top and left pads.
        Value row = ob.create<arith::SubIOp>(
            l, add(mul(y, st[0]), mul(i, dil[0])), c(pads[0]));
        Value col = ob.create<arith::SubIOp>(
            l, add(mul(xx, st[1]), mul(j, dil[1])), c(pads[1]));
        auto within = [&](Value v, int64_t size) {
          Value low =
              ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, v, c(0));
          Value high = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt,
                                                v, c(size));
          return ob.create<arith::AndIOp>(l, low, high).getResult();
        };
        // A tap in the padding reads a clamped place and keeps zero.
        auto clamp = [&](Value v, int64_t size) {
          return ob
              .create<arith::MinSIOp>(l, ob.create<arith::MaxSIOp>(l, v, c(0)),
                                      c(size - 1))
              .getResult();
        };
        Value inside =
            ob.create<arith::AndIOp>(l, within(row, h), within(col, w));
        Value v = ob.create<memref::LoadOp>(
            l, x, ValueRange{index(0), channel, clamp(row, h), clamp(col, w)});
        v = ob.create<arith::SelectOp>(
            l, inside, v,
            ob.create<arith::ConstantOp>(l, ob.getF32FloatAttr(0.0)));
        return operand == f32 ? v : ob.create<arith::TruncFOp>(l, operand, v);
      });

  Value weight = e.denseOf(op.getWeight());
  if (operand != f32)
    weight = e.narrowed(weight, operand);
  Value out = e.destination(op.getResult());
  auto own = [&] {
    Type wElem = cast<MemRefType>(weight.getType()).getElementType();
    lowerGenericMatmul(e, e.reshape(weight, MemRefType::get({1, g, mg, k}, wElem)),
                       patches, false, false,
                       e.reshape(out, MemRefType::get({n, g, mg, p}, f32)));
  };
  // A weight shared by the images (batch stride 0); the library takes it
  // where one of the two batch dimensions is 1, and declines grouped
  // convolutions of several images, which then run the fallback.
  e.batchMatmul({weight, 0, {n, g, mg, k}, {0, mg * k, k, 1}},
                {patches, 0, {n, g, k, p}, {g * k * p, k * p, p, 1}},
                {out, 0, {n, g, mg, p}, {m * p, mg * p, p, 1}},
                e.gemmKernelDtype(), own);
  if (Value bias = op.getBias()) {
    auto d1 = AffineMap::get(4, 0, {getAffineDimExpr(1, e.ctx)}, e.ctx);
    auto id = AffineMap::getMultiDimIdentityMap(4, e.ctx);
    e.generic({out, e.denseOf(bias)}, {id, d1}, out, id, its,
              [](OpBuilder &ob, Location l, ValueRange a) -> Value {
                return ob.create<arith::AddFOp>(l, a[0], a[1]);
              });
  }
  return success();
}
