/*
 * quant_legacy.c — reference conversions of the legacy 32-weight block types
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1 (layouts in quants.h).
 *
 * Dequantization does its float32 arithmetic in the order gguf-py's numpy
 * code does (d * q, then + m), so the outputs match it bit for bit; the
 * build uses -ffp-contract=off, so no multiply-add is fused. Quantization is
 * the GGUF ecosystem's reference algorithm: one scale per block from the
 * largest-magnitude weight (symmetric types) or from the min and max
 * (types with an offset), then every weight rounded onto that grid. The
 * bytes equal llama.cpp's quantize_row_*_ref and gguf-py's quantizers.
 */
#include <float.h>
#include <math.h>

#include "base/base.h"
#include "tensor/quant_ref.h"

/*
 * quant_trunc_int(v) clamped to [0, hi], written with float selects only
 * so the compiler can vectorize the loops that call it: below 0, NaN and
 * from 2^31 up (where the truncation gives INT32_MIN) it is 0, otherwise
 * trunc(min(v, hi)).
 */
static inline int trunc_to_grid(float v, int hi) {
    float c = v < (float)hi ? v : (float)hi;
    c = v >= 0.0f && v < 2147483648.0f ? c : 0.0f;
    return (int)c;
}

/*
 * quant_trunc_int(roundf(v)) clamped to [-128, 127], without the libm call:
 * v is capped to [-128, 127], truncated (exact), and the exact remainder
 * decides the rounding, halves away from zero. NaN and |v| >= 2^31, where
 * the truncation gives INT32_MIN, give -128.
 */
static inline int round_to_q8(float v) {
    const float c = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
    const int in_range = v > -2147483648.0f && v < 2147483648.0f;
    const float cc = in_range ? c : 0.0f;
    int t = (int)cc;
    const float f = cc - (float)t;
    t += (f >= 0.5f) - (f <= -0.5f);
    return in_range ? t : -128;
}

/* The 5th bits of a Q5 block: bit i belongs to weight i. */
static inline uint32_t q5_high_bits(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static inline void q5_store_high_bits(uint8_t qh[4], uint32_t bits) {
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(bits >> (8 * k));
}

/* ---- dequantization ---------------------------------------------------- */

void dequantize_row_q4_0(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = d * (float)((x[i].qs[j] & 0xF) - 8);
            y[j + QK / 2] = d * (float)((x[i].qs[j] >> 4) - 8);
        }
    }
}

void dequantize_row_q4_1(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = d * (float)(x[i].qs[j] & 0xF) + m;
            y[j + QK / 2] = d * (float)(x[i].qs[j] >> 4) + m;
        }
    }
}

