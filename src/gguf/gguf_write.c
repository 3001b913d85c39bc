/*
 * gguf_write.c — builds GGUF v3 files: metadata of every value type
 * (including nested arrays), tensor infos and aligned tensor data, written
 * to a path, a FILE* or a malloc'ed buffer. Values are encoded as they are
 * set, so writing is a straight copy; tensor data is borrowed until then,
 * or produced at write time by a fill callback, GGUF_FILL_CHUNK bytes at a
 * time, so a file larger than memory streams through one bounded buffer.
 * The writer refuses (KVIK_ERR_INVALID_ARG) anything the reader would
 * reject, so every file it writes opens again.
 */
#include <errno.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "tensor/tensor.h"

/* ---- growable byte buffer ------------------------------------------------- */

struct buf {
    uint8_t *p; /* [cap] */
    size_t len, cap;
};

static bool buf_reserve(struct buf *b, uint64_t extra) {
    if (extra > SIZE_MAX / 2 - b->len) return false;
    size_t need = b->len + (size_t)extra;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool buf_put(struct buf *b, const void *p, uint64_t n) {
    if (!buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->len, p, (size_t)n);
    b->len += (size_t)n;
    return true;
}

static bool buf_put_le(struct buf *b, uint64_t v, int n) {
    uint8_t tmp[8];
    for (int i = 0; i < n; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    return buf_put(b, tmp, (uint64_t)n);
}

static bool buf_put_str(struct buf *b, const void *s, uint64_t len) {
    return buf_put_le(b, len, 8) && buf_put(b, s, len);
}

/* ---- the writer ------------------------------------------------------------ */

struct wkv {
    char *key;       /* NUL-terminated, owned */
    uint32_t type;   /* enum gguf_type */
    struct buf val;  /* the encoded value (what follows the type field) */
};

struct wtensor {
    char *name;                /* NUL-terminated, owned */
    int type;                  /* enum tensor_type */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t n_bytes;
    const void *data;          /* [n_bytes], borrowed; NULL: zeros (unless fill) */
    gguf_tensor_fill_fn fill;  /* produces the rows at write time; NULL: data */
    void *fill_user;           /* fill's first argument */
};

struct gguf_writer {
    struct wkv *kvs;           /* [n_kv] in the order first set */
    size_t n_kv, cap_kv;
    struct wtensor *tensors;   /* [n_tensors] in the order added */
    size_t n_tensors, cap_tensors;
};

struct gguf_warr {
    enum gguf_type elem_type;
    uint64_t n;                /* elements so far */
    int depth;                 /* 1 + depth of the deepest element array */
    struct buf body;           /* the encoded elements */
};

struct gguf_writer *gguf_writer_new(void) { return calloc(1, sizeof(struct gguf_writer)); }

void gguf_writer_free(struct gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].val.p);
    }
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w);
}

static bool name_ok(const char *s) {
    if (!s) return false;
    size_t n = strnlen(s, GGUF_MAX_NAME + 1);
    return n >= 1 && n <= GGUF_MAX_NAME;
}

/* Stores key = (type, encoded value), taking ownership of val's memory. */
static kvik_status set_encoded(struct gguf_writer *w, const char *key, uint32_t type,
                               struct buf *val) {
    if (!w || !name_ok(key)) {
        free(val->p);
        return KVIK_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, key) == 0) { /* replace in place */
            free(w->kvs[i].val.p);
            w->kvs[i].type = type;
            w->kvs[i].val = *val;
            return KVIK_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        struct wkv *kvs = realloc(w->kvs, cap * sizeof *kvs);
        if (!kvs) goto nomem;
        w->kvs = kvs;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) goto nomem;
    w->kvs[w->n_kv++] = (struct wkv){k, type, *val};
    return KVIK_OK;
nomem:
    free(val->p);
    return KVIK_ERR_NOMEM;
}

static kvik_status set_scalar(struct gguf_writer *w, const char *key, enum gguf_type type,
                              uint64_t bits) {
    struct buf b = {0};
    if (!buf_put_le(&b, bits, (int)gguf_type_size(type))) return KVIK_ERR_NOMEM;
    return set_encoded(w, key, type, &b);
}

