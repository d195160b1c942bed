//===- TypeInference.cpp - Shape and type rules of tfm ops ----------------===//
//
// Messages name the operand and print the offending values, because the
// first reader of a shape error is usually looking at an exporter's graph,
// not at this code.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TypeInference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {
/// Prints a shape as `[2, 3, 4]` in diagnostics.
std::string fmtShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return os.str();
}

std::string fmtType(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << t << "'";
  return os.str();
}

LogicalResult sameElementType(const ShapeDiag &d, RankedTensorType a,
                              StringRef aName, RankedTensorType b,
                              StringRef bName) {
  if (a.getElementType() == b.getElementType())
    return success();
  return d.fail("operand '", bName, "' has element type ",
                fmtType(b.getElementType()), " but '", aName, "' has ",
                fmtType(a.getElementType()));
}
} // namespace

FailureOr<RankedTensorType> mlir::tfm::staticTensor(const ShapeDiag &d, Type t,
                                                    StringRef what) {
  auto ranked = dyn_cast_or_null<RankedTensorType>(t);
  if (!ranked)
    return d.fail("'", what, "' must be a ranked tensor, got ", fmtType(t));
  for (auto [i, dim] : llvm::enumerate(ranked.getShape()))
    if (ShapedType::isDynamic(dim))
      return d.fail("'", what, "' has a dynamic dimension at index ", i,
                    " in ", fmtType(t),
                    "; tfm requires static shapes");
  return ranked;
}

FailureOr<int64_t> mlir::tfm::normalizeAxis(const ShapeDiag &d, int64_t axis,
                                            int64_t rank, StringRef what) {
  if (axis < -rank || axis >= rank)
    return d.fail("'", what, "' = ", axis, " is out of range [", -rank, ", ",
                  rank, ") for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

FailureOr<SmallVector<int64_t>>
mlir::tfm::broadcastShapes(const ShapeDiag &d, ArrayRef<int64_t> a,
                           StringRef aName, ArrayRef<int64_t> b,
                           StringRef bName) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return d.fail("shapes of '", aName, "' ", fmtShape(a), " and '", bName,
                    "' ", fmtShape(b), " do not broadcast: ", da, " vs ", db,
                    " at result dimension ", i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool mlir::tfm::broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i])
      return false;
  return true;
}

FailureOr<Type> mlir::tfm::inferMatmulType(const ShapeDiag &d, Type lhsT,
                                           Type rhsT, bool transposeLhs,
                                           bool transposeRhs) {
  auto lhs = staticTensor(d, lhsT, "lhs");
  auto rhs = staticTensor(d, rhsT, "rhs");
  if (failed(lhs) || failed(rhs))
    return failure();
  if (lhs->getRank() < 2 || rhs->getRank() < 2)
    return d.fail("operands must have rank >= 2, got lhs ", fmtType(*lhs),
                  " and rhs ", fmtType(*rhs));
  if (failed(sameElementType(d, *lhs, "lhs", *rhs, "rhs")))
    return failure();
  ArrayRef<int64_t> ls = lhs->getShape(), rs = rhs->getShape();
  int64_t m = transposeLhs ? ls.back() : ls[ls.size() - 2];
  int64_t kl = transposeLhs ? ls[ls.size() - 2] : ls.back();
  int64_t kr = transposeRhs ? rs.back() : rs[rs.size() - 2];
  int64_t n = transposeRhs ? rs[rs.size() - 2] : rs.back();
  if (kl != kr)
    return d.fail("contracting dimensions differ: lhs ", fmtType(*lhs),
                  " has K = ", kl, ", rhs ", fmtType(*rhs), " has K = ", kr,
                  " (transpose_lhs = ", transposeLhs,
                  ", transpose_rhs = ", transposeRhs, ")");
  auto batch = broadcastShapes(d, ls.drop_back(2), "lhs batch",
                               rs.drop_back(2), "rhs batch");
  if (failed(batch))
    return failure();
  SmallVector<int64_t> shape(*batch);
  shape.push_back(m);
  shape.push_back(n);
  return Type(RankedTensorType::get(shape, lhs->getElementType()));
}

