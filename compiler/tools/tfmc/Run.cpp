//===- Run.cpp - tfmc run ---------------------------------------------------===//
//
// Builds the inputs (from .pb files or from a seeded generator), evaluates
// them (with the reference interpreter, or compiled code through the
// runtime), and prints, writes or compares the outputs.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/CounterRNG.h"
#include "tfm/Frontends/ONNX/TensorProto.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Reference/Interpreter.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfm::tfmc;
using mlir::tfm::InputValues;
using mlir::tfm::reference::ElementKind;
using mlir::tfm::reference::isFloatKind;
using mlir::tfm::reference::Tensor;

namespace {

/// The user-facing name of argument or result `i`: its `tfm.name` attribute,
/// or a positional default.
std::string valueName(DictionaryAttr attrs, StringRef prefix, unsigned i) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("tfm.name"))
      return name.str();
  return (prefix + Twine(i)).str();
}

std::string argName(func::FuncOp fn, unsigned i) {
  return valueName(fn.getArgAttrDict(i), "arg", i);
}

std::string resultName(func::FuncOp fn, unsigned i) {
  return valueName(fn.getResultAttrDict(i), "output_", i);
}

/// The range random integers for `values` are drawn from: indices within
/// what the model accepts (negative ones count from the end where an op
/// takes them; made-up ones are the plain kind), else small ones.
std::pair<int64_t, int64_t> randomIntegerRange(const InputValues &values) {
  if (values.kind != TFM_INPUT_VALUES_INDICES)
    return {0, 10};
  return {values.upper > 0 ? std::max<int64_t>(values.lower, 0) : values.lower,
          values.upper};
}

/// A random value for `port`: floats in [-1, 1); indices within what the
/// model reads them from, a mask all ones (a random one masks whole rows,
/// and the outputs turn to NaN); other integers small, other booleans
/// mostly true.
Tensor randomInput(const Port &port, uint64_t seed) {
  Tensor t(port.kind, port.largest.empty() ? port.shape : port.largest);
  const InputValues &values = port.values;
  auto [lower, upper] = randomIntegerRange(values);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double u = tfm_rng_uniform(seed, i);
    if (values.kind == TFM_INPUT_VALUES_MASK && t.isInt())
      t.setInt(i, 1);
    else if (values.kind == TFM_INPUT_VALUES_MASK)
      t.data[i] = 1.0;
    else if (t.kind == ElementKind::I1)
      t.data[i] = u < 0.9 ? 1.0 : 0.0;
    else if (t.isInt())
      t.setInt(i, lower + static_cast<int64_t>(
                              u * static_cast<double>(upper - lower)));
    else
      // Round to the element type so the run is reproducible from its .pb.
      t.data[i] = mlir::tfm::reference::roundToKind(2.0 * u - 1.0, t.kind);
  }
  return t;
}

/// An output of NaNs (a mask that masks every position, an overflow) is
/// easily taken for a result: say so, whatever the exit status.
void warnOnNaN(const Signature &sig, const std::vector<Tensor> &results) {
  for (auto [port, t] : llvm::zip(sig.outputs, results)) {
    if (!isFloatKind(t.kind))
      continue;
    int64_t nan = 0;
    for (double v : t.data)
      nan += std::isnan(v);
    if (nan)
      llvm::errs() << "tfmc: warning: output '" << port.name << "' holds "
                   << nan << " NaN" << (nan == 1 ? "" : "s") << " in its "
                   << t.numElements() << " values\n";
  }
}

/// How randomInput fills `port`, for the note on inputs not given.
std::string randomDescription(const Port &port) {
  const InputValues &values = port.values;
  if (values.kind == TFM_INPUT_VALUES_MASK)
    return "all ones (a mask)";
  if (isFloatKind(port.kind))
    return "uniform in [-1, 1)";
  if (port.kind == ElementKind::I1)
    return "90% true";
  auto [lower, upper] = randomIntegerRange(values);
  return (values.kind == TFM_INPUT_VALUES_INDICES ? "indices in ["
                                                  : "integers in [") +
         std::to_string(lower) + ", " + std::to_string(upper) + ")";
}

