/*===- dtype.h - Element types of tfm tensors ----------------------*- C -*-===*\
|*                                                                            *|
|* The element types a tensor crosses the runtime's API and the model ABI    *|
|* with; both headers include this one, so the codes are written once.       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef TFM_DTYPE_H
#define TFM_DTYPE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; the values are part of the ABI. */
typedef enum tfm_dtype_t {
  TFM_DTYPE_F32 = 1,
  TFM_DTYPE_F16 = 2,
  TFM_DTYPE_BF16 = 3,
  TFM_DTYPE_I32 = 4,
  TFM_DTYPE_I64 = 5,
  TFM_DTYPE_BOOL = 6,
} tfm_dtype_t;

#ifdef __cplusplus
}
#endif

#endif /* TFM_DTYPE_H */
