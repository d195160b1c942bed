/*===- abi.h - The ABI between a compiled model and the runtime --*- C -*-===*\
|*                                                                            *|
|* `tfmc compile` writes a shared library that exports one symbol,           *|
|* `tfm_model_v1`, returning a description of the model: its entry points    *|
|* (`infer`, `train_step`), their inputs and outputs, the activation arena   *|
|* each needs, and the weights. The runtime loads the library with dlopen    *|
|* and checks `abi_version` before touching anything else.                   *|
|*                                                                            *|
|* Compatibility: structs only grow at the end, and each carries its size.   *|
|* A change that is not an append raises TFM_ABI_VERSION.                    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef TFM_ABI_H
#define TFM_ABI_H

#include "tfm/dtype.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TFM_ABI_VERSION 5u

/* The symbol a model library exports: const tfm_abi_model_t *tfm_model_v1(void).
 * The name stays across versions; abi_version tells them apart. */
#define TFM_ABI_MODEL_SYMBOL "tfm_model_v1"

/* Buffers the compiler lays out (arena slots, weights, state slots) start at
 * multiples of this many bytes, and the runtime allocates the arena, the
 * state and tensors at this alignment. */
#define TFM_BUFFER_ALIGNMENT 64

/* A tensor at an entry point's boundary: a name, an element type and a
 * static shape. All pointers point into the model library. */
typedef struct tfm_abi_tensor_desc_t {
  const char *name;
  int32_t dtype; /* a tfm_dtype_t */
  int32_t rank;
  const int64_t *dims;
} tfm_abi_tensor_desc_t;

/* Kernels the runtime provides, backed by oneDNN primitives that a session
 * creates once from these descriptors. All tensors are f32, dense
 * row-major unless strides say otherwise. A model for a GPU
 * (TFM_TARGET_CUDA) may carry LINEAR and BATCH_MATMUL only, each run as a
 * cuBLASLt call on device pointers (an append to version 5: older runtimes
 * refuse such a model as corrupt).
 *
 *  LINEAR         y[M,N] = act(x[M,K] · w[N,K]ᵀ + b[N]) (+ r[M,N])
 *                 params: M, K, N, has_bias, activation (a
 *                 tfm_activation_t), has_residual, constant_weights
 *                 (w never changes, so the kernel may pack it once)
 *                 dtype:  F32, or BF16 to multiply in bf16 with f32
 *                 accumulation (operands and results stay f32, unless
 *                 the kernel's flags hold TFM_KERNEL_FLAG_NARROW_OPERANDS)
 *                 args:   x, w, b (or NULL), r (or NULL), y
 *  BATCH_MATMUL   c[B1,B2,M,N] = a[B1,B2,M,K] · b[B1,B2,K,N], each operand
 *                 read or written at arbitrary element strides, so that
 *                 transposed and packed operands need no copy
 *                 params:  B1, B2, M, K, N
 *                 strides: a (b1, b2, m, k), b (b1, b2, k, n),
 *                          c (b1, b2, m, n), in elements
 *                 args:    a, b, c
 *  MASKED_SOFTMAX y[G,Q,C] = softmax over C of (scale·x + mask); row q of
 *                 group g reads mask[(g / div)·gstride + q·qstride + c]
 *                 (strides of 0 broadcast); `causal` drops column c > q.
 *                 params: G, Q, C, causal, has_mask, div, gstride, qstride
 *                 fparams: scale
 *                 args:   x, mask (or NULL), y
 *  LAYER_NORM     s = x + r (when has_residual); y[M,N] = LN(s)·g + b over N
 *                 params: M, N, has_residual, has_bias, writes_sum
 *                 fparams: epsilon
 *                 args:   x, r (or NULL), g, b (or NULL), y, sum (or NULL)
 *  REORDER        y = x, the same tensor of rank R <= 6 in another layout
 *                 (a transpose, or a window of a packed buffer made dense)
 *                 params:  R, dims[R]
 *                 strides: x (TFM_REORDER_MAX_RANK slots), y (as many),
 *                          in elements
 *                 args:    x, y
 *  ADAM           one Adam step on N elements, in place (since version 3):
 *                 g' = g + wd·p; m = β1·m + (1−β1)·g'; v = β2·v + (1−β2)·g'²;
 *                 p −= step · m / (√v · inv + ε)
 *                 params: N
 *                 args:   p, g, m, v, coefficients (f32[8]: step, inv, β1,
 *                         1−β1, β2, 1−β2, ε, wd), computed by the model
 *                         for the current step
 *  SGD            p −= lr · (g + wd·p) on N elements, in place (since
 *                 version 3)
 *                 params: N
 *                 args:   p, g, coefficients (f32[2]: lr, wd)
 *  LAYER_NORM_BACKWARD  the gradients of LAYER_NORM without a residual
 *                 (tfm.layer_norm_grad; since version 3): dx[M,N], and dg[N]
 *                 and db[N] summed over the rows
 *                 params: M, N
 *                 fparams: epsilon
 *                 args:   x, g, dy, dx, dg, db
 *  CONV_2D        y[N,M,OH,OW] = conv(x[N,C,H,W], w[M,C/G,KH,KW]) + b[M]
 *                 (tfm.conv2d), zero padding
 *                 params:  N, C, H, W, M, KH, KW, G (groups)
 *                 strides: sh, sw, dh, dw (dilations, 1 = dense), pt, pl,
 *                          pb, pr (pads), has_bias; OH and OW follow
 *                 args:    x, w, b (or NULL), y
 *  ATTENTION      o[B1,B2,Sq,Dv] = softmax over Sk of (scale·q·kᵀ + mask)
 *                 · v, with q[B1,B2,Sq,D], k[B1,B2,Sk,D], v[B1,B2,Sk,Dv]
 *                 (an append to version 5): computed over blocks of keys
 *                 with an online softmax, so no [Sq, Sk] scores exist in
 *                 memory. Rows are read and written at any strides, their
 *                 elements densely. The mask is a dense f32 (additive)
 *                 [M1,M2,MQ,Sk], where each M is 1 or the size it
 *                 broadcasts to; `causal` drops key j > query i. With
 *                 GROUPED (grouped-query attention), k and v are
 *                 [B1,B2/G,Sk,..] and query head i2 reads their head i2/G.
 *                 params:  B1, B2, Sq, Sk, D, Dv, flags (a
 *                          tfm_attention_flag_t set), G (read with GROUPED)
 *                 fparams: scale
 *                 With ROTARY_Q or ROTARY_K, the query or the keys
 *                 are read unrotated and rotated as they are loaded.
 *                 strides: q, k, v, o: (b1, b2, row) each, in elements;
 *                          with KEYS_TRANSPOSED, k's third is the stride
 *                          of its columns, its rows being dense (kᵀ, as
 *                          a decoder's key cache may be kept)
 *                 At most TFM_ATTENTION_FEW_QUERIES queries are computed
 *                 with each key and value read once, and only up to the
 *                 last key a query sees (its mask's trailing -inf, the
 *                 causal triangle).
 *                 args:    q, k, v, mask (or NULL), o, and with ROTARY_Q
 *                          or ROTARY_K, cos and sin
 *  RMS_NORM       LAYER_NORM's params, fparams and args, but RMSNorm:
 *                 y = s / sqrt(mean(s²) + epsilon)·g + b, no mean
 *                 subtracted (tfm.layer_norm {rms}; an append to version 5)
 *  RMS_NORM_BACKWARD  LAYER_NORM_BACKWARD's params, fparams and args, for
 *                 RMS_NORM (an append to version 5)
 *  ALL_REDUCE     one member of a bucket of tensors averaged across the
 *                 processes of a data-parallel run, weighted: every rank
 *                 ends with Σ_r w_r·x_r / Σ_r w_r (an append to version
 *                 5). A training step calls START for each member as soon
 *                 as it is computed, and the bucket's reduction begins
 *                 once all its members have started; WAIT, before the
 *                 member is read, writes the result over x. x is not
 *                 written between the two. A session without a
 *                 communicator (one process) does nothing: the result is
 *                 x. A bucket whose weights sum to 0 gives zeros.
 *                 params: N, bucket, phase (a tfm_all_reduce_phase_t),
 *                         offset (of the member in its bucket, in
 *                         elements), the bucket's elements, the bucket's
 *                         members
 *                 args:   x (f32[N]), w (f32[1], this rank's weight)
 *  QUANTIZED_LINEAR  y[M,N] = act(x'[M,K] · w'[N,K]ᵀ + b[N]), w' = (w − wz)·ws
 *                 with w int8 (uint8 with UNSIGNED_WEIGHTS; 4-bit values
 *                 with FOUR_BIT, still a byte each) and its scale ws (f32)
 *                 and zero point wz (w's type) one, one per row of w with
 *                 PER_ROW, or with PER_ROW and a BLOCK_SIZE B one per row
 *                 and B columns, [N, ceil(K/B)]. x' = (q − z)·s, x
 *                 quantized to uint8 q by its own range as ONNX's
 *                 DynamicQuantizeLinear does; with STATIC_INPUT, by the
 *                 given scale s (fparams[0]) and zero point z
 *                 (params[INPUT_ZERO_POINT]), q = saturate(round(x / s) +
 *                 z) to [0, 255], halves to even, NaN to z; with
 *                 WEIGHT_ONLY, x' = x (an append to version 5). w, ws and
 *                 wz never change.
 *                 params: M, K, N, has_bias, activation, flags (a
 *                         tfm_quantized_linear_flag_t set), block size
 *                         (0: none)
 *                 args:   x, w, ws, wz (with HAS_ZERO_POINT, else NULL: 0),
 *                         b (or NULL), y */
