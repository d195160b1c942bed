//===- tfmc.cpp - The tfm compiler driver ---------------------------------===//
//
// `tfmc SUBCOMMAND [options] MODEL`. Each subcommand owns an option category;
// options of another subcommand are a usage error rather than silently
// ignored. Exit codes follow the CLI contract in Driver.h.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/IR/TfmOps.h"
#include "tfm/Tools/BugReport.h"
#include "tfm/version.h"
#include "tfm/Frontends/ONNX/Importer.h"
#include "tfm/IR/TfmDialect.h"
#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Transforms/Autodiff.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <thread>

using namespace mlir;
using namespace mlir::tfm::tfmc;
namespace cl = llvm::cl;

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
cl::OptionCategory trainingCat(
    "Training step (tfmc train, and tfmc compile --train)");
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

cl::opt<Emit> emit(
    "emit",
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
      names += (i == 0 ? "" : i + 1 == Values.size() ? " and " : ", ") +
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
             "builds for: sm_80, sm_86, sm_89, sm_90 or sm_90a"),
    cl::init("sm_80"), cl::cat(compileCat), cl::cat(runCat),
    cl::cat(trainCat));
cl::opt<bool> gpuScheduleOnCPU(
    "gpu-schedule-on-cpu",
    cl::desc("With --target=cuda (compile) or --device=cuda (run): run the "
             "kernels' schedule of blocks and threads as serial loops on this "
             "CPU instead of compiling PTX; a test of the GPU schedule on a "
             "machine without one"),
    cl::Hidden, cl::cat(compileCat), cl::cat(runCat), cl::cat(trainCat));
cl::opt<bool> reverseGrid(
    "reverse-grid",
    cl::desc("With --gpu-schedule-on-cpu: run each grid's blocks and threads "
             "in descending order, so that a kernel whose threads read each "
             "other's writes (a race on a GPU) gives another result"),
    cl::Hidden, cl::cat(compileCat), cl::cat(runCat), cl::cat(trainCat));
cl::opt<mlir::tfm::ComputeType> dtype(
    "dtype",
    cl::desc("The type the linear layers multiply in (f32 accumulation; "
             "inputs and outputs stay f32)"),
    cl::init(mlir::tfm::ComputeType::F32), mlir::tfm::computeTypeValues(),
    cl::cat(compileCat));
