/*
 * constrain.c — the grammar pool and the engine constraint of
 * constrain.h. The engine thread calls mask and accept; after accept the
 * pool's worker computes the choice's next mask while the engine runs
 * the forward pass, and mask takes it (waits for it when it is under
 * way, computes it itself when the worker has not started it). A matcher
 * is so used by one thread at a time; the grammar locks what its
 * matchers share.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "server/constrain.h"

struct pool_entry {
    int kind;
    char *text;
    struct grammar *g;
    int refs;
    uint64_t used; /* when last taken */
    struct pool_entry *next;
};

/* A choice's next mask, computed ahead. */
enum { AHEAD_IDLE, AHEAD_QUEUED, AHEAD_RUNNING, AHEAD_DONE };

struct ahead {
    struct constrain *c;
    int choice;
    int state;
    int64_t allowed;
    uint32_t *mask;
    struct ahead *next; /* in the pool's queue */
};

struct grammar_pool {
    pthread_mutex_t mu;
    struct pool_entry *head;
    int max, n;
    uint64_t clock;
    /* the worker and its queue (under amu) */
    pthread_mutex_t amu;
    pthread_cond_t acv;
    struct ahead *qhead, *qtail;
    pthread_t worker;
    bool has_worker, stop;
    _Atomic uint64_t masks, masks_ahead, mask_ns; /* what the engine asked for, and its time on them */
};

static void *ahead_worker(void *arg);

struct grammar_pool *grammar_pool_new(int max) {
    struct grammar_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->amu, NULL);
    pthread_cond_init(&p->acv, NULL);
    p->max = max;
    const char *env = getenv("KVIK_GRAMMAR_AHEAD");
    if (!(env && !strcmp(env, "0"))) p->has_worker = pthread_create(&p->worker, NULL, ahead_worker, p) == 0;
    return p;
}

