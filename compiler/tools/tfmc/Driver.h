//===- Driver.h - Shared pieces of the tfmc subcommands ---------*- C++ -*-===//

#ifndef TFM_TOOLS_TFMC_DRIVER_H
#define TFM_TOOLS_TFMC_DRIVER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/JSON.h"
#include "tfm/IR/InputValues.h"
#include "tfm/Pipelines/Pipelines.h"
#include "tfm/Reference/Tensor.h"
#include "tfm/Target/Artifact.h"
#include "tfm/Transforms/Autodiff.h"
#include "tfm/runtime.h"

#include <functional>
#include <optional>

namespace mlir::tfm::onnx_import {
struct ImportOptions;
} // namespace mlir::tfm::onnx_import

namespace mlir::tfm::tfmc {

/// The exit codes of the CLI contract.
enum ExitCode : int {
  kExitOk = 0,
  kExitInputError = 1, // the input or model is at fault; a message says why
  kExitUsage = 2,
  kExitMismatch = 3, // outputs did not match the expected ones
};

/// Starts an error message on stderr ("tfmc: error: "), clearing the
/// progress line first.
llvm::raw_ostream &error();

/// Redraws the one progress line (only on a terminal).
void showProgress(llvm::StringRef line);
/// Clears the progress line, if one is shown.
void clearProgress();

/// Prints and frees a failed runtime status; true when `s` was OK.
bool ok(tfm_status_t s);

/// A dimension symbol that one artifact serves a range of sizes of
/// (--shape sequence=1..512).
struct SizeRange {
  std::string symbol;
  int64_t min, max;
};

/// Parses "SYMBOL=LO..HI". std::nullopt when `spec` is no range, and then
/// `error` is set when it looks like a malformed one.
std::optional<SizeRange> parseSizeRange(llvm::StringRef spec,
                                        std::string &error);

/// The sizes compiled for `range`: `perOctave` per doubling (every size up
/// to 16 where `everySizeTo16`), and the range's maximum.
llvm::SmallVector<int64_t> bucketSizes(const SizeRange &range,
                                       unsigned perOctave, bool everySizeTo16);

/// Imports the ONNX model at `path` once per combination of the ranges'
/// bucket sizes into one module, for tfm-exact-padding: each public
/// function once per bucket, renamed `infer.sequence128` and marked
/// `tfm.bucket_of`, the arguments' axes that follow a symbol named by
/// `tfm.symbols`, and the ranges in `tfm.symbol_ranges`. Null (with
/// diagnostics) when an import fails. `perOctave` is the user's
/// --buckets-per-octave; without it, one range gets 8 and several as many
/// as keep them within a budget of buckets, with a note.
OwningOpRef<ModuleOp> importBuckets(MLIRContext *context, llvm::StringRef path,
                                    const onnx_import::ImportOptions &base,
                                    llvm::ArrayRef<SizeRange> ranges,
                                    std::optional<unsigned> perOctave);

/// Options of `tfmc generate`.
struct GenerateOptions {
  std::vector<int64_t> prompt, source;
  int64_t maxNewTokens = 16, beam = 1, endToken = -1, topK = 0;
  double lengthPenalty = 0, temperature = 1, topP = 1;
  bool sample = false;
  uint64_t seed = 0;
  int32_t threads = 0;
  unsigned bench = 0; // timed generations after the printed one
  std::string device; // empty: what the model was compiled for
};

/// Generates from the library at `soPath` (compiled with --generate).
/// Returns an ExitCode.
int generateCompiled(llvm::StringRef soPath, const GenerateOptions &options);

/// Options of `tfmc run`.
struct RunOptions {
  unsigned bench = 0;   // timed runs after the checked one
  int32_t threads = 0;  // 0: the runtime's choice
  std::string device;   // empty: what the model was compiled for
  std::string entry;
  std::vector<std::string> inputs; // NAME=FILE.pb
  std::string testDataDir;
  std::string outputDir;
  uint64_t seed = 0;
  double rtol = 1e-4;
  double atol = 1e-5;
  double relL2 = -1; // >= 0: judge float outputs by the normwise error
  unsigned printLimit = 16;
  std::string profile; // write the runs' profile here ("-": stderr)
  bool allowTF32 = false; // a GPU's f32 GEMMs may multiply in TF32
};

/// Reads a .pb TensorProto as a dense constant; reports and returns null on
/// failure.
mlir::DenseElementsAttr readConstant(mlir::MLIRContext *context,
                                     llvm::StringRef path);

/// Picks the function to run: `entry` if given, else `@infer`, else the only
/// public function. Reports an error and returns null when there is none.
mlir::func::FuncOp findEntry(mlir::ModuleOp module, llvm::StringRef entry);

/// Reads an ONNX TensorProto file (input_0.pb, labels.pb) into `out`;
/// reports and fails on one that cannot be read.
bool readTensorFile(const std::string &path, reference::Tensor &out);

/// One input or output of an entry point, as `tfmc run` feeds and checks it.
struct Port {
  std::string name;
  reference::ElementKind kind;
  std::vector<int64_t> shape; // -1 where a dynamic entry's size may vary
  /// The largest sizes of a shape with -1s (empty for a static one).
  std::vector<int64_t> largest;
  /// Where the input sits among the ONNX graph's inputs (input_N.pb).
  unsigned graphPosition = 0;
  /// What the model takes there, so that random inputs make sense.
  InputValues values;
};

struct Signature {
  std::string entry;
  std::vector<Port> inputs, outputs;
  unsigned numGraphInputs = 0;
};

/// The signature of a tfm function; reports and fails on types that cannot
/// be fed.
std::optional<Signature> signatureOf(mlir::func::FuncOp fn);

using Evaluate = std::function<std::optional<std::vector<reference::Tensor>>(
    const std::vector<reference::Tensor> &)>;

/// Gathers the inputs of `sig`, evaluates them, and prints, writes or
/// compares the outputs. `inputsOut`, when given, receives the inputs.
/// Returns an ExitCode.
int runWith(const Signature &sig, const RunOptions &options,
            const Evaluate &evaluate,
            std::vector<reference::Tensor> *inputsOut = nullptr);

/// Evaluates `fn` with the reference interpreter and prints, writes or
/// compares its outputs. Returns an ExitCode.
int runReference(mlir::ModuleOp module, mlir::func::FuncOp fn,
                 const RunOptions &options);

/// How `tfmc compile` lowers a model and writes the artifact.
struct CompileOptions {
  CompilerOptions compiler;
  ArtifactOptions artifact;
  /// Show the stage and pass being run, redrawn in place (on a terminal).
  bool progress = false;
};

/// The timer of the whole command (--mlir-timing): started once the
/// options are parsed, printed by reportCommandTiming when the command
/// ends; the import, the passes and the code generation nest under it.
mlir::TimingScope &commandTiming();
void startCommandTiming();
void reportCommandTiming();

/// Lowers `module` (tfm on tensors) to `stage` and writes it to `output`
/// ('-' for stdout; text stages only). Reports errors; returns an ExitCode.
int compileTo(mlir::ModuleOp module, Stage stage, llvm::StringRef output,
              const CompileOptions &options);

/// Runs the model library at `soPath` through the runtime. `known`, when
/// given, is the signature of the function it was compiled from (it knows
/// the ONNX input numbering); else the library's metadata gives it.
/// Returns an ExitCode.
/// `tfmc inspect` on a compiled library: its entries with their inputs
/// and outputs (dtypes, shapes or ranges), as text or JSON.
int inspectCompiled(llvm::StringRef soPath, bool json);

int runCompiled(llvm::StringRef soPath, const RunOptions &options,
                const Signature *known = nullptr);

/// A model library loaded through the runtime with one session, to run its
/// entries on the interpreter's tensors: what `tfmc run` and the check of
/// `tfmc compile --quantize` run compiled code through.
class CompiledModel {
public:
  /// Loads `soPath` on `device` with `threads` (0: the runtime's choice);
  /// null, with the runtime's message printed, on failure.
  static std::unique_ptr<CompiledModel> load(llvm::StringRef soPath,
                                             int32_t threads,
                                             const std::string &device,
                                             bool profile = false,
                                             bool allowTF32 = false);
  ~CompiledModel();
  /// `requested` where given, else "infer", else the only entry; "" (and
  /// an error printed) when none is.
  std::string entryNamed(llvm::StringRef requested) const;
  /// The entry's inputs and outputs from the library's metadata; printed
  /// and std::nullopt when they cannot be held.
  std::optional<Signature> signature(const std::string &entry) const;
  /// Runs `sig.entry` on `args`; std::nullopt, with the message printed,
  /// on failure.
  std::optional<std::vector<reference::Tensor>>
  run(const Signature &sig, const std::vector<reference::Tensor> &args);

