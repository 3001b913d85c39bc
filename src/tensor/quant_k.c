/*
 * quant_k.c — reference conversions of the K-quant super-block types
 * (256 weights per block): dequantization of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 * and Q8_K, the reference quantizers of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and
 * Q8_K, and the block tails (scale packing, re-rounding, bit packing) the
 * importance-weighted forms of quant_weighted.c share with them.
 *
 * Dequantization first forms each sub-block's float scale (d * sc, and
 * dmin * m for the types with mins) and then computes scale * q - min, the
 * operation order of gguf-py's numpy code, so results match it bit for bit.
 *
 * The quantizers follow the GGUF ecosystem's reference algorithm (what
 * llama.cpp's quantize_row_*_ref writes when no importance matrix is given),
 * step by step and in the same float32 operation order, so the bytes match
 * (the searches are in quant_search.c):
 *  - Q2_K: per 16-weight sub-block a scale and a min (x ≈ scale * l - min,
 *    l in 0..3) minimizing |x|-weighted absolute error; scales and mins
 *    become 4 bits against the block's largest.
 *  - Q3_K: per 16-weight sub-block a symmetric 3-bit fit refined quant by
 *    quant; the scales become signed 6 bits against the largest.
 *  - Q4_K / Q5_K: per 32-weight sub-block a scale and a min minimizing a
 *    weighted squared error; the 8 scales and 8 mins are then quantized to
 *    6 bits against the block's largest.
 *  - Q6_K: per 16-weight sub-block, 19 candidate scales around max/-32,
 *    keeping the best least-squares one; the 16 scales become int8 against
 *    the largest.
 *  - Q8_K: one float scale, max|x| / 127, and sums of each 16 quants.
 * All but Q8_K then re-round every weight onto the grid the stored scales
 * give.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "tensor/quant_ref.h"
#include "tensor/quant_search.h"


/* ---- dequantization ---------------------------------------------------- */

/*
 * Weight k of a Q2_K / Q3_K block (k = 128*h + 32*s + b, b < 32) is bits
 * 2s..2s+1 of qs[32*h + b]; its sub-block is k / 16.
 */
static inline int q2_bits(const uint8_t *qs, int k) {
    return (qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
}

void dequantize_row_q2_K(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q2_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        float dl[QK_K / 16], ml[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++) {
            dl[j] = d * (float)(x[i].scales[j] & 0xF);
            ml[j] = dmin * (float)(x[i].scales[j] >> 4);
        }
        for (int k = 0; k < QK_K; k++) y[k] = dl[k / 16] * (float)q2_bits(x[i].qs, k) - ml[k / 16];
    }
}

/* The 16 signed 6-bit scales of Q3_K: low 4 bits from bytes 0..7 (low nibble
 * for scales 0..7, high for 8..15), top 2 bits from bytes 8..11. */
static inline int q3_scale(const uint8_t *sc, int j) {
    const int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    const int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

void dequantize_row_q3_K(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q3_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        float dl[QK_K / 16];
        for (int j = 0; j < QK_K / 16; j++) dl[j] = d * (float)q3_scale(x[i].scales, j);
        for (int k = 0; k < QK_K; k++) {
            /* the high bit of weight k is bit k/32 of hmask[k % 32]; a clear
             * bit means the quant is 4 lower */
            const int high = (x[i].hmask[k % 32] >> (k / 32)) & 1;
            const int q = q2_bits(x[i].qs, k) - (high ? 0 : 4);
            y[k] = dl[k / 16] * (float)q;
        }
    }
}

/* Weight k of a Q4_K / Q5_K block (k = 64*p + 32*h + b) is nibble h of
 * qs[32*p + b]; its sub-block is k / 32. */
static inline int q4_nibble(const uint8_t *qs, int k) {
    return (qs[32 * (k / 64) + k % 32] >> (4 * ((k % 64) / 32))) & 0xF;
}

void dequantize_row_q4_K(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            k_scale_min(j, x[i].scales, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            for (int k = 32 * j; k < 32 * j + 32; k++) y[k] = dl * (float)q4_nibble(x[i].qs, k) - ml;
        }
    }
}