typedef enum tfm_kernel_kind_t {
  TFM_KERNEL_LINEAR = 1,
  TFM_KERNEL_BATCH_MATMUL = 2,
  TFM_KERNEL_MASKED_SOFTMAX = 3,
  TFM_KERNEL_LAYER_NORM = 4,
  TFM_KERNEL_REORDER = 5,             /* since version 2 */
  TFM_KERNEL_ADAM = 6,                /* since version 3 */
  TFM_KERNEL_SGD = 7,                 /* since version 3 */
  TFM_KERNEL_LAYER_NORM_BACKWARD = 8, /* since version 3 */
  TFM_KERNEL_CONV_2D =
      9, /* an append to version 5: older runtimes refuse it as unknown */
  TFM_KERNEL_ATTENTION = 10, /* an append to version 5, as CONV_2D */
  /* Kinds of their own rather than a flag of LAYER_NORM's, so that a
   * runtime that predates them refuses them instead of centring. */
  TFM_KERNEL_RMS_NORM = 11,          /* an append to version 5 */
  TFM_KERNEL_RMS_NORM_BACKWARD = 12, /* an append to version 5 */
  TFM_KERNEL_ALL_REDUCE = 13,        /* an append to version 5 */
  TFM_KERNEL_QUANTIZED_LINEAR = 14,  /* an append to version 5 */
} tfm_kernel_kind_t;

/* Where each kind's params sit, in the order the list above gives them:
 * one definition for the compiler, which writes descriptors, and the
 * runtime, which reads them. Sizes come first in every kind. */
