//===- KernelCalls.h - Runtime kernels called from compiled code -*- C++
//-*-===//
//
// What the targets share of the runtime's kernel descriptors (tfm/abi.h):
// the pointer arguments of a `tfm.kernel_call`, the parameters of the GEMM
// kinds, and which matmuls BATCH_MATMUL takes. The CPU calls every heavy op
// this way; the GPU calls its GEMMs, each with its own kernels as the
// fallback a session without the library runs (BufferizedEntry::callKernel).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_COMMON_KERNELCALLS_H
#define TFM_CONVERSION_COMMON_KERNELCALLS_H

#include "tfm/IR/TfmOps.h"
#include "tfm/abi.h"

#include "mlir/IR/Builders.h"

#include <string>
#include <vector>

namespace mlir::tfm {

/// A pointer argument of a kernel call: a buffer and an element offset
/// into it, or nothing (NULL).
struct KernelArg {
  Value buffer;
  int64_t elementOffset = 0;
  KernelArg() = default;
  KernelArg(Value buffer, int64_t offset = 0)
      : buffer(buffer), elementOffset(offset) {}
};

/// The ABI's code of a LINEAR kernel's activation (a tfm_activation_t).
int64_t abiActivation(Activation act);

/// A LINEAR descriptor's params (abi.h's TFM_LINEAR_*), with no residual.
SmallVector<int64_t> linearParams(int64_t m, int64_t k, int64_t n, bool bias,
                                  int64_t activation, bool constantWeights);

class BufferizedEntry;

/// out = act(input · weight[rows]ᵀ + bias[rows]), `rows` being the
/// columns of the buffer `out` from `rowOffset` of weight (a part of a
/// projection):
/// one LINEAR call multiplying in `dtype` where the kernel takes it (f32,
/// no empty dimension), else the generic GEMM. With `narrowOperands`, the
/// call reads input and weight rounded into `dtype` (bf16 or f16;
/// TFM_KERNEL_FLAG_NARROW_OPERANDS). With `withFallback`, the generic GEMM
/// is the call's fallback (BufferizedEntry::callKernel), on the same
/// operands.
void lowerLinearKernel(BufferizedEntry &e, Value input, Value weight,
                       Value bias, int64_t rowOffset, Activation act, Value out,
                       int32_t dtype, bool narrowOperands, bool withFallback);

/// tfm.gated_linear: one LINEAR call (as lowerLinearKernel) into the packed
/// projection, then the gate in one pass over it (lowerGatedProduct): no
/// library's epilogue multiplies two columns of its output.
void lowerGatedLinearKernel(BufferizedEntry &e, GatedLinearOp op, int32_t dtype,
                            bool narrowOperands, bool withFallback);

/// A matmul the BATCH_MATMUL kernel runs with strided operands and result:
/// f32, equal ranks of 2 to 4 and equal batch dimensions, no empty
/// dimension. A transposed operand is the same buffer read with swapped
/// strides, which is how the backward pass's weight and attention gradients
/// (Xᵀ·dY, dSᵀ·Q) reach the kernel without a copy.
bool isStridedMatmul(MatmulOp op);

/// Adds the places `loc` names to `out`, once each: every op a fusion
/// merged (a FusedLoc's parts), in order, as describeLocation spells them.
void collectOrigins(Location loc, std::vector<std::string> &out);
/// A kernel's origins for the profile: its calls' places, the first few of
/// a kernel that many layers share.
std::string describeOrigins(const std::vector<std::string> &places);

/// The aligned pointer of `buffer`, a view of an entry's argument, as an
/// index: the argument's plus the byte shifts of the memref.views between
/// (the strided-metadata expansion folds a view's aligned pointer to its
/// source's, and so would drop the shift). A reinterpret_cast keeps its
/// source's pointer, and with `throughOffsetViews` so do subviews and
/// reshapes, whose offset the result type holds. Kernels take their
/// buffers dense, at offsets of their own: they leave it false.
FailureOr<Value> alignedAddressOf(OpBuilder &b, Location loc, Value buffer,
                                  bool throughOffsetViews);

} // namespace mlir::tfm

#endif // TFM_CONVERSION_COMMON_KERNELCALLS_H
