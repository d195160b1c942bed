//===- WeightOnlyLinear.cpp - QUANTIZED_LINEAR on a float input -----------===//
//
// A linear whose weights alone are quantized (MatMulNBits, a QDQ weight):
// 4- or 8-bit values with a scale and zero point per tensor, per row or per
// row and block of K.
//
// Decoding multiplies one row (a few, for a batch) by weights far larger
// than any cache, so its time is the weights' bytes over the memory
// bandwidth. The weights are repacked once, at their first run, into the
// fewest bytes (two 4-bit values a byte; tfm buffers hold one a byte), and
// a call reads each byte once for every four rows of x, turning it into
// floats in registers:
//
//   y[m, n] = Σ_b s[n,b] · (Σ_{k∈b} u[n,k]·x[m,k] − z[n,b] · Σ_{k∈b} x[m,k])
//
// with u the weight shifted, its zero point with it, to a nibble (4 bits)
// or a signed byte (8 bits), so that no zero point is subtracted per
// weight: each block's sum of x is taken once per call, and the correction
// is a short dot product over the row's blocks. Signed bytes, rather than
// unsigned ones, keep the correction, and the cancellation it brings in
// f32, small.
//
// On AVX-512, 4-bit weights in float are laid out in tiles of 16 columns,
// a vector's lanes, each dword of a tile's 64-byte chunk holding eight k
// of its column. A nibble then becomes a float without a conversion:
// shifted to the top of the mantissa and OR-ed into 1.0's bits, it reads
// 1 + u/16. With S_b a block's Σ x·(1 + u/16) = X_b + Σ u·x / 16,
//
//   y[m, n] = Σ_b s[n,b] · (16·S_b − (16 + z[n,b])·X_b)
//
// which costs a shift, a ternary logic op and an FMA per 16 weights and
// row of x. Along K, in the rows' layout, each 16 had cost a zero
// extension, a vpermps through the block's table (i − z)·s and an FMA, and
// bound the body by its instructions at about 19 G weights a second a
// core, where DRAM gives 2 cores about 60.
//
// More rows (a prompt) are compute-bound: each thread dequantizes a panel of
// weight rows to f32, where it stays in cache, and multiplies it with
// oneDNN's sgemm.
//
// A blocked input (BLOCKED_INPUT: MatMulNBits' accuracy_level 4) is x with
// each block rounded to symmetric int8, x' = sx·q. Every body computes that
// x' in floats, except for 4-bit weights in blocks of 32 or of a multiple
// of 64, which multiply the integers instead: with VNNI's vpdpbusd (nibble
// · int8 summed four at a time in 32 bits), about a fifth of the float
// body's instructions per weight; on AVX2 with vpmaddubsw (whose pair sums
// of at most 2·15·127 cannot saturate) and vpmaddwd, half of them:
//
//   y[m, n] = Σ_b s[n,b]·sx[m,b] · Σ_{k∈b} u·q  −  Σ_b s·z · sx[m,b]·Q[m,b]
//
// with Q the block's Σ q, exact in integers.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

#include <fmt/format.h>
#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>

using namespace tfm::runtime::cpu;

namespace {

/// K is taken in groups of 32: 16 bytes of 4-bit weights, byte i holding
/// columns i (low nibble) and 16 + i (high), so that each half of a group
/// is one 16-lane vector of x.
constexpr int64_t kGroup = 32;
/// At most this many rows of x share one pass over the weights; more rows
/// than kGemvRows take the sgemm panels.
constexpr int64_t kRowsPerPass = 4, kGemvRows = 16;
/// Weight rows a thread dequantizes at once for sgemm: 128 rows of K f32
/// stay in a core's L2 for K up to 2048.
constexpr int64_t kPanelRows = 128;

/// The weights of one tensor as the kernel reads them.
struct PackedWeights {
  /// [N, Kp/2] (4-bit) or [N, Kp] bytes; in tiles (Shape::tiles), [tiles,
  /// Kp/8, 16] dwords of eight nibbles, k = 8c + j at bits 4j.
  std::vector<uint8_t> values;
  /// [N, blocks], 0 past K, and 16 more; in tiles, [tiles, blocks, 16], 0
  /// past N.
  std::vector<float> scales;
  std::vector<int16_t> zeros;  ///< [N, blocks]: z, shifted as u is; and 16
  std::vector<float> scaledZeros; ///< [N, blocks]: s·z, and 16 (float bodies)
  /// [N, blocks]: z as a byte (4 bits: 0..15), for the integer bodies,
  /// which take s·z from the scales they have just read: 1 byte a block
  /// from memory instead of 4. In tiles, [tiles, blocks, 16].
  std::vector<uint8_t> zeroBytes;
};

/// How a packed byte holds weights: two unsigned nibbles, or one signed
/// value.
enum class Format { U4, S8 };

struct Shape {
  int64_t k, n;
  int64_t kp;     ///< K rounded up to whole groups
  int64_t block;  ///< columns per scale: 16, or a multiple of 32
  int64_t blocks; ///< scales per row of the packed form
  Format format;
  /// The weights are in tiles of 16 columns (see the file's comment).
  bool tiles = false;
  int64_t rowBytes() const { return format == Format::U4 ? kp / 2 : kp; }
  int64_t tileCount() const { return (n + 15) / 16; }
};

/// The blocks of the halves of group 0, 1, ... in turn, without a division
/// per group: a group lies in one block, or (blocks of 16) its halves in
/// two.
class BlockWalk {
public:
  explicit BlockWalk(const Shape &sh)
      : half(sh.block == 16), perBlock(half ? 1 : sh.block / kGroup) {}
  int64_t lo() const { return half ? 2 * group : block; }
  int64_t hi() const { return half ? 2 * group + 1 : block; }
  void next() {
    ++group;
    if (!half && --left == 0) {
      ++block;
      left = perBlock;
    }
  }

private:
  bool half;
  int64_t perBlock, group = 0, block = 0, left = perBlock;
};

/// Σ_b (s·z)·X_b for one row of the weights: the zero points' share, from
/// the row's PackedWeights::scaledZeros.
float zeroPointTerm(const float *zs, const float *blockSums, int64_t blocks) {
  float t = 0.f;
  for (int64_t b = 0; b < blocks; ++b)
    t += zs[b] * blockSums[b];
  return t;
}

/// The group g of a packed row, unsigned, as floats: lo holds its columns
/// [0, 16), hi [16, 32).
inline void groupScalar(const uint8_t *row, int64_t g, Format format, float *lo,
                        float *hi) {
  if (format == Format::U4) {
    const uint8_t *p = row + g * 16;
    for (int i = 0; i < 16; ++i) {
      lo[i] = static_cast<float>(p[i] & 15);
      hi[i] = static_cast<float>(p[i] >> 4);
    }
    return;
  }
  const uint8_t *p = row + g * kGroup;
  for (int i = 0; i < 16; ++i) {
    lo[i] = static_cast<float>(int8_t(p[i]));
    hi[i] = static_cast<float>(int8_t(p[16 + i]));
  }
}

/// Σ_k (u − z)·s·x over the row `n` for `rows` rows of x: each block's
/// sum scaled by its scale, less the zero points' share: the portable body.
void dotsScalar(const Shape &sh, const PackedWeights &pw, int64_t n,
                const float *x, const float *blockSums, int64_t rows,
                float *out) {
  const uint8_t *row = pw.values.data() + n * sh.rowBytes();
  const float *s = pw.scales.data() + n * sh.blocks;
  float lo[16], hi[16];
  for (int64_t m = 0; m < rows; ++m)
    out[m] = 0.f;
  BlockWalk walk(sh);
  for (int64_t g = 0; g < sh.kp / kGroup; ++g, walk.next()) {
    groupScalar(row, g, sh.format, lo, hi);
    float sLo = s[walk.lo()], sHi = s[walk.hi()];
    for (int64_t m = 0; m < rows; ++m) {
      const float *xg = x + m * sh.kp + g * kGroup;
      float a = 0.f, c = 0.f;
      for (int i = 0; i < 16; ++i) {
        a += lo[i] * xg[i];
        c += hi[i] * xg[16 + i];
      }
      out[m] += a * sLo + c * sHi;
    }
  }
  const float *zs = pw.scaledZeros.data() + n * sh.blocks;
  for (int64_t m = 0; m < rows; ++m)
    out[m] -= zeroPointTerm(zs, blockSums + m * sh.blocks, sh.blocks);
}

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from a vector they leave undefined on
// purpose (`__m512 __Y = __Y`), which its own warnings then report.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// One of the eight weights that each dword of a tile's chunk holds, k =
/// 8c + J, as the float 1 + u/16: the nibble shifted to the top of the
/// mantissa and OR-ed into 1.0's bits (ternary logic 0xEA: a & b | c).
template <int J>
__attribute__((target("avx512f"), always_inline)) inline __m512
tileNibbleAvx512(__m512i v) {
  __m512i t;
  if constexpr (J < 5)
    t = _mm512_slli_epi32(v, 19 - 4 * J);
  else
    t = _mm512_srli_epi32(v, 4 * J - 19);
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
      t, _mm512_set1_epi32(0x00780000), _mm512_set1_epi32(0x3f800000), 0xea));
}

