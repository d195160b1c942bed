//===- ArtifactMetadata.cpp - The metadata table tfm_model_v1 returns -----===//

#include "ArtifactIR.h"

#include "tfm/IR/TfmOps.h"
#include "tfm/Target/Symbols.h"
#include "tfm/abi.h"

#include "llvm/IR/IRBuilder.h"

#include <iterator>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::artifact;

namespace {

/// The entries that serve a range of sizes: the largest bucket's
/// descriptors, with each axis that follows a symbol written as
/// -1 - symbol.
FailureOr<SmallVector<llvm::Constant *>>
dynamicEntries(ModuleOp module, llvm::Module &m, const AbiTypes &abi,
               const ModuleTables &tables) {
  SmallVector<llvm::Constant *> values;
  if (!tables.dynamicEntries)
    return values;
  ArrayAttr entries = tables.entries;
  for (auto d : tables.dynamicEntries.getAsRange<DynamicEntryAttr>()) {
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
      buckets.push_back(abi.i32c(index));
    }
    for (int64_t v : d.getBucketSizes().asArrayRef())
      sizes.push_back(abi.i64c(v));
    for (int64_t v : d.getMinSizes().asArrayRef())
      mins.push_back(abi.i64c(v));
    for (int64_t v : d.getMaxSizes().asArrayRef())
      maxs.push_back(abi.i64c(v));
    for (int64_t v : d.getKeyMasks().asArrayRef())
      masks.push_back(abi.i32c(v));
    for (auto name : d.getSymbols().getAsRange<StringAttr>())
      symbolNames.push_back(cstring(m, name.getValue()));
    auto largest = *std::next(
        entries.getAsRange<EntryAttr>().begin(),
        indexOf(cast<FlatSymbolRefAttr>(d.getBuckets().getValue().back())
                    .getValue()));
    auto describe = [&](ArrayAttr list, ArrayAttr axes,
                        StringRef what) -> FailureOr<llvm::Constant *> {
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
        for (auto [dim, symbol] :
             llvm::zip(type.getShape(), axesOf.asArrayRef()))
          dims.push_back(symbol >= 0 ? -1 - symbol : dim);
        descs.push_back(tensorDesc(m, abi, desc.getName(), type, dims));
      }
      return constantArray(m, abi.tensor, descs,
                           (".tfm.dynamic." + what).str());
    };
    auto inputs = describe(largest.getInputs(), d.getInputs(), "inputs");
    auto outputs = describe(largest.getOutputs(), d.getOutputs(), "outputs");
    if (failed(inputs) || failed(outputs))
      return module.emitError("dynamic entry '")
             << d.getName() << "' does not match its largest bucket";
    values.push_back(llvm::ConstantStruct::get(
        abi.dynamic,
        {cstring(m, d.getName()), abi.i32c(symbolNames.size()),
         constantArray(m, abi.ptr, symbolNames, ".tfm.symbols"),
         constantArray(m, abi.i64, mins, ".tfm.min_sizes"),
         constantArray(m, abi.i64, maxs, ".tfm.max_sizes"),
         abi.i32c(d.getInputs().size()), *inputs,
         abi.i32c(d.getOutputs().size()), *outputs, abi.i32c(masks.size()),
         constantArray(m, abi.i32, masks, ".tfm.key_masks"),
         abi.i32c(buckets.size()),
         constantArray(m, abi.i32, buckets, ".tfm.buckets"),
         constantArray(m, abi.i64, sizes, ".tfm.bucket_sizes")}));
  }
  return values;
}

