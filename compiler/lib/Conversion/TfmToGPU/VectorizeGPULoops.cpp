//===- VectorizeGPULoops.cpp - tfm-vectorize-gpu-loops
//---------------------===//
//
// tfm-map-to-gpu gives each element of an elementwise loop nest a thread of
// its own, so a warp's load is 32 elements: 128 bytes of f32, 64 of bf16.
// A GPU keeps a bounded number of loads in flight per thread, so the bytes
// each load moves set how close a memory-bound kernel comes to the
// bandwidth; 16 bytes is the widest load a thread has. This pass gives each
// thread V consecutive elements of the innermost dimension (16 bytes of the
// widest element type the loop touches) and reads and writes them with one
// vector access each where the elements are contiguous and the address is
// known to be a multiple of the vector's size.
//
// The body is unrolled rather than vectorized: a GPU computes vectors of
// f32 element by element anyway, so only the memory accesses change, and
// every op, whatever it is, stays valid. An access that is not contiguous
// along the innermost dimension, or whose alignment is not proven, is made
// once per element, as before. Alignment is proven from the buffer's
// place: entry arguments start at the runtime's buffer alignment, a view
// moves that by its byte shift, and the access's offset, from the layout's
// offset and the strides of the other dimensions, must keep it.
//
// MLIR 19 lowers vector.load with the element's alignment, which makes the
// NVPTX backend split it into scalar loads; the vector accesses carry
// `tfm.alignment` (bytes), which tfm-lower-aligned-vector-access states on
// the LLVM load or store.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "BufferPlace.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <numeric>

namespace mlir::tfm {
#define GEN_PASS_DEF_VECTORIZEGPULOOPSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The widest access a thread makes, in bytes.
constexpr int64_t kVectorBytes = 16;

/// The bytes of one element of `type` in memory, or 0 for types whose
/// vectors do not lie in memory element by element (i1: LLVM packs a
/// vector of i1 into bits, where a memref holds a byte each).
int64_t elementBytes(Type type) {
  if (!type.isIntOrFloat() || type.getIntOrFloatBitWidth() % 8)
    return 0;
  return type.getIntOrFloatBitWidth() / 8;
}

std::optional<int64_t> constantIndex(Value v) {
  if (auto c = v.getDefiningOp<arith::ConstantIndexOp>())
    return c.value();
  return std::nullopt;
}

/// A loop body run for V consecutive elements of `inner` by one thread:
/// the body repeated per element, in order, with what the loop carries
/// passed from each element to the next, the contiguous loads read once
/// as vectors before the first element, and the stores made last (as
/// vectors where contiguous). Stores may sit in an scf.if whose condition
/// is the same for every element (a row kernel's guard on the spare warps).
struct ElementUnroller {
  Block *body;
  /// The induction variable the vectors run along.
  Value inner;
  /// What the loop carries from one iteration to the next.
  ValueRange carried;
  /// The values that differ between the elements of one thread.
  DenseSet<Value> varying;

  ElementUnroller(Block *body, Value inner, ValueRange carried)
      : body(body), inner(inner), carried(carried) {}

  bool dependsOnInner(ValueRange values) {
    return llvm::any_of(values, [&](Value v) { return varying.contains(v); });
  }

  /// An scf.if of stores alone, under a condition the same for every
  /// element.
  bool isGuardedStores(Operation &op) {
    auto guard = dyn_cast<scf::IfOp>(op);
    if (!guard || guard.getNumResults() != 0 ||
        !guard.getElseRegion().empty() || dependsOnInner(guard.getCondition()))
      return false;
    return llvm::all_of(
        guard.getThenRegion().front().without_terminator(),
        [](Operation &inner) { return isa<memref::StoreOp>(inner); });
  }

  /// The stores of `op`: itself, or those a guard holds.
  SmallVector<memref::StoreOp> storesOf(Operation &op) {
    if (auto store = dyn_cast<memref::StoreOp>(op))
      return {store};
    SmallVector<memref::StoreOp> stores;
    if (isGuardedStores(op))
      for (auto store :
           cast<scf::IfOp>(op).getThenRegion().getOps<memref::StoreOp>())
        stores.push_back(store);
    return stores;
  }

  /// Whether the body is straight-line code that only loads and stores
  /// memory, with every load before the first store: then the stores can
  /// go last, after every element's loads. Finds the varying values too.
  bool analyze() {
    varying.insert(inner);
    for (Value c : carried)
      varying.insert(c);
    bool stored = false;
    for (Operation &op : body->without_terminator()) {
      if (dependsOnInner(op.getOperands()))
        for (Value r : op.getResults())
          varying.insert(r);
      if (isa<memref::LoadOp>(op)) {
        if (stored)
          return false;
        continue;
      }
      if (isa<memref::StoreOp>(op) || isGuardedStores(op)) {
        stored = true;
        // A store every element of a thread would make to one address
        // would race with itself.
        for (memref::StoreOp store : storesOf(op))
          if (!dependsOnInner(store.getIndices()))
            return false;
        continue;
      }
      if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
        return false;
    }
    return true;
  }

