/*===- runtime.h - The tfm runtime C API -------------------------*- C -*-===*\
|*                                                                            *|
|* Load a compiled model (model.so), create a session, and run its entry     *|
|* points ("infer", "train_step") any number of times.                       *|
|*                                                                            *|
|* Conventions:                                                              *|
|*  - Every fallible call returns a tfm_status_t; NULL means success. A      *|
|*    non-NULL status is owned by the caller and freed with tfm_status_free. *|
|*  - Objects are opaque handles, created by tfm_X_create (or _load) into an *|
|*    out-parameter the caller then owns, and released with tfm_X_release.   *|
|*  - Options structs start with struct_size; initialize them with           *|
|*    tfm_X_options_init so the ABI can grow.                                *|
|*  - Strings passed in are borrowed for the duration of the call.           *|
|*  - Nothing here throws, and bad input never aborts the process: a NULL    *|
|*    handle given to an accessor reads as empty (0, NULL, "").             *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef TFM_RUNTIME_H
#define TFM_RUNTIME_H

#include "tfm/dtype.h"
#include "tfm/version.h"

#include <stddef.h>
#include <stdint.h>

/* The library is built with TFM_RUNTIME_BUILDING defined; its consumers
 * import what it exports. On ELF platforms only these functions are
 * exported (a version script hides everything else). */
#if defined(_WIN32)
#if defined(TFM_RUNTIME_BUILDING)
#define TFM_API __declspec(dllexport)
#else
#define TFM_API __declspec(dllimport)
#endif
#else
#define TFM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===-- Status ------------------------------------------------------------===*/

typedef enum tfm_status_code_t {
  TFM_STATUS_OK = 0,
  TFM_STATUS_INVALID_ARGUMENT = 1, /* a bad input: dtype, shape, count, name */
  TFM_STATUS_NOT_FOUND = 2,        /* a missing file, entry point or tensor */
  TFM_STATUS_INCOMPATIBLE = 3,     /* a model built for another ABI version */
  TFM_STATUS_DATA_LOSS = 4,        /* a truncated or corrupt model file */
  TFM_STATUS_RESOURCE_EXHAUSTED = 5,
  TFM_STATUS_INTERNAL = 6,
  TFM_STATUS_FAILED_PRECONDITION = 7, /* e.g. a session another thread runs */
  TFM_STATUS_UNAVAILABLE = 8, /* the device is not there: no GPU driver, no
                                 such GPU */
  TFM_STATUS_OUT_OF_RANGE = 9, /* a size outside what the model was compiled
                                  for (--shape sequence=1..512) */
  TFM_STATUS_CANCELLED = 10,         /* the run's cancel flag was raised */
  TFM_STATUS_DEADLINE_EXCEEDED = 11, /* the run outlived its timeout */
} tfm_status_code_t;

typedef struct tfm_status_s *tfm_status_t;

/* The code of `status`; TFM_STATUS_OK for NULL. */
TFM_API tfm_status_code_t tfm_status_code(tfm_status_t status);
/* The message of `status`, owned by the status; "" for NULL. */
TFM_API const char *tfm_status_message(tfm_status_t status);
/* Frees `status`; NULL is allowed. */
TFM_API void tfm_status_free(tfm_status_t status);

/*===-- Versions ----------------------------------------------------------===*/

/* The version of the runtime library running, "0.1.0"; the headers'
 * version is TFM_VERSION_STRING. A library runs applications built with
 * headers of the same major version (while it is 0, the same minor) and an
 * older or equal minor. */
TFM_API const char *tfm_runtime_version(void);
/* The same as one number, to compare with TFM_VERSION. */
TFM_API uint32_t tfm_runtime_version_number(void);
/* The model ABI version this runtime loads: a model.so records the version
 * it was compiled for, and tfm_module_load refuses another with
 * TFM_STATUS_INCOMPATIBLE. */
TFM_API uint32_t tfm_runtime_model_abi_version(void);

/*===-- Tensors -----------------------------------------------------------===*/

