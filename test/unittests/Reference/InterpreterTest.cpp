//===- InterpreterTest.cpp - Closed-form tests of the reference interpreter ===//
//
// Every expected value here is worked out by hand from the op's definition,
// never taken from the interpreter's output.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "tfm/CounterRNG.h"

#include <cmath>

using namespace mlir::tfm::testing;
using mlir::tfm::reference::ElementKind;
using mlir::tfm::reference::Tensor;

namespace {

constexpr double kE = 2.718281828459045;

TEST(Interpreter, MatmulPlainAndTransposed) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>)
        -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
      %0 = tfm.matmul %a, %b : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %1 = tfm.matmul %a, %b transpose_rhs : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %2 = tfm.matmul %a, %b transpose_lhs : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      return %0, %1, %2 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
    })mlir",
                    {f32({2, 2}, {1, 2, 3, 4}), f32({2, 2}, {5, 6, 7, 8})});
  ASSERT_EQ(out.size(), 3u);
  expectNear(out[0], {2, 2}, {19, 22, 43, 50});
  expectNear(out[1], {2, 2}, {17, 23, 39, 53});
  expectNear(out[2], {2, 2}, {26, 30, 38, 44});
}

TEST(Interpreter, MatmulBroadcastsBatch) {
  InterpreterHarness h;
  // Batch of two lhs matrices against one shared rhs (the identity).
  auto out = h.eval(R"mlir(
    func.func @infer(%a: tensor<2x1x2xf32>, %b: tensor<2x2xf32>) -> tensor<2x1x2xf32> {
      %0 = tfm.matmul %a, %b : (tensor<2x1x2xf32>, tensor<2x2xf32>) -> tensor<2x1x2xf32>
      return %0 : tensor<2x1x2xf32>
    })mlir",
                    {f32({2, 1, 2}, {1, 2, 3, 4}), f32({2, 2}, {1, 0, 0, 1})});
  expectNear(out.at(0), {2, 1, 2}, {1, 2, 3, 4});
}

TEST(Interpreter, LinearWithBiasAndActivations) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<1x2xf32>, %w: tensor<3x2xf32>, %b: tensor<3xf32>)
        -> (tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>) {
      %0 = tfm.linear %x, %w, %b : (tensor<1x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<1x3xf32>
      %1 = tfm.linear %x, %w, %b activation = relu : (tensor<1x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<1x3xf32>
      %2 = tfm.linear %x, %w activation = gelu : (tensor<1x2xf32>, tensor<3x2xf32>) -> tensor<1x3xf32>
      return %0, %1, %2 : tensor<1x3xf32>, tensor<1x3xf32>, tensor<1x3xf32>
    })mlir",
                    {f32({1, 2}, {1, 2}), f32({3, 2}, {1, 0, 0, 1, -1, -1}),
                     f32({3}, {0.5, 0, 1})});
  ASSERT_EQ(out.size(), 3u);
  // x·Wᵀ = [1, 2, -3]; + b = [1.5, 2, -2].
  expectNear(out[0], {1, 3}, {1.5, 2, -2});
  expectNear(out[1], {1, 3}, {1.5, 2, 0});
  // gelu(1), gelu(2), gelu(-3) from 0.5·x·(1 + erf(x/√2)).
  expectNear(out[2], {1, 3},
             {0.8413447460685429, 1.9544997361036416, -0.004049694094890282},
             1e-12);
}

TEST(Interpreter, BinaryOpsBroadcast) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%a: tensor<2x2xf32>, %b: tensor<2xf32>)
        -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
      %0 = tfm.add %a, %b : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
      %1 = tfm.sub %b, %a : (tensor<2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %2 = tfm.mul %a, %b : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
      %3 = tfm.div %a, %b : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
      return %0, %1, %2, %3 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
    })mlir",
                    {f32({2, 2}, {1, 2, 3, 4}), f32({2}, {10, 20})});
  ASSERT_EQ(out.size(), 4u);
  expectNear(out[0], {2, 2}, {11, 22, 13, 24});
  expectNear(out[1], {2, 2}, {9, 18, 7, 16});
  expectNear(out[2], {2, 2}, {10, 40, 30, 80});
  expectNear(out[3], {2, 2}, {0.1, 0.1, 0.3, 0.2});
}

