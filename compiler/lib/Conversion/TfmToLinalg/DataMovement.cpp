//===- DataMovement.cpp - Gathers, windows, layouts as linalg -------------===//
//
// Reshapes and transposes the memory plan keeps as views move no data and
// reach no lowering here. The rest are copies, with the read position
// computed in the body where an indexing map cannot express it (gathers,
// negative steps).
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/IR/InputValues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::tfm;

LogicalResult mlir::tfm::lowerReshape(BufferizedEntry &e, Value input,
                                      Value result) {
  // The plan keeps a reshape a view where the strides allow; here it is a
  // copy into the result's own buffer.
  StridedView in = e.viewOf(input);
  auto inType = cast<RankedTensorType>(input.getType());
  Value dst = e.destination(result);
  if (inType.getNumElements() == 0)
    return success();
  if (in.isDense()) {
    // A plain copy: a loop the vectorizer handles, cheaper than a kernel
    // call for the small tensors this meets (a returned reshape).
    e.copy(e.denseOf(input), e.reshape(dst, memrefOf(inType)));
    return success();
  }
  e.copyView(in,
             {e.reshape(dst, memrefOf(inType)), 0, in.shape,
              rowMajorStrides(in.shape)},
             inType.getElementType());
  return success();
}

namespace {

/// The position an index `raw` (any integer type) names along a dimension
/// of `size`: negative ones count from the end, and the result is clamped
/// into the dimension, so that an index the run-time check rejects still
/// reads or writes inside the buffer.
Value positionOf(OpBuilder &ob, Location l, Value raw, int64_t size) {
  Value i = ob.create<arith::IndexCastOp>(l, ob.getIndexType(), raw);
  Value n = ob.create<arith::ConstantIndexOp>(l, size);
  Value zero = ob.create<arith::ConstantIndexOp>(l, 0);
  Value neg = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, i, zero);
  i = ob.create<arith::SelectOp>(l, neg, ob.create<arith::AddIOp>(l, i, n), i);
  i = ob.create<arith::MaxSIOp>(l, i, zero);
  return ob.create<arith::MinSIOp>(
      l, i, ob.create<arith::ConstantIndexOp>(l, std::max<int64_t>(size - 1, 0)));
}

