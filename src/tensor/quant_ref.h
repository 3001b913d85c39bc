/*
 * quant_ref.h — the reference (scalar, portable) conversions between float
 * rows and the quantized block types of quants.h. Internal to the library.
 *
 * dequantize_row_<type> turns n weights (n a multiple of the block size) into
 * floats; its results are bit-identical to gguf-py's numpy dequantizers (the
 * float32 operations are done in the same order, and the build forbids FMA
 * contraction). quantize_row_<type>_ref is the "reference" quantizer of the
 * GGUF ecosystem: the output is byte-compatible with llama.cpp's
 * quantize_row_*_ref, which is also what gguf-py's numpy quantizers
 * reproduce for the legacy types. The kernels call the Q8_0 / Q8_1 / Q8_K
 * quantizers to prepare activations.
 *
 * The functions have the to_float_fn / from_float_fn signatures of tensor.h,
 * so they go straight into the type traits table. They never read or write
 * past n weights and have no failure mode.
 */
#ifndef KVIK_TENSOR_QUANT_REF_H
#define KVIK_TENSOR_QUANT_REF_H

#include <stdint.h>
#include <string.h>

#include "tensor/quants.h"

/* ---- legacy 32-weight blocks (quant_legacy.c) ----------------------- */

void dequantize_row_q4_0(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q4_1(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q5_0(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q5_1(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q8_0(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q8_1(const void *restrict x, float *restrict y, int64_t n);

void quantize_row_q4_0_ref(const float *restrict x, void *restrict y, int64_t n);
void quantize_row_q4_1_ref(const float *restrict x, void *restrict y, int64_t n);
void quantize_row_q5_0_ref(const float *restrict x, void *restrict y, int64_t n);
void quantize_row_q5_1_ref(const float *restrict x, void *restrict y, int64_t n);
void quantize_row_q8_0_ref(const float *restrict x, void *restrict y, int64_t n);
/* Also sets each block's s = fp16(d * sum(qs)), with d before rounding. */
void quantize_row_q8_1_ref(const float *restrict x, void *restrict y, int64_t n);

/* ---- K-quants, 256-weight super-blocks (quant_k.c) ------------------ */

void dequantize_row_q2_K(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q3_K(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q4_K(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q5_K(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q6_K(const void *restrict x, float *restrict y, int64_t n);
void dequantize_row_q8_K(const void *restrict x, float *restrict y, int64_t n);

void quantize_row_q2_K_ref(const float *restrict x, void *restrict y, int64_t n);
void quantize_row_q3_K_ref(const float *restrict x, void *restrict y, int64_t n);
void quantize_row_q4_K_ref(const float *restrict x, void *restrict y, int64_t n);
void quantize_row_q5_K_ref(const float *restrict x, void *restrict y, int64_t n);
void quantize_row_q6_K_ref(const float *restrict x, void *restrict y, int64_t n);
/* d = max|x| / 127 as a float (sign of the largest-magnitude weight,
 * negated); bsums[j] = sum of qs[16j .. 16j+15]. */
void quantize_row_q8_K_ref(const float *restrict x, void *restrict y, int64_t n);

/* ---- helpers shared by both files ----------------------------------- */

/*
 * Round to the nearest integer, ties to even, for |v| < 2^22: adding
 * 1.5 * 2^23 puts the integer part in the low mantissa bits. This is the
 * rounding the reference K-quantizers are defined with; for larger or
 * non-finite v it returns a deterministic (meaningless) value without
 * undefined behaviour, as the reference does.
 */
static inline int quant_nearest_int(float v) {
    float f = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/*
 * (int)v truncated toward zero, defined for every float: out-of-range values
 * and NaN give INT32_MIN, as x86's cvttss2si does. The reference quantizers
 * convert floats with C casts; for the finite inputs they are meant for the
 * result is the same, without the cast's undefined behaviour on the rest.
 */
static inline int32_t quant_trunc_int(float v) {
    if (v > -2147483648.0f && v < 2147483648.0f) return (int32_t)v;
    return INT32_MIN;
}

#endif /* KVIK_TENSOR_QUANT_REF_H */
