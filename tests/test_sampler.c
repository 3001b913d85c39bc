/*
 * test_sampler.c — the sampling chain: greedy, determinism, top-k, top-p,
 * min-p, penalties, parameter validation and NaN/inf logits. Frequency
 * checks draw many times with a fixed seed and use loose chi-square bounds.
 */
#include <float.h>
#include <stdlib.h>

#include "engine/sampler.h"
#include "test.h"

static struct sampler_params plain_params(void) {
    /* every filter off, temperature 1: draws follow softmax(logits) */
    struct sampler_params p = sampler_params_default();
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 1234;
    return p;
}

/* Draws n tokens and counts them into hist[n_vocab]. */
static void draw_counts(struct sampler *s, const float *logits, int n, int *hist) {
    for (int i = 0; i < n; i++) hist[sampler_sample(s, logits)]++;
}

/* Pearson chi-square of observed counts against expected probabilities. */
static double chi_square(const int *obs, const double *prob, int k, int n) {
    double x2 = 0;
    for (int i = 0; i < k; i++) {
        double e = prob[i] * n;
        x2 += (obs[i] - e) * (obs[i] - e) / e;
    }
    return x2;
}

TEST(sampler_greedy_argmax_lowest_id_on_ties) {
    struct sampler_params p = sampler_params_default();
    p.temp = 0.0f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, 6, &err);
    REQUIRE(s);
    float a[6] = {0.1f, 3.0f, -2.0f, 2.9f, 3.0f, 1.0f};
    CHECK_EQ_INT(sampler_sample(s, a), 1);
    float b[6] = {5, 5, 5, 5, 5, 5};
    CHECK_EQ_INT(sampler_sample(s, b), 0);
    float c[6] = {-1, -1, -1, -1, -1, 7};
    CHECK_EQ_INT(sampler_sample(s, c), 5);
    /* logits are not modified */
    CHECK(a[1] == 3.0f && a[4] == 3.0f && a[2] == -2.0f);
    sampler_free(s);

    p.temp = -1.0f; /* negative temperature is greedy too */
    s = sampler_new(&p, 6, &err);
    REQUIRE(s);
    CHECK_EQ_INT(sampler_sample(s, a), 1);
    sampler_free(s);
}

TEST(sampler_same_seed_same_sequence) {
    enum { V = 1000, N = 200 };
    static float logits[V];
    uint64_t st = 7;
    for (int i = 0; i < V; i++) logits[i] = test_rand_uniform(&st, -3.0f, 3.0f);
    struct sampler_params p = sampler_params_default();
    p.seed = 42;
    struct kvik_err err = {0};
    struct sampler *a = sampler_new(&p, V, &err), *b = sampler_new(&p, V, &err);
    p.seed = 43;
    struct sampler *c = sampler_new(&p, V, &err);
    REQUIRE(a && b && c);
    CHECK(sampler_seed(a) == 42);
    int same = 0, differ = 0;
    int32_t first[N];
    for (int i = 0; i < N; i++) {
        int32_t ta = sampler_sample(a, logits), tb = sampler_sample(b, logits);
        int32_t tc = sampler_sample(c, logits);
        first[i] = ta;
        same += ta == tb;
        differ += ta != tc;
    }
    CHECK_EQ_INT(same, N);
    CHECK(differ > N / 4);
    /* reset restarts the stream */
    sampler_reset(a);
    int again = 0;
    for (int i = 0; i < N; i++) again += sampler_sample(a, logits) == first[i];
    CHECK_EQ_INT(again, N);
    sampler_free(a);
    sampler_free(b);
    sampler_free(c);

    /* the random seed is resolved to something else than the marker */
    p.seed = SAMPLER_SEED_RANDOM;
    struct sampler *r = sampler_new(&p, V, &err);
    REQUIRE(r);
    CHECK(sampler_seed(r) != SAMPLER_SEED_RANDOM);
    sampler_free(r);
}

