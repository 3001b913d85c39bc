/*
 * fuzz_kb_journal.c — libFuzzer target for the knowledge base's journal:
 * the record framing (journal_scan) and every record applied to a base in
 * memory (kb_apply), as opening a data folder replays them. When records
 * apply, the base is then used the ways the server would: files and
 * stores listed, each store's files and chunks read, each store searched
 * with every ranker and a filter. Every answer must be sorted and within k.
 *
 * Build and run: make fuzz && build/fuzz/fuzz_kb_journal tests/fuzz/seeds/fuzz_kb_journal
 * Seeds: tests/fuzz/seeds/fuzz_kb_journal/ (KVIK_WRITE_FUZZ_SEEDS=DIR
 * kvik-tests kb_folder writes them: a checkpoint and changes after it,
 * made with the test's 256-wide stand-in embedder).
 */
#include <math.h>
#include <stdlib.h>

#include "retrieval/kb_int.h"

enum { DIM = 256 };

static kvik_status embed(void *ctx, int n, const char *const *texts, const size_t *lens, float *out,
                         struct kvik_err *err) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < DIM; k++) out[(size_t)i * DIM + k] = (float)((k * 31 + (int)lens[i]) % 7) - 3.0f;
    return KVIK_OK;
}

static kvik_status apply(void *ctx, const uint8_t *p, size_t n, struct kvik_err *err) {
    return kb_apply(ctx, p, n, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct kb_config c = {.dim = DIM, .embed = embed};
    snprintf(c.model.id, sizeof c.model.id, "fake-bag-of-words");
    struct kb *kb;
    struct kvik_err err = {0};
    if (kb_open(&c, &kb, &err)) __builtin_trap();
    int64_t good = journal_scan(data, size, apply, kb, &err);
    if (good < 0 && (!err.msg[0] || err.code == KVIK_OK)) __builtin_trap();
    if (good > (int64_t)size) __builtin_trap();
    /* whatever applied before a failure is a state the calls must handle */
    struct kb_tenant t[2] = {{{1}}, {{0}}};
    for (int ti = 0; ti < 2; ti++) {
        struct kb_file *fl;
        int64_t nf = kb_file_list(kb, &t[ti], NULL, &fl, &err);
        if (nf >= 0) free(fl);
        struct kb_store *sl;
        int64_t ns = kb_store_list(kb, &t[ti], &sl, &err);
        for (int64_t i = 0; i < ns; i++) {
            struct kb_sfile *sf;
            int64_t k = kb_store_file_list(kb, &t[ti], sl[i].id, &sf, &err);
            for (int64_t j = 0; j < k; j++) {
                struct kb_result *r;
                int m = kb_store_file_chunks(kb, &t[ti], sl[i].id, sf[j].file_id, &r, &err);
                if (m >= 0) kb_results_free(r, m);
                kb_sfile_free(&sf[j]);
            }
            if (k >= 0) free(sf);
            struct vec_filter f = {.op = VEC_EQ, .key = "region", .v = {.type = VEC_STR, .str = "eu", .len = 2}};
            for (int rk = KB_DENSE; rk <= KB_HYBRID; rk++) {
                struct kb_query q = {.text = "battery thermometer", .len = 19, .k = 5, .threshold = -INFINITY,
                                     .ranker = rk, .filter = rk == KB_HYBRID ? &f : NULL};
                struct kb_result *r;
                int m = kb_search(kb, &t[ti], sl[i].id, &q, &r, &err);
                if (m > 5) __builtin_trap();
                if (rk != KB_HYBRID)
                    for (int x = 1; x < m; x++)
                        if (r[x].score > r[x - 1].score) __builtin_trap();
                if (m >= 0) kb_results_free(r, m);
            }
            kb_store_free(&sl[i]);
        }
        if (ns >= 0) free(sl);
    }
    kb_close(kb);
    return 0;
}
