//===- ImporterImpl.h - Shared state of the ONNX converters -----*- C++ -*-===//
//
// A converter turns one ONNX node into tfm (or upstream) ops through a
// NodeContext, which gives typed access to inputs and attributes and reports
// errors at the node's location. Converters are registered per op type with
// the first opset whose semantics they implement (see Registry).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTENDS_ONNX_IMPORTERIMPL_H
#define TFM_FRONTENDS_ONNX_IMPORTERIMPL_H

#include "tfm/IR/ConstantData.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/IR/TypeInference.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>

namespace mlir::tfm::onnx_import {

/// The most elements the importer accepts in one tensor: far beyond any
/// real model, and small enough that products of sizes never overflow.
constexpr int64_t kMaxElements = int64_t(1) << 40;

/// Whether every size of `shape` is known and non-negative, with at most
/// kMaxElements elements in all.
inline bool plausibleShape(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d && n > kMaxElements / d))
      return false;
    n *= d;
  }
  return true;
}


/// Maps an ONNX TensorProto data type to an MLIR element type, or null.
Type elementTypeOf(MLIRContext *ctx, int dataType);

/// The files that hold tensors' data outside the model (ONNX external data:
/// `location`, `offset`, `length`, relative to the model's folder). Each file
/// is mapped read-only once, however many tensors it holds, so the weights
/// are copied once, from the mapping into their attributes.
class ExternalData {
public:
  explicit ExternalData(std::string folder) : folder(std::move(folder)) {}
  /// The bytes of `t`'s data; on failure returns std::nullopt and sets
  /// `error`.
  std::optional<StringRef> bytes(const onnx::TensorProto &t,
                                 std::string &error);
  /// The model's own bytes, which detached tensors refer to
  /// (detachInitializerData); they must outlive the import.
  void setModelBytes(StringRef bytes) { model = bytes; }

private:
  std::string folder;
  StringRef model;
  llvm::StringMap<std::unique_ptr<llvm::MemoryBuffer>> files;
};

/// The external data location of a tensor whose bytes were left in the
/// model's own bytes. No file can have this name (it holds a NUL).
inline constexpr llvm::StringRef kInModelLocation("\0model", 6);

/// `model` re-encoded with the raw data of its large initializers left out:
/// each refers to its bytes in `model` instead, as external data at
/// kInModelLocation. std::nullopt when there is nothing to leave out, or
/// the bytes are not a model (the parser then says why).
std::optional<std::string> detachInitializerData(StringRef model);

/// Converts an initializer or a Constant's tensor to a dense attribute. On
/// failure returns null and sets `error`. Data kept outside the model is read
/// through `external`; without one it is an error. A `transposed` matrix
/// [K, N] becomes its transpose [N, K].
DenseElementsAttr tensorToAttr(MLIRContext *ctx, const onnx::TensorProto &t,
                               std::string &error,
                               ExternalData *external = nullptr,
                               bool transposed = false);

class NodeContext {
public:
  NodeContext(OpBuilder &builder, const onnx::NodeProto &node, Location loc,
              int64_t opset, SmallVector<Value> inputs, bool trainable = false)
      : builder(builder), node(node), loc(loc), opset(opset),
        trainable(trainable), inputs(std::move(inputs)) {}

  OpBuilder &builder;
  const onnx::NodeProto &node;
  Location loc;
  int64_t opset;
  /// Whether the graph is imported for training (ImportOptions::trainable).
  bool trainable;
  /// Where tensors kept outside the model are read from.
  ExternalData *externalData = nullptr;
  /// The weights the importer made [N, K] for the MatMuls that read them.
  const llvm::DenseSet<Value> *transposedWeights = nullptr;
  bool isTransposedWeight(Value v) const {
    return transposedWeights && transposedWeights->contains(v);
  }

  /// Input `i`, or null when it is absent (empty name or past the end).
  Value input(unsigned i) const {
    return i < inputs.size() ? inputs[i] : Value();
  }
  unsigned numInputs() const { return inputs.size(); }
  RankedTensorType inputType(unsigned i) const {
    return cast<RankedTensorType>(input(i).getType());
  }
  /// Whether output `i` is consumed (ONNX names unused outputs "").
  bool hasOutput(unsigned i) const {
    return i < static_cast<unsigned>(node.output_size()) &&
           !node.output(i).empty();
  }