TEST(sampler_top_k_1_is_greedy) {
    enum { V = 5000 };
    static float logits[V];
    struct sampler_params p = sampler_params_default();
    p.top_k = 1;
    p.temp = 1.5f;
    p.seed = 9;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, V, &err);
    REQUIRE(s);
    uint64_t st = 11;
    int bad = 0;
    for (int r = 0; r < 50; r++) {
        int32_t arg = 0;
        for (int i = 0; i < V; i++) {
            logits[i] = test_rand_uniform(&st, -5.0f, 5.0f);
            if (logits[i] > logits[arg]) arg = i;
        }
        bad += sampler_sample(s, logits) != arg;
    }
    CHECK_EQ_INT(bad, 0);
    sampler_free(s);
}

TEST(sampler_top_k_keeps_only_k_best) {
    enum { V = 20000, K = 40 };
    static float logits[V];
    uint64_t st = 5;
    for (int i = 0; i < V; i++) logits[i] = test_rand_uniform(&st, 0.0f, 1.0f);
    /* the K-th best logit */
    static float sorted[V];
    memcpy(sorted, logits, sizeof sorted);
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < V; j++)
            if (sorted[j] > sorted[i]) {
                float t = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = t;
            }
    float kth = sorted[K - 1];
    struct sampler_params p = plain_params();
    p.top_k = K;
    p.temp = 100.0f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, V, &err);
    REQUIRE(s);
    int outside = 0, distinct = 0;
    static int hist[V];
    memset(hist, 0, sizeof hist);
    draw_counts(s, logits, 4000, hist);
    for (int i = 0; i < V; i++) {
        if (hist[i] && logits[i] < kth) outside++;
        distinct += hist[i] > 0;
    }
    CHECK_EQ_INT(outside, 0);
    CHECK_EQ_INT(distinct, K); /* nearly flat logits: ~100 draws each */
    sampler_free(s);

    /* equal logits: the k lowest ids */
    for (int i = 0; i < V; i++) logits[i] = 1.0f;
    p.top_k = 3;
    s = sampler_new(&p, V, &err);
    REQUIRE(s);
    memset(hist, 0, sizeof hist);
    draw_counts(s, logits, 600, hist);
    CHECK_EQ_INT(hist[0] + hist[1] + hist[2], 600);
    CHECK(hist[0] > 0 && hist[1] > 0 && hist[2] > 0);
    sampler_free(s);
}

TEST(sampler_top_p_smallest_set_and_frequencies) {
    /* p = 0.5, 0.25, 0.15, 0.1; top_p 0.7 keeps {0, 1} (0.75 >= 0.7) */
    float logits[4] = {logf(0.5f), logf(0.25f), logf(0.15f), logf(0.1f)};
    struct sampler_params p = plain_params();
    p.top_p = 0.7f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, 4, &err);
    REQUIRE(s);
    int hist[4] = {0};
    enum { N = 30000 };
    draw_counts(s, logits, N, hist);
    CHECK_EQ_INT(hist[2], 0);
    CHECK_EQ_INT(hist[3], 0);
    double prob[2] = {2.0 / 3.0, 1.0 / 3.0};
    double x2 = chi_square(hist, prob, 2, N);
    CHECK_MSG(x2 < 15.0, "chi-square %.2f (1 dof) for %d/%d", x2, hist[0], hist[1]);
    sampler_free(s);

    /* top_p 0.5 keeps only token 0 (0.5 >= 0.5) */
    p.top_p = 0.5f;
    s = sampler_new(&p, 4, &err);
    REQUIRE(s);
    int h2[4] = {0};
    draw_counts(s, logits, 2000, h2);
    CHECK_EQ_INT(h2[0], 2000);
    sampler_free(s);
}

