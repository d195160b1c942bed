//===- FusionUtils.cpp - Helpers shared by the fusion passes --------------===//

#include "FusionUtils.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/ScopeExit.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

void mlir::tfm::FailureRecorder::notifyPatternEnd(const Pattern &,
                                                 LogicalResult result) {
  inPattern = false;
  auto reset = llvm::make_scope_exit([&] {
    created.clear();
    producers.clear();
    erased.clear();
    absorbed.clear();
  });
  if (failed(result) || absorbed.empty())
    return;
  // The producers the pattern left dead (read only by erased or dead ops),
  // and theirs in turn; constants are weights and scalars, not nodes.
  SmallVector<Operation *> worklist(producers.begin(), producers.end());
  llvm::SmallPtrSet<Operation *, 16> dead;
  auto gone = [&](Operation *user) {
    return erased.contains(user) || dead.contains(user);
  };
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (gone(op) || created.contains(op) || !isMemoryEffectFree(op) ||
        isa<arith::ConstantOp>(op) || !llvm::all_of(op->getUsers(), gone))
      continue;
    dead.insert(op);
    absorbed.push_back(op->getLoc());
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        worklist.push_back(def);
  }
  // The ops that carry the computation take the locations: the reshapes,
  // transposes and constants a pattern adds around them absorb nothing.
  for (Operation *op : created) {
    if (isa<arith::ConstantOp, ReshapeOp, TransposeOp, BroadcastOp>(op))
      continue;
    SmallVector<Location> locs{op->getLoc()};
    locs.append(absorbed.begin(), absorbed.end());
    op->setLoc(FusedLoc::get(op->getContext(), locs));
  }
}

void mlir::tfm::reportSites(
    StringRef flag, const FusionLog &log,
    ArrayRef<std::pair<Location, std::string>> missed) {
  for (Location loc : log.fused)
    emitRemark(loc) << flag << ": fused";
  for (const auto &[loc, reason] : missed)
    emitRemark(loc) << flag << ": missed: " << reason;
}

std::optional<double> mlir::tfm::splatValue(Value v) {
  DenseElementsAttr attr = constantOf(v);
  if (!attr || !attr.isSplat())
    return std::nullopt;
  if (isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (attr.getElementType().isIntOrIndex())
    return static_cast<double>(attr.getSplatValue<APInt>().getSExtValue());
  return std::nullopt;
}

FailureOr<AttentionProducts>
mlir::tfm::attentionProducts(MaskedSoftmaxOp softmax, std::string &why) {
  auto scores = softmax.getInput().getDefiningOp<MatmulOp>();
  if (!scores) {
    why = "the softmax does not read q·kᵀ";
    return failure();
  }
  if (!softmax->hasOneUse()) {
    why = "the probabilities have other readers (a backward pass)";
    return failure();
  }
  auto weighted = dyn_cast<MatmulOp>(*softmax->getUsers().begin());
  if (!weighted || weighted.getLhs() != softmax.getResult() ||
      weighted.getTransposeLhs()) {
    why = "the probabilities do not multiply the values";
    return failure();
  }
  return AttentionProducts{scores, weighted};
}

DenseElementsAttr mlir::tfm::zeros(Type elementType, int64_t n) {
  auto type = RankedTensorType::get({n}, elementType);
  if (auto ft = dyn_cast<FloatType>(elementType))
    return DenseElementsAttr::get(type, APFloat::getZero(ft.getFloatSemantics()));
  return DenseElementsAttr::get(
      type, APInt::getZero(elementType.getIntOrFloatBitWidth()));
}

Value mlir::tfm::otherThanSplat(Operation *op, double value) {
  if (!op || op->getNumOperands() != 2)
    return {};
  for (unsigned i = 0; i < 2; ++i) {
    auto s = splatValue(op->getOperand(i));
    if (s && std::fabs(*s - value) <= 1e-4 * std::max(1.0, std::fabs(value)))
      return op->getOperand(1 - i);
  }
  return {};
}

Value mlir::tfm::siluInput(MulOp mul) {
  for (unsigned i = 0; i < 2; ++i) {
    Value x = mul->getOperand(i);
    auto div = mul->getOperand(1 - i).getDefiningOp<DivOp>();
    if (!div || splatValue(div.getLhs()) != 1.0)
      continue;
    Value e = otherThanSplat(div.getRhs().getDefiningOp<AddOp>(), 1.0);
    auto exp = e ? e.getDefiningOp<math::ExpOp>() : math::ExpOp();
    auto neg =
        exp ? exp.getOperand().getDefiningOp<arith::NegFOp>() : arith::NegFOp();
    if (neg && neg.getOperand() == x && x.getType() == mul.getType())
      return x;
  }
  return {};
}
