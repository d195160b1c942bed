//===- tfmc.cpp - The tfm compiler driver ---------------------------------===//
//
// `tfmc SUBCOMMAND [options] MODEL`: CommandLine.cpp reads and checks the
// flags into the subcommand's struct; here each subcommand does its work.
// Exit codes follow the CLI contract in Driver.h.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "Driver.h"

#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Frontends/ONNX/Importer.h"
#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Tools/BugReport.h"
#include "tfm/Transforms/Autodiff.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cstdio>

using namespace mlir;
using namespace mlir::tfm::tfmc;
using mlir::tfm::Stage;

namespace {

/// Whether `module` has a public function to compile or run; reports a
/// model without one (an empty graph), which would compile to a library of
/// no entries.
bool hasEntry(ModuleOp module, StringRef file) {
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn.isPublic() && !fn.isDeclaration())
      return true;
  error() << "'" << file
          << "' defines nothing to compile or run: it has no public function "
             "(an ONNX graph without outputs, or MLIR without a func.func)\n";
  return false;
}

/// Parses the model file and hands it to `body`, whose result is the exit
/// code. Diagnostics carry file:line:col while `body` runs.
int withModel(MLIRContext &context, const ModelSource &model,
              llvm::function_ref<int(ModuleOp)> body) {
  const std::string &inputFile = model.file;
  if (modelFormat(inputFile) == ModelFormat::onnx) {
    mlir::tfm::onnx_import::ImportOptions options;
    options.trainable = model.trainable;
    SmallVector<SizeRange> ranges;
    for (const std::string &spec : model.shapes) {
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
    for (const std::string &spec : model.binds) {
      auto [name, path] = StringRef(spec).split('=');
      bindFiles[name] = path.str();
      options.boundInputs.insert(name);
    }
    // With --test-data-dir, shape inputs take their values from the case.
    const std::string &dataDir = model.testDataDir;
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
    // With --generate, the token ids' dynamic batch and sequence take the
    // generation's sizes, and every input that shares their symbols too.
    SmallVector<std::string> chosen;
    llvm::StringMap<int64_t> chosenSymbols;
    bool needMaxLength = false;
    if (model.generationSizes)
      options.dimensionDefault =
          [&](StringRef name, unsigned position, unsigned dim,
              StringRef symbol) -> std::optional<int64_t> {
        if (auto it = chosenSymbols.find(symbol);
            !symbol.empty() && it != chosenSymbols.end())
          return it->second;
        if (position != 0 || dim > 1)
          return std::nullopt;
        int64_t size = dim == 0 ? model.generationSizes->batch
                                : model.generationSizes->maxLength;
        if (size <= 0) {
          needMaxLength = true;
          return std::nullopt;
        }
        if (!symbol.empty())
          chosenSymbols[symbol] = size;
        chosen.push_back(
            (Twine(dim == 0 ? "the batch" : "the sequence") +
             (symbol.empty() ? Twine("") : " ('" + symbol + "')") + " = " +
             Twine(size) +
             (dim == 0 ? Twine("") : Twine(", the longest generated")))
                .str());
        return size;
      };
    // Import diagnostics carry node names, not file positions.
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      printOnnxDiagnostic(d, inputFile);
      for (Diagnostic &note : d.getNotes())
        printOnnxDiagnostic(note, inputFile);
      return success();
    });
    TimingScope importTimer = commandTiming().nest("import the ONNX model");
    OwningOpRef<ModuleOp> module =
        ranges.empty()
            ? mlir::tfm::onnx_import::importFile(&context, inputFile, options)
            : importBuckets(&context, inputFile, options, ranges,
                            model.bucketsPerOctave);
    importTimer.stop();
    if (!module && needMaxLength)
      llvm::errs() << "tfmc: note: --generate fixes the sequence of '"
                   << inputFile
                   << "' to the longest one it generates: give it with "
                      "--max-length N\n";
    if (!module || !hasEntry(*module, inputFile))
      return kExitInputError;
    if (!chosen.empty()) {
      clearProgress();
      llvm::errs() << "tfmc: --generate fixes " << llvm::join(chosen, " and ")
                   << " (--shape to choose others)\n";
    }
    return body(*module);
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
  if (!module || !hasEntry(*module, inputFile))
    return kExitInputError;
  return body(*module);
}

