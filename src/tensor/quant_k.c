/*
 * quant_k.c — reference conversions of the K-quant super-block types
 * (256 weights per block): dequantization of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 * and Q8_K, and the reference quantizers of Q4_K, Q5_K, Q6_K and Q8_K.
 *
 * Dequantization first forms each sub-block's float scale (d * sc, and
 * dmin * m for the types with mins) and then computes scale * q - min, the
 * operation order of gguf-py's numpy code, so results match it bit for bit.
 *
 * The quantizers follow the GGUF ecosystem's reference algorithm (what
 * llama.cpp's quantize_row_*_ref writes when no importance matrix is given),
 * step by step and in the same float32 operation order, so the bytes match:
 *  - Q4_K / Q5_K: per 32-weight sub-block, fit_scale_min searches a scale and
 *    a min (weights x ≈ scale * l - min, 0 <= l <= nmax) minimizing a
 *    weighted squared error; the 8 scales and 8 mins are then quantized to
 *    6 bits against the block's largest, and every weight is re-rounded onto
 *    the final grid.
 *  - Q6_K: per 16-weight sub-block, fit_symmetric_scale tries 19 candidate
 *    scales around max/-32 and keeps the best least-squares one; the 16
 *    scales become int8 against the largest, and weights are re-rounded.
 *  - Q8_K: one float scale, max|x| / 127, and sums of each 16 quants.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "tensor/quant_ref.h"

/* A sub-block whose weights are all below this is stored as zeros. */
#define GROUP_MAX_EPS 1e-15f

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

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

/* ---- quantization: shared searches ------------------------------------- */

/*
 * Fits x[i] ≈ scale * L[i] - the_min with 0 <= L[i] <= nmax, the_min >= 0,
 * minimizing sum w[i] * err^2. Starts from the plain min/max grid, then for
 * nstep+1 trial grids with (nmax + rmin + rdelta*is) steps across the range
 * solves the weighted least-squares scale and min for the rounded quants,
 * keeping the best. Returns the scale; quants go to L (Laux is scratch).
 */
static float fit_scale_min(int n, int nmax, const float *restrict x, const float *restrict w,
                           uint8_t *restrict L, float *restrict the_min, uint8_t *restrict Laux,
                           float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * (float)L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * (float)Laux[i] + this_min - x[i];
            cur_error += w[i] * (diff * diff);
        }
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/*
 * Fits x[i] ≈ scale * (L[i] - nmax) with -nmax <= L[i] - nmax < nmax,
 * weighting each error by x[i]^2: tries scales max/-(nmax + 0.1*is) for
 * is = -9..9 and keeps the least-squares scale of the best. Returns the
 * scale (0 for an all-zero sub-block).
 */
static float fit_symmetric_scale(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(clamp_int(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
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
    uint8_t Laux[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }

    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < QK_K / 32; j++) {
        /* the reference stores nearest_int into a uint8_t before capping */
        uint8_t ls = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales_out[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = fp32_to_fp16(max_scale / 63.0f);
    *dmin = fp32_to_fp16(max_min / 63.0f);

    /* re-round every weight onto the grid the stored scales give; a
     * sub-block whose scale rounded to 0 keeps the quants of its fit */
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        k_scale_min(j, scales_out, &sc, &m);
        const float dl = fp16_to_fp32(*d) * (float)sc;
        if (dl == 0.0f) continue;
        const float ml = fp16_to_fp32(*dmin) * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clamp_int(quant_nearest_int((x[32 * j + l] + ml) / dl), 0, nmax);
    }
}

void quantize_row_q4_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_k_scale_min(x, 15, -1.0f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        /* weights 64p+b and 64p+32+b share byte 32p+b (low, high nibble) */
        for (int p = 0; p < QK_K / 64; p++)
            for (int b = 0; b < 32; b++)
                y[i].qs[32 * p + b] = (uint8_t)(L[64 * p + b] | L[64 * p + 32 + b] << 4);
    }
}

void quantize_row_q5_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        quantize_k_scale_min(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int p = 0; p < QK_K / 64; p++) {
            for (int b = 0; b < 32; b++) {
                const int l0 = L[64 * p + b], l1 = L[64 * p + 32 + b];
                y[i].qs[32 * p + b] = (uint8_t)((l0 & 0xF) | (l1 & 0xF) << 4);
                /* bit k/32 of qh[k % 32] is the 5th bit of weight k */
                y[i].qh[b] |= (uint8_t)((l0 >> 4) << (2 * p) | (l1 >> 4) << (2 * p + 1));
            }
        }
    }
}

/* ---- quantization: Q6_K and Q8_K ----------------------------------------- */

void quantize_row_q6_K_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q6_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = fit_symmetric_scale(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_abs_scale < GROUP_MAX_EPS) continue; /* all zero: d = 0 */

        const float iscale = -128.0f / max_scale;
        y[i].d = fp32_to_fp16(1 / iscale);
        for (int j = 0; j < QK_K / 16; j++) {
            const int s = quant_nearest_int(iscale * scales[j]);
            y[i].scales[j] = (int8_t)clamp_int(s, -128, 127);
        }
        /* re-round onto the stored grid; a sub-block whose scale rounded to
         * 0 keeps the quants of its fit */
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = fp16_to_fp32(y[i].d) * (float)y[i].scales[j];
            if (dl == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(quant_nearest_int(x[16 * j + l] / dl), -32, 31) + 32);
        }
        /* weight 128h + 32s + b: low nibble into ql[64h + 32(s&1) + b]
         * (high nibble when s >= 2), top 2 bits into qh[32h + b] << 2s */
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            for (int b = 0; b < 32; b++) {
                y[i].ql[64 * h + b] = (uint8_t)((Lh[b] & 0xF) | (Lh[b + 64] & 0xF) << 4);
                y[i].ql[64 * h + 32 + b] = (uint8_t)((Lh[b + 32] & 0xF) | (Lh[b + 96] & 0xF) << 4);
                y[i].qh[32 * h + b] = (uint8_t)((Lh[b] >> 4) | (Lh[b + 32] >> 4) << 2 |
                                                (Lh[b + 64] >> 4) << 4 | (Lh[b + 96] >> 4) << 6);
            }
        }
    }
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
            y[i].qs[k] = (int8_t)clamp_int(quant_nearest_int(iscale * x[k]), -128, 127);
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int k = 16 * j; k < 16 * j + 16; k++) sum += y[i].qs[k];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}
