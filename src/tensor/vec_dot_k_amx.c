/*
 * vec_dot_k_amx.c — Q6_K, Q4_K and Q5_K products of the AMX table: one to
 * a few tokens on AVX-512 VNNI from repacked records, more on AMX tiles
 * (Q6_K also from the file's rows).
 *
 * Per 256-weight super-block b (sixteen sub-blocks k of 16 weights, q in
 * 0..63, int8 scales sc_k) the exact integer
 *
 *     S_b = sum_k sc_k * ((q - 32) . y over sub-block k)
 *
 * enters one chain per element, y = fma((float)S_b, d * d_y, y) for
 * b = 0, 1, ... in order. S_b is exact whatever the order of its terms, so
 * mat-vec, mat-mat and the single-row vec_dot_q6_K_amx give the same bits,
 * whatever the batch. (The AVX-512 table sums the same terms in lanes of
 * floats instead; each table is consistent with itself.)
 *
 * A record holds one group of sixteen rows and one super-block, 3360 bytes
 * (the file's 210 per row). Chunk c (c = 0..63) is the weights 4c .. 4c + 3
 * of the sixteen rows, byte 4 r + i for row r's weight 4c + i, VNNI order:
 *
 *     offset  size  what
 *          0  3072  16 runs of three lines: run g holds chunks g, g + 16
 *                   and g + 32 in the low six bits of its lines 0, 1, 2,
 *                   and chunk g + 48 two bits at a time in their top bits
 *                   (its bits 0-1 in line 0, 2-3 in line 1, 4-5 in line 2)
 *       3072   256  sc[k][r], int8
 *       3328    32  d[r], f16
 */
#ifndef KVIK_NO_SIMD
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "tensor/kernels.h"
#include "tensor/quants.h"

enum { GROUP = 16, SUBS = QK_K / 16 };
enum { R_SC = 3072, R_D = 3328, Q6_REC = 3360 };
/* A packed 16-token tile of Q8_K activations (vec_dot_amx.c's pack_q8_K):
 * per super-block 8 B tiles of 32 weights (8 x 64 bytes each), then the
 * tokens' d (floats), then sub-block sums this file does not use. */
enum { K_TILE_BYTES = 8 * 512 + 64 + 8 * 64 };

static inline float f16t(uint16_t h) { return tensor_fp16_table[h]; }

static inline int32_t load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Weight w (0..255) of a super-block, q in 0..63, read as quants.h lays
 * the bits out. */
static inline int q6_value(const block_q6_K *x, int w) {
    int h = w / 128, l = w % 128;
    const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
    int lo = l < 64 ? ql[l] & 0x0F : ql[l - 64] >> 4;
    return lo | ((qh[l % 32] >> (2 * (l / 32))) & 3) << 4;
}

static void vec_dot_q6_K_amx(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int32_t S = 0;
        for (int k = 0; k < SUBS; k++) {
            int32_t dot = 0;
            for (int i = 0; i < 16; i++) dot += (q6_value(&x[b], 16 * k + i) - 32) * y[b].qs[16 * k + i];
            S += x[b].scales[k] * dot;
        }
        acc = fmaf((float)S, f16t(x[b].d) * y[b].d, acc);
    }
    *s = acc;
}

/* a | (b & c), bit by bit */
static inline __m512i or_and(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0xF8); }

/* The 256 weights of a super-block, q in 0..63, in order: v[j] holds
 * weights 64 j .. 64 j + 63. */
static inline void q6_row_values(const block_q6_K *x, __m512i v[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        __m512i a = _mm512_loadu_si512(x->ql + 64 * h);
        __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
        hb = _mm512_mask_srli_epi16(hb, (__mmask32)0xFFFF0000u, hb, 2); /* the upper half's bits 2-3 and 6-7 */
        v[2 * h] = or_and(_mm512_and_si512(a, m4), _mm512_slli_epi16(hb, 4), m30);
        v[2 * h + 1] = or_and(_mm512_and_si512(_mm512_srli_epi16(a, 4), m4), hb, m30);
    }
}

/* Row r's super-block x into record rec (zeros before the first row). */
static void rec_put_row(uint8_t *rec, int r, const block_q6_K *x) {
    _Alignas(64) uint8_t q[QK_K];
    __m512i v[4];
    q6_row_values(x, v);
    for (int j = 0; j < 4; j++) _mm512_store_si512(q + 64 * j, v[j]);
    for (int g = 0; g < 16; g++)
        for (int l = 0; l < 3; l++)
            for (int i = 0; i < 4; i++)
                rec[64 * (3 * g + l) + 4 * r + i] =
                    (uint8_t)(q[4 * (g + 16 * l) + i] | ((q[4 * (g + 48) + i] >> (2 * l)) & 3) << 6);
    for (int k = 0; k < SUBS; k++) rec[R_SC + GROUP * k + r] = (uint8_t)x->scales[k];
    memcpy(rec + R_D + 2 * r, &x->d, 2);
}

/* Rows [r0, r0 + nr) (nr <= GROUP) of w into the records of one group. */
static void recs_put_group(const struct tensor_matrix *w, int64_t r0, int nr, uint8_t *recs) {
    int64_t nb = w->cols / QK_K;
    memset(recs, 0, (size_t)nb * Q6_REC);
    for (int r = 0; r < nr; r++) {
        const block_q6_K *x = (const block_q6_K *)((const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes);
        for (int64_t b = 0; b < nb; b++) rec_put_row(recs + (size_t)b * Q6_REC, r, &x[b]);
    }
}

static size_t repack_size_q6_K(int64_t rows, int64_t cols) {
    return (size_t)((rows + GROUP - 1) / GROUP) * (size_t)(cols / QK_K) * Q6_REC;
}

static void repack_q6_K(const struct tensor_matrix *w, void *dst) {
    int64_t nb = w->cols / QK_K;
    for (int64_t g = 0; g * GROUP < w->rows; g++) {
        int nr = w->rows - g * GROUP < GROUP ? (int)(w->rows - g * GROUP) : GROUP;
        recs_put_group(w, g * GROUP, nr, (uint8_t *)dst + (size_t)g * (size_t)nb * Q6_REC);
    }
}

/* Prefetches the lines from pf up to end; returns where the next call starts. */
static inline const uint8_t *prefetch_lines(const uint8_t *pf, const uint8_t *end) {
    for (; pf < end; pf += 64) _mm_prefetch((const char *)pf, _MM_HINT_T0);
    return pf;
}

enum { PF_AHEAD = 2048 }; /* bytes of records prefetched ahead of the product */


/* (a & c) | (b & ~c), bit by bit */
static inline __m512i select_bits(__m512i c, __m512i a, __m512i b) { return _mm512_ternarylogic_epi32(a, b, c, 0xE4); }

/* Run g of a Q6_K record: the values (0..63) of chunks g, g + 16, g + 32
 * and g + 48 in v[0..3]. */
static inline __attribute__((always_inline)) void q6_run(const uint8_t *rec, int g, __m512i v[4]) {
    const __m512i m6 = _mm512_set1_epi8(0x3F), m2 = _mm512_set1_epi8(0x03), m4 = _mm512_set1_epi8(0x0F);
    const uint8_t *run = rec + 64 * 3 * g;
    __m512i l0 = _mm512_loadu_si512(run), l1 = _mm512_loadu_si512(run + 64), l2 = _mm512_loadu_si512(run + 128);
    __m512i v3 = select_bits(m2, _mm512_srli_epi16(l0, 6), _mm512_srli_epi16(l1, 4));
    v[3] = _mm512_and_si512(select_bits(m4, v3, _mm512_srli_epi16(l2, 2)), m6);
    v[0] = _mm512_and_si512(l0, m6), v[1] = _mm512_and_si512(l1, m6), v[2] = _mm512_and_si512(l2, m6);
}

/* Mat-vec of one group's records (nb super-blocks) against a Q8_K row: per
 * chunk one VNNI product of q (0..63) with four broadcast activation bytes
 * gives the sixteen rows' partial sums in sixteen lanes; per sub-block
 * 32 times its activation sum is taken off and the scale applied. */
static void recs_matvec(const uint8_t *rec, int64_t nb, int nr, const block_q8_K *y, float *out) {
    const __m512i m6 = _mm512_set1_epi8(0x3F), m2 = _mm512_set1_epi8(0x03), m4 = _mm512_set1_epi8(0x0F);
    __m512 acc = _mm512_setzero_ps();
    const uint8_t *pf = (const uint8_t *)(((uintptr_t)rec + PF_AHEAD) & ~(uintptr_t)63);
    for (int64_t b = 0; b < nb; b++, rec += Q6_REC) {
        const int8_t *yq = y[b].qs;
        const int16_t *bs = y[b].bsums;
        __m512i S = _mm512_setzero_si512();
        for (int m = 0; m < 4; m++) {
            pf = prefetch_lines(pf, rec + (m + 1) * (Q6_REC / 4) + PF_AHEAD);
            /* chunks g, g + 16, g + 32, g + 48 for g = 4m + i: sub-blocks m, m + 4, m + 8, m + 12 */
            __m512i d0 = _mm512_setzero_si512(), d1 = d0, d2 = d0, d3 = d0;
            for (int i = 0; i < 4; i++) {
                int g = 4 * m + i;
                const uint8_t *run = rec + 64 * 3 * g;
                __m512i l0 = _mm512_loadu_si512(run), l1 = _mm512_loadu_si512(run + 64);
                __m512i l2 = _mm512_loadu_si512(run + 128);
                __m512i v3 = select_bits(m2, _mm512_srli_epi16(l0, 6), _mm512_srli_epi16(l1, 4));
                v3 = _mm512_and_si512(select_bits(m4, v3, _mm512_srli_epi16(l2, 2)), m6);
                d0 = _mm512_dpbusd_epi32(d0, _mm512_and_si512(l0, m6), _mm512_set1_epi32(load_i32(yq + 4 * g)));
                d1 = _mm512_dpbusd_epi32(d1, _mm512_and_si512(l1, m6), _mm512_set1_epi32(load_i32(yq + 4 * (g + 16))));
                d2 = _mm512_dpbusd_epi32(d2, _mm512_and_si512(l2, m6), _mm512_set1_epi32(load_i32(yq + 4 * (g + 32))));
                d3 = _mm512_dpbusd_epi32(d3, v3, _mm512_set1_epi32(load_i32(yq + 4 * (g + 48))));
            }
            const __m512i d[4] = {d0, d1, d2, d3};
            for (int j = 0; j < 4; j++) {
                int k = m + 4 * j;
                __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(rec + R_SC + GROUP * k)));
                S = _mm512_add_epi32(S, _mm512_mullo_epi32(_mm512_sub_epi32(d[j], _mm512_set1_epi32(32 * bs[k])), sc));
            }
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + R_D)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(dw, _mm512_set1_ps(y[b].d)), acc);
    }
    _Alignas(64) float res[GROUP];
    _mm512_store_ps(res, acc);
    for (int r = 0; r < nr; r++) out[r] = res[r];
}

