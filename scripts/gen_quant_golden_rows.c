/*
 * gen_quant_golden_rows.c — writes what llama.cpp's ggml_quantize_chunk
 * produces on the row-quantizer test's inputs (tests/quant_rows_cases.h):
 * one file OUTDIR/TYPE.DIST.ROWSxN.WEIGHTS.bin per case, the quantized
 * rows' bytes. scripts/gen_quant_golden_rows.sh builds it against the
 * llama.cpp build of bench/build-llama.sh and hashes the files into
 * tests/data/quant_rows_golden.txt.
 *
 * Usage: gen_quant_golden_rows OUTDIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ggml.h"
#include "quant_rows_cases.h"

static int type_by_name(const char *name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *n = ggml_type_name((enum ggml_type)t);
        if (n && strcasecmp(n, name) == 0) return t;
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    int written = 0;
    for (int c = 0; c < QR_N_CASES; c++) {
        const struct qr_case *k = &QR_CASES[c];
        const int64_t n = (int64_t)k->n_rows * k->n_per_row;
        float *x = malloc((size_t)n * sizeof *x);
        float *w = malloc((size_t)k->n_per_row * sizeof *w);
        qr_fill_rows(c, x);
        for (int ti = 0; ti < QR_N_TYPES; ti++) {
            if (qr_type_is_k(QR_TYPES[ti]) && k->n_per_row % 256 != 0) continue;
            const int type = type_by_name(QR_TYPES[ti]);
            if (type < 0) {
                fprintf(stderr, "ggml has no type %s\n", QR_TYPES[ti]);
                return 1;
            }
            const size_t bytes = ggml_row_size((enum ggml_type)type, k->n_per_row) * (size_t)k->n_rows;
            void *q = malloc(bytes);
            for (int wk = 0; wk < QR_W_COUNT; wk++) {
                if (wk != QR_W_NONE) qr_fill_weights(c, (enum qr_weights)wk, w);
                memset(q, 0xAA, bytes);
                const size_t got = ggml_quantize_chunk((enum ggml_type)type, x, q, 0, k->n_rows, k->n_per_row,
                                                       wk == QR_W_NONE ? NULL : w);
                if (got != bytes) {
                    fprintf(stderr, "%s: ggml wrote %zu bytes, expected %zu\n", QR_TYPES[ti], got, bytes);
                    return 1;
                }
                char path[4096];
                snprintf(path, sizeof path, "%s/%s.%s.%dx%d.%s.bin", argv[1], QR_TYPES[ti],
                         QR_DIST_NAMES[k->dist], k->n_rows, k->n_per_row, QR_WEIGHT_NAMES[wk]);
                FILE *f = fopen(path, "wb");
                if (!f || fwrite(q, 1, bytes, f) != bytes || fclose(f) != 0) {
                    fprintf(stderr, "cannot write %s\n", path);
                    return 1;
                }
                written++;
            }
            free(q);
        }
        free(x);
        free(w);
    }
    fprintf(stderr, "gen_quant_golden_rows: %d cases\n", written);
    return 0;
}
