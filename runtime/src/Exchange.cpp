//===- Exchange.cpp - A data-parallel step's averages across ranks --------===//

#include "Exchange.h"
#include "Internal.h"
#include "Rendezvous.h"
#include "Shards.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <utility>

using namespace tfm::runtime;

Exchange::Exchange(const tfm_communicator_t &comm)
    : comm(comm), timeoutSeconds(collectiveTimeout()) {}

std::unique_ptr<Exchange> Exchange::create(const tfm_abi_model_t &model,
                                           const tfm_communicator_t &comm,
                                           Device &device, std::string &why) {
  std::unique_ptr<Exchange> x(new Exchange(comm));
  if (!device.hostAddressable())
    x->device = &device;
  // Every member's descriptor repeats its bucket's size and member count;
  // they must agree, and the members must tile the bucket.
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> spans;
  for (int32_t i = 0; i < model.num_kernels; ++i) {
    const tfm_abi_kernel_desc_t &d = model.kernels[i];
    if (d.kind != TFM_KERNEL_ALL_REDUCE)
      continue;
    int64_t b = d.params[TFM_ALL_REDUCE_BUCKET];
    if (b < 0 || b >= model.num_kernels) {
      why = fmt::format("kernel {} names bucket {}", i, b);
      return nullptr;
    }
    if (static_cast<size_t>(b) >= x->buckets.size())
      x->buckets.resize(b + 1);
    Bucket &bucket = x->buckets[b];
    int64_t elements = d.params[TFM_ALL_REDUCE_BUCKET_ELEMENTS],
            members = d.params[TFM_ALL_REDUCE_BUCKET_MEMBERS];
    bool parts = d.params[TFM_ALL_REDUCE_PARTS] != 0;
    if (d.params[TFM_ALL_REDUCE_PARTS] < 0 ||
        d.params[TFM_ALL_REDUCE_PARTS] > 1) {
      why = fmt::format("kernel {} has unknown flags", i);
      return nullptr;
    }
    if (parts && x->device) {
      why = "its optimizer's moments are sharded, which runs on the CPU only";
      return nullptr;
    }
    if (bucket.members == 0) {
      bucket.elements = elements;
      bucket.members = members;
      bucket.parts = parts;
    } else if (bucket.elements != elements || bucket.members != members ||
               bucket.parts != parts) {
      why = fmt::format("the kernels of bucket {} disagree on its size", b);
      return nullptr;
    }
    if (d.params[TFM_ALL_REDUCE_PHASE] == TFM_ALL_REDUCE_START)
      spans[b].push_back(
          {d.params[TFM_ALL_REDUCE_OFFSET], d.params[TFM_ALL_REDUCE_N]});
  }
  if (x->buckets.empty()) {
    why = "it averages nothing across processes";
    return nullptr;
  }
  for (auto &[b, members] : spans) {
    std::sort(members.begin(), members.end());
    int64_t at = 0;
    for (auto [offset, n] : members) {
      if (offset != at) {
        why = fmt::format("the members of bucket {} do not tile it", b);
        return nullptr;
      }
      at += n;
    }
    Bucket &bucket = x->buckets[b];
    if (at != bucket.elements ||
        static_cast<int64_t>(members.size()) != bucket.members) {
      why = fmt::format("bucket {} holds {} elements in {} members, not {} "
                        "in {}",
                        b, at, members.size(), bucket.elements, bucket.members);
      return nullptr;
    }
    if (x->device) {
      size_t bytes = bucket.elements * sizeof(float);
      bucket.onDevice = device.allocate(bytes);
      if (!bucket.onDevice.get()) {
        why = fmt::format("{} lacks the {:.1f} MB of bucket {}", device.name(),
                          bytes / 1048576.0, b);
        return nullptr;
      }
      continue;
    }
    if (!bucket.parts) {
      bucket.data.assign(bucket.elements + 1, 0.0f);
      continue;
    }
    for (auto [offset, n] : members) {
      bucket.partOffset[offset] = bucket.block;
      bucket.block += (n + comm.size - 1) / comm.size;
    }
    bucket.block += 1;
    bucket.data.assign(bucket.block * comm.size, 0.0f);
  }
  if (!x->device)
    x->worker = std::thread([raw = x.get()] { raw->serve(); });
  return x;
}

Exchange::~Exchange() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  if (worker.joinable()) {
    if (stuck)
      worker.detach();
    else
      worker.join();
  }
}

