//===- QuantizeCheck.cpp - What tfmc compile --quantize reports -----------===//
//
// A quantized model is only as good as its error: the layers tfm-quantize
// quantized and those it kept float (its remarks), and how far each output
// moved from the float model's on the same inputs. The float model is
// compiled beside the quantized one and both run through the runtime, so
// the error is that of the code the user ships, kernels included.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Reference/Tensor.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm::tfmc;
using mlir::tfm::reference::Tensor;

namespace {

/// How far `got` is from `want` (the float model's output).
QuantizationReport::Output compareOutput(const Port &port, const Tensor &got,
                                         const Tensor &want) {
  QuantizationReport::Output o;
  o.name = port.name;
  o.shape = want.shape;
  if (got.shape != want.shape) {
    o.note = "the quantized model's output is " + got.typeString() +
             ", the float model's " + want.typeString();
    return o;
  }
  int64_t n = want.numElements();
  if (!mlir::tfm::reference::isFloatKind(want.kind)) {
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i)
      same += got.getInt(i) == want.getInt(i);
    o.equal = n ? double(same) / n : 1.0;
    return o;
  }
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = got.data[i] - want.data[i];
    diff += d * d;
    norm += want.data[i] * want.data[i];
    o.maxAbs = std::max(o.maxAbs, std::fabs(d));
    o.largest = std::max(o.largest, std::fabs(want.data[i]));
  }
  o.relL2 = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  // The argmax over the last axis (a classifier's label, a language
  // model's next token) is what a user of logits sees change.
  int64_t last = want.shape.empty() ? 1 : want.shape.back();
  if (want.shape.size() >= 2 && last > 1) {
    o.rows = n / last;
    int64_t agree = 0;
    for (int64_t r = 0; r < o.rows; ++r) {
      const double *g = got.data.data() + r * last,
                   *w = want.data.data() + r * last;
      agree += std::max_element(g, g + last) - g ==
               std::max_element(w, w + last) - w;
    }
    o.argmaxAgreement = double(agree) / o.rows;
  }
  return o;
}

} // namespace

bool mlir::tfm::tfmc::measureQuantizationError(ModuleOp floatModule,
                                               StringRef quantizedSo,
                                               const CompileOptions &options,
                                               const RunOptions &inputs,
                                               QuantizationReport &report) {
  // The float model, compiled as the quantized one was but for the
  // quantization, into a file of its own that goes when the check ends.
  SmallString<128> floatSo;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("tfm-f32", "so", floatSo)) {
    error() << "cannot create a temporary file for the float model: "
            << ec.message() << "\n";
    return false;
  }
  llvm::FileRemover removeFloat(floatSo);
  CompileOptions f32 = options;
  f32.compiler.quantize = QuantizeMode::None;
  f32.compiler.remarks = false;
  f32.artifact.externalWeights = false;
  if (options.progress)
    showProgress("tfmc: compiling the float model to measure the error");
  if (compileTo(floatModule, Stage::so, floatSo, f32) != kExitOk) {
    error() << "the float model, compiled to measure the quantized one's "
               "error, failed; compile with --quantize-check=false to skip "
               "the measurement\n";
    return false;
  }

  std::unique_ptr<CompiledModel> quantized =
      CompiledModel::load(quantizedSo, inputs.threads, "cpu");
  std::unique_ptr<CompiledModel> reference =
      quantized ? CompiledModel::load(floatSo, inputs.threads, "cpu") : nullptr;
  if (!reference)
    return false;
  std::string entry = quantized->entryNamed(inputs.entry);
  if (entry.empty())
    return false;
  std::optional<Signature> sig = quantized->signature(entry);
  if (!sig)
    return false;
  std::vector<Tensor> args;
  if (!gatherInputs(*sig, inputs, args))
    return false;
  if (options.progress)
    showProgress("tfmc: running the float and the quantized model");
  auto want = reference->run(*sig, args);
  auto got = want ? quantized->run(*sig, args) : std::nullopt;
  clearProgress();
  if (!got)
    return false;
  report.entry = entry;
  report.inputs = inputs.inputs.empty()
                      ? llvm::formatv("random inputs (--seed {0})",
                                      inputs.seed)
                            .str()
                      : std::string("the inputs given");
  for (auto [i, port] : llvm::enumerate(sig->outputs))
    report.outputs.push_back(compareOutput(port, (*got)[i], (*want)[i]));
  return true;
}

