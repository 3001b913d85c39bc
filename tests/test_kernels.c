/*
 * test_kernels.c — every vec_dot kernel of every ISA against references.
 *
 * 1. The scalar kernel against a double-precision dot product of the
 *    dequantized weights and activations (to_float, itself checked bit for
 *    bit against the gguf package in test_types.c).
 * 2. Each SIMD kernel against the scalar kernel on the same bytes.
 * 3. tensor_matmul against direct vec_dot calls, bit for bit, at several
 *    thread counts and batch sizes (this is also the batch-invariance check).
 *
 * Tolerance. Both sides of a comparison sum the same per-block terms in a
 * different order (the scalar kernel block by block; SIMD kernels in vector
 * lanes, with min/offset terms summed apart). Summing m terms in any order
 * is within (m - 1)·eps·Σ|term| of the exact sum, so two orders differ by at
 * most 2(m - 1)·eps·Σ|term|; each term carries a few more roundings from its
 * scale products. We bound Σ|term| by Σ|x_i|·|y_i| over the dequantized
 * values and allow 4·(m + 8)·eps·Σ|x_i y_i| — the factor 4 covers the split
 * of K-quant terms into a scale part and a min part of similar magnitude.
 */
#include <float.h>
#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>

#include "tensor/fill.h"
#include "tensor/kernels.h"
#include "tensor/quants.h"
#include "test.h"

static const int k_weight_types[] = {
    TENSOR_TYPE_F32,  TENSOR_TYPE_F16,  TENSOR_TYPE_BF16, TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1,
    TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K,
    TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K,
};
#define N_WEIGHT_TYPES ((int)(sizeof k_weight_types / sizeof k_weight_types[0]))

/* A weight row of n values: random bits in the quants (every pattern is
 * legal) with finite, moderate scales; random values for float types. */
static void *random_weights(int type, int64_t n, uint64_t *rng) {
    size_t bytes = tensor_row_size(type, n);
    uint8_t *buf = mem_alloc_aligned(bytes);
    tensor_fill_random(type, buf, 1, n, bytes, TENSOR_FILL_BITS, test_rand_u64(rng));
    return buf;
}

static float *random_floats(int64_t n, uint64_t *rng) {
    float *x = mem_alloc_aligned((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = test_rand_uniform(rng, -1, 1);
    if (n > 3) x[n / 3] = 12.5f; /* an outlier, as real activations have */
    return x;
}

/* Activations for a weight type: floats quantized to its vec_dot_type. */
static void *make_activations(int type, const float *xf, int64_t n) {
    int vt = tensor_type_traits(type)->vec_dot_type;
    if (vt == TENSOR_TYPE_F32) {
        float *c = mem_alloc_aligned((size_t)n * sizeof(float));
        memcpy(c, xf, (size_t)n * sizeof(float));
        return c;
    }
    void *q = mem_alloc_aligned(tensor_row_size(vt, n));
    tensor_kernels_get(TENSOR_ISA_SCALAR)->quantize[vt](xf, q, n);
    return q;
}

static double *dequantize(int type, const void *x, int64_t n) {
    float *f = mem_alloc_aligned((size_t)n * sizeof(float));
    double *d = mem_alloc_aligned((size_t)n * sizeof(double));
    if (type == TENSOR_TYPE_F32) memcpy(f, x, (size_t)n * sizeof(float));
    else tensor_type_traits(type)->to_float(x, f, n);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    mem_free(f);
    return d;
}

static double tolerance(int type, int64_t n, double abs_dot) {
    int64_t m = n / tensor_type_traits(type)->block_size;
    return 4.0 * (double)(m + 8) * FLT_EPSILON * abs_dot + 1e-30;
}

static const int64_t k_sizes_float[] = {1, 7, 8, 15, 16, 17, 33, 100, 1000, 4099};
static const int64_t k_blocks[] = {1, 2, 3, 7, 16, 65};

/* Runs check(type, n) over the sizes that make sense for the type. */
static void for_each_case(void (*check)(int type, int64_t n, uint64_t *rng)) {
    uint64_t rng = 0x1234567;
    for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        int type = k_weight_types[ti];
        const struct type_traits *tt = tensor_type_traits(type);
        if (!tt || !tt->to_float) {
            test_fail(__FILE__, __LINE__, "type %d has no traits/to_float", type);
            continue;
        }
        if (tt->block_size == 1) {
            for (size_t i = 0; i < sizeof k_sizes_float / sizeof *k_sizes_float; i++)
                check(type, k_sizes_float[i], &rng);
        } else {
            for (size_t i = 0; i < sizeof k_blocks / sizeof *k_blocks; i++)
                for (int rep = 0; rep < 4; rep++) check(type, k_blocks[i] * tt->block_size, &rng);
        }
    }
}

/* Q4_1/Q5_1 x Q8_1 use the activation block sum s, stored as f16, for the
 * min term m * sum(y): that rounding (half an f16 ulp, 2^-11 relative) is
 * part of the format, not of the kernel, so the bound against the exact dot
 * grows by sum_b |m_b * s_b| * 2^-11. */
static double q8_1_sum_rounding(int type, const void *w, const void *a, int64_t n) {
    if (type != TENSOR_TYPE_Q4_1 && type != TENSOR_TYPE_Q5_1) return 0;
    const struct type_traits *tt = tensor_type_traits(type);
    const block_q8_1 *y = a;
    double bound = 0;
    for (int64_t b = 0; b < n / QK; b++) {
        uint16_t m;
        memcpy(&m, (const uint8_t *)w + (size_t)b * tt->type_size + 2, 2);
        bound += fabs((double)fp16_to_fp32(m) * fp16_to_fp32(y[b].s)) * ldexp(1.0, -11);
    }
    return bound;
}

static void check_scalar_vs_double(int type, int64_t n, uint64_t *rng) {
    void *w = random_weights(type, n, rng);
    float *xf = random_floats(n, rng);
    void *a = make_activations(type, xf, n);
    double *wd = dequantize(type, w, n);
    double *ad = dequantize(tensor_type_traits(type)->vec_dot_type, a, n);
    double exact = 0, abs_dot = 0;
    for (int64_t i = 0; i < n; i++) {
        exact += wd[i] * ad[i];
        abs_dot += fabs(wd[i] * ad[i]);
    }
    float got;
    tensor_kernels_get(TENSOR_ISA_SCALAR)->vec_dot[type](n, &got, w, a);
    double tol = tolerance(type, n, abs_dot) + q8_1_sum_rounding(type, w, a, n);
    CHECK_MSG(fabs(got - exact) <= tol, "%s n=%lld: scalar %.9g vs dequantized %.9g (tol %.3g)",
              tensor_type_name(type), (long long)n, got, exact, tol);
    mem_free(w), mem_free(xf), mem_free(a), mem_free(wd), mem_free(ad);
}

TEST(vec_dot_scalar_matches_dequantized_dot) { for_each_case(check_scalar_vs_double); }

static enum tensor_isa g_isa;

static void check_simd_vs_scalar(int type, int64_t n, uint64_t *rng) {
    const struct tensor_kernels *k = tensor_kernels_get(g_isa);
    void *w = random_weights(type, n, rng);
    float *xf = random_floats(n, rng);
    void *a = make_activations(type, xf, n);
    double *wd = dequantize(type, w, n);
    double *ad = dequantize(tensor_type_traits(type)->vec_dot_type, a, n);
    double abs_dot = 0;
    for (int64_t i = 0; i < n; i++) abs_dot += fabs(wd[i] * ad[i]);
    float ref, got;
    tensor_kernels_get(TENSOR_ISA_SCALAR)->vec_dot[type](n, &ref, w, a);
    if (!k->vec_dot[type]) {
        test_fail(__FILE__, __LINE__, "%s: no %s kernel", k->name, tensor_type_name(type));
    } else {
        k->vec_dot[type](n, &got, w, a);
        double tol = tolerance(type, n, abs_dot);
        CHECK_MSG(fabs((double)got - ref) <= tol, "%s %s n=%lld: %.9g vs scalar %.9g (tol %.3g)",
                  k->name, tensor_type_name(type), (long long)n, got, ref, tol);
    }
    mem_free(w), mem_free(xf), mem_free(a), mem_free(wd), mem_free(ad);
}

static void simd_vs_scalar(enum tensor_isa isa) {
    if (!tensor_kernels_get(isa)) {
        test_skip("this CPU lacks the instruction set");
        return;
    }
    g_isa = isa;
    for_each_case(check_simd_vs_scalar);
}

TEST(vec_dot_avx2_matches_scalar) { simd_vs_scalar(TENSOR_ISA_AVX2); }
TEST(vec_dot_avx512_matches_scalar) { simd_vs_scalar(TENSOR_ISA_AVX512); }
TEST(vec_dot_amx_matches_scalar) { simd_vs_scalar(TENSOR_ISA_AMX); }

TEST(vec_dot_signed_extremes) {
    /* Q8_0 weights of -128 and activations at ±127: the sign trick must not
     * overflow. Every SIMD table must give the exact integer result. */
    block_q8_0 w[4], a[4];
    for (int b = 0; b < 4; b++) {
        w[b].d = fp32_to_fp16(1.0f);
        a[b].d = fp32_to_fp16(1.0f);
        for (int i = 0; i < QK; i++) {
            w[b].qs[i] = (int8_t)((i & 1) ? -128 : 127);
            a[b].qs[i] = (int8_t)((i & 2) ? -127 : 127);
        }
    }
    int64_t expect = 0;
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < QK; i++) expect += (int64_t)w[b].qs[i] * a[b].qs[i];
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        float got;
        k->vec_dot[TENSOR_TYPE_Q8_0](4 * QK, &got, w, a);
        CHECK_MSG(got == (float)expect, "%s: %g != %lld", k->name, got, (long long)expect);
    }
}

