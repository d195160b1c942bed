//===- WidenContractions.cpp - tfm-widen-contractions ---------------------===//
//
// tfm-tile-gpu-matmul's tensor-core tiles are vector.contract ops of f16
// operands into f32 accumulators, the form vector-to-nvgpu turns into
// mma.sync. MLIR's lowering of vector.contract for the CPU takes only
// operands of the accumulator's type, so the CPU check of the GPU schedule
// (--gpu-schedule-on-cpu) extends the operands first. The extension is
// exact and so is the product of two f16 values in f32, which is what the
// tensor cores compute; only the order of the sums can differ.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_WIDENCONTRACTIONSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

struct WidenContractionsPass
    : public mlir::tfm::impl::WidenContractionsPassBase<WidenContractionsPass> {
  void runOnOperation() override {
    getOperation()->walk([](vector::ContractionOp op) {
      auto accType = dyn_cast<VectorType>(op.getAccType());
      if (!accType || !isa<FloatType>(accType.getElementType()))
        return;
      Type wide = accType.getElementType();
      OpBuilder b(op);
      auto widen = [&](OpOperand &operand) {
        auto type = cast<VectorType>(operand.get().getType());
        if (type.getElementType() == wide)
          return;
        operand.set(b.create<arith::ExtFOp>(op.getLoc(), type.clone(wide),
                                            operand.get()));
      };
      widen(op.getLhsMutable());
      widen(op.getRhsMutable());
    });
  }
};

} // namespace
