/*
 * quant_x86.h — the Q8 activation quantizer's block step with 512-bit
 * vectors, shared by the AVX-512 table (vec_dot_avx512.c: whole rows) and
 * the AMX table (vec_dot_amx.c: straight into the packed tiles). Included
 * only where __AVX512F__ is on.
 */
#ifndef KVIK_QUANT_X86_H
#define KVIK_QUANT_X86_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

/*
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

#endif /* KVIK_QUANT_X86_H */
