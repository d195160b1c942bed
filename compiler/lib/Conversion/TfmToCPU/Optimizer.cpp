//===- Optimizer.cpp - SGD and Adam on the runtime's kernels --------------===//
//
// The step's coefficients depend on the step count, so the model computes
// them in f64 each step and hands them to the kernel, which updates the
// parameter (and Adam's moments) in place in the session state.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

template <typename UpdateOp>
LogicalResult lowerOptimizer(UpdateOp op, CPUEntry &e) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto type = op.getGrad().getType();
  Type elem = type.getElementType();
  if (!elem.isF32())
    return op.emitError("the CPU backend updates f32 parameters only");
  StringRef name = op.getParameter();
  int64_t n = type.getNumElements();
  if (n == 0)
    return success();
  const StateLayout &state = e.stateLayout();
  Value param = e.view(e.stateBuffer(), state.parameter.lookup(name), type);
  Value grad = e.denseOf(op.getGrad());
  Value step = b.create<memref::LoadOp>(loc, e.bufferOf(op.getStep()),
                                       ValueRange{});
  auto [t, rate] = stepAndRate(b, loc, step, op.getSchedule(),
                               op.getLr().convertToDouble(),
                               static_cast<int64_t>(op.getDModel()),
                               static_cast<int64_t>(op.getWarmup()));
  Type f64 = b.getF64Type();
  auto c = [&](double v) {
    return BufferizedEntry::constantScalar(b, loc, f64, v);
  };
  auto coefficients = [&](ArrayRef<Value> values) {
    Value buf = e.temporary(MemRefType::get({int64_t(values.size())}, elem));
    for (auto [i, v] : llvm::enumerate(values))
      b.create<memref::StoreOp>(
          loc, b.create<arith::TruncFOp>(loc, elem, v), buf,
          ValueRange{b.create<arith::ConstantIndexOp>(loc, i)});
    return buf;
  };
  double wd = op.getWeightDecay().convertToDouble();
  if constexpr (std::is_same_v<UpdateOp, SGDUpdateOp>) {
    Value coeff = coefficients({rate, c(wd)});
    int64_t params[TFM_OPTIMIZER_NUM_PARAMS] = {};
    params[TFM_OPTIMIZER_N] = n;
    e.callKernel(TFM_KERNEL_SGD, ArrayRef<int64_t>(params, 1), {},
                 {KernelArg(param), KernelArg(grad), KernelArg(coeff)});
  } else {
    double b1 = op.getBeta1().convertToDouble();
    double b2 = op.getBeta2().convertToDouble();
    double eps = op.getEps().convertToDouble();
    // step size lr_t / (1 - β1^t); the second moment's correction 1/√(1 - β2^t)
    Value c1 = b.create<arith::SubFOp>(loc, c(1.0),
                                       b.create<math::PowFOp>(loc, c(b1), t));
    Value c2 = b.create<arith::SubFOp>(loc, c(1.0),
                                       b.create<math::PowFOp>(loc, c(b2), t));
    Value stepSize = b.create<arith::DivFOp>(loc, rate, c1);
    Value invC2 =
        b.create<arith::DivFOp>(loc, c(1.0), b.create<math::SqrtOp>(loc, c2));
    Value coeff = coefficients(
        {stepSize, invC2, c(b1), c(1 - b1), c(b2), c(1 - b2), c(eps), c(wd)});
    int64_t params[TFM_OPTIMIZER_NUM_PARAMS] = {};
    params[TFM_OPTIMIZER_N] = n;
    if (op.getSharded()) {
      // The runtime keeps the moments, each rank its part of them.
      params[TFM_OPTIMIZER_SHARDED] = 1;
      params[TFM_OPTIMIZER_MOMENTS] =
          state.indexOf(name, TFM_STATE_ADAM_M_SHARD);
      e.callKernel(TFM_KERNEL_ADAM, params, {},
                   {KernelArg(param), KernelArg(grad), KernelArg(coeff)});
      return success();
    }
    Value m = e.view(e.stateBuffer(), state.adamM.lookup(name), type);
    Value v = e.view(e.stateBuffer(), state.adamV.lookup(name), type);
    // Unsharded, the descriptor is the element count alone.
    e.callKernel(TFM_KERNEL_ADAM, ArrayRef<int64_t>(params, 1), {},
                 {KernelArg(param), KernelArg(grad), KernelArg(m), KernelArg(v),
                  KernelArg(coeff)});
  }
  return success();
}

} // namespace

void mlir::tfm::populateCPUOptimizerLowerings(OpLoweringSet &set) {
  set.add<SGDUpdateOp>(onCPU<SGDUpdateOp>(lowerOptimizer<SGDUpdateOp>));
  set.add<AdamUpdateOp>(onCPU<AdamUpdateOp>(lowerOptimizer<AdamUpdateOp>));
}
