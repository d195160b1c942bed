//===- TrainingOps.cpp - Losses, gradients and optimizers -----------------===//

#include "tfm/Reference/Ops.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::reference;

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

std::string badLabel(int64_t label, int64_t position, int64_t classes,
                     int64_t ignore) {
  return "label " + std::to_string(label) + " at position " +
         std::to_string(position) + " is outside [0, " +
         std::to_string(classes) + ") and is not the ignore_index " +
         std::to_string(ignore);
}
} // namespace

namespace {
/// Calls `fn(t, label, x, lse)` for each row `t` of `logits` whose label is
/// not `ignore`, with the row `x` and its log-sum-exp; fails on a label out
/// of range.
template <typename Fn>
LogicalResult forEachLabelledRow(const Tensor &logits, const Tensor &labels,
                                 int64_t ignore, std::string &error, Fn fn) {
  int64_t classes = logits.shape.back();
  for (int64_t t = 0; t < labels.numElements(); ++t) {
    int64_t label = labels.getInt(t);
    if (label == ignore)
      continue;
    if (label < 0 || label >= classes) {
      error = badLabel(label, t, classes, ignore);
      return failure();
    }
    const double *x = logits.data.data() + t * classes;
    double mx = kNegInf, sum = 0;
    for (int64_t k = 0; k < classes; ++k)
      mx = std::max(mx, x[k]);
    for (int64_t k = 0; k < classes; ++k)
      sum += std::exp(x[k] - mx);
    fn(t, label, x, mx + std::log(sum));
  }
  return success();
}
} // namespace

FailureOr<Tensor> mlir::tfm::reference::evalCrossEntropy(
    const Tensor &logits, const Tensor &labels, double eps, int64_t ignore,
    ElementKind kind, std::string &error) {
  int64_t classes = logits.shape.back();
  double total = 0;
  int64_t count = 0;
  if (failed(forEachLabelledRow(
          logits, labels, ignore, error,
          [&](int64_t, int64_t label, const double *x, double lse) {
            double sumLogp = 0;
            for (int64_t k = 0; k < classes; ++k)
              sumLogp += x[k] - lse;
            total += -(1 - eps) * (x[label] - lse) - eps / classes * sumLogp;
            ++count;
          })))
    return failure();
  // Like PyTorch, a batch with every label ignored has a NaN mean.
  Tensor out(kind, {});
  out.data[0] = total / static_cast<double>(count);
  return out;
}

FailureOr<Tensor> mlir::tfm::reference::evalCrossEntropyGrad(
    const Tensor &logits, const Tensor &labels, double grad, double eps,
    int64_t ignore, Shape outShape, std::string &error) {
  int64_t classes = logits.shape.back();
  int64_t count = 0;
  for (int64_t t = 0; t < labels.numElements(); ++t)
    count += labels.getInt(t) != ignore;
  Tensor out(logits.kind, outShape.vec());
  if (failed(forEachLabelledRow(
          logits, labels, ignore, error,
          [&](int64_t t, int64_t label, const double *x, double lse) {
            double *d = out.data.data() + t * classes;
            for (int64_t k = 0; k < classes; ++k) {
              double target = eps / classes + (k == label ? 1 - eps : 0.0);
              d[k] = grad * (std::exp(x[k] - lse) - target) /
                     static_cast<double>(count);
            }
          })))
    return failure();
  return out;
}

std::vector<Tensor> mlir::tfm::reference::evalLayerNormGrad(const Tensor &x,
                                                            const Tensor &scale,
                                                            const Tensor &dy,
                                                            double eps,
                                                            bool rms) {
  Tensor dx(x.kind, x.shape), dscale(scale.kind, scale.shape),
      dbias(scale.kind, scale.shape);
  int64_t n = static_cast<int64_t>(scale.data.size());
  int64_t rows = n ? static_cast<int64_t>(x.data.size()) / n : 0;
  std::vector<double> xhat(n), g(n);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &x.data[r * n], *dr = &dy.data[r * n];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n && !rms; ++j)
      mean += xr[j];
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    double rstd = 1.0 / std::sqrt(var / double(n) + eps);
    double meanG = 0, meanGX = 0;
    for (int64_t j = 0; j < n; ++j) {
      xhat[j] = (xr[j] - mean) * rstd;
      g[j] = dr[j] * scale.data[j];
      meanG += g[j];
      meanGX += g[j] * xhat[j];
      dscale.data[j] += dr[j] * xhat[j];
      dbias.data[j] += dr[j];
    }
    // mean(g) comes from differentiating the mean that layer norm
    // subtracts; RMSNorm subtracts none.
    meanG = rms ? 0.0 : meanG / double(n);
    meanGX /= double(n);
    for (int64_t j = 0; j < n; ++j)
      dx.data[r * n + j] = rstd * (g[j] - meanG - xhat[j] * meanGX);
  }
  std::vector<Tensor> grads;
  grads.push_back(std::move(dx));
  grads.push_back(std::move(dscale));
  grads.push_back(std::move(dbias));
  return grads;
}

Tensor mlir::tfm::reference::evalEmbeddingGrad(const Tensor &grad,
                                               const Tensor &indices,
                                               Shape outShape) {
  Tensor out(grad.kind, outShape.vec());
  int64_t rows = outShape[0], width = outShape[1];
  for (int64_t i = 0; i < indices.numElements(); ++i) {
    int64_t row = indices.getInt(i);
    if (row < 0 || row >= rows)
      continue;
    for (int64_t j = 0; j < width; ++j)
      out.data[row * width + j] += grad.data[i * width + j];
  }
  return out;
}

void mlir::tfm::reference::evalSGD(Tensor &p, const Tensor &g, double lr,
                                   double wd) {
  for (size_t i = 0; i < p.data.size(); ++i)
    p.data[i] -= lr * (g.data[i] + wd * p.data[i]);
}

void mlir::tfm::reference::evalAdam(Tensor &p, Tensor &m, Tensor &v,
                                    const Tensor &g, double lr, double b1,
                                    double b2, double eps, double wd,
                                    int64_t step) {
  double c1 = 1 - std::pow(b1, double(step));
  double c2 = 1 - std::pow(b2, double(step));
  for (size_t i = 0; i < p.data.size(); ++i) {
    double gi = g.data[i] + wd * p.data[i];
    m.data[i] = b1 * m.data[i] + (1 - b1) * gi;
    v.data[i] = b2 * v.data[i] + (1 - b2) * gi * gi;
    p.data[i] -= lr * (m.data[i] / c1) / (std::sqrt(v.data[i] / c2) + eps);
  }
}
