/*
 * dot.c — the vector store's dot products: portable versions (eight
 * partial sums, combined pairwise) and the choice of the AVX-512 ones
 * (dot_avx512.c) where the CPU and OS run them.
 */
#include "vector/dot.h"

#include "vector/vector.h"

static float dot_f32_ref(const float *a, const float *b, int n) {
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    for (; i < n; i++) s[i % 8] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static float dot_f16_ref(const float *q, const uint16_t *v, int n) {
    float s[8] = {0};
    for (int i = 0; i < n; i++) s[i % 8] += q[i] * fp16_to_fp32(v[i]);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static float dot_i8_ref(const float *q, const int8_t *v, int n) {
    float s[8] = {0};
    for (int i = 0; i < n; i++) s[i % 8] += q[i] * (float)v[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static int32_t dot_u8i8_ref(const uint8_t *a, const int8_t *b, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += (int32_t)a[i] * (int32_t)b[i];
    return s;
}

static bool use_vnni(void) {
#if defined(__x86_64__) && !defined(KVIK_NO_SIMD)
    static int have = -1;
    if (have < 0) {
        const struct cpu_features *c = cpu_features_get();
        have = c->avx512f && c->avx512bw && c->avx512vnni && c->os_avx512;
    }
    return have;
#else
    return false;
#endif
}

static bool use_avx512(void) {
#if defined(__x86_64__) && !defined(KVIK_NO_SIMD)
    static int have = -1;
    if (have < 0) {
        const struct cpu_features *c = cpu_features_get();
        have = c->avx512f && c->avx512bw && c->os_avx512 && c->f16c;
    }
    return have;
#else
    return false;
#endif
}

float vec_dot_f32(const float *a, const float *b, int n) {
#if defined(__x86_64__) && !defined(KVIK_NO_SIMD)
    if (use_avx512()) return vec_dot_f32_avx512(a, b, n);
#endif
    return dot_f32_ref(a, b, n);
}

float vec_dot_f16(const float *q, const uint16_t *v, int n) {
#if defined(__x86_64__) && !defined(KVIK_NO_SIMD)
    if (use_avx512()) return vec_dot_f16_avx512(q, v, n);
#endif
    return dot_f16_ref(q, v, n);
}

float vec_dot_i8(const float *q, const int8_t *v, int n) {
#if defined(__x86_64__) && !defined(KVIK_NO_SIMD)
    if (use_avx512()) return vec_dot_i8_avx512(q, v, n);
#endif
    return dot_i8_ref(q, v, n);
}

int32_t vec_dot_u8i8(const uint8_t *a, const int8_t *b, int n) {
#if defined(__x86_64__) && !defined(KVIK_NO_SIMD)
    if (use_vnni()) return vec_dot_u8i8_vnni(a, b, n);
#endif
    return dot_u8i8_ref(a, b, n);
}
