/*===- fake_cuda_driver.c - A CUDA driver without a GPU, for tests --------===*\
|*                                                                            *|
|* CI has no GPU, so the runtime's CUDA device is tested against this        *|
|* stand-in for libcuda.so.1 (TFM_CUDA_DRIVER names it). Memory is host      *|
|* memory; launches run nothing, but each is checked against the PTX the     *|
|* session loaded (the kernel exists as an .entry of the module) and logged  *|
|* with its grid and block. A stream capture records launches into a graph, *|
|* whose launch logs them again (and a line per capture and replay). Copies *|
|* between device buffers and the events that order streams are logged too, *|
|* and so are the tensor maps that cuTensorMapEncodeTiled encodes.          *|
|* What the machine looks like comes from the environment:                  *|
|*   TFM_FAKE_CUDA_GPUS         the number of GPUs (1); 0 fails cuInit       *|
|*   TFM_FAKE_CUDA_SM           the compute capability, as 90 (90)           *|
|*   TFM_FAKE_CUDA_MEMORY       bytes the GPU holds (1 GiB)                  *|
|*   TFM_FAKE_CUDA_FAIL_LAUNCH  a kernel whose launch fails                  *|
|*   TFM_FAKE_CUDA_LOG          a file that receives a line per launch       *|
|* The stand-in NCCL holds the streams (fakeCudaHold) while a collective    *|
|* of its spins on a rank that never comes: cuStreamQuery then says        *|
|* "not ready", and cuStreamSynchronize, which on a GPU would wait forever, *|
|* fails at once with a line in the log, so a test sees the wait.           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
enum {
  OK = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  NO_DEVICE = 100,
  INVALID_DEVICE = 101,
  INVALID_PTX = 218,
  NOT_FOUND = 500,
  NOT_READY = 600,
  LAUNCH_FAILED = 719,
  STREAM_CAPTURE_UNSUPPORTED = 900,
};

static long envLong(const char *name, long fallback) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : fallback;
}

static long long used;

/* The allocations made, so cuPointerGetAttribute tells device memory from
 * anything else, as the driver does. */
struct Allocation {
  unsigned long long base;
  size_t bytes;
  struct Allocation *next;
};
static struct Allocation *allocations;

/* Every allocation carries its size in front, so frees give memory back.
 * It starts filled with 0x7f bytes: kernels do not run here, and a run-time
 * index check then reads "first failure at a position past the end", so
 * the run goes on as one with valid indices. */
EXPORT CUresult cuMemAlloc_v2(unsigned long long *p, size_t bytes) {
  long long capacity = envLong("TFM_FAKE_CUDA_MEMORY", 1L << 30);
  if (used + (long long)bytes > capacity)
    return OUT_OF_MEMORY;
  /* As the driver's, every allocation is aligned to 256 bytes. */
  char *block = aligned_alloc(256, (bytes + 256 + 255) / 256 * 256);
  struct Allocation *a = malloc(sizeof *a);
  if (!block || !a) {
    free(block);
    free(a);
    return OUT_OF_MEMORY;
  }
  memcpy(block, &bytes, sizeof bytes);
  memset(block + 256, 0x7f, bytes);
  used += (long long)bytes;
  *p = (unsigned long long)(size_t)(block + 256);
  a->base = *p;
  a->bytes = bytes;
  a->next = allocations;
  allocations = a;
  return OK;
}
EXPORT CUresult cuMemFree_v2(unsigned long long p) {
  for (struct Allocation **a = &allocations; *a; a = &(*a)->next)
    if ((*a)->base == p) {
      struct Allocation *gone = *a;
      *a = gone->next;
      free(gone);
      break;
    }
  char *block = (char *)(size_t)p - 256;
  size_t bytes;
  memcpy(&bytes, block, sizeof bytes);
  used -= (long long)bytes;
  free(block);
  return OK;
}

/* The ordinal (9), start (11) and size (12) of the allocation holding p. */
EXPORT CUresult cuPointerGetAttribute(void *data, int attribute,
                                      unsigned long long p) {
  for (struct Allocation *a = allocations; a; a = a->next)
    if (p >= a->base && p < a->base + (a->bytes ? a->bytes : 1)) {
      switch (attribute) {
      case 9:
        *(int *)data = 0;
        return OK;
      case 11:
        *(unsigned long long *)data = a->base;
        return OK;
      case 12:
        *(size_t *)data = a->bytes;
        return OK;
      default:
        return INVALID_VALUE;
      }
    }
  return INVALID_VALUE;
}