/* Per super-block of a mat-mat panel: 16 A tiles (16 rows x 32 bytes:
 * sub-block k's q - 32 in bytes 16 (k % 2) .. + 15, zeros in the other
 * half, so that it multiplies the Q8_K tile of the 32 weights around it),
 * then sc[k][r] (int32), then d[r] (floats). */
enum { P_SC = SUBS * 512, P_D = P_SC + SUBS * GROUP * 4, P_BLOCK = P_D + GROUP * 4 };

#define TILE_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define TILE_STORE(t, p, stride) _tile_stored(t, p, stride)
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)

/* Mat-mat: rows [r0, r0 + nr) against n_tok packed Q8_K rows on tiles. */
static bool rows_matmat(const struct tensor_matrix *w, int64_t r0, int nr, const uint8_t *packed, int64_t n_tok,
                        float *y, int64_t ys) {
    int64_t nb = w->cols / QK_K;
    uint8_t *panel = tensor_amx_scratch((size_t)nb * P_BLOCK);
    if (!panel) return false;
    memset(panel, 0, (size_t)nb * P_BLOCK);
    const __m512i off = _mm512_set1_epi8(32);
    for (int r = 0; r < nr; r++) {
        const block_q6_K *x = (const block_q6_K *)((const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *pb = panel + (size_t)b * P_BLOCK;
            __m512i v[4];
            q6_row_values(&x[b], v);
            for (int j = 0; j < 4; j++) {
                __m512i q = _mm512_sub_epi8(v[j], off);
                _mm_storeu_si128((__m128i *)(pb + (4 * j + 0) * 512 + 32 * r + 0), _mm512_extracti32x4_epi32(q, 0));
                _mm_storeu_si128((__m128i *)(pb + (4 * j + 1) * 512 + 32 * r + 16), _mm512_extracti32x4_epi32(q, 1));
                _mm_storeu_si128((__m128i *)(pb + (4 * j + 2) * 512 + 32 * r + 0), _mm512_extracti32x4_epi32(q, 2));
                _mm_storeu_si128((__m128i *)(pb + (4 * j + 3) * 512 + 32 * r + 16), _mm512_extracti32x4_epi32(q, 3));
            }
            int32_t *sc = (int32_t *)(pb + P_SC);
            for (int k = 0; k < SUBS; k++) sc[GROUP * k + r] = x[b].scales[k];
            ((float *)(pb + P_D))[r] = f16t(x[b].d);
        }
    }
    tensor_amx_configure();
    _Alignas(64) int32_t c0[GROUP * GROUP], c1[GROUP * GROUP];
    for (int64_t t0 = 0; t0 < n_tok; t0 += GROUP) {
        int nt = n_tok - t0 < GROUP ? (int)(n_tok - t0) : GROUP;
        const uint8_t *tile = packed + (size_t)(t0 / GROUP) * (size_t)nb * K_TILE_BYTES;
        __m512 acc[GROUP];
        for (int r = 0; r < GROUP; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *pb = panel + (size_t)b * P_BLOCK, *tb = tile + (size_t)b * K_TILE_BYTES;
            const int32_t *sc = (const int32_t *)(pb + P_SC);
            const float *d = (const float *)(pb + P_D);
            __m512i S[GROUP];
            for (int r = 0; r < GROUP; r++) S[r] = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++) { /* the 32 weights of Q8_K tile j: sub-blocks 2j, 2j + 1 */
                TILE_LOAD(2, tb + j * 512, 64);
                TILE_LOAD(1, pb + (2 * j) * 512, 32);
                TILE_ZERO(0);
                TILE_DPBSSD(0, 1, 2);
                TILE_LOAD(4, pb + (2 * j + 1) * 512, 32);
                TILE_ZERO(3);
                TILE_DPBSSD(3, 4, 2);
                TILE_STORE(0, c0, 64);
                TILE_STORE(3, c1, 64);
                for (int r = 0; r < GROUP; r++) {
                    S[r] = _mm512_add_epi32(S[r], _mm512_mullo_epi32(_mm512_load_si512(c0 + GROUP * r),
                                                                     _mm512_set1_epi32(sc[GROUP * (2 * j) + r])));
                    S[r] = _mm512_add_epi32(S[r], _mm512_mullo_epi32(_mm512_load_si512(c1 + GROUP * r),
                                                                     _mm512_set1_epi32(sc[GROUP * (2 * j + 1) + r])));
                }
            }
            __m512 dy = _mm512_loadu_ps((const float *)(tb + 8 * 512));
            for (int r = 0; r < GROUP; r++)
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r]), _mm512_mul_ps(_mm512_set1_ps(d[r]), dy), acc[r]);
        }
        for (int r = 0; r < nr; r++) {
            _Alignas(64) float res[GROUP];
            _mm512_store_ps(res, acc[r]);
            for (int t = 0; t < nt; t++) y[(t0 + t) * ys + r0 + r] = res[t];
        }
    }
    return true;
}

static bool recs_matmat(int type, const uint8_t *rec0, int64_t nb, int64_t r0, int nr, const uint8_t *xq,
                        size_t xq_row, const uint8_t *packed, int64_t n_tok, float *y, int64_t ys, uint8_t *buf);

/* A few tokens at once from records (below). */
/* Most tokens of that path, per type (measured against the tile paths). */
enum { FEW_MAX = 12, FEW_MAX_Q6 = 16, FEW_K45 = 4, FEW_Q6 = 3 };
typedef void few_fn(const uint8_t *rec, int64_t nb, int nr, const uint8_t *xq, size_t xq_row, int T, float *y,
                    int64_t ys);
static few_fn few_q6_K;
static void few_group(few_fn *fn, int per, const uint8_t *rec, int64_t nb, int64_t r0, int nr, const void *xq,
                      size_t xq_row, int64_t n_tok, float *y, int64_t ys);

/* One group from the repacked records, or (no panel) mat-vec and a few
 * tokens from records made of the file's rows for this call and mat-mat
 * from the file's rows. */
