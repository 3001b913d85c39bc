/*
 * gguf_names.c — hash sets of names (struct gguf_names: the keys of an
 * open file, its tensor names): open addressing with linear probing over
 * FNV-1a hashes. The reader allocates the slots and inserts every name
 * once while it validates; afterwards the sets are only read.
 */

#include "gguf/gguf.h"

static uint64_t hash_name(const char *s, uint64_t len) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

int64_t gguf_names_find(const struct gguf_names *set, const char *name, uint64_t len) {
    if (!set->slots) return -1;
    for (uint64_t i = hash_name(name, len) & set->mask;; i = (i + 1) & set->mask) {
        const struct gguf_slot *s = &set->slots[i];
        if (!s->name) return -1;
        if (s->len == len && memcmp(s->name, name, len) == 0) return s->index;
    }
}

int64_t gguf_names_insert(struct gguf_names *set, const char *name, uint64_t len, int64_t index) {
    for (uint64_t i = hash_name(name, len) & set->mask;; i = (i + 1) & set->mask) {
        struct gguf_slot *s = &set->slots[i];
        if (!s->name) {
            *s = (struct gguf_slot){name, len, index};
            return -1;
        }
        if (s->len == len && memcmp(s->name, name, len) == 0) return s->index;
    }
}
