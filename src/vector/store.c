/*
 * store.c — the vector store of vector.h: the rows, the id table, the
 * attributes, and the HNSW graph (Malkov and Yashunin's hierarchical
 * navigable small world: layers drawn with P(level >= l) = M^-l, greedy
 * descent through the upper layers, a beam of ef candidates on the layer
 * below, neighbours chosen by the diversity heuristic, and a node's
 * overfull list pruned by the same heuristic).
 *
 * Scores are dot products; the graph orders by d = -score (smaller is
 * nearer). Internal nodes are numbered in insertion order; a deleted or
 * replaced node keeps its number and links (a tombstone) until compaction.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vector/store_int.h"

struct hitem {
    float d;
    uint32_t id;
};

/* A binary heap of hitems: a min-heap (nearest on top) or a max-heap. */
struct heap {
    struct hitem *a;
    int n, cap;
    bool max;
};

static bool heap_before(const struct heap *h, struct hitem x, struct hitem y) {
    return h->max ? x.d > y.d : x.d < y.d;
}

static bool heap_push(struct heap *h, struct hitem x) {
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        struct hitem *a = realloc(h->a, (size_t)cap * sizeof *a);
        if (!a) return false;
        h->a = a;
        h->cap = cap;
    }
    int i = h->n++;
    while (i > 0 && heap_before(h, x, h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = x;
    return true;
}

static struct hitem heap_pop(struct heap *h) {
    struct hitem top = h->a[0], x = h->a[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && heap_before(h, h->a[c + 1], h->a[c])) c++;
        if (!heap_before(h, h->a[c], x)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = x;
    return top;
}

struct vec_config vec_config_default(int dim) {
    return (struct vec_config){.dim = dim, .storage = VEC_F32, .index = VEC_HNSW, .normalize = true, .M = 16,
                               .ef_construction = 200, .ef_search = 64, .seed = 0x6b76696b};
}

/* ---- rows and scores ---------------------------------------------------- */

static const void *row(const struct vec_store *s, int64_t i) { return s->rows + (size_t)i * s->row_bytes; }

/* A query as the rows are scored against it: the floats, and for int8
 * rows the same vector quantized (scale * (qu - 128)) to bytes. */
struct query {
    const float *f;
    uint8_t *qu; /* [dim] (int8 storage) */
    float qs;
};

/* q's bytes for int8 rows from the floats f (qu: dim bytes). */
static void query_make(const struct vec_store *s, const float *f, uint8_t *qu, struct query *q) {
    *q = (struct query){.f = f, .qu = qu};
    if (s->cfg.storage != VEC_I8) return;
    int d = s->cfg.dim;
    float mx = 0;
    for (int k = 0; k < d; k++) mx = fabsf(f[k]) > mx ? fabsf(f[k]) : mx;
    float inv = mx > 0 ? 127.0f / mx : 0;
    for (int k = 0; k < d; k++) qu[k] = (uint8_t)(lrintf(f[k] * inv) + 128);
    q->qs = mx / 127.0f;
}

static float score(const struct vec_store *s, const struct query *q, int64_t i) {
    int d = s->cfg.dim;
    switch (s->cfg.storage) {
    case VEC_F16: return vec_dot_f16(q->f, row(s, i), d);
    case VEC_I8: return q->qs * s->scales[i] * (float)(vec_dot_u8i8(q->qu, row(s, i), d) - 128 * s->sums[i]);
    default: return vec_dot_f32(q->f, row(s, i), d);
    }
}

/* The F32 score of row i (rescore: against its F32 copy). */
static float score_exact(const struct vec_store *s, const float *f, int64_t i) {
    return vec_dot_f32(f, s->exact + (size_t)i * (size_t)s->cfg.dim, s->cfg.dim);
}

/* Node i's stored vector as floats. */
static void load_row(const struct vec_store *s, int64_t i, float *out) {
    int d = s->cfg.dim;
    if (s->exact) {
        memcpy(out, s->exact + (size_t)i * (size_t)d, (size_t)d * sizeof *out);
    } else if (s->cfg.storage == VEC_F32) {
        memcpy(out, row(s, i), (size_t)d * sizeof *out);
    } else if (s->cfg.storage == VEC_F16) {
        const uint16_t *h = row(s, i);
        for (int k = 0; k < d; k++) out[k] = fp16_to_fp32(h[k]);
    } else {
        const int8_t *q = row(s, i);
        for (int k = 0; k < d; k++) out[k] = s->scales[i] * (float)q[k];
    }
}

static void store_row(struct vec_store *s, int64_t i, const float *v) {
    int d = s->cfg.dim;
    uint8_t *p = s->rows + (size_t)i * s->row_bytes;
    if (s->cfg.storage == VEC_F32) {
        memcpy(p, v, (size_t)d * sizeof *v);
    } else if (s->cfg.storage == VEC_F16) {
        uint16_t *h = (uint16_t *)p;
        for (int k = 0; k < d; k++) h[k] = fp32_to_fp16(v[k]);
    } else {
        float mx = 0;
        for (int k = 0; k < d; k++) mx = fabsf(v[k]) > mx ? fabsf(v[k]) : mx;
        float scale = mx / 127.0f, inv = mx > 0 ? 127.0f / mx : 0;
        int8_t *q = (int8_t *)p;
        for (int k = 0; k < d; k++) q[k] = (int8_t)lrintf(v[k] * inv);
        s->scales[i] = scale;
        s->sums[i] = vec_row_sum(q, d);
    }
    if (s->exact) memcpy(s->exact + (size_t)i * (size_t)d, v, (size_t)d * sizeof *v);
}

/* Node i as a query (int8 rows: its own bytes, exactly); f: dim floats. */
static void query_of_row(const struct vec_store *s, int64_t i, float *f, uint8_t *qu, struct query *q) {
    load_row(s, i, f);
    *q = (struct query){.f = f, .qu = qu};
    if (s->cfg.storage != VEC_I8) return;
    const int8_t *r = row(s, i);
    for (int k = 0; k < s->cfg.dim; k++) qu[k] = (uint8_t)(r[k] + 128);
    q->qs = s->scales[i];
}

/* ---- the graph ---------------------------------------------------------- */

static int max_links(const struct vec_store *s, int layer) { return layer ? s->cfg.M : 2 * s->cfg.M; }


static struct visited *visited_get(struct vec_store *s) {
    pthread_mutex_lock(&s->vmu);
    struct visited *v = s->vfree;
    if (v) s->vfree = v->next;
    pthread_mutex_unlock(&s->vmu);
    if (!v && !(v = calloc(1, sizeof *v))) return NULL;
    if (v->cap < s->n) {
        uint32_t *m = realloc(v->mark, (size_t)s->cap * sizeof *m);
        if (!m) {
            free(v->mark);
            free(v);
            return NULL;
        }
        memset(m + v->cap, 0, (size_t)(s->cap - v->cap) * sizeof *m);
        v->mark = m;
        v->cap = s->cap;
    }
    if (++v->gen == 0) { /* wrapped: start the marks again */
        memset(v->mark, 0, (size_t)v->cap * sizeof *v->mark);
        v->gen = 1;
    }
    return v;
}

static void visited_put(struct vec_store *s, struct visited *v) {
    pthread_mutex_lock(&s->vmu);
    v->next = s->vfree;
    s->vfree = v;
    pthread_mutex_unlock(&s->vmu);
}

/* Whether node i may be a result of a search with filter f (NULL: a
 * graph build, where every node may). */
static bool accept(const struct vec_store *s, int64_t i, const struct vec_filter *f, bool build) {
    if (build) return true;
    if (s->dead[i]) return false;
    return !f || vec_filter_match(f, s->attrs[i].a, s->attrs[i].n);
}

/*
 * The beam search of one layer from the entries in res (which it
 * replaces): up to ef nearest acceptable nodes in res (a max-heap). False
 * when out of memory.
 */
static bool search_layer(struct vec_store *s, const struct query *q, struct heap *res, int ef, int layer,
                         const struct vec_filter *f, bool build, struct visited *vis, struct heap *cand) {
    cand->n = 0;
    struct hitem *entries = res->a;
    int n_entries = res->n;
    /* the entries seed both heaps */
    struct heap seeds = {.max = true};
    for (int i = 0; i < n_entries; i++) {
        if (!heap_push(cand, entries[i])) return false;
        vis->mark[entries[i].id] = vis->gen;
        if (accept(s, entries[i].id, f, build) && !heap_push(&seeds, entries[i])) {
            free(seeds.a);
            return false;
        }
    }
    free(res->a);
    *res = seeds;
    uint32_t todo[1 + 2 * 256];
    while (cand->n) {
        struct hitem c = heap_pop(cand);
        if (res->n >= ef && c.d > res->a[0].d) break;
        const uint32_t *l = vec_links(s, c.id, layer);
        /* the unvisited neighbours first, their rows' first lines fetched
         * while the rest are looked at; each next row in full while the
         * one before is scored */
        int nt = 0;
        for (uint32_t k = 1; k <= l[0]; k++) {
            uint32_t nb = l[k];
            if (vis->mark[nb] == vis->gen) continue;
            vis->mark[nb] = vis->gen;
            todo[nt++] = nb;
            __builtin_prefetch(row(s, nb), 0, 3);
        }
        for (int k = 0; k < nt; k++) {
            uint32_t nb = todo[k];
            if (k + 1 < nt) {
                const char *next = row(s, todo[k + 1]);
                for (size_t off = 64; off < s->row_bytes; off += 64) __builtin_prefetch(next + off, 0, 3);
            }
            float d = -score(s, q, nb);
            if (res->n < ef || d < res->a[0].d) {
                if (!heap_push(cand, (struct hitem){d, nb})) return false;
                if (accept(s, nb, f, build)) {
                    if (!heap_push(res, (struct hitem){d, nb})) return false;
                    if (res->n > ef) heap_pop(res);
                }
            }
        }
    }
    return true;
}

static int cmp_hitem(const void *a, const void *b) {
    const struct hitem *x = a, *y = b;
    return x->d < y->d ? -1 : x->d > y->d ? 1 : (x->id > y->id) - (x->id < y->id);
}

/* The diversity heuristic: of c[0..n) sorted nearest first (d relative to
 * the base), keep a candidate only when it is nearer the base than to any
 * kept one, up to m; the kept ones are written to out. tmp: dim floats. */
static int select_neighbors(const struct vec_store *s, const struct hitem *c, int n, int m, uint32_t *out,
                            float *tmp, uint8_t *qtmp) {
    int kept = 0;
    for (int i = 0; i < n && kept < m; i++) {
        bool good = true;
        struct query q;
        query_of_row(s, c[i].id, tmp, qtmp, &q);
        for (int j = 0; j < kept && good; j++) good = -score(s, &q, out[j]) >= c[i].d;
        if (good) out[kept++] = c[i].id;
    }
    return kept;
}

/* Adds link node -> to at layer; an overfull list is pruned by the
 * heuristic around node. */
static bool add_link(struct vec_store *s, int64_t node, uint32_t to, int layer, float *tmp, float *base,
                     uint8_t *qtmp) {
    uint32_t *l = vec_links(s, node, layer);
    int m = max_links(s, layer);
    for (uint32_t k = 1; k <= l[0]; k++)
        if (l[k] == to) return true;
    if ((int)l[0] < m) {
        l[++l[0]] = to;
        return true;
    }
    struct hitem *c = malloc((size_t)(m + 1) * sizeof *c);
    if (!c) return false;
    struct query bq;
    query_of_row(s, node, base, qtmp + s->cfg.dim, &bq);
    for (int k = 0; k < m; k++) c[k] = (struct hitem){-score(s, &bq, l[k + 1]), l[k + 1]};
    c[m] = (struct hitem){-score(s, &bq, to), to};
    qsort(c, (size_t)m + 1, sizeof *c, cmp_hitem);
    l[0] = (uint32_t)select_neighbors(s, c, m + 1, m, l + 1, tmp, qtmp);
    free(c);
    return true;
}

/* Links node (its vector v, already stored) into the graph. */
static kvik_status graph_insert(struct vec_store *s, int64_t node, const float *v, struct kvik_err *err) {
    int lv = (int)(-log(1.0 - prng_uniform(&s->rng)) * s->ml);
    if (lv > VEC_MAX_LEVEL) lv = VEC_MAX_LEVEL;
    s->level[node] = (int8_t)lv;
    vec_links(s, node, 0)[0] = 0;
    s->upper[node] = NULL;
    if (lv > 0) {
        s->upper[node] = calloc((size_t)lv * (size_t)(1 + s->cfg.M), sizeof(uint32_t));
        if (!s->upper[node]) return err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
    }
    if (s->entry < 0) {
        s->entry = node;
        s->max_level = lv;
        return KVIK_OK;
    }
    struct visited *vis = visited_get(s);
    /* scratch: tmp[0..dim) candidates, [dim..2dim) a neighbour's row
     * (add_link), [2dim..3dim) the node's own; qb the same in bytes */
    float *tmp = malloc(3 * (size_t)s->cfg.dim * sizeof *tmp);
    uint8_t *qb = malloc(3 * (size_t)s->cfg.dim);
    struct heap res = {.max = true}, cand = {0};
    uint32_t *sel = malloc((size_t)(2 * s->cfg.M) * sizeof *sel);
    kvik_status st = KVIK_OK;
    struct query vq;
    if (tmp && qb) query_of_row(s, node, tmp + 2 * (size_t)s->cfg.dim, qb + 2 * (size_t)s->cfg.dim, &vq);
    (void)v;
    if (!vis || !tmp || !qb || !sel || !heap_push(&res, (struct hitem){-score(s, &vq, s->entry), (uint32_t)s->entry})) {
        st = err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
        goto out;
    }
    for (int l = s->max_level; l >= 0; l--) {
        bool ok = search_layer(s, &vq, &res, l > lv ? 1 : s->cfg.ef_construction, l, NULL, true, vis, &cand);
        vis->gen++; /* every layer walks afresh */
        if (vis->gen == 0) {
            memset(vis->mark, 0, (size_t)vis->cap * sizeof *vis->mark);
            vis->gen = 1;
        }
        if (!ok) {
            st = err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
            goto out;
        }
        if (l > lv) continue;
        qsort(res.a, (size_t)res.n, sizeof *res.a, cmp_hitem);
        int n = select_neighbors(s, res.a, res.n, s->cfg.M, sel, tmp, qb);
        uint32_t *own = vec_links(s, node, l);
        own[0] = (uint32_t)n;
        memcpy(own + 1, sel, (size_t)n * sizeof *sel);
        for (int k = 0; k < n; k++)
            if (!add_link(s, sel[k], (uint32_t)node, l, tmp, tmp + s->cfg.dim, qb)) {
                st = err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
                goto out;
            }
        /* res, sorted, seeds the next layer down */
    }
    if (lv > s->max_level) {
        s->max_level = lv;
        s->entry = node;
    }
out:
    if (vis) visited_put(s, vis);
    free(tmp);
    free(qb);
    free(sel);
    free(res.a);
    free(cand.a);
    return st;
}

/* ---- the store ---------------------------------------------------------- */

struct vec_store *vec_store_new(const struct vec_config *cfg, struct kvik_err *err) {
    if (!cfg || cfg->dim < 1 || cfg->dim > 65536 || cfg->storage < VEC_F32 || cfg->storage > VEC_I8 ||
        cfg->index < VEC_FLAT || cfg->index > VEC_HNSW || cfg->M < 2 || cfg->M > 256 || cfg->ef_construction < 1 ||
        cfg->ef_search < 1 || (cfg->rescore && cfg->storage != VEC_I8)) {
        err_set(err, KVIK_ERR_INVALID_ARG, "vector store: bad configuration");
        return NULL;
    }
    struct vec_store *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->row_bytes = (size_t)cfg->dim * (cfg->storage == VEC_F32 ? 4 : cfg->storage == VEC_F16 ? 2 : 1);
    s->entry = -1;
    s->ml = 1.0 / log((double)cfg->M);
    prng_seed(&s->rng, cfg->seed);
    pthread_rwlock_init(&s->lock, NULL);
    pthread_mutex_init(&s->vmu, NULL);
    return s;
}

static void free_attrs(struct node_attrs *a) {
    for (int i = 0; i < a->n; i++) {
        free((char *)a->a[i].key);
        if (a->a[i].v.type == VEC_STR) free((char *)a->a[i].v.str);
    }
    free(a->a);
    a->a = NULL;
    a->n = 0;
}

/* The nodes' arrays and the id table (not the lock or the pool). */
static void free_nodes(struct vec_store *s) {
    for (int64_t i = 0; i < s->n; i++) {
        free_attrs(&s->attrs[i]);
        free(s->upper[i]);
    }
    free(s->rows);
    free(s->scales);
    free(s->sums);
    free(s->exact);
    free(s->ext);
    free(s->dead);
    free(s->attrs);
    free(s->level);
    free(s->links0);
    free(s->upper);
    map64_free(&s->map);
}

void vec_store_free(struct vec_store *s) {
    if (!s) return;
    free_nodes(s);
    for (struct visited *v = s->vfree, *nx; v; v = nx) {
        nx = v->next;
        free(v->mark);
        free(v);
    }
    pthread_rwlock_destroy(&s->lock);
    pthread_mutex_destroy(&s->vmu);
    free(s);
}

bool vec_grow_nodes(struct vec_store *s, int64_t want) {
    if (want <= s->cap) return true;
    int64_t cap = s->cap ? 2 * s->cap : 1024;
    if (cap < want) cap = want;
    size_t c = (size_t)cap;
#define GROW(p, size)                                                            \
    do {                                                                         \
        void *q_ = realloc((p), c * (size));                                     \
        if (!q_) return false;                                                   \
        (p) = q_;                                                                \
    } while (0)
    GROW(s->rows, s->row_bytes);
    GROW(s->scales, sizeof *s->scales);
    GROW(s->sums, sizeof *s->sums);
    if (s->cfg.rescore) GROW(s->exact, (size_t)s->cfg.dim * sizeof *s->exact);
    GROW(s->ext, sizeof *s->ext);
    GROW(s->dead, sizeof *s->dead);
    GROW(s->attrs, sizeof *s->attrs);
    GROW(s->level, sizeof *s->level);
    GROW(s->links0, (size_t)(1 + 2 * s->cfg.M) * sizeof *s->links0);
    GROW(s->upper, sizeof *s->upper);
#undef GROW
    s->cap = cap;
    return true;
}

static bool copy_attrs(struct node_attrs *dst, const struct vec_attr *a, int n) {
    dst->a = NULL;
    dst->n = 0;
    if (n <= 0) return true;
    if (!(dst->a = calloc((size_t)n, sizeof *dst->a))) return false;
    for (int i = 0; i < n; i++) {
        struct vec_attr *d = &dst->a[i];
        d->v = a[i].v;
        d->key = strdup(a[i].key);
        if (a[i].v.type == VEC_STR) {
            char *str = malloc(a[i].v.len + 1);
            if (str) {
                memcpy(str, a[i].v.str, a[i].v.len);
                str[a[i].v.len] = 0;
            }
            d->v.str = str;
        }
        dst->n = i + 1;
        if (!d->key || (a[i].v.type == VEC_STR && !d->v.str)) return false;
    }
    return true;
}

/* q normalised (when the store normalises) into out; false for a zero or
 * non-finite vector. */
static bool prepare(const struct vec_store *s, const float *v, float *out) {
    double ss = 0;
    for (int k = 0; k < s->cfg.dim; k++) {
        if (!isfinite(v[k])) return false;
        ss += (double)v[k] * v[k];
    }
    if (!s->cfg.normalize) {
        memcpy(out, v, (size_t)s->cfg.dim * sizeof *out);
        return true;
    }
    if (!(ss > 0)) return false;
    float inv = (float)(1.0 / sqrt(ss));
    for (int k = 0; k < s->cfg.dim; k++) out[k] = v[k] * inv;
    return true;
}

/* Adds with the write lock held. */
static kvik_status add_locked(struct vec_store *s, uint64_t id, const float *v, const struct vec_attr *attrs,
                              int n_attrs, struct kvik_err *err) {
    if (!vec_grow_nodes(s, s->n + 1)) return err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
    if (s->n >= (int64_t)UINT32_MAX) return err_set(err, KVIK_ERR_UNSUPPORTED, "vector store: full");
    int64_t i = s->n;
    if (!copy_attrs(&s->attrs[i], attrs, n_attrs)) {
        free_attrs(&s->attrs[i]);
        return err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
    }
    store_row(s, i, v);
    s->ext[i] = id;
    s->dead[i] = false;
    s->upper[i] = NULL;
    s->level[i] = 0;
    vec_links(s, i, 0)[0] = 0;
    s->n++;
    if (s->cfg.index == VEC_HNSW) {
        kvik_status st = graph_insert(s, i, v, err);
        if (st) {
            /* the node stays, unreachable and dead */
            s->dead[i] = true;
            return st;
        }
    }
    int64_t old = map64_get(&s->map, id);
    if (old >= 0) {
        s->dead[old] = true;
        free_attrs(&s->attrs[old]);
    } else {
        s->live++;
    }
    if (!map64_put(&s->map, id, i)) {
        s->dead[i] = true;
        if (old < 0) s->live--;
        return err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
    }
    return KVIK_OK;
}

kvik_status vec_add(struct vec_store *s, uint64_t id, const float *v, const struct vec_attr *attrs, int n_attrs,
                    struct kvik_err *err) {
    float *x = malloc((size_t)s->cfg.dim * sizeof *x);
    if (!x) return err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
    if (!prepare(s, v, x)) {
        free(x);
        return err_set(err, KVIK_ERR_INVALID_ARG, "vector store: the vector is zero or not finite");
    }
    pthread_rwlock_wrlock(&s->lock);
    kvik_status st = add_locked(s, id, x, attrs, n_attrs, err);
    pthread_rwlock_unlock(&s->lock);
    free(x);
    return st;
}

kvik_status vec_delete(struct vec_store *s, uint64_t id) {
    pthread_rwlock_wrlock(&s->lock);
    int64_t i = map64_get(&s->map, id);
    if (i >= 0) {
        s->dead[i] = true;
        free_attrs(&s->attrs[i]);
        map64_del(&s->map, id);
        s->live--;
    }
    pthread_rwlock_unlock(&s->lock);
    return i >= 0 ? KVIK_OK : KVIK_ERR_NOT_FOUND;
}

/* The exact top k of the acceptable nodes, into res (a max-heap). */
static bool scan(struct vec_store *s, const struct query *q, int k, const struct vec_filter *f, struct heap *res) {
    for (int64_t i = 0; i < s->n; i++) {
        if (!accept(s, i, f, false)) continue;
        float d = s->exact ? -score_exact(s, q->f, i) : -score(s, q, i);
        if (res->n < k || d < res->a[0].d) {
            if (!heap_push(res, (struct hitem){d, (uint32_t)i})) return false;
            if (res->n > k) heap_pop(res);
        }
    }
    return true;
}

/* The share of live nodes f accepts, from an even sample of at most 512. */
static double selectivity(const struct vec_store *s, const struct vec_filter *f) {
    int64_t step = s->n / 512 + 1, seen = 0, hit = 0;
    for (int64_t i = 0; i < s->n; i += step) {
        if (s->dead[i]) continue;
        seen++;
        hit += vec_filter_match(f, s->attrs[i].a, s->attrs[i].n);
    }
    return seen ? (double)hit / (double)seen : 0.0;
}

int vec_search(struct vec_store *s, const float *q, const struct vec_search *p, struct vec_hit *out,
               struct kvik_err *err) {
    if (!p || p->k < 1) return err_set(err, KVIK_ERR_INVALID_ARG, "vector store: k must be at least 1");
    float *x = malloc((size_t)s->cfg.dim * sizeof *x);
    if (!x) return err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
    if (!prepare(s, q, x)) {
        free(x);
        return err_set(err, KVIK_ERR_INVALID_ARG, "vector store: the query is zero or not finite");
    }
    struct heap res = {.max = true}, cand = {0};
    uint8_t *qu = malloc((size_t)s->cfg.dim);
    struct query qq;
    query_make(s, x, qu, &qq);
    bool ok = qu != NULL;
    pthread_rwlock_rdlock(&s->lock);
    bool exact = p->exact || s->cfg.index == VEC_FLAT || s->entry < 0;
    double sel = 1.0;
    if (!exact && p->filter) {
        sel = selectivity(s, p->filter);
        exact = sel < VEC_EXACT_BELOW;
    }
    if (!ok) {
    } else if (exact) {
        ok = scan(s, &qq, p->k, p->filter, &res);
    } else {
        int ef = p->ef > 0 ? p->ef : s->cfg.ef_search;
        if (ef < p->k) ef = p->k;
        if (p->filter) { /* results are a share sel of what the beam passes */
            double wide = ef / sqrt(sel);
            ef = wide > 4.0 * ef ? 4 * ef : (int)wide;
        }
        struct visited *vis = visited_get(s);
        ok = vis && heap_push(&res, (struct hitem){-score(s, &qq, s->entry), (uint32_t)s->entry});
        for (int l = s->max_level; ok && l >= 1; l--) {
            ok = search_layer(s, &qq, &res, 1, l, NULL, true, vis, &cand);
            if (++vis->gen == 0) {
                memset(vis->mark, 0, (size_t)vis->cap * sizeof *vis->mark);
                vis->gen = 1;
            }
        }
        ok = ok && search_layer(s, &qq, &res, ef, 0, p->filter, false, vis, &cand);
        if (vis) visited_put(s, vis);
        /* the beam scored again in F32 */
        for (int i = 0; ok && s->exact && i < res.n; i++) res.a[i].d = -score_exact(s, x, res.a[i].id);
    }
    int n = 0;
    if (ok && res.n) {
        qsort(res.a, (size_t)res.n, sizeof *res.a, cmp_hitem);
        for (int i = 0; i < res.n && n < p->k; i++) {
            float sc = -res.a[i].d;
            if (sc < p->threshold) break;
            out[n++] = (struct vec_hit){s->ext[res.a[i].id], sc};
        }
    }
    pthread_rwlock_unlock(&s->lock);
    free(res.a);
    free(cand.a);
    free(x);
    free(qu);
    return ok ? n : err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
}

kvik_status vec_get(struct vec_store *s, uint64_t id, float *out) {
    pthread_rwlock_rdlock(&s->lock);
    int64_t i = map64_get(&s->map, id);
    if (i >= 0) load_row(s, i, out);
    pthread_rwlock_unlock(&s->lock);
    return i >= 0 ? KVIK_OK : KVIK_ERR_NOT_FOUND;
}

kvik_status vec_set_attrs(struct vec_store *s, uint64_t id, const struct vec_attr *attrs, int n_attrs) {
    struct node_attrs na;
    if (!copy_attrs(&na, attrs, n_attrs)) return KVIK_ERR_NOMEM;
    pthread_rwlock_wrlock(&s->lock);
    int64_t i = map64_get(&s->map, id);
    if (i >= 0) {
        free_attrs(&s->attrs[i]);
        s->attrs[i] = na;
    }
    pthread_rwlock_unlock(&s->lock);
    if (i < 0) free_attrs(&na);
    return i >= 0 ? KVIK_OK : KVIK_ERR_NOT_FOUND;
}

int64_t vec_count(struct vec_store *s) {
    pthread_rwlock_rdlock(&s->lock);
    int64_t n = s->live;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

int64_t vec_tombstones(struct vec_store *s) {
    pthread_rwlock_rdlock(&s->lock);
    int64_t n = s->n - s->live;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

kvik_status vec_compact(struct vec_store *s, struct kvik_err *err) {
    pthread_rwlock_wrlock(&s->lock);
    struct vec_config c = s->cfg;
    c.normalize = false; /* the rows are already as stored */
    struct vec_store *t = vec_store_new(&c, err);
    kvik_status st = t ? KVIK_OK : KVIK_ERR_NOMEM;
    float *v = malloc((size_t)s->cfg.dim * sizeof *v);
    if (!v && !st) st = err_set(err, KVIK_ERR_NOMEM, "vector store: out of memory");
    for (int64_t i = 0; !st && i < s->n; i++) {
        if (s->dead[i]) continue;
        load_row(s, i, v);
        st = add_locked(t, s->ext[i], v, s->attrs[i].a, s->attrs[i].n, err);
    }
    if (!st) {
        /* t's nodes and graph become s's */
        free_nodes(s);
        s->rows = t->rows, s->scales = t->scales, s->ext = t->ext, s->dead = t->dead, s->attrs = t->attrs;
        s->sums = t->sums, s->exact = t->exact;
        s->level = t->level, s->links0 = t->links0, s->upper = t->upper;
        s->n = t->n, s->cap = t->cap, s->live = t->live, s->entry = t->entry, s->max_level = t->max_level;
        s->map = t->map;
        s->rng = t->rng;
        t->n = 0;
        t->rows = NULL, t->scales = NULL, t->ext = NULL, t->dead = NULL, t->attrs = NULL, t->level = NULL;
        t->sums = NULL, t->exact = NULL;
        t->links0 = NULL, t->upper = NULL, t->map = (struct map64){0};
        /* the visited arrays may be shorter than the new capacity: they grow on use */
    }
    vec_store_free(t);
    free(v);
    pthread_rwlock_unlock(&s->lock);
    return st;
}

size_t vec_memory(struct vec_store *s) {
    pthread_rwlock_rdlock(&s->lock);
    size_t c = (size_t)s->cap;
    size_t b = c * (s->row_bytes + sizeof *s->scales + sizeof *s->sums + sizeof *s->ext + sizeof *s->dead + sizeof *s->attrs +
                    (s->exact ? (size_t)s->cfg.dim * sizeof *s->exact : 0) +
                    sizeof *s->level + sizeof *s->upper + (size_t)(1 + 2 * s->cfg.M) * sizeof *s->links0);
    b += s->map.cap * (sizeof *s->map.key + sizeof *s->map.val);
    for (int64_t i = 0; i < s->n; i++) {
        b += (size_t)s->level[i] * (size_t)(1 + s->cfg.M) * sizeof(uint32_t);
        for (int k = 0; k < s->attrs[i].n; k++)
            b += sizeof(struct vec_attr) + strlen(s->attrs[i].a[k].key) + 1 +
                 (s->attrs[i].a[k].v.type == VEC_STR ? s->attrs[i].a[k].v.len + 1 : 0);
    }
    pthread_rwlock_unlock(&s->lock);
    return b;
}
