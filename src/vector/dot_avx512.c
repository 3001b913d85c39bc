/*
 * dot_avx512.c — the vector store's dot products with AVX-512: sixteen
 * lanes, two accumulators, a masked tail; the unsigned-by-signed byte
 * product with VNNI (exact in int32).
 */
#include "vector/dot.h"

#ifndef KVIK_NO_SIMD
#include <immintrin.h>

float vec_dot_f32_avx512(const float *a, const float *b, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

float vec_dot_f16_avx512(const float *q, const uint16_t *v, int n) {
    __m512 s0 = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, v + i));
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), x, s0);
    }
    return _mm512_reduce_add_ps(s0);
}

float vec_dot_i8_avx512(const float *q, const int8_t *v, int n) {
    __m512 s0 = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, v + i)));
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), x, s0);
    }
    return _mm512_reduce_add_ps(s0);
}

int32_t vec_dot_u8i8_vnni(const uint8_t *a, const int8_t *b, int n) {
    __m512i s0 = _mm512_setzero_si512();
    int i = 0;
    for (; i + 64 <= n; i += 64)
        s0 = _mm512_dpbusd_epi32(s0, _mm512_loadu_si512(a + i), _mm512_loadu_si512(b + i));
    if (i < n) {
        __mmask64 m = (__mmask64)(~0ull >> (64 - (n - i)));
        s0 = _mm512_dpbusd_epi32(s0, _mm512_maskz_loadu_epi8(m, a + i), _mm512_maskz_loadu_epi8(m, b + i));
    }
    return _mm512_reduce_add_epi32(s0);
}
#endif
