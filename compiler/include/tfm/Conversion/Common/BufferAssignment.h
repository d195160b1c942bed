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
// Every tensor gets its buffer from the plan: a view of the arena at its
// offset, a view of the weights for constants, of the state for parameters,
// the caller's buffer for inputs, and the caller's output buffer for a
// returned value, so results are written where the caller wants them
// without a copy. This is the bufferization step of the backends; it is done
// here rather than by the generic one-shot bufferization because the plan
// has already decided every buffer, and tfm ops are all value semantics on
// static shapes.
//
// How each op is lowered is not decided here: an OpLoweringSet (OpLowering.h)
// maps op names to lowerings, which the backend-neutral TfmToLinalg files
// and each target's files populate.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_COMMON_BUFFERASSIGNMENT_H
#define TFM_CONVERSION_COMMON_BUFFERASSIGNMENT_H

#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace mlir::tfm {

class OpLoweringSet;

/// The product of `dims` (1 for none).
int64_t product(ArrayRef<int64_t> dims);

/// The memref type of a ranked tensor type, with the identity layout.
MemRefType memrefOf(Type tensorType);

/// Whether a shaped type's elements are f32.
bool isF32(Type shapedType);

/// Row-major strides of `shape`, in elements.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape);

/// A tensor read in place from another's storage: element i lies at
/// base[offset + Σ i_d · strides[d]], base being a dense buffer.
struct StridedView {
  Value base;
  int64_t offset = 0;
  SmallVector<int64_t> shape, strides;

  /// Whether the view is `base` itself read densely from its start.
  bool isDense() const {
    return offset == 0 && strides == rowMajorStrides(shape);
  }
};

/// The strides of `view` read with `shape` instead, when no copy is needed:
/// each run of new dimensions must split or merge a run of old ones that is
/// contiguous within itself.
std::optional<SmallVector<int64_t>> reshapeStrides(const StridedView &view,
                                                   ArrayRef<int64_t> shape);

/// The constants of every entry, deduplicated, laid out at the ABI's
/// buffer alignment.
struct WeightsLayout {
  DenseMap<Attribute, int64_t> offsetOf;
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
  llvm::StringMap<int64_t> parameter, adamM, adamV;
  llvm::StringMap<RankedTensorType> typeOf;
  int64_t step = -1;
  int64_t bytes = 0;

  int64_t add(StringRef name, int32_t kind, RankedTensorType type,
              int64_t init);
};

/// Lays out the weights (every constant and every parameter's initial
/// value) and the session state of `entries`. Reports and fails on a
/// parameter with two types or an update of no parameter.
LogicalResult layOutModule(ArrayRef<func::FuncOp> entries,
                           WeightsLayout &weights, StateLayout &state);

/// Records the layouts on `module` for the artifact emitter.
void recordModuleLayout(ModuleOp module, const WeightsLayout &weights,
                        const StateLayout &state);

/// The public functions with bodies: the entries a backend compiles.
SmallVector<func::FuncOp> entryFunctions(ModuleOp module);

/// Builds the entry function of one planned tfm function. Targets derive
/// from it to add their own state (kernel tables, launch configurations)
/// and override the hooks below.
class BufferizedEntry {
public:
  /// LLVM-style RTTI, so a target's lowerings can reach their entry type.
  enum class Kind { CPU };

  BufferizedEntry(Kind kind, func::FuncOp fn, WeightsLayout &weights,
                  StateLayout &state);
  virtual ~BufferizedEntry();
  Kind getKind() const { return kind; }

  /// Builds `@__tfm_entry_<name>` before `fn`, lowering every op through
  /// `lowerings`, and describes it in `entryInfo` (what the artifact's
  /// metadata table needs). Does not erase `fn`.
  LogicalResult run(const OpLoweringSet &lowerings, DictionaryAttr &entryInfo);

  //===------------------------------------------------------------------===//
  // Buffers
  //===------------------------------------------------------------------===//

  /// The buffer of `tensor`; a strided view is materialized as a strided
  /// memref (once).
  Value bufferOf(Value tensor);
  /// A dense row-major buffer of `tensor`, copying a strided view if needed
  /// (kernels read dense operands).
  Value denseOf(Value tensor);
  /// Where `tensor`'s elements lie: its view, or its buffer read densely.
  StridedView viewOf(Value tensor);
  /// Whether `tensor` is kept as a strided view of another's storage.
  bool isView(Value tensor) const { return views.count(tensor); }
  /// Makes `tensor` a view of another's storage: it gets no buffer.
  void setView(Value tensor, StridedView view) { views[tensor] = std::move(view); }
  /// Forgets that `tensor` is a view (it was copied into a buffer).
  void dropView(Value tensor) { views.erase(tensor); }
  /// Records that `tensor` lives in `buffer`.
  void setBuffer(Value tensor, Value buffer) { buffers[tensor] = buffer; }

  /// Where the op that defines `result` writes it: the caller's output
  /// buffer for a returned value, else its planned place in the arena.
  Value destination(Value result);
  /// The caller's output buffer that `result` is written to, or null.
  Value outputBufferOf(Value result) const { return outputOf.lookup(result); }
  /// Scratch memory of `type` for the op being lowered.
  Value temporary(MemRefType type);
  /// A contiguous buffer read with another static shape; no data moves.
  Value reshape(Value buffer, MemRefType to);
  /// A typed view of `base` (the arena, the weights or the state) at
  /// `byteOffset`.
  Value view(Value base, int64_t byteOffset, Type tensorType);
  /// `view` as a strided memref.
  Value materialize(const StridedView &view, Type elementType);
  /// Where a buffer made by `view` or `reshape` lies: its base (the arena,
  /// the weights or the state) and a byte offset; {null, 0} for others.
  std::pair<Value, int64_t> placeOf(Value buffer) const {
    return places.lookup(buffer);
  }
  /// The arena offset the plan gave result `index` of `op`, or -1.
  static int64_t plannedOffset(Operation *op, unsigned index);

  /// The arena, the weights and the state as the entry sees them.
  Value arenaBuffer() const { return arena; }
  Value stateBuffer() const { return stateArg; }
  Value hostPointer() const { return host; }
  const StateLayout &stateLayout() const { return state; }

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
  /// The value the entry returns on success.
  virtual Value returnCode();

  func::FuncOp fn;
  func::FuncOp entry;
  WeightsLayout &weights;
  StateLayout &state;

private:
  Kind kind;
  Value host, arena, weightsArg, stateArg;
  DenseMap<Value, Value> buffers;
  // Returned values that are written straight into an output buffer.
  DenseMap<Value, Value> outputOf;
  SmallVector<Value> temporaries;
  // Pointers handed to kernels are taken from the base buffer and a byte
  // offset, because the strided-metadata expansion folds the aligned pointer
  // of a memref.view to its source's and so would drop the offset.
  DenseMap<Value, std::pair<Value, int64_t>> places;
  // Tensors kept as views of another's storage, and their materialized
  // memrefs once a glue op asked for one.
  DenseMap<Value, StridedView> views;
  DenseMap<Value, Value> materialized;
};

} // namespace mlir::tfm

#endif // TFM_CONVERSION_COMMON_BUFFERASSIGNMENT_H