TEST(Interpreter, IntegerDivisionTruncates) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%a: tensor<3xi64>, %b: tensor<1xi64>) -> tensor<3xi64> {
      %0 = tfm.div %a, %b : (tensor<3xi64>, tensor<1xi64>) -> tensor<3xi64>
      return %0 : tensor<3xi64>
    })mlir",
                    {i64({3}, {7, -7, 6}), i64({1}, {2})});
  expectNear(out.at(0), {3}, {3, -3, 3});
}

TEST(Interpreter, NarrowAndUnsignedIntegersWrapAndOrderByTheirType) {
  // ui8: 200 + 100 wraps to 44; 200 > 100 unsigned. i8: 100 + 100 wraps to
  // -56. ui64: 2^64 - 1 is the largest, not -1, so it is the max and
  // (2^64 - 1) / 2 = 2^63 - 1.
  InterpreterHarness h;
  ASSERT_TRUE(h.parse(R"mlir(
    func.func @infer(%a: tensor<2xui8>, %b: tensor<2xi8>, %c: tensor<2xui64>)
        -> (tensor<2xui8>, tensor<2xi1>, tensor<2xi8>, tensor<2xui64>, tensor<2xui64>, tensor<2xf64>) {
      %k = arith.constant dense<100> : tensor<2xui8>
      %0 = tfm.add %a, %k : (tensor<2xui8>, tensor<2xui8>) -> tensor<2xui8>
      %1 = tfm.compare gt, %a, %k : (tensor<2xui8>, tensor<2xui8>) -> tensor<2xi1>
      %2 = tfm.add %b, %b : (tensor<2xi8>, tensor<2xi8>) -> tensor<2xi8>
      %one = arith.constant dense<1> : tensor<2xui64>
      %3 = tfm.max %c, %one : (tensor<2xui64>, tensor<2xui64>) -> tensor<2xui64>
      %two = arith.constant dense<2> : tensor<2xui64>
      %4 = tfm.div %c, %two : (tensor<2xui64>, tensor<2xui64>) -> tensor<2xui64>
      %5 = tfm.cast %c : tensor<2xui64> -> tensor<2xf64>
      return %0, %1, %2, %3, %4, %5 : tensor<2xui8>, tensor<2xi1>, tensor<2xi8>, tensor<2xui64>, tensor<2xui64>, tensor<2xf64>
    })mlir"));
  auto out = h.run({Tensor::ofInts(ElementKind::U8, {2}, {200, 3}),
                    Tensor::ofInts(ElementKind::I8, {2}, {100, -3}),
                    Tensor::ofInts(ElementKind::U64, {2}, {-1, 0})});
  ASSERT_TRUE(mlir::succeeded(out)) << h.diagnostics;
  expectInts(out->at(0), {2}, {44, 103});
  expectNear(out->at(1), {2}, {1, 0});
  expectInts(out->at(2), {2}, {-56, -6});
  expectInts(out->at(3), {2}, {-1, 1});
  expectInts(out->at(4), {2}, {INT64_MAX, 0});
  expectNear(out->at(5), {2}, {18446744073709551615.0, 0});
}

TEST(Interpreter, Int64IsExact) {
  // 2^53 + 1 has no double: a double-based interpreter adds 1 to 2^53 and
  // finds 2^53 + 1 equal to 2^53. Constants round-trip through attributes.
  InterpreterHarness h;
  ASSERT_TRUE(h.parse(R"mlir(
    func.func @infer(%a: tensor<2xi64>) -> (tensor<2xi64>, tensor<2xi1>, tensor<2xi64>) {
      %one = arith.constant dense<[1, 9223372036854775806]> : tensor<2xi64>
      %0 = tfm.add %a, %one : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
      %big = arith.constant dense<[9007199254740993, 9223372036854775807]> : tensor<2xi64>
      %1 = tfm.compare eq, %0, %big : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>
      %2 = tfm.sub %big, %a : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
      return %0, %1, %2 : tensor<2xi64>, tensor<2xi1>, tensor<2xi64>
    })mlir"));
  auto out = h.run({Tensor::ofInts(ElementKind::I64, {2}, {int64_t(1) << 53, 1})});
  ASSERT_TRUE(mlir::succeeded(out)) << h.diagnostics;
  expectInts(out->at(0), {2}, {(int64_t(1) << 53) + 1, INT64_MAX});
  expectNear(out->at(1), {2}, {1, 1});
  expectInts(out->at(2), {2}, {1, INT64_MAX - 1});
  auto type =
      mlir::RankedTensorType::get({2}, mlir::IntegerType::get(&h.context, 64));
  auto attr = mlir::tfm::reference::Interpreter::toAttr(out->at(0), type);
  auto back = mlir::tfm::reference::Interpreter::fromAttr(attr);
  ASSERT_TRUE(mlir::succeeded(back));
  EXPECT_EQ(back->ints, out->at(0).ints);
}

TEST(Interpreter, ReluAndGelu) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %0 = tfm.relu %x : tensor<3xf32>
      %1 = tfm.gelu %x : tensor<3xf32>
      %2 = tfm.gelu %x approximate = tanh : tensor<3xf32>
      return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
    })mlir",
                    {f32({3}, {-1, 0, 1})});
  ASSERT_EQ(out.size(), 3u);
  expectNear(out[0], {3}, {0, 0, 1});
  expectNear(out[1], {3}, {-0.15865525393145707, 0, 0.8413447460685429});
  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715x³))) at ±1.
  expectNear(out[2], {3}, {-0.15880800939172324, 0, 0.8411919906082768});
}

