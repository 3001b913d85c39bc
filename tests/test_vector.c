/*
 * test_vector.c — the vector store (src/vector): the dot kernels against
 * double-precision sums; exact search against brute force for every
 * storage; HNSW recall@10 against exact search; filtered recall at 0.1%,
 * 1%, 10% and 50% selectivity; every filter operator; the score
 * threshold; deletes, updates and compaction; searches running while
 * vectors are added; bad input.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "test.h"
#include "vector/vector.h"

enum { DIM = 48, N = 6000, CLUSTERS = 40, Q = 100 };

/* Clustered data: noise around one of CLUSTERS random centres (queries
 * are the last rows of a call, drawn from the same centres, never added). */
static float *make_data(int n, int dim, uint64_t seed) {
    uint64_t st = seed;
    float *c = malloc((size_t)CLUSTERS * dim * sizeof *c), *x = malloc((size_t)n * dim * sizeof *x);
    for (int i = 0; i < CLUSTERS * dim; i++) c[i] = test_rand_uniform(&st, -1, 1);
    for (int i = 0; i < n; i++) {
        int k = (int)(test_rand_u64(&st) % CLUSTERS);
        for (int d = 0; d < dim; d++) {
            float g = test_rand_uniform(&st, -1, 1) + test_rand_uniform(&st, -1, 1) + test_rand_uniform(&st, -1, 1);
            x[(size_t)i * dim + d] = c[k * dim + d] + 0.35f * g;
        }
    }
    free(c);
    return x;
}

