//===- BufferAssignment.cpp - Buffers of planned tfm functions ------------===//

#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Conversion/Common/OpLowering.h"
#include "tfm/Target/Symbols.h"
#include "tfm/Transforms/CPUFolding.h"
#include "tfm/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <numeric>

using namespace mlir;
using namespace mlir::tfm;

//===----------------------------------------------------------------------===//
// Shapes and views
//===----------------------------------------------------------------------===//

int64_t mlir::tfm::product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

MemRefType mlir::tfm::memrefOf(Type t) {
  auto r = cast<RankedTensorType>(t);
  return MemRefType::get(r.getShape(), r.getElementType());
}

bool mlir::tfm::isF32(Type t) {
  return cast<ShapedType>(t).getElementType().isF32();
}

SmallVector<int64_t> mlir::tfm::rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::optional<SmallVector<int64_t>>
mlir::tfm::reshapeStrides(const StridedView &view, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> oldShape, oldStrides;
  for (auto [d, st] : llvm::zip(view.shape, view.strides))
    if (d != 1) {
      oldShape.push_back(d);
      oldStrides.push_back(st);
    }
  SmallVector<int64_t> out(shape.size(), 0);
  size_t i = 0, j = 0;
  while (j < shape.size() && shape[j] == 1)
    out[j++] = 1;
  while (i < oldShape.size() && j < shape.size()) {
    size_t i0 = i, j0 = j;
    int64_t a = oldShape[i++], b = shape[j++];
    while (a != b) {
      if (a < b) {
        if (i == oldShape.size())
          return std::nullopt;
        a *= oldShape[i++];
      } else {
        if (j == shape.size())
          return std::nullopt;
        b *= shape[j++];
      }
    }
    for (size_t k = i0; k + 1 < i; ++k)
      if (oldStrides[k] != oldStrides[k + 1] * oldShape[k + 1])
        return std::nullopt;
    int64_t st = oldStrides[i - 1];
    for (size_t k = j; k-- > j0;) {
      out[k] = st;
      st *= shape[k];
    }
    while (j < shape.size() && shape[j] == 1)
      out[j++] = 1;
  }
  if (i != oldShape.size() || j != shape.size())
    return std::nullopt;
  return out;
}

//===----------------------------------------------------------------------===//
// Weights and state
//===----------------------------------------------------------------------===//

int64_t WeightsLayout::add(ElementsAttr value) {
  auto [it, fresh] = offsetOf.try_emplace(value, bytes);
  if (fresh) {
    values.push_back(value);
    offsets.push_back(bytes);
    bytes += alignBuffer(bufferBytes(cast<ShapedType>(value.getType())));
  }
  return it->second;
}

int64_t StateLayout::add(StringRef name, int32_t kind, RankedTensorType type,
                         int64_t init) {
  int64_t offset = bytes;
  slots.push_back({name.str(), kind, type, offset, init});
  bytes += alignBuffer(bufferBytes(type));
  return offset;
}

SmallVector<func::FuncOp> mlir::tfm::entryFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> entries;
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn.isPublic() && !fn.isExternal())
      entries.push_back(fn);
  return entries;
}