void Exchange::serve() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    changed.wait(lock, [&] { return stopping || !queue.empty(); });
    if (stopping)
      return;
    Task task = std::move(queue.front());
    queue.pop_front();
    char error[512] = {0};
    if (task.job) {
      lock.unlock();
      int32_t rc = task.job(error, sizeof(error));
      lock.lock();
      if (rc != 0 && jobError.empty())
        jobError = communicatorError(error);
      --pendingJobs;
      changed.notify_all();
      continue;
    }
    size_t b = task.bucket;
    Bucket &bucket = buckets[b];
    lock.unlock();
    int32_t rc = bucket.parts
                     ? comm.reduce_scatter_sum(comm.user, bucket.data.data(),
                                               bucket.data.data(), bucket.block,
                                               TFM_DTYPE_F32, nullptr, error,
                                               sizeof(error))
                     : comm.all_reduce_sum(comm.user, bucket.data.data(),
                                           bucket.data.size(), TFM_DTYPE_F32,
                                           nullptr, error, sizeof(error));
    lock.lock();
    if (rc != 0) {
      bucket.state = Bucket::Failed;
      bucket.error = communicatorError(error);
    } else {
      bucket.state = Bucket::Arrived;
    }
    changed.notify_all();
  }
}

int32_t Exchange::run(const tfm_abi_kernel_desc_t &d, void *const *args,
                      std::string &error) {
  std::unique_lock<std::mutex> lock(mutex);
  if (!broken.empty()) {
    error = broken;
    return -1;
  }
  size_t b = static_cast<size_t>(d.params[TFM_ALL_REDUCE_BUCKET]);
  Bucket &bucket = buckets[b];
  int64_t n = d.params[TFM_ALL_REDUCE_N],
          offset = d.params[TFM_ALL_REDUCE_OFFSET];
  if (device)
    return runOnDevice(b, n, offset,
                       d.params[TFM_ALL_REDUCE_PHASE] == TFM_ALL_REDUCE_START,
                       args, error);
  float *x = static_cast<float *>(args[0]);
  auto fail = [&](const std::string &why) { return breakWith(why, error); };

  if (d.params[TFM_ALL_REDUCE_PHASE] == TFM_ALL_REDUCE_START) {
    if (bucket.state != Bucket::Idle && bucket.state != Bucket::Filling)
      return fail(fmt::format("bucket {} started again before its last "
                              "exchange was read",
                              b));
    float w = *static_cast<const float *>(args[1]);
    // A rank whose labels are all ignored adds nothing, even where its
    // loss and gradients are 0/0.
    auto scale = [&](float *to, int64_t first, int64_t end) {
      if (w == 0.0f)
        std::fill(to, to + (end - first), 0.0f);
      else
        for (int64_t i = first; i < end; ++i)
          to[i - first] = w * x[i];
    };
    if (!bucket.parts) {
      scale(bucket.data.data() + offset, 0, n);
      bucket.data[bucket.elements] = w;
    } else {
      // Rank r's part of the member into rank r's block, the rest of the
      // member's room there left zero.
      for (int32_t r = 0; r < comm.size; ++r) {
        float *block = bucket.data.data() + r * bucket.block;
        auto [first, end] = rankPart(n, r, comm.size);
        scale(block + bucket.partOffset[offset], first, end);
        block[bucket.block - 1] = w;
      }
    }
    bucket.state = Bucket::Filling;
    if (++bucket.started == bucket.members) {
      bucket.state = Bucket::Travelling;
      queue.push_back(Task{b, nullptr});
      changed.notify_all();
    }
    return 0;
  }

  if (bucket.state == Bucket::Idle || bucket.state == Bucket::Filling)
    return fail(fmt::format("bucket {} was read before all its members "
                            "started",
                            b));
  if (!waitFor(lock, [&] {
        return bucket.state == Bucket::Arrived ||
               bucket.state == Bucket::Failed;
      }))
    return fail(fmt::format(
        "the exchange of bucket {} ({:.1f} MB) with the other {} rank(s) did "
        "not finish within {:g} s (TFM_COLLECTIVE_TIMEOUT): {}",
        b, bucket.data.size() * 4.0 / (1 << 20), comm.size - 1, timeoutSeconds,
        whoIsLate()));
  if (bucket.state == Bucket::Failed)
    return fail(
        fmt::format("the exchange of bucket {} failed: {}", b, bucket.error));
  // In parts only this rank's part of the member comes back; the sharded
  // update reads no other.
  auto [first, end] = bucket.parts ? rankPart(n, comm.rank, comm.size)
                                   : std::pair<int64_t, int64_t>(0, n);
  float total =
      bucket.parts ? bucket.data[bucket.block - 1] : bucket.data.back();
  const float *from =
      bucket.parts ? bucket.data.data() + bucket.partOffset[offset] - first
                   : bucket.data.data() + offset;
  for (int64_t i = first; i < end; ++i)
    x[i] = total > 0.0f ? from[i] / total : 0.0f;
  if (++bucket.waited == bucket.members) {
    bucket.started = bucket.waited = 0;
    bucket.state = Bucket::Idle;
  }
  return 0;
}

