//===- PlanMemoryTest.cpp - Memory plans checked independently ------------===//
//
// Imports each exported model, fuses it, plans its memory, and then checks
// the plan from first principles, without the pass's own bookkeeping: any
// two arena tensors that are alive at the same time must not share bytes,
// unless one is a view of the other in the CPU lowering (a reshape, a
// transpose folded into a GEMM, a part of a packed QKV projection) or an
// elementwise op writes over an operand at the very op where that operand
// dies. A view keeps its storage alive for as long as the view is used.
// Also checks the arena against the ≤ 1.1 × lower-bound target.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontends/ONNX/Importer.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Pipelines/Pipelines.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

/// A tensor with storage of its own in the arena, as the plan records it.
struct Planned {
  Value value;
  int64_t def, last, offset, bytes;
  /// The storage it overwrites in place (the root of the operand the plan
  /// names), or null.
  Value reuses;
};

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t bits = t.getElementTypeBitWidth();
  return t.getNumElements() * (bits == 1 ? 8 : bits) / 8;
}

/// Checks the plan of `fn` from its attributes alone: every view lies inside
/// the storage it reads, no two buffers overlap while both are alive (but
/// for an op writing in place over an operand that dies there), and the
/// arena is close to the most bytes alive at once.
void checkPlan(func::FuncOp fn) {
  Block &block = fn.getBody().front();
  DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(block))
    index[&op] = i;
  // The arena tensor whose storage each tensor's elements lie in.
  DenseMap<Value, Value> rootOf;
  llvm::MapVector<Value, Planned> storage;
  auto lastUse = [&](Value v) {
    int64_t last = index[v.getDefiningOp()];
    for (Operation *u : v.getUsers()) {
      last = std::max(last, index[u]);
      // A compare computed inside its selects reads its operands there.
      if (u->getNumResults() == 1 &&
          isa_and_nonnull<tfm::InlineAttr>(tfm::getPlannedBuffer(u, 0)))
        for (Operation *sel : u->getUsers())
          last = std::max(last, index[sel]);
    }
    return last;
  };
  for (Operation &op : block) {
    auto plan = op.getAttrOfType<ArrayAttr>(tfm::kPlanAttrName);
    if (!plan)
      continue;
    for (auto [r, a] : llvm::zip(op.getResults(), plan)) {
      if (auto arena = dyn_cast<tfm::ArenaAttr>(a)) {
        Planned p{r, index[&op], lastUse(r), arena.getOffset(),
                  std::max(arena.getBytes(), bytesOf(r)), Value()};
        if (arena.getReuses() >= 0) {
          Value operand = op.getOperand(arena.getReuses());
          p.reuses = rootOf.lookup(operand);
          EXPECT_TRUE(p.reuses) << "in place over an operand outside the arena";
          EXPECT_EQ(storage.lookup(p.reuses).offset, p.offset);
        }
        storage[r] = p;
        rootOf[r] = r;
      } else if (auto view = dyn_cast<tfm::ViewAttr>(a)) {
        Value source = view.getOperand() >= 0 ? op.getOperand(view.getOperand())
                                              : op.getResult(view.getResult());
        Value root = rootOf.lookup(source);
        if (!root)
          continue; // a view of an input, a constant or an output
        rootOf[r] = root;
        Planned &p = storage[root];
        p.last = std::max(p.last, lastUse(r));
        // The view lies inside the storage it reads.
        auto type = cast<RankedTensorType>(r.getType());
        int64_t last = view.getOffset();
        for (auto [d, st] : llvm::zip(type.getShape(), view.getStrides().asArrayRef()))
          last += (d - 1) * st;
        int64_t width = bytesOf(r) / std::max<int64_t>(type.getNumElements(), 1);
        if (type.getNumElements() > 0) {
          EXPECT_LE((last + 1) * width, p.bytes) << "a view reads past its storage";
        }
      }
    }
  }
  std::vector<Planned> planned;
  for (auto &[root, p] : storage)
    planned.push_back(p);
  int64_t arena = fn->getAttrOfType<IntegerAttr>("tfm.arena_bytes").getInt();
  int64_t bound =
      fn->getAttrOfType<IntegerAttr>("tfm.arena_lower_bound").getInt();
  for (const Planned &p : planned)
    EXPECT_LE(p.offset + p.bytes, arena);
  for (size_t i = 0; i < planned.size(); ++i)
    for (size_t j = i + 1; j < planned.size(); ++j) {
      const Planned &a = planned[i], &b = planned[j];
      bool memory = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      bool time = a.def <= b.last && b.def <= a.last;
      if (!memory || !time)
        continue;
      // In place: the later one overwrites the earlier's storage exactly
      // where the earlier dies.
      const Planned &first = a.def < b.def ? a : b, &second = a.def < b.def ? b : a;
      if (second.reuses && second.reuses == rootOf.lookup(first.value) &&
          first.last == second.def)
        continue;
      std::string what;
      llvm::raw_string_ostream os(what);
      os << a.value << " and " << b.value;
      ADD_FAILURE() << "buffers overlap while both alive: " << os.str();
    }
  EXPECT_LE(arena, bound + bound / 10) << "arena " << arena << ", bound "
                                       << bound;
}

class PlanMemory : public ::testing::TestWithParam<const char *> {};

TEST_P(PlanMemory, PlansAreSafeAndTight) {
  DialectRegistry registry;
  tfm::onnx_import::registerImportDialects(registry);
  MLIRContext context(registry);
  tfm::onnx_import::ImportOptions options;
  std::string err;
  ASSERT_TRUE(tfm::onnx_import::parseShapeOption("input_ids=2x8", options, err));
  ASSERT_TRUE(
      tfm::onnx_import::parseShapeOption("attention_mask=2x8", options, err));
  std::string path = std::string(TFM_MODELS_DIR) + "/" + GetParam() +
                     "/model.onnx";
  if (std::string(GetParam()).rfind("bert", 0) != 0)
    options.inputShapes.clear();
  OwningOpRef<ModuleOp> module =
      tfm::onnx_import::importFile(&context, path, options);
  ASSERT_TRUE(module);
  PassManager pm(&context);
  tfm::buildFusionPipeline(pm, /*remarks=*/false);
  tfm::registerCPUTarget();
  pm.addNestedPass<func::FuncOp>(tfm::createPlanMemoryPass());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  for (auto fn : module->getOps<func::FuncOp>())
    checkPlan(fn);
}

INSTANTIATE_TEST_SUITE_P(
    ExportedModels, PlanMemory,
    ::testing::Values("encoder_layer_opset13", "decoder_layer_opset17",
                      "transformer_opset13", "transformer_opset17",
                      "gpt_opset13", "bert_opset17", "packed_mha_opset13"));

} // namespace
