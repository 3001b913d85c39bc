/*
 * test_types.c — the type traits table and the reference conversions.
 *
 *  - the table: block and type sizes of every type (GGUF's values), names
 *    both ways, vec_dot_type pairings, tensor_row_size edge cases;
 *  - to_float of every convertible type against gguf-py's numpy output, bit
 *    for bit, on the golden blocks of tests/data/quant_ref (made by
 *    scripts/gen_quant_ref.py; format in tests/data/README.md);
 *  - from_float against gguf-py's quantized bytes where gguf-py has a
 *    quantizer (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0);
 *  - the exact bytes of every reference quantizer on a fixed input, as
 *    hashes checked once against llama.cpp's ggml (this is what covers Q8_1
 *    and the K-quants, which gguf-py cannot quantize);
 *  - for every from_float, the round trip dequantize(quantize(x)) stays
 *    within a per-type error bound, and for the symmetric types
 *    quantize(dequantize(q)) gives q back.
 */
#include <float.h>
#include <stdlib.h>

#include "tensor/quant_ref.h"
#include "tensor/quants.h"
#include "tensor/tensor.h"
#include "test.h"

/* ---- the table ----------------------------------------------------------- */

static const struct {
    int type;
    const char *name;
    int64_t block_size;
    size_t type_size;
    int vec_dot_type;
} EXPECTED[] = {
    {TENSOR_TYPE_F32, "F32", 1, 4, TENSOR_TYPE_F32},
    {TENSOR_TYPE_F16, "F16", 1, 2, TENSOR_TYPE_F32},
    {TENSOR_TYPE_BF16, "BF16", 1, 2, TENSOR_TYPE_F32},
    {TENSOR_TYPE_Q4_0, "Q4_0", 32, 18, TENSOR_TYPE_Q8_0},
    {TENSOR_TYPE_Q4_1, "Q4_1", 32, 20, TENSOR_TYPE_Q8_1},
    {TENSOR_TYPE_Q5_0, "Q5_0", 32, 22, TENSOR_TYPE_Q8_0},
    {TENSOR_TYPE_Q5_1, "Q5_1", 32, 24, TENSOR_TYPE_Q8_1},
    {TENSOR_TYPE_Q8_0, "Q8_0", 32, 34, TENSOR_TYPE_Q8_0},
    {TENSOR_TYPE_Q8_1, "Q8_1", 32, 36, TENSOR_TYPE_Q8_1},
    {TENSOR_TYPE_Q2_K, "Q2_K", 256, 84, TENSOR_TYPE_Q8_K},
    {TENSOR_TYPE_Q3_K, "Q3_K", 256, 110, TENSOR_TYPE_Q8_K},
    {TENSOR_TYPE_Q4_K, "Q4_K", 256, 144, TENSOR_TYPE_Q8_K},
    {TENSOR_TYPE_Q5_K, "Q5_K", 256, 176, TENSOR_TYPE_Q8_K},
    {TENSOR_TYPE_Q6_K, "Q6_K", 256, 210, TENSOR_TYPE_Q8_K},
    {TENSOR_TYPE_Q8_K, "Q8_K", 256, 292, TENSOR_TYPE_Q8_K},
    {TENSOR_TYPE_I8, "I8", 1, 1, TENSOR_TYPE_I8},
    {TENSOR_TYPE_I16, "I16", 1, 2, TENSOR_TYPE_I16},
    {TENSOR_TYPE_I32, "I32", 1, 4, TENSOR_TYPE_I32},
    {TENSOR_TYPE_I64, "I64", 1, 8, TENSOR_TYPE_I64},
    {TENSOR_TYPE_F64, "F64", 1, 8, TENSOR_TYPE_F64},
};
#define N_EXPECTED (int)(sizeof EXPECTED / sizeof EXPECTED[0])

/* Types with a reference quantizer. */
static const int QUANTIZABLE[] = {
    TENSOR_TYPE_F32,  TENSOR_TYPE_F16,  TENSOR_TYPE_BF16, TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1,
    TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q8_1, TENSOR_TYPE_Q2_K,
    TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_Q8_K,
};
#define N_QUANTIZABLE (int)(sizeof QUANTIZABLE / sizeof QUANTIZABLE[0])

static bool is_quantizable(int type) {
    for (int i = 0; i < N_QUANTIZABLE; i++)
        if (QUANTIZABLE[i] == type) return true;
    return false;
}

