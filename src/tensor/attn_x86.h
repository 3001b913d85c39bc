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
 *     are converted once into the scratch tile; F32 rows are read in
 *     place; Q8_0 rows are read in place as integers (the query rows
 *     quantized once per call, the scores exact int8 block sums: vpdpbusd
 *     eight positions at a time, or vpmaddubsw a block at a time), as
 *     attn_scalar.c defines them;
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

#include "tensor/exp_x86.h"

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

#include "tensor/quant_ref.h"
#include "tensor/quant_x86.h"

enum { ATTN_VW = 16 };        /* floats per vector */
enum { ATTN_DIRECT_F16 = 1 }; /* F16 rows read in place (attn_load) */

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

/* One cached F16 row (hd values, hd a multiple of 16) as floats (the
 * driver's path for F16 rows that are not read in place: none here). */
static inline void attn_f16_to_float(const uint8_t *src, float *dst, int hd) {
    for (int d = 0; d < hd; d += 16)
        _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 2 * d))));
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

/* How many rows from r on (up to ATTN_CHUNK) share row r's last position. */
static inline int attn_chunk_rows(const struct attn_rows *rows, int r) {
    int R = 1;
    while (R < ATTN_CHUNK && r + R < rows->n && rows->last[r + R] == rows->last[r]) R++;
    return R;
}

/* The online-softmax step of R rows from their scores before scaling
 * (positions of the tile in lanes; lanes before lo and from n on masked): m and l updated, the
 * weights into p, each row's rescaling of its output into alpha. */
static inline __attribute__((always_inline)) void attn_softmax_rows(const int R, const __m512 *raw, int lo, int n,
                                                                     float scale, float *m, float *l,
                                                                     float (*p)[16], float *alpha) {
    __mmask16 valid = (__mmask16)(((1u << n) - 1) & ~((1u << lo) - 1));
    ATTN_UNROLL
    for (int r = 0; r < R; r++) {
        __m512 s = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), valid, raw[r], _mm512_set1_ps(scale));
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
}

/* R rows with the same last position (so the same n positions of the
 * tile), updated together: each K and V value loaded once for all R.
 * Every row's arithmetic is the single-row update's, operation for
 * operation: 16 accumulators over d in order, the hsum tree, the masked
 * maximum and exponentials, out = alpha out + p_j v_j for j in order. */