cl::opt<std::string> fusionReport(
    "fusion-report",
    cl::desc("Report every fusion site, fused or missed with the reason "
             "(=json for tools)"),
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
    cl::desc("With --generate: the longest sequence, which must be the "
             "model's sequence length (bind a dynamic one with --shape)"),
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
cl::opt<double> temperatureOpt(
    "temperature", cl::desc("Sample, with this temperature"),
    cl::value_desc("T"), cl::init(1.0), cl::cat(generateCat));
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

cl::opt<std::string> dataOpt(
    "data", cl::desc("Batches: input_N.pb and labels.pb, or folders of them"),
    cl::value_desc("dir"), cl::cat(trainCat));
cl::opt<unsigned> stepsOpt("steps", cl::desc("Training steps to run"),
                           cl::value_desc("N"), cl::init(1),
                           cl::cat(trainCat));
cl::opt<std::string> checkpointOpt(
    "checkpoint",
    cl::desc("Save the parameters and optimizer state here at the end (and "
             "every --checkpoint-every steps)"),
    cl::value_desc("file"), cl::cat(trainCat));
cl::opt<unsigned> checkpointEveryOpt(
    "checkpoint-every", cl::desc("Also save the checkpoint every N steps"),
    cl::value_desc("N"), cl::init(0), cl::cat(trainCat));
cl::opt<std::string> resumeOpt(
    "resume", cl::desc("Start from a checkpoint of the same model"),
    cl::value_desc("file"), cl::cat(trainCat));
cl::opt<std::string> exportOnnxOpt(
    "export-onnx",
    cl::desc("Write the ONNX model with its initializers set to the trained "
             "parameters (compile that for inference)"),
    cl::value_desc("file.onnx"), cl::cat(trainCat));

/// The training options as given on the command line.
bool trainingOptions(mlir::tfm::TrainingOptions &o) {
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  o.MEMBER = MEMBER##Opt;
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  o.MEMBER.assign(MEMBER##Opt.begin(), MEMBER##Opt.end());
#include "tfm/Transforms/TrainingOptions.def"
  std::string err;
  if (failed(o.parseSchedule(err))) {
    error() << "--lr-schedule: " << err << "\n";
    return false;
  }
  return true;
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
cl::list<std::string> inputs("input", cl::desc("Feed input NAME from a .pb"),
                             cl::value_desc("NAME=FILE.pb"), cl::cat(runCat));
cl::opt<std::string> outputDir("output-dir",
                               cl::desc("Write outputs as output_N.pb"),
                               cl::value_desc("dir"), cl::cat(runCat));
cl::opt<uint64_t> seed(
    "seed",
    cl::desc("Seed of the random inputs (run), or of sampling, which it "
             "turns on (generate): the same seed draws the same tokens"),
    cl::init(0), cl::cat(runCat), cl::cat(generateCat));
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
                           cl::value_desc("name"), cl::cat(runCat));
cl::opt<unsigned> bench(
    "bench",
    cl::desc("After the checked run, time N runs and print the median "
             "latency (generate: of the prompt and per token)"),
    cl::value_desc("N"), cl::init(0), cl::cat(runCat), cl::cat(generateCat));
// libLLVM registers a hidden --threads of its own, which tfmc does not
// use; main() removes it and then creates this one under the contract's name.
std::unique_ptr<cl::opt<int>> threads;
void registerThreadsOption() {
  auto &registered = cl::getRegisteredOptions();
  if (auto it = registered.find("threads"); it != registered.end())
    it->second->removeArgument();
  threads = std::make_unique<cl::opt<int>>(
      "threads",
      cl::desc("Threads for the kernels (0: the runtime's choice)"),
      cl::value_desc("N"), cl::init(0), cl::cat(runCat), cl::cat(trainCat),
      cl::cat(generateCat));
}
cl::opt<std::string> device(
    "device",
    cl::desc("The device to run on: cpu, cuda (the first GPU) or cuda:N. A "
             "model file is compiled for it; a compiled one must have been "
             "compiled for it (default: what it was compiled for)"),
    cl::value_desc("DEVICE"), cl::cat(runCat), cl::cat(trainCat));
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
    {"run", "run a model (compiled, or with --reference the interpreter) and "
            "print, write or check its outputs",
     &runCat},
    {"train", "train a model: run @train_step over a folder of batches",
     &trainCat, &trainingCat},
    {"generate", "extend a prompt with a model compiled with --generate: "
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
  return options;
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
        (active.shared2 &&
         llvm::is_contained(opt->Categories, active.shared2)))
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
void printOnnxDiagnostic(Diagnostic &d, StringRef file) {
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
  const char *severity = d.getSeverity() == DiagnosticSeverity::Error
                             ? "error"
                             : d.getSeverity() == DiagnosticSeverity::Warning
                                   ? "warning"
                                   : "note";
  clearProgress();
  llvm::errs() << where << ": " << severity << ": " << d.str() << "\n";
}

enum class ModelFormat { onnx, mlir, library };

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

ModelFormat modelFormat(StringRef path) {
  std::optional<std::string> head = headOf(path);
  return head ? formatOf(*head) : ModelFormat::mlir;
}

/// Refuses a model file that holds nothing, or whose contents contradict
/// its name (text named .onnx or .so, a library given to compile, binary
/// data named .so or .mlir), before a reader prints its bytes back as
/// errors; and says what a file of another name is read as.
bool checkModelFile(StringRef path, StringRef command) {
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

bool isCompiledModel(StringRef path) {
  return modelFormat(path) == ModelFormat::library;
}

/// Whether `module` has a public function to compile or run; reports a
/// model without one (an empty graph), which would compile to a library of
/// no entries.
bool hasEntry(ModuleOp module) {
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn.isPublic() && !fn.isDeclaration())
      return true;
  error() << "'" << inputFile
          << "' defines nothing to compile or run: it has no public function "
             "(an ONNX graph without outputs, or MLIR without a func.func)\n";
  return false;
}

/// Parses the model file and hands it to `body`, whose result is the exit
/// code. Diagnostics carry file:line:col while `body` runs.
int withModel(MLIRContext &context, llvm::function_ref<int(ModuleOp)> body,
              bool trainable = false) {
  if (inputFile.empty()) {
    error() << "no model given\n";
    return kExitUsage;
  }
  if (modelFormat(inputFile) == ModelFormat::onnx) {
    mlir::tfm::onnx_import::ImportOptions options;
    options.trainable = trainable;
    SmallVector<SizeRange> ranges;
    for (const std::string &spec : shapes) {
      std::string err;
      if (std::optional<SizeRange> range = parseSizeRange(spec, err)) {
        if (range->min < range->max)
          ranges.push_back(*range);
        else
          options.inputShapes[range->symbol] = {range->min};
        continue;
      }
      if (!err.empty()) {
        error() << err << "\n";
        return kExitUsage;
      }
      if (!mlir::tfm::onnx_import::parseShapeOption(spec, options, err)) {
        error() << err << "\n";
        return kExitUsage;
      }
    }
    llvm::StringMap<std::string> bindFiles;
    for (const std::string &spec : binds) {
      auto [name, path] = StringRef(spec).split('=');
      if (name.empty() || path.empty()) {
        error() << "--bind expects NAME=FILE.pb, got '" << spec << "'\n";
        return kExitUsage;
      }
      bindFiles[name] = path.str();
      options.boundInputs.insert(name);
    }
    // With --test-data-dir, shape inputs take their values from the case.
    std::string dataDir = testDataDir;
    options.shapeInputValue = [&](StringRef name,
                                  unsigned position) -> DenseElementsAttr {
      std::string path = bindFiles.lookup(name);
      if (path.empty() && !dataDir.empty())
        path = (dataDir + "/input_" + Twine(position) + ".pb").str();
      if (path.empty())
        return {};
      return readConstant(&context, path);
    };
    // Dynamic dimensions that no --shape fixes take the test data's.
    options.inputShapeHint =
        [&](StringRef name,
            unsigned position) -> std::optional<SmallVector<int64_t>> {
      if (dataDir.empty())
        return std::nullopt;
      std::string path = (dataDir + "/input_" + Twine(position) + ".pb").str();
      if (!llvm::sys::fs::exists(path))
        return std::nullopt;
      DenseElementsAttr value = readConstant(&context, path);
      if (!value)
        return std::nullopt;
      return SmallVector<int64_t>(value.getType().getShape());
    };
    // Import diagnostics carry node names, not file positions.
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      printOnnxDiagnostic(d, inputFile);
      for (Diagnostic &note : d.getNotes())
        printOnnxDiagnostic(note, inputFile);
      return success();
    });
    if (!ranges.empty() && (trainable || generateFlag)) {
      error() << "a range of sizes (--shape " << ranges.front().symbol << "="
              << ranges.front().min << ".." << ranges.front().max
              << ") compiles inference entries; --train and --generate "
                 "take one size\n";
      return kExitUsage;
    }
    TimingScope importTimer = commandTiming().nest("import the ONNX model");
    OwningOpRef<ModuleOp> module =
        ranges.empty()
            ? mlir::tfm::onnx_import::importFile(&context, inputFile, options)
            : importBuckets(&context, inputFile, options, ranges,
                            bucketsPerOctave.getNumOccurrences()
                                ? std::optional<unsigned>(bucketsPerOctave)
                                : std::nullopt);
    importTimer.stop();
    if (!module || !hasEntry(*module))
      return kExitInputError;
    return body(*module);
  }
  if (!shapes.empty()) {
    error() << "--shape applies to ONNX models only\n";
    return kExitUsage;
  }
  std::string err;
  auto buffer = openInputFile(inputFile, &err);
  if (!buffer) {
    error() << err << "\n";
    return kExitInputError;
  }
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sm, &context);
  // Runs before the handler above, which then prints the diagnostic.
  ScopedDiagnosticHandler clearFirst(&context, [](Diagnostic &) {
    clearProgress();
    return failure();
  });
  TimingScope parseTimer = commandTiming().nest("parse the MLIR model");
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &context);
  parseTimer.stop();
  if (!module || !hasEntry(*module))
    return kExitInputError;
  return body(*module);
}

