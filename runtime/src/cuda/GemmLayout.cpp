//===- GemmLayout.cpp - A row-major GEMM as a cuBLASLt call ---------------===//

#include "GemmLayout.h"

#include <algorithm>

using namespace tfm::runtime::cuda;

namespace {

/// op(X) of `rows` × `columns` whose element (r, c) lies at r·rowStride +
/// c·columnStride, as a column-major matrix read plainly (dense rows of
/// op(X) down a column) or transposed (op(X)'s rows dense).
std::optional<LtMatrix> operand(int64_t rows, int64_t columns,
                                int64_t rowStride, int64_t columnStride,
                                int64_t batchStride) {
  // A dimension of one element has no stride to speak of: it fits either
  // way, and its stride becomes the smallest leading dimension allowed.
  bool oneRow = rows == 1, oneColumn = columns == 1;
  if ((oneRow || rowStride == 1) && (oneColumn || columnStride >= rows))
    return LtMatrix{uint64_t(rows), uint64_t(columns),
                    oneColumn ? rows : columnStride, batchStride, false};
  if ((oneColumn || columnStride == 1) && (oneRow || rowStride >= columns))
    return LtMatrix{uint64_t(columns), uint64_t(rows),
                    oneRow ? columns : rowStride, batchStride, true};
  return std::nullopt;
}

} // namespace

std::optional<GemmLayout> tfm::runtime::cuda::layoutOf(const GemmProblem &p,
                                                       std::string &why) {
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1 || p.batch > INT32_MAX) {
    why = "an empty or oversized GEMM";
    return std::nullopt;
  }
  if (p.batch > 1 && p.c.batch == 0) {
    why = "the output is repeated over the batch";
    return std::nullopt;
  }
  GemmLayout l;
  l.batch = static_cast<int32_t>(p.batch);
  // D = Cᵀ (n × m) = Bᵀ · Aᵀ when C's rows are dense: every matrix is then
  // seen transposed, its row and column strides exchanged. D = C = A · B
  // when C's columns are.
  for (bool swapped : {true, false}) {
    auto view = [&](int64_t rows, int64_t columns, const MatrixStrides &s) {
      return swapped ? operand(rows, columns, s.column, s.row, s.batch)
                     : operand(rows, columns, s.row, s.column, s.batch);
    };
    l.swapped = swapped;
    l.m = swapped ? p.n : p.m;
    l.n = swapped ? p.m : p.n;
    l.k = p.k;
    std::optional<LtMatrix> d = view(l.m, l.n, p.c);
    if (!d || d->transposed)
      continue;
    std::optional<LtMatrix> a = view(l.m, l.k, swapped ? p.b : p.a);
    std::optional<LtMatrix> b = view(l.k, l.n, swapped ? p.a : p.b);
    if (!a || !b) {
      bool firstBad = swapped ? !b : !a;
      why = firstBad ? "the first operand is strided along both dimensions"
                     : "the second operand is strided along both dimensions";
      return std::nullopt;
    }
    l.a = *a;
    l.b = *b;
    l.d = *d;
    return l;
  }
  why = "the output is strided along both dimensions";
  return std::nullopt;
}

GemmProblem tfm::runtime::cuda::linearProblem(int64_t m, int64_t k, int64_t n) {
  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {0, k, 1};
  // B[k][j] = w[j][k].
  p.b = {0, 1, k};
  p.c = {0, n, 1};
  return p;
}

std::optional<GemmProblem> tfm::runtime::cuda::batchMatmulProblem(
    int64_t b1, int64_t b2, int64_t m, int64_t k, int64_t n,
    const int64_t strides[12], std::string &why) {
  GemmProblem p;
  p.batch = b1 * b2;
  p.m = m;
  p.n = n;
  p.k = k;
  // One stride over b1·b2 matrices: b2's, when b1's steps over b2 of them.
  auto fold = [&](const int64_t *s, int64_t &out) {
    if (b1 == 1 || s[0] == b2 * s[1]) {
      out = s[1];
      return true;
    }
    if (b2 == 1) {
      out = s[0];
      return true;
    }
    return false;
  };
  MatrixStrides *operands[3] = {&p.a, &p.b, &p.c};
  const char *names[3] = {"first operand", "second operand", "output"};
  for (int i = 0; i < 3; ++i) {
    const int64_t *s = strides + 4 * i;
    if (!fold(s, operands[i]->batch)) {
      why = std::string("the ") + names[i] +
            "'s two batch dimensions are not evenly spaced";
      return std::nullopt;
    }
    operands[i]->row = s[2];
    operands[i]->column = s[3];
  }
  return p;
}