FailureOr<Type> mlir::tfm::inferConv2DType(const ShapeDiag &d, Type inputT,
                                           Type weightT, Type biasT,
                                           ArrayRef<int64_t> strides,
                                           ArrayRef<int64_t> pads,
                                           ArrayRef<int64_t> dilations,
                                           int64_t group) {
  auto input = staticTensor(d, inputT, "input");
  auto weight = staticTensor(d, weightT, "weight");
  if (failed(input) || failed(weight))
    return failure();
  if (input->getRank() != 4)
    return d.fail("'input' must be [N, C, H, W] (rank 4), got ",
                  fmtType(*input));
  if (weight->getRank() != 4)
    return d.fail("'weight' must be [M, C / group, KH, KW] (rank 4), got ",
                  fmtType(*weight));
  if (failed(sameElementType(d, *input, "input", *weight, "weight")))
    return failure();
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return d.fail("'strides' and 'dilations' need 2 values and 'pads' 4; "
                  "got ",
                  strides.size(), ", ", dilations.size(), " and ", pads.size());
  for (int64_t v : strides)
    if (v < 1)
      return d.fail("'strides' must be positive, got ", fmtShape(strides));
  for (int64_t v : dilations)
    if (v < 1)
      return d.fail("'dilations' must be positive, got ", fmtShape(dilations));
  for (int64_t v : pads)
    if (v < 0)
      return d.fail("'pads' must not be negative, got ", fmtShape(pads));
  int64_t c = input->getDimSize(1), m = weight->getDimSize(0);
  if (group < 1 || c % group != 0 || m % group != 0)
    return d.fail("'group' ", group, " must divide the input channels ", c,
                  " and the output channels ", m);
  if (weight->getDimSize(2) < 1 || weight->getDimSize(3) < 1)
    return d.fail("'weight' ", fmtType(*weight), " has an empty kernel");
  if (weight->getDimSize(1) != c / group)
    return d.fail("'weight' ", fmtType(*weight), " must have ", c / group,
                  " input channels per group (", c, " / group ", group, ")");
  if (biasT) {
    auto bias = staticTensor(d, biasT, "bias");
    if (failed(bias) ||
        failed(sameElementType(d, *input, "input", *bias, "bias")))
      return failure();
    if (bias->getRank() != 1 || bias->getDimSize(0) != m)
      return d.fail("'bias' ", fmtType(*bias), " must be [", m,
                    "], the output channels of 'weight'");
  }
  SmallVector<int64_t> shape = {input->getDimSize(0), m};
  for (int i = 0; i < 2; ++i) {
    int64_t extent = input->getDimSize(2 + i) + pads[i] + pads[2 + i];
    int64_t window = dilations[i] * (weight->getDimSize(2 + i) - 1) + 1;
    if (extent < window)
      return d.fail("the kernel window ", window, " is larger than the padded ",
                    i == 0 ? "height " : "width ", extent);
    shape.push_back((extent - window) / strides[i] + 1);
  }
  return Type(RankedTensorType::get(shape, input->getElementType()));
}

FailureOr<Type> mlir::tfm::inferLinearType(const ShapeDiag &d, Type inputT,
                                           Type weightT, Type biasT) {
  auto input = staticTensor(d, inputT, "input");
  auto weight = staticTensor(d, weightT, "weight");
  if (failed(input) || failed(weight))
    return failure();
  if (input->getRank() < 1)
    return d.fail("'input' must have rank >= 1, got ", fmtType(*input));
  if (weight->getRank() != 2)
    return d.fail("'weight' must be [N, K] (rank 2), got ", fmtType(*weight));
  if (failed(sameElementType(d, *input, "input", *weight, "weight")))
    return failure();
  int64_t k = input->getShape().back();
  int64_t n = weight->getDimSize(0);
  if (weight->getDimSize(1) != k)
    return d.fail("'weight' ", fmtType(*weight), " must be [N, ", k,
                  "] to match the last dimension of 'input' ",
                  fmtType(*input));
  if (biasT) {
    auto bias = staticTensor(d, biasT, "bias");
    if (failed(bias) ||
        failed(sameElementType(d, *input, "input", *bias, "bias")))
      return failure();
    if (bias->getRank() != 1 || bias->getDimSize(0) != n)
      return d.fail("'bias' ", fmtType(*bias), " must be [", n,
                    "], the output features of 'weight'");
  }
  SmallVector<int64_t> shape(input->getShape());
  shape.back() = n;
  return Type(RankedTensorType::get(shape, input->getElementType()));
}

FailureOr<Type> mlir::tfm::inferGatedLinearType(const ShapeDiag &d, Type inputT,
                                                Type weightT, Type biasT) {
  auto packed = inferLinearType(d, inputT, weightT, biasT);
  if (failed(packed))
    return failure();
  auto type = cast<RankedTensorType>(*packed);
  int64_t width = type.getShape().back();
  if (width % 2 != 0)
    return d.fail("'weight' ", fmtType(weightT), " has ", width,
                  " output features, which do not split into a gate and an "
                  "up projection of equal width");
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = width / 2;
  return Type(RankedTensorType::get(shape, type.getElementType()));
}

FailureOr<Type> mlir::tfm::inferBroadcastType(const ShapeDiag &d, Type lhsT,
                                              Type rhsT, StringRef lhsName,
                                              StringRef rhsName) {
  auto lhs = staticTensor(d, lhsT, lhsName);
  auto rhs = staticTensor(d, rhsT, rhsName);
  if (failed(lhs) || failed(rhs) ||
      failed(sameElementType(d, *lhs, lhsName, *rhs, rhsName)))
    return failure();
  auto shape = broadcastShapes(d, lhs->getShape(), lhsName, rhs->getShape(),
                               rhsName);
  if (failed(shape))
    return failure();
  return Type(RankedTensorType::get(*shape, lhs->getElementType()));
}

