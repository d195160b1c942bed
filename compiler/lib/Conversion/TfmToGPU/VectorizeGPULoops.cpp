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

struct Vectorizer {
  scf::ParallelOp loop;
  /// The innermost induction variable, which the vectors run along.
  Value inner;
  /// The values that differ between the elements of one thread.
  DenseSet<Value> varying;

  explicit Vectorizer(scf::ParallelOp loop)
      : loop(loop), inner(loop.getInductionVars().back()) {}

  bool dependsOnInner(ValueRange values) {
    return llvm::any_of(values, [&](Value v) { return varying.contains(v); });
  }

  /// Whether the body is straight-line code that only loads and stores
  /// memory, with every load before the first store: then the stores can
  /// go last, after every element's loads.
  bool bodyIsSimple() {
    bool stored = false;
    for (Operation &op : loop.getBody()->without_terminator()) {
      if (op.getNumRegions() != 0)
        return false;
      if (isa<memref::LoadOp>(op)) {
        if (stored)
          return false;
        continue;
      }
      if (isa<memref::StoreOp>(op)) {
        stored = true;
        continue;
      }
      if (!isMemoryEffectFree(&op))
        return false;
    }
    return true;
  }

  void findVarying() {
    varying.insert(inner);
    for (Operation &op : loop.getBody()->without_terminator())
      if (dependsOnInner(op.getOperands()))
        for (Value r : op.getResults())
          varying.insert(r);
  }

