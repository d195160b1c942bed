//===- Artifact.h - The model.so artifact -----------------------*- C++ -*-===//
//
// Turns the LLVM-dialect module of tfm-cpu-pipeline into the shared library
// that runtime/include/tfm/abi.h describes: the entry code, one ABI wrapper
// per entry, the metadata table `tfm_model_v1` returns, and the weights.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TARGET_ARTIFACT_H
#define TFM_TARGET_ARTIFACT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <memory>
#include <string>

namespace mlir::tfm {

struct ArtifactOptions {
  /// Leave the weights out of the library; the runtime reads them from
  /// `externalWeightsName`, a file beside the library.
  bool externalWeights = false;
  std::string externalWeightsName;
  /// "tfmc <version>".
  std::string producer = "tfmc";
  /// The CPU to generate code for: "native" (this machine) or an LLVM CPU
  /// name such as "x86-64-v3".
  std::string cpu = "native";
  /// Optimize the host code (O2). Off, the IR goes to code generation as
  /// it is, with LLVM's fast instruction selection.
  bool optimize = true;
};

/// The weights blob the module's `tfm.weights` describe: the values, each
/// one's offset, and the blob's size. The attributes outlive the module's
/// translation, which consumes its tfm.* attributes.
struct WeightsBlob {
  ArrayAttr values;
  DenseI64ArrayAttr offsets;
  uint64_t bytes = 0;
};
FailureOr<WeightsBlob> weightsBlob(ModuleOp module);

/// Writes the blob `layout` describes to `os`, byte for byte.
LogicalResult writeWeights(const WeightsBlob &layout, llvm::raw_ostream &os,
                           std::string &error);

/// LLVM IR for the artifact, optimized. Consumes the module's tfm.*
/// attributes. The weights are embedded unless options.externalWeights.
FailureOr<std::unique_ptr<llvm::Module>>
translateToArtifactIR(ModuleOp module, llvm::LLVMContext &llvmContext,
                      const ArtifactOptions &options);

/// Writes the embedded weights as a relocatable object of their own, which
/// defines the hidden symbol the artifact's code refers to; link it with
/// the artifact's object.
LogicalResult writeWeightsObject(const WeightsBlob &layout, StringRef path,
                                 std::string &error);

/// Whether `cpu` names a CPU tfm can generate code for ("native", a
/// portable level such as "x86-64-v3", or a 64-bit CPU); else false, with
/// the reason and the valid names in `why`.
bool checkTargetCpu(StringRef cpu, std::string &why);

/// Whether the code generated for `cpu` (as checkTargetCpu takes it) may
/// use the LLVM feature `feature` ("avx512vnni"): what the library built
/// for it can count on.
bool targetCpuHas(StringRef cpu, StringRef feature);

/// Writes `ir` as a relocatable object file at `path`.
LogicalResult writeObjectFile(llvm::Module &ir, const ArtifactOptions &options,
                              StringRef path, std::string &error);

/// Links `objects` into the shared library `soPath`, or with `relocatable`
/// into one relocatable object.
LogicalResult linkSharedLibrary(ArrayRef<std::string> objects, StringRef soPath,
                                bool relocatable, std::string &error);

} // namespace mlir::tfm

#endif // TFM_TARGET_ARTIFACT_H
