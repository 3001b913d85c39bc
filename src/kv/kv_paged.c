/*
 * kv_paged.c — the block pool, block tables and reference counts of the
 * paged key/value cache (see kv_paged.h).
 *
 * The free list is a stack of block ids, so a block given back is the first
 * reused (its lines may still be in a cache). Block tables grow by doubling.
 * The prefix cache's LRU list is doubly linked through kv->key[].lru_prev
 * and lru_next: released blocks join at the tail, eviction takes the head.
 * A sequence gives its blocks back last block first, so a prompt's first
 * blocks, shared by most requests, are the last of it to be evicted.
 */
#include <stdlib.h>

#include "kv/kv_paged.h"
#include "tensor/tensor.h"

size_t kv_paged_block_bytes(const struct kv_paged_config *cfg) {
    if (cfg->n_layer < 1 || cfg->block_tokens < 1 || cfg->block_tokens > 4096 ||
        !kv_type_fits(cfg->type, cfg->row_floats, cfg->row_floats))
        return 0;
    uint64_t n;
    size_t row = tensor_row_size(cfg->type, cfg->row_floats);
    if (mul_overflows_u64((uint64_t)cfg->n_layer * 2 * (uint64_t)cfg->block_tokens, row, &n) || n > (1ull << 32))
        return 0;
    return (size_t)n;
}

static inline uint8_t *block_row(const struct kv_paged *kv, int32_t block, int layer, bool is_v, int slot) {
    size_t idx = ((size_t)layer * 2 + is_v) * (size_t)kv->cfg.block_tokens + (size_t)slot;
    return kv->data + (size_t)block * kv->block_bytes + idx * kv->base.row_bytes;
}

static bool seq_valid(const struct kv_paged *kv, int seq) {
    return seq >= 0 && seq < kv->cfg.max_seqs && kv->seqs[seq].open;
}

static void *paged_row(struct kv_cache *base, int layer, int seq, int pos, bool is_v) {
    struct kv_paged *kv = (struct kv_paged *)base;
    if (layer < 0 || layer >= kv->cfg.n_layer || !seq_valid(kv, seq) || pos < 0 || pos >= kv->seqs[seq].n_pos)
        return NULL;
    int bt = kv->cfg.block_tokens;
    return block_row(kv, kv->seqs[seq].blocks[pos / bt], layer, is_v, pos % bt);
}

static int paged_span(struct kv_cache *base, int layer, int seq, int pos, int n, const void **k, const void **v) {
    struct kv_paged *kv = (struct kv_paged *)base;
    if (n < 1 || !(*k = paged_row(base, layer, seq, pos, false))) return 0;
    *v = paged_row(base, layer, seq, pos, true);
    int bt = kv->cfg.block_tokens, left = bt - pos % bt, have = kv->seqs[seq].n_pos - pos;
    if (left > have) left = have;
    return left < n ? left : n;
}