FailureOr<Type> mlir::tfm::inferLayerNormType(const ShapeDiag &d, Type inputT,
                                              Type scaleT, Type biasT,
                                              int64_t axis, double epsilon) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  if (input->getRank() < 1)
    return d.fail("'input' must have rank >= 1, got ", fmtType(*input));
  auto ax = normalizeAxis(d, axis, input->getRank(), "axis");
  if (failed(ax))
    return failure();
  if (!(epsilon > 0))
    return d.fail("'epsilon' must be positive, got ", epsilon);
  ArrayRef<int64_t> normalized = input->getShape().drop_front(*ax);
  auto checkParam = [&](Type t, StringRef name) -> LogicalResult {
    auto p = staticTensor(d, t, name);
    if (failed(p) || failed(sameElementType(d, *input, "input", *p, name)))
      return failure();
    if (p->getShape() != normalized)
      return d.fail("'", name, "' ", fmtType(*p),
                    " must have the normalized shape ", fmtShape(normalized),
                    " of 'input' ", fmtType(*input), " from axis ", *ax);
    return success();
  };
  if (failed(checkParam(scaleT, "scale")) ||
      (biasT && failed(checkParam(biasT, "bias"))))
    return failure();
  return Type(*input);
}

FailureOr<Type> mlir::tfm::inferEmbeddingType(const ShapeDiag &d, Type tableT,
                                              Type indicesT) {
  auto table = staticTensor(d, tableT, "table");
  auto indices = staticTensor(d, indicesT, "indices");
  if (failed(table) || failed(indices))
    return failure();
  if (table->getRank() != 2)
    return d.fail("'table' must be [V, D] (rank 2), got ", fmtType(*table));
  SmallVector<int64_t> shape(indices->getShape());
  shape.push_back(table->getDimSize(1));
  return Type(RankedTensorType::get(shape, table->getElementType()));
}

FailureOr<Type> mlir::tfm::inferTransposeType(const ShapeDiag &d, Type inputT,
                                              ArrayRef<int64_t> perm) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  if (static_cast<int64_t>(perm.size()) != rank)
    return d.fail("'permutation' ", fmtShape(perm), " has ", perm.size(),
                  " entries but 'input' ", fmtType(*input), " has rank ",
                  rank);
  llvm::SmallBitVector seen(rank);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen.test(p))
      return d.fail("'permutation' ", fmtShape(perm),
                    " is not a permutation of [0, ", rank, ")");
    seen.set(p);
  }
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(input->getDimSize(p));
  return Type(RankedTensorType::get(shape, input->getElementType()));
}

FailureOr<Type> mlir::tfm::inferConcatType(const ShapeDiag &d,
                                           TypeRange inputs, int64_t axis) {
  if (inputs.empty())
    return d.fail("needs at least one input");
  auto first = staticTensor(d, inputs.front(), "inputs[0]");
  if (failed(first))
    return failure();
  auto ax = normalizeAxis(d, axis, first->getRank(), "axis");
  if (failed(ax))
    return failure();
  SmallVector<int64_t> shape(first->getShape());
  for (auto [i, t] : llvm::enumerate(inputs.drop_front())) {
    std::string name = "inputs[" + std::to_string(i + 1) + "]";
    auto in = staticTensor(d, t, name);
    if (failed(in) || failed(sameElementType(d, *first, "inputs[0]", *in,
                                             name)))
      return failure();
    if (in->getRank() != first->getRank())
      return d.fail("'", name, "' ", fmtType(*in), " has rank ",
                    in->getRank(), " but 'inputs[0]' ", fmtType(*first),
                    " has rank ", first->getRank());
    for (int64_t dim = 0; dim < in->getRank(); ++dim) {
      if (dim == *ax)
        continue;
      if (in->getDimSize(dim) != first->getDimSize(dim))
        return d.fail("'", name, "' ", fmtType(*in),
                      " differs from 'inputs[0]' ", fmtType(*first),
                      " in dimension ", dim, " (", in->getDimSize(dim),
                      " vs ", first->getDimSize(dim),
                      "), which is not the concatenation axis ", *ax);
    }
    shape[*ax] += in->getDimSize(*ax);
  }
  return Type(RankedTensorType::get(shape, first->getElementType()));
}

LogicalResult mlir::tfm::inferSplitTypes(const ShapeDiag &d, Type inputT,
                                         int64_t axis, ArrayRef<int64_t> sizes,
                                         SmallVectorImpl<Type> &results) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  auto ax = normalizeAxis(d, axis, input->getRank(), "axis");
  if (failed(ax))
    return failure();
  if (sizes.empty())
    return d.fail("'sizes' must not be empty");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return d.fail("'sizes' ", fmtShape(sizes),
                    " must not be negative");
    total += s;
  }
  if (total != input->getDimSize(*ax))
    return d.fail("'sizes' ", fmtShape(sizes), " add up to ", total,
                  " but 'input' ", fmtType(*input), " has ",
                  input->getDimSize(*ax), " along axis ", *ax);
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape(input->getShape());
    shape[*ax] = s;
    results.push_back(RankedTensorType::get(shape, input->getElementType()));
  }
  return success();
}

