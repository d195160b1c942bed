//===- Passes.h - The tfm passes --------------------------------*- C++ -*-===//

#ifndef TFM_TRANSFORMS_PASSES_H
#define TFM_TRANSFORMS_PASSES_H

#include "tfm/Conversion/ComputeType.h"
#include "tfm/IR/TfmDialect.h"
#include "tfm/Transforms/QuantizeMode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace mlir::tfm {

#define GEN_PASS_DECL
#include "tfm/Transforms/Passes.h.inc"

/// The function named `name`, or with an empty name the module's only
/// public function with a body (null when there is not exactly one).
func::FuncOp findForward(ModuleOp module, StringRef name);

/// Patterns of each fusion, for pipelines and tests that compose them.
void populateLinearRecognitionPatterns(RewritePatternSet &patterns);
/// GELU written with Erf, or with Tanh and a cube, as tfm.gelu.
void populateActivationRecognitionPatterns(RewritePatternSet &patterns);
void populateGatedMLPPatterns(RewritePatternSet &patterns);
void populateBiasActivationPatterns(RewritePatternSet &patterns);
void populateQuantizedLinearPatterns(RewritePatternSet &patterns);
void populateMaskedSoftmaxPatterns(RewritePatternSet &patterns);
void populateQKVPatterns(RewritePatternSet &patterns);
void populateLayerNormRecognitionPatterns(RewritePatternSet &patterns);
void populateResidualLayerNormPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "tfm/Transforms/Passes.h.inc"

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_PASSES_H
