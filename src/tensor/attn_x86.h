/*
 * attn_x86.h — the tiled attention kernel with x86 vectors; included by
 * vec_dot_x86.h, so built twice: 512-bit where the file is compiled for
 * AVX-512 (__AVX512F__), 256-bit for AVX2. Same tiles and the same per-row
 * update as attn_scalar.c; what the vectors change:
 *
 *   - a tile's K and V rows are converted once for all rows of the call:
 *     F16 by vcvtph2ps, Q8_0 a 32-value block at a time (bytes widened to
 *     int32, to float, times the block scale); F32 rows are read in place;
 *   - the 16 scores of a row are 16 dot products reduced together (one
 *     transpose-and-add tree instead of 16 horizontal sums); positions past
 *     the row's last are masked to -inf before the maximum and to 0 after
 *     the exponential, so every lane is computed the same way whichever
 *     rows share the call;
 *   - out = alpha out + sum_j p_j v_j, 64 output floats in registers at a
 *     time, positions in order.
 * Head sizes that are not a multiple of the vector width go to attn_scalar.
 */
#ifndef KVIK_ATTN_X86_H
#define KVIK_ATTN_X86_H

/* e^x for x <= 0 (softmax arguments): x = n ln2 + r with |r| <= ln2/2,
 * e^r by its degree-6 Taylor polynomial (relative error < 2e-7), times 2^n
 * built in the exponent field. Arguments below -87 give e^-87 (~1.6e-38)
 * rather than denormals; the kernels zero the lanes that must be 0. */
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

#ifdef __AVX512F__

enum { ATTN_VW = 16 }; /* floats per vector */

/* exp_neg_ps on 16 lanes, 2^n applied by vscalefps. */
static inline __m512 exp_neg_ps512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
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

/* Sixteen vectors -> one vector of their sixteen horizontal sums, in order:
 * pairs interleaved and added (8 vectors of 2 positions), then pairs of
 * pairs (4 of 4 positions per 128-bit lane), then the 128-bit lanes. */
static inline __m512 hsum16_ps512(const __m512 a[16]) {
    __m512 t[8], u[4];
    for (int i = 0; i < 8; i++)
        t[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) {
        __m512d x = _mm512_castps_pd(t[2 * i]), y = _mm512_castps_pd(t[2 * i + 1]);
        u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
    __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xDD));
}

/* One cached row (hd values, hd a multiple of 16) as floats. */
static inline void attn_row_to_float(int type, const uint8_t *src, float *dst, int hd) {
    if (type == TENSOR_TYPE_F16) {
        for (int d = 0; d < hd; d += 16)
            _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 2 * d))));
    } else { /* Q8_0 */
        const block_q8_0 *b = (const block_q8_0 *)src;
        for (int i = 0; i < hd / QK; i++) {
            __m512 scale = _mm512_set1_ps(f16t(b[i].d));
            for (int h = 0; h < 2; h++) {
                __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b[i].qs + 16 * h)));
                _mm512_storeu_ps(dst + i * QK + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale));
            }
        }
    }
}

/* One row's update by the first n positions of a tile (k has 16 readable
 * rows; v the first n). */
