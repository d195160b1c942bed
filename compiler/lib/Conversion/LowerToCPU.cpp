//===- LowerToCPU.cpp - tfm on tensors to kernel calls and linalg ---------===//
//
// Turns each tfm function whose memory `tfm-plan-memory` has planned into an
// entry function on buffers:
//
//   func @__tfm_entry_<name>(%host: !llvm.ptr, %arena: memref<Axi8>,
//                            %weights: memref<Wxi8>, %in..., %out...) -> i32
//
// Every tensor gets its buffer from the plan: a view of the arena at its
// offset, a view of the weights blob for constants, the caller's buffer for
// inputs, and the caller's output buffer for a returned value, so results
// are written where the caller wants them without a copy. This is the
// bufferization step of the CPU path; it is done here rather than by the
// generic one-shot bufferization because the plan has already decided every
// buffer, and the tfm ops are all value semantics on static shapes.
//
// The heavy ops (GEMMs, masked softmax, layer norm) become calls through
// `host->run_kernel` to oneDNN primitives that the runtime creates once per
// session from the descriptors collected in the module attribute
// `tfm.kernels`. Everything else becomes linalg.generic on the buffers,
// which the rest of tfm-cpu-pipeline lowers to loops and LLVM.
//
// The module also gets `tfm.entries` (what the artifact's metadata table
// needs) and `tfm.weights` / `tfm.weight_offsets` / `tfm.weights_bytes`
// (the constants and where each lies in the blob).
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TfmOps.h"
#include "tfm/Conversion/Passes.h"
#include "tfm/Transforms/CPUFolding.h"
#include "tfm/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <numeric>

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERTOCPUPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr const char *kRunKernel = "__tfm_run_kernel";

/// The ABI's code of a LINEAR kernel's activation.
int64_t abiActivation(Activation act) {
  switch (act) {
  case Activation::none:
    return TFM_ACTIVATION_NONE;
  case Activation::relu:
    return TFM_ACTIVATION_RELU;
  case Activation::gelu:
    return TFM_ACTIVATION_GELU;
  case Activation::gelu_tanh:
    return TFM_ACTIVATION_GELU_TANH;
  }
  llvm_unreachable("unknown activation");
}

int64_t product(ArrayRef<int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

MemRefType memrefOf(Type t) {
  auto r = cast<RankedTensorType>(t);
  return MemRefType::get(r.getShape(), r.getElementType());
}

bool isF32(Type t) {
  return cast<ShapedType>(t).getElementType().isF32();
}

/// The constants of every entry, deduplicated, laid out 64-byte aligned.
struct WeightsLayout {
  DenseMap<Attribute, int64_t> offsetOf;
  SmallVector<Attribute> values;
  SmallVector<int64_t> offsets;
  int64_t bytes = 0;

  int64_t add(ElementsAttr value) {
    auto [it, fresh] = offsetOf.try_emplace(value, bytes);
    if (fresh) {
      values.push_back(value);
      offsets.push_back(bytes);
      bytes += alignBuffer(bufferBytes(cast<ShapedType>(value.getType())));
    }
    return it->second;
  }
};

/// The module's kernel descriptors, one per distinct configuration.
struct KernelTable {
  SmallVector<Attribute> descs;
  DenseMap<Attribute, int32_t> indexOf;

  /// The index of the descriptor, or -1 when its arrays do not fit the
  /// ABI's (an internal error of the lowering).
  int32_t add(MLIRContext *ctx, int32_t kind, ArrayRef<int64_t> params,
              ArrayRef<double> fparams, ArrayRef<int64_t> strides,
              int32_t dtype) {
    if (params.size() > TFM_KERNEL_MAX_PARAMS ||
        fparams.size() > TFM_KERNEL_MAX_FPARAMS ||
        strides.size() > TFM_KERNEL_MAX_STRIDES)
      return -1;
    Builder b(ctx);
    SmallVector<int64_t, TFM_KERNEL_MAX_PARAMS> p(params);
    p.resize(TFM_KERNEL_MAX_PARAMS, 0);
    SmallVector<double, TFM_KERNEL_MAX_FPARAMS> f(fparams);
    f.resize(TFM_KERNEL_MAX_FPARAMS, 0.0);
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("kind", b.getI32IntegerAttr(kind)),
        b.getNamedAttr("dtype", b.getI32IntegerAttr(dtype)),
        b.getNamedAttr("params", b.getDenseI64ArrayAttr(p)),
        b.getNamedAttr("fparams", b.getDenseF64ArrayAttr(f))};
    if (!strides.empty()) {
      SmallVector<int64_t, TFM_KERNEL_MAX_STRIDES> st(strides);
      st.resize(TFM_KERNEL_MAX_STRIDES, 0);
      fields.push_back(b.getNamedAttr("strides", b.getDenseI64ArrayAttr(st)));
    }
    Attribute desc = b.getDictionaryAttr(fields);
    auto [it, fresh] = indexOf.try_emplace(desc, descs.size());
    if (fresh)
      descs.push_back(desc);
    return it->second;
  }
};

/// The session state of a training artifact: parameters, Adam's moments and
/// the step count, each at a 64-byte aligned offset (tfm/abi.h).
struct StateLayout {
  struct Slot {
    std::string name;
    int32_t kind;
    RankedTensorType type;
    int64_t offset, init;
  };
  SmallVector<Slot> slots;
  llvm::StringMap<int64_t> parameter, adamM, adamV;
  llvm::StringMap<RankedTensorType> typeOf;
  int64_t step = -1;
  int64_t bytes = 0;

  int64_t add(StringRef name, int32_t kind, RankedTensorType type,
              int64_t init) {
    int64_t offset = bytes;
    slots.push_back({name.str(), kind, type, offset, init});
    bytes += alignBuffer(bufferBytes(type));
    return offset;
  }
};

/// `act(x)` in the element type of `x`; relu, gelu and gelu_tanh as the
/// LINEAR kernel's post-ops compute them.
Value applyActivation(OpBuilder &ob, Location l, Activation act, Value x) {
  Type elem = x.getType();
  auto c = [&](double v) {
    return ob.create<arith::ConstantOp>(l, ob.getFloatAttr(elem, v));
  };
  auto half = [&](Value y) { return ob.create<arith::MulFOp>(l, c(0.5), y); };
  switch (act) {
  case Activation::none:
    return x;
  case Activation::relu:
    return ob.create<arith::MaximumFOp>(l, x, c(0));
  case Activation::gelu: {
    // 0.5·x·(1 + erf(x/√2))
    Value e = ob.create<math::ErfOp>(l, ob.create<arith::MulFOp>(l, x, c(M_SQRT1_2)));
    return ob.create<arith::MulFOp>(l, half(x), ob.create<arith::AddFOp>(l, c(1), e));
  }
  case Activation::gelu_tanh: {
    // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    Value x3 = ob.create<arith::MulFOp>(l, x, ob.create<arith::MulFOp>(l, x, x));
    Value inner = ob.create<arith::AddFOp>(
        l, x, ob.create<arith::MulFOp>(l, c(0.044715), x3));
    Value t = ob.create<math::TanhOp>(
        l, ob.create<arith::MulFOp>(l, c(std::sqrt(2.0 / M_PI)), inner));
    return ob.create<arith::MulFOp>(l, half(x), ob.create<arith::AddFOp>(l, c(1), t));
  }
  }
  return x;
}

/// A pointer argument of a kernel call: a buffer and an element offset
/// into it, or nothing (NULL).
struct KernelArg {
  Value buffer;
  int64_t elementOffset = 0;
  KernelArg() = default;
  KernelArg(Value buffer, int64_t offset = 0)
      : buffer(buffer), elementOffset(offset) {}
};

