/*
 * loadgen.h — the load generator behind `kvik bench serve`: it drives any
 * OpenAI-compatible server (kvik serve, llama.cpp's llama-server, vLLM) with
 * streamed completions and measures what each request saw.
 *
 * Pieces, one file each:
 *   sse.c      incremental Server-Sent-Events parser and the OpenAI chunk
 *              reader (content, usage, [DONE], error objects)
 *   arrival.c  seeded random numbers, Poisson / gamma arrival gaps
 *   dataset.c  request prompts: random, sharegpt, prefix, file (JSONL)
 *   stats.c    per-request metrics (TTFT, ITL, TPOT, E2E) and the summary
 *   prom.c     Prometheus text-format reader (the server's /metrics)
 *   client.c   the run: libcurl's multi interface, one thread, every request
 *              streamed and every SSE event timestamped (CLOCK_MONOTONIC)
 *   report.c   text table, JSON (per-request records), compare, sweep
 *   svg.c      latency CDFs and tokens-over-time plots, written by hand
 *
 * Times in records are nanoseconds from the run's start; summaries are in
 * milliseconds (latencies) and seconds (duration). This folder is linked into
 * the kvik command and the tests, not into libkvik (it needs libcurl and
 * jansson, which the inference library does not).
 */
#ifndef KVIK_TOOLS_LOADGEN_H
#define KVIK_TOOLS_LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

/* ---- SSE parsing ------------------------------------------------------- */

/*
 * One event stream, fed bytes as they arrive in pieces of any size. Lines end
 * at "\n", "\r\n" or "\r" (a "\r" at the end of one piece and a "\n" at the
 * start of the next are one line end). "data:" lines (one optional space after
 * the colon) accumulate, joined by "\n"; a blank line dispatches the event if
 * it had data. Lines starting with ":" are comments (keep-alives); "event:",
 * "id:", "retry:" and unknown fields are ignored. An event or line longer
 * than SSE_MAX_EVENT bytes makes the stream malformed.
 */
#define SSE_MAX_EVENT ((size_t)4 << 20)

/* Called with each event's data (NUL-terminated, len bytes); returns false to
 * stop the stream (sse_feed then returns false too). */
typedef bool (*sse_event_fn)(void *ctx, const char *data, size_t len);

struct sse_parser {
    char *line;         /* [line_cap] the line being read */
    size_t line_len, line_cap;
    char *data;         /* [data_cap] data of the event being read */
    size_t data_len, data_cap;
    bool has_data;      /* a data: line was seen since the last dispatch */
    bool after_cr;      /* the last byte fed was "\r" */
    bool failed;        /* too long, out of memory, or stopped by the callback */
    int64_t n_events;   /* events dispatched */
    int64_t n_comments; /* comment lines seen */
};

void sse_init(struct sse_parser *p);
void sse_free(struct sse_parser *p);
/* Feeds n bytes; false once the stream is malformed or the callback stopped it. */
bool sse_feed(struct sse_parser *p, const char *buf, size_t n, sse_event_fn fn, void *ctx);
/* True if bytes of an unfinished line or event are pending (a truncated stream). */
bool sse_pending(const struct sse_parser *p);

/* What one event's data says, read as an OpenAI streaming chunk. */
enum chunk_kind {
    CHUNK_DATA,      /* a chunk object (with or without content) */
    CHUNK_DONE,      /* the literal [DONE] */
    CHUNK_ERROR,     /* an object with an "error" member */
    CHUNK_MALFORMED, /* not JSON, not an object, or wrong member types */
};

struct chunk_info {
    enum chunk_kind kind;
    int32_t content_bytes;     /* bytes of text in choices[0] (delta.content, delta.reasoning_content or text) */
    bool has_usage;            /* a "usage" object was given */
    int64_t prompt_tokens;     /* from usage, else -1 */
    int64_t completion_tokens; /* from usage, else -1 */
    char finish_reason[32];    /* choices[0].finish_reason, "" if null */
    char message[160];         /* error message (CHUNK_ERROR / CHUNK_MALFORMED) */
};

void chunk_parse(const char *data, size_t len, struct chunk_info *out);

/* ---- random numbers and arrivals --------------------------------------- */