/// A tile's chunk (64 bytes: k = 8c .. 8c + 7 of its 16 columns) as eight
/// vectors of 1 + u/16, w[j] holding k = 8c + j.
__attribute__((target("avx512f"), always_inline)) inline void
tileChunkAvx512(const uint8_t *chunk, __m512 *w) {
  const __m512i v = _mm512_loadu_si512(chunk);
  w[0] = tileNibbleAvx512<0>(v);
  w[1] = tileNibbleAvx512<1>(v);
  w[2] = tileNibbleAvx512<2>(v);
  w[3] = tileNibbleAvx512<3>(v);
  w[4] = tileNibbleAvx512<4>(v);
  w[5] = tileNibbleAvx512<5>(v);
  w[6] = tileNibbleAvx512<6>(v);
  w[7] = tileNibbleAvx512<7>(v);
}

/// The dots of one tile (16 columns) with R rows of x, into out [R, 16]:
/// Σ_b s·(16·S_b − (16 + z)·X_b), S_b the block's Σ x·(1 + u/16) (see the
/// file's comment). Few rows keep several accumulators a row, so that
/// consecutive FMAs do not wait on each other.
template <int R>
__attribute__((target("avx512f"))) void
tileDotsAvx512U4(const Shape &sh, const PackedWeights &pw, int64_t tile,
                 const float *x, const float *blockSums, float *out) {
  constexpr int A = R == 1 ? 4 : R < 4 ? 2 : 1;
  const int64_t chunks = sh.kp / 8, perBlock = sh.block / 8;
  const uint8_t *p = pw.values.data() + tile * chunks * 64;
  const float *s = pw.scales.data() + tile * sh.blocks * 16;
  const uint8_t *z = pw.zeroBytes.data() + tile * sh.blocks * 16;
  __m512 total[R];
  for (int m = 0; m < R; ++m)
    total[m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < sh.blocks; ++b) {
    __m512 a[R][A];
    for (int m = 0; m < R; ++m)
      for (int i = 0; i < A; ++i)
        a[m][i] = _mm512_setzero_ps();
    const int64_t c1 = std::min(chunks, (b + 1) * perBlock);
    for (int64_t c = b * perBlock; c < c1; ++c) {
      __m512 w[8];
      tileChunkAvx512(p + c * 64, w);
      for (int j = 0; j < 8; ++j)
        for (int m = 0; m < R; ++m)
          a[m][j % A] = _mm512_fmadd_ps(
              w[j], _mm512_set1_ps(x[m * sh.kp + c * 8 + j]), a[m][j % A]);
    }
    const __m512 scale = _mm512_loadu_ps(s + b * 16);
    const __m512 zero = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(z + b * 16))));
    for (int m = 0; m < R; ++m) {
      __m512 sum = a[m][0];
      for (int i = 1; i < A; ++i)
        sum = _mm512_add_ps(sum, a[m][i]);
      const float xb = blockSums[m * sh.blocks + b];
      // 16·S − (16 + z)·X, (16 + z)·X rounded once.
      __m512 t = _mm512_fmsub_ps(
          sum, _mm512_set1_ps(16.f),
          _mm512_fmadd_ps(zero, _mm512_set1_ps(xb), _mm512_set1_ps(16.f * xb)));
      total[m] = _mm512_fmadd_ps(t, scale, total[m]);
    }
  }
  for (int m = 0; m < R; ++m)
    _mm512_storeu_ps(out + 16 * m, total[m]);
}

/// A tile's w' into `out` ([kp, ld], its 16 columns at out[k·ld, +16)) for
/// the sgemm panels: u − z exact in floats, times s, as the portable
/// body's (i − z)·s rounds.
__attribute__((target("avx512f"))) void
dequantizeTileAvx512U4(const Shape &sh, const PackedWeights &pw, int64_t tile,
                       float *out, int64_t ld) {
  const int64_t chunks = sh.kp / 8, perBlock = sh.block / 8;
  const uint8_t *p = pw.values.data() + tile * chunks * 64;
  const float *s = pw.scales.data() + tile * sh.blocks * 16;
  const uint8_t *z = pw.zeroBytes.data() + tile * sh.blocks * 16;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c / perBlock;
    const __m512 scale = _mm512_loadu_ps(s + b * 16);
    // 16·(1 + u/16) − (16 + z) = u − z.
    const __m512 shift = _mm512_add_ps(
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i *>(z + b * 16)))),
        _mm512_set1_ps(16.f));
    __m512 w[8];
    tileChunkAvx512(p + c * 64, w);
    for (int j = 0; j < 8; ++j)
      _mm512_storeu_ps(out + (c * 8 + j) * ld,
                       _mm512_mul_ps(_mm512_fmsub_ps(w[j], _mm512_set1_ps(16.f),
                                                     shift),
                                     scale));
  }
}

