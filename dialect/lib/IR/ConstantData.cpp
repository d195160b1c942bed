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
  // Byte-wise: every element type the importer produces for weights is a
  // whole number of bytes wide.
  size_t width = type.getElementTypeBitWidth() / 8;
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
  size_t width = first.getElementTypeBitWidth() / 8, bytes = 0;
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

