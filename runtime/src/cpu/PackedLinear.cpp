//===- PackedLinear.cpp - LINEAR on AVX2 over weights packed once ---------===//
//
// Below AVX-512, oneDNN 2.6's matmul has no kernel that reads packed
// weights: it runs its older GEMM on the weights as the model lays them out
// and packs them again at every call, and on a 2-core AVX2 host that reached
// 43% of its own sgemm's rate on W1's feed-forward layer. Here the constant
// weights are packed once, into panels of 16 columns by blocks of K, and a
// 6 x 16 register tile of fused multiply-adds reads them (twelve
// accumulators, two loads of the weights' row and six broadcasts of x per
// step of K, the shape that keeps both FMA ports busy with 16 registers).
// docs/cpu-backend.md records what each alternative measured.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"
#include "VectorMath.h"

#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

using namespace tfm::runtime::cpu;

#if defined(__x86_64__)
namespace {

/// The register tile: rows of x by columns of the weights.
constexpr int64_t kRows = 6, kCols = 16;
/// A block of K: a panel of the weights (16 KB) stays in L1 while the tile
/// walks the rows of x's block, which stays in L2.
constexpr int64_t kDepth = 256;
/// Rows of x per block: 144 x 256 floats (147 KB) fit the smallest L2 of
/// the AVX2 cores we run on (512 KB) beside the weights' panels.
constexpr int64_t kBlockRows = 144;

struct Aligned {
  void operator()(float *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], Aligned>;

Buffer allocate(int64_t floats) {
  size_t bytes = (static_cast<size_t>(floats) * sizeof(float) + 63) / 64 * 64;
  Buffer b(static_cast<float *>(std::aligned_alloc(64, bytes)));
  if (!b)
    throw std::runtime_error("out of memory for a linear layer's packed "
                             "weights (" +
                             std::to_string(bytes) + " bytes)");
  return b;
}

/// The packed weights of w [n, k] (row-major, y = x · wᵀ): for each block of
/// K, the panels of 16 columns one after the other, each [depth][16], the
/// columns past n zero. A block of K is then one contiguous run of memory.
struct PackedWeights {
  int64_t n, k, panels;
  Buffer data;

