/*===- fake_cublaslt.c - cuBLASLt without a GPU, for tests
-----------------===*\
|*                                                                            *|
|* CI has no GPU, so the runtime's GEMMs through cuBLASLt are tested against *|
|* this stand-in (TFM_CUBLASLT names it). It computes what the library's     *|
|* documentation says a call computes, on host memory (the stand-in driver's *|
|* device memory is host memory): column-major matrices with a leading       *|
|* dimension, op() transposes, strided batches, alpha and beta, and the      *|
|* bias, ReLU and GELU (tanh) epilogues, f32 or 16-bit (bf16, f16) A and B   *|
|* with an f32 C and D. It refuses what the library refuses: ld < rows, an   *|
|* operand less aligned than the algorithm was chosen for, mismatched        *|
|* shapes, A and B of two types, 16-bit operands with a compute type that    *|
|* rounds again. Environment:                                                *|
|*   TFM_FAKE_CUBLASLT_LOG   a file that receives a line per call            *|
|*   TFM_FAKE_CUBLASLT_FAIL  "heuristic" or "matmul": that call fails        *|
|* While the stand-in driver (TFM_CUDA_DRIVER) records a graph, a matmul     *|
|* joins it and runs at each replay, as on a capturing stream.               *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int Status;
enum { OK = 0, NOT_INITIALIZED = 1, ALLOC_FAILED = 3, INVALID_VALUE = 7,
       NOT_SUPPORTED = 15 };

typedef struct { int dummy; } Handle;
typedef struct {
  int compute, scale, transa, transb, epilogue, biasType;
  const float *bias;
} Op;
typedef struct {
  int type;
  uint64_t rows, cols;
  int64_t ld, batchStride;
  int32_t batch;
} Layout;
typedef struct { uint64_t workspace; uint32_t align[4]; } Pref;
typedef struct { uint64_t data[8]; } Algo;
typedef struct {
  Algo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
} Heuristic;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void logf_(const char *fmt, ...) {
  const char *path = getenv("TFM_FAKE_CUBLASLT_LOG");
  if (!path || !*path)
    return;
  FILE *f = fopen(path, "a");
  if (!f)
    return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

static int failing(const char *what) {
  const char *v = getenv("TFM_FAKE_CUBLASLT_FAIL");
  return v && !strcmp(v, what);
}

EXPORT Status cublasLtCreate(Handle **h) {
  *h = calloc(1, sizeof(Handle));
  return *h ? OK : ALLOC_FAILED;
}
EXPORT Status cublasLtDestroy(Handle *h) {
  free(h);
  return OK;
}
EXPORT size_t cublasLtGetVersion(void) { return 130002; }
EXPORT const char *cublasLtGetStatusName(Status s) {
  switch (s) {
  case OK: return "CUBLAS_STATUS_SUCCESS";
  case INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  default: return "CUBLAS_STATUS_UNKNOWN";
  }
}
EXPORT const char *cublasLtGetStatusString(Status s) {
  return s == NOT_SUPPORTED ? "the functionality requested is not supported"
                            : "";
}

EXPORT Status cublasLtMatmulDescCreate(Op **op, int compute, int scale) {
  /* f32 scaling with the f32 compute types only. */
  if (scale != 0 || (compute != 68 && compute != 74 && compute != 75 &&
                     compute != 77))
    return INVALID_VALUE;
  *op = calloc(1, sizeof(Op));
  (*op)->compute = compute;
  (*op)->epilogue = 1;
  logf_("matmulDescCreate compute=%d", compute);
  return OK;
}
EXPORT Status cublasLtMatmulDescDestroy(Op *op) {
  free(op);
  return OK;
}
EXPORT Status cublasLtMatmulDescSetAttribute(Op *op, int attr, const void *buf,
                                             size_t size) {
  int32_t v32 = 0;
  if (size == 4)
    memcpy(&v32, buf, 4);
  switch (attr) {
  case 3: if (size != 4) return INVALID_VALUE; op->transa = v32; break;
  case 4: if (size != 4) return INVALID_VALUE; op->transb = v32; break;
  case 7: if (size != 4) return INVALID_VALUE; op->epilogue = v32; break;
  case 8:
    if (size != sizeof(void *)) return INVALID_VALUE;
    memcpy(&op->bias, buf, sizeof(void *));
    return OK; /* set at every run: not logged */
  case 26: if (size != 4) return INVALID_VALUE; op->biasType = v32; break;
  default: return INVALID_VALUE;
  }
  logf_("matmulDescSetAttribute %d=%d", attr, v32);
  return OK;
}