static inline __attribute__((always_inline)) void attn_chunk_tile(const int R, const bool f16, int hd, float scale,
                                                                   const float *const *q, const void *const *k,
                                                                   const void *const *v, int lo, int n, float *m,
                                                                   float *l, float *const *out,
                                                                   const struct attn_pf *pf) {
    __m512 w[2][ATTN_CHUNK];
    attn_chunk_scores8(R, f16, hd, q, k, w[0]);
    if (n > 8) {
        attn_chunk_scores8(R, f16, hd, q, k + 8, w[1]);
    } else { /* lanes 8-15 are all masked: their half is not needed */
        ATTN_UNROLL
        for (int r = 0; r < R; r++) w[1][r] = _mm512_setzero_ps();
    }
    __m512 raw[ATTN_CHUNK];
    ATTN_UNROLL
    for (int r = 0; r < R; r++) raw[r] = hsum_join_ps512(w[0][r], w[1][r]);
    float alpha[ATTN_CHUNK];
    _Alignas(64) float p[ATTN_CHUNK][16];
    attn_softmax_rows(R, raw, lo, n, scale, m, l, p, alpha);
    int d0 = 0;
    for (; d0 + 64 <= hd; d0 += 64) {
        __m512 a[ATTN_CHUNK][4];
        ATTN_UNROLL
        for (int r = 0; r < R; r++)
            ATTN_UNROLL
            for (int c = 0; c < 4; c++)
                a[r][c] = _mm512_mul_ps(_mm512_loadu_ps(out[r] + d0 + 16 * c), _mm512_set1_ps(alpha[r]));
        for (int j = lo; j < n; j++) {
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
        for (int j = lo; j < n; j++) {
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
        int R = attn_chunk_rows(rows, r), lo, n = attn_tile_range(rows, r, t0, nt, &lo);
        if (n > lo) {
            const float *const *q = rows->q + r;
            float *const *o = rows->out + r;
            float *m = w->m + r, *l = w->l + r;
            if (f16) {
                if (R == 3) attn_chunk_tile(3, true, hd, scale, q, k, v, lo, n, m, l, o, pf);
                else if (R == 2) attn_chunk_tile(2, true, hd, scale, q, k, v, lo, n, m, l, o, pf);
                else attn_chunk_tile(1, true, hd, scale, q, k, v, lo, n, m, l, o, pf);
            } else {
                if (R == 3) attn_chunk_tile(3, false, hd, scale, q, k, v, lo, n, m, l, o, pf);
                else if (R == 2) attn_chunk_tile(2, false, hd, scale, q, k, v, lo, n, m, l, o, pf);
                else attn_chunk_tile(1, false, hd, scale, q, k, v, lo, n, m, l, o, pf);
            }
            pf->n = 0; /* asked for by the first chunk */
        }
        r += R;
    }
    for (int j = 0; j < pf->n; j++) attn_pf_row(pf, j); /* positions no chunk reached */
}

/* ---- Q8_0 caches: integer scores (the reference is attn_scalar.c) ------- */

/* Each query row quantized as attn_quantize_rows makes it (the shared
 * block step, byte for byte; a block with a NaN or an infinity: zeros, d
 * NaN), with its blocks' d as floats and 128 times the sum of each block's
 * quants. */
static void attn_quantize_rows_x86(const struct attn_rows *rows, int hd, struct attn_work *w) {
    int nb = hd / QK;
    for (int r = 0; r < rows->n; r++) {
        int8_t *qs = attn_q8_qs(w, r);
        float *dq = attn_q8_d(w, r);
        int32_t *corr = attn_q8_corr(w, r);
        for (int i = 0; i < nb; i++) {
            float d;
            int32_t sum;
            /* false for a NaN; an infinity makes d infinite */
            if (!q8_block_avx512(rows->q[r] + i * QK, qs + i * QK, &d, &sum) || !(d < INFINITY)) {
                memset(qs + i * QK, 0, QK);
                dq[i] = NAN, corr[i] = 0;
                continue;
            }
            dq[i] = fp16_to_fp32(fp32_to_fp16(d));
            corr[i] = 128 * sum;
        }
        memset(qs + nb * QK, 0, w->q8_bytes - (size_t)nb * QK);
    }
}

/* K row quants of chunk c (blocks 2c and 2c + 1; zeros for a block past
 * the row), plus 128: as unsigned bytes, so that vpdpbusd multiplies them
 * with the signed query quants; the sums come out 128 sum(q) too large. */
static inline __m512i attn_q8_kchunk(const void *row, int c, int nb) {
    const block_q8_0 *b = (const block_q8_0 *)row + 2 * c;
    __m256i lo = _mm256_loadu_si256((const __m256i *)b[0].qs);
    __m256i hi = 2 * c + 1 < nb ? _mm256_loadu_si256((const __m256i *)b[1].qs) : _mm256_setzero_si256();
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8((char)0x80));
}

/* Eight positions' vectors of lane sums (lanes 0-7 one block, 8-15 the
 * next) -> [block 0 of positions 0-3, block 1 of 0-3, block 0 of 4-7,
 * block 1 of 4-7]: pairs interleaved and added, pairs of pairs, then the
 * 128-bit lanes of each half. Integer sums: the order does not matter. */
static inline __m512i attn_q8_tree8(const __m512i v[8]) {
    __m512i t[4], u[2];
    for (int i = 0; i < 4; i++)
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; i++)
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                                _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], 0x88), _mm512_shuffle_i32x4(u[0], u[1], 0xDD));
}

/* R rows' block sums against chunk c of eight positions' K rows. */
static inline __attribute__((always_inline)) void attn_q8_half(const int R, __m512i *const qv, const void *const *k,
                                                                int c, int nb, __m512i *w) {
    __m512i acc[ATTN_CHUNK][8];
    ATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        __m512i kc = attn_q8_kchunk(k[j], c, nb);
        ATTN_UNROLL
        for (int r = 0; r < R; r++) acc[r][j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), kc, qv[r]);
    }
    ATTN_UNROLL
    for (int r = 0; r < R; r++) w[r] = attn_q8_tree8(acc[r]);
}

/* The d of block b of the tile's sixteen rows (past-the-end rows are
 * zero rows: d 0), as floats: one gather where the rows are a run, row
 * bytes apart (rb; 0: not a run). */
static inline __m512 attn_q8_scales(const void *const *rows, int b, int rb) {
    if (rb) {
        const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(rb));
        __m512i g = _mm512_i32gather_epi32(idx, (const block_q8_0 *)rows[0] + b, 1);
        return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
    }
    _Alignas(32) uint16_t h[16];
    for (int j = 0; j < 16; j++) h[j] = ((const block_q8_0 *)rows[j])[b].d;
    return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)h));
}

