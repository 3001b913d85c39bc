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

static int gcd(int a, int b) {
    while (b) {
        int t = a % b;
        a = b, b = t;
    }
    return a;
}

/* Whether layer l is the first with its window (w[l] counted once). */
static bool first_of_window(const int32_t *w, int l) {
    for (int j = 0; j < l; j++)
        if (w[j] == w[l]) return false;
    return true;
}

static int count_window(const int32_t *w, int n_layer, int32_t win) {
    int c = 0;
    for (int j = 0; j < n_layer; j++) c += w[j] == win;
    return c;
}

/* How cfg's layers fall into groups: the number of groups, the layers of
 * each (*per) and the global groups (*n_global); 0 if cfg is invalid.
 * Every layer counts as global without sliding layers or without a global
 * one. */
static int groups_of(const struct kv_paged_config *cfg, int *per, int *n_global) {
    if (cfg->n_layer < 1) return 0;
    const int32_t *w = cfg->layer_window;
    int n0 = 0, g = 0;
    for (int l = 0; w && l < cfg->n_layer; l++) {
        if (w[l] < 0) return 0;
        n0 += w[l] == 0;
    }
    if (!w || n0 == 0 || n0 == cfg->n_layer) {
        *per = cfg->n_layer;
        if (n_global) *n_global = 1;
        return 1;
    }
    for (int l = 0; l < cfg->n_layer; l++)
        if (first_of_window(w, l)) g = gcd(g, count_window(w, cfg->n_layer, w[l]));
    *per = g;
    if (n_global) *n_global = n0 / g;
    return cfg->n_layer / g;
}

int kv_paged_config_groups(const struct kv_paged_config *cfg, int *n_global) {
    int per;
    return groups_of(cfg, &per, n_global);
}

size_t kv_paged_block_bytes(const struct kv_paged_config *cfg) {
    int per = 0;
    if (cfg->n_layer < 1 || cfg->block_tokens < 1 || cfg->block_tokens > 4096 || cfg->slack < 0 ||
        !groups_of(cfg, &per, NULL) || !kv_type_fits(cfg->type, cfg->row_floats, cfg->row_floats))
        return 0;
    uint64_t n;
    size_t row = tensor_row_size(cfg->type, cfg->row_floats);
    if (mul_overflows_u64((uint64_t)per * 2 * (uint64_t)cfg->block_tokens, row, &n) || n > (1ull << 32))
        return 0;
    return (size_t)n;
}

int64_t kv_paged_config_blocks_max(const struct kv_paged_config *cfg, int64_t n_pos, int step) {
    int per, n_global, G = groups_of(cfg, &per, &n_global);
    if (G == 0 || n_pos <= 0) return 0;
    int64_t bt = cfg->block_tokens, all = (n_pos + bt - 1) / bt, n = (int64_t)n_global * all;
    if (step < 1) step = 1;
    if (G == 1) return all;
    for (int l = 0; l < cfg->n_layer; l++) { /* the groups of each window, at most win blocks each */
        int64_t w = cfg->layer_window[l];
        if (w == 0 || !first_of_window(cfg->layer_window, l)) continue;
        int64_t win = (w - 1 + cfg->slack + step + bt - 1) / bt + 1;
        n += (int64_t)(count_window(cfg->layer_window, cfg->n_layer, (int32_t)w) / per) * (win < all ? win : all);
    }
    return n;
}

static inline uint8_t *block_row(const struct kv_paged *kv, int32_t block, int slot, bool is_v, int pos_slot) {
    size_t idx = ((size_t)slot * 2 + is_v) * (size_t)kv->cfg.block_tokens + (size_t)pos_slot;
    return kv->data + (size_t)block * kv->block_bytes + idx * kv->base.row_bytes;
}

static bool seq_valid(const struct kv_paged *kv, int seq) {
    return seq >= 0 && seq < kv->cfg.max_seqs && kv->seqs[seq].open;
}

static inline int32_t *entry(const struct kv_paged *kv, const struct kv_seq *q, int32_t i, int g) {
    return &q->blocks[(size_t)i * (size_t)kv->n_groups + (size_t)g];
}

