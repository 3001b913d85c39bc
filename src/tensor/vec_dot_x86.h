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
#include <math.h>

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

static inline __m256 load_f16x8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline __m256 load_bf16x8(const uint16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* ---- legacy 32-weight blocks ----------------------------------------- */

/*
 * Q4_0, Q4_1 and Q8_0 are written once as a tile: R weight rows against C
 * activation rows, for constant R, C <= TILE_MAX. The single-row vec_dot
 * (1 x 1), the two-row mat-vec form (2 x 1) and the mat-mat tile (the ISA's
 * TILE_R x TILE_C) are instances of the same code, so every element is
 * computed by the same float operations in the same order whatever the
 * instance: one accumulator of 8 lanes per (row, column), each block adding
 * cvt(integer block product) * (d_x * d_y), then a horizontal sum (plus,
 * for Q4_1, the min terms accumulated separately). The integer block
 * products are exact, so they may be formed differently per type:
 *   Q4_0  q*y - 8*y     = dpbusd(-8*sum(y), q, y)
 *   Q5_0  q*y - 16*y    = dpbusd(-16*sum(y), q, y) (q: nibble | fifth bit << 4)
 *   Q4_1  q*y           = dpbusd(0, q, y)          (+ m_x * s_y separately)
 *   Q5_1  the same, q with its fifth bit
 *   Q8_0  x*y           = dpbusd(-128*sum(y), x ^ 0x80, y) with VNNI, whose
 *                         dpbusd never saturates (DOT_U8S8_FULL_RANGE);
 *                         AVX2's maddubs saturates at 16 bits, so there the
 *                         sign trick |x| * (sign(x) y) instead
 * Per-column terms (the activation bytes, d_y, the offset sums) are loaded
 * once per block and reused by every row; per-row terms (unpacked weights,
 * d_x) once per block and reused by every column.
 *
 * Prefetch: the single-row form streams STREAM_AHEAD bytes ahead; the
 * two-row form fetches the same blocks of the next pair of rows; tiles
 * (weights reused across columns from L1/L2) do not prefetch.
 */
enum { TILE_MAX = 4, PF_NONE = 0, PF_STREAM = 1, PF_NEXT_ROWS = 2 };

#define TILE_INLINE static inline __attribute__((always_inline))

static inline __m256 scale_of(uint16_t d) { return _mm256_set1_ps(f16t(d)); }

/* Writes the R x C results: hsum of each accumulator (+ the min term). */
TILE_INLINE void tile_store(float *restrict s, size_t ss, __m256 acc[TILE_MAX][TILE_MAX],
                            const __m128 *mins, const int R, const int C) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        float m[4];
        if (mins) _mm_storeu_ps(m, mins[r]);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) s[(size_t)c * ss + r] = mins ? hsum_ps(acc[r][c]) + m[c] : hsum_ps(acc[r][c]);
    }
}

TILE_INLINE void tile_prefetch(const void *row, size_t bytes, size_t next_rows, const int pf) {
    if (pf == PF_STREAM) stream_prefetch(row, bytes);
    else if (pf == PF_NEXT_ROWS) _mm_prefetch((const char *)row + next_rows, _MM_HINT_T0);
}

enum tile_kind { TILE_Q4_0, TILE_Q5_0, TILE_Q8_0 };

