//===- Communicator.cpp - tfm_communicator_t over MPI
//----------------------===//
//
// MPI's own collectives, on MPI_COMM_WORLD. Errors return to the caller
// instead of aborting the job (MPI_ERRORS_RETURN), so a session can say
// which exchange failed.
//
// Each rank also tells every other, twice a second from a thread of its
// own and on a communicator of their own, how many collectives it has
// started, so that when an exchange times out the session can name the
// ranks that stopped answering or never reached it (`lagging`, run while
// the exchange waits in MPI). Both need MPI_THREAD_MULTIPLE, which is asked
// for; without it the timeout names no rank.
//
//===----------------------------------------------------------------------===//

#include "tfm/mpi.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

bool initializedHere = false;

/// What each rank last said of itself, as far as this one knows: a thread
/// of its own tells every other rank, twice a second, how many collectives
/// this one has started. A rank that stopped answering hangs or died; one
/// whose count is below this rank's runs behind.
struct Progress {
  MPI_Comm channel = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::atomic<uint64_t> started{0};
  std::vector<uint64_t> heard;
  std::vector<std::chrono::steady_clock::time_point> lastHeard;
  /// Counts on their way: a buffer per message, kept until its send
  /// completes.
  std::deque<std::pair<std::unique_ptr<uint64_t>, MPI_Request>> sending;
  /// The thread and `lagging` share `channel` and the counts.
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread teller;
};
Progress *progress = nullptr;
constexpr int kProgressTag = 1;
constexpr auto kTellEvery = std::chrono::milliseconds(500);
/// Silence this long says a rank no longer runs.
constexpr auto kSilent = 3 * kTellEvery;

/// Takes in the counts the other ranks have sent (holding the lock).
void hear(Progress &p) {
  for (;;) {
    int waiting = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kProgressTag, p.channel, &waiting,
                   &status) != MPI_SUCCESS ||
        !waiting)
      return;
    uint64_t count = 0;
    MPI_Recv(&count, 1, MPI_UINT64_T, status.MPI_SOURCE, kProgressTag,
             p.channel, MPI_STATUS_IGNORE);
    int from = status.MPI_SOURCE;
    p.heard[from] = std::max(p.heard[from], count);
    p.lastHeard[from] = std::chrono::steady_clock::now();
  }
}

/// Tells every other rank this one's count (holding the lock).
void tell(Progress &p) {
  while (!p.sending.empty()) {
    int done = 0;
    MPI_Test(&p.sending.front().second, &done, MPI_STATUS_IGNORE);
    if (!done)
      break;
    p.sending.pop_front();
  }
  for (int r = 0; r < p.size; ++r) {
    if (r == p.rank)
      continue;
    auto count = std::make_unique<uint64_t>(p.started.load());
    MPI_Request request;
    if (MPI_Isend(count.get(), 1, MPI_UINT64_T, r, kProgressTag, p.channel,
                  &request) == MPI_SUCCESS)
      p.sending.emplace_back(std::move(count), request);
  }
}

void keepTelling(Progress &p) {
  std::unique_lock<std::mutex> lock(p.mutex);
  while (!p.stopping) {
    hear(p);
    tell(p);
    p.wake.wait_for(lock, kTellEvery, [&] { return p.stopping; });
  }
}

/// Counts a collective this rank starts; the thread tells the others.
void announce() {
  if (progress)
    ++progress->started;
}

int32_t lagging(void *, char *ranks, size_t size) {
  if (!progress)
    return -1;
  Progress &p = *progress;
  std::lock_guard<std::mutex> lock(p.mutex);
  hear(p);
  auto now = std::chrono::steady_clock::now();
  std::string list;
  for (int r = 0; r < p.size; ++r)
    if (r != p.rank &&
        (p.heard[r] < p.started || now - p.lastHeard[r] > kSilent))
      list += (list.empty() ? "" : ", ") + std::to_string(r);
  std::snprintf(ranks, size, "%s", list.c_str());
  return 0;
}

int report(int rc, const char *what, char *error, size_t size) {
  if (rc == MPI_SUCCESS)
    return 0;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  if (error && size)
    std::snprintf(error, size, "%s: %s", what, text);
  return rc;
}

MPI_Datatype datatypeOf(tfm_dtype_t dtype) {
  switch (dtype) {
  case TFM_DTYPE_F32:
    return MPI_FLOAT;
  case TFM_DTYPE_F64:
    return MPI_DOUBLE;
  case TFM_DTYPE_I64:
    return MPI_INT64_T;
  case TFM_DTYPE_I32:
    return MPI_INT32_T;
  default:
    return MPI_DATATYPE_NULL;
  }
}

// MPI counts are ints: a larger buffer goes in parts.
constexpr uint64_t kMaxPart = INT_MAX / 16;