static inline void attn_row_tile(int hd, float scale, const float *q, const float *const *k, const float *const *v,
                                 int n, float *m, float *l, float *out, float *p) {
    __m512 acc[16];
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 16) {
        __m512 qv = _mm512_loadu_ps(q + d);
        for (int j = 0; j < 16; j++) acc[j] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k[j] + d), acc[j]);
    }
    __mmask16 valid = (__mmask16)((1u << n) - 1);
    __m512 s = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), valid, hsum16_ps512(acc), _mm512_set1_ps(scale));
    float mt = _mm512_reduce_max_ps(s), mn = *m > mt ? *m : mt;
    __m512 e = _mm512_maskz_mov_ps(valid, exp_neg_ps512(_mm512_sub_ps(s, _mm512_set1_ps(mn))));
    float alpha = *m == -INFINITY ? 0.0f : _mm512_cvtss_f32(exp_neg_ps512(_mm512_set1_ps(*m - mn)));
    *l = *l * alpha + _mm512_reduce_add_ps(e);
    *m = mn;
    _mm512_storeu_ps(p, e);
    const __m512 va = _mm512_set1_ps(alpha);
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(out + d0), va);
        __m512 a1 = _mm512_mul_ps(_mm512_loadu_ps(out + d0 + 16), va);
        __m512 a2 = _mm512_mul_ps(_mm512_loadu_ps(out + d0 + 32), va);
        __m512 a3 = _mm512_mul_ps(_mm512_loadu_ps(out + d0 + 48), va);
        for (int j = 0; j < n; j++) {
            __m512 pj = _mm512_set1_ps(p[j]);
            const float *vr = v[j] + d0;
            a0 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr), a0);
            a1 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 16), a1);
            a2 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 32), a2);
            a3 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 48), a3);
        }
        _mm512_storeu_ps(out + d0, a0);
        _mm512_storeu_ps(out + d0 + 16, a1);
        _mm512_storeu_ps(out + d0 + 32, a2);
        _mm512_storeu_ps(out + d0 + 48, a3);
    }
    for (; d0 < hd; d0 += 16) {
        __m512 a = _mm512_mul_ps(_mm512_loadu_ps(out + d0), va);
        for (int j = 0; j < n; j++) a = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v[j] + d0), a);
        _mm512_storeu_ps(out + d0, a);
    }
}

#else /* AVX2 */

enum { ATTN_VW = 8 };

/* Eight vectors -> one vector of their eight horizontal sums, in order. */
static inline __m256 hsum8_ps(const __m256 a[8]) {
    __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 v = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u, v, 0x20), _mm256_permute2f128_ps(u, v, 0x31));
}

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline void attn_row_to_float(int type, const uint8_t *src, float *dst, int hd) {
    if (type == TENSOR_TYPE_F16) {
        for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(dst + d, load_f16x8((const uint16_t *)src + d));
    } else { /* Q8_0 */
        const block_q8_0 *b = (const block_q8_0 *)src;
        for (int i = 0; i < hd / QK; i++) {
            __m256 scale = _mm256_set1_ps(f16t(b[i].d));
            for (int h = 0; h < 4; h++) {
                __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + 8 * h)));
                _mm256_storeu_ps(dst + i * QK + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale));
            }
        }
    }
}

/* As the AVX-512 version, the 16 positions as two halves of 8. A half
 * with no position of the row is not computed (its lanes are masked
 * either way). */
static inline void attn_row_tile(int hd, float scale, const float *q, const float *const *k, const float *const *v,
                                 int n, float *m, float *l, float *out, float *p) {
    const __m256 iota = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 s[2], keep[2];
    for (int h = 0; h < 2; h++) {
        keep[h] = _mm256_cmp_ps(iota, _mm256_set1_ps((float)(n - 8 * h)), _CMP_LT_OQ);
        if (8 * h >= n) {
            s[h] = _mm256_set1_ps(-INFINITY);
            continue;
        }
        __m256 acc[8];
        for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) {
            __m256 qv = _mm256_loadu_ps(q + d);
            for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[8 * h + j] + d), acc[j]);
        }
        s[h] = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_mul_ps(hsum8_ps(acc), _mm256_set1_ps(scale)),
                                keep[h]);
    }
    float mt = hmax_ps(_mm256_max_ps(s[0], s[1])), mn = *m > mt ? *m : mt;
    __m256 e0 = _mm256_and_ps(exp_neg_ps(_mm256_sub_ps(s[0], _mm256_set1_ps(mn))), keep[0]);
    __m256 e1 = _mm256_and_ps(exp_neg_ps(_mm256_sub_ps(s[1], _mm256_set1_ps(mn))), keep[1]);
    float alpha = *m == -INFINITY ? 0.0f : _mm256_cvtss_f32(exp_neg_ps(_mm256_set1_ps(*m - mn)));
    *l = *l * alpha + hsum_ps(_mm256_add_ps(e0, e1));
    *m = mn;
    _mm256_storeu_ps(p, e0);
    _mm256_storeu_ps(p + 8, e1);
    const __m256 va = _mm256_set1_ps(alpha);
    for (int d0 = 0; d0 < hd; d0 += 64) {
        int w = hd - d0 < 64 ? (hd - d0) / 8 : 8;
        __m256 a[8];
        for (int i = 0; i < w; i++) a[i] = _mm256_mul_ps(_mm256_loadu_ps(out + d0 + 8 * i), va);
        for (int j = 0; j < n; j++) {
            __m256 pj = _mm256_set1_ps(p[j]);
            const float *vr = v[j] + d0;
            if (w == 8) {
                for (int i = 0; i < 8; i++) a[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8 * i), a[i]);
            } else {
                for (int i = 0; i < w; i++) a[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8 * i), a[i]);
            }
        }
        for (int i = 0; i < w; i++) _mm256_storeu_ps(out + d0 + 8 * i, a[i]);
    }
}

