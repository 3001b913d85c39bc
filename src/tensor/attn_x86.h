/*
 * attn_x86.h — one query head's attention with 256-bit vectors; included by
 * vec_dot_x86.h (so built for AVX2 and for AVX-512). The three passes of
 * attn_head_scalar:
 *   1. scores: eight K rows at a time, eight dot products reduced together
 *      (one horizontal-add tree per eight positions instead of eight);
 *   2. softmax: exp of (score - max) with a vector exponential (below);
 *   3. out = sum_j p_j v_j, 64 output floats (eight registers) at a time.
 * Head sizes that are not a multiple of 8 go to the scalar kernel.
 */
#ifndef KVIK_ATTN_X86_H
#define KVIK_ATTN_X86_H

/* e^x for x <= 0 (softmax arguments): x = n ln2 + r with |r| <= ln2/2,
 * e^r by its degree-6 Taylor polynomial (relative error < 2e-7), times 2^n
 * built in the exponent field. Arguments below -87 give e^-87 (~1.6e-38)
 * rather than denormals; they vanish in the sum anyway. */
static inline __m256 exp_neg_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
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

/* Eight vectors -> one vector of their eight horizontal sums, in order. */
static inline __m256 hsum8_ps(const __m256 a[8]) {
    __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 v = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u, v, 0x20), _mm256_permute2f128_ps(u, v, 0x31));
}

static void attn_head_x86(int hd, const float *restrict q, const struct attn_span *spans, int n_spans,
                          size_t stride, float scale, float *restrict scores, float *restrict out) {
    if (hd % 8 != 0) {
        attn_head_scalar(hd, q, spans, n_spans, stride, scale, scores, out);
        return;
    }
    /* 1. scores */
    const __m256 vscale = _mm256_set1_ps(scale);
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int n = 0;
    for (int s = 0; s < n_spans; s++) {
        const float *k = spans[s].k;
        int j = 0;
        for (; j + 8 <= spans[s].n; j += 8) {
            __m256 acc[8];
            for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
            for (int d = 0; d < hd; d += 8) {
                __m256 qv = _mm256_loadu_ps(q + d);
                for (int i = 0; i < 8; i++)
                    acc[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + (size_t)(j + i) * stride + d), acc[i]);
            }
            __m256 sc = _mm256_mul_ps(hsum8_ps(acc), vscale);
            _mm256_storeu_ps(scores + n, sc);
            vmax = _mm256_max_ps(vmax, sc);
            n += 8;
        }
        for (; j < spans[s].n; j++, n++) {
            __m256 acc = _mm256_setzero_ps();
            for (int d = 0; d < hd; d += 8)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + (size_t)j * stride + d), acc);
            scores[n] = hsum_ps(acc) * scale;
            vmax = _mm256_max_ps(vmax, _mm256_set1_ps(scores[n]));
        }
    }
    /* 2. softmax weights (unnormalised) and their sum */
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const __m256 bmax = _mm256_set1_ps(_mm_cvtss_f32(m4));
    __m256 vsum = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp_neg_ps(_mm256_sub_ps(_mm256_loadu_ps(scores + j), bmax));
        _mm256_storeu_ps(scores + j, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    if (j < n) { /* the tail through a masked vector (scores has 8 spare floats) */
        for (int i = n; i < j + 8; i++) scores[i] = 0.0f;
        __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n - j),
                                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        __m256 e = _mm256_and_ps(exp_neg_ps(_mm256_sub_ps(_mm256_loadu_ps(scores + j), bmax)), keep);
        _mm256_storeu_ps(scores + j, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    const float inv = 1.0f / hsum_ps(vsum);
    /* 3. weighted sum of V rows, 64 output floats at a time */
    for (int d0 = 0; d0 < hd; d0 += 64) {
        int w = hd - d0 < 64 ? (hd - d0) / 8 : 8;
        __m256 acc[8];
        for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
        int pos = 0;
        for (int s = 0; s < n_spans; s++) {
            const float *v = spans[s].v + d0;
            for (int jj = 0; jj < spans[s].n; jj++, pos++) {
                __m256 p = _mm256_set1_ps(scores[pos]);
                const float *row = v + (size_t)jj * stride;
                if (w == 8) {
                    for (int i = 0; i < 8; i++) acc[i] = _mm256_fmadd_ps(p, _mm256_loadu_ps(row + 8 * i), acc[i]);
                } else {
                    for (int i = 0; i < w; i++) acc[i] = _mm256_fmadd_ps(p, _mm256_loadu_ps(row + 8 * i), acc[i]);
                }
            }
        }
        const __m256 vinv = _mm256_set1_ps(inv);
        for (int i = 0; i < w; i++) _mm256_storeu_ps(out + d0 + 8 * i, _mm256_mul_ps(acc[i], vinv));
    }
}

#endif /* KVIK_ATTN_X86_H */
