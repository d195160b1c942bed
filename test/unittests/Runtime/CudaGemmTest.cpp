//===- CudaGemmTest.cpp - GEMM descriptors through cuBLASLt, without a GPU ===//
//
// The layouts a descriptor becomes (the table in docs/gpu-backend.md), and
// the calls made with them run through a stand-in cuBLASLt that computes
// what the library documents (fake_cublaslt.c), on host memory. Results are
// compared with the row-major definition of each kernel, written out here
// as loops: an operand passed with the wrong transpose, leading dimension
// or batch stride reads other elements and fails.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "cuda/Gemm.h"
#include "cuda/GemmLayout.h"

#include "tfm/runtime.h"
#include "tfm/runtime.hpp"

#include <fmt/format.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>
#include <vector>

using namespace tfm::runtime;
using namespace tfm::runtime::cuda;

namespace {

const Blas &fakeBlas() {
  static const Blas *b = [] {
    setenv("TFM_CUBLASLT", TFM_FAKE_CUBLASLT, 1);
    std::string error;
    const Blas *loaded = blas(error);
    if (!loaded)
      ADD_FAILURE() << error;
    return loaded;
  }();
  return *b;
}

cublasLtHandle_t handle() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t out = nullptr;
    EXPECT_EQ(fakeBlas().create(&out), CUBLAS_STATUS_SUCCESS);
    return out;
  }();
  return h;
}

std::vector<float> randomVector(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

tfm_abi_kernel_desc_t linear(int64_t m, int64_t k, int64_t n, bool bias,
                             int64_t activation, bool residual,
                             int32_t dtype = TFM_DTYPE_F32) {
  tfm_abi_kernel_desc_t d{};
  d.kind = TFM_KERNEL_LINEAR;
  d.dtype = dtype;
  int64_t params[] = {m, k, n, bias, activation, residual, 1};
  std::memcpy(d.params, params, sizeof params);
  return d;
}

float bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

/// y = act(x · wᵀ + b) + r, row-major, in double.
std::vector<float> linearReference(const std::vector<float> &x,
                                   const std::vector<float> &w, const float *b,
                                   const float *r, int64_t m, int64_t k,
                                   int64_t n, int64_t activation, bool round) {
  std::vector<float> y(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += double(round ? bf16(x[i * k + p]) : x[i * k + p]) *
             (round ? bf16(w[j * k + p]) : w[j * k + p]);
      if (b)
        s += b[j];
      if (activation == TFM_ACTIVATION_RELU)
        s = s > 0 ? s : 0;
      if (activation == TFM_ACTIVATION_GELU_TANH)
        s = 0.5 * s *
            (1 + std::tanh(std::sqrt(2 / M_PI) * (s + 0.044715 * s * s * s)));
      if (r)
        s += r[i * n + j];
      y[i * n + j] = float(s);
    }
  return y;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                double tolerance = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance) << "at " << i;
}