EXPORT Status cublasLtMatrixLayoutCreate(Layout **l, int type, uint64_t rows,
                                         uint64_t cols, int64_t ld) {
  /* CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF */
  if ((type != 0 && type != 2 && type != 14) || ld < (int64_t)rows)
    return INVALID_VALUE;
  *l = calloc(1, sizeof(Layout));
  (*l)->type = type;
  (*l)->rows = rows;
  (*l)->cols = cols;
  (*l)->ld = ld;
  (*l)->batch = 1;
  logf_("matrixLayoutCreate type=%d %llux%llu ld=%lld", type,
        (unsigned long long)rows, (unsigned long long)cols, (long long)ld);
  return OK;
}
EXPORT Status cublasLtMatrixLayoutDestroy(Layout *l) {
  free(l);
  return OK;
}
EXPORT Status cublasLtMatrixLayoutSetAttribute(Layout *l, int attr,
                                               const void *buf, size_t size) {
  if (attr == 5 && size == 4) {
    memcpy(&l->batch, buf, 4);
    logf_("matrixLayoutSetAttribute batch=%d", l->batch);
    return OK;
  }
  if (attr == 6 && size == 8) {
    memcpy(&l->batchStride, buf, 8);
    logf_("matrixLayoutSetAttribute batchStride=%lld",
          (long long)l->batchStride);
    return OK;
  }
  return INVALID_VALUE;
}

EXPORT Status cublasLtMatmulPreferenceCreate(Pref **p) {
  *p = calloc(1, sizeof(Pref));
  for (int i = 0; i < 4; ++i)
    (*p)->align[i] = 256;
  return OK;
}
EXPORT Status cublasLtMatmulPreferenceDestroy(Pref *p) {
  free(p);
  return OK;
}
EXPORT Status cublasLtMatmulPreferenceSetAttribute(Pref *p, int attr,
                                                   const void *buf,
                                                   size_t size) {
  if (attr == 1 && size == 8) {
    memcpy(&p->workspace, buf, 8);
    return OK;
  }
  if (attr >= 5 && attr <= 8 && size == 4) {
    memcpy(&p->align[attr - 5], buf, 4);
    return OK;
  }
  return INVALID_VALUE;
}

/* op(X)'s rows and columns. */
static void opShape(const Layout *l, int trans, uint64_t *r, uint64_t *c) {
  *r = trans ? l->cols : l->rows;
  *c = trans ? l->rows : l->cols;
}

static Status checkShapes(const Op *op, const Layout *a, const Layout *b,
                          const Layout *c, const Layout *d) {
  uint64_t am, ak, bk, bn;
  opShape(a, op->transa, &am, &ak);
  opShape(b, op->transb, &bk, &bn);
  if (ak != bk || am != d->rows || bn != d->cols || c->rows != d->rows ||
      c->cols != d->cols || c->ld != d->ld)
    return INVALID_VALUE;
  if (a->batch != d->batch || b->batch != d->batch || c->batch != d->batch)
    return INVALID_VALUE;
  /* 16-bit A and B multiply as they are, under CUBLAS_COMPUTE_32F; C and
   * D are f32 here. */
  if (a->type != b->type || c->type != 0 || d->type != 0 ||
      (a->type != 0 && op->compute != 68))
    return NOT_SUPPORTED;
  return OK;
}

EXPORT Status cublasLtMatmulAlgoGetHeuristic(
    Handle *h, Op *op, Layout *a, Layout *b, Layout *c, Layout *d, Pref *pref,
    int requested, Heuristic *results, int *found) {
  logf_("algoGetHeuristic align=%u,%u,%u,%u workspace=%llu", pref->align[0],
        pref->align[1], pref->align[2], pref->align[3],
        (unsigned long long)pref->workspace);
  if (failing("heuristic"))
    return NOT_SUPPORTED;
  Status s = checkShapes(op, a, b, c, d);
  if (s != OK)
    return s;
  memset(results, 0, sizeof *results);
  /* The "algorithm" remembers the alignments it was chosen for. */
  for (int i = 0; i < 4; ++i)
    results->algo.data[i] = pref->align[i];
  results->workspaceSize = pref->workspace < 4096 ? pref->workspace : 4096;
  results->state = OK;
  results->wavesCount = 1.0f;
  *found = requested > 0 ? 1 : 0;
  return OK;
}

static uint32_t alignmentOf(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uint32_t v = 256;
  while (v > 1 && a % v)
    v /= 2;
  return v;
}

static float bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
  memcpy(&x, &u, 4);
  return x;
}

