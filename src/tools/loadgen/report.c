/*
 * report.c — what a run prints: the text table on stdout, the JSON file
 * (--json: configuration, summary, server view and one record per request),
 * the side-by-side comparison of two JSON files, and a sweep's table and JSON.
 *
 * JSON layout (numbers that are undefined, such as the TPOT of a one-token
 * reply, are null; an infinite rate is the string "inf"):
 *
 *   {"kvik_bench_serve": 1,
 *    "config":  {"url", "endpoint", "dataset", "model", "num_prompts", "rate",
 *                "burstiness", "max_concurrency", "seed", "slo": {...}},
 *    "summary": {"completed", "failed", "errors": {"connect": N, ...},
 *                "duration_s", "request_throughput", "output_throughput",
 *                "total_token_throughput", "goodput", "good", "prompt_tokens",
 *                "output_tokens", "max_in_flight", "cpu_user_s", "cpu_sys_s",
 *                "cpu_pct", "ttft_ms": {"mean", "median", "p90", "p99", "min",
 *                "max", "n"}, "tpot_ms", "itl_ms", "e2e_ms"},
 *    "server":  null or {"queue_time_mean_ms", "prefill_time_mean_ms",
 *                "requests_scheduled", "preemptions", "kv_cache_usage_peak", "polls"},
 *    "requests": [{"index", "arrival_s", "send_s", "ttft_ms", "tpot_ms",
 *                "e2e_ms", "prompt_tokens", "output_tokens", "usage",
 *                "error", "http_status", "message", "itl_ms": [...]}, ...]}
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/loadgen/loadgen.h"

static json_t *num(double x) { return isnan(x) || isinf(x) ? json_null() : json_real(x); }

static json_t *rate_json(double rate) { return !(rate > 0) || isinf(rate) ? json_string("inf") : json_real(rate); }

static void rate_text(char *buf, size_t n, double rate) {
    if (!(rate > 0) || isinf(rate)) snprintf(buf, n, "inf");
    else snprintf(buf, n, "%g", rate);
}

/* ---- text ---------------------------------------------------------------------- */

static void dist_row(FILE *f, const char *name, const struct lg_dist *d) {
    if (d->n == 0) {
        fprintf(f, "  %-6s %10s %10s %10s %10s %8s\n", name, "-", "-", "-", "-", "0");
        return;
    }
    fprintf(f, "  %-6s %10.2f %10.2f %10.2f %10.2f %8lld\n", name, d->mean, d->median, d->p90, d->p99,
            (long long)d->n);
}

