//===- Exchange.h - A data-parallel step's averages across ranks -*- C++
//-*-===//
//
// A training step compiled by tfm-autodiff calls the ALL_REDUCE kernel
// (tfm/abi.h) twice per gradient: START as soon as the backward pass has
// computed it, WAIT right before the update. The gradients of one bucket
// are packed into one buffer, and once the last has started the bucket
// travels, on a thread of its own, while the backward pass goes on. One
// thread talks to the communicator, so a communicator needs to serve only
// one caller at a time.
//
// On a GPU the buckets are device memory, and the communicator (NCCL's)
// queues each bucket's weighted sum on the device's second stream, after
// the copies of its members and beside the rest of the backward pass; the
// bucket's first WAIT orders the step's stream after it. No thread waits
// for it, and the runtime itself only copies there.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_EXCHANGE_H
#define TFM_RUNTIME_SRC_EXCHANGE_H

#include "Device.h"
#include "tfm/abi.h"
#include "tfm/runtime.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tfm::runtime {

class Exchange {
public:
  /// The buckets of `model`'s ALL_REDUCE kernels, or null with `why` when
  /// the model has none or their descriptors disagree. A `device` whose
  /// memory the host cannot address holds them (and `comm` takes device
  /// memory); otherwise they are host memory.
  static std::unique_ptr<Exchange> create(const tfm_abi_model_t &model,
                                          const tfm_communicator_t &comm,
                                          Device &device, std::string &why);
  ~Exchange();

  /// Kernel call `d` (an ALL_REDUCE) on `args`; 0, or nonzero with `error`.
  int32_t run(const tfm_abi_kernel_desc_t &d, void *const *args,
              std::string &error);

  const tfm_communicator_t &communicator() const { return comm; }

  /// A collective of the communicator's, run on the exchange thread after
  /// the buckets queued before it, so that every rank makes the same calls
  /// in the same order and the communicator serves one caller at a time.
  /// `job` returns 0, or nonzero with a message in its buffer.
  using Job = std::function<int32_t(char *error, size_t errorSize)>;
  void post(Job job);
  /// Waits for every job posted so far; 0, or nonzero with `error` naming
  /// the first that failed or a timeout.
  int32_t drain(std::string &error);

private:
  struct Bucket {
    /// The members' weighted sums end to end, then the weights' sum. In
    /// parts (TFM_ALL_REDUCE_PARTS), one block per rank, each holding that
    /// rank's parts of the members end to end, padded to the same length,
    /// then the weight; this rank's block summed comes back in the first.
    std::vector<float> data;
    /// On a GPU, `data` lives here instead.
    DeviceBuffer onDevice;
    bool parts = false;
    /// In parts: where each member (by its offset in the bucket) starts in
    /// a rank's block, and the block's length.
    std::map<int64_t, int64_t> partOffset;
    int64_t block = 0;
    int64_t elements = 0, members = 0;
    int64_t started = 0, waited = 0;
    enum State { Idle, Filling, Travelling, Arrived, Failed } state = Idle;
    std::string error;
  };

  explicit Exchange(const tfm_communicator_t &comm);
  void serve();
  /// run() on a GPU, of member [offset, offset + n) of bucket `b`, with
  /// the lock held.
  int32_t runOnDevice(size_t b, int64_t n, int64_t offset, bool start,
                      void *const *args, std::string &error);

  /// A bucket to exchange, or a job.
  struct Task {
    size_t bucket = 0;
    Job job;
  };
  /// Waits on `changed` until `done` or the timeout; false (marking the
  /// exchange stuck) at the timeout.
  bool waitFor(std::unique_lock<std::mutex> &lock,
               const std::function<bool()> &done);
  /// Who an exchange that timed out waits for: the ranks the communicator
  /// names (comm.lagging), else a guess at why.
  std::string whoIsLate() const;
  /// Marks the ranks out of step for good, because of `why`: this and
  /// every later call fails with `error`. Returns -1.
  int32_t breakWith(const std::string &why, std::string &error);

  tfm_communicator_t comm;
  /// The device whose memory holds the buckets, or null for host memory.
  Device *device = nullptr;
  /// On a GPU: the buckets not idle, and this rank's share of the step's
  /// weight, w / Σ_r w_r, learnt when the first opened.
  int64_t openBuckets = 0;
  float share = 0;
  /// On a GPU: a sum was queued since drain() last waited for them, and
  /// since the step's stream was last ordered after them.
  bool queuedOnDevice = false, sumsAhead = false;
  double timeoutSeconds = 300;
  std::vector<Bucket> buckets;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Task> queue;
  /// Jobs posted and not yet run, and the first one's failure.
  int64_t pendingJobs = 0;
  std::string jobError;
  bool stopping = false;
  /// A wait timed out with the bucket still in the communicator's hands:
  /// the thread may never return, so it is left behind, not joined.
  bool stuck = false;
  /// A step failed between its first START and its last WAIT: the ranks
  /// are out of step for good.
  std::string broken;
  std::thread worker;
};

/// A communicator's message, or a stand-in when it wrote none.
inline std::string communicatorError(const char *buffer) {
  return buffer[0] ? std::string(buffer) : std::string("no reason given");
}

/// 64-bit FNV-1a of the file at `path`, or 0 when it cannot be read.
uint64_t fileHash(const std::string &path);

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_EXCHANGE_H
