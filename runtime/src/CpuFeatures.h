//===- CpuFeatures.h - The model's CPU features against this CPU -*- C++ -*-===//
//
// A model's code is generated for one CPU (tfmc compile --cpu) and may use
// every feature that CPU has; run on a CPU without one, it dies on an
// illegal instruction. The model lists the features it may use
// (tfm_abi_model_t.cpu_features, names from TFM_CPU_FEATURES), and this
// checks them against the running CPU before any of its code runs: CPUID
// for the feature, XCR0 for the operating system's support of its
// registers. DNNL_MAX_CPU_ISA, which caps oneDNN's kernels, caps these
// too, so that a test can stand in for an older CPU.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_CPUFEATURES_H
#define TFM_RUNTIME_SRC_CPUFEATURES_H

#include <string>
#include <vector>

namespace tfm::runtime {

/// The features of the comma-separated `list` that this CPU lacks, in
/// order; a name this runtime does not know is lacking too.
std::vector<std::string> missingCpuFeatures(const std::string &list);

/// The highest portable level whose features this CPU has ("x86-64-v4",
/// "x86-64-v3", "x86-64-v2" or "x86-64").
std::string portableCpuLevel();

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_CPUFEATURES_H
