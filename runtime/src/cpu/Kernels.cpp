//===- Kernels.cpp - oneDNN-backed kernels of the runtime -----------------===//
//
// GEMMs (linear with fused bias, activation and residual post-ops, batched
// matmul) and layer normalization are oneDNN primitives. The masked softmax
// applies scale and mask in one pass, then uses oneDNN's softmax in place.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace tfm::runtime::cpu;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class tfm::runtime::cpu::Device {
public:
  Device() : engine(dnnl::engine::kind::cpu, 0), stream(engine) {}
  dnnl::engine engine;
  dnnl::stream stream;
};

std::shared_ptr<Device> tfm::runtime::cpu::makeDevice() {
  return std::make_shared<Device>();
}

void tfm::runtime::cpu::setThreads(int32_t threads) {
  if (threads > 0 && omp_get_max_threads() != threads)
    omp_set_num_threads(threads);
}

namespace {

memory::desc rowMajor(memory::dims dims) {
  return memory::desc(dims, dt::f32,
                      dims.size() == 1   ? tag::a
                      : dims.size() == 2 ? tag::ab
                                         : tag::abc);
}

class LinearKernel : public Kernel {
public:
  LinearKernel(std::shared_ptr<Device> dev, const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)), m(d.params[0]), k(d.params[1]), n(d.params[2]),
        hasBias(d.params[3]), hasResidual(d.params[5]),
        constWeights(d.params[6]), bf16(d.dtype == TFM_DTYPE_BF16) {
    auto &eng = this->dev->engine;
    userSrc = memory(rowMajor({m, k}), eng, DNNL_MEMORY_NONE);
    dt compute = bf16 ? dt::bf16 : dt::f32;
    memory::desc srcMd({m, k}, compute, tag::ab);
    if (bf16) {
      src = memory(srcMd, eng);
      srcReorder = dnnl::reorder(userSrc, src);
    } else {
      src = userSrc;
    }
    // oneDNN runs a GEMM with few rows on one thread however many it has;
    // such a GEMM is split by columns, one part per thread, each part
    // running single-threaded inside the parallel region.
    int threads = omp_get_max_threads();
    int parts = (m <= 64 && threads > 1 && n >= 64 * threads) ? threads : 1;
    int64_t step = (n + parts - 1) / parts;
    step = (step + 15) / 16 * 16;
    for (int64_t n0 = 0; n0 < n; n0 += step)
      this->parts.push_back(makePart(d, n0, std::min(step, n - n0), srcMd));
  }

  int32_t run(void *const *args) override {
    userSrc.set_data_handle(args[0]);
    if (bf16)
      srcReorder.execute(dev->stream, userSrc, src);
    auto *w = static_cast<float *>(args[1]);
    auto *b = static_cast<float *>(args[2]);
    auto *r = static_cast<float *>(args[3]);
    auto *y = static_cast<float *>(args[4]);
    for (Part &p : parts) {
      if (p.weights.get() == p.userWeights.get()) {
        p.userWeights.set_data_handle(w + p.n0 * k);
      } else if (w != packedFrom || !constWeights) {
        // Packed at the first run, and again only if the weights move.
        p.userWeights.set_data_handle(w + p.n0 * k);
        p.weightsReorder.execute(dev->stream, p.userWeights, p.weights);
      }
      p.dst.set_data_handle(y + p.n0);
      if (hasBias)
        p.bias.set_data_handle(b + p.n0);
      if (hasResidual)
        p.residual.set_data_handle(r + p.n0);
    }
    packedFrom = w;
    if (parts.size() == 1) {
      parts[0].prim.execute(dev->stream, parts[0].args);
      dev->stream.wait();
      return 0;
    }
#pragma omp parallel for num_threads(parts.size()) schedule(static, 1)
    for (size_t i = 0; i < parts.size(); ++i) {
      parts[i].prim.execute(parts[i].stream, parts[i].args);
      parts[i].stream.wait();
    }
    return 0;
  }

private:
  /// The columns [n0, n0 + nn) of the output.
  struct Part {
    int64_t n0;
    dnnl::matmul prim;
    memory userWeights, weights, dst, bias, residual;
    dnnl::reorder weightsReorder;
    dnnl::stream stream;
    std::unordered_map<int, memory> args;
  };

