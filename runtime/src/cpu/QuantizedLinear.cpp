//===- QuantizedLinear.cpp - QUANTIZED_LINEAR on oneDNN's int8 matmul -----===//
//
// A linear whose input is quantized by its own range at every call
// (DynamicQuantizeLinear), or by a given scale and zero point (a static
// QuantizeLinear), and whose weights are int8: the input becomes uint8, oneDNN multiplies u8 · s8 into s32 (VNNI's vpdpbusd, AMX where
// there is one), and the epilogue here applies the zero points, the scales,
// the bias and the activation. oneDNN 2.6 runs its brgemm path only without
// run-time scales and zero points, so none are given to it:
//
//   Σ_k (q - z)(w - wz) = Σ q·w - z·Σ_k w - wz·Σ_k q + K·z·wz,
//
// with the weights' column sums taken once, when they are packed, and the
// input's row sums while it is quantized. Without VNNI, oneDNN sums u8 · s8
// pairs in 16 bits (vpmaddubsw), which saturate when 255 · (|w0| + |w1|) >
// 32767: it stays exact for weights within 7 bits (|w| <= 64, as
// tfm-quantize writes them for such a CPU), and other weights take this
// file's own product: both operands widened to 16 bits and multiplied in
// pairs by vpmaddwd, whose 32-bit sums are exact, at f32's rate of products
// on Zen 3 (one vpmaddwd a cycle) where vpmaddubsw gives twice that. A CPU
// without AVX2 declines the kernel, and the generated code runs.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

using namespace tfm::runtime::cpu;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

/// The bounds of x[0, n) widened from lo and hi: a NaN compares false both
/// ways, so it moves neither.
void rangeScalar(const float *x, int64_t n, float &lo, float &hi) {
  for (int64_t i = 0; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
}

#if defined(__x86_64__)
// minps(v, lo) is v < lo ? v : lo, NaN included (it returns its second
// operand): rangeScalar's comparisons, in lanes, which the compiler would
// not reorder into a reduction without being allowed to ignore NaNs. Eight
// lanes on AVX-512 too: the pass is bound by memory.
__attribute__((target("avx2"))) void rangeAvx2(const float *x, int64_t n,
                                               float &lo, float &hi) {
  __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    l = _mm256_min_ps(v, l);
    h = _mm256_max_ps(v, h);
  }
  alignas(32) float ls[8], hs[8];
  _mm256_store_ps(ls, l);
  _mm256_store_ps(hs, h);
  rangeScalar(ls, 8, lo, hi);
  rangeScalar(hs, 8, lo, hi);
  rangeScalar(x + i, n - i, lo, hi);
}
#endif

/// DynamicQuantizeLinear's scale and zero point of x[0, n), in f32 as its
/// definition computes them; NaN elements take no part. A scalar loop had
/// been a twentieth of an encoder layer's time.
void dynamicRange(const float *x, int64_t n, float &scale, int32_t &zp) {
  float lo = 0.f, hi = 0.f;
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const VectorIsa isa = vectorIsa();
#pragma omp parallel for reduction(min : lo) reduction(max : hi) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const float *p = x + c * kChunk;
    const int64_t len = std::min(kChunk, n - c * kChunk);
    float l = 0.f, h = 0.f;
#if defined(__x86_64__)
    if (isa != VectorIsa::Scalar)
      rangeAvx2(p, len, l, h);
    else
#endif
      rangeScalar(p, len, l, h);
    lo = std::min(lo, l);
    hi = std::max(hi, h);
  }
  scale = hi == lo ? 1.f : (hi - lo) / 255.f;
  float initial = 0.f - lo / scale;
  zp = static_cast<int32_t>(std::nearbyint(std::clamp(initial, 0.f, 255.f)));
}

