//===- Interpreter.cpp - The reference interpreter's dispatcher -----------===//
//
// Evaluates a function body op by op: each op's operands are read from the
// frame, its semantics (Ops.h) computed, its results stored. Ops are looked
// up by name in one table, which also answers which ops have semantics.
// Shapes are taken from the ops' (verified) result types.
//
//===----------------------------------------------------------------------===//

#include "tfm/Reference/Interpreter.h"
#include "tfm/Reference/Ops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::reference;

FailureOr<ElementKind> mlir::tfm::reference::elementKindOf(Type type) {
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
  bool u = type.isUnsignedInteger();
  if (type.isInteger(4))
    return u ? ElementKind::U4 : ElementKind::I4;
  if (type.isInteger(8))
    return u ? ElementKind::U8 : ElementKind::I8;
  if (type.isInteger(16))
    return u ? ElementKind::U16 : ElementKind::I16;
  if (type.isInteger(32))
    return u ? ElementKind::U32 : ElementKind::I32;
  if (type.isInteger(64))
    return u ? ElementKind::U64 : ElementKind::I64;
  return failure();
}

Type mlir::tfm::reference::elementTypeOf(MLIRContext *context,
                                         ElementKind kind) {
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
  case ElementKind::I8:
    return b.getI8Type();
  case ElementKind::I16:
    return b.getI16Type();
  case ElementKind::U8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case ElementKind::U16:
    return b.getIntegerType(16, /*isSigned=*/false);
  case ElementKind::U32:
    return b.getIntegerType(32, /*isSigned=*/false);
  case ElementKind::U64:
    return b.getIntegerType(64, /*isSigned=*/false);
  case ElementKind::I4:
    return b.getIntegerType(4);
  case ElementKind::U4:
    return b.getIntegerType(4, /*isSigned=*/false);
  }
  return {};
}

namespace {

ElementKind kindOf(Type type) {
  return *elementKindOf(cast<ShapedType>(type).getElementType());
}

ArrayRef<int64_t> shapeOf(Type type) {
  return cast<ShapedType>(type).getShape();
}

int64_t normalizedAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

double toDouble(APFloat v) {
  bool losesInfo = false;
  v.convert(APFloat::IEEEdouble(), llvm::RoundingMode::NearestTiesToEven,
            &losesInfo);
  return v.convertToDouble();
}

/// The values of one function body's evaluation.
class Frame {
public:
  using Call = llvm::function_ref<FailureOr<std::vector<Tensor>>(
      func::FuncOp, const std::vector<Tensor> &)>;
  Frame(Call call, TrainingState *state) : call(call), state(state) {}

  FailureOr<std::vector<Tensor>> run(func::FuncOp fn,
                                     const std::vector<Tensor> &args);
  /// Evaluates `op` alone on the given operand values.
  FailureOr<std::vector<Tensor>> runOne(Operation *op,
                                        const std::vector<Tensor> &operands);

  const Tensor &get(Value v) { return env.find(v)->second; }
  const Tensor *getOptional(Value v) { return v ? &get(v) : nullptr; }
  void set(Value v, Tensor t) { env[v] = std::move(t); }
  LogicalResult eval(Operation *op);

