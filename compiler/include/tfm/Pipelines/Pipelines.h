//===- Pipelines.h - tfm's named pipelines and their options ----*- C++ -*-===//
//
// Every stage of `tfmc compile` is a pass pipeline built here, and every one
// is registered for tfm-opt with the same options, so
//
//   tfmc compile m.onnx --emit=linalg --dtype=bf16 --train --lr=0.1
//
// and
//
//   tfmc compile m.onnx --emit=tfm -o m.mlir
//   tfm-opt m.mlir --tfm-pipeline='stage=linalg compute-type=bf16 train=true lr=0.1'
//
// produce the same module. tfmc only parses flags into CompilerOptions and
// calls buildPipelineToStage.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_PIPELINES_PIPELINES_H
#define TFM_PIPELINES_PIPELINES_H

#include "tfm/Conversion/ComputeType.h"
#include "tfm/Transforms/Autodiff.h"
#include "tfm/Transforms/QuantizeMode.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace mlir::tfm {

/// What the compiler generates code for.
enum class Target { CPU, CUDA };


/// The stages a compile can stop at, in order.
enum class Stage {
  tfm,    // as imported
  fused,  // after fusion (and autodiff, when training)
  linalg, // on buffers: kernel calls and linalg (the CPU target)
  llvm,   // the LLVM dialect; translation and linking come after
  ptx,    // the kernels as PTX (the CUDA target)
  obj,
  so,
};

/// The target's name as the CLI spells it ("cpu", "cuda").
StringRef targetName(Target target);

/// How a module is compiled for generation (tfm-derive-kv-cache).
struct GenerationOptions {
  /// The longest sequence (0: the model's sequence length).
  int64_t maxLength = 0;
  /// The tokens @prefill takes at once.
  int64_t prefillChunk = 32;
};

/// How a module is compiled: the one options struct behind tfmc's flags and
/// the registered pipelines' options.
struct CompilerOptions {
  Target target = Target::CPU;
  ComputeType computeType = ComputeType::F32;
  /// Emit a remark for every fusion site, fused or missed.
  bool remarks = false;
  /// Run the fusion passes.
  bool fuse = true;
  /// Set to also build @train_step (tfm-autodiff) with these options.
  std::optional<TrainingOptions> training;
  /// Set to also build @prefill and @decode_step with a KV cache.
  std::optional<GenerationOptions> generation;
  /// What the float linear layers' constant weights become (tfm-quantize).
  QuantizeMode quantize = QuantizeMode::None;
  /// With QuantizeMode::Int4: the weights along K that share a scale.
  int64_t quantizeBlockSize = 32;
  /// With QuantizeMode::Int8: weights within 7 bits, for a CPU without VNNI.
  bool quantizeSevenBit = false;
  /// The GPU architecture the CUDA target compiles for.
  std::string gpuArch = "sm_80";
  /// For the CUDA target: run the kernels' schedule (the loops mapped to
  /// blocks and threads) as serial loops on the host instead of compiling
  /// it to PTX, so that CI without a GPU checks its indexing against the
  /// reference interpreter. The artifact is a CPU model.
  bool gpuScheduleOnCPU = false;
  /// On sm_90a: TMA loads the warpgroup GEMM's tiles (where its operands
  /// allow) instead of cp.async.
  bool gpuTma = true;
  /// With gpuScheduleOnCPU: run each grid's blocks and threads in
  /// descending order (tfm-reverse-grid), which changes the result of a
  /// kernel whose threads read each other's writes, a race on a GPU.
  bool reverseGrid = false;
  /// For the CPU target: the iterations a loop nest of the glue needs to
  /// run on the session's threads (tfm-parallelize-glue; 0: none does).
  int64_t parallelGlueIterations = 65536;
};

/// Why --quantize refuses --train, as the pipeline and tfmc's usage check
/// both say it.
inline constexpr const char *kQuantizedTrainingRefusal =
    "--quantize makes an inference model, and a quantized model does not "
    "train: train in f32, then compile the trained model with --quantize";