static void *paged_row(struct kv_cache *base, int layer, int seq, int pos, bool is_v) {
    struct kv_paged *kv = (struct kv_paged *)base;
    if (layer < 0 || layer >= kv->cfg.n_layer || !seq_valid(kv, seq) || pos < 0 || pos >= kv->seqs[seq].n_pos)
        return NULL;
    int bt = kv->cfg.block_tokens, g = kv->layer_group[layer];
    const struct kv_seq *q = &kv->seqs[seq];
    int32_t b = *entry(kv, q, pos / bt, g);
    return b < 0 || pos < q->lo[g] ? NULL : block_row(kv, b, kv->layer_slot[layer], is_v, pos % bt);
}

static int paged_span(struct kv_cache *base, int layer, int seq, int pos, int n, const void **k, const void **v) {
    struct kv_paged *kv = (struct kv_paged *)base;
    if (n < 1 || !(*k = paged_row(base, layer, seq, pos, false))) return 0;
    *v = paged_row(base, layer, seq, pos, true);
    int bt = kv->cfg.block_tokens, left = bt - pos % bt, have = kv->seqs[seq].n_pos - pos;
    if (left > have) left = have;
    return left < n ? left : n;
}

/* The groups of kv->cfg: which layers each holds, in which slot, and its
 * window; the global layers first (group 0 is global), then the sliding
 * ones window by window, each in layer order. */