void lg_report_text(FILE *f, const struct lg_run_info *in, const struct lg_summary *s,
                    const struct lg_server_view *sv) {
    char rate[32];
    rate_text(rate, sizeof rate, in->rate);
    fprintf(f, "kvik bench serve: %s (%s endpoint), model %s\n", in->url, in->endpoint,
            in->model && *in->model ? in->model : "(not named)");
    fprintf(f, "  dataset %s, %lld prompts, rate %s req/s", in->dataset, (long long)in->num_prompts, rate);
    if (strcmp(rate, "inf") != 0) fprintf(f, " (burstiness %g)", in->burstiness);
    if (in->max_concurrency > 0) fprintf(f, ", max concurrency %d", in->max_concurrency);
    fprintf(f, ", seed %llu\n\n", (unsigned long long)in->seed);

    int64_t failed = s->n_requests - s->n_ok;
    fprintf(f, "  %-30s %lld\n", "successful requests", (long long)s->n_ok);
    fprintf(f, "  %-30s %lld", "failed requests", (long long)failed);
    if (failed) {
        fprintf(f, " (");
        bool first = true;
        for (int e = 1; e < LG_ERR_COUNT; e++) {
            if (!s->n_errors[e]) continue;
            fprintf(f, "%s%s %lld", first ? "" : ", ", lg_error_name((enum lg_error)e), (long long)s->n_errors[e]);
            first = false;
        }
        fprintf(f, ")");
    }
    fprintf(f, "\n");
    fprintf(f, "  %-30s %.3f s\n", "duration", s->duration_s);
    fprintf(f, "  %-30s %lld / %lld\n", "prompt / output tokens", (long long)s->prompt_tokens,
            (long long)s->output_tokens);
    fprintf(f, "  %-30s %.2f req/s\n", "request throughput", s->request_throughput);
    fprintf(f, "  %-30s %.1f tok/s\n", "output token throughput", s->output_throughput);
    fprintf(f, "  %-30s %.1f tok/s\n", "total token throughput", s->total_token_throughput);
    if (in->slo.ttft_ms > 0 || in->slo.tpot_ms > 0 || in->slo.e2e_ms > 0) {
        char slo[96] = "";
        size_t k = 0;
        if (in->slo.ttft_ms > 0) k += (size_t)snprintf(slo + k, sizeof slo - k, "ttft<=%gms ", in->slo.ttft_ms);
        if (in->slo.tpot_ms > 0 && k < sizeof slo)
            k += (size_t)snprintf(slo + k, sizeof slo - k, "tpot<=%gms ", in->slo.tpot_ms);
        if (in->slo.e2e_ms > 0 && k < sizeof slo) snprintf(slo + k, sizeof slo - k, "e2e<=%gms ", in->slo.e2e_ms);
        fprintf(f, "  %-30s %.2f req/s (%lld of %lld met %s)\n", "goodput", s->goodput, (long long)s->n_good,
                (long long)s->n_requests, slo);
    }
    fprintf(f, "  %-30s %lld\n", "most requests in flight", (long long)s->max_in_flight);
    fprintf(f, "  %-30s %.3f s user + %.3f s sys = %.1f%% of one core\n", "generator CPU", s->cpu_user_s,
            s->cpu_sys_s, s->cpu_pct);
    fprintf(f, "\n  %-6s %10s %10s %10s %10s %8s\n", "ms", "mean", "median", "p90", "p99", "n");
    dist_row(f, "TTFT", &s->ttft);
    dist_row(f, "TPOT", &s->tpot);
    dist_row(f, "ITL", &s->itl);
    dist_row(f, "E2E", &s->e2e);
    if (sv && sv->available) {
        fprintf(f, "\n  server (/metrics, deltas over the run)\n");
        if (sv->queue_time_count > 0)
            fprintf(f, "  %-30s %.2f ms (%.0f requests)\n", "mean queue time",
                    1e3 * sv->queue_time_sum_s / sv->queue_time_count, sv->queue_time_count);
        else
            fprintf(f, "  %-30s -\n", "mean queue time");
        if (sv->prefill_time_count > 0)
            fprintf(f, "  %-30s %.2f ms\n", "mean prefill time", 1e3 * sv->prefill_time_sum_s / sv->prefill_time_count);
        else
            fprintf(f, "  %-30s -\n", "mean prefill time");
        fprintf(f, "  %-30s %.0f\n", "preemptions", sv->preemptions);
        if (sv->kv_usage_peak >= 0)
            fprintf(f, "  %-30s %.1f%% (%lld polls)\n", "peak KV-cache use", 100.0 * sv->kv_usage_peak,
                    (long long)sv->polls);
        else
            fprintf(f, "  %-30s -\n", "peak KV-cache use");
    }
}

/* ---- JSON ---------------------------------------------------------------------- */

static json_t *dist_json(const struct lg_dist *d) {
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:I}", "mean", num(d->mean), "median", num(d->median), "p90",
                     num(d->p90), "p99", num(d->p99), "min", num(d->min), "max", num(d->max), "n",
                     (json_int_t)d->n);
}

static json_t *config_json(const struct lg_run_info *in) {
    return json_pack("{s:s,s:s,s:s,s:s?,s:I,s:o,s:o,s:i,s:I,s:{s:o,s:o,s:o}}", "url", in->url ? in->url : "",
                     "endpoint", in->endpoint ? in->endpoint : "", "dataset", in->dataset ? in->dataset : "",
                     "model", in->model && *in->model ? in->model : NULL, "num_prompts", (json_int_t)in->num_prompts,
                     "rate", rate_json(in->rate), "burstiness", num(in->burstiness), "max_concurrency",
                     in->max_concurrency, "seed", (json_int_t)in->seed, "slo", "ttft_ms",
                     in->slo.ttft_ms > 0 ? json_real(in->slo.ttft_ms) : json_null(), "tpot_ms",
                     in->slo.tpot_ms > 0 ? json_real(in->slo.tpot_ms) : json_null(), "e2e_ms",
                     in->slo.e2e_ms > 0 ? json_real(in->slo.e2e_ms) : json_null());
}