TEST(types_traits_sizes_match_gguf) {
    for (int i = 0; i < N_EXPECTED; i++) {
        const struct type_traits *t = tensor_type_traits(EXPECTED[i].type);
        CHECK_MSG(t != NULL, "no traits for %s", EXPECTED[i].name);
        if (!t) continue;
        CHECK_STR(t->name, EXPECTED[i].name);
        CHECK_EQ_INT(t->block_size, EXPECTED[i].block_size);
        CHECK_EQ_INT(t->type_size, EXPECTED[i].type_size);
        CHECK_EQ_INT(t->vec_dot_type, EXPECTED[i].vec_dot_type);
        const bool quant = EXPECTED[i].name[0] == 'Q';
        CHECK_MSG(t->is_quantized == quant, "%s: is_quantized", t->name);
        /* float conversions: every float and quantized type reads; the
         * integer types and F64 do not */
        const bool readable = quant || EXPECTED[i].type == TENSOR_TYPE_F32 ||
                              EXPECTED[i].type == TENSOR_TYPE_F16 ||
                              EXPECTED[i].type == TENSOR_TYPE_BF16;
        CHECK_MSG((t->to_float != NULL) == readable, "%s: to_float", t->name);
        CHECK_MSG((t->from_float != NULL) == is_quantizable(EXPECTED[i].type), "%s: from_float",
                  t->name);
        CHECK_EQ_INT(tensor_row_size(EXPECTED[i].type, EXPECTED[i].block_size),
                     EXPECTED[i].type_size);
    }
    /* exactly these ids are types */
    int known = 0;
    for (int id = -2; id < TENSOR_TYPE_COUNT + 3; id++)
        if (tensor_type_traits(id)) known++;
    CHECK_EQ_INT(known, N_EXPECTED);
    CHECK(tensor_type_traits(4) == NULL); /* the removed Q4_2 / Q4_3 */
    CHECK(tensor_type_traits(5) == NULL);
    CHECK(tensor_type_traits(-1) == NULL);
    CHECK(tensor_type_traits(TENSOR_TYPE_COUNT) == NULL);
    CHECK(tensor_type_traits(1 << 30) == NULL);
}

TEST(types_names_round_trip) {
    for (int i = 0; i < N_EXPECTED; i++) {
        const int type = EXPECTED[i].type;
        CHECK_STR(tensor_type_name(type), EXPECTED[i].name);
        CHECK_EQ_INT(tensor_type_from_name(tensor_type_name(type)), type);
        char lower[16];
        size_t k = 0;
        for (const char *p = EXPECTED[i].name; *p && k + 1 < sizeof lower; p++)
            lower[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        lower[k] = 0;
        CHECK_EQ_INT(tensor_type_from_name(lower), type);
    }
    CHECK_EQ_INT(tensor_type_from_name("q4_K"), TENSOR_TYPE_Q4_K);
    CHECK_EQ_INT(tensor_type_from_name("bf16"), TENSOR_TYPE_BF16);
    CHECK_EQ_INT(tensor_type_from_name(""), -1);
    CHECK_EQ_INT(tensor_type_from_name(NULL), -1);
    CHECK_EQ_INT(tensor_type_from_name("Q4_2"), -1);
    CHECK_EQ_INT(tensor_type_from_name("Q4_K "), -1);
    CHECK_EQ_INT(tensor_type_from_name("Q4"), -1);
    CHECK_EQ_INT(tensor_type_from_name("F32x"), -1);
    CHECK_STR(tensor_type_name(4), "?");
    CHECK_STR(tensor_type_name(-1), "?");
    CHECK_STR(tensor_type_name(TENSOR_TYPE_COUNT), "?");
}

TEST(types_row_size_edge_cases) {
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_Q4_0, 0), 0);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_Q4_0, 32), 18);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_Q4_0, 4096), 128 * 18);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_Q4_0, 31), 0);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_Q4_0, 33), 0);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_Q4_0, -32), 0);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_Q6_K, 768), 3 * 210);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_Q6_K, 128), 0);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_F32, 7), 28);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_F32, -1), 0);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_BF16, 3), 6);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_I64, 5), 40);
    CHECK_EQ_INT(tensor_row_size(4, 32), 0);
    CHECK_EQ_INT(tensor_row_size(-1, 32), 0);
    CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_COUNT, 32), 0);
    /* byte counts that do not fit a size_t are refused, not wrapped */
    if (sizeof(size_t) == 8) {
        CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_F64, INT64_MAX), 0);
        CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_F32, INT64_MAX), 0);
        CHECK_EQ_INT(tensor_row_size(TENSOR_TYPE_I8, INT64_MAX), INT64_MAX);
        const int64_t n = INT64_MAX - INT64_MAX % 256;
        CHECK(tensor_row_size(TENSOR_TYPE_Q4_K, n) == (size_t)(n / 256) * 144u);
    }
}

/* ---- golden data --------------------------------------------------------- */