void grammar_pool_free(struct grammar_pool *p) {
    if (!p) return;
    if (p->has_worker) {
        pthread_mutex_lock(&p->amu);
        p->stop = true;
        pthread_cond_broadcast(&p->acv);
        pthread_mutex_unlock(&p->amu);
        pthread_join(p->worker, NULL);
    }
    pthread_cond_destroy(&p->acv);
    pthread_mutex_destroy(&p->amu);
    for (struct pool_entry *e = p->head, *n; e; e = n) {
        n = e->next;
        grammar_free(e->g);
        free(e->text);
        free(e);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* The entry of (kind, text) with a reference taken; NULL with err set. */
static struct pool_entry *pool_get(struct grammar_pool *p, int kind, const char *text, struct kvik_err *err) {
    pthread_mutex_lock(&p->mu);
    for (struct pool_entry *e = p->head; e; e = e->next)
        if (e->kind == kind && !strcmp(e->text, text)) {
            e->refs++;
            e->used = ++p->clock;
            pthread_mutex_unlock(&p->mu);
            return e;
        }
    pthread_mutex_unlock(&p->mu);
    /* compiled outside the lock: two requests may both compile it; one entry is kept */
    struct grammar *g = NULL;
    kvik_status st;
    if (kind == GRAMMAR_TEXT_TOOLS) {
        const char *nl = strchr(text, '\n');
        char head[320];
        size_t hl = nl ? (size_t)(nl - text) : 0;
        if (!nl || hl >= sizeof head) return err_set(err, KVIK_ERR_INVALID_ARG, "tools: bad pool text"), NULL;
        memcpy(head, text, hl);
        head[hl] = 0;
        char *name = strchr(head, ' ');
        if (name) *name++ = 0;
        bool llama3 = !strcmp(head, "llama3");
        st = grammar_from_tool_calls(nl + 1, strlen(nl + 1), name && strcmp(name, "*") ? name : NULL, llama3, &g, NULL,
                                     err);
    } else {
        st = kind == GRAMMAR_TEXT_GBNF ? grammar_from_gbnf(text, strlen(text), &g, err)
                                       : grammar_from_json_schema(text, strlen(text), &g, NULL, err);
    }
    if (st) return NULL;
    struct pool_entry *e = calloc(1, sizeof *e);
    if (!e || !(e->text = strdup(text))) {
        free(e);
        grammar_free(g);
        err_set(err, KVIK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    e->kind = kind;
    e->g = g;
    e->refs = 1;
    pthread_mutex_lock(&p->mu);
    e->used = ++p->clock;
    e->next = p->head;
    p->head = e;
    p->n++;
    /* over the limit: the least recently used entries nobody holds go */
    while (p->n > p->max) {
        struct pool_entry **victim = NULL;
        for (struct pool_entry **q = &p->head; *q; q = &(*q)->next)
            if (!(*q)->refs && (!victim || (*q)->used < (*victim)->used)) victim = q;
        if (!victim) break;
        struct pool_entry *v = *victim;
        *victim = v->next;
        grammar_free(v->g);
        free(v->text);
        free(v);
        p->n--;
    }
    pthread_mutex_unlock(&p->mu);
    return e;
}

static void pool_put(struct grammar_pool *p, struct pool_entry *e) {
    pthread_mutex_lock(&p->mu);
    e->refs--;
    pthread_mutex_unlock(&p->mu);
}

struct constrain {
    struct engine_constraint ec;
    struct grammar_pool *pool;
    struct pool_entry *entry;
    const struct grammar_vocab *v;
    struct grammar_matcher **m; /* [n] */
    struct ahead *ahead;        /* [n] */
    int n;
};

static void *ahead_worker(void *arg) {
    struct grammar_pool *p = arg;
    pthread_mutex_lock(&p->amu);
    for (;;) {
        while (!p->qhead && !p->stop) pthread_cond_wait(&p->acv, &p->amu);
        if (p->stop) break;
        struct ahead *a = p->qhead;
        p->qhead = a->next;
        if (!p->qhead) p->qtail = NULL;
        a->next = NULL;
        a->state = AHEAD_RUNNING;
        pthread_mutex_unlock(&p->amu);
        int64_t n = grammar_matcher_fill_mask(a->c->m[a->choice], a->mask);
        pthread_mutex_lock(&p->amu);
        a->allowed = n;
        a->state = AHEAD_DONE;
        pthread_cond_broadcast(&p->acv);
    }
    pthread_mutex_unlock(&p->amu);
    return NULL;
}

/* Takes a out of the queue (under amu; a is queued). */
static void ahead_unqueue(struct grammar_pool *p, struct ahead *a) {
    struct ahead **q = &p->qhead, *prev = NULL;
    while (*q != a) prev = *q, q = &(*q)->next;
    *q = a->next;
    if (p->qtail == a) p->qtail = prev;
    a->next = NULL;
    a->state = AHEAD_IDLE;
}

/* Under amu: no job of a is queued (dropped) or under way (waited for).
 * True when a finished mask waits in a->mask. */
static bool ahead_settle(struct grammar_pool *p, struct ahead *a) {
    if (a->state == AHEAD_QUEUED) ahead_unqueue(p, a);
    while (a->state == AHEAD_RUNNING) pthread_cond_wait(&p->acv, &p->amu);
    return a->state == AHEAD_DONE;
}

static bool c_mask(void *ctx, int choice, uint32_t *allowed) {
    struct constrain *c = ctx;
    if (choice < 0 || choice >= c->n) return false;
    int64_t t0 = clock_ns(), n = -1;
    struct grammar_pool *p = c->pool;
    struct ahead *a = &c->ahead[choice];
    if (a->mask) {
        pthread_mutex_lock(&p->amu);
        if (ahead_settle(p, a)) { /* one not started is computed here instead */
            memcpy(allowed, a->mask, ((size_t)grammar_vocab_size(c->v) + 31) / 32 * sizeof *allowed);
            n = a->allowed;
        }
        a->state = AHEAD_IDLE;
        pthread_mutex_unlock(&p->amu);
    }
    if (n >= 0) atomic_fetch_add(&p->masks_ahead, 1);
    else n = grammar_matcher_fill_mask(c->m[choice], allowed);
    atomic_fetch_add(&p->mask_ns, (uint64_t)(clock_ns() - t0));
    atomic_fetch_add(&p->masks, 1);
    return n > 0;
}

static void c_accept(void *ctx, int choice, int32_t token) {
    struct constrain *c = ctx;
    if (choice < 0 || choice >= c->n) return;
    struct grammar_pool *p = c->pool;
    struct ahead *a = &c->ahead[choice];
    if (a->mask) { /* a mask of the state before this token is stale: the worker must be off the matcher */
        pthread_mutex_lock(&p->amu);
        ahead_settle(p, a);
        a->state = AHEAD_IDLE;
        pthread_mutex_unlock(&p->amu);
    }
    if (!grammar_matcher_accept_token(c->m[choice], token) || !a->mask || grammar_matcher_must_end(c->m[choice]))
        return;
    pthread_mutex_lock(&p->amu);
    a->state = AHEAD_QUEUED;
    if (p->qtail) p->qtail->next = a;
    else p->qhead = a;
    p->qtail = a;
    pthread_cond_signal(&p->acv);
    pthread_mutex_unlock(&p->amu);
}

struct constrain *constrain_new(struct grammar_pool *p, int kind, const char *text, const struct grammar_vocab *v,
                                int n, struct kvik_err *err) {
    struct pool_entry *e = pool_get(p, kind, text, err);
    if (!e) return NULL;
    struct constrain *c = calloc(1, sizeof *c);
    if (!c || !(c->m = calloc((size_t)n, sizeof *c->m)) || !(c->ahead = calloc((size_t)n, sizeof *c->ahead))) {
        if (c) free(c->m);
        free(c);
        pool_put(p, e);
        err_set(err, KVIK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->pool = p;
    c->entry = e;
    c->v = v;
    c->n = n;
    /* without a worker (or the memory for its masks) every mask is computed when asked */
    for (int i = 0; p->has_worker && i < n; i++) {
        c->ahead[i] = (struct ahead){.c = c, .choice = i};
        c->ahead[i].mask = malloc(((size_t)grammar_vocab_size(v) + 31) / 32 * sizeof *c->ahead[i].mask);
    }
    for (int i = 0; i < n; i++)
        if (!(c->m[i] = grammar_matcher_new(e->g, v, err))) {
            constrain_free(c);
            return NULL;
        }
    c->ec = (struct engine_constraint){c_mask, c_accept, c};
    return c;
}

void constrain_free(struct constrain *c) {
    if (!c) return;
    struct grammar_pool *p = c->pool;
    if (c->ahead) { /* no mask of ours queued or under way */
        pthread_mutex_lock(&p->amu);
        for (int i = 0; i < c->n; i++) ahead_settle(p, &c->ahead[i]);
        pthread_mutex_unlock(&p->amu);
        for (int i = 0; i < c->n; i++) free(c->ahead[i].mask);
        free(c->ahead);
    }
    for (int i = 0; c->m && i < c->n; i++) grammar_matcher_free(c->m[i]);
    free(c->m);
    if (c->entry) pool_put(c->pool, c->entry);
    free(c);
}

const struct engine_constraint *constrain_engine(struct constrain *c) { return &c->ec; }

void grammar_pool_stats(struct grammar_pool *p, uint64_t *masks, uint64_t *ahead, uint64_t *ns) {
    *masks = atomic_load(&p->masks);
    *ahead = atomic_load(&p->masks_ahead);
    *ns = atomic_load(&p->mask_ns);
}
