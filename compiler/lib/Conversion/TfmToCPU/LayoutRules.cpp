//===- LayoutRules.cpp - What the CPU's kernels read and write in place ---===//
//
// BATCH_MATMUL reads and writes any element strides, so a transpose that
// feeds a strided matmul (or attention computed unfused, whose products it
// runs), or that follows one, is a view; so does ATTENTION
// (rows at any strides; a view whose elements are not dense is copied),
// which also rotates its query and keys as it loads them, so a rotary
// embedding that only it reads is never stored; LINEAR writes one packed
// buffer for a QKV projection, whose parts are its column windows; the
// softmax kernels read each row before writing it, so they work in place.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToCPU/TfmToCPU.h"

#include <cmath>
#include <mutex>

using namespace mlir;
using namespace mlir::tfm;

bool mlir::tfm::usesAttentionKernel(AttentionOp op) {
  auto qt = op.getQuery().getType(), kt = op.getKey().getType(),
       vt = op.getValue().getType();
  if (!qt.getElementType().isF32() || !kt.getElementType().isF32() ||
      !vt.getElementType().isF32() || qt.getRank() < 2 || qt.getRank() > 4 ||
      qt.getNumElements() == 0 || kt.getNumElements() == 0 ||
      vt.getNumElements() == 0)
    return false;
  // The unfused graph would need the keys and values repeated per head.
  if (op.getKVGroup() != 1)
    return true;
  ArrayRef<int64_t> qs = qt.getShape();
  int64_t sq = qs[qs.size() - 2], sk = kt.getShape()[qs.size() - 2];
  // A few queries (decoding) take no GEMMs, and read a cache only as far as
  // its positions are written.
  if (sq <= TFM_ATTENTION_FEW_QUERIES)
    return true;
  // Elsewhere, where it is faster. The kernel pays a GEMM dispatch (about 4 µs) per
  // block of 64 queries and 512 keys; the unfused graph pays three kernel
  // calls (about 30 µs) and writes, reads and rewrites the scores (12 bytes
  // a score, at about 20 GB/s). Measured on W1-W4 and W8: many small heads
  // (W4's 64 of 64 x 64) stay unfused, long sequences always fuse.
  double groups = static_cast<double>(product(qs.drop_back(2)));
  double blocks = groups * std::ceil(sq / 64.0) * std::ceil(sk / 512.0);
  double fusedUs = 4.0 * blocks;
  double unfusedUs = 30.0 + groups * sq * sk * 12.0 / 20e3;
  return fusedUs <= unfusedUs;
}

SmallVector<int64_t, 4> mlir::tfm::attentionTableDims(RotaryOp op) {
  int64_t rank = op.getType().getRank();
  auto table = op.getCos().getType().getShape();
  SmallVector<int64_t, 4> dims(rank - table.size(), 1);
  llvm::append_range(dims, table);
  while (dims.size() < 4)
    dims.insert(dims.begin(), 1);
  return dims;
}

bool mlir::tfm::rotatesInAttentionKernel(RotaryOp op) {
  if (!op->hasOneUse())
    return false;
  OpOperand &use = *op->use_begin();
  auto attention = dyn_cast<AttentionOp>(use.getOwner());
  unsigned operand = use.getOperandNumber();
  if (!attention || operand > 1 || !usesAttentionKernel(attention))
    return false;
  auto cos = op.getCos().getType(), sin = op.getSin().getType();
  if (!cos.getElementType().isF32() || cos != sin ||
      cos.getRank() > op.getType().getRank() ||
      attentionTableDims(op).back() != op.getType().getShape().back())
    return false;
  if (operand == 0)
    return true;
  auto query = attention.getQuery().getDefiningOp<RotaryOp>();
  return !query || !rotatesInAttentionKernel(query) ||
         (query.getCos() == op.getCos() && query.getSin() == op.getSin() &&
          query.getInterleaved() == op.getInterleaved());
}

bool mlir::tfm::isPackedQKV(QKVProjectionOp op) {
  auto in = op.getInput().getType();
  return in.getElementType().isF32() && in.getNumElements() > 0 &&
         op.getWeight().getType().getNumElements() > 0;
}

namespace {

class CPULayoutRules : public LayoutRules {
public:
  StringRef getTarget() const override { return "cpu"; }

  bool readsStrided(Operation *op, unsigned index) const override {
    // Unfused, attention's two products are BATCH_MATMULs, which take up to
    // two batch dimensions at any strides.
    if (auto a = dyn_cast<AttentionOp>(op))
      return index < 3 &&
             (usesAttentionKernel(a) || a.getQuery().getType().getRank() <= 4);
    auto mm = dyn_cast<MatmulOp>(op);
    return mm && isStridedMatmul(mm);
  }
  bool writesStrided(Operation *op, unsigned) const override {
    return readsStrided(op, 0);
  }

  std::optional<PackedResults> packsResults(Operation *op) const override {
    auto qkv = dyn_cast<QKVProjectionOp>(op);
    if (!qkv || !isPackedQKV(qkv))
      return std::nullopt;
    auto inShape = qkv.getInput().getType().getShape();
    int64_t rows = product(inShape.drop_back()), total = 0;
    for (int64_t size : qkv.getSizes())
      total += size;
    PackedResults packed;
    packed.bytes = rows * total * 4;
    int64_t column = 0;
    for (auto [r, size] : llvm::zip(qkv.getResults(), qkv.getSizes())) {
      auto shape = cast<RankedTensorType>(r.getType()).getShape();
      SmallVector<int64_t> strides = rowMajorStrides(shape);
      // Rows are `total` apart; the leading dimensions multiply rows.
      if (shape.size() >= 2) {
        strides[shape.size() - 2] = total;
        for (int64_t d = static_cast<int64_t>(shape.size()) - 3; d >= 0; --d)
          strides[d] = strides[d + 1] * shape[d + 1];
      }
      packed.offsets.push_back(column);
      packed.strides.push_back(strides);
      column += size;
    }
    return packed;
  }

  bool worksInPlace(Operation *op) const override {
    return LayoutRules::worksInPlace(op) ||
           isa<SoftmaxOp, MaskedSoftmaxOp>(op);
  }

  bool computedInline(Operation *op, ComputeType computeType) const override {
    auto rotary = dyn_cast<RotaryOp>(op);
    return LayoutRules::computedInline(op, computeType) ||
           (rotary && rotatesInAttentionKernel(rotary));
  }
};

} // namespace

void mlir::tfm::registerCPUTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerLayoutRules(std::make_unique<CPULayoutRules>());
    registerTargetLowerings("cpu", populateTfmToCPULowerings);
  });
}
