//===- Normalization.cpp - ONNX softmax, layer norm and reductions --------===//

#include "../ImporterImpl.h"
#include "tfm/Frontends/ONNX/Schema.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

namespace {

/// The axes of a reduction: from the `axes` input when there is one, else
/// from the attribute; none means all, unless noop_with_empty_axes.
FailureOr<SmallVector<int64_t>> reductionAxes(NodeContext &n, bool &noop) {
  SmallVector<int64_t> axes;
  noop = false;
  if (n.input(1)) {
    auto given = n.constantInts(1, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else if (auto attr = n.intsAttr("axes")) {
    axes = *attr;
  }
  if (axes.empty()) {
    if (n.intAttr("noop_with_empty_axes", 0)) {
      noop = true;
      return axes;
    }
    for (int64_t i = 0; i < n.inputType(0).getRank(); ++i)
      axes.push_back(i);
  }
  return axes;
}

Converter reduction(ReduceKind kind) {
  return [kind](NodeContext &n) -> LogicalResult {
    bool noop;
    auto axes = reductionAxes(n, noop);
    if (failed(axes))
      return failure();
    if (noop) {
      n.results.push_back(n.input(0));
      return success();
    }
    auto v = n.reduce(kind, n.input(0), *axes, n.intAttr("keepdims", 1));
    if (failed(v))
      return failure();
    n.results.push_back(*v);
    return success();
  };
}

/// Softmax over `axis`, or, for a node upgraded from opset 12 or older, over
/// the input flattened to 2-D at its old axis, as those opsets define it.
FailureOr<Value> softmaxOfNode(NodeContext &n) {
  if (!n.attr(onnx_io::kLegacySoftmaxAxis))
    return n.softmax(n.input(0), n.intAttr("axis", -1));
  RankedTensorType type = n.inputType(0);
  int64_t rank = type.getRank();
  int64_t axis = n.intAttr(onnx_io::kLegacySoftmaxAxis, 1);
  if (axis < -rank || axis > rank)
    return n.fail("axis " + Twine(axis) + " is out of range for rank " +
                  Twine(rank));
  if (axis < 0)
    axis += rank;
  if (axis == rank - 1 && rank > 0)
    return n.softmax(n.input(0), -1);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= type.getDimSize(i);
  auto flat = n.reshape(n.input(0), {outer, inner});
  if (failed(flat))
    return failure();
  auto p = n.softmax(*flat, -1);
  if (failed(p))
    return failure();
  return n.reshape(*p, type.getShape());
}

} // namespace

void mlir::tfm::onnx_import::populateNormalizationConverters(Registry &r) {
  r.onOp("Softmax", 13, [](NodeContext &n) -> LogicalResult {
    return n.push(softmaxOfNode(n));
  });
  r.onOp("LogSoftmax", 13, [](NodeContext &n) -> LogicalResult {
    auto p = softmaxOfNode(n);
    if (failed(p))
      return failure();
    auto v = n.floatUnary<math::LogOp>(*p);
    if (failed(v))
      return failure();
    n.results.push_back(*v);
    return success();
  });
  r.onOp("LayerNormalization", 17, [](NodeContext &n) -> LogicalResult {
    if (n.intAttr("stash_type", 1) != 1)
      return n.fail("LayerNormalization with stash_type other than float is "
                    "not supported");
    int64_t axis = n.intAttr("axis", -1);
    float eps = n.floatAttr("epsilon", 1e-5f);
    auto v = n.layerNorm(n.input(0), n.input(1), n.input(2), axis, eps);
    if (failed(v))
      return failure();
    n.results.push_back(*v);
    if (!n.hasOutput(1) && !n.hasOutput(2))
      return success();
    // The optional statistics are rarely used (training graphs); spell them
    // out with reductions rather than widen the fused op.
    Value x = n.input(0);
    int64_t rank = n.inputType(0).getRank();
    SmallVector<int64_t> axes;
    for (int64_t a = axis < 0 ? axis + rank : axis; a < rank; ++a)
      axes.push_back(a);
    auto mean = n.reduce(ReduceKind::mean, x, axes, /*keepdims=*/true);
    if (failed(mean))
      return failure();
    auto centered = n.binary<SubOp>(x, *mean);
    if (failed(centered))
      return failure();
    auto squared = n.binary<MulOp>(*centered, *centered);
    if (failed(squared))
      return failure();
    auto var = n.reduce(ReduceKind::mean, *squared, axes, true);
    if (failed(var))
      return failure();
    Type elt = getElementTypeOrSelf(x.getType());
    auto shifted = n.binary<AddOp>(*var, n.scalar(elt, eps));
    if (failed(shifted))
      return failure();
    auto root = n.floatUnary<math::SqrtOp>(*shifted);
    if (failed(root))
      return failure();
    auto inv = n.binary<DivOp>(n.scalar(elt, 1), *root);
    if (failed(inv))
      return failure();
    n.results.push_back(*mean);
    n.results.push_back(*inv);
    return success();
  });
  r.onOp("ReduceMean", 1, reduction(ReduceKind::mean));
  r.onOp("ReduceSum", 13, reduction(ReduceKind::sum));
  r.onOp("ReduceMax", 1, reduction(ReduceKind::max));
  r.onOp("ReduceMin", 1, reduction(ReduceKind::min));
}