void dequantize_row_q5_K(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        const float dmin = fp16_to_fp32(x[i].dmin);
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            k_scale_min(j, x[i].scales, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            for (int k = 32 * j; k < 32 * j + 32; k++) {
                /* the 5th bit of weight k is bit j = k/32 of qh[k % 32] */
                const int q = q4_nibble(x[i].qs, k) | ((x[i].qh[k % 32] >> j) & 1) << 4;
                y[k] = dl * (float)q - ml;
            }
        }
    }
}

/*
 * Weight k of a Q6_K block, k = 128*h + r: the low 4 bits are nibble r/64
 * of ql[64*h + r%64], the high 2 bits are bits 2*(r/32).. of qh[32*h + r%32];
 * the quant is offset by 32 and its sub-block is k / 16.
 */
static inline int q6_quant(const block_q6_K *b, int k) {
    const int h = k / 128, r = k % 128;
    const int lo = (b->ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
    const int hi = (b->qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
    return (lo | hi << 4) - 32;
}

void dequantize_row_q6_K(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q6_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = d * (float)x[i].scales[j];
            for (int k = 16 * j; k < 16 * j + 16; k++) y[k] = dl * (float)q6_quant(&x[i], k);
        }
    }
}

void dequantize_row_q8_K(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = x[i].d;
        for (int k = 0; k < QK_K; k++) y[k] = (float)x[i].qs[k] * d;
    }
}

/* ---- quantization: the block tails shared with the weighted forms ------ */