kvik_status kv_paged_init(struct kv_paged *kv, const struct kv_paged_config *cfg, struct kvik_err *err) {
    memset(kv, 0, sizeof *kv);
    size_t bb = kv_paged_block_bytes(cfg);
    if (!bb || cfg->n_blocks < 1 || cfg->n_blocks > INT32_MAX || cfg->max_seqs < 1 || cfg->max_seqs > 1 << 20)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "kv: bad paged cache (%d layers, rows of %d %s values, %d-token blocks, %lld blocks, %d sequences)",
                       cfg->n_layer, cfg->row_floats, tensor_type_name(cfg->type), cfg->block_tokens,
                       (long long)cfg->n_blocks, cfg->max_seqs);
    uint64_t total;
    if (mul_overflows_u64((uint64_t)cfg->n_blocks, bb, &total) || total > (1ull << 42))
        return err_set(err, KVIK_ERR_INVALID_ARG, "kv: %lld blocks of %zu bytes is too large", (long long)cfg->n_blocks,
                       bb);
    kv->cfg = *cfg;
    kv->block_bytes = bb;
    kv->base = (struct kv_cache){.row = paged_row, .span = paged_span, .row_floats = cfg->row_floats,
                                 .type = cfg->type, .row_bytes = tensor_row_size(cfg->type, cfg->row_floats)};
    kv->data = mem_alloc_aligned((size_t)total);
    kv->ref = calloc((size_t)cfg->n_blocks, sizeof *kv->ref);
    kv->free_ids = malloc((size_t)cfg->n_blocks * sizeof *kv->free_ids);
    kv->seqs = calloc((size_t)cfg->max_seqs, sizeof *kv->seqs);
    kv->key = calloc((size_t)cfg->n_blocks, sizeof *kv->key);
    kv->key_tokens = malloc((size_t)cfg->n_blocks * (size_t)cfg->block_tokens * sizeof *kv->key_tokens);
    bool index_ok = kv_index_init(&kv->index, cfg->n_blocks);
    if (!kv->data || !kv->ref || !kv->free_ids || !kv->seqs || !kv->key || !kv->key_tokens || !index_ok) {
        kv_paged_free(kv);
        return err_set(err, KVIK_ERR_NOMEM, "kv: out of memory for %.1f MiB of cache", (double)total / (1 << 20));
    }
    /* lowest ids on top of the stack */
    for (int64_t i = 0; i < cfg->n_blocks; i++) kv->free_ids[i] = (int32_t)(cfg->n_blocks - 1 - i);
    kv->n_free = cfg->n_blocks;
    kv->lru_head = kv->lru_tail = -1;
    kv->next_serial = 1;
    return KVIK_OK;
}

void kv_paged_free(struct kv_paged *kv) {
    if (kv->seqs)
        for (int s = 0; s < kv->cfg.max_seqs; s++) {
            free(kv->seqs[s].blocks);
            free(kv->seqs[s].chain);
            free(kv->seqs[s].serial);
        }
    mem_free(kv->data);
    free(kv->key);
    free(kv->key_tokens);
    kv_index_free(&kv->index);
    free(kv->ref);
    free(kv->free_ids);
    free(kv->seqs);
    memset(kv, 0, sizeof *kv);
}

/* ---- the LRU list of cached blocks with no user -------------------------- */

static void lru_push(struct kv_paged *kv, int32_t b) {
    struct kv_block_key *k = &kv->key[b];
    k->lru_prev = kv->lru_tail;
    k->lru_next = -1;
    if (kv->lru_tail >= 0) kv->key[kv->lru_tail].lru_next = b;
    else kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_cached++;
}

static void lru_unlink(struct kv_paged *kv, int32_t b) {
    struct kv_block_key *k = &kv->key[b];
    if (k->lru_prev >= 0) kv->key[k->lru_prev].lru_next = k->lru_next;
    else kv->lru_head = k->lru_next;
    if (k->lru_next >= 0) kv->key[k->lru_next].lru_prev = k->lru_prev;
    else kv->lru_tail = k->lru_prev;
    k->lru_prev = k->lru_next = -1;
    kv->n_cached--;
}

/* A free block for new positions: a never-registered one if there is one,
 * else the least recently used cached block, which leaves the cache. The
 * caller has checked kv_paged_free_blocks. */
static int32_t block_take(struct kv_paged *kv) {
    int32_t b;
    if (kv->n_free > 0) {
        b = kv->free_ids[--kv->n_free];
    } else {
        b = kv->lru_head;
        lru_unlink(kv, b);
        kv_index_remove(&kv->index, kv->key[b].hash, b);
        kv->key[b].serial = 0;
    }
    kv->ref[b] = 1;
    return b;
}

/* One more user of a block (a cached one leaves the LRU list). */
static void block_hold(struct kv_paged *kv, int32_t b) {
    if (kv->ref[b]++ == 0) lru_unlink(kv, b);
}

