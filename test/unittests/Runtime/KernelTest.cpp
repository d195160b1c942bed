//===- KernelTest.cpp - oneDNN kernels against the reference interpreter --===//
//
// Each kernel runs on random f32 data and is compared with the reference
// interpreter evaluating the tfm op it implements, in double, at rtol 1e-4
// and atol 1e-5.
//
//===----------------------------------------------------------------------===//

#include "../Reference/TestUtil.h"
#include "cpu/Engine.h"
#include "cpu/Kernels.h"
#include "tfm/Reference/Ops.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

using namespace mlir::tfm::testing;
using mlir::tfm::reference::Tensor;
namespace cpu = tfm::runtime::cpu;

namespace {

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

Tensor asTensor(const std::vector<float> &v, std::vector<int64_t> shape) {
  return f32(std::move(shape), std::vector<double>(v.begin(), v.end()));
}

void expectClose(const std::vector<float> &got, const Tensor &want) {
  ASSERT_EQ(got.size(), want.data.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want.data[i], 1e-5 + 1e-4 * std::fabs(want.data[i]))
        << "at " << i;
}

std::unique_ptr<cpu::Kernel> make(tfm_abi_kernel_desc_t d) {
  d.dtype = TFM_DTYPE_F32;
  std::string error;
  auto k = cpu::makeKernel(cpu::makeEngine(), d, 0, error);
  EXPECT_TRUE(k) << error;
  return k;
}

TEST(Kernel, LinearWithBiasGeluAndResidual) {
  const int64_t M = 6, K = 16, N = 10;
  auto x = randomFloats(M * K, 1), w = randomFloats(N * K, 2),
       b = randomFloats(N, 3), r = randomFloats(M * N, 4);
  for (int act : {0, 1, 2, 3}) {
    auto k = make({TFM_KERNEL_LINEAR, 0, {M, K, N, 1, act, 1}, {}});
    std::vector<float> y(M * N);
    void *args[] = {x.data(), w.data(), b.data(), r.data(), y.data()};
    ASSERT_EQ(k->run(args), 0);
    static const char *acts[] = {"", " activation = relu",
                                 " activation = gelu",
                                 " activation = gelu_tanh"};
    InterpreterHarness h;
    std::string src = std::string(R"mlir(
      func.func @infer(%x: tensor<6x16xf32>, %w: tensor<10x16xf32>, %b: tensor<10xf32>, %r: tensor<6x10xf32>) -> tensor<6x10xf32> {
        %0 = tfm.linear %x, %w, %b)mlir") + acts[act] + R"mlir( : (tensor<6x16xf32>, tensor<10x16xf32>, tensor<10xf32>) -> tensor<6x10xf32>
        %1 = tfm.add %0, %r : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32>
        return %1 : tensor<6x10xf32>
      })mlir";
    auto want = h.eval(src, {asTensor(x, {M, K}), asTensor(w, {N, K}),
                             asTensor(b, {N}), asTensor(r, {M, N})});
    expectClose(y, want.at(0));
  }
}

// Layers of one shape share a kernel: each call with constant weights
// must use its own, packed at its first call (layer 1, 2, 1 again).
TEST(Kernel, LinearSharedByLayersKeepsEachLayersWeights) {
  const int64_t M = 80, K = 32, N = 48;
  auto x = randomFloats(M * K, 21);
  std::vector<std::vector<float>> w = {randomFloats(N * K, 22),
                                       randomFloats(N * K, 23)};
  auto k = make({TFM_KERNEL_LINEAR, 0, {M, K, N, 0, 0, 0, /*constant=*/1}, {}});
  for (int layer : {0, 1, 0}) {
    std::vector<float> y(M * N);
    void *args[] = {x.data(), w[layer].data(), nullptr, nullptr, y.data()};
    ASSERT_EQ(k->run(args), 0);
    InterpreterHarness h;
    auto want = h.eval(R"mlir(
      func.func @infer(%x: tensor<80x32xf32>, %w: tensor<48x32xf32>) -> tensor<80x48xf32> {
        %0 = tfm.linear %x, %w : (tensor<80x32xf32>, tensor<48x32xf32>) -> tensor<80x48xf32>
        return %0 : tensor<80x48xf32>
      })mlir",
                       {asTensor(x, {M, K}), asTensor(w[layer], {N, K})});
    expectClose(y, want.at(0));
  }
}

// One to four rows (a decoding step, a beam): the GEMV kernel, with every
// activation, a K that is not a multiple of the vector width and an N that
// ends inside a block and inside a group of four weight rows.
TEST(Kernel, LinearGemvRows) {
  const int64_t K = 37, N = 203;
  static const char *acts[] = {"", " activation = relu", " activation = gelu",
                               " activation = gelu_tanh", " activation = silu"};
  for (int64_t M : {1, 2, 3, 4})
    for (int act : {0, 1, 2, 3, 4}) {
      auto x = randomFloats(M * K, 21), w = randomFloats(N * K, 22),
           b = randomFloats(N, 23), r = randomFloats(M * N, 24);
      auto k = make({TFM_KERNEL_LINEAR, 0, {M, K, N, 1, act, 1, 1}, {}});
      std::vector<float> y(M * N);
      void *args[] = {x.data(), w.data(), b.data(), r.data(), y.data()};
      ASSERT_EQ(k->run(args), 0);
      std::string m = std::to_string(M);
      std::string xt = "tensor<" + m + "x37xf32>", yt = "tensor<" + m + "x203xf32>";
      InterpreterHarness h;
      auto want = h.eval(
          "func.func @infer(%x: " + xt + ", %w: tensor<203x37xf32>, %b: tensor<203xf32>, %r: " +
              yt + ") -> " + yt + " {\n  %0 = tfm.linear %x, %w, %b" + acts[act] + " : (" + xt +
              ", tensor<203x37xf32>, tensor<203xf32>) -> " + yt + "\n  %1 = tfm.add %0, %r : (" +
              yt + ", " + yt + ") -> " + yt + "\n  return %1 : " + yt + "\n}",
          {asTensor(x, {M, K}), asTensor(w, {N, K}), asTensor(b, {N}), asTensor(r, {M, N})});
      expectClose(y, want.at(0));
    }
}

// Shapes that end inside every block of the AVX2 kernel (PackedLinear.cpp,
// which ctest's kernel-rows-AVX2 runs; elsewhere oneDNN's): rows past a tile
// of 6 and a block of 144, K past a block of 256, N inside a panel of 16,
// and one panel for two threads (the rows split instead). Every activation,
// with and without bias and residual; weights that change between runs are
// packed again.
TEST(Kernel, LinearEndsInsideTheRegisterTiles) {
  static const char *acts[] = {"", " activation = relu", " activation = gelu",
                               " activation = gelu_tanh", " activation = silu"};
  struct Shape {
    int64_t m, k, n;
  };
  for (Shape s : {Shape{13, 300, 37}, Shape{150, 40, 10}, Shape{7, 512, 16}})
    for (int act : {0, 1, 2, 3, 4})
      for (bool constant : {true, false}) {
        bool extras = act != 1; // relu without bias or residual
        SCOPED_TRACE("m " + std::to_string(s.m) + " k " + std::to_string(s.k) +
                     " n " + std::to_string(s.n) + " act " +
                     std::to_string(act) + (constant ? " constant" : ""));
        auto x = randomFloats(s.m * s.k, 31), w = randomFloats(s.n * s.k, 32),
             b = randomFloats(s.n, 33), r = randomFloats(s.m * s.n, 34);
        auto k = make({TFM_KERNEL_LINEAR,
                       0,
                       {s.m, s.k, s.n, extras, act, extras, constant},
                       {}});
        std::string xt = "tensor<" + std::to_string(s.m) + "x" +
                         std::to_string(s.k) + "xf32>",
                    wt = "tensor<" + std::to_string(s.n) + "x" +
                         std::to_string(s.k) + "xf32>",
                    bt = "tensor<" + std::to_string(s.n) + "xf32>",
                    yt = "tensor<" + std::to_string(s.m) + "x" +
                         std::to_string(s.n) + "xf32>";
        std::string src =
            extras ? "func.func @infer(%x: " + xt + ", %w: " + wt +
                         ", %b: " + bt + ", %r: " + yt + ") -> " + yt +
                         " {\n  %0 = tfm.linear %x, %w, %b" + acts[act] +
                         " : (" + xt + ", " + wt + ", " + bt + ") -> " + yt +
                         "\n  %1 = tfm.add %0, %r : (" + yt + ", " + yt +
                         ") -> " + yt + "\n  return %1 : " + yt + "\n}"
                   : "func.func @infer(%x: " + xt + ", %w: " + wt + ") -> " +
                         yt + " {\n  %0 = tfm.linear %x, %w" + acts[act] +
                         " : (" + xt + ", " + wt + ") -> " + yt +
                         "\n  return %0 : " + yt + "\n}";
        // Twice, the weights changed in place between the runs (an update
        // of training's; constant weights are not changed).
        for (int run = 0; run < 2; ++run) {
          if (run == 1 && !constant)
            for (float &v : w)
              v = -0.5f * v;
          std::vector<float> y(s.m * s.n);
          void *args[] = {x.data(), w.data(), extras ? b.data() : nullptr,
                          extras ? r.data() : nullptr, y.data()};
          ASSERT_EQ(k->run(args), 0);
          InterpreterHarness h;
          std::vector<Tensor> inputs = {asTensor(x, {s.m, s.k}),
                                        asTensor(w, {s.n, s.k})};
          if (extras) {
            inputs.push_back(asTensor(b, {s.n}));
            inputs.push_back(asTensor(r, {s.m, s.n}));
          }
          expectClose(y, h.eval(src, inputs).at(0));
        }
      }
}