/// The kernels of one table of the GPU report, in its order: the ops'
/// (tfm-lower-to-gpu) or the generated GEMMs' (tfm-tile-gpu-matmul).
SmallVector<StringRef> kernelNames(bool gemm) {
  SmallVector<StringRef> names;
  if (gemm)
    for (mlir::tfm::GemmKernel k : mlir::tfm::kGemmKernels)
      names.push_back(mlir::tfm::gemmKernelName(k));
  else
    for (mlir::tfm::GPUKernel k : mlir::tfm::kGPUKernels)
      names.push_back(mlir::tfm::gpuKernelName(k));
  return names;
}

/// The GPU kernels' part of the report: how many ops got each kernel, and
/// each op that missed a better one, with the reason; then the same for
/// the generated GEMMs, once the compile got to them.
void printKernelReport(llvm::raw_ostream &os, ArrayRef<KernelSite> kernels) {
  for (bool gemm : {false, true}) {
    llvm::MapVector<StringRef, int> counts;
    for (StringRef k : kernelNames(gemm))
      counts[k] = 0;
    bool any = false;
    for (const KernelSite &s : kernels)
      if (s.gemm == gemm) {
        ++counts[s.kernel];
        any = true;
      }
    if (gemm && !any)
      continue;
    os << llvm::formatv("  {0,-20} {1,6}\n",
                        gemm ? "generated gemm" : "gpu kernel",
                        gemm ? "gemms" : "ops");
    for (auto [k, n] : counts)
      os << llvm::formatv("  {0,-20} {1,6}\n", k, n);
    for (const KernelSite &s : kernels)
      if (s.gemm == gemm && !s.better.empty())
        os << "  " << s.op << " at " << mlir::tfm::describeLocation(s.loc)
           << ": " << s.kernel << ", not " << s.better << ": " << s.reason
           << "\n";
  }
}

/// One table of the GPU report in JSON: the ops' or the generated GEMMs'.
llvm::json::Object kernelTableJson(ArrayRef<KernelSite> kernels, bool gemm) {
  llvm::json::Object counts;
  llvm::json::Array misses;
  for (const KernelSite &s : kernels) {
    if (s.gemm != gemm)
      continue;
    counts[s.kernel] = counts.getInteger(s.kernel).value_or(0) + 1;
    if (!s.better.empty())
      misses.push_back(
          llvm::json::Object{{"op", s.op},
                             {"location", mlir::tfm::describeLocation(s.loc)},
                             {"kernel", s.kernel},
                             {"better", s.better},
                             {"reason", s.reason}});
  }
  return llvm::json::Object{{"kernels", std::move(counts)},
                            {"misses", std::move(misses)}};
}

llvm::json::Object kernelReportJson(ArrayRef<KernelSite> kernels) {
  llvm::json::Object report = kernelTableJson(kernels, /*gemm=*/false);
  if (llvm::any_of(kernels, [](const KernelSite &s) { return s.gemm; }))
    report["generated_gemms"] = kernelTableJson(kernels, /*gemm=*/true);
  return report;
}