static void block_release(struct kv_paged *kv, int32_t b) {
    if (--kv->ref[b] > 0) return;
    if (kv->key[b].serial) lru_push(kv, b);
    else kv->free_ids[kv->n_free++] = b;
}

int kv_paged_seq_open(struct kv_paged *kv) {
    for (int s = 0; s < kv->cfg.max_seqs; s++) {
        struct kv_seq *q = &kv->seqs[s];
        if (q->open) continue;
        q->open = true;
        q->n_pos = 0;
        q->n_blocks = 0;
        q->n_chain = 0;
        return s;
    }
    return -1;
}

void kv_paged_seq_close(struct kv_paged *kv, int seq) {
    if (!seq_valid(kv, seq)) return;
    kv_paged_seq_truncate(kv, seq, 0);
    kv->seqs[seq].open = false;
}

static bool table_reserve(struct kv_seq *q, int32_t n) {
    if (n <= q->cap) return true;
    int32_t cap = q->cap ? q->cap : 8;
    while (cap < n) {
        if (cap > INT32_MAX / 2) return false;
        cap *= 2;
    }
    int32_t *b = realloc(q->blocks, (size_t)cap * sizeof *b);
    if (!b) return false;
    q->blocks = b;
    uint64_t *c = realloc(q->chain, (size_t)cap * sizeof *c);
    if (!c) return false;
    q->chain = c;
    uint64_t *sr = realloc(q->serial, (size_t)cap * sizeof *sr);
    if (!sr) return false;
    q->serial = sr;
    q->cap = cap;
    return true;
}

bool kv_paged_reserve_tables(struct kv_paged *kv, int n_pos) {
    if (n_pos < 0) return false;
    int32_t want = (int32_t)(((int64_t)n_pos + kv->cfg.block_tokens - 1) / kv->cfg.block_tokens);
    for (int s = 0; s < kv->cfg.max_seqs; s++)
        if (!table_reserve(&kv->seqs[s], want)) return false;
    return true;
}

int kv_paged_seq_fork(struct kv_paged *kv, int src) {
    if (!seq_valid(kv, src)) return -1;
    int dst = kv_paged_seq_open(kv);
    if (dst < 0) return -1;
    struct kv_seq *s = &kv->seqs[src], *d = &kv->seqs[dst];
    if (!table_reserve(d, s->n_blocks)) {
        d->open = false;
        return -1;
    }
    for (int32_t i = 0; i < s->n_blocks; i++) {
        d->blocks[i] = s->blocks[i];
        kv->ref[s->blocks[i]]++;
    }
    if (s->n_chain > 0) { /* no chain: the tables may not even be allocated */
        memcpy(d->chain, s->chain, (size_t)s->n_chain * sizeof *d->chain);
        memcpy(d->serial, s->serial, (size_t)s->n_chain * sizeof *d->serial);
    }
    d->n_blocks = s->n_blocks;
    d->n_pos = s->n_pos;
    d->n_chain = s->n_chain;
    return dst;
}

/* The partly filled last block of q, about to get new positions, must be
 * copied first: it is shared, or registered in the prefix cache. */
static bool last_is_immutable(const struct kv_paged *kv, const struct kv_seq *q) {
    int32_t b = q->blocks[q->n_blocks - 1];
    return kv->ref[b] > 1 || kv->key[b].serial != 0;
}

int64_t kv_paged_blocks_needed(const struct kv_paged *kv, int seq, int n_pos) {
    if (!seq_valid(kv, seq)) return 0;
    const struct kv_seq *q = &kv->seqs[seq];
    if (n_pos <= q->n_pos) return 0;
    int bt = kv->cfg.block_tokens;
    int64_t want = ((int64_t)n_pos + bt - 1) / bt, need = want - q->n_blocks;
    if (q->n_pos % bt && last_is_immutable(kv, q)) need++;
    return need;
}