  Call call;
  TrainingState *state;
  std::vector<Tensor> returned;

private:
  DenseMap<Value, Tensor> env;
};

using EvalFn = std::function<LogicalResult(Operation *, Frame &)>;

/// Registers `fn(OpTy, Frame &)` under OpTy's name.
template <typename OpTy, typename Fn>
void on(llvm::StringMap<EvalFn> &table, Fn fn) {
  table[OpTy::getOperationName()] = [fn](Operation *op, Frame &f) {
    return fn(cast<OpTy>(op), f);
  };
}

/// An op's semantics that can fail: the error goes to the op.
LogicalResult orError(Operation *op, FailureOr<Tensor> result,
                      const std::string &error, Frame &f) {
  if (failed(result))
    return op->emitError() << error;
  f.set(op->getResult(0), std::move(*result));
  return success();
}

/// A parameter's current value: the state's, or its initial value.
FailureOr<Tensor> parameterValue(Operation *op, StringRef name, Type type,
                                 Frame &f) {
  if (f.state) {
    auto it = f.state->parameters.find(name.str());
    if (it != f.state->parameters.end() &&
        ArrayRef<int64_t>(it->second.shape) == shapeOf(type))
      return it->second;
  }
  ParameterOp init = dyn_cast<ParameterOp>(op);
  if (!init)
    op->getParentOfType<func::FuncOp>().walk([&](ParameterOp p) {
      if (p.getName() == name)
        init = p;
    });
  if (!init)
    return op->emitError() << "updates '" << name
                           << "', which no tfm.parameter defines";
  auto dense = dyn_cast<DenseElementsAttr>(init.getInitialValue());
  FailureOr<Tensor> t = failure();
  if (dense)
    t = Interpreter::fromAttr(dense);
  if (failed(t))
    return init.emitError() << "the reference interpreter needs a dense "
                               "initial value";
  return t;
}

template <typename OpTy>
void onBinary(llvm::StringMap<EvalFn> &t, BinaryKind kind) {
  on<OpTy>(t, [kind](OpTy op, Frame &f) {
    f.set(op, evalBinary(kind, f.get(op.getLhs()), f.get(op.getRhs()),
                         kindOf(op.getType()), shapeOf(op.getType())));
    return success();
  });
}

template <typename OpTy>
void onUnary(llvm::StringMap<EvalFn> &t, double (*fn)(double)) {
  on<OpTy>(t, [fn](OpTy op, Frame &f) {
    f.set(op.getResult(), evalUnary(f.get(op.getOperand()), fn));
    return success();
  });
}

llvm::StringMap<EvalFn> buildTable() {
  llvm::StringMap<EvalFn> t;
  // Structure.
  on<arith::ConstantOp>(t, [](arith::ConstantOp c, Frame &f) -> LogicalResult {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    FailureOr<Tensor> value = failure();
    if (dense)
      value = Interpreter::fromAttr(dense);
    if (failed(value))
      return c.emitError() << "the reference interpreter evaluates only dense "
                              "tensor constants, not "
                           << c.getValue();
    f.set(c.getResult(), std::move(*value));
    return success();
  });
  on<func::ReturnOp>(t, [](func::ReturnOp r, Frame &f) {
    for (Value v : r.getOperands())
      f.returned.push_back(f.get(v));
    return success();
  });
  on<func::CallOp>(t, [](func::CallOp c, Frame &f) -> LogicalResult {
    auto callee =
        SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(c, c.getCalleeAttr());
    if (!callee)
      return c.emitError() << "unknown callee '" << c.getCallee() << "'";
    std::vector<Tensor> args;
    for (Value v : c.getOperands())
      args.push_back(f.get(v));
    auto results = f.call(callee, args);
    if (failed(results))
      return failure();
    for (auto [r, value] : llvm::zip(c.getResults(), *results))
      f.set(r, std::move(value));
    return success();
  });

  // Elementwise.
  onBinary<AddOp>(t, BinaryKind::Add);
  onBinary<SubOp>(t, BinaryKind::Sub);
  onBinary<MulOp>(t, BinaryKind::Mul);
  onBinary<DivOp>(t, BinaryKind::Div);
  onBinary<PowOp>(t, BinaryKind::Pow);
  onBinary<MaxOp>(t, BinaryKind::Max);
  onBinary<MinOp>(t, BinaryKind::Min);
  on<CompareOp>(t, [](CompareOp c, Frame &f) {
    f.set(c, evalCompare(c.getPredicate(), f.get(c.getLhs()),
                         f.get(c.getRhs()), shapeOf(c.getType())));
    return success();
  });
  on<SelectOp>(t, [](SelectOp s, Frame &f) {
    f.set(s, evalSelect(f.get(s.getCondition()), f.get(s.getTrueValue()),
                        f.get(s.getFalseValue()), kindOf(s.getType()),
                        shapeOf(s.getType())));
    return success();
  });
  on<CastOp>(t, [](CastOp c, Frame &f) {
    f.set(c, evalCast(f.get(c.getInput()), kindOf(c.getType())));
    return success();
  });
  on<ReluOp>(t, [](ReluOp r, Frame &f) {
    f.set(r, evalUnary(f.get(r.getInput()),
                       [](double x) { return x > 0 ? x : 0.0; }));
    return success();
  });
  on<GeluOp>(t, [](GeluOp g, Frame &f) {
    f.set(g, evalGelu(f.get(g.getInput()), g.getApproximate()));
    return success();
  });
  on<DropoutOp>(t, [](DropoutOp d, Frame &f) {
    std::optional<int64_t> step;
    if (d.getStep())
      step = f.get(d.getStep()).getInt(0);
    f.set(d, evalDropout(f.get(d.getInput()), d.getRate().convertToDouble(),
                         d.getTraining(), static_cast<uint64_t>(d.getSeed()),
                         step));
    return success();
  });
  onUnary<math::SqrtOp>(t, [](double x) { return std::sqrt(x); });
  onUnary<math::ErfOp>(t, [](double x) { return std::erf(x); });
  onUnary<math::TanhOp>(t, [](double x) { return std::tanh(x); });
  onUnary<math::ExpOp>(t, [](double x) { return std::exp(x); });
  onUnary<math::LogOp>(t, [](double x) { return std::log(x); });
  onUnary<math::AbsFOp>(t, [](double x) { return std::fabs(x); });
  onUnary<math::SinOp>(t, [](double x) { return std::sin(x); });
  onUnary<math::CosOp>(t, [](double x) { return std::cos(x); });
  onUnary<math::FloorOp>(t, [](double x) { return std::floor(x); });
  onUnary<math::CeilOp>(t, [](double x) { return std::ceil(x); });
  onUnary<math::TruncOp>(t, [](double x) { return std::trunc(x); });
  // The default rounding mode rounds halves to even.
  onUnary<math::RoundEvenOp>(t, [](double x) { return std::nearbyint(x); });
  onUnary<arith::NegFOp>(t, [](double x) { return -x; });

  // Data movement.
  on<BroadcastOp>(t, [](BroadcastOp b, Frame &f) {
    f.set(b, evalBroadcast(f.get(b.getInput()), shapeOf(b.getType())));
    return success();
  });
  on<TransposeOp>(t, [](TransposeOp op, Frame &f) {
    f.set(op, evalTranspose(f.get(op.getInput()), op.getPermutation()));
    return success();
  });
  on<ReshapeOp>(t, [](ReshapeOp r, Frame &f) {
    f.set(r, evalReshape(f.get(r.getInput()), shapeOf(r.getType())));
    return success();
  });
  on<SliceOp>(t, [](SliceOp s, Frame &f) {
    f.set(s, evalSlice(f.get(s.getInput()), s.getStarts(), s.getSteps(),
                       shapeOf(s.getType())));
    return success();
  });
  on<GatherOp>(t, [](GatherOp g, Frame &f) {
    std::string error;
    const Tensor &in = f.get(g.getInput());
    auto r = evalGather(in, f.get(g.getIndices()),
                        normalizedAxis(g.getAxis(), in.rank()),
                        shapeOf(g.getType()), error);
    return orError(g, std::move(r), error, f);
  });
  on<TopKOp>(t, [](TopKOp op, Frame &f) {
    const Tensor &in = f.get(op.getInput());
    std::vector<Tensor> r =
        evalTopK(in, op.getK(), normalizedAxis(op.getAxis(), in.rank()),
                 op.getSmallest());
    f.set(op.getValues(), std::move(r[0]));
    f.set(op.getIndices(), std::move(r[1]));
    return success();
  });
  on<ScatterNDOp>(t, [](ScatterNDOp s, Frame &f) {
    std::string error;
    auto r = evalScatterND(f.get(s.getInput()), f.get(s.getIndices()),
                           f.get(s.getUpdates()), s.getReduction(), error);
    return orError(s, std::move(r), error, f);
  });
  on<EmbeddingOp>(t, [](EmbeddingOp e, Frame &f) {
    std::string error;
    auto r = evalEmbedding(f.get(e.getTable()), f.get(e.getIndices()),
                           shapeOf(e.getType()), error);
    return orError(e, std::move(r), error, f);
  });
  on<ConcatOp>(t, [](ConcatOp c, Frame &f) {
    SmallVector<const Tensor *> inputs;
    for (Value v : c.getInputs())
      inputs.push_back(&f.get(v));
    f.set(c, evalConcat(inputs, normalizedAxis(c.getAxis(), c.getType().getRank()),
                        shapeOf(c.getType())));
    return success();
  });
  on<SplitOp>(t, [](SplitOp s, Frame &f) {
    const Tensor &in = f.get(s.getInput());
    std::vector<Tensor> parts =
        evalSplit(in, normalizedAxis(s.getAxis(), in.rank()), s.getSizes());
    for (auto [r, part] : llvm::zip(s.getResults(), parts))
      f.set(r, std::move(part));
    return success();
  });
  on<PositionalEncodingOp>(t, [](PositionalEncodingOp p, Frame &f) {
    f.set(p, evalPositionalEncoding(kindOf(p.getType()), shapeOf(p.getType())));
    return success();
  });

  // Neural-network ops.
  on<MatmulOp>(t, [](MatmulOp m, Frame &f) {
    f.set(m, evalMatmul(f.get(m.getLhs()), f.get(m.getRhs()),
                        m.getTransposeLhs(), m.getTransposeRhs(),
                        kindOf(m.getType()), shapeOf(m.getType())));
    return success();
  });
  on<LinearOp>(t, [](LinearOp l, Frame &f) {
    f.set(l, evalLinear(f.get(l.getInput()), f.get(l.getWeight()),
                        f.getOptional(l.getBias()), l.getActivation(),
                        shapeOf(l.getType())));
    return success();
  });
  on<RotaryOp>(t, [](RotaryOp r, Frame &f) {
    f.set(r, evalRotary(f.get(r.getInput()), f.get(r.getCos()),
                        f.get(r.getSin()), r.getInterleaved()));
    return success();
  });
  on<GatedLinearOp>(t, [](GatedLinearOp l, Frame &f) {
    f.set(l, evalGatedLinear(f.get(l.getInput()), f.get(l.getWeight()),
                             f.getOptional(l.getBias()), l.getActivation(),
                             shapeOf(l.getType())));
    return success();
  });
  on<Conv2DOp>(t, [](Conv2DOp c, Frame &f) {
    f.set(c, evalConv2D(f.get(c.getInput()), f.get(c.getWeight()),
                        f.getOptional(c.getBias()), c.getStrides(),
                        c.getPads(), c.getDilations(), c.getGroup(),
                        shapeOf(c.getType())));
    return success();
  });
  on<QKVProjectionOp>(t, [](QKVProjectionOp p, Frame &f) {
    std::vector<Tensor> parts =
        evalQKVProjection(f.get(p.getInput()), f.get(p.getWeight()),
                          f.getOptional(p.getBias()), p.getSizes());
    for (auto [r, part] : llvm::zip(p.getResults(), parts))
      f.set(r, std::move(part));
    return success();
  });
  // Quantization.
  on<QuantizeOp>(t, [](QuantizeOp q, Frame &f) {
    f.set(q, evalQuantize(f.get(q.getInput()), f.get(q.getScale()),
                          f.getOptional(q.getZeroPoint()), kindOf(q.getType()),
                          q.getAxis(), q.getBlockSize()));
    return success();
  });
  on<DequantizeOp>(t, [](DequantizeOp q, Frame &f) {
    f.set(q, evalDequantize(f.get(q.getInput()), f.get(q.getScale()),
                            f.getOptional(q.getZeroPoint()),
                            kindOf(q.getType()), q.getAxis(),
                            q.getBlockSize()));
    return success();
  });
  on<DynamicQuantizeOp>(t, [](DynamicQuantizeOp q, Frame &f) {
    std::vector<Tensor> r = evalDynamicQuantize(f.get(q.getInput()));
    for (auto [v, value] : llvm::zip(q->getResults(), r))
      f.set(v, std::move(value));
    return success();
  });
  on<MatmulIntegerOp>(t, [](MatmulIntegerOp m, Frame &f) {
    f.set(m, evalMatmulInteger(f.get(m.getLhs()), f.get(m.getRhs()),
                               f.getOptional(m.getLhsZeroPoint()),
                               f.getOptional(m.getRhsZeroPoint()),
                               shapeOf(m.getType())));
    return success();
  });
  on<QuantizedLinearOp>(t, [](QuantizedLinearOp l, Frame &f) {
    f.set(l, evalQuantizedLinear(
                 f.get(l.getInput()), f.get(l.getWeight()),
                 f.get(l.getWeightScale()), f.getOptional(l.getWeightZeroPoint()),
                 f.getOptional(l.getBias()), f.getOptional(l.getInputScale()),
                 f.getOptional(l.getInputZeroPoint()), l.getInputQuantization(),
                 l.getActivation(), l.getBlockSize(), shapeOf(l.getType())));
    return success();
  });
  on<SoftmaxOp>(t, [](SoftmaxOp s, Frame &f) {
    const Tensor &in = f.get(s.getInput());
    f.set(s, evalSoftmax(in, normalizedAxis(s.getAxis(), in.rank())));
    return success();
  });
  on<SoftmaxGradOp>(t, [](SoftmaxGradOp s, Frame &f) {
    const Tensor &y = f.get(s.getOutput());
    f.set(s, evalSoftmaxGrad(y, f.get(s.getGrad()),
                             normalizedAxis(s.getAxis(), y.rank()),
                             s.getScale().convertToDouble()));
    return success();
  });
  on<MaskedSoftmaxOp>(t, [](MaskedSoftmaxOp m, Frame &f) {
    f.set(m, evalMaskedSoftmax(f.get(m.getInput()), f.getOptional(m.getMask()),
                               m.getMaskKind() == MaskKind::boolean,
                               m.getCausal(), m.getScale().convertToDouble()));
    return success();
  });
  on<LayerNormOp>(t, [](LayerNormOp l, Frame &f) {
    const Tensor &x = f.get(l.getInput());
    f.set(l, evalLayerNorm(x, f.get(l.getScale()), f.getOptional(l.getBias()),
                           normalizedAxis(l.getAxis(), x.rank()),
                           l.getEpsilon().convertToDouble(), l.getRms()));
    return success();
  });
  on<AddLayerNormOp>(t, [](AddLayerNormOp a, Frame &f) {
    Tensor sum = evalBinary(BinaryKind::Add, f.get(a.getInput()),
                            f.get(a.getResidual()),
                            kindOf(a.getOutput().getType()),
                            shapeOf(a.getOutput().getType()));
    f.set(a.getOutput(),
          evalLayerNorm(sum, f.get(a.getScale()), f.getOptional(a.getBias()),
                        normalizedAxis(a.getAxis(), sum.rank()),
                        a.getEpsilon().convertToDouble(), a.getRms()));
    if (a.getSum())
      f.set(a.getSum(), std::move(sum));
    return success();
  });
  on<AttentionOp>(t, [](AttentionOp a, Frame &f) {
    std::optional<double> scale;
    if (a.getScale())
      scale = a.getScale()->convertToDouble();
    f.set(a, evalAttention(f.get(a.getQuery()), f.get(a.getKey()),
                           f.get(a.getValue()), f.getOptional(a.getMask()),
                           a.getCausal(), scale, shapeOf(a.getType())));
    return success();
  });
  on<ReduceOp>(t, [](ReduceOp r, Frame &f) {
    f.set(r, evalReduce(r.getKind(), f.get(r.getInput()), r.getAxes(),
                        shapeOf(r.getType())));
    return success();
  });
  on<CrossEntropyOp>(t, [](CrossEntropyOp c, Frame &f) {
    std::string error;
    auto r = evalCrossEntropy(f.get(c.getLogits()), f.get(c.getLabels()),
                              c.getLabelSmoothing().convertToDouble(),
                              static_cast<int64_t>(c.getIgnoreIndex()),
                              kindOf(c.getType()), error);
    return orError(c, std::move(r), error, f);
  });

  // Training.
  auto needState = [](Operation *op, Frame &f) -> LogicalResult {
    if (f.state)
      return success();
    return op->emitError() << "'" << op->getName()
                           << "' needs a training state; evaluate the whole "
                              "function rather than one op";
  };
  on<ParameterOp>(t, [](ParameterOp p, Frame &f) -> LogicalResult {
    auto value = parameterValue(p, p.getName(), p.getType(), f);
    if (failed(value))
      return failure();
    f.set(p, std::move(*value));
    return success();
  });
  on<NextStepOp>(t, [needState](NextStepOp n, Frame &f) -> LogicalResult {
    if (failed(needState(n, f)))
      return failure();
    f.set(n, Tensor::ofInts(ElementKind::I64, {}, {++f.state->step}));
    return success();
  });
  // A cache of the session, zeros until written.
  auto cacheOf = [](Frame &f, StringRef name, Type type) -> Tensor & {
    std::vector<int64_t> shape(shapeOf(type));
    Tensor &cache = f.state->caches[name.str()];
    if (cache.shape != shape)
      cache = Tensor(kindOf(type), shape);
    return cache;
  };
  on<CacheUpdateOp>(t, [needState, cacheOf](CacheUpdateOp u,
                                            Frame &f) -> LogicalResult {
    if (failed(needState(u, f)))
      return failure();
    Tensor &cache = cacheOf(f, u.getName(), u.getType());
    const std::vector<int64_t> &shape = cache.shape;
    const Tensor &value = f.get(u.getValue());
    int64_t position = static_cast<int64_t>(f.get(u.getPosition()).get(0));
    int64_t axis = u.getAxis(), n = value.shape[axis];
    if (position < 0 || position > shape[axis] - n)
      return u.emitError() << "position " << position << " does not leave room "
                           << "for " << n << " entries in the cache '"
                           << u.getName() << "' of " << shape[axis];
    // Row-major: `outer` blocks of `n` (value) or `shape[axis]` (cache)
    // slices of `inner` elements.
    int64_t inner = 1, outer = 1;
    for (int64_t i = axis + 1; i < cache.rank(); ++i)
      inner *= shape[i];
    for (int64_t i = 0; i < axis; ++i)
      outer *= shape[i];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n * inner; ++j)
        cache.data[(o * shape[axis] + position) * inner + j] =
            value.data[o * n * inner + j];
    f.set(u, cache);
    return success();
  });
  on<CacheReadOp>(t, [needState, cacheOf](CacheReadOp r,
                                          Frame &f) -> LogicalResult {
    if (failed(needState(r, f)))
      return failure();
    f.set(r, cacheOf(f, r.getName(), r.getType()));
    return success();
  });
  on<CrossEntropyGradOp>(t, [](CrossEntropyGradOp c, Frame &f) {
    std::string error;
    auto r = evalCrossEntropyGrad(
        f.get(c.getLogits()), f.get(c.getLabels()), f.get(c.getGrad()).get(0),
        c.getLabelSmoothing().convertToDouble(),
        static_cast<int64_t>(c.getIgnoreIndex()), shapeOf(c.getType()), error);
    return orError(c, std::move(r), error, f);
  });
  on<LayerNormGradOp>(t, [](LayerNormGradOp g, Frame &f) {
    std::vector<Tensor> grads = evalLayerNormGrad(
        f.get(g.getInput()), f.get(g.getScale()), f.get(g.getGrad()),
        g.getEpsilon().convertToDouble(), g.getRms());
    f.set(g.getInputGrad(), std::move(grads[0]));
    f.set(g.getScaleGrad(), std::move(grads[1]));
    f.set(g.getBiasGrad(), std::move(grads[2]));
    return success();
  });
  on<AttentionGradOp>(t, [](AttentionGradOp a, Frame &f) {
    std::optional<double> scale;
    if (a.getScale())
      scale = a.getScale()->convertToDouble();
    std::vector<Tensor> grads = evalAttentionGrad(
        f.get(a.getQuery()), f.get(a.getKey()), f.get(a.getValue()),
        f.get(a.getGrad()), f.getOptional(a.getMask()), a.getCausal(), scale);
    for (auto [r, g] : llvm::zip(a.getResults(), grads))
      f.set(r, std::move(g));
    return success();
  });
  on<EmbeddingGradOp>(t, [](EmbeddingGradOp e, Frame &f) {
    f.set(e, evalEmbeddingGrad(f.get(e.getGrad()), f.get(e.getIndices()),
                               shapeOf(e.getType())));
    return success();
  });
  auto update = [needState](auto u, Frame &f) -> LogicalResult {
    if (failed(needState(u, f)))
      return failure();
    std::string name = u.getParameter().str();
    auto current = parameterValue(u, name, u.getGrad().getType(), f);
    if (failed(current))
      return failure();
    Tensor &p = f.state->parameters[name] = std::move(*current);
    const Tensor &g = f.get(u.getGrad());
    int64_t step = f.get(u.getStep()).getInt(0);
    double lr = learningRateAt(u.getSchedule(), u.getLr().convertToDouble(),
                               static_cast<int64_t>(u.getDModel()),
                               static_cast<int64_t>(u.getWarmup()), step);
    double wd = u.getWeightDecay().convertToDouble();
    if constexpr (std::is_same_v<decltype(u), SGDUpdateOp>) {
      evalSGD(p, g, lr, wd);
    } else {
      Tensor &m = f.state->firstMoments.try_emplace(name, p.kind, p.shape)
                      .first->second;
      Tensor &v = f.state->secondMoments.try_emplace(name, p.kind, p.shape)
                      .first->second;
      evalAdam(p, m, v, g, lr, u.getBeta1().convertToDouble(),
               u.getBeta2().convertToDouble(), u.getEps().convertToDouble(),
               wd, step);
    }
    return success();
  };
  on<SGDUpdateOp>(t, update);
  on<AdamUpdateOp>(t, update);
  // The interpreter is one process: a weighted average over it alone is
  // the tensor itself.
  on<ProcessRankOp>(t, [](ProcessRankOp op, Frame &f) -> LogicalResult {
    f.set(op, Tensor::ofInts(ElementKind::I64, {}, {0}));
    return success();
  });
  on<AllReduceStartOp>(t, [](AllReduceStartOp op, Frame &f) -> LogicalResult {
    f.set(op, f.get(op.getInput()));
    return success();
  });
  on<AllReduceWaitOp>(t, [](AllReduceWaitOp op, Frame &f) -> LogicalResult {
    f.set(op, f.get(op.getPending()));
    return success();
  });
  return t;
}

