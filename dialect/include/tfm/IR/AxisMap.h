//===- AxisMap.h - How an op's results' axes follow its operands' -*- C++
//-*-===//
//
// Two passes follow one axis of the inputs through a whole model: the
// sequence that a range of lengths pads (tfm-exact-padding) and the
// positions that a KV cache decodes (tfm-derive-kv-cache). Each needs, of
// every op, the same fact: which operand axes each result axis is read
// from, and which operand axes the op reads across (sums, normalizes,
// slices). Each op states it once, through AxisMapOpInterface, and the
// passes differ only in what they track along an axis.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_AXISMAP_H
#define TFM_IR_AXISMAP_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace mlir {
class Operation;
namespace tfm {

/// Axis `axis` of operand `operand`.
struct OperandAxis {
  unsigned operand = 0;
  int64_t axis = 0;
  bool operator==(const OperandAxis &o) const {
    return operand == o.operand && axis == o.axis;
  }
};

/// What an op does across one operand axis, beyond reading it position
/// by position.
enum class AxisUse : uint8_t {
  /// A product sums over it, against `partner` (a matmul's inner axis; a
  /// linear layer's input features against its weights).
  Contracted,
  /// Summed away (a sum that is zero where every term is).
  Summed,
  /// Reduced away by a mean, a maximum or another reduction.
  Reduced,
  /// Kept, but every result element reads every position of it (a softmax,
  /// a norm's statistics).
  Normalized,
  /// Positions picked out of it by an index operand (a gather).
  Indexed,
  /// Kept, read at fixed positions (a slice that is not the whole axis).
  Sliced,
  /// Cut into the results.
  Split,
  /// The operands are joined along it.
  Concatenated,
  /// The top k along it are chosen.
  Ranked,
  /// Kept, each result position reading a window of positions around it
  /// (a convolution's spatial axes).
  Windowed,
};

struct AxisUseOf {
  OperandAxis axis;
  AxisUse use;
  /// Contracted: the axis it is summed against.
  std::optional<OperandAxis> partner;
  /// Sliced, Indexed: the lowest and highest positions read, where the op
  /// fixes them (a slice; a gather of constant indices).
  std::optional<int64_t> lowest, highest;
};

/// How zeros pass through an elementwise op: a product is zero where any
/// factor is, a sum where every term is, a quotient or a unary map where
/// its first operand is.
enum class ZeroRule : uint8_t { none, any, all, first };

/// A reshape's axes in groups: input axes [inBegin, inEnd) hold the same
/// elements, in the same order, as result axes [outBegin, outEnd), and no
/// smaller ranges do. Axes of size 1 form groups of their own, with an
/// empty range on the other side.
struct ReshapeGroup {
  int64_t inBegin, inEnd, outBegin, outEnd;
};

struct AxisMap {
  /// For each axis of the results (every result of the op has these axes),
  /// the operand axes it is read from, aligned as numpy broadcasts (an
  /// operand axis of size 1 is listed, and broadcast); none for an axis
  /// the op makes (an embedding's features, a linear layer's outputs).
  llvm::SmallVector<llvm::SmallVector<OperandAxis, 2>, 6> results;
  /// The operand axes the op reads across.
  llvm::SmallVector<AxisUseOf, 2> uses;
  /// Operands read whole into every result element: weights, tables, a
  /// norm's scale. An axis they follow would mix positions.
  llvm::SmallVector<unsigned, 2> whole;
  /// A reshape's groups; `results` is empty then.
  llvm::SmallVector<ReshapeGroup, 6> groups;
  bool isReshape = false;
  ZeroRule zeros = ZeroRule::none;

  /// The uses of operand axis `a`.
  llvm::SmallVector<const AxisUseOf *, 1> usesOf(OperandAxis a) const {
    llvm::SmallVector<const AxisUseOf *, 1> found;
    for (const AxisUseOf &u : uses)
      if (u.axis == a)
        found.push_back(&u);
    return found;
  }
};

/// The groups of a reshape from `in` to `out` (static shapes).
llvm::SmallVector<ReshapeGroup, 6> reshapeGroups(llvm::ArrayRef<int64_t> in,
                                                 llvm::ArrayRef<int64_t> out);

} // namespace tfm
} // namespace mlir

#endif // TFM_IR_AXISMAP_H
