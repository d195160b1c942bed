/*===- dtype.h - Element types of tfm tensors ----------------------*- C
-*-===*\
|*                                                                            *|
|* The element types a tensor crosses the runtime's API and the model ABI     *|
|* with, and what values an input takes; both headers include this one, so    *|
|* the codes are written once.                                                *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef TFM_DTYPE_H
#define TFM_DTYPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; the values are part of the ABI. C++ sees the type C has
 * (a 32-bit int), so that an unknown value, from a C caller or a corrupt
 * model, is a value the functions refuse rather than undefined behaviour. */
#ifdef __cplusplus
typedef enum tfm_dtype_t : int32_t {
#else
typedef enum tfm_dtype_t {
#endif
  TFM_DTYPE_F32 = 1,
  TFM_DTYPE_F16 = 2,
  TFM_DTYPE_BF16 = 3,
  TFM_DTYPE_I32 = 4,
  TFM_DTYPE_I64 = 5,
  TFM_DTYPE_BOOL = 6,
  TFM_DTYPE_F64 = 7,
  TFM_DTYPE_I8 = 8,
  TFM_DTYPE_I16 = 9,
  TFM_DTYPE_U8 = 10,
  TFM_DTYPE_U16 = 11,
  TFM_DTYPE_U32 = 12,
  TFM_DTYPE_U64 = 13,
} tfm_dtype_t;

/* What an entry input takes (tfm_module_entry_input_values;
 * tfm_abi_model_t.input_values); the values are part of the ABI. */
typedef enum tfm_input_values_t {
  TFM_INPUT_VALUES_ANY = 0, /* any value of its type */
  /* Indices into a table (token ids), a loss's classes, a cache position:
   * runs check them against [lower, upper). */
  TFM_INPUT_VALUES_INDICES = 1,
  /* A mask, read as 1 (or true) where it keeps a position: all ones keeps
   * every position, where random values would mask whole rows. */
  TFM_INPUT_VALUES_MASK = 2,
} tfm_input_values_t;

#ifdef __cplusplus
}
#endif

#endif /* TFM_DTYPE_H */
