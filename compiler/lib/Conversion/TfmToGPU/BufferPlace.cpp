//===- BufferPlace.cpp - Where a planned buffer lies ----------------------===//

#include "BufferPlace.h"

#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Transforms/LayoutRules.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <numeric>

using namespace mlir;
using namespace mlir::tfm;

std::optional<Place> mlir::tfm::placeOf(Value buffer) {
  auto type = dyn_cast<MemRefType>(buffer.getType());
  if (!type)
    return std::nullopt;
  auto dense = [&]() {
    return type.hasStaticShape() && type.getLayout().isIdentity();
  };
  if (auto arg = dyn_cast<BlockArgument>(buffer)) {
    if (!isa<FunctionOpInterface>(arg.getOwner()->getParentOp()))
      return std::nullopt;
    return Place{arg, 0, dense() ? bufferBytes(type) : -1, dense()};
  }
  if (auto view = buffer.getDefiningOp<memref::ViewOp>()) {
    std::optional<Place> source = placeOf(view.getSource());
    std::optional<int64_t> shift = getConstantIntValue(view.getByteShift());
    if (!source)
      return std::nullopt;
    if (!shift || !source->exact || !dense())
      return Place{source->root, source->begin, source->end, false};
    return Place{source->root, source->begin + *shift,
                 source->begin + *shift + bufferBytes(type), true};
  }
  // A dense reinterpret_cast at a constant offset of a dense buffer: the
  // neutral lowering's reshapes.
  if (auto recast = buffer.getDefiningOp<memref::ReinterpretCastOp>()) {
    std::optional<Place> source = placeOf(recast.getSource());
    auto sourceType = dyn_cast<MemRefType>(recast.getSource().getType());
    int64_t offset;
    SmallVector<int64_t> strides;
    if (source && source->exact && sourceType &&
        sourceType.getLayout().isIdentity() && type.hasStaticShape() &&
        succeeded(getStridesAndOffset(type, strides, offset)) &&
        strides == rowMajorStrides(type.getShape()) &&
        !ShapedType::isDynamic(offset)) {
      int64_t begin =
          source->begin +
          offset * bufferBytes(MemRefType::get({}, type.getElementType()));
      return Place{source->root, begin, begin + bufferBytes(type), true};
    }
  }
  // A subview or a reshape lies within its source; a reinterpret_cast
  // anywhere from its source's start on.
  if (auto viewLike = buffer.getDefiningOp<ViewLikeOpInterface>()) {
    std::optional<Place> source = placeOf(viewLike.getViewSource());
    if (!source)
      return std::nullopt;
    if (isa<memref::ReinterpretCastOp>(viewLike.getOperation()))
      source->end = -1;
    source->exact = false;
    return source;
  }
  return std::nullopt;
}

bool mlir::tfm::overlap(const Place &a, const Place &b) {
  if (a.root != b.root)
    return false;
  return (b.end < 0 || a.begin < b.end) && (a.end < 0 || b.begin < a.end);
}

bool mlir::tfm::sameBuffer(Value a, Value b) {
  if (a == b)
    return true;
  if (getElementTypeOrSelf(a.getType()) != getElementTypeOrSelf(b.getType()))
    return false;
  std::optional<Place> pa = placeOf(a), pb = placeOf(b);
  return pa && pb && pa->exact && pb->exact && pa->root == pb->root &&
         pa->begin == pb->begin && pa->end == pb->end;
}

/// Whether `a` and `b` are subviews of one buffer whose boxes miss each
/// other along some dimension: the columns of a packed projection written
/// part by part.
static bool disjointBoxes(Value a, Value b) {
  auto sa = a.getDefiningOp<memref::SubViewOp>(),
       sb = b.getDefiningOp<memref::SubViewOp>();
  if (!sa || !sb || !sameBuffer(sa.getSource(), sb.getSource()))
    return false;
  // A rank-reducing subview's dimensions no longer line up with its
  // source's.
  int64_t rank = sa.getSourceType().getRank();
  if (sa.getType().getRank() != rank || sb.getType().getRank() != rank ||
      sb.getSourceType().getRank() != rank)
    return false;
  auto all = [](ArrayRef<int64_t> xs) {
    return llvm::none_of(xs, ShapedType::isDynamic);
  };
  if (!all(sa.getStaticOffsets()) || !all(sa.getStaticSizes()) ||
      !all(sa.getStaticStrides()) || !all(sb.getStaticOffsets()) ||
      !all(sb.getStaticSizes()) || !all(sb.getStaticStrides()))
    return false;
  for (int64_t d = 0; d < rank; ++d) {
    // The box's first and one past its last index along d.
    auto span = [&](memref::SubViewOp s) {
      int64_t first = s.getStaticOffsets()[d], size = s.getStaticSizes()[d];
      return std::pair(first,
                       size ? first + (size - 1) * s.getStaticStrides()[d] + 1
                            : first);
    };
    auto [a0, a1] = span(sa);
    auto [b0, b1] = span(sb);
    if (a1 <= b0 || b1 <= a0)
      return true;
  }
  return false;
}

