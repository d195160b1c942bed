//===- Importer.cpp - ONNX models into the tfm dialect --------------------===//
//
// The importer first checks the whole graph (opset, domains, supported ops,
// defined inputs) so that a model with several problems reports all of them
// at once; then it converts node by node, folding constant subgraphs with the
// reference interpreter as it goes.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontends/ONNX/Importer.h"
#include "ImporterImpl.h"
#include "tfm/Frontends/ONNX/Schema.h"

#include "tfm/Reference/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/io/coded_stream.h>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

//===----------------------------------------------------------------------===//
// Registry and NodeContext
//===----------------------------------------------------------------------===//

std::string Registry::key(StringRef opType, StringRef domain) {
  return isDefaultDomain(domain) ? opType.str()
                                 : (domain + "." + opType).str();
}

void Registry::onOp(StringRef opType, int64_t sinceVersion, Converter fn,
                    StringRef domain) {
  auto &versions = table[key(opType, domain)];
  versions.emplace_back(sinceVersion, std::move(fn));
  llvm::sort(versions, [](const auto &a, const auto &b) {
    return a.first < b.first;
  });
  if (!isDefaultDomain(domain))
    domains.insert(domain);
}

const Converter *Registry::lookup(StringRef opType, int64_t version,
                                  StringRef domain) const {
  auto it = table.find(key(opType, domain));
  if (it == table.end())
    return nullptr;
  const Converter *found = nullptr;
  for (const auto &[since, fn] : it->second)
    if (since <= version)
      found = &fn;
  return found;
}

bool Registry::knowsDomain(StringRef domain) const {
  return isDefaultDomain(domain) || domains.contains(domain);
}

std::vector<std::string> Registry::opTypes() const {
  std::vector<std::string> names;
  for (const auto &entry : table)
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}