static bool rows_product_group(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                               const void *packed, int64_t n_tok, float *y, int64_t ys) {
    int nr = (int)(r1 - r0);
    int64_t nb = w->cols / QK_K;
    bool few = n_tok > 1 && n_tok <= FEW_MAX_Q6;
    if (n_tok > 1 && !few && w->panel)
        return recs_matmat(w->type, (const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * Q6_REC, nb, r0, nr,
                           xq, xq_row, packed, n_tok, y, ys, NULL);
    if (n_tok > 1 && !few) return rows_matmat(w, r0, nr, packed, n_tok, y, ys);
    const uint8_t *rec;
    if (w->panel) {
        rec = (const uint8_t *)w->panel + (size_t)(r0 / GROUP) * (size_t)nb * Q6_REC;
    } else {
        uint8_t *recs = tensor_amx_scratch((size_t)nb * Q6_REC);
        if (!recs) return false;
        recs_put_group(w, r0, nr, recs);
        rec = recs;
    }
    if (few) {
        few_group(few_q6_K, FEW_Q6, rec, nb, r0, nr, xq, xq_row, n_tok, y, ys);
        return true;
    }
    float out[GROUP];
    recs_matvec(rec, nb, nr, xq, out);
    for (int r = 0; r < nr; r++) y[r0 + r] = out[r];
    return true;
}

enum { Q6_FULL_MIN = 96 }; /* tokens from which Q6_K mat-mat takes the scales into the weight tiles */

static bool q6_full_matmat(const uint8_t *rec0, int64_t nb, int64_t r0, int64_t nr, const uint8_t *xq, size_t xq_row,
                           const uint8_t *packed, int64_t n_tok, float *y, int64_t ys);
static int64_t q6_full_groups_per_call(int64_t nb);

static bool rows_product_q6_K(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                              const void *packed, int64_t n_tok, float *y, int64_t ys) {
    if (n_tok >= Q6_FULL_MIN && w->panel) {
        const int64_t nb = w->cols / QK_K, per = q6_full_groups_per_call(nb) * GROUP;
        for (int64_t g = r0; g < r1; g += per)
            if (!q6_full_matmat((const uint8_t *)w->panel + (size_t)(g / GROUP) * (size_t)nb * Q6_REC, nb, g,
                                r1 - g < per ? r1 - g : per, xq, xq_row, packed, n_tok, y, ys))
                return false;
        return true;
    }
    for (int64_t g = r0; g < r1; g += GROUP)
        if (!rows_product_group(w, g, g + GROUP < r1 ? g + GROUP : r1, xq, xq_row, packed, n_tok, y, ys)) return false;
    return true;
}

/* ---- Q4_K and Q5_K from records ------------------------------------------ *
 *
 * Q4_K keeps the chain of vec_dot_amx.c: per super-block the exact
 * S_b = sum_j sc_j (q . y over 32-weight sub-block j) and
 * M_b = sum_j m_j ysum_j, then y = fma((float)S_b, d d_y, y) and
 * y = fma((float)M_b, -(dmin d_y), y); its products without a panel stay
 * those of that file. Q5_K has the same chain with q in 0..31 (a nibble
 * and a fifth bit). A Q4_K record (sixteen rows, one super-block, the
 * file's 144 bytes per row):
 *
 *     offset  size  what
 *          0  2048  32 lines: line L holds each row's qs[4L .. 4L + 3] at
 *                   4 r: low nibbles of sub-block 2 (L / 8), high ones of
 *                   sub-block 2 (L / 8) + 1
 *       2048   192  the rows' 12 scale bytes as three 32-bit words, word w
 *                   of row r at 64 w + 4 r
 *       2240    32  d[r], f16
 *       2272    32  dmin[r], f16
 */
enum { K4_SCW = 2048, K4_D = 2240, K4_DMIN = 2272, Q4K_REC = 2304 };
/* A Q5_K record (the file's 176 bytes per row) is a Q4_K record, then 64
 * masks of fifth bits: bit 4 r + i of mask 2L (2L + 1) is the fifth bit of
 * row r's weight in the low (high) nibble of byte 4 r + i of line L. */
enum { K5_HB = Q4K_REC, Q5K_REC = Q4K_REC + 64 * 8 };

static inline size_t k45_rec(bool q5) { return q5 ? Q5K_REC : Q4K_REC; }

static void vec_dot_q5_K_amx(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    float acc = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int32_t S = 0, M = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            k_scale_min(j, x[b].scales, &sc, &m);
            int32_t dot = 0;
            for (int l = 0; l < 32; l++) {
                uint8_t q = x[b].qs[32 * (j / 2) + l];
                int v = (j % 2 ? q >> 4 : q & 0x0F) | ((x[b].qh[l] >> j) & 1) << 4;
                dot += v * y[b].qs[32 * j + l];
            }
            S += sc * dot;
            M += m * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        }
        acc = fmaf((float)S, f16t(x[b].d) * y[b].d, acc);
        acc = fmaf((float)M, -(f16t(x[b].dmin) * y[b].d), acc);
    }
    *s = acc;
}

/* Row r's super-block (a block_q4_K, or with q5 a block_q5_K) into record
 * rec (a Q5_K record's masks zero before its first row). */
static void rec_put_row_k45(uint8_t *rec, int r, const uint8_t *blk, bool q5) {
    const uint8_t *qs = blk + 4 + K_SCALE_SIZE + (q5 ? QK_K / 8 : 0), *qh = blk + 4 + K_SCALE_SIZE;
    for (int L = 0; L < 32; L++) memcpy(rec + 64 * L + 4 * r, qs + 4 * L, 4);
    for (int i = 0; i < 3; i++) memcpy(rec + K4_SCW + 64 * i + 4 * r, blk + 4 + 4 * i, 4);
    memcpy(rec + K4_D + 2 * r, blk, 2);
    memcpy(rec + K4_DMIN + 2 * r, blk + 2, 2);
    if (!q5) return;
    for (int L = 0; L < 32; L++)
        for (int h = 0; h < 2; h++) {
            int jp = L / 8, c = L % 8, bit = 2 * jp + h;
            uint64_t m;
            memcpy(&m, rec + K5_HB + 8 * (2 * L + h), 8);
            for (int i = 0; i < 4; i++) m |= (uint64_t)((qh[4 * c + i] >> bit) & 1) << (4 * r + i);
            memcpy(rec + K5_HB + 8 * (2 * L + h), &m, 8);
        }
}

/* Rows [r0, r0 + nr) (nr <= GROUP) of w (Q4_K or Q5_K) into one group's records. */
static void recs_put_group_k45(const struct tensor_matrix *w, int64_t r0, int nr, uint8_t *recs) {
    const bool q5 = w->type == TENSOR_TYPE_Q5_K;
    const size_t bb = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K), rb = k45_rec(q5);
    int64_t nb = w->cols / QK_K;
    memset(recs, 0, (size_t)nb * rb);
    for (int r = 0; r < nr; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes;
        for (int64_t b = 0; b < nb; b++) rec_put_row_k45(recs + (size_t)b * rb, r, row + (size_t)b * bb, q5);
    }
}

static size_t repack_size_q5_K(int64_t rows, int64_t cols) {
    return (size_t)((rows + GROUP - 1) / GROUP) * (size_t)(cols / QK_K) * Q5K_REC;
}

/* The table's Q4_K whole product from the file's rows (vec_dot_amx.c). */
static bool (*q4_K_from_rows)(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                              const void *packed, int64_t n_tok, float *y, int64_t ys);

static size_t repack_size_q4_K(int64_t rows, int64_t cols) {
    return (size_t)((rows + GROUP - 1) / GROUP) * (size_t)(cols / QK_K) * Q4K_REC;
}

/* Q4_K or Q5_K (w->type). */
static void repack_k45(const struct tensor_matrix *w, void *dst) {
    const size_t rb = k45_rec(w->type == TENSOR_TYPE_Q5_K);
    int64_t nb = w->cols / QK_K;
    for (int64_t g = 0; g * GROUP < w->rows; g++) {
        int nr = w->rows - g * GROUP < GROUP ? (int)(w->rows - g * GROUP) : GROUP;
        recs_put_group_k45(w, g * GROUP, nr, (uint8_t *)dst + (size_t)g * (size_t)nb * rb);
    }
}

static inline __m512 neg_ps(__m512 x) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
}

/* ---- mat-mat from records (Q6_K, Q4_K, Q5_K) ------------------------------ *
 *
 * The weights are the B operand of the tile products and the tokens the A
 * operand, so that a record's chunks are B-tile rows as they are (VNNI
 * order). A: sixteen tokens' quants of one part of a super-block, read
 * straight from the quantized rows (a row stride apart; the rows of Q8_K
 * activations are always written, this table having no quantize_tile for
 * them), a last partial tile from a copy padded with zeros. B: the
 * group's weights unpacked once per call. Q6_K (half-K layout): per
 * 32-weight part two tiles, a sub-block's q - 32 in one half of the part's
 * 32 K values and zeros in the other, the products scaled per token in
 * integers. Q4_K and Q5_K (full layout, K = 64): the sub-block scales
 * folded into the B tiles in two parts, so that a super-block's S_b takes
 * four products per part in the tile registers and one shift and add per
 * token; the mins term by 16-bit products of the mins and the tokens'
 * sub-block sums. A result tile holds one token per row, the sixteen
 * weight rows across: each token's chain runs in the lanes of one vector,
 * scales and d as vectors of the rows. */

enum { Q8K_QS = 4 }; /* the quants' offset in a block_q8_K */

/* The group's Q6_K weights at rec as B tiles, nb super-blocks: 16 tiles
 * (8 KiB) per super-block. */
static void unpack_b_q6_K(const uint8_t *rec, int64_t nb, uint8_t *bp) {
    const __m512i off = _mm512_set1_epi8(32), zero = _mm512_setzero_si512();
    for (int64_t b = 0; b < nb; b++, rec += Q6_REC, bp += SUBS * 512) {
        for (int k = 0; k < SUBS; k++)
            for (int i = 0; i < 4; i++) _mm512_store_si512(bp + 512 * k + 256 * (1 - k % 2) + 64 * i, zero);
        for (int g = 0; g < 16; g++) {
            __m512i v[4];
            q6_run(rec, g, v);
            for (int j = 0; j < 4; j++) {
                int c = g + 16 * j, k = c / 4;
                _mm512_store_si512(bp + 512 * k + 256 * (k % 2) + 64 * (c % 4), _mm512_sub_epi8(v[j], off));
            }
        }
    }
}

