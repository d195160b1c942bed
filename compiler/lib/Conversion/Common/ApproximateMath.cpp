//===- ApproximateMath.cpp - tfm-approximate-math -------------------------===//
//
// erf and tanh as the math dialect's polynomial approximations, before the
// glue loops reach LLVM (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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
/// a rem b as a - b * trunc(a / b). NVPTX has no frem; powf's expansion uses
/// it to test whether an exponent is odd, which this computes exactly for
/// quotients below 2^24 (f32) or 2^53 (f64).
struct ExpandRemF : OpRewritePattern<arith::RemFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::RemFOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value a = op.getLhs(), b = op.getRhs();
    // LLVM's trunc intrinsic directly: the NVVM conversion leaves
    // math.trunc alone.
    Value q = rewriter.create<LLVM::FTruncOp>(
        loc, rewriter.create<arith::DivFOp>(loc, a, b));
    rewriter.replaceOpWithNewOp<arith::SubFOp>(
        op, a, rewriter.create<arith::MulFOp>(loc, b, q));
    return success();
  }
};

/// A math op the NVVM conversion leaves alone, as the LLVM intrinsic that
/// NVPTX selects to one instruction (cvt.rzi, cvt.rni).
template <typename MathOp, typename LLVMOp>
struct MathToIntrinsic : OpRewritePattern<MathOp> {
  using OpRewritePattern<MathOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(MathOp op,
                                PatternRewriter &rewriter) const override {
    if (isa<ShapedType>(op.getType()))
      return failure();
    rewriter.replaceOpWithNewOp<LLVMOp>(op, op.getOperand());
    return success();
  }
};

/// An f64 function of a widened f32 value, taken in f32 and widened after:
/// the math dialect approximates f32 functions only, and the value holds no
/// more than f32's precision. (A loss accumulated in f64 takes each row's
/// log-sum-exp so.)
template <typename MathOp> struct NarrowToF32 : OpRewritePattern<MathOp> {
  using OpRewritePattern<MathOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(MathOp op,
                                PatternRewriter &rewriter) const override {
    auto widened = op->getOperand(0).template getDefiningOp<arith::ExtFOp>();
    if (!widened || !op.getType().isF64() || !widened.getIn().getType().isF32())
      return failure();
    Value narrow = rewriter.create<MathOp>(op.getLoc(), widened.getIn());
    rewriter.replaceOpWithNewOp<arith::ExtFOp>(op, op.getType(), narrow);
    return success();
  }
};

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
      patterns.add<ExpandRemF, MathToIntrinsic<math::TruncOp, LLVM::FTruncOp>,
                   MathToIntrinsic<math::RoundEvenOp, LLVM::RoundEvenOp>,
                   NarrowToF32<math::LogOp>, NarrowToF32<math::Log1pOp>,
                   NarrowToF32<math::Log2Op>, NarrowToF32<math::ExpOp>,
                   NarrowToF32<math::ExpM1Op>, NarrowToF32<math::TanhOp>,
                   NarrowToF32<math::ErfOp>>(&getContext());
    }
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