/// q = saturate(round(x / scale) + zp) to [0, 255], halves to even, NaN to
/// zp; returns Σ q over the row.
int32_t quantizeRowScalar(const float *x, int64_t k, float scale, int32_t zp,
                          uint8_t *q) {
  int32_t sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    float v = x[i] / scale;
    int32_t r = std::isnan(v) ? zp
                              : static_cast<int32_t>(std::clamp(
                                    std::nearbyint(v) + static_cast<float>(zp),
                                    0.f, 255.f));
    q[i] = static_cast<uint8_t>(r);
    sum += r;
  }
  return sum;
}

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from a vector they leave undefined on
// purpose (`__m512 __Y = __Y`), which its own warnings then report.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/// quantizeRowScalar in sixteen lanes: the same division (not a product by
/// the reciprocal, which rounds differently), the same rounding.
__attribute__((target("avx512f,avx512bw"))) int32_t
quantizeRowAvx512(const float *x, int64_t k, float scale, int32_t zp,
                  uint8_t *q) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(float(zp));
  const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.f);
  __m512i sum = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), s);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512 r = _mm512_add_ps(
        _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
        z);
    r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
    r = _mm512_mask_mov_ps(r, nan, z);
    __m512i ri = _mm512_cvtps_epi32(r);
    sum = _mm512_add_epi32(sum, ri);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(q + i),
                     _mm512_cvtepi32_epi8(ri));
  }
  return _mm512_reduce_add_epi32(sum) +
         quantizeRowScalar(x + i, k - i, scale, zp, q + i);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#if defined(__x86_64__)
/// quantizeRowScalar in eight lanes: into uint8 for oneDNN, or widened to
/// 16 bits for the widened product (and then padded with a 0 to an even
/// length).
template <typename T>
__attribute__((target("avx2,fma"))) int32_t
quantizeRowAvx2(const float *x, int64_t k, float scale, int32_t zp, T *q) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(float(zp));
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.f);
  __m256i sum = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), s);
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    __m256 r = _mm256_add_ps(
        _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
    r = _mm256_blendv_ps(r, z, nan);
    __m256i ri = _mm256_cvtps_epi32(r);
    sum = _mm256_add_epi32(sum, ri);
    // Eight int32 in [0, 255] to eight int16, in order (and to bytes).
    __m128i packed = _mm_packs_epi32(_mm256_castsi256_si128(ri),
                                     _mm256_extracti128_si256(ri, 1));
    if constexpr (sizeof(T) == 2)
      _mm_storeu_si128(reinterpret_cast<__m128i *>(q + i), packed);
    else
      _mm_storel_epi64(reinterpret_cast<__m128i *>(q + i),
                       _mm_packus_epi16(packed, packed));
  }
  int32_t total = 0;
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes), sum);
  for (int32_t l : lanes)
    total += l;
  uint8_t tail[8];
  total += quantizeRowScalar(x + i, k - i, scale, zp, tail);
  for (int64_t j = i; j < k; ++j)
    q[j] = tail[j - i];
  if (sizeof(T) == 2 && k % 2)
    q[k] = 0;
  return total;
}

/// The widened product's tile: c[r][0, 16) (+)= Σ_p a[r][2p, 2p + 2) ·
/// b[p] for MR rows, where b[p] holds the pair of weights (k = 2p, 2p + 1)
/// of each of 16 columns. Each vpmaddwd takes one pair of every column for
/// one row, its 32-bit lanes exact sums of two products of at most
/// 255 · 128.
// The tile's steps for row R, on its accumulators LO and HI (macros: a
// lambda would not take the function's target).
#define TFM_WIDENED_LOAD(R, LO, HI)                                            \
  if constexpr (MR > R) {                                                      \
    LO = first ? _mm256_setzero_si256()                                        \
               : _mm256_loadu_si256(                                           \
                     reinterpret_cast<const __m256i *>(c + R * ldc));          \
    HI = first ? _mm256_setzero_si256()                                        \
               : _mm256_loadu_si256(                                           \
                     reinterpret_cast<const __m256i *>(c + R * ldc + 8));      \
  }
#define TFM_WIDENED_STEP(R, LO, HI)                                            \
  if constexpr (MR > R) {                                                      \
    int32_t pair;                                                              \
    std::memcpy(&pair, a + R * lda + 2 * p, sizeof pair);                      \
    __m256i av = _mm256_set1_epi32(pair);                                      \
    LO = _mm256_add_epi32(LO, _mm256_madd_epi16(av, b0));                      \
    HI = _mm256_add_epi32(HI, _mm256_madd_epi16(av, b1));                      \
  }
#define TFM_WIDENED_STORE(R, LO, HI)                                           \
  if constexpr (MR > R) {                                                      \
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(c + R * ldc), LO);         \
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(c + R * ldc + 8), HI);     \
  }
#define TFM_WIDENED_ROWS(DO)                                                   \
  DO(0, c00, c01) DO(1, c10, c11) DO(2, c20, c21) DO(3, c30, c31)              \
  DO(4, c40, c41) DO(5, c50, c51)

