/*
 * test_quantize_rows.c — tensor_quantize_rows (src/tensor/quantize.h).
 *
 *  - bytes: for every case of quant_rows_cases.h (row sets of eleven
 *    distributions, lengths 32*k and 256*k), every type and no / dense /
 *    holed importance weights, the sha256 of the output equals that of
 *    llama.cpp's ggml_quantize_chunk on the same input
 *    (tests/data/quant_rows_golden.txt, by scripts/gen_quant_golden_rows.sh);
 *  - dequantize(quantize(x)) with importance weights stays within the
 *    types' error bounds, and weighting a column more lowers its error;
 *  - rows with NaN, infinities and extreme values, and weights with them,
 *    are quantized without fault (the sanitizer build checks for UB);
 *  - which types use weights, and the refusals (unsupported type, row
 *    length not a multiple of the block).
 */
#include <float.h>
#include <stdlib.h>

#include "base/base.h"
#include "quant_rows_cases.h"
#include "tensor/quantize.h"
#include "tensor/tensor.h"
#include "test.h"

/* ---- golden bytes -------------------------------------------------------- */

struct golden_line {
    char type[8], dist[16], shape[16], weights[8], sha[65];
};

static struct golden_line *golden_read(int *count) {
    const char *dir = test_env("KVIK_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/quant_rows_golden.txt", *dir ? dir : "tests/data");
    size_t len;
    char *text = test_slurp(path, &len);
    *count = 0;
    if (!text) {
        test_fail(__FILE__, __LINE__, "cannot read %s (scripts/gen_quant_golden_rows.sh makes it)", path);
        return NULL;
    }
    int cap = 1024;
    struct golden_line *lines = malloc((size_t)cap * sizeof *lines);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        if (*count == cap) lines = realloc(lines, (size_t)(cap *= 2) * sizeof *lines);
        struct golden_line *g = &lines[*count];
        if (sscanf(line, "%7s %15s %15s %7s %64s", g->type, g->dist, g->shape, g->weights, g->sha) == 5) (*count)++;
        else test_fail(__FILE__, __LINE__, "bad golden line: %s", line);
    }
    free(text);
    return lines;
}

static const char *golden_find(const struct golden_line *lines, int n, const char *type, const char *dist,
                               const char *shape, const char *weights) {
    for (int i = 0; i < n; i++)
        if (!strcmp(lines[i].type, type) && !strcmp(lines[i].dist, dist) && !strcmp(lines[i].shape, shape) &&
            !strcmp(lines[i].weights, weights))
            return lines[i].sha;
    return NULL;
}

