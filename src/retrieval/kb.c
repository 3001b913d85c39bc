/*
 * kb.c — the knowledge base's state and its records (kb_int.h): decoding
 * and applying them, opening a data folder (lock, generation, replay,
 * graph files, stray contents), and checkpoints.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "retrieval/kb_int.h"

enum { VERSION = 1 };

/* ---- small things --------------------------------------------------------- */

void kb_tenant_of(const char *key, size_t len, struct kb_tenant *t) {
    memset(t, 0, sizeof *t);
    if (!key) return;
    struct sha256 s;
    uint8_t d[32];
    sha256_init(&s);
    sha256_update(&s, key, len);
    sha256_final(&s, d);
    memcpy(t->h, d, sizeof t->h);
}

void kb_attrs_free(struct kb_attrs *a) {
    if (!a) return;
    for (int i = 0; i < a->n; i++) {
        free((char *)a->a[i].key);
        if (a->a[i].v.type == VEC_STR) free((char *)a->a[i].v.str);
    }
    free(a->a);
    a->a = NULL;
    a->n = 0;
}

bool kb_attrs_copy(struct kb_attrs *out, const struct vec_attr *a, int n) {
    *out = (struct kb_attrs){0};
    if (n <= 0) return true;
    if (!(out->a = calloc((size_t)n, sizeof *out->a))) return false;
    for (int i = 0; i < n; i++) {
        struct vec_attr *d = &out->a[i];
        out->n = i + 1;
        d->v = a[i].v;
        d->v.str = NULL;
        d->key = strdup(a[i].key);
        if (a[i].v.type == VEC_STR) {
            char *s = malloc(a[i].v.len + 1);
            if (s) {
                memcpy(s, a[i].v.str, a[i].v.len);
                s[a[i].v.len] = 0;
            }
            d->v.str = s;
        }
        if (!d->key || (a[i].v.type == VEC_STR && !d->v.str)) {
            kb_attrs_free(out);
            return false;
        }
    }
    return true;
}

kvik_status kb_attrs_check(const struct kb_attrs *a, bool metadata, struct kvik_err *err) {
    const char *what = metadata ? "metadata" : "attributes";
    if (!a) return KVIK_OK;
    if (a->n > KB_MAX_ATTRS)
        return err_set(err, KVIK_ERR_INVALID_ARG, "%s: %d pairs; at most %d are allowed", what, a->n, KB_MAX_ATTRS);
    for (int i = 0; i < a->n; i++) {
        const struct vec_attr *x = &a->a[i];
        size_t kl = strlen(x->key);
        if (kl == 0 || kl > KB_KEY_MAX)
            return err_set(err, KVIK_ERR_INVALID_ARG, "%s: a key of %zu bytes; keys have 1 to %d", what, kl,
                           KB_KEY_MAX);
        for (int k = 0; k < i; k++)
            if (!strcmp(a->a[k].key, x->key))
                return err_set(err, KVIK_ERR_INVALID_ARG, "%s: the key '%.64s' is given twice", what, x->key);
        if (metadata && x->v.type != VEC_STR)
            return err_set(err, KVIK_ERR_INVALID_ARG, "metadata: the value of '%.64s' must be a string", x->key);
        if (x->v.type == VEC_STR && x->v.len > KB_VALUE_MAX)
            return err_set(err, KVIK_ERR_INVALID_ARG, "%s: the value of '%.64s' is %zu bytes; at most %d", what,
                           x->key, x->v.len, KB_VALUE_MAX);
        if (x->v.type == VEC_NUM && !isfinite(x->v.num))
            return err_set(err, KVIK_ERR_INVALID_ARG, "%s: the value of '%.64s' is not a finite number", what,
                           x->key);
        if (x->v.type != VEC_STR && x->v.type != VEC_NUM && x->v.type != VEC_BOOL)
            return err_set(err, KVIK_ERR_INVALID_ARG, "%s: the value of '%.64s' has no known type", what, x->key);
    }
    return KVIK_OK;
}

void kb_put_tenant(struct wbuf *w, const struct kb_tenant *t) { wbuf_bytes(w, t->h, sizeof t->h); }

void kb_put_attrs(struct wbuf *w, const struct kb_attrs *a) {
    int n = a ? a->n : 0;
    wbuf_u32(w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        const struct vec_attr *x = &a->a[i];
        wbuf_str(w, x->key, strlen(x->key));
        wbuf_u8(w, (uint8_t)x->v.type);
        if (x->v.type == VEC_STR) wbuf_str(w, x->v.str, x->v.len);
        else if (x->v.type == VEC_NUM) wbuf_f64(w, x->v.num);
        else wbuf_u8(w, x->v.b);
    }
}

static uint64_t id_hash(const char *id) { return hash64(id, strlen(id), 0x6b62); }

static bool same_tenant(const struct kb_tenant *a, const struct kb_tenant *b) {
    return !memcmp(a->h, b->h, sizeof a->h);
}

struct kb_fl *kb_find_file(const struct kb *kb, const struct kb_tenant *t, const char *id) {
    int64_t i = map64_get(&kb->file_ix, id_hash(id));
    if (i < 0 || strcmp(kb->files[i].info.id, id) || !same_tenant(&kb->files[i].tenant, t)) return NULL;
    return &kb->files[i];
}

