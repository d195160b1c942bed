//===- Gemm.cpp - GEMMs on the LINEAR and BATCH_MATMUL kernels ------------===//
//
// A linear is one LINEAR kernel with its bias and activation as oneDNN
// post-ops. A strided matmul is one BATCH_MATMUL that reads its operands
// where the plan keeps them (transposes, packed QKV parts) and writes its
// result in the layout the plan gives it (transposed, when a transpose
// follows). A QKV projection the plan packs is one LINEAR into one buffer
// whose column windows are its results.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// A linear or a part of a projection on the LINEAR kernel.
LogicalResult lowerLinear(CPUEntry &e, Value input, Value weight, Value bias,
                          int64_t rowOffset, Activation act, Value result) {
  lowerLinearKernel(e, input, weight, bias, rowOffset, act,
                    e.destination(result), e.linearKernelDtype(),
                    /*narrowOperands=*/false,
                    /*withFallback=*/false);
  return success();
}

LogicalResult lowerMatmul(MatmulOp op, CPUEntry &e) {
  auto lt = op.getLhs().getType(), rt = op.getRhs().getType();
  auto ot = op.getType();
  auto ls = lt.getShape(), os = ot.getShape();
  int64_t m = os[os.size() - 2], n = os.back();
  int64_t k = op.getTransposeLhs() ? ls[ls.size() - 2] : ls.back();
  if (isStridedMatmul(op)) {
    auto [a, bv] = e.matmulOperandViews(op);
    e.batchMatmul(a, bv, e.destinationView(op.getResult()));
    return success();
  }
  Value out = e.destination(op.getResult());
  if (isF32(lt) && !op.getTransposeLhs() && m > 0 && n > 0 && k > 0 &&
      rt.getRank() == 2) {
    // A shared right operand: fold the batch into the rows.
    int64_t rows = product(ls.drop_back());
    StridedView a{e.denseOf(op.getLhs()), 0, {rows, k}, {k, 1}};
    StridedView bv{e.denseOf(op.getRhs()), 0, {k, n}, {n, 1}};
    if (op.getTransposeRhs())
      bv.strides = {1, k};
    StridedView c{out, 0, {rows, n}, {n, 1}};
    e.batchMatmul(a, bv, c);
    return success();
  }
  lowerGenericMatmul(e, e.bufferOf(op.getLhs()), e.bufferOf(op.getRhs()),
                     op.getTransposeLhs(), op.getTransposeRhs(), out);
  return success();
}

/// One GEMM into the packed [rows, Σsizes] storage the plan gave the first
/// result; the others are column windows of it, which the plan records as
/// views.
LogicalResult lowerPackedQKV(QKVProjectionOp op, CPUEntry &e) {
  auto inType = op.getInput().getType();
  int64_t k = inType.getShape().back(),
          rows = product(inType.getShape().drop_back());
  int64_t total = 0;
  for (int64_t size : op.getSizes())
    total += size;
  StridedView packed = e.destinationView(op.getResult(0));
  Value bias = op.getBias() ? e.denseOf(op.getBias()) : Value();
  bool constant = op.getWeight().getDefiningOp<arith::ConstantOp>() != nullptr;
  e.callKernel(TFM_KERNEL_LINEAR,
               linearParams(rows, k, total, bool(bias), TFM_ACTIVATION_NONE,
                            constant),
               {},
               {KernelArg(e.denseOf(op.getInput())),
                KernelArg(e.denseOf(op.getWeight())),
                bias ? KernelArg(bias) : KernelArg(), KernelArg(),
                KernelArg(packed.base)},
               {}, e.linearKernelDtype());
  return success();
}

LogicalResult lowerQKV(QKVProjectionOp p, CPUEntry &e) {
  auto first = dyn_cast_or_null<ArenaAttr>(getPlannedBuffer(p, 0));
  if (first && first.getBytes())
    return lowerPackedQKV(p, e);
  // One GEMM per part over consecutive weight rows.
  int64_t row = 0;
  for (auto [r, size] : llvm::zip(p.getResults(), p.getSizes())) {
    if (failed(lowerLinear(e, p.getInput(), p.getWeight(), p.getBias(), row,
                           Activation::none, r)))
      return failure();
    row += size;
  }
  return success();
}

} // namespace

