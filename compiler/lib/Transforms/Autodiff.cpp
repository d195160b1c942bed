//===- Autodiff.cpp - Reverse-mode differentiation of tfm -----------------===//
//
// The sweep knows no op: every rule comes from DifferentiableOpInterface.
// It runs after fusion, so the fused ops' own rules (one GEMM for the three
// projections' input gradient, a closed-form softmax backward) are what the
// backward pass is made of. docs/training.md argues that choice.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Autodiff.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  return b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(
               t, b.getFloatAttr(t.getElementType(), 0.0).getValue()));
}

} // namespace

FailureOr<SmallVector<Value>>
mlir::tfm::differentiate(OpBuilder &b, Block &body,
                         ArrayRef<std::pair<Value, Value>> seeds,
                         ArrayRef<Value> wrt) {
  // The ops to differentiate: those before the insertion point.
  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    if (&op == &*b.getInsertionPoint())
      break;
    ops.push_back(&op);
  }

  // Active values depend on some `wrt` and reach some seed.
  DenseSet<Value> varied(wrt.begin(), wrt.end());
  for (Operation *op : ops)
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      for (Value r : op->getResults())
        if (isFloatTensor(r))
          varied.insert(r);
  DenseSet<Value> useful;
  for (auto &[v, g] : seeds)
    useful.insert(v);
  for (Operation *op : llvm::reverse(ops))
    if (llvm::any_of(op->getResults(),
                     [&](Value v) { return useful.contains(v); }))
      for (Value v : op->getOperands())
        useful.insert(v);
  auto active = [&](Value v) {
    return isFloatTensor(v) && varied.contains(v) && useful.contains(v);
  };

  DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g) {
    Value &slot = grads[v];
    slot = slot ? b.create<AddOp>(g.getLoc(), slot, g).getResult() : g;
  };
  for (auto &[v, g] : seeds)
    accumulate(v, g);

  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<bool> wanted;
    for (Value v : op->getOperands())
      wanted.push_back(active(v));
    if (!llvm::is_contained(wanted, true))
      continue;
    SmallVector<Value> resultGrads;
    for (Value r : op->getResults())
      resultGrads.push_back(grads.lookup(r));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
      continue;
    auto rule = dyn_cast<DifferentiableOpInterface>(op);
    if (!rule)
      return op->emitError()
             << "'" << op->getName()
             << "' lies between the parameters and the loss but has no "
                "gradient rule (DifferentiableOpInterface)";
    SmallVector<Value> operandGrads(op->getNumOperands());
    b.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
    if (failed(rule.buildGradients(b, resultGrads, wanted, operandGrads)))
      return failure();
    for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active(v)) {
        if (g.getType() != v.getType())
          return op->emitError()
                 << "gradient rule produced " << g.getType()
                 << " for an operand of type " << v.getType();
        accumulate(v, g);
      }
  }

  SmallVector<Value> out;
  for (Value v : wrt)
    out.push_back(grads.lookup(v));
  return out;
}

namespace {
void splitActivations(func::FuncOp fn);
} // namespace

FailureOr<func::FuncOp> mlir::tfm::buildVJPFunction(func::FuncOp fn) {
  if (!fn.getBody().hasOneBlock())
    return fn.emitError() << "differentiates only functions of one block";
  OpBuilder b(fn);
  b.setInsertionPointAfter(fn);
  auto vjp = cast<func::FuncOp>(b.clone(*fn));
  vjp.setSymName((fn.getSymName() + "_vjp").str());
  SymbolTable::setSymbolVisibility(vjp, SymbolTable::Visibility::Public);
  splitActivations(vjp);
  Block &body = vjp.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  SmallVector<std::pair<Value, Value>> seeds;
  for (Value r : ret.getOperands()) {
    BlockArgument cot = body.addArgument(r.getType(), r.getLoc());
    if (isFloatTensor(r))
      seeds.emplace_back(r, cot);
  }
  SmallVector<Value> wrt;
  for (BlockArgument a : body.getArguments().take_front(fn.getNumArguments()))
    if (isFloatTensor(a))
      wrt.push_back(a);

  b.setInsertionPoint(ret);
  auto grads = differentiate(b, body, seeds, wrt);
  if (failed(grads))
    return failure();
  SmallVector<Value> results;
  for (auto [v, g] : llvm::zip(wrt, *grads))
    results.push_back(g ? g : zerosLike(b, ret.getLoc(), v.getType()));
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  vjp.setFunctionType(b.getFunctionType(body.getArgumentTypes(),
                                        ValueRange(results).getTypes()));
  vjp.setAllArgAttrs(ArrayRef<DictionaryAttr>{});
  vjp.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
  return vjp;
}

