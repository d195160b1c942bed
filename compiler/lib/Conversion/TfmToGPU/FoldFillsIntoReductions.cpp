//===- FoldFillsIntoReductions.cpp - tfm-fold-fills-into-reductions -------===//
//
// A reduction of the neutral lowering is a fill of its output and a generic
// that accumulates into it. On the GPU each is a kernel, and the fill's
// only work is to hand the reduction its start:
//
//   linalg.generic {["parallel"]} outs(%sum) { yield 0.0 }
//   linalg.generic {["reduction", "parallel"]} ins(%dy) outs(%sum) {
//     ^bb0(%in, %acc): yield %acc + %in
//   }
//     =>
//   linalg.generic {["reduction", "parallel"]} ins(%dy) outs(%sum) {
//     ^bb0(%in, %acc):
//       %first = linalg.index 0 == 0
//       yield select(%first, 0.0, %acc) + %in
//   }
//
// The loops visit each output first where every reduction index is 0 (they
// count up from 0, and tfm-parallel-dims-first's interchange keeps each
// output's order), so the sum starts from the fill's value as before and
// the stale contents of the buffer are never used.
//
//===----------------------------------------------------------------------===//

#include "BufferPlace.h"

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_FOLDFILLSINTOREDUCTIONSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The value a fill writes to every element of its only output: `op` has
/// no inputs, only parallel loops and the identity map, and yields a
/// constant of its body or a value from above.
Value fillValue(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 0 || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !op.hasPureBufferSemantics() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return {};
  Value v = cast<linalg::YieldOp>(op.getBody()->getTerminator()).getOperand(0);
  if (v.getParentRegion() != &op.getRegion())
    return v;
  return v.getDefiningOp<arith::ConstantOp>() ? v : Value();
}

/// Whether `op` reads or writes an element of `buffer`: through an operand
/// other than `except`, or through a load of its body (or an effect this
/// cannot see).
bool touches(linalg::GenericOp op, Value buffer, OpOperand *except = nullptr) {
  for (OpOperand &operand : op->getOpOperands())
    if (&operand != except && mayOverlap(operand.get(), buffer))
      return true;
  std::optional<SmallVector<Value>> loads = genericBodyReads(op);
  return !loads ||
         llvm::any_of(*loads, [&](Value v) { return mayOverlap(v, buffer); });
}

/// The output of `op` that is `buffer` when `op` reduces into every element
/// of it and reads it nowhere else, with loops that all run; else null.
OpOperand *reducedOutput(linalg::GenericOp op, Value buffer) {
  if (op.getNumReductionLoops() == 0 || !op.hasPureBufferSemantics() ||
      llvm::any_of(op.getStaticLoopRanges(), [](int64_t r) {
        return ShapedType::isDynamic(r) || r <= 0;
      }))
    return nullptr;
  OpOperand *out = nullptr;
  for (OpOperand &init : op.getDpsInitsMutable())
    if (sameBuffer(init.get(), buffer))
      out = &init;
  if (!out)
    return nullptr;
  // Every element written: a map of distinct loops, as many as the
  // buffer's dimensions (linalg checks that their ranges are its sizes).
  AffineMap map = op.getMatchingIndexingMap(out);
  if (!map.isProjectedPermutation() ||
      map.getNumResults() != cast<MemRefType>(buffer.getType()).getRank())
    return nullptr;
  // Nothing else of the op may read the buffer: its start is no longer
  // there.
  return touches(op, buffer, out) ? nullptr : out;
}

/// The reduction that the fill `op` starts, with its output, when nothing
/// between them touches the buffer.
std::pair<linalg::GenericOp, OpOperand *> startedReduction(linalg::GenericOp op,
                                                           Value buffer) {
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    if (isMemoryEffectFree(next))
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(next);
    if (!generic)
      return {};
    if (OpOperand *out = reducedOutput(generic, buffer))
      return {generic, out};
    if (touches(generic, buffer))
      return {};
  }
  return {};
}

/// Makes `op`'s body take `start` in place of `out`'s element where every
/// reduction index is 0.
void startAt(linalg::GenericOp op, OpOperand *out, Value start) {
  Block *body = op.getBody();
  OpBuilder b = OpBuilder::atBlockBegin(body);
  Location loc = op.getLoc();
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
  Value first;
  for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray())) {
    if (it != utils::IteratorType::reduction)
      continue;
    Value index = b.create<linalg::IndexOp>(loc, d);
    Value atZero =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, index, zero);
    first = first ? b.create<arith::AndIOp>(loc, first, atZero).getResult()
                  : atZero;
  }
  // A constant of the fill's body moves into this one.
  if (start.getDefiningOp() &&
      isa<linalg::GenericOp>(start.getDefiningOp()->getParentOp()))
    start = b.clone(*start.getDefiningOp())->getResult(0);
  BlockArgument acc = op.getMatchingBlockArgument(out);
  auto select = b.create<arith::SelectOp>(loc, first, start, acc);
  acc.replaceAllUsesExcept(select, select);
}

struct FoldFillsIntoReductionsPass
    : public mlir::tfm::impl::FoldFillsIntoReductionsPassBase<
          FoldFillsIntoReductionsPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, Value>> fills;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op->getParentOfType<gpu::LaunchOp>())
        return;
      if (Value start = fillValue(op))
        fills.emplace_back(op, start);
    });
    for (auto [fill, start] : fills) {
      Value buffer = fill.getDpsInits()[0];
      auto [reduction, out] = startedReduction(fill, buffer);
      if (!reduction)
        continue;
      startAt(reduction, out, start);
      fill.erase();
    }
  }
};

} // namespace