std::string readLog(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

// The table of docs/gpu-backend.md: a linear layer y[M,N] = x[M,K]·w[N,K]ᵀ
// is D = yᵀ (N × M, ld N) = op(w) · op(x) with w read transposed.
TEST(GemmLayout, Linear) {
  std::string why;
  auto l = layoutOf(linearProblem(4, 3, 5), why);
  ASSERT_TRUE(l) << why;
  EXPECT_TRUE(l->swapped);
  EXPECT_EQ(l->m, 5);
  EXPECT_EQ(l->n, 4);
  EXPECT_EQ(l->k, 3);
  EXPECT_TRUE(l->a.transposed);
  EXPECT_EQ(l->a.rows, 3u);
  EXPECT_EQ(l->a.columns, 5u);
  EXPECT_EQ(l->a.ld, 3);
  EXPECT_FALSE(l->b.transposed);
  EXPECT_EQ(l->b.rows, 3u);
  EXPECT_EQ(l->b.columns, 4u);
  EXPECT_EQ(l->b.ld, 3);
  EXPECT_EQ(l->d.rows, 5u);
  EXPECT_EQ(l->d.columns, 4u);
  EXPECT_EQ(l->d.ld, 5);
}

// Attention's scores q·kᵀ of sequence-first heads ([S, H, dh] rows): the
// heads are the batch, H·dh apart within a row; k is read transposed.
TEST(GemmLayout, SequenceFirstHeads) {
  const int64_t s = 6, h = 4, dh = 8;
  int64_t strides[12] = {0, dh,    h * dh, 1,      // q: (b1, head, row, k)
                         0, dh,    1,      h * dh, // kᵀ: (b1, head, k, column)
                         0, s * s, s,      1};     // scores, dense
  std::string why;
  auto p = batchMatmulProblem(1, h, s, dh, s, strides, why);
  ASSERT_TRUE(p) << why;
  auto l = layoutOf(*p, why);
  ASSERT_TRUE(l) << why;
  EXPECT_TRUE(l->swapped);
  EXPECT_EQ(l->batch, h);
  EXPECT_TRUE(l->a.transposed);
  EXPECT_EQ(l->a.rows, uint64_t(dh));
  EXPECT_EQ(l->a.ld, h * dh);
  EXPECT_EQ(l->a.batchStride, dh);
  EXPECT_FALSE(l->b.transposed);
  EXPECT_EQ(l->b.ld, h * dh);
  EXPECT_EQ(l->d.ld, s);
  EXPECT_EQ(l->d.batchStride, s * s);
}

// What cuBLASLt cannot read is refused with the reason.
TEST(GemmLayout, Refusals) {
  std::string why;
  GemmProblem p = linearProblem(4, 3, 5);
  p.c = {0, 10, 2};
  EXPECT_FALSE(layoutOf(p, why));
  EXPECT_EQ(why, "the output is strided along both dimensions");
  p = linearProblem(4, 3, 5);
  p.a = {0, 6, 2};
  EXPECT_FALSE(layoutOf(p, why));
  EXPECT_EQ(why, "the first operand is strided along both dimensions");
  int64_t strides[12] = {100, 7, 3, 1, 0, 0, 5, 1, 30, 15, 5, 1};
  EXPECT_FALSE(batchMatmulProblem(2, 2, 2, 3, 5, strides, why));
  EXPECT_EQ(why, "the first operand's two batch dimensions are not evenly "
                 "spaced");
}

// Linear layers in every epilogue the library fuses, against the
// definition.
TEST(LibraryGemm, LinearEpilogues) {
  const int64_t m = 7, k = 5, n = 6;
  auto x = randomVector(m * k, 1), w = randomVector(n * k, 2),
       b = randomVector(n, 3), r = randomVector(m * n, 4);
  struct Case {
    bool bias;
    int64_t activation;
    bool residual;
    int epilogue;
  } cases[] = {
      {false, TFM_ACTIVATION_NONE, false, CUBLASLT_EPILOGUE_DEFAULT},
      {true, TFM_ACTIVATION_NONE, false, CUBLASLT_EPILOGUE_BIAS},
      {true, TFM_ACTIVATION_RELU, false, CUBLASLT_EPILOGUE_RELU_BIAS},
      {false, TFM_ACTIVATION_RELU, false, CUBLASLT_EPILOGUE_RELU},
      {true, TFM_ACTIVATION_GELU_TANH, false, CUBLASLT_EPILOGUE_GELU_BIAS},
      {true, TFM_ACTIVATION_NONE, true, CUBLASLT_EPILOGUE_BIAS},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.epilogue);
    LibraryGemm gemm(fakeBlas(), handle(),
                     linear(m, k, n, c.bias, c.activation, c.residual), 0,
                     false);
    EXPECT_EQ(gemm.epilogue(), c.epilogue);
    std::vector<float> y(m * n, -7);
    void *args[] = {x.data(), w.data(), c.bias ? b.data() : nullptr,
                    c.residual ? r.data() : nullptr, y.data()};
    std::string error;
    std::vector<char> workspace(kGemmWorkspaceBytes);
    ASSERT_EQ(gemm.run(args, nullptr, workspace.data(), error), 0) << error;
    expectNear(y, linearReference(x, w, c.bias ? b.data() : nullptr,
                                  c.residual ? r.data() : nullptr, m, k, n,
                                  c.activation, false));
  }
}

// bf16 descriptors multiply bf16-rounded operands with f32 accumulation.
TEST(LibraryGemm, LinearBf16) {
  const int64_t m = 3, k = 16, n = 4;
  auto x = randomVector(m * k, 5), w = randomVector(n * k, 6);
  LibraryGemm gemm(fakeBlas(), handle(),
                   linear(m, k, n, false, 0, false, TFM_DTYPE_BF16), 0, false);
  std::vector<float> y(m * n);
  void *args[] = {x.data(), w.data(), nullptr, nullptr, y.data()};
  std::string error;
  ASSERT_EQ(gemm.run(args, nullptr, nullptr, error), 0) << error;
  expectNear(y, linearReference(x, w, nullptr, nullptr, m, k, n, 0, true));
  // Unrounded operands give another result, so the rounding is checked.
  auto exact = linearReference(x, w, nullptr, nullptr, m, k, n, 0, false);
  double diff = 0;
  for (size_t i = 0; i < y.size(); ++i)
    diff = std::max(diff, double(std::fabs(y[i] - exact[i])));
  EXPECT_GT(diff, 1e-5);
}

/// Attention's scores q·kᵀ of sequence-first heads ([S, H, dh] rows, the
/// heads as the batch, H·dh apart within a row) as a BATCH_MATMUL.
tfm_abi_kernel_desc_t headScores(int64_t s, int64_t h, int64_t dh,
                                 int32_t dtype) {
  tfm_abi_kernel_desc_t d{};
  d.kind = TFM_KERNEL_BATCH_MATMUL;
  d.dtype = dtype;
  int64_t params[] = {1, h, s, dh, s};
  std::memcpy(d.params, params, sizeof params);
  int64_t strides[12] = {0, dh, h * dh, 1, 0, dh, 1, h * dh, 0, s * s, s, 1};
  std::memcpy(d.strides, strides, sizeof strides);
  return d;
}

/// headScores's definition, in double: [H, S, S].
std::vector<float> headScoresReference(const std::vector<float> &q,
                                       const std::vector<float> &k, int64_t s,
                                       int64_t h, int64_t dh) {
  std::vector<float> want(h * s * s);
  for (int64_t head = 0; head < h; ++head)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < dh; ++p)
          sum += double(q[i * h * dh + head * dh + p]) *
                 k[j * h * dh + head * dh + p];
        want[head * s * s + i * s + j] = float(sum);
      }
  return want;
}

