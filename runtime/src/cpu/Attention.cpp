//===- Attention.cpp - Attention without the scores in memory --------------===//
//
// ATTENTION walks each block of queries over blocks of keys, keeping a
// running maximum and sum per row (the online softmax), so the [Sq, Sk]
// scores never exist: a block's scores live in a per-thread buffer that
// stays in the core's L2 cache between its two GEMMs. At Sk = 4096 the
// unfused graph moved 805 MB of scores through memory three times.
//
// The threads split the (batch, head, query block) tasks; each runs the
// block GEMMs through oneDNN single-threaded (oneDNN does not fork inside a
// parallel region), with its own stream and scratchpad, so the primitives,
// created once per block shape, run concurrently.
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
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <vector>

using namespace tfm::runtime::cpu;
using dnnl::memory;
using dt = dnnl::memory::data_type;

namespace {

/// Query rows per task, and keys per block: a block of scores (128 KB at 64
/// rows) and the key and value blocks it needs (128 KB each at head
/// dimension 64) stay in one core's L2, where oneDNN's GEMMs of this shape
/// run at about 90% of their large-matrix speed.
constexpr int64_t kMinQueryBlock = 64;
constexpr int64_t kMaxQueryBlock = 256;
constexpr int64_t kKeyBlock = 512;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// log2(e): the scores come out of the GEMM multiplied by it, and the mask
/// is, so that the softmax's exponentials are powers of two (exp(x) =
/// 2^(x·log2 e)): the range reduction is then a rounding, and a degree-5
/// polynomial reaches float precision. The row sums come out unchanged.
constexpr float kLog2e = 1.44269504088896341f;

/// One row of a block's scores (already scaled by the GEMM, in base 2),
/// `row[0, n)`, becomes 2^(row + mask·log2 e − m′) where m′ = max(m, the
/// row's maximum), with the entries at or after `keep` dropped (0); returns
/// the factor 2^(m − m′) by which the row's earlier sum and output shrink,
/// and updates m and the sum l.
float onlineSoftmaxRowScalar(float *row, const float *mask, int64_t keep,
                             int64_t n, float &m, float &l) {
  float mx = kNegInf;
  for (int64_t j = 0; j < keep; ++j) {
    row[j] += mask ? mask[j] * kLog2e : 0.f;
    mx = std::max(mx, row[j]);
  }
  float next = std::max(m, mx);
  if (next == kNegInf) {
    std::fill(row, row + n, 0.f);
    return 1.f;
  }
  float sum = 0.f;
  for (int64_t j = 0; j < keep; ++j) {
    row[j] = std::exp2(row[j] - next);
    sum += row[j];
  }
  std::fill(row + keep, row + n, 0.f);
  float shrink = std::exp2(m - next);
  l = l * shrink + sum;
  m = next;
  return shrink;
}

#if defined(__x86_64__)
/// 2^x for x <= 0 in eight lanes. Scalar exp2f here would cost as much as
/// the GEMMs.
__attribute__((target("avx2,fma"))) inline __m256 exp2NonPositive(__m256 x) {
  __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(kExp2Lowest), _CMP_LT_OQ);
  return _mm256_andnot_ps(tiny, exp2Clamped(x));
}

__attribute__((target("avx2,fma"))) inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// onlineSoftmaxRowScalar in eight lanes.
__attribute__((target("avx2,fma"))) float
onlineSoftmaxRowAVX2(float *row, const float *mask, int64_t keep, int64_t n,
                     float &m, float &l) {
  __m256 vmx = _mm256_set1_ps(kNegInf);
  int64_t j = 0;
  for (; j + 8 <= keep; j += 8) {
    __m256 x = _mm256_loadu_ps(row + j);
    if (mask) {
      x = _mm256_fmadd_ps(_mm256_loadu_ps(mask + j), _mm256_set1_ps(kLog2e), x);
      _mm256_storeu_ps(row + j, x);
    }
    vmx = _mm256_max_ps(vmx, x);
  }
  float mx = hmax(vmx);
  for (; j < keep; ++j) {
    row[j] += mask ? mask[j] * kLog2e : 0.f;
    mx = std::max(mx, row[j]);
  }
  float next = std::max(m, mx);
  if (next == kNegInf) {
    std::fill(row, row + n, 0.f);
    return 1.f;
  }
  const __m256 vn = _mm256_set1_ps(next);
  __m256 vsum = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= keep; j += 8) {
    __m256 p = exp2NonPositive(_mm256_sub_ps(_mm256_loadu_ps(row + j), vn));
    _mm256_storeu_ps(row + j, p);
    vsum = _mm256_add_ps(vsum, p);
  }
  float sum = hsum(vsum);
  for (; j < keep; ++j) {
    row[j] = std::exp2(row[j] - next);
    sum += row[j];
  }
  std::fill(row + keep, row + n, 0.f);
  float shrink = std::exp2(m - next);
  l = l * shrink + sum;
  m = next;
  return shrink;
}

