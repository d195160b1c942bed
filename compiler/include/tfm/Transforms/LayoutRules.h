//===- LayoutRules.h - What a target reads and writes in place --*- C++ -*-===//
//
// tfm-plan-memory decides where every tensor lives: in the arena, in the
// caller's output buffer, or as a strided view of another tensor's storage.
// Which views are possible depends on what the target's lowering can read
// and write without a copy; a target says so through LayoutRules, which it
// registers under its name. The plan records each decision in the IR
// (`tfm.plan`, TfmAttrs.td), so the lowering reads it rather than deciding
// again.
//
// Views every target takes are decided here: a reshape of storage its
// strides allow, a transpose that only moves unit dimensions (a reshape in
// disguise). A target may also compute a tensor inside its readers, which
// then never stores it (`#tfm.inline`): every target does so for a compare
// that only selects read.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TRANSFORMS_LAYOUTRULES_H
#define TFM_TRANSFORMS_LAYOUTRULES_H

#include "tfm/Conversion/ComputeType.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/abi.h"

#include <memory>
#include <optional>

namespace mlir::tfm {

/// Buffers (arena slots, weights, state slots) start at multiples of this
/// many bytes.
constexpr int64_t kBufferAlignment = TFM_BUFFER_ALIGNMENT;

/// The bytes a tensor of `type` occupies in a buffer; an i1 takes a byte.
int64_t bufferBytes(ShapedType type);

/// `bytes` rounded up to kBufferAlignment.
inline int64_t alignBuffer(int64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

/// Row-major strides of `shape`, in elements.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape);

/// Whether `strides` read a tensor of `shape` densely in row-major order.
/// The stride of a dimension of size 1 never moves a pointer, so it does
/// not matter.
bool isRowMajor(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides);

/// The strides that read a tensor stored with `shape` and `strides` as
/// `newShape` instead, when no copy is needed: each run of new dimensions
/// must split or merge a run of old ones that is contiguous within itself.
std::optional<SmallVector<int64_t>>
reshapeStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
               ArrayRef<int64_t> newShape);

/// A transpose that only moves dimensions of size 1, so the data keeps its
/// order: a reshape in disguise, planned as one (the exporters emit such
/// transposes for batch 1, between batch-first and sequence-first layouts).
bool movesOnlyUnitDims(TransposeOp op);

/// A compare that only selects read, each at the compare's shape: every
/// select computes it inline, so the i1 tensor is never stored.
bool computedInsideSelects(CompareOp op);

/// What a target's lowering can do in place. The defaults are what the
/// backend-neutral linalg lowering does.
class LayoutRules {
public:
  virtual ~LayoutRules();
  /// The target's name, as tfm-plan-memory's `target` option spells it.
  virtual StringRef getTarget() const = 0;

  /// Whether `op` reads operand `index` at any element strides, so that a
  /// transpose feeding it can be a view.
  virtual bool readsStrided(Operation *op, unsigned index) const {
    return false;
  }
  /// Whether `op` writes result `index` at any element strides, so that a
  /// transpose right after it can be written directly.
  virtual bool writesStrided(Operation *op, unsigned index) const {
    return false;
  }

  /// One buffer holding all the results of an op: its bytes, and for each
  /// result its element offset and strides in it.
  struct PackedResults {
    int64_t bytes = 0;
    SmallVector<int64_t> offsets;
    SmallVector<SmallVector<int64_t>> strides;
  };
  /// The packed layout of `op`'s results, when the target computes them all
  /// at once into one buffer.
  virtual std::optional<PackedResults> packsResults(Operation *op) const {
    return std::nullopt;
  }

  /// Whether `op` may write its result over an operand of the result's type
  /// that dies at `op`: elementwise ops, by default.
  virtual bool worksInPlace(Operation *op) const;

  /// Whether `op`'s result is computed by its readers where they read it,
  /// so that it is never stored and `op`'s operands stay alive as long as
  /// they do: a compare that only selects read, by default.
  /// `computeType` is what --dtype lets the kernels round to, which
  /// decides some targets' kernels.
  virtual bool computedInline(Operation *op, ComputeType computeType) const;
};

/// Makes `rules` available to tfm-plan-memory under their target's name.
void registerLayoutRules(std::unique_ptr<LayoutRules> rules);

/// The rules registered for `target`, or null. "generic" names the
/// backend-neutral rules, which are always there.
const LayoutRules *lookupLayoutRules(StringRef target);

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_LAYOUTRULES_H