  tfm_context_t *context = nullptr;
  tfm_module_t *module = nullptr;
  tfm_session_t *session = nullptr;

private:
  CompiledModel() = default;
  std::string path;
};

/// Reads the inputs of `sig` from --input files and --test-data-dir, the
/// rest random as each input's values make sense (token ids below the
/// vocabulary, masks of ones) from `options.seed`; reports and fails on a
/// file that does not fit.
bool gatherInputs(const Signature &sig, const RunOptions &options,
                  std::vector<reference::Tensor> &out);

/// Prints the summary of `tfmc inspect` (text, or JSON with `json`) to `os`.
int runInspect(mlir::ModuleOp module, bool json, llvm::raw_ostream &os);

/// A fusion site as a fusion pass reported it: where, and whether it fused.
struct FusionSite {
  std::string kind; // qkv, masked-softmax, ...
  mlir::Location loc;
  std::string reason; // why it was missed
  bool fused;
};

/// What `tfmc compile --quantize` did: the layers tfm-quantize quantized
/// and those it kept float, and how far each output of the quantized
/// library is from the float model's on the same inputs.
struct QuantizationReport {
  QuantizeMode mode = QuantizeMode::None;
  int64_t blockSize = 0;
  bool sevenBit = false; // int8 weights within 7 bits (no VNNI)
  int64_t quantized = 0;
  std::vector<FusionSite> kept; // with the reason
  struct Output {
    std::string name;
    std::vector<int64_t> shape;
    double relL2 = 0, maxAbs = 0, largest = 0; // float outputs
    /// The rows (all axes but the last) whose argmax over the last axis
    /// agrees, for a float output of rank >= 2.
    std::optional<double> argmaxAgreement;
    int64_t rows = 0;
    std::optional<double> equal; // an integer output's equal share
    std::string note;            // why it is not compared
  };
  std::vector<Output> outputs;
  std::string entry, inputs;
  std::string notMeasured; // why `outputs` is empty
};

/// Compiles `floatModule` (the model as imported) as `options` say but
/// without quantization, runs it and `quantizedSo` on the CPU on the same
/// inputs (`inputs`' --input files, else random ones), and fills
/// `report.outputs`. Reports and fails when a step does.
bool measureQuantizationError(mlir::ModuleOp floatModule,
                              llvm::StringRef quantizedSo,
                              const CompileOptions &options,
                              const RunOptions &inputs,
                              QuantizationReport &report);

/// The report as tfmc prints it on stderr, and as the JSON fusion report's
/// "quantization" member.
void printQuantizationReport(llvm::raw_ostream &os,
                             const QuantizationReport &report);
llvm::json::Object quantizationReportJson(const QuantizationReport &report);

/// The kernel an op got on the GPU as tfm-lower-to-gpu reported it, or a
/// GEMM's generated kernel as tfm-tile-gpu-matmul did (`gemm`; its `op` is
/// "gemm"), and the better kernel it missed, with the reason (both empty
/// when none).
struct KernelSite {
  std::string op, kernel, better, reason;
  mlir::Location loc;
  bool gemm = false;
};

/// Collects the fusion passes' remarks ("tfm-fuse-qkv: fused", "...:
/// missed: <reason>") into `sites` while it lives, and the GPU lowering's
/// kernel remarks and the generated GEMMs' into `kernels` where given;
/// other diagnostics pass.
class FusionRemarkCollector {
public:
  FusionRemarkCollector(mlir::MLIRContext *context,
                        std::vector<FusionSite> &sites,
                        std::vector<KernelSite> *kernels = nullptr);

private:
  mlir::ScopedDiagnosticHandler handler;
};

/// Writes the entries of `module` (after fusion) as a Graphviz digraph of
/// the model: nodes named by the ONNX nodes they came from, fused ops with
/// every node they absorbed, missed sites outlined with their reason.
void writeModelGraph(mlir::ModuleOp module, llvm::StringRef title,
                     llvm::ArrayRef<FusionSite> sites, llvm::raw_ostream &os);

/// How `tfmc train` runs.
struct TrainOptions {
  bool quiet = false; // no progress bar
  std::string dataDir;
  unsigned steps = 1;
  int32_t threads = 0;
  std::string device;         // empty: what the model was compiled for
  std::string checkpoint;     // saved at the end (and every N steps)
  unsigned checkpointEvery = 0;
  std::string resume;         // a checkpoint to start from
  std::string exportOnnx;     // write the trained model here
  std::string onnxModel;      // ... as a copy of this one
  // The label the loss skips: what a rank's part of a batch is padded
  // with where the ranks' parts differ in size.
  int64_t ignoreIndex = -100;
};

/// Which rows of each batch this process trains on in a data-parallel run:
/// rank `rank` of `size` takes its part of every batch's rows (the first
/// axis of the labels, and of each input with as many), the parts as even
/// as can be, padded to the compiled batch with labels the loss skips.
struct BatchShard {
  int32_t rank = 0, size = 1;
  int64_t ignoreIndex = -100;
};

/// Reads the batches of `dir` (see Train.cpp) as arguments of `sig`, this
/// process's part of each where `shard` says so.
bool readTrainingData(const Signature &sig, llvm::StringRef dir,
                      std::vector<std::vector<reference::Tensor>> &out,
                      const BatchShard &shard = {});

/// The MPI job this process was started in (mpirun), if any: its rank,
/// size and communicator for the runtime. Finalizes MPI when destroyed.
struct DataParallel {
  int32_t rank = 0, size = 1;
  /// MPI's (joined), and NCCL's for a session on a GPU (hasNccl).
  tfm_communicator_t communicator{}, nccl{};
  bool joined = false, hasNccl = false;
  /// The job was described by TFM_WORLD_SIZE and TFM_RANK, not MPI.
  bool byEnvironment = false;
  /// Joins the job when MPI started this process, or takes its place from
  /// the environment; false, with an error printed, when that fails or
  /// tfmc was built without Open MPI.
  bool join();
  /// Whether this process is one rank of a job (even a job of one, as
  /// TFM_WORLD_SIZE=1 makes).
  bool distributed() const { return size > 1 || byEnvironment; }
  /// The threads a rank's session runs on: `requested` where given (not
  /// 0), else in a job this machine's hardware threads shared out among
  /// its ranks (the launcher's local size), so that ranks on one machine
  /// do not take turns on its cores; 0 (the runtime's choice) otherwise.
  int32_t threads(int32_t requested) const;
  /// The --device to open: in a job, `cuda` is this rank's GPU on its
  /// machine (its local rank); anything else as given.
  std::string gpu(const std::string &device) const;
  /// Makes the communicator over NCCL when `session` runs on a GPU (its id
  /// shared over MPI, or at the environment's rendezvous); false, with an
  /// error printed, when that fails, or when a job without MPI runs on the
  /// CPU.
  bool joinOnDevice(tfm_session_t *session);
  /// What the session gets: NCCL's on a GPU, else MPI's.
  const tfm_communicator_t *sessionCommunicator() const;
  /// Ends every rank of the job with `code` (a failed rank), so none waits
  /// for the others; returns `code` in one process.
  int abortJob(int code);
  ~DataParallel();
};

/// Prints one step's loss, and a progress bar on a terminal.
void reportStep(unsigned step, unsigned steps, double loss, double seconds,
                bool bar);

/// Trains the library at `soPath` (compiled with --train) through the
/// runtime; `known` gives the ONNX input numbering. Returns an ExitCode.
int trainCompiled(llvm::StringRef soPath, const TrainOptions &options,
                  const Signature *known = nullptr);

/// Trains with the reference interpreter. Returns an ExitCode.
int trainReference(mlir::func::FuncOp trainStep, const TrainOptions &options);

} // namespace mlir::tfm::tfmc

#endif // TFM_TOOLS_TFMC_DRIVER_H