/// result[a..., i..., b...] = input[a..., indices[i...], b...], with
/// negative indices counted from the end. The run stops at an index outside
/// the range the op accepts (indexRangeOf); the read position is clamped all
/// the same, so no index can read outside the buffer.
LogicalResult lowerGatherLike(BufferizedEntry &e, Operation *op, Value input,
                              OpOperand &indices, int64_t axis, Value result) {
  auto [lower, upper] = *indexRangeOf(indices);
  if (failed(e.checkIndices(op, indices.get(), lower, upper)))
    return failure();
  Value in = e.bufferOf(input), idx = e.bufferOf(indices.get());
  Value out = e.destination(result);
  auto inType = cast<MemRefType>(in.getType());
  auto idxType = cast<MemRefType>(idx.getType());
  int64_t outRank = cast<MemRefType>(out.getType()).getRank();
  int64_t idxRank = idxType.getRank(), dimSize = inType.getDimSize(axis);
  SmallVector<utils::IteratorType> its(outRank, utils::IteratorType::parallel);
  e.generic({}, {}, out, AffineMap::getMultiDimIdentityMap(outRank, e.ctx), its,
            [&](OpBuilder &ob, Location l, ValueRange) -> Value {
              SmallVector<Value> pos;
              for (int64_t i = 0; i < idxRank; ++i)
                pos.push_back(ob.create<linalg::IndexOp>(l, axis + i));
              Value raw = ob.create<memref::LoadOp>(l, idx, pos);
              Value i = positionOf(ob, l, raw, dimSize);
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

/// `x` combined with `y` by a scatter's reduction, in the element type of
/// both.
Value scatterCombine(OpBuilder &ob, Location l, ScatterReduction r, Value x,
                     Value y, bool isUnsigned) {
  bool f = isa<FloatType>(x.getType());
  switch (r) {
  case ScatterReduction::none:
    return y;
  case ScatterReduction::add:
    return f ? ob.create<arith::AddFOp>(l, x, y).getResult()
             : ob.create<arith::AddIOp>(l, x, y).getResult();
  case ScatterReduction::mul:
    return f ? ob.create<arith::MulFOp>(l, x, y).getResult()
             : ob.create<arith::MulIOp>(l, x, y).getResult();
  case ScatterReduction::max:
    if (f)
      return ob.create<arith::MaximumFOp>(l, x, y);
    return isUnsigned ? ob.create<arith::MaxUIOp>(l, x, y).getResult()
                      : ob.create<arith::MaxSIOp>(l, x, y).getResult();
  case ScatterReduction::min:
    if (f)
      return ob.create<arith::MinimumFOp>(l, x, y);
    return isUnsigned ? ob.create<arith::MinUIOp>(l, x, y).getResult()
                      : ob.create<arith::MinSIOp>(l, x, y).getResult();
  }
  return y;
}

/// The input copied to the result, then each update slice written (or
/// combined) at its run-time position. Positions go in order, so repeated
/// ones end as in the interpreter; the elements of a slice are independent
/// and form the parallel loop, which a GPU maps to threads.
LogicalResult lowerScatterND(ScatterNDOp op, BufferizedEntry &e) {
  RankedTensorType inType = op.getInput().getType();
  RankedTensorType idxType = op.getIndices().getType();
  int64_t k = idxType.getShape().back();
  ArrayRef<int64_t> shape = inType.getShape();
  for (int64_t j = 0; j < k; ++j)
    if (failed(e.checkIndexColumn(op, op.getIndices(), j, -shape[j], shape[j])))
      return failure();
  Value out = e.destination(op.getResult());
  Value in = e.bufferOf(op.getInput());
  int64_t total = inType.getNumElements();
  int64_t count = idxType.getNumElements() / k;
  int64_t inner = product(shape.drop_front(k));
  if (total == 0)
    return success();
  if (in != out)
    e.copy(in, out);
  if (count == 0 || inner == 0)
    return success();
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Type elem = cast<MemRefType>(out.getType()).getElementType();
  Value flatOut = e.reshape(out, MemRefType::get({total}, elem));
  Value idx = e.reshape(e.denseOf(op.getIndices()),
                        MemRefType::get({count, k}, idxType.getElementType()));
  Value upd = e.reshape(e.denseOf(op.getUpdates()),
                        MemRefType::get({count, inner}, elem));
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  bool isUnsigned = e.isUnsigned(op.getInput());
  ScatterReduction reduction = op.getReduction();
  auto cidx = [&](OpBuilder &ob, Location l, int64_t v) -> Value {
    return ob.create<arith::ConstantIndexOp>(l, v);
  };
  Value zero = cidx(b, loc, 0), one = cidx(b, loc, 1);
  b.create<scf::ParallelOp>(
      loc, ValueRange{zero}, ValueRange{cidx(b, loc, inner)}, ValueRange{one},
      [&](OpBuilder &ob, Location l, ValueRange ivs) {
        Value el = ivs[0];
        ob.create<scf::ForOp>(
            l, zero, cidx(ob, l, count), one, ValueRange{},
            [&](OpBuilder &fb, Location fl, Value p, ValueRange) {
              Value dst = el;
              for (int64_t j = 0; j < k; ++j) {
                Value raw = fb.create<memref::LoadOp>(
                    fl, idx, ValueRange{p, cidx(fb, fl, j)});
                Value i = positionOf(fb, fl, raw, shape[j]);
                dst = fb.create<arith::AddIOp>(
                    fl, dst,
                    fb.create<arith::MulIOp>(fl, i, cidx(fb, fl, strides[j])));
              }
              Value v = fb.create<memref::LoadOp>(fl, upd, ValueRange{p, el});
              if (reduction != ScatterReduction::none)
                v = scatterCombine(
                    fb, fl, reduction,
                    fb.create<memref::LoadOp>(fl, flatOut, ValueRange{dst}), v,
                    isUnsigned);
              fb.create<memref::StoreOp>(fl, v, flatOut, ValueRange{dst});
              fb.create<scf::YieldOp>(fl);
            });
      });
  return success();
}

/// Whether element (a, ai) comes before (b, bi) in top_k's order: larger
/// first (smaller with `smallest`), NaN above every number, and equal
/// elements by index.
Value topKBefore(OpBuilder &ob, Location l, Value a, Value ai, Value b,
                 Value bi, bool smallest, bool isUnsigned) {
  if (smallest)
    std::swap(a, b);
  Value greater, equal;
  if (isa<FloatType>(a.getType())) {
    auto cmp = [&](arith::CmpFPredicate p, Value x, Value y) {
      return ob.create<arith::CmpFOp>(l, p, x, y);
    };
    Value aNaN = cmp(arith::CmpFPredicate::UNO, a, a);
    Value bNaN = cmp(arith::CmpFPredicate::UNO, b, b);
    greater = ob.create<arith::OrIOp>(
        l, cmp(arith::CmpFPredicate::OGT, a, b),
        ob.create<arith::AndIOp>(
            l, aNaN, cmp(arith::CmpFPredicate::ORD, b, b)));
    equal = ob.create<arith::OrIOp>(l, cmp(arith::CmpFPredicate::OEQ, a, b),
                                    ob.create<arith::AndIOp>(l, aNaN, bNaN));
  } else {
    greater = ob.create<arith::CmpIOp>(
        l, isUnsigned ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt,
        a, b);
    equal = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, a, b);
  }
  // Ties go to the lower index whichever way the values are ordered.
  Value lowerIndex =
      ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, ai, bi);
  return ob.create<arith::OrIOp>(
      l, greater, ob.create<arith::AndIOp>(l, equal, lowerIndex));
}

/// top_k as k selection passes over each line: pass t takes the first
/// element in the order that comes after pass t-1's pick, so no element is
/// taken twice and no scratch memory is needed. O(k·n) per line, which suits
/// the small k of decoding; lines are independent and form the parallel
/// loop.
LogicalResult lowerTopK(TopKOp op, BufferizedEntry &e) {
  RankedTensorType inType = op.getInput().getType();
  int64_t rank = inType.getRank();
  int64_t axis = op.getAxis(); // I64Attr reads back unsigned
  if (axis < 0)
    axis += rank;
  ArrayRef<int64_t> shape = inType.getShape();
  int64_t outer = product(shape.take_front(axis));
  int64_t inner = product(shape.drop_front(axis + 1));
  int64_t n = shape[axis], k = op.getK();
  Value values = e.destination(op.getValues());
  Value indices = e.destination(op.getIndices());
  if (k == 0 || outer == 0 || inner == 0)
    return success();
  OpBuilder &b = e.b;
  Location loc = e.loc;
  Type elem = cast<MemRefType>(values.getType()).getElementType();
  Type i64 = b.getI64Type();
  Value in = e.reshape(e.denseOf(op.getInput()),
                       MemRefType::get({outer, n, inner}, elem));
  Value outV = e.reshape(values, MemRefType::get({outer, k, inner}, elem));
  Value outI = e.reshape(indices, MemRefType::get({outer, k, inner}, i64));
  bool smallest = op.getSmallest();
  bool isUnsigned = e.isUnsigned(op.getInput());
  auto cidx = [](OpBuilder &ob, Location l, int64_t v) -> Value {
    return ob.create<arith::ConstantIndexOp>(l, v);
  };
  Value zero = cidx(b, loc, 0), one = cidx(b, loc, 1);
  b.create<scf::ParallelOp>(
      loc, ValueRange{zero, zero},
      ValueRange{cidx(b, loc, outer), cidx(b, loc, inner)},
      ValueRange{one, one}, [&](OpBuilder &ob, Location l, ValueRange ivs) {
        Value o = ivs[0], el = ivs[1];
        // The previous pick (value, index); none before pass 0.
        Value first = ob.create<memref::LoadOp>(l, in, ValueRange{o, zero, el});
        Value noIndex = ob.create<arith::ConstantIntOp>(l, -1, 64);
        ob.create<scf::ForOp>(
            l, zero, cidx(ob, l, k), one, ValueRange{first, noIndex},
            [&](OpBuilder &tb, Location tl, Value t, ValueRange prev) {
              Value f = tb.create<arith::ConstantIntOp>(tl, 0, 1);
              auto scan = tb.create<scf::ForOp>(
                  tl, zero, cidx(tb, tl, n), one,
                  ValueRange{prev[0], noIndex, f},
                  [&](OpBuilder &sb, Location sl, Value i, ValueRange best) {
                    Value v = sb.create<memref::LoadOp>(sl, in,
                                                        ValueRange{o, i, el});
                    Value vi = sb.create<arith::IndexCastOp>(sl, i64, i);
                    Value started = sb.create<arith::CmpIOp>(
                        sl, arith::CmpIPredicate::sge, prev[1],
                        sb.create<arith::ConstantIntOp>(sl, 0, 64));
                    Value afterPrev = topKBefore(sb, sl, prev[0], prev[1], v,
                                                 vi, smallest, isUnsigned);
                    Value eligible = sb.create<arith::OrIOp>(
                        sl,
                        sb.create<arith::XOrIOp>(
                            sl, started,
                            sb.create<arith::ConstantIntOp>(sl, 1, 1)),
                        afterPrev);
                    Value better = sb.create<arith::OrIOp>(
                        sl,
                        sb.create<arith::XOrIOp>(
                            sl, best[2],
                            sb.create<arith::ConstantIntOp>(sl, 1, 1)),
                        topKBefore(sb, sl, v, vi, best[0], best[1], smallest,
                                   isUnsigned));
                    Value take = sb.create<arith::AndIOp>(sl, eligible, better);
                    sb.create<scf::YieldOp>(
                        sl, ValueRange{
                                sb.create<arith::SelectOp>(sl, take, v, best[0]),
                                sb.create<arith::SelectOp>(sl, take, vi, best[1]),
                                sb.create<arith::OrIOp>(sl, best[2], take)});
                  });
              Value bv = scan.getResult(0), bi = scan.getResult(1);
              tb.create<memref::StoreOp>(tl, bv, outV, ValueRange{o, t, el});
              tb.create<memref::StoreOp>(tl, bi, outI, ValueRange{o, t, el});
              tb.create<scf::YieldOp>(tl, ValueRange{bv, bi});
            });
      });
  return success();
}

LogicalResult lowerSlice(SliceOp op, BufferizedEntry &e) {
  Value in = e.bufferOf(op.getInput());
  Value out = e.destination(op.getResult());
  int64_t rank = op.getType().getRank();
  SmallVector<utils::IteratorType> its(rank, utils::IteratorType::parallel);
  // The read position is computed in the body: linalg wants operand maps
  // it can invert to loop bounds, and a negative step is not one of them.
  e.generic({}, {}, out, AffineMap::getMultiDimIdentityMap(rank, e.ctx), its,
            [&](OpBuilder &ob, Location l, ValueRange) -> Value {
              SmallVector<Value> src;
              for (int64_t d = 0; d < rank; ++d) {
                Value iv = ob.create<linalg::IndexOp>(l, d);
                Value step =
                    ob.create<arith::ConstantIndexOp>(l, op.getSteps()[d]);
                Value start =
                    ob.create<arith::ConstantIndexOp>(l, op.getStarts()[d]);
                src.push_back(ob.create<arith::AddIOp>(
                    l, ob.create<arith::MulIOp>(l, iv, step), start));
              }
              return ob.create<memref::LoadOp>(l, in, src);
            });
  return success();
}

LogicalResult lowerConcat(ConcatOp op, BufferizedEntry &e) {
  Value out = e.destination(op.getResult());
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += op.getType().getRank();
  int64_t at = 0;
  for (Value v : op.getInputs()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getNumElements() > 0)
      e.copy(e.bufferOf(v), e.axisWindow(out, axis, at, t));
    at += t.getDimSize(axis);
  }
  return success();
}