// GCC 12's AVX-512 header makes its undefined vectors by initializing a
// variable with itself, and then reports that variable as uninitialized
// wherever an intrinsic built on one is inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// 2^x for x <= 0 in sixteen lanes, as exp2NonPositive.
__attribute__((target("avx512f"))) inline __m512 exp2NonPositive16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(kExp2Lowest);
  __mmask16 kept = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_max_ps(x, lo);
  __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(kExp2Poly[std::size(kExp2Poly) - 1]);
  for (size_t i = std::size(kExp2Poly) - 1; i-- > 0;)
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Poly[i]));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  // p·2^n, scaled through the exponent field.
  return _mm512_maskz_scalef_ps(kept, p, n);
}

/// onlineSoftmaxRowScalar in sixteen lanes; the tail of a row is masked.
/// Without a mask the first pass only reads.
__attribute__((target("avx512f"))) float
onlineSoftmaxRowAVX512(float *row, const float *mask, int64_t keep,
                       int64_t n, float &m, float &l) {
  __m512 vmx = _mm512_set1_ps(kNegInf);
  for (int64_t j = 0; j < keep; j += 16) {
    __mmask16 lanes = keep - j >= 16 ? 0xffff : (1u << (keep - j)) - 1;
    __m512 x = _mm512_maskz_loadu_ps(lanes, row + j);
    if (mask) {
      x = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, mask + j),
                          _mm512_set1_ps(kLog2e), x);
      _mm512_mask_storeu_ps(row + j, lanes, x);
    }
    vmx = _mm512_mask_max_ps(vmx, lanes, vmx, x);
  }
  float next = std::max(m, _mm512_reduce_max_ps(vmx));
  if (next == kNegInf) {
    std::fill(row, row + n, 0.f);
    return 1.f;
  }
  const __m512 vn = _mm512_set1_ps(next);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t j = 0; j < keep; j += 16) {
    __mmask16 lanes = keep - j >= 16 ? 0xffff : (1u << (keep - j)) - 1;
    __m512 p = _mm512_maskz_mov_ps(
        lanes, exp2NonPositive16(_mm512_sub_ps(
                   _mm512_maskz_loadu_ps(lanes, row + j), vn)));
    _mm512_mask_storeu_ps(row + j, lanes, p);
    vsum = _mm512_add_ps(vsum, p);
  }
  std::fill(row + keep, row + n, 0.f);
  float shrink = std::exp2(m - next);
  l = l * shrink + _mm512_reduce_add_ps(vsum);
  m = next;
  return shrink;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

using RowFn = float (*)(float *, const float *, int64_t, int64_t, float &,
                        float &);

/// The widest row function vectorIsa() allows.
RowFn pickRowFn() {
  switch (vectorIsa()) {
#if defined(__x86_64__)
  case VectorIsa::AVX512:
    return onlineSoftmaxRowAVX512;
  case VectorIsa::AVX2:
    return onlineSoftmaxRowAVX2;
#endif
  default:
    return onlineSoftmaxRowScalar;
  }
}

/// Row `row` of (i1, i2) in operand `which` (0 query, 1 key, 2 value, 3
/// output) by its three of the kernel's `strides`.
template <typename T>
T *operandRow(const int64_t *strides, T *base, int which, int64_t i1,
              int64_t i2, int64_t row) {
  const int64_t *st = strides + 3 * which;
  return base + i1 * st[0] + i2 * st[1] + row * st[2];
}

/// The mask's row for query `row` of (i1, i2), by the MASK_* flags: one
/// row for all queries without MASK_Q.
const float *maskRow(int64_t flags, const float *mask, int64_t b2,
                     int64_t sq, int64_t sk, int64_t i1, int64_t i2,
                     int64_t row) {
  int64_t m2 = flags & TFM_ATTENTION_MASK_B2 ? b2 : 1;
  int64_t mq = flags & TFM_ATTENTION_MASK_Q ? sq : 1;
  int64_t j1 = flags & TFM_ATTENTION_MASK_B1 ? i1 : 0;
  int64_t j2 = flags & TFM_ATTENTION_MASK_B2 ? i2 : 0;
  int64_t js = flags & TFM_ATTENTION_MASK_Q ? row : 0;
  return mask + ((j1 * m2 + j2) * mq + js) * sk;
}

/// Where the rotary tables' row for row `row` of (i1, i2) of a rotated
/// operand of `heads` heads and `rows` rows starts, by the ROTARY_B1, B2
/// and POS flags of `flags`.
int64_t tableOffset(int64_t flags, int64_t dq, int64_t i1, int64_t i2,
                    int64_t row, int64_t heads, int64_t rows) {
  int64_t t2 = flags & TFM_ATTENTION_ROTARY_B2 ? heads : 1,
          ts = flags & TFM_ATTENTION_ROTARY_POS ? rows : 1;
  int64_t j1 = flags & TFM_ATTENTION_ROTARY_B1 ? i1 : 0,
          j2 = flags & TFM_ATTENTION_ROTARY_B2 ? i2 : 0,
          js = flags & TFM_ATTENTION_ROTARY_POS ? row : 0;
  return ((j1 * t2 + j2) * ts + js) * dq;
}