static json_t *summary_json(const struct lg_summary *s) {
    json_t *errs = json_object();
    for (int e = 1; e < LG_ERR_COUNT; e++)
        json_object_set_new(errs, lg_error_name((enum lg_error)e), json_integer(s->n_errors[e]));
    return json_pack("{s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "completed",
                     (json_int_t)s->n_ok, "failed", (json_int_t)(s->n_requests - s->n_ok), "errors", errs,
                     "duration_s", num(s->duration_s), "request_throughput", num(s->request_throughput),
                     "output_throughput", num(s->output_throughput), "total_token_throughput",
                     num(s->total_token_throughput), "goodput", num(s->goodput), "good", (json_int_t)s->n_good,
                     "prompt_tokens", (json_int_t)s->prompt_tokens, "output_tokens", (json_int_t)s->output_tokens,
                     "max_in_flight", (json_int_t)s->max_in_flight, "cpu_user_s", num(s->cpu_user_s), "cpu_sys_s",
                     num(s->cpu_sys_s), "cpu_pct", num(s->cpu_pct), "ttft_ms",
                     dist_json(&s->ttft), "tpot_ms", dist_json(&s->tpot), "itl_ms", dist_json(&s->itl), "e2e_ms",
                     dist_json(&s->e2e));
}

static json_t *server_json(const struct lg_server_view *sv) {
    if (!sv || !sv->available) return json_null();
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:I}", "queue_time_mean_ms",
                     sv->queue_time_count > 0 ? json_real(1e3 * sv->queue_time_sum_s / sv->queue_time_count)
                                              : json_null(),
                     "prefill_time_mean_ms",
                     sv->prefill_time_count > 0 ? json_real(1e3 * sv->prefill_time_sum_s / sv->prefill_time_count)
                                                : json_null(),
                     "requests_scheduled", num(sv->queue_time_count), "preemptions", num(sv->preemptions),
                     "kv_cache_usage_peak", sv->kv_usage_peak >= 0 ? json_real(sv->kv_usage_peak) : json_null(),
                     "polls", (json_int_t)sv->polls);
}

static json_t *record_json(const struct lg_record *r) {
    json_t *itl = json_array();
    for (int32_t c = 1; c < r->n_chunks; c++)
        json_array_append_new(itl, json_real((double)(r->chunk_ns[c] - r->chunk_ns[c - 1]) * 1e-6));
    return json_pack("{s:I,s:o,s:o,s:o,s:o,s:o,s:I,s:I,s:b,s:s,s:i,s:s?,s:o}", "index", (json_int_t)r->index,
                     "arrival_s", num((double)r->t_arrival_ns * 1e-9), "send_s", num((double)r->t_send_ns * 1e-9),
                     "ttft_ms", num(lg_record_ttft_ms(r)), "tpot_ms", num(lg_record_tpot_ms(r)), "e2e_ms",
                     num(lg_record_e2e_ms(r)),
                     "prompt_tokens", (json_int_t)r->prompt_tokens, "output_tokens", (json_int_t)r->output_tokens,
                     "usage", r->usage_given, "error", lg_error_name(r->error), "http_status", r->http_status,
                     "message", r->error_msg, "itl_ms", itl);
}

static kvik_status dump(json_t *root, const char *path, struct kvik_err *err) {
    if (!root) return err_set(err, KVIK_ERR_NOMEM, "out of memory writing %s", path);
    int rc = !strcmp(path, "-") ? json_dumpf(root, stdout, JSON_INDENT(1)) : json_dump_file(root, path, JSON_INDENT(1));
    if (!strcmp(path, "-")) fputc('\n', stdout);
    json_decref(root);
    return rc ? err_set(err, KVIK_ERR_IO, "cannot write %s", path) : KVIK_OK;
}

kvik_status lg_report_json(const char *path, const struct lg_run_info *in, const struct lg_summary *s,
                           const struct lg_result *res, struct kvik_err *err) {
    json_t *reqs = json_array();
    for (int64_t i = 0; res && i < res->n; i++) json_array_append_new(reqs, record_json(&res->recs[i]));
    json_t *root = json_pack("{s:i,s:o,s:o,s:o,s:o}", "kvik_bench_serve", 1, "config", config_json(in), "summary",
                             summary_json(s), "server", server_json(res ? &res->server : NULL), "requests", reqs);
    return dump(root, path, err);
}

