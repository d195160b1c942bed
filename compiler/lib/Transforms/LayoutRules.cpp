//===- LayoutRules.cpp - What a target reads and writes in place ----------===//

#include "tfm/Transforms/LayoutRules.h"
#include "tfm/IR/ConstantData.h"

#include "llvm/ADT/StringMap.h"

#include <mutex>

using namespace mlir;
using namespace mlir::tfm;

int64_t mlir::tfm::bufferBytes(ShapedType type) {
  return type.getNumElements() * elementBytes(type.getElementType());
}

SmallVector<int64_t> mlir::tfm::rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

bool mlir::tfm::isRowMajor(ArrayRef<int64_t> shape,
                           ArrayRef<int64_t> strides) {
  SmallVector<int64_t> dense = rowMajorStrides(shape);
  for (auto [d, st, want] : llvm::zip(shape, strides, dense))
    if (d != 1 && st != want)
      return false;
  return shape.size() == strides.size();
}

std::optional<SmallVector<int64_t>>
mlir::tfm::reshapeStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> newShape) {
  SmallVector<int64_t> oldShape, oldStrides;
  for (auto [d, st] : llvm::zip(shape, strides))
    if (d != 1) {
      oldShape.push_back(d);
      oldStrides.push_back(st);
    }
  SmallVector<int64_t> out(newShape.size(), 0);
  size_t i = 0, j = 0;
  while (j < newShape.size() && newShape[j] == 1)
    out[j++] = 1;
  while (i < oldShape.size() && j < newShape.size()) {
    size_t i0 = i, j0 = j;
    int64_t a = oldShape[i++], b = newShape[j++];
    while (a != b) {
      if (a < b) {
        if (i == oldShape.size())
          return std::nullopt;
        a *= oldShape[i++];
      } else {
        if (j == newShape.size())
          return std::nullopt;
        b *= newShape[j++];
      }
    }
    for (size_t k = i0; k + 1 < i; ++k)
      if (oldStrides[k] != oldStrides[k + 1] * oldShape[k + 1])
        return std::nullopt;
    int64_t st = oldStrides[i - 1];
    for (size_t k = j; k-- > j0;) {
      out[k] = st;
      st *= newShape[k];
    }
    while (j < newShape.size() && newShape[j] == 1)
      out[j++] = 1;
  }
  if (i != oldShape.size() || j != newShape.size())
    return std::nullopt;
  return out;
}

bool mlir::tfm::movesOnlyUnitDims(TransposeOp op) {
  auto shape = op.getInput().getType().getShape();
  int64_t last = -1;
  for (int64_t p : op.getPermutation()) {
    if (shape[p] == 1)
      continue;
    if (p < last)
      return false;
    last = p;
  }
  return true;
}

bool mlir::tfm::computedInsideSelects(CompareOp op) {
  if (op->use_empty())
    return false;
  for (OpOperand &use : op->getUses()) {
    auto sel = dyn_cast<SelectOp>(use.getOwner());
    if (!sel || use.getOperandNumber() != 0 ||
        sel.getType() != op.getType().clone(sel.getType().getElementType()))
      return false;
  }
  return true;
}

LayoutRules::~LayoutRules() = default;

bool LayoutRules::computedInline(Operation *op, ComputeType) const {
  auto compare = dyn_cast<CompareOp>(op);
  return compare && computedInsideSelects(compare);
}

bool LayoutRules::worksInPlace(Operation *op) const {
  // softmax_grad reads each element of its operands where it writes it,
  // after its row's sum.
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, ReluOp, GeluOp,
             DropoutOp, SelectOp, SoftmaxGradOp>(op);
}

namespace {

/// What every target's linalg lowering takes: no strided kernels, no packed
/// results.
class GenericLayoutRules : public LayoutRules {
public:
  StringRef getTarget() const override { return "generic"; }
};

struct Registry {
  std::mutex mutex;
  llvm::StringMap<std::unique_ptr<LayoutRules>> rules;
  Registry() { rules["generic"] = std::make_unique<GenericLayoutRules>(); }
};

Registry &registry() {
  static Registry r;
  return r;
}

} // namespace

void mlir::tfm::registerLayoutRules(std::unique_ptr<LayoutRules> rules) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = rules->getTarget().str();
  r.rules[name] = std::move(rules);
}

const LayoutRules *mlir::tfm::lookupLayoutRules(StringRef target) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.rules.find(target);
  return it == r.rules.end() ? nullptr : it->second.get();
}
