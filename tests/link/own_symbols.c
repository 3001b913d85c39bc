/*
 * own_symbols.c — a program that defines functions with the names of
 * libkvik internals (log_msg, pool_create, err_set, model_load) and calls
 * the public API. It must link against libkvik.a and libkvik.so without a
 * clash, and the library must keep using its own functions: these are
 * never called. With a model argument it also loads it and generates a
 * few tokens (the library's thread pool and logging at work).
 *
 * `make check-symbols` builds it both ways and runs it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kvik.h"

static int calls;

/* the library's internals have these names; ours differ in everything else */
void log_msg(int level, const char *fmt, ...) { calls++; }
void *pool_create(int n_threads, void *err) { calls++; return NULL; }
int err_set(void *err, int code, const char *fmt, ...) { calls++; return 0; }
int model_load(const char *path, void **out, void *err) { calls++; return 0; }

int main(int argc, char **argv) {
    char err[512];
    kvik_model *m = NULL;
    if (kvik_model_open("/nonexistent/model.gguf", NULL, &m, err, sizeof err) != KVIK_ERR_NOT_FOUND || m) {
        fprintf(stderr, "own_symbols: opening a missing file did not fail as expected: %s\n", err);
        return 1;
    }
    if (argc > 1) {
        if (kvik_model_open(argv[1], NULL, &m, err, sizeof err) != KVIK_OK) {
            fprintf(stderr, "own_symbols: %s\n", err);
            return 1;
        }
        struct kvik_engine_params ep = kvik_engine_default_params();
        ep.n_threads = 2;
        ep.max_seqs = 1;
        ep.kv_mem_mib = 16;
        kvik_engine *e = NULL;
        struct kvik_sampling_params sp = kvik_sampling_default_params();
        sp.temperature = 0;
        struct kvik_request_params rp = kvik_request_default_params();
        rp.sampling = &sp;
        rp.max_tokens = 4;
        char *text = NULL;
        if (kvik_engine_new(m, &ep, &e, err, sizeof err) != KVIK_OK ||
            kvik_generate(e, "The capital of France is", &rp, &text, NULL, err, sizeof err) != KVIK_OK) {
            fprintf(stderr, "own_symbols: %s\n", err);
            return 1;
        }
        printf("own_symbols: generated \"%s\"\n", text);
        kvik_free(text);
        kvik_engine_free(e);
        kvik_model_close(m);
    }
    if (calls) {
        fprintf(stderr, "own_symbols: the library called this program's functions %d times\n", calls);
        return 1;
    }
    printf("own_symbols: ok (kvik %s, %s)\n", kvik_version(), kvik_cpu_isa());
    return 0;
}
