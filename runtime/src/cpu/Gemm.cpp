//===- Gemm.cpp - LINEAR and BATCH_MATMUL on oneDNN's matmul ---------------===//
//
// LINEAR is a matmul with the bias, the activation and the residual as
// post-ops, its constant weights packed once; BATCH_MATMUL reads and writes
// operands at any strides, packing the ones oneDNN would run slowly.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"
#include "VectorMath.h"

#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

using namespace tfm::runtime::cpu;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

/// LINEAR with at most this many rows (a decoding step, a beam) runs as a
/// GEMV: its time is the time to read the weights once, which oneDNN's
/// small-M matmul does at a quarter of the memory bandwidth (W7's profile,
/// docs/generation.md). Each weight row is read once for all rows of x.
static constexpr int64_t kGemvRows = 4;

float tfm::runtime::cpu::activate(float v, int64_t act) {
  switch (act) {
  case TFM_ACTIVATION_RELU:
    return v > 0.f ? v : 0.f;
  case TFM_ACTIVATION_GELU:
    return 0.5f * v * (1.f + std::erf(v * 0.70710678118654752f));
  case TFM_ACTIVATION_GELU_TANH: {
    // 1 + tanh(u) = 2 - 2 / (1 + e^2u): expf is several times faster than
    // tanhf, which showed in a decoding step's profile; exact at both ends.
    float u = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    return v * (1.f - 1.f / (1.f + std::exp(2.f * u)));
  }
  case TFM_ACTIVATION_SILU:
    return v / (1.f + std::exp(-v));
  default:
    return v;
  }
}

void tfm::runtime::cpu::activateRowInLanes(float *y, int64_t n, int64_t act) {
  if (act == TFM_ACTIVATION_NONE)
    return;
#if defined(__x86_64__)
  if (vectorIsa() != VectorIsa::Scalar)
    return activateRow(y, n, act);
#endif
  for (int64_t i = 0; i < n; ++i)
    y[i] = activate(y[i], act);
}

namespace {

/// acc[r, j - n0] = x[r, :] · w[j, :] for r < m and j in [n0, n1).
void gemvRowsScalar(const float *x, int64_t m, int64_t k, const float *w,
                    int64_t n0, int64_t n1, float *acc) {
  for (int64_t j = n0; j < n1; ++j)
    for (int64_t r = 0; r < m; ++r) {
      float s = 0.f;
      for (int64_t i = 0; i < k; ++i)
        s += x[r * k + i] * w[j * k + i];
      acc[r * (n1 - n0) + (j - n0)] = s;
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/// As gemvRowsScalar, one weight row after another, so that a thread reads
/// its rows as one sequential stream (what the hardware prefetcher serves
/// best; rows of a few KB read side by side were 20% slower), with four
/// independent sums of eight lanes per row of x.
template <int M>
__attribute__((target("avx2,fma"))) void
gemvRowsAvx2(const float *x, int64_t k, const float *w, int64_t n0,
             int64_t n1, float *acc) {
  int64_t k32 = k / 32 * 32, k8 = k / 8 * 8, width = n1 - n0;
  for (int64_t j = n0; j < n1; ++j) {
    const float *row = w + j * k;
    __m256 s[M][4];
    for (int r = 0; r < M; ++r)
      for (int u = 0; u < 4; ++u)
        s[r][u] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i < k32; i += 32)
      for (int u = 0; u < 4; ++u) {
        __m256 wv = _mm256_loadu_ps(row + i + 8 * u);
        for (int r = 0; r < M; ++r)
          s[r][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * k + i + 8 * u),
                                    s[r][u]);
      }
    for (; i < k8; i += 8) {
      __m256 wv = _mm256_loadu_ps(row + i);
      for (int r = 0; r < M; ++r)
        s[r][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * k + i), s[r][0]);
    }
    for (int r = 0; r < M; ++r) {
      float t = hsum(_mm256_add_ps(_mm256_add_ps(s[r][0], s[r][1]),
                                   _mm256_add_ps(s[r][2], s[r][3])));
      for (int64_t ii = k8; ii < k; ++ii)
        t += x[r * k + ii] * row[ii];
      acc[r * width + (j - n0)] = t;
    }
  }
}
#endif

