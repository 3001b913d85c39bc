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
#include <math.h>

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

/* ---- activation quantizers (the block step: quant_x86.h) -------------- */

#include "tensor/quant_x86.h"

/* Rows to F16 (the KV cache's default type), sixteen values at a time. */
static void f16_from_float_avx512(const float *restrict x, void *restrict vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) y[i] = f16_rne(x[i]);
}

/* Runs of sixteen blocks by q8_blocks16_avx512 (their d, and s, rounded
 * to f16 sixteen at a time), the rest and any run with a NaN block by
 * block. */
static void quantize_row_q8_0_avx512(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0, nb = n / QK; i < nb;) {
        __m512 d;
        __m512i sum;
        if (i + 16 <= nb && q8_blocks16_avx512(x + i * QK, y[i].qs, sizeof *y, &d, &sum)) {
            _Alignas(32) uint16_t dh[16];
            _mm256_store_si256((__m256i *)dh, _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            for (int b = 0; b < 16; b++) y[i + b].d = dh[b];
            i += 16;
            continue;
        }
        for (int64_t end = i + 16 < nb ? i + 16 : nb; i < end; i++) {
            float db;
            int32_t sb;
            if (q8_block_avx512(x + i * QK, y[i].qs, &db, &sb)) y[i].d = f16_rne(db);
            else quantize_row_q8_0_ref(x + i * QK, &y[i], QK);
        }
    }
}

static void quantize_row_q8_1_avx512(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0, nb = n / QK; i < nb;) {
        __m512 d;
        __m512i sum;
        if (i + 16 <= nb && q8_blocks16_avx512(x + i * QK, y[i].qs, sizeof *y, &d, &sum)) {
            _Alignas(32) uint16_t dh[16], sh[16];
            _mm256_store_si256((__m256i *)dh, _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            _mm256_store_si256((__m256i *)sh, _mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), d),
                                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            for (int b = 0; b < 16; b++) y[i + b].d = dh[b], y[i + b].s = sh[b];
            i += 16;
            continue;
        }
        for (int64_t end = i + 16 < nb ? i + 16 : nb; i < end; i++) {
            float db;
            int32_t sb;
            if (q8_block_avx512(x + i * QK, y[i].qs, &db, &sb)) {
                y[i].d = f16_rne(db);
                y[i].s = f16_rne((float)sb * db);
            } else {
                quantize_row_q8_1_ref(x + i * QK, &y[i], QK);
            }
        }
    }
}

/* Q8_K rows equal byte for byte to quantize_row_q8_K_ref: the first value
 * of the largest magnitude gives iscale = -127 / max, each quant is the
 * reference's magic-number rounding of iscale x (a product, then a sum:
 * two roundings, as there), and the sixteen sums of sixteen quants come
 * out of one transposing tree. A super-block holding a value that is not
 * finite goes to the reference. */
static void quantize_row_q8_K_avx512(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_K *y = vy;
    const __m512 sign = _mm512_set1_ps(-0.0f), inf = _mm512_set1_ps(INFINITY), magic = _mm512_set1_ps(12582912.0f);
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m512 v[16], m = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int j = 0; j < 16; j++) {
            v[j] = _mm512_loadu_ps(x + 16 * j);
            __m512 a = _mm512_andnot_ps(sign, v[j]);
            bad |= _mm512_cmp_ps_mask(a, inf, _CMP_NLT_UQ); /* infinite or NaN */
            m = _mm512_max_ps(m, a);
        }
        if (bad) {
            quantize_row_q8_K_ref(x, &y[i], QK_K);
            continue;
        }
        const float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = amax;
        for (int j = 0; j < 16; j++) {
            __mmask16 e = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, v[j]), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (e) {
                max = x[16 * j + __builtin_ctz(e)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 is = _mm512_set1_ps(iscale);
        __m512i s[16];
        for (int j = 0; j < 16; j++) {
            __m512 f = _mm512_add_ps(_mm512_mul_ps(is, v[j]), magic);
            __m512i q = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(0x007fffff)),
                                         _mm512_set1_epi32(0x00400000));
            q = _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-128));
            _mm_storeu_si128((__m128i *)(y[i].qs + 16 * j), _mm512_cvtepi32_epi8(q));
            s[j] = q;
        }
        Q8_TREE16(__m512i, s, _mm512_add_epi32, _mm512_unpacklo_epi32, _mm512_unpackhi_epi32, _mm512_unpacklo_epi64,
                  _mm512_unpackhi_epi64, _mm512_shuffle_i32x4);
        _mm256_storeu_si256((__m256i *)y[i].bsums, _mm512_cvtepi32_epi16(s[0]));
        y[i].d = 1 / iscale;
    }
}

void tensor_kernels_init_avx512(struct tensor_kernels *k) {
    k->name = "avx512-vnni";
    k->isa = TENSOR_ISA_AVX512;
    fill_x86_kernels(k);
    k->quantize[TENSOR_TYPE_Q8_0] = quantize_row_q8_0_avx512;
    k->quantize[TENSOR_TYPE_Q8_1] = quantize_row_q8_1_avx512;
    k->quantize[TENSOR_TYPE_Q8_K] = quantize_row_q8_K_avx512;
    k->quantize[TENSOR_TYPE_F16] = f16_from_float_avx512;
}
#endif
