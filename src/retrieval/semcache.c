/*
 * semcache.c — the semantic cache of semcache.h: entries chained per key in
 * a hash table of buckets, and on a list in insertion order (the oldest is
 * evicted first, and expires first).
 */
#include <pthread.h>
#include <stdlib.h>

#include "retrieval/qmatch.h"
#include "retrieval/semcache.h"
#include "vector/vector.h"

struct entry {
    struct entry *chain;        /* the next entry of the same bucket */
    struct entry *older, *newer; /* insertion order */
    uint8_t key[SEMCACHE_KEY];
    int64_t t;                  /* inserted at */
    char *answer;
    size_t len;
    char *question;
    size_t qlen;
    float vec[];                /* [dim] */
};

struct semcache {
    struct semcache_config cfg;
    pthread_mutex_t mu;
    struct entry **bucket;      /* [n_buckets] */
    size_t n_buckets;           /* a power of two */
    struct entry *oldest, *newest;
    struct semcache_stats st;
};

static size_t bucket_of(const struct semcache *c, const uint8_t *key) {
    uint64_t h;
    memcpy(&h, key, 8); /* the key is a hash already */
    return (size_t)(h & (c->n_buckets - 1));
}

struct semcache *semcache_new(const struct semcache_config *cfg, struct kvik_err *err) {
    if (cfg->dim < 1 || cfg->ttl_ns <= 0 || cfg->max_entries <= 0 || !(cfg->threshold <= 1.0f)) {
        err_set(err, KVIK_ERR_INVALID_ARG, "semantic cache: bad configuration");
        return NULL;
    }
    struct semcache *c = calloc(1, sizeof *c);
    size_t nb = 1024;
    while ((int64_t)nb < cfg->max_entries && nb < ((size_t)1 << 24)) nb *= 2;
    if (c) c->bucket = calloc(nb, sizeof *c->bucket);
    if (!c || !c->bucket) {
        free(c);
        err_set(err, KVIK_ERR_NOMEM, "semantic cache: out of memory");
        return NULL;
    }
    c->cfg = *cfg;
    c->n_buckets = nb;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

/* Takes e out of its bucket and the order, and frees it. */
static void drop(struct semcache *c, struct entry *e) {
    struct entry **p = &c->bucket[bucket_of(c, e->key)];
    while (*p != e) p = &(*p)->chain;
    *p = e->chain;
    if (e->older) e->older->newer = e->newer;
    else c->oldest = e->newer;
    if (e->newer) e->newer->older = e->older;
    else c->newest = e->older;
    free(e->answer);
    free(e->question);
    free(e);
    c->st.entries--;
}

/* Drops the expired entries (the oldest ones). */
static void expire(struct semcache *c, int64_t now) {
    while (c->oldest && now - c->oldest->t >= c->cfg.ttl_ns) {
        drop(c, c->oldest);
        c->st.expirations++;
    }
}

void semcache_free(struct semcache *c) {
    if (!c) return;
    semcache_clear(c);
    free(c->bucket);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

bool semcache_get(struct semcache *c, const uint8_t key[SEMCACHE_KEY], const float *q, const char *question,
                  size_t qlen, int64_t now_ns, char **answer, size_t *len, struct semcache_probe *probe) {
    *answer = NULL;
    *len = 0;
    pthread_mutex_lock(&c->mu);
    expire(c, now_ns);
    const struct entry *best = NULL, *nearest = NULL;
    float best_sim = -2.0f, near_sim = -2.0f;
    for (const struct entry *e = c->bucket[bucket_of(c, key)]; e; e = e->chain) {
        if (memcmp(e->key, key, SEMCACHE_KEY)) continue;
        float s = vec_dot_f32(q, e->vec, c->cfg.dim);
        if (s > near_sim) near_sim = s, nearest = e;
        if (s < c->cfg.threshold || s <= best_sim) continue;
        if (c->cfg.guard && !qmatch_same(e->question, e->qlen, question, qlen)) continue;
        best_sim = s, best = e;
    }
    if (probe) {
        probe->sim = near_sim;
        probe->same = nearest && qmatch_same(nearest->question, nearest->qlen, question, qlen);
    }
    bool hit = best != NULL;
    if (hit && (*answer = malloc(best->len + 1))) {
        memcpy(*answer, best->answer, best->len);
        (*answer)[best->len] = 0;
        *len = best->len;
    }
    hit = hit && *answer;
    if (hit) c->st.hits++;
    else c->st.misses++;
    pthread_mutex_unlock(&c->mu);
    return hit;
}

kvik_status semcache_put(struct semcache *c, const uint8_t key[SEMCACHE_KEY], const float *q, const char *question,
                         size_t qlen, int64_t now_ns, const char *answer, size_t len) {
    size_t dim = (size_t)c->cfg.dim;
    struct entry *e = malloc(sizeof *e + dim * sizeof(float));
    char *a = malloc(len + 1), *qs = malloc(qlen + 1);
    if (!e || !a || !qs) {
        free(e);
        free(a);
        free(qs);
        return KVIK_ERR_NOMEM;
    }
    memcpy(a, answer, len);
    a[len] = 0;
    memcpy(qs, question, qlen);
    qs[qlen] = 0;
    *e = (struct entry){.t = now_ns, .answer = a, .len = len, .question = qs, .qlen = qlen};
    memcpy(e->key, key, SEMCACHE_KEY);
    memcpy(e->vec, q, dim * sizeof(float));
    pthread_mutex_lock(&c->mu);
    expire(c, now_ns);
    while (c->st.entries >= c->cfg.max_entries && c->oldest) {
        drop(c, c->oldest);
        c->st.evictions++;
    }
    size_t b = bucket_of(c, key);
    e->chain = c->bucket[b];
    c->bucket[b] = e;
    e->older = c->newest;
    if (c->newest) c->newest->newer = e;
    else c->oldest = e;
    c->newest = e;
    c->st.entries++;
    c->st.inserts++;
    pthread_mutex_unlock(&c->mu);
    return KVIK_OK;
}

void semcache_clear(struct semcache *c) {
    pthread_mutex_lock(&c->mu);
    while (c->oldest) drop(c, c->oldest);
    pthread_mutex_unlock(&c->mu);
}

void semcache_stats(struct semcache *c, struct semcache_stats *out) {
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}
