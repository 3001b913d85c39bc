/*
 * vector.h — the embedded vector store: vectors of one dimension with an
 * external 64-bit id and attributes each, ranked by dot product (the
 * vectors L2-normalised on the way in unless told not to, so the score is
 * the cosine), searched exactly (a scan) or through an HNSW graph, both
 * behind one call, with metadata filters and a score threshold.
 *
 *  - Storage: F32, F16, or int8 with one scale per vector (v ~ scale * q,
 *    q in -127..127). F32 and F16 rows are scored against the F32 query;
 *    int8 rows against the query quantized the same way (byte products,
 *    exact in int32, with VNNI where the CPU has it), and with rescore the
 *    beam's final candidates are scored again against F32 copies, so the
 *    results' order and scores are F32's.
 *  - Filters (OpenAI's vector-store filters): eq, ne, gt, gte, lt, lte, in,
 *    nin on one attribute, and and/or of filters. A vector without the
 *    attribute matches only ne and nin. gt..lte compare numbers with
 *    numbers and strings with strings (bytewise); other pairs never match.
 *    In the graph walk a filter decides which nodes may be results, never
 *    which are walked; when the filter's estimated selectivity is below
 *    VEC_EXACT_BELOW the search scans the matching vectors instead, so a
 *    selective filter loses no recall.
 *  - A threshold drops hits scoring below it; an empty result is a valid
 *    answer.
 *  - Adding an id that exists replaces its vector and attributes; a
 *    deleted or replaced vector stays in the graph as a tombstone (walked,
 *    never returned) until vec_compact.
 *  - Any number of searches run at once; an add, delete or compact waits
 *    for running searches and holds them off while it runs (a
 *    readers-writer lock).
 */
#ifndef KVIK_VECTOR_H
#define KVIK_VECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

enum vec_storage { VEC_F32, VEC_F16, VEC_I8 };
enum vec_index { VEC_FLAT, VEC_HNSW };

#define VEC_EXACT_BELOW 0.05 /* filtered searches scan below this estimated selectivity */

struct vec_config {
    int dim;            /* 1..65536 */
    int storage;        /* enum vec_storage */
    int index;          /* enum vec_index */
    bool normalize;     /* L2-normalise added vectors and queries (default true) */
    int M;              /* HNSW: links per node and layer (layer 0: 2M); default 16 */
    int ef_construction; /* default 200 */
    int ef_search;      /* default 64; a search's own ef overrides it */
    uint64_t seed;      /* the layers' random draws */
    bool rescore;       /* int8 storage only: keep each vector in F32 too, and score a
                           search's final candidates (the whole beam) with it */
};

struct vec_config vec_config_default(int dim);

/* Attribute values. */
enum vec_type { VEC_STR, VEC_NUM, VEC_BOOL };

struct vec_value {
    int type;         /* enum vec_type */
    const char *str;  /* VEC_STR: [len] bytes */
    size_t len;
    double num;       /* VEC_NUM */
    bool b;           /* VEC_BOOL */
};

struct vec_attr {
    const char *key;  /* NUL-terminated */
    struct vec_value v;
};

enum vec_op { VEC_EQ, VEC_NE, VEC_GT, VEC_GTE, VEC_LT, VEC_LTE, VEC_IN, VEC_NIN, VEC_AND, VEC_OR };

struct vec_filter {
    int op;                          /* enum vec_op */
    const char *key;                 /* comparisons */
    struct vec_value v;              /* eq .. lte */
    const struct vec_value *set;     /* in, nin: [n_set] */
    int n_set;
    const struct vec_filter *sub;    /* and, or: [n_sub] (and of none: all; or of none: nothing) */
    int n_sub;
};

/* Whether attrs[0..n) pass f. */
bool vec_filter_match(const struct vec_filter *f, const struct vec_attr *attrs, int n);

struct vec_hit {
    uint64_t id;
    float score;
};

struct vec_store;

