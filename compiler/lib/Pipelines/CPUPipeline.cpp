//===- CPUPipeline.cpp - The CPU target's passes ---------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Pipelines/Pipelines.h"
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
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::buildCPUPlanPipeline(OpPassManager &pm, bool remarks) {
  registerCPUTarget();
  // The CPU computes a fused attention without its scores in memory.
  pm.addNestedPass<func::FuncOp>(
      createFuseAttentionPass({remarks, /*target=*/"cpu"}));
  pm.addNestedPass<func::FuncOp>(createPlanMemoryPass({/*target=*/"cpu"}));
}

void mlir::tfm::buildCPUBufferPipeline(OpPassManager &pm,
                                       const CompilerOptions &options) {
  buildFrontPipeline(pm, options);
  buildCPUPlanPipeline(pm, options.remarks);
  pm.addPass(createLowerToCPUPass({options.computeType}));
}

void mlir::tfm::buildCPUToLLVMPipeline(OpPassManager &pm,
                                       int64_t parallelGlueIterations) {
  pm.addPass(createLowerKernelCallsPass());
  pm.addPass(createParallelizeGluePass({parallelGlueIterations}));
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
  // bf16 rounding and widening as integer ops on the bits, inline: on a CPU
  // without bf16 instructions LLVM would call __truncsfbf2 per element (a
  // bf16 cast's glue, --dtype=bf16's casts).
  arith::ArithExpandOpsPassOptions expandBf16;
  expandBf16.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expandBf16));
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
