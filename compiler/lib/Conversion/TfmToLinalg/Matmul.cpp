//===- Matmul.cpp - Contractions as linalg --------------------------------===//
//
// The portable GEMMs: one linalg.generic with a reduction loop, broadcast
// batch dimensions read through constant map entries. Targets run their
// GEMMs through library kernels; these take what the kernels do not.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/IR/TypeInference.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::lowerGenericMatmul(BufferizedEntry &e, Value lhs, Value rhs,
                                   bool tl, bool tr, Value out) {
  MLIRContext *ctx = e.ctx;
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
  // A narrower multiply type rounds the operands once, into scratch copies
  // that the target's GEMM reads as they are; the products are exact in
  // `elem` and accumulate there. Constant operands (an inference model's
  // weights) are rounded at compile time instead of at every run, and
  // operands the caller rounded already are read as they are.
  Type mulType = e.gemmOperandType(elem);
  if (mulType != elem) {
    lhs = e.narrowed(lhs, mulType);
    rhs = e.narrowed(rhs, mulType);
  }
  // Integers (tfm.matmul_integer's shifted operands) wrap in `elem`.
  bool integer = isa<IntegerType>(elem);
  e.fill(out, integer ? Attribute(e.b.getIntegerAttr(elem, 0))
                      : Attribute(e.b.getFloatAttr(elem, 0.0)));
  SmallVector<utils::IteratorType> its(rank, utils::IteratorType::parallel);
  its.push_back(utils::IteratorType::reduction);
  e.generic({lhs, rhs},
            {operandMap(lShape, true, tl), operandMap(rShape, false, tr)}, out,
            AffineMap::get(rank + 1, 0, outExprs, ctx), its,
            [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
              Value x = a[0], y = a[1];
              if (integer)
                return ob.create<arith::AddIOp>(
                    l, a[2], ob.create<arith::MulIOp>(l, x, y));
              if (mulType != elem) {
                x = ob.create<arith::ExtFOp>(l, elem, x);
                y = ob.create<arith::ExtFOp>(l, elem, y);
              }
              return ob.create<arith::AddFOp>(
                  l, a[2], ob.create<arith::MulFOp>(l, x, y));
            });
}

void mlir::tfm::lowerGenericLinear(BufferizedEntry &e, Value x, Value w,
                                   Value bias, int64_t rowOffset,
                                   Activation act, Value out) {
  // x and w may hold the GEMM's narrower operand type already (rounded by
  // the caller for a library call); the bias and the output do not.
  auto xType = cast<MemRefType>(x.getType());
  auto outType = cast<MemRefType>(out.getType());
  Type elem = outType.getElementType();
  int64_t k = xType.getShape().back(), n = outType.getShape().back();
  int64_t m = product(xType.getShape().drop_back());
  // The rows of this part, read in place (a matmul reads any strides),
  // then bias and activation.
  auto wType = cast<MemRefType>(w.getType());
  if (rowOffset != 0 || wType.getDimSize(0) != n) {
    w = e.axisWindow(w, 0, rowOffset,
                     RankedTensorType::get({n, k}, wType.getElementType()));
    if (bias)
      bias = e.axisWindow(bias, 0, rowOffset, RankedTensorType::get({n}, elem));
  }
  Value x2 = e.reshape(x, MemRefType::get({m, k}, xType.getElementType()));
  Value out2 = e.reshape(out, MemRefType::get({m, n}, elem));
  lowerGenericMatmul(e, x2, w, false, true, out2);
  // Nothing to add or apply: no pass over the output for nothing.
  if (!bias && act == Activation::none)
    return;
  SmallVector<Value> ins{out2};
  if (bias)
    ins.push_back(bias);
  e.elementwise(ins, out2, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value y = bias ? ob.create<arith::AddFOp>(l, a[0], a[1]).getResult() : a[0];
    return applyActivation(ob, l, act, y);
  });
}

