//===- Symbols.h - Symbols the lowering and the artifact share --*- C++ -*-===//
//
// Names inside a model library that the lowering creates and the artifact
// emitter defines or wraps. They are not part of the model ABI (the runtime
// sees only TFM_ABI_MODEL_SYMBOL), so they live here rather than in abi.h.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TARGET_SYMBOLS_H
#define TFM_TARGET_SYMBOLS_H

namespace mlir::tfm {

/// int32_t __tfm_run_kernel(host, index, args): calls host->run_kernel;
/// declared by the lowering, defined by the artifact emitter.
inline constexpr const char *kRunKernelSymbol = "__tfm_run_kernel";
/// int32_t __tfm_check_failed(host, check, position, value): calls
/// host->check_failed when a run-time check of compiled code fails.
inline constexpr const char *kCheckFailedSymbol = "__tfm_check_failed";
/// int32_t __tfm_launch_kernel(host, kernel, grid[3], block[3], shared,
/// args): calls host->launch for a GPU kernel of the model's device code.
inline constexpr const char *kLaunchKernelSymbol = "__tfm_launch_kernel";
/// int32_t __tfm_tensor_map(host, desc, base, map): calls host->tensor_map
/// for the TMA tensor maps of a GPU model's kernels, or returns
/// TFM_ABI_STATUS_NO_TENSOR_MAPS for a host without it.
inline constexpr const char *kTensorMapSymbol = "__tfm_tensor_map";
/// void __tfm_parallel_for(host, task, args, n): calls
/// host->parallel_for(host, task, args, n), or task(args, 0, n) for a host
/// without it (tfm-parallelize-glue).
inline constexpr const char *kParallelForSymbol = "__tfm_parallel_for";
/// The prefix of the functions tfm-parallelize-glue outlines; each one's
/// task, `<name>` followed by kGlueTaskSuffix, unpacks its buffers.
inline constexpr const char *kGlueSymbolPrefix = "__tfm_glue_";
inline constexpr const char *kGlueTaskSuffix = "_task";
/// The prefix of each lowered entry function; the emitter wraps it in the
/// ABI's entry signature.
inline constexpr const char *kEntrySymbolPrefix = "__tfm_entry_";
/// The embedded weights, a hidden symbol of their own object file.
inline constexpr const char *kWeightsSymbol = "__tfm_weights";

} // namespace mlir::tfm

#endif // TFM_TARGET_SYMBOLS_H
