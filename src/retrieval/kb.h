/*
 * kb.h — the knowledge base behind `kvik serve`'s Files and Vector Stores
 * APIs: files, vector stores of their text cut into chunks, and search,
 * for many tenants in one process, durable in a data folder.
 *
 *  - Tenants: each call names one (the hash of an API key). A tenant sees
 *    only its own files and stores; another's id is KVIK_ERR_NOT_FOUND,
 *    as an id that never existed.
 *  - Files: bytes with a name and a purpose. Adding one to a store decodes
 *    it as UTF-8 text, cuts it into chunks by token count (chunk.h), embeds
 *    every chunk (the caller's kb_embed_fn) and indexes it twice: its
 *    vector in an HNSW graph (vector.h) and its words in BM25 (bm25.h).
 *    Each chunk carries its store file's attributes, which filters read.
 *    A file that is not text is recorded as failed, with the reason.
 *  - Search (kb_search) ranks one store's chunks for a query: dense
 *    (cosine of the embeddings), BM25, or hybrid (reciprocal rank fusion of
 *    both lists, k = 60), with a filter applied before ranking, and each
 *    ranking optionally reranked by the caller's kb_rerank_fn. The score
 *    threshold applies to the reported score: the cosine for dense and
 *    hybrid (a hybrid hit's cosine is computed when only BM25 found it),
 *    BM25's score for BM25, the reranker's for a reranked search.
 *  - Durability: every change is a record in a journal (journal.h), on
 *    disk before its call returns, so a crash (SIGKILL included) loses no
 *    change whose call returned; file contents are written and synced
 *    before their record. Opening replays the journal. kb_checkpoint
 *    writes the live content as a new journal, with each store's graph
 *    (vec_save), and switches to it; opening loads those graphs instead of
 *    building them again. A data folder made for another embedding model
 *    (another id or dimension, or another hash where both have one) is
 *    refused.
 *  - Threads: any calls at once. Searches run side by side; changes take
 *    turns, and while one is applied (after its embeddings are made)
 *    searches wait.
 *
 * The data folder holds CURRENT (the generation N in decimal), journal-N
 * (its records), graph-N-<store id>.kvec (graphs as of its checkpoint),
 * files/<file id> (contents) and LOCK (held by the process using it).
 */
#ifndef KVIK_RETRIEVAL_KB_H
#define KVIK_RETRIEVAL_KB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "vector/vector.h"

struct tokenizer;
struct kb;

enum {
    KB_ID = 40,        /* ids: "file-" or "vs_" and 24 hex digits, NUL */
    KB_NAME = 256,     /* file names and store names, at most 255 bytes */
    KB_MAX_ATTRS = 16, /* attributes and metadata pairs, as OpenAI allows */
};

/* Embeds texts[0..n) (lens[i] bytes each) into out[n][dim]. */
typedef kvik_status (*kb_embed_fn)(void *ctx, int n, const char *const *texts, const size_t *lens, float *out,
                                   struct kvik_err *err);
/* Scores docs[0..n) for relevance to query into scores[n] (higher: more
 * relevant; the scale is the reranker's). */
typedef kvik_status (*kb_rerank_fn)(void *ctx, const char *query, size_t qlen, int n, const char *const *docs,
                                    const size_t *lens, float *scores, struct kvik_err *err);

struct kb_config {
    const char *dir;          /* the data folder (made when missing); NULL: memory only */
    int dim;                  /* the embedding's width */
    struct vec_model model;   /* the embedding model */
    const struct tokenizer *tok; /* counts chunk tokens (the embedding model's); NULL: adding files is refused */
    kb_embed_fn embed;
    void *embed_ctx;
    kb_rerank_fn rerank;      /* NULL: reranked searches are refused */
    void *rerank_ctx;
    int embed_batch;          /* chunks per kb_embed_fn call (default 32) */
    int storage;              /* enum vec_storage of new stores' vectors (VEC_F32) */
    int64_t checkpoint_bytes; /* a change that grows the journal past this checkpoints (0: 256 MiB; <0: never) */
};

