/*
 * gguf_read.c — opens and validates a GGUF v2/v3 file: header, metadata
 * (every value type, nested arrays), tensor infos and the data section.
 * Validation is complete at open time, so the accessors (gguf_get.c) never
 * need to check the file again. Every read is bounds-checked first; every
 * size computed from the file is checked for overflow; every failure names
 * the field and its byte offset.
 *
 * The format (all integers little-endian; offsets in bytes):
 *
 *   offset  size  field
 *   0       4     magic "GGUF" (47 47 55 46)
 *   4       4     u32 version: 2 or 3 (v1 had u32 counts; it is rejected)
 *   8       8     u64 n_tensors
 *   16      8     u64 n_kv
 *   24      ...   n_kv metadata pairs:
 *                   string key          (u64 len, then len bytes, no NUL)
 *                   u32 value type      (0..12, enum gguf_type)
 *                   value:
 *                     UINT8 INT8 BOOL        1 byte (BOOL is 0 or 1)
 *                     UINT16 INT16           2 bytes
 *                     UINT32 INT32 FLOAT32   4 bytes
 *                     UINT64 INT64 FLOAT64   8 bytes
 *                     STRING                 u64 len, len bytes
 *                     ARRAY                  u32 element type, u64 n, n elements
 *                                            (an element ARRAY is itself
 *                                            "u32 type, u64 n, elements")
 *   ...     ...   n_tensors tensor infos:
 *                   string name
 *                   u32 n_dims          (1..4)
 *                   u64 ne[n_dims]      (elements per dimension, ne[0] fastest)
 *                   u32 type            (ggml type id, enum tensor_type)
 *                   u64 offset          (into the data section; a multiple of
 *                                        the alignment)
 *   ...     ...   zero padding up to a multiple of the alignment
 *                 (general.alignment, u32, default 32)
 *   D       ...   data section: tensor bytes at D + offset. A file without
 *                 tensors may end right after the metadata.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "tensor/tensor.h"

/* Smallest encodings, used to bound counts by the bytes left in the file. */
#define MIN_KV_BYTES 14     /* key len 8 + key 1 + type 4 + u8 value 1 */
#define MIN_TENSOR_BYTES 33 /* name len 8 + name 1 + n_dims 4 + ne 8 + type 4 + offset 8 */
#define MIN_ARRAY_BYTES 12  /* element type 4 + count 8 */
#define MIN_STRING_BYTES 8  /* length 8 */

/* ---- allocation: bump chunks freed together by gguf_close ------------- */

struct gguf_chunk {
    struct gguf_chunk *next;
    size_t used, cap;
    max_align_t mem[];
};

#define CHUNK_BYTES ((size_t)64 * 1024)

/* Zeroed memory owned by g, or NULL (out of memory or overflow). */
static void *g_alloc(struct gguf *g, uint64_t n, size_t elem) {
    uint64_t size;
    if (mul_overflows_u64(n, elem, &size) || size > SIZE_MAX / 2) return NULL;
    size = (size + 15) & ~(uint64_t)15;
    if (size == 0) size = 16;
    struct gguf_chunk *c = g->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > CHUNK_BYTES / 4 ? (size_t)size : CHUNK_BYTES;
        c = calloc(1, sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        if (cap == CHUNK_BYTES || !g->chunks) {
            c->next = g->chunks; /* becomes the chunk to bump from */
            g->chunks = c;
        } else { /* a big one-off: keep bumping the current chunk */
            c->next = g->chunks->next;
            g->chunks->next = c;
        }
    }
    void *p = (char *)c->mem + c->used;
    c->used += (size_t)size;
    return p;
}

/* ---- hash sets of names (gguf_names.c): their slots --------------------- */

static bool names_init(struct gguf *g, struct gguf_names *set, uint64_t count) {
    uint64_t slots = 2;
    while (slots < 2 * count) slots *= 2; /* count is bounded by the file size */
    set->slots = g_alloc(g, slots, sizeof *set->slots);
    set->mask = slots - 1;
    return set->slots != NULL;
}