/// A tensor read in place from another's storage: element i lies at
/// base[offset + Σ i_d · strides[d]], base being a dense buffer.
struct StridedView {
  Value base;
  int64_t offset = 0;
  SmallVector<int64_t> shape, strides;
};

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// The strides of `view` read with `shape` instead, when no copy is needed:
/// each run of new dimensions must split or merge a run of old ones that is
/// contiguous within itself.
std::optional<SmallVector<int64_t>> reshapeStrides(const StridedView &view,
                                                   ArrayRef<int64_t> shape) {
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

class EntryLowering {
public:
  EntryLowering(func::FuncOp fn, WeightsLayout &weights, KernelTable &kernels,
                StateLayout &state, bool bf16)
      : fn(fn), ctx(fn.getContext()), b(ctx), weights(weights),
        kernels(kernels), state(state),
        linearDtype(bf16 ? TFM_DTYPE_BF16 : TFM_DTYPE_F32) {}

  LogicalResult run(DictionaryAttr &entryInfo);

private:
  // Buffers.
  Value view(Value base, int64_t byteOffset, Type tensorType);
  Value bufferOf(Value tensor);
  /// A dense row-major buffer of `tensor`, copying a strided view if needed
  /// (kernels other than BATCH_MATMUL read dense operands).
  Value denseOf(Value tensor);
  StridedView viewOf(Value tensor);
  Value materialize(const StridedView &view, Type elementType);
  Value destination(Value result);
  Value temporary(MemRefType type);
  Value reshape(Value buffer, MemRefType to);

  // Kernel calls.
  void callKernel(int32_t kind, ArrayRef<int64_t> params,
                  ArrayRef<double> fparams, ArrayRef<KernelArg> args,
                  ArrayRef<int64_t> strides = {}, int32_t dtype = TFM_DTYPE_F32);
  /// c = a · b on views [.., M, K], [.., K, N], [.., M, N] with at most two
  /// batch dimensions, through BATCH_MATMUL.
  void batchMatmul(const StridedView &a, const StridedView &bv,
                   const StridedView &c);

  // linalg.generic helpers.
  using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;
  void generic(ValueRange inputs, ArrayRef<AffineMap> inputMaps, Value output,
               AffineMap outputMap, ArrayRef<utils::IteratorType> iterators,
               BodyFn body);
  void elementwise(ValueRange inputs, Value output, BodyFn body);
  void fill(Value output, Attribute value);
  void copy(Value from, Value to);
  /// The window of `buffer` along `axis` that starts at `at` and has the
  /// shape of `part`.
  Value axisWindow(Value buffer, int64_t axis, int64_t at,
                   RankedTensorType part);
  /// Copies between two layouts of one f32 tensor with oneDNN's reorder
  /// (parallel and vectorized), else with a linalg copy.
  void copyView(const StridedView &from, const StridedView &to, Type elem);
  AffineMap broadcastMap(ArrayRef<int64_t> from, ArrayRef<int64_t> to);
  Value constantScalar(OpBuilder &ob, Location l, Type type, double value);

  // Op lowerings.
  LogicalResult lower(Operation *op);
  LogicalResult lowerBinary(Operation *op);
  LogicalResult lowerCast(CastOp op);
  LogicalResult lowerUnaryFloat(Operation *op);
  LogicalResult lowerLinear(Value input, Value weight, Value bias,
                            int64_t rowOffset, Activation act, Value result);
  LogicalResult lowerMatmul(MatmulOp op);
  LogicalResult lowerPackedQKV(QKVProjectionOp op);
  void genericMatmul(Value lhs, Value rhs, bool tl, bool tr, Value out);
  LogicalResult lowerSoftmax(Value x, Value maskBuf, MaskKind kind,
                             double scale, bool causal, Value out,
                             Operation *op);
  LogicalResult genericSoftmax(Value input, int64_t axis, Value out);
  LogicalResult lowerLayerNorm(Value input, Value residual, Value scale,
                               Value bias, int64_t axis, double epsilon,
                               Value result, Value sum, Operation *op);
  LogicalResult lowerReduce(ReduceOp op);
  LogicalResult lowerGatherLike(Value input, Value indices, int64_t axis,
                                Value result);
  LogicalResult lowerSlice(SliceOp op);
  LogicalResult lowerReshape(Value input, Value result, ReshapeOp r = {});
  LogicalResult lowerConcat(ConcatOp op);
  LogicalResult lowerSplit(SplitOp op);
  LogicalResult lowerPositionalEncoding(PositionalEncodingOp op);
  LogicalResult lowerAttention(AttentionOp op);
  LogicalResult lowerCrossEntropy(CrossEntropyOp op);

  // Training.
  LogicalResult lowerNextStep(NextStepOp op);
  LogicalResult lowerDropout(DropoutOp op);
  LogicalResult lowerCrossEntropyGrad(CrossEntropyGradOp op);
  LogicalResult lowerEmbeddingGrad(EmbeddingGradOp op);
  template <typename UpdateOp>
  LogicalResult lowerOptimizer(UpdateOp op);
  /// The step count as f64, and the learning rate at that step.
  std::pair<Value, Value> stepAndRate(Value step, LRSchedule schedule,
                                      double lr, int64_t dModel,
                                      int64_t warmup);

  func::FuncOp fn;
  MLIRContext *ctx;
  OpBuilder b;
  Location loc = UnknownLoc::get(ctx);
  WeightsLayout &weights;
  KernelTable &kernels;
  StateLayout &state;
  int32_t linearDtype;

  func::FuncOp entry;
  Value host, arena, weightsArg, stateArg, argsArray, errorCode;
  DenseMap<Value, Value> buffers;
  // Returned values that are written straight into an output buffer.
  DenseMap<Value, Value> outputOf;
  SmallVector<Value> temporaries;
  // Where each view lies: its base buffer (the arena or the weights) and a
  // byte offset. Pointers for kernel calls are taken from the base, because
  // the strided-metadata expansion folds the aligned pointer of a
  // memref.view to its source's and so would drop the offset.
  DenseMap<Value, std::pair<Value, int64_t>> placeOf;
  // Tensors the lowering keeps as views (CPUFolding.h), and their
  // materialized memrefs once a glue op asked for one.
  DenseMap<Value, StridedView> views;
  DenseMap<Value, Value> materialized;
  // Set when a kernel call could not be described (reported already).
  bool kernelCallFailed = false;
};

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

Value EntryLowering::view(Value base, int64_t byteOffset, Type tensorType) {
  Value shift = b.create<arith::ConstantIndexOp>(loc, byteOffset);
  Value v = b.create<memref::ViewOp>(loc, memrefOf(tensorType), base, shift,
                                     ValueRange{});
  placeOf[v] = {base, byteOffset};
  return v;
}

Value EntryLowering::bufferOf(Value tensor) {
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

Value EntryLowering::materialize(const StridedView &view, Type elem) {
  auto layout = StridedLayoutAttr::get(ctx, view.offset, view.strides);
  auto type = MemRefType::get(view.shape, elem, layout);
  return b.create<memref::ReinterpretCastOp>(loc, type, view.base, view.offset,
                                             view.shape, view.strides);
}

StridedView EntryLowering::viewOf(Value tensor) {
  if (auto v = views.find(tensor); v != views.end())
    return v->second;
  auto shape = cast<ShapedType>(tensor.getType()).getShape();
  return {bufferOf(tensor), 0, SmallVector<int64_t>(shape),
          rowMajorStrides(shape)};
}

Value EntryLowering::denseOf(Value tensor) {
  auto v = views.find(tensor);
  if (v == views.end())
    return bufferOf(tensor);
  const StridedView &view = v->second;
  if (view.offset == 0 && view.strides == rowMajorStrides(view.shape))
    return view.base.getType() == memrefOf(tensor.getType())
               ? view.base
               : reshape(view.base, memrefOf(tensor.getType()));
  Value dense = temporary(memrefOf(tensor.getType()));
  copy(bufferOf(tensor), dense);
  return dense;
}

Value EntryLowering::temporary(MemRefType type) {
  Value t = b.create<memref::AllocOp>(loc, type, b.getI64IntegerAttr(kBufferAlignment));
  temporaries.push_back(t);
  return t;
}

/// Where the op that defines `result` writes it: the caller's output buffer
/// for a returned value, else its planned place in the arena.
Value EntryLowering::destination(Value result) {
  Value buf;
  if (auto it = outputOf.find(result); it != outputOf.end()) {
    buf = it->second;
  } else {
    int64_t offset = -1;
    Operation *def = result.getDefiningOp();
    if (auto offsets = def->getAttrOfType<DenseI64ArrayAttr>("tfm.arena_offsets"))
      offset = offsets[cast<OpResult>(result).getResultNumber()];
    buf = offset >= 0 ? view(arena, offset, result.getType())
                      : temporary(memrefOf(result.getType()));
  }
  buffers[result] = buf;
  return buf;
}

/// A contiguous buffer read with another static shape; no data moves.
Value EntryLowering::reshape(Value buffer, MemRefType to) {
  if (auto it = placeOf.find(buffer); it != placeOf.end()) {
    auto [base, offset] = it->second;
    Value shift = b.create<arith::ConstantIndexOp>(loc, offset);
    Value v = b.create<memref::ViewOp>(loc, to, base, shift, ValueRange{});
    placeOf[v] = {base, offset};
    return v;
  }
  SmallVector<int64_t> strides(to.getRank(), 1);
  for (int64_t i = to.getRank() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * to.getDimSize(i + 1);
  return b.create<memref::ReinterpretCastOp>(loc, to, buffer, 0,
                                             to.getShape(), strides);
}

//===----------------------------------------------------------------------===//
// Kernel calls
//===----------------------------------------------------------------------===//

void EntryLowering::callKernel(int32_t kind, ArrayRef<int64_t> params,
                               ArrayRef<double> fparams,
                               ArrayRef<KernelArg> args,
                               ArrayRef<int64_t> strides, int32_t dtype) {
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  int32_t index = kernels.add(ctx, kind, params, fparams, strides, dtype);
  if (index < 0 || args.size() > TFM_KERNEL_MAX_ARGS) {
    // Checked in every build: a descriptor cut to fit would run the kernel
    // on the wrong sizes.
    emitError(loc) << "internal error: kernel kind " << kind << " with "
                   << params.size() << " params, " << fparams.size()
                   << " fparams, " << strides.size() << " strides and "
                   << args.size() << " arguments does not fit tfm/abi.h ("
                   << TFM_KERNEL_MAX_PARAMS << ", " << TFM_KERNEL_MAX_FPARAMS
                   << ", " << TFM_KERNEL_MAX_STRIDES << ", "
                   << TFM_KERNEL_MAX_ARGS << ")";
    kernelCallFailed = true;
    return;
  }
  for (auto [i, arg] : llvm::enumerate(args)) {
    Value ptr;
    if (!arg.buffer) {
      ptr = b.create<LLVM::ZeroOp>(loc, ptrTy);
    } else {
      auto type = cast<MemRefType>(arg.buffer.getType());
      int64_t bytes = arg.elementOffset * (type.getElementTypeBitWidth() / 8);
      assert(type.getLayout().isIdentity() && "kernels take dense buffers");
      Value from = arg.buffer;
      if (auto it = placeOf.find(from); it != placeOf.end()) {
        from = it->second.first;
        bytes += it->second.second;
      }
      Value base = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, from);
      if (bytes)
        base = b.create<arith::AddIOp>(
            loc, base, b.create<arith::ConstantIndexOp>(loc, bytes));
      Value asInt =
          b.create<arith::IndexCastOp>(loc, b.getI64Type(), base);
      ptr = b.create<LLVM::IntToPtrOp>(loc, ptrTy, asInt);
    }
    Value slot = b.create<LLVM::GEPOp>(loc, ptrTy, ptrTy, argsArray,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
    b.create<LLVM::StoreOp>(loc, ptr, slot);
  }
  Value idx = b.create<arith::ConstantIntOp>(loc, index, 32);
  auto call = b.create<LLVM::CallOp>(
      loc, TypeRange{b.getI32Type()}, FlatSymbolRefAttr::get(ctx, kRunKernel),
      ValueRange{host, idx, argsArray});
  errorCode = b.create<arith::OrIOp>(loc, errorCode, call.getResult());
}

//===----------------------------------------------------------------------===//
// linalg helpers
//===----------------------------------------------------------------------===//

void EntryLowering::generic(ValueRange inputs, ArrayRef<AffineMap> inputMaps,
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

/// The map that reads a buffer of shape `from` at the numpy-broadcast
/// position of an index into shape `to`.
AffineMap EntryLowering::broadcastMap(ArrayRef<int64_t> from,
                                      ArrayRef<int64_t> to) {
  SmallVector<AffineExpr> exprs;
  int64_t lead = to.size() - from.size();
  for (auto [i, d] : llvm::enumerate(from))
    exprs.push_back(d == 1 && to[lead + i] != 1
                        ? getAffineConstantExpr(0, ctx)
                        : getAffineDimExpr(lead + i, ctx));
  return AffineMap::get(to.size(), 0, exprs, ctx);
}

void EntryLowering::elementwise(ValueRange inputs, Value output, BodyFn body) {
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

Value EntryLowering::constantScalar(OpBuilder &ob, Location l, Type type,
                                    double value) {
  if (auto ft = dyn_cast<FloatType>(type))
    return ob.create<arith::ConstantOp>(l, ob.getFloatAttr(ft, value));
  return ob.create<arith::ConstantOp>(
      l, ob.getIntegerAttr(type, static_cast<int64_t>(value)));
}

void EntryLowering::fill(Value output, Attribute value) {
  auto shape = cast<MemRefType>(output.getType()).getShape();
  SmallVector<utils::IteratorType> its(shape.size(),
                                       utils::IteratorType::parallel);
  generic({}, {}, output, AffineMap::getMultiDimIdentityMap(shape.size(), ctx),
          its, [&](OpBuilder &ob, Location l, ValueRange) -> Value {
            return ob.create<arith::ConstantOp>(l, cast<TypedAttr>(value));
          });
}

void EntryLowering::copyView(const StridedView &from, const StridedView &to,
                             Type elem) {
  if (elem.isF32() && from.shape.size() <= TFM_REORDER_MAX_RANK &&
      product(from.shape) > 0) {
    SmallVector<int64_t> params{static_cast<int64_t>(from.shape.size())};
    llvm::append_range(params, from.shape);
    SmallVector<int64_t> strides(from.strides);
    strides.resize(TFM_REORDER_MAX_RANK, 0);
    llvm::append_range(strides, to.strides);
    callKernel(TFM_KERNEL_REORDER, params, {},
               {KernelArg(from.base, from.offset), KernelArg(to.base, to.offset)},
               strides);
    return;
  }
  copy(materialize(from, elem), materialize(to, elem));
}

void EntryLowering::copy(Value from, Value to) {
  elementwise({from}, to,
              [](OpBuilder &, Location, ValueRange a) { return a[0]; });
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

/// `x pred y` for one element pair of a compare's operands.
static Value compareValues(OpBuilder &ob, Location l, CompareOp c, Value x,
                           Value y) {
  Type elem = x.getType();
  if (isa<FloatType>(elem)) {
    arith::CmpFPredicate p = arith::CmpFPredicate::OEQ;
    switch (c.getPredicate()) {
    case ComparePredicate::eq: p = arith::CmpFPredicate::OEQ; break;
    case ComparePredicate::ne: p = arith::CmpFPredicate::UNE; break;
    case ComparePredicate::lt: p = arith::CmpFPredicate::OLT; break;
    case ComparePredicate::le: p = arith::CmpFPredicate::OLE; break;
    case ComparePredicate::gt: p = arith::CmpFPredicate::OGT; break;
    case ComparePredicate::ge: p = arith::CmpFPredicate::OGE; break;
    }
    return ob.create<arith::CmpFOp>(l, p, x, y);
  }
  // i1 compares as unsigned, the way the interpreter reads booleans as 0
  // and 1.
  bool u = elem.isInteger(1);
  arith::CmpIPredicate p = arith::CmpIPredicate::eq;
  switch (c.getPredicate()) {
  case ComparePredicate::eq: p = arith::CmpIPredicate::eq; break;
  case ComparePredicate::ne: p = arith::CmpIPredicate::ne; break;
  case ComparePredicate::lt: p = u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt; break;
  case ComparePredicate::le: p = u ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle; break;
  case ComparePredicate::gt: p = u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt; break;
  case ComparePredicate::ge: p = u ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge; break;
  }
  return ob.create<arith::CmpIOp>(l, p, x, y);
}

LogicalResult EntryLowering::lowerBinary(Operation *op) {
  Type elem = cast<ShapedType>(op->getOperand(0).getType()).getElementType();
  bool isFloat = isa<FloatType>(elem);
  Value lhs = bufferOf(op->getOperand(0)), rhs = bufferOf(op->getOperand(1));
  Value out = destination(op->getResult(0));
  if (isa<PowOp>(op)) {
    // Operands may differ in type (ONNX Pow); compute in f64 like the
    // reference, then convert to the result type.
    Type outElem =
        cast<ShapedType>(op->getResult(0).getType()).getElementType();
    elementwise({lhs, rhs}, out,
                [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                  Type f64 = ob.getF64Type();
                  auto widen = [&](Value v) -> Value {
                    Type t = v.getType();
                    if (t.isF64())
                      return v;
                    if (isa<FloatType>(t))
                      return ob.create<arith::ExtFOp>(l, f64, v);
                    return ob.create<arith::SIToFPOp>(l, f64, v);
                  };
                  Value p = ob.create<math::PowFOp>(l, widen(a[0]), widen(a[1]));
                  if (outElem.isF64())
                    return p;
                  if (isa<FloatType>(outElem))
                    return ob.create<arith::TruncFOp>(l, outElem, p);
                  return ob.create<arith::FPToSIOp>(l, outElem, p);
                });
    return success();
  }
  elementwise({lhs, rhs}, out,
              [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                Value x = a[0], y = a[1];
                return TypeSwitch<Operation *, Value>(op)
                    .Case([&](AddOp) -> Value {
                      return isFloat ? ob.create<arith::AddFOp>(l, x, y)
                                     : ob.create<arith::AddIOp>(l, x, y).getResult();
                    })
                    .Case([&](SubOp) -> Value {
                      return isFloat ? ob.create<arith::SubFOp>(l, x, y)
                                     : ob.create<arith::SubIOp>(l, x, y).getResult();
                    })
                    .Case([&](MulOp) -> Value {
                      return isFloat ? ob.create<arith::MulFOp>(l, x, y)
                                     : ob.create<arith::MulIOp>(l, x, y).getResult();
                    })
                    .Case([&](DivOp) -> Value {
                      return isFloat ? ob.create<arith::DivFOp>(l, x, y)
                                     : ob.create<arith::DivSIOp>(l, x, y).getResult();
                    })
                    .Case([&](PowOp) -> Value {
                      return ob.create<math::PowFOp>(l, x, y);
                    })
                    .Case([&](MaxOp) -> Value {
                      return isFloat ? ob.create<arith::MaximumFOp>(l, x, y)
                                     : ob.create<arith::MaxSIOp>(l, x, y).getResult();
                    })
                    .Case([&](MinOp) -> Value {
                      return isFloat ? ob.create<arith::MinimumFOp>(l, x, y)
                                     : ob.create<arith::MinSIOp>(l, x, y).getResult();
                    })
                    .Case([&](CompareOp c) -> Value {
                      return compareValues(ob, l, c, x, y);
                    });
              });
  return success();
}

LogicalResult EntryLowering::lowerCast(CastOp op) {
  Type from = op.getInput().getType().getElementType();
  Type to = op.getType().getElementType();
  Value in = bufferOf(op.getInput());
  Value out = destination(op.getResult());
  elementwise({in}, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value x = a[0];
    if (from == to)
      return x;
    auto fromF = dyn_cast<FloatType>(from), toF = dyn_cast<FloatType>(to);
    if (fromF && toF)
      return fromF.getWidth() < toF.getWidth()
                 ? ob.create<arith::ExtFOp>(l, to, x).getResult()
                 : ob.create<arith::TruncFOp>(l, to, x).getResult();
    if (fromF) {
      if (to.isInteger(1))
        return ob.create<arith::CmpFOp>(l, arith::CmpFPredicate::UNE, x,
                                        constantScalar(ob, l, from, 0));
      return ob.create<arith::FPToSIOp>(l, to, x);
    }
    // From an integer or a boolean.
    if (toF)
      return from.isInteger(1) ? ob.create<arith::UIToFPOp>(l, to, x).getResult()
                               : ob.create<arith::SIToFPOp>(l, to, x).getResult();
    if (to.isInteger(1))
      return ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, x,
                                      constantScalar(ob, l, from, 0));
    unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
    if (fw < tw)
      return from.isInteger(1) ? ob.create<arith::ExtUIOp>(l, to, x).getResult()
                               : ob.create<arith::ExtSIOp>(l, to, x).getResult();
    return ob.create<arith::TruncIOp>(l, to, x);
  });
  return success();
}

/// relu, gelu, dropout outside training, and the math dialect on tensors.
LogicalResult EntryLowering::lowerUnaryFloat(Operation *op) {
  Value in = bufferOf(op->getOperand(0));
  Value out = destination(op->getResult(0));
  elementwise({in}, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value x = a[0];
    return TypeSwitch<Operation *, Value>(op)
        .Case([&](ReluOp) { return applyActivation(ob, l, Activation::relu, x); })
        .Case([&](GeluOp g) {
          return applyActivation(ob, l,
                                 g.getApproximate() == GeluApproximation::tanh
                                     ? Activation::gelu_tanh
                                     : Activation::gelu,
                                 x);
        })
        .Case([&](DropoutOp) { return x; })
        .Case([&](math::SqrtOp) -> Value { return ob.create<math::SqrtOp>(l, x); })
        .Case([&](math::ErfOp) -> Value { return ob.create<math::ErfOp>(l, x); })
        .Case([&](math::TanhOp) -> Value { return ob.create<math::TanhOp>(l, x); })
        .Case([&](math::ExpOp) -> Value { return ob.create<math::ExpOp>(l, x); })
        .Case([&](math::LogOp) -> Value { return ob.create<math::LogOp>(l, x); })
        .Case([&](math::AbsFOp) -> Value { return ob.create<math::AbsFOp>(l, x); })
        .Case([&](arith::NegFOp) -> Value { return ob.create<arith::NegFOp>(l, x); });
  });
  return success();
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

/// out[..., m, n] = Σ_k lhs[..., m, k] · rhs[..., k, n], with transposes and
/// broadcast batch dimensions: the portable path for what the kernels do
/// not take (other element types, broadcast batches, empty shapes).
void EntryLowering::genericMatmul(Value lhs, Value rhs, bool tl, bool tr,
                                  Value out) {
  auto outShape = cast<MemRefType>(out.getType()).getShape();
  auto lShape = cast<MemRefType>(lhs.getType()).getShape();
  auto rShape = cast<MemRefType>(rhs.getType()).getShape();
  int64_t rank = outShape.size(); // loops: batch..., m, n, k
  auto dim = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  auto operandMap = [&](ArrayRef<int64_t> shape, bool isLhs, bool transposed) {
    SmallVector<AffineExpr> exprs;
    int64_t batch = shape.size() - 2, lead = (rank - 2) - batch;
    for (int64_t i = 0; i < batch; ++i)
      exprs.push_back(shape[i] == 1 && outShape[lead + i] != 1
                          ? getAffineConstantExpr(0, ctx)
                          : dim(lead + i));
    AffineExpr row = isLhs ? dim(rank - 2) : dim(rank);
    AffineExpr col = isLhs ? dim(rank) : dim(rank - 1);
    if (transposed)
      std::swap(row, col);
    exprs.push_back(row);
    exprs.push_back(col);
    return AffineMap::get(rank + 1, 0, exprs, ctx);
  };
  SmallVector<AffineExpr> outExprs;
  for (int64_t i = 0; i < rank; ++i)
    outExprs.push_back(dim(i));
  Type elem = cast<MemRefType>(out.getType()).getElementType();
  fill(out, b.getFloatAttr(elem, 0.0));
  SmallVector<utils::IteratorType> its(rank, utils::IteratorType::parallel);
  its.push_back(utils::IteratorType::reduction);
  generic({lhs, rhs},
          {operandMap(lShape, true, tl), operandMap(rShape, false, tr)}, out,
          AffineMap::get(rank + 1, 0, outExprs, ctx), its,
          [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return ob.create<arith::AddFOp>(
                l, a[2], ob.create<arith::MulFOp>(l, a[0], a[1]));
          });
}

/// result = act(input · weight[rows]ᵀ + bias[rows]), where `rows` are the
/// result's columns starting at `rowOffset` of weight (a part of a packed
/// projection).
LogicalResult EntryLowering::lowerLinear(Value input, Value weight, Value bias,
                                         int64_t rowOffset, Activation act,
                                         Value result) {
  auto inType = cast<RankedTensorType>(input.getType());
  auto outType = cast<RankedTensorType>(result.getType());
  int64_t k = inType.getShape().back(), n = outType.getShape().back();
  int64_t m = product(inType.getShape().drop_back());
  Value out = destination(result);
  Value x = denseOf(input), w = denseOf(weight);
  Value bb = bias ? denseOf(bias) : Value();
  if (isF32(inType) && m > 0 && k > 0 && n > 0) {
    bool constant = weight.getDefiningOp<arith::ConstantOp>() != nullptr;
    callKernel(TFM_KERNEL_LINEAR,
               {m, k, n, bias ? 1 : 0, abiActivation(act), 0, constant ? 1 : 0}, {},
               {KernelArg(x), KernelArg(w, rowOffset * k),
                bias ? KernelArg(bb, rowOffset) : KernelArg(), KernelArg(),
                KernelArg(out)},
               {}, linearDtype);
    return success();
  }
  // Portable path: the rows of this part, a matmul, then bias and act.
  Type elem = inType.getElementType();
  auto wType = cast<MemRefType>(w.getType());
  if (rowOffset != 0 || wType.getDimSize(0) != n) {
    Value part = temporary(MemRefType::get({n, k}, elem));
    copy(axisWindow(w, 0, rowOffset, RankedTensorType::get({n, k}, elem)), part);
    w = part;
    if (bias) {
      Value bpart = temporary(MemRefType::get({n}, elem));
      copy(axisWindow(bb, 0, rowOffset, RankedTensorType::get({n}, elem)), bpart);
      bb = bpart;
    }
  }
  Value x2 = reshape(x, MemRefType::get({m, k}, elem));
  Value out2 = reshape(out, MemRefType::get({m, n}, elem));
  genericMatmul(x2, w, false, true, out2);
  SmallVector<Value> ins{out2};
  if (bias)
    ins.push_back(bb);
  elementwise(ins, out2, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value y = bias ? ob.create<arith::AddFOp>(l, a[0], a[1]).getResult() : a[0];
    return applyActivation(ob, l, act, y);
  });
  return success();
}

void EntryLowering::batchMatmul(const StridedView &a, const StridedView &bv,
                                const StridedView &c) {
  // Pad the batch to two dimensions. A padded dimension has size 1, so its
  // stride never moves a pointer; it is the dense one, so that the runtime
  // sees a batch-dense operand (a transposed one included) and uses it in
  // place instead of packing it.
  auto batch2 = [](const StridedView &v) {
    SmallVector<int64_t> dims(v.shape.begin(), v.shape.end() - 2);
    SmallVector<int64_t> st(v.strides.begin(), v.strides.end() - 2);
    int64_t matrix = v.shape[v.shape.size() - 2] * v.shape.back();
    while (dims.size() < 2) {
      dims.insert(dims.begin(), 1);
      st.insert(st.begin(), st.empty() ? matrix : st.front() * dims[1]);
    }
    SmallVector<int64_t> all(st);
    all.push_back(v.strides[v.strides.size() - 2]);
    all.push_back(v.strides.back());
    return std::make_pair(dims, all);
  };
  auto [dims, sa] = batch2(a);
  auto sb = batch2(bv).second, sc = batch2(c).second;
  int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(),
          n = bv.shape.back();
  SmallVector<int64_t> strides(sa);
  llvm::append_range(strides, sb);
  llvm::append_range(strides, sc);
  callKernel(TFM_KERNEL_BATCH_MATMUL, {dims[0], dims[1], m, k, n}, {},
             {KernelArg(a.base, a.offset), KernelArg(bv.base, bv.offset),
              KernelArg(c.base, c.offset)},
             strides);
}

LogicalResult EntryLowering::lowerMatmul(MatmulOp op) {
  auto lt = op.getLhs().getType(), rt = op.getRhs().getType();
  auto ot = op.getType();
  auto ls = lt.getShape(), os = ot.getShape();
  int64_t m = os[os.size() - 2], n = os.back();
  int64_t k = op.getTransposeLhs() ? ls[ls.size() - 2] : ls.back();
  if (isStridedMatmul(op)) {
    StridedView a = viewOf(op.getLhs()), bv = viewOf(op.getRhs());
    auto swapLast = [](StridedView &v) {
      size_t r = v.shape.size();
      std::swap(v.shape[r - 1], v.shape[r - 2]);
      std::swap(v.strides[r - 1], v.strides[r - 2]);
    };
    if (op.getTransposeLhs())
      swapLast(a);
    if (op.getTransposeRhs())
      swapLast(bv);
    StridedView c;
    Value result = op.getResult();
    auto t = result.hasOneUse() ? dyn_cast<TransposeOp>(*result.user_begin())
                                : TransposeOp();
    if (t && foldsIntoMatmulResult(t)) {
      // Write the transposed layout: matmul dimension d is the transpose's
      // dimension k with permutation[k] = d.
      Value dst = destination(t.getResult());
      SmallVector<int64_t> dstStrides = rowMajorStrides(t.getType().getShape());
      c = {dst, 0, SmallVector<int64_t>(os), SmallVector<int64_t>(os.size())};
      for (auto [kk, d] : llvm::enumerate(t.getPermutation()))
        c.strides[d] = dstStrides[kk];
    } else {
      Value dst = destination(result);
      c = {dst, 0, SmallVector<int64_t>(os), rowMajorStrides(os)};
    }
    batchMatmul(a, bv, c);
    return success();
  }
  Value out = destination(op.getResult());
  if (isF32(lt) && !op.getTransposeLhs() && m > 0 && n > 0 && k > 0 &&
      rt.getRank() == 2) {
    // A shared right operand: fold the batch into the rows.
    int64_t rows = product(ls.drop_back());
    StridedView a{denseOf(op.getLhs()), 0, {rows, k}, {k, 1}};
    StridedView bv{denseOf(op.getRhs()), 0, {k, n}, {n, 1}};
    if (op.getTransposeRhs())
      bv.strides = {1, k};
    StridedView c{out, 0, {rows, n}, {n, 1}};
    batchMatmul(a, bv, c);
    return success();
  }
  genericMatmul(bufferOf(op.getLhs()), bufferOf(op.getRhs()),
                op.getTransposeLhs(), op.getTransposeRhs(), out);
  return success();
}

/// One GEMM into a packed [rows, Σsizes] buffer (the plan gave the first
/// result room for all parts); each part is a column window of it.
LogicalResult EntryLowering::lowerPackedQKV(QKVProjectionOp op) {
  auto inType = op.getInput().getType();
  int64_t k = inType.getShape().back(), rows = product(inType.getShape().drop_back());
  int64_t total = 0;
  for (int64_t size : op.getSizes())
    total += size;
  auto packedType = RankedTensorType::get({rows, total}, b.getF32Type());
  int64_t offset = -1;
  if (auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("tfm.arena_offsets"))
    offset = offsets[0];
  Value packed = offset >= 0 ? view(arena, offset, packedType)
                             : temporary(memrefOf(packedType));
  Value bias = op.getBias() ? denseOf(op.getBias()) : Value();
  bool constant = op.getWeight().getDefiningOp<arith::ConstantOp>() != nullptr;
  callKernel(TFM_KERNEL_LINEAR, {rows, k, total, bias ? 1 : 0, 0, 0, constant ? 1 : 0},
             {},
             {KernelArg(denseOf(op.getInput())),
              KernelArg(denseOf(op.getWeight())),
              bias ? KernelArg(bias) : KernelArg(), KernelArg(),
              KernelArg(packed)},
             {}, linearDtype);
  int64_t column = 0;
  for (auto [r, size] : llvm::zip(op.getResults(), op.getSizes())) {
    auto shape = cast<RankedTensorType>(r.getType()).getShape();
    SmallVector<int64_t> strides = rowMajorStrides(shape);
    // Rows are `total` apart; the leading dimensions multiply rows.
    if (shape.size() >= 2) {
      strides[shape.size() - 2] = total;
      for (int64_t d = static_cast<int64_t>(shape.size()) - 3; d >= 0; --d)
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    views[r] = {packed, column, SmallVector<int64_t>(shape), strides};
    column += size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax and layer norm
//===----------------------------------------------------------------------===//

LogicalResult EntryLowering::genericSoftmax(Value input, int64_t axis,
                                            Value out) {
  auto type = cast<MemRefType>(input.getType());
  Type elem = type.getElementType();
  int64_t rank = type.getRank();
  SmallVector<int64_t> reducedShape(type.getShape());
  reducedShape[axis] = 1;
  Value red = temporary(MemRefType::get(reducedShape, elem));
  SmallVector<AffineExpr> redExprs;
  for (int64_t i = 0; i < rank; ++i)
    redExprs.push_back(i == axis ? getAffineConstantExpr(0, ctx)
                                 : getAffineDimExpr(i, ctx));
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap redMap = AffineMap::get(rank, 0, redExprs, ctx);
  SmallVector<utils::IteratorType> its(rank, utils::IteratorType::parallel);
  its[axis] = utils::IteratorType::reduction;
  SmallVector<utils::IteratorType> par(rank, utils::IteratorType::parallel);
  fill(red, b.getFloatAttr(elem, -INFINITY));
  generic({input}, {id}, red, redMap, its,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return ob.create<arith::MaximumFOp>(l, a[0], a[1]);
          });
  generic({input, red}, {id, redMap}, out, id, par,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return ob.create<math::ExpOp>(
                l, ob.create<arith::SubFOp>(l, a[0], a[1]));
          });
  fill(red, b.getFloatAttr(elem, 0.0));
  generic({out}, {id}, red, redMap, its,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return ob.create<arith::AddFOp>(l, a[0], a[1]);
          });
  generic({out, red}, {id, redMap}, out, id, par,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return ob.create<arith::DivFOp>(l, a[0], a[1]);
          });
  return success();
}

LogicalResult EntryLowering::lowerSoftmax(Value x, Value mask,
                                          MaskKind kind, double scale,
                                          bool causal, Value out,
                                          Operation *op) {
  auto type = cast<MemRefType>(x.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rank = shape.size();
  int64_t c = shape.back(), q = rank >= 2 ? shape[rank - 2] : 1;
  int64_t g = product(shape.drop_back(rank >= 2 ? 2 : 1));
  if (type.getElementType().isF32() && product(shape) > 0) {
    int64_t div = 1, gstride = 0, qstride = 0;
    Value maskBuf;
    if (mask) {
      auto mt = cast<MemRefType>(mask.getType());
      maskBuf = mask;
      if (kind == MaskKind::boolean || !mt.getElementType().isF32()) {
        // The kernel adds a float mask: 0 where kept, -inf where dropped.
        Value additive = temporary(MemRefType::get(mt.getShape(), b.getF32Type()));
        bool boolean = kind == MaskKind::boolean;
        elementwise({maskBuf}, additive,
                    [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                      if (!boolean)
                        return a[0].getType().getIntOrFloatBitWidth() > 32
                                   ? ob.create<arith::TruncFOp>(l, ob.getF32Type(), a[0]).getResult()
                                   : ob.create<arith::ExtFOp>(l, ob.getF32Type(), a[0]).getResult();
                      return ob.create<arith::SelectOp>(
                          l, a[0], constantScalar(ob, l, ob.getF32Type(), 0),
                          constantScalar(ob, l, ob.getF32Type(), -INFINITY));
                    });
        maskBuf = additive;
      }
      // The kernel reads row q of group g at (g / div)·gstride + q·qstride.
      SmallVector<int64_t> ms(rank - mt.getRank(), 1);
      llvm::append_range(ms, mt.getShape());
      bool fits = ms.back() == c;
      if (rank >= 2)
        qstride = ms[rank - 2] == 1 ? 0 : c;
      int64_t rowBlock = (rank >= 2 ? ms[rank - 2] : 1) * c;
      // Leading mask dims: a prefix equal to the input's, then ones.
      int64_t lead = rank >= 2 ? rank - 2 : 0, j = 0;
      while (j < lead && ms[j] == shape[j] && ms[j] != 1)
        ++j;
      for (int64_t i = j; i < lead; ++i)
        fits &= ms[i] == 1;
      if (j == 0) {
        gstride = 0;
      } else {
        gstride = rowBlock;
        div = product(shape.slice(j, lead - j));
      }
      if (!fits) {
        // An unusual broadcast: materialize the full mask.
        Value full = temporary(MemRefType::get(shape, b.getF32Type()));
        copy(maskBuf, full);
        maskBuf = full;
        div = 1;
        gstride = q * c;
        qstride = c;
      }
    }
    callKernel(TFM_KERNEL_MASKED_SOFTMAX,
               {g, q, c, causal ? 1 : 0, mask ? 1 : 0, div, gstride, qstride},
               {scale}, {KernelArg(x), KernelArg(maskBuf), KernelArg(out)});
    return success();
  }
  if (mask || causal || scale != 1.0)
    return op->emitError("the CPU backend computes masked softmax in f32 "
                         "only; this one is ")
           << type.getElementType();
  return genericSoftmax(x, rank - 1, out);
}

LogicalResult EntryLowering::lowerLayerNorm(Value input, Value residual,
                                            Value scale, Value bias,
                                            int64_t axis, double epsilon,
                                            Value result, Value sum,
                                            Operation *op) {
  auto type = cast<RankedTensorType>(result.getType());
  ArrayRef<int64_t> shape = type.getShape();
  if (axis < 0)
    axis += shape.size();
  int64_t m = product(shape.take_front(axis)), n = product(shape.drop_front(axis));
  if (!isF32(type) || m == 0 || n == 0)
    return op->emitError("the CPU backend computes layer norm on non-empty "
                         "f32 tensors only; this one is ")
           << type;
  Value x = denseOf(input);
  Value r = residual ? denseOf(residual) : Value();
  // The kernel adds same-shaped operands; broadcast the others first.
  auto full = [&](Value v, Value buf) {
    if (cast<RankedTensorType>(v.getType()).getShape() == shape)
      return buf;
    Value t = temporary(MemRefType::get(shape, type.getElementType()));
    copy(buf, t);
    return t;
  };
  if (residual) {
    x = full(input, x);
    r = full(residual, r);
  }
  Value out = destination(result);
  Value s = sum ? destination(sum) : Value();
  callKernel(TFM_KERNEL_LAYER_NORM,
             {m, n, residual ? 1 : 0, bias ? 1 : 0, sum ? 1 : 0}, {epsilon},
             {KernelArg(x), KernelArg(r), KernelArg(denseOf(scale)),
              bias ? KernelArg(denseOf(bias)) : KernelArg(), KernelArg(out),
              KernelArg(s)});
  return success();
}

/// Unfused attention: scores, masked softmax and the weighted sum, through
/// the same kernels as the fused graph, with the scores in a temporary.
LogicalResult EntryLowering::lowerAttention(AttentionOp op) {
  auto qt = op.getQuery().getType();
  auto vt = op.getValue().getType();
  if (!isF32(qt))
    return op.emitError("the CPU backend computes attention in f32 only");
  ArrayRef<int64_t> qs = qt.getShape();
  int64_t sq = qs[qs.size() - 2], d = qs.back();
  int64_t sk = op.getKey().getType().getShape()[qs.size() - 2];
  int64_t dv = vt.getShape().back(), batch = product(qs.drop_back(2));
  SmallVector<int64_t> scoreShape(qs.drop_back(2));
  scoreShape.push_back(sq);
  scoreShape.push_back(sk);
  if (product(scoreShape) == 0 || d == 0 || dv == 0)
    return op.emitError("the CPU backend needs non-empty attention operands");
  Value scores = temporary(MemRefType::get(scoreShape, b.getF32Type()));
  batchMatmul({denseOf(op.getQuery()), 0, {batch, sq, d}, {sq * d, d, 1}},
              {denseOf(op.getKey()), 0, {batch, d, sk}, {sk * d, 1, d}},
              {scores, 0, {batch, sq, sk}, {sq * sk, sk, 1}});
  double scale = op.getScale() ? op.getScale()->convertToDouble()
                               : 1.0 / std::sqrt(static_cast<double>(d));
  MaskKind kind = MaskKind::none;
  if (Value m = op.getMask())
    kind = cast<ShapedType>(m.getType()).getElementType().isInteger(1) ? MaskKind::boolean
                                                     : MaskKind::additive;
  // The softmax works in place over the scores.
  if (failed(lowerSoftmax(scores, op.getMask() ? denseOf(op.getMask()) : Value(),
                          kind, scale, op.getCausal(), scores, op)))
    return failure();
  Value out = destination(op.getResult());
  batchMatmul({scores, 0, {batch, sq, sk}, {sq * sk, sk, 1}},
              {denseOf(op.getValue()), 0, {batch, sk, dv}, {sk * dv, dv, 1}},
              {out, 0, {batch, sq, dv}, {sq * dv, dv, 1}});
  return success();
}

/// Mean cross-entropy over the last axis: per row the log-sum-exp, the sum
/// of the logits and the label's logit give the smoothed loss; the loss of
/// the rows whose label is not ignored is summed and counted in f64. A label
/// outside [0, K) reads a clamped column (the reference interpreter reports
/// it; compiled code cannot stop).
LogicalResult EntryLowering::lowerCrossEntropy(CrossEntropyOp op) {
  auto lt = op.getLogits().getType();
  Type elem = lt.getElementType();
  int64_t k = lt.getShape().back(), rows = product(lt.getShape().drop_back());
  if (k == 0)
    return op.emitError("the CPU backend needs at least one class");
  Value x = reshape(denseOf(op.getLogits()), MemRefType::get({rows, k}, elem));
  Type labelType = op.getLabels().getType().getElementType();
  Value labels = reshape(denseOf(op.getLabels()), MemRefType::get({rows}, labelType));
  Value out = destination(op.getResult());
  auto rowType = MemRefType::get({rows}, elem);
  Value mx = temporary(rowType), se = temporary(rowType), sx = temporary(rowType);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  AffineMap rk = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap r = AffineMap::get(2, 0, {d(0)}, ctx);
  SmallVector<utils::IteratorType> red = {utils::IteratorType::parallel,
                                          utils::IteratorType::reduction};
  fill(mx, b.getFloatAttr(elem, -INFINITY));
  generic({x}, {rk}, mx, r, red,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return ob.create<arith::MaximumFOp>(l, a[0], a[1]);
          });
  fill(se, b.getFloatAttr(elem, 0.0));
  generic({x, mx}, {rk, r}, se, r, red,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            Value e = ob.create<math::ExpOp>(
                l, ob.create<arith::SubFOp>(l, a[0], a[1]));
            return ob.create<arith::AddFOp>(l, a[2], e);
          });
  fill(sx, b.getFloatAttr(elem, 0.0));
  generic({x}, {rk}, sx, r, red,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return ob.create<arith::AddFOp>(l, a[0], a[1]);
          });
  // Sum and count over the rows, in f64.
  Type f64 = b.getF64Type();
  Value total = temporary(MemRefType::get({}, f64));
  Value count = temporary(MemRefType::get({}, f64));
  fill(total, b.getF64FloatAttr(0));
  fill(count, b.getF64FloatAttr(0));
  double eps = op.getLabelSmoothing().convertToDouble();
  auto ignore = static_cast<int64_t>(op.getIgnoreIndex());
  AffineMap id1 = AffineMap::getMultiDimIdentityMap(1, ctx);
  AffineMap scalar = AffineMap::get(1, 0, {}, ctx);
  b.create<linalg::GenericOp>(
      loc, TypeRange{}, ValueRange{mx, se, sx, labels},
      ValueRange{total, count},
      ArrayRef<AffineMap>{id1, id1, id1, id1, scalar, scalar},
      ArrayRef<utils::IteratorType>{utils::IteratorType::reduction},
      [&](OpBuilder &ob, Location l, ValueRange a) {
        auto c = [&](double v) { return constantScalar(ob, l, f64, v); };
        auto wide = [&](Value v) -> Value {
          return v.getType().isF64() ? v : ob.create<arith::ExtFOp>(l, f64, v);
        };
        Value lse = ob.create<arith::AddFOp>(l, wide(a[0]),
                                             ob.create<math::LogOp>(l, wide(a[1])));
        Value label = a[3];
        Value valid = ob.create<arith::CmpIOp>(
            l, arith::CmpIPredicate::ne, label,
            ob.create<arith::ConstantOp>(l, ob.getIntegerAttr(labelType, ignore)));
        Value idx = ob.create<arith::IndexCastOp>(l, ob.getIndexType(), label);
        idx = ob.create<arith::MaxSIOp>(l, idx, ob.create<arith::ConstantIndexOp>(l, 0));
        idx = ob.create<arith::MinSIOp>(l, idx,
                                        ob.create<arith::ConstantIndexOp>(l, k - 1));
        Value row = ob.create<linalg::IndexOp>(l, 0);
        Value xl = wide(ob.create<memref::LoadOp>(l, x, ValueRange{row, idx}));
        Value picked = ob.create<arith::SubFOp>(l, xl, lse);
        Value sumLogp = ob.create<arith::SubFOp>(
            l, wide(a[2]), ob.create<arith::MulFOp>(l, c(double(k)), lse));
        Value loss = ob.create<arith::SubFOp>(
            l, ob.create<arith::MulFOp>(l, c(-(1 - eps)), picked),
            ob.create<arith::MulFOp>(l, c(eps / double(k)), sumLogp));
        Value t = ob.create<arith::AddFOp>(
            l, a[4], ob.create<arith::SelectOp>(l, valid, loss, c(0)));
        Value n = ob.create<arith::AddFOp>(
            l, a[5], ob.create<arith::SelectOp>(l, valid, c(1), c(0)));
        ob.create<linalg::YieldOp>(l, ValueRange{t, n});
      });
  // Like PyTorch, every label ignored gives NaN (0 / 0).
  generic({total, count}, {AffineMap::get(0, 0, {}, ctx), AffineMap::get(0, 0, {}, ctx)},
          out, AffineMap::get(0, 0, {}, ctx), {},
          [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
            Value mean = ob.create<arith::DivFOp>(l, a[0], a[1]);
            return elem.isF64() ? mean : ob.create<arith::TruncFOp>(l, elem, mean).getResult();
          });
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult EntryLowering::lowerReduce(ReduceOp op) {
  auto inType = op.getInput().getType();
  Type elem = inType.getElementType();
  int64_t rank = inType.getRank();
  SmallVector<bool> reduced(rank, false);
  for (int64_t a : op.getAxes())
    reduced[a < 0 ? a + rank : a] = true;
  Value out = destination(op.getResult());
  SmallVector<AffineExpr> exprs;
  SmallVector<utils::IteratorType> its;
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i) {
    its.push_back(reduced[i] ? utils::IteratorType::reduction
                             : utils::IteratorType::parallel);
    if (reduced[i]) {
      count *= inType.getDimSize(i);
      if (op.getKeepdims())
        exprs.push_back(getAffineConstantExpr(0, ctx));
    } else {
      exprs.push_back(getAffineDimExpr(i, ctx));
    }
  }
  bool isFloat = isa<FloatType>(elem);
  ReduceKind kind = op.getKind();
  Attribute init;
  if (kind == ReduceKind::sum || kind == ReduceKind::mean)
    init = isFloat ? Attribute(b.getFloatAttr(elem, 0.0))
                   : Attribute(b.getIntegerAttr(elem, 0));
  else if (isFloat)
    init = b.getFloatAttr(elem, kind == ReduceKind::max ? -INFINITY : INFINITY);
  else {
    unsigned w = elem.getIntOrFloatBitWidth();
    init = b.getIntegerAttr(elem, kind == ReduceKind::max
                                      ? APInt::getSignedMinValue(w)
                                      : APInt::getSignedMaxValue(w));
  }
  // `fm` applies to floats only.
  auto combine = [&](OpBuilder &ob, Location l, Value acc, Value x,
                     arith::FastMathFlags fm) -> Value {
    auto flags = arith::FastMathFlagsAttr::get(ctx, fm);
    switch (kind) {
    case ReduceKind::sum:
    case ReduceKind::mean:
      return isFloat ? ob.create<arith::AddFOp>(l, acc, x, flags).getResult()
                     : ob.create<arith::AddIOp>(l, acc, x).getResult();
    case ReduceKind::max:
      return isFloat ? ob.create<arith::MaximumFOp>(l, acc, x, flags).getResult()
                     : ob.create<arith::MaxSIOp>(l, acc, x).getResult();
    case ReduceKind::min:
      return isFloat ? ob.create<arith::MinimumFOp>(l, acc, x, flags).getResult()
                     : ob.create<arith::MinSIOp>(l, acc, x).getResult();
    }
    return x;
  };
  int64_t lead = 0;
  while (lead < rank && !reduced[lead])
    ++lead;
  bool trailing = llvm::all_of(ArrayRef<bool>(reduced).drop_front(lead),
                               [](bool r) { return r; });
  if (isFloat && trailing && count > 1) {
    // Reduced axes last (layer norm's statistics, a loss over classes):
    // rows of `count` contiguous elements, each summed in a register with
    // reassociation allowed so that the loop vectorizes. Written as a
    // generic, the accumulator would be a store to the result every
    // element, which the vectorizer cannot keep in a register because it
    // cannot tell the result from the input (both live in the arena).
    int64_t rows = inType.getNumElements() / count;
    Value in2 = reshape(denseOf(op.getInput()), MemRefType::get({rows, count}, elem));
    Value out1 = reshape(out, MemRefType::get({rows}, elem));
    Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    Value initValue = b.create<arith::ConstantOp>(loc, cast<TypedAttr>(init));
    b.create<scf::ForOp>(
        loc, zero, b.create<arith::ConstantIndexOp>(loc, rows), one,
        ValueRange{}, [&](OpBuilder &ob, Location l, Value i, ValueRange) {
          auto inner = ob.create<scf::ForOp>(
              l, zero, ob.create<arith::ConstantIndexOp>(l, count), one,
              ValueRange{initValue},
              [&](OpBuilder &ib, Location il, Value j, ValueRange acc) {
                Value x = ib.create<memref::LoadOp>(il, in2, ValueRange{i, j});
                ib.create<scf::YieldOp>(
                    il, combine(ib, il, acc[0], x, arith::FastMathFlags::reassoc));
              });
          Value r = inner.getResult(0);
          if (kind == ReduceKind::mean)
            r = ob.create<arith::DivFOp>(
                l, r, constantScalar(ob, l, elem, static_cast<double>(count)));
          ob.create<memref::StoreOp>(l, r, out1, ValueRange{i});
          ob.create<scf::YieldOp>(l);
        });
    return success();
  }
  fill(out, init);
  generic({bufferOf(op.getInput())}, {AffineMap::getMultiDimIdentityMap(rank, ctx)}, out,
          AffineMap::get(rank, 0, exprs, ctx), its,
          [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return combine(ob, l, a[1], a[0], arith::FastMathFlags::none);
          });
  if (kind == ReduceKind::mean)
    elementwise({out}, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
      return ob.create<arith::DivFOp>(
          l, a[0], constantScalar(ob, l, elem, static_cast<double>(count)));
    });
  return success();
}