static void layout_groups(struct kv_paged *kv, int per) {
    const int32_t *w = kv->layer_window;
    int L = kv->cfg.n_layer, g = 0, slot = 0;
    bool one = kv->n_groups == 1;
    for (int pass = 0; pass < 2; pass++)
        for (int l = 0; l < L; l++) {
            if (pass == 0 && !(one || w[l] == 0)) continue;
            if (pass == 1 && (one || w[l] == 0 || !first_of_window(w, l))) continue;
            for (int j = l; j < L; j++) {
                if (pass == 0 ? j != l : w[j] != w[l]) continue;
                kv->layer_group[j] = g;
                kv->layer_slot[j] = slot;
                kv->group_window[g] = pass == 0 ? 0 : w[l];
                if (++slot == per) slot = 0, g++;
            }
        }
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
    int per = 0, G = groups_of(cfg, &per, NULL);
    size_t L = (size_t)cfg->n_layer;
    kv->cfg = *cfg;
    kv->block_bytes = bb;
    kv->n_groups = G;
    kv->group_layers = per;
    kv->base = (struct kv_cache){.row = paged_row, .span = paged_span, .row_floats = cfg->row_floats,
                                 .type = cfg->type, .row_bytes = tensor_row_size(cfg->type, cfg->row_floats)};
    kv->layer_window = calloc(L, sizeof *kv->layer_window);
    kv->layer_group = calloc(L, sizeof *kv->layer_group);
    kv->layer_slot = calloc(L, sizeof *kv->layer_slot);
    kv->group_window = calloc((size_t)G, sizeof *kv->group_window);
    kv->run = calloc((size_t)G, sizeof *kv->run);
    kv->seq_lo = calloc((size_t)cfg->max_seqs * (size_t)G, sizeof *kv->seq_lo);
    if (G > 1) kv->links = malloc((size_t)cfg->n_blocks * (size_t)G * sizeof *kv->links);
    kv->data = mem_alloc_aligned((size_t)total);
    kv->ref = calloc((size_t)cfg->n_blocks, sizeof *kv->ref);
    kv->free_ids = malloc((size_t)cfg->n_blocks * sizeof *kv->free_ids);
    kv->seqs = calloc((size_t)cfg->max_seqs, sizeof *kv->seqs);
    kv->key = calloc((size_t)cfg->n_blocks, sizeof *kv->key);
    kv->key_tokens = malloc((size_t)cfg->n_blocks * (size_t)cfg->block_tokens * sizeof *kv->key_tokens);
    bool index_ok = kv_index_init(&kv->index, cfg->n_blocks);
    if (!kv->data || !kv->ref || !kv->free_ids || !kv->seqs || !kv->key || !kv->key_tokens || !index_ok ||
        !kv->layer_window || !kv->layer_group || !kv->layer_slot || !kv->group_window || !kv->run || !kv->seq_lo ||
        (G > 1 && !kv->links)) {
        kv_paged_free(kv);
        return err_set(err, KVIK_ERR_NOMEM, "kv: out of memory for %.1f MiB of cache", (double)total / (1 << 20));
    }
    if (cfg->layer_window && G > 1) memcpy(kv->layer_window, cfg->layer_window, L * sizeof *kv->layer_window);
    kv->cfg.layer_window = kv->layer_window;
    layout_groups(kv, per);
    if (kv->links)
        for (size_t i = 0; i < (size_t)cfg->n_blocks * (size_t)G; i++) kv->links[i] = -1;
    for (int s = 0; s < cfg->max_seqs; s++) kv->seqs[s].lo = kv->seq_lo + (size_t)s * (size_t)G;
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
    free(kv->layer_window);
    free(kv->layer_group);
    free(kv->layer_slot);
    free(kv->group_window);
    free(kv->run);
    free(kv->seq_lo);
    free(kv->links);
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

/* Companion of group g registered with anchor a, or -1. */
static int32_t companion(const struct kv_paged *kv, int32_t a, int g) {
    if (!kv->links) return -1;
    int32_t c = kv->links[(size_t)a * (size_t)kv->n_groups + (size_t)g];
    return c >= 0 && kv->key[c].serial == kv->key[a].serial && kv->key[c].group == g ? c : -1;
}

/* Block b leaves the cache (its index entry, if an anchor, is the caller's);
 * without a user it goes back on the free list. An anchor's companions
 * leave with it; a companion clears its anchor's link. */
static void block_forget(struct kv_paged *kv, int32_t b) {
    struct kv_block_key *k = &kv->key[b];
    if (k->group == 0 && kv->links) {
        for (int g = 1; g < kv->n_groups; g++) {
            int32_t c = companion(kv, b, g);
            if (c >= 0) block_forget(kv, c);
            kv->links[(size_t)b * (size_t)kv->n_groups + (size_t)g] = -1;
        }
    } else if (k->group > 0 && companion(kv, k->owner, k->group) == b) {
        kv->links[(size_t)k->owner * (size_t)kv->n_groups + (size_t)k->group] = -1;
    }
    if (kv->ref[b] == 0) {
        lru_unlink(kv, b);
        kv->free_ids[kv->n_free++] = b;
    }
    k->serial = 0;
    k->group = 0;
}

/* A free block for new positions: a never-registered one if there is one,
 * else the least recently used cached block, which leaves the cache. The
 * caller has checked kv_paged_free_blocks. */
static int32_t block_take(struct kv_paged *kv) {
    if (kv->n_free == 0) {
        int32_t b = kv->lru_head;
        if (kv->key[b].group == 0) kv_index_remove(&kv->index, kv->key[b].hash, b);
        block_forget(kv, b); /* onto the free list, with any companions */
    }
    int32_t b = kv->free_ids[--kv->n_free];
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
        for (int g = 0; g < kv->n_groups; g++) q->lo[g] = 0;
        return s;
    }
    return -1;
}

void kv_paged_seq_close(struct kv_paged *kv, int seq) {
    if (!seq_valid(kv, seq)) return;
    kv_paged_seq_truncate(kv, seq, 0);
    kv->seqs[seq].open = false;
}

static bool table_reserve(const struct kv_paged *kv, struct kv_seq *q, int32_t n) {
    if (n <= q->cap) return true;
    int32_t cap = q->cap ? q->cap : 8;
    while (cap < n) {
        if (cap > INT32_MAX / 2 / kv->n_groups) return false;
        cap *= 2;
    }
    int32_t *b = realloc(q->blocks, (size_t)cap * (size_t)kv->n_groups * sizeof *b);
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
        if (!table_reserve(kv, &kv->seqs[s], want)) return false;
    return true;
}