TEST(vec_dot_q4_1_extremes) {
    /* Q4_1 nibbles of 15 (unsigned in the AMX products) against activations
     * at ±127, d = 1, m = 0: every table must give the exact integer. */
    block_q4_1 w[4];
    block_q8_1 a[4];
    for (int b = 0; b < 4; b++) {
        w[b].d = fp32_to_fp16(1.0f);
        w[b].m = fp32_to_fp16(0.0f);
        memset(w[b].qs, 0xFF, sizeof w[b].qs);
        a[b].d = fp32_to_fp16(1.0f);
        a[b].s = fp32_to_fp16(0.0f); /* m = 0: the min term vanishes whatever s is */
        for (int i = 0; i < QK; i++) a[b].qs[i] = (int8_t)((i + b) % 5 ? 127 : -127);
    }
    int64_t expect = 0;
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < QK; i++) expect += 15 * (int64_t)a[b].qs[i];
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        float got;
        k->vec_dot[TENSOR_TYPE_Q4_1](4 * QK, &got, w, a);
        CHECK_MSG(got == (float)expect, "%s: %g != %lld", k->name, got, (long long)expect);
    }
}

/* Every table's activation quantizers against the scalar reference, byte for
 * byte (a kernel's bits depend on them): random rows with an outlier, and
 * blocks made to hit roundf's ties (d = 1: x = k + 0.5), values just below a
 * tie, zeros, signed zeros, subnormals (1 / d overflows), inf and NaN,
 * in runs of sixteen blocks (the 512-bit quantizers' unit) with and without
 * a NaN block. */
TEST(activation_quantizers_equal_reference) {
    enum { N = 12 * QK_K };
    static const int types[] = {TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q8_1, TENSOR_TYPE_Q8_K, TENSOR_TYPE_F16};
    uint64_t rng = 4242;
    float *x = random_floats(N, &rng);
    for (int i = 0; i < QK; i++) x[i] = (float)(i - 16) + 0.5f; /* ties; amax 15.5 */
    x[QK] = 127.0f;                                            /* d = 1 exactly */
    for (int i = 1; i < QK; i++) x[QK + i] = (i % 2 ? 1.0f : -1.0f) * ((float)(i * 4 % 127) + 0.5f);
    for (int i = 0; i < QK; i++) x[2 * QK + i] = nextafterf((float)i + 0.5f, 0.0f); /* just below ties */
    x[2 * QK] = 127.0f;
    for (int i = 0; i < QK; i++) x[3 * QK + i] = (i & 1) ? -0.0f : 0.0f;
    for (int i = 0; i < QK; i++) x[4 * QK + i] = (float)(i - 15) * 1e-44f; /* subnormal: d/id extremes */
    x[5 * QK + 3] = INFINITY;
    x[6 * QK + 7] = -INFINITY;
    x[7 * QK + 5] = NAN;
    x[8 * QK + 31] = NAN, x[8 * QK] = 3.0e38f;
    for (int i = 0; i < QK; i++) x[9 * QK + i] = -2.0e38f + (float)i * 1.0e37f;
    /* the same blocks but the NaN ones again from block 16 and from block 33
     * (runs of sixteen blocks without a NaN, and not aligned to sixteen) */
    for (int r = 16; r <= 33; r += 17)
        for (int b = 0; b < 10; b++)
            if (b != 7 && b != 8) memcpy(x + (r + b) * QK, x + b * QK, sizeof(float) * QK);
    const struct tensor_kernels *ref = tensor_kernels_get(TENSOR_ISA_SCALAR);
    for (int isa = 1; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
            size_t bytes = tensor_row_size(types[i], N);
            uint8_t *a = mem_alloc_aligned(bytes), *b = mem_alloc_aligned(bytes);
            memset(a, 0xAA, bytes), memset(b, 0x55, bytes);
            ref->quantize[types[i]](x, a, N);
            if (k->quantize[types[i]]) k->quantize[types[i]](x, b, N); /* F16 below AVX-512: none */
            else memcpy(b, a, bytes);
            CHECK_MSG(memcmp(a, b, bytes) == 0, "%s %s quantizer differs from the reference", k->name,
                      tensor_type_name(types[i]));
            mem_free(a), mem_free(b);
        }
    }
    mem_free(x);
}

/* Q8_K's quantizer on finite super-blocks (the case the SIMD quantizers
 * take themselves; a value that is not finite sends its super-block to the
 * reference): the largest magnitude twice with both signs, in either
 * order (the first decides the sign of the scale), d = 1 exactly and
 * values on ties (k + 0.5) and just below, all zeros of both signs,
 * subnormals, and random values with an outlier. Byte for byte against the
 * reference, every table. */
TEST(q8_K_quantizer_equals_reference_on_ties_and_signs) {
    enum { NSB = 7, N = NSB * QK_K };
    uint64_t rng = 99;
    float *x = random_floats(N, &rng);
    for (int i = 0; i < QK_K; i++) x[i] = (float)(i % 64 - 32) + 0.5f;
    x[10] = -127.0f, x[200] = 127.0f; /* iscale = 1: the quants are x rounded, ties to even */
    for (int i = 0; i < QK_K; i++) x[QK_K + i] = nextafterf((float)(i % 120) + 0.5f, 0.0f);
    x[QK_K + 5] = 127.0f, x[QK_K + 6] = -127.0f;
    for (int i = 0; i < QK_K; i++) x[2 * QK_K + i] = (i & 1) ? -0.0f : 0.0f;
    for (int i = 0; i < QK_K; i++) x[3 * QK_K + i] = (float)(i % 31 - 15) * 1e-44f;
    x[4 * QK_K + 77] = -40.0f;
    for (int i = 0; i < QK_K; i++) x[5 * QK_K + i] = (float)(i % 17) * 0.25f - 2.0f; /* max first at its lowest */
    const struct tensor_kernels *ref = tensor_kernels_get(TENSOR_ISA_SCALAR);
    size_t bytes = tensor_row_size(TENSOR_TYPE_Q8_K, N);
    uint8_t *a = mem_alloc_aligned(bytes), *b = mem_alloc_aligned(bytes);
    ref->quantize[TENSOR_TYPE_Q8_K](x, a, N);
    for (int isa = 1; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        memset(b, 0x55, bytes);
        k->quantize[TENSOR_TYPE_Q8_K](x, b, N);
        for (int sb = 0; sb < NSB; sb++)
            CHECK_MSG(memcmp(a + sb * sizeof(block_q8_K), b + sb * sizeof(block_q8_K), sizeof(block_q8_K)) == 0,
                      "%s Q8_K super-block %d differs from the reference", k->name, sb);
    }
    mem_free(a), mem_free(b), mem_free(x);
}

/* ---- every kernel of a table against its vec_dot, bit for bit ---------- */

enum { CROSS_ROWS = 19, CROSS_TOKS = 21 }; /* a whole row group / token tile and a partial one */

static bool same_bits(const struct tensor_kernels *k, const char *form, int type, int64_t n, int64_t r, int64_t t,
                      float got, float ref) {
    if (f32_to_bits(got) == f32_to_bits(ref)) return true;
    test_fail(__FILE__, __LINE__, "%s %s %s n=%lld row %lld tok %lld: %.9g != vec_dot %.9g", k->name, form,
              tensor_type_name(type), (long long)n, (long long)r, (long long)t, got, ref);
    return false;
}

/* The two-row, tile and whole-product (rows_product) forms of one table
 * on CROSS_ROWS weight rows x CROSS_TOKS activation rows, each element
 * against the table's single-row vec_dot on the same two rows. */
static void check_forms_on(const struct tensor_kernels *k, int type, int64_t n, const uint8_t *w, const uint8_t *a);

static void check_table_forms(const struct tensor_kernels *k, int type, int64_t n, uint64_t *rng) {
    const struct type_traits *tt = tensor_type_traits(type);
    int vt = tt->vec_dot_type;
    size_t rb = tensor_row_size(type, n), ab = vt == TENSOR_TYPE_F32 ? (size_t)n * sizeof(float) : tensor_row_size(vt, n);
    uint8_t *w = mem_alloc_aligned(rb * CROSS_ROWS), *a = mem_alloc_aligned(ab * CROSS_TOKS);
    tensor_fill_random(type, w, CROSS_ROWS, n, rb, TENSOR_FILL_BITS, test_rand_u64(rng));
    for (int t = 0; t < CROSS_TOKS; t++) {
        float *xf = random_floats(n, rng);
        void *row = make_activations(type, xf, n);
        memcpy(a + (size_t)t * ab, row, ab);
        mem_free(row), mem_free(xf);
    }
    check_forms_on(k, type, n, w, a);
    mem_free(w), mem_free(a);
}

/* The forms of table k on the CROSS_ROWS weight rows w and CROSS_TOKS
 * activation rows a (rows of n values, one after the other). */