/// The 16-bit pattern of `x` in `dtype` (bf16 or f16), rounded to nearest
/// even as the compiler rounds, and the value it holds.
uint16_t narrowBits(float x, int32_t dtype) {
  uint16_t h;
  if (dtype == TFM_DTYPE_F16) {
    _Float16 v = static_cast<_Float16>(x);
    std::memcpy(&h, &v, 2);
    return h;
  }
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
float narrowValue(uint16_t h, int32_t dtype) {
  if (dtype == TFM_DTYPE_F16) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return static_cast<float>(v);
  }
  uint32_t u = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Operands held in bf16 or f16 (TFM_KERNEL_FLAG_NARROW_OPERANDS) are read
// as 16-bit matrices, with the bias, the epilogue and the output in f32;
// read as f32 they would give other numbers.
TEST(LibraryGemm, LinearNarrowOperands) {
  const int64_t m = 3, k = 16, n = 4;
  auto x = randomVector(m * k, 13), w = randomVector(n * k, 14),
       b = randomVector(n, 15);
  for (int32_t dtype : {TFM_DTYPE_BF16, TFM_DTYPE_F16}) {
    SCOPED_TRACE(dtype);
    LibraryGemm gemm(fakeBlas(), handle(),
                     linear(m, k, n, true, TFM_ACTIVATION_RELU, false, dtype),
                     TFM_KERNEL_FLAG_NARROW_OPERANDS, false);
    EXPECT_EQ(gemm.epilogue(), CUBLASLT_EPILOGUE_RELU_BIAS);
    std::vector<uint16_t> xs(x.size()), ws(w.size());
    std::vector<float> xr(x.size()), wr(w.size());
    for (size_t i = 0; i < x.size(); ++i)
      xr[i] = narrowValue(xs[i] = narrowBits(x[i], dtype), dtype);
    for (size_t i = 0; i < w.size(); ++i)
      wr[i] = narrowValue(ws[i] = narrowBits(w[i], dtype), dtype);
    std::vector<float> y(m * n, -7);
    void *args[] = {xs.data(), ws.data(), b.data(), nullptr, y.data()};
    std::string error;
    ASSERT_EQ(gemm.run(args, nullptr, nullptr, error), 0) << error;
    expectNear(y, linearReference(xr, wr, b.data(), nullptr, m, k, n,
                                  TFM_ACTIVATION_RELU, false));
  }
  // 16-bit operands of an f32 GEMM name no type to read them in.
  try {
    LibraryGemm gemm(fakeBlas(), handle(), linear(m, k, n, false, 0, false),
                     TFM_KERNEL_FLAG_NARROW_OPERANDS, false);
    ADD_FAILURE() << "an f32 GEMM took 16-bit operands";
  } catch (const DeviceError &e) {
    EXPECT_EQ(std::string(e.what()),
              "cuBLASLt cannot run this GEMM: 16-bit operands of an f32 GEMM");
  }
}

// Attention's scores from bf16 copies of sequence-first heads: the batch
// and leading dimensions count 16-bit elements.
TEST(LibraryGemm, BatchMatmulNarrowOperands) {
  const int64_t s = 5, h = 3, dh = 8;
  auto q = randomVector(s * h * dh, 16), kk = randomVector(s * h * dh, 17);
  std::vector<uint16_t> qs(q.size()), ks(kk.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] =
        narrowValue(qs[i] = narrowBits(q[i], TFM_DTYPE_BF16), TFM_DTYPE_BF16);
    kk[i] =
        narrowValue(ks[i] = narrowBits(kk[i], TFM_DTYPE_BF16), TFM_DTYPE_BF16);
  }
  LibraryGemm gemm(fakeBlas(), handle(), headScores(s, h, dh, TFM_DTYPE_BF16),
                   TFM_KERNEL_FLAG_NARROW_OPERANDS, false);
  std::vector<float> scores(h * s * s, -7);
  void *args[] = {qs.data(), ks.data(), scores.data()};
  std::string error;
  ASSERT_EQ(gemm.run(args, nullptr, nullptr, error), 0) << error;
  expectNear(scores, headScoresReference(q, kk, s, h, dh));
}

// Attention's two products on sequence-first heads, strided in place, and
// a batched product whose second operand is shared by the batch.
TEST(LibraryGemm, BatchMatmulStrides) {
  const int64_t s = 5, h = 3, dh = 4;
  auto q = randomVector(s * h * dh, 7), kk = randomVector(s * h * dh, 8);
  tfm_abi_kernel_desc_t d = headScores(s, h, dh, TFM_DTYPE_F32);
  LibraryGemm gemm(fakeBlas(), handle(), d, 0, false);
  std::vector<float> scores(h * s * s, -7);
  void *args[] = {q.data(), kk.data(), scores.data()};
  std::string error;
  ASSERT_EQ(gemm.run(args, nullptr, nullptr, error), 0) << error;
  expectNear(scores, headScoresReference(q, kk, s, h, dh));

  // c[b] = a[b] · w, w [K, N] shared (batch stride 0), c column-major
  // within each matrix (its rows strided), which takes the unswapped call.
  const int64_t batch = 2, m = 3, k = 4, n = 2;
  auto a = randomVector(batch * m * k, 9), w = randomVector(k * n, 10);
  int64_t s2[12] = {0, m * k, k, 1, 0, 0, n, 1, 0, m * n, 1, m};
  std::memcpy(d.strides, s2, sizeof s2);
  int64_t p2[] = {1, batch, m, k, n};
  std::memcpy(d.params, p2, sizeof p2);
  LibraryGemm shared(fakeBlas(), handle(), d, 0, false);
  EXPECT_FALSE(shared.layout().swapped);
  std::vector<float> c(batch * m * n, -7);
  void *args2[] = {a.data(), w.data(), c.data()};
  ASSERT_EQ(shared.run(args2, nullptr, nullptr, error), 0) << error;
  std::vector<float> want2(batch * m * n);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += double(a[bi * m * k + i * k + p]) * w[p * n + j];
        want2[bi * m * n + j * m + i] = float(sum);
      }
  expectNear(c, want2);
}