template <int MR>
__attribute__((target("avx2"))) void
widenedTile(const int16_t *a, int64_t lda, const int16_t *b, int64_t pairs,
            int32_t *c, int64_t ldc, bool first) {
  // Twelve named accumulators: GCC 12 keeps an array of vectors on the
  // stack, which halved the rate.
  __m256i c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  TFM_WIDENED_ROWS(TFM_WIDENED_LOAD)
  for (int64_t p = 0; p < pairs; ++p) {
    __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + 32 * p));
    __m256i b1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + 32 * p + 16));
    TFM_WIDENED_ROWS(TFM_WIDENED_STEP)
  }
  TFM_WIDENED_ROWS(TFM_WIDENED_STORE)
}
#undef TFM_WIDENED_ROWS
#undef TFM_WIDENED_STORE
#undef TFM_WIDENED_STEP
#undef TFM_WIDENED_LOAD
#endif

/// The widened weights: panels of 16 columns, each K/2 pairs of the 16
/// columns' two weights, so a tile reads its panel in order.
constexpr int64_t kPanel = 16;
std::vector<int16_t> widenWeights(const int8_t *w, int64_t n, int64_t k) {
  int64_t kp = (k + 1) / 2 * 2, panels = (n + kPanel - 1) / kPanel;
  std::vector<int16_t> b(panels * kp * kPanel, 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) {
      int64_t p = j / kPanel, col = j % kPanel;
      b[(p * kp / 2 + i / 2) * 2 * kPanel + col * 2 + i % 2] = w[j * k + i];
    }
  return b;
}

/// acc[m][np) = a[m][kp) · bᵀ for the widened operands, the column panels
/// shared among the threads; K in chunks whose panel stays in L1 while
/// every row passes over it.
void widenedProduct(const int16_t *a, int64_t m, int64_t kp,
                    const int16_t *b, int64_t np, int32_t *acc) {
#if defined(__x86_64__)
  constexpr int64_t kChunk = 512, kRows = 6;
  const int64_t panels = np / kPanel;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t k0 = 0; k0 < kp; k0 += kChunk) {
      int64_t pairs = (std::min(kp, k0 + kChunk) - k0) / 2;
      const int16_t *panel = b + p * kp * kPanel + k0 * kPanel;
      for (int64_t r = 0; r < m; r += kRows) {
        const int16_t *rows = a + r * kp + k0;
        int32_t *c = acc + r * np + p * kPanel;
        bool first = k0 == 0;
        switch (std::min(kRows, m - r)) {
        case 6: widenedTile<6>(rows, kp, panel, pairs, c, np, first); break;
        case 5: widenedTile<5>(rows, kp, panel, pairs, c, np, first); break;
        case 4: widenedTile<4>(rows, kp, panel, pairs, c, np, first); break;
        case 3: widenedTile<3>(rows, kp, panel, pairs, c, np, first); break;
        case 2: widenedTile<2>(rows, kp, panel, pairs, c, np, first); break;
        default: widenedTile<1>(rows, kp, panel, pairs, c, np, first); break;
        }
      }
    }
#endif
}

/// What a weight tensor (by where the model keeps it) becomes at its first
/// run: packed for oneDNN as s8, its column sums, and each output
/// feature's scale and zero point in the s8 domain.
struct PackedWeights {
  memory packed;                 // for oneDNN
  std::vector<int16_t> widened;  // for the widened product
  std::vector<int32_t> columnSums, zeroPoints;
  std::vector<float> scales;
  bool symmetric = false; ///< every zero point 0
};