/// Row `x` of D elements rotated into `out` by a row of each table: x·cos
/// + rotate(x)·sin, rotate pairing column j with j + D/2 (or 2j with 2j + 1
/// when interleaved), each half of the pairs computed as the neutral
/// lowering computes it (TfmToLinalg/Rotary.cpp).
void rotateRow(const float *x, const float *cos, const float *sin, int64_t d,
               bool interleaved, float *out) {
  if (interleaved) {
    for (int64_t j = 0; j < d; j += 2) {
      out[j] = x[j] * cos[j] - x[j + 1] * sin[j];
      out[j + 1] = x[j + 1] * cos[j + 1] + x[j] * sin[j + 1];
    }
    return;
  }
  int64_t h = d / 2;
  for (int64_t j = 0; j < h; ++j)
    out[j] = x[j] * cos[j] - x[j + h] * sin[j];
  for (int64_t j = h; j < d; ++j)
    out[j] = x[j] * cos[j] + x[j - h] * sin[j];
}

class AttentionKernel : public Kernel {
public:
  AttentionKernel(std::shared_ptr<Engine> dev, const tfm_abi_kernel_desc_t &d)
      : dev(std::move(dev)), b1(d.params[TFM_ATTENTION_B1]),
        b2(d.params[TFM_ATTENTION_B2]), sq(d.params[TFM_ATTENTION_SQ]),
        sk(d.params[TFM_ATTENTION_SK]), dq(d.params[TFM_ATTENTION_D]),
        dv(d.params[TFM_ATTENTION_DV]), flags(d.params[TFM_ATTENTION_FLAGS]),
        group(flags & TFM_ATTENTION_GROUPED ? d.params[TFM_ATTENTION_KV_GROUP]
                                            : 1),
        scale(static_cast<float>(d.fparams[0])), rowFn(pickRowFn()) {
    std::copy(d.strides, d.strides + 12, strides);
    // Taller query blocks share each packed key and value block among more
    // rows (W8's attention at S = 4096: 229 ms at 64 rows, 216 at 256; 512
    // gains no more), as long as every thread has two tasks.
    int threads = omp_get_max_threads();
    bq = std::min(sq, kMaxQueryBlock);
    while (bq > kMinQueryBlock && b1 * b2 * ((sq + bq - 1) / bq) < 2 * threads)
      bq /= 2;
    bk = std::min(sk, kKeyBlock);
    // Packing the keys and values pays when several query blocks read each
    // block; with one (W3's 32 queries) it is a second parallel region for
    // nothing.
    packs = sq > bq;
    // Every block shape a task meets, each with its pair of GEMMs.
    for (int64_t q0 = 0; q0 < sq; q0 += bq)
      for (int64_t k0 = 0, end = keyEnd(q0); k0 < end; k0 += bk)
        shapeOf(std::min(bq, sq - q0), std::min(bk, end - k0));
    packedValueBytes = (packedValueBytes + 63) / 64 * 64;
    packedBytes = packedValueBytes + (packedKeyBytes + 63) / 64 * 64;
    packed.resize(b1 * (b2 / group) * keyBlocks() * packedBytes + 64);
    while (static_cast<int>(workers.size()) < threads)
      workers.emplace_back(*this);
  }

  int32_t run(void *const *args) override {
    const float *q = static_cast<const float *>(args[0]);
    const float *k = static_cast<const float *>(args[1]);
    const float *v = static_cast<const float *>(args[2]);
    const float *mask = static_cast<const float *>(args[3]);
    float *o = static_cast<float *>(args[4]);
    if (flags & (TFM_ATTENTION_ROTARY_Q | TFM_ATTENTION_ROTARY_K)) {
      cosTable = static_cast<const float *>(args[5]);
      sinTable = static_cast<const float *>(args[6]);
    }
    int threads = omp_get_max_threads();
    while (static_cast<int>(workers.size()) < threads)
      workers.emplace_back(*this);
    // Each key and value head is packed once, for its whole group.
    int64_t kb = keyBlocks(), kvHeads = b2 / group, groups = b1 * b2;
#pragma omp parallel for schedule(static) num_threads(threads) if (packs)
    for (int64_t t = 0; t < (packs ? b1 * kvHeads * kb : 0); ++t) {
      int64_t i1 = t / (kvHeads * kb), h = t / kb % kvHeads, k0 = t % kb * bk;
      workers[omp_get_thread_num()].pack(k, v, i1, h, k0);
    }
    int64_t blocks = (sq + bq - 1) / bq, tasks = groups * blocks;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t t = 0; t < tasks; ++t) {
      int64_t i1 = t / (b2 * blocks), i2 = t / blocks % b2,
              q0 = t % blocks * bq;
      workers[omp_get_thread_num()].task(q, k, v, mask, o, i1, i2, q0);
    }
    return 0;
  }

