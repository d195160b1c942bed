//===- Pipelines.cpp - Fusion, training, and the stage builder ------------===//

#include "tfm/Pipelines/Pipelines.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::tfm;

StringRef mlir::tfm::targetName(Target target) {
  switch (target) {
  case Target::CPU:
    return "cpu";
  case Target::CUDA:
    return "cuda";
  }
  llvm_unreachable("unknown target");
}

FailureOr<CompilerOptions>
TfmPipelineOptions::toCompilerOptions(std::string &error) const {
  CompilerOptions o;
  o.target = target;
  o.computeType = computeType;
  o.gpuArch = gpuArch;
  o.gpuScheduleOnCPU = gpuScheduleOnCPU;
  o.reverseGrid = reverseGrid;
  o.gpuTma = gpuTma;
  o.parallelGlueIterations = parallelGlueIterations;
  o.remarks = remarks;
  o.fuse = fuse;
  o.quantize = quantize;
  o.quantizeBlockSize = quantizeBlockSize;
  o.quantizeSevenBit = quantizeSevenBit;
  if (generate)
    o.generation = GenerationOptions{maxLength, prefillChunk};
  if (train) {
    TrainingOptions t;
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  t.MEMBER = MEMBER;
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  t.MEMBER.assign(MEMBER.begin(), MEMBER.end());
#include "tfm/Transforms/TrainingOptions.def"
    if (failed(t.parseSchedule(error)))
      return failure();
    o.training = std::move(t);
  }
  return o;
}

void mlir::tfm::buildFusionPipeline(OpPassManager &pm, bool remarks) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createCanonicalizerPass());
  // Quantized weights first: the float linears' recognition below must not
  // see a dequantized weight's product as a matmul it cannot fuse.
  fn.addPass(createFuseQuantizedLinearPass({remarks}));
  // Layer norms first: their recognition consumes the Mul/Add chains that
  // the linear recognition would otherwise see as biases.
  fn.addPass(createFuseResidualLayerNormPass({remarks}));
  // Before the QKV fusion, which would pack the gate and up projections of
  // one input as if they were an attention's.
  fn.addPass(createFuseGatedMLPPass({remarks}));
  fn.addPass(createFuseQKVPass({remarks}));
  fn.addPass(createFuseMaskedSoftmaxPass({remarks}));
  fn.addPass(createFuseRotaryPass({remarks}));
  // On the masked softmaxes, and before a KV cache is derived, which then
  // holds only the key heads.
  fn.addPass(createFuseGroupedQueryPass({remarks}));
  fn.addPass(createFuseBiasActivationPass({remarks}));
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
}

void mlir::tfm::buildTrainingPipeline(OpPassManager &pm, bool remarks,
                                      const TrainingOptions &training,
                                      Target target) {
  // Before fusion, which folds what stays constant into the kernels.
  pm.addPass(createPromoteConstantsPass());
  buildFusionPipeline(pm, remarks);
  if (target == Target::CUDA) {
    // The fusion asks the target's layout rules which operands it reads
    // in place.
    registerGPUTarget();
    pm.addNestedPass<func::FuncOp>(
        createFuseAttentionPass({remarks, targetName(target).str()}));
  }
  pm.addPass(createAutodiffPass(training));
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
}

void mlir::tfm::buildFrontPipeline(OpPassManager &pm,
                                   const CompilerOptions &options) {
  if (options.quantize != QuantizeMode::None) {
    // Before fusion, which folds biases and activations into the quantized
    // linears and packs only float weights (QKV, gated MLP); after a
    // canonicalization that folds the weights' transposes into constants.
    OpPassManager &fn = pm.nest<func::FuncOp>();
    fn.addPass(createCanonicalizerPass());
    fn.addPass(createQuantizePass({options.quantize, options.quantizeBlockSize,
                                   options.quantizeSevenBit, options.remarks}));
  }
  if (options.training)
    buildTrainingPipeline(pm, options.remarks, *options.training,
                          options.target);
  else if (options.fuse)
    buildFusionPipeline(pm, options.remarks);
  // After fusion, whose masked softmax takes the key masks; a module
  // without tfm.symbol_ranges (one static size) passes unchanged.
  pm.addPass(createExactPaddingPass());
  if (options.generation) {
    // After fusion: the cache follows fused attention's causal flag. With
    // training, the entries read the parameters that @train_step updates.
    pm.addPass(createDeriveKVCachePass(
        {"", options.generation->maxLength, options.generation->prefillChunk}));
    OpPassManager &fn = pm.nest<func::FuncOp>();
    fn.addPass(createCanonicalizerPass());
    fn.addPass(createCSEPass());
  }
}

