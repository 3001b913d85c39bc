/*
 * attn_scalar.c — the reference attention kernel, in plain C: the query rows
 * of one K/V head against that head's cached rows, a tile of
 * TENSOR_ATTN_TILE positions at a time (online softmax, see tensor.h).
 *
 * For each tile (boundaries at absolute positions):
 *   the tile's K and V rows are made floats once (F32 rows are read in
 *   place; F16 rows are converted into the scratch tile; Q8_0 rows are
 *   read as integers, below);
 *   for each row that sees the tile, j over its positions in the tile
 *   (those before its window's first are skipped, as the causal limit's
 *   after it):
 *     s_j   = scale * q . k_j                       j < n
 *     m'    = max(m, max_j s_j)
 *     p_j   = e^(s_j - m'),  alpha = e^(m - m')
 *     l     = alpha l + sum_j p_j
 *     out   = alpha out + sum_j p_j v_j             (j in order)
 * and at the end out /= l. The SIMD versions (attn_x86.h) keep this order.
 *
 * A Q8_0 cache is read as integers: each query row is quantized once per
 * call as the products quantize activations (Q8_0 blocks of 32: d the f16
 * of max|q| / 127; a block holding a NaN or an infinity gets d NaN, so
 * that the row's output is NaN and no quant is ever -128), a score is
 * exact block sums of int8 products,
 *     s = 0;  for each block b: s = fma((float) sum_b q_int k_int, d_q,b * d_k,b, s)
 * and the value rows enter as out = fma(p_j * d_v,b, (float) v_int, out),
 * the weights' products with the rows' scales made before the sum.
 */
#include <math.h>
#include <string.h>

#include "tensor/kernels.h"
#include "tensor/quant_ref.h"
#include "tensor/quants.h"

size_t tensor_attn_scratch_floats(int hd, int n_rows) {
    size_t hp = attn_pad16((size_t)hd), T = TENSOR_ATTN_TILE;
    size_t vec = 2 * T * hp + hp + 2 * attn_pad16((size_t)n_rows) + T + attn_q8_floats(hd, n_rows);
    size_t tiles = hd % 32 == 0 ? attn_tiles_floats(hd, n_rows) : 0;
    return vec > tiles ? vec : tiles;
}

void attn_quantize_rows(const struct attn_rows *rows, int hd, struct attn_work *w) {
    int nb = hd / QK;
    for (int r = 0; r < rows->n; r++) {
        int8_t *qs = attn_q8_qs(w, r);
        block_q8_0 b;
        for (int i = 0; i < nb; i++) {
            const float *x = rows->q[r] + i * QK;
            bool finite = true;
            for (int j = 0; j < QK; j++) finite &= isfinite(x[j]) != 0;
            if (!finite) { /* NaN scores for the row, not a NaN quantized as -128 */
                memset(qs + i * QK, 0, QK);
                attn_q8_d(w, r)[i] = NAN;
                continue;
            }
            quantize_row_q8_0_ref(x, &b, QK);
            memcpy(qs + i * QK, b.qs, QK);
            attn_q8_d(w, r)[i] = fp16_to_fp32(b.d);
        }
        memset(qs + nb * QK, 0, (size_t)(attn_q8_row_bytes(hd) - nb * QK));
    }
}

/* One cached F16 row (hd values) as floats. */
static void f16_row_to_float(const uint8_t *src, float *dst, int hd) {
    const uint16_t *h = (const uint16_t *)src;
    for (int d = 0; d < hd; d++) dst[d] = fp16_to_fp32(h[d]);
}

float attn_softmax_step(float *p, int n, float *m, float *l) {
    float mt = -INFINITY;
    for (int j = 0; j < n; j++)
        if (p[j] > mt) mt = p[j];
    float mn = *m > mt ? *m : mt;
    float alpha = expf(*m - mn); /* 0 for the first tile (m = -inf) */
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        p[j] = expf(p[j] - mn);
        sum += p[j];
    }
    *l = *l * alpha + sum;
    *m = mn;
    return alpha;
}

/* A Q8_0 cache's row against a tile: the scores of one quantized query
 * row with the first n positions' K rows; the value update as above with
 * the int8 rows and their scales. */