/// result[a..., i..., b...] = input[a..., indices[i...], b...], with
/// negative indices counted from the end and out-of-range ones clamped (a
/// wild index must not read outside the buffer).
LogicalResult EntryLowering::lowerGatherLike(Value input, Value indices,
                                             int64_t axis, Value result) {
  Value in = bufferOf(input), idx = bufferOf(indices);
  Value out = destination(result);
  auto inType = cast<MemRefType>(in.getType());
  auto idxType = cast<MemRefType>(idx.getType());
  int64_t outRank = cast<MemRefType>(out.getType()).getRank();
  int64_t idxRank = idxType.getRank(), dimSize = inType.getDimSize(axis);
  SmallVector<utils::IteratorType> its(outRank, utils::IteratorType::parallel);
  generic({}, {}, out, AffineMap::getMultiDimIdentityMap(outRank, ctx), its,
          [&](OpBuilder &ob, Location l, ValueRange) -> Value {
            SmallVector<Value> pos;
            for (int64_t i = 0; i < idxRank; ++i)
              pos.push_back(ob.create<linalg::IndexOp>(l, axis + i));
            Value raw = ob.create<memref::LoadOp>(l, idx, pos);
            Value i = ob.create<arith::IndexCastOp>(l, ob.getIndexType(), raw);
            Value n = ob.create<arith::ConstantIndexOp>(l, dimSize);
            Value zero = ob.create<arith::ConstantIndexOp>(l, 0);
            Value neg = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt,
                                                 i, zero);
            i = ob.create<arith::SelectOp>(
                l, neg, ob.create<arith::AddIOp>(l, i, n), i);
            i = ob.create<arith::MaxSIOp>(l, i, zero);
            i = ob.create<arith::MinSIOp>(
                l, i, ob.create<arith::ConstantIndexOp>(l, std::max<int64_t>(dimSize - 1, 0)));
            SmallVector<Value> src;
            for (int64_t d = 0; d < axis; ++d)
              src.push_back(ob.create<linalg::IndexOp>(l, d));
            src.push_back(i);
            for (int64_t d = axis + 1; d < inType.getRank(); ++d)
              src.push_back(ob.create<linalg::IndexOp>(l, d - 1 + idxRank));
            return ob.create<memref::LoadOp>(l, in, src);
          });
  return success();
}