struct kb_st *kb_find_store(const struct kb *kb, const struct kb_tenant *t, const char *id) {
    int64_t i = map64_get(&kb->store_ix, id_hash(id));
    if (i < 0 || strcmp(kb->stores[i]->id, id) || !same_tenant(&kb->stores[i]->tenant, t)) return NULL;
    return kb->stores[i];
}

struct kb_sf *kb_find_sf(const struct kb_st *st, const char *file_id, int64_t *slot) {
    for (int64_t i = 0; i < st->n_sf; i++)
        if (st->sf[i] && !strcmp(st->sf[i]->file_id, file_id)) {
            if (slot) *slot = i;
            return st->sf[i];
        }
    return NULL;
}

bool kb_store_expired(const struct kb_st *st, int64_t now) {
    return st->expires_days > 0 && now > atomic_load(&st->last_active_at) + (int64_t)st->expires_days * 86400;
}

struct seq_ix {
    uint64_t seq;
    int64_t i;
};

static int cmp_seq(const void *a, const void *b) {
    const struct seq_ix *x = a, *y = b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

int64_t *kb_seq_order(const void *objs, int64_t n, uint64_t (*seq_of)(const void *objs, int64_t i)) {
    struct seq_ix *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!t || !order) {
        free(t);
        free(order);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) t[i] = (struct seq_ix){seq_of(objs, i), i};
    qsort(t, (size_t)n, sizeof *t, cmp_seq);
    for (int64_t i = 0; i < n; i++) order[i] = t[i].i;
    free(t);
    return order;
}

uint64_t kb_file_seq(const void *files, int64_t i) { return ((const struct kb_fl *)files)[i].seq; }
uint64_t kb_store_seq(const void *stores, int64_t i) { return ((struct kb_st *const *)stores)[i]->seq; }
uint64_t kb_sf_seq(const void *sf, int64_t i) {
    const struct kb_sf *f = ((struct kb_sf *const *)sf)[i];
    return f ? f->seq : UINT64_MAX;
}

void kb_content_path(const struct kb *kb, const char *id, char *buf, size_t len) {
    snprintf(buf, len, "%s/files/%s", kb->dir, id);
}

/* ---- decoding --------------------------------------------------------------- */

/* A string of at most max bytes into buf[max + 1], NUL-terminated, with no
 * NUL inside. */