enum {
  TFM_LINEAR_M, TFM_LINEAR_K, TFM_LINEAR_N, TFM_LINEAR_HAS_BIAS,
  TFM_LINEAR_ACTIVATION, TFM_LINEAR_HAS_RESIDUAL, TFM_LINEAR_CONSTANT_WEIGHTS,
  TFM_LINEAR_NUM_PARAMS
};
enum {
  TFM_BATCH_MATMUL_B1, TFM_BATCH_MATMUL_B2, TFM_BATCH_MATMUL_M,
  TFM_BATCH_MATMUL_K, TFM_BATCH_MATMUL_N, TFM_BATCH_MATMUL_NUM_PARAMS
};
enum {
  TFM_MASKED_SOFTMAX_G, TFM_MASKED_SOFTMAX_Q, TFM_MASKED_SOFTMAX_C,
  TFM_MASKED_SOFTMAX_CAUSAL, TFM_MASKED_SOFTMAX_HAS_MASK,
  TFM_MASKED_SOFTMAX_DIV, TFM_MASKED_SOFTMAX_GSTRIDE,
  TFM_MASKED_SOFTMAX_QSTRIDE, TFM_MASKED_SOFTMAX_NUM_PARAMS
};
enum {
  TFM_LAYER_NORM_M, TFM_LAYER_NORM_N, TFM_LAYER_NORM_HAS_RESIDUAL,
  TFM_LAYER_NORM_HAS_BIAS, TFM_LAYER_NORM_WRITES_SUM,
  TFM_LAYER_NORM_NUM_PARAMS
};
/* REORDER: the rank, then that many dimensions. */
enum { TFM_REORDER_RANK, TFM_REORDER_DIMS };
/* ADAM and SGD: the element count, then (an append to version 5, ADAM
 * only) whether the moments are sharded. A sharded ADAM takes (parameter,
 * gradient, coefficients) and no moments: the runtime keeps them, each
 * rank of a data-parallel run its part, and TFM_OPTIMIZER_MOMENTS is the
 * index in the model's states of the first moment's TFM_STATE_ADAM_M_SHARD
 * slot (the second moment's is the TFM_STATE_ADAM_V_SHARD slot of the same
 * name). */
enum {
  TFM_OPTIMIZER_N,
  TFM_OPTIMIZER_SHARDED,
  TFM_OPTIMIZER_MOMENTS,
  TFM_OPTIMIZER_NUM_PARAMS
};
enum {
  TFM_LAYER_NORM_BACKWARD_M, TFM_LAYER_NORM_BACKWARD_N,
  TFM_LAYER_NORM_BACKWARD_NUM_PARAMS
};
enum {
  TFM_CONV_2D_N, TFM_CONV_2D_C, TFM_CONV_2D_H, TFM_CONV_2D_W, TFM_CONV_2D_M,
  TFM_CONV_2D_KH, TFM_CONV_2D_KW, TFM_CONV_2D_GROUPS, TFM_CONV_2D_NUM_PARAMS
};
enum {
  TFM_ATTENTION_B1,
  TFM_ATTENTION_B2,
  TFM_ATTENTION_SQ,
  TFM_ATTENTION_SK,
  TFM_ATTENTION_D,
  TFM_ATTENTION_DV,
  TFM_ATTENTION_FLAGS,
  TFM_ATTENTION_KV_GROUP,
  TFM_ATTENTION_NUM_PARAMS
};

/* ALL_REDUCE. With TFM_ALL_REDUCE_PARTS (1, for gradients that only
 * sharded ADAMs read), a rank's WAIT writes only the part of the member it
 * updates (the elements [r·c, min(n, (r+1)·c)) of rank r, c = ceil(n/N)),
 * and leaves the rest as it was: the ranks reduce-scatter the bucket. Every
 * member of a bucket has the same PARTS. */
enum {
  TFM_ALL_REDUCE_N,
  TFM_ALL_REDUCE_BUCKET,
  TFM_ALL_REDUCE_PHASE,
  TFM_ALL_REDUCE_OFFSET,
  TFM_ALL_REDUCE_BUCKET_ELEMENTS,
  TFM_ALL_REDUCE_BUCKET_MEMBERS,
  TFM_ALL_REDUCE_PARTS,
  TFM_ALL_REDUCE_NUM_PARAMS
};

/* QUANTIZED_LINEAR: sizes, then the epilogue, then a
 * tfm_quantized_linear_flag_t set. */
enum {
  TFM_QUANTIZED_LINEAR_M,
  TFM_QUANTIZED_LINEAR_K,
  TFM_QUANTIZED_LINEAR_N,
  TFM_QUANTIZED_LINEAR_HAS_BIAS,
  TFM_QUANTIZED_LINEAR_ACTIVATION,
  TFM_QUANTIZED_LINEAR_FLAGS,
  TFM_QUANTIZED_LINEAR_BLOCK_SIZE,
  /* With STATIC_INPUT: the input's zero point, 0 to 255. An int8 input's
   * (-128 to 127) is given 128 more: q and z both move by 128, x' not. */
  TFM_QUANTIZED_LINEAR_INPUT_ZERO_POINT,
  TFM_QUANTIZED_LINEAR_NUM_PARAMS
};

/* How a QUANTIZED_LINEAR's weights are stored
 * (params[TFM_QUANTIZED_LINEAR_FLAGS]). */
typedef enum tfm_quantized_linear_flag_t {
  TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS = 1, /* uint8, else int8 */
  TFM_QUANTIZED_LINEAR_PER_ROW = 2, /* a scale (and zero point) per row of w */
  TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT = 4, /* wz is given, else 0 */
  /* x is used as it is: only the weights are quantized. The dynamic
   * quantization of x takes 8-bit weights without blocks. */
  TFM_QUANTIZED_LINEAR_WEIGHT_ONLY = 8,
  TFM_QUANTIZED_LINEAR_FOUR_BIT = 16, /* w and wz hold int4 (uint4) values */
  /* With WEIGHT_ONLY's layouts: x is read with each row's blocks of
   * BLOCK_SIZE (which divides K) rounded to symmetric int8, as
   * tfm.quantized_linear's `blocked` input quantization defines. */
  TFM_QUANTIZED_LINEAR_BLOCKED_INPUT = 32,
  /* x is quantized by a given scale and zero point (QuantizeLinear's), not
   * by its range; the dynamic input's layouts. */
  TFM_QUANTIZED_LINEAR_STATIC_INPUT = 64,
} tfm_quantized_linear_flag_t;

