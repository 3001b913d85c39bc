/*
 * fuzz_imatrix.c — libFuzzer target for the importance-matrix reader
 * (imatrix_load_memory, both formats). Each input is a file; when it is
 * accepted, every entry's weights are derived as the quantizer derives
 * them, and each must be finite wherever its sum is.
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_imatrix/ (one GGUF, one legacy file).
 */
#include <math.h>
#include <stdlib.h>

#include "tools/imatrix_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct imatrix m;
    if (imatrix_load_memory(data, size, &m, NULL) != KVIK_OK) return 0;
    for (int64_t i = 0; i < m.n_entries; i++) {
        const struct imatrix_entry *e = &m.entries[i];
        if (imatrix_find(&m, e->name) != e) __builtin_trap();
        float *w = malloc(sizeof(float) * (size_t)e->n_cols);
        if (!w) break;
        for (int64_t j = 0; j < e->n_mat; j++) {
            imatrix_weights(e, j, m.legacy, w);
            for (int64_t c = 0; c < e->n_cols; c++)
                if (isfinite(e->sums[j * e->n_cols + c]) && !isfinite(w[c])) __builtin_trap();
        }
        free(w);
    }
    imatrix_free(&m);
    return 0;
}
