//===- BufferAssignment.h - Buffers of planned tfm functions ----*- C++ -*-===//
//
// What every backend shares when it turns a planned tfm function (after
// tfm-plan-memory) into code on buffers: the layout of the weights and of
// the session state, strided views of one tensor's storage, and
// `BufferizedEntry`, which builds one entry function:
//
//   func @__tfm_entry_<name>(%host: !llvm.ptr, %arena: memref<Axi8>,
//                            %weights: memref<Wxi8>, %state: memref<Sxi8>,
//                            %in..., %out...) -> i32
//
// Every tensor gets its buffer from the plan (`tfm.plan`): a view of the
// arena at its offset, a strided view of another tensor's storage, the
// caller's output buffer; constants live in the weights, parameters in the
// state, inputs in the caller's buffers. This is the bufferization step of
// the backends; it is done here rather than by the generic one-shot
// bufferization because the plan has already decided every buffer, and tfm
// ops are all value semantics on static shapes. The lowering checks what it
// reads of the plan (views inside their storage, dense storage where a
// lowering writes densely) and reports a disagreement as an internal error.
//
// Scratch memory an op's lowering needs lies in the arena too, past the
// plan's buffers, so compiled code never allocates. The entry returns 0, or
// at the first failure (a kernel's status, an index out of range) that
// failure's code.
//
// How each op is lowered is not decided here: an OpLoweringSet (OpLowering.h)
// maps op names to lowerings, which the backend-neutral TfmToLinalg files
// and each target's files populate.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_COMMON_BUFFERASSIGNMENT_H
#define TFM_CONVERSION_COMMON_BUFFERASSIGNMENT_H

#include "tfm/Conversion/Common/KernelCalls.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Transforms/LayoutRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <set>
#include <string>
#include <tuple>

namespace mlir::tfm {

class OpLoweringSet;

/// The product of `dims` (1 for none).
int64_t product(ArrayRef<int64_t> dims);

/// The memref type of a ranked tensor type, with the identity layout.
MemRefType memrefOf(Type tensorType);

/// Whether a shaped type's elements are f32.
bool isF32(Type shapedType);

/// A tensor read in place from another's storage: element i lies at
/// base[offset + Σ i_d · strides[d]], base being a dense buffer.
struct StridedView {
  Value base;
  int64_t offset = 0;
  SmallVector<int64_t> shape, strides;

  /// Whether the view is `base` itself read densely from its start.
  bool isDense() const { return offset == 0 && isRowMajor(shape, strides); }
};

/// The constants of every entry, deduplicated, laid out at the ABI's
/// buffer alignment.
struct WeightsLayout {
  DenseMap<Attribute, int64_t> offsetOf;
  /// Where a constant stored in a GEMM's narrower operand type alone lies
  /// (its rounded copy's offset), by its f32 value.
  DenseMap<Attribute, int64_t> narrowOffsetOf;
  SmallVector<Attribute> values;
  SmallVector<int64_t> offsets;
  int64_t bytes = 0;

  int64_t add(ElementsAttr value);
};

/// The session state of a training artifact: parameters, Adam's moments and
/// the step count, each at an aligned offset (tfm/abi.h).
struct StateLayout {
  struct Slot {
    std::string name;
    int32_t kind; // a tfm_state_kind_t
    RankedTensorType type;
    int64_t offset, init;
  };
  SmallVector<Slot> slots;
  llvm::StringMap<int64_t> parameter, adamM, adamV, cache;
  llvm::StringMap<RankedTensorType> typeOf;
  int64_t step = -1, rank = -1;
  int64_t bytes = 0;