/* Q4_0, Q5_0 and Q8_0 against Q8_0 activations (same block size and scale). */
TILE_INLINE void tile_q8_family(const enum tile_kind kind, const int R, const int C, const int pf, int64_t n,
                                float *restrict s, size_t ss, const void *restrict vx, size_t xs,
                                const void *restrict vy, size_t ys) {
    __m256 acc[TILE_MAX][TILE_MAX];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
#ifdef DOT_U8S8_FULL_RANGE
    const bool offset_trick = true;
#else
    const bool offset_trick = kind != TILE_Q8_0;
#endif
    const __m256i offset = _mm256_set1_epi8(kind == TILE_Q4_0 ? 8 : kind == TILE_Q5_0 ? 16 : (char)0x80);
    for (int64_t b = 0; b < n / QK; b++) {
        __m256i yq[TILE_MAX], base[TILE_MAX];
        __m256 dy[TILE_MAX];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const block_q8_0 *yb = (const block_q8_0 *)((const uint8_t *)vy + (size_t)c * ys) + b;
            yq[c] = _mm256_loadu_si256((const __m256i *)yb->qs);
            base[c] = offset_trick ? _mm256_sub_epi32(_mm256_setzero_si256(),
                                                      dot_u8s8(_mm256_setzero_si256(), offset, yq[c]))
                                   : _mm256_setzero_si256();
            dy[c] = scale_of(yb->d);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256i q;
            __m256 dx;
            if (kind == TILE_Q4_0) {
                const block_q4_0 *xb = (const block_q4_0 *)((const uint8_t *)vx + (size_t)r * xs) + b;
                tile_prefetch(xb, sizeof *xb, 2 * xs, pf);
                q = unpack_nibbles_32(xb->qs);
                dx = scale_of(xb->d);
            } else if (kind == TILE_Q5_0) {
                const block_q5_0 *xb = (const block_q5_0 *)((const uint8_t *)vx + (size_t)r * xs) + b;
                tile_prefetch(xb, sizeof *xb, 2 * xs, pf);
                q = _mm256_or_si256(unpack_nibbles_32(xb->qs), fifth_bits_32(xb->qh));
                dx = scale_of(xb->d);
            } else {
                const block_q8_0 *xb = (const block_q8_0 *)((const uint8_t *)vx + (size_t)r * xs) + b;
                tile_prefetch(xb, sizeof *xb, 2 * xs, pf);
                q = _mm256_loadu_si256((const __m256i *)xb->qs);
                if (offset_trick) q = _mm256_xor_si256(q, offset);
                dx = scale_of(xb->d);
            }
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                __m256i p = offset_trick ? dot_u8s8(base[c], q, yq[c]) : dot_s8s8(base[c], q, yq[c]);
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dx, dy[c]), acc[r][c]);
            }
        }
    }
    tile_store(s, ss, acc, NULL, R, C);
}

/* Q4_1 and Q5_1 against Q8_1: the min terms m_x * s_y go to a separate
 * sum, one lane per column. */
TILE_INLINE void tile_q41_family(const bool five, const int R, const int C, const int pf, int64_t n,
                                 float *restrict s, size_t ss, const void *restrict vx, size_t xs,
                                 const void *restrict vy, size_t ys) {
    __m256 acc[TILE_MAX][TILE_MAX];
    __m128 mins[TILE_MAX];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        mins[r] = _mm_setzero_ps();
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / QK; b++) {
        __m256i yq[TILE_MAX];
        __m256 dy[TILE_MAX];
        float sy[TILE_MAX];
#pragma GCC unroll 4
        for (int c = 0; c < TILE_MAX; c++) {
            const block_q8_1 *yb = (const block_q8_1 *)((const uint8_t *)vy + (size_t)c * ys) + b;
            if (c >= C) {
                sy[c] = 0.0f;
                continue;
            }
            yq[c] = _mm256_loadu_si256((const __m256i *)yb->qs);
            dy[c] = scale_of(yb->d);
            sy[c] = f16t(yb->s);
        }
        /* from registers: storing the lanes and loading them as a vector
         * would stall on store forwarding every block */
        __m128 syv = _mm_setr_ps(sy[0], sy[1], sy[2], sy[3]);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256i q;
            __m256 dx;
            uint16_t m;
            if (five) {
                const block_q5_1 *xb = (const block_q5_1 *)((const uint8_t *)vx + (size_t)r * xs) + b;
                tile_prefetch(xb, sizeof *xb, 2 * xs, pf);
                q = _mm256_or_si256(unpack_nibbles_32(xb->qs), fifth_bits_32(xb->qh));
                dx = scale_of(xb->d);
                m = xb->m;
            } else {
                const block_q4_1 *xb = (const block_q4_1 *)((const uint8_t *)vx + (size_t)r * xs) + b;
                tile_prefetch(xb, sizeof *xb, 2 * xs, pf);
                q = unpack_nibbles_32(xb->qs);
                dx = scale_of(xb->d);
                m = xb->m;
            }
            mins[r] = _mm_add_ps(mins[r], _mm_mul_ps(_mm_set1_ps(f16t(m)), syv));
#pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_u8s8(_mm256_setzero_si256(), q, yq[c])),
                                            _mm256_mul_ps(dx, dy[c]), acc[r][c]);
        }
    }
    tile_store(s, ss, acc, mins, R, C);
}