LogicalResult EntryLowering::lowerSlice(SliceOp op) {
  Value in = bufferOf(op.getInput());
  Value out = destination(op.getResult());
  int64_t rank = op.getType().getRank();
  SmallVector<utils::IteratorType> its(rank, utils::IteratorType::parallel);
  // The read position is computed in the body: linalg wants operand maps
  // it can invert to loop bounds, and a negative step is not one of them.
  generic({}, {}, out, AffineMap::getMultiDimIdentityMap(rank, ctx), its,
          [&](OpBuilder &ob, Location l, ValueRange) -> Value {
            SmallVector<Value> ivs;
            for (int64_t d = 0; d < rank; ++d)
              ivs.push_back(ob.create<linalg::IndexOp>(l, d));
            SmallVector<Value> src;
            for (int64_t d = 0; d < rank; ++d) {
              Value step = ob.create<arith::ConstantIndexOp>(l, op.getSteps()[d]);
              Value start = ob.create<arith::ConstantIndexOp>(l, op.getStarts()[d]);
              src.push_back(ob.create<arith::AddIOp>(
                  l, ob.create<arith::MulIOp>(l, ivs[d], step), start));
            }
            return ob.create<memref::LoadOp>(l, in, src);
          });
  return success();
}

Value EntryLowering::axisWindow(Value buffer, int64_t axis, int64_t at,
                                RankedTensorType part) {
  int64_t rank = part.getRank();
  SmallVector<int64_t> offsets(rank, 0), sizes(part.getShape()),
      strides(rank, 1);
  offsets[axis] = at;
  return b.create<memref::SubViewOp>(loc, buffer, offsets, sizes, strides);
}