int kv_paged_seq_fork(struct kv_paged *kv, int src) {
    if (!seq_valid(kv, src)) return -1;
    int dst = kv_paged_seq_open(kv);
    if (dst < 0) return -1;
    struct kv_seq *s = &kv->seqs[src], *d = &kv->seqs[dst];
    if (!table_reserve(kv, d, s->n_blocks)) {
        d->open = false;
        return -1;
    }
    size_t n = (size_t)s->n_blocks * (size_t)kv->n_groups;
    for (size_t i = 0; i < n; i++) {
        d->blocks[i] = s->blocks[i];
        if (s->blocks[i] >= 0) kv->ref[s->blocks[i]]++;
    }
    for (int g = 0; g < kv->n_groups; g++) d->lo[g] = s->lo[g];
    if (s->n_chain > 0) { /* no chain: the tables may not even be allocated */
        memcpy(d->chain, s->chain, (size_t)s->n_chain * sizeof *d->chain);
        memcpy(d->serial, s->serial, (size_t)s->n_chain * sizeof *d->serial);
    }
    d->n_blocks = s->n_blocks;
    d->n_pos = s->n_pos;
    d->n_chain = s->n_chain;
    return dst;
}

/* The first position of group g that a sequence about to write from
 * position p keeps: the first of the block holding the window's first
 * position (less slack). */
static int32_t keep_pos(const struct kv_paged *kv, int g, int32_t p) {
    int64_t w = kv->group_window[g], first = (int64_t)p - w + 1 - kv->cfg.slack;
    int bt = kv->cfg.block_tokens;
    return w == 0 || first <= 0 ? 0 : (int32_t)(first / bt * bt);
}

/* Where group g's kept rows start once a write from q's n_pos begins:
 * before a write below lo (after a truncate past slack) nothing before it
 * stays readable. */
static int32_t lo_at_write(const struct kv_paged *kv, const struct kv_seq *q, int g) {
    return q->lo[g] < q->n_pos ? q->lo[g] : q->n_pos;
}

/* Blocks the release before a write from q's n_pos gives back to the free
 * blocks (released blocks with no other user). */
static int64_t release_gain(const struct kv_paged *kv, const struct kv_seq *q) {
    int64_t n = 0;
    int bt = kv->cfg.block_tokens;
    for (int g = 1; g < kv->n_groups; g++)
        for (int32_t i = lo_at_write(kv, q, g) / bt, to = keep_pos(kv, g, q->n_pos) / bt; i < to && i < q->n_blocks; i++) {
            int32_t b = *entry(kv, q, i, g);
            n += b >= 0 && kv->ref[b] == 1;
        }
    return n;
}

/* Releases the sliding blocks no write from q's n_pos on reads. */
static void release_old(struct kv_paged *kv, struct kv_seq *q) {
    int bt = kv->cfg.block_tokens;
    for (int g = 1; g < kv->n_groups; g++) {
        q->lo[g] = lo_at_write(kv, q, g);
        int32_t keep = keep_pos(kv, g, q->n_pos);
        if (keep <= q->lo[g]) continue;
        for (int32_t i = q->lo[g] / bt; i < keep / bt && i < q->n_blocks; i++) {
            int32_t *e = entry(kv, q, i, g);
            if (*e >= 0) block_release(kv, *e);
            *e = -1;
        }
        q->lo[g] = keep;
    }
}

/* The partly filled last block of q in group g, about to get new
 * positions, must be copied first: it is shared, or registered in the
 * prefix cache. */
static bool last_is_immutable(const struct kv_paged *kv, const struct kv_seq *q, int g) {
    int32_t b = *entry(kv, q, q->n_blocks - 1, g);
    return b >= 0 && (kv->ref[b] > 1 || kv->key[b].serial != 0);
}

/* The partly filled last block of q in group g was released (a truncate
 * past slack): the next write needs a new one. */
static bool last_is_gone(const struct kv_paged *kv, const struct kv_seq *q, int g) {
    return *entry(kv, q, q->n_blocks - 1, g) < 0;
}

