//===- ArtifactEntries.cpp - The runtime's calls and the entry wrappers ---===//

#include "ArtifactIR.h"

#include "tfm/IR/TfmOps.h"
#include "tfm/Target/Symbols.h"
#include "tfm/Transforms/LayoutRules.h"
#include "tfm/abi.h"

#include "llvm/IR/IRBuilder.h"

#include <cstddef>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::artifact;

/// Branches from `b`'s block to `has`, where the host's function pointer
/// field `index` (ending at byte `end` of tfm_abi_host_t) is loaded and
/// returned, or to `none` where the host is from before the field or left
/// it null; `b` is left at the start of `has`.
static llvm::Value *loadHostFunction(llvm::IRBuilder<> &b, const AbiTypes &abi,
                                     llvm::Value *host, unsigned index,
                                     size_t end, const char *name,
                                     llvm::BasicBlock *has,
                                     llvm::BasicBlock *none) {
  auto *check = llvm::BasicBlock::Create(b.getContext(), "has_field",
                                         b.GetInsertBlock()->getParent(), has);
  llvm::Value *size = b.CreateLoad(abi.i32, host, "struct_size");
  b.CreateCondBr(b.CreateICmpUGE(size, abi.i32c(end)), check, none);
  b.SetInsertPoint(check);
  llvm::Value *fn =
      b.CreateLoad(abi.ptr, b.CreateStructGEP(abi.host, host, index), name);
  b.CreateCondBr(b.CreateIsNull(fn), none, has);
  b.SetInsertPoint(has);
  return fn;
}