static void row_tile_q8(int hd, float scale, const int8_t *qs, const float *dq, const uint8_t *const *k,
                        const uint8_t *const *v, int n, float *m, float *l, float *out, float *p) {
    int nb = hd / QK;
    for (int j = 0; j < n; j++) {
        const block_q8_0 *kb = (const block_q8_0 *)k[j];
        float s = 0.0f;
        for (int b = 0; b < nb; b++) {
            int32_t sum = 0;
            for (int i = 0; i < QK; i++) sum += (int32_t)qs[b * QK + i] * kb[b].qs[i];
            s = fmaf((float)sum, dq[b] * fp16_to_fp32(kb[b].d), s);
        }
        p[j] = s * scale;
    }
    float alpha = attn_softmax_step(p, n, m, l);
    for (int d = 0; d < hd; d++) out[d] *= alpha;
    for (int j = 0; j < n; j++) {
        const block_q8_0 *vb = (const block_q8_0 *)v[j];
        for (int b = 0; b < nb; b++) {
            float c = p[j] * fp16_to_fp32(vb[b].d);
            for (int i = 0; i < QK; i++) out[b * QK + i] = fmaf(c, (float)vb[b].qs[i], out[b * QK + i]);
        }
    }
}

/* One row's update by the first n positions of a tile. */
static void row_tile(int hd, float scale, const float *q, const float *const *k, const float *const *v, int n,
                     float *m, float *l, float *out, float *p) {
    for (int j = 0; j < n; j++) {
        float dot = 0.0f;
        for (int d = 0; d < hd; d++) dot += q[d] * k[j][d];
        p[j] = dot * scale;
    }
    float alpha = attn_softmax_step(p, n, m, l);
    for (int d = 0; d < hd; d++) out[d] *= alpha;
    for (int j = 0; j < n; j++)
        for (int d = 0; d < hd; d++) out[d] += p[j] * v[j][d];
}

void attn_scalar(int hd, float scale, const struct attn_kv *kv, const struct attn_rows *rows,
                 float *restrict scratch) {
    enum { T = TENSOR_ATTN_TILE };
    struct attn_work w = attn_work_carve(scratch, hd, rows->n);
    int32_t end = attn_rows_end(rows);
    for (int r = 0; r < rows->n; r++) {
        w.m[r] = -INFINITY;
        w.l[r] = 0.0f;
        for (int d = 0; d < hd; d++) rows->out[r][d] = 0.0f;
    }
    const bool q8 = kv->type == TENSOR_TYPE_Q8_0;
    if (q8) attn_quantize_rows(rows, hd, &w);
    memset(w.zero, 0, sizeof(float) * (size_t)w.hd_pad);
    struct attn_cursor cur = {kv->spans, 0};
    int32_t begin = attn_rows_begin(rows);
    if (begin > kv->start) attn_cursor_skip(&cur, begin - kv->start);
    for (int32_t t0 = begin; t0 <= end; t0 += T) {
        int nt = end + 1 - t0 < T ? end + 1 - t0 : T;
        const uint8_t *kb[T], *vb[T];
        const float *k[T], *v[T];
        attn_tile_take(kv, &cur, t0, nt, kb, vb, w.zero);
        if (q8) {
            for (int r = 0; r < rows->n; r++) {
                int lo, n = attn_tile_range(rows, r, t0, nt, &lo);
                if (n <= lo) continue;
                row_tile_q8(hd, scale, attn_q8_qs(&w, r), attn_q8_d(&w, r), kb + lo, vb + lo, n - lo, &w.m[r],
                            &w.l[r], rows->out[r], w.p);
            }
            continue;
        }
        for (int j = 0; j < nt; j++) {
            if (kv->type == TENSOR_TYPE_F32) {
                k[j] = (const float *)kb[j], v[j] = (const float *)vb[j];
            } else {
                float *kf = w.k + (size_t)j * w.hd_pad, *vf = w.v + (size_t)j * w.hd_pad;
                f16_row_to_float(kb[j], kf, hd);
                f16_row_to_float(vb[j], vf, hd);
                k[j] = kf, v[j] = vf;
            }
        }
        for (int r = 0; r < rows->n; r++) {
            int lo, n = attn_tile_range(rows, r, t0, nt, &lo);
            if (n <= lo) continue;
            row_tile(hd, scale, rows->q[r], k + lo, v + lo, n - lo, &w.m[r], &w.l[r], rows->out[r], w.p);
        }
    }
    for (int r = 0; r < rows->n; r++) {
        float inv = 1.0f / w.l[r];
        for (int d = 0; d < hd; d++) rows->out[r][d] *= inv;
    }
}