/* One tests/data/quant_ref/<TYPE>.qref file (see tests/data/README.md). */
struct golden {
    uint8_t *file;
    uint32_t type, block_size, type_size, n_blocks, n_rows, row_len;
    const uint8_t *blocks;  /* n_blocks * type_size */
    const uint8_t *deq;     /* n_blocks * block_size float32 */
    const uint8_t *q_in;    /* n_rows * row_len float32 */
    const uint8_t *q_out;   /* n_rows * row_len / block_size * type_size */
};

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Loads a golden file, reporting a test failure (and returning false) if it
 * is missing or malformed: the data is committed, so absence is an error. */
static bool golden_load(const char *name, struct golden *g) {
    memset(g, 0, sizeof *g);
    const char *dir = test_env("KVIK_TEST_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/quant_ref/%s.qref", *dir ? dir : "tests/data", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        test_fail(__FILE__, __LINE__, "cannot open golden file %s (run scripts/gen_quant_ref.py)",
                  path);
        return false;
    }
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    g->file = size > 0 ? malloc((size_t)size) : NULL;
    const bool read_ok = g->file && fread(g->file, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!read_ok || size < 32 || memcmp(g->file, "KVQR", 4) != 0 || rd_u32(g->file + 4) != 1) {
        test_fail(__FILE__, __LINE__, "%s: not a version-1 KVQR file", path);
        free(g->file);
        g->file = NULL;
        return false;
    }
    const uint8_t *h = g->file;
    g->type = rd_u32(h + 8);
    g->block_size = rd_u32(h + 12);
    g->type_size = rd_u32(h + 16);
    g->n_blocks = rd_u32(h + 20);
    g->n_rows = rd_u32(h + 24);
    g->row_len = rd_u32(h + 28);
    const uint64_t deq_bytes = (uint64_t)g->n_blocks * g->block_size * 4;
    const uint64_t raw_bytes = (uint64_t)g->n_blocks * g->type_size;
    const uint64_t qin_bytes = (uint64_t)g->n_rows * g->row_len * 4;
    const uint64_t qout_bytes =
        g->block_size ? (uint64_t)g->n_rows * (g->row_len / g->block_size) * g->type_size : 0;
    if (g->block_size == 0 || g->row_len % g->block_size != 0 ||
        32 + raw_bytes + deq_bytes + qin_bytes + qout_bytes != (uint64_t)size) {
        test_fail(__FILE__, __LINE__, "%s: sizes in the header do not add up", path);
        free(g->file);
        g->file = NULL;
        return false;
    }
    g->blocks = h + 32;
    g->deq = g->blocks + raw_bytes;
    g->q_in = g->deq + deq_bytes;
    g->q_out = g->q_in + qin_bytes;
    return true;
}

static void golden_free(struct golden *g) {
    free(g->file);
    g->file = NULL;
}

static const char *const GOLDEN_TYPES[] = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1",
                                           "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K",
                                           "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"};
#define N_GOLDEN (int)(sizeof GOLDEN_TYPES / sizeof GOLDEN_TYPES[0])

/* Checks the header against the traits; returns them, or NULL on mismatch. */
static const struct type_traits *golden_traits(const char *name, const struct golden *g) {
    const struct type_traits *t = tensor_type_traits(tensor_type_from_name(name));
    CHECK_MSG(t != NULL, "%s: unknown type", name);
    if (!t) return NULL;
    CHECK_EQ_INT(g->type, tensor_type_from_name(name));
    CHECK_EQ_INT(g->block_size, t->block_size);
    CHECK_EQ_INT(g->type_size, t->type_size);
    if ((int64_t)g->block_size != t->block_size || g->type_size != t->type_size) return NULL;
    return t;
}

TEST(types_to_float_matches_gguf_py_bit_exactly) {
    for (int i = 0; i < N_GOLDEN; i++) {
        const char *name = GOLDEN_TYPES[i];
        struct golden g;
        if (!golden_load(name, &g)) continue;
        const struct type_traits *t = golden_traits(name, &g);
        if (!t || !t->to_float || g.n_blocks == 0) {
            CHECK_MSG(t && t->to_float && g.n_blocks > 0, "%s: nothing to check", name);
            golden_free(&g);
            continue;
        }
        const int64_t n = (int64_t)g.n_blocks * g.block_size;
        /* copies: the blocks' fields need their natural alignment */
        void *blocks = malloc((size_t)g.n_blocks * g.type_size);
        uint32_t *want = malloc((size_t)n * 4);
        float *got = malloc((size_t)n * 4);
        memcpy(blocks, g.blocks, (size_t)g.n_blocks * g.type_size);
        memcpy(want, g.deq, (size_t)n * 4);
        t->to_float(blocks, got, n);
        int64_t bad = 0, first = -1;
        for (int64_t k = 0; k < n; k++) {
            if (f32_to_bits(got[k]) != want[k]) {
                if (first < 0) first = k;
                bad++;
            }
        }
        CHECK_MSG(bad == 0, "%s: %lld of %lld values differ; first at block %lld weight %lld: "
                  "got %.9g (0x%08x), gguf-py %.9g (0x%08x)", name, (long long)bad, (long long)n,
                  (long long)(first / g.block_size), (long long)(first % g.block_size),
                  first >= 0 ? got[first] : 0.0, first >= 0 ? f32_to_bits(got[first]) : 0u,
                  first >= 0 ? f32_from_bits(want[first]) : 0.0, first >= 0 ? want[first] : 0u);
        free(blocks);
        free(want);
        free(got);
        golden_free(&g);
    }
}

