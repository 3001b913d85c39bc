/*
 * vec_dot_scalar.c — the reference dot products, one per weight type.
 *
 * Plain C that follows the block layouts in quants.h literally: integer sums
 * within a block (exact), then one float multiply-add per block (or per
 * sub-block for the K-quants). The SIMD files must agree with these up to
 * the order of the float additions.
 */
#include <math.h>
#include "tensor/kernels.h"
#include "tensor/quant_ref.h"
#include "tensor/quants.h"

void vec_dot_f32_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *x = vx, *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}

void vec_dot_f16_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const uint16_t *x = vx;
    const float *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += fp16_to_fp32(x[i]) * y[i];
    *s = sum;
}

void vec_dot_bf16_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const uint16_t *x = vx;
    const float *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += bf16_to_fp32(x[i]) * y[i];
    *s = sum;
}

void vec_dot_q4_0_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi += ((x[b].qs[j] & 0xF) - 8) * y[b].qs[j];
            sumi += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + QK / 2];
        }
        sum += (float)sumi * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
    }
    *s = sum;
}

void vec_dot_q4_1_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi += (x[b].qs[j] & 0xF) * y[b].qs[j];
            sumi += (x[b].qs[j] >> 4) * y[b].qs[j + QK / 2];
        }
        sum += (float)sumi * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) +
               fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
    }
    *s = sum;
}

static inline uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void vec_dot_q5_0_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        uint32_t qh = load_u32le(x[b].qh);
        int32_t sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = (int)((x[b].qs[j] & 0xF) | ((qh >> j) & 1) << 4) - 16;
            int hi = (int)((x[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16;
            sumi += lo * y[b].qs[j] + hi * y[b].qs[j + QK / 2];
        }
        sum += (float)sumi * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
    }
    *s = sum;
}

void vec_dot_q5_1_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        uint32_t qh = load_u32le(x[b].qh);
        int32_t sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = (int)((x[b].qs[j] & 0xF) | ((qh >> j) & 1) << 4);
            int hi = (int)((x[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
            sumi += lo * y[b].qs[j] + hi * y[b].qs[j + QK / 2];
        }
        sum += (float)sumi * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) +
               fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
    }
    *s = sum;
}

void vec_dot_q8_0_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < QK; j++) sumi += x[b].qs[j] * y[b].qs[j];
        sum += (float)sumi * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
    }
    *s = sum;
}

/* K-quants: each super-block contributes
 *   d * dy * sum_j scale_j * dot_j  -  dmin * dy * sum_j min_j * ysum_j
 * with dot_j the integer dot product of sub-block j and ysum_j the sum of the
 * activations under it (from Q8_K's bsums). */

void vec_dot_q2_K_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int32_t isum = 0, msum = 0;
        for (int is = 0; is < 16; is++) msum += (x[b].scales[is] >> 4) * y[b].bsums[is];
        const int8_t *q8 = y[b].qs;
        for (int half = 0; half < 2; half++) {
            const uint8_t *q2 = x[b].qs + 32 * half;
            for (int j = 0; j < 4; j++) {
                for (int sub = 0; sub < 2; sub++) {
                    int sc = x[b].scales[8 * half + 2 * j + sub] & 0xF;
                    int32_t dot = 0;
                    for (int l = 0; l < 16; l++) dot += ((q2[16 * sub + l] >> (2 * j)) & 3) * q8[l];
                    isum += sc * dot;
                    q8 += 16;
                }
            }
        }
        float dy = y[b].d;
        sum += dy * fp16_to_fp32(x[b].d) * (float)isum - dy * fp16_to_fp32(x[b].dmin) * (float)msum;
    }
    *s = sum;
}