/// dotsScalar for 8-bit weights in sixteen lanes, R rows of x at once: a
/// sum per block, scaled, and the zero points' share subtracted after.
template <int R, bool HalfBlocks>
__attribute__((target("avx512f"))) void
dotsAvx512S8(const Shape &sh, const PackedWeights &pw, int64_t n,
             const float *x, const float *blockSums, float *out) {
  const uint8_t *row = pw.values.data() + n * sh.rowBytes();
  const float *s = pw.scales.data() + n * sh.blocks;
  __m512 acc[R], accHi[R];
  for (int m = 0; m < R; ++m)
    acc[m] = accHi[m] = _mm512_setzero_ps();
  const int64_t groups = sh.kp / kGroup;
  const int64_t perBlock = HalfBlocks ? 1 : sh.block / kGroup;
  for (int64_t g0 = 0, b = 0; g0 < groups; g0 += perBlock, ++b) {
    __m512 lo[R], hi[R];
    for (int m = 0; m < R; ++m)
      lo[m] = hi[m] = _mm512_setzero_ps();
    const int64_t g1 = std::min(groups, g0 + perBlock);
    for (int64_t g = g0; g < g1; ++g) {
      const auto *p = reinterpret_cast<const __m128i *>(row + g * kGroup);
      __m512 wLo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p)));
      __m512 wHi =
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p + 1)));
      for (int m = 0; m < R; ++m) {
        const float *xg = x + m * sh.kp + g * kGroup;
        lo[m] = _mm512_fmadd_ps(wLo, _mm512_loadu_ps(xg), lo[m]);
        hi[m] = _mm512_fmadd_ps(wHi, _mm512_loadu_ps(xg + 16), hi[m]);
      }
    }
    // Blocks of 16: the halves of a group have scales of their own.
    const __m512 sLo = _mm512_set1_ps(s[HalfBlocks ? 2 * b : b]),
                 sHi = _mm512_set1_ps(s[HalfBlocks ? 2 * b + 1 : b]);
    for (int m = 0; m < R; ++m) {
      acc[m] = _mm512_fmadd_ps(lo[m], sLo, acc[m]);
      accHi[m] = _mm512_fmadd_ps(hi[m], sHi, accHi[m]);
    }
  }
  const float *zs = pw.scaledZeros.data() + n * sh.blocks;
  for (int m = 0; m < R; ++m)
    out[m] = _mm512_reduce_add_ps(_mm512_add_ps(acc[m], accHi[m])) -
             zeroPointTerm(zs, blockSums + m * sh.blocks, sh.blocks);
}

/// A 4-bit row of w' into kp floats for the sgemm panels in eight lanes:
/// each nibble converted, less its zero point, times its scale, the same
/// two roundings as the portable body's (i − z) · s.
__attribute__((target("avx2,fma"))) void
dequantizeRowAvx2U4(const Shape &sh, const PackedWeights &pw, int64_t n,
                    float *out) {
  const uint8_t *row = pw.values.data() + n * sh.rowBytes();
  const float *s = pw.scales.data() + n * sh.blocks;
  const int16_t *z = pw.zeros.data() + n * sh.blocks;
  const __m256i low = _mm256_set1_epi32(15);
  BlockWalk walk(sh);
  for (int64_t g = 0; g < sh.kp / kGroup; ++g, walk.next()) {
    // A group's first 16 columns are its bytes' low nibbles, the next 16
    // their high ones; each run of 16 lies in one block.
    const int64_t bLo = walk.lo(), bHi = walk.hi();
    const __m256 sLo = _mm256_set1_ps(s[bLo]), sHi = _mm256_set1_ps(s[bHi]);
    const __m256 zLo = _mm256_set1_ps(static_cast<float>(z[bLo])),
                 zHi = _mm256_set1_ps(static_cast<float>(z[bHi]));
    for (int half = 0; half < 2; ++half) {
      __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
          reinterpret_cast<const __m128i *>(row + g * 16 + 8 * half)));
      __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, low));
      __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
      _mm256_storeu_ps(out + g * kGroup + 8 * half,
                       _mm256_mul_ps(_mm256_sub_ps(lo, zLo), sLo));
      _mm256_storeu_ps(out + g * kGroup + 16 + 8 * half,
                       _mm256_mul_ps(_mm256_sub_ps(hi, zHi), sHi));
    }
  }
}

/// horizontal sum of eight lanes
__attribute__((target("avx2,fma"))) inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// One group of weights as four vectors of eight floats: columns [0, 8),
/// [8, 16), [16, 24), [24, 32).
template <Format F>
__attribute__((target("avx2,fma"), always_inline)) inline void
groupAvx2(const uint8_t *row, int64_t g, __m256 *w) {
  if constexpr (F == Format::U4) {
    const __m256i mask = _mm256_set1_epi32(15);
    const uint8_t *p = row + g * 16;
    __m256i v0 = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
    __m256i v1 = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + 8)));
    w[0] = _mm256_cvtepi32_ps(_mm256_and_si256(v0, mask));
    w[1] = _mm256_cvtepi32_ps(_mm256_and_si256(v1, mask));
    w[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4));
    w[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(v1, 4));
  } else {
    const uint8_t *p = row + g * kGroup;
    for (int i = 0; i < 4; ++i)
      w[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + 8 * i))));
  }
}

/// Σ_b t[b]·u[b] over `blocks` floats in eight lanes.
__attribute__((target("avx2,fma"))) inline float
dotAvx2(const float *t, const float *u, int64_t blocks) {
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(t + b), _mm256_loadu_ps(u + b), acc);
  float rest = 0.f;
  for (; b < blocks; ++b)
    rest += t[b] * u[b];
  return sum8(acc) + rest;
}

/// Σ_b z[b]·s[b]·u[b] over `blocks` in eight lanes: the zero points' share
/// of an integer body, z·s rounded as PackedWeights::scaledZeros is.
__attribute__((target("avx2,fma"))) inline float
zeroShareAvx2(const uint8_t *z, const float *s, const float *u,
              int64_t blocks) {
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    __m256 zs = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
            reinterpret_cast<const __m128i *>(z + b)))),
        _mm256_loadu_ps(s + b));
    acc = _mm256_fmadd_ps(zs, _mm256_loadu_ps(u + b), acc);
  }
  float rest = 0.f;
  for (; b < blocks; ++b)
    rest += static_cast<float>(z[b]) * s[b] * u[b];
  return sum8(acc) + rest;
}

