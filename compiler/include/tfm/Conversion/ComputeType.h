//===- ComputeType.h - The type GEMMs multiply in ---------------*- C++ -*-===//
//
// One enum from tfmc's --dtype through the pipelines' compute-type option to
// the lowering passes, so that no layer turns it into a flag of its own.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_COMPUTETYPE_H
#define TFM_CONVERSION_COMPUTETYPE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace mlir::tfm {

/// The type GEMMs multiply in; accumulation, inputs and outputs stay f32.
enum class ComputeType { F32, BF16, F16 };

/// The compute type's name as the CLI spells it ("f32", "bf16", "f16").
inline llvm::StringRef computeTypeName(ComputeType type) {
  switch (type) {
  case ComputeType::F32:
    return "f32";
  case ComputeType::BF16:
    return "bf16";
  case ComputeType::F16:
    return "f16";
  }
  return "?";
}

/// The values of a command-line or pass option of type ComputeType.
inline auto computeTypeValues() {
  return llvm::cl::values(
      clEnumValN(ComputeType::F32, "f32", "f32 operands"),
      clEnumValN(ComputeType::BF16, "bf16", "bf16 operands, f32 accumulation"),
      clEnumValN(ComputeType::F16, "f16", "f16 operands, f32 accumulation"));
}

} // namespace mlir::tfm

#endif // TFM_CONVERSION_COMPUTETYPE_H