kvik_status gguf_writer_set_u8(struct gguf_writer *w, const char *key, uint8_t v) {
    return set_scalar(w, key, GGUF_TYPE_UINT8, v);
}
kvik_status gguf_writer_set_i8(struct gguf_writer *w, const char *key, int8_t v) {
    return set_scalar(w, key, GGUF_TYPE_INT8, (uint8_t)v);
}
kvik_status gguf_writer_set_u16(struct gguf_writer *w, const char *key, uint16_t v) {
    return set_scalar(w, key, GGUF_TYPE_UINT16, v);
}
kvik_status gguf_writer_set_i16(struct gguf_writer *w, const char *key, int16_t v) {
    return set_scalar(w, key, GGUF_TYPE_INT16, (uint16_t)v);
}
kvik_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, GGUF_TYPE_UINT32, v);
}
kvik_status gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, GGUF_TYPE_INT32, (uint32_t)v);
}
kvik_status gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, GGUF_TYPE_UINT64, v);
}
kvik_status gguf_writer_set_i64(struct gguf_writer *w, const char *key, int64_t v) {
    return set_scalar(w, key, GGUF_TYPE_INT64, (uint64_t)v);
}
kvik_status gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, GGUF_TYPE_FLOAT32, f32_to_bits(v));
}
kvik_status gguf_writer_set_f64(struct gguf_writer *w, const char *key, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return set_scalar(w, key, GGUF_TYPE_FLOAT64, bits);
}
kvik_status gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v) {
    return set_scalar(w, key, GGUF_TYPE_BOOL, v ? 1 : 0);
}

kvik_status gguf_writer_set_strn(struct gguf_writer *w, const char *key, const char *s,
                                 uint64_t len) {
    if (!s && len) return KVIK_ERR_INVALID_ARG;
    struct buf b = {0};
    if (!buf_put_str(&b, s, len)) {
        free(b.p);
        return KVIK_ERR_NOMEM;
    }
    return set_encoded(w, key, GGUF_TYPE_STRING, &b);
}

kvik_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s) {
    if (!s) return KVIK_ERR_INVALID_ARG;
    return gguf_writer_set_strn(w, key, s, strlen(s));
}

kvik_status gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment) {
    if (!w || alignment == 0 || (alignment & (alignment - 1))) return KVIK_ERR_INVALID_ARG;
    bool present = false;
    for (size_t i = 0; i < w->n_kv; i++) present |= !strcmp(w->kvs[i].key, "general.alignment");
    if (alignment == GGUF_DEFAULT_ALIGNMENT && !present) return KVIK_OK;
    return gguf_writer_set_u32(w, "general.alignment", alignment);
}

/* Checks that n elements of a fixed-size type are valid (bools are 0/1). */
static bool elems_ok(enum gguf_type type, const void *data, uint64_t n) {
    size_t sz = gguf_type_size(type);
    uint64_t bytes;
    if (!sz || (!data && n) || mul_overflows_u64(n, sz, &bytes)) return false;
    if (type == GGUF_TYPE_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1) return false;
    return true;
}

kvik_status gguf_writer_set_arr_data(struct gguf_writer *w, const char *key, enum gguf_type type,
                                     const void *data, uint64_t n) {
    if (!elems_ok(type, data, n)) return KVIK_ERR_INVALID_ARG;
    struct buf b = {0};
    if (!buf_put_le(&b, type, 4) || !buf_put_le(&b, n, 8) ||
        !buf_put(&b, data, n * gguf_type_size(type))) {
        free(b.p);
        return KVIK_ERR_NOMEM;
    }
    return set_encoded(w, key, GGUF_TYPE_ARRAY, &b);
}

kvik_status gguf_writer_set_arr_str(struct gguf_writer *w, const char *key,
                                    const char *const *strs, uint64_t n) {
    if (!strs && n) return KVIK_ERR_INVALID_ARG;
    for (uint64_t i = 0; i < n; i++)
        if (!strs[i]) return KVIK_ERR_INVALID_ARG;
    struct buf b = {0};
    bool ok = buf_put_le(&b, GGUF_TYPE_STRING, 4) && buf_put_le(&b, n, 8);
    for (uint64_t i = 0; ok && i < n; i++) ok = buf_put_str(&b, strs[i], strlen(strs[i]));
    if (!ok) {
        free(b.p);
        return KVIK_ERR_NOMEM;
    }
    return set_encoded(w, key, GGUF_TYPE_ARRAY, &b);
}