static double dot_ref(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

TEST(vector_dot_kernels) {
    uint64_t st = 5;
    float a[300], b[300];
    uint16_t h[300];
    int8_t q[300];
    for (int n = 0; n <= 300; n += (n < 40 ? 1 : 37)) {
        for (int i = 0; i < n; i++) {
            a[i] = test_rand_uniform(&st, -1, 1);
            b[i] = test_rand_uniform(&st, -1, 1);
            h[i] = fp32_to_fp16(b[i]);
            q[i] = (int8_t)(test_rand_u64(&st) % 255 - 127);
        }
        double r = dot_ref(a, b, n), rh = 0, rq = 0;
        for (int i = 0; i < n; i++) rh += (double)a[i] * fp16_to_fp32(h[i]), rq += (double)a[i] * q[i];
        CHECK_MSG(fabs(vec_dot_f32(a, b, n) - r) < 1e-4, "f32 n=%d", n);
        CHECK_MSG(fabs(vec_dot_f16(a, h, n) - rh) < 1e-4, "f16 n=%d", n);
        CHECK_MSG(fabs(vec_dot_i8(a, q, n) - rq) < 1e-2, "i8 n=%d", n);
        /* bytes against int8, exact: 0 and 255 with -128 and 127 too */
        uint8_t u[300];
        int64_t ru = 0;
        for (int i = 0; i < n; i++) {
            u[i] = (uint8_t)(i % 5 == 0 ? 255 : i % 7 == 0 ? 0 : test_rand_u64(&st) & 255);
            int8_t x = i % 11 == 0 ? -128 : q[i];
            q[i] = x;
            ru += (int64_t)u[i] * x;
        }
        CHECK_MSG(vec_dot_u8i8(u, q, n) == ru, "u8i8 n=%d: %d, exact %lld", n, vec_dot_u8i8(u, q, n), (long long)ru);
    }
}

/* ids 0..n-1 with attributes bucket = i % 1000 (a number) and tenant
 * "t<i % 7>" (a string). */
/* storage VEC_I8 + 1: int8 rows with F32 copies (rescore). */
static struct vec_store *build(const float *x, int n, int storage, int index, int efc) {
    struct vec_config c = vec_config_default(DIM);
    c.storage = storage > VEC_I8 ? VEC_I8 : storage;
    c.rescore = storage > VEC_I8;
    c.index = index;
    c.ef_construction = efc;
    struct kvik_err err = {0};
    struct vec_store *s = vec_store_new(&c, &err);
    if (!s) {
        test_fail(__FILE__, __LINE__, "vec_store_new: %s", err.msg);
        abort();
    }
    for (int i = 0; i < n; i++) {
        char tenant[8];
        snprintf(tenant, sizeof tenant, "t%d", i % 7);
        struct vec_attr a[2] = {{"bucket", {.type = VEC_NUM, .num = i % 1000}},
                                {"tenant", {.type = VEC_STR, .str = tenant, .len = strlen(tenant)}}};
        if (vec_add(s, (uint64_t)i, x + (size_t)i * DIM, a, 2, &err) != KVIK_OK) {
            test_fail(__FILE__, __LINE__, "vec_add: %s", err.msg);
            abort();
        }
    }
    return s;
}

/* The share of exact's ids that approx found (k each). */
static double overlap(const struct vec_hit *exact, int ne, const struct vec_hit *approx, int na) {
    int hit = 0;
    for (int i = 0; i < ne; i++)
        for (int j = 0; j < na; j++)
            if (exact[i].id == approx[j].id) {
                hit++;
                break;
            }
    return ne ? (double)hit / ne : 1.0;
}

TEST(vector_exact_search_is_brute_force) {
    float *x = make_data(1500 + 20, DIM, 1), *qs = x + (size_t)1500 * DIM;
    int storages[] = {VEC_F32, VEC_F16, VEC_I8, VEC_I8 + 1};
    for (int si = 0; si < 4; si++) {
        struct vec_store *s = build(x, 1500, storages[si], si == 3 ? VEC_HNSW : VEC_FLAT, si == 3 ? 200 : 1);
        for (int qi = 0; qi < 20; qi++) {
            const float *q = qs + (size_t)qi * DIM;
            struct vec_hit h[10];
            struct vec_search p = {.k = 10, .threshold = -INFINITY};
            struct kvik_err err = {0};
            REQUIRE(vec_search(s, q, &p, h, &err) == 10);
            /* brute force in double over normalised vectors */
            double qn = sqrt(dot_ref(q, q, DIM)), best[10];
            int64_t bid[10];
            for (int k = 0; k < 10; k++) best[k] = -2, bid[k] = -1;
            for (int i = 0; i < 1500; i++) {
                const float *v = x + (size_t)i * DIM;
                double sc = dot_ref(q, v, DIM) / qn / sqrt(dot_ref(v, v, DIM));
                for (int k = 0; k < 10; k++)
                    if (sc > best[k]) {
                        for (int m = 9; m > k; m--) best[m] = best[m - 1], bid[m] = bid[m - 1];
                        best[k] = sc, bid[k] = i;
                        break;
                    }
            }
            /* int8 + rescore walks the graph on int8 rows and scores the beam in F32:
             * the scores are F32's (the beam, at ef 64 of 1,500, holds the top 10) */
            bool f32 = storages[si] == VEC_F32 || storages[si] == VEC_I8 + 1;
            double tol = f32 ? 1e-5 : storages[si] == VEC_F16 ? 2e-3 : 2e-2;
            for (int k = 0; k < 10; k++) {
                CHECK_MSG(fabs(h[k].score - best[k]) < tol, "storage %d: hit %d scores %f, exact %f", si, k,
                          h[k].score, best[k]);
                if (k) CHECK(h[k].score <= h[k - 1].score);
            }
            if (f32)
                for (int k = 0; k < 10; k++)
                    CHECK_MSG(h[k].id == (uint64_t)bid[k], "storage %d hit %d is the exact one", si, k);
        }
        vec_store_free(s);
    }
    free(x);
}

/* recall@10 of HNSW against exact search over Q queries with filter f. */
static double recall(struct vec_store *s, const float *qs, const struct vec_filter *f, int ef) {
    double sum = 0;
    for (int qi = 0; qi < Q; qi++) {
        struct vec_hit e[10], a[10];
        struct kvik_err err = {0};
        struct vec_search pe = {.k = 10, .filter = f, .threshold = -INFINITY, .exact = true};
        struct vec_search pa = {.k = 10, .filter = f, .threshold = -INFINITY, .ef = ef};
        int ne = vec_search(s, qs + (size_t)qi * DIM, &pe, e, &err);
        int na = vec_search(s, qs + (size_t)qi * DIM, &pa, a, &err);
        CHECK(ne >= 0 && na == ne);
        if (ne < 0 || na < 0) return 0;
        sum += overlap(e, ne, a, na);
    }
    return sum / Q;
}

TEST(vector_hnsw_recall_and_filters) {
    float *x = make_data(N + Q, DIM, 3), *qs = x + (size_t)N * DIM;
    struct vec_store *s = build(x, N, VEC_F32, VEC_HNSW, 100);
    double r = recall(s, qs, NULL, 64), r16 = recall(s, qs, NULL, 16);
    printf("    recall@10 %.3f at ef 64, %.3f at ef 16 (%d vectors)\n", r, r16, N);
    CHECK_MSG(r >= 0.95, "recall@10 %.3f", r);
    CHECK_MSG(r16 >= 0.9, "recall@10 at ef 16 %.3f (hnswlib gives 0.98 on such data)", r16);
    /* bucket < T selects T/1000 of the vectors */
    static const double sel[] = {0.001, 0.01, 0.1, 0.5};
    for (int k = 0; k < 4; k++) {
        struct vec_filter f = {.op = VEC_LT, .key = "bucket", .v = {.type = VEC_NUM, .num = sel[k] * 1000}};
        double rf = recall(s, qs, &f, 64);
        printf("    selectivity %.1f%%: filtered recall@10 %.3f\n", 100 * sel[k], rf);
        CHECK_MSG(rf >= 0.95, "selectivity %g: recall %.3f", sel[k], rf);
    }
    /* every hit passes the filter */
    struct vec_value set[2] = {{.type = VEC_STR, .str = "t1", .len = 2}, {.type = VEC_STR, .str = "t3", .len = 2}};
    struct vec_filter parts[2] = {{.op = VEC_IN, .key = "tenant", .set = set, .n_set = 2},
                                  {.op = VEC_GTE, .key = "bucket", .v = {.type = VEC_NUM, .num = 500}}};
    struct vec_filter both = {.op = VEC_AND, .sub = parts, .n_sub = 2};
    struct vec_hit h[10];
    struct kvik_err err = {0};
    struct vec_search p = {.k = 10, .filter = &both, .threshold = -INFINITY};
    int n = vec_search(s, qs, &p, h, &err);
    CHECK(n == 10);
    for (int i = 0; i < n; i++) CHECK(h[i].id % 1000 >= 500 && (h[i].id % 7 == 1 || h[i].id % 7 == 3));
    /* the threshold: nothing below it, and nothing at all above the best */
    struct vec_search pt = {.k = 10, .threshold = -INFINITY};
    REQUIRE(vec_search(s, qs, &pt, h, &err) == 10);
    float best = h[0].score, mid = h[4].score;
    pt.threshold = mid;
    n = vec_search(s, qs, &pt, h, &err);
    CHECK(n >= 5 && n <= 10);
    for (int i = 0; i < n; i++) CHECK(h[i].score >= mid);
    pt.threshold = best + 1e-3f;
    CHECK_EQ_INT(vec_search(s, qs, &pt, h, &err), 0);
    printf("    %zu bytes, %.0f bytes per vector\n", vec_memory(s), (double)vec_memory(s) / N);
    vec_store_free(s);
    free(x);
}

TEST(vector_filter_operators) {
    struct vec_attr a[3] = {{"n", {.type = VEC_NUM, .num = 5}},
                            {"s", {.type = VEC_STR, .str = "beta", .len = 4}},
                            {"b", {.type = VEC_BOOL, .b = true}}};
#define F(o, k, val) ((struct vec_filter){.op = (o), .key = (k), .v = val})
#define NUM(x) ((struct vec_value){.type = VEC_NUM, .num = (x)})
#define STR(x) ((struct vec_value){.type = VEC_STR, .str = (x), .len = strlen(x)})
    struct {
        struct vec_filter f;
        bool want;
    } cases[] = {
        {F(VEC_EQ, "n", NUM(5)), true},       {F(VEC_EQ, "n", NUM(6)), false},
        {F(VEC_NE, "n", NUM(6)), true},       {F(VEC_GT, "n", NUM(4)), true},
        {F(VEC_GT, "n", NUM(5)), false},      {F(VEC_GTE, "n", NUM(5)), true},
        {F(VEC_LT, "n", NUM(5)), false},      {F(VEC_LTE, "n", NUM(5)), true},
        {F(VEC_EQ, "s", STR("beta")), true},  {F(VEC_EQ, "s", STR("bet")), false},
        {F(VEC_GT, "s", STR("alpha")), true}, {F(VEC_LT, "s", STR("betaa")), true},
        {F(VEC_GT, "s", NUM(1)), false},      {F(VEC_EQ, "n", STR("5")), false},
        {F(VEC_EQ, "b", ((struct vec_value){.type = VEC_BOOL, .b = true})), true},
        {F(VEC_EQ, "missing", NUM(1)), false}, {F(VEC_NE, "missing", NUM(1)), true},
        {F(VEC_GT, "missing", NUM(1)), false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(vec_filter_match(&cases[i].f, a, 3) == cases[i].want, "case %zu", i);
    struct vec_value set[2] = {NUM(4), NUM(5)};
    struct vec_filter in = {.op = VEC_IN, .key = "n", .set = set, .n_set = 2};
    struct vec_filter nin = {.op = VEC_NIN, .key = "n", .set = set, .n_set = 2};
    struct vec_filter nin_missing = {.op = VEC_NIN, .key = "zz", .set = set, .n_set = 2};
    CHECK(vec_filter_match(&in, a, 3) && !vec_filter_match(&nin, a, 3) && vec_filter_match(&nin_missing, a, 3));
    struct vec_filter yes = F(VEC_EQ, "n", NUM(5)), no = F(VEC_EQ, "n", NUM(9));
    struct vec_filter ab[2] = {yes, no};
    struct vec_filter and = {.op = VEC_AND, .sub = ab, .n_sub = 2}, or = {.op = VEC_OR, .sub = ab, .n_sub = 2};
    struct vec_filter nested[2] = {or, yes};
    struct vec_filter and2 = {.op = VEC_AND, .sub = nested, .n_sub = 2};
    struct vec_filter empty_and = {.op = VEC_AND}, empty_or = {.op = VEC_OR};
    CHECK(!vec_filter_match(&and, a, 3) && vec_filter_match(&or, a, 3) && vec_filter_match(&and2, a, 3));
    CHECK(vec_filter_match(&empty_and, a, 3) && !vec_filter_match(&empty_or, a, 3));
#undef F
#undef NUM
#undef STR
}

TEST(vector_deletes_updates_compaction) {
    float *x = make_data(2000 + Q, DIM, 7), *qs = x + (size_t)2000 * DIM;
    struct vec_store *s = build(x, 2000, VEC_F16, VEC_HNSW, 64);
    struct kvik_err err = {0};
    for (int i = 0; i < 2000; i += 2) CHECK(vec_delete(s, (uint64_t)i) == KVIK_OK);
    CHECK(vec_delete(s, 0) == KVIK_ERR_NOT_FOUND);
    CHECK(vec_delete(s, 99999) == KVIK_ERR_NOT_FOUND);
    CHECK_EQ_INT((int)vec_count(s), 1000);
    CHECK_EQ_INT((int)vec_tombstones(s), 1000);
    struct vec_hit h[10];
    struct vec_search p = {.k = 10, .threshold = -INFINITY};
    for (int qi = 0; qi < 20; qi++) {
        int n = vec_search(s, qs + (size_t)qi * DIM, &p, h, &err);
        CHECK(n == 10);
        for (int i = 0; i < n; i++) CHECK_MSG(h[i].id % 2 == 1, "a deleted id came back");
    }
    double r = recall(s, qs, NULL, 64);
    CHECK_MSG(r >= 0.95, "recall with half deleted %.3f", r);
    /* an update moves id 1 onto query 0 and changes its attributes */
    struct vec_attr a = {"tenant", {.type = VEC_STR, .str = "moved", .len = 5}};
    REQUIRE(vec_add(s, 1, qs, &a, 1, &err) == KVIK_OK);
    CHECK_EQ_INT((int)vec_count(s), 1000);
    REQUIRE(vec_search(s, qs, &p, h, &err) >= 1);
    CHECK(h[0].id == 1 && h[0].score > 0.999f);
    struct vec_filter moved = {.op = VEC_EQ, .key = "tenant", .v = {.type = VEC_STR, .str = "moved", .len = 5}};
    struct vec_search pf = {.k = 10, .filter = &moved, .threshold = -INFINITY};
    CHECK_EQ_INT(vec_search(s, qs + DIM, &pf, h, &err), 1);
    /* compaction keeps the live vectors and their answers */
    struct vec_hit before[10];
    int nb = vec_search(s, qs + 5 * DIM, &p, before, &err);
    REQUIRE(vec_compact(s, &err) == KVIK_OK);
    CHECK_EQ_INT((int)vec_tombstones(s), 0);
    CHECK_EQ_INT((int)vec_count(s), 1000);
    struct vec_search pe = {.k = 10, .threshold = -INFINITY, .exact = true};
    int na = vec_search(s, qs + 5 * DIM, &pe, h, &err);
    CHECK(na == nb && overlap(before, nb, h, na) >= 0.9);
    r = recall(s, qs, NULL, 64);
    CHECK_MSG(r >= 0.95, "recall after compaction %.3f", r);
    vec_store_free(s);
    free(x);
}

struct searcher {
    struct vec_store *s;
    const float *qs;
    _Atomic int *stop;
    int searches, bad;
};

static void *search_loop(void *p) {
    struct searcher *w = p;
    struct vec_hit h[10];
    struct kvik_err err = {0};
    struct vec_search sp = {.k = 10, .threshold = -INFINITY};
    while (!*w->stop) {
        int n = vec_search(w->s, w->qs + (size_t)(w->searches % Q) * DIM, &sp, h, &err);
        if (n < 0) w->bad++;
        for (int i = 1; i < n; i++) w->bad += h[i].score > h[i - 1].score;
        w->searches++;
    }
    return NULL;
}

TEST(vector_searches_during_inserts) {
    float *x = make_data(3000 + Q, DIM, 9), *qs = x + (size_t)3000 * DIM;
    struct vec_store *s = build(x, 200, VEC_I8, VEC_HNSW, 64);
    _Atomic int stop = 0;
    struct searcher w[2] = {{s, qs, &stop, 0, 0}, {s, qs, &stop, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&th[i], NULL, search_loop, &w[i]) == 0);
    struct kvik_err err = {0};
    for (int i = 200; i < 3000; i++) {
        CHECK(vec_add(s, (uint64_t)i, x + (size_t)i * DIM, NULL, 0, &err) == KVIK_OK);
        if (i % 500 == 0) vec_delete(s, (uint64_t)(i - 100));
    }
    stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(w[0].bad == 0 && w[1].bad == 0);
    CHECK(w[0].searches + w[1].searches > 0);
    CHECK_EQ_INT((int)vec_count(s), 3000 - 5);
    vec_store_free(s);
    free(x);
}

TEST(vector_bad_input) {
    struct vec_config c = vec_config_default(4);
    struct kvik_err err = {0};
    struct vec_store *s = vec_store_new(&c, &err);
    REQUIRE(s);
    float zero[4] = {0}, nan[4] = {1, NAN, 0, 0}, one[4] = {1, 0, 0, 0};
    CHECK(vec_add(s, 1, zero, NULL, 0, &err) == KVIK_ERR_INVALID_ARG);
    CHECK(vec_add(s, 1, nan, NULL, 0, &err) == KVIK_ERR_INVALID_ARG);
    struct vec_hit h[2];
    struct vec_search p = {.k = 2, .threshold = -INFINITY};
    CHECK_EQ_INT(vec_search(s, one, &p, h, &err), 0); /* empty store: an empty answer */
    CHECK(vec_add(s, 1, one, NULL, 0, &err) == KVIK_OK);
    CHECK_EQ_INT(vec_search(s, one, &p, h, &err), 1);
    struct vec_search k0 = {.k = 0};
    CHECK(vec_search(s, one, &k0, h, &err) == KVIK_ERR_INVALID_ARG);
    CHECK(vec_search(s, zero, &p, h, &err) == KVIK_ERR_INVALID_ARG);
    vec_store_free(s);
    c.dim = 0;
    CHECK(vec_store_new(&c, &err) == NULL);
}
