//===- sgemm_ceiling.cpp - oneDNN's sgemm rate, the practical ceiling -----===//
//
// Multiplies 2048x2048 f32 matrices with dnnl_sgemm on the threads OpenMP is
// given and prints the median GFLOP/s of REPS runs. Usage: sgemm_ceiling REPS
//
//===----------------------------------------------------------------------===//

#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const dnnl_dim_t n = 2048;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.f);
  std::vector<double> rates;
  for (int i = 0; i < reps + 2; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f,
                   c.data(), n) != dnnl_success)
      return 1;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                             start)
                   .count();
    if (i >= 2) // warm-up
      rates.push_back(2.0 * n * n * n / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("%.1f\n", rates[rates.size() / 2]);
  return 0;
}
