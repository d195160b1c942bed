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

/* Whether this process was started by an MPI launcher (mpirun), from the
 * environment it sets; MPI itself is not touched. */
TFM_API int tfm_mpi_launched(void);

/* Finalizes MPI if tfm_mpi_communicator initialized it. */
TFM_API void tfm_mpi_finalize(void);

/* Ends every process of the job with `code`: what a rank that fails does, so
 * that no other rank waits for it. */
TFM_API void tfm_mpi_abort(int code);

#ifdef __cplusplus
}
#endif

#endif /* TFM_MPI_H */