TEST(Interpreter, SoftmaxUniformAxisAndAllMaskedRow) {
  InterpreterHarness h;
  double ninf = -INFINITY;
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
      %0 = tfm.softmax %x : tensor<2x2xf32>
      %1 = tfm.softmax %x axis = 0 : tensor<2x2xf32>
      return %0, %1 : tensor<2x2xf32>, tensor<2x2xf32>
    })mlir",
                    {f32({2, 2}, {0, 1, ninf, ninf})});
  ASSERT_EQ(out.size(), 2u);
  // Row 0: [1, e] / (1 + e); row 1 is all -inf, which is NaN by definition.
  expectNear(out[0], {2, 2}, {1 / (1 + kE), kE / (1 + kE), NAN, NAN});
  // Along axis 0 each column has one finite entry, which takes all the mass.
  expectNear(out[1], {2, 2}, {1, 1, 0, 0});
}

TEST(Interpreter, LayerNormClosedForm) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<1x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<1x4xf32> {
      %0 = tfm.layer_norm %x, %g, %b {epsilon = 1.0e-30 : f64} : (tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
      return %0 : tensor<1x4xf32>
    })mlir",
                    {f32({1, 4}, {1, 2, 3, 4}), f32({4}, {1, 1, 2, 2}),
                     f32({4}, {0, 0, 0, 1})});
  // mean 2.5, biased variance 1.25.
  double s = 1 / std::sqrt(1.25);
  expectNear(out.at(0), {1, 4}, {-1.5 * s, -0.5 * s, 2 * 0.5 * s, 2 * 1.5 * s + 1});
}

TEST(Interpreter, EmbeddingGathersRowsAndRejectsBadIndex) {
  InterpreterHarness h;
  const char *src = R"mlir(
    func.func @infer(%t: tensor<3x2xf32>, %i: tensor<2xi64>) -> tensor<2x2xf32> {
      %0 = tfm.embedding %t, %i : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    })mlir";
  Tensor table = f32({3, 2}, {0, 1, 10, 11, 20, 21});
  auto out = h.eval(src, {table, i64({2}, {2, 0})});
  expectNear(out.at(0), {2, 2}, {20, 21, 0, 1});

  auto bad = h.run({table, i64({2}, {1, 3})});
  EXPECT_TRUE(failed(bad));
  EXPECT_NE(h.diagnostics.find("index 3 at position 1 of 'indices' is outside "
                               "the table's 3 rows"),
            std::string::npos)
      << h.diagnostics;
}

TEST(Interpreter, PositionalEncodingFormula) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer() -> tensor<2x4xf32> {
      %0 = tfm.positional_encoding : tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    })mlir",
                    {});
  // Position 0 is sin 0, cos 0; position 1 uses frequencies 1 and 10000^(-1/2).
  expectNear(out.at(0), {2, 4},
             {0, 1, 0, 1, std::sin(1.0), std::cos(1.0), std::sin(0.01),
              std::cos(0.01)});
}

