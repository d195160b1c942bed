//===- Train.cpp - tfmc train -----------------------------------------------===//
//
// Runs @train_step over the batches of a data folder, step after step, and
// prints the loss of each. A folder holds one batch (input_N.pb and
// labels.pb) or sub-folders of batches, taken in name order and cycled.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/Frontends/ONNX/TensorProto.h"
#include "tfm/Reference/Interpreter.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>

using namespace mlir;
using namespace mlir::tfm::tfmc;
using mlir::tfm::reference::Tensor;

namespace {

/// Reads one batch: the argument for each input port, from `input_N.pb`
/// (N its position among the ONNX graph's inputs) or `labels.pb`.
bool readBatch(const Signature &sig, StringRef dir,
               std::vector<Tensor> &args) {
  for (const Port &port : sig.inputs) {
    llvm::SmallString<256> path(dir);
    std::string file = port.name == "labels"
                           ? std::string("labels.pb")
                           : "input_" + std::to_string(port.graphPosition) +
                                 ".pb";
    llvm::sys::path::append(path, file);
    if (!llvm::sys::fs::exists(path)) {
      error() << "'" << dir << "' has no " << file << " (for input '"
              << port.name << "')\n";
      return false;
    }
    Tensor t;
    if (!readTensorFile(std::string(path), t))
      return false;
    // Labels may be given as int32; the step takes int64 class indices.
    if (port.name == "labels" &&
        t.kind == mlir::tfm::reference::ElementKind::I32)
      t.kind = mlir::tfm::reference::ElementKind::I64;
    if (t.kind != port.kind || t.shape != port.shape) {
      error() << path << " holds " << t.typeString() << " but '" << port.name
              << "' must be "
              << Tensor(port.kind, port.shape, {}).typeString() << "\n";
      return false;
    }
    args.push_back(std::move(t));
  }
  return true;
}

} // namespace

bool mlir::tfm::tfmc::readTrainingData(const Signature &sig, StringRef dir,
                                       std::vector<std::vector<Tensor>> &out) {
  if (!llvm::sys::fs::is_directory(dir)) {
    error() << "--data: '" << dir << "' is not a folder\n";
    return false;
  }
  llvm::SmallString<256> labels(dir);
  llvm::sys::path::append(labels, "labels.pb");
  std::vector<std::string> batches;
  if (llvm::sys::fs::exists(labels)) {
    batches.push_back(dir.str());
  } else {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end;
         it != end && !ec; it.increment(ec))
      if (llvm::sys::fs::is_directory(it->path()))
        batches.push_back(it->path());
    std::sort(batches.begin(), batches.end());
  }
  if (batches.empty()) {
    error() << "--data: '" << dir
            << "' holds neither labels.pb nor folders of batches\n";
    return false;
  }
  for (const std::string &b : batches) {
    std::vector<Tensor> args;
    if (!readBatch(sig, b, args))
      return false;
    out.push_back(std::move(args));
  }
  return true;
}

void mlir::tfm::tfmc::reportStep(unsigned step, unsigned steps, double loss,
                                 double seconds, bool showBar) {
  // The bar goes while the step's line prints: on one terminal the two
  // streams share lines.
  clearProgress();
  llvm::outs() << llvm::format("step %u/%u  loss %.6f  (%.3f s)\n", step,
                               steps, loss, seconds);
  llvm::outs().flush();
  if (!showBar || step == steps)
    return;
  // A progress bar on a terminal, redrawn in place.
  const unsigned width = 30;
  unsigned filled = steps ? step * width / steps : width;
  std::string bar(filled, '#');
  bar.resize(width, '.');
  showProgress("[" + bar + "] " + std::to_string(step) + "/" +
               std::to_string(steps));
}

int mlir::tfm::tfmc::trainReference(func::FuncOp trainStep,
                                    const TrainOptions &options) {
  std::optional<Signature> sig = signatureOf(trainStep);
  if (!sig)
    return kExitInputError;
  std::vector<std::vector<Tensor>> batches;
  if (!readTrainingData(*sig, options.dataDir, batches))
    return kExitInputError;
  mlir::tfm::reference::Interpreter interpreter;
  for (unsigned step = 1; step <= options.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    auto out = interpreter.run(trainStep,
                               batches[(step - 1) % batches.size()]);
    if (failed(out))
      return kExitInputError;
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    double loss = (*out)[0].get(0);
    reportStep(step, options.steps, loss, seconds, !options.quiet);
    if (!std::isfinite(loss)) {
      error() << "the loss is not finite at step " << step << "\n";
      return kExitInputError;
    }
  }
  return kExitOk;
}
