//===- Training.cpp - The training glue as linalg -------------------------===//
//
// The step count lives in the session state; dropout draws from the
// counter-based RNG of tfm/CounterRNG.h, bit for bit as the interpreter
// does; the embedding gradient accumulates rows in order; the gradients'
// averages across processes are the runtime's ALL_REDUCE calls.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Common/KernelCalls.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

std::pair<Value, Value> mlir::tfm::stepAndRate(OpBuilder &b, Location loc,
                                               Value step, LRSchedule schedule,
                                               double lr, int64_t dModel,
                                               int64_t warmup) {
  Type f64 = b.getF64Type();
  auto c = [&](double v) {
    return BufferizedEntry::constantScalar(b, loc, f64, v);
  };
  Value t = b.create<arith::SIToFPOp>(loc, f64, step);
  if (schedule == LRSchedule::constant)
    return {t, c(lr)};
  // lr · d^-0.5 · min(t^-0.5, t · w^-1.5)
  Value tc = b.create<arith::MaximumFOp>(loc, t, c(1.0));
  Value decay =
      b.create<arith::DivFOp>(loc, c(1.0), b.create<math::SqrtOp>(loc, tc));
  Value ramp =
      b.create<arith::MulFOp>(loc, tc, c(std::pow(double(warmup), -1.5)));
  Value rate = b.create<arith::MulFOp>(
      loc, c(lr / std::sqrt(double(dModel))),
      b.create<arith::MinimumFOp>(loc, decay, ramp));
  return {t, rate};
}

