//===- Optimizer.cpp - SGD and Adam as linalg -----------------------------===//
//
// One pass over each parameter, updating it (and Adam's moments) in place in
// the session state. The step's coefficients (the scheduled rate, Adam's bias
// corrections) are computed by generated code from the step count, first,
// into two scalars the update reads: in f64, with β^t by repeated squaring,
// so that no libm call is needed where the state lives on a device. The
// updates of one step share their hyperparameters, so the first computes
// the coefficients into the entry's scratch memory and the others read them:
// on the GPU, one kernel per step rather than one per parameter.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// base^t for an integer t >= 0 in f64, by repeated squaring over the 63
/// bits of t.
Value integerPower(OpBuilder &ob, Location l, double base, Value t) {
  Type f64 = ob.getF64Type(), i64 = ob.getI64Type();
  auto fc = [&](double v) { return BufferizedEntry::constantScalar(ob, l, f64, v); };
  Value zero = ob.create<arith::ConstantIndexOp>(l, 0);
  Value bits = ob.create<arith::ConstantIndexOp>(l, 63);
  Value one = ob.create<arith::ConstantIndexOp>(l, 1);
  auto loop = ob.create<scf::ForOp>(
      l, zero, bits, one, ValueRange{fc(1.0), fc(base)},
      [&](OpBuilder &fb, Location fl, Value bit, ValueRange acc) {
        Value shift = fb.create<arith::IndexCastOp>(fl, i64, bit);
        Value set = fb.create<arith::CmpIOp>(
            fl, arith::CmpIPredicate::ne,
            fb.create<arith::AndIOp>(
                fl, fb.create<arith::ShRUIOp>(fl, t, shift),
                fb.create<arith::ConstantOp>(fl, fb.getI64IntegerAttr(1))),
            fb.create<arith::ConstantOp>(fl, fb.getI64IntegerAttr(0)));
        Value times = fb.create<arith::MulFOp>(fl, acc[0], acc[1]);
        Value result = fb.create<arith::SelectOp>(fl, set, times, acc[0]);
        Value square = fb.create<arith::MulFOp>(fl, acc[1], acc[1]);
        fb.create<scf::YieldOp>(fl, ValueRange{result, square});
      });
  return loop.getResult(0);
}

