//===- BufferAssignment.cpp - Buffers of planned tfm functions ------------===//

#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Conversion/Common/OpLowering.h"
#include "tfm/IR/InputValues.h"
#include "tfm/Target/Symbols.h"
#include "tfm/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Matchers.h"

#include <cstring>
#include <numeric>
#include <vector>

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
  // Sharded moments live in the runtime, not in the state.
  bool outside =
      kind == TFM_STATE_ADAM_M_SHARD || kind == TFM_STATE_ADAM_V_SHARD;
  int64_t offset = outside ? 0 : bytes;
  slots.push_back({name.str(), kind, type, offset, init});
  if (!outside)
    bytes += alignBuffer(bufferBytes(type));
  return offset;
}

int64_t StateLayout::indexOf(StringRef name, int32_t kind) const {
  for (auto [i, slot] : llvm::enumerate(slots))
    if (slot.kind == kind && slot.name == name)
      return static_cast<int64_t>(i);
  return -1;
}

SmallVector<func::FuncOp> mlir::tfm::entryFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> entries;
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn.isPublic() && !fn.isExternal())
      entries.push_back(fn);
  return entries;
}

namespace {

/// product(`shape`) elements of the f32 `dense` from `first`, rounded to
/// nearest even into `elem` (bf16 or f16), as arith.truncf rounds them.
DenseElementsAttr roundElements(DenseElementsAttr dense, int64_t first,
                                ArrayRef<int64_t> shape, Type elem) {
  // Rounded to nearest even, as arith.truncf rounds at run time: the GEMM
  // reads the same values it would have computed.
  auto copyType = RankedTensorType::get(shape, elem);
  int64_t count = copyType.getNumElements();
  if (elem.isBF16()) {
    // bf16 is f32's upper half, so rounding is an add on the bits; APFloat
    // per element made a 300 M-weight model's compile 3x slower.
    ArrayRef<char> raw = dense.getRawData();
    bool splat = dense.isSplat();
    std::vector<uint16_t> halves(count);
    for (int64_t i = 0; i < count; ++i) {
      uint32_t bits;
      int64_t index = splat ? 0 : first + i;
      std::memcpy(&bits, raw.data() + index * sizeof(float), sizeof bits);
      halves[i] = (bits & 0x7fffffffu) > 0x7f800000u
                      ? static_cast<uint16_t>((bits >> 16) | 0x40u) // quiet NaN
                      : static_cast<uint16_t>(
                            (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
    return DenseElementsAttr::getFromRawBuffer(
        copyType, ArrayRef<char>(reinterpret_cast<const char *>(halves.data()),
                                 halves.size() * sizeof(uint16_t)));
  }
  SmallVector<APFloat> rounded;
  rounded.reserve(count);
  auto values = dense.getValues<APFloat>();
  for (int64_t i = 0; i < count; ++i) {
    APFloat v = values[first + i];
    bool lost;
    v.convert(cast<FloatType>(elem).getFloatSemantics(),
              APFloat::rmNearestTiesToEven, &lost);
    rounded.push_back(v);
  }
  return DenseElementsAttr::get(copyType, rounded);
}

} // namespace

LogicalResult
mlir::tfm::layOutModule(ArrayRef<func::FuncOp> entries, ModuleLayout &layout,
                        Type narrowType,
                        function_ref<bool(OpOperand &)> readsNarrow) {
  WeightsLayout &weights = layout.weights;
  StateLayout &state = layout.state;
  // A constant that every op reading it reads in `narrowType` (a GEMM's
  // weight under bf16) is stored in that type alone: once, in the type the
  // GEMM reads, rather than beside its f32 original.
  DenseMap<Attribute, bool> narrowOnly;
  if (narrowType)
    for (func::FuncOp fn : entries)
      fn.walk([&](arith::ConstantOp c) {
        auto v = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!v || !v.getElementType().isF32())
          return;
        bool all =
            !c->use_empty() && llvm::all_of(c->getUses(), [&](OpOperand &use) {
              return readsNarrow(use);
            });
        auto [it, fresh] = narrowOnly.try_emplace(v, all);
        if (!fresh)
          it->second = it->second && all;
      });
  for (func::FuncOp fn : entries)
    fn.walk([&](arith::ConstantOp c) {
      auto v = dyn_cast<ElementsAttr>(c.getValue());
      if (!v)
        return;
      if (!narrowOnly.lookup(v)) {
        weights.add(v);
        return;
      }
      if (weights.narrowOffsetOf.count(v))
        return;
      auto dense = cast<DenseElementsAttr>(v);
      weights.narrowOffsetOf[v] = weights.add(
          roundElements(dense, 0, dense.getType().getShape(), narrowType));
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
          bool sharded = u.getSharded();
          state.adamM[u.getParameter()] = state.add(
              u.getParameter(),
              sharded ? TFM_STATE_ADAM_M_SHARD : TFM_STATE_ADAM_M, type, -1);
          state.adamV[u.getParameter()] = state.add(
              u.getParameter(),
              sharded ? TFM_STATE_ADAM_V_SHARD : TFM_STATE_ADAM_V, type, -1);
        }
      }
      auto cacheSlot = [&](StringRef name, RankedTensorType type,
                           bool source) {
        auto [it, fresh] = state.typeOf.try_emplace(name, type);
        if (!fresh && it->second != type) {
          op->emitError("cache '") << name << "' is " << type
                                   << " here but " << it->second
                                   << " elsewhere";
          return false;
        }
        if (fresh)
          state.cache[name] = state.add(
              name, source ? TFM_STATE_SOURCE : TFM_STATE_CACHE, type, -1);
        return true;
      };
      if (auto u = dyn_cast<CacheUpdateOp>(op);
          u && !cacheSlot(u.getName(), u.getType(), u.getSource()))
        return WalkResult::interrupt();
      if (auto r = dyn_cast<CacheReadOp>(op);
          r && !cacheSlot(r.getName(), r.getType(), r.getSource()))
        return WalkResult::interrupt();
      auto i64 =
          RankedTensorType::get({}, IntegerType::get(op->getContext(), 64));
      if (isa<NextStepOp>(op) && state.step < 0)
        state.step = state.add("step", TFM_STATE_STEP, i64, -1);
      if (isa<ProcessRankOp>(op) && state.rank < 0)
        state.rank = state.add("rank", TFM_STATE_RANK, i64, -1);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  return success();
}

void mlir::tfm::recordModuleLayout(ModuleOp module, const ModuleLayout &layout,
                                   ArrayRef<Attribute> entries) {
  MLIRContext *ctx = module.getContext();
  Builder b(ctx);
  module->setAttr("tfm.entries", b.getArrayAttr(entries));
  module->setAttr("tfm.weights", b.getArrayAttr(layout.weights.values));
  module->setAttr("tfm.weight_offsets",
                  b.getDenseI64ArrayAttr(layout.weights.offsets));
  module->setAttr("tfm.weights_bytes",
                  b.getI64IntegerAttr(layout.weights.bytes));
  SmallVector<Attribute> slots;
  for (const StateLayout::Slot &slot : layout.state.slots)
    slots.push_back(StateSlotAttr::get(ctx, slot.name,
                                       static_cast<StateKind>(slot.kind),
                                       slot.type, slot.offset, slot.init));
  module->setAttr("tfm.states", b.getArrayAttr(slots));
  int64_t stateBytes = layout.state.bytes;
  if (layout.checkSlotsOffset >= 0 && !layout.checks.checks.empty()) {
    stateBytes = layout.checkSlotsOffset +
                 TFM_CHECK_SLOT_BYTES *
                     static_cast<int64_t>(layout.checks.checks.size());
    module->setAttr("tfm.check_slots_offset",
                    b.getI64IntegerAttr(layout.checkSlotsOffset));
  }
  module->setAttr("tfm.state_bytes", b.getI64IntegerAttr(stateBytes));
  module->setAttr("tfm.checks", b.getArrayAttr(layout.checks.checks));
}

void mlir::tfm::declareHostFunction(ModuleOp module, StringRef name,
                                    FunctionType type) {
  if (module.lookupSymbol(name))
    return;
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  b.create<func::FuncOp>(module.getLoc(), name, type).setPrivate();
}

void mlir::tfm::declareCheckFailed(ModuleOp module) {
  Builder b(module.getContext());
  auto ptrTy = LLVM::LLVMPointerType::get(module.getContext());
  declareHostFunction(
      module, kCheckFailedSymbol,
      b.getFunctionType({ptrTy, b.getI32Type(), b.getI64Type(), b.getI64Type()},
                        {b.getI32Type()}));
}

std::string mlir::tfm::describeLocation(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string s = "node '" + name.getName().str() + "'";
    if (auto op = dyn_cast<NameLoc>(name.getChildLoc()))
      s += " (" + op.getName().str() + ")";
    return s;
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().str() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc); fused && !fused.getLocations().empty())
    return describeLocation(fused.getLocations().front());
  std::string s;
  llvm::raw_string_ostream os(s);
  os << loc;
  return os.str();
}

