//===- Normalization.cpp - Softmax and layer norm kernels
//------------------===//
//
// The masked softmax applies scale and mask in one pass, then oneDNN's
// softmax in place. Layer norm and RMSNorm, with the residual add, are one
// pass per row here (in the widest vectors vectorIsa() allows). Layer
// norm's backward pass is oneDNN's primitive; RMSNorm's, which oneDNN 2.6
// lacks, is written here.
//
//===----------------------------------------------------------------------===//

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

class MaskedSoftmaxKernel : public Kernel {
public:
  MaskedSoftmaxKernel(std::shared_ptr<Engine> dev,
                      const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)), g(d.params[TFM_MASKED_SOFTMAX_G]),
        q(d.params[TFM_MASKED_SOFTMAX_Q]), c(d.params[TFM_MASKED_SOFTMAX_C]),
        causal(d.params[TFM_MASKED_SOFTMAX_CAUSAL]),
        hasMask(d.params[TFM_MASKED_SOFTMAX_HAS_MASK]),
        div(d.params[TFM_MASKED_SOFTMAX_DIV] ? d.params[TFM_MASKED_SOFTMAX_DIV]
                                             : 1),
        gstride(d.params[TFM_MASKED_SOFTMAX_GSTRIDE]),
        qstride(d.params[TFM_MASKED_SOFTMAX_QSTRIDE]),
        scale(static_cast<float>(d.fparams[0])) {
    md = rowMajor({g * q, c});
    prim = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, md, 1),
        this->dev->engine));
  }
  int32_t run(void *const *args) override {
    const float *x = static_cast<const float *>(args[0]);
    const float *mask = static_cast<const float *>(args[1]);
    float *y = static_cast<float *>(args[2]);
    const float ninf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t gi = 0; gi < g; ++gi)
      for (int64_t qi = 0; qi < q; ++qi) {
        const float *xr = x + (gi * q + qi) * c;
        float *yr = y + (gi * q + qi) * c;
        const float *mr =
            hasMask ? mask + (gi / div) * gstride + qi * qstride : nullptr;
        int64_t keep = causal ? std::min(c, qi + 1) : c;
        for (int64_t j = 0; j < keep; ++j)
          yr[j] = scale * xr[j] + (mr ? mr[j] : 0.f);
        for (int64_t j = keep; j < c; ++j)
          yr[j] = ninf;
      }
    memory ym(md, dev->engine, y);
    prim.execute(dev->stream, {{DNNL_ARG_SRC, ym}, {DNNL_ARG_DST, ym}});
    dev->stream.wait();
    return 0;
  }

private:
  std::shared_ptr<Engine> dev;
  int64_t g, q, c;
  bool causal, hasMask;
  int64_t div, gstride, qstride;
  float scale;
  memory::desc md;
  dnnl::softmax_forward prim;
};

/// Rows of (x + r) normalized, scaled by gamma and shifted by beta, in one
/// pass per row while the row is in L1: the sum x + r goes to `sum` (or to
/// y, which it is about to become). `r`, `beta` and `sum` may be null.
/// RMSNorm (`rms`) holds the mean at zero.
[[gnu::always_inline]] inline void
layerNormRows(const float *x, const float *r, const float *gamma,
              const float *beta, float *y, float *sum, int64_t first,
              int64_t last, int64_t n, float eps, bool rms) {
  for (int64_t row = first; row < last; ++row) {
    const float *in = x + row * n;
    float *out = y + row * n;
    if (r) {
      float *s = sum ? sum + row * n : out;
      const float *rr = r + row * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        s[j] = in[j] + rr[j];
      in = s;
    }
    float total = 0.f;
    if (!rms) {
#pragma omp simd reduction(+ : total)
      for (int64_t j = 0; j < n; ++j)
        total += in[j];
    }
    float mean = total / static_cast<float>(n), squares = 0.f;
#pragma omp simd reduction(+ : squares)
    for (int64_t j = 0; j < n; ++j)
      squares += (in[j] - mean) * (in[j] - mean);
    float rstd = 1.f / std::sqrt(squares / static_cast<float>(n) + eps);
    if (beta) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        out[j] = (in[j] - mean) * rstd * gamma[j] + beta[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        out[j] = (in[j] - mean) * rstd * gamma[j];
    }
  }
}

using LayerNormRowsFn = void (*)(const float *, const float *, const float *,
                                 const float *, float *, float *, int64_t,
                                 int64_t, int64_t, float, bool);

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void
layerNormRowsAVX512(const float *x, const float *r, const float *gamma,
                    const float *beta, float *y, float *sum, int64_t first,
                    int64_t last, int64_t n, float eps, bool rms) {
  layerNormRows(x, r, gamma, beta, y, sum, first, last, n, eps, rms);
}