LogicalResult NodeContext::fail(const Twine &message) const {
  return emitError(loc) << message;
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::intAttr(StringRef name, int64_t dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : dflt;
}

float NodeContext::floatAttr(StringRef name, float dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeContext::stringAttr(StringRef name, StringRef dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::optional<SmallVector<int64_t>>
NodeContext::intsAttr(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

DenseElementsAttr NodeContext::constantAttr(unsigned i) const {
  Value v = input(i);
  if (!v)
    return {};
  auto c = v.getDefiningOp<arith::ConstantOp>();
  return c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
}

FailureOr<SmallVector<int64_t>>
NodeContext::constantInts(unsigned i, StringRef what) const {
  DenseElementsAttr attr = constantAttr(i);
  if (!attr || !attr.getElementType().isIntOrIndex())
    return fail("input " + Twine(i) + " ('" + what + "') of " +
                node.op_type() +
                " must be a constant integer tensor, known when compiling");
  SmallVector<int64_t> out;
  for (APInt v : attr.getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

Value NodeContext::constant(DenseElementsAttr values) const {
  return builder.create<arith::ConstantOp>(loc, values);
}

Value NodeContext::scalar(Type elementType, double value) const {
  auto type = RankedTensorType::get({}, elementType);
  if (isa<FloatType>(elementType))
    return constant(DenseElementsAttr::get(
        type, builder.getFloatAttr(elementType, value).getValue()));
  // An integer saturates to its type's range, so ±infinity (a max's
  // padding) reads as the lowest or highest value of the type.
  unsigned w = elementType.getIntOrFloatBitWidth();
  bool isUnsigned = elementType.isUnsignedInteger() || w == 1;
  APInt lo = isUnsigned ? APInt::getMinValue(w) : APInt::getSignedMinValue(w);
  APInt hi = isUnsigned ? APInt::getMaxValue(w) : APInt::getSignedMaxValue(w);
  double loD = isUnsigned ? lo.roundToDouble() : lo.signedRoundToDouble();
  double hiD = isUnsigned ? hi.roundToDouble() : hi.signedRoundToDouble();
  APInt v = value <= loD   ? lo
            : value >= hiD ? hi
                           : APInt(64, static_cast<uint64_t>(
                                           static_cast<int64_t>(value)))
                                 .zextOrTrunc(w);
  if (value > 0 && value < hiD && value >= 9223372036854775808.0)
    v = APInt(64, static_cast<uint64_t>(value));
  return constant(DenseElementsAttr::get(type, v));
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Type mlir::tfm::onnx_import::elementTypeOf(MLIRContext *ctx, int dataType) {
  Builder b(ctx);
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  case onnx::TensorProto::INT8:
    return b.getI8Type();
  case onnx::TensorProto::INT16:
    return b.getI16Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case onnx::TensorProto::UINT16:
    return b.getIntegerType(16, /*isSigned=*/false);
  case onnx::TensorProto::UINT32:
    return b.getIntegerType(32, /*isSigned=*/false);
  case onnx::TensorProto::UINT64:
    return b.getIntegerType(64, /*isSigned=*/false);
  // UINT4 and INT4 (opset 21), which the ONNX library here predates.
  case 21:
    return b.getIntegerType(4, /*isSigned=*/false);
  case 22:
    return b.getIntegerType(4);
  default:
    return {};
  }
}

std::optional<StringRef>
ExternalData::bytes(const onnx::TensorProto &t, std::string &error) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &e : t.external_data()) {
    if (e.key() == "location") {
      location = e.value();
    } else if (e.key() == "offset" || e.key() == "length") {
      int64_t v;
      if (StringRef(e.value()).getAsInteger(10, v) || v < 0) {
        error = "tensor '" + t.name() + "' has the invalid external data " +
                e.key() + " '" + e.value() + "'";
        return std::nullopt;
      }
      (e.key() == "offset" ? offset : length) = v;
    }
  }
  if (location == kInModelLocation && model.data()) {
    if (offset > static_cast<int64_t>(model.size()) ||
        length < 0 || length > static_cast<int64_t>(model.size()) - offset) {
      error = "tensor '" + t.name() + "' lies outside the model's bytes";
      return std::nullopt;
    }
    return model.substr(offset, length);
  }
  if (location.empty()) {
    error = "tensor '" + t.name() +
            "' keeps its data in an external file but names none "
            "(no 'location')";
    return std::nullopt;
  }
  // As the ONNX checker requires: inside the model's folder.
  if (llvm::sys::path::is_absolute(location) ||
      llvm::is_contained(llvm::make_range(llvm::sys::path::begin(location),
                                          llvm::sys::path::end(location)),
                         "..")) {
    error = "tensor '" + t.name() + "' names the external data file '" +
            location + "', which is not inside the model's folder";
    return std::nullopt;
  }
  SmallString<256> path(folder);
  llvm::sys::path::append(path, location);
  auto &file = files[path];
  if (!file) {
    auto mapped = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
    if (!mapped) {
      error = "tensor '" + t.name() + "' keeps its data in '" +
              path.str().str() + "', which cannot be read: " +
              mapped.getError().message();
      files.erase(path);
      return std::nullopt;
    }
    file = std::move(*mapped);
  }
  int64_t size = file->getBufferSize();
  if (length < 0)
    length = size - std::min(offset, size);
  if (offset > size || length > size - offset) {
    error = "tensor '" + t.name() + "' reads bytes " + std::to_string(offset) +
            " to " + std::to_string(offset + length) + " of '" +
            path.str().str() + "', which holds " + std::to_string(size);
    return std::nullopt;
  }
  return file->getBuffer().substr(offset, length);
}

/// tensorToAttr; with `transposeRaw`, raw data of rank 2 is transposed as it
/// is copied, and *transposeRaw cleared to say so.
static DenseElementsAttr convertTensor(MLIRContext *ctx,
                                       const onnx::TensorProto &t,
                                       std::string &error,
                                       ExternalData *external,
                                       bool *transposeRaw) {
  Type elt = elementTypeOf(ctx, t.data_type());
  if (!elt) {
    error = "tensor '" + t.name() + "' has data type " +
            dataTypeName(t.data_type()) + ", which tfm does not support";
    return {};
  }
  std::optional<StringRef> externalBytes;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!external) {
      error = "tensor '" + t.name() +
              "' keeps its data in an external file, which is not "
              "supported here";
      return {};
    }
    externalBytes = external->bytes(t, error);
    if (!externalBytes)
      return {};
  }
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d && n > kMaxElements / d)) {
      error = "tensor '" + t.name() + "' has an invalid or implausible shape";
      return {};
    }
    n *= d;
  }
  auto type = RankedTensorType::get(shape, elt);
  auto mismatch = [&](int64_t got) {
    error = "tensor '" + t.name() + "' needs " + std::to_string(n) +
            " values but holds " + std::to_string(got);
    return DenseElementsAttr();
  };
  unsigned bits = elt.getIntOrFloatBitWidth();
  if (bits == 4) {
    // Two elements a byte, the first in the low nibble, in raw data or one
    // byte per int32_data entry; an odd count leaves the last high nibble
    // unused.
    int64_t bytes = (n + 1) / 2;
    SmallVector<uint8_t> packed;
    if (t.has_raw_data() || externalBytes) {
      StringRef raw = externalBytes ? *externalBytes : StringRef(t.raw_data());
      packed.assign(raw.bytes_begin(), raw.bytes_end());
    } else {
      for (int32_t v : t.int32_data())
        packed.push_back(static_cast<uint8_t>(v));
    }
    if (static_cast<int64_t>(packed.size()) != bytes) {
      error = "tensor '" + t.name() + "' of " + std::to_string(n) +
              " 4-bit values needs " + std::to_string(bytes) +
              " bytes (two a byte) but holds " + std::to_string(packed.size());
      return {};
    }
    SmallVector<APInt> values;
    values.reserve(n);
    for (int64_t i = 0; i < n; ++i)
      values.push_back(APInt(4, (packed[i / 2] >> (4 * (i % 2))) & 0xF));
    return DenseElementsAttr::get(type, values);
  }
  if (t.has_raw_data() || externalBytes) {
    StringRef raw = externalBytes ? *externalBytes : StringRef(t.raw_data());
    if (elt.isInteger(1)) {
      if (static_cast<int64_t>(raw.size()) != n)
        return mismatch(raw.size());
      SmallVector<bool> values(raw.begin(), raw.end());
      return DenseElementsAttr::get(type, values);
    }
    if (static_cast<int64_t>(raw.size()) != n * bits / 8)
      return mismatch(raw.size() / (bits / 8));
    // ONNX stores raw data little-endian, as the host does. A transposed
    // weight is built straight from the bytes: one copy, not two.
    if (transposeRaw && type.getRank() == 2 && bits % 8 == 0) {
      *transposeRaw = false;
      return transpose2D(type, ArrayRef<char>(raw.data(), raw.size()));
    }
    return DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(raw.data(), raw.size()));
  }
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    if (t.float_data_size() != n)
      return mismatch(t.float_data_size());
    return DenseElementsAttr::get(
        type, ArrayRef<float>(t.float_data().data(), t.float_data_size()));
  case onnx::TensorProto::DOUBLE:
    if (t.double_data_size() != n)
      return mismatch(t.double_data_size());
    return DenseElementsAttr::get(
        type, ArrayRef<double>(t.double_data().data(), t.double_data_size()));
  case onnx::TensorProto::INT64:
    if (t.int64_data_size() != n)
      return mismatch(t.int64_data_size());
    return DenseElementsAttr::get(
        type, ArrayRef<int64_t>(t.int64_data().data(), t.int64_data_size()));
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64: {
    if (t.uint64_data_size() != n)
      return mismatch(t.uint64_data_size());
    SmallVector<APInt> values;
    for (uint64_t v : t.uint64_data())
      values.push_back(APInt(64, v).zextOrTrunc(bits));
    return DenseElementsAttr::get(type, values);
  }
  default:
    break;
  }
  if (t.int32_data_size() != n)
    return mismatch(t.int32_data_size());
  if (elt.isInteger(1)) {
    SmallVector<bool> values;
    for (int32_t v : t.int32_data())
      values.push_back(v != 0);
    return DenseElementsAttr::get(type, values);
  }
  if (elt.isInteger()) {
    // 8-, 16- and 32-bit integers travel in int32_data, wrapped to width.
    SmallVector<APInt> values;
    for (int32_t v : t.int32_data())
      values.push_back(APInt(64, static_cast<uint64_t>(static_cast<int64_t>(v)))
                           .zextOrTrunc(bits));
    return DenseElementsAttr::get(type, values);
  }
  // f16 and bf16 travel as their 16-bit patterns in int32_data.
  SmallVector<uint16_t> bitsOf;
  for (int32_t v : t.int32_data())
    bitsOf.push_back(static_cast<uint16_t>(v));
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(reinterpret_cast<const char *>(bitsOf.data()),
                           bitsOf.size() * 2));
}

