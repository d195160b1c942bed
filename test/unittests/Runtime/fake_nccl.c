/*===- fake_nccl.c - NCCL without a GPU, for tests ------------------------===*\
|*                                                                            *|
|* A stand-in for libnccl.so.2 (TFM_NCCL_LIBRARY names it), beside the      *|
|* stand-in driver, whose device memory is host memory. A communicator of   *|
|* one rank computes what NCCL documents (a sum of one is the input, times *|
|* a PreMulSum's scale); one of several ranks only initializes, and its    *|
|* collectives fail, since nothing joins the processes here. Each call is  *|
|* logged to TFM_FAKE_CUDA_LOG, in order with the driver's lines:          *|
|*   nccl init rank R of N id ID                                            *|
|*   nccl all_reduce COUNT type T op OP [scale S] [host|device] stream      *|
|* TFM_FAKE_NCCL_FAIL names a call ("all_reduce", "init") that fails.        *|
|* TFM_FAKE_NCCL_HANG=1 makes every collective, of one rank or several,     *|
|* spin as NCCL's does on a rank that never comes: the stand-in driver's    *|
|* streams are held (fakeCudaHold) until ncclCommAbort. =remote does too,  *|
|* and ncclCommGetAsyncError reports a remote error meanwhile, as NCCL     *|
|* does when a peer's connection breaks. A call's name ("all_reduce", or   *|
|* "all_reduce_scaled" for one with a PreMulSum) makes only it spin.       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int ncclResult_t;
enum {
  ncclSuccess = 0,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6
};
typedef struct {
  char internal[128];
} ncclUniqueId;
struct Comm {
  int rank, size;
};
typedef struct Comm *ncclComm_t;

/* PreMulSum operations, by their number minus the first. */
enum { firstOp = 5, maxOps = 64 };
static float scales[maxOps];
static int inUse[maxOps];

static void logLine(const char *line) {
  const char *log = getenv("TFM_FAKE_CUDA_LOG");
  if (!log || !*log)
    return;
  FILE *out = fopen(log, "a");
  if (out) {
    fputs(line, out);
    fclose(out);
  }
}

static int failing(const char *call) {
  const char *f = getenv("TFM_FAKE_NCCL_FAIL");
  return f && strcmp(f, call) == 0;
}

static const char *hanging(void) {
  const char *h = getenv("TFM_FAKE_NCCL_HANG");
  return h && *h ? h : NULL;
}

/* Whether a collective spins: then the driver's streams never drain. */
static int held;
static void hold(int on) {
  held = on;
  /* The stand-in driver the runtime opened: the same library, found
   * again by its name. */
  const char *path = getenv("TFM_CUDA_DRIVER");
  void *driver = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  void (*fakeCudaHold)(int) =
      driver ? (void (*)(int))dlsym(driver, "fakeCudaHold") : NULL;
  if (fakeCudaHold)
    fakeCudaHold(on);
  if (driver)
    dlclose(driver);
}

static size_t sizeOf(int type) {
  switch (type) {
  case 0:
  case 1:
    return 1;
  case 6:
  case 9:
    return 2;
  case 4:
  case 5:
  case 8:
    return 8;
  default:
    return 4;
  }
}

EXPORT ncclResult_t ncclGetVersion(int *version) {
  *version = 22105;
  return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t rc) {
  switch (rc) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  default:
    return "unhandled system error";
  }
}

EXPORT const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return "the stand-in NCCL runs one rank alone";
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "fake-%ld", (long)getpid());
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int size,
                                     ncclUniqueId id, int rank) {
  if (failing("init") || rank < 0 || rank >= size)
    return ncclInvalidArgument;
  struct Comm *c = malloc(sizeof *c);
  c->rank = rank;
  c->size = size;
  *comm = c;
  char line[256];
  snprintf(line, sizeof line, "nccl init rank %d of %d id %.32s\n", rank, size,
           size > 1 ? id.internal : "-");
  logLine(line);
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  logLine("nccl destroy\n");
  free(comm);
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  logLine("nccl abort\n");
  hold(0);
  free(comm);
  return ncclSuccess;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm,
                                          ncclResult_t *state) {
  (void)comm;
  const char *h = hanging();
  *state =
      held && h && strcmp(h, "remote") == 0 ? ncclRemoteError : ncclSuccess;
  return ncclSuccess;
}

