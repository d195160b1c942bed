//===- KernelStrategy.cpp - Which kernel each op gets on the GPU ----------===//
//
// Each rule names the condition its kernel was built for, and the reason
// given is the first condition an op fails. The warp-per-row kernels take
// f32 with static shapes (the row length is a constant of the kernel); the
// library GEMMs take the layouts a strided batch describes.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/Conversion/Common/KernelCalls.h"
#include "tfm/Conversion/GPUEmulation/WarpSemantics.h"
#include "tfm/Conversion/TfmToGPU/TfmToGPU.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// Why a tensor cannot be a warp-per-row kernel's rows; empty if it can.
std::string rowsMisfit(Type type) {
  auto t = cast<RankedTensorType>(type);
  if (!t.getElementType().isF32())
    return "its elements are not f32";
  if (!t.hasStaticShape())
    return "its shape is not static";
  if (t.getNumElements() == 0)
    return "it is empty";
  return "";
}

GPUKernelChoice warpRowsOr(std::string whyNot) {
  if (whyNot.empty())
    return {GPUKernel::WarpRows, "", ""};
  return {GPUKernel::Loops, gpuKernelName(GPUKernel::WarpRows).str(),
          std::move(whyNot)};
}

GPUKernelChoice libraryGemmOr(std::string whyNot) {
  if (whyNot.empty())
    return {GPUKernel::LibraryGemm, "", ""};
  return {GPUKernel::Loops, gpuKernelName(GPUKernel::LibraryGemm).str(),
          std::move(whyNot)};
}

/// Why `operand` cannot be read as rows of a layer norm normalizing `result`
/// from `axis`: its last dimensions must be the rows', and the leading
/// ones may broadcast (position embeddings added to each sequence).
std::string normRowsMisfit(Value operand, Value result, int64_t axis,
                           StringRef name) {
  std::string why = rowsMisfit(operand.getType());
  if (!why.empty())
    return ("its " + name + ": " + why).str();
  ArrayRef<int64_t> own = cast<RankedTensorType>(operand.getType()).getShape();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(result.getType()).getShape();
  int64_t trailing = int64_t(shape.size()) - axis;
  if (int64_t(own.size()) < trailing ||
      own.take_back(trailing) != shape.take_back(trailing))
    return ("its " + name + " broadcasts along the normalized axes").str();
  ArrayRef<int64_t> ownLead = own.drop_back(trailing),
                    lead = shape.drop_back(trailing);
  for (size_t d = 0; d < ownLead.size(); ++d) {
    int64_t theirs = lead[lead.size() - ownLead.size() + d];
    if (ownLead[d] != theirs && ownLead[d] != 1)
      return ("its " + name + " does not broadcast to the result").str();
  }
  return "";
}

std::string layerNormMisfit(Value input, Value residual, Value result,
                            int64_t axis) {
  std::string why = rowsMisfit(result.getType());
  if (!why.empty())
    return why;
  auto rank = cast<RankedTensorType>(result.getType()).getRank();
  if (axis < 0)
    axis += rank;
  why = normRowsMisfit(input, result, axis, "input");
  if (why.empty() && residual)
    why = normRowsMisfit(residual, result, axis, "residual");
  return why;
}

std::string softmaxMisfit(Value input, int64_t axis) {
  std::string why = rowsMisfit(input.getType());
  if (!why.empty())
    return why;
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  if (rank == 0)
    return "it is a scalar";
  if (axis != -1 && axis != rank - 1)
    return llvm::formatv("it normalizes axis {0}, not the last", axis).str();
  return "";
}

/// Which axes a reduction reduces: the last ones (rows), the first ones
/// (columns), or neither.
enum class ReducedAxes { trailing, leading, other };

ReducedAxes reducedAxes(ReduceOp op) {
  int64_t rank = op.getInput().getType().getRank();
  SmallVector<bool> reduced(rank, false);
  for (int64_t a : op.getAxes())
    reduced[a < 0 ? a + rank : a] = true;
  // Whether the axes reduced (`value`) or kept (`!value`) come last, in one
  // run.
  auto last = [&](bool value) {
    int64_t first = 0;
    while (first < rank && reduced[first] != value)
      ++first;
    return llvm::all_of(ArrayRef<bool>(reduced).drop_front(first),
                        [&](bool r) { return r == value; });
  };
  if (last(true))
    return ReducedAxes::trailing;
  if (last(false))
    return ReducedAxes::leading;
  return ReducedAxes::other;
}

/// The number of elements a reduction combines into each output.
int64_t reducedCount(ReduceOp op) {
  auto type = op.getInput().getType();
  int64_t n = 1;
  for (int64_t a : op.getAxes())
    n *= type.getDimSize(a < 0 ? a + type.getRank() : a);
  return n;
}

