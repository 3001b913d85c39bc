/*
 * kv_index.h — the prefix cache's hash index: 64-bit block hash -> block id.
 *
 * An open-addressing table (linear probing, a power-of-two number of slots,
 * at least twice the entries it may ever hold, so it never fills) with
 * backward-shift deletion, so no tombstones pile up as blocks are evicted
 * and registered again. One id per hash: a second insert of a hash already
 * present is refused, and the caller keeps its block out of the cache.
 *
 * The keys are already hashes (kv_paged's chained block hashes), so the
 * home slot is taken from their bits directly. Not thread-safe.
 */
#ifndef KVIK_KV_INDEX_H
#define KVIK_KV_INDEX_H

#include "base/base.h"

struct kv_index {
    uint64_t *keys;  /* [mask + 1] */
    int32_t *vals;   /* [mask + 1] block id; -1: empty slot */
    uint64_t mask;   /* slots - 1 */
    int64_t n;       /* entries */
    int64_t max;     /* entries it was sized for */
};

/* Sizes the table for max_entries (>= 1). False when out of memory or too
 * large. */
bool kv_index_init(struct kv_index *ix, int64_t max_entries);
void kv_index_free(struct kv_index *ix);

/* The id stored under key; -1 if none. */
int32_t kv_index_find(const struct kv_index *ix, uint64_t key);
/* Stores key -> val (val >= 0). False, nothing changed, when key is
 * already present or max_entries are stored. */
bool kv_index_insert(struct kv_index *ix, uint64_t key, int32_t val);
/* Removes key if it maps to val; false (nothing changed) otherwise. */
bool kv_index_remove(struct kv_index *ix, uint64_t key, int32_t val);

#endif /* KVIK_KV_INDEX_H */
