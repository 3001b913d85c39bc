/*
 * test_bench_serve_stats.c — the load generator's arithmetic on synthetic
 * timelines: percentiles with known answers, TTFT/TPOT/ITL/E2E of hand-made
 * records, goodput under objectives, the edge cases (no token, one token,
 * every request failed), and the arrival process (mean gap and coefficient
 * of variation of seeded Poisson and gamma sequences).
 */
#include <math.h>
#include <stdlib.h>

#include "test.h"
#include "tools/loadgen/loadgen.h"

#define NEAR(a, b, tol) (fabs((a) - (b)) <= (tol))

TEST(bench_serve_percentiles_known_answers) {
    double x[10];
    for (int i = 0; i < 10; i++) x[i] = i + 1; /* 1..10 */
    CHECK(NEAR(lg_percentile(x, 10, 50), 5.5, 1e-12));
    CHECK(NEAR(lg_percentile(x, 10, 90), 9.1, 1e-12));
    CHECK(NEAR(lg_percentile(x, 10, 99), 9.91, 1e-12));
    CHECK(NEAR(lg_percentile(x, 10, 0), 1, 0));
    CHECK(NEAR(lg_percentile(x, 10, 100), 10, 0));
    double two[2] = {0, 10};
    CHECK(NEAR(lg_percentile(two, 2, 25), 2.5, 1e-12));
    double one[1] = {7};
    CHECK(NEAR(lg_percentile(one, 1, 50), 7, 0));
    CHECK(NEAR(lg_percentile(one, 1, 99), 7, 0));
    CHECK(isnan(lg_percentile(x, 0, 50)));

    /* dist sorts, drops NANs and summarises */
    double y[7] = {5, NAN, 1, 4, 2, NAN, 3};
    struct lg_dist d;
    lg_dist_compute(y, 7, &d);
    CHECK_EQ_INT(d.n, 5);
    CHECK(NEAR(d.mean, 3, 1e-12));
    CHECK(NEAR(d.median, 3, 1e-12));
    CHECK(NEAR(d.p90, 4.6, 1e-12));
    CHECK(NEAR(d.p99, 4.96, 1e-12));
    CHECK(d.min == 1 && d.max == 5);
    double z[1];
    lg_dist_compute(z, 0, &d);
    CHECK(d.n == 0 && isnan(d.mean) && isnan(d.p99));
}

/* A record sent at send_ms whose n tokens arrive first_ms after it, then every gap_ms. */
static struct lg_record make_rec(int64_t *chunks, double send_ms, double first_ms, double gap_ms, int n) {
    struct lg_record r;
    memset(&r, 0, sizeof r);
    r.t_send_ns = (int64_t)(send_ms * 1e6);
    for (int i = 0; i < n; i++) chunks[i] = r.t_send_ns + (int64_t)((first_ms + gap_ms * i) * 1e6);
    r.chunk_ns = chunks;
    r.n_chunks = n;
    r.chunk_cap = n;
    r.output_tokens = n;
    r.prompt_tokens = 100;
    r.t_end_ns = n ? chunks[n - 1] + 1000000 : r.t_send_ns + (int64_t)(first_ms * 1e6); /* 1 ms after the last token */
    return r;
}

TEST(bench_serve_record_metrics) {
    int64_t c[16];
    struct lg_record r = make_rec(c, 1000, 100, 10, 10);
    /* TTFT 100; E2E = 100 + 9*10 + 1 = 191; TPOT = (191 - 100) / 9 */
    CHECK(NEAR(lg_record_ttft_ms(&r), 100, 1e-9));
    CHECK(NEAR(lg_record_e2e_ms(&r), 191, 1e-9));
    CHECK(NEAR(lg_record_tpot_ms(&r), 91.0 / 9.0, 1e-9));
    /* usage may say more tokens than events (several tokens in one event) */
    r.output_tokens = 14;
    CHECK(NEAR(lg_record_tpot_ms(&r), 91.0 / 13.0, 1e-9));

    /* one token: TTFT, no TPOT */
    struct lg_record one = make_rec(c, 0, 50, 0, 1);
    CHECK(NEAR(lg_record_ttft_ms(&one), 50, 1e-9));
    CHECK(isnan(lg_record_tpot_ms(&one)));
    /* no token: neither */
    struct lg_record none = make_rec(c, 0, 80, 0, 0);
    CHECK(isnan(lg_record_ttft_ms(&none)));
    CHECK(isnan(lg_record_tpot_ms(&none)));
    CHECK(NEAR(lg_record_e2e_ms(&none), 80, 1e-9));
}

