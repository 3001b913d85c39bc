/*
 * bench_quant_rows.c — time one row quantizer on 64 rows x 4096 Gaussian
 * weights (tests/quant_rows_cases.h's PRNG), one thread, thread CPU time,
 * the best of REPS (env, default 3) runs; prints "TYPE none|imatrix NS"
 * (ns per weight). Built twice by scripts/bench_quant_rows.sh: with -DPEER
 * against llama.cpp's ggml-base (ggml_quantize_chunk), without against
 * kvik (tensor_quantize_rows).
 *
 * Usage: bench_quant_rows TYPE [imatrix]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "quant_rows_cases.h"

#ifdef PEER
#include "ggml.h"
static int type_id(const char *name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *n = ggml_type_name((enum ggml_type)t);
        if (n && strcasecmp(n, name) == 0) return t;
    }
    return -1;
}
static void quantize(int t, const float *x, void *y, int64_t rows, int64_t n, const float *w) {
    ggml_quantize_chunk((enum ggml_type)t, x, y, 0, rows, n, w);
}
#else
#include "tensor/quantize.h"
#include "tensor/tensor.h"
static int type_id(const char *name) { return tensor_type_from_name(name); }
static void quantize(int t, const float *x, void *y, int64_t rows, int64_t n, const float *w) {
    tensor_quantize_rows(t, x, y, rows, n, w);
}
#endif

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    enum { ROWS = 64, N = 4096 };
    if (argc < 2 || type_id(argv[1]) < 0) {
        fprintf(stderr, "usage: %s TYPE [imatrix]\n", argv[0]);
        return 2;
    }
    float *x = malloc((size_t)ROWS * N * sizeof *x), *w = malloc(N * sizeof *w);
    void *y = malloc((size_t)ROWS * N * sizeof *x);
    uint64_t s = 1;
    for (int k = 0; k < ROWS * N; k++) x[k] = 0.02f * qr_gauss(&s);
    for (int k = 0; k < N; k++) w[k] = 0.1f + qr_uniform(&s);
    const int weighted = argc > 2, reps = getenv("REPS") ? atoi(getenv("REPS")) : 3;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = cpu_now();
        quantize(type_id(argv[1]), x, y, ROWS, N, weighted ? w : NULL);
        const double dt = cpu_now() - t0;
        if (dt < best) best = dt;
    }
    printf("%s %s %.2f\n", argv[1], weighted ? "imatrix" : "none", best * 1e9 / (ROWS * N));
    free(x);
    free(w);
    free(y);
    return 0;
}