/// dotsAvx512 in eight lanes: a group is four vectors of weights, each
/// block's sum scaled once it is complete. The loops follow the blocks, so
/// that no group divides its index by the block size (a 64-bit division
/// per group had been most of the time).
template <int R, Format F, bool HalfBlocks>
__attribute__((target("avx2,fma"))) void
dotsAvx2(const Shape &sh, const PackedWeights &pw, int64_t n, const float *x,
         const float *blockSums, float *out) {
  const uint8_t *row = pw.values.data() + n * sh.rowBytes();
  const float *s = pw.scales.data() + n * sh.blocks;
  __m256 acc[R], acc2[R];
  for (int m = 0; m < R; ++m)
    acc[m] = acc2[m] = _mm256_setzero_ps();
  const int64_t groups = sh.kp / kGroup;
  const int64_t perBlock = HalfBlocks ? 1 : sh.block / kGroup;
  for (int64_t g0 = 0, b = 0; g0 < groups; g0 += perBlock, ++b) {
    __m256 lo[R], hi[R];
    for (int m = 0; m < R; ++m)
      lo[m] = hi[m] = _mm256_setzero_ps();
    const int64_t g1 = std::min(groups, g0 + perBlock);
    for (int64_t g = g0; g < g1; ++g) {
      __m256 w[4];
      groupAvx2<F>(row, g, w);
      for (int m = 0; m < R; ++m) {
        const float *xg = x + m * sh.kp + g * kGroup;
        lo[m] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xg), lo[m]);
        lo[m] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xg + 8), lo[m]);
        hi[m] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xg + 16), hi[m]);
        hi[m] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xg + 24), hi[m]);
      }
    }
    // Blocks of 16: the halves of a group have scales of their own.
    const __m256 sLo = _mm256_set1_ps(s[HalfBlocks ? 2 * b : b]),
                 sHi = _mm256_set1_ps(s[HalfBlocks ? 2 * b + 1 : b]);
    for (int m = 0; m < R; ++m) {
      acc[m] = _mm256_fmadd_ps(lo[m], sLo, acc[m]);
      acc2[m] = _mm256_fmadd_ps(hi[m], sHi, acc2[m]);
    }
  }
  const float *zs = pw.scaledZeros.data() + n * sh.blocks;
  for (int m = 0; m < R; ++m)
    out[m] = sum8(_mm256_add_ps(acc[m], acc2[m])) -
             dotAvx2(zs, blockSums + m * sh.blocks, sh.blocks);
}

/// A blocked input as the integer body reads it, for R rows: q [R, kp]
/// int8 in pairedColumn's order, and per row and block sx and sx·Q ([R,
/// blocks]).
struct BlockedInput {
  const int8_t *q;
  int64_t stride; ///< between q's rows: the body's layout of a row
  const float *scale, *sums;
};

/// Where column i of a row of x lies in the integer body's q: two groups
/// (g even, g + 1) are 32 bytes of weights, whose low nibbles are columns
/// [0, 16) of each and whose high ones columns [16, 32), so q holds g's
/// [0, 16), g + 1's [0, 16), g's [16, 32), g + 1's [16, 32). A last group
/// without a pair keeps its order.
inline int64_t pairedColumn(int64_t i, int64_t groups) {
  const int64_t g = i / kGroup, c = i % kGroup;
  if (g >= groups - groups % 2)
    return i;
  return (g & ~int64_t(1)) * kGroup + (c / 16) * 32 + (g & 1) * 16 + c % 16;
}

/// The dots of a blocked input with 4-bit weights (see the file's
/// comment), R rows of x at once, two groups a step: one load of 32 bytes
/// of weights, two vpmaddubsw whose sums (at most 4·15·127) add in 16
/// bits, one vpmaddwd into the two groups' four lanes each. Blocks of 32
/// (Block32: each group its own scale) or of a multiple of 64 (a pair in
/// one block).
template <int R, bool Block32>
__attribute__((target("avx2,fma"))) void
dotsAvx2BlockedU4(const Shape &sh, const PackedWeights &pw, int64_t n,
                  const BlockedInput &in, float *out) {
  const uint8_t *row = pw.values.data() + n * sh.rowBytes();
  const float *s = pw.scales.data() + n * sh.blocks;
  const __m256i nibble = _mm256_set1_epi8(15);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  __m256 acc[R];
  for (int m = 0; m < R; ++m)
    acc[m] = _mm256_setzero_ps();
  const int64_t groups = sh.kp / kGroup, pairsPerBlock = sh.block / 64;
  int64_t b = 0, left = pairsPerBlock;
  for (int64_t g = 0; g + 1 < groups; g += 2) {
    __m256i bytes =
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + g * 16));
    __m256i lo = _mm256_and_si256(bytes, nibble),
            hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
    for (int m = 0; m < R; ++m) {
      const int8_t *q = in.q + m * in.stride + g * kGroup;
      __m256i d = _mm256_madd_epi16(
          _mm256_add_epi16(
              _mm256_maddubs_epi16(
                  lo, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q))),
              _mm256_maddubs_epi16(hi, _mm256_loadu_si256(
                                           reinterpret_cast<const __m256i *>(
                                               q + 32)))),
          ones);
      __m256 scale;
      const float *sx = in.scale + m * sh.blocks;
      if constexpr (Block32) {
        // s[g], s[g + 1] times sx[g], sx[g + 1], each over four lanes.
        __m128 c = _mm_mul_ps(
            _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double *>(s + g))),
            _mm_castpd_ps(
                _mm_load_sd(reinterpret_cast<const double *>(sx + g))));
        scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(c), spread);
      } else {
        scale = _mm256_set1_ps(s[b] * sx[b]);
      }
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), scale, acc[m]);
    }
    if (!Block32 && --left == 0) {
      ++b;
      left = pairsPerBlock;
    }
  }
  if (groups % 2) {
    // The last group, in its own order: columns [0, 16) in the low lane.
    const int64_t g = groups - 1, blk = Block32 ? g : b;
    __m128i bytes =
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(row + g * 16));
    const __m128i low = _mm_set1_epi8(15);
    __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), low),
                                 _mm_and_si128(bytes, low));
    for (int m = 0; m < R; ++m) {
      __m256i q = _mm256_loadu_si256(
          reinterpret_cast<const __m256i *>(in.q + m * in.stride + g * kGroup));
      __m256i d = _mm256_madd_epi16(_mm256_maddubs_epi16(w, q), ones);
      acc[m] = _mm256_fmadd_ps(
          _mm256_cvtepi32_ps(d),
          _mm256_set1_ps(s[blk] * in.scale[m * sh.blocks + blk]), acc[m]);
    }
  }
  const uint8_t *z = pw.zeroBytes.data() + n * sh.blocks;
  for (int m = 0; m < R; ++m)
    out[m] = sum8(acc[m]) -
             zeroShareAvx2(z, s, in.sums + m * sh.blocks, sh.blocks);
}
/// How the AVX-512 integer body lays x's columns out: four groups (64
/// bytes of weights, whose low nibbles are columns [0, 16) of each and whose
/// high ones columns [16, 32)) are 128 bytes of q, g's [0, 16) to g + 3's
/// [0, 16), then g's [16, 32) to g + 3's [16, 32). A last quad with fewer
/// groups keeps their places, the rest zero.
inline int64_t quadColumn(int64_t i) {
  const int64_t g = i / kGroup, c = i % kGroup;
  return (g / 4) * 128 + (c / 16) * 64 + (g % 4) * 16 + c % 16;
}

