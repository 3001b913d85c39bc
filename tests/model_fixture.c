/*
 * model_fixture.c — the shared default model of the tests (model_fixture.h).
 */
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
    for (int32_t id = 0; id < tm.m->hp.n_vocab && tm.n_eog < TEST_MODEL_MAX_EOG; id++)
        if (tokenizer_is_eog(tm.tok, id)) tm.eog[tm.n_eog++] = id;
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
