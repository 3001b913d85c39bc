/*
 * quant_rows_cases.h — the inputs of the row-quantizer golden test: float
 * rows and importance weights made from a fixed PRNG with integer and
 * float32 +, -, * only (no libm), so any C compiler on any machine makes
 * the same bits. Both tests/test_quantize_rows.c and the golden generator
 * scripts/gen_quant_golden_rows.c (built against llama.cpp's ggml) include
 * this header; tests/data/quant_rows_golden.txt holds the sha256 of what
 * ggml_quantize_chunk wrote for every case.
 *
 * PRNG: splitmix64. A case's rows are seeded with 0x9E3779B97F4A7C15 *
 * (case index + 1); its importance weights with that seed xor 0x1A7.
 * uniform() = (next >> 40) * 2^-24, in [0, 1). gauss() = (sum of four
 * uniform() - 2) * sqrt(3): mean 0, variance 1, within +-3.47.
 *
 * Distributions (per weight k of the case's n_rows * n_per_row):
 *   gauss    0.02 * g
 *   outlier  0.02 * g, one weight in 64 times 8 + 56 * u
 *   zeros    0.05 * g; every 5th 32-block and every 3rd 256-block zero
 *   const    per 32-block one value 0.5 * g (16-blocks alternate with its
 *            negation in odd 256-blocks)
 *   tiny     g * 1e-17, 1e-12 or 1e-7 by 32-block (below, near and above
 *            the quantizers' 1e-15 group threshold)
 *   huge     3000 * g, one weight in 32 times 20 (up to ~2e5: F16 overflows)
 *   negative -0.05 * |g|
 *   sparse   0 but one weight in 16: 0.1 * g
 *   uniform  0.1 * u (all non-negative)
 *   ramp     (k % 256 - 128) * 1e-3 (exactly representable steps)
 *   signs    by 32-block in turn: only +0 and -0; 0.03 * |g| with an eighth
 *            +-0; +-0.25 (ties of the largest magnitude) among 0.1 * g;
 *            -0.03 * |g| with an eighth +-0 (the sign of each zero random)
 * Importance weights (one per column):
 *   dense    (0.05 + u)^2 * 10
 *   holes    dense, but every 7th column, columns 32..63 and, for rows of
 *            256 or more, columns 192..207 zero
 */
#ifndef KVIK_TESTS_QUANT_ROWS_CASES_H
#define KVIK_TESTS_QUANT_ROWS_CASES_H

#include <stdint.h>

enum qr_dist {
    QR_GAUSS, QR_OUTLIER, QR_ZEROS, QR_CONST, QR_TINY, QR_HUGE, QR_NEGATIVE, QR_SPARSE, QR_UNIFORM,
    QR_RAMP, QR_SIGNS, QR_DIST_COUNT
};

static const char *const QR_DIST_NAMES[QR_DIST_COUNT] = {
    "gauss", "outlier", "zeros", "const", "tiny", "huge", "negative", "sparse", "uniform", "ramp", "signs",
};

enum qr_weights { QR_W_NONE, QR_W_DENSE, QR_W_HOLES, QR_W_COUNT };

static const char *const QR_WEIGHT_NAMES[QR_W_COUNT] = {"none", "dense", "holes"};

struct qr_case {
    enum qr_dist dist;
    int n_rows;
    int n_per_row;
};

/* Row lengths: multiples of 256 for every type, and 32*k (k not a multiple
 * of 8) for the legacy and float types only. */
static const struct qr_case QR_CASES[] = {
    {QR_GAUSS, 4, 256},    {QR_GAUSS, 2, 768},   {QR_GAUSS, 3, 96},     {QR_OUTLIER, 2, 512},
    {QR_OUTLIER, 2, 160},  {QR_ZEROS, 3, 768},   {QR_CONST, 2, 512},    {QR_CONST, 1, 64},
    {QR_TINY, 2, 512},     {QR_HUGE, 2, 256},    {QR_HUGE, 1, 32},      {QR_NEGATIVE, 2, 256},
    {QR_NEGATIVE, 2, 32},  {QR_SPARSE, 2, 512},  {QR_UNIFORM, 2, 256},  {QR_UNIFORM, 1, 224},
    {QR_RAMP, 1, 1024},    {QR_SIGNS, 8, 256},   {QR_SIGNS, 1, 96},
};
#define QR_N_CASES (int)(sizeof QR_CASES / sizeof QR_CASES[0])