void mlir::tfm::lowerGatedProduct(BufferizedEntry &e, Value h, Activation act,
                                  Value out) {
  auto hType = cast<MemRefType>(h.getType());
  int64_t f = hType.getShape().back() / 2;
  int64_t rows = f ? hType.getNumElements() / (2 * f) : 0;
  if (rows == 0 || f == 0)
    return;
  Type elem = hType.getElementType();
  Value h2 = e.reshape(h, MemRefType::get({rows, 2 * f}, elem));
  Value out2 = e.reshape(out, MemRefType::get({rows, f}, elem));
  // The two halves as column windows of h, read in place.
  auto half = RankedTensorType::get({rows, f}, elem);
  Value gate = e.axisWindow(h2, 1, 0, half), up = e.axisWindow(h2, 1, f, half);
  e.elementwise({gate, up}, out2,
                [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                  return ob.create<arith::MulFOp>(
                      l, applyActivation(ob, l, act, a[0]), a[1]);
                });
}

Value mlir::tfm::gatedProjectionBuffer(BufferizedEntry &e, GatedLinearOp op) {
  SmallVector<int64_t> shape(op.getInput().getType().getShape());
  shape.back() = op.getWeight().getType().getDimSize(0);
  return e.temporary(MemRefType::get(shape, op.getType().getElementType()));
}

static double attentionScaleOf(Value query, std::optional<APFloat> scale) {
  int64_t d = cast<RankedTensorType>(query.getType()).getShape().back();
  return scale ? scale->convertToDouble()
               : 1.0 / std::sqrt(static_cast<double>(d));
}

static MaskKind maskKindOf(Value mask) {
  if (!mask)
    return MaskKind::none;
  return cast<ShapedType>(mask.getType()).getElementType().isInteger(1)
             ? MaskKind::boolean
             : MaskKind::additive;
}

double mlir::tfm::attentionScale(AttentionOp op) {
  return attentionScaleOf(op.getQuery(), op.getScale());
}
double mlir::tfm::attentionScale(AttentionGradOp op) {
  return attentionScaleOf(op.getQuery(), op.getScale());
}
MaskKind mlir::tfm::attentionMaskKind(AttentionOp op) {
  return maskKindOf(op.getMask());
}
MaskKind mlir::tfm::attentionMaskKind(AttentionGradOp op) {
  return maskKindOf(op.getMask());
}

/// `buffer` [.., H, S, D] viewed as [.., H/G, G, S, D]: a grouped-query
/// attention's operands then multiply as broadcast batches, the keys and
/// values (split with G = 1) read once per group, not repeated.
static Value splitHeads(BufferizedEntry &e, Value buffer, int64_t group) {
  auto type = cast<MemRefType>(buffer.getType());
  int64_t heads = type.getRank() - 3;
  SmallVector<int64_t> shape = splitHeadsShape(type.getShape(), group);
  SmallVector<ReassociationIndices> groups;
  for (int64_t i = 0; i < type.getRank(); ++i)
    groups.push_back(i < heads    ? ReassociationIndices{i}
                     : i == heads ? ReassociationIndices{i, i + 1}
                                  : ReassociationIndices{i + 1});
  return e.b.create<memref::ExpandShapeOp>(e.loc, shape, buffer, groups);
}

/// The probabilities of an attention (or of the one whose gradient `op`
/// is), masked_softmax(scale · q·kᵀ ⊕ mask), in the op's scratch memory.
template <typename AttentionLike>
static Value attentionProbabilities(BufferizedEntry &e, AttentionLike op,
                                    int64_t group = 1) {
  auto qt = op.getQuery().getType();
  ArrayRef<int64_t> qs = qt.getShape();
  SmallVector<int64_t> scoreShape(qs.drop_back());
  scoreShape.push_back(op.getKey().getType().getShape()[qs.size() - 2]);
  Value p = e.temporary(MemRefType::get(scoreShape, qt.getElementType()));
  if (group == 1)
    lowerGenericMatmul(e, e.bufferOf(op.getQuery()), e.bufferOf(op.getKey()),
                       false, true, p);
  else
    lowerGenericMatmul(e, splitHeads(e, e.bufferOf(op.getQuery()), group),
                       splitHeads(e, e.bufferOf(op.getKey()), 1), false, true,
                       splitHeads(e, p, group));
  lowerGenericMaskedSoftmax(
      e, p, op.getMask() ? e.bufferOf(op.getMask()) : Value(),
      attentionMaskKind(op), attentionScale(op), op.getCausal(), p);
  return p;
}

