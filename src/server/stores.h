/*
 * stores.h — OpenAI's Files and Vector Stores APIs over the knowledge base
 * (retrieval/kb.h), for `kvik serve`. No sockets: http.c hands each
 * request over as a struct stores_request and sends the reply back.
 *
 * Routes (every one scoped to the caller's tenant, the hash of its API
 * key; another tenant's ids answer 404 as unknown ones do):
 *
 *   POST   /v1/files                                multipart: file, purpose
 *   GET    /v1/files[?purpose=&limit=&order=&after=]
 *   GET    /v1/files/{id}
 *   GET    /v1/files/{id}/content                   the bytes
 *   DELETE /v1/files/{id}
 *   POST   /v1/vector_stores                        name, file_ids, metadata,
 *                                                   expires_after, chunking_strategy
 *   GET    /v1/vector_stores[?limit=&order=&after=&before=]
 *   GET    /v1/vector_stores/{vs}
 *   POST   /v1/vector_stores/{vs}                   name, metadata, expires_after
 *   DELETE /v1/vector_stores/{vs}
 *   POST   /v1/vector_stores/{vs}/files             file_id, attributes, chunking_strategy
 *   GET    /v1/vector_stores/{vs}/files[?filter=&limit=&order=&after=&before=]
 *   GET    /v1/vector_stores/{vs}/files/{id}
 *   POST   /v1/vector_stores/{vs}/files/{id}        attributes
 *   DELETE /v1/vector_stores/{vs}/files/{id}
 *   GET    /v1/vector_stores/{vs}/files/{id}/content  its chunks' text
 *   POST   /v1/vector_stores/{vs}/file_batches      file_ids or files, attributes,
 *                                                   chunking_strategy
 *   GET    /v1/vector_stores/{vs}/file_batches/{b}[/files]
 *   POST   /v1/vector_stores/{vs}/file_batches/{b}/cancel
 *   POST   /v1/vector_stores/{vs}/search            query, filters, max_num_results,
 *                                                   ranking_options {ranker, score_threshold}
 *   POST   /v1/vector_stores/{vs}/texts             kvik's: texts [{text, attributes,
 *                                                   filename}] or strings, chunking_strategy
 *
 * Files are processed before the call returns, so a vector store file is
 * "completed" (or "failed", with last_error) in its first answer, and a
 * batch is complete when created. Batches are kept in memory (a restart
 * forgets them; their files stay).
 *
 * Rankers: "dense", "bm25", "hybrid" (reciprocal rank fusion of both, k =
 * 60), each with "+rerank" (the server's reranker over the first 50);
 * OpenAI's "auto" and "default-2024-11-15" are STORES_DEFAULT_RANKER,
 * "none" is "dense".
 */
#ifndef KVIK_SERVER_STORES_H
#define KVIK_SERVER_STORES_H

#include <stdbool.h>
#include <stddef.h>

#include "retrieval/kb.h"

#define STORES_DEFAULT_RANKER "hybrid"

struct stores;

struct stores_request {
    const char *method;        /* "GET", "POST", "DELETE" */
    const char *path;          /* without the query string */
    const char *body;
    size_t len;
    const char *content_type;  /* NULL: none */
    /* a query-string argument's value, or NULL */
    const char *(*arg)(void *ctx, const char *name);
    void *arg_ctx;
    struct kb_tenant tenant;
};

struct stores_reply {
    int status;
    char *body;                /* malloc'd (NULL: out of memory) */
    size_t len;
    const char *ctype;         /* static */
};

/* Whether path is under /v1/files or /v1/vector_stores. */
bool stores_route(const char *path);

/* Over kb (which must outlive it); max_file: the largest upload. */
struct stores *stores_new(struct kb *kb, size_t max_file);
void stores_free(struct stores *s); /* NULL is fine */

void stores_handle(struct stores *s, const struct stores_request *r, struct stores_reply *out);

#endif /* KVIK_SERVER_STORES_H */
