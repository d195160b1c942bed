//===- LowerToCPU.cpp - tfm-lower-to-cpu ----------------------------------===//
//
// Lays out the weights and the session state, lowers every planned entry
// through the CPU's OpLoweringSet (TfmToCPU.h), and records what the
// artifact emitter needs on the module: `tfm.entries`, the weights layout,
// the state slots and the run-time checks.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERTOCPUPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::populateTfmToCPULowerings(OpLoweringSet &set) {
  populateTfmToLinalgLowerings(set);
  populateCPUGemmLowerings(set);
  populateCPUConvolutionLowerings(set);
  populateCPUNormalizationLowerings(set);
  populateCPUOptimizerLowerings(set);
}

namespace {

struct LowerToCPUPass
    : public mlir::tfm::impl::LowerToCPUPassBase<LowerToCPUPass> {
  using LowerToCPUPassBase::LowerToCPUPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (computeType == ComputeType::F16) {
      module.emitError("the CPU target multiplies in f32 or bf16, not f16");
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> entries = entryFunctions(module);
    ModuleLayout layout;
    if (failed(layOutModule(entries, layout)))
      return signalPassFailure();
    declareCheckFailed(module);

    OpLoweringSet lowerings;
    populateTfmToCPULowerings(lowerings);
    SmallVector<Attribute> infos;
    for (func::FuncOp fn : entries) {
      Attribute info;
      CPUEntry entry(fn, layout, computeType);
      if (failed(entry.run(lowerings, info)))
        return signalPassFailure();
      infos.push_back(info);
      fn.erase();
    }
    recordModuleLayout(module, layout, infos);
  }
};

} // namespace
