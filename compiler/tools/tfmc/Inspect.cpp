//===- Inspect.cpp - tfmc inspect -----------------------------------------===//
//
// Summarizes a model after fusion: its entry points, ops by name, fused ops,
// parameters and GEMM FLOPs (2·m·n·k per product, the convention of the
// benchmarks), and the activation arena that tfm-plan-memory planned.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/IR/ConstantData.h"
#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {

/// FLOPs of the products in `op`, or 0 for ops that are not products.
int64_t gemmFlops(Operation *op) {
  auto numel = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getNumElements();
  };
  if (auto m = dyn_cast<tfm::MatmulOp>(op)) {
    auto lhs = m.getLhs().getType();
    int64_t k = m.getTransposeLhs() ? lhs.getShape()[lhs.getRank() - 2]
                                    : lhs.getShape().back();
    return 2 * numel(m.getResult()) * k;
  }
  if (auto l = dyn_cast<tfm::LinearOp>(op))
    return 2 * numel(l.getResult()) * l.getInput().getType().getShape().back();
  if (auto g = dyn_cast<tfm::GatedLinearOp>(op))
    // Both halves of the packed projection.
    return 4 * numel(g.getResult()) * g.getInput().getType().getShape().back();
  if (auto q = dyn_cast<tfm::QKVProjectionOp>(op)) {
    int64_t k = q.getInput().getType().getShape().back(), total = 0;
    for (Value r : q.getResults())
      total += 2 * numel(r) * k;
    return total;
  }
  if (auto a = dyn_cast<tfm::AttentionOp>(op)) {
    auto q = a.getQuery().getType(), k = a.getKey().getType();
    int64_t sk = k.getShape()[k.getRank() - 2];
    return 2 * q.getNumElements() * sk + 2 * numel(a.getResult()) * sk;
  }
  return 0;
}

} // namespace

int mlir::tfm::tfmc::runInspect(ModuleOp module, bool json,
                                 llvm::raw_ostream &os) {
  llvm::MapVector<StringRef, int64_t> ops;
  int64_t flops = 0, params = 0, paramBytes = 0;
  module.walk([&](Operation *op) {
    if (isa<ModuleOp, func::FuncOp, func::ReturnOp>(op))
      return;
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      auto t = dyn_cast<RankedTensorType>(c.getType());
      // Constants larger than a handful of elements are parameters; small
      // ones are scales, epsilons and shapes.
      if (t && t.getNumElements() > 16 && isa<FloatType>(t.getElementType())) {
        params += t.getNumElements();
        paramBytes += t.getNumElements() * tfm::elementBytes(t.getElementType());
      }
      return;
    }
    ++ops[op->getName().getStringRef()];
    flops += gemmFlops(op);
  });
  SmallVector<std::pair<StringRef, int64_t>> rows(ops.begin(), ops.end());
  llvm::sort(rows);

  SmallVector<func::FuncOp> entries(module.getOps<func::FuncOp>());
  int64_t arena = 0, bound = 0;
  for (func::FuncOp fn : entries) {
    if (auto a = fn->getAttrOfType<IntegerAttr>("tfm.arena_bytes"))
      arena = std::max(arena, a.getInt());
    if (auto b = fn->getAttrOfType<IntegerAttr>("tfm.arena_lower_bound"))
      bound = std::max(bound, b.getInt());
  }
  if (json) {
    llvm::json::Object opsJson;
    for (auto &[name, n] : rows)
      opsJson[name] = n;
    llvm::json::Array entryJson;
    for (func::FuncOp fn : entries) {
      std::string sig;
      llvm::raw_string_ostream os(sig);
      os << fn.getFunctionType();
      entryJson.push_back(llvm::json::Object{{"name", fn.getSymName()},
                                             {"type", os.str()}});
    }
    os << llvm::formatv(
                        "{0:2}",
                        llvm::json::Value(llvm::json::Object{
                            {"entries", std::move(entryJson)},
                            {"ops", std::move(opsJson)},
                            {"parameters", params},
                            {"parameter_bytes", paramBytes},
                            {"gemm_flops", flops},
                            {"memory_plan",
                             llvm::json::Object{{"arena_bytes", arena},
                                                {"lower_bound_bytes", bound}}}}))
                 << "\n";
    return kExitOk;
  }
  for (func::FuncOp fn : entries)
    os << "entry @" << fn.getSymName() << ": "
                 << fn.getFunctionType() << "\n";
  os << llvm::formatv("parameters: {0} ({1:f1} MB)\n", params,
                                paramBytes / 1e6);
  os << llvm::formatv("GEMM FLOPs per call: {0} ({1:f3} GFLOP)\n",
                                flops, flops / 1e9);
  os << "ops after fusion:\n";
  for (auto &[name, n] : rows)
    os << llvm::formatv("  {0,-24} {1,6}\n", name, n);
  os << llvm::formatv(
      "memory plan: arena {0} bytes, lower bound {1} bytes ({2:f3}x)\n", arena,
      bound, bound ? static_cast<double>(arena) / bound : 1.0);
  return kExitOk;
}
