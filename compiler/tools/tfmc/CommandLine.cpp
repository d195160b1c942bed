//===- CommandLine.cpp - tfmc's flags, read once per subcommand ----------===//
//
// `tfmc SUBCOMMAND [options] MODEL`. Each subcommand owns an option category;
// options of another subcommand are a usage error rather than silently
// ignored. The flags are read here into the subcommand's struct, whose
// validate() checks them against one table of where each applies.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"

#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Frontends/ONNX/Importer.h"
#include "tfm/version.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <memory>
#include <thread>

using namespace mlir;
using namespace mlir::tfm::tfmc;
namespace cl = llvm::cl;
using mlir::tfm::Stage;

namespace {

struct Subcommand {
  const char *name;
  const char *summary;
  cl::OptionCategory *category;
  // Categories it shares with other subcommands.
  cl::OptionCategory *shared = nullptr, *shared2 = nullptr;
};

cl::OptionCategory modelCat("Model");
cl::OptionCategory compileCat("tfmc compile options");
cl::OptionCategory runCat("tfmc run options");
cl::OptionCategory inspectCat("tfmc inspect options");
cl::OptionCategory trainCat("tfmc train options");
cl::OptionCategory
    trainingCat("Training step (tfmc train, and tfmc compile --train)");
cl::OptionCategory generateCat("tfmc generate options");
cl::OptionCategory generationCat(
    "Generation entries (tfmc compile --generate, and tfmc generate of a "
    "model file)");

cl::opt<std::string> inputFile(cl::Positional,
                               cl::desc("<model.onnx|model.mlir>"),
                               cl::cat(modelCat));
cl::list<std::string> shapes(
    "shape",
    cl::desc("Fix an ONNX input's dynamic dimensions (NAME=2x128), or a "
             "dimension symbol's size wherever it appears (batch=2), or a "
             "range of sizes that one artifact serves (sequence=1..512)"),
    cl::value_desc("NAME=2x128|SYMBOL=N|SYMBOL=LO..HI"), cl::cat(modelCat));
cl::opt<unsigned> bucketsPerOctave(
    "buckets-per-octave",
    cl::desc("With a range of sizes (--shape SYMBOL=LO..HI): the compiled "
             "sizes per doubling above 16, so a run pads by at most a factor "
             "of 1 + 1/N (default 8; several ranges: as many as keep them "
             "within 64 buckets)"),
    cl::value_desc("N"), cl::init(8), cl::cat(modelCat));
cl::list<std::string> binds(
    "bind",
    cl::desc("Fix the value of an ONNX input at compile time: one that "
             "gives a shape (Reshape's shape, Slice's starts, ...), or any "
             "other, which becomes a constant of the model"),
    cl::value_desc("NAME=FILE.pb"), cl::cat(modelCat));

//===-- compile ----------------------------------------------------------===//

using Emit = mlir::tfm::Stage;

cl::opt<Emit>
    emit("emit",
         cl::desc("The stage to write (default: from -o's extension: .so, .o, "
                  ".ll; else tfm)"),
         cl::init(Emit::tfm),
         cl::values(clEnumValN(Emit::tfm, "tfm", "the tfm dialect as imported"),
                    clEnumValN(Emit::fused, "fused", "tfm after fusion"),
                    clEnumValN(Emit::linalg, "linalg",
                               "on buffers: oneDNN kernel calls and linalg"),
                    clEnumValN(Emit::llvm, "llvm",
                               "the artifact's LLVM IR, optimized"),
                    clEnumValN(Emit::ptx, "ptx", "PTX for --target=cuda"),
                    clEnumValN(Emit::obj, "obj", "the artifact's object file"),
                    clEnumValN(Emit::so, "so", "the shared-library artifact")),
         cl::cat(compileCat));
cl::opt<bool> externalWeights(
    "external-weights",
    cl::desc("Write the weights beside the library (OUT.weights) instead of "
             "into it"),
    cl::cat(compileCat));
cl::opt<std::string> targetCpu(
    "cpu",
    cl::desc("The CPU to generate glue code for: 'native' (this machine; "
             "the library refuses to load on a CPU without its features), a "
             "portable level (x86-64-v2, x86-64-v3, x86-64-v4) or an x86-64 "
             "CPU's name"),
    cl::init("native"), cl::cat(compileCat));
/// --target's values, naming them all when the one given is unknown.
struct TargetParser : cl::parser<mlir::tfm::Target> {
  using cl::parser<mlir::tfm::Target>::parser;
  bool parse(cl::Option &option, StringRef, StringRef arg,
             mlir::tfm::Target &value) {
    std::string names;
    for (size_t i = 0; i < Values.size(); ++i) {
      if (Values[i].Name == arg) {
        value = Values[i].V.getValue();
        return false;
      }
      names += (i == 0                   ? ""
                : i + 1 == Values.size() ? " and "
                                         : ", ") +
               Values[i].Name.str();
    }
    return option.error("unknown target '" + arg + "'; the targets are " +
                        names);
  }
};
cl::opt<mlir::tfm::Target, false, TargetParser> target(
    "target", cl::desc("What to generate code for"),
    cl::init(mlir::tfm::Target::CPU),
    cl::values(clEnumValN(mlir::tfm::Target::CPU, "cpu",
                          "this machine's CPU, with oneDNN kernels"),
               clEnumValN(mlir::tfm::Target::CUDA, "cuda",
                          "an NVIDIA GPU: kernels as PTX, which the runtime "
                          "loads through the CUDA driver")),
    cl::cat(compileCat));
cl::opt<std::string> gpuArch(
    "gpu-arch",
    cl::desc("The GPU architecture --target=cuda (or run's --device=cuda) "
             "builds for: sm_80, sm_86, sm_89, sm_90 or sm_90a (an H100 or "
             "H200 with its warpgroup instructions: the generated 16-bit "
             "GEMMs use wgmma; the code runs on those GPUs only)"),
    cl::init("sm_80"), cl::cat(compileCat), cl::cat(runCat), cl::cat(trainCat),
    cl::cat(generateCat));
cl::opt<bool> gpuTma(
    "gpu-tma",
    cl::desc("With --gpu-arch=sm_90a: load the generated GEMMs' tiles by TMA "
             "(tensor maps the runtime makes), where their operands allow; "
             "--gpu-tma=false copies them with cp.async"),
    cl::init(true), cl::cat(compileCat), cl::cat(runCat), cl::cat(trainCat),
    cl::cat(generateCat));
cl::opt<bool> gpuScheduleOnCPU(
    "gpu-schedule-on-cpu",
    cl::desc("With --target=cuda (compile) or --device=cuda (run, train, "
             "generate): run the kernels' schedule of blocks and threads as "
             "serial loops on this CPU instead of compiling PTX; a test of "
             "the GPU schedule on a machine without one"),
    cl::Hidden, cl::cat(compileCat), cl::cat(runCat), cl::cat(trainCat),
    cl::cat(generateCat));
cl::opt<bool> reverseGrid(
    "reverse-grid",
    cl::desc("With --gpu-schedule-on-cpu: run each grid's blocks and threads "
             "in descending order, so that a kernel whose threads read each "
             "other's writes (a race on a GPU) gives another result"),
    cl::Hidden, cl::cat(compileCat), cl::cat(runCat), cl::cat(trainCat),
    cl::cat(generateCat));
cl::opt<mlir::tfm::ComputeType>
    dtype("dtype",
          cl::desc("The type the linear layers multiply in (f32 accumulation; "
                   "inputs and outputs stay f32); for run and generate, how "
                   "a model file is compiled"),
          cl::init(mlir::tfm::ComputeType::F32), mlir::tfm::computeTypeValues(),
          cl::cat(compileCat), cl::cat(runCat), cl::cat(generateCat));
cl::opt<mlir::tfm::QuantizeMode> quantizeOpt(
    "quantize",
    cl::desc("Quantize the float linear layers' weights: int8 (per output "
             "feature, inputs quantized at run time) or int4 (weight-only, "
             "in blocks along K, for decoding); compile reports the error "
             "against f32 per output"),
    cl::init(mlir::tfm::QuantizeMode::None), mlir::tfm::quantizeModeValues(),
    cl::cat(compileCat), cl::cat(runCat), cl::cat(generateCat));
cl::opt<int64_t> quantizeBlockSizeOpt(
    "quantize-block-size",
    cl::desc("With --quantize=int4: the weights along K that share a scale "
             "and a zero point (a multiple of 16; 32 or 128 are usual)"),
    cl::init(32), cl::cat(compileCat), cl::cat(runCat), cl::cat(generateCat));
cl::opt<bool> quantizeCheckOpt(
    "quantize-check",
    cl::desc("With --quantize and --emit=so: also compile the float model "
             "and report how far each output of the quantized one is from "
             "it, on the --input files or random inputs (default on)"),
    cl::init(true), cl::cat(compileCat));
cl::opt<std::string> fusionReport(
    "fusion-report",
    cl::desc("Report every fusion site, fused or missed with the reason, "
             "and with --target=cuda the kernel each op gets (=json for "
             "tools)"),
    cl::value_desc("text|json"), cl::ValueOptional, cl::cat(compileCat));
cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(compileCat));

