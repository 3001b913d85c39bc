/*
 * attn_x86.h — the tiled attention kernel with x86 vectors; included by
 * vec_dot_x86.h, so built twice: 512-bit where the file is compiled for
 * AVX-512 (__AVX512F__), 256-bit for AVX2. Same tiles and the same per-row
 * update as attn_scalar.c; what the vectors change:
 *
 *   - 512-bit: F16 K and V rows are read in place, converted by vcvtph2ps
 *     as they are loaded, and the rows of a call with the same position
 *     (a group's heads: up to ATTN_CHUNK) are updated together, so each
 *     value is loaded once for all of them; 256-bit: a tile's F16 rows
 *     are converted once into the scratch tile. Q8_0 rows go to the
 *     scratch tile a 32-value block at a time (bytes widened to int32, to
 *     float, times the block scale) in both; F32 rows are read in place;
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

/* The cached rows of a tile ahead, to prefetch while this one is computed:
 * position j's K and V rows at k[j] and v[j], `bytes` each. */
struct attn_pf {
    const uint8_t *k[TENSOR_ATTN_TILE], *v[TENSOR_ATTN_TILE];
    int n;
    size_t bytes;
};

static inline void attn_pf_row(const struct attn_pf *pf, int j) {
    if (j >= pf->n) return;
    for (size_t o = 0; o < pf->bytes; o += 64) {
        _mm_prefetch((const char *)pf->k[j] + o, _MM_HINT_T0);
        _mm_prefetch((const char *)pf->v[j] + o, _MM_HINT_T0);
    }
}

#ifdef __AVX512F__

enum { ATTN_VW = 16 };        /* floats per vector */
enum { ATTN_DIRECT_F16 = 1 }; /* F16 rows read in place (attn_load) */

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
 * pairs (4 of 4 positions per 128-bit lane), then the 128-bit lanes. The
 * first eight vectors only reach lanes 0-7 and the last eight lanes 8-15,
 * so the tree is built as two halves (hsum8_ps512) and their join. */
static inline __m512 hsum8_ps512(const __m512 a[8]) {
    __m512 t[4], u[2];
    for (int i = 0; i < 4; i++)
        t[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 2; i++) {
        __m512d x = _mm512_castps_pd(t[2 * i]), y = _mm512_castps_pd(t[2 * i + 1]);
        u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    return _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
}

static inline __m512 hsum_join_ps512(__m512 w0, __m512 w1) {
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

/* 16 cached values from position d of a row: F16 rows converted as they
 * are loaded (F16 -> F32 is exact), F32 rows (cache or scratch) as they are. */
static inline __m512 attn_load(const void *row, int d, bool f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d)))
               : _mm512_loadu_ps((const float *)row + d);
}

/* The chunk's loops are unrolled whole so that its accumulators stay in
 * registers (the trip counts are constants once R is). */
#define ATTN_UNROLL _Pragma("GCC unroll 16")

enum { ATTN_CHUNK = 3 }; /* query rows updated together (a group's heads at one position) */

/* Half of R rows' scores: the dot products with 8 positions (k[0..7]),
 * each as 16 accumulators over d reduced by hsum8_ps512. */
static inline __attribute__((always_inline)) void attn_chunk_scores8(const int R, const bool f16, int hd,
                                                                      const float *const *q, const void *const *k,
                                                                      __m512 *w) {
    __m512 acc[ATTN_CHUNK][8];
    ATTN_UNROLL
    for (int r = 0; r < R; r++)
        ATTN_UNROLL
        for (int j = 0; j < 8; j++) acc[r][j] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 16) {
        __m512 qv[ATTN_CHUNK];
        ATTN_UNROLL
        for (int r = 0; r < R; r++) qv[r] = _mm512_loadu_ps(q[r] + d);
        ATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            __m512 kv = attn_load(k[j], d, f16);
            ATTN_UNROLL
            for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(qv[r], kv, acc[r][j]);
        }
    }
    ATTN_UNROLL
    for (int r = 0; r < R; r++) w[r] = hsum8_ps512(acc[r]);
}

/* R rows with the same last position (so the same n positions of the
 * tile), updated together: each K and V value loaded once for all R.
 * Every row's arithmetic is the single-row update's, operation for
 * operation: 16 accumulators over d in order, the hsum tree, the masked
 * maximum and exponentials, out = alpha out + p_j v_j for j in order. */