LogicalResult EntryLowering::lowerConcat(ConcatOp op) {
  Value out = destination(op.getResult());
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += op.getType().getRank();
  int64_t at = 0;
  for (Value v : op.getInputs()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getNumElements() > 0)
      copy(bufferOf(v), axisWindow(out, axis, at, t));
    at += t.getDimSize(axis);
  }
  return success();
}

LogicalResult EntryLowering::lowerSplit(SplitOp op) {
  Value in = bufferOf(op.getInput());
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += op.getInput().getType().getRank();
  int64_t at = 0;
  for (Value r : op.getResults()) {
    auto t = cast<RankedTensorType>(r.getType());
    Value out = destination(r);
    if (t.getNumElements() > 0)
      copy(axisWindow(in, axis, at, t), out);
    at += t.getDimSize(axis);
  }
  return success();
}

LogicalResult
EntryLowering::lowerPositionalEncoding(PositionalEncodingOp op) {
  Value out = destination(op.getResult());
  auto type = op.getType();
  int64_t dModel = type.getDimSize(1);
  Type elem = type.getElementType();
  SmallVector<utils::IteratorType> its(2, utils::IteratorType::parallel);
  generic({}, {}, out, AffineMap::getMultiDimIdentityMap(2, ctx), its,
          [&](OpBuilder &ob, Location l, ValueRange) -> Value {
            // Computed in f64 like the reference, then rounded once.
            Type f64 = ob.getF64Type();
            auto toF64 = [&](Value idx) {
              Value i = ob.create<arith::IndexCastOp>(l, ob.getI64Type(), idx);
              return ob.create<arith::SIToFPOp>(l, f64, i);
            };
            Value pIdx = ob.create<linalg::IndexOp>(l, 0);
            Value iIdx = ob.create<linalg::IndexOp>(l, 1);
            Value two = ob.create<arith::ConstantIndexOp>(l, 2);
            Value pair = ob.create<arith::MulIOp>(
                l, ob.create<arith::DivUIOp>(l, iIdx, two), two);
            Value expo = ob.create<arith::DivFOp>(
                l, toF64(pair), constantScalar(ob, l, f64, double(dModel)));
            Value denom = ob.create<math::PowFOp>(
                l, constantScalar(ob, l, f64, 10000.0), expo);
            Value angle = ob.create<arith::DivFOp>(l, toF64(pIdx), denom);
            Value odd = ob.create<arith::CmpIOp>(
                l, arith::CmpIPredicate::ne,
                ob.create<arith::RemUIOp>(l, iIdx, two),
                ob.create<arith::ConstantIndexOp>(l, 0));
            Value v = ob.create<arith::SelectOp>(
                l, odd, ob.create<math::CosOp>(l, angle),
                ob.create<math::SinOp>(l, angle));
            if (elem.isF64())
              return v;
            return ob.create<arith::TruncFOp>(l, elem, v);
          });
  return success();
}