class QuantizedLinearKernel : public Kernel {
public:
  QuantizedLinearKernel(std::shared_ptr<Engine> dev,
                        const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)), m(d.params[TFM_QUANTIZED_LINEAR_M]),
        k(d.params[TFM_QUANTIZED_LINEAR_K]),
        n(d.params[TFM_QUANTIZED_LINEAR_N]),
        hasBias(d.params[TFM_QUANTIZED_LINEAR_HAS_BIAS]),
        activation(d.params[TFM_QUANTIZED_LINEAR_ACTIVATION]),
        flags(d.params[TFM_QUANTIZED_LINEAR_FLAGS]),
        staticInput(flags & TFM_QUANTIZED_LINEAR_STATIC_INPUT),
        staticScale(static_cast<float>(d.fparams[0])),
        staticZeroPoint(
            static_cast<int32_t>(d.params[TFM_QUANTIZED_LINEAR_INPUT_ZERO_POINT])),
        kp((k + 1) / 2 * 2),
        np((n + kPanel - 1) / kPanel * kPanel), q(m * k), acc(m * np),
        rowSums(m), columnTerms(n), columnTerms32(n), columnScales(n),
        columnBias(n) {
    auto &eng = this->dev->engine;
    memory::desc srcMd({m, k}, dt::u8, tag::ab);
    memory::desc wMd({k, n}, dt::s8, tag::any);
    memory::desc dstMd({m, n}, dt::s32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(srcMd, wMd, dstMd),
                                    eng);
    prim = dnnl::matmul(pd);
    packedDesc = pd.weights_desc();
    // w is [N, K] row-major: the [K, N] operand with strides (1, K).
    userWeights = memory(memory::desc({k, n}, dt::s8, memory::dims{1, k}), eng,
                         DNNL_MEMORY_NONE);
    weightsReorder = dnnl::reorder(
        dnnl::reorder::primitive_desc(eng, userWeights.get_desc(), eng,
                                      packedDesc));
    src = memory(srcMd, eng, q.data());
    dst = memory(dstMd, eng, acc.data());
  }

  int32_t run(void *const *args) override {
    const auto *x = static_cast<const float *>(args[0]);
    const void *w = args[1];
    const auto *ws = static_cast<const float *>(args[2]);
    const void *wz =
        flags & TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT ? args[3] : nullptr;
    const auto *b = static_cast<const float *>(args[4]);
    auto *y = static_cast<float *>(args[5]);
    PackedWeights &pw = weightsOf(w, ws, wz);
    float scale = staticScale;
    int32_t zp = staticZeroPoint;
    if (!staticInput)
      dynamicRange(x, m * k, scale, zp);
    const bool widened = !pw.widened.empty();
    if (widened)
      q16.resize(m * kp);
    const VectorIsa isa = vectorIsa();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      const float *row = x + r * k;
#if defined(__x86_64__)
      if (widened) {
        rowSums[r] = quantizeRowAvx2(row, k, scale, zp, &q16[r * kp]);
        continue;
      }
      if (isa == VectorIsa::AVX512) {
        rowSums[r] = quantizeRowAvx512(row, k, scale, zp, &q[r * k]);
        continue;
      }
      if (isa == VectorIsa::AVX2) {
        rowSums[r] = quantizeRowAvx2(row, k, scale, zp, &q[r * k]);
        continue;
      }
#endif
      rowSums[r] = quantizeRowScalar(row, k, scale, zp, &q[r * k]);
    }
    // Made at the first symmetric weights: a JIT compile that asymmetric
    // ones would not use.
    if (!widened && pw.symmetric && !fusedTried) {
      fusedTried = true;
      makeFused();
    }
    if (!widened && fused && pw.symmetric)
      return runFused(pw, scale, zp, b, y);
    if (widened) {
      widenedProduct(q16.data(), m, kp, pw.widened.data(), np, acc.data());
    } else {
      prim.execute(dev->stream, {{DNNL_ARG_SRC, src},
                                 {DNNL_ARG_WEIGHTS, pw.packed},
                                 {DNNL_ARG_DST, dst}});
      dev->stream.wait();
    }
    epilogue(pw, scale, zp, b, y, widened ? np : n);
    return 0;
  }

