//===- Artifact.cpp - The model.so artifact -------------------------------===//
//
// The metadata table and the wrappers are built with LLVM's IR builder after
// translation rather than in the LLVM dialect: the weights blob can be
// hundreds of megabytes, and a raw ConstantDataArray holds it without the
// copies an MLIR attribute round trip would make.
//
//===----------------------------------------------------------------------===//

#include "tfm/Target/Artifact.h"
#include "tfm/Target/Symbols.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Transforms/LayoutRules.h"

#include "tfm/abi.h"

#include <cstddef>
#include <iterator>
#include <numeric>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The element type codes of tfm/abi.h.
std::optional<int32_t> dtypeOf(Type t) {
  if (t.isF32())
    return TFM_DTYPE_F32;
  if (t.isF16())
    return TFM_DTYPE_F16;
  if (t.isBF16())
    return TFM_DTYPE_BF16;
  if (t.isF64())
    return TFM_DTYPE_F64;
  if (t.isInteger(1))
    return TFM_DTYPE_BOOL;
  bool u = t.isUnsignedInteger();
  if (t.isInteger(8))
    return u ? TFM_DTYPE_U8 : TFM_DTYPE_I8;
  if (t.isInteger(16))
    return u ? TFM_DTYPE_U16 : TFM_DTYPE_I16;
  if (t.isInteger(32))
    return u ? TFM_DTYPE_U32 : TFM_DTYPE_I32;
  if (t.isInteger(64))
    return u ? TFM_DTYPE_U64 : TFM_DTYPE_I64;
  return std::nullopt;
}

std::unique_ptr<llvm::TargetMachine>
makeTargetMachine(const ArtifactOptions &options, std::string &error) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  std::string triple = llvm::sys::getDefaultTargetTriple();
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string cpu = options.cpu, features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures f;
    for (auto &[name, on] : llvm::sys::getHostCPUFeatures())
      f.AddFeature(name, on);
    features = f.getString();
  }
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, cpu, features, to, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    error = "cannot create a target machine for '" + triple + "' and CPU '" +
            cpu + "'";
  return tm;
}

/// A private constant C string.
llvm::Constant *cstring(llvm::Module &m, StringRef s) {
  llvm::IRBuilder<> b(m.getContext());
  auto *init = llvm::ConstantDataArray::getString(m.getContext(), s);
  auto *g = new llvm::GlobalVariable(m, init->getType(), true,
                                     llvm::GlobalValue::PrivateLinkage, init,
                                     ".tfm.str");
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return g;
}

llvm::Constant *constantArray(llvm::Module &m, llvm::Type *elem,
                              ArrayRef<llvm::Constant *> values,
                              StringRef name) {
  if (values.empty())
    return llvm::ConstantPointerNull::get(llvm::PointerType::get(m.getContext(), 0));
  auto *ty = llvm::ArrayType::get(elem, values.size());
  return new llvm::GlobalVariable(m, ty, true,
                                  llvm::GlobalValue::PrivateLinkage,
                                  llvm::ConstantArray::get(ty, values), name);
}

} // namespace

FailureOr<WeightsBlob> mlir::tfm::weightsBlob(ModuleOp module) {
  auto values = module->getAttrOfType<ArrayAttr>("tfm.weights");
  auto offsets = module->getAttrOfType<DenseI64ArrayAttr>("tfm.weight_offsets");
  auto total = module->getAttrOfType<IntegerAttr>("tfm.weights_bytes");
  if (!values || !offsets || !total || total.getInt() < 0 ||
      values.size() != static_cast<size_t>(offsets.size()))
    return module.emitError("no weights layout: run tfm-lower-to-cpu first");
  return WeightsBlob{values, offsets,
                       static_cast<uint64_t>(total.getInt())};
}

LogicalResult mlir::tfm::writeWeights(const WeightsBlob &layout,
                                      llvm::raw_ostream &os,
                                      std::string &error) {
  // Streamed from the attributes: a blob of a large model's weights would
  // be one more copy of them, and its fresh pages cost seconds to fault in.
  ArrayAttr values = layout.values;
  ArrayRef<int64_t> offsets = layout.offsets.asArrayRef();
  SmallVector<unsigned> order(values.size());
  std::iota(order.begin(), order.end(), 0u);
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    return offsets[a] < offsets[b];
  });
  uint64_t at = 0;
  std::vector<char> expanded;
  for (unsigned i : order) {
    auto dense = dyn_cast<DenseElementsAttr>(values[i]);
    if (!dense) {
      error = "weights must be dense elements attributes";
      return failure();
    }
    Type elem = dense.getElementType();
    int64_t n = dense.getNumElements();
    size_t width = elem.isInteger(1) ? 1 : elem.getIntOrFloatBitWidth() / 8;
    uint64_t offset = offsets[i], size = n * width;
    if (offsets[i] < 0 || offset < at || offset + size > layout.bytes) {
      error = "weight " + std::to_string(i) + " does not fit the weights layout";
      return failure();
    }
    os.write_zeros(offset - at);
    ArrayRef<char> raw = dense.getRawData();
    if (elem.isInteger(1)) {
      expanded.assign(size, 0);
      int64_t k = 0;
      for (bool v : dense.getValues<bool>())
        expanded[k++] = v ? 1 : 0;
      os.write(expanded.data(), size);
    } else if (dense.isSplat()) {
      expanded.resize(size);
      for (int64_t k = 0; k < n; ++k)
        std::memcpy(expanded.data() + k * width, raw.data(), width);
      os.write(expanded.data(), size);
    } else {
      os.write(raw.data(), size);
    }
    at = offset + size;
  }
  os.write_zeros(layout.bytes - at);
  return success();
}