/// The options of the registered pipelines: CompilerOptions as pass
/// options, the training options expanded from TrainingOptions.def.
struct TfmPipelineOptions : public PassPipelineOptions<TfmPipelineOptions> {
  Option<Stage> stage{
      *this, "stage", llvm::cl::desc("The stage to stop at"),
      llvm::cl::init(Stage::llvm),
      llvm::cl::values(clEnumValN(Stage::fused, "fused", "after fusion"),
                       clEnumValN(Stage::linalg, "linalg", "on buffers"),
                       clEnumValN(Stage::llvm, "llvm", "the LLVM dialect"))};
  Option<Target> target{
      *this, "target", llvm::cl::desc("The target"),
      llvm::cl::init(Target::CPU),
      llvm::cl::values(clEnumValN(Target::CPU, "cpu", "oneDNN kernels"),
                       clEnumValN(Target::CUDA, "cuda", "PTX for NVIDIA GPUs"))};
  Option<std::string> gpuArch{
      *this, "gpu-arch",
      llvm::cl::desc("The GPU architecture: sm_80, sm_86, sm_89, sm_90, "
                     "sm_90a (16-bit GEMMs by wgmma)"),
      llvm::cl::init("sm_80")};
  Option<bool> gpuScheduleOnCPU{
      *this, "gpu-schedule-on-cpu",
      llvm::cl::desc("With target=cuda: the kernels' schedule as serial host "
                     "loops instead of PTX (a test of the schedule)"),
      llvm::cl::init(false)};
  Option<bool> gpuTma{
      *this, "gpu-tma",
      llvm::cl::desc("On sm_90a: TMA loads the warpgroup GEMM's tiles "
                     "instead of cp.async"),
      llvm::cl::init(true)};
  Option<bool> reverseGrid{
      *this, "reverse-grid",
      llvm::cl::desc("With gpu-schedule-on-cpu: each grid's blocks and "
                     "threads in descending order (tfm-reverse-grid)"),
      llvm::cl::init(false)};
  Option<int64_t> parallelGlueIterations{
      *this, "parallel-glue-iterations",
      llvm::cl::desc("The iterations a loop nest of the CPU's glue needs to "
                     "run on the session's threads (0: none does)"),
      llvm::cl::init(65536)};
  Option<ComputeType> computeType{
      *this, "compute-type",
      llvm::cl::desc("The type GEMMs multiply in (f32 accumulation)"),
      llvm::cl::init(ComputeType::F32), computeTypeValues()};
  Option<bool> remarks{*this, "remarks",
                       llvm::cl::desc("Emit a remark for every fusion site"),
                       llvm::cl::init(false)};
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Run the fusion passes"),
                    llvm::cl::init(true)};
  Option<bool> generate{
      *this, "generate",
      llvm::cl::desc("Also build @prefill and @decode_step with a KV cache"),
      llvm::cl::init(false)};
  Option<int64_t> maxLength{
      *this, "max-length",
      llvm::cl::desc("With generate: the longest sequence (0: the model's)"),
      llvm::cl::init(0)};
  Option<int64_t> prefillChunk{
      *this, "prefill-chunk",
      llvm::cl::desc("With generate: the tokens @prefill takes at once"),
      llvm::cl::init(32)};
  Option<QuantizeMode> quantize{
      *this, "quantize",
      llvm::cl::desc("What the float linear layers' constant weights become "
                     "(tfm-quantize)"),
      llvm::cl::init(QuantizeMode::None), quantizeModeValues()};
  Option<int64_t> quantizeBlockSize{
      *this, "quantize-block-size",
      llvm::cl::desc("With quantize=int4: the weights along K that share a "
                     "scale and a zero point"),
      llvm::cl::init(32)};
  Option<bool> quantizeSevenBit{
      *this, "quantize-seven-bit",
      llvm::cl::desc("With quantize=int8: weights in [-64, 64], for a CPU "
                     "without VNNI"),
      llvm::cl::init(false)};
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Also build @train_step"),
                     llvm::cl::init(false)};
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  Option<TYPE> MEMBER{*this, FLAG, llvm::cl::desc(DESCRIPTION),                \
                      llvm::cl::init(DEFAULT)};
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  ListOption<TYPE> MEMBER{*this, FLAG, llvm::cl::desc(DESCRIPTION)};
#include "tfm/Transforms/TrainingOptions.def"

  /// The same options as a CompilerOptions; fails on a bad schedule.
  FailureOr<CompilerOptions> toCompilerOptions(std::string &error) const;
};

