//===- LowerGPULaunches.cpp - tfm-lower-gpu-launches ----------------------===//
//
// After MLIR's NVVM pipeline the host code launches kernels with
// gpu.launch_func, and the kernels are PTX in a gpu.binary. MLIR would turn
// these into calls of its own GPU runtime library at translation; a model
// library instead launches through the runtime that loaded it. So each
// launch becomes
//
//   %rc = llvm.call @__tfm_launch_kernel(%host, kernel, grid, block,
//                                        shared_bytes, args)
//
// (`kernel` indexing the module's kernel table, `args` an array of pointers
// to the argument values, as the driver takes them), and the entry returns
// %rc if it is not 0. The PTX, the architecture and the kernel table go to
// module attributes (`tfm.device_code`, `tfm.device_arch`,
// `tfm.device_kernels`) for the artifact emitter.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Common/KernelCalls.h"
#include "tfm/Conversion/Passes.h"
#include "tfm/Target/Symbols.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERGPULAUNCHESPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The functions a PTX module calls but does not define: libdevice's,
/// when math was left for it, which the driver cannot link.
SmallVector<StringRef> externalFunctions(StringRef ptx) {
  SmallVector<StringRef> names;
  for (size_t at = ptx.find(".extern .func"); at != StringRef::npos;
       at = ptx.find(".extern .func", at + 1)) {
    StringRef line = ptx.substr(at).take_until([](char c) { return c == '\n'; });
    // ".extern .func  (.param .b32 func_retval0) __nv_tanhf"
    StringRef name = line.rtrim().rsplit(' ').second;
    names.push_back(name.empty() ? line : name);
  }
  return names;
}

