//===- TfmAxisMaps.cpp - How each op's results follow its operands' axes -===//
//
// One rule per op for the analyses that follow an axis of the inputs
// (tfm/IR/AxisMap.h). The rules read static shapes only: both analyses
// run on functions whose shapes are bound.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include "mlir/IR/Matchers.h"

#include <limits>

using namespace mlir;
using namespace mlir::tfm;

namespace {

int64_t rankOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t ? t.getRank() : 0;
}

int64_t normalizedAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// Numpy broadcasting of `operands` against the first result.
AxisMap aligned(Operation *op, ArrayRef<unsigned> operands, ZeroRule zeros) {
  AxisMap m;
  int64_t rank = rankOf(op->getResult(0));
  m.results.resize(rank);
  for (unsigned i : operands) {
    int64_t r = rankOf(op->getOperand(i));
    for (int64_t a = 0; a < r; ++a)
      m.results[rank - r + a].push_back({i, a});
  }
  m.zeros = zeros;
  return m;
}

/// Operand `i`'s axes, one to one, as the results' axes.
AxisMap identity(Operation *op, unsigned i = 0) {
  return aligned(op, {i}, ZeroRule::first);
}

void normalizeFrom(AxisMap &m, Operation *op, ArrayRef<unsigned> operands,
                   int64_t axis) {
  for (unsigned i : operands) {
    int64_t r = rankOf(op->getOperand(i));
    for (int64_t a = normalizedAxis(axis, r); a < r; ++a)
      m.uses.push_back({{i, a}, AxisUse::Normalized, {}, {}, {}});
  }
}

/// A projection of the input's last axis by weights [N, K].
AxisMap projection(Operation *op) {
  AxisMap m;
  int64_t r = rankOf(op->getOperand(0));
  m.results.resize(r);
  for (int64_t a = 0; a + 1 < r; ++a)
    m.results[a].push_back({0, a});
  m.uses.push_back(
      {{0, r - 1}, AxisUse::Contracted, OperandAxis{1, 1}, {}, {}});
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    m.whole.push_back(i);
  return m;
}

} // namespace

SmallVector<ReshapeGroup, 6> mlir::tfm::reshapeGroups(ArrayRef<int64_t> in,
                                                      ArrayRef<int64_t> out) {
  SmallVector<ReshapeGroup, 6> groups;
  int64_t ni = in.size(), no = out.size();
  if (llvm::is_contained(in, 0) || llvm::is_contained(out, 0)) {
    groups.push_back({0, ni, 0, no});
    return groups;
  }
  int64_t i = 0, j = 0;
  while (i < ni || j < no) {
    if (i < ni && in[i] == 1) {
      groups.push_back({i, i + 1, j, j});
      ++i;
      continue;
    }
    if (j < no && out[j] == 1) {
      groups.push_back({i, i, j, j + 1});
      ++j;
      continue;
    }
    if (i >= ni || j >= no) {
      // Sizes that do not multiply out: one group of the rest.
      groups.push_back({i, ni, j, no});
      break;
    }
    int64_t i0 = i, j0 = j, pi = in[i++], pj = out[j++];
    while (pi != pj) {
      if (pi < pj && i < ni)
        pi *= in[i++];
      else if (pj < pi && j < no)
        pj *= out[j++];
      else
        break;
    }
    if (pi != pj) {
      groups.push_back({i0, ni, j0, no});
      break;
    }
    groups.push_back({i0, i, j0, j});
  }
  return groups;
}

/// The product of operands 0 and 1 of ranks `lr` and `rr` into a result of
/// `rank`: batch dimensions broadcast, then [M, K] · [K, N] (each maybe
/// transposed). tfm.matmul's and tfm.matmul_integer's.
static AxisMap matmulAxisMap(int64_t lr, int64_t rr, int64_t rank, bool tl,
                             bool tr) {
  AxisMap m;
  m.results.resize(rank);
  if (lr < 2 || rr < 2)
    return m;
  for (int64_t a = 0; a < lr - 2; ++a)
    m.results[rank - lr + a].push_back({0, a});
  for (int64_t a = 0; a < rr - 2; ++a)
    m.results[rank - rr + a].push_back({1, a});
  int64_t lm = tl ? lr - 1 : lr - 2, lk = tl ? lr - 2 : lr - 1;
  int64_t rk = tr ? rr - 1 : rr - 2, rn = tr ? rr - 2 : rr - 1;
  m.results[rank - 2].push_back({0, lm});
  m.results[rank - 1].push_back({1, rn});
  m.uses.push_back({{0, lk}, AxisUse::Contracted, OperandAxis{1, rk}, {}, {}});
  m.uses.push_back({{1, rk}, AxisUse::Contracted, OperandAxis{0, lk}, {}, {}});
  return m;
}

