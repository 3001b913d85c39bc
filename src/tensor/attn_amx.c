/*
 * attn_amx.c — attention with both of its products on BF16 AMX tiles, for
 * F16, F32 and Q8_0 caches and head sizes that are multiples of 32 (others
 * go to the table's vector kernel).
 *
 * The tiles and the online softmax are those of attn_scalar.c (tensor.h):
 * positions in tiles of TENSOR_ATTN_TILE at absolute boundaries, one
 * update of each row's maximum, sum and output per tile. What differs is
 * the arithmetic of the two products:
 *
 *   S^T = K Q^T   K's 16 rows of the tile (A, bf16) against 16 query rows
 *                 at a time (B, bf16 in pairs of dimensions), F32 sums;
 *   O += P V      the 16 rows' weights (A, bf16) against the tile's V rows
 *                 (B, bf16 in pairs of positions), F32 sums.
 *
 * Q, K, V and the weights p_j are rounded to bf16 (nearest even) before
 * they are multiplied; the sums, the scale, the maximum, the exponentials,
 * l and the rescaling of the output stay F32. The scores come out with
 * positions as rows and query rows as columns: a group of many rows takes
 * its maximum and sum over a tile's positions lane-wise, a vector per
 * position, and transposes the weights; a group of a few rows (a decode
 * step's heads) gathers each row's scores into a vector of its own. The
 * two make the same bits: every step is the same operation on the same
 * values, the sums in position order.

 * Every column of a tile product depends only on its own query row, and
 * every vector step is lane-wise, so a row's result does not depend on the
 * other rows of the call, their number or their order: the same bits
 * whatever shares its batch, as with the vector kernel.
 */
#ifndef KVIK_NO_SIMD
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "tensor/exp_x86.h"
#include "tensor/kernels.h"
#include "tensor/quants.h"

enum { T = TENSOR_ATTN_TILE, COLS = 16 };

/* Tiles: S (scores, C), KA (K rows, A), QB (query rows, B), PA (weights,
 * A), VB0/VB1 (V rows, B), O0/O1 (the output, C). */
#define TS 0
#define TKA 1
#define TQB 2
#define TPA 3
#define TVB0 4
#define TVB1 5
#define TO0 6
#define TO1 7

/* Groups with at most this many rows take their softmax row by row (a
 * vector over the tile's positions per row); larger ones column-wise (a
 * vector over the group's rows per position). Both make the same bits. */
enum { FEW_ROWS = 8 };

static attn_fn g_attn_vec; /* the vector kernel, for what the tiles do not take */

/* The call's scratch, carved from the caller's floats (attn_tiles_floats):
 * per tile the K rows as bf16 [T][hd], the V rows in B layout
 * [hd/16][T/2][16][2], the scores [T][COLS], the weights [COLS][T] (A
 * layout) and a zero row; per group of COLS rows the query rows in B
 * layout [hd/2][COLS][2], the output [COLS][hd] and each row's m, l,
 * first and last position; per group the first and last position any of
 * its rows sees. */
struct tile_work {
    uint16_t *kb, *vb, *pa;
    float *s, *zero;
    uint16_t *qt;
    float *o, *m, *l;
    int32_t *first, *last;
    int32_t *gfirst, *glast;
};

static struct tile_work carve(float *scratch, int hd, int n_groups) {
    struct tile_work w;
    size_t h = (size_t)hd;
    float *p = scratch;
    w.kb = (uint16_t *)p, p += T * h / 2;
    w.vb = (uint16_t *)p, p += T * h / 2;
    w.s = p, p += T * COLS;
    w.pa = (uint16_t *)p, p += T * COLS / 2;
    w.zero = p, p += h;
    w.qt = (uint16_t *)p, p += (size_t)n_groups * h * COLS / 2;
    w.o = p, p += (size_t)n_groups * h * COLS;
    w.m = p, p += (size_t)n_groups * COLS;
    w.l = p, p += (size_t)n_groups * COLS;
    w.first = (int32_t *)p, p += (size_t)n_groups * COLS;
    w.last = (int32_t *)p, p += (size_t)n_groups * COLS;
    w.gfirst = (int32_t *)p, p += attn_pad16((size_t)n_groups);
    w.glast = (int32_t *)p;
    return w;
}

/* alpha = e^(m - m'): 1 where m did not change (also -inf to -inf), 0 from
 * -inf to a number. */
static inline __m512 rescale_factor(__m512 mo, __m512 mn) {
    __m512 alpha = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mo, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ),
                                       exp_neg_ps512(_mm512_sub_ps(mo, mn)));
    return _mm512_mask_mov_ps(alpha, _mm512_cmp_ps_mask(mo, mn, _CMP_EQ_OQ), _mm512_set1_ps(1.0f));
}

