//===- OutlineGPUKernels.cpp - tfm-outline-gpu-kernels --------------------===//
//
// gpu-kernel-outlining makes a gpu.func of each gpu.launch but keeps none of
// the launch's attributes, and MLIR 19's gpu.launch has no other place for a
// kernel builder to say how ptxas should treat the kernel. The builders set
// the NVVM function attributes on their launch; this runs the outlining and
// moves them onto the kernel, where convert-gpu-to-nvvm keeps them and the
// PTX gets its .minnctapersm or .maxnreg.
//
// Outlining replaces each launch by its gpu.launch_func in place, so the
// launches and the launch_funcs meet in the same walk order.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/DLTI/DLTI.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_OUTLINEGPUKERNELSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

struct OutlineGPUKernelsPass
    : public mlir::tfm::impl::OutlineGPUKernelsPassBase<OutlineGPUKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Launches outlined before this pass are not among the new ones.
    llvm::SmallPtrSet<Operation *, 4> earlier;
    module.walk([&](gpu::LaunchFuncOp call) { earlier.insert(call); });
    SmallVector<SmallVector<NamedAttribute>> kept;
    bool any = false;
    module.walk([&](gpu::LaunchOp launch) {
      SmallVector<NamedAttribute> &nvvm = kept.emplace_back();
      for (NamedAttribute attr : launch->getDiscardableAttrs())
        if (attr.getName().getValue().starts_with("nvvm."))
          nvvm.push_back(attr);
      any |= !nvvm.empty();
    });
    OpPassManager outline(ModuleOp::getOperationName());
    outline.addPass(createGpuKernelOutliningPass());
    if (failed(runPipeline(outline, module)))
      return signalPassFailure();
    if (!any)
      return;
    size_t next = 0;
    SymbolTableCollection symbols;
    WalkResult walk = module.walk([&](gpu::LaunchFuncOp call) {
      if (earlier.contains(call))
        return WalkResult::advance();
      if (next == kept.size()) {
        call.emitError("tfm-outline-gpu-kernels: more kernel launches after "
                       "outlining than launches before it");
        return WalkResult::interrupt();
      }
      auto kernel = symbols.lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          call, call.getKernel());
      for (NamedAttribute attr : kept[next++])
        kernel->setAttr(attr.getName(), attr.getValue());
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
  }
};

} // namespace
