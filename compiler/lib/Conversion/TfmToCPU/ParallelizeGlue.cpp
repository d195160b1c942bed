//===- ParallelizeGlue.cpp - tfm-parallelize-glue -------------------------===//
//
// The glue of a CPU entry, the linalg no kernel runs (elementwise maps,
// copies, broadcasts, the bias gradients of the backward pass), is lowered
// to plain loops, which run on the calling thread while the other threads
// wait for the next kernel. In W5's training step that was a tenth of the
// time. Each large enough op is outlined into a function over a range of
// one of its parallel loops,
//
//   func.func private @__tfm_glue_N(%buffers..., %begin: index, %end: index)
//
// which the runtime runs in parts on the session's threads through
// `__tfm_parallel_for` (Symbols.h). The outlined op reads and writes
// subviews of the buffers along that loop, so the parts touch disjoint
// elements of every output: the loop is parallel, and each output indexes
// it by itself. The buffers travel as aligned pointers, which the outlined
// function, under the bare-pointer calling convention of every CPU
// function, takes back with the static layouts of their types.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"
#include "tfm/Target/Symbols.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_PARALLELIZEGLUEPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// How an op is split: along loop `dim` of `extent` iterations, over
/// `buffers` (its operands, then the memrefs its body reads from above),
/// with `constants` cloned into the outlined function.
struct Split {
  unsigned dim = 0;
  int64_t extent = 0;
  SmallVector<Value> buffers;
  SmallVector<Operation *> constants;
};

/// Whether a memref passes as a bare pointer: static shape, strides and
/// offset, so that the callee rebuilds it from the aligned pointer alone.
bool passesBare(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape())
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(getStridesAndOffset(memref, strides, offset)))
    return false;
  return !ShapedType::isDynamic(offset) &&
         llvm::none_of(strides, ShapedType::isDynamic);
}

/// The result position at which `map` reads loop `dim` by itself, -1 where
/// it does not read it, or failure where it reads it in a compound
/// expression or twice.
FailureOr<int> positionOf(AffineMap map, unsigned dim) {
  int position = -1;
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    if (!expr.isFunctionOfDim(dim))
      continue;
    auto d = dyn_cast<AffineDimExpr>(expr);
    if (!d || position >= 0)
      return failure();
    position = static_cast<int>(i);
  }
  return position;
}

/// How `op` is split, if it has at least `minIterations` iterations and a
/// loop that splits it.
std::optional<Split> planSplit(linalg::LinalgOp op, int64_t minIterations) {
  if (!op.hasPureBufferSemantics())
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t iterations = 1;
  for (int64_t r : ranges) {
    if (ShapedType::isDynamic(r))
      return std::nullopt;
    iterations *= r;
  }
  if (iterations < minIterations)
    return std::nullopt;
  Split split;
  // The body may read buffers from above (a gather's table) and use
  // constants; anything else it takes from above, or any write it makes
  // besides its outputs, keeps the op where it is.
  bool bodyOk = true;
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(op->getRegions(), above);
  for (Value v : above) {
    Operation *def = v.getDefiningOp();
    if (def && matchPattern(def, m_Constant()))
      split.constants.push_back(def);
    else if (isa<MemRefType>(v.getType()))
      split.buffers.push_back(v);
    else
      bodyOk = false;
  }
  op->walk([&](Operation *inner) {
    if (inner != op.getOperation() && !isa<memref::LoadOp>(inner) &&
        !isMemoryEffectFree(inner))
      bodyOk = false;
  });
  if (!bodyOk)
    return std::nullopt;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  std::optional<unsigned> chosen;
  for (unsigned d = 0; d < ranges.size() && !chosen; ++d) {
    if (iterators[d] != utils::IteratorType::parallel || ranges[d] < 2)
      continue;
    bool ok = true;
    for (OpOperand &operand : op->getOpOperands()) {
      FailureOr<int> at = positionOf(op.getMatchingIndexingMap(&operand), d);
      // Each output must index the loop, so that parts write apart.
      if (failed(at) || (op.isDpsInit(&operand) && *at < 0))
        ok = false;
    }
    if (ok)
      chosen = d;
  }
  if (!chosen)
    return std::nullopt;
  split.dim = *chosen;
  split.extent = ranges[*chosen];
  // An operand the op names twice, or also reads from above, would need
  // the whole buffer and a part of it under one name.
  SmallVector<Value> operands(op->getOperands());
  llvm::SmallPtrSet<Value, 8> seen;
  for (Value v : operands)
    if (!seen.insert(v).second)
      return std::nullopt;
  if (llvm::any_of(split.buffers, [&](Value v) { return seen.contains(v); }))
    return std::nullopt;
  split.buffers.insert(split.buffers.begin(), operands.begin(),
                       operands.end());
  if (!llvm::all_of(split.buffers,
                    [](Value v) { return passesBare(v.getType()); }))
    return std::nullopt;
  return split;
}

