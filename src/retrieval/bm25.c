/*
 * bm25.c — the BM25 index of bm25.h: a term dictionary (hash of the word
 * -> term), a postings list per term (text, count), and per text its
 * terms and counts, so a delete lowers the document frequencies at once
 * and a rebuild can drop the deleted texts' postings. Texts are numbered
 * in the order they were added; a deleted or replaced one keeps its
 * number (its postings are skipped) until more than half are dead, when
 * the postings are rebuilt from the live texts.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "retrieval/bm25.h"

struct posting {
    uint32_t doc;
    uint32_t tf;
};

struct term {
    char *word;
    uint32_t len;
    uint32_t df;               /* live texts holding it */
    struct posting *post;      /* [n_post] in text order, dead texts' included */
    uint32_t n_post, cap_post;
};

struct doc {
    uint64_t id;
    uint32_t len;              /* words */
    bool dead;
    struct posting *terms;     /* [n_terms]: (term, count) */
    uint32_t n_terms;
};

struct bm25 {
    double k1, b;
    pthread_rwlock_t lock;
    struct term *terms;
    uint32_t n_terms, cap_terms;
    uint32_t *slots;           /* [n_slots] term + 1 (0: empty), probed by the word's hash */
    size_t n_slots;
    struct doc *docs;
    uint32_t n_docs, cap_docs;
    uint32_t live;
    uint64_t live_words;       /* sum of the live texts' lengths */
    struct map64 ids;          /* external id -> live text */
};

/* ---- words -------------------------------------------------------------- */

static bool word_byte(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

int64_t bm25_words(const char *text, size_t len, void (*fn)(const char *word, size_t n, void *ctx), void *ctx) {
    char w[BM25_MAX_WORD];
    int64_t count = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && !word_byte((unsigned char)text[i])) i++;
        if (i >= len) break;
        size_t n = 0;
        for (; i < len && word_byte((unsigned char)text[i]); i++)
            if (n < sizeof w) {
                char c = text[i];
                w[n++] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
            }
        if (fn) fn(w, n, ctx);
        count++;
    }
    return count;
}

/* ---- the dictionary ----------------------------------------------------- */

static uint64_t word_hash(const char *w, size_t n) { return hash64(w, n, 0x626d3235); }

/* The term of w, or -1. */
static int64_t term_find(const struct bm25 *ix, const char *w, size_t n) {
    if (!ix->n_slots) return -1;
    for (size_t i = word_hash(w, n) & (ix->n_slots - 1);; i = (i + 1) & (ix->n_slots - 1)) {
        uint32_t t = ix->slots[i];
        if (!t) return -1;
        const struct term *tm = &ix->terms[t - 1];
        if (tm->len == n && !memcmp(tm->word, w, n)) return t - 1;
    }
}

static bool slots_grow(struct bm25 *ix) {
    size_t cap = ix->n_slots ? 2 * ix->n_slots : 1024;
    uint32_t *s = calloc(cap, sizeof *s);
    if (!s) return false;
    for (uint32_t t = 0; t < ix->n_terms; t++) {
        size_t i = word_hash(ix->terms[t].word, ix->terms[t].len) & (cap - 1);
        while (s[i]) i = (i + 1) & (cap - 1);
        s[i] = t + 1;
    }
    free(ix->slots);
    ix->slots = s;
    ix->n_slots = cap;
    return true;
}

/* The term of w, added when new; -1 when out of memory. */
static int64_t term_get(struct bm25 *ix, const char *w, size_t n) {
    int64_t t = term_find(ix, w, n);
    if (t >= 0) return t;
    if ((size_t)(ix->n_terms + 1) * 2 > ix->n_slots && !slots_grow(ix)) return -1;
    if (ix->n_terms == ix->cap_terms) {
        uint32_t cap = ix->cap_terms ? 2 * ix->cap_terms : 1024;
        struct term *a = realloc(ix->terms, (size_t)cap * sizeof *a);
        if (!a) return -1;
        ix->terms = a;
        ix->cap_terms = cap;
    }
    char *copy = malloc(n ? n : 1);
    if (!copy) return -1;
    memcpy(copy, w, n);
    t = ix->n_terms++;
    ix->terms[t] = (struct term){.word = copy, .len = (uint32_t)n};
    size_t i = word_hash(w, n) & (ix->n_slots - 1);
    while (ix->slots[i]) i = (i + 1) & (ix->n_slots - 1);
    ix->slots[i] = (uint32_t)t + 1;
    return t;
}

