//===- Compile.cpp - tfmc compile past the fused stage --------------------===//
//
// The same pipeline builders tfm-opt registers (tfm-cpu-pipeline in two
// halves), then translation, object emission and linking, stopping at the
// stage --emit names.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/Conversion/Passes.h"
#include "tfm/Target/Artifact.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::tfm::tfmc;

namespace {

llvm::raw_ostream &error() {
  return llvm::WithColor::error(llvm::errs(), "tfmc");
}

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

/// Writes `blob` to `path` through a temporary file and a rename, so a
/// failed write never leaves a partial weights file behind.
bool writeAtomically(StringRef path, StringRef blob) {
  SmallString<256> tmp;
  int fd;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          path + ".tmp-%%%%%%", fd, tmp)) {
    error() << "cannot write '" << path << "': " << ec.message() << "\n";
    return false;
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << blob;
    os.flush();
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

} // namespace

int mlir::tfm::tfmc::compileTo(ModuleOp module, Stage stage, StringRef output,
                               const CompileOptions &options) {
  if (stage == Stage::ptx) {
    error() << "--emit=ptx needs --target=cuda, which this build does not "
               "have yet\n";
    return kExitInputError;
  }
  bool binary = stage == Stage::obj || stage == Stage::so;
  if (binary && output == "-") {
    error() << "--emit=" << (stage == Stage::obj ? "obj" : "so")
            << " writes a binary file; name it with -o\n";
    return kExitUsage;
  }

  PassManager pm(module.getContext());
  if (failed(applyPassManagerCLOptions(pm)))
    return kExitUsage;
  mlir::tfm::CPUPipelineOptions pipeline;
  pipeline.remarks = options.remarks;
  mlir::tfm::buildCPUBufferPipeline(pm, pipeline);
  if (stage != Stage::linalg)
    mlir::tfm::buildCPUToLLVMPipeline(pm);
  if (failed(pm.run(module)))
    return kExitInputError;
  if (stage == Stage::linalg)
    return writeText(output, [&](llvm::raw_ostream &os) {
      module.print(os);
      os << "\n";
    });

  std::string blob;
  mlir::tfm::ArtifactOptions artifact = options.artifact;
  if (artifact.externalWeights) {
    if (stage != Stage::so) {
      error() << "--external-weights applies to --emit=so\n";
      return kExitUsage;
    }
    FailureOr<std::string> b = mlir::tfm::buildWeightsBlob(module);
    if (failed(b))
      return kExitInputError;
    blob = std::move(*b);
    artifact.externalWeightsName =
        (llvm::sys::path::filename(output) + ".weights").str();
  }

  llvm::LLVMContext llvmContext;
  auto ir = mlir::tfm::translateToArtifactIR(module, llvmContext, artifact);
  if (failed(ir))
    return kExitInputError;
  if (stage == Stage::llvm)
    return writeText(output,
                     [&](llvm::raw_ostream &os) { (*ir)->print(os, nullptr); });

  std::string err;
  if (stage == Stage::obj) {
    if (failed(mlir::tfm::writeObjectFile(**ir, artifact, output, err))) {
      error() << err << "\n";
      return kExitInputError;
    }
    return kExitOk;
  }

  SmallString<128> object;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("tfm-model", "o", object)) {
    error() << "cannot create a temporary object file: " << ec.message()
            << "\n";
    return kExitInputError;
  }
  llvm::FileRemover removeObject(object);
  if (failed(mlir::tfm::writeObjectFile(**ir, artifact, object, err))) {
    error() << err << "\n";
    return kExitInputError;
  }
  // Link to a temporary name and rename: a reader never sees half a library.
  std::string partial = (output + ".tmp").str();
  llvm::FileRemover removePartial(partial);
  if (failed(mlir::tfm::linkSharedLibrary(object, partial, err))) {
    error() << err << "\n";
    return kExitInputError;
  }
  if (artifact.externalWeights) {
    SmallString<256> weightsPath(output);
    weightsPath += ".weights";
    if (!writeAtomically(weightsPath, blob))
      return kExitInputError;
  }
  if (std::error_code ec = llvm::sys::fs::rename(partial, output)) {
    error() << "cannot write '" << output << "': " << ec.message() << "\n";
    return kExitInputError;
  }
  return kExitOk;
}