//===-- generation -------------------------------------------------------===//

cl::opt<bool> generateFlag(
    "generate",
    cl::desc("Also compile @prefill and @decode_step, which extend a "
             "sequence with a KV cache the compiler derives (a causal "
             "language model: token ids in, logits out)"),
    cl::cat(compileCat));
cl::opt<int64_t> maxLengthOpt(
    "max-length",
    cl::desc("With --generate: the longest sequence; the token ids' dynamic "
             "sequence takes it (tfmc generate of a model file: the prompt "
             "and --max-new-tokens by default), a fixed one must equal it"),
    cl::value_desc("N"), cl::init(0), cl::cat(generationCat));
cl::opt<int64_t> prefillChunkOpt(
    "prefill-chunk",
    cl::desc("With --generate: the prompt tokens @prefill takes at once"),
    cl::value_desc("N"), cl::init(32), cl::cat(generationCat));

cl::list<int64_t> promptIds("prompt-ids", cl::desc("The prompt's token ids"),
                            cl::value_desc("ID,..."), cl::CommaSeparated,
                            cl::cat(generateCat));
cl::opt<int64_t> maxNewTokens("max-new-tokens",
                              cl::desc("The most tokens to generate"),
                              cl::value_desc("N"), cl::init(16),
                              cl::cat(generateCat));
cl::opt<int64_t> beamOpt(
    "beam",
    cl::desc("Beam search with K hypotheses (at most the batch the model was "
             "compiled with); prints the K best, best first"),
    cl::value_desc("K"), cl::init(1), cl::cat(generateCat));
cl::opt<double> lengthPenaltyOpt(
    "length-penalty",
    cl::desc("alpha of the length penalty ((5 + |Y|) / 6)^alpha (0.6 in the "
             "Transformer paper; default 0: none)"),
    cl::value_desc("A"), cl::init(0.0), cl::cat(generateCat));
cl::opt<int64_t> endTokenOpt("end-token",
                             cl::desc("The token that ends a sequence"),
                             cl::value_desc("ID"), cl::init(-1),
                             cl::cat(generateCat));
cl::opt<double> temperatureOpt("temperature",
                               cl::desc("Sample, with this temperature"),
                               cl::value_desc("T"), cl::init(1.0),
                               cl::cat(generateCat));
cl::opt<int64_t> topKOpt("top-k",
                         cl::desc("Sample among the K most likely tokens"),
                         cl::value_desc("K"), cl::init(0),
                         cl::cat(generateCat));
cl::opt<double> topPOpt(
    "top-p",
    cl::desc("Sample among the fewest most likely tokens whose probability "
             "reaches P"),
    cl::value_desc("P"), cl::init(1.0), cl::cat(generateCat));
cl::list<int64_t> sourceIds(
    "source-ids", cl::desc("The source sentence of an encoder-decoder"),
    cl::value_desc("ID,..."), cl::CommaSeparated, cl::cat(generateCat));

//===-- training ---------------------------------------------------------===//

cl::opt<bool> trainFlag(
    "train",
    cl::desc("Also compile @train_step: the loss, its gradients and an "
             "optimizer step (see the training options)"),
    cl::cat(compileCat));
// The training options, from the one list of them (TrainingOptions.def).
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  cl::opt<TYPE> MEMBER##Opt(FLAG, cl::desc(DESCRIPTION), cl::init(DEFAULT),    \
                            cl::cat(trainingCat));
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  cl::list<TYPE> MEMBER##Opt(FLAG, cl::desc(DESCRIPTION),                      \
                             cl::value_desc("NAME,..."), cl::CommaSeparated,   \
                             cl::cat(trainingCat));
#include "tfm/Transforms/TrainingOptions.def"

cl::opt<std::string>
    dataOpt("data",
            cl::desc("Batches: input_N.pb and labels.pb, or folders of them"),
            cl::value_desc("dir"), cl::cat(trainCat));
cl::opt<unsigned> stepsOpt("steps", cl::desc("Training steps to run"),
                           cl::value_desc("N"), cl::init(1), cl::cat(trainCat));
cl::opt<std::string> checkpointOpt(
    "checkpoint",
    cl::desc("Save the parameters and optimizer state here at the end (and "
             "every --checkpoint-every steps)"),
    cl::value_desc("file"), cl::cat(trainCat));
cl::opt<unsigned>
    checkpointEveryOpt("checkpoint-every",
                       cl::desc("Also save the checkpoint every N steps"),
                       cl::value_desc("N"), cl::init(0), cl::cat(trainCat));
cl::opt<std::string>
    resumeOpt("resume", cl::desc("Start from a checkpoint of the same model"),
              cl::value_desc("file"), cl::cat(trainCat));