AxisMap MatmulOp::getAxisMap() {
  AxisMap m = matmulAxisMap(rankOf(getLhs()), rankOf(getRhs()),
                            rankOf(getResult()), getTransposeLhs(),
                            getTransposeRhs());
  m.zeros = ZeroRule::any;
  return m;
}

AxisMap LinearOp::getAxisMap() { return projection(*this); }
AxisMap QKVProjectionOp::getAxisMap() { return projection(*this); }
AxisMap GatedLinearOp::getAxisMap() { return projection(*this); }

#define TFM_BINARY_AXIS_MAP(OP, RULE)                                          \
  AxisMap OP::getAxisMap() { return aligned(*this, {0, 1}, ZeroRule::RULE); }
TFM_BINARY_AXIS_MAP(AddOp, all)
TFM_BINARY_AXIS_MAP(SubOp, all)
TFM_BINARY_AXIS_MAP(MulOp, any)
TFM_BINARY_AXIS_MAP(DivOp, first)
TFM_BINARY_AXIS_MAP(PowOp, none)
TFM_BINARY_AXIS_MAP(MaxOp, none)
TFM_BINARY_AXIS_MAP(MinOp, none)
TFM_BINARY_AXIS_MAP(CompareOp, none)
#undef TFM_BINARY_AXIS_MAP

// Elementwise with its tables, but for the last axis, whose elements it
// pairs: a window along it.
AxisMap RotaryOp::getAxisMap() {
  AxisMap m = aligned(*this, {0, 1, 2}, ZeroRule::first);
  m.uses.push_back(
      {{0, rankOf(getInput()) - 1}, AxisUse::Windowed, {}, {}, {}});
  return m;
}

AxisMap SelectOp::getAxisMap() {
  return aligned(*this, {0, 1, 2}, ZeroRule::none);
}
AxisMap CastOp::getAxisMap() { return identity(*this); }
AxisMap ReluOp::getAxisMap() { return identity(*this); }
AxisMap GeluOp::getAxisMap() { return identity(*this); }
AxisMap BroadcastOp::getAxisMap() { return identity(*this); }
// The step counter only seeds the random stream.
AxisMap DropoutOp::getAxisMap() { return identity(*this); }

AxisMap SoftmaxOp::getAxisMap() {
  AxisMap m = aligned(*this, {0}, ZeroRule::none);
  int64_t r = rankOf(getInput());
  m.uses.push_back(
      {{0, normalizedAxis(getAxis(), r)}, AxisUse::Normalized, {}, {}, {}});
  return m;
}

AxisMap MaskedSoftmaxOp::getAxisMap() {
  SmallVector<unsigned> operands{0};
  if (getMask())
    operands.push_back(1);
  AxisMap m = aligned(*this, operands, ZeroRule::none);
  m.uses.push_back(
      {{0, rankOf(getInput()) - 1}, AxisUse::Normalized, {}, {}, {}});
  return m;
}

AxisMap LayerNormOp::getAxisMap() {
  AxisMap m = aligned(*this, {0}, ZeroRule::none);
  normalizeFrom(m, *this, {0}, getAxis());
  for (unsigned i = 1; i < getNumOperands(); ++i)
    m.whole.push_back(i);
  return m;
}

AxisMap AddLayerNormOp::getAxisMap() {
  AxisMap m = aligned(*this, {0, 1}, ZeroRule::none);
  normalizeFrom(m, *this, {0, 1}, getAxis());
  for (unsigned i = 2; i < getNumOperands(); ++i)
    m.whole.push_back(i);
  return m;
}

AxisMap EmbeddingOp::getAxisMap() {
  AxisMap m;
  int64_t r = rankOf(getIndices());
  m.results.resize(r + 1);
  for (int64_t a = 0; a < r; ++a)
    m.results[a].push_back({1, a});
  m.whole.push_back(0);
  return m;
}

AxisMap GatherOp::getAxisMap() {
  AxisMap m;
  int64_t r = rankOf(getInput()), ri = rankOf(getIndices());
  int64_t axis = normalizedAxis(getAxis(), r);
  for (int64_t a = 0; a < axis; ++a)
    m.results.push_back({{0, a}});
  for (int64_t a = 0; a < ri; ++a)
    m.results.push_back({{1, a}});
  for (int64_t a = axis + 1; a < r; ++a)
    m.results.push_back({{0, a}});
  AxisUseOf use{{0, axis}, AxisUse::Indexed, {}, {}, {}};
  DenseIntElementsAttr values;
  if (matchPattern(getIndices(), m_Constant(&values)) && !values.empty()) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    bool negative = false;
    for (const APInt &v : values) {
      negative = negative || v.isNegative();
      lo = std::min(lo, v.getSExtValue());
      hi = std::max(hi, v.getSExtValue());
    }
    // A negative index counts from the end: not a fixed position.
    if (!negative) {
      use.lowest = lo;
      use.highest = hi;
    }
  }
  m.uses.push_back(use);
  m.zeros = ZeroRule::first;
  return m;
}

