//===- ConstantData.cpp - Building large constants with one copy ----------===//

#include "tfm/IR/ConstantData.h"

#include <algorithm>
#include <cstring>
#include <memory>

using namespace mlir;
using namespace mlir::tfm;

namespace {
/// A buffer for building a new constant, which the attribute then copies:
/// one per thread, reused, so that a large model's weights do not fault in
/// fresh zeroed pages twice (W9: 1.2 GB).
MutableArrayRef<char> scratch(size_t bytes) {
  thread_local std::unique_ptr<char[]> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    buffer.reset(new char[bytes]);
    capacity = bytes;
  }
  return {buffer.get(), bytes};
}

/// The constant of `outType` whose element i is element `source(i)` of
/// `input`. A folded causal buffer ([1, 1, 1024, 1024] booleans, sliced to
/// the sequence in every layer of every bucket) reads only the elements it
/// keeps, byte-wise: through the interpreter's doubles it paged in 8 MB a
/// fold, 0.3 s of each bucket of a GPT-2.
template <typename SourceIndex>
DenseElementsAttr pick(DenseElementsAttr input, RankedTensorType outType,
                       SourceIndex source) {
  if (input.isSplat())
    return input.resizeSplat(outType);
  int64_t n = outType.getNumElements();
  if (input.getElementType().isInteger(1)) {
    // Booleans are packed one bit each, so they are read as values.
    auto values = input.getValues<bool>();
    SmallVector<bool> out(n);
    for (int64_t i = 0; i < n; ++i)
      out[i] = values[source(i)];
    return DenseElementsAttr::get(outType, ArrayRef<bool>(out));
  }
  size_t width = elementBytes(input.getElementType());
  ArrayRef<char> raw = input.getRawData();
  MutableArrayRef<char> out = scratch(n * width);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(&out[i * width], &raw[source(i) * width], width);
  return DenseElementsAttr::getFromRawBuffer(outType, out);
}

/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}
} // namespace

DenseElementsAttr mlir::tfm::transpose2D(DenseElementsAttr weight) {
  auto type = cast<RankedTensorType>(weight.getType());
  if (weight.isSplat())
    return weight.reshape(RankedTensorType::get(
        {type.getDimSize(1), type.getDimSize(0)}, type.getElementType()));
  return transpose2D(type, weight.getRawData());
}

DenseElementsAttr mlir::tfm::transpose2D(RankedTensorType type,
                                         ArrayRef<char> raw) {
  int64_t k = type.getDimSize(0), n = type.getDimSize(1);
  auto outType = RankedTensorType::get({n, k}, type.getElementType());
  // Byte-wise: in raw data every element type but i1 takes whole bytes.
  size_t width = elementBytes(type.getElementType());
  MutableArrayRef<char> out = scratch(raw.size());
  // In tiles, so that both sides stay in cache: element by element, W9's
  // 1.2 GB of weights took 1.5 s of a 30 s compile. The common widths copy
  // as integers, since a memcpy call per element costs as much again.
  auto transpose = [&](auto elementBytes) {
    constexpr int64_t tile = 32;
    const size_t w = elementBytes ? elementBytes : width;
    for (int64_t i0 = 0; i0 < k; i0 += tile)
      for (int64_t j0 = 0; j0 < n; j0 += tile)
        for (int64_t i = i0, ie = std::min(k, i0 + tile); i < ie; ++i)
          for (int64_t j = j0, je = std::min(n, j0 + tile); j < je; ++j)
            std::memcpy(&out[(j * k + i) * w], &raw[(i * n + j) * w],
                        elementBytes ? elementBytes : w);
  };
  if (width == 4)
    transpose(std::integral_constant<size_t, 4>());
  else if (width == 2)
    transpose(std::integral_constant<size_t, 2>());
  else
    transpose(std::integral_constant<size_t, 0>());
  return DenseElementsAttr::getFromRawBuffer(outType, out);
}

DenseElementsAttr mlir::tfm::concatRows(ArrayRef<DenseElementsAttr> parts) {
  auto first = cast<RankedTensorType>(parts.front().getType());
  SmallVector<int64_t> shape(first.getShape());
  shape[0] = 0;
  size_t width = elementBytes(first.getElementType()), bytes = 0;
  for (DenseElementsAttr p : parts) {
    shape[0] += cast<RankedTensorType>(p.getType()).getDimSize(0);
    bytes += p.getNumElements() * width;
  }
  MutableArrayRef<char> out = scratch(bytes);
  char *at = out.data();
  for (DenseElementsAttr p : parts) {
    ArrayRef<char> raw = p.getRawData();
    if (p.isSplat()) {
      for (int64_t i = 0, n = p.getNumElements(); i < n; ++i, at += width)
        std::memcpy(at, raw.data(), width);
    } else {
      std::memcpy(at, raw.data(), raw.size());
      at += raw.size();
    }
  }
  return DenseElementsAttr::getFromRawBuffer(
      RankedTensorType::get(shape, first.getElementType()), out);
}

DenseElementsAttr mlir::tfm::sliceConstant(DenseElementsAttr input,
                                           ArrayRef<int64_t> starts,
                                           ArrayRef<int64_t> sizes,
                                           ArrayRef<int64_t> steps) {
  auto type = cast<RankedTensorType>(input.getType());
  auto outType = RankedTensorType::get(sizes, type.getElementType());
  SmallVector<int64_t> in = stridesOf(type.getShape());
  SmallVector<int64_t> out = stridesOf(sizes);
  return pick(input, outType, [&](int64_t i) {
    int64_t at = 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      int64_t index = i / out[d];
      i %= out[d];
      at += (starts[d] + index * steps[d]) * in[d];
    }
    return at;
  });
}

DenseElementsAttr mlir::tfm::gatherConstant(DenseElementsAttr input,
                                            DenseElementsAttr indices,
                                            int64_t axis) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t extent = type.getDimSize(axis);
  SmallVector<int64_t> picked;
  for (const APInt &v : indices.getValues<APInt>()) {
    int64_t index = v.getSExtValue();
    if (index < -extent || index >= extent)
      return {};
    picked.push_back(index < 0 ? index + extent : index);
  }
  // The result is [outer, picked, inner] with the input read as
  // [outer, extent, inner].
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < type.getRank(); ++d)
    inner *= type.getDimSize(d);
  SmallVector<int64_t> shape(type.getShape().take_front(axis));
  llvm::append_range(shape,
                     cast<RankedTensorType>(indices.getType()).getShape());
  llvm::append_range(shape, type.getShape().drop_front(axis + 1));
  auto outType = RankedTensorType::get(shape, type.getElementType());
  int64_t count = static_cast<int64_t>(picked.size());
  return pick(input, outType, [&](int64_t i) {
    int64_t within = i % inner, row = i / inner;
    return ((row / count) * extent + picked[row % count]) * inner + within;
  });
}