/* R rows of a Q8_0 cache with the same last position, updated together
 * (each row's arithmetic the single row's, as in attn_chunk_tile): the
 * scores block by block from integer sums, then the softmax step, then
 * out = alpha out + sum_j (p_j d_v) v_int, positions in order. dk and dv:
 * the tile's K and V scales, [block][16]. */
static inline __attribute__((always_inline)) void attn_q8_chunk_tile(const int R, int hd, float scale,
                                                                      const struct attn_work *wk, int r0,
                                                                      const void *const *k, const void *const *v,
                                                                      const float *dk, const float *dv, int lo,
                                                                      int n, float *m, float *l, float *const *out,
                                                                      float *cv, const struct attn_pf *pf) {
    const int nb = hd / QK, nc = (nb + 1) / 2;
    __m512 raw[ATTN_CHUNK];
    ATTN_UNROLL
    for (int r = 0; r < R; r++) raw[r] = _mm512_setzero_ps();
    for (int c = 0; c < nc; c++) {
        __m512i qv[ATTN_CHUNK], wa[ATTN_CHUNK], wb[ATTN_CHUNK];
        ATTN_UNROLL
        for (int r = 0; r < R; r++) qv[r] = _mm512_loadu_si512(attn_q8_qs(wk, r0 + r) + 64 * c);
        attn_q8_half(R, qv, k, c, nb, wa);
        if (n > 8) {
            attn_q8_half(R, qv, k + 8, c, nb, wb);
        } else {
            ATTN_UNROLL
            for (int r = 0; r < R; r++) wb[r] = _mm512_setzero_si512();
        }
        ATTN_UNROLL
        for (int r = 0; r < R; r++) {
            const float *dq = attn_q8_d(wk, r0 + r);
            const int32_t *corr = attn_q8_corr(wk, r0 + r);
            __m512i s0 = _mm512_sub_epi32(_mm512_shuffle_i32x4(wa[r], wb[r], 0x88), _mm512_set1_epi32(corr[2 * c]));
            raw[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0),
                                     _mm512_mul_ps(_mm512_set1_ps(dq[2 * c]), _mm512_load_ps(dk + 32 * c)), raw[r]);
            if (2 * c + 1 < nb) {
                __m512i s1 = _mm512_sub_epi32(_mm512_shuffle_i32x4(wa[r], wb[r], 0xDD),
                                              _mm512_set1_epi32(corr[2 * c + 1]));
                raw[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1),
                                         _mm512_mul_ps(_mm512_set1_ps(dq[2 * c + 1]), _mm512_load_ps(dk + 32 * c + 16)),
                                         raw[r]);
            }
        }
    }
    float alpha[ATTN_CHUNK];
    _Alignas(64) float p[ATTN_CHUNK][16];
    attn_softmax_rows(R, raw, lo, n, scale, m, l, p, alpha);
    /* the weights times the rows' scales: cv[r][b][j] */
    ATTN_UNROLL
    for (int r = 0; r < R; r++)
        for (int b = 0; b < nb; b++)
            _mm512_store_ps(cv + ((size_t)r * nb + b) * 16, _mm512_mul_ps(_mm512_load_ps(p[r]), _mm512_load_ps(dv + 16 * b)));
    for (int d0 = 0; d0 < hd; d0 += 32) { /* a block of the rows at a time */
        const int b = d0 / QK;
        __m512 a[ATTN_CHUNK][2];
        ATTN_UNROLL
        for (int r = 0; r < R; r++)
            for (int h = 0; h < 2; h++)
                a[r][h] = _mm512_mul_ps(_mm512_loadu_ps(out[r] + d0 + 16 * h), _mm512_set1_ps(alpha[r]));
        for (int j = lo; j < n; j++) {
            if (d0 == 0) attn_pf_row(pf, j);
            const int8_t *qs = ((const block_q8_0 *)v[j])[b].qs;
            __m512 vv[2];
            for (int h = 0; h < 2; h++)
                vv[h] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16 * h))));
            ATTN_UNROLL
            for (int r = 0; r < R; r++) {
                __m512 cj = _mm512_set1_ps(cv[((size_t)r * nb + b) * 16 + j]);
                for (int h = 0; h < 2; h++) a[r][h] = _mm512_fmadd_ps(cj, vv[h], a[r][h]);
            }
        }
        ATTN_UNROLL
        for (int r = 0; r < R; r++)
            for (int h = 0; h < 2; h++) _mm512_storeu_ps(out[r] + d0 + 16 * h, a[r][h]);
    }
}