/* Q4_K's scales and mins of one record, unpacked in the rows' lanes:
 * sc[j] and mn[j] (j = 0..7) as 32-bit integers. */
static inline void q4_K_rec_scales(const uint8_t *rec, __m512i sc[8], __m512i mn[8]) {
    const __m512i lo6 = _mm512_set1_epi32(0x3f3f3f3f), lo4 = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i hi2 = _mm512_set1_epi32(0x30303030), byte = _mm512_set1_epi32(0xFF);
    __m512i w0 = _mm512_loadu_si512(rec + K4_SCW), w1 = _mm512_loadu_si512(rec + K4_SCW + 64);
    __m512i w2 = _mm512_loadu_si512(rec + K4_SCW + 128);
    __m512i s03 = _mm512_and_si512(w0, lo6), s47 = or_and(_mm512_and_si512(w2, lo4), _mm512_srli_epi32(w0, 2), hi2);
    __m512i m03 = _mm512_and_si512(w1, lo6);
    __m512i m47 = or_and(_mm512_and_si512(_mm512_srli_epi32(w2, 4), lo4), _mm512_srli_epi32(w1, 2), hi2);
    for (int i = 0; i < 4; i++) {
        sc[i] = _mm512_and_si512(_mm512_srli_epi32(s03, 8 * i), byte);
        sc[i + 4] = _mm512_and_si512(_mm512_srli_epi32(s47, 8 * i), byte);
        mn[i] = _mm512_and_si512(_mm512_srli_epi32(m03, 8 * i), byte);
        mn[i + 4] = _mm512_and_si512(_mm512_srli_epi32(m47, 8 * i), byte);
    }
}

#define TILE_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)

/* Per super-block of a Q4_K or Q5_K group unpacked for mat-mat:
 *
 *     offset  size  what
 *          0  8192  four 64-weight chunks (weights 64 c .. 64 c + 63,
 *                   sub-blocks 2 c and 2 c + 1), each two B tiles of K = 64
 *                   (16 lines of 64 bytes, byte 4 r + i of line k: row r's
 *                   weight 64 c + 4 k + i): q times the low part of its
 *                   sub-block's scale, then q times the high part
 *       8192   256  mins in 16-bit pairs: word i of row r at 64 i + 4 r
 *                   holds m[2 i] | m[2 i + 1] << 16
 *       8448    64  d[r], float
 *       8512    64  dmin[r], float
 *
 * The scale sc = lo + (hi << shift) is split so that both products fit a
 * byte (Q4_K, shift 4: 15 x 15 and 15 x 3; Q5_K, shift 3: 31 x 7 and
 * 31 x 7); their products with the tokens' quants give S_lo and S_hi, and
 * the exact S_b = S_lo + (S_hi << shift). */
enum { KB_MINS = 8192, KB_D = KB_MINS + 256, KB_DMIN = KB_D + 64, K45_BLOCK = KB_DMIN + 64 };

static inline int k45_shift(bool q5) { return q5 ? 3 : 4; }

/* Each byte of v times the byte in the low half of its 16-bit word of s16
 * (the high half zero): with every product below 256, one 16-bit multiply
 * gives both bytes of a word, no carry between them. */
static inline __m512i mul_bytes(__m512i v, __m512i s16) { return _mm512_mullo_epi16(v, s16); }

/* Line L of a Q4_K (q5: Q5_K) record: the weights of its low nibbles in
 * lo, of its high nibbles in hi (0..15, Q5_K 0..31), VNNI order. */
static inline __attribute__((always_inline)) void k45_line(const uint8_t *rec, int L, const bool q5, __m512i *lo,
                                                             __m512i *hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i q = _mm512_loadu_si512(rec + 64 * L);
    *lo = _mm512_and_si512(q, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    if (q5) {
        uint64_t ml, mh;
        memcpy(&ml, rec + K5_HB + 16 * L, 8);
        memcpy(&mh, rec + K5_HB + 16 * L + 8, 8);
        *lo = _mm512_mask_add_epi8(*lo, (__mmask64)ml, *lo, _mm512_set1_epi8(0x10)); /* bit 4 is clear: add is or */
        *hi = _mm512_mask_add_epi8(*hi, (__mmask64)mh, *hi, _mm512_set1_epi8(0x10));
    }
}

static void unpack_b_k45(const uint8_t *rec, int64_t nb, uint8_t *bp, bool q5) {
    const int shift = k45_shift(q5);
    const __m512i low = _mm512_set1_epi32((1 << shift) - 1);
    for (int64_t b = 0; b < nb; b++, rec += k45_rec(q5), bp += K45_BLOCK) {
        __m512i sc[8], mn[8];
        q4_K_rec_scales(rec, sc, mn);
        for (int jp = 0; jp < 4; jp++) {
            uint8_t *ch = bp + (size_t)jp * 2048;
            __m512i lo_s[2], hi_s[2]; /* the parts of sub-blocks 2 jp and 2 jp + 1, in both 16-bit halves */
            for (int h = 0; h < 2; h++) {
                __m512i l = _mm512_and_si512(sc[2 * jp + h], low), u = _mm512_srli_epi32(sc[2 * jp + h], shift);
                lo_s[h] = _mm512_or_si512(l, _mm512_slli_epi32(l, 16));
                hi_s[h] = _mm512_or_si512(u, _mm512_slli_epi32(u, 16));
            }
            _mm512_store_si512(bp + KB_MINS + 64 * jp, _mm512_or_si512(mn[2 * jp], _mm512_slli_epi32(mn[2 * jp + 1], 16)));
            for (int c = 0; c < 8; c++) {
                __m512i lo, hi;
                k45_line(rec, 8 * jp + c, q5, &lo, &hi);
                _mm512_store_si512(ch + 64 * c, mul_bytes(lo, lo_s[0]));
                _mm512_store_si512(ch + 64 * (8 + c), mul_bytes(hi, lo_s[1]));
                _mm512_store_si512(ch + 1024 + 64 * c, mul_bytes(lo, hi_s[0]));
                _mm512_store_si512(ch + 1024 + 64 * (8 + c), mul_bytes(hi, hi_s[1]));
            }
        }
        _mm512_store_ps(bp + KB_D, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + K4_D))));
        _mm512_store_ps(bp + KB_DMIN, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + K4_DMIN))));
    }
}

/* The chains of the nt tokens of one token tile after one super-block:
 * lo and hi the tile products (token t's sixteen rows at 16 t), bs the
 * tokens' eight sub-block sums ([j][t], int32), dy their d, blk the
 * super-block's unpacked block. */
static inline __attribute__((always_inline)) void k45_tile_chains(__m512 *acc, int nt, const int32_t *lo,
                                                                   const int32_t *hi, const int32_t *bs,
                                                                   const float *dy, const uint8_t *blk, int shift) {
    const __m512i w16 = _mm512_set1_epi32(0xFFFF);
    _Alignas(64) int32_t pr[4][GROUP]; /* token t's sums of sub-blocks 2 i and 2 i + 1 as 16-bit pairs */
    for (int i = 0; i < 4; i++)
        _mm512_store_si512(pr[i], _mm512_or_si512(_mm512_and_si512(_mm512_load_si512(bs + 32 * i), w16),
                                                  _mm512_slli_epi32(_mm512_load_si512(bs + 32 * i + 16), 16)));
    const __m512i mp0 = _mm512_load_si512(blk + KB_MINS), mp1 = _mm512_load_si512(blk + KB_MINS + 64);
    const __m512i mp2 = _mm512_load_si512(blk + KB_MINS + 128), mp3 = _mm512_load_si512(blk + KB_MINS + 192);
    const __m512 d = _mm512_load_ps(blk + KB_D), dmin = _mm512_load_ps(blk + KB_DMIN);
    for (int t = 0; t < nt; t++) {
        __m512i S = _mm512_add_epi32(_mm512_load_si512(lo + GROUP * t),
                                     _mm512_slli_epi32(_mm512_load_si512(hi + GROUP * t), shift));
        __m512i M = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp0, _mm512_set1_epi32(pr[0][t]));
        M = _mm512_dpwssd_epi32(M, mp1, _mm512_set1_epi32(pr[1][t]));
        M = _mm512_dpwssd_epi32(M, mp2, _mm512_set1_epi32(pr[2][t]));
        M = _mm512_dpwssd_epi32(M, mp3, _mm512_set1_epi32(pr[3][t]));
        __m512 dyt = _mm512_set1_ps(dy[t]);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, dyt), acc[t]);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M), neg_ps(_mm512_mul_ps(dmin, dyt)), acc[t]);
    }
}

/* The A operand of token tile t0 (tokens t0 .. t0 + nt - 1 of xq): the
 * rows themselves, or for a partial tile a copy at tail padded with zeros. */
static const uint8_t *token_tile(const uint8_t *xq, size_t xq_row, int64_t t0, int nt, uint8_t *tail) {
    const uint8_t *a = xq + (size_t)t0 * xq_row;
    if (nt == GROUP) return a;
    memcpy(tail, a, (size_t)nt * xq_row);
    memset(tail + (size_t)nt * xq_row, 0, (size_t)(GROUP - nt) * xq_row);
    return tail;
}