TEST(Interpreter, DataMovement) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<2x5xf32>, tensor<2x1xf32>, tensor<2x2xf32>) {
      %0 = tfm.transpose %x permutation = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
      %1 = tfm.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
      %2:2 = tfm.split %x axis = 1 sizes = [1, 2] : tensor<2x3xf32> -> tensor<2x1xf32>, tensor<2x2xf32>
      %3 = tfm.concat %x, %2#1 axis = 1 : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x5xf32>
      return %0, %1, %3, %2#0, %2#1 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<2x5xf32>, tensor<2x1xf32>, tensor<2x2xf32>
    })mlir",
                    {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(out.size(), 5u);
  expectNear(out[0], {3, 2}, {1, 4, 2, 5, 3, 6});
  expectNear(out[1], {3, 2}, {1, 2, 3, 4, 5, 6});
  expectNear(out[2], {2, 5}, {1, 2, 3, 2, 3, 4, 5, 6, 5, 6});
  expectNear(out[3], {2, 1}, {1, 4});
  expectNear(out[4], {2, 2}, {2, 3, 5, 6});
}

TEST(Interpreter, DropoutIsIdentityOutsideTraining) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = tfm.dropout %x {rate = 0.5 : f64} : tensor<4xf32>
      return %0 : tensor<4xf32>
    })mlir",
                    {f32({4}, {1, 2, 3, 4})});
  expectNear(out.at(0), {4}, {1, 2, 3, 4});
}

TEST(Interpreter, DropoutInTrainingDropsAtTheRateAndRescales) {
  const char *src = R"mlir(
    func.func @infer(%x: tensor<20000xf32>) -> tensor<20000xf32> {
      %0 = tfm.dropout %x training {rate = 0.25 : f64, seed = SEED : i64} : tensor<20000xf32>
      return %0 : tensor<20000xf32>
    })mlir";
  auto runWithSeed = [&](const char *seed) {
    std::string text = src;
    text.replace(text.find("SEED"), 4, seed);
    InterpreterHarness h;
    return h.eval(text, {f32({20000}, std::vector<double>(20000, 3.0))}).at(0);
  };
  Tensor a = runWithSeed("11"), again = runWithSeed("11"), b = runWithSeed("12");
  size_t zeros = 0;
  for (double v : a.data) {
    // Kept elements are scaled by 1 / (1 - 0.25).
    EXPECT_TRUE(v == 0.0 || v == 4.0) << v;
    zeros += v == 0.0;
  }
  // Binomial(20000, 0.25): the standard deviation of the fraction is 0.003.
  EXPECT_NEAR(static_cast<double>(zeros) / 20000, 0.25, 0.015);
  EXPECT_EQ(a.data, again.data) << "the same seed must give the same mask";
  EXPECT_NE(a.data, b.data) << "another seed must give another mask";
}

TEST(Interpreter, AttentionClosedForm) {
  InterpreterHarness h;
  // One query against two keys with scale 1: scores [0, 1].
  auto out = h.eval(R"mlir(
    func.func @infer(%q: tensor<1x1xf32>, %k: tensor<2x1xf32>, %v: tensor<2x1xf32>,
                     %q2: tensor<2x1xf32>, %m: tensor<2xi1>)
        -> (tensor<1x1xf32>, tensor<2x1xf32>, tensor<1x1xf32>) {
      %0 = tfm.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<1x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<1x1xf32>
      %1 = tfm.attention %q2, %k, %v causal : (tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
      %2 = tfm.attention %q, %k, %v, mask %m : (tensor<1x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2xi1>) -> tensor<1x1xf32>
      return %0, %1, %2 : tensor<1x1xf32>, tensor<2x1xf32>, tensor<1x1xf32>
    })mlir",
                    {f32({1, 1}, {1}), f32({2, 1}, {0, 1}), f32({2, 1}, {10, 20}),
                     f32({2, 1}, {1, 1}),
                     Tensor(ElementKind::I1, {2}, {1, 0})});
  ASSERT_EQ(out.size(), 3u);
  expectNear(out[0], {1, 1}, {(10 + 20 * kE) / (1 + kE)});
  // Row 0 sees only key 0; row 1 sees both with scale 1/sqrt(1) = 1.
  expectNear(out[1], {2, 1}, {10, (10 + 20 * kE) / (1 + kE)});
  // The boolean mask hides key 1.
  expectNear(out[2], {1, 1}, {10});
}