static bool get_cstr(struct rbuf *r, char *buf, size_t max) {
    size_t n;
    const char *s = rbuf_str(r, max, &n);
    if (!s || memchr(s, 0, n)) {
        r->bad = true;
        buf[0] = 0;
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    return true;
}

static bool get_tenant(struct rbuf *r, struct kb_tenant *t) {
    const uint8_t *p = rbuf_bytes(r, sizeof t->h);
    if (p) memcpy(t->h, p, sizeof t->h);
    return p != NULL;
}

static bool get_attrs(struct rbuf *r, struct kb_attrs *out) {
    *out = (struct kb_attrs){0};
    uint32_t n = rbuf_u32(r);
    if (r->bad || n > KB_MAX_ATTRS) return !(r->bad = true);
    struct vec_attr a[KB_MAX_ATTRS];
    char keys[KB_MAX_ATTRS][KB_KEY_MAX + 1];
    for (uint32_t i = 0; i < n; i++) {
        if (!get_cstr(r, keys[i], KB_KEY_MAX)) return false;
        a[i] = (struct vec_attr){.key = keys[i]};
        a[i].v.type = rbuf_u8(r);
        if (a[i].v.type == VEC_STR) a[i].v.str = rbuf_str(r, KB_VALUE_MAX, &a[i].v.len);
        else if (a[i].v.type == VEC_NUM) a[i].v.num = rbuf_f64(r);
        else if (a[i].v.type == VEC_BOOL) a[i].v.b = rbuf_u8(r) != 0;
        else r->bad = true;
        if (r->bad) return false;
    }
    if (!kb_attrs_copy(out, a, (int)n)) return false;
    struct kb_attrs tmp = *out;
    if (kb_attrs_check(&tmp, false, NULL)) {
        kb_attrs_free(out);
        return !(r->bad = true);
    }
    return true;
}

/* ---- applying records ---------------------------------------------------- */

static kvik_status checkpoint_locked(struct kb *kb, struct kvik_err *err);

static kvik_status bad(struct kvik_err *err, const char *what) {
    return err_set(err, KVIK_ERR_FORMAT, "knowledge base: a %s record that does not fit", what);
}

static kvik_status nomem(struct kvik_err *err) { return err_set(err, KVIK_ERR_NOMEM, "knowledge base: out of memory"); }

static bool grow(void **p, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return true;
    int64_t c = *cap ? 2 * *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static void sf_free(struct kb_sf *f) {
    if (!f) return;
    for (int64_t i = 0; i < f->n_docs; i++) free(f->docs[i].text);
    free(f->docs);
    kb_attrs_free(&f->attrs);
    free(f);
}

static void store_free(struct kb_st *st) {
    if (!st) return;
    for (int64_t i = 0; i < st->n_sf; i++) sf_free(st->sf[i]);
    free(st->sf);
    map64_free(&st->chunk);
    vec_store_free(st->vec);
    bm25_free(st->bm);
    kb_attrs_free(&st->metadata);
    free(st);
}

/* Takes a store file's chunks out of its store's indexes and frees it. */
static void sf_remove(struct kb_st *st, int64_t slot) {
    struct kb_sf *f = st->sf[slot];
    for (int64_t i = 0; i < f->n_docs; i++) {
        uint64_t key = f->first + (uint64_t)i;
        vec_delete(st->vec, key);
        bm25_delete(st->bm, key);
        map64_del(&st->chunk, key);
    }
    st->chunks -= f->n_docs;
    st->usage_bytes -= f->usage_bytes;
    st->sf[slot] = NULL;
    sf_free(f);
}

static kvik_status apply_head(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    uint32_t version = rbuf_u32(r), dim = rbuf_u32(r);
    char id[sizeof kb->cfg.model.id], hash[sizeof kb->cfg.model.hash];
    get_cstr(r, id, sizeof id - 1);
    get_cstr(r, hash, sizeof hash - 1);
    if (r->bad || kb->have_head) return bad(err, "head");
    if (version != VERSION)
        return err_set(err, KVIK_ERR_FORMAT, "knowledge base: the data folder is of version %u; this kvik reads %d",
                       version, VERSION);
    const struct vec_model *m = &kb->cfg.model;
    bool other = (int)dim != kb->cfg.dim || strcmp(id, m->id) || (hash[0] && m->hash[0] && strcmp(hash, m->hash));
    if (other)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "the data folder %s holds vectors of the embedding model '%.100s' (%u dimensions), not of "
                       "'%.100s' (%d); give the same --embedding-model or another --data-dir",
                       kb->dir, id, dim, m->id, kb->cfg.dim);
    kb->have_head = true;
    return KVIK_OK;
}

static kvik_status apply_file(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    struct kb_fl f = {0};
    get_tenant(r, &f.tenant);
    get_cstr(r, f.info.id, KB_ID - 1);
    get_cstr(r, f.info.filename, KB_NAME - 1);
    get_cstr(r, f.info.purpose, sizeof f.info.purpose - 1);
    f.info.bytes = (int64_t)rbuf_u64(r);
    f.info.created_at = (int64_t)rbuf_u64(r);
    if (r->bad || !f.info.id[0] || f.info.bytes < 0 || map64_get(&kb->file_ix, id_hash(f.info.id)) >= 0)
        return bad(err, "file");
    if (!grow((void **)&kb->files, &kb->cap_files, kb->n_files + 1, sizeof *kb->files)) return nomem(err);
    if (!map64_put(&kb->file_ix, id_hash(f.info.id), kb->n_files)) return nomem(err);
    f.seq = kb->seq++;
    kb->files[kb->n_files++] = f;
    return KVIK_OK;
}

static kvik_status apply_file_del(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    struct kb_tenant t;
    char id[KB_ID];
    get_tenant(r, &t);
    get_cstr(r, id, KB_ID - 1);
    struct kb_fl *f = r->bad ? NULL : kb_find_file(kb, &t, id);
    if (!f) return bad(err, "file deletion");
    int64_t i = f - kb->files, last = kb->n_files - 1;
    free(f->mem);
    map64_del(&kb->file_ix, id_hash(id));
    if (i != last) {
        kb->files[i] = kb->files[last];
        map64_put(&kb->file_ix, id_hash(kb->files[i].info.id), i); /* replaces: cannot fail */
    }
    kb->n_files--;
    return KVIK_OK;
}

/* A checkpoint's graph of store st, when the base is opening with graphs
 * and the file loads for this model (else NULL: vectors are added). */
static struct vec_store *load_graph(struct kb *kb, const struct kb_st *st) {
    if (!kb->replaying || !kb->use_graphs || !kb->dir[0] || kb->past_snapshot) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/graph-%" PRIu64 "-%s.kvec", kb->dir, kb->gen, st->id);
    if (access(path, F_OK) != 0) return NULL;
    struct kvik_err e = {0};
    struct vec_store *v = vec_load(path, &kb->cfg.model, NULL, &e);
    if (!v) log_warn("knowledge base: %s not used (%s); its vectors are indexed again", path, e.msg);
    return v;
}

static struct vec_store *new_vec(const struct kb *kb, struct kvik_err *err) {
    struct vec_config c = vec_config_default(kb->cfg.dim);
    c.storage = kb->cfg.storage;
    return vec_store_new(&c, err);
}

static kvik_status apply_store(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    struct kb_st *st = calloc(1, sizeof *st);
    if (!st) return nomem(err);
    get_tenant(r, &st->tenant);
    get_cstr(r, st->id, KB_ID - 1);
    get_cstr(r, st->name, KB_NAME - 1);
    st->created_at = (int64_t)rbuf_u64(r);
    atomic_store(&st->last_active_at, (int64_t)rbuf_u64(r));
    st->expires_days = (int)rbuf_u32(r);
    kvik_status s = KVIK_OK;
    if (!get_attrs(r, &st->metadata) || r->bad || !st->id[0] || st->expires_days < 0 ||
        st->expires_days > 365 || map64_get(&kb->store_ix, id_hash(st->id)) >= 0) {
        s = bad(err, "store");
        goto fail;
    }
    st->vec = load_graph(kb, st);
    st->graph_loaded = st->vec != NULL;
    if (!st->vec && !(st->vec = new_vec(kb, err))) {
        s = KVIK_ERR_NOMEM;
        goto fail;
    }
    if (!(st->bm = bm25_new(BM25_K1, BM25_B)) ||
        !grow((void **)&kb->stores, &kb->cap_stores, kb->n_stores + 1, sizeof *kb->stores) ||
        !map64_put(&kb->store_ix, id_hash(st->id), kb->n_stores)) {
        s = nomem(err);
        goto fail;
    }
    st->seq = kb->seq++;
    kb->stores[kb->n_stores++] = st;
    return KVIK_OK;
fail:
    store_free(st);
    return s;
}

static kvik_status apply_store_set(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    struct kb_tenant t;
    char id[KB_ID], name[KB_NAME];
    struct kb_attrs md;
    get_tenant(r, &t);
    get_cstr(r, id, KB_ID - 1);
    get_cstr(r, name, KB_NAME - 1);
    if (!get_attrs(r, &md)) return bad(err, "store update");
    uint32_t days = rbuf_u32(r);
    struct kb_st *st = r->bad || days > 365 ? NULL : kb_find_store(kb, &t, id);
    if (!st) {
        kb_attrs_free(&md);
        return bad(err, "store update");
    }
    memcpy(st->name, name, sizeof name);
    kb_attrs_free(&st->metadata);
    st->metadata = md;
    st->expires_days = (int)days;
    return KVIK_OK;
}

static kvik_status apply_store_del(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    struct kb_tenant t;
    char id[KB_ID];
    get_tenant(r, &t);
    get_cstr(r, id, KB_ID - 1);
    struct kb_st *st = r->bad ? NULL : kb_find_store(kb, &t, id);
    if (!st) return bad(err, "store deletion");
    int64_t i = map64_get(&kb->store_ix, id_hash(id)), last = kb->n_stores - 1;
    map64_del(&kb->store_ix, id_hash(id));
    if (i != last) {
        kb->stores[i] = kb->stores[last];
        map64_put(&kb->store_ix, id_hash(kb->stores[i]->id), i);
    }
    kb->n_stores--;
    store_free(st);
    return KVIK_OK;
}

/* A free slot of st for a store file (-1: out of memory). */
static int64_t sf_slot(struct kb_st *st) {
    for (int64_t i = 0; i < st->n_sf; i++)
        if (!st->sf[i]) return i;
    if (st->n_sf >= ((int64_t)1 << 38) || !grow((void **)&st->sf, &st->cap_sf, st->n_sf + 1, sizeof *st->sf)) return -1;
    st->sf[st->n_sf] = NULL;
    return st->n_sf++;
}

static kvik_status apply_sfile(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    struct kb_tenant t;
    char sid[KB_ID];
    struct kb_sf *f = calloc(1, sizeof *f);
    if (!f) return nomem(err);
    get_tenant(r, &t);
    get_cstr(r, sid, KB_ID - 1);
    get_cstr(r, f->file_id, KB_ID - 1);
    get_cstr(r, f->filename, KB_NAME - 1);
    f->created_at = (int64_t)rbuf_u64(r);
    f->status = rbuf_u8(r);
    get_cstr(r, f->error_code, sizeof f->error_code - 1);
    get_cstr(r, f->error, sizeof f->error - 1);
    f->chunking.max_tokens = (int)rbuf_u32(r);
    f->chunking.overlap = (int)rbuf_u32(r);
    bool ok = get_attrs(r, &f->attrs);
    f->first = rbuf_u64(r);
    uint64_t n = rbuf_u64(r);
    size_t dim = (size_t)kb->cfg.dim, min_doc = 4 + dim * sizeof(float);
    struct kb_st *st = ok && !r->bad ? kb_find_store(kb, &t, sid) : NULL;
    kvik_status s = KVIK_OK;
    if (!st || (f->status != KB_SFILE_COMPLETED && f->status != KB_SFILE_FAILED) || !f->file_id[0] ||
        n > (r->n - r->at) / min_doc || f->first > UINT64_MAX / 2 || n >= ((uint64_t)1 << KB_SLOT_SHIFT) ||
        f->first < st->next) {
        s = bad(err, "store file");
        goto fail;
    }
    if (n && !(f->docs = calloc((size_t)n, sizeof *f->docs))) {
        s = nomem(err);
        goto fail;
    }
    float *vec = malloc(dim * sizeof *vec);
    if (!vec) {
        s = nomem(err);
        goto fail;
    }
    int64_t old_slot;
    if (kb_find_sf(st, f->file_id, &old_slot)) sf_remove(st, old_slot);
    int64_t slot = sf_slot(st);
    if (slot < 0) {
        free(vec);
        s = nomem(err);
        goto fail;
    }
    /* the store file holds its chunks from here on; a failure below leaves
     * it in the store with the chunks indexed so far */
    st->sf[slot] = f;
    f->seq = kb->seq++;
    st->next = f->first + n;
    bool skip_vec = st->graph_loaded && kb->replaying && !kb->past_snapshot;
    for (uint64_t i = 0; i < n && !s; i++) {
        size_t len;
        const char *text = rbuf_str(r, JOURNAL_MAX_RECORD, &len);
        const uint8_t *v = rbuf_bytes(r, dim * sizeof(float));
        if (!text || !v) {
            s = bad(err, "store file");
            break;
        }
        memcpy(vec, v, dim * sizeof *vec);
        uint64_t key = f->first + i;
        struct kb_doc *d = &f->docs[i];
        if (!(d->text = malloc(len + 1))) {
            s = nomem(err);
            break;
        }
        memcpy(d->text, text, len);
        d->text[len] = 0;
        d->len = (uint32_t)len;
        f->n_docs = (int64_t)i + 1;
        f->usage_bytes += (int64_t)(len + dim * sizeof(float));
        if (!map64_put(&st->chunk, key, slot << KB_SLOT_SHIFT | (int64_t)i)) s = nomem(err);
        else if (skip_vec) {
            if (vec_get(st->vec, key, vec) != KVIK_OK) kb->graph_mismatch = true;
            else if (!kb->graph_mismatch) vec_set_attrs(st->vec, key, f->attrs.a, f->attrs.n);
        } else {
            s = vec_add(st->vec, key, vec, f->attrs.a, f->attrs.n, err);
        }
        if (!s) s = bm25_add(st->bm, key, d->text, d->len);
    }
    st->chunks += f->n_docs;
    st->usage_bytes += f->usage_bytes;
    free(vec);
    if (!s && r->at != r->n) s = bad(err, "store file");
    return s;
fail:
    sf_free(f);
    return s;
}

static kvik_status apply_sfile_set(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    struct kb_tenant t;
    char sid[KB_ID], fid[KB_ID];
    struct kb_attrs a;
    get_tenant(r, &t);
    get_cstr(r, sid, KB_ID - 1);
    get_cstr(r, fid, KB_ID - 1);
    if (!get_attrs(r, &a)) return bad(err, "store file update");
    struct kb_st *st = r->bad ? NULL : kb_find_store(kb, &t, sid);
    struct kb_sf *f = st ? kb_find_sf(st, fid, NULL) : NULL;
    if (!f) {
        kb_attrs_free(&a);
        return bad(err, "store file update");
    }
    kb_attrs_free(&f->attrs);
    f->attrs = a;
    for (int64_t i = 0; i < f->n_docs; i++)
        if (vec_set_attrs(st->vec, f->first + (uint64_t)i, a.a, a.n) == KVIK_ERR_NOMEM) return nomem(err);
    return KVIK_OK;
}

static kvik_status apply_sfile_del(struct kb *kb, struct rbuf *r, struct kvik_err *err) {
    struct kb_tenant t;
    char sid[KB_ID], fid[KB_ID];
    get_tenant(r, &t);
    get_cstr(r, sid, KB_ID - 1);
    get_cstr(r, fid, KB_ID - 1);
    struct kb_st *st = r->bad ? NULL : kb_find_store(kb, &t, sid);
    int64_t slot;
    if (!st || !kb_find_sf(st, fid, &slot)) return bad(err, "store file deletion");
    sf_remove(st, slot);
    return KVIK_OK;
}

kvik_status kb_apply(struct kb *kb, const uint8_t *p, size_t n, struct kvik_err *err) {
    struct rbuf r = {.p = p, .n = n};
    int type = rbuf_u8(&r);
    if (type != R_HEAD && !kb->have_head && kb->dir[0]) return bad(err, "first");
    kvik_status s;
    switch (type) {
    case R_HEAD: s = apply_head(kb, &r, err); break;
    case R_FILE: s = apply_file(kb, &r, err); break;
    case R_FILE_DEL: s = apply_file_del(kb, &r, err); break;
    case R_STORE: s = apply_store(kb, &r, err); break;
    case R_STORE_SET: s = apply_store_set(kb, &r, err); break;
    case R_STORE_DEL: s = apply_store_del(kb, &r, err); break;
    case R_SFILE: return apply_sfile(kb, &r, err); /* checks its own end */
    case R_SFILE_SET: s = apply_sfile_set(kb, &r, err); break;
    case R_SFILE_DEL: s = apply_sfile_del(kb, &r, err); break;
    case R_SNAPSHOT: kb->past_snapshot = true; s = KVIK_OK; break;
    default: return err_set(err, KVIK_ERR_FORMAT, "knowledge base: a record of unknown type %d", type);
    }
    if (!s && (r.bad || r.at != r.n)) s = bad(err, "malformed");
    return s;
}

kvik_status kb_commit(struct kb *kb, const struct wbuf *w, struct kvik_err *err) {
    if (w->fail) return nomem(err);
    if (kb->j) {
        kvik_status s = journal_append(kb->j, w->p, w->n, err);
        if (s) return s;
    }
    kvik_status s = kb_apply(kb, w->p, w->n, err);
    if (s == KVIK_ERR_FORMAT) log_warn("knowledge base: a change did not apply: %s", err ? err->msg : "");
    if (!s && kb->j && kb->cfg.checkpoint_bytes >= 0 && journal_size(kb->j) > kb->cfg.checkpoint_bytes) {
        struct kvik_err e = {0};
        if (checkpoint_locked(kb, &e)) log_warn("knowledge base: checkpoint failed: %s", e.msg);
    }
    return s;
}

/* ---- records of the whole state (checkpoints, a new folder) --------------- */

static void put_head(struct wbuf *w, const struct kb *kb) {
    wbuf_u8(w, R_HEAD);
    wbuf_u32(w, VERSION);
    wbuf_u32(w, (uint32_t)kb->cfg.dim);
    wbuf_str(w, kb->cfg.model.id, strnlen(kb->cfg.model.id, sizeof kb->cfg.model.id));
    wbuf_str(w, kb->cfg.model.hash, strnlen(kb->cfg.model.hash, sizeof kb->cfg.model.hash));
}

static void put_file(struct wbuf *w, const struct kb_fl *f) {
    wbuf_u8(w, R_FILE);
    kb_put_tenant(w, &f->tenant);
    wbuf_str(w, f->info.id, strlen(f->info.id));
    wbuf_str(w, f->info.filename, strlen(f->info.filename));
    wbuf_str(w, f->info.purpose, strlen(f->info.purpose));
    wbuf_u64(w, (uint64_t)f->info.bytes);
    wbuf_u64(w, (uint64_t)f->info.created_at);
}

static void put_store(struct wbuf *w, const struct kb_st *st) {
    wbuf_u8(w, R_STORE);
    kb_put_tenant(w, &st->tenant);
    wbuf_str(w, st->id, strlen(st->id));
    wbuf_str(w, st->name, strlen(st->name));
    wbuf_u64(w, (uint64_t)st->created_at);
    wbuf_u64(w, (uint64_t)atomic_load(&st->last_active_at));
    wbuf_u32(w, (uint32_t)st->expires_days);
    kb_put_attrs(w, &st->metadata);
}

/* A store file as one R_SFILE record, its vectors read back from the store. */
static bool put_sfile(struct wbuf *w, const struct kb_st *st, const struct kb_sf *f, float *vec, int dim) {
    wbuf_u8(w, R_SFILE);
    kb_put_tenant(w, &st->tenant);
    wbuf_str(w, st->id, strlen(st->id));
    wbuf_str(w, f->file_id, strlen(f->file_id));
    wbuf_str(w, f->filename, strlen(f->filename));
    wbuf_u64(w, (uint64_t)f->created_at);
    wbuf_u8(w, (uint8_t)f->status);
    wbuf_str(w, f->error_code, strlen(f->error_code));
    wbuf_str(w, f->error, strlen(f->error));
    wbuf_u32(w, (uint32_t)f->chunking.max_tokens);
    wbuf_u32(w, (uint32_t)f->chunking.overlap);
    kb_put_attrs(w, &f->attrs);
    wbuf_u64(w, f->first);
    wbuf_u64(w, (uint64_t)f->n_docs);
    for (int64_t i = 0; i < f->n_docs; i++) {
        if (vec_get(st->vec, f->first + (uint64_t)i, vec) != KVIK_OK) return false;
        wbuf_str(w, f->docs[i].text, f->docs[i].len);
        wbuf_bytes(w, vec, (size_t)dim * sizeof *vec);
    }
    return true;
}

/* ---- the folder ------------------------------------------------------------ */

static kvik_status sync_dir(const char *dir, struct kvik_err *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return err_set(err, KVIK_ERR_IO, "knowledge base: cannot sync the folder %s: %s", dir, strerror(e));
    }
    close(fd);
    return KVIK_OK;
}