/// `v` rounded to the nearest bf16 value, ties to even (finite `v` only).
float bf16Rounded(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &u, 4);
  return v;
}

std::vector<float> bf16Rounded(std::vector<float> v) {
  for (float &x : v)
    x = bf16Rounded(x);
  return v;
}

// Few rows (more than the GEMV takes) and many columns: the kernel splits
// the columns over the threads (with 2 threads, N = 300 makes two parts of
// 160 and 140), with constant weights packed once and in bf16. A bf16 GEMM
// multiplies the operands rounded to bf16, exactly, and sums in f32: the
// oracle is the interpreter on the rounded operands, at f32's tolerance.
// That holds on a CPU with bf16 instructions and, through the f32 kernel on
// rounded operands, on one without (ctest's kernel-rows-AVX2 runs this
// again as such a CPU).
TEST(Kernel, LinearSplitByColumnsPackedAndBf16) {
  const int64_t M = 8, K = 32, N = 300;
  auto x = randomFloats(M * K, 11), w = randomFloats(N * K, 12),
       b = randomFloats(N, 13), r = randomFloats(M * N, 14);
  // Another layer's weights through the same kernel: each layer's are
  // packed (and rounded) on their own.
  auto w2 = randomFloats(N * K, 15);
  const char *model = R"mlir(
    func.func @infer(%x: tensor<8x32xf32>, %w: tensor<300x32xf32>, %b: tensor<300xf32>, %r: tensor<8x300xf32>) -> tensor<8x300xf32> {
      %0 = tfm.linear %x, %w, %b activation = gelu : (tensor<8x32xf32>, tensor<300x32xf32>, tensor<300xf32>) -> tensor<8x300xf32>
      %1 = tfm.add %0, %r : (tensor<8x300xf32>, tensor<8x300xf32>) -> tensor<8x300xf32>
      return %1 : tensor<8x300xf32>
    })mlir";
  for (int32_t dtype : {TFM_DTYPE_F32, TFM_DTYPE_BF16}) {
    SCOPED_TRACE(dtype == TFM_DTYPE_F32 ? "f32" : "bf16");
    bool bf16 = dtype == TFM_DTYPE_BF16;
    InterpreterHarness h;
    auto oracle = [&](const std::vector<float> &weights) {
      return h
          .eval(model, {asTensor(bf16 ? bf16Rounded(x) : x, {M, K}),
                        asTensor(bf16 ? bf16Rounded(weights) : weights, {N, K}),
                        asTensor(b, {N}), asTensor(r, {M, N})})
          .at(0);
    };
    Tensor want = oracle(w), want2 = oracle(w2);
    tfm_abi_kernel_desc_t d{TFM_KERNEL_LINEAR, 0, {M, K, N, 1, 2, 1, 1}, {}};
    std::string error;
    d.dtype = dtype;
    auto k = cpu::makeKernel(cpu::makeEngine(), d, 0, error);
    ASSERT_TRUE(k) << error;
    // Twice each: the second run reuses the packed weights.
    for (int run = 0; run < 4; ++run) {
      std::vector<float> y(M * N);
      float *weights = run < 2 ? w.data() : w2.data();
      void *args[] = {x.data(), weights, b.data(), r.data(), y.data()};
      ASSERT_EQ(k->run(args), 0);
      expectClose(y, run < 2 ? want : want2);
    }
  }
}

// The bf16 GEMM is oneDNN's where the CPU has bf16 instructions; and
// DNNL_MAX_CPU_ISA=AVX2 stands in for a CPU without them, so that ctest's
// kernel-rows-AVX2 run takes the f32 path on any host.
TEST(Kernel, Bf16PathFollowsTheCpuAndTheIsaCap) {
  const char *cap = std::getenv("DNNL_MAX_CPU_ISA");
  bool narrow = cap && (std::strncmp(cap, "AVX2", 4) == 0 ||
                        std::strncmp(cap, "SSE", 3) == 0);
  if (cap && !narrow)
    GTEST_SKIP() << "DNNL_MAX_CPU_ISA=" << cap;
  EXPECT_EQ(cpu::multipliesBf16(),
            !narrow && __builtin_cpu_supports("avx512bf16"));
}

/// `values` as an MLIR dense literal of `type`, in rows of `cols` when
/// given (a 2-D literal nests them).
std::string denseLiteral(const std::vector<int> &values, const std::string &type,
                         size_t cols = 0) {
  std::string s = "dense<[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (cols && i % cols == 0)
      s += std::string(i ? "], " : "") + "[";
    else if (i)
      s += ", ";
    s += std::to_string(values[i]);
  }
  return s + (cols ? "]" : "") + "]> : " + type;
}

// QUANTIZED_LINEAR against the interpreter's tfm.quantized_linear: int8
// weights with a zero point and a scale per row, and uint8 ones with one of
// each, over sizes that fill no vector evenly; an input whose range spans
// both signs (with one NaN in the full-range cases), so that many pairs of products exceed the 16 bits that
// vpmaddubsw sums them in. Without VNNI (or under DNNL_MAX_CPU_ISA=AVX2,
// kernel-rows-AVX2) the kernel's own widened product runs, and must be as
// exact; without AVX2 either (kernel-rows-SSE41) the kernel is refused,
// naming why, so that the generated code runs instead.
TEST(Kernel, QuantizedLinearDynamicInt8) {
  const int64_t N = 19;
  std::mt19937 gen(66);
  std::uniform_int_distribution<int> s8(-128, 127), u8(0, 255);
  auto b = randomFloats(N, 8);
  // 150 rows: the row blocks (64 and 64 and 22), each a thread's; K = 1101:
  // the widened product's chunks of K (512), the last one odd.
  // Weights within 7 bits (|w - 128| <= 64 for uint8), which oneDNN's
  // 16-bit pair sums take exactly even without VNNI; beyond; and weights of
  // 127 with inputs near the top of their range, each pair 2 · 255 · 127.
  enum Range { Full, SevenBit, Saturating };
  std::uniform_int_distribution<int> s7(-64, 64), u7(64, 192);
  for (Range range : {Full, SevenBit, Saturating})
  for (int64_t K : {37, 1101})
  for (int64_t M : {5, 150})
  for (bool isUnsigned : {false, true}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " K=" + std::to_string(K) +
                 " range " + std::to_string(range));
    auto x = randomFloats(M * K, 7);
    if (range == Saturating)
      for (float &v : x)
        v = v < -0.9f ? v : 0.95f + 0.05f * v;
    // A NaN, which moves neither end of the range and quantizes to the
    // zero point.
    if (range == Full)
      x[M * K / 2] = NAN;
    tfm_abi_kernel_desc_t d{TFM_KERNEL_QUANTIZED_LINEAR,
                            TFM_DTYPE_F32,
                            {M, K, N, 1, TFM_ACTIVATION_GELU,
                             TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT |
                                 (isUnsigned
                                      ? TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS
                                      : TFM_QUANTIZED_LINEAR_PER_ROW)},
                            {}};
    std::string error;
    auto k = cpu::makeKernel(cpu::makeEngine(), d, 0, error);
    if (!cpu::multipliesInt8Exactly() &&
        cpu::vectorIsa() == cpu::VectorIsa::Scalar) {
      EXPECT_FALSE(k);
      EXPECT_NE(error.find("neither VNNI nor AVX2"), std::string::npos)
          << error;
      continue;
    }
    ASSERT_TRUE(k) << error;
    std::vector<int> w(N * K), zp(isUnsigned ? 1 : N);
    for (int &v : w)
      v = range == SevenBit    ? (isUnsigned ? u7(gen) : s7(gen))
          : range == Saturating ? (isUnsigned ? 255 : 127)
                                : (isUnsigned ? u8(gen) : s8(gen));
    // Symmetric int8 weights (every zero point 0, as quantize_dynamic
    // writes them) take oneDNN's fused epilogue; the others the kernel's.
    for (int &v : zp)
      v = isUnsigned ? u8(gen) : range == Full ? s8(gen) / 4 : 0;
    std::vector<float> ws(isUnsigned ? 1 : N);
    for (size_t i = 0; i < ws.size(); ++i)
      ws[i] = 0.01f + 0.001f * static_cast<float>(i);
    std::vector<int8_t> wBytes(w.begin(), w.end()), zBytes(zp.begin(), zp.end());
    std::vector<float> y(M * N);
    void *args[] = {x.data(), wBytes.data(), ws.data(), zBytes.data(), b.data(),
                    y.data()};
    ASSERT_EQ(k->run(args), 0);
    std::string it = isUnsigned ? "ui8" : "i8";
    std::string wType = "tensor<19x" + std::to_string(K) + "x" + it + ">";
    std::string pType = isUnsigned ? "tensor<" + it + ">" : "tensor<19x" + it + ">";
    std::string sType = isUnsigned ? "tensor<f32>" : "tensor<19xf32>";
    std::string scales = "dense<[";
    for (size_t i = 0; i < ws.size(); ++i)
      scales += (i ? ", " : "") + std::to_string(ws[i]);
    scales += "]> : " + sType;
    if (isUnsigned)
      scales = "dense<" + std::to_string(ws[0]) + "> : " + sType;
    std::string zLiteral = isUnsigned ? "dense<" + std::to_string(zp[0]) + "> : " + pType
                                      : denseLiteral(zp, pType);
    InterpreterHarness h;
    std::string xType = "tensor<" + std::to_string(M) + "x" +
                        std::to_string(K) + "xf32>",
                yType = "tensor<" + std::to_string(M) + "x19xf32>";
    std::string src = R"mlir(
      func.func @infer(%x: )mlir" + xType + R"mlir(, %b: tensor<19xf32>) -> )mlir" + yType + R"mlir( {
        %w = arith.constant )mlir" + denseLiteral(w, wType, K) + R"mlir(
        %s = arith.constant )mlir" + scales + R"mlir(
        %z = arith.constant )mlir" + zLiteral + R"mlir(
        %0 = tfm.quantized_linear %x, %w scale %s zero_point %z bias %b input_quantization = dynamic activation = gelu : ()mlir" + xType + ", " +
                      wType + ", " + sType + ", " + pType + R"mlir(, tensor<19xf32>) -> )mlir" + yType + R"mlir(
        return %0 : )mlir" + yType + R"mlir(
      })mlir";
    auto want = h.eval(src, {asTensor(x, {M, K}), asTensor(b, {N})});
    ASSERT_EQ(want.size(), 1u) << h.diagnostics;
    expectClose(y, want.at(0));
  }
}