enum float_kind { FLOAT_F32, FLOAT_F16, FLOAT_BF16 };

/* Float weights (F32, F16, BF16) against F32 activations: one accumulator
 * of 8 lanes (16 with AVX-512) per (row, column) over the blocks of 8
 * (16), its horizontal sum, then the last products one by one. */
TILE_INLINE __m256 float_load8(const enum float_kind kind, const void *row, int64_t i) {
    if (kind == FLOAT_F16) return load_f16x8((const uint16_t *)row + i);
    if (kind == FLOAT_BF16) return load_bf16x8((const uint16_t *)row + i);
    return _mm256_loadu_ps((const float *)row + i);
}

TILE_INLINE float float_at(const enum float_kind kind, const void *row, int64_t i) {
    if (kind == FLOAT_F16) return f16t(((const uint16_t *)row)[i]);
    if (kind == FLOAT_BF16) return bf16_to_fp32(((const uint16_t *)row)[i]);
    return ((const float *)row)[i];
}

#ifdef __AVX512F__
/* With AVX-512: 16 lanes per accumulator, blocks of 16, the last n % 16
 * products one by one. */
TILE_INLINE __m512 float_load16(const enum float_kind kind, const void *row, int64_t i) {
    if (kind == FLOAT_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)));
    if (kind == FLOAT_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i))), 16));
    return _mm512_loadu_ps((const float *)row + i);
}

TILE_INLINE void tile_float(const enum float_kind kind, const int R, const int C, const int pf, int64_t n,
                            float *restrict s, size_t ss, const void *restrict vx, size_t xs, const void *restrict vy,
                            size_t ys) {
    __m512 acc[TILE_MAX][TILE_MAX];
    const size_t esz = kind == FLOAT_F32 ? 4 : 2;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 y[TILE_MAX];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) y[c] = _mm512_loadu_ps((const float *)((const uint8_t *)vy + (size_t)c * ys) + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *xr = (const uint8_t *)vx + (size_t)r * xs;
            if (pf != PF_NONE && (i & 31) == 0) tile_prefetch(xr + (size_t)i * esz, 32 * esz, 2 * xs, pf);
            __m512 x = float_load16(kind, xr, i);
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(x, y[c], acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            float sum = _mm512_reduce_add_ps(acc[r][c]);
            const float *yc = (const float *)((const uint8_t *)vy + (size_t)c * ys);
            for (int64_t j = i; j < n; j++) sum += float_at(kind, (const uint8_t *)vx + (size_t)r * xs, j) * yc[j];
            s[(size_t)c * ss + r] = sum;
        }
}
#else
TILE_INLINE void tile_float(const enum float_kind kind, const int R, const int C, const int pf, int64_t n,
                            float *restrict s, size_t ss, const void *restrict vx, size_t xs, const void *restrict vy,
                            size_t ys) {
    __m256 acc[TILE_MAX][TILE_MAX];
    const size_t esz = kind == FLOAT_F32 ? 4 : 2;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y[TILE_MAX];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) y[c] = _mm256_loadu_ps((const float *)((const uint8_t *)vy + (size_t)c * ys) + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const uint8_t *xr = (const uint8_t *)vx + (size_t)r * xs;
            if (pf != PF_NONE && (i & 15) == 0) tile_prefetch(xr + (size_t)i * esz, 16 * esz, 2 * xs, pf);
            __m256 x = float_load8(kind, xr, i);
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(x, y[c], acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            float sum = hsum_ps(acc[r][c]);
            const float *yc = (const float *)((const uint8_t *)vy + (size_t)c * ys);
            for (int64_t j = i; j < n; j++) sum += float_at(kind, (const uint8_t *)vx + (size_t)r * xs, j) * yc[j];
            s[(size_t)c * ss + r] = sum;
        }
}
#endif

