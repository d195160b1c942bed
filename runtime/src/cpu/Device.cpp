//===- Device.cpp - The CPU device: host memory, oneDNN kernels -----------===//

#include "../Internal.h"
#include "Kernels.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

using namespace tfm::runtime;

namespace {

class CPUDevice : public Device {
public:
  std::string name() const override { return "cpu"; }

  // An empty copy may come with null pointers (a model without state),
  // which memcpy may not be given even for zero bytes.
  void copyToDevice(void *device, const void *host, size_t bytes) override {
    if (bytes)
      std::memcpy(device, host, bytes);
  }
  void copyToHost(void *host, const void *device, size_t bytes) override {
    if (bytes)
      std::memcpy(host, device, bytes);
  }

  int32_t target() const override { return TFM_TARGET_CPU; }
  bool hostAddressable() const override { return true; }

  void prepare(const tfm_abi_model_t &model, const KernelOptions &) override {
    if (model.num_kernels > 0 && !engine)
      engine = cpu::makeEngine();
    this->model = &model;
    kernels.resize(model.num_kernels);
    resetDeclined(model.num_kernels);
    // In the CPU emulation of a GPU model, oneDNN stands in for cuBLASLt,
    // and turning the library off runs the GEMMs as the GPU would without
    // it.
    if (libraryKernelsOff())
      for (int32_t i = 0; i < model.num_kernels; ++i)
        declineIfFallback(model, i,
                          "the library is turned off (TFM_CUBLASLT=off)");
    // A model for a range of sizes holds every bucket's kernels, of which a
    // session may use few (56 buckets of one encoder layer: 448 kernels,
    // 0.3 s and 113 MB): they are created at their first run instead.
    if (numDynamicEntries(&model) > 0)
      return;
    for (int32_t i = 0; i < model.num_kernels; ++i) {
      std::string why;
      if (!declined(i) && !create(i, why) && !declineIfFallback(model, i, why))
        throw DeviceError(TFM_STATUS_INCOMPATIBLE, why);
    }
  }

  std::string kernelLibrary() const override {
    std::string library = "oneDNN " + cpu::libraryVersion();
    bool bf16 = false, packed = false;
    for (int32_t i = 0; model && i < model->num_kernels; ++i) {
      bf16 |= model->kernels[i].kind == TFM_KERNEL_LINEAR &&
              model->kernels[i].dtype == TFM_DTYPE_BF16 &&
              !(kernelFlags(model, i) & TFM_KERNEL_FLAG_NARROW_OPERANDS);
      packed |= cpu::linearOnPackedAvx2(model->kernels[i]);
    }
    if (packed)
      library += ", f32 linear layers on tfm's AVX2 tiles over weights "
                 "packed once";
    if (!bf16)
      return library;
    return library + (cpu::multipliesBf16()
                          ? ", bf16 GEMMs on the CPU's bf16 instructions"
                          : ", bf16 GEMMs in f32 on bf16-rounded operands "
                            "(this CPU has no bf16 instructions)");
  }

  int32_t runKernel(int32_t index, void *const *args,
                    std::string &error) override {
    try {
      // A kernel created at its first run may be declined then.
      if (!kernels[index] && !create(index, error))
        return declineIfFallback(*model, index, error)
                   ? TFM_ABI_STATUS_KERNEL_DECLINED
                   : -1;
      return kernels[index]->run(args);
    } catch (const std::exception &e) {
      error = e.what();
    } catch (...) {
      error = "unknown error";
    }
    return -1;
  }

  int32_t setThreads(int32_t threads) override {
    return cpu::setThreads(threads);
  }
  void parallelFor(tfm_abi_task_fn_t task, void *const *args,
                   int64_t n) override {
    cpu::parallelFor(task, args, n);
  }

protected:
  void *allocateRaw(size_t bytes) override {
    constexpr size_t align = TFM_BUFFER_ALIGNMENT;
    if (bytes > SIZE_MAX - align)
      return nullptr;
    size_t rounded = (bytes + align - 1) / align * align;
    void *ptr = std::aligned_alloc(align, rounded ? rounded : align);
    if (ptr && poisonMemory())
      std::memset(ptr, 0xff, rounded);
    return ptr;
  }
  void deallocateRaw(void *ptr) override { std::free(ptr); }

private:
  bool create(int32_t i, std::string &why) {
    kernels[i] =
        cpu::makeKernel(engine, model->kernels[i], kernelFlags(model, i), why);
    if (!kernels[i])
      why = "kernel " + std::to_string(i) + " cannot be created: " + why;
    return kernels[i] != nullptr;
  }

  std::shared_ptr<cpu::Engine> engine;
  const tfm_abi_model_t *model = nullptr;
  std::vector<std::unique_ptr<cpu::Kernel>> kernels;
};

} // namespace

std::unique_ptr<Device> tfm::runtime::cpu::makeCPUDevice() {
  return std::make_unique<CPUDevice>();
}