/* A dense, row-major tensor: on the host, owning its buffer or borrowing
 * the caller's (tfm_tensor_create_view); or on a GPU, borrowing the
 * caller's device memory (tfm_tensor_create_device_view) or owning memory
 * a session's run made there (tfm_run_options_t.outputs_on_device).
 * Thread-compatible: distinct tensors may be used from distinct threads. */
typedef struct tfm_tensor_s tfm_tensor_t;

/* Creates a zero-filled tensor; the caller owns *out_tensor. */
TFM_API tfm_status_t tfm_tensor_create(tfm_dtype_t dtype, const int64_t *dims,
                                       size_t rank, tfm_tensor_t **out_tensor);
/* Creates a tensor holding a copy of `data` (`byte_size` must match). */
TFM_API tfm_status_t tfm_tensor_create_copy(tfm_dtype_t dtype,
                                            const int64_t *dims, size_t rank,
                                            const void *data, size_t byte_size,
                                            tfm_tensor_t **out_tensor);
/* Wraps the caller's memory without a copy: `data` (byte_size bytes,
 * exactly the shape's, aligned to the dtype's size) is borrowed, and must
 * outlive the tensor. A run reads such an input in place, and writes an
 * output given to tfm_session_run_with straight into it. Releasing the
 * tensor frees nothing of `data`. */
TFM_API tfm_status_t tfm_tensor_create_view(tfm_dtype_t dtype,
                                            const int64_t *dims, size_t rank,
                                            void *data, size_t byte_size,
                                            tfm_tensor_t **out_tensor);
/* Wraps the caller's memory on `device` without a copy: "cpu" (or NULL)
 * is host memory, as tfm_tensor_create_view; "cuda:N" (or "cuda", GPU 0)
 * device memory of that GPU, a device pointer allocated through the CUDA
 * driver or runtime (cudaMalloc, a torch.Tensor's data_ptr()). A session
 * on that GPU reads such an input and writes such an output without a
 * copy through the host; a run checks that the memory is the GPU's and
 * holds the tensor whole. `data` is borrowed and must outlive the tensor.
 * Memory at an address that is not a multiple of 64 bytes
 * (TFM_BUFFER_ALIGNMENT, tfm/abi.h) is
 * copied on the device into an aligned buffer for the run (the kernels
 * access 16-byte vectors). */
TFM_API tfm_status_t tfm_tensor_create_device_view(
    tfm_dtype_t dtype, const int64_t *dims, size_t rank, const char *device,
    void *data, size_t byte_size, tfm_tensor_t **out_tensor);
/* Where the tensor's memory lives: "cpu" or "cuda:N"; owned by the tensor,
 * "" for NULL. */
TFM_API const char *tfm_tensor_device(const tfm_tensor_t *tensor);
/* A new host tensor holding a copy of `tensor`: a host tensor, or one a
 * run made on a device (a view of the caller's device memory is refused
 * with TFM_STATUS_FAILED_PRECONDITION: the caller's library copies it). */
TFM_API tfm_status_t tfm_tensor_copy_to_host(const tfm_tensor_t *tensor,
                                             tfm_tensor_t **out_tensor);
/* 1 when the tensor borrows its buffer (a view), else 0. */
TFM_API int tfm_tensor_is_view(const tfm_tensor_t *tensor);
TFM_API void tfm_tensor_release(tfm_tensor_t *tensor);
/* The element type; 0 (no tfm_dtype_t) for NULL. */
TFM_API tfm_dtype_t tfm_tensor_dtype(const tfm_tensor_t *tensor);
TFM_API size_t tfm_tensor_rank(const tfm_tensor_t *tensor);
/* The dims, owned by the tensor, valid while it lives. */
TFM_API const int64_t *tfm_tensor_dims(const tfm_tensor_t *tensor);
TFM_API size_t tfm_tensor_byte_size(const tfm_tensor_t *tensor);
/* The buffer, owned by the tensor, valid while it lives: a device pointer
 * for a tensor on a GPU. */
TFM_API void *tfm_tensor_data(tfm_tensor_t *tensor);
/* Bytes per element of `dtype`; 0 for an unknown value. */
TFM_API size_t tfm_dtype_size(tfm_dtype_t dtype);

/*===-- Context -----------------------------------------------------------===*/

/* Process-wide settings shared by modules and sessions. Thread-safe. */
typedef struct tfm_context_s tfm_context_t;