/* Q6_K mat-mat of one group (the half-K layout): per super-block and
 * 32-weight part two tile products, scaled per token in integers. */
static void recs_matmat_q6_K(const uint8_t *rec0, int64_t nb, int64_t r0, int nr, const uint8_t *xq, size_t xq_row,
                             const uint8_t *packed, int64_t n_tok, float *y, int64_t ys, const uint8_t *bp,
                             uint8_t *tail) {
    const __mmask16 rows = (__mmask16)((1u << nr) - 1);
    tensor_amx_configure();
    _Alignas(64) int32_t c0[GROUP * GROUP], c1[GROUP * GROUP];
    for (int64_t t0 = 0; t0 < n_tok; t0 += GROUP) {
        const int nt = n_tok - t0 < GROUP ? (int)(n_tok - t0) : GROUP;
        const uint8_t *a = token_tile(xq, xq_row, t0, nt, tail);
        const uint8_t *tile = packed + (size_t)(t0 / GROUP) * (size_t)nb * K_TILE_BYTES;
        __m512 acc[GROUP];
        for (int t = 0; t < GROUP; t++) acc[t] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *rec = rec0 + (size_t)b * Q6_REC, *bb = bp + (size_t)b * SUBS * 512;
            const uint8_t *ab = a + (size_t)b * sizeof(block_q8_K) + Q8K_QS, *tb = tile + (size_t)b * K_TILE_BYTES;
            const float *dy = (const float *)(tb + 8 * 512);
            __m512i S[GROUP];
            for (int t = 0; t < GROUP; t++) S[t] = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++) { /* sub-blocks 2j, 2j + 1: the part's two halves */
                TILE_LOAD(1, ab + 32 * j, xq_row);
                TILE_LOAD(2, bb + 512 * (2 * j), 64);
                TILE_ZERO(0);
                TILE_DPBSSD(0, 1, 2);
                TILE_LOAD(5, bb + 512 * (2 * j + 1), 64);
                TILE_ZERO(3);
                TILE_DPBSSD(3, 1, 5);
                TILE_STORE(0, c0, 64);
                TILE_STORE(3, c1, 64);
                __m512i s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(rec + R_SC + GROUP * (2 * j))));
                __m512i s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(rec + R_SC + GROUP * (2 * j + 1))));
                for (int t = 0; t < GROUP; t++) {
                    if (t >= nt) break;
                    S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(_mm512_load_si512(c0 + GROUP * t), s0));
                    S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(_mm512_load_si512(c1 + GROUP * t), s1));
                }
            }
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + R_D)));
            for (int t = 0; t < nt; t++)
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(d, _mm512_set1_ps(dy[t])), acc[t]);
        }
        for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + (t0 + t) * ys + r0, rows, acc[t]);
    }
}

/* Q4_K / Q5_K mat-mat of one group from its unpacked blocks bp (the full
 * layout). Token tiles in pairs: per super-block and chunk two A tiles
 * (the pair's tokens) and two B tiles (the scales' parts), four products
 * into S_lo and S_hi of each tile, whose chains then take the block. A
 * last single tile runs alone. */
/* Q4_K / Q5_K mat-mat of the ng groups unpacked at bp (nb blocks each,
 * group after group; rows r0 .. r0 + nr - 1) in the full layout. Token
 * tiles in pairs; per pair, super-block and group, per 64-weight chunk
 * two A tiles (the pair's quants) and two B tiles (the scales' parts),
 * four products into S_lo and S_hi of each token tile, whose chains then
 * take the block. The pair's quants of one super-block stay in L1 while
 * the groups' blocks go by; a last single tile runs alone. acc: room for
 * 2 * GROUP chains per group; tail: two zero-padded token tiles. */
static void k45_tiles(int64_t nb, int64_t ng, int64_t r0, int64_t nr, const uint8_t *xq, size_t xq_row,
                      const uint8_t *packed, int64_t n_tok, float *y, int64_t ys, const uint8_t *bp, uint8_t *tail,
                      __m512 *acc, bool q5) {
    const int shift = k45_shift(q5);
    const size_t tail_bytes = (GROUP * xq_row + 63) & ~(size_t)63;
    tensor_amx_configure_full();
    _Alignas(64) int32_t c[4][GROUP * GROUP];
    for (int64_t t0 = 0; t0 < n_tok; t0 += 2 * GROUP) {
        const int nt0 = n_tok - t0 < GROUP ? (int)(n_tok - t0) : GROUP;
        const int nt1 = n_tok - t0 - nt0 < GROUP ? (int)(n_tok - t0 - nt0) : GROUP;
        const uint8_t *a0 = token_tile(xq, xq_row, t0, nt0, tail);
        const uint8_t *a1 = nt1 > 0 ? token_tile(xq, xq_row, t0 + GROUP, nt1, tail + tail_bytes) : NULL;
        const uint8_t *tile0 = packed + (size_t)(t0 / GROUP) * (size_t)nb * K_TILE_BYTES;
        const uint8_t *tile1 = tile0 + (size_t)nb * K_TILE_BYTES;
        for (int64_t i = 0; i < ng * 2 * GROUP; i++) acc[i] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const size_t ao = (size_t)b * sizeof(block_q8_K) + Q8K_QS, to = (size_t)b * K_TILE_BYTES;
            const uint8_t *tb0 = tile0 + to, *tb1 = tile1 + to;
            for (int64_t g = 0; g < ng; g++) {
                const uint8_t *bb = bp + (size_t)(g * nb + b) * K45_BLOCK;
                __m512 *ga = acc + g * 2 * GROUP;
                TILE_ZERO(0);
                TILE_ZERO(1);
                if (nt1 > 0) {
                    TILE_ZERO(2);
                    TILE_ZERO(3);
                    for (int ch = 0; ch < 4; ch++) {
                        TILE_LOAD(4, a0 + ao + 64 * ch, xq_row);
                        TILE_LOAD(6, bb + 2048 * ch, 64);
                        TILE_DPBSUD(0, 4, 6);
                        TILE_LOAD(7, bb + 2048 * ch + 1024, 64);
                        TILE_DPBSUD(1, 4, 7);
                        TILE_LOAD(5, a1 + ao + 64 * ch, xq_row);
                        TILE_DPBSUD(2, 5, 6);
                        TILE_DPBSUD(3, 5, 7);
                    }
                } else {
                    for (int ch = 0; ch < 4; ch++) {
                        TILE_LOAD(4, a0 + ao + 64 * ch, xq_row);
                        TILE_LOAD(6, bb + 2048 * ch, 64);
                        TILE_DPBSUD(0, 4, 6);
                        TILE_LOAD(7, bb + 2048 * ch + 1024, 64);
                        TILE_DPBSUD(1, 4, 7);
                    }
                }
                TILE_STORE(0, c[0], 64);
                TILE_STORE(1, c[1], 64);
                k45_tile_chains(ga, nt0, c[0], c[1], (const int32_t *)(tb0 + 8 * 512 + 64),
                                (const float *)(tb0 + 8 * 512), bb, shift);
                if (nt1 > 0) {
                    TILE_STORE(2, c[2], 64);
                    TILE_STORE(3, c[3], 64);
                    k45_tile_chains(ga + GROUP, nt1, c[2], c[3], (const int32_t *)(tb1 + 8 * 512 + 64),
                                    (const float *)(tb1 + 8 * 512), bb, shift);
                }
            }
        }
        for (int64_t g = 0; g < ng; g++) {
            int rows_g = nr - g * GROUP < GROUP ? (int)(nr - g * GROUP) : GROUP;
            const __mmask16 rows = (__mmask16)((1u << rows_g) - 1);
            for (int t = 0; t < nt0 + nt1; t++)
                _mm512_mask_storeu_ps(y + (t0 + t) * ys + r0 + g * GROUP, rows, acc[g * 2 * GROUP + t]);
        }
    }
}

/* Groups of one k45_matmat (or q6_full_matmat) call: their unpacked
 * blocks stay within about K45_PANEL bytes (half of L2). */
enum { K45_PANEL = 1024 * 1024 };

static int64_t k45_groups_per_call(int64_t nb) {
    int64_t ng = K45_PANEL / (nb * K45_BLOCK);
    return ng < 1 ? 1 : ng;
}

/* Bytes of the work area of k45_matmat for ng groups. */
static size_t k45_work_size(int64_t ng, int64_t nb, size_t xq_row) {
    return (size_t)(ng * nb) * K45_BLOCK + 2 * ((GROUP * xq_row + 63) & ~(size_t)63) +
           (size_t)ng * 2 * GROUP * sizeof(__m512);
}

/* Mat-mat of the groups from r0 on (nr rows, k45_groups_per_call groups at
 * most; their Q4_K or Q5_K records at rec0, one after the other, nb
 * super-blocks each) against the n_tok quantized rows at xq (xq_row bytes
 * apart) and their packed tiles (for the tokens' d and sub-block sums);
 * buf: k45_work_size bytes, 64-byte aligned, or NULL for this thread's
 * scratch. */