int32_t Exchange::runOnDevice(size_t b, int64_t n, int64_t offset, bool start,
                              void *const *args, std::string &error) {
  Bucket &bucket = buckets[b];
  char *data = static_cast<char *>(bucket.onDevice.get());
  char *member = data + offset * sizeof(float);
  auto fail = [&](const std::string &why) { return breakWith(why, error); };
  char message[512] = {0};
  // Compiled code called us: a device's failure becomes a code here.
  try {
    if (!start) {
      if (bucket.state != Bucket::Arrived)
        return fail(fmt::format("bucket {} was read before all its members "
                                "started",
                                b));
      // The step's work from here on follows the bucket's sum (and every
      // sum queued before it: the second stream runs them in order).
      if (std::exchange(sumsAhead, false))
        device->waitForStream(device->sideStream());
      device->copyOnDevice(args[0], member, n * sizeof(float));
      if (++bucket.waited == bucket.members) {
        bucket.started = bucket.waited = 0;
        bucket.state = Bucket::Idle;
        --openBuckets;
      }
      return 0;
    }
    if (bucket.state != Bucket::Idle && bucket.state != Bucket::Filling)
      return fail(fmt::format("bucket {} started again before its last "
                              "exchange was read",
                              b));
    if (bucket.state == Bucket::Idle && openBuckets++ == 0) {
      // A step's first exchange: every bucket of it shares the step's
      // weight w, so each rank's share w / Σ_r w_r is learnt once, and
      // each bucket is then a sum of shares times gradients (the
      // communicator scales as it sums; the runtime computes nothing on
      // the device). Reading w waits for the forward pass, once a step.
      float w = 0;
      device->copyToHost(&w, args[1], sizeof w);
      float total = w;
      if (comm.all_reduce_sum(comm.user, &total, 1, TFM_DTYPE_F32, nullptr,
                              message, sizeof message))
        return fail(fmt::format("summing the ranks' weights failed: {}",
                                communicatorError(message)));
      // A rank whose labels are all ignored adds nothing, and weights that
      // sum to 0 give zeros, as on the CPU.
      share = total > 0 && w != 0 ? w / total : 0.0f;
    }
    bucket.state = Bucket::Filling;
    device->copyOnDevice(member, args[0], n * sizeof(float));
    if (++bucket.started < bucket.members)
      return 0;
    // The sum runs on the device's second stream, after the members'
    // copies and beside the rest of the backward pass; the bucket's first
    // WAIT orders the step's work after it.
    void *side = device->sideStream();
    device->signalStream(side);
    if (comm.all_reduce_scaled_sum(comm.user, data, bucket.elements,
                                   TFM_DTYPE_F32, share, side, message,
                                   sizeof message))
      return fail(fmt::format("the exchange of bucket {} failed: {}", b,
                              communicatorError(message)));
    bucket.state = Bucket::Arrived;
    queuedOnDevice = sumsAhead = true;
    return 0;
  } catch (const DeviceError &e) {
    return fail(e.what());
  }
}

std::string Exchange::whoIsLate() const {
  char ranks[256] = {0};
  if (comm.lagging && comm.lagging(comm.user, ranks, sizeof ranks) == 0 &&
      ranks[0])
    return fmt::format("rank(s) {} of {} stopped answering or never reached "
                       "it (hung, dead, or behind)",
                       ranks, comm.size);
  return "a rank has died, hangs, or runs another step";
}

int32_t Exchange::breakWith(const std::string &why, std::string &error) {
  broken = fmt::format("rank {} of {}: {}; the ranks are out of step, so "
                       "every later step fails too",
                       comm.rank, comm.size, why);
  error = broken;
  return -1;
}

bool Exchange::waitFor(std::unique_lock<std::mutex> &lock,
                       const std::function<bool()> &done) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(timeoutSeconds);
  if (changed.wait_until(lock, deadline, done))
    return true;
  stuck = true;
  return false;
}

void Exchange::post(Job job) {
  std::lock_guard<std::mutex> lock(mutex);
  ++pendingJobs;
  queue.push_back(Task{0, std::move(job)});
  changed.notify_all();
}

