//===- Device.cpp - The CUDA device: device memory, PTX kernels -----------===//
//
// A session on a GPU holds the device's primary context (shared with every
// other user of the GPU in the process), its own stream, and its own module:
// the model's PTX, compiled by the driver's JIT when the session is created.
// Compiled code launches kernels by index into the model's kernel names, and
// runs the model's GEMM descriptors through cuBLASLt (Gemm.h); all work
// goes to the session's stream, in order, so a copy back to the host after
// a run sees every launch of the run.
//
//===----------------------------------------------------------------------===//

#include "../Device.h"
#include "../Internal.h"
#include "Driver.h"
#include "Gemm.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <memory>
#include <vector>

using namespace tfm::runtime;
using namespace tfm::runtime::cuda;

namespace {

/// "sm_90a" -> 90, with `exact` set by the suffix; -1 for a malformed name.
int capabilityOf(const std::string &arch, bool &exact) {
  exact = !arch.empty() && arch.back() == 'a';
  std::string digits = arch.substr(0, arch.size() - (exact ? 1 : 0));
  if (digits.rfind("sm_", 0) != 0 || digits.size() < 5 || digits.size() > 6)
    return -1;
  int value = 0;
  for (char c : digits.substr(3)) {
    if (c < '0' || c > '9')
      return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

class CUDADevice : public Device {
public:
  CUDADevice(const Driver &d, int ordinal) : drv(d), ordinal(ordinal) {}

  ~CUDADevice() override {
    // Errors here cannot be reported; the context stays usable for others.
    if (!context)
      return;
    drv.ctxSetCurrent(context);
    gemms.clear();
    tensorMapMemory.clear();
    for (CUevent e : {callerEvent, sessionEvent})
      if (e)
        drv.eventDestroy(e);
    if (blasHandle)
      blas->destroy(blasHandle);
    workspace = DeviceBuffer();
    if (module)
      drv.moduleUnload(module);
    for (CUstream s : {stream, side})
      if (s)
        drv.streamDestroy(s);
    drv.primaryCtxRelease(device);
  }

  void open() {
    int count = 0;
    check(drv.deviceGetCount(&count), "cannot count the GPUs");
    if (ordinal >= count)
      throw DeviceError(TFM_STATUS_UNAVAILABLE,
                        fmt::format("{}: this machine has {} GPU{}", name(),
                                    count, count == 1 ? "" : "s"));
    check(drv.deviceGet(&device, ordinal), "cannot open the GPU");
    char buffer[256] = {};
    check(drv.deviceGetName(buffer, sizeof buffer - 1, device),
          "cannot read the GPU's name");
    model = buffer;
    int major = 0, minor = 0;
    check(drv.deviceGetAttribute(&major,
                                 CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                 device),
          "cannot read the GPU's architecture");
    check(drv.deviceGetAttribute(&minor,
                                 CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                 device),
          "cannot read the GPU's architecture");
    capability = major * 10 + minor;
    check(drv.deviceGetAttribute(
              &sharedOptIn,
              CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device),
          "cannot read the GPU's shared memory size");
    check(drv.primaryCtxRetain(&context, device),
          "cannot create a context on the GPU");
    makeCurrent();
    check(drv.streamCreate(&stream, CU_STREAM_NON_BLOCKING),
          "cannot create a stream");
  }

  std::string name() const override {
    return fmt::format("cuda:{}", ordinal);
  }
  void *workStream() override {
    makeCurrent();
    return stream;
  }
  void *sideStream() override {
    makeCurrent();
    if (!side)
      check(drv.streamCreate(&side, CU_STREAM_NON_BLOCKING),
            "cannot create a second stream");
    return side;
  }
  int32_t target() const override { return TFM_TARGET_CUDA; }

  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    makeCurrent();
    check(drv.memcpyHtoDAsync(address(dst), src, bytes, stream),
          "cannot copy to the GPU");
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    makeCurrent();
    if (bytes)
      check(drv.memcpyDtoHAsync(dst, address(src), bytes, stream),
            "cannot copy from the GPU");
    synchronize();
  }

  void copyOnDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return;
    makeCurrent();
    check(drv.memcpyDtoDAsync(address(dst), address(src), bytes, stream),
          "cannot copy on the GPU");
  }

  void *allocateStaging(size_t bytes) override {
    makeCurrent();
    void *p = nullptr;
    CUresult rc = drv.memAllocHost(&p, bytes ? bytes : 1);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY)
      return nullptr;
    check(rc, fmt::format("cannot allocate {} bytes of page-locked host "
                          "memory",
                          bytes));
    return p;
  }
  void freeStaging(void *p) override {
    makeCurrent();
    drv.memFreeHost(p);
  }

