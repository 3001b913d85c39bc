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

/* Sixteen vectors -> one whose lane b is the maximum of vector b's lanes
 * (max is exact, so the order of the tree does not matter): pairs of
 * vectors interleaved, then pairs of pairs, within 128-bit lanes, then the
 * 128-bit lanes themselves. The integer sums below take the same tree. */
#define Q8_TREE16(T, v, OP, LO32, HI32, LO64, HI64, SH)                                               \
    do {                                                                                              \
        T t_[8], u_[4], w_[2];                                                                        \
        for (int i_ = 0; i_ < 8; i_++)                                                                \
            t_[i_] = OP(LO32(v[2 * i_], v[2 * i_ + 1]), HI32(v[2 * i_], v[2 * i_ + 1]));              \
        for (int i_ = 0; i_ < 4; i_++) u_[i_] = OP(LO64(t_[2 * i_], t_[2 * i_ + 1]), HI64(t_[2 * i_], t_[2 * i_ + 1])); \
        for (int i_ = 0; i_ < 2; i_++) w_[i_] = OP(SH(u_[2 * i_], u_[2 * i_ + 1], 0x88), SH(u_[2 * i_], u_[2 * i_ + 1], 0xDD)); \
        v[0] = OP(SH(w_[0], w_[1], 0x88), SH(w_[0], w_[1], 0xDD));                                 \
    } while (0)

#define Q8_LO64_PS(a, b) _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#define Q8_HI64_PS(a, b) _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))

/* Sixteen blocks (512 values) at once, each exactly as q8_block_avx512
 * makes it: block b's quants at qs + b * stride, its d (before f16
 * rounding) and the sum of its quants in lane b of *d_out and *sum_out.
 * The maxima and the sums of the sixteen blocks are reduced together (one
 * transposing tree each) instead of block by block, and d and 1/d are one
 * vector division each. False (nothing written) if a value is a NaN. */
static inline bool q8_blocks16_avx512(const float *x, int8_t *qs, size_t stride, __m512 *d_out, __m512i *sum_out) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 m[16];
    __mmask16 nan = 0;
    for (int b = 0; b < 16; b++) {
        __m512 a = _mm512_loadu_ps(x + 32 * b), c = _mm512_loadu_ps(x + 32 * b + 16);
        nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
        m[b] = _mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, c));
    }
    if (nan) return false;
    Q8_TREE16(__m512, m, _mm512_max_ps, _mm512_unpacklo_ps, _mm512_unpackhi_ps, Q8_LO64_PS, Q8_HI64_PS,
              _mm512_shuffle_f32x4);
    const __m512 d = _mm512_div_ps(m[0], _mm512_set1_ps(127.0f));
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_OQ),
                                          _mm512_set1_ps(1.0f), d);
    _Alignas(64) float idv[16];
    _mm512_store_ps(idv, id);
    __m512i s[16];
    for (int b = 0; b < 16; b++) {
        __m512 ib = _mm512_set1_ps(idv[b]);
        __m512i qa = q8_round_clamp(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b), ib));
        __m512i qb = q8_round_clamp(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b + 16), ib));
        _mm_storeu_si128((__m128i *)(qs + (size_t)b * stride), _mm512_cvtepi32_epi8(qa));
        _mm_storeu_si128((__m128i *)(qs + (size_t)b * stride + 16), _mm512_cvtepi32_epi8(qb));
        s[b] = _mm512_add_epi32(qa, qb);
    }
    Q8_TREE16(__m512i, s, _mm512_add_epi32, _mm512_unpacklo_epi32, _mm512_unpackhi_epi32, _mm512_unpacklo_epi64,
              _mm512_unpackhi_epi64, _mm512_shuffle_i32x4);
    *d_out = d;
    *sum_out = s[0];
    return true;
}

/* fp32_to_fp16 by the F16C instruction: the same bits (round to nearest
 * even, NaN quieted with its top payload bits), a few times faster. */
static inline uint16_t f16_rne(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

#endif /* KVIK_QUANT_X86_H */