int allReduceSum(void *, void *data, uint64_t count, tfm_dtype_t dtype,
                 void *stream, char *error, size_t size) {
  announce();
  MPI_Datatype type = datatypeOf(dtype);
  if (type == MPI_DATATYPE_NULL || stream) {
    std::snprintf(error, size, "MPI_Allreduce: %s",
                  stream ? "device memory is not supported"
                         : "an element type MPI does not sum here");
    return -1;
  }
  size_t element = tfm_dtype_size(dtype);
  auto *bytes = static_cast<char *>(data);
  for (uint64_t done = 0; done < count;) {
    uint64_t part = count - done < kMaxPart ? count - done : kMaxPart;
    int rc =
        MPI_Allreduce(MPI_IN_PLACE, bytes + done * element,
                      static_cast<int>(part), type, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
      return report(rc, "MPI_Allreduce", error, size);
    done += part;
  }
  return 0;
}

int broadcast(void *, void *data, uint64_t bytes, int32_t root, void *stream,
              char *error, size_t size) {
  announce();
  if (stream) {
    std::snprintf(error, size, "MPI_Bcast: device memory is not supported");
    return -1;
  }
  auto *p = static_cast<char *>(data);
  for (uint64_t done = 0; done < bytes;) {
    uint64_t part = bytes - done < kMaxPart ? bytes - done : kMaxPart;
    int rc = MPI_Bcast(p + done, static_cast<int>(part), MPI_BYTE, root,
                       MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
      return report(rc, "MPI_Bcast", error, size);
    done += part;
  }
  return 0;
}

int allGather(void *, const void *send, void *receive, uint64_t bytes,
              void *stream, char *error, size_t size) {
  announce();
  if (stream) {
    std::snprintf(error, size, "MPI_Allgather: device memory is not supported");
    return -1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  bool inPlace = send == static_cast<const char *>(receive) + rank * bytes;
  // In parts of each rank's block: a part of every rank lands `bytes`
  // apart, which a type of the part's length and the block's extent says.
  for (uint64_t done = 0; done < bytes;) {
    uint64_t part = bytes - done < kMaxPart ? bytes - done : kMaxPart;
    MPI_Datatype piece, strided;
    MPI_Type_contiguous(static_cast<int>(part), MPI_BYTE, &piece);
    MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(bytes), &strided);
    MPI_Type_commit(&strided);
    int rc = MPI_Allgather(
        inPlace ? MPI_IN_PLACE : static_cast<const char *>(send) + done,
        static_cast<int>(part), MPI_BYTE, static_cast<char *>(receive) + done,
        1, strided, MPI_COMM_WORLD);
    MPI_Type_free(&strided);
    MPI_Type_free(&piece);
    if (rc != MPI_SUCCESS)
      return report(rc, "MPI_Allgather", error, size);
    done += part;
  }
  return 0;
}

int reduceScatterSum(void *, const void *send, void *receive, uint64_t count,
                     tfm_dtype_t dtype, void *stream, char *error,
                     size_t size) {
  announce();
  MPI_Datatype type = datatypeOf(dtype);
  if (type == MPI_DATATYPE_NULL || stream) {
    std::snprintf(error, size, "MPI_Reduce_scatter_block: %s",
                  stream ? "device memory is not supported"
                         : "an element type MPI does not sum here");
    return -1;
  }
  if (count > kMaxPart) {
    std::snprintf(error, size,
                  "MPI_Reduce_scatter_block: %llu elements per rank, more "
                  "than one call takes (use smaller buckets)",
                  static_cast<unsigned long long>(count));
    return -1;
  }
  // In place, MPI reads every block from `receive` and writes the sum to
  // its start.
  int rc = MPI_Reduce_scatter_block(send == receive ? MPI_IN_PLACE : send,
                                    receive, static_cast<int>(count), type,
                                    MPI_SUM, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS
             ? 0
             : report(rc, "MPI_Reduce_scatter_block", error, size);
}

} // namespace

extern "C" {

int tfm_mpi_communicator(int *argc, char ***argv, tfm_communicator_t *out,
                         char *error, size_t size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // A session's exchange thread waits in MPI while the step computes on
    // the same cores; busy polling there takes them from the step (W5 on 2
    // processes of 1 thread: 1.30 s a step polling, 1.17 s yielding).
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
    // Multiple, for `lagging` beside a collective; serialized is enough
    // for the rest.
    if (int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided))
      return report(rc, "MPI_Init_thread", error, size);
    initializedHere = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    std::snprintf(error, size,
                  "MPI gives thread support level %d; a session's exchanges "
                  "need MPI_THREAD_SERIALIZED (initialize MPI with "
                  "MPI_Init_thread)",
                  provided);
    return -1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, worldSize = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  std::memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  out->rank = rank;
  out->size = worldSize;
  out->all_reduce_sum = allReduceSum;
  out->broadcast = broadcast;
  out->all_gather = allGather;
  out->reduce_scatter_sum = reduceScatterSum;
  if (provided == MPI_THREAD_MULTIPLE && !progress && worldSize > 1) {
    auto *p = new Progress;
    p->rank = rank;
    p->size = worldSize;
    p->heard.assign(worldSize, 0);
    p->lastHeard.assign(worldSize, std::chrono::steady_clock::now());
    if (MPI_Comm_dup(MPI_COMM_WORLD, &p->channel) == MPI_SUCCESS) {
      progress = p;
      p->teller = std::thread([p] { keepTelling(*p); });
    } else {
      delete p;
    }
  }
  if (progress)
    out->lagging = lagging;
  return 0;
}

void tfm_mpi_finalize(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (progress && !finalized) {
    // The last counts need not arrive: sends are let go (they complete on
    // their own, so their buffers stay for the process), and what has
    // arrived is taken in. Waiting for the others could hang a rank whose
    // job failed.
    static std::deque<std::unique_ptr<uint64_t>> kept;
    {
      std::lock_guard<std::mutex> lock(progress->mutex);
      progress->stopping = true;
    }
    progress->wake.notify_all();
    progress->teller.join();
    hear(*progress);
    for (auto &[count, request] : progress->sending) {
      MPI_Request_free(&request);
      kept.push_back(std::move(count));
    }
    MPI_Comm_free(&progress->channel);
    delete progress;
    progress = nullptr;
  }
  if (initializedHere && !finalized)
    MPI_Finalize();
}

void tfm_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

} // extern "C"
