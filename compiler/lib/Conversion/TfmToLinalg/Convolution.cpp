//===- Convolution.cpp - tfm.conv2d as linalg -----------------------------===//
//
// The portable convolution: the input copied into a zero-padded scratch
// buffer when it has pads, the output initialized with the bias, then one
// linalg.generic over (n, m, y, x, c, i, j) whose input map reads
// [n, g·Cg + c, y·sh + i·dh, x·sw + j·dw] with g = m floordiv (M / group).
// Targets with a convolution kernel take the f32 case.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::lowerGenericConv2D(BufferizedEntry &e, Conv2DOp op) {
  MLIRContext *ctx = e.ctx;
  Value x = e.denseOf(op.getInput()), w = e.denseOf(op.getWeight());
  Value out = e.destination(op.getResult());
  auto xType = cast<MemRefType>(x.getType());
  Type elem = xType.getElementType();
  ArrayRef<int64_t> xs = xType.getShape();
  ArrayRef<int64_t> ws = op.getWeight().getType().getShape();
  ArrayRef<int64_t> pads = op.getPads(), st = op.getStrides(),
                    dil = op.getDilations();
  if (llvm::any_of(pads, [](int64_t p) { return p != 0; })) {
    SmallVector<int64_t> padded = {xs[0], xs[1], xs[2] + pads[0] + pads[2],
                                   xs[3] + pads[1] + pads[3]};
    Value buf = e.temporary(MemRefType::get(padded, elem));
    e.fill(buf, e.b.getFloatAttr(elem, 0.0));
    Value rows = e.axisWindow(
        buf, 2, pads[0],
        RankedTensorType::get({padded[0], padded[1], xs[2], padded[3]}, elem));
    Value window =
        e.axisWindow(rows, 3, pads[1], RankedTensorType::get(xs, elem));
    e.copy(x, window);
    x = buf;
  }
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  int64_t mg = ws[0] / op.getGroup(), cg = ws[1];
  // Loops: n, m, y, x (parallel), c, i, j (reduction).
  AffineMap outMap = AffineMap::get(7, 0, {d(0), d(1), d(2), d(3)}, ctx);
  if (Value bias = op.getBias()) {
    e.generic({e.denseOf(bias)},
              {AffineMap::get(4, 0, {d(1)}, ctx)}, out,
              AffineMap::getMultiDimIdentityMap(4, ctx),
              SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
              [](OpBuilder &, Location, ValueRange a) { return a[0]; });
  } else {
    e.fill(out, e.b.getFloatAttr(elem, 0.0));
  }
  AffineMap inMap = AffineMap::get(
      7, 0,
      {d(0), d(1).floorDiv(mg) * cg + d(4), d(2) * st[0] + d(5) * dil[0],
       d(3) * st[1] + d(6) * dil[1]},
      ctx);
  AffineMap wMap = AffineMap::get(7, 0, {d(1), d(4), d(5), d(6)}, ctx);
  SmallVector<utils::IteratorType> its(4, utils::IteratorType::parallel);
  its.append(3, utils::IteratorType::reduction);
  e.generic({x, w}, {inMap, wMap}, out, outMap, its,
            [](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::AddFOp>(
                  l, a[2], ob.create<arith::MulFOp>(l, a[0], a[1]));
            });
}

void mlir::tfm::populateConvolutionLowerings(OpLoweringSet &set) {
  set.add<Conv2DOp>([](Conv2DOp op, BufferizedEntry &e) {
    lowerGenericConv2D(e, op);
    return success();
  });
}
