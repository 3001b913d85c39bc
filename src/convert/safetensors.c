/*
 * safetensors.c — the safetensors reader of safetensors.h. The header is
 * parsed with the strict JSON parser of json.h, each entry is checked on
 * its own, then the entries are sorted by offset to check that they tile
 * the data buffer, and by name to find duplicates and answer lookups.
 */
#include "convert/safetensors.h"

#include <stdlib.h>

#include "convert/json.h"

/* A tensor's name and its index in tensors. */
struct name_ix {
    const char *name;
    int64_t i;
};

struct safetensors {
    struct mapped_file map;            /* when opened from a path; else {NULL, 0} */
    uint64_t header_size;              /* N */
    uint64_t data_size;                /* input size - 8 - N */
    int64_t n_tensors;
    struct safetensors_tensor *tensors; /* [n_tensors], by offset */
    struct name_ix *by_name;           /* [n_tensors] sorted by name */
    int64_t n_meta;
    char **meta_keys;                  /* [n_meta], owned */
    char **meta_values;                /* [n_meta], owned */
};

static const struct {
    const char *name;
    size_t size;
} dtypes[SAFETENSORS_DTYPE_COUNT] = {
    [SAFETENSORS_BOOL] = {"BOOL", 1},
    [SAFETENSORS_U8] = {"U8", 1},
    [SAFETENSORS_I8] = {"I8", 1},
    [SAFETENSORS_F8_E5M2] = {"F8_E5M2", 1},
    [SAFETENSORS_F8_E4M3] = {"F8_E4M3", 1},
    [SAFETENSORS_I16] = {"I16", 2},
    [SAFETENSORS_U16] = {"U16", 2},
    [SAFETENSORS_F16] = {"F16", 2},
    [SAFETENSORS_BF16] = {"BF16", 2},
    [SAFETENSORS_I32] = {"I32", 4},
    [SAFETENSORS_U32] = {"U32", 4},
    [SAFETENSORS_F32] = {"F32", 4},
    [SAFETENSORS_I64] = {"I64", 8},
    [SAFETENSORS_U64] = {"U64", 8},
    [SAFETENSORS_F64] = {"F64", 8},
};

