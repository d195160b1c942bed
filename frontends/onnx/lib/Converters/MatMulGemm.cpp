//===- MatMulGemm.cpp - ONNX MatMul and Gemm ------------------------------===//
//
// MatMul follows numpy: 1-D operands gain and then lose a unit dimension.
// Gemm becomes tfm.linear whenever it is one (alpha = beta = 1, A not
// transposed, a vector bias), which is what exporters emit for nn.Linear;
// a weight that is not stored transposed is transposed once, at compile time,
// by constant folding.
//
//===----------------------------------------------------------------------===//

#include "../ImporterImpl.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::onnx_import;

namespace {

/// One operand of an Einsum: its value and one letter per dimension.
struct Term {
  Value value;
  std::string letters;
};

/// `t` transposed so that its letters read `order` (a permutation of them).
FailureOr<Value> arrange(NodeContext &n, const Term &t, StringRef order) {
  SmallVector<int64_t> perm;
  for (char c : order)
    perm.push_back(t.letters.find(c));
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity &= static_cast<int64_t>(i) == p;
  return identity ? FailureOr<Value>(t.value) : n.transpose(t.value, perm);
}

/// Sums `t` over its letters that `keep` does not hold.
FailureOr<Term> sumOut(NodeContext &n, Term t, StringRef keep) {
  SmallVector<int64_t> axes;
  std::string left;
  for (auto [i, c] : llvm::enumerate(t.letters)) {
    if (keep.contains(c))
      left += c;
    else
      axes.push_back(i);
  }
  if (axes.empty())
    return t;
  Value v;
  if (!take(n.reduce(ReduceKind::sum, t.value, axes, false), v))
    return failure();
  return Term{v, left};
}

/// The contraction of two terms, keeping the letters in `keep`: one batched
/// matmul over [batch, lhs-only, contracted] x [batch, contracted, rhs-only].
FailureOr<Term> contract(NodeContext &n, Term a, Term b, StringRef keep) {
  std::string keepA, keepB;
  for (char c : a.letters)
    if (keep.contains(c) || b.letters.find(c) != std::string::npos)
      keepA += c;
  for (char c : b.letters)
    if (keep.contains(c) || a.letters.find(c) != std::string::npos)
      keepB += c;
  if (!take(sumOut(n, a, keepA), a) || !take(sumOut(n, b, keepB), b))
    return failure();
  auto size = [&](const Term &t, char c) {
    return cast<RankedTensorType>(t.value.getType())
        .getDimSize(t.letters.find(c));
  };
  std::string batch, lhs, con, rhs;
  for (char c : a.letters) {
    bool inB = b.letters.find(c) != std::string::npos;
    if (inB && size(a, c) != size(b, c))
      return n.fail(Twine("Einsum's index '") + Twine(c) +
                    "' has the sizes " + Twine(size(a, c)) + " and " +
                    Twine(size(b, c)));
    (inB ? (keep.contains(c) ? batch : con) : lhs) += c;
  }
  for (char c : b.letters)
    if (a.letters.find(c) == std::string::npos)
      rhs += c;
  auto product = [&](const Term &t, StringRef letters) {
    int64_t p = 1;
    for (char c : letters)
      p *= size(t, c);
    return p;
  };
  int64_t pb = product(a, batch), pl = product(a, lhs), pk = product(a, con),
          pr = product(b, rhs);
  SmallVector<int64_t> outShape;
  for (char c : batch + lhs)
    outShape.push_back(size(a, c));
  for (char c : rhs)
    outShape.push_back(size(b, c));
  Value x, y, z;
  if (!take(arrange(n, a, batch + lhs + con), x) ||
      !take(n.reshape(x, {pb, pl, pk}), x) ||
      !take(arrange(n, b, batch + con + rhs), y) ||
      !take(n.reshape(y, {pb, pk, pr}), y) ||
      !take(n.matmul(x, y, false, false), z) ||
      !take(n.reshape(z, outShape), z))
    return failure();
  return Term{z, batch + lhs + rhs};
}

/// `t` with each letter it repeats (a diagonal, `ii`) taken once: the two
/// axes moved last, flattened, and every (n + 1)-th element gathered.
FailureOr<Term> takeDiagonals(NodeContext &n, Term t) {
  for (size_t j = 0; j < t.letters.size(); ++j) {
    size_t k = t.letters.find(t.letters[j], j + 1);
    if (k == std::string::npos)
      continue;
    auto type = cast<RankedTensorType>(t.value.getType());
    int64_t size = type.getDimSize(j);
    if (type.getDimSize(k) != size)
      return n.fail(Twine("Einsum's index '") + Twine(t.letters[j]) +
                    "' has the sizes " + Twine(size) + " and " +
                    Twine(type.getDimSize(k)) + " within one operand");
    std::string order, rest;
    SmallVector<int64_t> shape;
    for (size_t i = 0; i < t.letters.size(); ++i)
      if (i != j && i != k) {
        rest += t.letters[i];
        shape.push_back(type.getDimSize(i));
      }
    SmallVector<int64_t> perm;
    for (size_t i = 0; i < t.letters.size(); ++i)
      if (i != j && i != k)
        perm.push_back(i);
    perm.push_back(j);
    perm.push_back(k);
    shape.push_back(size * size);
    SmallVector<int64_t> picks;
    for (int64_t i = 0; i < size; ++i)
      picks.push_back(i * (size + 1));
    Value idx = n.constant(DenseElementsAttr::get(
        RankedTensorType::get({size}, n.builder.getI64Type()),
        ArrayRef<int64_t>(picks)));
    Value v;
    if (!take(n.transpose(t.value, perm), v) || !take(n.reshape(v, shape), v) ||
        !take(n.gather(v, idx, static_cast<int64_t>(shape.size()) - 1), v))
      return failure();
    return takeDiagonals(n, Term{v, rest + t.letters[j]});
  }
  return t;
}

/// Einsum as transposes, reshapes, diagonals, sums and batched matmuls,
/// contracting the operands left to right. An ellipsis whose dimensions
/// broadcast (size 1 against n) is not supported.
LogicalResult convertEinsum(NodeContext &n) {
  std::string eq;
  for (char c : n.stringAttr("equation", ""))
    if (!isspace(static_cast<unsigned char>(c)))
      eq += c;
  // An ellipsis stands for the same trailing run of fresh letters in every
  // term (right-aligned, as numpy broadcasts); the implicit output puts
  // those dimensions first.
  std::string ellipsis, written = eq;
  if (eq.find("...") != std::string::npos) {
    SmallVector<StringRef> lhsTerms;
    StringRef(eq).split("->").first.split(lhsTerms, ',');
    if (lhsTerms.size() != n.numInputs())
      return n.fail("Einsum's equation '" + eq + "' names " +
                    Twine(lhsTerms.size()) + " operands; the node has " +
                    Twine(n.numInputs()));
    int64_t most = 0;
    for (auto [i, t] : llvm::enumerate(lhsTerms))
      if (t.contains("..."))
        most = std::max<int64_t>(most, n.inputType(i).getRank() -
                                           (static_cast<int64_t>(t.size()) - 3));
    for (char c = 'A'; c <= 'Z' && static_cast<int64_t>(ellipsis.size()) < most;
         ++c)
      if (eq.find(c) == std::string::npos)
        ellipsis += c;
    if (most < 0 || static_cast<int64_t>(ellipsis.size()) < most)
      return n.fail("Einsum's ellipsis in '" + eq + "' does not fit its "
                    "operands' ranks");
    std::string expanded;
    StringRef rest(eq);
    auto [lhsPart, outPart] = rest.split("->");
    SmallVector<StringRef> parts;
    lhsPart.split(parts, ',');
    for (auto [i, t] : llvm::enumerate(parts)) {
      std::string term = t.str();
      size_t at = term.find("...");
      if (at != std::string::npos) {
        int64_t count = n.inputType(i).getRank() -
                        (static_cast<int64_t>(term.size()) - 3);
        if (count < 0)
          return n.fail("Einsum operand " + Twine(i) + " has rank " +
                        Twine(n.inputType(i).getRank()) + ", fewer than '" +
                        t + "' names");
        term.replace(at, 3, ellipsis.substr(ellipsis.size() - count));
      }
      expanded += (i ? "," : "") + term;
    }
    if (rest.contains("->")) {
      std::string outTerm = outPart.str();
      size_t at = outTerm.find("...");
      if (at != std::string::npos)
        outTerm.replace(at, 3, ellipsis);
      expanded += "->" + outTerm;
    }
    eq = expanded;
  }
  StringRef eqRef(eq);
  auto [inputs, output] = eqRef.split("->");
  SmallVector<StringRef> specs;
  inputs.split(specs, ',');
  if (specs.size() != n.numInputs())
    return n.fail("Einsum's equation '" + eq + "' names " +
                  Twine(specs.size()) + " operands; the node has " +
                  Twine(n.numInputs()));
  SmallVector<Term> terms;
  for (auto [i, spec] : llvm::enumerate(specs)) {
    if (static_cast<int64_t>(spec.size()) != n.inputType(i).getRank())
      return n.fail("Einsum operand " + Twine(i) + " has rank " +
                    Twine(n.inputType(i).getRank()) + " but '" + spec +
                    "' names " + Twine(spec.size()) + " indices");
    for (char c : spec)
      if (!isalpha(static_cast<unsigned char>(c)))
        return n.fail("Einsum's equation '" + written +
                      "' uses a character that is not a letter");
    Term t;
    if (!take(takeDiagonals(n, Term{n.input(i), spec.str()}), t))
      return failure();
    terms.push_back(t);
  }
  std::string out;
  if (eqRef.contains("->")) {
    out = output.str();
  } else {
    // Implicit output: the ellipsis' dimensions, then the letters that
    // appear once, in alphabetical order.
    std::string all = inputs.str();
    out = ellipsis;
    for (char c = 'A'; c <= 'z'; ++c)
      if (isalpha(static_cast<unsigned char>(c)) &&
          llvm::count(all, c) == 1 && ellipsis.find(c) == std::string::npos)
        out += c;
  }
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::string keep = out;
    for (size_t j = i + 1; j < terms.size(); ++j)
      keep += terms[j].letters;
    if (!take(contract(n, acc, terms[i], keep), acc))
      return failure();
  }
  if (!take(sumOut(n, acc, out), acc))
    return failure();
  for (char c : out)
    if (acc.letters.find(c) == std::string::npos)
      return n.fail(Twine("Einsum's output index '") + Twine(c) +
                    "' is in no operand");
  return n.push(arrange(n, acc, out));
}

} // namespace