/// Outlines `op` as `name(buffers..., begin, end)`, running its iterations
/// [begin, end) of loop `split.dim`.
func::FuncOp outline(ModuleOp module, linalg::LinalgOp op, const Split &split,
                     StringRef name) {
  Location loc = op.getLoc();
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  SmallVector<Type> types;
  for (Value v : split.buffers)
    types.push_back(v.getType());
  types.append(2, b.getIndexType());
  auto fn = b.create<func::FuncOp>(loc, name,
                                   b.getFunctionType(types, TypeRange{}));
  fn.setPrivate();
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value begin = body->getArgument(split.buffers.size());
  Value end = body->getArgument(split.buffers.size() + 1);
  Value count = b.create<arith::SubIOp>(loc, end, begin);
  IRMapping mapping;
  for (Operation *c : split.constants)
    b.clone(*c, mapping);
  for (auto [i, v] : llvm::enumerate(split.buffers))
    mapping.map(v, body->getArgument(i));
  // Each operand becomes its subview along the split loop.
  for (OpOperand &operand : op->getOpOperands()) {
    int at = *positionOf(op.getMatchingIndexingMap(&operand), split.dim);
    Value whole = mapping.lookup(operand.get());
    if (at < 0)
      continue;
    auto type = cast<MemRefType>(whole.getType());
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes, strides(type.getRank(),
                                             b.getIndexAttr(1));
    for (int64_t size : type.getShape())
      sizes.push_back(b.getIndexAttr(size));
    offsets[at] = begin;
    sizes[at] = count;
    mapping.map(operand.get(), b.create<memref::SubViewOp>(loc, whole, offsets,
                                                           sizes, strides));
  }
  auto part = cast<linalg::LinalgOp>(b.clone(*op, mapping));
  // Indices of the split loop count from the part's start.
  part->walk([&](linalg::IndexOp index) {
    if (index.getDim() != split.dim)
      return;
    OpBuilder ib(index->getContext());
    ib.setInsertionPointAfter(index);
    auto global = ib.create<arith::AddIOp>(index.getLoc(), index, begin);
    index.getResult().replaceAllUsesExcept(global, global);
  });
  b.create<func::ReturnOp>(loc);
  return fn;
}

struct ParallelizeGluePass
    : public mlir::tfm::impl::ParallelizeGluePassBase<ParallelizeGluePass> {
  using Base::Base;

  void runOnOperation() override {
    if (minIterations <= 0)
      return;
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    auto taskTy = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                              {ptrTy, i64, i64});
    OpBuilder b(ctx);
    int64_t outlined = 0;
    SmallVector<func::FuncOp> entries;
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn.getName().starts_with(kEntrySymbolPrefix) && !fn.isExternal() &&
          fn.getNumArguments() > 0 &&
          isa<LLVM::LLVMPointerType>(fn.getArgument(0).getType()))
        entries.push_back(fn);
    for (func::FuncOp fn : entries) {
      SmallVector<std::pair<linalg::LinalgOp, Split>> splits;
      size_t slots = 0;
      for (Block &block : fn.getBody())
        for (Operation &op : block)
          if (auto linalgOp = dyn_cast<linalg::LinalgOp>(&op))
            if (std::optional<Split> s = planSplit(linalgOp, minIterations)) {
              slots = std::max(slots, s->buffers.size());
              splits.emplace_back(linalgOp, std::move(*s));
            }
      if (splits.empty())
        continue;
      if (outlined == 0) {
        b.setInsertionPointToStart(module.getBody());
        b.create<LLVM::LLVMFuncOp>(
            module.getLoc(), kParallelForSymbol,
            LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                        {ptrTy, ptrTy, ptrTy, i64}));
      }
      // One pointer array per entry, filled before each call.
      Location fnLoc = fn.getLoc();
      b.setInsertionPointToStart(&fn.getBody().front());
      Value args = b.create<LLVM::AllocaOp>(
          fnLoc, ptrTy, ptrTy,
          b.create<arith::ConstantIntOp>(fnLoc, slots, 64), 8);
      Value host = fn.getArgument(0);
      for (auto &[op, split] : splits) {
        Location loc = op.getLoc();
        std::string name = (kGlueSymbolPrefix + std::to_string(outlined++));
        outline(module, op, split, name);
        std::string task = name + kGlueTaskSuffix;
        b.setInsertionPointToEnd(module.getBody());
        b.create<LLVM::LLVMFuncOp>(loc, task, taskTy);
        b.setInsertionPoint(op);
        for (auto [i, buffer] : llvm::enumerate(split.buffers)) {
          FailureOr<Value> address =
              alignedAddressOf(b, loc, buffer, /*throughOffsetViews=*/true);
          if (failed(address)) {
            op->emitOpError("cannot take the address of buffer ")
                << i << "; the glue reads views of the entry's arguments";
            return signalPassFailure();
          }
          Value asInt = b.create<arith::IndexCastOp>(loc, i64, *address);
          Value slot = b.create<LLVM::GEPOp>(
              loc, ptrTy, ptrTy, args, ArrayRef<LLVM::GEPArg>{int32_t(i)});
          b.create<LLVM::StoreOp>(
              loc, b.create<LLVM::IntToPtrOp>(loc, ptrTy, asInt), slot);
        }
        Value fnPtr = b.create<LLVM::AddressOfOp>(loc, ptrTy, task);
        Value n = b.create<arith::ConstantIntOp>(loc, split.extent, 64);
        b.create<LLVM::CallOp>(loc, TypeRange{},
                               FlatSymbolRefAttr::get(ctx, kParallelForSymbol),
                               ValueRange{host, fnPtr, args, n});
        op->erase();
      }
    }
  }
};

} // namespace
