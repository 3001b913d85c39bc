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
 * on write). A block whose count drops to zero goes back on the free list,
 * unless the prefix cache holds it (below).
 *
 * Prefix cache. A full block can be registered under a chained hash
 *   h(i) = hash(h(i-1), salt, the block's block_tokens token ids), h(-1) = 0
 * where salt stands for everything besides the tokens that the K/V depend
 * on or that must keep entries apart (the serving engine mixes the model's
 * identity, the KV type and the request's isolation key into it). A new
 * sequence then attaches the longest chain of registered blocks matching
 * its tokens (kv_paged_prefix_attach) instead of computing them. Hashes
 * only find candidates: each registered block also keeps its token ids,
 * its salt and the serial number of its parent's registration (serials are
 * never reused, so a serial names exactly one token prefix), and a hit
 * needs all three to match; a hash collision is a miss, never wrong K/V.
 * A registered block is immutable: a write into it (after a truncate into
 * it) copies it first, as for a shared block. When its last user lets go
 * it stays registered and goes on an LRU list of cached blocks, still
 * counted as free; a block is needed from the free list, blocks never
 * registered come first, then the least recently used cached one, which
 * leaves the index then.
 *
 * Tails. A sequence that ends inside a block (a finished request, a chat
 * turn) can leave that partly filled last block in the cache too
 * (kv_paged_prefix_keep_tail): it is registered with the r < block_tokens
 * token ids it holds under the tail key
 *   t(i) = hash(h(i-1), salt, TAIL)
 * of the prefix before it, one tail per prefix (a newer tail replaces an
 * older one unless the older already holds the same tokens). Attach, after
 * the longest chain of full blocks, looks up the tail of that chain and
 * takes as many of its positions as the sequence's next tokens agree with
 * (the longest common prefix of its stored ids, verified like a full
 * block's: ids, salt, parent serial). The sequence then ends inside a
 * registered block, so its next write copies the block first; the cached
 * tail keeps its rows. Tails are never part of a chain (n_chain counts
 * full blocks only).
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

#include "kv/kv_index.h"
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
    int32_t cap;      /* entries allocated (blocks, chain, serial) */
    int32_t *blocks;  /* block ids, one per block_tokens positions */
    int32_t n_chain;  /* leading full blocks whose token prefix the cache knows */
    uint64_t *chain;  /* [cap] h(i) of the prefix through block i (i < n_chain) */
    uint64_t *serial; /* [cap] the registration serial naming that prefix */
    bool open;
};

/* What the prefix cache keeps for a block (serial 0: not registered). */
struct kv_block_key {
    uint64_t hash;    /* h(i) */
    uint64_t serial;  /* this registration's number (1, 2, ...; never reused) */
    uint64_t parent;  /* the serial of the prefix before it (0: none, block 0) */
    uint64_t salt;
    int32_t n_tokens; /* ids stored: block_tokens for a full block, 1..block_tokens-1 for a tail */
    int32_t lru_prev, lru_next; /* on the LRU list (cached, no user): older, newer; -1 none */
};

struct kv_paged {
    struct kv_cache base;
    struct kv_paged_config cfg;
    size_t block_bytes; /* one block, all layers, K and V */
    uint8_t *data;      /* [n_blocks][block_bytes] */
    int32_t *ref;       /* [n_blocks] users of each block */
    int32_t *free_ids;  /* stack of free block ids, never registered */
    int64_t n_free;
    struct kv_seq *seqs; /* [max_seqs] */
    /* prefix cache */
    struct kv_block_key *key; /* [n_blocks] */
    int32_t *key_tokens;      /* [n_blocks][block_tokens] token ids of registered blocks */
    struct kv_index index;    /* h -> registered block */
    int32_t lru_head, lru_tail; /* oldest and newest cached block with no user; -1 none */
    int64_t n_cached;         /* blocks on the LRU list */
    uint64_t next_serial;
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
 * preempted request): blocks no longer needed are released. Registered
 * blocks it keeps stay as they are (a later write into one copies it). */
void kv_paged_seq_truncate(struct kv_paged *kv, int seq, int n_pos);

/* Attaches to the empty sequence seq the longest chain of registered blocks
 * matching tokens[0..n_tokens) under salt (verified token by token), then
 * as much of the chain's registered tail as tokens agree with. Returns the
 * positions now covered (0 when nothing matched, seq is not open and
 * empty, or its table cannot grow); past a multiple of block_tokens only
 * through a tail. The caller computes from there on; to get logits it must
 * leave at least one token out of n_tokens. */
int kv_paged_prefix_attach(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt);
/* Registers the full blocks of seq among positions 0..min(n_tokens,
 * n_pos)-1 not registered yet; tokens are the ids at those positions, whose
 * K/V must be computed. A block whose prefix is already registered under
 * another block is swapped for that block (its own goes back to the free
 * list). Stops at a hash collision. Returns the leading blocks of seq now
 * known to the cache. */
int kv_paged_prefix_register(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt);
/* Registers the partly filled block holding positions up to
 * min(n_tokens, n_pos) of seq as the tail of the chain before it (see
 * Tails above); tokens are the ids at those positions, whose K/V must be
 * computed. Nothing when that count is a multiple of block_tokens, when
 * the full blocks before it are not all known to the cache, when the
 * block is registered already, or when an older tail under the same
 * prefix holds these ids already (then that one stays). Returns the ids
 * registered (0: none). Call it just before the sequence is closed or
 * stops writing: the block is immutable from then on. */
int kv_paged_prefix_keep_tail(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt);
/* The chained hash of one block (see above). */
uint64_t kv_paged_block_hash(uint64_t parent_hash, uint64_t salt, const int32_t *tokens, int n);

static inline int32_t kv_paged_seq_len(const struct kv_paged *kv, int seq) { return kv->seqs[seq].n_pos; }
/* Blocks a sequence can get: never-registered free ones plus cached ones
 * without a user (evicted on demand). */
static inline int64_t kv_paged_free_blocks(const struct kv_paged *kv) { return kv->n_free + kv->n_cached; }
static inline int64_t kv_paged_used_blocks(const struct kv_paged *kv) { return kv->cfg.n_blocks - kv_paged_free_blocks(kv); }
/* Cached blocks with no user (on the LRU list). */
static inline int64_t kv_paged_cached_blocks(const struct kv_paged *kv) { return kv->n_cached; }
static inline bool kv_paged_block_registered(const struct kv_paged *kv, int32_t b) { return kv->key[b].serial != 0; }

/* Checks the pool's bookkeeping: every block's count equals the number of
 * table entries naming it; the free list holds exactly the unregistered
 * blocks with no user and the LRU list exactly the registered ones with no
 * user, once each, its links both ways agreeing; the index maps exactly
 * the registered blocks, each under its own hash, each with 1..block_tokens
 * ids (block_tokens unless it is a tail); every sequence's known chain is
 * no longer than its full blocks. For tests and debugging;
 * O(blocks + table entries). */
bool kv_paged_consistent(const struct kv_paged *kv);

#endif /* KVIK_KV_PAGED_H */