void quant_k_finish_scale_min(const float *restrict x, int nmax, const uint8_t ls[8],
                              const uint8_t lm[8], float d, float dmin, uint16_t *d_out,
                              uint16_t *dmin_out, uint8_t scales_out[K_SCALE_SIZE],
                              uint8_t L[QK_K]) {
    for (int j = 0; j < QK_K / 32; j++) {
        if (j < 4) {
            scales_out[j] = ls[j];
            scales_out[j + 4] = lm[j];
        } else {
            scales_out[j + 4] = (uint8_t)((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
            scales_out[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            scales_out[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
    *d_out = fp32_to_fp16(d);
    *dmin_out = fp32_to_fp16(dmin);

    /* re-round every weight onto the grid the stored scales give; a
     * sub-block whose scale is 0 keeps the quants of its fit */
    const float d16 = fp16_to_fp32(*d_out), dmin16 = fp16_to_fp32(*dmin_out);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        k_scale_min(j, scales_out, &sc, &m);
        const float dl = d16 * (float)sc;
        if (dl == 0.0f) continue;
        const float ml = dmin16 * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)quant_clamp(quant_nearest_int((x[32 * j + l] + ml) / dl), 0, nmax);
    }
}

/* weights 64p+b and 64p+32+b share byte 32p+b (low, high nibble) */
void quant_k_pack_q4(const uint8_t L[QK_K], uint8_t qs[QK_K / 2]) {
    for (int p = 0; p < QK_K / 64; p++)
        for (int b = 0; b < 32; b++) qs[32 * p + b] = (uint8_t)(L[64 * p + b] | L[64 * p + 32 + b] << 4);
}

void quant_k_pack_q5(const uint8_t L[QK_K], uint8_t qs[QK_K / 2], uint8_t qh[QK_K / 8]) {
    memset(qh, 0, QK_K / 8);
    for (int p = 0; p < QK_K / 64; p++) {
        for (int b = 0; b < 32; b++) {
            const int l0 = L[64 * p + b], l1 = L[64 * p + 32 + b];
            qs[32 * p + b] = (uint8_t)((l0 & 0xF) | (l1 & 0xF) << 4);
            /* bit k/32 of qh[k % 32] is the 5th bit of weight k */
            qh[b] |= (uint8_t)((l0 >> 4) << (2 * p) | (l1 >> 4) << (2 * p + 1));
        }
    }
}

/* weight 128h + 32s + b goes to bits 2s..2s+1 of qs[32h + b] */
void quant_k_pack_q2(const uint8_t L[QK_K], uint8_t qs[QK_K / 4]) {
    for (int h = 0; h < QK_K / 128; h++) {
        const uint8_t *Lh = L + 128 * h;
        for (int b = 0; b < 32; b++)
            qs[32 * h + b] = (uint8_t)(Lh[b] | Lh[b + 32] << 2 | Lh[b + 64] << 4 | Lh[b + 96] << 6);
    }
}

void quant_k_finish_q2(const float *restrict x, uint8_t L[QK_K], void *restrict y_block) {
    block_q2_K *y = y_block;
    const float d = fp16_to_fp32(y->d), dmin = fp16_to_fp32(y->dmin);
    for (int j = 0; j < QK_K / 16; j++) {
        const float dl = d * (float)(y->scales[j] & 0xF);
        if (dl == 0.0f) continue;
        const float ml = dmin * (float)(y->scales[j] >> 4);
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (uint8_t)quant_clamp(quant_nearest_int((x[16 * j + l] + ml) / dl), 0, 3);
    }
    quant_k_pack_q2(L, y->qs);
}

void quant_k_finish_q3(const float *restrict x, int8_t L[QK_K], void *restrict y_block) {
    block_q3_K *y = y_block;
    const float d = fp16_to_fp32(y->d);
    for (int j = 0; j < QK_K / 16; j++) {
        const float dl = d * (float)q3_scale(y->scales, j);
        if (dl == 0.0f) continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (int8_t)(quant_clamp(quant_nearest_int(x[16 * j + l] / dl), -4, 3) + 4);
    }
    /* the high bit of weight k is bit k/32 of hmask[k % 32]; the low two
     * bits are packed as Q2_K's */
    memset(y->hmask, 0, sizeof y->hmask);
    for (int k = 0; k < QK_K; k++) {
        if (L[k] > 3) {
            y->hmask[k % 32] |= (uint8_t)(1u << (k / 32));
            L[k] = (int8_t)(L[k] - 4);
        }
    }
    quant_k_pack_q2((const uint8_t *)L, y->qs);
}

/* the low 4 bits of scale j in byte j % 8 (high nibble for j >= 8), the top
 * 2 bits in byte 8 + j % 4 at bit 2 * (j / 4): what q3_scale reads */
void quant_k_store_q3_scales(const int ls[QK_K / 16], uint8_t scales[K_SCALE_SIZE]) {
    memset(scales, 0, K_SCALE_SIZE);
    for (int j = 0; j < QK_K / 16; j++) {
        const int l = ls[j];
        if (j < 8)
            scales[j] = (uint8_t)(l & 0xF);
        else
            scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
        scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
}

void quant_q6_K_block(const float *restrict x, const float *restrict qw, void *restrict y_block) {
    block_q6_K *y = y_block;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < QK_K / 16; j++) {
        scales[j] = quant_fit_symmetric(16, 32, x + 16 * j, qw ? qw + 16 * j : NULL, L + 16 * j);
        if (fabsf(scales[j]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[j]);
            max_scale = scales[j];
        }
    }
    memset(y, 0, sizeof *y);
    if (max_abs_scale < QUANT_GROUP_MAX_EPS) return; /* all zero: d = 0 */

    const float iscale = -128.0f / max_scale;
    y->d = fp32_to_fp16(1 / iscale);
    for (int j = 0; j < QK_K / 16; j++) {
        /* capped above only, then narrowed, as the reference does */
        const int s = quant_nearest_int(iscale * scales[j]);
        y->scales[j] = (int8_t)(s < 127 ? s : 127);
    }
    /* re-round onto the stored grid; a sub-block whose scale is 0 keeps the
     * quants of its fit */
    const float d = fp16_to_fp32(y->d);
    for (int j = 0; j < QK_K / 16; j++) {
        const float dl = d * (float)y->scales[j];
        if (dl == 0.0f) continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (int8_t)(quant_clamp(quant_nearest_int(x[16 * j + l] / dl), -32, 31) + 32);
    }
    /* weight 128h + 32s + b: low nibble into ql[64h + 32(s&1) + b]
     * (high nibble when s >= 2), top 2 bits into qh[32h + b] << 2s */
    for (int h = 0; h < 2; h++) {
        const int8_t *Lh = L + 128 * h;
        for (int b = 0; b < 32; b++) {
            y->ql[64 * h + b] = (uint8_t)((Lh[b] & 0xF) | (Lh[b + 64] & 0xF) << 4);
            y->ql[64 * h + 32 + b] = (uint8_t)((Lh[b + 32] & 0xF) | (Lh[b + 96] & 0xF) << 4);
            y->qh[32 * h + b] = (uint8_t)((Lh[b] >> 4) | (Lh[b + 32] >> 4) << 2 | (Lh[b + 64] >> 4) << 4 |
                                          (Lh[b + 96] >> 4) << 6);
        }
    }
}

/* ---- quantization: reference Q2_K and Q3_K --------------------------------- */

/*
 * Q2_K: each 16-weight sub-block is fitted as scale * l - min (l in 0..3)
 * minimizing |x|-weighted absolute error; the 16 scales and 16 mins become
 * 4-bit against the block's largest, and weights are re-rounded.
 */
void quantize_row_q2_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q2_K *y = vy;
    uint8_t L[QK_K], Laux[16];
    float w[16], scales[QK_K / 16], mins[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = quant_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15,
                                            true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        y[i].d = 0;
        y[i].dmin = 0;
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)quant_nearest_int(iscale * scales[j]);
            y[i].d = fp32_to_fp16(max_scale / 15.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < QK_K / 16; j++)
                y[i].scales[j] |= (uint8_t)((unsigned)quant_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = fp32_to_fp16(max_min / 15.0f);
        }
        quant_k_finish_q2(x, L, &y[i]);
    }
}

/*
 * Q3_K: each 16-weight sub-block gets a symmetric 3-bit fit (quant_fit_q3);
 * the 16 scales become signed 6-bit against the block's largest.
 */
void quantize_row_q3_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q3_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    int ls[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = quant_fit_q3(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                /* narrowed to int8 before the clamp, as the reference does */
                const int8_t l = (int8_t)quant_nearest_int(iscale * scales[j]);
                ls[j] = quant_clamp(l, -32, 31) + 32;
            }
            quant_k_store_q3_scales(ls, y[i].scales);
            y[i].d = fp32_to_fp16(1 / iscale);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = 0;
        }
        quant_k_finish_q3(x, L, &y[i]);
    }
}

