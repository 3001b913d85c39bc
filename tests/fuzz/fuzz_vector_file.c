/*
 * fuzz_vector_file.c — libFuzzer target for the vector store's file
 * reader (vec_load_memory). When the reader accepts an input, the store
 * is used the ways a server would: searched through the graph and
 * exactly, with a filter, added to, deleted from and compacted, so ASan
 * sees any link, level or attribute the checks let through that points
 * outside what was allocated. Every answer must be sorted and within k.
 *
 * Build and run: make fuzz && build/fuzz/fuzz_vector_file tests/fuzz/seeds/fuzz_vector_file
 * Seeds: tests/fuzz/seeds/fuzz_vector_file/ (KVIK_WRITE_FUZZ_SEEDS=DIR
 * kvik-tests vector_file_fuzz_seeds writes them).
 */
#include <math.h>
#include <stdlib.h>

#include "vector/vector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct kvik_err err = {0};
    struct vec_model got;
    struct vec_store *s = vec_load_memory(data, size, NULL, &got, &err);
    if (!s) {
        if (err.code == KVIK_OK || !err.msg[0]) __builtin_trap();
        return 0;
    }
    /* the dimension is not exposed: a query as long as any allowed */
    static float q[65536];
    for (int i = 0; i < 65536; i++) q[i] = (float)((i * 7919) % 13) - 6.0f;
    struct vec_hit h[16];
    struct vec_filter f = {.op = VEC_EQ, .key = "even", .v = {.type = VEC_BOOL, .b = true}};
    struct vec_search ps[3] = {{.k = 16, .threshold = -INFINITY},
                               {.k = 8, .threshold = -INFINITY, .filter = &f},
                               {.k = 16, .threshold = -INFINITY, .exact = true}};
    for (int i = 0; i < 3; i++) {
        int n = vec_search(s, q, &ps[i], h, &err);
        if (n > ps[i].k) __builtin_trap();
        for (int k = 1; k < n; k++)
            if (h[k].score > h[k - 1].score) __builtin_trap();
    }
    if (vec_count(s) < 0 || vec_tombstones(s) < 0) __builtin_trap();
    if (vec_add(s, 0xF00D, q, NULL, 0, &err) == KVIK_OK && vec_delete(s, 0xF00D) != KVIK_OK) __builtin_trap();
    int64_t live = vec_count(s);
    if (vec_compact(s, &err) == KVIK_OK && (vec_tombstones(s) != 0 || vec_count(s) != live)) __builtin_trap();
    (void)vec_memory(s);
    vec_store_free(s);
    return 0;
}