//===----------------------------------------------------------------------===//
// Buffers of one entry
//===----------------------------------------------------------------------===//

BufferizedEntry::BufferizedEntry(Kind kind, func::FuncOp fn,
                                 ModuleLayout &layout)
    : ctx(fn.getContext()), b(ctx), loc(UnknownLoc::get(ctx)), fn(fn),
      layout(layout), kind(kind) {}

BufferizedEntry::~BufferizedEntry() = default;

void BufferizedEntry::internalError(const Twine &message) {
  emitError(loc) << "internal error: " << message;
  failedOp = true;
}

Value BufferizedEntry::view(Value base, int64_t byteOffset, Type type) {
  auto memref = isa<MemRefType>(type) ? cast<MemRefType>(type)
                                      : memrefOf(type);
  Value shift = b.create<arith::ConstantIndexOp>(loc, byteOffset);
  Value v = b.create<memref::ViewOp>(loc, memref, base, shift, ValueRange{});
  places[v] = {base, byteOffset};
  return v;
}

bool BufferizedEntry::isInline(Value tensor) {
  auto r = dyn_cast<OpResult>(tensor);
  return r && isa_and_nonnull<InlineAttr>(
                  getPlannedBuffer(r.getOwner(), r.getResultNumber()));
}

Value BufferizedEntry::bufferOf(Value tensor) {
  if (auto v = views.find(tensor); v != views.end()) {
    Value &m = materialized[tensor];
    if (!m) {
      auto type = cast<RankedTensorType>(tensor.getType());
      m = v->second.isDense()
              ? reshape(v->second.base, memrefOf(type))
              : materialize(v->second, type.getElementType());
    }
    return m;
  }
  auto it = buffers.find(tensor);
  if (it != buffers.end())
    return it->second;
  internalError("a tensor is read before the op that defines it is lowered");
  return temporary(memrefOf(tensor.getType()));
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
  if (v == views.end() || v->second.isDense())
    return bufferOf(tensor);
  Value dense = temporary(memrefOf(tensor.getType()));
  copyView(v->second,
           {dense, 0, v->second.shape, rowMajorStrides(v->second.shape)},
           cast<ShapedType>(tensor.getType()).getElementType());
  return dense;
}