LogicalResult mlir::tfm::buildPipelineToStage(OpPassManager &pm, Stage stage,
                                              const CompilerOptions &options,
                                              std::string &error) {
  if (stage == Stage::tfm)
    return success();
  if (options.training && options.quantize != QuantizeMode::None) {
    error = kQuantizedTrainingRefusal;
    return failure();
  }
  if (stage == Stage::fused) {
    buildFrontPipeline(pm, options);
    return success();
  }
  // The backward GEMMs and the optimizers have no narrower form; a narrower
  // compute type would reach only some forward linear layers.
  if (options.training && options.computeType != ComputeType::F32) {
    error = "training compiles in f32 only; compute-type=" +
            computeTypeName(options.computeType).str() + " is for inference";
    return failure();
  }
  if (options.target == Target::CUDA) {
    if (ptxFeaturesOf(options.gpuArch).empty()) {
      error = "unknown GPU architecture '" + options.gpuArch +
              "'; the CUDA target builds for sm_80, sm_86, sm_89, sm_90 and "
              "sm_90a";
      return failure();
    }
    if (options.reverseGrid && !options.gpuScheduleOnCPU) {
      error = "--reverse-grid applies to --gpu-schedule-on-cpu";
      return failure();
    }
    if (options.gpuScheduleOnCPU && stage == Stage::ptx) {
      error = "--gpu-schedule-on-cpu compiles no PTX";
      return failure();
    }
    buildGPUBufferPipeline(pm, options);
    if (stage == Stage::linalg)
      return success();
    if (options.gpuScheduleOnCPU)
      buildGPUScheduleOnCPUPipeline(pm, options.gpuArch, options.reverseGrid,
                                    options.remarks, options.gpuTma);
    else
      buildGPUToLLVMPipeline(pm, options.gpuArch, options.remarks,
                             options.gpuTma);
    return success();
  }
  if (stage == Stage::ptx) {
    error = "--emit=ptx needs --target=cuda";
    return failure();
  }
  if (options.computeType == ComputeType::F16) {
    error = "the CPU target multiplies in f32 or bf16, not f16";
    return failure();
  }
  buildCPUBufferPipeline(pm, options);
  if (stage != Stage::linalg)
    buildCPUToLLVMPipeline(pm, options.parallelGlueIterations);
  return success();
}

namespace {
/// Stands for a pipeline whose options were bad: a registered builder
/// cannot fail, so the run fails here, with the reason.
struct ReportPipelineErrorPass
    : public PassWrapper<ReportPipelineErrorPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ReportPipelineErrorPass)
  explicit ReportPipelineErrorPass(std::string message)
      : message(std::move(message)) {}
  StringRef getArgument() const override { return "tfm-pipeline-error"; }
  void runOnOperation() override {
    getOperation()->emitError(message);
    signalPassFailure();
  }
  std::string message;
};
} // namespace

void mlir::tfm::registerTfmPipelines() {
  struct FusionOptions : public PassPipelineOptions<FusionOptions> {
    Option<bool> remarks{*this, "remarks",
                         llvm::cl::desc("Emit a remark for every fusion site"),
                         llvm::cl::init(false)};
  };
  PassPipelineRegistration<FusionOptions>(
      "tfm-fuse-transformer",
      "Canonicalize and run every tfm fusion (QKV, masked softmax, residual "
      "+ layer norm, bias + activation)",
      [](OpPassManager &pm, const FusionOptions &o) {
        buildFusionPipeline(pm, o.remarks);
      });
  auto build = [](OpPassManager &pm, const TfmPipelineOptions &o,
                  std::optional<Target> target) {
    std::string error;
    FailureOr<CompilerOptions> options = o.toCompilerOptions(error);
    if (succeeded(options) && target)
      options->target = *target;
    if (succeeded(options) &&
        succeeded(buildPipelineToStage(pm, o.stage, *options, error)))
      return;
    pm.clear();
    pm.addPass(std::make_unique<ReportPipelineErrorPass>(error));
  };
  PassPipelineRegistration<TfmPipelineOptions>(
      "tfm-pipeline",
      "tfm as imported to `stage` for `target`: what tfmc compile runs",
      [build](OpPassManager &pm, const TfmPipelineOptions &o) {
        build(pm, o, std::nullopt);
      });
  PassPipelineRegistration<TfmPipelineOptions>(
      "tfm-gpu-pipeline",
      "tfm-pipeline with target=cuda: fuse, plan memory, lower to linalg on "
      "device buffers, map to blocks and threads, compile the kernels to PTX "
      "and the host code to the LLVM dialect",
      [build](OpPassManager &pm, const TfmPipelineOptions &o) {
        build(pm, o, Target::CUDA);
      });
  PassPipelineRegistration<TfmPipelineOptions>(
      "tfm-cpu-pipeline",
      "tfm-pipeline with target=cpu: fuse, plan memory, lower to oneDNN "
      "kernel calls and linalg, then to the LLVM dialect",
      [build](OpPassManager &pm, const TfmPipelineOptions &o) {
        build(pm, o, Target::CPU);
      });
}