/* ---- the cursor: bounds-checked little-endian reads ------------------- */

struct cursor {
    const uint8_t *base; /* [size]; NULL when size is 0 */
    uint64_t size;
    uint64_t pos;
    struct kvik_err *err;
    char where[112];     /* what is being parsed: "kv[3] 'general.name'" */
};

__attribute__((format(printf, 2, 3)))
static kvik_status fail(struct cursor *c, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set(c->err, KVIK_ERR_FORMAT, "gguf: %s%s%s", c->where, c->where[0] ? ": " : "",
                   msg);
}

static uint64_t left(const struct cursor *c) { return c->size - c->pos; }

/* Fails unless n bytes of `what` can be read at the cursor. */
static kvik_status need(struct cursor *c, uint64_t n, const char *what) {
    if (n <= left(c)) return KVIK_OK;
    return fail(c, "truncated: %s at offset %llu needs %llu bytes, the file ends at %llu", what,
                (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)c->size);
}

static uint64_t load_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static kvik_status rd_u32(struct cursor *c, uint32_t *v, const char *what) {
    kvik_status st = need(c, 4, what);
    if (st) return st;
    *v = (uint32_t)load_le(c->base + c->pos, 4);
    c->pos += 4;
    return KVIK_OK;
}

static kvik_status rd_u64(struct cursor *c, uint64_t *v, const char *what) {
    kvik_status st = need(c, 8, what);
    if (st) return st;
    *v = load_le(c->base + c->pos, 8);
    c->pos += 8;
    return KVIK_OK;
}

/* A name for an error message: at most 48 bytes, printable ASCII only. */
static void show_name(char *buf, size_t cap, const uint8_t *p, uint64_t len) {
    size_t n = 0;
    for (uint64_t i = 0; i < len && i < 48 && n + 1 < cap; i++)
        buf[n++] = (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\'') ? (char)p[i] : '?';
    buf[n] = 0;
    if (len > 48 && n + 4 < cap) memcpy(buf + n, "...", 4);
}

/* Reads a key or tensor name: 1..GGUF_MAX_NAME bytes without NUL, copied
 * into g's storage. */
static kvik_status rd_name(struct cursor *c, struct gguf *g, const char *what, const char **out,
                           uint64_t *out_len) {
    uint64_t off = c->pos, len;
    kvik_status st = rd_u64(c, &len, what);
    if (st) return st;
    if (len == 0) return fail(c, "empty %s at offset %llu", what, (unsigned long long)off);
    if (len > GGUF_MAX_NAME)
        return fail(c, "%s length %llu at offset %llu exceeds the limit of %d bytes%s", what,
                    (unsigned long long)len, (unsigned long long)off, GGUF_MAX_NAME,
                    len > left(c) ? " and the file size" : "");
    if ((st = need(c, len, what))) return st;
    const uint8_t *p = c->base + c->pos;
    const uint8_t *nul = memchr(p, 0, len);
    if (nul)
        return fail(c, "%s contains a NUL byte at offset %llu", what,
                    (unsigned long long)(c->pos + (uint64_t)(nul - p)));
    char *s = g_alloc(g, len + 1, 1);
    if (!s) return err_set(c->err, KVIK_ERR_NOMEM, "gguf: out of memory");
    memcpy(s, p, len);
    s[len] = 0;
    c->pos += len;
    *out = s;
    *out_len = len;
    return KVIK_OK;
}

/* ---- metadata values ----------------------------------------------------- */

static kvik_status parse_value(struct cursor *c, struct gguf *g, uint32_t type, int depth,
                               struct gguf_value *v);

/* Elements of an array whose header (type, n) has been read; depth is the
 * array's own nesting level (1 for a kv's value). */