void vec_dot_q3_K_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int8_t sc[16];
        q3_K_scales(x[b].scales, sc);
        int32_t isum = 0;
        const int8_t *q8 = y[b].qs;
        for (int half = 0; half < 2; half++) {
            const uint8_t *q3 = x[b].qs + 32 * half;
            for (int j = 0; j < 4; j++) {
                uint8_t m = (uint8_t)(1u << (4 * half + j));
                for (int sub = 0; sub < 2; sub++) {
                    int32_t dot = 0;
                    for (int l = 0; l < 16; l++) {
                        int k = 16 * sub + l;
                        int q = ((q3[k] >> (2 * j)) & 3) - ((x[b].hmask[k] & m) ? 0 : 4);
                        dot += q * q8[l];
                    }
                    isum += sc[8 * half + 2 * j + sub] * dot;
                    q8 += 16;
                }
            }
        }
        sum += y[b].d * fp16_to_fp32(x[b].d) * (float)isum;
    }
    *s = sum;
}

void vec_dot_q4_K_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int32_t isum = 0, msum = 0;
        const uint8_t *q4 = x[b].qs;
        const int8_t *q8 = y[b].qs;
        for (int j = 0; j < QK_K / 64; j++) {
            uint8_t sc0, m0, sc1, m1;
            k_scale_min(2 * j, x[b].scales, &sc0, &m0);
            k_scale_min(2 * j + 1, x[b].scales, &sc1, &m1);
            int32_t dot0 = 0, dot1 = 0;
            for (int l = 0; l < 32; l++) {
                dot0 += (q4[l] & 0xF) * q8[l];
                dot1 += (q4[l] >> 4) * q8[l + 32];
            }
            isum += sc0 * dot0 + sc1 * dot1;
            msum += m0 * (y[b].bsums[4 * j] + y[b].bsums[4 * j + 1]) +
                    m1 * (y[b].bsums[4 * j + 2] + y[b].bsums[4 * j + 3]);
            q4 += 32;
            q8 += 64;
        }
        float dy = y[b].d;
        sum += dy * fp16_to_fp32(x[b].d) * (float)isum - dy * fp16_to_fp32(x[b].dmin) * (float)msum;
    }
    *s = sum;
}

void vec_dot_q5_K_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int32_t isum = 0, msum = 0;
        const uint8_t *q5 = x[b].qs;
        const int8_t *q8 = y[b].qs;
        for (int j = 0; j < QK_K / 64; j++) {
            uint8_t sc0, m0, sc1, m1;
            k_scale_min(2 * j, x[b].scales, &sc0, &m0);
            k_scale_min(2 * j + 1, x[b].scales, &sc1, &m1);
            int32_t dot0 = 0, dot1 = 0;
            for (int l = 0; l < 32; l++) {
                int lo = (q5[l] & 0xF) | (((x[b].qh[l] >> (2 * j)) & 1) << 4);
                int hi = (q5[l] >> 4) | (((x[b].qh[l] >> (2 * j + 1)) & 1) << 4);
                dot0 += lo * q8[l];
                dot1 += hi * q8[l + 32];
            }
            isum += sc0 * dot0 + sc1 * dot1;
            msum += m0 * (y[b].bsums[4 * j] + y[b].bsums[4 * j + 1]) +
                    m1 * (y[b].bsums[4 * j + 2] + y[b].bsums[4 * j + 3]);
            q5 += 32;
            q8 += 64;
        }
        float dy = y[b].d;
        sum += dy * fp16_to_fp32(x[b].d) * (float)isum - dy * fp16_to_fp32(x[b].dmin) * (float)msum;
    }
    *s = sum;
}

void vec_dot_q6_K_scalar(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int32_t isum = 0;
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = x[b].ql + 64 * half;
            const uint8_t *qh = x[b].qh + 32 * half;
            const int8_t *sc = x[b].scales + 8 * half;
            const int8_t *q8 = y[b].qs + 128 * half;
            int32_t dot[8] = {0};
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = (int)((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                dot[is + 0] += q1 * q8[l];
                dot[is + 2] += q2 * q8[l + 32];
                dot[is + 4] += q3 * q8[l + 64];
                dot[is + 6] += q4 * q8[l + 96];
            }
            for (int k = 0; k < 8; k++) isum += sc[k] * dot[k];
        }
        sum += y[b].d * fp16_to_fp32(x[b].d) * (float)isum;
    }
    *s = sum;
}

