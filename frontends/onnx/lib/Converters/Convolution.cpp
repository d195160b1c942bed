//===- Convolution.cpp - ONNX Conv, AveragePool and MaxPool ---------------===//
//
// Both become tfm.conv2d, which holds 2-D convolutions; a 1-D one (speech
// front ends, Conformer's convolution module) is a 2-D one of height 1, and
// a 3-D one (a video model's tubelet embedding) a sum of 2-D ones over the
// kernel's depth for each output depth.
// AveragePool is a depthwise convolution with a constant kernel, divided by
// how many elements each window covers, which is known when compiling.
// MaxPool gathers each window's elements and takes their max.
//
//===----------------------------------------------------------------------===//

#include "../ImporterImpl.h"

#include <limits>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

namespace {

/// The geometry of a convolution or pooling window over r (1 to 3) spatial
/// axes, from the node's attributes.
struct Window {
  SmallVector<int64_t> kernel, strides, dilations, padBegin, padEnd;
};

/// Reads strides, dilations, pads and auto_pad for `kernel` over `spatial`.
FailureOr<Window> readWindow(NodeContext &n, ArrayRef<int64_t> spatial,
                             ArrayRef<int64_t> kernel) {
  size_t r = spatial.size();
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  auto ints = [&](StringRef name, size_t count,
                  int64_t dflt) -> FailureOr<SmallVector<int64_t>> {
    auto v = n.intsAttr(name);
    if (!v)
      return SmallVector<int64_t>(count, dflt);
    if (v->size() != count)
      return n.fail(n.node.op_type() + "'s " + name + " has " +
                    Twine(v->size()) + " values; it needs " + Twine(count));
    return *v;
  };
  auto strides = ints("strides", r, 1), dilations = ints("dilations", r, 1),
       pads = ints("pads", 2 * r, 0);
  if (failed(strides) || failed(dilations) || failed(pads))
    return failure();
  w.strides = *strides;
  w.dilations = *dilations;
  for (size_t i = 0; i < r; ++i) {
    if (w.strides[i] < 1 || w.dilations[i] < 1 || w.kernel[i] < 1)
      return n.fail(n.node.op_type() +
                    "'s kernel, strides and dilations must be positive");
    w.padBegin.push_back((*pads)[i]);
    w.padEnd.push_back((*pads)[r + i]);
  }
  std::string autoPad = n.stringAttr("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    w.padBegin.assign(r, 0);
    w.padEnd.assign(r, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < r; ++i) {
      int64_t out = (spatial[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(
          0, (out - 1) * w.strides[i] +
                 (w.kernel[i] - 1) * w.dilations[i] + 1 - spatial[i]);
      int64_t small = total / 2;
      w.padBegin[i] = autoPad == "SAME_UPPER" ? small : total - small;
      w.padEnd[i] = total - w.padBegin[i];
    }
  } else if (autoPad != "NOTSET") {
    return n.fail(n.node.op_type() + "'s auto_pad '" + autoPad +
                  "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  for (size_t i = 0; i < r; ++i)
    if (w.padBegin[i] < 0 || w.padEnd[i] < 0)
      return n.fail(n.node.op_type() + "'s pads must not be negative");
  return w;
}

/// The output size of a pooling window along spatial axis `i`: floor, or
/// with ceil_mode ceiling, but a window may not start in the end padding
/// (as ONNX Runtime and PyTorch do). Fails when the window does not fit.
FailureOr<int64_t> pooledSize(NodeContext &n, const Window &w,
                              ArrayRef<int64_t> spatial, int64_t i,
                              bool ceilMode) {
  int64_t extent = spatial[i] + w.padBegin[i] + w.padEnd[i];
  int64_t window = (w.kernel[i] - 1) * w.dilations[i] + 1;
  if (extent < window)
    return n.fail(n.node.op_type() +
                  "'s window is larger than its padded input");
  int64_t span = extent - window, s = w.strides[i];
  int64_t out = (ceilMode ? (span + s - 1) / s : span / s) + 1;
  if (ceilMode && (out - 1) * s >= spatial[i] + w.padBegin[i])
    --out;
  return out;
}

/// `v` with a unit axis inserted at `axis`.
FailureOr<Value> withUnitAxis(NodeContext &n, Value v, int64_t axis) {
  SmallVector<int64_t> shape(cast<RankedTensorType>(v.getType()).getShape());
  shape.insert(shape.begin() + axis, 1);
  return n.reshape(v, shape);
}

/// tfm.conv2d over 1 or 2 spatial axes: a 1-D window gains a unit height.
FailureOr<Value> conv(NodeContext &n, Value x, Value w, Value bias,
                      const Window &win, int64_t group) {
  bool oneD = win.kernel.size() == 1;
  if (oneD && (!take(withUnitAxis(n, x, 2), x) ||
               !take(withUnitAxis(n, w, 2), w)))
    return failure();
  auto pick = [&](ArrayRef<int64_t> v, int64_t unit) {
    return oneD ? SmallVector<int64_t>{unit, v[0]}
                : SmallVector<int64_t>(v.begin(), v.end());
  };
  SmallVector<int64_t> strides = pick(win.strides, 1),
                       dilations = pick(win.dilations, 1),
                       begin = pick(win.padBegin, 0), end = pick(win.padEnd, 0);
  SmallVector<int64_t> pads = {begin[0], begin[1], end[0], end[1]};
  auto type = inferConv2DType(n.diag(Conv2DOp::getOperationName()),
                              x.getType(), w.getType(),
                              bias ? bias.getType() : Type(), strides, pads,
                              dilations, group);
  if (failed(type))
    return failure();
  Value y = n.builder.create<Conv2DOp>(
      n.loc, *type, x, w, bias, n.builder.getDenseI64ArrayAttr(strides),
      n.builder.getDenseI64ArrayAttr(pads),
      n.builder.getDenseI64ArrayAttr(dilations),
      n.builder.getI64IntegerAttr(group));
  if (!oneD)
    return y;
  auto shape = cast<RankedTensorType>(y.getType()).getShape();
  return n.reshape(y, {shape[0], shape[1], shape[3]});
}

/// A convolution over 3 spatial axes as 2-D ones: output depth `od` is
/// Σ_kd conv2d(x[:, :, od·sd + kd·dd - pd], w[:, :, kd]) over the input
/// padded with zeros along depth. OD·KD 2-D convolutions, which suits the
/// short depths of video clips; the count is bounded.
FailureOr<Value> conv3d(NodeContext &n, Value x, Value w, Value bias,
                        const Window &win, int64_t group) {
  constexpr int64_t kMaxSlices = 4096;
  auto xt = cast<RankedTensorType>(x.getType());
  Window plane;
  for (auto field : {&Window::kernel, &Window::strides, &Window::dilations,
                      &Window::padBegin, &Window::padEnd})
    (plane.*field).assign((win.*field).begin() + 1, (win.*field).end());
  int64_t kd = win.kernel[0], sd = win.strides[0], dd = win.dilations[0];
  Value padded;
  if (!take(n.padAlong(x, 2, win.padBegin[0], win.padEnd[0],
                       n.scalar(xt.getElementType(), 0)),
            padded))
    return failure();
  int64_t depth = cast<RankedTensorType>(padded.getType()).getDimSize(2);
  int64_t span = depth - dd * (kd - 1) - 1;
  if (span < 0)
    return n.fail(n.node.op_type() + "'s window is deeper than its padded "
                                     "input");
  int64_t outDepth = span / sd + 1;
  if (outDepth * kd > kMaxSlices)
    return n.fail(n.node.op_type() + " over 3 spatial axes needs " +
                  Twine(outDepth * kd) + " 2-D convolutions; at most " +
                  Twine(kMaxSlices) + " are built");
  // One depth of a 5-D tensor as a 4-D one.
  auto at = [&](Value v, int64_t d) -> FailureOr<Value> {
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> starts(5, 0), sizes(t.getShape()), steps(5, 1);
    starts[2] = d;
    sizes[2] = 1;
    Value s;
    if (!take(n.slice(v, starts, sizes, steps), s))
      return failure();
    return n.reshape(s, {sizes[0], sizes[1], sizes[3], sizes[4]});
  };
  SmallVector<Value> kernels;
  for (int64_t k = 0; k < kd; ++k) {
    Value slice;
    if (!take(at(w, k), slice))
      return failure();
    kernels.push_back(slice);
  }
  SmallVector<Value> depths;
  for (int64_t o = 0; o < outDepth; ++o) {
    Value acc;
    for (int64_t k = 0; k < kd; ++k) {
      Value in, y;
      if (!take(at(padded, o * sd + k * dd), in) ||
          !take(conv(n, in, kernels[k], k == 0 ? bias : Value(), plane, group),
                y) ||
          (acc && !take(n.binary<AddOp>(acc, y), y)))
        return failure();
      acc = y;
    }
    auto shape = cast<RankedTensorType>(acc.getType()).getShape();
    if (!take(n.reshape(acc, {shape[0], shape[1], 1, shape[2], shape[3]}), acc))
      return failure();
    depths.push_back(acc);
  }
  return depths.size() == 1 ? FailureOr<Value>(depths[0])
                            : n.concat(depths, 2);
}

/// tfm.conv2d over 1 to 3 spatial axes.
FailureOr<Value> convAnyRank(NodeContext &n, Value x, Value w, Value bias,
                             const Window &win, int64_t group) {
  return win.kernel.size() == 3 ? conv3d(n, x, w, bias, win, group)
                                : conv(n, x, w, bias, win, group);
}

/// The window of a Conv-like node reading `x` with weight `w`, checked.
FailureOr<Window> convWindow(NodeContext &n, RankedTensorType xt,
                             RankedTensorType wt) {
  const std::string &op = n.node.op_type();
  int64_t r = xt.getRank() - 2;
  if (r < 1 || r > 3)
    return n.fail(op + " over " + Twine(r) +
                  " spatial axes is not supported (1-D, 2-D and 3-D are)");
  if (wt.getRank() != r + 2)
    return n.fail(op + "'s weight has rank " + Twine(wt.getRank()) +
                  "; the input's needs " + Twine(r + 2));
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2));
  if (auto given = n.intsAttr("kernel_shape"); given && *given != kernel)
    return n.fail(op + "'s kernel_shape disagrees with its weight's shape");
  return readWindow(n, xt.getShape().drop_front(2), kernel);
}

LogicalResult convertConv(NodeContext &n) {
  Value x = n.input(0), w = n.input(1);
  if (failed(n.requireFloat(x)))
    return failure();
  auto win = convWindow(n, n.inputType(0), n.inputType(1));
  if (failed(win))
    return failure();
  return n.push(convAnyRank(n, x, w, n.input(2), *win, n.intAttr("group", 1)));
}

/// The integer convolution of ConvInteger and QLinearConv, exact: the
/// operands less their zero points (the input's one value, the weight's
/// one or one per output channel) as f64, whose products and sums of
/// 8-bit differences are exact, padded with 0 (the zero point before the
/// shift), plus the i32 `bias` when given. The result is f64.
FailureOr<Value> integerConv(NodeContext &n, Value x, Value xZp, Value w,
                             Value wZp, Value bias) {
  auto xt = cast<RankedTensorType>(x.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  const std::string &op = n.node.op_type();
  for (auto t : {xt, wt})
    if (!t.getElementType().isInteger(8))
      return n.fail(op + " convolves int8 and uint8, not " +
                    llvm::formatv("{0}", t.getElementType()).str());
  auto win = convWindow(n, xt, wt);
  if (failed(win))
    return failure();
  Type f64 = n.builder.getF64Type();
  auto shifted = [&](Value v, Value zp, bool perChannel) -> FailureOr<Value> {
    Value f, z;
    if (!take(n.castTo(v, f64), f))
      return failure();
    if (!zp)
      return f;
    auto zt = cast<RankedTensorType>(zp.getType());
    if (zt.getElementType() != cast<RankedTensorType>(v.getType()).getElementType())
      return n.fail(op + "'s zero point " + llvm::formatv("{0}", zt).str() +
                    " must have its operand's element type");
    if (zt.getNumElements() == 1 && zt.getRank() <= 1) {
      if (!take(n.reshape(zp, {}), zp))
        return failure();
    } else if (perChannel && zt.getRank() == 1 &&
               zt.getDimSize(0) == wt.getDimSize(0)) {
      SmallVector<int64_t> shape(wt.getRank(), 1);
      shape[0] = wt.getDimSize(0);
      if (!take(n.reshape(zp, shape), zp))
        return failure();
    } else {
      return n.fail(op + "'s zero point " + llvm::formatv("{0}", zt).str() +
                    (perChannel ? " must hold one value or one per output "
                                  "channel"
                                : " must hold one value"));
    }
    if (!take(n.castTo(zp, f64), z))
      return failure();
    return n.binary<SubOp>(f, z);
  };
  Value xf, wf, bf;
  if (!take(shifted(x, xZp, false), xf) || !take(shifted(w, wZp, true), wf) ||
      (bias && !take(n.castTo(bias, f64), bf)))
    return failure();
  return convAnyRank(n, xf, wf, bf, *win, n.intAttr("group", 1));
}

LogicalResult convertConvInteger(NodeContext &n) {
  Value y;
  if (!take(integerConv(n, n.input(0), n.input(2), n.input(1), n.input(3),
                        Value()),
            y))
    return failure();
  return n.push(n.castTo(y, n.builder.getI32Type()));
}

LogicalResult convertQLinearConv(NodeContext &n) {
  // y = saturate(round((conv(x - x_zp, w - w_zp) + B) · x_scale · w_scale
  //     / y_scale) + y_zp), w_scale one or one per output channel.
  Value xs, ws, ys, yz, acc, xw, factor;
  Type f32 = n.builder.getF32Type();
  if (failed(checkScale(n, 1, "x_scale")) ||
      failed(checkScale(n, 4, "w_scale")) ||
      failed(checkScale(n, 6, "y_scale")) ||
      !take(quantizationParameter(n, 1, "x_scale"), xs) ||
      !take(quantizationParameter(n, 4, "w_scale"), ws) ||
      !take(quantizationParameter(n, 6, "y_scale"), ys) ||
      !take(quantizationParameter(n, 7, "y_zero_point"), yz))
    return failure();
  if (n.input(8) && !n.inputType(8).getElementType().isInteger(32))
    return n.fail("QLinearConv's bias must be int32");
  if (!take(integerConv(n, n.input(0), n.input(2), n.input(3), n.input(5),
                        n.input(8)),
            acc))
    return failure();
  auto wsType = cast<RankedTensorType>(ws.getType());
  int64_t rank = cast<RankedTensorType>(acc.getType()).getRank();
  if (wsType.getRank() == 1) {
    // One per output channel: along axis 1 of the result.
    SmallVector<int64_t> shape(rank - 1, 1);
    shape[0] = wsType.getDimSize(0);
    if (!take(n.reshape(ws, shape), ws))
      return failure();
  }
  if (!take(n.castTo(xs, f32), xs) || !take(n.castTo(ws, f32), ws) ||
      !take(n.castTo(ys, f32), ys) || !take(n.binary<MulOp>(xs, ws), xw) ||
      !take(n.binary<DivOp>(xw, ys), factor))
    return failure();
  return n.push(requantize(n, acc, factor, yz));
}

LogicalResult convertAveragePool(NodeContext &n) {
  // Integers too (an 8-bit image): the padding is the type's lowest value.
  Value x = n.input(0);
  auto xt = n.inputType(0);
  int64_t r = xt.getRank() - 2;
  auto kernel = n.intsAttr("kernel_shape");
  if (!kernel || static_cast<int64_t>(kernel->size()) != r || r < 1 || r > 3)
    return n.fail("AveragePool needs a kernel_shape over 1 to 3 spatial axes");
  ArrayRef<int64_t> spatial = xt.getShape().drop_front(2);
  auto win = readWindow(n, spatial, *kernel);
  if (failed(win))
    return failure();
  bool ceilMode = n.intAttr("ceil_mode", 0);
  bool countPads = n.intAttr("count_include_pad", 0);
  // With ceil_mode the last window may hang past the padded input: pad
  // further with zeros, which the divisor below does not count.
  SmallVector<int64_t> outSize, realEnd(win->padEnd);
  for (int64_t i = 0; i < r; ++i) {
    auto out = pooledSize(n, *win, spatial, i, ceilMode);
    if (failed(out))
      return failure();
    outSize.push_back(*out);
    int64_t window = (win->kernel[i] - 1) * win->dilations[i] + 1;
    win->padEnd[i] += std::max<int64_t>(
        0, (*out - 1) * win->strides[i] + window -
               (spatial[i] + win->padBegin[i] + win->padEnd[i]));
  }
  int64_t c = xt.getDimSize(1);
  Type elt = xt.getElementType();
  SmallVector<int64_t> wShape = {c, 1};
  wShape.append(win->kernel.begin(), win->kernel.end());
  auto wType = RankedTensorType::get(wShape, elt);
  Value ones = n.constant(DenseElementsAttr::get(
      wType, n.builder.getFloatAttr(elt, 1.0).getValue()));
  Value sum;
  if (!take(convAnyRank(n, x, ones, Value(), *win, c), sum))
    return failure();
  // How many elements each window averages, from the geometry alone.
  int64_t positions = 1;
  for (int64_t o : outSize)
    positions *= o;
  SmallVector<float> counts(positions);
  for (int64_t p = 0; p < positions; ++p) {
    int64_t rest = p, count = 1;
    for (int64_t i = r - 1; i >= 0; --i) {
      int64_t o = rest % outSize[i];
      rest /= outSize[i];
      int64_t covered = 0;
      for (int64_t k = 0; k < win->kernel[i]; ++k) {
        int64_t at = o * win->strides[i] + k * win->dilations[i] -
                     win->padBegin[i];
        bool inside = countPads ? at < spatial[i] + realEnd[i]
                                : at >= 0 && at < spatial[i];
        covered += inside;
      }
      count *= covered;
    }
    counts[p] = static_cast<float>(count);
  }
  SmallVector<int64_t> countShape = {1, 1};
  countShape.append(outSize.begin(), outSize.end());
  Value divisor = n.constant(DenseElementsAttr::get(
      RankedTensorType::get(countShape, n.builder.getF32Type()),
      ArrayRef<float>(counts)));
  if (!take(n.castTo(divisor, elt), divisor))
    return failure();
  return n.push(n.binary<DivOp>(sum, divisor));
}

/// MaxPool over any number of spatial axes, exactly: the input padded with
/// -inf, each window's elements gathered along each axis by constant
/// indices (a window axis beside each output axis), then a max over the
/// window axes.
LogicalResult convertMaxPool(NodeContext &n) {
  bool columnMajor = n.intAttr("storage_order", 0) != 0;
  // Integers too (an 8-bit image): the padding is the type's lowest value.
  Value x = n.input(0);
  auto xt = n.inputType(0);
  int64_t r = xt.getRank() - 2;
  auto kernel = n.intsAttr("kernel_shape");
  if (r < 1 || !kernel || static_cast<int64_t>(kernel->size()) != r)
    return n.fail("MaxPool needs a kernel_shape with one size per spatial "
                  "axis");
  ArrayRef<int64_t> spatial = xt.getShape().drop_front(2);
  auto win = readWindow(n, spatial, *kernel);
  if (failed(win))
    return failure();
  bool ceilMode = n.intAttr("ceil_mode", 0);
  SmallVector<int64_t> outSizes;
  for (int64_t i = 0; i < r; ++i) {
    auto pooled = pooledSize(n, *win, spatial, i, ceilMode);
    if (failed(pooled))
      return failure();
    outSizes.push_back(*pooled);
  }
  // Each window's elements of `v`, padded with `fill`: a window axis beside
  // each output axis.
  SmallVector<int64_t> windowAxes;
  auto windows = [&](Value v, Value fill) -> FailureOr<Value> {
    windowAxes.clear();
    for (int64_t i = 0; i < r; ++i) {
      // Axis 2 + i of the input sits at 2 + 2i once i window axes are in.
      int64_t axis = 2 + 2 * i;
      int64_t out = outSizes[i], s = win->strides[i];
      int64_t window = (win->kernel[i] - 1) * win->dilations[i] + 1;
      int64_t after = std::max<int64_t>(win->padEnd[i],
                                        (out - 1) * s + window - spatial[i] -
                                            win->padBegin[i]);
      if (!take(n.padAlong(v, axis, win->padBegin[i], after, fill), v))
        return failure();
      SmallVector<int64_t> idx;
      for (int64_t o = 0; o < out; ++o)
        for (int64_t k = 0; k < win->kernel[i]; ++k)
          idx.push_back(o * s + k * win->dilations[i]);
      Value indices = n.constant(DenseElementsAttr::get(
          RankedTensorType::get({static_cast<int64_t>(idx.size())},
                                n.builder.getI64Type()),
          ArrayRef<int64_t>(idx)));
      if (!take(n.gather(v, indices, axis), v))
        return failure();
      SmallVector<int64_t> split(cast<RankedTensorType>(v.getType()).getShape());
      split[axis] = out;
      split.insert(split.begin() + axis + 1, win->kernel[i]);
      if (!take(n.reshape(v, split), v))
        return failure();
      windowAxes.push_back(axis + 1);
    }
    return v;
  };
  // Padding is -inf (the type's lowest), which no window's max picks over a
  // real element.
  Value values, best;
  if (!take(windows(x, n.scalar(xt.getElementType(),
                                -std::numeric_limits<double>::infinity())),
            values) ||
      !take(n.reduce(ReduceKind::max, values, windowAxes, false), best) ||
      failed(n.push(best)))
    return failure();
  if (!n.hasOutput(1))
    return success();
  // Indices: the first element of each window equal to its max, as a flat
  // position in the input. The spatial positions go through the same
  // windows (padding as int64's largest, never the least), so the first
  // equal element is the least position among the equal ones; the image
  // and channel's offset is added after. All of it but the compare folds.
  Type i64 = n.builder.getI64Type();
  int64_t plane = 1;
  for (int64_t d : spatial)
    plane *= d;
  SmallVector<int64_t> positions(plane), pshape{1, 1};
  for (int64_t i = 0; i < plane; ++i)
    positions[i] = i;
  llvm::append_range(pshape, spatial);
  Value none = n.scalar(i64, std::numeric_limits<double>::infinity());
  Value where, keep, equal, picked, firstPos;
  Value planePos = n.constant(DenseElementsAttr::get(
      RankedTensorType::get(pshape, i64), ArrayRef<int64_t>(positions)));
  SmallVector<int64_t> keptShape(cast<RankedTensorType>(best.getType()).getShape());
  for (int64_t a : windowAxes)
    keptShape.insert(keptShape.begin() + a, 1);
  if (!take(windows(planePos, none), where) ||
      !take(n.reshape(best, keptShape), keep) ||
      !take(n.compare(ComparePredicate::eq, values, keep), equal) ||
      !take(n.select(equal, where, none), picked) ||
      !take(n.reduce(ReduceKind::min, picked, windowAxes, false), firstPos))
    return failure();
  if (columnMajor) {
    // The window's first maximum in row-major order, reported at its
    // column-major position: h·W + w becomes w·H + h.
    if (r != 2)
      return n.fail("MaxPool's storage_order 1 needs 2 spatial axes");
    Value h, w, wh, hw;
    Value width = n.scalar(i64, static_cast<double>(spatial[1]));
    if (!take(n.binary<DivOp>(firstPos, width), h) ||
        !take(n.binary<MulOp>(h, width), hw) ||
        !take(n.binary<SubOp>(firstPos, hw), w) ||
        !take(n.binary<MulOp>(w, n.scalar(i64, static_cast<double>(spatial[0]))),
              wh) ||
        !take(n.binary<AddOp>(wh, h), firstPos))
      return failure();
  }
  int64_t batch = xt.getDimSize(0), channels = xt.getDimSize(1);
  SmallVector<int64_t> offsets;
  for (int64_t i = 0; i < batch * channels; ++i)
    offsets.push_back(i * plane);
  SmallVector<int64_t> oshape{batch, channels};
  oshape.append(r, 1);
  Value offset = n.constant(DenseElementsAttr::get(
      RankedTensorType::get(oshape, i64), ArrayRef<int64_t>(offsets)));
  return n.push(n.binary<AddOp>(firstPos, offset));
}

} // namespace

void mlir::tfm::onnx_import::populateConvolutionConverters(Registry &r) {
  r.onOp("MaxPool", 8, convertMaxPool);
  r.onOp("Conv", 1, convertConv);
  r.onOp("ConvInteger", 10, convertConvInteger);
  r.onOp("QLinearConv", 10, convertQLinearConv);
  r.onOp("AveragePool", 7, convertAveragePool);
}