void printFusionReport(llvm::raw_ostream &os, ArrayRef<FusionSite> sites,
                       bool json) {
  // Attention is fused where the target lowers (tfm-fuse-attention, for
  // the CPU), so its row shows only when the compile got that far.
  SmallVector<const char *> kinds{"qkv", "masked-softmax",
                                  "residual-layernorm", "bias-activation"};
  llvm::StringMap<std::pair<int, int>> counts;
  for (const char *k : kinds)
    counts[k] = {0, 0};
  for (const FusionSite &s : sites)
    (s.fused ? counts[s.kind].first : counts[s.kind].second)++;
  if (counts.count("attention"))
    kinds.push_back("attention");
  if (json) {
    llvm::json::Object byKind;
    for (const char *k : kinds)
      byKind[k] = llvm::json::Object{{"fused", counts[k].first},
                                     {"missed", counts[k].second}};
    llvm::json::Array misses;
    for (const FusionSite &s : sites)
      if (!s.fused)
        misses.push_back(llvm::json::Object{
            {"kind", s.kind},
            {"location", mlir::tfm::describeLocation(s.loc)},
            {"reason", s.reason}});
    os << llvm::formatv("{0:2}",
                        llvm::json::Value(llvm::json::Object{
                            {"model", inputFile.getValue()},
                            {"kinds", std::move(byKind)},
                            {"misses", std::move(misses)}}))
       << "\n";
    return;
  }
  os << "fusion report for " << inputFile << "\n";
  os << llvm::formatv("  {0,-20} {1,6} {2,7}\n", "kind", "fused", "missed");
  for (const char *k : kinds)
    os << llvm::formatv("  {0,-20} {1,6} {2,7}\n", k, counts[k].first,
                        counts[k].second);
  for (const FusionSite &s : sites)
    if (!s.fused)
      os << "  missed " << s.kind << " at "
         << mlir::tfm::describeLocation(s.loc) << ": " << s.reason << "\n";
}

