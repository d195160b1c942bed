//===- CPUEntry.cpp - Kernel calls of the CPU target ----------------------===//

#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::tfm;

void CPUEntry::callKernel(int32_t kind, ArrayRef<int64_t> params,
                          ArrayRef<double> fparams, ArrayRef<KernelArg> args,
                          ArrayRef<int64_t> strides, int32_t dtype) {
  Type elem = dtype == TFM_DTYPE_BF16 ? Type(b.getBF16Type())
                                      : Type(b.getF32Type());
  auto desc = KernelAttr::getChecked(
      [&] { return emitError(loc); }, ctx, static_cast<KernelKind>(kind), elem,
      b.getDenseI64ArrayAttr(params),
      fparams.empty() ? DenseF64ArrayAttr() : b.getDenseF64ArrayAttr(fparams),
      strides.empty() ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(strides));
  if (!desc || args.size() > TFM_KERNEL_MAX_ARGS) {
    // Checked in every build: a descriptor cut to fit would run the kernel
    // on the wrong sizes.
    internalError("kernel kind " + Twine(kind) + " with " +
                  Twine(args.size()) + " arguments does not fit tfm/abi.h");
    return;
  }
  SmallVector<Value> buffers;
  SmallVector<int64_t> slots, offsets;
  for (auto [i, arg] : llvm::enumerate(args)) {
    if (!arg.buffer)
      continue;
    buffers.push_back(arg.buffer);
    slots.push_back(i);
    offsets.push_back(arg.elementOffset);
  }
  bool trivialSlots = slots.size() == args.size();
  bool zeroOffsets = llvm::all_of(offsets, [](int64_t o) { return o == 0; });
  auto call = b.create<KernelCallOp>(
      loc, b.getI32Type(), hostPointer(), desc, buffers,
      trivialSlots ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(slots),
      zeroOffsets ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(offsets));
  exitIfNonZero(call.getStatus());
}

void CPUEntry::batchMatmul(const StridedView &a, const StridedView &bv,
                           const StridedView &c) {
  // Pad the batch to two dimensions. A padded dimension has size 1, so its
  // stride never moves a pointer; it is the dense one, so that the runtime
  // sees a batch-dense operand (a transposed one included) and uses it in
  // place instead of packing it.
  auto batch2 = [](const StridedView &v) {
    SmallVector<int64_t> dims(v.shape.begin(), v.shape.end() - 2);
    SmallVector<int64_t> st(v.strides.begin(), v.strides.end() - 2);
    int64_t matrix = v.shape[v.shape.size() - 2] * v.shape.back();
    while (dims.size() < 2) {
      dims.insert(dims.begin(), 1);
      st.insert(st.begin(), st.empty() ? matrix : st.front() * dims[1]);
    }
    SmallVector<int64_t> all(st);
    all.push_back(v.strides[v.strides.size() - 2]);
    all.push_back(v.strides.back());
    return std::make_pair(dims, all);
  };
  auto [dims, sa] = batch2(a);
  auto sb = batch2(bv).second, sc = batch2(c).second;
  int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(),
          n = bv.shape.back();
  SmallVector<int64_t> strides(sa);
  llvm::append_range(strides, sb);
  llvm::append_range(strides, sc);
  int64_t params[TFM_BATCH_MATMUL_NUM_PARAMS] = {};
  params[TFM_BATCH_MATMUL_B1] = dims[0];
  params[TFM_BATCH_MATMUL_B2] = dims[1];
  params[TFM_BATCH_MATMUL_M] = m;
  params[TFM_BATCH_MATMUL_K] = k;
  params[TFM_BATCH_MATMUL_N] = n;
  callKernel(TFM_KERNEL_BATCH_MATMUL, params, {},
             {KernelArg(a.base, a.offset), KernelArg(bv.base, bv.offset),
              KernelArg(c.base, c.offset)},
             strides);
}

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
