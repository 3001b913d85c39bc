/*
 * kb_ops.c — kb.h's calls on files and stores: each checks its input and
 * the tenant's objects, encodes one record and commits it under the
 * write lock (kb_int.h); reads take the read lock and copy out.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "retrieval/chunk.h"
#include "retrieval/kb_int.h"

static kvik_status nomem(struct kvik_err *err) { return err_set(err, KVIK_ERR_NOMEM, "knowledge base: out of memory"); }

static kvik_status not_found(struct kvik_err *err, const char *what, const char *id) {
    return err_set(err, KVIK_ERR_NOT_FOUND, "No %s found with id '%.64s'.", what, id);
}

static int64_t now_s(void) { return (int64_t)time(NULL); }

/* prefix and 24 random hex digits. */
static void new_id(const char *prefix, char *out) {
    uint8_t r[12];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom(r + got, sizeof r - got, 0);
        if (n > 0) got += (size_t)n;
        else if (errno != EINTR) { /* no entropy source: the clock and a counter */
            static _Atomic uint64_t ctr;
            uint64_t x = (uint64_t)clock_ns() ^ atomic_fetch_add(&ctr, 1) << 40;
            for (; got < sizeof r; got++) r[got] = (uint8_t)(prng_splitmix64(&x) >> 56);
        }
    }
    int n = sprintf(out, "%s", prefix);
    for (size_t i = 0; i < sizeof r; i++) n += sprintf(out + n, "%02x", r[i]);
}

static kvik_status check_text(const char *what, const char *s, size_t max, bool empty_ok, struct kvik_err *err) {
    size_t n = s ? strlen(s) : 0;
    if ((!empty_ok && n == 0) || n > max)
        return err_set(err, KVIK_ERR_INVALID_ARG, "%s must have %s%zu bytes at most", what, empty_ok ? "" : "1 to ",
                       max);
    return KVIK_OK;
}

static void put_ids(struct wbuf *w, int type, const struct kb_tenant *t, const char *a, const char *b) {
    wbuf_u8(w, (uint8_t)type);
    kb_put_tenant(w, t);
    wbuf_str(w, a, strlen(a));
    if (b) wbuf_str(w, b, strlen(b));
}

/* ---- files ------------------------------------------------------------------ */

