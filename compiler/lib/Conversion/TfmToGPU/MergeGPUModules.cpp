//===- MergeGPUModules.cpp - tfm-merge-gpu-modules ------------------------===//
//
// gpu-kernel-outlining puts every kernel in a gpu.module of its own, which
// would become a PTX module of its own for the driver to compile and load.
// A model has hundreds of kernels, so they are gathered into one module,
// `tfm_kernels`, compiled and loaded once. A kernel is named after its
// entry point, not the entry's symbol ("infer_kernel_3"): the name shows in
// profiles and in the runtime's messages.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Target/Symbols.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_MERGEGPUMODULESPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr llvm::StringLiteral kKernelsModule = "tfm_kernels";

struct MergeGPUModulesPass
    : public mlir::tfm::impl::MergeGPUModulesPassBase<MergeGPUModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    if (module.lookupSymbol(kKernelsModule)) {
      module.emitError("tfm-merge-gpu-modules: '")
          << kKernelsModule << "' exists already";
      return signalPassFailure();
    }
    OpBuilder b(modules.front());
    auto merged =
        b.create<gpu::GPUModuleOp>(modules.front().getLoc(), kKernelsModule);
    SymbolTable table(merged);
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp from : modules) {
      for (Operation &op :
           llvm::make_early_inc_range(from.getBody()->without_terminator())) {
        auto sym = dyn_cast<SymbolOpInterface>(op);
        if (!sym) {
          op.emitError("tfm-merge-gpu-modules: a kernel module holds '")
              << op.getName() << "', which is not a symbol";
          return signalPassFailure();
        }
        StringAttr old = sym.getNameAttr();
        StringRef shown = old.getValue();
        shown.consume_front(kEntrySymbolPrefix);
        sym.setName(StringAttr::get(module.getContext(), shown));
        op.moveBefore(merged.getBody()->getTerminator());
        // Names are unique per module only; the table renames a clash.
        renamed[{from.getNameAttr(), old}] = table.insert(&op);
      }
    }
    WalkResult walk = module.walk([&](gpu::LaunchFuncOp launch) {
      StringAttr name =
          renamed.lookup({launch.getKernelModuleName(), launch.getKernelName()});
      if (!name) {
        launch.emitError("tfm-merge-gpu-modules: launches an unknown kernel");
        return WalkResult::interrupt();
      }
      launch.setKernelAttr(SymbolRefAttr::get(
          merged.getNameAttr(), {FlatSymbolRefAttr::get(name)}));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (gpu::GPUModuleOp from : modules)
      from.erase();
  }
};

} // namespace