/// Reads `DIR/PREFIX_N.pb` for N = 0, 1, ... until one is missing.
bool readNumbered(StringRef dir, StringRef prefix, std::vector<Tensor> &out) {
  for (unsigned i = 0;; ++i) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, (prefix + "_" + Twine(i) + ".pb").str());
    if (!llvm::sys::fs::exists(path))
      return true;
    Tensor t;
    if (!readTensorFile(std::string(path), t))
      return false;
    out.push_back(std::move(t));
  }
}

std::string typeString(const Port &p) {
  return Tensor(p.kind, p.shape, {}).typeString();
}

/// Older ONNX test data stores bfloat16 values as their bit patterns in
/// UINT16 tensors; such a tensor given for a bf16 port is read as bf16.
void readBf16Bits(const Port &port, Tensor &t) {
  if (port.kind != ElementKind::BF16 || t.kind != ElementKind::U16)
    return;
  Tensor bf(ElementKind::BF16, t.shape);
  for (int64_t i = 0; i < t.numElements(); ++i)
    bf.data[i] = mlir::tfm::onnx_io::bf16BitsToDouble(
        static_cast<uint16_t>(t.ints[i]));
  t = std::move(bf);
}

bool checkInput(const Port &port, unsigned i, Tensor &t) {
  readBf16Bits(port, t);
  // -1 takes any size; the runtime checks it against the entry's range.
  bool shapeFits = port.shape.size() == t.shape.size();
  for (size_t a = 0; shapeFits && a < t.shape.size(); ++a)
    shapeFits = port.shape[a] == -1 || port.shape[a] == t.shape[a];
  if (port.kind == t.kind && shapeFits)
    return true;
  error() << "input " << i << " '" << port.name << "' must be "
          << typeString(port) << " but the value given is " << t.typeString()
          << "\n";
  return false;
}

} // namespace

bool mlir::tfm::tfmc::gatherInputs(const Signature &sig,
                                   const RunOptions &opts,
                                   std::vector<Tensor> &args) {
  unsigned n = sig.inputs.size();
  std::vector<std::optional<Tensor>> given(n);
  if (!opts.testDataDir.empty()) {
    std::vector<Tensor> files;
    if (!readNumbered(opts.testDataDir, "input", files))
      return false;
    // Imported ONNX models number their inputs as the graph does, which
    // differs from the argument order when shape inputs were bound.
    if (files.size() != sig.numGraphInputs) {
      error() << "'" << opts.testDataDir << "' holds " << files.size()
              << " input_N.pb files but '" << sig.entry << "' takes "
              << sig.numGraphInputs << " inputs\n";
      return false;
    }
    for (unsigned i = 0; i < n; ++i)
      given[i] = files[sig.inputs[i].graphPosition];
  }
  for (const std::string &spec : opts.inputs) {
    auto [name, path] = StringRef(spec).split('=');
    if (path.empty()) {
      error() << "--input expects NAME=FILE.pb, got '" << spec << "'\n";
      return false;
    }
    std::optional<unsigned> index;
    for (unsigned i = 0; i < n; ++i)
      if (sig.inputs[i].name == name || std::to_string(i) == name)
        index = i;
    if (!index) {
      error() << "--input names '" << name << "', which is not an input of '"
              << sig.entry << "'; its inputs are:";
      for (const Port &p : sig.inputs)
        llvm::errs() << " " << p.name;
      llvm::errs() << "\n";
      return false;
    }
    Tensor t;
    if (!readTensorFile(path.str(), t))
      return false;
    given[*index] = std::move(t);
  }
  // Inputs made up beside given ones are easily missed: say which and how.
  bool someGiven = llvm::any_of(given, [](auto &t) { return t.has_value(); });
  for (unsigned i = 0; someGiven && i < n; ++i)
    if (!given[i])
      llvm::errs() << "tfmc: note: input '" << sig.inputs[i].name
                   << "' is not given; it is random (--seed " << opts.seed
                   << "): " << randomDescription(sig.inputs[i]) << "\n";
  for (unsigned i = 0; i < n; ++i) {
    const Port &port = sig.inputs[i];
    int64_t elements = 1;
    for (int64_t d : port.largest.empty() ? port.shape : port.largest)
      elements *= d;
    if (!given[i] && elements > (int64_t(1) << 30)) {
      error() << "input " << i << " '" << port.name << "' of type "
              << typeString(port) << " is too large to generate at random\n";
      return false;
    }
    Tensor t = given[i] ? std::move(*given[i])
                        : randomInput(port, tfm_rng_mix64(opts.seed + i));
    if (!checkInput(port, i, t))
      return false;
    args.push_back(std::move(t));
  }
  return true;
}