  PackedWeights(const float *w, int64_t n, int64_t k)
      : n(n), k(k), panels((n + kCols - 1) / kCols),
        data(allocate(panels * kCols * k)) {
    pack(w);
  }
  /// Packs w (again) into the same memory.
  void pack(const float *w) {
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
        int64_t depth = std::min(kDepth, k - k0);
        float *out = panel(k0, p);
        for (int64_t c = 0; c < kCols; ++c) {
          int64_t col = p * kCols + c;
          for (int64_t i = 0; i < depth; ++i)
            out[i * kCols + c] = col < n ? w[col * k + k0 + i] : 0.f;
        }
      }
  }
  /// The panel p of the block of K that starts at k0.
  float *panel(int64_t k0, int64_t p) const {
    int64_t depth = std::min(kDepth, k - k0);
    return data.get() + k0 * panels * kCols + p * depth * kCols;
  }
};

/// What the last block of K adds to a tile: the activation, then the
/// residual (rows as far apart as y's).
struct Epilogue {
  int64_t activation = TFM_ACTIVATION_NONE;
  const float *residual = nullptr;
};

/// c[r, 0:cols] (+)= a[r, 0:depth] · b for r < R, a's rows lda apart, b
/// [depth][16]; `prefetch`, when set, is the panel to fetch meanwhile. The
/// first block of K starts from the bias (or zero), later ones from c; the last
/// (`last`) applies the epilogue.
template <int R>
__attribute__((target("avx2,fma"))) void
tile(const float *a, int64_t lda, const float *b, int64_t depth, float *c,
     int64_t ldc, int64_t cols, const float *bias, bool accumulate,
     const Epilogue *last, const float *prefetch) {
  // The rows of c (and of the residual) that the end reads, asked for now:
  // c is out of the cache by the next block of K, and waiting for it there
  // cost 11% of W2's time (perf annotate).
  for (int r = 0; r < R; ++r) {
    const float *rows[] = {accumulate ? c + r * ldc : nullptr,
                           last && last->residual ? last->residual + r * ldc
                                                  : nullptr};
    for (const float *row : rows)
      if (row) {
        _mm_prefetch(reinterpret_cast<const char *>(row), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(row + kCols - 1),
                     _MM_HINT_T0);
      }
  }
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t i = 0; i < depth; ++i) {
    __m256 b0 = _mm256_load_ps(b + i * kCols);
    __m256 b1 = _mm256_load_ps(b + i * kCols + 8);
    if (prefetch)
      _mm_prefetch(reinterpret_cast<const char *>(prefetch + i * kCols),
                   _MM_HINT_T1);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      __m256 av = _mm256_broadcast_ss(a + r * lda + i);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  // Out of the registers once per block of K. Indexing the accumulators by
  // a variable anywhere would keep them in memory inside the loop above.
  alignas(32) float out[R][kCols];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_store_ps(out[r], acc[r][0]);
    _mm256_store_ps(out[r] + 8, acc[r][1]);
  }
  const float *init = accumulate ? c : bias;
  int64_t initStride = accumulate ? ldc : 0;
  for (int r = 0; r < R; ++r) {
    float *row = c + r * ldc;
    // The last panel's columns past n exist only in `out`; `in` and `add`
    // hold its rows of the operands, zero past n.
    alignas(32) float in[kCols] = {}, add[kCols] = {};
    const float *from = init ? init + r * initStride : nullptr;
    const float *res =
        last && last->residual ? last->residual + r * ldc : nullptr;
    if (cols < kCols) {
      for (int64_t j = 0; j < cols; ++j) {
        in[j] = from ? from[j] : 0.f;
        add[j] = res ? res[j] : 0.f;
      }
      from = from ? in : nullptr;
      res = res ? add : nullptr;
    }
    __m256 v0 = _mm256_load_ps(out[r]), v1 = _mm256_load_ps(out[r] + 8);
    if (from) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(from));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(from + 8));
    }
    if (last) {
      v0 = activateLanes(v0, last->activation);
      v1 = activateLanes(v1, last->activation);
      if (res) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(res));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(res + 8));
      }
    }
    if (cols == kCols) {
      _mm256_storeu_ps(row, v0);
      _mm256_storeu_ps(row + 8, v1);
    } else {
      _mm256_store_ps(out[r], v0);
      _mm256_store_ps(out[r] + 8, v1);
      std::memcpy(row, out[r], cols * sizeof(float));
    }
  }
}

using TileFn = void (*)(const float *, int64_t, const float *, int64_t, float *,
                        int64_t, int64_t, const float *, bool, const Epilogue *,
                        const float *);
constexpr TileFn kTiles[kRows + 1] = {nullptr, tile<1>, tile<2>, tile<3>,
                                      tile<4>, tile<5>, tile<6>};

/// The part of y one thread computes: rows [m0, m1), panels [p0, p1).
struct Task {
  int64_t m0, m1, p0, p1;
};

class PackedLinearKernel : public Kernel {
public:
  explicit PackedLinearKernel(const tfm_abi_kernel_desc_t &d)
      : m(d.params[TFM_LINEAR_M]), k(d.params[TFM_LINEAR_K]),
        n(d.params[TFM_LINEAR_N]), hasBias(d.params[TFM_LINEAR_HAS_BIAS]),
        activation(d.params[TFM_LINEAR_ACTIVATION]),
        hasResidual(d.params[TFM_LINEAR_HAS_RESIDUAL]),
        constWeights(d.params[TFM_LINEAR_CONSTANT_WEIGHTS]) {
    int64_t panels = (n + kCols - 1) / kCols;
    int64_t threads = std::max(1, omp_get_max_threads());
    // Columns first: each thread then reads its share of the weights once
    // per block of rows. Rows split too when there are fewer panels than
    // threads.
    int64_t colParts = std::min(threads, panels);
    int64_t rowParts = std::min<int64_t>((threads + colParts - 1) / colParts,
                                         (m + kRows - 1) / kRows);
    int64_t rowStep = (m + rowParts - 1) / rowParts;
    rowStep = (rowStep + kRows - 1) / kRows * kRows;
    for (int64_t m0 = 0; m0 < m; m0 += rowStep)
      for (int64_t c = 0; c < colParts; ++c)
        tasks.push_back({m0, std::min(m, m0 + rowStep), panels * c / colParts,
                         panels * (c + 1) / colParts});
  }