  int64_t add(StringRef name, int32_t kind, RankedTensorType type,
              int64_t init);
  /// The index in `slots` (the ABI's states table) of `name`'s slot of
  /// `kind`, or -1.
  int64_t indexOf(StringRef name, int32_t kind) const;
};

/// The run-time checks of a module (#tfm.index_check), one table for every
/// entry.
struct CheckTable {
  SmallVector<Attribute> checks;
  int32_t add(Attribute check) {
    checks.push_back(check);
    return static_cast<int32_t>(checks.size() - 1);
  }
};

/// What every entry of a module shares: the weights, the state slots and
/// the checks.
struct ModuleLayout {
  WeightsLayout weights;
  StateLayout state;
  CheckTable checks;
  /// Where in the state the checks write their outcomes
  /// (TFM_CHECKS_IN_STATE), past every state slot; -1 when they stop the
  /// run instead. recordModuleLayout sizes the state for them.
  int64_t checkSlotsOffset = -1;
};

/// Lays out the weights (every constant and every parameter's initial
/// value) and the session state of `entries`. With `narrowType`, an f32
/// constant whose every use `readsNarrow` (rounds to that type first) is
/// stored rounded instead (WeightsLayout::narrowOffsetOf). Reports and
/// fails on a parameter with two types or an update of no parameter.
LogicalResult
layOutModule(ArrayRef<func::FuncOp> entries, ModuleLayout &layout,
             Type narrowType = {},
             function_ref<bool(OpOperand &)> readsNarrow = nullptr);

/// Records the layouts and the checks on `module` for the artifact emitter
/// (`tfm.weights`, `tfm.weight_offsets`, `tfm.weights_bytes`, `tfm.states`,
/// `tfm.state_bytes`, `tfm.checks`, `tfm.check_slots_offset`), and the
/// entries (`tfm.entries`).
void recordModuleLayout(ModuleOp module, const ModuleLayout &layout,
                        ArrayRef<Attribute> entries);

/// Declares the function compiled code calls when a run-time check fails
/// (defined by the artifact emitter; it calls host->check_failed).
void declareCheckFailed(ModuleOp module);

/// Declares the runtime callback `name` of `type` (private, at the top of
/// `module`) unless the module has it already.
void declareHostFunction(ModuleOp module, StringRef name, FunctionType type);

/// "node 'N' (OpType)" for an op imported from ONNX, "file:line:col" for
/// one parsed from MLIR.
std::string describeLocation(Location loc);

/// The public functions with bodies: the entries a backend compiles.
SmallVector<func::FuncOp> entryFunctions(ModuleOp module);

/// Builds the entry function of one planned tfm function. Targets derive
/// from it to add their own state (kernel tables, launch configurations)
/// and override the hooks below.
class BufferizedEntry {
public:
  /// LLVM-style RTTI, so a target's lowerings can reach their entry type.
  enum class Kind { CPU, GPU };

  BufferizedEntry(Kind kind, func::FuncOp fn, ModuleLayout &layout);
  virtual ~BufferizedEntry();
  Kind getKind() const { return kind; }

  /// Builds `@__tfm_entry_<name>` before `fn`, lowering every op through
  /// `lowerings`, and describes it in `entryInfo` (a #tfm.entry). Does not
  /// erase `fn`.
  LogicalResult run(const OpLoweringSet &lowerings, Attribute &entryInfo);

  //===------------------------------------------------------------------===//
  // Buffers
  //===------------------------------------------------------------------===//

  /// The buffer of `tensor`; a strided view is materialized as a strided
  /// memref (once).
  Value bufferOf(Value tensor);
  /// A dense row-major buffer of `tensor`, copying a strided view into
  /// scratch memory if needed (kernels read dense operands).
  Value denseOf(Value tensor);
  /// Where `tensor`'s elements lie: its view, or its buffer read densely.
  StridedView viewOf(Value tensor);
  /// Whether `tensor` is kept as a strided view of another's storage.
  bool isView(Value tensor) const { return views.count(tensor); }
  /// Whether the plan computes `tensor` where it is read (#tfm.inline).
  static bool isInline(Value tensor);
  /// Whether `tensor` holds unsigned integers. Buffers hold integers
  /// signless, as arith requires, so the lowerings whose result depends on
  /// signedness (division, order, conversions) ask here.
  bool isUnsigned(Value tensor) const { return unsignedTensors.contains(tensor); }
  /// The element type `tensor` was declared with, before buffers made it
  /// signless and widened 4-bit integers to bytes: the range a
  /// quantization saturates to.
  Type declaredElementType(Value tensor) const {
    auto it = declaredElements.find(tensor);
    return it != declaredElements.end()
               ? it->second
               : cast<ShapedType>(tensor.getType()).getElementType();
  }

