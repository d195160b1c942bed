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
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_EXCHANGE_H
#define TFM_RUNTIME_SRC_EXCHANGE_H

#include "tfm/abi.h"
#include "tfm/runtime.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tfm::runtime {

class Exchange {
public:
  /// The buckets of `model`'s ALL_REDUCE kernels, or null with `why` when
  /// the model has none or their descriptors disagree.
  static std::unique_ptr<Exchange> create(const tfm_abi_model_t &model,
                                          const tfm_communicator_t &comm,
                                          std::string &why);
  ~Exchange();

  /// Kernel call `d` (an ALL_REDUCE) on `args`; 0, or nonzero with `error`.
  int32_t run(const tfm_abi_kernel_desc_t &d, void *const *args,
              std::string &error);

  const tfm_communicator_t &communicator() const { return comm; }

private:
  struct Bucket {
    /// The members' weighted sums end to end, then the weights' sum.
    std::vector<float> data;
    int64_t elements = 0, members = 0;
    int64_t started = 0, waited = 0;
    enum State { Idle, Filling, Travelling, Arrived, Failed } state = Idle;
    std::string error;
  };

  explicit Exchange(const tfm_communicator_t &comm);
  void serve();

  tfm_communicator_t comm;
  double timeoutSeconds = 300;
  std::vector<Bucket> buckets;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<size_t> queue;
  bool stopping = false;
  /// A wait timed out with the bucket still in the communicator's hands:
  /// the thread may never return, so it is left behind, not joined.
  bool stuck = false;
  /// A step failed between its first START and its last WAIT: the ranks
  /// are out of step for good.
  std::string broken;
  std::thread worker;
};

/// 64-bit FNV-1a of the file at `path`, or 0 when it cannot be read.
uint64_t fileHash(const std::string &path);

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_EXCHANGE_H