  /// Whether `memref[indices]` for `lanes` elements is one contiguous,
  /// aligned access: the innermost index is `inner`, its stride 1, and the
  /// address of the first element a multiple of the vector's bytes for
  /// every value of the other indices (`inner` itself being a multiple of
  /// `lanes`).
  bool contiguous(Value memref, ValueRange indices, int64_t lanes) {
    auto type = cast<MemRefType>(memref.getType());
    if (!elementBytes(type.getElementType()) || varying.contains(memref) ||
        indices.empty() || indices.back() != inner)
      return false;
    if (llvm::any_of(indices.drop_back(),
                     [&](Value i) { return varying.contains(i); }))
      return false;
    return vectorAligned(
        memref,
        llvm::map_to_vector(indices.drop_back(),
                            [](Value i) { return constantIndex(i); }),
        lanes);
  }

  /// The bytes of the widest element the body reads or writes
  /// contiguously, 0 when it does so nowhere (vectors would gain nothing).
  int64_t widestContiguous() {
    int64_t widest = 0;
    auto note = [&](Value memref, ValueRange indices) {
      if (contiguous(memref, indices, 1))
        widest = std::max(
            widest,
            elementBytes(cast<MemRefType>(memref.getType()).getElementType()));
    };
    for (Operation &op : body->without_terminator()) {
      if (auto load = dyn_cast<memref::LoadOp>(op))
        note(load.getMemRef(), load.getIndices());
      for (memref::StoreOp store : storesOf(op))
        note(store.getMemRef(), store.getIndices());
    }
    return widest;
  }

  /// The store of `store`'s value for every element, as one vector where
  /// it is contiguous.
  void emitStore(OpBuilder &b, memref::StoreOp store,
                 MutableArrayRef<IRMapping> element) {
    int64_t v = element.size();
    Location loc = store.getLoc();
    if (!contiguous(store.getMemRef(), store.getIndices(), v)) {
      for (IRMapping &map : element)
        b.clone(*store, map);
      return;
    }
    SmallVector<Value> values;
    for (IRMapping &map : element)
      values.push_back(map.lookupOrDefault(store.getValue()));
    storeAlignedVector(b, loc, values,
                       element[0].lookupOrDefault(store.getMemRef()),
                       llvm::map_to_vector(store.getIndices(), [&](Value i) {
                         return element[0].lookupOrDefault(i);
                       }));
  }