/// A row of a blocked input for an integer body, in eight lanes: each block
/// of `block` (a multiple of 32 dividing k) rounded exactly as
/// roundBlocks does (the same division, halves to even, NaN to 0), its q
/// stored sixteen at a time where quadColumn or pairedColumn puts them, and
/// its sx and sx·Σq. A scalar loop had cost as long as reading the weights
/// of a 768-wide layer.
__attribute__((target("avx2,fma"))) void
roundBlocksAvx2(const float *x, int64_t k, int64_t block, bool quadOrder,
                int64_t groups, int8_t *q, float *scale, float *sums) {
  const __m256 signless = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  for (int64_t b0 = 0, b = 0; b0 < k; b0 += block, ++b) {
    // maxps returns its second operand when either is NaN: NaNs add nothing.
    __m256 amax = _mm256_setzero_ps();
    for (int64_t i = b0; i < b0 + block; i += 8)
      amax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), signless),
                           amax);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax),
                           _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float sx = _mm_cvtss_f32(m4) / 127.f;
    // A block of zeros (sx = 0) stores zeros.
    __m256i total = _mm256_setzero_si256();
    const __m256 sv = _mm256_set1_ps(sx);
    for (int64_t i = b0; i < b0 + block; i += 16) {
      __m128i bytes = _mm_setzero_si128();
      if (sx > 0.f) {
        __m256i r[2];
        for (int h = 0; h < 2; ++h) {
          __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * h), sv);
          __m256 keep = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
          v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          v = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi), keep);
          r[h] = _mm256_cvtps_epi32(v);
          total = _mm256_add_epi32(total, r[h]);
        }
        // Sixteen int32 in [-127, 127] to bytes, in order.
        __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(r[0], r[1]),
                                             0xd8);
        bytes = _mm_packs_epi16(_mm256_castsi256_si128(w),
                                _mm256_extracti128_si256(w, 1));
      }
      int64_t at = quadOrder ? quadColumn(i) : pairedColumn(i, groups);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(q + at), bytes);
    }
    __m128i t4 = _mm_add_epi32(_mm256_castsi256_si128(total),
                               _mm256_extracti128_si256(total, 1));
    t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0x4e));
    t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0xb1));
    scale[b] = sx;
    sums[b] = sx * static_cast<float>(_mm_cvtsi128_si32(t4));
  }
}

/// How blocks fall on the AVX-512 integer body's quads of groups.
enum class QuadBlocks {
  Group, ///< blocks of 32: each group its own scale
  Pair,  ///< blocks of 64: two a quad
  Whole, ///< blocks of a multiple of 128: a quad in one block
};

/// dotsAvx2BlockedU4 with VNNI, four groups a step: one load of 64 bytes of
/// weights, their low and high nibbles two vpdpbusd against q (u4 · s8
/// summed in 32 bits, exact), whose lanes 4j to 4j + 3 hold group j's sum,
/// scaled by its block's s·sx in one FMA.
template <int R, QuadBlocks B>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void
dotsAvx512VnniBlockedU4(const Shape &sh, const PackedWeights &pw, int64_t n,
                        const BlockedInput &in, float *out) {
  const uint8_t *row = pw.values.data() + n * sh.rowBytes();
  const float *s = pw.scales.data() + n * sh.blocks;
  const __m512i nibble = _mm512_set1_epi8(15);
  // Which of the quad's scale products each lane takes.
  const __m512i spread =
      B == QuadBlocks::Group
          ? _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)
          : _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const int64_t groups = sh.kp / kGroup, quads = (groups + 3) / 4;
  const int64_t quadsPerBlock = sh.block / 128;
  __m512 acc[R];
  for (int m = 0; m < R; ++m)
    acc[m] = _mm512_setzero_ps();
  int64_t b = 0, left = quadsPerBlock;
  for (int64_t t = 0; t < quads; ++t) {
    // A last quad of fewer groups reads only theirs: weights, scales and
    // the input's scales past them are another row's, or past the end.
    const int64_t have = std::min<int64_t>(4, groups - 4 * t);
    const __mmask64 bytesMask =
        have == 4 ? ~__mmask64(0) : (__mmask64(1) << (16 * have)) - 1;
    __m512i bytes = _mm512_maskz_loadu_epi8(bytesMask, row + t * 64);
    __m512i lo = _mm512_and_si512(bytes, nibble),
            hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble);
    // This quad's blocks: four (Group), two (Pair) or one (Whole).
    const int64_t first = B == QuadBlocks::Group  ? 4 * t
                          : B == QuadBlocks::Pair ? 2 * t
                                                  : b;
    const __mmask8 scaleMask =
        B == QuadBlocks::Group ? __mmask8((1u << have) - 1)
                               : __mmask8(have > 2 ? 3 : 1);
    __m128 ws = _mm_setzero_ps();
    if constexpr (B != QuadBlocks::Whole)
      ws = _mm_maskz_loadu_ps(scaleMask, s + first);
    for (int m = 0; m < R; ++m) {
      const int8_t *q = in.q + m * in.stride + t * 128;
      __m512i d = _mm512_dpbusd_epi32(
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,
                              _mm512_loadu_si512(q)),
          hi, _mm512_loadu_si512(q + 64));
      __m512 scale;
      if constexpr (B == QuadBlocks::Whole) {
        scale = _mm512_set1_ps(s[b] * in.scale[m * sh.blocks + b]);
      } else {
        __m128 c = _mm_mul_ps(
            ws, _mm_maskz_loadu_ps(scaleMask, in.scale + m * sh.blocks + first));
        scale = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(c));
      }
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), scale, acc[m]);
    }
    if (B == QuadBlocks::Whole && --left == 0) {
      ++b;
      left = quadsPerBlock;
    }
  }
  const uint8_t *z = pw.zeroBytes.data() + n * sh.blocks;
  for (int m = 0; m < R; ++m)
    out[m] = _mm512_reduce_add_ps(acc[m]) -
             zeroShareAvx2(z, s, in.sums + m * sh.blocks, sh.blocks);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

/// The dots of one weight row with R rows of x (padded) whose blocks sum
/// to blockSums ([R, blocks]).
using DotsFn = void (*)(const Shape &, const PackedWeights &, int64_t n,
                        const float *x, const float *blockSums, float *out);

/// The body for `rows` (1 to kRowsPerPass) rows on this CPU; null where
/// only the portable one runs.
DotsFn dotsFor(const Shape &sh, int64_t rows) {
#if defined(__x86_64__)
  VectorIsa isa = vectorIsa();
  auto pick = [&](auto r) -> DotsFn {
    constexpr int R = decltype(r)::value;
    bool half = sh.block == 16;
    // 4-bit weights in float take the tiles on AVX-512 (tileDotsFor).
    if (isa == VectorIsa::AVX512 && sh.format == Format::S8)
      return half ? dotsAvx512S8<R, true> : dotsAvx512S8<R, false>;
    if (isa != VectorIsa::Scalar)
      switch (sh.format) {
      case Format::U4:
        return half ? dotsAvx2<R, Format::U4, true>
                    : dotsAvx2<R, Format::U4, false>;
      case Format::S8:
        return half ? dotsAvx2<R, Format::S8, true>
                    : dotsAvx2<R, Format::S8, false>;
      }
    return nullptr;
  };
  switch (rows) {
  case 1:
    return pick(std::integral_constant<int, 1>());
  case 2:
    return pick(std::integral_constant<int, 2>());
  case 3:
    return pick(std::integral_constant<int, 3>());
  default:
    return pick(std::integral_constant<int, 4>());
  }
#else
  (void)sh;
  (void)rows;
  return nullptr;
#endif
}