  std::string checkMemory(const void *p, size_t bytes) const override {
    CUdeviceptr at = address(p), start = 0;
    int owner = -1;
    size_t size = 0;
    if (drv.pointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                at) != CUDA_SUCCESS ||
        drv.pointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                at) != CUDA_SUCCESS ||
        drv.pointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, at) !=
            CUDA_SUCCESS)
      return fmt::format("{} is not memory the CUDA driver allocated", p);
    if (owner != ordinal)
      return fmt::format("{} is memory of cuda:{}, not of {}", p, owner,
                         name());
    if (bytes > size - (at - start))
      return fmt::format("its {} bytes from {} run past the end of the "
                         "allocation holding it ({} bytes)",
                         bytes, p, size);
    return "";
  }

  void waitForStream(void *callerStream) override {
    makeCurrent();
    CUevent e = event(callerEvent);
    check(drv.eventRecord(e, static_cast<CUstream>(callerStream)),
          "cannot mark the caller's stream");
    check(drv.streamWaitEvent(stream, e, 0),
          "cannot order the run after the caller's stream");
  }
  void signalStream(void *callerStream) override {
    makeCurrent();
    CUevent e = event(sessionEvent);
    check(drv.eventRecord(e, stream), "cannot mark the end of the run");
    check(drv.streamWaitEvent(static_cast<CUstream>(callerStream), e, 0),
          "cannot order the caller's stream after the run");
  }

  void prepare(const tfm_abi_model_t &m,
               const KernelOptions &kernelOptions) override {
    bool exact;
    int wanted = capabilityOf(m.device_arch, exact);
    if (wanted < 0)
      throw DeviceError(TFM_STATUS_DATA_LOSS,
                        fmt::format("the model names the unknown GPU "
                                    "architecture '{}'",
                                    m.device_arch));
    // PTX runs on its architecture and, through the JIT, on later ones;
    // an 'a' architecture's features exist on that one only.
    if (exact ? capability != wanted : capability < wanted)
      throw DeviceError(
          TFM_STATUS_INCOMPATIBLE,
          fmt::format("the model was compiled for {}, which {} ({}, sm_{}) "
                      "does not run; compile it for an architecture up to "
                      "this GPU's (--gpu-arch=sm_80 runs on every GPU the "
                      "CUDA target supports)",
                      m.device_arch, name(), model, capability));
    allowTF32 = kernelOptions.allowTF32;
    prepareGemms(m);
    // A model without kernels has empty device code, nothing to load.
    if (m.num_device_kernels == 0)
      return;
    makeCurrent();
    std::vector<char> log(8192, 0), info(8192, 0);
    int options[] = {CU_JIT_ERROR_LOG_BUFFER,
                     CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                     CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {
        log.data(), reinterpret_cast<void *>(uintptr_t(log.size() - 1)),
        info.data(), reinterpret_cast<void *>(uintptr_t(info.size() - 1))};
    if (CUresult rc =
            drv.moduleLoadDataEx(&module, m.device_code, 4, options, values);
        rc != CUDA_SUCCESS) {
      module = nullptr;
      throw DeviceError(rc == CUDA_ERROR_OUT_OF_MEMORY
                            ? TFM_STATUS_RESOURCE_EXHAUSTED
                            : TFM_STATUS_INCOMPATIBLE,
                        fmt::format("{} cannot load the model's PTX: {}{}{}",
                                    name(), drv.describe(rc),
                                    log[0] ? ": " : "", log.data()));
    }
    // A warning of the JIT (registers spilled to local memory, an
    // instruction emulated on this GPU) is kept for the session's
    // description; its other notes are not.
    std::string infoLog(info.data());
    while (!infoLog.empty() && std::isspace(uint8_t(infoLog.back())))
      infoLog.pop_back();
    if (infoLog.find("warning") != std::string::npos)
      jitWarnings = infoLog;
    functions.resize(m.num_device_kernels);
    kernelNames.resize(m.num_device_kernels);
    for (int32_t i = 0; i < m.num_device_kernels; ++i) {
      kernelNames[i] = m.device_kernels[i];
      if (CUresult rc = drv.moduleGetFunction(&functions[i], module,
                                              m.device_kernels[i]);
          rc != CUDA_SUCCESS)
        throw DeviceError(TFM_STATUS_DATA_LOSS,
                          fmt::format("the model's PTX has no kernel '{}': {}",
                                      kernelNames[i], drv.describe(rc)));
    }
  }

  int32_t launch(int32_t kernel, const int64_t grid[3], const int64_t block[3],
                 int64_t sharedBytes, void **args,
                 std::string &error) override {
    if (kernel < 0 || kernel >= static_cast<int32_t>(functions.size())) {
      error = fmt::format("the code launched kernel {}, which the model does "
                          "not have",
                          kernel);
      return -1;
    }
    const std::string &kname = kernelNames[kernel];
    for (int d = 0; d < 3; ++d)
      if (grid[d] < 1 || grid[d] > INT32_MAX || block[d] < 1 ||
          block[d] > 1024) {
        error = fmt::format("kernel '{}': a launch of [{}, {}, {}] blocks of "
                            "[{}, {}, {}] threads is out of range",
                            kname, grid[0], grid[1], grid[2], block[0],
                            block[1], block[2]);
        return -1;
      }
    if (sharedBytes < 0 || sharedBytes > sharedOptIn) {
      error = fmt::format("kernel '{}' asks for {} bytes of shared memory; {} "
                          "has {}",
                          kname, sharedBytes, name(), sharedOptIn);
      return -1;
    }
    makeCurrent();
    CUfunction f = functions[kernel];
    CUresult rc = CUDA_SUCCESS;
    // Past 48 KiB, dynamic shared memory is opted into per function.
    if (sharedBytes > 48 * 1024)
      rc = drv.funcSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                static_cast<int>(sharedBytes));
    if (rc == CUDA_SUCCESS)
      rc = drv.launchKernel(
          f, unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2]),
          unsigned(block[0]), unsigned(block[1]), unsigned(block[2]),
          unsigned(sharedBytes), stream, args, nullptr);
    if (rc != CUDA_SUCCESS) {
      error = fmt::format("kernel '{}' did not launch on {}: {}", kname,
                          name(), drv.describe(rc));
      return -1;
    }
    return 0;
  }

  /// `index` is one of the model's kernels: the session checked it.
  int32_t runKernel(int32_t index, void *const *args,
                    std::string &error) override {
    makeCurrent();
    return gemms[index]->run(args, stream, workspace.get(), error);
  }

  /// The map is encoded into page-locked memory that stays as it is and
  /// copied to device memory on the session's stream, ahead of the
  /// launches that read it: a graph that records the copy makes it again
  /// at each replay, from the same bytes.
  void *encodeTensorMap(const tfm_abi_tensor_map_desc_t &d, const void *base,
                        std::string &error) override {
    if (!drv.hasTensorMaps) {
      error = "the CUDA driver has no tensor maps (before CUDA 12.0)";
      return nullptr;
    }
    makeCurrent();
    StagingBuffer host(this, allocateStaging(kTensorMapBytes));
    DeviceBuffer onDevice = allocate(kTensorMapBytes);
    if (!host.get() || !onDevice.get()) {
      error = "out of memory";
      return nullptr;
    }
    uint64_t dims[TFM_TENSOR_MAP_MAX_RANK], strides[TFM_TENSOR_MAP_MAX_RANK];
    unsigned box[TFM_TENSOR_MAP_MAX_RANK], unit[TFM_TENSOR_MAP_MAX_RANK];
    for (int64_t i = 0; i < d.rank; ++i) {
      dims[i] = static_cast<uint64_t>(d.dims[i]);
      box[i] = static_cast<unsigned>(d.box[i]);
      unit[i] = 1;
      if (i + 1 < d.rank)
        strides[i] = static_cast<uint64_t>(d.strides[i]);
    }
    int type = d.dtype == TFM_DTYPE_F16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
               : d.dtype == TFM_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                           : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    int swizzle = d.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                  : d.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                  : d.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                    : CU_TENSOR_MAP_SWIZZLE_NONE;
    CUresult rc = drv.tensorMapEncodeTiled(
        host.get(), type, static_cast<unsigned>(d.rank),
        const_cast<void *>(base), dims, strides, box, unit,
        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (rc != CUDA_SUCCESS) {
      error = "cuTensorMapEncodeTiled: " + drv.describe(rc);
      return nullptr;
    }
    copyToDevice(onDevice.get(), host.get(), kTensorMapBytes);
    void *map = onDevice.get();
    tensorMapMemory.push_back({std::move(host), std::move(onDevice)});
    return map;
  }

  std::string whyNoGraphs() const override {
    if (!drv.hasGraphs)
      return "the CUDA driver has no graphs (before CUDA 11.4)";
    return "";
  }

  void beginCapture() override {
    makeCurrent();
    // Thread-local: another thread's CUDA calls (an embedder's) neither
    // join the capture nor break it.
    check(drv.streamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
          "cannot start recording a graph");
  }

  void *endCapture(bool keep) override {
    makeCurrent();
    CUgraph graph = nullptr;
    CUresult rc = drv.streamEndCapture(stream, &graph);
    if (rc != CUDA_SUCCESS || !keep) {
      if (graph)
        drv.graphDestroy(graph);
      if (keep)
        check(rc, "cannot record a graph");
      return nullptr;
    }
    CUgraphExec exec = nullptr;
    rc = drv.graphInstantiate(&exec, graph, 0);
    drv.graphDestroy(graph);
    check(rc, "cannot instantiate a graph");
    return exec;
  }

  void replay(void *graph) override {
    makeCurrent();
    check(drv.graphLaunch(static_cast<CUgraphExec>(graph), stream),
          "cannot launch a graph");
  }

  void releaseGraph(void *graph) override {
    if (graph && context) {
      drv.ctxSetCurrent(context);
      drv.graphExecDestroy(static_cast<CUgraphExec>(graph));
    }
  }

  void synchronize() override {
    makeCurrent();
    check(drv.streamSynchronize(stream),
          "a kernel failed (run with TFM_PROFILE=1 to wait on each kernel "
          "and name it)");
  }

protected:
  void *allocateRaw(size_t bytes) override {
    makeCurrent();
    CUdeviceptr p = 0;
    // The driver aligns every allocation to at least 256 bytes.
    CUresult rc = drv.memAlloc(&p, bytes ? bytes : 1);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY)
      return nullptr;
    check(rc, fmt::format("cannot allocate {} bytes", bytes));
    return reinterpret_cast<void *>(static_cast<uintptr_t>(p));
  }
  void deallocateRaw(void *ptr) override {
    makeCurrent();
    drv.memFree(address(ptr));
  }