  Part makePart(const tfm_abi_kernel_desc_t &d, int64_t n0, int64_t nn,
                const memory::desc &srcMd) {
    auto &eng = dev->engine;
    // Rows of the output and residual are n apart; the part's window of
    // them is a strided 2-D operand.
    memory::desc outMd({m, nn}, dt::f32, memory::dims{n, 1});
    dnnl::post_ops ops;
    switch (d.params[4]) {
    case TFM_ACTIVATION_RELU:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      break;
    case TFM_ACTIVATION_GELU:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
      break;
    case TFM_ACTIVATION_GELU_TANH:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      break;
    default:
      break;
    }
    if (hasResidual)
      ops.append_binary(dnnl::algorithm::binary_add, outMd);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    // w is [N, K] row-major, i.e. the [K, N] operand with strides (1, K).
    memory::desc userW({k, nn}, dt::f32, memory::dims{1, k});
    // Constant weights are packed once into the layout oneDNN prefers (and
    // to bf16 for --dtype=bf16); others are read as they are.
    bool pack = constWeights || bf16;
    memory::desc wMd =
        pack ? memory::desc({k, nn}, bf16 ? dt::bf16 : dt::f32, tag::any)
             : userW;
    auto desc = hasBias ? dnnl::matmul::desc(srcMd, wMd, rowMajor({1, nn}),
                                             outMd)
                        : dnnl::matmul::desc(srcMd, wMd, outMd);
    dnnl::matmul::primitive_desc pd(desc, attr, eng);
    Part p;
    p.n0 = n0;
    p.prim = dnnl::matmul(pd);
    p.userWeights = memory(userW, eng, DNNL_MEMORY_NONE);
    p.weights = pack ? memory(pd.weights_desc(), eng) : p.userWeights;
    if (pack)
      p.weightsReorder = dnnl::reorder(p.userWeights, p.weights);
    p.dst = memory(outMd, eng, DNNL_MEMORY_NONE);
    p.stream = dnnl::stream(eng);
    p.args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p.weights},
              {DNNL_ARG_DST, p.dst}};
    if (hasBias) {
      p.bias = memory(rowMajor({1, nn}), eng, DNNL_MEMORY_NONE);
      p.args[DNNL_ARG_BIAS] = p.bias;
    }
    if (hasResidual) {
      p.residual = memory(outMd, eng, DNNL_MEMORY_NONE);
      int idx = pd.get_primitive_attr().get_post_ops().len() - 1;
      p.args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1] = p.residual;
    }
    return p;
  }

  std::shared_ptr<Device> dev;
  int64_t m, k, n;
  bool hasBias, hasResidual, constWeights, bf16;
  memory userSrc, src;
  dnnl::reorder srcReorder;
  void *packedFrom = nullptr;
  std::vector<Part> parts;
};

/// One operand of a batched matmul as the model lays it out: [B1, B2, R, C]
/// at arbitrary strides. One that is not batch-after-batch dense is packed
/// into (or, for the result, unpacked from) a dense scratch buffer with a
/// parallel row copy: oneDNN runs dense batches several times faster than
/// strided ones, and the copy costs a fraction of a separate transpose.
struct MatmulOperand {
  int64_t b1, b2, rows, cols;
  int64_t s[4];
  bool direct = false;   // used in place
  bool colMajor = false; // dense layout is [B, C, R] (a transposed operand)
  std::vector<float> scratch;