/// Checks that a mask broadcasts to `target` and, for a float mask, that its
/// element type matches the scores'.
static LogicalResult checkMask(const ShapeDiag &d, RankedTensorType mask,
                               RankedTensorType scores,
                               ArrayRef<int64_t> target) {
  if (!mask.getElementType().isInteger(1) &&
      mask.getElementType() != scores.getElementType())
    return d.fail("additive 'mask' has element type ",
                  fmtType(mask.getElementType()), " but the scores have ",
                  fmtType(scores.getElementType()));
  if (!broadcastsTo(mask.getShape(), target))
    return d.fail("'mask' ", fmtType(mask), " does not broadcast to the ",
                  "scores' shape ", fmtShape(target));
  return success();
}

FailureOr<Type> mlir::tfm::inferRotaryType(const ShapeDiag &d, Type inputT,
                                           Type cosT, Type sinT) {
  auto x = staticTensor(d, inputT, "input");
  if (failed(x))
    return failure();
  if (x->getRank() < 1 || x->getShape().back() % 2 != 0)
    return d.fail("'input' ", fmtType(*x),
                  " must have a last axis of even width to rotate in pairs");
  for (auto [name, t] : {std::pair{"cos", cosT}, std::pair{"sin", sinT}}) {
    auto table = staticTensor(d, t, name);
    if (failed(table) || failed(sameElementType(d, *x, "input", *table, name)))
      return failure();
    if (!broadcastsTo(table->getShape(), x->getShape()))
      return d.fail("'", name, "' ", fmtType(*table),
                    " does not broadcast to the input's shape ",
                    fmtShape(x->getShape()));
  }
  return Type(*x);
}

FailureOr<Type> mlir::tfm::inferAttentionType(const ShapeDiag &d, Type queryT,
                                              Type keyT, Type valueT,
                                              Type maskT,
                                              std::optional<double> scale) {
  auto q = staticTensor(d, queryT, "query");
  auto k = staticTensor(d, keyT, "key");
  auto v = staticTensor(d, valueT, "value");
  if (failed(q) || failed(k) || failed(v))
    return failure();
  if (q->getRank() < 2 || q->getRank() != k->getRank() ||
      q->getRank() != v->getRank())
    return d.fail("'query', 'key' and 'value' must have one rank >= 2, got ",
                  fmtType(*q), ", ", fmtType(*k), " and ", fmtType(*v));
  if (failed(sameElementType(d, *q, "query", *k, "key")) ||
      failed(sameElementType(d, *q, "query", *v, "value")))
    return failure();
  ArrayRef<int64_t> qs = q->getShape(), ks = k->getShape(),
                    vs = v->getShape();
  // Grouped-query attention: the key and value have fewer heads (the last
  // batch dimension), each read by a group of consecutive query heads.
  int64_t rank = q->getRank();
  bool grouped = rank >= 3 && ks.drop_back(3) == qs.drop_back(3) &&
                 ks[rank - 3] > 0 && qs[rank - 3] % ks[rank - 3] == 0;
  if (ks.drop_back(2) != vs.drop_back(2) ||
      (qs.drop_back(2) != ks.drop_back(2) && !grouped))
    return d.fail("batch dimensions differ: query ", fmtType(*q), ", key ",
                  fmtType(*k), ", value ", fmtType(*v),
                  " (the key and value may have fewer heads, the last batch "
                  "dimension, if they divide the query's)");
  if (qs.back() != ks.back())
    return d.fail("head dimension of 'query' (", qs.back(),
                  ") differs from that of 'key' (", ks.back(), ")");
  if (ks[ks.size() - 2] != vs[vs.size() - 2])
    return d.fail("'key' has ", ks[ks.size() - 2], " positions but 'value' has ",
                  vs[vs.size() - 2]);
  if (scale && !(*scale > 0))
    return d.fail("'scale' must be positive, got ", *scale);
  SmallVector<int64_t> scores(qs.drop_back());
  scores.push_back(ks[ks.size() - 2]);
  if (maskT) {
    auto mask = staticTensor(d, maskT, "mask");
    if (failed(mask) || failed(checkMask(d, *mask, *q, scores)))
      return failure();
  }
  SmallVector<int64_t> shape(qs.drop_back());
  shape.push_back(vs.back());
  return Type(RankedTensorType::get(shape, q->getElementType()));
}

LogicalResult mlir::tfm::inferAttentionGradTypes(const ShapeDiag &d,
                                                 Type queryT, Type keyT,
                                                 Type valueT, Type outputT,
                                                 Type gradT, Type maskT,
                                                 std::optional<double> scale,
                                                 SmallVectorImpl<Type> &out) {
  FailureOr<Type> result =
      inferAttentionType(d, queryT, keyT, valueT, maskT, scale);
  if (failed(result))
    return failure();
  for (auto [name, t] :
       {std::pair{"output", outputT}, std::pair{"grad", gradT}})
    if (t != *result)
      return d.fail("'", name, "' ", fmtType(t),
                    " must have the attention's result type ",
                    fmtType(*result));
  auto q = cast<RankedTensorType>(queryT), k = cast<RankedTensorType>(keyT);
  if (attentionKVGroup(q.getShape(), k.getShape()) != 1)
    return d.fail("'key' ", fmtType(k), " has fewer heads than 'query' ",
                  fmtType(q),
                  "; the gradient of a grouped-query attention "
                  "takes the keys and values repeated to every query head");
  out.append({queryT, keyT, valueT});
  return success();
}