bool mlir::tfm::mayOverlap(Value a, Value b) {
  if (a == b)
    return true;
  if (disjointBoxes(a, b))
    return false;
  std::optional<Place> pa = placeOf(a), pb = placeOf(b);
  return !pa || !pb || overlap(*pa, *pb);
}

int64_t mlir::tfm::pointerAlignment(Value buffer) {
  auto type = dyn_cast<MemRefType>(buffer.getType());
  if (!type)
    return 1;
  int64_t element = std::max<int64_t>(
      1, bufferBytes(MemRefType::get({}, type.getElementType())));
  if (auto arg = dyn_cast<BlockArgument>(buffer))
    return isa<FunctionOpInterface>(arg.getOwner()->getParentOp())
               ? kBufferAlignment
               : element;
  if (auto view = buffer.getDefiningOp<memref::ViewOp>()) {
    std::optional<int64_t> shift = getConstantIntValue(view.getByteShift());
    if (!shift)
      return element;
    return std::max<int64_t>(element,
                             std::gcd(pointerAlignment(view.getSource()),
                                      *shift ? *shift : kBufferAlignment));
  }
  if (isa_and_nonnull<memref::SubViewOp, memref::ReinterpretCastOp,
                      memref::ExpandShapeOp, memref::CollapseShapeOp,
                      memref::CastOp>(buffer.getDefiningOp()))
    return std::max<int64_t>(
        element,
        pointerAlignment(
            cast<ViewLikeOpInterface>(buffer.getDefiningOp()).getViewSource()));
  return element;
}

bool mlir::tfm::vectorAligned(Value buffer,
                              ArrayRef<std::optional<int64_t>> leading,
                              int64_t lanes) {
  auto type = dyn_cast<MemRefType>(buffer.getType());
  if (!type || type.getRank() != int64_t(leading.size()) + 1)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(getStridesAndOffset(type, strides, offset)) ||
      strides.back() != 1 || ShapedType::isDynamic(offset) || offset % lanes)
    return false;
  int64_t element = bufferBytes(MemRefType::get({}, type.getElementType()));
  if (pointerAlignment(buffer) % (lanes * element))
    return false;
  for (auto [index, stride] : llvm::zip(leading, strides)) {
    if (ShapedType::isDynamic(stride))
      return false;
    if (index ? (*index * stride) % lanes : stride % lanes)
      return false;
  }
  return true;
}

SmallVector<Value> mlir::tfm::loadAlignedVector(OpBuilder &b, Location loc,
                                                Value buffer,
                                                ValueRange indices, int64_t n) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  auto load = b.create<vector::LoadOp>(loc, VectorType::get({n}, element),
                                       buffer, indices);
  load->setAttr(
      kVectorAlignmentAttrName,
      b.getI64IntegerAttr(n * bufferBytes(MemRefType::get({}, element))));
  SmallVector<Value> elements;
  for (int64_t e = 0; e < n; ++e)
    elements.push_back(b.create<vector::ExtractOp>(loc, load, e));
  return elements;
}

void mlir::tfm::storeAlignedVector(OpBuilder &b, Location loc,
                                   ValueRange elements, Value buffer,
                                   ValueRange indices) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  int64_t n = elements.size();
  Value vector = b.create<vector::FromElementsOp>(
      loc, VectorType::get({n}, element), elements);
  auto store = b.create<vector::StoreOp>(loc, vector, buffer, indices);
  store->setAttr(
      kVectorAlignmentAttrName,
      b.getI64IntegerAttr(n * bufferBytes(MemRefType::get({}, element))));
}

std::optional<SmallVector<Value>>
mlir::tfm::genericBodyReads(linalg::GenericOp op) {
  SmallVector<Value> reads;
  WalkResult walk = op.getBody()->walk([&](Operation *inner) {
    if (isMemoryEffectFree(inner))
      return WalkResult::advance();
    auto effects = dyn_cast<MemoryEffectOpInterface>(inner);
    if (!effects || inner->getNumRegions())
      return WalkResult::interrupt();
    SmallVector<MemoryEffects::EffectInstance> list;
    effects.getEffects(list);
    for (MemoryEffects::EffectInstance &effect : list) {
      if (!isa<MemoryEffects::Read>(effect.getEffect()) || !effect.getValue())
        return WalkResult::interrupt();
      reads.push_back(effect.getValue());
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return std::nullopt;
  return reads;
}
