//===- LayoutRules.cpp - What the GPU's kernels read and write in place ---===//
//
// Most ops are generated loop nests that read and write dense buffers, as
// the backend-neutral lowering does; so the GPU takes the generic rules
// (views of reshapes, in-place elementwise ops) under its own name. The
// attention kernels read their query, keys and values at any strides: the
// warp-per-row kernels (forward and backward) through strided memrefs, the
// tensor-core one in the kernel that rounds them to 16 bits. So the
// transposes that split the projections into heads are views, not copies,
// and so are those of the backward pass's output gradient, and the one
// that merges the heads of a gradient back right after its kernel. A rotary
// embedding that an attention rotates while it loads (chooseGPUKernel's
// in-attention) is never stored, and what it reads lives until that
// attention.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/LayoutRules.h"
#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include <mutex>

using namespace mlir;
using namespace mlir::tfm;

namespace {
class GPULayoutRules : public LayoutRules {
public:
  StringRef getTarget() const override { return "cuda"; }

  bool readsStrided(Operation *op, unsigned index) const override {
    // Query, key and value; and for the backward pass, the forward result
    // and its gradient too. Not the mask, which the kernels read densely.
    if (isa<AttentionOp>(op))
      return index < 3;
    return isa<AttentionGradOp>(op) && index < 5;
  }
  // Every attention kernel, and the neutral lowering they fall back on,
  // writes its results at any strides.
  bool writesStrided(Operation *op, unsigned) const override {
    return isa<AttentionOp, AttentionGradOp>(op);
  }
  bool computedInline(Operation *op, ComputeType computeType) const override {
    return LayoutRules::computedInline(op, computeType) ||
           (isa<RotaryOp>(op) &&
            getsGPUKernel(op, GPUKernel::InAttention,
                          narrowOperandType(computeType, op->getContext())));
  }
};
} // namespace

void mlir::tfm::registerGPUTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerLayoutRules(std::make_unique<GPULayoutRules>());
    registerTargetLowerings("cuda", populateTfmToGPULowerings);
  });
}