__attribute__((target("avx2,fma"))) void
layerNormRowsAVX2(const float *x, const float *r, const float *gamma,
                  const float *beta, float *y, float *sum, int64_t first,
                  int64_t last, int64_t n, float eps, bool rms) {
  layerNormRows(x, r, gamma, beta, y, sum, first, last, n, eps, rms);
}
#endif

void layerNormRowsScalar(const float *x, const float *r, const float *gamma,
                         const float *beta, float *y, float *sum, int64_t first,
                         int64_t last, int64_t n, float eps, bool rms) {
  layerNormRows(x, r, gamma, beta, y, sum, first, last, n, eps, rms);
}

LayerNormRowsFn pickLayerNormRows() {
  switch (vectorIsa()) {
#if defined(__x86_64__)
  case VectorIsa::AVX512:
    return layerNormRowsAVX512;
  case VectorIsa::AVX2:
    return layerNormRowsAVX2;
#endif
  default:
    return layerNormRowsScalar;
  }
}

/// Below this many elements a layer norm runs on the calling thread: W3's
/// 32×256 takes about 2 µs there, while waking the pool for it and
/// oneDNN's primitive cost 16 µs per call.
constexpr int64_t kSerialLayerNormElements = int64_t(1) << 15;

/// LAYER_NORM and RMS_NORM, with the residual add fused into the same pass
/// over each row (oneDNN's primitive would need the sum written and read
/// back first).
class LayerNormKernel : public Kernel {
public:
  explicit LayerNormKernel(const tfm_abi_kernel_desc_t &d)
      : rms(d.kind == TFM_KERNEL_RMS_NORM), m(d.params[TFM_LAYER_NORM_M]),
        n(d.params[TFM_LAYER_NORM_N]),
        hasResidual(d.params[TFM_LAYER_NORM_HAS_RESIDUAL]),
        hasBias(d.params[TFM_LAYER_NORM_HAS_BIAS]),
        writesSum(d.params[TFM_LAYER_NORM_WRITES_SUM]),
        eps(static_cast<float>(d.fparams[0])), rows(pickLayerNormRows()) {}
  int32_t run(void *const *args) override {
    const float *x = static_cast<const float *>(args[0]);
    const float *r = hasResidual ? static_cast<const float *>(args[1]) : nullptr;
    const float *gamma = static_cast<const float *>(args[2]);
    const float *beta = hasBias ? static_cast<const float *>(args[3]) : nullptr;
    float *y = static_cast<float *>(args[4]);
    float *sum = hasResidual && writesSum ? static_cast<float *>(args[5]) : nullptr;
    if (m * n < kSerialLayerNormElements) {
      rows(x, r, gamma, beta, y, sum, 0, m, n, eps, rms);
      return 0;
    }
#pragma omp parallel
    {
      int64_t parts = omp_get_num_threads(), part = omp_get_thread_num();
      rows(x, r, gamma, beta, y, sum, m * part / parts, m * (part + 1) / parts,
           n, eps, rms);
    }
    return 0;
  }

private:
  bool rms;
  int64_t m, n;
  bool hasResidual, hasBias, writesSum;
  float eps;
  LayerNormRowsFn rows;
};

/// Layer norm's backward pass by oneDNN's primitive. The primitive takes
/// the forward pass's statistics, which the model does not keep: they are
/// recomputed here, one parallel pass over the rows.
class LayerNormBackwardKernel : public Kernel {
public:
  LayerNormBackwardKernel(std::shared_ptr<Engine> dev,
                          const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)), m(d.params[TFM_LAYER_NORM_BACKWARD_M]),
        n(d.params[TFM_LAYER_NORM_BACKWARD_N]), mean(m),
        variance(m), zeros(n) {
    auto &eng = this->dev->engine;
    md = rowMajor({m, n});
    auto eps = static_cast<float>(d.fparams[0]);
    auto flags = dnnl::normalization_flags::use_scale |
                 dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::primitive_desc hint(
        dnnl::layer_normalization_forward::desc(
            dnnl::prop_kind::forward_training, md, eps, flags),
        eng);
    prim = dnnl::layer_normalization_backward(
        dnnl::layer_normalization_backward::primitive_desc(
            dnnl::layer_normalization_backward::desc(dnnl::prop_kind::backward,
                                                     md, md, eps, flags),
            eng, hint));
  }
  int32_t run(void *const *args) override {
    const float *x = static_cast<const float *>(args[0]);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      const float *row = x + r * n;
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j)
        sum += row[j];
      float mu = sum / float(n), sq = 0;
