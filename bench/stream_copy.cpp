//===- stream_copy.cpp - Memory bandwidth, STREAM's copy kernel -----------===//
//
// Copies a 256 MiB float array into another on the threads OpenMP is given
// (OMP_NUM_THREADS) and prints the median GB/s of REPS copies, counting the
// bytes read and the bytes written, as STREAM does. Decoding one token reads
// every weight once, so this rate bounds how fast a step can be (W7).
// Usage: stream_copy REPS
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const long n = 64L << 20;
  std::vector<float> a(n), b(n);
  // First touch on the threads that copy, so pages sit where they run.
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    a[i] = 1.0f;
    b[i] = 0.0f;
  }
  std::vector<double> rates;
  for (int r = 0; r < reps + 1; ++r) {
    auto start = std::chrono::steady_clock::now();
    float *pa = a.data(), *pb = b.data();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i)
      pb[i] = pa[i];
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r > 0) // warm-up
      rates.push_back(2.0 * n * sizeof(float) / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  // Read b so the copies cannot be dropped.
  std::printf("%.2f\n", rates[rates.size() / 2] + 0.0 * b[n / 2]);
  return 0;
}
