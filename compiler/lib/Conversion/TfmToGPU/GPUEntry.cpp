//===- GPUEntry.cpp - Entry functions of the GPU target -------------------===//

#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/Target/Symbols.h"
#include "tfm/abi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Registers `OpT`'s lowering as chooseGPUKernel decides: `lower` where it
/// picks `kernel`, and otherwise the lowering registered before, which is
/// the neutral one or another kernel's registered the same way.
template <typename OpT, typename Fn>
void lowerByChoice(OpLoweringSet &set, GPUKernel kernel, Fn lower) {
  OpLoweringFn otherwise = *set.lookup(OpT::getOperationName());
  set.add<OpT>([otherwise, kernel, lower](OpT op, BufferizedEntry &e) {
    if (!getsGPUKernel(op, kernel, cast<GPUEntry>(e).narrowOperandType()))
      return otherwise(op.getOperation(), e);
    return lower(op, e);
  });
}

/// The STARTs called with `last`, the last START of its bucket in its
/// block, at its place: the bucket's other members that are in place (their
/// storage stays the gradient's until the WAIT; another is copied at its
/// own START). A call between two kernels keeps tfm-merge-gpu-launches
/// from merging them, so a bucket's calls go together, where its last
/// member is computed, and its sum begins there, beside the rest of the
/// backward pass. Empty when `start` is not its bucket's last.
/// Whether no START of `start`'s bucket follows it in its block.
bool lastOfBucket(AllReduceStartOp start) {
  for (Operation *op = start->getNextNode(); op; op = op->getNextNode())
    if (auto later = dyn_cast<AllReduceStartOp>(op))
      if (later.getBucket() == start.getBucket())
        return false;
  return true;
}

SmallVector<AllReduceStartOp> startsCalledWith(AllReduceStartOp last,
                                               BufferizedEntry &e) {
  SmallVector<AllReduceStartOp> starts;
  if (!lastOfBucket(last))
    return starts;
  for (Operation *op = last->getPrevNode(); op; op = op->getPrevNode())
    if (auto start = dyn_cast<AllReduceStartOp>(op))
      if (start.getBucket() == last.getBucket() && e.isView(start.getResult()))
        starts.push_back(start);
  std::reverse(starts.begin(), starts.end());
  return starts;
}

/// Whether `start` is called with its bucket's last START instead.
bool calledLater(AllReduceStartOp start, BufferizedEntry &e) {
  return e.isView(start.getResult()) && !lastOfBucket(start);
}

} // namespace