/* The three instances of each type. */
#define TILE_INSTANCES(name, call)                                                                      \
    static void vec_dot_##name(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) { \
        call(1, 1, PF_STREAM, n, s, 1, vx, 0, vy, 0);                                                    \
    }                                                                                                    \
    static void vec_dot_##name##_x2(int64_t n, float *restrict s, const void *restrict vx, size_t xs,   \
                                    const void *restrict vy) {                                           \
        call(2, 1, PF_NEXT_ROWS, n, s, 1, vx, xs, vy, 0);                                                \
    }                                                                                                    \
    static void vec_dot_##name##_tile(int64_t n, float *restrict s, size_t ss, const void *restrict vx,  \
                                      size_t xs, const void *restrict vy, size_t ys) {                   \
        call(TILE_R, TILE_C, PF_NONE, n, s, ss, vx, xs, vy, ys);                                         \
    }

#define CALL_Q4_0(...) tile_q8_family(TILE_Q4_0, __VA_ARGS__)
#define CALL_Q5_0(...) tile_q8_family(TILE_Q5_0, __VA_ARGS__)
#define CALL_Q8_0(...) tile_q8_family(TILE_Q8_0, __VA_ARGS__)
#define CALL_Q4_1(...) tile_q41_family(false, __VA_ARGS__)
#define CALL_Q5_1(...) tile_q41_family(true, __VA_ARGS__)
TILE_INSTANCES(q4_0, CALL_Q4_0)
TILE_INSTANCES(q5_0, CALL_Q5_0)
TILE_INSTANCES(q8_0, CALL_Q8_0)
TILE_INSTANCES(q4_1, CALL_Q4_1)
TILE_INSTANCES(q5_1, CALL_Q5_1)
#define CALL_F32(...) tile_float(FLOAT_F32, __VA_ARGS__)
#define CALL_F16(...) tile_float(FLOAT_F16, __VA_ARGS__)
#define CALL_BF16(...) tile_float(FLOAT_BF16, __VA_ARGS__)
TILE_INSTANCES(f32, CALL_F32)
TILE_INSTANCES(f16, CALL_F16)
TILE_INSTANCES(bf16, CALL_BF16)



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
/* mins . (pairwise sums of bsums): the offset term of a Q4_K/Q5_K super-block
 * (w as k_scales_mins_words gives it). */
static inline int32_t k_mins_dot(const uint32_t w[4], const int16_t *bsums) {
    __m128i mins = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)w[3], (int)w[2]));
    __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums),
                                _mm_loadu_si128((const __m128i *)(bsums + 8)));
    __m128i p = _mm_madd_epi16(mins, bs);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(p);
}

static inline int32_t q4_K_scales_mins(const uint8_t *scales, const int16_t *bsums, uint8_t sc[8]) {
    uint32_t w[4];
    k_scales_mins_words(scales, w);
    memcpy(sc, w, 8);
    return k_mins_dot(w, bsums);
}

/* The eight 6-bit sub-block scales of a K-quant super-block as 16-bit words,
 * the same eight in both 128-bit lanes, ready for k_scale_splat. */