/// The dots of one tile of weights with R rows of x, into [R, 16].
using TileDotsFn = void (*)(const Shape &, const PackedWeights &,
                            int64_t tile, const float *x,
                            const float *blockSums, float *out);

class WeightOnlyLinearKernel : public Kernel {
public:
  WeightOnlyLinearKernel(std::shared_ptr<Engine> engine,
                         const tfm_abi_kernel_desc_t &d)
      : engine(std::move(engine)), m(d.params[TFM_QUANTIZED_LINEAR_M]),
        hasBias(d.params[TFM_QUANTIZED_LINEAR_HAS_BIAS]),
        activation(d.params[TFM_QUANTIZED_LINEAR_ACTIVATION]),
        flags(d.params[TFM_QUANTIZED_LINEAR_FLAGS]),
        givenBlock(d.params[TFM_QUANTIZED_LINEAR_BLOCK_SIZE]),
        blockedInput(flags & TFM_QUANTIZED_LINEAR_BLOCKED_INPUT) {
    sh.k = d.params[TFM_QUANTIZED_LINEAR_K];
    sh.n = d.params[TFM_QUANTIZED_LINEAR_N];
    sh.kp = (sh.k + kGroup - 1) / kGroup * kGroup;
    sh.format = flags & TFM_QUANTIZED_LINEAR_FOUR_BIT ? Format::U4 : Format::S8;
    // A block of at least K is the whole row; blocks of 16 are the only
    // ones narrower than a group, and wider ones that are no multiple of
    // 32 are read as blocks of 16, each scale given several times
    // (makeWeightOnlyLinearKernel takes multiples of 16 only).
    int64_t b = givenBlock == 0 || givenBlock >= sh.k ? sh.kp : givenBlock;
    sh.block = b % kGroup == 0 ? b : 16;
    sh.blocks = (sh.kp + sh.block - 1) / sh.block;
#if defined(__x86_64__)
    // The integer bodies read x's blocks as the weights' layout has them:
    // VNNI's in quads of groups (blocks of 32, 64 or a multiple of 128),
    // AVX2's in pairs (32 or a multiple of 64), on any CPU with AVX2.
    const bool blocksFit = blockedInput && m <= kGemvRows &&
                           sh.format == Format::U4 && sh.block == givenBlock;
    const bool vnni = blocksFit && hasAvx512Vnni() &&
                      (givenBlock == kGroup || givenBlock == 64 ||
                       givenBlock % 128 == 0);
    integerBody = vnni || (blocksFit &&
                           (givenBlock == kGroup || givenBlock % 64 == 0) &&
                           vectorIsa() != VectorIsa::Scalar);
    if (vnni) {
      quadOrder = true;
      if (givenBlock == kGroup)
        setIntegerDots<QuadBlocks::Group>();
      else if (givenBlock == 64)
        setIntegerDots<QuadBlocks::Pair>();
      else
        setIntegerDots<QuadBlocks::Whole>();
    } else if (integerBody) {
      const bool b32 = givenBlock == kGroup;
      integerDots[1] = b32 ? dotsAvx2BlockedU4<1, true> : dotsAvx2BlockedU4<1, false>;
      integerDots[2] = b32 ? dotsAvx2BlockedU4<2, true> : dotsAvx2BlockedU4<2, false>;
      integerDots[3] = b32 ? dotsAvx2BlockedU4<3, true> : dotsAvx2BlockedU4<3, false>;
      integerDots[4] = b32 ? dotsAvx2BlockedU4<4, true> : dotsAvx2BlockedU4<4, false>;
    }
    sh.tiles = !integerBody && sh.format == Format::U4 &&
               vectorIsa() == VectorIsa::AVX512;
    if (sh.tiles) {
      tileDots[1] = tileDotsAvx512U4<1>;
      tileDots[2] = tileDotsAvx512U4<2>;
      tileDots[3] = tileDotsAvx512U4<3>;
      tileDots[4] = tileDotsAvx512U4<4>;
    }
    if (integerBody) {
      const int64_t groups = sh.kp / kGroup;
      xqStride = quadOrder ? (groups + 3) / 4 * 128 : sh.kp;
      xq.assign(m * xqStride, 0);
      xScale.assign(m * sh.blocks, 0.f);
      xSums.assign(m * sh.blocks, 0.f);
    }
#endif
    for (int64_t r = 1; r <= kRowsPerPass && !sh.tiles; ++r)
      dots[r] = dotsFor(sh, r);
    // The float bodies read x padded to whole groups, and its blocks' sums.
    if (m <= kGemvRows && !integerBody) {
      xPadded.assign(m * sh.kp, 0.f);
      blockSums.assign(m * sh.blocks, 0.f);
    }
  }

  int32_t run(void *const *args) override {
    const auto *x = static_cast<const float *>(args[0]);
    const auto *b = static_cast<const float *>(args[4]);
    auto *y = static_cast<float *>(args[5]);
    const PackedWeights &pw = weightsOf(args[1], args[2], args[3]);
    if (m <= kGemvRows) {
      gemv(pw, x, b, y);
      return 0;
    }
    return panels(pw, x, b, y);
  }

private:
#if defined(__x86_64__)
  template <QuadBlocks B> void setIntegerDots() {
    integerDots[1] = dotsAvx512VnniBlockedU4<1, B>;
    integerDots[2] = dotsAvx512VnniBlockedU4<2, B>;
    integerDots[3] = dotsAvx512VnniBlockedU4<3, B>;
    integerDots[4] = dotsAvx512VnniBlockedU4<4, B>;
  }
#endif

  /// A row of a blocked input rounded into `to` (k floats): each block of
  /// givenBlock as tfm.quantized_linear's `blocked` reads it, for the
  /// float bodies (roundBlocksAvx2 gives the integer ones q).
  void roundBlocks(const float *x, float *to) {
    for (int64_t b0 = 0; b0 < sh.k; b0 += givenBlock) {
      float amax = 0.f;
      for (int64_t i = b0; i < b0 + givenBlock; ++i)
        if (!std::isnan(x[i]))
          amax = std::max(amax, std::fabs(x[i]));
      const float s = amax / 127.f;
      for (int64_t i = b0; i < b0 + givenBlock; ++i) {
        float q = s > 0.f && !std::isnan(x[i])
                      ? std::clamp(std::nearbyint(x[i] / s), -127.f, 127.f)
                      : 0.f;
        to[i] = q * s;
      }
    }
  }

