/*
 * model_fixture.h — the default model, its tokenizer and its
 * end-of-generation ids, loaded once per test binary and shared by the
 * test files that run it (never freed: the process ends with the tests).
 */
#ifndef KVIK_TEST_MODEL_FIXTURE_H
#define KVIK_TEST_MODEL_FIXTURE_H

#include "model/model.h"
#include "tokenizer/tokenizer.h"

enum { TEST_MODEL_MAX_EOG = 16 };

struct test_model {
    struct model *m;
    struct tokenizer *tok;
    int32_t eog[TEST_MODEL_MAX_EOG]; /* the first end-of-generation ids */
    int n_eog;
};

/* The shared default model; NULL with the running test skipped when the
 * model is not cached, or failed when it does not load. */
const struct test_model *test_model_default(void);

/* The same, copied out: *m, *tok and up to max_eog ids into eog[*n_eog];
 * false when test_model_default is NULL. */
bool test_model_get(struct model **m, struct tokenizer **tok, int32_t *eog, int max_eog, int *n_eog);

#endif /* KVIK_TEST_MODEL_FIXTURE_H */
