/*
 * imatrix_file.c — reading and writing importance-matrix files.
 *
 * A file whose first four bytes are "GGUF" is read as the GGUF format
 * (through the validating GGUF reader), anything else as the legacy one.
 *
 * The legacy layout, all integers int32 little-endian:
 *
 *   offset      field
 *   0           n_entries (>= 1)
 *   per entry:  name_len (1..GGUF_MAX_NAME), name bytes, ncall (>= 0),
 *               nval (>= 1), nval float32 values
 *   optional:   chunk count, then optional dataset_len (>= 0) and its bytes
 *
 * Every length is checked against the bytes left before it is used.
 */
#include "tools/imatrix_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tensor/tensor.h"

void imatrix_free(struct imatrix *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n_entries; i++) {
        free(m->entries[i].name);
        free(m->entries[i].sums);
        free(m->entries[i].counts);
    }
    free(m->entries);
    for (int64_t i = 0; i < m->n_datasets; i++) free(m->datasets[i]);
    free(m->datasets);
    memset(m, 0, sizeof *m);
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const struct imatrix_entry *)a)->name, ((const struct imatrix_entry *)b)->name);
}

/* Adds a dataset name; false when out of memory. */
static bool add_dataset(struct imatrix *m, const char *s, size_t n) {
    char **d = realloc(m->datasets, sizeof *d * (size_t)(m->n_datasets + 1));
    if (!d) return false;
    m->datasets = d;
    if (!(d[m->n_datasets] = dup_n(s, n))) return false;
    m->n_datasets++;
    return true;
}

/* Sorts the entries by name and rejects a name that occurs twice. */
static kvik_status finish_entries(struct imatrix *m, struct kvik_err *err) {
    qsort(m->entries, (size_t)m->n_entries, sizeof *m->entries, entry_cmp);
    for (int64_t i = 1; i < m->n_entries; i++)
        if (!strcmp(m->entries[i - 1].name, m->entries[i].name))
            return err_set(err, KVIK_ERR_FORMAT, "imatrix: entry '%s' occurs twice", m->entries[i].name);
    return KVIK_OK;
}

/* ---- legacy -------------------------------------------------------------- */

struct reader {
    const uint8_t *p;
    size_t left;
};

static bool read_i32(struct reader *r, int32_t *v) {
    if (r->left < 4) return false;
    memcpy(v, r->p, 4);
    r->p += 4;
    r->left -= 4;
    return true;
}

static kvik_status load_legacy(const uint8_t *data, size_t size, struct imatrix *m, struct kvik_err *err) {
    struct reader r = {data, size};
    int32_t n;
    if (!read_i32(&r, &n) || n < 1) return err_set(err, KVIK_ERR_FORMAT, "imatrix: no entries (legacy format)");
    /* each entry takes at least 16 bytes: a bound before allocating */
    if ((size_t)n > r.left / 16)
        return err_set(err, KVIK_ERR_FORMAT, "imatrix: %d entries do not fit in %zu bytes", n, size);
    m->entries = calloc((size_t)n, sizeof *m->entries);
    if (!m->entries) return err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
    m->legacy = true;
    for (int32_t i = 0; i < n; i++) {
        int32_t len, ncall, nval;
        if (!read_i32(&r, &len) || len < 1 || len > GGUF_MAX_NAME || (size_t)len > r.left)
            return err_set(err, KVIK_ERR_FORMAT, "imatrix: entry %d: bad name length at byte %zu", i,
                           size - r.left);
        struct imatrix_entry *e = &m->entries[m->n_entries];
        if (memchr(r.p, 0, (size_t)len))
            return err_set(err, KVIK_ERR_FORMAT, "imatrix: entry %d: the name holds a NUL byte", i);
        if (!(e->name = dup_n((const char *)r.p, (size_t)len)))
            return err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
        m->n_entries++;
        r.p += len;
        r.left -= (size_t)len;
        if (!read_i32(&r, &ncall) || !read_i32(&r, &nval) || ncall < 0 || nval < 1 ||
            (size_t)nval > r.left / 4)
            return err_set(err, KVIK_ERR_FORMAT, "imatrix: entry '%s': bad call or value count", e->name);
        e->n_cols = nval;
        e->n_mat = 1;
        e->sums = malloc(sizeof(float) * (size_t)nval);
        e->counts = malloc(sizeof(int64_t));
        if (!e->sums || !e->counts) return err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
        memcpy(e->sums, r.p, sizeof(float) * (size_t)nval);
        e->counts[0] = ncall;
        r.p += 4 * (size_t)nval;
        r.left -= 4 * (size_t)nval;
    }
    int32_t chunks, dlen;
    if (read_i32(&r, &chunks)) {
        m->chunk_count = chunks;
        if (read_i32(&r, &dlen) && dlen > 0) {
            if ((size_t)dlen > r.left)
                return err_set(err, KVIK_ERR_FORMAT, "imatrix: the dataset name runs past the end");
            size_t k = strnlen((const char *)r.p, (size_t)dlen);
            if (!add_dataset(m, (const char *)r.p, k)) return err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
        }
    }
    return finish_entries(m, err);
}