int runCompile(MLIRContext &context) {
  Emit stage = emit;
  if (emit.getNumOccurrences() == 0) {
    StringRef ext = llvm::sys::path::extension(outputFile);
    stage = ext == ".so" ? Emit::so
            : ext == ".o" ? Emit::obj
            : ext == ".ll" ? Emit::llvm
                           : Emit::tfm;
  }
  if (dtype.getNumOccurrences() && (stage == Emit::tfm || stage == Emit::fused)) {
    error() << "--dtype applies when lowering (--emit=linalg or later)\n";
    return kExitUsage;
  }
  bool report = fusionReport.getNumOccurrences() > 0;
  if (report && fusionReport != "" && fusionReport != "text" &&
      fusionReport != "json") {
    error() << "--fusion-report takes 'text' or 'json', not '"
            << fusionReport << "'\n";
    return kExitUsage;
  }
  if (report && stage == Emit::tfm) {
    error() << "--fusion-report needs --emit=fused (or a later stage)\n";
    return kExitUsage;
  }
  if (externalWeights && stage != Emit::so) {
    error() << "--external-weights applies to --emit=so\n";
    return kExitUsage;
  }
  if (!generateFlag && (maxLengthOpt.getNumOccurrences() ||
                        prefillChunkOpt.getNumOccurrences())) {
    error() << "--max-length and --prefill-chunk apply to --generate\n";
    return kExitUsage;
  }
  if (maxLengthOpt < 0 || prefillChunkOpt < 1) {
    error() << "--max-length must be positive and --prefill-chunk at least "
               "1\n";
    return kExitUsage;
  }
  // The backward pass's GEMMs and the optimizer have no bf16 or f16 form, so
  // a narrower --dtype would reach only some forward linear layers: a mix
  // no test checks, rather than mixed-precision training.
  if (trainFlag && dtype != mlir::tfm::ComputeType::F32) {
    error() << "--train compiles f32 training; --dtype="
            << mlir::tfm::computeTypeName(dtype) << " is for inference\n";
    return kExitUsage;
  }
  if ((gpuArch.getNumOccurrences() || gpuScheduleOnCPU) &&
      target != mlir::tfm::Target::CUDA) {
    error() << (gpuScheduleOnCPU ? "--gpu-schedule-on-cpu" : "--gpu-arch")
            << " applies to --target=cuda\n";
    return kExitUsage;
  }
  if (reverseGrid && !gpuScheduleOnCPU) {
    error() << "--reverse-grid applies to --gpu-schedule-on-cpu\n";
    return kExitUsage;
  }
  if (std::string why; !mlir::tfm::checkTargetCpu(targetCpu, why)) {
    error() << why << "\n";
    return kExitUsage;
  }
  return withModel(context, [&](ModuleOp module) -> int {
    // The passes report every site as a remark.
    std::vector<FusionSite> sites;
    FusionRemarkCollector collect(&context, sites);
    auto printReport = [&] {
      if (!report)
        return;
      bool toStdout = outputFile != "-";
      printFusionReport(toStdout ? llvm::outs() : llvm::errs(), sites,
                        fusionReport == "json");
    };
    CompileOptions options = compileOptions();
    if (generateFlag)
      options.compiler.generation =
          mlir::tfm::GenerationOptions{maxLengthOpt, prefillChunkOpt};
    if (trainFlag) {
      mlir::tfm::TrainingOptions training;
      if (!trainingOptions(training))
        return kExitUsage;
      options.compiler.training = std::move(training);
    }
    options.compiler.target = target;
    options.compiler.computeType = dtype;
    options.compiler.gpuArch = gpuArch;
    options.compiler.gpuScheduleOnCPU = gpuScheduleOnCPU;
    options.compiler.reverseGrid = reverseGrid;
    options.compiler.remarks = report;
    options.artifact.externalWeights = externalWeights;
    options.artifact.cpu = targetCpu;
    int rc = compileTo(module, stage, outputFile, options);
    if (rc == kExitOk)
      printReport();
    return rc;
  }, trainFlag);
}

