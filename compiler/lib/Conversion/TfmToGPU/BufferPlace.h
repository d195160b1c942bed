//===- BufferPlace.h - Where a planned buffer lies --------------*- C++ -*-===//
//
// After the memory plan every buffer of an entry is a view at a constant
// offset of one of the entry's arguments (the arena, the weights, the
// state). The GPU schedule's passes that reorder or merge work on buffers
// prove from these places that no element is read or written other than
// before; an unknown place overlaps everything.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOGPU_BUFFERPLACE_H
#define TFM_CONVERSION_TFMTOGPU_BUFFERPLACE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace mlir::tfm {

/// Where a buffer lies: within bytes [begin, end) of `root`, an argument of
/// the entry (end -1: up to the root's end, as far as is known). `exact`
/// when it is a dense buffer that starts at `begin` and ends at `end`.
struct Place {
  Value root;
  int64_t begin = 0, end = -1;
  bool exact = false;
};

/// The place of `buffer`, when it is an entry argument or a chain of views
/// of one.
std::optional<Place> placeOf(Value buffer);

/// Whether two places may share a byte. Distinct arguments of an entry
/// never do: the runtime passes separate allocations.
bool overlap(const Place &a, const Place &b);

/// Whether `a` and `b` are the same elements in the same order: one value,
/// or dense buffers of one element type at one place.
bool sameBuffer(Value a, Value b);

/// Whether `a` and `b` may share an element; unknown places may.
bool mayOverlap(Value a, Value b);

/// The bytes that the address `buffer`'s layout offset counts from (its
/// aligned pointer) is known to be a multiple of: the runtime's buffer
/// alignment for an entry argument, less after a view's byte shift; a
/// subview or reshape keeps its source's pointer and moves its offset into
/// the layout. At least the element's size.
int64_t pointerAlignment(Value buffer);

/// Whether `lanes` elements of `buffer` from index `[i..., c]` are one
/// aligned vector for every `c` that is a multiple of `lanes`: the last
/// dimension has unit stride, and the layout's offset, each leading index
/// times its stride (`leading[d]` when constant, any value otherwise) and
/// the pointer keep the vector's alignment.
bool vectorAligned(Value buffer, ArrayRef<std::optional<int64_t>> leading,
                   int64_t lanes);

/// `n` elements of `buffer` from `indices` on, read as one vector access
/// marked with its alignment (`tfm.alignment`: n elements' bytes), which
/// vectorAligned must have proven; returns the elements.
SmallVector<Value> loadAlignedVector(OpBuilder &b, Location loc, Value buffer,
                                     ValueRange indices, int64_t n);
/// `elements` written from `indices` on as one marked vector access.
void storeAlignedVector(OpBuilder &b, Location loc, ValueRange elements,
                        Value buffer, ValueRange indices);

/// The buffers that `op`'s body reads itself, beyond its operands: the
/// neutral lowering's slices and gathers load at computed positions.
/// Null when a body op's effects are unknown or it writes memory.
std::optional<SmallVector<Value>> genericBodyReads(linalg::GenericOp op);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOGPU_BUFFERPLACE_H
