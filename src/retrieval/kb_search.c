/*
 * kb_search.c — ranking a store's chunks for a query (kb.h: kb_search):
 * the dense list from the HNSW graph, the BM25 list with the same filter,
 * their reciprocal rank fusion, the cosine of every candidate, and the
 * caller's reranker over copies of the candidates, run outside the lock.
 */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "retrieval/kb_int.h"

#define RRF_K 60.0

static kvik_status nomem(struct kvik_err *err) { return err_set(err, KVIK_ERR_NOMEM, "knowledge base: out of memory"); }

void kb_results_free(struct kb_result *r, int n) {
    for (int i = 0; r && i < n; i++) {
        free(r[i].text);
        kb_attrs_free(&r[i].attrs);
    }
    free(r);
}

/* The store file and chunk index of chunk key (NULL: none). */
static const struct kb_sf *chunk_of(const struct kb_st *st, uint64_t key, int64_t *index) {
    int64_t v = map64_get(&st->chunk, key);
    if (v < 0) return NULL;
    *index = v & (((int64_t)1 << KB_SLOT_SHIFT) - 1);
    return st->sf[v >> KB_SLOT_SHIFT];
}

/* Fills r with a copy of chunk key; false when out of memory. */
static bool fill(const struct kb_st *st, uint64_t key, struct kb_result *r) {
    int64_t i;
    const struct kb_sf *f = chunk_of(st, key, &i);
    if (!f) return false;
    const struct kb_doc *d = &f->docs[i];
    memcpy(r->file_id, f->file_id, sizeof r->file_id);
    memcpy(r->filename, f->filename, sizeof r->filename);
    r->chunk = key;
    r->len = d->len;
    if (!(r->text = malloc(d->len + 1))) return false;
    memcpy(r->text, d->text, d->len + 1);
    return kb_attrs_copy(&r->attrs, f->attrs.a, f->attrs.n);
}

struct accept_ctx {
    const struct kb_st *st;
    const struct vec_filter *filter;
};

static bool accept_chunk(uint64_t key, void *ctx) {
    const struct accept_ctx *a = ctx;
    int64_t i;
    const struct kb_sf *f = chunk_of(a->st, key, &i);
    return f && (!a->filter || vec_filter_match(a->filter, f->attrs.a, f->attrs.n));
}

static int cmp_score(const void *a, const void *b) {
    const struct kb_result *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->chunk > y->chunk) - (x->chunk < y->chunk);
}

/* q normalised in place; false for a zero or non-finite vector. */
static bool normalise(float *q, int dim) {
    double ss = 0;
    for (int i = 0; i < dim; i++) {
        if (!isfinite(q[i])) return false;
        ss += (double)q[i] * q[i];
    }
    if (ss <= 0) return false;
    float inv = (float)(1.0 / sqrt(ss));
    for (int i = 0; i < dim; i++) q[i] *= inv;
    return true;
}

/* With the read lock held: the ranked candidates of q in st into *out
 * (copies), at most want of them, scored by the ranker (not yet cut at the
 * threshold unless cut says so). */
static int rank_locked(const struct kb *kb, const struct kb_st *st, const struct kb_query *q, const float *qv,
                       int want, bool cut, struct kb_result **out, struct kvik_err *err) {
    int cand = 4 * q->k > 50 ? 4 * q->k : 50;
    if (cand < want) cand = want;
    struct vec_hit *dense = NULL;
    struct bm25_hit *sparse = NULL, *fused = NULL;
    uint64_t *ids[2] = {NULL, NULL};
    struct kb_result *res = NULL;
    int nd = 0, ns = 0, n = 0;
    kvik_status s = KVIK_OK;
    if (q->ranker != KB_BM25) {
        if (!(dense = malloc((size_t)cand * sizeof *dense))) goto oom;
        struct vec_search p = {.k = cand, .filter = q->filter, .threshold = -INFINITY};
        if (q->ranker == KB_DENSE && cut) p.threshold = q->threshold;
        nd = vec_search(st->vec, qv, &p, dense, err);
        if (nd < 0) {
            s = (kvik_status)nd;
            goto done;
        }
    }
    if (q->ranker != KB_DENSE) {
        if (!(sparse = malloc((size_t)cand * sizeof *sparse))) goto oom;
        struct accept_ctx a = {st, q->filter};
        ns = bm25_search(st->bm, q->text, q->len, cand, accept_chunk, &a, sparse);
        if (ns < 0) goto oom;
    }
    int total = q->ranker == KB_DENSE ? nd : q->ranker == KB_BM25 ? ns : nd + ns;
    if (!(res = calloc((size_t)(total ? total : 1), sizeof *res))) goto oom;
    if (q->ranker == KB_DENSE) {
        for (int i = 0; i < nd; i++) res[i] = (struct kb_result){.chunk = dense[i].id, .score = dense[i].score};
        n = nd;
    } else if (q->ranker == KB_BM25) {
        for (int i = 0; i < ns; i++) res[i] = (struct kb_result){.chunk = sparse[i].id, .score = sparse[i].score};
        n = ns;
    } else {
        ids[0] = malloc((size_t)(nd ? nd : 1) * sizeof *ids[0]);
        ids[1] = malloc((size_t)(ns ? ns : 1) * sizeof *ids[1]);
        fused = malloc((size_t)(total ? total : 1) * sizeof *fused);
        if (!ids[0] || !ids[1] || !fused) goto oom;
        for (int i = 0; i < nd; i++) ids[0][i] = dense[i].id;
        for (int i = 0; i < ns; i++) ids[1][i] = sparse[i].id;
        int lens[2] = {nd, ns};
        n = rrf_fuse((const uint64_t *const *)ids, lens, 2, RRF_K, total, fused);
        if (n < 0) goto oom;
        for (int i = 0; i < n; i++) res[i] = (struct kb_result){.chunk = fused[i].id, .score = fused[i].score};
    }
    /* every candidate's cosine (the stored rows are normalised, so is qv) */
    float *row = malloc((size_t)kb->cfg.dim * sizeof *row);
    if (!row) goto oom;
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (vec_get(st->vec, res[i].chunk, row) != KVIK_OK) continue;
        res[i].cosine = vec_dot_f32(qv, row, kb->cfg.dim);
        if (q->ranker == KB_HYBRID) res[i].score = res[i].cosine;
        float sc = res[i].score;
        if (cut && sc < q->threshold) continue;
        res[kept++] = res[i];
        if (kept == want) break;
    }
    free(row);
    n = kept;
    for (int i = 0; i < n; i++)
        if (!fill(st, res[i].chunk, &res[i])) {
            kb_results_free(res, n);
            res = NULL;
            n = 0;
            goto oom;
        }
    goto done;