typedef struct tfm_context_options_t {
  size_t struct_size;
  /* Threads for kernels; 0 lets the runtime choose (one per core). The
   * calling thread's own OpenMP setting is left as it was. */
  int32_t num_threads;
  /* The device sessions compute on: "cpu", "cuda" (the first GPU) or
   * "cuda:N". NULL or "" runs each model on what it was compiled for: the
   * CPU, or the first GPU. A model compiled for another target than the
   * device named fails to load with TFM_STATUS_INCOMPATIBLE. */
  const char *device;
  /* Nonzero: modules are loaded to read what they describe, not to run.
   * A library compiled for CPU features this CPU lacks then loads, so its
   * entries and target can be listed on any machine, and
   * tfm_session_create refuses it with TFM_STATUS_INCOMPATIBLE, naming the
   * features, as tfm_module_load does otherwise. */
  int32_t inspect_only;
} tfm_context_options_t;

TFM_API void tfm_context_options_init(tfm_context_options_t *options);
/* `options` may be NULL for defaults. */
TFM_API tfm_status_t tfm_context_create(const tfm_context_options_t *options,
                                        tfm_context_t **out_context);
TFM_API void tfm_context_release(tfm_context_t *context);
TFM_API int32_t tfm_context_num_threads(const tfm_context_t *context);
/* The device the context's options named; "" when each model runs on its
 * own target. Owned by the context. */
TFM_API const char *tfm_context_device(const tfm_context_t *context);
/* Whether the context's options set inspect_only. */
TFM_API int32_t tfm_context_inspect_only(const tfm_context_t *context);

/*===-- Modules -----------------------------------------------------------===*/

/* A loaded model library. Immutable once loaded, so thread-safe. It keeps
 * its context alive. */
typedef struct tfm_module_s tfm_module_t;

/* Loads `path`, checks its ABI version and validates its metadata. */
TFM_API tfm_status_t tfm_module_load(tfm_context_t *context, const char *path,
                                     tfm_module_t **out_module);
TFM_API void tfm_module_release(tfm_module_t *module);
/* The number of entry points and the name of entry `index`, owned by the
 * module. */
TFM_API size_t tfm_module_num_entries(const tfm_module_t *module);
TFM_API const char *tfm_module_entry_name(const tfm_module_t *module,
                                          size_t index);
/* An input or output of an entry point. The name and dims are owned by the
 * module and valid while it lives. */
typedef struct tfm_tensor_desc_t {
  const char *name;
  tfm_dtype_t dtype;
  size_t rank;
  const int64_t *dims;
} tfm_tensor_desc_t;

/* The number of inputs (is_output == 0) or outputs of `entry`. An entry
 * compiled for a range of sizes (--shape sequence=1..512) has the dim -1
 * wherever the size may vary; tfm_module_entry_io_range gives the range. */
TFM_API tfm_status_t tfm_module_entry_num_io(const tfm_module_t *module,
                                             const char *entry, int is_output,
                                             size_t *out_count);
/* Fills *out_desc with input or output `index` of `entry`. */
TFM_API tfm_status_t tfm_module_entry_io(const tfm_module_t *module,
                                         const char *entry, int is_output,
                                         size_t index,
                                         tfm_tensor_desc_t *out_desc);

/* The smallest and the largest size of each dim of input or output `index`
 * of `entry`: out_min_dims and out_max_dims each receive its rank values
 * (equal where the dim is fixed; both may be NULL for a scalar). A run with
 * a size outside them fails with TFM_STATUS_OUT_OF_RANGE. */
TFM_API tfm_status_t tfm_module_entry_io_range(const tfm_module_t *module,
                                               const char *entry,
                                               int is_output, size_t index,
                                               int64_t *out_min_dims,
                                               int64_t *out_max_dims);

/* The name of the dimension symbol ("sequence") that dim `dim` of input or
 * output `index` of `entry` follows, where it varies (tfm_module_entry_io
 * gives -1 there); "" for a fixed dim. The string lives as long as the
 * module. */
TFM_API tfm_status_t tfm_module_entry_io_symbol(const tfm_module_t *module,
                                                const char *entry,
                                                int is_output, size_t index,
                                                size_t dim,
                                                const char **out_symbol);

