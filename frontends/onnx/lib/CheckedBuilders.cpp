//===- CheckedBuilders.cpp - Op builders that check shapes first ----------===//

#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

FailureOr<Value> NodeContext::reshape(Value v, ArrayRef<int64_t> shape) const {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  if (!plausibleShape(shape))
    return fail("cannot reshape " + llvm::formatv("{0}", type).str() +
                " to a shape of more than 2^40 elements");
  auto target = RankedTensorType::get(shape, type.getElementType());
  if (target.getNumElements() != type.getNumElements())
    return fail("cannot reshape " + llvm::formatv("{0}", type).str() +
                " to " + llvm::formatv("{0}", target).str() +
                ": the element counts differ");
  return Value(builder.create<ReshapeOp>(loc, target, v));
}

FailureOr<Value> NodeContext::compare(ComparePredicate p, Value lhs,
                                      Value rhs) const {
  auto t = inferCompareType(diag(CompareOp::getOperationName()),
                            lhs.getType(), rhs.getType());
  if (failed(t))
    return failure();
  return Value(builder.create<CompareOp>(loc, *t, p, lhs, rhs));
}

FailureOr<Value> NodeContext::select(Value c, Value t, Value f) const {
  auto type = inferSelectType(diag(SelectOp::getOperationName()),
                              c.getType(), t.getType(), f.getType());
  if (failed(type))
    return failure();
  return Value(builder.create<SelectOp>(loc, *type, c, t, f));
}

FailureOr<Value> NodeContext::matmul(Value a, Value b, bool ta,
                                     bool tb) const {
  // A weight the importer transposed is checked as the model gives it, so
  // that a mismatch names the model's shapes.
  Type given = b.getType();
  bool givenTransposed = tb;
  if (tb && isTransposedWeight(b)) {
    auto bt = cast<RankedTensorType>(given);
    given = RankedTensorType::get({bt.getDimSize(1), bt.getDimSize(0)},
                                  bt.getElementType());
    givenTransposed = false;
  }
  auto t = inferMatmulType(diag(MatmulOp::getOperationName()), a.getType(),
                           given, ta, givenTransposed);
  if (failed(t))
    return failure();
  return Value(builder.create<MatmulOp>(loc, *t, a, b, ta, tb));
}

FailureOr<Value> NodeContext::linear(Value x, Value w, Value bias) const {
  auto t = inferLinearType(diag(LinearOp::getOperationName()), x.getType(),
                           w.getType(), bias ? bias.getType() : Type());
  if (failed(t))
    return failure();
  return Value(
      builder.create<LinearOp>(loc, *t, x, w, bias, Activation::none));
}

FailureOr<Value> NodeContext::transpose(Value x,
                                        ArrayRef<int64_t> perm) const {
  auto t = inferTransposeType(diag(TransposeOp::getOperationName()),
                              x.getType(), perm);
  if (failed(t))
    return failure();
  return Value(builder.create<TransposeOp>(loc, *t, x, perm));
}

FailureOr<Value> NodeContext::concat(ValueRange xs, int64_t axis) const {
  auto t = inferConcatType(diag(ConcatOp::getOperationName()), xs.getTypes(),
                           axis);
  if (failed(t))
    return failure();
  return Value(builder.create<ConcatOp>(loc, *t, xs, axis));
}

FailureOr<SmallVector<Value>>
NodeContext::split(Value x, int64_t axis, ArrayRef<int64_t> sizes) const {
  SmallVector<Type> types;
  if (failed(inferSplitTypes(diag(SplitOp::getOperationName()), x.getType(),
                             axis, sizes, types)))
    return failure();
  auto op = builder.create<SplitOp>(loc, types, x, axis, sizes);
  return SmallVector<Value>(op.getResults());
}

FailureOr<Value> NodeContext::slice(Value x, ArrayRef<int64_t> starts,
                                    ArrayRef<int64_t> sizes,
                                    ArrayRef<int64_t> steps) const {
  auto t = inferSliceType(diag(SliceOp::getOperationName()), x.getType(),
                          starts, sizes, steps);
  if (failed(t))
    return failure();
  return Value(builder.create<SliceOp>(loc, *t, x, starts, sizes, steps));
}