int32_t Exchange::drain(std::string &error) {
  std::unique_lock<std::mutex> lock(mutex);
  if (!broken.empty()) {
    error = broken;
    return -1;
  }
  auto fail = [&](const std::string &why) { return breakWith(why, error); };
  if (!waitFor(lock, [&] { return pendingJobs == 0; }))
    return fail(fmt::format("gathering the parameters' parts from the other "
                            "{} rank(s) did not finish within {:g} s "
                            "(TFM_COLLECTIVE_TIMEOUT): {}",
                            comm.size - 1, timeoutSeconds, whoIsLate()));
  if (!jobError.empty())
    return fail("gathering the parameters' parts failed: " +
                std::exchange(jobError, std::string()));
  // The sums queued on the device this step: waited on here, where the
  // communicator bounds the wait, and not in the device's next
  // synchronization, which would wait forever on a rank that hangs.
  if (device && std::exchange(queuedOnDevice, false) && comm.wait) {
    lock.unlock();
    char message[1024] = {0};
    int32_t rc = 0;
    for (void *stream : {device->sideStream(), device->workStream()})
      if (!rc)
        rc = comm.wait(comm.user, stream, message, sizeof message);
    lock.lock();
    if (rc)
      return fail(fmt::format("the step's exchanges did not finish: {}",
                              communicatorError(message)));
  }
  return 0;
}

uint64_t tfm::runtime::fileHash(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return 0;
  uint64_t h = fnv1a(nullptr, 0);
  std::vector<char> chunk(1 << 20);
  size_t got;
  while ((got = std::fread(chunk.data(), 1, chunk.size(), f)) > 0)
    h = fnv1a(chunk.data(), got, h);
  std::fclose(f);
  return h;
}

namespace {

/// Which ranks hold another `hash` than rank 0 (0, an unreadable file,
/// differs everywhere), as "1, 3"; every rank learns the same list before
/// any fails, so none is left waiting for the others. False, with `error`,
/// when the communicator fails.
bool ranksDiffering(const tfm_communicator_t &comm, uint64_t hash,
                    std::string &ranks, char *error, size_t errorSize) {
  uint64_t root = hash;
  if (comm.broadcast(comm.user, &root, sizeof(root), 0, nullptr, error,
                     errorSize))
    return false;
  std::vector<float> differs(comm.size, 0.0f);
  differs[comm.rank] = hash != root || hash == 0;
  if (comm.all_reduce_sum(comm.user, differs.data(), differs.size(),
                          TFM_DTYPE_F32, nullptr, error, errorSize))
    return false;
  ranks.clear();
  for (int32_t r = 0; r < comm.size; ++r)
    if (differs[r] != 0.0f)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return true;
}

/// Writes `rank` into the model's rank slots (its dropouts' offset).
void writeRank(tfm_session_s &session, int64_t rank) {
  const tfm_abi_model_t *m = session.module->model;
  for (int32_t i = 0; i < m->num_states; ++i)
    if (m->states[i].kind == TFM_STATE_RANK)
      session.device->copyToDevice(static_cast<char *>(session.state.get()) +
                                       m->states[i].offset,
                                   &rank, sizeof(rank));
}

} // namespace