static void check_forms_on(const struct tensor_kernels *k, int type, int64_t n, const uint8_t *w, const uint8_t *a) {
    const struct type_traits *tt = tensor_type_traits(type);
    int vt = tt->vec_dot_type;
    size_t rb = tensor_row_size(type, n), ab = vt == TENSOR_TYPE_F32 ? (size_t)n * sizeof(float) : tensor_row_size(vt, n);
    float ref[CROSS_TOKS][CROSS_ROWS], got[CROSS_TOKS][CROSS_ROWS];
    for (int t = 0; t < CROSS_TOKS; t++)
        for (int r = 0; r < CROSS_ROWS; r++) k->vec_dot[type](n, &ref[t][r], w + (size_t)r * rb, a + (size_t)t * ab);
    bool ok = true;
    if (k->vec_dot_x2[type]) {
        for (int r = 0; r + 1 < CROSS_ROWS && ok; r += 2)
            for (int t = 0; t < CROSS_TOKS && ok; t++) {
                float out[2];
                k->vec_dot_x2[type](n, out, w + (size_t)r * rb, rb, a + (size_t)t * ab);
                ok = same_bits(k, "x2", type, n, r, t, out[0], ref[t][r]) &&
                     same_bits(k, "x2", type, n, r + 1, t, out[1], ref[t][r + 1]);
            }
    }
    if (k->vec_dot_tile[type]) {
        for (int r = 0; r + k->tile_rows <= CROSS_ROWS; r += k->tile_rows)
            for (int t = 0; t + k->tile_cols <= CROSS_TOKS; t += k->tile_cols)
                k->vec_dot_tile[type](n, &got[t][r], CROSS_ROWS, w + (size_t)r * rb, rb, a + (size_t)t * ab, ab);
        int rows = CROSS_ROWS / k->tile_rows * k->tile_rows, cols = CROSS_TOKS / k->tile_cols * k->tile_cols;
        for (int r = 0; r < rows && ok; r++)
            for (int t = 0; t < cols && ok; t++) ok = same_bits(k, "tile", type, n, r, t, got[t][r], ref[t][r]);
    }
    if (k->rows_product[type] && vt != TENSOR_TYPE_F32) {
        static const int64_t toks[] = {1, 2, 16, CROSS_TOKS};
        struct tensor_matrix m = {.type = type, .rows = CROSS_ROWS, .cols = n, .row_bytes = rb, .data = w};
        void *panel = NULL;
        /* with the table's own layout, the same bits again (a second pass) */
        for (int pass = 0; pass < (k->repack[type] ? 2 : 1) && ok; pass++) {
        if (pass == 1) {
            panel = mem_alloc_aligned(k->repack_size[type](CROSS_ROWS, n));
            k->repack[type](&m, panel);
            m.panel = panel;
        }
        for (size_t i = 0; i < sizeof toks / sizeof *toks && ok; i++) {
            int64_t nt = toks[i], g = k->rows_group;
            uint8_t *packed = mem_alloc_aligned(k->packed_size[vt](n, nt) + 64);
            /* in runs of 3 blocks, last first: each run writes only its own */
            int64_t nbk = n / tensor_type_traits(vt)->block_size;
            memset(packed, 0xA5, k->packed_size[vt](n, nt));
            for (int64_t tile = 0; tile < (nt + g - 1) / g; tile++)
                for (int64_t b0 = (nbk - 1) / 3 * 3; b0 >= 0; b0 -= 3)
                    k->pack[vt](a, ab, n, tile, b0, b0 + 3 < nbk ? b0 + 3 : nbk, nt, packed);
            /* a call per row group, then one call for all the groups (a
             * whole and a partial one) */
            for (int whole = 0; whole < 2 && ok; whole++) {
                memset(got, 0xFF, sizeof got);
                for (int64_t r0 = 0; r0 < CROSS_ROWS; r0 += whole ? CROSS_ROWS : g) {
                    int64_t r1 = !whole && r0 + g < CROSS_ROWS ? r0 + g : CROSS_ROWS;
                    CHECK(k->rows_product[type](&m, r0, r1, a, ab, packed, nt, &got[0][0], CROSS_ROWS));
                }
                for (int64_t t = 0; t < nt && ok; t++)
                    for (int r = 0; r < CROSS_ROWS && ok; r++)
                        ok = same_bits(k, nt == 1 ? (pass ? "repacked mat-vec" : "rows_product mat-vec")
                                                  : (pass ? "repacked mat-mat" : "rows_product mat-mat"),
                                       type, n, r, t, got[t][r], ref[t][r]);
            }
            mem_free(packed);
        }
        }
        mem_free(panel);
    }
}

TEST(table_kernel_forms_equal_vec_dot_bit_for_bit) {
    uint64_t rng = 0xC0FFEE;
    static const int64_t blocks32[] = {1, 3, 8, 9, 18}, blocks256[] = {1, 2, 3}, floats[] = {17, 64, 100};
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        for (int ti = 0; ti < N_WEIGHT_TYPES; ti++) {
            int type = k_weight_types[ti];
            int64_t bs = tensor_type_traits(type)->block_size;
            const int64_t *sz = bs == 1 ? floats : bs == QK ? blocks32 : blocks256;
            int nsz = bs == QK ? 5 : 3;
            for (int i = 0; i < nsz; i++) check_table_forms(k, type, (bs == 1 ? 1 : bs) * sz[i], &rng);
        }
    }
}

/* Q5_0 and Q6_K at the ends of their ranges against the ends of their
 * activations' (Q8_0: -127..127, Q8_K: -128..127), d = 1: a row's quants
 * all 0 or all the largest (Q6_K: its scales all -128 or all 127), a
 * token's activations all the lowest or all the highest (Q5_0: or mixed). Every dot is then an exact integer and so is
 * every partial sum in float, in any order; the unsigned and offset tricks
 * of the kernels must not overflow on the way. Every table's vec_dot gives
 * the integer exactly, and every form of a table its vec_dot's bits. */
TEST(q5_0_q6_K_extremes) {
    enum { NB5 = 9, NB6 = 2 };
    block_q5_0 w5[CROSS_ROWS][NB5];
    block_q8_0 a5[CROSS_TOKS][NB5];
    block_q6_K w6[CROSS_ROWS][NB6];
    block_q8_K a6[CROSS_TOKS][NB6];
    for (int r = 0; r < CROSS_ROWS; r++) {
        bool top = r % 3 != 1, neg = r % 2;
        for (int b = 0; b < NB5; b++) {
            w5[r][b].d = fp32_to_fp16(1.0f);
            memset(w5[r][b].qs, top ? 0xFF : 0, sizeof w5[r][b].qs);
            memset(w5[r][b].qh, top ? 0xFF : 0, sizeof w5[r][b].qh);
        }
        for (int b = 0; b < NB6; b++) {
            w6[r][b].d = fp32_to_fp16(1.0f);
            memset(w6[r][b].ql, top ? 0xFF : 0, sizeof w6[r][b].ql);
            memset(w6[r][b].qh, top ? 0xFF : 0, sizeof w6[r][b].qh);
            memset(w6[r][b].scales, neg ? 0x80 : 0x7F, sizeof w6[r][b].scales);
        }
    }
    for (int t = 0; t < CROSS_TOKS; t++) {
        int8_t v = t % 2 ? 127 : -128;
        for (int b = 0; b < NB5; b++) {
            a5[t][b].d = fp32_to_fp16(1.0f);
            for (int i = 0; i < QK; i++) a5[t][b].qs[i] = t % 4 == 2 ? (int8_t)(i % 3 ? -127 : 127) : v < 0 ? -127 : v;
        }
        for (int b = 0; b < NB6; b++) {
            a6[t][b].d = 1.0f;
            memset(a6[t][b].qs, (uint8_t)v, sizeof a6[t][b].qs);
            for (int j = 0; j < QK_K / 16; j++) a6[t][b].bsums[j] = (int16_t)(16 * v);
        }
    }
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        bool ok = true;
        for (int r = 0; r < CROSS_ROWS && ok; r++)
            for (int t = 0; t < CROSS_TOKS && ok; t++) {
                int64_t e5 = 0, e6 = 0;
                for (int b = 0; b < NB5; b++)
                    for (int i = 0; i < QK; i++) e5 += (int64_t)((r % 3 != 1 ? 31 : 0) - 16) * a5[t][b].qs[i];
                for (int b = 0; b < NB6; b++)
                    e6 += (int64_t)QK_K * ((r % 3 != 1 ? 63 : 0) - 32) * a6[t][b].qs[0] * (r % 2 ? -128 : 127);
                float g5, g6;
                k->vec_dot[TENSOR_TYPE_Q5_0](NB5 * QK, &g5, w5[r], a5[t]);
                k->vec_dot[TENSOR_TYPE_Q6_K](NB6 * QK_K, &g6, w6[r], a6[t]);
                CHECK_MSG(ok = g5 == (float)e5, "%s Q5_0 row %d tok %d: %.9g != %lld", k->name, r, t, g5, (long long)e5);
                CHECK_MSG(ok = g6 == (float)e6, "%s Q6_K row %d tok %d: %.9g != %lld", k->name, r, t, g6, (long long)e6);
            }
        check_forms_on(k, TENSOR_TYPE_Q5_0, NB5 * QK, (const uint8_t *)w5, (const uint8_t *)a5);
        check_forms_on(k, TENSOR_TYPE_Q6_K, NB6 * QK_K, (const uint8_t *)w6, (const uint8_t *)a6);
    }
}

/* ---- matmul over the pool ------------------------------------------ */