  /// Reports an error at the node and returns failure.
  LogicalResult fail(const Twine &message) const;

  const onnx::AttributeProto *attr(StringRef name) const;
  int64_t intAttr(StringRef name, int64_t dflt) const;
  float floatAttr(StringRef name, float dflt) const;
  std::string stringAttr(StringRef name, StringRef dflt) const;
  std::optional<SmallVector<int64_t>> intsAttr(StringRef name) const;

  /// The values of input `i` when it is a constant integer tensor.
  FailureOr<SmallVector<int64_t>> constantInts(unsigned i,
                                               StringRef what) const;
  /// The dense value of input `i` when it is a constant, else null.
  DenseElementsAttr constantAttr(unsigned i) const;

  /// An arith.constant holding `values` with the given type.
  Value constant(DenseElementsAttr values) const;
  /// A rank-0 constant of `elementType`.
  Value scalar(Type elementType, double value) const;

  template <typename OpTy, typename... Args> Value create(Args &&...args) {
    return builder.create<OpTy>(loc, std::forward<Args>(args)...)
        ->getResult(0);
  }
  /// Reshapes `v` to `shape` (nothing when it already has it); fails when
  /// the element counts differ.
  FailureOr<Value> reshape(Value v, ArrayRef<int64_t> shape) const;

  // Builders that check the shape rule first, so bad shapes in a model become
  // a diagnostic at the node instead of a failed assertion in a builder.
  template <typename OpTy> FailureOr<Value> binary(Value lhs, Value rhs) const {
    auto t = inferBroadcastType(diag(OpTy::getOperationName()),
                                lhs.getType(), rhs.getType());
    if (failed(t))
      return failure();
    return Value(builder.create<OpTy>(loc, *t, lhs, rhs));
  }
  FailureOr<Value> compare(ComparePredicate p, Value lhs, Value rhs) const;
  FailureOr<Value> select(Value cond, Value t, Value f) const;
  FailureOr<Value> matmul(Value a, Value b, bool ta, bool tb) const;
  FailureOr<Value> linear(Value x, Value w, Value bias) const;
  FailureOr<Value> transpose(Value x, ArrayRef<int64_t> perm) const;
  FailureOr<Value> concat(ValueRange xs, int64_t axis) const;
  FailureOr<SmallVector<Value>> split(Value x, int64_t axis,
                                      ArrayRef<int64_t> sizes) const;
  FailureOr<Value> slice(Value x, ArrayRef<int64_t> starts,
                         ArrayRef<int64_t> sizes,
                         ArrayRef<int64_t> steps) const;
  FailureOr<Value> gather(Value x, Value indices, int64_t axis) const;
  FailureOr<Value> reduce(ReduceKind kind, Value x, ArrayRef<int64_t> axes,
                          bool keepdims) const;
  FailureOr<Value> layerNorm(Value x, Value scale, Value bias, int64_t axis,
                             double epsilon) const;
  FailureOr<Value> softmax(Value x, int64_t axis) const;
  FailureOr<Value> castTo(Value x, Type elementType) const;
  FailureOr<Value> broadcast(Value x, ArrayRef<int64_t> shape) const;
  /// A tensor shaped like `x` but `size` long on `axis`, filled with the
  /// rank-0 or one-element `value` (pads, shifted-in zeros).
  FailureOr<Value> fillAlong(Value x, int64_t axis, int64_t size,
                             Value value) const;
  /// `x` with `before` and `after` (non-negative) elements of `value` added
  /// along `axis` (constant padding).
  FailureOr<Value> padAlong(Value x, int64_t axis, int64_t before,
                            int64_t after, Value value) const;
  /// A math-dialect unary op; fails unless `x` is a float tensor.
  template <typename OpTy> FailureOr<Value> floatUnary(Value x) const {
    if (failed(requireFloat(x)))
      return failure();
    return Value(builder.create<OpTy>(loc, x));
  }
  LogicalResult requireFloat(Value x) const;

