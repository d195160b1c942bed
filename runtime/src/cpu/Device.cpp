//===- Device.cpp - The CPU device: host memory, oneDNN kernels -----------===//

#include "../Device.h"
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

  void copyToDevice(void *device, const void *host, size_t bytes) override {
    std::memcpy(device, host, bytes);
  }
  void copyToHost(void *host, const void *device, size_t bytes) override {
    std::memcpy(host, device, bytes);
  }

  bool prepareKernels(const tfm_abi_kernel_desc_t *descs, int32_t count,
                      std::string &error) override {
    if (count > 0 && !engine)
      engine = cpu::makeEngine();
    for (int32_t i = 0; i < count; ++i) {
      std::string why;
      auto k = cpu::makeKernel(engine, descs[i], why);
      if (!k) {
        error = "kernel " + std::to_string(i) + " cannot be created: " + why;
        return false;
      }
      kernels.push_back(std::move(k));
    }
    return true;
  }

  int32_t runKernel(int32_t index, void *const *args,
                    std::string &error) override {
    try {
      return kernels[index]->run(args);
    } catch (const std::exception &e) {
      error = e.what();
    } catch (...) {
      error = "unknown error";
    }
    return -1;
  }

  void setThreads(int32_t threads) override { cpu::setThreads(threads); }

protected:
  void *allocateRaw(size_t bytes) override {
    constexpr size_t align = TFM_BUFFER_ALIGNMENT;
    if (bytes > SIZE_MAX - align)
      return nullptr;
    size_t rounded = (bytes + align - 1) / align * align;
    return std::aligned_alloc(align, rounded ? rounded : align);
  }
  void deallocateRaw(void *ptr) override { std::free(ptr); }

private:
  std::shared_ptr<cpu::Engine> engine;
  std::vector<std::unique_ptr<cpu::Kernel>> kernels;
};

} // namespace

std::unique_ptr<Device> tfm::runtime::cpu::makeCPUDevice() {
  return std::make_unique<CPUDevice>();
}