TEST(types_from_float_matches_gguf_py_bytes) {
    int checked = 0;
    for (int i = 0; i < N_GOLDEN; i++) {
        const char *name = GOLDEN_TYPES[i];
        struct golden g;
        if (!golden_load(name, &g)) continue;
        const struct type_traits *t = golden_traits(name, &g);
        if (!t || g.n_rows == 0) {
            golden_free(&g);
            continue;
        }
        CHECK_MSG(t->from_float != NULL, "%s: golden rows but no from_float", name);
        if (!t->from_float) {
            golden_free(&g);
            continue;
        }
        const size_t row_bytes = tensor_row_size((int)g.type, g.row_len);
        float *x = malloc((size_t)g.row_len * 4);
        uint8_t *q = malloc(row_bytes);
        for (uint32_t r = 0; r < g.n_rows; r++) {
            memcpy(x, g.q_in + (size_t)r * g.row_len * 4, (size_t)g.row_len * 4);
            memset(q, 0xAA, row_bytes);
            t->from_float(x, q, g.row_len);
            const uint8_t *want = g.q_out + (size_t)r * row_bytes;
            size_t k = 0;
            while (k < row_bytes && q[k] == want[k]) k++;
            CHECK_MSG(k == row_bytes, "%s row %u: byte %zu (block %zu, offset %zu) is 0x%02x, "
                      "gguf-py wrote 0x%02x", name, r, k, k / g.type_size, k % g.type_size,
                      k < row_bytes ? q[k] : 0, k < row_bytes ? want[k] : 0);
        }
        checked++;
        free(x);
        free(q);
        golden_free(&g);
    }
    /* F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 */
    CHECK_EQ_INT(checked, 8);
}

/* ---- round trips --------------------------------------------------------- */