/* 16 cached values from d (a multiple of 16) of a row as floats: F16
 * converted (exactly), F32 as they are, Q8_0 as d times the quant (exact
 * in F32). */
static inline __m512 load_row(const void *row, int d, int type) {
    if (type == TENSOR_TYPE_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d)));
    if (type == TENSOR_TYPE_F32) return _mm512_loadu_ps((const float *)row + d);
    const block_q8_0 *b = (const block_q8_0 *)row + d / QK;
    __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + d % QK))));
    return _mm512_mul_ps(q, _mm512_set1_ps(tensor_fp16_table[b->d]));
}

/* Two vectors of floats as 32 bf16, a's first (round to nearest even). */
static inline __m512i bf16_pair(__m512 a, __m512 b) { return (__m512i)_mm512_cvtne2ps_pbh(b, a); }

/* bf16_pair(a, b) interleaved: a[0], b[0], a[1], b[1], ... */
static inline __m512i bf16_zip(__m512 a, __m512 b) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                         6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, bf16_pair(a, b));
}

/* The rows of a tile ahead, prefetched a position at a time while this
 * tile's rows are converted (a burst of them would stall on the line fill
 * buffers): n positions, `bytes` each. */
struct ahead {
    const uint8_t *k[T], *v[T];
    int n;
    size_t bytes;
};

static inline void prefetch_row(const uint8_t *row, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)row + o, _MM_HINT_T0);
}

/* The tile's K rows as bf16 rows of hd. */
static void tile_k(int hd, int type, const void *const *k, uint16_t *kb, const struct ahead *pf) {
    for (int j = 0; j < T; j++) {
        if (j < pf->n) prefetch_row(pf->k[j], pf->bytes);
        for (int d = 0; d < hd; d += 32)
            _mm512_storeu_si512(kb + (size_t)j * hd + d, bf16_pair(load_row(k[j], d, type), load_row(k[j], d + 16, type)));
    }
}

/* The tile's V rows in B layout, 16 dimensions a tile: vb[d/16][j/2][d%16][j%2]. */
static void tile_v(int hd, int type, const void *const *v, uint16_t *vb) {
    for (int j = 0; j < T; j += 2) {
        for (int d = 0; d < hd; d += 16)
            _mm512_store_si512(vb + (size_t)d * T + (size_t)j * 16, bf16_zip(load_row(v[j], d, type), load_row(v[j + 1], d, type)));
    }
}

/* 16 vectors transposed: r[i][c] -> r[c][i]. */
static inline void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    /* u[4i + c]: rows 4i..4i+3 of columns c, c+4, c+8, c+12 */
    for (int c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44), w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
        r[c + 4] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
        r[c + 8] = _mm512_shuffle_f32x4(v1, w1, 0x88);
        r[c + 12] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
    }
}

/* Group g's query rows in B layout: qt[(d/2)][c][d%2] = bf16(q_c[d]);
 * columns past the call's rows are zeros. */
static void group_q(const struct attn_rows *rows, int hd, int g, uint16_t *qt) {
    uint32_t *q32 = (uint32_t *)qt;
    for (int c = 0; c < COLS; c++) {
        int r = g * COLS + c;
        for (int d = 0; d < hd; d += 32) {
            _Alignas(64) uint32_t pairs[16];
            if (r < rows->n)
                _mm512_store_si512(pairs, bf16_pair(_mm512_loadu_ps(rows->q[r] + d), _mm512_loadu_ps(rows->q[r] + d + 16)));
            else
                memset(pairs, 0, sizeof pairs);
            for (int i = 0; i < 16; i++) q32[(size_t)(d / 2 + i) * COLS + c] = pairs[i];
        }
    }
}

/* The softmax step of a group's rows over the tile at t0 (scores w->s,
 * positions as rows): each row's m and l updated, its weights in A layout
 * (w->pa), its rescaling factor in alpha. Column-wise: a vector over the
 * group's 16 columns per position. */