/// Canonicalization, then every fusion in the order that exposes the next:
/// layer norms first, then QKV, masked softmax, and bias + activation.
void buildFusionPipeline(OpPassManager &pm, bool remarks);

/// The fusion pipeline, then tfm-autodiff with `training`, then the
/// canonicalization that cleans the backward pass. Fusing first lets the
/// backward pass use the fused ops' gradient rules (docs/training.md). On
/// the GPU, whose attention_grad kernels recompute the probabilities,
/// attention is fused before autodiff too; the CPU keeps them for its
/// library GEMMs.
void buildTrainingPipeline(OpPassManager &pm, bool remarks,
                           const TrainingOptions &training,
                           Target target = Target::CPU);

/// What the CPU target runs between fusion and lowering: its fused
/// attention (no scores in memory) and its memory plan. `tfmc inspect`
/// reports the plan it makes.
void buildCPUPlanPipeline(OpPassManager &pm, bool remarks);

/// Fusion (and training) as `options` ask, memory planning and
/// tfm-lower-to-cpu: the program on buffers, with kernel calls and linalg.
void buildCPUBufferPipeline(OpPassManager &pm, const CompilerOptions &options);

/// What every target runs first: fusion as `options` ask, autodiff with the
/// training options, and the KV cache with the generation options.
void buildFrontPipeline(OpPassManager &pm, const CompilerOptions &options);

/// linalg, memref, math and friends down to the LLVM dialect; the linalg
/// ops of at least `parallelGlueIterations` iterations run on the
/// session's threads (0: none does).
void buildCPUToLLVMPipeline(OpPassManager &pm,
                            int64_t parallelGlueIterations = 0);

/// Fusion (and training) as `options` ask, memory planning for the GPU and
/// tfm-lower-to-gpu: the program as linalg on device buffers.
void buildGPUBufferPipeline(OpPassManager &pm, const CompilerOptions &options);

/// The linalg of a GPU entry mapped to blocks and threads, outlined into
/// kernels, compiled to PTX for `arch` by MLIR's NVVM pipeline, and the
/// host code in the LLVM dialect, launching them through the runtime.
/// With `remarks`, each GEMM's generated kernel is remarked on
/// (tfm-tile-gpu-matmul).
void buildGPUToLLVMPipeline(OpPassManager &pm, StringRef arch,
                            bool remarks = false, bool tma = true);

/// The linalg of a GPU entry mapped to blocks and threads, as
/// buildGPUToLLVMPipeline maps it, then lowered with the CPU's passes: the
/// grid runs as serial loops on the host (CompilerOptions::gpuScheduleOnCPU),
/// the kernels for `arch` emulated.
void buildGPUScheduleOnCPUPipeline(OpPassManager &pm, StringRef arch,
                                   bool reverseGrid, bool remarks = false,
                                   bool tma = true);

/// The passes that take a module as imported (tfm on tensors) to `stage`
/// for `options.target`. Stages past `llvm` need translation, which the
/// caller does (tfm/Target/Artifact.h); for them this builds up to `llvm`.
/// Fails with `error` for what this build cannot do (a target or compute
/// type not available).
LogicalResult buildPipelineToStage(OpPassManager &pm, Stage stage,
                                   const CompilerOptions &options,
                                   std::string &error);

/// Adds what the pipelines need of a context's registry beyond dialects:
/// the NVVM target's serialization to PTX and the translations to LLVM IR
/// it runs.
void registerPipelineExtensions(DialectRegistry &registry);

/// Registers tfm-fuse-transformer, tfm-pipeline, tfm-cpu-pipeline and
/// tfm-gpu-pipeline.
void registerTfmPipelines();

} // namespace mlir::tfm

#endif // TFM_PIPELINES_PIPELINES_H