static LogicalResult convertMatMul(NodeContext &n) {
  Value a = n.input(0), b = n.input(1);
  auto at = n.inputType(0), bt = n.inputType(1);
  if (at.getRank() == 0 || bt.getRank() == 0)
    return n.fail("MatMul operands must have rank >= 1");
  bool aVector = at.getRank() == 1, bVector = bt.getRank() == 1;
  if (aVector) {
    auto r = n.reshape(a, {1, at.getDimSize(0)});
    if (failed(r))
      return failure();
    a = *r;
  }
  if (bVector) {
    auto r = n.reshape(b, {bt.getDimSize(0), 1});
    if (failed(r))
      return failure();
    b = *r;
  }
  // The importer may have laid a constant weight out as [N, K] already.
  auto product = n.matmul(a, b, false, n.isTransposedWeight(b));
  if (failed(product))
    return failure();
  Value out = *product;
  if (aVector || bVector) {
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(out.getType()).getShape());
    if (bVector)
      shape.pop_back();
    if (aVector)
      shape.erase(shape.end() - (bVector ? 1 : 2));
    auto r = n.reshape(out, shape);
    if (failed(r))
      return failure();
    out = *r;
  }
  n.results.push_back(out);
  return success();
}

static LogicalResult convertGemm(NodeContext &n) {
  Value a = n.input(0), b = n.input(1), c = n.input(2);
  float alpha = n.floatAttr("alpha", 1.0f), beta = n.floatAttr("beta", 1.0f);
  bool transA = n.intAttr("transA", 0), transB = n.intAttr("transB", 0);
  if (n.inputType(0).getRank() != 2 || n.inputType(1).getRank() != 2)
    return n.fail("Gemm operands A and B must be 2-D");
  int64_t outFeatures = transB ? n.inputType(1).getDimSize(0)
                               : n.inputType(1).getDimSize(1);
  bool vectorBias = !c || (n.inputType(2).getRank() == 1 &&
                           n.inputType(2).getDimSize(0) == outFeatures);
  if (alpha == 1.0f && beta == 1.0f && !transA && vectorBias) {
    Value w = b;
    if (!transB) {
      auto t = n.transpose(b, {1, 0});
      if (failed(t))
        return failure();
      w = *t;
    }
    auto y = n.linear(a, w, c);
    if (failed(y))
      return failure();
    n.results.push_back(*y);
    return success();
  }
  auto y = n.matmul(a, b, transA, transB);
  if (failed(y))
    return failure();
  Type elt = getElementTypeOrSelf(a.getType());
  Value out = *y;
  if (alpha != 1.0f) {
    auto scaled = n.binary<MulOp>(out, n.scalar(elt, alpha));
    if (failed(scaled))
      return failure();
    out = *scaled;
  }
  if (c) {
    Value bias = c;
    if (beta != 1.0f) {
      auto scaled = n.binary<MulOp>(c, n.scalar(elt, beta));
      if (failed(scaled))
        return failure();
      bias = *scaled;
    }
    auto sum = n.binary<AddOp>(out, bias);
    if (failed(sum))
      return failure();
    out = *sum;
  }
  n.results.push_back(out);
  return success();
}

void mlir::tfm::onnx_import::populateMatMulGemmConverters(Registry &r) {
  r.onOp("MatMul", 1, convertMatMul);
  r.onOp("Gemm", 1, convertGemm);
  r.onOp("Einsum", 12, convertEinsum);
}