const char *safetensors_dtype_name(int dtype) {
    return dtype >= 0 && dtype < SAFETENSORS_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

size_t safetensors_dtype_size(int dtype) {
    return dtype >= 0 && dtype < SAFETENSORS_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

#define FMT_ERR(...) err_set(err, KVIK_ERR_FORMAT, "safetensors: " __VA_ARGS__)

/* Checks one header entry {dtype, shape, data_offsets} into *t (name set by
 * the caller). */
static kvik_status parse_entry(const struct json_value *v, uint64_t data_size,
                               struct safetensors_tensor *t, struct kvik_err *err) {
    const char *name = t->name;
    if (v->type != JSON_OBJECT)
        return FMT_ERR("tensor '%.64s': entry is %s, not an object", name, json_type_name(v->type));
    const struct json_value *dtype = NULL, *shape = NULL, *offs = NULL;
    for (size_t i = 0; i < v->len; i++) {
        const struct json_member *m = &v->members[i];
        const struct json_value **slot = NULL;
        if (strcmp(m->key, "dtype") == 0) slot = &dtype;
        else if (strcmp(m->key, "shape") == 0) slot = &shape;
        else if (strcmp(m->key, "data_offsets") == 0) slot = &offs;
        if (!slot || m->key_len != strlen(m->key))
            return FMT_ERR("tensor '%.64s': unknown key '%.64s' in its entry", name, m->key);
        if (*slot) return FMT_ERR("tensor '%.64s': duplicate key '%s' in its entry", name, m->key);
        *slot = &m->value;
    }
    if (!dtype || !shape || !offs)
        return FMT_ERR("tensor '%.64s': entry lacks '%s'", name,
                       !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

    if (dtype->type != JSON_STRING)
        return FMT_ERR("tensor '%.64s': dtype is %s, not a string", name, json_type_name(dtype->type));
    int d = -1;
    for (int i = 0; i < SAFETENSORS_DTYPE_COUNT; i++)
        if (dtype->len == strlen(dtypes[i].name) && strcmp(dtype->str, dtypes[i].name) == 0) d = i;
    if (d < 0) return FMT_ERR("tensor '%.64s': unknown dtype '%.32s'", name, dtype->str);
    t->dtype = (enum safetensors_dtype)d;

    if (shape->type != JSON_ARRAY)
        return FMT_ERR("tensor '%.64s': shape is %s, not an array", name, json_type_name(shape->type));
    if (shape->len > SAFETENSORS_MAX_DIMS)
        return FMT_ERR("tensor '%.64s': shape has %zu dimensions, more than %d", name, shape->len,
                       SAFETENSORS_MAX_DIMS);
    t->n_dims = (int)shape->len;
    uint64_t n = 1;
    for (size_t i = 0; i < shape->len; i++) {
        const struct json_value *e = &shape->items[i];
        if (e->type != JSON_UINT)
            return FMT_ERR("tensor '%.64s': shape[%zu] is %s, not a non-negative integer", name, i,
                           e->type == JSON_NUMBER ? "a negative, fractional or too large number"
                                                  : json_type_name(e->type));
        t->shape[i] = e->u;
        if (__builtin_mul_overflow(n, e->u, &n))
            return FMT_ERR("tensor '%.64s': the shape's element count overflows 64 bits", name);
    }
    t->n_elems = n;
    if (__builtin_mul_overflow(n, (uint64_t)dtypes[d].size, &t->n_bytes))
        return FMT_ERR("tensor '%.64s': the shape's byte size overflows 64 bits", name);

    if (offs->type != JSON_ARRAY || offs->len != 2 || offs->items[0].type != JSON_UINT ||
        offs->items[1].type != JSON_UINT)
        return FMT_ERR("tensor '%.64s': data_offsets is not two non-negative integers", name);
    uint64_t begin = offs->items[0].u, end = offs->items[1].u;
    if (begin > end)
        return FMT_ERR("tensor '%.64s': data_offsets begin %llu is past its end %llu", name,
                       (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return FMT_ERR("tensor '%.64s': data_offsets end %llu is past the data buffer (%llu bytes)",
                       name, (unsigned long long)end, (unsigned long long)data_size);
    if (end - begin != t->n_bytes)
        return FMT_ERR("tensor '%.64s': data_offsets span %llu bytes, but %s %s needs %llu", name,
                       (unsigned long long)(end - begin), dtypes[d].name,
                       t->n_dims ? "of this shape" : "scalar", (unsigned long long)t->n_bytes);
    t->offset = begin;
    return KVIK_OK;
}

static int cmp_offset(const void *a, const void *b) {
    const struct safetensors_tensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->n_bytes != y->n_bytes) return x->n_bytes < y->n_bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const struct name_ix *)a)->name, ((const struct name_ix *)b)->name);
}

/* Fills st->by_name from st->tensors' current order. */
static void index_names(struct safetensors *st) {
    for (int64_t i = 0; i < st->n_tensors; i++)
        st->by_name[i] = (struct name_ix){st->tensors[i].name, i};
    qsort(st->by_name, (size_t)st->n_tensors, sizeof *st->by_name, cmp_name);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static kvik_status parse_metadata(struct safetensors *st, struct json_value *v,
                                  struct kvik_err *err) {
    if (v->type != JSON_OBJECT)
        return FMT_ERR("__metadata__ is %s, not an object", json_type_name(v->type));
    st->meta_keys = calloc(v->len ? v->len : 1, sizeof *st->meta_keys);
    st->meta_values = calloc(v->len ? v->len : 1, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values)
        return err_set(err, KVIK_ERR_NOMEM, "safetensors: out of memory for metadata");
    for (size_t i = 0; i < v->len; i++) {
        struct json_member *m = &v->members[i];
        if (m->key_len != strlen(m->key))
            return FMT_ERR("__metadata__ key '%.64s' contains a NUL character", m->key);
        if (m->value.type != JSON_STRING)
            return FMT_ERR("__metadata__ value of '%.64s' is %s, not a string", m->key,
                           json_type_name(m->value.type));
        if (m->value.len != strlen(m->value.str))
            return FMT_ERR("__metadata__ value of '%.64s' contains a NUL character", m->key);
        st->meta_keys[st->n_meta] = m->key;
        st->meta_values[st->n_meta] = m->value.str;
        m->key = NULL;
        m->value.str = NULL;
        st->n_meta++;
    }
    /* Duplicate keys: sorted copies of the key pointers, neighbours compared. */
    char **sorted = malloc((size_t)(st->n_meta ? st->n_meta : 1) * sizeof *sorted);
    if (!sorted) return err_set(err, KVIK_ERR_NOMEM, "safetensors: out of memory for metadata");
    memcpy(sorted, st->meta_keys, (size_t)st->n_meta * sizeof *sorted);
    qsort(sorted, (size_t)st->n_meta, sizeof *sorted, cmp_str);
    kvik_status rc = KVIK_OK;
    for (int64_t i = 1; i < st->n_meta && !rc; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            rc = FMT_ERR("duplicate __metadata__ key '%.64s'", sorted[i]);
    free(sorted);
    return rc;
}

/* Fills st from the input's bytes; st owns whatever it took on failure too. */
static kvik_status parse(struct safetensors *st, const uint8_t *p, size_t size,
                         struct kvik_err *err) {
    if (size < 8)
        return FMT_ERR("file is %zu bytes, shorter than the 8-byte header length", size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | p[i];
    if (n > SAFETENSORS_MAX_HEADER)
        return FMT_ERR("header length %llu exceeds the limit of %u bytes", (unsigned long long)n,
                       SAFETENSORS_MAX_HEADER);
    if (n > size - 8)
        return FMT_ERR("header length %llu runs past the end of the file (%zu bytes)",
                       (unsigned long long)n, size);
    st->header_size = n;
    st->data_size = size - 8 - n;
    const uint8_t *data = p + 8 + n;
    if (n == 0 || p[8] != '{') return FMT_ERR("header does not start with '{'");

    struct json_value root;
    struct kvik_err jerr = {0};
    kvik_status rc = json_parse((const char *)p + 8, (size_t)n, &root, &jerr);
    if (rc) return err_set(err, rc, "safetensors: header: %s", jerr.msg);
    if (root.type != JSON_OBJECT) {
        json_free(&root);
        return FMT_ERR("header is not a JSON object");
    }

    size_t n_t = 0;
    size_t meta = SIZE_MAX; /* index of __metadata__ in root, if any */
    for (size_t i = 0; i < root.len; i++) {
        if (strcmp(root.members[i].key, "__metadata__") == 0 &&
            root.members[i].key_len == strlen("__metadata__")) {
            if (meta != SIZE_MAX) {
                json_free(&root);
                return FMT_ERR("duplicate __metadata__ entry");
            }
            meta = i;
        } else {
            n_t++;
        }
    }
    st->tensors = calloc(n_t ? n_t : 1, sizeof *st->tensors);
    st->by_name = calloc(n_t ? n_t : 1, sizeof *st->by_name);
    if (!st->tensors || !st->by_name) {
        json_free(&root);
        return err_set(err, KVIK_ERR_NOMEM, "safetensors: out of memory for %zu tensors", n_t);
    }
    for (size_t i = 0; i < root.len; i++) {
        struct json_member *m = &root.members[i];
        if (i == meta) continue;
        if (m->key_len == 0) {
            rc = FMT_ERR("tensor with an empty name");
            goto done;
        }
        if (m->key_len != strlen(m->key)) {
            rc = FMT_ERR("tensor name '%.64s' contains a NUL character", m->key);
            goto done;
        }
        struct safetensors_tensor *t = &st->tensors[st->n_tensors++];
        t->name = m->key; /* owned by st from here on */
        m->key = NULL;
        rc = parse_entry(&m->value, st->data_size, t, err);
        if (rc) goto done;
    }
    if (meta != SIZE_MAX) {
        rc = parse_metadata(st, &root.members[meta].value, err);
        if (rc) goto done;
    }

    /* Names: sorted indices, neighbours compared for duplicates. */
    index_names(st);
    for (int64_t i = 1; i < st->n_tensors; i++) {
        const char *a = st->by_name[i - 1].name;
        if (strcmp(a, st->by_name[i].name) == 0) {
            rc = FMT_ERR("duplicate tensor name '%.64s'", a);
            goto done;
        }
    }

    /* Offsets: sorted, they must tile [0, data_size). */
    qsort(st->tensors, (size_t)st->n_tensors, sizeof *st->tensors, cmp_offset);
    uint64_t pos = 0;
    for (int64_t i = 0; i < st->n_tensors; i++) {
        struct safetensors_tensor *t = &st->tensors[i];
        if (t->offset < pos) {
            rc = FMT_ERR("tensor '%.64s' (bytes %llu..%llu) overlaps tensor '%.64s'", t->name,
                         (unsigned long long)t->offset, (unsigned long long)(t->offset + t->n_bytes),
                         st->tensors[i - 1].name);
            goto done;
        }
        if (t->offset > pos) {
            rc = FMT_ERR("hole of %llu bytes in the data buffer before tensor '%.64s' (at byte %llu)",
                         (unsigned long long)(t->offset - pos), t->name, (unsigned long long)pos);
            goto done;
        }
        t->data = data + t->offset;
        pos = t->offset + t->n_bytes;
    }
    if (pos != st->data_size) {
        rc = FMT_ERR("%llu bytes at the end of the data buffer belong to no tensor",
                     (unsigned long long)(st->data_size - pos));
        goto done;
    }
    /* The sort by offset moved the tensors: rebuild the name index. */
    index_names(st);
done:
    json_free(&root);
    return rc;
}

kvik_status safetensors_open_memory(const void *data, size_t size, struct safetensors **out,
                                    struct kvik_err *err) {
    *out = NULL;
    struct safetensors *st = calloc(1, sizeof *st);
    if (!st) return err_set(err, KVIK_ERR_NOMEM, "safetensors: out of memory");
    kvik_status rc = parse(st, data, size, err);
    if (rc) {
        safetensors_close(st);
        return rc;
    }
    *out = st;
    return KVIK_OK;
}

kvik_status safetensors_open(const char *path, struct safetensors **out, struct kvik_err *err) {
    *out = NULL;
    struct mapped_file mf;
    kvik_status rc = file_map(&mf, path, err);
    if (rc) return rc;
    rc = safetensors_open_memory(mf.data, mf.size, out, err);
    if (rc) {
        file_unmap(&mf);
        return rc;
    }
    (*out)->map = mf;
    return KVIK_OK;
}

void safetensors_close(struct safetensors *st) {
    if (!st) return;
    for (int64_t i = 0; i < st->n_tensors; i++) free((char *)st->tensors[i].name);
    free(st->tensors);
    free(st->by_name);
    for (int64_t i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    if (st->map.data) file_unmap(&st->map);
    free(st);
}

uint64_t safetensors_header_size(const struct safetensors *st) { return st->header_size; }
uint64_t safetensors_data_size(const struct safetensors *st) { return st->data_size; }
int64_t safetensors_n_tensors(const struct safetensors *st) { return st->n_tensors; }

const struct safetensors_tensor *safetensors_tensor(const struct safetensors *st, int64_t i) {
    return i >= 0 && i < st->n_tensors ? &st->tensors[i] : NULL;
}

int64_t safetensors_find_tensor(const struct safetensors *st, const char *name) {
    int64_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->by_name[mid].name, name);
        if (c == 0) return st->by_name[mid].i;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

int64_t safetensors_n_metadata(const struct safetensors *st) { return st->n_meta; }

const char *safetensors_metadata_key(const struct safetensors *st, int64_t i) {
    return i >= 0 && i < st->n_meta ? st->meta_keys[i] : NULL;
}

const char *safetensors_metadata_value(const struct safetensors *st, int64_t i) {
    return i >= 0 && i < st->n_meta ? st->meta_values[i] : NULL;
}

const char *safetensors_find_metadata(const struct safetensors *st, const char *key) {
    for (int64_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}
