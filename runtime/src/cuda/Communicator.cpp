//===- Communicator.cpp - A communicator over NCCL ------------------------===//
//
// tfm_nccl_communicator: the collectives of a data-parallel run between
// GPUs, NCCL's, queued on the caller's stream. Host memory (the session's
// checks at joining: the models' hashes, the parameters' hashes) travels
// through a device buffer of the communicator's own, on its own stream.
//
// NCCL's collectives never time out: a rank that hangs or died leaves the
// others' kernels spinning. So no wait here is unbounded. Every wait polls
// the stream against the job's timeout, asks NCCL for an error it found
// (a peer's connection lost), and asks the heartbeat between the ranks
// (RankWatch, over the connections of their meeting) whether a rank died
// and who runs behind. Giving up aborts the NCCL communicator, which stops its
// kernels, so the stream drains and the process can say why and end.
//
//===----------------------------------------------------------------------===//

#include "../Exchange.h"
#include "../Internal.h"
#include "../Rendezvous.h"
#include "Driver.h"
#include "Nccl.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include <unistd.h>

using namespace tfm::runtime;
using namespace tfm::runtime::cuda;

namespace {

struct NcclCommunicator {
  const Driver *drv = nullptr;
  const Nccl *lib = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  /// For host memory: a stream and a buffer that grows to the largest
  /// call's bytes.
  CUstream stream = nullptr;
  CUdeviceptr staging = 0;
  size_t stagingBytes = 0;
  ncclComm comm = nullptr;
  int32_t rank = 0, size = 1;
  double timeoutSeconds = 300;
  /// The heartbeat between the ranks; null in a world of one, or where the
  /// ranks could not connect for it.
  std::unique_ptr<RankWatch> watch;
  /// Why the communicator was aborted; every call after fails with it.
  std::string broken;

