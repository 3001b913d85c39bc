/*
 * fill.c — pseudo-random weight matrices, for tests, kernel benchmarks and
 * synthetic models. Kernel speed does not depend on weight values, but it
 * does depend on them being finite and of sane magnitude (NaN and denormal
 * scales would take slow paths), so every scale field gets a moderate value.
 *
 * TENSOR_FILL_QUANTIZED quantizes random floats with the type's reference
 * quantizer (types without one fall back to random bits); to stay fast on
 * gigabyte matrices it quantizes up to FILL_UNIQUE_ROWS rows and repeats
 * them. TENSOR_FILL_BITS draws every quant bit at random, which reaches bit
 * patterns a quantizer never writes (kernel tests want those).
 */
#include <stdlib.h>

#include "tensor/fill.h"

enum { FILL_UNIQUE_ROWS = 8 };

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static float rng_uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(rng_next(s) >> 40) * (1.0 / 16777216.0));
}

int tensor_scale_fields(int type, int offsets[2]) {
    switch (type) {
    case TENSOR_TYPE_Q4_0: case TENSOR_TYPE_Q5_0: case TENSOR_TYPE_Q8_0:
        offsets[0] = 0;
        return 1;
    case TENSOR_TYPE_Q4_1: case TENSOR_TYPE_Q5_1: case TENSOR_TYPE_Q8_1:
    case TENSOR_TYPE_Q4_K: case TENSOR_TYPE_Q5_K:
        offsets[0] = 0;
        offsets[1] = 2;
        return 2;
    case TENSOR_TYPE_Q2_K: offsets[0] = 80; offsets[1] = 82; return 2;
    case TENSOR_TYPE_Q3_K: offsets[0] = 108; return 1;
    case TENSOR_TYPE_Q6_K: offsets[0] = 208; return 1;
    default: return 0;
    }
}

static void fill_row_bits(int type, uint8_t *row, int64_t cols, uint64_t *rng) {
    const struct type_traits *tt = tensor_type_traits(type);
    size_t bytes = tensor_row_size(type, cols);
    if (type == TENSOR_TYPE_F32 || type == TENSOR_TYPE_F16 || type == TENSOR_TYPE_BF16) {
        for (int64_t i = 0; i < cols; i++) {
            float v = rng_uniform(rng, -1.0f, 1.0f);
            if (type == TENSOR_TYPE_F32) memcpy(row + 4 * i, &v, 4);
            else {
                uint16_t h = type == TENSOR_TYPE_F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
                memcpy(row + 2 * i, &h, 2);
            }
        }
        return;
    }
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)rng_next(rng);
    if (type == TENSOR_TYPE_Q8_K) { /* float scale */
        for (int64_t b = 0; b < cols / tt->block_size; b++) {
            float d = rng_uniform(rng, 1e-3f, 1e-2f);
            memcpy(row + (size_t)b * tt->type_size, &d, 4);
        }
        return;
    }
    int offs[2];
    int nf = tensor_scale_fields(type, offs);
    for (int64_t b = 0; b < cols / tt->block_size; b++) {
        for (int f = 0; f < nf; f++) {
            uint16_t h = fp32_to_fp16(rng_uniform(rng, -0.05f, 0.05f));
            memcpy(row + (size_t)b * tt->type_size + offs[f], &h, 2);
        }
    }
}

kvik_status tensor_fill_random(int type, void *dst, int64_t rows, int64_t cols, size_t row_bytes,
                               enum tensor_fill mode, uint64_t seed) {
    const struct type_traits *tt = tensor_type_traits(type);
    if (!tt || rows < 0 || cols <= 0 || cols % tt->block_size != 0) return KVIK_ERR_INVALID_ARG;
    size_t bytes = tensor_row_size(type, cols);
    if (row_bytes < bytes) return KVIK_ERR_INVALID_ARG;
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    uint8_t *out = dst;
    if (mode == TENSOR_FILL_BITS || !tt->from_float || type == TENSOR_TYPE_F32) {
        for (int64_t r = 0; r < rows; r++) fill_row_bits(type, out + (size_t)r * row_bytes, cols, &rng);
        return KVIK_OK;
    }
    float *tmp = malloc((size_t)cols * sizeof(float));
    if (!tmp) return KVIK_ERR_NOMEM;
    int64_t unique = rows < FILL_UNIQUE_ROWS ? rows : FILL_UNIQUE_ROWS;
    for (int64_t r = 0; r < unique; r++) {
        for (int64_t i = 0; i < cols; i++) tmp[i] = rng_uniform(&rng, -1.0f, 1.0f);
        tt->from_float(tmp, out + (size_t)r * row_bytes, cols);
    }
    for (int64_t r = unique; r < rows; r++)
        memcpy(out + (size_t)r * row_bytes, out + (size_t)(r % unique) * row_bytes, bytes);
    free(tmp);
    return KVIK_OK;
}
