/*
 * vec_dot_x86.h — the x86 SIMD dot products, written once for two ISAs.
 *
 * This file is included by vec_dot_avx2.c and vec_dot_avx512.c (and nothing
 * else). Before including it, each defines the two integer primitives the
 * kernels are built from:
 *
 *   dot_u8s8(acc, u, s)          acc(i32x8) += sums of 4 products u8 * s8
 *   dot_u8s8_scaled(acc, u, s, k) acc(i32x8) += sums of pairs of
 *                                (u8*s8 + u8*s8) * k, k an i16x16 scale vector
 *
 * AVX2 builds them from maddubs + madd; AVX-512 VNNI from vpdpbusd and
 * vpdpwssd. Everything else — unpacking each block format into bytes, the
 * per-block float scaling — is shared. Signed weights use the sign trick:
 * x*y = |x| * (sign(x) y), valid because activations never hold -128 (the
 * Q8_0 quantizer clamps to ±127). Q8_K activations can be -128, so the
 * K-quant kernels keep their quants unsigned and subtract the offset times the
 * activation block sums (bsums) instead.
 */
#ifndef KVIK_VEC_DOT_X86_H
#define KVIK_VEC_DOT_X86_H

#include <immintrin.h>

#include "tensor/kernels.h"
#include "tensor/quants.h"

/*
 * Weights stream from memory once per product. The hardware prefetcher of
 * the development machine (a virtual Xeon) does not keep such a stream fed,
 * so every kernel asks for the cache lines STREAM_AHEAD bytes in front of the
 * block it is working on: a steady stream of prefetches beat fetching whole
 * rows ahead in bursts (Q4_0 mat-vec at 2 threads: 44-50% of the measured
 * read bandwidth without prefetch, ~55% with 1 KiB, ~70% with 4 KiB).
 */
enum { STREAM_AHEAD = 4096 };

static inline void stream_prefetch(const void *block, size_t bytes) {
    const char *p = (const char *)block + STREAM_AHEAD;
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Half to float by table lookup: one load instead of the insert-and-convert
 * sequence F16C needs for a scalar (+14% for Q4_0 mat-vec in L2). The table
 * (256 KiB) is filled before any kernel table is handed out. */
static inline float f16t(uint16_t h) { return tensor_fp16_table[h]; }

/* Signed x signed: |x| * (y with x's sign). */
static inline __m256i dot_s8s8(__m256i acc, __m256i x, __m256i y) {
    return dot_u8s8(acc, _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* 32 weights of 16 packed bytes: low nibbles are weights 0..15, high 16..31. */
static inline __m256i unpack_nibbles_32(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* 32 bits of a little-endian mask -> 32 bytes of 0x10 (bit set) or 0. */
static inline __m256i fifth_bits_32(const uint8_t *qh) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)bits),
        _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
    __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* Scale vector for 32 bytes whose first 16 share scale a and last 16 b. */
static inline __m256i scales_2x16(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a));
}

/* ---- float weights ------------------------------------------------- */

static void vec_dot_f32(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        stream_prefetch(x + i, 16 * sizeof *x);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(a0, a1));
    for (; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}