DenseElementsAttr mlir::tfm::onnx_import::tensorToAttr(
    MLIRContext *ctx, const onnx::TensorProto &t, std::string &error,
    ExternalData *external, bool transposed) {
  DenseElementsAttr attr = convertTensor(ctx, t, error, external,
                                         transposed ? &transposed : nullptr);
  return attr && transposed ? transpose2D(attr) : attr;
}


//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

namespace {

/// Records the ops a converter creates, so they can be folded afterwards.
struct CreatedOps : public OpBuilder::Listener {
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
  SmallVector<Operation *> ops;
};

const Registry &registry() {
  static const Registry r = [] {
    Registry reg;
    populateConvolutionConverters(reg);
    populateElementwiseConverters(reg);
    populateMatMulGemmConverters(reg);
    populateNormalizationConverters(reg);
    populateQuantizationConverters(reg);
    populateShapeConverters(reg);
    return reg;
  }();
  return r;
}

/// Operands that give shapes, axes or sizes: a static compiler needs their
/// values, so graph inputs in these positions must be bound to constants.
bool isShapeOperand(StringRef opType, int operand) {
  static const llvm::StringMap<SmallVector<int>> table = {
      {"Reshape", {1}},   {"Slice", {1, 2, 3, 4}}, {"Squeeze", {1}},
      {"Unsqueeze", {1}}, {"Expand", {1}},         {"Split", {1}},
      {"ReduceSum", {1}}, {"ReduceMean", {1}},     {"ReduceMax", {1}},
      {"ReduceMin", {1}}, {"ConstantOfShape", {0}}, {"Trilu", {1}},
      {"Range", {0, 1, 2}}, {"Dropout", {1, 2}},   {"Pad", {1, 3}},
      {"Tile", {1}},        {"CumSum", {1}},       {"TopK", {1}}};
  auto it = table.find(opType);
  return it != table.end() && llvm::is_contained(it->second, operand);
}



/// The initializers that only MatMuls read, as their second operand, and
/// that are float matrices: imported as [N, K] (the layout tfm.linear
/// wants) for MatMuls with transpose_rhs, so that the fusions need no
/// second, transposed copy of every weight. A name a subgraph, another op,
/// or the graph's interface uses is left as it is.
static llvm::StringSet<> transposedWeightNames(const onnx::GraphProto &graph) {
  llvm::StringSet<> candidates, excluded;
  for (const auto &init : graph.initializer()) {
    int type = init.data_type();
    if (init.dims_size() == 2 &&
        (type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::FLOAT16 ||
         type == onnx::TensorProto::BFLOAT16 ||
         type == onnx::TensorProto::DOUBLE))
      candidates.insert(init.name());
  }
  for (const auto &v : graph.input())
    excluded.insert(v.name());
  for (const auto &v : graph.output())
    excluded.insert(v.name());
  // Inside a subgraph every read counts, since the importer converts
  // subgraphs with their own values.
  std::function<void(const onnx::GraphProto &, bool)> visit =
      [&](const onnx::GraphProto &g, bool outermost) {
        for (const auto &node : g.node()) {
          bool matmul = outermost && node.op_type() == "MatMul" &&
                        isDefaultDomain(node.domain());
          for (auto [i, in] : llvm::enumerate(node.input()))
            if (!matmul || i != 1)
              excluded.insert(in);
          for (const auto &a : node.attribute()) {
            if (a.has_g())
              visit(a.g(), false);
            for (const auto &sub : a.graphs())
              visit(sub, false);
          }
        }
      };
  visit(graph, true);
  llvm::StringSet<> names;
  for (const auto &c : candidates)
    if (!excluded.contains(c.getKey()))
      names.insert(c.getKey());
  return names;
}

} // namespace

struct mlir::tfm::onnx_import::ImportCache {
  MLIRContext *context = nullptr;
  std::string path;
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  /// The parsed model, where it needed no upgrade (an upgrade binds the
  /// sizes first, so it differs per import).
  std::unique_ptr<onnx::ModelProto> model;
  /// Initializers by name: as they are, and transposed for a MatMul.
  llvm::StringMap<DenseElementsAttr> initializers[2];
  /// Constant 2-D transposes folded, by their operand.
  DenseMap<Attribute, DenseElementsAttr> transposes;
};

std::shared_ptr<ImportCache> mlir::tfm::onnx_import::makeImportCache() {
  return std::make_shared<ImportCache>();
}

namespace {

class Importer {
public:
  Importer(MLIRContext *ctx, StringRef fileName, const ImportOptions &options)
      : ctx(ctx), fileName(fileName.str()), options(options),
        fileLoc(FileLineColLoc::get(ctx, fileName, 0, 0)),
        external(options.externalDataFolder.empty()
                     ? llvm::sys::path::parent_path(fileName).str()
                     : options.externalDataFolder) {}

  OwningOpRef<ModuleOp> run(const onnx::ModelProto &model);
  void setModelBytes(StringRef bytes) { external.setModelBytes(bytes); }

private:
  Location nodeLoc(const onnx::NodeProto &node, int index) const;
  LogicalResult checkGraph(const onnx::GraphProto &graph);
  /// Gives every graph input in `inputsToResolve` a static type, from the
  /// model, --shape (by input or by dimension symbol) and the test data,
  /// into `resolvedShapes`. Reports every unresolved dimension at once.
  /// `positions` holds each graph input's position among the inputs.
  LogicalResult resolveInputShapes(const onnx::GraphProto &graph,
                                   ArrayRef<unsigned> positions);
  LogicalResult convert(OpBuilder &b, const onnx::NodeProto &node, int index);
  /// Replaces ops whose operands are all constants by the constants the
  /// interpreter computes; returns the replaced values and the dead ops,
  /// which the caller erases once it has re-pointed its own references.
  void foldConstants(ArrayRef<Operation *> ops, DenseMap<Value, Value> &map,
                     SmallVectorImpl<Operation *> &dead);
  /// The cache shared with imports at other sizes, where one is given for
  /// this context.
  ImportCache *cache() const {
    return options.cache && options.cache->context == ctx ? options.cache.get()
                                                          : nullptr;
  }