/* The two calls of an ALL_REDUCE member (params[TFM_ALL_REDUCE_PHASE]). */
typedef enum tfm_all_reduce_phase_t {
  TFM_ALL_REDUCE_START = 0,
  TFM_ALL_REDUCE_WAIT = 1,
} tfm_all_reduce_phase_t;

/* The flags of an ATTENTION kernel (params[TFM_ATTENTION_FLAGS]). */
typedef enum tfm_attention_flag_t {
  TFM_ATTENTION_CAUSAL = 1,
  TFM_ATTENTION_HAS_MASK = 2,
  TFM_ATTENTION_MASK_B1 = 4, /* the mask has B1 (else 1) leading rows */
  TFM_ATTENTION_MASK_B2 = 8, /* ... B2 */
  TFM_ATTENTION_MASK_Q = 16, /* ... a row per query (else one for all) */
  /* k and v have B2/G heads (an append to version 5: a flag, so that an
   * older runtime refuses it instead of reading past them) */
  TFM_ATTENTION_GROUPED = 32,
  /* The query, or the keys, are rotated as the kernel loads them (a rotary
   * embedding: x·cos + rotate(x)·sin, with rotate pairing column j with
   * j + D/2, or with INTERLEAVED 2j with 2j + 1), by the tables cos and
   * sin, dense f32 [T1,T2,TS,D]: T1 is B1 with ROTARY_B1 (else 1), T2 the
   * rotated operand's heads with ROTARY_B2, TS its rows with ROTARY_POS.
   * Appends to version 5, as GROUPED. */
  TFM_ATTENTION_ROTARY_Q = 64,
  TFM_ATTENTION_ROTARY_K = 128,
  TFM_ATTENTION_ROTARY_INTERLEAVED = 256,
  TFM_ATTENTION_ROTARY_B1 = 512,
  TFM_ATTENTION_ROTARY_B2 = 1024,
  TFM_ATTENTION_ROTARY_POS = 2048,
  /* k is read as kᵀ (its strides: b1, b2, column), for at most
   * TFM_ATTENTION_FEW_QUERIES queries and without ROTARY_K. Appends to
   * version 5, as GROUPED. */
  TFM_ATTENTION_KEYS_TRANSPOSED = 4096,
} tfm_attention_flag_t;

/* The most queries (Sq) for which ATTENTION reads each key and value once
 * per key head, without blocks: decoding's one query a head, or a few. */
enum { TFM_ATTENTION_FEW_QUERIES = 4 };

/* The activation a LINEAR kernel applies after the bias
 * (params[TFM_LINEAR_ACTIVATION]). */
typedef enum tfm_activation_t {
  TFM_ACTIVATION_NONE = 0,
  TFM_ACTIVATION_RELU = 1,
  TFM_ACTIVATION_GELU = 2,      /* 0.5·x·(1 + erf(x/√2)) */
  TFM_ACTIVATION_GELU_TANH = 3, /* the tanh approximation of GELU */
  TFM_ACTIVATION_SILU = 4,      /* x·sigmoid(x) (SiLU, swish) */
} tfm_activation_t;

/* The sizes of a kernel descriptor's arrays, and the most pointer arguments
 * a kernel takes. */
#define TFM_KERNEL_MAX_PARAMS 8
#define TFM_KERNEL_MAX_FPARAMS 2
#define TFM_KERNEL_MAX_STRIDES 12
#define TFM_KERNEL_MAX_ARGS 8
/* The highest rank a REORDER moves: its strides are two such runs. */
#define TFM_REORDER_MAX_RANK 6

#ifdef __cplusplus
static_assert(TFM_LINEAR_NUM_PARAMS <= TFM_KERNEL_MAX_PARAMS &&
                  TFM_MASKED_SOFTMAX_NUM_PARAMS <= TFM_KERNEL_MAX_PARAMS &&
                  TFM_CONV_2D_NUM_PARAMS <= TFM_KERNEL_MAX_PARAMS &&
                  TFM_ATTENTION_NUM_PARAMS <= TFM_KERNEL_MAX_PARAMS &&
                  TFM_ALL_REDUCE_NUM_PARAMS <= TFM_KERNEL_MAX_PARAMS &&
                  TFM_QUANTIZED_LINEAR_NUM_PARAMS <= TFM_KERNEL_MAX_PARAMS &&
                  TFM_REORDER_DIMS + TFM_REORDER_MAX_RANK <=
                      TFM_KERNEL_MAX_PARAMS,
              "a kind's params fit the descriptor");
#endif

typedef struct tfm_abi_kernel_desc_t {
  int32_t kind; /* a tfm_kernel_kind_t */
  /* The type the kernel multiplies in: TFM_DTYPE_F32; TFM_DTYPE_BF16 for
   * LINEAR, and for a GPU model's LINEAR and BATCH_MATMUL; TFM_DTYPE_F16
   * for a GPU model's LINEAR and BATCH_MATMUL. Buffers hold f32 whatever
   * the type, but for a GEMM's operands under
   * TFM_KERNEL_FLAG_NARROW_OPERANDS. */
  int32_t dtype;
  int64_t params[TFM_KERNEL_MAX_PARAMS];
  double fparams[TFM_KERNEL_MAX_FPARAMS];
  int64_t strides[TFM_KERNEL_MAX_STRIDES]; /* since version 2 */
} tfm_abi_kernel_desc_t;