void printFusionReport(llvm::raw_ostream &os, StringRef model,
                       ArrayRef<FusionSite> sites, ArrayRef<KernelSite> kernels,
                       bool json,
                       const QuantizationReport *quantization = nullptr) {
  // Attention is fused where the target lowers (tfm-fuse-attention, for
  // the CPU), so its row shows only when the compile got that far; the
  // quantized linears' only for a model that has quantized sites.
  SmallVector<const char *> kinds{"qkv",
                                  "masked-softmax",
                                  "residual-layernorm",
                                  "bias-activation",
                                  "residual-rmsnorm",
                                  "gated-mlp",
                                  "grouped-query",
                                  "rotary"};
  llvm::StringMap<std::pair<int, int>> counts;
  for (const char *k : kinds)
    counts[k] = {0, 0};
  for (const FusionSite &s : sites)
    (s.fused ? counts[s.kind].first : counts[s.kind].second)++;
  if (counts.count("attention"))
    kinds.push_back("attention");
  // A quantized model's row: a float model has no site of it to show.
  if (counts.count("quantized-linear"))
    kinds.push_back("quantized-linear");
  // --quantize's layers: quantized ("fused") or kept float ("missed").
  if (counts.count("quantize"))
    kinds.push_back("quantize");
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
    llvm::json::Object report{{"model", model},
                              {"kinds", std::move(byKind)},
                              {"misses", std::move(misses)}};
    // The GPU's kernels, where the compile lowered for it.
    if (!kernels.empty())
      report["gpu"] = kernelReportJson(kernels);
    if (quantization)
      report["quantization"] = quantizationReportJson(*quantization);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
    return;
  }
  os << "fusion report for " << model << "\n";
  os << llvm::formatv("  {0,-20} {1,6} {2,7}\n", "kind", "fused", "missed");
  for (const char *k : kinds)
    os << llvm::formatv("  {0,-20} {1,6} {2,7}\n", k, counts[k].first,
                        counts[k].second);
  for (const FusionSite &s : sites)
    if (!s.fused)
      os << "  missed " << s.kind << " at "
         << mlir::tfm::describeLocation(s.loc) << ": " << s.reason << "\n";
  if (!kernels.empty())
    printKernelReport(os, kernels);
}

/// What --quantize did, from tfm-quantize's sites, and the error against
/// the float model where the library can be run here.
std::optional<QuantizationReport>
quantizationReport(const CompileCommand &c, ArrayRef<FusionSite> sites,
                   ModuleOp floatModule) {
  QuantizationReport r;
  r.mode = c.options.compiler.quantize;
  r.blockSize = c.options.compiler.quantizeBlockSize;
  r.sevenBit = c.options.compiler.quantizeSevenBit;
  for (const FusionSite &s : sites)
    if (s.kind == "quantize") {
      if (s.fused)
        ++r.quantized;
      else
        r.kept.push_back(s);
    }
  if (floatModule) {
    if (!measureQuantizationError(floatModule, c.output, c.options,
                                  c.checkInputs, r))
      return std::nullopt;
  } else if (c.stage != Stage::so) {
    r.notMeasured = "the check runs the compiled library (--emit=so)";
  } else if (c.options.compiler.target != mlir::tfm::Target::CPU) {
    r.notMeasured = "the check runs on this CPU, and the library is for "
                    "--target=cuda";
  } else {
    r.notMeasured = "--quantize-check=false";
  }
  return r;
}

int runCompile(MLIRContext &context, const CompileCommand &c) {
  return withModel(context, c.model, [&](ModuleOp module) -> int {
    // The passes report every site as a remark.
    std::vector<FusionSite> sites;
    std::vector<KernelSite> kernels;
    FusionRemarkCollector collect(&context, sites, &kernels);
    bool quantize =
        c.options.compiler.quantize != mlir::tfm::QuantizeMode::None;
    // The model as imported, for the float library the error is measured
    // against (its constants are shared, not copied).
    OwningOpRef<ModuleOp> floatModule;
    if (quantize && c.quantizeCheck && c.stage == Stage::so &&
        c.options.compiler.target == mlir::tfm::Target::CPU)
      floatModule = module.clone();
    int rc = compileTo(module, c.stage, c.output, c.options);
    if (rc != kExitOk)
      return rc;
    std::optional<QuantizationReport> quantization;
    if (quantize) {
      quantization = quantizationReport(
          c, sites, floatModule ? *floatModule : ModuleOp());
      if (!quantization)
        return kExitInputError;
      printQuantizationReport(llvm::errs(), *quantization);
    }
    if (c.report)
      printFusionReport(c.output != "-" ? llvm::outs() : llvm::errs(),
                        c.model.file, sites, kernels, c.reportJson,
                        quantization ? &*quantization : nullptr);
    return rc;
  });
}