/// Why an attention (or its gradient) cannot run as kernels of a warp per
/// row: each lane keeps its columns of a query and a value row in registers.
std::string attentionMisfit(Value query, Value key, Value value) {
  for (Value v : {query, key, value}) {
    auto t = cast<RankedTensorType>(v.getType());
    if (!t.getElementType().isF32())
      return "its operands are not f32";
    if (!t.hasStaticShape())
      return "its shapes are not static";
  }
  for (auto [name, v] :
       {std::pair{"query", query}, std::pair{"value", value}}) {
    int64_t width = cast<RankedTensorType>(v.getType()).getShape().back();
    if (width <= 0 || width > kFlashAttentionMaxValueWidth)
      return llvm::formatv("its {0} rows of {1} are not 1 to {2} wide", name,
                           width, kFlashAttentionMaxValueWidth)
          .str();
  }
  return "";
}

/// Why an attention that attentionMisfit takes cannot run on the tensor
/// cores.
std::string attentionMmaMisfit(AttentionOp op, Type narrow) {
  if (!narrow)
    return "f32 attention stays exact: the tensor cores would round its "
           "operands (--dtype=bf16 or f16 lets them)";
  // The verifier has made the batch dimensions equal but for the keys'
  // and values' heads, which each block maps to its own.
  ArrayRef<int64_t> q = op.getQuery().getType().getShape(),
                    v = op.getValue().getType().getShape();
  if (v.back() != q.back())
    return "its value rows are not as wide as its query rows";
  if (q.back() % 16 != 0 || q.back() > kFlashAttentionMmaMaxHead)
    return llvm::formatv("its head of {0} is not a multiple of 16 up to {1}",
                         q.back(), kFlashAttentionMmaMaxHead)
        .str();
  return "";
}

/// A rotary embedding that one attention reads is rotated by that
/// attention's kernel while it loads the operand, and never stored: the
/// query in either kernel; the keys only on the tensor cores, which rotate
/// them once, in the kernel that rounds them to 16 bits. The kernel of a
/// warp per row reads each key row once for every query row, so rotating
/// there would repeat the work that one pass before it does once.
GPUKernelChoice rotaryChoice(RotaryOp op, Type narrow) {
  auto readers = op->getUsers();
  auto attention =
      llvm::find_if(readers, [](Operation *u) { return isa<AttentionOp>(u); });
  std::string better = gpuKernelName(GPUKernel::InAttention).str();
  if (attention == readers.end()) {
    // A partial rotary embedding (NeoX's rotary_pct): the rotated columns
    // and the others, concatenated, are what the attention reads.
    auto concat =
        llvm::find_if(readers, [](Operation *u) { return isa<ConcatOp>(u); });
    if (concat != readers.end() &&
        llvm::any_of((*concat)->getUsers(),
                     [](Operation *u) { return isa<AttentionOp>(u); }))
      return {GPUKernel::Loops, better,
              "it rotates part of each head, which reaches the attention "
              "concatenated with the rest (a partial rotary embedding)"};
    // Nothing reads it that could rotate it (a cache of rotated keys).
    return {GPUKernel::Loops, "", ""};
  }
  if (!op->hasOneUse()) {
    auto other =
        llvm::find_if(readers, [&](Operation *u) { return u != *attention; });
    if (other == readers.end())
      return {GPUKernel::Loops, better,
              "the attention reads it as more than one operand"};
    return {GPUKernel::Loops, better,
            ("its result is also read by '" +
             (*other)->getName().getStringRef() + "'")
                .str()};
  }
  unsigned operand = op->use_begin()->getOperandNumber();
  if (operand > 1)
    return {GPUKernel::Loops, better,
            "it is the attention's values, which no kernel rotates"};
  GPUKernel reader = chooseGPUKernel(*attention, narrow)->kernel;
  if (reader == GPUKernel::FlashAttentionMma ||
      (reader == GPUKernel::AttentionRows && operand == 0))
    return {GPUKernel::InAttention, "", ""};
  if (reader == GPUKernel::AttentionRows)
    return {GPUKernel::Loops, better,
            std::string("it rotates the keys, which the attention of a warp "
                        "per row reads once for every query row (") +
                (narrow ? "its attention misses the tensor cores', which "
                          "rotates them once)"
                        : "the tensor cores' attention, under --dtype=bf16 "
                          "or f16, rotates them once)")};
  return {GPUKernel::Loops, better, "the attention that reads it gets loops"};
}

std::string matmulMisfit(MatmulOp op) {
  if (isStridedMatmul(op) || matmulHasSharedRightOperand(op))
    return "";
  return "its operands are neither a strided batch of f32 matrices nor f32 "
         "rows times one shared matrix";
}

std::string convMisfit(Conv2DOp op) {
  for (Value v : {op.getInput(), op.getWeight(), op.getResult()}) {
    std::string why = rowsMisfit(v.getType());
    if (!why.empty())
      return "an operand: " + why;
  }
  if (op.getBias() && !rowsMisfit(op.getBias().getType()).empty())
    return "its bias is not a static f32 vector";
  return "";
}

} // namespace

