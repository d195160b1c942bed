//===- LowerBF16MmaSync.cpp - tfm-lower-bf16-mma-sync ---------------------===//
//
// The kernels tfm-retype-bf16-tiles marked hold their bf16 fragments as
// f16 patterns, distributed by convert-vector-to-gpu into nvgpu.mma.sync
// ops of f16 operands. Each becomes the bf16 instruction's intrinsic,
// whose operands are the fragments' 32-bit registers: per lane, A's four
// pairs of 16-bit values, B's two, and C's four f32 values, row by row,
// as nvgpu.mma.sync holds them (vector<4x2>, vector<2x2>, vector<2x2>).
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERBF16MMASYNCPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr llvm::StringLiteral kBF16MmaIntrinsic =
    "llvm.nvvm.mma.m16n8k16.row.col.bf16";

/// Replaces `mma` by the bf16 intrinsic, or fails when it is not the shape
/// tfm-tile-gpu-matmul makes.
LogicalResult lowerToBF16(nvgpu::MmaSyncOp mma) {
  MLIRContext *ctx = mma.getContext();
  auto f16 = Float16Type::get(ctx);
  auto f32 = Float32Type::get(ctx);
  auto pairs = [&](int64_t n) { return VectorType::get({n, 2}, f16); };
  if (mma.getMmaShapeAsArray() != std::array<int64_t, 3>{16, 8, 16} ||
      mma.getMatrixA().getType() != pairs(4) ||
      mma.getMatrixB().getType() != pairs(2) ||
      mma.getMatrixC().getType() != VectorType::get({2, 2}, f32))
    return mma.emitError("tfm-lower-bf16-mma-sync: expected an m16n8k16 "
                         "mma.sync of f16-held operands into f32");
  OpBuilder b(mma);
  Location loc = mma.getLoc();
  Type i32 = b.getI32Type();
  SmallVector<Value> args;
  for (auto [matrix, rows] :
       {std::pair{mma.getMatrixA(), 4}, std::pair{mma.getMatrixB(), 2}})
    for (int64_t r = 0; r < rows; ++r)
      args.push_back(b.create<LLVM::BitcastOp>(
          loc, i32, b.create<vector::ExtractOp>(loc, matrix, r)));
  for (int64_t i = 0; i < 4; ++i)
    args.push_back(b.create<vector::ExtractOp>(
        loc, mma.getMatrixC(), ArrayRef<int64_t>{i / 2, i % 2}));
  auto resultType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  auto call = b.create<LLVM::CallIntrinsicOp>(loc, resultType,
                                              kBF16MmaIntrinsic, args);
  Value result = b.create<arith::ConstantOp>(
      loc, b.getZeroAttr(mma.getMatrixC().getType()));
  for (int64_t i = 0; i < 4; ++i)
    result = b.create<vector::InsertOp>(
        loc, b.create<LLVM::ExtractValueOp>(loc, call.getResult(0), i), result,
        ArrayRef<int64_t>{i / 2, i % 2});
  mma.replaceAllUsesWith(result);
  mma.erase();
  return success();
}

/// Whether `op` (a kernel, or one mma.sync, as the kernels built whole mark
/// theirs) carries `tfm.mma_operand_type = bf16`.
bool isBF16Marker(Operation *op) {
  auto type = op->getAttrOfType<TypeAttr>(kMmaOperandTypeAttrName);
  return type && type.getValue().isBF16();
}

struct LowerBF16MmaSyncPass
    : public mlir::tfm::impl::LowerBF16MmaSyncPassBase<LowerBF16MmaSyncPass> {
  void runOnOperation() override {
    for (auto kernel : getOperation().getOps<gpu::GPUFuncOp>()) {
      bool bf16Kernel = isBF16Marker(kernel);
      SmallVector<nvgpu::MmaSyncOp> mmas;
      kernel.walk([&](nvgpu::MmaSyncOp mma) {
        if (bf16Kernel || isBF16Marker(mma))
          mmas.push_back(mma);
      });
      for (nvgpu::MmaSyncOp mma : mmas)
        if (failed(lowerToBF16(mma)))
          return signalPassFailure();
    }
  }
};

} // namespace
