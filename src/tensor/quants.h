/*
 * quants.h — the block layouts of GGUF's quantized tensor types.
 *
 * A quantized row is a sequence of blocks; each block holds a fixed number of
 * weights (QK = 32 for the legacy types, QK_K = 256 for the K-quants) and the
 * scales needed to reconstruct them. These layouts are byte-compatible with
 * GGUF files written by the llama.cpp ecosystem. All multi-byte fields are
 * little-endian; `uint16_t d` fields hold IEEE half floats.
 *
 * Legacy types (32 weights per block), x = weight index 0..31:
 *   Q4_0  d | qs[16]           x[i] = (nib(i) - 8) * d         nib(i<16)=qs[i]&15, nib(i+16)=qs[i]>>4
 *   Q4_1  d m | qs[16]         x[i] = nib(i) * d + m
 *   Q5_0  d | qh[4] qs[16]     x[i] = ((nib(i) | bit(i)<<4) - 16) * d   bit(i) = (qh32 >> i) & 1
 *   Q5_1  d m | qh[4] qs[16]   x[i] = (nib(i) | bit(i)<<4) * d + m
 *   Q8_0  d | qs[32] (int8)    x[i] = qs[i] * d
 *   Q8_1  d s | qs[32]         x[i] = qs[i] * d;  s = d * sum(qs)   (activation type)
 *
 * K-quants (256 weights per super-block, split into sub-blocks):
 *   Q2_K  scales[16] qs[64] d dmin      16 x 16 weights, 2 bits; scale/min 4 bits each
 *   Q3_K  hmask[32] qs[64] scales[12] d 16 x 16 weights, 3 bits; 6-bit signed scales
 *   Q4_K  d dmin scales[12] qs[128]     8 x 32 weights, 4 bits; 6-bit scale and min
 *   Q5_K  d dmin scales[12] qh[32] qs[128]  as Q4_K plus one high bit
 *   Q6_K  ql[128] qh[64] scales[16] d   16 x 16 weights, 6 bits; int8 scales
 *   Q8_K  d(float) qs[256] bsums[16]    activation type; bsums = sums of 16 qs
 */
#ifndef KVIK_TENSOR_QUANTS_H
#define KVIK_TENSOR_QUANTS_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#define QK 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef struct {
    uint16_t d;         /* scale (f16) */
    uint8_t qs[QK / 2]; /* nibbles: low = weights 0..15, high = 16..31 */
} block_q4_0;
static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");

typedef struct {
    uint16_t d, m; /* scale and minimum (f16) */
    uint8_t qs[QK / 2];
} block_q4_1;
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");

typedef struct {
    uint16_t d;
    uint8_t qh[4]; /* fifth bit of each weight, little-endian 32-bit mask */
    uint8_t qs[QK / 2];
} block_q5_0;
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");

typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} block_q5_1;
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");

typedef struct {
    uint16_t d;
    int8_t qs[QK];
} block_q8_0;
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");

typedef struct {
    uint16_t d; /* scale (f16) */
    uint16_t s; /* d * sum(qs) (f16) */
    int8_t qs[QK];
} block_q8_1;
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");

typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    uint16_t d, dmin;
} block_q2_K;
static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");

typedef struct {
    uint8_t hmask[QK_K / 8]; /* high bit of each quant */
    uint8_t qs[QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];      /* 16 x 6-bit scales, offset by 32 */
    uint16_t d;
} block_q3_K;
static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 x (6-bit scale, 6-bit min) */
    uint8_t qs[QK_K / 2];
} block_q4_K;
static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");

typedef struct {
    uint8_t ql[QK_K / 2];      /* low 4 bits */
    uint8_t qh[QK_K / 4];      /* high 2 bits */
    int8_t scales[QK_K / 16];  /* 8-bit sub-block scales */
    uint16_t d;
} block_q6_K;
static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");

typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sum of each group of 16 quants */
} block_q8_K;
static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");

/* Unpacks the j-th (scale, min) pair of the 12-byte K-quant scale array:
 * entries 0..3 are the low 6 bits of bytes 0..3 (scales) and 4..7 (mins);
 * entries 4..7 take their low 4 bits from bytes 8..11 and their top 2 bits
 * from the top bits of bytes 0..7. */
static inline void k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All eight pairs at once, with whole-word bit operations: out[0] holds
 * scales 0..3 and out[1] scales 4..7, out[2] mins 0..3 and out[3] mins
 * 4..7, one byte each (little-endian), as k_scale_min gives them. */
static inline void k_scales_mins_words(const uint8_t *q, uint32_t out[4]) {
    uint32_t w[3];
    memcpy(w, q, 12);
    out[0] = w[0] & 0x3f3f3f3fu;
    out[1] = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
    out[2] = w[1] & 0x3f3f3f3fu;
    out[3] = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
}

#endif /* KVIK_TENSOR_QUANTS_H */
