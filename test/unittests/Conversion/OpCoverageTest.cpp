//===- OpCoverageTest.cpp - Every tfm op is whole on every target ---------===//
//
// An op added to the dialect needs semantics in the reference interpreter
// (the oracle of every test) and a lowering on every target that registers
// lowerings. This walks the ops the dialect registers, so a half-added op
// fails here rather than in a user's model.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Common/OpLowering.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"
#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Reference/Interpreter.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>

namespace {

using namespace mlir;

/// The ops a lowering never meets as ops, each for a reason.
const std::map<std::string, std::string> &notLoweredAsOps() {
  static const std::map<std::string, std::string> ops = {
      {tfm::KernelCallOp::getOperationName().str(),
       "the lowering's output, not its input"},
      {tfm::ParameterOp::getOperationName().str(),
       "bound to its slot in the training state by the buffer assignment"},
      {tfm::CacheReadOp::getOperationName().str(),
       "bound to its slot in the session state by the buffer assignment"},
  };
  return ops;
}

std::vector<std::string> tfmOps(MLIRContext &context) {
  std::vector<std::string> names;
  for (RegisteredOperationName op : context.getRegisteredOperations())
    if (op.getDialectNamespace() == tfm::TfmDialect::getDialectNamespace())
      names.push_back(op.getStringRef().str());
  return names;
}

TEST(OpCoverage, DialectHasOps) {
  MLIRContext context;
  context.getOrLoadDialect<tfm::TfmDialect>();
  // Guards the walks below against an empty list passing vacuously.
  EXPECT_GE(tfmOps(context).size(), 30u);
}

TEST(OpCoverage, EveryOpHasInterpreterSemantics) {
  MLIRContext context;
  context.getOrLoadDialect<tfm::TfmDialect>();
  for (const std::string &name : tfmOps(context)) {
    if (name == tfm::KernelCallOp::getOperationName())
      continue; // a call into compiled code's kernels, below the interpreter
    EXPECT_TRUE(tfm::reference::Interpreter::evaluates(name))
        << name << " has no evaluation function in reference/";
  }
}

TEST(OpCoverage, EveryOpLowersOnEveryTarget) {
  tfm::registerCPUTarget();
  tfm::registerGPUTarget();
  MLIRContext context;
  context.getOrLoadDialect<tfm::TfmDialect>();
  std::vector<std::string> targets = tfm::registeredLoweringTargets();
  ASSERT_EQ(targets, (std::vector<std::string>{"cpu", "cuda"}));
  for (const std::string &target : targets) {
    tfm::OpLoweringSet set;
    ASSERT_TRUE(succeeded(tfm::populateTargetLowerings(target, set)));
    for (const std::string &name : tfmOps(context)) {
      if (notLoweredAsOps().count(name))
        continue;
      EXPECT_TRUE(set.contains(name))
          << name << " has no lowering on target '" << target << "'";
    }
    // And nothing registered that the dialect no longer has.
    std::vector<std::string> ops = tfmOps(context);
    std::set<std::string> known(ops.begin(), ops.end());
    for (const std::string &name : set.opNames())
      EXPECT_TRUE(known.count(name) || name.rfind("tfm.", 0) != 0)
          << "target '" << target << "' lowers unknown op " << name;
  }
}

TEST(OpCoverage, ExemptionsAreRealOps) {
  MLIRContext context;
  context.getOrLoadDialect<tfm::TfmDialect>();
  std::vector<std::string> ops = tfmOps(context);
  for (const auto &[name, why] : notLoweredAsOps())
    EXPECT_NE(std::find(ops.begin(), ops.end(), name), ops.end()) << name;
}

} // namespace
