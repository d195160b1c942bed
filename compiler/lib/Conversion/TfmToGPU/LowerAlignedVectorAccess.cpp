//===- LowerAlignedVectorAccess.cpp - tfm-lower-aligned-vector-access -----===//
//
// MLIR 19's vector.load and vector.store become LLVM accesses aligned to
// their element, and the NVPTX backend splits a vector access it cannot
// prove aligned into one access per element. The accesses
// tfm-vectorize-gpu-loops proved aligned carry `tfm.alignment`; here they
// become LLVM accesses that state it, so that each is one 8- or 16-byte
// load or store. The address is computed as upstream's lowering computes
// it; the memref operands meet the later conversions through
// unrealized casts, as every partial conversion to LLVM leaves them.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERALIGNEDVECTORACCESSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

std::optional<int64_t> alignmentOf(Operation *op) {
  if (auto a = op->getAttrOfType<IntegerAttr>(kVectorAlignmentAttrName))
    return a.getInt();
  return std::nullopt;
}

struct AlignedLoad : ConvertOpToLLVMPattern<vector::LoadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(vector::LoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::optional<int64_t> align = alignmentOf(op);
    Type type = getTypeConverter()->convertType(op.getVectorType());
    if (!align || !type || op.getVectorType().getRank() != 1)
      return failure();
    Value at =
        getStridedElementPtr(op.getLoc(), op.getMemRefType(), adaptor.getBase(),
                             adaptor.getIndices(), rewriter);
    rewriter.replaceOpWithNewOp<LLVM::LoadOp>(op, type, at, *align);
    return success();
  }
};

struct AlignedStore : ConvertOpToLLVMPattern<vector::StoreOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(vector::StoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::optional<int64_t> align = alignmentOf(op);
    if (!align || op.getVectorType().getRank() != 1)
      return failure();
    Value at =
        getStridedElementPtr(op.getLoc(), op.getMemRefType(), adaptor.getBase(),
                             adaptor.getIndices(), rewriter);
    rewriter.replaceOpWithNewOp<LLVM::StoreOp>(op, adaptor.getValueToStore(),
                                               at, *align);
    return success();
  }
};

struct LowerAlignedVectorAccessPass
    : public mlir::tfm::impl::LowerAlignedVectorAccessPassBase<
          LowerAlignedVectorAccessPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    LLVMTypeConverter converter(ctx, LowerToLLVMOptions(ctx));
    RewritePatternSet patterns(ctx);
    patterns.add<AlignedLoad, AlignedStore>(converter);
    ConversionTarget target(*ctx);
    target.addLegalDialect<LLVM::LLVMDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *op) {
      return !isa<vector::LoadOp, vector::StoreOp>(op) || !alignmentOf(op);
    });
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