SmallVector<int64_t> mlir::tfm::splitHeadsShape(ArrayRef<int64_t> shape,
                                                int64_t group) {
  int64_t heads = shape.size() - 3;
  SmallVector<int64_t> out(shape);
  out[heads] /= group;
  out.insert(out.begin() + heads + 1, group);
  return out;
}

int64_t mlir::tfm::attentionKVGroup(ArrayRef<int64_t> query,
                                    ArrayRef<int64_t> key) {
  if (query.size() < 3 || key.size() != query.size())
    return 1;
  int64_t heads = query[query.size() - 3], kvHeads = key[key.size() - 3];
  return kvHeads > 0 && heads % kvHeads == 0 ? heads / kvHeads : 1;
}

FailureOr<Type> mlir::tfm::inferCrossEntropyType(const ShapeDiag &d,
                                                 Type logitsT, Type labelsT,
                                                 double labelSmoothing) {
  auto logits = staticTensor(d, logitsT, "logits");
  auto labels = staticTensor(d, labelsT, "labels");
  if (failed(logits) || failed(labels))
    return failure();
  if (logits->getRank() < 1)
    return d.fail("'logits' must have rank >= 1, got ", fmtType(*logits));
  if (labels->getShape() != logits->getShape().drop_back())
    return d.fail("'labels' ", fmtType(*labels), " must have the shape ",
                  fmtShape(logits->getShape().drop_back()),
                  " of 'logits' ", fmtType(*logits), " without its class axis");
  if (!(labelSmoothing >= 0 && labelSmoothing <= 1))
    return d.fail("'label_smoothing' must be in [0, 1], got ", labelSmoothing);
  return Type(RankedTensorType::get({}, logits->getElementType()));
}

LogicalResult mlir::tfm::inferQKVProjectionTypes(
    const ShapeDiag &d, Type inputT, Type weightT, Type biasT,
    ArrayRef<int64_t> sizes, SmallVectorImpl<Type> &results) {
  if (sizes.size() != 2 && sizes.size() != 3)
    return d.fail("'sizes' ", fmtShape(sizes),
                  " must have 3 entries (Q, K, V) or 2 (K, V)");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s <= 0)
      return d.fail("'sizes' ", fmtShape(sizes), " must all be positive");
    total += s;
  }
  auto fused = inferLinearType(d, inputT, weightT, biasT);
  if (failed(fused))
    return failure();
  auto fusedType = cast<RankedTensorType>(*fused);
  if (fusedType.getShape().back() != total)
    return d.fail("'weight' ", fmtType(weightT), " has ",
                  fusedType.getShape().back(),
                  " output features but 'sizes' ", fmtShape(sizes),
                  " add up to ", total);
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape(fusedType.getShape());
    shape.back() = s;
    results.push_back(RankedTensorType::get(shape, fusedType.getElementType()));
  }
  return success();
}

FailureOr<Type> mlir::tfm::inferMaskedSoftmaxType(const ShapeDiag &d,
                                                  Type inputT, Type maskT,
                                                  bool causal) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  int64_t minRank = causal ? 2 : 1;
  if (input->getRank() < minRank)
    return d.fail("'input' ", fmtType(*input), " must have rank >= ", minRank,
                  causal ? " with 'causal'" : "");
  if (maskT) {
    auto mask = staticTensor(d, maskT, "mask");
    if (failed(mask) ||
        failed(checkMask(d, *mask, *input, input->getShape())))
      return failure();
  }
  return Type(*input);
}

FailureOr<Type> mlir::tfm::inferCompareType(const ShapeDiag &d, Type lhs,
                                            Type rhs) {
  auto t = inferBroadcastType(d, lhs, rhs);
  if (failed(t))
    return failure();
  auto ranked = cast<RankedTensorType>(*t);
  return Type(RankedTensorType::get(ranked.getShape(),
                                    IntegerType::get(lhs.getContext(), 1)));
}

FailureOr<Type> mlir::tfm::inferSelectType(const ShapeDiag &d, Type condT,
                                           Type trueT, Type falseT) {
  auto values = inferBroadcastType(d, trueT, falseT, "true_value",
                                   "false_value");
  auto cond = staticTensor(d, condT, "condition");
  if (failed(values) || failed(cond))
    return failure();
  auto v = cast<RankedTensorType>(*values);
  auto shape = broadcastShapes(d, cond->getShape(), "condition", v.getShape(),
                               "values");
  if (failed(shape))
    return failure();
  return Type(RankedTensorType::get(*shape, v.getElementType()));
}

