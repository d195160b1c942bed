//===- Pipelines.cpp - Named pipelines of tfm ------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Autodiff.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::buildFuseTransformerPipeline(
    OpPassManager &pm, const FusionPipelineOptions &options) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createCanonicalizerPass());
  // Layer norms first: their recognition consumes the Mul/Add chains that
  // the linear recognition would otherwise see as biases.
  fn.addPass(createFuseResidualLayerNormPass({options.remarks}));
  fn.addPass(createFuseQKVPass({options.remarks}));
  fn.addPass(createFuseMaskedSoftmaxPass({options.remarks}));
  fn.addPass(createFuseBiasActivationPass({options.remarks}));
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
}

void mlir::tfm::buildTrainingPipeline(OpPassManager &pm,
                                      const FusionPipelineOptions &fusion,
                                      const TrainingOptions &training) {
  buildFuseTransformerPipeline(pm, fusion);
  pm.addPass(createAutodiffPass(training));
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
}

void mlir::tfm::registerTfmPipelines() {
  PassPipelineRegistration<FusionPipelineOptions>(
      "tfm-fuse-transformer",
      "Canonicalize and run every tfm fusion (QKV, masked softmax, residual "
      "+ layer norm, bias + activation)",
      buildFuseTransformerPipeline);
}