  MLIRContext *ctx;
  std::string fileName;
  const ImportOptions &options;
  Location fileLoc;
  int64_t opset = 0;
  /// The versions the model imports of the other domains.
  llvm::StringMap<int64_t> domainVersions;
  /// The version of `domain` a node converts at: the default opset, or
  /// what the model imports of its domain (1, the only version of
  /// com.microsoft, when it imports none).
  int64_t versionOf(StringRef domain) const {
    if (isDefaultDomain(domain))
      return opset;
    return domainVersions.lookup(domain) ? domainVersions.lookup(domain) : 1;
  }
  llvm::StringMap<Value> values;
  ExternalData external;
  /// The weights imported as [N, K] for the MatMuls that read them
  /// (transposedWeightNames).
  llvm::DenseSet<Value> transposedWeights;
  llvm::StringSet<> inputsToResolve;
  llvm::StringMap<RankedTensorType> resolvedShapes;
};

Location Importer::nodeLoc(const onnx::NodeProto &node, int index) const {
  std::string name = node.name().empty()
                         ? node.op_type() + "_" + std::to_string(index)
                         : node.name();
  return NameLoc::get(StringAttr::get(ctx, name),
                      NameLoc::get(StringAttr::get(ctx, node.op_type())));
}

LogicalResult Importer::checkGraph(const onnx::GraphProto &graph) {
  llvm::StringSet<> defined;
  for (const auto &init : graph.initializer())
    defined.insert(init.name());
  for (const auto &in : graph.input())
    defined.insert(in.name());
  SmallVector<std::pair<Location, std::string>> problems;
  for (auto [index, node] : llvm::enumerate(graph.node())) {
    Location loc = nodeLoc(node, index);
    if (!registry().knowsDomain(node.domain())) {
      problems.emplace_back(loc, "op type '" + node.op_type() +
                                     "' is in the unknown opset domain '" +
                                     node.domain() + "'");
      for (const std::string &out : node.output())
        defined.insert(out);
      continue;
    }
    int64_t version = versionOf(node.domain());
    if (!registry().lookup(node.op_type(), version, node.domain())) {
      problems.emplace_back(
          loc, "op type '" + node.op_type() + "' (" +
                   (isDefaultDomain(node.domain())
                        ? "opset " + std::to_string(version)
                        : "domain '" + node.domain() + "' version " +
                              std::to_string(version)) +
                   ") is not supported");
    } else {
      for (std::string &b : onnx_io::schemaProblems(node, version))
        problems.emplace_back(loc, std::move(b));
    }
    for (const std::string &in : node.input())
      if (!in.empty() && !defined.contains(in))
        problems.emplace_back(
            loc, "reads '" + in +
                     "', which no initializer, graph input or earlier node "
                     "defines");
    for (const std::string &out : node.output())
      defined.insert(out);
  }
  for (const auto &out : graph.output())
    if (!defined.contains(out.name()))
      problems.emplace_back(fileLoc, "graph output '" + out.name() +
                                         "' is not computed by any node");
  if (problems.empty())
    return success();
  InFlightDiagnostic diag = emitError(fileLoc)
                            << "the model cannot be imported: "
                            << problems.size() << " problem"
                            << (problems.size() == 1 ? "" : "s")
                            << ", listed below";
  for (auto &[loc, message] : problems)
    diag.attachNote(loc) << message;
  return failure();
}

LogicalResult Importer::resolveInputShapes(const onnx::GraphProto &graph,
                                           ArrayRef<unsigned> positions) {
  // Names --shape gives that are not inputs bind dimension symbols.
  llvm::StringSet<> inputNames;
  // In order of appearance, so messages list them the same way every time.
  llvm::SetVector<StringRef> symbols;
  for (const auto &in : graph.input()) {
    inputNames.insert(in.name());
    if (in.type().has_tensor_type())
      for (const auto &d : in.type().tensor_type().shape().dim())
        if (d.has_dim_param() && !d.has_dim_value())
          symbols.insert(d.dim_param());
  }
  llvm::StringMap<int64_t> symbolSizes;
  llvm::StringMap<std::string> symbolSource;
  for (const auto &[name, shape] : options.inputShapes) {
    if (inputNames.contains(name))
      continue;
    if (!symbols.contains(name) || shape.size() != 1) {
      std::string known = llvm::join(symbols, ", ");
      emitError(fileLoc) << "--shape names '" << name
                         << "', which is neither an input of the model nor "
                            "one of its dimension symbols"
                         << (known.empty() ? std::string(" (it has none)")
                                           : " (" + known + ")");
      return failure();
    }
    symbolSizes[name] = shape[0];
    symbolSource[name] = ("--shape " + name + "=" + Twine(shape[0])).str();
  }

  SmallVector<std::string> unresolved;
  bool failedInput = false;
  for (auto [index, info] : llvm::enumerate(graph.input())) {
    if (!inputsToResolve.contains(info.name()))
      continue;
    if (!info.type().has_tensor_type()) {
      emitError(fileLoc) << "graph input '" << info.name()
                         << "' is not a tensor";
      return failure();
    }
    const auto &tt = info.type().tensor_type();
    Type elt = elementTypeOf(ctx, tt.elem_type());
    if (!elt) {
      emitError(fileLoc)
          << "graph input '" << info.name() << "' has data type "
          << onnx::TensorProto::DataType_Name(
                 static_cast<onnx::TensorProto::DataType>(tt.elem_type()))
          << ", which tfm does not support";
      return failure();
    }
    // A whole shape: --shape NAME=..., else the test data's.
    std::optional<SmallVector<int64_t>> whole;
    std::string wholeSource;
    auto fixed = options.inputShapes.find(info.name());
    if (fixed != options.inputShapes.end()) {
      whole = fixed->second;
      wholeSource = "--shape";
    }
    int rank = tt.has_shape() ? tt.shape().dim_size() : -1;
    SmallVector<int64_t> shape;
    SmallVector<std::string> missing;
    for (int i = 0; i < rank; ++i) {
      const auto &dim = tt.shape().dim(i);
      if (dim.has_dim_value() && dim.dim_value() >= 0) {
        shape.push_back(dim.dim_value());
        continue;
      }
      std::string symbol = dim.has_dim_param() ? dim.dim_param() : "";
      auto bound = symbolSizes.find(symbol);
      shape.push_back(bound != symbolSizes.end() ? bound->second : -1);
    }
    if (!whole && rank >= 0 && llvm::is_contained(shape, -1) &&
        options.inputShapeHint) {
      if (auto hint = options.inputShapeHint(info.name(), positions[index])) {
        whole = *hint;
        wholeSource = "the test data";
      }
    }
    if (whole) {
      if (rank >= 0 && static_cast<int>(whole->size()) != rank) {
        emitError(fileLoc) << wholeSource << " gives '" << info.name()
                           << "' rank " << whole->size()
                           << " but the model gives it rank " << rank;
        failedInput = true;
        continue;
      }
      for (int i = 0; i < rank; ++i) {
        const auto &dim = tt.shape().dim(i);
        int64_t want = (*whole)[i];
        if (dim.has_dim_value() && dim.dim_value() != want) {
          emitError(fileLoc) << wholeSource << " gives dimension " << i
                             << " of '" << info.name() << "' size " << want
                             << " but the model fixes it to "
                             << dim.dim_value();
          failedInput = true;
        } else if (dim.has_dim_param() && shape[i] >= 0 && shape[i] != want) {
          emitError(fileLoc)
              << wholeSource << " gives dimension " << i << " of '"
              << info.name() << "' ('" << dim.dim_param() << "') size "
              << want << ", but " << symbolSource[dim.dim_param()]
              << " gives " << shape[i];
          failedInput = true;
        } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
          // The symbol now has a size; other inputs must agree with it.
          auto [it, inserted] = symbolSizes.try_emplace(dim.dim_param(), want);
          if (inserted)
            symbolSource[dim.dim_param()] = wholeSource;
          else if (it->second != want) {
            emitError(fileLoc)
                << wholeSource << " gives '" << dim.dim_param() << "' size "
                << want << ", but " << symbolSource[dim.dim_param()]
                << " gives " << it->second;
            failedInput = true;
          }
        }
      }
      if (!plausibleShape(*whole)) {
        emitError(fileLoc) << "input '" << info.name()
                           << "' has an implausible shape (more than 2^40 "
                              "elements)";
        failedInput = true;
        continue;
      }
      resolvedShapes[info.name()] = RankedTensorType::get(*whole, elt);
      continue;
    }
    if (rank < 0) {
      unresolved.push_back("'" + info.name() + "' has no shape");
      continue;
    }
    for (int i = 0; i < rank && options.dimensionDefault; ++i) {
      if (shape[i] >= 0)
        continue;
      const auto &dim = tt.shape().dim(i);
      std::string symbol = dim.has_dim_param() ? dim.dim_param() : "";
      std::optional<int64_t> size =
          options.dimensionDefault(info.name(), positions[index], i, symbol);
      if (!size)
        continue;
      shape[i] = *size;
      // Later inputs that share the symbol take the same size.
      if (!symbol.empty() && symbolSizes.try_emplace(symbol, *size).second)
        symbolSource[symbol] = "the generation's default";
    }
    for (int i = 0; i < rank; ++i)
      if (shape[i] < 0) {
        const auto &dim = tt.shape().dim(i);
        missing.push_back(
            "dimension " + std::to_string(i) + " (" +
            (dim.has_dim_param() ? "'" + dim.dim_param() + "'" : "unnamed") +
            ")");
      }
    if (!missing.empty()) {
      unresolved.push_back("'" + info.name() + "' " +
                           llvm::join(missing, ", "));
      continue;
    }
    if (!plausibleShape(shape)) {
      emitError(fileLoc) << "input '" << info.name()
                         << "' has an implausible shape (more than 2^40 "
                            "elements)";
      failedInput = true;
      continue;
    }
    resolvedShapes[info.name()] = RankedTensorType::get(shape, elt);
  }
  if (failedInput)
    return failure();
  // Sizes of 0 are legal (an empty past: --shape past=0; ONNX's own tests
  // of empty tensors), but a --shape of 0 that leaves every input empty
  // leaves nothing to compute, and fails later in some reshape that names
  // neither the flag nor the size.
  SmallVector<std::string> zeros;
  for (const auto &[symbol, size] : symbolSizes)
    if (size == 0 && StringRef(symbolSource[symbol]).starts_with("--shape "))
      zeros.push_back(symbol.str() + "=0");
  if (unresolved.empty() && !zeros.empty() &&
      llvm::all_of(resolvedShapes, [](const auto &entry) {
        return entry.second.getNumElements() == 0;
      })) {
    llvm::sort(zeros);
    emitError(fileLoc) << "every input of the model is empty (--shape "
                       << llvm::join(zeros, ", ")
                       << "): there is nothing to compile; give sizes of at "
                          "least 1";
    return failure();
  }
  if (unresolved.empty())
    return success();
  SmallVector<std::string> hints;
  for (StringRef sym : symbols)
    if (!symbolSizes.count(sym))
      hints.push_back(("--shape " + sym + "=N").str());
  emitError(fileLoc) << "the model has dynamic dimensions that no --shape "
                        "fixes: "
                     << llvm::join(unresolved, "; ") << "; fix them by symbol ("
                     << (hints.empty() ? std::string("--shape SYMBOL=N")
                                       : llvm::join(hints, " "))
                     << ") or by input (--shape NAME=DxDx...)";
  return failure();
}