/* A kernel's flags (tfm_abi_model_t's kernel_flags). */
typedef enum tfm_kernel_flag_t {
  /* Every call of the kernel in the model's code runs kernels of the code's
   * own when run_kernel returns TFM_ABI_STATUS_KERNEL_DECLINED: a session
   * may decline it (a GPU without cuBLASLt, a GEMM the library cannot
   * express, the library turned off). */
  TFM_KERNEL_FLAG_FALLBACK = 1,
  /* A LINEAR's x and w, or a BATCH_MATMUL's a and b, hold the descriptor's
   * dtype (BF16 or F16) instead of f32, rounded before the call; the bias,
   * the residual and the output stay f32. A GPU model's GEMMs under
   * --dtype=bf16 or f16, so that the library reads half the bytes and its
   * 16-bit kernels. A session that cannot read such operands declines the
   * kernel (it then needs TFM_KERNEL_FLAG_FALLBACK). */
  TFM_KERNEL_FLAG_NARROW_OPERANDS = 2,
} tfm_kernel_flag_t;

/* What run_kernel returns for a kernel with TFM_KERNEL_FLAG_FALLBACK that
 * the session does not run; the code then computes it itself. */
#define TFM_ABI_STATUS_KERNEL_DECLINED (-101)

/* Whether a GPU model's LINEAR applies `activation` (a tfm_activation_t)
 * in the GEMM's epilogue: cuBLASLt's epilogues are ReLU and the tanh form
 * of GELU. The compiler applies the others after the call. */
#define TFM_CUDA_LINEAR_FUSES_ACTIVATION(activation)                           \
  ((activation) == TFM_ACTIVATION_NONE ||                                      \
   (activation) == TFM_ACTIVATION_RELU ||                                      \
   (activation) == TFM_ACTIVATION_GELU_TANH)

struct tfm_abi_host_t;
/* Runs kernel `index` of the model on `args` (at most TFM_KERNEL_MAX_ARGS);
 * returns 0 on success. */
typedef int32_t (*tfm_abi_run_kernel_fn_t)(const struct tfm_abi_host_t *host,
                                           int32_t index, void *const *args);

/* Session state (since version 3): what a training step changes and the
 * next step reads. A session allocates `state_bytes`, 64-byte aligned, and
 * fills each slot: a parameter from its initial value in the weights, the
 * other kinds with zeros. */
typedef enum tfm_state_kind_t {
  TFM_STATE_PARAMETER = 1, /* a trainable parameter */
  TFM_STATE_ADAM_M = 2,    /* Adam's first moment of the parameter named */
  TFM_STATE_ADAM_V = 3,    /* Adam's second moment of the parameter named */
  TFM_STATE_STEP = 4,      /* the training step count, an int64 scalar */
  /* A generation cache (an append to version 5): the keys or values one
   * attention has seen, written by the `prefill` and `decode_step` entries
   * at their `position` input. Its first dimension is a multiple of the
   * entries' batch, and the rows of batch row b are the b-th of that many
   * equal contiguous blocks, so a beam search reorders the cache by moving
   * whole blocks. Zeros at the start. */
  TFM_STATE_CACHE = 5,
  /* What an encoder-decoder's decoding steps read of the source (an append
   * to version 5): written by the `encode` entry once per source, read by
   * `prefill` and `decode_step`, never reordered. Zeros at the start. */
  TFM_STATE_SOURCE = 6,
  /* This process's rank in a data-parallel run, an int64 scalar (an append
   * to version 5): 0 in one process, written by
   * tfm_session_set_communicator. Dropout reads it, so that every rank
   * draws its own masks. Like caches, never checkpointed. */
  TFM_STATE_RANK = 7,
  /* Adam's moments of the parameter named when its update is sharded
   * (tfmc --shard-optimizer; an append to version 5): the runtime keeps
   * them outside the state (their offset is 0 and they take no bytes of
   * it), each of N ranks 1/N of the elements. Checkpoints hold them whole,
   * as TFM_STATE_ADAM_M and TFM_STATE_ADAM_V, so a sharded artifact and an
   * unsharded one resume each other's, at any number of ranks. */
  TFM_STATE_ADAM_M_SHARD = 8,
  TFM_STATE_ADAM_V_SHARD = 9,
} tfm_state_kind_t;

typedef struct tfm_abi_state_desc_t {
  tfm_abi_tensor_desc_t tensor; /* its name is the parameter's */
  int32_t kind;                 /* a tfm_state_kind_t */
  uint64_t offset;              /* in the session's state */
  int64_t init_offset;          /* in the weights; -1 for zeros */
} tfm_abi_state_desc_t;

/* A check compiled code makes at run time (since version 4): the indices an
 * op reads (token ids into an embedding, a gather's indices, labels of a
 * loss) lie in [lower, upper). */
typedef struct tfm_abi_check_desc_t {
  const char *op;     /* where the op came from: "node 'Gather_3' (Gather)" */
  const char *tensor; /* what holds the indices: "input 'input_ids'", ... */
  int32_t input;      /* the entry input the indices are, or -1 */
  int64_t lower, upper;
} tfm_abi_check_desc_t;

/* How compiled code reports its checks (tfm_abi_model_t.check_mode):
 *  - TFM_CHECKS_MID_RUN: it stops at the first that fails and calls
 *    host->check_failed (reading the device's result back first on a GPU);
 *  - TFM_CHECKS_IN_STATE: it runs on, every index clamped into range, and
 *    writes each check's outcome to its slot in the session's state, at
 *    check_slots_offset + check * TFM_CHECK_SLOT_BYTES: the first position
 *    out of range and the value there (int64 each), or -1 and -1 when
 *    every index is in range. The runtime sets every slot to -1 before a
 *    run and reads them after it, so nothing is read mid-run and a GPU's
 *    run can be recorded as a graph. */