LogicalResult artifact::defineHostCalls(ModuleOp module, llvm::Module &m,
                                        const AbiTypes &abi) {
  llvm::LLVMContext &c = m.getContext();
  llvm::PointerType *ptr = abi.ptr;
  llvm::IntegerType *i32 = abi.i32, *i64 = abi.i64;
  // host->run_kernel(host, index, args), for the calls the lowering made.
  if (llvm::Function *rk = m.getFunction(kRunKernelSymbol)) {
    rk->setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", rk));
    llvm::Value *host = rk->getArg(0);
    llvm::Value *fn = b.CreateLoad(
        ptr, b.CreateStructGEP(abi.host, host, AbiTypes::kHostRunKernel),
        "run_kernel");
    auto *fnTy = llvm::FunctionType::get(i32, {ptr, i32, ptr}, false);
    b.CreateRet(b.CreateCall(fnTy, fn, {host, rk->getArg(1), rk->getArg(2)}));
  }
  // host->check_failed(host, check, position, value), for the checks.
  if (llvm::Function *cf = m.getFunction(kCheckFailedSymbol);
      cf && cf->isDeclaration()) {
    cf->setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", cf));
    llvm::Value *host = cf->getArg(0);
    llvm::Value *fn = b.CreateLoad(
        ptr, b.CreateStructGEP(abi.host, host, AbiTypes::kHostCheckFailed),
        "check_failed");
    auto *fnTy = llvm::FunctionType::get(i32, {ptr, i32, i64, i64}, false);
    b.CreateRet(b.CreateCall(
        fnTy, fn, {host, cf->getArg(1), cf->getArg(2), cf->getArg(3)}));
  }
  // host->launch(host, kernel, grid, block, shared, args), for GPU code.
  if (llvm::Function *f = m.getFunction(kLaunchKernelSymbol);
      f && f->isDeclaration()) {
    f->setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
    llvm::Value *fn = b.CreateLoad(
        ptr, b.CreateStructGEP(abi.host, f->getArg(0), AbiTypes::kHostLaunch),
        kLaunchKernelSymbol);
    SmallVector<llvm::Value *> args;
    for (llvm::Argument &a : f->args())
      args.push_back(&a);
    b.CreateRet(b.CreateCall(f->getFunctionType(), fn, args));
  }
  // host->tensor_map(host, desc, base, map), for the TMA loads; a host from
  // before the field cannot make maps.
  if (llvm::Function *tm = m.getFunction(kTensorMapSymbol);
      tm && tm->isDeclaration()) {
    tm->setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", tm));
    auto *call = llvm::BasicBlock::Create(c, "call", tm);
    auto *none = llvm::BasicBlock::Create(c, "none", tm);
    llvm::Value *fn =
        loadHostFunction(b, abi, tm->getArg(0), AbiTypes::kHostTensorMap,
                         offsetof(tfm_abi_host_t, tensor_map) +
                             sizeof(tfm_abi_host_t::tensor_map),
                         "tensor_map", call, none);
    SmallVector<llvm::Value *> args;
    for (llvm::Argument &a : tm->args())
      args.push_back(&a);
    b.CreateRet(b.CreateCall(tm->getFunctionType(), fn, args));
    b.SetInsertPoint(none);
    b.CreateRet(abi.i32c(TFM_ABI_STATUS_NO_TENSOR_MAPS));
  }
  // host->parallel_for(host, task, args, n), for the loops
  // tfm-parallelize-glue outlined; a host from before the field runs the
  // range here, whole.
  if (llvm::Function *pf = m.getFunction(kParallelForSymbol);
      pf && pf->isDeclaration()) {
    pf->setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", pf));
    auto *parallel = llvm::BasicBlock::Create(c, "parallel", pf);
    auto *serial = llvm::BasicBlock::Create(c, "serial", pf);
    llvm::Value *host = pf->getArg(0), *task = pf->getArg(1),
                *args = pf->getArg(2), *n = pf->getArg(3);
    llvm::Value *fn = loadHostFunction(b, abi, host, AbiTypes::kHostParallelFor,
                                       offsetof(tfm_abi_host_t, parallel_for) +
                                           sizeof(tfm_abi_host_t::parallel_for),
                                       "parallel_for", parallel, serial);
    b.CreateCall(
        llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, i64}, false), fn,
        {host, task, args, n});
    b.CreateRetVoid();
    b.SetInsertPoint(serial);
    b.CreateCall(llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64}, false),
                 task, {args, llvm::ConstantInt::get(i64, 0), n});
    b.CreateRetVoid();
  }
  // Each outlined loop's task: its buffers' pointers from `args`, then the
  // outlined function on them (bare pointers, then begin and end).
  for (llvm::Function &task : m) {
    StringRef name = task.getName();
    if (!task.isDeclaration() || !name.starts_with(kGlueSymbolPrefix) ||
        !name.ends_with(kGlueTaskSuffix))
      continue;
    llvm::Function *body =
        m.getFunction(name.drop_back(StringRef(kGlueTaskSuffix).size()));
    if (!body || body->arg_size() < 2)
      return module.emitError("internal error: no outlined loop for ") << name;
    task.setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", &task));
    SmallVector<llvm::Value *> args;
    for (unsigned i = 0; i + 2 < body->arg_size(); ++i)
      args.push_back(
          b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, task.getArg(0), i)));
    args.push_back(task.getArg(1));
    args.push_back(task.getArg(2));
    b.CreateCall(body, args);
    b.CreateRetVoid();
  }
  return success();
}