  /// The dense buffer the op that defines `result` writes it to: the
  /// caller's output buffer or its place in the arena. Reports an internal
  /// error (and returns null) when the plan gives it strided storage.
  Value destination(Value result);
  /// Where the op that defines `result` writes it, strided storage
  /// included; for ops whose lowering writes at any strides.
  StridedView destinationView(Value result);
  /// destinationView as a memref of the result's element type, at the
  /// plan's strides; null after an internal error.
  Value stridedDestination(Value result);
  /// Scratch memory of `type` for the op being lowered, in the arena past
  /// the plan's buffers; it is reused by the next op.
  Value temporary(MemRefType type);
  /// Scratch memory of `type` that lives to the end of the entry, one per
  /// `key`: what several ops read and the first computes (the optimizers'
  /// step coefficients). `fresh` says whether this call made it, so the
  /// caller writes it. Asked for before the op's temporaries, which start
  /// past it.
  Value entryScratch(StringRef key, MemRefType type, bool &fresh);
  /// A contiguous buffer read with another static shape; no data moves.
  Value reshape(Value buffer, MemRefType to);
  /// A typed view of `base` (the arena, the weights or the state) at
  /// `byteOffset`.
  Value view(Value base, int64_t byteOffset, Type tensorType);
  /// `view` as a strided memref.
  Value materialize(const StridedView &view, Type elementType);

  /// The state and the host pointer as the entry sees them.
  Value stateBuffer() const { return stateArg; }
  Value hostPointer() const { return host; }
  const StateLayout &stateLayout() const { return layout.state; }

  //===------------------------------------------------------------------===//
  // Control: stopping a run at its first failure
  //===------------------------------------------------------------------===//

  /// Returns `status` (i32) from the entry when it is not 0; code after
  /// this runs only when it is.
  void exitIfNonZero(Value status);
  /// Returns the status `failure` builds from the entry when `condition`
  /// (i1) holds.
  void exitIf(Value condition,
              function_ref<Value(OpBuilder &, Location)> failure);
  /// Checks that every element of `indices` lies in [lower, upper), or is
  /// `skip` when given; the first that does not is reported (reportCheck)
  /// with a status naming `op`, the tensor and the position. Constant
  /// indices are checked now: none is out of range, and no code checks
  /// them, or the compilation fails, naming the first that is (every run
  /// would).
  LogicalResult checkIndices(Operation *op, Value indices, int64_t lower,
                             int64_t upper, std::optional<int64_t> skip = {});
  /// checkIndices for one column of `indices` (its last dimension), whose
  /// columns index dimensions of different sizes (ScatterND's tuples).
  LogicalResult checkIndexColumn(Operation *op, Value indices, int64_t column,
                                 int64_t lower, int64_t upper);
  /// Reports check `check`: `first` (a 0-d i64 buffer that checkIndices
  /// computed) holds a position of `flat`, the indices, when one is out of
  /// range, else their count. By default the entry reads both buffers and
  /// stops the run there (TFM_CHECKS_MID_RUN); a target whose buffers the
  /// host cannot read overrides it.
  virtual void reportCheck(int32_t check, Value first, Value flat);

  //===------------------------------------------------------------------===//
  // Runtime kernels (KernelCalls.h)
  //===------------------------------------------------------------------===//

