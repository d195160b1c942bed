//===- VectorMath.h - Exponentials in vector lanes -------------*- C++ -*-===//
//
// The kernels' exponentials and activations, in the lanes they run in:
// scalar libm calls would cost as much as the GEMMs around them.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CPU_VECTORMATH_H
#define TFM_RUNTIME_SRC_CPU_VECTORMATH_H

#if defined(__x86_64__)
#include "tfm/abi.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace tfm::runtime::cpu {

/// 2^x = 2^n · 2^f with n = round(x), f in [-1/2, 1/2]: 2^f = 1 + f·q(f),
/// q's coefficients lowest first, fitted for the least relative error
/// (9e-8; within 2.5 ulp in float arithmetic).
constexpr float kExp2Poly[] = {6.931470037e-1f, 2.402224243e-1f,
                               5.550733954e-2f, 9.671509266e-3f,
                               1.326469821e-3f};
/// The exponents for which 2^n is a normal float.
constexpr float kExp2Lowest = -126.0f, kExp2Highest = 127.0f;

/// 2^x in eight lanes for x in [-126, 127]; x outside is clamped to it.
__attribute__((target("avx2,fma"))) inline __m256 exp2Clamped(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExp2Lowest)),
                    _mm256_set1_ps(kExp2Highest));
  __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(kExp2Poly[std::size(kExp2Poly) - 1]);
  for (size_t i = std::size(kExp2Poly) - 1; i-- > 0;)
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Poly[i]));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
  __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/// e^r = Σ r^i / i! to i = 12, for |r| ≤ ln 2 / 2, where the first term
/// left out (r^13 / 13!) is below 1.7e-16: the Taylor coefficients from 1/12!
/// down to 1/2!.
constexpr double kExpTaylor[] = {
    1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880,
    1.0 / 40320,     1.0 / 5040,     1.0 / 720,     1.0 / 120,
    1.0 / 24,        1.0 / 6,        1.0 / 2};
/// Below this, e^x is taken as 0: 2^n stays a normal double, and what is
/// lost is under e^-708 ≈ 3e-308 a term.
constexpr double kExpDoubleLowest = -708.0;

/// e^x in four double lanes for x ≤ 709, to within about an ulp: x = n·ln 2
/// + r (ln 2 in two parts, so that r is exact), e^r by kExpTaylor, 2^n
/// from n's bits. NaN stays NaN; below kExpDoubleLowest, 0.
__attribute__((target("avx2,fma"))) inline __m256d expDoubleLanes(__m256d x) {
  const __m256d lowest = _mm256_set1_pd(kExpDoubleLowest);
  // maxpd returns its second operand when either is NaN: NaN goes on.
  __m256d c = _mm256_max_pd(lowest, x);
  __m256d n = _mm256_round_pd(_mm256_mul_pd(c, _mm256_set1_pd(1.4426950408889634)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), c);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
  __m256d p = _mm256_set1_pd(kExpTaylor[0]);
  for (size_t i = 1; i < std::size(kExpTaylor); ++i)
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kExpTaylor[i]));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  __m256i e = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)),
                       _mm256_set1_epi64x(1023)),
      52);
  __m256d y = _mm256_mul_pd(p, _mm256_castsi256_pd(e));
  return _mm256_andnot_pd(_mm256_cmp_pd(x, lowest, _CMP_LT_OQ), y);
}

/// erf(x) = 1 − t·p(t)·e^(−x²), t = 1 / (1 + 0.3275911·|x|), for x ≥ 0
/// (Abramowitz and Stegun 7.1.26, absolute error below 1.5e-7, the form
/// oneDNN's own GELU takes); p's coefficients lowest first.
constexpr float kErfT = 0.3275911f;
constexpr float kErfPoly[] = {0.254829592f, -0.284496736f, 1.421413741f,
                              -1.453152027f, 1.061405429f};

/// e^x in eight lanes, x clamped as exp2Clamped clamps x·log2(e).
__attribute__((target("avx2,fma"))) inline __m256 expLanes(__m256 x) {
  return exp2Clamped(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)));
}

/// The activation of TFM_ACTIVATION_* `act` in eight lanes, as `activate`
/// (Gemm.cpp) computes it one at a time (GELU's erf within 1.5e-7).
__attribute__((target("avx2,fma"))) inline __m256 activateLanes(__m256 v,
                                                                int64_t act) {
  const __m256 one = _mm256_set1_ps(1.f);
  switch (act) {
  case TFM_ACTIVATION_RELU:
    return _mm256_max_ps(v, _mm256_setzero_ps());
  case TFM_ACTIVATION_GELU: {
    __m256 z = _mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f));
    __m256 sign = _mm256_and_ps(z, _mm256_set1_ps(-0.f));
    __m256 a = _mm256_xor_ps(z, sign);
    __m256 t =
        _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(kErfT), a, one));
    __m256 p = _mm256_set1_ps(kErfPoly[std::size(kErfPoly) - 1]);
    for (size_t i = std::size(kErfPoly) - 1; i-- > 0;)
      p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kErfPoly[i]));
    __m256 e =
        expLanes(_mm256_mul_ps(_mm256_xor_ps(a, _mm256_set1_ps(-0.f)), a));
    __m256 erf = _mm256_fnmadd_ps(_mm256_mul_ps(t, p), e, one);
    erf = _mm256_or_ps(erf, sign);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                         _mm256_add_ps(one, erf));
  }
  case TFM_ACTIVATION_GELU_TANH: {
    // 1 + tanh(u) = 2 − 2 / (1 + e^2u), exact at both ends.
    __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
    __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.79788456080286536f),
                             _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), v3, v));
    __m256 e = expLanes(_mm256_add_ps(u, u));
    return _mm256_mul_ps(
        v, _mm256_sub_ps(one, _mm256_div_ps(one, _mm256_add_ps(one, e))));
  }
  case TFM_ACTIVATION_SILU: {
    __m256 e = expLanes(_mm256_xor_ps(v, _mm256_set1_ps(-0.f)));
    return _mm256_div_ps(v, _mm256_add_ps(one, e));
  }
  default:
    return v;
  }
}

/// activateLanes over y[0, n), the last n % 8 through a padded vector.
__attribute__((target("avx2,fma"))) inline void
activateRow(float *y, int64_t n, int64_t act) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(y + j, activateLanes(_mm256_loadu_ps(y + j), act));
  if (j < n) {
    alignas(32) float tail[8] = {};
    std::copy(y + j, y + n, tail);
    _mm256_store_ps(tail, activateLanes(_mm256_load_ps(tail), act));
    std::copy(tail, tail + (n - j), y + j);
  }
}

} // namespace tfm::runtime::cpu

#endif // defined(__x86_64__)
#endif // TFM_RUNTIME_SRC_CPU_VECTORMATH_H