static void softmax_cols(float scale, int32_t t0, const struct tile_work *w, int g, float *alpha) {
    float *m = w->m + g * COLS, *l = w->l + g * COLS;
    const __m512i first = _mm512_loadu_si512(w->first + g * COLS), last = _mm512_loadu_si512(w->last + g * COLS);
    __m512 s[T], mt = _mm512_set1_ps(-INFINITY);
    __mmask16 keep[T];
    for (int j = 0; j < T; j++) {
        __m512i pos = _mm512_set1_epi32(t0 + j);
        keep[j] = _mm512_cmple_epi32_mask(first, pos) & _mm512_cmple_epi32_mask(pos, last);
        s[j] = _mm512_mul_ps(_mm512_load_ps(w->s + j * COLS), _mm512_set1_ps(scale));
        mt = _mm512_mask_max_ps(mt, keep[j], mt, s[j]);
    }
    __m512 mo = _mm512_loadu_ps(m), mn = _mm512_max_ps(mt, mo), a = rescale_factor(mo, mn);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < T; j++) {
        s[j] = _mm512_maskz_mov_ps(keep[j], exp_neg_ps512(_mm512_sub_ps(s[j], mn)));
        sum = _mm512_add_ps(sum, s[j]);
    }
    _mm512_storeu_ps(l, _mm512_fmadd_ps(_mm512_loadu_ps(l), a, sum));
    _mm512_storeu_ps(m, mn);
    _mm512_storeu_ps(alpha, a);
    transpose16(s);
    for (int c = 0; c < COLS; c += 2) _mm512_store_si512(w->pa + (size_t)c * T, bf16_pair(s[c], s[c + 1]));
}

/* The same step row by row for the group's first n rows (a vector over
 * the tile's positions per row; the sum of the weights in position order,
 * as the columns add them). */
static void softmax_rows(float scale, int32_t t0, const struct tile_work *w, int g, int n, float *alpha) {
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i col = _mm512_mullo_epi32(iota, _mm512_set1_epi32(COLS));
    for (int c = 0; c < n; c++) {
        int r = g * COLS + c;
        __m512i pos = _mm512_add_epi32(iota, _mm512_set1_epi32(t0));
        __mmask16 keep = _mm512_cmple_epi32_mask(_mm512_set1_epi32(w->first[r]), pos) &
                         _mm512_cmple_epi32_mask(pos, _mm512_set1_epi32(w->last[r]));
        __m512 s = _mm512_mul_ps(_mm512_i32gather_ps(col, w->s + c, 4), _mm512_set1_ps(scale));
        __m512 mt = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), keep, s)));
        __m512 mo = _mm512_set1_ps(w->m[r]), mn = _mm512_max_ps(mt, mo), a = rescale_factor(mo, mn);
        _Alignas(64) float p[T];
        __m512 pv = _mm512_maskz_mov_ps(keep, exp_neg_ps512(_mm512_sub_ps(s, mn)));
        _mm512_store_ps(p, pv);
        float sum = 0.0f;
        for (int j = 0; j < T; j++) sum += p[j];
        w->l[r] = fmaf(w->l[r], _mm512_cvtss_f32(a), sum);
        w->m[r] = _mm512_cvtss_f32(mn);
        alpha[c] = _mm512_cvtss_f32(a);
        _mm256_store_si256((__m256i *)(w->pa + (size_t)c * T), (__m256i)_mm512_cvtneps_pbh(pv));
    }
}

/* One group's update by one tile: scores, softmax step, output. */
static void group_tile(int hd, float scale, int32_t t0, const struct tile_work *w, int g, int n_rows,
                       const struct ahead *pf) {
    /* the V rows ahead, spread over the group's steps (pf: this tile's first group) */
    int pv = 0, pn = pf ? pf->n : 0;
    const size_t h = (size_t)hd;
    const uint16_t *qt = w->qt + (size_t)g * h * COLS;
    float *o = w->o + (size_t)g * h * COLS;
    _tile_zero(TS);
    for (int d = 0; d < hd; d += 32) {
        _tile_loadd(TKA, w->kb + d, (long)(2 * h));
        _tile_loadd(TQB, qt + (size_t)d * COLS, 64);
        _tile_dpbf16ps(TS, TKA, TQB);
    }
    _tile_stored(TS, w->s, 64);
    for (; pv < pn && pv < T / 2; pv++) prefetch_row(pf->v[pv], pf->bytes);
    _Alignas(64) float alpha[COLS];
    int n = n_rows < COLS ? n_rows : COLS;
    if (n <= FEW_ROWS) softmax_rows(scale, t0, w, g, n, alpha);
    else softmax_cols(scale, t0, w, g, alpha);
    for (int c = 0; c < n; c++)
        if (alpha[c] != 1.0f) {
            __m512 a = _mm512_set1_ps(alpha[c]);
            float *oc = o + (size_t)c * h;
            for (size_t d = 0; d < h; d += 16) _mm512_store_ps(oc + d, _mm512_mul_ps(_mm512_load_ps(oc + d), a));
        }
    for (; pv < pn; pv++) prefetch_row(pf->v[pv], pf->bytes);
    _tile_loadd(TPA, w->pa, 2 * T);
    for (int d = 0; d < hd; d += 32) {
        _tile_loadd(TO0, o + d, (long)(4 * h));
        _tile_loadd(TVB0, w->vb + (size_t)d * T, 64);
        _tile_loadd(TO1, o + d + 16, (long)(4 * h));
        _tile_loadd(TVB1, w->vb + (size_t)(d + 16) * T, 64);
        _tile_dpbf16ps(TO0, TPA, TVB0);
        _tile_dpbf16ps(TO1, TPA, TVB1);
        _tile_stored(TO0, o + d, (long)(4 * h));
        _tile_stored(TO1, o + d + 16, (long)(4 * h));
    }
}

