/*
 * store_int.h — the vector store's insides, shared by store.c (the rows,
 * the id table, the graph) and file.c (its file format). Not part of
 * vector.h's interface.
 */
#ifndef KVIK_VECTOR_STORE_INT_H
#define KVIK_VECTOR_STORE_INT_H

#include <pthread.h>

#include "vector/vector.h"

enum { VEC_MAX_LEVEL = 16 };

/* A visited mark per node: node i is visited when mark[i] == gen. */
struct visited {
    uint32_t *mark;
    int64_t cap;
    uint32_t gen;
    struct visited *next;
};

struct node_attrs {
    struct vec_attr *a; /* owned: keys and strings too */
    int n;
};

struct vec_store {
    struct vec_config cfg;
    pthread_rwlock_t lock;
    size_t row_bytes;
    /* nodes */
    uint8_t *rows;            /* [cap][row_bytes] */
    float *scales;            /* [cap] (int8 storage) */
    int32_t *sums;            /* [cap] (int8 storage) the sum of each row's bytes */
    float *exact;             /* [cap][dim] (rescore) the rows in F32 */
    uint64_t *ext;            /* [cap] external id */
    bool *dead;               /* [cap] tombstone */
    struct node_attrs *attrs; /* [cap] */
    int8_t *level;            /* [cap] */
    uint32_t *links0;         /* [cap][1 + 2M]: count, then ids */
    uint32_t **upper;         /* [cap]: levels 1..level, each [1 + M] */
    int64_t n, cap, live;
    /* the graph */
    int64_t entry;            /* -1: empty */
    int max_level;
    struct prng rng;
    double ml;
    struct map64 map;         /* external id -> node */
    /* visited arrays for searches */
    pthread_mutex_t vmu;
    struct visited *vfree;
};

/* The sum of an int8 row's bytes (int8 storage keeps it per row). */
static inline int32_t vec_row_sum(const int8_t *q, int dim) {
    int32_t t = 0;
    for (int k = 0; k < dim; k++) t += q[k];
    return t;
}

/* Room for at least cap nodes; false when out of memory (s->cap unchanged, s still whole). */
bool vec_grow_nodes(struct vec_store *s, int64_t cap);

/* Node i's links at layer (layer 0: [1 + 2M], above: [1 + M]): the count, then the ids. */
static inline uint32_t *vec_links(const struct vec_store *s, int64_t i, int layer) {
    if (!layer) return s->links0 + (size_t)i * (size_t)(1 + 2 * s->cfg.M);
    return s->upper[i] + (size_t)(layer - 1) * (size_t)(1 + s->cfg.M);
}

#endif /* KVIK_VECTOR_STORE_INT_H */
