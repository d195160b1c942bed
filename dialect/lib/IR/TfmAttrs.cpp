//===- TfmAttrs.cpp - Attributes of the tfm dialect -----------------------===//

#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/abi.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tfm;

// The enums are the ABI's codes, written once more in ODS to print them as
// keywords; these keep the two equal.
static_assert(
    static_cast<int>(KernelKind::linear) == TFM_KERNEL_LINEAR &&
        static_cast<int>(KernelKind::batch_matmul) == TFM_KERNEL_BATCH_MATMUL &&
        static_cast<int>(KernelKind::masked_softmax) ==
            TFM_KERNEL_MASKED_SOFTMAX &&
        static_cast<int>(KernelKind::layer_norm) == TFM_KERNEL_LAYER_NORM &&
        static_cast<int>(KernelKind::reorder) == TFM_KERNEL_REORDER &&
        static_cast<int>(KernelKind::adam) == TFM_KERNEL_ADAM &&
        static_cast<int>(KernelKind::sgd) == TFM_KERNEL_SGD &&
        static_cast<int>(KernelKind::layer_norm_backward) ==
            TFM_KERNEL_LAYER_NORM_BACKWARD &&
        static_cast<int>(KernelKind::conv_2d) == TFM_KERNEL_CONV_2D &&
        static_cast<int>(KernelKind::attention) == TFM_KERNEL_ATTENTION &&
        static_cast<int>(KernelKind::rms_norm) == TFM_KERNEL_RMS_NORM &&
        static_cast<int>(KernelKind::rms_norm_backward) ==
            TFM_KERNEL_RMS_NORM_BACKWARD &&
        static_cast<int>(KernelKind::all_reduce) == TFM_KERNEL_ALL_REDUCE &&
        static_cast<int>(KernelKind::quantized_linear) ==
            TFM_KERNEL_QUANTIZED_LINEAR,
    "KernelKind and tfm_kernel_kind_t disagree");
static_assert(static_cast<int>(StateKind::parameter) == TFM_STATE_PARAMETER &&
                  static_cast<int>(StateKind::adam_m) == TFM_STATE_ADAM_M &&
                  static_cast<int>(StateKind::adam_v) == TFM_STATE_ADAM_V &&
                  static_cast<int>(StateKind::step) == TFM_STATE_STEP &&
                  static_cast<int>(StateKind::cache) == TFM_STATE_CACHE &&
                  static_cast<int>(StateKind::source) == TFM_STATE_SOURCE &&
                  static_cast<int>(StateKind::rank) == TFM_STATE_RANK &&
                  static_cast<int>(StateKind::adam_m_shard) ==
                      TFM_STATE_ADAM_M_SHARD &&
                  static_cast<int>(StateKind::adam_v_shard) ==
                      TFM_STATE_ADAM_V_SHARD,
              "StateKind and tfm_state_kind_t disagree");

#define GET_ATTRDEF_CLASSES
#include "tfm/IR/TfmAttrs.cpp.inc"

void TfmDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tfm/IR/TfmAttrs.cpp.inc"
      >();
}

Attribute mlir::tfm::getPlannedBuffer(Operation *op, unsigned index) {
  auto plan = op->getAttrOfType<ArrayAttr>(kPlanAttrName);
  if (!plan || index >= plan.size())
    return {};
  return plan[index];
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult ArenaAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t offset, int64_t bytes,
                                DenseI64ArrayAttr strides, int64_t reuses) {
  if (offset < 0 || offset % TFM_BUFFER_ALIGNMENT != 0)
    return emitError() << "arena offset " << offset
                       << " is not a non-negative multiple of "
                       << TFM_BUFFER_ALIGNMENT;
  if (bytes < 0)
    return emitError() << "arena storage of " << bytes << " bytes";
  if (strides && llvm::any_of(strides.asArrayRef(),
                              [](int64_t s) { return s < 0; }))
    return emitError() << "negative arena strides " << strides;
  if (reuses < -1)
    return emitError() << "reuses operand " << reuses;
  return success();
}

LogicalResult ViewAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t operand, int64_t result, int64_t offset,
                               DenseI64ArrayAttr strides) {
  if ((operand < 0) == (result < 0))
    return emitError() << "a view names exactly one operand or one result";
  if (offset < 0 || llvm::any_of(strides.asArrayRef(),
                                 [](int64_t s) { return s < 0; }))
    return emitError() << "a view's offset and strides are non-negative";
  return success();
}

LogicalResult OutputAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t index) {
  if (index < 0)
    return emitError() << "output index " << index;
  return success();
}