  int32_t run(void *const *args) override {
    const auto *x = static_cast<const float *>(args[0]);
    const auto *w = static_cast<const float *>(args[1]);
    const auto *b = hasBias ? static_cast<const float *>(args[2]) : nullptr;
    const auto *r = hasResidual ? static_cast<const float *>(args[3]) : nullptr;
    auto *y = static_cast<float *>(args[4]);
    const PackedWeights *packed;
    if (constWeights) {
      // Every layer of one shape runs this kernel on its own weights: each
      // is packed at its first run and kept, as oneDNN's packed copies are.
      std::unique_ptr<PackedWeights> &p = packedByWeights[w];
      if (!p)
        p = std::make_unique<PackedWeights>(w, n, k);
      packed = p.get();
    } else {
      // Weights that change (training) are packed at every run, into the
      // same memory: 2·m multiply-adds per packed float.
      if (changing)
        changing->pack(w);
      else
        changing = std::make_unique<PackedWeights>(w, n, k);
      packed = changing.get();
    }
#pragma omp parallel for schedule(static, 1)
    for (size_t i = 0; i < tasks.size(); ++i)
      compute(tasks[i], x, *packed, b, r, y);
    return 0;
  }

private:
  __attribute__((target("avx2,fma"))) void
  compute(const Task &t, const float *x, const PackedWeights &w, const float *b,
          const float *r, float *y) const {
    for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
      int64_t depth = std::min(kDepth, k - k0);
      bool accumulate = k0 > 0, isLast = k0 + depth == k;
      for (int64_t mb = t.m0; mb < t.m1; mb += kBlockRows) {
        int64_t rows = std::min(kBlockRows, t.m1 - mb);
        for (int64_t p = t.p0; p < t.p1; ++p) {
          const float *panel = w.panel(k0, p);
          int64_t col = p * kCols, cols = std::min(kCols, n - col);
          for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
            int64_t tileRows = std::min(kRows, rows - r0);
            int64_t at = (mb + r0) * n + col;
            Epilogue last{activation, r ? r + at : nullptr};
            // The first tile of a panel asks for the next panel, into L2:
            // weights too large for the cache (W9's 1.2 GB) come from
            // memory, and the hardware's prefetch alone left 15% of the
            // warm rate behind.
            const float *next = r0 > 0           ? nullptr
                                : p + 1 < t.p1   ? w.panel(k0, p + 1)
                                : k0 + depth < k ? w.panel(k0 + depth, t.p0)
                                                 : nullptr;
            kTiles[tileRows](x + (mb + r0) * k + k0, k, panel, depth, y + at, n,
                             cols, b ? b + col : nullptr, accumulate,
                             isLast ? &last : nullptr, next);
          }
        }
      }
    }
  }

  int64_t m, k, n;
  bool hasBias;
  int64_t activation;
  bool hasResidual, constWeights;
  std::vector<Task> tasks;
  std::unordered_map<const float *, std::unique_ptr<PackedWeights>>
      packedByWeights;
  std::unique_ptr<PackedWeights> changing;
};

} // namespace
#endif

std::unique_ptr<Kernel>
tfm::runtime::cpu::makePackedLinearKernel(std::shared_ptr<Engine> engine,
                                          const tfm_abi_kernel_desc_t &d) {
  // The tiles need no oneDNN engine.
  (void)engine;
#if defined(__x86_64__)
  return std::make_unique<PackedLinearKernel>(d);
#else
  (void)d;
  return nullptr;
#endif
}
