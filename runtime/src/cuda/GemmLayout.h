//===- GemmLayout.h - A row-major GEMM as a cuBLASLt call --------*- C++ -*-===//
//
// tfm's GEMMs are row-major, with any element strides (transposed weights,
// a packed projection's parts, attention's heads); cuBLASLt multiplies
// column-major matrices, each with one leading dimension, optionally
// transposed, and one stride between the matrices of a batch. This derives
// the one from the other, or says why it cannot; it touches no library, so
// the table in docs/gpu-backend.md is tested without a GPU.
//
// A row-major C = A·B is the column-major Cᵀ = Bᵀ·Aᵀ over the same bytes,
// so when C's rows are dense the call computes D = Cᵀ with the operands
// swapped; when its columns are dense, D = C without the swap.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CUDA_GEMMLAYOUT_H
#define TFM_RUNTIME_SRC_CUDA_GEMMLAYOUT_H

#include <cstdint>
#include <optional>
#include <string>

namespace tfm::runtime::cuda {

/// Where element (batch, row, column) of a matrix lies, in elements.
struct MatrixStrides {
  int64_t batch = 0, row = 0, column = 0;
};

/// C[b][i][j] = Σₖ A[b][i][k] · B[b][k][j], for b < batch, i < m, j < n,
/// k < k. A batch stride of 0 repeats an operand over the batch.
struct GemmProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  MatrixStrides a, b, c;
};

/// One column-major operand of the call: `rows` × `columns` as stored, with
/// leading dimension `ld` (ld ≥ rows), read transposed when `transposed`.
struct LtMatrix {
  uint64_t rows = 0, columns = 0;
  int64_t ld = 0, batchStride = 0;
  bool transposed = false;
};

/// The call D = op(A') · op(B'), m' × n' × k': A' and B' are the problem's
/// B and A when `swapped` (D is then Cᵀ), else its A and B.
struct GemmLayout {
  bool swapped = false;
  int64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  LtMatrix a, b, d;
};

/// The layout of `p`, or nullopt with the reason in `why` when cuBLASLt
/// cannot read it: an operand strided both ways, a batch whose matrices
/// are not evenly spaced, an output repeated over the batch.
std::optional<GemmLayout> layoutOf(const GemmProblem &p, std::string &why);

/// The problem of a LINEAR descriptor: y[M,N] = x[M,K] · w[N,K]ᵀ.
GemmProblem linearProblem(int64_t m, int64_t k, int64_t n);

/// The problem of a BATCH_MATMUL descriptor: its two batch dimensions
/// folded into one where every operand spaces them evenly (nullopt, with
/// the reason, otherwise). `strides` as the ABI orders them.
std::optional<GemmProblem> batchMatmulProblem(int64_t b1, int64_t b2,
                                              int64_t m, int64_t k, int64_t n,
                                              const int64_t strides[12],
                                              std::string &why);

} // namespace tfm::runtime::cuda

#endif // TFM_RUNTIME_SRC_CUDA_GEMMLAYOUT_H