static inline __m256 load_f16x8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline __m256 load_bf16x8(const uint16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

static void vec_dot_f16(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const uint16_t *x = vx;
    const float *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        stream_prefetch(x + i, 16 * sizeof *x);
        a0 = _mm256_fmadd_ps(load_f16x8(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(load_f16x8(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_f16x8(x + i), _mm256_loadu_ps(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(a0, a1));
    for (; i < n; i++) sum += f16t(x[i]) * y[i];
    *s = sum;
}

static void vec_dot_bf16(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const uint16_t *x = vx;
    const float *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        stream_prefetch(x + i, 16 * sizeof *x);
        a0 = _mm256_fmadd_ps(load_bf16x8(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(load_bf16x8(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_bf16x8(x + i), _mm256_loadu_ps(y + i), a0);
    float sum = hsum_ps(_mm256_add_ps(a0, a1));
    for (; i < n; i++) sum += bf16_to_fp32(x[i]) * y[i];
    *s = sum;
}

/* ---- legacy 32-weight blocks ----------------------------------------- */

/* (q - 8) * y summed as q*y - 8*y: two unsigned-by-signed dot products,
 * cheaper than re-centring q and applying the sign trick. */
static inline __m256i q4_0_block_dot(const block_q4_0 *x, const block_q8_0 *y) {
    __m256i yq = _mm256_loadu_si256((const __m256i *)y->qs);
    __m256i p = dot_u8s8(_mm256_setzero_si256(), unpack_nibbles_32(x->qs), yq);
    return _mm256_sub_epi32(p, dot_u8s8(_mm256_setzero_si256(), _mm256_set1_epi8(8), yq));
}

static void vec_dot_q4_0(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t nb = n / QK, b = 0;
    for (; b + 2 <= nb; b += 2) {
        stream_prefetch(x + b, 2 * sizeof *x);
        __m256i p0 = q4_0_block_dot(&x[b], &y[b]);
        __m256i p1 = q4_0_block_dot(&x[b + 1], &y[b + 1]);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(f16t(x[b].d) * f16t(y[b].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(f16t(x[b + 1].d) * f16t(y[b + 1].d)), acc1);
    }
    for (; b < nb; b++) {
        __m256i p = q4_0_block_dot(&x[b], &y[b]);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(f16t(x[b].d) * f16t(y[b].d)), acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* One block of two rows against one activation block: returns the two
 * scaled products (row 0 in f0 and d0, row 1 in f1 and d1) for the caller's
 * accumulators. */
static inline void q4_0_x2_block(const block_q4_0 *x0, const block_q4_0 *x1, const block_q8_0 *y,
                                 __m256 *f0, __m256 *d0, __m256 *f1, __m256 *d1) {
    __m256i yq = _mm256_loadu_si256((const __m256i *)y->qs);
    __m256i ysum = dot_u8s8(_mm256_setzero_si256(), _mm256_set1_epi8(8), yq);
    float dy = f16t(y->d);
    *f0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(dot_u8s8(_mm256_setzero_si256(), unpack_nibbles_32(x0->qs), yq), ysum));
    *f1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(dot_u8s8(_mm256_setzero_si256(), unpack_nibbles_32(x1->qs), yq), ysum));
    *d0 = _mm256_set1_ps(f16t(x0->d) * dy);
    *d1 = _mm256_set1_ps(f16t(x1->d) * dy);
}

/* Two weight rows against one activation row: the activation loads, its
 * block sums and scales are shared. Each row's arithmetic is exactly that of
 * vec_dot_q4_0 (even blocks into the first accumulator, odd into the second,
 * an odd tail block into the first), so s[0] and s[1] equal two single-row
 * calls bit for bit. */
static void vec_dot_q4_0_x2(int64_t n, float *restrict s, const void *restrict vx, size_t stride,
                            const void *restrict vy) {
    const block_q4_0 *x0 = vx, *x1 = (const block_q4_0 *)((const uint8_t *)vx + stride);
    const block_q8_0 *y = vy;
    __m256 a00 = _mm256_setzero_ps(), a01 = _mm256_setzero_ps();
    __m256 a10 = _mm256_setzero_ps(), a11 = _mm256_setzero_ps();
    __m256 f0, d0, f1, d1;
    int64_t nb = n / QK, b = 0;
    for (; b + 2 <= nb; b += 2) {
        /* the same blocks of the next pair of rows */
        _mm_prefetch((const char *)(x0 + b) + 2 * stride, _MM_HINT_T0);
        _mm_prefetch((const char *)(x1 + b) + 2 * stride, _MM_HINT_T0);
        q4_0_x2_block(x0 + b, x1 + b, y + b, &f0, &d0, &f1, &d1);
        a00 = _mm256_fmadd_ps(f0, d0, a00);
        a10 = _mm256_fmadd_ps(f1, d1, a10);
        q4_0_x2_block(x0 + b + 1, x1 + b + 1, y + b + 1, &f0, &d0, &f1, &d1);
        a01 = _mm256_fmadd_ps(f0, d0, a01);
        a11 = _mm256_fmadd_ps(f1, d1, a11);
    }
    if (b < nb) {
        q4_0_x2_block(x0 + b, x1 + b, y + b, &f0, &d0, &f1, &d1);
        a00 = _mm256_fmadd_ps(f0, d0, a00);
        a10 = _mm256_fmadd_ps(f1, d1, a10);
    }
    s[0] = hsum_ps(_mm256_add_ps(a00, a01));
    s[1] = hsum_ps(_mm256_add_ps(a10, a11));
}

static void vec_dot_q4_1(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        stream_prefetch(x + b, sizeof *x);
        __m256i p = dot_u8s8(_mm256_setzero_si256(), unpack_nibbles_32(x[b].qs),
                             _mm256_loadu_si256((const __m256i *)y[b].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(f16t(x[b].d) * f16t(y[b].d)), acc);
        summs += f16t(x[b].m) * f16t(y[b].s);
    }
    *s = hsum_ps(acc) + summs;
}

static void vec_dot_q5_0(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    const __m256i sixteen = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++) {
        stream_prefetch(x + b, sizeof *x);
        __m256i q = _mm256_or_si256(unpack_nibbles_32(x[b].qs), fifth_bits_32(x[b].qh));
        __m256i p = dot_s8s8(_mm256_setzero_si256(), _mm256_sub_epi8(q, sixteen),
                             _mm256_loadu_si256((const __m256i *)y[b].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(f16t(x[b].d) * f16t(y[b].d)), acc);
    }
    *s = hsum_ps(acc);
}

static void vec_dot_q5_1(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t b = 0; b < n / QK; b++) {
        stream_prefetch(x + b, sizeof *x);
        __m256i q = _mm256_or_si256(unpack_nibbles_32(x[b].qs), fifth_bits_32(x[b].qh));
        __m256i p = dot_u8s8(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)y[b].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(f16t(x[b].d) * f16t(y[b].d)), acc);
        summs += f16t(x[b].m) * f16t(y[b].s);
    }
    *s = hsum_ps(acc) + summs;
}

static void vec_dot_q8_0(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t nb = n / QK, b = 0;
    for (; b + 2 <= nb; b += 2) {
        stream_prefetch(x + b, 2 * sizeof *x);
        __m256i p0 = dot_s8s8(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *)x[b].qs),
                              _mm256_loadu_si256((const __m256i *)y[b].qs));
        __m256i p1 = dot_s8s8(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *)x[b + 1].qs),
                              _mm256_loadu_si256((const __m256i *)y[b + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(f16t(x[b].d) * f16t(y[b].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(f16t(x[b + 1].d) * f16t(y[b + 1].d)), acc1);
    }
    for (; b < nb; b++) {
        __m256i p = dot_s8s8(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *)x[b].qs),
                             _mm256_loadu_si256((const __m256i *)y[b].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(f16t(x[b].d) * f16t(y[b].d)), acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* ---- K-quants: 256-weight super-blocks against Q8_K ------------------- */

static inline __m256i load_q8(const int8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

static void vec_dot_q2_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        stream_prefetch(x + b, sizeof *x);
        int32_t msum = 0;
        for (int i = 0; i < 16; i++) msum += (x[b].scales[i] >> 4) * y[b].bsums[i];
        __m256i sumi = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * half));
            const uint8_t *sc = x[b].scales + 8 * half;
            const int8_t *q8 = y[b].qs + 128 * half;
            for (int j = 0; j < 4; j++) {
                __m256i qj = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                sumi = dot_u8s8_scaled(sumi, qj, load_q8(q8 + 32 * j),
                                       scales_2x16(sc[2 * j] & 0xF, sc[2 * j + 1] & 0xF));
            }
        }
        float dy = y[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(dy * f16t(x[b].d)), acc);
        summ += dy * f16t(x[b].dmin) * (float)msum;
    }
    *s = hsum_ps(acc) - summ;
}

static void vec_dot_q3_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        stream_prefetch(x + b, sizeof *x);
        int8_t sc[16];
        q3_K_scales(x[b].scales, sc);
        int32_t offset = 0; /* quants are stored +4: subtract 4 * scale * block sum */
        for (int i = 0; i < 16; i++) offset += sc[i] * y[b].bsums[i];
        __m256i hm = _mm256_loadu_si256((const __m256i *)x[b].hmask);
        __m256i sumi = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * half));
            const int8_t *q8 = y[b].qs + 128 * half;
            for (int j = 0; j < 4; j++) {
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * half + j), one);
                __m256i qj = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2));
                sumi = dot_u8s8_scaled(sumi, qj, load_q8(q8 + 32 * j),
                                       scales_2x16(sc[8 * half + 2 * j], sc[8 * half + 2 * j + 1]));
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_setr_epi32(4 * offset, 0, 0, 0, 0, 0, 0, 0));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(y[b].d * f16t(x[b].d)), acc);
    }
    *s = hsum_ps(acc);
}