TEST(sampler_top_p_large_vocab_without_top_k) {
    /* 1000 equal logits, top_p 0.5: the first 500 ids (ties -> lower id)
     * form the smallest set; exercises the growing sorted prefix */
    enum { V = 1000, N = 20000 };
    static float logits[V];
    for (int i = 0; i < V; i++) logits[i] = 0.25f;
    struct sampler_params p = plain_params();
    p.top_p = 0.5f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, V, &err);
    REQUIRE(s);
    static int hist[V];
    memset(hist, 0, sizeof hist);
    draw_counts(s, logits, N, hist);
    int above = 0, low = 0, high = 0;
    for (int i = 0; i < V; i++) {
        if (i >= 500) above += hist[i];
        else if (i < 250) low += hist[i];
        else high += hist[i];
    }
    CHECK_EQ_INT(above, 0);
    double prob[2] = {0.5, 0.5};
    int halves[2] = {low, high};
    CHECK(chi_square(halves, prob, 2, N) < 15.0);
    sampler_free(s);

    /* the same kept set whether top-k sorted first or not */
    uint64_t st = 3;
    for (int i = 0; i < V; i++) logits[i] = test_rand_uniform(&st, -4.0f, 4.0f);
    logits[17] = -100.0f; /* the single worst token, cut by top-p anyway */
    p.top_p = 0.9f;
    p.temp = 0.7f;
    struct sampler *a = sampler_new(&p, V, &err);
    p.top_k = V - 1;
    struct sampler *b = sampler_new(&p, V, &err);
    REQUIRE(a && b);
    int same = 0;
    for (int i = 0; i < 500; i++) same += sampler_sample(a, logits) == sampler_sample(b, logits);
    CHECK_EQ_INT(same, 500);
    sampler_free(a);
    sampler_free(b);
}

TEST(sampler_min_p_excludes_below_threshold) {
    /* p = .5 .3 .1 .06 .04; min_p .15 -> threshold .075 keeps {0,1,2} */
    float logits[5] = {logf(0.5f), logf(0.3f), logf(0.1f), logf(0.06f), logf(0.04f)};
    struct sampler_params p = plain_params();
    p.min_p = 0.15f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, 5, &err);
    REQUIRE(s);
    int hist[5] = {0};
    enum { N = 30000 };
    draw_counts(s, logits, N, hist);
    CHECK_EQ_INT(hist[3] + hist[4], 0);
    double prob[3] = {0.5 / 0.9, 0.3 / 0.9, 0.1 / 0.9};
    double x2 = chi_square(hist, prob, 3, N);
    CHECK_MSG(x2 < 20.0, "chi-square %.2f (2 dof)", x2);
    sampler_free(s);

    /* min_p 1: only the maximum survives */
    p.min_p = 1.0f;
    s = sampler_new(&p, 5, &err);
    REQUIRE(s);
    int h1[5] = {0};
    draw_counts(s, logits, 500, h1);
    CHECK_EQ_INT(h1[0], 500);
    sampler_free(s);
}

TEST(sampler_temperature_sharpens) {
    /* temp 0.5 squares the probabilities: .6/.4 -> .36/.16 -> 9/13, 4/13 */
    float logits[2] = {logf(0.6f), logf(0.4f)};
    struct sampler_params p = plain_params();
    p.temp = 0.5f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, 2, &err);
    REQUIRE(s);
    int hist[2] = {0};
    enum { N = 30000 };
    draw_counts(s, logits, N, hist);
    double prob[2] = {9.0 / 13.0, 4.0 / 13.0};
    CHECK(chi_square(hist, prob, 2, N) < 15.0);
    sampler_free(s);
}

static int32_t greedy_after(struct sampler_params p, const float *logits, int32_t n_vocab,
                            const int32_t *accepted, int n_acc) {
    p.temp = 0.0f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, n_vocab, &err);
    if (!s) return -1;
    for (int i = 0; i < n_acc; i++) sampler_accept(s, accepted[i]);
    int32_t t = sampler_sample(s, logits);
    sampler_free(s);
    return t;
}

/* sampler_sample_argmax: greedy without penalties takes the argmax it is
 * given (the forward pass's; a different id here shows it is not looked
 * up again), -1 or an id out of range is looked up; penalties with a
 * history, or a temperature, ignore it. */