void mlir::tfm::populateTfmToGPULowerings(OpLoweringSet &set) {
  populateTfmToLinalgLowerings(set);
  populateGPUGemmLowerings(set);
  lowerByChoice<Conv2DOp>(set, GPUKernel::LibraryGemm,
                          [](Conv2DOp op, BufferizedEntry &e) {
                            return lowerConv2DAsGemm(op, cast<GPUEntry>(e));
                          });
  set.add<EmbeddingGradOp>([](EmbeddingGradOp op, BufferizedEntry &e) {
    return emitEmbeddingGrad(op, e, /*threadPerColumn=*/true);
  });
  lowerByChoice<AttentionOp>(set, GPUKernel::AttentionRows,
                             lowerFlashAttention);
  lowerByChoice<AttentionOp>(set, GPUKernel::FlashAttentionMma,
                             lowerFlashAttentionMma);
  lowerByChoice<AttentionGradOp>(set, GPUKernel::AttentionRows,
                                 lowerFlashAttentionGrad);
  lowerByChoice<SoftmaxOp>(
      set, GPUKernel::WarpRows, [](SoftmaxOp op, BufferizedEntry &e) {
        return lowerWarpSoftmax(e, op.getInput(), Value(), MaskKind::boolean,
                                1.0, /*causal=*/false, op.getResult());
      });
  lowerByChoice<MaskedSoftmaxOp>(
      set, GPUKernel::WarpRows, [](MaskedSoftmaxOp op, BufferizedEntry &e) {
        return lowerWarpSoftmax(
            e, op.getInput(), op.getMask(), op.getMaskKind(),
            op.getScale().convertToDouble(), op.getCausal(), op.getResult());
      });
  lowerByChoice<SoftmaxGradOp>(set, GPUKernel::WarpRows, lowerWarpSoftmaxGrad);
  lowerByChoice<LayerNormGradOp>(set, GPUKernel::WarpRows,
                                 lowerWarpLayerNormGrad);
  lowerByChoice<ReduceOp>(set, GPUKernel::WarpRows, lowerWarpRowReduction);
  lowerByChoice<ReduceOp>(set, GPUKernel::BlockColumns,
                          lowerBlockColumnReduction);
  lowerByChoice<CrossEntropyOp>(set, GPUKernel::WarpRows,
                                lowerWarpCrossEntropy);
  lowerByChoice<CrossEntropyGradOp>(set, GPUKernel::WarpRows,
                                    lowerWarpCrossEntropyGrad);
  lowerByChoice<LayerNormOp>(
      set, GPUKernel::WarpRows, [](LayerNormOp op, BufferizedEntry &e) {
        return lowerWarpLayerNorm(e, op.getInput(), Value(), op.getScale(),
                                  op.getBias(),
                                  static_cast<int64_t>(op.getAxis()),
                                  op.getEpsilon().convertToDouble(),
                                  op.getRms(), op.getResult(), Value());
      });
  OpLoweringFn startAlone = *set.lookup(AllReduceStartOp::getOperationName());
  set.add<AllReduceStartOp>(
      [startAlone](AllReduceStartOp op, BufferizedEntry &e) {
        if (calledLater(op, e))
          return success();
        for (AllReduceStartOp start : startsCalledWith(op, e))
          if (start.getType().getNumElements())
            callAllReduce(start, /*isStart=*/true,
                          e.bufferOf(start.getResult()), e);
        return startAlone(op.getOperation(), e);
      });
  lowerByChoice<AddLayerNormOp>(
      set, GPUKernel::WarpRows, [](AddLayerNormOp op, BufferizedEntry &e) {
        return lowerWarpLayerNorm(e, op.getInput(), op.getResidual(),
                                  op.getScale(), op.getBias(),
                                  static_cast<int64_t>(op.getAxis()),
                                  op.getEpsilon().convertToDouble(),
                                  op.getRms(), op.getOutput(), op.getSum());
      });
}

bool mlir::tfm::readsByLoopsOrConstants(AffineMap map) {
  return llvm::all_of(map.getResults(), [](AffineExpr e) {
    return isa<AffineDimExpr, AffineConstantExpr>(e);
  });
}

Value mlir::tfm::maskValueAsF32(OpBuilder &b, Location loc, Value x) {
  Type f32 = b.getF32Type();
  if (x.getType() == f32)
    return x;
  if (x.getType().getIntOrFloatBitWidth() > 32)
    return b.create<arith::TruncFOp>(loc, f32, x);
  return b.create<arith::ExtFOp>(loc, f32, x);
}

SmallVector<Value> mlir::tfm::indicesAt(OpBuilder &b, Location loc,
                                        AffineMap map, ArrayRef<Value> loops) {
  SmallVector<Value> idx;
  for (AffineExpr e : map.getResults()) {
    if (auto cst = dyn_cast<AffineConstantExpr>(e))
      idx.push_back(b.create<arith::ConstantIndexOp>(loc, cst.getValue()));
    else
      idx.push_back(loops[cast<AffineDimExpr>(e).getPosition()]);
  }
  return idx;
}

scf::ParallelOp mlir::tfm::buildParallelLoop(
    OpBuilder &b, Location loc, ArrayRef<int64_t> trips,
    function_ref<void(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t t : trips) {
    lbs.push_back(b.create<arith::ConstantIndexOp>(loc, 0));
    ubs.push_back(b.create<arith::ConstantIndexOp>(loc, t));
    steps.push_back(b.create<arith::ConstantIndexOp>(loc, 1));
  }
  return b.create<scf::ParallelOp>(loc, lbs, ubs, steps, body);
}

StringRef mlir::tfm::ptxFeaturesOf(StringRef arch) {
  // The oldest PTX ISA that has each architecture, so that older drivers
  // load it: 7.0 brought sm_80, 7.8 sm_90, 8.0 sm_90a.
  return llvm::StringSwitch<StringRef>(arch)
      .Case("sm_80", "+ptx70")
      .Case("sm_86", "+ptx71")
      .Case("sm_89", "+ptx78")
      .Case("sm_90", "+ptx78")
      .Case("sm_90a", "+ptx80")
      .Default("");
}

