//===- Compile.cpp - tfmc compile past the fused stage --------------------===//
//
// The pipeline to the stage --emit names (buildPipelineToStage, which
// tfm-opt registers too), then translation, object emission and linking.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/Pipelines/Pipelines.h"
#include "tfm/Target/Artifact.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::tfm::tfmc;

namespace {

int writeText(StringRef output, llvm::function_ref<void(llvm::raw_ostream &)> f) {
  std::string err;
  auto out = openOutputFile(output, &err);
  if (!out) {
    error() << err << "\n";
    return kExitInputError;
  }
  f(out->os());
  out->keep();
  return kExitOk;
}

/// Writes the module's weights to `path` through a temporary file and a
/// rename, so a failed write never leaves a partial weights file behind.
bool writeWeightsAtomically(StringRef path,
                            const mlir::tfm::WeightsBlob &weights) {
  SmallString<256> tmp;
  int fd;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          path + ".tmp-%%%%%%", fd, tmp)) {
    error() << "cannot write '" << path << "': " << ec.message() << "\n";
    return false;
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    std::string err;
    bool laidOut = succeeded(mlir::tfm::writeWeights(weights, os, err));
    os.flush();
    if (!laidOut) {
      error() << err << "\n";
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return false;
    }
    if (os.has_error()) {
      error() << "cannot write '" << path << "': " << os.error().message()
              << "\n";
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return false;
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    error() << "cannot write '" << path << "': " << ec.message() << "\n";
    llvm::sys::fs::remove(tmp);
    return false;
  }
  return true;
}

/// One line on stderr naming the stage (and the pass) a compile is in,
/// redrawn in place and cleared at the end, so a long compile shows it is
/// alive without leaving anything behind.
class Progress : public PassInstrumentation {
public:
  explicit Progress(bool on) : on(on) {}
  ~Progress() override {
    if (on)
      clearProgress();
  }
  void stage(StringRef what) {
    if (on)
      showProgress(("tfmc: " + what).str());
  }
  void runBeforePass(Pass *pass, Operation *op) override {
    // Passes nested on each function would redraw the line per function;
    // the adaptors that nest them have no argument (no name to show).
    StringRef name = pass->getArgument();
    if (!isa<ModuleOp>(op) || name.empty())
      return;
    stage(("running passes: " + name).str());
  }

private:
  bool on;
};

DefaultTimingManager &timingManager() {
  static DefaultTimingManager manager;
  return manager;
}

} // namespace

TimingScope &mlir::tfm::tfmc::commandTiming() {
  static TimingScope root;
  return root;
}

void mlir::tfm::tfmc::startCommandTiming() {
  applyDefaultTimingManagerCLOptions(timingManager());
  commandTiming() = timingManager().getRootScope();
}

void mlir::tfm::tfmc::reportCommandTiming() {
  commandTiming().stop();
  commandTiming() = TimingScope();
  timingManager().print();
  timingManager().setEnabled(false);
}

