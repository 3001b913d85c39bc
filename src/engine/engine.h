/*
 * engine.h — the serving engine: many requests at once over one model.
 *
 * An engine owns the model context, the paged KV cache (kv/kv_paged.h), a
 * FCFS waiting queue and one engine thread that runs steps. Each step the
 * scheduler fills a token budget (max_batch_tokens): one decode token for
 * every running sequence first, then prompt chunks of waiting or
 * partly-prefilled sequences (chunked prefill), in arrival order. KV blocks
 * are taken as sequences grow; when the pool runs dry the newest running
 * sequence is preempted (its blocks freed, its prompt plus the tokens it
 * already generated requeued at the front, recomputed later; the sampler
 * keeps its state, so the output is unchanged). All tokens of a step go
 * through one model_forward.
 *
 * Requests come in token ids (the caller tokenizes and applies the chat
 * template off the engine thread). Output goes out through the request's
 * callback, called on the engine thread once per generated token of each
 * choice and once at the end of each choice; it must be quick (copy the event
 * into the caller's own queue) and must not call back into the engine, except
 * that returning false stops that choice (a stop string matched: finish
 * reason STOP).
 *
 * Batch invariance: a greedy choice produces the same tokens whether it runs
 * alone or among any other sequences (every kernel reduces each row in a
 * fixed order, whatever the batch).
 *
 * Thread safety: engine_submit, engine_cancel, engine_stats and
 * engine_shutdown may be called from any thread.
 */
#ifndef KVIK_ENGINE_H
#define KVIK_ENGINE_H

#include "base/base.h"
#include "engine/sampler.h"
#include "model/model.h"

struct engine_config {
    int n_threads;        /* forward-pass threads */
    int max_seqs;         /* running sequences at most (each choice is one); default 64 */
    int max_batch_tokens; /* tokens per step; default 512 */
    int max_queue;        /* waiting requests at most; beyond, engine_submit answers KVIK_ERR_BUSY;
                             default 256 */
    int n_ctx;            /* longest sequence (prompt + output); default: the model's, at most 8192 */
    int64_t kv_mem_mib;   /* KV pool size; 0: enough for max_seqs sequences of n_ctx / 4 tokens */
    int kv_type;          /* TENSOR_TYPE_F16 (default), _Q8_0 or _F32 */
    int block_tokens;     /* positions per KV block; default 16 */
    const int32_t *eog;   /* end-of-generation token ids (a choice stops there unless ignore_eos) */
    int n_eog;
};

/* Defaults above with everything else zero. */
struct engine_config engine_config_default(void);

enum engine_finish {
    ENGINE_FINISH_NONE = 0,  /* a token event; the choice goes on */
    ENGINE_FINISH_STOP,      /* end-of-generation token, or the callback returned false */
    ENGINE_FINISH_LENGTH,    /* max_tokens reached, or the context is full */
    ENGINE_FINISH_CANCELLED, /* engine_cancel, or engine shutdown */
    ENGINE_FINISH_ERROR,     /* the forward pass failed (message in event.error) */
};

enum { ENGINE_MAX_TOP_LOGPROBS = 20 };

struct engine_event {
    uint64_t request_id;
    int choice;              /* 0..n-1 */
    enum engine_finish finish;
    /* token events (finish == NONE); the final event carries no token */
    int32_t token;
    float logprob;           /* log-softmax of the raw logits (before penalties and temperature) */
    int n_top;               /* top_logprobs entries filled */
    int32_t top_ids[ENGINE_MAX_TOP_LOGPROBS];
    float top_logprobs[ENGINE_MAX_TOP_LOGPROBS];
    /* final event: counts and timings of this choice */
    int n_prompt;            /* prompt tokens */
    int n_generated;         /* tokens emitted for this choice */
    const char *error;       /* ENGINE_FINISH_ERROR: one line */
};

/* Return false to stop this choice now (finish reason STOP); the return value
 * of the final event is ignored. */
typedef bool (*engine_event_fn)(void *user, const struct engine_event *ev);

struct engine_request {
    const int32_t *prompt;   /* copied by engine_submit */
    int n_prompt;            /* >= 1 */
    int max_tokens;          /* >= 1; n_prompt + max_tokens <= n_ctx */
    int n;                   /* choices (>= 1); they share the prompt's KV blocks */
    struct sampler_params sampling; /* choice i uses seed + i */
    int top_logprobs;        /* 0..ENGINE_MAX_TOP_LOGPROBS; < 0: no logprobs at all */
    bool ignore_eos;
    engine_event_fn on_event;
    void *user;
};

struct engine;

/* Creates the engine (KV pool allocated here) and starts its thread. */
struct engine *engine_new(const struct model *m, const struct engine_config *cfg, struct kvik_err *err);
/* Cancels everything still queued or running (each gets its final event
 * with CANCELLED), stops the thread, frees all. */
void engine_free(struct engine *e);

/*
 * Queues a request; *id receives its id (never 0). Returns
 *   KVIK_OK;
 *   KVIK_ERR_INVALID_ARG: a bad request (n_prompt + max_tokens > n_ctx,
 *     token out of range, bad sampling parameters...), message in err;
 *   KVIK_ERR_BUSY: max_queue requests are already waiting (the server
 *     answers 503 + Retry-After), or the engine is draining.
 * On success the callback will be called, finally with a finish event for
 * each choice, exactly once each.
 */
kvik_status engine_submit(struct engine *e, const struct engine_request *r, uint64_t *id, struct kvik_err *err);

/* Cancels a request (all its choices); its blocks are freed within one step.
 * Unknown or finished ids are ignored. */
void engine_cancel(struct engine *e, uint64_t id);

/* Stops accepting; requests already in finish normally until deadline_ns
 * (clock_ns() value), then the rest are cancelled. Returns when nothing is
 * left. */
void engine_drain(struct engine *e, int64_t deadline_ns);

/* ---- statistics (for /metrics) --------------------------------------- */

/* Latency histograms share these upper bounds, in seconds (plus +Inf). */
#define ENGINE_HIST_BUCKETS 20
extern const double engine_hist_bounds[ENGINE_HIST_BUCKETS];

struct engine_hist {
    uint64_t counts[ENGINE_HIST_BUCKETS + 1]; /* per bucket, not cumulative; last is +Inf */
    uint64_t count;
    double sum;
};

struct engine_stats {
    /* gauges */
    int requests_running;
    int requests_waiting;
    int64_t kv_blocks_total;
    int64_t kv_blocks_used;
    /* counters */
    uint64_t prompt_tokens;      /* prefilled tokens (recomputed ones after preemption not counted twice) */
    uint64_t generation_tokens;
    uint64_t preemptions;
    uint64_t finished[ENGINE_FINISH_ERROR + 1]; /* choices finished, by reason */
    uint64_t steps;
    /* histograms, seconds */
    struct engine_hist ttft;       /* submit -> first token */
    struct engine_hist itl;        /* between consecutive tokens of a choice */
    struct engine_hist e2e;        /* submit -> finish */
    struct engine_hist queue;      /* submit -> first scheduled */
    struct engine_hist prefill;    /* first scheduled -> first token */
};

void engine_stats(struct engine *e, struct engine_stats *out);

#endif /* KVIK_ENGINE_H */
