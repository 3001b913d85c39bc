/*
 * types.c — the type traits table: for every GGUF tensor type, its name,
 * block size, bytes per block, reference to_float / from_float conversions
 * and the activation type its rows are multiplied with (vec_dot_type).
 * Lookups by id and by name, and row sizes, are answered from this table.
 *
 * The quantized conversions live in quant_legacy.c and quant_k.c; the plain
 * float types (F32, F16, BF16) are converted here. Integer and F64 types
 * are known (so a GGUF file holding them can be sized and skipped) but have
 * no float conversion.
 */
#include <stdint.h>
#include <string.h>

#include "tensor/quant_ref.h"
#include "tensor/tensor.h"

/* ---- plain float types ------------------------------------------------- */

static void f32_to_float(const void *restrict x, float *restrict y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void f32_from_float(const float *restrict x, void *restrict y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void f16_to_float(const void *restrict vx, float *restrict y, int64_t n) {
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = fp16_to_fp32(x[i]);
}

static void f16_from_float(const float *restrict x, void *restrict vy, int64_t n) {
    uint16_t *y = vy;
    for (int64_t i = 0; i < n; i++) y[i] = fp32_to_fp16(x[i]);
}

static void bf16_to_float(const void *restrict vx, float *restrict y, int64_t n) {
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_fp32(x[i]);
}

static void bf16_from_float(const float *restrict x, void *restrict vy, int64_t n) {
    uint16_t *y = vy;
    for (int64_t i = 0; i < n; i++) y[i] = fp32_to_bf16(x[i]);
}

/* ---- the table ----------------------------------------------------------- */

#define PLAIN(id, nm, size, to, from, dot)                                                    \
    [id] = {.name = nm, .block_size = 1, .type_size = size, .is_quantized = false,           \
            .to_float = to, .from_float = from, .vec_dot_type = dot}

#define QUANT(id, nm, bs, blk, to, from, dot)                                                 \
    [id] = {.name = nm, .block_size = bs, .type_size = sizeof(blk), .is_quantized = true,    \
            .to_float = to, .from_float = from, .vec_dot_type = dot}

static const struct type_traits TRAITS[TENSOR_TYPE_COUNT] = {
    /* float weights are multiplied with float activations */
    PLAIN(TENSOR_TYPE_F32, "F32", 4, f32_to_float, f32_from_float, TENSOR_TYPE_F32),
    PLAIN(TENSOR_TYPE_F16, "F16", 2, f16_to_float, f16_from_float, TENSOR_TYPE_F32),
    PLAIN(TENSOR_TYPE_BF16, "BF16", 2, bf16_to_float, bf16_from_float, TENSOR_TYPE_F32),

    /* legacy types: symmetric ones pair with Q8_0, those with a min with
     * Q8_1 (whose s = d * sum(q) carries the min's contribution) */
    QUANT(TENSOR_TYPE_Q4_0, "Q4_0", QK, block_q4_0, dequantize_row_q4_0, quantize_row_q4_0_ref,
          TENSOR_TYPE_Q8_0),
    QUANT(TENSOR_TYPE_Q4_1, "Q4_1", QK, block_q4_1, dequantize_row_q4_1, quantize_row_q4_1_ref,
          TENSOR_TYPE_Q8_1),
    QUANT(TENSOR_TYPE_Q5_0, "Q5_0", QK, block_q5_0, dequantize_row_q5_0, quantize_row_q5_0_ref,
          TENSOR_TYPE_Q8_0),
    QUANT(TENSOR_TYPE_Q5_1, "Q5_1", QK, block_q5_1, dequantize_row_q5_1, quantize_row_q5_1_ref,
          TENSOR_TYPE_Q8_1),
    QUANT(TENSOR_TYPE_Q8_0, "Q8_0", QK, block_q8_0, dequantize_row_q8_0, quantize_row_q8_0_ref,
          TENSOR_TYPE_Q8_0),
    QUANT(TENSOR_TYPE_Q8_1, "Q8_1", QK, block_q8_1, dequantize_row_q8_1, quantize_row_q8_1_ref,
          TENSOR_TYPE_Q8_1),

    /* K-quants pair with Q8_K */
    QUANT(TENSOR_TYPE_Q2_K, "Q2_K", QK_K, block_q2_K, dequantize_row_q2_K, quantize_row_q2_K_ref,
          TENSOR_TYPE_Q8_K),
    QUANT(TENSOR_TYPE_Q3_K, "Q3_K", QK_K, block_q3_K, dequantize_row_q3_K, quantize_row_q3_K_ref,
          TENSOR_TYPE_Q8_K),
    QUANT(TENSOR_TYPE_Q4_K, "Q4_K", QK_K, block_q4_K, dequantize_row_q4_K, quantize_row_q4_K_ref,
          TENSOR_TYPE_Q8_K),
    QUANT(TENSOR_TYPE_Q5_K, "Q5_K", QK_K, block_q5_K, dequantize_row_q5_K, quantize_row_q5_K_ref,
          TENSOR_TYPE_Q8_K),
    QUANT(TENSOR_TYPE_Q6_K, "Q6_K", QK_K, block_q6_K, dequantize_row_q6_K, quantize_row_q6_K_ref,
          TENSOR_TYPE_Q8_K),
    QUANT(TENSOR_TYPE_Q8_K, "Q8_K", QK_K, block_q8_K, dequantize_row_q8_K, quantize_row_q8_K_ref,
          TENSOR_TYPE_Q8_K),

    /* stored but never computed with */
    PLAIN(TENSOR_TYPE_I8, "I8", 1, NULL, NULL, TENSOR_TYPE_I8),
    PLAIN(TENSOR_TYPE_I16, "I16", 2, NULL, NULL, TENSOR_TYPE_I16),
    PLAIN(TENSOR_TYPE_I32, "I32", 4, NULL, NULL, TENSOR_TYPE_I32),
    PLAIN(TENSOR_TYPE_I64, "I64", 8, NULL, NULL, TENSOR_TYPE_I64),
    PLAIN(TENSOR_TYPE_F64, "F64", 8, NULL, NULL, TENSOR_TYPE_F64),
};

#undef PLAIN
#undef QUANT

/* ---- lookups ----------------------------------------------------------- */

const struct type_traits *tensor_type_traits(int type) {
    if (type < 0 || type >= TENSOR_TYPE_COUNT || TRAITS[type].name == NULL) return NULL;
    return &TRAITS[type];
}

const char *tensor_type_name(int type) {
    const struct type_traits *t = tensor_type_traits(type);
    return t ? t->name : "?";
}

static int ascii_lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static bool name_equal_nocase(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (ascii_lower((unsigned char)*a) != ascii_lower((unsigned char)*b)) return false;
    return *a == *b;
}

int tensor_type_from_name(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < TENSOR_TYPE_COUNT; i++)
        if (TRAITS[i].name && name_equal_nocase(TRAITS[i].name, name)) return i;
    return -1;
}

size_t tensor_row_size(int type, int64_t n) {
    const struct type_traits *t = tensor_type_traits(type);
    if (!t || n < 0 || n % t->block_size != 0) return 0;
    const uint64_t blocks = (uint64_t)(n / t->block_size);
    if (blocks > SIZE_MAX / t->type_size) return 0; /* would overflow */
    return (size_t)blocks * t->type_size;
}
