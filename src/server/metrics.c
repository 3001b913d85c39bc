/*
 * metrics.c — Prometheus text exposition (see metrics.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/metrics.h"
#include "server/response.h"

const char *metrics_reject_name(enum metrics_reject r) {
    static const char *const names[METRICS_REJECT_COUNT] = {
        [METRICS_REJECT_INVALID] = "invalid_request",
        [METRICS_REJECT_TOO_LARGE] = "too_large",
        [METRICS_REJECT_CONTEXT] = "context_length",
        [METRICS_REJECT_UNAUTHORIZED] = "unauthorized",
        [METRICS_REJECT_QUEUE_FULL] = "queue_full",
        [METRICS_REJECT_LOADING] = "loading",
        [METRICS_REJECT_DRAINING] = "draining",
        [METRICS_REJECT_NOT_FOUND] = "not_found",
        [METRICS_REJECT_TIMEOUT] = "timeout",
    };
    return (unsigned)r < METRICS_REJECT_COUNT ? names[r] : "unknown";
}

static void out(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(struct sbuf *b, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sbuf_add(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void head(struct sbuf *b, const char *name, const char *type, const char *help) {
    out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(struct sbuf *b, const char *name, const char *help, double v) {
    head(b, name, "gauge", help);
    out(b, "%s %.9g\n", name, v);
}

static void counter(struct sbuf *b, const char *name, const char *help, uint64_t v) {
    head(b, name, "counter", help);
    out(b, "%s %llu\n", name, (unsigned long long)v);
}

static void histogram(struct sbuf *b, const char *name, const char *help, const struct engine_hist *h) {
    static const struct engine_hist empty;
    if (!h) h = &empty;
    head(b, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i < ENGINE_HIST_BUCKETS; i++) {
        cum += h->counts[i];
        out(b, "%s_bucket{le=\"%.9g\"} %llu\n", name, engine_hist_bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[ENGINE_HIST_BUCKETS];
    out(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    out(b, "%s_sum %.9g\n", name, h->sum);
    out(b, "%s_count %llu\n", name, (unsigned long long)cum);
}

char *metrics_render(const struct engine_stats *st, const struct metrics_server *ms, size_t *len) {
    static const struct engine_stats zero;
    bool have = st != NULL;
    if (!st) st = &zero;
    struct sbuf b = {0};
    histogram(&b, "kvik_time_to_first_token_seconds", "Time from a request's arrival to its first generated token.",
              have ? &st->ttft : NULL);
    histogram(&b, "kvik_inter_token_latency_seconds", "Time between consecutive tokens of a choice.",
              have ? &st->itl : NULL);
    histogram(&b, "kvik_e2e_request_latency_seconds", "Time from a request's arrival to the end of a choice.",
              have ? &st->e2e : NULL);
    histogram(&b, "kvik_request_queue_time_seconds", "Time a request waited before it was first scheduled.",
              have ? &st->queue : NULL);
    histogram(&b, "kvik_request_prefill_time_seconds", "Time from first scheduling to the first token (prefill).",
              have ? &st->prefill : NULL);
    gauge(&b, "kvik_requests_running", "Requests with sequences in the running batch.", st->requests_running);
    gauge(&b, "kvik_requests_waiting", "Requests waiting to be scheduled.", st->requests_waiting);
    double ratio = st->kv_blocks_total > 0 ? (double)st->kv_blocks_used / (double)st->kv_blocks_total : 0.0;
    gauge(&b, "kvik_kv_cache_usage_ratio", "Fraction of KV-cache blocks in use (0..1).", ratio);
    /* the pool size is a gauge; a _total name is for counters only (promtool) */
    gauge(&b, "kvik_kv_cache_blocks", "KV-cache blocks in the pool.", (double)st->kv_blocks_total);
    gauge(&b, "kvik_kv_cache_blocks_used", "KV-cache blocks in use.", (double)st->kv_blocks_used);
    counter(&b, "kvik_prompt_tokens_total", "Prompt tokens prefilled.", st->prompt_tokens);
    counter(&b, "kvik_generation_tokens_total", "Tokens generated.", st->generation_tokens);
    counter(&b, "kvik_prefix_cache_queries_total", "Tokens looked up in the prefix cache.",
            st->prefix_queries);
    counter(&b, "kvik_prefix_cache_hits_total", "Tokens found in the prefix cache.", st->prefix_hits);
    counter(&b, "kvik_preemptions_total", "Sequences preempted when the KV cache ran out.", st->preemptions);
    counter(&b, "kvik_engine_steps_total", "Engine steps (batched forward passes).", st->steps);
    counter(&b, "kvik_spec_drafts_total", "Speculative drafts verified (one per sequence and step with a draft).",
            st->spec_drafts);
    counter(&b, "kvik_spec_lookup_drafts_total",
            "Of those, drafts taken from prompt lookup in front of a draft model.", st->spec_lookup_drafts);
    counter(&b, "kvik_spec_draft_tokens_total", "Speculative draft tokens verified.", st->spec_draft_tokens);
    counter(&b, "kvik_spec_accepted_tokens_total", "Speculative draft tokens accepted.", st->spec_accepted);
    head(&b, "kvik_spec_accepted_by_position_total", "counter",
         "Drafts whose token at this position (1 = first) was accepted.");
    for (int i = 0; i < SPEC_MAX_DRAFT; i++)
        out(&b, "kvik_spec_accepted_by_position_total{position=\"%d\"} %llu\n", i + 1,
            (unsigned long long)st->spec_accepted_by_pos[i]);
    head(&b, "kvik_requests_total", "counter", "Choices finished, by finish reason.");
    static const char *const reasons[] = {
        [ENGINE_FINISH_STOP] = "stop", [ENGINE_FINISH_LENGTH] = "length",
        [ENGINE_FINISH_CANCELLED] = "cancelled", [ENGINE_FINISH_ERROR] = "error"};
    for (int f = ENGINE_FINISH_STOP; f <= ENGINE_FINISH_ERROR; f++)
        out(&b, "kvik_requests_total{finish_reason=\"%s\"} %llu\n", reasons[f],
            (unsigned long long)st->finished[f]);
    head(&b, "kvik_requests_rejected_total", "counter", "Requests answered with an error before reaching the engine, by reason.");
    for (int r = 0; r < METRICS_REJECT_COUNT; r++)
        out(&b, "kvik_requests_rejected_total{reason=\"%s\"} %llu\n", metrics_reject_name((enum metrics_reject)r),
            (unsigned long long)ms->rejected[r]);
    counter(&b, "kvik_http_requests_total", "HTTP requests answered.", ms->http_requests);
    gauge(&b, "kvik_server_ready", "1 when the model is loaded and requests are served.", ms->ready);
    gauge(&b, "kvik_http_connections", "HTTP connections open now.", (double)ms->http_connections);
    counter(&b, "kvik_grammar_masks_total", "Token masks of grammar-constrained choices the engine applied.",
            ms->grammar_masks);
    counter(&b, "kvik_grammar_masks_ahead_total", "Of them, masks computed while the forward pass ran.",
            ms->grammar_masks_ahead);
    head(&b, "kvik_grammar_mask_seconds_total", "counter",
         "Time the engine spent on token masks (computing them or waiting for them).");
    out(&b, "kvik_grammar_mask_seconds_total %.9g\n", ms->grammar_mask_seconds);
    if (ms->semcache) {
        counter(&b, "kvik_semantic_cache_hits_total", "Chat requests answered from the semantic cache.", ms->sc_hits);
        counter(&b, "kvik_semantic_cache_misses_total", "Chat requests looked up and not found.", ms->sc_misses);
        counter(&b, "kvik_semantic_cache_inserts_total", "Answers stored in the semantic cache.", ms->sc_inserts);
        counter(&b, "kvik_semantic_cache_evictions_total", "Entries dropped to make room.", ms->sc_evictions);
        counter(&b, "kvik_semantic_cache_expirations_total", "Entries dropped past their TTL.", ms->sc_expirations);
        gauge(&b, "kvik_semantic_cache_entries", "Entries in the semantic cache.", (double)ms->sc_entries);
    }
    if (b.failed) {
        sbuf_free(&b);
        return NULL;
    }
    if (len) *len = b.len;
    return b.p;
}