FailureOr<std::unique_ptr<llvm::Module>>
mlir::tfm::translateToArtifactIR(ModuleOp module,
                                 llvm::LLVMContext &llvmContext,
                                 const ArtifactOptions &options) {
  auto entries = module->getAttrOfType<ArrayAttr>("tfm.entries");
  auto kernels = module->getAttrOfType<ArrayAttr>("tfm.kernels");
  if (!entries || !kernels)
    return module.emitError("not a module of the tfm pipelines: it lacks "
                            "tfm.entries and tfm.kernels");
  // GPU code: its PTX and kernel names (tfm-lower-gpu-launches).
  auto deviceCode = module->getAttrOfType<StringAttr>("tfm.device_code");
  auto deviceArch = module->getAttrOfType<StringAttr>("tfm.device_arch");
  auto deviceKernels = module->getAttrOfType<ArrayAttr>("tfm.device_kernels");
  if (deviceCode && (!deviceArch || !deviceKernels))
    return module.emitError("tfm.device_code without tfm.device_arch and "
                            "tfm.device_kernels");
  auto bytesAttr = module->getAttrOfType<IntegerAttr>("tfm.weights_bytes");
  if (!bytesAttr)
    return module.emitError("no weights layout: run tfm-lower-to-cpu first");
  uint64_t weightsBytes = bytesAttr.getInt();
  auto stateSlots = module->getAttrOfType<ArrayAttr>("tfm.states");
  auto checks = module->getAttrOfType<ArrayAttr>("tfm.checks");
  auto dynamic = module->getAttrOfType<ArrayAttr>("tfm.dynamic_entries");
  auto origins = module->getAttrOfType<ArrayAttr>("tfm.kernel_origins");
  if (origins && origins.size() != kernels.size())
    return module.emitError("tfm.kernel_origins does not match tfm.kernels");
  auto flags = module->getAttrOfType<DenseI32ArrayAttr>("tfm.kernel_flags");
  if (flags && flags.size() != static_cast<int64_t>(kernels.size()))
    return module.emitError("tfm.kernel_flags does not match tfm.kernels");
  auto deviceOrigins =
      module->getAttrOfType<ArrayAttr>("tfm.device_kernel_origins");
  if (deviceOrigins &&
      (!deviceKernels || deviceOrigins.size() != deviceKernels.size()))
    return module.emitError(
        "tfm.device_kernel_origins does not match tfm.device_kernels");
  uint64_t stateBytes = 0;
  int64_t maxLength = 0;
  if (auto n = module->getAttrOfType<IntegerAttr>("tfm.generation_max_length"))
    maxLength = n.getInt();
  if (auto bytes = module->getAttrOfType<IntegerAttr>("tfm.state_bytes"))
    stateBytes = bytes.getInt();
  // Where the checks write their outcomes, when they do not stop the run.
  auto checkSlots =
      module->getAttrOfType<IntegerAttr>("tfm.check_slots_offset");
  // The dialect verified the tables' element types; the ABI takes fewer
  // element types than the dialect, so check those before the tables go.
  for (auto e : entries.getAsRange<EntryAttr>())
    for (ArrayAttr list : {e.getInputs(), e.getOutputs()})
      for (auto d : list.getAsRange<TensorDescAttr>())
        if (!dtypeOf(d.getType().getElementType()))
          return module.emitError("entry '")
                 << e.getName() << "': '" << d.getName() << "' has type "
                 << d.getType() << ", which the model ABI cannot carry";
  SmallVector<NamedAttribute> keep;
  for (NamedAttribute a : module->getAttrs())
    if (!a.getName().getValue().starts_with("tfm."))
      keep.push_back(a);
  module->setAttrs(keep);

  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  module.getContext()->appendDialectRegistry(registry);
  std::unique_ptr<llvm::Module> m =
      translateModuleToLLVMIR(module, llvmContext, "tfm_model");
  if (!m)
    return module.emitError("translation to LLVM IR failed");

  std::string error;
  auto tm = makeTargetMachine(options, error);
  if (!tm)
    return module.emitError(error);
  m->setDataLayout(tm->createDataLayout());
  m->setTargetTriple(tm->getTargetTriple().str());

  llvm::LLVMContext &c = llvmContext;
  auto *ptr = llvm::PointerType::get(c, 0);
  auto *i32 = llvm::Type::getInt32Ty(c);
  auto *i64 = llvm::Type::getInt64Ty(c);
  auto *f64 = llvm::Type::getDoubleTy(c);
  auto i32c = [&](int64_t v) { return llvm::ConstantInt::get(i32, v); };
  auto i64c = [&](int64_t v) { return llvm::ConstantInt::get(i64, v); };
  // The structs of tfm/abi.h, field for field. Each is checked against the
  // C layout of the header under the target's data layout, so a field added
  // to the header but not here (or the reverse) is an error, not a model
  // whose metadata the runtime misreads.
  const llvm::DataLayout &dl = m->getDataLayout();
  std::string layoutError;
  auto abiStruct = [&](StringRef name, ArrayRef<llvm::Type *> fields,
                       size_t size, ArrayRef<size_t> offsets) {
    auto *ty = llvm::StructType::get(c, fields);
    const llvm::StructLayout *sl = dl.getStructLayout(ty);
    bool same = offsets.size() == fields.size() &&
                sl->getSizeInBytes() == size;
    for (auto [i, off] : llvm::enumerate(offsets))
      same = same && sl->getElementOffset(i) == off;
    if (!same && layoutError.empty())
      layoutError = ("internal error: the artifact's " + name +
                     " does not match tfm/abi.h on this target")
                        .str();
    return ty;
  };
  auto array = [](llvm::Type *elem, uint64_t n) {
    return llvm::ArrayType::get(elem, n);
  };
  using Host = tfm_abi_host_t;
  auto *hostTy = abiStruct(
      "tfm_abi_host_t",
      {i32, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, ptr, ptr, ptr, ptr,
       ptr},
      sizeof(Host),
      {offsetof(Host, struct_size), offsetof(Host, arena),
       offsetof(Host, weights), offsetof(Host, run_kernel),
       offsetof(Host, session), offsetof(Host, state),
       offsetof(Host, check_failed), offsetof(Host, arena_bytes),
       offsetof(Host, weights_bytes), offsetof(Host, state_bytes),
       offsetof(Host, input_bytes), offsetof(Host, output_bytes),
       offsetof(Host, launch), offsetof(Host, read_device),
       offsetof(Host, parallel_for)});
  // Field numbers of tfm_abi_host_t that the generated code loads.
  enum {
    kHostArena = 1,
    kHostWeights = 2,
    kHostRunKernel = 3,
    kHostState = 5,
    kHostCheckFailed = 6,
    kHostArenaBytes = 7,
    kHostWeightsBytes = 8,
    kHostStateBytes = 9,
    kHostInputBytes = 10,
    kHostOutputBytes = 11,
    kHostLaunch = 12,
    kHostParallelFor = 14
  };
  using Tensor = tfm_abi_tensor_desc_t;
  auto *tensorTy = abiStruct(
      "tfm_abi_tensor_desc_t", {ptr, i32, i32, ptr}, sizeof(Tensor),
      {offsetof(Tensor, name), offsetof(Tensor, dtype), offsetof(Tensor, rank),
       offsetof(Tensor, dims)});
  using Entry = tfm_abi_entry_t;
  auto *entryTy = abiStruct(
      "tfm_abi_entry_t", {ptr, i32, ptr, i32, ptr, i64, ptr}, sizeof(Entry),
      {offsetof(Entry, name), offsetof(Entry, num_inputs),
       offsetof(Entry, inputs), offsetof(Entry, num_outputs),
       offsetof(Entry, outputs), offsetof(Entry, arena_bytes),
       offsetof(Entry, fn)});
  using Kernel = tfm_abi_kernel_desc_t;
  static_assert(std::size(Kernel{}.params) == TFM_KERNEL_MAX_PARAMS &&
                    std::size(Kernel{}.fparams) == TFM_KERNEL_MAX_FPARAMS &&
                    std::size(Kernel{}.strides) == TFM_KERNEL_MAX_STRIDES,
                "the kernel descriptor's arrays have the sizes tfm/abi.h "
                "names");
  auto *paramsTy = array(i64, TFM_KERNEL_MAX_PARAMS);
  auto *fparamsTy = array(f64, TFM_KERNEL_MAX_FPARAMS);
  auto *stridesTy = array(i64, TFM_KERNEL_MAX_STRIDES);
  auto *kernelTy = abiStruct(
      "tfm_abi_kernel_desc_t", {i32, i32, paramsTy, fparamsTy, stridesTy},
      sizeof(Kernel),
      {offsetof(Kernel, kind), offsetof(Kernel, dtype),
       offsetof(Kernel, params), offsetof(Kernel, fparams),
       offsetof(Kernel, strides)});
  using State = tfm_abi_state_desc_t;
  auto *stateTy = abiStruct(
      "tfm_abi_state_desc_t", {tensorTy, i32, i64, i64}, sizeof(State),
      {offsetof(State, tensor), offsetof(State, kind), offsetof(State, offset),
       offsetof(State, init_offset)});
  using Check = tfm_abi_check_desc_t;
  auto *checkTy = abiStruct(
      "tfm_abi_check_desc_t", {ptr, ptr, i32, i64, i64}, sizeof(Check),
      {offsetof(Check, op), offsetof(Check, tensor), offsetof(Check, input),
       offsetof(Check, lower), offsetof(Check, upper)});
  using Model = tfm_abi_model_t;
  auto *modelTy = abiStruct("tfm_abi_model_t",
                            {i32, i32, ptr, i32, ptr, ptr, i64, ptr, i32, ptr,
                             i64, i32, ptr, i32, ptr, i32, ptr, ptr, i64, i32,
                             ptr, i64, i32, ptr, ptr, ptr, ptr, i32, i64},
                            sizeof(Model),
                            {offsetof(Model, abi_version),
                             offsetof(Model, struct_size),
                             offsetof(Model, producer),
                             offsetof(Model, num_entries),
                             offsetof(Model, entries),
                             offsetof(Model, weights),
                             offsetof(Model, weights_bytes),
                             offsetof(Model, external_weights),
                             offsetof(Model, num_kernels),
                             offsetof(Model, kernels),
                             offsetof(Model, state_bytes),
                             offsetof(Model, num_states),
                             offsetof(Model, states),
                             offsetof(Model, num_checks),
                             offsetof(Model, checks),
                             offsetof(Model, target),
                             offsetof(Model, device_arch),
                             offsetof(Model, device_code),
                             offsetof(Model, device_code_bytes),
                             offsetof(Model, num_device_kernels),
                             offsetof(Model, device_kernels),
                             offsetof(Model, generation_max_length),
                             offsetof(Model, num_dynamic_entries),
                             offsetof(Model, dynamic_entries),
                             offsetof(Model, kernel_origins),
                             offsetof(Model, kernel_flags),
                             offsetof(Model, device_kernel_origins),
                             offsetof(Model, check_mode),
                             offsetof(Model, check_slots_offset)});
  using Dynamic = tfm_abi_dynamic_entry_t;
  auto *dynamicTy = abiStruct(
      "tfm_abi_dynamic_entry_t",
      {ptr, i32, ptr, ptr, ptr, i32, ptr, i32, ptr, i32, ptr, i32, ptr, ptr},
      sizeof(Dynamic),
      {offsetof(Dynamic, name), offsetof(Dynamic, num_symbols),
       offsetof(Dynamic, symbols), offsetof(Dynamic, min_sizes),
       offsetof(Dynamic, max_sizes), offsetof(Dynamic, num_inputs),
       offsetof(Dynamic, inputs), offsetof(Dynamic, num_outputs),
       offsetof(Dynamic, outputs), offsetof(Dynamic, num_key_masks),
       offsetof(Dynamic, key_masks), offsetof(Dynamic, num_buckets),
       offsetof(Dynamic, buckets), offsetof(Dynamic, bucket_sizes)});
  if (!layoutError.empty())
    return module.emitError(layoutError);

  // host->run_kernel(host, index, args), for the calls the lowering made.
  if (llvm::Function *rk = m->getFunction(kRunKernelSymbol)) {
    rk->setLinkage(llvm::GlobalValue::InternalLinkage);
    auto *bb = llvm::BasicBlock::Create(c, "entry", rk);
    llvm::IRBuilder<> b(bb);
    llvm::Value *host = rk->getArg(0);
    llvm::Value *slot = b.CreateStructGEP(hostTy, host, kHostRunKernel);
    llvm::Value *fn = b.CreateLoad(ptr, slot, "run_kernel");
    auto *fnTy = llvm::FunctionType::get(i32, {ptr, i32, ptr}, false);
    b.CreateRet(b.CreateCall(fnTy, fn, {host, rk->getArg(1), rk->getArg(2)}));
  }
  // host->check_failed(host, check, position, value), for the checks.
  if (llvm::Function *cf = m->getFunction(kCheckFailedSymbol);
      cf && cf->isDeclaration()) {
    cf->setLinkage(llvm::GlobalValue::InternalLinkage);
    auto *bb = llvm::BasicBlock::Create(c, "entry", cf);
    llvm::IRBuilder<> b(bb);
    llvm::Value *host = cf->getArg(0);
    llvm::Value *fn = b.CreateLoad(
        ptr, b.CreateStructGEP(hostTy, host, kHostCheckFailed), "check_failed");
    auto *fnTy = llvm::FunctionType::get(i32, {ptr, i32, i64, i64}, false);
    b.CreateRet(b.CreateCall(
        fnTy, fn, {host, cf->getArg(1), cf->getArg(2), cf->getArg(3)}));
  }

  // host->launch(host, kernel, grid, block, shared, args), for GPU code.
  auto forward = [&](StringRef symbol, unsigned field) {
    llvm::Function *f = m->getFunction(symbol);
    if (!f || !f->isDeclaration())
      return;
    f->setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
    llvm::Value *fn = b.CreateLoad(
        ptr, b.CreateStructGEP(hostTy, f->getArg(0), field), symbol);
    SmallVector<llvm::Value *> args;
    for (llvm::Argument &a : f->args())
      args.push_back(&a);
    b.CreateRet(b.CreateCall(f->getFunctionType(), fn, args));
  };
  forward(kLaunchKernelSymbol, kHostLaunch);

  // host->parallel_for(host, task, args, n), for the loops
  // tfm-parallelize-glue outlined; a host from before the field runs the
  // range here, whole.
  if (llvm::Function *pf = m->getFunction(kParallelForSymbol);
      pf && pf->isDeclaration()) {
    pf->setLinkage(llvm::GlobalValue::InternalLinkage);
    auto *entry = llvm::BasicBlock::Create(c, "entry", pf);
    auto *check = llvm::BasicBlock::Create(c, "has_field", pf);
    auto *parallel = llvm::BasicBlock::Create(c, "parallel", pf);
    auto *serial = llvm::BasicBlock::Create(c, "serial", pf);
    llvm::Value *host = pf->getArg(0), *task = pf->getArg(1),
                *args = pf->getArg(2), *n = pf->getArg(3);
    llvm::IRBuilder<> b(entry);
    llvm::Value *size = b.CreateLoad(i32, host, "struct_size");
    b.CreateCondBr(
        b.CreateICmpUGE(size, i32c(offsetof(Host, parallel_for) +
                                   sizeof(Host::parallel_for))),
        check, serial);
    b.SetInsertPoint(check);
    llvm::Value *fn = b.CreateLoad(
        ptr, b.CreateStructGEP(hostTy, host, kHostParallelFor), "parallel_for");
    b.CreateCondBr(b.CreateIsNull(fn), serial, parallel);
    b.SetInsertPoint(parallel);
    b.CreateCall(llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, i64},
                                         false),
                 fn, {host, task, args, n});
    b.CreateRetVoid();
    b.SetInsertPoint(serial);
    b.CreateCall(llvm::FunctionType::get(b.getVoidTy(), {ptr, i64, i64}, false),
                 task, {args, llvm::ConstantInt::get(i64, 0), n});
    b.CreateRetVoid();
  }
  // Each outlined loop's task: its buffers' pointers from `args`, then the
  // outlined function on them (bare pointers, then begin and end).
  for (llvm::Function &task : *m) {
    StringRef name = task.getName();
    if (!task.isDeclaration() || !name.starts_with(kGlueSymbolPrefix) ||
        !name.ends_with(kGlueTaskSuffix))
      continue;
    llvm::Function *body =
        m->getFunction(name.drop_back(StringRef(kGlueTaskSuffix).size()));
    if (!body || body->arg_size() < 2)
      return module.emitError("internal error: no outlined loop for ")
             << name;
    task.setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", &task));
    SmallVector<llvm::Value *> args;
    for (unsigned i = 0; i + 2 < body->arg_size(); ++i)
      args.push_back(b.CreateLoad(
          ptr, b.CreateConstGEP1_64(ptr, task.getArg(0), i)));
    args.push_back(task.getArg(1));
    args.push_back(task.getArg(2));
    b.CreateCall(body, args);
    b.CreateRetVoid();
  }

  // `dims` replaces the type's shape (a dynamic entry's, with symbols).
  auto tensorDesc = [&](StringRef name, RankedTensorType type,
                        ArrayRef<int64_t> shape = {}) {
    SmallVector<llvm::Constant *> dims;
    for (int64_t dim : shape.empty() ? type.getShape() : shape)
      dims.push_back(i64c(dim));
    return llvm::ConstantStruct::get(
        tensorTy, {cstring(*m, name), i32c(*dtypeOf(type.getElementType())),
                   i32c(type.getRank()),
                   constantArray(*m, i64, dims, ".tfm.dims")});
  };

  // Entries: an ABI wrapper over each lowered function, and its descriptors.
  SmallVector<llvm::Constant *> entryValues;
  for (auto e : entries.getAsRange<EntryAttr>()) {
    StringRef name = e.getName();
    llvm::Function *impl = m->getFunction(e.getSymbol().getValue());
    if (!impl)
      return module.emitError("entry '") << name << "' has no code";
    impl->setLinkage(llvm::GlobalValue::InternalLinkage);
    ArrayAttr inputs = e.getInputs(), outputs = e.getOutputs();

    auto *wrapTy = llvm::FunctionType::get(i32, {ptr, ptr, ptr}, false);
    auto *wrap = llvm::Function::Create(
        wrapTy, llvm::GlobalValue::InternalLinkage, "tfm_entry_" + name, *m);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", wrap));
    llvm::Value *host = wrap->getArg(0);
    // The buffers the runtime allocated from the metadata must be the sizes
    // this code was compiled for: the constants below are the code's own
    // copy of them, which corrupting the metadata table does not change.
    auto *mismatch = llvm::BasicBlock::Create(c, "size_mismatch", wrap);
    auto requireSize = [&](llvm::Value *have, uint64_t want, bool atLeast) {
      llvm::Value *ok = atLeast ? b.CreateICmpUGE(have, i64c(want))
                                : b.CreateICmpEQ(have, i64c(want));
      auto *next = llvm::BasicBlock::Create(c, "size_ok", wrap);
      b.CreateCondBr(ok, next, mismatch);
      b.SetInsertPoint(next);
    };
    auto hostField = [&](unsigned field, llvm::Type *type) {
      return b.CreateLoad(type, b.CreateStructGEP(hostTy, host, field));
    };
    requireSize(hostField(kHostArenaBytes, i64), e.getArenaBytes(), true);
    requireSize(hostField(kHostWeightsBytes, i64), weightsBytes, false);
    requireSize(hostField(kHostStateBytes, i64), stateBytes, false);
    for (auto [field, list] : {std::make_pair(kHostInputBytes, inputs),
                               std::make_pair(kHostOutputBytes, outputs)}) {
      llvm::Value *sizes = hostField(field, ptr);
      for (auto [i, d] : llvm::enumerate(list.getAsRange<TensorDescAttr>()))
        requireSize(b.CreateLoad(i64, b.CreateConstGEP1_64(i64, sizes, i)),
                    static_cast<uint64_t>(bufferBytes(d.getType())), false);
    }
    SmallVector<llvm::Value *> args{host};
    args.push_back(b.CreateLoad(ptr, b.CreateStructGEP(hostTy, host, kHostArena), "arena"));
    args.push_back(b.CreateLoad(ptr, b.CreateStructGEP(hostTy, host, kHostWeights), "weights"));
    args.push_back(b.CreateLoad(ptr, b.CreateStructGEP(hostTy, host, kHostState), "state"));
    for (unsigned i = 0; i < inputs.size(); ++i)
      args.push_back(b.CreateLoad(
          ptr, b.CreateConstGEP1_64(ptr, wrap->getArg(1), i)));
    for (unsigned i = 0; i < outputs.size(); ++i)
      args.push_back(b.CreateLoad(
          ptr, b.CreateConstGEP1_64(ptr, wrap->getArg(2), i)));
    if (args.size() != impl->arg_size())
      return module.emitError("entry '") << name << "' has "
             << impl->arg_size() << " arguments, expected " << args.size();
    b.CreateRet(b.CreateCall(impl, args));
    b.SetInsertPoint(mismatch);
    b.CreateRet(i32c(TFM_ABI_STATUS_SIZE_MISMATCH));

    auto describe = [&](ArrayAttr list, StringRef what) {
      SmallVector<llvm::Constant *> descs;
      for (auto d : list.getAsRange<TensorDescAttr>())
        descs.push_back(tensorDesc(d.getName(), d.getType()));
      return constantArray(*m, tensorTy, descs, (".tfm." + what).str());
    };
    entryValues.push_back(llvm::ConstantStruct::get(
        entryTy,
        {cstring(*m, name), i32c(inputs.size()), describe(inputs, "inputs"),
         i32c(outputs.size()), describe(outputs, "outputs"),
         i64c(e.getArenaBytes()), wrap}));
  }

  // Dynamic entries: the largest bucket's descriptors, with each axis that
  // follows a symbol written as -1 - symbol.
  SmallVector<llvm::Constant *> dynamicValues;
  if (dynamic) {
    for (auto d : dynamic.getAsRange<DynamicEntryAttr>()) {
      auto indexOf = [&](StringRef symbol) -> int64_t {
        for (auto [i, e] : llvm::enumerate(entries.getAsRange<EntryAttr>()))
          if (e.getSymbol().getValue() == symbol || e.getName() == symbol)
            return i;
        return -1;
      };
      SmallVector<llvm::Constant *> buckets, sizes, mins, maxs, masks,
          symbolNames;
      for (auto ref : d.getBuckets().getAsRange<FlatSymbolRefAttr>()) {
        int64_t index = indexOf(ref.getValue());
        if (index < 0)
          return module.emitError("dynamic entry '")
                 << d.getName() << "': no entry for bucket " << ref;
        buckets.push_back(i32c(index));
      }
      for (int64_t v : d.getBucketSizes().asArrayRef())
        sizes.push_back(i64c(v));
      for (int64_t v : d.getMinSizes().asArrayRef())
        mins.push_back(i64c(v));
      for (int64_t v : d.getMaxSizes().asArrayRef())
        maxs.push_back(i64c(v));
      for (int64_t v : d.getKeyMasks().asArrayRef())
        masks.push_back(i32c(v));
      for (auto name : d.getSymbols().getAsRange<StringAttr>())
        symbolNames.push_back(cstring(*m, name.getValue()));
      auto largest = *std::next(
          entries.getAsRange<EntryAttr>().begin(),
          indexOf(cast<FlatSymbolRefAttr>(d.getBuckets().getValue().back())
                      .getValue()));
      auto describe = [&](ArrayAttr list, ArrayAttr axes, StringRef what)
          -> FailureOr<llvm::Constant *> {
        if (list.size() < axes.size())
          return failure();
        SmallVector<llvm::Constant *> descs;
        for (auto [desc, axesOf] :
             llvm::zip(list.getAsRange<TensorDescAttr>(),
                       axes.getAsRange<DenseI64ArrayAttr>())) {
          RankedTensorType type = desc.getType();
          if (axesOf.size() != type.getRank())
            return failure();
          SmallVector<int64_t> dims;
          for (auto [dim, symbol] : llvm::zip(type.getShape(),
                                              axesOf.asArrayRef()))
            dims.push_back(symbol >= 0 ? -1 - symbol : dim);
          descs.push_back(tensorDesc(desc.getName(), type, dims));
        }
        return constantArray(*m, tensorTy, descs, (".tfm.dynamic." + what).str());
      };
      auto inputs = describe(largest.getInputs(), d.getInputs(), "inputs");
      auto outputs = describe(largest.getOutputs(), d.getOutputs(), "outputs");
      if (failed(inputs) || failed(outputs))
        return module.emitError("dynamic entry '")
               << d.getName() << "' does not match its largest bucket";
      dynamicValues.push_back(llvm::ConstantStruct::get(
          dynamicTy,
          {cstring(*m, d.getName()), i32c(symbolNames.size()),
           constantArray(*m, ptr, symbolNames, ".tfm.symbols"),
           constantArray(*m, i64, mins, ".tfm.min_sizes"),
           constantArray(*m, i64, maxs, ".tfm.max_sizes"),
           i32c(d.getInputs().size()), *inputs, i32c(d.getOutputs().size()),
           *outputs, i32c(masks.size()),
           constantArray(*m, i32, masks, ".tfm.key_masks"),
           i32c(buckets.size()),
           constantArray(*m, i32, buckets, ".tfm.buckets"),
           constantArray(*m, i64, sizes, ".tfm.bucket_sizes")}));
    }
  }

  SmallVector<llvm::Constant *> kernelValues;
  for (auto k : kernels.getAsRange<KernelAttr>()) {
    SmallVector<llvm::Constant *> params, fparams, strides;
    for (int64_t p : k.getParams().asArrayRef())
      params.push_back(i64c(p));
    if (k.getStrides())
      for (int64_t v : k.getStrides().asArrayRef())
        strides.push_back(i64c(v));
    if (k.getFparams())
      for (double f : k.getFparams().asArrayRef())
        fparams.push_back(llvm::ConstantFP::get(f64, f));
    // The dialect's verifier keeps the arrays within the ABI's sizes.
    params.resize(TFM_KERNEL_MAX_PARAMS, i64c(0));
    fparams.resize(TFM_KERNEL_MAX_FPARAMS, llvm::ConstantFP::get(f64, 0.0));
    strides.resize(TFM_KERNEL_MAX_STRIDES, i64c(0));
    kernelValues.push_back(llvm::ConstantStruct::get(
        kernelTy, {i32c(static_cast<int32_t>(k.getKind())),
                   i32c(*dtypeOf(k.getDtype())),
                   llvm::ConstantArray::get(paramsTy, params),
                   llvm::ConstantArray::get(fparamsTy, fparams),
                   llvm::ConstantArray::get(stridesTy, strides)}));
  }

  // The session state's slots.
  SmallVector<llvm::Constant *> stateValues;
  if (stateSlots)
    for (auto d : stateSlots.getAsRange<StateSlotAttr>())
      stateValues.push_back(llvm::ConstantStruct::get(
          stateTy, {tensorDesc(d.getName(), d.getType()),
                    i32c(static_cast<int32_t>(d.getKind())),
                    i64c(d.getOffset()), i64c(d.getInitOffset())}));

  // The run-time checks.
  SmallVector<llvm::Constant *> checkValues;
  if (checks)
    for (auto ch : checks.getAsRange<IndexCheckAttr>())
      checkValues.push_back(llvm::ConstantStruct::get(
          checkTy, {cstring(*m, ch.getOp()), cstring(*m, ch.getTensor()),
                    i32c(ch.getInput()), i64c(ch.getLower()),
                    i64c(ch.getUpper())}));

  // Embedded weights live in an object of their own (writeWeightsObject):
  // kept out of this module, they cost the optimizer nothing.
  llvm::Constant *weights = llvm::ConstantPointerNull::get(ptr);
  if (!options.externalWeights && weightsBytes > 0) {
    auto *g = new llvm::GlobalVariable(
        *m, llvm::ArrayType::get(llvm::Type::getInt8Ty(c), weightsBytes),
        true, llvm::GlobalValue::ExternalLinkage, nullptr, kWeightsSymbol);
    g->setVisibility(llvm::GlobalValue::HiddenVisibility);
    g->setAlignment(llvm::Align(64));
    weights = g;
  }
  llvm::Constant *external = options.externalWeights
                                 ? cstring(*m, options.externalWeightsName)
                                 : llvm::ConstantPointerNull::get(ptr);
  uint64_t modelSize = m->getDataLayout().getTypeAllocSize(modelTy);
  llvm::Constant *nullPtr = llvm::ConstantPointerNull::get(ptr);
  SmallVector<llvm::Constant *> originValues;
  if (origins)
    for (auto text : origins.getAsRange<StringAttr>())
      originValues.push_back(cstring(*m, text.getValue()));
  SmallVector<llvm::Constant *> flagValues;
  if (flags)
    for (int32_t f : flags.asArrayRef())
      flagValues.push_back(i32c(f));
  SmallVector<llvm::Constant *> kernelNames, deviceOriginValues;
  if (deviceKernels)
    for (auto name : deviceKernels.getAsRange<StringAttr>())
      kernelNames.push_back(cstring(*m, name.getValue()));
  if (deviceOrigins)
    for (auto text : deviceOrigins.getAsRange<StringAttr>())
      deviceOriginValues.push_back(cstring(*m, text.getValue()));
  auto *model = new llvm::GlobalVariable(
      *m, modelTy, true, llvm::GlobalValue::PrivateLinkage,
      llvm::ConstantStruct::get(
          modelTy,
          {i32c(TFM_ABI_VERSION),
           i32c(modelSize),
           cstring(*m, options.producer),
           i32c(entryValues.size()),
           constantArray(*m, entryTy, entryValues, ".tfm.entries"),
           weights,
           i64c(weightsBytes),
           external,
           i32c(kernelValues.size()),
           constantArray(*m, kernelTy, kernelValues, ".tfm.kernels"),
           i64c(stateBytes),
           i32c(stateValues.size()),
           constantArray(*m, stateTy, stateValues, ".tfm.states"),
           i32c(checkValues.size()),
           constantArray(*m, checkTy, checkValues, ".tfm.checks"),
           i32c(deviceCode ? TFM_TARGET_CUDA : TFM_TARGET_CPU),
           deviceCode ? cstring(*m, deviceArch.getValue()) : nullPtr,
           deviceCode ? cstring(*m, deviceCode.getValue()) : nullPtr,
           i64c(deviceCode ? deviceCode.getValue().size() + 1 : 0),
           i32c(deviceKernels ? deviceKernels.size() : 0),
           constantArray(*m, ptr, kernelNames, ".tfm.device_kernels"),
           i64c(maxLength),
           i32c(dynamicValues.size()),
           constantArray(*m, dynamicTy, dynamicValues, ".tfm.dynamic_entries"),
           origins ? constantArray(*m, ptr, originValues, ".tfm.kernel_origins")
                   : nullPtr,
           flags ? constantArray(*m, i32, flagValues, ".tfm.kernel_flags")
                 : nullPtr,
           deviceOrigins ? constantArray(*m, ptr, deviceOriginValues,
                                         ".tfm.device_kernel_origins")
                         : nullPtr,
           i32c(checkSlots ? TFM_CHECKS_IN_STATE : TFM_CHECKS_MID_RUN),
           i64c(checkSlots ? checkSlots.getInt() : 0)}),
      ".tfm.model");

  // The one exported symbol.
  auto *getter = llvm::Function::Create(
      llvm::FunctionType::get(ptr, {}, false),
      llvm::GlobalValue::ExternalLinkage, TFM_ABI_MODEL_SYMBOL, *m);
  llvm::IRBuilder<> gb(llvm::BasicBlock::Create(c, "entry", getter));
  gb.CreateRet(model);

  std::string verifyErrors;
  llvm::raw_string_ostream vs(verifyErrors);
  if (llvm::verifyModule(*m, &vs))
    return module.emitError("the artifact's LLVM IR is invalid: ")
           << verifyErrors;

  // O2: inlining and the loop vectorizer over the glue loops. O3 took 3.5 s
  // more on one encoder layer and made the code no faster, since the
  // kernels dominate.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // No unrolling or interleaving: the glue loops are copies and
  // elementwise maps bound by memory, and unrolled they tripled the code
  // and its generation time.
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.LoopInterleaving = false;
  llvm::PassBuilder pb(tm.get(), tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
  mpm.run(*m, mam);
  return m;
}

