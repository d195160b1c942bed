//===- Interpreter.cpp - The reference interpreter of tfm -----------------===//
//
// Each op is a direct transcription of its definition in TfmOps.td, with
// plain nested loops and a numpy broadcasting map. Shapes are taken from the
// op's (verified) result types, so the loops never have to re-derive them.
//
//===----------------------------------------------------------------------===//

#include "tfm/Reference/Interpreter.h"
#include "tfm/CounterRNG.h"
#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::tfm::reference;

namespace mlir::tfm::reference {

const char *elementKindName(ElementKind kind) {
  switch (kind) {
  case ElementKind::F32:
    return "f32";
  case ElementKind::F16:
    return "f16";
  case ElementKind::BF16:
    return "bf16";
  case ElementKind::F64:
    return "f64";
  case ElementKind::I1:
    return "i1";
  case ElementKind::I32:
    return "i32";
  case ElementKind::I64:
    return "i64";
  }
  return "?";
}

std::string Tensor::typeString() const {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + elementKindName(kind) + ">";
}

FailureOr<ElementKind> elementKindOf(Type type) {
  if (type.isF32())
    return ElementKind::F32;
  if (type.isF16())
    return ElementKind::F16;
  if (type.isBF16())
    return ElementKind::BF16;
  if (type.isF64())
    return ElementKind::F64;
  if (type.isInteger(1))
    return ElementKind::I1;
  if (type.isInteger(32))
    return ElementKind::I32;
  if (type.isInteger(64))
    return ElementKind::I64;
  return failure();
}

double roundToKind(double v, ElementKind kind) {
  auto viaAPFloat = [&](const llvm::fltSemantics &sem) {
    bool losesInfo = false;
    APFloat f(v);
    f.convert(sem, llvm::RoundingMode::NearestTiesToEven, &losesInfo);
    f.convert(APFloat::IEEEdouble(), llvm::RoundingMode::NearestTiesToEven,
              &losesInfo);
    return f.convertToDouble();
  };
  switch (kind) {
  case ElementKind::F64:
    return v;
  case ElementKind::F32:
    return static_cast<float>(v);
  case ElementKind::F16:
    return viaAPFloat(APFloat::IEEEhalf());
  case ElementKind::BF16:
    return viaAPFloat(APFloat::BFloat());
  case ElementKind::I1:
    return v != 0 ? 1.0 : 0.0;
  case ElementKind::I32:
  case ElementKind::I64:
    return std::trunc(v);
  }
  return v;
}

Type elementTypeOf(MLIRContext *context, ElementKind kind) {
  Builder b(context);
  switch (kind) {
  case ElementKind::F32:
    return b.getF32Type();
  case ElementKind::F16:
    return b.getF16Type();
  case ElementKind::BF16:
    return b.getBF16Type();
  case ElementKind::F64:
    return b.getF64Type();
  case ElementKind::I1:
    return b.getI1Type();
  case ElementKind::I32:
    return b.getI32Type();
  case ElementKind::I64:
    return b.getI64Type();
  }
  return {};
}

} // namespace mlir::tfm::reference

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

