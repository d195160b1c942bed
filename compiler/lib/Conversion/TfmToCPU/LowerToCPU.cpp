//===- LowerToCPU.cpp - tfm-lower-to-cpu ----------------------------------===//
//
// Lays out the weights and the session state, lowers every planned entry
// through the CPU's OpLoweringSet (TfmToCPU.h), and records what the
// artifact emitter needs on the module: `tfm.entries`, `tfm.kernels`, the
// weights layout and the state slots.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/Target/Symbols.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERTOCPUPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::populateTfmToCPULowerings(OpLoweringSet &set) {
  populateTfmToLinalgLowerings(set);
  populateCPUGemmLowerings(set);
  populateCPUNormalizationLowerings(set);
  populateCPUOptimizerLowerings(set);
}

namespace {

struct LowerToCPUPass
    : public mlir::tfm::impl::LowerToCPUPassBase<LowerToCPUPass> {
  using LowerToCPUPassBase::LowerToCPUPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<func::FuncOp> entries = entryFunctions(module);
    WeightsLayout weights;
    StateLayout state;
    if (failed(layOutModule(entries, weights, state)))
      return signalPassFailure();

    OpLoweringSet lowerings;
    populateTfmToCPULowerings(lowerings);
    KernelTable kernels;
    SmallVector<Attribute> infos;
    for (func::FuncOp fn : entries) {
      DictionaryAttr info;
      CPUEntry entry(fn, weights, state, kernels, bf16);
      if (failed(entry.run(lowerings, info)))
        return signalPassFailure();
      infos.push_back(info);
      fn.erase();
    }

    OpBuilder b(ctx);
    b.setInsertionPointToStart(module.getBody());
    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    // Defined by the artifact emitter: it calls host->run_kernel.
    b.create<LLVM::LLVMFuncOp>(
        module.getLoc(), kRunKernelSymbol,
        LLVM::LLVMFunctionType::get(b.getI32Type(),
                                    {ptrTy, b.getI32Type(), ptrTy}));
    module->setAttr("tfm.entries", b.getArrayAttr(infos));
    module->setAttr("tfm.kernels", b.getArrayAttr(kernels.descs));
    recordModuleLayout(module, weights, state);
  }
};

} // namespace
