//===- InputValues.h - What values a model takes at an input ----*- C++ -*-===//
//
// Tools that make up a model's inputs (tfmc run without data, --bench) need
// more than a type: token ids must lie within the table they index, and a
// mask drawn at random masks whole rows and turns the outputs to NaN. This
// is read once from the tfm ops an input reaches, for the reference
// interpreter's runs and for the artifact's metadata
// (tfm_abi_model_t.input_values), whose kinds it shares.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_INPUTVALUES_H
#define TFM_IR_INPUTVALUES_H

#include "tfm/abi.h"

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>
#include <utility>

namespace mlir::tfm {

struct InputValues {
  /// A tfm_input_values_t.
  int32_t kind = TFM_INPUT_VALUES_ANY;
  /// TFM_INPUT_VALUES_INDICES: the values every op that reads them as
  /// indices accepts, [lower, upper).
  int64_t lower = 0, upper = 0;
};

/// Where `use` is an operand its op reads as indices (an embedding's or a
/// gather's indices, a loss's labels, a cache position): the range
/// [lower, upper) the op accepts, which the lowerings check at run time (a
/// loss's ignore_index aside). None for any other operand.
std::optional<std::pair<int64_t, int64_t>> indexRangeOf(OpOperand &use);

/// What `input`, an argument of a function of tfm ops, takes: indices, where
/// it reaches (through reshapes, transposes, slices, broadcasts and integer
/// casts) an op that reads indices; else, for an integer or boolean input
/// that is cast to a float, compared or selected on, a mask, 1 where it
/// keeps a position; else anything of its type.
InputValues inputValuesOf(BlockArgument input);

} // namespace mlir::tfm

#endif // TFM_IR_INPUTVALUES_H
