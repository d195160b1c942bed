//===- LayoutRules.cpp - What the GPU's kernels read and write in place ---===//
//
// Every op is a generated loop nest that reads and writes dense buffers, as
// the backend-neutral lowering does; so the GPU takes the generic rules
// (views of reshapes, in-place elementwise ops) under its own name, which
// its library kernels will extend.
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
};
} // namespace

void mlir::tfm::registerGPUTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerLayoutRules(std::make_unique<GPULayoutRules>());
    registerTargetLowerings("cuda", populateTfmToGPULowerings);
  });
}