FailureOr<Type> mlir::tfm::inferSliceType(const ShapeDiag &d, Type inputT,
                                          ArrayRef<int64_t> starts,
                                          ArrayRef<int64_t> sizes,
                                          ArrayRef<int64_t> steps) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  size_t rank = input->getRank();
  if (starts.size() != rank || sizes.size() != rank || steps.size() != rank)
    return d.fail("'starts' ", fmtShape(starts), ", 'sizes' ",
                  fmtShape(sizes), " and 'steps' ", fmtShape(steps),
                  " must each have one entry per dimension of 'input' ",
                  fmtType(*input));
  for (size_t i = 0; i < rank; ++i) {
    int64_t dim = input->getDimSize(i);
    if (steps[i] == 0)
      return d.fail("'steps' ", fmtShape(steps), " has a zero step in ",
                    "dimension ", i);
    if (sizes[i] < 0)
      return d.fail("'sizes' ", fmtShape(sizes), " has a negative size in ",
                    "dimension ", i);
    if (sizes[i] == 0)
      continue;
    int64_t last = starts[i] + (sizes[i] - 1) * steps[i];
    if (starts[i] < 0 || starts[i] >= dim || last < 0 || last >= dim)
      return d.fail("dimension ", i, " reads indices ", starts[i], " to ",
                    last, ", outside [0, ", dim, ") of 'input' ",
                    fmtType(*input));
  }
  return Type(RankedTensorType::get(sizes, input->getElementType()));
}

FailureOr<Type> mlir::tfm::inferGatherType(const ShapeDiag &d, Type inputT,
                                           Type indicesT, int64_t axis) {
  auto input = staticTensor(d, inputT, "input");
  auto indices = staticTensor(d, indicesT, "indices");
  if (failed(input) || failed(indices))
    return failure();
  auto ax = normalizeAxis(d, axis, input->getRank(), "axis");
  if (failed(ax))
    return failure();
  SmallVector<int64_t> shape(input->getShape().take_front(*ax));
  llvm::append_range(shape, indices->getShape());
  llvm::append_range(shape, input->getShape().drop_front(*ax + 1));
  return Type(RankedTensorType::get(shape, input->getElementType()));
}

FailureOr<Type> mlir::tfm::inferScatterNDType(const ShapeDiag &d,
                                              Type inputT, Type indicesT,
                                              Type updatesT) {
  auto input = staticTensor(d, inputT, "input");
  auto indices = staticTensor(d, indicesT, "indices");
  auto updates = staticTensor(d, updatesT, "updates");
  if (failed(input) || failed(indices) || failed(updates))
    return failure();
  if (indices->getRank() < 1)
    return d.fail("'indices' must have rank at least 1, got ",
                  fmtType(*indices));
  int64_t k = indices->getShape().back();
  if (k < 1 || k > input->getRank())
    return d.fail("the last dimension of 'indices' (", k,
                  ") must lie in [1, ", input->getRank(),
                  "], the rank of 'input'");
  SmallVector<int64_t> want(indices->getShape().drop_back());
  llvm::append_range(want, input->getShape().drop_front(k));
  if (updates->getShape() != ArrayRef<int64_t>(want))
    return d.fail("'updates' must have shape ", fmtShape(want),
                  " (indices.shape[:-1] + input.shape[k:]), got ",
                  fmtType(*updates));
  if (updates->getElementType() != input->getElementType())
    return d.fail("'updates' must have the element type of 'input', got ",
                  fmtType(*updates), " and ", fmtType(*input));
  return Type(*input);
}

LogicalResult mlir::tfm::inferTopKTypes(const ShapeDiag &d, Type inputT,
                                        int64_t k, int64_t axis,
                                        SmallVectorImpl<Type> &out) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  auto ax = normalizeAxis(d, axis, input->getRank(), "axis");
  if (failed(ax))
    return failure();
  int64_t n = input->getDimSize(*ax);
  if (k < 0 || k > n)
    return d.fail("'k' = ", k, " must lie in [0, ", n,
                  "], the size of the axis");
  SmallVector<int64_t> shape(input->getShape());
  shape[*ax] = k;
  out.push_back(RankedTensorType::get(shape, input->getElementType()));
  out.push_back(RankedTensorType::get(
      shape, IntegerType::get(input->getContext(), 64)));
  return success();
}

FailureOr<Type> mlir::tfm::inferReduceType(const ShapeDiag &d, Type inputT,
                                           ArrayRef<int64_t> axes,
                                           bool keepdims, bool isMean) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  if (isMean && !isa<FloatType>(input->getElementType()))
    return d.fail("'mean' needs a float tensor, got ", fmtType(*input));
  llvm::SmallBitVector reduced(input->getRank());
  for (int64_t a : axes) {
    auto ax = normalizeAxis(d, a, input->getRank(), "axes");
    if (failed(ax))
      return failure();
    if (reduced.test(*ax))
      return d.fail("'axes' ", fmtShape(axes), " names dimension ", *ax,
                    " twice");
    reduced.set(*ax);
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < input->getRank(); ++i) {
    if (!reduced.test(i))
      shape.push_back(input->getDimSize(i));
    else if (keepdims)
      shape.push_back(1);
  }
  return Type(RankedTensorType::get(shape, input->getElementType()));
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

