//===- KernelCalls.cpp - Runtime kernels called from compiled code --------===//

#include "tfm/Conversion/Common/KernelCalls.h"
#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "llvm/Support/SaveAndRestore.h"

using namespace mlir;
using namespace mlir::tfm;

int64_t mlir::tfm::abiActivation(Activation act) {
  switch (act) {
  case Activation::none:
    return TFM_ACTIVATION_NONE;
  case Activation::relu:
    return TFM_ACTIVATION_RELU;
  case Activation::gelu:
    return TFM_ACTIVATION_GELU;
  case Activation::gelu_tanh:
    return TFM_ACTIVATION_GELU_TANH;
  case Activation::silu:
    return TFM_ACTIVATION_SILU;
  }
  llvm_unreachable("unknown activation");
}

SmallVector<int64_t> mlir::tfm::linearParams(int64_t m, int64_t k, int64_t n,
                                             bool bias, int64_t activation,
                                             bool constantWeights) {
  SmallVector<int64_t> p(TFM_LINEAR_NUM_PARAMS, 0);
  p[TFM_LINEAR_M] = m;
  p[TFM_LINEAR_K] = k;
  p[TFM_LINEAR_N] = n;
  p[TFM_LINEAR_HAS_BIAS] = bias;
  p[TFM_LINEAR_ACTIVATION] = activation;
  p[TFM_LINEAR_CONSTANT_WEIGHTS] = constantWeights;
  return p;
}

bool mlir::tfm::isStridedMatmul(MatmulOp op) {
  auto lt = op.getLhs().getType(), rt = op.getRhs().getType();
  auto ot = op.getType();
  if (!lt.getElementType().isF32() || lt.getRank() != rt.getRank() ||
      lt.getRank() != ot.getRank() || ot.getRank() > 4 ||
      ot.getNumElements() == 0 || lt.getNumElements() == 0 ||
      rt.getNumElements() == 0)
    return false;
  return lt.getShape().drop_back(2) == ot.getShape().drop_back(2) &&
         rt.getShape().drop_back(2) == ot.getShape().drop_back(2);
}

void BufferizedEntry::callKernel(int32_t kind, ArrayRef<int64_t> params,
                                 ArrayRef<double> fparams,
                                 ArrayRef<KernelArg> args,
                                 ArrayRef<int64_t> strides, int32_t dtype,
                                 function_ref<void()> fallback) {
  Type elem = dtype == TFM_DTYPE_BF16  ? Type(b.getBF16Type())
              : dtype == TFM_DTYPE_F16 ? Type(b.getF16Type())
                                       : Type(b.getF32Type());
  auto desc = KernelAttr::getChecked(
      [&] { return emitError(loc); }, ctx, static_cast<KernelKind>(kind), elem,
      b.getDenseI64ArrayAttr(params),
      fparams.empty() ? DenseF64ArrayAttr() : b.getDenseF64ArrayAttr(fparams),
      strides.empty() ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(strides));
  if (!desc || args.size() > TFM_KERNEL_MAX_ARGS) {
    // Checked in every build: a descriptor cut to fit would run the kernel
    // on the wrong sizes.
    internalError("kernel kind " + Twine(kind) + " with " + Twine(args.size()) +
                  " arguments does not fit tfm/abi.h");
    return;
  }
  SmallVector<Value> buffers;
  SmallVector<int64_t> slots, offsets;
  for (auto [i, arg] : llvm::enumerate(args)) {
    if (!arg.buffer)
      continue;
    buffers.push_back(arg.buffer);
    slots.push_back(i);
    offsets.push_back(arg.elementOffset);
  }
  bool trivialSlots = slots.size() == args.size();
  bool zeroOffsets = llvm::all_of(offsets, [](int64_t o) { return o == 0; });
  auto call = b.create<KernelCallOp>(
      loc, b.getI32Type(), hostPointer(), desc, buffers,
      trivialSlots ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(slots),
      zeroOffsets ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(offsets),
      /*fallback=*/bool(fallback));
  Value status = call.getStatus();
  if (!fallback) {
    exitIfNonZero(status);
    return;
  }
  //   cond_br declined, ^own, ^called
  // ^called: the status checked as any call's; br ^next
  // ^own:    the op's own code;                br ^next
  Block *here = b.getInsertionBlock();
  Block *next = here->splitBlock(b.getInsertionPoint());
  Region *region = here->getParent();
  Block *called = b.createBlock(region, Region::iterator(next));
  Block *own = b.createBlock(region, Region::iterator(next));
  b.setInsertionPointToEnd(here);
  Value declined = b.create<arith::CmpIOp>(
      loc, arith::CmpIPredicate::eq, status,
      b.create<arith::ConstantIntOp>(loc, TFM_ABI_STATUS_KERNEL_DECLINED, 32));
  b.create<cf::CondBranchOp>(loc, declined, own, called);
  b.setInsertionPointToStart(called);
  exitIfNonZero(status);
  b.create<cf::BranchOp>(loc, next);
  b.setInsertionPointToStart(own);
  {
    llvm::SaveAndRestore<bool> inOwn(inFallback, true);
    fallback();
  }
  b.create<cf::BranchOp>(loc, next);
  b.setInsertionPointToStart(next);
}