/* Writes data to files/<id> through a synced temporary file. */
static kvik_status write_content(const struct kb *kb, const char *id, const void *data, size_t len,
                                 struct kvik_err *err) {
    char path[4096], tmp[4200];
    kb_content_path(kb, id, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0;
    for (size_t done = 0; ok && done < len;) {
        ssize_t w = write(fd, (const char *)data + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = false;
        else done += (size_t)w;
    }
    ok = ok && fsync(fd) == 0;
    int e = errno;
    if (fd >= 0) close(fd);
    if (ok && rename(tmp, path) != 0) ok = false, e = errno;
    if (ok) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/files", kb->dir);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ok = dfd >= 0 && fsync(dfd) == 0;
        e = errno;
        if (dfd >= 0) close(dfd);
    }
    if (!ok) {
        unlink(tmp);
        return err_set(err, KVIK_ERR_IO, "knowledge base: cannot write %s: %s", path, strerror(e));
    }
    return KVIK_OK;
}

kvik_status kb_file_add(struct kb *kb, const struct kb_tenant *t, const char *filename, const char *purpose,
                        const void *data, size_t len, struct kb_file *out, struct kvik_err *err) {
    kvik_status s = check_text("A file's name", filename, KB_NAME - 1, false, err);
    if (!s) s = check_text("A file's purpose", purpose, sizeof out->purpose - 1, false, err);
    if (s) return s;
    struct kb_file f = {.bytes = (int64_t)len, .created_at = now_s()};
    new_id("file-", f.id);
    snprintf(f.filename, sizeof f.filename, "%s", filename);
    snprintf(f.purpose, sizeof f.purpose, "%s", purpose);
    char *mem = NULL;
    if (kb->dir[0]) {
        if ((s = write_content(kb, f.id, data, len, err))) return s;
    } else if (!(mem = malloc(len + 1))) {
        return nomem(err);
    } else {
        memcpy(mem, data, len);
        mem[len] = 0;
    }
    struct wbuf w = {0};
    put_ids(&w, R_FILE, t, f.id, f.filename);
    wbuf_str(&w, f.purpose, strlen(f.purpose));
    wbuf_u64(&w, (uint64_t)f.bytes);
    wbuf_u64(&w, (uint64_t)f.created_at);
    pthread_rwlock_wrlock(&kb->lock);
    s = kb_commit(kb, &w, err);
    struct kb_fl *fl = s ? NULL : kb_find_file(kb, t, f.id);
    if (fl) fl->mem = mem, mem = NULL;
    pthread_rwlock_unlock(&kb->lock);
    wbuf_free(&w);
    free(mem);
    if (s && kb->dir[0]) {
        char path[4096];
        kb_content_path(kb, f.id, path, sizeof path);
        unlink(path);
    }
    if (!s && out) *out = f;
    return s;
}

kvik_status kb_file_get(struct kb *kb, const struct kb_tenant *t, const char *id, struct kb_file *out,
                        struct kvik_err *err) {
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_fl *f = kb_find_file(kb, t, id);
    if (f) *out = f->info;
    pthread_rwlock_unlock(&kb->lock);
    return f ? KVIK_OK : not_found(err, "file", id);
}

int64_t kb_file_list(struct kb *kb, const struct kb_tenant *t, const char *purpose, struct kb_file **out,
                     struct kvik_err *err) {
    *out = NULL;
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_file *a = malloc((size_t)(kb->n_files ? kb->n_files : 1) * sizeof *a);
    int64_t *order = kb_seq_order(kb->files, kb->n_files, kb_file_seq);
    int64_t n = 0;
    for (int64_t k = 0; a && order && k < kb->n_files; k++) {
        const struct kb_fl *f = &kb->files[order[k]];
        if (!memcmp(f->tenant.h, t->h, sizeof t->h) && (!purpose || !strcmp(purpose, f->info.purpose)))
            a[n++] = f->info;
    }
    pthread_rwlock_unlock(&kb->lock);
    bool ok = a && order;
    free(order);
    if (!ok) {
        free(a);
        return nomem(err);
    }
    *out = a;
    return n;
}

/* Reads path whole into a malloc'd buffer with a NUL after. */
static kvik_status read_whole(const char *path, char **data, size_t *len, struct kvik_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(err, KVIK_ERR_IO, "knowledge base: cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    char *buf = NULL;
    bool ok = fstat(fileno(f), &sb) == 0 && (buf = malloc((size_t)sb.st_size + 1)) &&
              fread(buf, 1, (size_t)sb.st_size, f) == (size_t)sb.st_size;
    fclose(f);
    if (!ok) {
        free(buf);
        return err_set(err, KVIK_ERR_IO, "knowledge base: cannot read %s", path);
    }
    buf[sb.st_size] = 0;
    *data = buf;
    *len = (size_t)sb.st_size;
    return KVIK_OK;
}

kvik_status kb_file_content(struct kb *kb, const struct kb_tenant *t, const char *id, char **data, size_t *len,
                            struct kvik_err *err) {
    *data = NULL;
    *len = 0;
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_fl *f = kb_find_file(kb, t, id);
    kvik_status s = f ? KVIK_OK : not_found(err, "file", id);
    if (f && f->mem) {
        size_t n = (size_t)f->info.bytes;
        if ((*data = malloc(n + 1))) {
            memcpy(*data, f->mem, n + 1);
            *len = n;
        } else {
            s = nomem(err);
        }
    } else if (f) { /* read under the lock: a delete cannot remove it meanwhile */
        char path[4096];
        kb_content_path(kb, id, path, sizeof path);
        s = read_whole(path, data, len, err);
    }
    pthread_rwlock_unlock(&kb->lock);
    return s;
}

kvik_status kb_file_delete(struct kb *kb, const struct kb_tenant *t, const char *id, struct kvik_err *err) {
    struct wbuf w = {0};
    put_ids(&w, R_FILE_DEL, t, id, NULL);
    pthread_rwlock_wrlock(&kb->lock);
    kvik_status s = kb_find_file(kb, t, id) ? kb_commit(kb, &w, err) : not_found(err, "file", id);
    if (!s && kb->dir[0]) {
        char path[4096];
        kb_content_path(kb, id, path, sizeof path);
        unlink(path);
    }
    pthread_rwlock_unlock(&kb->lock);
    wbuf_free(&w);
    return s;
}

/* ---- stores ----------------------------------------------------------------- */

/* st as a kb_store (metadata copied); false when out of memory. */
static bool store_info(const struct kb_st *st, struct kb_store *out) {
    *out = (struct kb_store){.created_at = st->created_at,
                             .last_active_at = atomic_load(&st->last_active_at),
                             .usage_bytes = st->usage_bytes,
                             .chunks = st->chunks,
                             .expires_days = st->expires_days,
                             .status = kb_store_expired(st, now_s()) ? KB_STORE_EXPIRED : KB_STORE_COMPLETED};
    memcpy(out->id, st->id, sizeof out->id);
    memcpy(out->name, st->name, sizeof out->name);
    for (int64_t i = 0; i < st->n_sf; i++)
        if (st->sf[i]) {
            if (st->sf[i]->status == KB_SFILE_COMPLETED) out->n_completed++;
            else out->n_failed++;
        }
    return kb_attrs_copy(&out->metadata, st->metadata.a, st->metadata.n);
}

void kb_store_free(struct kb_store *s) {
    if (s) kb_attrs_free(&s->metadata);
}

static kvik_status check_store_args(const char *name, const struct kb_attrs *md, int expires_days,
                                    struct kvik_err *err) {
    kvik_status s = name ? check_text("A vector store's name", name, KB_NAME - 1, true, err) : KVIK_OK;
    if (!s) s = kb_attrs_check(md, true, err);
    if (!s && expires_days > 365)
        s = err_set(err, KVIK_ERR_INVALID_ARG, "expires_after.days must be 1 to 365, not %d", expires_days);
    return s;
}

kvik_status kb_store_create(struct kb *kb, const struct kb_tenant *t, const char *name,
                            const struct kb_attrs *metadata, int expires_days, struct kb_store *out,
                            struct kvik_err *err) {
    if (expires_days < 0) expires_days = 0;
    kvik_status s = check_store_args(name ? name : "", metadata, expires_days, err);
    if (s) return s;
    char id[KB_ID];
    new_id("vs_", id);
    int64_t now = now_s();
    struct wbuf w = {0};
    put_ids(&w, R_STORE, t, id, name ? name : "");
    wbuf_u64(&w, (uint64_t)now);
    wbuf_u64(&w, (uint64_t)now);
    wbuf_u32(&w, (uint32_t)expires_days);
    kb_put_attrs(&w, metadata);
    pthread_rwlock_wrlock(&kb->lock);
    s = kb_commit(kb, &w, err);
    struct kb_st *st = s ? NULL : kb_find_store(kb, t, id);
    if (st && out && !store_info(st, out)) s = nomem(err);
    pthread_rwlock_unlock(&kb->lock);
    wbuf_free(&w);
    return s;
}

kvik_status kb_store_get(struct kb *kb, const struct kb_tenant *t, const char *id, struct kb_store *out,
                         struct kvik_err *err) {
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, id);
    kvik_status s = !st ? not_found(err, "vector store", id) : store_info(st, out) ? KVIK_OK : nomem(err);
    pthread_rwlock_unlock(&kb->lock);
    return s;
}

int64_t kb_store_list(struct kb *kb, const struct kb_tenant *t, struct kb_store **out, struct kvik_err *err) {
    *out = NULL;
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_store *a = calloc((size_t)(kb->n_stores ? kb->n_stores : 1), sizeof *a);
    int64_t *order = kb_seq_order(kb->stores, kb->n_stores, kb_store_seq);
    int64_t n = 0;
    bool ok = a && order;
    for (int64_t k = 0; ok && k < kb->n_stores; k++) {
        const struct kb_st *st = kb->stores[order[k]];
        if (!memcmp(st->tenant.h, t->h, sizeof t->h)) ok = store_info(st, &a[n++]);
    }
    pthread_rwlock_unlock(&kb->lock);
    free(order);
    if (!ok) {
        for (int64_t i = 0; a && i < n; i++) kb_store_free(&a[i]);
        free(a);
        return nomem(err);
    }
    *out = a;
    return n;
}

kvik_status kb_store_update(struct kb *kb, const struct kb_tenant *t, const char *id, const char *name,
                            const struct kb_attrs *metadata, int expires_days, struct kb_store *out,
                            struct kvik_err *err) {
    kvik_status s = check_store_args(name, metadata, expires_days, err);
    if (s) return s;
    pthread_rwlock_wrlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, id);
    struct wbuf w = {0};
    if (!st) {
        s = not_found(err, "vector store", id);
    } else {
        put_ids(&w, R_STORE_SET, t, id, name ? name : st->name);
        kb_put_attrs(&w, metadata ? metadata : &st->metadata);
        wbuf_u32(&w, (uint32_t)(expires_days >= 0 ? expires_days : st->expires_days));
        s = kb_commit(kb, &w, err);
        if (!s && out && !store_info(st, out)) s = nomem(err);
    }
    pthread_rwlock_unlock(&kb->lock);
    wbuf_free(&w);
    return s;
}

