/*
 * fuzz_bench_serve.c — libFuzzer target for the load generator's parsers.
 * The first byte picks one:
 *
 *   0  an SSE stream: fed whole, then again in pieces whose sizes come from
 *      the input itself; both parses must give the same events (the split
 *      must never matter), and each event goes through chunk_parse
 *   1  Prometheus text (prom_parse, prom_sum)
 *   2  a JSONL dataset (lg_dataset_parse_jsonl)
 *   3  a ShareGPT array (lg_dataset_parse_sharegpt)
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_bench_serve/.
 */
#include <stdlib.h>
#include <string.h>

#include "tools/loadgen/loadgen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A running hash of the events (data and lengths), and their count. */
struct digest {
    uint64_t h;
    int64_t n;
};

static bool on_event(void *ctx, const char *s, size_t len) {
    struct digest *d = ctx;
    if (strlen(s) > len) __builtin_trap(); /* NUL-terminated at len (an embedded NUL may come first) */
    d->h = (d->h ^ len) * 0x100000001B3ull;
    for (size_t i = 0; i < len; i++) d->h = (d->h ^ (uint8_t)s[i]) * 0x100000001B3ull;
    d->n++;
    struct chunk_info ci;
    chunk_parse(s, len, &ci);
    if (ci.kind < CHUNK_DATA || ci.kind > CHUNK_MALFORMED) __builtin_trap();
    if (ci.content_bytes < 0) __builtin_trap();
    return true;
}

static void on_sample(void *ctx, const char *name, size_t name_len, const char *labels, size_t labels_len,
                      double v) {
    if (name_len == 0) __builtin_trap();
    (void)ctx, (void)name, (void)labels, (void)labels_len, (void)v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t mode = data[0] % 4;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    if (mode == 0) {
        struct sse_parser a, b;
        struct digest da = {0xcbf29ce484222325ull, 0}, db = da;
        sse_init(&a);
        sse_init(&b);
        bool ok_a = sse_feed(&a, s, n, on_event, &da);
        /* pieces of 1..16 bytes, sizes taken from the input's bytes */
        size_t at = 0, k = 0;
        bool ok_b = true;
        while (at < n && ok_b) {
            size_t piece = 1 + (size_t)((uint8_t)s[k++ % n] % 16);
            if (piece > n - at) piece = n - at;
            ok_b = sse_feed(&b, s + at, piece, on_event, &db);
            at += piece;
        }
        if (ok_a != ok_b || da.n != db.n || da.h != db.h) __builtin_trap();
        if (sse_pending(&a) != sse_pending(&b)) __builtin_trap();
        sse_free(&a);
        sse_free(&b);
    } else if (mode == 1) {
        int64_t count = prom_parse(s, n, on_sample, NULL);
        if (count < 0) __builtin_trap();
        double v;
        prom_sum(s, n, "kvik_kv_cache_usage_ratio", &v);
    } else if (mode == 2) {
        struct lg_dataset d = {0};
        if (lg_dataset_parse_jsonl(s, n, 16, &d, NULL) == KVIK_OK) {
            for (int64_t i = 0; i < d.n; i++)
                if (!d.items[i].prompt || d.items[i].output_len < 1) __builtin_trap();
        }
        lg_dataset_free(&d);
    } else {
        struct lg_dataset d = {0};
        if (lg_dataset_parse_sharegpt(s, n, NULL, 64, 0, &d, NULL) == KVIK_OK) {
            for (int64_t i = 0; i < d.n; i++)
                if (!d.items[i].prompt || d.items[i].output_len < 4 || d.items[i].output_len > 64) __builtin_trap();
        }
        lg_dataset_free(&d);
    }
    return 0;
}