kvik_status gguf_writer_set_arr(struct gguf_writer *w, const char *key, const struct gguf_warr *a) {
    if (!a) return KVIK_ERR_INVALID_ARG;
    struct buf b = {0};
    if (!buf_put_le(&b, a->elem_type, 4) || !buf_put_le(&b, a->n, 8) ||
        !buf_put(&b, a->body.p, a->body.len)) {
        free(b.p);
        return KVIK_ERR_NOMEM;
    }
    return set_encoded(w, key, GGUF_TYPE_ARRAY, &b);
}

kvik_status gguf_writer_set_value(struct gguf_writer *w, const char *key,
                                  const struct gguf_value *v) {
    if (!v || (unsigned)v->type >= GGUF_TYPE_COUNT) return KVIK_ERR_INVALID_ARG;
    struct buf b = {0};
    bool ok = true;
    if (v->type == GGUF_TYPE_STRING) ok = buf_put_le(&b, v->n, 8);
    if (v->type == GGUF_TYPE_ARRAY) ok = buf_put_le(&b, v->elem_type, 4) && buf_put_le(&b, v->n, 8);
    if (!ok || !buf_put(&b, v->p, v->nbytes)) {
        free(b.p);
        return KVIK_ERR_NOMEM;
    }
    return set_encoded(w, key, v->type, &b);
}

/* ---- array builder ----------------------------------------------------------- */

struct gguf_warr *gguf_warr_new(enum gguf_type elem_type) {
    if ((unsigned)elem_type >= GGUF_TYPE_COUNT) return NULL;
    struct gguf_warr *a = calloc(1, sizeof *a);
    if (a) {
        a->elem_type = elem_type;
        a->depth = 1;
    }
    return a;
}

void gguf_warr_free(struct gguf_warr *a) {
    if (!a) return;
    free(a->body.p);
    free(a);
}

kvik_status gguf_warr_add_data(struct gguf_warr *a, const void *data, uint64_t n) {
    if (!a || !elems_ok(a->elem_type, data, n)) return KVIK_ERR_INVALID_ARG;
    if (!buf_put(&a->body, data, n * gguf_type_size(a->elem_type))) return KVIK_ERR_NOMEM;
    a->n += n;
    return KVIK_OK;
}

kvik_status gguf_warr_add_str(struct gguf_warr *a, const char *s, uint64_t len) {
    if (!a || a->elem_type != GGUF_TYPE_STRING || (!s && len)) return KVIK_ERR_INVALID_ARG;
    if (!buf_put_str(&a->body, s, len)) return KVIK_ERR_NOMEM;
    a->n++;
    return KVIK_OK;
}

kvik_status gguf_warr_add_arr(struct gguf_warr *a, const struct gguf_warr *sub) {
    if (!a || !sub || a == sub || a->elem_type != GGUF_TYPE_ARRAY) return KVIK_ERR_INVALID_ARG;
    if (sub->depth + 1 > GGUF_MAX_DEPTH) return KVIK_ERR_INVALID_ARG;
    size_t before = a->body.len;
    if (!buf_put_le(&a->body, sub->elem_type, 4) || !buf_put_le(&a->body, sub->n, 8) ||
        !buf_put(&a->body, sub->body.p, sub->body.len)) {
        a->body.len = before;
        return KVIK_ERR_NOMEM;
    }
    a->n++;
    if (sub->depth + 1 > a->depth) a->depth = sub->depth + 1;
    return KVIK_OK;
}

/* ---- tensors ---------------------------------------------------------------- */

