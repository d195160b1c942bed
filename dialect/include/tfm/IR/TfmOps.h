//===- TfmOps.h - Operations of the tfm dialect -----------------*- C++ -*-===//

#ifndef TFM_IR_TFMOPS_H
#define TFM_IR_TFMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tfm/IR/AxisMap.h"
#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmEnums.h.inc"
#include "tfm/IR/TfmInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tfm/IR/TfmAttrs.h.inc"

namespace mlir::tfm {
/// The session's training state, which tfm.parameter reads and the
/// optimizer updates write.
struct TrainingStateResource
    : public SideEffects::Resource::Base<TrainingStateResource> {
  StringRef getName() final { return "tfm.training_state"; }
};

/// The session's generation caches, which tfm.cache_update writes.
struct GenerationCacheResource
    : public SideEffects::Resource::Base<GenerationCacheResource> {
  StringRef getName() final { return "tfm.generation_cache"; }
};

/// What the processes of a data-parallel training step exchange:
/// tfm.all_reduce_start and tfm.all_reduce_wait read and write it, so they
/// stay in order and are never merged or dropped.
struct CollectiveResource
    : public SideEffects::Resource::Base<CollectiveResource> {
  StringRef getName() final { return "tfm.collective"; }
};

/// The name of the attribute that holds an op's memory plan: one
/// #tfm.arena, #tfm.view, #tfm.inline or #tfm.output per result.
inline constexpr const char *kPlanAttrName = "tfm.plan";

/// The plan of result `index` of `op`, or null when it has none.
Attribute getPlannedBuffer(Operation *op, unsigned index);
} // namespace mlir::tfm

#define GET_OP_CLASSES
#include "tfm/IR/TfmOps.h.inc"

namespace mlir {
class DialectRegistry;
namespace tfm {
/// Attaches gradient rules to the arith and math ops that imported models
/// use on tensors (negf; sqrt, exp, log, tanh, erf, absf).
void registerGradientExternalModels(DialectRegistry &registry);
/// Attaches axis maps (AxisMapOpInterface) to the same ops: each is
/// elementwise, so the analyses that follow axes (the KV cache's, exact
/// padding's) see through them, as through RoPE's negation.
void registerAxisMapExternalModels(DialectRegistry &registry);

/// The learning rate of an optimizer update at `step` (counted from 1); the
/// interpreter and the backends share it so their schedules agree.
double learningRateAt(LRSchedule schedule, double lr, int64_t dModel,
                      int64_t warmup, int64_t step);
} // namespace tfm
} // namespace mlir

#endif // TFM_IR_TFMOPS_H