TEST(Interpreter, GroupedQueryAttentionClosedForm) {
  InterpreterHarness h;
  // Two query heads share the one key and value head: head 0 asks with
  // q = 1 (scores [0, 1]), head 1 with q = 0 (scores [0, 0]).
  auto out = h.eval(R"mlir(
    func.func @infer(%q: tensor<2x1x1xf32>, %k: tensor<1x2x1xf32>, %v: tensor<1x2x1xf32>)
        -> tensor<2x1x1xf32> {
      %0 = tfm.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x1x1xf32>, tensor<1x2x1xf32>, tensor<1x2x1xf32>) -> tensor<2x1x1xf32>
      return %0 : tensor<2x1x1xf32>
    })mlir",
                    {f32({2, 1, 1}, {1, 0}), f32({1, 2, 1}, {0, 1}),
                     f32({1, 2, 1}, {10, 20})});
  ASSERT_EQ(out.size(), 1u);
  expectNear(out[0], {2, 1, 1}, {(10 + 20 * kE) / (1 + kE), 15});
}

TEST(Interpreter, RotaryClosedForm) {
  InterpreterHarness h;
  // x = [1, 2, 3, 4], cos = 0.5, sin = 2: rotate_half(x) = [-3, -4, 1, 2],
  // the interleaved rotation [-2, 1, -4, 3].
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<1x4xf32>, %c: tensor<f32>, %s: tensor<1xf32>)
        -> (tensor<1x4xf32>, tensor<1x4xf32>) {
      %0 = tfm.rotary %x, %c, %s : (tensor<1x4xf32>, tensor<f32>, tensor<1xf32>) -> tensor<1x4xf32>
      %1 = tfm.rotary %x, %c, %s interleaved : (tensor<1x4xf32>, tensor<f32>, tensor<1xf32>) -> tensor<1x4xf32>
      return %0, %1 : tensor<1x4xf32>, tensor<1x4xf32>
    })mlir",
                    {f32({1, 4}, {1, 2, 3, 4}), f32({}, {0.5}), f32({1}, {2})});
  ASSERT_EQ(out.size(), 2u);
  expectNear(out[0], {1, 4}, {0.5 - 6, 1 - 8, 1.5 + 2, 2 + 4});
  expectNear(out[1], {1, 4}, {0.5 - 4, 1 + 2, 1.5 - 8, 2 + 6});
}

TEST(Interpreter, CrossEntropyClosedForm) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%l: tensor<2x2xf32>, %y: tensor<2xi64>, %u: tensor<1x4xf32>, %yu: tensor<1xi64>)
        -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
      %0 = tfm.cross_entropy %l, %y : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<f32>
      %1 = tfm.cross_entropy %l, %y {label_smoothing = 2.000000e-01 : f64} : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<f32>
      %2 = tfm.cross_entropy %u, %yu {label_smoothing = 5.000000e-01 : f64} : (tensor<1x4xf32>, tensor<1xi64>) -> tensor<f32>
      %3 = tfm.cross_entropy %u, %yu {ignore_index = 3 : i64} : (tensor<1x4xf32>, tensor<1xi64>) -> tensor<f32>
      return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
    })mlir",
                    {f32({2, 2}, {2, 0, 0, 0}), i64({2}, {0, -100}),
                     f32({1, 4}, {0, 0, 0, 0}), i64({1}, {3})});
  ASSERT_EQ(out.size(), 4u);
  // Token 0: -log softmax([2, 0])[0] = log(1 + e^-2); token 1 is ignored.
  double nll = std::log(1 + std::exp(-2.0));
  expectNear(out[0], {}, {nll});
  // Smoothing 0.2 over K = 2: 0.8·nll + 0.1·(log(1+e^-2) + log(1+e^2)).
  expectNear(out[1], {}, {0.8 * nll + 0.1 * (nll + std::log(1 + std::exp(2.0)))});
  // Uniform logits cost log K whatever the smoothing.
  expectNear(out[2], {}, {std::log(4.0)});
  // Every label ignored: the mean over no tokens is NaN, as in PyTorch.
  expectNear(out[3], {}, {NAN});
}