LogicalResult lowerSplit(SplitOp op, BufferizedEntry &e) {
  Value in = e.bufferOf(op.getInput());
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += op.getInput().getType().getRank();
  int64_t at = 0;
  for (Value r : op.getResults()) {
    auto t = cast<RankedTensorType>(r.getType());
    Value out = e.destination(r);
    if (t.getNumElements() > 0)
      e.copy(e.axisWindow(in, axis, at, t), out);
    at += t.getDimSize(axis);
  }
  return success();
}

/// The plan keeps a transpose a view where the target reads it in place;
/// here it is a copy, in the target's fastest way, into its own buffer.
LogicalResult lowerTranspose(TransposeOp t, BufferizedEntry &e) {
  StridedView in = e.viewOf(t.getInput());
  StridedView permuted{in.base, in.offset, {}, {}};
  for (int64_t p : t.getPermutation()) {
    permuted.shape.push_back(in.shape[p]);
    permuted.strides.push_back(in.strides[p]);
  }
  Value out = e.destination(t.getResult());
  auto shape = t.getType().getShape();
  if (t.getType().getNumElements() > 0)
    e.copyView(permuted,
               {out, 0, SmallVector<int64_t>(shape), rowMajorStrides(shape)},
               t.getType().getElementType());
  return success();
}

