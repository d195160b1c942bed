//===- Optimizer.cpp - ADAM and SGD ----------------------------------------===//

#include "Engine.h"

#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

/// Adam's constants for one step, as the compiled code passes them.
struct AdamStep {
  float step, inv, b1, b1c, b2, b2c, eps, wd;
};

/// Updates [i0, i1) of p, m and v from the gradient g.
void adamScalar(float *p, const float *g, float *m, float *v, int64_t i0,
                int64_t i1, const AdamStep &k) {
  for (int64_t i = i0; i < i1; ++i) {
    float gi = g[i] + k.wd * p[i];
    float mi = k.b1 * m[i] + k.b1c * gi;
    float vi = k.b2 * v[i] + k.b2c * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] -= k.step * (mi / (std::sqrt(vi) * k.inv + k.eps));
  }
}

#if defined(__x86_64__)
/// adamScalar in sixteen lanes. The portable loop compiled to scalar square
/// roots and divisions, which made Adam compute-bound: W5's 44 M parameters
/// took 43 ms a step where their seven streams need about 28.
__attribute__((target("avx512f"))) void
adamAVX512(float *p, const float *g, float *m, float *v, int64_t i0,
           int64_t i1, const AdamStep &k) {
  const __m512 wd = _mm512_set1_ps(k.wd), b1 = _mm512_set1_ps(k.b1),
               b1c = _mm512_set1_ps(k.b1c), b2 = _mm512_set1_ps(k.b2),
               b2c = _mm512_set1_ps(k.b2c), inv = _mm512_set1_ps(k.inv),
               eps = _mm512_set1_ps(k.eps), step = _mm512_set1_ps(k.step);
  for (int64_t i = i0; i < i1; i += 16) {
    __mmask16 lanes = i1 - i >= 16 ? 0xffff : (1u << (i1 - i)) - 1;
    __m512 pi = _mm512_maskz_loadu_ps(lanes, p + i);
    __m512 gi = _mm512_fmadd_ps(wd, pi, _mm512_maskz_loadu_ps(lanes, g + i));
    __m512 mi = _mm512_fmadd_ps(b1, _mm512_maskz_loadu_ps(lanes, m + i),
                                _mm512_mul_ps(b1c, gi));
    __m512 vi = _mm512_fmadd_ps(b2, _mm512_maskz_loadu_ps(lanes, v + i),
                                _mm512_mul_ps(b2c, _mm512_mul_ps(gi, gi)));
    // The masked form: GCC 12's unmasked one warns of its undefined source.
    __m512 den = _mm512_fmadd_ps(_mm512_maskz_sqrt_ps(lanes, vi), inv, eps);
    pi = _mm512_fnmadd_ps(step, _mm512_div_ps(mi, den), pi);
    _mm512_mask_storeu_ps(m + i, lanes, mi);
    _mm512_mask_storeu_ps(v + i, lanes, vi);
    _mm512_mask_storeu_ps(p + i, lanes, pi);
  }
}

/// adamScalar in eight lanes.
__attribute__((target("avx2,fma"))) void
adamAVX2(float *p, const float *g, float *m, float *v, int64_t i0,
         int64_t i1, const AdamStep &k) {
  const __m256 wd = _mm256_set1_ps(k.wd), b1 = _mm256_set1_ps(k.b1),
               b1c = _mm256_set1_ps(k.b1c), b2 = _mm256_set1_ps(k.b2),
               b2c = _mm256_set1_ps(k.b2c), inv = _mm256_set1_ps(k.inv),
               eps = _mm256_set1_ps(k.eps), step = _mm256_set1_ps(k.step);
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    __m256 pi = _mm256_loadu_ps(p + i);
    __m256 gi = _mm256_fmadd_ps(wd, pi, _mm256_loadu_ps(g + i));
    __m256 mi = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m + i),
                                _mm256_mul_ps(b1c, gi));
    __m256 vi = _mm256_fmadd_ps(b2, _mm256_loadu_ps(v + i),
                                _mm256_mul_ps(b2c, _mm256_mul_ps(gi, gi)));
    __m256 den = _mm256_fmadd_ps(_mm256_sqrt_ps(vi), inv, eps);
    pi = _mm256_fnmadd_ps(step, _mm256_div_ps(mi, den), pi);
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    _mm256_storeu_ps(p + i, pi);
  }
  adamScalar(p, g, m, v, i, i1, k);
}
#endif

using AdamFn = void (*)(float *, const float *, float *, float *, int64_t,
                        int64_t, const AdamStep &);

/// The widest update vectorIsa() allows.
AdamFn pickAdamFn() {
  switch (vectorIsa()) {
#if defined(__x86_64__)
  case VectorIsa::AVX512:
    return adamAVX512;
  case VectorIsa::AVX2:
    return adamAVX2;
#endif
  default:
    return adamScalar;
  }
}

/// The optimizers are streaming updates over every parameter: memory-bound,
/// so they run on all threads (a single thread reaches about half the
/// bandwidth) rather than in the model's single-threaded code.
class AdamKernel : public Kernel {
public:
  explicit AdamKernel(const tfm_abi_kernel_desc_t &d)
      : n(d.params[TFM_OPTIMIZER_N]) {}
  int32_t run(void *const *args) override {
    adamUpdate(static_cast<float *>(args[0]),
               static_cast<const float *>(args[1]),
               static_cast<float *>(args[2]), static_cast<float *>(args[3]), n,
               static_cast<const float *>(args[4]));
    return 0;
  }

private:
  int64_t n;
};

class SGDKernel : public Kernel {
public:
  explicit SGDKernel(const tfm_abi_kernel_desc_t &d)
      : n(d.params[TFM_OPTIMIZER_N]) {}
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

void tfm::runtime::cpu::adamUpdate(float *p, const float *g, float *m, float *v,
                                   int64_t n, const float *c) {
  static const AdamFn update = pickAdamFn();
  const AdamStep k{c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
  // Whole cache lines per thread; a small tensor stays on one.
  constexpr int64_t kGrain = 4096;
  int64_t parts = std::max<int64_t>(
      1, std::min<int64_t>(omp_get_max_threads(), (n + kGrain - 1) / kGrain));
  int64_t chunk = ((n + parts - 1) / parts + 15) / 16 * 16;
#pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
  for (int64_t t = 0; t < parts; ++t)
    update(p, g, m, v, std::min(n, t * chunk), std::min(n, (t + 1) * chunk), k);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeAdamKernel(const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<AdamKernel>(d);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeSGDKernel(const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<SGDKernel>(d);
}
