/*
 * embedder.h — the serving side of an encoder: one thread that runs the
 * encoder for every caller, batching the texts of concurrent calls into
 * shared forward passes (up to a token budget), in arrival order.
 *
 * A text's embedding does not depend on what shares its batch
 * (encoder.h), so batching changes speed, never results.
 */
#ifndef KVIK_ENGINE_EMBEDDER_H
#define KVIK_ENGINE_EMBEDDER_H

#include <stdint.h>

#include "base/base.h"
#include "model/encoder.h"

struct embedder_config {
    int n_threads;        /* the encoder's thread pool (default 1) */
    int max_batch_tokens; /* tokens per forward pass (default 8192; at least the model's n_ctx) */
};

struct embedder_config embedder_config_default(void);

struct embedder_stats {
    uint64_t calls;   /* embedder_embed calls answered */
    uint64_t texts;   /* texts embedded */
    uint64_t tokens;  /* their tokens */
    uint64_t batches; /* forward passes */
};

struct embedder;

/* Starts the worker over e (which must outlive the embedder). NULL with
 * err set on failure. */
struct embedder *embedder_new(const struct encoder *e, const struct embedder_config *cfg, struct kvik_err *err);
/* Stops the worker after the batch it runs; calls still waiting get
 * KVIK_ERR_BUSY. No call may start after this one. */
void embedder_free(struct embedder *em);

/*
 * Embeds n texts given as ids (text i: ids[i][0..n_ids[i]), 1..n_ctx ids
 * each, every id < n_vocab) with token types types[i][..] (types NULL: all
 * 0), pooled as the file asks, into out[n][encoder_out_dim]: embeddings
 * L2-normalised, a cross-encoder's logits as they are. Blocks until all
 * are done. Safe from any number of threads at once.
 * KVIK_ERR_INVALID_ARG for a text out of bounds (checked before anything
 * is queued).
 */
kvik_status embedder_embed(struct embedder *em, int n, const int32_t *const *ids, const uint8_t *const *types,
                           const int *n_ids, float *out, struct kvik_err *err);

void embedder_stats(struct embedder *em, struct embedder_stats *out);

#endif /* KVIK_ENGINE_EMBEDDER_H */