/* What input `index` of `entry` takes, for tools that make up inputs:
 * *out_kind is a tfm_input_values_t, and for TFM_INPUT_VALUES_INDICES
 * [*out_lower, *out_upper) is the range the model's runs accept (0, 0
 * otherwise). A library from before tfmc recorded it says
 * TFM_INPUT_VALUES_ANY. */
TFM_API tfm_status_t tfm_module_entry_input_values(
    const tfm_module_t *module, const char *entry, size_t index,
    tfm_input_values_t *out_kind, int64_t *out_lower, int64_t *out_upper);

/*===-- Sessions ----------------------------------------------------------===*/

/* The state of one model in use, on one device: its arena and, for a model
 * compiled with --train, its parameters, optimizer moments and step count,
 * which "train_step" updates in place and "infer" reads. It keeps its module
 * alive.
 *
 * Threads: a session serves one call at a time. A call made while another
 * thread is inside a call on the same session (a run, a checkpoint, a
 * parameter read or write) fails with TFM_STATUS_FAILED_PRECONDITION and
 * changes nothing; neither call's result is corrupted. Run one session per
 * thread; sessions of one module run in parallel freely. */
typedef struct tfm_session_s tfm_session_t;

typedef struct tfm_session_options_t {
  size_t struct_size;
  /* Nonzero: time every kernel call of the session's runs, for
   * tfm_session_write_profile (the TFM_PROFILE environment variable turns
   * it on for every session, printing the table at release). */
  int32_t profile;
  /* Nonzero: a GPU may multiply f32 GEMMs in TF32 on its tensor cores (the
   * operands rounded to 10 mantissa bits, f32 accumulation), as PyTorch's
   * allow_tf32; 0, the default, runs f32 as f32. The CPU ignores it. */
  int32_t allow_tf32;
} tfm_session_options_t;

TFM_API void tfm_session_options_init(tfm_session_options_t *options);
TFM_API tfm_status_t tfm_session_create(tfm_module_t *module,
                                        const tfm_session_options_t *options,
                                        tfm_session_t **out_session);
TFM_API void tfm_session_release(tfm_session_t *session);
/* The device the session computes on: "cpu", "cuda:0", ... Owned by the
 * session; "" for NULL. */
TFM_API const char *tfm_session_device(const tfm_session_t *session);
/* How the session computes, for people: its device, then the library that
 * runs the model's kernels and those it declined, which the model's own
 * code computes ("cuda:0; 14 kernels in cuBLASLt 13.0.2"; "cuda:0; 14
 * kernels in the model's code: cuBLASLt is turned off (TFM_CUBLASLT=off)").
 * Owned by the session; "" for NULL. */
TFM_API const char *tfm_session_describe(const tfm_session_t *session);

/* Runs `entry` ("infer", "train_step", ...). `inputs` are borrowed and
 * checked against the entry's dtypes and shapes (a dim of -1 takes any size
 * in its range, the same wherever its symbol appears). On success,
 * out_outputs (an array of at least tfm_module's output count) receives new
 * tensors that the caller owns, of the run's sizes. */
TFM_API tfm_status_t tfm_session_run(tfm_session_t *session, const char *entry,
                                     tfm_tensor_t *const *inputs,
                                     size_t num_inputs,
                                     tfm_tensor_t **out_outputs,
                                     size_t num_outputs);

/* Waits until the device has finished the work of the session's runs (a
 * run ordered with a caller's stream returns before); at once on the CPU.
 * A kernel that failed meanwhile fails this call. */
TFM_API tfm_status_t tfm_session_synchronize(tfm_session_t *session);

/* A flag that cancels the runs given it: raise it from any thread, and
 * every run using it stops before its next kernel with
 * TFM_STATUS_CANCELLED. Thread-safe. */
typedef struct tfm_cancel_flag_s tfm_cancel_flag_t;
TFM_API tfm_status_t tfm_cancel_flag_create(tfm_cancel_flag_t **out_flag);
TFM_API void tfm_cancel_flag_raise(tfm_cancel_flag_t *flag);
/* Lowers the flag again, for the runs that follow. */
TFM_API void tfm_cancel_flag_reset(tfm_cancel_flag_t *flag);
TFM_API int tfm_cancel_flag_is_raised(const tfm_cancel_flag_t *flag);
TFM_API void tfm_cancel_flag_release(tfm_cancel_flag_t *flag);

