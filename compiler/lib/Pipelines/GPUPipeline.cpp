//===- GPUPipeline.cpp - The CUDA target's passes --------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Pipelines/Pipelines.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Conversion/VectorToGPU/VectorToGPU.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::registerPipelineExtensions(DialectRegistry &registry) {
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void mlir::tfm::buildGPUBufferPipeline(OpPassManager &pm,
                                       const CompilerOptions &options) {
  buildFrontPipeline(pm, options);
  registerGPUTarget();
  // The GPU computes a fused attention without its scores in memory.
  pm.addNestedPass<func::FuncOp>(
      createFuseAttentionPass({options.remarks, /*target=*/"cuda"}));
  pm.addNestedPass<func::FuncOp>(
      createPlanMemoryPass({/*target=*/"cuda", options.computeType}));
  pm.addPass(createLowerToGPUPass({options.computeType, options.remarks}));
}

/// The schedule: GEMMs in register tiles, runs of elementwise ops merged,
/// then every linalg op as parallel loops mapped to a grid of blocks and
/// threads.
static void addSchedule(OpPassManager &fn, StringRef arch, bool remarks,
                        bool tma) {
  TileGPUMatmulPassOptions matmul;
  matmul.warpgroupMma = hasWarpgroupMma(arch);
  matmul.tma = matmul.warpgroupMma && tma;
  matmul.remarks = remarks;
  fn.addPass(createTileGPUMatmulPass(matmul));
  // Before the merges, which would take a fill into an elementwise run.
  fn.addPass(createFoldFillsIntoReductionsPass());
  fn.addPass(createFuseElementwiseBuffersPass());
  fn.addPass(createParallelDimsFirstPass());
  fn.addPass(createConvertLinalgToParallelLoopsPass());
  // Kernels cannot call libm, and libdevice comes with a CUDA toolkit,
  // which a build of tfm does not need.
  fn.addPass(createApproximateMathPass({/*all=*/true}));
  fn.addPass(createVectorizeGPULoopsPass());
  fn.addPass(createMapToGPUPass());
}

/// Vector ops to the LLVM dialect, transfers fully unrolled: the tensor-core
/// tiles' and the fused attention's, in whatever `pm` runs on.
static void addVectorToLLVM(OpPassManager &pm) {
  VectorTransferToSCFOptions transfers;
  transfers.enableFullUnroll();
  pm.addPass(createConvertVectorToSCFPass(transfers));
  pm.addPass(createConvertVectorToLLVMPass());
}

/// The kernels as the GPU pipeline makes them, up to the distribution of
/// the tensor-core tiles over the lanes: launches, outlined and merged,
/// bf16 tiles retyped, each warp's vector.contract as mma.sync.
static void addKernels(OpPassManager &pm, StringRef arch, bool reverseGrid,
                       bool remarks, bool tma) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  addSchedule(fn, arch, remarks, tma);
  if (reverseGrid)
    fn.addPass(createReverseGridPass());
  fn.addPass(createParallelLoopToGpuPass());
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
  fn.addPass(createMergeGPULaunchesPass());
  // Constants are cloned into the kernels rather than passed to them.
  fn.addPass(createGpuLauchSinkIndexComputationsPass());
  pm.addPass(createOutlineGPUKernelsPass());
  pm.addPass(createMergeGPUModulesPass());
  // The TMA loads' tensor maps, which the runtime makes.
  pm.addPass(createLowerTensorMapsPass());
  // Each warp's vector.contract becomes mma.sync on its lanes' fragments
  // (bf16 ones distributed as 16-bit patterns, then multiplied as bf16).
  pm.addPass(createRetypeBF16TilesPass());
  pm.addNestedPass<gpu::GPUModuleOp>(
      createConvertVectorToGPUPass(/*useNvGpu=*/true));
}

void mlir::tfm::buildGPUScheduleOnCPUPipeline(OpPassManager &pm, StringRef arch,
                                              bool reverseGrid, bool remarks,
                                              bool tma) {
  addKernels(pm, arch, reverseGrid, remarks, tma);
  // The kernels run where they are launched, a warp's collectives over its
  // lanes as the PTX instructions compute them.
  pm.addPass(createEmulateGPUKernelsPass());
  // What is left of the kernels' vector ops, as the CPU lowers them.
  pm.addNestedPass<func::FuncOp>(createWidenContractionsPass());
  // bf16 rounding and widening as integer ops on the bits, inline: a CPU
  // without bf16 instructions would otherwise call __truncsfbf2 per
  // element.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  // A vector access the GPU would fault on reads or writes poison here.
  pm.addPass(createCheckVectorAlignmentPass());
  addVectorToLLVM(pm);
  buildCPUToLLVMPipeline(pm);
}

void mlir::tfm::buildGPUToLLVMPipeline(OpPassManager &pm, StringRef arch,
                                       bool remarks, bool tma) {
  // The GEMM calls, on the host, while their buffers are still memrefs.
  pm.addPass(createLowerKernelCallsPass());
  addKernels(pm, arch, /*reverseGrid=*/false, remarks, tma);
  // bf16 tiles multiply as bf16; the kernels' other vector ops (the fused
  // attention's rows) are lowered here, since MLIR's NVVM pipeline converts
  // only some of them.
  pm.addNestedPass<gpu::GPUModuleOp>(createLowerBF16MmaSyncPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createLowerAlignedVectorAccessPass());
  addVectorToLLVM(pm.nest<gpu::GPUModuleOp>());
  pm.addNestedPass<gpu::GPUModuleOp>(createGPUMathLibraryPass());
  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = arch.str();
  nvvm.cubinFeatures = ptxFeaturesOf(arch).str();
  nvvm.cubinFormat = "isa";
  nvvm.optLevel = 3;
  // Kernels take plain device pointers, as the driver passes them.
  nvvm.kernelUseBarePtrCallConv = true;
  nvvm.hostUseBarePtrCallConv = true;
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
  pm.addPass(createLowerGPULaunchesPass({arch.str()}));
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}
