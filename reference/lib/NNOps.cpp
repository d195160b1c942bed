//===- NNOps.cpp - Contractions, normalizations, reductions ---------------===//

#include "tfm/Reference/Ops.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::reference;

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Softmax over the innermost dimension of length `len`, in place.
void softmaxRows(std::vector<double> &data, int64_t len) {
  for (size_t row = 0; row < data.size(); row += len) {
    double *x = data.data() + row;
    double mx = kNegInf;
    for (int64_t i = 0; i < len; ++i)
      mx = std::max(mx, x[i]);
    double sum = 0;
    for (int64_t i = 0; i < len; ++i)
      sum += (x[i] = std::exp(x[i] - mx));
    for (int64_t i = 0; i < len; ++i)
      x[i] /= sum;
  }
}
} // namespace

Tensor mlir::tfm::reference::evalMatmul(const Tensor &a, const Tensor &b,
                                        bool ta, bool tb, ElementKind kind,
                                        Shape outShape) {
  Tensor out(kind, outShape.vec());
  int64_t r = out.rank();
  int64_t m = out.shape[r - 2], n = out.shape[r - 1];
  int64_t k = ta ? a.shape[a.rank() - 2] : a.shape.back();
  Shape outBatch = outShape.drop_back(2);
  std::vector<int64_t> aBatch = broadcastMap(Shape(a.shape).drop_back(2), outBatch);
  std::vector<int64_t> bBatch = broadcastMap(Shape(b.shape).drop_back(2), outBatch);
  for (size_t bi = 0; bi < aBatch.size(); ++bi) {
    const double *A = a.data.data() + aBatch[bi] * m * k;
    const double *B = b.data.data() + bBatch[bi] * k * n;
    double *C = out.data.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += (ta ? A[p * m + i] : A[i * k + p]) *
                 (tb ? B[j * k + p] : B[p * n + j]);
        C[i * n + j] = acc;
      }
  }
  return out;
}

Tensor mlir::tfm::reference::evalConv2D(const Tensor &x, const Tensor &w,
                                        const Tensor *bias,
                                        ArrayRef<int64_t> strides,
                                        ArrayRef<int64_t> pads,
                                        ArrayRef<int64_t> dilations,
                                        int64_t group, Shape outShape) {
  int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  int64_t m = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  int64_t oh = outShape[2], ow = outShape[3], mg = m / group;
  Tensor out(x.kind, outShape.vec());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o) {
      int64_t g = o / mg;
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = bias ? bias->data[o] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < kh; ++i) {
              int64_t yi = y * strides[0] + i * dilations[0] - pads[0];
              if (yi < 0 || yi >= h)
                continue;
              for (int64_t j = 0; j < kw; ++j) {
                int64_t xi = xo * strides[1] + j * dilations[1] - pads[1];
                if (xi < 0 || xi >= wd)
                  continue;
                acc += x.data[((b * c + g * cg + ci) * h + yi) * wd + xi] *
                       w.data[((o * cg + ci) * kh + i) * kw + j];
              }
            }
          out.data[((b * m + o) * oh + y) * ow + xo] = acc;
        }
    }
  return out;
}

Tensor mlir::tfm::reference::evalLinear(const Tensor &x, const Tensor &w,
                                        const Tensor *bias, Activation act,
                                        Shape outShape) {
  int64_t k = x.shape.back(), n = w.shape[0];
  int64_t rows = product(Shape(x.shape).drop_back());
  Tensor out(x.kind, outShape.vec());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? bias->data[j] : 0.0;
      for (int64_t p = 0; p < k; ++p)
        acc += x.data[r * k + p] * w.data[j * k + p];
      out.data[r * n + j] = evalActivation(acc, act);
    }
  return out;
}