typedef enum tfm_check_mode_t {
  TFM_CHECKS_MID_RUN = 0,
  TFM_CHECKS_IN_STATE = 1,
} tfm_check_mode_t;
#define TFM_CHECK_SLOT_BYTES 16

/* Called by compiled code when check `check` fails: the element at flat
 * position `position` of the indices holds `value`. Returns the status the
 * entry then returns. */
typedef int32_t (*tfm_abi_check_failed_fn_t)(const struct tfm_abi_host_t *host,
                                             int32_t check, int64_t position,
                                             int64_t value);

/* Launches kernel `kernel` of the model's device code (since version 5) on
 * a grid of grid[0..2] blocks of block[0..2] threads with `shared_bytes` of
 * dynamic shared memory; args[i] points to the value of the kernel's i-th
 * parameter (a device pointer, an integer or a float). Returns 0, or a
 * status that names the kernel through the session. Launches are
 * asynchronous and in order. */
typedef int32_t (*tfm_abi_launch_fn_t)(const struct tfm_abi_host_t *host,
                                       int32_t kernel, const int64_t grid[3],
                                       const int64_t block[3],
                                       int64_t shared_bytes, void **args);

/* Copies `bytes` from device memory at `src` to host memory at `dst` once
 * the launches before it have finished (since version 5). Returns 0 or a
 * status. */
typedef int32_t (*tfm_abi_read_device_fn_t)(const struct tfm_abi_host_t *host,
                                            void *dst, const void *src,
                                            uint64_t bytes);

/* Part of a loop nest of a CPU model's code: its iterations [begin, end)
 * of the outer loop, on the buffers at `args`. */
typedef void (*tfm_abi_task_fn_t)(void *const *args, int64_t begin,
                                  int64_t end);

/* Runs `task` over [0, n) in parts, on the threads of the session's
 * context, and returns when every part has run. The code runs a range
 * itself where a host lacks this field (added to version 5, at its end; the
 * code compares struct_size). */
typedef void (*tfm_abi_parallel_for_fn_t)(const struct tfm_abi_host_t *host,
                                          tfm_abi_task_fn_t task,
                                          void *const *args, int64_t n);

/* A TMA tensor map's tensor and box (an append to version 5), as compiled
 * code asks for it: every field a 64-bit word, so that the code's copy is
 * an array of them. Dims, box and strides run innermost first. */
#define TFM_TENSOR_MAP_MAX_RANK 5
typedef struct tfm_abi_tensor_map_desc_t {
  int64_t dtype;   /* a tfm_dtype_t: TFM_DTYPE_F16, BF16 or F32 */
  int64_t rank;    /* 1 to TFM_TENSOR_MAP_MAX_RANK */
  int64_t swizzle; /* the swizzle's span in bytes: 0 (none), 32, 64, 128 */
  int64_t dims[TFM_TENSOR_MAP_MAX_RANK];
  /* The bytes between neighbours along dims 1 and up; along dim 0 the
   * elements are contiguous. */
  int64_t strides[TFM_TENSOR_MAP_MAX_RANK - 1];
  int64_t box[TFM_TENSOR_MAP_MAX_RANK];
} tfm_abi_tensor_map_desc_t;

/* Where a TMA load reads (an append to version 5): sets `*map` to a
 * tensor map of the tensor `desc` describes at `base`, made once per
 * (base, desc) and kept for the session's life, at an address that the
 * session's device reads (device memory on a GPU, 64-byte aligned: a
 * CUtensorMap that the driver's cuTensorMapEncodeTiled wrote). Returns 0,
 * or a status whose message names what the driver refused. On the CPU,
 * which runs a GPU model's kernels in the emulation, the map is
 * TFM_EMULATED_TENSOR_MAP_WORDS int64 words instead: the base, the dims
 * (TFM_TENSOR_MAP_MAX_RANK of them) and the strides, at the indices
 * below. */
typedef int32_t (*tfm_abi_tensor_map_fn_t)(
    const struct tfm_abi_host_t *host, const tfm_abi_tensor_map_desc_t *desc,
    const void *base, void **map);
#define TFM_EMULATED_TENSOR_MAP_BASE 0
#define TFM_EMULATED_TENSOR_MAP_DIMS 1
#define TFM_EMULATED_TENSOR_MAP_STRIDES                                        \
  (TFM_EMULATED_TENSOR_MAP_DIMS + TFM_TENSOR_MAP_MAX_RANK)
#define TFM_EMULATED_TENSOR_MAP_WORDS                                          \
  (TFM_EMULATED_TENSOR_MAP_STRIDES + TFM_TENSOR_MAP_MAX_RANK - 1)

/* What the runtime hands to compiled code. For a model compiled for a GPU
 * (target TFM_TARGET_CUDA), arena, weights, state and the entry's inputs and
 * outputs are device pointers, which the code only offsets and passes to
 * kernels. */