/// y[m, n] = act(x[m, k] · w[n, k]ᵀ + b) (+ r) for m <= kGemvRows, on the
/// session's threads, each taking a run of weight rows.
class GemvLinearKernel : public Kernel {
public:
  explicit GemvLinearKernel(const tfm_abi_kernel_desc_t &d)
      : m(d.params[TFM_LINEAR_M]), k(d.params[TFM_LINEAR_K]),
        n(d.params[TFM_LINEAR_N]), hasBias(d.params[TFM_LINEAR_HAS_BIAS]),
        activation(d.params[TFM_LINEAR_ACTIVATION]),
        hasResidual(d.params[TFM_LINEAR_HAS_RESIDUAL]) {
    // By the CPU it runs on, within DNNL_MAX_CPU_ISA, as every kernel.
    avx2 = vectorIsa() != VectorIsa::Scalar;
  }

  int32_t run(void *const *args) override {
    const auto *x = static_cast<const float *>(args[0]);
    const auto *w = static_cast<const float *>(args[1]);
    const auto *b = static_cast<const float *>(args[2]);
    const auto *r = static_cast<const float *>(args[3]);
    auto *y = static_cast<float *>(args[4]);
    // Blocks of rows small enough to share between threads evenly, large
    // enough to stream.
    constexpr int64_t kBlock = 64;
    int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      int64_t n0 = blk * kBlock, n1 = std::min(n, n0 + kBlock);
      float acc[kGemvRows * kBlock];
      rows(x, w, n0, n1, acc);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = n0; j < n1; ++j) {
          float v = acc[i * (n1 - n0) + (j - n0)] + (hasBias ? b[j] : 0.f);
          v = activate(v, activation);
          if (hasResidual)
            v += r[i * n + j];
          y[i * n + j] = v;
        }
    }
    return 0;
  }

private:
  void rows(const float *x, const float *w, int64_t n0, int64_t n1,
            float *acc) const {
#if defined(__x86_64__)
    if (avx2) {
      switch (m) {
      case 1: return gemvRowsAvx2<1>(x, k, w, n0, n1, acc);
      case 2: return gemvRowsAvx2<2>(x, k, w, n0, n1, acc);
      case 3: return gemvRowsAvx2<3>(x, k, w, n0, n1, acc);
      case 4: return gemvRowsAvx2<4>(x, k, w, n0, n1, acc);
      default: break;
      }
    }
#endif
    gemvRowsScalar(x, m, k, w, n0, n1, acc);
  }

  int64_t m, k, n;
  bool hasBias;
  int64_t activation;
  bool hasResidual;
  bool avx2 = false;
};