Value BufferizedEntry::temporary(MemRefType type) {
  int64_t offset = alignBuffer(planBytes) + entryScratchUsed + scratchUsed;
  scratchUsed += alignBuffer(bufferBytes(type));
  scratchBytes = std::max(scratchBytes, entryScratchUsed + scratchUsed);
  return view(arena, offset, type);
}

Value BufferizedEntry::entryScratch(StringRef key, MemRefType type,
                                    bool &fresh) {
  if (Value known = entryScratchByKey.lookup(key)) {
    fresh = false;
    return known;
  }
  // The op's temporaries would overlap a region made after them.
  assert(scratchUsed == 0 && "entry scratch asked for after a temporary");
  fresh = true;
  int64_t offset = alignBuffer(planBytes) + entryScratchUsed;
  entryScratchUsed += alignBuffer(bufferBytes(type));
  scratchBytes = std::max(scratchBytes, entryScratchUsed);
  Value buffer = view(arena, offset, type);
  entryScratchByKey[key] = buffer;
  return buffer;
}

Value BufferizedEntry::destination(Value result) {
  if (auto it = buffers.find(result); it != buffers.end())
    return it->second;
  auto r = cast<OpResult>(result);
  Attribute plan = getPlannedBuffer(r.getOwner(), r.getResultNumber());
  Value buf;
  if (auto out = dyn_cast_or_null<OutputAttr>(plan)) {
    if (out.getIndex() < static_cast<int64_t>(outBuffers.size()))
      buf = outBuffers[out.getIndex()];
  } else if (auto arenaPlan = dyn_cast_or_null<ArenaAttr>(plan)) {
    if (!fitsInArena(r, arenaPlan))
      return temporary(memrefOf(result.getType()));
    if (!arenaPlan.getStrides() && !arenaPlan.getBytes())
      buf = view(arena, arenaPlan.getOffset(), result.getType());
  }
  if (!buf) {
    std::string what;
    llvm::raw_string_ostream os(what);
    os << "result #" << r.getResultNumber() << " of '"
       << r.getOwner()->getName() << "' is planned as "
       << (plan ? plan : Attribute()) << ", which its lowering does not "
       << "write (it writes a dense buffer)";
    internalError(os.str());
    buf = temporary(memrefOf(result.getType()));
  }
  buffers[result] = buf;
  return buf;
}

bool BufferizedEntry::fitsInArena(OpResult r, ArenaAttr plan) {
  auto type = cast<RankedTensorType>(r.getType());
  int64_t end = plan.getOffset() + std::max(plan.getBytes(), bufferBytes(type));
  if (plan.getOffset() >= 0 && end <= planBytes)
    return true;
  internalError("result #" + Twine(r.getResultNumber()) + " of '" +
                r.getOwner()->getName().getStringRef() +
                "' is planned at arena bytes [" + Twine(plan.getOffset()) +
                ", " + Twine(end) + "), past the function's tfm.arena_bytes = " +
                Twine(planBytes));
  return false;
}