  /// The body for the `v` elements from `first` on, at `b`, the other
  /// induction variables mapped by `outer` and the carried values entering
  /// the first element `carriedIn`; returns what the last element yields.
  SmallVector<Value> emit(OpBuilder &b, Location loc, const IRMapping &outer,
                          Value first, int64_t v, ValueRange carriedIn) {
    SmallVector<IRMapping> element(v, outer);
    element[0].map(inner, first);
    for (int64_t e = 1; e < v; ++e)
      element[e].map(inner,
                     b.create<arith::AddIOp>(
                         loc, first, b.create<arith::ConstantIndexOp>(loc, e)));
    // What every element computes alike, once.
    for (Operation &op : body->without_terminator()) {
      if (dependsOnInner(op.getOperands()) || isa<memref::StoreOp>(op) ||
          isGuardedStores(op))
        continue;
      Operation *copy = b.clone(op, element[0]);
      for (IRMapping &map : llvm::drop_begin(element))
        map.map(op.getResults(), copy->getResults());
    }
    // The contiguous loads, once each as a vector.
    DenseSet<Operation *> loaded;
    for (auto load : body->getOps<memref::LoadOp>()) {
      if (!dependsOnInner(load.getIndices()) ||
          !contiguous(load.getMemRef(), load.getIndices(), v))
        continue;
      loaded.insert(load);
      SmallVector<Value> elements = loadAlignedVector(
          b, loc, element[0].lookupOrDefault(load.getMemRef()),
          llvm::map_to_vector(
              load.getIndices(),
              [&](Value i) { return element[0].lookupOrDefault(i); }),
          v);
      for (int64_t e = 0; e < v; ++e)
        element[e].map(load.getResult(), elements[e]);
    }
    // Each element in turn, given what the one before it yields.
    auto yielded = body->getTerminator()->getOperands();
    SmallVector<Value> flowing(carriedIn);
    for (IRMapping &map : element) {
      map.map(carried, flowing);
      for (Operation &op : body->without_terminator())
        if (dependsOnInner(op.getOperands()) && !loaded.contains(&op) &&
            !isa<memref::StoreOp>(op) && !isGuardedStores(op))
          b.clone(op, map);
      flowing = llvm::map_to_vector(
          yielded, [&](Value y) { return map.lookupOrDefault(y); });
    }
    // The stores, after every element's loads.
    for (Operation &op : body->without_terminator()) {
      if (auto store = dyn_cast<memref::StoreOp>(op)) {
        emitStore(b, store, element);
        continue;
      }
      if (!isGuardedStores(op))
        continue;
      auto guard = b.create<scf::IfOp>(
          loc, element[0].lookupOrDefault(cast<scf::IfOp>(op).getCondition()));
      OpBuilder gb = guard.getThenBodyBuilder();
      for (memref::StoreOp store : storesOf(op))
        emitStore(gb, store, element);
    }
    return flowing;
  }
};

/// The elements a thread takes at once: 16 bytes of the widest contiguous
/// element, halved until they divide `extent`; 1 when the body does not
/// qualify.
int64_t elementsPerThread(ElementUnroller &unroller, int64_t extent) {
  if (!unroller.analyze())
    return 1;
  int64_t widest = unroller.widestContiguous();
  if (!widest)
    return 1;
  int64_t v = kVectorBytes / widest;
  while (v > 1 && extent % v)
    v /= 2;
  return v;
}

/// An elementwise nest: its innermost dimension steps by V.
void vectorize(scf::ParallelOp loop) {
  if (loop->hasAttr(gpu::getMappingAttrName()) ||
      loop->hasAttr(kLanesAttrName) || loop.getNumReductions() != 0)
    return;
  std::optional<int64_t> lb = constantIndex(loop.getLowerBound().back()),
                         ub = constantIndex(loop.getUpperBound().back()),
                         step = constantIndex(loop.getStep().back());
  if (!lb || !ub || !step || *step != 1 || *ub <= *lb)
    return;
  ElementUnroller unroller(loop.getBody(), loop.getInductionVars().back(),
                           ValueRange{});
  // The first element of each thread's vector is then a multiple of V.
  int64_t v = elementsPerThread(unroller, std::gcd(*ub - *lb, *lb));
  if (v == 1)
    return;
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  SmallVector<Value> steps(loop.getStep());
  steps.back() = b.create<arith::ConstantIndexOp>(loc, v);
  auto wide = b.create<scf::ParallelOp>(loc, loop.getLowerBound(),
                                        loop.getUpperBound(), steps);
  wide->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  b.setInsertionPointToStart(wide.getBody());
  IRMapping outer;
  outer.map(loop.getInductionVars(), wide.getInductionVars());
  unroller.emit(b, loc, outer, wide.getInductionVars().back(), v, ValueRange{});
  loop.erase();
}

/// A row kernel's pass over its columns (`tfm.column_pass`): the threads
/// of a row share the columns lb, lb + step, ... and combine what they
/// carry, so any other split of the columns computes the same; each thread
/// then takes V consecutive columns at lb · V, lb · V + step · V, ...
void vectorize(scf::ForOp loop) {
  std::optional<int64_t> ub = constantIndex(loop.getUpperBound()),
                         step = constantIndex(loop.getStep());
  if (!ub || !step || *step <= 0)
    return;
  ElementUnroller unroller(loop.getBody(), loop.getInductionVar(),
                           loop.getRegionIterArgs());
  int64_t v = elementsPerThread(unroller, *ub);
  if (v == 1)
    return;
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  Value wideV = b.create<arith::ConstantIndexOp>(loc, v);
  auto wide = b.create<scf::ForOp>(
      loc, b.create<arith::MulIOp>(loc, loop.getLowerBound(), wideV),
      loop.getUpperBound(), b.create<arith::ConstantIndexOp>(loc, *step * v),
      loop.getInitArgs(),
      [&](OpBuilder &wb, Location, Value col, ValueRange carried) {
        wb.create<scf::YieldOp>(
            loc, unroller.emit(wb, loc, IRMapping(), col, v, carried));
      });
  loop.replaceAllUsesWith(wide.getResults());
  loop.erase();
}

struct VectorizeGPULoopsPass
    : public mlir::tfm::impl::VectorizeGPULoopsPassBase<VectorizeGPULoopsPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    SmallVector<scf::ParallelOp> nests;
    SmallVector<scf::ForOp> passes;
    for (Block &block : fn.getBody())
      for (Operation &op : block) {
        if (auto nest = dyn_cast<scf::ParallelOp>(op))
          nests.push_back(nest);
        if (isa<gpu::LaunchOp>(op))
          op.walk([&](scf::ForOp loop) {
            if (loop->hasAttr(kColumnPassAttrName))
              passes.push_back(loop);
          });
      }
    for (scf::ParallelOp nest : nests)
      vectorize(nest);
    for (scf::ForOp pass : passes)
      vectorize(pass);
  }
};

} // namespace
