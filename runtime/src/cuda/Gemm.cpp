//===- Gemm.cpp - A kernel descriptor's GEMM in cuBLASLt ------------------===//

#include "Gemm.h"

#include "../Device.h"

#include <fmt/format.h>

using namespace tfm::runtime;
using namespace tfm::runtime::cuda;

namespace {

/// The largest power of two up to 256 that divides `p`'s address.
uint32_t alignmentOf(const void *p) {
  auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a)
    a /= 2;
  return a;
}

} // namespace

LibraryGemm::LibraryGemm(const Blas &blas, cublasLtHandle_t handle,
                         const tfm_abi_kernel_desc_t &desc, uint32_t flags,
                         bool allowTF32)
    : blas(blas), handle(handle), kind(desc.kind) {
  auto refuse = [&](const std::string &why) {
    throw DeviceError(TFM_STATUS_INCOMPATIBLE,
                      fmt::format("cuBLASLt cannot run this GEMM: {}", why));
  };
  std::string why;
  std::optional<GemmProblem> problem;
  if (desc.kind == TFM_KERNEL_LINEAR) {
    const int64_t *p = desc.params;
    problem = linearProblem(p[TFM_LINEAR_M], p[TFM_LINEAR_K], p[TFM_LINEAR_N]);
    hasBias = p[TFM_LINEAR_HAS_BIAS] != 0;
    hasResidual = p[TFM_LINEAR_HAS_RESIDUAL] != 0;
    int64_t activation = p[TFM_LINEAR_ACTIVATION];
    // The library's GELU is the tanh approximation: the compiler applies
    // the erf form (and SiLU) after the call instead.
    if (!TFM_CUDA_LINEAR_FUSES_ACTIVATION(activation))
      refuse(fmt::format("its activation ({}) has no cuBLASLt epilogue",
                         activation));
    // The epilogue adds the bias before the activation, and the residual
    // (beta·C) comes before both: act(A·B + C + bias). tfm's LINEAR adds
    // the residual after the activation, so the two combine only without
    // an activation.
    if (hasResidual && activation != TFM_ACTIVATION_NONE)
      refuse("a residual after an activation");
    bool relu = activation == TFM_ACTIVATION_RELU;
    bool gelu = activation == TFM_ACTIVATION_GELU_TANH;
    fusedEpilogue =
        relu ? (hasBias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
        : gelu
            ? (hasBias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
        : hasBias ? CUBLASLT_EPILOGUE_BIAS
                  : CUBLASLT_EPILOGUE_DEFAULT;
  } else if (desc.kind == TFM_KERNEL_BATCH_MATMUL) {
    problem = batchMatmulProblem(
        desc.params[TFM_BATCH_MATMUL_B1], desc.params[TFM_BATCH_MATMUL_B2],
        desc.params[TFM_BATCH_MATMUL_M], desc.params[TFM_BATCH_MATMUL_K],
        desc.params[TFM_BATCH_MATMUL_N], desc.strides, why);
    if (!problem)
      refuse(why);
  } else {
    refuse(fmt::format("kernel kind {} is not a GEMM", desc.kind));
  }
  std::optional<GemmLayout> layout = layoutOf(*problem, why);
  if (!layout)
    refuse(why);
  plan = *layout;
  // The bias runs along D's rows: one value per output column of tfm's
  // row-major y, which is what D's rows are when the operands are swapped.
  if (hasBias && !plan.swapped)
    refuse("a bias along the output's rows");

  // An f32 output, accumulated in f32. bf16 and f16 descriptors multiply
  // in that type on the tensor cores: operands stored in it are read as
  // they are (the library's 16-bit kernels, half the bytes), f32 ones are
  // rounded by the library, as oneDNN does on the CPU.
  bool narrow = flags & TFM_KERNEL_FLAG_NARROW_OPERANDS;
  if (narrow && desc.dtype != TFM_DTYPE_BF16 && desc.dtype != TFM_DTYPE_F16)
    refuse("16-bit operands of an f32 GEMM");
  int compute = CUBLAS_COMPUTE_32F, operandType = CUDA_R_32F;
  if (narrow)
    operandType = desc.dtype == TFM_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  else if (desc.dtype == TFM_DTYPE_BF16)
    compute = CUBLAS_COMPUTE_32F_FAST_16BF;
  else if (desc.dtype == TFM_DTYPE_F16)
    compute = CUBLAS_COMPUTE_32F_FAST_16F;
  else if (allowTF32)
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  try {
    describe(compute, operandType);
  } catch (...) {
    release();
    throw;
  }
}

void LibraryGemm::describe(int compute, int operandType) {
  auto check = [&](cublasStatus_t rc, const char *what) {
    if (rc != CUBLAS_STATUS_SUCCESS)
      throw DeviceError(
          rc == CUBLAS_STATUS_ALLOC_FAILED ? TFM_STATUS_RESOURCE_EXHAUSTED
                                           : TFM_STATUS_INTERNAL,
          fmt::format("cuBLASLt: {}: {}", what, blas.describe(rc)));
  };
  check(blas.matmulDescCreate(&operation, compute, CUDA_R_32F),
        "cannot create a matmul");
  int32_t transA = plan.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t transB = plan.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t epilogue = fusedEpilogue;
  check(blas.matmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                    &transA, sizeof transA),
        "cannot set TRANSA");
  check(blas.matmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSB,
                                    &transB, sizeof transB),
        "cannot set TRANSB");
  check(blas.matmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                    &epilogue, sizeof epilogue),
        "cannot set the epilogue");
  auto matrix = [&](cublasLtMatrixLayout_t &out, const LtMatrix &m, int type) {
    check(blas.matrixLayoutCreate(&out, type, m.rows, m.columns, m.ld),
          "cannot create a matrix layout");
    if (plan.batch == 1)
      return;
    int32_t count = plan.batch;
    int64_t stride = m.batchStride;
    check(blas.matrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                        &count, sizeof count),
          "cannot set a batch count");
    check(blas.matrixLayoutSetAttribute(
              out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
              sizeof stride),
          "cannot set a batch stride");
  };
  matrix(a, plan.a, operandType);
  matrix(b, plan.b, operandType);
  matrix(d, plan.d, CUDA_R_32F);
}

