//===- TfmToGPU.h - The CUDA target -----------------------------*- C++ -*-===//
//
// The GPU target compiles a whole entry to device code: every op becomes
// linalg on buffers (the backend-neutral TfmToLinalg lowerings), every
// linalg op a loop nest mapped to blocks and threads (tfm-map-to-gpu), and
// each nest one kernel, which MLIR's NVVM pipeline compiles to PTX. The
// entry function stays on the host: it offsets device pointers into the
// arena, the weights and the state, and launches the kernels in order
// through host->launch (tfm-lower-gpu-launches); the runtime's CUDA device
// loads the PTX once per session.
//
// Host code never reads device memory, except through host->read_device
// where it must: the index checks read the first position out of range.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_TFMTOGPU_TFMTOGPU_H
#define TFM_CONVERSION_TFMTOGPU_TFMTOGPU_H

#include "tfm/Conversion/Common/OpLowering.h"

namespace mlir::tfm {

/// One entry function of the GPU target.
class GPUEntry : public BufferizedEntry {
public:
  GPUEntry(func::FuncOp fn, ModuleLayout &layout)
      : BufferizedEntry(Kind::GPU, fn, layout) {}

  static bool classof(const BufferizedEntry *e) {
    return e->getKind() == Kind::GPU;
  }

  StringRef targetName() const override { return "CUDA"; }
  bool hostReadsBuffers() const override { return false; }
  /// Reads the check's result from device memory through
  /// host->read_device.
  void exitIfCheckFailed(int32_t check, Value first, Value flat) override;

  /// The device address of `buffer`'s first element, as an !llvm.ptr.
  Value devicePointer(Value buffer);
};

/// The backend-neutral lowerings; the GPU has no library kernels yet.
void populateTfmToGPULowerings(OpLoweringSet &set);

/// Registers the GPU's layout rules with tfm-plan-memory and its lowerings
/// (target "cuda"). Idempotent.
void registerGPUTarget();

/// The PTX features LLVM's NVPTX backend needs for `arch` ("sm_80",
/// "sm_90", "sm_90a"), or an empty string for an architecture tfm does not
/// build for.
StringRef ptxFeaturesOf(StringRef arch);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_TFMTOGPU_TFMTOGPU_H