TEST(sampler_sample_argmax_given_is_used_only_when_greedy) {
    struct sampler_params p = sampler_params_default();
    p.temp = 0.0f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, 6, &err);
    REQUIRE(s);
    float a[6] = {0.1f, 3.0f, -2.0f, 2.9f, 3.0f, 1.0f};
    CHECK_EQ_INT(sampler_sample_argmax(s, a, 3), 3);
    CHECK_EQ_INT(sampler_sample_argmax(s, a, -1), 1);
    CHECK_EQ_INT(sampler_sample_argmax(s, a, 6), 1);
    float inf[6] = {0.0f, FLT_MAX, INFINITY, 1.0f, 0.0f, 0.0f}; /* +inf and FLT_MAX count as equal: the first */
    CHECK_EQ_INT(sampler_sample_argmax(s, inf, 2), 1);
    sampler_free(s);
    p.repeat_penalty = 2.0f; /* 3.0 seen: 1.5, below 2.9 */
    s = sampler_new(&p, 6, &err);
    REQUIRE(s);
    sampler_accept(s, 1);
    sampler_accept(s, 4);
    CHECK_EQ_INT(sampler_sample_argmax(s, a, 1), 3);
    sampler_free(s);
    p = plain_params();
    p.top_k = 1;
    s = sampler_new(&p, 6, &err);
    REQUIRE(s);
    CHECK_EQ_INT(sampler_sample_argmax(s, a, 5), 1);
    sampler_free(s);
}

TEST(sampler_penalties_change_the_choice) {
    struct sampler_params p = sampler_params_default();
    int32_t zero[3] = {0, 0, 0};

    /* repetition: positive logit divided 2.0/1.1 = 1.82 < 1.9 */
    float pos[3] = {2.0f, 1.9f, 0.0f};
    p.repeat_penalty = 1.1f;
    CHECK_EQ_INT(greedy_after(p, pos, 3, NULL, 0), 0);
    CHECK_EQ_INT(greedy_after(p, pos, 3, zero, 1), 1);
    /* repetition: negative logit multiplied -1.0*1.1 = -1.1 < -1.05 */
    float neg[3] = {-1.0f, -1.05f, -3.0f};
    CHECK_EQ_INT(greedy_after(p, neg, 3, zero, 1), 1);
    /* repeated many times: still applied once (not per occurrence) */
    float pos2[3] = {2.0f, 1.7f, 0.0f};
    CHECK_EQ_INT(greedy_after(p, pos2, 3, zero, 3), 0);
    p.repeat_penalty = 1.0f;

    /* frequency: 1.0 - c*0.15 */
    float f[3] = {1.0f, 0.8f, 0.0f};
    p.frequency_penalty = 0.15f;
    CHECK_EQ_INT(greedy_after(p, f, 3, zero, 1), 0); /* 0.85 */
    CHECK_EQ_INT(greedy_after(p, f, 3, zero, 2), 1); /* 0.70 */
    p.frequency_penalty = 0.0f;

    /* presence: once is enough, count does not matter */
    p.presence_penalty = 0.3f;
    CHECK_EQ_INT(greedy_after(p, f, 3, zero, 1), 1);
    p.presence_penalty = 0.1f;
    CHECK_EQ_INT(greedy_after(p, f, 3, zero, 3), 0); /* 0.9 */
    p.presence_penalty = 0.3f;

    /* window: with repeat_last_n 2, token 0 falls out after two others */
    p.repeat_last_n = 2;
    int32_t seq[3] = {0, 2, 2};
    CHECK_EQ_INT(greedy_after(p, f, 3, seq, 3), 0);
    CHECK_EQ_INT(greedy_after(p, f, 3, seq, 2), 1);
    /* repeat_last_n 0: no penalties at all */
    p.repeat_last_n = 0;
    CHECK_EQ_INT(greedy_after(p, f, 3, zero, 3), 0);
    p.repeat_last_n = 64;

    /* out-of-range tokens are ignored; reset forgets the history */
    struct kvik_err err = {0};
    p.temp = 0.0f;
    struct sampler *s = sampler_new(&p, 3, &err);
    REQUIRE(s);
    sampler_accept(s, -1);
    sampler_accept(s, 3);
    CHECK_EQ_INT(sampler_sample(s, f), 0);
    sampler_accept(s, 0);
    CHECK_EQ_INT(sampler_sample(s, f), 1);
    sampler_reset(s);
    CHECK_EQ_INT(sampler_sample(s, f), 0);
    sampler_free(s);
}

