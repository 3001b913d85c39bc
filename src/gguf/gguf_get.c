/*
 * gguf_get.c — questions asked of an open GGUF file: metadata by key (typed
 * getters that report errors), values and array elements (pointers into
 * the map, unaligned-safe copies), and tensors by index or name. The file
 * was fully validated by gguf_open, so nothing here re-checks it; these
 * functions only check their own arguments.
 */

#include "gguf/gguf.h"

uint32_t gguf_version(const struct gguf *g) { return g->version; }
uint32_t gguf_alignment(const struct gguf *g) { return g->alignment; }
uint64_t gguf_file_size(const struct gguf *g) { return g->size; }
uint64_t gguf_data_offset(const struct gguf *g) { return g->data_offset; }

/* ---- metadata ----------------------------------------------------------- */

int64_t gguf_n_kv(const struct gguf *g) { return g->n_kv; }

int64_t gguf_find_key(const struct gguf *g, const char *key) {
    return key ? gguf_names_find(&g->keys, key, strlen(key)) : -1;
}

const char *gguf_key(const struct gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? g->kvs[i].key : NULL;
}

const struct gguf_value *gguf_kv_value(const struct gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kvs[i].value : NULL;
}

/* Little-endian load of a scalar's bytes (which may be unaligned). */
static uint64_t load_bits(const struct gguf_value *v) {
    size_t n = gguf_type_size((int)v->type);
    uint64_t x = 0;
    for (size_t i = n; i-- > 0;) x = (x << 8) | v->p[i];
    return x;
}

static bool is_signed(enum gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 ||
           t == GGUF_TYPE_INT64;
}

static bool is_integer(enum gguf_type t) {
    return is_signed(t) || t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 ||
           t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_BOOL;
}

/* Sign-extended value of a signed integer type. */
static int64_t load_signed(const struct gguf_value *v) {
    uint64_t x = load_bits(v);
    unsigned bits = (unsigned)gguf_type_size((int)v->type) * 8;
    if (bits < 64 && (x >> (bits - 1)) & 1) x |= ~(uint64_t)0 << bits;
    int64_t s;
    memcpy(&s, &x, sizeof s);
    return s;
}

bool gguf_value_to_i64(const struct gguf_value *v, int64_t *out) {
    if (!v || !is_integer(v->type)) return false;
    if (is_signed(v->type)) {
        *out = load_signed(v);
        return true;
    }
    uint64_t x = load_bits(v);
    if (x > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)x;
    return true;
}

bool gguf_value_to_u64(const struct gguf_value *v, uint64_t *out) {
    if (!v || !is_integer(v->type)) return false;
    if (is_signed(v->type)) {
        int64_t s = load_signed(v);
        if (s < 0) return false;
        *out = (uint64_t)s;
        return true;
    }
    *out = load_bits(v);
    return true;
}

bool gguf_value_to_f64(const struct gguf_value *v, double *out) {
    if (!v) return false;
    if (v->type == GGUF_TYPE_FLOAT32) {
        *out = (double)f32_from_bits((uint32_t)load_bits(v));
        return true;
    }
    if (v->type == GGUF_TYPE_FLOAT64) {
        uint64_t x = load_bits(v);
        memcpy(out, &x, sizeof *out);
        return true;
    }
    if (!is_integer(v->type)) return false;
    if (is_signed(v->type)) {
        *out = (double)load_signed(v);
    } else {
        *out = (double)load_bits(v);
    }
    return true;
}

/* The value of key, or NULL with KVIK_ERR_NOT_FOUND in err. */
static const struct gguf_value *get(const struct gguf *g, const char *key, struct kvik_err *err) {
    int64_t i = gguf_find_key(g, key);
    if (i < 0) {
        err_set(err, KVIK_ERR_NOT_FOUND, "gguf: key '%s' not found", key ? key : "(null)");
        return NULL;
    }
    return &g->kvs[i].value;
}

static kvik_status wrong_type(const char *key, const struct gguf_value *v, const char *expected,
                              struct kvik_err *err) {
    return err_set(err, KVIK_ERR_FORMAT, "gguf: key '%s' has type %s, expected %s", key,
                   gguf_type_name((int)v->type), expected);
}

kvik_status gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out,
                         struct kvik_err *err) {
    const struct gguf_value *v = get(g, key, err);
    if (!v) return KVIK_ERR_NOT_FOUND;
    uint64_t x;
    if (!gguf_value_to_u64(v, &x) || x > UINT32_MAX) {
        if (!is_integer(v->type)) return wrong_type(key, v, "an integer", err);
        return err_set(err, KVIK_ERR_FORMAT, "gguf: key '%s' (%s) is out of range for uint32",
                       key, gguf_type_name((int)v->type));
    }
    *out = (uint32_t)x;
    return KVIK_OK;
}

kvik_status gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out,
                         struct kvik_err *err) {
    const struct gguf_value *v = get(g, key, err);
    if (!v) return KVIK_ERR_NOT_FOUND;
    if (gguf_value_to_u64(v, out)) return KVIK_OK;
    if (!is_integer(v->type)) return wrong_type(key, v, "an integer", err);
    return err_set(err, KVIK_ERR_FORMAT, "gguf: key '%s' is negative", key);
}

