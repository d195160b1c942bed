//===- CommandLine.h - What each tfmc subcommand is asked -------*- C++ -*-===//
//
// The flags are declared once, in CommandLine.cpp, and read there into the
// struct of the subcommand that takes them. Each struct's validate() is the
// one place where its flags are checked together, and where a flag applies
// at all (a target, a device, the interpreter, a compiled library) is one
// row of a table beside it: a new flag's limits are written once.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TOOLS_TFMC_COMMANDLINE_H
#define TFM_TOOLS_TFMC_COMMANDLINE_H

#include "Driver.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace mlir::tfm::tfmc {

/// The model a subcommand reads, and what fixes its import.
struct ModelSource {
  std::string file;
  std::vector<std::string> shapes; // --shape
  std::vector<std::string> binds;  // --bind
  /// --buckets-per-octave, where given.
  std::optional<unsigned> bucketsPerOctave;
  /// A test case whose inputs give the dynamic shapes and shape inputs.
  std::string testDataDir;
  /// Whether the import keeps the weights trainable (train, compile --train).
  bool trainable = false;
  /// Whether a range of sizes is refused: the entries compiled besides
  /// inference (--train, --generate) take one size.
  bool oneSize = false;
  /// With --generate: the sizes that the first input's (the token ids')
  /// dynamic batch and sequence take when no --shape fixes them. Generation
  /// fixes both: the batch is 1 or the beam's width, the sequence the
  /// longest one generated (0: none known, so --max-length is asked for).
  struct GenerationSizes {
    int64_t batch = 1;
    int64_t maxLength = 0;
  };
  std::optional<GenerationSizes> generationSizes;
};

struct CompileCommand {
  ModelSource model;
  Stage stage = Stage::tfm;
  std::string output;
  bool report = false, reportJson = false;
  CompileOptions options;
  /// With --quantize: measure the error against the float model, on
  /// `checkInputs`' inputs (its --input files, --seed and --entry).
  bool quantizeCheck = true;
  RunOptions checkInputs;
  bool validate() const;
};

struct RunCommand {
  ModelSource model;
  RunOptions run;
  bool reference = false;
  /// How a model file is compiled for --device.
  CompileOptions options;
  bool validate() const;
};

struct TrainCommand {
  ModelSource model;
  TrainOptions train;
  bool reference = false;
  /// How a model file is compiled for --device, its training options set.
  CompileOptions options;
  bool validate() const;
};

struct GenerateCommand {
  ModelSource model;
  GenerateOptions generate;
  /// How a model file is compiled for --device, with --generate.
  CompileOptions options;
  bool validate() const;
};

struct InspectCommand {
  ModelSource model;
  bool json = false;
  std::string dotFile;
  bool validate() const;
};

using Command = std::variant<CompileCommand, RunCommand, TrainCommand,
                             GenerateCommand, InspectCommand>;

/// Parses the command line into the subcommand's struct and validates it.
/// Returns std::nullopt to go on with `command`, or the exit code when the
/// command is done (--help, --version) or refused (reported).
std::optional<int> parseCommandLine(int argc, char **argv, Command &command);

/// Prints a diagnostic about an ONNX model as `FILE: node 'N' (OpType):
/// error: message`, naming the node from its location.
void printOnnxDiagnostic(Diagnostic &d, llvm::StringRef file);

/// What a model file holds, judged by its first bytes rather than its name.
enum class ModelFormat { onnx, mlir, library };
ModelFormat modelFormat(llvm::StringRef path);
inline bool isCompiledModel(llvm::StringRef path) {
  return modelFormat(path) == ModelFormat::library;
}

/// Refuses a model file that holds nothing, or whose contents contradict
/// its name, and says what a file of another name is read as.
bool checkModelFile(llvm::StringRef path, llvm::StringRef command);

} // namespace mlir::tfm::tfmc

#endif // TFM_TOOLS_TFMC_COMMANDLINE_H