/* Over base.h's struct prng (prng_seed, prng_next, prng_uniform). */
double lg_rng_normal(struct prng *r);  /* mean 0, sd 1 */
/* Gamma(shape, scale 1), shape > 0 (Marsaglia and Tsang). */
double lg_rng_gamma(struct prng *r, double shape);

/*
 * Arrival times in seconds from the start, n of them, into t[]: gaps drawn
 * from a gamma distribution of shape `burstiness` and mean 1/rate (shape 1 is
 * a Poisson process; smaller is burstier, the coefficient of variation is
 * 1/sqrt(shape)). rate <= 0 or infinite: every request at time 0.
 */
void lg_arrivals(double rate, double burstiness, uint64_t seed, int64_t n, double *t);

/* ---- datasets ----------------------------------------------------------- */

struct lg_prompt {
    char *system;          /* system message (prefix dataset), NULL if none */
    char *prompt;          /* the user message / completion prompt */
    int32_t prompt_tokens; /* tokens as the generator counted them (tokenizer or estimate), -1 unknown */
    int32_t output_len;    /* max_tokens to ask for */
};

struct lg_dataset {
    struct lg_prompt *items; /* [n] */
    int64_t n;
    bool exact_tokens;       /* prompt_tokens come from a real tokenizer */
};

enum lg_dataset_kind { LG_DATASET_RANDOM, LG_DATASET_SHAREGPT, LG_DATASET_PREFIX, LG_DATASET_FILE };

struct lg_dataset_params {
    enum lg_dataset_kind kind;
    int64_t num_prompts;
    uint64_t seed;
    const struct tokenizer *tok; /* optional: exact token counts */
    /* random */
    int32_t input_len, output_len; /* also the prefix dataset's output length */
    double range_ratio;            /* lengths uniform in [len*(1-r), len*(1+r)] */
    /* prefix */
    int32_t prefix_len, num_prefixes, question_len;
    /* sharegpt, file */
    const char *path;
    int32_t max_output_len; /* sharegpt: cap on a reply's length (default 1024) */
};

void lg_dataset_default_params(struct lg_dataset_params *p);
kvik_status lg_dataset_build(const struct lg_dataset_params *p, struct lg_dataset *out, struct kvik_err *err);
void lg_dataset_free(struct lg_dataset *d);

/* Parsers the dataset uses, exposed for tests and the fuzz target. Each
 * appends to d (which may already hold items). */
kvik_status lg_dataset_parse_jsonl(const char *buf, size_t len, int32_t default_output_len,
                                   struct lg_dataset *d, struct kvik_err *err);
/* A ShareGPT JSON array (possibly cut short: conversations are read one at a
 * time and reading stops at the first incomplete one): the first human turn
 * is the prompt, the reply after it gives the output length. */
kvik_status lg_dataset_parse_sharegpt(const char *buf, size_t len, const struct tokenizer *tok,
                                      int32_t max_output_len, int64_t limit, struct lg_dataset *d,
                                      struct kvik_err *err);

/* ---- one request's record ---------------------------------------------- */

enum lg_error {
    LG_ERR_NONE,
    LG_ERR_CONNECT,    /* could not connect / resolve */
    LG_ERR_HTTP,       /* a non-2xx status */
    LG_ERR_MALFORMED,  /* the stream was not SSE of OpenAI chunks */
    LG_ERR_STREAM,     /* the server sent an error object inside the stream */
    LG_ERR_DISCONNECT, /* the stream ended before data: [DONE] */
    LG_ERR_TIMEOUT,    /* --timeout passed */
    LG_ERR_COUNT,
};

const char *lg_error_name(enum lg_error e);

struct lg_record {
    int64_t index;            /* into the dataset */
    int64_t t_arrival_ns;     /* when the schedule released it */
    int64_t t_send_ns;        /* when it was handed to libcurl (after --max-concurrency) */
    int64_t t_end_ns;         /* last byte received (or failure) */
    int64_t *chunk_ns;        /* [n_chunks] arrival of each content-bearing event */
    int32_t n_chunks, chunk_cap;
    int64_t prompt_tokens;    /* from usage; else the dataset's count; -1 unknown */
    int64_t output_tokens;    /* from usage; else n_chunks */
    bool usage_given;
    int32_t expected_output;  /* max_tokens asked */
    enum lg_error error;
    int http_status;          /* 0 if no response */
    char *error_msg;          /* malloc'd one line, NULL if none */
};

