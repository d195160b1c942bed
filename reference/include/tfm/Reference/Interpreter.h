//===- Interpreter.h - The reference interpreter of tfm ---------*- C++ -*-===//
//
// A plain evaluator, in double precision (integers exact), of every tfm op
// plus func.func, func.return, func.call, arith.constant and the math ops
// imported models use on tensors. It fixes the semantics that the fusion
// passes must preserve and the backends must reproduce. The per-op
// semantics are the pure functions of Ops.h; this is their dispatcher, by
// op name.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_REFERENCE_INTERPRETER_H
#define TFM_REFERENCE_INTERPRETER_H

#include "tfm/Reference/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>

namespace mlir::tfm::reference {

/// Maps an MLIR element type to the interpreter's kinds; fails on others.
mlir::FailureOr<ElementKind> elementKindOf(mlir::Type type);

/// The MLIR element type of a kind (the inverse of elementKindOf).
mlir::Type elementTypeOf(mlir::MLIRContext *context, ElementKind kind);

/// What a session keeps between runs: the parameters by name (one not yet
/// here reads its initial value), Adam's moments, the step count, and the
/// generation caches (zeros until written).
struct TrainingState {
  std::map<std::string, Tensor> parameters, firstMoments, secondMoments,
      caches;
  int64_t step = 0;
};

/// Evaluates functions of one module. Errors (a bad index, an unsupported op,
/// a wrong argument) are reported as MLIR diagnostics on the op at fault.
class Interpreter {
public:
  Interpreter() = default;

  /// Runs `fn` on `args`, which must match its argument types.
  mlir::FailureOr<std::vector<Tensor>> run(mlir::func::FuncOp fn,
                                           const std::vector<Tensor> &args);

  /// Evaluates one op on operand values, which must match its operand types.
  /// Importers use this to fold ops whose operands are all constants, so the
  /// folded value is by construction what the interpreter would compute.
  mlir::FailureOr<std::vector<Tensor>>
  evaluate(mlir::Operation *op, const std::vector<Tensor> &operands);

  /// Converts a dense constant to a host tensor.
  static mlir::FailureOr<Tensor> fromAttr(mlir::DenseElementsAttr attr);

  /// Converts a host tensor to a dense attribute of `type`.
  static mlir::DenseElementsAttr toAttr(const Tensor &tensor,
                                        mlir::RankedTensorType type);

  /// The state that tfm.parameter reads and the optimizer updates write; it
  /// persists across runs, as a runtime session's does.
  TrainingState &state() { return trainingState; }

  /// Whether the interpreter has semantics for ops named `name`.
  static bool evaluates(llvm::StringRef name);
  /// The names of the ops it evaluates, sorted.
  static std::vector<std::string> evaluatedOps();

private:
  unsigned callDepth = 0;
  TrainingState trainingState;
};

} // namespace mlir::tfm::reference

#endif // TFM_REFERENCE_INTERPRETER_H