cl::opt<std::string> exportOnnxOpt(
    "export-onnx",
    cl::desc("Write the ONNX model with its initializers set to the trained "
             "parameters (compile that for inference)"),
    cl::value_desc("file.onnx"), cl::cat(trainCat));

/// The training options as given on the command line; `error` says what
/// is wrong with them.
mlir::tfm::TrainingOptions trainingOptions(std::string &error) {
  mlir::tfm::TrainingOptions o;
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  o.MEMBER = MEMBER##Opt;
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  o.MEMBER.assign(MEMBER##Opt.begin(), MEMBER##Opt.end());
#include "tfm/Transforms/TrainingOptions.def"
  if (failed(o.parseSchedule(error)))
    error = "--lr-schedule: " + error;
  return o;
}

//===-- run --------------------------------------------------------------===//

cl::opt<bool> useReference(
    "reference",
    cl::desc("Evaluate with the reference interpreter (double precision)"),
    cl::cat(runCat), cl::cat(trainCat));
cl::opt<std::string> testDataDir(
    "test-data-dir",
    cl::desc("Read input_N.pb and compare with output_N.pb (ONNX layout); "
             "a model folder runs each test_data_set_N in it"),
    cl::value_desc("dir"), cl::cat(runCat));
cl::list<std::string> inputs(
    "input",
    cl::desc("Feed input NAME from a .pb (compile --quantize: the inputs the "
             "error is measured on)"),
    cl::value_desc("NAME=FILE.pb"), cl::cat(runCat), cl::cat(compileCat));
cl::opt<std::string> outputDir("output-dir",
                               cl::desc("Write outputs as output_N.pb"),
                               cl::value_desc("dir"), cl::cat(runCat));
cl::opt<uint64_t>
    seed("seed",
         cl::desc("Seed of the random inputs (run, and compile --quantize's "
                  "check), or of sampling, which it turns on (generate): the "
                  "same seed draws the same tokens"),
         cl::init(0), cl::cat(runCat), cl::cat(generateCat),
         cl::cat(compileCat));
cl::opt<double> rtol("rtol", cl::desc("Relative tolerance of the comparison"),
                     cl::init(1e-4), cl::cat(runCat));
cl::opt<double> atol("atol", cl::desc("Absolute tolerance of the comparison"),
                     cl::init(1e-5), cl::cat(runCat));
cl::opt<double> relL2(
    "rel-l2",
    cl::desc("Judge float outputs by their normwise relative error "
             "||got - expected|| / ||expected|| <= E instead of rtol/atol"),
    cl::value_desc("E"), cl::init(-1), cl::cat(runCat));
cl::opt<std::string> entry("entry",
                           cl::desc("Function to run (default: @infer, or "
                                    "the only public function)"),
                           cl::value_desc("name"), cl::cat(runCat),
                           cl::cat(compileCat));
cl::opt<unsigned>
    bench("bench",
          cl::desc("After the checked run, time N runs and print the median "
                   "latency (generate: of the prompt and per token)"),
          cl::value_desc("N"), cl::init(0), cl::cat(runCat),
          cl::cat(generateCat));
// libLLVM registers a hidden --threads of its own, which tfmc does not
// use; main() removes it and then creates this one under the contract's name.
std::unique_ptr<cl::opt<int>> threads;
void registerThreadsOption() {
  auto &registered = cl::getRegisteredOptions();
  if (auto it = registered.find("threads"); it != registered.end())
    it->second->removeArgument();
  threads = std::make_unique<cl::opt<int>>(
      "threads",
      cl::desc("Threads for the kernels (0: every hardware thread, or under "
               "mpirun this machine's shared out among its ranks)"),
      cl::value_desc("N"), cl::init(0), cl::cat(runCat), cl::cat(trainCat),
      cl::cat(generateCat));
}
cl::opt<std::string> device(
    "device",
    cl::desc("The device to run on: cpu, cuda (the first GPU) or cuda:N. A "
             "model file is compiled for it; a compiled one must have been "
             "compiled for it (default: what it was compiled for)"),
    cl::value_desc("DEVICE"), cl::cat(runCat), cl::cat(trainCat),
    cl::cat(generateCat));
cl::opt<bool> quietOpt(
    "quiet",
    cl::desc("No progress line while compiling, and no progress bar while "
             "training (both only ever appear on a terminal)"),
    cl::cat(compileCat), cl::cat(runCat), cl::cat(trainCat),
    cl::cat(generateCat));
cl::opt<int64_t> parallelGlueIterations(
    "parallel-glue-iterations",
    cl::desc("The iterations a loop nest of generated code needs to run on "
             "the session's threads (0: none does); lower values are a test "
             "of the parallel glue"),
    cl::init(65536), cl::Hidden, cl::cat(compileCat), cl::cat(runCat),
    cl::cat(trainCat), cl::cat(generateCat));
cl::opt<std::string> profileOpt(
    "profile",
    cl::desc("Time every kernel call of the compiled runs and write the "
             "profile to FILE: a trace viewers open (Chrome trace events) "
             "when FILE ends in .json, else the table; - for stderr"),
    cl::value_desc("FILE"), cl::cat(runCat));
cl::opt<bool> allowTF32(
    "allow-tf32",
    cl::desc("On a GPU, multiply f32 GEMMs in TF32 on the tensor cores "
             "(10-bit mantissa operands, f32 accumulation); f32 runs as f32 "
             "without it"),
    cl::cat(runCat));
cl::opt<unsigned> printLimit("print-limit",
                             cl::desc("Values printed per output"),
                             cl::init(16), cl::cat(runCat));

//===-- inspect ----------------------------------------------------------===//

cl::opt<bool> inspectJson("json", cl::desc("Print the summary as JSON"),
                          cl::cat(inspectCat));
cl::opt<std::string> dotFile(
    "dot",
    cl::desc("Also write the model's graph after fusion as Graphviz, by ONNX "
             "node, with fused ops and missed fusions ('-': stdout, and the "
             "summary goes to stderr)"),
    cl::value_desc("file"), cl::cat(inspectCat));

const Subcommand kSubcommands[] = {
    {"compile", "compile a model; --emit selects the stage to write",
     &compileCat, &trainingCat, &generationCat},
    {"run",
     "run a model (compiled, or with --reference the interpreter) and "
     "print, write or check its outputs",
     &runCat},
    {"train",
     "train a model: run @train_step over a folder of batches (under "
     "mpirun -np N, on N processes, each on its rows of every batch)",
     &trainCat, &trainingCat},
    {"generate",
     "extend a prompt with a model compiled with --generate: "
     "greedy, beam search or sampling",
     &generateCat, &generationCat},
    {"inspect", "summarize a model after fusion: ops, parameters, FLOPs",
     &inspectCat},
};

/// What every subcommand that compiles starts from.
CompileOptions compileOptions() {
  CompileOptions options;
  options.progress = !quietOpt;
  options.artifact.producer = "tfmc " TFM_VERSION_STRING;
  options.compiler.parallelGlueIterations = parallelGlueIterations;
  options.compiler.quantize = quantizeOpt;
  options.compiler.quantizeBlockSize = quantizeBlockSizeOpt;
  return options;
}

/// int8 weights within 7 bits where the library's CPU has no VNNI, whose
/// 16-bit pair sums would saturate on full ones (docs/quantization.md).
void chooseInt8WeightBits(CompileOptions &options) {
  const std::string &cpu = options.artifact.cpu;
  options.compiler.quantizeSevenBit =
      options.compiler.quantize == mlir::tfm::QuantizeMode::Int8 &&
      options.compiler.target == mlir::tfm::Target::CPU &&
      !mlir::tfm::targetCpuHas(cpu, "avx512vnni") &&
      !mlir::tfm::targetCpuHas(cpu, "avxvnni");
}

void printUsage(llvm::raw_ostream &os) {
  os << "OVERVIEW: tfm, a compiler for Transformer models\n\n"
        "USAGE: tfmc <subcommand> [options] <model>\n\nSUBCOMMANDS:\n";
  for (const Subcommand &s : kSubcommands)
    os << "  " << llvm::left_justify(s.name, 9) << s.summary << "\n";
  os << "\nRun 'tfmc <subcommand> --help' for the options of one, and\n"
        "'tfmc --list-onnx-ops' for the ONNX op types the importer supports.\n"
        "Exit codes: 0 ok, 1 the input or model is at fault, 2 usage, "
        "3 outputs did not match.\n";
}

/// Rejects options that belong to another subcommand's category.
bool checkForeignOptions(const Subcommand &active) {
  bool ok = true;
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *opt = entry.second;
    if (opt->getNumOccurrences() == 0)
      continue;
    if (llvm::is_contained(opt->Categories, active.category) ||
        (active.shared && llvm::is_contained(opt->Categories, active.shared)) ||
        (active.shared2 && llvm::is_contained(opt->Categories, active.shared2)))
      continue;
    // Once per option, naming every subcommand it belongs to.
    SmallVector<std::string> owners;
    for (const Subcommand &s : kSubcommands) {
      if (!s.category || &s == &active)
        continue;
      if (llvm::is_contained(opt->Categories, s.category) ||
          (s.shared && llvm::is_contained(opt->Categories, s.shared)) ||
          (s.shared2 && llvm::is_contained(opt->Categories, s.shared2)))
        owners.push_back("'tfmc " + std::string(s.name) + "'");
    }
    if (owners.empty())
      continue;
    std::string list = owners.back();
    if (owners.size() > 1)
      list = llvm::join(ArrayRef(owners).drop_back(), ", ") + " and " + list;
    error() << "option '--" << opt->ArgStr << "' belongs to " << list
            << ", not to 'tfmc " << active.name << "'\n";
    ok = false;
  }
  return ok;
}