  /// The vector size at which `memref[indices]` is one contiguous, aligned
  /// access, checked for `lanes` elements: the innermost index is the
  /// innermost variable, its stride 1, and the address of the first
  /// element a multiple of the vector's bytes for every value of the other
  /// indices.
  bool contiguous(Value memref, ValueRange indices, int64_t lanes) {
    auto type = cast<MemRefType>(memref.getType());
    int64_t bytes = elementBytes(type.getElementType());
    if (!bytes || varying.contains(memref) || indices.empty() ||
        indices.back() != inner)
      return false;
    if (llvm::any_of(indices.drop_back(),
                     [&](Value i) { return varying.contains(i); }))
      return false;
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(getStridesAndOffset(type, strides, offset)) ||
        strides.back() != 1 || ShapedType::isDynamic(offset))
      return false;
    int64_t align = lanes * bytes;
    if (pointerAlignment(memref) % align)
      return false;
    // Element offsets, in units of elements, must be multiples of lanes.
    if (offset % lanes)
      return false;
    for (auto [index, stride] : llvm::zip(indices.drop_back(), strides)) {
      std::optional<int64_t> c = constantIndex(index);
      if (c) {
        if (ShapedType::isDynamic(stride) || (*c * stride) % lanes)
          return false;
        continue;
      }
      if (ShapedType::isDynamic(stride) || stride % lanes)
        return false;
    }
    return true;
  }

  /// The number of elements each thread takes, 1 when the loop stays as
  /// it is.
  int64_t lanes() {
    if (loop->hasAttr(gpu::getMappingAttrName()) ||
        loop->hasAttr(kLanesAttrName) || loop.getNumReductions() != 0)
      return 1;
    std::optional<int64_t> lb = constantIndex(loop.getLowerBound().back()),
                           ub = constantIndex(loop.getUpperBound().back()),
                           step = constantIndex(loop.getStep().back());
    if (!lb || !ub || !step || *step != 1 || *ub <= *lb)
      return 1;
    if (!bodyIsSimple())
      return 1;
    findVarying();
    // The widest element among the accesses that can be vectors sets how
    // many elements make 16 bytes of it.
    int64_t widest = 0;
    bool storesVary = true;
    loop.getBody()->walk([&](Operation *op) {
      Value memref;
      ValueRange indices;
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        memref = load.getMemRef();
        indices = load.getIndices();
      } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
        memref = store.getMemRef();
        indices = store.getIndices();
        // A store every element of a thread makes to one address would
        // race with itself.
        storesVary &= dependsOnInner(indices);
      } else {
        return;
      }
      if (contiguous(memref, indices, 1))
        widest = std::max(
            widest,
            elementBytes(cast<MemRefType>(memref.getType()).getElementType()));
    });
    if (!widest || !storesVary)
      return 1;
    int64_t v = kVectorBytes / widest;
    while (v > 1 && ((*ub - *lb) % v || *lb % v))
      v /= 2;
    return v;
  }

  void rewrite(int64_t v) {
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    SmallVector<Value> steps(loop.getStep());
    steps.back() = b.create<arith::ConstantIndexOp>(loc, v);
    auto wide = b.create<scf::ParallelOp>(loc, loop.getLowerBound(),
                                          loop.getUpperBound(), steps);
    wide->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
    b.setInsertionPointToStart(wide.getBody());

    // One mapping per element of the thread; values the same for all live
    // in every mapping.
    SmallVector<IRMapping> element(v);
    for (auto [from, to] :
         llvm::zip(loop.getInductionVars(), wide.getInductionVars()))
      for (IRMapping &map : element)
        map.map(from, to);
    Value first = wide.getInductionVars().back();
    for (int64_t e = 1; e < v; ++e)
      element[e].map(inner,
                     b.create<arith::AddIOp>(
                         loc, first, b.create<arith::ConstantIndexOp>(loc, e)));

    SmallVector<memref::StoreOp> stores;
    for (Operation &op : loop.getBody()->without_terminator()) {
      if (auto store = dyn_cast<memref::StoreOp>(op)) {
        stores.push_back(store);
        continue;
      }
      if (!dependsOnInner(op.getOperands())) {
        Operation *copy = b.clone(op, element[0]);
        for (IRMapping &map : llvm::drop_begin(element))
          map.map(op.getResults(), copy->getResults());
        continue;
      }
      auto load = dyn_cast<memref::LoadOp>(op);
      if (load && contiguous(load.getMemRef(), load.getIndices(), v)) {
        Type elementType = load.getType();
        auto vector = b.create<vector::LoadOp>(
            loc, VectorType::get({v}, elementType),
            element[0].lookupOrDefault(load.getMemRef()),
            llvm::map_to_vector(load.getIndices(), [&](Value i) {
              return element[0].lookupOrDefault(i);
            }));
        vector->setAttr(kVectorAlignmentAttrName,
                        b.getI64IntegerAttr(v * elementBytes(elementType)));
        for (int64_t e = 0; e < v; ++e)
          element[e].map(load.getResult(),
                         b.create<vector::ExtractOp>(loc, vector, e));
        continue;
      }
      for (IRMapping &map : element)
        b.clone(op, map);
    }
    // The stores, after every element's loads.
    for (memref::StoreOp store : stores) {
      if (contiguous(store.getMemRef(), store.getIndices(), v)) {
        SmallVector<Value> values;
        for (IRMapping &map : element)
          values.push_back(map.lookupOrDefault(store.getValue()));
        Value vector = b.create<vector::FromElementsOp>(
            loc, VectorType::get({v}, store.getValue().getType()), values);
        auto write = b.create<vector::StoreOp>(
            loc, vector, element[0].lookupOrDefault(store.getMemRef()),
            llvm::map_to_vector(store.getIndices(), [&](Value i) {
              return element[0].lookupOrDefault(i);
            }));
        write->setAttr(
            kVectorAlignmentAttrName,
            b.getI64IntegerAttr(v * elementBytes(store.getValue().getType())));
        continue;
      }
      for (IRMapping &map : element)
        b.clone(*store, map);
    }
    loop.erase();
  }
};

struct VectorizeGPULoopsPass
    : public mlir::tfm::impl::VectorizeGPULoopsPassBase<VectorizeGPULoopsPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    SmallVector<scf::ParallelOp> loops;
    for (Block &block : fn.getBody())
      for (auto loop : block.getOps<scf::ParallelOp>())
        loops.push_back(loop);
    for (scf::ParallelOp loop : loops) {
      Vectorizer vectorizer(loop);
      int64_t v = vectorizer.lanes();
      if (v > 1)
        vectorizer.rewrite(v);
    }
  }
};

} // namespace
