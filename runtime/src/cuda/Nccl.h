//===- Nccl.h - The NCCL functions the runtime calls -------------*- C++
//-*-===//
//
// NCCL is not in Debian; it is wherever PyTorch's CUDA wheels are. Like the
// driver, it is opened with dlopen when a communicator is first asked for
// (libnccl.so.2, or the library TFM_NCCL_LIBRARY names; tests name a
// stand-in), and its functions found by name into a table of types
// declared here from NCCL's documented C interface.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CUDA_NCCL_H
#define TFM_RUNTIME_SRC_CUDA_NCCL_H

#include "Driver.h"

#include <string>

namespace tfm::runtime::cuda {

using ncclResult = int;
using ncclComm = struct ncclComm_st *;
/// What rank 0 draws and every rank passes to ncclCommInitRank, by value.
struct NcclUniqueId {
  char internal[128];
};

// NCCL's values this runtime uses.
constexpr ncclResult ncclSuccess = 0, ncclRemoteError = 6, ncclInProgress = 7;
constexpr int ncclUint8 = 1, ncclInt32 = 2, ncclInt64 = 4, ncclFloat16 = 6,
              ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9;
constexpr int ncclSum = 0;
/// ncclScalarHostImmediate: a scale read from host memory when the
/// operation is made.
constexpr int ncclScalarHostImmediate = 1;

#define TFM_NCCL_FUNCTIONS(X)                                                  \
  X(getVersion, "ncclGetVersion", ncclResult (*)(int *))                       \
  X(getErrorString, "ncclGetErrorString", const char *(*)(ncclResult))         \
  X(getUniqueId, "ncclGetUniqueId", ncclResult (*)(NcclUniqueId *))            \
  X(commInitRank, "ncclCommInitRank",                                          \
    ncclResult (*)(ncclComm *, int, NcclUniqueId, int))                        \
  X(commDestroy, "ncclCommDestroy", ncclResult (*)(ncclComm))                  \
  X(commAbort, "ncclCommAbort", ncclResult (*)(ncclComm))                      \
  X(commGetAsyncError, "ncclCommGetAsyncError",                                \
    ncclResult (*)(ncclComm, ncclResult *))                                    \
  X(allReduce, "ncclAllReduce",                                                \
    ncclResult (*)(const void *, void *, size_t, int, int, ncclComm,           \
                   CUstream))                                                  \
  X(broadcast, "ncclBroadcast",                                                \
    ncclResult (*)(const void *, void *, size_t, int, int, ncclComm,           \
                   CUstream))                                                  \
  X(allGather, "ncclAllGather",                                                \
    ncclResult (*)(const void *, void *, size_t, int, ncclComm, CUstream))     \
  X(reduceScatter, "ncclReduceScatter",                                        \
    ncclResult (*)(const void *, void *, size_t, int, int, ncclComm,           \
                   CUstream))                                                  \
  X(redOpCreatePreMulSum, "ncclRedOpCreatePreMulSum",                          \
    ncclResult (*)(int *, void *, int, int, ncclComm))                         \
  X(redOpDestroy, "ncclRedOpDestroy", ncclResult (*)(int, ncclComm))

struct Nccl {
#define TFM_NCCL_MEMBER(member, symbol, type) Function<type> member = nullptr;
  TFM_NCCL_FUNCTIONS(TFM_NCCL_MEMBER)
#undef TFM_NCCL_MEMBER
  /// ncclGetLastError (NCCL 2.13 on), which says more than the code; null
  /// in older versions.
  const char *(*getLastError)(ncclComm) = nullptr;
  /// "NCCL 2.21.5".
  std::string version;
};

/// The process's NCCL, opened on first use; null, with the reason in
/// `error`, when the library is absent or lacks a function.
const Nccl *nccl(std::string &error);

} // namespace tfm::runtime::cuda

#endif // TFM_RUNTIME_SRC_CUDA_NCCL_H