  ShapeDiag diag(StringRef opName) const { return {loc, opName}; }

  /// What the converter produced, one per ONNX output, in order.
  SmallVector<Value> results;

  /// Appends a checked builder's result, or propagates its failure.
  LogicalResult push(FailureOr<Value> v) {
    if (failed(v))
      return failure();
    results.push_back(*v);
    return success();
  }

private:
  SmallVector<Value> inputs;
};

/// Unwraps a checked builder's result into `out`; false on failure (already
/// reported). Lets a converter chain several builders in one condition.
template <typename T> bool take(FailureOr<T> result, T &out) {
  if (failed(result))
    return false;
  out = std::move(*result);
  return true;
}

using Converter = std::function<LogicalResult(NodeContext &)>;

/// The opset domain of ONNX Runtime's contributed ops (MatMulNBits, ...).
inline constexpr llvm::StringLiteral kMicrosoftDomain("com.microsoft");

/// Whether `domain` names the default ONNX opset ("" or "ai.onnx").
inline bool isDefaultDomain(StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// Converters by op type and domain, each with the version range of its
/// domain it covers.
class Registry {
public:
  /// Registers `fn` for `opType` of `domain` (the default one when empty)
  /// from `sinceVersion` on (until a later registration for the same op
  /// type takes over).
  void onOp(StringRef opType, int64_t sinceVersion, Converter fn,
            StringRef domain = "");
  /// The converter for `opType` of `domain` at `version`, or null.
  const Converter *lookup(StringRef opType, int64_t version,
                          StringRef domain = "") const;
  /// Whether any converter is registered for `domain`.
  bool knowsDomain(StringRef domain) const;
  /// Every op type with a converter; those of another domain than the
  /// default one as "domain.OpType".
  std::vector<std::string> opTypes() const;

private:
  static std::string key(StringRef opType, StringRef domain);
  llvm::StringMap<std::vector<std::pair<int64_t, Converter>>> table;
  llvm::StringSet<> domains;
};

/// The name of an ONNX TensorProto data type, the 8- and 4-bit types that
/// the ONNX library here predates included.
std::string dataTypeName(int64_t dataType);

// Quantization (Converters/Quantization.cpp), shared with the quantized
// convolutions.
/// Scale or zero point input `i` (named `name`) as the quantization ops
/// read it: one element as rank 0.
FailureOr<Value> quantizationParameter(NodeContext &n, unsigned i,
                                       StringRef name);
/// Fails, naming the node and the element, when input `i` is a constant
/// scale with an element that is not positive and finite (with
/// `allowNegative`, that is 0 or not finite: the symmetric 4-bit
/// quantizers write negative scales).
LogicalResult checkScale(NodeContext &n, unsigned i, StringRef name,
                         bool allowNegative = false);
/// tfm.dequantize and tfm.quantize, their shape rules checked.
FailureOr<Value> dequantize(NodeContext &n, Value x, Value scale, Value zp,
                            int64_t axis, int64_t blockSize);
FailureOr<Value> quantize(NodeContext &n, Value x, Value scale, Value zp,
                          Type resultElement, int64_t axis, int64_t blockSize);
/// tfm.matmul_integer with numpy's 1-D operands and a per-row left zero
/// point [M].
FailureOr<Value> matmulInteger(NodeContext &n, Value a, Value b, Value aZp,
                               Value bZp);
/// saturate(round(acc · factor) + zp): an integer accumulator brought to
/// the quantized type of the rank-0 `zp`, rounded once.
FailureOr<Value> requantize(NodeContext &n, Value acc, Value factor, Value zp);

void populateConvolutionConverters(Registry &registry);
void populateElementwiseConverters(Registry &registry);
void populateMatMulGemmConverters(Registry &registry);
void populateNormalizationConverters(Registry &registry);
void populateQuantizationConverters(Registry &registry);
void populateShapeConverters(Registry &registry);

} // namespace mlir::tfm::onnx_import

#endif // TFM_FRONTENDS_ONNX_IMPORTERIMPL_H