kvik_status kb_store_delete(struct kb *kb, const struct kb_tenant *t, const char *id, struct kvik_err *err) {
    struct wbuf w = {0};
    put_ids(&w, R_STORE_DEL, t, id, NULL);
    pthread_rwlock_wrlock(&kb->lock);
    kvik_status s = kb_find_store(kb, t, id) ? kb_commit(kb, &w, err) : not_found(err, "vector store", id);
    pthread_rwlock_unlock(&kb->lock);
    wbuf_free(&w);
    return s;
}

/* ---- files in stores -------------------------------------------------------- */

static bool sf_info(const struct kb_st *st, const struct kb_sf *f, struct kb_sfile *out) {
    *out = (struct kb_sfile){.created_at = f->created_at,
                             .usage_bytes = f->usage_bytes,
                             .chunks = f->n_docs,
                             .status = f->status,
                             .chunking = f->chunking};
    memcpy(out->file_id, f->file_id, sizeof out->file_id);
    memcpy(out->store_id, st->id, sizeof out->store_id);
    memcpy(out->filename, f->filename, sizeof out->filename);
    memcpy(out->error_code, f->error_code, sizeof out->error_code);
    memcpy(out->error, f->error, sizeof out->error);
    return kb_attrs_copy(&out->attrs, f->attrs.a, f->attrs.n);
}