void Importer::foldConstants(ArrayRef<Operation *> ops,
                             DenseMap<Value, Value> &map,
                             SmallVectorImpl<Operation *> &dead) {
  // Fold only what stays small, so a folded transpose of a weight is fine but
  // nothing can balloon the module.
  constexpr int64_t kMaxFoldedElements = int64_t(1) << 24;
  for (Operation *op : ops) {
    // A quantized weight stays quantized: its dequantization is what the
    // quantized-linear fusion takes into the GEMM's loads.
    if (isa<arith::ConstantOp, DequantizeOp>(op) || op->getNumResults() == 0 ||
        op->getBlock() == nullptr)
      continue;
    auto constantOf = [](Value v) {
      auto c = v.getDefiningOp<arith::ConstantOp>();
      return c ? dyn_cast<DenseElementsAttr>(c.getValue())
               : DenseElementsAttr();
    };
    // A transposed weight (a tied head's wteᵀ) moves bytes: through the
    // interpreter's doubles it cost seconds and gigabytes on GPT-2.
    if (auto t = dyn_cast<TransposeOp>(op)) {
      DenseElementsAttr attr = constantOf(t.getInput());
      auto type =
          attr ? cast<RankedTensorType>(attr.getType()) : RankedTensorType();
      if (attr && type.getRank() == 2 &&
          t.getPermutation() == ArrayRef<int64_t>{1, 0} &&
          type.getElementTypeBitWidth() % 8 == 0) {
        DenseElementsAttr result;
        if (ImportCache *c = cache())
          result = c->transposes.lookup(attr);
        if (!result)
          result = transpose2D(attr);
        if (ImportCache *c = cache())
          c->transposes[attr] = result;
        OpBuilder b(op);
        Value folded = b.create<arith::ConstantOp>(op->getLoc(), result);
        op->getResult(0).replaceAllUsesWith(folded);
        map[op->getResult(0)] = folded;
        dead.push_back(op);
        continue;
      }
    }
    // Whether it folds at all before any operand is converted: a gather
    // from an embedding table by the ids must not copy the table first.
    if (op->getNumOperands() == 0 ||
        !llvm::all_of(op->getOperands(),
                      [&](Value v) { return constantOf(v); }))
      continue;
    int64_t total = 0;
    for (Type t : op->getResultTypes())
      total += cast<RankedTensorType>(t).getNumElements();
    if (total > kMaxFoldedElements)
      continue;
    // The op's own folder first: a slice or a gather of a constant reads
    // only the elements it keeps, where the interpreter would convert the
    // whole operand to doubles.
    SmallVector<Attribute> operandAttrs;
    for (Value v : op->getOperands())
      operandAttrs.push_back(constantOf(v));
    SmallVector<OpFoldResult> byFolder;
    if (succeeded(op->fold(operandAttrs, byFolder)) &&
        byFolder.size() == op->getNumResults() &&
        llvm::all_of(byFolder, [](OpFoldResult r) {
          return isa_and_nonnull<DenseElementsAttr>(dyn_cast<Attribute>(r));
        })) {
      OpBuilder b(op);
      for (auto [r, f] : llvm::zip(op->getResults(), byFolder)) {
        Value c = b.create<arith::ConstantOp>(
            op->getLoc(), cast<DenseElementsAttr>(cast<Attribute>(f)));
        r.replaceAllUsesWith(c);
        map[r] = c;
      }
      dead.push_back(op);
      continue;
    }
    bool allConstant = true;
    std::vector<reference::Tensor> operands;
    for (Value v : op->getOperands()) {
      FailureOr<reference::Tensor> t =
          reference::Interpreter::fromAttr(constantOf(v));
      if (failed(t)) {
        allConstant = false;
        break;
      }
      operands.push_back(std::move(*t));
    }
    if (!allConstant)
      continue;
    // A failure (an out-of-range index, say) leaves the op for the user to
    // see at run time rather than failing the import.
    ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
    reference::Interpreter interpreter;
    auto results = interpreter.evaluate(op, operands);
    if (failed(results))
      continue;
    OpBuilder b(op);
    for (auto [r, t] : llvm::zip(op->getResults(), *results)) {
      auto type = cast<RankedTensorType>(r.getType());
      Value c = b.create<arith::ConstantOp>(
          op->getLoc(), reference::Interpreter::toAttr(t, type));
      r.replaceAllUsesWith(c);
      map[r] = c;
    }
    dead.push_back(op);
  }
}