int runGenerate(MLIRContext &context, const GenerateCommand &c) {
  if (isCompiledModel(c.model.file))
    return generateCompiled(c.model.file, c.generate);
  // A model file: compile it with --generate into a private folder first.
  return withModel(context, c.model, [&](ModuleOp module) -> int {
    SmallString<128> dir;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("tfmc-generate", dir)) {
      error() << "cannot create a temporary folder: " << ec.message() << "\n";
      return kExitInputError;
    }
    SmallString<128> so(dir);
    llvm::sys::path::append(so, "model.so");
    int rc = compileTo(module, Stage::so, so, c.options);
    if (rc == kExitOk)
      rc = generateCompiled(so, c.generate);
    llvm::sys::fs::remove(so);
    llvm::sys::fs::remove(dir);
    return rc;
  });
}

int runTrain(MLIRContext &context, const TrainCommand &c) {
  if (isCompiledModel(c.model.file)) {
    TrainOptions trainOpts = c.train;
    if (c.options.compiler.training)
      trainOpts.ignoreIndex = c.options.compiler.training->ignoreIndex;
    return trainCompiled(c.model.file, trainOpts);
  }
  const mlir::tfm::TrainingOptions &training = *c.options.compiler.training;
  return withModel(context, c.model, [&](ModuleOp module) -> int {
    if (c.reference) {
      PassManager pm(&context);
      if (failed(applyPassManagerCLOptions(pm)))
        return kExitUsage;
      mlir::tfm::buildTrainingPipeline(pm, /*remarks=*/false, training);
      if (failed(pm.run(module)))
        return kExitInputError;
      return trainReference(module.lookupSymbol<func::FuncOp>("train_step"),
                            c.train);
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
    int rc = compileTo(module, Stage::so, so, c.options);
    // The schedule compiled for the host trains on the CPU.
    TrainOptions trainOpts = c.train;
    trainOpts.ignoreIndex = training.ignoreIndex;
    if (c.options.compiler.gpuScheduleOnCPU)
      trainOpts.device = "cpu";
    if (rc == kExitOk)
      rc = trainCompiled(so, trainOpts, &*sig);
    llvm::sys::fs::remove(so);
    llvm::sys::fs::remove(dir);
    return rc;
  });
}

/// A model whose inputs have unbound dimension symbols, as its file gives
/// it: its ops, FLOPs and memory plan need the symbols bound.
void printSymbolicSignature(StringRef model,
                            const mlir::tfm::onnx_import::Signature &sig,
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
                       {"model", model},
                       {"symbols", llvm::json::Array(sig.symbols)},
                       {"inputs", ports(sig.inputs)},
                       {"outputs", ports(sig.outputs)},
                       {"bind", hint}}));
    return;
  }
  llvm::outs() << "model " << model << ", dimension symbols "
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

int runInspectCommand(MLIRContext &context, const InspectCommand &c) {
  const std::string &inputFile = c.model.file;
  if (isCompiledModel(inputFile))
    return mlir::tfm::tfmc::inspectCompiled(inputFile, c.json);
  // A model with dimension symbols is described as the file gives it; its
  // ops, FLOPs and memory plan need the symbols bound.
  if (modelFormat(inputFile) == ModelFormat::onnx) {
    mlir::tfm::onnx_import::Signature sig;
    std::string err;
    if (mlir::tfm::onnx_import::describeSignature(inputFile, sig, err) &&
        !sig.symbols.empty() && c.model.shapes.empty()) {
      printSymbolicSignature(inputFile, sig, c.json);
      return kExitOk;
    }
  }
  return withModel(context, c.model, [&](ModuleOp module) -> int {
    // The passes report every fusion site as a remark; the graph marks them.
    std::vector<FusionSite> sites;
    bool graph = !c.dotFile.empty();
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
      return runInspect(module, c.json, llvm::outs());
    std::string err;
    std::unique_ptr<llvm::ToolOutputFile> dot = openOutputFile(c.dotFile, &err);
    if (!dot) {
      error() << err << "\n";
      return kExitInputError;
    }
    writeModelGraph(module, llvm::sys::path::filename(inputFile), sites,
                    dot->os());
    dot->keep();
    // With the graph on stdout, the summary goes to stderr so that
    // `tfmc inspect m.onnx --dot - | dot -Tsvg` gets the graph alone.
    return runInspect(module, c.json,
                      c.dotFile == "-" ? llvm::errs() : llvm::outs());
  });
}