FailureOr<Value> NodeContext::gather(Value x, Value indices,
                                     int64_t axis) const {
  auto t = inferGatherType(diag(GatherOp::getOperationName()), x.getType(),
                           indices.getType(), axis);
  if (failed(t))
    return failure();
  return Value(builder.create<GatherOp>(loc, *t, x, indices, axis));
}

FailureOr<Value> NodeContext::reduce(ReduceKind kind, Value x,
                                     ArrayRef<int64_t> axes,
                                     bool keepdims) const {
  auto t = inferReduceType(diag(ReduceOp::getOperationName()), x.getType(),
                           axes, keepdims, kind == ReduceKind::mean);
  if (failed(t))
    return failure();
  return Value(builder.create<ReduceOp>(loc, *t, kind, x, axes, keepdims));
}

FailureOr<Value> NodeContext::layerNorm(Value x, Value scale, Value bias,
                                        int64_t axis, double epsilon) const {
  auto t = inferLayerNormType(diag(LayerNormOp::getOperationName()),
                              x.getType(), scale.getType(),
                              bias ? bias.getType() : Type(), axis, epsilon);
  if (failed(t))
    return failure();
  return Value(builder.create<LayerNormOp>(
      loc, *t, x, scale, bias, builder.getI64IntegerAttr(axis),
      builder.getF64FloatAttr(epsilon), UnitAttr()));
}

FailureOr<Value> NodeContext::softmax(Value x, int64_t axis) const {
  if (failed(requireFloat(x)))
    return failure();
  auto type = cast<RankedTensorType>(x.getType());
  if (failed(normalizeAxis(diag(SoftmaxOp::getOperationName()), axis,
                           type.getRank(), "axis")))
    return failure();
  return Value(builder.create<SoftmaxOp>(loc, type, x, axis));
}

FailureOr<Value> NodeContext::castTo(Value x, Type elementType) const {
  auto type = llvm::cast<RankedTensorType>(x.getType());
  auto target = RankedTensorType::get(type.getShape(), elementType);
  if (target == type)
    return x;
  return Value(builder.create<CastOp>(loc, target, x));
}

FailureOr<Value> NodeContext::broadcast(Value x,
                                        ArrayRef<int64_t> shape) const {
  auto type = llvm::cast<RankedTensorType>(x.getType());
  if (!broadcastsTo(type.getShape(), shape))
    return fail(llvm::formatv("cannot broadcast {0} to {1}", type,
                              RankedTensorType::get(shape,
                                                    type.getElementType()))
                    .str());
  auto target = RankedTensorType::get(shape, type.getElementType());
  if (target == type)
    return x;
  return Value(builder.create<BroadcastOp>(loc, target, x));
}

LogicalResult NodeContext::requireFloat(Value x) const {
  Type elt = getElementTypeOrSelf(x.getType());
  if (isa<FloatType>(elt))
    return success();
  return fail(node.op_type() + " on element type " +
              llvm::formatv("{0}", elt).str() +
              " is not supported (it takes f32, f16, bf16 or f64)");
}

FailureOr<Value> NodeContext::padAlong(Value x, int64_t axis, int64_t before,
                                       int64_t after, Value value) const {
  SmallVector<Value> parts;
  for (int64_t size : {before, int64_t(-1), after}) {
    Value block = x;
    if (size == 0)
      continue;
    if (size > 0 && !take(fillAlong(x, axis, size, value), block))
      return failure();
    parts.push_back(block);
  }
  if (parts.size() == 1)
    return x;
  return concat(parts, axis);
}

FailureOr<Value> NodeContext::fillAlong(Value x, int64_t axis, int64_t size,
                                        Value value) const {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = size;
  SmallVector<int64_t> ones(type.getRank(), 1);
  auto v = reshape(value, ones);
  if (failed(v))
    return failure();
  return broadcast(*v, shape);
}
