//===- ArtifactIR.h - The pieces of the model.so artifact's IR --*- C++ -*-===//
//
// translateToArtifactIR (Artifact.cpp) builds the artifact from three
// parts, each over the same two views of the module:
//   - ModuleTables: the attributes the pipelines leave for the artifact,
//     read once into typed fields and checked against each other;
//   - AbiTypes: the structs of tfm/abi.h as LLVM types, each checked
//     against the C layout of the header (ArtifactAbi.cpp).
// ArtifactEntries.cpp defines the functions compiled code calls the runtime
// through and an ABI wrapper per entry; ArtifactMetadata.cpp writes the
// metadata table that tfm_model_v1 returns.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_LIB_TARGET_ARTIFACTIR_H
#define TFM_LIB_TARGET_ARTIFACTIR_H

#include "tfm/Target/Artifact.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Module.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::tfm::artifact {

/// The element type code of tfm/abi.h for `t`, or none: the ABI carries
/// fewer element types than the dialect.
std::optional<int32_t> dtypeOf(Type t);

/// A private constant C string.
llvm::Constant *cstring(llvm::Module &m, StringRef s);

/// A private constant array of `values` (a null pointer when empty).
llvm::Constant *constantArray(llvm::Module &m, llvm::Type *elem,
                              ArrayRef<llvm::Constant *> values,
                              StringRef name);

/// What the pipelines recorded on the module for the artifact.
struct ModuleTables {
  ArrayAttr entries;             // tfm.entries (#tfm.entry)
  ArrayAttr kernels;             // tfm.kernels (#tfm.kernel)
  ArrayAttr states;              // tfm.states, or null
  ArrayAttr checks;              // tfm.checks, or null
  ArrayAttr dynamicEntries;      // tfm.dynamic_entries, or null
  ArrayAttr kernelOrigins;       // tfm.kernel_origins, or null
  DenseI32ArrayAttr kernelFlags; // tfm.kernel_flags, or null
  // GPU code (tfm-lower-gpu-launches): the PTX, its architecture and its
  // kernels' names and origins; all null for the CPU.
  StringAttr deviceCode, deviceArch;
  ArrayAttr deviceKernels, deviceKernelOrigins;
  uint64_t weightsBytes = 0, stateBytes = 0;
  int64_t generationMaxLength = 0;
  /// Where the checks write their outcomes (TFM_CHECKS_IN_STATE), when
  /// they do not stop the run.
  std::optional<int64_t> checkSlotsOffset;

  /// Reads the tables of `module`, reporting on it what is missing or
  /// inconsistent, and every entry port of a type the ABI cannot carry.
  static FailureOr<ModuleTables> read(ModuleOp module);
};

/// Removes the tfm.* attributes (which the translation to LLVM IR would
/// reject) from `module`; the tables read before keep them alive.
void dropTables(ModuleOp module);

/// The structs of tfm/abi.h, field for field.
struct AbiTypes {
  llvm::PointerType *ptr;
  llvm::IntegerType *i32, *i64;
  llvm::StructType *host, *tensor, *entry, *kernel, *state, *check, *dynamic,
      *model;
  llvm::ArrayType *params, *fparams, *strides;
  /// Field numbers of tfm_abi_host_t that the generated code loads.
  enum HostField : unsigned {
    kHostArena = 1,
    kHostWeights = 2,
    kHostRunKernel = 3,
    kHostState = 5,
    kHostCheckFailed = 6,
    kHostArenaBytes = 7,
    kHostWeightsBytes = 8,
    kHostStateBytes = 9,
    kHostInputBytes = 10,
    kHostOutputBytes = 11,
    kHostLaunch = 12,
    kHostParallelFor = 14,
    kHostTensorMap = 15
  };

  /// The types under `layout`; an error when one differs from the C layout
  /// of the header on this target (a field added to the header but not
  /// here, or the reverse), so that no model's metadata is misread.
  static FailureOr<AbiTypes>
  get(llvm::LLVMContext &c, const llvm::DataLayout &layout, std::string &error);

  llvm::Constant *i32c(int64_t v) const {
    return llvm::ConstantInt::get(i32, v);
  }
  llvm::Constant *i64c(int64_t v) const {
    return llvm::ConstantInt::get(i64, v);
  }
};

/// A tfm_abi_tensor_desc_t of `name` and `type`; `shape` replaces the
/// type's (a dynamic entry's, with symbols).
llvm::Constant *tensorDesc(llvm::Module &m, const AbiTypes &abi, StringRef name,
                           RankedTensorType type, ArrayRef<int64_t> shape = {});

/// Defines the functions compiled code calls the runtime through over the
/// host table (run_kernel, check_failed, launch, parallel_for) and each
/// outlined loop's task, where the code declares them.
LogicalResult defineHostCalls(ModuleOp module, llvm::Module &m,
                              const AbiTypes &abi);

/// An ABI wrapper over each entry's lowered function, which checks the
/// buffer sizes the runtime passes against the code's own, and the
/// entries' descriptors, in order.
FailureOr<SmallVector<llvm::Constant *>>
wrapEntries(ModuleOp module, llvm::Module &m, const AbiTypes &abi,
            const ModuleTables &tables);

/// The metadata table (tfm_abi_model_t) and the one exported symbol that
/// returns it.
/// The CPU the code is generated for, as the metadata records it: the
/// target machine's CPU name, and which of TFM_CPU_FEATURES it enables.
struct CpuTarget {
  std::string name;
  std::string features; // comma-separated
};

LogicalResult emitMetadata(ModuleOp module, llvm::Module &m,
                           const AbiTypes &abi, const ModuleTables &tables,
                           ArrayRef<llvm::Constant *> entries,
                           const ArtifactOptions &options,
                           const CpuTarget &cpu);

} // namespace mlir::tfm::artifact

#endif // TFM_LIB_TARGET_ARTIFACTIR_H