void mlir::tfm::tfmc::printQuantizationReport(llvm::raw_ostream &os,
                                              const QuantizationReport &r) {
  os << "tfmc: quantized " << r.quantized << " linear layer"
     << (r.quantized == 1 ? "" : "s") << " to "
     << quantizeModeName(r.mode)
     << (r.mode == QuantizeMode::Int8
             ? std::string(" (weights per output feature") +
                   (r.sevenBit ? " within 7 bits, for a CPU without VNNI"
                               : "") +
                   ", inputs quantized at run time)"
             : llvm::formatv(" (weight-only, blocks of {0} along K)",
                             r.blockSize)
                   .str());
  if (r.kept.empty()) {
    os << "\n";
  } else {
    os << "; kept in float: " << r.kept.size() << "\n";
    for (const FusionSite &s : r.kept)
      os << "  " << mlir::tfm::describeLocation(s.loc) << ": " << s.reason
         << "\n";
  }
  if (r.outputs.empty()) {
    if (!r.notMeasured.empty())
      os << "tfmc: the error against f32 is not measured: " << r.notMeasured
         << "\n";
    return;
  }
  os << "tfmc: error against the f32 model on " << r.inputs << ", @"
     << r.entry << ":\n";
  for (const QuantizationReport::Output &o : r.outputs) {
    os << "  " << o.name << ": ";
    if (!o.note.empty())
      os << o.note;
    else if (o.equal)
      os << llvm::format("%.1f%% of the values equal", 100 * *o.equal);
    else {
      os << llvm::format("rel l2 %.3g, max abs %.3g (largest |f32| %.3g)",
                         o.relL2, o.maxAbs, o.largest);
      if (o.argmaxAgreement)
        os << llvm::format(", argmax over the last axis agrees in %.1f%% of "
                           "%lld rows",
                           100 * *o.argmaxAgreement,
                           static_cast<long long>(o.rows));
    }
    os << "\n";
  }
}

llvm::json::Object
mlir::tfm::tfmc::quantizationReportJson(const QuantizationReport &r) {
  llvm::json::Array kept, outputs;
  for (const FusionSite &s : r.kept)
    kept.push_back(llvm::json::Object{
        {"location", mlir::tfm::describeLocation(s.loc)},
        {"reason", s.reason}});
  for (const QuantizationReport::Output &o : r.outputs) {
    llvm::json::Object out{{"name", o.name}};
    if (!o.note.empty())
      out["note"] = o.note;
    else if (o.equal)
      out["equal"] = *o.equal;
    else {
      out["rel_l2"] = o.relL2;
      out["max_abs"] = o.maxAbs;
      out["largest"] = o.largest;
      if (o.argmaxAgreement) {
        out["argmax_agreement"] = *o.argmaxAgreement;
        out["rows"] = o.rows;
      }
    }
    outputs.push_back(std::move(out));
  }
  llvm::json::Object json{{"mode", quantizeModeName(r.mode)},
                          {"quantized", r.quantized},
                          {"kept_in_float", std::move(kept)}};
  if (r.mode == QuantizeMode::Int4)
    json["block_size"] = r.blockSize;
  if (r.mode == QuantizeMode::Int8)
    json["weight_bits"] = r.sevenBit ? 7 : 8;
  if (!r.outputs.empty()) {
    json["entry"] = r.entry;
    json["inputs"] = r.inputs;
    json["outputs"] = std::move(outputs);
  } else if (!r.notMeasured.empty()) {
    json["not_measured"] = r.notMeasured;
  }
  return json;
}