/// `values` as an MLIR dense f32 literal of `type`, in rows of `cols` when
/// given.
std::string floatLiteral(const std::vector<float> &values,
                         const std::string &type, size_t cols = 0) {
  std::string s = "dense<[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (cols && i % cols == 0)
      s += std::string(i ? "], " : "") + "[";
    else if (i)
      s += ", ";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", values[i]);
    s += buf;
  }
  return s + (cols ? "]" : "") + "]> : " + type;
}

// QUANTIZED_LINEAR with STATIC_INPUT against the interpreter's
// tfm.quantized_linear with input_quantization = static: uint8 and int8
// inputs (the int8 zero point given 128 more), a scale small enough that
// most of the input saturates at either end, a NaN (which quantizes to the
// zero point), and full-range int8 weights, so that under
// DNNL_MAX_CPU_ISA=AVX2 (kernel-rows-AVX2) the widened product runs.
TEST(Kernel, QuantizedLinearStaticInput) {
  const int64_t N = 21;
  std::mt19937 gen(67);
  std::uniform_int_distribution<int> s8(-128, 127);
  auto b = randomFloats(N, 10);
  for (bool signedInput : {false, true})
  for (int64_t K : {37, 1101})
  for (int64_t M : {3, 70}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " K=" + std::to_string(K) +
                 (signedInput ? " int8 input" : " uint8 input"));
    auto x = randomFloats(M * K, 11);
    x[K + 2] = NAN;
    const float xs = signedInput ? 0.006f : 0.004f;
    const int xz = signedInput ? -20 : 100;
    tfm_abi_kernel_desc_t d{TFM_KERNEL_QUANTIZED_LINEAR,
                            TFM_DTYPE_F32,
                            {M, K, N, 1, TFM_ACTIVATION_RELU,
                             TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT |
                                 TFM_QUANTIZED_LINEAR_PER_ROW |
                                 TFM_QUANTIZED_LINEAR_STATIC_INPUT,
                             0, signedInput ? xz + 128 : xz},
                            {xs}};
    std::string error;
    auto k = cpu::makeKernel(cpu::makeEngine(), d, 0, error);
    if (!cpu::multipliesInt8Exactly() &&
        cpu::vectorIsa() == cpu::VectorIsa::Scalar) {
      EXPECT_FALSE(k);
      continue;
    }
    ASSERT_TRUE(k) << error;
    std::vector<int> w(N * K), zp(N);
    for (int &v : w)
      v = s8(gen);
    // The int8 input with symmetric weights: oneDNN's fused epilogue.
    for (int &v : zp)
      v = signedInput ? 0 : s8(gen) / 4;
    std::vector<float> ws(N);
    for (size_t i = 0; i < ws.size(); ++i)
      ws[i] = 0.002f + 0.0003f * static_cast<float>(i);
    std::vector<int8_t> wBytes(w.begin(), w.end()), zBytes(zp.begin(), zp.end());
    std::vector<float> y(M * N);
    void *args[] = {x.data(), wBytes.data(), ws.data(), zBytes.data(), b.data(),
                    y.data()};
    ASSERT_EQ(k->run(args), 0);
    std::string wType = "tensor<21x" + std::to_string(K) + "xi8>";
    std::string xType = "tensor<" + std::to_string(M) + "x" +
                        std::to_string(K) + "xf32>",
                yType = "tensor<" + std::to_string(M) + "x21xf32>",
                xzType = signedInput ? "tensor<i8>" : "tensor<ui8>";
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.9g", xs);
    std::string src =
        "func.func @infer(%x: " + xType + ", %b: tensor<21xf32>) -> " + yType +
        " {\n  %w = arith.constant " + denseLiteral(w, wType, K) +
        "\n  %s = arith.constant " + floatLiteral(ws, "tensor<21xf32>") +
        "\n  %z = arith.constant " + denseLiteral(zp, "tensor<21xi8>") +
        "\n  %xs = arith.constant dense<" + scale + "> : tensor<f32>" +
        "\n  %xz = arith.constant dense<" + std::to_string(xz) + "> : " +
        xzType +
        "\n  %0 = tfm.quantized_linear %x, %w scale %s zero_point %z bias %b "
        "input_scale %xs input_zero_point %xz input_quantization = static "
        "activation = relu : (" +
        xType + ", " + wType + ", tensor<21xf32>, tensor<21xi8>, " +
        "tensor<21xf32>, tensor<f32>, " + xzType + ") -> " + yType +
        "\n  return %0 : " + yType + "\n}";
    InterpreterHarness h;
    auto want = h.eval(src, {asTensor(x, {M, K}), asTensor(b, {N})});
    ASSERT_EQ(want.size(), 1u) << h.diagnostics << "\n" << src;
    expectClose(y, want.at(0));
  }
}

