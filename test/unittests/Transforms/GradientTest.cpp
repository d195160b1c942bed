//===- GradientTest.cpp - Every gradient rule against finite differences --===//
//
// For each case, tfm-autodiff builds the vector-Jacobian product `@f_vjp`,
// and the reference interpreter evaluates it in double precision. The
// oracle is the central difference of <cotangent, f(x)> along every input
// element, which needs nothing from the code under test but the forward
// semantics. Inputs are drawn away from kinks (relu at 0, ties of max) so
// the difference quotient is valid.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/TfmOps.h"
#include "tfm/Reference/Interpreter.h"
#include "tfm/Transforms/Autodiff.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using mlir::tfm::reference::ElementKind;
using mlir::tfm::reference::Interpreter;
using mlir::tfm::reference::Tensor;

namespace {

struct GradientCase {
  const char *name;
  const char *body; // one func.func @f
  double low = -1.5, high = 1.5; // float inputs are drawn from [low, high)
  int64_t indexBound = 4;        // integer inputs from [0, indexBound)
};

std::ostream &operator<<(std::ostream &os, const GradientCase &c) {
  return os << c.name;
}

Tensor randomTensor(RankedTensorType type, std::mt19937_64 &rng,
                    const GradientCase &c) {
  auto kind = *mlir::tfm::reference::elementKindOf(type.getElementType());
  Tensor t(kind, std::vector<int64_t>(type.getShape().begin(),
                                      type.getShape().end()));
  std::uniform_real_distribution<double> real(c.low, c.high);
  std::uniform_int_distribution<int64_t> index(0, c.indexBound - 1);
  std::bernoulli_distribution coin(0.7);
  for (double &v : t.data) {
    if (kind == ElementKind::I1)
      v = coin(rng);
    else if (kind == ElementKind::I64 || kind == ElementKind::I32)
      v = static_cast<double>(index(rng));
    else
      v = real(rng);
  }
  return t;
}

class Gradient : public ::testing::TestWithParam<GradientCase> {};

TEST_P(Gradient, MatchesFiniteDifferences) {
  const GradientCase &c = GetParam();
  DialectRegistry registry;
  registry.insert<tfm::TfmDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect>();
  tfm::registerGradientExternalModels(registry);
  tfm::registerAxisMapExternalModels(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(c.body, &context);
  ASSERT_TRUE(module) << diagnostics;
  auto fn = module->lookupSymbol<func::FuncOp>("f");
  ASSERT_TRUE(fn);
  auto vjp = tfm::buildVJPFunction(fn);
  ASSERT_TRUE(succeeded(vjp)) << diagnostics;
  ASSERT_TRUE(succeeded(verify(*module))) << diagnostics;

  std::mt19937_64 rng(1234);
  std::vector<Tensor> args, cotangents;
  for (Type t : fn.getArgumentTypes())
    args.push_back(randomTensor(cast<RankedTensorType>(t), rng, c));
  GradientCase unit = c;
  unit.low = -1;
  unit.high = 1;
  for (Type t : fn.getResultTypes())
    cotangents.push_back(randomTensor(cast<RankedTensorType>(t), rng, unit));

  Interpreter interpreter;
  std::vector<Tensor> vjpArgs = args;
  vjpArgs.insert(vjpArgs.end(), cotangents.begin(), cotangents.end());
  auto grads = interpreter.run(*vjp, vjpArgs);
  ASSERT_TRUE(succeeded(grads)) << diagnostics;

  // <cotangent, f(x)>, the scalar whose gradient the VJP is.
  auto objective = [&](const std::vector<Tensor> &x) {
    auto out = interpreter.run(fn, x);
    EXPECT_TRUE(succeeded(out)) << diagnostics;
    double s = 0;
    for (auto [o, cot] : llvm::zip(*out, cotangents))
      if (mlir::tfm::reference::isFloatKind(o.kind))
        for (size_t i = 0; i < o.data.size(); ++i)
          s += o.data[i] * cot.data[i];
    return s;
  };

  const double h = 1e-5;
  size_t g = 0;
  int checked = 0;
  for (size_t a = 0; a < args.size(); ++a) {
    if (!mlir::tfm::reference::isFloatKind(args[a].kind))
      continue;
    const Tensor &grad = (*grads)[g++];
    ASSERT_EQ(grad.shape, args[a].shape) << "gradient of argument " << a;
    for (size_t i = 0; i < args[a].data.size(); ++i) {
      std::vector<Tensor> plus = args, minus = args;
      plus[a].data[i] += h;
      minus[a].data[i] -= h;
      double fd = (objective(plus) - objective(minus)) / (2 * h);
      EXPECT_NEAR(grad.data[i], fd, 1e-6 + 1e-5 * std::abs(fd))
          << "argument " << a << ", element " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// clang-format off
const GradientCase kCases[] = {
  {"matmul", R"(func.func @f(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) -> tensor<3x2xf32> {
    %r = tfm.matmul %a, %b : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    return %r : tensor<3x2xf32> })"},
  {"matmul_transposed", R"(func.func @f(%a: tensor<4x3xf32>, %b: tensor<2x4xf32>) -> tensor<3x2xf32> {
    %r = tfm.matmul %a, %b transpose_lhs transpose_rhs : (tensor<4x3xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
    return %r : tensor<3x2xf32> })"},
  {"matmul_transpose_lhs", R"(func.func @f(%a: tensor<2x4x3xf32>, %b: tensor<2x4x2xf32>) -> tensor<2x3x2xf32> {
    %r = tfm.matmul %a, %b transpose_lhs : (tensor<2x4x3xf32>, tensor<2x4x2xf32>) -> tensor<2x3x2xf32>
    return %r : tensor<2x3x2xf32> })"},
  {"matmul_shared_weight", R"(func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<4x2xf32>) -> tensor<2x3x2xf32> {
    %r = tfm.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x2xf32>) -> tensor<2x3x2xf32>
    return %r : tensor<2x3x2xf32> })"},
  {"matmul_shared_weight_transposed", R"(func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x3x2xf32> {
    %r = tfm.matmul %a, %b transpose_rhs : (tensor<2x3x4xf32>, tensor<2x4xf32>) -> tensor<2x3x2xf32>
    return %r : tensor<2x3x2xf32> })"},
  {"matmul_batch_broadcast", R"(func.func @f(%a: tensor<1x3x4xf32>, %b: tensor<2x4x2xf32>) -> tensor<2x3x2xf32> {
    %r = tfm.matmul %a, %b : (tensor<1x3x4xf32>, tensor<2x4x2xf32>) -> tensor<2x3x2xf32>
    return %r : tensor<2x3x2xf32> })"},
  {"linear", R"(func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
    %r = tfm.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
    return %r : tensor<2x3x5xf32> })"},
  {"linear_relu", R"(func.func @f(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
    %r = tfm.linear %x, %w, %b activation = relu : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x5xf32>
    return %r : tensor<3x5xf32> })"},
  {"linear_gelu", R"(func.func @f(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>) -> tensor<3x5xf32> {
    %r = tfm.linear %x, %w activation = gelu : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
    return %r : tensor<3x5xf32> })"},
  {"linear_gelu_tanh", R"(func.func @f(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
    %r = tfm.linear %x, %w, %b activation = gelu_tanh : (tensor<3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<3x5xf32>
    return %r : tensor<3x5xf32> })"},
  {"add_broadcast", R"(func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
    %r = tfm.add %a, %b : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32> })"},
  {"sub_broadcast", R"(func.func @f(%a: tensor<4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
    %r = tfm.sub %a, %b : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    return %r : tensor<3x4xf32> })"},
  {"mul_broadcast", R"(func.func @f(%a: tensor<2x1x4xf32>, %b: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
    %r = tfm.mul %a, %b : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32> })"},
  {"div", R"(func.func @f(%a: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
    %r = tfm.div %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    return %r : tensor<3x4xf32> })", 0.5, 2.0},
  {"pow", R"(func.func @f(%a: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
    %r = tfm.pow %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    return %r : tensor<3x4xf32> })", 0.5, 2.0},
  {"max_min", R"(func.func @f(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
    %r = tfm.max %a, %b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %s = tfm.min %a, %b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    return %r, %s : tensor<3x4xf32>, tensor<3x4xf32> })"},
  {"select", R"(func.func @f(%c: tensor<3x4xi1>, %a: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
    %r = tfm.select %c, %a, %b : (tensor<3x4xi1>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    return %r : tensor<3x4xf32> })"},
  {"relu_gelu", R"(func.func @f(%a: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
    %r = tfm.relu %a : tensor<3x4xf32>
    %g = tfm.gelu %a : tensor<3x4xf32>
    %t = tfm.gelu %a approximate = tanh : tensor<3x4xf32>
    return %r, %g, %t : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> })"},
  {"softmax", R"(func.func @f(%a: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
    %r = tfm.softmax %a : tensor<2x3x4xf32>
    %s = tfm.softmax %a axis = 1 : tensor<2x3x4xf32>
    return %r, %s : tensor<2x3x4xf32>, tensor<2x3x4xf32> })"},
  {"layer_norm", R"(func.func @f(%x: tensor<2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x3x4xf32> {
    %r = tfm.layer_norm %x, %g, %b {epsilon = 1.0e-05} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32> })"},
  {"layer_norm_two_axes", R"(func.func @f(%x: tensor<2x3x4xf32>, %g: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
    %r = tfm.layer_norm %x, %g {axis = -2 : i64, epsilon = 1.0e-03} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32> })"},
  {"gated_linear_silu", R"(func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<6x4xf32>, %b: tensor<6xf32>) -> tensor<2x3x3xf32> {
    %r = tfm.gated_linear %x, %w, %b activation = silu : (tensor<2x3x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<2x3x3xf32>
    return %r : tensor<2x3x3xf32> })"},
  {"gated_linear_gelu", R"(func.func @f(%x: tensor<3x4xf32>, %w: tensor<4x4xf32>) -> tensor<3x2xf32> {
    %r = tfm.gated_linear %x, %w activation = gelu_tanh : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x2xf32>
    return %r : tensor<3x2xf32> })"},
  {"rms_norm", R"(func.func @f(%x: tensor<2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x3x4xf32> {
    %r = tfm.layer_norm %x, %g, %b {epsilon = 1.0e-05, rms} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32> })"},
  {"embedding", R"(func.func @f(%t: tensor<4x3xf32>, %i: tensor<2x5xi64>) -> tensor<2x5x3xf32> {
    %r = tfm.embedding %t, %i : (tensor<4x3xf32>, tensor<2x5xi64>) -> tensor<2x5x3xf32>
    return %r : tensor<2x5x3xf32> })"},
  {"gather_rows", R"(func.func @f(%t: tensor<4x2x3xf32>) -> tensor<3x2x3xf32> {
    %i = arith.constant dense<[1, -1, 1]> : tensor<3xi64>
    %r = tfm.gather %t, %i axis = 0 : (tensor<4x2x3xf32>, tensor<3xi64>) -> tensor<3x2x3xf32>
    return %r : tensor<3x2x3xf32> })"},
  {"positional_encoding", R"(func.func @f(%x: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
    %p = tfm.positional_encoding : tensor<4x6xf32>
    %r = tfm.mul %x, %p : (tensor<2x4x6xf32>, tensor<4x6xf32>) -> tensor<2x4x6xf32>
    return %r : tensor<2x4x6xf32> })"},
  {"transpose_reshape", R"(func.func @f(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
    %t = tfm.transpose %x permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
    %r = tfm.reshape %t : tensor<4x2x3xf32> -> tensor<4x6xf32>
    %s = tfm.mul %r, %r : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
    return %s : tensor<4x6xf32> })"},
  {"concat_split", R"(func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x2xf32>) -> (tensor<2x1xf32>, tensor<2x4xf32>) {
    %c = tfm.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x5xf32>
    %d = tfm.mul %c, %c : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
    %p:2 = tfm.split %d axis = 1 sizes = [1, 4] : tensor<2x5xf32> -> tensor<2x1xf32>, tensor<2x4xf32>
    return %p#0, %p#1 : tensor<2x1xf32>, tensor<2x4xf32> })"},
  {"split_one_part_used", R"(func.func @f(%a: tensor<2x6xf32>) -> tensor<2x2xf32> {
    %p:3 = tfm.split %a axis = 1 sizes = [2, 2, 2] : tensor<2x6xf32> -> tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
    return %p#1 : tensor<2x2xf32> })"},
  {"broadcast_slice", R"(func.func @f(%a: tensor<1x4xf32>, %b: tensor<5x6xf32>) -> (tensor<3x4xf32>, tensor<2x3xf32>) {
    %r = tfm.broadcast %a : tensor<1x4xf32> -> tensor<3x4xf32>
    %s = tfm.slice %b starts = [1, 2] sizes = [2, 3] steps = [1, 1] : tensor<5x6xf32> -> tensor<2x3xf32>
    return %r, %s : tensor<3x4xf32>, tensor<2x3xf32> })"},
  {"dropout_training", R"(func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %t = arith.constant dense<3> : tensor<i64>
    %r = tfm.dropout %a training step %t {rate = 3.0e-01, seed = 5 : i64} : tensor<4x8xf32>
    %s = tfm.mul %r, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %s : tensor<4x8xf32> })"},
  {"reduce_sum_mean", R"(func.func @f(%a: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x1x1xf32>) {
    %r = tfm.reduce sum %a axes = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
    %s = tfm.reduce mean %a axes = [1, 2] keepdims : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
    return %r, %s : tensor<2x4xf32>, tensor<2x1x1xf32> })"},
  {"reduce_max_min", R"(func.func @f(%a: tensor<2x3x4xf32>) -> (tensor<2x3xf32>, tensor<3x4xf32>) {
    %r = tfm.reduce max %a axes = [-1] : tensor<2x3x4xf32> -> tensor<2x3xf32>
    %s = tfm.reduce min %a axes = [0] : tensor<2x3x4xf32> -> tensor<3x4xf32>
    return %r, %s : tensor<2x3xf32>, tensor<3x4xf32> })"},
  {"attention_causal_additive", R"(func.func @f(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x5xf32>, %m: tensor<2x1x3xf32>) -> tensor<2x3x5xf32> {
    %r = tfm.attention %q, %k, %v, mask %m causal : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x5xf32>, tensor<2x1x3xf32>) -> tensor<2x3x5xf32>
    return %r : tensor<2x3x5xf32> })"},
  {"attention_boolean", R"(func.func @f(%q: tensor<2x3x4xf32>, %k: tensor<2x5x4xf32>, %v: tensor<2x5x2xf32>) -> tensor<2x3x2xf32> {
    %m = arith.constant dense<[[true, true, false, true, false]]> : tensor<1x5xi1>
    %r = tfm.attention %q, %k, %v, mask %m {scale = 0.3 : f64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x2xf32>, tensor<1x5xi1>) -> tensor<2x3x2xf32>
    return %r : tensor<2x3x2xf32> })"},
  // Rotary embeddings: tables of their own per position (their gradients
  // summed over the heads), and the interleaved pairs.
  {"rotary_half", R"(func.func @f(%x: tensor<2x3x4xf32>, %c: tensor<3x4xf32>, %s: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
    %r = tfm.rotary %x, %c, %s : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32> })"},
  {"rotary_interleaved", R"(func.func @f(%x: tensor<2x3x6xf32>, %c: tensor<3x6xf32>, %s: tensor<1x6xf32>) -> tensor<2x3x6xf32> {
    %r = tfm.rotary %x, %c, %s interleaved : (tensor<2x3x6xf32>, tensor<3x6xf32>, tensor<1x6xf32>) -> tensor<2x3x6xf32>
    return %r : tensor<2x3x6xf32> })"},
  // Grouped-query: four query heads over two key and value heads.
  {"attention_grouped_query", R"(func.func @f(%q: tensor<2x4x3x2xf32>, %k: tensor<2x2x3x2xf32>, %v: tensor<2x2x3x3xf32>) -> tensor<2x4x3x3xf32> {
    %r = tfm.attention %q, %k, %v causal : (tensor<2x4x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x3xf32>) -> tensor<2x4x3x3xf32>
    return %r : tensor<2x4x3x3xf32> })"},
  {"attention_grouped_query_additive", R"(func.func @f(%q: tensor<4x3x2xf32>, %k: tensor<1x3x2xf32>, %v: tensor<1x3x3xf32>, %m: tensor<4x1x3xf32>) -> tensor<4x3x3xf32> {
    %r = tfm.attention %q, %k, %v, mask %m : (tensor<4x3x2xf32>, tensor<1x3x2xf32>, tensor<1x3x3xf32>, tensor<4x1x3xf32>) -> tensor<4x3x3xf32>
    return %r : tensor<4x3x3xf32> })"},
  // A mask that is no argument wants no gradient: tfm.attention_grad.
  {"attention_grad_causal_constant_mask", R"(func.func @f(%q: tensor<2x4x3xf32>, %k: tensor<2x3x3xf32>, %v: tensor<2x3x2xf32>) -> tensor<2x4x2xf32> {
    %m = arith.constant dense<[[0.5, -1.0, 0.25]]> : tensor<1x3xf32>
    %r = tfm.attention %q, %k, %v, mask %m causal : (tensor<2x4x3xf32>, tensor<2x3x3xf32>, tensor<2x3x2xf32>, tensor<1x3xf32>) -> tensor<2x4x2xf32>
    return %r : tensor<2x4x2xf32> })"},
  {"cross_entropy", R"(func.func @f(%x: tensor<2x3x5xf32>, %l: tensor<2x3xi64>) -> tensor<f32> {
    %r = tfm.cross_entropy %x, %l {label_smoothing = 1.0e-01} : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> tensor<f32>
    return %r : tensor<f32> })", -1.5, 1.5, 5},
  {"cross_entropy_ignore_index", R"(func.func @f(%x: tensor<6x4xf32>) -> tensor<f32> {
    %l = arith.constant dense<[0, 3, -100, 2, -100, 1]> : tensor<6xi64>
    %r = tfm.cross_entropy %x, %l : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<f32>
    return %r : tensor<f32> })"},
  {"qkv_projection", R"(func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<7x4xf32>, %b: tensor<7xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x3xf32>) {
    %q:3 = tfm.qkv_projection %x, %w, %b sizes = [2, 3, 2] : (tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<7xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x3xf32>, tensor<2x3x2xf32>)
    return %q#0, %q#1 : tensor<2x3x2xf32>, tensor<2x3x3xf32> })"},
  {"masked_softmax_additive_causal", R"(func.func @f(%s: tensor<2x3x3xf32>, %m: tensor<2x1x3xf32>) -> tensor<2x3x3xf32> {
    %r = tfm.masked_softmax %s, mask %m mask_kind = additive causal {scale = 5.0e-01} : (tensor<2x3x3xf32>, tensor<2x1x3xf32>) -> tensor<2x3x3xf32>
    return %r : tensor<2x3x3xf32> })"},
  {"masked_softmax_boolean", R"(func.func @f(%s: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
    %m = arith.constant dense<[true, false, true, true]> : tensor<4xi1>
    %r = tfm.masked_softmax %s, mask %m mask_kind = boolean {scale = 2.0} : (tensor<2x3x4xf32>, tensor<4xi1>) -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32> })"},
  {"add_layer_norm_with_sum", R"(func.func @f(%x: tensor<2x3x4xf32>, %r: tensor<2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
    %y, %s = tfm.add_layer_norm %x, %r, %g, %b {epsilon = 1.0e-05} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
    return %y, %s : tensor<2x3x4xf32>, tensor<2x3x4xf32> })"},
  {"add_rms_norm_with_sum", R"(func.func @f(%x: tensor<2x3x4xf32>, %r: tensor<2x3x4xf32>, %g: tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
    %y, %s = tfm.add_layer_norm %x, %r, %g {epsilon = 1.0e-05, rms} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
    return %y, %s : tensor<2x3x4xf32>, tensor<2x3x4xf32> })"},
  {"add_layer_norm_broadcast", R"(func.func @f(%x: tensor<2x3x4xf32>, %r: tensor<3x4xf32>, %g: tensor<4xf32>) -> tensor<2x3x4xf32> {
    %y = tfm.add_layer_norm %x, %r, %g {epsilon = 1.0e-05} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    return %y : tensor<2x3x4xf32> })"},
  {"math_ops", R"(func.func @f(%a: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
    %s = math.sqrt %a : tensor<3x4xf32>
    %e = math.exp %a : tensor<3x4xf32>
    %l = math.log %a : tensor<3x4xf32>
    %t = math.tanh %a : tensor<3x4xf32>
    return %s, %e, %l, %t : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> })", 0.3, 2.0},
  {"math_signed", R"(func.func @f(%a: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
    %e = math.erf %a : tensor<3x4xf32>
    %b = math.absf %a : tensor<3x4xf32>
    %n = arith.negf %a : tensor<3x4xf32>
    return %e, %b, %n : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> })"},
  // Along a middle axis with a 2-D index tensor, repeated and negative
  // indices (the gradients accumulate): MaxPool's, Pad's and Tile's gathers.
  {"gather_middle_axis", R"(func.func @f(%x: tensor<2x5x3xf32>) -> tensor<2x2x3x3xf32> {
    %i = arith.constant dense<[[4, 0, -1], [1, 1, 2]]> : tensor<2x3xi64>
    %g = tfm.gather %x, %i axis = 1 : (tensor<2x5x3xf32>, tensor<2x3xi64>) -> tensor<2x2x3x3xf32>
    return %g : tensor<2x2x3x3xf32> })"},
  {"conv2d_strided_padded_dilated", R"(func.func @f(%x: tensor<2x3x7x6xf32>, %w: tensor<4x3x3x2xf32>, %b: tensor<4xf32>) -> tensor<2x4x4x5xf32> {
    %y = tfm.conv2d %x, %w, %b strides = [2, 1] pads = [1, 0, 2, 1] dilations = [1, 2] group = 1 : (tensor<2x3x7x6xf32>, tensor<4x3x3x2xf32>, tensor<4xf32>) -> tensor<2x4x4x5xf32>
    return %y : tensor<2x4x4x5xf32> })"},
  {"conv2d_grouped", R"(func.func @f(%x: tensor<1x4x5x5xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32> {
    %y = tfm.conv2d %x, %w strides = [2, 2] pads = [1, 1, 1, 1] dilations = [1, 1] group = 2 : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
    return %y : tensor<1x6x3x3xf32> })"},
  {"conv2d_depthwise_1d", R"(func.func @f(%x: tensor<2x3x1x9xf32>, %w: tensor<3x1x1x3xf32>, %b: tensor<3xf32>) -> tensor<2x3x1x5xf32> {
    %y = tfm.conv2d %x, %w, %b strides = [1, 2] pads = [0, 1, 0, 1] dilations = [1, 1] group = 3 : (tensor<2x3x1x9xf32>, tensor<3x1x1x3xf32>, tensor<3xf32>) -> tensor<2x3x1x5xf32>
    return %y : tensor<2x3x1x5xf32> })"},
  // Rows 6 and 7 no window reaches (their gradient is zero), and a padding
  // wider than the kernel (the full convolution crops instead of padding).
  {"conv2d_unreached_rows_and_wide_pads", R"(func.func @f(%x: tensor<1x2x8x5xf32>, %w: tensor<3x2x3x2xf32>, %u: tensor<1x1x4x4xf32>, %v: tensor<2x1x1x1xf32>) -> (tensor<1x3x2x2xf32>, tensor<1x2x7x4xf32>) {
    %y = tfm.conv2d %x, %w strides = [3, 2] pads = [0, 0, 0, 0] dilations = [1, 1] group = 1 : (tensor<1x2x8x5xf32>, tensor<3x2x3x2xf32>) -> tensor<1x3x2x2xf32>
    %z = tfm.conv2d %u, %v strides = [1, 1] pads = [3, 0, 0, 0] dilations = [1, 1] group = 1 : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x7x4xf32>
    return %y, %z : tensor<1x3x2x2xf32>, tensor<1x2x7x4xf32> })"},
  {"shared_input_accumulates", R"(func.func @f(%w: tensor<4x3xf32>, %i: tensor<2xi64>) -> tensor<2x4xf32> {
    %e = tfm.embedding %w, %i : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    %r = tfm.matmul %e, %w transpose_rhs : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
    return %r : tensor<2x4xf32> })"},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Rules, Gradient, ::testing::ValuesIn(kCases),
                         [](const auto &info) {
                           return std::string(info.param.name);
                         });

} // namespace
