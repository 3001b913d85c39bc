/*
 * quantize.h — weight quantization as a file converter does it: whole rows
 * of float weights into any type kvik reads, optionally guided by an
 * importance matrix.
 *
 * For every type and input the bytes equal those of llama.cpp's quantizer
 * (ggml_quantize_chunk) on the same floats and importance weights. Without
 * weights that is each type's reference quantizer (quant_ref.h); with them,
 * the importance-weighted search of the type.
 */
#ifndef KVIK_TENSOR_QUANTIZE_H
#define KVIK_TENSOR_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True if tensor_quantize_rows can produce `type` (F32, F16, BF16, the
 * legacy and K-quant weight types). */
bool tensor_quantize_supported(int type);

/* True if `type` uses importance weights when given them (F32, F16, BF16
 * and Q8_0 ignore them). */
bool tensor_quantize_uses_imatrix(int type);

/*
 * Quantizes n_rows rows of n_per_row floats at src into dst, rows packed
 * one after another (tensor_row_size(type, n_per_row) bytes each).
 * imatrix: NULL, or n_per_row non-negative weights, one per column, the
 * same for every row (the mean of x^2 over calibration activations).
 * n_per_row must be a multiple of the type's block size.
 * Returns the bytes written: n_rows * row size; 0 (nothing written) if the
 * type is not supported or n_per_row does not fit its blocks.
 * Thread-safe; rows are independent, so callers split work by rows.
 */
size_t tensor_quantize_rows(int type, const float *src, void *dst, int64_t n_rows, int64_t n_per_row,
                            const float *imatrix);

#endif /* KVIK_TENSOR_QUANTIZE_H */