class LinearKernel : public Kernel {
public:
  LinearKernel(std::shared_ptr<Engine> dev, const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)), m(d.params[TFM_LINEAR_M]),
        k(d.params[TFM_LINEAR_K]), n(d.params[TFM_LINEAR_N]),
        hasBias(d.params[TFM_LINEAR_HAS_BIAS]),
        hasResidual(d.params[TFM_LINEAR_HAS_RESIDUAL]),
        constWeights(d.params[TFM_LINEAR_CONSTANT_WEIGHTS]), bf16(d.dtype == TFM_DTYPE_BF16) {
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
      if (!p.pack) {
        p.userWeights.set_data_handle(w + p.n0 * k);
      } else if (constWeights) {
        // Every layer of a model with one shape runs this kernel on its own
        // weights: each is packed at its first run and kept (W9's 24
        // layers had repacked 16 MB at every call).
        memory &packed = p.packedByWeights[w];
        if (!packed) {
          packed = memory(p.packedDesc, dev->engine);
          p.userWeights.set_data_handle(w + p.n0 * k);
          p.weightsReorder.execute(dev->stream, p.userWeights, packed);
        }
        p.args[DNNL_ARG_WEIGHTS] = packed;
      } else {
        p.userWeights.set_data_handle(w + p.n0 * k);
        p.weightsReorder.execute(dev->stream, p.userWeights, p.weights);
      }
      p.dst.set_data_handle(y + p.n0);
      if (hasBias)
        p.bias.set_data_handle(b + p.n0);
      if (hasResidual)
        p.residual.set_data_handle(r + p.n0);
    }
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
    /// Constant weights packed, by where the model keeps them.
    bool pack = false;
    memory::desc packedDesc;
    std::unordered_map<const float *, memory> packedByWeights;
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
    switch (d.params[TFM_LINEAR_ACTIVATION]) {
    case TFM_ACTIVATION_RELU:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      break;
    case TFM_ACTIVATION_GELU:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
      break;
    case TFM_ACTIVATION_GELU_TANH:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      break;
    case TFM_ACTIVATION_SILU:
      // oneDNN's swish is x·sigmoid(alpha·x).
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
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
    p.packedDesc = pd.weights_desc();
    // Weights packed at each run (bf16 weights that change) have one buffer;
    // constant ones one per weight tensor, made at its first run.
    p.weights = pack && !constWeights ? memory(p.packedDesc, eng)
                                      : p.userWeights;
    if (pack)
      p.weightsReorder =
          dnnl::reorder(dnnl::reorder::primitive_desc(
              eng, userW, eng, p.packedDesc));
    p.pack = pack;
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

  std::shared_ptr<Engine> dev;
  int64_t m, k, n;
  bool hasBias, hasResidual, constWeights, bf16;
  memory userSrc, src;
  dnnl::reorder srcReorder;
  std::vector<Part> parts;
};

/// One operand of a batched matmul as the model lays it out: [B1, B2, R, C]
/// at arbitrary strides. It is used in place when it is dense batch after
/// batch, or, `inPlace`, when its rows or columns are contiguous (oneDNN's
/// brgemm reads the heads of a sequence-first [S, B·H, dh] tensor where
/// they lie). Otherwise it is packed into (or, for the result, unpacked
/// from) a dense scratch buffer with a parallel row copy: that is how
/// layouts oneDNN has no fast kernel for reach one.
struct MatmulOperand {
  int64_t b1, b2, rows, cols;
  int64_t s[4];
  bool direct = false;   // used in place
  bool strided = false;  // used in place at the model's strides
  bool colMajor = false; // dense layout is [B, C, R] (a transposed operand)
  std::vector<float> scratch;