/// Prints a diagnostic about an ONNX model as `FILE: node 'N' (OpType):
/// error: message`, naming the node from its location.

/// The first bytes of `path` (up to 512), or none where it cannot be read
/// (the readers that open it later say why).
std::optional<std::string> headOf(StringRef path) {
  llvm::Expected<llvm::sys::fs::file_t> fd =
      llvm::sys::fs::openNativeFileForRead(path);
  if (!fd) {
    llvm::consumeError(fd.takeError());
    return std::nullopt;
  }
  char head[512];
  llvm::Expected<size_t> got = llvm::sys::fs::readNativeFileSlice(
      *fd, llvm::MutableArrayRef<char>(head, sizeof(head)), 0);
  llvm::sys::fs::closeFile(*fd);
  if (!got) {
    llvm::consumeError(got.takeError());
    return std::nullopt;
  }
  return std::string(head, *got);
}

/// What the file holds, judged by its first bytes rather than its name, so
/// `Model.ONNX`, `model.pb` or a library without `.so` are read as what they
/// are: an ELF header is a compiled model, text is MLIR, and anything else
/// is handed to the ONNX reader (a ModelProto starts with a binary field
/// tag), which reports a file that is not one. Unreadable files count as
/// MLIR, whose reader reports why it cannot open them. checkModelFile has
/// refused the names that contradict their contents.
ModelFormat formatOf(StringRef bytes) {
  if (bytes.empty())
    return ModelFormat::mlir;
  if (bytes.starts_with("\x7f"
                        "ELF"))
    return ModelFormat::library;
  if (bytes.starts_with("ML\xefR")) // MLIR bytecode
    return ModelFormat::mlir;
  for (unsigned char c : bytes)
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t')
      return ModelFormat::onnx;
  return ModelFormat::mlir;
}

//===-- where each flag applies ------------------------------------------===//

/// What decides whether a flag applies.
struct Situation {
  StringRef subcommand;
  std::string file;
  bool compiled = false; // the model is a compiled library
  bool onnx = false;     // ... an ONNX model
  bool reference = false;
  /// compile: --target=cuda; run, train and generate: --device=cuda[:N].
  bool gpu = false;
  bool scheduleOnCPU = false;
  Stage stage = Stage::so; // compile's
  bool generate = false;   // compile --generate
  bool sampling = false;   // generate's
  mlir::tfm::QuantizeMode quantize = mlir::tfm::QuantizeMode::None;
};

/// Where some flags apply: given any of `flags` to one of `subcommands`,
/// `applies` must hold, else `message` (the model file as {0}) is the
/// usage error.
struct FlagRule {
  SmallVector<StringRef, 4> subcommands;
  SmallVector<cl::Option *, 4> flags;
  bool (*applies)(const Situation &);
  const char *message;
};