void kb_sfile_free(struct kb_sfile *f) {
    if (f) kb_attrs_free(&f->attrs);
}

/* The text of a file's bytes: valid UTF-8 (a byte-order mark dropped),
 * with no NUL; else why not, into err. */
static bool as_text(char **data, size_t *len, char *code, size_t code_len, char *why, size_t why_len) {
    const uint8_t *p = (const uint8_t *)*data;
    size_t n = *len, at = 0;
    if (n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) at = 3;
    for (size_t i = at; i < n;) {
        size_t k = p[i] ? utf8_valid_seq(p + i, n - i) : 0;
        if (!k) {
            snprintf(code, code_len, "unsupported_file");
            snprintf(why, why_len, "The file is not UTF-8 text (byte %zu); kvik reads text files only.", i);
            return false;
        }
        i += k;
    }
    memmove(*data, *data + at, n - at + 1);
    *len = n - at;
    return true;
}

struct chunked {
    struct chunk_span *span;
    int64_t n;
    float *vec; /* [n][dim] */
};

/* Cuts text into chunks and embeds them, cfg->embed_batch at a time. */
static kvik_status chunk_and_embed(struct kb *kb, const char *text, size_t len, const struct kb_chunking *c,
                                   struct chunked *out, struct kvik_err *err) {
    *out = (struct chunked){0};
    int64_t n = chunk_text(kb->cfg.tok, text, len, c->max_tokens, c->overlap, &out->span, err);
    if (n < 0) return (kvik_status)n;
    out->n = n;
    size_t dim = (size_t)kb->cfg.dim;
    if (n && !(out->vec = malloc((size_t)n * dim * sizeof *out->vec))) return nomem(err);
    int b = kb->cfg.embed_batch;
    const char **texts = malloc((size_t)b * sizeof *texts);
    size_t *lens = malloc((size_t)b * sizeof *lens);
    kvik_status s = texts && lens ? KVIK_OK : nomem(err);
    for (int64_t i = 0; !s && i < n; i += b) {
        int m = (int)(n - i < b ? n - i : b);
        for (int k = 0; k < m; k++) {
            texts[k] = text + out->span[i + k].off;
            lens[k] = out->span[i + k].len;
        }
        s = kb->cfg.embed(kb->cfg.embed_ctx, m, texts, lens, out->vec + (size_t)i * dim, err);
    }
    free(texts);
    free(lens);
    return s;
}