/* How one run goes. A run is interrupted between kernels, never inside
 * one; an interrupted run returns no outputs and leaves the session's
 * training state as it was (a training step is no longer interrupted once
 * its optimizer updates have begun: it finishes). */
typedef struct tfm_run_options_t {
  size_t struct_size;
  /* Fail with TFM_STATUS_DEADLINE_EXCEEDED once the run has taken this many
   * milliseconds; 0 (the default) for no limit. */
  double timeout_ms;
  /* Fail with TFM_STATUS_CANCELLED once this flag is raised; NULL (the
   * default) for none. Borrowed for the run. */
  const tfm_cancel_flag_t *cancel;
  /* Nonzero: the outputs the run creates live on the session's device, as
   * tensors that own device memory (freed with the tensor); 0 (the
   * default): on the host. A CPU session's are host tensors either way. */
  int32_t outputs_on_device;
  /* Nonzero, on a GPU session: the run is ordered with the caller's CUDA
   * stream `stream` (a CUstream or cudaStream_t; NULL is the default
   * stream). Its work starts after the work queued there so far, work
   * queued there after the call waits for the run, and the call returns
   * without waiting for the GPU unless an output is on the host or the
   * model checks indices (their outcome is read after the run). 0 (the
   * default): the call returns once the run is done. */
  int32_t use_stream;
  void *stream;
} tfm_run_options_t;

TFM_API void tfm_run_options_init(tfm_run_options_t *options);

/* Runs `entry` as tfm_session_run does, with more say:
 *  - input_names: inputs[i] is the input named input_names[i] (every
 *    input exactly once, in any order); NULL: by position.
 *  - output_names: outputs[i] receives the output named output_names[i]
 *    (some of them, in any order; the others are computed and dropped);
 *    NULL: all of them by position (num_outputs at least their count).
 *  - outputs[i] is either NULL, to receive a new tensor the caller owns
 *    (on the host, or on the device with options->outputs_on_device),
 *    or a tensor of the output's dtype and shape the run writes into (a
 *    view writes the caller's memory); it may not overlap an input.
 *  - Tensors live on the host or on the session's device. On a GPU, host
 *    tensors are copied through page-locked memory, and the device's own
 *    are used in place (or copied on the device, where the run replays a
 *    CUDA graph recorded on the session's buffers).
 *  - options: a timeout or a cancel flag; NULL for none.
 * On failure no tensor is created; given outputs may have been written. */
TFM_API tfm_status_t tfm_session_run_with(
    tfm_session_t *session, const char *entry,
    const tfm_run_options_t *options, const char *const *input_names,
    tfm_tensor_t *const *inputs, size_t num_inputs,
    const char *const *output_names, tfm_tensor_t **outputs,
    size_t num_outputs);

/* Where the session's runs spent their time, when it was created with
 * options->profile (or TFM_PROFILE set): TFM_PROFILE_TABLE writes the text
 * table (each kernel with its parameters, calls and milliseconds per run),
 * TFM_PROFILE_TRACE every run and kernel call (the first million) in the
 * Chrome trace event format (JSON), which trace viewers open. `path` "-"
 * is stderr. TFM_STATUS_FAILED_PRECONDITION when the session does not
 * profile. */
typedef enum tfm_profile_format_t {
  TFM_PROFILE_TABLE = 0,
  TFM_PROFILE_TRACE = 1,
} tfm_profile_format_t;
TFM_API tfm_status_t tfm_session_write_profile(tfm_session_t *session,
                                               const char *path,
                                               tfm_profile_format_t format);

/*===-- Training state ----------------------------------------------------===*/

/* The trainable parameters of the session's model, in the compiler's order.
 * A name is owned by the module; NULL when `index` is out of range. */
TFM_API size_t tfm_session_num_parameters(const tfm_session_t *session);
TFM_API const char *tfm_session_parameter_name(const tfm_session_t *session,
                                               size_t index);
