//===- ReverseGrid.cpp - tfm-reverse-grid ---------------------------------===//
//
// On the CPU a grid runs as serial loops in ascending order, so a thread
// that reads what a lower thread of the same kernel wrote sees the new
// value, which on a GPU it may not: the exclusive CumSum's merged copies
// passed every schedule check and failed on the device. Running the grid
// backwards as well exposes a dependence between threads in either
// direction as a changed result.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_REVERSEGRIDPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

struct ReverseGridPass
    : public mlir::tfm::impl::ReverseGridPassBase<ReverseGridPass> {
  void runOnOperation() override {
    getOperation().walk([&](scf::ParallelOp loop) {
      if (!loop->hasAttr(gpu::getMappingAttrName()))
        return;
      Block *body = loop.getBody();
      OpBuilder b = OpBuilder::atBlockBegin(body);
      for (auto [iv, lb, ub, step] :
           llvm::zip(loop.getInductionVars(), loop.getLowerBound(),
                     loop.getUpperBound(), loop.getStep())) {
        // tfm-map-to-gpu's grids step by one; i runs as lb + ub - 1 - i.
        auto one = step.getDefiningOp<arith::ConstantIndexOp>();
        if (!one || one.value() != 1) {
          loop.emitError("a mapped loop steps by other than 1; "
                         "tfm-reverse-grid cannot reverse it");
          return signalPassFailure();
        }
        Location loc = loop.getLoc();
        Value last =
            b.create<arith::SubIOp>(loc, b.create<arith::AddIOp>(loc, lb, ub),
                                    b.create<arith::ConstantIndexOp>(loc, 1));
        Value reversed = b.create<arith::SubIOp>(loc, last, iv);
        iv.replaceAllUsesExcept(reversed, reversed.getDefiningOp());
      }
    });
  }
};

} // namespace