  /// Up to kGemvRows rows: x padded to whole groups and each block's sums
  /// taken, then each thread's weight rows read once per kRowsPerPass rows.
  void gemv(const PackedWeights &pw, const float *x, const float *b, float *y) {
    for (int64_t r = 0; r < m; ++r) {
#if defined(__x86_64__)
      // The integer bodies read q alone.
      if (integerBody) {
        roundBlocksAvx2(x + r * sh.k, sh.k, givenBlock, quadOrder,
                        sh.kp / kGroup, &xq[r * xqStride],
                        &xScale[r * sh.blocks], &xSums[r * sh.blocks]);
        continue;
      }
#endif
      float *xp = &xPadded[r * sh.kp];
      if (blockedInput)
        roundBlocks(x + r * sh.k, xp);
      else
        std::memcpy(xp, x + r * sh.k, sh.k * sizeof(float));
      float *bs = &blockSums[r * sh.blocks];
      for (int64_t blk = 0; blk < sh.blocks; ++blk) {
        float sum = 0.f;
        for (int64_t i = blk * sh.block, e = std::min(sh.k, i + sh.block);
             i < e; ++i)
          sum += xp[i];
        bs[blk] = sum;
      }
    }
    // Each thread's columns, in whole vectors, then their activation in
    // lanes: one call of `activate` a column had been a tenth of a step.
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(),
                    t = omp_get_thread_num();
      // Whole tiles, or whole vectors of the activation's lanes.
      const int64_t unit = sh.tiles ? 16 : 8;
      const int64_t per = (sh.n + unit * threads - 1) / (unit * threads) * unit;
      const int64_t j0 = std::min(sh.n, t * per),
                    j1 = std::min(sh.n, j0 + per);
#if defined(__x86_64__)
      if (sh.tiles)
        tileGemv(pw, b, y, j0, j1);
      else
#endif
      for (int64_t j = j0; j < j1; ++j) {
        float sums[kRowsPerPass];
        for (int64_t r0 = 0; r0 < m; r0 += kRowsPerPass) {
          int64_t rows = std::min(kRowsPerPass, m - r0);
#if defined(__x86_64__)
          if (integerBody) {
            BlockedInput in{&xq[r0 * xqStride], xqStride,
                            &xScale[r0 * sh.blocks], &xSums[r0 * sh.blocks]};
            integerDots[rows](sh, pw, j, in, sums);
          } else
#endif
          {
            const float *xr = &xPadded[r0 * sh.kp];
            const float *bs = &blockSums[r0 * sh.blocks];
            if (DotsFn f = dots[rows])
              f(sh, pw, j, xr, bs, sums);
            else
              dotsScalar(sh, pw, j, xr, bs, rows, sums);
          }
          for (int64_t r = 0; r < rows; ++r)
            y[(r0 + r) * sh.n + j] = hasBias ? sums[r] + b[j] : sums[r];
        }
      }
      if (j0 < j1)
        for (int64_t r = 0; r < m; ++r)
          activateRowInLanes(y + r * sh.n + j0, j1 - j0, activation);
    }
  }

#if defined(__x86_64__)
  /// gemv's columns [j0, j1) (whole tiles but at N) from the tiles.
  void tileGemv(const PackedWeights &pw, const float *b, float *y, int64_t j0,
                int64_t j1) {
    alignas(64) float sums[kRowsPerPass * 16];
    for (int64_t j = j0; j < j1; j += 16) {
      const int64_t cols = std::min<int64_t>(16, j1 - j);
      for (int64_t r0 = 0; r0 < m; r0 += kRowsPerPass) {
        const int64_t rows = std::min(kRowsPerPass, m - r0);
        tileDots[rows](sh, pw, j / 16, &xPadded[r0 * sh.kp],
                       &blockSums[r0 * sh.blocks], sums);
        for (int64_t r = 0; r < rows; ++r) {
          float *out = y + (r0 + r) * sh.n + j;
          for (int64_t c = 0; c < cols; ++c)
            out[c] = hasBias ? sums[16 * r + c] + b[j + c] : sums[16 * r + c];
        }
      }
    }
  }
