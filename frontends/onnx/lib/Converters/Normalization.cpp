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

/// `v` ([C]) shaped to broadcast along axis 1 of a rank-`rank` tensor.
FailureOr<Value> perChannel(NodeContext &n, Value v, int64_t rank) {
  SmallVector<int64_t> shape(rank, 1);
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() != 1 || rank < 2)
    return n.fail("expects a per-channel vector and an input of rank 2 or "
                  "more");
  shape[1] = type.getDimSize(0);
  return n.reshape(v, shape);
}

/// (x - mean) / sqrt(var + eps) over `axes`, the statistics kept as
/// dimensions of size 1.
FailureOr<Value> standardize(NodeContext &n, Value x, ArrayRef<int64_t> axes,
                             double epsilon) {
  Type t = getElementTypeOrSelf(x.getType());
  Value mean, centered, squared, var, shifted, root;
  if (!take(n.reduce(ReduceKind::mean, x, axes, true), mean) ||
      !take(n.binary<SubOp>(x, mean), centered) ||
      !take(n.binary<MulOp>(centered, centered), squared) ||
      !take(n.reduce(ReduceKind::mean, squared, axes, true), var) ||
      !take(n.binary<AddOp>(var, n.scalar(t, epsilon)), shifted) ||
      !take(n.floatUnary<math::SqrtOp>(shifted), root))
    return failure();
  return n.binary<DivOp>(centered, root);
}

/// x·scale + bias with per-channel (axis 1) scale and bias.
FailureOr<Value> scaleAndShift(NodeContext &n, Value x, Value scale,
                               Value bias) {
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  Value s, b, scaled;
  if (!take(perChannel(n, scale, rank), s) ||
      !take(perChannel(n, bias, rank), b) ||
      !take(n.binary<MulOp>(x, s), scaled))
    return failure();
  return n.binary<AddOp>(scaled, b);
}

/// BatchNormalization in training mode: the batch's own statistics over
/// every axis but the channels (the variance without Bessel's correction),
/// and the running statistics moved toward them by 1 - momentum.
LogicalResult batchNormTraining(NodeContext &n) {
  if (n.hasOutput(3) || n.hasOutput(4))
    return n.fail("BatchNormalization's saved statistics outputs are not "
                  "supported");
  Value x = n.input(0);
  auto type = n.inputType(0);
  int64_t rank = type.getRank(), channels = type.getDimSize(1);
  SmallVector<int64_t> axes;
  for (int64_t a = 0; a < rank; ++a)
    if (a != 1)
      axes.push_back(a);
  Type t = type.getElementType();
  double momentum = n.floatAttr("momentum", 0.9f);
  Value mean, centered, squared, var, shifted, root, normed, y;
  if (!take(n.reduce(ReduceKind::mean, x, axes, true), mean) ||
      !take(n.binary<SubOp>(x, mean), centered) ||
      !take(n.binary<MulOp>(centered, centered), squared) ||
      !take(n.reduce(ReduceKind::mean, squared, axes, true), var) ||
      !take(n.binary<AddOp>(var, n.scalar(t, n.floatAttr("epsilon", 1e-5f))),
            shifted) ||
      !take(n.floatUnary<math::SqrtOp>(shifted), root) ||
      !take(n.binary<DivOp>(centered, root), normed) ||
      !take(scaleAndShift(n, normed, n.input(1), n.input(2)), y))
    return failure();
  n.results.push_back(y);
  // running = input · momentum + batch · (1 - momentum), per channel.
  Value stats[] = {mean, var};
  for (auto [i, batch] : llvm::enumerate(stats)) {
    if (!n.hasOutput(i + 1))
      continue;
    Value flat, kept, moved, running;
    if (!take(n.reshape(batch, {channels}), flat) ||
        !take(n.binary<MulOp>(n.input(3 + i), n.scalar(t, momentum)), kept) ||
        !take(n.binary<MulOp>(flat, n.scalar(t, 1 - momentum)), moved) ||
        !take(n.binary<AddOp>(kept, moved), running))
      return failure();
    n.results.push_back(running);
  }
  return success();
}

