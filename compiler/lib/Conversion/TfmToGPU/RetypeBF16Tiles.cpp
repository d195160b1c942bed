//===- RetypeBF16Tiles.cpp - tfm-retype-bf16-tiles ------------------------===//
//
// MLIR 19's vector-to-nvgpu conversion distributes the fragments of f16
// tensor-core tiles over a warp's lanes and refuses bf16 ones, though the
// two are laid out alike: in mma.sync m16n8k16 each lane holds the same
// pairs of 16-bit values whichever the type. Distributing only moves bits,
// so a bf16 tile is read as f16 patterns and distributed by the same
// conversion; tfm-lower-bf16-mma-sync then multiplies them as bf16. No
// value is ever computed as f16: the reads feed nothing but the tiles'
// vector.contract ops, which this checks.
//
// The type changes at the kernel's boundary: its argument, and the host's
// view of the same bytes that the launch passes.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/IR/SymbolTable.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_RETYPEBF16TILESPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The kernel arguments whose bf16 values the tiles of `kernel` multiply,
/// or failure, with a diagnostic, when one is read otherwise: then reading
/// it as f16 could change a value.
FailureOr<SmallVector<BlockArgument>> bf16TileArguments(gpu::GPUFuncOp kernel) {
  SetVector<BlockArgument> args;
  WalkResult walk = kernel.walk([&](vector::ContractionOp contract) {
    for (Value operand : {contract.getLhs(), contract.getRhs()}) {
      if (!cast<VectorType>(operand.getType()).getElementType().isBF16())
        continue;
      auto read = operand.getDefiningOp<vector::TransferReadOp>();
      auto arg = read ? dyn_cast<BlockArgument>(read.getSource()) : nullptr;
      if (!arg || arg.getOwner() != &kernel.getBody().front()) {
        contract.emitError("tfm-retype-bf16-tiles: a bf16 tensor-core tile "
                           "multiplies a value not read from its kernel's "
                           "arguments");
        return WalkResult::interrupt();
      }
      args.insert(arg);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  for (BlockArgument arg : args)
    for (Operation *user : arg.getUsers()) {
      auto read = dyn_cast<vector::TransferReadOp>(user);
      bool tileOnly =
          read && llvm::all_of(read->getUsers(), [&](Operation *u) {
            auto contract = dyn_cast<vector::ContractionOp>(u);
            return contract && contract.getAcc() != read.getResult();
          });
      if (!tileOnly) {
        user->emitError("tfm-retype-bf16-tiles: reads bf16 argument #")
            << arg.getArgNumber() << " of kernel '" << kernel.getName()
            << "' other than for a tensor-core tile";
        return failure();
      }
    }
  return SmallVector<BlockArgument>(args.begin(), args.end());
}

struct RetypeBF16TilesPass
    : public mlir::tfm::impl::RetypeBF16TilesPassBase<RetypeBF16TilesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto f16 = Float16Type::get(ctx);
    auto bf16 = BFloat16Type::get(ctx);
    // The launches of each kernel, by its full name.
    DenseMap<SymbolRefAttr, SmallVector<gpu::LaunchFuncOp>> launches;
    module.walk([&](gpu::LaunchFuncOp launch) {
      launches[launch.getKernel()].push_back(launch);
    });

    for (auto gpuModule : module.getOps<gpu::GPUModuleOp>())
      for (auto kernel : gpuModule.getOps<gpu::GPUFuncOp>()) {
        FailureOr<SmallVector<BlockArgument>> args = bf16TileArguments(kernel);
        if (failed(args))
          return signalPassFailure();
        if (args->empty())
          continue;
        auto name = SymbolRefAttr::get(
            gpuModule.getNameAttr(),
            {FlatSymbolRefAttr::get(kernel.getNameAttr())});
        for (BlockArgument arg : *args) {
          auto type = cast<MemRefType>(arg.getType()).clone(f16);
          for (gpu::LaunchFuncOp launch : launches.lookup(name)) {
            OpOperand &passed = launch.getKernelOperandsMutable()[arg.getArgNumber()];
            // The arena's temporaries are views of its bytes, and so the
            // rounded copies of GEMM operands are, and the weights.
            OpBuilder b(launch);
            Value retyped = retypedView(b, passed.get(), f16);
            if (!retyped) {
              launch.emitError("tfm-retype-bf16-tiles: passes kernel '")
                  << kernel.getName() << "' a bf16 operand that is not a "
                  << "view of the arena or the weights, or a window of one";
              return signalPassFailure();
            }
            passed.set(retyped);
          }
          arg.setType(type);
          for (Operation *user : arg.getUsers()) {
            auto read = cast<vector::TransferReadOp>(user);
            OpBuilder b(read);
            read.getPaddingMutable().assign(b.create<arith::ConstantOp>(
                read.getLoc(), f16, b.getFloatAttr(f16, 0.0)));
            read.getVector().setType(read.getVectorType().clone(f16));
          }
        }
        kernel.setFunctionTypeAttr(TypeAttr::get(FunctionType::get(
            ctx, kernel.getBody().getArgumentTypes(),
            kernel.getFunctionType().getResults())));
        kernel->setAttr(kMmaOperandTypeAttrName, TypeAttr::get(bf16));
      }
  }
};

} // namespace

Value mlir::tfm::retypedView(OpBuilder &b, Value passed, Type elem) {
  if (auto view = passed.getDefiningOp<memref::ViewOp>())
    return b.create<memref::ViewOp>(
        view.getLoc(), cast<MemRefType>(view.getType()).clone(elem),
        view.getSource(), view.getByteShift(), view.getSizes());
  if (auto sub = passed.getDefiningOp<memref::SubViewOp>()) {
    Value source = retypedView(b, sub.getSource(), elem);
    if (!source)
      return {};
    return b.create<memref::SubViewOp>(
        sub.getLoc(), cast<MemRefType>(sub.getType().clone(elem)), source,
        sub.getMixedOffsets(), sub.getMixedSizes(), sub.getMixedStrides());
  }
  return {};
}