TEST(bench_serve_summary_and_goodput) {
    int64_t c[4][8];
    struct lg_record r[5];
    r[0] = make_rec(c[0], 0, 100, 10, 5);   /* ttft 100, tpot (100+40+1-100)/4 = 10.25 */
    r[1] = make_rec(c[1], 100, 300, 10, 5); /* ttft 300: misses ttft=200 */
    r[2] = make_rec(c[2], 200, 50, 40, 5);  /* tpot (50+160+1-50)/4 = 40.25: misses tpot=20 */
    r[3] = make_rec(c[3], 300, 20, 0, 1);   /* one token: no TPOT, meets both */
    memset(&r[4], 0, sizeof r[4]);          /* a failure */
    r[4].t_send_ns = 400000000;
    r[4].t_end_ns = 450000000;
    r[4].error = LG_ERR_HTTP;
    struct lg_slo slo = {200, 20, 0};
    CHECK(lg_meets_slo(&r[0], &slo));
    CHECK(!lg_meets_slo(&r[1], &slo));
    CHECK(!lg_meets_slo(&r[2], &slo));
    CHECK(lg_meets_slo(&r[3], &slo));
    CHECK(!lg_meets_slo(&r[4], &slo));
    struct lg_summary s;
    lg_summarize(r, 5, 2.0, &slo, &s);
    CHECK_EQ_INT(s.n_requests, 5);
    CHECK_EQ_INT(s.n_ok, 4);
    CHECK_EQ_INT(s.n_good, 2);
    CHECK_EQ_INT(s.n_errors[LG_ERR_HTTP], 1);
    CHECK_EQ_INT(s.n_errors[LG_ERR_NONE], 0);
    CHECK_EQ_INT(s.output_tokens, 16);
    CHECK_EQ_INT(s.prompt_tokens, 400);
    CHECK(NEAR(s.goodput, 1.0, 1e-12));
    CHECK(NEAR(s.request_throughput, 2.0, 1e-12));
    CHECK(NEAR(s.output_throughput, 8.0, 1e-12));
    CHECK(NEAR(s.total_token_throughput, 208.0, 1e-12));
    CHECK_EQ_INT(s.ttft.n, 4);
    CHECK(NEAR(s.ttft.median, (50.0 + 100.0) / 2, 1e-9)); /* 20, 50, 100, 300 */
    CHECK_EQ_INT(s.tpot.n, 3);
    CHECK(NEAR(s.tpot.median, 10.25, 1e-9));
    CHECK_EQ_INT(s.itl.n, 12); /* 4 + 4 + 4 + 0 gaps */
    CHECK(NEAR(s.itl.max, 40, 1e-9));
    CHECK(NEAR(s.itl.min, 10, 1e-9));
    /* without an explicit duration: first send to last end */
    lg_summarize(r, 5, 0, NULL, &s);
    CHECK(NEAR(s.duration_s, 0.45, 1e-9));
    CHECK_EQ_INT(s.n_good, 4); /* no objectives: every success */

    /* no token at all: held to the TTFT objective with its E2E */
    int64_t cc[1];
    struct lg_record none = make_rec(cc, 0, 300, 0, 0);
    CHECK(!lg_meets_slo(&none, &slo));
    none = make_rec(cc, 0, 150, 0, 0);
    CHECK(lg_meets_slo(&none, &slo));
}

