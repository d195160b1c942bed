//===- Communicator.cpp - tfm_communicator_t over MPI
//----------------------===//
//
// MPI's own collectives, on MPI_COMM_WORLD. Errors return to the caller
// instead of aborting the job (MPI_ERRORS_RETURN), so a session can say
// which exchange failed.
//
//===----------------------------------------------------------------------===//

#include "tfm/mpi.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool initializedHere = false;

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
    if (int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided))
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
  return 0;
}

void tfm_mpi_finalize(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initializedHere && !finalized)
    MPI_Finalize();
}

void tfm_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

} // extern "C"
