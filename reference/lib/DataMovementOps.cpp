//===- DataMovementOps.cpp - Layout and gather ops of the reference -------===//
//
// Every op here only moves elements, so each works on any element kind
// through Tensor::copyElement.
//
//===----------------------------------------------------------------------===//

#include "tfm/Reference/Ops.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::reference;

namespace {
/// Advances a row-major multi-index over `shape`.
void next(std::vector<int64_t> &idx, Shape shape) {
  for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
    if (++idx[d] < shape[d])
      return;
    idx[d] = 0;
  }
}
} // namespace

Tensor mlir::tfm::reference::evalBroadcast(const Tensor &in, Shape outShape) {
  Tensor out(in.kind, outShape.vec());
  std::vector<int64_t> map = broadcastMap(in.shape, outShape);
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.copyElement(i, in, map[i]);
  return out;
}

Tensor mlir::tfm::reference::evalTranspose(const Tensor &in, Shape perm) {
  std::vector<int64_t> shape;
  for (int64_t d : perm)
    shape.push_back(in.shape[d]);
  Tensor out(in.kind, shape);
  std::vector<int64_t> inStrides = stridesOf(in.shape);
  std::vector<int64_t> idx(perm.size(), 0);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      src += idx[d] * inStrides[perm[d]];
    out.copyElement(i, in, src);
    next(idx, out.shape);
  }
  return out;
}

Tensor mlir::tfm::reference::evalReshape(const Tensor &in, Shape outShape) {
  Tensor out = in;
  out.shape = outShape.vec();
  return out;
}

Tensor mlir::tfm::reference::evalSlice(const Tensor &in, Shape starts,
                                       Shape steps, Shape outShape) {
  Tensor out(in.kind, outShape.vec());
  std::vector<int64_t> inStrides = stridesOf(in.shape);
  std::vector<int64_t> idx(outShape.size(), 0);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      src += (starts[d] + idx[d] * steps[d]) * inStrides[d];
    out.copyElement(i, in, src);
    next(idx, outShape);
  }
  return out;
}

FailureOr<Tensor> mlir::tfm::reference::evalGather(const Tensor &in,
                                                   const Tensor &ids,
                                                   int64_t axis,
                                                   Shape outShape,
                                                   std::string &error) {
  int64_t outer = product(Shape(in.shape).take_front(axis));
  int64_t inner = product(Shape(in.shape).drop_front(axis + 1));
  int64_t n = in.shape[axis];
  Tensor out(in.kind, outShape.vec());
  int64_t count = ids.numElements();
  for (int64_t j = 0; j < count; ++j) {
    int64_t id = ids.getInt(j);
    if (id < -n || id >= n) {
      error = "index " + std::to_string(id) + " at position " +
              std::to_string(j) + " of 'indices' is outside [" +
              std::to_string(-n) + ", " + std::to_string(n) + ")";
      return failure();
    }
    if (id < 0)
      id += n;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < inner; ++e)
        out.copyElement((o * count + j) * inner + e, in,
                        (o * n + id) * inner + e);
  }
  return out;
}

FailureOr<Tensor> mlir::tfm::reference::evalScatterND(
    const Tensor &in, const Tensor &indices, const Tensor &updates,
    ScatterReduction reduction, std::string &error) {
  Tensor out = in;
  int64_t k = indices.shape.back();
  int64_t count = indices.numElements() / std::max<int64_t>(k, 1);
  int64_t inner = product(Shape(in.shape).drop_front(k));
  std::vector<int64_t> strides = stridesOf(in.shape);
  bool u64 = in.kind == ElementKind::U64;
  for (int64_t p = 0; p < count; ++p) {
    int64_t base = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t n = in.shape[j], id = indices.getInt(p * k + j);
      if (id < -n || id >= n) {
        error = "index " + std::to_string(id) + " at position " +
                std::to_string(p * k + j) + " of 'indices' is outside [" +
                std::to_string(-n) + ", " + std::to_string(n) + ")";
        return failure();
      }
      base += (id < 0 ? id + n : id) * strides[j];
    }
    for (int64_t e = 0; e < inner; ++e) {
      int64_t dst = base + e, src = p * inner + e;
      if (reduction == ScatterReduction::none) {
        out.copyElement(dst, updates, src);
        continue;
      }
      if (out.isInt()) {
        auto x = static_cast<uint64_t>(out.ints[dst]);
        auto y = static_cast<uint64_t>(updates.ints[src]);
        bool less = u64 ? x < y
                        : static_cast<int64_t>(x) < static_cast<int64_t>(y);
        uint64_t r = reduction == ScatterReduction::add   ? x + y
                     : reduction == ScatterReduction::mul ? x * y
                     : reduction == ScatterReduction::max ? (less ? y : x)
                                                          : (less ? x : y);
        out.setInt(dst, static_cast<int64_t>(r));
        continue;
      }
      double x = out.data[dst], y = updates.data[src];
      switch (reduction) {
      case ScatterReduction::add: out.data[dst] = x + y; break;
      case ScatterReduction::mul: out.data[dst] = x * y; break;
      case ScatterReduction::max: out.data[dst] = std::isnan(y) ? y : std::max(x, y); break;
      case ScatterReduction::min: out.data[dst] = std::isnan(y) ? y : std::min(x, y); break;
      case ScatterReduction::none: break;
      }
      out.data[dst] = roundToKind(out.data[dst], out.kind);
    }
  }
  return out;
}