// The algorithm is chosen once for the operands' alignments, and a less
// aligned operand (a packed projection's part) gets an algorithm chosen
// for it rather than one that assumes 256 bytes.
TEST(LibraryGemm, AlgorithmChosenOncePerAlignment) {
  std::string log = ::testing::TempDir() + "cublaslt_alignment.log";
  std::remove(log.c_str());
  setenv("TFM_FAKE_CUBLASLT_LOG", log.c_str(), 1);
  const int64_t m = 2, k = 3, n = 4;
  auto x = randomVector(m * k + 1, 11), w = randomVector(n * k, 12);
  LibraryGemm gemm(fakeBlas(), handle(), linear(m, k, n, false, 0, false), 0,
                   false);
  std::vector<float> y(m * n);
  std::string error;
  for (int run = 0; run < 2; ++run) {
    void *args[] = {x.data() + 1, w.data(), nullptr, nullptr, y.data()};
    ASSERT_EQ(gemm.run(args, nullptr, nullptr, error), 0) << error;
  }
  unsetenv("TFM_FAKE_CUBLASLT_LOG");
  std::string text = readLog(log);
  EXPECT_EQ(count(text, "algoGetHeuristic"), 1u) << text;
  EXPECT_EQ(count(text, "matmul 4x2x3"), 2u) << text;
  std::vector<float> shifted(x.begin() + 1, x.end());
  expectNear(y,
             linearReference(shifted, w, nullptr, nullptr, m, k, n, 0, false));
}

// What the library cannot fuse is refused when the session is prepared,
// naming why; a failing call names the GEMM.
TEST(LibraryGemm, RefusalsAndFailures) {
  auto refused = [](const tfm_abi_kernel_desc_t &d) -> std::string {
    try {
      LibraryGemm gemm(fakeBlas(), handle(), d, 0, false);
    } catch (const DeviceError &e) {
      EXPECT_EQ(e.code, TFM_STATUS_INCOMPATIBLE);
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refused(linear(2, 3, 4, true, TFM_ACTIVATION_GELU, false)),
            "cuBLASLt cannot run this GEMM: its activation (2) has no "
            "cuBLASLt epilogue");
  EXPECT_EQ(refused(linear(2, 3, 4, true, TFM_ACTIVATION_RELU, true)),
            "cuBLASLt cannot run this GEMM: a residual after an activation");

  setenv("TFM_FAKE_CUBLASLT_FAIL", "matmul", 1);
  LibraryGemm gemm(fakeBlas(), handle(), linear(2, 3, 4, false, 0, false), 0,
                   false);
  std::vector<float> x(6), w(12), y(8);
  void *args[] = {x.data(), w.data(), nullptr, nullptr, y.data()};
  std::string error;
  EXPECT_NE(gemm.run(args, nullptr, nullptr, error), 0);
  EXPECT_EQ(error, "cuBLASLt's GEMM (4 × 2 × 3, batch 1) failed: "
                   "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested "
                   "is not supported)");
  setenv("TFM_FAKE_CUBLASLT_FAIL", "heuristic", 1);
  LibraryGemm other(fakeBlas(), handle(), linear(2, 3, 5, false, 0, false), 0,
                    false);
  std::vector<float> w2(15), y2(10);
  void *args2[] = {x.data(), w2.data(), nullptr, nullptr, y2.data()};
  EXPECT_NE(other.run(args2, nullptr, nullptr, error), 0);
  EXPECT_EQ(error.rfind("cuBLASLt has no algorithm for this GEMM (5 × 2 × 3, "
                        "batch 1)",
                        0),
            0u)
      << error;
  unsetenv("TFM_FAKE_CUBLASLT_FAIL");
}

namespace {

/// The message of `s`, released; "" for success.
std::string messageOf(tfm_status_t s) {
  if (!s)
    return "";
  std::string m = tfm_status_message(s);
  tfm_status_free(s);
  return m;
}

} // namespace

// A GPU model's tensor maps: the session encodes each once through
// cuTensorMapEncodeTiled (the stand-in logs it and writes what it was
// given) into device memory, 64-byte aligned, where "map" reads it back;
// a second run, recorded as a graph, asks again and gets the same map.
// The driver's refusal of a description is never reached for one the
// runtime refuses first.
TEST(CudaDevice, EncodesTensorMapsOnce) {
  fakeBlas();
  setenv("TFM_CUDA_DRIVER", TFM_FAKE_CUDA_DRIVER, 1);
  std::string log = ::testing::TempDir() + "tensor_maps.log";
  std::remove(log.c_str());
  setenv("TFM_FAKE_CUDA_LOG", log.c_str(), 1);
  tfm::Context context;
  tfm::Module module(context, TFM_FAKE_CUDA_MODEL);
  tfm::Session session(module);
  std::vector<float> xs = {1, 2, 3, 4, 5, 6};
  tfm::Tensor x = tfm::Tensor::view(xs, {2, 3});
  for (int run = 0; run < 3; ++run)
    EXPECT_NO_THROW(session.run("map", {{"x", &x}}));
  try {
    session.run("bad_map", {{"x", &x}});
    ADD_FAILURE() << "bad_map ran";
  } catch (const tfm::Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "cannot make a tensor map for a TMA load: its stride along "
                  "dim 1 is 12 bytes"),
              std::string::npos)
        << e.what();
  }
  unsetenv("TFM_FAKE_CUDA_LOG");
  std::ifstream in(log);
  std::string line, maps;
  while (std::getline(in, line))
    if (line.rfind("tensor map", 0) == 0)
      maps += line + "\n";
  EXPECT_EQ(maps, "tensor map type 7 rank 2 dims 4 3 strides 16 box 4 2 "
                  "swizzle 0\n");
}