bool kv_paged_seq_grow(struct kv_paged *kv, int seq, int n_pos) {
    if (!seq_valid(kv, seq) || n_pos < 0) return false;
    struct kv_seq *q = &kv->seqs[seq];
    if (n_pos <= q->n_pos) return true;
    int bt = kv->cfg.block_tokens;
    int64_t want = ((int64_t)n_pos + bt - 1) / bt;
    if (want > INT32_MAX || kv_paged_blocks_needed(kv, seq, n_pos) > kv_paged_free_blocks(kv) || !table_reserve(q, (int32_t)want))
        return false;
    if (q->n_pos % bt) {
        int32_t *last = &q->blocks[q->n_blocks - 1];
        if (last_is_immutable(kv, q)) { /* copy on write */
            int32_t copy = block_take(kv);
            memcpy(kv->data + (size_t)copy * kv->block_bytes, kv->data + (size_t)*last * kv->block_bytes,
                   kv->block_bytes);
            block_release(kv, *last);
            *last = copy;
        }
    }
    while (q->n_blocks < want) q->blocks[q->n_blocks++] = block_take(kv);
    q->n_pos = n_pos;
    return true;
}

void kv_paged_seq_truncate(struct kv_paged *kv, int seq, int n_pos) {
    if (!seq_valid(kv, seq) || n_pos < 0) return;
    struct kv_seq *q = &kv->seqs[seq];
    if (n_pos >= q->n_pos) return;
    int bt = kv->cfg.block_tokens;
    int32_t keep = (int32_t)(((int64_t)n_pos + bt - 1) / bt);
    while (q->n_blocks > keep) block_release(kv, q->blocks[--q->n_blocks]);
    q->n_pos = n_pos;
    if (q->n_chain > n_pos / bt) q->n_chain = n_pos / bt;
}

/* ---- the prefix cache --------------------------------------------------- */

uint64_t kv_paged_block_hash(uint64_t parent_hash, uint64_t salt, const int32_t *tokens, int n) {
    return hash64(tokens, (size_t)n * sizeof *tokens, hash64_pair(parent_hash, salt));
}

/* The index key of the tail after the prefix whose chained hash is h. */
static uint64_t tail_key(uint64_t h, uint64_t salt) {
    return hash64_pair(hash64_pair(h, salt), UINT64_C(0x7461696c626c6f63)); /* "tailbloc" */
}

static const int32_t *stored_tokens(const struct kv_paged *kv, int32_t b) {
    return kv->key_tokens + (size_t)b * (size_t)kv->cfg.block_tokens;
}

/* Block b is registered as the full block after the prefix named by
 * parent, with these tokens and salt. */
static bool key_matches(const struct kv_paged *kv, int32_t b, uint64_t parent, uint64_t salt, const int32_t *tokens) {
    const struct kv_block_key *k = &kv->key[b];
    int bt = kv->cfg.block_tokens;
    return k->serial && k->n_tokens == bt && k->parent == parent && k->salt == salt &&
           !memcmp(stored_tokens(kv, b), tokens, (size_t)bt * sizeof *tokens);
}

/* Block b is registered as the tail after the prefix named by parent,
 * under salt. */
static bool tail_matches(const struct kv_paged *kv, int32_t b, uint64_t parent, uint64_t salt) {
    const struct kv_block_key *k = &kv->key[b];
    return k->serial && k->n_tokens < kv->cfg.block_tokens && k->parent == parent && k->salt == salt;
}

/* Takes registered block b out of the cache; without a user it goes back
 * on the free list. */
static void block_unregister(struct kv_paged *kv, int32_t b) {
    kv_index_remove(&kv->index, kv->key[b].hash, b);
    if (kv->ref[b] == 0) {
        lru_unlink(kv, b);
        kv->free_ids[kv->n_free++] = b;
    }
    kv->key[b].serial = 0;
}