/// The kernel descriptors.
SmallVector<llvm::Constant *> kernelDescs(const AbiTypes &abi,
                                          ArrayAttr kernels) {
  SmallVector<llvm::Constant *> values;
  llvm::Type *f64 = abi.fparams->getElementType();
  for (auto k : kernels.getAsRange<KernelAttr>()) {
    SmallVector<llvm::Constant *> params, fparams, strides;
    for (int64_t p : k.getParams().asArrayRef())
      params.push_back(abi.i64c(p));
    if (k.getStrides())
      for (int64_t v : k.getStrides().asArrayRef())
        strides.push_back(abi.i64c(v));
    if (k.getFparams())
      for (double f : k.getFparams().asArrayRef())
        fparams.push_back(llvm::ConstantFP::get(f64, f));
    // The dialect's verifier keeps the arrays within the ABI's sizes.
    params.resize(TFM_KERNEL_MAX_PARAMS, abi.i64c(0));
    fparams.resize(TFM_KERNEL_MAX_FPARAMS, llvm::ConstantFP::get(f64, 0.0));
    strides.resize(TFM_KERNEL_MAX_STRIDES, abi.i64c(0));
    values.push_back(llvm::ConstantStruct::get(
        abi.kernel, {abi.i32c(static_cast<int32_t>(k.getKind())),
                     abi.i32c(*dtypeOf(k.getDtype())),
                     llvm::ConstantArray::get(abi.params, params),
                     llvm::ConstantArray::get(abi.fparams, fparams),
                     llvm::ConstantArray::get(abi.strides, strides)}));
  }
  return values;
}

/// A table of strings (kernel names, origins), or null for none.
llvm::Constant *stringTable(llvm::Module &m, const AbiTypes &abi,
                            ArrayAttr strings, StringRef name) {
  if (!strings)
    return llvm::ConstantPointerNull::get(abi.ptr);
  SmallVector<llvm::Constant *> values;
  for (auto text : strings.getAsRange<StringAttr>())
    values.push_back(cstring(m, text.getValue()));
  return constantArray(m, abi.ptr, values, name);
}

} // namespace