namespace {

void printTensor(const std::string &name, const Tensor &t, unsigned limit) {
  llvm::outs() << name << ": " << t.typeString() << "\n  [";
  size_t total = static_cast<size_t>(t.numElements());
  size_t shown = std::min<size_t>(limit, total);
  for (size_t i = 0; i < shown; ++i) {
    if (i)
      llvm::outs() << ", ";
    if (mlir::tfm::reference::isFloatKind(t.kind))
      llvm::outs() << llvm::format("%.6g", t.data[i]);
    else
      llvm::outs() << t.getInt(i);
  }
  if (shown < total)
    llvm::outs() << ", ... (" << total - shown << " more)";
  llvm::outs() << "]\n";
}

/// Compares as numpy.allclose does (NaN matches NaN), or, with `relL2`
/// >= 0, by the normwise relative error ||got - want|| / ||want|| alone:
/// at d_model 768 PyTorch's own f32 rounding exceeds rtol 1e-4 on some
/// elements of a correct result.
bool compare(const std::string &name, const Tensor &got, const Tensor &want,
             double rtol, double atol, double relL2) {
  if (got.shape != want.shape) {
    llvm::outs() << name << ": shape mismatch: got " << got.typeString()
                 << ", expected " << want.typeString() << "\n";
    return false;
  }
  double maxAbs = 0, maxRel = 0, errSq = 0, refSq = 0;
  int64_t bad = 0, firstBad = -1;
  for (int64_t i = 0; i < got.numElements(); ++i) {
    if (got.isInt() && want.isInt()) {
      // Integers compare exactly (a double would merge neighbours past 2^53).
      if (got.ints[i] != want.ints[i]) {
        if (firstBad < 0)
          firstBad = i;
        ++bad;
        maxAbs = INFINITY;
      }
      continue;
    }
    double g = got.get(i), w = want.get(i);
    if (std::isnan(g) && std::isnan(w))
      continue;
    if (std::isfinite(g) && std::isfinite(w)) {
      errSq += (g - w) * (g - w);
      refSq += w * w;
    }
    double abs = std::fabs(g - w);
    if (std::isnan(abs) || std::isinf(abs))
      abs = g == w ? 0 : INFINITY;
    double rel = w != 0 ? abs / std::fabs(w) : (abs == 0 ? 0 : INFINITY);
    maxAbs = std::max(maxAbs, abs);
    maxRel = std::max(maxRel, rel);
    if (!(abs <= atol + rtol * std::fabs(w))) {
      if (firstBad < 0)
        firstBad = static_cast<int64_t>(i);
      ++bad;
    }
  }
  // The normwise error is what reduced precision (bf16) is judged by;
  // elementwise relative errors blow up on outputs near zero.
  double normRel = refSq > 0 ? std::sqrt(errSq / refSq) : std::sqrt(errSq);
  llvm::outs() << name << ": max abs error " << llvm::format("%.3g", maxAbs)
               << ", max rel error " << llvm::format("%.3g", maxRel)
               << ", rel l2 error " << llvm::format("%.3g", normRel);
  if (relL2 >= 0 && !got.isInt()) {
    bool ok = normRel <= relL2;
    llvm::outs() << (ok ? ": ok (normwise)\n" : ": MISMATCH (normwise)\n");
    return ok;
  }
  if (bad == 0) {
    llvm::outs() << ": ok\n";
    return true;
  }
  llvm::outs() << ": MISMATCH in " << bad << " of " << got.numElements()
               << " elements (first at flat index " << firstBad << ": got ";
  if (got.isInt() && want.isInt())
    llvm::outs() << got.ints[firstBad] << ", expected " << want.ints[firstBad];
  else
    llvm::outs() << llvm::format("%.9g", got.get(firstBad)) << ", expected "
                 << llvm::format("%.9g", want.get(firstBad));
  llvm::outs() << ")\n";
  return false;
}

} // namespace

