/*
 * kv_paged.h — the serving engine's key/value cache: one pool of fixed-size
 * blocks, allocated once, shared by every sequence through block tables.
 *
 * A block holds block_tokens consecutive positions of one sequence for every
 * layer, K and V: [layer][K, V][block_tokens][row_bytes]. A sequence owns a
 * table of block ids covering its positions 0..n_pos-1; it asks for blocks
 * as it grows (kv_paged_seq_grow), so no request reserves its maximum length
 * up front. Blocks are reference-counted: a fork (n > 1 completions of one
 * prompt, later the prefix cache) shares every block of its source, and the
 * first write into a shared, partly filled last block copies it first (copy
 * on write). A block whose count drops to zero goes back on the free list.
 *
 * Rows are stored as F32, F16 or Q8_0 (kv_paged_config.type); the forward
 * pass converts through struct kv_cache (model/kv.h), which this implements.
 *
 * Not thread-safe: the scheduler owns it and calls it between forward passes;
 * during a forward, only row() and span() are called (from many threads),
 * and they modify nothing.
 */
#ifndef KVIK_KV_PAGED_H
#define KVIK_KV_PAGED_H

#include "model/kv.h"

struct kv_paged_config {
    int n_layer;
    int row_floats;   /* n_head_kv * head_dim */
    int type;         /* TENSOR_TYPE_F32, _F16 or _Q8_0 */
    int block_tokens; /* positions per block (16 is usual) */
    int64_t n_blocks; /* blocks in the pool */
    int max_seqs;     /* sequence slots */
};

struct kv_seq {
    int32_t n_pos;    /* positions 0..n_pos-1 are covered by blocks */
    int32_t n_blocks; /* entries of blocks in use */
    int32_t cap;      /* entries allocated */
    int32_t *blocks;  /* block ids, one per block_tokens positions */
    bool open;
};

struct kv_paged {
    struct kv_cache base;
    struct kv_paged_config cfg;
    size_t block_bytes; /* one block, all layers, K and V */
    uint8_t *data;      /* [n_blocks][block_bytes] */
    int32_t *ref;       /* [n_blocks] users of each block */
    int32_t *free_ids;  /* stack of free block ids */
    int64_t n_free;
    struct kv_seq *seqs; /* [max_seqs] */
};

/* Bytes of one block for this configuration (0 if it is invalid). */
size_t kv_paged_block_bytes(const struct kv_paged_config *cfg);

/* Allocates the pool. KVIK_ERR_INVALID_ARG for a bad configuration,
 * KVIK_ERR_NOMEM when the pool does not fit. */
kvik_status kv_paged_init(struct kv_paged *kv, const struct kv_paged_config *cfg, struct kvik_err *err);
void kv_paged_free(struct kv_paged *kv);

/* Sizes every slot's block table for n_pos positions now, so that later
 * grow and fork calls up to that length allocate nothing (the serving
 * engine calls it once at start). False when out of memory. */
bool kv_paged_reserve_tables(struct kv_paged *kv, int n_pos);

/* A new empty sequence: its id, or -1 when every slot is in use. */
int kv_paged_seq_open(struct kv_paged *kv);
/* Gives back all blocks of seq and its slot. */
void kv_paged_seq_close(struct kv_paged *kv, int seq);
/* A new sequence sharing every block of src (same positions); -1 when no
 * slot is free or src is not open. */
int kv_paged_seq_fork(struct kv_paged *kv, int src);

/* Blocks kv_paged_seq_grow(kv, seq, n_pos) would take from the free list
 * (new blocks, plus a copy of a shared last block about to be written). */
int64_t kv_paged_blocks_needed(const struct kv_paged *kv, int seq, int n_pos);
/* Makes positions 0..n_pos-1 writable: positions from the current n_pos on
 * get blocks, and a shared last block that will receive new positions is
 * copied first. False, with nothing changed, when the pool lacks the blocks
 * (or the table cannot grow). n_pos below the current one is a no-op. */
bool kv_paged_seq_grow(struct kv_paged *kv, int seq, int n_pos);
/* Forgets positions n_pos.. of seq (a rejected speculative draft, a
 * preempted request): blocks no longer needed are released. */
void kv_paged_seq_truncate(struct kv_paged *kv, int seq, int n_pos);

static inline int32_t kv_paged_seq_len(const struct kv_paged *kv, int seq) { return kv->seqs[seq].n_pos; }
static inline int64_t kv_paged_free_blocks(const struct kv_paged *kv) { return kv->n_free; }
static inline int64_t kv_paged_used_blocks(const struct kv_paged *kv) { return kv->cfg.n_blocks - kv->n_free; }

/* Checks the pool's bookkeeping: every block's count equals the number of
 * table entries naming it, and the free list holds exactly the blocks with
 * no user, once each. For tests and debugging; O(blocks + table entries). */
bool kv_paged_consistent(const struct kv_paged *kv);

#endif /* KVIK_KV_PAGED_H */
