/*===- dtype.h - Element types of tfm tensors ----------------------*- C -*-===*\
|*                                                                            *|
|* The element types a tensor crosses the runtime's API and the model ABI    *|
|* with; both headers include this one, so the codes are written once.       *|
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

#ifdef __cplusplus
}
#endif

#endif /* TFM_DTYPE_H */