int kv_paged_prefix_attach(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt) {
    if (!seq_valid(kv, seq) || kv->seqs[seq].n_pos || !tokens || n_tokens < 1) return 0;
    struct kv_seq *q = &kv->seqs[seq];
    int bt = kv->cfg.block_tokens;
    uint64_t h = 0, parent = 0;
    int32_t i = 0;
    for (; (int64_t)(i + 1) * bt <= n_tokens; i++) {
        const int32_t *t = tokens + (size_t)i * (size_t)bt;
        uint64_t hi = kv_paged_block_hash(h, salt, t, bt);
        int32_t b = kv_index_find(&kv->index, hi);
        if (b < 0 || !key_matches(kv, b, parent, salt, t) || !table_reserve(q, i + 1)) break;
        block_hold(kv, b);
        q->blocks[i] = b;
        q->chain[i] = h = hi;
        q->serial[i] = parent = kv->key[b].serial;
    }
    q->n_blocks = q->n_chain = i;
    q->n_pos = i * bt;
    /* then the tail of that chain, as far as the tokens agree */
    int rest = n_tokens - i * bt;
    int32_t b = rest > 0 ? kv_index_find(&kv->index, tail_key(h, salt)) : -1;
    if (b >= 0 && tail_matches(kv, b, parent, salt) && table_reserve(q, i + 1)) {
        const int32_t *st = stored_tokens(kv, b), *t = tokens + (size_t)i * (size_t)bt;
        int n = 0, max = kv->key[b].n_tokens < rest ? kv->key[b].n_tokens : rest;
        while (n < max && st[n] == t[n]) n++;
        if (n > 0) {
            block_hold(kv, b);
            q->blocks[i] = b;
            q->n_blocks = i + 1;
            q->n_pos += n;
        }
    }
    return q->n_pos;
}

int kv_paged_prefix_keep_tail(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt) {
    if (!seq_valid(kv, seq) || !tokens) return 0;
    struct kv_seq *q = &kv->seqs[seq];
    int bt = kv->cfg.block_tokens, n = n_tokens < q->n_pos ? n_tokens : q->n_pos;
    int32_t i = n / bt;
    int r = n % bt;
    if (r == 0 || q->n_chain < i) return 0;
    int32_t b = q->blocks[i];
    if (kv->key[b].serial) return 0; /* attached as a tail and never written */
    uint64_t h = i ? q->chain[i - 1] : 0, parent = i ? q->serial[i - 1] : 0, key = tail_key(h, salt);
    const int32_t *t = tokens + (size_t)i * (size_t)bt;
    int32_t x = kv_index_find(&kv->index, key);
    if (x >= 0) {
        if (!tail_matches(kv, x, parent, salt)) return 0; /* a collision: leave it */
        if (kv->key[x].n_tokens >= r && !memcmp(stored_tokens(kv, x), t, (size_t)r * sizeof *t)) return 0;
        block_unregister(kv, x); /* the newer tail replaces it */
    }
    if (!kv_index_insert(&kv->index, key, b)) return 0;
    struct kv_block_key *k = &kv->key[b];
    k->hash = key;
    k->serial = kv->next_serial++;
    k->parent = parent;
    k->salt = salt;
    k->n_tokens = r;
    memcpy(kv->key_tokens + (size_t)b * (size_t)bt, t, (size_t)r * sizeof *t);
    return r;
}