// A model for a GPU whose entry calls a LINEAR descriptor, through the C
// API: the session makes the cuBLASLt call when it is created, and a run
// copies x to the device (the stand-in driver's host memory), runs the
// call there and copies y back. y = x · (2·I)ᵀ.
TEST(CudaDevice, RunsALinearDescriptorThroughCuBLASLt) {
  fakeBlas();
  setenv("TFM_CUDA_DRIVER", TFM_FAKE_CUDA_DRIVER, 1);
  std::string log = ::testing::TempDir() + "cublaslt_session.log";
  std::remove(log.c_str());
  setenv("TFM_FAKE_CUBLASLT_LOG", log.c_str(), 1);
  tfm_context_t *ctx = nullptr;
  ASSERT_EQ(messageOf(tfm_context_create(nullptr, &ctx)), "");
  tfm_module_t *m = nullptr;
  ASSERT_EQ(messageOf(tfm_module_load(ctx, TFM_FAKE_CUDA_MODEL, &m)), "");
  tfm_session_t *s = nullptr;
  ASSERT_EQ(messageOf(tfm_session_create(m, nullptr, &s)), "");
  EXPECT_EQ(std::string(tfm_session_device(s)), "cuda:0");
  EXPECT_NE(
      std::string(tfm_session_describe(s)).find("runs replay CUDA graphs"),
      std::string::npos)
      << tfm_session_describe(s);
  const int64_t d[] = {2, 3};
  // The first run calls the library, the second records the call into a
  // graph and replays it, the third replays it: each on other inputs.
  const float xs[3][6] = {
      {1, 2, 3, 4, 5, 6}, {-1, 0.5f, 7, 8, -9, 10}, {3, -2, 0, 1, 4, -6}};
  for (const float *xv : xs) {
    tfm_tensor_t *x = nullptr, *y = nullptr;
    ASSERT_EQ(messageOf(tfm_tensor_create_copy(TFM_DTYPE_F32, d, 2, xv,
                                               6 * sizeof(float), &x)),
              "");
    tfm_tensor_t *inputs[] = {x};
    ASSERT_EQ(messageOf(tfm_session_run(s, "project", inputs, 1, &y, 1)), "");
    const float *v = static_cast<const float *>(tfm_tensor_data(y));
    for (int i = 0; i < 6; ++i)
      EXPECT_FLOAT_EQ(v[i], 2 * xv[i]);
    tfm_tensor_release(y);
    tfm_tensor_release(x);
  }
  tfm_session_release(s);
  tfm_module_release(m);
  tfm_context_release(ctx);
  unsetenv("TFM_FAKE_CUBLASLT_LOG");
  std::string text = readLog(log);
  EXPECT_EQ(count(text, "algoGetHeuristic"), 1u) << text;
  // Called by the first run, then while the graph was recorded.
  EXPECT_EQ(count(text, "matmul 3x2x3 batch=1 transa=1 transb=0 epilogue=1"),
            2u)
      << text;
}

// Without cuBLASLt, a model whose GEMMs need it is refused when the session
// is created, naming the library and how it was turned off.
TEST(CudaDevice, AModelWithGemmsNeedsCuBLASLt) {
  // The process's library is the stand-in already; a second process sees
  // TFM_CUBLASLT=off.
  if (getenv("TFM_TEST_CHILD")) {
    tfm_context_t *ctx = nullptr;
    tfm_context_create(nullptr, &ctx);
    tfm_module_t *m = nullptr;
    tfm_module_load(ctx, TFM_FAKE_CUDA_MODEL, &m);
    tfm_session_t *s = nullptr;
    fprintf(stderr, "%s\n",
            messageOf(tfm_session_create(m, nullptr, &s)).c_str());
    _exit(0);
  }
  std::string out = ::testing::TempDir() + "cublaslt_off.txt";
  std::string cmd =
      std::string("TFM_TEST_CHILD=1 TFM_CUBLASLT=off "
                  "TFM_CUDA_DRIVER=") +
      TFM_FAKE_CUDA_DRIVER + " " + ::testing::internal::GetArgvs()[0] +
      " --gtest_filter=CudaDevice.AModelWithGemmsNeedsCuBLASLt 2> " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::string text = readLog(out);
  // Its descriptors have no fallback (TFM_KERNEL_FLAG_FALLBACK), so the
  // session cannot decline them.
  EXPECT_NE(text.find("cuda:0: kernel 0 runs in cuBLASLt: cuBLASLt is "
                      "turned off (TFM_CUBLASLT=off)"),
            std::string::npos)
      << text;
}

