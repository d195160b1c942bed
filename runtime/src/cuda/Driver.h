//===- Driver.h - The CUDA driver functions the runtime calls ---*- C++ -*-===//
//
// The runtime builds and runs without CUDA: it opens the driver library
// (libcuda.so.1) with dlopen when a session first asks for a GPU, and finds
// the few functions it calls by name. Their types are declared here from
// the driver's documented C interface, so no CUDA header is needed to build.
// TFM_CUDA_DRIVER names another library to open instead (tests use it);
// Library.h opens it.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CUDA_DRIVER_H
#define TFM_RUNTIME_SRC_CUDA_DRIVER_H

#include "Library.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfm::runtime::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;
using CUevent = struct CUevent_st *;

// The driver's values this runtime uses.
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;
constexpr int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;

// Each function: the member's name, the symbol the driver exports (the
// versioned one where the header maps the plain name onto it), its type.
#define TFM_CUDA_DRIVER_FUNCTIONS(X)                                           \
  X(init, "cuInit", CUresult (*)(unsigned))                                    \
  X(driverGetVersion, "cuDriverGetVersion", CUresult (*)(int *))               \
  X(getErrorName, "cuGetErrorName", CUresult (*)(CUresult, const char **))     \
  X(getErrorString, "cuGetErrorString", CUresult (*)(CUresult, const char **)) \
  X(deviceGetCount, "cuDeviceGetCount", CUresult (*)(int *))                   \
  X(deviceGet, "cuDeviceGet", CUresult (*)(CUdevice *, int))                   \
  X(deviceGetAttribute, "cuDeviceGetAttribute",                                \
    CUresult (*)(int *, int, CUdevice))                                        \
  X(deviceGetName, "cuDeviceGetName", CUresult (*)(char *, int, CUdevice))     \
  X(primaryCtxRetain, "cuDevicePrimaryCtxRetain",                              \
    CUresult (*)(CUcontext *, CUdevice))                                       \
  X(primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult (*)(CUdevice)) \
  X(ctxSetCurrent, "cuCtxSetCurrent", CUresult (*)(CUcontext))                 \
  X(moduleLoadDataEx, "cuModuleLoadDataEx",                                    \
    CUresult (*)(CUmodule *, const void *, unsigned, int *, void **))          \
  X(moduleUnload, "cuModuleUnload", CUresult (*)(CUmodule))                    \
  X(moduleGetFunction, "cuModuleGetFunction",                                  \
    CUresult (*)(CUfunction *, CUmodule, const char *))                        \
  X(funcSetAttribute, "cuFuncSetAttribute",                                    \
    CUresult (*)(CUfunction, int, int))                                        \
  X(launchKernel, "cuLaunchKernel",                                            \
    CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, \
                 unsigned, unsigned, CUstream, void **, void **))              \
  X(memAlloc, "cuMemAlloc_v2", CUresult (*)(CUdeviceptr *, size_t))            \
  X(memFree, "cuMemFree_v2", CUresult (*)(CUdeviceptr))                        \
  X(memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                   \
    CUresult (*)(CUdeviceptr, const void *, size_t, CUstream))                 \
  X(memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                   \
    CUresult (*)(void *, CUdeviceptr, size_t, CUstream))                       \
  X(memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                   \
    CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))                  \
  X(memAllocHost, "cuMemAllocHost_v2", CUresult (*)(void **, size_t))          \
  X(memFreeHost, "cuMemFreeHost", CUresult (*)(void *))                        \
  X(pointerGetAttribute, "cuPointerGetAttribute",                              \
    CUresult (*)(void *, int, CUdeviceptr))                                    \
  X(eventCreate, "cuEventCreate", CUresult (*)(CUevent *, unsigned))           \
  X(eventRecord, "cuEventRecord", CUresult (*)(CUevent, CUstream))             \
  X(eventDestroy, "cuEventDestroy_v2", CUresult (*)(CUevent))                  \
  X(streamWaitEvent, "cuStreamWaitEvent",                                      \
    CUresult (*)(CUstream, CUevent, unsigned))                                 \
  X(streamCreate, "cuStreamCreate", CUresult (*)(CUstream *, unsigned))        \
  X(streamDestroy, "cuStreamDestroy_v2", CUresult (*)(CUstream))               \
  X(streamSynchronize, "cuStreamSynchronize", CUresult (*)(CUstream))          \
  X(streamQuery, "cuStreamQuery", CUresult (*)(CUstream))

// CUDA graphs (a driver from CUDA 11.4 on): without them every run launches
// its kernels one by one.
#define TFM_CUDA_GRAPH_FUNCTIONS(X)                                            \
  X(streamBeginCapture, "cuStreamBeginCapture_v2",                             \
    CUresult (*)(CUstream, int))                                               \
  X(streamEndCapture, "cuStreamEndCapture", CUresult (*)(CUstream, CUgraph *)) \
  X(graphInstantiate, "cuGraphInstantiateWithFlags",                           \
    CUresult (*)(CUgraphExec *, CUgraph, unsigned long long))                  \
  X(graphLaunch, "cuGraphLaunch", CUresult (*)(CUgraphExec, CUstream))         \
  X(graphExecDestroy, "cuGraphExecDestroy", CUresult (*)(CUgraphExec))         \
  X(graphDestroy, "cuGraphDestroy", CUresult (*)(CUgraph))

// Tensor maps for TMA (a driver from CUDA 12.0 on): without them a model
// whose kernels read through TMA cannot run.
#define TFM_CUDA_TENSOR_MAP_FUNCTIONS(X)                                       \
  X(tensorMapEncodeTiled, "cuTensorMapEncodeTiled",                            \
    CUresult (*)(void *, int, unsigned, void *, const uint64_t *,              \
                 const uint64_t *, const unsigned *, const unsigned *, int,    \
                 int, int, int))

// cuTensorMapEncodeTiled's values this runtime uses: the element types,
// the swizzles by span (none, 32, 64, 128 bytes), the L2 promotion.
constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6;
constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7;
constexpr int CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
constexpr int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
constexpr int CU_TENSOR_MAP_SWIZZLE_NONE = 0;
constexpr int CU_TENSOR_MAP_SWIZZLE_32B = 1;
constexpr int CU_TENSOR_MAP_SWIZZLE_64B = 2;
constexpr int CU_TENSOR_MAP_SWIZZLE_128B = 3;
constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2;
constexpr int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;
/// A CUtensorMap's size; the driver reads it 64-byte aligned.
constexpr size_t kTensorMapBytes = 128;

struct Driver {
#define TFM_CUDA_MEMBER(member, symbol, type) Function<type> member = nullptr;
  TFM_CUDA_DRIVER_FUNCTIONS(TFM_CUDA_MEMBER)
  TFM_CUDA_GRAPH_FUNCTIONS(TFM_CUDA_MEMBER)
  TFM_CUDA_TENSOR_MAP_FUNCTIONS(TFM_CUDA_MEMBER)
#undef TFM_CUDA_MEMBER
  /// Whether the driver has every function of TFM_CUDA_GRAPH_FUNCTIONS.
  bool hasGraphs = false;
  /// Whether it has TFM_CUDA_TENSOR_MAP_FUNCTIONS.
  bool hasTensorMaps = false;

  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult rc) const;
};

/// The process's driver, opened and initialized on first use; null, with
/// the reason in `error`, when there is no driver library, it lacks a
/// function, or it does not initialize (no device, a driver too old).
const Driver *driver(std::string &error);

} // namespace tfm::runtime::cuda

#endif // TFM_RUNTIME_SRC_CUDA_DRIVER_H