const llvm::StringMap<EvalFn> &table() {
  static const llvm::StringMap<EvalFn> t = buildTable();
  return t;
}

LogicalResult Frame::eval(Operation *op) {
  auto it = table().find(op->getName().getStringRef());
  if (it == table().end())
    return op->emitError() << "the reference interpreter does not evaluate '"
                           << op->getName() << "'";
  return it->second(op, *this);
}

FailureOr<std::vector<Tensor>>
Frame::runOne(Operation *op, const std::vector<Tensor> &operands) {
  for (auto [v, t] : llvm::zip(op->getOperands(), operands))
    set(v, t);
  if (failed(eval(op)))
    return failure();
  std::vector<Tensor> results;
  for (Value r : op->getResults())
    results.push_back(get(r));
  return results;
}

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
    if (!type || failed(elementKindOf(type.getElementType())))
      return fn.emitError() << "argument #" << i << " of type "
                            << arg.getType()
                            << " is not a supported tensor type";
    if (ArrayRef<int64_t>(args[i].shape) != type.getShape() ||
        *elementKindOf(type.getElementType()) != args[i].kind)
      return fn.emitError() << "argument #" << i << " must be " << type
                            << " but the value given is '"
                            << args[i].typeString() << "'";
    set(arg, args[i]);
  }
  // Refuse up front what the host cannot hold rather than dying in an
  // allocation halfway through.
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

} // namespace