/* ---- quantization: Q4_K and Q5_K ----------------------------------------- */

/*
 * The part Q4_K and Q5_K share: fits the 8 sub-blocks of one super-block,
 * writes d, dmin and the packed 6-bit scales/mins, and leaves the final
 * quants (0..nmax) of the 256 weights in L.
 */
static void quantize_k_scale_min(const float *restrict x, int nmax, float rmin, int nstep,
                                 uint16_t *d, uint16_t *dmin, uint8_t scales_out[K_SCALE_SIZE],
                                 uint8_t L[QK_K]) {
    float scales[QK_K / 32], mins[QK_K / 32], w[32];
    uint8_t Laux[32], ls[QK_K / 32], lm[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = quant_fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }

    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < QK_K / 32; j++) {
        /* the reference stores nearest_int into a uint8_t before capping */
        ls[j] = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
        lm[j] = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        if (ls[j] > 63) ls[j] = 63;
        if (lm[j] > 63) lm[j] = 63;
    }
    quant_k_finish_scale_min(x, nmax, ls, lm, max_scale / 63.0f, max_min / 63.0f, d, dmin, scales_out, L);
}

void quantize_row_q4_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_k_scale_min(x, 15, -1.0f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        quant_k_pack_q4(L, y[i].qs);
    }
}

void quantize_row_q5_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_k_scale_min(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        quant_k_pack_q5(L, y[i].qs, y[i].qh);
    }
}

/* ---- quantization: Q6_K and Q8_K ----------------------------------------- */

void quantize_row_q6_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q6_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) quant_q6_K_block(x, NULL, &y[i]);
}

void quantize_row_q8_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = 0, amax = 0;
        for (int k = 0; k < QK_K; k++) {
            const float ax = fabsf(x[k]);
            if (ax > amax) {
                amax = ax;
                max = x[k];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0.0f) continue; /* d = 0, quants and sums 0 */

        const float iscale = -127.0f / max;
        for (int k = 0; k < QK_K; k++)
            y[i].qs[k] = (int8_t)quant_clamp(quant_nearest_int(iscale * x[k]), -128, 127);
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int k = 16 * j; k < 16 * j + 16; k++) sum += y[i].qs[k];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}
