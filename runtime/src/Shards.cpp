//===- Shards.cpp - Adam's moments kept by the runtime, in parts ----------===//

#include "Shards.h"
#include "Exchange.h"
#include "Internal.h"
#include "cpu/Kernels.h"

#include <algorithm>
#include <cstring>

using namespace tfm::runtime;

namespace {

/// Every rank's `chunk` elements at `part` (padded past `kept`), gathered
/// into the first `n` of `out`.
int32_t gatherParts(const tfm_communicator_t &comm, const float *part,
                    int64_t kept, int64_t chunk, int64_t n, float *out,
                    char *error, size_t errorSize) {
  std::vector<float> send(chunk, 0.0f), all(chunk * comm.size);
  std::copy(part, part + kept, send.begin());
  if (int32_t rc =
          comm.all_gather(comm.user, send.data(), all.data(),
                          chunk * sizeof(float), nullptr, error, errorSize))
    return rc;
  std::copy(all.begin(), all.begin() + n, out);
  return 0;
}

} // namespace

std::unique_ptr<Shards> Shards::create(const tfm_abi_model_t &model,
                                       std::string &why) {
  std::unique_ptr<Shards> s(new Shards);
  for (int32_t i = 0; i < model.num_states; ++i) {
    const tfm_abi_state_desc_t &first = model.states[i];
    if (first.kind != TFM_STATE_ADAM_M_SHARD)
      continue;
    int32_t second = -1;
    for (int32_t j = 0; j < model.num_states; ++j)
      if (model.states[j].kind == TFM_STATE_ADAM_V_SHARD &&
          std::strcmp(model.states[j].tensor.name, first.tensor.name) == 0 &&
          tensorBytes(model.states[j].tensor) == tensorBytes(first.tensor))
        second = j;
    if (second < 0) {
      why = fmt::format("the sharded first moment of '{}' has no second "
                        "moment of its size",
                        first.tensor.name);
      return nullptr;
    }
    int64_t n = static_cast<int64_t>(tensorBytes(first.tensor) / 4);
    s->moments[i] = Moment{n, {}};
    s->moments[second] = Moment{n, {}};
    s->secondOf[i] = second;
  }
  if (s->moments.empty())
    return nullptr;
  return s;
}

std::pair<int64_t, int64_t> Shards::partOf(int64_t n) const {
  return rankPart(n, rank, size);
}

std::vector<float> &Shards::part(Moment &m) {
  auto [begin, end] = partOf(m.n);
  if (m.values.empty())
    m.values.assign(end - begin, 0.0f);
  return m.values;
}

int32_t Shards::update(const tfm_abi_kernel_desc_t &d, void *const *args,
                       Exchange *exchange, std::string &error) {
  auto first =
      secondOf.find(static_cast<int32_t>(d.params[TFM_OPTIMIZER_MOMENTS]));
  if (first == secondOf.end()) {
    error = fmt::format("a sharded Adam update names state slot {}, which "
                        "holds no sharded moment",
                        d.params[TFM_OPTIMIZER_MOMENTS]);
    return -1;
  }
  Moment &m = moments[first->first], &v = moments[first->second];
  int64_t n = d.params[TFM_OPTIMIZER_N];
  auto [begin, end] = partOf(n);
  auto *p = static_cast<float *>(args[0]);
  const auto *g = static_cast<const float *>(args[1]);
  cpu::adamUpdate(p + begin, g + begin, part(m).data(), part(v).data(),
                  end - begin, static_cast<const float *>(args[2]));
  if (!exchange || size == 1)
    return 0;
  // The exchange's thread gathers the parts while the next parameters
  // update; the run waits for it before it returns (Exchange::drain).
  int64_t chunk = (n + size - 1) / size;
  const tfm_communicator_t &comm = exchange->communicator();
  if (chunk * size == n) {
    // Every part is whole: each lands in place in the parameter, and this
    // rank's part, which nothing writes now, is the one it sends.
    exchange->post([&comm, p, begin, chunk](char *e, size_t bytes) {
      return comm.all_gather(comm.user, p + begin, p, chunk * sizeof(float),
                             nullptr, e, bytes);
    });
    return 0;
  }
  auto part = std::make_shared<std::vector<float>>(p + begin, p + end);
  exchange->post([&comm, part, p, n, chunk](char *e, size_t bytes) {
    return gatherParts(comm, part->data(), static_cast<int64_t>(part->size()),
                       chunk, n, p, e, bytes);
  });
  return 0;
}

bool Shards::gatherWhole(const tfm_communicator_t &comm, std::string &error) {
  if (size == 1)
    return true;
  for (auto &[slot, m] : moments) {
    std::vector<float> all;
    if (!whole(slot, &comm, all, error))
      return false;
    m.values = std::move(all);
  }
  rank = 0;
  size = 1;
  return true;
}

bool Shards::broadcastWhole(const tfm_communicator_t &comm,
                            std::string &error) {
  // One moment whole at a time: a rank holds its parts and one whole
  // moment at the most.
  rank = comm.rank;
  size = comm.size;
  for (auto &[slot, m] : moments) {
    std::vector<float> all = std::move(m.values);
    all.resize(m.n, 0.0f);
    char buffer[512] = {0};
    if (comm.broadcast(comm.user, all.data(), all.size() * 4, 0, nullptr,
                       buffer, sizeof(buffer))) {
      error =
          "copying rank 0's Adam moments failed: " + communicatorError(buffer);
      return false;
    }
    auto [begin, end] = partOf(m.n);
    m.values.assign(all.begin() + begin, all.begin() + end);
  }
  return true;
}

bool Shards::whole(int32_t slot, const tfm_communicator_t *comm,
                   std::vector<float> &out, std::string &error) {
  Moment &m = moments.at(slot);
  out.resize(m.n);
  const std::vector<float> &mine = part(m);
  if (size == 1) {
    std::copy(mine.begin(), mine.end(), out.begin());
    return true;
  }
  char buffer[512] = {0};
  if (!comm ||
      gatherParts(*comm, mine.data(), static_cast<int64_t>(mine.size()),
                  (m.n + size - 1) / size, m.n, out.data(), buffer,
                  sizeof(buffer))) {
    error =
        comm ? "gathering Adam's moments failed: " + communicatorError(buffer)
             : std::string("the moments are in parts without a "
                           "communicator");
    return false;
  }
  return true;
}

void Shards::setWhole(int32_t slot, const float *values) {
  Moment &m = moments.at(slot);
  auto [begin, end] = partOf(m.n);
  m.values.assign(values + begin, values + end);
}

uint64_t Shards::bytesKept() const {
  uint64_t bytes = 0;
  for (const auto &[slot, m] : moments)
    bytes += m.values.size() * sizeof(float);
  return bytes;
}