EXPORT CUresult cuMemAllocHost_v2(void **p, size_t bytes) {
  /* Page-locked memory starts at a page, as the driver's does. */
  if (posix_memalign(p, 4096, bytes ? bytes : 1) != 0)
    *p = NULL;
  return *p ? OK : OUT_OF_MEMORY;
}

static void logLine(const char *line);

/* A tensor map: refused as the driver documents it refuses one (the map
 * 64-byte aligned, the address and strides in 16-byte units, boxes of at
 * most 256), logged with what it describes, and written as the words
 * address, type, rank, swizzle, then the dims and the box, which a test
 * reads back from where the runtime copied it. */
EXPORT CUresult cuTensorMapEncodeTiled(
    void *map, int type, unsigned rank, void *address,
    const unsigned long long *dims, const unsigned long long *strides,
    const unsigned *box, const unsigned *elementStrides, int interleave,
    int swizzle, int l2, int oob) {
  if ((size_t)map % 64 || (size_t)address % 16 || rank < 1 || rank > 5)
    return INVALID_VALUE;
  for (unsigned i = 0; i < rank; ++i)
    if (box[i] < 1 || box[i] > 256 || elementStrides[i] != 1 ||
        (i + 1 < rank && strides[i] % 16))
      return INVALID_VALUE;
  char line[256];
  int n = snprintf(line, sizeof line, "tensor map type %d rank %u dims", type,
                   rank);
  for (unsigned i = 0; i < rank; ++i)
    n += snprintf(line + n, sizeof line - n, " %llu", dims[i]);
  n += snprintf(line + n, sizeof line - n, " strides");
  for (unsigned i = 0; i + 1 < rank; ++i)
    n += snprintf(line + n, sizeof line - n, " %llu", strides[i]);
  n += snprintf(line + n, sizeof line - n, " box");
  for (unsigned i = 0; i < rank; ++i)
    n += snprintf(line + n, sizeof line - n, " %u", box[i]);
  snprintf(line + n, sizeof line - n, " swizzle %d\n", swizzle);
  logLine(line);
  long long *words = map;
  memset(map, 0, 128);
  words[0] = (long long)(size_t)address;
  words[1] = type;
  words[2] = rank;
  words[3] = swizzle;
  for (unsigned i = 0; i < rank; ++i) {
    words[4 + i] = (long long)dims[i];
    words[9 + i] = box[i];
  }
  return OK;
}
EXPORT CUresult cuMemFreeHost(void *p) {
  free(p);
  return OK;
}

EXPORT CUresult cuInit(unsigned flags) {
  return envLong("TFM_FAKE_CUDA_GPUS", 1) > 0 ? OK : NO_DEVICE;
}
EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 12040;
  return OK;
}
EXPORT CUresult cuGetErrorName(CUresult rc, const char **name) {
  switch (rc) {
  case OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
  case NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; return OK;
  case INVALID_PTX: *name = "CUDA_ERROR_INVALID_PTX"; return OK;
  case NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return OK;
  case LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; return OK;
  case STREAM_CAPTURE_UNSUPPORTED:
    *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    return OK;
  default: *name = "CUDA_ERROR_INVALID_VALUE"; return OK;
  }
}
EXPORT CUresult cuGetErrorString(CUresult rc, const char **text) {
  *text = rc == LAUNCH_FAILED ? "unspecified launch failure" : "fake";
  return OK;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
  *n = (int)envLong("TFM_FAKE_CUDA_GPUS", 1);
  return OK;
}
EXPORT CUresult cuDeviceGet(int *d, int ordinal) {
  if (ordinal < 0 || ordinal >= envLong("TFM_FAKE_CUDA_GPUS", 1))
    return INVALID_DEVICE;
  *d = ordinal;
  return OK;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, int attribute, int d) {
  long sm = envLong("TFM_FAKE_CUDA_SM", 90);
  switch (attribute) {
  case 75: *v = (int)(sm / 10); return OK;
  case 76: *v = (int)(sm % 10); return OK;
  case 97: *v = 227 * 1024; return OK;
  default: return INVALID_VALUE;
  }
}
EXPORT CUresult cuDeviceGetName(char *name, int len, int d) {
  snprintf(name, (size_t)len, "Fake GPU %d", d);
  return OK;
}

static int context;
EXPORT CUresult cuDevicePrimaryCtxRetain(void **c, int d) {
  *c = &context;
  return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int d) { return OK; }
EXPORT CUresult cuCtxSetCurrent(void *c) { return OK; }