/// The table, built once the options exist (--threads is registered at
/// start-up).
const std::vector<FlagRule> &flagRules() {
  static const std::vector<FlagRule> rules = [] {
    SmallVector<cl::Option *, 4> trainingFlags{
        &useReference, std::addressof(shapes), std::addressof(binds)};
    for (auto &entry : cl::getRegisteredOptions())
      if (llvm::is_contained(entry.second->Categories, &trainingCat))
        trainingFlags.push_back(entry.second);
    const SmallVector<StringRef, 4> all{"compile", "run", "train", "generate",
                                        "inspect"};
    const SmallVector<StringRef, 4> runners{"run", "train", "generate"};
    return std::vector<FlagRule>{
        // What the compile target and stage take.
        {{"compile"},
         {&dtype},
         [](const Situation &s) {
           return s.stage != Stage::tfm && s.stage != Stage::fused;
         },
         "--dtype applies when lowering (--emit=linalg or later)"},
        {{"compile"},
         {&fusionReport},
         [](const Situation &s) { return s.stage != Stage::tfm; },
         "--fusion-report needs --emit=fused (or a later stage)"},
        {{"compile"},
         {&quantizeOpt},
         [](const Situation &s) { return s.stage != Stage::tfm; },
         "--quantize applies when compiling past the import (--emit=fused "
         "or later)"},
        {{"compile", "run", "generate"},
         {&quantizeBlockSizeOpt},
         [](const Situation &s) {
           return s.quantize == mlir::tfm::QuantizeMode::Int4;
         },
         "--quantize-block-size applies to --quantize=int4"},
        {{"compile"},
         {&quantizeCheckOpt, std::addressof(inputs), &seed, &entry},
         [](const Situation &s) {
           return s.quantize != mlir::tfm::QuantizeMode::None &&
                  s.stage == Stage::so && !s.gpu;
         },
         "--quantize-check, --input, --seed and --entry apply to --quantize "
         "with --emit=so for the CPU, where the quantized library runs "
         "beside the float one"},
        {runners,
         {&quantizeOpt},
         [](const Situation &s) { return !s.compiled; },
         "--quantize applies when a model file is compiled; '{0}' is "
         "already compiled"},
        {{"run"},
         {&quantizeOpt},
         [](const Situation &s) { return !s.reference; },
         "--quantize applies to compiled code, not to --reference"},
        {{"compile"},
         {&externalWeights},
         [](const Situation &s) { return s.stage == Stage::so; },
         "--external-weights applies to --emit=so"},
        {{"compile"},
         {&maxLengthOpt, &prefillChunkOpt},
         [](const Situation &s) { return s.generate; },
         "--max-length and --prefill-chunk apply to --generate"},
        {{"compile"},
         {&gpuArch},
         [](const Situation &s) { return s.gpu; },
         "--gpu-arch applies to --target=cuda"},
        {{"compile"},
         {&gpuScheduleOnCPU},
         [](const Situation &s) { return s.gpu; },
         "--gpu-schedule-on-cpu applies to --target=cuda"},
        {{"compile"},
         {&gpuTma},
         [](const Situation &s) { return s.gpu; },
         "--gpu-tma applies to --target=cuda"},
        // What a device takes.
        {runners,
         {&gpuArch},
         [](const Situation &s) { return s.gpu && !s.compiled; },
         "--gpu-arch applies when a model file is compiled for "
         "--device=cuda; '{0}' is not one"},
        {runners,
         {&gpuTma},
         [](const Situation &s) { return s.gpu && !s.compiled; },
         "--gpu-tma applies when a model file is compiled for "
         "--device=cuda; '{0}' is not one"},
        {runners,
         {&gpuScheduleOnCPU},
         [](const Situation &s) { return s.gpu; },
         "--gpu-schedule-on-cpu applies to --device=cuda"},
        {all,
         {&reverseGrid},
         [](const Situation &s) { return s.scheduleOnCPU; },
         "--reverse-grid applies to --gpu-schedule-on-cpu"},
        // What the interpreter does not do.
        {{"run", "train"},
         {&device},
         [](const Situation &s) { return !s.reference; },
         "--device runs compiled code; it does not apply to --reference"},
        {{"run"},
         {&bench, threads.get(), &profileOpt, &allowTF32},
         [](const Situation &s) { return !s.reference; },
         "--bench, --threads, --profile and --allow-tf32 apply to compiled "
         "code, not to --reference"},
        {{"train"},
         {&checkpointOpt, &resumeOpt, &exportOnnxOpt},
         [](const Situation &s) { return !s.reference; },
         "--checkpoint, --resume and --export-onnx apply to compiled "
         "training, not to --reference"},
        // What needs the model file rather than a compiled library.
        {{"train"},
         {&exportOnnxOpt},
         [](const Situation &s) { return s.onnx; },
         "--export-onnx writes the ONNX model back with its trained "
         "parameters, so it needs that model; '{0}' is not one (a compiled "
         "library holds no graph): train from the .onnx file, with the "
         "training options"},
        {{"run", "generate"},
         {&dtype},
         [](const Situation &s) { return !s.compiled; },
         "--dtype applies when a model file is compiled; '{0}' is already "
         "compiled, in the type 'tfmc compile --dtype' gave it"},
        {{"run"},
         {&dtype},
         [](const Situation &s) { return !s.reference; },
         "--dtype applies to compiled code, not to --reference"},
        {{"run"},
         {&useReference},
         [](const Situation &s) { return !s.compiled; },
         "--reference needs the model (.onnx or .mlir), not a compiled "
         "library"},
        {{"run"},
         {std::addressof(shapes), std::addressof(binds), &bucketsPerOctave},
         [](const Situation &s) { return !s.compiled; },
         "--shape and --bind apply when compiling; '{0}' is already "
         "compiled"},
        {{"train"},
         trainingFlags,
         [](const Situation &s) { return !s.compiled; },
         "'{0}' is compiled: its loss and optimizer were fixed by 'tfmc "
         "compile --train'; --reference, the training options and --shape "
         "need the model file"},
        {{"generate"},
         {&maxLengthOpt, &prefillChunkOpt, std::addressof(shapes),
          std::addressof(binds)},
         [](const Situation &s) { return !s.compiled; },
         "'{0}' is compiled: --max-length, --prefill-chunk and --shape need "
         "the model file"},
        {{"inspect"},
         {&dotFile, std::addressof(shapes), std::addressof(binds)},
         [](const Situation &s) { return !s.compiled; },
         "'{0}' is compiled: --dot and --shape need the model file"},
        {all,
         {std::addressof(shapes), std::addressof(binds), &bucketsPerOctave},
         [](const Situation &s) { return s.onnx || s.compiled; },
         "--shape, --bind and --buckets-per-octave apply to ONNX models "
         "only"},
        // Choices that exclude each other.
        {{"generate"},
         {&beamOpt, &lengthPenaltyOpt},
         [](const Situation &s) { return !s.sampling; },
         "sampling (--temperature, --top-k, --top-p, --seed) keeps one "
         "sequence; it does not combine with --beam or --length-penalty"},
    };
  }();
  return rules;
}

/// Reports every rule that a flag given breaks; true when none does.
bool checkFlagRules(const Situation &s) {
  bool ok = true;
  for (const FlagRule &rule : flagRules()) {
    if (!llvm::is_contained(rule.subcommands, s.subcommand) ||
        rule.applies(s) || llvm::none_of(rule.flags, [](cl::Option *o) {
          return o->getNumOccurrences() > 0;
        }))
      continue;
    error() << llvm::formatv(rule.message, s.file) << "\n";
    ok = false;
  }
  return ok;
}

/// The situation of `subcommand` on `model`, before its own choices.
Situation situationOf(StringRef subcommand, const ModelSource &model) {
  Situation s;
  s.subcommand = subcommand;
  s.file = model.file;
  if (!model.file.empty()) {
    ModelFormat format = modelFormat(model.file);
    s.compiled = format == ModelFormat::library;
    s.onnx = format == ModelFormat::onnx;
  }
  s.reference = useReference;
  s.gpu = StringRef(device).starts_with("cuda");
  s.scheduleOnCPU = gpuScheduleOnCPU;
  s.quantize = quantizeOpt;
  return s;
}