DenseElementsAttr mlir::tfm::tfmc::readConstant(MLIRContext *context,
                                                StringRef path) {
  Tensor t;
  if (!readTensorFile(path.str(), t))
    return {};
  return mlir::tfm::reference::Interpreter::toAttr(
      t, RankedTensorType::get(
             t.shape, mlir::tfm::reference::elementTypeOf(context, t.kind)));
}

func::FuncOp mlir::tfm::tfmc::findEntry(ModuleOp module, StringRef entry) {
  if (!entry.empty()) {
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn)
      error() << "the module has no function '@" << entry << "'\n";
    return fn;
  }
  if (auto fn = module.lookupSymbol<func::FuncOp>("infer"))
    return fn;
  SmallVector<func::FuncOp> publics;
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn.isPublic() && !fn.isExternal())
      publics.push_back(fn);
  if (publics.size() == 1)
    return publics.front();
  error() << "cannot tell which function to run: there is no '@infer' and "
          << publics.size() << " public functions; name one with --entry\n";
  return {};
}

std::optional<Signature> mlir::tfm::tfmc::signatureOf(func::FuncOp fn) {
  Signature sig;
  sig.entry = fn.getSymName().str();
  auto portOf = [&](Type type, std::string name,
                    bool isInput, unsigned i) -> std::optional<Port> {
    auto r = dyn_cast<RankedTensorType>(type);
    auto kind = r ? mlir::tfm::reference::elementKindOf(r.getElementType())
                  : FailureOr<ElementKind>(failure());
    if (!r || !r.hasStaticShape() || failed(kind)) {
      error() << (isInput ? "input " : "output ") << i << " of '"
              << fn.getSymName() << "' has type " << type
              << ", which cannot be " << (isInput ? "fed" : "read") << "\n";
      return std::nullopt;
    }
    Port p;
    p.name = std::move(name);
    p.kind = *kind;
    p.shape.assign(r.getShape().begin(), r.getShape().end());
    return p;
  };
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto p = portOf(fn.getArgumentTypes()[i], argName(fn, i), true, i);
    if (!p)
      return std::nullopt;
    p->graphPosition = i;
    if (auto attr = fn.getArgAttrOfType<IntegerAttr>(i, "tfm.input_index"))
      p->graphPosition = attr.getInt();
    p->values = mlir::tfm::inputValuesOf(fn.getArgument(i));
    sig.inputs.push_back(std::move(*p));
  }
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    auto p = portOf(fn.getResultTypes()[i], resultName(fn, i), false, i);
    if (!p)
      return std::nullopt;
    sig.outputs.push_back(std::move(*p));
  }
  sig.numGraphInputs = fn.getNumArguments();
  if (auto total = fn->getAttrOfType<IntegerAttr>("tfm.num_graph_inputs"))
    sig.numGraphInputs = total.getInt();
  return sig;
}