  /// Calls kernel `kind` (a tfm_kernel_kind_t) on `args`, multiplying in
  /// `dtype`; the run stops if it fails. With `fallback`, a session may
  /// decline the kernel (TFM_KERNEL_FLAG_FALLBACK): `fallback` builds the
  /// op's own code, which runs in its place. Values it creates are used
  /// within it only, so buffers it shares with the call are taken first.
  void callKernel(int32_t kind, ArrayRef<int64_t> params,
                  ArrayRef<double> fparams, ArrayRef<KernelArg> args,
                  ArrayRef<int64_t> strides = {}, int32_t dtype = TFM_DTYPE_F32,
                  function_ref<void()> fallback = nullptr);
  /// c = a · b on views [.., M, K], [.., K, N], [.., M, N] with at most two
  /// batch dimensions, through BATCH_MATMUL; `dtype` and `fallback` as
  /// callKernel's.
  void batchMatmul(const StridedView &a, const StridedView &bv,
                   const StridedView &c, int32_t dtype = TFM_DTYPE_F32,
                   function_ref<void()> fallback = nullptr);
  /// The operands of a strided matmul (isStridedMatmul) as BATCH_MATMUL
  /// reads them: where they lie, a transposed one with its last two
  /// dimensions swapped.
  std::pair<StridedView, StridedView> matmulOperandViews(MatmulOp op);

  //===------------------------------------------------------------------===//
  // linalg on buffers
  //===------------------------------------------------------------------===//

  using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;
  void generic(ValueRange inputs, ArrayRef<AffineMap> inputMaps, Value output,
               AffineMap outputMap, ArrayRef<utils::IteratorType> iterators,
               BodyFn body);
  /// `output = body(inputs...)` elementwise, the inputs broadcast numpy-style.
  void elementwise(ValueRange inputs, Value output, BodyFn body);
  void fill(Value output, Attribute value);
  void copy(Value from, Value to);
  /// The window of `buffer` along `axis` that starts at `at` and has the
  /// shape of `part`.
  Value axisWindow(Value buffer, int64_t axis, int64_t at,
                   RankedTensorType part);
  /// `buffer` in the narrower float type `elem`, rounded once at compile
  /// time, when it is a dense part of a constant: a view of the rounded
  /// copy, which joins the weights. Null otherwise (a parameter, an
  /// activation, a strided window).
  Value roundedConstant(Value buffer, Type elem);
  /// `buffer` in the float type `elem` a GEMM reads its operands in: the
  /// buffer itself when it holds `elem` already, a constant's copy rounded
  /// at compile time, else a dense scratch copy rounded at every run.
  Value narrowed(Value buffer, Type elem);
  /// The map that reads a buffer of shape `from` at the numpy-broadcast
  /// position of an index into shape `to`.
  AffineMap broadcastMap(ArrayRef<int64_t> from, ArrayRef<int64_t> to);
  /// A scalar constant of an integer or float `type`.
  static Value constantScalar(OpBuilder &ob, Location l, Type type,
                              double value);

  //===------------------------------------------------------------------===//
  // Target hooks
  //===------------------------------------------------------------------===//

  /// The target's name in diagnostics ("CPU").
  virtual StringRef targetName() const = 0;
  /// Whether the entry itself may read buffers (load a step count, say):
  /// false where they live in device memory, so that lowerings read them in
  /// the generated loops instead.
  virtual bool hostReadsBuffers() const { return true; }
  /// The element type the generic GEMMs (lowerGenericMatmul) multiply
  /// operands of type `elem` in; they accumulate in `elem`. By default
  /// `elem` itself.
  virtual Type gemmOperandType(Type elem) const { return elem; }
  /// Into how many interleaved runs an index check splits `n` indices,
  /// each run searched on its own before the runs' first positions are
  /// compared: 1 by default, where the check is glue code; a GPU would
  /// otherwise walk every index on one thread.
  virtual int64_t indexCheckRuns(int64_t n) const { return 1; }
  /// Copies one tensor between two layouts; by default a linalg copy.
  virtual void copyView(const StridedView &from, const StridedView &to,
                        Type elementType);