private:
  /// With every weight zero point 0 (symmetric weights, as quantize_dynamic
  /// writes them) the epilogue is a product and a sum per column, which
  /// oneDNN's binary post-ops apply as the matmul writes f32 into y: no
  /// int32 [M, N] buffer to write and read back, no pass of the epilogue's
  /// own. Left unmade where oneDNN would take a reference implementation.
  void makeFused() {
    auto &eng = dev->engine;
    memory::desc srcMd({m, k}, dt::u8, tag::ab);
    memory::desc column({1, n}, dt::f32, tag::ab);
    dnnl::post_ops ops;
    ops.append_binary(dnnl::algorithm::binary_mul, column);
    ops.append_binary(dnnl::algorithm::binary_add, column);
    if (activation == TFM_ACTIVATION_RELU)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    memory::desc outMd({m, n}, dt::f32, tag::ab);
    try {
      dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(srcMd, packedDesc, outMd), attr, eng);
      if (std::string(pd.impl_info_str()).find("ref") != std::string::npos)
        return;
      fused = dnnl::matmul(pd);
    } catch (const dnnl::error &) {
      return;
    }
    columnMul = memory(column, eng, columnScales.data());
    columnAdd = memory(column, eng, columnBias.data());
    fusedOut = memory(outMd, eng, DNNL_MEMORY_NONE);
  }

  /// y = act(acc · s·ws + (s·ws·(−z·Σw) + b)) through the fused matmul.
  int32_t runFused(const PackedWeights &pw, float scale, int32_t zp,
                   const float *b, float *y) {
    for (int64_t j = 0; j < n; ++j) {
      columnScales[j] = scale * pw.scales[j];
      columnBias[j] =
          columnScales[j] * static_cast<float>(-int64_t(zp) * pw.columnSums[j]) +
          (hasBias ? b[j] : 0.f);
    }
    fusedOut.set_data_handle(y);
    fused.execute(dev->stream,
                  {{DNNL_ARG_SRC, src},
                   {DNNL_ARG_WEIGHTS, pw.packed},
                   {DNNL_ARG_DST, fusedOut},
                   {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, columnMul},
                   {DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, columnAdd}});
    dev->stream.wait();
    // ReLU was the matmul's last post-op.
    if (activation == TFM_ACTIVATION_RELU)
      return 0;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r)
      activateRowInLanes(y + r * n, n, activation);
    return 0;
  }

  /// y = act((acc − z·Σw − wz·Σq + K·z·wz) · s·ws + b). The terms of each
  /// column are taken once per call, so that the loop over the outputs is
  /// int32 and f32 lanes the compiler vectorizes: |Σ(q−z)(w−wz)| < K·2^16
  /// and each term fits in int32 while K < 2^14; larger K sums in int64.
  /// acc's rows are `stride` apart.
  void epilogue(const PackedWeights &pw, float scale, int32_t zp,
                const float *b, float *y, int64_t stride) {
    const int64_t z = zp;
    for (int64_t j = 0; j < n; ++j) {
      columnTerms[j] = -z * pw.columnSums[j] + k * z * pw.zeroPoints[j];
      columnTerms32[j] = static_cast<int32_t>(columnTerms[j]);
      columnScales[j] = scale * pw.scales[j];
      columnBias[j] = hasBias ? b[j] : 0.f;
    }
    const VectorIsa isa = vectorIsa();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
#if defined(__x86_64__)
      if (isa == VectorIsa::AVX512)
        epilogueRowAvx512(pw, &acc[r * stride], rowSums[r], y + r * n);
      else if (isa == VectorIsa::AVX2)
        epilogueRowAvx2(pw, &acc[r * stride], rowSums[r], y + r * n);
      else
#endif
        epilogueRow(pw, &acc[r * stride], rowSums[r], y + r * n);
      activateRowInLanes(y + r * n, n, activation);
    }
  }

#if defined(__x86_64__)
  // epilogueRow in the lanes of each ISA (the runtime's baseline, SSE2, has
  // no 32-bit integer product: the loop had been scalar, a tenth of an
  // encoder layer).
  __attribute__((target("avx512f"))) void
  epilogueRowAvx512(const PackedWeights &pw, const int32_t *a, int64_t rs,
                    float *out) const {
    epilogueRow(pw, a, rs, out);
  }
  __attribute__((target("avx2,fma"))) void
  epilogueRowAvx2(const PackedWeights &pw, const int32_t *a, int64_t rs,
                  float *out) const {
    epilogueRow(pw, a, rs, out);
  }
