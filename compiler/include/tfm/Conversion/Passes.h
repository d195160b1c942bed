//===- Passes.h - tfm conversions and the CPU pipeline ----------*- C++ -*-===//

#ifndef TFM_CONVERSION_PASSES_H
#define TFM_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::tfm {

#define GEN_PASS_DECL
#include "tfm/Conversion/Passes.h.inc"

/// Options of tfm-cpu-pipeline.
struct CPUPipelineOptions : public PassPipelineOptions<CPUPipelineOptions> {
  Option<bool> remarks{*this, "remarks",
                       llvm::cl::desc("Emit a remark for every fusion site"),
                       llvm::cl::init(false)};
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Run the fusion passes"),
                    llvm::cl::init(true)};
  Option<bool> bf16{*this, "bf16",
                    llvm::cl::desc("Linear layers multiply in bf16 with f32 "
                                   "accumulation"),
                    llvm::cl::init(false)};
};

/// Fusion, memory planning and tfm-lower-to-cpu: the program on buffers,
/// with kernel calls and linalg (what --emit=linalg shows).
void buildCPUBufferPipeline(OpPassManager &pm,
                            const CPUPipelineOptions &options);

/// linalg, memref, math and friends down to the LLVM dialect.
void buildCPUToLLVMPipeline(OpPassManager &pm);

/// The two above: tfm on tensors to the LLVM dialect.
void buildCPUPipeline(OpPassManager &pm, const CPUPipelineOptions &options);

#define GEN_PASS_REGISTRATION
#include "tfm/Conversion/Passes.h.inc"

/// Registers tfm-cpu-pipeline.
void registerTfmConversionPipelines();

} // namespace mlir::tfm

#endif // TFM_CONVERSION_PASSES_H