static bool k45_matmat(const uint8_t *rec0, int64_t nb, int64_t r0, int64_t nr, const uint8_t *xq, size_t xq_row,
                       const uint8_t *packed, int64_t n_tok, float *y, int64_t ys, uint8_t *buf, bool q5) {
    const int64_t ng = (nr + GROUP - 1) / GROUP;
    if (!buf) buf = tensor_amx_scratch(k45_work_size(ng, nb, xq_row));
    if (!buf) return false;
    uint8_t *tail = buf + (size_t)(ng * nb) * K45_BLOCK;
    __m512 *acc = (__m512 *)(tail + 2 * ((GROUP * xq_row + 63) & ~(size_t)63));
    for (int64_t g = 0; g < ng; g++)
        unpack_b_k45(rec0 + (size_t)(g * nb) * k45_rec(q5), nb, buf + (size_t)(g * nb) * K45_BLOCK, q5);
    k45_tiles(nb, ng, r0, nr, xq, xq_row, packed, n_tok, y, ys, buf, tail, acc, q5);
    return true;
}

/* ---- Q6_K mat-mat with the scales in the weight tiles --------------------- *
 *
 * With q in 0..63 and the int8 scale written in balanced base 5,
 * sc = e0 + 5 e1 + 25 e2 + 125 e3 (e_i in -2..2), every q e_i fits a signed
 * byte, and
 *
 *     S_b = sum_k sc_k (q - 32) . y = sum_i 5^i (sum_w q e_i(w) y_w)
 *           - 32 sum_k sc_k ysum_k
 *
 * with ysum_k the Q8_K row's sums of 16. Per super-block four B tiles of
 * K = 64 per part and chunk (a part's four products accumulate in a tile
 * register), then per token the parts by Horner's rule and the offset
 * term by eight 16-bit dot products with the row's own pairs of sums.
 * Unpacked per super-block of a group:
 *
 *     offset   size  what
 *          0  16384  chunk c (weights 64 c .. 64 c + 63), part i: the B
 *                    tile at 4096 c + 1024 i, byte 64 k + 4 r + j holding
 *                    row r's q e_i of weight 64 c + 4 k + j (int8)
 *      16384    512  -32 sc in 16-bit pairs: word i of row r at 64 i + 4 r
 *                    holds sub-blocks 2 i and 2 i + 1
 *      16896     64  d[r], float
 */
enum { Q6F_NEG = 16384, Q6F_D = Q6F_NEG + 512, Q6F_BLOCK = Q6F_D + 64 };

/* The balanced base-5 digits of each int8 scale, q6_digit[i][sc + 128]
 * (filled by tensor_kernels_init_amx_k), each in both 16-bit halves. */
static int32_t q6_digit[4][256];

static void q6_digits_init(void) {
    for (int v0 = -128; v0 < 128; v0++) {
        int v = v0;
        for (int i = 0; i < 4; i++) {
            int e = ((v % 5) + 5) % 5;
            if (e > 2) e -= 5;
            q6_digit[i][v0 + 128] = (int32_t)((uint32_t)(uint16_t)(int16_t)e | (uint32_t)(uint16_t)(int16_t)e << 16);
            v = (v - e) / 5;
        }
    }
}

/* Each byte of v (0..63) times the signed 16-bit word of s16 it lies in,
 * every product a signed byte. */
static inline __m512i mul_bytes_signed(__m512i v, __m512i s16) {
    const __m512i even = _mm512_set1_epi16(0x00FF);
    __m512i e = _mm512_and_si512(_mm512_mullo_epi16(_mm512_and_si512(v, even), s16), even);
    __m512i o = _mm512_mullo_epi16(_mm512_srli_epi16(v, 8), s16);
    return _mm512_or_si512(e, _mm512_slli_epi16(o, 8));
}

static void unpack_q6_full(const uint8_t *rec, int64_t nb, uint8_t *bp) {
    const __m512i w16 = _mm512_set1_epi32(0xFFFF);
    for (int64_t b = 0; b < nb; b++, rec += Q6_REC, bp += Q6F_BLOCK) {
        _Alignas(64) int32_t dig[SUBS][4][GROUP];
        for (int k = 0; k < SUBS; k++)
            for (int r = 0; r < GROUP; r++) {
                int sc = (int8_t)rec[R_SC + GROUP * k + r];
                for (int i = 0; i < 4; i++) dig[k][i][r] = q6_digit[i][sc + 128];
            }
        for (int i = 0; i < 8; i++) {
            __m512i s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(rec + R_SC + GROUP * (2 * i))));
            __m512i s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(rec + R_SC + GROUP * (2 * i + 1))));
            __m512i n0 = _mm512_mullo_epi32(s0, _mm512_set1_epi32(-32)), n1 = _mm512_mullo_epi32(s1, _mm512_set1_epi32(-32));
            _mm512_store_si512(bp + Q6F_NEG + 64 * i, _mm512_or_si512(_mm512_and_si512(n0, w16), _mm512_slli_epi32(n1, 16)));
        }
        for (int g = 0; g < 16; g++) {
            __m512i v[4];
            q6_run(rec, g, v);
            for (int j = 0; j < 4; j++) {
                int L = g + 16 * j, k = L / 4, c = L / 16; /* line L: weights 4 L .. 4 L + 3 */
                for (int i = 0; i < 4; i++)
                    _mm512_store_si512(bp + 4096 * c + 1024 * i + 64 * (L % 16),
                                       mul_bytes_signed(v[j], _mm512_load_si512(dig[k][i])));
            }
        }
        _mm512_store_ps(bp + Q6F_D, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + R_D))));
    }
}

/* The chains of the nt tokens of one token tile after one super-block: p
 * the four parts' tile products (token t's sixteen rows at 16 t), ys the
 * first token's Q8_K block (the next a row stride on), dy the tokens' d. */
static inline __attribute__((always_inline)) void q6_tile_chains(__m512 *acc, int nt, int32_t (*p)[GROUP * GROUP],
                                                                  const uint8_t *yb, size_t xq_row, const float *dy,
                                                                  const uint8_t *blk) {
    __m512i neg[8];
    for (int i = 0; i < 8; i++) neg[i] = _mm512_load_si512(blk + Q6F_NEG + 64 * i);
    const __m512 d = _mm512_load_ps(blk + Q6F_D);
    for (int t = 0; t < nt; t++) {
        __m512i S = _mm512_load_si512(p[3] + GROUP * t);
        for (int i = 2; i >= 0; i--)
            S = _mm512_add_epi32(_mm512_add_epi32(S, _mm512_slli_epi32(S, 2)), _mm512_load_si512(p[i] + GROUP * t));
        const uint8_t *bs = yb + (size_t)t * xq_row + offsetof(block_q8_K, bsums);
        for (int i = 0; i < 8; i++) S = _mm512_dpwssd_epi32(S, neg[i], _mm512_set1_epi32(load_i32(bs + 4 * i)));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, _mm512_set1_ps(dy[t])), acc[t]);
    }
}

/* Q6_K mat-mat of the ng groups unpacked at bp (rows r0 .. r0 + nr - 1):
 * per token tile, super-block and group, per chunk one A tile (the
 * tokens' quants) and the four parts' B tiles. */
static void q6_full_tiles(int64_t nb, int64_t ng, int64_t r0, int64_t nr, const uint8_t *xq, size_t xq_row,
                          const uint8_t *packed, int64_t n_tok, float *y, int64_t ys, const uint8_t *bp, uint8_t *tail,
                          __m512 *acc) {
    tensor_amx_configure_full();
    _Alignas(64) int32_t c[4][GROUP * GROUP];
    for (int64_t t0 = 0; t0 < n_tok; t0 += GROUP) {
        const int nt = n_tok - t0 < GROUP ? (int)(n_tok - t0) : GROUP;
        const uint8_t *a = token_tile(xq, xq_row, t0, nt, tail);
        const uint8_t *tile = packed + (size_t)(t0 / GROUP) * (size_t)nb * K_TILE_BYTES;
        for (int64_t i = 0; i < ng * GROUP; i++) acc[i] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *ab = a + (size_t)b * sizeof(block_q8_K);
            const float *dy = (const float *)(tile + (size_t)b * K_TILE_BYTES + 8 * 512);
            for (int64_t g = 0; g < ng; g++) {
                const uint8_t *bb = bp + (size_t)(g * nb + b) * Q6F_BLOCK;
                TILE_ZERO(0);
                TILE_ZERO(1);
                TILE_ZERO(2);
                TILE_ZERO(3);
                for (int ch = 0; ch < 4; ch++) {
                    const uint8_t *bc = bb + 4096 * ch;
                    TILE_LOAD(4, ab + Q8K_QS + 64 * ch, xq_row);
                    TILE_LOAD(5, bc, 64);
                    TILE_DPBSSD(0, 4, 5);
                    TILE_LOAD(6, bc + 1024, 64);
                    TILE_DPBSSD(1, 4, 6);
                    TILE_LOAD(7, bc + 2048, 64);
                    TILE_DPBSSD(2, 4, 7);
                    TILE_LOAD(5, bc + 3072, 64);
                    TILE_DPBSSD(3, 4, 5);
                }
                TILE_STORE(0, c[0], 64);
                TILE_STORE(1, c[1], 64);
                TILE_STORE(2, c[2], 64);
                TILE_STORE(3, c[3], 64);
                q6_tile_chains(acc + g * GROUP, nt, c, ab, xq_row, dy, bb);
            }
        }
        for (int64_t g = 0; g < ng; g++) {
            int rows_g = nr - g * GROUP < GROUP ? (int)(nr - g * GROUP) : GROUP;
            const __mmask16 rows = (__mmask16)((1u << rows_g) - 1);
            for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + (t0 + t) * ys + r0 + g * GROUP, rows, acc[g * GROUP + t]);
        }
    }
}

