//===- MatMulGemm.cpp - ONNX MatMul and Gemm ------------------------------===//
//
// MatMul follows numpy: 1-D operands gain and then lose a unit dimension.
// Gemm becomes tfm.linear whenever it is one (alpha = beta = 1, A not
// transposed, a vector bias), which is what exporters emit for nn.Linear;
// a weight that is not stored transposed is transposed once, at compile time,
// by constant folding.
//
//===----------------------------------------------------------------------===//

#include "../ImporterImpl.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

static LogicalResult convertMatMul(NodeContext &n) {
  Value a = n.input(0), b = n.input(1);
  auto at = n.inputType(0), bt = n.inputType(1);
  if (at.getRank() == 0 || bt.getRank() == 0)
    return n.fail("MatMul operands must have rank >= 1");
  bool aVector = at.getRank() == 1, bVector = bt.getRank() == 1;
  if (aVector) {
    auto r = n.reshape(a, {1, at.getDimSize(0)});
    if (failed(r))
      return failure();
    a = *r;
  }
  if (bVector) {
    auto r = n.reshape(b, {bt.getDimSize(0), 1});
    if (failed(r))
      return failure();
    b = *r;
  }
  auto product = n.matmul(a, b, false, false);
  if (failed(product))
    return failure();
  Value out = *product;
  if (aVector || bVector) {
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(out.getType()).getShape());
    if (bVector)
      shape.pop_back();
    if (aVector)
      shape.erase(shape.end() - (bVector ? 1 : 2));
    auto r = n.reshape(out, shape);
    if (failed(r))
      return failure();
    out = *r;
  }
  n.results.push_back(out);
  return success();
}

static LogicalResult convertGemm(NodeContext &n) {
  Value a = n.input(0), b = n.input(1), c = n.input(2);
  float alpha = n.floatAttr("alpha", 1.0f), beta = n.floatAttr("beta", 1.0f);
  bool transA = n.intAttr("transA", 0), transB = n.intAttr("transB", 0);
  if (n.inputType(0).getRank() != 2 || n.inputType(1).getRank() != 2)
    return n.fail("Gemm operands A and B must be 2-D");
  int64_t outFeatures = transB ? n.inputType(1).getDimSize(0)
                               : n.inputType(1).getDimSize(1);
  bool vectorBias = !c || (n.inputType(2).getRank() == 1 &&
                           n.inputType(2).getDimSize(0) == outFeatures);
  if (alpha == 1.0f && beta == 1.0f && !transA && vectorBias) {
    Value w = b;
    if (!transB) {
      auto t = n.transpose(b, {1, 0});
      if (failed(t))
        return failure();
      w = *t;
    }
    auto y = n.linear(a, w, c);
    if (failed(y))
      return failure();
    n.results.push_back(*y);
    return success();
  }
  auto y = n.matmul(a, b, transA, transB);
  if (failed(y))
    return failure();
  Type elt = getElementTypeOrSelf(a.getType());
  Value out = *y;
  if (alpha != 1.0f) {
    auto scaled = n.binary<MulOp>(out, n.scalar(elt, alpha));
    if (failed(scaled))
      return failure();
    out = *scaled;
  }
  if (c) {
    Value bias = c;
    if (beta != 1.0f) {
      auto scaled = n.binary<MulOp>(c, n.scalar(elt, beta));
      if (failed(scaled))
        return failure();
      bias = *scaled;
    }
    auto sum = n.binary<AddOp>(out, bias);
    if (failed(sum))
      return failure();
    out = *sum;
  }
  n.results.push_back(out);
  return success();
}

void mlir::tfm::onnx_import::populateMatMulGemmConverters(Registry &r) {
  r.onOp("MatMul", 1, convertMatMul);
  r.onOp("Gemm", 1, convertGemm);
}