struct vec_store *vec_store_new(const struct vec_config *cfg, struct kvik_err *err);
void vec_store_free(struct vec_store *s); /* NULL is fine */

/* Adds (or replaces) id with v[dim] and attrs[0..n_attrs) (copied).
 * KVIK_ERR_INVALID_ARG for a non-finite value or, when normalising, a zero
 * vector. */
kvik_status vec_add(struct vec_store *s, uint64_t id, const float *v, const struct vec_attr *attrs, int n_attrs,
                    struct kvik_err *err);
/* id's stored vector (normalised when the store normalises; F16 and int8
 * rows as their values) into out[dim]; KVIK_ERR_NOT_FOUND when absent. */
kvik_status vec_get(struct vec_store *s, uint64_t id, float *out);
/* Replaces id's attributes with attrs[0..n_attrs) (copied), its vector
 * and place in the graph kept; KVIK_ERR_NOT_FOUND, KVIK_ERR_NOMEM. */
kvik_status vec_set_attrs(struct vec_store *s, uint64_t id, const struct vec_attr *attrs, int n_attrs);
/* Removes id; KVIK_ERR_NOT_FOUND when it is not there. */
kvik_status vec_delete(struct vec_store *s, uint64_t id);

struct vec_search {
    int k;                          /* hits wanted, >= 1 */
    const struct vec_filter *filter; /* NULL: every vector */
    float threshold;                /* hits scoring below are dropped (-INFINITY: none) */
    int ef;                         /* HNSW beam width (0: the store's ef_search; at least k) */
    bool exact;                     /* scan, whatever the index */
};

/* The best hits for q[dim], best first, at most k; returns their count
 * (0 is an answer), or a negative kvik_status. */
int vec_search(struct vec_store *s, const float *q, const struct vec_search *p, struct vec_hit *out,
               struct kvik_err *err);

int64_t vec_count(struct vec_store *s);       /* live vectors */
int64_t vec_tombstones(struct vec_store *s);  /* deleted or replaced vectors still in the graph */
/* Rebuilds without the tombstones (the graph is built again). */
kvik_status vec_compact(struct vec_store *s, struct kvik_err *err);
/* Bytes the store holds (vectors, graph, attributes, tables). */
size_t vec_memory(struct vec_store *s);

/* ---- files (file.c; the layout is documented there) ------------------- */

/* The embedding model a store's vectors came from. */
struct vec_model {
    char id[256];   /* its name */
    char hash[80];  /* its file's SHA-256 in hex, or "" */
};

/* Writes s to path (through path.tmp, fsync'd and renamed over it, so a
 * crash leaves the old file or the new one), naming model m. Searches may
 * run meanwhile; adds wait. */
kvik_status vec_save(struct vec_store *s, const char *path, const struct vec_model *m, struct kvik_err *err);
/* Reads a store written by vec_save. With expect, a file made for another
 * model (another id, or another hash where both have one) is refused with
 * KVIK_ERR_INVALID_ARG; got (may be NULL) receives the file's model. A
 * damaged or inconsistent file is KVIK_ERR_FORMAT with what is wrong. */
struct vec_store *vec_load(const char *path, const struct vec_model *expect, struct vec_model *got,
                           struct kvik_err *err);
/* The same from n bytes at p (copied; p may go after the call). */
struct vec_store *vec_load_memory(const void *p, size_t n, const struct vec_model *expect, struct vec_model *got,
                                  struct kvik_err *err);

/* The dot product kernels (dot.c), exposed for tests: the best this CPU runs. */
float vec_dot_f32(const float *a, const float *b, int n);
float vec_dot_f16(const float *q, const uint16_t *v, int n);
float vec_dot_i8(const float *q, const int8_t *v, int n);
/* sum a[i] * b[i], exact (the int8 rows against a query quantized to bytes). */
int32_t vec_dot_u8i8(const uint8_t *a, const int8_t *b, int n); /* unscaled */

#endif /* KVIK_VECTOR_H */
