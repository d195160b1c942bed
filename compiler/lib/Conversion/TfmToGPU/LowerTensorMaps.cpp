//===- LowerTensorMaps.cpp - tfm-lower-tensor-maps ------------------------===//
//
// A TMA load reads its tensor through a tensor map that only the driver can
// encode, and only once the tensor's address is known: at run time, in the
// session. A kernel builder puts an nvgpu.tma.create.descriptor in the
// entry's host code, before the launch that reads the map; this replaces it
// by a call of the runtime (tfm_abi_host_t.tensor_map) with a constant
// description of the tensor, which the runtime turns into a map once and
// keeps. Everything in the description is static: the tensors the
// compiler places have static shapes and strides.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Common/BufferAssignment.h"
#include "tfm/Conversion/Passes.h"
#include "tfm/Target/Symbols.h"
#include "tfm/abi.h"
#include "tfm/dtype.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Matchers.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_LOWERTENSORMAPSPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The words of a tfm_abi_tensor_map_desc_t, in its order.
constexpr int64_t kDescWords =
    sizeof(tfm_abi_tensor_map_desc_t) / sizeof(int64_t);
static_assert(kDescWords == 3 + 3 * TFM_TENSOR_MAP_MAX_RANK - 1,
              "the description is its words, as tfm/abi.h lays them out");

/// The block every exit of an entry goes through: it returns its argument.
Block *exitBlockOf(func::FuncOp fn) {
  for (Block &block : fn.getBody()) {
    auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
    if (ret && block.getNumArguments() == 1 && ret.getNumOperands() == 1 &&
        ret.getOperand(0) == block.getArgument(0))
      return &block;
  }
  return nullptr;
}

int64_t swizzleBytes(nvgpu::TensorMapSwizzleKind kind) {
  switch (kind) {
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE:
    return 0;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_32B:
    return 32;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_64B:
    return 64;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_128B:
    return 128;
  }
  llvm_unreachable("unknown swizzle");
}

/// The aligned pointer of `memref` as an index. Views that keep their
/// source's aligned pointer are looked through, and a memref.view's byte
/// shift is added here: MLIR 19's expand-strided-metadata folds
/// extract_aligned_pointer_as_index of a memref.view to its source's,
/// which loses the shift (and so would give every buffer of the arena its
/// start).
Value alignedAddress(OpBuilder &b, Location loc, Value memref) {
  Value shift;
  while (Operation *def = memref.getDefiningOp()) {
    if (auto view = dyn_cast<memref::ViewOp>(def)) {
      shift = shift ? b.create<arith::AddIOp>(loc, shift, view.getByteShift())
                          .getResult()
                    : view.getByteShift();
      memref = view.getSource();
    } else if (isa<memref::SubViewOp, memref::CastOp, memref::ReinterpretCastOp,
                   memref::ExpandShapeOp, memref::CollapseShapeOp>(def)) {
      memref = def->getOperand(0);
    } else {
      break;
    }
  }
  Value address = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, memref);
  return shift ? b.create<arith::AddIOp>(loc, address, shift).getResult()
               : address;
}