Value BufferizedEntry::stridedDestination(Value result) {
  StridedView view = destinationView(result);
  if (!view.base)
    return Value();
  return materialize(view, cast<ShapedType>(result.getType()).getElementType());
}

StridedView BufferizedEntry::destinationView(Value result) {
  auto r = cast<OpResult>(result);
  auto type = cast<RankedTensorType>(result.getType());
  auto arenaPlan = dyn_cast_or_null<ArenaAttr>(
      getPlannedBuffer(r.getOwner(), r.getResultNumber()));
  if (!arenaPlan || (!arenaPlan.getStrides() && !arenaPlan.getBytes()))
    return {destination(result), 0, SmallVector<int64_t>(type.getShape()),
            rowMajorStrides(type.getShape())};
  if (!fitsInArena(r, arenaPlan))
    return {temporary(memrefOf(type)), 0, SmallVector<int64_t>(type.getShape()),
            rowMajorStrides(type.getShape())};
  // Storage of its own shape: a flat buffer of its bytes, which the
  // tensor reads at its strides.
  int64_t bytes = std::max(arenaPlan.getBytes(), bufferBytes(type));
  int64_t width = bufferBytes(RankedTensorType::get({1}, type.getElementType()));
  Value base = view(arena, arenaPlan.getOffset(),
                    MemRefType::get({bytes / width}, type.getElementType()));
  StridedView v{base, 0, SmallVector<int64_t>(type.getShape()),
                arenaPlan.getStrides()
                    ? SmallVector<int64_t>(arenaPlan.getStrides().asArrayRef())
                    : rowMajorStrides(type.getShape())};
  views[result] = v;
  return v;
}

LogicalResult BufferizedEntry::bindPlannedViews(Operation *op) {
  for (OpResult r : op->getResults()) {
    auto plan = dyn_cast_or_null<ViewAttr>(
        getPlannedBuffer(op, r.getResultNumber()));
    if (!plan || views.count(r))
      continue;
    Value source = plan.getOperand() >= 0 ? op->getOperand(plan.getOperand())
                                          : op->getResult(plan.getResult());
    if (plan.getResult() >= 0 && !views.count(source) &&
        !buffers.count(source))
      continue; // a view of a result this op has not written yet
    StridedView src = viewOf(source);
    auto type = cast<RankedTensorType>(r.getType());
    StridedView v{src.base, plan.getOffset(),
                  SmallVector<int64_t>(type.getShape()),
                  SmallVector<int64_t>(plan.getStrides().asArrayRef())};
    // The view must lie inside the storage it reads.
    int64_t last = v.offset;
    for (auto [d, st] : llvm::zip(v.shape, v.strides))
      last += (d - 1) * st;
    int64_t capacity = cast<MemRefType>(src.base.getType()).getNumElements();
    if (type.getNumElements() > 0 && last >= capacity) {
      internalError("the plan's view of result #" +
                    Twine(r.getResultNumber()) + " of '" +
                    op->getName().getStringRef() + "' reaches element " +
                    Twine(last) + " of a storage of " + Twine(capacity));
      return failure();
    }
    views[r] = v;
  }
  return success();
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
// Control
//===----------------------------------------------------------------------===//

void BufferizedEntry::exitIfNonZero(Value status) {
  Block *here = b.getInsertionBlock();
  Block *next = here->splitBlock(b.getInsertionPoint());
  b.setInsertionPointToEnd(here);
  Value zero = b.create<arith::ConstantIntOp>(loc, 0, 32);
  Value failed =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, status, zero);
  b.create<cf::CondBranchOp>(loc, failed, exitBlock, ValueRange{status}, next,
                             ValueRange{});
  b.setInsertionPointToStart(next);
}

void BufferizedEntry::exitIf(
    Value condition, function_ref<Value(OpBuilder &, Location)> failure) {
  Block *here = b.getInsertionBlock();
  Block *next = here->splitBlock(b.getInsertionPoint());
  Block *fail = b.createBlock(next);
  Value status = failure(b, loc);
  b.create<cf::BranchOp>(loc, exitBlock, ValueRange{status});
  b.setInsertionPointToEnd(here);
  b.create<cf::CondBranchOp>(loc, condition, fail, next);
  b.setInsertionPointToStart(next);
}

LogicalResult BufferizedEntry::checkIndices(Operation *op, Value indices,
                                            int64_t lower, int64_t upper,
                                            std::optional<int64_t> skip) {
  return checkIndexRange(op, indices, lower, upper, skip, std::nullopt);
}

