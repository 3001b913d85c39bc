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
    /* Pointer to where the K (is_v false) or V row of (layer, seq, pos) is
     * stored; NULL if the cache has no room there (the forward pass then
     * fails cleanly). The forward converts its float row into it. */
    void *(*row)(struct kv_cache *kv, int layer, int seq, int pos, bool is_v);
    /* The run of positions pos, pos+1, ... (at most n of them) of (layer,
     * seq) whose K rows lie row_bytes apart from *k, and V rows likewise
     * from *v: returns its length (>= 1), or 0 if pos has no room. Attention
     * reads the cache run by run. */
    int (*span)(struct kv_cache *kv, int layer, int seq, int pos, int n, const void **k, const void **v);
    int row_floats;   /* n_head_kv * head_dim values per row */
    int type;         /* how a row is stored: TENSOR_TYPE_F32, F16 or Q8_0 */
    size_t row_bytes; /* bytes of one stored row */
};

/* Whether rows of row_floats values, split into heads of head_dim, can be
 * stored as type (each head must start on a block of the type). */
bool kv_type_fits(int type, int row_floats, int head_dim);

/* A simple cache: n_seq sequences of up to n_ctx positions each, one
 * allocation. */
struct kv_flat {
    struct kv_cache base;
    int n_layer, n_seq, n_ctx;
    uint8_t *data; /* [n_layer][n_seq][2][n_ctx][row_bytes] */
};

/* type as in struct kv_cache (TENSOR_TYPE_F32 keeps the rows exact). */
kvik_status kv_flat_init(struct kv_flat *kv, int n_layer, int n_seq, int n_ctx, int row_floats, int type,
                         struct kvik_err *err);
void kv_flat_free(struct kv_flat *kv);

#endif /* KVIK_MODEL_KV_H */