/* Derived per-request metrics in milliseconds; NAN where undefined (no
 * token: no TTFT; fewer than two tokens: no TPOT). */
double lg_record_ttft_ms(const struct lg_record *r);
double lg_record_e2e_ms(const struct lg_record *r);
double lg_record_tpot_ms(const struct lg_record *r);

/* ---- statistics ---------------------------------------------------------- */

/* Percentile p (0..100) of sorted x[0..n): linear interpolation between
 * closest ranks (x[(n-1)p/100]); NAN for n == 0. */
double lg_percentile(const double *sorted, int64_t n, double p);

struct lg_dist {
    int64_t n;
    double mean, median, p90, p99, min, max;
};

/* Sorts x in place and summarises it (NAN values are dropped first). */
void lg_dist_compute(double *x, int64_t n, struct lg_dist *d);

struct lg_slo {
    double ttft_ms, tpot_ms, e2e_ms; /* 0 = no objective */
};

/* True if r succeeded and meets every objective given. A request with no
 * token is held to the TTFT objective with its E2E; one with fewer than two
 * tokens has no TPOT and meets that objective. */
bool lg_meets_slo(const struct lg_record *r, const struct lg_slo *slo);

struct lg_summary {
    int64_t n_requests, n_ok, n_good;
    int64_t n_errors[LG_ERR_COUNT];
    double duration_s;        /* first send to last end */
    int64_t prompt_tokens, output_tokens; /* over successful requests */
    double request_throughput;       /* successful requests / s */
    double output_throughput;        /* output tokens / s */
    double total_token_throughput;   /* (prompt + output) tokens / s */
    double goodput;                  /* requests meeting every SLO / s */
    struct lg_dist ttft, tpot, itl, e2e; /* ms, successful requests */
    int64_t max_in_flight;
    double cpu_user_s, cpu_sys_s;    /* the generator's own CPU time during the run */
    double cpu_pct;                  /* (user + sys) / duration, % of one core */
};

/* The summary of n records over duration_s (0: from the records). */
void lg_summarize(const struct lg_record *recs, int64_t n, double duration_s, const struct lg_slo *slo,
                  struct lg_summary *s);

/* ---- Prometheus text ---------------------------------------------------- */

/* Called for each sample: name (without labels), labels text between the
 * braces ("" if none), value. */
typedef void (*prom_sample_fn)(void *ctx, const char *name, size_t name_len, const char *labels,
                               size_t labels_len, double value);

/* Reads the exposition format line by line; malformed lines are skipped.
 * Returns the number of samples. */
int64_t prom_parse(const char *text, size_t len, prom_sample_fn fn, void *ctx);

/* Sum of every sample named exactly name (over all label sets); false if there is none. */
bool prom_sum(const char *text, size_t len, const char *name, double *out);

/* The server-side view from /metrics (kvik's metric names). */
struct lg_server_view {
    bool available;             /* /metrics answered before and after, with kvik's metrics */
    double queue_time_sum_s, queue_time_count;     /* deltas of kvik_request_queue_time_seconds */
    double prefill_time_sum_s, prefill_time_count; /* deltas of kvik_request_prefill_time_seconds */
    double preemptions;         /* delta of kvik_preemptions_total */
    double kv_usage_peak;       /* peak of kvik_kv_cache_usage_ratio over the polls, -1 if never seen */
    int64_t polls;              /* scrapes during the run that answered */
};

/* ---- the run ------------------------------------------------------------- */

enum lg_endpoint { LG_ENDPOINT_CHAT, LG_ENDPOINT_COMPLETIONS };