// QUANTIZED_LINEAR with WEIGHT_ONLY against the interpreter's
// tfm.quantized_linear with input_quantization = none: 4- and 8-bit
// weights, signed and unsigned, with and without zero points, per tensor,
// per row and per block (16, 32, 64), K no multiple of a group or longer
// than the kernel's chunk of blocks, and row
// counts that take one pass (1 to 4 rows), several (5 to 16) and the sgemm
// panels (more). Under DNNL_MAX_CPU_ISA=AVX2 and SSE41 (kernel-rows-*), the
// AVX2 and portable bodies. With BLOCKED_INPUT, against input_quantization
// = blocked: the integer bodies (4 bits, blocks of 32, 64, 128 and 256;
// natively on a CPU with AVX-512 VNNI its body, whose quads of groups end
// with 1, 2 or 3 groups here, and under kernel-rows-* the AVX2 one, whose
// pairs end with an odd group), 1 to 4 rows, and more in several passes;
// and the float bodies on the rounded input elsewhere (8 bits, blocks of
// 16, the panels). An input kept in float would miss by far more than the
// tolerance. On AVX-512, 4-bit weights in float take the tiles of 16
// columns, N past a whole tile, in the passes of rows and the panels.
TEST(Kernel, QuantizedLinearWeightOnly) {
  struct Case {
    int64_t m, k, n;
    unsigned bits;
    bool isUnsigned, zeroPoint;
    int scales; // 0: the tensor's, 1: a row's, 2: a block's
    int64_t block;
    int act;
    bool blocked = false;
  };
  const Case cases[] = {
      {1, 100, 19, 4, false, false, 2, 32, TFM_ACTIVATION_NONE},
      {3, 77, 21, 4, true, true, 2, 16, TFM_ACTIVATION_GELU},
      {5, 64, 33, 8, false, true, 1, 0, TFM_ACTIVATION_RELU},
      {2, 150, 17, 8, true, true, 2, 64, TFM_ACTIVATION_SILU},
      {4, 37, 9, 4, true, false, 0, 0, TFM_ACTIVATION_NONE},
      {16, 45, 12, 4, false, true, 2, 64, TFM_ACTIVATION_NONE},
      {1, 600, 5, 4, true, true, 2, 32, TFM_ACTIVATION_NONE},
      // More blocks than the kernel takes z·s of at once (256).
      {1, 8300, 3, 4, true, true, 2, 32, TFM_ACTIVATION_NONE},
      {2, 4200, 3, 4, false, true, 2, 16, TFM_ACTIVATION_NONE},
      {20, 96, 130, 4, true, true, 2, 32, TFM_ACTIVATION_GELU},
      // The panels with two blocks a group (each half its own scale).
      {24, 80, 40, 4, true, true, 2, 16, TFM_ACTIVATION_NONE},
      {33, 50, 7, 8, false, false, 2, 16, TFM_ACTIVATION_NONE},
      {1, 96, 19, 4, true, true, 2, 32, TFM_ACTIVATION_NONE, true},
      {3, 128, 21, 4, false, true, 2, 64, TFM_ACTIVATION_GELU, true},
      {4, 64, 9, 4, true, false, 2, 32, TFM_ACTIVATION_NONE, true},
      {7, 160, 13, 4, true, true, 2, 32, TFM_ACTIVATION_NONE, true},
      {2, 256, 11, 4, true, true, 2, 128, TFM_ACTIVATION_NONE, true},
      {2, 96, 17, 8, true, true, 2, 32, TFM_ACTIVATION_NONE, true},
      {1, 64, 7, 4, true, true, 2, 16, TFM_ACTIVATION_NONE, true},
      {20, 64, 30, 4, true, true, 2, 32, TFM_ACTIVATION_NONE, true},
      {1, 480, 19, 4, true, true, 2, 32, TFM_ACTIVATION_NONE, true},
      {2, 448, 9, 4, false, true, 2, 64, TFM_ACTIVATION_NONE, true},
      {16, 224, 5, 4, true, false, 2, 32, TFM_ACTIVATION_RELU, true},
      {1, 640, 7, 4, true, true, 2, 128, TFM_ACTIVATION_NONE, true},
      {4, 1024, 6, 4, false, false, 2, 256, TFM_ACTIVATION_NONE, true},
      // On AVX-512, 4-bit weights in float are read in tiles of 16
      // columns: N past a whole tile, several passes of rows, blocks of 128,
      // of a row (K no multiple of a group), of 48 (three half-groups), and
      // the panels from tiles.
      {4, 256, 40, 4, true, true, 2, 128, TFM_ACTIVATION_NONE},
      {6, 200, 50, 4, false, true, 1, 0, TFM_ACTIVATION_SILU},
      {2, 96, 35, 4, true, true, 2, 48, TFM_ACTIVATION_NONE},
      {40, 128, 70, 4, false, false, 2, 64, TFM_ACTIVATION_RELU},
  };
  std::mt19937 gen(69);
  for (const Case &c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " K=" + std::to_string(c.k) +
                 " bits=" + std::to_string(c.bits) +
                 " block=" + std::to_string(c.block) +
                 (c.blocked ? " blocked" : ""));
    int lo = c.isUnsigned ? 0 : -(1 << (c.bits - 1));
    int hi = c.isUnsigned ? (1 << c.bits) - 1 : (1 << (c.bits - 1)) - 1;
    std::uniform_int_distribution<int> value(lo, hi);
    int64_t blocks = c.scales == 2 ? (c.k + c.block - 1) / c.block : 1;
    int64_t params = c.scales == 0 ? 1 : c.n * blocks;
    std::vector<int> w(c.n * c.k), zp(params);
    for (int &v : w)
      v = value(gen);
    for (int &v : zp)
      v = value(gen);
    std::vector<float> ws(params);
    for (size_t i = 0; i < ws.size(); ++i)
      ws[i] = 0.004f + 0.0005f * static_cast<float>(i % 13);
    auto x = randomFloats(c.m * c.k, 70), b = randomFloats(c.n, 71);
    int64_t flags =
        TFM_QUANTIZED_LINEAR_WEIGHT_ONLY |
        (c.bits == 4 ? TFM_QUANTIZED_LINEAR_FOUR_BIT : 0) |
        (c.isUnsigned ? TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS : 0) |
        (c.scales ? TFM_QUANTIZED_LINEAR_PER_ROW : 0) |
        (c.zeroPoint ? TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT : 0) |
        (c.blocked ? TFM_QUANTIZED_LINEAR_BLOCKED_INPUT : 0);
    tfm_abi_kernel_desc_t d{TFM_KERNEL_QUANTIZED_LINEAR,
                            TFM_DTYPE_F32,
                            {c.m, c.k, c.n, 1, c.act, flags,
                             c.scales == 2 ? c.block : 0},
                            {}};
    std::string error;
    auto k = cpu::makeKernel(cpu::makeEngine(), d, 0, error);
    ASSERT_TRUE(k) << error;
    // A byte each, sign- or zero-extended, as the artifact holds them.
    std::vector<int8_t> wBytes(w.begin(), w.end()), zBytes(zp.begin(), zp.end());
    std::vector<float> y(c.m * c.n);
    void *args[] = {x.data(), wBytes.data(), ws.data(),
                    c.zeroPoint ? zBytes.data() : nullptr, b.data(), y.data()};
    // Twice: the second run reads the packed weights.
    for (int run = 0; run < 2; ++run)
      ASSERT_EQ(k->run(args), 0);

    std::string it = std::string(c.isUnsigned ? "ui" : "i") +
                     std::to_string(c.bits);
    std::string wType = "tensor<" + std::to_string(c.n) + "x" +
                        std::to_string(c.k) + "x" + it + ">";
    std::string pShape =
        c.scales == 0   ? ""
        : c.scales == 1 ? std::to_string(c.n) + "x"
                        : std::to_string(c.n) + "x" + std::to_string(blocks) + "x";
    std::string sType = "tensor<" + pShape + "f32>",
                zType = "tensor<" + pShape + it + ">";
    size_t cols = c.scales == 2 ? blocks : 0;
    std::string sLiteral = floatLiteral(ws, sType, cols),
                zLiteral = denseLiteral(zp, zType, cols);
    if (c.scales == 0) {
      // Rank 0: a splat.
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", ws[0]);
      sLiteral = "dense<" + std::string(buf) + "> : " + sType;
      zLiteral = "dense<" + std::to_string(zp[0]) + "> : " + zType;
    }
    std::string xType = "tensor<" + std::to_string(c.m) + "x" +
                        std::to_string(c.k) + "xf32>";
    std::string yType = "tensor<" + std::to_string(c.m) + "x" +
                        std::to_string(c.n) + "xf32>";
    std::string bType = "tensor<" + std::to_string(c.n) + "xf32>";
    const char *acts[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};
    std::string src =
        "func.func @infer(%x: " + xType + ", %b: " + bType + ") -> " + yType +
        " {\n  %w = arith.constant " + denseLiteral(w, wType, c.k) +
        "\n  %s = arith.constant " + sLiteral +
        (c.zeroPoint ? "\n  %z = arith.constant " + zLiteral : "") +
        "\n  %0 = tfm.quantized_linear %x, %w scale %s" +
        (c.zeroPoint ? " zero_point %z" : "") + " bias %b" +
        (c.blocked ? " input_quantization = blocked" : "") +
        " activation = " + acts[c.act] +
        (c.scales == 2 ? " block_size = " + std::to_string(c.block) : "") +
        " : (" + xType + ", " + wType + ", " + sType +
        (c.zeroPoint ? ", " + zType : "") + ", " + bType + ") -> " + yType +
        "\n  return %0 : " + yType + "\n}";
    InterpreterHarness h;
    auto want = h.eval(src, {asTensor(x, {c.m, c.k}), asTensor(b, {c.n})});
    ASSERT_EQ(want.size(), 1u) << h.diagnostics << "\n" << src;
    expectClose(y, want.at(0));
  }
}

// A weight-only QUANTIZED_LINEAR's blocks are multiples of 16 (or all of
// K): a block of 24 straddles the kernel's half-groups, and is refused,
// naming the block.
// A session's kernels that read one weight tensor in one layout share its
// packed form (Engine::derived): a decoder's prompt (20 rows, the panels)
// packs it, and its step (1 row) reads that form. The step's output must
// be bit for bit a step's on weights it packed itself, on an engine of its
// own. With a blocked input, the step's integer body (VNNI's, AVX2's) reads
// another layout than the prompt's panels, and must not take theirs.
TEST(Kernel, QuantizedLinearWeightOnlySharesPackedWeights) {
  for (bool blocked : {false, true}) {
  SCOPED_TRACE(blocked ? "blocked input" : "float input");
  const int64_t K = 96, N = 40, blocks = K / 32;
  std::mt19937 gen(68);
  std::uniform_int_distribution<int> u4(0, 15);
  std::vector<int8_t> w(N * K), z(N * blocks);
  for (int8_t &v : w)
    v = static_cast<int8_t>(u4(gen));
  for (int8_t &v : z)
    v = static_cast<int8_t>(u4(gen));
  std::vector<float> ws(N * blocks, 0.01f), b(N, 0.f);
  auto x = randomFloats(20 * K, 72);
  const int64_t flags =
      TFM_QUANTIZED_LINEAR_WEIGHT_ONLY | TFM_QUANTIZED_LINEAR_FOUR_BIT |
      TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS | TFM_QUANTIZED_LINEAR_PER_ROW |
      TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT |
      (blocked ? TFM_QUANTIZED_LINEAR_BLOCKED_INPUT : 0);
  auto desc = [&](int64_t m) {
    return tfm_abi_kernel_desc_t{TFM_KERNEL_QUANTIZED_LINEAR,
                                 TFM_DTYPE_F32,
                                 {m, K, N, 0, 0, flags, 32},
                                 {}};
  };
  std::string error;
  auto shared = cpu::makeEngine();
  auto prompt = cpu::makeKernel(shared, desc(20), 0, error);
  auto step = cpu::makeKernel(shared, desc(1), 0, error);
  auto alone = cpu::makeKernel(cpu::makeEngine(), desc(1), 0, error);
  ASSERT_TRUE(prompt && step && alone) << error;
  std::vector<float> y20(20 * N), y1(N), yAlone(N);
  void *a20[] = {x.data(), w.data(), ws.data(), z.data(), b.data(), y20.data()};
  void *a1[] = {x.data(), w.data(), ws.data(), z.data(), b.data(), y1.data()};
  void *aAlone[] = {x.data(), w.data(), ws.data(), z.data(), b.data(),
                    yAlone.data()};
  ASSERT_EQ(prompt->run(a20), 0);
  ASSERT_EQ(step->run(a1), 0);
  ASSERT_EQ(alone->run(aAlone), 0);
  EXPECT_EQ(y1, yAlone);
  for (int64_t j = 0; j < N; ++j)
    EXPECT_NEAR(y1[j], y20[j], 1e-5 + 1e-4 * std::fabs(y20[j])) << "at " << j;
  }
}

