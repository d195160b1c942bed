//===- Normalization.cpp - Softmax and layer norm kernels ------------------===//
//
// The masked softmax applies scale and mask in one pass, then oneDNN's
// softmax in place; layer norm (with the residual add) and its backward
// pass are oneDNN's primitives.
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
      : dev(std::move(dev)), g(d.params[0]), q(d.params[1]), c(d.params[2]),
        causal(d.params[3]), hasMask(d.params[4]),
        div(d.params[5] ? d.params[5] : 1), gstride(d.params[6]),
        qstride(d.params[7]), scale(static_cast<float>(d.fparams[0])) {
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

class LayerNormKernel : public Kernel {
public:
  LayerNormKernel(std::shared_ptr<Engine> dev, const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)), m(d.params[0]), n(d.params[1]),
        hasResidual(d.params[2]), hasBias(d.params[3]),
        writesSum(d.params[4]), zeros(hasBias ? 0 : n, 0.f) {
    md = rowMajor({m, n});
    auto flags = dnnl::normalization_flags::use_scale |
                 dnnl::normalization_flags::use_shift;
    prim = dnnl::layer_normalization_forward(
        dnnl::layer_normalization_forward::primitive_desc(
            dnnl::layer_normalization_forward::desc(
                dnnl::prop_kind::forward_inference, md,
                static_cast<float>(d.fparams[0]), flags),
            this->dev->engine));
    if (hasResidual && !writesSum)
      sumBuffer.resize(m * n);
  }
  int32_t run(void *const *args) override {
    const float *x = static_cast<const float *>(args[0]);
    const void *src = x;
    if (hasResidual) {
      const float *r = static_cast<const float *>(args[1]);
      float *s = writesSum ? static_cast<float *>(args[5]) : sumBuffer.data();
      int64_t total = m * n;
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < total; ++i)
        s[i] = x[i] + r[i];
      src = s;
    }
    auto &eng = dev->engine;
    memory::desc vec = rowMajor({n});
    prim.execute(
        dev->stream,
        {{DNNL_ARG_SRC, memory(md, eng, const_cast<void *>(src))},
         {DNNL_ARG_SCALE, memory(vec, eng, args[2])},
         {DNNL_ARG_SHIFT,
          memory(vec, eng, hasBias ? args[3] : static_cast<void *>(zeros.data()))},
         {DNNL_ARG_DST, memory(md, eng, args[4])}});
    dev->stream.wait();
    return 0;
  }

private:
  std::shared_ptr<Engine> dev;
  int64_t m, n;
  bool hasResidual, hasBias, writesSum;
  std::vector<float> zeros, sumBuffer;
  memory::desc md;
  dnnl::layer_normalization_forward prim;
};

/// Layer norm's backward pass by oneDNN's primitive. The primitive takes
/// the forward pass's statistics, which the model does not keep: they are
/// recomputed here, one parallel pass over the rows.
class LayerNormBackwardKernel : public Kernel {
public:
  LayerNormBackwardKernel(std::shared_ptr<Engine> dev,
                          const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)), m(d.params[0]), n(d.params[1]), mean(m),
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

} // namespace

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeMaskedSoftmaxKernel(std::shared_ptr<Engine> engine,
                                           const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<MaskedSoftmaxKernel>(std::move(engine), d);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeLayerNormKernel(std::shared_ptr<Engine> engine,
                                       const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<LayerNormKernel>(std::move(engine), d);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeLayerNormBackwardKernel(std::shared_ptr<Engine> engine,
                                               const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<LayerNormBackwardKernel>(std::move(engine), d);
}