LogicalResult Importer::convert(OpBuilder &b, const onnx::NodeProto &node,
                                int index) {
  Location loc = nodeLoc(node, index);
  SmallVector<Value> inputs;
  for (const std::string &name : node.input())
    inputs.push_back(name.empty() ? Value() : values.lookup(name));
  CreatedOps created;
  OpBuilder::Listener *previous = b.getListener();
  b.setListener(&created);
  int64_t version = versionOf(node.domain());
  NodeContext nc(b, node, loc, version, std::move(inputs), options.trainable);
  nc.externalData = &external;
  nc.transposedWeights = &transposedWeights;
  LogicalResult converted =
      (*registry().lookup(node.op_type(), version, node.domain()))(nc);
  b.setListener(previous);
  if (failed(converted))
    return failure();
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    if (i >= static_cast<int>(nc.results.size()) || !nc.results[i])
      return emitError(loc) << "output " << i << " ('" << node.output(i)
                            << "') of " << node.op_type()
                            << " is used but not supported";
  }
  DenseMap<Value, Value> replaced;
  SmallVector<Operation *> dead;
  foldConstants(created.ops, replaced, dead);
  for (auto [i, v] : llvm::enumerate(nc.results)) {
    if (!v || i >= static_cast<size_t>(node.output_size()) ||
        node.output(i).empty())
      continue;
    Value folded = replaced.lookup(v);
    values[node.output(i)] = folded ? folded : v;
  }
  for (Operation *op : dead)
    op->erase();
  return success();
}

