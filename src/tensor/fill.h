/*
 * fill.h — pseudo-random weight matrices (tests, benchmarks, synthetic
 * models). See fill.c for what the two modes produce.
 */
#ifndef KVIK_TENSOR_FILL_H
#define KVIK_TENSOR_FILL_H

#include "tensor/tensor.h"

enum tensor_fill {
    TENSOR_FILL_QUANTIZED, /* quantize random floats (fast: rows repeat) */
    TENSOR_FILL_BITS,      /* random quant bits, sane random scales */
};

/* Fills rows x cols weights of `type`, rows row_bytes apart. Deterministic
 * for a given seed. KVIK_ERR_INVALID_ARG on an unknown type or bad shape. */
kvik_status tensor_fill_random(int type, void *dst, int64_t rows, int64_t cols, size_t row_bytes,
                               enum tensor_fill mode, uint64_t seed);

/* Byte offsets of the f16 scale fields within one block of `type` (Q8_K's
 * float scale is not one); returns how many (0..2). */
int tensor_scale_fields(int type, int offsets[2]);

#endif /* KVIK_TENSOR_FILL_H */
