//===- tfm-opt.cpp - The tfm optimizer driver -----------------------------===//
//
// MlirOptMain with the tfm dialect, its passes, and the upstream dialects the
// CPU and GPU pipelines lower through. Registering dialects one by one, not
// through InitAllDialects, keeps this file's compile time and the binary small.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Pipelines/Pipelines.h"
#include "tfm/Tools/BugReport.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::tfm::setBugReportMessage();
  mlir::registerTransformsPasses();
  // The upstream passes the GPU pipeline runs, to reproduce it step by step.
  mlir::registerConvertLinalgToParallelLoopsPass();
  mlir::registerPass([] { return mlir::createParallelLoopToGpuPass(); });
  mlir::registerGpuLaunchSinkIndexComputationsPass();
  mlir::registerGpuKernelOutliningPass();
  mlir::gpu::registerGPUToNVVMPipeline();
  mlir::tfm::registerTfmPasses();
  mlir::tfm::registerTfmConversionPasses();
  mlir::tfm::registerTfmPipelines();
  mlir::tfm::registerCPUTarget();
  mlir::tfm::registerGPUTarget();

  mlir::DialectRegistry registry;
  registry.insert<mlir::tfm::TfmDialect, mlir::affine::AffineDialect,
                  mlir::arith::ArithDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::gpu::GPUDialect, mlir::LLVM::LLVMDialect,
                  mlir::linalg::LinalgDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect, mlir::nvgpu::NVGPUDialect,
                  mlir::NVVM::NVVMDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect,
                  mlir::vector::VectorDialect>();
  mlir::tfm::registerGradientExternalModels(registry);
  mlir::tfm::registerAxisMapExternalModels(registry);
  mlir::tfm::registerPipelineExtensions(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tfm optimizer driver\n", registry));
}
