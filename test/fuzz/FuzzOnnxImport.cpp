//===- FuzzOnnxImport.cpp - The ONNX importer and fusions on any bytes -----===//
//
// Any bytes given as a model file must import to a verified module, then
// fuse, or fail with a diagnostic; never crash.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontends/ONNX/Importer.h"
#include "tfm/Pipelines/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    tfm::onnx_import::registerImportDialects(registry);
    auto *c = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    return c;
  }();
  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  tfm::onnx_import::ImportOptions options;
  OwningOpRef<ModuleOp> module = tfm::onnx_import::importBytes(
      context,
      llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "fuzz.onnx", options);
  if (!module || failed(verify(*module)))
    return 0;
  PassManager pm(context);
  tfm::buildFusionPipeline(pm, /*remarks=*/false);
  (void)pm.run(*module);
  return 0;
}