/* A module is its PTX; a function is a kernel name inside it. */
/* As the driver does, a module owns its functions: unloading it frees them. */
struct Function {
  char name[256];
  struct Function *next;
};
struct Module {
  char *ptx;
  struct Function *functions;
};
EXPORT CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n,
                                   int *options, void **values) {
  const char *ptx = image;
  if (!strstr(ptx, ".version") || !strstr(ptx, ".target")) {
    for (unsigned i = 0; i + 1 < n; ++i)
      if (options[i] == 5 && options[i + 1] == 6)
        snprintf(values[i], (size_t)values[i + 1], "not PTX");
    return INVALID_PTX;
  }
  // TFM_FAKE_CUDA_JIT_INFO: what the JIT's info log says of the module.
  const char *info = getenv("TFM_FAKE_CUDA_JIT_INFO");
  for (unsigned i = 0; info && i + 1 < n; ++i)
    if (options[i] == 3 && options[i + 1] == 4)
      snprintf(values[i], (size_t)values[i + 1], "%s", info);
  struct Module *mod = calloc(1, sizeof *mod);
  mod->ptx = strdup(ptx);
  *m = mod;
  return OK;
}
EXPORT CUresult cuModuleUnload(void *m) {
  struct Module *mod = m;
  while (mod->functions) {
    struct Function *next = mod->functions->next;
    free(mod->functions);
    mod->functions = next;
  }
  free(mod->ptx);
  free(mod);
  return OK;
}
EXPORT CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
  struct Module *mod = m;
  char entry[300];
  snprintf(entry, sizeof entry, ".entry %s(", name);
  if (!strstr(mod->ptx, entry))
    return NOT_FOUND;
  struct Function *fn = malloc(sizeof *fn);
  snprintf(fn->name, sizeof fn->name, "%s", name);
  fn->next = mod->functions;
  mod->functions = fn;
  *f = fn;
  return OK;
}
EXPORT CUresult cuFuncSetAttribute(void *f, int attribute, int value) {
  return OK;
}
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

/* A launch as a graph keeps it, or a library's work on the stream
 * (fake_cuda_record). */
struct Launch {
  struct Function *fn;
  unsigned grid[3], block[3], shared;
  void (*host)(void *);
  void *arg;
};
struct Graph {
  struct Launch *launches;
  size_t count;
};
static struct Graph *capturing;

static int append(const struct Launch *l) {
  struct Launch *grown =
      realloc(capturing->launches, (capturing->count + 1) * sizeof *l);
  if (!grown)
    return 0;
  capturing->launches = grown;
  capturing->launches[capturing->count++] = *l;
  return 1;
}

static void logLaunch(const struct Launch *l) {
  char line[512];
  snprintf(line, sizeof line,
           "launch %s grid %u,%u,%u block %u,%u,%u shared %u\n", l->fn->name,
           l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
           l->block[2], l->shared);
  logLine(line);
}

EXPORT CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                               unsigned bx, unsigned by, unsigned bz,
                               unsigned shared, void *stream, void **params,
                               void **extra) {
  struct Function *fn = f;
  const char *fail = getenv("TFM_FAKE_CUDA_FAIL_LAUNCH");
  if (fail && strcmp(fail, fn->name) == 0)
    return LAUNCH_FAILED;
  struct Launch l = {fn, {gx, gy, gz}, {bx, by, bz}, shared, NULL, NULL};
  if (capturing)
    return append(&l) ? OK : OUT_OF_MEMORY;
  logLaunch(&l);
  return OK;
}

/* For the stand-in cuBLASLt: while a graph is recorded, `fn(arg)` joins it
 * (the graph owns `arg`) and runs at each replay; returns 0 otherwise, and
 * the caller runs it now. */
EXPORT int fake_cuda_record(void (*fn)(void *), void *arg) {
  struct Launch l = {NULL, {0, 0, 0}, {0, 0, 0}, 0, fn, arg};
  return capturing && append(&l);
}
EXPORT CUresult cuStreamBeginCapture_v2(void *s, int mode) {
  if (capturing)
    return INVALID_VALUE;
  capturing = calloc(1, sizeof *capturing);
  return capturing ? OK : OUT_OF_MEMORY;
}
EXPORT CUresult cuStreamEndCapture(void *s, void **graph) {
  if (!capturing)
    return INVALID_VALUE;
  size_t host = 0;
  for (size_t i = 0; i < capturing->count; ++i)
    host += capturing->launches[i].host != NULL;
  char line[96];
  snprintf(line, sizeof line,
           "graph recorded %zu launches, %zu library calls\n",
           capturing->count - host, host);
  logLine(line);
  *graph = capturing;
  capturing = NULL;
  return OK;
}
EXPORT CUresult cuGraphInstantiateWithFlags(void **exec, void *graph,
                                            unsigned long long flags) {
  const struct Graph *g = graph;
  struct Graph *copy = calloc(1, sizeof *copy);
  if (!copy)
    return OUT_OF_MEMORY;
  copy->launches = malloc((g->count ? g->count : 1) * sizeof *g->launches);
  if (!copy->launches) {
    free(copy);
    return OUT_OF_MEMORY;
  }
  memcpy(copy->launches, g->launches, g->count * sizeof *g->launches);
  copy->count = g->count;
  *exec = copy;
  return OK;
}
/* A recorded graph's host work belongs to the executable graph made from
 * it (a graph discarded unmade leaks it, which a test tolerates). */
