/*
 * filter.c — metadata filters over a vector's attributes (vector.h).
 */
#include <string.h>

#include "vector/vector.h"

static const struct vec_value *find(const struct vec_attr *a, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(a[i].key, key)) return &a[i].v;
    return NULL;
}

static bool equal(const struct vec_value *x, const struct vec_value *y) {
    if (x->type != y->type) return false;
    switch (x->type) {
    case VEC_STR: return x->len == y->len && !memcmp(x->str, y->str, x->len);
    case VEC_NUM: return x->num == y->num;
    default: return x->b == y->b;
    }
}

/* <0, 0, >0 for x < y, x == y, x > y; 2 when they do not compare. */
static int order(const struct vec_value *x, const struct vec_value *y) {
    if (x->type != y->type) return 2;
    if (x->type == VEC_NUM) return x->num < y->num ? -1 : x->num > y->num ? 1 : x->num == y->num ? 0 : 2;
    if (x->type == VEC_STR) {
        size_t n = x->len < y->len ? x->len : y->len;
        int c = memcmp(x->str, y->str, n);
        return c ? (c < 0 ? -1 : 1) : x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
    }
    return 2;
}

bool vec_filter_match(const struct vec_filter *f, const struct vec_attr *attrs, int n) {
    if (f->op == VEC_AND || f->op == VEC_OR) {
        bool and = f->op == VEC_AND;
        for (int i = 0; i < f->n_sub; i++)
            if (vec_filter_match(&f->sub[i], attrs, n) != and) return !and;
        return and;
    }
    const struct vec_value *v = find(attrs, n, f->key);
    if (!v) return f->op == VEC_NE || f->op == VEC_NIN;
    int c;
    switch (f->op) {
    case VEC_EQ: return equal(v, &f->v);
    case VEC_NE: return !equal(v, &f->v);
    case VEC_GT: return (c = order(v, &f->v)) != 2 && c > 0;
    case VEC_GTE: return (c = order(v, &f->v)) != 2 && c >= 0;
    case VEC_LT: return (c = order(v, &f->v)) != 2 && c < 0;
    case VEC_LTE: return (c = order(v, &f->v)) != 2 && c <= 0;
    case VEC_IN:
    case VEC_NIN: {
        bool in = false;
        for (int i = 0; i < f->n_set && !in; i++) in = equal(v, &f->set[i]);
        return f->op == VEC_IN ? in : !in;
    }
    default: return false;
    }
}