int runGenerate(MLIRContext &context) {
  GenerateOptions opts;
  opts.prompt.assign(promptIds.begin(), promptIds.end());
  opts.maxNewTokens = maxNewTokens;
  opts.beam = beamOpt;
  opts.lengthPenalty = lengthPenaltyOpt;
  opts.endToken = endTokenOpt;
  opts.sample = temperatureOpt.getNumOccurrences() ||
                topKOpt.getNumOccurrences() || topPOpt.getNumOccurrences() ||
                seed.getNumOccurrences();
  opts.temperature = temperatureOpt;
  opts.topK = topKOpt;
  opts.topP = topPOpt;
  opts.seed = seed;
  opts.threads = *threads;
  opts.bench = bench;
  if (opts.prompt.empty()) {
    error() << "tfmc generate needs --prompt-ids ID,...\n";
    return kExitUsage;
  }
  if (opts.sample && (beamOpt.getNumOccurrences() ||
                      lengthPenaltyOpt.getNumOccurrences())) {
    error() << "sampling (--temperature, --top-k, --top-p, --seed) "
               "keeps one sequence; it does not combine with --beam or "
               "--length-penalty\n";
    return kExitUsage;
  }
  opts.source.assign(sourceIds.begin(), sourceIds.end());
  if (isCompiledModel(inputFile)) {
    if (maxLengthOpt.getNumOccurrences() ||
        prefillChunkOpt.getNumOccurrences() || !shapes.empty()) {
      error() << "'" << inputFile << "' is compiled: --max-length, "
              << "--prefill-chunk and --shape need the model file\n";
      return kExitUsage;
    }
    return generateCompiled(inputFile, opts);
  }
  // A model file: compile it with --generate into a private folder first.
  return withModel(context, [&](ModuleOp module) -> int {
    SmallString<128> dir;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("tfmc-generate", dir)) {
      error() << "cannot create a temporary folder: " << ec.message() << "\n";
      return kExitInputError;
    }
    SmallString<128> so(dir);
    llvm::sys::path::append(so, "model.so");
    CompileOptions options = compileOptions();
    options.compiler.generation =
        mlir::tfm::GenerationOptions{maxLengthOpt, prefillChunkOpt};
    int rc = compileTo(module, Emit::so, so, options);
    if (rc == kExitOk)
      rc = generateCompiled(so, opts);
    llvm::sys::fs::remove(so);
    llvm::sys::fs::remove(dir);
    return rc;
  });
}