extern "C" {

tfm_status_t tfm_session_set_communicator(tfm_session_t *session,
                                          const tfm_communicator_t *given) {
  if (!session)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_set_communicator: session is NULL");
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_set_communicator");
  return guarded("tfm_session_set_communicator", [&]() -> tfm_status_t {
    // Sharded moments become whole again before the ranks part, or before
    // they part differently.
    auto gatherMoments = [&]() -> tfm_status_t {
      if (!session->shards || !session->exchange)
        return nullptr;
      const tfm_communicator_t &old = session->exchange->communicator();
      std::string why;
      if (!session->shards->gatherWhole(old, why))
        return makeStatus(TFM_STATUS_UNAVAILABLE, "rank {} of {}: {}", old.rank,
                          old.size, why);
      return nullptr;
    };
    if (!given) {
      if (tfm_status_t s = gatherMoments())
        return s;
      session->exchange.reset();
      writeRank(*session, 0);
      return nullptr;
    }
    tfm_communicator_t comm{};
    comm.struct_size = sizeof(comm);
    if (tfm_status_t s =
            readOptions(given, comm, "tfm_communicator_t",
                        "sizeof(tfm_communicator_t) and every field"))
      return s;
    if (comm.size < 1 || comm.rank < 0 || comm.rank >= comm.size ||
        !comm.all_reduce_sum || !comm.broadcast)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "tfm_session_set_communicator: rank {} of {}, or a "
                        "function missing",
                        comm.rank, comm.size);
    if (session->shards && (!comm.all_gather || !comm.reduce_scatter_sum))
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "tfm_session_set_communicator: '{}' shards Adam's "
                        "moments (--shard-optimizer), which needs the "
                        "communicator's all_gather and reduce_scatter_sum",
                        session->module->path);
    const std::string &path = session->module->path;
    Device &device = *session->device;
    if (!device.hostAddressable() &&
        (!comm.device_memory || !comm.all_reduce_scaled_sum))
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}' runs on {}, and the communicator takes host "
                        "memory only, or has no all_reduce_scaled_sum: a GPU "
                        "session needs one that takes device memory "
                        "(tfm_nccl_communicator)",
                        path, session->deviceName);
    std::string why;
    auto exchange =
        Exchange::create(*session->module->model, comm, device, why);
    if (!exchange)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "'{}' cannot train across processes on {}: {} (a "
                        "training step compiled with --train for this "
                        "device by a tfmc of this version averages its "
                        "gradients; compile it again)",
                        path, session->deviceName, why);
    char error[512] = {0};
    auto failed = [&](const char *what) {
      return makeStatus(TFM_STATUS_UNAVAILABLE, "rank {} of {}: {} failed: {}",
                        comm.rank, comm.size, what, communicatorError(error));
    };
    std::string ranks;
    if (!ranksDiffering(comm, fileHash(path), ranks, error, sizeof(error)))
      return failed("comparing the models");
    if (!ranks.empty())
      return makeStatus(
          TFM_STATUS_FAILED_PRECONDITION,
          "rank {} of {}: the model library of rank(s) {} differs from rank "
          "0's (another model, other shapes or options); every rank must "
          "load the same artifact",
          comm.rank, comm.size, ranks);
    if (tfm_status_t s = gatherMoments())
      return s;
    session->exchange.reset();
    // Every rank begins from rank 0's parameters, moments and step count.
    const tfm_abi_model_t *m = session->module->model;
    if (m->state_bytes &&
        comm.broadcast(comm.user, session->state.get(), m->state_bytes, 0,
                       device.workStream(), error, sizeof(error)))
      return failed("copying rank 0's training state");
    // A communicator's host memory travels on a stream of its own: the
    // state must have arrived before anything else crosses. A wait the
    // communicator bounds, where it can: a rank that never broadcasts
    // would hold the device's own forever.
    if (m->state_bytes && comm.wait && device.workStream()) {
      if (comm.wait(comm.user, device.workStream(), error, sizeof(error)))
        return failed("copying rank 0's training state");
    } else {
      device.synchronize();
    }
    if (session->shards && !session->shards->broadcastWhole(comm, why))
      return makeStatus(TFM_STATUS_UNAVAILABLE, "rank {} of {}: {}", comm.rank,
                        comm.size, why);
    writeRank(*session, comm.rank);
    session->exchange = std::move(exchange);
    return nullptr;
  });
}

tfm_status_t tfm_session_compare_parameters(tfm_session_t *session) {
  if (!session)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_compare_parameters: session is NULL");
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_compare_parameters");
  return guarded("tfm_session_compare_parameters", [&]() -> tfm_status_t {
    if (!session->exchange)
      return nullptr;
    const tfm_abi_model_t *m = session->module->model;
    uint64_t hash = fnv1a(nullptr, 0);
    std::vector<char> bytes;
    for (int32_t i = 0; i < m->num_states; ++i) {
      const tfm_abi_state_desc_t &d = m->states[i];
      if (d.kind != TFM_STATE_PARAMETER)
        continue;
      bytes.resize(tensorBytes(d.tensor));
      session->device->copyToHost(
          bytes.data(),
          static_cast<const char *>(session->state.get()) + d.offset,
          bytes.size());
      hash = fnv1a(bytes.data(), bytes.size(), hash);
    }
    const tfm_communicator_t &comm = session->exchange->communicator();
    char error[512] = {0};
    std::string ranks;
    if (!ranksDiffering(comm, hash, ranks, error, sizeof(error)))
      return makeStatus(TFM_STATUS_UNAVAILABLE,
                        "rank {} of {}: comparing the parameters failed: {}",
                        comm.rank, comm.size, communicatorError(error));
    if (!ranks.empty())
      return makeStatus(TFM_STATUS_FAILED_PRECONDITION,
                        "rank {} of {}: the parameters of rank(s) {} differ "
                        "from rank 0's",
                        comm.rank, comm.size, ranks);
    return nullptr;
  });
}

} // extern "C"
