//===- CPUEntry.cpp - Kernel calls of the CPU target ----------------------===//

#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Target/Symbols.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::tfm;

int32_t KernelTable::add(MLIRContext *ctx, int32_t kind,
                         ArrayRef<int64_t> params, ArrayRef<double> fparams,
                         ArrayRef<int64_t> strides, int32_t dtype) {
  if (params.size() > TFM_KERNEL_MAX_PARAMS ||
      fparams.size() > TFM_KERNEL_MAX_FPARAMS ||
      strides.size() > TFM_KERNEL_MAX_STRIDES)
    return -1;
  Builder b(ctx);
  SmallVector<int64_t, TFM_KERNEL_MAX_PARAMS> p(params);
  p.resize(TFM_KERNEL_MAX_PARAMS, 0);
  SmallVector<double, TFM_KERNEL_MAX_FPARAMS> f(fparams);
  f.resize(TFM_KERNEL_MAX_FPARAMS, 0.0);
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("kind", b.getI32IntegerAttr(kind)),
      b.getNamedAttr("dtype", b.getI32IntegerAttr(dtype)),
      b.getNamedAttr("params", b.getDenseI64ArrayAttr(p)),
      b.getNamedAttr("fparams", b.getDenseF64ArrayAttr(f))};
  if (!strides.empty()) {
    SmallVector<int64_t, TFM_KERNEL_MAX_STRIDES> st(strides);
    st.resize(TFM_KERNEL_MAX_STRIDES, 0);
    fields.push_back(b.getNamedAttr("strides", b.getDenseI64ArrayAttr(st)));
  }
  Attribute desc = b.getDictionaryAttr(fields);
  auto [it, fresh] = indexOf.try_emplace(desc, descs.size());
  if (fresh)
    descs.push_back(desc);
  return it->second;
}

LogicalResult CPUEntry::beginEntry() {
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Value slots = b.create<arith::ConstantIntOp>(loc, TFM_KERNEL_MAX_ARGS, 64);
  argsArray = b.create<LLVM::AllocaOp>(loc, ptrTy, ptrTy, slots, 8);
  errorCode = b.create<arith::ConstantIntOp>(loc, 0, 32);
  return success();
}

LogicalResult CPUEntry::endOp(Operation *) {
  return failure(kernelCallFailed);
}

void CPUEntry::callKernel(int32_t kind, ArrayRef<int64_t> params,
                          ArrayRef<double> fparams, ArrayRef<KernelArg> args,
                          ArrayRef<int64_t> strides, int32_t dtype) {
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  int32_t index = kernels.add(ctx, kind, params, fparams, strides, dtype);
  if (index < 0 || args.size() > TFM_KERNEL_MAX_ARGS) {
    // Checked in every build: a descriptor cut to fit would run the kernel
    // on the wrong sizes.
    emitError(loc) << "internal error: kernel kind " << kind << " with "
                   << params.size() << " params, " << fparams.size()
                   << " fparams, " << strides.size() << " strides and "
                   << args.size() << " arguments does not fit tfm/abi.h ("
                   << TFM_KERNEL_MAX_PARAMS << ", " << TFM_KERNEL_MAX_FPARAMS
                   << ", " << TFM_KERNEL_MAX_STRIDES << ", "
                   << TFM_KERNEL_MAX_ARGS << ")";
    kernelCallFailed = true;
    return;
  }
  for (auto [i, arg] : llvm::enumerate(args)) {
    Value ptr;
    if (!arg.buffer) {
      ptr = b.create<LLVM::ZeroOp>(loc, ptrTy);
    } else {
      auto type = cast<MemRefType>(arg.buffer.getType());
      int64_t bytes = arg.elementOffset * (type.getElementTypeBitWidth() / 8);
      assert(type.getLayout().isIdentity() && "kernels take dense buffers");
      Value from = arg.buffer;
      if (auto [base, offset] = placeOf(from); base) {
        from = base;
        bytes += offset;
      }
      Value addr = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, from);
      if (bytes)
        addr = b.create<arith::AddIOp>(
            loc, addr, b.create<arith::ConstantIndexOp>(loc, bytes));
      Value asInt = b.create<arith::IndexCastOp>(loc, b.getI64Type(), addr);
      ptr = b.create<LLVM::IntToPtrOp>(loc, ptrTy, asInt);
    }
    Value slot = b.create<LLVM::GEPOp>(loc, ptrTy, ptrTy, argsArray,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
    b.create<LLVM::StoreOp>(loc, ptr, slot);
  }
  Value idx = b.create<arith::ConstantIntOp>(loc, index, 32);
  auto call = b.create<LLVM::CallOp>(
      loc, TypeRange{b.getI32Type()}, FlatSymbolRefAttr::get(ctx, kRunKernelSymbol),
      ValueRange{hostPointer(), idx, argsArray});
  errorCode = b.create<arith::OrIOp>(loc, errorCode, call.getResult());
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
  callKernel(TFM_KERNEL_BATCH_MATMUL, {dims[0], dims[1], m, k, n}, {},
             {KernelArg(a.base, a.offset), KernelArg(bv.base, bv.offset),
              KernelArg(c.base, c.offset)},
             strides);
}

void CPUEntry::copyView(const StridedView &from, const StridedView &to,
                        Type elem) {
  if (elem.isF32() && from.shape.size() <= TFM_REORDER_MAX_RANK &&
      product(from.shape) > 0) {
    SmallVector<int64_t> params{static_cast<int64_t>(from.shape.size())};
    llvm::append_range(params, from.shape);
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