/* The rows that see a tile of a Q8_0 cache, in chunks as attn_tile_rows;
 * k and v hold 16 row addresses (zero rows past the cache's). */
static void attn_q8_tile_rows(int hd, float scale, const struct attn_rows *rows, int32_t t0, int nt, int rb,
                              const void *const *k, const void *const *v, struct attn_work *w, struct attn_pf *pf) {
    const int nb = hd / QK;
    float *dk = w->k, *dv = w->v, *cv = w->v + 16 * (size_t)nb;
    for (int b = 0; b < nb; b++) {
        _mm512_store_ps(dk + 16 * b, attn_q8_scales(k, b, rb));
        _mm512_store_ps(dv + 16 * b, attn_q8_scales(v, b, rb));
    }
    for (int r = 0; r < rows->n;) {
        int R = attn_chunk_rows(rows, r), lo, n = attn_tile_range(rows, r, t0, nt, &lo);
        if (n > lo) {
            float *const *o = rows->out + r;
            float *m = w->m + r, *l = w->l + r;
            if (R == 3) attn_q8_chunk_tile(3, hd, scale, w, r, k, v, dk, dv, lo, n, m, l, o, cv, pf);
            else if (R == 2) attn_q8_chunk_tile(2, hd, scale, w, r, k, v, dk, dv, lo, n, m, l, o, cv, pf);
            else attn_q8_chunk_tile(1, hd, scale, w, r, k, v, dk, dv, lo, n, m, l, o, cv, pf);
            pf->n = 0;
        }
        r += R;
    }
    for (int j = 0; j < pf->n; j++) attn_pf_row(pf, j);
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

static inline void attn_f16_to_float(const uint8_t *src, float *dst, int hd) {
    for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(dst + d, load_f16x8((const uint16_t *)src + d));
}

/* As the AVX-512 version, the 16 positions as two halves of 8. A half
 * with no position of the row is not computed (its lanes are masked
 * either way). */
static inline void attn_row_tile(int hd, float scale, const float *q, const float *const *k, const float *const *v,
                                 int lo, int n, float *m, float *l, float *out, float *p) {
    const __m256 iota = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 s[2], keep[2];
    for (int h = 0; h < 2; h++) {
        keep[h] = _mm256_and_ps(_mm256_cmp_ps(iota, _mm256_set1_ps((float)(n - 8 * h)), _CMP_LT_OQ),
                                _mm256_cmp_ps(iota, _mm256_set1_ps((float)(lo - 8 * h)), _CMP_GE_OQ));
        if (8 * h >= n || 8 * h + 8 <= lo) {
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
        for (int j = lo; j < n; j++) {
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
        int lo, n = attn_tile_range(rows, r, t0, nt, &lo);
        if (n <= lo) continue;
        attn_row_tile(hd, scale, rows->q[r], (const float *const *)k, (const float *const *)v, lo, n, &w->m[r],
                      &w->l[r], rows->out[r], w->p);
    }
}

/* ---- Q8_0 caches (the reference is attn_scalar.c) ------------------------ */

static inline int32_t attn_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* One quantized row against a tile, the reference's steps with each
 * block's integer sum by vpmaddubsw (|k| times q with k's sign: pairs of
 * products stay within int16) and the value update eight lanes at a time. */
static void attn_q8_row_tile(int hd, float scale, const int8_t *qs, const float *dq, const void *const *k,
                             const void *const *v, int n, float *m, float *l, float *out, float *p) {
    const int nb = hd / QK;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = 0; j < n; j++) {
        const block_q8_0 *kb = (const block_q8_0 *)k[j];
        float s = 0.0f;
        for (int b = 0; b < nb; b++) {
            __m256i kk = _mm256_loadu_si256((const __m256i *)kb[b].qs);
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + b * QK));
            __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(kk, kk), _mm256_sign_epi8(q, kk));
            int32_t sum = attn_hsum_epi32(_mm256_madd_epi16(pairs, ones));
            s = fmaf((float)sum, dq[b] * fp16_to_fp32(kb[b].d), s);
        }
        p[j] = s * scale;
    }
    float alpha = attn_softmax_step(p, n, m, l);
    for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(out + d), _mm256_set1_ps(alpha)));
    for (int j = 0; j < n; j++) {
        const block_q8_0 *vb = (const block_q8_0 *)v[j];
        for (int b = 0; b < nb; b++) {
            __m256 c = _mm256_set1_ps(p[j] * fp16_to_fp32(vb[b].d));
            for (int h = 0; h < 4; h++) {
                float *o = out + b * QK + 8 * h;
                __m256 vf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(vb[b].qs + 8 * h))));
                _mm256_storeu_ps(o, _mm256_fmadd_ps(c, vf, _mm256_loadu_ps(o)));
            }
        }
    }
}