private:
  /// The GEMMs of a block of `rows` queries over `keys` keys: scores =
  /// q·kᵀ into the worker's block, then out += scores·v.
  struct Shape {
    int64_t rows, keys;
    memory::desc qd, kd, sd, vd, od, scoresScratch, weightedScratch;
    dnnl::matmul scores, weighted;
    /// The keys' and values' blocks in the layouts `scores` and `weighted`
    /// read (Packing).
    memory::desc packedK, packedV;
  };

  /// The per-thread state: the block buffers, the running maximum and sum
  /// of each row, a stream, a scratchpad, and memory objects per shape.
  struct Worker {
    explicit Worker(AttentionKernel &kernel)
        : kernel(kernel), stream(kernel.dev->engine),
          scores(kernel.bq * kernel.bk), out(kernel.bq * kernel.dv),
          queries(kernel.denseQueries() ? kernel.bq * kernel.dq : 0),
          rotatedKeys(kernel.rotates(TFM_ATTENTION_ROTARY_K)
                          ? kernel.bk * kernel.dq
                          : 0),
          m(kernel.bq), l(kernel.bq), scratchpad(kernel.scratchBytes + 64) {}

    void task(const float *q, const float *k, const float *v,
              const float *mask, float *o, int64_t i1, int64_t i2,
              int64_t q0);
    /// Packs the keys and values of key block k0 of (i1, key head h).
    void pack(const float *k, const float *v, int64_t i1, int64_t h,
              int64_t k0);

    AttentionKernel &kernel;
    dnnl::stream stream;
    /// The `rows` keys from k0 of (i1, key head h), rotated into
    /// `rotatedKeys`.
    void rotateKeys(const float *k, int64_t i1, int64_t h, int64_t k0,
                    int64_t rows);

    /// `queries` holds the task's query block, dense (and rotated), when the
    /// keys are packed, since oneDNN's brgemm reads only a dense left
    /// operand, or when the query is rotated; `rotatedKeys` a block of keys
    /// rotated.
    std::vector<float> scores, out, queries, rotatedKeys, m, l;
    std::vector<char> scratchpad;
    std::map<const Shape *, std::vector<memory>> bound;
  };

  /// One past the last key a query block computes: every key, or with
  /// causal, the end of the key block that holds its last query's
  /// diagonal. Whole blocks keep the packed values one layout per block
  /// (the keys past the diagonal are dropped by the softmax; at S = 4096
  /// they add 12% to a causal attention's work).
  int64_t keyEnd(int64_t q0) const {
    if (!(flags & TFM_ATTENTION_CAUSAL))
      return sk;
    int64_t last = std::min(sq, q0 + bq);
    return std::min(sk, (last + bk - 1) / bk * bk);
  }

  int64_t keyBlocks() const { return (sk + bk - 1) / bk; }

  bool rotates(int64_t which) const { return flags & which; }
  bool denseQueries() const { return packs || rotates(TFM_ATTENTION_ROTARY_Q); }
  /// The keys' row stride in the block GEMM and its packing: dense when the
  /// keys are rotated into a worker's block first.
  int64_t keyRowStride() const {
    return rotates(TFM_ATTENTION_ROTARY_K) ? dq : strides[5];
  }

  /// The tables' row (cos, then sin) for row `row` of (i1, i2) of a rotated
  /// operand of `heads` heads and `rows` rows.
  std::pair<const float *, const float *> tableRow(int64_t i1, int64_t i2,
                                                   int64_t row, int64_t heads,
                                                   int64_t rows) const {
    int64_t at = tableOffset(flags, dq, i1, i2, row, heads, rows);
    return {cosTable + at, sinTable + at};
  }

  /// Row `row` of (i1, i2) in operand `which` (0 query, 1 key, 2 value,
  /// 3 output), by its three strides; i2 is a key head for keys and values.
  template <typename T>
  T *rowOf(T *base, int which, int64_t i1, int64_t i2, int64_t row) const {
    return operandRow(strides, base, which, i1, i2, row);
  }

  /// Key block k0 of (i1, key head h), packed.
  char *packedBlock(int64_t i1, int64_t h, int64_t k0) const {
    // At 64 bytes, as oneDNN allocates its own packed buffers.
    auto base = reinterpret_cast<uintptr_t>(packed.data());
    base = (base + 63) / 64 * 64;
    return reinterpret_cast<char *>(base) +
           ((i1 * (b2 / group) + h) * keyBlocks() + k0 / bk) * packedBytes;
  }

  const Shape &shapeOf(int64_t rows, int64_t keys) {
    auto found = shapes.find({rows, keys});
    if (found != shapes.end())
      return found->second;
    auto &eng = dev->engine;
    Shape s{rows, keys, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
    s.qd = memory::desc({rows, dq}, dt::f32,
                        memory::dims{denseQueries() ? dq : strides[2], 1});
    s.kd = memory::desc({dq, keys}, dt::f32, memory::dims{1, keyRowStride()});
    s.sd = memory::desc({rows, keys}, dt::f32, memory::dims{keys, 1});
    s.vd = memory::desc({keys, dv}, dt::f32, memory::dims{strides[8], 1});
    s.od = memory::desc({rows, dv}, dt::f32, memory::dims{dv, 1});
    // The scores come out of the GEMM scaled, and in base 2, so the
    // softmax's first pass only reads them when there is no mask.
    dnnl::primitive_attr scaled;
    scaled.set_output_scales(0, {scale * kLog2e});
    scaled.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc sp(
        dnnl::matmul::desc(s.qd, layoutFor(keyPacking, keys, s.kd), s.sd),
        scaled, eng);
    dnnl::post_ops accumulate;
    accumulate.append_sum(1.f);
    dnnl::primitive_attr summing;
    summing.set_post_ops(accumulate);
    summing.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc wp(
        dnnl::matmul::desc(s.sd, layoutFor(valuePacking, keys, s.vd), s.od),
        summing, eng);
    s.packedK = sp.weights_desc();
    s.packedV = wp.weights_desc();
    if (packs) {
      remember(keyPacking, keys, s.kd, s.packedK, packedKeyBytes);
      remember(valuePacking, keys, s.vd, s.packedV, packedValueBytes);
    }
    s.scores = dnnl::matmul(sp);
    s.weighted = dnnl::matmul(wp);
    s.scoresScratch = sp.scratchpad_desc();
    s.weightedScratch = wp.scratchpad_desc();
    scratchBytes = std::max({scratchBytes, s.scoresScratch.get_size(),
                             s.weightedScratch.get_size()});
    return shapes.emplace(std::make_pair(rows, keys), std::move(s))
        .first->second;
  }

  /// A block of `keys` keys or values packed once per run: oneDNN then runs
  /// q·kᵀ and p·v as brgemms, where it would pack them at every block GEMM
  /// (p·v at 256 x 512 blocks: 204 against 124 GFLOP/s per core on strided
  /// values; q·kᵀ, with the query block dense too: 143 → 85 µs).
  struct Packing {
    memory::desc strided, layout;
    dnnl::reorder pack;
  };
  /// The layout a block GEMM reads `strided` in: its own choice when the
  /// blocks are packed, one per block length whatever the query rows.
  memory::desc layoutFor(const std::map<int64_t, Packing> &packing,
                         int64_t keys, const memory::desc &strided) const {
    if (!packs)
      return strided;
    auto known = packing.find(keys);
    return known != packing.end()
               ? known->second.layout
               : memory::desc(strided.dims(), dt::f32,
                              memory::format_tag::any);
  }

  void remember(std::map<int64_t, Packing> &packing, int64_t keys,
                const memory::desc &strided, const memory::desc &layout,
                size_t &bytes) {
    if (packing.count(keys))
      return;
    auto &eng = dev->engine;
    packing.emplace(keys, Packing{strided, layout,
                                  dnnl::reorder(dnnl::reorder::primitive_desc(
                                      eng, strided, eng, layout))});
    bytes = std::max(bytes, layout.get_size());
  }

  std::shared_ptr<Engine> dev;
  int64_t b1, b2, sq, sk, dq, dv, flags;
  /// The query heads that read each key and value head.
  int64_t group;
  int64_t strides[12];
  float scale;
  /// The rotary tables of the run (ROTARY_Q, ROTARY_K).
  const float *cosTable = nullptr, *sinTable = nullptr;
  RowFn rowFn;
  int64_t bq, bk;
  size_t scratchBytes = 0;
  std::map<std::pair<int64_t, int64_t>, Shape> shapes;
  std::map<int64_t, Packing> keyPacking, valuePacking;
  /// Every (b1, b2, key block)'s values and then keys, packed, packedBytes
  /// apart.
  size_t packedValueBytes = 0, packedKeyBytes = 0, packedBytes = 0;
  bool packs = false;
  std::vector<char> packed;
  std::vector<Worker> workers;
};