LogicalResult mlir::tfm::layOutModule(ArrayRef<func::FuncOp> entries,
                                      WeightsLayout &weights,
                                      StateLayout &state) {
  for (func::FuncOp fn : entries)
    fn.walk([&](arith::ConstantOp c) {
      if (auto v = dyn_cast<ElementsAttr>(c.getValue()))
        weights.add(v);
    });

  // Parameters start from their initial values, which ride in the weights;
  // updates name parameters, and Adam adds two moments each.
  for (func::FuncOp fn : entries) {
    WalkResult walk = fn.walk([&](ParameterOp p) -> WalkResult {
      auto [it, fresh] = state.typeOf.try_emplace(p.getName(), p.getType());
      if (!fresh) {
        if (it->second != p.getType())
          return p.emitError("parameter '")
                 << p.getName() << "' is " << p.getType() << " here but "
                 << it->second << " elsewhere";
        return WalkResult::advance();
      }
      int64_t init = weights.add(p.getInitialValue());
      state.parameter[p.getName()] =
          state.add(p.getName(), TFM_STATE_PARAMETER, p.getType(), init);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  for (func::FuncOp fn : entries) {
    auto checkName = [&](Operation *op, StringRef name, Type type) {
      auto it = state.typeOf.find(name);
      if (it != state.typeOf.end() && it->second == type)
        return true;
      op->emitError("updates '") << name << "', which is not a parameter "
                                  << "of type " << type;
      return false;
    };
    WalkResult walk = fn.walk([&](Operation *op) -> WalkResult {
      if (auto u = dyn_cast<SGDUpdateOp>(op))
        return checkName(op, u.getParameter(), u.getGrad().getType())
                   ? WalkResult::advance()
                   : WalkResult::interrupt();
      if (auto u = dyn_cast<AdamUpdateOp>(op)) {
        if (!checkName(op, u.getParameter(), u.getGrad().getType()))
          return WalkResult::interrupt();
        if (!state.adamM.count(u.getParameter())) {
          auto type = u.getGrad().getType();
          state.adamM[u.getParameter()] =
              state.add(u.getParameter(), TFM_STATE_ADAM_M, type, -1);
          state.adamV[u.getParameter()] =
              state.add(u.getParameter(), TFM_STATE_ADAM_V, type, -1);
        }
      }
      if (isa<NextStepOp>(op) && state.step < 0)
        state.step = state.add(
            "step", TFM_STATE_STEP,
            RankedTensorType::get({}, IntegerType::get(op->getContext(), 64)),
            -1);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  return success();
}

void mlir::tfm::recordModuleLayout(ModuleOp module,
                                   const WeightsLayout &weights,
                                   const StateLayout &state) {
  Builder b(module.getContext());
  module->setAttr("tfm.weights", b.getArrayAttr(weights.values));
  module->setAttr("tfm.weight_offsets",
                  b.getDenseI64ArrayAttr(weights.offsets));
  module->setAttr("tfm.weights_bytes", b.getI64IntegerAttr(weights.bytes));
  SmallVector<Attribute> slots;
  for (const StateLayout::Slot &slot : state.slots)
    slots.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("name", b.getStringAttr(slot.name)),
         b.getNamedAttr("kind", b.getI32IntegerAttr(slot.kind)),
         b.getNamedAttr("type", TypeAttr::get(slot.type)),
         b.getNamedAttr("offset", b.getI64IntegerAttr(slot.offset)),
         b.getNamedAttr("init_offset", b.getI64IntegerAttr(slot.init))}));
  module->setAttr("tfm.states", b.getArrayAttr(slots));
  module->setAttr("tfm.state_bytes", b.getI64IntegerAttr(state.bytes));
}

//===----------------------------------------------------------------------===//
// Buffers of one entry
//===----------------------------------------------------------------------===//

BufferizedEntry::BufferizedEntry(Kind kind, func::FuncOp fn,
                                 WeightsLayout &weights, StateLayout &state)
    : ctx(fn.getContext()), b(ctx), loc(UnknownLoc::get(ctx)), fn(fn),
      weights(weights), state(state), kind(kind) {}

BufferizedEntry::~BufferizedEntry() = default;

Value BufferizedEntry::view(Value base, int64_t byteOffset, Type tensorType) {
  Value shift = b.create<arith::ConstantIndexOp>(loc, byteOffset);
  Value v = b.create<memref::ViewOp>(loc, memrefOf(tensorType), base, shift,
                                     ValueRange{});
  places[v] = {base, byteOffset};
  return v;
}

Value BufferizedEntry::bufferOf(Value tensor) {
  if (auto v = views.find(tensor); v != views.end()) {
    Value &m = materialized[tensor];
    if (!m)
      m = materialize(v->second,
                      cast<ShapedType>(tensor.getType()).getElementType());
    return m;
  }
  auto it = buffers.find(tensor);
  assert(it != buffers.end() && "operand lowered before its use");
  return it->second;
}

Value BufferizedEntry::materialize(const StridedView &view, Type elem) {
  auto layout = StridedLayoutAttr::get(ctx, view.offset, view.strides);
  auto type = MemRefType::get(view.shape, elem, layout);
  return b.create<memref::ReinterpretCastOp>(loc, type, view.base, view.offset,
                                             view.shape, view.strides);
}

StridedView BufferizedEntry::viewOf(Value tensor) {
  if (auto v = views.find(tensor); v != views.end())
    return v->second;
  auto shape = cast<ShapedType>(tensor.getType()).getShape();
  return {bufferOf(tensor), 0, SmallVector<int64_t>(shape),
          rowMajorStrides(shape)};
}

Value BufferizedEntry::denseOf(Value tensor) {
  auto v = views.find(tensor);
  if (v == views.end())
    return bufferOf(tensor);
  const StridedView &view = v->second;
  if (view.isDense())
    return view.base.getType() == memrefOf(tensor.getType())
               ? view.base
               : reshape(view.base, memrefOf(tensor.getType()));
  Value dense = temporary(memrefOf(tensor.getType()));
  copy(bufferOf(tensor), dense);
  return dense;
}

Value BufferizedEntry::temporary(MemRefType type) {
  Value t = b.create<memref::AllocOp>(loc, type,
                                      b.getI64IntegerAttr(kBufferAlignment));
  temporaries.push_back(t);
  return t;
}

int64_t BufferizedEntry::plannedOffset(Operation *op, unsigned index) {
  if (auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("tfm.arena_offsets"))
    if (index < offsets.size())
      return offsets[index];
  return -1;
}

Value BufferizedEntry::destination(Value result) {
  Value buf;
  if (auto it = outputOf.find(result); it != outputOf.end()) {
    buf = it->second;
  } else {
    int64_t offset = plannedOffset(result.getDefiningOp(),
                                   cast<OpResult>(result).getResultNumber());
    buf = offset >= 0 ? view(arena, offset, result.getType())
                      : temporary(memrefOf(result.getType()));
  }
  buffers[result] = buf;
  return buf;
}

Value BufferizedEntry::reshape(Value buffer, MemRefType to) {
  if (auto it = places.find(buffer); it != places.end()) {
    auto [base, offset] = it->second;
    Value shift = b.create<arith::ConstantIndexOp>(loc, offset);
    Value v = b.create<memref::ViewOp>(loc, to, base, shift, ValueRange{});
    places[v] = {base, offset};
    return v;
  }
  return b.create<memref::ReinterpretCastOp>(loc, to, buffer, 0, to.getShape(),
                                             rowMajorStrides(to.getShape()));
}

//===----------------------------------------------------------------------===//
// linalg on buffers
//===----------------------------------------------------------------------===//

void BufferizedEntry::generic(ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                              Value output, AffineMap outputMap,
                              ArrayRef<utils::IteratorType> iterators,
                              BodyFn body) {
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(outputMap);
  b.create<linalg::GenericOp>(
      loc, TypeRange{}, inputs, ValueRange{output}, maps, iterators,
      [&](OpBuilder &ob, Location l, ValueRange args) {
        ob.create<linalg::YieldOp>(l, body(ob, l, args));
      });
}

AffineMap BufferizedEntry::broadcastMap(ArrayRef<int64_t> from,
                                        ArrayRef<int64_t> to) {
  SmallVector<AffineExpr> exprs;
  int64_t lead = to.size() - from.size();
  for (auto [i, d] : llvm::enumerate(from))
    exprs.push_back(d == 1 && to[lead + i] != 1
                        ? getAffineConstantExpr(0, ctx)
                        : getAffineDimExpr(lead + i, ctx));
  return AffineMap::get(to.size(), 0, exprs, ctx);
}

void BufferizedEntry::elementwise(ValueRange inputs, Value output,
                                  BodyFn body) {
  auto outShape = cast<MemRefType>(output.getType()).getShape();
  SmallVector<AffineMap> maps;
  for (Value in : inputs)
    maps.push_back(
        broadcastMap(cast<MemRefType>(in.getType()).getShape(), outShape));
  SmallVector<utils::IteratorType> its(outShape.size(),
                                       utils::IteratorType::parallel);
  generic(inputs, maps, output,
          AffineMap::getMultiDimIdentityMap(outShape.size(), ctx), its, body);
}

Value BufferizedEntry::constantScalar(OpBuilder &ob, Location l, Type type,
                                      double value) {
  if (auto ft = dyn_cast<FloatType>(type))
    return ob.create<arith::ConstantOp>(l, ob.getFloatAttr(ft, value));
  return ob.create<arith::ConstantOp>(
      l, ob.getIntegerAttr(type, static_cast<int64_t>(value)));
}

void BufferizedEntry::fill(Value output, Attribute value) {
  auto shape = cast<MemRefType>(output.getType()).getShape();
  SmallVector<utils::IteratorType> its(shape.size(),
                                       utils::IteratorType::parallel);
  generic({}, {}, output, AffineMap::getMultiDimIdentityMap(shape.size(), ctx),
          its, [&](OpBuilder &ob, Location l, ValueRange) -> Value {
            return ob.create<arith::ConstantOp>(l, cast<TypedAttr>(value));
          });
}

void BufferizedEntry::copy(Value from, Value to) {
  elementwise({from}, to,
              [](OpBuilder &, Location, ValueRange a) { return a[0]; });
}

Value BufferizedEntry::axisWindow(Value buffer, int64_t axis, int64_t at,
                                  RankedTensorType part) {
  int64_t rank = part.getRank();
  SmallVector<int64_t> offsets(rank, 0), sizes(part.getShape()),
      strides(rank, 1);
  offsets[axis] = at;
  return b.create<memref::SubViewOp>(loc, buffer, offsets, sizes, strides);
}

void BufferizedEntry::copyView(const StridedView &from, const StridedView &to,
                               Type elem) {
  copy(materialize(from, elem), materialize(to, elem));
}

Value BufferizedEntry::returnCode() {
  return b.create<arith::ConstantIntOp>(loc, 0, 32);
}

//===----------------------------------------------------------------------===//
// The entry
//===----------------------------------------------------------------------===//

LogicalResult BufferizedEntry::run(const OpLoweringSet &lowerings,
                                   DictionaryAttr &entryInfo) {
  if (!fn.getBody().hasOneBlock())
    return fn.emitError("the backends need single-block functions");
  auto arenaAttr = fn->getAttrOfType<IntegerAttr>("tfm.arena_bytes");
  if (!arenaAttr)
    return fn.emitError("run tfm-plan-memory before lowering to a target");
  for (Type t : fn.getFunctionType().getInputs())
    if (!isa<RankedTensorType>(t) || !cast<RankedTensorType>(t).hasStaticShape())
      return fn.emitError("entry arguments must be statically shaped tensors");
  int64_t arenaBytes = arenaAttr.getInt();

  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  SmallVector<Type> argTypes{ptrTy,
                             MemRefType::get({arenaBytes}, b.getI8Type()),
                             MemRefType::get({weights.bytes}, b.getI8Type()),
                             MemRefType::get({state.bytes}, b.getI8Type())};
  // An empty tensor carries no data; it crosses the boundary as a rank-1
  // empty buffer because the bare-pointer calling convention rejects
  // buffers with a zero dimension among others.
  auto boundaryType = [&](Type t) {
    MemRefType m = memrefOf(t);
    return m.getNumElements() == 0 ? MemRefType::get({0}, m.getElementType())
                                   : m;
  };
  for (Type t : fn.getFunctionType().getInputs())
    argTypes.push_back(boundaryType(t));
  for (Type t : fn.getFunctionType().getResults())
    argTypes.push_back(boundaryType(t));
  b.setInsertionPoint(fn);
  std::string name = (kEntrySymbolPrefix + fn.getSymName()).str();
  entry = b.create<func::FuncOp>(
      fn.getLoc(), name, b.getFunctionType(argTypes, {b.getI32Type()}));
  Block *body = entry.addEntryBlock();
  b.setInsertionPointToStart(body);
  loc = fn.getLoc();
  host = body->getArgument(0);
  arena = body->getArgument(1);
  weightsArg = body->getArgument(2);
  stateArg = body->getArgument(3);
  constexpr unsigned kFirstIO = 4;
  unsigned numIn = fn.getNumArguments();
  for (unsigned i = 0; i < numIn; ++i) {
    Value arg = fn.getArgument(i);
    MemRefType type = memrefOf(arg.getType());
    buffers[arg] = type.getNumElements() == 0 ? temporary(type)
                                              : body->getArgument(kFirstIO + i);
  }
  if (failed(beginEntry()))
    return failure();

  Block &src = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(src.getTerminator());
  SmallVector<Value> outBuffers;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    Value out = body->getArgument(kFirstIO + numIn + i);
    outBuffers.push_back(out);
    Value v = ret.getOperand(i);
    Operation *def = v.getDefiningOp();
    auto qkv = dyn_cast_or_null<QKVProjectionOp>(def);
    if (def && !isa<arith::ConstantOp, ParameterOp>(def) &&
        !outputOf.count(v) && memrefOf(v.getType()).getNumElements() > 0 &&
        !(qkv && isPackedQKV(qkv)))
      outputOf[v] = out;
  }

  for (Operation &op : src.without_terminator()) {
    loc = op.getLoc();
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      auto value = dyn_cast<ElementsAttr>(c.getValue());
      if (!value)
        return op.emitError("the backends need tensor constants");
      Value buf = view(weightsArg, weights.offsetOf.lookup(value), c.getType());
      if (auto it = outputOf.find(c.getResult()); it != outputOf.end()) {
        copy(buf, it->second);
        buf = it->second;
      }
      buffers[c.getResult()] = buf;
      continue;
    }
    if (auto p = dyn_cast<ParameterOp>(op)) {
      // The parameter's current value, in the session's state.
      buffers[p.getResult()] =
          view(stateArg, state.parameter.lookup(p.getName()), p.getType());
      continue;
    }
    const OpLoweringFn *lowering = lowerings.lookup(&op);
    if (!lowering)
      return op.emitError("the ")
             << targetName() << " backend cannot lower '" << op.getName()
             << "' yet";
    if (failed((*lowering)(&op, *this)) || failed(endOp(&op)))
      return failure();
  }
  // Returned values the ops did not write in place: arguments, constants,
  // and a value returned at more than one position.
  loc = ret.getLoc();
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (bufferOf(v) != outBuffers[i] &&
        memrefOf(v.getType()).getNumElements() > 0)
      copy(bufferOf(v), outBuffers[i]);
  for (Value t : temporaries)
    b.create<memref::DeallocOp>(loc, t);
  b.create<func::ReturnOp>(loc, returnCode());

  // What the artifact's metadata table says about this entry.
  auto describe = [&](Type t, StringAttr name) {
    auto r = cast<RankedTensorType>(t);
    return b.getDictionaryAttr({b.getNamedAttr("name", name),
                                b.getNamedAttr("type", TypeAttr::get(r))});
  };
  auto nameOf = [&](DictionaryAttr attrs, unsigned i, const char *prefix) {
    if (attrs)
      if (auto n = attrs.getAs<StringAttr>("tfm.name"))
        return n;
    return b.getStringAttr(prefix + std::to_string(i));
  };
  SmallVector<Attribute> ins, outs;
  for (unsigned i = 0; i < numIn; ++i)
    ins.push_back(describe(fn.getArgument(i).getType(),
                           nameOf(fn.getArgAttrDict(i), i, "input_")));
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    outs.push_back(describe(fn.getFunctionType().getResult(i),
                            nameOf(fn.getResultAttrDict(i), i, "output_")));
  entryInfo = b.getDictionaryAttr(
      {b.getNamedAttr("name", fn.getSymNameAttr()),
       b.getNamedAttr("symbol", b.getStringAttr(name)),
       b.getNamedAttr("inputs", b.getArrayAttr(ins)),
       b.getNamedAttr("outputs", b.getArrayAttr(outs)),
       b.getNamedAttr("arena_bytes", b.getI64IntegerAttr(arenaBytes))});
  return success();
}

//===----------------------------------------------------------------------===//
// OpLoweringSet
//===----------------------------------------------------------------------===//

std::vector<std::string> OpLoweringSet::opNames() const {
  std::vector<std::string> names;
  for (const auto &entry : table)
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}
