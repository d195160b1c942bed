//===- Tensor.h - Host tensors of the reference interpreter -----*- C++ -*-===//
//
// The interpreter is the oracle of every later test, so its data model is
// the simplest one that is exact: floating-point and boolean elements are
// doubles (f32, f16 and bf16 values and i1 masks are all represented
// exactly), integer elements are int64 (indices, shapes and the INT64_MAX
// that ONNX writes for "to the end" stay exact, which doubles would not);
// a u64 element is held as its bit pattern and read back unsigned.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_REFERENCE_TENSOR_H
#define TFM_REFERENCE_TENSOR_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlir::tfm::reference {

/// The element types a tfm program can carry at its boundary.
enum class ElementKind {
  F32, F16, BF16, F64, I1, I32, I64, I8, I16, U8, U16, U32, U64, I4, U4
};

/// Returns "f32", "i64", ... as MLIR spells them.
const char *elementKindName(ElementKind kind);

/// Whether the kind holds floating-point values.
inline bool isFloatKind(ElementKind kind) {
  return kind == ElementKind::F32 || kind == ElementKind::F16 ||
         kind == ElementKind::BF16 || kind == ElementKind::F64;
}

/// Whether the kind holds integers (kept exactly, as int64).
inline bool isIntKind(ElementKind kind) {
  return !isFloatKind(kind) && kind != ElementKind::I1;
}

/// Whether the kind holds unsigned integers.
inline bool isUnsignedKind(ElementKind kind) {
  return kind == ElementKind::U8 || kind == ElementKind::U16 ||
         kind == ElementKind::U32 || kind == ElementKind::U64 ||
         kind == ElementKind::U4;
}

/// Rounds `value` to what an element of the float or i1 `kind` holds.
double roundToKind(double value, ElementKind kind);

/// `value` as an element of the integer `kind`: narrower kinds wrap to
/// their width, as a cast does.
int64_t wrapToKind(int64_t value, ElementKind kind);

/// The range of the integer `kind` below 64 bits, as [lowest, highest].
std::pair<int64_t, int64_t> integerRange(ElementKind kind);

/// A dense, row-major host tensor.
struct Tensor {
  ElementKind kind = ElementKind::F32;
  std::vector<int64_t> shape;
  /// The elements of a float or i1 tensor.
  std::vector<double> data;
  /// The elements of an integer tensor.
  std::vector<int64_t> ints;

  Tensor() = default;
  /// Zeros of `kind` and `shape`.
  Tensor(ElementKind kind, std::vector<int64_t> shape);
  /// `values` as elements of `kind`; for an integer kind each must be an
  /// integer that a double holds exactly.
  Tensor(ElementKind kind, std::vector<int64_t> shape,
         std::vector<double> values);
  /// `values` as elements of the integer `kind`.
  static Tensor ofInts(ElementKind kind, std::vector<int64_t> shape,
                       std::vector<int64_t> values);

  static int64_t numElementsOf(const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  int64_t numElements() const { return numElementsOf(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool isInt() const { return isIntKind(kind); }

  /// Element `i` as a double (exact but for integers beyond 2^53).
  double get(int64_t i) const {
    if (!isInt())
      return data[i];
    return kind == ElementKind::U64
               ? static_cast<double>(static_cast<uint64_t>(ints[i]))
               : static_cast<double>(ints[i]);
  }
  /// Element `i` as an integer (a float element truncated, saturating).
  int64_t getInt(int64_t i) const;
  /// Sets element `i` to `v`: a float kind holds it in double precision,
  /// as every op computes (casts round); an integer kind truncates,
  /// saturating at int64's range (u64's for u64) and wrapping to a
  /// narrower kind's.
  void set(int64_t i, double v);
  /// Sets element `i` to the integer `v` (wrapped to the kind's width).
  void setInt(int64_t i, int64_t v);
  /// Sets element `i` to element `j` of `from`, a tensor of the same kind.
  void copyElement(int64_t i, const Tensor &from, int64_t j) {
    if (isInt())
      ints[i] = from.ints[j];
    else
      data[i] = from.data[j];
  }

  /// The elements as doubles, for printing and comparing.
  std::vector<double> asDoubles() const;

  /// "tensor<2x3xf32>", as MLIR prints the type.
  std::string typeString() const;
};

} // namespace mlir::tfm::reference

#endif // TFM_REFERENCE_TENSOR_H