namespace {

/// `view` padded to two batch dimensions (a missing one has size 1, and
/// its stride never moves a pointer), as ATTENTION's strides want it: the
/// batch strides and the row stride. Returns false when its elements are
/// not dense.
bool attentionStrides(const StridedView &view, SmallVectorImpl<int64_t> &out) {
  size_t rank = view.shape.size();
  if (view.strides.back() != 1 && view.shape.back() != 1)
    return false;
  SmallVector<int64_t> lead(view.strides.begin(), view.strides.end() - 2);
  while (lead.size() < 2)
    lead.insert(lead.begin(), 0);
  llvm::append_range(out, lead);
  out.push_back(view.strides[rank - 2]);
  return true;
}

/// Attention on the ATTENTION kernel: no scores in memory. The mask is
/// made additive f32, and kept broadcast where the kernel can read it so;
/// a rotary embedding of the query or the keys computed inline is the
/// kernel's to apply.
LogicalResult lowerAttentionKernel(AttentionOp op, CPUEntry &e) {
  auto qt = op.getQuery().getType();
  ArrayRef<int64_t> qs = qt.getShape();
  int64_t rank = qs.size();
  int64_t sq = qs[rank - 2], d = qs.back();
  int64_t sk = op.getKey().getType().getShape()[rank - 2];
  int64_t dv = op.getValue().getType().getShape().back();
  SmallVector<int64_t> batch(qs.drop_back(2));
  while (batch.size() < 2)
    batch.insert(batch.begin(), 1);
  SmallVector<int64_t> strides;
  SmallVector<KernelArg> args;
  // A query or keys rotated here are read as they were before the rotation.
  RotaryOp rotatedQuery = rotatedInAttention(op.getQuery()),
           rotatedKeys = rotatedInAttention(op.getKey());
  Value query = rotatedQuery ? rotatedQuery.getInput() : op.getQuery(),
        key = rotatedKeys ? rotatedKeys.getInput() : op.getKey();
  // A few queries read keys kept as kᵀ (a decoder's key cache) in place;
  // rotated, the kernel's blocks rotate them as they load rows.
  const bool fewQueries = sq <= TFM_ATTENTION_FEW_QUERIES;
  int64_t flags = op.getCausal() ? TFM_ATTENTION_CAUSAL : 0;
  for (Value operand : {query, key, Value(op.getValue())}) {
    StridedView view = e.viewOf(operand);
    size_t r = view.shape.size();
    if (operand == key && fewQueries && !rotatedKeys &&
        view.strides[r - 2] == 1 && view.strides[r - 1] != 1) {
      SmallVector<int64_t> lead(view.strides.begin(), view.strides.end() - 2);
      while (lead.size() < 2)
        lead.insert(lead.begin(), 0);
      llvm::append_range(strides, lead);
      strides.push_back(view.strides[r - 1]);
      flags |= TFM_ATTENTION_KEYS_TRANSPOSED;
    } else if (!attentionStrides(view, strides)) {
      Value dense = e.denseOf(operand);
      auto shape = cast<MemRefType>(dense.getType()).getShape();
      view = {dense, 0, SmallVector<int64_t>(shape),
              rowMajorStrides(shape)};
      attentionStrides(view, strides);
    }
    args.push_back(KernelArg(view.base, view.offset));
  }
  Value maskBuf;
  if (Value mask = op.getMask()) {
    flags |= TFM_ATTENTION_HAS_MASK;
    auto mt = cast<RankedTensorType>(mask.getType());
    // The mask's dims against [batch..., Sq, Sk], padded on the left.
    SmallVector<int64_t> ms(rank - mt.getRank(), 1);
    llvm::append_range(ms, mt.getShape());
    SmallVector<int64_t> full(qs.drop_back(2));
    full.push_back(sq);
    full.push_back(sk);
    bool fits = ms.back() == sk;
    for (int64_t i = 0; i + 1 < rank; ++i)
      fits &= ms[i] == 1 || ms[i] == full[i];
    SmallVector<int64_t> shape = fits ? ms : full;
    maskBuf = additiveMask(e, e.denseOf(mask), attentionMaskKind(op));
    if (!fits) {
      // An unusual broadcast (over keys): the full mask.
      Value wide = e.temporary(MemRefType::get(full, e.b.getF32Type()));
      e.copy(maskBuf, wide);
      maskBuf = wide;
    }
    // Which of [B1, B2, Sq] the mask has, after padding to two batch dims.
    SmallVector<int64_t> padded(shape.begin(), shape.end() - 2);
    while (padded.size() < 2)
      padded.insert(padded.begin(), 1);
    if (padded[0] != 1)
      flags |= TFM_ATTENTION_MASK_B1;
    if (padded[1] != 1)
      flags |= TFM_ATTENTION_MASK_B2;
    if (shape[rank - 2] != 1)
      flags |= TFM_ATTENTION_MASK_Q;
  }
  args.push_back(maskBuf ? KernelArg(maskBuf) : KernelArg());
  StridedView out = e.destinationView(op.getResult());
  Value dense;
  if (!attentionStrides(out, strides)) {
    // Written densely, then moved where the plan wants it.
    auto shape = op.getType().getShape();
    dense = e.temporary(MemRefType::get(shape, e.b.getF32Type()));
    StridedView d{dense, 0, SmallVector<int64_t>(shape), rowMajorStrides(shape)};
    attentionStrides(d, strides);
    args.push_back(KernelArg(dense));
  } else {
    args.push_back(KernelArg(out.base, out.offset));
  }
  // The kernel takes one pair of tables (rotatesInAttentionKernel).
  if (RotaryOp rotary = rotatedQuery ? rotatedQuery : rotatedKeys) {
    flags |= (rotatedQuery ? TFM_ATTENTION_ROTARY_Q : 0) |
             (rotatedKeys ? TFM_ATTENTION_ROTARY_K : 0) |
             (rotary.getInterleaved() ? TFM_ATTENTION_ROTARY_INTERLEAVED : 0);
    SmallVector<int64_t, 4> table = attentionTableDims(rotary);
    flags |= (table[0] != 1 ? TFM_ATTENTION_ROTARY_B1 : 0) |
             (table[1] != 1 ? TFM_ATTENTION_ROTARY_B2 : 0) |
             (table[2] != 1 ? TFM_ATTENTION_ROTARY_POS : 0);
    args.push_back(KernelArg(e.denseOf(rotary.getCos())));
    args.push_back(KernelArg(e.denseOf(rotary.getSin())));
  }
  int64_t params[TFM_ATTENTION_NUM_PARAMS] = {};
  params[TFM_ATTENTION_B1] = batch[0];
  params[TFM_ATTENTION_B2] = batch[1];
  params[TFM_ATTENTION_SQ] = sq;
  params[TFM_ATTENTION_SK] = sk;
  params[TFM_ATTENTION_D] = d;
  params[TFM_ATTENTION_DV] = dv;
  params[TFM_ATTENTION_FLAGS] = flags;
  if (int64_t group = op.getKVGroup(); group != 1) {
    params[TFM_ATTENTION_FLAGS] |= TFM_ATTENTION_GROUPED;
    params[TFM_ATTENTION_KV_GROUP] = group;
  }
  e.callKernel(TFM_KERNEL_ATTENTION, params, {attentionScale(op)}, args,
               strides);
  if (dense)
    e.copyView({dense, 0, SmallVector<int64_t>(op.getType().getShape()),
                rowMajorStrides(op.getType().getShape())},
               out, e.b.getF32Type());
  return success();
}

/// Unfused attention: scores, masked softmax and the weighted sum, through
/// the same kernels as the fused graph, with the scores in a temporary.
LogicalResult lowerAttention(AttentionOp op, CPUEntry &e) {
  if (usesAttentionKernel(op))
    return lowerAttentionKernel(op, e);
  auto qt = op.getQuery().getType();
  auto vt = op.getValue().getType();
  if (!isF32(qt))
    return op.emitError("the CPU backend computes attention in f32 only");
  if (op.getKVGroup() != 1)
    return op.emitError("the CPU backend computes a grouped-query attention "
                        "on its ATTENTION kernel only, which needs non-empty "
                        "operands");
  ArrayRef<int64_t> qs = qt.getShape();
  int64_t sq = qs[qs.size() - 2], d = qs.back();
  int64_t sk = op.getKey().getType().getShape()[qs.size() - 2];
  int64_t dv = vt.getShape().back(), batch = product(qs.drop_back(2));
  SmallVector<int64_t> scoreShape(qs.drop_back(2));
  scoreShape.push_back(sq);
  scoreShape.push_back(sk);
  if (product(scoreShape) == 0 || d == 0 || dv == 0)
    return op.emitError("the CPU backend needs non-empty attention operands");
  Value scores = e.temporary(MemRefType::get(scoreShape, e.b.getF32Type()));
  // BATCH_MATMUL takes two batch dimensions at any strides: the operands are
  // read where the plan keeps them (a key cache in kᵀ's layout, read as its
  // transpose, would otherwise be copied whole at every step).
  const bool inPlace = qs.size() <= 4;
  auto operand = [&](Value v, bool transposed) -> StridedView {
    ArrayRef<int64_t> shape = cast<ShapedType>(v.getType()).getShape();
    int64_t rows = shape[shape.size() - 2], cols = shape.back();
    StridedView view =
        inPlace ? e.viewOf(v)
                : StridedView{e.denseOf(v), 0, {batch, rows, cols},
                              {rows * cols, cols, 1}};
    if (transposed) {
      size_t r = view.shape.size();
      std::swap(view.shape[r - 1], view.shape[r - 2]);
      std::swap(view.strides[r - 1], view.strides[r - 2]);
    }
    return view;
  };
  StridedView scoreView{scores, 0, SmallVector<int64_t>(scoreShape),
                        rowMajorStrides(scoreShape)};
  if (!inPlace)
    scoreView = {scores, 0, {batch, sq, sk}, {sq * sk, sk, 1}};
  e.batchMatmul(operand(op.getQuery(), false), operand(op.getKey(), true),
                scoreView);
  double scale = attentionScale(op);
  MaskKind kind = attentionMaskKind(op);
  // The softmax works in place over the scores.
  if (failed(lowerCPUSoftmax(e, scores,
                             op.getMask() ? e.denseOf(op.getMask()) : Value(),
                             kind, scale, op.getCausal(), scores, op)))
    return failure();
  StridedView out = e.destinationView(op.getResult());
  if (!inPlace)
    out = {e.destination(op.getResult()), 0, {batch, sq, dv},
           {sq * dv, dv, 1}};
  e.batchMatmul(scoreView, operand(op.getValue(), false), out);
  return success();
}

/// A static input's constant scale and zero point as QUANTIZED_LINEAR takes
/// them (an int8 zero point 128 more, see TFM_QUANTIZED_LINEAR_INPUT_ZERO_POINT),
/// or nothing where they are not constants or the kernel would refuse them.
std::optional<std::pair<double, int64_t>> staticInputOf(QuantizedLinearOp op) {
  auto scale = op.getInputScale().getDefiningOp<arith::ConstantOp>();
  auto zero = op.getInputZeroPoint().getDefiningOp<arith::ConstantOp>();
  if (!scale || !zero)
    return std::nullopt;
  auto s = dyn_cast<DenseFPElementsAttr>(scale.getValue());
  auto z = dyn_cast<DenseIntElementsAttr>(zero.getValue());
  if (!s || !z || !s.isSplat() || !z.isSplat())
    return std::nullopt;
  float sv = s.getSplatValue<APFloat>().convertToFloat();
  if (!(sv > 0.f) || !std::isfinite(sv))
    return std::nullopt;
  bool isUnsigned = z.getElementType().isUnsignedInteger();
  APInt zv = z.getSplatValue<APInt>();
  int64_t zp = isUnsigned ? int64_t(zv.getZExtValue()) : zv.getSExtValue() + 128;
  if (zp < 0 || zp > 255)
    return std::nullopt;
  return std::make_pair(double(sv), zp);
}

/// tfm.quantized_linear on QUANTIZED_LINEAR where the kernel holds it: f32
/// and constant weights with their scales (and zero points); the input
/// quantized dynamically, or statically by constants, with 8-bit weights
/// per tensor or per output feature, or kept in float (weight-only) with 4- or 8-bit weights per
/// tensor, feature, or block of a multiple of 16 columns. Elsewhere, and on
/// a CPU that declines the kernel (the dynamic one without VNNI), the
/// generated code.
LogicalResult lowerQuantizedLinear(QuantizedLinearOp op, BufferizedEntry &e) {
  auto xt = op.getInput().getType();
  Type wElem = e.declaredElementType(op.getWeight());
  auto isConstant = [](Value v) {
    return !v || v.getDefiningOp<arith::ConstantOp>();
  };
  int64_t k = xt.getShape().back(), n = op.getWeight().getType().getDimSize(0);
  int64_t m = product(xt.getShape().drop_back());
  unsigned bits = wElem.getIntOrFloatBitWidth();
  int64_t block = op.getBlockSize(),
          scaleRank = op.getWeightScale().getType().getRank();
  // A blocked input is rounded by the weight-only kernel itself.
  bool blockedInput =
      op.getInputQuantization() == InputQuantization::blocked;
  bool weightOnly =
      op.getInputQuantization() == InputQuantization::none || blockedInput;
  std::optional<std::pair<double, int64_t>> staticInput;
  if (op.getInputQuantization() == InputQuantization::static_)
    staticInput = staticInputOf(op);
  bool layoutFits =
      weightOnly ? (bits == 4 || bits == 8) &&
                       (block == 0 || block % 16 == 0 || block >= k)
                 : (op.getInputQuantization() == InputQuantization::dynamic ||
                    staticInput) &&
                       block == 0 && bits == 8 && scaleRank <= 1;
  bool fits = xt.getElementType().isF32() && layoutFits &&
              isConstant(op.getWeight()) && isConstant(op.getWeightScale()) &&
              isConstant(op.getWeightZeroPoint()) && m > 0 && n > 0 && k > 0;
  if (!fits)
    return lowerGenericQuantizedLinear(op, e);
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  Value wz = op.getWeightZeroPoint(), bias = op.getBias();
  int64_t flags =
      (wElem.isUnsignedInteger() ? TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS : 0) |
      (scaleRank >= 1 ? TFM_QUANTIZED_LINEAR_PER_ROW : 0) |
      (wz ? TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT : 0) |
      (weightOnly ? TFM_QUANTIZED_LINEAR_WEIGHT_ONLY : 0) |
      (bits == 4 ? TFM_QUANTIZED_LINEAR_FOUR_BIT : 0) |
      (blockedInput ? TFM_QUANTIZED_LINEAR_BLOCKED_INPUT : 0) |
      (staticInput ? TFM_QUANTIZED_LINEAR_STATIC_INPUT : 0);
  SmallVector<int64_t> params(TFM_QUANTIZED_LINEAR_NUM_PARAMS, 0);
  params[TFM_QUANTIZED_LINEAR_M] = m;
  params[TFM_QUANTIZED_LINEAR_K] = k;
  params[TFM_QUANTIZED_LINEAR_N] = n;
  params[TFM_QUANTIZED_LINEAR_HAS_BIAS] = bias != nullptr;
  params[TFM_QUANTIZED_LINEAR_ACTIVATION] = abiActivation(op.getActivation());
  params[TFM_QUANTIZED_LINEAR_FLAGS] = flags;
  params[TFM_QUANTIZED_LINEAR_BLOCK_SIZE] = scaleRank == 2 ? block : 0;
  SmallVector<double> fparams;
  if (staticInput) {
    params[TFM_QUANTIZED_LINEAR_INPUT_ZERO_POINT] = staticInput->second;
    fparams.push_back(staticInput->first);
  }
  // The operands are taken before the fallback's code, which the call
  // shares them with.
  KernelArg x(e.denseOf(op.getInput())), w(e.denseOf(op.getWeight())),
      ws(e.denseOf(op.getWeightScale())),
      z(wz ? KernelArg(e.denseOf(wz)) : KernelArg()),
      b(bias ? KernelArg(e.denseOf(bias)) : KernelArg());
  e.callKernel(TFM_KERNEL_QUANTIZED_LINEAR, params, fparams,
               {x, w, ws, z, b, KernelArg(out)}, {}, TFM_DTYPE_F32,
               [&] { (void)lowerGenericQuantizedLinear(op, e); });
  return success();
}

} // namespace

void mlir::tfm::populateCPUGemmLowerings(OpLoweringSet &set) {
  set.add<QuantizedLinearOp>(lowerQuantizedLinear);
  set.add<MatmulOp>(onCPU<MatmulOp>(lowerMatmul));
  set.add<LinearOp>([](LinearOp l, BufferizedEntry &e) {
    return lowerLinear(cast<CPUEntry>(e), l.getInput(), l.getWeight(),
                       l.getBias(), 0, l.getActivation(), l.getResult());
  });
  set.add<QKVProjectionOp>(onCPU<QKVProjectionOp>(lowerQKV));
  set.add<GatedLinearOp>([](GatedLinearOp op, BufferizedEntry &e) {
    lowerGatedLinearKernel(e, op, cast<CPUEntry>(e).linearKernelDtype(),
                           /*narrowOperands=*/false, /*withFallback=*/false);
    return success();
  });
  set.add<AttentionOp>(onCPU<AttentionOp>(lowerAttention));
}