/* The types checked, by GGUF name. */
static const char *const QR_TYPES[] = {
    "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
};
#define QR_N_TYPES (int)(sizeof QR_TYPES / sizeof QR_TYPES[0])

/* Whether type name t (QR_TYPES) is a K-quant: rows must hold 256*k. */
static inline int qr_type_is_k(const char *t) { return t[0] == 'Q' && t[2] == '_' && t[3] == 'K'; }

static inline uint64_t qr_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline float qr_uniform(uint64_t *s) { return (float)(qr_next(s) >> 40) * 0x1p-24f; }

static inline float qr_gauss(uint64_t *s) {
    float u = qr_uniform(s);
    u += qr_uniform(s);
    u += qr_uniform(s);
    u += qr_uniform(s);
    return (u - 2.0f) * 1.7320508f;
}

static inline float qr_abs(float v) { return v < 0 ? -v : v; }

/* Fills x with case c's n_rows * n_per_row weights. */
static inline void qr_fill_rows(int c, float *x) {
    const struct qr_case *k = &QR_CASES[c];
    const int64_t n = (int64_t)k->n_rows * k->n_per_row;
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(c + 1);
    float cval = 0;
    for (int64_t i = 0; i < n; i++) {
        const float g = qr_gauss(&s);
        const float u = qr_uniform(&s);
        float v = 0;
        switch (k->dist) {
        case QR_GAUSS: v = 0.02f * g; break;
        case QR_OUTLIER: v = 0.02f * g * ((qr_next(&s) & 63) == 0 ? 8.0f + 56.0f * u : 1.0f); break;
        case QR_ZEROS: v = (i / 32) % 5 == 1 || (i / 256) % 3 == 2 ? 0.0f : 0.05f * g; break;
        case QR_CONST:
            if (i % 32 == 0) cval = 0.5f * g;
            v = (i / 256) % 2 == 1 && (i / 16) % 2 == 1 ? -cval : cval;
            break;
        case QR_TINY: v = g * ((i / 32) % 3 == 0 ? 1e-17f : (i / 32) % 3 == 1 ? 1e-12f : 1e-7f); break;
        case QR_HUGE: v = 3000.0f * g * ((qr_next(&s) & 31) == 0 ? 20.0f : 1.0f); break;
        case QR_NEGATIVE: v = -0.05f * qr_abs(g); break;
        case QR_SPARSE: v = (qr_next(&s) & 15) == 0 ? 0.1f * g : 0.0f; break;
        case QR_UNIFORM: v = 0.1f * u; break;
        case QR_RAMP: v = (float)(i % 256 - 128) * 1e-3f; break;
        case QR_SIGNS: {
            const uint64_t r = qr_next(&s);
            const float zero = r & 1 ? -0.0f : 0.0f;
            switch ((i / 32) % 4) {
            case 0: v = zero; break;
            case 1: v = (r & 14) == 0 ? zero : 0.03f * qr_abs(g); break;
            case 2: v = u < 0.3f ? (r & 2 ? 0.25f : -0.25f) : 0.1f * g; break;
            default: v = (r & 14) == 0 ? zero : -0.03f * qr_abs(g); break;
            }
            break;
        }
        default: break;
        }
        x[i] = v;
    }
}

/* Fills w with case c's n_per_row importance weights of kind wk (not NONE). */
static inline void qr_fill_weights(int c, enum qr_weights wk, float *w) {
    const int n = QR_CASES[c].n_per_row;
    uint64_t s = (0x9E3779B97F4A7C15ull * (uint64_t)(c + 1)) ^ 0x1A7u;
    for (int i = 0; i < n; i++) {
        const float a = 0.05f + qr_uniform(&s);
        float v = a * a * 10.0f;
        if (wk == QR_W_HOLES && (i % 7 == 3 || (i >= 32 && i < 64) || (n >= 256 && i >= 192 && i < 208)))
            v = 0.0f;
        w[i] = v;
    }
}

#endif /* KVIK_TESTS_QUANT_ROWS_CASES_H */