bool Interpreter::evaluates(StringRef name) { return table().count(name); }

std::vector<std::string> Interpreter::evaluatedOps() {
  std::vector<std::string> names;
  for (const auto &entry : table())
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}

FailureOr<Tensor> Interpreter::fromAttr(DenseElementsAttr dense) {
  auto type = dyn_cast<RankedTensorType>(dense.getType());
  if (!type || failed(elementKindOf(type.getElementType())))
    return failure();
  Tensor t(*elementKindOf(type.getElementType()),
           std::vector<int64_t>(type.getShape().begin(), type.getShape().end()));
  Type elt = type.getElementType();
  size_t i = 0;
  // The common types read natively: a model's weights go through here when
  // the importer folds (a transposed weight), and APFloat per element costs
  // seconds on a large model.
  if (elt.isF32()) {
    for (float v : dense.getValues<float>())
      t.data[i++] = v;
  } else if (elt.isF64()) {
    for (double v : dense.getValues<double>())
      t.data[i++] = v;
  } else if (elt.isSignlessInteger(64) || elt.isSignedInteger(64)) {
    for (int64_t v : dense.getValues<int64_t>())
      t.ints[i++] = v;
  } else if (elt.isSignlessInteger(32) || elt.isSignedInteger(32)) {
    for (int32_t v : dense.getValues<int32_t>())
      t.ints[i++] = v;
  } else if (isa<FloatType>(elt)) {
    for (APFloat v : dense.getValues<APFloat>())
      t.data[i++] = toDouble(v);
  } else if (elt.isInteger(1)) {
    // Bit-packed, lowest bit first (a splat holds one value): a causal
    // buffer per layer of a large model is millions of them.
    if (dense.isSplat()) {
      std::fill(t.data.begin(), t.data.end(),
                dense.getSplatValue<bool>() ? 1.0 : 0.0);
    } else {
      ArrayRef<char> raw = dense.getRawData();
      for (size_t n = t.data.size(); i < n; ++i)
        t.data[i] = (raw[i / 8] >> (i % 8)) & 1 ? 1.0 : 0.0;
    }
  } else {
    bool isUnsigned = elt.isUnsignedInteger();
    for (APInt v : dense.getValues<APInt>())
      t.ints[i++] = isUnsigned ? static_cast<int64_t>(v.getZExtValue())
                               : v.getSExtValue();
  }
  return t;
}