  MLIRContext *ctx;
  OpBuilder b;
  Location loc;

protected:
  /// Called once the entry block exists, before any op is lowered.
  virtual LogicalResult beginEntry() { return success(); }
  /// Called after each op is lowered; a target that reports errors of its
  /// own (already emitted) fails here.
  virtual LogicalResult endOp(Operation *) { return success(); }
  /// Reports a disagreement between the plan and a lowering; the op fails.
  void internalError(const Twine &message);
  /// The place of `tensor` in `buffers`, the arena or a view, read from the
  /// plan when its op is about to be lowered.
  LogicalResult bindPlannedViews(Operation *op);
  /// Whether `plan`'s slot for `r` lies inside the planned arena; reports
  /// it (an internal error) when not.
  bool fitsInArena(OpResult r, ArenaAttr plan);

  func::FuncOp fn;
  func::FuncOp entry;
  ModuleLayout &layout;

private:
  /// Retypes the unsigned tensors of `fn` signless, remembering which they
  /// were; `fn` is only read from then on and is erased after lowering.
  void makeSignless();
  /// checkIndices, for the elements of one column when `column` is given.
  LogicalResult checkIndexRange(Operation *op, Value indices, int64_t lower,
                                int64_t upper, std::optional<int64_t> skip,
                                std::optional<int64_t> column);

  Kind kind;
  DenseSet<Value> unsignedTensors;
  DenseMap<Value, Type> declaredElements;
  /// The index checks made so far, by what they check: the indices, the
  /// bounds, the value skipped and the column. A tensor two ops read (the
  /// labels of a loss and of its gradient) is checked once.
  std::set<std::tuple<void *, int64_t, int64_t, std::optional<int64_t>,
                      std::optional<int64_t>>>
      checkedIndices;
  Value host, arena, weightsArg, stateArg;
  Block *exitBlock = nullptr;
  SmallVector<Value> outBuffers;
  DenseMap<Value, Value> buffers;
  // Pointers handed to kernels are taken from the base buffer and a byte
  // offset, because the strided-metadata expansion folds the aligned pointer
  // of a memref.view to its source's and so would drop the offset.
  DenseMap<Value, std::pair<Value, int64_t>> places;
  // Tensors kept as views of another's storage, and their materialized
  // memrefs once a glue op asked for one.
  DenseMap<Value, StridedView> views;
  DenseMap<Value, Value> materialized;
  // The plan's arena bytes; scratch memory starts past them, the entry's
  // (entryScratch) first, then the op's.
  int64_t planBytes = 0, entryScratchUsed = 0, scratchUsed = 0,
          scratchBytes = 0;
  llvm::StringMap<Value> entryScratchByKey;
  // The rounded copies the op being lowered made (narrowed), which live in
  // its scratch memory; and whether a kernel call's fallback is being
  // lowered (callKernel), whose copies are not shared.
  DenseMap<std::pair<Value, Type>, Value> narrowCopies;
  bool inFallback = false;
  bool failedOp = false;

public:
  /// Where a buffer made by `view` or `reshape` lies: its base (the arena,
  /// the weights or the state) and a byte offset; {null, 0} for others.
  std::pair<Value, int64_t> placeOf(Value buffer) const {
    return places.lookup(buffer);
  }
};

/// The rotary embedding an attention's operand is, where the attention's
/// kernel applies it while loading the operand (the target's layout rules
/// had the plan compute it inline); null otherwise.
inline RotaryOp rotatedInAttention(Value operand) {
  auto rotary = operand.getDefiningOp<RotaryOp>();
  return rotary && BufferizedEntry::isInline(rotary.getResult()) ? rotary
                                                                 : RotaryOp();
}

} // namespace mlir::tfm

#endif // TFM_CONVERSION_COMMON_BUFFERASSIGNMENT_H