LibraryGemm::~LibraryGemm() { release(); }

void LibraryGemm::release() {
  if (a)
    blas.matrixLayoutDestroy(a);
  if (b)
    blas.matrixLayoutDestroy(b);
  if (d)
    blas.matrixLayoutDestroy(d);
  if (operation)
    blas.matmulDescDestroy(operation);
}

const cublasLtMatmulHeuristicResult_t *
LibraryGemm::algorithm(const Alignments &alignments, std::string &error) {
  if (auto it = chosen.find(alignments); it != chosen.end())
    return &it->second;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasStatus_t rc = blas.preferenceCreate(&preference);
  uint64_t workspace = kGemmWorkspaceBytes;
  uint32_t values[4] = {std::get<0>(alignments), std::get<1>(alignments),
                        std::get<2>(alignments), std::get<3>(alignments)};
  int attributes[4] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  if (rc == CUBLAS_STATUS_SUCCESS)
    rc = blas.preferenceSetAttribute(preference,
                                     CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                     &workspace, sizeof workspace);
  for (int i = 0; i < 4 && rc == CUBLAS_STATUS_SUCCESS; ++i)
    rc = blas.preferenceSetAttribute(preference, attributes[i], &values[i],
                                     sizeof values[i]);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (rc == CUBLAS_STATUS_SUCCESS)
    rc = blas.algoGetHeuristic(handle, operation, a, b, d, d, preference, 1,
                               &result, &found);
  if (preference)
    blas.preferenceDestroy(preference);
  if (rc != CUBLAS_STATUS_SUCCESS || found < 1) {
    error = fmt::format(
        "cuBLASLt has no algorithm for this GEMM ({} × {} × {}, batch {}): {}",
        plan.m, plan.n, plan.k, plan.batch,
        rc != CUBLAS_STATUS_SUCCESS ? blas.describe(rc) : "none found");
    return nullptr;
  }
  return &chosen.emplace(alignments, result).first->second;
}

int32_t LibraryGemm::run(void *const *args, cudaStream_t stream,
                         void *workspace, std::string &error) {
  // LINEAR: x, w, b, r, y; BATCH_MATMUL: a, b, c.
  bool linear = kind == TFM_KERNEL_LINEAR;
  const void *first = args[0], *second = args[1];
  const void *bias = linear ? args[2] : nullptr;
  const void *residual = linear && hasResidual ? args[3] : nullptr;
  void *out = linear ? args[4] : args[2];
  const void *opA = plan.swapped ? second : first;
  const void *opB = plan.swapped ? first : second;
  if (hasBias) {
    cublasStatus_t rc = blas.matmulDescSetAttribute(
        operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (rc != CUBLAS_STATUS_SUCCESS) {
      error = "cuBLASLt: cannot set the bias: " + blas.describe(rc);
      return -1;
    }
  }
  const void *c = residual ? residual : out;
  Alignments alignments{alignmentOf(opA), alignmentOf(opB), alignmentOf(c),
                        alignmentOf(out)};
  const cublasLtMatmulHeuristicResult_t *chosenAlgo =
      algorithm(alignments, error);
  if (!chosenAlgo)
    return -1;
  float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
  size_t workspaceBytes = chosenAlgo->workspaceSize;
  cublasStatus_t rc =
      blas.matmul(handle, operation, &alpha, opA, a, opB, b, &beta, c, d, out,
                  d, &chosenAlgo->algo, workspaceBytes ? workspace : nullptr,
                  workspaceBytes, stream);
  if (rc != CUBLAS_STATUS_SUCCESS) {
    error = fmt::format("cuBLASLt's GEMM ({} × {} × {}, batch {}) failed: {}",
                        plan.m, plan.n, plan.k, plan.batch, blas.describe(rc));
    return -1;
  }
  return 0;
}