void AttentionKernel::Worker::pack(const float *k, const float *v, int64_t i1,
                                   int64_t h, int64_t k0) {
  const AttentionKernel &a = kernel;
  int64_t keys = std::min(a.bk, a.sk - k0);
  auto &eng = a.dev->engine;
  char *block = a.packedBlock(i1, h, k0);
  const Packing &pv = a.valuePacking.at(keys), &pk = a.keyPacking.at(keys);
  memory vFrom(pv.strided, eng, const_cast<float *>(a.rowOf(v, 2, i1, h, k0)));
  memory vTo(pv.layout, eng, block);
  pv.pack.execute(stream, vFrom, vTo);
  const float *from = a.rowOf(k, 1, i1, h, k0);
  if (a.rotates(TFM_ATTENTION_ROTARY_K)) {
    rotateKeys(k, i1, h, k0, keys);
    from = rotatedKeys.data();
  }
  memory kFrom(pk.strided, eng, const_cast<float *>(from));
  memory kTo(pk.layout, eng, block + a.packedValueBytes);
  pk.pack.execute(stream, kFrom, kTo);
  stream.wait();
}

void AttentionKernel::Worker::rotateKeys(const float *k, int64_t i1, int64_t h,
                                         int64_t k0, int64_t rows) {
  const AttentionKernel &a = kernel;
  bool interleaved = a.flags & TFM_ATTENTION_ROTARY_INTERLEAVED;
  for (int64_t r = 0; r < rows; ++r) {
    auto [cos, sin] = a.tableRow(i1, h, k0 + r, a.b2 / a.group, a.sk);
    rotateRow(a.rowOf(k, 1, i1, h, k0 + r), cos, sin, a.dq, interleaved,
              rotatedKeys.data() + r * a.dq);
  }
}