/* Q4_K and Q5_K share the scale/min layout and differ by the fifth bit.
 * Unpacks the eight 6-bit scales into sc[] and returns
 * sum_j min_j * (bsums[2j] + bsums[2j+1]), with whole-word bit operations
 * (see k_scale_min in quants.h for the layout). */
static inline int32_t q4_K_scales_mins(const uint8_t *scales, const int16_t *bsums, uint8_t sc[8]) {
    uint32_t w[3], s_lo, s_hi, m_lo, m_hi;
    memcpy(w, scales, 12);
    s_lo = w[0] & 0x3f3f3f3fu;
    s_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
    m_lo = w[1] & 0x3f3f3f3fu;
    m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
    memcpy(sc, &s_lo, 4);
    memcpy(sc + 4, &s_hi, 4);
    __m128i mins = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)m_hi, (int)m_lo));
    __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums),
                                _mm_loadu_si128((const __m128i *)(bsums + 8)));
    __m128i p = _mm_madd_epi16(mins, bs);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(p);
}

static void vec_dot_q4_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        stream_prefetch(x + b, sizeof *x);
        uint8_t sc[8];
        int32_t msum = q4_K_scales_mins(x[b].scales, y[b].bsums, sc);
        __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            sumi0 = dot_u8s8_scaled(sumi0, lo, load_q8(y[b].qs + 64 * j), _mm256_set1_epi16(sc[2 * j]));
            sumi1 = dot_u8s8_scaled(sumi1, hi, load_q8(y[b].qs + 64 * j + 32), _mm256_set1_epi16(sc[2 * j + 1]));
        }
        float dy = y[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(sumi0, sumi1)),
                              _mm256_set1_ps(dy * f16t(x[b].d)), acc);
        summ += dy * f16t(x[b].dmin) * (float)msum;
    }
    *s = hsum_ps(acc) - summ;
}