struct LowerTensorMapsPass
    : public mlir::tfm::impl::LowerTensorMapsPassBase<LowerTensorMapsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<nvgpu::TmaCreateDescriptorOp> maps;
    module.walk([&](nvgpu::TmaCreateDescriptorOp op) { maps.push_back(op); });
    if (maps.empty())
      return;
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i32 = IntegerType::get(ctx, 32);
    declareHostFunction(module, kTensorMapSymbol,
                        FunctionType::get(ctx, {ptr, ptr, ptr, ptr}, {i32}));
    for (auto [index, op] : llvm::enumerate(maps))
      if (failed(lower(module, op, index)))
        return signalPassFailure();
    passMapsAsPointers(module);
  }

  /// Each outlined kernel takes its maps as the pointers they are, cast
  /// back to maps inside: convert-gpu-to-nvvm has no conversion of the map
  /// type for a kernel's signature, and the nvgpu ops' lowering reads the
  /// pointer through the cast.
  void passMapsAsPointers(ModuleOp module) {
    auto ptr = LLVM::LLVMPointerType::get(module.getContext());
    SymbolTableCollection symbols;
    module.walk([&](gpu::LaunchFuncOp call) {
      for (OpOperand &operand : call->getOpOperands()) {
        if (!isa<nvgpu::TensorMapDescriptorType>(operand.get().getType()))
          continue;
        auto made = operand.get().getDefiningOp<UnrealizedConversionCastOp>();
        if (made && made->getNumOperands() == 1 &&
            made->getOperand(0).getType() == ptr) {
          operand.set(made->getOperand(0));
          continue;
        }
        OpBuilder b(call);
        operand.set(b.create<UnrealizedConversionCastOp>(call.getLoc(), ptr,
                                                         operand.get())
                        .getResult(0));
      }
    });
    module.walk([&](gpu::GPUFuncOp kernel) {
      if (kernel.isExternal())
        return;
      Block &entry = kernel.getBody().front();
      OpBuilder b = OpBuilder::atBlockBegin(&entry);
      bool changed = false;
      for (BlockArgument arg : entry.getArguments()) {
        auto type = dyn_cast<nvgpu::TensorMapDescriptorType>(arg.getType());
        if (!type)
          continue;
        arg.setType(ptr);
        auto back =
            b.create<UnrealizedConversionCastOp>(kernel.getLoc(), type, arg);
        arg.replaceAllUsesExcept(back.getResult(0), back);
        changed = true;
      }
      if (changed)
        kernel.setFunctionType(
            FunctionType::get(kernel.getContext(), entry.getArgumentTypes(),
                              kernel.getFunctionType().getResults()));
    });
  }

  /// The description of the tensor `op` maps, of `type` with `strides`
  /// and `offset`, or an error naming why it has none.
  FailureOr<SmallVector<int64_t>> describe(nvgpu::TmaCreateDescriptorOp op,
                                           MemRefType type,
                                           ArrayRef<int64_t> strides,
                                           int64_t offset) {
    auto fail = [&](const Twine &why) {
      return op.emitError("tfm-lower-tensor-maps: ") << why;
    };
    Type element = type.getElementType();
    int64_t dtype = element.isF16()    ? TFM_DTYPE_F16
                    : element.isBF16() ? TFM_DTYPE_BF16
                    : element.isF32()  ? TFM_DTYPE_F32
                                       : 0;
    if (!dtype)
      return fail("a tensor map of elements other than f16, bf16 or f32");
    int64_t rank = type.getRank();
    if (rank < 1 || rank > TFM_TENSOR_MAP_MAX_RANK)
      return fail("a tensor map of rank " + Twine(rank));
    if (!type.hasStaticShape() || strides.empty() ||
        ShapedType::isDynamic(offset) || strides.back() != 1 ||
        llvm::any_of(strides, ShapedType::isDynamic))
      return fail("a tensor map of a tensor without static shape and "
                  "strides, or whose last dim is not contiguous");
    auto mapType = op.getTensorMap().getType();
    ArrayRef<int64_t> box = mapType.getTensor().getShape();
    if (int64_t(box.size()) != rank)
      return fail("a box of another rank than its tensor's");
    for (auto [i, size] : llvm::enumerate(op.getBoxDimensions())) {
      APInt given;
      if (!matchPattern(size, m_ConstantInt(&given)) ||
          given.getSExtValue() != box[i])
        return fail("a box that is not its descriptor type's");
    }
    int64_t bytes = element.getIntOrFloatBitWidth() / 8;
    SmallVector<int64_t> words(kDescWords, 0);
    words[0] = dtype;
    words[1] = rank;
    words[2] = swizzleBytes(mapType.getSwizzle());
    // Innermost first, as the driver takes them.
    for (int64_t d = 0; d < rank; ++d) {
      int64_t dim = rank - 1 - d;
      words[3 + d] = type.getDimSize(dim);
      if (d > 0)
        words[3 + TFM_TENSOR_MAP_MAX_RANK + d - 1] = strides[dim] * bytes;
      words[3 + 2 * TFM_TENSOR_MAP_MAX_RANK - 1 + d] = box[dim];
    }
    return words;
  }

  LogicalResult lower(ModuleOp module, nvgpu::TmaCreateDescriptorOp op,
                      size_t index) {
    MLIRContext *ctx = op.getContext();
    Location loc = op.getLoc();
    auto fn = op->getParentOfType<func::FuncOp>();
    Block *exit = fn ? exitBlockOf(fn) : nullptr;
    if (!exit || op->getParentOfType<gpu::LaunchOp>() ||
        fn.getNumArguments() == 0 ||
        !isa<LLVM::LLVMPointerType>(fn.getArgument(0).getType()))
      return op.emitError("tfm-lower-tensor-maps: a tensor map made outside "
                          "an entry's host code");
    auto cast = op.getTensor().getDefiningOp<memref::CastOp>();
    auto type =
        cast ? dyn_cast<MemRefType>(cast.getSource().getType()) : MemRefType();
    if (!type)
      return op.emitError("tfm-lower-tensor-maps: a tensor map of a memref "
                          "that is not a cast of a ranked one");
    SmallVector<int64_t> strides;
    int64_t offset = ShapedType::kDynamic;
    if (failed(getStridesAndOffset(type, strides, offset)))
      strides.clear();
    FailureOr<SmallVector<int64_t>> words = describe(op, type, strides, offset);
    if (failed(words))
      return failure();

    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    auto i32 = IntegerType::get(ctx, 32);
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    std::string name = ("__tfm_tensor_map_desc_" + Twine(index)).str();
    auto array = LLVM::LLVMArrayType::get(i64, kDescWords);
    mb.create<LLVM::GlobalOp>(
        loc, array, /*isConstant=*/true, LLVM::Linkage::Internal, name,
        DenseElementsAttr::get(RankedTensorType::get({kDescWords}, i64),
                               ArrayRef<int64_t>(*words)));

    OpBuilder ab = OpBuilder::atBlockBegin(&fn.getBody().front());
    Value slot = ab.create<LLVM::AllocaOp>(
        loc, ptr, ptr, ab.create<LLVM::ConstantOp>(loc, i64, 1));
    OpBuilder b(op);
    Value desc = b.create<LLVM::AddressOfOp>(loc, ptr, name);
    // The tensor's first element: the aligned pointer plus its offset.
    Value address = alignedAddress(b, loc, cast.getSource());
    int64_t bytes = type.getElementTypeBitWidth() / 8;
    address = b.create<arith::AddIOp>(
        loc, address, b.create<arith::ConstantIndexOp>(loc, offset * bytes));
    Value base = b.create<LLVM::IntToPtrOp>(
        loc, ptr, b.create<arith::IndexCastOp>(loc, i64, address));
    Value status =
        b.create<func::CallOp>(loc, kTensorMapSymbol, TypeRange{i32},
                               ValueRange{fn.getArgument(0), desc, base, slot})
            .getResult(0);
    // A map the runtime refuses ends the entry with its status.
    Block *here = b.getInsertionBlock();
    Block *next = here->splitBlock(b.getInsertionPoint());
    b.setInsertionPointToEnd(here);
    Value failed =
        b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, status,
                                b.create<arith::ConstantIntOp>(loc, 0, 32));
    b.create<cf::CondBranchOp>(loc, failed, exit, ValueRange{status}, next,
                               ValueRange{});
    b.setInsertionPointToStart(next);
    Value map = b.create<LLVM::LoadOp>(loc, ptr, slot);
    op.replaceAllUsesWith(b.create<UnrealizedConversionCastOp>(
                               loc, op.getTensorMap().getType(), map)
                              .getResult(0));
    op.erase();
    return success();
  }
};

} // namespace
