/*
 * constrain.c — the grammar pool and the engine constraint of
 * constrain.h. The engine thread is the only caller of mask and accept, so
 * the matchers need no lock; the pool and the grammars' mask caches lock
 * their own.
 */
#include <pthread.h>
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

struct grammar_pool {
    pthread_mutex_t mu;
    struct pool_entry *head;
    int max, n;
    uint64_t clock;
};

struct grammar_pool *grammar_pool_new(int max) {
    struct grammar_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    p->max = max;
    return p;
}

void grammar_pool_free(struct grammar_pool *p) {
    if (!p) return;
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
    struct grammar_matcher **m; /* [n] */
    int n;
    uint64_t masks, ns;
};

static bool c_mask(void *ctx, int choice, uint32_t *allowed) {
    struct constrain *c = ctx;
    if (choice < 0 || choice >= c->n) return false;
    int64_t t0 = clock_ns();
    int64_t n = grammar_matcher_fill_mask(c->m[choice], allowed);
    c->ns += (uint64_t)(clock_ns() - t0);
    c->masks++;
    return n > 0;
}

static void c_accept(void *ctx, int choice, int32_t token) {
    struct constrain *c = ctx;
    if (choice >= 0 && choice < c->n) grammar_matcher_accept_token(c->m[choice], token);
}

struct constrain *constrain_new(struct grammar_pool *p, int kind, const char *text, const struct grammar_vocab *v,
                                int n, struct kvik_err *err) {
    struct pool_entry *e = pool_get(p, kind, text, err);
    if (!e) return NULL;
    struct constrain *c = calloc(1, sizeof *c);
    if (!c || !(c->m = calloc((size_t)n, sizeof *c->m))) {
        free(c);
        pool_put(p, e);
        err_set(err, KVIK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->pool = p;
    c->entry = e;
    c->n = n;
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
    for (int i = 0; c->m && i < c->n; i++) grammar_matcher_free(c->m[i]);
    free(c->m);
    if (c->entry) pool_put(c->pool, c->entry);
    free(c);
}

const struct engine_constraint *constrain_engine(struct constrain *c) { return &c->ec; }

void constrain_stats(const struct constrain *c, uint64_t *masks, uint64_t *ns) {
    *masks = c->masks;
    *ns = c->ns;
}
