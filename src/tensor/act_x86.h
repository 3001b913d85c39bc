/*
 * act_x86.h — the gated unit's activation with x86 vectors; included by
 * vec_dot_x86.h after attn_x86.h (whose exponentials it uses), so built
 * 512-bit and 256-bit like it.
 *
 * silu(x) = x / (1 + e^-x) from t = e^-|x| (an argument <= 0, which is
 * what exp_neg handles): x / (1 + t) for x >= 0, x t / (1 + t) below.
 * Every lane is computed the same way, so a value's result does not depend
 * on where its run is cut. Within 2 ulp of the scalar expf version; very
 * negative x give a tiny negative (e^-87 is the floor) instead of -0.
 */
#ifndef KVIK_ACT_X86_H
#define KVIK_ACT_X86_H

#ifdef __AVX512F__

static inline __m512 silu_mul_ps512(__m512 x, __m512 u) {
    __m512 t = exp_neg_ps512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 num = _mm512_mask_mul_ps(x, neg, x, t);
    return _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), t)), u);
}

static void silu_mul_x86(float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(gate + i, silu_mul_ps512(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        __m512 r = silu_mul_ps512(_mm512_maskz_loadu_ps(k, gate + i), _mm512_maskz_loadu_ps(k, up + i));
        _mm512_mask_storeu_ps(gate + i, k, r);
    }
}

#else /* AVX2 */

static inline __m256 silu_mul_ps(__m256 x, __m256 u) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 t = exp_neg_ps(_mm256_or_ps(x, sign)); /* -|x| */
    __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, t), neg);
    return _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), t)), u);
}

static void silu_mul_x86(float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(gate + i, silu_mul_ps(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    for (; i < n; i++) { /* the tail one lane at a time, same lane arithmetic */
        __m256 r = silu_mul_ps(_mm256_set1_ps(gate[i]), _mm256_set1_ps(up[i]));
        gate[i] = _mm256_cvtss_f32(r);
    }
}

#endif /* __AVX512F__ */

#endif /* KVIK_ACT_X86_H */