void AttentionKernel::Worker::task(const float *q, const float *k,
                                   const float *v, const float *mask,
                                   float *o, int64_t i1, int64_t i2,
                                   int64_t q0) {
  const AttentionKernel &a = kernel;
  const int64_t *st = a.strides;
  int64_t rows = std::min(a.bq, a.sq - q0), end = a.keyEnd(q0);
  const float *qb = a.rowOf(q, 0, i1, i2, q0);
  const float *maskRows = nullptr;
  int64_t maskRowStride = 0;
  if (a.flags & TFM_ATTENTION_HAS_MASK) {
    maskRows = maskRow(a.flags, mask, a.b2, a.sq, a.sk, i1, i2, q0);
    if (a.flags & TFM_ATTENTION_MASK_Q)
      maskRowStride = a.sk;
  }
  if (a.rotates(TFM_ATTENTION_ROTARY_Q)) {
    bool interleaved = a.flags & TFM_ATTENTION_ROTARY_INTERLEAVED;
    for (int64_t r = 0; r < rows; ++r) {
      auto [cos, sin] = a.tableRow(i1, i2, q0 + r, a.b2, a.sq);
      rotateRow(qb + r * st[2], cos, sin, a.dq, interleaved,
                queries.data() + r * a.dq);
    }
  } else if (a.packs) {
    for (int64_t r = 0; r < rows; ++r)
      std::copy(qb + r * st[2], qb + r * st[2] + a.dq,
                queries.begin() + r * a.dq);
  }
  std::fill(out.begin(), out.begin() + rows * a.dv, 0.f);
  std::fill(m.begin(), m.begin() + rows, kNegInf);
  std::fill(l.begin(), l.begin() + rows, 0.f);
  bool causal = a.flags & TFM_ATTENTION_CAUSAL;
  for (int64_t k0 = 0; k0 < end; k0 += a.bk) {
    int64_t keys = std::min(a.bk, end - k0);
    const Shape &s = a.shapes.at({rows, keys});
    std::vector<memory> &mem = bound[&s];
    if (mem.empty()) {
      auto &eng = a.dev->engine;
      mem = {memory(s.qd, eng, DNNL_MEMORY_NONE),
             memory(s.packedK, eng, DNNL_MEMORY_NONE),
             memory(s.sd, eng, scores.data()),
             memory(s.packedV, eng, DNNL_MEMORY_NONE),
             memory(s.od, eng, out.data()),
             memory(s.scoresScratch, eng, scratchpad.data()),
             memory(s.weightedScratch, eng, scratchpad.data())};
    }
    mem[0].set_data_handle(a.denseQueries() ? queries.data()
                                            : const_cast<float *>(qb));
    if (a.packs) {
      char *block = a.packedBlock(i1, i2 / a.group, k0);
      mem[1].set_data_handle(block + a.packedValueBytes);
      mem[3].set_data_handle(block);
    } else {
      // Unpacked, a task reads each key block once, so rotated keys are
      // rotated here; each head of a group rotates them again, which costs
      // about 3/(2·rows) of the block's product.
      int64_t h = i2 / a.group;
      const float *kb = a.rowOf(k, 1, i1, h, k0);
      if (a.rotates(TFM_ATTENTION_ROTARY_K)) {
        rotateKeys(k, i1, h, k0, keys);
        kb = rotatedKeys.data();
      }
      mem[1].set_data_handle(const_cast<float *>(kb));
      mem[3].set_data_handle(const_cast<float *>(a.rowOf(v, 2, i1, h, k0)));
    }
    s.scores.execute(stream, {{DNNL_ARG_SRC, mem[0]},
                              {DNNL_ARG_WEIGHTS, mem[1]},
                              {DNNL_ARG_DST, mem[2]},
                              {DNNL_ARG_SCRATCHPAD, mem[5]}});
    for (int64_t r = 0; r < rows; ++r) {
      int64_t keep = keys;
      if (causal)
        keep = std::clamp<int64_t>(q0 + r + 1 - k0, 0, keys);
      const float *maskRow =
          maskRows ? maskRows + r * maskRowStride + k0 : nullptr;
      float shrink = a.rowFn(scores.data() + r * keys, maskRow, keep, keys,
                             m[r], l[r]);
      if (shrink != 1.f)
        for (int64_t c = 0; c < a.dv; ++c)
          out[r * a.dv + c] *= shrink;
    }
    s.weighted.execute(stream, {{DNNL_ARG_SRC, mem[2]},
                                {DNNL_ARG_WEIGHTS, mem[3]},
                                {DNNL_ARG_DST, mem[4]},
                                {DNNL_ARG_SCRATCHPAD, mem[6]}});
  }
  stream.wait();
  float *ob = a.rowOf(o, 3, i1, i2, q0);
  for (int64_t r = 0; r < rows; ++r) {
    // A row that kept no key divides 0 by 0, as the unfused softmax does.
    float inv = 1.f / l[r];
    for (int64_t c = 0; c < a.dv; ++c)
      ob[r * st[11] + c] = out[r * a.dv + c] * inv;
  }
}