LogicalResult TrainingOptions::parseSchedule(std::string &error) {
  TrainingOptions &options = *this;
  StringRef text = lrSchedule;
  if (text == "constant") {
    options.schedule = LRSchedule::constant;
    return success();
  }
  if (!text.consume_front("noam")) {
    error = "unknown learning-rate schedule '" + text.str() +
            "'; expected 'constant' or 'noam:d_model=D,warmup=W'";
    return failure();
  }
  options.schedule = LRSchedule::noam;
  options.dModel = options.warmup = 0;
  if (!text.consume_front(":"))
    text = "";
  SmallVector<StringRef> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    auto [key, value] = part.split('=');
    int64_t n = 0;
    if (value.getAsInteger(10, n) || n <= 0 ||
        (key != "d_model" && key != "warmup")) {
      error = "bad noam schedule entry '" + part.str() +
              "'; expected d_model=D and warmup=W with positive integers";
      return failure();
    }
    (key == "d_model" ? options.dModel : options.warmup) = n;
  }
  if (options.dModel <= 0 || options.warmup <= 0) {
    error = "the noam schedule needs both d_model=D and warmup=W";
    return failure();
  }
  return success();
}


namespace {

/// `act` applied to `z`, from differentiable ops.
Value activate(OpBuilder &b, Location loc, Activation act, Value z) {
  auto type = cast<RankedTensorType>(z.getType());
  switch (act) {
  case Activation::none:
    return z;
  case Activation::relu:
    return b.create<ReluOp>(loc, z);
  case Activation::gelu:
  case Activation::gelu_tanh:
    return b.create<GeluOp>(loc, z,
                            GeluApproximationAttr::get(
                                b.getContext(), act == Activation::gelu_tanh
                                                    ? GeluApproximation::tanh
                                                    : GeluApproximation::none));
  case Activation::silu: {
    // z / (1 + exp(-z)).
    auto scalarType = RankedTensorType::get({}, type.getElementType());
    Value one = b.create<arith::ConstantOp>(
        loc,
        DenseElementsAttr::get(
            scalarType, b.getFloatAttr(type.getElementType(), 1.0).getValue()));
    Value e = b.create<math::ExpOp>(loc, b.create<arith::NegFOp>(loc, z));
    Value den = b.create<AddOp>(loc, type, e, one);
    return b.create<DivOp>(loc, type, z, den);
  }
  }
  llvm_unreachable("unknown activation");
}

/// Splits gelu and silu activations off linears on the differentiated path:
/// their backward needs the pre-activation, which the fused op does not
/// keep. A gated linear splits into its packed projection, the two halves,
/// the activation and the product, whose rules exist.
void splitActivations(func::FuncOp fn) {
  SmallVector<Operation *> fused;
  fn.walk([&](Operation *op) {
    if (auto l = dyn_cast<LinearOp>(op))
      if (l.getActivation() == Activation::gelu ||
          l.getActivation() == Activation::gelu_tanh ||
          l.getActivation() == Activation::silu)
        fused.push_back(op);
    if (isa<GatedLinearOp>(op))
      fused.push_back(op);
  });
  auto none = ActivationAttr::get(fn.getContext(), Activation::none);
  for (Operation *op : fused) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto l = dyn_cast<LinearOp>(op)) {
      auto z = b.create<LinearOp>(loc, l.getInput(), l.getWeight(), l.getBias(),
                                  none);
      l.replaceAllUsesWith(activate(b, loc, l.getActivation(), z));
      l.erase();
      continue;
    }
    auto g = cast<GatedLinearOp>(op);
    auto h =
        b.create<LinearOp>(loc, g.getInput(), g.getWeight(), g.getBias(), none);
    int64_t f = g.getType().getShape().back();
    auto halves =
        b.create<SplitOp>(loc, TypeRange{g.getType(), g.getType()}, h,
                          b.getI64IntegerAttr(g.getType().getRank() - 1),
                          b.getDenseI64ArrayAttr({f, f}));
    Value gate = activate(b, loc, g.getActivation(), halves.getResult(0));
    g.replaceAllUsesWith(
        b.create<MulOp>(loc, g.getType(), gate, halves.getResult(1))
            .getResult());
    g.erase();
  }
}