/// The first --shape that asks for a range of sizes (LO < HI); malformed
/// ones are reported where the import parses them.
std::optional<SizeRange> firstRange(const ModelSource &model) {
  for (const std::string &spec : model.shapes) {
    std::string ignored;
    std::optional<SizeRange> range = parseSizeRange(spec, ignored);
    if (range && range->min < range->max)
      return range;
  }
  return std::nullopt;
}

/// The checks every subcommand shares: a model named, --bind's form, and a
/// range of sizes only where one size is not required.
bool checkModelSource(const ModelSource &model) {
  if (model.file.empty()) {
    error() << "no model given\n";
    return false;
  }
  for (const std::string &spec : model.binds) {
    auto [name, path] = StringRef(spec).split('=');
    if (name.empty() || path.empty()) {
      error() << "--bind expects NAME=FILE.pb, got '" << spec << "'\n";
      return false;
    }
  }
  if (std::optional<SizeRange> range = firstRange(model);
      range && model.oneSize) {
    error() << "a range of sizes (--shape " << range->symbol << "="
            << range->min << ".." << range->max
            << ") compiles inference entries; --train and --generate "
               "take one size\n";
    return false;
  }
  return true;
}

ModelSource modelSource() {
  ModelSource m;
  m.file = inputFile;
  m.shapes.assign(shapes.begin(), shapes.end());
  m.binds.assign(binds.begin(), binds.end());
  if (bucketsPerOctave.getNumOccurrences())
    m.bucketsPerOctave = bucketsPerOctave;
  m.testDataDir = testDataDir;
  return m;
}

/// How run, train and generate compile a model file for --device.
CompileOptions compileOptionsForDevice() {
  CompileOptions options = compileOptions();
  options.compiler.computeType = dtype;
  if (StringRef(device).starts_with("cuda")) {
    options.compiler.target = mlir::tfm::Target::CUDA;
    options.compiler.gpuArch = gpuArch;
    options.compiler.gpuScheduleOnCPU = gpuScheduleOnCPU;
    options.compiler.reverseGrid = reverseGrid;
    options.compiler.gpuTma = gpuTma;
  }
  chooseInt8WeightBits(options);
  return options;
}

/// `tfmc SUB --help`: the subcommand's own options first, then those it
/// shares with others, the model's, and MLIR's last (LLVM's printer sorts
/// the categories by name, which put 40 lines of MLIR options first).
void printSubcommandHelp(const Subcommand &sub, const cl::OptionCategory &mlir,
                         StringRef overview) {
  llvm::raw_ostream &os = llvm::outs();
  os << "OVERVIEW: " << overview << "\nUSAGE: tfmc " << sub.name
     << " [options] " << inputFile.HelpStr << "\n";
  SmallVector<const cl::OptionCategory *> ordered;
  for (const cl::OptionCategory *cat :
       {sub.category, sub.shared, sub.shared2,
        static_cast<cl::OptionCategory *>(&modelCat)})
    if (cat)
      ordered.push_back(cat);
  // One entry per option, though an option has a key per spelling.
  llvm::SetVector<cl::Option *> options;
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.second->getOptionHiddenFlag() == cl::NotHidden &&
        !entry.second->ArgStr.empty())
      options.insert(entry.second);
  size_t width = 0;
  for (cl::Option *o : options)
    width = std::max(width, o->getOptionWidth());
  llvm::DenseSet<cl::Option *> printed;
  auto printCategory = [&](StringRef title, auto inCategory) {
    SmallVector<cl::Option *> in;
    for (cl::Option *o : options)
      if (!printed.contains(o) && inCategory(o))
        in.push_back(o);
    if (in.empty())
      return;
    llvm::sort(
        in, [](cl::Option *a, cl::Option *b) { return a->ArgStr < b->ArgStr; });
    os << "\n" << title << ":\n\n";
    for (cl::Option *o : in) {
      o->printOptionInfo(width);
      printed.insert(o);
    }
  };
  for (const cl::OptionCategory *cat : ordered)
    printCategory(cat->getName(), [&](cl::Option *o) {
      return llvm::is_contained(o->Categories, cat);
    });
  // What HideUnrelatedOptions left beside them: --help, --version.
  printCategory("Generic options", [&](cl::Option *o) {
    return !o->ArgStr.starts_with("mlir-") &&
           !llvm::is_contained(o->Categories, &mlir);
  });
  printCategory(mlir.getName(), [&](cl::Option *o) {
    return llvm::is_contained(o->Categories, &mlir);
  });
}

} // namespace

void mlir::tfm::tfmc::printOnnxDiagnostic(Diagnostic &d, StringRef file) {
  std::string where = file.str();
  // An op that fusion made of several nodes is named by its first.
  Location loc = d.getLocation();
  while (auto fused = dyn_cast<FusedLoc>(loc)) {
    if (fused.getLocations().empty())
      break;
    loc = fused.getLocations().front();
  }
  if (isa<NameLoc>(loc))
    where += ": " + mlir::tfm::describeLocation(loc);
  const char *severity = d.getSeverity() == DiagnosticSeverity::Error ? "error"
                         : d.getSeverity() == DiagnosticSeverity::Warning
                             ? "warning"
                             : "note";
  clearProgress();
  llvm::errs() << where << ": " << severity << ": " << d.str() << "\n";
}

ModelFormat mlir::tfm::tfmc::modelFormat(StringRef path) {
  std::optional<std::string> head = headOf(path);
  return head ? formatOf(*head) : ModelFormat::mlir;
}

/// Refuses a model file that holds nothing, or whose contents contradict
/// its name (text named .onnx or .so, a library given to compile, binary
/// data named .so or .mlir), before a reader prints its bytes back as
/// errors; and says what a file of another name is read as.
bool mlir::tfm::tfmc::checkModelFile(StringRef path, StringRef command) {
  std::optional<std::string> head = headOf(path);
  if (!head)
    return true;
  if (head->empty()) {
    error() << "'" << path << "' is empty: it holds no model\n";
    return false;
  }
  ModelFormat format = formatOf(*head);
  std::string ext = llvm::sys::path::extension(path).lower();
  bool onnxName = ext == ".onnx" || ext == ".pb",
       libraryName = ext == ".so" || StringRef(path).contains(".so."),
       mlirName = ext == ".mlir";
  const char *what = format == ModelFormat::library ? "a compiled library"
                     : format == ModelFormat::onnx  ? "binary data"
                                                    : "text";
  if (format == ModelFormat::library && command == "compile") {
    error() << "'" << path << "' is a compiled library (an ELF file), not a "
            << "model: tfmc compile takes an ONNX (.onnx) or MLIR (.mlir) "
               "model; tfmc run, inspect, train and generate take the "
               "library\n";
    return false;
  }
  if ((onnxName && format != ModelFormat::onnx) ||
      (libraryName && format != ModelFormat::library) ||
      (mlirName && format == ModelFormat::onnx)) {
    error() << "'" << path << "' holds " << what << ", not "
            << (onnxName      ? "an ONNX model (a binary protobuf)"
                : libraryName ? "a compiled library (an ELF file)"
                              : "MLIR (text)")
            << "; name the file for what it holds (.onnx, .mlir or .so)\n";
    return false;
  }
  if (!onnxName && !libraryName && !mlirName)
    llvm::WithColor::note(llvm::errs(), "tfmc")
        << "'" << path << "' is read as "
        << (format == ModelFormat::library ? "a compiled library"
            : format == ModelFormat::onnx  ? "an ONNX model"
                                           : "MLIR")
        << ", by its contents\n";
  return true;
}