void mlir::tfm::populateMatmulLowerings(OpLoweringSet &set) {
  set.add<MatmulOp>([](MatmulOp op, BufferizedEntry &e) {
    Value out = e.destination(op.getResult());
    lowerGenericMatmul(e, e.bufferOf(op.getLhs()), e.bufferOf(op.getRhs()),
                       op.getTransposeLhs(), op.getTransposeRhs(), out);
    return success();
  });
  set.add<LinearOp>([](LinearOp op, BufferizedEntry &e) {
    Value out = e.destination(op.getResult());
    Value bias = op.getBias() ? e.denseOf(op.getBias()) : Value();
    lowerGenericLinear(e, e.denseOf(op.getInput()), e.denseOf(op.getWeight()),
                       bias, 0, op.getActivation(), out);
    return success();
  });
  set.add<GatedLinearOp>([](GatedLinearOp op, BufferizedEntry &e) {
    Value h = gatedProjectionBuffer(e, op);
    Value bias = op.getBias() ? e.denseOf(op.getBias()) : Value();
    lowerGenericLinear(e, e.denseOf(op.getInput()), e.denseOf(op.getWeight()),
                       bias, 0, Activation::none, h);
    lowerGatedProduct(e, h, op.getActivation(), e.destination(op.getResult()));
    return success();
  });
  set.add<AttentionOp>([](AttentionOp op, BufferizedEntry &e) {
    // The probabilities in scratch memory, and the weighted sum of the
    // values.
    int64_t group = op.getKVGroup();
    Value p = attentionProbabilities(e, op, group);
    Value out = e.stridedDestination(op.getResult());
    if (!out)
      return failure();
    if (group == 1)
      lowerGenericMatmul(e, p, e.bufferOf(op.getValue()), false, false, out);
    else
      lowerGenericMatmul(e, splitHeads(e, p, group),
                         splitHeads(e, e.bufferOf(op.getValue()), 1), false,
                         false, splitHeads(e, out, group));
    return success();
  });
  set.add<AttentionGradOp>([](AttentionGradOp op, BufferizedEntry &e) {
    // The decomposed backward pass: P and dP in scratch memory, dS over dP
    // in place, and the three products, written at the plan's strides (a
    // target that writes them strided plans so).
    Value dq = e.stridedDestination(op.getQueryGrad()),
          dk = e.stridedDestination(op.getKeyGrad()),
          dv = e.stridedDestination(op.getValueGrad());
    if (!dq || !dk || !dv)
      return failure();
    Value q = e.bufferOf(op.getQuery()), k = e.bufferOf(op.getKey()),
          v = e.bufferOf(op.getValue()), dout = e.bufferOf(op.getGrad());
    Value p = attentionProbabilities(e, op);
    auto scoreType = cast<MemRefType>(p.getType());
    Value ds = e.temporary(scoreType);
    lowerGenericMatmul(e, dout, v, false, true, ds);
    lowerGenericSoftmaxGrad(e, p, ds, scoreType.getRank() - 1,
                            attentionScale(op), ds);
    lowerGenericMatmul(e, ds, k, false, false, dq);
    lowerGenericMatmul(e, ds, q, true, false, dk);
    lowerGenericMatmul(e, p, dout, true, false, dv);
    return success();
  });
  set.add<QKVProjectionOp>([](QKVProjectionOp op, BufferizedEntry &e) {
    // One GEMM per part over consecutive weight rows.
    int64_t row = 0;
    for (auto [r, size] : llvm::zip(op.getResults(), op.getSizes())) {
      Value out = e.destination(r);
      Value bias = op.getBias() ? e.denseOf(op.getBias()) : Value();
      lowerGenericLinear(e, e.denseOf(op.getInput()), e.denseOf(op.getWeight()),
                         bias, row, Activation::none, out);
      row += size;
    }
    return success();
  });
}

void mlir::tfm::populateTfmToLinalgLowerings(OpLoweringSet &set) {
  populateElementwiseLowerings(set);
  populateReductionLowerings(set);
  populateDataMovementLowerings(set);
  populateLossLowerings(set);
  populateTrainingLowerings(set);
  populateGenerationLowerings(set);
  populateMatmulLowerings(set);
  populateConvolutionLowerings(set);
  populateNormalizationLowerings(set);
  populateRotaryLowerings(set);
  populateOptimizerLowerings(set);
  populateQuantizationLowerings(set);
}