int runTrain(MLIRContext &context) {
  TrainOptions opts;
  opts.quiet = quietOpt;
  opts.dataDir = dataOpt;
  opts.steps = stepsOpt;
  opts.threads = *threads;
  opts.checkpoint = checkpointOpt;
  opts.checkpointEvery = checkpointEveryOpt;
  opts.resume = resumeOpt;
  opts.exportOnnx = exportOnnxOpt;
  opts.onnxModel = inputFile;
  opts.device = device;
  bool onGPU = StringRef(device).starts_with("cuda");
  if (gpuScheduleOnCPU && !onGPU) {
    error() << "--gpu-schedule-on-cpu applies to --device=cuda\n";
    return kExitUsage;
  }
  if (reverseGrid && !gpuScheduleOnCPU) {
    error() << "--reverse-grid applies to --gpu-schedule-on-cpu\n";
    return kExitUsage;
  }
  if (useReference && !device.empty()) {
    error() << "--device runs compiled code; it does not apply to "
               "--reference\n";
    return kExitUsage;
  }
  if (!opts.exportOnnx.empty() &&
      modelFormat(inputFile) != ModelFormat::onnx) {
    error() << "--export-onnx writes the ONNX model back with its trained "
               "parameters, so it needs that model; '"
            << inputFile
            << "' is not one (a compiled library holds no graph): train "
               "from the .onnx file, with the training options\n";
    return kExitUsage;
  }
  if (useReference && (!opts.checkpoint.empty() || !opts.resume.empty() ||
                       !opts.exportOnnx.empty())) {
    error() << "--checkpoint, --resume and --export-onnx apply to compiled "
               "training, not to --reference\n";
    return kExitUsage;
  }
  if (opts.dataDir.empty()) {
    error() << "tfmc train needs --data DIR\n";
    return kExitUsage;
  }
  if (opts.steps == 0) {
    error() << "--steps must be at least 1\n";
    return kExitUsage;
  }
  bool trainingFlagsGiven = false;
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.second->getNumOccurrences() &&
        llvm::is_contained(entry.second->Categories, &trainingCat))
      trainingFlagsGiven = true;
  if (isCompiledModel(inputFile)) {
    if (useReference || trainingFlagsGiven || !shapes.empty()) {
      error() << "'" << inputFile << "' is compiled: its loss and optimizer "
              << "were fixed by 'tfmc compile --train'; --reference, the "
                 "training options and --shape need the model file\n";
      return kExitUsage;
    }
    return trainCompiled(inputFile, opts);
  }
  mlir::tfm::TrainingOptions training;
  if (!trainingOptions(training))
    return kExitUsage;
  return withModel(context, [&](ModuleOp module) -> int {
    if (useReference) {
      PassManager pm(&context);
      if (failed(applyPassManagerCLOptions(pm)))
        return kExitUsage;
      mlir::tfm::buildTrainingPipeline(pm, /*remarks=*/false, training);
      if (failed(pm.run(module)))
        return kExitInputError;
      return trainReference(module.lookupSymbol<func::FuncOp>("train_step"),
                            opts);
    }
    // Compile into a private folder, then train what was compiled. The
    // step's signature comes from a copy, which knows the ONNX numbering.
    std::optional<Signature> sig;
    {
      OwningOpRef<ModuleOp> copy = module.clone();
      // The compile below reports the same warnings; say them once.
      ScopedDiagnosticHandler quiet(&context, [](Diagnostic &d) {
        return success(d.getSeverity() != DiagnosticSeverity::Error);
      });
      PassManager pm(&context);
      mlir::tfm::buildTrainingPipeline(pm, /*remarks=*/false, training);
      if (failed(pm.run(*copy)))
        return kExitInputError;
      sig = signatureOf(copy->lookupSymbol<func::FuncOp>("train_step"));
      if (!sig)
        return kExitInputError;
    }
    SmallString<128> dir;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("tfmc-train", dir)) {
      error() << "cannot create a temporary folder: " << ec.message() << "\n";
      return kExitInputError;
    }
    SmallString<128> so(dir);
    llvm::sys::path::append(so, "model.so");
    CompileOptions options = compileOptions();
    options.compiler.training = training;
    if (onGPU) {
      options.compiler.target = mlir::tfm::Target::CUDA;
      options.compiler.gpuArch = gpuArch;
      options.compiler.gpuScheduleOnCPU = gpuScheduleOnCPU;
      options.compiler.reverseGrid = reverseGrid;
    }
    int rc = compileTo(module, Emit::so, so, options);
    // The schedule compiled for the host trains on the CPU.
    TrainOptions trainOpts = opts;
    if (gpuScheduleOnCPU)
      trainOpts.device = "cpu";
    if (rc == kExitOk)
      rc = trainCompiled(so, trainOpts, &*sig);
    llvm::sys::fs::remove(so);
    llvm::sys::fs::remove(dir);
    return rc;
  }, /*trainable=*/true);
}

/// A model whose inputs have unbound dimension symbols, as its file gives
/// it: its ops, FLOPs and memory plan need the symbols bound.
void printSymbolicSignature(const mlir::tfm::onnx_import::Signature &sig,
                            bool json) {
  std::string hint;
  for (auto [i, s] : llvm::enumerate(sig.symbols))
    hint += (i ? " " : "") + ("--shape " + s + "=N");
  if (json) {
    auto ports = [](const auto &list) {
      llvm::json::Array out;
      for (const auto &p : list) {
        llvm::json::Object port{{"name", p.name}, {"dtype", p.dtype}};
        if (p.hasShape)
          port["dims"] = llvm::json::Array(p.dims);
        out.push_back(std::move(port));
      }
      return out;
    };
    llvm::outs() << llvm::formatv(
        "{0:2}\n", llvm::json::Value(llvm::json::Object{
                       {"model", inputFile.getValue()},
                       {"symbols", llvm::json::Array(sig.symbols)},
                       {"inputs", ports(sig.inputs)},
                       {"outputs", ports(sig.outputs)},
                       {"bind", hint}}));
    return;
  }
  llvm::outs() << "model " << inputFile << ", dimension symbols "
               << llvm::join(sig.symbols, ", ") << "\n";
  for (int io = 0; io < 2; ++io) {
    llvm::outs() << (io ? "outputs:\n" : "inputs:\n");
    for (const auto &p : io ? sig.outputs : sig.inputs)
      llvm::outs() << "  " << p.name << ": " << p.dtype
                   << (p.hasShape ? "[" + llvm::join(p.dims, ", ") + "]"
                                  : std::string(" (no shape)"))
                   << "\n";
  }
  llvm::outs() << "bind the symbols with --shape (" << hint
               << ") to see the ops, fusions, FLOPs and memory plan\n";
}