static void check_matmul(const struct tensor_kernels *k, int type, int64_t rows, int64_t cols,
                         int64_t n_tok, int threads) {
    uint64_t rng = (uint64_t)(type * 7919 + rows * 31 + n_tok);
    const struct type_traits *tt = tensor_type_traits(type);
    size_t row_bytes = tensor_row_size(type, cols);
    uint8_t *w = mem_alloc_aligned(row_bytes * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        void *row = random_weights(type, cols, &rng);
        memcpy(w + (size_t)r * row_bytes, row, row_bytes);
        mem_free(row);
    }
    float *x = random_floats(cols * n_tok, &rng);
    float *y = mem_alloc_aligned((size_t)(rows * n_tok) * sizeof(float));
    void *scratch = mem_alloc_aligned(tensor_matmul_scratch_size(type, cols, n_tok));
    struct kvik_err err;
    struct pool *pool = pool_create(threads, &err);
    struct tensor_matrix m = {.type = type, .rows = rows, .cols = cols, .row_bytes = row_bytes, .data = w};
    CHECK_EQ_INT(tensor_matmul(pool, k, &m, x, cols, y, rows, n_tok, scratch), KVIK_OK);
    int bad = 0;
    for (int64_t t = 0; t < n_tok && !bad; t++) {
        void *a = make_activations(type, x + t * cols, cols);
        for (int64_t r = 0; r < rows; r++) {
            float ref;
            k->vec_dot[type](cols, &ref, w + (size_t)r * row_bytes, a);
            if (f32_to_bits(ref) != f32_to_bits(y[t * rows + r])) {
                test_fail(__FILE__, __LINE__, "%s %s %lldx%lld tok %lld/%lld row %lld: %g != %g", k->name, tt->name,
                          (long long)rows, (long long)cols, (long long)t, (long long)n_tok,
                          (long long)r, y[t * rows + r], ref);
                bad = 1;
                break;
            }
        }
        mem_free(a);
    }
    /* with the table's own layout of the weights (as a model's), the same Y */
    if (k->repack[type]) {
        void *panel = mem_alloc_aligned(k->repack_size[type](rows, cols));
        float *yp = mem_alloc_aligned((size_t)(rows * n_tok) * sizeof(float));
        struct tensor_matrix mp = m;
        k->repack[type](&mp, panel);
        mp.panel = panel;
        CHECK_EQ_INT(tensor_matmul(pool, k, &mp, x, cols, yp, rows, n_tok, scratch), KVIK_OK);
        for (int64_t i = 0; i < rows * n_tok && !bad; i++)
            if (f32_to_bits(yp[i]) != f32_to_bits(y[i])) {
                test_fail(__FILE__, __LINE__, "%s %s %lldx%lld repacked, %lld tokens, element %lld: %g != %g", k->name,
                          tt->name, (long long)rows, (long long)cols, (long long)n_tok, (long long)i, yp[i], y[i]);
                bad = 1;
            }
        mem_free(panel), mem_free(yp);
    }
    /* tensor_matmul_add: the same Y, and ACC (a wider stride) plus Y */
    int64_t as = rows + 3;
    float *acc = random_floats(as * n_tok, &rng), *acc0 = mem_alloc_aligned((size_t)(as * n_tok) * sizeof(float));
    float *y2 = mem_alloc_aligned((size_t)(rows * n_tok) * sizeof(float));
    memcpy(acc0, acc, (size_t)(as * n_tok) * sizeof(float));
    CHECK_EQ_INT(tensor_matmul_add(pool, k, &m, x, cols, y2, rows, n_tok, scratch, acc, as), KVIK_OK);
    for (int64_t t = 0; t < n_tok && !bad; t++)
        for (int64_t r = 0; r < as && !bad; r++) {
            float want = r < rows ? acc0[t * as + r] + y[t * rows + r] : acc0[t * as + r];
            if (f32_to_bits(acc[t * as + r]) != f32_to_bits(want) ||
                (r < rows && f32_to_bits(y2[t * rows + r]) != f32_to_bits(y[t * rows + r]))) {
                test_fail(__FILE__, __LINE__, "%s %s matmul_add tok %lld row %lld: %g != %g", k->name, tt->name,
                          (long long)t, (long long)r, acc[t * as + r], want);
                bad = 1;
            }
        }
    CHECK_EQ_INT(tensor_matmul_add(pool, k, &m, x, cols, y2, rows, n_tok, scratch, NULL, as), KVIK_ERR_INVALID_ARG);
    mem_free(acc), mem_free(acc0), mem_free(y2);
    pool_free(pool);
    mem_free(w), mem_free(x), mem_free(y), mem_free(scratch);
}

TEST(matmul_equals_vec_dot_bit_for_bit) {
    static const int types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0,
                                TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_F16,
                                TENSOR_TYPE_F32};
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
            int64_t cols = tensor_type_traits(types[i])->block_size == 256 ? 512 : 96;
            check_matmul(k, types[i], 37, cols, 1, 2);  /* mat-vec: two-row kernels, odd tail */
            check_matmul(k, types[i], 37, cols, 3, 1);
            /* a few tokens (a draft's verification): one pass, passes of
             * several tokens with a partial last one, and just past them */
            for (int64_t n = 2; n <= 13; n++)
                if (n != 3) check_matmul(k, types[i], 37, cols, n, 2);
            check_matmul(k, types[i], 50, cols, 70, 3); /* several token blocks */
            /* mat-vec over a matrix of several 64 KiB work items, the last
             * one partial (and not a whole number of row groups) */
            int64_t big = 3 * 65536 / (int64_t)tensor_row_size(types[i], cols) + 5;
            check_matmul(k, types[i], big, cols, 1, 2);
        }
    }
}

/* One rows_product call over all the rows of w (file layout, then the
 * table's repacked layout) against the table's vec_dot, bit for bit, at nt
 * tokens; with extreme, Q4_K and Q5_K with every quant and scale byte
 * 0xFF (the largest q, scale and min, d = dmin = 1), Q6_K rows of the
 * smallest or largest q and scale, against activations all +1 or all -1. */
static void check_whole_rows_product(const struct tensor_kernels *k, int type, int64_t rows, int64_t cols, int64_t nt,
                                     bool extreme, uint64_t *rng) {
    int vt = tensor_type_traits(type)->vec_dot_type;
    size_t rb = tensor_row_size(type, cols), ab = tensor_row_size(vt, cols);
    uint8_t *w = mem_alloc_aligned(rb * (size_t)rows), *a = mem_alloc_aligned(ab * (size_t)nt);
    float *ref = mem_alloc_aligned(sizeof(float) * (size_t)(rows * nt));
    float *got = mem_alloc_aligned(sizeof(float) * (size_t)(rows * nt));
    REQUIRE(w && a && ref && got);
    const size_t bb = rb / (size_t)(cols / QK_K);
    const uint16_t one = 0x3C00;
    if (extreme && type == TENSOR_TYPE_Q6_K) { /* rows of q = 0 or 63, scales -128 or 127, d = 1 */
        for (int64_t r = 0; r < rows; r++)
            for (size_t o = 0; o < rb; o += bb) {
                block_q6_K *x = (block_q6_K *)(w + (size_t)r * rb + o);
                memset(x->ql, r % 4 < 2 ? 0x00 : 0xFF, sizeof x->ql);
                memset(x->qh, r % 4 < 2 ? 0x00 : 0xFF, sizeof x->qh);
                memset(x->scales, r % 2 ? 0x7F : 0x80, sizeof x->scales);
                memcpy(&x->d, &one, 2);
            }
    } else if (extreme) { /* Q4_K and Q5_K: d and dmin lead each block */
        memset(w, 0xFF, rb * (size_t)rows);
        for (size_t o = 0; o < rb * (size_t)rows; o += bb) {
            memcpy(w + o, &one, 2);
            memcpy(w + o + 2, &one, 2);
        }
    } else {
        tensor_fill_random(type, w, rows, cols, rb, TENSOR_FILL_BITS, test_rand_u64(rng));
    }
    for (int64_t t = 0; t < nt; t++) {
        float *xf = random_floats(cols, rng);
        if (extreme)
            for (int64_t i = 0; i < cols; i++) xf[i] = t % 2 ? -1.0f : 1.0f;
        void *row = make_activations(type, xf, cols);
        memcpy(a + (size_t)t * ab, row, ab);
        mem_free(row), mem_free(xf);
    }
    for (int64_t t = 0; t < nt; t++)
        for (int64_t r = 0; r < rows; r++) k->vec_dot[type](cols, &ref[t * rows + r], w + (size_t)r * rb, a + (size_t)t * ab);
    struct tensor_matrix m = {.type = type, .rows = rows, .cols = cols, .row_bytes = rb, .data = w};
    void *panel = NULL;
    int64_t nbk = cols / tensor_type_traits(vt)->block_size;
    uint8_t *packed = mem_alloc_aligned(k->packed_size[vt](cols, nt) + 64);
    REQUIRE(packed);
    for (int64_t tile = 0; tile < (nt + k->rows_group - 1) / k->rows_group; tile++)
        k->pack[vt](a, ab, cols, tile, 0, nbk, nt, packed);
    for (int pass = 0; pass < (k->repack[type] ? 2 : 1); pass++) {
        if (pass == 1) {
            panel = mem_alloc_aligned(k->repack_size[type](rows, cols));
            REQUIRE(panel);
            k->repack[type](&m, panel);
            m.panel = panel;
        }
        memset(got, 0xFF, sizeof(float) * (size_t)(rows * nt));
        CHECK(k->rows_product[type](&m, 0, rows, a, ab, packed, nt, got, rows));
        bool ok = true;
        for (int64_t i = 0; i < rows * nt && ok; i++)
            ok = same_bits(k, pass ? "whole repacked" : "whole rows_product", type, cols, i % rows, i / rows, got[i],
                           ref[i]);
    }
    mem_free(panel), mem_free(packed), mem_free(w), mem_free(a), mem_free(ref), mem_free(got);
}