/// The one or few queries of a decoding step over a cache: no blocks and no
/// GEMM calls (a dispatch costs more than such a block's work), each key
/// and value head read once for every query row of its group, and only as
/// far as the last key any of those rows sees. A mask's trailing −inf (a
/// cache's positions not yet written) and the causal triangle cut the rows
/// short: an excluded key's weight is exactly 0, unless a row excludes every
/// key, which divides 0 by 0 either way. So a step at position p reads p + 1
/// positions of the cache, not all it was compiled for. Keys may come as kᵀ
/// (KEYS_TRANSPOSED), the layout a decoder's key cache is often kept in, for
/// which the scores of consecutive keys are consecutive lanes.
class FewQueryAttention : public Kernel {
public:
  explicit FewQueryAttention(const tfm_abi_kernel_desc_t &d)
      : b1(d.params[TFM_ATTENTION_B1]), b2(d.params[TFM_ATTENTION_B2]),
        sq(d.params[TFM_ATTENTION_SQ]), sk(d.params[TFM_ATTENTION_SK]),
        dq(d.params[TFM_ATTENTION_D]), dv(d.params[TFM_ATTENTION_DV]),
        flags(d.params[TFM_ATTENTION_FLAGS]),
        group(flags & TFM_ATTENTION_GROUPED ? d.params[TFM_ATTENTION_KV_GROUP]
                                            : 1),
        scale(static_cast<float>(d.fparams[0]) * kLog2e), rowFn(pickRowFn()),
        isa(vectorIsa()) {
    std::copy(d.strides, d.strides + 12, strides);
  }

  int32_t run(void *const *args) override {
    Args a{static_cast<const float *>(args[0]),
           static_cast<const float *>(args[1]),
           static_cast<const float *>(args[2]),
           static_cast<const float *>(args[3]), static_cast<float *>(args[4]),
           nullptr, nullptr};
    if (flags & TFM_ATTENTION_ROTARY_Q) {
      a.cos = static_cast<const float *>(args[5]);
      a.sin = static_cast<const float *>(args[6]);
    }
    // A task is a key head and some of its group's query heads: the whole
    // group, unless that leaves a thread without two tasks.
    const int threads = omp_get_max_threads();
    const int64_t heads = b1 * (b2 / group);
    const int64_t parts =
        std::clamp<int64_t>((2 * threads + heads - 1) / heads, 1, group);
    const int64_t perPart = (group + parts - 1) / parts;
    if (static_cast<int>(scratch.size()) < threads)
      scratch.resize(threads);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < heads * parts; ++t) {
      int64_t i1 = t / parts / (b2 / group), h = t / parts % (b2 / group);
      int64_t first = h * group + t % parts * perPart,
              last = std::min((h + 1) * group, first + perPart);
      if (first < last)
        task(a, i1, h, first, last, scratch[omp_get_thread_num()]);
    }
    return 0;
  }

private:
  struct Args {
    const float *q, *k, *v, *mask;
    float *o;
    const float *cos, *sin;
  };
  /// A thread's rows: queries (rotated, dense), scores, outputs.
  struct Scratch {
    std::vector<float> q, s, out, l;
    std::vector<int64_t> keep;
    std::vector<const float *> mask;
  };

  template <typename T>
  T *rowOf(T *base, int which, int64_t i1, int64_t i2, int64_t row) const {
    return operandRow(strides, base, which, i1, i2, row);
  }

  void task(const Args &a, int64_t i1, int64_t h, int64_t first, int64_t last,
            Scratch &w) const {
#if defined(__x86_64__)
    if (isa == VectorIsa::AVX512)
      return taskAvx512(a, i1, h, first, last, w);
    if (isa == VectorIsa::AVX2)
      return taskAvx2(a, i1, h, first, last, w);
#endif
    taskBody(a, i1, h, first, last, w);
  }

#if defined(__x86_64__)
  // The body's loops, vectorized for each ISA by the compiler: they run
  // along keys or along columns, never across lanes.
  __attribute__((target("avx512f"))) void
  taskAvx512(const Args &a, int64_t i1, int64_t h, int64_t first,
             int64_t last, Scratch &w) const {
    taskBody(a, i1, h, first, last, w);
  }
  __attribute__((target("avx2,fma"))) void
  taskAvx2(const Args &a, int64_t i1, int64_t h, int64_t first, int64_t last,
           Scratch &w) const {
    taskBody(a, i1, h, first, last, w);
  }