Tensor mlir::tfm::reference::evalRotary(const Tensor &x, const Tensor &cos,
                                        const Tensor &sin, bool interleaved) {
  Tensor out(x.kind, x.shape);
  std::vector<int64_t> cm = broadcastMap(cos.shape, x.shape),
                       sm = broadcastMap(sin.shape, x.shape);
  int64_t width = x.shape.empty() ? 1 : x.shape.back(), half = width / 2;
  for (size_t i = 0; i < x.data.size(); ++i) {
    int64_t col = static_cast<int64_t>(i) % width;
    // rotate(x)[col]: -x[partner] for the first of a pair, +x[partner] for
    // the second.
    bool first = interleaved ? col % 2 == 0 : col < half;
    int64_t partner = interleaved ? (first ? col + 1 : col - 1)
                                  : (first ? col + half : col - half);
    double rotated = x.data[i - col + partner] * (first ? -1.0 : 1.0);
    out.data[i] = x.data[i] * cos.get(cm[i]) + rotated * sin.get(sm[i]);
  }
  return out;
}

Tensor mlir::tfm::reference::evalGatedLinear(const Tensor &x, const Tensor &w,
                                             const Tensor *bias, Activation act,
                                             Shape outShape) {
  std::vector<int64_t> packedShape = x.shape;
  packedShape.back() = w.shape[0];
  Tensor h = evalLinear(x, w, bias, Activation::none, packedShape);
  int64_t f = w.shape[0] / 2, rows = product(Shape(x.shape).drop_back());
  Tensor out(x.kind, outShape.vec());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j)
      out.data[r * f + j] = evalActivation(h.data[r * 2 * f + j], act) *
                            h.data[r * 2 * f + f + j];
  return out;
}

std::vector<Tensor> mlir::tfm::reference::evalQKVProjection(
    const Tensor &x, const Tensor &w, const Tensor *bias, Shape sizes) {
  std::vector<int64_t> fusedShape = x.shape;
  fusedShape.back() = w.shape[0];
  Tensor fused = evalLinear(x, w, bias, Activation::none, fusedShape);
  return evalSplit(fused, fused.rank() - 1, sizes);
}

namespace {
/// The transposes that move `axis` innermost, and back.
std::pair<SmallVector<int64_t>, SmallVector<int64_t>>
axisInnermost(int64_t rank, int64_t axis) {
  SmallVector<int64_t> perm, inverse(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  for (int64_t d = 0; d < rank; ++d)
    inverse[perm[d]] = d;
  return {perm, inverse};
}
} // namespace

Tensor mlir::tfm::reference::evalSoftmax(const Tensor &in, int64_t axis) {
  // Move the axis innermost, apply, and move it back.
  auto [perm, inverse] = axisInnermost(in.rank(), axis);
  Tensor moved = evalTranspose(in, perm);
  softmaxRows(moved.data, moved.shape.back());
  return evalTranspose(moved, inverse);
}

Tensor mlir::tfm::reference::evalSoftmaxGrad(const Tensor &y, const Tensor &dy,
                                             int64_t axis, double scale) {
  // As evalSoftmax: the axis innermost, each row, and back.
  auto [perm, inverse] = axisInnermost(y.rank(), axis);
  Tensor ym = evalTranspose(y, perm), dym = evalTranspose(dy, perm);
  int64_t n = ym.shape.empty() ? 1 : ym.shape.back();
  for (size_t r = 0; n > 0 && r < ym.data.size(); r += n) {
    double dot = 0;
    for (int64_t j = 0; j < n; ++j)
      dot += dym.data[r + j] * ym.data[r + j];
    for (int64_t j = 0; j < n; ++j)
      dym.data[r + j] = scale * ym.data[r + j] * (dym.data[r + j] - dot);
  }
  return evalTranspose(dym, inverse);
}

Tensor mlir::tfm::reference::evalMaskedSoftmax(const Tensor &x,
                                               const Tensor *mask,
                                               bool booleanMask, bool causal,
                                               double scale) {
  Tensor out(x.kind, x.shape);
  int64_t cols = x.shape.back();
  int64_t rows = x.rank() >= 2 ? x.shape[x.rank() - 2] : 1;
  std::vector<int64_t> mm;
  if (mask)
    mm = broadcastMap(mask->shape, x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) {
    double s = scale * x.data[i];
    if (mask) {
      double m = mask->get(mm[i]);
      s = booleanMask ? (m != 0 ? s : kNegInf) : s + m;
    }
    int64_t col = i % cols, row = (i / cols) % rows;
    if (causal && col > row)
      s = kNegInf;
    out.data[i] = s;
  }
  softmaxRows(out.data, cols);
  return out;
}

Tensor mlir::tfm::reference::evalLayerNorm(const Tensor &x, const Tensor &scale,
                                           const Tensor *bias, int64_t axis,
                                           double eps, bool rms) {
  int64_t inner = product(Shape(x.shape).drop_front(axis));
  Tensor out(x.kind, x.shape);
  for (size_t row = 0; inner && row < x.data.size(); row += inner) {
    // RMSNorm divides by the root mean square: the deviation from zero.
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner && !rms; ++i)
      mean += x.data[row + i];
    mean /= inner;
    for (int64_t i = 0; i < inner; ++i)
      var += (x.data[row + i] - mean) * (x.data[row + i] - mean);
    var /= inner;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < inner; ++i)
      out.data[row + i] = (x.data[row + i] - mean) * inv * scale.data[i] +
                          (bias ? bias->data[i] : 0.0);
  }
  return out;
}