//===-- each subcommand's struct -----------------------------------------===//

namespace {

CompileCommand readCompile() {
  CompileCommand c;
  c.model = modelSource();
  c.model.trainable = trainFlag;
  c.model.oneSize = trainFlag || generateFlag;
  c.output = outputFile;
  c.stage = emit;
  if (emit.getNumOccurrences() == 0) {
    StringRef ext = llvm::sys::path::extension(outputFile);
    c.stage = ext == ".so"   ? Emit::so
              : ext == ".o"  ? Emit::obj
              : ext == ".ll" ? Emit::llvm
                             : Emit::tfm;
  }
  c.report = fusionReport.getNumOccurrences() > 0;
  c.reportJson = fusionReport == "json";
  c.options = compileOptions();
  if (generateFlag) {
    c.options.compiler.generation =
        mlir::tfm::GenerationOptions{maxLengthOpt, prefillChunkOpt};
    c.model.generationSizes = ModelSource::GenerationSizes{1, maxLengthOpt};
  }
  if (trainFlag) {
    std::string ignored; // validate() reports it
    c.options.compiler.training = trainingOptions(ignored);
  }
  c.options.compiler.target = target;
  c.options.compiler.computeType = dtype;
  c.options.compiler.gpuArch = gpuArch;
  c.options.compiler.gpuScheduleOnCPU = gpuScheduleOnCPU;
  c.options.compiler.reverseGrid = reverseGrid;
  c.options.compiler.gpuTma = gpuTma;
  // The quantization summary is made of tfm-quantize's remarks.
  c.options.compiler.remarks =
      c.report || quantizeOpt != mlir::tfm::QuantizeMode::None;
  c.quantizeCheck = quantizeCheckOpt;
  c.checkInputs.inputs.assign(inputs.begin(), inputs.end());
  c.checkInputs.seed = seed;
  c.checkInputs.entry = entry;
  c.options.artifact.externalWeights = externalWeights;
  c.options.artifact.cpu = targetCpu;
  chooseInt8WeightBits(c.options);
  return c;
}

RunCommand readRun() {
  RunCommand c;
  c.model = modelSource();
  c.reference = useReference;
  RunOptions &o = c.run;
  o.entry = entry;
  o.inputs.assign(inputs.begin(), inputs.end());
  o.testDataDir = testDataDir;
  o.outputDir = outputDir;
  o.seed = seed;
  o.rtol = rtol;
  o.atol = atol;
  o.relL2 = relL2;
  o.printLimit = printLimit;
  o.bench = bench;
  o.threads = *threads;
  o.device = device;
  o.profile = profileOpt;
  o.allowTF32 = allowTF32;
  c.options = compileOptionsForDevice();
  return c;
}

TrainCommand readTrain() {
  TrainCommand c;
  c.model = modelSource();
  c.model.trainable = true;
  c.model.oneSize = true;
  c.reference = useReference;
  TrainOptions &o = c.train;
  o.quiet = quietOpt;
  o.dataDir = dataOpt;
  o.steps = stepsOpt;
  o.threads = *threads;
  o.checkpoint = checkpointOpt;
  o.checkpointEvery = checkpointEveryOpt;
  o.resume = resumeOpt;
  o.exportOnnx = exportOnnxOpt;
  o.onnxModel = inputFile;
  o.device = device;
  c.options = compileOptionsForDevice();
  std::string ignored; // validate() reports it
  c.options.compiler.training = trainingOptions(ignored);
  return c;
}

GenerateCommand readGenerate() {
  GenerateCommand c;
  c.model = modelSource();
  c.model.oneSize = true;
  GenerateOptions &o = c.generate;
  o.prompt.assign(promptIds.begin(), promptIds.end());
  o.source.assign(sourceIds.begin(), sourceIds.end());
  o.maxNewTokens = maxNewTokens;
  o.beam = beamOpt;
  o.lengthPenalty = lengthPenaltyOpt;
  o.endToken = endTokenOpt;
  o.sample = temperatureOpt.getNumOccurrences() ||
             topKOpt.getNumOccurrences() || topPOpt.getNumOccurrences() ||
             seed.getNumOccurrences();
  o.temperature = temperatureOpt;
  o.topK = topKOpt;
  o.topP = topPOpt;
  o.seed = seed;
  o.threads = *threads;
  o.bench = bench;
  // The schedule compiled for the host runs on the CPU.
  o.device = gpuScheduleOnCPU ? std::string("cpu") : device.getValue();
  c.options = compileOptionsForDevice();
  c.options.compiler.generation =
      mlir::tfm::GenerationOptions{maxLengthOpt, prefillChunkOpt};
  // A decoder's run fixes its sizes: the beam's rows, and the prompt and
  // the tokens to generate. An encoder-decoder's two sequences are the
  // user's to give.
  if (o.source.empty())
    c.model.generationSizes = ModelSource::GenerationSizes{
        std::max<int64_t>(1, beamOpt),
        maxLengthOpt > 0 ? int64_t(maxLengthOpt)
                         : int64_t(o.prompt.size()) + maxNewTokens};
  return c;
}

InspectCommand readInspect() {
  InspectCommand c;
  c.model = modelSource();
  c.json = inspectJson;
  c.dotFile = dotFile;
  return c;
}

} // namespace

