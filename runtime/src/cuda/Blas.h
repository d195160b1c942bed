//===- Blas.h - The cuBLASLt functions the runtime calls ---------*- C++ -*-===//
//
// GEMMs on a GPU run in cuBLASLt, as they run in oneDNN on the CPU. Like the
// driver, the library is opened with dlopen when a session first needs it,
// and its few functions are declared here from its documented C interface,
// so no CUDA header or library is needed to build. TFM_CUBLASLT names the
// library to open instead of the sonames below (tests name a stand-in), or
// turns it off with "off".
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CUDA_BLAS_H
#define TFM_RUNTIME_SRC_CUDA_BLAS_H

#include "Library.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfm::runtime::cuda {

using cublasStatus_t = int;
using cublasLtHandle_t = struct cublasLtContext *;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque_t *;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque_t *;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque_t *;
using cudaStream_t = struct CUstream_st *;

/// The library's semi-opaque algorithm, and one answer of its heuristic.
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

// The library's values this runtime uses (cublas_api.h, cublasLt.h,
// library_types.h).
constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
constexpr cublasStatus_t CUBLAS_STATUS_ALLOC_FAILED = 3;
constexpr cublasStatus_t CUBLAS_STATUS_NOT_SUPPORTED = 15;
constexpr int CUDA_R_32F = 0;
constexpr int CUDA_R_16F = 2;
constexpr int CUDA_R_16BF = 14;
constexpr int CUBLAS_COMPUTE_32F = 68;
constexpr int CUBLAS_COMPUTE_32F_FAST_16F = 74;
constexpr int CUBLAS_COMPUTE_32F_FAST_16BF = 75;
constexpr int CUBLAS_COMPUTE_32F_FAST_TF32 = 77;
constexpr int CUBLAS_OP_N = 0;
constexpr int CUBLAS_OP_T = 1;
constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3;
constexpr int CUBLASLT_MATMUL_DESC_TRANSB = 4;
constexpr int CUBLASLT_MATMUL_DESC_EPILOGUE = 7;
constexpr int CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8;
constexpr int CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26;
constexpr int CUBLASLT_EPILOGUE_DEFAULT = 1;
constexpr int CUBLASLT_EPILOGUE_RELU = 2;
constexpr int CUBLASLT_EPILOGUE_BIAS = 4;
constexpr int CUBLASLT_EPILOGUE_RELU_BIAS = 6;
constexpr int CUBLASLT_EPILOGUE_GELU = 32;
constexpr int CUBLASLT_EPILOGUE_GELU_BIAS = 36;
constexpr int CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5;
constexpr int CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;
constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8;

// Each function: the member's name, the symbol, its type.
#define TFM_CUBLASLT_FUNCTIONS(X)                                              \
  X(create, "cublasLtCreate", cublasStatus_t (*)(cublasLtHandle_t *))          \
  X(destroy, "cublasLtDestroy", cublasStatus_t (*)(cublasLtHandle_t))          \
  X(getVersion, "cublasLtGetVersion", size_t (*)())                            \
  X(getStatusName, "cublasLtGetStatusName", const char *(*)(cublasStatus_t))   \
  X(getStatusString, "cublasLtGetStatusString",                                \
    const char *(*)(cublasStatus_t))                                           \
  X(matmulDescCreate, "cublasLtMatmulDescCreate",                              \
    cublasStatus_t (*)(cublasLtMatmulDesc_t *, int, int))                      \
  X(matmulDescDestroy, "cublasLtMatmulDescDestroy",                            \
    cublasStatus_t (*)(cublasLtMatmulDesc_t))                                  \
  X(matmulDescSetAttribute, "cublasLtMatmulDescSetAttribute",                  \
    cublasStatus_t (*)(cublasLtMatmulDesc_t, int, const void *, size_t))       \
  X(matrixLayoutCreate, "cublasLtMatrixLayoutCreate",                          \
    cublasStatus_t (*)(cublasLtMatrixLayout_t *, int, uint64_t, uint64_t,      \
                       int64_t))                                               \
  X(matrixLayoutDestroy, "cublasLtMatrixLayoutDestroy",                        \
    cublasStatus_t (*)(cublasLtMatrixLayout_t))                                \
  X(matrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute",              \
    cublasStatus_t (*)(cublasLtMatrixLayout_t, int, const void *, size_t))     \
  X(preferenceCreate, "cublasLtMatmulPreferenceCreate",                        \
    cublasStatus_t (*)(cublasLtMatmulPreference_t *))                          \
  X(preferenceDestroy, "cublasLtMatmulPreferenceDestroy",                      \
    cublasStatus_t (*)(cublasLtMatmulPreference_t))                            \
  X(preferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute",            \
    cublasStatus_t (*)(cublasLtMatmulPreference_t, int, const void *,          \
                       size_t))                                                \
  X(algoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic",                        \
    cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t,                 \
                       cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,         \
                       cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,         \
                       cublasLtMatmulPreference_t, int,                        \
                       cublasLtMatmulHeuristicResult_t *, int *))              \
  X(matmul, "cublasLtMatmul",                                                  \
    cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *,   \
                       const void *, cublasLtMatrixLayout_t, const void *,     \
                       cublasLtMatrixLayout_t, const void *, const void *,     \
                       cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t, \
                       const cublasLtMatmulAlgo_t *, void *, size_t,           \
                       cudaStream_t))

struct Blas {
#define TFM_CUBLASLT_MEMBER(member, symbol, type)                              \
  Function<type> member = nullptr;
  TFM_CUBLASLT_FUNCTIONS(TFM_CUBLASLT_MEMBER)
#undef TFM_CUBLASLT_MEMBER

  /// Where the library was found, and its version ("13.0.2").
  std::string path, version;

  /// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not
  /// supported)".
  std::string describe(cublasStatus_t rc) const;
};

static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96,
              "the library's heuristic result is 96 bytes");

/// The process's cuBLASLt, opened on first use; null, with the reason in
/// `error`, when TFM_CUBLASLT is "off", no library is found, or it lacks a
/// function. Its sonames are tried newest first.
const Blas *blas(std::string &error);

} // namespace tfm::runtime::cuda

#endif // TFM_RUNTIME_SRC_CUDA_BLAS_H
