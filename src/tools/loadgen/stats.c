/*
 * stats.c — what one request measured and what a run adds up to.
 *
 *   TTFT  send -> first event that carried text
 *   ITL   every gap between consecutive text-carrying events of a request
 *   TPOT  (E2E - TTFT) / (output tokens - 1), output tokens from the usage
 *         the server reported (else the count of text-carrying events)
 *   E2E   send -> last byte of the response
 *
 * Latencies are summarised over successful requests only; throughputs divide
 * by the run's duration, first send to last end. Goodput counts the
 * successful requests that meet every objective given (--slo).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/loadgen/loadgen.h"

const char *lg_error_name(enum lg_error e) {
    static const char *names[LG_ERR_COUNT] = {
        [LG_ERR_NONE] = "none",           [LG_ERR_CONNECT] = "connect",
        [LG_ERR_HTTP] = "http",           [LG_ERR_MALFORMED] = "malformed",
        [LG_ERR_STREAM] = "stream_error", [LG_ERR_DISCONNECT] = "disconnect",
        [LG_ERR_TIMEOUT] = "timeout",
    };
    return (unsigned)e < LG_ERR_COUNT ? names[e] : "unknown";
}

double lg_record_ttft_ms(const struct lg_record *r) {
    if (r->n_chunks < 1) return NAN;
    return (double)(r->chunk_ns[0] - r->t_send_ns) * 1e-6;
}

double lg_record_e2e_ms(const struct lg_record *r) { return (double)(r->t_end_ns - r->t_send_ns) * 1e-6; }

double lg_record_tpot_ms(const struct lg_record *r) {
    if (r->n_chunks < 1 || r->output_tokens < 2) return NAN;
    return (lg_record_e2e_ms(r) - lg_record_ttft_ms(r)) / (double)(r->output_tokens - 1);
}

double lg_percentile(const double *x, int64_t n, double p) {
    if (n <= 0) return NAN;
    if (p <= 0) return x[0];
    if (p >= 100) return x[n - 1];
    double pos = (double)(n - 1) * p / 100.0;
    int64_t lo = (int64_t)floor(pos);
    if (lo >= n - 1) return x[n - 1];
    double f = pos - (double)lo;
    return x[lo] + (x[lo + 1] - x[lo]) * f;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void lg_dist_compute(double *x, int64_t n, struct lg_dist *d) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(x[i])) x[m++] = x[i];
    memset(d, 0, sizeof *d);
    d->n = m;
    if (m == 0) {
        d->mean = d->median = d->p90 = d->p99 = d->min = d->max = NAN;
        return;
    }
    qsort(x, (size_t)m, sizeof *x, cmp_double);
    double sum = 0;
    for (int64_t i = 0; i < m; i++) sum += x[i];
    d->mean = sum / (double)m;
    d->median = lg_percentile(x, m, 50);
    d->p90 = lg_percentile(x, m, 90);
    d->p99 = lg_percentile(x, m, 99);
    d->min = x[0];
    d->max = x[m - 1];
}

bool lg_meets_slo(const struct lg_record *r, const struct lg_slo *slo) {
    if (r->error != LG_ERR_NONE) return false;
    if (!slo) return true;
    double e2e = lg_record_e2e_ms(r);
    double ttft = lg_record_ttft_ms(r);
    if (isnan(ttft)) ttft = e2e;
    double tpot = lg_record_tpot_ms(r);
    if (slo->ttft_ms > 0 && ttft > slo->ttft_ms) return false;
    if (slo->tpot_ms > 0 && !isnan(tpot) && tpot > slo->tpot_ms) return false;
    if (slo->e2e_ms > 0 && e2e > slo->e2e_ms) return false;
    return true;
}

void lg_summarize(const struct lg_record *recs, int64_t n, double duration_s, const struct lg_slo *slo,
                  struct lg_summary *s) {
    memset(s, 0, sizeof *s);
    s->n_requests = n;
    int64_t n_itl = 0, t0 = INT64_MAX, t1 = INT64_MIN;
    for (int64_t i = 0; i < n; i++) {
        const struct lg_record *r = &recs[i];
        s->n_errors[r->error < LG_ERR_COUNT ? r->error : LG_ERR_MALFORMED]++;
        if (r->t_send_ns < t0) t0 = r->t_send_ns;
        if (r->t_end_ns > t1) t1 = r->t_end_ns;
        if (r->error != LG_ERR_NONE) continue;
        s->n_ok++;
        if (r->n_chunks > 1) n_itl += r->n_chunks - 1;
        if (r->prompt_tokens > 0) s->prompt_tokens += r->prompt_tokens;
        if (r->output_tokens > 0) s->output_tokens += r->output_tokens;
        if (lg_meets_slo(r, slo)) s->n_good++;
    }
    s->n_errors[LG_ERR_NONE] = 0;
    if (duration_s <= 0 && n > 0 && t1 > t0) duration_s = (double)(t1 - t0) * 1e-9;
    s->duration_s = duration_s;
    if (duration_s > 0) {
        s->request_throughput = (double)s->n_ok / duration_s;
        s->output_throughput = (double)s->output_tokens / duration_s;
        s->total_token_throughput = (double)(s->prompt_tokens + s->output_tokens) / duration_s;
        s->goodput = (double)s->n_good / duration_s;
    }
    int64_t m = s->n_ok > 0 ? s->n_ok : 1;
    double *ttft = malloc(sizeof(double) * (size_t)m), *tpot = malloc(sizeof(double) * (size_t)m),
           *e2e = malloc(sizeof(double) * (size_t)m);
    double *itl = malloc(sizeof(double) * (size_t)(n_itl > 0 ? n_itl : 1));
    if (!ttft || !tpot || !e2e || !itl) {
        /* no memory: leave the distributions empty rather than fail the report */
        free(ttft), free(tpot), free(e2e), free(itl);
        double none = 0;
        lg_dist_compute(&none, 0, &s->ttft);
        s->tpot = s->itl = s->e2e = s->ttft;
        return;
    }
    int64_t k = 0, j = 0;
    for (int64_t i = 0; i < n; i++) {
        const struct lg_record *r = &recs[i];
        if (r->error != LG_ERR_NONE) continue;
        ttft[k] = lg_record_ttft_ms(r);
        tpot[k] = lg_record_tpot_ms(r);
        e2e[k] = lg_record_e2e_ms(r);
        k++;
        for (int32_t c = 1; c < r->n_chunks; c++) itl[j++] = (double)(r->chunk_ns[c] - r->chunk_ns[c - 1]) * 1e-6;
    }
    lg_dist_compute(ttft, k, &s->ttft);
    lg_dist_compute(tpot, k, &s->tpot);
    lg_dist_compute(e2e, k, &s->e2e);
    lg_dist_compute(itl, j, &s->itl);
    free(ttft), free(tpot), free(e2e), free(itl);
}

void lg_summarize_run(const struct lg_result *res, const struct lg_slo *slo, struct lg_summary *s) {
    lg_summarize(res->recs, res->n, res->duration_s, slo, s);
    s->max_in_flight = res->max_in_flight;
    s->cpu_user_s = res->cpu_user_s;
    s->cpu_sys_s = res->cpu_sys_s;
    s->cpu_pct = res->wall_s > 0 ? 100.0 * (res->cpu_user_s + res->cpu_sys_s) / res->wall_s : 0;
}