int64_t kv_paged_blocks_needed(const struct kv_paged *kv, int seq, int n_pos) {
    if (!seq_valid(kv, seq)) return 0;
    const struct kv_seq *q = &kv->seqs[seq];
    if (n_pos <= q->n_pos) return 0;
    int bt = kv->cfg.block_tokens;
    int64_t want = ((int64_t)n_pos + bt - 1) / bt, need = (want - q->n_blocks) * kv->n_groups;
    if (q->n_pos % bt)
        for (int g = 0; g < kv->n_groups; g++) need += last_is_immutable(kv, q, g) || last_is_gone(kv, q, g);
    need -= release_gain(kv, q);
    return need > 0 ? need : 0;
}

bool kv_paged_seq_grow(struct kv_paged *kv, int seq, int n_pos) {
    if (!seq_valid(kv, seq) || n_pos < 0) return false;
    struct kv_seq *q = &kv->seqs[seq];
    if (n_pos <= q->n_pos) return true;
    int bt = kv->cfg.block_tokens;
    int64_t want = ((int64_t)n_pos + bt - 1) / bt;
    if (want > INT32_MAX || kv_paged_blocks_needed(kv, seq, n_pos) > kv_paged_free_blocks(kv) ||
        !table_reserve(kv, q, (int32_t)want))
        return false;
    release_old(kv, q);
    if (q->n_pos % bt)
        for (int g = 0; g < kv->n_groups; g++) {
            int32_t *last = entry(kv, q, q->n_blocks - 1, g);
            if (*last < 0) { /* its rows before n_pos are gone (below lo) */
                *last = block_take(kv);
                continue;
            }
            if (!last_is_immutable(kv, q, g)) continue; /* copy on write */
            int32_t copy = block_take(kv);
            memcpy(kv->data + (size_t)copy * kv->block_bytes, kv->data + (size_t)*last * kv->block_bytes,
                   kv->block_bytes);
            block_release(kv, *last);
            *last = copy;
        }
    for (; q->n_blocks < want; q->n_blocks++)
        for (int g = 0; g < kv->n_groups; g++) *entry(kv, q, q->n_blocks, g) = block_take(kv);
    q->n_pos = n_pos;
    return true;
}

void kv_paged_seq_truncate(struct kv_paged *kv, int seq, int n_pos) {
    if (!seq_valid(kv, seq) || n_pos < 0) return;
    struct kv_seq *q = &kv->seqs[seq];
    if (n_pos >= q->n_pos) return;
    int bt = kv->cfg.block_tokens;
    int32_t keep = (int32_t)(((int64_t)n_pos + bt - 1) / bt);
    while (q->n_blocks > keep) {
        q->n_blocks--;
        for (int g = kv->n_groups - 1; g >= 0; g--) {
            int32_t *e = entry(kv, q, q->n_blocks, g);
            if (*e >= 0) block_release(kv, *e);
        }
    }
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
    return k->serial && k->group == 0 && k->n_tokens == bt && k->parent == parent && k->salt == salt &&
           !memcmp(stored_tokens(kv, b), tokens, (size_t)bt * sizeof *tokens);
}

/* Block b is registered as the tail after the prefix named by parent,
 * under salt. */
static bool tail_matches(const struct kv_paged *kv, int32_t b, uint64_t parent, uint64_t salt) {
    const struct kv_block_key *k = &kv->key[b];
    return k->serial && k->group == 0 && k->n_tokens < kv->cfg.block_tokens && k->parent == parent &&
           k->salt == salt;
}

/* Takes registered anchor b out of the cache, with its companions. */
static void block_unregister(struct kv_paged *kv, int32_t b) {
    kv_index_remove(&kv->index, kv->key[b].hash, b);
    block_forget(kv, b);
}

/* Registers block c (not registered) as anchor a's companion of group g. */
static void link_companion(struct kv_paged *kv, int32_t a, int g, int32_t c) {
    struct kv_block_key *k = &kv->key[c];
    const struct kv_block_key *ka = &kv->key[a];
    k->hash = ka->hash;
    k->serial = ka->serial;
    k->parent = ka->parent;
    k->salt = ka->salt;
    k->n_tokens = ka->n_tokens;
    k->group = g;
    k->owner = a;
    kv->links[(size_t)a * (size_t)kv->n_groups + (size_t)g] = c;
}

/* Registers the blocks of q at block position i in groups 1.. as
 * companions of anchor a (already registered): where a has a companion of
 * a group, q's block is swapped for it; blocks not all of whose rows are
 * kept (below lo) are skipped. */