LogicalResult BufferizedEntry::checkIndexColumn(Operation *op, Value indices,
                                                int64_t column, int64_t lower,
                                                int64_t upper) {
  return checkIndexRange(op, indices, lower, upper, std::nullopt, column);
}

LogicalResult BufferizedEntry::checkIndexRange(Operation *op, Value indices,
                                               int64_t lower, int64_t upper,
                                               std::optional<int64_t> skip,
                                               std::optional<int64_t> column) {
  auto type = cast<RankedTensorType>(indices.getType());
  int64_t n = type.getNumElements();
  if (n == 0)
    return success();
  Type elem = type.getElementType();
  // What holds the indices: an entry input (through reshapes and casts),
  // or a tensor the model computes.
  Value source = indices;
  while (Operation *def = source.getDefiningOp()) {
    if (!isa<ReshapeOp, CastOp, TransposeOp>(def))
      break;
    source = def->getOperand(0);
  }
  int64_t input = -1;
  std::string tensor;
  if (auto arg = dyn_cast<BlockArgument>(source)) {
    input = arg.getArgNumber();
    auto name = fn.getArgAttrOfType<StringAttr>(input, "tfm.name");
    tensor = "input '" +
             (name ? name.str() : "input_" + std::to_string(input)) + "'";
  } else {
    tensor = "the indices computed at " +
             describeLocation(source.getDefiningOp()->getLoc());
  }
  if (!checkedIndices
           .insert({indices.getAsOpaquePointer(), lower, upper, skip, column})
           .second)
    return success();
  // Indices known now (a model's arange of positions, folded) need no
  // code: every run would find the same, so an index out of range fails
  // the compilation instead of every run.
  DenseIntElementsAttr known;
  if (matchPattern(indices, m_Constant(&known))) {
    int64_t k = type.getRank() ? type.getShape().back() : 1, at = 0;
    for (const APInt &value : known.getValues<APInt>()) {
      int64_t v = value.getSExtValue();
      bool wanted = !column || at % k == *column;
      if (wanted && (v < lower || v >= upper) && (!skip || v != *skip))
        return op->emitError()
               << tensor << " are constants here, and the one at position "
               << at << " is " << v << ", outside [" << lower << ", " << upper
               << ") that the op reads, so every run would fail: is a "
                  "--shape larger than the model allows (a sequence longer "
                  "than its table of positions)?";
      ++at;
    }
    return success();
  }
  if (input >= 0 && source != indices)
    input = -1; // positions count in the tensor the op reads
  int32_t check = layout.checks.add(
      IndexCheckAttr::get(ctx, describeLocation(op->getLoc()), tensor, input,
                          lower, upper));

  // The first position out of range (n when there is none). Split into
  // `runs` interleaved runs (position s·runs + r is step s of run r), the
  // first of each run, then the first of the runs'.
  Value flat = reshape(denseOf(indices), MemRefType::get({n}, elem));
  int64_t runs = indexCheckRuns(n);
  Type i64 = b.getI64Type();
  // The running first position `acc`, after the index `v` at `pos`.
  auto firstBad = [&](OpBuilder &ob, Location l, Value v, Value pos,
                      Value acc) -> Value {
    if (v.getType() != i64)
      v = ob.create<arith::ExtSIOp>(l, i64, v);
    auto c = [&](int64_t x) {
      return ob.create<arith::ConstantIntOp>(l, x, 64);
    };
    Value bad = ob.create<arith::OrIOp>(
        l, ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, v, c(lower)),
        ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, v, c(upper)));
    if (skip)
      bad = ob.create<arith::AndIOp>(
          l, bad,
          ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, v, c(*skip)));
    if (column) {
      int64_t k = type.getShape().back();
      Value col = ob.create<arith::RemSIOp>(l, pos, c(k));
      bad = ob.create<arith::AndIOp>(
          l, bad,
          ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, col,
                                   c(*column)));
    }
    return ob.create<arith::SelectOp>(
        l, bad, ob.create<arith::MinSIOp>(l, acc, pos), acc);
  };
  auto index = [&](OpBuilder &ob, Location l, unsigned d) -> Value {
    return ob.create<arith::IndexCastOp>(l, i64,
                                         ob.create<linalg::IndexOp>(l, d));
  };
  Value first = temporary(MemRefType::get({}, i64));
  fill(first, b.getI64IntegerAttr(n));
  if (runs == 1) {
    generic({flat}, {AffineMap::getMultiDimIdentityMap(1, ctx)}, first,
            AffineMap::get(1, 0, {}, ctx), {utils::IteratorType::reduction},
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return firstBad(ob, l, a[0], index(ob, l, 0), a[1]);
            });
  } else {
    Value steps = reshape(flat, MemRefType::get({n / runs, runs}, elem));
    Value firsts = temporary(MemRefType::get({runs}, i64));
    fill(firsts, b.getI64IntegerAttr(n));
    generic({steps}, {AffineMap::getMultiDimIdentityMap(2, ctx)}, firsts,
            AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx),
            {utils::IteratorType::reduction, utils::IteratorType::parallel},
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value pos = ob.create<arith::AddIOp>(
                  l,
                  ob.create<arith::MulIOp>(
                      l, index(ob, l, 0),
                      ob.create<arith::ConstantIntOp>(l, runs, 64)),
                  index(ob, l, 1));
              return firstBad(ob, l, a[0], pos, a[1]);
            });
    generic({firsts}, {AffineMap::getMultiDimIdentityMap(1, ctx)}, first,
            AffineMap::get(1, 0, {}, ctx), {utils::IteratorType::reduction},
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              return ob.create<arith::MinSIOp>(l, a[0], a[1]);
            });
  }
  reportCheck(check, first, flat);
  return success();
}

