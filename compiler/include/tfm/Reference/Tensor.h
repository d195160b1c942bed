//===- Tensor.h - Host tensors of the reference interpreter -----*- C++ -*-===//
//
// The interpreter is the oracle of every later test, so its data model is
// deliberately the simplest one: every element, of any type, is a double.
// f32, f16 and bf16 values, i32/i64 indices below 2^53 and i1 masks are all
// represented exactly.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_REFERENCE_TENSOR_H
#define TFM_REFERENCE_TENSOR_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::tfm::reference {

/// The element types a tfm program can carry at its boundary.
enum class ElementKind { F32, F16, BF16, F64, I1, I32, I64 };

/// Returns "f32", "i64", ... as MLIR spells them.
const char *elementKindName(ElementKind kind);

/// Whether the kind holds floating-point values.
inline bool isFloatKind(ElementKind kind) {
  return kind == ElementKind::F32 || kind == ElementKind::F16 ||
         kind == ElementKind::BF16 || kind == ElementKind::F64;
}

/// A dense, row-major host tensor.
struct Tensor {
  ElementKind kind = ElementKind::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;

  Tensor() = default;
  Tensor(ElementKind kind, std::vector<int64_t> shape)
      : kind(kind), shape(std::move(shape)), data(numElementsOf(this->shape)) {}
  Tensor(ElementKind kind, std::vector<int64_t> shape, std::vector<double> data)
      : kind(kind), shape(std::move(shape)), data(std::move(data)) {}

  static int64_t numElementsOf(const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  int64_t numElements() const { return numElementsOf(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }

  /// "tensor<2x3xf32>", as MLIR prints the type.
  std::string typeString() const;
};

} // namespace mlir::tfm::reference

#endif // TFM_REFERENCE_TENSOR_H
