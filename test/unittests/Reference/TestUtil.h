//===- TestUtil.h - Helpers for interpreter tests ---------------*- C++ -*-===//

#ifndef TFM_TEST_UNITTESTS_REFERENCE_TESTUTIL_H
#define TFM_TEST_UNITTESTS_REFERENCE_TESTUTIL_H

#include "tfm/IR/TfmDialect.h"
#include "tfm/Reference/Interpreter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

namespace mlir::tfm::testing {

/// Parses a module, runs one of its functions, and keeps the diagnostics.
class InterpreterHarness {
public:
  InterpreterHarness() {
    context.getOrLoadDialect<TfmDialect>();
    context.getOrLoadDialect<func::FuncDialect>();
    context.getOrLoadDialect<arith::ArithDialect>();
    context.getOrLoadDialect<math::MathDialect>();
    handler = std::make_unique<ScopedDiagnosticHandler>(
        &context, [this](Diagnostic &d) {
          diagnostics += d.str() + "\n";
          return success();
        });
  }

  /// Parses `source`; a parse or verify failure fails the test.
  bool parse(llvm::StringRef source) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << diagnostics;
    return static_cast<bool>(module);
  }

  FailureOr<std::vector<reference::Tensor>>
  run(const std::vector<reference::Tensor> &args,
      llvm::StringRef fn = "infer") {
    auto func = module->lookupSymbol<func::FuncOp>(fn);
    EXPECT_TRUE(func) << "no function @" << fn.str();
    if (!func)
      return failure();
    reference::Interpreter interpreter;
    return interpreter.run(func, args);
  }

  /// Parses and runs, failing the test on any error.
  std::vector<reference::Tensor>
  eval(llvm::StringRef source, const std::vector<reference::Tensor> &args) {
    if (!parse(source))
      return {};
    auto out = run(args);
    EXPECT_TRUE(succeeded(out)) << diagnostics;
    return succeeded(out) ? *out : std::vector<reference::Tensor>{};
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::string diagnostics;
  std::unique_ptr<ScopedDiagnosticHandler> handler;
};

inline reference::Tensor f32(std::vector<int64_t> shape,
                             std::vector<double> data) {
  return reference::Tensor(reference::ElementKind::F32, std::move(shape),
                           std::move(data));
}

inline reference::Tensor i64(std::vector<int64_t> shape,
                             std::vector<double> data) {
  return reference::Tensor(reference::ElementKind::I64, std::move(shape),
                           std::move(data));
}

/// Element-wise comparison with an absolute tolerance; NaN equals NaN.
inline void expectNear(const reference::Tensor &got,
                       const std::vector<int64_t> &shape,
                       const std::vector<double> &want, double tol = 1e-12) {
  ASSERT_EQ(got.shape, shape);
  std::vector<double> values = got.asDoubles();
  ASSERT_EQ(values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(values[i])) << "at " << i;
      continue;
    }
    EXPECT_NEAR(values[i], want[i], tol) << "at flat index " << i;
  }
}

/// Exact comparison of an integer tensor.
inline void expectInts(const reference::Tensor &got,
                       const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &want) {
  ASSERT_EQ(got.shape, shape);
  ASSERT_TRUE(got.isInt()) << got.typeString();
  EXPECT_EQ(got.ints, want);
}

} // namespace mlir::tfm::testing

#endif // TFM_TEST_UNITTESTS_REFERENCE_TESTUTIL_H