static int64_t q6_full_groups_per_call(int64_t nb) {
    int64_t ng = K45_PANEL / (nb * Q6F_BLOCK);
    return ng < 1 ? 1 : ng;
}

/* Mat-mat of the Q6_K groups from r0 on (nr rows, q6_full_groups_per_call
 * groups at most, their records at rec0) against the n_tok quantized rows
 * at xq and their packed tiles (for the tokens' d), from this thread's
 * scratch. */
static bool q6_full_matmat(const uint8_t *rec0, int64_t nb, int64_t r0, int64_t nr, const uint8_t *xq, size_t xq_row,
                           const uint8_t *packed, int64_t n_tok, float *y, int64_t ys) {
    const int64_t ng = (nr + GROUP - 1) / GROUP;
    const size_t tail_bytes = (GROUP * xq_row + 63) & ~(size_t)63;
    uint8_t *buf = tensor_amx_scratch((size_t)(ng * nb) * Q6F_BLOCK + tail_bytes + (size_t)ng * GROUP * sizeof(__m512));
    if (!buf) return false;
    uint8_t *tail = buf + (size_t)(ng * nb) * Q6F_BLOCK;
    for (int64_t g = 0; g < ng; g++)
        unpack_q6_full(rec0 + (size_t)(g * nb) * Q6_REC, nb, buf + (size_t)(g * nb) * Q6F_BLOCK);
    q6_full_tiles(nb, ng, r0, nr, xq, xq_row, packed, n_tok, y, ys, buf, tail, (__m512 *)(tail + tail_bytes));
    return true;
}

/* Q6_K mat-mat of the group at r0 (nr rows; its records at rec0, nb
 * super-blocks) against the n_tok quantized rows at xq (xq_row bytes
 * apart) and their packed tiles (for the tokens' d), from this thread's
 * scratch. */
static bool recs_matmat(int type, const uint8_t *rec0, int64_t nb, int64_t r0, int nr, const uint8_t *xq,
                        size_t xq_row, const uint8_t *packed, int64_t n_tok, float *y, int64_t ys, uint8_t *buf) {
    (void)type;
    if (!buf) buf = tensor_amx_scratch((size_t)nb * SUBS * 512 + ((GROUP * xq_row + 63) & ~(size_t)63));
    if (!buf) return false;
    unpack_b_q6_K(rec0, nb, buf);
    recs_matmat_q6_K(rec0, nb, r0, nr, xq, xq_row, packed, n_tok, y, ys, buf, buf + (size_t)nb * SUBS * 512);
    return true;
}


/* ---- a few tokens from records (Q6_K, Q4_K, Q5_K) -------------------------- *
 *
 * One to FEW_MAX tokens (Q6_K: two to FEW_MAX_Q6; its single token has
 * its own mat-vec above), as in a decode step, a draft's verification or
 * a small batch: per super-block each chunk of the records is unpacked once into registers
 * and multiplied by every token's activations, read straight from the
 * quantized rows. Each token's chain is the mat-vec's, so the bits are
 * those of one token at a time. Up to FEW_K45 (Q4_K/Q5_K) or FEW_Q6 (Q6_K)
 * tokens go through at once; more take another pass over the group's
 * records, which are in the caches by then. */
static inline const block_q8_K *few_row(const uint8_t *xq, size_t xq_row, int t, int64_t b) {
    return (const block_q8_K *)(xq + (size_t)t * xq_row) + b;
}

/* T tokens (1..FEW_K45) of xq (xq_row bytes apart) against one group's
 * Q4_K (q5: Q5_K) records; token t's rows go to y + t * ys (nr of them). */
static inline __attribute__((always_inline)) void few_k45(const uint8_t *rec, int64_t nb, int nr, const uint8_t *xq,
                                                            size_t xq_row, const int T, float *y, int64_t ys,
                                                            const bool q5) {
    const size_t rec_bytes = k45_rec(q5);
    const __m512i lo6 = _mm512_set1_epi32(0x3f3f3f3f), lo4 = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i hi2 = _mm512_set1_epi32(0x30303030), w16 = _mm512_set1_epi32(0x00FF00FF);
    __m512i pick[4];
    #pragma GCC unroll 8
    for (int i = 0; i < 4; i++)
        pick[i] = _mm512_set4_epi32((int)(0x8080800Cu + i), (int)(0x80808008u + i), (int)(0x80808004u + i),
                                    (int)(0x80808000u + i));
    __m512 acc[FEW_K45];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *pf = (const uint8_t *)(((uintptr_t)rec + PF_AHEAD) & ~(uintptr_t)63);
    for (int64_t b = 0; b < nb; b++, rec += rec_bytes) {
        __m512i w0 = _mm512_loadu_si512(rec + K4_SCW), w1 = _mm512_loadu_si512(rec + K4_SCW + 64);
        __m512i w2 = _mm512_loadu_si512(rec + K4_SCW + 128);
        __m512i sc[2], mn[2];
        sc[0] = _mm512_and_si512(w0, lo6);
        sc[1] = or_and(_mm512_and_si512(w2, lo4), _mm512_srli_epi32(w0, 2), hi2);
        mn[0] = _mm512_and_si512(w1, lo6);
        mn[1] = or_and(_mm512_and_si512(_mm512_srli_epi32(w2, 4), lo4), _mm512_srli_epi32(w1, 2), hi2);
        const int32_t *yw[FEW_K45]; /* the tokens' quants, four at a time (the build allows the aliasing) */
        __m512i S[FEW_K45];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            yw[t] = (const int32_t *)(const void *)few_row(xq, xq_row, t, b)->qs, S[t] = _mm512_setzero_si512();
        for (int jp = 0; jp < 4; jp++) {
            pf = prefetch_lines(pf, rec + (size_t)(jp + 1) * (rec_bytes / 4) + PF_AHEAD);
            __m512i dl[FEW_K45], dh[FEW_K45];
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) dl[t] = dh[t] = _mm512_setzero_si512();
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                __m512i lo, hi;
                k45_line(rec, 8 * jp + c, q5, &lo, &hi);
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    dl[t] = _mm512_dpbusd_epi32(dl[t], lo, _mm512_set1_epi32(yw[t][16 * jp + c]));
                    dh[t] = _mm512_dpbusd_epi32(dh[t], hi, _mm512_set1_epi32(yw[t][16 * jp + 8 + c]));
                }
            }
            int j = 2 * jp;
            __m512i s0 = _mm512_shuffle_epi8(sc[j / 4], pick[j % 4]), s1 = _mm512_shuffle_epi8(sc[j / 4], pick[j % 4 + 1]);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(dl[t], s0));
                S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(dh[t], s1));
            }
        }
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + K4_D)));
        __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + K4_DMIN)));
        __m512i m0 = _mm512_and_si512(mn[0], w16), m1 = _mm512_and_si512(_mm512_srli_epi32(mn[0], 8), w16);
        __m512i m2 = _mm512_and_si512(mn[1], w16), m3 = _mm512_and_si512(_mm512_srli_epi32(mn[1], 8), w16);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const block_q8_K *yt = few_row(xq, xq_row, t, b);
            int16_t ys8[8]; /* the eight 32-weight sums, as pack_q8_K gives a mat-vec */
            #pragma GCC unroll 8
            for (int i = 0; i < 8; i++) ys8[i] = (int16_t)(yt->bsums[2 * i] + yt->bsums[2 * i + 1]);
            /* mins in 16-bit pairs (m0, m2), (m1, m3), (m4, m6), (m5, m7) */
            __m512i M = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m0,
                                            _mm512_set1_epi32((int)((uint16_t)ys8[0] | (uint32_t)(uint16_t)ys8[2] << 16)));
            M = _mm512_dpwssd_epi32(M, m1, _mm512_set1_epi32((int)((uint16_t)ys8[1] | (uint32_t)(uint16_t)ys8[3] << 16)));
            M = _mm512_dpwssd_epi32(M, m2, _mm512_set1_epi32((int)((uint16_t)ys8[4] | (uint32_t)(uint16_t)ys8[6] << 16)));
            M = _mm512_dpwssd_epi32(M, m3, _mm512_set1_epi32((int)((uint16_t)ys8[5] | (uint32_t)(uint16_t)ys8[7] << 16)));
            __m512 dy = _mm512_set1_ps(yt->d);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(d, dy), acc[t]);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M), neg_ps(_mm512_mul_ps(dmin, dy)), acc[t]);
        }
    }
    const __mmask16 rows = (__mmask16)((1u << nr) - 1);
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * (size_t)ys, rows, acc[t]);
}

