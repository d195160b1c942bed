//===- Attention.cpp - Fused attention on the GPU -------------------------===//
//
// tfm.attention without its [Sq, Sk] scores in memory: one thread per query
// row walks the keys once with the online softmax (the running maximum m,
// the running sum l of exp(s - m), and the output row acc, rescaled by
// exp(m_old - m_new) whenever the maximum grows) and writes acc / l. The
// output row is one vector of Dv floats, which stays in registers; the
// query row and the key and value rows are read from memory as they are
// needed, the same key and value rows by the threads of a block at once.
//
// A causal row stops at its own position. A key whose score is -inf (a
// masked key) adds nothing; a row whose every key is masked divides 0 by 0,
// as the unfused softmax's exp(-inf - -inf) does.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

LogicalResult mlir::tfm::lowerFlashAttention(AttentionOp op,
                                             BufferizedEntry &e) {
  OpBuilder &b = e.b;
  Location loc = op.getLoc();
  ArrayRef<int64_t> qs = op.getQuery().getType().getShape();
  int64_t rank = qs.size();
  int64_t sq = qs[rank - 2], d = qs.back();
  int64_t sk = op.getKey().getType().getShape()[rank - 2];
  int64_t dv = op.getValue().getType().getShape().back();
  Value q = e.bufferOf(op.getQuery()), k = e.bufferOf(op.getKey()),
        v = e.bufferOf(op.getValue());
  Value mask = op.getMask() ? e.bufferOf(op.getMask()) : Value();
  MaskKind kind = attentionMaskKind(op);
  Value out = e.destination(op.getResult());
  if (!out)
    return failure();
  Type f32 = b.getF32Type();
  auto row = VectorType::get({dv}, f32);
  double scale = attentionScale(op);

  auto c = [&](OpBuilder &ob, int64_t value) -> Value {
    return ob.create<arith::ConstantIndexOp>(loc, value);
  };
  auto cf = [&](OpBuilder &ob, double value) -> Value {
    return ob.create<arith::ConstantOp>(loc, ob.getF32FloatAttr(value));
  };
  if (sq == 0 || product(qs.drop_back(2)) == 0)
    return success();
  // The mask broadcasts to [B..., Sq, Sk] from the right.
  SmallVector<int64_t> scoreShape(qs.drop_back());
  scoreShape.push_back(sk);
  AffineMap maskMap =
      mask ? e.broadcastMap(cast<MemRefType>(mask.getType()).getShape(),
                            scoreShape)
           : AffineMap();
  buildParallelLoop(
      b, loc, qs.drop_back(), [&](OpBuilder &pb, Location l, ValueRange ivs) {
        ValueRange batch = ivs.drop_back();
        Value i = ivs.back();
        auto at = [&](Value a, Value b2) {
          SmallVector<Value> idx(batch);
          idx.push_back(a);
          idx.push_back(b2);
          return idx;
        };
        Value upper = c(pb, sk);
        if (op.getCausal())
          upper = pb.create<arith::MinUIOp>(
              l, pb.create<arith::AddIOp>(l, i, c(pb, 1)), upper);
        Value negInf = cf(pb, -INFINITY);
        Value zeroRow = pb.create<arith::ConstantOp>(
            l, row, DenseElementsAttr::get(row, pb.getF32FloatAttr(0.0)));
        auto keys = pb.create<scf::ForOp>(
            l, c(pb, 0), upper, c(pb, 1),
            ValueRange{negInf, cf(pb, 0.0), zeroRow},
            [&](OpBuilder &fb, Location fl, Value j, ValueRange carried) {
              Value m = carried[0], sum = carried[1], acc = carried[2];
              // The score q_i · k_j.
              auto dot = fb.create<scf::ForOp>(
                  fl, c(fb, 0), c(fb, d), c(fb, 1), ValueRange{cf(fb, 0.0)},
                  [&](OpBuilder &db, Location dl, Value t, ValueRange s) {
                    Value x = db.create<memref::LoadOp>(dl, q, at(i, t));
                    Value y = db.create<memref::LoadOp>(dl, k, at(j, t));
                    Value p = db.create<arith::MulFOp>(dl, x, y);
                    db.create<scf::YieldOp>(
                        dl, ValueRange{db.create<arith::AddFOp>(dl, s[0], p)});
                  });
              Value s = fb.create<arith::MulFOp>(fl, dot.getResult(0),
                                                 cf(fb, scale));
              if (mask) {
                SmallVector<Value> score(batch);
                score.push_back(i);
                score.push_back(j);
                Value mv = fb.create<memref::LoadOp>(
                    fl, mask, indicesAt(fb, fl, maskMap, score));
                if (kind == MaskKind::boolean) {
                  s = fb.create<arith::SelectOp>(fl, mv, s, cf(fb, -INFINITY));
                } else {
                  if (mv.getType() != f32)
                    mv = mv.getType().getIntOrFloatBitWidth() > 32
                             ? fb.create<arith::TruncFOp>(fl, f32, mv).getResult()
                             : fb.create<arith::ExtFOp>(fl, f32, mv).getResult();
                  s = fb.create<arith::AddFOp>(fl, s, mv);
                }
              }
              Value mNew = fb.create<arith::MaximumFOp>(fl, m, s);
              // While every score so far is -inf, nothing accumulates: the
              // shift is 0 rather than -inf, so that exp gives 0, not NaN.
              Value finite = fb.create<arith::CmpFOp>(
                  fl, arith::CmpFPredicate::ONE, mNew, cf(fb, -INFINITY));
              Value shift =
                  fb.create<arith::SelectOp>(fl, finite, mNew, cf(fb, 0.0));
              Value rescale = fb.create<math::ExpOp>(
                  fl, fb.create<arith::SubFOp>(fl, m, shift));
              Value weight = fb.create<math::ExpOp>(
                  fl, fb.create<arith::SubFOp>(fl, s, shift));
              Value sumNew = fb.create<arith::AddFOp>(
                  fl, fb.create<arith::MulFOp>(fl, sum, rescale), weight);
              Value vRow = fb.create<vector::TransferReadOp>(
                  fl, row, v, at(j, c(fb, 0)), ArrayRef<bool>{true});
              Value accNew = fb.create<arith::AddFOp>(
                  fl,
                  fb.create<arith::MulFOp>(
                      fl, acc, fb.create<vector::BroadcastOp>(fl, row, rescale)),
                  fb.create<arith::MulFOp>(
                      fl, vRow, fb.create<vector::BroadcastOp>(fl, row, weight)));
              fb.create<scf::YieldOp>(fl, ValueRange{mNew, sumNew, accNew});
            });
        Value result = pb.create<arith::DivFOp>(
            l, keys.getResult(2),
            pb.create<vector::BroadcastOp>(l, row, keys.getResult(1)));
        pb.create<vector::TransferWriteOp>(l, result, out, at(i, c(pb, 0)),
                                           ArrayRef<bool>{true});
      });
  return success();
}
