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
#include "tfm/Transforms/CPUFolding.h"
#include "tfm/Pipelines/Pipelines.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

struct Planned {
  Value value;
  int64_t def, last, offset, bytes;
};

/// The value whose storage `v` is in the CPU lowering.
Value storageRoot(Value v) {
  while (true) {
    if (auto r = v.getDefiningOp<tfm::ReshapeOp>();
        r && tfm::reshapeKeepsView(r)) {
      v = r.getInput();
      continue;
    }
    if (auto t = v.getDefiningOp<tfm::TransposeOp>();
        t && (tfm::foldsIntoMatmulOperand(t) || tfm::movesOnlyUnitDims(t))) {
      v = t.getInput();
      continue;
    }
    if (auto q = v.getDefiningOp<tfm::QKVProjectionOp>();
        q && tfm::isPackedQKV(q) && v != q.getResult(0)) {
      v = q.getResult(0);
      continue;
    }
    // A matmul that writes its transposed result directly has no storage
    // of its own.
    if (auto m = v.getDefiningOp<tfm::MatmulOp>(); m && m->hasOneUse())
      if (auto t = dyn_cast<tfm::TransposeOp>(*m->getUsers().begin());
          t && tfm::foldsIntoMatmulResult(t)) {
        v = t.getResult();
        continue;
      }
    return v;
  }
}

int64_t storageBytes(Value v) {
  auto bytes = [](Value r) {
    auto t = cast<RankedTensorType>(r.getType());
    return t.getNumElements() * t.getElementTypeBitWidth() / 8;
  };
  if (auto q = v.getDefiningOp<tfm::QKVProjectionOp>(); q && tfm::isPackedQKV(q)) {
    int64_t total = 0;
    for (Value r : q.getResults())
      total += bytes(r);
    return total;
  }
  return bytes(v);
}

void checkPlan(func::FuncOp fn) {
  Block &block = fn.getBody().front();
  DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(block))
    index[&op] = i;
  // One entry per storage: written from its first definition (a matmul
  // writing a folded transpose writes it at the matmul) to the last use of
  // any view of it.
  llvm::MapVector<Value, Planned> storage;
  for (Operation &op : block) {
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("tfm.arena_offsets");
    if (!offsets)
      continue;
    for (auto [r, off] : llvm::zip(op.getResults(), offsets.asArrayRef())) {
      if (off < 0)
        continue;
      Value root = storageRoot(r);
      int64_t def = index[&op], last = index[&op];
      if (auto t = r.getDefiningOp<tfm::TransposeOp>();
          t && tfm::foldsIntoMatmulResult(t))
        def = index[t.getInput().getDefiningOp()];
      for (Operation *u : r.getUsers())
        last = std::max(last, index[u]);
      auto [it, fresh] = storage.try_emplace(
          root, Planned{root, def, last, off, storageBytes(root)});
      if (!fresh) {
        if (root == r)
          it->second.offset = off;
        it->second.def = std::min(it->second.def, def);
        it->second.last = std::max(it->second.last, last);
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
      // In place: the later one is defined exactly where the earlier dies,
      // by an op that reads (a view of) it.
      const Planned &first = a.def < b.def ? a : b, &second = a.def < b.def ? b : a;
      Operation *def = second.value.getDefiningOp();
      bool reads = llvm::any_of(def->getOperands(), [&](Value o) {
        return storageRoot(o) == first.value;
      });
      if (first.last == second.def && reads)
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