OwningOpRef<ModuleOp> Importer::run(const onnx::ModelProto &model) {
  for (const auto &imp : model.opset_import()) {
    if (isDefaultDomain(imp.domain()))
      opset = imp.version();
    else
      domainVersions[imp.domain()] = imp.version();
  }
  if (opset == 0) {
    emitError(fileLoc) << "the model imports no version of the default ONNX "
                          "opset";
    return {};
  }
  if (opset < onnx_io::kFirstNativeOpset || opset > onnx_io::kNewestOpset) {
    emitError(fileLoc) << "the model uses ONNX opset " << opset
                       << "; tfm imports opsets " << onnx_io::kOldestOpset
                       << " to " << onnx_io::kNewestOpset;
    return {};
  }
  const onnx::GraphProto &graph = model.graph();
  if (failed(checkGraph(graph)))
    return {};

  OpBuilder b(ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());

  llvm::StringSet<> initializerNames;
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());
  // Graph inputs that nodes read as shape operands, with the first reader.
  llvm::StringMap<std::string> shapeInputs;
  for (const auto &node : graph.node())
    for (auto [i, name] : llvm::enumerate(node.input()))
      if (isShapeOperand(node.op_type(), i) && !shapeInputs.count(name))
        shapeInputs[name] = node.op_type() + " node '" + node.name() + "'";

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<unsigned> argPositions, positions;
  llvm::StringMap<DenseElementsAttr> bound;
  unsigned position = 0;
  for (const auto &in : graph.input()) {
    positions.push_back(position);
    if (initializerNames.contains(in.name()))
      continue; // an initializer with a default value, not a real input
    unsigned pos = position++;
    auto reader = shapeInputs.find(in.name());
    if (reader != shapeInputs.end() || options.boundInputs.contains(in.name())) {
      DenseElementsAttr value = options.shapeInputValue
                                    ? options.shapeInputValue(in.name(), pos)
                                    : DenseElementsAttr();
      if (!value) {
        if (reader == shapeInputs.end())
          emitError(fileLoc) << "graph input '" << in.name()
                             << "' is bound, but its value cannot be read";
        else
          emitError(fileLoc)
              << "graph input '" << in.name() << "' is a shape operand of "
              << reader->second
              << ", so its value must be known when compiling; bind it with "
                 "--bind "
              << in.name() << "=FILE.pb";
        return {};
      }
      bound[in.name()] = value;
      continue;
    }
    inputsToResolve.insert(in.name());
    argNames.push_back(in.name());
    argPositions.push_back(pos);
  }
  for (const auto &[name, shape] : options.inputShapes)
    if (!inputsToResolve.contains(name) &&
        llvm::any_of(graph.input(),
                     [&](const auto &in) { return in.name() == name; })) {
      emitError(fileLoc) << "--shape names '" << name.str()
                         << "', which is not an input of the model (an "
                            "initializer or a bound shape operand)";
      return {};
    }
  if (failed(resolveInputShapes(graph, positions)))
    return {};
  for (const std::string &name : argNames)
    argTypes.push_back(resolvedShapes.lookup(name));

  auto fn = b.create<func::FuncOp>(fileLoc, options.functionName,
                                   b.getFunctionType(argTypes, {}));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToEnd(body);
  for (auto [i, name] : llvm::enumerate(argNames)) {
    fn.setArgAttr(i, "tfm.name", b.getStringAttr(name));
    fn.setArgAttr(i, "tfm.input_index", b.getI64IntegerAttr(argPositions[i]));
    values[name] = body->getArgument(i);
  }
  // Test cases number every graph input, bound ones included.
  fn->setAttr("tfm.num_graph_inputs", b.getI64IntegerAttr(position));
  for (const auto &[name, value] : bound)
    values[name] = b.create<arith::ConstantOp>(
        NameLoc::get(b.getStringAttr(name)), value);
  llvm::StringSet<> transposeNames =
      options.trainable ? llvm::StringSet<>() : transposedWeightNames(graph);
  for (const auto &init : graph.initializer()) {
    std::string error;
    bool transpose = transposeNames.contains(init.name());
    DenseElementsAttr *cached =
        cache() ? &cache()->initializers[transpose][init.name()] : nullptr;
    DenseElementsAttr attr =
        cached && *cached
            ? *cached
            : tensorToAttr(ctx, init, error, &external, transpose);
    if (cached)
      *cached = attr;
    if (!attr) {
      emitError(fileLoc) << "initializer: " << error;
      return {};
    }
    Location loc = NameLoc::get(b.getStringAttr(init.name()));
    auto type = cast<RankedTensorType>(attr.getType());
    if (options.trainable && isa<FloatType>(type.getElementType()) &&
        type.getNumElements() >= 2)
      values[init.name()] = b.create<mlir::tfm::ParameterOp>(
          loc, type, b.getStringAttr(init.name()), attr);
    else
      values[init.name()] = b.create<arith::ConstantOp>(loc, attr);
    if (transpose)
      transposedWeights.insert(values[init.name()]);
  }

  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(convert(b, node, index)))
      return {};

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &out : graph.output()) {
    Value v = values.lookup(out.name());
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  b.create<func::ReturnOp>(fileLoc, results);
  fn.setType(b.getFunctionType(argTypes, resultTypes));
  for (auto [i, out] : llvm::enumerate(graph.output()))
    fn.setResultAttr(i, "tfm.name", b.getStringAttr(out.name()));

  // Constants left without users by folding are dead weight in dumps.
  SmallVector<Operation *> dead;
  fn.walk([&](arith::ConstantOp c) {
    if (c->use_empty())
      dead.push_back(c);
  });
  for (Operation *op : dead)
    op->erase();

  if (failed(verify(*module)))
    return {};
  return module;
}

} // namespace

bool mlir::tfm::onnx_import::parseShapeOption(StringRef text,
                                              ImportOptions &options,
                                              std::string &error) {
  auto [name, dims] = text.rsplit('=');
  if (name.empty() || dims.empty()) {
    error = "--shape expects NAME=DxDx..., got '" + text.str() + "'";
    return false;
  }
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, 'x');
  for (StringRef p : parts) {
    int64_t d;
    if (p.getAsInteger(10, d) || d < 0) {
      error = "--shape " + text.str() + ": '" + p.str() +
              "' is not a dimension size";
      return false;
    }
    shape.push_back(d);
  }
  if (dims == "scalar")
    shape.clear();
  auto [it, inserted] = options.inputShapes.try_emplace(name, shape);
  if (!inserted && it->second != shape) {
    auto show = [](ArrayRef<int64_t> s) {
      SmallVector<std::string> parts;
      for (int64_t d : s)
        parts.push_back(std::to_string(d));
      return parts.empty() ? std::string("scalar") : llvm::join(parts, "x");
    };
    error = "--shape gives '" + name.str() + "' twice: " + show(it->second) +
            " and " + show(shape);
    return false;
  }
  return true;
}