void BufferizedEntry::reportCheck(int32_t check, Value first, Value flat) {
  Type i64 = b.getI64Type();
  int64_t n = cast<MemRefType>(flat.getType()).getNumElements();
  Value position = b.create<memref::LoadOp>(loc, first, ValueRange{});
  Value found = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::slt, position,
      b.create<arith::ConstantIntOp>(loc, n, 64));
  exitIf(found, [&](OpBuilder &ob, Location l) -> Value {
    Value at = ob.create<arith::IndexCastOp>(l, ob.getIndexType(), position);
    Value value = ob.create<memref::LoadOp>(l, flat, ValueRange{at});
    if (value.getType() != i64)
      value = ob.create<arith::ExtSIOp>(l, i64, value);
    Value id = ob.create<arith::ConstantIntOp>(l, check, 32);
    return ob
        .create<func::CallOp>(l, kCheckFailedSymbol, TypeRange{ob.getI32Type()},
                              ValueRange{host, id, position, value})
        .getResult(0);
  });
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

Value BufferizedEntry::roundedConstant(Value buffer, Type elem) {
  auto type = cast<MemRefType>(buffer.getType());
  auto *semantics = isa<FloatType>(elem)
                        ? &cast<FloatType>(elem).getFloatSemantics()
                        : nullptr;
  if (!semantics || !type.getElementType().isF32() || !type.hasStaticShape())
    return {};
  // A dense window of a constant's view (the rows of one part of a packed
  // projection, say): its first element past the view's.
  int64_t first = 0;
  Value base = buffer;
  if (auto sub = buffer.getDefiningOp<memref::SubViewOp>()) {
    SmallVector<int64_t> strides;
    if (failed(getStridesAndOffset(type, strides, first)) ||
        ShapedType::isDynamic(first) ||
        strides != computeSuffixProduct(type.getShape()) ||
        !sub.getSource().getType().getLayout().isIdentity())
      return {};
    base = sub.getSource();
  } else if (!type.getLayout().isIdentity()) {
    return {};
  }
  auto [root, byteOffset] = placeOf(base);
  if (!root || root != weightsArg)
    return {};
  // Constants are viewed at their own offsets, which grow with the index.
  ArrayRef<int64_t> offsets = layout.weights.offsets;
  auto at = llvm::lower_bound(offsets, byteOffset);
  if (at == offsets.end() || *at != byteOffset)
    return {};
  auto dense = dyn_cast<DenseElementsAttr>(
      layout.weights.values[at - offsets.begin()]);
  int64_t count = type.getNumElements();
  if (!dense || !dense.getElementType().isF32() ||
      first + count > dense.getNumElements())
    return {};
  DenseElementsAttr copy = roundElements(dense, first, type.getShape(), elem);
  return view(weightsArg, layout.weights.add(copy),
              MemRefType::get(type.getShape(), elem));
}

Value BufferizedEntry::narrowed(Value buffer, Type elem) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getElementType() == elem)
    return buffer;
  if (Value rounded = roundedConstant(buffer, elem))
    return rounded;
  // One copy per op: the parts of a projection share their input's, and
  // q·qᵀ its operand's. Not one made in a fallback, which runs on one
  // branch only and so dominates nothing after it.
  auto key = std::make_pair(buffer, elem);
  if (Value copy = narrowCopies.lookup(key))
    return copy;
  Value copy = temporary(MemRefType::get(type.getShape(), elem));
  elementwise({buffer}, copy,
              [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                return ob.create<arith::TruncFOp>(l, elem, a[0]);
              });
  if (!inFallback)
    narrowCopies[key] = copy;
  return copy;
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

//===----------------------------------------------------------------------===//
// The entry
//===----------------------------------------------------------------------===//

