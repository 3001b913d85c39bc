/*
 * kernels.h — internal declarations shared by the per-ISA kernel files and
 * the dispatcher. Not part of any public interface.
 *
 * Each ISA file fills one struct tensor_kernels. The scalar table is the
 * reference: every SIMD kernel must agree with it up to float reduction
 * order (tests/test_kernels.c).
 */
#ifndef KVIK_TENSOR_KERNELS_H
#define KVIK_TENSOR_KERNELS_H

#include "tensor/tensor.h"

void tensor_kernels_init_scalar(struct tensor_kernels *k);
#ifndef KVIK_NO_SIMD
void tensor_kernels_init_avx2(struct tensor_kernels *k);
void tensor_kernels_init_avx512(struct tensor_kernels *k);
void tensor_kernels_init_amx(struct tensor_kernels *k); /* on top of a copy of the AVX-512 table */
#endif

/* All 65536 half-precision values as floats (filled before any table is
 * handed out). */
extern float tensor_fp16_table[1 << 16];

/* Scalar vec_dot kernels (reference). */
void vec_dot_f32_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_f16_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_bf16_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q4_0_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q4_1_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q5_0_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q5_1_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q8_0_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q2_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q3_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q4_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q5_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);
void vec_dot_q6_K_scalar(int64_t n, float *restrict s, const void *restrict x, const void *restrict y);

void attn_head_scalar(int hd, const float *restrict q, const struct attn_span *spans, int n_spans, size_t stride,
                      float scale, float *restrict scores, float *restrict out);

/* Q3_K's 16 six-bit scales, unpacked and re-centred to -32..31. */
static inline void q3_K_scales(const uint8_t *q, int8_t out[16]) {
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? (q[i] & 0xF) : (q[i - 8] >> 4);
        int hi = (q[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        out[i] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

#endif /* KVIK_TENSOR_KERNELS_H */