static inline __attribute__((always_inline)) void attn_chunk_tile(const int R, const bool f16, int hd, float scale,
                                                                   const float *const *q, const void *const *k,
                                                                   const void *const *v, int n, float *m, float *l,
                                                                   float *const *out, const struct attn_pf *pf) {
    __m512 w[2][ATTN_CHUNK];
    attn_chunk_scores8(R, f16, hd, q, k, w[0]);
    if (n > 8) {
        attn_chunk_scores8(R, f16, hd, q, k + 8, w[1]);
    } else { /* lanes 8-15 are all masked: their half is not needed */
        ATTN_UNROLL
        for (int r = 0; r < R; r++) w[1][r] = _mm512_setzero_ps();
    }
    __mmask16 valid = (__mmask16)((1u << n) - 1);
    float alpha[ATTN_CHUNK];
    _Alignas(64) float p[ATTN_CHUNK][16];
    ATTN_UNROLL
    for (int r = 0; r < R; r++) {
        __m512 s = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), valid, hsum_join_ps512(w[0][r], w[1][r]),
                                      _mm512_set1_ps(scale));
        float mt = _mm512_reduce_max_ps(s), mn = m[r] > mt ? m[r] : mt;
        __m512 e = _mm512_maskz_mov_ps(valid, exp_neg_ps512(_mm512_sub_ps(s, _mm512_set1_ps(mn))));
        /* e^0 is exactly 1 in exp_neg_ps512, so an unchanged maximum skips it */
        alpha[r] = m[r] == -INFINITY ? 0.0f
                   : m[r] == mn      ? 1.0f
                                     : _mm512_cvtss_f32(exp_neg_ps512(_mm512_set1_ps(m[r] - mn)));
        l[r] = l[r] * alpha[r] + _mm512_reduce_add_ps(e);
        m[r] = mn;
        _mm512_store_ps(p[r], e);
    }
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        __m512 a[ATTN_CHUNK][4];
        ATTN_UNROLL
        for (int r = 0; r < R; r++)
            ATTN_UNROLL
            for (int c = 0; c < 4; c++)
                a[r][c] = _mm512_mul_ps(_mm512_loadu_ps(out[r] + d0 + 16 * c), _mm512_set1_ps(alpha[r]));
        for (int j = 0; j < n; j++) {
            if (d0 == 0) attn_pf_row(pf, j);
            __m512 vv[4];
            ATTN_UNROLL
            for (int c = 0; c < 4; c++) vv[c] = attn_load(v[j], d0 + 16 * c, f16);
            ATTN_UNROLL
            for (int r = 0; r < R; r++) {
                __m512 pj = _mm512_set1_ps(p[r][j]);
                ATTN_UNROLL
                for (int c = 0; c < 4; c++) a[r][c] = _mm512_fmadd_ps(pj, vv[c], a[r][c]);
            }
        }
        ATTN_UNROLL
        for (int r = 0; r < R; r++)
            ATTN_UNROLL
            for (int c = 0; c < 4; c++) _mm512_storeu_ps(out[r] + d0 + 16 * c, a[r][c]);
    }
    for (; d0 < hd; d0 += 16) {
        __m512 a[ATTN_CHUNK];
        ATTN_UNROLL
        for (int r = 0; r < R; r++) a[r] = _mm512_mul_ps(_mm512_loadu_ps(out[r] + d0), _mm512_set1_ps(alpha[r]));
        for (int j = 0; j < n; j++) {
            if (d0 == 0) attn_pf_row(pf, j);
            __m512 vv = attn_load(v[j], d0, f16);
            ATTN_UNROLL
            for (int r = 0; r < R; r++) a[r] = _mm512_fmadd_ps(_mm512_set1_ps(p[r][j]), vv, a[r]);
        }
        ATTN_UNROLL
        for (int r = 0; r < R; r++) _mm512_storeu_ps(out[r] + d0, a[r]);
    }
}

/* The rows that see a tile, in chunks of up to ATTN_CHUNK neighbours with
 * the same last position; k and v hold 16 readable rows (F16 rows of the
 * cache, or floats). */
