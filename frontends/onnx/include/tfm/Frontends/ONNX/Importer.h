//===- Importer.h - ONNX models into the tfm dialect ------------*- C++ -*-===//
//
// Reads an ONNX ModelProto (opsets 7 to 21; 7 to 12 are upgraded to 13 first) and builds a module holding one
// function, @infer, on static shapes. Initializers become constants; every
// op carries the location loc("<node name>"("<op type>")). Subgraphs that
// compute on constants only (shape arithmetic, masks built from Trilu, ...)
// are folded by the reference interpreter while importing. Each argument of
// @infer carries `tfm.name` and `tfm.input_index`, its position among the
// graph's inputs (inputs bound to constants are not arguments).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTENDS_ONNX_IMPORTER_H
#define TFM_FRONTENDS_ONNX_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <memory>
#include <optional>

namespace mlir::tfm::onnx_import {

/// What the imports of one model at several sizes share (tfmc's buckets of
/// a range): the file, read and parsed once, and each initializer as an
/// attribute, which no size changes. Opaque; make one with makeImportCache
/// and give every import of the model the same one, in one MLIRContext.
struct ImportCache;
std::shared_ptr<ImportCache> makeImportCache();

struct ImportOptions {
  /// Fixes graph inputs' dynamic dimensions: an input's NAME -> its full
  /// static shape, or a dimension symbol's name -> {its size}.
  llvm::StringMap<SmallVector<int64_t>> inputShapes;
  /// The shape of a graph input whose dimensions neither the model nor
  /// inputShapes fix (from test data, say), by name and position among the
  /// graph's inputs; std::nullopt when not known.
  std::function<std::optional<SmallVector<int64_t>>(StringRef name,
                                                    unsigned position)>
      inputShapeHint;
  /// The size of a dynamic dimension that neither inputShapes nor
  /// inputShapeHint fixes, by the input's name, its position among the
  /// graph's inputs, the dimension and its symbol ("" when unnamed), when
  /// the caller has one to choose (tfmc --generate: the batch and the
  /// longest sequence). A symbol so sized has that size in every input.
  std::function<std::optional<int64_t>(StringRef name, unsigned position,
                                       unsigned dim, StringRef symbol)>
      dimensionDefault;
  /// The name of the function to build.
  std::string functionName = "infer";
  /// Supplies the value of a graph input that some node uses as a shape
  /// operand (Reshape's shape, Slice's starts, ...), which a static compiler
  /// must know. Called with the input's name and its position among the
  /// graph's inputs; returns null when the value is not known, which makes
  /// the import fail with a message that says how to provide it.
  std::function<DenseElementsAttr(StringRef name, unsigned position)>
      shapeInputValue;
  /// Graph inputs that become constants of the model, their values from
  /// shapeInputValue, whether nodes read them as shapes or not (an export's
  /// fixed-size cache bound to zeros, and its positions).
  llvm::StringSet<> boundInputs;
  /// Imports for training: float initializers of two or more elements
  /// become `tfm.parameter`s (scalars and integer initializers stay
  /// constants), and Dropout becomes `tfm.dropout`, inactive until
  /// tfm-autodiff builds the training step.
  bool trainable = false;
  /// The folder that external data locations are relative to; empty means
  /// the model file's folder.
  std::string externalDataFolder;
  /// Shared by imports of the same model at other sizes; none by default.
  std::shared_ptr<ImportCache> cache;
};

/// Parses "NAME=2x128" (an input's shape) or "SYMBOL=N" (a dimension
/// symbol's size) into `options`. Returns false and sets `error` when the
/// text is malformed, or when it gives NAME a second, different value.
bool parseShapeOption(llvm::StringRef text, ImportOptions &options,
                      std::string &error);

/// Imports the ONNX file at `path`. On failure, diagnostics have been
/// emitted to the context and the result is null; nothing is ever thrown.
OwningOpRef<ModuleOp> importFile(MLIRContext *context, llvm::StringRef path,
                                 const ImportOptions &options);

/// Imports a serialized ModelProto; `fileName` only labels diagnostics.
OwningOpRef<ModuleOp> importBytes(MLIRContext *context, llvm::StringRef bytes,
                                  llvm::StringRef fileName,
                                  const ImportOptions &options);

/// The graph inputs and outputs of an ONNX model as its file gives them:
/// element type names ("INT64") and dims, a symbolic one by its name
/// ("sequence"; "?" when unnamed, empty for no shape at all), and the
/// inputs' dimension symbols in order of appearance.
struct Signature {
  struct Port {
    std::string name, dtype;
    bool hasShape = true;
    std::vector<std::string> dims;
  };
  std::vector<Port> inputs, outputs;
  std::vector<std::string> symbols;
};

/// Reads the signature of the ONNX model at `path`. Returns false and sets
/// `error` when the file is no model.
bool describeSignature(llvm::StringRef path, Signature &signature,
                       std::string &error);

/// The ONNX op types the importer converts, sorted.
std::vector<std::string> supportedOpTypes();

/// Registers the dialects the importer produces.
void registerImportDialects(DialectRegistry &registry);

} // namespace mlir::tfm::onnx_import

#endif // TFM_FRONTENDS_ONNX_IMPORTER_H