int mlir::tfm::tfmc::compileTo(ModuleOp module, Stage stage, StringRef output,
                               const CompileOptions &options) {
  bool binary = stage == Stage::obj || stage == Stage::so;
  if (binary && output == "-") {
    error() << "--emit=" << (stage == Stage::obj ? "obj" : "so")
            << " writes a binary file; name it with -o\n";
    return kExitUsage;
  }

  // --mlir-timing reports the passes and the stages after them, beside
  // the import (the whole command's timer, printed when it ends).
  TimingScope &root = commandTiming();
  PassManager pm(module.getContext());
  if (failed(applyPassManagerCLOptions(pm)))
    return kExitUsage;
  TimingScope passTimer = root.nest("passes");
  pm.enableTiming(passTimer);
  // Cleared when the compile ends, before any message of the end.
  auto progress = std::make_unique<Progress>(options.progress);
  Progress &shown = *progress;
  pm.addInstrumentation(std::move(progress));
  std::string err;
  if (failed(mlir::tfm::buildPipelineToStage(pm, stage, options.compiler,
                                             err))) {
    error() << err << "\n";
    return kExitInputError;
  }
  if (failed(pm.run(module)))
    return kExitInputError;
  // The stages after the passes are timed beside them, not inside.
  passTimer.stop();
  if (stage == Stage::tfm || stage == Stage::fused || stage == Stage::linalg) {
    TimingScope writeTimer = root.nest("write the IR");
    return writeText(output, [&](llvm::raw_ostream &os) {
      module.print(os);
      os << "\n";
    });
  }
  if (stage == Stage::ptx) {
    auto ptx = module->getAttrOfType<StringAttr>("tfm.device_code");
    if (!ptx) {
      error() << "the model has no device code\n";
      return kExitInputError;
    }
    return writeText(output,
                     [&](llvm::raw_ostream &os) { os << ptx.getValue(); });
  }

  mlir::tfm::ArtifactOptions artifact = options.artifact;
  // The GPU's schedule run on this CPU is a test of the kernels, on
  // test-sized data: their emulation is straight-line code of every
  // lane's part, thousands of instructions a kernel, where O2 spent 43 s of
  // gpu-staged-gemm.mlir's 50-second compile, and whose run takes well
  // under a second either way.
  if (options.compiler.gpuScheduleOnCPU)
    artifact.optimize = false;
  if (artifact.externalWeights && stage != Stage::so) {
    error() << "--external-weights applies to --emit=so\n";
    return kExitUsage;
  }
  FailureOr<mlir::tfm::WeightsBlob> weights =
      mlir::tfm::weightsBlob(module);
  if (failed(weights))
    return kExitInputError;
  if (artifact.externalWeights)
    artifact.externalWeightsName =
        (llvm::sys::path::filename(output) + ".weights").str();

  llvm::LLVMContext llvmContext;
  shown.stage("translating to LLVM IR");
  TimingScope translateTimer = root.nest("translate and optimize LLVM IR");
  auto ir = mlir::tfm::translateToArtifactIR(module, llvmContext, artifact);
  translateTimer.stop();
  if (failed(ir))
    return kExitInputError;
  if (stage == Stage::llvm)
    return writeText(output,
                     [&](llvm::raw_ostream &os) { (*ir)->print(os, nullptr); });

  // The code and the embedded weights go to two objects, linked together.
  std::vector<std::string> objects;
  std::vector<std::unique_ptr<llvm::FileRemover>> removers;
  auto newObject = [&](StringRef prefix) -> std::string {
    SmallString<128> path;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile(prefix, "o", path)) {
      error() << "cannot create a temporary object file: " << ec.message()
              << "\n";
      return "";
    }
    removers.push_back(std::make_unique<llvm::FileRemover>(path));
    objects.push_back(std::string(path));
    return std::string(path);
  };
  shown.stage("generating machine code");
  TimingScope codegenTimer = root.nest("generate the object files");
  std::string codeObject = newObject("tfm-model");
  if (codeObject.empty())
    return kExitInputError;
  if (failed(mlir::tfm::writeObjectFile(**ir, artifact, codeObject, err))) {
    error() << err << "\n";
    return kExitInputError;
  }
  if (!artifact.externalWeights && weights->bytes > 0) {
    std::string weightsObject = newObject("tfm-weights");
    if (weightsObject.empty() ||
        failed(mlir::tfm::writeWeightsObject(*weights, weightsObject, err))) {
      error() << err << "\n";
      return kExitInputError;
    }
  }
  codegenTimer.stop();

  shown.stage("linking");
  TimingScope linkTimer = root.nest("link");
  // Link to a temporary name and rename: a reader never sees half a file.
  // The name is unique, so compiles to one output do not race for it; the
  // last rename wins, and each rename replaces a whole file.
  SmallString<256> partial;
  int fd;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          output + ".tmp-%%%%%%%%", fd, partial)) {
    error() << "cannot write '" << output << "': " << ec.message() << "\n";
    return kExitInputError;
  }
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  llvm::FileRemover removePartial(partial);
  if (failed(mlir::tfm::linkSharedLibrary(objects, partial,
                                          stage == Stage::obj, err))) {
    error() << err << "\n";
    return kExitInputError;
  }
  if (artifact.externalWeights) {
    SmallString<256> weightsPath(output);
    weightsPath += ".weights";
    if (!writeWeightsAtomically(weightsPath, *weights))
      return kExitInputError;
  }
  if (std::error_code ec = llvm::sys::fs::rename(partial, output)) {
    error() << "cannot write '" << output << "': " << ec.message() << "\n";
    return kExitInputError;
  }
  return kExitOk;
}