static void sha256_hex(const void *p, size_t n, char hex[65]) {
    struct sha256 s;
    uint8_t d[32];
    sha256_init(&s);
    sha256_update(&s, p, n);
    sha256_final(&s, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

TEST(quantize_rows_match_llama_cpp_bytes) {
    int n_golden;
    struct golden_line *golden = golden_read(&n_golden);
    if (!golden) return;
    int checked = 0;
    /* mismatches per type and weight kind */
    int bad[QR_N_TYPES][QR_W_COUNT] = {{0}};
    for (int c = 0; c < QR_N_CASES; c++) {
        const struct qr_case *k = &QR_CASES[c];
        const int64_t n = (int64_t)k->n_rows * k->n_per_row;
        float *x = malloc((size_t)n * sizeof *x);
        float *w = malloc((size_t)k->n_per_row * sizeof *w);
        qr_fill_rows(c, x);
        char shape[16];
        snprintf(shape, sizeof shape, "%dx%d", k->n_rows, k->n_per_row);
        for (int ti = 0; ti < QR_N_TYPES; ti++) {
            if (qr_type_is_k(QR_TYPES[ti]) && k->n_per_row % 256 != 0) continue;
            const int type = tensor_type_from_name(QR_TYPES[ti]);
            REQUIRE(type >= 0 && tensor_quantize_supported(type));
            const size_t bytes = tensor_row_size(type, k->n_per_row) * (size_t)k->n_rows;
            uint8_t *q = malloc(bytes);
            for (int wk = 0; wk < QR_W_COUNT; wk++) {
                if (wk != QR_W_NONE) qr_fill_weights(c, (enum qr_weights)wk, w);
                memset(q, 0xAA, bytes);
                const size_t got = tensor_quantize_rows(type, x, q, k->n_rows, k->n_per_row,
                                                        wk == QR_W_NONE ? NULL : w);
                CHECK_EQ_INT(got, bytes);
                const char *want = golden_find(golden, n_golden, QR_TYPES[ti], QR_DIST_NAMES[k->dist], shape,
                                               QR_WEIGHT_NAMES[wk]);
                CHECK_MSG(want, "no golden hash for %s %s %s %s", QR_TYPES[ti], QR_DIST_NAMES[k->dist], shape,
                          QR_WEIGHT_NAMES[wk]);
                if (!want) continue;
                char hex[65];
                sha256_hex(q, bytes, hex);
                if (strcmp(hex, want) != 0) {
                    if (bad[ti][wk]++ == 0)
                        test_fail(__FILE__, __LINE__, "%s %s %s weights %s: sha256 %s, llama.cpp's %s",
                                  QR_TYPES[ti], QR_DIST_NAMES[k->dist], shape, QR_WEIGHT_NAMES[wk], hex, want);
                }
                checked++;
            }
            free(q);
        }
        free(x);
        free(w);
    }
    for (int ti = 0; ti < QR_N_TYPES; ti++)
        for (int wk = 0; wk < QR_W_COUNT; wk++)
            CHECK_MSG(bad[ti][wk] == 0, "%s weights %s: %d cases differ from llama.cpp", QR_TYPES[ti],
                      QR_WEIGHT_NAMES[wk], bad[ti][wk]);
    CHECK_EQ_INT(checked, n_golden); /* every golden line was checked */
    free(golden);
}

/* ---- error with importance weights ----------------------------------------- */

/*
 * RMSE / RMS of dequantize(quantize(x)) for Gaussian rows: the bounds
 * test_types.c derives for the reference quantizers from each grid's step.
 * The weighted fits minimize a weighted error, here with weights close to
 * uniform, so they stay within them too.
 */
static double weighted_rmse_bound(int type) {
    switch (type) {
    case TENSOR_TYPE_Q4_0: return 0.11;
    case TENSOR_TYPE_Q5_0: return 0.055;
    case TENSOR_TYPE_Q4_1: return 0.10;
    case TENSOR_TYPE_Q5_1: return 0.048;
    case TENSOR_TYPE_Q2_K: return 0.42;
    case TENSOR_TYPE_Q3_K: return 0.19;
    case TENSOR_TYPE_Q4_K: return 0.10;
    case TENSOR_TYPE_Q5_K: return 0.048;
    case TENSOR_TYPE_Q6_K: return 0.024;
    default: return 0.0;
    }
}

static const int WEIGHTED_TYPES[] = {
    TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q2_K,
    TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K,
};
#define N_WEIGHTED (int)(sizeof WEIGHTED_TYPES / sizeof WEIGHTED_TYPES[0])

TEST(quantize_rows_weighted_error_is_bounded) {
    enum { ROWS = 16, N = 1024 };
    float *x = malloc(ROWS * N * sizeof *x), *y = malloc(ROWS * N * sizeof *y);
    float w[N];
    uint64_t s = 42;
    for (int k = 0; k < ROWS * N; k++) x[k] = 0.03f * qr_gauss(&s);
    for (int k = 0; k < N; k++) w[k] = 0.5f + qr_uniform(&s);
    for (int i = 0; i < N_WEIGHTED; i++) {
        const int type = WEIGHTED_TYPES[i];
        const struct type_traits *t = tensor_type_traits(type);
        const size_t bytes = tensor_row_size(type, N) * ROWS;
        uint8_t *q = malloc(bytes);
        CHECK_EQ_INT(tensor_quantize_rows(type, x, q, ROWS, N, w), bytes);
        t->to_float(q, y, (int64_t)ROWS * N);
        double se = 0, sx = 0;
        for (int k = 0; k < ROWS * N; k++) {
            se += ((double)y[k] - x[k]) * ((double)y[k] - x[k]);
            sx += (double)x[k] * x[k];
        }
        const double rel = sqrt(se / sx);
        CHECK_MSG(rel <= weighted_rmse_bound(type), "%s: RMSE/RMS %.5f > %.5f", t->name, rel,
                  weighted_rmse_bound(type));
        free(q);
    }
    free(x);
    free(y);
}

/* Columns weighted 100 times more come back closer than the others. */
TEST(quantize_rows_weights_favour_heavy_columns) {
    enum { ROWS = 32, N = 512 };
    float *x = malloc(ROWS * N * sizeof *x), *y = malloc(ROWS * N * sizeof *y);
    float w[N];
    uint64_t s = 7;
    for (int k = 0; k < ROWS * N; k++) x[k] = qr_gauss(&s);
    for (int k = 0; k < N; k++) w[k] = k % 4 == 0 ? 100.0f : 1.0f;
    for (int i = 0; i < N_WEIGHTED; i++) {
        const int type = WEIGHTED_TYPES[i];
        const struct type_traits *t = tensor_type_traits(type);
        uint8_t *q = malloc(tensor_row_size(type, N) * ROWS);
        tensor_quantize_rows(type, x, q, ROWS, N, w);
        t->to_float(q, y, (int64_t)ROWS * N);
        double heavy = 0, light = 0;
        for (int k = 0; k < ROWS * N; k++) {
            const double e = ((double)y[k] - x[k]) * ((double)y[k] - x[k]);
            if (k % 4 == 0) heavy += e;
            else light += e / 3;
        }
        CHECK_MSG(heavy < light, "%s: heavy columns' squared error %g, others' %g", t->name, heavy, light);
        free(q);
    }
    free(x);
    free(y);
}

/* ---- hostile input ----------------------------------------------------------- */

TEST(quantize_rows_non_finite_input_does_not_fault) {
    enum { N = 512 };
    float x[2 * N], w[N];
    const float specials[] = {NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, FLT_MIN, 1e30f, -1e-40f};
    uint64_t s = 99;
    for (int kind = 0; kind < 5; kind++) {
        for (int k = 0; k < 2 * N; k++) {
            const float g = qr_gauss(&s);
            switch (kind) {
            case 0: x[k] = k % 37 == 5 ? NAN : g; break;                       /* scattered NaN */
            case 1: x[k] = specials[k % 8]; break;                             /* all special */
            case 2: x[k] = k % 64 == 0 ? INFINITY : g; break;                  /* infinities */
            case 3: x[k] = g * (k % 2 ? FLT_MAX : 1e-38f); break;              /* extremes */
            default: x[k] = k < N ? NAN : -INFINITY; break;                    /* whole rows */
            }
        }
        for (int k = 0; k < N; k++) w[k] = kind == 4 ? (k % 3 ? NAN : INFINITY) : (k % 5 ? 1.0f : FLT_MAX);
        for (int ti = 0; ti < QR_N_TYPES; ti++) {
            const int type = tensor_type_from_name(QR_TYPES[ti]);
            const size_t bytes = tensor_row_size(type, N) * 2;
            uint8_t *q = malloc(bytes);
            CHECK_EQ_INT(tensor_quantize_rows(type, x, q, 2, N, NULL), bytes);
            CHECK_EQ_INT(tensor_quantize_rows(type, x, q, 2, N, w), bytes);
            free(q);
        }
    }
}

/* ---- the interface ------------------------------------------------------------ */

TEST(quantize_rows_interface) {
    for (int ti = 0; ti < QR_N_TYPES; ti++) {
        const int type = tensor_type_from_name(QR_TYPES[ti]);
        CHECK_MSG(tensor_quantize_supported(type), "%s not supported", QR_TYPES[ti]);
        bool weighted = false;
        for (int i = 0; i < N_WEIGHTED; i++) weighted |= WEIGHTED_TYPES[i] == type;
        CHECK_MSG(tensor_quantize_uses_imatrix(type) == weighted, "%s: uses_imatrix", QR_TYPES[ti]);
    }
    CHECK(!tensor_quantize_supported(TENSOR_TYPE_Q8_K));
    CHECK(!tensor_quantize_supported(TENSOR_TYPE_Q8_1));
    CHECK(!tensor_quantize_supported(TENSOR_TYPE_I32));
    CHECK(!tensor_quantize_supported(-1));
    CHECK(!tensor_quantize_uses_imatrix(TENSOR_TYPE_Q8_K));
    float x[512] = {0}, w[512] = {0};
    uint8_t q[1024];
    CHECK_EQ_INT(tensor_quantize_rows(TENSOR_TYPE_Q8_K, x, q, 1, 256, NULL), 0);
    CHECK_EQ_INT(tensor_quantize_rows(TENSOR_TYPE_Q4_K, x, q, 1, 128, w), 0);
    CHECK_EQ_INT(tensor_quantize_rows(TENSOR_TYPE_Q4_0, x, q, 1, 48, NULL), 0);
    CHECK_EQ_INT(tensor_quantize_rows(TENSOR_TYPE_Q4_0, x, q, -1, 32, NULL), 0);
    CHECK_EQ_INT(tensor_quantize_rows(TENSOR_TYPE_Q4_0, x, q, 0, 32, NULL), 0);
    /* an all-zero row with all-zero weights quantizes to zeros */
    CHECK_EQ_INT(tensor_quantize_rows(TENSOR_TYPE_Q4_K, x, q, 2, 256, w), 2 * 144);
    float y[512];
    tensor_type_traits(TENSOR_TYPE_Q4_K)->to_float(q, y, 512);
    int nonzero = 0;
    for (int k = 0; k < 512; k++) nonzero += y[k] != 0.0f;
    CHECK_EQ_INT(nonzero, 0);
}
