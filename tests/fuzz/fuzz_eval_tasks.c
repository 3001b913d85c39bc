/*
 * fuzz_eval_tasks.c — libFuzzer target for the readers of `kvik eval`: the
 * task file parser (eval_set_parse) and the results file reader used as a
 * baseline (eval_results_parse). Each input is read as both. A task file
 * that parses has what the command relies on: unique non-empty ids, a
 * prompt or messages, max_tokens in range, a choice answer that indexes
 * its options; every check then runs on the input's own bytes as a reply.
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_eval_tasks/ (small task files and a results
 * file; tests/test_eval.c checks that they parse).
 */
#include <stdlib.h>
#include <string.h>

#include "tools/eval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    struct eval_set s;
    if (eval_set_parse(text, size, &s, NULL) == KVIK_OK) {
        if (s.n <= 0) __builtin_trap();
        for (int i = 0; i < s.n; i++) {
            const struct eval_case *c = &s.cases[i];
            if (!c->id[0] || (!c->prompt == !c->n_msgs) || c->max_tokens < 1 || c->max_tokens > EVAL_MAX_TOKENS)
                __builtin_trap();
            for (int j = 0; j < i; j++)
                if (!strcmp(s.cases[j].id, c->id)) __builtin_trap();
            if (c->check == EVAL_CHECK_CHOICE) {
                if (c->options.n < 2 || c->answer < 0 || c->answer >= c->options.n) __builtin_trap();
                double *sc = calloc((size_t)c->options.n, sizeof(double));
                if (sc) {
                    sc[c->answer] = 1;
                    if (!eval_choice_pass(c, sc)) __builtin_trap();
                    free(sc);
                }
            } else {
                (void)eval_check_reply(c, text, size);
            }
        }
        eval_set_free(&s);
    }
    struct eval_results r;
    if (eval_results_parse(text, size, &r, NULL) == KVIK_OK) {
        for (int i = 0; i < r.n_tags; i++)
            if (r.tags[i].pass > r.tags[i].total) __builtin_trap();
        eval_results_free(&r);
    }
    return 0;
}
