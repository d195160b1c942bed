//===- ParallelDimsFirst.cpp - tfm-parallel-dims-first -------------------===//
//
// A reduction iterator before a parallel one makes the loops that
// convert-linalg-to-parallel-loops builds start with a serial scf.for, and
// tfm-map-to-gpu maps only an outermost scf.parallel to the grid: the whole
// op then ran on one thread (the column sums of the backward pass, a norm's
// scale and bias gradients among them), and ptxas spilled the unrolled
// loops of the largest. Interchanged, the parallel dimensions come first and
// each thread walks its output's reduction, in the order it had.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_PARALLELDIMSFIRSTPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;

namespace {

/// The new order of `op`'s dimensions: the parallel ones, then the others,
/// each in its order; empty when they are in that order already.
SmallVector<unsigned> parallelFirst(linalg::GenericOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<unsigned> order;
  for (auto [d, it] : llvm::enumerate(iterators))
    if (it == utils::IteratorType::parallel)
      order.push_back(d);
  for (auto [d, it] : llvm::enumerate(iterators))
    if (it != utils::IteratorType::parallel)
      order.push_back(d);
  for (auto [position, d] : llvm::enumerate(order))
    if (position != d)
      return order;
  return {};
}

struct ParallelDimsFirstPass
    : public mlir::tfm::impl::ParallelDimsFirstPassBase<ParallelDimsFirstPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!op->getParentOfType<gpu::LaunchOp>())
        generics.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : generics) {
      SmallVector<unsigned> order = parallelFirst(op);
      if (order.empty())
        continue;
      rewriter.setInsertionPoint(op);
      if (failed(linalg::interchangeGenericOp(rewriter, op, order)))
        return signalPassFailure();
    }
  }
};

} // namespace
