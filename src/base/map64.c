/*
 * map64.c — the open-addressing map of base.h (struct map64): linear
 * probing, at most half full, deletion by moving later entries of the
 * run back (no tombstones).
 */
#include <stdlib.h>

#include "base/base.h"

static size_t home(const struct map64 *m, uint64_t key) {
    return (size_t)(hash64_pair(key, 0x9e3779b97f4a7c15ull) & (m->cap - 1));
}

static bool grow(struct map64 *m) {
    size_t old = m->cap, cap = old ? 2 * old : 64;
    uint64_t *ok = m->key;
    int64_t *ov = m->val;
    uint64_t *nk = malloc(cap * sizeof *nk);
    int64_t *nv = malloc(cap * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return false;
    }
    m->key = nk;
    m->val = nv;
    m->cap = cap;
    for (size_t i = 0; i < cap; i++) nv[i] = -1;
    for (size_t i = 0; i < old; i++)
        if (ov[i] >= 0) {
            size_t j = home(m, ok[i]);
            while (nv[j] >= 0) j = (j + 1) & (cap - 1);
            nk[j] = ok[i];
            nv[j] = ov[i];
        }
    free(ok);
    free(ov);
    return true;
}

void map64_free(struct map64 *m) {
    free(m->key);
    free(m->val);
    *m = (struct map64){0};
}

int64_t map64_get(const struct map64 *m, uint64_t key) {
    if (!m->cap) return -1;
    for (size_t i = home(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->val[i] < 0) return -1;
        if (m->key[i] == key) return m->val[i];
    }
}

bool map64_put(struct map64 *m, uint64_t key, int64_t val) {
    if ((m->n + 1) * 2 > m->cap && !grow(m)) return false;
    size_t i = home(m, key);
    while (m->val[i] >= 0 && m->key[i] != key) i = (i + 1) & (m->cap - 1);
    if (m->val[i] < 0) m->n++;
    m->key[i] = key;
    m->val[i] = val;
    return true;
}

bool map64_del(struct map64 *m, uint64_t key) {
    if (!m->cap) return false;
    size_t mask = m->cap - 1, i = home(m, key);
    while (m->val[i] >= 0 && m->key[i] != key) i = (i + 1) & mask;
    if (m->val[i] < 0) return false;
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (m->val[j] < 0) break;
        size_t h = home(m, m->key[j]);
        /* j's entry may move to i when its home is not in (i, j] */
        bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (stays) continue;
        m->key[i] = m->key[j];
        m->val[i] = m->val[j];
        i = j;
    }
    m->val[i] = -1;
    m->n--;
    return true;
}