FailureOr<QuantizationGranularity> mlir::tfm::checkQuantizationParameters(
    const ShapeDiag &d, Type valueT, StringRef valueName, Type scaleT,
    Type zeroPointT, Type integerElement, int64_t axis, int64_t blockSize) {
  auto value = staticTensor(d, valueT, valueName);
  auto scale = staticTensor(d, scaleT, "scale");
  if (failed(value) || failed(scale))
    return failure();
  if (!isa<FloatType>(scale->getElementType()))
    return d.fail("'scale' must be a float tensor, got ", fmtType(*scale));
  if (zeroPointT) {
    auto zp = staticTensor(d, zeroPointT, "zero_point");
    if (failed(zp))
      return failure();
    if (zp->getShape() != scale->getShape())
      return d.fail("'zero_point' ", fmtType(*zp),
                    " must have the shape of 'scale' ", fmtType(*scale));
    if (zp->getElementType() != integerElement)
      return d.fail("'zero_point' ", fmtType(*zp), " must hold ",
                    fmtType(integerElement), ", the element type of the ",
                    "quantized values");
  }
  if (blockSize < 0)
    return d.fail("'block_size' must be 0 (no blocks) or positive, got ",
                  blockSize);
  int64_t rank = value->getRank();
  if (scale->getRank() == 0) {
    if (blockSize != 0)
      return d.fail("a blocked quantization needs a 'scale' of the ",
                    valueName, "'s rank ", rank, ", got ", fmtType(*scale));
    return QuantizationGranularity::PerTensor;
  }
  auto ax = normalizeAxis(d, axis, rank, "axis");
  if (failed(ax))
    return failure();
  int64_t n = value->getDimSize(*ax);
  if (blockSize == 0) {
    if (scale->getRank() != 1 || scale->getDimSize(0) != n)
      return d.fail("a per-axis 'scale' must be [", n, "], the size of ",
                    valueName, " ", fmtType(*value), " along axis ", *ax,
                    ", got ", fmtType(*scale));
    return QuantizationGranularity::PerAxis;
  }
  SmallVector<int64_t> want(value->getShape());
  want[*ax] = (n + blockSize - 1) / blockSize;
  if (scale->getShape() != ArrayRef<int64_t>(want))
    return d.fail("a blocked 'scale' must be ", fmtShape(want), ": ",
                  valueName, " ", fmtType(*value), " in blocks of ",
                  blockSize, " along axis ", *ax, ", got ", fmtType(*scale));
  return QuantizationGranularity::Blocked;
}

LogicalResult mlir::tfm::verifyQuantizeTypes(const ShapeDiag &d, Type inputT,
                                             Type scaleT, Type zeroPointT,
                                             Type resultT, int64_t axis,
                                             int64_t blockSize) {
  auto input = staticTensor(d, inputT, "input");
  auto result = staticTensor(d, resultT, "result");
  if (failed(input) || failed(result))
    return failure();
  if (input->getShape() != result->getShape())
    return d.fail("the result ", fmtType(*result),
                  " must have the shape of 'input' ", fmtType(*input));
  return checkQuantizationParameters(d, inputT, "input", scaleT, zeroPointT,
                                     result->getElementType(), axis,
                                     blockSize);
}

FailureOr<Type> mlir::tfm::inferDequantizeType(const ShapeDiag &d,
                                               Type inputT, Type scaleT,
                                               Type zeroPointT, int64_t axis,
                                               int64_t blockSize) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  if (zeroPointT && input->getElementType().isInteger(32))
    return d.fail("an i32 'input' (a quantized bias) takes no 'zero_point'");
  if (failed(checkQuantizationParameters(d, inputT, "input", scaleT,
                                         zeroPointT, input->getElementType(),
                                         axis, blockSize)))
    return failure();
  return Type(RankedTensorType::get(
      input->getShape(), cast<RankedTensorType>(scaleT).getElementType()));
}

LogicalResult mlir::tfm::inferDynamicQuantizeTypes(const ShapeDiag &d,
                                                   Type inputT,
                                                   SmallVectorImpl<Type> &out) {
  auto input = staticTensor(d, inputT, "input");
  if (failed(input))
    return failure();
  if (!input->getElementType().isF32())
    return d.fail("'input' must be f32, got ", fmtType(*input));
  Type u8 = IntegerType::get(input->getContext(), 8, IntegerType::Unsigned);
  out.push_back(RankedTensorType::get(input->getShape(), u8));
  out.push_back(RankedTensorType::get({}, input->getElementType()));
  out.push_back(RankedTensorType::get({}, u8));
  return success();
}

