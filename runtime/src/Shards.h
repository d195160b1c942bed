//===- Shards.h - Adam's moments kept by the runtime, in parts -*- C++ -*-===//
//
// A training step compiled with --shard-optimizer leaves Adam's moments to
// the runtime (TFM_STATE_ADAM_M_SHARD and _V_SHARD): in one process they
// are whole, and in a data-parallel run of N ranks each rank keeps 1/N of
// every parameter's elements, updates that part of the parameter, and the
// ranks then gather the parts. The parts are the parameter's elements in
// order, ceil(n / N) each, rank 0 first, so they depend on N alone and a
// checkpoint (which holds the moments whole) resumes at any N.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_SHARDS_H
#define TFM_RUNTIME_SRC_SHARDS_H

#include "tfm/abi.h"
#include "tfm/runtime.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tfm::runtime {

class Exchange;

/// The elements [first, end) of `n` that rank `rank` of `size` keeps:
/// ceil(n / size) each, rank 0's first (the last ranks may keep fewer, or
/// none). The moments' parts and the gradients' (Exchange.h) alike.
inline std::pair<int64_t, int64_t> rankPart(int64_t n, int32_t rank,
                                            int32_t size) {
  int64_t chunk = (n + size - 1) / size;
  int64_t first = std::min(n, rank * chunk);
  return {first, std::min(n, first + chunk)};
}

class Shards {
public:
  /// The sharded moments of `model`, whole and zero; null when it has none,
  /// or with `why` when a first moment lacks its second.
  static std::unique_ptr<Shards> create(const tfm_abi_model_t &model,
                                        std::string &why);

  /// A sharded ADAM call on `args` (parameter, gradient, coefficients):
  /// updates this rank's part of the parameter, then, with `exchange`,
  /// posts the gathering of every rank's part to it.
  int32_t update(const tfm_abi_kernel_desc_t &d, void *const *args,
                 Exchange *exchange, std::string &error);

  /// Every moment whole again, from every rank's part (every rank calls it,
  /// with no step running).
  bool gatherWhole(const tfm_communicator_t &comm, std::string &error);
  /// Rank 0's whole moments on every rank, which then keeps its part (one
  /// moment whole at a time).
  bool broadcastWhole(const tfm_communicator_t &comm, std::string &error);

  /// State slot `slot`'s moment whole, for a checkpoint: from every rank's
  /// part when `comm` is given (every rank calls it for the same slots in
  /// the same order).
  bool whole(int32_t slot, const tfm_communicator_t *comm,
             std::vector<float> &out, std::string &error);
  /// Sets state slot `slot`'s moment from its whole value; this rank keeps
  /// its part.
  void setWhole(int32_t slot, const float *values);

  /// The bytes of moments this rank keeps.
  uint64_t bytesKept() const;

private:
  struct Moment {
    int64_t n = 0;
    /// This rank's part of the elements, [first, end) of partOf(n); empty
    /// while they are all zero, so that no rank ever holds more than its
    /// part before the first step.
    std::vector<float> values;
  };
  /// [first, end) of `n` elements for this rank.
  std::pair<int64_t, int64_t> partOf(int64_t n) const;
  /// `m`'s part, made of zeros if it was never written.
  std::vector<float> &part(Moment &m);

  /// By state slot: both moments of every sharded parameter.
  std::map<int32_t, Moment> moments;
  /// A first moment's slot → its second moment's.
  std::map<int32_t, int32_t> secondOf;
  int32_t rank = 0, size = 1;
};

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_SHARDS_H
