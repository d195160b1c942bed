//===- read_bandwidth.cpp - Memory bandwidth as a decoding step uses it ---===//
//
// A decoding step reads every weight once and writes almost nothing, so its
// bound is the rate at which the threads can read memory. This reads a
// buffer of at least 1 GiB and four times the last-level cache (so no pass
// is served from the cache) on the threads OpenMP is given
// (OMP_NUM_THREADS), and prints the median GB/s of REPS passes, counting the
// bytes read. A copy (STREAM's) moves as many bytes out as in, and a core
// writes more slowly than it reads: W7 once measured 127% of a copy's rate.
// Usage: read_bandwidth REPS
//
//===----------------------------------------------------------------------===//

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

int main(int argc, char **argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0)
    llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const long bytes = std::max(1L << 30, 4 * std::max(llc, 0L));
  const long n = bytes / sizeof(uint64_t);
  // Not value-initialized: the first touch below places the pages.
  std::unique_ptr<uint64_t[]> a(new uint64_t[n]);
  // First touch on the threads that read, so pages sit where they run.
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i)
    a[i] = static_cast<uint64_t>(i);
  std::vector<double> rates;
  uint64_t check = 0;
  for (int r = 0; r < reps + 1; ++r) {
    const uint64_t *p = a.get();
    uint64_t x = 0;
    auto start = std::chrono::steady_clock::now();
    // An exclusive or: a reduction the compiler vectorizes without
    // reassociating floating point, so the loop is bound by the loads.
#pragma omp parallel for schedule(static) reduction(^ : x)
    for (long i = 0; i < n; ++i)
      x ^= p[i];
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    check ^= x;
    if (r > 0) // warm-up
      rates.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  // The reductions' value is used, so no pass can be dropped.
  std::printf("%.2f\n", rates[rates.size() / 2] + (check == 1 ? 1e-9 : 0.0));
  return 0;
}
