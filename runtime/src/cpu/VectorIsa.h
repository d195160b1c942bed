//===- VectorIsa.h - The vector instructions the runtime may use -*- C++ -*-===//
//
// Header-only, so that the parts of the runtime outside the kernels (the
// Search) take the same decision without linking them.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CPU_VECTORISA_H
#define TFM_RUNTIME_SRC_CPU_VECTORISA_H

#include <cctype>
#include <cstdlib>
#include <string>

namespace tfm::runtime::cpu {

/// The widest vector instructions the runtime's own row loops may use: what
/// the CPU has, within oneDNN's DNNL_MAX_CPU_ISA when it is set, so that
/// one variable limits every kernel (and tests reach the narrower paths on
/// a wide machine). Read once per process.
enum class VectorIsa { Scalar, AVX2, AVX512 };

inline VectorIsa vectorIsa() {
  static const VectorIsa isa = [] {
#if defined(__x86_64__)
    std::string limit;
    if (const char *env = std::getenv("DNNL_MAX_CPU_ISA"))
      for (const char *c = env; *c; ++c)
        limit += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
    bool wide = limit.empty() || limit == "all" ||
                limit.compare(0, 6, "avx512") == 0 ||
                limit.compare(0, 5, "avx10") == 0;
    bool avx2 = wide || limit.compare(0, 4, "avx2") == 0;
    if (wide && __builtin_cpu_supports("avx512f"))
      return VectorIsa::AVX512;
    if (avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return VectorIsa::AVX2;
#endif
    return VectorIsa::Scalar;
  }();
  return isa;
}

} // namespace tfm::runtime::cpu

#endif // TFM_RUNTIME_SRC_CPU_VECTORISA_H
