/*
 * model_fixture.c — the shared default model of the tests (model_fixture.h).
 */
#include <stdlib.h>

#include "engine/engine.h"
#include "model_fixture.h"
#include "test.h"

const struct test_model *test_model_default(void) {
    static struct test_model tm;
    static bool tried, ok;
    if (tried) {
        if (!ok) test_skip("default model not available");
        return ok ? &tm : NULL;
    }
    tried = true;
    char path[4096];
    if (!test_default_model(path, sizeof path)) return NULL;
    struct kvik_err err = {0};
    if (model_load(path, &tm.m, &err) || tokenizer_load(tm.m->file, &tm.tok, &err)) {
        test_fail(__FILE__, __LINE__, "loading the default model: %s", err.msg);
        return NULL;
    }
    int n = 0;
    int32_t *eog = engine_eog_ids(tm.tok, &n); /* the stop ids kvik run, chat and serve use */
    if (!eog) {
        test_fail(__FILE__, __LINE__, "out of memory");
        return NULL;
    }
    tm.n_eog = n < TEST_MODEL_MAX_EOG ? n : TEST_MODEL_MAX_EOG;
    memcpy(tm.eog, eog, (size_t)tm.n_eog * sizeof *eog);
    free(eog);
    ok = true;
    return &tm;
}

bool test_model_get(struct model **m, struct tokenizer **tok, int32_t *eog, int max_eog, int *n_eog) {
    const struct test_model *tm = test_model_default();
    if (!tm) return false;
    *m = tm->m;
    *tok = tm->tok;
    *n_eog = tm->n_eog < max_eog ? tm->n_eog : max_eog;
    memcpy(eog, tm->eog, (size_t)*n_eog * sizeof *eog);
    return true;
}