TEST(sampler_rejects_invalid_params) {
    struct kvik_err err = {0};
    struct sampler_params ok = sampler_params_default();
    CHECK_EQ_INT(sampler_params_validate(&ok, &err), KVIK_OK);
    struct sampler_params p;
#define BAD(field, value)                                                          \
    do {                                                                           \
        p = ok;                                                                    \
        p.field = value;                                                           \
        err.msg[0] = 0;                                                            \
        CHECK(sampler_new(&p, 10, &err) == NULL);                                  \
        CHECK_EQ_INT(err.code, KVIK_ERR_INVALID_ARG);                              \
        CHECK_MSG(strstr(err.msg, #field) != NULL, "message: %s", err.msg);        \
    } while (0)
    BAD(temp, NAN);
    BAD(temp, INFINITY);
    BAD(top_k, -1);
    BAD(top_p, 0.0f);
    BAD(top_p, 1.5f);
    BAD(top_p, NAN);
    BAD(min_p, -0.1f);
    BAD(min_p, 1.01f);
    BAD(min_p, NAN);
    BAD(repeat_penalty, 0.0f);
    BAD(repeat_penalty, INFINITY);
    BAD(repeat_last_n, -1);
    BAD(frequency_penalty, NAN);
    BAD(presence_penalty, -INFINITY);
#undef BAD
    CHECK(sampler_new(&ok, 0, &err) == NULL);
    CHECK_EQ_INT(err.code, KVIK_ERR_INVALID_ARG);
    CHECK(sampler_new(NULL, 10, &err) == NULL);
    sampler_free(NULL);
}

TEST(sampler_nan_and_inf_logits) {
    struct kvik_err err = {0};
    struct sampler_params g = sampler_params_default();
    g.temp = 0.0f;
    struct sampler_params r = sampler_params_default();
    r.seed = 77;
    struct sampler *sg = sampler_new(&g, 4, &err), *sr = sampler_new(&r, 4, &err);
    REQUIRE(sg && sr);

    float a[4] = {NAN, 1.0f, 2.0f, NAN}; /* NaN counts as -inf */
    CHECK_EQ_INT(sampler_sample(sg, a), 2);
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        int32_t t = sampler_sample(sr, a);
        bad += t == 0 || t == 3;
    }
    CHECK_EQ_INT(bad, 0);

    float b[4] = {NAN, NAN, NAN, NAN}; /* nothing finite: lowest id */
    CHECK_EQ_INT(sampler_sample(sg, b), 0);
    CHECK_EQ_INT(sampler_sample(sr, b), 0);
    float c[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK_EQ_INT(sampler_sample(sr, c), 0);

    float d[4] = {1.0f, INFINITY, 3.0f, INFINITY}; /* +inf tokens share the mass */
    CHECK_EQ_INT(sampler_sample(sg, d), 1);
    /* greedy: +inf counts as FLT_MAX (the first of them wins), NaN as -inf */
    float e1[4] = {NAN, FLT_MAX, INFINITY, 2.0f}, e2[4] = {NAN, -INFINITY, NAN, -1.0f}, e3[4] = {INFINITY, 1.0f, FLT_MAX, 0.0f};
    CHECK_EQ_INT(sampler_sample(sg, e1), 1);
    CHECK_EQ_INT(sampler_sample(sg, e2), 3);
    CHECK_EQ_INT(sampler_sample(sg, e3), 0);
    int h[4] = {0};
    draw_counts(sr, d, 2000, h);
    CHECK_EQ_INT(h[0] + h[2], 0);
    CHECK(h[1] > 700 && h[3] > 700);

    /* penalties on an inf/NaN history never produce NaN */
    struct sampler_params q = r;
    q.repeat_penalty = 1.3f;
    q.frequency_penalty = -1e38f;
    q.presence_penalty = -1e38f;
    struct sampler *sq = sampler_new(&q, 4, &err);
    REQUIRE(sq);
    for (int i = 0; i < 4; i++) sampler_accept(sq, i);
    for (int i = 0; i < 50; i++) {
        int32_t t = sampler_sample(sq, d);
        CHECK(t >= 0 && t < 4);
        t = sampler_sample(sq, a);
        CHECK(t >= 0 && t < 4);
    }
    sampler_free(sq);
    sampler_free(sg);
    sampler_free(sr);
}

TEST(sampler_large_vocab_default_chain) {
    /* 152k vocab, default params with a penalty: stays in range, is fast
     * enough (no full sort) and deterministic. */
    enum { V = 152064 };
    float *logits = malloc(sizeof(float) * V);
    REQUIRE(logits);
    uint64_t st = 99;
    for (int i = 0; i < V; i++) logits[i] = test_rand_uniform(&st, -10.0f, 10.0f);
    struct sampler_params p = sampler_params_default();
    p.seed = 5;
    p.repeat_penalty = 1.1f;
    struct kvik_err err = {0};
    struct sampler *s = sampler_new(&p, V, &err);
    p.top_k = 0; /* top-p over the whole vocabulary */
    struct sampler *s2 = sampler_new(&p, V, &err);
    if (!s || !s2) {
        free(logits);
        sampler_free(s);
        sampler_free(s2);
        REQUIRE(false);
    }
    int64_t t0 = clock_ns();
    int bad = 0;
    for (int i = 0; i < 100; i++) {
        int32_t t = sampler_sample(s, logits);
        bad += t < 0 || t >= V || logits[t] < 8.0f; /* top-40 of U(-10,10) over 152k */
        sampler_accept(s, t);
        t = sampler_sample(s2, logits);
        bad += t < 0 || t >= V;
        sampler_accept(s2, t);
    }
    double ms = (double)(clock_ns() - t0) / 1e6 / 200;
    CHECK_EQ_INT(bad, 0);
    CHECK_MSG(ms < 50.0, "%.2f ms per sample", ms);
    free(logits);
    sampler_free(s);
    sampler_free(s2);
}

/* Greedy picks the largest sanitised logit, the lowest id among equals:
 * against a plain scan, on vocabularies of every length mod 4 with few
 * distinct values (many ties), NaN, +inf, -inf and FLT_MAX mixed in. */
TEST(sampler_greedy_equals_plain_argmax) {
    uint64_t rng = 77;
    static const float special[] = {NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX};
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)(test_rand_u64(&rng) % 300);
        float *l = malloc((size_t)n * sizeof *l);
        REQUIRE(l);
        for (int i = 0; i < n; i++) {
            uint64_t r = test_rand_u64(&rng);
            l[i] = r % 50 == 0 ? special[(r >> 8) % 5] : (float)((r >> 16) % 7) - 3.0f;
        }
        int32_t want = 0;
        float bv = isnan(l[0]) ? -INFINITY : l[0] == INFINITY ? FLT_MAX : l[0];
        for (int i = 1; i < n; i++) {
            float v = isnan(l[i]) ? -INFINITY : l[i] == INFINITY ? FLT_MAX : l[i];
            if (v > bv) bv = v, want = i;
        }
        struct sampler_params p = sampler_params_default();
        p.temp = 0;
        struct kvik_err err = {0};
        struct sampler *s = sampler_new(&p, n, &err);
        REQUIRE(s);
        CHECK_EQ_INT(sampler_sample(s, l), want);
        sampler_free(s);
        free(l);
    }
}

