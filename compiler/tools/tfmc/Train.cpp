//===- Train.cpp - tfmc train
//-----------------------------------------------===//
//
// Runs @train_step over the batches of a data folder, step after step, and
// prints the loss of each. A folder holds one batch (input_N.pb and
// labels.pb) or sub-folders of batches, taken in name order and cycled.
// In a data-parallel run every rank reads every batch and keeps its rows.
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
#include <optional>

using namespace mlir;
using namespace mlir::tfm::tfmc;
using mlir::tfm::reference::Tensor;

namespace {

/// Rows [begin, begin + count) of `t` along its first axis, then up to
/// `rows` copies of a real row (the first of them, or the batch's first),
/// or, with `fill`, rows of that value. A copied row keeps the padding's
/// activations finite (an all-zero attention mask may not), and its
/// ignored labels make its gradient exactly zero.
Tensor rowsOf(const Tensor &t, int64_t begin, int64_t count, int64_t rows,
              std::optional<int64_t> fill) {
  std::vector<int64_t> shape = t.shape;
  int64_t row = t.shape[0] ? t.numElements() / t.shape[0] : 0;
  shape[0] = rows;
  Tensor out(t.kind, shape);
  int64_t copied = count > 0 ? begin : 0;
  for (int64_t i = 0; i < rows * row; ++i) {
    bool padding = i >= count * row;
    int64_t from = padding ? copied * row + i % row : begin * row + i;
    if (padding && fill)
      out.setInt(i, *fill);
    else if (t.isInt())
      out.setInt(i, t.ints[from]);
    else
      out.set(i, t.data[from]);
  }
  return out;
}

/// This rank's part of a batch whose tensors `args` hold every rank's
/// rows: the labels' first axis is the batch, and so is each input's that
/// has as many rows as the labels where the step takes as many as its
/// labels.
bool shardBatch(const Signature &sig, StringRef dir, const BatchShard &shard,
                std::vector<Tensor> &args) {
  int64_t rows = -1, compiled = -1;
  for (auto [port, t] : llvm::zip(sig.inputs, args))
    if (port.name == "labels" && !port.shape.empty() && !t.shape.empty()) {
      rows = t.shape[0];
      compiled = port.shape[0];
    }
  if (rows < 0)
    return true;
  int64_t base = rows / shard.size, extra = rows % shard.size;
  int64_t count = base + (shard.rank < extra),
          begin = shard.rank * base + std::min<int64_t>(shard.rank, extra);
  if (count > compiled) {
    error() << "rank " << shard.rank << " of " << shard.size << " takes "
            << count << " of the " << rows << " rows of the batch in '" << dir
            << "', more than the " << compiled
            << " the step was compiled for; compile it with --shape "
               "batch="
            << (rows + shard.size - 1) / shard.size << " (or your batch "
            << "symbol)\n";
    return false;
  }
  for (auto [port, t] : llvm::zip(sig.inputs, args)) {
    bool batched = !t.shape.empty() && t.shape[0] == rows &&
                   !port.shape.empty() && port.shape[0] == compiled;
    if (!batched)
      continue;
    t = rowsOf(t, begin, count, compiled,
               port.name == "labels" ? std::optional(shard.ignoreIndex)
                                     : std::nullopt);
  }
  return true;
}

/// Reads one batch: the argument for each input port, from `input_N.pb`
/// (N its position among the ONNX graph's inputs) or `labels.pb`. With
/// several ranks the batch's first axis holds every rank's rows.
bool readBatch(const Signature &sig, StringRef dir, std::vector<Tensor> &args,
               const BatchShard &shard) {
  std::vector<Tensor> whole;
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
    // Across ranks the first axis may hold every rank's rows.
    bool sameRow =
        shard.size > 1 && t.rank() == (int64_t)port.shape.size() &&
        t.rank() > 0 &&
        std::equal(t.shape.begin() + 1, t.shape.end(), port.shape.begin() + 1);
    if (t.kind != port.kind || (t.shape != port.shape && !sameRow)) {
      error() << path << " holds " << t.typeString() << " but '" << port.name
              << "' must be "
              << Tensor(port.kind, port.shape, {}).typeString() << "\n";
      return false;
    }
    whole.push_back(std::move(t));
  }
  if (shard.size > 1 && !shardBatch(sig, dir, shard, whole))
    return false;
  for (auto [port, t] : llvm::zip(sig.inputs, whole))
    if (t.shape != port.shape) {
      error() << "'" << dir << "': '" << port.name << "' holds "
              << t.typeString() << ", which is not the rows of the labels ("
              << "the batch) but must be "
              << Tensor(port.kind, port.shape, {}).typeString() << "\n";
      return false;
    }
  for (Tensor &t : whole)
    args.push_back(std::move(t));
  return true;
}

} // namespace

bool mlir::tfm::tfmc::readTrainingData(const Signature &sig, StringRef dir,
                                       std::vector<std::vector<Tensor>> &out,
                                       const BatchShard &shard) {
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
    if (!readBatch(sig, b, args, shard))
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