namespace {

/// splitmix64's finalizer (CounterRNG.h) on i64 values.
Value mix64(OpBuilder &ob, Location l, Value x) {
  auto c = [&](uint64_t v) {
    return ob.create<arith::ConstantOp>(
        l, ob.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  auto xorShift = [&](Value v, int64_t k) {
    return ob.create<arith::XOrIOp>(l, v,
                                    ob.create<arith::ShRUIOp>(l, v, c(k)));
  };
  x = ob.create<arith::AddIOp>(l, x, c(0x9E3779B97F4A7C15ull));
  x = ob.create<arith::MulIOp>(l, xorShift(x, 30), c(0xBF58476D1CE4E5B9ull));
  x = ob.create<arith::MulIOp>(l, xorShift(x, 27), c(0x94D049BB133111EBull));
  return xorShift(x, 31);
}

LogicalResult lowerNextStep(NextStepOp op, BufferizedEntry &e) {
  const StateLayout &state = e.stateLayout();
  if (state.step < 0)
    return op.emitError("no step count in the session state");
  // As linalg rather than loads and stores in the entry, so that a target
  // whose state lives on a device runs it there.
  auto scalar = RankedTensorType::get({}, e.b.getI64Type());
  Value slot = e.view(e.stateBuffer(), state.step, scalar);
  Value next = e.destination(op.getResult());
  e.elementwise({slot}, next, [](OpBuilder &ob, Location l, ValueRange a) -> Value {
    return ob.create<arith::AddIOp>(
        l, a[0], ob.create<arith::ConstantOp>(l, ob.getI64IntegerAttr(1)));
  });
  e.copy(next, slot);
  return success();
}

LogicalResult lowerProcessRank(ProcessRankOp op, BufferizedEntry &e) {
  const StateLayout &state = e.stateLayout();
  if (state.rank < 0)
    return op.emitError("no rank in the session state");
  auto scalar = RankedTensorType::get({}, e.b.getI64Type());
  e.copy(e.view(e.stateBuffer(), state.rank, scalar),
         e.destination(op.getResult()));
  return success();
}

/// The dropout stream of `seed` at `step` (none: the seed alone).
Value streamOf(OpBuilder &ob, Location l, uint64_t seed, Value step) {
  auto i64c = [&](uint64_t v) -> Value {
    return ob.create<arith::ConstantOp>(
        l, ob.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  Value stream = i64c(seed);
  if (!step)
    return stream;
  Value mixedStep = mix64(
      ob, l, ob.create<arith::XOrIOp>(l, step, i64c(0xD1B54A32D192ED03ull)));
  return mix64(ob, l, ob.create<arith::XOrIOp>(l, stream, mixedStep));
}

/// In training, element i is kept when the top 53 bits of
/// mix64(stream ^ mix64(i)) reach rate·2^53, which is `u(stream, i) >= rate`
/// of CounterRNG.h in integers. Otherwise dropout is the identity.
LogicalResult lowerDropout(DropoutOp op, BufferizedEntry &e) {
  auto type = op.getType();
  Value in = e.bufferOf(op.getInput());
  Value out = e.destination(op.getResult());
  if (!op.getTraining() || op.getRate().isZero()) {
    e.copy(in, out);
    return success();
  }
  auto i64c = [](OpBuilder &ob, Location l, uint64_t v) -> Value {
    return ob.create<arith::ConstantOp>(
        l, ob.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  // The stream mixes in the step: once in the entry where it can read the
  // step, else where the elements are computed (an input broadcast to
  // every element).
  Value hostStream;
  SmallVector<Value> ins{in};
  if (op.getStep() && e.hostReadsBuffers()) {
    OpBuilder &b = e.b;
    Value step = b.create<memref::LoadOp>(e.loc, e.bufferOf(op.getStep()),
                                          ValueRange{});
    hostStream = streamOf(b, e.loc, op.getSeed(), step);
  } else if (op.getStep()) {
    ins.push_back(e.bufferOf(op.getStep()));
  }
  double rate = op.getRate().convertToDouble();
  auto threshold = static_cast<uint64_t>(std::ceil(std::ldexp(rate, 53)));
  double keepScale = 1.0 / (1.0 - rate);
  SmallVector<int64_t> strides = rowMajorStrides(type.getShape());
  Type elem = type.getElementType();
  e.elementwise(ins, out, [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
    Value stream = hostStream;
    if (!stream)
      stream = streamOf(ob, l, op.getSeed(),
                        op.getStep() ? a[1] : Value());
    Value linear = i64c(ob, l, 0);
    for (auto [d, stride] : llvm::enumerate(strides)) {
      Value i = ob.create<arith::IndexCastOp>(l, ob.getI64Type(),
                                              ob.create<linalg::IndexOp>(l, d));
      linear = ob.create<arith::AddIOp>(
          l, linear, ob.create<arith::MulIOp>(l, i, i64c(ob, l, stride)));
    }
    Value z = mix64(ob, l,
                    ob.create<arith::XOrIOp>(l, stream, mix64(ob, l, linear)));
    Value top = ob.create<arith::ShRUIOp>(l, z, i64c(ob, l, 11));
    Value keep = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::uge, top,
                                          i64c(ob, l, threshold));
    Value scaled = ob.create<arith::MulFOp>(
        l, a[0], BufferizedEntry::constantScalar(ob, l, elem, keepScale));
    return ob.create<arith::SelectOp>(
        l, keep, scaled, BufferizedEntry::constantScalar(ob, l, elem, 0.0));
  });
  return success();
}

LogicalResult lowerEmbeddingGrad(EmbeddingGradOp op, BufferizedEntry &e) {
  return emitEmbeddingGrad(op, e, /*threadPerColumn=*/false);
}

/// Where `start`'s tensor lies in its bucket: the bucket's members are the
/// function's starts of that bucket, in order, packed end to end.
struct BucketPlace {
  int64_t offset = 0, elements = 0, members = 0;
};
BucketPlace bucketPlace(AllReduceStartOp start) {
  BucketPlace place;
  start->getParentOp()->walk([&](AllReduceStartOp s) {
    if (s.getBucket() != start.getBucket())
      return;
    if (s == start)
      place.offset = place.elements;
    place.elements += s.getInput().getType().getNumElements();
    ++place.members;
  });
  return place;
}

/// Whether every reader of `start`'s average is an Adam update that keeps
/// its part of the moments (--shard-optimizer): each rank then needs only
/// the part of the average it updates.
bool readInParts(AllReduceStartOp start) {
  for (Operation *user : start->getUsers()) {
    auto wait = dyn_cast<AllReduceWaitOp>(user);
    if (!wait || wait->use_empty())
      return false;
    for (Operation *reader : wait->getUsers()) {
      auto adam = dyn_cast<AdamUpdateOp>(reader);
      if (!adam || !adam.getSharded())
        return false;
    }
  }
  return true;
}

/// One member of an ALL_REDUCE bucket. The kernel works in place on the
/// member's dense storage, which the plan makes the input's own where it
/// can (else a copy); the wait reads no weight.
template <typename CollectiveOp>
LogicalResult lowerCollective(CollectiveOp op, BufferizedEntry &e) {
  constexpr bool isStart = std::is_same_v<CollectiveOp, AllReduceStartOp>;
  Value in = op->getOperand(0), result = op.getResult();
  auto type = cast<RankedTensorType>(result.getType());
  int64_t n = type.getNumElements();
  AllReduceStartOp start;
  if constexpr (isStart)
    start = op;
  else
    start = op.getPending().template getDefiningOp<AllReduceStartOp>();
  Value work;
  if (e.isView(result)) {
    work = e.bufferOf(result);
  } else if constexpr (isStart) {
    work = e.destination(result);
    if (n)
      e.copy(e.denseOf(in), work);
  } else {
    work = e.denseOf(in);
  }
  if (n)
    callAllReduce(start, isStart, work, e);
  if constexpr (!isStart)
    if (!e.isView(result) && n)
      e.copy(work, e.destination(result));
  return success();
}

} // namespace

void mlir::tfm::callAllReduce(AllReduceStartOp start, bool isStart, Value work,
                              BufferizedEntry &e) {
  auto type = cast<RankedTensorType>(start.getResult().getType());
  int64_t n = type.getNumElements();
  BucketPlace place = bucketPlace(start);
  int64_t params[TFM_ALL_REDUCE_NUM_PARAMS] = {};
  params[TFM_ALL_REDUCE_N] = n;
  params[TFM_ALL_REDUCE_BUCKET] = start.getBucket();
  params[TFM_ALL_REDUCE_PHASE] =
      isStart ? TFM_ALL_REDUCE_START : TFM_ALL_REDUCE_WAIT;
  params[TFM_ALL_REDUCE_OFFSET] = place.offset;
  params[TFM_ALL_REDUCE_BUCKET_ELEMENTS] = place.elements;
  params[TFM_ALL_REDUCE_BUCKET_MEMBERS] = place.members;
  params[TFM_ALL_REDUCE_PARTS] = readInParts(start);
  Type f32 = type.getElementType();
  KernelArg weight;
  if (isStart)
    weight = KernelArg(
        e.reshape(e.denseOf(start.getWeight()), MemRefType::get({1}, f32)));
  e.callKernel(TFM_KERNEL_ALL_REDUCE, params, {},
               {KernelArg(e.reshape(work, MemRefType::get({n}, f32))), weight});
}

LogicalResult mlir::tfm::emitEmbeddingGrad(EmbeddingGradOp op,
                                           BufferizedEntry &e,
                                           bool threadPerColumn) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto outType = op.getType();
  Type elem = outType.getElementType();
  int64_t rows = outType.getDimSize(0), width = outType.getDimSize(1);
  int64_t n = op.getIndices().getType().getNumElements();
  Value out = e.destination(op.getResult());
  e.fill(out, b.getFloatAttr(elem, 0.0));
  if (n == 0 || width == 0)
    return success();
  Type idxType = op.getIndices().getType().getElementType();
  Value idx =
      e.reshape(e.denseOf(op.getIndices()), MemRefType::get({n}, idxType));
  Value grad =
      e.reshape(e.denseOf(op.getGrad()), MemRefType::get({n, width}, elem));
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
  Value one = b.create<arith::ConstantIndexOp>(loc, 1);
  Value count = b.create<arith::ConstantIndexOp>(loc, n);
  Value cols = b.create<arith::ConstantIndexOp>(loc, width);
  Value limit = b.create<arith::ConstantIndexOp>(loc, rows);
  // Position i's table row, and whether it is one.
  auto rowOf = [&](OpBuilder &ob, Location l, Value i) {
    Value row = ob.create<arith::IndexCastOp>(
        l, ob.getIndexType(), ob.create<memref::LoadOp>(l, idx, ValueRange{i}));
    Value inRange = ob.create<arith::AndIOp>(
        l, ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, row, zero),
        ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, row, limit));
    return std::pair{row, inRange};
  };
  auto add = [&](OpBuilder &ob, Location l, Value row, Value i, Value j) {
    Value acc = ob.create<memref::LoadOp>(l, out, ValueRange{row, j});
    Value g = ob.create<memref::LoadOp>(l, grad, ValueRange{i, j});
    ob.create<memref::StoreOp>(l, ob.create<arith::AddFOp>(l, acc, g), out,
                               ValueRange{row, j});
  };
  // Rows repeat, so each element accumulates over the positions in their
  // order. The columns are independent: a GPU gives each its own thread
  // (one thread once walked every position's whole row); the CPU walks
  // the positions' rows whole, in the order memory holds them.
  if (threadPerColumn) {
    b.create<scf::ParallelOp>(
        loc, ValueRange{zero}, ValueRange{cols}, ValueRange{one},
        [&](OpBuilder &pb, Location pl, ValueRange js) {
          pb.create<scf::ForOp>(
              pl, zero, count, one, ValueRange{},
              [&](OpBuilder &ob, Location l, Value i, ValueRange) {
                auto [row, inRange] = rowOf(ob, l, i);
                ob.create<scf::IfOp>(l, inRange,
                                     [&](OpBuilder &ib, Location il) {
                                       add(ib, il, row, i, js.front());
                                       ib.create<scf::YieldOp>(il);
                                     });
                ob.create<scf::YieldOp>(l);
              });
        });
    return success();
  }
  b.create<scf::ForOp>(
      loc, zero, count, one, ValueRange{},
      [&](OpBuilder &ob, Location l, Value i, ValueRange) {
        auto [row, inRange] = rowOf(ob, l, i);
        ob.create<scf::IfOp>(l, inRange, [&](OpBuilder &ib, Location il) {
          ib.create<scf::ForOp>(
              il, zero, cols, one, ValueRange{},
              [&](OpBuilder &jb, Location jl, Value j, ValueRange) {
                add(jb, jl, row, i, j);
                jb.create<scf::YieldOp>(jl);
              });
          ib.create<scf::YieldOp>(il);
        });
        ob.create<scf::YieldOp>(l);
      });
  return success();
}

void mlir::tfm::populateTrainingLowerings(OpLoweringSet &set) {
  set.add<AllReduceStartOp>([](AllReduceStartOp op, BufferizedEntry &e) {
    return lowerCollective(op, e);
  });
  set.add<AllReduceWaitOp>([](AllReduceWaitOp op, BufferizedEntry &e) {
    return lowerCollective(op, e);
  });
  set.add<NextStepOp>(lowerNextStep);
  set.add<ProcessRankOp>(lowerProcessRank);
  set.add<DropoutOp>(lowerDropout);
  set.add<EmbeddingGradOp>(lowerEmbeddingGrad);
}
