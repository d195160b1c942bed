//===- ArtifactAbi.cpp - The ABI's types and the module's tables ----------===//

#include "ArtifactIR.h"

#include "tfm/IR/TfmOps.h"
#include "tfm/abi.h"

#include "llvm/IR/DataLayout.h"
#include "llvm/IR/IRBuilder.h"

#include <cstddef>
#include <iterator>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::artifact;

std::optional<int32_t> artifact::dtypeOf(Type t) {
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

llvm::Constant *artifact::cstring(llvm::Module &m, StringRef s) {
  auto *init = llvm::ConstantDataArray::getString(m.getContext(), s);
  auto *g = new llvm::GlobalVariable(m, init->getType(), true,
                                     llvm::GlobalValue::PrivateLinkage, init,
                                     ".tfm.str");
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return g;
}

llvm::Constant *artifact::constantArray(llvm::Module &m, llvm::Type *elem,
                                        ArrayRef<llvm::Constant *> values,
                                        StringRef name) {
  if (values.empty())
    return llvm::ConstantPointerNull::get(
        llvm::PointerType::get(m.getContext(), 0));
  auto *ty = llvm::ArrayType::get(elem, values.size());
  return new llvm::GlobalVariable(m, ty, true,
                                  llvm::GlobalValue::PrivateLinkage,
                                  llvm::ConstantArray::get(ty, values), name);
}

FailureOr<ModuleTables> ModuleTables::read(ModuleOp module) {
  ModuleTables t;
  auto attr = [&](StringRef name) { return module->getAttr(name); };
  t.entries = dyn_cast_or_null<ArrayAttr>(attr("tfm.entries"));
  t.kernels = dyn_cast_or_null<ArrayAttr>(attr("tfm.kernels"));
  if (!t.entries || !t.kernels)
    return module.emitError("not a module of the tfm pipelines: it lacks "
                            "tfm.entries and tfm.kernels");
  t.deviceCode = dyn_cast_or_null<StringAttr>(attr("tfm.device_code"));
  t.deviceArch = dyn_cast_or_null<StringAttr>(attr("tfm.device_arch"));
  t.deviceKernels = dyn_cast_or_null<ArrayAttr>(attr("tfm.device_kernels"));
  if (t.deviceCode && (!t.deviceArch || !t.deviceKernels))
    return module.emitError("tfm.device_code without tfm.device_arch and "
                            "tfm.device_kernels");
  auto weightsBytes = dyn_cast_or_null<IntegerAttr>(attr("tfm.weights_bytes"));
  if (!weightsBytes)
    return module.emitError("no weights layout: run tfm-lower-to-cpu first");
  t.weightsBytes = weightsBytes.getInt();
  t.states = dyn_cast_or_null<ArrayAttr>(attr("tfm.states"));
  t.checks = dyn_cast_or_null<ArrayAttr>(attr("tfm.checks"));
  t.dynamicEntries = dyn_cast_or_null<ArrayAttr>(attr("tfm.dynamic_entries"));
  t.kernelOrigins = dyn_cast_or_null<ArrayAttr>(attr("tfm.kernel_origins"));
  if (t.kernelOrigins && t.kernelOrigins.size() != t.kernels.size())
    return module.emitError("tfm.kernel_origins does not match tfm.kernels");
  t.kernelFlags = dyn_cast_or_null<DenseI32ArrayAttr>(attr("tfm.kernel_flags"));
  if (t.kernelFlags &&
      t.kernelFlags.size() != static_cast<int64_t>(t.kernels.size()))
    return module.emitError("tfm.kernel_flags does not match tfm.kernels");
  t.deviceKernelOrigins =
      dyn_cast_or_null<ArrayAttr>(attr("tfm.device_kernel_origins"));
  if (t.deviceKernelOrigins &&
      (!t.deviceKernels ||
       t.deviceKernelOrigins.size() != t.deviceKernels.size()))
    return module.emitError(
        "tfm.device_kernel_origins does not match tfm.device_kernels");
  if (auto n = dyn_cast_or_null<IntegerAttr>(attr("tfm.generation_max_length")))
    t.generationMaxLength = n.getInt();
  if (auto bytes = dyn_cast_or_null<IntegerAttr>(attr("tfm.state_bytes")))
    t.stateBytes = bytes.getInt();
  if (auto slots =
          dyn_cast_or_null<IntegerAttr>(attr("tfm.check_slots_offset")))
    t.checkSlotsOffset = slots.getInt();
  // The dialect verified the tables' element types; the ABI takes fewer
  // element types than the dialect, so check those before the tables go.
  for (auto e : t.entries.getAsRange<EntryAttr>())
    for (ArrayAttr list : {e.getInputs(), e.getOutputs()})
      for (auto d : list.getAsRange<TensorDescAttr>())
        if (!dtypeOf(d.getType().getElementType()))
          return module.emitError("entry '")
                 << e.getName() << "': '" << d.getName() << "' has type "
                 << d.getType() << ", which the model ABI cannot carry";
  return t;
}

void artifact::dropTables(ModuleOp module) {
  SmallVector<NamedAttribute> keep;
  for (NamedAttribute a : module->getAttrs())
    if (!a.getName().getValue().starts_with("tfm."))
      keep.push_back(a);
  module->setAttrs(keep);
}

FailureOr<AbiTypes> AbiTypes::get(llvm::LLVMContext &c,
                                  const llvm::DataLayout &dl,
                                  std::string &error) {
  AbiTypes t;
  auto *ptr = t.ptr = llvm::PointerType::get(c, 0);
  auto *i32 = t.i32 = llvm::Type::getInt32Ty(c);
  auto *i64 = t.i64 = llvm::Type::getInt64Ty(c);
  auto *f64 = llvm::Type::getDoubleTy(c);
  auto abiStruct = [&](StringRef name, ArrayRef<llvm::Type *> fields,
                       size_t size, ArrayRef<size_t> offsets) {
    auto *ty = llvm::StructType::get(c, fields);
    const llvm::StructLayout *sl = dl.getStructLayout(ty);
    bool same = offsets.size() == fields.size() && sl->getSizeInBytes() == size;
    for (auto [i, off] : llvm::enumerate(offsets))
      same = same && sl->getElementOffset(i) == off;
    if (!same && error.empty())
      error = ("internal error: the artifact's " + name +
               " does not match tfm/abi.h on this target")
                  .str();
    return ty;
  };
  using Host = tfm_abi_host_t;
  t.host =
      abiStruct("tfm_abi_host_t",
                {i32, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, ptr, ptr,
                 ptr, ptr, ptr, ptr},
                sizeof(Host),
                {offsetof(Host, struct_size), offsetof(Host, arena),
                 offsetof(Host, weights), offsetof(Host, run_kernel),
                 offsetof(Host, session), offsetof(Host, state),
                 offsetof(Host, check_failed), offsetof(Host, arena_bytes),
                 offsetof(Host, weights_bytes), offsetof(Host, state_bytes),
                 offsetof(Host, input_bytes), offsetof(Host, output_bytes),
                 offsetof(Host, launch), offsetof(Host, read_device),
                 offsetof(Host, parallel_for), offsetof(Host, tensor_map)});
  using Tensor = tfm_abi_tensor_desc_t;
  t.tensor =
      abiStruct("tfm_abi_tensor_desc_t", {ptr, i32, i32, ptr}, sizeof(Tensor),
                {offsetof(Tensor, name), offsetof(Tensor, dtype),
                 offsetof(Tensor, rank), offsetof(Tensor, dims)});
  using Entry = tfm_abi_entry_t;
  t.entry = abiStruct("tfm_abi_entry_t", {ptr, i32, ptr, i32, ptr, i64, ptr},
                      sizeof(Entry),
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
  t.params = llvm::ArrayType::get(i64, TFM_KERNEL_MAX_PARAMS);
  t.fparams = llvm::ArrayType::get(f64, TFM_KERNEL_MAX_FPARAMS);
  t.strides = llvm::ArrayType::get(i64, TFM_KERNEL_MAX_STRIDES);
  t.kernel =
      abiStruct("tfm_abi_kernel_desc_t",
                {i32, i32, t.params, t.fparams, t.strides}, sizeof(Kernel),
                {offsetof(Kernel, kind), offsetof(Kernel, dtype),
                 offsetof(Kernel, params), offsetof(Kernel, fparams),
                 offsetof(Kernel, strides)});
  using State = tfm_abi_state_desc_t;
  t.state = abiStruct("tfm_abi_state_desc_t", {t.tensor, i32, i64, i64},
                      sizeof(State),
                      {offsetof(State, tensor), offsetof(State, kind),
                       offsetof(State, offset), offsetof(State, init_offset)});
  using Check = tfm_abi_check_desc_t;
  t.check = abiStruct(
      "tfm_abi_check_desc_t", {ptr, ptr, i32, i64, i64}, sizeof(Check),
      {offsetof(Check, op), offsetof(Check, tensor), offsetof(Check, input),
       offsetof(Check, lower), offsetof(Check, upper)});
  using Model = tfm_abi_model_t;
  t.model = abiStruct("tfm_abi_model_t",
                      {i32, i32, ptr, i32, ptr, ptr, i64, ptr, i32, ptr, i64,
                       i32, ptr, i32, ptr, i32, ptr, ptr, i64, i32, ptr, i64,
                       i32, ptr, ptr, ptr, ptr, i32, i64, ptr, ptr, ptr},
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
                       offsetof(Model, check_slots_offset),
                       offsetof(Model, cpu),
                       offsetof(Model, cpu_features),
                       offsetof(Model, input_values)});
  using Dynamic = tfm_abi_dynamic_entry_t;
  t.dynamic = abiStruct(
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
  if (!error.empty())
    return failure();
  return t;
}

llvm::Constant *artifact::tensorDesc(llvm::Module &m, const AbiTypes &abi,
                                     StringRef name, RankedTensorType type,
                                     ArrayRef<int64_t> shape) {
  SmallVector<llvm::Constant *> dims;
  for (int64_t dim : shape.empty() ? type.getShape() : shape)
    dims.push_back(abi.i64c(dim));
  return llvm::ConstantStruct::get(
      abi.tensor,
      {cstring(m, name), abi.i32c(*dtypeOf(type.getElementType())),
       abi.i32c(type.getRank()), constantArray(m, abi.i64, dims, ".tfm.dims")});
}