AxisMap TransposeOp::getAxisMap() {
  AxisMap m;
  for (int64_t p : getPermutation())
    m.results.push_back({{0, p}});
  m.zeros = ZeroRule::first;
  return m;
}

AxisMap ReshapeOp::getAxisMap() {
  AxisMap m;
  m.isReshape = true;
  m.zeros = ZeroRule::first;
  auto in = dyn_cast<RankedTensorType>(getInput().getType());
  auto out = dyn_cast<RankedTensorType>(getType());
  if (in && out && in.hasStaticShape() && out.hasStaticShape())
    m.groups = reshapeGroups(in.getShape(), out.getShape());
  else
    m.groups.push_back({0, rankOf(getInput()), 0, rankOf(getResult())});
  return m;
}

AxisMap ConcatOp::getAxisMap() {
  SmallVector<unsigned> all;
  for (unsigned i = 0; i < getNumOperands(); ++i)
    all.push_back(i);
  AxisMap m = aligned(*this, all, ZeroRule::all);
  int64_t r = rankOf(getResult());
  for (unsigned i : all)
    m.uses.push_back(
        {{i, normalizedAxis(getAxis(), r)}, AxisUse::Concatenated, {}, {}, {}});
  return m;
}

AxisMap SplitOp::getAxisMap() {
  AxisMap m = identity(*this);
  m.uses.push_back({{0, normalizedAxis(getAxis(), rankOf(getInput()))},
                    AxisUse::Split,
                    {},
                    {},
                    {}});
  return m;
}

AxisMap SliceOp::getAxisMap() {
  AxisMap m = identity(*this);
  auto in = cast<RankedTensorType>(getInput().getType());
  for (int64_t a = 0; a < in.getRank(); ++a) {
    int64_t start = getStarts()[a], size = getSizes()[a], step = getSteps()[a];
    if (start == 0 && step == 1 && size == in.getDimSize(a))
      continue;
    AxisUseOf use{{0, a}, AxisUse::Sliced, {}, {}, {}};
    if (size > 0 && start >= 0) {
      int64_t last = start + (size - 1) * step;
      use.lowest = std::min(start, last);
      use.highest = std::max(start, last);
    }
    m.uses.push_back(use);
  }
  return m;
}

AxisMap TopKOp::getAxisMap() {
  AxisMap m = aligned(*this, {0}, ZeroRule::none);
  m.uses.push_back({{0, normalizedAxis(getAxis(), rankOf(getInput()))},
                    AxisUse::Ranked,
                    {},
                    {},
                    {}});
  return m;
}

AxisMap ReduceOp::getAxisMap() {
  AxisMap m;
  int64_t r = rankOf(getInput());
  SmallVector<bool> reduced(r, false);
  for (int64_t a : getAxes())
    reduced[normalizedAxis(a, r)] = true;
  AxisUse use =
      getKind() == ReduceKind::sum ? AxisUse::Summed : AxisUse::Reduced;
  for (int64_t a = 0; a < r; ++a) {
    if (!reduced[a]) {
      m.results.push_back({{0, a}});
      continue;
    }
    m.uses.push_back({{0, a}, use, {}, {}, {}});
    if (getKeepdims())
      m.results.emplace_back();
  }
  return m;
}

AxisMap Conv2DOp::getAxisMap() {
  // [N, C, H, W] * [F, C / group, kh, kw] -> [N, F, H', W'].
  AxisMap m;
  m.results = {{{0, 0}}, {}, {{0, 2}}, {{0, 3}}};
  m.uses.push_back({{0, 1}, AxisUse::Contracted, OperandAxis{1, 1}, {}, {}});
  m.uses.push_back({{0, 2}, AxisUse::Windowed, {}, {}, {}});
  m.uses.push_back({{0, 3}, AxisUse::Windowed, {}, {}, {}});
  for (unsigned i = 1; i < getNumOperands(); ++i)
    m.whole.push_back(i);
  return m;
}

