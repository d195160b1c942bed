//===- AxisMapTest.cpp - Every op says how its axes follow -------------===//
//
// tfm-exact-padding and tfm-derive-kv-cache follow an axis through every op
// by the op's AxisMapOpInterface, and refuse an op without one. This checks
// that every op either has a map or is exempt for a reason, and the reshape
// groups both passes read, against groupings worked out by hand.
//
//===----------------------------------------------------------------------===//

#include "tfm/IR/AxisMap.h"
#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmOps.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace {

using namespace mlir;
using namespace mlir::tfm;

/// The ops with no axis map, each for a reason.
const std::map<std::string, std::string> &withoutAxisMap() {
  static const std::map<std::string, std::string> ops = {
      {"tfm.positional_encoding",
       "no operands: a table, which the ops that read it index"},
      {"tfm.scatter_nd",
       "writes at indices known at run time: no axis passes through whole; "
       "both passes refuse it at the op"},
      {"tfm.attention", "made by tfm-fuse-attention, after both passes"},
      {"tfm.cross_entropy",
       "a training loss, which neither ranges nor generation compile"},
      {"tfm.cross_entropy_grad", "@train_step only"},
      {"tfm.layer_norm_grad", "@train_step only"},
      {"tfm.softmax_grad", "@train_step only"},
      {"tfm.attention_grad", "@train_step only"},
      {"tfm.embedding_grad", "@train_step only"},
      {"tfm.sgd_update", "@train_step only"},
      {"tfm.adam_update", "@train_step only"},
      {"tfm.parameter", "reads the training state: no operands"},
      {"tfm.next_step", "@train_step only"},
      {"tfm.process_rank", "@train_step only"},
      {"tfm.all_reduce_start", "@train_step only"},
      {"tfm.all_reduce_wait", "@train_step only"},
      {"tfm.cache_update", "made by tfm-derive-kv-cache itself"},
      {"tfm.cache_read", "made by tfm-derive-kv-cache itself"},
      {"tfm.kernel_call", "the lowering's output"},
      {"tfm.dynamic_quantize",
       "its scale and zero point are the range of the whole tensor, rank-0 "
       "results no axis reaches; both passes refuse it at the op"},
  };
  return ops;
}

TEST(AxisMap, EveryOpHasOneOrAReason) {
  MLIRContext context;
  context.getOrLoadDialect<TfmDialect>();
  int mapped = 0;
  for (RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != TfmDialect::getDialectNamespace())
      continue;
    std::string name = op.getStringRef().str();
    bool has = op.hasInterface<AxisMapOpInterface>();
    bool exempt = withoutAxisMap().count(name) > 0;
    EXPECT_NE(has, exempt) << name
                           << (has ? " has an axis map but is exempt"
                                   : " has no axis map and no exemption");
    mapped += has;
  }
  EXPECT_GE(mapped, 25);
  for (const auto &[name, why] : withoutAxisMap())
    EXPECT_TRUE(RegisteredOperationName::lookup(name, &context)) << name;
}

std::vector<std::vector<int64_t>> groups(ArrayRef<int64_t> in,
                                         ArrayRef<int64_t> out) {
  std::vector<std::vector<int64_t>> result;
  for (const ReshapeGroup &g : reshapeGroups(in, out))
    result.push_back({g.inBegin, g.inEnd, g.outBegin, g.outEnd});
  return result;
}

using Groups = std::vector<std::vector<int64_t>>;

TEST(AxisMap, ReshapeGroups) {
  // A batch of one dropped: [1, S, D] -> [S, D].
  EXPECT_EQ(groups({1, 24, 32}, {24, 32}),
            (Groups{{0, 1, 0, 0}, {1, 2, 0, 1}, {2, 3, 1, 2}}));
  // Conv1D's view(-1, D): the batch merged with the positions.
  EXPECT_EQ(groups({2, 24, 32}, {48, 32}),
            (Groups{{0, 2, 0, 1}, {2, 3, 1, 2}}));
  // Heads split off: [B, S, D] -> [B, S, H, d].
  EXPECT_EQ(groups({2, 24, 32}, {2, 24, 4, 8}),
            (Groups{{0, 1, 0, 1}, {1, 2, 1, 2}, {2, 3, 2, 4}}));
  // A mask made 4-D: [B, S] -> [B, 1, 1, S].
  EXPECT_EQ(groups({2, 24}, {2, 1, 1, 24}),
            (Groups{{0, 1, 0, 1}, {1, 1, 1, 2}, {1, 1, 2, 3}, {1, 2, 3, 4}}));
  // Sizes that regroup across axes: one group.
  EXPECT_EQ(groups({2, 3, 4}, {4, 6}), (Groups{{0, 3, 0, 2}}));
  // Empty tensors: one group of everything.
  EXPECT_EQ(groups({0, 4}, {4, 0}), (Groups{{0, 2, 0, 2}}));
}

} // namespace
