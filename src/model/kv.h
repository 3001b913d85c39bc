/*
 * kv.h — how the forward pass reaches the key/value cache.
 *
 * The forward pass writes one K row and one V row ([n_head_kv * head_dim]
 * floats each) per layer per token, and reads back the rows of positions
 * 0..pos of the token's sequence, in runs of contiguous rows. It does so
 * only through these accessors, so a cache may store rows anywhere: kv_flat (below) keeps each
 * sequence contiguous; the serving engine's paged cache maps positions to
 * blocks. Rows returned must stay valid for the duration of one forward.
 */
#ifndef KVIK_MODEL_KV_H
#define KVIK_MODEL_KV_H

#include "base/base.h"

struct kv_cache {
    /* Pointer to the K (is_v false) or V row of (layer, seq, pos); NULL if
     * the cache has no room there (the forward pass then fails cleanly). */
    float *(*row)(struct kv_cache *kv, int layer, int seq, int pos, bool is_v);
    /* The run of positions pos, pos+1, ... (at most n of them) of (layer,
     * seq) whose K rows lie row_floats apart from *k, and V rows likewise
     * from *v: returns its length (>= 1), or 0 if pos has no room. Attention
     * reads the cache run by run. */
    int (*span)(struct kv_cache *kv, int layer, int seq, int pos, int n, const float **k, const float **v);
    int row_floats; /* n_head_kv * head_dim */
};

/* A simple cache: n_seq sequences of up to n_ctx positions each, one
 * allocation. */
struct kv_flat {
    struct kv_cache base;
    int n_layer, n_seq, n_ctx;
    float *data; /* [n_layer][n_seq][2][n_ctx][row_floats] */
};

kvik_status kv_flat_init(struct kv_flat *kv, int n_layer, int n_seq, int n_ctx, int row_floats,
                         struct kvik_err *err);
void kv_flat_free(struct kv_flat *kv);

#endif /* KVIK_MODEL_KV_H */