/// Parses `bytes` as a whole model, the large initializers' data left in
/// `bytes` (detachInitializerData), which must outlive `model`'s use.
static bool parseModel(StringRef bytes, onnx::ModelProto &model) {
  std::optional<std::string> detached = detachInitializerData(bytes);
  StringRef message = detached ? StringRef(*detached) : bytes;
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(message.data()),
      static_cast<int>(message.size()));
  stream.SetTotalBytesLimit(INT32_MAX);
  return model.ParseFromCodedStream(&stream) && stream.ConsumedEntireMessage();
}

OwningOpRef<ModuleOp>
mlir::tfm::onnx_import::importBytes(MLIRContext *ctx, StringRef bytes,
                                    StringRef fileName,
                                    const ImportOptions &options) {
  ImportCache *cache = options.cache && options.cache->context == ctx
                           ? options.cache.get()
                           : nullptr;
  auto runOn = [&](const onnx::ModelProto &model) {
    Importer importer(ctx, fileName, options);
    importer.setModelBytes(bytes);
    return importer.run(model);
  };
  if (cache && cache->model)
    return runOn(*cache->model);
  onnx::ModelProto model;
  if (!parseModel(bytes, model)) {
    emitError(FileLineColLoc::get(ctx, fileName, 0, 0))
        << "not a valid ONNX model (truncated or corrupt protobuf)";
    return {};
  }
  if (!model.has_graph()) {
    emitError(FileLineColLoc::get(ctx, fileName, 0, 0))
        << "the model holds no graph";
    return {};
  }
  // Old opsets are upgraded as a whole model, so converters only ever see
  // opset 13 semantics or newer.
  int64_t opset = 0;
  for (const auto &imp : model.opset_import())
    if (isDefaultDomain(imp.domain()))
      opset = imp.version();
  if (opset >= onnx_io::kOldestOpset && opset < onnx_io::kFirstNativeOpset) {
    // Some of the converter's adapters need ranks that shape inference can
    // only find from static input shapes, so the --shape bindings go in
    // first (a rank that disagrees is reported by the importer later).
    bool dynamic = false;
    for (onnx::ValueInfoProto &in : *model.mutable_graph()->mutable_input()) {
      auto *shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
      auto fixed = options.inputShapes.find(in.name());
      if (fixed != options.inputShapes.end() &&
          shape->dim_size() == static_cast<int>(fixed->second.size())) {
        for (auto [i, d] : llvm::enumerate(fixed->second))
          shape->mutable_dim(i)->set_dim_value(d);
        continue;
      }
      for (auto &d : *shape->mutable_dim()) {
        auto symbol = options.inputShapes.find(d.dim_param());
        if (!d.has_dim_value() && symbol != options.inputShapes.end() &&
            symbol->second.size() == 1)
          d.set_dim_value(symbol->second[0]);
        dynamic |= !d.has_dim_value();
      }
    }
    std::string error;
    if (!onnx_io::convertOpset(model, onnx_io::kFirstNativeOpset, error)) {
      emitError(FileLineColLoc::get(ctx, fileName, 0, 0))
          << "the model uses ONNX opset " << opset
          << ", and the ONNX version converter could not upgrade it to opset "
          << onnx_io::kFirstNativeOpset << ": " << error
          << (dynamic ? " (fixing the inputs' dynamic dimensions with "
                        "--shape may let it)"
                      : "");
      return {};
    }
  }
  ctx->loadDialect<TfmDialect, func::FuncDialect, arith::ArithDialect,
                   math::MathDialect>();
  if (!cache || opset < onnx_io::kFirstNativeOpset)
    return runOn(model);
  cache->model = std::make_unique<onnx::ModelProto>(std::move(model));
  return runOn(*cache->model);
}

OwningOpRef<ModuleOp>
mlir::tfm::onnx_import::importFile(MLIRContext *ctx, StringRef path,
                                   const ImportOptions &options) {
  if (ImportCache *cache = options.cache.get()) {
    if (cache->context != ctx || cache->path != path || !cache->buffer) {
      *cache = ImportCache();
      auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
      if (!buffer) {
        emitError(UnknownLoc::get(ctx))
            << "cannot open '" << path << "': " << buffer.getError().message();
        return {};
      }
      cache->context = ctx;
      cache->path = path.str();
      cache->buffer = std::move(*buffer);
    }
    return importBytes(ctx, cache->buffer->getBuffer(), path, options);
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  if (!buffer) {
    emitError(UnknownLoc::get(ctx)) << "cannot open '" << path
                                    << "': " << buffer.getError().message();
    return {};
  }
  return importBytes(ctx, (*buffer)->getBuffer(), path, options);
}

bool mlir::tfm::onnx_import::describeSignature(StringRef path,
                                               Signature &signature,
                                               std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  onnx::ModelProto model;
  if (!buffer) {
    error = "cannot open '" + path.str() + "': " + buffer.getError().message();
    return false;
  }
  if (!parseModel((*buffer)->getBuffer(), model)) {
    error = "'" + path.str() + "' is not a valid ONNX model";
    return false;
  }
  llvm::StringSet<> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  // Only the inputs' symbols need binding; the outputs' follow from them.
  auto describe = [&](const onnx::ValueInfoProto &v, bool isInput) {
    Signature::Port port;
    port.name = v.name();
    const auto &tt = v.type().tensor_type();
    port.dtype = onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(tt.elem_type()));
    port.hasShape = tt.has_shape();
    for (const auto &d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        port.dims.push_back(std::to_string(d.dim_value()));
        continue;
      }
      std::string sym = d.has_dim_param() ? d.dim_param() : "?";
      port.dims.push_back(sym);
      if (isInput && d.has_dim_param() &&
          !llvm::is_contained(signature.symbols, sym))
        signature.symbols.push_back(sym);
    }
    return port;
  };
  for (const auto &in : model.graph().input())
    if (!initializers.contains(in.name()))
      signature.inputs.push_back(describe(in, true));
  for (const auto &out : model.graph().output())
    signature.outputs.push_back(describe(out, false));
  return true;
}

std::vector<std::string> mlir::tfm::onnx_import::supportedOpTypes() {
  return registry().opTypes();
}

void mlir::tfm::onnx_import::registerImportDialects(DialectRegistry &registry) {
  registry.insert<TfmDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect>();
  registerGradientExternalModels(registry);
  registerAxisMapExternalModels(registry);
}