/// How many labels the loss counts (those that are not `ignoreIndex`), as
/// a tensor<f32>: a process's weight in the average of a data-parallel
/// step, whose loss and gradients are means over its own labels.
Value countedLabels(OpBuilder &b, Location loc, Value labels,
                    int64_t ignoreIndex) {
  auto type = cast<RankedTensorType>(labels.getType());
  Value ignored = b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                  b.getI64IntegerAttr(ignoreIndex).getValue()));
  auto f32 = b.getF32Type();
  Value counted =
      b.create<CompareOp>(loc, ComparePredicate::ne, labels, ignored);
  Value ones = b.create<CastOp>(
      loc, RankedTensorType::get(type.getShape(), f32), counted);
  SmallVector<int64_t> axes =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  return b.create<ReduceOp>(loc, RankedTensorType::get({}, f32),
                            ReduceKind::sum, ones, b.getDenseI64ArrayAttr(axes),
                            /*keepdims=*/false);
}

/// Hands `x` to the average of `bucket` as soon as both `x` and the
/// process's `weight` exist: right after the later of their ops in the
/// builder's block. The builder's insertion point stays where it was.
Value startAverage(OpBuilder &b, Value x, Value weight, int64_t bucket) {
  OpBuilder::InsertionGuard guard(b);
  Block *body = b.getInsertionBlock();
  Operation *after = weight.getDefiningOp();
  if (Operation *def = x.getDefiningOp())
    if (Operation *mine = body->findAncestorOpInBlock(*def);
        mine && after->isBeforeInBlock(mine))
      after = mine;
  b.setInsertionPointAfter(after);
  return b.create<AllReduceStartOp>(x.getLoc(), x, weight,
                                    b.getI64IntegerAttr(bucket));
}

/// The gradients averaged across the processes of a data-parallel run,
/// each process weighted by its count of labels, so that N processes step
/// as one process on their batches together would. Each gradient starts
/// as soon as the backward pass has computed it, in buckets of about
/// `bucketMb` MB filled in that order, so a bucket's exchange overlaps the
/// rest of the backward pass; the waits come right before the updates.
/// Bucket 0 is the loss's (averageLoss). In one process every op here
/// returns its input.
SmallVector<Value> averageAcrossProcesses(OpBuilder &b, ArrayRef<Value> grads,
                                          Value weight, double bucketMb) {
  Block *body = b.getInsertionBlock();
  // The order in which the backward pass completes the gradients.
  auto position = [&](Value g) -> Operation * {
    Operation *def = g.getDefiningOp();
    return def ? body->findAncestorOpInBlock(*def) : nullptr;
  };
  SmallVector<unsigned> order;
  for (auto [i, g] : llvm::enumerate(grads))
    if (g)
      order.push_back(i);
  llvm::stable_sort(order, [&](unsigned x, unsigned y) {
    Operation *a = position(grads[x]), *c = position(grads[y]);
    if (!a || !c)
      return a == nullptr && c != nullptr;
    return a->isBeforeInBlock(c);
  });
  int64_t capacity =
      std::max<int64_t>(1, static_cast<int64_t>(bucketMb * (1 << 20)));
  int64_t bucket = 1, filled = 0;
  SmallVector<Value> pending(grads.size());
  for (unsigned i : order) {
    Value g = grads[i];
    auto type = cast<RankedTensorType>(g.getType());
    int64_t bytes = type.getNumElements() * 4;
    if (filled > 0 && filled + bytes > capacity) {
      ++bucket;
      filled = 0;
    }
    filled += bytes;
    pending[i] = startAverage(b, g, weight, bucket);
  }
  SmallVector<Value> averaged(grads.size());
  for (auto [i, p] : llvm::enumerate(pending))
    if (p)
      averaged[i] = b.create<AllReduceWaitOp>(
          p.getLoc(), p, p.getDefiningOp<AllReduceStartOp>().getBucketAttr());
  return averaged;
}