static void register_companions(struct kv_paged *kv, struct kv_seq *q, int32_t i, int32_t a) {
    for (int g = 1; g < kv->n_groups; g++) {
        int32_t *e = entry(kv, q, i, g), c = companion(kv, a, g);
        if (*e < 0 || *e == c || (int64_t)i * kv->cfg.block_tokens < q->lo[g]) continue;
        if (c >= 0) {
            block_hold(kv, c);
            block_release(kv, *e);
            *e = c;
        } else if (!kv->key[*e].serial) {
            link_companion(kv, a, g, *e);
        }
    }
}

/* Every group has its companions of the chain q->blocks[.][0] from the
 * window before position n up to block position i (exclusive), per
 * kv->run (run[g]: where group g's unbroken run of companions starts). */
static bool window_complete(const struct kv_paged *kv, int32_t n) {
    for (int g = 1; g < kv->n_groups; g++)
        if (kv->run[g] > keep_pos(kv, g, n) / kv->cfg.block_tokens) return false;
    return true;
}

int kv_paged_prefix_attach(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt) {
    if (!seq_valid(kv, seq) || kv->seqs[seq].n_pos || !tokens || n_tokens < 1) return 0;
    struct kv_seq *q = &kv->seqs[seq];
    int bt = kv->cfg.block_tokens, G = kv->n_groups;
    uint64_t h = 0, parent = 0;
    int32_t i = 0, best = 0; /* best: the longest chain whose window is complete */
    for (int g = 0; g < G; g++) kv->run[g] = 0;
    for (; (int64_t)(i + 1) * bt <= n_tokens; i++) {
        const int32_t *t = tokens + (size_t)i * (size_t)bt;
        uint64_t hi = kv_paged_block_hash(h, salt, t, bt);
        int32_t b = kv_index_find(&kv->index, hi);
        if (b < 0 || !key_matches(kv, b, parent, salt, t) || !table_reserve(kv, q, i + 1)) break;
        *entry(kv, q, i, 0) = b;
        q->chain[i] = h = hi;
        q->serial[i] = parent = kv->key[b].serial;
        for (int g = 1; g < G; g++)
            if (companion(kv, b, g) < 0) kv->run[g] = i + 1;
        if (window_complete(kv, (i + 1) * bt)) best = i + 1;
    }
    /* then the tail of the full chain, as far as the tokens agree, if its
     * window is complete too */
    int rest = n_tokens - i * bt, n_tail = 0;
    int32_t tb = rest > 0 && best == i ? kv_index_find(&kv->index, tail_key(h, salt)) : -1;
    if (tb >= 0 && tail_matches(kv, tb, parent, salt) && table_reserve(kv, q, i + 1)) {
        const int32_t *st = stored_tokens(kv, tb), *t = tokens + (size_t)i * (size_t)bt;
        int max = kv->key[tb].n_tokens < rest ? kv->key[tb].n_tokens : rest;
        while (n_tail < max && st[n_tail] == t[n_tail]) n_tail++;
        for (int g = 1; g < G && n_tail > 0; g++)
            if (companion(kv, tb, g) < 0) n_tail = 0;
        if (n_tail > 0 && !window_complete(kv, i * bt + n_tail)) n_tail = 0;
    }
    int32_t n = best * bt + n_tail, nb = best + (n_tail > 0);
    if (n_tail > 0) *entry(kv, q, best, 0) = tb;
    for (int g = 0; g < G; g++) q->lo[g] = keep_pos(kv, g, n);
    for (int32_t j = 0; j < nb; j++) {
        int32_t a = *entry(kv, q, j, 0);
        block_hold(kv, a);
        for (int g = 1; g < G; g++) {
            int32_t c = j < q->lo[g] / bt ? -1 : companion(kv, a, g);
            if (c >= 0) block_hold(kv, c);
            *entry(kv, q, j, g) = c;
        }
    }
    q->n_blocks = nb;
    q->n_chain = best;
    q->n_pos = n;
    return n;
}