static bool post_add(struct term *t, uint32_t doc, uint32_t tf) {
    if (t->n_post == t->cap_post) {
        uint32_t cap = t->cap_post ? 2 * t->cap_post : 4;
        struct posting *p = realloc(t->post, (size_t)cap * sizeof *p);
        if (!p) return false;
        t->post = p;
        t->cap_post = cap;
    }
    t->post[t->n_post++] = (struct posting){doc, tf};
    return true;
}

/* ---- the index ---------------------------------------------------------- */

struct bm25 *bm25_new(double k1, double b) {
    struct bm25 *ix = calloc(1, sizeof *ix);
    if (!ix) return NULL;
    ix->k1 = k1;
    ix->b = b;
    pthread_rwlock_init(&ix->lock, NULL);
    return ix;
}

void bm25_free(struct bm25 *ix) {
    if (!ix) return;
    for (uint32_t t = 0; t < ix->n_terms; t++) {
        free(ix->terms[t].word);
        free(ix->terms[t].post);
    }
    for (uint32_t d = 0; d < ix->n_docs; d++) free(ix->docs[d].terms);
    free(ix->terms);
    free(ix->slots);
    free(ix->docs);
    map64_free(&ix->ids);
    pthread_rwlock_destroy(&ix->lock);
    free(ix);
}

/* One text's words as (term, count) pairs, gathered by bm25_words. */
struct gather {
    struct bm25 *ix;
    struct posting *t;   /* [n] */
    uint32_t n, cap;
    struct map64 seen;   /* term -> index in t */
    bool fail;
};

static void gather_word(const char *w, size_t n, void *ctx) {
    struct gather *g = ctx;
    if (g->fail) return;
    int64_t t = term_get(g->ix, w, n);
    if (t < 0) {
        g->fail = true;
        return;
    }
    int64_t at = map64_get(&g->seen, (uint64_t)t);
    if (at >= 0) {
        g->t[at].tf++;
        return;
    }
    if (g->n == g->cap) {
        uint32_t cap = g->cap ? 2 * g->cap : 32;
        struct posting *p = realloc(g->t, (size_t)cap * sizeof *p);
        if (!p) {
            g->fail = true;
            return;
        }
        g->t = p;
        g->cap = cap;
    }
    if (!map64_put(&g->seen, (uint64_t)t, g->n)) {
        g->fail = true;
        return;
    }
    g->t[g->n++] = (struct posting){(uint32_t)t, 1};
}

static void kill_doc(struct bm25 *ix, uint32_t d) {
    struct doc *dc = &ix->docs[d];
    for (uint32_t k = 0; k < dc->n_terms; k++) ix->terms[dc->terms[k].doc].df--;
    dc->dead = true;
    ix->live--;
    ix->live_words -= dc->len;
}

/* The postings rebuilt from the live texts, renumbered in order. The
 * postings only shrink (their arrays are reused), so only the new id map
 * can fail to allocate, and it is made first: on failure nothing changed. */
static bool rebuild(struct bm25 *ix) {
    struct map64 ids = {0};
    uint32_t n = 0;
    for (uint32_t d = 0; d < ix->n_docs; d++)
        if (!ix->docs[d].dead && !map64_put(&ids, ix->docs[d].id, n++)) {
            map64_free(&ids);
            return false;
        }
    n = 0;
    for (uint32_t d = 0; d < ix->n_docs; d++) {
        if (ix->docs[d].dead) {
            free(ix->docs[d].terms);
            continue;
        }
        ix->docs[n++] = ix->docs[d];
    }
    ix->n_docs = n;
    map64_free(&ix->ids);
    ix->ids = ids;
    for (uint32_t t = 0; t < ix->n_terms; t++) ix->terms[t].n_post = 0;
    for (uint32_t d = 0; d < n; d++) {
        const struct doc *dc = &ix->docs[d];
        for (uint32_t k = 0; k < dc->n_terms; k++) (void)post_add(&ix->terms[dc->terms[k].doc], d, dc->terms[k].tf);
    }
    return true;
}