// Engine::derived makes a form once per tensor and layout.
TEST(Kernel, EngineMakesEachDerivedFormOnce) {
  cpu::Engine e;
  int made = 0, tensor = 0, other = 0;
  auto make = [&] {
    ++made;
    return std::make_shared<int>(made);
  };
  auto a = e.derived(&tensor, "one", make), b = e.derived(&tensor, "one", make);
  auto c = e.derived(&tensor, "two", make), d = e.derived(&other, "one", make);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  EXPECT_EQ(made, 3);
}

TEST(Kernel, QuantizedLinearWeightOnlyRefusesOddBlocks) {
  tfm_abi_kernel_desc_t d{
      TFM_KERNEL_QUANTIZED_LINEAR,
      TFM_DTYPE_F32,
      {2, 96, 8, 0, 0,
       TFM_QUANTIZED_LINEAR_WEIGHT_ONLY | TFM_QUANTIZED_LINEAR_FOUR_BIT |
           TFM_QUANTIZED_LINEAR_PER_ROW,
       24},
      {}};
  std::string error;
  EXPECT_FALSE(cpu::makeKernel(cpu::makeEngine(), d, 0, error));
  EXPECT_NE(error.find("not 24"), std::string::npos) << error;
}

TEST(Kernel, BatchMatmulTransposed) {
  const int64_t B = 3, M = 4, K = 8, N = 5;
  auto a = randomFloats(B * M * K, 5), bt = randomFloats(B * N * K, 6);
  // b is stored [B, N, K]; its strides read it as [B, K, N].
  auto k = make({TFM_KERNEL_BATCH_MATMUL, 0, {B, 1, M, K, N}, {},
                 {M * K, M * K, K, 1, N * K, N * K, 1, K, M * N, M * N, N, 1}});
  std::vector<float> c(B * M * N);
  void *args[] = {a.data(), bt.data(), c.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%a: tensor<3x4x8xf32>, %b: tensor<3x5x8xf32>) -> tensor<3x4x5xf32> {
      %0 = tfm.matmul %a, %b transpose_rhs : (tensor<3x4x8xf32>, tensor<3x5x8xf32>) -> tensor<3x4x5xf32>
      return %0 : tensor<3x4x5xf32>
    })mlir",
                     {asTensor(a, {B, M, K}), asTensor(bt, {B, N, K})});
  expectClose(c, want.at(0));
}

// Attention reads q as stored by the projections, [B, S, H, D], through
// strides as [B, H, S, D], and writes its result [B, H, S, S] transposed to
// [B, S, H, S]: no copies.
TEST(Kernel, BatchMatmulStridedOperands) {
  const int64_t B = 2, H = 3, S = 4, D = 5;
  auto q = randomFloats(B * S * H * D, 7), kt = randomFloats(B * S * H * D, 8);
  auto k = make({TFM_KERNEL_BATCH_MATMUL, 0, {B, H, S, D, S}, {},
                 {S * H * D, D, H * D, 1,     // q[b, h, s, d]
                  S * H * D, D, 1, H * D,     // k read as [b, h, d, s]
                  S * H * S, S, H * S, 1}});  // c[b, h, s, t] at [b, s, h, t]
  std::vector<float> c(B * S * H * S);
  void *args[] = {q.data(), kt.data(), c.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%q: tensor<2x4x3x5xf32>, %k: tensor<2x4x3x5xf32>) -> tensor<2x4x3x4xf32> {
      %qt = tfm.transpose %q permutation = [0, 2, 1, 3] : tensor<2x4x3x5xf32> -> tensor<2x3x4x5xf32>
      %kt = tfm.transpose %k permutation = [0, 2, 1, 3] : tensor<2x4x3x5xf32> -> tensor<2x3x4x5xf32>
      %s = tfm.matmul %qt, %kt transpose_rhs : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x4xf32>
      %r = tfm.transpose %s permutation = [0, 2, 1, 3] : tensor<2x3x4x4xf32> -> tensor<2x4x3x4xf32>
      return %r : tensor<2x4x3x4xf32>
    })mlir",
                     {asTensor(q, {B, S, H, D}), asTensor(kt, {B, S, H, D})});
  expectClose(c, want.at(0));
}

// The heads of sequence-first tensors, [S, B·H, D], as a training step's
// attention reads and writes them: scores = q·kᵀ, then p·v into the same
// layout. oneDNN runs these in place, without the dense copies.
TEST(Kernel, BatchMatmulSequenceFirstHeads) {
  const int64_t BH = 6, S = 16, D = 8;
  auto q = randomFloats(S * BH * D, 23), kv = randomFloats(S * BH * D, 24);
  auto scores = make({TFM_KERNEL_BATCH_MATMUL, 0, {1, BH, S, D, S}, {},
                      {0, D, BH * D, 1,        // q[h, s, d] at [s, h, d]
                       0, D, 1, BH * D,        // k read as [h, d, s]
                       0, S, BH * S, 1}});     // p[h, s, t] at [s, h, t]
  auto weighted = make({TFM_KERNEL_BATCH_MATMUL, 0, {1, BH, S, S, D}, {},
                        {0, S, BH * S, 1,      // p[h, s, t] at [s, h, t]
                         0, D, BH * D, 1,      // v[h, t, d] at [t, h, d]
                         0, D, BH * D, 1}});   // o[h, s, d] at [s, h, d]
  std::vector<float> p(S * BH * S), o(S * BH * D);
  void *first[] = {q.data(), kv.data(), p.data()};
  ASSERT_EQ(scores->run(first), 0);
  void *second[] = {p.data(), kv.data(), o.data()};
  ASSERT_EQ(weighted->run(second), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%q: tensor<16x6x8xf32>, %k: tensor<16x6x8xf32>) -> (tensor<16x6x16xf32>, tensor<16x6x8xf32>) {
      %qt = tfm.transpose %q permutation = [1, 0, 2] : tensor<16x6x8xf32> -> tensor<6x16x8xf32>
      %kt = tfm.transpose %k permutation = [1, 0, 2] : tensor<16x6x8xf32> -> tensor<6x16x8xf32>
      %s = tfm.matmul %qt, %kt transpose_rhs : (tensor<6x16x8xf32>, tensor<6x16x8xf32>) -> tensor<6x16x16xf32>
      %o = tfm.matmul %s, %kt : (tensor<6x16x16xf32>, tensor<6x16x8xf32>) -> tensor<6x16x8xf32>
      %sr = tfm.transpose %s permutation = [1, 0, 2] : tensor<6x16x16xf32> -> tensor<16x6x16xf32>
      %or = tfm.transpose %o permutation = [1, 0, 2] : tensor<6x16x8xf32> -> tensor<16x6x8xf32>
      return %sr, %or : tensor<16x6x16xf32>, tensor<16x6x8xf32>
    })mlir",
                     {asTensor(q, {S, BH, D}), asTensor(kv, {S, BH, D})});
  expectClose(p, want.at(0));
  expectClose(o, want.at(1));
}

// One right operand shared by every batch (batch stride 0): oneDNN has only
// its reference kernel for that layout in place, so the kernel goes through
// the dense copies instead.
TEST(Kernel, BatchMatmulBroadcastOperand) {
  const int64_t B = 4, M = 3, K = 5, N = 6;
  auto a = randomFloats(B * M * K, 25), w = randomFloats(K * N, 26);
  auto k = make({TFM_KERNEL_BATCH_MATMUL, 0, {1, B, M, K, N}, {},
                 {0, M * K, K, 1, 0, 0, N, 1, 0, M * N, N, 1}});
  std::vector<float> c(B * M * N);
  void *args[] = {a.data(), w.data(), c.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%a: tensor<4x3x5xf32>, %w: tensor<5x6xf32>) -> tensor<4x3x6xf32> {
      %c = tfm.matmul %a, %w : (tensor<4x3x5xf32>, tensor<5x6xf32>) -> tensor<4x3x6xf32>
      return %c : tensor<4x3x6xf32>
    })mlir",
                     {asTensor(a, {B, M, K}), asTensor(w, {K, N})});
  expectClose(c, want.at(0));
}

// A transpose [B, S, H, D] -> [B, H, S, D] as a reorder between layouts.
TEST(Kernel, ReorderTransposes) {
  const int64_t B = 2, S = 3, H = 4, D = 5;
  auto x = randomFloats(B * S * H * D, 9);
  auto k = make({TFM_KERNEL_REORDER, 0, {4, B, H, S, D}, {},
                 {S * H * D, D, H * D, 1, 0, 0,   // x read as [b, h, s, d]
                  H * S * D, S * D, D, 1, 0, 0}}); // y dense
  std::vector<float> y(x.size());
  void *args[] = {x.data(), y.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%x: tensor<2x3x4x5xf32>) -> tensor<2x4x3x5xf32> {
      %t = tfm.transpose %x permutation = [0, 2, 1, 3] : tensor<2x3x4x5xf32> -> tensor<2x4x3x5xf32>
      return %t : tensor<2x4x3x5xf32>
    })mlir",
                     {asTensor(x, {B, S, H, D})});
  expectClose(y, want.at(0));
}

TEST(Kernel, MaskedSoftmaxPaddingMaskAndCausal) {
  // Scores [2 batches, 3 heads, 4, 4]; mask [2, 1, 1, 4] broadcast over
  // heads and rows: group g = b·3 + h reads mask row g / 3.
  const int64_t Bt = 2, H = 3, S = 4;
  auto x = randomFloats(Bt * H * S * S, 7), m = randomFloats(Bt * S, 8);
  auto k = make({TFM_KERNEL_MASKED_SOFTMAX, 0,
                 {Bt * H, S, S, /*causal=*/1, /*mask=*/1, H, S, 0}, {0.5}});
  std::vector<float> y(x.size());
  void *args[] = {x.data(), m.data(), y.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%s: tensor<2x3x4x4xf32>, %m: tensor<2x1x1x4xf32>) -> tensor<2x3x4x4xf32> {
      %0 = tfm.masked_softmax %s, mask %m mask_kind = additive causal {scale = 5.000000e-01 : f64} : (tensor<2x3x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x3x4x4xf32>
      return %0 : tensor<2x3x4x4xf32>
    })mlir",
                     {asTensor(x, {Bt, H, S, S}), asTensor(m, {Bt, 1, 1, S})});
  expectClose(y, want.at(0));
}

