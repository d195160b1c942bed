//===- FuseElementwiseBuffers.cpp - tfm-fuse-elementwise-buffers ----------===//
//
// On the GPU every linalg op of the neutral lowering becomes a kernel, and
// many come in elementwise runs over one shape: a copy and the rounding of
// its result for the tensor cores, the two operands of a GEMM rounded one
// after the other, a bias and then a residual. Each pair merged saves a
// launch, and a pass over memory when the second reads the first's result.
// On tensors linalg's own fusion would do this, but by now the memory plan
// has placed every value, so the merge works on buffers and proves from
// their places that no element reads anything else than before.
//
//===----------------------------------------------------------------------===//

#include "BufferPlace.h"

#include "tfm/Conversion/Passes.h"
#include "tfm/Transforms/LayoutRules.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FUSEELEMENTWISEBUFFERSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// All-parallel, static, one output written through the identity.
bool isElementwise(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumParallelLoops() != op.getNumLoops() ||
      !op.hasPureBufferSemantics() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return false;
  return llvm::none_of(op.getStaticLoopRanges(), ShapedType::isDynamic);
}

/// Whether `op` may run over another shape of as many elements: it reads
/// and writes dense buffers through the identity and asks for no position.
bool reshapeable(linalg::GenericOp op) {
  for (OpOperand &operand : op->getOpOperands()) {
    std::optional<Place> place = placeOf(operand.get());
    if (!place || !place->exact ||
        !op.getMatchingIndexingMap(&operand).isIdentity())
      return false;
  }
  return op.getBody()->getOps<linalg::IndexOp>().empty();
}

/// The merged op when `second` may run fused into `first` (its neighbour
/// before it), else null. When their shapes differ but their element
/// counts do not, `second` runs over `first`'s shape if it can (the
/// neutral lowering copies a value and then reads it reshaped).
linalg::GenericOp fuse(linalg::GenericOp first, linalg::GenericOp second) {
  if (!isElementwise(first) || !isElementwise(second))
    return {};
  SmallVector<int64_t> ranges = first.getStaticLoopRanges();
  bool reshape = ranges != second.getStaticLoopRanges();
  if (reshape && (computeProduct(ranges) !=
                      computeProduct(second.getStaticLoopRanges()) ||
                  !reshapeable(second)))
    return {};
  Value x = first.getDpsInits()[0], y = second.getDpsInits()[0];
  // What a body loads at a computed position, another thread of the merged
  // kernel may be writing: the second's loads must miss the first's output,
  // and the second's output what the first loads. (CumSum's shifted copies
  // read the previous shift's output this way.)
  std::optional<SmallVector<Value>> firstLoads = genericBodyReads(first),
                                    secondLoads = genericBodyReads(second);
  if (!firstLoads || !secondLoads)
    return {};
  if (llvm::any_of(*secondLoads, [&](Value r) { return mayOverlap(r, x); }) ||
      llvm::any_of(*firstLoads, [&](Value r) { return mayOverlap(r, y); }))
    return {};
  // The second's inputs: the first's output through the identity (read
  // from the register instead), or buffers the first does not write.
  SmallVector<bool> readsResult;
  for (OpOperand *in : second.getDpsInputOperands()) {
    bool same = sameBuffer(in->get(), x);
    if (same && !second.getMatchingIndexingMap(in).isIdentity())
      return {};
    if (!same && mayOverlap(in->get(), x))
      return {};
    readsResult.push_back(same);
  }
  // The second's output, written at an element after the first read its
  // inputs there: none of them, unless the very buffer read there.
  bool inPlace = sameBuffer(y, x);
  if (!inPlace && mayOverlap(y, x))
    return {};
  for (OpOperand *in : first.getDpsInputOperands())
    if (mayOverlap(y, in->get()) &&
        !(sameBuffer(y, in->get()) &&
          first.getMatchingIndexingMap(in).isIdentity()))
      return {};

  OpBuilder b(second);
  AffineMap identity = first.getMatchingIndexingMap(first.getDpsInitOperand(0));
  // The second's operand, as the merged op reads it.
  auto operandOf = [&](OpOperand *operand) -> std::pair<Value, AffineMap> {
    if (!reshape)
      return {operand->get(), second.getMatchingIndexingMap(operand)};
    auto type = MemRefType::get(
        ranges, getElementTypeOrSelf(operand->get().getType()),
        StridedLayoutAttr::get(b.getContext(), 0, rowMajorStrides(ranges)));
    return {b.create<memref::ReinterpretCastOp>(
                second.getLoc(), type, operand->get(), 0, ranges,
                rowMajorStrides(ranges)),
            identity};
  };
  SmallVector<Value> inputs(first.getDpsInputs());
  SmallVector<AffineMap> maps;
  for (OpOperand *in : first.getDpsInputOperands())
    maps.push_back(first.getMatchingIndexingMap(in));
  for (auto [in, same] : llvm::zip(second.getDpsInputOperands(), readsResult))
    if (!same) {
      auto [value, map] = operandOf(in);
      inputs.push_back(value);
      maps.push_back(map);
    }
  SmallVector<Value> outputs{x};
  maps.push_back(identity);
  if (!inPlace) {
    outputs.push_back(operandOf(second.getDpsInitOperand(0)).first);
    maps.push_back(identity);
  }

  return b.create<linalg::GenericOp>(
      second.getLoc(), inputs, outputs, maps, first.getIteratorTypesArray(),
      [&](OpBuilder &ob, Location loc, ValueRange args) {
        IRMapping map;
        Block *a = first.getBody();
        unsigned firstIns = first.getNumDpsInputs();
        for (unsigned i = 0; i < firstIns; ++i)
          map.map(a->getArgument(i), args[i]);
        map.map(a->getArgument(firstIns), args[inputs.size()]);
        for (Operation &op : a->without_terminator())
          ob.clone(op, map);
        Value result = map.lookupOrDefault(
            cast<linalg::YieldOp>(a->getTerminator()).getOperand(0));

        Block *s = second.getBody();
        unsigned next = firstIns;
        for (auto [i, same] : llvm::enumerate(readsResult))
          map.map(s->getArgument(i), same ? result : args[next++]);
        // Rewriting the first's output in place, the second reads the
        // value the first just wrote there.
        map.map(s->getArgument(readsResult.size()),
                inPlace ? result : args[inputs.size() + 1]);
        for (Operation &op : s->without_terminator())
          ob.clone(op, map);
        Value last = map.lookupOrDefault(
            cast<linalg::YieldOp>(s->getTerminator()).getOperand(0));
        SmallVector<Value> yields;
        if (!inPlace)
          yields.push_back(result);
        yields.push_back(last);
        ob.create<linalg::YieldOp>(loc, yields);
      });
}

struct FuseElementwiseBuffersPass
    : public mlir::tfm::impl::FuseElementwiseBuffersPassBase<
          FuseElementwiseBuffersPass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      linalg::GenericOp previous;
      for (Operation &op : llvm::make_early_inc_range(block)) {
        auto generic = dyn_cast<linalg::GenericOp>(op);
        if (!generic) {
          // A pure op (a view, a constant) may stand between the two.
          if (!isMemoryEffectFree(&op))
            previous = {};
          continue;
        }
        if (previous)
          if (linalg::GenericOp fused = fuse(previous, generic)) {
            previous.erase();
            generic.erase();
            previous = fused;
            continue;
          }
        previous = generic;
      }
    }
  }
};

} // namespace