template <typename UpdateOp>
LogicalResult lowerOptimizer(UpdateOp op, BufferizedEntry &e) {
  MLIRContext *ctx = e.ctx;
  auto type = op.getGrad().getType();
  Type elem = type.getElementType();
  int64_t n = type.getNumElements();
  if (n == 0)
    return success();
  StringRef name = op.getParameter();
  const StateLayout &state = e.stateLayout();
  auto flat = RankedTensorType::get({n}, elem);
  Value param = e.view(e.stateBuffer(), state.parameter.lookup(name), flat);
  constexpr bool adam = std::is_same_v<UpdateOp, AdamUpdateOp>;
  double wd = op.getWeightDecay().convertToDouble();
  double lr = op.getLr().convertToDouble();
  LRSchedule schedule = op.getSchedule();
  auto dModel = static_cast<int64_t>(op.getDModel());
  auto warmup = static_cast<int64_t>(op.getWarmup());
  double b1 = 0, b2 = 0, eps = 0;
  if constexpr (adam) {
    if (op.getSharded())
      return op.emitError("--shard-optimizer: the moments are sharded "
                          "across the processes of a data-parallel run, "
                          "which runs on the CPU only so far");
    b1 = op.getBeta1().convertToDouble();
    b2 = op.getBeta2().convertToDouble();
    eps = op.getEps().convertToDouble();
  }

  // coeff[0]: the step size (SGD: the rate; Adam: rate / (1 - β1^t));
  // coeff[1]: Adam's 1 / sqrt(1 - β2^t).
  std::string key;
  llvm::raw_string_ostream(key)
      << "step-coefficients " << op.getOperationName() << ' '
      << op.getStep().getAsOpaquePointer() << ' ' << elem << ' '
      << stringifyLRSchedule(schedule) << ' ' << llvm::format("%a", lr) << ' '
      << dModel << ' ' << warmup << ' ' << llvm::format("%a", b1) << ' '
      << llvm::format("%a", b2);
  bool fresh = false;
  Value coeff = e.entryScratch(key, MemRefType::get({2}, elem), fresh);
  AffineMap scalar = AffineMap::get(1, 0, {}, ctx);
  if (fresh)
    e.generic({e.bufferOf(op.getStep())}, {scalar}, coeff,
              AffineMap::getMultiDimIdentityMap(1, ctx),
              {utils::IteratorType::parallel},
              [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
                Type f64 = ob.getF64Type();
                auto fc = [&](double v) {
                  return BufferizedEntry::constantScalar(ob, l, f64, v);
                };
                auto [t, rate] =
                    stepAndRate(ob, l, a[0], schedule, lr, dModel, warmup);
                Value first = rate, second = fc(1.0);
                if (adam) {
                  first = ob.create<arith::DivFOp>(
                      l, rate,
                      ob.create<arith::SubFOp>(l, fc(1.0),
                                               integerPower(ob, l, b1, a[0])));
                  second = ob.create<arith::DivFOp>(
                      l, fc(1.0),
                      ob.create<math::SqrtOp>(
                          l, ob.create<arith::SubFOp>(
                                 l, fc(1.0), integerPower(ob, l, b2, a[0]))));
                }
                Value isFirst = ob.create<arith::CmpIOp>(
                    l, arith::CmpIPredicate::eq,
                    ob.create<linalg::IndexOp>(l, 0),
                    ob.create<arith::ConstantIndexOp>(l, 0));
                Value v = ob.create<arith::SelectOp>(l, isFirst, first, second);
                return ob.create<arith::TruncFOp>(l, elem, v);
              });

  // After the coefficients: a strided gradient's dense copy is the op's
  // temporary, which starts past the entry's scratch.
  Value grad = e.reshape(e.denseOf(op.getGrad()), MemRefType::get({n}, elem));
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  auto at = [&](int64_t i) {
    return AffineMap::get(1, 0, {getAffineConstantExpr(i, ctx)}, ctx);
  };
  SmallVector<Value> outs{param};
  if (adam) {
    outs.push_back(e.view(e.stateBuffer(), state.adamM.lookup(name), flat));
    outs.push_back(e.view(e.stateBuffer(), state.adamV.lookup(name), flat));
  }
  SmallVector<AffineMap> maps{id, at(0), at(1)};
  maps.append(outs.size(), id);
  e.b.create<linalg::GenericOp>(
      e.loc, TypeRange{}, ValueRange{grad, coeff, coeff}, outs, maps,
      SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &ob, Location l, ValueRange a) {
        auto c = [&](double v) {
          return BufferizedEntry::constantScalar(ob, l, elem, v);
        };
        Value p = a[3];
        // g + wd · p, as PyTorch's weight decay.
        Value g = ob.create<arith::AddFOp>(
            l, a[0], ob.create<arith::MulFOp>(l, c(wd), p));
        if (!adam) {
          ob.create<linalg::YieldOp>(
              l, ValueRange{ob.create<arith::SubFOp>(
                     l, p, ob.create<arith::MulFOp>(l, a[1], g))});
          return;
        }
        Value m = ob.create<arith::AddFOp>(
            l, ob.create<arith::MulFOp>(l, c(b1), a[4]),
            ob.create<arith::MulFOp>(l, c(1 - b1), g));
        Value v = ob.create<arith::AddFOp>(
            l, ob.create<arith::MulFOp>(l, c(b2), a[5]),
            ob.create<arith::MulFOp>(l, c(1 - b2),
                                     ob.create<arith::MulFOp>(l, g, g)));
        // p -= step · m / (sqrt(v) / sqrt(1 - β2^t) + eps)
        Value denom = ob.create<arith::AddFOp>(
            l, ob.create<arith::MulFOp>(l, ob.create<math::SqrtOp>(l, v), a[2]),
            c(eps));
        Value next = ob.create<arith::SubFOp>(
            l, p,
            ob.create<arith::DivFOp>(l, ob.create<arith::MulFOp>(l, a[1], m),
                                     denom));
        ob.create<linalg::YieldOp>(l, ValueRange{next, m, v});
      });
  return success();
}

} // namespace

void mlir::tfm::populateOptimizerLowerings(OpLoweringSet &set) {
  set.add<SGDUpdateOp>(lowerOptimizer<SGDUpdateOp>);
  set.add<AdamUpdateOp>(lowerOptimizer<AdamUpdateOp>);
}