// Attention over [B, S, H, D] layouts, Sq queries over 600 keys (a full
// block of 512 and a ragged one), a key mask per batch row, and values
// narrower than the keys.
void checkStridedMaskedAttention(int64_t Sq) {
  const int64_t B = 2, H = 2, Sk = 600, D = 8, Dv = 4;
  auto q = randomFloats(B * Sq * H * D, 11), key = randomFloats(B * Sk * H * D, 12),
       v = randomFloats(B * Sk * H * Dv, 13), m = randomFloats(B * Sk, 14);
  for (int64_t j = 500; j < Sk; ++j)
    m[j] = -INFINITY; // the first batch row's last keys are padding
  auto k = make({TFM_KERNEL_ATTENTION, 0,
                 {B, H, Sq, Sk, D, Dv,
                  TFM_ATTENTION_HAS_MASK | TFM_ATTENTION_MASK_B1},
                 {0.3},
                 {Sq * H * D, D, H * D,     // q[b, h, s, :] at [b, s, h, :]
                  Sk * H * D, D, H * D,     // k
                  Sk * H * Dv, Dv, H * Dv,  // v
                  Sq * H * Dv, Dv, H * Dv}}); // o written as [b, s, h, :]
  std::vector<float> o(B * Sq * H * Dv);
  void *args[] = {q.data(), key.data(), v.data(), m.data(), o.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  std::string sq = std::to_string(Sq);
  std::string ir = R"mlir(
    func.func @infer(%q: tensor<2xSQx2x8xf32>, %k: tensor<2x600x2x8xf32>, %v: tensor<2x600x2x4xf32>, %m: tensor<2x1x1x600xf32>) -> tensor<2xSQx2x4xf32> {
      %qt = tfm.transpose %q permutation = [0, 2, 1, 3] : tensor<2xSQx2x8xf32> -> tensor<2x2xSQx8xf32>
      %kt = tfm.transpose %k permutation = [0, 2, 1, 3] : tensor<2x600x2x8xf32> -> tensor<2x2x600x8xf32>
      %vt = tfm.transpose %v permutation = [0, 2, 1, 3] : tensor<2x600x2x4xf32> -> tensor<2x2x600x4xf32>
      %a = tfm.attention %qt, %kt, %vt, mask %m {scale = 3.000000e-01 : f64} : (tensor<2x2xSQx8xf32>, tensor<2x2x600x8xf32>, tensor<2x2x600x4xf32>, tensor<2x1x1x600xf32>) -> tensor<2x2xSQx4xf32>
      %r = tfm.transpose %a permutation = [0, 2, 1, 3] : tensor<2x2xSQx4xf32> -> tensor<2xSQx2x4xf32>
      return %r : tensor<2xSQx2x4xf32>
    })mlir";
  for (size_t at; (at = ir.find("SQ")) != std::string::npos;)
    ir.replace(at, 2, sq);
  auto want = h.eval(ir,
                     {asTensor(q, {B, Sq, H, D}), asTensor(key, {B, Sk, H, D}),
                      asTensor(v, {B, Sk, H, Dv}), asTensor(m, {B, 1, 1, Sk})});
  expectClose(o, want.at(0));
}

// 70 queries: one query block, read in place.
TEST(Kernel, AttentionStridedMaskedOverKeyBlocks) {
  checkStridedMaskedAttention(70);
}

// 300 queries: two query blocks, the second ragged, so the kernel packs the
// keys and values once per run and copies each query block dense.
TEST(Kernel, AttentionStridedMaskedPackedBlocks) {
  checkStridedMaskedAttention(300);
}

// Causal attention over 600 positions: the last query blocks walk two key
// blocks, the second cut short by the triangle.
TEST(Kernel, AttentionCausalOverKeyBlocks) {
  const int64_t H = 2, S = 600, D = 4;
  auto q = randomFloats(H * S * D, 15), key = randomFloats(H * S * D, 16),
       v = randomFloats(H * S * D, 17);
  auto k = make({TFM_KERNEL_ATTENTION, 0,
                 {1, H, S, S, D, D, TFM_ATTENTION_CAUSAL},
                 {0.5},
                 {0, S * D, D, 0, S * D, D, 0, S * D, D, 0, S * D, D}});
  std::vector<float> o(H * S * D);
  void *args[] = {q.data(), key.data(), v.data(), nullptr, o.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%q: tensor<2x600x4xf32>, %k: tensor<2x600x4xf32>, %v: tensor<2x600x4xf32>) -> tensor<2x600x4xf32> {
      %a = tfm.attention %q, %k, %v causal {scale = 5.000000e-01 : f64} : (tensor<2x600x4xf32>, tensor<2x600x4xf32>, tensor<2x600x4xf32>) -> tensor<2x600x4xf32>
      return %a : tensor<2x600x4xf32>
    })mlir",
                     {asTensor(q, {H, S, D}), asTensor(key, {H, S, D}),
                      asTensor(v, {H, S, D})});
  expectClose(o, want.at(0));
}

// Grouped-query attention: 6 query heads over 2 key and value heads, 300
// queries (two blocks, so the keys and values are packed once per key head),
// causal. The expected values repeat each key and value head for its 3 query
// heads and attend plainly.
TEST(Kernel, AttentionGroupedQueryHeads) {
  const int64_t H = 6, KV = 2, G = H / KV, S = 300, D = 8;
  auto q = randomFloats(H * S * D, 18), key = randomFloats(KV * S * D, 19),
       v = randomFloats(KV * S * D, 20);
  auto k =
      make({TFM_KERNEL_ATTENTION,
            0,
            {1, H, S, S, D, D, TFM_ATTENTION_CAUSAL | TFM_ATTENTION_GROUPED, G},
            {0.5},
            {0, S * D, D, 0, S * D, D, 0, S * D, D, 0, S * D, D}});
  std::vector<float> o(H * S * D);
  void *args[] = {q.data(), key.data(), v.data(), nullptr, o.data()};
  ASSERT_EQ(k->run(args), 0);
  std::vector<float> keys, values;
  for (int64_t h = 0; h < H; ++h) {
    keys.insert(keys.end(), key.begin() + h / G * S * D,
                key.begin() + (h / G + 1) * S * D);
    values.insert(values.end(), v.begin() + h / G * S * D,
                  v.begin() + (h / G + 1) * S * D);
  }
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%q: tensor<6x300x8xf32>, %k: tensor<6x300x8xf32>, %v: tensor<6x300x8xf32>) -> tensor<6x300x8xf32> {
      %a = tfm.attention %q, %k, %v causal {scale = 5.000000e-01 : f64} : (tensor<6x300x8xf32>, tensor<6x300x8xf32>, tensor<6x300x8xf32>) -> tensor<6x300x8xf32>
      return %a : tensor<6x300x8xf32>
    })mlir",
                     {asTensor(q, {H, S, D}), asTensor(keys, {H, S, D}),
                      asTensor(values, {H, S, D})});
  expectClose(o, want.at(0));
}

// A decoding step's attention: one query a head, grouped heads (6 over 2),
// keys kept as kᵀ, and a mask whose trailing -inf are the cache positions
// not yet written (25 of 40 in one batch row, 37 in the other). Past them
// the kernel's keys and values hold NaN: read, they would poison the rows.
TEST(Kernel, AttentionFewQueriesTransposedKeysReadTheWrittenPrefix) {
  const int64_t B = 2, H = 6, KV = 2, G = H / KV, Sk = 40, D = 20, Dv = 12;
  const int64_t written[B] = {25, 37};
  auto q = randomFloats(B * H * D, 31), kt = randomFloats(B * KV * D * Sk, 32),
       v = randomFloats(B * KV * Sk * Dv, 33), m = randomFloats(B * Sk, 34);
  // The interpreter's operands: keys [B, H, Sk, D] and values [B, H, Sk, Dv],
  // each key and value head repeated for its group.
  std::vector<float> keys(B * H * Sk * D), values(B * H * Sk * Dv);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < Sk; ++j) {
        for (int64_t c = 0; c < D; ++c)
          keys[((b * H + h) * Sk + j) * D + c] =
              kt[((b * KV + h / G) * D + c) * Sk + j];
        for (int64_t c = 0; c < Dv; ++c)
          values[((b * H + h) * Sk + j) * Dv + c] =
              v[((b * KV + h / G) * Sk + j) * Dv + c];
      }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = written[b]; j < Sk; ++j) {
      m[b * Sk + j] = -INFINITY;
      for (int64_t h = 0; h < KV; ++h) {
        for (int64_t c = 0; c < D; ++c)
          kt[((b * KV + h) * D + c) * Sk + j] = NAN;
        for (int64_t c = 0; c < Dv; ++c)
          v[((b * KV + h) * Sk + j) * Dv + c] = NAN;
      }
    }
  auto k = make({TFM_KERNEL_ATTENTION, 0,
                 {B, H, 1, Sk, D, Dv,
                  TFM_ATTENTION_HAS_MASK | TFM_ATTENTION_MASK_B1 |
                      TFM_ATTENTION_GROUPED | TFM_ATTENTION_KEYS_TRANSPOSED,
                  G},
                 {0.25},
                 {H * D, D, D,              // q[b, h, 0, :]
                  KV * D * Sk, D * Sk, Sk,  // kᵀ[b, h, c, :], its columns Sk apart
                  KV * Sk * Dv, Sk * Dv, Dv, // v
                  H * Dv, Dv, Dv}});         // o
  std::vector<float> o(B * H * Dv);
  void *args[] = {q.data(), kt.data(), v.data(), m.data(), o.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%q: tensor<2x6x1x20xf32>, %k: tensor<2x6x40x20xf32>, %v: tensor<2x6x40x12xf32>, %m: tensor<2x1x1x40xf32>) -> tensor<2x6x1x12xf32> {
      %a = tfm.attention %q, %k, %v, mask %m {scale = 2.500000e-01 : f64} : (tensor<2x6x1x20xf32>, tensor<2x6x40x20xf32>, tensor<2x6x40x12xf32>, tensor<2x1x1x40xf32>) -> tensor<2x6x1x12xf32>
      return %a : tensor<2x6x1x12xf32>
    })mlir",
                     {asTensor(q, {B, H, 1, D}), asTensor(keys, {B, H, Sk, D}),
                      asTensor(values, {B, H, Sk, Dv}),
                      asTensor(m, {B, 1, 1, Sk})});
  expectClose(o, want.at(0));
}