typedef struct tfm_abi_host_t {
  uint32_t struct_size;
  /* Scratch memory of the entry's arena_bytes, 64-byte aligned. */
  void *arena;
  /* The model's weights, as laid out by the compiler. */
  const void *weights;
  /* Runs the model's kernels; the session's private state rides along. */
  tfm_abi_run_kernel_fn_t run_kernel;
  void *session;
  /* The session's state (since version 3). */
  void *state;
  /* Reports a failed run-time check (since version 4). */
  tfm_abi_check_failed_fn_t check_failed;
  /* The bytes the runtime allocated for the arena, the weights and the
   * state, and for each input and output buffer of the entry (since
   * version 4). The entry compares them with what its code needs, which it
   * knows apart from the metadata, and returns TFM_ABI_STATUS_SIZE_MISMATCH
   * when they differ: a corrupt metadata table cannot make compiled code
   * write past a buffer. */
  uint64_t arena_bytes, weights_bytes, state_bytes;
  const uint64_t *input_bytes, *output_bytes;
  /* The GPU target's launches (since version 5; NULL for a CPU session)
   * and device reads (a plain copy in a CPU session). */
  tfm_abi_launch_fn_t launch;
  tfm_abi_read_device_fn_t read_device;
  /* Runs generated loops on the session's threads (NULL: the code runs
   * them on the calling thread). */
  tfm_abi_parallel_for_fn_t parallel_for;
  /* Makes the tensor maps that TMA loads read (an append to version 5;
   * code that uses TMA returns TFM_ABI_STATUS_NO_TENSOR_MAPS where a host
   * lacks it). */
  tfm_abi_tensor_map_fn_t tensor_map;
} tfm_abi_host_t;

/* What an entry returns when the buffers it was handed are not the sizes
 * its code needs (since version 4). */
#define TFM_ABI_STATUS_SIZE_MISMATCH (-100)
/* What an entry whose kernels read through TMA returns when the runtime
 * that runs it cannot make tensor maps (tfm_abi_host_t.tensor_map). */
#define TFM_ABI_STATUS_NO_TENSOR_MAPS (-101)

/* An entry point. `inputs` and `outputs` hold dense row-major buffers in the
 * order of the descriptors. Returns 0 on success; otherwise it stops at the
 * first failure and returns its status: what run_kernel or check_failed
 * returned. */
typedef int32_t (*tfm_abi_entry_fn_t)(const tfm_abi_host_t *host,
                                      const void *const *inputs,
                                      void *const *outputs);

typedef struct tfm_abi_entry_t {
  const char *name;
  int32_t num_inputs;
  const tfm_abi_tensor_desc_t *inputs;
  int32_t num_outputs;
  const tfm_abi_tensor_desc_t *outputs;
  uint64_t arena_bytes;
  tfm_abi_entry_fn_t fn;
} tfm_abi_entry_t;

/* What a model's code runs on (since version 5). */
typedef enum tfm_target_t {
  TFM_TARGET_CPU = 0,
  TFM_TARGET_CUDA = 1, /* device code: PTX for the driver's JIT */
} tfm_target_t;

/* An entry that serves every size of some dimensions within a range, from
 * static entries compiled for a few sizes each ("buckets"): a run takes the
 * smallest bucket that holds its sizes, pads its inputs with zeros up to
 * the bucket, fills the key masks, and returns the outputs cut back to the
 * run's sizes. The compiler proved the padding exact for every size a
 * bucket serves (docs/dynamic-shapes.md). The static entries stay in
 * `entries` under their own names; the C API lists the dynamic entry in
 * their place. */
typedef struct tfm_abi_dynamic_entry_t {
  const char *name;
  /* The dimension symbols ("sequence"), and the sizes each may take. */
  int32_t num_symbols;
  const char *const *symbols;
  const int64_t *min_sizes;
  const int64_t *max_sizes;
  /* The entry's inputs and outputs: a dim >= 0 is fixed; a dim d < 0 is
   * symbol -1 - d. */
  int32_t num_inputs;
  const tfm_abi_tensor_desc_t *inputs;
  int32_t num_outputs;
  const tfm_abi_tensor_desc_t *outputs;
  /* A bucket's inputs are the entry's, then one key mask per element of
   * key_masks (the symbol it masks): f32 of shape [bucket size], 0 where
   * the position is within the run's size and -inf after it. */
  int32_t num_key_masks;
  const int32_t *key_masks;
  /* The buckets, by increasing size: buckets[i] indexes `entries`, and
   * bucket_sizes[i * num_symbols + s] is its size of symbol s. */
  int32_t num_buckets;
  const int32_t *buckets;
  const int64_t *bucket_sizes;
} tfm_abi_dynamic_entry_t;

