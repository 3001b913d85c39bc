/*
 * act_x86.h — the gated unit's activation with x86 vectors (512- and
 * 256-bit) and the greedy sampler's argmax (512-bit; the AVX2 table keeps
 * the scalar one); included by vec_dot_x86.h after attn_x86.h, with the
 * exponentials of exp_x86.h.
 *
 * argmax: each lane keeps its first maximum (strict >, which a NaN never
 * passes), then the largest lane wins, the lowest index among equals: the
 * first index of the maximum, as the scalar loop finds it.
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

/* gate[i] = op(gate[i], up[i]) over n values, 16 lanes a step, the tail
 * masked (each lane computed alike wherever the run is cut). */
static inline __attribute__((always_inline)) void glu_loop_x86(float *gate, const float *up, int64_t n,
                                                               __m512 (*op)(__m512, __m512)) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(gate + i, op(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(gate + i, k, op(_mm512_maskz_loadu_ps(k, gate + i), _mm512_maskz_loadu_ps(k, up + i)));
    }
}

static void silu_mul_x86(float *gate, const float *up, int64_t n) { glu_loop_x86(gate, up, n, silu_mul_ps512); }

/* gelu(x) u = x sigmoid(z) u, z = c (x + a x^3), sigmoid from t = e^-|z|. */
static inline __m512 gelu_mul_ps512(__m512 x, __m512 u) {
    const __m512 c = _mm512_set1_ps(2.0f * 0.7978845608028654f), a = _mm512_set1_ps(0.044715f);
    __m512 z = _mm512_mul_ps(c, _mm512_add_ps(x, _mm512_mul_ps(a, _mm512_mul_ps(_mm512_mul_ps(x, x), x))));
    __m512 t = exp_neg_ps512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(z)));
    __mmask16 neg = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 num = _mm512_mask_mul_ps(x, neg, x, t);
    return _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), t)), u);
}

static void gelu_mul_x86(float *gate, const float *up, int64_t n) { glu_loop_x86(gate, up, n, gelu_mul_ps512); }

/* gelu(x) = x (1 + erf(x / sqrt 2)) / 2 with erf by Abramowitz and Stegun
 * 7.1.26 (|error| < 1.5e-7): for y = |x| / sqrt 2, t = 1 / (1 + p y),
 * 1 - erf(y) = (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) e^-y^2 =: c, so
 * gelu(x) = x (2 - c) / 2 for x >= 0 and x c / 2 below (no cancellation in
 * the negative tail). The second argument is not read. */
static inline __m512 gelu_erf_ps512(__m512 x, __m512 unused) {
    (void)unused;
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 y = _mm512_abs_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
    __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), y, one));
    __m512 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    __m512 c = _mm512_mul_ps(_mm512_mul_ps(p, t), exp_neg_ps512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(y, y))));
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 f = _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(2.0f), c), neg, c);
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), f);
}

static void gelu_erf_x86(float *x, int64_t n) { glu_loop_x86(x, x, n, gelu_erf_ps512); }

/* rope: eight pairs a vector. Even lanes x0 c - x1 s, odd lanes x1 c + x0 s
 * (the scalar x0 s + x1 c: the same two rounded products, added). */
static void rope_x86(float *x, const float *cs, int64_t n) {
    const __mmask16 odd = 0xAAAA;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i), a = _mm512_maskz_loadu_ps(k, cs + i);
        __m512 t1 = _mm512_mul_ps(v, _mm512_moveldup_ps(a));                              /* x0 c, x1 c */
        __m512 t2 = _mm512_mul_ps(_mm512_permute_ps(v, 0xB1), _mm512_movehdup_ps(a));     /* x1 s, x0 s */
        _mm512_mask_storeu_ps(x + i, k, _mm512_mask_add_ps(_mm512_sub_ps(t1, t2), odd, t1, t2));
    }
}

static int64_t argmax_x86(const float *x, int64_t n) {
    float x0 = x[0] != x[0] ? -INFINITY : x[0];
    __m512 bv = _mm512_set1_ps(x0);
    __m512i bi = _mm512_setzero_si512(), idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_set1_epi32(16);
    int64_t i = 0;
    if (n <= INT32_MAX - 16)
        for (; i + 16 <= n; i += 16, idx = _mm512_add_epi32(idx, step)) {
            __m512 v = _mm512_loadu_ps(x + i);
            __mmask16 gt = _mm512_cmp_ps_mask(v, bv, _CMP_GT_OQ);
            bv = _mm512_mask_mov_ps(bv, gt, v);
            bi = _mm512_mask_mov_epi32(bi, gt, idx);
        }
    float best_v = _mm512_reduce_max_ps(bv);
    __mmask16 at = _mm512_cmp_ps_mask(bv, _mm512_set1_ps(best_v), _CMP_EQ_OQ);
    int64_t best = _mm512_mask_reduce_min_epi32(at, bi);
    for (; i < n; i++)
        if (x[i] > best_v) best_v = x[i], best = i;
    return best;
}

#else /* AVX2 */

static inline __m256 silu_mul_ps(__m256 x, __m256 u) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 t = exp_neg_ps(_mm256_or_ps(x, sign)); /* -|x| */
    __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, t), neg);
    return _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), t)), u);
}

/* As the 512-bit loop, 8 lanes a step, the tail one lane at a time. */
static inline __attribute__((always_inline)) void glu_loop_x86(float *gate, const float *up, int64_t n,
                                                               __m256 (*op)(__m256, __m256)) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, op(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    for (; i < n; i++) gate[i] = _mm256_cvtss_f32(op(_mm256_set1_ps(gate[i]), _mm256_set1_ps(up[i])));
}

static void silu_mul_x86(float *gate, const float *up, int64_t n) { glu_loop_x86(gate, up, n, silu_mul_ps); }

static inline __m256 gelu_mul_ps(__m256 x, __m256 u) {
    const __m256 c = _mm256_set1_ps(2.0f * 0.7978845608028654f), a = _mm256_set1_ps(0.044715f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 z = _mm256_mul_ps(c, _mm256_add_ps(x, _mm256_mul_ps(a, _mm256_mul_ps(_mm256_mul_ps(x, x), x))));
    __m256 t = exp_neg_ps(_mm256_or_ps(z, sign)); /* -|z| */
    __m256 neg = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, t), neg);
    return _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), t)), u);
}

static void gelu_mul_x86(float *gate, const float *up, int64_t n) { glu_loop_x86(gate, up, n, gelu_mul_ps); }

/* gelu_erf_ps512 on 8 lanes. */
static inline __m256 gelu_erf_ps(__m256 x, __m256 unused) {
    (void)unused;
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    __m256 y = _mm256_andnot_ps(sign, _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), y, one));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    __m256 c = _mm256_mul_ps(_mm256_mul_ps(p, t), exp_neg_ps(_mm256_or_ps(_mm256_mul_ps(y, y), sign)));
    __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 f = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), c), c, neg);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), f);
}

static void gelu_erf_x86(float *x, int64_t n) { glu_loop_x86(x, x, n, gelu_erf_ps); }

#endif /* __AVX512F__ */

#endif /* KVIK_ACT_X86_H */