LogicalResult BufferizedEntry::run(const OpLoweringSet &lowerings,
                                   Attribute &entryInfo) {
  if (!fn.getBody().hasOneBlock())
    return fn.emitError("the backends need single-block functions");
  auto arenaAttr = fn->getAttrOfType<IntegerAttr>("tfm.arena_bytes");
  if (!arenaAttr)
    return fn.emitError("run tfm-plan-memory before lowering to a target");
  for (Type t : fn.getFunctionType().getInputs())
    if (!isa<RankedTensorType>(t) || !cast<RankedTensorType>(t).hasStaticShape())
      return fn.emitError("entry arguments must be statically shaped tensors");
  planBytes = arenaAttr.getInt();
  // The metadata describes the signature as the model declares it.
  FunctionType signature = fn.getFunctionType();
  makeSignless();

  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  // The arena's size is known once scratch memory is counted; the argument
  // gets its type at the end.
  SmallVector<Type> argTypes{ptrTy, MemRefType::get({planBytes}, b.getI8Type()),
                             MemRefType::get({layout.weights.bytes}, b.getI8Type()),
                             MemRefType::get({layout.state.bytes}, b.getI8Type())};
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
  loc = fn.getLoc();
  // Every exit goes through one block that returns the status.
  exitBlock = b.createBlock(&entry.getBody(), entry.getBody().end(),
                            {b.getI32Type()}, {loc});
  b.create<func::ReturnOp>(loc, exitBlock->getArgument(0));
  b.setInsertionPointToStart(body);
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
  Block &src = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(src.getTerminator());
  for (unsigned i = 0; i < ret.getNumOperands(); ++i)
    outBuffers.push_back(body->getArgument(kFirstIO + numIn + i));
  if (failed(beginEntry()))
    return failure();

  for (Operation &op : src.without_terminator()) {
    loc = op.getLoc();
    scratchUsed = 0;
    narrowCopies.clear();
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      auto value = dyn_cast<ElementsAttr>(c.getValue());
      if (!value)
        return op.emitError("the backends need tensor constants");
      // Stored in a GEMM's operand type alone (layOutModule).
      auto narrow = layout.weights.narrowOffsetOf.find(value);
      if (narrow != layout.weights.narrowOffsetOf.end()) {
        buffers[c.getResult()] =
            view(weightsArg, narrow->second,
                 MemRefType::get(cast<ShapedType>(c.getType()).getShape(),
                                 gemmOperandType(b.getF32Type())));
        continue;
      }
      buffers[c.getResult()] = view(
          weightsArg, layout.weights.offsetOf.lookup(value), c.getType());
      continue;
    }
    if (auto p = dyn_cast<ParameterOp>(op)) {
      // The parameter's current value, in the session's state.
      buffers[p.getResult()] = view(
          stateArg, layout.state.parameter.lookup(p.getName()), p.getType());
      continue;
    }
    if (auto r = dyn_cast<CacheReadOp>(op)) {
      buffers[r.getResult()] = view(
          stateArg, layout.state.cache.lookup(r.getName()), r.getType());
      continue;
    }
    if (auto u = dyn_cast<CacheUpdateOp>(op))
      // The cache is the op's result: what reads it reads the state, which
      // the lowering has written.
      buffers[u.getResult()] = view(
          stateArg, layout.state.cache.lookup(u.getName()), u.getType());
    else if (op.getNumResults() && !op.getAttr(kPlanAttrName))
      return op.emitError("'") << op.getName()
                               << "' has no memory plan; run tfm-plan-memory "
                                  "before lowering";
    // Views and tensors computed where they are read need no code here,
    // unless the op does more than move data: a collective works on its
    // view in place.
    bool collective = isa<AllReduceStartOp, AllReduceWaitOp>(op);
    if (collective && failed(bindPlannedViews(&op)))
      return failure();
    if (!collective && op.getNumResults() &&
        llvm::all_of(op.getResults(), [&](OpResult r) {
          return isa_and_nonnull<ViewAttr, InlineAttr>(
              getPlannedBuffer(&op, r.getResultNumber()));
        })) {
      if (failed(bindPlannedViews(&op)) || failedOp)
        return failure();
      continue;
    }
    const OpLoweringFn *lowering = lowerings.lookup(&op);
    if (!lowering)
      return op.emitError("the ")
             << targetName() << " backend cannot lower '" << op.getName()
             << "' yet";
    if (failed((*lowering)(&op, *this)) || failed(endOp(&op)) || failedOp)
      return failure();
    // Results that are views of this op's other results (a packed
    // projection's parts).
    if (failed(bindPlannedViews(&op)) || failedOp)
      return failure();
  }
  // Returned values the ops did not write in place: arguments, constants,
  // views, and a value returned at more than one position.
  loc = ret.getLoc();
  scratchUsed = 0;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (memrefOf(v.getType()).getNumElements() == 0)
      continue;
    if (!isView(v) && bufferOf(v) == outBuffers[i])
      continue;
    StridedView from = viewOf(v);
    if (from.isDense())
      copy(bufferOf(v), outBuffers[i]);
    else
      copyView(from,
               {outBuffers[i], 0, from.shape, rowMajorStrides(from.shape)},
               cast<ShapedType>(v.getType()).getElementType());
  }
  if (failedOp || failed(endOp(ret.getOperation())))
    return failure();
  b.create<cf::BranchOp>(loc, exitBlock,
                         ValueRange{b.create<arith::ConstantIntOp>(loc, 0, 32)});

  // The arena: the plan's buffers, then the largest scratch an op used.
  int64_t arenaBytes = scratchBytes ? alignBuffer(planBytes) + scratchBytes
                                    : planBytes;
  auto arenaType = MemRefType::get({arenaBytes}, b.getI8Type());
  arena.setType(arenaType);
  argTypes[1] = arenaType;
  // The weights grew by the constants this entry rounded (roundedConstant).
  auto weightsType = MemRefType::get({layout.weights.bytes}, b.getI8Type());
  weightsArg.setType(weightsType);
  argTypes[2] = weightsType;
  entry.setFunctionType(b.getFunctionType(argTypes, {b.getI32Type()}));

  // What the artifact's metadata table says about this entry.
  auto nameOf = [&](DictionaryAttr attrs, unsigned i, const char *prefix) {
    if (attrs)
      if (auto n = attrs.getAs<StringAttr>("tfm.name"))
        return n.str();
    return prefix + std::to_string(i);
  };
  SmallVector<Attribute> ins, outs;
  SmallVector<int64_t> inputValues;
  bool anyValues = false;
  for (unsigned i = 0; i < numIn; ++i) {
    ins.push_back(TensorDescAttr::get(
        ctx, nameOf(fn.getArgAttrDict(i), i, "input_"),
        cast<RankedTensorType>(signature.getInput(i))));
    InputValues values = inputValuesOf(fn.getArgument(i));
    inputValues.append({values.kind, values.lower, values.upper});
    anyValues |= values.kind != TFM_INPUT_VALUES_ANY;
  }
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    outs.push_back(TensorDescAttr::get(
        ctx, nameOf(fn.getResultAttrDict(i), i, "output_"),
        cast<RankedTensorType>(signature.getResult(i))));
  entryInfo = EntryAttr::get(
      ctx, fn.getSymName(), FlatSymbolRefAttr::get(ctx, name),
      b.getArrayAttr(ins), b.getArrayAttr(outs), arenaBytes,
      anyValues ? b.getDenseI64ArrayAttr(inputValues) : DenseI64ArrayAttr());
  return success();
}

