/*===- CounterRNG.h - The counter-based generator behind dropout -*- C -*-===*\
|*                                                                            *|
|* Dropout must draw the same mask in the reference interpreter, in compiled  *|
|* CPU code and on the GPU, and must not depend on evaluation order. A        *|
|* counter-based generator gives that: the value for element `i` under seed   *|
|* `s` is a pure function of (s, i). This header is plain C so that every     *|
|* backend, and applications, can include it.                                 *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef TFM_COUNTERRNG_H
#define TFM_COUNTERRNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One round of the splitmix64 finalizer: a bijection on 64-bit words whose
 * output passes common statistical batteries for consecutive inputs. */
static inline uint64_t tfm_rng_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* A uniform double in [0, 1) for element `counter` of the stream `seed`. */
static inline double tfm_rng_uniform(uint64_t seed, uint64_t counter) {
  uint64_t z = tfm_rng_mix64(seed ^ tfm_rng_mix64(counter));
  return (double)(z >> 11) * (1.0 / 9007199254740992.0); /* 2^-53 */
}

/* The stream of training step `step` under `seed`: dropout draws a fresh
 * mask at every step while staying a pure function of (seed, step, i). */
static inline uint64_t tfm_rng_stream(uint64_t seed, uint64_t step) {
  return tfm_rng_mix64(seed ^ tfm_rng_mix64(step ^ 0xD1B54A32D192ED03ull));
}

#ifdef __cplusplus
}
#endif

#endif /* TFM_COUNTERRNG_H */