/* The K-quants' whole products (on AMX the scales folded into the weight
 * tiles: Q4_K and Q5_K with token tiles in pairs and a last one alone,
 * Q6_K from 96 tokens) against vec_dot, bit for bit: 2, 5, 16, 17, 33
 * and 100 tokens; fewer rows than a group, one group and a partial one,
 * and enough groups of wide rows that one call splits them; and the ends
 * of the quants', scales' and mins' ranges. */
TEST(k_quant_whole_products_equal_vec_dot_bit_for_bit) {
    static const int types[] = {TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K};
    static const int64_t toks[] = {2, 5, 16, 17, 33, 100};
    static const int64_t shapes[][2] = {{5, 768}, {21, 768}, {117, 5120}};
    uint64_t rng = 0x5EED;
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
            if (!k->rows_product[types[ti]]) continue;
            for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
                for (size_t i = 0; i < sizeof toks / sizeof *toks; i++)
                    check_whole_rows_product(k, types[ti], shapes[si][0], shapes[si][1], toks[i], false, &rng);
            for (size_t i = 0; i < sizeof toks / sizeof *toks; i++)
                check_whole_rows_product(k, types[ti], 21, 512, toks[i], true, &rng);
        }
    }
}

TEST(matmul_rejects_unsupported) {
    const struct tensor_kernels *k = tensor_kernels_best();
    float x[32], y[4];
    struct tensor_matrix m = {.type = TENSOR_TYPE_Q8_K, .rows = 1, .cols = 256, .row_bytes = 292, .data = x};
    struct pool *pool = pool_create(1, NULL);
    CHECK_EQ_INT(tensor_matmul(pool, k, &m, x, 32, y, 1, 1, NULL), KVIK_ERR_UNSUPPORTED);
    m.type = 99;
    CHECK_EQ_INT(tensor_matmul(pool, k, &m, x, 32, y, 1, 1, NULL), KVIK_ERR_UNSUPPORTED);
    m.type = TENSOR_TYPE_Q4_0;
    m.cols = 33;
    CHECK_EQ_INT(tensor_matmul(pool, k, &m, x, 33, y, 1, 1, NULL), KVIK_ERR_INVALID_ARG);
    pool_free(pool);
}

TEST(matmul_n_equals_separate_products) {
    /* Q, K, V-like matrices of different heights sharing one input. */
    const struct tensor_kernels *k = tensor_kernels_best();
    static const int64_t rows[3] = {40, 17, 17};
    int64_t cols = 256, n_tok = 3;
    struct tensor_matrix m[3];
    const struct tensor_matrix *mp[3];
    float *y[3], *ref[3];
    int64_t ys[3];
    uint64_t rng = 77;
    for (int i = 0; i < 3; i++) {
        int type = i == 2 ? TENSOR_TYPE_Q6_K : TENSOR_TYPE_Q4_K; /* both take Q8_K */
        size_t rb = tensor_row_size(type, cols);
        void *data = mem_alloc_aligned(rb * (size_t)rows[i]);
        tensor_fill_random(type, data, rows[i], cols, rb, TENSOR_FILL_BITS, test_rand_u64(&rng));
        m[i] = (struct tensor_matrix){.type = type, .rows = rows[i], .cols = cols, .row_bytes = rb, .data = data};
        mp[i] = &m[i];
        y[i] = mem_alloc_aligned(sizeof(float) * (size_t)(rows[i] * n_tok));
        ref[i] = mem_alloc_aligned(sizeof(float) * (size_t)(rows[i] * n_tok));
        ys[i] = rows[i];
    }
    float *x = random_floats(cols * n_tok, &rng);
    void *scratch = mem_alloc_aligned(tensor_matmul_scratch_size(TENSOR_TYPE_Q4_K, cols, n_tok));
    struct pool *pool = pool_create(2, NULL);
    CHECK_EQ_INT(tensor_matmul_n(pool, k, 3, mp, x, cols, y, ys, n_tok, scratch), KVIK_OK);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(tensor_matmul(pool, k, &m[i], x, cols, ref[i], ys[i], n_tok, scratch), KVIK_OK);
        CHECK(memcmp(y[i], ref[i], sizeof(float) * (size_t)(rows[i] * n_tok)) == 0);
    }
    /* a matrix whose activation type differs cannot share the input */
    struct tensor_matrix q40 = m[0];
    q40.type = TENSOR_TYPE_Q4_0;
    q40.row_bytes = tensor_row_size(TENSOR_TYPE_Q4_0, cols);
    const struct tensor_matrix *mixed[2] = {&m[0], &q40};
    CHECK_EQ_INT(tensor_matmul_n(pool, k, 2, mixed, x, cols, y, ys, n_tok, scratch), KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(tensor_matmul_n(pool, k, 5, mp, x, cols, y, ys, n_tok, scratch), KVIK_ERR_INVALID_ARG);
    pool_free(pool);
    for (int i = 0; i < 3; i++) mem_free((void *)m[i].data), mem_free(y[i]), mem_free(ref[i]);
    mem_free(x), mem_free(scratch);
}


/* tensor_matmul_opt with norm_w against normalising first and
 * tensor_matmul_n, bit for bit: Q4_1 and Q8_0 matrices (the whole products
 * and their per-token tiles on AMX) at 1, 5, 16 and 21 tokens, every
 * table; a non-quantized input (F32 weights) is refused for the caller to
 * normalise. */
TEST(matmul_norm_equals_norm_then_products) {
    static const int types[] = {TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q8_0};
    static const int64_t toks[] = {1, 5, 16, 21};
    const int64_t cols = 576, rows = 48;
    uint64_t rng = 91;
    struct pool *pool = pool_create(2, NULL);
    REQUIRE(pool);
    float *x = random_floats(cols * 21, &rng), *nw = random_floats(cols, &rng);
    float *xn = mem_alloc_aligned(sizeof(float) * (size_t)(cols * 21));
    for (int64_t t = 0; t < 21; t++) tensor_rmsnorm(xn + t * cols, x + t * cols, nw, cols, 1e-5f);
    float *y[2], *ref[2];
    for (int i = 0; i < 2; i++) {
        y[i] = mem_alloc_aligned(sizeof(float) * (size_t)(rows * 21));
        ref[i] = mem_alloc_aligned(sizeof(float) * (size_t)(rows * 21));
    }
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti];
        size_t rb = tensor_row_size(type, cols);
        struct tensor_matrix m[2];
        const struct tensor_matrix *mp[2] = {&m[0], &m[1]};
        for (int i = 0; i < 2; i++) {
            void *data = mem_alloc_aligned(rb * (size_t)rows);
            tensor_fill_random(type, data, rows, cols, rb, TENSOR_FILL_BITS, test_rand_u64(&rng));
            m[i] = (struct tensor_matrix){.type = type, .rows = rows, .cols = cols, .row_bytes = rb, .data = data};
        }
        int64_t ys[2] = {rows, rows};
        void *scratch = mem_alloc_aligned(tensor_matmul_scratch_size(type, cols, 21));
        for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
            const struct tensor_kernels *k = tensor_kernels_get(isa);
            if (!k) continue;
            for (size_t i = 0; i < sizeof toks / sizeof *toks; i++) {
                int64_t nt = toks[i];
                CHECK_EQ_INT(tensor_matmul_n(pool, k, 2, mp, xn, cols, ref, ys, nt, scratch), KVIK_OK);
                struct tensor_matmul_opts o = {.norm_w = nw, .norm_eps = 1e-5f};
                CHECK_EQ_INT(tensor_matmul_opt(pool, k, 2, mp, x, cols, y, ys, nt, scratch, &o), KVIK_OK);
                for (int j = 0; j < 2; j++)
                    CHECK_MSG(!memcmp(y[j], ref[j], sizeof(float) * (size_t)(rows * nt)),
                              "%s %s, %lld tokens: normalised in the product differs", k->name,
                              tensor_type_name(type), (long long)nt);
            }
        }
        mem_free(scratch);
        for (int i = 0; i < 2; i++) mem_free((void *)m[i].data);
    }
    /* F32 weights take F32 activations: nothing to fold the norm into */
    struct tensor_matrix f = {.type = TENSOR_TYPE_F32, .rows = 4, .cols = cols, .row_bytes = sizeof(float) * cols,
                              .data = x};
    const struct tensor_matrix *fp = &f;
    int64_t fys = 4;
    struct tensor_matmul_opts on = {.norm_w = nw, .norm_eps = 1e-5f};
    CHECK_EQ_INT(tensor_matmul_opt(pool, tensor_kernels_best(), 1, &fp, x, cols, y, &fys, 2, NULL, &on),
                 KVIK_ERR_INVALID_ARG);
    /* rows wider than TENSOR_NORM_MAX_COLS: refused too (the caller normalises) */
    int64_t wide = TENSOR_NORM_MAX_COLS + 32;
    struct tensor_matrix wm = {.type = TENSOR_TYPE_Q8_0, .rows = 1, .cols = wide,
                               .row_bytes = tensor_row_size(TENSOR_TYPE_Q8_0, wide)};
    wm.data = mem_alloc_aligned(wm.row_bytes);
    float *wx = mem_alloc_aligned(sizeof(float) * (size_t)wide * 2), *wn = mem_alloc_aligned(sizeof(float) * (size_t)wide);
    REQUIRE(wm.data && wx && wn);
    const struct tensor_matrix *wp = &wm;
    int64_t wys = 1;
    on.norm_w = wn;
    CHECK_EQ_INT(tensor_matmul_opt(pool, tensor_kernels_best(), 1, &wp, wx, wide, y, &wys, 2, NULL, &on),
                 KVIK_ERR_INVALID_ARG);
    mem_free((void *)wm.data), mem_free(wx), mem_free(wn);
    pool_free(pool);
    for (int i = 0; i < 2; i++) mem_free(y[i]), mem_free(ref[i]);
    mem_free(x), mem_free(nw), mem_free(xn);
}