DenseElementsAttr Interpreter::toAttr(const Tensor &t, RankedTensorType type) {
  Type elt = type.getElementType();
  int64_t n = t.numElements();
  if (elt.isF32()) {
    // Round to nearest even, as APFloat's conversion does.
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = static_cast<float>(t.get(i));
    return DenseElementsAttr::get(type, ArrayRef<float>(values));
  }
  if (elt.isF64()) {
    std::vector<double> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = t.get(i);
    return DenseElementsAttr::get(type, ArrayRef<double>(values));
  }
  if (elt.isSignlessInteger(64) || elt.isSignedInteger(64)) {
    std::vector<int64_t> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = t.getInt(i);
    return DenseElementsAttr::get(type, ArrayRef<int64_t>(values));
  }
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> values;
    values.reserve(t.numElements());
    for (int64_t i = 0; i < t.numElements(); ++i) {
      APFloat f(t.get(i));
      bool losesInfo = false;
      f.convert(ft.getFloatSemantics(), llvm::RoundingMode::NearestTiesToEven,
                &losesInfo);
      values.push_back(f);
    }
    return DenseElementsAttr::get(type, values);
  }
  if (elt.isInteger(1)) {
    SmallVector<bool> values;
    for (int64_t i = 0; i < t.numElements(); ++i)
      values.push_back(t.get(i) != 0);
    return DenseElementsAttr::get(type, values);
  }
  SmallVector<APInt> values;
  unsigned width = elt.getIntOrFloatBitWidth();
  for (int64_t i = 0; i < t.numElements(); ++i)
    values.push_back(APInt(width, static_cast<uint64_t>(t.getInt(i)),
                           /*isSigned=*/true));
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
