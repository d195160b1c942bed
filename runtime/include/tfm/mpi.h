/*===- tfm/mpi.h - A communicator over MPI (libtfm_mpi) ----------*- C -*-===*\
|*                                                                            *|
|* libtfm_mpi is built where Open MPI is found, so that the runtime itself    *|
|* keeps no MPI dependency. It gives a session (tfm_session_set_communicator) *|
|* the world of the MPI job the process was started in.                      *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef TFM_MPI_H
#define TFM_MPI_H

#include "tfm/runtime.h"

#include <dlfcn.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Joins the MPI job: initializes MPI (unless the application has) with the
 * thread support a session needs (its exchanges run on a thread of their
 * own, one call at a time), and fills `out` with MPI_COMM_WORLD's rank,
 * size and collectives. Returns 0, or nonzero with a message in `error`. */
TFM_API int tfm_mpi_communicator(int *argc, char ***argv,
                                 tfm_communicator_t *out, char *error,
                                 size_t error_size);

/* Finalizes MPI if tfm_mpi_communicator initialized it. */
TFM_API void tfm_mpi_finalize(void);

/* Ends every process of the job with `code`: what a rank that fails does, so
 * that no other rank waits for it. */
TFM_API void tfm_mpi_abort(int code);

/* libtfm_mpi's functions, for a program that opens it with dlopen only when
 * it trains across processes, and so needs no MPI otherwise (tfmc, the
 * Python package). */
typedef struct tfm_mpi_library_t {
  int (*communicator)(int *, char ***, tfm_communicator_t *, char *, size_t);
  void (*finalize)(void);
  void (*abort)(int);
} tfm_mpi_library_t;

/* Opens the library `soname` (libtfm_mpi.so.N) and fills `out`; returns 0,
 * or nonzero with a message in `error`. */
static inline int tfm_mpi_open(const char *soname, tfm_mpi_library_t *out,
                               char *error, size_t error_size) {
  void *handle = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    snprintf(error, error_size, "%s cannot be loaded (%s)", soname, dlerror());
    return 1;
  }
  out->communicator = (int (*)(int *, char ***, tfm_communicator_t *, char *,
                               size_t))dlsym(handle, "tfm_mpi_communicator");
  out->finalize = (void (*)(void))dlsym(handle, "tfm_mpi_finalize");
  out->abort = (void (*)(int))dlsym(handle, "tfm_mpi_abort");
  if (!out->communicator || !out->finalize || !out->abort) {
    snprintf(error, error_size, "%s lacks the functions of tfm/mpi.h", soname);
    return 1;
  }
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* TFM_MPI_H */
