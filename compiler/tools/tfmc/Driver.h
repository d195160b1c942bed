//===- Driver.h - Shared pieces of the tfmc subcommands ---------*- C++ -*-===//

#ifndef TFM_TOOLS_TFMC_DRIVER_H
#define TFM_TOOLS_TFMC_DRIVER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::tfm::tfmc {

/// The exit codes of the CLI contract.
enum ExitCode : int {
  kExitOk = 0,
  kExitInputError = 1, // the input or model is at fault; a message says why
  kExitUsage = 2,
  kExitMismatch = 3, // outputs did not match the expected ones
};

/// Options of `tfmc run --reference`.
struct RunOptions {
  std::string entry;
  std::vector<std::string> inputs; // NAME=FILE.pb
  std::string testDataDir;
  std::string outputDir;
  uint64_t seed = 0;
  double rtol = 1e-4;
  double atol = 1e-5;
  unsigned printLimit = 16;
};

/// Reads a .pb TensorProto as a dense constant; reports and returns null on
/// failure.
mlir::DenseElementsAttr readConstant(mlir::MLIRContext *context,
                                     llvm::StringRef path);

/// Picks the function to run: `entry` if given, else `@infer`, else the only
/// public function. Reports an error and returns null when there is none.
mlir::func::FuncOp findEntry(mlir::ModuleOp module, llvm::StringRef entry);

/// Evaluates `fn` with the reference interpreter and prints, writes or
/// compares its outputs. Returns an ExitCode.
int runReference(mlir::ModuleOp module, mlir::func::FuncOp fn,
                 const RunOptions &options);

/// Prints the summary of `tfmc inspect` (text, or JSON with `json`).
int runInspect(mlir::ModuleOp module, bool json);

} // namespace mlir::tfm::tfmc

#endif // TFM_TOOLS_TFMC_DRIVER_H
