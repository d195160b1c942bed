//===- Profile.h - A session's kernel times, table and trace ----*- C++ -*-===//
//
// What a session records when profiling is on (its options' profile, or
// TFM_PROFILE): the time and calls of every kernel descriptor and device
// kernel, the runs, and a trace of them; the table and the Chrome trace
// written from them; and the session's description, which the table's
// first line and the trace's header carry.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_PROFILE_H
#define TFM_RUNTIME_SRC_PROFILE_H

#include "Device.h"
#include "tfm/abi.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct tfm_session_s;

namespace tfm::runtime {

/// Time per kernel and in generated code, kept when the session's options
/// ask for it (written by tfm_session_write_profile) or TFM_PROFILE is set
/// (printed to stderr when the session is released).
struct Profile {
  /// One row per kernel: its kind (or, on a GPU, its name), parameters and
  /// where in the model it came from ("" when unknown).
  struct Row {
    std::string kind, params, origin;
  };
  std::vector<Row> rows;
  std::vector<double> kernelMs;
  std::vector<int64_t> kernelCalls;
  double totalMs = 0;
  int64_t runs = 0;
  /// The session's first run, kept apart: it creates kernels, packs
  /// weights and faults in memory, so averaged in it would hide the steady
  /// state. The table shows it alone only when no other run came.
  std::vector<double> firstKernelMs;
  std::vector<int64_t> firstKernelCalls;
  double firstMs = 0;
  /// Ends a run of `ms` milliseconds.
  void endRun(double ms) {
    totalMs += ms;
    if (runs++ > 0)
      return;
    firstKernelMs =
        std::exchange(kernelMs, std::vector<double>(kernelMs.size(), 0.0));
    firstKernelCalls =
        std::exchange(kernelCalls, std::vector<int64_t>(kernelCalls.size(), 0));
    firstMs = std::exchange(totalMs, 0.0);
  }
  bool printAtRelease = false;
  /// The trace: every run and kernel call, in microseconds since the
  /// session was created; `kernel` -1 is a whole run of `entry`.
  struct Event {
    int32_t kernel;
    const char *entry;
    double startUs, durationUs;
  };
  static constexpr size_t kMaxEvents = 1'000'000;
  std::vector<Event> events;
  std::chrono::steady_clock::time_point origin =
      std::chrono::steady_clock::now();
  void record(int32_t kernel, const char *entry,
              std::chrono::steady_clock::time_point start,
              std::chrono::steady_clock::time_point end) {
    if (events.size() >= kMaxEvents)
      return;
    using Us = std::chrono::duration<double, std::micro>;
    events.push_back(
        {kernel, entry, Us(start - origin).count(), Us(end - start).count()});
  }
};

/// An empty profile of `model`: a row per kernel descriptor, then one per
/// device kernel, each with its parameters and where it came from.
std::unique_ptr<Profile> makeProfile(const tfm_abi_model_t &model,
                                     bool printAtRelease);

/// tfm_session_describe's text: the device, then how many kernels the
/// library runs and how many the model's code computes, with the first
/// reason.
std::string describeKernels(const Device &device, const tfm_abi_model_t &m);

/// The table: each kernel's calls and time per run, and the glue's.
void printProfile(const tfm_session_s &s, std::FILE *out);

/// The Chrome trace event format: one complete event ("ph": "X") per run
/// and per kernel call, the kernels nested in their runs by time.
void writeTrace(const tfm_session_s &s, std::FILE *out);

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_PROFILE_H