static void freeGraph(struct Graph *g, int withHostWork) {
  for (size_t i = 0; withHostWork && i < g->count; ++i)
    free(g->launches[i].arg);
  free(g->launches);
  free(g);
}
EXPORT CUresult cuGraphDestroy(void *graph) {
  freeGraph(graph, 0);
  return OK;
}
EXPORT CUresult cuGraphExecDestroy(void *exec) {
  freeGraph(exec, 1);
  return OK;
}
EXPORT CUresult cuGraphLaunch(void *exec, void *s) {
  const struct Graph *g = exec;
  logLine("graph replay\n");
  for (size_t i = 0; i < g->count; ++i) {
    const struct Launch *l = &g->launches[i];
    if (l->host)
      l->host(l->arg);
    else
      logLaunch(l);
  }
  return OK;
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src,
                                     size_t bytes, void *stream) {
  memcpy((void *)(size_t)dst, src, bytes);
  return OK;
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src,
                                     size_t bytes, void *stream) {
  /* The host cannot wait on a copy that only a replay makes. */
  if (capturing)
    return STREAM_CAPTURE_UNSUPPORTED;
  memcpy(dst, (const void *)(size_t)src, bytes);
  return OK;
}
/* Each stream takes the first free slot and is named by it ("stream 1"
 * is a lone session's own), so a log says which stream each event and
 * wait is on; work on all of them runs as it is queued. */
enum { maxStreams = 8 };
static int streams[maxStreams], streamInUse[maxStreams];
EXPORT CUresult cuStreamCreate(void **s, unsigned flags) {
  int i = 0;
  while (i < maxStreams - 1 && streamInUse[i])
    ++i;
  streamInUse[i] = 1;
  *s = &streams[i];
  return OK;
}
EXPORT CUresult cuStreamDestroy_v2(void *s) {
  int *p = s;
  if (p >= streams && p < streams + maxStreams)
    streamInUse[p - streams] = 0;
  return OK;
}
static int held;
EXPORT void fakeCudaHold(int hold) { held = hold; }
EXPORT CUresult cuStreamSynchronize(void *s) {
  if (held) {
    logLine("synchronize would wait forever on a collective that never "
            "finishes\n");
    return LAUNCH_FAILED;
  }
  return capturing ? STREAM_CAPTURE_UNSUPPORTED : OK;
}
EXPORT CUresult cuStreamQuery(void *s) {
  if (capturing)
    return STREAM_CAPTURE_UNSUPPORTED;
  return held ? NOT_READY : OK;
}

/* Copies between device buffers, and the events that order the session's
 * stream with a caller's, are logged: tests check where a run's tensors
 * went. */
EXPORT CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst,
                                     unsigned long long src, size_t bytes,
                                     void *stream) {
  /* The runtime copies a caller's tensors outside a recording: a graph
   * would replay the addresses of this run's tensors on the next run's. */
  if (capturing)
    return STREAM_CAPTURE_UNSUPPORTED;
  char line[96];
  snprintf(line, sizeof line, "copy %zu bytes device to device\n", bytes);
  logLine(line);
  memmove((void *)(size_t)dst, (const void *)(size_t)src, bytes);
  return OK;
}
static int event;
EXPORT CUresult cuEventCreate(void **e, unsigned flags) {
  *e = &event;
  return OK;
}
EXPORT CUresult cuEventDestroy_v2(void *e) { return OK; }
/* "stream N" for a stream of slot N that cuStreamCreate gave; any other is a
 * caller's. */
static const char *streamName(void *s) {
  static char name[32];
  int *p = s;
  if (p < streams || p >= streams + maxStreams)
    return "a caller's stream";
  snprintf(name, sizeof name, "stream %d", (int)(p - streams) + 1);
  return name;
}
EXPORT CUresult cuEventRecord(void *e, void *s) {
  char line[96];
  snprintf(line, sizeof line, "event recorded on %s\n", streamName(s));
  logLine(line);
  return OK;
}
EXPORT CUresult cuStreamWaitEvent(void *s, void *e, unsigned flags) {
  char line[96];
  snprintf(line, sizeof line, "%s waits on the event\n", streamName(s));
  logLine(line);
  return OK;
}