LogicalResult KernelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 KernelKind kind, Type dtype,
                                 DenseI64ArrayAttr params,
                                 DenseF64ArrayAttr fparams,
                                 DenseI64ArrayAttr strides) {
  // GEMMs multiply in a narrower type where the compute type asks for it.
  bool gemm = kind == KernelKind::linear || kind == KernelKind::batch_matmul;
  if (!dtype.isF32() && !(gemm && (dtype.isBF16() || dtype.isF16())))
    return emitError() << "kernel " << stringifyKernelKind(kind)
                       << " computes in f32" << (gemm ? ", bf16 or f16" : "")
                       << ", not " << dtype;
  // Checked in every build: a descriptor cut to fit the ABI would run the
  // kernel on the wrong sizes.
  if (params.size() > TFM_KERNEL_MAX_PARAMS ||
      (fparams && fparams.size() > TFM_KERNEL_MAX_FPARAMS) ||
      (strides && strides.size() > TFM_KERNEL_MAX_STRIDES))
    return emitError() << "kernel " << stringifyKernelKind(kind)
                       << " has more params, fparams or strides than "
                          "tfm/abi.h holds ("
                       << TFM_KERNEL_MAX_PARAMS << ", "
                       << TFM_KERNEL_MAX_FPARAMS << ", "
                       << TFM_KERNEL_MAX_STRIDES << ")";
  return success();
}

LogicalResult EntryAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringRef name, FlatSymbolRefAttr symbol,
                                ArrayAttr inputs, ArrayAttr outputs,
                                int64_t arenaBytes,
                                DenseI64ArrayAttr inputValues) {
  if (inputValues) {
    if (inputValues.size() != 3 * static_cast<int64_t>(inputs.size()))
      return emitError() << "entry '" << name << "' has " << inputValues.size()
                         << " input values for " << inputs.size()
                         << " inputs; it needs three per input";
    for (int64_t i = 0; i < inputValues.size(); i += 3) {
      int64_t kind = inputValues[i];
      if (kind != TFM_INPUT_VALUES_ANY && kind != TFM_INPUT_VALUES_INDICES &&
          kind != TFM_INPUT_VALUES_MASK)
        return emitError() << "entry '" << name << "': input " << i / 3
                           << " takes values of unknown kind " << kind;
      if (kind == TFM_INPUT_VALUES_INDICES &&
          inputValues[i + 1] >= inputValues[i + 2])
        return emitError() << "entry '" << name << "': input " << i / 3
                           << " takes indices in an empty range";
    }
  }
  for (ArrayAttr list : {inputs, outputs})
    for (Attribute a : list)
      if (!llvm::isa<TensorDescAttr>(a))
        return emitError() << "entry '" << name
                           << "': inputs and outputs are #tfm.tensor_desc, "
                              "not "
                           << a;
  if (arenaBytes < 0)
    return emitError() << "entry '" << name << "' has an arena of "
                       << arenaBytes << " bytes";
  return success();
}

LogicalResult
StateSlotAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      StringRef name, StateKind kind, RankedTensorType type,
                      int64_t offset, int64_t initOffset) {
  if (offset < 0 || offset % TFM_BUFFER_ALIGNMENT != 0)
    return emitError() << "state slot '" << name << "' at offset " << offset;
  if (initOffset < -1 || (kind != StateKind::parameter && initOffset != -1))
    return emitError() << "state slot '" << name
                       << "': only a parameter starts from the weights";
  return success();
}

LogicalResult
IndexCheckAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringRef op, StringRef tensor, int64_t input,
                       int64_t lower, int64_t upper) {
  if (lower > upper)
    return emitError() << "index range [" << lower << ", " << upper
                       << ") is empty the wrong way round";
  if (input < -1)
    return emitError() << "input " << input;
  return success();
}

//===----------------------------------------------------------------------===//
// The discardable attributes the dialect owns
//===----------------------------------------------------------------------===//

namespace {
template <typename... Attrs>
LogicalResult checkArrayOf(Operation *op, NamedAttribute attr,
                           StringRef what) {
  auto list = dyn_cast<ArrayAttr>(attr.getValue());
  if (!list)
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be an array of " << what;
  for (Attribute a : list)
    if (!isa<Attrs...>(a))
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' holds " << a << ", which is not " << what;
  return success();
}
} // namespace

LogicalResult TfmDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kPlanAttrName) {
    if (failed(checkArrayOf<ArenaAttr, ViewAttr, InlineAttr, OutputAttr>(
            op, attr, "#tfm.arena, #tfm.view, #tfm.inline or #tfm.output")))
      return failure();
    auto plan = cast<ArrayAttr>(attr.getValue());
    if (plan.size() != op->getNumResults())
      return op->emitError() << "'tfm.plan' has " << plan.size()
                             << " entries for " << op->getNumResults()
                             << " results";
    for (auto [i, a] : llvm::enumerate(plan)) {
      auto view = dyn_cast<ViewAttr>(a);
      if (!view)
        continue;
      if (view.getOperand() >= static_cast<int64_t>(op->getNumOperands()) ||
          view.getResult() >= static_cast<int64_t>(op->getNumResults()) ||
          view.getResult() == static_cast<int64_t>(i))
        return op->emitError() << "result #" << i << " is a view of "
                               << (view.getOperand() >= 0 ? "operand "
                                                          : "result ")
                               << std::max(view.getOperand(), view.getResult())
                               << ", which the op does not have";
      auto type = dyn_cast<ShapedType>(op->getResult(i).getType());
      if (!type || view.getStrides().size() != type.getRank())
        return op->emitError() << "result #" << i << " is a view whose "
                               << view.getStrides().size()
                               << " strides do not match its rank";
    }
    return success();
  }
  if (name == "tfm.entries")
    return checkArrayOf<EntryAttr>(op, attr, "#tfm.entry");
  if (name == "tfm.kernels")
    return checkArrayOf<KernelAttr>(op, attr, "#tfm.kernel");
  if (name == "tfm.states")
    return checkArrayOf<StateSlotAttr>(op, attr, "#tfm.state_slot");
  if (name == "tfm.checks")
    return checkArrayOf<IndexCheckAttr>(op, attr, "#tfm.index_check");
  return success();
}

