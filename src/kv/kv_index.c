/*
 * kv_index.c — the prefix cache's hash index (see kv_index.h).
 *
 * Deletion shifts later entries of the same probe run back into the hole
 * (an entry moves only if the hole lies cyclically between its home slot
 * and its slot), so every entry stays reachable from its home slot and
 * lookups stop at the first empty slot.
 */
#include <stdlib.h>

#include "kv/kv_index.h"

static inline uint64_t home(const struct kv_index *ix, uint64_t key) { return (key ^ (key >> 29)) & ix->mask; }

bool kv_index_init(struct kv_index *ix, int64_t max_entries) {
    memset(ix, 0, sizeof *ix);
    if (max_entries < 1 || max_entries > INT32_MAX) return false;
    uint64_t slots = 16;
    while (slots < 2 * (uint64_t)max_entries) slots *= 2;
    ix->keys = malloc(slots * sizeof *ix->keys);
    ix->vals = malloc(slots * sizeof *ix->vals);
    if (!ix->keys || !ix->vals) {
        kv_index_free(ix);
        return false;
    }
    for (uint64_t i = 0; i < slots; i++) ix->vals[i] = -1;
    ix->mask = slots - 1;
    ix->max = max_entries;
    return true;
}

void kv_index_free(struct kv_index *ix) {
    free(ix->keys);
    free(ix->vals);
    memset(ix, 0, sizeof *ix);
}

/* The slot holding key, or the empty slot ending its probe run. */
static uint64_t probe(const struct kv_index *ix, uint64_t key) {
    uint64_t i = home(ix, key);
    while (ix->vals[i] >= 0 && ix->keys[i] != key) i = (i + 1) & ix->mask;
    return i;
}

int32_t kv_index_find(const struct kv_index *ix, uint64_t key) {
    if (!ix->vals) return -1;
    return ix->vals[probe(ix, key)];
}

bool kv_index_insert(struct kv_index *ix, uint64_t key, int32_t val) {
    if (!ix->vals || val < 0 || ix->n >= ix->max) return false;
    uint64_t i = probe(ix, key);
    if (ix->vals[i] >= 0) return false;
    ix->keys[i] = key;
    ix->vals[i] = val;
    ix->n++;
    return true;
}

bool kv_index_remove(struct kv_index *ix, uint64_t key, int32_t val) {
    if (!ix->vals) return false;
    uint64_t hole = probe(ix, key);
    if (ix->vals[hole] < 0 || ix->vals[hole] != val) return false;
    for (uint64_t j = hole;;) {
        j = (j + 1) & ix->mask;
        if (ix->vals[j] < 0) break;
        uint64_t h = home(ix, ix->keys[j]);
        /* the entry at j stays if its home lies cyclically in (hole, j] */
        bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
        if (stays) continue;
        ix->keys[hole] = ix->keys[j];
        ix->vals[hole] = ix->vals[j];
        hole = j;
    }
    ix->vals[hole] = -1;
    ix->n--;
    return true;
}