#endif /* __AVX512F__ */

/* The driver: as attn_scalar, with the rows above. */
static void attn_x86(int hd, float scale, const struct attn_kv *kv, const struct attn_rows *rows,
                     float *restrict scratch) {
    enum { T = TENSOR_ATTN_TILE };
    if (hd % ATTN_VW != 0) {
        attn_scalar(hd, scale, kv, rows, scratch);
        return;
    }
    struct attn_work w = attn_work_carve(scratch, hd, rows->n);
    int32_t end = attn_rows_end(rows);
    memset(w.zero, 0, sizeof(float) * (size_t)w.hd_pad);
    for (int r = 0; r < rows->n; r++) {
        w.m[r] = -INFINITY;
        w.l[r] = 0.0f;
        memset(rows->out[r], 0, sizeof(float) * (size_t)hd);
    }
    struct attn_cursor cur = {kv->spans, 0}, ahead = cur;
    /* The rows of one head are short runs scattered over the cache blocks
     * (and the cache rarely fits in the caches at serving batch sizes):
     * the rows PF_TILES tiles ahead are prefetched while this one is
     * computed (a second cursor runs ahead). */
    enum { PF_TILES = 3 };
    const size_t head_bytes = tensor_row_size(kv->type, hd);
    int32_t pf_next = 0; /* first position not yet prefetched */
    for (int32_t t0 = 0; t0 <= end; t0 += T) {
        int nt = end + 1 - t0 < T ? end + 1 - t0 : T;
        const uint8_t *kb[T], *vb[T];
        const float *k[T], *v[T];
        for (; pf_next <= end && pf_next < t0 + PF_TILES * T; pf_next += T) {
            int np = end + 1 - pf_next < T ? end + 1 - pf_next : T;
            attn_cursor_take(kv, &ahead, np, kb, vb);
            for (int j = 0; j < np; j++)
                for (size_t o = 0; o < head_bytes; o += 64) {
                    _mm_prefetch((const char *)kb[j] + o, _MM_HINT_T0);
                    _mm_prefetch((const char *)vb[j] + o, _MM_HINT_T0);
                }
        }
        attn_cursor_take(kv, &cur, nt, kb, vb);
        for (int j = 0; j < nt; j++) {
            if (kv->type == TENSOR_TYPE_F32) {
                k[j] = (const float *)kb[j], v[j] = (const float *)vb[j];
            } else {
                float *kf = w.k + (size_t)j * w.hd_pad, *vf = w.v + (size_t)j * w.hd_pad;
                attn_row_to_float(kv->type, kb[j], kf, hd);
                attn_row_to_float(kv->type, vb[j], vf, hd);
                k[j] = kf, v[j] = vf;
            }
        }
        for (int j = nt; j < T; j++) k[j] = v[j] = w.zero;
        for (int r = 0; r < rows->n; r++) {
            if (rows->last[r] < t0) continue;
            int n = rows->last[r] + 1 - t0 < nt ? rows->last[r] + 1 - t0 : nt;
            attn_row_tile(hd, scale, rows->q[r], k, v, n, &w.m[r], &w.l[r], rows->out[r], w.p);
        }
    }
    for (int r = 0; r < rows->n; r++) {
        float inv = 1.0f / w.l[r];
        for (int d = 0; d < hd; d++) rows->out[r][d] *= inv;
    }
}

#endif /* KVIK_ATTN_X86_H */
