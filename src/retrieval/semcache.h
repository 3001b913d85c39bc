/*
 * semcache.h — a semantic response cache: answers stored under a hard key
 * and the embedding of the question they answered, found again for a new
 * question whose embedding is close enough.
 *
 * The key is 32 bytes the caller derives from everything that must match
 * exactly (kvik serve: the API key, the model and its file, the template,
 * every message but the last, the sampling parameters). Similarity is only
 * ever computed between entries of the same key, so no threshold can let
 * one key's answer out under another: the key partitions the cache before
 * any vector is compared.
 *
 *  - A lookup returns the answer of the entry of that key whose vector has
 *    the highest cosine with the query among those at least the threshold,
 *    younger than the TTL (absolute: from its insertion, not refreshed by
 *    hits) and, with the guard on, whose question says the same thing in
 *    the same words as the query's (qmatch.h): a cosine alone lets
 *    negations, swapped entities and other numbers through.
 *  - Vectors are unit length (the caller normalises); the score is their
 *    dot product.
 *  - At most max_entries entries: the oldest goes first. Expired entries
 *    are dropped when met.
 *  - Any calls at once (one mutex; a lookup scans one key's entries).
 */
#ifndef KVIK_RETRIEVAL_SEMCACHE_H
#define KVIK_RETRIEVAL_SEMCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

enum { SEMCACHE_KEY = 32 };

struct semcache_config {
    int dim;               /* the embedding's width */
    float threshold;       /* least cosine of a hit */
    int64_t ttl_ns;        /* an entry's life (> 0) */
    int64_t max_entries;   /* > 0 */
    bool guard;            /* hits also need qmatch_same of the two questions */
};

struct semcache_stats {
    uint64_t hits, misses, inserts, evictions, expirations;
    int64_t entries;
};

struct semcache;

struct semcache *semcache_new(const struct semcache_config *cfg, struct kvik_err *err);
void semcache_free(struct semcache *c); /* NULL is fine */

/* What a lookup saw: the entry under the key nearest the query, hit or not. */
struct semcache_probe {
    float sim;   /* its cosine (-2: the key holds nothing) */
    bool same;   /* qmatch_same of its question and the query's */
};

/* The query q (its embedding) and question[0..qlen). A hit: true, a
 * malloc'd copy of the answer in *answer (len bytes and a NUL after). A
 * miss: false. *probe (may be NULL) says what the nearest entry was.
 * now_ns: clock_ns(). */
bool semcache_get(struct semcache *c, const uint8_t key[SEMCACHE_KEY], const float *q, const char *question,
                  size_t qlen, int64_t now_ns, char **answer, size_t *len, struct semcache_probe *probe);
/* Stores answer[0..len) for q and its question under key (copied).
 * KVIK_ERR_NOMEM. */
kvik_status semcache_put(struct semcache *c, const uint8_t key[SEMCACHE_KEY], const float *q, const char *question,
                         size_t qlen, int64_t now_ns, const char *answer, size_t len);
/* Drops every entry (a new model). */
void semcache_clear(struct semcache *c);
void semcache_stats(struct semcache *c, struct semcache_stats *out);

#endif /* KVIK_RETRIEVAL_SEMCACHE_H */