int runInspectCommand(MLIRContext &context) {
  if (isCompiledModel(inputFile)) {
    if (!dotFile.empty() || !shapes.empty()) {
      error() << "'" << inputFile << "' is compiled: --dot and --shape need "
              << "the model file\n";
      return kExitUsage;
    }
    return mlir::tfm::tfmc::inspectCompiled(inputFile, inspectJson);
  }
  // A model with dimension symbols is described as the file gives it; its
  // ops, FLOPs and memory plan need the symbols bound.
  if (!inputFile.empty() && modelFormat(inputFile) == ModelFormat::onnx) {
    mlir::tfm::onnx_import::Signature sig;
    std::string err;
    if (mlir::tfm::onnx_import::describeSignature(inputFile, sig, err) &&
        !sig.symbols.empty() && shapes.empty()) {
      printSymbolicSignature(sig, inspectJson);
      return kExitOk;
    }
  }
  return withModel(context, [](ModuleOp module) -> int {
    // The passes report every fusion site as a remark; the graph marks them.
    std::vector<FusionSite> sites;
    bool graph = !dotFile.empty();
    FusionRemarkCollector collect(module.getContext(), sites);
    PassManager pm(module.getContext());
    if (failed(applyPassManagerCLOptions(pm)))
      return kExitUsage;
    mlir::tfm::buildFusionPipeline(pm, /*remarks=*/graph);
    // The plan the CPU target compiles: without its fused attention the
    // arena of a long sequence read 11 times what `tfmc compile` gives it
    // (W8 at 4096: 856 MB against 76 MB).
    mlir::tfm::buildCPUPlanPipeline(pm, /*remarks=*/graph);
    if (failed(pm.run(module)))
      return kExitInputError;
    if (!graph)
      return runInspect(module, inspectJson, llvm::outs());
    std::string err;
    std::unique_ptr<llvm::ToolOutputFile> dot = openOutputFile(dotFile, &err);
    if (!dot) {
      error() << err << "\n";
      return kExitInputError;
    }
    writeModelGraph(module, llvm::sys::path::filename(inputFile), sites,
                    dot->os());
    dot->keep();
    // With the graph on stdout, the summary goes to stderr so that
    // `tfmc inspect m.onnx --dot - | dot -Tsvg` gets the graph alone.
    return runInspect(module, inspectJson,
                      dotFile == "-" ? llvm::errs() : llvm::outs());
  });
}

int runRunOnce(MLIRContext &context);

/// The test_data_set_N folders of a model folder (the ONNX backend-test
/// layout), in order; empty when `dir` is itself one case.
std::vector<std::string> testDataSets(StringRef dir) {
  std::vector<std::string> sets;
  if (dir.empty() ||
      llvm::sys::fs::exists(Twine(dir) + "/input_0.pb") ||
      llvm::sys::fs::exists(Twine(dir) + "/output_0.pb"))
    return sets;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::sys::path::filename(it->path()).starts_with("test_data_set_"))
      sets.push_back(it->path());
  // test_data_set_10 after test_data_set_9.
  llvm::sort(sets, [](const std::string &a, const std::string &b) {
    return std::make_pair(a.size(), a) < std::make_pair(b.size(), b);
  });
  return sets;
}

/// `tfmc run`, once per test data set when --test-data-dir names a model
/// folder. Each set is imported on its own, since a dynamic model takes its
/// shapes from the set's inputs.
int runRun(MLIRContext &context) {
  std::vector<std::string> sets = testDataSets(testDataDir);
  if (sets.empty())
    return runRunOnce(context);
  std::string folder = testDataDir;
  int worst = kExitOk, matched = 0;
  for (const std::string &set : sets) {
    llvm::outs() << llvm::sys::path::filename(set) << ":\n";
    testDataDir.setValue(set);
    int rc = runRunOnce(context);
    matched += rc == kExitOk;
    if (rc == kExitUsage)
      return rc;
    if (worst == kExitOk || rc == kExitInputError)
      worst = rc;
  }
  testDataDir.setValue(folder);
  llvm::outs() << matched << " of " << sets.size()
               << " test data sets match\n";
  return worst;
}