FailureOr<SmallVector<llvm::Constant *>>
artifact::wrapEntries(ModuleOp module, llvm::Module &m, const AbiTypes &abi,
                      const ModuleTables &tables) {
  llvm::LLVMContext &c = m.getContext();
  llvm::PointerType *ptr = abi.ptr;
  llvm::IntegerType *i32 = abi.i32, *i64 = abi.i64;
  SmallVector<llvm::Constant *> entryValues;
  for (auto e : tables.entries.getAsRange<EntryAttr>()) {
    StringRef name = e.getName();
    llvm::Function *impl = m.getFunction(e.getSymbol().getValue());
    if (!impl)
      return module.emitError("entry '") << name << "' has no code";
    impl->setLinkage(llvm::GlobalValue::InternalLinkage);
    ArrayAttr inputs = e.getInputs(), outputs = e.getOutputs();

    auto *wrapTy = llvm::FunctionType::get(i32, {ptr, ptr, ptr}, false);
    auto *wrap = llvm::Function::Create(
        wrapTy, llvm::GlobalValue::InternalLinkage, "tfm_entry_" + name, m);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", wrap));
    llvm::Value *host = wrap->getArg(0);
    // The buffers the runtime allocated from the metadata must be the sizes
    // this code was compiled for: the constants below are the code's own
    // copy of them, which corrupting the metadata table does not change.
    auto *mismatch = llvm::BasicBlock::Create(c, "size_mismatch", wrap);
    auto requireSize = [&](llvm::Value *have, uint64_t want, bool atLeast) {
      llvm::Value *ok = atLeast ? b.CreateICmpUGE(have, abi.i64c(want))
                                : b.CreateICmpEQ(have, abi.i64c(want));
      auto *next = llvm::BasicBlock::Create(c, "size_ok", wrap);
      b.CreateCondBr(ok, next, mismatch);
      b.SetInsertPoint(next);
    };
    auto hostField = [&](unsigned field, llvm::Type *type,
                         const Twine &what = "") {
      return b.CreateLoad(type, b.CreateStructGEP(abi.host, host, field), what);
    };
    requireSize(hostField(AbiTypes::kHostArenaBytes, i64), e.getArenaBytes(),
                true);
    requireSize(hostField(AbiTypes::kHostWeightsBytes, i64),
                tables.weightsBytes, false);
    requireSize(hostField(AbiTypes::kHostStateBytes, i64), tables.stateBytes,
                false);
    for (auto [field, list] :
         {std::make_pair(AbiTypes::kHostInputBytes, inputs),
          std::make_pair(AbiTypes::kHostOutputBytes, outputs)}) {
      llvm::Value *sizes = hostField(field, ptr);
      for (auto [i, d] : llvm::enumerate(list.getAsRange<TensorDescAttr>()))
        requireSize(b.CreateLoad(i64, b.CreateConstGEP1_64(i64, sizes, i)),
                    static_cast<uint64_t>(bufferBytes(d.getType())), false);
    }
    SmallVector<llvm::Value *> args{host};
    args.push_back(hostField(AbiTypes::kHostArena, ptr, "arena"));
    args.push_back(hostField(AbiTypes::kHostWeights, ptr, "weights"));
    args.push_back(hostField(AbiTypes::kHostState, ptr, "state"));
    for (unsigned i = 0; i < inputs.size(); ++i)
      args.push_back(
          b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, wrap->getArg(1), i)));
    for (unsigned i = 0; i < outputs.size(); ++i)
      args.push_back(
          b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, wrap->getArg(2), i)));
    if (args.size() != impl->arg_size())
      return module.emitError("entry '")
             << name << "' has " << impl->arg_size() << " arguments, expected "
             << args.size();
    b.CreateRet(b.CreateCall(impl, args));
    b.SetInsertPoint(mismatch);
    b.CreateRet(abi.i32c(TFM_ABI_STATUS_SIZE_MISMATCH));

    auto describe = [&](ArrayAttr list, StringRef what) {
      SmallVector<llvm::Constant *> descs;
      for (auto d : list.getAsRange<TensorDescAttr>())
        descs.push_back(tensorDesc(m, abi, d.getName(), d.getType()));
      return constantArray(m, abi.tensor, descs, (".tfm." + what).str());
    };
    entryValues.push_back(llvm::ConstantStruct::get(
        abi.entry,
        {cstring(m, name), abi.i32c(inputs.size()), describe(inputs, "inputs"),
         abi.i32c(outputs.size()), describe(outputs, "outputs"),
         abi.i64c(e.getArenaBytes()), wrap}));
  }
  return entryValues;
}