int runRunOnce(MLIRContext &context, const RunCommand &c);

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
int runRun(MLIRContext &context, const RunCommand &c) {
  std::vector<std::string> sets = testDataSets(c.run.testDataDir);
  if (sets.empty())
    return runRunOnce(context, c);
  int worst = kExitOk, matched = 0;
  for (const std::string &set : sets) {
    llvm::outs() << llvm::sys::path::filename(set) << ":\n";
    RunCommand one = c;
    one.run.testDataDir = one.model.testDataDir = set;
    int rc = runRunOnce(context, one);
    matched += rc == kExitOk;
    if (rc == kExitUsage)
      return rc;
    if (worst == kExitOk || rc == kExitInputError)
      worst = rc;
  }
  llvm::outs() << matched << " of " << sets.size()
               << " test data sets match\n";
  return worst;
}

int runRunOnce(MLIRContext &context, const RunCommand &c) {
  if (isCompiledModel(c.model.file))
    return runCompiled(c.model.file, c.run);
  return withModel(context, c.model, [&](ModuleOp module) -> int {
    // For a range of sizes, the signature (input numbering, index bounds)
    // is any bucket's: all take the same inputs.
    func::FuncOp fn;
    StringRef entry = c.run.entry;
    if (module->hasAttr("tfm.symbol_ranges")) {
      StringRef wanted = entry.empty() ? StringRef("infer") : entry;
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
    if (c.reference)
      return runReference(module, fn, c.run);
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
    int rc = compileTo(module, Stage::so, so, c.options);
    // The schedule compiled for the host runs on the CPU.
    RunOptions runOpts = c.run;
    if (c.options.compiler.gpuScheduleOnCPU)
      runOpts.device = "cpu";
    if (rc == kExitOk)
      rc = runCompiled(so, runOpts, &*sig);
    llvm::sys::fs::remove(so);
    llvm::sys::fs::remove(dir);
    return rc;
  });
}

} // namespace

int main(int argc, char **argv) {
  // A run that stops itself (an emulated kernel that would hang or race on
  // a GPU prints why, then aborts) keeps its last lines: stdout is flushed
  // before the crash report, whose handlers are registered after this one.
  llvm::sys::AddSignalHandler([](void *) { std::fflush(stdout); }, nullptr);
  llvm::InitLLVM init(argc, argv);
  mlir::tfm::setBugReportMessage();
  Command command;
  if (std::optional<int> done = parseCommandLine(argc, argv, command))
    return *done;

  DialectRegistry registry;
  registry.insert<mlir::tfm::TfmDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect>();
  mlir::tfm::registerGradientExternalModels(registry);
  mlir::tfm::registerAxisMapExternalModels(registry);
  mlir::tfm::registerPipelineExtensions(registry);
  mlir::tfm::registerTfmConversionPasses();
  mlir::tfm::registerCPUTarget();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Errors name the op at fault; a dump of it (often a whole function)
  // would bury the message.
  context.printOpOnDiagnostic(false);

  startCommandTiming();
  int rc = std::visit(
      [&](const auto &c) -> int {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, CompileCommand>)
          return runCompile(context, c);
        else if constexpr (std::is_same_v<T, RunCommand>)
          return runRun(context, c);
        else if constexpr (std::is_same_v<T, TrainCommand>)
          return runTrain(context, c);
        else if constexpr (std::is_same_v<T, GenerateCommand>)
          return runGenerate(context, c);
        else
          return runInspectCommand(context, c);
      },
      command);
  reportCommandTiming();
  return rc;
}
