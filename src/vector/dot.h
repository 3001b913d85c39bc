/*
 * dot.h — the AVX-512 dot products of the vector store (dot_avx512.c),
 * for dot.c to choose from. Each takes any n >= 0.
 */
#ifndef KVIK_VECTOR_DOT_H
#define KVIK_VECTOR_DOT_H

#include <stdint.h>

#include "base/base.h"

float vec_dot_f32_avx512(const float *a, const float *b, int n);
float vec_dot_f16_avx512(const float *q, const uint16_t *v, int n);
float vec_dot_i8_avx512(const float *q, const int8_t *v, int n);
int32_t vec_dot_u8i8_vnni(const uint8_t *a, const int8_t *b, int n);

#endif /* KVIK_VECTOR_DOT_H */