static inline __m256i k_scales_x16(uint32_t s0_3, uint32_t s4_7) {
    __m128i b = _mm_cvtsi64_si128((long long)(((uint64_t)s4_7 << 32) | s0_3));
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(b));
}

/* Word i of k_scales_x16 in all sixteen places: one in-lane shuffle instead
 * of a scalar load and broadcast per sub-block. */
static inline __m256i k_scale_splat(__m256i words, int i) {
    return _mm256_shuffle_epi8(words, _mm256_set1_epi16((short)((2 * i) | ((2 * i + 1) << 8))));
}

/* Q4_K as a tile, like the legacy types above: per super-block, one
 * integer sum per (row, column) over the eight scaled sub-blocks (exact, so
 * its order is free), then acc += cvt(sum) * (d_y * d_x) and, kept apart,
 * summ += (d_y * dmin_x) * (mins . bsums); the result is hsum(acc) - summ. */
TILE_INLINE void tile_q4_K(const int R, const int C, const int pf, int64_t n, float *restrict s, size_t ss,
                           const void *restrict vx, size_t xs, const void *restrict vy, size_t ys) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[TILE_MAX][TILE_MAX];
    __m128 summ[TILE_MAX];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        summ[r] = _mm_setzero_ps();
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q8_K *yb[TILE_MAX];
        __m128i bs[TILE_MAX];
        float dy[TILE_MAX];
#pragma GCC unroll 4
        for (int c = 0; c < TILE_MAX; c++) {
            if (c >= C) {
                dy[c] = 0.0f;
                continue;
            }
            yb[c] = (const block_q8_K *)((const uint8_t *)vy + (size_t)c * ys) + b;
            bs[c] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)yb[c]->bsums),
                                   _mm_loadu_si128((const __m128i *)(yb[c]->bsums + 8)));
            dy[c] = yb[c]->d;
        }
        const __m128 dyv = _mm_setr_ps(dy[0], dy[1], dy[2], dy[3]);
        const block_q4_K *xb[TILE_MAX];
        uint8_t sc[TILE_MAX][8];
        __m256i sumi[TILE_MAX][TILE_MAX];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            xb[r] = (const block_q4_K *)((const uint8_t *)vx + (size_t)r * xs) + b;
            tile_prefetch(xb[r], sizeof *xb[r], 2 * xs, pf);
            uint32_t w[4];
            k_scales_mins_words(xb[r]->scales, w);
            memcpy(sc[r], w, 8);
            __m128i mins = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)w[3], (int)w[2]));
            int32_t msum[TILE_MAX] = {0, 0, 0, 0};
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                __m128i p = _mm_madd_epi16(mins, bs[c]);
                p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
                p = _mm_add_epi32(p, _mm_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
                msum[c] = _mm_cvtsi128_si32(p);
                sumi[r][c] = _mm256_setzero_si256();
            }
            __m128 mf = _mm_cvtepi32_ps(_mm_setr_epi32(msum[0], msum[1], msum[2], msum[3]));
            summ[r] = _mm_add_ps(summ[r], _mm_mul_ps(_mm_mul_ps(dyv, _mm_set1_ps(f16t(xb[r]->dmin))), mf));
        }
        for (int j = 0; j < 4; j++) {
            __m256i ylo[TILE_MAX], yhi[TILE_MAX];
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                ylo[c] = load_q8(yb[c]->qs + 64 * j);
                yhi[c] = load_q8(yb[c]->qs + 64 * j + 32);
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(xb[r]->qs + 32 * j));
                __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                __m256i slo = _mm256_set1_epi16(sc[r][2 * j]), shi = _mm256_set1_epi16(sc[r][2 * j + 1]);