  ~NcclCommunicator() {
    if (!context)
      return;
    drv->ctxSetCurrent(context);
    if (comm)
      lib->commDestroy(comm);
    if (staging)
      drv->memFree(staging);
    if (stream)
      drv->streamDestroy(stream);
    drv->primaryCtxRelease(device);
  }
};

/// NCCL's type for `dtype`, or -1 where NCCL has none.
int ncclTypeOf(tfm_dtype_t dtype) {
  switch (dtype) {
  case TFM_DTYPE_F32:
    return ncclFloat32;
  case TFM_DTYPE_F16:
    return ncclFloat16;
  case TFM_DTYPE_BF16:
    return ncclBfloat16;
  case TFM_DTYPE_F64:
    return ncclFloat64;
  case TFM_DTYPE_I32:
    return ncclInt32;
  case TFM_DTYPE_I64:
    return ncclInt64;
  default:
    return -1;
  }
}

int32_t say(char *error, size_t size, const std::string &message) {
  if (size)
    std::snprintf(error, size, "%s", message.c_str());
  return -1;
}

/// Checks an NCCL call; on failure writes NCCL's reason, with its last
/// error's detail where the library keeps one.
int32_t checkNccl(NcclCommunicator &c, ncclResult rc, const char *what,
                  char *error, size_t size) {
  if (rc == ncclSuccess)
    return 0;
  std::string why = c.lib->getErrorString(rc);
  if (c.lib->getLastError)
    if (const char *last = c.lib->getLastError(c.comm); last && *last)
      why += std::string(": ") + last;
  return say(error, size,
             fmt::format("rank {} of {}: NCCL's {} failed: {}", c.rank, c.size,
                         what, why));
}

int32_t checkCuda(NcclCommunicator &c, CUresult rc, const char *what,
                  char *error, size_t size) {
  if (rc == CUDA_SUCCESS)
    return 0;
  return say(error, size,
             fmt::format("rank {} of {}: {}: {}", c.rank, c.size, what,
                         c.drv->describe(rc)));
}

/// The ranks this one waits for, as far as it can tell.
std::string whoIsLate(NcclCommunicator &c) {
  if (c.size == 1)
    return "no other rank takes part, so NCCL or this GPU is at fault";
  if (!c.watch)
    return "a rank hangs, died, or runs another step (the ranks could not "
           "connect for the heartbeat that would name it)";
  std::string late = c.watch->lagging();
  if (late.empty())
    return "every rank is alive and has started as many collectives (a "
           "collective of another size or order, or a network that stalls)";
  return "rank(s) " + late;
}

/// Gives up on the communicator for `why`: NCCL's kernels stop, and this
/// and every later call fails.
int32_t abandon(NcclCommunicator &c, const std::string &why, char *error,
                size_t size) {
  if (c.comm)
    c.lib->commAbort(c.comm);
  c.comm = nullptr;
  c.broken = fmt::format("rank {} of {}: {}; NCCL's communicator was "
                         "aborted, so every later collective fails too",
                         c.rank, c.size, why);
  return say(error, size, c.broken);
}

/// Fails, before a collective, once the communicator was given up; else
/// counts the collective for the heartbeat.
int32_t usable(NcclCommunicator &c, char *error, size_t size) {
  if (!c.broken.empty())
    return say(error, size, c.broken);
  if (c.watch)
    c.watch->started();
  return 0;
}

/// Waits for the work queued on `stream`, `what` it is, within the job's
/// timeout; on NCCL's error, a rank's death or the timeout, abandons the
/// communicator.
int32_t finish(NcclCommunicator &c, CUstream stream, const char *what,
               char *error, size_t size) {
  using Clock = std::chrono::steady_clock;
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(c.timeoutSeconds));
  // A rank whose connection closed may have finished its part of the last
  // collective before it ended: the others get a moment to finish theirs.
  constexpr auto afterAnEnd = std::chrono::seconds(2);
  Clock::time_point endSeen{};
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    CUresult rc = c.drv->streamQuery(stream);
    if (rc == CUDA_SUCCESS)
      return 0;
    if (rc != CUDA_ERROR_NOT_READY)
      return checkCuda(c, rc, what, error, size);
    if (!c.comm)
      return say(error, size, c.broken);
    ncclResult state = ncclSuccess;
    if (c.lib->commGetAsyncError(c.comm, &state) == ncclSuccess &&
        state != ncclSuccess && state != ncclInProgress) {
      std::string why = c.lib->getErrorString(state);
      if (c.lib->getLastError)
        if (const char *last = c.lib->getLastError(c.comm); last && *last)
          why += std::string(": ") + last;
      return abandon(c,
                     fmt::format("{} failed: NCCL found {}{}", what, why,
                                 state == ncclRemoteError
                                     ? " (" + whoIsLate(c) + ")"
                                     : std::string()),
                     error, size);
    }
    auto now = Clock::now();
    if (c.watch) {
      std::string gone = c.watch->ended();
      if (gone.empty())
        endSeen = {};
      else if (endSeen == Clock::time_point{})
        endSeen = now;
      else if (now - endSeen > afterAnEnd)
        return abandon(c,
                       fmt::format("{} cannot finish: the process of rank(s) "
                                   "{} ended without leaving the job ({})",
                                   what, gone, whoIsLate(c)),
                       error, size);
    }
    if (now >= deadline)
      return abandon(c,
                     fmt::format("{} did not finish within {:g} s "
                                 "(TFM_COLLECTIVE_TIMEOUT): {}",
                                 what, c.timeoutSeconds, whoIsLate(c)),
                     error, size);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

/// Runs `collective` on the communicator's stream over host memory: `in`
/// is copied to staging + inAt first, and outBytes at staging + outAt back
/// to `out` after; returns once they are on the host.
template <typename Collective>
int32_t staged(NcclCommunicator &c, const void *in, size_t inBytes, size_t inAt,
               void *out, size_t outBytes, size_t outAt, size_t needed,
               Collective collective, char *error, size_t size) {
  if (needed > c.stagingBytes) {
    if (c.staging)
      c.drv->memFree(c.staging);
    c.staging = 0;
    c.stagingBytes = 0;
    if (int32_t rc = checkCuda(c, c.drv->memAlloc(&c.staging, needed),
                               "cannot hold a collective's host memory on "
                               "the GPU",
                               error, size))
      return rc;
    c.stagingBytes = needed;
  }
  if (inBytes)
    if (int32_t rc = checkCuda(
            c, c.drv->memcpyHtoDAsync(c.staging + inAt, in, inBytes, c.stream),
            "cannot copy to the GPU", error, size))
      return rc;
  if (int32_t rc = collective(c.staging))
    return rc;
  if (outBytes)
    if (int32_t rc = checkCuda(
            c,
            c.drv->memcpyDtoHAsync(out, c.staging + outAt, outBytes, c.stream),
            "cannot copy from the GPU", error, size))
      return rc;
  return finish(c, c.stream, "a collective of host memory", error, size);
}

char *bytePointer(CUdeviceptr p, size_t at = 0) {
  return reinterpret_cast<char *>(static_cast<uintptr_t>(p)) + at;
}

/// Runs `collective(at, on)` in place over the `bytes` at `data`: on
/// `stream` where they are device memory, else staged, `sent` of them
/// copied to the GPU first.
template <typename Collective>
int32_t inPlace(NcclCommunicator &c, void *data, size_t sent, size_t bytes,
                void *stream, Collective collective, char *error, size_t size) {
  if (stream)
    return collective(data, static_cast<CUstream>(stream));
  return staged(
      c, data, sent, 0, data, bytes, 0, bytes,
      [&](CUdeviceptr s) { return collective(bytePointer(s), c.stream); },
      error, size);
}

/// The communicator behind `user`, its GPU's context current on this
/// thread (NCCL launches in the current one).
NcclCommunicator &enter(void *user) {
  auto &c = *static_cast<NcclCommunicator *>(user);
  c.drv->ctxSetCurrent(c.context);
  return c;
}

/// NCCL's type for a sum of `dtype`, or -1 with a message where it has none.
int summable(tfm_dtype_t dtype, char *error, size_t size) {
  int type = ncclTypeOf(dtype);
  if (type < 0)
    say(error, size, fmt::format("NCCL sums no {}", dtypeName(dtype)));
  return type;
}

int32_t allReduceSum(void *user, void *data, uint64_t count, tfm_dtype_t dtype,
                     void *stream, char *error, size_t size) {
  int type = summable(dtype, error, size);
  if (type < 0)
    return -1;
  if (!count)
    return 0;
  NcclCommunicator &c = enter(user);
  if (int32_t rc = usable(c, error, size))
    return rc;
  auto run = [&](void *at, CUstream on) {
    return checkNccl(c,
                     c.lib->allReduce(at, at, count, type, ncclSum, c.comm, on),
                     "all-reduce", error, size);
  };
  size_t bytes = count * tfm_dtype_size(dtype);
  return inPlace(c, data, bytes, bytes, stream, run, error, size);
}

int32_t allReduceScaledSum(void *user, void *data, uint64_t count,
                           tfm_dtype_t dtype, double scale, void *stream,
                           char *error, size_t size) {
  // NCCL reads the scale as a value of the data's type.
  float single = static_cast<float>(scale);
  void *scalar = dtype == TFM_DTYPE_F32   ? static_cast<void *>(&single)
                 : dtype == TFM_DTYPE_F64 ? static_cast<void *>(&scale)
                                          : nullptr;
  if (!scalar)
    return say(error, size,
               fmt::format("NCCL scales no {} here", dtypeName(dtype)));
  if (!count)
    return 0;
  NcclCommunicator &c = enter(user);
  if (int32_t rc = usable(c, error, size))
    return rc;
  int type = ncclTypeOf(dtype);
  auto run = [&](void *at, CUstream on) {
    int op = 0;
    if (int32_t rc =
            checkNccl(c,
                      c.lib->redOpCreatePreMulSum(
                          &op, scalar, type, ncclScalarHostImmediate, c.comm),
                      "scaled sum", error, size))
      return rc;
    int32_t rc =
        checkNccl(c, c.lib->allReduce(at, at, count, type, op, c.comm, on),
                  "all-reduce", error, size);
    // An operation may go once the last call that uses it has returned.
    c.lib->redOpDestroy(op, c.comm);
    return rc;
  };
  size_t bytes = count * tfm_dtype_size(dtype);
  return inPlace(c, data, bytes, bytes, stream, run, error, size);
}

int32_t broadcast(void *user, void *data, uint64_t bytes, int32_t root,
                  void *stream, char *error, size_t size) {
  if (!bytes)
    return 0;
  NcclCommunicator &c = enter(user);
  if (int32_t rc = usable(c, error, size))
    return rc;
  auto run = [&](void *at, CUstream on) {
    return checkNccl(
        c, c.lib->broadcast(at, at, bytes, ncclUint8, root, c.comm, on),
        "broadcast", error, size);
  };
  return inPlace(c, data, c.rank == root ? bytes : 0, bytes, stream, run, error,
                 size);
}

int32_t allGather(void *user, const void *send, void *receive, uint64_t bytes,
                  void *stream, char *error, size_t size) {
  if (!bytes)
    return 0;
  NcclCommunicator &c = enter(user);
  if (int32_t rc = usable(c, error, size))
    return rc;
  // NCCL gathers in place where `send` is this rank's place in `receive`,
  // which is how the session asks for it.
  auto run = [&](const void *from, void *to, CUstream on) {
    return checkNccl(c,
                     c.lib->allGather(from, to, bytes, ncclUint8, c.comm, on),
                     "all-gather", error, size);
  };
  if (stream)
    return run(send, receive, static_cast<CUstream>(stream));
  size_t whole = bytes * c.size, mine = bytes * c.rank;
  return staged(
      c, send, bytes, mine, receive, whole, 0, whole,
      [&](CUdeviceptr s) {
        return run(bytePointer(s, mine), bytePointer(s), c.stream);
      },
      error, size);
}

int32_t reduceScatterSum(void *user, const void *send, void *receive,
                         uint64_t count, tfm_dtype_t dtype, void *stream,
                         char *error, size_t size) {
  int type = summable(dtype, error, size);
  if (type < 0)
    return -1;
  if (!count)
    return 0;
  NcclCommunicator &c = enter(user);
  if (int32_t rc = usable(c, error, size))
    return rc;
  size_t block = count * tfm_dtype_size(dtype), mine = block * c.rank;
  // NCCL's in-place form leaves rank r's sum in block r; ours asks for it
  // in the first block, so it moves there after.
  auto run = [&](const char *from, char *to, CUstream on) {
    return checkNccl(
        c, c.lib->reduceScatter(from, to, count, type, ncclSum, c.comm, on),
        "reduce-scatter", error, size);
  };
  if (!stream)
    return staged(
        c, send, block * c.size, 0, receive, block, mine, block * c.size,
        [&](CUdeviceptr s) {
          return run(bytePointer(s), bytePointer(s, mine), c.stream);
        },
        error, size);
  auto on = static_cast<CUstream>(stream);
  const char *from = static_cast<const char *>(send);
  char *to = static_cast<char *>(receive);
  if (to != from)
    return run(from, to, on);
  if (int32_t rc = run(from, to + mine, on))
    return rc;
  if (!mine)
    return 0;
  return checkCuda(
      c,
      c.drv->memcpyDtoDAsync(reinterpret_cast<uintptr_t>(to),
                             reinterpret_cast<uintptr_t>(to) + mine, block, on),
      "cannot move the reduced block", error, size);
}

int32_t waitOn(void *user, void *stream, char *error, size_t size) {
  NcclCommunicator &c = enter(user);
  if (!c.broken.empty())
    return say(error, size, c.broken);
  return finish(c, stream ? static_cast<CUstream>(stream) : c.stream,
                "the collectives on the stream", error, size);
}

int32_t lagging(void *user, char *ranks, size_t size) {
  auto &c = *static_cast<NcclCommunicator *>(user);
  if (!c.watch)
    return -1;
  std::string late = c.watch->lagging(/*reasons=*/false);
  if (size)
    std::snprintf(ranks, size, "%s", late.c_str());
  return 0;
}

/// Shares NCCL's `id` (rank 0's) over `boot`, and where rank 0 listens
/// for the connections of the heartbeat (c.watch) that names the ranks a
/// hung collective waits for; the bootstrap carries nothing after. Without
/// the heartbeat the job runs all the same (a hang is still ended at the
/// timeout, naming no rank): every rank keeps it, or none. False, with
/// `error`, when the bootstrap fails.
bool meetOverBootstrap(NcclCommunicator &c, const tfm_communicator_t &boot,
                       const RendezvousPlace &place, NcclUniqueId &id,
                       char *error, size_t size) {
  struct Meeting {
    NcclUniqueId id;
    char host[256];
    char port[16];
  } meeting{};
  meeting.id = id;
  int listening = -1;
  if (c.rank == 0 && c.size > 1) {
    RendezvousPlace where = place;
    std::string why;
    listening = listenForRendezvous(where, why);
    if (listening >= 0 && where.host.size() < sizeof meeting.host) {
      std::snprintf(meeting.host, sizeof meeting.host, "%s",
                    where.host.c_str());
      std::snprintf(meeting.port, sizeof meeting.port, "%s",
                    where.port.c_str());
    }
  }
  if (boot.broadcast(boot.user, &meeting, sizeof meeting, 0, nullptr, error,
                     size)) {
    if (listening >= 0)
      ::close(listening);
    return false;
  }
  id = meeting.id;
  if (!meeting.host[0]) {
    if (listening >= 0)
      ::close(listening);
    return true;
  }
  RendezvousPlace where = place;
  where.host = meeting.host;
  where.port = meeting.port;
  std::vector<char> nothing;
  std::string why;
  int32_t failed = rendezvous(where, nothing, std::min(c.timeoutSeconds, 10.0),
                              why, &c.watch, listening)
                       ? 0
                       : 1;
  char message[512] = {0};
  if (boot.all_reduce_sum(boot.user, &failed, 1, TFM_DTYPE_I32, nullptr,
                          message, sizeof message) ||
      failed)
    c.watch.reset();
  return true;
}

} // namespace