static float gaussian(uint64_t *s) {
    const double u1 = 1.0 - (double)test_rand_uniform(s, 0.0f, 1.0f); /* (0, 1] */
    const double u2 = (double)test_rand_uniform(s, 0.0f, 1.0f);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/*
 * Bounds on dequantize(quantize(x)) for Gaussian data (mean 0, deviation
 * sigma), as RMSE / sigma. A grid of step D rounded to nearest has error
 * RMS D / sqrt(12); D comes from the block's largest magnitude or range.
 * Over 32 Gaussian weights E[max|x|] ~ 2.4 sigma and E[max - min] ~ 4.1
 * sigma; over 16, E[max|x|] ~ 2.1 sigma; over 256, ~ 3.0 sigma. Each bound
 * is that estimate with about 25% added for block-to-block spread, the
 * half-float scales and clipping at the grid's short end:
 *   Q4_0  D = max|x|/8 ~ 0.30s -> 0.087s    bound 0.11
 *   Q5_0  D = max|x|/16          -> 0.043s  bound 0.055
 *   Q8_0, Q8_1  D = max|x|/127   -> 0.0055s bound 0.007
 *   Q4_1  D = (max-min)/15 ~ 0.27s -> 0.079s bound 0.10
 *   Q5_1  D = (max-min)/31       -> 0.038s  bound 0.048
 *   Q2_K  D = (max-min)/3 over 16 ~ 3.5s/3 -> 0.34s (the fitted scale and
 *         min only lower it; 4-bit scales and mins add <= 1/30 relative)
 *                                                            bound 0.42
 *   Q3_K  D = max|x|/4 over 16 ~ 0.53s -> 0.15s (6-bit scales add <= 1/64
 *         relative)                                          bound 0.19
 *   Q4_K  as Q4_1 per 32 (the fitted min/scale only lower it; the 6-bit
 *         scales and mins add <= 1/(2*63) relative)         bound 0.10
 *   Q5_K  as Q5_1 per 32                                     bound 0.048
 *   Q6_K  D = max|x|/32 over 16 ~ 0.066s -> 0.019s (int8 scales add
 *         <= 1/256 relative)                                 bound 0.024
 *   Q8_K  D = max|x|/127 over 256 ~ 0.024s -> 0.0068s (float scale)
 *                                                            bound 0.0085
 *   F16   relative rounding 2^-11, RMS ~ 2^-11/sqrt(3)       bound 3e-4
 *   BF16  relative rounding 2^-8                             bound 2.3e-3
 *   F32   exact                                              bound 0
 */
static double rmse_bound(int type) {
    switch (type) {
    case TENSOR_TYPE_Q4_0: return 0.11;
    case TENSOR_TYPE_Q5_0: return 0.055;
    case TENSOR_TYPE_Q8_0:
    case TENSOR_TYPE_Q8_1: return 0.007;
    case TENSOR_TYPE_Q4_1: return 0.10;
    case TENSOR_TYPE_Q5_1: return 0.048;
    case TENSOR_TYPE_Q2_K: return 0.42;
    case TENSOR_TYPE_Q3_K: return 0.19;
    case TENSOR_TYPE_Q4_K: return 0.10;
    case TENSOR_TYPE_Q5_K: return 0.048;
    case TENSOR_TYPE_Q6_K: return 0.024;
    case TENSOR_TYPE_Q8_K: return 0.0085;
    case TENSOR_TYPE_F16: return 3e-4;
    case TENSOR_TYPE_BF16: return 2.3e-3;
    default: return 0.0;
    }
}

/*
 * A per-weight bound, for the types whose one scale comes straight from the
 * block (n weights, x[k] the weight checked): the error is at most half a
 * step (a whole step at the symmetric types' far end, where the quant is
 * capped one short), plus the half-float rounding of the scale and min: up
 * to nmax * |d| * 2^-11 + |min| * 2^-11, below max|x| * 2^-10. The float
 * types round each value on its own. Returns -1 where there is none here.
 */
static double weight_error_bound(int type, const float *x, int n, int k) {
    float lo = x[0], hi = x[0], amax = 0;
    for (int j = 0; j < n; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
        amax = fmaxf(amax, fabsf(x[j]));
    }
    const double slack = amax * ldexp(1.0, -10);
    switch (type) {
    case TENSOR_TYPE_Q4_0: return amax / 8.0 + slack;
    case TENSOR_TYPE_Q5_0: return amax / 16.0 + slack;
    case TENSOR_TYPE_Q8_0:
    case TENSOR_TYPE_Q8_1: return 0.5 * amax / 127.0 + slack;
    case TENSOR_TYPE_Q4_1: return 0.5 * (hi - lo) / 15.0 + slack;
    case TENSOR_TYPE_Q5_1: return 0.5 * (hi - lo) / 31.0 + slack;
    /* float scale: only x * (1/d) and q * d round, ~127 ulps at most */
    case TENSOR_TYPE_Q8_K: return 0.5 * amax / 127.0 * (1 + 1e-4);
    /* half: 2^-11 relative in the normal range, 2^-25 among subnormals */
    case TENSOR_TYPE_F16: return fabs(x[k]) * ldexp(1.0, -11) + ldexp(1.0, -25);
    case TENSOR_TYPE_BF16: return fabs(x[k]) * ldexp(1.0, -8);
    case TENSOR_TYPE_F32: return 0.0;
    default: return -1;
    }
}

/* Quantizes x (n weights) to `type` and dequantizes it into y. */
static void round_trip(int type, const float *x, float *y, int64_t n) {
    const struct type_traits *t = tensor_type_traits(type);
    void *q = malloc(tensor_row_size(type, n));
    t->from_float(x, q, n);
    t->to_float(q, y, n);
    free(q);
}

TEST(types_round_trip_error_is_bounded) {
    enum { N = 16 * 256 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    static const float sigmas[] = {1.0f, 0.05f, 1e3f};
    for (int i = 0; i < N_QUANTIZABLE; i++) {
        const int type = QUANTIZABLE[i];
        const struct type_traits *t = tensor_type_traits(type);
        REQUIRE(t && t->from_float && t->to_float);
        for (int si = 0; si < 3; si++) {
            uint64_t rng = 0x1234567ull + (uint64_t)type * 977 + (uint64_t)si;
            for (int k = 0; k < N; k++) x[k] = sigmas[si] * gaussian(&rng);
            round_trip(type, x, y, N);
            double se = 0, sx = 0;
            int64_t over = 0, first = -1;
            for (int k = 0; k < N; k++) {
                se += ((double)y[k] - x[k]) * ((double)y[k] - x[k]);
                sx += (double)x[k] * x[k];
            }
            /* per-weight bounds over the type's blocks (32 for the floats) */
            const int bs = (int)(t->block_size > 1 ? t->block_size : 32);
            for (int k = 0; k < N; k++) {
                const int b0 = k / bs * bs;
                const double bound = weight_error_bound(type, x + b0, bs, k - b0);
                if (bound < 0) break;
                if (fabs((double)y[k] - x[k]) > bound) {
                    if (first < 0) first = k;
                    over++;
                }
            }
            const double rel = sqrt(se / N) / sqrt(sx / N);
            CHECK_MSG(rel <= rmse_bound(type), "%s sigma %g: RMSE/RMS %.6f > bound %.6f", t->name,
                      (double)sigmas[si], rel, rmse_bound(type));
            CHECK_MSG(over == 0, "%s sigma %g: %lld weights beyond the per-block bound, "
                      "first %lld: %.9g -> %.9g", t->name, (double)sigmas[si], (long long)over,
                      (long long)first, first >= 0 ? (double)x[first] : 0.0,
                      first >= 0 ? (double)y[first] : 0.0);
        }
    }
    free(x);
    free(y);
}

TEST(types_round_trip_special_rows) {
    /* zeros come back as exact zeros; a constant row, one outlier among
     * zeros and tiny values come back finite, without NaN */
    enum { N = 2 * 256 };
    float x[N], y[N];
    for (int i = 0; i < N_QUANTIZABLE; i++) {
        const int type = QUANTIZABLE[i];
        const struct type_traits *t = tensor_type_traits(type);
        REQUIRE(t && t->from_float && t->to_float);
        memset(x, 0, sizeof x);
        round_trip(type, x, y, N);
        int nonzero = 0;
        for (int k = 0; k < N; k++) nonzero += y[k] != 0.0f;
        CHECK_MSG(nonzero == 0, "%s: zeros came back as %d non-zeros", t->name, nonzero);

        for (int kind = 0; kind < 4; kind++) {
            for (int k = 0; k < N; k++) {
                x[k] = kind == 0   ? 0.37f
                       : kind == 1 ? (k == 77 ? -50.0f : 0.0f)
                       : kind == 2 ? 1e-30f * (float)((k % 7) - 3)
                                   : (float)(k % 5) * 0.01f + 2.0f; /* all positive */
            }
            round_trip(type, x, y, N);
            int bad = 0;
            for (int k = 0; k < N; k++) bad += !isfinite(y[k]);
            CHECK_MSG(bad == 0, "%s kind %d: %d non-finite outputs", t->name, kind, bad);
            /* the outlier itself is kept to within its block's step */
            if (kind == 1) CHECK_MSG(fabsf(y[77] + 50.0f) <= 50.0f / 7, "%s: outlier -> %g",
                                     t->name, (double)y[77]);
            if (kind == 0) {
                double worst = 0;
                for (int k = 0; k < N; k++) worst = fmax(worst, fabs((double)y[k] - 0.37));
                CHECK_MSG(worst <= 0.37 / 7, "%s: constant 0.37 off by %g", t->name, worst);
            }
        }
    }
}

/*
 * Blocks whose largest-magnitude quant is at the end of the grid come back
 * unchanged through dequantize then quantize for the symmetric types: the
 * recovered scale is exactly the stored half (127*d/127, -8*d/-8 and
 * -16*d/-16 are exact), and x * (1/d) is within an ulp of the integer.
 */
TEST(types_requantize_symmetric_blocks_is_identity) {
    uint64_t rng = 99;
    static const int types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q8_0,
                                TENSOR_TYPE_Q8_1};
    for (int ti = 0; ti < 4; ti++) {
        const struct type_traits *t = tensor_type_traits(types[ti]);
        enum { NB = 64 };
        _Alignas(16) uint8_t q[NB * 36], q2[NB * 36];
        float x[NB * QK];
        for (size_t k = 0; k < sizeof q; k++) q[k] = (uint8_t)test_rand_u64(&rng);
        for (int b = 0; b < NB; b++) {
            uint8_t *blk = q + (size_t)b * t->type_size;
            /* a normal half scale, 2^-10 .. 2^10; of either sign where the
             * quantizer can write either (Q8's d is always >= 0) */
            const bool q8 = types[ti] == TENSOR_TYPE_Q8_0 || types[ti] == TENSOR_TYPE_Q8_1;
            const float d = ldexpf(test_rand_uniform(&rng, 1.0f, 2.0f),
                                   (int)(test_rand_u64(&rng) % 21) - 10) *
                            (!q8 && (test_rand_u64(&rng) & 1) ? -1.0f : 1.0f);
            const uint16_t dh = fp32_to_fp16(d);
            memcpy(blk, &dh, 2);
            const int at = (int)(test_rand_u64(&rng) % QK);
            switch (types[ti]) {
            case TENSOR_TYPE_Q4_0: { /* quant 0 (= -8) at `at`, no other 0 */
                block_q4_0 *p = (block_q4_0 *)blk;
                for (int j = 0; j < QK / 2; j++) {
                    if ((p->qs[j] & 0xF) == 0) p->qs[j] |= 1;
                    if ((p->qs[j] >> 4) == 0) p->qs[j] |= 0x10;
                }
                p->qs[at % 16] &= (uint8_t)(at < 16 ? 0xF0 : 0x0F);
                break;
            }
            case TENSOR_TYPE_Q5_0: { /* quant 0 (= -16) at `at` only */
                block_q5_0 *p = (block_q5_0 *)blk;
                for (int j = 0; j < QK; j++) {
                    const int nib = j < 16 ? p->qs[j] & 0xF : p->qs[j - 16] >> 4;
                    const int hb = (p->qh[j / 8] >> (j % 8)) & 1;
                    if (nib == 0 && hb == 0) p->qh[j / 8] |= (uint8_t)(1 << (j % 8));
                }
                p->qh[at / 8] &= (uint8_t)~(1 << (at % 8));
                p->qs[at % 16] &= (uint8_t)(at < 16 ? 0xF0 : 0x0F);
                break;
            }
            default: { /* Q8_0 / Q8_1: +-127 at `at`, no -128 */
                int8_t *qs = (int8_t *)(blk + (types[ti] == TENSOR_TYPE_Q8_0 ? 2 : 4));
                for (int j = 0; j < QK; j++)
                    if (qs[j] == -128) qs[j] = -127;
                qs[at] = (test_rand_u64(&rng) & 1) ? 127 : -127;
                break;
            }
            }
        }
        t->to_float(q, x, NB * QK);
        t->from_float(x, q2, NB * QK);
        int bad = 0;
        for (int b = 0; b < NB; b++) {
            const size_t off = (size_t)b * t->type_size;
            /* Q8_1's s is recomputed from the quants: compare d and qs */
            if (types[ti] == TENSOR_TYPE_Q8_1)
                bad += memcmp(q + off, q2 + off, 2) != 0 || memcmp(q + off + 4, q2 + off + 4, 32) != 0;
            else
                bad += memcmp(q + off, q2 + off, t->type_size) != 0;
        }
        CHECK_MSG(bad == 0, "%s: %d of %d blocks changed", t->name, bad, (int)NB);
    }
}

TEST(types_q8_1_sum_and_q8_K_bsums) {
    uint64_t rng = 5;
    enum { N = 4 * 256 };
    float x[N];
    for (int k = 0; k < N; k++) x[k] = gaussian(&rng) * 3.0f;
    x[300] = 0.0f;

    block_q8_1 b1[N / QK];
    quantize_row_q8_1_ref(x, b1, N);
    for (int b = 0; b < N / QK; b++) {
        float amax = 0;
        int sum = 0;
        for (int j = 0; j < QK; j++) {
            amax = fmaxf(amax, fabsf(x[b * QK + j]));
            sum += b1[b].qs[j];
        }
        const float d = amax / 127.0f; /* s uses d before its rounding to half */
        CHECK_EQ_INT(b1[b].d, fp32_to_fp16(d));
        CHECK_EQ_INT(b1[b].s, fp32_to_fp16((float)sum * d));
    }

    block_q8_K bk[N / QK_K];
    quantize_row_q8_K_ref(x, bk, N);
    float y[N];
    dequantize_row_q8_K(bk, y, N);
    for (int b = 0; b < N / QK_K; b++) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK_K; j++) {
            if (fabsf(x[b * QK_K + j]) > amax) {
                amax = fabsf(x[b * QK_K + j]);
                max = x[b * QK_K + j];
            }
        }
        /* x = q * d with d = -max/127: the largest weight is quant -127 */
        CHECK(fabsf(bk[b].d + max / 127.0f) <= 1e-6f * amax);
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += bk[b].qs[16 * j + k];
            CHECK_EQ_INT(bk[b].bsums[j], sum);
        }
    }
    /* an all-zero super-block: d, quants and sums all 0 */
    memset(x, 0, sizeof x);
    memset(bk, 0x55, sizeof bk);
    quantize_row_q8_K_ref(x, bk, QK_K);
    const block_q8_K zero = {0};
    CHECK(memcmp(&bk[0], &zero, sizeof zero) == 0);
}

