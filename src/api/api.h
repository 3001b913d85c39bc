/*
 * api.h — the layouts behind the public handles of kvik.h (API v1) and what
 * the files of src/api share. The public functions are thin wrappers over
 * the model, tokenizer, chat and engine modules; nothing here is exported.
 *
 * Parameter structs: the caller's `size` says which fields it knows.
 * API_TAKE copies one field from the caller's struct only when the field
 * lies wholly within that size, so bytes past it (an older caller's tail
 * padding, or nothing at all) are never read; a size larger than the
 * library's struct takes every field the library knows and nothing past
 * them. API_INIT is the other direction: it writes the library's defaults
 * into the caller's struct of `size` bytes, at most min(size, sizeof)
 * bytes of them.
 */
#ifndef KVIK_API_INT_H
#define KVIK_API_INT_H

#include <stddef.h>
#include <string.h>

#include "kvik.h"
#include "model/model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

#define API_TAKE(dst, src, field)                                                          \
    do {                                                                                   \
        if ((src)->size >= offsetof(__typeof__(*(src)), field) + sizeof((src)->field))    \
            (dst)->field = (src)->field;                                                   \
    } while (0)

/* *p (size bytes, the caller's) = the first bytes of *defaults (the
 * library's struct), with p->size = size. */
#define API_INIT(p, size, defaults)                                                        \
    do {                                                                                   \
        if ((p) && (size) >= sizeof(size_t)) {                                             \
            size_t n_ = (size) < sizeof *(defaults) ? (size) : sizeof *(defaults);         \
            memcpy((p), (defaults), n_);                                                   \
            (p)->size = (size);                                                            \
        }                                                                                  \
    } while (0)

struct kvik_model {
    struct model *model;
    struct tokenizer *tok;
    struct chat_format fmt; /* valid when has_fmt */
    bool has_fmt;
    char *path;             /* the resolved path (owned) */
    int32_t *eog;           /* [n_eog] end-of-generation ids, for engines */
    int n_eog;
};

/* Writes err's message to the caller's buffer and returns its code. */
static inline kvik_status api_fail(const struct kvik_err *e, char *err, size_t err_len) {
    err_copy_out(e, err, err_len);
    return e->code;
}

/* ---- the model registry (registry.c) ------------------------------------ */

/* A model known by a short name: its file in the model cache, and how a
 * user fetches it there. The table grows with the models kvik can fetch. */
struct api_model_entry {
    const char *name;  /* "smollm2-135m" */
    const char *file;  /* "SmolLM2-135M-Instruct.Q4_1.gguf" */
    const char *fetch; /* what to run to fetch it: "make model" */
};

/* The entry of a short name; NULL if the table has none. */
const struct api_model_entry *api_model_find(const char *name);
/* The i-th entry; NULL past the last. */
const struct api_model_entry *api_model_entry(size_t i);

/* The model cache directory ($KVIK_MODELS, else ~/.cache/kvik/models) into
 * buf; false when neither variable is set or buf is too small. */
bool api_model_cache_dir(char *buf, size_t len);

#endif /* KVIK_API_INT_H */