std::vector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// For every element of `out` (row-major), the flat index of the element of
/// `in` that numpy broadcasting reads.
std::vector<int64_t> broadcastMap(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  size_t lead = out.size() - in.size();
  std::vector<int64_t> inStrides = stridesOf(in);
  std::vector<int64_t> idx(out.size(), 0);
  std::vector<int64_t> map(product(out));
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

/// `result.shape[i] = in.shape[perm[i]]`, as tfm.transpose defines it.
Tensor transposed(const Tensor &in, ArrayRef<int64_t> perm) {
  std::vector<int64_t> shape;
  for (int64_t d : perm)
    shape.push_back(in.shape[d]);
  Tensor out(in.kind, shape);
  std::vector<int64_t> inStrides = stridesOf(in.shape);
  std::vector<int64_t> idx(perm.size(), 0);
  for (double &v : out.data) {
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      src += idx[d] * inStrides[perm[d]];
    v = in.data[src];
    for (int64_t d = static_cast<int64_t>(perm.size()) - 1; d >= 0; --d) {
      if (++idx[d] < out.shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

Tensor tensorOfType(Type type) {
  auto t = cast<RankedTensorType>(type);
  return Tensor(*mlir::tfm::reference::elementKindOf(t.getElementType()),
                std::vector<int64_t>(t.getShape().begin(), t.getShape().end()));
}

int64_t normalizedAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

double gelu(double x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5 * x *
           (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                            (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

double activate(double x, mlir::tfm::Activation act) {
  switch (act) {
  case mlir::tfm::Activation::none:
    return x;
  case mlir::tfm::Activation::relu:
    return x > 0 ? x : 0.0;
  case mlir::tfm::Activation::gelu:
    return gelu(x, /*tanhApprox=*/false);
  case mlir::tfm::Activation::gelu_tanh:
    return gelu(x, /*tanhApprox=*/true);
  }
  return x;
}

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

Tensor matmul(const Tensor &a, const Tensor &b, bool ta, bool tb, Type outT) {
  Tensor out = tensorOfType(outT);
  int64_t r = out.rank();
  int64_t m = out.shape[r - 2], n = out.shape[r - 1];
  int64_t k = ta ? a.shape[a.rank() - 2] : a.shape.back();
  ArrayRef<int64_t> outBatch = ArrayRef<int64_t>(out.shape).drop_back(2);
  std::vector<int64_t> aBatch =
      broadcastMap(ArrayRef<int64_t>(a.shape).drop_back(2), outBatch);
  std::vector<int64_t> bBatch =
      broadcastMap(ArrayRef<int64_t>(b.shape).drop_back(2), outBatch);
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

/// x·Wᵀ + b over the last dimension, then an activation.
Tensor linear(const Tensor &x, const Tensor &w, const Tensor *bias,
              mlir::tfm::Activation act, std::vector<int64_t> outShape) {
  int64_t k = x.shape.back(), n = w.shape[0];
  int64_t rows = x.numElements() / k;
  Tensor out(x.kind, std::move(outShape));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? bias->data[j] : 0.0;
      for (int64_t p = 0; p < k; ++p)
        acc += x.data[r * k + p] * w.data[j * k + p];
      out.data[r * n + j] = activate(acc, act);
    }
  return out;
}

/// Splits `in` along `axis` into consecutive pieces of `sizes`.
std::vector<Tensor> split(const Tensor &in, int64_t axis,
                          ArrayRef<int64_t> sizes) {
  int64_t outer = product(ArrayRef<int64_t>(in.shape).take_front(axis));
  int64_t inner = product(ArrayRef<int64_t>(in.shape).drop_front(axis + 1));
  int64_t total = in.shape[axis];
  std::vector<Tensor> outs;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    std::vector<int64_t> shape = in.shape;
    shape[axis] = size;
    Tensor out(in.kind, shape);
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(in.data.begin() + (o * total + offset) * inner, size * inner,
                  out.data.begin() + o * size * inner);
    offset += size;
    outs.push_back(std::move(out));
  }
  return outs;
}

Tensor layerNorm(const Tensor &x, const Tensor &scale, const Tensor *bias,
                 int64_t axis, double eps) {
  int64_t inner = product(ArrayRef<int64_t>(x.shape).drop_front(axis));
  Tensor out(x.kind, x.shape);
  for (size_t row = 0; row < x.data.size(); row += inner) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i)
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

Tensor binary(const Tensor &a, const Tensor &b, Type outT,
              double (*f)(double, double)) {
  Tensor out = tensorOfType(outT);
  std::vector<int64_t> am = broadcastMap(a.shape, out.shape);
  std::vector<int64_t> bm = broadcastMap(b.shape, out.shape);
  for (size_t i = 0; i < out.data.size(); ++i)
    out.data[i] = f(a.data[am[i]], b.data[bm[i]]);
  return out;
}

/// softmax(scale·x ⊕ mask) over the last axis, with an optional causal
/// triangle over the last two axes: the one definition behind attention and
/// masked_softmax.
Tensor maskedSoftmax(const Tensor &x, const Tensor *mask, bool booleanMask,
                     bool causal, double scale) {
  Tensor out(x.kind, x.shape);
  int64_t cols = x.shape.back();
  int64_t rows = x.rank() >= 2 ? x.shape[x.rank() - 2] : 1;
  std::vector<int64_t> mm;
  if (mask)
    mm = broadcastMap(mask->shape, x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) {
    double s = scale * x.data[i];
    if (mask) {
      double m = mask->data[mm[i]];
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

Tensor unary(Tensor t, double (*f)(double)) {
  for (double &x : t.data)
    x = f(x);
  return t;
}

double toDouble(APFloat v) {
  bool losesInfo = false;
  v.convert(APFloat::IEEEdouble(), llvm::RoundingMode::NearestTiesToEven, &losesInfo);
  return v.convertToDouble();
}

/// Evaluates the ops of one function body.
class Frame {
public:
  Frame(llvm::function_ref<FailureOr<std::vector<Tensor>>(
            func::FuncOp, const std::vector<Tensor> &)>
            call,
        TrainingState *state)
      : call(call), state(state) {}

  FailureOr<std::vector<Tensor>> run(func::FuncOp fn,
                                     const std::vector<Tensor> &args);

  /// Evaluates `op` alone on the given operand values.
  FailureOr<std::vector<Tensor>> runOne(Operation *op,
                                        const std::vector<Tensor> &operands) {
    for (auto [v, t] : llvm::zip(op->getOperands(), operands))
      set(v, t);
    if (failed(eval(op)))
      return failure();
    std::vector<Tensor> results;
    for (Value r : op->getResults())
      results.push_back(get(r));
    return results;
  }

private:
  const Tensor &get(Value v) { return env.find(v)->second; }
  const Tensor *getOptional(Value v) { return v ? &get(v) : nullptr; }
  void set(Value v, Tensor t) { env[v] = std::move(t); }

  LogicalResult eval(Operation *op);
  LogicalResult evalConstant(arith::ConstantOp op);

  LogicalResult evalTraining(Operation *op);

  llvm::function_ref<FailureOr<std::vector<Tensor>>(
      func::FuncOp, const std::vector<Tensor> &)>
      call;
  TrainingState *state;
  DenseMap<Value, Tensor> env;
  std::vector<Tensor> returned;
};

FailureOr<std::vector<Tensor>> Frame::run(func::FuncOp fn,
                                          const std::vector<Tensor> &args) {
  if (fn.isExternal())
    return fn.emitError() << "cannot evaluate external function '"
                          << fn.getSymName() << "'";
  if (!fn.getBody().hasOneBlock())
    return fn.emitError() << "the reference interpreter needs a function "
                             "body of one block";
  Block &body = fn.getBody().front();
  if (args.size() != body.getNumArguments())
    return fn.emitError() << "function '" << fn.getSymName() << "' takes "
                          << body.getNumArguments() << " arguments but "
                          << args.size() << " were given";
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || failed(mlir::tfm::reference::elementKindOf(type.getElementType())))
      return fn.emitError() << "argument #" << i << " of type "
                            << arg.getType()
                            << " is not a supported tensor type";
    if (ArrayRef<int64_t>(args[i].shape) != type.getShape() ||
        *::mlir::tfm::reference::elementKindOf(type.getElementType()) !=
            args[i].kind)
      return fn.emitError() << "argument #" << i << " must be " << type
                            << " but the value given is '"
                            << args[i].typeString() << "'";
    set(arg, args[i]);
  }
  // The interpreter holds every value as doubles; refuse up front what the
  // host cannot hold rather than dying in an allocation halfway through.
  constexpr int64_t kMaxElements = int64_t(1) << 30;
  for (Operation &op : body)
    for (Type t : op.getResultTypes())
      if (auto ranked = dyn_cast<RankedTensorType>(t))
        if (ranked.hasStaticShape() && ranked.getNumElements() > kMaxElements)
          return op.emitError()
                 << "result of type " << t << " has "
                 << ranked.getNumElements()
                 << " elements, more than the reference interpreter's limit "
                    "of "
                 << kMaxElements;
  for (Operation &op : body)
    if (failed(eval(&op)))
      return failure();
  return std::move(returned);
}

LogicalResult Frame::evalConstant(arith::ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  FailureOr<Tensor> t = failure();
  if (dense)
    t = Interpreter::fromAttr(dense);
  if (failed(t))
    return op.emitError() << "the reference interpreter evaluates only dense "
                             "tensor constants, not "
                          << op.getValue();
  set(op.getResult(), std::move(*t));
  return success();
}

LogicalResult Frame::eval(Operation *op) {
  using mlir::tfm::MaskKind;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](arith::ConstantOp c) { return evalConstant(c); })
      .Case([&](func::ReturnOp r) {
        for (Value v : r.getOperands())
          returned.push_back(get(v));
        return success();
      })
      .Case([&](func::CallOp c) -> LogicalResult {
        auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
            c, c.getCalleeAttr());
        if (!callee)
          return c.emitError() << "unknown callee '" << c.getCallee() << "'";
        std::vector<Tensor> args;
        for (Value v : c.getOperands())
          args.push_back(get(v));
        auto results = call(callee, args);
        if (failed(results))
          return failure();
        for (auto [r, t] : llvm::zip(c.getResults(), *results))
          set(r, std::move(t));
        return success();
      })
      .Case([&](mlir::tfm::MatmulOp m) {
        set(m, matmul(get(m.getLhs()), get(m.getRhs()), m.getTransposeLhs(),
                      m.getTransposeRhs(), m.getType()));
        return success();
      })
      .Case([&](mlir::tfm::LinearOp l) {
        set(l, linear(get(l.getInput()), get(l.getWeight()),
                      getOptional(l.getBias()), l.getActivation(),
                      tensorOfType(l.getType()).shape));
        return success();
      })
      .Case([&](mlir::tfm::AddOp b) {
        set(b, binary(get(b.getLhs()), get(b.getRhs()), b.getType(),
                      [](double x, double y) { return x + y; }));
        return success();
      })
      .Case([&](mlir::tfm::SubOp b) {
        set(b, binary(get(b.getLhs()), get(b.getRhs()), b.getType(),
                      [](double x, double y) { return x - y; }));
        return success();
      })
      .Case([&](mlir::tfm::MulOp b) {
        set(b, binary(get(b.getLhs()), get(b.getRhs()), b.getType(),
                      [](double x, double y) { return x * y; }));
        return success();
      })
      .Case([&](mlir::tfm::DivOp b) {
        bool isInt = b.getType().getElementType().isInteger();
        set(b, binary(get(b.getLhs()), get(b.getRhs()), b.getType(),
                      isInt ? +[](double x, double y) { return std::trunc(x / y); }
                            : +[](double x, double y) { return x / y; }));
        return success();
      })
      .Case([&](mlir::tfm::PowOp b) {
        set(b, binary(get(b.getLhs()), get(b.getRhs()), b.getType(),
                      [](double x, double y) { return std::pow(x, y); }));
        return success();
      })
      .Case([&](mlir::tfm::MaxOp b) {
        set(b, binary(get(b.getLhs()), get(b.getRhs()), b.getType(),
                      [](double x, double y) {
                        return std::isnan(x) || std::isnan(y) ? NAN
                                                              : std::max(x, y);
                      }));
        return success();
      })
      .Case([&](mlir::tfm::MinOp b) {
        set(b, binary(get(b.getLhs()), get(b.getRhs()), b.getType(),
                      [](double x, double y) {
                        return std::isnan(x) || std::isnan(y) ? NAN
                                                              : std::min(x, y);
                      }));
        return success();
      })
      .Case([&](mlir::tfm::CompareOp c) {
        double (*f)(double, double) = nullptr;
        switch (c.getPredicate()) {
        case mlir::tfm::ComparePredicate::eq:
          f = [](double x, double y) { return double(x == y); };
          break;
        case mlir::tfm::ComparePredicate::ne:
          f = [](double x, double y) { return double(x != y); };
          break;
        case mlir::tfm::ComparePredicate::lt:
          f = [](double x, double y) { return double(x < y); };
          break;
        case mlir::tfm::ComparePredicate::le:
          f = [](double x, double y) { return double(x <= y); };
          break;
        case mlir::tfm::ComparePredicate::gt:
          f = [](double x, double y) { return double(x > y); };
          break;
        case mlir::tfm::ComparePredicate::ge:
          f = [](double x, double y) { return double(x >= y); };
          break;
        }
        set(c, binary(get(c.getLhs()), get(c.getRhs()), c.getType(), f));
        return success();
      })
      .Case([&](mlir::tfm::SelectOp s) {
        Tensor out = tensorOfType(s.getType());
        const Tensor &c = get(s.getCondition()), &t = get(s.getTrueValue()),
                     &f = get(s.getFalseValue());
        std::vector<int64_t> cm = broadcastMap(c.shape, out.shape),
                             tm = broadcastMap(t.shape, out.shape),
                             fm = broadcastMap(f.shape, out.shape);
        for (size_t i = 0; i < out.data.size(); ++i)
          out.data[i] = c.data[cm[i]] != 0 ? t.data[tm[i]] : f.data[fm[i]];
        set(s, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::CastOp c) {
        Tensor out = tensorOfType(c.getType());
        const Tensor &in = get(c.getInput());
        for (size_t i = 0; i < out.data.size(); ++i)
          out.data[i] = roundToKind(in.data[i], out.kind);
        set(c, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::BroadcastOp b) {
        Tensor out = tensorOfType(b.getType());
        const Tensor &in = get(b.getInput());
        std::vector<int64_t> map = broadcastMap(in.shape, out.shape);
        for (size_t i = 0; i < out.data.size(); ++i)
          out.data[i] = in.data[map[i]];
        set(b, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::SliceOp sl) {
        const Tensor &in = get(sl.getInput());
        Tensor out = tensorOfType(sl.getType());
        std::vector<int64_t> inStrides = stridesOf(in.shape);
        ArrayRef<int64_t> starts = sl.getStarts(), steps = sl.getSteps();
        std::vector<int64_t> idx(out.shape.size(), 0);
        for (double &v : out.data) {
          int64_t src = 0;
          for (size_t d = 0; d < idx.size(); ++d)
            src += (starts[d] + idx[d] * steps[d]) * inStrides[d];
          v = in.data[src];
          for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
            if (++idx[d] < out.shape[d])
              break;
            idx[d] = 0;
          }
        }
        set(sl, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::GatherOp g) -> LogicalResult {
        const Tensor &in = get(g.getInput());
        const Tensor &ids = get(g.getIndices());
        int64_t axis = normalizedAxis(g.getAxis(), in.rank());
        int64_t outer = product(ArrayRef<int64_t>(in.shape).take_front(axis));
        int64_t inner =
            product(ArrayRef<int64_t>(in.shape).drop_front(axis + 1));
        int64_t n = in.shape[axis];
        Tensor out = tensorOfType(g.getType());
        size_t count = ids.data.size();
        for (size_t j = 0; j < count; ++j) {
          auto id = static_cast<int64_t>(ids.data[j]);
          if (id < -n || id >= n)
            return g.emitError() << "index " << id << " at position " << j
                                 << " of 'indices' is outside [" << -n
                                 << ", " << n << ")";
          if (id < 0)
            id += n;
          for (int64_t o = 0; o < outer; ++o)
            std::copy_n(in.data.begin() + (o * n + id) * inner, inner,
                        out.data.begin() + (o * count + j) * inner);
        }
        set(g, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::ReduceOp r) {
        using mlir::tfm::ReduceKind;
        const Tensor &in = get(r.getInput());
        Tensor out = tensorOfType(r.getType());
        std::vector<bool> reduced(in.rank(), false);
        for (int64_t a : r.getAxes())
          reduced[normalizedAxis(a, in.rank())] = true;
        // The output strides, with reduced dimensions contributing nothing.
        std::vector<int64_t> keptShape;
        for (int64_t d = 0; d < in.rank(); ++d)
          keptShape.push_back(reduced[d] ? 1 : in.shape[d]);
        std::vector<int64_t> outStrides = stridesOf(keptShape);
        ReduceKind kind = r.getKind();
        double init = kind == ReduceKind::max   ? -INFINITY
                      : kind == ReduceKind::min ? INFINITY
                                                : 0.0;
        std::fill(out.data.begin(), out.data.end(), init);
        std::vector<int64_t> idx(in.rank(), 0);
        for (double v : in.data) {
          int64_t dst = 0;
          for (int64_t d = 0; d < in.rank(); ++d)
            if (!reduced[d])
              dst += idx[d] * outStrides[d];
          double &acc = out.data[dst];
          if (kind == ReduceKind::max)
            acc = std::isnan(v) ? v : std::max(acc, v);
          else if (kind == ReduceKind::min)
            acc = std::isnan(v) ? v : std::min(acc, v);
          else
            acc += v;
          for (int64_t d = in.rank() - 1; d >= 0; --d) {
            if (++idx[d] < in.shape[d])
              break;
            idx[d] = 0;
          }
        }
        if (kind == ReduceKind::mean && !out.data.empty()) {
          double count = static_cast<double>(in.data.size()) /
                         static_cast<double>(out.data.size());
          for (double &v : out.data)
            v /= count;
        }
        set(r, std::move(out));
        return success();
      })
      .Case([&](math::SqrtOp m) {
        set(m.getResult(), unary(get(m.getOperand()), [](double x) { return std::sqrt(x); }));
        return success();
      })
      .Case([&](math::ErfOp m) {
        set(m.getResult(), unary(get(m.getOperand()), [](double x) { return std::erf(x); }));
        return success();
      })
      .Case([&](math::TanhOp m) {
        set(m.getResult(), unary(get(m.getOperand()), [](double x) { return std::tanh(x); }));
        return success();
      })
      .Case([&](math::ExpOp m) {
        set(m.getResult(), unary(get(m.getOperand()), [](double x) { return std::exp(x); }));
        return success();
      })
      .Case([&](math::LogOp m) {
        set(m.getResult(), unary(get(m.getOperand()), [](double x) { return std::log(x); }));
        return success();
      })
      .Case([&](math::AbsFOp m) {
        set(m.getResult(), unary(get(m.getOperand()), [](double x) { return std::fabs(x); }));
        return success();
      })
      .Case([&](arith::NegFOp m) {
        set(m.getResult(), unary(get(m.getOperand()), [](double x) { return -x; }));
        return success();
      })
      .Case([&](mlir::tfm::ReluOp r) {
        Tensor t = get(r.getInput());
        for (double &x : t.data)
          x = x > 0 ? x : 0.0;
        set(r, std::move(t));
        return success();
      })
      .Case([&](mlir::tfm::GeluOp g) {
        Tensor t = get(g.getInput());
        bool approx = g.getApproximate() == mlir::tfm::GeluApproximation::tanh;
        for (double &x : t.data)
          x = gelu(x, approx);
        set(g, std::move(t));
        return success();
      })
      .Case([&](mlir::tfm::SoftmaxOp s) {
        const Tensor &in = get(s.getInput());
        int64_t axis = normalizedAxis(s.getAxis(), in.rank());
        // Move the axis innermost, apply, and move it back.
        SmallVector<int64_t> perm, inverse(in.rank());
        for (int64_t d = 0; d < in.rank(); ++d)
          if (d != axis)
            perm.push_back(d);
        perm.push_back(axis);
        for (int64_t d = 0; d < in.rank(); ++d)
          inverse[perm[d]] = d;
        Tensor moved = transposed(in, perm);
        softmaxRows(moved.data, moved.shape.back());
        set(s, transposed(moved, inverse));
        return success();
      })
      .Case([&](mlir::tfm::LayerNormOp l) {
        const Tensor &x = get(l.getInput());
        set(l, layerNorm(x, get(l.getScale()), getOptional(l.getBias()),
                         normalizedAxis(l.getAxis(), x.rank()),
                         l.getEpsilon().convertToDouble()));
        return success();
      })
      .Case([&](mlir::tfm::EmbeddingOp e) -> LogicalResult {
        const Tensor &table = get(e.getTable());
        const Tensor &ids = get(e.getIndices());
        int64_t vocab = table.shape[0], dim = table.shape[1];
        Tensor out = tensorOfType(e.getType());
        for (size_t i = 0; i < ids.data.size(); ++i) {
          int64_t id = static_cast<int64_t>(ids.data[i]);
          if (id < 0 || id >= vocab)
            return e.emitError() << "index " << id << " at position " << i
                                 << " of 'indices' is outside the table's "
                                 << vocab << " rows";
          std::copy_n(table.data.begin() + id * dim, dim,
                      out.data.begin() + i * dim);
        }
        set(e, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::PositionalEncodingOp p) {
        Tensor out = tensorOfType(p.getType());
        int64_t len = out.shape[0], dim = out.shape[1];
        for (int64_t pos = 0; pos < len; ++pos)
          for (int64_t i = 0; i < dim; i += 2) {
            double angle =
                pos / std::pow(10000.0, static_cast<double>(i) / dim);
            out.data[pos * dim + i] = std::sin(angle);
            out.data[pos * dim + i + 1] = std::cos(angle);
          }
        set(p, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::TransposeOp t) {
        set(t, transposed(get(t.getInput()), t.getPermutation()));
        return success();
      })
      .Case([&](mlir::tfm::ReshapeOp r) {
        Tensor out = tensorOfType(r.getType());
        out.data = get(r.getInput()).data;
        set(r, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::ConcatOp c) {
        Tensor out = tensorOfType(c.getType());
        int64_t axis = normalizedAxis(c.getAxis(), out.rank());
        int64_t outer = product(ArrayRef<int64_t>(out.shape).take_front(axis));
        int64_t inner =
            product(ArrayRef<int64_t>(out.shape).drop_front(axis + 1));
        int64_t offset = 0;
        for (Value v : c.getInputs()) {
          const Tensor &in = get(v);
          int64_t chunk = in.shape[axis] * inner;
          for (int64_t o = 0; o < outer; ++o)
            std::copy_n(in.data.begin() + o * chunk, chunk,
                        out.data.begin() + o * out.shape[axis] * inner +
                            offset);
          offset += chunk;
        }
        set(c, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::SplitOp s) {
        const Tensor &in = get(s.getInput());
        std::vector<Tensor> parts =
            split(in, normalizedAxis(s.getAxis(), in.rank()), s.getSizes());
        for (auto [r, t] : llvm::zip(s.getResults(), parts))
          set(r, std::move(t));
        return success();
      })
      .Case([&](mlir::tfm::DropoutOp d) {
        Tensor t = get(d.getInput());
        double rate = d.getRate().convertToDouble();
        if (d.getTraining() && rate > 0) {
          auto seed = static_cast<uint64_t>(d.getSeed());
          if (d.getStep())
            seed = tfm_rng_stream(
                seed, static_cast<uint64_t>(get(d.getStep()).data[0]));
          for (size_t i = 0; i < t.data.size(); ++i)
            t.data[i] = tfm_rng_uniform(seed, i) >= rate
                            ? t.data[i] / (1.0 - rate)
                            : 0.0;
        }
        set(d, std::move(t));
        return success();
      })
      .Case([&](mlir::tfm::AttentionOp a) {
        const Tensor &q = get(a.getQuery());
        double scale = a.getScale() ? a.getScale()->convertToDouble()
                                    : 1.0 / std::sqrt(double(q.shape.back()));
        std::vector<int64_t> scoreShape = q.shape;
        scoreShape.back() = get(a.getKey()).shape[q.rank() - 2];
        Tensor scores = matmul(q, get(a.getKey()), false, true,
                               RankedTensorType::get(
                                   scoreShape, a.getQuery().getType()
                                                   .getElementType()));
        const Tensor *mask = getOptional(a.getMask());
        bool boolean = mask && mask->kind == ElementKind::I1;
        Tensor probs =
            maskedSoftmax(scores, mask, boolean, a.getCausal(), scale);
        set(a, matmul(probs, get(a.getValue()), false, false, a.getType()));
        return success();
      })
      .Case([&](mlir::tfm::CrossEntropyOp c) -> LogicalResult {
        const Tensor &logits = get(c.getLogits());
        const Tensor &labels = get(c.getLabels());
        int64_t classes = logits.shape.back();
        double eps = c.getLabelSmoothing().convertToDouble();
        auto ignore = static_cast<int64_t>(c.getIgnoreIndex());
        double total = 0;
        int64_t count = 0;
        for (size_t t = 0; t < labels.data.size(); ++t) {
          auto label = static_cast<int64_t>(labels.data[t]);
          if (label == ignore)
            continue;
          if (label < 0 || label >= classes)
            return c.emitError()
                   << "label " << label << " at position " << t
                   << " is outside [0, " << classes
                   << ") and is not the ignore_index " << ignore;
          const double *x = logits.data.data() + t * classes;
          double mx = kNegInf, sum = 0, sumLogp = 0;
          for (int64_t k = 0; k < classes; ++k)
            mx = std::max(mx, x[k]);
          for (int64_t k = 0; k < classes; ++k)
            sum += std::exp(x[k] - mx);
          double lse = mx + std::log(sum);
          for (int64_t k = 0; k < classes; ++k)
            sumLogp += x[k] - lse;
          total += -(1 - eps) * (x[label] - lse) - eps / classes * sumLogp;
          ++count;
        }
        // Like PyTorch, a batch with every label ignored has a NaN mean.
        Tensor out = tensorOfType(c.getType());
        out.data[0] = total / static_cast<double>(count);
        set(c, std::move(out));
        return success();
      })
      .Case([&](mlir::tfm::QKVProjectionOp p) {
        const Tensor &x = get(p.getInput());
        std::vector<int64_t> fusedShape = x.shape;
        fusedShape.back() = get(p.getWeight()).shape[0];
        Tensor fused = linear(x, get(p.getWeight()), getOptional(p.getBias()),
                              mlir::tfm::Activation::none, fusedShape);
        std::vector<Tensor> parts =
            split(fused, fused.rank() - 1, p.getSizes());
        for (auto [r, t] : llvm::zip(p.getResults(), parts))
          set(r, std::move(t));
        return success();
      })
      .Case([&](mlir::tfm::MaskedSoftmaxOp m) {
        set(m, maskedSoftmax(get(m.getInput()), getOptional(m.getMask()),
                             m.getMaskKind() == MaskKind::boolean,
                             m.getCausal(), m.getScale().convertToDouble()));
        return success();
      })
      .Case([&](mlir::tfm::AddLayerNormOp a) {
        Tensor sum = binary(get(a.getInput()), get(a.getResidual()),
                            a.getOutput().getType(),
                            [](double x, double y) { return x + y; });
        set(a.getOutput(),
            layerNorm(sum, get(a.getScale()), getOptional(a.getBias()),
                      normalizedAxis(a.getAxis(), sum.rank()),
                      a.getEpsilon().convertToDouble()));
        if (a.getSum())
          set(a.getSum(), std::move(sum));
        return success();
      })
      .Case<mlir::tfm::ParameterOp, mlir::tfm::NextStepOp,
            mlir::tfm::CrossEntropyGradOp, mlir::tfm::EmbeddingGradOp,
            mlir::tfm::LayerNormGradOp,
            mlir::tfm::SGDUpdateOp, mlir::tfm::AdamUpdateOp>(
          [&](Operation *t) { return evalTraining(t); })
      .Default([&](Operation *other) {
        return other->emitError()
               << "the reference interpreter does not evaluate '"
               << other->getName() << "'";
      });
}

LogicalResult Frame::evalTraining(Operation *op) {
  using namespace mlir::tfm;
  auto needState = [&]() -> LogicalResult {
    if (state)
      return success();
    return op->emitError() << "'" << op->getName()
                           << "' needs a training state; evaluate the whole "
                              "function rather than one op";
  };
  auto parameter = [&](StringRef name, Type type) -> Tensor * {
    auto it = state->parameters.find(name.str());
    if (it == state->parameters.end())
      return nullptr;
    if (ArrayRef<int64_t>(it->second.shape) !=
        cast<RankedTensorType>(type).getShape())
      return nullptr;
    return &it->second;
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ParameterOp p) -> LogicalResult {
        if (state)
          if (Tensor *t = parameter(p.getName(), p.getType())) {
            set(p, *t);
            return success();
          }
        auto dense = dyn_cast<DenseElementsAttr>(p.getInitialValue());
        FailureOr<Tensor> t = failure();
        if (dense)
          t = Interpreter::fromAttr(dense);
        if (failed(t))
          return p.emitError() << "the reference interpreter needs a dense "
                                  "initial value";
        set(p, std::move(*t));
        return success();
      })
      .Case([&](NextStepOp n) -> LogicalResult {
        if (failed(needState()))
          return failure();
        Tensor t(ElementKind::I64, {});
        t.data[0] = static_cast<double>(++state->step);
        set(n, std::move(t));
        return success();
      })
      .Case([&](CrossEntropyGradOp c) -> LogicalResult {
        const Tensor &logits = get(c.getLogits());
        const Tensor &labels = get(c.getLabels());
        double grad = get(c.getGrad()).data[0];
        int64_t classes = logits.shape.back();
        double eps = c.getLabelSmoothing().convertToDouble();
        auto ignore = static_cast<int64_t>(c.getIgnoreIndex());
        int64_t count = 0;
        for (double l : labels.data)
          count += static_cast<int64_t>(l) != ignore;
        Tensor out = tensorOfType(c.getType());
        for (size_t t = 0; t < labels.data.size(); ++t) {
          auto label = static_cast<int64_t>(labels.data[t]);
          if (label == ignore)
            continue;
          if (label < 0 || label >= classes)
            return c.emitError()
                   << "label " << label << " at position " << t
                   << " is outside [0, " << classes
                   << ") and is not the ignore_index " << ignore;
          const double *x = logits.data.data() + t * classes;
          double *d = out.data.data() + t * classes;
          double mx = kNegInf, sum = 0;
          for (int64_t k = 0; k < classes; ++k)
            mx = std::max(mx, x[k]);
          for (int64_t k = 0; k < classes; ++k)
            sum += std::exp(x[k] - mx);
          for (int64_t k = 0; k < classes; ++k) {
            double target = eps / classes + (k == label ? 1 - eps : 0.0);
            d[k] = grad * (std::exp(x[k] - mx) / sum - target) /
                   static_cast<double>(count);
          }
        }
        set(c, std::move(out));
        return success();
      })
      .Case([&](LayerNormGradOp op) {
        const Tensor &x = get(op.getInput());
        const Tensor &scale = get(op.getScale());
        const Tensor &dy = get(op.getGrad());
        Tensor dx = tensorOfType(op.getInputGrad().getType());
        Tensor dscale = tensorOfType(op.getScaleGrad().getType());
        Tensor dbias = tensorOfType(op.getBiasGrad().getType());
        int64_t n = static_cast<int64_t>(scale.data.size());
        int64_t rows = n ? static_cast<int64_t>(x.data.size()) / n : 0;
        double eps = op.getEpsilon().convertToDouble();
        std::vector<double> xhat(n), g(n);
        for (int64_t r = 0; r < rows; ++r) {
          const double *xr = &x.data[r * n], *dr = &dy.data[r * n];
          double mean = 0, var = 0;
          for (int64_t j = 0; j < n; ++j)
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
          meanG /= double(n);
          meanGX /= double(n);
          for (int64_t j = 0; j < n; ++j)
            dx.data[r * n + j] = rstd * (g[j] - meanG - xhat[j] * meanGX);
        }
        set(op.getInputGrad(), std::move(dx));
        set(op.getScaleGrad(), std::move(dscale));
        set(op.getBiasGrad(), std::move(dbias));
        return success();
      })
      .Case([&](EmbeddingGradOp e) {
        const Tensor &grad = get(e.getGrad());
        const Tensor &idx = get(e.getIndices());
        Tensor out = tensorOfType(e.getType());
        int64_t rows = out.shape[0], width = out.shape[1];
        for (size_t i = 0; i < idx.data.size(); ++i) {
          auto row = static_cast<int64_t>(idx.data[i]);
          if (row < 0 || row >= rows)
            continue;
          for (int64_t j = 0; j < width; ++j)
            out.data[row * width + j] += grad.data[i * width + j];
        }
        set(e, std::move(out));
        return success();
      })
      .Case<SGDUpdateOp, AdamUpdateOp>([&](auto u) -> LogicalResult {
        if (failed(needState()))
          return failure();
        Type type = u.getGrad().getType();
        std::string name = u.getParameter().str();
        Tensor *p = parameter(name, type);
        if (!p) {
          // The first update starts from the parameter's initial value.
          auto fn = u->template getParentOfType<func::FuncOp>();
          ParameterOp init;
          fn.walk([&](ParameterOp q) {
            if (q.getName() == name)
              init = q;
          });
          if (!init)
            return u.emitError() << "updates '" << name
                                 << "', which no tfm.parameter defines";
          auto dense = dyn_cast<DenseElementsAttr>(init.getInitialValue());
          FailureOr<Tensor> t = failure();
          if (dense)
            t = Interpreter::fromAttr(dense);
          if (failed(t))
            return init.emitError() << "needs a dense initial value";
          p = &(state->parameters[name] = std::move(*t));
        }
        const Tensor &g = get(u.getGrad());
        int64_t step = static_cast<int64_t>(get(u.getStep()).data[0]);
        double lr = learningRateAt(u.getSchedule(), u.getLr().convertToDouble(),
                                   static_cast<int64_t>(u.getDModel()),
                                   static_cast<int64_t>(u.getWarmup()), step);
        double wd = u.getWeightDecay().convertToDouble();
        if constexpr (std::is_same_v<decltype(u), SGDUpdateOp>) {
          for (size_t i = 0; i < p->data.size(); ++i)
            p->data[i] -= lr * (g.data[i] + wd * p->data[i]);
        } else {
          double b1 = u.getBeta1().convertToDouble();
          double b2 = u.getBeta2().convertToDouble();
          double eps = u.getEps().convertToDouble();
          Tensor &m = state->firstMoments
                          .try_emplace(name, p->kind, p->shape)
                          .first->second;
          Tensor &v = state->secondMoments
                          .try_emplace(name, p->kind, p->shape)
                          .first->second;
          double c1 = 1 - std::pow(b1, double(step));
          double c2 = 1 - std::pow(b2, double(step));
          for (size_t i = 0; i < p->data.size(); ++i) {
            double gi = g.data[i] + wd * p->data[i];
            m.data[i] = b1 * m.data[i] + (1 - b1) * gi;
            v.data[i] = b2 * v.data[i] + (1 - b2) * gi * gi;
            p->data[i] -=
                lr * (m.data[i] / c1) / (std::sqrt(v.data[i] / c2) + eps);
          }
        }
        return success();
      })
      .Default([](Operation *) { return failure(); });
}

} // namespace

FailureOr<Tensor> Interpreter::fromAttr(DenseElementsAttr dense) {
  auto type = dyn_cast<RankedTensorType>(dense.getType());
  if (!type || failed(::mlir::tfm::reference::elementKindOf(type.getElementType())))
    return failure();
  Tensor t = tensorOfType(type);
  Type elt = type.getElementType();
  size_t i = 0;
  if (isa<FloatType>(elt)) {
    for (APFloat v : dense.getValues<APFloat>())
      t.data[i++] = toDouble(v);
  } else if (elt.isInteger(1)) {
    for (bool v : dense.getValues<bool>())
      t.data[i++] = v ? 1.0 : 0.0;
  } else {
    for (APInt v : dense.getValues<APInt>())
      t.data[i++] = static_cast<double>(v.getSExtValue());
  }
  return t;
}

DenseElementsAttr Interpreter::toAttr(const Tensor &t, RankedTensorType type) {
  Type elt = type.getElementType();
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> values;
    values.reserve(t.data.size());
    for (double v : t.data) {
      APFloat f(v);
      bool losesInfo = false;
      f.convert(ft.getFloatSemantics(), llvm::RoundingMode::NearestTiesToEven,
                &losesInfo);
      values.push_back(f);
    }
    return DenseElementsAttr::get(type, values);
  }
  if (elt.isInteger(1)) {
    SmallVector<bool> values;
    for (double v : t.data)
      values.push_back(v != 0);
    return DenseElementsAttr::get(type, values);
  }
  SmallVector<APInt> values;
  unsigned width = elt.getIntOrFloatBitWidth();
  for (double v : t.data)
    values.push_back(APInt(width, static_cast<int64_t>(v), /*isSigned=*/true));
  return DenseElementsAttr::get(type, values);
}

FailureOr<std::vector<Tensor>>
Interpreter::evaluate(Operation *op, const std::vector<Tensor> &operands) {
  auto noCalls = [](func::FuncOp fn, const std::vector<Tensor> &)
      -> FailureOr<std::vector<Tensor>> {
    return fn.emitError() << "calls cannot be evaluated one op at a time";
  };
  Frame frame(noCalls, nullptr);
  return frame.runOne(op, operands);
}

FailureOr<std::vector<Tensor>>
Interpreter::run(func::FuncOp fn, const std::vector<Tensor> &args) {
  // Recursion is legal IR but unbounded recursion must not crash the host.
  constexpr unsigned kMaxCallDepth = 64;
  if (callDepth >= kMaxCallDepth)
    return fn.emitError() << "call depth exceeds " << kMaxCallDepth
                          << " while evaluating '" << fn.getSymName() << "'";
  ++callDepth;
  auto callee = [this](func::FuncOp fn, const std::vector<Tensor> &a) {
    return run(fn, a);
  };
  Frame frame(callee, &trainingState);
  auto results = frame.run(fn, args);
  --callDepth;
  return results;
}