kvik_status gguf_get_i64(const struct gguf *g, const char *key, int64_t *out,
                         struct kvik_err *err) {
    const struct gguf_value *v = get(g, key, err);
    if (!v) return KVIK_ERR_NOT_FOUND;
    if (gguf_value_to_i64(v, out)) return KVIK_OK;
    if (!is_integer(v->type)) return wrong_type(key, v, "an integer", err);
    return err_set(err, KVIK_ERR_FORMAT, "gguf: key '%s' is out of range for int64", key);
}

kvik_status gguf_get_f32(const struct gguf *g, const char *key, float *out,
                         struct kvik_err *err) {
    const struct gguf_value *v = get(g, key, err);
    if (!v) return KVIK_ERR_NOT_FOUND;
    double d;
    if (v->type != GGUF_TYPE_FLOAT32 && v->type != GGUF_TYPE_FLOAT64)
        return wrong_type(key, v, "float32", err);
    gguf_value_to_f64(v, &d);
    *out = (float)d;
    return KVIK_OK;
}

kvik_status gguf_get_bool(const struct gguf *g, const char *key, bool *out,
                          struct kvik_err *err) {
    const struct gguf_value *v = get(g, key, err);
    if (!v) return KVIK_ERR_NOT_FOUND;
    if (v->type != GGUF_TYPE_BOOL) return wrong_type(key, v, "bool", err);
    *out = v->p[0] != 0;
    return KVIK_OK;
}

kvik_status gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out,
                         struct kvik_err *err) {
    const struct gguf_value *v = get(g, key, err);
    if (!v) return KVIK_ERR_NOT_FOUND;
    if (v->type != GGUF_TYPE_STRING) return wrong_type(key, v, "string", err);
    out->ptr = (const char *)v->p;
    out->len = v->n;
    if (!out->ptr) out->ptr = ""; /* an empty string still has an address */
    return KVIK_OK;
}

kvik_status gguf_get_arr(const struct gguf *g, const char *key, int elem_type,
                         const struct gguf_value **out, struct kvik_err *err) {
    const struct gguf_value *v = get(g, key, err);
    if (!v) return KVIK_ERR_NOT_FOUND;
    if (v->type != GGUF_TYPE_ARRAY) return wrong_type(key, v, "array", err);
    if (elem_type >= 0 && (int)v->elem_type != elem_type)
        return err_set(err, KVIK_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected %s", key,
                       gguf_type_name((int)v->elem_type), gguf_type_name(elem_type));
    *out = v;
    return KVIK_OK;
}

/* ---- arrays ------------------------------------------------------------- */

uint64_t gguf_arr_len(const struct gguf_value *v) {
    return v && v->type == GGUF_TYPE_ARRAY ? v->n : 0;
}

int gguf_arr_type(const struct gguf_value *v) {
    return v && v->type == GGUF_TYPE_ARRAY ? (int)v->elem_type : -1;
}

struct gguf_str gguf_arr_str(const struct gguf_value *v, uint64_t i) {
    struct gguf_str s = {NULL, 0};
    if (!v || v->type != GGUF_TYPE_ARRAY || v->elem_type != GGUF_TYPE_STRING || i >= v->n)
        return s;
    const uint8_t *p = v->strs[i];
    for (int b = 7; b >= 0; b--) s.len = (s.len << 8) | p[b];
    s.ptr = (const char *)p + 8;
    return s;
}

const struct gguf_value *gguf_arr_arr(const struct gguf_value *v, uint64_t i) {
    if (!v || v->type != GGUF_TYPE_ARRAY || v->elem_type != GGUF_TYPE_ARRAY || i >= v->n)
        return NULL;
    return &v->elems[i];
}

bool gguf_arr_elem(const struct gguf_value *v, uint64_t i, struct gguf_value *out) {
    if (!v || v->type != GGUF_TYPE_ARRAY || i >= v->n) return false;
    if (v->elem_type == GGUF_TYPE_ARRAY) {
        *out = v->elems[i];
        return true;
    }
    memset(out, 0, sizeof *out);
    out->type = v->elem_type;
    if (v->elem_type == GGUF_TYPE_STRING) {
        struct gguf_str s = gguf_arr_str(v, i);
        out->p = s.len ? (const uint8_t *)s.ptr : NULL;
        out->n = out->nbytes = s.len;
        return true;
    }
    size_t sz = gguf_type_size((int)v->elem_type);
    out->p = v->p + i * sz;
    out->n = 1;
    out->nbytes = sz;
    return true;
}

const void *gguf_arr_data(const struct gguf_value *v) {
    if (!v || v->type != GGUF_TYPE_ARRAY || !gguf_type_size((int)v->elem_type)) return NULL;
    return v->p ? (const void *)v->p : (const void *)"";
}

kvik_status gguf_arr_copy(const struct gguf_value *v, void *dst, size_t dst_size) {
    const void *src = gguf_arr_data(v);
    if (!src || dst_size != v->nbytes) return KVIK_ERR_INVALID_ARG;
    if (dst_size) memcpy(dst, src, dst_size);
    return KVIK_OK;
}

/* ---- tensors ------------------------------------------------------------ */

int64_t gguf_n_tensors(const struct gguf *g) { return g->n_tensors; }

int64_t gguf_find_tensor(const struct gguf *g, const char *name) {
    return name ? gguf_names_find(&g->tensor_names, name, strlen(name)) : -1;
}

const struct gguf_tensor *gguf_tensor(const struct gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