  MatmulOperand(int64_t b1, int64_t b2, int64_t rows, int64_t cols,
                const int64_t *strides, bool isResult, bool inPlace)
      : b1(b1), b2(b2), rows(rows), cols(cols) {
    std::copy(strides, strides + 4, s);
    int64_t mat = rows * cols;
    bool batchDense = s[1] == mat && (b1 == 1 || s[0] == b2 * mat);
    if (batchDense && s[3] == 1 && s[2] == cols)
      direct = true;
    else if (batchDense && !isResult && s[2] == 1 && s[3] == rows)
      direct = colMajor = true;
    else if (inPlace && (s[3] == 1 || (!isResult && s[2] == 1)))
      direct = strided = true;
    else {
      colMajor = !isResult && s[2] == 1; // keep the copy contiguous
      scratch.resize(b1 * b2 * mat);
    }
  }
  memory::desc desc() const {
    if (strided) {
      // A batch dimension of one may carry any stride; give it the span of
      // the rest, so that the layout reads as non-overlapping.
      int64_t outer = b1 > 1 ? s[0]
                             : std::max({b2 * s[1], rows * s[2], cols * s[3]});
      return memory::desc({b1, b2, rows, cols}, dt::f32,
                          memory::dims{outer, s[1], s[2], s[3]});
    }
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
  BatchMatmulKernel(std::shared_ptr<Engine> dev,
                    const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)) {
    auto &eng = this->dev->engine;
    // In place first: W5's 64 heads of 64x64x64 at the model's strides ran
    // at 280-420 GFLOP/s in oneDNN against 160-210 through dense copies,
    // whose three parallel copies cost as much as the GEMM. oneDNN's
    // reference kernel for a layout, or none at all, means the copies win.
    for (bool inPlace : {true, false}) {
      operands(d, inPlace);
      bool strided = a->strided || b->strided || c->strided;
      try {
        dnnl::matmul::primitive_desc pd(
            dnnl::matmul::desc(a->desc(), b->desc(), c->desc()), eng);
        if (strided && std::string(pd.impl_info_str()).rfind("ref", 0) == 0)
          continue;
        prim = dnnl::matmul(pd);
        break;
      } catch (const dnnl::error &) {
        if (!strided)
          throw;
      }
    }
    am = memory(a->desc(), eng, DNNL_MEMORY_NONE);
    bm = memory(b->desc(), eng, DNNL_MEMORY_NONE);
    cm = memory(c->desc(), eng, DNNL_MEMORY_NONE);
  }
  int32_t run(void *const *args) override {
    auto *ap = static_cast<float *>(args[0]);
    auto *bp = static_cast<float *>(args[1]);
    auto *cp = static_cast<float *>(args[2]);
    if (!a->direct)
      a->transfer(ap, true);
    if (!b->direct)
      b->transfer(bp, true);
    am.set_data_handle(a->bind(ap));
    bm.set_data_handle(b->bind(bp));
    cm.set_data_handle(c->bind(cp));
    prim.execute(dev->stream,
                 {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    dev->stream.wait();
    if (!c->direct)
      c->transfer(cp, false);
    return 0;
  }

private:
  void operands(const tfm_abi_kernel_desc_t &d, bool inPlace) {
    const int64_t *p = d.params;
    int64_t b1 = p[TFM_BATCH_MATMUL_B1], b2 = p[TFM_BATCH_MATMUL_B2],
            m = p[TFM_BATCH_MATMUL_M], k = p[TFM_BATCH_MATMUL_K],
            n = p[TFM_BATCH_MATMUL_N];
    a.emplace(b1, b2, m, k, d.strides, false, inPlace);
    b.emplace(b1, b2, k, n, d.strides + 4, false, inPlace);
    c.emplace(b1, b2, m, n, d.strides + 8, true, inPlace);
  }

  std::shared_ptr<Engine> dev;
  std::optional<MatmulOperand> a, b, c;
  memory am, bm, cm;
  dnnl::matmul prim;
};

} // namespace

bool tfm::runtime::cpu::linearOnPackedAvx2(const tfm_abi_kernel_desc_t &d) {
  // Below AVX-512, oneDNN 2.6 packs the weights again at every call.
#if defined(__x86_64__)
  return d.kind == TFM_KERNEL_LINEAR && d.dtype != TFM_DTYPE_BF16 &&
         d.params[TFM_LINEAR_M] > kGemvRows && vectorIsa() == VectorIsa::AVX2;
#else
  (void)d;
  return false;
#endif
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeLinearKernel(std::shared_ptr<Engine> engine,
                                    const tfm_abi_kernel_desc_t &d) {
  if (d.dtype != TFM_DTYPE_BF16 && d.params[TFM_LINEAR_M] <= kGemvRows)
    return std::make_unique<GemvLinearKernel>(d);
  if (linearOnPackedAvx2(d))
    if (auto packed = makePackedLinearKernel(engine, d))
      return packed;
  return std::make_unique<LinearKernel>(std::move(engine), d);
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeBatchMatmulKernel(std::shared_ptr<Engine> engine,
                                         const tfm_abi_kernel_desc_t &d) {
  return std::make_unique<BatchMatmulKernel>(std::move(engine), d);
}
