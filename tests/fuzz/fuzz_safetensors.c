/*
 * fuzz_safetensors.c — libFuzzer target for the safetensors reader. Each
 * input is opened in memory (safetensors_open_memory); when the reader
 * accepts it, every tensor's bytes and every metadata entry are read, so
 * ASan sees any read outside the input, and the invariants of
 * safetensors.h are checked (a violation traps): tensors tile the data
 * buffer in index order, sizes match shapes, and lookups by name find
 * each tensor.
 *
 * Build and run: make fuzz && build/fuzz/fuzz_safetensors tests/fuzz/seeds/fuzz_safetensors
 * Seeds: tests/fuzz/seeds/fuzz_safetensors/ (copies of the golden files,
 * written by scripts/gen_safetensors_ref.py).
 */
#include <stdlib.h>

#include "convert/safetensors.h"

static volatile uint64_t g_sink; /* keeps the reads from being optimised away */

static void touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++) h = h * 31 + b[i];
    g_sink += h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct safetensors *st = NULL;
    struct kvik_err err = {0};
    if (safetensors_open_memory(data, size, &st, &err)) {
        if (st || err.code == KVIK_OK || !err.msg[0]) __builtin_trap();
        return 0;
    }
    uint64_t pos = 0;
    const uint8_t *base = data + 8 + safetensors_header_size(st);
    for (int64_t i = 0; i < safetensors_n_tensors(st); i++) {
        const struct safetensors_tensor *t = safetensors_tensor(st, i);
        if (!t || t->offset != pos || (const uint8_t *)t->data != base + t->offset) __builtin_trap();
        if (t->n_bytes != t->n_elems * safetensors_dtype_size(t->dtype)) __builtin_trap();
        if (t->n_dims < 0 || t->n_dims > SAFETENSORS_MAX_DIMS || !t->name[0]) __builtin_trap();
        uint64_t n = 1;
        for (int d = 0; d < t->n_dims; d++) n *= t->shape[d];
        if (n != t->n_elems) __builtin_trap();
        if (safetensors_find_tensor(st, t->name) != i) __builtin_trap();
        touch(t->name, strlen(t->name));
        touch(t->data, t->n_bytes);
        pos += t->n_bytes;
    }
    if (pos != safetensors_data_size(st)) __builtin_trap();
    if (8 + safetensors_header_size(st) + pos != size) __builtin_trap();
    for (int64_t i = 0; i < safetensors_n_metadata(st); i++) {
        const char *k = safetensors_metadata_key(st, i), *v = safetensors_metadata_value(st, i);
        if (!k || !v || safetensors_find_metadata(st, k) != v) __builtin_trap();
        touch(k, strlen(k));
        touch(v, strlen(v));
    }
    safetensors_close(st);
    return 0;
}