private:
  /// A cuBLASLt call per GEMM descriptor, its handle and one workspace for
  /// all of them (the calls run one after another on the stream). A GEMM
  /// the library cannot run, or every GEMM without the library, is
  /// declined: the model's code runs its own kernels for it.
  void prepareGemms(const tfm_abi_model_t &m) {
    gemms.clear();
    resetDeclined(m.num_kernels);
    if (m.num_kernels == 0)
      return;
    std::string error;
    blas = cuda::blas(error);
    if (blas) {
      makeCurrent();
      if (cublasStatus_t rc = blas->create(&blasHandle);
          rc != CUBLAS_STATUS_SUCCESS) {
        blasHandle = nullptr;
        error = "cuBLASLt does not start: " + blas->describe(rc);
        blas = nullptr;
      }
    }
    if (blas) {
      workspace = allocate(kGemmWorkspaceBytes);
      if (!workspace.get())
        throw DeviceError(TFM_STATUS_RESOURCE_EXHAUSTED,
                          fmt::format("{}: no room for cuBLASLt's {} MiB "
                                      "workspace",
                                      name(), kGemmWorkspaceBytes >> 20));
    }
    gemms.resize(m.num_kernels);
    for (int32_t i = 0; i < m.num_kernels; ++i) {
      // The session runs a data-parallel step's exchanges itself.
      if (m.kernels[i].kind == TFM_KERNEL_ALL_REDUCE)
        continue;
      if (!blas) {
        if (!declineIfFallback(m, i, error))
          throw DeviceError(TFM_STATUS_UNAVAILABLE,
                            fmt::format("{}: kernel {} runs in cuBLASLt: {}",
                                        name(), i, error));
        continue;
      }
      try {
        gemms[i] = std::make_unique<LibraryGemm>(
            *blas, blasHandle, m.kernels[i], kernelFlags(&m, i), allowTF32);
      } catch (const DeviceError &e) {
        std::string why = fmt::format("kernel {}: {}", i, e.what());
        if (!declineIfFallback(m, i, why))
          throw DeviceError(e.code, why);
      }
    }
  }

  std::string loadWarnings() const override { return jitWarnings; }

  std::string kernelLibrary() const override {
    if (!blas)
      return "";
    return "cuBLASLt " + blas->version + (allowTF32 ? ", TF32 allowed" : "");
  }

  /// `slot`, created at its first use.
  CUevent event(CUevent &slot) {
    if (!slot)
      check(drv.eventCreate(&slot, CU_EVENT_DISABLE_TIMING),
            "cannot create an event");
    return slot;
  }

  static CUdeviceptr address(const void *p) {
    return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
  }
  void makeCurrent() {
    if (context)
      check(drv.ctxSetCurrent(context), "cannot use the GPU's context");
  }
  void check(CUresult rc, const std::string &what) {
    if (rc == CUDA_SUCCESS)
      return;
    tfm_status_code_t code = TFM_STATUS_INTERNAL;
    if (rc == CUDA_ERROR_OUT_OF_MEMORY)
      code = TFM_STATUS_RESOURCE_EXHAUSTED;
    else if (rc == CUDA_ERROR_NO_DEVICE || rc == CUDA_ERROR_INVALID_DEVICE)
      code = TFM_STATUS_UNAVAILABLE;
    throw DeviceError(code, fmt::format("{}: {}: {}", name(), what,
                                        drv.describe(rc)));
  }

  const Driver &drv;
  int ordinal;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  /// sideStream's, made when first asked for.
  CUstream side = nullptr;
  CUmodule module = nullptr;
  /// Order the session's stream with a caller's (waitForStream,
  /// signalStream).
  CUevent callerEvent = nullptr, sessionEvent = nullptr;
  std::string model;
  int capability = 0;
  int sharedOptIn = 48 * 1024;
  std::vector<CUfunction> functions;
  std::vector<std::string> kernelNames;
  std::string jitWarnings;
  const Blas *blas = nullptr;
  bool allowTF32 = false;
  cublasLtHandle_t blasHandle = nullptr;
  DeviceBuffer workspace;
  std::vector<std::unique_ptr<LibraryGemm>> gemms;
  /// Each tensor map's page-locked bytes and its copy on the device.
  std::vector<std::pair<StagingBuffer, DeviceBuffer>> tensorMapMemory;
};

} // namespace

std::unique_ptr<Device> tfm::runtime::cuda::makeCUDADevice(int ordinal) {
  std::string error;
  const Driver *d = driver(error);
  if (!d)
    throw DeviceError(TFM_STATUS_UNAVAILABLE,
                      fmt::format("cuda:{}: {}", ordinal, error));
  auto device = std::make_unique<CUDADevice>(*d, ordinal);
  device->open();
  return device;
}