/* Checks and appends a tensor whose bytes come from t's data or fill. */
static kvik_status add_tensor(struct gguf_writer *w, const char *name, int n_dims,
                              const int64_t *ne, struct wtensor t) {
    int type = t.type;
    const struct type_traits *tt = tensor_type_traits(type);
    if (!w || !name_ok(name) || !tt || !tt->name || tt->block_size <= 0 || !tt->type_size ||
        n_dims < 1 || n_dims > GGUF_MAX_DIMS || !ne)
        return KVIK_ERR_INVALID_ARG;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name)) return KVIK_ERR_INVALID_ARG;
    t.n_dims = n_dims;
    int64_t n_elems = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 1 || __builtin_mul_overflow(n_elems, t.ne[d], &n_elems))
            return KVIK_ERR_INVALID_ARG;
    }
    if (t.ne[0] % tt->block_size) return KVIK_ERR_INVALID_ARG;
    uint64_t bytes = (uint64_t)(t.ne[0] / tt->block_size);
    bool over = mul_overflows_u64(bytes, tt->type_size, &bytes);
    for (int d = 1; d < GGUF_MAX_DIMS; d++)
        over = over || mul_overflows_u64(bytes, (uint64_t)t.ne[d], &bytes);
    if (over || bytes > SIZE_MAX / 2) return KVIK_ERR_INVALID_ARG;
    t.n_bytes = bytes;
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
        struct wtensor *ts = realloc(w->tensors, cap * sizeof *ts);
        if (!ts) return KVIK_ERR_NOMEM;
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    if (!(t.name = strdup(name))) return KVIK_ERR_NOMEM;
    w->tensors[w->n_tensors++] = t;
    return KVIK_OK;
}

kvik_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, int type, int n_dims,
                                   const int64_t *ne, const void *data) {
    return add_tensor(w, name, n_dims, ne, (struct wtensor){.type = type, .data = data});
}

kvik_status gguf_writer_add_tensor_fn(struct gguf_writer *w, const char *name, int type, int n_dims,
                                      const int64_t *ne, gguf_tensor_fill_fn fill, void *user) {
    if (!fill) return KVIK_ERR_INVALID_ARG;
    return add_tensor(w, name, n_dims, ne,
                      (struct wtensor){.type = type, .fill = fill, .fill_user = user});
}

/* ---- output ------------------------------------------------------------------ */

struct sink {
    FILE *f;         /* a stream, or */
    struct buf *mem; /* a buffer */
    bool failed;     /* a write failed (errno says why for streams) */
};

static void emit(struct sink *s, const void *p, uint64_t n) {
    if (s->failed || n == 0) return;
    if (s->f) s->failed = fwrite(p, 1, (size_t)n, s->f) != n;
    else s->failed = !buf_put(s->mem, p, n);
}

static void emit_zeros(struct sink *s, uint64_t n) {
    static const uint8_t zeros[4096];
    while (n && !s->failed) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        emit(s, zeros, k);
        n -= k;
    }
}

static void emit_le(struct sink *s, uint64_t v, int n) {
    uint8_t tmp[8];
    for (int i = 0; i < n; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    emit(s, tmp, (uint64_t)n);
}

static void emit_str(struct sink *s, const char *str) {
    uint64_t len = strlen(str);
    emit_le(s, len, 8);
    emit(s, str, len);
}

static uint64_t align_up(uint64_t x, uint32_t a) { return (x + a - 1) / a * a; }

/* The alignment the file will have: general.alignment if set (then it must
 * be a uint32 power of two), else 32. 0 if the key is unusable. */
static uint32_t writer_alignment(const struct gguf_writer *w) {
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, "general.alignment")) continue;
        if (w->kvs[i].type != GGUF_TYPE_UINT32) return 0;
        const uint8_t *p = w->kvs[i].val.p;
        uint32_t a = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
        return a && !(a & (a - 1)) ? a : 0;
    }
    return GGUF_DEFAULT_ALIGNMENT;
}

/* The chunk buffer fill callbacks write into, grown to the largest chunk. */
struct fill_buf {
    void *p;   /* [cap], 64-byte aligned */
    size_t cap;
};

/* Emits a filled tensor's rows, as many whole rows at a time as fit in
 * GGUF_FILL_CHUNK bytes (at least one). */