//===----------------------------------------------------------------------===//
// tfm.kernel_call
//===----------------------------------------------------------------------===//

LogicalResult KernelCallOp::verify() {
  unsigned n = getArgs().size();
  if ((getSlots() && getSlots()->size() != n) ||
      (getOffsets() && getOffsets()->size() != n))
    return emitOpError() << "has " << n
                         << " buffers but slots or offsets of another length";
  int64_t last = -1;
  for (unsigned i = 0; i < n; ++i) {
    int64_t slot = getSlot(i);
    if (slot <= last || slot >= TFM_KERNEL_MAX_ARGS)
      return emitOpError() << "slots must increase and stay below "
                           << TFM_KERNEL_MAX_ARGS << "; slot " << slot
                           << " of buffer " << i << " does not";
    last = slot;
    if (getOffset(i) < 0)
      return emitOpError() << "buffer " << i << " has a negative offset";
    auto type = cast<MemRefType>(getArgs()[i].getType());
    if (!type.getLayout().isIdentity())
      return emitOpError() << "buffer " << i << " of type " << type
                           << " is not dense; kernels take dense buffers "
                              "(strides go in the descriptor)";
  }
  // A GEMM's two operands are f32, or both held in the type it multiplies
  // in (TFM_KERNEL_FLAG_NARROW_OPERANDS).
  KernelAttr desc = getKernel();
  if (desc.getKind() == KernelKind::linear ||
      desc.getKind() == KernelKind::batch_matmul) {
    Type first;
    for (unsigned i = 0; i < n; ++i) {
      if (getSlot(i) > 1)
        continue;
      Type t = cast<MemRefType>(getArgs()[i].getType()).getElementType();
      if ((!t.isF32() && t != desc.getDtype()) || (first && t != first))
        return emitOpError() << "multiplies operands of type " << t
                             << "; a GEMM's two operands are both f32 or both "
                             << desc.getDtype();
      first = t;
    }
  }
  return success();
}

LogicalResult
DynamicEntryAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         StringRef name, ArrayAttr symbols,
                         DenseI64ArrayAttr minSizes, DenseI64ArrayAttr maxSizes,
                         ArrayAttr inputs, ArrayAttr outputs,
                         DenseI64ArrayAttr keyMasks, ArrayAttr buckets,
                         DenseI64ArrayAttr bucketSizes) {
  auto fail = [&]() {
    return emitError() << "dynamic entry '" << name << "': ";
  };
  int64_t n = symbols.size();
  if (n == 0 || !llvm::all_of(symbols, llvm::IsaPred<StringAttr>))
    return fail() << "needs one or more symbols, as strings";
  if (minSizes.size() != n || maxSizes.size() != n)
    return fail() << "needs a min and a max size per symbol";
  for (int64_t s = 0; s < n; ++s)
    if (minSizes[s] < 1 || minSizes[s] > maxSizes[s])
      return fail() << "symbol " << symbols[s] << " ranges over "
                    << minSizes[s] << ".." << maxSizes[s];
  for (ArrayAttr list : {inputs, outputs})
    for (Attribute a : list) {
      auto axes = llvm::dyn_cast<DenseI64ArrayAttr>(a);
      if (!axes)
        return fail() << "an input's or output's axes are not an i64 array";
      for (int64_t sym : axes.asArrayRef())
        if (sym < -1 || sym >= n)
          return fail() << "an axis has symbol " << sym << " of " << n;
    }
  for (int64_t sym : keyMasks.asArrayRef())
    if (sym < 0 || sym >= n)
      return fail() << "a key mask masks symbol " << sym << " of " << n;
  if (buckets.empty() ||
      !llvm::all_of(buckets, llvm::IsaPred<FlatSymbolRefAttr>))
    return fail() << "needs one or more buckets, as symbol references";
  if (bucketSizes.size() != static_cast<int64_t>(buckets.size()) * n)
    return fail() << "needs " << n << " sizes per bucket";
  for (int64_t s = 0; s < n; ++s)
    if (bucketSizes[(buckets.size() - 1) * n + s] < maxSizes[s])
      return fail() << "its last bucket does not hold the largest size of "
                    << symbols[s];
  return success();
}
