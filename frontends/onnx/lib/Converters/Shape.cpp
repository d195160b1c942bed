//===- Shape.cpp - ONNX shape, data-movement and constant ops -------------===//
//
// Shapes are static, so every shape input (Reshape's shape, Slice's starts,
// Expand's shape, ...) must be a constant by the time its node converts.
// Shape itself produces a constant, and the constant folding after each node
// turns Shape -> Gather -> Unsqueeze -> Concat chains into constants too.
//
//===----------------------------------------------------------------------===//

#include "../ImporterImpl.h"

#include "llvm/Support/MathExtras.h"

#include <numeric>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

namespace {

Value i64Constant(NodeContext &n, ArrayRef<int64_t> values,
                  ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, n.builder.getI64Type());
  return n.constant(DenseElementsAttr::get(type, values));
}

/// Normalizes `axis` against `rank`, reporting a bad one at the node.
FailureOr<int64_t> axisIn(NodeContext &n, int64_t axis, int64_t rank,
                          StringRef what) {
  if (axis < -rank || axis >= rank)
    return n.fail(n.node.op_type() + " " + what + " " + Twine(axis) +
                  " is out of range for rank " + Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

LogicalResult convertReshape(NodeContext &n) {
  auto target = n.constantInts(1, "shape");
  if (failed(target))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  bool allowZero = n.intAttr("allowzero", 0);
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return n.fail("Reshape copies dimension " + Twine(i) +
                      " of an input of rank " + Twine(in.size()));
      d = in[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return n.fail("Reshape's shape has more than one -1");
      inferred = i;
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return n.fail("Reshape's shape has the invalid size " + Twine(d));
    shape.push_back(d);
    if (llvm::MulOverflow(known, d, known))
      return n.fail("Reshape's shape has more elements than a tensor can "
                    "hold");
  }
  int64_t total = n.inputType(0).getNumElements();
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return n.fail("Reshape cannot infer the -1 dimension: " + Twine(total) +
                    " elements do not divide by " + Twine(known));
    shape[inferred] = total / known;
  }
  return n.push(n.reshape(n.input(0), shape));
}

LogicalResult convertFlatten(NodeContext &n) {
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  int64_t rank = in.size();
  int64_t axis = n.intAttr("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return n.fail("Flatten axis out of range");
  int64_t outer = std::accumulate(in.begin(), in.begin() + axis, int64_t(1),
                                  std::multiplies<int64_t>());
  int64_t inner = std::accumulate(in.begin() + axis, in.end(), int64_t(1),
                                  std::multiplies<int64_t>());
  return n.push(n.reshape(n.input(0), {outer, inner}));
}

LogicalResult convertSqueeze(NodeContext &n) {
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  SmallVector<bool> drop(in.size(), false);
  if (n.input(1)) {
    auto axes = n.constantInts(1, "axes");
    if (failed(axes))
      return failure();
    for (int64_t a : *axes) {
      auto ax = axisIn(n, a, in.size(), "axis");
      if (failed(ax))
        return failure();
      if (in[*ax] != 1)
        return n.fail("Squeeze axis " + Twine(*ax) + " has size " +
                      Twine(in[*ax]) + ", not 1");
      drop[*ax] = true;
    }
  } else {
    for (auto [i, d] : llvm::enumerate(in))
      drop[i] = d == 1;
  }
  SmallVector<int64_t> shape;
  for (auto [i, d] : llvm::enumerate(in))
    if (!drop[i])
      shape.push_back(d);
  return n.push(n.reshape(n.input(0), shape));
}

LogicalResult convertUnsqueeze(NodeContext &n) {
  auto axes = n.constantInts(1, "axes");
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  int64_t rank = in.size() + axes->size();
  SmallVector<bool> inserted(rank, false);
  for (int64_t a : *axes) {
    auto ax = axisIn(n, a, rank, "axis");
    if (failed(ax))
      return failure();
    if (inserted[*ax])
      return n.fail("Unsqueeze names axis " + Twine(*ax) + " twice");
    inserted[*ax] = true;
  }
  SmallVector<int64_t> shape;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(inserted[i] ? 1 : in[next++]);
  return n.push(n.reshape(n.input(0), shape));
}

LogicalResult convertSplit(NodeContext &n) {
  auto type = n.inputType(0);
  auto axis = axisIn(n, n.intAttr("axis", 0), type.getRank(), "axis");
  if (failed(axis))
    return failure();
  SmallVector<int64_t> sizes;
  int64_t dim = type.getDimSize(*axis);
  if (n.input(1)) {
    auto given = n.constantInts(1, "split");
    if (failed(given))
      return failure();
    sizes = *given;
  } else if (auto attr = n.intsAttr("split")) {
    sizes = *attr;
  } else {
    int64_t parts = n.intAttr("num_outputs", n.node.output_size());
    if (parts != n.node.output_size())
      return n.fail("Split's num_outputs is " + Twine(parts) +
                    " but the node has " + Twine(n.node.output_size()) +
                    " outputs");
    int64_t each = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::min(each, dim - i * each));
  }
  auto parts = n.split(n.input(0), *axis, sizes);
  if (failed(parts))
    return failure();
  n.results.append(parts->begin(), parts->end());
  return success();
}

LogicalResult convertSlice(NodeContext &n) {
  auto type = n.inputType(0);
  int64_t rank = type.getRank();
  auto starts = n.constantInts(1, "starts");
  auto ends = n.constantInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (n.input(3)) {
    auto a = n.constantInts(3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (n.input(4)) {
    auto s = n.constantInts(4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (axes.size() != starts->size() || ends->size() != starts->size() ||
      steps.size() != starts->size())
    return n.fail("Slice's starts, ends, axes and steps differ in length");
  SmallVector<int64_t> outStarts(rank, 0), sizes(type.getShape()),
      outSteps(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto ax = axisIn(n, axes[i], rank, "axis");
    if (failed(ax))
      return failure();
    int64_t dim = type.getDimSize(*ax), step = steps[i];
    if (step == 0)
      return n.fail("Slice step is 0");
    // Clamp as the ONNX specification does; the huge sentinels exporters
    // use for "to the end" land on the bounds.
    auto clamp = [](int64_t v, int64_t lo, int64_t hi) {
      return std::max(lo, std::min(hi, v));
    };
    int64_t start = (*starts)[i], end = (*ends)[i];
    // An end past the axis that is a real length, not a "to the end"
    // sentinel, is a size the model was not built for (a causal mask or a
    // position table cut to a --shape larger than they hold): the shape
    // errors that follow name another node, so say it here.
    if (step > 0 && end > dim && end <= (int64_t(1) << 30))
      emitWarning(n.loc) << "it asks for " << end << " elements along axis "
                         << *ax << " of a tensor that holds " << dim
                         << ": the model holds no more there (is a --shape "
                            "larger than it takes?)";
    if (start < 0)
      start = start < -dim ? -1 : start + dim;
    if (end < 0)
      end = end < -dim ? -1 : end + dim;
    // Counted so that no step overflows, however large (a fuzzed model's
    // INT64_MAX, or INT64_MIN, whose negation is no int64).
    int64_t size;
    if (step > 0) {
      start = clamp(start, 0, dim);
      end = clamp(end, 0, dim);
      size = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = clamp(start, -1, dim - 1);
      end = clamp(end, -1, dim - 1);
      const uint64_t stride = uint64_t(0) - static_cast<uint64_t>(step);
      size = start > end ? static_cast<int64_t>(
                               static_cast<uint64_t>(start - end - 1) / stride) +
                               1
                         : 0;
    }
    outStarts[*ax] = size ? start : 0;
    sizes[*ax] = size;
    outSteps[*ax] = step;
  }
  return n.push(n.slice(n.input(0), outStarts, sizes, outSteps));
}

LogicalResult convertGather(NodeContext &n) {
  auto type = n.inputType(0);
  int64_t axis = n.intAttr("axis", 0);
  // A 2-D float table indexed along rows by a run-time tensor is an
  // embedding lookup; say so, for the passes and kernels that care.
  if (axis == 0 && type.getRank() == 2 && isa<FloatType>(type.getElementType()) &&
      n.constantAttr(0) && !n.constantAttr(1)) {
    Value table = n.input(0), ids = n.input(1);
    auto t = inferEmbeddingType(n.diag(EmbeddingOp::getOperationName()),
                                table.getType(), ids.getType());
    if (failed(t))
      return failure();
    n.results.push_back(n.builder.create<EmbeddingOp>(n.loc, *t, table, ids));
    return success();
  }
  return n.push(n.gather(n.input(0), n.input(1), axis));
}

LogicalResult convertScatterND(NodeContext &n) {
  std::string name = n.stringAttr("reduction", "none");
  auto reduction = symbolizeScatterReduction(name);
  if (!reduction)
    return n.fail("ScatterND reduction '" + name +
                  "' is not one of none, add, mul, max, min");
  Value data = n.input(0), indices = n.input(1), updates = n.input(2);
  auto t = inferScatterNDType(n.diag(ScatterNDOp::getOperationName()),
                              data.getType(), indices.getType(),
                              updates.getType());
  if (failed(t))
    return failure();
  n.results.push_back(n.builder.create<ScatterNDOp>(n.loc, *t, data, indices,
                                                     updates, *reduction));
  return success();
}

LogicalResult convertTopK(NodeContext &n) {
  auto k = n.constantInts(1, "K");
  if (failed(k))
    return failure();
  if (k->size() != 1)
    return n.fail("TopK's K must hold one value");
  int64_t axis = n.intAttr("axis", -1);
  SmallVector<Type> types;
  if (failed(inferTopKTypes(n.diag(TopKOp::getOperationName()),
                            n.input(0).getType(), (*k)[0], axis, types)))
    return failure();
  // `sorted = 0` leaves the order free; the sorted order is one of them.
  auto op = n.builder.create<TopKOp>(n.loc, types, n.input(0), (*k)[0], axis,
                                     !n.intAttr("largest", 1));
  n.results.push_back(op.getValues());
  n.results.push_back(op.getIndices());
  return success();
}

LogicalResult convertExpand(NodeContext &n) {
  auto target = n.constantInts(1, "shape");
  if (failed(target))
    return failure();
  ArrayRef<int64_t> in = n.inputType(0).getShape();
  // Expand broadcasts both ways: the output is the broadcast of the two.
  size_t rank = std::max(in.size(), target->size());
  SmallVector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - in.size() ? 1 : in[i - (rank - in.size())];
    int64_t b = i < rank - target->size()
                    ? 1
                    : (*target)[i - (rank - target->size())];
    if (a != b && a != 1 && b != 1)
      return n.fail("Expand cannot broadcast dimension " + Twine(i) +
                    " of size " + Twine(a) + " to " + Twine(b));
    shape[i] = a == 1 ? b : a;
  }
  return n.push(n.broadcast(n.input(0), shape));
}

LogicalResult convertShape(NodeContext &n) {
  ArrayRef<int64_t> dims = n.inputType(0).getShape();
  int64_t rank = dims.size();
  int64_t start = n.intAttr("start", 0), end = n.intAttr("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  SmallVector<int64_t> values(dims.begin() + start, dims.begin() + end);
  n.results.push_back(
      i64Constant(n, values, {static_cast<int64_t>(values.size())}));
  return success();
}

LogicalResult convertSize(NodeContext &n) {
  n.results.push_back(i64Constant(n, {n.inputType(0).getNumElements()}, {}));
  return success();
}

LogicalResult convertConstant(NodeContext &n) {
  MLIRContext *ctx = n.builder.getContext();
  Builder b(ctx);
  if (const onnx::AttributeProto *a = n.attr("value")) {
    std::string error;
    DenseElementsAttr attr = tensorToAttr(ctx, a->t(), error, n.externalData);
    if (!attr)
      return n.fail("Constant: " + error);
    n.results.push_back(n.constant(attr));
    return success();
  }
  if (const onnx::AttributeProto *a = n.attr("value_float")) {
    n.results.push_back(n.scalar(b.getF32Type(), a->f()));
    return success();
  }
  if (const onnx::AttributeProto *a = n.attr("value_int")) {
    n.results.push_back(n.scalar(b.getI64Type(), a->i()));
    return success();
  }
  if (const onnx::AttributeProto *a = n.attr("value_floats")) {
    SmallVector<float> v(a->floats().begin(), a->floats().end());
    auto type = RankedTensorType::get({static_cast<int64_t>(v.size())},
                                      b.getF32Type());
    n.results.push_back(n.constant(DenseElementsAttr::get(type, ArrayRef(v))));
    return success();
  }
  if (const onnx::AttributeProto *a = n.attr("value_ints")) {
    SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
    n.results.push_back(i64Constant(n, v, {static_cast<int64_t>(v.size())}));
    return success();
  }
  return n.fail("Constant without a supported value attribute (sparse and "
                "string constants are not supported)");
}

LogicalResult convertConstantOfShape(NodeContext &n) {
  auto shape = n.constantInts(0, "input");
  if (failed(shape))
    return failure();
  MLIRContext *ctx = n.builder.getContext();
  DenseElementsAttr value;
  if (const onnx::AttributeProto *a = n.attr("value")) {
    std::string error;
    value = tensorToAttr(ctx, a->t(), error, n.externalData);
    if (!value)
      return n.fail("ConstantOfShape: " + error);
    if (value.getNumElements() != 1)
      return n.fail("ConstantOfShape's value must hold one element");
  } else {
    value = DenseElementsAttr::get(
        RankedTensorType::get({1}, n.builder.getF32Type()), 0.0f);
  }
  auto type = RankedTensorType::get(*shape, value.getElementType());
  n.results.push_back(
      n.constant(DenseElementsAttr::get(type, value.getValues<Attribute>()[0])));
  return success();
}

LogicalResult convertTrilu(NodeContext &n) {
  auto type = n.inputType(0);
  if (type.getRank() < 2)
    return n.fail("Trilu needs a tensor of rank >= 2");
  int64_t k = 0;
  if (n.input(1)) {
    auto given = n.constantInts(1, "k");
    if (failed(given))
      return failure();
    k = given->front();
  }
  bool upper = n.intAttr("upper", 1);
  int64_t rows = type.getDimSize(type.getRank() - 2),
          cols = type.getDimSize(type.getRank() - 1);
  SmallVector<bool> keep;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      keep.push_back(upper ? j - i >= k : j - i <= k);
  Value mask = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({rows, cols}, n.builder.getI1Type()), keep));
  Value zero = n.scalar(type.getElementType(), 0);
  return n.push(n.select(mask, n.input(0), zero));
}

LogicalResult convertRange(NodeContext &n) {
  DenseElementsAttr start = n.constantAttr(0), limit = n.constantAttr(1),
                    delta = n.constantAttr(2);
  if (!start || !limit || !delta)
    return n.fail("Range's start, limit and delta must be constants");
  Type elt = start.getElementType();
  auto read = [](DenseElementsAttr a) {
    if (isa<FloatType>(a.getElementType()))
      return a.getSplatValue<APFloat>().convertToDouble();
    return static_cast<double>(a.getSplatValue<APInt>().getSExtValue());
  };
  double s = read(start), l = read(limit), d = read(delta);
  if (d == 0)
    return n.fail("Range's delta is 0");
  int64_t count = std::max<int64_t>(0, std::ceil((l - s) / d));
  if (count > (int64_t(1) << 24))
    return n.fail("Range of " + Twine(count) + " elements is too large");
  auto type = RankedTensorType::get({count}, elt);
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> values;
    for (int64_t i = 0; i < count; ++i) {
      APFloat v(s + i * d);
      bool lost;
      v.convert(ft.getFloatSemantics(), llvm::RoundingMode::NearestTiesToEven,
                &lost);
      values.push_back(v);
    }
    n.results.push_back(n.constant(DenseElementsAttr::get(type, values)));
    return success();
  }
  SmallVector<APInt> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(APInt(elt.getIntOrFloatBitWidth(),
                           static_cast<int64_t>(s + i * d), true));
  n.results.push_back(n.constant(DenseElementsAttr::get(type, values)));
  return success();
}

/// The elements of `x` at positions `idx` along `axis`: a Gather with
/// constant indices, which expresses Pad's reflect and edge modes and Tile.
FailureOr<Value> takeAlong(NodeContext &n, Value x, int64_t axis,
                           ArrayRef<int64_t> idx) {
  return n.gather(x, i64Constant(n, idx, {static_cast<int64_t>(idx.size())}),
                  axis);
}

/// `size` elements of `x` from `start` along `axis`.
FailureOr<Value> sliceAlong(NodeContext &n, Value x, int64_t axis,
                            int64_t start, int64_t size) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> starts(type.getRank(), 0), sizes(type.getShape()),
      steps(type.getRank(), 1);
  starts[axis] = start;
  sizes[axis] = size;
  return n.slice(x, starts, sizes, steps);
}

/// Pad: per axis, crop negative pads, then add constant blocks (constant
/// mode) or gather the reflected, edge or wrapped elements.
LogicalResult convertPad(NodeContext &n) {
  Value x = n.input(0);
  auto type = n.inputType(0);
  int64_t rank = type.getRank();
  auto pads = n.constantInts(1, "pads");
  if (failed(pads))
    return failure();
  SmallVector<int64_t> axes;
  if (n.input(3)) {
    auto given = n.constantInts(3, "axes");
    if (failed(given))
      return failure();
    for (int64_t a : *given) {
      auto ax = axisIn(n, a, rank, "axis");
      if (failed(ax))
        return failure();
      axes.push_back(*ax);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  int64_t k = axes.size();
  if (static_cast<int64_t>(pads->size()) != 2 * k)
    return n.fail("Pad's pads has " + Twine(pads->size()) +
                  " values; it needs 2 per padded axis (" + Twine(2 * k) +
                  ")");
  std::string mode = n.stringAttr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      mode != "wrap")
    return n.fail("Pad's mode '" + mode + "' is not one of constant, "
                  "reflect, edge and wrap");
  Value fill = n.input(2);
  if (!fill)
    fill = n.scalar(type.getElementType(), 0);
  for (int64_t i = 0; i < k; ++i) {
    int64_t axis = axes[i], before = (*pads)[i], after = (*pads)[i + k];
    int64_t d = cast<RankedTensorType>(x.getType()).getDimSize(axis);
    if (before < 0 || after < 0) {
      int64_t from = std::max<int64_t>(0, -before);
      int64_t size = d - from - std::max<int64_t>(0, -after);
      if (size < 0)
        return n.fail("Pad crops more than axis " + Twine(axis) + " holds");
      if (!take(sliceAlong(n, x, axis, from, size), x))
        return failure();
      d = size;
      before = std::max<int64_t>(0, before);
      after = std::max<int64_t>(0, after);
    }
    if (before == 0 && after == 0)
      continue;
    if (mode == "constant") {
      if (!take(n.padAlong(x, axis, before, after, fill), x))
        return failure();
      continue;
    }
    if (d == 0 || (mode == "reflect" && (before >= d || after >= d)))
      return n.fail("Pad in " + mode + " mode needs axis " + Twine(axis) +
                    " longer than its pads");
    SmallVector<int64_t> idx;
    for (int64_t j = -before; j < d + after; ++j) {
      if (mode == "edge")
        idx.push_back(std::clamp<int64_t>(j, 0, d - 1));
      else if (mode == "wrap")
        idx.push_back(((j % d) + d) % d);
      else
        idx.push_back(j < 0 ? -j : j >= d ? 2 * (d - 1) - j : j);
    }
    if (!take(takeAlong(n, x, axis, idx), x))
      return failure();
  }
  n.results.push_back(x);
  return success();
}

LogicalResult convertTile(NodeContext &n) {
  auto repeats = n.constantInts(1, "repeats");
  if (failed(repeats))
    return failure();
  Value x = n.input(0);
  auto type = n.inputType(0);
  if (static_cast<int64_t>(repeats->size()) != type.getRank())
    return n.fail("Tile's repeats has " + Twine(repeats->size()) +
                  " values for an input of rank " + Twine(type.getRank()));
  for (auto [axis, r] : llvm::enumerate(*repeats)) {
    if (r < 0)
      return n.fail("Tile's repeat " + Twine(r) + " is negative");
    if (r == 1)
      continue;
    int64_t d = type.getDimSize(axis);
    SmallVector<int64_t> idx;
    for (int64_t j = 0; j < d * r; ++j)
      idx.push_back(j % d);
    if (!take(takeAlong(n, x, axis, idx), x))
      return failure();
  }
  n.results.push_back(x);
  return success();
}

/// CumSum as log2(n) shifted additions (Hillis-Steele), exact for integers
/// as well as floats; reverse runs it on the reversed axis.
LogicalResult convertCumSum(NodeContext &n) {
  auto axisValue = n.constantInts(1, "axis");
  if (failed(axisValue))
    return failure();
  if (axisValue->size() != 1)
    return n.fail("CumSum's axis must hold one value");
  int64_t rank = n.inputType(0).getRank();
  auto axis = axisIn(n, (*axisValue)[0], rank, "axis");
  if (failed(axis))
    return failure();
  Value y = n.input(0);
  int64_t d = n.inputType(0).getDimSize(*axis);
  SmallVector<int64_t> reversed;
  for (int64_t j = d - 1; j >= 0; --j)
    reversed.push_back(j);
  bool reverse = n.intAttr("reverse", 0);
  if (reverse && !take(takeAlong(n, y, *axis, reversed), y))
    return failure();
  Value zero = n.scalar(n.inputType(0).getElementType(), 0);
  // y shifted by k along the axis, zeros coming in.
  auto shifted = [&](Value v, int64_t k) -> FailureOr<Value> {
    Value head, tail;
    if (!take(n.fillAlong(v, *axis, k, zero), head) ||
        !take(sliceAlong(n, v, *axis, 0, d - k), tail))
      return failure();
    return n.concat({head, tail}, *axis);
  };
  if (n.intAttr("exclusive", 0) && d > 0 && !take(shifted(y, 1), y))
    return failure();
  for (int64_t k = 1; k < d; k *= 2) {
    Value s;
    if (!take(shifted(y, k), s) || !take(n.binary<AddOp>(y, s), y))
      return failure();
  }
  if (reverse && !take(takeAlong(n, y, *axis, reversed), y))
    return failure();
  n.results.push_back(y);
  return success();
}

} // namespace

void mlir::tfm::onnx_import::populateShapeConverters(Registry &r) {
  r.onOp("Pad", 11, convertPad);
  r.onOp("Tile", 6, convertTile);
  r.onOp("CumSum", 11, convertCumSum);
  r.onOp("Transpose", 1, [](NodeContext &n) {
    SmallVector<int64_t> perm;
    if (auto p = n.intsAttr("perm"))
      perm = *p;
    else
      for (int64_t i = n.inputType(0).getRank() - 1; i >= 0; --i)
        perm.push_back(i);
    return n.push(n.transpose(n.input(0), perm));
  });
  r.onOp("Reshape", 1, convertReshape);
  r.onOp("Flatten", 1, convertFlatten);
  r.onOp("Squeeze", 13, convertSqueeze);
  r.onOp("Unsqueeze", 13, convertUnsqueeze);
  r.onOp("Concat", 1, [](NodeContext &n) {
    SmallVector<Value> inputs;
    for (unsigned i = 0; i < n.numInputs(); ++i)
      if (n.input(i))
        inputs.push_back(n.input(i));
    return n.push(n.concat(inputs, n.intAttr("axis", 0)));
  });
  r.onOp("Split", 13, convertSplit);
  r.onOp("Slice", 1, convertSlice);
  r.onOp("Gather", 1, convertGather);
  r.onOp("ScatterND", 11, convertScatterND);
  r.onOp("TopK", 10, convertTopK);
  r.onOp("Expand", 1, convertExpand);
  r.onOp("Shape", 1, convertShape);
  r.onOp("Size", 1, convertSize);
  r.onOp("Constant", 1, convertConstant);
  r.onOp("ConstantOfShape", 1, convertConstantOfShape);
  r.onOp("Trilu", 14, convertTrilu);
  r.onOp("Range", 1, convertRange);
}