/// ArgMax and ArgMin: the first (or last) index whose element equals the
/// reduction's extreme.
Converter argExtreme(ReduceKind extreme) {
  return [extreme](NodeContext &n) -> LogicalResult {
    Value x = n.input(0);
    auto type = n.inputType(0);
    int64_t rank = type.getRank();
    int64_t axis = n.intAttr("axis", 0);
    if (axis < -rank || axis >= rank)
      return n.fail("axis " + Twine(axis) + " is out of range for rank " +
                    Twine(rank));
    if (axis < 0)
      axis += rank;
    int64_t d = type.getDimSize(axis);
    bool last = n.intAttr("select_last_index", 0);
    SmallVector<int64_t> iotaShape(rank, 1);
    iotaShape[axis] = d;
    SmallVector<int64_t> idx;
    for (int64_t j = 0; j < d; ++j)
      idx.push_back(j);
    Type i64 = n.builder.getI64Type();
    Value iota = n.constant(DenseElementsAttr::get(
        RankedTensorType::get(iotaShape, i64), ArrayRef<int64_t>(idx)));
    Value m, hit, candidates, found;
    if (!take(n.reduce(extreme, x, {axis}, true), m) ||
        !take(n.compare(ComparePredicate::eq, x, m), hit) ||
        !take(n.select(hit, iota, n.scalar(i64, last ? -1 : d)),
              candidates) ||
        !take(n.reduce(last ? ReduceKind::max : ReduceKind::min, candidates,
                       {axis}, n.intAttr("keepdims", 1)),
              found))
      return failure();
    n.results.push_back(found);
    return success();
  };
}

} // namespace

void mlir::tfm::onnx_import::populateNormalizationConverters(Registry &r) {
  r.onOp("BatchNormalization", 9, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0);
    if (failed(n.requireFloat(x)))
      return failure();
    if (n.intAttr("training_mode", 0) || n.hasOutput(1) || n.hasOutput(2))
      return batchNormTraining(n);
    int64_t rank = n.inputType(0).getRank();
    // (x - mean) · scale / sqrt(var + eps) + bias, the constants folded.
    Type t = getElementTypeOrSelf(x.getType());
    Value mean, var, shifted, root, gain, centered, scaled, bias;
    if (!take(perChannel(n, n.input(3), rank), mean) ||
        !take(perChannel(n, n.input(4), rank), var) ||
        !take(n.binary<AddOp>(var, n.scalar(t, n.floatAttr("epsilon", 1e-5f))),
              shifted) ||
        !take(n.floatUnary<math::SqrtOp>(shifted), root) ||
        !take(perChannel(n, n.input(1), rank), gain) ||
        !take(n.binary<DivOp>(gain, root), gain) ||
        !take(n.binary<SubOp>(x, mean), centered) ||
        !take(n.binary<MulOp>(centered, gain), scaled) ||
        !take(perChannel(n, n.input(2), rank), bias))
      return failure();
    return n.push(n.binary<AddOp>(scaled, bias));
  });
  r.onOp("InstanceNormalization", 6, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0), normed;
    if (failed(n.requireFloat(x)))
      return failure();
    int64_t rank = n.inputType(0).getRank();
    SmallVector<int64_t> axes;
    for (int64_t a = 2; a < rank; ++a)
      axes.push_back(a);
    if (axes.empty())
      return n.fail("InstanceNormalization needs an input of rank 3 or more");
    if (!take(standardize(n, x, axes, n.floatAttr("epsilon", 1e-5f)), normed))
      return failure();
    return n.push(scaleAndShift(n, normed, n.input(1), n.input(2)));
  });
  r.onOp("GroupNormalization", 18, [](NodeContext &n) -> LogicalResult {
    Value x = n.input(0);
    if (failed(n.requireFloat(x)))
      return failure();
    auto type = n.inputType(0);
    int64_t groups = n.intAttr("num_groups", 0);
    if (type.getRank() < 2 || groups <= 0 ||
        type.getDimSize(1) % groups != 0)
      return n.fail("GroupNormalization needs num_groups dividing the " +
                    Twine("channels of an input of rank 2 or more"));
    int64_t channels = type.getDimSize(1);
    Value grouped, normed, back;
    if (!take(n.reshape(x, {type.getDimSize(0), groups,
                            type.getNumElements() /
                                (type.getDimSize(0) * groups)}),
              grouped) ||
        !take(standardize(n, grouped, {2}, n.floatAttr("epsilon", 1e-5f)),
              normed) ||
        !take(n.reshape(normed, type.getShape()), back))
      return failure();
    // Opset 21 scales per channel; 18 per group, which is the same as each
    // group's scale repeated over its channels.
    Value scale = n.input(1), bias = n.input(2);
    auto scaleLen = cast<RankedTensorType>(scale.getType()).getDimSize(0);
    if (scaleLen == groups && groups != channels) {
      Value s2, b2;
      SmallVector<int64_t> shape = {groups, channels / groups};
      if (!take(n.reshape(scale, {groups, 1}), s2) ||
          !take(n.broadcast(s2, shape), s2) ||
          !take(n.reshape(s2, {channels}), scale) ||
          !take(n.reshape(bias, {groups, 1}), b2) ||
          !take(n.broadcast(b2, shape), b2) ||
          !take(n.reshape(b2, {channels}), bias))
        return failure();
    }
    return n.push(scaleAndShift(n, back, scale, bias));
  });
  r.onOp("ArgMax", 11, argExtreme(ReduceKind::max));
  r.onOp("ArgMin", 11, argExtreme(ReduceKind::min));
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