int runRunOnce(MLIRContext &context) {
  RunOptions opts;
  opts.entry = entry;
  opts.inputs.assign(inputs.begin(), inputs.end());
  opts.testDataDir = testDataDir;
  opts.outputDir = outputDir;
  opts.seed = seed;
  opts.rtol = rtol;
  opts.atol = atol;
  opts.relL2 = relL2;
  opts.printLimit = printLimit;
  opts.bench = bench;
  opts.threads = *threads;
  opts.device = device;
  opts.profile = profileOpt;
  opts.allowTF32 = allowTF32;
  for (const std::string &spec : opts.inputs) {
    auto [name, path] = StringRef(spec).split('=');
    if (name.empty() || path.empty()) {
      error() << "--input expects NAME=FILE.pb, got '" << spec << "'\n";
      return kExitUsage;
    }
  }
  if (useReference && (bench || *threads || !profileOpt.empty() || allowTF32)) {
    error() << "--bench, --threads, --profile and --allow-tf32 apply to "
               "compiled code, not to --reference\n";
    return kExitUsage;
  }
  if (useReference && !device.empty()) {
    error() << "--device runs compiled code; it does not apply to "
               "--reference\n";
    return kExitUsage;
  }
  bool onGPU = StringRef(device).starts_with("cuda");
  if (gpuScheduleOnCPU && !onGPU) {
    error() << "--gpu-schedule-on-cpu applies to --device=cuda\n";
    return kExitUsage;
  }
  if (reverseGrid && !gpuScheduleOnCPU) {
    error() << "--reverse-grid applies to --gpu-schedule-on-cpu\n";
    return kExitUsage;
  }
  if (isCompiledModel(inputFile)) {
    if (useReference) {
      error() << "--reference needs the model (.onnx or .mlir), not a "
                 "compiled library\n";
      return kExitUsage;
    }
    if (!shapes.empty() || !binds.empty()) {
      error() << "--shape and --bind apply when compiling; '" << inputFile
              << "' is already compiled\n";
      return kExitUsage;
    }
    return runCompiled(inputFile, opts);
  }
  return withModel(context, [&](ModuleOp module) -> int {
    // For a range of sizes, the signature (input numbering, index bounds)
    // is any bucket's: all take the same inputs.
    func::FuncOp fn;
    if (module->hasAttr("tfm.symbol_ranges")) {
      if (useReference) {
        error() << "--reference runs one size; give --shape SYMBOL=N\n";
        return kExitUsage;
      }
      StringRef wanted = entry.empty() ? StringRef("infer") : StringRef(entry);
      for (auto f : module.getOps<func::FuncOp>())
        if (auto of = f->getAttrOfType<StringAttr>("tfm.bucket_of");
            of && of.getValue() == wanted)
          fn = f;
      if (!fn) {
        error() << "no entry '" << wanted << "' serves the range of sizes\n";
        return kExitInputError;
      }
    } else {
      fn = findEntry(module, entry);
    }
    if (!fn)
      return kExitInputError;
    if (useReference)
      return runReference(module, fn, opts);
    std::optional<Signature> sig = signatureOf(fn);
    if (!sig)
      return kExitInputError;
    // Compile into a private folder, then run what was compiled.
    SmallString<128> dir;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("tfmc-run", dir)) {
      error() << "cannot create a temporary folder: " << ec.message() << "\n";
      return kExitInputError;
    }
    SmallString<128> so(dir);
    llvm::sys::path::append(so, "model.so");
    CompileOptions options = compileOptions();
    if (onGPU) {
      options.compiler.target = mlir::tfm::Target::CUDA;
      options.compiler.gpuArch = gpuArch;
      options.compiler.gpuScheduleOnCPU = gpuScheduleOnCPU;
      options.compiler.reverseGrid = reverseGrid;
    }
    int rc = compileTo(module, Emit::so, so, options);
    // The schedule compiled for the host runs on the CPU.
    RunOptions runOpts = opts;
    if (gpuScheduleOnCPU)
      runOpts.device = "cpu";
    if (rc == kExitOk)
      rc = runCompiled(so, runOpts, &*sig);
    llvm::sys::fs::remove(so);
    llvm::sys::fs::remove(dir);
    return rc;
  });
}

} // namespace

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

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::tfm::setBugReportMessage();
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
       << LLVM_VERSION_STRING
       << "\n";
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
    if (llvm::any_of(cats, [&](auto *c) { return llvm::is_contained(visible, c); }))
      llvm::erase_if(cats, [&](auto *c) { return !llvm::is_contained(visible, c); });
  }

  std::string overview = std::string("tfmc ") + active->name + ": " +
                         active->summary + "\n";
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

  DialectRegistry registry;
  registry.insert<mlir::tfm::TfmDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect>();
  mlir::tfm::registerGradientExternalModels(registry);
  mlir::tfm::registerPipelineExtensions(registry);
  mlir::tfm::registerTfmConversionPasses();
  mlir::tfm::registerCPUTarget();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Errors name the op at fault; a dump of it (often a whole function)
  // would bury the message.
  context.printOpOnDiagnostic(false);

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
  startCommandTiming();
  int rc = sub == "compile"    ? runCompile(context)
           : sub == "inspect"  ? runInspectCommand(context)
           : sub == "train"    ? runTrain(context)
           : sub == "generate" ? runGenerate(context)
                               : runRun(context);
  reportCommandTiming();
  return rc;
}