/* A copy of parameter `name`'s current value, which the caller owns. */
TFM_API tfm_status_t tfm_session_get_parameter(tfm_session_t *session,
                                               const char *name,
                                               tfm_tensor_t **out_value);
/* Overwrites parameter `name` with `value` (borrowed; same dtype and
 * shape). Optimizer moments are left as they are. */
TFM_API tfm_status_t tfm_session_set_parameter(tfm_session_t *session,
                                               const char *name,
                                               const tfm_tensor_t *value);
/* The number of training steps the session has run; -1 when the device
 * cannot be read. */
TFM_API int64_t tfm_session_step_count(const tfm_session_t *session);

/* Saves every parameter, optimizer moment and the step count to `path`,
 * atomically: the file is written beside it under a temporary name, flushed
 * and renamed, so a crash or a full disk leaves the old file (or none), never
 * a partial one. In a data-parallel run of a model compiled with
 * --shard-optimizer each rank holds part of Adam's moments, which the file
 * holds whole: every rank calls it, and those that write nothing pass a
 * NULL `path`. */
TFM_API tfm_status_t tfm_session_save_checkpoint(tfm_session_t *session,
                                                 const char *path);
/* Restores a checkpoint saved from a session of the same model. The file is
 * checked whole (format, checksum, every slot's name, dtype and shape)
 * before anything changes, so a bad file leaves the session untouched. */
TFM_API tfm_status_t tfm_session_load_checkpoint(tfm_session_t *session,
                                                 const char *path);

/*===-- Data-parallel training -------------------------------------------===*/

/* The processes of a data-parallel run as a session sees them: this one's
 * rank, how many there are, and the collectives a training step needs.
 * tfm_mpi_communicator (tfm/mpi.h, in libtfm_mpi) makes one over MPI; an
 * application may bring its own. Each function returns 0, or nonzero with
 * a message of at most `error_size` bytes written to `error`. A session
 * calls them from one thread at a time, though not always the same one,
 * and every rank makes the same calls in the same order. `stream` is NULL
 * for host memory; a communicator with `device_memory` also takes device
 * memory, on a stream. */
typedef struct tfm_communicator_t {
  size_t struct_size;
  int32_t rank, size;
  void *user;
  /* Sums `count` elements of `dtype` at `data` across the ranks, in place. */
  int32_t (*all_reduce_sum)(void *user, void *data, uint64_t count,
                            tfm_dtype_t dtype, void *stream, char *error,
                            size_t error_size);
  /* Copies `bytes` at `data` from rank `root` to every other rank. */
  int32_t (*broadcast)(void *user, void *data, uint64_t bytes, int32_t root,
                       void *stream, char *error, size_t error_size);
  /* Gathers every rank's `bytes` at `send` into `receive` on every rank,
   * rank r's at receive + r * bytes. `send` may be this rank's place in
   * `receive` (in place). Needed only by models compiled with
   * --shard-optimizer (NULL otherwise), as is the next. */
  int32_t (*all_gather)(void *user, const void *send, void *receive,
                        uint64_t bytes, void *stream, char *error,
                        size_t error_size);
  /* Sums `size` blocks of `count` elements at `send` across the ranks, and
   * writes the sum of block r to `receive` on rank r. `receive` may be
   * `send`: the sum then lands in its first block. */
  int32_t (*reduce_scatter_sum)(void *user, const void *send, void *receive,
                                uint64_t count, tfm_dtype_t dtype, void *stream,
                                char *error, size_t error_size);
  /* Sums scale_r·x_r across the ranks, in place, each rank r giving its
   * own `scale`. A session on a GPU needs it (NULL otherwise): there the
   * runtime computes nothing on device memory itself. */
  int32_t (*all_reduce_scaled_sum)(void *user, void *data, uint64_t count,
                                   tfm_dtype_t dtype, double scale,
                                   void *stream, char *error,
                                   size_t error_size);
  /* Nonzero when the functions also take device memory, with `stream` the
   * CUstream their work is ordered on (they return once it is queued
   * there), as tfm_nccl_communicator's do: a session on a GPU needs it. */
  int32_t device_memory;
  /* Writes the ranks that have called the functions above fewer times than
   * this rank, as "1, 3" (empty when none), for the message of an exchange
   * that timed out: they hang, died, or run behind. It may run while
   * another thread waits inside one of the functions above. NULL where the
   * communicator cannot tell. */
  int32_t (*lagging)(void *user, char *ranks, size_t ranks_size);
  /* Returns once the collectives queued on `stream` have finished (with
   * the work queued before them), or fails. For a communicator whose
   * device collectives can wait forever on a rank that hangs or died, as
   * NCCL's can: it gives up after the job's timeout
   * (TFM_COLLECTIVE_TIMEOUT), or sooner when it knows a rank died, names
   * the ranks behind where it can, and every later call fails. A session
   * on a GPU calls it at the end of each step that exchanged. NULL where
   * the functions return only once their work is done. */
  int32_t (*wait)(void *user, void *stream, char *error, size_t error_size);
} tfm_communicator_t;