/* ---- shared scratch ----------------------------------------------------- */

/* Greedy with penalties by brute force: counts from the last window
 * tokens of hist[0..n), then the argmax of the penalised logits. */
static int32_t greedy_reference(const struct sampler_params *p, const float *logits, int32_t nv, const int32_t *hist,
                                int n) {
    int32_t *cnt = calloc((size_t)nv, sizeof *cnt);
    for (int i = n - p->repeat_last_n > 0 ? n - p->repeat_last_n : 0; i < n; i++) cnt[hist[i]]++;
    int32_t best = 0;
    float bv = -INFINITY;
    for (int32_t t = 0; t < nv; t++) {
        float v = logits[t];
        if (cnt[t] > 0) {
            v = v > 0.0f ? v / p->repeat_penalty : v * p->repeat_penalty;
            v -= (float)cnt[t] * p->frequency_penalty + p->presence_penalty;
        }
        if (v > bv) bv = v, best = t;
    }
    free(cnt);
    return best;
}

TEST(sampler_shared_scratch_holds_no_vocab_buffers) {
    enum { NV = 49152, NS = 256 };
    struct kvik_err err = {0};
    struct sampler_params p = sampler_params_default();
    p.seed = 7;
    /* its own scratch: 16 bytes per token (candidates, stamps, counts) */
    struct sampler *own = sampler_new(&p, NV, &err);
    REQUIRE(own);
    CHECK_MSG(sampler_bytes(own) >= (size_t)NV * 16, "own scratch: %zu bytes", sampler_bytes(own));
    /* a queue of 256 samplers sharing one scratch: a few hundred bytes each */
    struct sampler_scratch *sc = sampler_scratch_new(NV, &err);
    REQUIRE(sc);
    struct sampler *q[NS];
    size_t total = 0;
    for (int i = 0; i < NS; i++) {
        struct sampler_params pi = p;
        pi.repeat_penalty = i % 2 ? 1.1f : 1.0f; /* penalties on or off: no counts either way */
        q[i] = sampler_new_shared(&pi, NV, sc, &err);
        REQUIRE(q[i]);
        total += sampler_bytes(q[i]);
    }
    CHECK_MSG(total < (size_t)NS * 1024, "256 shared samplers hold %zu bytes", total);
    for (int i = 0; i < NS; i++) sampler_free(q[i]);
    sampler_free(own);
    /* a scratch of another vocabulary size is refused */
    CHECK(sampler_new_shared(&p, NV - 1, sc, &err) == NULL);
    CHECK_EQ_INT(err.code, KVIK_ERR_INVALID_ARG);
    sampler_scratch_free(sc);
    CHECK_EQ_INT(sampler_scratch_new(0, &err) == NULL, 1);
}

