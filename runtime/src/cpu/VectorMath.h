//===- VectorMath.h - Exponentials in vector lanes -------------*- C++ -*-===//
//
// The kernels' exponentials, in the lanes they run in: scalar libm calls
// would cost as much as the GEMMs around them.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CPU_VECTORMATH_H
#define TFM_RUNTIME_SRC_CPU_VECTORMATH_H

#if defined(__x86_64__)
#include <immintrin.h>

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

} // namespace tfm::runtime::cpu

#endif // defined(__x86_64__)
#endif // TFM_RUNTIME_SRC_CPU_VECTORMATH_H