#pragma GCC unroll 4
                for (int c = 0; c < C; c++) {
                    sumi[r][c] = dot_u8s8_scaled(sumi[r][c], lo, ylo[c], slo);
                    sumi[r][c] = dot_u8s8_scaled(sumi[r][c], hi, yhi[c], shi);
                }
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 dx = _mm256_set1_ps(f16t(xb[r]->d));
#pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r][c]), _mm256_mul_ps(_mm256_set1_ps(dy[c]), dx),
                                            acc[r][c]);
        }
    }
    /* hsum - summ == hsum + (-summ) exactly */
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) summ[r] = _mm_sub_ps(_mm_setzero_ps(), summ[r]);
    tile_store(s, ss, acc, summ, R, C);
}

/* Mat-vec keeps its own single-row kernel (the 1 x 1 instance of the tile
 * measured ~40% slower); both compute each element identically. */
static void vec_dot_q4_K_tile(int64_t n, float *restrict s, size_t ss, const void *restrict vx, size_t xs,
                              const void *restrict vy, size_t ys) {
    tile_q4_K(TILE_R, TILE_C, PF_NONE, n, s, ss, vx, xs, vy, ys);
}

static void vec_dot_q4_K(int64_t n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        stream_prefetch(x + b, sizeof *x);
        uint32_t w[4];
        k_scales_mins_words(x[b].scales, w);
        const int32_t msum = k_mins_dot(w, y[b].bsums);
        const __m256i sc = k_scales_x16(w[0], w[1]);
        __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            sumi0 = dot_u8s8_scaled(sumi0, lo, load_q8(y[b].qs + 64 * j), k_scale_splat(sc, 2 * j));
            sumi1 = dot_u8s8_scaled(sumi1, hi, load_q8(y[b].qs + 64 * j + 32), k_scale_splat(sc, 2 * j + 1));
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

#include "tensor/attn_x86.h"
#include "tensor/act_x86.h"

static void fill_x86_kernels(struct tensor_kernels *k) {
    k->attn = attn_x86;
    k->silu_mul = silu_mul_x86;
    k->gelu_mul = gelu_mul_x86;
    k->gelu_erf = gelu_erf_x86;
#ifdef __AVX512F__
    k->argmax = argmax_x86; /* AVX2 keeps the scalar table's (dispatch.c), and its rope */
    k->rope = rope_x86;
#endif
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
    k->vec_dot_x2[TENSOR_TYPE_Q4_1] = vec_dot_q4_1_x2;
    k->vec_dot_x2[TENSOR_TYPE_Q8_0] = vec_dot_q8_0_x2;
    k->vec_dot_x2[TENSOR_TYPE_Q5_0] = vec_dot_q5_0_x2;
    k->vec_dot_x2[TENSOR_TYPE_F32] = vec_dot_f32_x2;
    k->vec_dot_x2[TENSOR_TYPE_F16] = vec_dot_f16_x2;
    k->vec_dot_x2[TENSOR_TYPE_BF16] = vec_dot_bf16_x2;
    k->vec_dot_tile[TENSOR_TYPE_F32] = vec_dot_f32_tile;
    k->vec_dot_tile[TENSOR_TYPE_F16] = vec_dot_f16_tile;
    k->vec_dot_tile[TENSOR_TYPE_BF16] = vec_dot_bf16_tile;
    k->vec_dot_x2[TENSOR_TYPE_Q5_1] = vec_dot_q5_1_x2;
    k->vec_dot_tile[TENSOR_TYPE_Q4_0] = vec_dot_q4_0_tile;
    k->vec_dot_tile[TENSOR_TYPE_Q5_0] = vec_dot_q5_0_tile;
    k->vec_dot_tile[TENSOR_TYPE_Q5_1] = vec_dot_q5_1_tile;
    k->vec_dot_tile[TENSOR_TYPE_Q4_1] = vec_dot_q4_1_tile;
    k->vec_dot_tile[TENSOR_TYPE_Q8_0] = vec_dot_q8_0_tile;
    k->vec_dot_tile[TENSOR_TYPE_Q4_K] = vec_dot_q4_K_tile;
    k->tile_rows = TILE_R;
    k->tile_cols = TILE_C;
}

#endif /* KVIK_VEC_DOT_X86_H */
