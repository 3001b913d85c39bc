/*
 * vec_dot_avx512.c — dot-product kernels for AVX-512 machines with VNNI
 * (Ice Lake, Zen 4 and later). The shared kernels of vec_dot_x86.h get their
 * integer primitives from vpdpbusd (u8 x s8, four products summed into i32)
 * and vpdpwssd (i16 pairs into i32), one instruction each where AVX2 needs
 * two or three.
 *
 * The kernels stay 256 bits wide. Versions of Q4_0, Q8_0 and Q4_K that put
 * two blocks in one 512-bit register were measured 10-30% slower on the
 * development machine (a virtualised Xeon): the per-block scale work, not
 * the integer width, bounds these kernels, and 512-bit assembly costs extra
 * shuffles. Revisit with a repacked weight layout.
 */
#ifndef KVIK_NO_SIMD
#include <immintrin.h>

#include "base/base.h"

static inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}

/* vpdpbusd adds the four 16-bit products without saturating. */
#define DOT_U8S8_FULL_RANGE 1

static inline __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i k) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), k);
}

/* Mat-mat tile: weight rows x activation rows per call (see vec_dot_x86.h). */
#define TILE_R 4
#define TILE_C 4

#include "tensor/vec_dot_x86.h"

void tensor_kernels_init_avx512(struct tensor_kernels *k) {
    k->name = "avx512-vnni";
    k->isa = TENSOR_ISA_AVX512;
    fill_x86_kernels(k);
}
#endif