static void vec_dot_q5_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        stream_prefetch(x + b, sizeof *x);
        uint8_t sc[8];
        int32_t msum = q4_K_scales_mins(x[b].scales, y[b].bsums, sc);
        __m256i qh = _mm256_loadu_si256((const __m256i *)x[b].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * j));
            __m256i hb0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one);
            __m256i hb1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(hb0, 4));
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_slli_epi16(hb1, 4));
            sumi = dot_u8s8_scaled(sumi, lo, load_q8(y[b].qs + 64 * j), _mm256_set1_epi16(sc[2 * j]));
            sumi = dot_u8s8_scaled(sumi, hi, load_q8(y[b].qs + 64 * j + 32), _mm256_set1_epi16(sc[2 * j + 1]));
        }
        float dy = y[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(dy * f16t(x[b].d)), acc);
        summ += dy * f16t(x[b].dmin) * (float)msum;
    }
    *s = hsum_ps(acc) - summ;
}

static void vec_dot_q6_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        stream_prefetch(x + b, sizeof *x);
        int32_t offset = 0; /* quants are stored +32: subtract 32 * scale * block sum */
        for (int i = 0; i < 16; i++) offset += x[b].scales[i] * y[b].bsums[i];
        __m256i sumi = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = x[b].ql + 64 * half;
            const int8_t *sc = x[b].scales + 8 * half;
            const int8_t *q8 = y[b].qs + 128 * half;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i h = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * half));
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
            __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
            __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
            sumi = dot_u8s8_scaled(sumi, q1, load_q8(q8), scales_2x16(sc[0], sc[1]));
            sumi = dot_u8s8_scaled(sumi, q2, load_q8(q8 + 32), scales_2x16(sc[2], sc[3]));
            sumi = dot_u8s8_scaled(sumi, q3, load_q8(q8 + 64), scales_2x16(sc[4], sc[5]));
            sumi = dot_u8s8_scaled(sumi, q4, load_q8(q8 + 96), scales_2x16(sc[6], sc[7]));
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_setr_epi32(32 * offset, 0, 0, 0, 0, 0, 0, 0));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(y[b].d * f16t(x[b].d)), acc);
    }
    *s = hsum_ps(acc);
}

static void fill_x86_kernels(struct tensor_kernels *k) {
    k->vec_dot[TENSOR_TYPE_F32] = vec_dot_f32;
    k->vec_dot[TENSOR_TYPE_F16] = vec_dot_f16;
    k->vec_dot[TENSOR_TYPE_BF16] = vec_dot_bf16;
    k->vec_dot[TENSOR_TYPE_Q4_0] = vec_dot_q4_0;
    k->vec_dot[TENSOR_TYPE_Q4_1] = vec_dot_q4_1;
    k->vec_dot[TENSOR_TYPE_Q5_0] = vec_dot_q5_0;
    k->vec_dot[TENSOR_TYPE_Q5_1] = vec_dot_q5_1;
    k->vec_dot[TENSOR_TYPE_Q8_0] = vec_dot_q8_0;
    k->vec_dot[TENSOR_TYPE_Q2_K] = vec_dot_q2_K;
    k->vec_dot[TENSOR_TYPE_Q3_K] = vec_dot_q3_K;
    k->vec_dot[TENSOR_TYPE_Q4_K] = vec_dot_q4_K;
    k->vec_dot[TENSOR_TYPE_Q5_K] = vec_dot_q5_K;
    k->vec_dot[TENSOR_TYPE_Q6_K] = vec_dot_q6_K;
    k->vec_dot_x2[TENSOR_TYPE_Q4_0] = vec_dot_q4_0_x2;
}

#endif /* KVIK_VEC_DOT_X86_H */
