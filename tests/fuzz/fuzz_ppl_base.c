/*
 * fuzz_ppl_base.c — libFuzzer target for the reader of `kvik perplexity
 * --kl-divergence-base` files (ppl_base_parse). Each input is a file; when
 * it is accepted (and its vocabulary is small), every record is scored
 * against a row of made-up logits with ppl_score_kld, so a file the reader
 * accepts must be one the KL-divergence run can use: finite figures and
 * |dp| <= 1 for every record.
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_ppl_base/, small valid files written by
 * scripts/gen_ppl_seeds.py (make fuzz-run does; the name says n_ctx,
 * n_vocab, n_chunk and top_k; tests/test_perplexity.c checks that they
 * parse).
 */
#include <math.h>
#include <stdlib.h>

#include "tools/ppl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct ppl_base b;
    if (ppl_base_parse(data, size, &b, NULL) != KVIK_OK) return 0;
    if (b.n_vocab > 4096) return 0;
    float *l = malloc(sizeof(float) * (size_t)b.n_vocab);
    if (!l) return 0;
    for (int i = 0; i < b.n_vocab; i++) l[i] = (float)((i * 37) % 11) - 5.0f;
    for (int c = 0; c < b.n_chunk; c++)
        for (int j = 0; j < b.n_scored; j++) {
            const uint8_t *rec = ppl_base_record(&b, c, j);
            int32_t next = ppl_base_token(&b, (int64_t)c * b.n_ctx + ppl_first(b.n_ctx) + j + 1);
            struct ppl_row r;
            ppl_score_kld(l, b.n_vocab, next, rec, b.top_k, &r);
            if (!isfinite(r.nll) || !isfinite(r.nll_base) || r.nll_base < 0 || !isfinite(r.kld) || !isfinite(r.dp) ||
                fabs(r.dp) > 1)
                __builtin_trap();
        }
    free(l);
    return 0;
}