/* Rebuilds once more than half of many texts are dead (when memory allows). */
static void maybe_rebuild(struct bm25 *ix) {
    uint32_t dead = ix->n_docs - ix->live;
    if (ix->n_docs >= 1024 && dead > ix->live) (void)rebuild(ix);
}

kvik_status bm25_add(struct bm25 *ix, uint64_t id, const char *text, size_t len) {
    pthread_rwlock_wrlock(&ix->lock);
    struct gather g = {.ix = ix};
    int64_t words = bm25_words(text, len, gather_word, &g);
    map64_free(&g.seen);
    uint32_t d = ix->n_docs, k = 0;
    bool ok = !g.fail && words <= UINT32_MAX && d < UINT32_MAX;
    if (ok && d == ix->cap_docs) {
        uint32_t cap = ix->cap_docs ? 2 * ix->cap_docs : 1024;
        struct doc *a = realloc(ix->docs, (size_t)cap * sizeof *a);
        if ((ok = a != NULL)) {
            ix->docs = a;
            ix->cap_docs = cap;
        }
    }
    while (ok && k < g.n) {
        if (post_add(&ix->terms[g.t[k].doc], d, g.t[k].tf)) k++;
        else ok = false;
    }
    int64_t old = map64_get(&ix->ids, id);
    if (ok) ok = map64_put(&ix->ids, id, d);
    if (!ok) { /* take back the k postings added */
        for (uint32_t j = 0; j < k; j++) ix->terms[g.t[j].doc].n_post--;
        free(g.t);
        pthread_rwlock_unlock(&ix->lock);
        return KVIK_ERR_NOMEM;
    }
    ix->docs[d] = (struct doc){.id = id, .len = (uint32_t)words, .terms = g.t, .n_terms = g.n};
    ix->n_docs++;
    for (uint32_t j = 0; j < g.n; j++) ix->terms[g.t[j].doc].df++;
    ix->live++;
    ix->live_words += (uint64_t)words;
    if (old >= 0) kill_doc(ix, (uint32_t)old);
    maybe_rebuild(ix);
    pthread_rwlock_unlock(&ix->lock);
    return KVIK_OK;
}

kvik_status bm25_delete(struct bm25 *ix, uint64_t id) {
    pthread_rwlock_wrlock(&ix->lock);
    int64_t d = map64_get(&ix->ids, id);
    if (d >= 0) {
        map64_del(&ix->ids, id);
        kill_doc(ix, (uint32_t)d);
        maybe_rebuild(ix);
    }
    pthread_rwlock_unlock(&ix->lock);
    return d >= 0 ? KVIK_OK : KVIK_ERR_NOT_FOUND;
}

int64_t bm25_count(struct bm25 *ix) {
    pthread_rwlock_rdlock(&ix->lock);
    int64_t n = ix->live;
    pthread_rwlock_unlock(&ix->lock);
    return n;
}

/* ---- search ------------------------------------------------------------- */

static bool hit_better(struct bm25_hit x, struct bm25_hit y) {
    return x.score > y.score || (x.score == y.score && x.id < y.id);
}

/* Keeps the best k of what is offered in a heap whose root is the worst. */
struct topk {
    struct bm25_hit *h;
    int n, k;
};