/* A tenant: the first 16 bytes of SHA-256 of its API key (all zero when
 * the server has no keys). */
struct kb_tenant {
    uint8_t h[16];
};
void kb_tenant_of(const char *key, size_t len, struct kb_tenant *t);

/* Attributes (of a store file) or metadata (of a store, strings only):
 * owned copies. */
struct kb_attrs {
    struct vec_attr *a; /* [n]; keys and strings owned */
    int n;
};
void kb_attrs_free(struct kb_attrs *a);
/* A deep copy of a[0..n) into out; false when out of memory (out empty). */
bool kb_attrs_copy(struct kb_attrs *out, const struct vec_attr *a, int n);
/* Checks a (NULL is fine): at most 16 pairs, keys of 1..64 bytes given
 * once, strings of at most 512 bytes, finite numbers; metadata: strings
 * only. KVIK_ERR_INVALID_ARG naming what is wrong. */
kvik_status kb_attrs_check(const struct kb_attrs *a, bool metadata, struct kvik_err *err);

struct kb_file {
    char id[KB_ID];
    char filename[KB_NAME];
    char purpose[32];
    int64_t bytes, created_at; /* created_at: Unix seconds */
};

enum kb_store_status { KB_STORE_COMPLETED, KB_STORE_EXPIRED };

struct kb_store {
    char id[KB_ID];
    char name[KB_NAME];
    int64_t created_at, last_active_at;
    int64_t usage_bytes;       /* the chunks' text and vectors */
    int64_t n_completed, n_failed; /* store files by status */
    int64_t chunks;
    int expires_days;          /* 0: never (anchored at last_active_at) */
    int status;                /* enum kb_store_status */
    struct kb_attrs metadata;  /* owned: kb_store_free */
};
void kb_store_free(struct kb_store *s);

struct kb_chunking {
    int max_tokens, overlap; /* OpenAI's static strategy: 100..4096, 0..max/2 (default 800, 400) */
};

enum kb_sfile_status { KB_SFILE_COMPLETED, KB_SFILE_FAILED };

struct kb_sfile {
    char file_id[KB_ID];
    char store_id[KB_ID];
    char filename[KB_NAME];
    int64_t created_at, usage_bytes, chunks;
    int status;                /* enum kb_sfile_status */
    char error_code[32];       /* failed: "unsupported_file", "invalid_file" or "server_error" */
    char error[200];           /* failed: why */
    struct kb_chunking chunking;
    struct kb_attrs attrs;     /* owned: kb_sfile_free */
};
void kb_sfile_free(struct kb_sfile *f);

enum kb_ranker { KB_DENSE, KB_BM25, KB_HYBRID };

struct kb_query {
    const char *text;
    size_t len;
    const struct vec_filter *filter; /* NULL: every chunk */
    int k;                    /* results wanted (1..1000) */
    float threshold;          /* drop results scoring below (-INFINITY: none) */
    int ranker;               /* enum kb_ranker */
    bool rerank;              /* rerank the first `candidates` of the ranking (0: max(20, 2k)) */
    int candidates;           /* also the length of each list fused (at least max(50, 4k)) */
};

struct kb_result {
    char file_id[KB_ID];
    char filename[KB_NAME];
    uint64_t chunk;           /* the chunk's id in its store */
    float score;              /* see the threshold above */
    float cosine;             /* the dense score, whatever the ranker */
    char *text;               /* owned, NUL-terminated */
    size_t len;
    struct kb_attrs attrs;    /* owned */
};
void kb_results_free(struct kb_result *r, int n);

/* ---- the base ------------------------------------------------------------ */

kvik_status kb_open(const struct kb_config *cfg, struct kb **out, struct kvik_err *err);
/* Frees kb (NULL is fine); writes nothing (every change is already on disk). */
void kb_close(struct kb *kb);
/* Writes the live content as a new journal generation with its graphs. */
kvik_status kb_checkpoint(struct kb *kb, struct kvik_err *err);
/* kb_checkpoint when the journal has grown by more than bytes since it was
 * opened or last checkpointed (else nothing). */