/// `result` is `input` read with another shape: a view of the same storage
/// when the layout allows, else a copy into the result's own buffer. `r` is
/// the reshape, if it is one (a transpose of unit dimensions is not).
LogicalResult EntryLowering::lowerReshape(Value input, Value result,
                                          ReshapeOp r) {
  if (auto v = views.find(input); v != views.end()) {
    auto shape = cast<RankedTensorType>(result.getType()).getShape();
    std::optional<SmallVector<int64_t>> st;
    if ((!r || reshapeKeepsView(r)))
      st = reshapeStrides(v->second, shape);
    if (st) {
      views[result] = {v->second.base, v->second.offset,
                       SmallVector<int64_t>(shape), *st};
    } else {
      // Not expressible as a view: a copy into the reshape's own
      // buffer, which the plan gave it for that reason.
      Value dst = outputOf.count(result) ? outputOf[result]
                                         : destination(result);
      copyView(v->second, {reshape(dst, memrefOf(input.getType())),
                           0, v->second.shape,
                           rowMajorStrides(v->second.shape)},
               cast<ShapedType>(input.getType()).getElementType());
      buffers[result] = dst;
      return success();
    }
    if (auto it = outputOf.find(result); it != outputOf.end()) {
      copy(bufferOf(result), it->second);
      views.erase(result);
      buffers[result] = it->second;
    }
    return success();
  }
  Value src = bufferOf(input);
  if (auto it = outputOf.find(result); it != outputOf.end()) {
    buffers[result] = it->second;
    copy(reshape(src, memrefOf(cast<RankedTensorType>(result.getType()))), it->second);
  } else {
    buffers[result] = reshape(src, memrefOf(cast<RankedTensorType>(result.getType())));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The entry
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

/// splitmix64's finalizer (CounterRNG.h) on i64 values.
static Value mix64(OpBuilder &ob, Location l, Value x) {
  auto c = [&](uint64_t v) {
    return ob.create<arith::ConstantOp>(l, ob.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  auto xorShift = [&](Value v, int64_t k) {
    return ob.create<arith::XOrIOp>(l, v, ob.create<arith::ShRUIOp>(l, v, c(k)));
  };
  x = ob.create<arith::AddIOp>(l, x, c(0x9E3779B97F4A7C15ull));
  x = ob.create<arith::MulIOp>(l, xorShift(x, 30), c(0xBF58476D1CE4E5B9ull));
  x = ob.create<arith::MulIOp>(l, xorShift(x, 27), c(0x94D049BB133111EBull));
  return xorShift(x, 31);
}

LogicalResult EntryLowering::lowerNextStep(NextStepOp op) {
  if (state.step < 0)
    return op.emitError("no step count in the session state");
  auto scalar = RankedTensorType::get({}, b.getI64Type());
  Value slot = view(stateArg, state.step, scalar);
  Value next = b.create<arith::AddIOp>(
      loc, b.create<memref::LoadOp>(loc, slot, ValueRange{}),
      b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(1)));
  b.create<memref::StoreOp>(loc, next, slot, ValueRange{});
  b.create<memref::StoreOp>(loc, next, destination(op.getResult()),
                            ValueRange{});
  return success();
}

/// Element i is kept when the top 53 bits of mix64(stream ^ mix64(i)) reach
/// rate·2^53, which is `u(stream, i) >= rate` of CounterRNG.h in integers.
LogicalResult EntryLowering::lowerDropout(DropoutOp op) {
  auto type = op.getType();
  Value in = bufferOf(op.getInput());
  Value out = destination(op.getResult());
  auto i64c = [&](OpBuilder &ob, Location l, uint64_t v) -> Value {
    return ob.create<arith::ConstantOp>(l, ob.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  Value stream = i64c(b, loc, static_cast<uint64_t>(op.getSeed()));
  if (op.getStep()) {
    Value step = b.create<memref::LoadOp>(loc, bufferOf(op.getStep()), ValueRange{});
    Value mixedStep = mix64(
        b, loc, b.create<arith::XOrIOp>(loc, step, i64c(b, loc, 0xD1B54A32D192ED03ull)));
    stream = mix64(b, loc, b.create<arith::XOrIOp>(loc, stream, mixedStep));
  }
  double rate = op.getRate().convertToDouble();
  auto threshold = static_cast<uint64_t>(std::ceil(std::ldexp(rate, 53)));
  double keepScale = 1.0 / (1.0 - rate);
  SmallVector<int64_t> strides = rowMajorStrides(type.getShape());
  Type elem = type.getElementType();
  elementwise({in}, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value linear = i64c(ob, l, 0);
    for (auto [d, stride] : llvm::enumerate(strides)) {
      Value i = ob.create<arith::IndexCastOp>(l, ob.getI64Type(),
                                              ob.create<linalg::IndexOp>(l, d));
      linear = ob.create<arith::AddIOp>(
          l, linear, ob.create<arith::MulIOp>(l, i, i64c(ob, l, stride)));
    }
    Value z = mix64(ob, l, ob.create<arith::XOrIOp>(l, stream, mix64(ob, l, linear)));
    Value top = ob.create<arith::ShRUIOp>(l, z, i64c(ob, l, 11));
    Value keep = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::uge, top,
                                          i64c(ob, l, threshold));
    Value scaled = ob.create<arith::MulFOp>(l, a[0],
                                            constantScalar(ob, l, elem, keepScale));
    return ob.create<arith::SelectOp>(l, keep, scaled,
                                      constantScalar(ob, l, elem, 0.0));
  });
  return success();
}

LogicalResult EntryLowering::lowerCrossEntropyGrad(CrossEntropyGradOp op) {
  auto lt = op.getLogits().getType();
  Type elem = lt.getElementType();
  if (!elem.isF32())
    return op.emitError("the CPU backend lowers the cross-entropy gradient "
                        "for f32 logits only");
  int64_t k = lt.getShape().back(), rows = product(lt.getShape().drop_back());
  auto matrix = MemRefType::get({rows, k}, elem);
  Value x = reshape(denseOf(op.getLogits()), matrix);
  Type labelType = op.getLabels().getType().getElementType();
  Value labels = reshape(denseOf(op.getLabels()), MemRefType::get({rows}, labelType));
  Value out = reshape(destination(op.getResult()), matrix);
  auto rowType = MemRefType::get({rows}, elem);
  Value mx = temporary(rowType), se = temporary(rowType);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  AffineMap rk = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap r = AffineMap::get(2, 0, {d(0)}, ctx);
  SmallVector<utils::IteratorType> red = {utils::IteratorType::parallel,
                                          utils::IteratorType::reduction};
  fill(mx, b.getFloatAttr(elem, -INFINITY));
  generic({x}, {rk}, mx, r, red,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            return ob.create<arith::MaximumFOp>(l, a[0], a[1]);
          });
  fill(se, b.getFloatAttr(elem, 0.0));
  generic({x, mx}, {rk, r}, se, r, red,
          [](OpBuilder &ob, Location l, ValueRange a) -> Value {
            Value e = ob.create<math::ExpOp>(l, ob.create<arith::SubFOp>(l, a[0], a[1]));
            return ob.create<arith::AddFOp>(l, a[2], e);
          });
  auto ignore = static_cast<int64_t>(op.getIgnoreIndex());
  auto isValid = [&](OpBuilder &ob, Location l, Value label) -> Value {
    return ob.create<arith::CmpIOp>(
        l, arith::CmpIPredicate::ne, label,
        ob.create<arith::ConstantOp>(l, ob.getIntegerAttr(labelType, ignore)));
  };
  // The mean's denominator: the positions not ignored.
  Value count = temporary(MemRefType::get({}, elem));
  fill(count, b.getFloatAttr(elem, 0.0));
  generic({labels}, {AffineMap::getMultiDimIdentityMap(1, ctx)}, count,
          AffineMap::get(1, 0, {}, ctx), {utils::IteratorType::reduction},
          [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
            Value one = ob.create<arith::SelectOp>(
                l, isValid(ob, l, a[0]), constantScalar(ob, l, elem, 1.0),
                constantScalar(ob, l, elem, 0.0));
            return ob.create<arith::AddFOp>(l, a[1], one);
          });
  Value grad = bufferOf(op.getGrad());
  double eps = op.getLabelSmoothing().convertToDouble();
  AffineMap scalar2 = AffineMap::get(2, 0, {}, ctx);
  SmallVector<utils::IteratorType> par(2, utils::IteratorType::parallel);
  generic({x, mx, se, labels, grad, count}, {rk, r, r, r, scalar2, scalar2}, out,
          rk, par, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
            auto c = [&](double v) { return constantScalar(ob, l, elem, v); };
            Value p = ob.create<arith::DivFOp>(
                l, ob.create<math::ExpOp>(l, ob.create<arith::SubFOp>(l, a[0], a[1])),
                a[2]);
            Value col = ob.create<arith::IndexCastOp>(
                l, labelType, ob.create<linalg::IndexOp>(l, 1));
            Value hit = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, col, a[3]);
            Value target = ob.create<arith::SelectOp>(l, hit, c(1 - eps + eps / double(k)),
                                                      c(eps / double(k)));
            Value g = ob.create<arith::MulFOp>(
                l, ob.create<arith::DivFOp>(l, a[4], a[5]),
                ob.create<arith::SubFOp>(l, p, target));
            return ob.create<arith::SelectOp>(l, isValid(ob, l, a[3]), g, c(0.0));
          });
  return success();
}