LogicalResult lowerPositionalEncoding(PositionalEncodingOp op,
                                      BufferizedEntry &e) {
  Value out = e.destination(op.getResult());
  auto type = op.getType();
  int64_t dModel = type.getDimSize(1);
  Type elem = type.getElementType();
  SmallVector<utils::IteratorType> its(2, utils::IteratorType::parallel);
  e.generic({}, {}, out, AffineMap::getMultiDimIdentityMap(2, e.ctx), its,
            [&](OpBuilder &ob, Location l, ValueRange) -> Value {
              // Computed in f64 like the reference, then rounded once.
              Type f64 = ob.getF64Type();
              auto c = [&](double v) {
                return BufferizedEntry::constantScalar(ob, l, f64, v);
              };
              auto toF64 = [&](Value idx) {
                Value i = ob.create<arith::IndexCastOp>(l, ob.getI64Type(), idx);
                return ob.create<arith::SIToFPOp>(l, f64, i);
              };
              Value pIdx = ob.create<linalg::IndexOp>(l, 0);
              Value iIdx = ob.create<linalg::IndexOp>(l, 1);
              Value two = ob.create<arith::ConstantIndexOp>(l, 2);
              Value pair = ob.create<arith::MulIOp>(
                  l, ob.create<arith::DivUIOp>(l, iIdx, two), two);
              Value expo =
                  ob.create<arith::DivFOp>(l, toF64(pair), c(double(dModel)));
              Value denom = ob.create<math::PowFOp>(l, c(10000.0), expo);
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

} // namespace

void mlir::tfm::populateDataMovementLowerings(OpLoweringSet &set) {
  set.add<EmbeddingOp>([](EmbeddingOp op, BufferizedEntry &e) {
    return lowerGatherLike(e, op, op.getTable(), op.getIndicesMutable(), 0,
                           op.getResult());
  });
  set.add<GatherOp>([](GatherOp g, BufferizedEntry &e) {
    int64_t axis = g.getAxis();
    if (axis < 0)
      axis += g.getInput().getType().getRank();
    return lowerGatherLike(e, g, g.getInput(), g.getIndicesMutable(), axis,
                           g.getResult());
  });
  set.add<ScatterNDOp>(lowerScatterND);
  set.add<TopKOp>(lowerTopK);
  set.add<SliceOp>(lowerSlice);
  set.add<ConcatOp>(lowerConcat);
  set.add<SplitOp>(lowerSplit);
  set.add<ReshapeOp>([](ReshapeOp r, BufferizedEntry &e) {
    return lowerReshape(e, r.getInput(), r.getResult());
  });
  set.add<TransposeOp>([](TransposeOp t, BufferizedEntry &e) {
    if (movesOnlyUnitDims(t))
      return lowerReshape(e, t.getInput(), t.getResult());
    return lowerTranspose(t, e);
  });
  set.add<PositionalEncodingOp>(lowerPositionalEncoding);
}