#pragma omp simd reduction(+ : sq)
      for (int64_t j = 0; j < n; ++j)
        sq += (row[j] - mu) * (row[j] - mu);
      mean[r] = mu;
      variance[r] = sq / float(n);
    }
    auto &eng = dev->engine;
    memory::desc vec = rowMajor({n}), stat = rowMajor({m});
    prim.execute(dev->stream,
                 {{DNNL_ARG_SRC, memory(md, eng, args[0])},
                  {DNNL_ARG_MEAN, memory(stat, eng, mean.data())},
                  {DNNL_ARG_VARIANCE, memory(stat, eng, variance.data())},
                  {DNNL_ARG_SCALE, memory(vec, eng, args[1])},
                  // oneDNN 2.6 will not run without a shift, which the
                  // backward pass does not read.
                  {DNNL_ARG_SHIFT, memory(vec, eng, zeros.data())},
                  {DNNL_ARG_DIFF_DST, memory(md, eng, args[2])},
                  {DNNL_ARG_DIFF_SRC, memory(md, eng, args[3])},
                  {DNNL_ARG_DIFF_SCALE, memory(vec, eng, args[4])},
                  {DNNL_ARG_DIFF_SHIFT, memory(vec, eng, args[5])}});
    dev->stream.wait();
    return 0;
  }

private:
  std::shared_ptr<Engine> dev;
  int64_t m, n;
  std::vector<float> mean, variance, zeros;
  memory::desc md;
  dnnl::layer_normalization_backward prim;
};

/// RMS_NORM_BACKWARD. With x̂ = x·rstd and g = dy·gamma per row,
/// dx = rstd·(g − x̂·mean(g·x̂)); dgamma and dbias are column sums, taken
/// over blocks of columns so that each thread reads whole cache lines.
class RMSNormBackwardKernel : public Kernel {
public:
  explicit RMSNormBackwardKernel(const tfm_abi_kernel_desc_t &d)
      : m(d.params[TFM_LAYER_NORM_BACKWARD_M]),
        n(d.params[TFM_LAYER_NORM_BACKWARD_N]),
        eps(static_cast<float>(d.fparams[0])), rstd(m) {}
  int32_t run(void *const *args) override {
    const float *x = static_cast<const float *>(args[0]);
    const float *gamma = static_cast<const float *>(args[1]);
    const float *dy = static_cast<const float *>(args[2]);
    float *dx = static_cast<float *>(args[3]);
    float *dgamma = static_cast<float *>(args[4]);
    float *dbias = static_cast<float *>(args[5]);
    const float inv = 1.f / static_cast<float>(n);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      const float *xr = x + r * n, *dr = dy + r * n;
      float squares = 0.f;
#pragma omp simd reduction(+ : squares)
      for (int64_t j = 0; j < n; ++j)
        squares += xr[j] * xr[j];
      float s = 1.f / std::sqrt(squares * inv + eps), dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < n; ++j)
        dot += dr[j] * gamma[j] * xr[j];
      // mean(g·x̂) = rstd·mean(g·x).
      float c = s * s * dot * inv;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        dx[r * n + j] = s * (dr[j] * gamma[j] - xr[j] * c);
      rstd[r] = s;
    }
    constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      int64_t j1 = std::min(n, j0 + kBlock);
      for (int64_t j = j0; j < j1; ++j)
        dgamma[j] = dbias[j] = 0.f;
      for (int64_t r = 0; r < m; ++r) {
        const float *xr = x + r * n, *dr = dy + r * n;
        float s = rstd[r];
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j) {
          dgamma[j] += dr[j] * xr[j] * s;
          dbias[j] += dr[j];
        }
      }
    }
    return 0;
  }

private:
  int64_t m, n;
  float eps;
  std::vector<float> rstd;
};

} // namespace

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeRMSNormBackwardKernel(const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<RMSNormBackwardKernel>(d);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeMaskedSoftmaxKernel(std::shared_ptr<Engine> engine,
                                           const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<MaskedSoftmaxKernel>(std::move(engine), d);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeLayerNormKernel(std::shared_ptr<Engine>,
                                       const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<LayerNormKernel>(d);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeLayerNormBackwardKernel(std::shared_ptr<Engine> engine,
                                               const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<LayerNormBackwardKernel>(std::move(engine), d);
}