kvik_status kb_checkpoint_if_grown(struct kb *kb, int64_t bytes, struct kvik_err *err);

/* ---- files --------------------------------------------------------------- */

kvik_status kb_file_add(struct kb *kb, const struct kb_tenant *t, const char *filename, const char *purpose,
                        const void *data, size_t len, struct kb_file *out, struct kvik_err *err);
kvik_status kb_file_get(struct kb *kb, const struct kb_tenant *t, const char *id, struct kb_file *out,
                        struct kvik_err *err);
/* The tenant's files (with purpose, when not NULL), oldest first: their
 * count with *out malloc'd, or a negative status. */
int64_t kb_file_list(struct kb *kb, const struct kb_tenant *t, const char *purpose, struct kb_file **out,
                     struct kvik_err *err);
/* The file's bytes into *data (malloc'd, len bytes and a NUL after). */
kvik_status kb_file_content(struct kb *kb, const struct kb_tenant *t, const char *id, char **data, size_t *len,
                            struct kvik_err *err);
/* Deletes the file; stores that hold its chunks keep them. */
kvik_status kb_file_delete(struct kb *kb, const struct kb_tenant *t, const char *id, struct kvik_err *err);

/* ---- stores -------------------------------------------------------------- */

kvik_status kb_store_create(struct kb *kb, const struct kb_tenant *t, const char *name,
                            const struct kb_attrs *metadata, int expires_days, struct kb_store *out,
                            struct kvik_err *err);
kvik_status kb_store_get(struct kb *kb, const struct kb_tenant *t, const char *id, struct kb_store *out,
                         struct kvik_err *err);
/* The tenant's stores, oldest first (free each, then the array). */
int64_t kb_store_list(struct kb *kb, const struct kb_tenant *t, struct kb_store **out, struct kvik_err *err);
/* Changes what is not NULL (expires_days < 0: kept). */
kvik_status kb_store_update(struct kb *kb, const struct kb_tenant *t, const char *id, const char *name,
                            const struct kb_attrs *metadata, int expires_days, struct kb_store *out,
                            struct kvik_err *err);
kvik_status kb_store_delete(struct kb *kb, const struct kb_tenant *t, const char *id, struct kvik_err *err);

/* Adds the tenant's file to the store, chunked (NULL: 800 / 400) and
 * embedded, with attrs (NULL: none) on every chunk. A file already in the
 * store is replaced. A file that cannot be read as text still returns
 * KVIK_OK, with out->status KB_SFILE_FAILED and the reason. */
kvik_status kb_store_add_file(struct kb *kb, const struct kb_tenant *t, const char *store_id, const char *file_id,
                              const struct kb_attrs *attrs, const struct kb_chunking *chunking,
                              struct kb_sfile *out, struct kvik_err *err);
kvik_status kb_store_file_get(struct kb *kb, const struct kb_tenant *t, const char *store_id, const char *file_id,
                              struct kb_sfile *out, struct kvik_err *err);
/* The store's files, oldest first (free each, then the array). */
int64_t kb_store_file_list(struct kb *kb, const struct kb_tenant *t, const char *store_id, struct kb_sfile **out,
                           struct kvik_err *err);
kvik_status kb_store_file_update(struct kb *kb, const struct kb_tenant *t, const char *store_id,
                                 const char *file_id, const struct kb_attrs *attrs, struct kb_sfile *out,
                                 struct kvik_err *err);
kvik_status kb_store_file_delete(struct kb *kb, const struct kb_tenant *t, const char *store_id,
                                 const char *file_id, struct kvik_err *err);
/* The chunks of a file in a store, in order, as results (score 0). */
int kb_store_file_chunks(struct kb *kb, const struct kb_tenant *t, const char *store_id, const char *file_id,
                         struct kb_result **out, struct kvik_err *err);

/* The best q->k chunks of the store, best first: their count (0 is an
 * answer) with *out malloc'd, or a negative status. */
int kb_search(struct kb *kb, const struct kb_tenant *t, const char *store_id, const struct kb_query *q,
              struct kb_result **out, struct kvik_err *err);

#endif /* KVIK_RETRIEVAL_KB_H */