LogicalResult EntryLowering::lowerEmbeddingGrad(EmbeddingGradOp op) {
  auto outType = op.getType();
  Type elem = outType.getElementType();
  int64_t rows = outType.getDimSize(0), width = outType.getDimSize(1);
  int64_t n = op.getIndices().getType().getNumElements();
  Value out = destination(op.getResult());
  fill(out, b.getFloatAttr(elem, 0.0));
  if (n == 0 || width == 0)
    return success();
  Type idxType = op.getIndices().getType().getElementType();
  Value idx = reshape(denseOf(op.getIndices()), MemRefType::get({n}, idxType));
  Value grad = reshape(denseOf(op.getGrad()), MemRefType::get({n, width}, elem));
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
  Value one = b.create<arith::ConstantIndexOp>(loc, 1);
  Value count = b.create<arith::ConstantIndexOp>(loc, n);
  Value cols = b.create<arith::ConstantIndexOp>(loc, width);
  Value limit = b.create<arith::ConstantIndexOp>(loc, rows);
  // Rows repeat, so the accumulation is sequential over positions.
  b.create<scf::ForOp>(
      loc, zero, count, one, ValueRange{},
      [&](OpBuilder &ob, Location l, Value i, ValueRange) {
        Value row = ob.create<arith::IndexCastOp>(
            l, ob.getIndexType(), ob.create<memref::LoadOp>(l, idx, ValueRange{i}));
        Value inRange = ob.create<arith::AndIOp>(
            l, ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, row, zero),
            ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, row, limit));
        ob.create<scf::IfOp>(l, inRange, [&](OpBuilder &ib, Location il) {
          ib.create<scf::ForOp>(
              il, zero, cols, one, ValueRange{},
              [&](OpBuilder &jb, Location jl, Value j, ValueRange) {
                Value acc = jb.create<memref::LoadOp>(jl, out, ValueRange{row, j});
                Value g = jb.create<memref::LoadOp>(jl, grad, ValueRange{i, j});
                jb.create<memref::StoreOp>(jl, jb.create<arith::AddFOp>(jl, acc, g),
                                           out, ValueRange{row, j});
                jb.create<scf::YieldOp>(jl);
              });
          ib.create<scf::YieldOp>(il);
        });
        ob.create<scf::YieldOp>(l);
      });
  return success();
}

std::pair<Value, Value> EntryLowering::stepAndRate(Value step,
                                                   LRSchedule schedule,
                                                   double lr, int64_t dModel,
                                                   int64_t warmup) {
  Type f64 = b.getF64Type();
  auto c = [&](double v) { return constantScalar(b, loc, f64, v); };
  Value t = b.create<arith::SIToFPOp>(
      loc, f64, b.create<memref::LoadOp>(loc, bufferOf(step), ValueRange{}));
  if (schedule == LRSchedule::constant)
    return {t, c(lr)};
  // lr · d^-0.5 · min(t^-0.5, t · w^-1.5)
  Value tc = b.create<arith::MaximumFOp>(loc, t, c(1.0));
  Value decay = b.create<arith::DivFOp>(loc, c(1.0), b.create<math::SqrtOp>(loc, tc));
  Value ramp = b.create<arith::MulFOp>(loc, tc, c(std::pow(double(warmup), -1.5)));
  Value rate = b.create<arith::MulFOp>(
      loc, c(lr / std::sqrt(double(dModel))),
      b.create<arith::MinimumFOp>(loc, decay, ramp));
  return {t, rate};
}

template <typename UpdateOp>
LogicalResult EntryLowering::lowerOptimizer(UpdateOp op) {
  auto type = op.getGrad().getType();
  Type elem = type.getElementType();
  if (!elem.isF32())
    return op.emitError("the CPU backend updates f32 parameters only");
  StringRef name = op.getParameter();
  int64_t n = type.getNumElements();
  if (n == 0)
    return success();
  Value param = view(stateArg, state.parameter.lookup(name), type);
  Value grad = denseOf(op.getGrad());
  auto [t, rate] = stepAndRate(op.getStep(), op.getSchedule(),
                               op.getLr().convertToDouble(),
                               static_cast<int64_t>(op.getDModel()),
                               static_cast<int64_t>(op.getWarmup()));
  Type f64 = b.getF64Type();
  auto c = [&](double v) { return constantScalar(b, loc, f64, v); };
  // The step's coefficients, computed here in f64 (they depend on the step
  // count) and handed to the kernel as f32.
  auto coefficients = [&](ArrayRef<Value> values) {
    Value buf = temporary(MemRefType::get({int64_t(values.size())}, elem));
    for (auto [i, v] : llvm::enumerate(values))
      b.create<memref::StoreOp>(
          loc, b.create<arith::TruncFOp>(loc, elem, v), buf,
          ValueRange{b.create<arith::ConstantIndexOp>(loc, i)});
    return buf;
  };
  double wd = op.getWeightDecay().convertToDouble();
  if constexpr (std::is_same_v<UpdateOp, SGDUpdateOp>) {
    Value coeff = coefficients({rate, c(wd)});
    callKernel(TFM_KERNEL_SGD, {n}, {},
               {KernelArg(param), KernelArg(grad), KernelArg(coeff)});
  } else {
    double b1 = op.getBeta1().convertToDouble();
    double b2 = op.getBeta2().convertToDouble();
    double eps = op.getEps().convertToDouble();
    // step size lr_t / (1 - β1^t); the second moment's correction 1/√(1 - β2^t)
    Value c1 = b.create<arith::SubFOp>(loc, c(1.0), b.create<math::PowFOp>(loc, c(b1), t));
    Value c2 = b.create<arith::SubFOp>(loc, c(1.0), b.create<math::PowFOp>(loc, c(b2), t));
    Value stepSize = b.create<arith::DivFOp>(loc, rate, c1);
    Value invC2 = b.create<arith::DivFOp>(loc, c(1.0), b.create<math::SqrtOp>(loc, c2));
    Value coeff = coefficients({stepSize, invC2, c(b1), c(1 - b1), c(b2),
                                c(1 - b2), c(eps), c(wd)});
    Value m = view(stateArg, state.adamM.lookup(name), type);
    Value v = view(stateArg, state.adamV.lookup(name), type);
    callKernel(TFM_KERNEL_ADAM, {n}, {},
               {KernelArg(param), KernelArg(grad), KernelArg(m), KernelArg(v),
                KernelArg(coeff)});
  }
  return success();
}