static void attn_q8_tile_rows(int hd, float scale, const struct attn_rows *rows, int32_t t0, int nt, int rb,
                              const void *const *k, const void *const *v, struct attn_work *w, struct attn_pf *pf) {
    (void)rb;
    for (int j = 0; j < pf->n; j++) attn_pf_row(pf, j);
    for (int r = 0; r < rows->n; r++) {
        int lo, n = attn_tile_range(rows, r, t0, nt, &lo);
        if (n <= lo) continue;
        attn_q8_row_tile(hd, scale, attn_q8_qs(w, r), attn_q8_d(w, r), k + lo, v + lo, n - lo, &w->m[r], &w->l[r],
                         rows->out[r], w->p);
    }
}

static void attn_quantize_rows_x86(const struct attn_rows *rows, int hd, struct attn_work *w) {
    attn_quantize_rows(rows, hd, w);
}

#endif /* __AVX512F__ */

/* The driver: as attn_scalar, with the rows above. */
static void attn_x86(int hd, float scale, const struct attn_kv *kv, const struct attn_rows *rows,
                     float *restrict scratch) {
    enum { T = TENSOR_ATTN_TILE };
    const bool q8 = kv->type == TENSOR_TYPE_Q8_0;
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
    if (q8) attn_quantize_rows_x86(rows, hd, &w);
    struct attn_cursor cur = {kv->spans, 0};
    int32_t begin = attn_rows_begin(rows);
    if (begin > kv->start) attn_cursor_skip(&cur, begin - kv->start);
    struct attn_cursor ahead = cur;
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
    int32_t pf_next = begin; /* first position not yet prefetched */
    for (; pf_next <= end && pf_next < begin + PF_AHEAD * T; pf_next += T) { /* the first tiles at once */
        pf.n = end + 1 - pf_next < T ? end + 1 - pf_next : T;
        attn_tile_take(kv, &ahead, pf_next, pf.n, pf.k, pf.v, w.zero);
        for (int j = 0; j < pf.n; j++) attn_pf_row(&pf, j);
    }
    for (int32_t t0 = begin; t0 <= end; t0 += T) {
        int nt = end + 1 - t0 < T ? end + 1 - t0 : T;
        const uint8_t *kb[T], *vb[T];
        const void *k[T], *v[T];
        pf.n = 0;
        if (pf_next <= end) {
            pf.n = end + 1 - pf_next < T ? end + 1 - pf_next : T;
            attn_tile_take(kv, &ahead, pf_next, pf.n, pf.k, pf.v, w.zero);
            pf_next += T;
        }
        bool one_run = attn_tile_take(kv, &cur, t0, nt, kb, vb, w.zero);
        for (int j = 0; j < nt; j++) {
            if (kv->type == TENSOR_TYPE_F32 || direct_f16 || q8) {
                k[j] = kb[j], v[j] = vb[j];
            } else { /* F16 rows for the 256-bit kernel */
                float *kf = w.k + (size_t)j * w.hd_pad, *vf = w.v + (size_t)j * w.hd_pad;
                attn_f16_to_float(kb[j], kf, hd);
                attn_f16_to_float(vb[j], vf, hd);
                k[j] = kf, v[j] = vf;
            }
        }
        for (int j = nt; j < T; j++) k[j] = v[j] = w.zero;
        if (q8) {
            /* whole tiles of one run: scales gathered at row_bytes strides */
            int rb = one_run && nt == T && kv->row_bytes <= INT32_MAX / T ? (int)kv->row_bytes : 0;
            attn_q8_tile_rows(hd, scale, rows, t0, nt, rb, k, v, &w, &pf);
            continue;
        }
        attn_tile_rows(hd, scale, rows, t0, nt, direct_f16, k, v, &w, &pf);
    }
    for (int r = 0; r < rows->n; r++) {
        float inv = 1.0f / w.l[r];
        for (int d = 0; d < hd; d++) rows->out[r][d] *= inv;
    }
}

#endif /* KVIK_ATTN_X86_H */