TEST(sampler_shared_scratch_same_tokens_as_own) {
    /* four samplers take turns on one scratch, with penalties and sliding
     * windows, and each draws exactly what a sampler with its own scratch
     * draws; greedy ones also match a brute-force reference */
    enum { NV = 300, NSMP = 4, STEPS = 400 };
    struct kvik_err err = {0};
    struct sampler_scratch *sc = sampler_scratch_new(NV, &err);
    REQUIRE(sc);
    struct sampler_params ps[NSMP];
    struct sampler *shared[NSMP], *own[NSMP];
    int32_t *hist[NSMP];
    for (int k = 0; k < NSMP; k++) {
        ps[k] = sampler_params_default();
        ps[k].seed = 100 + (uint64_t)k;
        ps[k].temp = k % 2 ? 0.9f : 0.0f;
        ps[k].repeat_penalty = k == 2 ? 1.0f : 1.0f + 0.1f * (float)(k + 1);
        ps[k].frequency_penalty = 0.05f * (float)(k + 1);
        ps[k].presence_penalty = k >= 2 ? 0.2f : 0.0f;
        ps[k].repeat_last_n = 5 + 7 * k;
        shared[k] = sampler_new_shared(&ps[k], NV, sc, &err);
        own[k] = sampler_new(&ps[k], NV, &err);
        hist[k] = malloc(STEPS * sizeof *hist[k]);
        REQUIRE(shared[k] && own[k] && hist[k]);
    }
    uint64_t rs = 42;
    float logits[NV];
    for (int step = 0; step < STEPS; step++)
        for (int k = 0; k < NSMP; k++) {
            /* 24 high logits, some in the window and some not, close
             * enough that the penalties decide often */
            for (int t = 0; t < NV; t++) logits[t] = test_rand_uniform(&rs, -4.0f, 0.0f);
            for (int t = 0; t < 24; t++) logits[t * 11] = test_rand_uniform(&rs, 0.5f, 2.0f);
            int32_t a = sampler_sample(shared[k], logits), b = sampler_sample(own[k], logits);
            if (a != b) {
                test_fail(__FILE__, __LINE__, "sampler %d step %d: shared scratch %d, own %d", k, step, a, b);
                step = STEPS;
                break;
            }
            if (ps[k].temp <= 0.0f) CHECK_EQ_INT(a, greedy_reference(&ps[k], logits, NV, hist[k], step));
            hist[k][step] = a;
            sampler_accept(shared[k], a);
            sampler_accept(own[k], a);
        }
    for (int k = 0; k < NSMP; k++) {
        sampler_free(shared[k]);
        sampler_free(own[k]);
        free(hist[k]);
    }
    sampler_scratch_free(sc);
}
