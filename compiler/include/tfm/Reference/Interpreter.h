//===- Interpreter.h - The reference interpreter of tfm ---------*- C++ -*-===//
//
// A plain evaluator, in double precision, of every tfm op plus func.func,
// func.return, func.call and arith.constant. It fixes the semantics that the
// fusion passes must preserve and the backends must reproduce, so it favours
// the obvious loop over the fast one.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_REFERENCE_INTERPRETER_H
#define TFM_REFERENCE_INTERPRETER_H

#include "tfm/Reference/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::tfm::reference {

/// Maps an MLIR element type to the interpreter's kinds; fails on others.
mlir::FailureOr<ElementKind> elementKindOf(mlir::Type type);

/// Evaluates functions of one module. Errors (a bad index, an unsupported op,
/// a wrong argument) are reported as MLIR diagnostics on the op at fault.
class Interpreter {
public:
  Interpreter() = default;

  /// Runs `fn` on `args`, which must match its argument types.
  mlir::FailureOr<std::vector<Tensor>> run(mlir::func::FuncOp fn,
                                           const std::vector<Tensor> &args);

private:
  unsigned callDepth = 0;
};

} // namespace mlir::tfm::reference

#endif // TFM_REFERENCE_INTERPRETER_H
