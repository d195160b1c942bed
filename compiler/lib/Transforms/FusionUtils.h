//===- FusionUtils.h - Helpers shared by the fusion passes ------*- C++ -*-===//
//
// Fusion passes never fail silently: each pattern logs the sites it fuses,
// a listener keeps the reason of every notifyMatchFailure, and after the
// rewrite the pass reports each site as a remark, fused or missed (with the
// reason), when its `remarks` option is on.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_LIB_TRANSFORMS_FUSIONUTILS_H
#define TFM_LIB_TRANSFORMS_FUSIONUTILS_H

#include "tfm/IR/ConstantData.h"
#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

namespace mlir::tfm {

/// The sites a pass fused, by location, in the order they fused.
struct FusionLog {
  SmallVector<Location> fused;
};

/// Keeps the last reason any pattern gave for not matching at a location,
/// and gives each fused op the locations of every op it replaced: a fused op
/// is located at its anchor first (what remarks and profiles name), then at
/// the other nodes it absorbed, so that `tfmc inspect --dot` and the
/// profile's origins can name them all.
struct FailureRecorder : public RewriterBase::Listener {
  void notifyMatchFailure(
      Location loc, function_ref<void(Diagnostic &)> reasonCallback) override {
    Diagnostic diag(loc, DiagnosticSeverity::Remark);
    reasonCallback(diag);
    reasons[loc] = diag.str();
  }
  std::string reasonAt(Location loc, StringRef fallback) const {
    auto it = reasons.find(loc);
    return it == reasons.end() ? fallback.str() : it->second;
  }

  void notifyPatternBegin(const Pattern &, Operation *) override {
    inPattern = true;
    created.clear();
    absorbed.clear();
  }
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (inPattern)
      created.insert(op);
  }
  void notifyOperationErased(Operation *op) override {
    if (!inPattern)
      return;
    erased.insert(op);
    if (created.remove(op))
      return;
    absorbed.push_back(op->getLoc());
    // Producers that only the erased op read are left dead, and the driver
    // erases them after the pattern: they were absorbed too.
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        producers.insert(def);
  }
  void notifyPatternEnd(const Pattern &, LogicalResult result) override;

  DenseMap<Location, std::string> reasons;

private:
  bool inPattern = false;
  llvm::SetVector<Operation *> created, producers;
  llvm::SmallPtrSet<Operation *, 8> erased;
  SmallVector<Location> absorbed;
};

/// Runs `patterns` to a fixpoint on `fn`, recording failure reasons.
inline LogicalResult applyRecording(func::FuncOp fn,
                                    const FrozenRewritePatternSet &patterns,
                                    FailureRecorder &recorder) {
  GreedyRewriteConfig config;
  config.listener = &recorder;
  return applyPatternsAndFoldGreedily(fn, patterns, config);
}

/// Emits the remarks of one pass: every fused site, then every missed one.
void reportSites(StringRef flag, const FusionLog &log,
                 ArrayRef<std::pair<Location, std::string>> missed);

/// The dense value of `v` when it is a constant.
inline DenseElementsAttr constantOf(Value v) {
  DenseElementsAttr attr;
  if (v && matchPattern(v, m_Constant(&attr)))
    return attr;
  return {};
}

/// The value of `v` when it is a constant whose elements are all equal.
std::optional<double> splatValue(Value v);

/// If `op` is a binary op with a splat constant operand close to `value`,
/// returns the other operand.
Value otherThanSplat(Operation *op, double value);

/// If `mul` is x·sigmoid(x) (SiLU, swish), with the sigmoid as the importer
/// writes it, 1 / (1 + exp(-x)), returns x.
Value siluInput(MulOp mul);

/// The two products around an attention's masked softmax: the scores q·kᵀ
/// it reads and the p·v that is its only reader.
struct AttentionProducts {
  MatmulOp scores, weighted;
};

/// `softmax`'s products, or the reason it has none: it does not read a
/// matmul, or its probabilities have another reader than p·v.
FailureOr<AttentionProducts> attentionProducts(MaskedSoftmaxOp softmax,
                                               std::string &why);

/// A rank-1 constant of `n` zeros of `elementType`.
DenseElementsAttr zeros(Type elementType, int64_t n);

/// If one operand of `op` (a binary op) is defined by `OpTy`, returns it and
/// sets `other` to the other operand.
template <typename OpTy>
OpTy operandOfType(Operation *op, Value &other) {
  for (unsigned i = 0; i < 2; ++i)
    if (auto def = op->getOperand(i).getDefiningOp<OpTy>()) {
      other = op->getOperand(1 - i);
      return def;
    }
  return {};
}

} // namespace mlir::tfm

#endif // TFM_LIB_TRANSFORMS_FUSIONUTILS_H