StringRef mlir::tfm::gpuKernelName(GPUKernel kernel) {
  switch (kernel) {
  case GPUKernel::LibraryGemm:
    return "library-gemm";
  case GPUKernel::WarpRows:
    return "warp-rows";
  case GPUKernel::BlockColumns:
    return "block-columns";
  case GPUKernel::AttentionRows:
    return "attention-rows";
  case GPUKernel::FlashAttentionMma:
    return "flash-attention-mma";
  case GPUKernel::InAttention:
    return "in-attention";
  case GPUKernel::Loops:
    return "loops";
  }
  llvm_unreachable("unknown GPU kernel");
}

StringRef mlir::tfm::gemmKernelName(GemmKernel kernel) {
  switch (kernel) {
  case GemmKernel::WarpgroupTma:
    return "warpgroup-tma";
  case GemmKernel::WarpgroupMma:
    return "warpgroup-mma";
  case GemmKernel::StagedMma:
    return "staged-mma";
  case GemmKernel::WarpMma:
    return "warp-mma";
  case GemmKernel::RegisterTiles:
    return "register-tiles";
  }
  llvm_unreachable("unknown generated GEMM kernel");
}

std::optional<GPUKernelChoice> mlir::tfm::chooseGPUKernel(Operation *op,
                                                          Type narrow) {
  return llvm::TypeSwitch<Operation *, std::optional<GPUKernelChoice>>(op)
      .Case<LinearOp, QKVProjectionOp, GatedLinearOp>(
          [](auto) { return libraryGemmOr(""); })
      .Case([](MatmulOp op) { return libraryGemmOr(matmulMisfit(op)); })
      .Case([](Conv2DOp op) { return libraryGemmOr(convMisfit(op)); })
      .Case([&](AttentionOp op) -> GPUKernelChoice {
        std::string why =
            attentionMisfit(op.getQuery(), op.getKey(), op.getValue());
        if (!why.empty())
          return {GPUKernel::Loops,
                  gpuKernelName(GPUKernel::AttentionRows).str(), why};
        why = attentionMmaMisfit(op, narrow);
        if (why.empty())
          return {GPUKernel::FlashAttentionMma, "", ""};
        return {GPUKernel::AttentionRows,
                gpuKernelName(GPUKernel::FlashAttentionMma).str(), why};
      })
      .Case([&](RotaryOp op) { return rotaryChoice(op, narrow); })
      .Case([](AttentionGradOp op) -> GPUKernelChoice {
        std::string why =
            attentionMisfit(op.getQuery(), op.getKey(), op.getValue());
        if (!why.empty())
          return {GPUKernel::Loops,
                  gpuKernelName(GPUKernel::AttentionRows).str(), why};
        return {GPUKernel::AttentionRows, "", ""};
      })
      .Case([](LayerNormOp op) {
        return warpRowsOr(layerNormMisfit(op.getInput(), Value(),
                                          op.getResult(),
                                          static_cast<int64_t>(op.getAxis())));
      })
      .Case([](AddLayerNormOp op) {
        return warpRowsOr(layerNormMisfit(op.getInput(), op.getResidual(),
                                          op.getOutput(),
                                          static_cast<int64_t>(op.getAxis())));
      })
      .Case([](LayerNormGradOp op) {
        std::string why = rowsMisfit(op.getInput().getType());
        if (why.empty() && op.getScale().getType().getNumElements() == 0)
          why = "its rows are empty";
        return warpRowsOr(why);
      })
      .Case([](SoftmaxOp op) {
        return warpRowsOr(
            softmaxMisfit(op.getInput(), static_cast<int64_t>(op.getAxis())));
      })
      .Case([](MaskedSoftmaxOp op) {
        return warpRowsOr(softmaxMisfit(op.getInput(), -1));
      })
      .Case([](SoftmaxGradOp op) {
        // Its gradient operand has the output's type (the verifier's).
        return warpRowsOr(
            softmaxMisfit(op.getOutput(), static_cast<int64_t>(op.getAxis())));
      })
      .Case<CrossEntropyOp, CrossEntropyGradOp>([](auto op) {
        return warpRowsOr(rowsMisfit(op.getLogits().getType()));
      })
      .Case([](ReduceOp op) -> GPUKernelChoice {
        std::string why = rowsMisfit(op.getInput().getType());
        if (!why.empty())
          return warpRowsOr(why);
        // Fewer elements per output than a warp's lanes (rows) or a
        // block's row groups (columns) would leave most threads idle: a
        // thread per output, the neutral lowering's, serves them best.
        switch (reducedAxes(op)) {
        case ReducedAxes::trailing:
          if (reducedCount(op) < warp::kWarpSize)
            return {GPUKernel::Loops, "", ""};
          return warpRowsOr("");
        case ReducedAxes::leading:
          if (reducedCount(op) < kBlockColumnsRowGroups)
            return {GPUKernel::Loops, "", ""};
          return {GPUKernel::BlockColumns, "", ""};
        case ReducedAxes::other:
          break;
        }
        return warpRowsOr("it reduces axes that are neither the last nor the "
                          "first ones, so neither its rows nor its columns "
                          "are contiguous");
      })
      .Default([](Operation *) { return std::nullopt; });
}
