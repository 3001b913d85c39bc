/*
 * vec_dot_avx512.c — dot-product kernels for AVX-512 machines with VNNI
 * (Ice Lake, Zen 4 and later). The shared kernels of vec_dot_x86.h get their
 * integer primitives from vpdpbusd (u8 x s8, four products summed into i32)
 * and vpdpwssd (i16 pairs into i32), one instruction each where AVX2 needs
 * two or three.
 *
 * The kernels stay 256 bits wide. Versions of Q4_0, Q8_0 and Q4_K that put
 * two blocks in one 512-bit register were measured 10-30% slower on the
 * development machine (a virtualised Xeon): the per-block scale work, not
 * the integer width, bounds these kernels, and 512-bit assembly costs extra
 * shuffles. Revisit with a repacked weight layout.
 */
#ifndef KVIK_NO_SIMD
#include <immintrin.h>

#include "base/base.h"
#include "tensor/quant_ref.h"

static inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}

/* vpdpbusd adds the four 16-bit products without saturating. */
#define DOT_U8S8_FULL_RANGE 1

static inline __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i k) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), k);
}

/* Mat-mat tile: weight rows x activation rows per call (see vec_dot_x86.h). */
#define TILE_R 4
#define TILE_C 4

#include "tensor/vec_dot_x86.h"

/* ---- activation quantizers ------------------------------------------ *
 *
 * Q8_0 and Q8_1 rows equal byte for byte to the reference quantizers
 * (quant_legacy.c: amax over the block, d = amax / 127, q = roundf(x / d)
 * clamped to int8), sixteen values per instruction. The maximum of finite
 * values does not depend on the order it is taken in; a block holding a NaN
 * (where the reference's running maximum does) goes to the reference.
 * roundf (half away from zero) is trunc(v) plus the sign of v where
 * |v - trunc(v)| >= 0.5, that difference being exact; vcvttps2dq gives
 * INT32_MIN for NaN and out-of-range values, as quant_trunc_int does.
 */

static inline __m512i q8_round_clamp(__m512 v) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __mmask16 up = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512 r = _mm512_mask_add_ps(t, up, t, _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, sign)));
    __m512i q = _mm512_cvttps_epi32(r);
    return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-128));
}

/* One block: its quants, d (before f16 rounding) and the sum of its quants;
 * false (nothing written) if the block holds a NaN. */
static inline bool q8_block_avx512(const float *x, int8_t *qs, float *d_out, int32_t *sum_out) {
    __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    if (_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q)) return false;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, b)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m512i qa = q8_round_clamp(_mm512_mul_ps(a, _mm512_set1_ps(id)));
    __m512i qb = q8_round_clamp(_mm512_mul_ps(b, _mm512_set1_ps(id)));
    _mm_storeu_si128((__m128i *)qs, _mm512_cvtepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtepi32_epi8(qb));
    *sum_out = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
    *d_out = d;
    return true;
}

/* fp32_to_fp16 by the F16C instruction: the same bits (round to nearest
 * even, NaN quieted with its top payload bits), a few times faster. */
static inline uint16_t f16_rne(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

/* Rows to F16 (the KV cache's default type), sixteen values at a time. */
static void f16_from_float_avx512(const float *restrict x, void *restrict vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) y[i] = f16_rne(x[i]);
}

static void quantize_row_q8_0_avx512(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        float d;
        int32_t sum;
        if (q8_block_avx512(x, y[i].qs, &d, &sum)) y[i].d = f16_rne(d);
        else quantize_row_q8_0_ref(x, &y[i], QK);
    }
}

static void quantize_row_q8_1_avx512(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        float d;
        int32_t sum;
        if (q8_block_avx512(x, y[i].qs, &d, &sum)) {
            y[i].d = f16_rne(d);
            y[i].s = f16_rne((float)sum * d);
        } else {
            quantize_row_q8_1_ref(x, &y[i], QK);
        }
    }
}

void tensor_kernels_init_avx512(struct tensor_kernels *k) {
    k->name = "avx512-vnni";
    k->isa = TENSOR_ISA_AVX512;
    fill_x86_kernels(k);
    k->quantize[TENSOR_TYPE_Q8_0] = quantize_row_q8_0_avx512;
    k->quantize[TENSOR_TYPE_Q8_1] = quantize_row_q8_1_avx512;
    k->quantize[TENSOR_TYPE_F16] = f16_from_float_avx512;
}
#endif
