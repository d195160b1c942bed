//===- LowerToGPU.cpp - tfm-lower-to-gpu ----------------------------------===//
//
// Lays out the weights and the session state, and lowers every planned
// entry through the GPU's OpLoweringSet into linalg on device buffers, as
// tfm-lower-to-cpu does for the CPU; tfm-map-to-gpu then turns the linalg
// into kernels.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Target/Symbols.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERTOGPUPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

struct LowerToGPUPass
    : public mlir::tfm::impl::LowerToGPUPassBase<LowerToGPUPass> {
  using LowerToGPUPassBase::LowerToGPUPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries = entryFunctions(module);
    ModuleLayout layout;
    // Under bf16 and f16 a weight that only GEMMs read is stored rounded
    // alone, in the type the GEMMs read.
    if (failed(layOutModule(entries, layout,
                            narrowOperandType(computeType, &getContext()),
                            readsGemmOperandNarrow)))
      return signalPassFailure();
    // The checks write their outcomes past the state slots, read after the
    // run: a run reads nothing back mid-way, so it can be a CUDA graph.
    layout.checkSlotsOffset = alignBuffer(layout.state.bytes);

    OpLoweringSet lowerings;
    populateTfmToGPULowerings(lowerings);
    SmallVector<Attribute> infos;
    Type narrow = narrowOperandType(computeType, &getContext());
    for (func::FuncOp fn : entries) {
      if (remarks)
        fn.walk([&](Operation *op) {
          std::optional<GPUKernelChoice> choice = chooseGPUKernel(op, narrow);
          if (!choice)
            return;
          InFlightDiagnostic remark = op->emitRemark();
          remark << kGPUKernelRemarkPrefix << op->getName() << ": "
                 << gpuKernelName(choice->kernel);
          if (!choice->better.empty())
            remark << "; not " << choice->better << ": " << choice->whyNot;
        });
      Attribute info;
      GPUEntry entry(fn, layout, computeType);
      if (failed(entry.run(lowerings, info)))
        return signalPassFailure();
      infos.push_back(info);
      fn.erase();
    }
    recordModuleLayout(module, layout, infos);
    // Entries take plain pointers, as the artifact's wrapper passes them.
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.getName().starts_with(kEntrySymbolPrefix))
        fn->setAttr("llvm.bareptr", UnitAttr::get(&getContext()));
  }
};

} // namespace
