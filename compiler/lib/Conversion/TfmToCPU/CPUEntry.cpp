//===- CPUEntry.cpp - Kernel calls of the CPU target ----------------------===//

#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tfm;

void CPUEntry::copyView(const StridedView &from, const StridedView &to,
                        Type elem) {
  if (elem.isF32() && from.shape.size() <= TFM_REORDER_MAX_RANK &&
      product(from.shape) > 0) {
    // TFM_REORDER_RANK, then TFM_REORDER_DIMS onwards.
    SmallVector<int64_t> params{static_cast<int64_t>(from.shape.size())};
    llvm::append_range(params, from.shape);
    static_assert(TFM_REORDER_RANK == 0 && TFM_REORDER_DIMS == 1);
    SmallVector<int64_t> strides(from.strides);
    strides.resize(TFM_REORDER_MAX_RANK, 0);
    llvm::append_range(strides, to.strides);
    callKernel(TFM_KERNEL_REORDER, params, {},
               {KernelArg(from.base, from.offset), KernelArg(to.base, to.offset)},
               strides);
    return;
  }
  BufferizedEntry::copyView(from, to, elem);
}