void dequantize_row_q5_0(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = fp16_to_fp32(x[i].d);
        const uint32_t qh = q5_high_bits(x[i].qh);
        for (int j = 0; j < QK / 2; j++) {
            const int lo = (x[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            const int hi = (x[i].qs[j] >> 4) | (int)((qh >> (j + QK / 2)) & 1) << 4;
            y[j] = d * (float)(lo - 16);
            y[j + QK / 2] = d * (float)(hi - 16);
        }
    }
}

void dequantize_row_q5_1(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        const uint32_t qh = q5_high_bits(x[i].qh);
        for (int j = 0; j < QK / 2; j++) {
            const int lo = (x[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            const int hi = (x[i].qs[j] >> 4) | (int)((qh >> (j + QK / 2)) & 1) << 4;
            y[j] = d * (float)lo + m;
            y[j + QK / 2] = d * (float)hi + m;
        }
    }
}

void dequantize_row_q8_0(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

void dequantize_row_q8_1(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_1 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

/* ---- quantization ------------------------------------------------------ */

/*
 * The weight of largest magnitude, with its sign; the first one on ties;
 * 0 when all are zero. NaN weights are passed over. The largest magnitude
 * does not depend on the order it is searched in, so it is taken over 4
 * interleaved lanes the compiler can vectorize, then the first weight of
 * that magnitude is looked up. n is a multiple of 4.
 */
static float signed_absmax(const float *x, int n) {
    float lane[4] = {0};
    for (int j = 0; j < n; j += 4)
        for (int k = 0; k < 4; k++) {
            const float a = fabsf(x[j + k]);
            lane[k] = lane[k] < a ? a : lane[k];
        }
    const float a01 = lane[0] < lane[1] ? lane[1] : lane[0], a23 = lane[2] < lane[3] ? lane[3] : lane[2];
    const float amax = a01 < a23 ? a23 : a01;
    if (amax == 0.0f) return 0.0f;
    int j = 0;
    while (fabsf(x[j]) != amax) j++;
    return x[j];
}

/*
 * The smallest and largest weight, the first one met on ties (FLT_MAX /
 * -FLT_MAX if all are NaN), as a plain scan gives them. A value other than
 * zero has one representation, so it is taken over 4 interleaved lanes
 * the compiler can vectorize; a zero (+0 or -0, whichever comes first) is
 * looked up in order. n is a multiple of 4.
 */
static void min_max(const float *x, int n, float *min, float *max) {
    float lo[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX}, hi[4] = {-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX};
    for (int j = 0; j < n; j += 4)
        for (int k = 0; k < 4; k++) {
            lo[k] = x[j + k] < lo[k] ? x[j + k] : lo[k];
            hi[k] = x[j + k] > hi[k] ? x[j + k] : hi[k];
        }
    const float l01 = lo[1] < lo[0] ? lo[1] : lo[0], l23 = lo[3] < lo[2] ? lo[3] : lo[2];
    const float h01 = hi[1] > hi[0] ? hi[1] : hi[0], h23 = hi[3] > hi[2] ? hi[3] : hi[2];
    float l = l23 < l01 ? l23 : l01, h = h23 > h01 ? h23 : h01;
    if (l == 0.0f || h == 0.0f) {
        l = FLT_MAX;
        h = -FLT_MAX;
        for (int j = 0; j < n; j++) {
            if (x[j] < l) l = x[j];
            if (x[j] > h) h = x[j];
        }
    }
    *min = l;
    *max = h;
}

/*
 * Symmetric 4/5-bit grids: d = max / -2^(bits-1), so the largest-magnitude
 * weight lands exactly on quant 0, and q = trunc(x/d + 2^(bits-1) + 0.5),
 * capped at the top quant (weights of the other sign can round one past it).
 */
void quantize_row_q4_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        const float d = signed_absmax(x, QK) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK / 2; j++) {
            const int q0 = trunc_to_grid(x[j] * id + 8.5f, 15);
            const int q1 = trunc_to_grid(x[j + QK / 2] * id + 8.5f, 15);
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void quantize_row_q5_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_0 *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        const float d = signed_absmax(x, QK) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            const int q0 = trunc_to_grid(x[j] * id + 16.5f, 31);
            const int q1 = trunc_to_grid(x[j + QK / 2] * id + 16.5f, 31);
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + QK / 2);
        }
        q5_store_high_bits(y[i].qh, qh);
    }
}

/*
 * Grids with an offset: m = min, d = (max - min) / (2^bits - 1),
 * q = trunc((x - min)/d + 0.5).
 */
void quantize_row_q4_1_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        float min, max;
        min_max(x, QK, &min, &max);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        for (int j = 0; j < QK / 2; j++) {
            const int q0 = trunc_to_grid((x[j] - min) * id + 0.5f, 15);
            const int q1 = trunc_to_grid((x[j + QK / 2] - min) * id + 0.5f, 15);
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void quantize_row_q5_1_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_1 *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        float min, max;
        min_max(x, QK, &min, &max);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            const int q0 = trunc_to_grid((x[j] - min) * id + 0.5f, 31);
            const int q1 = trunc_to_grid((x[j + QK / 2] - min) * id + 0.5f, 31);
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + QK / 2);
        }
        q5_store_high_bits(y[i].qh, qh);
    }
}

/*
 * 8-bit: d = max|x| / 127, q = round(x/d) with halves away from zero.
 * `amax > a ? amax : a` is the reference's MAX, kept as is: a NaN weight
 * makes the whole block NaN-scaled rather than being skipped.
 */
static float q8_block(const float *x, int8_t *qs, float *d_out) {
    /* without NaN the result is the largest magnitude whatever the order,
     * so it is taken over 4 lanes; with one, in the reference's order */
    float lane[4] = {0};
    int nan = 0;
    for (int j = 0; j < QK; j += 4)
        for (int k = 0; k < 4; k++) {
            const float a = fabsf(x[j + k]);
            lane[k] = lane[k] > a ? lane[k] : a;
            nan |= a != a;
        }
    const float a01 = lane[0] > lane[1] ? lane[0] : lane[1], a23 = lane[2] > lane[3] ? lane[2] : lane[3];
    float amax = a01 > a23 ? a01 : a23;
    if (nan) {
        amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK; j++) {
        const int q = round_to_q8(x[j] * id);
        qs[j] = (int8_t)q;
        sum += q;
    }
    *d_out = d;
    return (float)sum;
}

void quantize_row_q8_0_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        float d;
        q8_block(x, y[i].qs, &d);
        y[i].d = fp32_to_fp16(d);
    }
}

void quantize_row_q8_1_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        float d;
        const float sum = q8_block(x, y[i].qs, &d);
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16(sum * d);
    }
}