LogicalResult EntryLowering::lower(Operation *op) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp>(
          [&](Operation *o) { return lowerBinary(o); })
      .Case([&](CompareOp c) {
        return computedInsideSelects(c) ? success() : lowerBinary(c);
      })
      .Case([&](SelectOp s) {
        Value out = destination(s.getResult());
        auto c = s.getCondition().getDefiningOp<CompareOp>();
        if (c && computedInsideSelects(c)) {
          elementwise({bufferOf(c.getLhs()), bufferOf(c.getRhs()),
                       bufferOf(s.getTrueValue()), bufferOf(s.getFalseValue())},
                      out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                        return ob.create<arith::SelectOp>(
                            l, compareValues(ob, l, c, a[0], a[1]), a[2], a[3]);
                      });
          return success();
        }
        elementwise({bufferOf(s.getCondition()), bufferOf(s.getTrueValue()),
                     bufferOf(s.getFalseValue())},
                    out, [](OpBuilder &ob, Location l, ValueRange a) -> Value {
                      return ob.create<arith::SelectOp>(l, a[0], a[1], a[2]);
                    });
        return success();
      })
      .Case([&](CastOp c) { return lowerCast(c); })
      .Case([&](DropoutOp d) {
        if (d.getTraining() && !d.getRate().isZero())
          return lowerDropout(d);
        return lowerUnaryFloat(d);
      })
      .Case<ReluOp, GeluOp, math::SqrtOp, math::ErfOp, math::TanhOp,
            math::ExpOp, math::LogOp, math::AbsFOp, arith::NegFOp>(
          [&](Operation *o) { return lowerUnaryFloat(o); })
      .Case([&](NextStepOp n) { return lowerNextStep(n); })
      .Case([&](CrossEntropyGradOp c) { return lowerCrossEntropyGrad(c); })
      .Case([&](EmbeddingGradOp e) { return lowerEmbeddingGrad(e); })
      .Case([&](LayerNormGradOp g) -> LogicalResult {
        auto xt = g.getInput().getType();
        if (!xt.getElementType().isF32())
          return g.emitError("the CPU backend trains in f32 only");
        int64_t n = g.getScale().getType().getNumElements();
        int64_t m = n ? xt.getNumElements() / n : 0;
        if (m == 0 || n == 0) {
          for (Value r : g.getResults())
            fill(destination(r), b.getFloatAttr(xt.getElementType(), 0.0));
          return success();
        }
        callKernel(TFM_KERNEL_LAYER_NORM_BACKWARD, {m, n}, {g.getEpsilon().convertToDouble()},
                   {KernelArg(denseOf(g.getInput())), KernelArg(denseOf(g.getScale())),
                    KernelArg(denseOf(g.getGrad())),
                    KernelArg(destination(g.getInputGrad())),
                    KernelArg(destination(g.getScaleGrad())),
                    KernelArg(destination(g.getBiasGrad()))});
        return success();
      })
      .Case([&](SGDUpdateOp u) { return lowerOptimizer(u); })
      .Case([&](AdamUpdateOp u) { return lowerOptimizer(u); })
      .Case([&](MatmulOp m) { return lowerMatmul(m); })
      .Case([&](LinearOp l) {
        return lowerLinear(l.getInput(), l.getWeight(), l.getBias(), 0,
                           l.getActivation(), l.getResult());
      })
      .Case([&](QKVProjectionOp p) {
        if (isPackedQKV(p))
          return lowerPackedQKV(p);
        // One GEMM per part over consecutive weight rows.
        int64_t row = 0;
        for (auto [r, size] : llvm::zip(p.getResults(), p.getSizes())) {
          if (failed(lowerLinear(p.getInput(), p.getWeight(), p.getBias(), row,
                                 Activation::none, r)))
            return failure();
          row += size;
        }
        return success();
      })
      .Case([&](SoftmaxOp s) {
        int64_t rank = s.getType().getRank();
        int64_t axis = static_cast<int64_t>(s.getAxis());
        if (axis < 0)
          axis += rank;
        if (axis == rank - 1)
          return lowerSoftmax(denseOf(s.getInput()), Value(), MaskKind::none,
                              1.0, false, destination(s.getResult()), s);
        return genericSoftmax(bufferOf(s.getInput()), axis,
                              destination(s.getResult()));
      })
      .Case([&](MaskedSoftmaxOp s) {
        Value mask = s.getMask() ? denseOf(s.getMask()) : Value();
        return lowerSoftmax(denseOf(s.getInput()), mask, s.getMaskKind(),
                            s.getScale().convertToDouble(), s.getCausal(),
                            destination(s.getResult()), s);
      })
      .Case([&](LayerNormOp n) {
        return lowerLayerNorm(n.getInput(), Value(), n.getScale(), n.getBias(),
                              static_cast<int64_t>(n.getAxis()), n.getEpsilon().convertToDouble(),
                              n.getResult(), Value(), n);
      })
      .Case([&](AddLayerNormOp n) {
        return lowerLayerNorm(n.getInput(), n.getResidual(), n.getScale(),
                              n.getBias(), static_cast<int64_t>(n.getAxis()),
                              n.getEpsilon().convertToDouble(), n.getOutput(),
                              n.getSum(), n);
      })
      .Case([&](AttentionOp a) { return lowerAttention(a); })
      .Case([&](CrossEntropyOp c) { return lowerCrossEntropy(c); })
      .Case([&](EmbeddingOp e) {
        return lowerGatherLike(e.getTable(), e.getIndices(), 0, e.getResult());
      })
      .Case([&](GatherOp g) {
        int64_t axis = g.getAxis();
        if (axis < 0)
          axis += g.getInput().getType().getRank();
        return lowerGatherLike(g.getInput(), g.getIndices(), axis,
                               g.getResult());
      })
      .Case([&](PositionalEncodingOp p) { return lowerPositionalEncoding(p); })
      .Case([&](TransposeOp t) {
        if (movesOnlyUnitDims(t))
          return lowerReshape(t.getInput(), t.getResult());
        if (foldsIntoMatmulResult(t))
          return success(); // the matmul wrote it
        if (foldsIntoMatmulOperand(t)) {
          StridedView in = viewOf(t.getInput());
          StridedView v{in.base, in.offset, {}, {}};
          for (int64_t p : t.getPermutation()) {
            v.shape.push_back(in.shape[p]);
            v.strides.push_back(in.strides[p]);
          }
          views[t.getResult()] = v;
          return success();
        }
        Value out = destination(t.getResult());
        int64_t rank = t.getType().getRank();
        if (t.getType().getElementType().isF32()) {
          StridedView in = viewOf(t.getInput());
          StridedView from{in.base, in.offset, {}, {}};
          for (int64_t p : t.getPermutation()) {
            from.shape.push_back(in.shape[p]);
            from.strides.push_back(in.strides[p]);
          }
          auto shape = t.getType().getShape();
          copyView(from, {out, 0, SmallVector<int64_t>(shape), rowMajorStrides(shape)},
                   t.getType().getElementType());
          return success();
        }
        // result[i] = input[j] where i[k] = j[perm[k]]: read input at the
        // inverse permutation of the loop indices.
        SmallVector<AffineExpr> exprs(rank);
        for (auto [k, p] : llvm::enumerate(t.getPermutation()))
          exprs[p] = getAffineDimExpr(k, ctx);
        SmallVector<utils::IteratorType> its(rank, utils::IteratorType::parallel);
        generic({bufferOf(t.getInput())}, {AffineMap::get(rank, 0, exprs, ctx)},
                out, AffineMap::getMultiDimIdentityMap(rank, ctx), its,
                [](OpBuilder &, Location, ValueRange a) { return a[0]; });
        return success();
      })
      .Case([&](ReshapeOp r) {
        return lowerReshape(r.getInput(), r.getResult(), r);
      })
      .Case([&](BroadcastOp o) {
        copy(bufferOf(o.getInput()), destination(o.getResult()));
        return success();
      })
      .Case([&](ConcatOp c) { return lowerConcat(c); })
      .Case([&](SplitOp s) { return lowerSplit(s); })
      .Case([&](SliceOp s) { return lowerSlice(s); })
      .Case([&](ReduceOp r) { return lowerReduce(r); })
      .Default([&](Operation *o) {
        return o->emitError("the CPU backend cannot lower '")
               << o->getName() << "' yet";
      });
}

LogicalResult EntryLowering::run(DictionaryAttr &entryInfo) {
  if (!fn.getBody().hasOneBlock())
    return fn.emitError("the CPU backend needs single-block functions");
  auto arenaAttr = fn->getAttrOfType<IntegerAttr>("tfm.arena_bytes");
  if (!arenaAttr)
    return fn.emitError("run tfm-plan-memory before tfm-lower-to-cpu");
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
    return m.getNumElements() == 0
               ? MemRefType::get({0}, m.getElementType())
               : m;
  };
  for (Type t : fn.getFunctionType().getInputs())
    argTypes.push_back(boundaryType(t));
  for (Type t : fn.getFunctionType().getResults())
    argTypes.push_back(boundaryType(t));
  b.setInsertionPoint(fn);
  std::string name = ("__tfm_entry_" + fn.getSymName()).str();
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
  Value one = b.create<arith::ConstantIntOp>(loc, TFM_KERNEL_MAX_ARGS, 64);
  argsArray = b.create<LLVM::AllocaOp>(loc, ptrTy, ptrTy, one, 8);
  errorCode = b.create<arith::ConstantIntOp>(loc, 0, 32);

  Block &src = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(src.getTerminator());
  SmallVector<Value> outBuffers;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    Value out = body->getArgument(kFirstIO + numIn + i);
    outBuffers.push_back(out);
    Value v = ret.getOperand(i);
    Operation *def = v.getDefiningOp();
    auto qkv = dyn_cast_or_null<QKVProjectionOp>(def);
    if (def && !isa<arith::ConstantOp, ParameterOp>(def) && !outputOf.count(v) &&
        memrefOf(v.getType()).getNumElements() > 0 &&
        !(qkv && isPackedQKV(qkv)))
      outputOf[v] = out;
  }

  for (Operation &op : src.without_terminator()) {
    loc = op.getLoc();
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      auto value = dyn_cast<ElementsAttr>(c.getValue());
      if (!value)
        return op.emitError("the CPU backend needs tensor constants");
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
    if (failed(lower(&op)) || kernelCallFailed)
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
  b.create<func::ReturnOp>(loc, errorCode);

  // What the artifact's metadata table says about this entry.
  auto describe = [&](Type t, StringAttr name) {
    auto r = cast<RankedTensorType>(t);
    return b.getDictionaryAttr(
        {b.getNamedAttr("name", name),
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

struct LowerToCPUPass
    : public mlir::tfm::impl::LowerToCPUPassBase<LowerToCPUPass> {
  using LowerToCPUPassBase::LowerToCPUPassBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<func::FuncOp> entries;
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.isPublic() && !fn.isExternal())
        entries.push_back(fn);

    WeightsLayout weights;
    for (func::FuncOp fn : entries)
      fn.walk([&](arith::ConstantOp c) {
        if (auto v = dyn_cast<ElementsAttr>(c.getValue()))
          weights.add(v);
      });

    // Parameters start from their initial values, which ride in the
    // weights; updates name parameters, and Adam adds two moments each.
    StateLayout state;
    for (func::FuncOp fn : entries) {
      WalkResult walk = fn.walk([&](ParameterOp p) -> WalkResult {
        auto [it, fresh] = state.typeOf.try_emplace(p.getName(), p.getType());
        if (!fresh) {
          if (it->second != p.getType())
            return p.emitError("parameter '")
                   << p.getName() << "' is " << p.getType()
                   << " here but " << it->second << " elsewhere";
          return WalkResult::advance();
        }
        int64_t init = weights.add(p.getInitialValue());
        state.parameter[p.getName()] = state.add(
            p.getName(), TFM_STATE_PARAMETER, p.getType(), init);
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
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
            state.adamM[u.getParameter()] = state.add(
                u.getParameter(), TFM_STATE_ADAM_M, type, -1);
            state.adamV[u.getParameter()] = state.add(
                u.getParameter(), TFM_STATE_ADAM_V, type, -1);
          }
        }
        if (isa<NextStepOp>(op) && state.step < 0)
          state.step = state.add("step", TFM_STATE_STEP,
                                 RankedTensorType::get({}, IntegerType::get(ctx, 64)),
                                 -1);
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
    }

    KernelTable kernels;
    SmallVector<Attribute> infos;
    for (func::FuncOp fn : entries) {
      DictionaryAttr info;
      EntryLowering lowering(fn, weights, kernels, state, bf16);
      if (failed(lowering.run(info)))
        return signalPassFailure();
      infos.push_back(info);
      fn.erase();
    }

    OpBuilder b(ctx);
    b.setInsertionPointToStart(module.getBody());
    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    // Defined by the artifact emitter: it calls host->run_kernel.
    b.create<LLVM::LLVMFuncOp>(
        module.getLoc(), kRunKernel,
        LLVM::LLVMFunctionType::get(b.getI32Type(),
                                    {ptrTy, b.getI32Type(), ptrTy}));
    module->setAttr("tfm.entries", b.getArrayAttr(infos));
    module->setAttr("tfm.kernels", b.getArrayAttr(kernels.descs));
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
};

} // namespace