/* tensor_matmul_opt with glu_up and acc (the down projection) against
 * silu_mul first and tensor_matmul_add, bit for bit, with X itself left as
 * it was: Q4_1 and Q8_0 at 1, 5, 16 and 21 tokens, every table; a norm and
 * a gate together, or F32 weights, are refused. */
TEST(matmul_glu_add_equals_gate_then_product) {
    static const int types[] = {TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q8_0};
    static const int64_t toks[] = {1, 5, 16, 21};
    const int64_t cols = 1536, rows = 40, as = rows + 5;
    uint64_t rng = 17;
    struct pool *pool = pool_create(2, NULL);
    REQUIRE(pool);
    size_t xb = sizeof(float) * (size_t)(cols * 21), ab = sizeof(float) * (size_t)(as * 21);
    float *gate = random_floats(cols * 21, &rng), *up = random_floats(cols * 21, &rng);
    float *gate0 = mem_alloc_aligned(xb), *gated = mem_alloc_aligned(xb);
    float *acc0 = random_floats(as * 21, &rng), *acc = mem_alloc_aligned(ab), *ref_acc = mem_alloc_aligned(ab);
    float *y = mem_alloc_aligned(sizeof(float) * (size_t)(rows * 21));
    float *ref = mem_alloc_aligned(sizeof(float) * (size_t)(rows * 21));
    REQUIRE(gate0 && gated && acc && ref_acc && y && ref);
    memcpy(gate0, gate, xb);
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti];
        size_t rb = tensor_row_size(type, cols);
        void *data = mem_alloc_aligned(rb * (size_t)rows);
        tensor_fill_random(type, data, rows, cols, rb, TENSOR_FILL_BITS, test_rand_u64(&rng));
        struct tensor_matrix m = {.type = type, .rows = rows, .cols = cols, .row_bytes = rb, .data = data};
        const struct tensor_matrix *mp = &m;
        void *scratch = mem_alloc_aligned(tensor_matmul_scratch_size(type, cols, 21));
        for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
            const struct tensor_kernels *k = tensor_kernels_get(isa);
            if (!k) continue;
            memcpy(gated, gate, xb);
            k->silu_mul(gated, up, cols * 21);
            for (size_t i = 0; i < sizeof toks / sizeof *toks; i++) {
                int64_t nt = toks[i], ys = rows;
                memcpy(ref_acc, acc0, ab);
                memcpy(acc, acc0, ab);
                CHECK_EQ_INT(tensor_matmul_add(pool, k, &m, gated, cols, ref, rows, nt, scratch, ref_acc, as), KVIK_OK);
                struct tensor_matmul_opts o = {.glu_up = up, .up_stride = cols, .acc = acc, .acc_stride = as};
                CHECK_EQ_INT(tensor_matmul_opt(pool, k, 1, &mp, gate, cols, &y, &ys, nt, scratch, &o), KVIK_OK);
                CHECK_MSG(!memcmp(y, ref, sizeof(float) * (size_t)(rows * nt)) && !memcmp(acc, ref_acc, ab),
                          "%s %s, %lld tokens: gated in the product differs", k->name, tensor_type_name(type),
                          (long long)nt);
                CHECK_MSG(!memcmp(gate, gate0, xb), "%s: the product wrote its input", k->name);
            }
        }
        struct tensor_matmul_opts both = {.norm_w = up, .norm_eps = 1e-5f, .glu_up = up, .up_stride = cols};
        int64_t ys = rows;
        CHECK_EQ_INT(tensor_matmul_opt(pool, tensor_kernels_best(), 1, &mp, gate, cols, &y, &ys, 2, scratch, &both),
                     KVIK_ERR_INVALID_ARG);
        mem_free(scratch), mem_free(data);
    }
    struct tensor_matrix f = {.type = TENSOR_TYPE_F32, .rows = 4, .cols = cols, .row_bytes = sizeof(float) * cols,
                              .data = up};
    const struct tensor_matrix *fp = &f;
    int64_t fys = 4;
    struct tensor_matmul_opts o = {.glu_up = up, .up_stride = cols};
    CHECK_EQ_INT(tensor_matmul_opt(pool, tensor_kernels_best(), 1, &fp, gate, cols, &y, &fys, 2, NULL, &o),
                 KVIK_ERR_INVALID_ARG);
    pool_free(pool);
    mem_free(gate), mem_free(up), mem_free(gate0), mem_free(gated), mem_free(acc0), mem_free(acc), mem_free(ref_acc);
    mem_free(y), mem_free(ref);
}

/* tensor_matmul_opt's argmax against the kernel table's argmax over each
 * whole result row. F32 weights that pick one input value each (row r of W
 * is 1 at column r % cols), so the rows can hold planted cases: a tie
 * between rows of different work items (the first wins), zeros (from -0
 * and +0 inputs; the dot products give +0 for both), two FLT_MAX, a NaN
 * (-1 allowed there only); at 3 and 12
 * tokens (the row-and-token-block items). Then Q4_1 and Q8_0 products
 * (AMX: the whole products' items) at 1, 5, 16 and 21 tokens, every table. */
TEST(matmul_argmax_equals_argmax_of_rows) {
    uint64_t rng = 23;
    struct pool *pool = pool_create(2, NULL);
    REQUIRE(pool);
    const int64_t rows = 2000, cols = 2000, nt_max = 21;
    float *w = mem_alloc_aligned(sizeof(float) * (size_t)(rows * cols));
    float *x = random_floats(cols * nt_max, &rng), *y = mem_alloc_aligned(sizeof(float) * (size_t)(rows * nt_max));
    int64_t am[21];
    REQUIRE(w && x && y);
    for (int64_t r = 0; r < rows; r++) w[r * cols + r % cols] = 1.0f;
    for (int64_t c = 0; c < cols; c++) x[c] = x[c] > 4.0f ? 4.0f : x[c];
    x[100] = x[1500] = 5.0f;                                   /* token 0: a tie */
    for (int64_t c = 0; c < cols; c++) x[cols + c] = -1.0f - fabsf(x[cols + c]);
    x[cols + 3] = -0.0f, x[cols + 1000] = 0.0f;                /* token 1: a tie of zeros */
    x[2 * cols + 700] = x[2 * cols + 900] = FLT_MAX;           /* token 2 */
    x[3 * cols + 0] = NAN, x[3 * cols + 1200] = NAN;           /* token 3 */
    struct tensor_matrix f = {.type = TENSOR_TYPE_F32, .rows = rows, .cols = cols, .row_bytes = sizeof(float) * cols,
                              .data = w};
    static const int64_t f_toks[] = {3, 12};
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        for (size_t i = 0; i < 2; i++) {
            int64_t nt = f_toks[i], ys = rows;
            const struct tensor_matrix *fp = &f;
            struct tensor_matmul_opts o = {.argmax = am};
            CHECK_EQ_INT(tensor_matmul_opt(pool, k, 1, &fp, x, cols, &y, &ys, nt, NULL, &o), KVIK_OK);
            for (int64_t t = 0; t < nt; t++) {
                int64_t want = k->argmax(y + t * rows, rows);
                CHECK_MSG(am[t] == want || (t == 3 && am[t] == -1), "%s, %lld tokens, token %lld: argmax %lld, want %lld",
                          k->name, (long long)nt, (long long)t, (long long)am[t], (long long)want);
            }
            CHECK_EQ_INT((int)am[0], 100);
            CHECK_EQ_INT((int)am[1], 3);
            CHECK_EQ_INT((int)am[2], 700);
        }
    }
    mem_free(w);
    static const int types[] = {TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q8_0};
    static const int64_t toks[] = {1, 5, 16, 21};
    const int64_t qcols = 576, qrows = 1000;
    float *qx = random_floats(qcols * nt_max, &rng);
    REQUIRE(qx);
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti];
        size_t rb = tensor_row_size(type, qcols);
        void *data = mem_alloc_aligned(rb * (size_t)qrows);
        tensor_fill_random(type, data, qrows, qcols, rb, TENSOR_FILL_BITS, test_rand_u64(&rng));
        struct tensor_matrix m = {.type = type, .rows = qrows, .cols = qcols, .row_bytes = rb, .data = data};
        const struct tensor_matrix *mp = &m;
        void *scratch = mem_alloc_aligned(tensor_matmul_scratch_size(type, qcols, nt_max));
        for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
            const struct tensor_kernels *k = tensor_kernels_get(isa);
            if (!k) continue;
            for (size_t i = 0; i < sizeof toks / sizeof *toks; i++) {
                int64_t nt = toks[i], ys = qrows;
                struct tensor_matmul_opts o = {.argmax = am};
                CHECK_EQ_INT(tensor_matmul_opt(pool, k, 1, &mp, qx, qcols, &y, &ys, nt, scratch, &o),
                             KVIK_OK);
                for (int64_t t = 0; t < nt; t++)
                    CHECK_MSG(am[t] == k->argmax(y + t * qrows, qrows), "%s %s, %lld tokens, token %lld: argmax %lld",
                              k->name, tensor_type_name(type), (long long)nt, (long long)t, (long long)am[t]);
            }
        }
        mem_free(scratch), mem_free(data);
    }
    pool_free(pool);
    mem_free(x), mem_free(qx), mem_free(y);
}