FailureOr<Type> mlir::tfm::inferMatmulIntegerType(const ShapeDiag &d,
                                                  Type lhsT, Type rhsT,
                                                  Type lhsZeroPointT,
                                                  Type rhsZeroPointT) {
  auto lhs = staticTensor(d, lhsT, "lhs");
  auto rhs = staticTensor(d, rhsT, "rhs");
  if (failed(lhs) || failed(rhs))
    return failure();
  if (lhs->getRank() < 2 || rhs->getRank() < 2)
    return d.fail("operands must have rank >= 2, got lhs ", fmtType(*lhs),
                  " and rhs ", fmtType(*rhs));
  // Its shapes are tfm.matmul's, whatever the integer types.
  auto floats = [](RankedTensorType t) {
    return RankedTensorType::get(t.getShape(),
                                 Float32Type::get(t.getContext()));
  };
  auto shape = inferMatmulType(d, floats(*lhs), floats(*rhs), false, false);
  if (failed(shape))
    return failure();
  auto check = [&](Type zpT, RankedTensorType operand, StringRef name,
                   int64_t contracted) -> LogicalResult {
    if (!zpT)
      return success();
    auto zp = staticTensor(d, zpT, name);
    if (failed(zp))
      return failure();
    if (zp->getElementType() != operand.getElementType())
      return d.fail("'", name, "' ", fmtType(*zp), " must hold ",
                    fmtType(operand.getElementType()),
                    ", its operand's element type");
    SmallVector<int64_t> reduced(operand.getShape());
    reduced[reduced.size() - contracted] = 1;
    if (zp->getRank() != 0 && !broadcastsTo(zp->getShape(), reduced))
      return d.fail("'", name, "' ", fmtType(*zp), " must be rank 0 or ",
                    "broadcast to ", fmtShape(reduced),
                    ", its operand's shape with the contracted size 1");
    return success();
  };
  if (failed(check(lhsZeroPointT, *lhs, "lhs_zero_point", 1)) ||
      failed(check(rhsZeroPointT, *rhs, "rhs_zero_point", 2)))
    return failure();
  return Type(RankedTensorType::get(
      cast<RankedTensorType>(*shape).getShape(),
      IntegerType::get(lhs->getContext(), 32)));
}

FailureOr<Type> mlir::tfm::inferQuantizedLinearType(
    const ShapeDiag &d, Type inputT, Type weightT, Type weightScaleT,
    Type weightZeroPointT, Type biasT, Type inputScaleT, Type inputZeroPointT,
    int inputQuantization, int64_t blockSize) {
  auto input = staticTensor(d, inputT, "input");
  auto weight = staticTensor(d, weightT, "weight");
  if (failed(input) || failed(weight))
    return failure();
  if (input->getRank() < 1)
    return d.fail("'input' must have rank >= 1, got ", fmtType(*input));
  if (weight->getRank() != 2)
    return d.fail("'weight' must be [N, K] (rank 2), got ", fmtType(*weight));
  int64_t k = input->getShape().back(), n = weight->getDimSize(0);
  if (weight->getDimSize(1) != k)
    return d.fail("'weight' ", fmtType(*weight), " must be [N, ", k,
                  "] to match the last dimension of 'input' ",
                  fmtType(*input));
  // Output columns are the weight's rows: per axis is along axis 0, blocks
  // run along K.
  auto granularity = checkQuantizationParameters(
      d, weightT, "weight", weightScaleT, weightZeroPointT,
      weight->getElementType(), blockSize ? 1 : 0, blockSize);
  if (failed(granularity))
    return failure();
  Type elem = input->getElementType();
  auto sameFloat = [&](Type t, StringRef name) -> LogicalResult {
    auto r = staticTensor(d, t, name);
    if (failed(r))
      return failure();
    return sameElementType(d, *input, "input", *r, name);
  };
  if (failed(sameFloat(weightScaleT, "weight_scale")))
    return failure();
  if (biasT) {
    if (failed(sameFloat(biasT, "bias")))
      return failure();
    auto bias = cast<RankedTensorType>(biasT);
    if (bias.getRank() != 1 || bias.getDimSize(0) != n)
      return d.fail("'bias' ", fmtType(bias), " must be [", n,
                    "], the output features of 'weight'");
  }
  bool isStatic = inputQuantization == 2;
  if (isStatic != (inputScaleT && inputZeroPointT) ||
      (!isStatic && (inputScaleT || inputZeroPointT)))
    return d.fail("'input_scale' and 'input_zero_point' are given exactly "
                  "when 'input_quantization' is static");
  if (isStatic) {
    if (failed(sameFloat(inputScaleT, "input_scale")))
      return failure();
    auto zp = staticTensor(d, inputZeroPointT, "input_zero_point");
    if (failed(zp))
      return failure();
    if (cast<RankedTensorType>(inputScaleT).getRank() != 0 ||
        zp->getRank() != 0)
      return d.fail("'input_scale' and 'input_zero_point' must be rank 0, "
                    "got ",
                    fmtType(inputScaleT), " and ", fmtType(*zp));
  }
  if (inputQuantization == 3 && (blockSize <= 0 || k % blockSize != 0))
    return d.fail("a blocked quantization of the input needs the weight's "
                  "'block_size', dividing K = ",
                  k, "; got ", blockSize);
  if (inputQuantization == 1 && !elem.isF32())
    return d.fail("a dynamic quantization of the input needs an f32 "
                  "'input', got ",
                  fmtType(*input));
  SmallVector<int64_t> shape(input->getShape());
  shape.back() = n;
  return Type(RankedTensorType::get(shape, elem));
}