extern "C" {

tfm_status_t tfm_nccl_communicator(int32_t device,
                                   const tfm_communicator_t *bootstrap,
                                   tfm_communicator_t *out) {
  if (!out)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_nccl_communicator: out is NULL");
  return guarded("tfm_nccl_communicator", [&]() -> tfm_status_t {
    auto c = std::make_unique<NcclCommunicator>();
    std::string error;
    if (!(c->drv = driver(error)) || !(c->lib = nccl(error)))
      return makeStatus(TFM_STATUS_UNAVAILABLE, "{}", error);
    tfm_communicator_t boot{};
    boot.struct_size = sizeof(boot);
    RendezvousPlace place;
    if (bootstrap) {
      if (tfm_status_t s = readOptions(bootstrap, boot, "tfm_communicator_t",
                                       "sizeof(tfm_communicator_t) and every "
                                       "field"))
        return s;
      if (boot.size < 1 || boot.rank < 0 || boot.rank >= boot.size ||
          !boot.broadcast)
        return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                          "the bootstrap communicator is rank {} of {}, or "
                          "has no broadcast",
                          boot.rank, boot.size);
      place.rank = boot.rank;
      place.size = boot.size;
    } else if (!rendezvousFromEnvironment(place, error)) {
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "without a bootstrap communicator the ranks meet "
                        "where the environment says, but {}",
                        error);
    }
    c->rank = place.rank;
    c->size = place.size;
    c->timeoutSeconds = collectiveTimeout();
    auto cuda = [&](CUresult rc, const char *what) -> tfm_status_t {
      if (rc == CUDA_SUCCESS)
        return nullptr;
      return makeStatus(TFM_STATUS_UNAVAILABLE, "rank {} of {}: {}: {}",
                        c->rank, c->size, what, c->drv->describe(rc));
    };
    int count = 0;
    if (tfm_status_t s =
            cuda(c->drv->deviceGetCount(&count), "cannot count the GPUs"))
      return s;
    if (device < 0 || device >= count)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "rank {} of {}: there is no GPU cuda:{}; this "
                        "machine has {}",
                        c->rank, c->size, device, count);
    if (tfm_status_t s =
            cuda(c->drv->deviceGet(&c->device, device), "cannot open the GPU"))
      return s;
    if (tfm_status_t s = cuda(c->drv->primaryCtxRetain(&c->context, c->device),
                              "cannot create a context on the GPU"))
      return s;
    if (tfm_status_t s = cuda(c->drv->ctxSetCurrent(c->context),
                              "cannot use the GPU's context"))
      return s;
    if (tfm_status_t s =
            cuda(c->drv->streamCreate(&c->stream, CU_STREAM_NON_BLOCKING),
                 "cannot create a stream"))
      return s;

    NcclUniqueId id{};
    char message[512] = {0};
    if (c->rank == 0)
      if (checkNccl(*c, c->lib->getUniqueId(&id), "unique id", message,
                    sizeof message))
        return makeStatus(TFM_STATUS_UNAVAILABLE, "{}", message);
    if (bootstrap) {
      if (!meetOverBootstrap(*c, boot, place, id, message, sizeof message))
        return makeStatus(TFM_STATUS_UNAVAILABLE,
                          "rank {} of {}: sharing NCCL's unique id over the "
                          "bootstrap communicator failed: {}",
                          c->rank, c->size, communicatorError(message));
    } else {
      std::vector<char> bytes(reinterpret_cast<char *>(&id),
                              reinterpret_cast<char *>(&id) + sizeof id);
      if (!rendezvous(place, bytes, c->timeoutSeconds, error, &c->watch))
        return makeStatus(TFM_STATUS_UNAVAILABLE, "{}", error);
      if (bytes.size() != sizeof id)
        return makeStatus(TFM_STATUS_UNAVAILABLE,
                          "rank {} of {}: rank 0 sent {} bytes, not NCCL's "
                          "unique id",
                          c->rank, c->size, bytes.size());
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    if (checkNccl(*c, c->lib->commInitRank(&c->comm, c->size, id, c->rank),
                  "initialization", message, sizeof message))
      return makeStatus(TFM_STATUS_UNAVAILABLE, "{}", message);

    tfm_communicator_t made{};
    made.struct_size = sizeof(made);
    made.rank = c->rank;
    made.size = c->size;
    made.all_reduce_sum = allReduceSum;
    made.broadcast = broadcast;
    made.all_gather = allGather;
    made.reduce_scatter_sum = reduceScatterSum;
    made.all_reduce_scaled_sum = allReduceScaledSum;
    made.device_memory = 1;
    made.wait = waitOn;
    if (c->watch)
      made.lagging = lagging;
    made.user = c.release();
    *out = made;
    return nullptr;
  });
}

void tfm_nccl_communicator_destroy(tfm_communicator_t *communicator) {
  if (!communicator || communicator->all_reduce_sum != allReduceSum)
    return;
  delete static_cast<NcclCommunicator *>(communicator->user);
  communicator->user = nullptr;
  communicator->all_reduce_sum = nullptr;
}

} // extern "C"