#endif

  /// Query heads [first, last) of key head h, every query row of each.
  __attribute__((always_inline)) inline void
  taskBody(const Args &a, int64_t i1, int64_t h, int64_t first, int64_t last,
           Scratch &w) const {
    const int64_t rows = (last - first) * sq;
    w.q.resize(rows * dq);
    w.out.assign(rows * dv, 0.f);
    w.l.assign(rows, 0.f);
    w.keep.resize(rows);
    w.mask.assign(rows, nullptr);
    const bool causal = flags & TFM_ATTENTION_CAUSAL;
    int64_t keys = 0;
    for (int64_t i2 = first; i2 < last; ++i2)
      for (int64_t r = 0; r < sq; ++r) {
        const int64_t t = (i2 - first) * sq + r;
        const float *q = rowOf(a.q, 0, i1, i2, r);
        float *qt = w.q.data() + t * dq;
        if (flags & TFM_ATTENTION_ROTARY_Q) {
          auto [cos, sin] = tableRow(a, i1, i2, r);
          rotateRow(q, cos, sin, dq, flags & TFM_ATTENTION_ROTARY_INTERLEAVED,
                    qt);
        } else {
          std::copy(q, q + dq, qt);
        }
        // The scores come out scaled and in base 2, as the blocks' GEMMs
        // write them.
        for (int64_t c = 0; c < dq; ++c)
          qt[c] *= scale;
        int64_t keep = causal ? std::min(sk, r + 1) : sk;
        if (flags & TFM_ATTENTION_HAS_MASK) {
          const float *m = maskRow(flags, a.mask, b2, sq, sk, i1, i2, r);
          while (keep > 0 && m[keep - 1] == kNegInf)
            --keep;
          w.mask[t] = m;
        }
        w.keep[t] = keep;
        keys = std::max(keys, keep);
      }
    w.s.assign(rows * keys, 0.f);
    float *s = w.s.data();
    if (flags & TFM_ATTENTION_KEYS_TRANSPOSED) {
      // kᵀ's rows: column c of every key at once, each read once.
      for (int64_t c = 0; c < dq; ++c) {
        const float *kc = rowOf(a.k, 1, i1, h, c);
        for (int64_t t = 0; t < rows; ++t) {
          const float qc = w.q[t * dq + c];
          float *st = s + t * keys;
          for (int64_t j = 0; j < keys; ++j)
            st[j] += qc * kc[j];
        }
      }
    } else {
      for (int64_t j = 0; j < keys; ++j) {
        const float *kj = rowOf(a.k, 1, i1, h, j);
        for (int64_t t = 0; t < rows; ++t)
          s[t * keys + j] = dot(w.q.data() + t * dq, kj, dq);
      }
    }
    for (int64_t t = 0; t < rows; ++t) {
      float m = kNegInf;
      rowFn(s + t * keys, w.mask[t], w.keep[t], keys, m, w.l[t]);
    }
    // Past a row's keep its weights are 0.
    for (int64_t j = 0; j < keys; ++j) {
      const float *vj = rowOf(a.v, 2, i1, h, j);
      for (int64_t t = 0; t < rows; ++t) {
        const float p = s[t * keys + j];
        float *ot = w.out.data() + t * dv;
        for (int64_t c = 0; c < dv; ++c)
          ot[c] += p * vj[c];
      }
    }
    for (int64_t i2 = first; i2 < last; ++i2)
      for (int64_t r = 0; r < sq; ++r) {
        const int64_t t = (i2 - first) * sq + r;
        // A row that kept no key divides 0 by 0, as the unfused softmax does.
        const float inv = 1.f / w.l[t];
        float *o = rowOf(a.o, 3, i1, i2, r);
        for (int64_t c = 0; c < dv; ++c)
          o[c] = w.out[t * dv + c] * inv;
      }
  }

  /// The partial sums dot keeps, one vector of AVX-512 (two of AVX2).
  static constexpr int64_t kLanes = 16;

  /// q·k in kLanes partial sums, which the compiler keeps in lanes.
  __attribute__((always_inline)) static inline float
  dot(const float *q, const float *k, int64_t n) {
    float part[kLanes] = {};
    int64_t c = 0;
    for (; c + kLanes <= n; c += kLanes)
      for (int64_t u = 0; u < kLanes; ++u)
        part[u] += q[c + u] * k[c + u];
    for (; c < n; ++c)
      part[0] += q[c] * k[c];
    float sum = 0.f;
    for (float p : part)
      sum += p;
    return sum;
  }

  std::pair<const float *, const float *>
  tableRow(const Args &a, int64_t i1, int64_t i2, int64_t row) const {
    int64_t at = tableOffset(flags, dq, i1, i2, row, b2, sq);
    return {a.cos + at, a.sin + at};
  }

  int64_t b1, b2, sq, sk, dq, dv, flags, group;
  int64_t strides[12];
  /// scale·log2(e): the softmax works in base 2 (onlineSoftmaxRow*).
  float scale;
  RowFn rowFn;
  VectorIsa isa;
  std::vector<Scratch> scratch;
};

} // namespace

std::unique_ptr<Kernel>
tfm::runtime::cpu::makeAttentionKernel(std::shared_ptr<Engine> engine,
                                       const tfm_abi_kernel_desc_t &d) {
  // The rotated keys are the blocks' to rotate as they load them.
  if (d.params[TFM_ATTENTION_SQ] <= TFM_ATTENTION_FEW_QUERIES &&
      !(d.params[TFM_ATTENTION_FLAGS] & TFM_ATTENTION_ROTARY_K))
    return std::make_unique<FewQueryAttention>(d);
  return std::make_unique<AttentionKernel>(std::move(engine), d);
}
