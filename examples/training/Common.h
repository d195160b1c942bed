//===- Common.h - Shared pieces of the training examples --------*- C++ -*-===//
//
// What both examples need around the runtime: a seeded generator, the
// inference entry of a training artifact, argmax, and option parsing.
//
//===----------------------------------------------------------------------===//
#ifndef TFM_EXAMPLES_TRAINING_COMMON_H
#define TFM_EXAMPLES_TRAINING_COMMON_H

#include <tfm/runtime.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace example {

/// splitmix64: small, seeded, and the same on every platform, so a run is
/// reproducible.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % uint64_t(n)); }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
};

/// The artifact's entry that is not the training step: the model's
/// forward pass, which reads the same parameters from the session.
inline std::string inferenceEntry(const tfm::Module &module) {
  for (size_t i = 0; i < tfm_module_num_entries(module.get()); ++i) {
    std::string name = tfm_module_entry_name(module.get(), i);
    if (name != "train_step")
      return name;
  }
  throw std::runtime_error("the artifact has no inference entry");
}

inline int64_t argmax(const float *row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best])
      best = i;
  return best;
}

inline double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

/// `--name=value` or `--name value` among argv[first..]; null when absent.
inline const char *option(int argc, char **argv, const char *name) {
  size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, n) != 0)
      continue;
    if (argv[i][n] == '=')
      return argv[i] + n + 1;
    if (argv[i][n] == '\0' && i + 1 < argc)
      return argv[i + 1];
  }
  return nullptr;
}

/// --checkpoint FILE, or the model's path with ".ckpt" added.
inline std::string checkpointOption(int argc, char **argv) {
  const char *v = option(argc, argv, "--checkpoint");
  return v ? v : std::string(argv[1]) + ".ckpt";
}

inline long optionInt(int argc, char **argv, const char *name, long fallback) {
  const char *v = option(argc, argv, name);
  if (!v)
    return fallback;
  char *end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end || x <= 0)
    throw std::runtime_error(std::string(name) + " takes a positive integer, not '" +
                             v + "'");
  return x;
}

} // namespace example

#endif // TFM_EXAMPLES_TRAINING_COMMON_H