void BufferizedEntry::batchMatmul(const StridedView &a, const StridedView &bv,
                                  const StridedView &c, int32_t dtype,
                                  function_ref<void()> fallback) {
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
  int64_t params[TFM_BATCH_MATMUL_NUM_PARAMS] = {};
  params[TFM_BATCH_MATMUL_B1] = dims[0];
  params[TFM_BATCH_MATMUL_B2] = dims[1];
  params[TFM_BATCH_MATMUL_M] = m;
  params[TFM_BATCH_MATMUL_K] = k;
  params[TFM_BATCH_MATMUL_N] = n;
  callKernel(TFM_KERNEL_BATCH_MATMUL, params, {},
             {KernelArg(a.base, a.offset), KernelArg(bv.base, bv.offset),
              KernelArg(c.base, c.offset)},
             strides, dtype, fallback);
}

std::pair<StridedView, StridedView>
BufferizedEntry::matmulOperandViews(MatmulOp op) {
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
  return {a, bv};
}

void mlir::tfm::lowerLinearKernel(BufferizedEntry &e, Value input, Value weight,
                                  Value bias, int64_t rowOffset, Activation act,
                                  Value out, int32_t dtype, bool narrowOperands,
                                  bool withFallback) {
  auto inType = cast<RankedTensorType>(input.getType());
  int64_t k = inType.getShape().back(),
          n = cast<MemRefType>(out.getType()).getShape().back();
  int64_t m = product(inType.getShape().drop_back());
  Value x = e.denseOf(input), w = e.denseOf(weight);
  Value bb = bias ? e.denseOf(bias) : Value();
  if (!isF32(inType) || m == 0 || k == 0 || n == 0) {
    lowerGenericLinear(e, x, w, bb, rowOffset, act, out);
    return;
  }
  bool constant = weight.getDefiningOp<arith::ConstantOp>() != nullptr;
  // The call's operands: x and this part's rows of w, rounded into the
  // descriptor's type when the kernel reads them narrow (each part on its
  // own, so that a packed weight is rounded once in all); the bias stays
  // f32 and is passed at its part's offset, as kernels take dense buffers.
  Value ownW = w, ownBias = bb;
  int64_t ownOffset = rowOffset;
  if (narrowOperands) {
    Type narrow = dtype == TFM_DTYPE_F16 ? Type(e.b.getF16Type())
                                         : Type(e.b.getBF16Type());
    Type f32 = e.b.getF32Type();
    auto wType = cast<MemRefType>(w.getType());
    // A weight stored narrow already (layOutModule) is read as it is, at
    // this part's rows.
    if (wType.getElementType() != narrow &&
        (rowOffset != 0 || wType.getDimSize(0) != n)) {
      ownW = e.axisWindow(w, 0, rowOffset, RankedTensorType::get({n, k}, f32));
      if (bb)
        ownBias =
            e.axisWindow(bb, 0, rowOffset, RankedTensorType::get({n}, f32));
      ownOffset = 0;
    }
    ownW = e.narrowed(ownW, narrow);
    x = e.narrowed(x, narrow);
  }
  auto own = [&] {
    lowerGenericLinear(e, x, ownW, ownBias, ownOffset, act, out);
  };
  e.callKernel(TFM_KERNEL_LINEAR,
               linearParams(m, k, n, bool(bias), abiActivation(act), constant),
               {},
               {KernelArg(x), KernelArg(ownW, ownOffset * k),
                bias ? KernelArg(bb, rowOffset) : KernelArg(), KernelArg(),
                KernelArg(out)},
               {}, dtype, withFallback ? function_ref<void()>(own) : nullptr);
}

void mlir::tfm::lowerGatedLinearKernel(BufferizedEntry &e, GatedLinearOp op,
                                       int32_t dtype, bool narrowOperands,
                                       bool withFallback) {
  Value h = gatedProjectionBuffer(e, op);
  lowerLinearKernel(e, op.getInput(), op.getWeight(), op.getBias(), 0,
                    Activation::none, h, dtype, narrowOperands, withFallback);
  lowerGatedProduct(e, h, op.getActivation(), e.destination(op.getResult()));
}

void mlir::tfm::collectOrigins(Location loc, std::vector<std::string> &out) {
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location part : fused.getLocations())
      collectOrigins(part, out);
    return;
  }
  if (isa<UnknownLoc>(loc))
    return;
  std::string place = describeLocation(loc);
  if (!llvm::is_contained(out, place))
    out.push_back(std::move(place));
}

std::string mlir::tfm::describeOrigins(const std::vector<std::string> &places) {
  constexpr size_t kShown = 6;
  std::string text;
  for (size_t i = 0; i < places.size() && i < kShown; ++i)
    text += (i ? ", " : "") + places[i];
  if (places.size() > kShown)
    text += " and " + std::to_string(places.size() - kShown) + " more";
  return text;
}