int kv_paged_prefix_register(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt) {
    if (!seq_valid(kv, seq) || !tokens) return 0;
    struct kv_seq *q = &kv->seqs[seq];
    int bt = kv->cfg.block_tokens, limit = n_tokens < q->n_pos ? n_tokens : q->n_pos;
    while ((int64_t)(q->n_chain + 1) * bt <= limit) {
        int32_t i = q->n_chain, *slot = &q->blocks[i];
        uint64_t h = i ? q->chain[i - 1] : 0, parent = i ? q->serial[i - 1] : 0;
        const int32_t *t = tokens + (size_t)i * (size_t)bt;
        uint64_t hi = kv_paged_block_hash(h, salt, t, bt);
        int32_t x = kv_index_find(&kv->index, hi);
        if (x >= 0 && !key_matches(kv, x, parent, salt, t)) break; /* a collision: leave it */
        if (x < 0 && kv->key[*slot].serial) break;                 /* registered otherwise: cannot happen */
        if (x < 0) {
            if (!kv_index_insert(&kv->index, hi, *slot)) break;
            struct kv_block_key *k = &kv->key[*slot];
            k->hash = hi;
            k->serial = kv->next_serial++;
            k->parent = parent;
            k->salt = salt;
            k->n_tokens = bt;
            memcpy(kv->key_tokens + (size_t)*slot * (size_t)bt, t, (size_t)bt * sizeof *t);
        } else if (x != *slot) { /* the same prefix computed twice: keep the cached copy */
            block_hold(kv, x);
            block_release(kv, *slot);
            *slot = x;
        }
        q->chain[i] = hi;
        q->serial[i] = kv->key[*slot].serial;
        q->n_chain = i + 1;
    }
    return q->n_chain;
}

/* The LRU list walked both ways: each block on it once, registered, with
 * no user; marks them in on_list. */
static bool lru_consistent(const struct kv_paged *kv, uint8_t *on_list) {
    int64_t nb = kv->cfg.n_blocks, n = 0;
    int32_t prev = -1;
    for (int32_t b = kv->lru_head; b >= 0; prev = b, b = kv->key[b].lru_next) {
        if (b >= nb || on_list[b] || kv->key[b].lru_prev != prev || !kv->key[b].serial || kv->ref[b] || ++n > nb)
            return false;
        on_list[b] = 2;
    }
    return prev == kv->lru_tail && n == kv->n_cached;
}

/* The index holds exactly the registered blocks, each under its hash. */
static bool index_consistent(const struct kv_paged *kv) {
    int64_t registered = 0;
    for (int64_t b = 0; b < kv->cfg.n_blocks; b++) {
        if (!kv->key[b].serial) continue;
        registered++;
        if (kv_index_find(&kv->index, kv->key[b].hash) != b || kv->key[b].n_tokens < 1 ||
            kv->key[b].n_tokens > kv->cfg.block_tokens)
            return false;
    }
    return registered == kv->index.n;
}

bool kv_paged_consistent(const struct kv_paged *kv) {
    int64_t nb = kv->cfg.n_blocks;
    int32_t *users = calloc((size_t)nb, sizeof *users);
    uint8_t *on_list = calloc((size_t)nb, 1); /* 1: free list, 2: LRU list */
    bool ok = users && on_list && kv->n_free >= 0 && kv->n_free <= nb;
    for (int s = 0; ok && s < kv->cfg.max_seqs; s++) {
        const struct kv_seq *q = &kv->seqs[s];
        if (!q->open) continue;
        int bt = kv->cfg.block_tokens;
        ok = q->n_pos >= 0 && q->n_blocks == (q->n_pos + bt - 1) / bt && q->n_blocks <= q->cap &&
             q->n_chain >= 0 && q->n_chain <= q->n_pos / bt;
        for (int32_t i = 0; ok && i < q->n_blocks; i++) {
            ok = q->blocks[i] >= 0 && q->blocks[i] < nb;
            if (ok) users[q->blocks[i]]++;
        }
    }
    for (int64_t i = 0; ok && i < kv->n_free; i++) {
        int32_t b = kv->free_ids[i];
        ok = b >= 0 && b < nb && !on_list[b] && !kv->key[b].serial;
        if (ok) on_list[b] = 1;
    }
    ok = ok && lru_consistent(kv, on_list) && index_consistent(kv);
    for (int64_t b = 0; ok && b < nb; b++) ok = kv->ref[b] == users[b] && (users[b] == 0) == (on_list[b] != 0);
    free(users);
    free(on_list);
    return ok;
}