#endif

  /// A row of the epilogue before its activation: out = (a + the column's
  /// terms − wz·rs) · s·ws + b.
  __attribute__((always_inline)) inline void
  epilogueRow(const PackedWeights &pw, const int32_t *a, int64_t rs,
              float *out) const {
    if (k < (int64_t(1) << 14)) {
      const int32_t rs32 = static_cast<int32_t>(rs);
      const int32_t *terms = columnTerms32.data();
      const int32_t *wz = pw.zeroPoints.data();
      for (int64_t j = 0; j < n; ++j)
        out[j] = static_cast<float>(a[j] + terms[j] - wz[j] * rs32) *
                     columnScales[j] +
                 columnBias[j];
      return;
    }
    for (int64_t j = 0; j < n; ++j)
      out[j] = static_cast<float>(int64_t(a[j]) + columnTerms[j] -
                                  pw.zeroPoints[j] * rs) *
                   columnScales[j] +
               columnBias[j];
  }

  /// The packed form of the constant weights at `w`, made at their first
  /// run: a model of one shape runs this kernel on each layer's weights.
  PackedWeights &weightsOf(const void *w, const float *ws, const void *wz) {
    PackedWeights &pw = packedByWeights[w];
    if (pw.packed || !pw.widened.empty())
      return pw;
    bool isUnsigned = flags & TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS;
    bool perRow = flags & TFM_QUANTIZED_LINEAR_PER_ROW;
    // uint8 weights less 128 are int8 ones whose zero point is 128 less.
    std::vector<int8_t> s8(n * k);
    const auto *u = static_cast<const uint8_t *>(w);
    for (int64_t i = 0; i < n * k; ++i)
      s8[i] = static_cast<int8_t>(isUnsigned ? int32_t(u[i]) - 128
                                             : int32_t(int8_t(u[i])));
    pw.columnSums.assign(n, 0);
    pw.zeroPoints.assign(n, 0);
    pw.scales.assign(n, 0.f);
    for (int64_t j = 0; j < n; ++j) {
      int32_t sum = 0;
      for (int64_t i = 0; i < k; ++i)
        sum += s8[j * k + i];
      pw.columnSums[j] = sum;
      int64_t at = perRow ? j : 0;
      int32_t given =
          !wz ? 0
          : isUnsigned
              ? int32_t(static_cast<const uint8_t *>(wz)[at])
              : int32_t(static_cast<const int8_t *>(wz)[at]);
      pw.zeroPoints[j] = given - (isUnsigned ? 128 : 0);
      pw.scales[j] = ws[at];
    }
    pw.symmetric = std::all_of(pw.zeroPoints.begin(), pw.zeroPoints.end(),
                               [](int32_t z) { return z == 0; });
    // oneDNN's 16-bit pair sums (vpmaddubsw, without VNNI) stay exact
    // while |w| <= 64: 2 · 255 · 64 <= 32767, as weights quantized to 7
    // bits are (tfm-quantize for such a CPU, or a quantizer's reduce_range).
    if (!multipliesInt8Exactly() &&
        std::any_of(s8.begin(), s8.end(),
                    [](int8_t v) { return v > 64 || v < -64; })) {
      pw.widened = widenWeights(s8.data(), n, k);
      return pw;
    }
    pw.packed = memory(packedDesc, dev->engine);
    userWeights.set_data_handle(s8.data());
    weightsReorder.execute(dev->stream, userWeights, pw.packed);
    dev->stream.wait();
    return pw;
  }

  std::shared_ptr<Engine> dev;
  int64_t m, k, n;
  bool hasBias;
  int64_t activation, flags;
  /// STATIC_INPUT: the input's given scale and zero point (uint8's).
  bool staticInput;
  float staticScale;
  int32_t staticZeroPoint;
  /// Without VNNI, for weights beyond 7 bits: the widened product, on the
  /// input in 16 bits (q16, rows of kp: K made even) into rows of np (N
  /// made whole panels).
  int64_t kp, np;
  std::vector<uint8_t> q;
  std::vector<int16_t> q16;
  std::vector<int32_t> acc, rowSums;
  /// Per call: each column's constant term, its scale and its bias.
  std::vector<int64_t> columnTerms;
  std::vector<int32_t> columnTerms32;
  std::vector<float> columnScales, columnBias;
  dnnl::matmul prim;
  /// makeFused's matmul, and its per-call columns (columnScales, columnBias)
  /// and output; empty where oneDNN has no fast one.
  dnnl::matmul fused;
  bool fusedTried = false;
  memory columnMul, columnAdd, fusedOut;
  memory::desc packedDesc;
  memory src, dst, userWeights;
  dnnl::reorder weightsReorder;
  std::unordered_map<const void *, PackedWeights> packedByWeights;
};

} // namespace

bool tfm::runtime::cpu::multipliesInt8Exactly() {
  // Each oneDNN ISA's bits include those of the ISAs below it.
  static const bool vnni = [] {
    auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    return (isa & dnnl_cpu_isa_avx512_core_vnni) ==
               dnnl_cpu_isa_avx512_core_vnni ||
           (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
  }();
  return vnni;
}

bool tfm::runtime::cpu::hasAvx512Vnni() {
  static const bool vnni =
      vectorIsa() == VectorIsa::AVX512 &&
      (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) &
       dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni;
  return vnni;
}

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeQuantizedLinearKernel(
    std::shared_ptr<Engine> engine, const tfm_abi_kernel_desc_t &desc) {
  return std::make_unique<QuantizedLinearKernel>(std::move(engine), desc);
}