static void chunked_free(struct chunked *c) {
    free(c->span);
    free(c->vec);
}

kvik_status kb_store_add_file(struct kb *kb, const struct kb_tenant *t, const char *store_id, const char *file_id,
                              const struct kb_attrs *attrs, const struct kb_chunking *chunking,
                              struct kb_sfile *out, struct kvik_err *err) {
    struct kb_chunking c = chunking ? *chunking : (struct kb_chunking){800, 400};
    if (c.max_tokens < 100 || c.max_tokens > 4096 || c.overlap < 0 || c.overlap > c.max_tokens / 2)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "chunking_strategy: max_chunk_size_tokens must be 100 to 4096 and chunk_overlap_tokens 0 to "
                       "half of it (got %d and %d)",
                       c.max_tokens, c.overlap);
    if (!kb->cfg.tok) return err_set(err, KVIK_ERR_UNSUPPORTED, "knowledge base: no tokenizer to cut files with");
    kvik_status s = kb_attrs_check(attrs, false, err);
    if (s) return s;
    /* what the store and the file are, now */
    char filename[KB_NAME] = "";
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, store_id);
    struct kb_fl *fl = st ? kb_find_file(kb, t, file_id) : NULL;
    if (!st) s = not_found(err, "vector store", store_id);
    else if (!fl) s = not_found(err, "file", file_id);
    else if (kb_store_expired(st, now_s()))
        s = err_set(err, KVIK_ERR_INVALID_ARG, "The vector store '%s' has expired.", store_id);
    else memcpy(filename, fl->info.filename, sizeof filename);
    pthread_rwlock_unlock(&kb->lock);
    if (s) return s;
    char *data = NULL;
    size_t len = 0;
    if ((s = kb_file_content(kb, t, file_id, &data, &len, err))) return s;
    /* the slow part, outside the lock: chunks and their vectors */
    char code[32] = "", why[200] = "";
    struct chunked ch = {0};
    if (as_text(&data, &len, code, sizeof code, why, sizeof why)) {
        struct kvik_err e = {0};
        s = chunk_and_embed(kb, data, len, &c, &ch, &e);
        if (s == KVIK_ERR_NOMEM) {
            free(data);
            chunked_free(&ch);
            return err_set(err, s, "%s", e.msg);
        }
        if (s) {
            snprintf(code, sizeof code, "server_error");
            snprintf(why, sizeof why, "%.190s", e.msg);
            chunked_free(&ch);
            ch = (struct chunked){0};
            s = KVIK_OK;
        }
    }
    int64_t now = now_s();
    struct wbuf w = {0};
    put_ids(&w, R_SFILE, t, store_id, file_id);
    wbuf_str(&w, filename, strlen(filename));
    wbuf_u64(&w, (uint64_t)now);
    wbuf_u8(&w, code[0] ? KB_SFILE_FAILED : KB_SFILE_COMPLETED);
    wbuf_str(&w, code, strlen(code));
    wbuf_str(&w, why, strlen(why));
    wbuf_u32(&w, (uint32_t)c.max_tokens);
    wbuf_u32(&w, (uint32_t)c.overlap);
    kb_put_attrs(&w, attrs);
    size_t first_at = w.n; /* the chunks' first id: set under the lock */
    wbuf_u64(&w, 0);
    wbuf_u64(&w, (uint64_t)ch.n);
    for (int64_t i = 0; i < ch.n; i++) {
        wbuf_str(&w, data + ch.span[i].off, ch.span[i].len);
        wbuf_bytes(&w, ch.vec + (size_t)i * (size_t)kb->cfg.dim, (size_t)kb->cfg.dim * sizeof(float));
    }
    free(data);
    chunked_free(&ch);
    pthread_rwlock_wrlock(&kb->lock);
    st = kb_find_store(kb, t, store_id); /* it may have gone meanwhile */
    if (!st) {
        s = not_found(err, "vector store", store_id);
    } else {
        if (!w.fail) memcpy(w.p + first_at, &st->next, 8);
        s = kb_commit(kb, &w, err);
        struct kb_sf *f = s ? NULL : kb_find_sf(st, file_id, NULL);
        if (f && out && !sf_info(st, f, out)) s = nomem(err);
    }
    pthread_rwlock_unlock(&kb->lock);
    wbuf_free(&w);
    return s;
}