/* ---- compare ---------------------------------------------------------------------- */

struct cmp_row {
    const char *label, *key, *sub; /* summary[key] or summary[key][sub] */
    bool higher_better;
};

static const struct cmp_row k_rows[] = {
    {"completed requests", "completed", NULL, true},
    {"failed requests", "failed", NULL, false},
    {"duration s", "duration_s", NULL, false},
    {"request throughput req/s", "request_throughput", NULL, true},
    {"output throughput tok/s", "output_throughput", NULL, true},
    {"total throughput tok/s", "total_token_throughput", NULL, true},
    {"goodput req/s", "goodput", NULL, true},
    {"TTFT mean ms", "ttft_ms", "mean", false},
    {"TTFT median ms", "ttft_ms", "median", false},
    {"TTFT p99 ms", "ttft_ms", "p99", false},
    {"TPOT mean ms", "tpot_ms", "mean", false},
    {"TPOT median ms", "tpot_ms", "median", false},
    {"TPOT p99 ms", "tpot_ms", "p99", false},
    {"ITL median ms", "itl_ms", "median", false},
    {"ITL p99 ms", "itl_ms", "p99", false},
    {"E2E median ms", "e2e_ms", "median", false},
    {"E2E p99 ms", "e2e_ms", "p99", false},
    {"generator CPU %", "cpu_pct", NULL, false},
};

static json_t *load_report(const char *path, struct kvik_err *err) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        err_set(err, KVIK_ERR_FORMAT, "%s: %s (line %d)", path, je.text, je.line);
        return NULL;
    }
    if (!json_is_object(json_object_get(root, "summary"))) {
        err_set(err, KVIK_ERR_FORMAT, "%s: not a kvik bench serve report (no \"summary\")", path);
        json_decref(root);
        return NULL;
    }
    return root;
}

static bool get_num(json_t *summary, const struct cmp_row *r, double *out) {
    json_t *v = json_object_get(summary, r->key);
    if (r->sub) v = json_object_get(v, r->sub);
    if (!json_is_number(v)) return false;
    *out = json_number_value(v);
    return true;
}

kvik_status lg_report_compare(FILE *f, const char *path_a, const char *path_b, struct kvik_err *err) {
    json_t *a = load_report(path_a, err);
    if (!a) return err->code;
    json_t *b = load_report(path_b, err);
    if (!b) {
        json_decref(a);
        return err->code;
    }
    json_t *sa = json_object_get(a, "summary"), *sb = json_object_get(b, "summary");
    fprintf(f, "A: %s\nB: %s\n\n", path_a, path_b);
    fprintf(f, "  %-26s %12s %12s %8s\n", "", "A", "B", "B/A");
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++) {
        const struct cmp_row *r = &k_rows[i];
        double va = 0, vb = 0;
        bool ha = get_num(sa, r, &va), hb = get_num(sb, r, &vb);
        char ca[24] = "-", cb[24] = "-", cr[16] = "-";
        if (ha) snprintf(ca, sizeof ca, "%.2f", va);
        if (hb) snprintf(cb, sizeof cb, "%.2f", vb);
        if (ha && hb && va != 0) snprintf(cr, sizeof cr, "%.3f", vb / va);
        const char *mark = "";
        if (ha && hb && va != 0 && vb != va) mark = (vb > va) == r->higher_better ? "  (B better)" : "  (A better)";
        fprintf(f, "  %-26s %12s %12s %8s%s\n", r->label, ca, cb, cr, mark);
    }
    json_decref(a);
    json_decref(b);
    return KVIK_OK;
}

/* ---- sweep ------------------------------------------------------------------------ */

