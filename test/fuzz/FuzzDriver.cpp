//===- FuzzDriver.cpp - Runs a fuzz target without libFuzzer ---------------===//
//
// The test suite builds every fuzz target with the project's compiler and
// this driver in place of libFuzzer: it runs the target on each file given
// (the seed corpus and the crashes found so far, kept as regression
// inputs), then on a bounded number of mutations of them drawn from a
// fixed seed, so a run is the same every time. scripts/fuzz.sh builds the
// same targets with clang's libFuzzer and sanitizers for coverage-guided
// runs of any length.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

void collect(const std::filesystem::path &path, std::vector<Bytes> &inputs) {
  if (std::filesystem::is_directory(path)) {
    std::vector<std::filesystem::path> files;
    for (const auto &entry :
         std::filesystem::recursive_directory_iterator(path))
      if (entry.is_regular_file())
        files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto &f : files)
      collect(f, inputs);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz driver: cannot read '%s'\n", path.c_str());
    std::exit(2);
  }
  inputs.emplace_back(std::istreambuf_iterator<char>(in),
                      std::istreambuf_iterator<char>());
}

/// One to four of libFuzzer's simpler mutations: flip a bit, set a byte to
/// a random or boundary value, erase, duplicate or insert a range.
Bytes mutate(Bytes data, std::mt19937_64 &rng) {
  auto pick = [&](size_t n) { return n ? rng() % n : 0; };
  for (int m = 0, n = 1 + pick(4); m < n; ++m) {
    switch (pick(6)) {
    case 0:
      if (!data.empty())
        data[pick(data.size())] ^= uint8_t(1u << pick(8));
      break;
    case 1:
      if (!data.empty())
        data[pick(data.size())] = uint8_t(rng());
      break;
    case 2: {
      static const uint8_t kBoundary[] = {0, 1, 0x7f, 0x80, 0xff};
      if (!data.empty())
        data[pick(data.size())] = kBoundary[pick(std::size(kBoundary))];
      break;
    }
    case 3:
      if (!data.empty()) {
        size_t at = pick(data.size()), len = 1 + pick(std::min<size_t>(64, data.size() - at));
        data.erase(data.begin() + at, data.begin() + at + len);
      }
      break;
    case 4:
      if (!data.empty()) {
        size_t at = pick(data.size()), len = 1 + pick(std::min<size_t>(64, data.size() - at));
        Bytes copy(data.begin() + at, data.begin() + at + len);
        data.insert(data.begin() + pick(data.size() + 1), copy.begin(), copy.end());
      }
      break;
    default: {
      size_t at = pick(data.size() + 1), len = 1 + pick(8);
      Bytes fresh(len);
      for (uint8_t &b : fresh)
        b = uint8_t(rng());
      data.insert(data.begin() + at, fresh.begin(), fresh.end());
    }
    }
  }
  return data;
}

} // namespace

int main(int argc, char **argv) {
  unsigned long mutations = 0, seed = 1;
  std::vector<Bytes> inputs;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mutations=", 12) == 0)
      mutations = std::strtoul(argv[i] + 12, nullptr, 10);
    else if (std::strncmp(argv[i], "--seed=", 7) == 0)
      seed = std::strtoul(argv[i] + 7, nullptr, 10);
    else
      collect(argv[i], inputs);
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations=N] [--seed=S] FILE|DIR...\n",
                 argv[0]);
    return 2;
  }
  for (const Bytes &b : inputs)
    LLVMFuzzerTestOneInput(b.data(), b.size());
  std::mt19937_64 rng(seed);
  for (unsigned long i = 0; i < mutations; ++i) {
    Bytes b = mutate(inputs[rng() % inputs.size()], rng);
    LLVMFuzzerTestOneInput(b.data(), b.size());
  }
  std::printf("%zu inputs and %lu mutations ran without a crash\n",
              inputs.size(), mutations);
  return 0;
}