/* ---- GGUF ------------------------------------------------------------------ */

static const char SUM_SUFFIX[] = ".in_sum2";
static const char COUNT_SUFFIX[] = ".counts";

/* Length of name without suffix when it ends with it, else 0. */
static size_t strip(const char *name, const char *suffix) {
    size_t n = strlen(name), s = strlen(suffix);
    return n > s && !memcmp(name + n - s, suffix, s) ? n - s : 0;
}

static kvik_status load_entry(const struct gguf_tensor *sum, const struct gguf_tensor *cnt,
                              struct imatrix_entry *e, struct kvik_err *err) {
    if (sum->type != TENSOR_TYPE_F32 || cnt->type != TENSOR_TYPE_F32)
        return err_set(err, KVIK_ERR_FORMAT, "imatrix: sums and counts of '%s' must be F32", e->name);
    int64_t nc = cnt->n_elems;
    if (sum->n_elems % nc)
        return err_set(err, KVIK_ERR_FORMAT, "imatrix: '%s' has %lld sums for %lld counts", e->name,
                       (long long)sum->n_elems, (long long)nc);
    e->n_mat = nc;
    e->n_cols = sum->n_elems / nc;
    e->sums = malloc(sizeof(float) * (size_t)sum->n_elems);
    e->counts = malloc(sizeof(int64_t) * (size_t)nc);
    if (!e->sums || !e->counts) return err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
    memcpy(e->sums, sum->data, sizeof(float) * (size_t)sum->n_elems);
    for (int64_t j = 0; j < nc; j++) {
        float c;
        memcpy(&c, (const uint8_t *)cnt->data + 4 * j, 4);
        /* token counts: whole, non-negative and exact in a float */
        if (!(c >= 0.0f && c <= 16777216.0f))
            return err_set(err, KVIK_ERR_FORMAT, "imatrix: '%s' has a bad count", e->name);
        e->counts[j] = lroundf(c);
    }
    return KVIK_OK;
}

static kvik_status load_gguf(const struct gguf *g, struct imatrix *m, struct kvik_err *err) {
    int64_t nt = gguf_n_tensors(g);
    m->entries = calloc((size_t)nt + 1, sizeof *m->entries);
    if (!m->entries) return err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
    for (int64_t i = 0; i < nt; i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        size_t base = strip(t->name, SUM_SUFFIX);
        if (base) {
            char *name = dup_n(t->name, base);
            if (!name) return err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
            struct imatrix_entry *e = &m->entries[m->n_entries++];
            e->name = name;
            char cname[GGUF_MAX_NAME + sizeof COUNT_SUFFIX];
            snprintf(cname, sizeof cname, "%s%s", name, COUNT_SUFFIX);
            int64_t ci = gguf_find_tensor(g, cname);
            if (ci < 0) return err_set(err, KVIK_ERR_FORMAT, "imatrix: '%s' has sums but no counts", name);
            kvik_status st = load_entry(t, gguf_tensor(g, ci), e, err);
            if (st != KVIK_OK) return st;
        } else if ((base = strip(t->name, COUNT_SUFFIX))) {
            char sname[GGUF_MAX_NAME + sizeof SUM_SUFFIX];
            snprintf(sname, sizeof sname, "%.*s%s", (int)base, t->name, SUM_SUFFIX);
            if (gguf_find_tensor(g, sname) < 0)
                return err_set(err, KVIK_ERR_FORMAT, "imatrix: '%.*s' has counts but no sums", (int)base, t->name);
        }
    }
    if (m->n_entries == 0) return err_set(err, KVIK_ERR_FORMAT, "imatrix: the file holds no entries");

    const struct gguf_value *ds;
    bool have_ds = gguf_get_arr(g, "imatrix.datasets", GGUF_TYPE_STRING, &ds, NULL) == KVIK_OK;
    if (have_ds)
        for (uint64_t i = 0; i < gguf_arr_len(ds); i++) {
            struct gguf_str s = gguf_arr_str(ds, i);
            if (!add_dataset(m, s.ptr, (size_t)s.len)) return err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
        }
    uint32_t v;
    bool have_cc = gguf_get_u32(g, "imatrix.chunk_count", &v, NULL) == KVIK_OK;
    if (have_cc) m->chunk_count = (int32_t)v;
    bool have_cs = gguf_get_u32(g, "imatrix.chunk_size", &v, NULL) == KVIK_OK;
    if (have_cs) m->chunk_size = (int32_t)v;
    m->has_metadata = have_ds && have_cc && have_cs;
    return finish_entries(m, err);
}

