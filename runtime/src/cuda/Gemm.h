//===- Gemm.h - A kernel descriptor's GEMM in cuBLASLt -----------*- C++ -*-===//
//
// LINEAR and BATCH_MATMUL descriptors run on the GPU as one cuBLASLt call
// each, with the bias and the activation in the call's epilogue where the
// library has them and a residual added through beta = 1. Everything that
// depends only on the descriptor (the matrix layouts, the operation) is
// made once, when the session is prepared; the algorithm is chosen once,
// at the first run, when the operands' alignments are known (the memory
// plan fixes them for the session).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CUDA_GEMM_H
#define TFM_RUNTIME_SRC_CUDA_GEMM_H

#include "Blas.h"
#include "GemmLayout.h"

#include "tfm/abi.h"

#include <map>
#include <string>
#include <tuple>

namespace tfm::runtime::cuda {

/// The workspace each call may use, which the device allocates once.
constexpr size_t kGemmWorkspaceBytes = 32u << 20;

class LibraryGemm {
public:
  /// The GEMM of descriptor `d` with `flags` (its tfm_kernel_flag_t bits:
  /// TFM_KERNEL_FLAG_NARROW_OPERANDS reads 16-bit operands). Throws
  /// DeviceError (INCOMPATIBLE) when cuBLASLt cannot run it, naming why.
  /// `allowTF32`: f32 GEMMs may round their operands to TF32 on the tensor
  /// cores.
  LibraryGemm(const Blas &blas, cublasLtHandle_t handle,
              const tfm_abi_kernel_desc_t &d, uint32_t flags, bool allowTF32);
  ~LibraryGemm();
  LibraryGemm(const LibraryGemm &) = delete;
  LibraryGemm &operator=(const LibraryGemm &) = delete;

  /// Enqueues the GEMM on `stream` with the descriptor's arguments (device
  /// pointers); returns 0, or non-zero with the reason in `error`.
  int32_t run(void *const *args, cudaStream_t stream, void *workspace,
              std::string &error);

  const GemmLayout &layout() const { return plan; }
  /// The epilogue the call fuses (CUBLASLT_EPILOGUE_*).
  int epilogue() const { return fusedEpilogue; }

private:
  using Alignments = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>;
  /// Creates the operation and the matrix layouts; `release` frees them.
  void describe(int compute, int operandType);
  void release();
  /// The heuristic's answer for these alignments, asked once.
  const cublasLtMatmulHeuristicResult_t *
  algorithm(const Alignments &alignments, std::string &error);

  const Blas &blas;
  cublasLtHandle_t handle;
  int32_t kind;
  GemmLayout plan;
  bool hasBias = false, hasResidual = false;
  int fusedEpilogue = CUBLASLT_EPILOGUE_DEFAULT;
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  std::map<Alignments, cublasLtMatmulHeuristicResult_t> chosen;
};

} // namespace tfm::runtime::cuda

#endif // TFM_RUNTIME_SRC_CUDA_GEMM_H