static kvik_status emit_filled(struct sink *s, const struct wtensor *t, struct fill_buf *fb,
                               struct kvik_err *err) {
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t row_bytes = (size_t)(t->n_bytes / (uint64_t)rows);
    int64_t chunk_rows = (int64_t)(GGUF_FILL_CHUNK / row_bytes);
    if (chunk_rows < 1) chunk_rows = 1;
    if (chunk_rows > rows) chunk_rows = rows;
    size_t need = (size_t)chunk_rows * row_bytes;
    if (need > fb->cap) {
        mem_free(fb->p);
        fb->cap = 0;
        if (!(fb->p = mem_alloc_aligned(need)))
            return err_set(err, KVIK_ERR_NOMEM, "gguf writer: out of memory (%zu bytes)", need);
        fb->cap = need;
    }
    for (int64_t r = 0; r < rows && !s->failed; r += chunk_rows) {
        int64_t n = rows - r < chunk_rows ? rows - r : chunk_rows;
        kvik_status st = t->fill(t->fill_user, fb->p, r, n, err);
        if (st) return st;
        emit(s, fb->p, (uint64_t)n * row_bytes);
    }
    return KVIK_OK;
}

static kvik_status write_all(struct gguf_writer *w, struct sink *s, struct kvik_err *err) {
    uint32_t align = writer_alignment(w);
    if (!align)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "gguf writer: general.alignment must be a uint32 power of two");
    uint64_t pos = 24;
    emit(s, GGUF_MAGIC, 4);
    emit_le(s, 3, 4);
    emit_le(s, w->n_tensors, 8);
    emit_le(s, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        emit_str(s, w->kvs[i].key);
        emit_le(s, w->kvs[i].type, 4);
        emit(s, w->kvs[i].val.p, w->kvs[i].val.len);
        pos += 8 + strlen(w->kvs[i].key) + 4 + w->kvs[i].val.len;
    }
    uint64_t offset = 0; /* of the next tensor in the data section */
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        emit_str(s, t->name);
        emit_le(s, (uint64_t)t->n_dims, 4);
        for (int d = 0; d < t->n_dims; d++) emit_le(s, (uint64_t)t->ne[d], 8);
        emit_le(s, (uint64_t)t->type, 4);
        emit_le(s, offset, 8);
        pos += 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
        offset = align_up(offset + t->n_bytes, align);
    }
    if (w->n_tensors) {
        emit_zeros(s, align_up(pos, align) - pos);
        struct fill_buf fb = {0};
        for (size_t i = 0; i < w->n_tensors; i++) {
            const struct wtensor *t = &w->tensors[i];
            kvik_status st = KVIK_OK;
            if (t->fill) st = emit_filled(s, t, &fb, err);
            else if (t->data) emit(s, t->data, t->n_bytes);
            else emit_zeros(s, t->n_bytes);
            if (st) {
                mem_free(fb.p);
                return st;
            }
            emit_zeros(s, align_up(t->n_bytes, align) - t->n_bytes);
        }
        mem_free(fb.p);
    }
    if (s->failed)
        return s->f ? err_set(err, KVIK_ERR_IO, "gguf writer: write failed: %s", strerror(errno))
                    : err_set(err, KVIK_ERR_NOMEM, "gguf writer: out of memory");
    return KVIK_OK;
}

kvik_status gguf_writer_write_stream(struct gguf_writer *w, FILE *f, struct kvik_err *err) {
    if (!w || !f) return err_set(err, KVIK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    struct sink s = {.f = f};
    return write_all(w, &s, err);
}

kvik_status gguf_writer_write_file(struct gguf_writer *w, const char *path, struct kvik_err *err) {
    if (!w || !path) return err_set(err, KVIK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    FILE *f = fopen(path, "wb");
    if (!f) return err_set(err, KVIK_ERR_IO, "%s: %s", path, strerror(errno));
    kvik_status st = gguf_writer_write_stream(w, f, err);
    if (fclose(f) != 0 && !st) st = err_set(err, KVIK_ERR_IO, "%s: %s", path, strerror(errno));
    return st;
}

kvik_status gguf_writer_write_memory(struct gguf_writer *w, void **out, size_t *out_size,
                                     struct kvik_err *err) {
    if (!w || !out || !out_size)
        return err_set(err, KVIK_ERR_INVALID_ARG, "gguf writer: NULL argument");
    struct buf b = {0};
    struct sink s = {.mem = &b};
    kvik_status st = write_all(w, &s, err);
    if (st) {
        free(b.p);
        return st;
    }
    *out = b.p;
    *out_size = b.len;
    return KVIK_OK;
}