namespace {

/// A session of the GPU model on the stand-in driver and cuBLASLt, whose
/// driver logs to `log`.
struct FakeGpuSession {
  tfm_context_t *ctx = nullptr;
  tfm_module_t *m = nullptr;
  tfm_session_t *s = nullptr;
  explicit FakeGpuSession(const std::string &log) {
    fakeBlas();
    setenv("TFM_CUDA_DRIVER", TFM_FAKE_CUDA_DRIVER, 1);
    std::remove(log.c_str());
    setenv("TFM_FAKE_CUDA_LOG", log.c_str(), 1);
    EXPECT_EQ(messageOf(tfm_context_create(nullptr, &ctx)), "");
    EXPECT_EQ(messageOf(tfm_module_load(ctx, TFM_FAKE_CUDA_MODEL, &m)), "");
    EXPECT_EQ(messageOf(tfm_session_create(m, nullptr, &s)), "");
  }
  ~FakeGpuSession() {
    tfm_session_release(s);
    tfm_module_release(m);
    tfm_context_release(ctx);
    unsetenv("TFM_FAKE_CUDA_LOG");
  }
};

const int64_t kProjectDims[] = {2, 3};

/// Runs "project" (y = 2·x) on `x`, into `into` when given, else a new
/// tensor on the device; returns the message of a failure, "" on success.
std::string project(tfm_session_t *s, tfm_tensor_t *x, tfm_tensor_t **y,
                    tfm_tensor_t *into = nullptr, bool useStream = false,
                    void *stream = nullptr) {
  tfm_run_options_t o;
  tfm_run_options_init(&o);
  o.outputs_on_device = 1;
  o.use_stream = useStream;
  o.stream = stream;
  tfm_tensor_t *outputs[] = {into};
  tfm_tensor_t *inputs[] = {x};
  std::string message = messageOf(tfm_session_run_with(
      s, "project", &o, nullptr, inputs, 1, nullptr, outputs, 1));
  *y = outputs[0];
  return message;
}

std::vector<float> hostValues(const tfm_tensor_t *t) {
  tfm_tensor_t *host = nullptr;
  EXPECT_EQ(messageOf(tfm_tensor_copy_to_host(t, &host)), "");
  if (!host)
    return {};
  const float *v = static_cast<const float *>(tfm_tensor_data(host));
  std::vector<float> out(v, v + 6);
  tfm_tensor_release(host);
  return out;
}

} // namespace

// A run's outputs made on the device, fed back as the next run's input:
// each run doubles its input, so the values show every copy went where it
// should. The first run goes eagerly and reads and writes the device
// tensors in place; the second records a graph and the others replay it,
// all on the session's own buffers, which the device tensors are copied
// into and out of on the device.
TEST(CudaDevice, DeviceTensorsInAndOut) {
  std::string log = ::testing::TempDir() + "device_tensors.log";
  FakeGpuSession g(log);
  const float xv[6] = {1, 2, 3, 4, 5, 6};
  tfm_tensor_t *x = nullptr;
  ASSERT_EQ(messageOf(tfm_tensor_create_copy(TFM_DTYPE_F32, kProjectDims, 2, xv,
                                             sizeof xv, &x)),
            "");
  tfm_tensor_t *y[4] = {};
  ASSERT_EQ(project(g.s, x, &y[0]), "");
  EXPECT_EQ(std::string(tfm_tensor_device(y[0])), "cuda:0");
  EXPECT_EQ(tfm_tensor_is_view(y[0]), 0);
  std::string eager = readLog(log);
  EXPECT_EQ(count(eager, "device to device"), 0u) << eager;
  for (int run = 1; run < 4; ++run)
    ASSERT_EQ(project(g.s, y[run - 1], &y[run]), "") << "run " << run;
  std::string text = readLog(log);
  EXPECT_EQ(count(text, "graph replay"), 3u) << text;
  // The graphed runs copy their input in and their output out.
  EXPECT_EQ(count(text, "copy 24 bytes device to device"), 6u) << text;
  for (int run = 0; run < 4; ++run) {
    std::vector<float> v = hostValues(y[run]);
    ASSERT_EQ(v.size(), 6u);
    for (int i = 0; i < 6; ++i)
      EXPECT_FLOAT_EQ(v[i], xv[i] * float(2 << run)) << "run " << run;
  }
  // An output written into a device tensor the caller gave.
  tfm_tensor_t *again = nullptr;
  ASSERT_EQ(project(g.s, x, &again, y[3]), "");
  EXPECT_EQ(again, y[3]);
  EXPECT_FLOAT_EQ(hostValues(y[3])[5], 12);
  for (tfm_tensor_t *t : y)
    tfm_tensor_release(t);
  tfm_tensor_release(x);
}

// A tensor on the device outlives its session: it keeps the device.
TEST(CudaDevice, DeviceTensorOutlivesItsSession) {
  tfm_tensor_t *y = nullptr;
  {
    FakeGpuSession g(::testing::TempDir() + "outlives.log");
    const float xv[6] = {1, 2, 3, 4, 5, 6};
    tfm_tensor_t *x = nullptr;
    ASSERT_EQ(messageOf(tfm_tensor_create_copy(TFM_DTYPE_F32, kProjectDims, 2,
                                               xv, sizeof xv, &x)),
              "");
    ASSERT_EQ(project(g.s, x, &y), "");
    tfm_tensor_release(x);
  }
  EXPECT_FLOAT_EQ(hostValues(y)[2], 6);
  tfm_tensor_release(y);
}