/// The loss averaged as the gradients are (bucket 0, started before the
/// backward pass, waited for at the end).
Value averageLoss(OpBuilder &b, Value loss, Value weight) {
  Value pending = startAverage(b, loss, weight, /*bucket=*/0);
  return b.create<AllReduceWaitOp>(loss.getLoc(), pending,
                                   b.getI64IntegerAttr(0));
}

} // namespace

func::FuncOp mlir::tfm::findForward(ModuleOp module, StringRef name) {
  if (!name.empty())
    return module.lookupSymbol<func::FuncOp>(name);
  func::FuncOp only;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isPrivate() || fn.isExternal())
      continue;
    if (only)
      return {};
    only = fn;
  }
  return only;
}

FailureOr<func::FuncOp>
mlir::tfm::buildTrainStep(ModuleOp module, const TrainingOptions &options) {
  func::FuncOp fwd = findForward(module, options.forward);
  if (!fwd)
    return module.emitError()
           << (options.forward.empty()
                   ? std::string("the module must have exactly one public "
                                 "function to train, or name one")
                   : "no function named '" + options.forward + "' to train");
  if (options.loss != "cross-entropy")
    return module.emitError() << "unknown loss '" << options.loss
                              << "'; the supported loss is cross-entropy";
  if (options.optimizer != "sgd" && options.optimizer != "adam")
    return module.emitError() << "unknown optimizer '" << options.optimizer
                              << "'; expected sgd or adam";
  if (!(options.bucketMb > 0))
    return module.emitError()
           << "--bucket-mb must be > 0, got " << options.bucketMb;
  // Sharding nothing is correct, and a launcher that always asks for it
  // should not fail on SGD; but the user hears that it does nothing.
  if (options.shardOptimizer && options.optimizer != "adam")
    module.emitWarning() << "--shard-optimizer shards Adam's moments; "
                            "--optimizer="
                         << options.optimizer
                         << " keeps no optimizer state, so there is nothing "
                            "to shard";
  if (module.lookupSymbol("train_step"))
    return module.emitError() << "the module already has a @train_step";
  if (!fwd.getBody().hasOneBlock())
    return fwd.emitError() << "differentiates only functions of one block";
  if (fwd.getNumResults() == 0)
    return fwd.emitError() << "has no output to compute a loss on";
  // Rounding has no gradient: quantization-aware training would need
  // straight-through estimators, which tfm does not define.
  Operation *quantized = nullptr;
  fwd.walk([&](Operation *op) {
    if (isa<QuantizeOp, DequantizeOp, DynamicQuantizeOp, MatmulIntegerOp,
            QuantizedLinearOp>(op)) {
      quantized = op;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (quantized)
    return quantized->emitError()
           << "the model is quantized ('" << quantized->getName()
           << "'), and training a quantized model is not supported: train "
              "the float model, then quantize it";
  auto logitsType = dyn_cast<RankedTensorType>(fwd.getResultTypes()[0]);
  if (!logitsType || !isa<FloatType>(logitsType.getElementType()) ||
      logitsType.getRank() < 1)
    return fwd.emitError() << "output #0 must be float logits [..., K] for "
                              "the cross-entropy loss, got "
                           << fwd.getResultTypes()[0];

  OpBuilder b(fwd);
  b.setInsertionPointAfter(fwd);
  auto train = cast<func::FuncOp>(b.clone(*fwd));
  train.setSymName("train_step");
  Block &body = train.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Location loc = ret.getLoc();

  // Labels: one class index per logits row.
  auto labelsType = RankedTensorType::get(logitsType.getShape().drop_back(),
                                          b.getI64Type());
  (void)train.insertArgument(
      train.getNumArguments(), labelsType,
      b.getDictionaryAttr(
          {b.getNamedAttr("tfm.name", b.getStringAttr("labels"))}),
      loc);
  BlockArgument labels = body.getArguments().back();

  splitActivations(train);

  // The step count comes first: dropout and the optimizers read it.
  b.setInsertionPointToStart(&body);
  Value step = b.create<NextStepOp>(train.getLoc());
  // Each rank of a data-parallel run draws its own masks: the dropouts read
  // the step offset by rank · 2^40, which rank 0 (and one process) leaves
  // as it is and no run reaches from another rank's offset.
  Value dropoutStep;
  auto offsetStep = [&] {
    if (dropoutStep)
      return dropoutStep;
    auto i64 = RankedTensorType::get({}, b.getI64Type());
    Value rank = b.create<ProcessRankOp>(train.getLoc(), i64);
    Value stride = b.create<arith::ConstantOp>(
        train.getLoc(),
        DenseElementsAttr::get(
            i64, b.getI64IntegerAttr(int64_t(1) << 40).getValue()));
    Value offset = b.create<MulOp>(train.getLoc(), i64, rank, stride);
    dropoutStep = b.create<AddOp>(train.getLoc(), i64, step, offset);
    return dropoutStep;
  };
  unsigned dropoutIndex = 0;
  // The forward function's dropouts stay the identity, and now fold.
  fwd.walk([](DropoutOp d) { d.setTrainable(false); });
  train.walk([&](DropoutOp d) {
    d.setTrainable(false);
    if (d.getRate().isZero())
      return;
    d.setTraining(true);
    d.getStepMutable().assign(offsetStep());
    // Dropouts imported without a seed would share one mask; give each its
    // own stream.
    if (d.getSeed() == 0)
      d.setSeed(static_cast<uint64_t>(++dropoutIndex));
  });

  b.setInsertionPoint(ret);
  Value logits = ret.getOperand(0);
  Value loss = b.create<CrossEntropyOp>(
      loc, logits, labels, b.getF64FloatAttr(options.labelSmoothing),
      b.getI64IntegerAttr(options.ignoreIndex));
  Value weight = countedLabels(b, loc, labels, options.ignoreIndex);

  // The parameters, in order of first appearance; one op per name.
  llvm::StringSet<> frozen;
  for (const std::string &f : options.freeze)
    frozen.insert(f);
  llvm::StringSet<> seen;
  SmallVector<ParameterOp> params;
  train.walk([&](ParameterOp p) {
    if (!seen.insert(p.getName()).second)
      return;
    if (!frozen.contains(p.getName()))
      params.push_back(p);
  });
  for (const std::string &f : options.freeze)
    if (!seen.contains(f))
      return fwd.emitError() << "--freeze names '" << f
                             << "', which is not a parameter of the model";
  if (params.empty())
    return fwd.emitError() << "has no trainable parameters (every float "
                              "initializer is frozen or absent)";
  // Two parameter ops with one name would be one parameter read twice.
  DenseMap<StringAttr, Value> byName;
  train.walk([&](ParameterOp p) {
    Value &first = byName[p.getNameAttr()];
    if (!first)
      first = p.getResult();
    else if (first != p.getResult() && first.getType() == p.getType())
      p.replaceAllUsesWith(first);
  });

  auto lossType = cast<RankedTensorType>(loss.getType());
  Value one = b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(
               lossType, b.getFloatAttr(lossType.getElementType(), 1.0)
                             .getValue()));
  SmallVector<Value> wrt;
  for (ParameterOp p : params)
    wrt.push_back(p.getResult());
  auto grads = differentiate(b, body, {{loss, one}}, wrt);
  if (failed(grads))
    return failure();

  for (auto [p, g] : llvm::zip(params, *grads))
    if (!g)
      emitWarning(p.getLoc()) << "parameter '" << p.getName()
                              << "' does not affect the loss and is not "
                                 "updated";
  SmallVector<Value> averaged =
      averageAcrossProcesses(b, *grads, weight, options.bucketMb);
  loss = averageLoss(b, loss, weight);

  for (auto [p, g] : llvm::zip(params, averaged)) {
    if (!g)
      continue;
    auto schedule = LRScheduleAttr::get(b.getContext(), options.schedule);
    if (options.optimizer == "sgd")
      b.create<SGDUpdateOp>(p.getLoc(), p.getNameAttr(), g, step,
                            b.getF64FloatAttr(options.lr),
                            b.getF64FloatAttr(options.weightDecay), schedule,
                            b.getI64IntegerAttr(options.dModel),
                            b.getI64IntegerAttr(options.warmup));
    else
      b.create<AdamUpdateOp>(
          p.getLoc(), p.getNameAttr(), g, step, b.getF64FloatAttr(options.lr),
          b.getF64FloatAttr(options.beta1), b.getF64FloatAttr(options.beta2),
          b.getF64FloatAttr(options.eps),
          b.getF64FloatAttr(options.weightDecay), schedule,
          b.getI64IntegerAttr(options.dModel),
          b.getI64IntegerAttr(options.warmup),
          options.shardOptimizer ? b.getUnitAttr() : UnitAttr());
  }
  b.create<func::ReturnOp>(loc, loss);
  ret.erase();
  train.setFunctionType(
      b.getFunctionType(body.getArgumentTypes(), TypeRange{loss.getType()}));
  train.setAllResultAttrs(ArrayRef<DictionaryAttr>{b.getDictionaryAttr(
      {b.getNamedAttr("tfm.name", b.getStringAttr("loss"))})});

  // The other outputs' computations are dead now.
  SmallVector<Operation *> order;
  for (Operation &op : body)
    order.push_back(&op);
  // (A parameter's read has an effect, but erasing an unused one is safe.)
  for (Operation *op : llvm::reverse(order))
    if (!op->hasTrait<mlir::OpTrait::IsTerminator>() &&
        isOpTriviallyDead(op))
      op->erase();
  return train;
}

namespace {

struct AutodiffPass : public mlir::tfm::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;
  AutodiffPass() = default;
  // Options cannot be copied; Pass::clone copies their values after this
  // registers them anew.
  AutodiffPass(const AutodiffPass &other) : AutodiffPassBase(other) {}

  // The training options, from the one list of them.
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  Option<TYPE> MEMBER{*this, FLAG, llvm::cl::desc(DESCRIPTION),                \
                      llvm::cl::init(DEFAULT)};
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  ListOption<TYPE> MEMBER{*this, FLAG, llvm::cl::desc(DESCRIPTION)};
#include "tfm/Transforms/TrainingOptions.def"

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == "vjp") {
      SmallVector<func::FuncOp> fns(module.getOps<func::FuncOp>());
      for (func::FuncOp fn : fns)
        if (!fn.isExternal() && failed(buildVJPFunction(fn)))
          return signalPassFailure();
      return;
    }
    if (mode != "train") {
      module.emitError() << "tfm-autodiff: unknown mode '" << mode
                         << "'; expected train or vjp";
      return signalPassFailure();
    }
    TrainingOptions o;
    o.forward = forward;
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  o.MEMBER = MEMBER;
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  o.MEMBER.assign(MEMBER.begin(), MEMBER.end());
#include "tfm/Transforms/TrainingOptions.def"
    std::string error;
    if (failed(o.parseSchedule(error))) {
      module.emitError() << "tfm-autodiff: " << error;
      return signalPassFailure();
    }
    if (failed(buildTrainStep(module, o)))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass>
mlir::tfm::createAutodiffPass(const TrainingOptions &o) {
  AutodiffPassOptions p;
  p.mode = "train";
  p.forward = o.forward;
  auto pass = std::make_unique<AutodiffPass>(p);
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  pass->MEMBER = o.MEMBER;
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  pass->MEMBER = o.MEMBER;
#include "tfm/Transforms/TrainingOptions.def"
  return pass;
}
