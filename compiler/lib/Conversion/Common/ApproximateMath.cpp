//===- ApproximateMath.cpp - tfm-approximate-math -------------------------===//
//
// erf and tanh as the math dialect's polynomial approximations, before the
// glue loops reach LLVM (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_APPROXIMATEMATHPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;

namespace {
struct ApproximateMathPass
    : tfm::impl::ApproximateMathPassBase<ApproximateMathPass> {
  using ApproximateMathPassBase::ApproximateMathPassBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populatePolynomialApproximateErfPattern(patterns);
    populatePolynomialApproximateTanhPattern(patterns);
    if (all) {
      populateExpandPowFPattern(patterns);
      populateMathPolynomialApproximationPatterns(patterns);
      // The approximations' fma has no lowering in kernels; NVPTX fuses the
      // multiply and add again.
      populateExpandFmaFPattern(patterns);
    }
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
