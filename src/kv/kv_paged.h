/*
 * kv_paged.h — the serving engine's key/value cache: one pool of fixed-size
 * blocks, allocated once, shared by every sequence through block tables.
 *
 * Layer groups. The layers are split into n_groups groups of the same
 * number of layers (group_layers), so that every block has the same size:
 * a block holds block_tokens consecutive positions of one sequence for the
 * layers of one group, K and V: [layer in group][K, V][block_tokens]
 * [row_bytes]. Layers with the same sliding window (config.layer_window)
 * share groups; group_layers is the greatest common divisor of the counts
 * of layers per window, and group 0 is a group of global layers (window 0).
 * Without sliding layers (or without any global one) there is one group of
 * all layers and everything below holds as for one block per position run.
 *
 * A sequence owns a table with one block id per group for every block
 * position (block_tokens positions) covering 0..n_pos-1; it asks for
 * blocks as it grows (kv_paged_seq_grow), so no request reserves its
 * maximum length up front. A grow from n_pos = p means positions p.. are
 * written next, and the attention of those tokens in a layer of window w
 * reads positions from p - w + 1 on; so before it takes new blocks, grow
 * releases the blocks of every sliding group that lie wholly before
 * p - w + 1 - slack (config.slack: how far a later truncate may go back
 * below p). Their table entries become -1; row() and span() answer NULL
 * and 0 there, so a forward that would read a released position fails
 * instead of reading stale rows. The pool thus holds, per sequence, all
 * positions of the global groups but only about w + slack + the last grow
 * of each sliding group. Blocks are reference-counted: a fork (n > 1 completions of one
 * prompt, later the prefix cache) shares every block of its source, and the
 * first write into a shared, partly filled last block copies it first (copy
 * on write). A block whose count drops to zero goes back on the free list,
 * unless the prefix cache holds it (below).
 *
 * Prefix cache. A full block position can be registered under a chained hash
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
 * With layer groups, the prefix cache's entry for a block position (full
 * or tail) is its group 0 block, the anchor: it alone is in the index and
 * keeps the ids, salt and parent serial. The blocks of the other groups at
 * that position are registered with it as its companions (same serial,
 * links[anchor][group]); a companion released by a sliding group as its
 * sequence grows stays cached like any registered block. Attach takes a
 * prefix only if, for every group, the companions from the window before
 * its end (positions the next tokens read) are all still there: it takes
 * the longest chain whose window is complete, possibly shorter than the
 * matching chain. An anchor leaving the cache takes its companions with
 * it; a companion evicted alone just leaves its anchor's link empty.
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
    const int32_t *layer_window; /* [n_layer] positions layer l's attention reads back (0: all);
                                    NULL: every layer reads all; copied by kv_paged_init */
    int32_t slack;    /* positions a truncate may go back below the n_pos of the last grow
                         and still continue (sliding blocks kept beyond the window) */
};

struct kv_seq {
    int32_t n_pos;    /* positions 0..n_pos-1 are covered by blocks */
    int32_t n_blocks; /* block positions in use: ceil(n_pos / block_tokens) */
    int32_t cap;      /* block positions allocated (blocks, chain, serial) */
    int32_t *blocks;  /* [cap][n_groups] block id of each group per block_tokens positions;
                         -1: released (a sliding group's blocks wholly below lo) */
    int32_t *lo;      /* [n_groups] positions below lo[g] are released in group g: row()
                         answers NULL, and blocks lying wholly below are -1 (0 for global
                         groups) */
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
    int32_t group;    /* the group it serves while registered: 0 anchor, else a companion */
    int32_t owner;    /* a companion's anchor */
    int32_t lru_prev, lru_next; /* on the LRU list (cached, no user): older, newer; -1 none */
};

struct kv_paged {
    struct kv_cache base;
    struct kv_paged_config cfg;
    size_t block_bytes; /* one block: group_layers layers, K and V */
    int n_groups, group_layers;
    int32_t *layer_window; /* [n_layer] copy of the configuration's (cfg.layer_window points here) */
    int32_t *layer_group;  /* [n_layer] the group of each layer */
    int32_t *layer_slot;   /* [n_layer] its place in the group's blocks */
    int32_t *group_window; /* [n_groups] 0: global */
    int32_t *seq_lo;       /* [max_seqs][n_groups] behind kv_seq.lo */
    int32_t *links;        /* [n_blocks][n_groups] a registered anchor's companion of each group
                              (-1: none); NULL with one group */
    int32_t *run;          /* [n_groups] scratch of attach */
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
/* The layer groups of this configuration: their count, and in *n_global
 * (may be NULL) the groups of global layers (>= 1). 0 if it is invalid. */
int kv_paged_config_groups(const struct kv_paged_config *cfg, int *n_global);
/* The most blocks one sequence of up to n_pos positions holds at once when
 * every grow adds at most step positions (admission: a request that needs
 * more can never run in the pool). */
int64_t kv_paged_config_blocks_max(const struct kv_paged_config *cfg, int64_t n_pos, int step);

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

/* Free blocks kv_paged_seq_grow(kv, seq, n_pos) needs: the blocks it takes
 * (new blocks, plus copies of shared last blocks about to be written) less
 * those its release of sliding blocks gives back; at least 0. */
int64_t kv_paged_blocks_needed(const struct kv_paged *kv, int seq, int n_pos);
/* Makes positions 0..n_pos-1 writable: sliding blocks before the window of
 * the current n_pos are released, positions from the current n_pos on get
 * blocks, and a shared last block that will receive new positions is
 * copied first. False, with nothing changed, when the pool lacks the blocks
 * (or the table cannot grow). n_pos below the current one is a no-op. */
bool kv_paged_seq_grow(struct kv_paged *kv, int seq, int n_pos);
/* Forgets positions n_pos.. of seq (a rejected speculative draft, a
 * preempted request): blocks no longer needed are released. Registered
 * blocks it keeps stay as they are (a later write into one copies it).
 * Going back more than slack below the n_pos of the last grow leaves
 * released positions inside the window: continuing from there fails in
 * the forward (row/span answer no room), it never reads stale rows. */
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
/* The block of group g at block position i of seq (-1: released). */
static inline int32_t kv_paged_seq_block(const struct kv_paged *kv, int seq, int32_t i, int g) {
    return kv->seqs[seq].blocks[(size_t)i * (size_t)kv->n_groups + (size_t)g];
}
/* kv_paged_config_blocks_max for this pool. */
static inline int64_t kv_paged_blocks_max(const struct kv_paged *kv, int64_t n_pos, int step) {
    return kv_paged_config_blocks_max(&kv->cfg, n_pos, step);
}

/* Checks the pool's bookkeeping: every block's count equals the number of
 * table entries naming it; sliding groups' entries are -1 exactly for the
 * blocks wholly below their lo; the free list holds exactly the unregistered
 * blocks with no user and the LRU list exactly the registered ones with no
 * user, once each, its links both ways agreeing; the index maps exactly
 * the registered anchors, each under its own hash, each with 1..block_tokens
 * ids (block_tokens unless it is a tail); every registered companion is
 * linked from its registered anchor under the same serial; every sequence's known chain is
 * no longer than its full blocks. For tests and debugging;
 * O(blocks + table entries). */
bool kv_paged_consistent(const struct kv_paged *kv);

#endif /* KVIK_KV_PAGED_H */
