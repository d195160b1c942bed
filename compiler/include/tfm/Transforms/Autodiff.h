//===- Autodiff.h - Reverse-mode differentiation of tfm ---------*- C++ -*-===//
//
// The pieces of tfm-autodiff that tfmc and the gradient tests call directly.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TRANSFORMS_AUTODIFF_H
#define TFM_TRANSFORMS_AUTODIFF_H

#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <string>
#include <vector>

namespace mlir::tfm {

/// What a training step computes and how it updates the parameters. The
/// options are those of TrainingOptions.def, plus the schedule they parse
/// to.
struct TrainingOptions {
  std::string forward; // empty: the only public function
#define TFM_TRAINING_OPTION(TYPE, MEMBER, FLAG, DEFAULT, DESCRIPTION)          \
  TYPE MEMBER = DEFAULT;
#define TFM_TRAINING_LIST_OPTION(TYPE, MEMBER, FLAG, DESCRIPTION)              \
  std::vector<TYPE> MEMBER;
#include "tfm/Transforms/TrainingOptions.def"

  /// `lrSchedule`, parsed by parseSchedule.
  LRSchedule schedule = LRSchedule::constant;
  int64_t dModel = 1, warmup = 1;

  /// Parses `lrSchedule` (`constant` or `noam:d_model=D,warmup=W`) into the
  /// schedule fields.
  LogicalResult parseSchedule(std::string &error);
};

/// tfm-autodiff (mode=train) with these options.
std::unique_ptr<Pass> createAutodiffPass(const TrainingOptions &options);

/// The reverse sweep. Builds, at `b`'s insertion point (which must follow
/// the ops of `body` that it differentiates), the gradients of the sum of
/// <seed value, seed gradient> with respect to each of `wrt`. An entry is
/// null where no gradient reaches. Fails with a diagnostic at the first op
/// on the path that has no gradient rule.
FailureOr<SmallVector<Value>>
differentiate(OpBuilder &b, Block &body,
              ArrayRef<std::pair<Value, Value>> seeds, ArrayRef<Value> wrt);

/// Adds `@<fn>_vjp(args..., cotangents...) -> (gradients)` next to `fn`,
/// with one gradient per float argument (zero where none reaches).
FailureOr<func::FuncOp> buildVJPFunction(func::FuncOp fn);

/// Adds `@train_step(inputs..., labels) -> loss` (see tfm-autodiff) and
/// returns it.
FailureOr<func::FuncOp> buildTrainStep(ModuleOp module,
                                       const TrainingOptions &options);

/// Makes the float constants of at least two elements in `fn` trainable
/// `tfm.parameter`s, for models written as MLIR (the ONNX importer makes
/// parameters of initializers itself). A constant named by its location
/// keeps that name; the others are named `param_<n>` in order.
void promoteConstantsToParameters(func::FuncOp fn);

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_AUTODIFF_H