int mlir::tfm::tfmc::runReference(ModuleOp module, func::FuncOp fn,
                                  const RunOptions &opts) {
  std::optional<Signature> sig = signatureOf(fn);
  if (!sig)
    return kExitInputError;
  return runWith(*sig, opts,
                 [&](const std::vector<Tensor> &args)
                     -> std::optional<std::vector<Tensor>> {
                   mlir::tfm::reference::Interpreter interpreter;
                   auto results = interpreter.run(fn, args);
                   if (failed(results))
                     return std::nullopt;
                   return std::move(*results);
                 });
}

int mlir::tfm::tfmc::runWith(const Signature &sig, const RunOptions &opts,
                             const Evaluate &evaluate,
                             std::vector<Tensor> *inputsOut) {
  std::vector<Tensor> args;
  if (!gatherInputs(sig, opts, args))
    return kExitInputError;
  std::vector<Tensor> expected;
  if (!opts.testDataDir.empty()) {
    if (!readNumbered(opts.testDataDir, "output", expected))
      return kExitInputError;
    if (expected.size() != sig.outputs.size()) {
      error() << "'" << opts.testDataDir << "' holds " << expected.size()
              << " output_N.pb files but '" << sig.entry << "' returns "
              << sig.outputs.size() << " results\n";
      return kExitInputError;
    }
    for (auto [port, t] : llvm::zip(sig.outputs, expected))
      readBf16Bits(port, t);
  }

  auto results = evaluate(args);
  if (!results)
    return kExitInputError;
  warnOnNaN(sig, *results);

  if (!opts.outputDir.empty()) {
    if (std::error_code ec =
            llvm::sys::fs::create_directories(opts.outputDir)) {
      error() << "cannot create '" << opts.outputDir << "': " << ec.message()
              << "\n";
      return kExitInputError;
    }
    // The inputs go beside the outputs, so the folder is a complete case in
    // the backend-test layout that --test-data-dir can replay.
    auto writeAll = [&](const std::vector<Tensor> &tensors, StringRef prefix,
                        const std::vector<Port> &ports) {
      for (auto [i, t] : llvm::enumerate(tensors)) {
        llvm::SmallString<256> path(opts.outputDir);
        llvm::sys::path::append(path, prefix + "_" + Twine(i) + ".pb");
        std::string err;
        if (!mlir::tfm::onnx_io::writeTensorProtoFile(
                std::string(path), {ports[i].name, t}, err)) {
          error() << err << "\n";
          return false;
        }
      }
      return true;
    };
    if (!writeAll(args, "input", sig.inputs) ||
        !writeAll(*results, "output", sig.outputs))
      return kExitInputError;
  }
  if (inputsOut)
    *inputsOut = args;

  if (expected.empty()) {
    if (opts.outputDir.empty())
      for (auto [i, t] : llvm::enumerate(*results))
        printTensor(sig.outputs[i].name, t, opts.printLimit);
    else
      llvm::outs() << "wrote " << args.size() << " inputs and "
                   << results->size() << " outputs to '" << opts.outputDir
                   << "'\n";
    return kExitOk;
  }

  bool allMatch = true;
  for (auto [i, t] : llvm::enumerate(*results))
    allMatch &= compare(sig.outputs[i].name, t, expected[i], opts.rtol,
                        opts.atol, opts.relL2);
  llvm::outs() << (allMatch ? "all outputs match" : "outputs do not match");
  if (opts.relL2 >= 0)
    llvm::outs() << " (rel l2 " << llvm::format("%g", opts.relL2)
                 << "; integers exactly)\n";
  else
    llvm::outs() << " (rtol " << llvm::format("%g", opts.rtol) << ", atol "
                 << llvm::format("%g", opts.atol) << ")\n";
  return allMatch ? kExitOk : kExitMismatch;
}

bool mlir::tfm::tfmc::readTensorFile(const std::string &path, Tensor &out) {
  mlir::tfm::onnx_io::NamedTensor named;
  std::string err;
  if (!mlir::tfm::onnx_io::readTensorProtoFile(path, named, err)) {
    error() << err << "\n";
    return false;
  }
  out = std::move(named.tensor);
  return true;
}