LogicalResult artifact::emitMetadata(ModuleOp module, llvm::Module &m,
                                     const AbiTypes &abi, const ModuleTables &t,
                                     ArrayRef<llvm::Constant *> entryValues,
                                     const ArtifactOptions &options,
                                     const CpuTarget &cpu) {
  FailureOr<SmallVector<llvm::Constant *>> dynamicValues =
      dynamicEntries(module, m, abi, t);
  if (failed(dynamicValues))
    return failure();
  SmallVector<llvm::Constant *> kernelValues = kernelDescs(abi, t.kernels);

  // The session state's slots.
  SmallVector<llvm::Constant *> stateValues;
  if (t.states)
    for (auto d : t.states.getAsRange<StateSlotAttr>())
      stateValues.push_back(llvm::ConstantStruct::get(
          abi.state, {tensorDesc(m, abi, d.getName(), d.getType()),
                      abi.i32c(static_cast<int32_t>(d.getKind())),
                      abi.i64c(d.getOffset()), abi.i64c(d.getInitOffset())}));

  // The run-time checks.
  SmallVector<llvm::Constant *> checkValues;
  if (t.checks)
    for (auto ch : t.checks.getAsRange<IndexCheckAttr>())
      checkValues.push_back(llvm::ConstantStruct::get(
          abi.check, {cstring(m, ch.getOp()), cstring(m, ch.getTensor()),
                      abi.i32c(ch.getInput()), abi.i64c(ch.getLower()),
                      abi.i64c(ch.getUpper())}));

  // Embedded weights live in an object of their own (writeWeightsObject):
  // kept out of this module, they cost the optimizer nothing.
  llvm::Constant *nullPtr = llvm::ConstantPointerNull::get(abi.ptr);
  llvm::Constant *weights = nullPtr;
  if (!options.externalWeights && t.weightsBytes > 0) {
    auto *g = new llvm::GlobalVariable(
        m,
        llvm::ArrayType::get(llvm::Type::getInt8Ty(m.getContext()),
                             t.weightsBytes),
        true, llvm::GlobalValue::ExternalLinkage, nullptr, kWeightsSymbol);
    g->setVisibility(llvm::GlobalValue::HiddenVisibility);
    g->setAlignment(llvm::Align(64));
    weights = g;
  }
  llvm::Constant *external = options.externalWeights
                                 ? cstring(m, options.externalWeightsName)
                                 : nullPtr;
  SmallVector<llvm::Constant *> flagValues;
  if (t.kernelFlags)
    for (int32_t f : t.kernelFlags.asArrayRef())
      flagValues.push_back(abi.i32c(f));
  // What each entry's inputs take, three values an input.
  SmallVector<llvm::Constant *> inputValues;
  bool anyInputValues = false;
  for (auto e : t.entries.getAsRange<EntryAttr>()) {
    DenseI64ArrayAttr values = e.getInputValues();
    anyInputValues |= static_cast<bool>(values);
    for (size_t i = 0; i < 3 * e.getInputs().size(); ++i)
      inputValues.push_back(abi.i64c(values ? values[i] : 0));
  }
  uint64_t modelSize = m.getDataLayout().getTypeAllocSize(abi.model);
  StringAttr code = t.deviceCode;
  auto *model = new llvm::GlobalVariable(
      m, abi.model, true, llvm::GlobalValue::PrivateLinkage,
      llvm::ConstantStruct::get(
          abi.model,
          {abi.i32c(TFM_ABI_VERSION),
           abi.i32c(modelSize),
           cstring(m, options.producer),
           abi.i32c(entryValues.size()),
           constantArray(m, abi.entry, entryValues, ".tfm.entries"),
           weights,
           abi.i64c(t.weightsBytes),
           external,
           abi.i32c(kernelValues.size()),
           constantArray(m, abi.kernel, kernelValues, ".tfm.kernels"),
           abi.i64c(t.stateBytes),
           abi.i32c(stateValues.size()),
           constantArray(m, abi.state, stateValues, ".tfm.states"),
           abi.i32c(checkValues.size()),
           constantArray(m, abi.check, checkValues, ".tfm.checks"),
           abi.i32c(code ? TFM_TARGET_CUDA : TFM_TARGET_CPU),
           code ? cstring(m, t.deviceArch.getValue()) : nullPtr,
           code ? cstring(m, code.getValue()) : nullPtr,
           abi.i64c(code ? code.getValue().size() + 1 : 0),
           abi.i32c(t.deviceKernels ? t.deviceKernels.size() : 0),
           stringTable(m, abi, t.deviceKernels, ".tfm.device_kernels"),
           abi.i64c(t.generationMaxLength),
           abi.i32c(dynamicValues->size()),
           constantArray(m, abi.dynamic, *dynamicValues,
                         ".tfm.dynamic_entries"),
           stringTable(m, abi, t.kernelOrigins, ".tfm.kernel_origins"),
           t.kernelFlags
               ? constantArray(m, abi.i32, flagValues, ".tfm.kernel_flags")
               : nullPtr,
           stringTable(m, abi, t.deviceKernelOrigins,
                       ".tfm.device_kernel_origins"),
           abi.i32c(t.checkSlotsOffset ? TFM_CHECKS_IN_STATE
                                       : TFM_CHECKS_MID_RUN),
           abi.i64c(t.checkSlotsOffset.value_or(0)),
           cstring(m, cpu.name),
           cstring(m, cpu.features),
           anyInputValues
               ? constantArray(m, abi.i64, inputValues, ".tfm.input_values")
               : nullPtr}),
      ".tfm.model");

  // The one exported symbol.
  auto *getter = llvm::Function::Create(
      llvm::FunctionType::get(abi.ptr, {}, false),
      llvm::GlobalValue::ExternalLinkage, TFM_ABI_MODEL_SYMBOL, m);
  llvm::IRBuilder<> b(
      llvm::BasicBlock::Create(m.getContext(), "entry", getter));
  b.CreateRet(model);
  return success();
}
