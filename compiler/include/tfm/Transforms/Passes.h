//===- Passes.h - The tfm passes and pipelines ------------------*- C++ -*-===//

#ifndef TFM_TRANSFORMS_PASSES_H
#define TFM_TRANSFORMS_PASSES_H

#include "tfm/IR/TfmDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::tfm {

#define GEN_PASS_DECL
#include "tfm/Transforms/Passes.h.inc"

/// Patterns of each fusion, for pipelines and tests that compose them.
void populateLinearRecognitionPatterns(RewritePatternSet &patterns);
void populateBiasActivationPatterns(RewritePatternSet &patterns);
void populateMaskedSoftmaxPatterns(RewritePatternSet &patterns);
void populateQKVPatterns(RewritePatternSet &patterns);
void populateLayerNormRecognitionPatterns(RewritePatternSet &patterns);
void populateResidualLayerNormPatterns(RewritePatternSet &patterns);

/// Options of the tfm-fuse-transformer pipeline.
struct FusionPipelineOptions
    : public PassPipelineOptions<FusionPipelineOptions> {
  Option<bool> remarks{*this, "remarks",
                       llvm::cl::desc("Emit a remark for every fusion site"),
                       llvm::cl::init(false)};
};

/// Canonicalization, then every fusion in the order that exposes the next:
/// linears and layer norms first, then QKV, masked softmax, residual + layer
/// norm, and bias + activation.
void buildFuseTransformerPipeline(OpPassManager &pm,
                                  const FusionPipelineOptions &options);

struct TrainingOptions;

/// The fusion pipeline, then tfm-autodiff with `training`, then the
/// canonicalization that cleans the backward pass. Fusing first lets the
/// backward pass use the fused ops' gradient rules (docs/training.md).
void buildTrainingPipeline(OpPassManager &pm,
                           const FusionPipelineOptions &fusion,
                           const TrainingOptions &training);

#define GEN_PASS_REGISTRATION
#include "tfm/Transforms/Passes.h.inc"

/// Registers the named pipelines (tfm-fuse-transformer).
void registerTfmPipelines();

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_PASSES_H
