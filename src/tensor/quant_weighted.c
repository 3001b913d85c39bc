/*
 * quant_weighted.c — the importance-weighted row quantizers of
 * quant_search.h: what llama.cpp writes for Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
 * Q3_K, Q4_K, Q5_K and Q6_K when given an importance matrix.
 *
 * Each weight's squared error counts qw[i] * sqrt(sigma2 + x[i]^2): the
 * importance of its column, raised for weights large against the mean
 * square sigma2 (of the whole row for the legacy types, of the super-block
 * for the K-quants). Then:
 *  - Q4_0 / Q5_0: the symmetric search (quant_fit_symmetric) per block;
 *  - Q4_1 / Q5_1: the scale-and-min search (quant_fit_scale_min) per block;
 *  - Q2_K / Q4_K / Q5_K: the scale-and-min search per sub-block, then the
 *    sub-block scales and mins are themselves fitted (quant_fit_positive),
 *    weighted by each sub-block's summed weights;
 *  - Q3_K: the symmetric search per sub-block, then the scales fitted
 *    symmetrically to 6 bits, weighted the same way;
 *  - Q6_K: the symmetric search per sub-block weighted by qw alone.
 * The K-quants end as their reference forms do (quant_k.c): the weights are
 * re-rounded onto the stored grid and packed.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "tensor/quant_ref.h"
#include "tensor/quant_search.h"

/* sum x[i]^2 over n weights, in index order */
static float sum_squares(const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* w[i] = qw[i] * sqrt(sigma2 + x[i]^2) for n weights */
static void importance(const float *restrict x, const float *restrict qw, float sigma2, int n,
                       float *restrict w) {
    for (int i = 0; i < n; i++) w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
}

/* the 5th bits of a Q5 block's 32 quants, weight i at bit i */
static void store_q5_high_bits(const uint8_t *L, uint8_t qh[4]) {
    uint32_t bits = 0;
    for (int j = 0; j < QK / 2; j++) {
        bits |= (uint32_t)((L[j] & 0x10u) >> 4) << j;
        bits |= (uint32_t)((L[j + QK / 2] & 0x10u) >> 4) << (j + QK / 2);
    }
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(bits >> (8 * k));
}

/* ---- legacy 32-weight blocks --------------------------------------------- */

void quantize_row_q4_0_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q4_0 *y = vy;
    float w[QK];
    int8_t L[QK];
    const float sigma2 = sum_squares(x, n) / (float)n;
    for (int64_t ib = 0; ib < n / QK; ib++) {
        const float *xb = x + QK * ib;
        importance(xb, qw + QK * ib, sigma2, QK, w);
        y[ib].d = fp32_to_fp16(quant_fit_symmetric(QK, 8, xb, w, L));
        for (int j = 0; j < QK / 2; j++) y[ib].qs[j] = (uint8_t)(L[j] | L[j + QK / 2] << 4);
    }
}

void quantize_row_q5_0_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q5_0 *y = vy;
    float w[QK];
    int8_t L[QK];
    const float sigma2 = sum_squares(x, n) / (float)n;
    for (int64_t ib = 0; ib < n / QK; ib++) {
        const float *xb = x + QK * ib;
        importance(xb, qw + QK * ib, sigma2, QK, w);
        y[ib].d = fp32_to_fp16(quant_fit_symmetric(QK, 16, xb, w, L));
        for (int j = 0; j < QK / 2; j++) y[ib].qs[j] = (uint8_t)((L[j] & 0xF) | (L[j + QK / 2] & 0xF) << 4);
        store_q5_high_bits((const uint8_t *)L, y[ib].qh);
    }
}

void quantize_row_q4_1_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q4_1 *y = vy;
    float w[QK];
    uint8_t L[QK], Laux[QK];
    const float sigma2 = sum_squares(x, n) / (float)n;
    for (int64_t ib = 0; ib < n / QK; ib++) {
        const float *xb = x + QK * ib;
        importance(xb, qw + QK * ib, sigma2, QK, w);
        float min;
        const float d = quant_fit_scale_min(QK, 15, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
        y[ib].d = fp32_to_fp16(d);
        y[ib].m = fp32_to_fp16(-min);
        for (int j = 0; j < QK / 2; j++) y[ib].qs[j] = (uint8_t)(L[j] | L[j + QK / 2] << 4);
    }
}