TEST(Interpreter, QKVProjectionSplitsOneGemm) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<1x2xf32>, %w: tensor<4x2xf32>, %b: tensor<4xf32>)
        -> (tensor<1x1xf32>, tensor<1x2xf32>, tensor<1x1xf32>) {
      %0:3 = tfm.qkv_projection %x, %w, %b sizes = [1, 2, 1] : (tensor<1x2xf32>, tensor<4x2xf32>, tensor<4xf32>) -> (tensor<1x1xf32>, tensor<1x2xf32>, tensor<1x1xf32>)
      return %0#0, %0#1, %0#2 : tensor<1x1xf32>, tensor<1x2xf32>, tensor<1x1xf32>
    })mlir",
                    {f32({1, 2}, {1, 2}), f32({4, 2}, {1, 0, 0, 1, 1, 1, 2, -1}),
                     f32({4}, {0, 0, 0, 10})});
  ASSERT_EQ(out.size(), 3u);
  expectNear(out[0], {1, 1}, {1});
  expectNear(out[1], {1, 2}, {2, 3});
  expectNear(out[2], {1, 1}, {10});
}

TEST(Interpreter, MaskedSoftmaxKinds) {
  InterpreterHarness h;
  double ninf = -INFINITY;
  auto out = h.eval(R"mlir(
    func.func @infer(%s: tensor<2x2xf32>, %am: tensor<2xf32>, %bm: tensor<2x2xi1>)
        -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
      %0 = tfm.masked_softmax %s, mask %am mask_kind = additive : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
      %1 = tfm.masked_softmax %s, mask %bm mask_kind = boolean {scale = 2.0 : f64} : (tensor<2x2xf32>, tensor<2x2xi1>) -> tensor<2x2xf32>
      %2 = tfm.masked_softmax %s causal : (tensor<2x2xf32>) -> tensor<2x2xf32>
      return %0, %1, %2 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
    })mlir",
                    {f32({2, 2}, {0, 0, 0, 0.5}), f32({2}, {0, ninf}),
                     Tensor(ElementKind::I1, {2, 2}, {1, 1, 0, 1})});
  ASSERT_EQ(out.size(), 3u);
  expectNear(out[0], {2, 2}, {1, 0, 1, 0});
  // Row 0: scores [0, 0] -> halves. Row 1: only column 1 survives.
  expectNear(out[1], {2, 2}, {0.5, 0.5, 0, 1});
  // Causal: row 0 keeps column 0; row 1 scores [0, 0.5].
  expectNear(out[2], {2, 2},
             {1, 0, 1 / (1 + std::exp(0.5)), std::exp(0.5) / (1 + std::exp(0.5))});
}

TEST(Interpreter, AddLayerNormReturnsSum) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer(%x: tensor<1x4xf32>, %r: tensor<4xf32>, %g: tensor<4xf32>)
        -> (tensor<1x4xf32>, tensor<1x4xf32>) {
      %0:2 = tfm.add_layer_norm %x, %r, %g {epsilon = 1.0e-30 : f64} : (tensor<1x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>)
      return %0#0, %0#1 : tensor<1x4xf32>, tensor<1x4xf32>
    })mlir",
                    {f32({1, 4}, {0, 1, 2, 3}), f32({4}, {1, 1, 1, 1}),
                     f32({4}, {1, 1, 1, 1})});
  ASSERT_EQ(out.size(), 2u);
  double s = 1 / std::sqrt(1.25);
  expectNear(out[0], {1, 4}, {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s});
  expectNear(out[1], {1, 4}, {1, 2, 3, 4});
}

