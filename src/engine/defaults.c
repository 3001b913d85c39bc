/*
 * defaults.c — what a generation gets when its caller leaves it unset
 * (engine.h, "Defaults"): the context length and the end-of-generation
 * ids. kvik run, kvik chat, kvik serve and the C API take them from here;
 * the sampling defaults are sampler.h's.
 */
#include <stdlib.h>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

int engine_default_ctx(const struct model *m) {
    int n = m->hp.n_ctx_train;
    return n > 0 && n < ENGINE_MAX_DEFAULT_CTX ? n : ENGINE_MAX_DEFAULT_CTX;
}

int32_t *engine_eog_ids(const struct tokenizer *tok, int *n) {
    int32_t nv = tokenizer_n_vocab(tok);
    int32_t *ids = malloc(sizeof *ids * (size_t)(nv > 0 ? nv : 1));
    *n = 0;
    if (!ids) return NULL;
    for (int32_t id = 0; id < nv; id++)
        if (tokenizer_is_eog(tok, id)) ids[(*n)++] = id;
    return ids;
}