struct lg_config {
    const char *url;            /* base, e.g. http://127.0.0.1:8080 (a trailing /v1 is accepted) */
    const char *api_key;        /* Authorization: Bearer, NULL for none */
    const char *model;          /* "model" field; NULL: ask GET /v1/models, else leave out */
    enum lg_endpoint endpoint;
    double rate;                /* requests/s; <= 0 or inf: all at once */
    double burstiness;          /* gamma shape of the gaps (1 = Poisson) */
    int32_t max_concurrency;    /* 0 = no cap */
    uint64_t seed;
    double timeout_s;           /* per request, from send to end (0 = none) */
    bool ignore_eos;            /* send "ignore_eos": true (vLLM, llama.cpp, kvik) */
    double temperature;         /* sent when >= 0 (default -1: the server's default) */
    bool scrape_metrics;        /* GET /metrics before, during and after */
    double metrics_interval_s;  /* poll period of kvik_kv_cache_usage_ratio */
    bool quiet;                 /* no progress line on stderr */
};

void lg_default_config(struct lg_config *c);

struct lg_result {
    struct lg_record *recs;     /* [n] in dataset order */
    int64_t n;
    double duration_s;          /* first send to last end */
    double wall_s;              /* the whole run, start to finish */
    int64_t max_in_flight;
    double cpu_user_s, cpu_sys_s;
    char model[128];            /* the model name used ("" if none was sent) */
    struct lg_server_view server;
};

/* Runs every prompt of ds against the server. Failing requests are recorded,
 * not returned as errors; the status is an error only when the run cannot
 * start (bad URL, no memory, libcurl failure). */
kvik_status lg_run(const struct lg_config *cfg, const struct lg_dataset *ds, struct lg_result *out,
                   struct kvik_err *err);
void lg_result_free(struct lg_result *r);

/* The request body for one prompt (malloc'd JSON text); exposed for tests. */
char *lg_request_body(const struct lg_config *cfg, const char *model, const struct lg_prompt *p);

/* The summary of a run: lg_summarize over its records and duration, plus the
 * generator's CPU use (% of one core over the run's wall time) and the most
 * requests it had in flight. */
void lg_summarize_run(const struct lg_result *res, const struct lg_slo *slo, struct lg_summary *s);

/* ---- reports -------------------------------------------------------------- */

struct lg_run_info {             /* what the report says about how it was run */
    const char *url, *endpoint, *dataset, *model;
    double rate, burstiness;
    int32_t max_concurrency;
    int64_t num_prompts;
    uint64_t seed;
    struct lg_slo slo;
};

void lg_report_text(FILE *f, const struct lg_run_info *info, const struct lg_summary *s,
                    const struct lg_server_view *sv);
/* Writes the full JSON (summary, server view, per-request records). */
kvik_status lg_report_json(const char *path, const struct lg_run_info *info, const struct lg_summary *s,
                           const struct lg_result *res, struct kvik_err *err);
/* Side-by-side table of two JSON reports with ratios B/A; status for unreadable files. */
kvik_status lg_report_compare(FILE *f, const char *path_a, const char *path_b, struct kvik_err *err);

/* One point of a sweep. */
struct lg_sweep_point {
    double rate;                 /* requests/s (inf for all at once) */
    int32_t concurrency;         /* 0 if the sweep is over rates */
    struct lg_summary s;
    struct lg_server_view sv;
};

void lg_report_sweep_text(FILE *f, const struct lg_sweep_point *pts, int n);
kvik_status lg_report_sweep_json(const char *path, const struct lg_run_info *info,
                                 const struct lg_sweep_point *pts, int n, struct kvik_err *err);

/* ---- plots ---------------------------------------------------------------- */

/* Latency CDFs (TTFT, TPOT, E2E) and output tokens over time of one run. */
kvik_status lg_plot_run_svg(const char *path, const char *title, const struct lg_result *res,
                            struct kvik_err *err);
/* One named curve of a sweep (one server). */
struct lg_sweep_series {
    const char *name;
    const struct lg_sweep_point *pts; /* [n] */
    int n;
};

/* Throughput-latency curves of one or more sweeps: median and p99 TTFT and
 * TPOT against output-token throughput, one colour per series. */
kvik_status lg_plot_sweep_svg(const char *path, const char *title, const struct lg_sweep_series *series,
                              int n_series, struct kvik_err *err);

/* Reads a sweep JSON (lg_report_sweep_json) back: *pts malloc'd, *n points. */
kvik_status lg_sweep_load(const char *path, struct lg_sweep_point **pts, int *n, struct kvik_err *err);

#endif /* KVIK_TOOLS_LOADGEN_H */