static void attn_tile_rows(int hd, float scale, const struct attn_rows *rows, int32_t t0, int nt, bool f16,
                           const void *const *k, const void *const *v, struct attn_work *w, struct attn_pf *pf) {
    for (int r = 0; r < rows->n;) {
        int32_t last = rows->last[r];
        int R = 1;
        while (R < ATTN_CHUNK && r + R < rows->n && rows->last[r + R] == last) R++;
        if (last >= t0) {
            int n = last + 1 - t0 < nt ? last + 1 - t0 : nt;
            const float *const *q = rows->q + r;
            float *const *o = rows->out + r;
            float *m = w->m + r, *l = w->l + r;
            if (f16) {
                if (R == 3) attn_chunk_tile(3, true, hd, scale, q, k, v, n, m, l, o, pf);
                else if (R == 2) attn_chunk_tile(2, true, hd, scale, q, k, v, n, m, l, o, pf);
                else attn_chunk_tile(1, true, hd, scale, q, k, v, n, m, l, o, pf);
            } else {
                if (R == 3) attn_chunk_tile(3, false, hd, scale, q, k, v, n, m, l, o, pf);
                else if (R == 2) attn_chunk_tile(2, false, hd, scale, q, k, v, n, m, l, o, pf);
                else attn_chunk_tile(1, false, hd, scale, q, k, v, n, m, l, o, pf);
            }
            pf->n = 0; /* asked for by the first chunk */
        }
        r += R;
    }
    for (int j = 0; j < pf->n; j++) attn_pf_row(pf, j); /* positions no chunk reached */
}

#else /* AVX2 */

enum { ATTN_VW = 8 };
enum { ATTN_DIRECT_F16 = 0 }; /* F16 rows converted into the scratch tile */

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

/* Each row that sees the tile, on its own (k, v: floats). */
static void attn_tile_rows(int hd, float scale, const struct attn_rows *rows, int32_t t0, int nt, bool f16,
                           const void *const *k, const void *const *v, struct attn_work *w, struct attn_pf *pf) {
    (void)f16;
    for (int j = 0; j < pf->n; j++) attn_pf_row(pf, j);
    for (int r = 0; r < rows->n; r++) {
        if (rows->last[r] < t0) continue;
        int n = rows->last[r] + 1 - t0 < nt ? rows->last[r] + 1 - t0 : nt;
        attn_row_tile(hd, scale, rows->q[r], (const float *const *)k, (const float *const *)v, n, &w->m[r],
                      &w->l[r], rows->out[r], w->p);
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
     * the rows PF_AHEAD tiles ahead are prefetched while this one is
     * computed (a second cursor runs ahead), one position at a time among
     * the tile's own work: a burst of a tile's lines would fill the line
     * fill buffers and stall the arithmetic until memory caught up (+4%
     * at batch 16 over bursts; 2 tiles ahead beat 1 and 3). */
    enum { PF_AHEAD = 2 };
    const bool direct_f16 = ATTN_DIRECT_F16 && kv->type == TENSOR_TYPE_F16; /* zeros read as F16 are zeros too */
    struct attn_pf pf = {.bytes = tensor_row_size(kv->type, hd)};
    int32_t pf_next = 0; /* first position not yet prefetched */
    for (; pf_next <= end && pf_next < PF_AHEAD * T; pf_next += T) { /* the first tiles at once */
        pf.n = end + 1 - pf_next < T ? end + 1 - pf_next : T;
        attn_cursor_take(kv, &ahead, pf.n, pf.k, pf.v);
        for (int j = 0; j < pf.n; j++) attn_pf_row(&pf, j);
    }
    for (int32_t t0 = 0; t0 <= end; t0 += T) {
        int nt = end + 1 - t0 < T ? end + 1 - t0 : T;
        const uint8_t *kb[T], *vb[T];
        const void *k[T], *v[T];
        pf.n = 0;
        if (pf_next <= end) {
            pf.n = end + 1 - pf_next < T ? end + 1 - pf_next : T;
            attn_cursor_take(kv, &ahead, pf.n, pf.k, pf.v);
            pf_next += T;
        }
        attn_cursor_take(kv, &cur, nt, kb, vb);
        for (int j = 0; j < nt; j++) {
            if (kv->type == TENSOR_TYPE_F32 || direct_f16) {
                k[j] = kb[j], v[j] = vb[j];
            } else {
                float *kf = w.k + (size_t)j * w.hd_pad, *vf = w.v + (size_t)j * w.hd_pad;
                attn_row_to_float(kv->type, kb[j], kf, hd);
                attn_row_to_float(kv->type, vb[j], vf, hd);
                k[j] = kf, v[j] = vf;
            }
        }
        for (int j = nt; j < T; j++) k[j] = v[j] = w.zero;
        attn_tile_rows(hd, scale, rows, t0, nt, direct_f16, k, v, &w, &pf);
    }
    for (int r = 0; r < rows->n; r++) {
        float inv = 1.0f / w.l[r];
        for (int d = 0; d < hd; d++) rows->out[r][d] *= inv;
    }
}

#endif /* KVIK_ATTN_X86_H */