/*
 * The K-quant quantizers have no gguf-py counterpart; beyond the error
 * bounds, check that their output is a fixed point of sorts: re-quantizing
 * the dequantized weights is at least as accurate as the first pass (the
 * fit is a search, so it need not return the same bytes), and that the
 * stored scales are in range.
 */
TEST(types_k_quant_requantize_is_stable) {
    static const int types[] = {TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K};
    enum { N = 8 * 256 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *z = malloc(N * sizeof *z);
    for (int ti = 0; ti < 3; ti++) {
        const struct type_traits *t = tensor_type_traits(types[ti]);
        uint64_t rng = 42 + (uint64_t)ti;
        for (int k = 0; k < N; k++) x[k] = gaussian(&rng) * 0.5f + 0.1f;
        round_trip(types[ti], x, y, N);
        round_trip(types[ti], y, z, N);
        double e1 = 0, e2 = 0, sy = 0;
        for (int k = 0; k < N; k++) {
            e1 += ((double)y[k] - x[k]) * ((double)y[k] - x[k]);
            e2 += ((double)z[k] - y[k]) * ((double)z[k] - y[k]);
            sy += (double)y[k] * y[k];
        }
        /* y already lies on a grid of this type, so the second pass loses
         * far less than the first did */
        CHECK_MSG(e2 <= 0.25 * e1, "%s: requantizing error %g vs first pass %g", t->name, e2, e1);
        CHECK(sy > 0);
    }
    free(x);
    free(y);
    free(z);
}

/*
 * The reference quantizers' exact bytes, pinned. gguf-py cannot quantize
 * Q8_1 or the K-quants, so their bytes were checked once against
 * llama.cpp's own ggml (ggml 0.25.3, built from the llama-cpp-python
 * 0.3.36 package, calling ggml_quantize_chunk without an importance matrix
 * and quantize_row_q8_{1,K}_ref): all matched, and these FNV-1a hashes of
 * the output fix it. The input is made without libm, so it is the same
 * everywhere. If a change to the quantizers moves a hash, it no longer
 * writes what llama.cpp writes.
 */
static void pinned_input(float *x, int n_blocks) {
    static const float scales[] = {1e-3f, 0.02f, 1.0f, 30.0f, 1e3f, 4e-5f};
    uint64_t rng = 0x5EED;
    for (int b = 0; b < n_blocks; b++) {
        float *xb = x + (size_t)b * 256;
        const float s = scales[b % 6];
        for (int k = 0; k < 256; k++) { /* roughly Gaussian: a sum of four uniforms */
            float u = 0;
            for (int r = 0; r < 4; r++) u += test_rand_uniform(&rng, -1.0f, 1.0f);
            xb[k] = u * s;
        }
        switch (b % 8) {
        case 3: for (int k = 0; k < 256; k++) xb[k] += 2.5f * s; break;   /* shifted */
        case 5: xb[(b * 37) % 256] = 40.0f * s; break;                   /* an outlier */
        case 6: if (b % 16 == 6) memset(xb, 0, 256 * sizeof *xb); break; /* all zero */
        case 7: for (int k = 0; k < 64; k++) xb[k] = 0.0f; break;        /* zero sub-blocks */
        default: break;
        }
    }
}

static uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

TEST(types_quantizer_bytes_match_llama_cpp) {
    static const struct {
        int type;
        uint64_t hash;
    } pinned[] = {
        {TENSOR_TYPE_Q4_0, 0x83d0d3ba818d85afull}, {TENSOR_TYPE_Q4_1, 0x63224f034df6e9c7ull},
        {TENSOR_TYPE_Q5_0, 0x24f2e6f97e561f1cull}, {TENSOR_TYPE_Q5_1, 0xf317e9c6a84ab704ull},
        {TENSOR_TYPE_Q8_0, 0xe86d3f3d9cdfe3c7ull}, {TENSOR_TYPE_Q8_1, 0xcfa192dcd1b1193eull},
        {TENSOR_TYPE_Q4_K, 0x6c00e4d707b6da76ull}, {TENSOR_TYPE_Q5_K, 0x6b0f1b379f06a0e9ull},
        {TENSOR_TYPE_Q6_K, 0x2f93ee68fefb5a0bull}, {TENSOR_TYPE_Q8_K, 0x6ce7f62b4c50f1e2ull},
    };
    enum { NB = 48, N = NB * 256 };
    float *x = malloc(N * sizeof *x);
    pinned_input(x, NB);
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        const struct type_traits *t = tensor_type_traits(pinned[i].type);
        const size_t bytes = tensor_row_size(pinned[i].type, N);
        uint8_t *q = malloc(bytes);
        memset(q, 0xAA, bytes);
        t->from_float(x, q, N);
        const uint64_t h = fnv1a(q, bytes);
        CHECK_MSG(h == pinned[i].hash, "%s: output hash 0x%016llx, llama.cpp's 0x%016llx", t->name,
                  (unsigned long long)h, (unsigned long long)pinned[i].hash);
        free(q);
    }
    free(x);
}

/* The whole-word K-quant scale unpacking the SIMD kernels use agrees with
 * the byte-by-byte k_scale_min on random scale arrays. */
TEST(types_k_scales_words_match_k_scale_min) {
    uint64_t rng = 7;
    for (int iter = 0; iter < 2000; iter++) {
        uint8_t q[12];
        for (int i = 0; i < 12; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            q[i] = (uint8_t)(rng >> 56);
        }
        uint32_t w[4];
        k_scales_mins_words(q, w);
        uint8_t bytes[16];
        memcpy(bytes, w, 16);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            k_scale_min(j, q, &sc, &m);
            CHECK_EQ_INT(bytes[j], sc);
            CHECK_EQ_INT(bytes[8 + j], m);
        }
    }
}