LogicalResult mlir::tfm::writeWeightsObject(const WeightsBlob &layout,
                                            StringRef path,
                                            std::string &error) {
  // A relocatable ELF object with one read-only section and one hidden
  // symbol over it, written directly: code generation through LLVM would
  // copy and hash the weights several times, seconds for a large model.
  const uint64_t blobSize = layout.bytes;
  namespace E = llvm::ELF;
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  uint16_t machine = triple.getArch() == llvm::Triple::x86_64    ? E::EM_X86_64
                     : triple.getArch() == llvm::Triple::aarch64 ? E::EM_AARCH64
                                                                 : 0;
  if (!machine || !triple.isLittleEndian()) {
    error = "embedded weights are written for x86-64 and AArch64 only; use "
            "--external-weights";
    return failure();
  }
  const char shstrtab[] = "\0.rodata.tfm_weights\0.symtab\0.strtab\0.shstrtab";
  const uint32_t nameRodata = 1, nameSymtab = 21, nameStrtab = 29,
                 nameShstrtab = 37;
  std::string strtab = std::string("\0", 1) + kWeightsSymbol + '\0';
  auto align = [](uint64_t v, uint64_t a) { return (v + a - 1) / a * a; };
  uint64_t dataOff = align(sizeof(E::Elf64_Ehdr), 64);
  uint64_t symOff = align(dataOff + blobSize, 8);
  uint64_t strOff = symOff + 2 * sizeof(E::Elf64_Sym);
  uint64_t shstrOff = strOff + strtab.size();
  uint64_t shOff = align(shstrOff + sizeof(shstrtab), 8);

  E::Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, E::ElfMagic, 4);
  eh.e_ident[E::EI_CLASS] = E::ELFCLASS64;
  eh.e_ident[E::EI_DATA] = E::ELFDATA2LSB;
  eh.e_ident[E::EI_VERSION] = E::EV_CURRENT;
  eh.e_type = E::ET_REL;
  eh.e_machine = machine;
  eh.e_version = E::EV_CURRENT;
  eh.e_shoff = shOff;
  eh.e_ehsize = sizeof(E::Elf64_Ehdr);
  eh.e_shentsize = sizeof(E::Elf64_Shdr);
  eh.e_shnum = 5;
  eh.e_shstrndx = 4;

  E::Elf64_Sym syms[2]{};
  syms[1].st_name = 1;
  syms[1].setBindingAndType(E::STB_GLOBAL, E::STT_OBJECT);
  syms[1].st_other = E::STV_HIDDEN;
  syms[1].st_shndx = 1;
  syms[1].st_size = blobSize;

  E::Elf64_Shdr sh[5]{};
  sh[1] = {nameRodata, E::SHT_PROGBITS, E::SHF_ALLOC, 0, dataOff, blobSize,
           0, 0, 64, 0};
  sh[2] = {nameSymtab, E::SHT_SYMTAB, 0, 0, symOff, 2 * sizeof(E::Elf64_Sym),
           3, 1, 8, sizeof(E::Elf64_Sym)};
  sh[3] = {nameStrtab, E::SHT_STRTAB, 0, 0, strOff, strtab.size(), 0, 0, 1, 0};
  sh[4] = {nameShstrtab, E::SHT_STRTAB, 0, 0, shstrOff, sizeof(shstrtab), 0, 0,
           1, 0};

  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return failure();
  }
  auto pad = [&](uint64_t to) { os.write_zeros(to - os.tell()); };
  os.write(reinterpret_cast<const char *>(&eh), sizeof(eh));
  pad(dataOff);
  if (failed(writeWeights(layout, os, error)))
    return failure();
  pad(symOff);
  os.write(reinterpret_cast<const char *>(syms), sizeof(syms));
  os << strtab;
  os.write(shstrtab, sizeof(shstrtab));
  pad(shOff);
  os.write(reinterpret_cast<const char *>(sh), sizeof(sh));
  os.close();
  if (os.has_error()) {
    error = "cannot write '" + path.str() + "': " + os.error().message();
    os.clear_error();
    return failure();
  }
  return success();
}

