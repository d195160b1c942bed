//===- LowerKernelCalls.cpp - tfm-lower-kernel-calls ----------------------===//
//
// Each tfm.kernel_call becomes a call through `host->run_kernel(host,
// index, args)`, `index` naming its descriptor in the module's kernel table
// (`tfm.kernels`, one entry per distinct descriptor), `args` an array of
// pointers on the stack. A buffer's pointer is taken from the function
// argument it is a view of plus the views' byte offsets: the strided-
// metadata expansion folds the aligned pointer of a memref.view to its
// source's, and so would drop the offset. A descriptor every call of which
// has a fallback gets TFM_KERNEL_FLAG_FALLBACK in `tfm.kernel_flags`, so a
// session may decline it; a GEMM whose operands are held narrow (bf16,
// f16) gets TFM_KERNEL_FLAG_NARROW_OPERANDS.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Conversion/Passes.h"
#include "tfm/Target/Symbols.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERKERNELCALLSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

FailureOr<Value> mlir::tfm::alignedAddressOf(OpBuilder &b, Location loc,
                                             Value buffer,
                                             bool throughOffsetViews) {
  int64_t bytes = 0;
  while (Operation *def = buffer.getDefiningOp()) {
    if (auto v = dyn_cast<memref::ViewOp>(def)) {
      auto shift = v.getByteShift().getDefiningOp<arith::ConstantIndexOp>();
      if (!shift)
        return failure();
      bytes += shift.value();
      buffer = v.getSource();
    } else if (isa<memref::ReinterpretCastOp>(def) ||
               (throughOffsetViews &&
                isa<memref::SubViewOp, memref::ExpandShapeOp,
                    memref::CollapseShapeOp, memref::CastOp>(def))) {
      // These keep their source's aligned pointer; an offset, if any, is
      // in the result's type.
      buffer = def->getOperand(0);
    } else {
      return failure();
    }
  }
  Value address = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, buffer);
  if (bytes)
    address = b.create<arith::AddIOp>(
        loc, address, b.create<arith::ConstantIndexOp>(loc, bytes));
  return address;
}

namespace {

/// TFM_KERNEL_FLAG_NARROW_OPERANDS for a GEMM whose two operands hold the
/// type it multiplies in (the call's verifier makes them agree), else 0.
uint32_t narrowOperands(KernelCallOp call) {
  KernelKind kind = call.getKernel().getKind();
  if (kind != KernelKind::linear && kind != KernelKind::batch_matmul)
    return 0;
  for (auto [i, buffer] : llvm::enumerate(call.getArgs()))
    if (call.getSlot(i) == 0)
      return cast<MemRefType>(buffer.getType()).getElementType().isF32()
                 ? 0
                 : TFM_KERNEL_FLAG_NARROW_OPERANDS;
  return 0;
}

struct LowerKernelCallsPass
    : public mlir::tfm::impl::LowerKernelCallsPassBase<LowerKernelCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    SmallVector<Attribute> table;
    DenseMap<std::pair<Attribute, uint32_t>, int32_t> indexOf;
    std::vector<std::vector<std::string>> origins;
    SmallVector<uint32_t> flags;
    bool declared = false;
    for (auto fn : module.getOps<func::FuncOp>()) {
      SmallVector<KernelCallOp> calls;
      fn.walk([&](KernelCallOp call) { calls.push_back(call); });
      if (calls.empty())
        continue;
      OpBuilder b(ctx);
      if (!declared) {
        b.setInsertionPointToStart(module.getBody());
        b.create<LLVM::LLVMFuncOp>(
            module.getLoc(), kRunKernelSymbol,
            LLVM::LLVMFunctionType::get(b.getI32Type(),
                                        {ptrTy, b.getI32Type(), ptrTy}));
        declared = true;
      }
      // One argument array per function, filled before each call.
      b.setInsertionPointToStart(&fn.getBody().front());
      Value slots =
          b.create<arith::ConstantIntOp>(fn.getLoc(), TFM_KERNEL_MAX_ARGS, 64);
      Value args =
          b.create<LLVM::AllocaOp>(fn.getLoc(), ptrTy, ptrTy, slots, 8);
      for (KernelCallOp call : calls) {
        Location loc = call.getLoc();
        if (!isa<LLVM::LLVMPointerType>(call.getHost().getType())) {
          call.emitOpError("needs the host as an !llvm.ptr");
          return signalPassFailure();
        }
        b.setInsertionPoint(call);
        // One descriptor read with f32 operands and with narrow ones is two
        // kernels.
        uint32_t narrow = narrowOperands(call);
        auto [it, fresh] = indexOf.try_emplace(
            std::make_pair(Attribute(call.getKernel()), narrow), table.size());
        if (fresh) {
          table.push_back(call.getKernel());
          origins.emplace_back();
          flags.push_back(TFM_KERNEL_FLAG_FALLBACK | narrow);
        }
        if (!call.getFallback())
          flags[it->second] &= ~TFM_KERNEL_FLAG_FALLBACK;
        collectOrigins(loc, origins[it->second]);
        SmallVector<Value> pointers(TFM_KERNEL_MAX_ARGS);
        for (auto [i, buffer] : llvm::enumerate(call.getArgs())) {
          FailureOr<Value> address =
              alignedAddressOf(b, loc, buffer, /*throughOffsetViews=*/false);
          if (failed(address)) {
            call.emitOpError("cannot take the address of buffer ")
                << i << "; kernels read views of the entry's arguments";
            return signalPassFailure();
          }
          Value at = *address;
          auto type = cast<MemRefType>(buffer.getType());
          if (int64_t offset = call.getOffset(i))
            at = b.create<arith::AddIOp>(
                loc, at,
                b.create<arith::ConstantIndexOp>(
                    loc, offset * (type.getElementTypeBitWidth() / 8)));
          Value asInt = b.create<arith::IndexCastOp>(loc, b.getI64Type(), at);
          pointers[call.getSlot(i)] =
              b.create<LLVM::IntToPtrOp>(loc, ptrTy, asInt);
        }
        // Every slot is written, absent ones as NULL, so no kernel reads a
        // pointer left by the call before.
        Value null;
        for (auto [i, p] : llvm::enumerate(pointers)) {
          if (!p)
            p = null ? null : (null = b.create<LLVM::ZeroOp>(loc, ptrTy));
          Value slot = b.create<LLVM::GEPOp>(
              loc, ptrTy, ptrTy, args, ArrayRef<LLVM::GEPArg>{int32_t(i)});
          b.create<LLVM::StoreOp>(loc, p, slot);
        }
        Value index = b.create<arith::ConstantIntOp>(loc, it->second, 32);
        auto rc = b.create<LLVM::CallOp>(
            loc, TypeRange{b.getI32Type()},
            FlatSymbolRefAttr::get(ctx, kRunKernelSymbol),
            ValueRange{call.getHost(), index, args});
        call.getStatus().replaceAllUsesWith(rc.getResult());
        call.erase();
      }
    }
    module->setAttr("tfm.kernels", ArrayAttr::get(ctx, table));
    SmallVector<Attribute> originTable;
    for (const auto &places : origins)
      originTable.push_back(StringAttr::get(ctx, describeOrigins(places)));
    module->setAttr("tfm.kernel_origins", ArrayAttr::get(ctx, originTable));
    if (llvm::any_of(flags, [](uint32_t f) { return f != 0; })) {
      SmallVector<int32_t> bits(flags.begin(), flags.end());
      module->setAttr("tfm.kernel_flags", DenseI32ArrayAttr::get(ctx, bits));
    }
  }
};

} // namespace
