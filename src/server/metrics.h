/*
 * metrics.h — /metrics in the Prometheus text format (version 0.0.4).
 *
 * From the engine (engine_stats): latency histograms (time to first
 * token, inter-token latency, end-to-end latency, queue time, prefill
 * time), gauges (running and waiting requests, KV-cache blocks and usage)
 * and counters (prompt and generated tokens, preemptions, finished choices
 * by finish reason, steps). From the server: requests rejected, by reason,
 * and whether the model is loaded. docs/server.md lists every series.
 */
#ifndef KVIK_SERVER_METRICS_H
#define KVIK_SERVER_METRICS_H

#include <stdint.h>

#include "engine/engine.h"

enum metrics_reject {
    METRICS_REJECT_INVALID,      /* 400: malformed or invalid request */
    METRICS_REJECT_TOO_LARGE,    /* 413: body over the limit */
    METRICS_REJECT_CONTEXT,      /* 400: prompt (+ max_tokens) over the context */
    METRICS_REJECT_UNAUTHORIZED, /* 401 */
    METRICS_REJECT_QUEUE_FULL,   /* 503: the engine's waiting queue is full */
    METRICS_REJECT_LOADING,      /* 503: the model is still loading */
    METRICS_REJECT_DRAINING,     /* 503: shutting down */
    METRICS_REJECT_NOT_FOUND,    /* 404 / 405 */
    METRICS_REJECT_TIMEOUT,      /* 408: headers or body past their deadline */
    METRICS_REJECT_COUNT,
};

/* The label value of a reason ("invalid_request", "too_large", ...). */
const char *metrics_reject_name(enum metrics_reject r);

struct metrics_server {
    uint64_t rejected[METRICS_REJECT_COUNT];
    uint64_t http_requests; /* every HTTP request answered */
    int ready;              /* 1: the model is loaded and requests are taken */
    int64_t http_connections; /* HTTP connections open now */
    bool semcache;          /* the semantic cache is on (its series are shown) */
    uint64_t sc_hits, sc_misses, sc_inserts, sc_evictions, sc_expirations;
    int64_t sc_entries;
    uint64_t grammar_masks, grammar_masks_ahead; /* constrained tokens' masks; of them computed ahead */
    double grammar_mask_seconds;                 /* the engine's time on them */
};

/* The whole exposition (malloc'd, NUL-terminated, length in *len); st may
 * be NULL (no engine yet: its series read 0). NULL if out of memory. */
char *metrics_render(const struct engine_stats *st, const struct metrics_server *ms, size_t *len);

#endif /* KVIK_SERVER_METRICS_H */