namespace {
/// An elementwise op of another dialect: its result's axes are its
/// operand's; `Zero` says whether a zero input stays zero (negf, sqrt, ...)
/// or not (exp, cos, log).
template <typename ConcreteOp, ZeroRule Zero>
struct ElementwiseAxisMap
    : public AxisMapOpInterface::ExternalModel<
          ElementwiseAxisMap<ConcreteOp, Zero>, ConcreteOp> {
  AxisMap getAxisMap(Operation *op) const { return aligned(op, {0}, Zero); }
};
} // namespace

void mlir::tfm::registerAxisMapExternalModels(DialectRegistry &registry) {
  constexpr ZeroRule kKeeps = ZeroRule::first, kMoves = ZeroRule::none;
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    arith::NegFOp::attachInterface<ElementwiseAxisMap<arith::NegFOp, kKeeps>>(
        *ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    math::SqrtOp::attachInterface<ElementwiseAxisMap<math::SqrtOp, kKeeps>>(
        *ctx);
    math::ExpOp::attachInterface<ElementwiseAxisMap<math::ExpOp, kMoves>>(*ctx);
    math::LogOp::attachInterface<ElementwiseAxisMap<math::LogOp, kMoves>>(*ctx);
    math::TanhOp::attachInterface<ElementwiseAxisMap<math::TanhOp, kKeeps>>(
        *ctx);
    math::ErfOp::attachInterface<ElementwiseAxisMap<math::ErfOp, kKeeps>>(*ctx);
    math::AbsFOp::attachInterface<ElementwiseAxisMap<math::AbsFOp, kKeeps>>(
        *ctx);
    math::SinOp::attachInterface<ElementwiseAxisMap<math::SinOp, kKeeps>>(*ctx);
    math::CosOp::attachInterface<ElementwiseAxisMap<math::CosOp, kMoves>>(*ctx);
    math::FloorOp::attachInterface<ElementwiseAxisMap<math::FloorOp, kKeeps>>(
        *ctx);
    math::CeilOp::attachInterface<ElementwiseAxisMap<math::CeilOp, kKeeps>>(
        *ctx);
    math::TruncOp::attachInterface<ElementwiseAxisMap<math::TruncOp, kKeeps>>(
        *ctx);
    math::RoundEvenOp::attachInterface<
        ElementwiseAxisMap<math::RoundEvenOp, kKeeps>>(*ctx);
  });
}

/// A quantization's value (operand 0) read elementwise with its scale and
/// zero point (operands 1 and 2): one for all, one per index of `axis`, or
/// one per block of indices along it, which each position reads by its
/// block (a window of the scale's axis).
static AxisMap quantization(Operation *op, int64_t axis, int64_t blockSize) {
  AxisMap m = aligned(op, {0}, ZeroRule::none);
  int64_t rank = rankOf(op->getOperand(0));
  int64_t scaleRank = rankOf(op->getOperand(1));
  unsigned params = op->getNumOperands();
  if (scaleRank == 0) {
    for (unsigned i = 1; i < params; ++i)
      m.whole.push_back(i);
    return m;
  }
  axis = normalizedAxis(axis, rank);
  for (unsigned i = 1; i < params; ++i) {
    if (blockSize == 0) {
      m.results[axis].push_back({i, 0});
      continue;
    }
    for (int64_t a = 0; a < rank; ++a)
      if (a != axis)
        m.results[a].push_back({i, a});
    m.uses.push_back({{i, axis}, AxisUse::Windowed, {}, {}, {}});
  }
  return m;
}

AxisMap QuantizeOp::getAxisMap() {
  return quantization(*this, getAxis(), getBlockSize());
}
AxisMap DequantizeOp::getAxisMap() {
  return quantization(*this, getAxis(), getBlockSize());
}

AxisMap MatmulIntegerOp::getAxisMap() {
  int64_t lr = rankOf(getLhs()), rr = rankOf(getRhs());
  AxisMap m = matmulAxisMap(lr, rr, rankOf(getResult()), false, false);
  if (lr < 2 || rr < 2)
    return m;
  // A zero point per row or column is read with its row or column; a
  // nonzero one also makes zeros nonzero.
  for (unsigned i = 2; i < getNumOperands(); ++i)
    m.whole.push_back(i);
  m.zeros = getNumOperands() == 2 ? ZeroRule::any : ZeroRule::none;
  return m;
}

AxisMap QuantizedLinearOp::getAxisMap() {
  AxisMap m = projection(*this);
  // The dynamic quantization's scale is the whole input's range.
  if (getInputQuantization() == InputQuantization::dynamic)
    for (int64_t a = 0; a + 1 < rankOf(getInput()); ++a)
      m.uses.push_back({{0, a}, AxisUse::Reduced, {}, {}, {}});
  return m;
}