static void topk_offer(struct topk *t, struct bm25_hit x) {
    int i;
    if (t->n < t->k) {
        i = t->n++;
        while (i > 0 && hit_better(t->h[(i - 1) / 2], x)) {
            t->h[i] = t->h[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        t->h[i] = x;
        return;
    }
    if (!hit_better(x, t->h[0])) return;
    i = 0;
    for (;;) { /* x replaces the root and sinks */
        int c = 2 * i + 1;
        if (c >= t->n) break;
        if (c + 1 < t->n && hit_better(t->h[c], t->h[c + 1])) c++;
        if (!hit_better(x, t->h[c])) break;
        t->h[i] = t->h[c];
        i = c;
    }
    t->h[i] = x;
}

static int cmp_hit(const void *a, const void *b) {
    struct bm25_hit x = *(const struct bm25_hit *)a, y = *(const struct bm25_hit *)b;
    return hit_better(x, y) ? -1 : hit_better(y, x) ? 1 : 0;
}

struct qterms {
    const struct bm25 *ix;
    int64_t *t;
    int n, cap;
    bool fail;
};

static void query_word(const char *w, size_t n, void *ctx) {
    struct qterms *q = ctx;
    int64_t t = term_find(q->ix, w, n);
    if (t < 0 || q->fail) return;
    for (int i = 0; i < q->n; i++)
        if (q->t[i] == t) return;
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 16;
        int64_t *a = realloc(q->t, (size_t)cap * sizeof *a);
        if (!a) {
            q->fail = true;
            return;
        }
        q->t = a;
        q->cap = cap;
    }
    q->t[q->n++] = t;
}

int bm25_search(struct bm25 *ix, const char *query, size_t len, int k, bm25_accept_fn accept, void *ctx,
                struct bm25_hit *out) {
    if (k < 1) return 0;
    pthread_rwlock_rdlock(&ix->lock);
    struct qterms q = {.ix = ix};
    bm25_words(query, len, query_word, &q);
    float *acc = q.n && !q.fail ? calloc(ix->n_docs ? ix->n_docs : 1, sizeof *acc) : NULL;
    int n = 0;
    if (acc) {
        double N = ix->live, avgdl = ix->live ? (double)ix->live_words / ix->live : 1.0;
        for (int i = 0; i < q.n; i++) {
            const struct term *t = &ix->terms[q.t[i]];
            double idf = log(1.0 + (N - t->df + 0.5) / (t->df + 0.5));
            for (uint32_t p = 0; p < t->n_post; p++) {
                const struct doc *d = &ix->docs[t->post[p].doc];
                if (d->dead) continue;
                double tf = t->post[p].tf;
                acc[t->post[p].doc] += (float)(idf * tf * (ix->k1 + 1) /
                                               (tf + ix->k1 * (1 - ix->b + ix->b * d->len / avgdl)));
            }
        }
        struct topk top = {out, 0, k};
        for (uint32_t d = 0; d < ix->n_docs; d++)
            if (acc[d] > 0 && (!accept || accept(ix->docs[d].id, ctx)))
                topk_offer(&top, (struct bm25_hit){ix->docs[d].id, acc[d]});
        n = top.n;
        qsort(out, (size_t)n, sizeof *out, cmp_hit);
    }
    bool fail = q.fail || (q.n && !acc);
    free(acc);
    free(q.t);
    pthread_rwlock_unlock(&ix->lock);
    return fail ? KVIK_ERR_NOMEM : n;
}

/* ---- fusion ------------------------------------------------------------- */

static int cmp_id(const void *a, const void *b) {
    uint64_t x = ((const struct bm25_hit *)a)->id, y = ((const struct bm25_hit *)b)->id;
    return (x > y) - (x < y);
}

int rrf_fuse(const uint64_t *const *ids, const int *n, int n_lists, double k, int top, struct bm25_hit *out) {
    size_t total = 0;
    for (int l = 0; l < n_lists; l++) total += (size_t)(n[l] > 0 ? n[l] : 0);
    if (!total || top < 1) return 0;
    struct bm25_hit *all = malloc(total * sizeof *all);
    if (!all) return KVIK_ERR_NOMEM;
    size_t m = 0;
    for (int l = 0; l < n_lists; l++)
        for (int r = 0; r < n[l]; r++) all[m++] = (struct bm25_hit){ids[l][r], (float)(1.0 / (k + r + 1))};
    qsort(all, m, sizeof *all, cmp_id);
    size_t u = 0; /* one entry per id, the contributions summed in double */
    for (size_t i = 0; i < m;) {
        double sum = 0;
        size_t j = i;
        for (; j < m && all[j].id == all[i].id; j++) sum += all[j].score;
        all[u++] = (struct bm25_hit){all[i].id, (float)sum};
        i = j;
    }
    qsort(all, u, sizeof *all, cmp_hit);
    int got = (int)(u < (size_t)top ? u : (size_t)top);
    memcpy(out, all, (size_t)got * sizeof *out);
    free(all);
    return got;
}