/* A communicator over NCCL for sessions on GPU `device` (the N of
 * "cuda:N"), written to `out`; tfm_nccl_communicator_destroy frees it.
 * NCCL is opened with dlopen (libnccl.so.2, or the library
 * TFM_NCCL_LIBRARY names). It takes device memory on a stream, and host
 * memory with a NULL stream (staged through the GPU). The ranks agree on
 * NCCL's unique id through `bootstrap`, a host communicator such as
 * tfm_mpi_communicator's, whose rank and size it takes; or, when
 * `bootstrap` is NULL, through a TCP rendezvous the environment describes,
 * for jobs started without MPI: TFM_RANK, TFM_WORLD_SIZE, and
 * TFM_RENDEZVOUS (host:port, where rank 0 listens; one process needs
 * none). Other ranks are awaited at most TFM_COLLECTIVE_TIMEOUT seconds
 * (default 300), and the ones that did not come are named. Every rank of
 * the job calls it. */
TFM_API tfm_status_t tfm_nccl_communicator(int32_t device,
                                           const tfm_communicator_t *bootstrap,
                                           tfm_communicator_t *out);
TFM_API void tfm_nccl_communicator_destroy(tfm_communicator_t *communicator);

/* Makes the session one rank of a data-parallel run over `communicator`
 * (copied; what `user` points to must outlive the session). Every rank
 * calls it with the same model, which is checked first: a rank whose
 * library differs from rank 0's is named and every rank fails. Then rank
 * 0's training state (parameters, moments, step count) is copied to every
 * rank, so all begin equal. From then on each `train_step` averages its
 * loss and gradients across the ranks, each rank weighted by its count of
 * labels the loss counts, before the update: N ranks step as one process
 * would on their batches together. An exchange that has not finished after
 * TFM_COLLECTIVE_TIMEOUT seconds (default 300) fails the step. The model
 * must be a training step compiled for the CPU; NULL detaches (one
 * process again). With Adam's moments sharded (--shard-optimizer), each
 * rank keeps its part of them from here on, and detaching (or joining
 * another communicator) gathers them whole, so every rank calls it. */
TFM_API tfm_status_t tfm_session_set_communicator(
    tfm_session_t *session, const tfm_communicator_t *communicator);

/* Checks that every rank of the session's data-parallel run holds rank 0's
 * parameters, bit for bit (the averages keep them so); a rank that drifted
 * (another runtime, a fault) is named, on every rank, with
 * TFM_STATUS_FAILED_PRECONDITION. Every rank calls it; in one process it
 * does nothing. */
TFM_API tfm_status_t tfm_session_compare_parameters(tfm_session_t *session);

/*===-- Generation ----------------------------------------------------===*/

/* How tfm_session_generate chooses tokens. Initialize with
 * tfm_generate_options_init, then set what differs. */