kvik_status kb_store_file_get(struct kb *kb, const struct kb_tenant *t, const char *store_id, const char *file_id,
                              struct kb_sfile *out, struct kvik_err *err) {
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, store_id);
    struct kb_sf *f = st ? kb_find_sf(st, file_id, NULL) : NULL;
    kvik_status s = !st ? not_found(err, "vector store", store_id)
                  : !f  ? not_found(err, "file in this vector store", file_id)
                  : sf_info(st, f, out) ? KVIK_OK
                                        : nomem(err);
    pthread_rwlock_unlock(&kb->lock);
    return s;
}

int64_t kb_store_file_list(struct kb *kb, const struct kb_tenant *t, const char *store_id, struct kb_sfile **out,
                           struct kvik_err *err) {
    *out = NULL;
    pthread_rwlock_rdlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, store_id);
    if (!st) {
        pthread_rwlock_unlock(&kb->lock);
        return not_found(err, "vector store", store_id);
    }
    struct kb_sfile *a = calloc((size_t)(st->n_sf ? st->n_sf : 1), sizeof *a);
    int64_t *order = kb_seq_order(st->sf, st->n_sf, kb_sf_seq);
    int64_t n = 0;
    bool ok = a && order;
    for (int64_t k = 0; ok && k < st->n_sf; k++)
        if (st->sf[order[k]]) ok = sf_info(st, st->sf[order[k]], &a[n++]);
    pthread_rwlock_unlock(&kb->lock);
    free(order);
    if (!ok) {
        for (int64_t i = 0; a && i < n; i++) kb_sfile_free(&a[i]);
        free(a);
        return nomem(err);
    }
    *out = a;
    return n;
}

kvik_status kb_store_file_update(struct kb *kb, const struct kb_tenant *t, const char *store_id,
                                 const char *file_id, const struct kb_attrs *attrs, struct kb_sfile *out,
                                 struct kvik_err *err) {
    kvik_status s = kb_attrs_check(attrs, false, err);
    if (s) return s;
    struct wbuf w = {0};
    put_ids(&w, R_SFILE_SET, t, store_id, file_id);
    kb_put_attrs(&w, attrs);
    pthread_rwlock_wrlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, store_id);
    struct kb_sf *f = st ? kb_find_sf(st, file_id, NULL) : NULL;
    if (!st) s = not_found(err, "vector store", store_id);
    else if (!f) s = not_found(err, "file in this vector store", file_id);
    else s = kb_commit(kb, &w, err);
    if (!s && out && !sf_info(st, f, out)) s = nomem(err);
    pthread_rwlock_unlock(&kb->lock);
    wbuf_free(&w);
    return s;
}

kvik_status kb_store_file_delete(struct kb *kb, const struct kb_tenant *t, const char *store_id,
                                 const char *file_id, struct kvik_err *err) {
    struct wbuf w = {0};
    put_ids(&w, R_SFILE_DEL, t, store_id, file_id);
    pthread_rwlock_wrlock(&kb->lock);
    struct kb_st *st = kb_find_store(kb, t, store_id);
    kvik_status s = !st                           ? not_found(err, "vector store", store_id)
                  : !kb_find_sf(st, file_id, NULL) ? not_found(err, "file in this vector store", file_id)
                                                  : kb_commit(kb, &w, err);
    pthread_rwlock_unlock(&kb->lock);
    wbuf_free(&w);
    return s;
}