static void journal_path(const struct kb *kb, uint64_t gen, char *buf, size_t len) {
    snprintf(buf, len, "%s/journal-%" PRIu64, kb->dir, gen);
}

/* Writes CURRENT = gen through a synced temporary file and a rename. */
static kvik_status write_current(struct kb *kb, uint64_t gen, struct kvik_err *err) {
    char tmp[4096], path[4096], text[32];
    snprintf(tmp, sizeof tmp, "%s/CURRENT.tmp", kb->dir);
    snprintf(path, sizeof path, "%s/CURRENT", kb->dir);
    int n = snprintf(text, sizeof text, "%" PRIu64 "\n", gen);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write(fd, text, (size_t)n) == n && fsync(fd) == 0;
    int e = errno;
    if (fd >= 0) close(fd);
    if (!ok || rename(tmp, path) != 0) {
        if (ok) e = errno;
        return err_set(err, KVIK_ERR_IO, "knowledge base: cannot write %s: %s", path, strerror(e));
    }
    return sync_dir(kb->dir, err);
}

/* Removes the journals and graphs of generations other than kb->gen, and
 * contents of files the base does not hold (a crash between writing one
 * and recording it). */
static void remove_strays(struct kb *kb) {
    DIR *d = opendir(kb->dir);
    char path[4096];
    for (struct dirent *e; d && (e = readdir(d));) {
        uint64_t g;
        char rest[8];
        bool journal = sscanf(e->d_name, "journal-%" SCNu64 "%1s", &g, rest) == 1;
        bool graph = sscanf(e->d_name, "graph-%" SCNu64 "-%1s", &g, rest) == 2;
        bool tmp = strstr(e->d_name, ".tmp") != NULL;
        if ((journal || graph) && g != kb->gen) tmp = true;
        if (!tmp) continue;
        snprintf(path, sizeof path, "%s/%s", kb->dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    snprintf(path, sizeof path, "%s/files", kb->dir);
    d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' || map64_get(&kb->file_ix, id_hash(e->d_name)) >= 0) continue;
        snprintf(path, sizeof path, "%s/files/%s", kb->dir, e->d_name);
        log_warn("knowledge base: %s is no file of the base; removed", path);
        unlink(path);
    }
    if (d) closedir(d);
}

static void free_state(struct kb *kb) {
    for (int64_t i = 0; i < kb->n_files; i++) free(kb->files[i].mem);
    free(kb->files);
    kb->files = NULL;
    kb->n_files = kb->cap_files = 0;
    map64_free(&kb->file_ix);
    for (int64_t i = 0; i < kb->n_stores; i++) store_free(kb->stores[i]);
    free(kb->stores);
    kb->stores = NULL;
    kb->n_stores = kb->cap_stores = 0;
    map64_free(&kb->store_ix);
    journal_close(kb->j);
    kb->j = NULL;
}

static kvik_status replay_record(void *ctx, const uint8_t *p, size_t n, struct kvik_err *err) {
    return kb_apply(ctx, p, n, err);
}

/* Opens generation kb->gen's journal and replays it. */
static kvik_status replay(struct kb *kb, struct kvik_err *err) {
    char path[4096];
    journal_path(kb, kb->gen, path, sizeof path);
    kb->replaying = true;
    kb->past_snapshot = kb->have_head = kb->graph_mismatch = false;
    kvik_status s = journal_open(path, replay_record, kb, &kb->j, err);
    kb->replaying = false;
    if (s) return s;
    if (!kb->have_head) { /* a new folder: its first record */
        struct wbuf w = {0};
        put_head(&w, kb);
        s = kb_commit(kb, &w, err);
        wbuf_free(&w);
    }
    if (kb->j) kb->j_base = journal_size(kb->j);
    return s;
}

static kvik_status open_folder(struct kb *kb, struct kvik_err *err) {
    char path[4096];
    if (mkdir(kb->dir, 0700) != 0 && errno != EEXIST)
        return err_set(err, KVIK_ERR_IO, "knowledge base: cannot make the folder %s: %s", kb->dir, strerror(errno));
    snprintf(path, sizeof path, "%s/files", kb->dir);
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return err_set(err, KVIK_ERR_IO, "knowledge base: cannot make %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/LOCK", kb->dir);
    kb->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (kb->lock_fd < 0)
        return err_set(err, KVIK_ERR_IO, "knowledge base: cannot open %s: %s", path, strerror(errno));
    if (flock(kb->lock_fd, LOCK_EX | LOCK_NB) != 0)
        return err_set(err, KVIK_ERR_BUSY, "knowledge base: the data folder %s is in use by another process", kb->dir);
    snprintf(path, sizeof path, "%s/CURRENT", kb->dir);
    FILE *f = fopen(path, "r");
    kb->gen = 0;
    if (f) {
        bool ok = fscanf(f, "%" SCNu64, &kb->gen) == 1;
        fclose(f);
        if (!ok) return err_set(err, KVIK_ERR_FORMAT, "knowledge base: %s does not hold a generation", path);
    } else if (errno != ENOENT) {
        return err_set(err, KVIK_ERR_IO, "knowledge base: cannot read %s: %s", path, strerror(errno));
    } else {
        kvik_status s = write_current(kb, 0, err);
        if (s) return s;
    }
    kb->use_graphs = true;
    kvik_status s = replay(kb, err);
    if (!s && kb->graph_mismatch) { /* a graph file that does not match its records: build them all */
        log_warn("knowledge base: a graph file of generation %" PRIu64 " does not match the journal; indexing again",
                 kb->gen);
        free_state(kb);
        kb->use_graphs = false;
        s = replay(kb, err);
    }
    if (!s) remove_strays(kb);
    return s;
}

kvik_status kb_open(const struct kb_config *cfg, struct kb **out, struct kvik_err *err) {
    *out = NULL;
    if (cfg->dim < 1 || cfg->dim > 65536 || !cfg->embed)
        return err_set(err, KVIK_ERR_INVALID_ARG, "knowledge base: needs an embedding function and its width");
    if (cfg->dir && strlen(cfg->dir) >= sizeof ((struct kb *)0)->dir - 64)
        return err_set(err, KVIK_ERR_INVALID_ARG, "knowledge base: the folder's path is too long");
    struct kb *kb = calloc(1, sizeof *kb);
    if (!kb) return nomem(err);
    kb->cfg = *cfg;
    if (kb->cfg.embed_batch < 1) kb->cfg.embed_batch = 32;
    if (!kb->cfg.checkpoint_bytes) kb->cfg.checkpoint_bytes = (int64_t)256 << 20;
    kb->lock_fd = -1;
    pthread_rwlock_init(&kb->lock, NULL);
    kvik_status s = KVIK_OK;
    if (cfg->dir) {
        snprintf(kb->dir, sizeof kb->dir, "%s", cfg->dir);
        s = open_folder(kb, err);
    }
    if (s) {
        kb_close(kb);
        return s;
    }
    *out = kb;
    return KVIK_OK;
}

void kb_close(struct kb *kb) {
    if (!kb) return;
    free_state(kb);
    if (kb->lock_fd >= 0) close(kb->lock_fd); /* releases the lock */
    pthread_rwlock_destroy(&kb->lock);
    free(kb);
}

/* ---- checkpoints ------------------------------------------------------------- */

/* With the write lock held: every live record into generation gen + 1's
 * journal (synced once at the end), each store's graph beside it, then
 * CURRENT switched to it and the old generation removed. On failure the
 * old generation stays in use. */
static kvik_status checkpoint_locked(struct kb *kb, struct kvik_err *err) {
    if (!kb->dir[0]) return KVIK_OK;
    uint64_t gen = kb->gen + 1;
    char path[4096], tmp[4200];
    journal_path(kb, gen, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    struct journal *j = NULL;
    kvik_status s = journal_open(tmp, NULL, NULL, &j, err);
    float *vec = malloc((size_t)kb->cfg.dim * sizeof *vec);
    struct wbuf w = {0};
    if (!s && !vec) s = nomem(err);
#define EMIT()                                              \
    do {                                                    \
        if (!s && w.fail) s = nomem(err);                   \
        if (!s) s = journal_write(j, w.p, w.n, err);        \
        w.n = 0;                                            \
    } while (0)
    if (!s) {
        put_head(&w, kb);
        EMIT();
    }
    /* in the order they were made, so lists keep their order on replay */
    int64_t *fo = s ? NULL : kb_seq_order(kb->files, kb->n_files, kb_file_seq);
    int64_t *so = s ? NULL : kb_seq_order(kb->stores, kb->n_stores, kb_store_seq);
    if (!s && (!fo || !so)) s = nomem(err);
    for (int64_t i = 0; !s && i < kb->n_files; i++) {
        put_file(&w, &kb->files[fo[i]]);
        EMIT();
    }
    for (int64_t i = 0; !s && i < kb->n_stores; i++) {
        struct kb_st *st = kb->stores[so[i]];
        put_store(&w, st);
        EMIT();
        int64_t *ko = s ? NULL : kb_seq_order(st->sf, st->n_sf, kb_sf_seq);
        if (!ko) s = nomem(err);
        for (int64_t k = 0; !s && k < st->n_sf; k++) {
            const struct kb_sf *f = st->sf[ko[k]];
            if (!f) continue;
            if (!put_sfile(&w, st, f, vec, kb->cfg.dim))
                s = err_set(err, KVIK_ERR_FORMAT, "knowledge base: store %s lacks a vector of its chunks", st->id);
            EMIT();
        }
        free(ko);
        if (!s && vec_tombstones(st->vec) > 0) s = vec_compact(st->vec, err);
        char g[4096];
        snprintf(g, sizeof g, "%s/graph-%" PRIu64 "-%s.kvec", kb->dir, gen, st->id);
        if (!s) s = vec_save(st->vec, g, &kb->cfg.model, err);
    }
    if (!s) {
        wbuf_u8(&w, R_SNAPSHOT);
        EMIT();
    }
#undef EMIT
    free(fo);
    free(so);
    wbuf_free(&w);
    free(vec);
    if (!s) s = journal_sync(j, err);
    journal_close(j);
    if (!s && rename(tmp, path) != 0)
        s = err_set(err, KVIK_ERR_IO, "knowledge base: cannot rename %s: %s", tmp, strerror(errno));
    if (!s) s = sync_dir(kb->dir, err);
    if (!s) s = write_current(kb, gen, err);
    struct journal *nj = NULL;
    if (!s) { /* from here on gen is the base: reopen its journal for appends */
        uint64_t old = kb->gen;
        kb->gen = gen;
        journal_close(kb->j);
        kb->j = NULL;
        s = journal_open(path, NULL, NULL, &nj, err);
        kb->j = nj;
        kb->j_base = nj ? journal_size(nj) : 0;
        for (int64_t i = 0; i < kb->n_stores; i++) kb->stores[i]->graph_loaded = false;
        remove_strays(kb);
        log_info("knowledge base: checkpoint %" PRIu64 " written (%lld bytes), %" PRIu64 " removed", gen,
                 nj ? (long long)journal_size(nj) : 0LL, old);
    } else {
        unlink(tmp);
    }
    return s;
}

kvik_status kb_checkpoint_if_grown(struct kb *kb, int64_t bytes, struct kvik_err *err) {
    pthread_rwlock_wrlock(&kb->lock);
    kvik_status s = kb->j && journal_size(kb->j) - kb->j_base > bytes ? checkpoint_locked(kb, err) : KVIK_OK;
    pthread_rwlock_unlock(&kb->lock);
    return s;
}

kvik_status kb_checkpoint(struct kb *kb, struct kvik_err *err) {
    pthread_rwlock_wrlock(&kb->lock);
    kvik_status s = checkpoint_locked(kb, err);
    pthread_rwlock_unlock(&kb->lock);
    return s;
}
