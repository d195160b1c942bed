//===- CpuFeatures.cpp - The model's CPU features against this CPU --------===//

#include "CpuFeatures.h"

#include "tfm/abi.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

using namespace tfm::runtime;

namespace {

struct Feature {
  const char *name;
  uint32_t leaf, subleaf, reg, bit;
  uint64_t xcr0;
};

constexpr Feature kFeatures[] = {
#define TFM_FEATURE_ROW(name, leaf, subleaf, reg, bit, xcr0)                   \
  {name, leaf, subleaf, reg, bit, xcr0},
    TFM_CPU_FEATURES(TFM_FEATURE_ROW)
#undef TFM_FEATURE_ROW
};

/// The register bits the operating system saves (XCR0), 0 without XSAVE.
uint64_t enabledStates() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) // OSXSAVE
    return 0;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
#else
  return 0;
#endif
}

/// Whether DNNL_MAX_CPU_ISA, read as the oneDNN kernels read it, leaves
/// `f` out: SSE4.1 leaves out everything on AVX registers, AVX all but
/// AVX itself, AVX2 AVX-512 (and AVX-VNNI, unless it names VNNI).
bool cappedOut(const Feature &f) {
  const char *env = std::getenv("DNNL_MAX_CPU_ISA");
  if (!env || !*env)
    return false;
  std::string limit;
  for (const char *c = env; *c; ++c)
    limit += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  bool avxRegisters = f.xcr0 != 0, avx512 = (f.xcr0 & 0xe0) != 0;
  if (limit.rfind("sse4", 0) == 0)
    return avxRegisters;
  if (limit == "avx")
    return avxRegisters && std::strcmp(f.name, "avx") != 0;
  if (limit.rfind("avx2", 0) == 0)
    return avx512 || (std::strcmp(f.name, "avxvnni") == 0 &&
                      limit.find("vnni") == std::string::npos);
  return false;
}

bool has(const Feature &f) {
#if defined(__x86_64__)
  if (cappedOut(f))
    return false;
  unsigned r[4] = {};
  if (!__get_cpuid_count(f.leaf, f.subleaf, &r[0], &r[1], &r[2], &r[3]))
    return false;
  if (!(r[f.reg] & (1u << f.bit)))
    return false;
  static const uint64_t states = enabledStates();
  return (states & f.xcr0) == f.xcr0;
#else
  (void)f;
  return false;
#endif
}

const Feature *find(const std::string &name) {
  for (const Feature &f : kFeatures)
    if (name == f.name)
      return &f;
  return nullptr;
}

bool hasAll(std::initializer_list<const char *> names) {
  return std::all_of(names.begin(), names.end(), [](const char *n) {
    const Feature *f = find(n);
    return f && has(*f);
  });
}

} // namespace

std::vector<std::string>
tfm::runtime::missingCpuFeatures(const std::string &list) {
  std::vector<std::string> missing;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ','))
    if (!name.empty()) {
      const Feature *f = find(name);
      if (!f || !has(*f))
        missing.push_back(name);
    }
  return missing;
}

std::string tfm::runtime::portableCpuLevel() {
  // The levels' features, as LLVM's x86-64-vN CPUs enable them.
  bool v2 = hasAll({"cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2",
                    "ssse3"});
  bool v3 = v2 && hasAll({"avx", "avx2", "bmi", "bmi2", "f16c", "fma",
                          "lzcnt", "movbe", "xsave"});
  bool v4 = v3 && hasAll({"avx512f", "avx512bw", "avx512cd", "avx512dq",
                          "avx512vl"});
  return v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : v2 ? "x86-64-v2" : "x86-64";
}
