/*
 * fuzz_stores.c — libFuzzer target for the Files and Vector Stores routes
 * of `kvik serve` (src/server/stores.c) over a knowledge base in memory
 * with a stand-in embedder. The input's first byte picks the route and
 * method, the rest is the body (JSON, or multipart for uploads). Every
 * reply must be a status between 200 and 599 with a body, and the store
 * made at start-up must still answer afterwards.
 *
 * Build and run: make fuzz && build/fuzz/fuzz_stores tests/fuzz/seeds/fuzz_stores
 * Seeds: tests/fuzz/seeds/fuzz_stores/.
 */
#include <stdio.h>
#include <stdlib.h>

#include "retrieval/kb.h"
#include "server/stores.h"

enum { DIM = 16 };

static kvik_status embed(void *ctx, int n, const char *const *texts, const size_t *lens, float *out,
                         struct kvik_err *err) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < DIM; k++) out[(size_t)i * DIM + k] = (float)((k * 7 + (int)lens[i] + 1) % 5) - 2.0f + 0.5f;
    return KVIK_OK;
}

static struct kb *g_kb;
static struct stores *g_st;
static char g_vs[64];

static const char *no_args(void *ctx, const char *name) { return ctx && !strcmp(name, "limit") ? ctx : NULL; }

static void call(const char *method, const char *path, const char *body, size_t len, const char *ctype,
                 struct stores_reply *out) {
    struct stores_request r = {.method = method, .path = path, .body = body, .len = len, .content_type = ctype,
                               .arg = no_args};
    stores_handle(g_st, &r, out);
}

static void init(void) {
    struct kb_config c = {.dim = DIM, .embed = embed};
    snprintf(c.model.id, sizeof c.model.id, "fuzz");
    if (kb_open(&c, &g_kb, NULL) || !(g_st = stores_new(g_kb, 1 << 20))) __builtin_trap();
    struct stores_reply out;
    call("POST", "/v1/vector_stores", "{\"name\":\"f\"}", 12, NULL, &out);
    const char *id = out.body ? strstr(out.body, "\"id\":\"") : NULL;
    if (out.status != 200 || !id) __builtin_trap();
    snprintf(g_vs, sizeof g_vs, "%.*s", (int)strcspn(id + 6, "\""), id + 6);
    free(out.body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_st) init();
    if (size < 1) return 0;
    static const char *const routes[][2] = {
        {"POST", "/v1/vector_stores"},           {"POST", "/v1/vector_stores/%s"},
        {"POST", "/v1/vector_stores/%s/search"}, {"POST", "/v1/vector_stores/%s/texts"},
        {"POST", "/v1/vector_stores/%s/files"},  {"POST", "/v1/vector_stores/%s/file_batches"},
        {"POST", "/v1/files"},                   {"GET", "/v1/vector_stores/%s/files"},
        {"GET", "/v1/files"},                    {"DELETE", "/v1/vector_stores/%s/files/x"},
        {"GET", "/v1/vector_stores"},            {"POST", "/v1/vector_stores/%s/files/x"},
    };
    const char *const *rt = routes[data[0] % (sizeof routes / sizeof *routes)];
    char path[256];
    snprintf(path, sizeof path, rt[1], g_vs);
    char *body = malloc(size);
    if (!body) return 0;
    memcpy(body, data + 1, size - 1);
    struct stores_reply out;
    const char *ctype = data[0] & 0x80 ? "multipart/form-data; boundary=B" : "application/json";
    call(rt[0], path, body, size - 1, ctype, &out);
    if (out.status < 200 || out.status > 599 || (!out.body && out.len)) __builtin_trap();
    free(out.body);
    free(body);
    snprintf(path, sizeof path, "/v1/vector_stores/%s", g_vs);
    call("GET", path, NULL, 0, NULL, &out);
    if (out.status != 200 && out.status != 404) __builtin_trap(); /* 404: the input deleted it */
    free(out.body);
    if (out.status == 404) { /* made again for the next input */
        call("POST", "/v1/vector_stores", "{}", 2, NULL, &out);
        const char *id = out.body ? strstr(out.body, "\"id\":\"") : NULL;
        if (id) snprintf(g_vs, sizeof g_vs, "%.*s", (int)strcspn(id + 6, "\""), id + 6);
        free(out.body);
    }
    return 0;
}