  MatmulOperand(int64_t b1, int64_t b2, int64_t rows, int64_t cols,
                const int64_t *strides, bool isResult)
      : b1(b1), b2(b2), rows(rows), cols(cols) {
    std::copy(strides, strides + 4, s);
    int64_t mat = rows * cols;
    bool batchDense = s[1] == mat && (b1 == 1 || s[0] == b2 * mat);
    if (batchDense && s[3] == 1 && s[2] == cols)
      direct = true;
    else if (batchDense && !isResult && s[2] == 1 && s[3] == rows)
      direct = colMajor = true;
    else {
      colMajor = !isResult && s[2] == 1; // keep the copy contiguous
      scratch.resize(b1 * b2 * mat);
    }
  }
  memory::desc desc() const {
    int64_t mat = rows * cols;
    memory::dims st = {b2 * mat, mat, colMajor ? 1 : cols, colMajor ? rows : 1};
    return memory::desc({b1, b2, rows, cols}, dt::f32, st);
  }
  /// Copies between the model's layout at `p` and the scratch buffer.
  void transfer(float *p, bool pack) {
    int64_t mat = rows * cols;
    int64_t outer = colMajor ? cols : rows, inner = colMajor ? rows : cols;
    int64_t so = colMajor ? s[3] : s[2], si = colMajor ? s[2] : s[3];
    if (si != 1 && so == 1) {
      // The model's contiguous dimension is the scratch's outer one (a
      // result written transposed): walk the model contiguously and the
      // scratch, one small matrix per batch that the cache holds, strided.
#pragma omp parallel for collapse(3) schedule(static)
      for (int64_t i = 0; i < b1; ++i)
        for (int64_t j = 0; j < b2; ++j)
          for (int64_t x = 0; x < inner; ++x) {
            float *model = p + i * s[0] + j * s[1] + x * si;
            float *dense = scratch.data() + (i * b2 + j) * mat + x;
            for (int64_t o = 0; o < outer; ++o)
              (pack ? dense[o * inner] : model[o]) = pack ? model[o] : dense[o * inner];
          }
      return;
    }
#pragma omp parallel for collapse(3) schedule(static)
    for (int64_t i = 0; i < b1; ++i)
      for (int64_t j = 0; j < b2; ++j)
        for (int64_t o = 0; o < outer; ++o) {
          float *model = p + i * s[0] + j * s[1] + o * so;
          float *dense = scratch.data() + (i * b2 + j) * mat + o * inner;
          if (si == 1) {
            if (pack)
              std::memcpy(dense, model, inner * sizeof(float));
            else
              std::memcpy(model, dense, inner * sizeof(float));
          } else {
            for (int64_t x = 0; x < inner; ++x)
              (pack ? dense[x] : model[x * si]) =
                  pack ? model[x * si] : dense[x];
          }
        }
  }
  void *bind(void *p) {
    if (direct)
      return p;
    return scratch.data();
  }
};

class BatchMatmulKernel : public Kernel {
public:
  BatchMatmulKernel(std::shared_ptr<Device> dev,
                    const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)),
        a(d.params[0], d.params[1], d.params[2], d.params[3], d.strides, false),
        b(d.params[0], d.params[1], d.params[3], d.params[4], d.strides + 4,
          false),
        c(d.params[0], d.params[1], d.params[2], d.params[4], d.strides + 8,
          true) {
    auto &eng = this->dev->engine;
    prim = dnnl::matmul(dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(a.desc(), b.desc(), c.desc()), eng));
    am = memory(a.desc(), eng, DNNL_MEMORY_NONE);
    bm = memory(b.desc(), eng, DNNL_MEMORY_NONE);
    cm = memory(c.desc(), eng, DNNL_MEMORY_NONE);
  }
  int32_t run(void *const *args) override {
    auto *ap = static_cast<float *>(args[0]);
    auto *bp = static_cast<float *>(args[1]);
    auto *cp = static_cast<float *>(args[2]);
    if (!a.direct)
      a.transfer(ap, true);
    if (!b.direct)
      b.transfer(bp, true);
    am.set_data_handle(a.bind(ap));
    bm.set_data_handle(b.bind(bp));
    cm.set_data_handle(c.bind(cp));
    prim.execute(dev->stream,
                 {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    dev->stream.wait();
    if (!c.direct)
      c.transfer(cp, false);
    return 0;
  }

private:
  std::shared_ptr<Device> dev;
  MatmulOperand a, b, c;
  memory am, bm, cm;
  dnnl::matmul prim;
};

class ReorderKernel : public Kernel {
public:
  ReorderKernel(std::shared_ptr<Device> dev, const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)) {
    int64_t rank = d.params[0];
    memory::dims dims(d.params + 1, d.params + 1 + rank);
    memory::desc from(dims, dt::f32, memory::dims(d.strides, d.strides + rank));
    memory::desc to(dims, dt::f32,
                    memory::dims(d.strides + TFM_REORDER_MAX_RANK,
                                 d.strides + TFM_REORDER_MAX_RANK + rank));
    auto &eng = this->dev->engine;
    x = memory(from, eng, DNNL_MEMORY_NONE);
    y = memory(to, eng, DNNL_MEMORY_NONE);
    prim = dnnl::reorder(x, y);
  }
  int32_t run(void *const *args) override {
    x.set_data_handle(args[0]);
    y.set_data_handle(args[1]);
    prim.execute(dev->stream, x, y);
    dev->stream.wait();
    return 0;
  }

private:
  std::shared_ptr<Device> dev;
  memory x, y;
  dnnl::reorder prim;
};