/* tensor_matmul_opts.epilogue: every result of every matrix is in exactly
 * one region, each region's rows start at a multiple of 16 and end at one
 * or at the matrix's last row, and its results are final when it is
 * called (equal to a plain product's): two matrices of 40 and 200 rows, Q4_1,
 * Q8_0 and F32, at 1, 5, 16 and 21 tokens, every table, on pools of 2, 3
 * and 5 threads (uneven ranges of items, and threads taking each other's). */
struct epi_check {
    const float *y[2], *ref[2];
    int64_t rows[2];
    int *seen[2];
    atomic_int bad;
};

static void epi_count(void *arg, int mat, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
    struct epi_check *e = arg;
    if (mat < 0 || mat > 1 || r0 % 16 || (r1 % 16 && r1 != e->rows[mat]) || r0 >= r1 || r1 > e->rows[mat]) {
        atomic_fetch_add(&e->bad, 1);
        return;
    }
    for (int64_t t = t0; t < t1; t++)
        for (int64_t r = r0; r < r1; r++) {
            __atomic_fetch_add(&e->seen[mat][t * e->rows[mat] + r], 1, __ATOMIC_RELAXED);
            if (f32_to_bits(e->y[mat][t * e->rows[mat] + r]) != f32_to_bits(e->ref[mat][t * e->rows[mat] + r]))
                atomic_fetch_add(&e->bad, 1);
        }
}

TEST(matmul_epilogue_sees_every_result_once) {
    static const int types[] = {TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_F32};
    static const int64_t toks[] = {1, 5, 16, 21};
    const int64_t cols = 256, rows[2] = {40, 200};
    uint64_t rng = 29;
    float *x = random_floats(cols * 21, &rng);
    float *y[2], *ref[2];
    int *seen[2];
    for (int i = 0; i < 2; i++) {
        y[i] = mem_alloc_aligned(sizeof(float) * (size_t)(rows[i] * 21));
        ref[i] = mem_alloc_aligned(sizeof(float) * (size_t)(rows[i] * 21));
        seen[i] = calloc((size_t)(rows[i] * 21), sizeof(int));
        REQUIRE(y[i] && ref[i] && seen[i]);
    }
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int type = types[ti];
        size_t rb = tensor_row_size(type, cols);
        struct tensor_matrix m[2];
        const struct tensor_matrix *mp[2] = {&m[0], &m[1]};
        for (int i = 0; i < 2; i++) {
            void *data = mem_alloc_aligned(rb * (size_t)rows[i]);
            tensor_fill_random(type, data, rows[i], cols, rb, TENSOR_FILL_BITS, test_rand_u64(&rng));
            m[i] = (struct tensor_matrix){.type = type, .rows = rows[i], .cols = cols, .row_bytes = rb, .data = data};
        }
        void *scratch = mem_alloc_aligned(tensor_matmul_scratch_size(type, cols, 21) + 64);
        for (int isa = 0; isa < TENSOR_ISA_COUNT * 3; isa++) {
            const struct tensor_kernels *k = tensor_kernels_get(isa % TENSOR_ISA_COUNT);
            if (!k) continue;
            struct pool *pool = pool_create(isa < TENSOR_ISA_COUNT ? 2 : isa < 2 * TENSOR_ISA_COUNT ? 3 : 5, NULL);
            REQUIRE(pool);
            for (size_t i = 0; i < sizeof toks / sizeof *toks; i++) {
                int64_t nt = toks[i];
                CHECK_EQ_INT(tensor_matmul_n(pool, k, 2, mp, x, cols, ref, rows, nt, scratch), KVIK_OK);
                struct epi_check e = {.y = {y[0], y[1]}, .ref = {ref[0], ref[1]}, .rows = {rows[0], rows[1]},
                                      .seen = {seen[0], seen[1]}};
                for (int j = 0; j < 2; j++) memset(seen[j], 0, sizeof(int) * (size_t)(rows[j] * nt));
                struct tensor_matmul_opts o = {.epilogue = epi_count, .epilogue_arg = &e};
                CHECK_EQ_INT(tensor_matmul_opt(pool, k, 2, mp, x, cols, y, rows, nt, scratch, &o), KVIK_OK);
                int once = 1;
                for (int j = 0; j < 2; j++)
                    for (int64_t q = 0; q < rows[j] * nt; q++) once &= seen[j][q] == 1;
                CHECK_MSG(once && atomic_load(&e.bad) == 0,
                          "%s %s, %lld tokens, %d threads: epilogue regions wrong (%d bad)", k->name,
                          tensor_type_name(type), (long long)nt, pool_size(pool), atomic_load(&e.bad));
            }
            pool_free(pool);
        }
        mem_free(scratch);
        for (int i = 0; i < 2; i++) mem_free((void *)m[i].data);
    }
    for (int i = 0; i < 2; i++) mem_free(y[i]), mem_free(ref[i]), free(seen[i]);
    mem_free(x);
}

/* quantize_tile (the AMX table's) against quantize then pack, byte for
 * byte over the whole packed buffer: Q8_0 and Q8_1 at 2, 5, 16 and 21
 * tokens (the padding of a partial tile written by the NULL calls), rows of
 * 34 blocks (two runs of sixteen, the 512-bit unit, and a tail) with a NaN
 * block (its run by block, the NaN one the reference's), an all-zero
 * block, roundf's ties and large values. */
TEST(quantize_tile_equals_quantize_then_pack) {
    static const int types[] = {TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q8_1};
    static const int64_t toks[] = {2, 5, 16, 21};
    const int64_t cols = 34 * 32; /* two runs of sixteen blocks and two blocks */
    const struct tensor_kernels *k = NULL;
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *t = tensor_kernels_get(isa);
        if (t && t->quantize_tile[TENSOR_TYPE_Q8_1]) k = t;
    }
    if (!k) return; /* no table quantizes into tiles on this CPU */
    uint64_t rng = 41;
    float *x = random_floats(cols * 21, &rng);
    x[3 * cols + 40] = NAN;                                              /* token 3, block 1 */
    for (int i = 0; i < 32; i++) x[7 * cols + 18 * 32 + i] = 0.0f;        /* token 7, block 18 */
    for (int i = 0; i < 32; i++) x[9 * cols + 20 * 32 + i] = (float)i - 15.5f; /* ties, block 20 */
    for (int i = 0; i < 32; i++) x[18 * cols + 33 * 32 + i] *= 1e30f;     /* token 18, block 33 */
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int vt = types[ti];
        size_t xq_row = tensor_row_size(vt, cols), room = k->packed_size[vt](cols, 21);
        uint8_t *xq = mem_alloc_aligned(xq_row * 21), *want = mem_alloc_aligned(room), *got = mem_alloc_aligned(room);
        REQUIRE(xq && want && got);
        for (size_t i = 0; i < sizeof toks / sizeof *toks; i++) {
            int64_t nt = toks[i], size = (int64_t)k->packed_size[vt](cols, nt);
            for (int fill = 0xA5; fill <= 0xA6; fill++) { /* bytes neither writes (Q8_0's s_y) keep the fill */
                memset(want, fill, room), memset(got, fill, room);
                for (int64_t t = 0; t < nt; t++) k->quantize[vt](x + t * cols, xq + (size_t)t * xq_row, cols);
                for (int64_t tile = 0; tile * 16 < nt; tile++)
                    k->pack[vt](xq, xq_row, cols, tile, 0, cols / 32, nt, want);
                for (int64_t t = nt - 1; t >= 0; t--) k->quantize_tile[vt](x + t * cols, cols, t, got);
                for (int64_t t = nt; t % 16; t++) k->quantize_tile[vt](NULL, cols, t, got);
                CHECK_MSG(!memcmp(want, got, (size_t)size), "%s %s, %lld tokens: tiles differ", k->name,
                          tensor_type_name(vt), (long long)nt);
            }
        }
        mem_free(xq), mem_free(want), mem_free(got);
    }
    mem_free(x);
}

/* silu_mul of every table against silu(x) * u in double: within a few ulp
 * of the result over |x| up to 90 (past the exponential's floor), exactly
 * 0 for x = 0, finite everywhere; and the same bits whatever the runs the
 * values are cut into (the forward pass splits them between threads). */
