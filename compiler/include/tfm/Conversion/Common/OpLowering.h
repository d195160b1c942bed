//===- OpLowering.h - Lowerings of tfm ops by op name -----------*- C++ -*-===//
//
// A backend lowers a planned function op by op into its entry function
// (BufferizedEntry). Which code an op becomes is looked up here, by op name:
// the backend-neutral files (TfmToLinalg/) register linalg lowerings for
// every op they can express, then a target's files (TfmToCPU/, ...) register
// theirs, replacing the neutral one where the target has something better
// (a library kernel). Each file exposes one populate function, so adding an
// op touches that op family's file and nothing else.
//
// This is not MLIR's dialect conversion: the memory plan has already
// decided every buffer (a view, an arena slot, an output), so lowering is a
// single forward walk in block order, with no type converter to
// materialize views through.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_COMMON_OPLOWERING_H
#define TFM_CONVERSION_COMMON_OPLOWERING_H

#include "tfm/Conversion/Common/BufferAssignment.h"

#include "llvm/ADT/StringMap.h"

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace mlir::tfm {

/// Lowers one op into `entry` at its builder's insertion point. Emits a
/// diagnostic on the op and fails when it cannot.
using OpLoweringFn = std::function<LogicalResult(Operation *, BufferizedEntry &)>;

class OpLoweringSet {
public:
  /// Registers `fn` for each of `OpTys`; it receives the op as `Operation *`.
  template <typename... OpTys> void addGeneric(const OpLoweringFn &fn) {
    (table.insert_or_assign(OpTys::getOperationName(), fn), ...);
  }
  /// Registers `fn(OpTy, BufferizedEntry &)` for `OpTy`, replacing any
  /// earlier lowering of it.
  template <typename OpTy, typename Fn> void add(Fn fn) {
    table.insert_or_assign(
        OpTy::getOperationName(),
        [fn = std::move(fn)](Operation *op, BufferizedEntry &e) {
          return fn(cast<OpTy>(op), e);
        });
  }

  /// The lowering of `op`, or null.
  const OpLoweringFn *lookup(Operation *op) const {
    auto it = table.find(op->getName().getStringRef());
    return it == table.end() ? nullptr : &it->second;
  }
  /// The lowering of ops named `name`, or null.
  const OpLoweringFn *lookup(StringRef name) const {
    auto it = table.find(name);
    return it == table.end() ? nullptr : &it->second;
  }
  /// Whether an op named `name` has a lowering.
  bool contains(StringRef name) const { return table.count(name); }
  /// The names of the ops with a lowering, sorted.
  std::vector<std::string> opNames() const;

private:
  llvm::StringMap<OpLoweringFn> table;
};

/// Fills a set with one target's lowerings.
using PopulateLoweringsFn = void (*)(OpLoweringSet &);

/// Records that `target` lowers the ops `populate` registers, so that
/// tools and tests can ask every target what it claims
/// (test/unittests/Conversion/OpCoverageTest.cpp). Idempotent per target.
void registerTargetLowerings(StringRef target, PopulateLoweringsFn populate);

/// The targets registered so far, sorted.
std::vector<std::string> registeredLoweringTargets();

/// Fills `set` with `target`'s lowerings; fails for an unknown target.
LogicalResult populateTargetLowerings(StringRef target, OpLoweringSet &set);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_COMMON_OPLOWERING_H