// Tensors that are not memory of the session's GPU are refused by name,
// before anything runs.
TEST(CudaDevice, ForeignDeviceTensorsAreRefused) {
  FakeGpuSession g(::testing::TempDir() + "foreign.log");
  float host[6] = {};
  tfm_tensor_t *t = nullptr, *y = nullptr;
  ASSERT_EQ(messageOf(tfm_tensor_create_device_view(
                TFM_DTYPE_F32, kProjectDims, 2, "cuda", host, sizeof host, &t)),
            "");
  EXPECT_EQ(std::string(tfm_tensor_device(t)), "cuda:0");
  EXPECT_NE(project(g.s, t, &y)
                .find("entry 'project': input 'x' is not a "
                      "tensor of cuda:0: "),
            std::string::npos);
  EXPECT_NE(project(g.s, t, &y)
                .find("is not memory the CUDA driver "
                      "allocated"),
            std::string::npos);
  tfm_tensor_release(t);
  ASSERT_EQ(
      messageOf(tfm_tensor_create_device_view(TFM_DTYPE_F32, kProjectDims, 2,
                                              "cuda:1", host, sizeof host, &t)),
      "");
  EXPECT_EQ(project(g.s, t, &y),
            "entry 'project': input 'x' is on cuda:1, but the session "
            "computes on cuda:0; give a tensor on the host or on cuda:0");
  tfm_tensor_release(t);
  // A view that starts inside the GPU's memory but runs past its end.
  tfm_tensor_t *x = nullptr, *real = nullptr;
  ASSERT_EQ(messageOf(tfm_tensor_create_copy(TFM_DTYPE_F32, kProjectDims, 2,
                                             host, sizeof host, &x)),
            "");
  ASSERT_EQ(project(g.s, x, &real), "");
  ASSERT_EQ(
      messageOf(tfm_tensor_create_device_view(
          TFM_DTYPE_F32, kProjectDims, 2, "cuda:0",
          static_cast<float *>(tfm_tensor_data(real)) + 1, sizeof host, &t)),
      "");
  EXPECT_NE(project(g.s, t, &y)
                .find("run past the end of the allocation "
                      "holding it (24 bytes)"),
            std::string::npos);
  // The caller's device memory is the caller's to copy.
  tfm_tensor_t *copy = nullptr;
  EXPECT_NE(messageOf(tfm_tensor_copy_to_host(t, &copy))
                .find("copy it with the library that did"),
            std::string::npos);
  EXPECT_EQ(copy, nullptr);
  EXPECT_NE(
      messageOf(tfm_tensor_create_device_view(TFM_DTYPE_F32, kProjectDims, 2,
                                              "gpu", host, sizeof host, &copy))
          .find("unknown device 'gpu'"),
      std::string::npos);
  tfm_tensor_release(t);
  tfm_tensor_release(real);
  tfm_tensor_release(x);
}

// The kernels read and write entry arguments in 16-byte vectors, proven
// aligned from the runtime's buffer alignment: a device view at another
// address is copied on the device into an aligned buffer first (an
// input) or after (an output), and one at an aligned address is not.
// (Graphs off: a replay copies every device tensor anyway.)
TEST(CudaDevice, DeviceTensorsOffTheBufferAlignmentAreCopied) {
  std::string log = ::testing::TempDir() + "misaligned.log";
  setenv("TFM_CUDA_GRAPHS", "off", 1);
  FakeGpuSession g(log);
  unsetenv("TFM_CUDA_GRAPHS");
  void *driver = dlopen(TFM_FAKE_CUDA_DRIVER, RTLD_NOW);
  ASSERT_NE(driver, nullptr) << dlerror();
  using Alloc = int (*)(unsigned long long *, size_t);
  auto alloc = reinterpret_cast<Alloc>(dlsym(driver, "cuMemAlloc_v2"));
  ASSERT_NE(alloc, nullptr);
  unsigned long long block = 0;
  ASSERT_EQ(alloc(&block, 256), 0);
  float *base = reinterpret_cast<float *>(static_cast<uintptr_t>(block));
  const float xv[6] = {1, 2, 3, 4, 5, 6};
  // x at 4 bytes past the allocation's start, y at 36 (neither a multiple
  // of 64), and an aligned x at 64.
  std::memcpy(base + 1, xv, sizeof xv);
  std::memcpy(base + 16, xv, sizeof xv);
  tfm_tensor_t *x = nullptr, *y = nullptr, *aligned = nullptr;
  ASSERT_EQ(messageOf(tfm_tensor_create_device_view(TFM_DTYPE_F32, kProjectDims,
                                                    2, "cuda:0", base + 1,
                                                    sizeof xv, &x)),
            "");
  ASSERT_EQ(messageOf(tfm_tensor_create_device_view(TFM_DTYPE_F32, kProjectDims,
                                                    2, "cuda:0", base + 9,
                                                    sizeof xv, &y)),
            "");
  ASSERT_EQ(messageOf(tfm_tensor_create_device_view(TFM_DTYPE_F32, kProjectDims,
                                                    2, "cuda:0", base + 16,
                                                    sizeof xv, &aligned)),
            "");
  tfm_tensor_t *out = nullptr;
  ASSERT_EQ(project(g.s, x, &out, y), "");
  EXPECT_EQ(out, y);
  std::string text = readLog(log);
  // One copy in, one copy out.
  EXPECT_EQ(count(text, "copy 24 bytes device to device"), 2u) << text;
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(base[9 + i], 2 * xv[i]) << i;
  tfm_tensor_t *fresh = nullptr;
  ASSERT_EQ(project(g.s, aligned, &fresh), "");
  text = readLog(log);
  EXPECT_EQ(count(text, "copy 24 bytes device to device"), 2u) << text;
  EXPECT_FLOAT_EQ(hostValues(fresh)[5], 12);
  tfm_tensor_release(fresh);
  tfm_tensor_release(aligned);
  tfm_tensor_release(y);
  tfm_tensor_release(x);
  dlclose(driver);
}

