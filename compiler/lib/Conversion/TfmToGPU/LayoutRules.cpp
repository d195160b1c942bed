//===- LayoutRules.cpp - What the GPU's kernels read and write in place ---===//
//
// Most ops are generated loop nests that read and write dense buffers, as
// the backend-neutral lowering does; so the GPU takes the generic rules
// (views of reshapes, in-place elementwise ops) under its own name. Both
// attention kernels read their query, keys and values at any strides: the
// thread-per-row kernel through strided memrefs, the tensor-core one in
// the kernel that rounds them to 16 bits. So the transposes that split
// the projections into heads are views, not copies.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Transforms/LayoutRules.h"

#include <mutex>

using namespace mlir;
using namespace mlir::tfm;

namespace {
class GPULayoutRules : public LayoutRules {
public:
  StringRef getTarget() const override { return "cuda"; }

  bool readsStrided(Operation *op, unsigned index) const override {
    return isa<AttentionOp>(op) && index < 3;
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
