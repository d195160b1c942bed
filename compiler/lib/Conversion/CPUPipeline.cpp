//===- CPUPipeline.cpp - tfm-cpu-pipeline ----------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::buildCPUBufferPipeline(OpPassManager &pm,
                                       const CPUPipelineOptions &options) {
  if (options.fuse) {
    FusionPipelineOptions fusion;
    fusion.remarks = options.remarks;
    buildFuseTransformerPipeline(pm, fusion);
  }
  pm.addNestedPass<func::FuncOp>(createPlanMemoryPass());
  pm.addPass(createLowerToCPUPass({options.bf16}));
}

void mlir::tfm::buildCPUToLLVMPipeline(OpPassManager &pm) {
  // Glue becomes loop nests here; LLVM's loop vectorizer, run on the
  // emitted module, turns their contiguous inner loops into vector code.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addNestedPass<func::FuncOp>(createApproximateMathPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createConvertMathToLLVMPass());
  // What erf and tanh the approximation left (f64) become libm calls.
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  // Entry arguments are plain pointers, which is what the ABI wrapper has.
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::tfm::buildCPUPipeline(OpPassManager &pm,
                                 const CPUPipelineOptions &options) {
  buildCPUBufferPipeline(pm, options);
  buildCPUToLLVMPipeline(pm);
}

void mlir::tfm::registerTfmConversionPipelines() {
  PassPipelineRegistration<CPUPipelineOptions>(
      "tfm-cpu-pipeline",
      "Fuse, plan memory, lower to oneDNN kernel calls and linalg, then to "
      "the LLVM dialect",
      buildCPUPipeline);
}