// Three queries (a beam's rows, or a short chunk) over 50 keys in their
// own layout, causal, with a mask row per query: each row stops at its own
// diagonal, and the head dimension leaves a tail after sixteen lanes.
TEST(Kernel, AttentionFewQueriesCausalWithRowMasks) {
  const int64_t H = 2, Sq = 3, Sk = 50, D = 20;
  auto q = randomFloats(H * Sq * D, 35), key = randomFloats(H * Sk * D, 36),
       v = randomFloats(H * Sk * D, 37), m = randomFloats(Sq * Sk, 38);
  auto k = make({TFM_KERNEL_ATTENTION, 0,
                 {1, H, Sq, Sk, D, D,
                  TFM_ATTENTION_CAUSAL | TFM_ATTENTION_HAS_MASK |
                      TFM_ATTENTION_MASK_Q},
                 {0.5},
                 {0, Sq * D, D, 0, Sk * D, D, 0, Sk * D, D, 0, Sq * D, D}});
  std::vector<float> o(H * Sq * D);
  void *args[] = {q.data(), key.data(), v.data(), m.data(), o.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%q: tensor<2x3x20xf32>, %k: tensor<2x50x20xf32>, %v: tensor<2x50x20xf32>, %m: tensor<3x50xf32>) -> tensor<2x3x20xf32> {
      %a = tfm.attention %q, %k, %v, mask %m causal {scale = 5.000000e-01 : f64} : (tensor<2x3x20xf32>, tensor<2x50x20xf32>, tensor<2x50x20xf32>, tensor<3x50xf32>) -> tensor<2x3x20xf32>
      return %a : tensor<2x3x20xf32>
    })mlir",
                     {asTensor(q, {H, Sq, D}), asTensor(key, {H, Sk, D}),
                      asTensor(v, {H, Sk, D}), asTensor(m, {Sq, Sk})});
  expectClose(o, want.at(0));
}

TEST(Kernel, AddLayerNormWithSum) {
  const int64_t M = 5, N = 12;
  auto x = randomFloats(M * N, 9), r = randomFloats(M * N, 10),
       g = randomFloats(N, 11), b = randomFloats(N, 12);
  auto k = make({TFM_KERNEL_LAYER_NORM, 0, {M, N, 1, 1, 1}, {1e-5}});
  std::vector<float> y(M * N), sum(M * N);
  void *args[] = {x.data(), r.data(), g.data(), b.data(), y.data(),
                  sum.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%x: tensor<5x12xf32>, %r: tensor<5x12xf32>, %g: tensor<12xf32>, %b: tensor<12xf32>) -> (tensor<5x12xf32>, tensor<5x12xf32>) {
      %0:2 = tfm.add_layer_norm %x, %r, %g, %b : (tensor<5x12xf32>, tensor<5x12xf32>, tensor<12xf32>, tensor<12xf32>) -> (tensor<5x12xf32>, tensor<5x12xf32>)
      return %0#0, %0#1 : tensor<5x12xf32>, tensor<5x12xf32>
    })mlir",
                     {asTensor(x, {M, N}), asTensor(r, {M, N}),
                      asTensor(g, {N}), asTensor(b, {N})});
  ASSERT_EQ(want.size(), 2u);
  expectClose(y, want[0]);
  expectClose(sum, want[1]);
}

// Large enough to split across the threads (2 × 16385 elements), with rows
// whose length leaves a tail in every vector width; without a bias, and
// with a residual whose sum is not kept.
TEST(Kernel, LayerNormSplitAcrossThreads) {
  const int64_t M = 2, N = 16385;
  auto x = randomFloats(M * N, 13), r = randomFloats(M * N, 14),
       g = randomFloats(N, 15);
  std::string shape = "tensor<2x16385xf32>", vec = "tensor<16385xf32>";
  InterpreterHarness h;
  {
    auto k = make({TFM_KERNEL_LAYER_NORM, 0, {M, N, 0, 0, 0}, {1e-5}});
    std::vector<float> y(M * N);
    void *args[] = {x.data(), nullptr, g.data(), nullptr, y.data(), nullptr};
    ASSERT_EQ(k->run(args), 0);
    auto want = h.eval(
        "func.func @infer(%x: " + shape + ", %g: " + vec + ") -> " + shape +
            " {\n  %0 = tfm.layer_norm %x, %g : (" + shape + ", " + vec +
            ") -> " + shape + "\n  return %0 : " + shape + "\n}",
        {asTensor(x, {M, N}), asTensor(g, {N})});
    expectClose(y, want.at(0));
  }
  {
    auto k = make({TFM_KERNEL_LAYER_NORM, 0, {M, N, 1, 0, 0}, {1e-5}});
    std::vector<float> y(M * N);
    void *args[] = {x.data(), r.data(), g.data(), nullptr, y.data(), nullptr};
    ASSERT_EQ(k->run(args), 0);
    auto want = h.eval(
        "func.func @infer(%x: " + shape + ", %r: " + shape + ", %g: " + vec +
            ") -> " + shape + " {\n  %0 = tfm.add_layer_norm %x, %r, %g : (" +
            shape + ", " + shape + ", " + vec + ") -> " + shape +
            "\n  return %0 : " + shape + "\n}",
        {asTensor(x, {M, N}), asTensor(r, {M, N}), asTensor(g, {N})});
    expectClose(y, want.at(0));
  }
}

// A result written transposed with interleaved batches, [N, B, M], as the
// attention backward pass writes dQ: computed dense, then unpacked.
TEST(Kernel, BatchMatmulTransposedResult) {
  const int64_t B = 3, M = 4, K = 5, N = 6;
  auto a = randomFloats(B * M * K, 21), bm = randomFloats(B * K * N, 22);
  auto k = make({TFM_KERNEL_BATCH_MATMUL, 0, {1, B, M, K, N}, {},
                 {B * M * K, M * K, K, 1,   // a[b, m, k]
                  B * K * N, K * N, N, 1,   // b[b, k, n]
                  0, M, 1, B * M}});        // c[b, m, n] at [n, b, m]
  std::vector<float> c(N * B * M);
  void *args[] = {a.data(), bm.data(), c.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%a: tensor<3x4x5xf32>, %b: tensor<3x5x6xf32>) -> tensor<6x3x4xf32> {
      %c = tfm.matmul %a, %b : (tensor<3x4x5xf32>, tensor<3x5x6xf32>) -> tensor<3x4x6xf32>
      %r = tfm.transpose %c permutation = [2, 0, 1] : tensor<3x4x6xf32> -> tensor<6x3x4xf32>
      return %r : tensor<6x3x4xf32>
    })mlir",
                     {asTensor(a, {B, M, K}), asTensor(bm, {B, K, N})});
  expectClose(c, want.at(0));
}

// Three Adam steps with weight decay against the reference interpreter's,
// over more elements than one thread takes and a length that leaves a
// partial vector at the end. The kernel takes the step's coefficients as
// the compiled code computes them: lr / (1 - β1^t) and 1 / √(1 - β2^t).
TEST(Kernel, AdamSteps) {
  const int64_t n = 3 * 4096 + 37;
  const double lr = 1e-2, b1 = 0.9, b2 = 0.98, eps = 1e-6, wd = 0.01;
  auto p = randomFloats(n, 27);
  std::vector<float> m(n), v(n);
  Tensor rp = asTensor(p, {n}), rm = asTensor(m, {n}), rv = asTensor(v, {n});
  auto k = make({TFM_KERNEL_ADAM, 0, {n}});
  for (int64_t t = 1; t <= 3; ++t) {
    auto g = randomFloats(n, 28 + t);
    std::vector<float> coeff = {
        float(lr / (1 - std::pow(b1, t))), float(1 / std::sqrt(1 - std::pow(b2, t))),
        float(b1), float(1 - b1), float(b2), float(1 - b2), float(eps), float(wd)};
    void *args[] = {p.data(), g.data(), m.data(), v.data(), coeff.data()};
    ASSERT_EQ(k->run(args), 0);
    mlir::tfm::reference::evalAdam(rp, rm, rv, asTensor(g, {n}), lr, b1, b2,
                                   eps, wd, t);
  }
  expectClose(p, rp);
  expectClose(m, rm);
  expectClose(v, rv);
}

