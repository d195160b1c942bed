//===- Optimizer.cpp - ADAM and SGD ----------------------------------------===//

#include "Engine.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

using namespace tfm::runtime::cpu;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

/// The optimizers are streaming updates over every parameter: memory-bound,
/// so they run on all threads (a single thread reaches about half the
/// bandwidth) rather than in the model's single-threaded code.
class AdamKernel : public Kernel {
public:
  explicit AdamKernel(const tfm_abi_kernel_desc_t &d) : n(d.params[0]) {}
  int32_t run(void *const *args) override {
    float *p = static_cast<float *>(args[0]);
    const float *g = static_cast<const float *>(args[1]);
    float *m = static_cast<float *>(args[2]);
    float *v = static_cast<float *>(args[3]);
    const float *c = static_cast<const float *>(args[4]);
    const float step = c[0], inv = c[1], b1 = c[2], b1c = c[3], b2 = c[4],
                b2c = c[5], eps = c[6], wd = c[7];
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * p[i];
      float mi = b1 * m[i] + b1c * gi;
      float vi = b2 * v[i] + b2c * (gi * gi);
      m[i] = mi;
      v[i] = vi;
      p[i] -= step * (mi / (std::sqrt(vi) * inv + eps));
    }
    return 0;
  }

private:
  int64_t n;
};

class SGDKernel : public Kernel {
public:
  explicit SGDKernel(const tfm_abi_kernel_desc_t &d) : n(d.params[0]) {}
  int32_t run(void *const *args) override {
    float *p = static_cast<float *>(args[0]);
    const float *g = static_cast<const float *>(args[1]);
    const float *c = static_cast<const float *>(args[2]);
    const float lr = c[0], wd = c[1];
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
      p[i] -= lr * (g[i] + wd * p[i]);
    return 0;
  }

private:
  int64_t n;
};

} // namespace

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeAdamKernel(const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<AdamKernel>(d);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeSGDKernel(const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<SGDKernel>(d);
}
