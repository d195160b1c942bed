//===- QuantizeMode.h - What --quantize makes of float weights --*- C++ -*-===//

#ifndef TFM_TRANSFORMS_QUANTIZEMODE_H
#define TFM_TRANSFORMS_QUANTIZEMODE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace mlir::tfm {

/// How tfm-quantize quantizes a float model's linear layers.
enum class QuantizeMode {
  /// The weights stay float.
  None,
  /// int8 weights, symmetric, one scale per output feature; the input
  /// quantized to uint8 at every run by its range (quantize_dynamic's
  /// scheme), multiplied as integers.
  Int8,
  /// Weight-only: 4-bit unsigned weights with a scale and a zero point per
  /// block of K (MatMulNBits' asymmetric scheme); the input stays float.
  Int4,
};

/// The mode's name as the CLI spells it ("none", "int8", "int4").
inline llvm::StringRef quantizeModeName(QuantizeMode mode) {
  switch (mode) {
  case QuantizeMode::None:
    return "none";
  case QuantizeMode::Int8:
    return "int8";
  case QuantizeMode::Int4:
    return "int4";
  }
  return "?";
}

/// The values of a command-line or pass option of type QuantizeMode.
inline auto quantizeModeValues() {
  return llvm::cl::values(
      clEnumValN(QuantizeMode::None, "none", "float weights"),
      clEnumValN(QuantizeMode::Int8, "int8",
                 "int8 weights per output feature, inputs quantized at run "
                 "time"),
      clEnumValN(QuantizeMode::Int4, "int4",
                 "4-bit weights in blocks along K, float inputs"));
}

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_QUANTIZEMODE_H