static void few_q4_K(const uint8_t *rec, int64_t nb, int nr, const uint8_t *xq, size_t xq_row, int T, float *y,
                     int64_t ys) {
    switch (T) {
    case 1: few_k45(rec, nb, nr, xq, xq_row, 1, y, ys, false); break;
    case 2: few_k45(rec, nb, nr, xq, xq_row, 2, y, ys, false); break;
    case 3: few_k45(rec, nb, nr, xq, xq_row, 3, y, ys, false); break;
    default: few_k45(rec, nb, nr, xq, xq_row, 4, y, ys, false); break;
    }
}

static void few_q5_K(const uint8_t *rec, int64_t nb, int nr, const uint8_t *xq, size_t xq_row, int T, float *y,
                     int64_t ys) {
    switch (T) {
    case 1: few_k45(rec, nb, nr, xq, xq_row, 1, y, ys, true); break;
    case 2: few_k45(rec, nb, nr, xq, xq_row, 2, y, ys, true); break;
    case 3: few_k45(rec, nb, nr, xq, xq_row, 3, y, ys, true); break;
    default: few_k45(rec, nb, nr, xq, xq_row, 4, y, ys, true); break;
    }
}

/* T tokens (1..FEW_Q6) against one group's Q6_K records, as few_k45. */
static inline __attribute__((always_inline)) void few_q6(const uint8_t *rec, int64_t nb, int nr, const uint8_t *xq,
                                                           size_t xq_row, const int T, float *y, int64_t ys) {
    __m512 acc[FEW_Q6];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *pf = (const uint8_t *)(((uintptr_t)rec + PF_AHEAD) & ~(uintptr_t)63);
    for (int64_t b = 0; b < nb; b++, rec += Q6_REC) {
        const int8_t *yq[FEW_Q6];
        __m512i S[FEW_Q6];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) yq[t] = few_row(xq, xq_row, t, b)->qs, S[t] = _mm512_setzero_si512();
        for (int m = 0; m < 4; m++) {
            pf = prefetch_lines(pf, rec + (m + 1) * (Q6_REC / 4) + PF_AHEAD);
            __m512i dd[FEW_Q6][4];
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                #pragma GCC unroll 8
                for (int j = 0; j < 4; j++) dd[t][j] = _mm512_setzero_si512();
            #pragma GCC unroll 8
            for (int i = 0; i < 4; i++) {
                int g = 4 * m + i;
                __m512i v[4];
                q6_run(rec, g, v);
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++)
                    #pragma GCC unroll 8
                    for (int j = 0; j < 4; j++)
                        dd[t][j] = _mm512_dpbusd_epi32(dd[t][j], v[j], _mm512_set1_epi32(load_i32(yq[t] + 4 * (g + 16 * j))));
            }
            #pragma GCC unroll 8
            for (int j = 0; j < 4; j++) {
                int k = m + 4 * j;
                __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(rec + R_SC + GROUP * k)));
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    int32_t bs = few_row(xq, xq_row, t, b)->bsums[k];
                    S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(_mm512_sub_epi32(dd[t][j], _mm512_set1_epi32(32 * bs)), sc));
                }
            }
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + R_D)));
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(dw, _mm512_set1_ps(few_row(xq, xq_row, t, b)->d)),
                                     acc[t]);
    }
    const __mmask16 rows = (__mmask16)((1u << nr) - 1);
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * (size_t)ys, rows, acc[t]);
}

static void few_q6_K(const uint8_t *rec, int64_t nb, int nr, const uint8_t *xq, size_t xq_row, int T, float *y,
                     int64_t ys) {
    switch (T) {
    case 1: few_q6(rec, nb, nr, xq, xq_row, 1, y, ys); break;
    case 2: few_q6(rec, nb, nr, xq, xq_row, 2, y, ys); break;
    default: few_q6(rec, nb, nr, xq, xq_row, 3, y, ys); break;
    }
}

/* n_tok (1..FEW_MAX_Q6) tokens against the group at r0 (nr rows, records at
 * rec), per passes of at most per tokens. */
static void few_group(few_fn *fn, int per, const uint8_t *rec, int64_t nb, int64_t r0, int nr, const void *xq,
                      size_t xq_row, int64_t n_tok, float *y, int64_t ys) {
    for (int64_t t0 = 0; t0 < n_tok; t0 += per) {
        int T = n_tok - t0 < per ? (int)(n_tok - t0) : per;
        fn(rec, nb, nr, (const uint8_t *)xq + (size_t)t0 * xq_row, xq_row, T, y + t0 * ys + r0, ys);
    }
}

/* Q4_K: repacked weights from their records, others from the file's rows. */
static bool rows_product_q4_K(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                              const void *packed, int64_t n_tok, float *y, int64_t ys) {
    if (!w->panel) return q4_K_from_rows(w, r0, r1, xq, xq_row, packed, n_tok, y, ys);
    int64_t nb = w->cols / QK_K;
    if (n_tok > FEW_MAX) {
        const int64_t per = k45_groups_per_call(nb) * GROUP;
        for (int64_t g = r0; g < r1; g += per)
            if (!k45_matmat((const uint8_t *)w->panel + (size_t)(g / GROUP) * (size_t)nb * Q4K_REC, nb, g,
                            r1 - g < per ? r1 - g : per, xq, xq_row, packed, n_tok, y, ys, NULL, false))
                return false;
        return true;
    }
    for (int64_t g = r0; g < r1; g += GROUP) {
        int nr = r1 - g < GROUP ? (int)(r1 - g) : GROUP;
        const uint8_t *rec = (const uint8_t *)w->panel + (size_t)(g / GROUP) * (size_t)nb * Q4K_REC;
        few_group(few_q4_K, FEW_K45, rec, nb, g, nr, xq, xq_row, n_tok, y, ys);
    }
    return true;
}

/* Q5_K: from the repacked records, or from records made of the file's rows
 * for this call. */
static bool rows_product_q5_K(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq, size_t xq_row,
                              const void *packed, int64_t n_tok, float *y, int64_t ys) {
    int64_t nb = w->cols / QK_K;
    if (n_tok > FEW_MAX && w->panel) {
        const int64_t per = k45_groups_per_call(nb) * GROUP;
        for (int64_t g = r0; g < r1; g += per)
            if (!k45_matmat((const uint8_t *)w->panel + (size_t)(g / GROUP) * (size_t)nb * Q5K_REC, nb, g,
                            r1 - g < per ? r1 - g : per, xq, xq_row, packed, n_tok, y, ys, NULL, true))
                return false;
        return true;
    }
    for (int64_t g = r0; g < r1; g += GROUP) {
        int nr = r1 - g < GROUP ? (int)(r1 - g) : GROUP;
        const uint8_t *rec;
        uint8_t *work = NULL;
        if (w->panel) {
            rec = (const uint8_t *)w->panel + (size_t)(g / GROUP) * (size_t)nb * Q5K_REC;
        } else {
            size_t recs_bytes = ((size_t)nb * Q5K_REC + 63) & ~(size_t)63;
            uint8_t *buf = tensor_amx_scratch(recs_bytes + (n_tok > FEW_MAX ? k45_work_size(1, nb, xq_row) : 0));
            if (!buf) return false;
            recs_put_group_k45(w, g, nr, buf);
            rec = buf;
            work = buf + recs_bytes;
        }
        if (n_tok <= FEW_MAX) few_group(few_q5_K, FEW_K45, rec, nb, g, nr, xq, xq_row, n_tok, y, ys);
        else if (!k45_matmat(rec, nb, g, nr, xq, xq_row, packed, n_tok, y, ys, work, true)) return false;
    }
    return true;
}

void tensor_kernels_init_amx_k(struct tensor_kernels *k) {
    q6_digits_init();
    k->vec_dot[TENSOR_TYPE_Q6_K] = vec_dot_q6_K_amx;
    k->vec_dot_x2[TENSOR_TYPE_Q6_K] = NULL;
    k->vec_dot_tile[TENSOR_TYPE_Q6_K] = NULL;
    k->rows_product[TENSOR_TYPE_Q6_K] = rows_product_q6_K;
    k->repack_size[TENSOR_TYPE_Q6_K] = repack_size_q6_K;
    k->repack[TENSOR_TYPE_Q6_K] = repack_q6_K;
    if (k->rows_product[TENSOR_TYPE_Q4_K]) {
        q4_K_from_rows = k->rows_product[TENSOR_TYPE_Q4_K];
        k->rows_product[TENSOR_TYPE_Q4_K] = rows_product_q4_K;
        k->repack_size[TENSOR_TYPE_Q4_K] = repack_size_q4_K;
        k->repack[TENSOR_TYPE_Q4_K] = repack_k45;
    }
    k->vec_dot[TENSOR_TYPE_Q5_K] = vec_dot_q5_K_amx;
    k->vec_dot_x2[TENSOR_TYPE_Q5_K] = NULL;
    k->vec_dot_tile[TENSOR_TYPE_Q5_K] = NULL;
    k->rows_product[TENSOR_TYPE_Q5_K] = rows_product_q5_K;
    k->repack_size[TENSOR_TYPE_Q5_K] = repack_size_q5_K;
    k->repack[TENSOR_TYPE_Q5_K] = repack_k45;
}
#endif