class MaskedSoftmaxKernel : public Kernel {
public:
  MaskedSoftmaxKernel(std::shared_ptr<Device> dev,
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
  std::shared_ptr<Device> dev;
  int64_t g, q, c;
  bool causal, hasMask;
  int64_t div, gstride, qstride;
  float scale;
  memory::desc md;
  dnnl::softmax_forward prim;
};

class LayerNormKernel : public Kernel {
public:
  LayerNormKernel(std::shared_ptr<Device> dev, const tfm_abi_kernel_desc_t &d)
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
  std::shared_ptr<Device> dev;
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
  LayerNormBackwardKernel(std::shared_ptr<Device> dev,
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
  std::shared_ptr<Device> dev;
  int64_t m, n;
  std::vector<float> mean, variance, zeros;
  memory::desc md;
  dnnl::layer_normalization_backward prim;
};

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
tfm::runtime::cpu::makeKernel(const std::shared_ptr<Device> &device,
                              const tfm_abi_kernel_desc_t &d,
                              std::string &error) {
  if (d.dtype != TFM_DTYPE_F32 &&
      !(d.dtype == TFM_DTYPE_BF16 && d.kind == TFM_KERNEL_LINEAR)) {
    error = "kernels compute in f32 (and LINEAR in bf16) only";
    return nullptr;
  }
  // The leading params of each kind are sizes; the rest are flags.
  int sizes = d.kind == TFM_KERNEL_BATCH_MATMUL ? 5
              : d.kind == TFM_KERNEL_LAYER_NORM ||
                      d.kind == TFM_KERNEL_LAYER_NORM_BACKWARD
                  ? 2
              : d.kind == TFM_KERNEL_ADAM || d.kind == TFM_KERNEL_SGD ? 1
              : d.kind == TFM_KERNEL_REORDER
                  ? static_cast<int>(std::clamp<int64_t>(d.params[0], 0, TFM_REORDER_MAX_RANK)) + 1
                  : 3;
  if (d.kind == TFM_KERNEL_REORDER && (d.params[0] < 1 || d.params[0] > TFM_REORDER_MAX_RANK)) {
    error = "a reorder has rank 1 to 6";
    return nullptr;
  }
  for (int i = 0; i < sizes; ++i)
    if (d.params[i] <= 0) {
      error = "kernel sizes must be positive";
      return nullptr;
    }
  try {
    switch (d.kind) {
    case TFM_KERNEL_LINEAR:
      return std::make_unique<LinearKernel>(device, d);
    case TFM_KERNEL_BATCH_MATMUL:
      return std::make_unique<BatchMatmulKernel>(device, d);
    case TFM_KERNEL_MASKED_SOFTMAX:
      return std::make_unique<MaskedSoftmaxKernel>(device, d);
    case TFM_KERNEL_LAYER_NORM:
      return std::make_unique<LayerNormKernel>(device, d);
    case TFM_KERNEL_REORDER:
      return std::make_unique<ReorderKernel>(device, d);
    case TFM_KERNEL_LAYER_NORM_BACKWARD:
      return std::make_unique<LayerNormBackwardKernel>(device, d);
    case TFM_KERNEL_ADAM:
      return std::make_unique<AdamKernel>(d);
    case TFM_KERNEL_SGD:
      return std::make_unique<SGDKernel>(d);
    default:
      error = "unknown kernel kind " + std::to_string(d.kind);
      return nullptr;
    }
  } catch (const dnnl::error &e) {
    error = std::string("oneDNN rejected the kernel: ") + e.what();
    return nullptr;
  }
}
