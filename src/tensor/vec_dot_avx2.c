/*
 * vec_dot_avx2.c — dot-product kernels for AVX2 + FMA + F16C machines
 * (Haswell, Zen 1 and later). The kernels themselves are in vec_dot_x86.h;
 * this file supplies the integer primitives from maddubs (u8 x s8 -> i16
 * pairs) and madd (i16 x i16 -> i32 pairs). maddubs saturates at ±32767,
 * which no block format here can reach (largest: 63 * 128 * 2 = 16128).
 */
#ifndef KVIK_NO_SIMD
#include <immintrin.h>

#include "base/base.h"

static inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

static inline __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i k) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), k));
}

/* Mat-mat tile: weight rows x activation rows per call (see vec_dot_x86.h). */
#define TILE_R 2
#define TILE_C 4

#include "tensor/vec_dot_x86.h"

void tensor_kernels_init_avx2(struct tensor_kernels *k) {
    k->name = "avx2";
    k->isa = TENSOR_ISA_AVX2;
    fill_x86_kernels(k);
}
#endif
