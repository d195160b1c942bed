//===- Passes.h - tfm conversions -------------------------------*- C++ -*-===//

#ifndef TFM_CONVERSION_PASSES_H
#define TFM_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "tfm/Conversion/ComputeType.h"
#include "tfm/IR/TfmDialect.h"

namespace mlir::tfm {

#define GEN_PASS_DECL
#include "tfm/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tfm/Conversion/Passes.h.inc"

} // namespace mlir::tfm

#endif // TFM_CONVERSION_PASSES_H