TEST(silu_mul_matches_double_and_ignores_cuts) {
    enum { N = 4099 };
    struct prng rng;
    prng_seed(&rng, 77);
    float *g = mem_alloc_aligned(sizeof(float) * N), *u = mem_alloc_aligned(sizeof(float) * N);
    float *a = mem_alloc_aligned(sizeof(float) * N), *b = mem_alloc_aligned(sizeof(float) * N);
    REQUIRE(g && u && a && b);
    for (int i = 0; i < N; i++) {
        double r = prng_uniform(&rng);
        g[i] = i < 64 ? (float)(i - 32) * 0.25f : (float)((r - 0.5) * (i % 3 ? 20.0 : 180.0));
        u[i] = (float)(prng_uniform(&rng) * 4.0 - 2.0);
    }
    g[5] = 0.0f, g[6] = -0.0f, g[7] = 88.0f, g[8] = -88.0f, g[9] = 1e-30f, g[10] = -1e-30f;
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        REQUIRE(k->silu_mul);
        memcpy(a, g, sizeof(float) * N);
        k->silu_mul(a, u, N);
        int bad = 0;
        for (int i = 0; i < N && bad < 5; i++) {
            double x = g[i], want = x / (1.0 + exp(-x)) * u[i];
            double tol = 4 * FLT_EPSILON * fabs(want) + 1e-35;
            if (!isfinite(a[i]) || fabs(a[i] - want) > tol) {
                bad++;
                CHECK_MSG(false, "%s silu_mul(%g) * %g = %.9g, want %.9g", k->name, x, u[i], a[i], want);
            }
        }
        CHECK_MSG(a[5] == 0.0f && a[6] == 0.0f, "%s: silu(0) is not 0", k->name);
        /* cut into runs of 1, 5, 16, 17, ... values */
        memcpy(b, g, sizeof(float) * N);
        for (int i = 0, len = 1; i < N; i += len, len = len * 3 % 37 + 1)
            k->silu_mul(b + i, u + i, i + len <= N ? len : N - i);
        CHECK_MSG(!memcmp(a, b, sizeof(float) * N), "%s: silu_mul depends on where its runs are cut", k->name);
    }
    mem_free(g), mem_free(u), mem_free(a), mem_free(b);
}

/* gelu_mul of every table against 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
 * x^3))) u in double: within a few ulp where the result is not tiny (the
 * rounding of z moves it by about |z| ulp), 0 for x = 0, finite
 * everywhere; and the same bits whatever the runs are cut into. */
TEST(gelu_mul_matches_double_and_ignores_cuts) {
    enum { N = 4099 };
    struct prng rng;
    prng_seed(&rng, 78);
    float *g = mem_alloc_aligned(sizeof(float) * N), *u = mem_alloc_aligned(sizeof(float) * N);
    float *a = mem_alloc_aligned(sizeof(float) * N), *b = mem_alloc_aligned(sizeof(float) * N);
    REQUIRE(g && u && a && b);
    for (int i = 0; i < N; i++) {
        double r = prng_uniform(&rng);
        g[i] = i < 64 ? (float)(i - 32) * 0.25f : (float)((r - 0.5) * (i % 3 ? 12.0 : 100.0));
        u[i] = (float)(prng_uniform(&rng) * 4.0 - 2.0);
    }
    g[5] = 0.0f, g[6] = -0.0f, g[7] = 88.0f, g[8] = -88.0f, g[9] = 1e-30f, g[10] = -1e-30f;
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        REQUIRE(k->gelu_mul);
        memcpy(a, g, sizeof(float) * N);
        k->gelu_mul(a, u, N);
        int bad = 0;
        for (int i = 0; i < N && bad < 5; i++) {
            double x = g[i], want = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * u[i];
            double tol = 8 * FLT_EPSILON * fabs(want) + 2e-7 * fabs(x * u[i]) + 1e-35;
            if (!isfinite(a[i]) || fabs(a[i] - want) > tol) {
                bad++;
                CHECK_MSG(false, "%s gelu_mul(%g) * %g = %.9g, want %.9g", k->name, x, u[i], a[i], want);
            }
        }
        CHECK_MSG(a[5] == 0.0f && a[6] == 0.0f, "%s: gelu(0) is not 0", k->name);
        memcpy(b, g, sizeof(float) * N);
        for (int i = 0, len = 1; i < N; i += len, len = len * 3 % 37 + 1)
            k->gelu_mul(b + i, u + i, i + len <= N ? len : N - i);
        CHECK_MSG(!memcmp(a, b, sizeof(float) * N), "%s: gelu_mul depends on where its runs are cut", k->name);
    }
    mem_free(g), mem_free(u), mem_free(a), mem_free(b);
}

/* gelu_erf of every table against 0.5 x (1 + erf(x / sqrt 2)) in double:
 * within 1.5e-7 |x| plus a few ulp (the vector tables' erf is Abramowitz
 * and Stegun's 7.1.26), 0 for x = 0, tiny and finite in the far negative
 * tail; and the same bits whatever the runs are cut into. */
TEST(gelu_erf_matches_double_and_ignores_cuts) {
    enum { N = 4099 };
    struct prng rng;
    prng_seed(&rng, 79);
    float *g = mem_alloc_aligned(sizeof(float) * N), *a = mem_alloc_aligned(sizeof(float) * N);
    float *b = mem_alloc_aligned(sizeof(float) * N);
    REQUIRE(g && a && b);
    for (int i = 0; i < N; i++) {
        double r = prng_uniform(&rng);
        g[i] = i < 64 ? (float)(i - 32) * 0.25f : (float)((r - 0.5) * (i % 3 ? 12.0 : 100.0));
    }
    g[5] = 0.0f, g[6] = -0.0f, g[7] = 88.0f, g[8] = -88.0f, g[9] = 1e-30f, g[10] = -1e-30f;
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *k = tensor_kernels_get(isa);
        if (!k) continue;
        REQUIRE(k->gelu_erf);
        memcpy(a, g, sizeof(float) * N);
        k->gelu_erf(a, N);
        int bad = 0;
        for (int i = 0; i < N && bad < 5; i++) {
            double x = g[i], want = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
            double tol = 8 * FLT_EPSILON * fabs(want) + 1.6e-7 * fabs(x) + 1e-35;
            if (!isfinite(a[i]) || fabs(a[i] - want) > tol) {
                bad++;
                CHECK_MSG(false, "%s gelu_erf(%g) = %.9g, want %.9g", k->name, x, a[i], want);
            }
        }
        CHECK_MSG(a[5] == 0.0f && a[6] == 0.0f, "%s: gelu(0) is not 0", k->name);
        memcpy(b, g, sizeof(float) * N);
        for (int i = 0, len = 1; i < N; i += len, len = len * 3 % 37 + 1)
            k->gelu_erf(b + i, i + len <= N ? len : N - i);
        CHECK_MSG(!memcmp(a, b, sizeof(float) * N), "%s: gelu_erf depends on where its runs are cut", k->name);
    }
    mem_free(g), mem_free(a), mem_free(b);
}

/* argmax of every table against a plain first-maximum loop: random lengths
 * (below, at and past the vector width), many ties, NaN (also first),
 * infinities, signed zeros, all-NaN and all -inf rows. */
/* rope of every table against the pair formula with each product rounded
 * (in float, no fused multiply-add), bit for bit, at lengths 2..70 (the
 * 512-bit table's masked tails) and at offsets into the arrays; inf and NaN
 * inputs give the formula's inf and NaN. */
TEST(rope_is_the_pair_formula_bit_for_bit) {
    enum { MAXN = 70 };
    uint64_t rng = 5;
    float *x = random_floats(MAXN + 2, &rng), *ang = random_floats(MAXN / 2 + 1, &rng);
    float cs[MAXN + 2], want[MAXN + 2], got[MAXN + 2];
    for (int i = 0; i < MAXN / 2 + 1; i++) cs[2 * i] = cosf(3.0f * ang[i]), cs[2 * i + 1] = sinf(3.0f * ang[i]);
    x[5] = INFINITY, x[12] = NAN;
    for (int n = 2; n <= MAXN; n += 2)
        for (int off = 0; off <= 2; off += 2) {
            for (int i = 0; i < n; i += 2) {
                volatile float a = x[off + i] * cs[off + i], b = x[off + i + 1] * cs[off + i + 1];
                volatile float c = x[off + i] * cs[off + i + 1], d = x[off + i + 1] * cs[off + i];
                want[i] = a - b, want[i + 1] = c + d;
            }
            for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
                const struct tensor_kernels *k = tensor_kernels_get(isa);
                if (!k) continue;
                memcpy(got, x + off, sizeof(float) * (size_t)(n + 2));
                k->rope(got, cs + off, n);
                bool same = true;
                for (int i = 0; i < n; i++) same &= f32_to_bits(got[i]) == f32_to_bits(want[i]) ||
                                                    (got[i] != got[i] && want[i] != want[i]);
                CHECK_MSG(same, "%s rope of %d values at %d differs", k->name, n, off);
                CHECK_MSG(f32_to_bits(got[n]) == f32_to_bits(x[off + n]), "%s rope wrote past %d values", k->name, n);
            }
        }
    mem_free(x), mem_free(ang);
}

TEST(argmax_is_the_first_maximum) {
    static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, FLT_MAX};
    struct prng rng;
    prng_seed(&rng, 99);
    enum { MAXN = 700 };
    float x[MAXN];
    for (int trial = 0; trial < 3000; trial++) {
        int n = 1 + (int)(prng_next(&rng) % (trial < 1000 ? 40 : MAXN));
        int kind = trial % 10;
        for (int i = 0; i < n; i++) {
            uint64_t r = prng_next(&rng);
            x[i] = kind == 8 ? NAN
                   : kind == 9 ? -INFINITY
                   : r % 23 == 0 ? special[(r >> 8) % (kind < 4 ? 5 : 6)]
                   : (float)((r >> 16) % 9) - 4.0f;
        }
        if (kind == 3) x[0] = NAN;
        int64_t want = 0;
        float bv = isnan(x[0]) ? -INFINITY : x[0];
        for (int i = 1; i < n; i++)
            if (x[i] > bv) bv = x[i], want = i;
        for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
            const struct tensor_kernels *k = tensor_kernels_get(isa);
            if (!k) continue;
            int64_t got = k->argmax(x, n);
            CHECK_MSG(got == want, "%s argmax of %d values (kind %d): %lld, want %lld", k->name, n, kind,
                      (long long)got, (long long)want);
            if (got != want) return;
        }
    }
}