bool CompileCommand::validate() const {
  bool valid = checkModelSource(model);
  Situation s = situationOf("compile", model);
  s.gpu = options.compiler.target == mlir::tfm::Target::CUDA;
  s.stage = stage;
  s.generate = options.compiler.generation.has_value();
  valid &= checkFlagRules(s);
  if (report && fusionReport != "" && fusionReport != "text" &&
      fusionReport != "json") {
    error() << "--fusion-report takes 'text' or 'json', not '" << fusionReport
            << "'\n";
    valid = false;
  }
  if (maxLengthOpt < 0 || prefillChunkOpt < 1) {
    error() << "--max-length must be positive and --prefill-chunk at least "
               "1\n";
    valid = false;
  }
  if (trainFlag && quantizeOpt != mlir::tfm::QuantizeMode::None) {
    error() << mlir::tfm::kQuantizedTrainingRefusal << "\n";
    valid = false;
  }
  if (quantizeBlockSizeOpt < 16 || quantizeBlockSizeOpt % 16) {
    error() << "--quantize-block-size must be a multiple of 16, not "
            << quantizeBlockSizeOpt << "\n";
    valid = false;
  }
  // The backward pass's GEMMs and the optimizer have no bf16 or f16 form,
  // so a narrower --dtype would reach only some forward linear layers: a
  // mix no test checks, rather than mixed-precision training.
  if (options.compiler.training &&
      options.compiler.computeType != mlir::tfm::ComputeType::F32) {
    error() << "--train compiles f32 training; --dtype="
            << mlir::tfm::computeTypeName(options.compiler.computeType)
            << " is for inference\n";
    valid = false;
  }
  if (trainFlag) {
    std::string err;
    trainingOptions(err);
    if (!err.empty()) {
      error() << err << "\n";
      valid = false;
    }
  }
  if (std::string why; !mlir::tfm::checkTargetCpu(options.artifact.cpu, why)) {
    error() << why << "\n";
    valid = false;
  }
  return valid;
}

bool RunCommand::validate() const {
  bool valid = checkModelSource(model);
  valid &= checkFlagRules(situationOf("run", model));
  for (const std::string &spec : run.inputs) {
    auto [name, path] = StringRef(spec).split('=');
    if (name.empty() || path.empty()) {
      error() << "--input expects NAME=FILE.pb, got '" << spec << "'\n";
      valid = false;
    }
  }
  if (std::optional<SizeRange> range = firstRange(model); range && reference) {
    error() << "--reference runs one size; give --shape " << range->symbol
            << "=N\n";
    valid = false;
  }
  return valid;
}

bool TrainCommand::validate() const {
  bool valid = checkModelSource(model);
  valid &= checkFlagRules(situationOf("train", model));
  if (train.dataDir.empty()) {
    error() << "tfmc train needs --data DIR\n";
    valid = false;
  }
  if (train.steps == 0) {
    error() << "--steps must be at least 1\n";
    valid = false;
  }
  std::string err;
  trainingOptions(err);
  if (!err.empty()) {
    error() << err << "\n";
    valid = false;
  }
  return valid;
}

bool GenerateCommand::validate() const {
  bool valid = checkModelSource(model);
  Situation s = situationOf("generate", model);
  s.sampling = generate.sample;
  valid &= checkFlagRules(s);
  if (generate.prompt.empty()) {
    error() << "tfmc generate needs --prompt-ids ID,...\n";
    valid = false;
  }
  return valid;
}

bool InspectCommand::validate() const {
  bool valid = checkModelSource(model);
  return checkFlagRules(situationOf("inspect", model)) && valid;
}

std::optional<int> mlir::tfm::tfmc::parseCommandLine(int argc, char **argv,
                                                     Command &command) {
  if (argc < 2) {
    printUsage(llvm::errs());
    return kExitUsage;
  }
  StringRef sub = argv[1];
  if (sub == "--help" || sub == "-help" || sub == "-h" || sub == "help") {
    printUsage(llvm::outs());
    return kExitOk;
  }
  if (sub == "--list-onnx-ops") {
    for (const std::string &op : mlir::tfm::onnx_import::supportedOpTypes())
      llvm::outs() << op << "\n";
    return kExitOk;
  }
  auto printVersion = [](llvm::raw_ostream &os) {
    os << "tfmc (tfm) " TFM_VERSION_STRING ", built on LLVM/MLIR "
       << LLVM_VERSION_STRING << "\n";
  };
  if (sub == "--version") {
    printVersion(llvm::outs());
    return kExitOk;
  }
  cl::SetVersionPrinter(printVersion);
  const Subcommand *active = nullptr;
  for (const Subcommand &s : kSubcommands)
    if (sub == s.name)
      active = &s;
  if (!active) {
    error() << "unknown subcommand '" << sub << "'\n";
    printUsage(llvm::errs());
    return kExitUsage;
  }

  registerThreadsOption();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();

  // libLLVM registers hundreds of codegen flags; show only MLIR's own.
  cl::OptionCategory mlirCat("MLIR options (printing, timing, diagnostics)");
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.getKey().starts_with("mlir-"))
      entry.second->addCategory(mlirCat);
  std::vector<const cl::OptionCategory *> visible{&modelCat};
  if (active->category)
    visible.push_back(active->category);
  if (active->shared)
    visible.push_back(active->shared);
  if (active->shared2)
    visible.push_back(active->shared2);
  visible.push_back(&mlirCat);
  cl::HideUnrelatedOptions(visible);
  // An option shared by several subcommands belongs to each one's category,
  // and --help lists it under every category it has: keep only this
  // subcommand's, so `tfmc run --help` shows no other subcommand's heading.
  for (auto &entry : cl::getRegisteredOptions()) {
    auto &cats = entry.second->Categories;
    if (llvm::any_of(cats,
                     [&](auto *c) { return llvm::is_contained(visible, c); }))
      llvm::erase_if(cats,
                     [&](auto *c) { return !llvm::is_contained(visible, c); });
  }

  std::string overview =
      std::string("tfmc ") + active->name + ": " + active->summary + "\n";
  std::string progName = std::string(argv[0]) + " " + active->name;
  std::vector<const char *> args{progName.c_str()};
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  for (int i = 2; i < argc; ++i) {
    StringRef arg = argv[i];
    if (arg == "--")
      break;
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      printSubcommandHelp(*active, mlirCat, overview);
      return kExitOk;
    }
  }
  std::string parseErrors;
  llvm::raw_string_ostream errs(parseErrors);
  if (!cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(),
                                   overview, &errs)) {
    llvm::errs() << errs.str();
    return kExitUsage;
  }
  if (!checkForeignOptions(*active))
    return kExitUsage;
  if (!active->category) {
    error() << "'tfmc " << active->name
            << "' is not available in this build yet\n";
    return kExitInputError;
  }

  if (*threads < 0) {
    error() << "--threads must not be negative (" << *threads << ")\n";
    return kExitUsage;
  }
  // More threads than the machine has only oversubscribe its cores.
  if (unsigned hardware = std::thread::hardware_concurrency();
      hardware && *threads > static_cast<int>(hardware)) {
    llvm::WithColor::note(llvm::errs(), "tfmc")
        << "--threads " << *threads << " is more than this machine's "
        << hardware << " hardware threads; using " << hardware << "\n";
    *threads = static_cast<int>(hardware);
  }
  if (!inputFile.empty() && !checkModelFile(inputFile, sub))
    return kExitInputError;
  auto validated = [&](auto c) -> std::optional<int> {
    if (!c.validate())
      return kExitUsage;
    command = std::move(c);
    return std::nullopt;
  };
  if (sub == "compile")
    return validated(readCompile());
  if (sub == "run")
    return validated(readRun());
  if (sub == "train")
    return validated(readTrain());
  if (sub == "generate")
    return validated(readGenerate());
  return validated(readInspect());
}