typedef struct tfm_abi_model_t {
  uint32_t abi_version; /* TFM_ABI_VERSION the library was built for */
  uint32_t struct_size; /* sizeof(tfm_abi_model_t) in that version */
  const char *producer; /* e.g. "tfmc 0.1.0" */
  int32_t num_entries;
  const tfm_abi_entry_t *entries;
  const void *weights; /* embedded weights, or NULL when external */
  uint64_t weights_bytes;
  const char *external_weights; /* file beside the library, or NULL */
  int32_t num_kernels;
  const tfm_abi_kernel_desc_t *kernels; /* created once per session */
  /* Since version 3. */
  uint64_t state_bytes;
  int32_t num_states;
  const tfm_abi_state_desc_t *states;
  /* Since version 4. */
  int32_t num_checks;
  const tfm_abi_check_desc_t *checks;
  /* Since version 5. */
  int32_t target; /* a tfm_target_t */
  /* TFM_TARGET_CUDA: the architecture the device code was built for
   * ("sm_80"), the PTX text (NUL-terminated; device_code_bytes counts the
   * NUL) and the names of its kernels, which launches index. */
  const char *device_arch;
  const char *device_code;
  uint64_t device_code_bytes;
  int32_t num_device_kernels;
  const char *const *device_kernels;
  /* An append to version 5, absent when struct_size ends before it: for a
   * model compiled for generation, the longest sequence its caches hold;
   * 0 otherwise. Such a model has the entries `prefill` (a chunk of
   * tokens) and `decode_step` (one token), each with the inputs (token ids
   * [B, C] as int64, position as an int64 scalar: where the chunk starts)
   * and the output logits [B, C, V], in that order. An encoder-decoder also
   * has `encode` (source ids [B, S'] as int64, no outputs), run once per
   * source before the prompt. */
  int64_t generation_max_length;
  /* A second append to version 5, absent when struct_size ends before it:
   * the entries that serve a range of sizes (below). */
  int32_t num_dynamic_entries;
  const tfm_abi_dynamic_entry_t *dynamic_entries;
  /* A third append to version 5, absent when struct_size ends before it:
   * for each of the num_kernels kernels, where in the model it came from,
   * for profiles ("node 'MatMul_3' (MatMul), node 'Add_4' (Add)"; the
   * nodes of every call of a descriptor that several layers share); NULL
   * when unknown. */
  const char *const *kernel_origins;
  /* A fourth append to version 5, absent when struct_size ends before it:
   * for each of the num_kernels kernels, its tfm_kernel_flag_t bits; NULL
   * when none has a flag. */
  const uint32_t *kernel_flags;
  /* A fifth append to version 5, absent when struct_size ends before it:
   * for each of the num_device_kernels kernels, where in the model it came
   * from, as kernel_origins; NULL when unknown. */
  const char *const *device_kernel_origins;
  /* A sixth append to version 5, absent when struct_size ends before it:
   * how the code reports its checks (a tfm_check_mode_t), and for
   * TFM_CHECKS_IN_STATE where their slots begin in the state. */
  int32_t check_mode;
  uint64_t check_slots_offset;
  /* A seventh append to version 5, absent when struct_size ends before it:
   * the CPU the model's code was generated for ("x86-64-v3", or the build
   * host's name for --cpu=native), and the features of TFM_CPU_FEATURES it
   * was allowed to use, comma-separated ("avx,avx2,fma"). The runtime
   * refuses to load a model whose features the running CPU lacks, which
   * would die on an illegal instruction. */
  const char *cpu;
  const char *cpu_features;
  /* An eighth append to version 5, absent when struct_size ends before it:
   * what each input of each entry takes, for tools that make up inputs
   * (tfmc run without data): three values per input, entries in order and
   * their inputs in order: a tfm_input_values_t (tfm/dtype.h), then for
   * TFM_INPUT_VALUES_INDICES the range [lower, upper) that the ops reading
   * them accept (0, 0 otherwise). NULL when no input says anything. */
  const int64_t *input_values;
} tfm_abi_model_t;

/* The x86-64 features a model's code may use and the runtime checks before
 * running it: X(name as LLVM spells it, CPUID leaf, subleaf, register
 * (0 EAX, 1 EBX, 2 ECX, 3 EDX), bit, the XCR0 bits the operating system
 * must have enabled for the registers it uses). Features that no ordinary
 * code is compiled into (AMX, say) are left out. */
#define TFM_CPU_FEATURES(X)                                                    \
  X("sse3", 1, 0, 2, 0, 0)                                                     \
  X("pclmul", 1, 0, 2, 1, 0)                                                   \
  X("ssse3", 1, 0, 2, 9, 0)                                                    \
  X("fma", 1, 0, 2, 12, 0x6)                                                   \
  X("cx16", 1, 0, 2, 13, 0)                                                    \
  X("sse4.1", 1, 0, 2, 19, 0)                                                  \
  X("sse4.2", 1, 0, 2, 20, 0)                                                  \
  X("movbe", 1, 0, 2, 22, 0)                                                   \
  X("popcnt", 1, 0, 2, 23, 0)                                                  \
  X("aes", 1, 0, 2, 25, 0)                                                     \
  X("xsave", 1, 0, 2, 26, 0)                                                   \
  X("avx", 1, 0, 2, 28, 0x6)                                                   \
  X("f16c", 1, 0, 2, 29, 0x6)                                                  \
  X("bmi", 7, 0, 1, 3, 0)                                                      \
  X("avx2", 7, 0, 1, 5, 0x6)                                                   \
  X("bmi2", 7, 0, 1, 8, 0)                                                     \
  X("avx512f", 7, 0, 1, 16, 0xe6)                                              \
  X("avx512dq", 7, 0, 1, 17, 0xe6)                                             \
  X("avx512ifma", 7, 0, 1, 21, 0xe6)                                           \
  X("avx512cd", 7, 0, 1, 28, 0xe6)                                             \
  X("avx512bw", 7, 0, 1, 30, 0xe6)                                             \
  X("avx512vl", 7, 0, 1, 31, 0xe6)                                             \
  X("avx512vbmi", 7, 0, 2, 1, 0xe6)                                            \
  X("avx512vbmi2", 7, 0, 2, 6, 0xe6)                                           \
  X("gfni", 7, 0, 2, 8, 0)                                                     \
  X("vaes", 7, 0, 2, 9, 0x6)                                                   \
  X("vpclmulqdq", 7, 0, 2, 10, 0x6)                                            \
  X("avx512vnni", 7, 0, 2, 11, 0xe6)                                           \
  X("avx512bitalg", 7, 0, 2, 12, 0xe6)                                         \
  X("avx512vpopcntdq", 7, 0, 2, 14, 0xe6)                                      \
  X("avx512vp2intersect", 7, 0, 3, 8, 0xe6)                                    \
  X("avx512fp16", 7, 0, 3, 23, 0xe6)                                           \
  X("avxvnni", 7, 1, 0, 4, 0x6)                                                \
  X("avx512bf16", 7, 1, 0, 5, 0xe6)                                            \
  X("sahf", 0x80000001u, 0, 2, 0, 0)                                           \
  X("lzcnt", 0x80000001u, 0, 2, 5, 0)

/* The smallest model description this runtime reads: version 5 before its
 * appends (a shorter struct_size leaves the appended fields at zero). */
#define TFM_ABI_MODEL_MIN_SIZE offsetof(tfm_abi_model_t, generation_max_length)

typedef const tfm_abi_model_t *(*tfm_abi_model_fn_t)(void);

#ifdef __cplusplus
}
#endif

#endif /* TFM_ABI_H */