namespace {
/// An attention's scale and its probabilities [B..., Sq, Sk], written out.
std::pair<double, Tensor> attentionProbabilities(const Tensor &q,
                                                 const Tensor &k,
                                                 const Tensor *mask,
                                                 bool causal,
                                                 std::optional<double> scale) {
  double s = scale ? *scale : 1.0 / std::sqrt(double(q.shape.back()));
  std::vector<int64_t> scoreShape = q.shape;
  scoreShape.back() = k.shape[q.rank() - 2];
  Tensor scores = evalMatmul(q, k, false, true, q.kind, scoreShape);
  bool boolean = mask && mask->kind == ElementKind::I1;
  return {s, evalMaskedSoftmax(scores, mask, boolean, causal, s)};
}
} // namespace

namespace {
/// A grouped-query attention's key or value `t` with each head repeated to
/// the query's `heads`, consecutively: head h is t's head h / G. Any other
/// `t` is returned as it is.
Tensor repeatHeads(const Tensor &t, int64_t heads) {
  int64_t rank = t.rank();
  if (rank < 3 || t.shape[rank - 3] == heads)
    return t;
  int64_t kvHeads = t.shape[rank - 3], group = heads / kvHeads;
  int64_t inner = t.shape[rank - 2] * t.shape[rank - 1];
  std::vector<int64_t> shape = t.shape;
  shape[rank - 3] = heads;
  Tensor out(t.kind, shape);
  int64_t outer = inner * kvHeads ? t.numElements() / (inner * kvHeads) : 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t h = 0; h < heads; ++h)
      std::copy_n(t.data.begin() + (o * kvHeads + h / group) * inner, inner,
                  out.data.begin() + (o * heads + h) * inner);
  return out;
}
} // namespace

Tensor mlir::tfm::reference::evalAttention(const Tensor &q, const Tensor &k,
                                           const Tensor &v, const Tensor *mask,
                                           bool causal,
                                           std::optional<double> scale,
                                           Shape outShape) {
  int64_t heads = q.rank() >= 3 ? q.shape[q.rank() - 3] : 1;
  Tensor probs =
      attentionProbabilities(q, repeatHeads(k, heads), mask, causal, scale)
          .second;
  return evalMatmul(probs, repeatHeads(v, heads), false, false, q.kind,
                    outShape);
}