int kv_paged_prefix_keep_tail(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt) {
    if (!seq_valid(kv, seq) || !tokens) return 0;
    struct kv_seq *q = &kv->seqs[seq];
    int bt = kv->cfg.block_tokens, n = n_tokens < q->n_pos ? n_tokens : q->n_pos;
    int32_t i = n / bt;
    int r = n % bt;
    if (r == 0 || q->n_chain < i) return 0;
    int32_t b = *entry(kv, q, i, 0);
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
    k->group = 0;
    memcpy(kv->key_tokens + (size_t)b * (size_t)bt, t, (size_t)r * sizeof *t);
    register_companions(kv, q, i, b);
    return r;
}

int kv_paged_prefix_register(struct kv_paged *kv, int seq, const int32_t *tokens, int n_tokens, uint64_t salt) {
    if (!seq_valid(kv, seq) || !tokens) return 0;
    struct kv_seq *q = &kv->seqs[seq];
    int bt = kv->cfg.block_tokens, limit = n_tokens < q->n_pos ? n_tokens : q->n_pos;
    while ((int64_t)(q->n_chain + 1) * bt <= limit) {
        int32_t i = q->n_chain, *slot = entry(kv, q, i, 0);
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
            k->group = 0;
            memcpy(kv->key_tokens + (size_t)*slot * (size_t)bt, t, (size_t)bt * sizeof *t);
        } else if (x != *slot) { /* the same prefix computed twice: keep the cached copy */
            block_hold(kv, x);
            block_release(kv, *slot);
            *slot = x;
        }
        register_companions(kv, q, i, *slot);
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

/* The index holds exactly the registered anchors, each under its hash;
 * every registered companion is its anchor's link under the same serial,
 * and every anchor's link is empty or a companion. */
static bool index_consistent(const struct kv_paged *kv) {
    int64_t registered = 0, nb = kv->cfg.n_blocks;
    int G = kv->n_groups;
    for (int64_t b = 0; b < nb; b++) {
        const struct kv_block_key *k = &kv->key[b];
        if (kv->links && k->serial && k->group == 0)
            for (int g = 1; g < G; g++) {
                int32_t c = kv->links[(size_t)b * (size_t)G + (size_t)g];
                if (c >= 0 && companion(kv, (int32_t)b, g) != c) return false;
            }
        if (!k->serial) continue;
        if (k->n_tokens < 1 || k->n_tokens > kv->cfg.block_tokens || k->group < 0 || k->group >= G) return false;
        if (k->group > 0) {
            if (k->owner < 0 || k->owner >= nb || kv->key[k->owner].group != 0 || companion(kv, k->owner, k->group) != b)
                return false;
            continue;
        }
        registered++;
        if (kv_index_find(&kv->index, k->hash) != b) return false;
    }
    return registered == kv->index.n;
}

bool kv_paged_consistent(const struct kv_paged *kv) {
    int64_t nb = kv->cfg.n_blocks;
    int G = kv->n_groups;
    int32_t *users = calloc((size_t)nb, sizeof *users);
    uint8_t *on_list = calloc((size_t)nb, 1); /* 1: free list, 2: LRU list */
    bool ok = users && on_list && kv->n_free >= 0 && kv->n_free <= nb;
    for (int s = 0; ok && s < kv->cfg.max_seqs; s++) {
        const struct kv_seq *q = &kv->seqs[s];
        if (!q->open) continue;
        int bt = kv->cfg.block_tokens;
        ok = q->n_pos >= 0 && q->n_blocks == (q->n_pos + bt - 1) / bt && q->n_blocks <= q->cap &&
             q->n_chain >= 0 && q->n_chain <= q->n_pos / bt;
        for (int g = 0; ok && g < G; g++) ok = q->lo[g] >= 0 && (kv->group_window[g] || !q->lo[g]);
        for (int32_t i = 0; ok && i < q->n_blocks; i++)
            for (int g = 0; ok && g < G; g++) {
                int32_t b = *entry(kv, q, i, g);
                if ((int64_t)(i + 1) * bt <= q->lo[g]) {
                    ok = b == -1;
                    continue;
                }
                ok = b >= 0 && b < nb;
                if (ok) users[b]++;
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