// Layer norm's backward pass against tfm.layer_norm_grad, whose gradients
// the finite-difference tests check.
TEST(Kernel, LayerNormBackward) {
  const int64_t M = 6, N = 16;
  auto x = randomFloats(M * N, 23), g = randomFloats(N, 24),
       dy = randomFloats(M * N, 25);
  auto k = make({TFM_KERNEL_LAYER_NORM_BACKWARD, 0, {M, N}, {1e-5}});
  std::vector<float> dx(M * N), dg(N), db(N);
  void *args[] = {x.data(), g.data(), dy.data(), dx.data(), dg.data(),
                  db.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want = h.eval(R"mlir(
    func.func @infer(%x: tensor<6x16xf32>, %g: tensor<16xf32>, %dy: tensor<6x16xf32>)
        -> (tensor<6x16xf32>, tensor<16xf32>, tensor<16xf32>) {
      %dx, %dg, %db = tfm.layer_norm_grad %x, %g, %dy {epsilon = 1.0e-05 : f64}
          : (tensor<6x16xf32>, tensor<16xf32>, tensor<6x16xf32>)
          -> (tensor<6x16xf32>, tensor<16xf32>, tensor<16xf32>)
      return %dx, %dg, %db : tensor<6x16xf32>, tensor<16xf32>, tensor<16xf32>
    })mlir",
                     {asTensor(x, {M, N}), asTensor(g, {N}), asTensor(dy, {M, N})});
  ASSERT_EQ(want.size(), 3u);
  expectClose(dx, want[0]);
  expectClose(dg, want[1]);
  expectClose(db, want[2]);
}

// RMSNorm after a residual add, keeping the sum, over rows whose mean is
// far from zero (a kernel that centred them would fail), split across the
// threads, with a length that leaves a tail in every vector width.
TEST(Kernel, AddRMSNormWithSum) {
  const int64_t M = 3, N = 16385;
  auto x = randomFloats(M * N, 41), r = randomFloats(M * N, 42),
       g = randomFloats(N, 43);
  for (float &v : x)
    v += 2.f;
  auto k = make({TFM_KERNEL_RMS_NORM, 0, {M, N, 1, 0, 1}, {1e-6}});
  std::vector<float> y(M * N), sum(M * N);
  void *args[] = {x.data(), r.data(), g.data(), nullptr, y.data(), sum.data()};
  ASSERT_EQ(k->run(args), 0);
  std::string shape = "tensor<3x16385xf32>", vec = "tensor<16385xf32>";
  InterpreterHarness h;
  auto want = h.eval(
      "func.func @infer(%x: " + shape + ", %r: " + shape + ", %g: " + vec +
          ") -> (" + shape + ", " + shape +
          ") {\n  %0:2 = tfm.add_layer_norm %x, %r, %g {epsilon = 1.0e-06 : "
          "f64, rms} : (" +
          shape + ", " + shape + ", " + vec + ") -> (" + shape + ", " + shape +
          ")\n  return %0#0, %0#1 : " + shape + ", " + shape + "\n}",
      {asTensor(x, {M, N}), asTensor(r, {M, N}), asTensor(g, {N})});
  ASSERT_EQ(want.size(), 2u);
  expectClose(y, want[0]);
  expectClose(sum, want[1]);
}

// RMSNorm's backward pass against tfm.layer_norm_grad {rms}, whose
// gradients the finite-difference tests check; more columns than one block
// of the column sums, and not a multiple of it.
TEST(Kernel, RMSNormBackward) {
  const int64_t M = 7, N = 150;
  auto x = randomFloats(M * N, 44), g = randomFloats(N, 45),
       dy = randomFloats(M * N, 46);
  for (float &v : x)
    v += 1.f;
  auto k = make({TFM_KERNEL_RMS_NORM_BACKWARD, 0, {M, N}, {1e-5}});
  std::vector<float> dx(M * N), dg(N), db(N);
  void *args[] = {x.data(),  g.data(),  dy.data(),
                  dx.data(), dg.data(), db.data()};
  ASSERT_EQ(k->run(args), 0);
  InterpreterHarness h;
  auto want =
      h.eval(R"mlir(
    func.func @infer(%x: tensor<7x150xf32>, %g: tensor<150xf32>, %dy: tensor<7x150xf32>)
        -> (tensor<7x150xf32>, tensor<150xf32>, tensor<150xf32>) {
      %dx, %dg, %db = tfm.layer_norm_grad %x, %g, %dy {epsilon = 1.0e-05 : f64, rms}
          : (tensor<7x150xf32>, tensor<150xf32>, tensor<7x150xf32>)
          -> (tensor<7x150xf32>, tensor<150xf32>, tensor<150xf32>)
      return %dx, %dg, %db : tensor<7x150xf32>, tensor<150xf32>, tensor<150xf32>
    })mlir",
             {asTensor(x, {M, N}), asTensor(g, {N}), asTensor(dy, {M, N})});
  ASSERT_EQ(want.size(), 3u);
  expectClose(dx, want[0]);
  expectClose(dg, want[1]);
  expectClose(db, want[2]);
}

// A GPU model's GEMMs on 16-bit operands, in the CPU emulation: the
// operands' patterns are read as bf16 or f16 (here exact in both: integers
// and halves), and the bias and output stay f32.
TEST(Kernel, LinearOnSixteenBitOperands) {
  // More rows than the GEMV path takes, so that weights are packed.
  const int64_t M = 9, K = 8, N = 5;
  std::vector<float> x(M * K), w(N * K), b = randomFloats(N, 31);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(int(i % 7) - 3) * 0.5f;
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(int(i % 5) - 2);
  // bf16 and f16 spell 1.5 as 0x3fc0 and 0x3e00: a kernel that read the
  // patterns as the wrong one (or as f32) fails.
  auto bits = [](float v, bool half) -> uint16_t {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if (!half)
      return static_cast<uint16_t>(u >> 16);
    if (v == 0)
      return static_cast<uint16_t>((u >> 16) & 0x8000u);
    int e = int((u >> 23) & 255) - 127 + 15;
    return static_cast<uint16_t>(((u >> 16) & 0x8000u) | (e << 10) |
                                 ((u >> 13) & 1023u));
  };
  InterpreterHarness h;
  auto want =
      h.eval(R"mlir(
      func.func @infer(%x: tensor<9x8xf32>, %w: tensor<5x8xf32>, %b: tensor<5xf32>) -> tensor<9x5xf32> {
        %0 = tfm.linear %x, %w, %b : (tensor<9x8xf32>, tensor<5x8xf32>, tensor<5xf32>) -> tensor<9x5xf32>
        return %0 : tensor<9x5xf32>
      })mlir",
             {asTensor(x, {M, K}), asTensor(w, {N, K}), asTensor(b, {N})});
  for (int32_t dtype : {TFM_DTYPE_BF16, TFM_DTYPE_F16}) {
    SCOPED_TRACE(dtype);
    bool half = dtype == TFM_DTYPE_F16;
    std::vector<uint16_t> xs(x.size()), ws(w.size());
    for (size_t i = 0; i < x.size(); ++i)
      xs[i] = bits(x[i], half);
    for (size_t i = 0; i < w.size(); ++i)
      ws[i] = bits(w[i], half);
    std::string error;
    tfm_abi_kernel_desc_t d{
        TFM_KERNEL_LINEAR, dtype, {M, K, N, 1, 0, 0, 1}, {}};
    auto k = cpu::makeKernel(cpu::makeEngine(), d,
                             TFM_KERNEL_FLAG_NARROW_OPERANDS, error);
    ASSERT_TRUE(k) << error;
    std::vector<float> y(M * N);
    void *args[] = {xs.data(), ws.data(), b.data(), nullptr, y.data()};
    ASSERT_EQ(k->run(args), 0);
    expectClose(y, want.at(0));
    // Another layer's constant weights through the same kernel, -w: each
    // layer's are widened (and packed) on their own.
    std::vector<uint16_t> negated(ws);
    for (uint16_t &v : negated)
      v ^= 0x8000u;
    std::vector<float> y2(M * N);
    void *args2[] = {xs.data(), negated.data(), b.data(), nullptr, y2.data()};
    ASSERT_EQ(k->run(args2), 0);
    for (int64_t i = 0; i < M * N; ++i)
      ASSERT_NEAR(y2[i], 2 * b[i % N] - want.at(0).data[i], 1e-5) << "at " << i;
  }
  std::string error;
  tfm_abi_kernel_desc_t f32{TFM_KERNEL_LINEAR, TFM_DTYPE_F32, {M, K, N}, {}};
  EXPECT_FALSE(cpu::makeKernel(cpu::makeEngine(), f32,
                               TFM_KERNEL_FLAG_NARROW_OPERANDS, error));
  EXPECT_EQ(error, "only a bf16 or f16 GEMM reads 16-bit operands");
}

TEST(Kernel, RejectsBadDescriptors) {
  std::string error;
  tfm_abi_kernel_desc_t d{TFM_KERNEL_LINEAR, TFM_DTYPE_F32, {0, 4, 4}, {}};
  EXPECT_FALSE(cpu::makeKernel(cpu::makeEngine(), d, 0, error));
  EXPECT_EQ(error, "kernel sizes must be positive");
  d = {99, TFM_DTYPE_F32, {1, 1, 1}, {}};
  EXPECT_FALSE(cpu::makeKernel(cpu::makeEngine(), d, 0, error));
  EXPECT_EQ(error, "unknown kernel kind 99");
}

} // namespace