static void attn_amx(int hd, float scale, const struct attn_kv *kv, const struct attn_rows *rows,
                     float *restrict scratch) {
    const int type = kv->type;
    if (hd % 32 != 0 || (type != TENSOR_TYPE_F16 && type != TENSOR_TYPE_F32 && type != TENSOR_TYPE_Q8_0)) {
        g_attn_vec(hd, scale, kv, rows, scratch);
        return;
    }
    if (rows->n < 1) return;
    const int n_groups = (rows->n + COLS - 1) / COLS;
    const size_t h = (size_t)hd;
    struct tile_work w = carve(scratch, hd, n_groups);
    memset(w.zero, 0, sizeof(float) * h);
    memset(w.o, 0, sizeof(float) * (size_t)n_groups * h * COLS);
    int32_t *gfirst = w.gfirst, *glast = w.glast;
    for (int g = 0; g < n_groups; g++) {
        group_q(rows, hd, g, w.qt + (size_t)g * h * COLS);
        gfirst[g] = INT32_MAX, glast[g] = -1;
        for (int c = 0; c < COLS; c++) {
            int r = g * COLS + c;
            int32_t f = r < rows->n ? attn_row_first(rows, r) : INT32_MAX, e = r < rows->n ? rows->last[r] : -1;
            w.first[r] = f, w.last[r] = e, w.m[r] = -INFINITY, w.l[r] = 0.0f;
            if (f < gfirst[g]) gfirst[g] = f;
            if (e > glast[g]) glast[g] = e;
        }
    }
    tensor_amx_configure_attn();
    int32_t end = attn_rows_end(rows), begin = attn_rows_begin(rows);
    struct attn_cursor cur = {kv->spans, 0};
    if (begin > kv->start) attn_cursor_skip(&cur, begin - kv->start);
    struct attn_cursor ahead = cur;
    /* the first tiles at once, then one tile PF_AHEAD ahead per tile */
    enum { PF_AHEAD = 2 };
    struct ahead pf = {.bytes = tensor_row_size(kv->type, hd)};
    int32_t pf_next = begin; /* first position not yet prefetched */
    for (; pf_next <= end && pf_next < begin + PF_AHEAD * T; pf_next += T) {
        pf.n = end + 1 - pf_next < T ? end + 1 - pf_next : T;
        attn_tile_take(kv, &ahead, pf_next, pf.n, pf.k, pf.v, w.zero);
        for (int j = 0; j < pf.n; j++) prefetch_row(pf.k[j], pf.bytes), prefetch_row(pf.v[j], pf.bytes);
    }
    for (int32_t t0 = begin; t0 <= end; t0 += T) {
        pf.n = 0;
        if (pf_next <= end) {
            pf.n = end + 1 - pf_next < T ? end + 1 - pf_next : T;
            attn_tile_take(kv, &ahead, pf_next, pf.n, pf.k, pf.v, w.zero);
            pf_next += T;
        }
        int nt = end + 1 - t0 < T ? end + 1 - t0 : T;
        const uint8_t *kb[T], *vb[T];
        attn_tile_take(kv, &cur, t0, nt, kb, vb, w.zero);
        for (int j = nt; j < T; j++) kb[j] = vb[j] = (const uint8_t *)w.zero;
        tile_k(hd, type, (const void *const *)kb, w.kb, &pf);
        tile_v(hd, type, (const void *const *)vb, w.vb);
        bool first_group = true;
        for (int g = 0; g < n_groups; g++)
            if (glast[g] >= t0 && gfirst[g] < t0 + T) {
                group_tile(hd, scale, t0, &w, g, rows->n - g * COLS, first_group ? &pf : NULL);
                first_group = false;
            }
        if (first_group)
            for (int j = 0; j < pf.n; j++) prefetch_row(pf.v[j], pf.bytes);
    }
    for (int r = 0; r < rows->n; r++) {
        const float *o = w.o + (size_t)r * h;
        __m512 inv = _mm512_set1_ps(1.0f / w.l[r]);
        for (size_t d = 0; d < h; d += 16) _mm512_storeu_ps(rows->out[r] + d, _mm512_mul_ps(_mm512_load_ps(o + d), inv));
    }
}

void tensor_kernels_init_amx_attn(struct tensor_kernels *k) {
    g_attn_vec = k->attn;
    k->attn = attn_amx;
    k->attn_bf16 = true;
}

#endif /* KVIK_NO_SIMD */
