/*
 * quantize.c — tensor_quantize_rows: per type, the reference quantizer
 * (quant_ref.h), or with importance weights the weighted search
 * (quant_search.h), chosen as llama.cpp's ggml_quantize_chunk chooses.
 */
#include "tensor/quantize.h"

#include "tensor/quant_ref.h"
#include "tensor/quant_search.h"
#include "tensor/tensor.h"

typedef void (*weighted_fn)(const float *restrict x, void *restrict y, int64_t n, const float *restrict qw);

/* The weighted form of `type`, NULL for the types that ignore weights. */
static weighted_fn weighted_form(int type) {
    switch (type) {
    case TENSOR_TYPE_Q4_0: return quantize_row_q4_0_weighted;
    case TENSOR_TYPE_Q4_1: return quantize_row_q4_1_weighted;
    case TENSOR_TYPE_Q5_0: return quantize_row_q5_0_weighted;
    case TENSOR_TYPE_Q5_1: return quantize_row_q5_1_weighted;
    case TENSOR_TYPE_Q2_K: return quantize_row_q2_K_weighted;
    case TENSOR_TYPE_Q3_K: return quantize_row_q3_K_weighted;
    case TENSOR_TYPE_Q4_K: return quantize_row_q4_K_weighted;
    case TENSOR_TYPE_Q5_K: return quantize_row_q5_K_weighted;
    case TENSOR_TYPE_Q6_K: return quantize_row_q6_K_weighted;
    default: return NULL;
    }
}

bool tensor_quantize_supported(int type) {
    const struct type_traits *t = tensor_type_traits(type);
    if (!t || !t->from_float) return false;
    /* Q8_1 and Q8_K are activation types; no file stores them */
    return type != TENSOR_TYPE_Q8_1 && type != TENSOR_TYPE_Q8_K;
}

bool tensor_quantize_uses_imatrix(int type) { return tensor_quantize_supported(type) && weighted_form(type); }

size_t tensor_quantize_rows(int type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                            const float *imatrix) {
    if (!tensor_quantize_supported(type) || n_rows < 0) return 0;
    size_t row = tensor_row_size(type, n_per_row);
    if (row == 0) return 0;
    const struct type_traits *t = tensor_type_traits(type);
    const weighted_fn weighted = imatrix ? weighted_form(type) : NULL;
    for (int64_t r = 0; r < n_rows; r++) {
        const float *x = src + r * n_per_row;
        void *y = (char *)dst + (size_t)r * row;
        if (weighted)
            weighted(x, y, n_per_row, imatrix);
        else
            t->from_float(x, y, n_per_row);
    }
    return (size_t)n_rows * row;
}