// A run ordered with the caller's stream waits for it at the start and
// makes it wait at the end.
TEST(CudaDevice, RunsOrderedWithTheCallersStream) {
  std::string log = ::testing::TempDir() + "stream.log";
  FakeGpuSession g(log);
  const float xv[6] = {1, 2, 3, 4, 5, 6};
  tfm_tensor_t *x = nullptr, *y = nullptr;
  ASSERT_EQ(messageOf(tfm_tensor_create_copy(TFM_DTYPE_F32, kProjectDims, 2, xv,
                                             sizeof xv, &x)),
            "");
  int callerStream = 0;
  ASSERT_EQ(project(g.s, x, &y, nullptr, true, &callerStream), "");
  std::string text = readLog(log);
  size_t mark = text.find("event recorded on a caller's stream\n"
                          "stream 1 waits on the event\n");
  size_t done = text.find("event recorded on stream 1\n"
                          "a caller's stream waits on the event\n");
  EXPECT_NE(mark, std::string::npos) << text;
  EXPECT_NE(done, std::string::npos) << text;
  EXPECT_LT(mark, done) << text;
  EXPECT_EQ(messageOf(tfm_session_synchronize(g.s)), "");
  EXPECT_FLOAT_EQ(hostValues(y)[0], 2);
  tfm_tensor_release(y);
  tfm_tensor_release(x);
}

// The C++ wrapper's device tensors: outputs on the device, a view of the
// device memory fed back, and a host copy of each.
TEST(CudaDevice, TheWrapperRunsOnDeviceTensors) {
  fakeBlas();
  setenv("TFM_CUDA_DRIVER", TFM_FAKE_CUDA_DRIVER, 1);
  tfm::Context context;
  tfm::Module module(context, TFM_FAKE_CUDA_MODEL);
  tfm::Session session(module);
  std::vector<float> xs = {1, 2, 3, 4, 5, 6};
  tfm::Tensor x = tfm::Tensor::view(xs, {2, 3});
  auto first =
      session.run("project", {{"x", &x}}, tfm::RunOptions().outputsOnDevice());
  tfm::Tensor &y = first.at("y");
  EXPECT_EQ(y.device(), "cuda:0");
  tfm::Tensor view = tfm::Tensor::deviceView(TFM_DTYPE_F32, {2, 3}, "cuda:0",
                                             y.data<void>(), 6 * sizeof(float));
  EXPECT_TRUE(view.isView());
  auto second = session.run("project", {{"x", &view}});
  EXPECT_EQ(second.at("y").device(), "cpu");
  EXPECT_FLOAT_EQ(second.at("y").data<float>()[5], 24);
  EXPECT_FLOAT_EQ(y.toHost().data<float>()[5], 12);
  EXPECT_THROW(view.toHost(), tfm::Error);
}

// A GPU model's checks write their outcome to slots in the state: the run
// reports the first failure once it is done, with no outputs, and the next
// run starts from every check passed. (Graphs off: the stand-in driver
// replays launches, not the host code that stands in for the check's
// kernel in this model.)
TEST(CudaDevice, ChecksWrittenToTheStateAreReadAfterTheRun) {
  setenv("TFM_CUDA_GRAPHS", "off", 1);
  FakeGpuSession g(::testing::TempDir() + "checks.log");
  unsetenv("TFM_CUDA_GRAPHS");
  const int64_t bd[] = {3};
  const float bias[3] = {1, 2, 3};
  for (float first : {-3.0f, 5.0f, 250.0f}) {
    const float xv[6] = {first, 1, 2, 3, 4, 5};
    tfm_tensor_t *x = nullptr, *b = nullptr, *y = nullptr;
    ASSERT_EQ(messageOf(tfm_tensor_create_copy(TFM_DTYPE_F32, kProjectDims, 2,
                                               xv, sizeof xv, &x)),
              "");
    ASSERT_EQ(messageOf(tfm_tensor_create_copy(TFM_DTYPE_F32, bd, 1, bias,
                                               sizeof bias, &b)),
              "");
    tfm_tensor_t *inputs[] = {x, b};
    tfm_status_t s = tfm_session_run(g.s, "infer", inputs, 2, &y, 1);
    if (first == 5.0f) {
      EXPECT_EQ(messageOf(s), "");
      ASSERT_NE(y, nullptr);
      // x + bias + the weights' [100, 200, 300].
      EXPECT_FLOAT_EQ(static_cast<float *>(tfm_tensor_data(y))[0], 106);
    } else {
      EXPECT_EQ(tfm_status_code(s), TFM_STATUS_INVALID_ARGUMENT);
      EXPECT_EQ(messageOf(s),
                fmt::format("entry 'infer': input 'x' holds {} at [0, 0], "
                            "outside [0, 100) that node 'Gather_1' (Gather) "
                            "reads",
                            int64_t(first)));
      EXPECT_EQ(y, nullptr);
    }
    tfm_tensor_release(y);
    tfm_tensor_release(b);
    tfm_tensor_release(x);
  }
}