/* An IEEE half's value. */
static float fromF16(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0    ? ldexpf((float)m, -24)
            : e == 31 ? (m ? NAN : INFINITY)
                      : ldexpf((float)(m | 1024), e - 25);
  return h & 0x8000 ? -v : v;
}

/* Element (r, c) of op(X) in batch `batch`, of the layout's type. */
static float at(const Layout *l, const void *x, int trans, int64_t batch,
                uint64_t r, uint64_t c, int compute) {
  uint64_t row = trans ? c : r, col = trans ? r : c;
  int64_t i = batch * l->batchStride + (int64_t)(row + col * (uint64_t)l->ld);
  if (l->type == 14) {
    uint32_t u = (uint32_t)((const uint16_t *)x)[i] << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
  }
  if (l->type == 2)
    return fromF16(((const uint16_t *)x)[i]);
  float v = ((const float *)x)[i];
  return compute == 75 ? bf16(v) : v;
}

/* A call, kept by value as a graph keeps it. */
typedef struct {
  Op op;
  Layout a, b, c, d;
  float alpha, beta;
  const void *A, *B, *C;
  void *D;
} Call;

static void compute(void *arg) {
  const Call *call = arg;
  const Op *op = &call->op;
  const Layout *a = &call->a, *b = &call->b, *c = &call->c, *d = &call->d;
  const void *A = call->A, *B = call->B, *C = call->C;
  void *D = call->D;
  int bias = op->epilogue & 4;
  float al = call->alpha, be = call->beta;
  uint64_t kdim = op->transa ? a->rows : a->cols;
  for (int32_t batch = 0; batch < d->batch; ++batch)
    for (uint64_t j = 0; j < d->cols; ++j)
      for (uint64_t i = 0; i < d->rows; ++i) {
        double sum = 0;
        for (uint64_t k = 0; k < kdim; ++k)
          sum += (double)at(a, A, op->transa, batch, i, k, op->compute) *
                 at(b, B, op->transb, batch, k, j, op->compute);
        double v = al * sum;
        if (be != 0)
          v += be * ((const float *)C)[batch * c->batchStride +
                                       (int64_t)(i + j * (uint64_t)c->ld)];
        if (bias)
          v += op->bias[i];
        if (op->epilogue & 2)
          v = v > 0 ? v : 0;
        if (op->epilogue & 32)
          v = 0.5 * v *
              (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        ((float *)D)[batch * d->batchStride +
                     (int64_t)(i + j * (uint64_t)d->ld)] = (float)v;
      }
}

/* While the stand-in driver records a graph, the call joins it (and runs
 * at each replay) instead of running now, as the library's work on a
 * capturing stream does. */
static int recorded(Call *call) {
  const char *driver = getenv("TFM_CUDA_DRIVER");
  void *handle = driver ? dlopen(driver, RTLD_NOW | RTLD_NOLOAD) : NULL;
  int (*record)(void (*)(void *), void *) =
      handle
          ? (int (*)(void (*)(void *), void *))dlsym(handle, "fake_cuda_record")
          : NULL;
  int kept = record && record(compute, call);
  if (handle)
    dlclose(handle);
  return kept;
}

EXPORT Status cublasLtMatmul(Handle *h, Op *op, const void *alpha,
                             const void *A, Layout *a, const void *B, Layout *b,
                             const void *beta, const void *C, Layout *c,
                             void *D, Layout *d, const Algo *algo,
                             void *workspace, size_t workspaceBytes,
                             void *stream) {
  logf_("matmul %llux%llux%llu batch=%d transa=%d transb=%d epilogue=%d "
        "beta=%g residual=%d",
        (unsigned long long)d->rows, (unsigned long long)d->cols,
        (unsigned long long)(op->transa ? a->rows : a->cols), d->batch,
        op->transa, op->transb, op->epilogue, *(const float *)beta, C != D);
  if (failing("matmul"))
    return NOT_SUPPORTED;
  Status s = checkShapes(op, a, b, c, d);
  if (s != OK)
    return s;
  const void *ptrs[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if (!algo || alignmentOf(ptrs[i]) < algo->data[i])
      return NOT_SUPPORTED;
  if ((op->epilogue & 4) && !op->bias)
    return INVALID_VALUE;
  Call *call = malloc(sizeof *call);
  if (!call)
    return ALLOC_FAILED;
  *call =
      (Call){*op, *a, *b, *c, *d, *(const float *)alpha, *(const float *)beta,
             A,   B,  C,  D};
  if (!recorded(call)) {
    compute(call);
    free(call);
  }
  return OK;
}
