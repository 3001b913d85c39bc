/*
 * rerank.h — how relevant documents are to a query, judged by a cross-
 * encoder or by a chat model on the serving engine.
 *
 * A cross-encoder (encoder.h, pooling RANK) reads each (query, document)
 * pair as one sequence, [CLS] query [SEP] document [SEP], cut to its
 * positions by longest-first truncation. Its logits become the score: the
 * sigmoid of a single label, else the softmax probability of the last
 * label (the "relevant" class of two-label models). The pairs of a call go
 * to the embedder together and are batched with concurrent calls.
 *
 * The chat model:
 * Each (query, document) pair is one chat, rendered by the model's own
 * template: a system message asking for a yes-or-no judgement, and a user
 * message holding the query and the document (plain text, never control
 * tokens). The request generates one token with its top 20 log-
 * probabilities; the score is p(yes) / (p(yes) + p(no)), where p(yes)
 * sums the probabilities of the vocabulary's one-token spellings "yes",
 * "Yes", " yes" and " Yes" among those 20 (likewise "no"), and is 0 when
 * neither answer is among them. A document is cut to max_doc_bytes (at a
 * UTF-8 boundary) so every prompt fits the context.
 *
 * All pairs of one call are submitted together, so the engine batches
 * them; the common prefix (system message and query) comes from the
 * prefix cache after the first. A score does not depend on the other
 * documents of the call (the engine is batch invariant).
 */
#ifndef KVIK_ENGINE_RERANK_H
#define KVIK_ENGINE_RERANK_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct engine;
struct embedder;
struct encoder;
struct tokenizer;
struct chat_format;
struct reranker;

struct reranker_config {
    int n_ctx;            /* the engine's longest sequence */
    size_t max_doc_bytes; /* 0: 2048 */
    size_t max_query_bytes; /* 0: 1024 */
    uint64_t cache_key;   /* the prefix cache key of its requests */
};

/* Over e (which must outlive it), the model's tokenizer and chat format.
 * KVIK_ERR_UNSUPPORTED when the vocabulary spells neither answer as one
 * token. */
struct reranker *reranker_new(struct engine *e, const struct tokenizer *tok, const struct chat_format *fmt,
                              const struct reranker_config *cfg, struct kvik_err *err);
/* Over a cross-encoder e and its embedder em (both must outlive it).
 * KVIK_ERR_UNSUPPORTED when e has no classification head. */
struct reranker *reranker_new_encoder(struct embedder *em, const struct encoder *e, struct kvik_err *err);
void reranker_free(struct reranker *r); /* NULL is fine */

/* Scores docs[0..n) (lens[i] bytes each) for query into scores[n], each in
 * [0, 1]; *tokens (may be NULL) gets the prompt tokens used. Blocks until
 * all are scored. KVIK_ERR_BUSY when the engine's queue is full or the
 * embedder is stopping. */
kvik_status reranker_score(struct reranker *r, const char *query, size_t qlen, int n, const char *const *docs,
                           const size_t *lens, float *scores, int64_t *tokens, struct kvik_err *err);

#endif /* KVIK_ENGINE_RERANK_H */