std::vector<Tensor> mlir::tfm::reference::evalAttentionGrad(
    const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &dout,
    const Tensor *mask, bool causal, std::optional<double> scale) {
  auto [s, p] = attentionProbabilities(q, k, mask, causal, scale);
  Tensor dp = evalMatmul(dout, v, false, true, q.kind, p.shape);
  Tensor ds = evalSoftmaxGrad(p, dp, p.rank() - 1, s);
  std::vector<Tensor> grads;
  grads.push_back(evalMatmul(ds, k, false, false, q.kind, q.shape));
  grads.push_back(evalMatmul(ds, q, true, false, q.kind, k.shape));
  grads.push_back(evalMatmul(p, dout, true, false, q.kind, v.shape));
  return grads;
}

Tensor mlir::tfm::reference::evalReduce(ReduceKind kind, const Tensor &in,
                                        Shape axes, Shape outShape) {
  Tensor out(in.kind, outShape.vec());
  std::vector<bool> reduced(in.rank(), false);
  for (int64_t a : axes)
    reduced[a < 0 ? a + in.rank() : a] = true;
  // The output strides, with reduced dimensions contributing nothing.
  std::vector<int64_t> keptShape;
  for (int64_t d = 0; d < in.rank(); ++d)
    keptShape.push_back(reduced[d] ? 1 : in.shape[d]);
  std::vector<int64_t> outStrides = stridesOf(keptShape);
  int64_t count = out.numElements()
                      ? in.numElements() / out.numElements()
                      : 0;
  std::vector<int64_t> idx(in.rank(), 0);
  auto target = [&]() {
    int64_t dst = 0;
    for (int64_t d = 0; d < in.rank(); ++d)
      if (!reduced[d])
        dst += idx[d] * outStrides[d];
    for (int64_t d = in.rank() - 1; d >= 0; --d) {
      if (++idx[d] < in.shape[d])
        break;
      idx[d] = 0;
    }
    return dst;
  };
  if (in.isInt()) {
    // Integers reduce exactly; a mean truncates toward zero.
    // A u64 holds its bit pattern; order it unsigned.
    bool u64 = in.kind == ElementKind::U64;
    auto less = [u64](int64_t x, int64_t y) {
      return u64 ? static_cast<uint64_t>(x) < static_cast<uint64_t>(y) : x < y;
    };
    int64_t lowest = u64 ? 0 : std::numeric_limits<int64_t>::min();
    int64_t highest = u64 ? -1 : std::numeric_limits<int64_t>::max();
    int64_t init = kind == ReduceKind::max   ? lowest
                   : kind == ReduceKind::min ? highest
                                             : 0;
    std::fill(out.ints.begin(), out.ints.end(), init);
    for (int64_t v : in.ints) {
      int64_t &acc = out.ints[target()];
      if (kind == ReduceKind::max)
        acc = less(acc, v) ? v : acc;
      else if (kind == ReduceKind::min)
        acc = less(v, acc) ? v : acc;
      else
        acc = static_cast<int64_t>(static_cast<uint64_t>(acc) +
                                   static_cast<uint64_t>(v));
    }
    for (int64_t &v : out.ints) {
      if (kind == ReduceKind::mean && count)
        v /= count;
      v = wrapToKind(v, in.kind);
    }
    return out;
  }
  double init = kind == ReduceKind::max   ? -INFINITY
                : kind == ReduceKind::min ? INFINITY
                                          : 0.0;
  std::fill(out.data.begin(), out.data.end(), init);
  for (double v : in.data) {
    double &acc = out.data[target()];
    if (kind == ReduceKind::max)
      acc = std::isnan(v) ? v : std::max(acc, v);
    else if (kind == ReduceKind::min)
      acc = std::isnan(v) ? v : std::min(acc, v);
    else
      acc += v;
  }
  if (kind == ReduceKind::mean && count)
    for (double &v : out.data)
      v /= static_cast<double>(count);
  return out;
}