typedef struct tfm_generate_options_t {
  size_t struct_size;
  /* The most tokens to add (default 16). The prompt and these must fit in
   * the model's maximum length (tfm_module_generation_max_length). */
  int64_t max_new_tokens;
  /* Hypotheses kept (default 1: greedy, or sampling). At most the batch the
   * model was compiled with: beam search runs the beams as its rows. */
  int64_t beam_width;
  /* alpha of the length penalty ((5 + |Y|) / 6)^alpha that a hypothesis's
   * log-probability is divided by; 0 (the default) for none, 0.6 in the
   * Transformer paper. */
  double length_penalty;
  /* The token that ends a hypothesis; -1 (the default) for none. */
  int64_t end_token;
  /* Stop once beam_width hypotheses have ended (default 1). */
  int32_t early_stopping;
  /* Draw each token from the model's distribution instead of taking the
   * most likely (default 0); sampling keeps one hypothesis. */
  int32_t sample;
  double temperature; /* default 1 */
  int64_t top_k;      /* draw among the k most likely; 0 (default): all */
  double top_p;       /* draw among the fewest whose probability reaches p
                         (default 1) */
  uint64_t seed;      /* the same seed draws the same tokens (default 0) */
  /* Called after every step with the last token of each live hypothesis
   * (num_live of them; rows of a beam search may be reordered from step to
   * step). A nonzero return stops the generation early, successfully. */
  int32_t (*on_token)(void *user_data, int64_t step, const int64_t *tokens,
                      size_t num_live);
  void *user_data;
  /* An encoder-decoder's source sentence (token ids, borrowed), which its
   * `encode` entry reads once before the prompt; exactly as long as the
   * model was compiled for. NULL for a decoder-only model. */
  const int64_t *source;
  size_t source_length;
} tfm_generate_options_t;

TFM_API void tfm_generate_options_init(tfm_generate_options_t *options);

/* The result of a generation: sequences of new tokens (without the
 * prompt), best first, and the time the prompt and the steps took. */
typedef struct tfm_generation_s tfm_generation_t;

TFM_API size_t tfm_generation_num_sequences(const tfm_generation_t *generation);
/* The new tokens of sequence `index` (owned by the generation; NULL when
 * out of range), their number in *out_length. */
TFM_API const int64_t *tfm_generation_tokens(const tfm_generation_t *generation,
                                             size_t index, size_t *out_length);
/* Its log-probability under the model, over the length penalty. */
TFM_API double tfm_generation_score(const tfm_generation_t *generation,
                                    size_t index);
/* Milliseconds spent on the prompt (prefill) and on the decoding steps, and
 * the number of steps run. */
TFM_API double tfm_generation_prompt_ms(const tfm_generation_t *generation);
TFM_API double tfm_generation_decode_ms(const tfm_generation_t *generation);
TFM_API int64_t tfm_generation_steps(const tfm_generation_t *generation);
TFM_API void tfm_generation_release(tfm_generation_t *generation);

/* What the module's code was generated for: its target ("cpu" or
 * "cuda"), the CPU its host code was compiled for ("x86-64-v3", or the
 * build host's name for `tfmc compile --cpu=native`), and the x86-64
 * features that code may use, comma-separated ("avx,avx2,fma,..."), which
 * tfm_module_load checked against this CPU (tfm_session_create, for a
 * context that is inspect_only). The last two are "" for a
 * library from before they were recorded. The strings live as long as the
 * module. */
TFM_API const char *tfm_module_target(const tfm_module_t *module);
TFM_API const char *tfm_module_cpu(const tfm_module_t *module);
TFM_API const char *tfm_module_cpu_features(const tfm_module_t *module);

/* The longest sequence (prompt and new tokens) of a model compiled with
 * `tfmc compile --generate`; 0 for any other model. */
TFM_API int64_t tfm_module_generation_max_length(const tfm_module_t *module);

/* Extends `prompt` (prompt_length token ids, at least one) with the
 * model's `prefill` and `decode_step` entries, which keep the keys and
 * values of the tokens seen so far in the session: the prompt is computed
 * once, then every step computes one token per hypothesis. A generation
 * overwrites the session's caches; it cannot run beside another call on
 * the same session. `options` may be NULL for the defaults. The caller
 * owns *out_generation. */
TFM_API tfm_status_t tfm_session_generate(tfm_session_t *session,
                                          const int64_t *prompt,
                                          size_t prompt_length,
                                          const tfm_generate_options_t *options,
                                          tfm_generation_t **out_generation);

#ifdef __cplusplus
}
#endif

#endif /* TFM_RUNTIME_H */