TEST(bench_serve_summary_all_errors) {
    struct lg_record r[3];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 3; i++) {
        r[i].t_send_ns = i * 1000000;
        r[i].t_end_ns = r[i].t_send_ns + 5000000;
        r[i].error = i == 0 ? LG_ERR_CONNECT : i == 1 ? LG_ERR_TIMEOUT : LG_ERR_DISCONNECT;
    }
    struct lg_slo slo = {100, 10, 0};
    struct lg_summary s;
    lg_summarize(r, 3, 0, &slo, &s);
    CHECK_EQ_INT(s.n_ok, 0);
    CHECK_EQ_INT(s.n_good, 0);
    CHECK_EQ_INT(s.n_errors[LG_ERR_CONNECT], 1);
    CHECK_EQ_INT(s.n_errors[LG_ERR_TIMEOUT], 1);
    CHECK_EQ_INT(s.n_errors[LG_ERR_DISCONNECT], 1);
    CHECK(s.request_throughput == 0 && s.output_throughput == 0 && s.goodput == 0);
    CHECK(s.ttft.n == 0 && s.tpot.n == 0 && s.itl.n == 0 && s.e2e.n == 0);
    CHECK(isnan(s.ttft.median));
    /* and no records at all */
    lg_summarize(NULL, 0, 0, &slo, &s);
    CHECK_EQ_INT(s.n_requests, 0);
    CHECK(s.duration_s == 0);
    CHECK(strcmp(lg_error_name(LG_ERR_DISCONNECT), "disconnect") == 0);
}

/* Mean and coefficient of variation of the gaps of n arrivals. */
static void gap_stats(const double *t, int n, double *mean, double *cv) {
    double s = 0, s2 = 0;
    for (int i = 1; i < n; i++) {
        double g = t[i] - t[i - 1];
        s += g;
        s2 += g * g;
    }
    int m = n - 1;
    *mean = s / m;
    double var = s2 / m - *mean * *mean;
    *cv = sqrt(var > 0 ? var : 0) / *mean;
}

TEST(bench_serve_arrivals) {
    enum { N = 20001 };
    double *t = malloc(sizeof(double) * N), *u = malloc(sizeof(double) * N);
    REQUIRE(t && u);
    static const double shapes[] = {1.0, 0.25, 4.0, 0.5};
    for (int k = 0; k < 4; k++) {
        double shape = shapes[k], mean, cv;
        lg_arrivals(5.0, shape, 42, N, t);
        CHECK(t[0] == 0);
        for (int i = 1; i < N; i++)
            if (!(t[i] >= t[i - 1])) {
                test_fail(__FILE__, __LINE__, "arrivals not in order at %d", i);
                break;
            }
        gap_stats(t, N, &mean, &cv);
        double want_cv = 1.0 / sqrt(shape);
        CHECK_MSG(fabs(mean - 0.2) < 0.2 * 0.04, "shape %g: mean gap %.4f, want 0.2", shape, mean);
        CHECK_MSG(fabs(cv - want_cv) < want_cv * 0.06, "shape %g: CV %.4f, want %.4f", shape, cv, want_cv);
        /* the same seed gives the same sequence, another seed another */
        lg_arrivals(5.0, shape, 42, N, u);
        CHECK(memcmp(t, u, sizeof(double) * N) == 0);
        lg_arrivals(5.0, shape, 43, N, u);
        CHECK(memcmp(t, u, sizeof(double) * N) != 0);
    }
    /* infinite rate (or none): everything at once */
    lg_arrivals(INFINITY, 1.0, 1, 100, t);
    for (int i = 0; i < 100; i++) CHECK(t[i] == 0);
    lg_arrivals(0, 1.0, 1, 100, t);
    CHECK(t[99] == 0);
    free(t);
    free(u);
}

TEST(bench_serve_rng_gamma_moments) {
    /* Gamma(k, 1) has mean k and variance k */
    struct prng r;
    prng_seed(&r, 7);
    static const double ks[] = {0.3, 1.0, 2.5, 9.0};
    for (int j = 0; j < 4; j++) {
        double k = ks[j], s = 0, s2 = 0;
        int n = 40000;
        for (int i = 0; i < n; i++) {
            double g = lg_rng_gamma(&r, k);
            if (!(g >= 0)) {
                test_fail(__FILE__, __LINE__, "gamma(%g) gave %g", k, g);
                return;
            }
            s += g;
            s2 += g * g;
        }
        double mean = s / n, var = s2 / n - mean * mean;
        CHECK_MSG(fabs(mean - k) < 0.03 * k + 0.01, "gamma(%g): mean %.4f", k, mean);
        CHECK_MSG(fabs(var - k) < 0.08 * k + 0.01, "gamma(%g): variance %.4f", k, var);
    }
    double u = 0;
    for (int i = 0; i < 1000; i++) {
        double x = prng_uniform(&r);
        CHECK(x >= 0 && x < 1);
        u += x;
    }
    CHECK(fabs(u / 1000 - 0.5) < 0.05);
}