struct LowerGPULaunchesPass
    : public mlir::tfm::impl::LowerGPULaunchesPassBase<LowerGPULaunchesPass> {
  using LowerGPULaunchesPassBase::LowerGPULaunchesPassBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<gpu::BinaryOp> binaries(module.getOps<gpu::BinaryOp>());
    SmallVector<gpu::LaunchFuncOp> launches;
    module.walk([&](gpu::LaunchFuncOp l) { launches.push_back(l); });
    // A model without kernels (every tensor empty) is still a GPU model:
    // its entry takes device pointers.
    if (binaries.empty() && launches.empty()) {
      module->setAttr("tfm.device_code", StringAttr::get(ctx, ""));
      module->setAttr("tfm.device_arch", StringAttr::get(ctx, arch));
      module->setAttr("tfm.device_kernels", ArrayAttr::get(ctx, {}));
      return;
    }
    if (binaries.size() != 1) {
      module.emitError("tfm-lower-gpu-launches: expected one gpu.binary "
                       "(tfm-merge-gpu-modules), found ")
          << binaries.size();
      return signalPassFailure();
    }
    gpu::BinaryOp binary = binaries.front();
    auto objects = binary.getObjects();
    auto object = objects.size() == 1
                      ? dyn_cast<gpu::ObjectAttr>(objects[0])
                      : gpu::ObjectAttr();
    auto target = object ? dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget())
                         : NVVM::NVVMTargetAttr();
    if (!object || !target ||
        object.getFormat() != gpu::CompilationTarget::Assembly) {
      binary.emitError("tfm-lower-gpu-launches: expected one NVVM object in "
                       "PTX form (gpu-module-to-binary format=isa)");
      return signalPassFailure();
    }
    // The payload ends in a NUL, which the artifact adds again.
    StringRef ptx = object.getObject().getValue();
    ptx = ptx.take_until([](char c) { return c == '\0'; });
    if (SmallVector<StringRef> missing = externalFunctions(ptx);
        !missing.empty()) {
      auto diag = binary.emitError(
          "the device code calls functions that no library the runtime loads "
          "defines: ");
      llvm::interleaveComma(missing, diag);
      diag << " (math the CUDA target does not expand yet)";
      return signalPassFailure();
    }

    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    OpBuilder mb(ctx);
    mb.setInsertionPointToStart(module.getBody());
    if (!module.lookupSymbol(kLaunchKernelSymbol))
      mb.create<LLVM::LLVMFuncOp>(
          module.getLoc(), kLaunchKernelSymbol,
          LLVM::LLVMFunctionType::get(i32,
                                      {ptrTy, i32, ptrTy, ptrTy, i64, ptrTy}));

    SmallVector<Attribute> kernelNames;
    llvm::StringMap<int32_t> kernelIndex;
    std::vector<std::vector<std::string>> origins;
    for (gpu::LaunchFuncOp launch : launches) {
      auto fn = launch->getParentOfType<LLVM::LLVMFuncOp>();
      if (!fn || !fn.getName().starts_with(kEntrySymbolPrefix) ||
          fn.getNumArguments() == 0 ||
          fn.getFunctionType().getReturnType() != i32) {
        launch.emitError("tfm-lower-gpu-launches: a launch outside an entry "
                         "function");
        return signalPassFailure();
      }
      StringRef name = launch.getKernelName().getValue();
      auto [it, inserted] = kernelIndex.try_emplace(name, kernelNames.size());
      if (inserted) {
        kernelNames.push_back(StringAttr::get(ctx, name));
        origins.emplace_back();
      }
      Location loc = launch.getLoc();
      collectOrigins(loc, origins[it->second]);
      Value host = fn.getArgument(0);

      // Stack slots in the entry block, where LLVM promotes them.
      OpBuilder ab(ctx);
      ab.setInsertionPointToStart(&fn.getBody().front());
      auto constant = [&](OpBuilder &b, Type t, int64_t v) -> Value {
        return b.create<LLVM::ConstantOp>(loc, t, v);
      };
      auto slots = [&](Type t, int64_t n) -> Value {
        return ab.create<LLVM::AllocaOp>(loc, ptrTy, t, constant(ab, i64, n));
      };
      ValueRange operands = launch.getKernelOperands();
      Value argv = slots(ptrTy, std::max<int64_t>(operands.size(), 1));
      Value grid = slots(i64, 3), block = slots(i64, 3);
      SmallVector<Value> argSlots;
      for (Value v : operands)
        argSlots.push_back(slots(v.getType(), 1));

      OpBuilder b(launch);
      auto at = [&](Value base, Type elem, int64_t i) -> Value {
        return b.create<LLVM::GEPOp>(
            loc, ptrTy, elem, base,
            ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
      };
      for (auto [i, v] : llvm::enumerate(operands)) {
        b.create<LLVM::StoreOp>(loc, v, argSlots[i]);
        b.create<LLVM::StoreOp>(loc, argSlots[i], at(argv, ptrTy, i));
      }
      auto dims = [&](Value array, gpu::KernelDim3 d) {
        Value sizes[] = {d.x, d.y, d.z};
        for (auto [i, v] : llvm::enumerate(sizes)) {
          Value wide = v.getType() == i64
                           ? v
                           : b.create<LLVM::ZExtOp>(loc, i64, v).getResult();
          b.create<LLVM::StoreOp>(loc, wide, at(array, i64, i));
        }
      };
      dims(grid, launch.getGridSizeOperandValues());
      dims(block, launch.getBlockSizeOperandValues());
      Value shared = constant(b, i64, 0);
      if (Value s = launch.getDynamicSharedMemorySize())
        shared = b.create<LLVM::ZExtOp>(loc, i64, s);
      Value rc = b.create<LLVM::CallOp>(
                      loc, TypeRange{i32}, kLaunchKernelSymbol,
                      ValueRange{host, constant(b, i32, it->second), grid,
                                 block, shared, argv})
                     .getResult();
      // Stop at the first failed launch, with its status.
      Block *here = b.getInsertionBlock();
      Block *next = here->splitBlock(std::next(launch->getIterator()));
      Block *fail = b.createBlock(next);
      b.create<LLVM::ReturnOp>(loc, rc);
      b.setInsertionPointToEnd(here);
      Value failed = b.create<LLVM::ICmpOp>(loc, LLVM::ICmpPredicate::ne, rc,
                                            constant(b, i32, 0));
      b.create<LLVM::CondBrOp>(loc, failed, fail, next);
      launch.erase();
    }

    module->setAttr("tfm.device_code", StringAttr::get(ctx, ptx));
    module->setAttr("tfm.device_arch", StringAttr::get(ctx, target.getChip()));
    module->setAttr("tfm.device_kernels", ArrayAttr::get(ctx, kernelNames));
    SmallVector<Attribute> originTable;
    for (const auto &places : origins)
      originTable.push_back(StringAttr::get(ctx, describeOrigins(places)));
    module->setAttr("tfm.device_kernel_origins",
                    ArrayAttr::get(ctx, originTable));
    binary.erase();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }
};

} // namespace