static kvik_status parse_elems(struct cursor *c, struct gguf *g, int depth, struct gguf_value *v,
                               uint64_t count_off) {
    uint64_t n = v->n, start = c->pos;
    size_t esz = gguf_type_size((int)v->elem_type);
    uint64_t min = esz                                 ? esz
                   : v->elem_type == GGUF_TYPE_STRING ? MIN_STRING_BYTES
                                                      : MIN_ARRAY_BYTES;
    if (n > left(c) / min)
        return fail(c, "array length %llu at offset %llu exceeds file size (%llu bytes)",
                    (unsigned long long)n, (unsigned long long)count_off,
                    (unsigned long long)c->size);
    if (n) v->p = c->base + start;
    if (esz) {
        if (v->elem_type == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (v->p[i] > 1)
                    return fail(c, "array element %llu: bool value %u at offset %llu is not 0 or 1",
                                (unsigned long long)i, v->p[i], (unsigned long long)(start + i));
        c->pos += n * esz;
    } else if (v->elem_type == GGUF_TYPE_STRING) {
        v->strs = g_alloc(g, n, sizeof *v->strs);
        if (!v->strs && n) return err_set(c->err, KVIK_ERR_NOMEM, "gguf: out of memory");
        for (uint64_t i = 0; i < n; i++) {
            uint64_t off = c->pos, len;
            kvik_status st = rd_u64(c, &len, "string length");
            if (st) return st;
            if (len > left(c))
                return fail(c,
                            "array element %llu: string length %llu at offset %llu exceeds file "
                            "size (%llu bytes)",
                            (unsigned long long)i, (unsigned long long)len,
                            (unsigned long long)off, (unsigned long long)c->size);
            v->strs[i] = c->base + off;
            c->pos += len;
        }
    } else { /* ARRAY of ARRAY */
        v->elems = g_alloc(g, n, sizeof *v->elems);
        if (!v->elems && n) return err_set(c->err, KVIK_ERR_NOMEM, "gguf: out of memory");
        for (uint64_t i = 0; i < n; i++) {
            kvik_status st = parse_value(c, g, GGUF_TYPE_ARRAY, depth, &v->elems[i]);
            if (st) return st;
        }
    }
    v->nbytes = c->pos - start;
    return KVIK_OK;
}

/* One value of a known type; depth counts enclosing arrays. */
static kvik_status parse_value(struct cursor *c, struct gguf *g, uint32_t type, int depth,
                               struct gguf_value *v) {
    kvik_status st;
    memset(v, 0, sizeof *v);
    v->type = (enum gguf_type)type;
    size_t sz = gguf_type_size((int)type);
    if (sz) {
        if ((st = need(c, sz, gguf_type_name((int)type)))) return st;
        v->p = c->base + c->pos;
        v->n = 1;
        v->nbytes = sz;
        if (type == GGUF_TYPE_BOOL && v->p[0] > 1)
            return fail(c, "bool value %u at offset %llu is not 0 or 1", v->p[0],
                        (unsigned long long)c->pos);
        c->pos += sz;
        return KVIK_OK;
    }
    if (type == GGUF_TYPE_STRING) {
        uint64_t off = c->pos, len;
        if ((st = rd_u64(c, &len, "string length"))) return st;
        if (len > left(c))
            return fail(c, "string length %llu at offset %llu exceeds file size (%llu bytes)",
                        (unsigned long long)len, (unsigned long long)off,
                        (unsigned long long)c->size);
        if (len) v->p = c->base + c->pos;
        v->n = v->nbytes = len;
        c->pos += len;
        return KVIK_OK;
    }
    /* ARRAY */
    uint64_t off = c->pos;
    if (depth + 1 > GGUF_MAX_DEPTH)
        return fail(c, "array at offset %llu nested deeper than %d levels",
                    (unsigned long long)off, GGUF_MAX_DEPTH);
    uint32_t et;
    if ((st = rd_u32(c, &et, "array element type"))) return st;
    if (et >= GGUF_TYPE_COUNT)
        return fail(c, "bad array element type %u at offset %llu", et, (unsigned long long)off);
    v->elem_type = (enum gguf_type)et;
    uint64_t count_off = c->pos;
    if ((st = rd_u64(c, &v->n, "array length"))) return st;
    return parse_elems(c, g, depth + 1, v, count_off);
}

static kvik_status parse_kvs(struct cursor *c, struct gguf *g) {
    kvik_status st;
    for (int64_t i = 0; i < g->n_kv; i++) {
        struct gguf_kv *kv = &g->kvs[i];
        uint64_t key_off = c->pos;
        snprintf(c->where, sizeof c->where, "kv[%lld]", (long long)i);
        if ((st = rd_name(c, g, "key", &kv->key, &kv->key_len))) return st;
        char shown[64];
        show_name(shown, sizeof shown, (const uint8_t *)kv->key, kv->key_len);
        snprintf(c->where, sizeof c->where, "kv[%lld] '%s'", (long long)i, shown);
        int64_t dup = gguf_names_insert(&g->keys, kv->key, kv->key_len, i);
        if (dup >= 0)
            return fail(c, "duplicate key at offset %llu (first set by kv[%lld])",
                        (unsigned long long)key_off, (long long)dup);
        uint64_t type_off = c->pos;
        uint32_t type;
        if ((st = rd_u32(c, &type, "value type"))) return st;
        if (type >= GGUF_TYPE_COUNT)
            return fail(c, "bad value type %u at offset %llu", type, (unsigned long long)type_off);
        uint64_t val_off = c->pos;
        if ((st = parse_value(c, g, type, 0, &kv->value))) return st;
        if (strcmp(kv->key, "general.alignment") == 0) {
            if (type != GGUF_TYPE_UINT32)
                return fail(c, "type %s at offset %llu, expected uint32", gguf_type_name((int)type),
                            (unsigned long long)type_off);
            uint32_t a = (uint32_t)load_le(kv->value.p, 4);
            if (a == 0 || (a & (a - 1)) != 0)
                return fail(c, "alignment %u at offset %llu is not a nonzero power of two", a,
                            (unsigned long long)val_off);
            g->alignment = a;
        }
    }
    c->where[0] = 0;
    return KVIK_OK;
}

/* ---- tensor infos and data ----------------------------------------------- */

static kvik_status parse_tensor_info(struct cursor *c, struct gguf *g, int64_t i) {
    struct gguf_tensor *t = &g->tensors[i];
    kvik_status st;
    uint64_t name_off = c->pos, len;
    snprintf(c->where, sizeof c->where, "tensor[%lld]", (long long)i);
    if ((st = rd_name(c, g, "tensor name", &t->name, &len))) return st;
    char shown[64];
    show_name(shown, sizeof shown, (const uint8_t *)t->name, len);
    snprintf(c->where, sizeof c->where, "tensor[%lld] '%s'", (long long)i, shown);
    int64_t dup = gguf_names_insert(&g->tensor_names, t->name, len, i);
    if (dup >= 0)
        return fail(c, "duplicate tensor name at offset %llu (first used by tensor[%lld])",
                    (unsigned long long)name_off, (long long)dup);

    uint64_t off = c->pos;
    uint32_t n_dims;
    if ((st = rd_u32(c, &n_dims, "n_dims"))) return st;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return fail(c, "n_dims %u at offset %llu is not in 1..%d", n_dims,
                    (unsigned long long)off, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t n_elems = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        uint64_t ne;
        off = c->pos;
        if ((st = rd_u64(c, &ne, "dimension"))) return st;
        if (ne == 0)
            return fail(c, "ne[%d] is 0 at offset %llu (empty tensors are not supported)", d,
                        (unsigned long long)off);
        if (ne > (uint64_t)INT64_MAX)
            return fail(c, "ne[%d] = %llu at offset %llu exceeds INT64_MAX", d,
                        (unsigned long long)ne, (unsigned long long)off);
        t->ne[d] = (int64_t)ne;
        if (__builtin_mul_overflow(n_elems, t->ne[d], &n_elems))
            return fail(c, "element count overflows int64 at ne[%d] (offset %llu)", d,
                        (unsigned long long)off);
    }
    t->n_elems = n_elems;

    off = c->pos;
    uint32_t type;
    if ((st = rd_u32(c, &type, "tensor type"))) return st;
    const struct type_traits *tt = tensor_type_traits((int)type);
    if (!tt || !tt->name || tt->block_size <= 0 || tt->type_size == 0)
        return fail(c, "unknown tensor type %u at offset %llu", type, (unsigned long long)off);
    t->type = (int)type;
    if (t->ne[0] % tt->block_size != 0)
        return fail(c, "ne[0] = %lld is not a multiple of the block size %lld of type %s "
                       "(offset %llu)",
                    (long long)t->ne[0], (long long)tt->block_size, tt->name,
                    (unsigned long long)off);
    uint64_t bytes = (uint64_t)(t->ne[0] / tt->block_size);
    bool over = mul_overflows_u64(bytes, tt->type_size, &bytes);
    for (int d = 1; d < GGUF_MAX_DIMS; d++)
        over = over || mul_overflows_u64(bytes, (uint64_t)t->ne[d], &bytes);
    if (over)
        return fail(c, "byte size of %lld %s elements overflows (offset %llu)",
                    (long long)n_elems, tt->name, (unsigned long long)off);
    t->n_bytes = bytes;

    off = c->pos;
    if ((st = rd_u64(c, &t->offset, "tensor offset"))) return st;
    if (t->offset % g->alignment != 0)
        return fail(c, "data offset %llu at offset %llu is not a multiple of the alignment %u",
                    (unsigned long long)t->offset, (unsigned long long)off, g->alignment);
    return KVIK_OK;
}

static int cmp_by_offset(const void *a, const void *b) {
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Places every tensor inside the file and checks that none overlap. */
static kvik_status place_tensors(struct cursor *c, struct gguf *g) {
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        char shown[64];
        show_name(shown, sizeof shown, (const uint8_t *)t->name, strlen(t->name));
        snprintf(c->where, sizeof c->where, "tensor[%lld] '%s'", (long long)i, shown);
        if (add_overflows_u64(g->data_offset, t->offset, &start) ||
            add_overflows_u64(start, t->n_bytes, &end) || end > g->size)
            return fail(c, "data (%llu bytes at data offset %llu, file offset %llu) runs past the "
                           "end of the file (%llu bytes)",
                        (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
                        (unsigned long long)(g->data_offset + t->offset),
                        (unsigned long long)g->size);
        t->file_offset = start;
        t->data = g->data + start;
    }
    c->where[0] = 0;
    if (g->n_tensors < 2) return KVIK_OK;
    const struct gguf_tensor **order = malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return err_set(c->err, KVIK_ERR_NOMEM, "gguf: out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
    qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_by_offset);
    kvik_status st = KVIK_OK;
    for (int64_t i = 1; i < g->n_tensors && !st; i++) {
        const struct gguf_tensor *a = order[i - 1], *b = order[i];
        if (b->offset < a->offset + a->n_bytes) {
            char na[64], nb[64];
            show_name(na, sizeof na, (const uint8_t *)a->name, strlen(a->name));
            show_name(nb, sizeof nb, (const uint8_t *)b->name, strlen(b->name));
            st = fail(c, "tensor '%s' (file offset %llu, %llu bytes) overlaps tensor '%s' "
                         "(file offset %llu)",
                      na, (unsigned long long)a->file_offset, (unsigned long long)a->n_bytes, nb,
                      (unsigned long long)b->file_offset);
        }
    }
    free(order);
    return st;
}

/* ---- the whole file -------------------------------------------------------- */

static kvik_status parse(struct gguf *g, struct kvik_err *err) {
    struct cursor c = {.base = g->data, .size = g->size, .err = err};
    kvik_status st;
    if ((st = need(&c, 4, "magic"))) return st;
    if (memcmp(c.base, GGUF_MAGIC, 4) != 0)
        return fail(&c, "bad magic %02x %02x %02x %02x at offset 0 (expected \"GGUF\"): not a "
                        "GGUF file",
                    c.base[0], c.base[1], c.base[2], c.base[3]);
    c.pos = 4;
    if ((st = rd_u32(&c, &g->version, "version"))) return st;
    if (g->version == 1)
        return fail(&c, "version 1 at offset 4 is not supported (GGUF v1 is obsolete; "
                        "reconvert the model)");
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return fail(&c, "version at offset 4 is big-endian; only little-endian files are "
                        "supported");
    if (g->version != 2 && g->version != 3)
        return fail(&c, "unsupported version %u at offset 4 (kvik reads versions 2 and 3)",
                    g->version);
    uint64_t n_tensors, n_kv;
    if ((st = rd_u64(&c, &n_tensors, "n_tensors"))) return st;
    if ((st = rd_u64(&c, &n_kv, "n_kv"))) return st;
    if (n_kv > left(&c) / MIN_KV_BYTES)
        return fail(&c, "n_kv %llu at offset 16 exceeds what the file can hold (%llu bytes)",
                    (unsigned long long)n_kv, (unsigned long long)c.size);
    if (n_tensors > (left(&c) - n_kv * MIN_KV_BYTES) / MIN_TENSOR_BYTES)
        return fail(&c, "n_tensors %llu at offset 8 exceeds what the file can hold (%llu bytes)",
                    (unsigned long long)n_tensors, (unsigned long long)c.size);
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kvs = g_alloc(g, n_kv, sizeof *g->kvs);
    g->tensors = g_alloc(g, n_tensors, sizeof *g->tensors);
    if (!g->kvs || !g->tensors || !names_init(g, &g->keys, n_kv) ||
        !names_init(g, &g->tensor_names, n_tensors))
        return err_set(err, KVIK_ERR_NOMEM, "gguf: out of memory");

    if ((st = parse_kvs(&c, g))) return st;
    for (int64_t i = 0; i < g->n_tensors; i++)
        if ((st = parse_tensor_info(&c, g, i))) return st;
    c.where[0] = 0;
    /* The data section starts at the aligned end of the tensor infos. */
    g->data_offset = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    return place_tensors(&c, g);
}

static kvik_status open_common(struct gguf *g, struct gguf **out, struct kvik_err *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    kvik_status st = parse(g, err);
    if (st) {
        gguf_close(g);
        return st;
    }
    *out = g;
    return KVIK_OK;
}

kvik_status gguf_open_memory(const void *data, size_t size, struct gguf **out,
                             struct kvik_err *err) {
    *out = NULL;
    if (!data && size) return err_set(err, KVIK_ERR_INVALID_ARG, "gguf: NULL buffer");
    struct gguf *g = calloc(1, sizeof *g);
    if (!g) return err_set(err, KVIK_ERR_NOMEM, "gguf: out of memory");
    g->data = data;
    g->size = size;
    return open_common(g, out, err);
}

kvik_status gguf_open(const char *path, struct gguf **out, struct kvik_err *err) {
    *out = NULL;
    struct gguf *g = calloc(1, sizeof *g);
    if (!g) return err_set(err, KVIK_ERR_NOMEM, "gguf: out of memory");
    kvik_status st = file_map(&g->map, path, err);
    if (st) {
        free(g);
        return st;
    }
    g->data = g->map.data;
    g->size = g->map.size;
    return open_common(g, out, err);
}

void gguf_close(struct gguf *g) {
    if (!g) return;
    while (g->chunks) {
        struct gguf_chunk *next = g->chunks->next;
        free(g->chunks);
        g->chunks = next;
    }
    file_unmap(&g->map);
    free(g);
}