kvik_status imatrix_load_memory(const void *data, size_t size, struct imatrix *out, struct kvik_err *err) {
    memset(out, 0, sizeof *out);
    kvik_status st;
    if (size >= 4 && !memcmp(data, GGUF_MAGIC, 4)) {
        struct gguf *g;
        st = gguf_open_memory(data, size, &g, err);
        if (st != KVIK_OK) return st;
        st = load_gguf(g, out, err);
        gguf_close(g);
    } else {
        st = load_legacy(data, size, out, err);
    }
    if (st != KVIK_OK) imatrix_free(out);
    return st;
}

kvik_status imatrix_load(const char *path, struct imatrix *out, struct kvik_err *err) {
    memset(out, 0, sizeof *out);
    struct mapped_file mf;
    kvik_status st = file_map(&mf, path, err);
    if (st != KVIK_OK) return st;
    st = imatrix_load_memory(mf.data, mf.size, out, err);
    file_unmap(&mf);
    if (st != KVIK_OK && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        err_set(err, st, "%s: %s", path, msg);
    }
    return st;
}

/* ---- writing and lookup ----------------------------------------------------- */

kvik_status imatrix_save(const struct imatrix *m, const char *path, struct kvik_err *err) {
    struct gguf_writer *w = gguf_writer_new();
    float **counts = calloc((size_t)m->n_entries + 1, sizeof *counts);
    kvik_status st = w && counts ? KVIK_OK : err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
    if (st == KVIK_OK) st = gguf_writer_set_str(w, "general.type", "imatrix");
    if (st == KVIK_OK)
        st = gguf_writer_set_arr_str(w, "imatrix.datasets", (const char *const *)m->datasets, (uint64_t)m->n_datasets);
    if (st == KVIK_OK) st = gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)m->chunk_count);
    if (st == KVIK_OK) st = gguf_writer_set_u32(w, "imatrix.chunk_size", (uint32_t)m->chunk_size);
    /* entries in name order, as llama.cpp writes them */
    const struct imatrix_entry **order = calloc((size_t)m->n_entries + 1, sizeof *order);
    if (st == KVIK_OK && !order) st = err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
    for (int64_t i = 0; st == KVIK_OK && i < m->n_entries; i++) order[i] = &m->entries[i];
    for (int64_t i = 1; st == KVIK_OK && i < m->n_entries; i++)
        for (int64_t j = i; j > 0 && strcmp(order[j - 1]->name, order[j]->name) > 0; j--) {
            const struct imatrix_entry *t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int64_t i = 0; st == KVIK_OK && i < m->n_entries; i++) {
        const struct imatrix_entry *e = order[i];
        char name[GGUF_MAX_NAME + 16];
        if (strlen(e->name) + sizeof SUM_SUFFIX > GGUF_MAX_NAME) {
            st = err_set(err, KVIK_ERR_INVALID_ARG, "imatrix: name '%.40s...' is too long", e->name);
            break;
        }
        if (!(counts[i] = malloc(sizeof(float) * (size_t)e->n_mat))) {
            st = err_set(err, KVIK_ERR_NOMEM, "imatrix: out of memory");
            break;
        }
        for (int64_t j = 0; j < e->n_mat; j++) counts[i][j] = (float)e->counts[j];
        int64_t ne_s[2] = {e->n_cols, e->n_mat}, ne_c[2] = {1, e->n_mat};
        snprintf(name, sizeof name, "%s%s", e->name, SUM_SUFFIX);
        st = gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 2, ne_s, e->sums);
        snprintf(name, sizeof name, "%s%s", e->name, COUNT_SUFFIX);
        if (st == KVIK_OK) st = gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 2, ne_c, counts[i]);
        if (st != KVIK_OK) err_set(err, st, "imatrix: cannot add '%s'", e->name);
    }
    char tmp[4096];
    if (st == KVIK_OK && snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        st = err_set(err, KVIK_ERR_INVALID_ARG, "imatrix: output path is too long");
    if (st == KVIK_OK) {
        st = gguf_writer_write_file(w, tmp, err);
        if (st == KVIK_OK && rename(tmp, path) != 0) st = err_set(err, KVIK_ERR_IO, "%s: cannot rename", path);
        if (st != KVIK_OK) remove(tmp);
    }
    for (int64_t i = 0; counts && i < m->n_entries; i++) free(counts[i]);
    free(counts);
    free(order);
    gguf_writer_free(w);
    return st;
}

const struct imatrix_entry *imatrix_find(const struct imatrix *m, const char *name) {
    int64_t lo = 0, hi = m->n_entries;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->entries[mid].name, name);
        if (c == 0) return &m->entries[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void imatrix_weights(const struct imatrix_entry *e, int64_t mat, bool legacy, float *out) {
    const float *s = e->sums + mat * e->n_cols;
    float c = (float)e->counts[mat];
    if (legacy) {
        for (int64_t i = 0; i < e->n_cols; i++) out[i] = c > 0 ? s[i] / c : s[i];
    } else {
        for (int64_t i = 0; i < e->n_cols; i++) out[i] = c > 0 ? s[i] / c : 1.0f;
    }
}
