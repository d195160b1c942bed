//===- ElementwiseOps.cpp - Elementwise ops of the reference ---------------===//

#include "tfm/CounterRNG.h"
#include "tfm/Reference/Ops.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::reference;

namespace {
/// Integers wrap around as machine integers do, without the undefined
/// behaviour of signed overflow. u64 elements are held as bit patterns, so
/// their order and quotient are taken unsigned (narrower unsigned kinds
/// hold their values exactly).
int64_t wrapping(BinaryKind op, int64_t x, int64_t y, bool u64) {
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  if (u64 && (op == BinaryKind::Div || op == BinaryKind::Max ||
              op == BinaryKind::Min)) {
    if (op == BinaryKind::Div)
      return y == 0 ? 0 : static_cast<int64_t>(u(x) / u(y));
    bool less = u(x) < u(y);
    return (op == BinaryKind::Max) == less ? y : x;
  }
  switch (op) {
  case BinaryKind::Add:
    return static_cast<int64_t>(u(x) + u(y));
  case BinaryKind::Sub:
    return static_cast<int64_t>(u(x) - u(y));
  case BinaryKind::Mul:
    return static_cast<int64_t>(u(x) * u(y));
  case BinaryKind::Div:
    if (y == 0)
      return 0;
    if (x == std::numeric_limits<int64_t>::min() && y == -1)
      return x;
    return x / y;
  case BinaryKind::Max:
    return std::max(x, y);
  case BinaryKind::Min:
    return std::min(x, y);
  case BinaryKind::Pow:
    break;
  }
  return 0;
}

double floating(BinaryKind op, double x, double y) {
  switch (op) {
  case BinaryKind::Add:
    return x + y;
  case BinaryKind::Sub:
    return x - y;
  case BinaryKind::Mul:
    return x * y;
  case BinaryKind::Div:
    return x / y;
  case BinaryKind::Pow:
    return std::pow(x, y);
  case BinaryKind::Max:
    return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
  case BinaryKind::Min:
    return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
  }
  return NAN;
}
} // namespace

int64_t mlir::tfm::reference::product(Shape dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

std::vector<int64_t> mlir::tfm::reference::stridesOf(Shape shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::vector<int64_t> mlir::tfm::reference::broadcastMap(Shape in, Shape out) {
  size_t lead = out.size() - in.size();
  std::vector<int64_t> inStrides = stridesOf(in);
  std::vector<int64_t> idx(out.size(), 0);
  std::vector<int64_t> map(Tensor::numElementsOf(out.vec()));
  for (int64_t &src : map) {
    src = 0;
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] != 1)
        src += idx[lead + d] * inStrides[d];
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      if (++idx[d] < out[d])
        break;
      idx[d] = 0;
    }
  }
  return map;
}

Tensor mlir::tfm::reference::evalBinary(BinaryKind op, const Tensor &a,
                                        const Tensor &b, ElementKind kind,
                                        Shape outShape) {
  Tensor out(kind, outShape.vec());
  std::vector<int64_t> am = broadcastMap(a.shape, outShape);
  std::vector<int64_t> bm = broadcastMap(b.shape, outShape);
  bool exact = out.isInt() && a.isInt() && b.isInt() && op != BinaryKind::Pow;
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (exact)
      out.setInt(i, wrapping(op, a.ints[am[i]], b.ints[bm[i]],
                             kind == ElementKind::U64));
    else
      out.set(i, floating(op, a.get(am[i]), b.get(bm[i])));
  }
  return out;
}

Tensor mlir::tfm::reference::evalCompare(ComparePredicate p, const Tensor &a,
                                         const Tensor &b, Shape outShape) {
  Tensor out(ElementKind::I1, outShape.vec());
  std::vector<int64_t> am = broadcastMap(a.shape, outShape);
  std::vector<int64_t> bm = broadcastMap(b.shape, outShape);
  auto compare = [p](auto x, auto y) {
    switch (p) {
    case ComparePredicate::eq: return x == y;
    case ComparePredicate::ne: return x != y;
    case ComparePredicate::lt: return x < y;
    case ComparePredicate::le: return x <= y;
    case ComparePredicate::gt: return x > y;
    case ComparePredicate::ge: return x >= y;
    }
    return false;
  };
  bool exact = a.isInt() && b.isInt();
  bool u64 = a.kind == ElementKind::U64;
  auto exactly = [&](int64_t x, int64_t y) {
    return u64 ? compare(static_cast<uint64_t>(x), static_cast<uint64_t>(y))
               : compare(x, y);
  };
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = (exact ? exactly(a.ints[am[i]], b.ints[bm[i]])
                         : compare(a.get(am[i]), b.get(bm[i])))
                      ? 1.0
                      : 0.0;
  return out;
}

Tensor mlir::tfm::reference::evalSelect(const Tensor &c, const Tensor &t,
                                        const Tensor &f, ElementKind kind,
                                        Shape outShape) {
  Tensor out(kind, outShape.vec());
  std::vector<int64_t> cm = broadcastMap(c.shape, outShape),
                       tm = broadcastMap(t.shape, outShape),
                       fm = broadcastMap(f.shape, outShape);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (c.get(cm[i]) != 0)
      out.copyElement(i, t, tm[i]);
    else
      out.copyElement(i, f, fm[i]);
  }
  return out;
}

Tensor mlir::tfm::reference::evalCast(const Tensor &in, ElementKind kind) {
  Tensor out(kind, in.shape);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (out.isInt() && in.isInt())
      out.setInt(i, in.ints[i]);
    else if (out.isInt())
      out.set(i, in.data[i]);
    else if (in.isInt())
      out.data[i] = roundToKind(in.get(i), kind);
    else
      out.data[i] = roundToKind(in.data[i], kind);
  }
  return out;
}

Tensor mlir::tfm::reference::evalUnary(Tensor t, double (*f)(double)) {
  for (double &x : t.data)
    x = f(x);
  return t;
}

double mlir::tfm::reference::evalActivation(double x, Activation act) {
  switch (act) {
  case Activation::none:
    return x;
  case Activation::relu:
    return x > 0 ? x : 0.0;
  case Activation::gelu:
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  case Activation::gelu_tanh:
    return 0.5 * x *
           (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case Activation::silu:
    return x / (1.0 + std::exp(-x));
  }
  return x;
}

Tensor mlir::tfm::reference::evalGelu(Tensor t, GeluApproximation approximate) {
  Activation act = approximate == GeluApproximation::tanh
                       ? Activation::gelu_tanh
                       : Activation::gelu;
  for (double &x : t.data)
    x = evalActivation(x, act);
  return t;
}

Tensor mlir::tfm::reference::evalDropout(Tensor t, double rate, bool training,
                                         uint64_t seed,
                                         std::optional<int64_t> step) {
  if (!training || rate <= 0)
    return t;
  if (step)
    seed = tfm_rng_stream(seed, static_cast<uint64_t>(*step));
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] =
        tfm_rng_uniform(seed, i) >= rate ? t.data[i] / (1.0 - rate) : 0.0;
  return t;
}
