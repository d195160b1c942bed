//===- Normalization.cpp - ONNX softmax, layer norm and reductions --------===//

#include "../ImporterImpl.h"

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

} // namespace

void mlir::tfm::onnx_import::populateNormalizationConverters(Registry &r) {
  r.onOp("Softmax", 13, [](NodeContext &n) -> LogicalResult {
    auto v = n.softmax(n.input(0), n.intAttr("axis", -1));
    if (failed(v))
      return failure();
    n.results.push_back(*v);
    return success();
  });
  r.onOp("LogSoftmax", 13, [](NodeContext &n) -> LogicalResult {
    auto p = n.softmax(n.input(0), n.intAttr("axis", -1));
    if (failed(p))
      return failure();
    auto v = n.floatUnary<math::LogOp>(*p);
    if (failed(v))
      return failure();
    n.results.push_back(*v);
    return success();
  });
  r.onOp("LayerNormalization", 17, [](NodeContext &n) -> LogicalResult {
    if (n.hasOutput(1) || n.hasOutput(2))
      return n.fail("LayerNormalization's Mean and InvStdDev outputs are not "
                    "supported");
    if (n.intAttr("stash_type", 1) != 1)
      return n.fail("LayerNormalization with stash_type other than float is "
                    "not supported");
    auto v = n.layerNorm(n.input(0), n.input(1), n.input(2),
                         n.intAttr("axis", -1), n.floatAttr("epsilon", 1e-5f));
    if (failed(v))
      return failure();
    n.results.push_back(*v);
    return success();
  });
  r.onOp("ReduceMean", 1, reduction(ReduceKind::mean));
  r.onOp("ReduceSum", 13, reduction(ReduceKind::sum));
  r.onOp("ReduceMax", 1, reduction(ReduceKind::max));
  r.onOp("ReduceMin", 1, reduction(ReduceKind::min));
}