void lg_report_sweep_text(FILE *f, const struct lg_sweep_point *pts, int n) {
    bool conc = n > 0 && pts[0].concurrency > 0;
    fprintf(f, "  %-8s %8s %9s %10s %10s %10s %10s %10s %6s\n", conc ? "conc" : "rate", "req/s", "out tok/s",
            "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "goodput", "errors");
    for (int i = 0; i < n; i++) {
        const struct lg_sweep_point *p = &pts[i];
        char x[32];
        if (conc) snprintf(x, sizeof x, "%d", p->concurrency);
        else rate_text(x, sizeof x, p->rate);
        fprintf(f, "  %-8s %8.2f %9.1f %10.2f %10.2f %10.2f %10.2f %10.2f %6lld\n", x, p->s.request_throughput,
                p->s.output_throughput, p->s.ttft.median, p->s.ttft.p99, p->s.tpot.median, p->s.tpot.p99,
                p->s.goodput, (long long)(p->s.n_requests - p->s.n_ok));
    }
}

kvik_status lg_report_sweep_json(const char *path, const struct lg_run_info *in, const struct lg_sweep_point *pts,
                                 int n, struct kvik_err *err) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *p = json_pack("{s:o,s:i,s:o,s:o}", "rate", rate_json(pts[i].rate), "concurrency",
                              pts[i].concurrency, "summary", summary_json(&pts[i].s), "server",
                              server_json(&pts[i].sv));
        json_array_append_new(arr, p);
    }
    json_t *root = json_pack("{s:i,s:o,s:o}", "kvik_bench_sweep", 1, "config", config_json(in), "points", arr);
    return dump(root, path, err);
}

/* ---- reading reports back ---------------------------------------------------------- */

static double jnum(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void dist_from_json(json_t *o, struct lg_dist *d) {
    d->mean = jnum(o, "mean");
    d->median = jnum(o, "median");
    d->p90 = jnum(o, "p90");
    d->p99 = jnum(o, "p99");
    d->min = jnum(o, "min");
    d->max = jnum(o, "max");
    double n = jnum(o, "n");
    d->n = isnan(n) || n < 0 ? 0 : (int64_t)n;
}

static void summary_from_json(json_t *o, struct lg_summary *s) {
    memset(s, 0, sizeof *s);
    double ok = jnum(o, "completed"), failed = jnum(o, "failed"), good = jnum(o, "good");
    s->n_ok = isnan(ok) ? 0 : (int64_t)ok;
    s->n_requests = s->n_ok + (isnan(failed) ? 0 : (int64_t)failed);
    s->n_good = isnan(good) ? 0 : (int64_t)good;
    s->duration_s = jnum(o, "duration_s");
    s->request_throughput = jnum(o, "request_throughput");
    s->output_throughput = jnum(o, "output_throughput");
    s->total_token_throughput = jnum(o, "total_token_throughput");
    s->goodput = jnum(o, "goodput");
    s->cpu_pct = jnum(o, "cpu_pct");
    dist_from_json(json_object_get(o, "ttft_ms"), &s->ttft);
    dist_from_json(json_object_get(o, "tpot_ms"), &s->tpot);
    dist_from_json(json_object_get(o, "itl_ms"), &s->itl);
    dist_from_json(json_object_get(o, "e2e_ms"), &s->e2e);
}

kvik_status lg_sweep_load(const char *path, struct lg_sweep_point **pts, int *n, struct kvik_err *err) {
    *pts = NULL;
    *n = 0;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return err_set(err, KVIK_ERR_FORMAT, "%s: %s (line %d)", path, je.text, je.line);
    json_t *arr = json_object_get(root, "points");
    if (!json_is_array(arr)) {
        json_decref(root);
        return err_set(err, KVIK_ERR_FORMAT, "%s: not a kvik bench sweep report (no \"points\")", path);
    }
    size_t m = json_array_size(arr);
    struct lg_sweep_point *p = calloc(m ? m : 1, sizeof *p);
    if (!p) {
        json_decref(root);
        return err_set(err, KVIK_ERR_NOMEM, "out of memory reading %s", path);
    }
    for (size_t i = 0; i < m; i++) {
        json_t *o = json_array_get(arr, i);
        json_t *rate = json_object_get(o, "rate");
        p[i].rate = json_is_number(rate) ? json_number_value(rate) : INFINITY;
        json_t *c = json_object_get(o, "concurrency");
        p[i].concurrency = json_is_integer(c) ? (int32_t)json_integer_value(c) : 0;
        summary_from_json(json_object_get(o, "summary"), &p[i].s);
    }
    json_decref(root);
    *pts = p;
    *n = (int)m;
    return KVIK_OK;
}