std::vector<Tensor> mlir::tfm::reference::evalTopK(const Tensor &in,
                                                   int64_t k, int64_t axis,
                                                   bool smallest) {
  int64_t outer = product(Shape(in.shape).take_front(axis));
  int64_t inner = product(Shape(in.shape).drop_front(axis + 1));
  int64_t n = in.shape[axis];
  std::vector<int64_t> shape = in.shape;
  shape[axis] = k;
  Tensor values(in.kind, shape), indices(ElementKind::I64, shape);
  bool u64 = in.kind == ElementKind::U64;
  // a before b: larger (or smaller) first; NaN above every number.
  auto greater = [&](int64_t a, int64_t b) {
    if (in.isInt())
      return u64 ? static_cast<uint64_t>(in.ints[a]) >
                       static_cast<uint64_t>(in.ints[b])
                 : in.ints[a] > in.ints[b];
    double x = in.data[a], y = in.data[b];
    return x > y || (std::isnan(x) && !std::isnan(y));
  };
  std::vector<int64_t> line(n);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t e = 0; e < inner; ++e) {
      auto at = [&](int64_t i) { return (o * n + i) * inner + e; };
      for (int64_t i = 0; i < n; ++i)
        line[i] = i;
      std::stable_sort(line.begin(), line.end(), [&](int64_t a, int64_t b) {
        return smallest ? greater(at(b), at(a)) : greater(at(a), at(b));
      });
      for (int64_t t = 0; t < k; ++t) {
        int64_t dst = (o * k + t) * inner + e;
        values.copyElement(dst, in, at(line[t]));
        indices.ints[dst] = line[t];
      }
    }
  return {std::move(values), std::move(indices)};
}

FailureOr<Tensor> mlir::tfm::reference::evalEmbedding(const Tensor &table,
                                                      const Tensor &ids,
                                                      Shape outShape,
                                                      std::string &error) {
  int64_t vocab = table.shape[0], dim = table.shape[1];
  Tensor out(table.kind, outShape.vec());
  for (int64_t i = 0; i < ids.numElements(); ++i) {
    int64_t id = ids.getInt(i);
    if (id < 0 || id >= vocab) {
      error = "index " + std::to_string(id) + " at position " +
              std::to_string(i) + " of 'indices' is outside the table's " +
              std::to_string(vocab) + " rows";
      return failure();
    }
    for (int64_t e = 0; e < dim; ++e)
      out.copyElement(i * dim + e, table, id * dim + e);
  }
  return out;
}

Tensor mlir::tfm::reference::evalConcat(llvm::ArrayRef<const Tensor *> inputs,
                                        int64_t axis, Shape outShape) {
  Tensor out(inputs.front()->kind, outShape.vec());
  int64_t outer = product(outShape.take_front(axis));
  int64_t inner = product(outShape.drop_front(axis + 1));
  int64_t offset = 0;
  for (const Tensor *in : inputs) {
    int64_t chunk = in->shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < chunk; ++e)
        out.copyElement(o * outShape[axis] * inner + offset + e, *in,
                        o * chunk + e);
    offset += chunk;
  }
  return out;
}

std::vector<Tensor> mlir::tfm::reference::evalSplit(const Tensor &in,
                                                    int64_t axis,
                                                    Shape sizes) {
  int64_t outer = product(Shape(in.shape).take_front(axis));
  int64_t inner = product(Shape(in.shape).drop_front(axis + 1));
  int64_t total = in.shape[axis];
  std::vector<Tensor> outs;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    std::vector<int64_t> shape = in.shape;
    shape[axis] = size;
    Tensor out(in.kind, shape);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < size * inner; ++e)
        out.copyElement(o * size * inner + e, in,
                        (o * total + offset) * inner + e);
    offset += size;
    outs.push_back(std::move(out));
  }
  return outs;
}

Tensor mlir::tfm::reference::evalPositionalEncoding(ElementKind kind,
                                                    Shape outShape) {
  Tensor out(kind, outShape.vec());
  int64_t len = outShape[0], dim = outShape[1];
  for (int64_t pos = 0; pos < len; ++pos)
    for (int64_t i = 0; i < dim; i += 2) {
      double angle = pos / std::pow(10000.0, static_cast<double>(i) / dim);
      out.data[pos * dim + i] = std::sin(angle);
      out.data[pos * dim + i + 1] = std::cos(angle);
    }
  return out;
}