static void silu_mul_scalar(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

/* sigmoid(z) = 1 / (1 + e^-z) from t = e^-|z|, as the vector tables. */
static void gelu_mul_scalar(float *gate, const float *up, int64_t n) {
    const float c = 2.0f * 0.7978845608028654f, a = 0.044715f;
    for (int64_t i = 0; i < n; i++) {
        float x = gate[i], z = c * (x + a * (x * x * x)), t = expf(-fabsf(z));
        gate[i] = x * (z < 0.0f ? t : 1.0f) / (1.0f + t) * up[i];
    }
}

static void gelu_erf_scalar(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

static void rope_scalar(float *x, const float *cs, int64_t n) {
    for (int64_t i = 0; i + 1 < n; i += 2) {
        float c = cs[i], s = cs[i + 1], x0 = x[i], x1 = x[i + 1];
        x[i] = x0 * c - x1 * s;
        x[i + 1] = x0 * s + x1 * c;
    }
}

/* Four running maxima, each keeping its first, then the largest of them
 * and the lowest index among equals. */
static int64_t argmax_scalar(const float *x, int64_t n) {
    float bv = isnan(x[0]) ? -INFINITY : x[0], lv[4] = {bv, bv, bv, bv};
    int64_t li[4] = {0, 0, 0, 0}, i = 1, best = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++)
            if (x[i + k] > lv[k]) lv[k] = x[i + k], li[k] = i + k;
    for (int k = 0; k < 4; k++)
        if (lv[k] > bv || (lv[k] == bv && li[k] < best)) bv = lv[k], best = li[k];
    for (; i < n; i++)
        if (x[i] > bv) bv = x[i], best = i;
    return best;
}

void tensor_kernels_init_scalar(struct tensor_kernels *k) {
    k->name = "scalar";
    k->isa = TENSOR_ISA_SCALAR;
    k->attn = attn_scalar;
    k->silu_mul = silu_mul_scalar;
    k->gelu_mul = gelu_mul_scalar;
    k->gelu_erf = gelu_erf_scalar;
    k->argmax = argmax_scalar;
    k->rope = rope_scalar;
    k->vec_dot[TENSOR_TYPE_F32] = vec_dot_f32_scalar;
    k->vec_dot[TENSOR_TYPE_F16] = vec_dot_f16_scalar;
    k->vec_dot[TENSOR_TYPE_BF16] = vec_dot_bf16_scalar;
    k->vec_dot[TENSOR_TYPE_Q4_0] = vec_dot_q4_0_scalar;
    k->vec_dot[TENSOR_TYPE_Q4_1] = vec_dot_q4_1_scalar;
    k->vec_dot[TENSOR_TYPE_Q5_0] = vec_dot_q5_0_scalar;
    k->vec_dot[TENSOR_TYPE_Q5_1] = vec_dot_q5_1_scalar;
    k->vec_dot[TENSOR_TYPE_Q8_0] = vec_dot_q8_0_scalar;
    k->vec_dot[TENSOR_TYPE_Q2_K] = vec_dot_q2_K_scalar;
    k->vec_dot[TENSOR_TYPE_Q3_K] = vec_dot_q3_K_scalar;
    k->vec_dot[TENSOR_TYPE_Q4_K] = vec_dot_q4_K_scalar;
    k->vec_dot[TENSOR_TYPE_Q5_K] = vec_dot_q5_K_scalar;
    k->vec_dot[TENSOR_TYPE_Q6_K] = vec_dot_q6_K_scalar;
    k->quantize[TENSOR_TYPE_Q8_0] = quantize_row_q8_0_ref;
    k->quantize[TENSOR_TYPE_Q8_1] = quantize_row_q8_1_ref;
    k->quantize[TENSOR_TYPE_Q8_K] = quantize_row_q8_K_ref;
    k->quantize[TENSOR_TYPE_F16] = tensor_type_traits(TENSOR_TYPE_F16)->from_float;
}