TEST(Interpreter, ConstantsOfEveryElementType) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func @infer() -> (tensor<2xf16>, tensor<2xbf16>, tensor<2xi1>, tensor<2xi32>, tensor<3xf32>) {
      %0 = arith.constant dense<[1.5, -0.25]> : tensor<2xf16>
      %1 = arith.constant dense<[3.0, 0.5]> : tensor<2xbf16>
      %2 = arith.constant dense<[true, false]> : tensor<2xi1>
      %3 = arith.constant dense<[-7, 9]> : tensor<2xi32>
      %4 = arith.constant dense<2.5> : tensor<3xf32>
      return %0, %1, %2, %3, %4 : tensor<2xf16>, tensor<2xbf16>, tensor<2xi1>, tensor<2xi32>, tensor<3xf32>
    })mlir",
                    {});
  ASSERT_EQ(out.size(), 5u);
  expectNear(out[0], {2}, {1.5, -0.25});
  EXPECT_EQ(out[0].kind, ElementKind::F16);
  expectNear(out[1], {2}, {3.0, 0.5});
  expectNear(out[2], {2}, {1, 0});
  expectNear(out[3], {2}, {-7, 9});
  expectNear(out[4], {3}, {2.5, 2.5, 2.5});
}

TEST(Interpreter, FunctionCalls) {
  InterpreterHarness h;
  auto out = h.eval(R"mlir(
    func.func private @twice(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = tfm.add %x, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }
    func.func @infer(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = func.call @twice(%x) : (tensor<2xf32>) -> tensor<2xf32>
      %1 = func.call @twice(%0) : (tensor<2xf32>) -> tensor<2xf32>
      return %1 : tensor<2xf32>
    })mlir",
                    {f32({2}, {1, -2})});
  expectNear(out.at(0), {2}, {4, -8});
}

TEST(Interpreter, RejectsUnboundedRecursion) {
  InterpreterHarness h;
  ASSERT_TRUE(h.parse(R"mlir(
    func.func @infer(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = func.call @infer(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    })mlir"));
  EXPECT_TRUE(failed(h.run({f32({2}, {1, 2})})));
  EXPECT_NE(h.diagnostics.find("call depth exceeds 64"), std::string::npos);
}

TEST(Interpreter, RejectsArgumentOfWrongShape) {
  InterpreterHarness h;
  ASSERT_TRUE(h.parse(R"mlir(
    func.func @infer(%x: tensor<2xf32>) -> tensor<2xf32> {
      return %x : tensor<2xf32>
    })mlir"));
  EXPECT_TRUE(failed(h.run({f32({3}, {1, 2, 3})})));
  EXPECT_NE(h.diagnostics.find("argument #0 must be 'tensor<2xf32>' but the "
                               "value given is 'tensor<3xf32>'"),
            std::string::npos)
      << h.diagnostics;
}

TEST(Interpreter, RejectsUnknownOps) {
  InterpreterHarness h;
  ASSERT_TRUE(h.parse(R"mlir(
    func.func @infer(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = arith.addf %x, %x : tensor<2xf32>
      return %0 : tensor<2xf32>
    })mlir"));
  EXPECT_TRUE(failed(h.run({f32({2}, {1, 2})})));
  EXPECT_NE(h.diagnostics.find(
                "the reference interpreter does not evaluate 'arith.addf'"),
            std::string::npos)
      << h.diagnostics;
}

TEST(Interpreter, RejectsTensorsTooLargeToHold) {
  InterpreterHarness h;
  ASSERT_TRUE(h.parse(R"mlir(
    func.func @infer() -> tensor<65536x65536xf32> {
      %0 = tfm.positional_encoding : tensor<65536x65536xf32>
      return %0 : tensor<65536x65536xf32>
    })mlir"));
  EXPECT_TRUE(failed(h.run({})));
  EXPECT_NE(h.diagnostics.find("has 4294967296 elements, more than the "
                               "reference interpreter's limit"),
            std::string::npos)
      << h.diagnostics;
}

TEST(Interpreter, RejectsNonTensorArguments) {
  InterpreterHarness h;
  ASSERT_TRUE(h.parse(R"mlir(
    func.func @infer(%x: f32) -> f32 {
      return %x : f32
    })mlir"));
  EXPECT_TRUE(failed(h.run({Tensor(ElementKind::F32, {}, {1})})));
  EXPECT_NE(h.diagnostics.find("argument #0 of type 'f32' is not a supported "
                               "tensor type"),
            std::string::npos)
      << h.diagnostics;
}

} // namespace