void quantize_row_q5_1_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q5_1 *y = vy;
    float w[QK];
    uint8_t L[QK], Laux[QK];
    const float sigma2 = sum_squares(x, n) / (float)n;
    for (int64_t ib = 0; ib < n / QK; ib++) {
        const float *xb = x + QK * ib;
        importance(xb, qw + QK * ib, sigma2, QK, w);
        float min;
        const float d = quant_fit_scale_min(QK, 31, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
        y[ib].d = fp32_to_fp16(d);
        y[ib].m = fp32_to_fp16(-min);
        for (int j = 0; j < QK / 2; j++) y[ib].qs[j] = (uint8_t)((L[j] & 0xF) | (L[j + QK / 2] & 0xF) << 4);
        store_q5_high_bits(L, y[ib].qh);
    }
}

/* ---- K-quants -------------------------------------------------------------- */

void quantize_row_q2_K_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q2_K *y = vy;
    uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
    float w[16], sw[QK_K / 16], scales[QK_K / 16], mins[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float sigma2 = sum_squares(x, QK_K) / (float)QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            importance(x + 16 * j, qw + QK_K * i + 16 * j, sigma2, 16, w);
            float s = 0;
            for (int l = 0; l < 16; l++) s += w[l];
            sw[j] = s;
            scales[j] = quant_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36,
                                            false);
        }
        const float dm = quant_fit_positive(QK_K / 16, 15, scales, Ls, sw);
        const float mm = quant_fit_positive(QK_K / 16, 15, mins, Lm, sw);
        y[i].d = fp32_to_fp16(dm);
        y[i].dmin = fp32_to_fp16(mm);
        for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
        quant_k_finish_q2(x, L, &y[i]);
    }
}

void quantize_row_q3_K_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q3_K *y = vy;
    int8_t L[QK_K], Ls[QK_K / 16];
    float w[16], sw[QK_K / 16], scales[QK_K / 16];
    int ls[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float sigma2 = 2 * sum_squares(x, QK_K) / (float)QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            importance(x + 16 * j, qw + QK_K * i + 16 * j, sigma2, 16, w);
            float s = 0;
            for (int l = 0; l < 16; l++) s += w[l];
            sw[j] = s;
            scales[j] = quant_fit_symmetric(16, 4, x + 16 * j, w, L + 16 * j);
        }
        const float d = quant_fit_symmetric(QK_K / 16, 32, scales, sw, Ls);
        for (int j = 0; j < QK_K / 16; j++) ls[j] = Ls[j];
        quant_k_store_q3_scales(ls, y[i].scales);
        y[i].d = fp32_to_fp16(d);
        quant_k_finish_q3(x, L, &y[i]);
    }
}

/*
 * Q4_K / Q5_K: the scale-and-min search per 32-weight sub-block, then the
 * 8 scales and 8 mins fitted to 6 bits. clamp_63: Q5_K caps the fitted
 * quants at 63, Q4_K stores them as they come.
 */
static void scale_min_weighted(const float *restrict x, const float *restrict qw, int nmax, bool clamp_63,
                               uint16_t *d, uint16_t *dmin, uint8_t scales_out[K_SCALE_SIZE],
                               uint8_t L[QK_K]) {
    uint8_t Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
    float w[32], sw[QK_K / 32], scales[QK_K / 32], mins[QK_K / 32];
    const float sigma2 = 2 * sum_squares(x, QK_K) / (float)QK_K;
    for (int j = 0; j < QK_K / 32; j++) {
        importance(x + 32 * j, qw + 32 * j, sigma2, 32, w);
        float s = 0;
        for (int l = 0; l < 32; l++) s += w[l];
        sw[j] = s;
        scales[j] = quant_fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36,
                                        false);
    }
    const float d_block = quant_fit_positive(QK_K / 32, 63, scales, Ls, sw);
    const float m_block = quant_fit_positive(QK_K / 32, 63, mins, Lm, sw);
    if (clamp_63) {
        for (int j = 0; j < QK_K / 32; j++) {
            if (Ls[j] > 63) Ls[j] = 63;
            if (Lm[j] > 63) Lm[j] = 63;
        }
    }
    quant_k_finish_scale_min(x, nmax, Ls, Lm, d_block, m_block, d, dmin, scales_out, L);
}

void quantize_row_q4_K_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        scale_min_weighted(x + QK_K * i, qw + QK_K * i, 15, false, &y[i].d, &y[i].dmin, y[i].scales, L);
        quant_k_pack_q4(L, y[i].qs);
    }
}

void quantize_row_q5_K_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        scale_min_weighted(x + QK_K * i, qw + QK_K * i, 31, true, &y[i].d, &y[i].dmin, y[i].scales, L);
        quant_k_pack_q5(L, y[i].qs, y[i].qh);
    }
}

void quantize_row_q6_K_weighted(const float *restrict x, void *restrict vy, int64_t n,
                                const float *restrict qw) {
    block_q6_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) quant_q6_K_block(x + QK_K * i, qw + QK_K * i, &y[i]);
}