EXPORT ncclResult_t ncclRedOpCreatePreMulSum(int *op, void *scalar, int type,
                                             int residence, ncclComm_t comm) {
  (void)comm;
  if (type != 7 || residence != 1)
    return ncclInvalidArgument; /* what the runtime asks for: f32, host */
  for (int i = 0; i < maxOps; ++i)
    if (!inUse[i]) {
      inUse[i] = 1;
      memcpy(&scales[i], scalar, sizeof(float));
      *op = firstOp + i;
      return ncclSuccess;
    }
  return ncclInvalidUsage;
}

EXPORT ncclResult_t ncclRedOpDestroy(int op, ncclComm_t comm) {
  (void)comm;
  if (op < firstOp || op >= firstOp + maxOps || !inUse[op - firstOp])
    return ncclInvalidArgument;
  inUse[op - firstOp] = 0;
  return ncclSuccess;
}

/* One rank's collective: NCCL's result is the input, scaled by a
 * PreMulSum's scale. */
static ncclResult_t alone(const char *what, ncclComm_t comm, const void *send,
                          void *receive, size_t count, int type, int op,
                          void *stream) {
  char line[256];
  int n = snprintf(line, sizeof line, "nccl %s %zu type %d op %d", what, count,
                   type, op);
  if (op >= firstOp)
    n += snprintf(line + n, sizeof line - n, " scale %g", scales[op - firstOp]);
  snprintf(line + n, sizeof line - n, " %s\n",
           stream ? "on a stream" : "without a stream");
  logLine(line);
  if (failing(what))
    return ncclInvalidUsage;
  const char *h = hanging();
  if (h && (strcmp(h, "1") == 0 || strcmp(h, "remote") == 0 ||
            strcmp(h, what) == 0 ||
            (op >= firstOp && strcmp(h, "all_reduce_scaled") == 0))) {
    hold(1);
    return ncclSuccess;
  }
  if (comm->size != 1)
    return ncclInvalidUsage;
  if (op >= firstOp && (op - firstOp >= maxOps || !inUse[op - firstOp]))
    return ncclInvalidArgument;
  size_t bytes = count * sizeOf(type);
  if (receive != send)
    memmove(receive, send, bytes);
  if (op >= firstOp) {
    if (type != 7)
      return ncclInvalidArgument;
    float *x = receive;
    for (size_t i = 0; i < count; ++i)
      x[i] *= scales[op - firstOp];
  }
  return ncclSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void *send, void *receive, size_t count,
                                  int type, int op, ncclComm_t comm,
                                  void *stream) {
  return alone("all_reduce", comm, send, receive, count, type, op, stream);
}

EXPORT ncclResult_t ncclBroadcast(const void *send, void *receive, size_t count,
                                  int type, int root, ncclComm_t comm,
                                  void *stream) {
  if (root != 0)
    return ncclInvalidArgument;
  return alone("broadcast", comm, send, receive, count, type, 0, stream);
}

EXPORT ncclResult_t ncclAllGather(const void *send, void *receive, size_t count,
                                  int type, ncclComm_t comm, void *stream) {
  return alone("all_gather", comm, send, receive, count, type, 0, stream);
}

EXPORT ncclResult_t ncclReduceScatter(const void *send, void *receive,
                                      size_t count, int type, int op,
                                      ncclComm_t comm, void *stream) {
  return alone("reduce_scatter", comm, send, receive, count, type, op, stream);
}