oom:
    s = nomem(err);
done:
    free(dense);
    free(sparse);
    free(fused);
    free(ids[0]);
    free(ids[1]);
    if (s) {
        free(res);
        return s;
    }
    *out = res;
    return n;
}

int kb_search(struct kb *kb, const struct kb_tenant *t, const char *store_id, const struct kb_query *q,
              struct kb_result **out, struct kvik_err *err) {
    *out = NULL;
    if (q->k < 1 || q->k > 1000 || q->ranker < KB_DENSE || q->ranker > KB_HYBRID || isnan(q->threshold))
        return err_set(err, KVIK_ERR_INVALID_ARG, "search: k must be 1 to 1000 and the ranker one of three");
    if (q->rerank && !kb->cfg.rerank)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "search: no reranker is loaded (serve a chat model or a reranker)");
    int dim = kb->cfg.dim;
    float *qv = malloc((size_t)dim * sizeof *qv);
    if (!qv) return nomem(err);
    const char *texts[1] = {q->text};
    size_t lens[1] = {q->len};
    kvik_status s = kb->cfg.embed(kb->cfg.embed_ctx, 1, texts, lens, qv, err);
    if (!s && !normalise(qv, dim)) s = err_set(err, KVIK_ERR_INVALID_ARG, "search: the query's embedding is zero");
    if (s) {
        free(qv);
        return s;
    }
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, store_id);
    int64_t now = (int64_t)time(NULL);
    int n;
    if (!st) {
        n = err_set(err, KVIK_ERR_NOT_FOUND, "No vector store found with id '%.64s'.", store_id);
    } else if (kb_store_expired(st, now)) {
        n = err_set(err, KVIK_ERR_INVALID_ARG, "The vector store '%s' has expired.", store_id);
    } else {
        atomic_store(&st->last_active_at, now);
        int want = q->rerank ? (q->candidates > 0 ? q->candidates : (2 * q->k > 20 ? 2 * q->k : 20)) : q->k;
        n = rank_locked(kb, st, q, qv, want, !q->rerank, out, err);
    }
    pthread_rwlock_unlock(&kb->lock);
    free(qv);
    if (n <= 0 || !q->rerank) return n;
    /* rerank the copies, without the lock */
    struct kb_result *r = *out;
    const char **docs = malloc((size_t)n * sizeof *docs);
    size_t *dl = malloc((size_t)n * sizeof *dl);
    float *sc = malloc((size_t)n * sizeof *sc);
    s = docs && dl && sc ? KVIK_OK : nomem(err);
    for (int i = 0; !s && i < n; i++) docs[i] = r[i].text, dl[i] = r[i].len;
    if (!s) s = kb->cfg.rerank(kb->cfg.rerank_ctx, q->text, q->len, n, docs, dl, sc, err);
    int kept = 0;
    if (!s) {
        for (int i = 0; i < n; i++) r[i].score = sc[i];
        qsort(r, (size_t)n, sizeof *r, cmp_score);
        for (int i = 0; i < n; i++) {
            if (kept < q->k && r[i].score >= q->threshold) r[kept++] = r[i];
            else {
                free(r[i].text);
                kb_attrs_free(&r[i].attrs);
            }
        }
    }
    free(docs);
    free(dl);
    free(sc);
    if (s) {
        kb_results_free(r, n);
        *out = NULL;
        return s;
    }
    return kept;
}

int kb_store_file_chunks(struct kb *kb, const struct kb_tenant *t, const char *store_id, const char *file_id,
                         struct kb_result **out, struct kvik_err *err) {
    *out = NULL;
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, store_id);
    struct kb_sf *f = st ? kb_find_sf(st, file_id, NULL) : NULL;
    int n = 0;
    struct kb_result *r = NULL;
    if (!st) n = err_set(err, KVIK_ERR_NOT_FOUND, "No vector store found with id '%.64s'.", store_id);
    else if (!f) n = err_set(err, KVIK_ERR_NOT_FOUND, "No file in this vector store with id '%.64s'.", file_id);
    else if (f->n_docs > INT32_MAX || !(r = calloc((size_t)(f->n_docs ? f->n_docs : 1), sizeof *r))) n = nomem(err);
    for (int64_t i = 0; r && i < f->n_docs; i++) {
        if (!fill(st, f->first + (uint64_t)i, &r[i])) {
            kb_results_free(r, (int)i + 1);
            r = NULL;
            n = nomem(err);
            break;
        }
        n = (int)i + 1;
    }
    pthread_rwlock_unlock(&kb->lock);
    *out = r;
    return n;
}