#endif

  /// More rows: panels of weight rows in f32, one sgemm each.
  int32_t panels(const PackedWeights &pw, const float *x, const float *b,
                 float *y) {
    if (blockedInput) {
      xRounded.resize(m * sh.k);
      for (int64_t r = 0; r < m; ++r)
        roundBlocks(x + r * sh.k, &xRounded[r * sh.k]);
      x = xRounded.data();
    }
    const int64_t count = (sh.n + kPanelRows - 1) / kPanelRows;
    int32_t failed = 0;
#pragma omp parallel
    {
      std::vector<float> panel(kPanelRows * sh.kp);
#pragma omp for schedule(dynamic)
      for (int64_t c = 0; c < count; ++c) {
        int64_t j0 = c * kPanelRows, rows = std::min(kPanelRows, sh.n - j0);
        // Tiles give the panel as [kp, kPanelRows], rows as [rows, kp].
        bool byK = false;
#if defined(__x86_64__)
        if (sh.tiles) {
          byK = true;
          for (int64_t j = 0; j < rows; j += 16)
            dequantizeTileAvx512U4(sh, pw, (j0 + j) / 16, &panel[j],
                                   kPanelRows);
        }
#endif
        if (!byK)
          for (int64_t j = 0; j < rows; ++j)
            dequantizeRow(pw, j0 + j, &panel[j * sh.kp]);
        // Inside the parallel region oneDNN's sgemm runs on this thread.
        if (dnnl::sgemm('N', byK ? 'N' : 'T', m, rows, sh.k, 1.f, x, sh.k,
                        panel.data(), byK ? kPanelRows : sh.kp, 0.f, y + j0,
                        sh.n) != dnnl::status::success) {
#pragma omp atomic write
          failed = 1;
          continue;
        }
        if (hasBias || activation != TFM_ACTIVATION_NONE)
          for (int64_t r = 0; r < m; ++r) {
            float *out = y + r * sh.n + j0;
            for (int64_t j = 0; j < rows; ++j)
              out[j] =
                  activate(out[j] + (hasBias ? b[j0 + j] : 0.f), activation);
          }
      }
    }
    return failed;
  }

  /// Row j of w', kp floats (zeros past K).
  void dequantizeRow(const PackedWeights &pw, int64_t j, float *out) const {
#if defined(__x86_64__)
    if (sh.format == Format::U4 && vectorIsa() != VectorIsa::Scalar)
      return dequantizeRowAvx2U4(sh, pw, j, out);
#endif
    const uint8_t *row = pw.values.data() + j * sh.rowBytes();
    const float *s = pw.scales.data() + j * sh.blocks;
    const int16_t *z = pw.zeros.data() + j * sh.blocks;
    float lo[16], hi[16];
    BlockWalk walk(sh);
    for (int64_t g = 0; g < sh.kp / kGroup; ++g, walk.next()) {
      groupScalar(row, g, sh.format, lo, hi);
      const int64_t bLo = walk.lo(), bHi = walk.hi();
      for (int i = 0; i < 16; ++i) {
        out[g * kGroup + i] = (lo[i] - static_cast<float>(z[bLo])) * s[bLo];
        out[g * kGroup + 16 + i] =
            (hi[i] - static_cast<float>(z[bHi])) * s[bHi];
      }
    }
  }

  /// The packed form of the constant weights at `w`, made at their first
  /// run: a model of one shape runs this kernel on each layer's weights,
  /// and the session's other kernels that read `w` in this layout (a
  /// decoder's prompt and step) share it.
  const PackedWeights &weightsOf(const void *w, const void *ws,
                                 const void *wz) {
    std::shared_ptr<PackedWeights> &pw = packedByWeights[w];
    if (!pw) {
      const int64_t layoutFlags =
          flags & (TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS |
                   TFM_QUANTIZED_LINEAR_PER_ROW |
                   TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT |
                   TFM_QUANTIZED_LINEAR_FOUR_BIT);
      const std::string layout = fmt::format(
          "weight-only k={} n={} block={} given={} flags={} tiles={} "
          "integer={} scales={} zeros={}",
          sh.k, sh.n, sh.block, givenBlock, layoutFlags, sh.tiles, integerBody,
          ws, wz);
      pw = std::static_pointer_cast<PackedWeights>(
          engine->derived(w, layout, [&] {
            auto made = std::make_shared<PackedWeights>();
            pack(*made, w, ws, wz);
            return std::shared_ptr<void>(made);
          }));
    }
    return *pw;
  }

  /// pw made from the weights at `w`, their scales and zero points.
  void pack(PackedWeights &pw, const void *w, const void *ws, const void *wz) {
    const bool isUnsigned = flags & TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS;
    const bool perRow = flags & TFM_QUANTIZED_LINEAR_PER_ROW;
    const bool hasZero = flags & TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT;
    // Values are shifted to the packed format, their zero points with
    // them: (w − z) is unchanged.
    const bool fourBit = sh.format == Format::U4;
    const int shift = fourBit ? (isUnsigned ? 0 : 8) : (isUnsigned ? -128 : 0);
    auto valueAt = [&](const void *p, int64_t i) {
      return isUnsigned ? int(static_cast<const uint8_t *>(p)[i])
                        : int(static_cast<const int8_t *>(p)[i]);
    };
    const int64_t k = sh.k, n = sh.n;
    // Each value is masked to its width: a 4-bit one's byte holds more, the
    // artifact having written it sign- or zero-extended.
    const auto *bytes = static_cast<const uint8_t *>(w);
    const int mask = fourBit ? 15 : 255;
    const int64_t given = givenBlock == 0 || givenBlock >= k ? 0 : givenBlock;
    const int64_t givenBlocks = given ? (k + given - 1) / given : 1;
    // Where the scale and zero point of row j's block blk are given.
    auto paramAt = [&](int64_t j, int64_t blk) {
      return (perRow ? j * givenBlocks : 0) +
             (given ? blk * sh.block / given : 0);
    };
    const auto *scales = static_cast<const float *>(ws);
    if (sh.tiles) {
      const int64_t tiles = sh.tileCount(), chunks = sh.kp / 8;
      pw.values.assign(tiles * chunks * 64, 0);
      pw.scales.assign(tiles * sh.blocks * 16, 0.f);
      pw.zeroBytes.assign(tiles * sh.blocks * 16, 0);
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < tiles; ++t)
        for (int64_t j = 16 * t; j < std::min(n, 16 * t + 16); ++j) {
          uint8_t *lane = pw.values.data() + t * chunks * 64 + (j % 16) * 4;
          for (int64_t i = 0; i < k; ++i)
            lane[(i / 8) * 64 + (i % 8) / 2] |= static_cast<uint8_t>(
                ((bytes[j * k + i] + shift) & mask) << (4 * (i % 2)));
          for (int64_t blk = 0; blk < sh.blocks && blk * sh.block < k; ++blk) {
            const int64_t at = paramAt(j, blk),
                          to = (t * sh.blocks + blk) * 16 + j % 16;
            pw.scales[to] = scales[at];
            pw.zeroBytes[to] =
                static_cast<uint8_t>((hasZero ? valueAt(wz, at) : 0) + shift);
          }
        }
      return;
    }
    pw.values.assign(n * sh.rowBytes(), 0);
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; ++j) {
      uint8_t *row = pw.values.data() + j * sh.rowBytes();
      const uint8_t *src = bytes + j * k;
      if (!fourBit) {
        for (int64_t i = 0; i < k; ++i)
          row[i] = static_cast<uint8_t>((src[i] + shift) & mask);
        continue;
      }
      for (int64_t i0 = 0; i0 < k; i0 += kGroup) {
        uint8_t *out = row + i0 / 2;
        for (int64_t i = 0; i < 16 && i0 + i < k; ++i)
          out[i] = static_cast<uint8_t>((src[i0 + i] + shift) & mask);
        for (int64_t i = 0; i < 16 && i0 + 16 + i < k; ++i)
          out[i] |=
              static_cast<uint8_t>(((src[i0 + 16 + i] + shift) & mask) << 4);
      }
    }
    // Scales: per tensor, per row, or per given block; spread over this
    // layout's blocks, 0 past K. Padded by a vector, which the last row's
    // whole-vector reads reach.
    pw.scales.assign(n * sh.blocks + 16, 0.f);
    pw.zeros.assign(n * sh.blocks + 16, 0);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t blk = 0; blk < sh.blocks; ++blk) {
        if (blk * sh.block >= k)
          break;
        int64_t at = paramAt(j, blk);
        pw.scales[j * sh.blocks + blk] = scales[at];
        pw.zeros[j * sh.blocks + blk] =
            static_cast<int16_t>((hasZero ? valueAt(wz, at) : 0) + shift);
      }
    // The zero points' share needs s·z per block: taken once here.
    if (integerBody) {
      pw.zeroBytes.assign(pw.zeros.begin(), pw.zeros.end());
    } else {
      pw.scaledZeros.assign(pw.zeros.size(), 0.f);
      for (size_t i = 0; i < pw.zeros.size(); ++i)
        pw.scaledZeros[i] = pw.scales[i] * static_cast<float>(pw.zeros[i]);
    }
  }

  /// Where packed weights are shared (Engine::derived).
  std::shared_ptr<Engine> engine;
  Shape sh;
  int64_t m;
  bool hasBias;
  int64_t activation, flags, givenBlock;
  bool blockedInput;
  /// An integer body takes a blocked input (see the file's comment), for
  /// each count of rows; VNNI's reads q in quadColumn's order, AVX2's in
  /// pairedColumn's, rows xqStride apart.
  bool integerBody = false, quadOrder = false;
  int64_t xqStride = 0;
#if defined(__x86_64__)
  using IntegerDotsFn = void (*)(const Shape &, const PackedWeights &,
                                 int64_t, const BlockedInput &, float *);
  IntegerDotsFn integerDots[kRowsPerPass + 1] = {};
  TileDotsFn tileDots[kRowsPerPass + 1] = {};
#endif
  std::vector<float> xPadded, blockSums;
  /// A blocked input: for the integer body, q and each block's sx and
  /// sx·Σq; for the panels, x' whole.
  std::vector<int8_t> xq;
  std::vector<float> xScale, xSums, xRounded;
  /// The body for each count of rows, 1 to kRowsPerPass; null: portable.
  DotsFn dots[kRowsPerPass + 1] = {};
  std::unordered_map<const void *, std::shared_ptr<PackedWeights>>
      packedByWeights;
};

} // namespace

std::unique_ptr<Kernel> tfm::runtime::cpu::makeWeightOnlyLinearKernel(
    std::shared_ptr<Engine> engine, const tfm_abi_kernel_desc_t &desc) {
  return std::make_unique<WeightOnlyLinearKernel>(std::move(engine), desc);
}