LogicalResult mlir::tfm::writeObjectFile(llvm::Module &ir,
                                         const ArtifactOptions &options,
                                         StringRef path, std::string &error) {
  auto tm = makeTargetMachine(options, error);
  if (!tm)
    return failure();
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, out.os(), nullptr,
                              llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  pm.run(ir);
  out.os().flush();
  if (out.os().has_error()) {
    error = "cannot write '" + path.str() + "'";
    out.os().clear_error();
    return failure();
  }
  out.keep();
  return success();
}

LogicalResult mlir::tfm::linkSharedLibrary(ArrayRef<std::string> objects,
                                           StringRef soPath, bool relocatable,
                                           std::string &error) {
  auto linker = llvm::sys::findProgramByName("ld.lld");
  if (!linker)
    linker = llvm::sys::findProgramByName("ld.lld-19");
  if (!linker) {
    error = "cannot find the linker ld.lld (Debian package lld)";
    return failure();
  }
  // libm for erf and tanh, libc for malloc, libgcc_s for the conversions
  // the target has no instruction for (f64 to f16); linked by name so that
  // the library also loads into processes that did not load them globally,
  // and only where used (--as-needed).
  std::string multiarch = llvm::Triple(llvm::sys::getDefaultTargetTriple())
                              .getArchName()
                              .str() +
                          "-linux-gnu";
  SmallVector<std::string> args = {*linker, "-o", soPath.str()};
  if (relocatable) {
    args.push_back("-r");
    args.append(objects.begin(), objects.end());
  } else {
    for (const char *a :
         {"-shared", "--no-undefined", "--as-needed", "-z", "noexecstack",
          "-z", "relro", "--hash-style=both"})
      args.push_back(a);
    args.push_back("-L/lib/" + multiarch);
    args.push_back("-L/usr/lib/" + multiarch);
    args.append(objects.begin(), objects.end());
    args.push_back("-l:libm.so.6");
    args.push_back("-l:libc.so.6");
    args.push_back("-l:libgcc_s.so.1");
  }
  SmallVector<StringRef> argv(args.begin(), args.end());
  SmallString<128> errFile;
  if (llvm::sys::fs::createTemporaryFile("tfm-link", "txt", errFile)) {
    error = "cannot create a temporary file";
    return failure();
  }
  std::optional<StringRef> redirects[] = {std::nullopt, errFile.str(),
                                          errFile.str()};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(*linker, argv, std::nullopt, redirects,
                                     0, 0, &execError);
  auto log = llvm::MemoryBuffer::getFile(errFile);
  llvm::sys::fs::remove(errFile);
  if (rc != 0) {
    error = "linking '" + soPath.str() + "' failed" +
            (execError.empty() ? "" : ": " + execError);
    if (log && !(*log)->getBuffer().empty())
      error += ":\n" + (*log)->getBuffer().str();
    return failure();
  }
  return success();
}