void BufferizedEntry::makeSignless() {
  // 4-bit integers widen to bytes here too: a buffer holds one per byte
  // (the weights writer extends them), which an i4 memref would not say
  // to vector loads.
  auto retype = [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    auto elem = t ? dyn_cast<IntegerType>(t.getElementType()) : IntegerType();
    if (!elem || (elem.isSignless() && elem.getWidth() != 4))
      return;
    if (elem.isUnsigned())
      unsignedTensors.insert(v);
    declaredElements[v] = elem;
    v.setType(t.clone(IntegerType::get(ctx, std::max(8u, elem.getWidth()))));
  };
  fn.walk([&](Operation *op) {
    for (Region &r : op->getRegions())
      for (Block &block : r)
        for (BlockArgument a : block.getArguments())
          retype(a);
    for (Value v : op->getResults())
      retype(v);
  });
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  fn.setType(FunctionType::get(ctx, fn.getBody().getArgumentTypes(),
                               ret.getOperandTypes()));
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

namespace {
struct LoweringRegistry {
  std::mutex mutex;
  llvm::StringMap<PopulateLoweringsFn> targets;
};
LoweringRegistry &loweringRegistry() {
  static LoweringRegistry r;
  return r;
}
} // namespace

void mlir::tfm::registerTargetLowerings(StringRef target,
                                        PopulateLoweringsFn populate) {
  LoweringRegistry &r = loweringRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.targets[target] = populate;
}

std::vector<std::string> mlir::tfm::registeredLoweringTargets() {
  LoweringRegistry &r = loweringRegistry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto &entry : r.targets)
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}

LogicalResult mlir::tfm::populateTargetLowerings(StringRef target,
                                                 OpLoweringSet &set) {
  PopulateLoweringsFn populate = nullptr;
  {
    LoweringRegistry &r = loweringRegistry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.targets.find(target);
    if (it == r.targets.end())
      return failure();
    populate = it->second;
  }
  populate(set);
  return success();
}
