//===- int8_ceiling.cpp - oneDNN's u8 x s8 -> s32 GEMM rate ---------------===//
//
// The int8 counterpart of sgemm_ceiling: 2048x2048 u8 by s8 into s32 with
// dnnl_gemm_u8s8s32 (VNNI's vpdpbusd where the CPU has it, within
// DNNL_MAX_CPU_ISA) on the threads OpenMP is given; prints the median
// GOP/s of REPS runs. Usage: int8_ceiling REPS
//
//===----------------------------------------------------------------------===//

#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const dnnl_dim_t n = 2048;
  std::vector<uint8_t> a(n * n, 3);
  std::vector<int8_t> b(n * n, -2);
  std::vector<int32_t> c(n * n, 0);
  const int32_t co = 0;
  std::vector<double> rates;
  for (int i = 0; i < reps + 2; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (dnnl_gemm_u8s8s32('N', 'N', 'F', n, n, n, 1.f, a.data(), n, 0, b.data(),
                          n, 0, 0.f, c.data(), n, &co) != dnnl_success)
      return 1;
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (i >= 2) // warm-up
      rates.push_back(2.0 * n * n * n / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("%.1f\n", rates[rates.size() / 2]);
  return 0;
}