bool mlir::tfm::hasWarpgroupMma(StringRef arch) { return arch == "sm_90a"; }

Type mlir::tfm::narrowOperandType(ComputeType computeType, MLIRContext *ctx) {
  switch (computeType) {
  case ComputeType::F32:
    return {};
  case ComputeType::BF16:
    return BFloat16Type::get(ctx);
  case ComputeType::F16:
    return Float16Type::get(ctx);
  }
  llvm_unreachable("unknown compute type");
}

Type GPUEntry::gemmOperandType(Type elem) const {
  Type narrow = narrowOperandType();
  return elem.isF32() && narrow ? narrow : elem;
}

Value GPUEntry::devicePointer(Value buffer) {
  // From the buffer the view was cut from, plus the byte offset: the
  // aligned pointer of a memref.view folds to its source's.
  auto [base, offset] = placeOf(buffer);
  Value root = base ? base : buffer;
  Type i64 = b.getI64Type();
  Value address = b.create<arith::IndexCastOp>(
      loc, i64, b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, root));
  if (offset)
    address = b.create<arith::AddIOp>(
        loc, address, b.create<arith::ConstantIntOp>(loc, offset, 64));
  return b.create<LLVM::IntToPtrOp>(loc, LLVM::LLVMPointerType::get(ctx),
                                    address);
}

int64_t GPUEntry::indexCheckRuns(int64_t n) const {
  // A thread per run, each stepping over its positions a run count apart,
  // so that a warp's threads load neighbouring indices; then one thread
  // over the runs. Both walks are about √n long when the runs number about
  // √n: the first count from there up to 1024 that divides the positions
  // evenly, else the nearest below (one, as before, for a prime count).
  // Under 1024 indices one thread's walk costs less than a second launch.
  if (n < 1024)
    return 1;
  int64_t root = static_cast<int64_t>(std::ceil(std::sqrt(double(n))));
  for (int64_t runs = root; runs <= 1024; ++runs)
    if (n % runs == 0)
      return runs;
  for (int64_t runs = std::min<int64_t>(root, 1024); runs > 1; --runs)
    if (n % runs == 0)
      return runs;
  return 1;
}

void GPUEntry::reportCheck(int32_t check, Value first, Value flat) {
  // The run goes on (every index is clamped into range); one thread writes
  // the outcome to the check's slot: the position and the value there, or
  // -1 and -1.
  Type i64 = b.getI64Type();
  auto flatType = cast<MemRefType>(flat.getType());
  int64_t n = flatType.getNumElements();
  Value slot = view(stateBuffer(),
                    layout.checkSlotsOffset + TFM_CHECK_SLOT_BYTES * check,
                    MemRefType::get({TFM_CHECK_SLOT_BYTES / 8}, i64));
  generic({first}, {AffineMap::get(1, 0, {}, ctx)}, slot,
          AffineMap::getMultiDimIdentityMap(1, ctx),
          {utils::IteratorType::parallel},
          [&](OpBuilder &ob, Location l, ValueRange a) -> Value {
            auto c = [&](int64_t v) -> Value {
              return ob.create<arith::ConstantIntOp>(l, v, 64);
            };
            Value position = a[0];
            Value found = ob.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt,
                                                   position, c(n));
            Value at = ob.create<arith::IndexCastOp>(
                l, ob.getIndexType(),
                ob.create<arith::MinSIOp>(l, position, c(n - 1)));
            Value value = ob.create<memref::LoadOp>(l, flat, ValueRange{at});
            if (value.getType() != i64)
              value = ob.create<arith::ExtSIOp>(l, i64, value);
            Value isPosition = ob.create<arith::CmpIOp>(
                l, arith::CmpIPredicate::eq, ob.create<linalg::IndexOp>(l, 0),
                ob.create<arith::ConstantIndexOp>(l, 0));
            Value outcome =
                ob.create<arith::SelectOp>(l, isPosition, position, value);
            return ob.create<arith::SelectOp>(l, found, outcome, c(-1));
          });
}
