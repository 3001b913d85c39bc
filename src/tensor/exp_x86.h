/*
 * exp_x86.h — e^x for the softmax's arguments (x <= 0) with x86 vectors,
 * 256- and 512-bit; shared by the attention kernels (attn_x86.h,
 * attn_amx.c) and the activations (act_x86.h), so that every one of them
 * computes each lane the same way.
 */
#ifndef KVIK_EXP_X86_H
#define KVIK_EXP_X86_H

#include <immintrin.h>

/* e^x for x <= 0 (softmax arguments): x = n ln2 + r with |r| <= ln2/2,
 * e^r by its degree-6 Taylor polynomial (relative error < 2e-7), times 2^n
 * built in the exponent field. Arguments below -87 give e^-87 (~1.6e-38)
 * rather than denormals; the kernels zero the lanes that must be 0. A NaN
 * argument gives NaN (a NaN score must not become a weight of e^-87). */
static inline __m256 exp_neg_ps(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x); /* a NaN x stays NaN (maxps returns its second operand) */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x); /* ln2 high part */
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);    /* ln2 low part */
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#ifdef __AVX512F__

/* exp_neg_ps on 16 lanes, 2^n applied by vscalefps. */
static inline __m512 exp_neg_ps512(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x); /* a NaN x stays NaN */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

#endif /* __AVX512F__ */

#endif /* KVIK_EXP_X86_H */
