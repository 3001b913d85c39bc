/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader. Each input is opened
 * in memory (gguf_open_memory, no file system); when the reader accepts it,
 * every accessor is walked (every key's value, every array element at
 * every nesting level, every tensor's bytes) so ASan sees any read outside
 * the input, and the file is rewritten with the writer and read back: a
 * file the reader accepts must survive the round trip with the same keys,
 * values and tensors (a mismatch traps).
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_gguf/ (regenerate with
 * KVIK_WRITE_FUZZ_SEEDS=tests/fuzz/seeds/fuzz_gguf build/kvik-tests gguf_fuzz_seeds).
 */
#include <stdlib.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

static volatile uint64_t g_sink; /* keeps the reads from being optimised away */

static void touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++) h = h * 31 + b[i];
    g_sink += h;
}

static void walk_value(const struct gguf_value *v) {
    int64_t i64;
    uint64_t u64;
    double d;
    if (gguf_value_to_i64(v, &i64)) g_sink += (uint64_t)i64;
    if (gguf_value_to_u64(v, &u64)) g_sink += u64;
    if (gguf_value_to_f64(v, &d)) g_sink += d == d;
    if (v->type == GGUF_TYPE_STRING) touch(v->p, v->n);
    if (v->type != GGUF_TYPE_ARRAY) return;
    touch(v->p, v->nbytes);
    uint64_t n = gguf_arr_len(v);
    if (gguf_arr_data(v)) {
        void *copy = malloc(v->nbytes ? v->nbytes : 1);
        if (copy && gguf_arr_copy(v, copy, v->nbytes)) __builtin_trap();
        free(copy);
    }
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_value e;
        if (!gguf_arr_elem(v, i, &e)) __builtin_trap();
        struct gguf_str s = gguf_arr_str(v, i);
        if (s.ptr) touch(s.ptr, s.len);
        walk_value(&e);
    }
    struct gguf_value e;
    if (gguf_arr_elem(v, n, &e)) __builtin_trap();
}

static void walk(const struct gguf *g) {
    g_sink += gguf_version(g) + gguf_alignment(g) + gguf_data_offset(g);
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *key = gguf_key(g, i);
        if (gguf_find_key(g, key) != i) __builtin_trap();
        uint32_t u32;
        int64_t i64;
        float f32;
        bool b;
        struct gguf_str s;
        const struct gguf_value *arr;
        g_sink += gguf_get_u32(g, key, &u32, NULL) + gguf_get_i64(g, key, &i64, NULL) +
                  gguf_get_f32(g, key, &f32, NULL) + gguf_get_bool(g, key, &b, NULL) +
                  gguf_get_str(g, key, &s, NULL) + gguf_get_arr(g, key, -1, &arr, NULL);
        walk_value(gguf_kv_value(g, i));
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        if (gguf_find_tensor(g, t->name) != i) __builtin_trap();
        if (t->file_offset % gguf_alignment(g)) __builtin_trap();
        touch(t->data, t->n_bytes);
    }
}

/* Rewrites g with the writer and checks the copy reads back the same. */
static void round_trip(const struct gguf *g) {
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return;
    for (int64_t i = 0; i < gguf_n_kv(g); i++)
        if (gguf_writer_set_value(w, gguf_key(g, i), gguf_kv_value(g, i))) __builtin_trap();
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data))
            __builtin_trap();
    }
    void *buf = NULL;
    size_t size = 0;
    struct gguf *h = NULL;
    if (gguf_writer_write_memory(w, &buf, &size, NULL)) __builtin_trap();
    if (gguf_open_memory(buf, size, &h, NULL)) __builtin_trap();
    if (gguf_n_kv(h) != gguf_n_kv(g) || gguf_n_tensors(h) != gguf_n_tensors(g) ||
        gguf_alignment(h) != gguf_alignment(g))
        __builtin_trap();
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const struct gguf_value *a = gguf_kv_value(g, i), *b = gguf_kv_value(h, i);
        if (strcmp(gguf_key(g, i), gguf_key(h, i)) || a->type != b->type || a->n != b->n ||
            a->nbytes != b->nbytes || (a->nbytes && memcmp(a->p, b->p, a->nbytes)))
            __builtin_trap();
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *a = gguf_tensor(g, i), *b = gguf_tensor(h, i);
        if (strcmp(a->name, b->name) || a->type != b->type || a->n_bytes != b->n_bytes ||
            memcmp(a->ne, b->ne, sizeof a->ne) || memcmp(a->data, b->data, a->n_bytes))
            __builtin_trap();
    }
    gguf_close(h);
    free(buf);
    gguf_writer_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct gguf *g = NULL;
    struct kvik_err err;
    kvik_status st = gguf_open_memory(size ? data : NULL, size, &g, &err);
    if (st) {
        if (g || !err.msg[0] || strchr(err.msg, '\n')) __builtin_trap();
        return 0;
    }
    walk(g);
    round_trip(g);
    /* the tokenizer's metadata parser, and a short encode/decode with
     * whatever vocabulary the input describes */
    struct tokenizer *tok = NULL;
    if (tokenizer_load(g, &tok, &err) == KVIK_OK) {
        static const char text[] = "Hello, world! 123 \xff\xfe caf\xc3\xa9 <s> [CLS]";
        int32_t ids[256];
        char out[4096];
        int64_t n = tokenizer_encode(tok, text, sizeof text - 1, true, true, ids, 256);
        if (n > 0) tokenizer_decode(tok, ids, n < 256 ? n : 256, out, sizeof out, true);
        tokenizer_free(tok);
    } else if (tok || !err.msg[0]) {
        __builtin_trap();
    }
    gguf_close(g);
    return 0;
}
