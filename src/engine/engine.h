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
 * Prefix cache (config.prefix_cache): every full KV block a sequence
 * computes, prompt or generated tokens, is registered in the pool's cache
 * (kv/kv_paged.h) under a salt mixing the model's identity, the KV type
 * and block size, a per-engine random secret and the request's cache_key;
 * an admitted choice first attaches the longest cached chain of its tokens
 * and computes only the rest (always at least its last token, for the
 * logits). A choice that finishes (not with an error) also leaves its
 * partly filled last block cached as the tail of its chain, so a request
 * that continues it (prompt + reply + a new message: the next chat turn)
 * attaches every position the two share, n_cached counting them, and
 * computes exactly the new tokens. A preempted choice readmitted finds its
 * own full blocks if they were not evicted meanwhile. Cached blocks with no
 * user count as free and are evicted least recently used first when blocks
 * run out.
 *
 * Batch invariance: a greedy choice produces the same tokens whether it runs
 * alone or among any other sequences (every kernel reduces each row in a
 * fixed order, whatever the batch).
 *
 * Choices: a request with n > 1 is prefilled once as choice 0; when its
 * prompt is done every choice samples its first token from the same logits
 * and choices 1..n-1 fork the prompt's blocks (kv_paged_seq_fork), copying
 * only the partly filled last block when they first write to it. Each
 * choice then runs, and may be preempted, on its own.
 *
 * End of generation: a sampled end-of-generation token (config.eog) ends the
 * choice with STOP and is not emitted as a token event (nor counted in
 * n_generated); with ignore_eos it is an ordinary token.
 *
 * Sampling: each choice has its own sampler (sampler.h); the prompt's
 * tokens are accepted into it before the first token, so repetition
 * penalties see the prompt as llama.cpp's do. The samplers share one
 * vocabulary-sized scratch, used on the engine thread only, so a waiting
 * request holds no n_vocab-sized buffer for sampling.
 *
 * Speculative decoding (config.spec_mode, engine/spec.h): each step every
 * decoding choice may add a draft after its last token (prompt lookup, or
 * tokens from a draft model run in a second KV pool); the whole batch,
 * drafts included, is still one model_forward with logits at every draft
 * position, and each choice keeps the accepted prefix plus one token,
 * emitted as separate token events; the rejected positions' blocks are
 * truncated away. Greedy choices produce exactly the tokens they would
 * without speculation; sampled ones the same distribution.
 *
 * Thread safety: engine_submit, engine_cancel, engine_drain, engine_stats
 * and engine_kv_consistent may be called from any thread; engine_free from
 * one thread once nothing else calls in.
 */
#ifndef KVIK_ENGINE_H
#define KVIK_ENGINE_H

#include "base/base.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "model/model.h"

struct engine_config {
    int n_threads;        /* forward-pass threads; 0: every CPU */
    int max_seqs;         /* running sequences at most (each choice is one); default 64 */
    int max_batch_tokens; /* tokens per step; default 512; at least max_seqs */
    int prefill_chunk;    /* prompt tokens per step while sequences decode in it; default 128
                             (0: up to max_batch_tokens); keeps the decode steps a new prompt
                             joins short */
    int max_queue;        /* requests waiting for their first step at most; beyond, engine_submit
                             answers KVIK_ERR_BUSY; default 256 */
    int n_ctx;            /* longest sequence (prompt + output); 0: engine_default_ctx */
    int64_t kv_mem_mib;   /* KV pool size, at most 1 << 24 (16 TiB); 0: enough for max_seqs
                             sequences of n_ctx / 4 tokens, at most 1 GiB */
    int64_t kv_tokens;    /* KV pool size as the memory of this many positions of every layer
                             (rounded up to blocks); > 0 overrides kv_mem_mib */
    int64_t kv_blocks;    /* KV pool size in blocks (of one layer group: kv/kv_paged.h); > 0
                             overrides kv_tokens and kv_mem_mib (tests, tuning) */
    int kv_type;          /* TENSOR_TYPE_F16 (default), _Q8_0 or _F32 */
    int block_tokens;     /* positions per KV block; default 16 */
    bool kv_keep_all;     /* keep every layer's K/V at every position, even the sliding layers'
                             blocks before their window, which no later token reads (default
                             off: those are released as a sequence grows; for comparisons) */
    bool prefix_cache;    /* reuse the K/V of earlier requests' full blocks and finished
                             choices' tails (default off; kvik serve turns it on) */
    const int32_t *eog;   /* end-of-generation token ids (a choice stops there unless ignore_eos);
                             copied by engine_new; ids outside the vocabulary are ignored */
    int n_eog;
    int spec_mode;        /* enum spec_mode (engine/spec.h): SPEC_NONE (default), _NGRAM or _DRAFT */
    int spec_max;         /* longest draft, 1..SPEC_MAX_DRAFT; 0: SPEC_DEFAULT_MAX */
    int spec_ngram;       /* longest prompt-lookup n-gram, 1..8; 0: SPEC_DEFAULT_NGRAM */
    const struct model *draft; /* SPEC_DRAFT: the draft model, the same vocabulary as the model's
                                  (engine_new checks); the caller frees it after engine_free */
    int profile_tokens;   /* time the forward passes of exactly this many tokens, phase by
                             phase (model_ctx_profile; read with engine_profile); 0: none */
};

/* The defaults above, everything else zero. Start from these: engine_new
 * takes kv_type (where 0 is F32) and the other fields as they are. */
struct engine_config engine_config_default(void);

/* ---- defaults every front end shares (defaults.c) ----------------------
 *
 * What kvik run, kvik chat, kvik serve and the C API use where their
 * caller says nothing:
 *   context   the model's trained context, at most ENGINE_MAX_DEFAULT_CTX
 *             (engine_default_ctx; engine_config.n_ctx 0 means this);
 *   stop      the vocabulary's end-of-generation ids (engine_eog_ids, for
 *             engine_config.eog): EOS, EOT/EOM and the chat templates'
 *             end-of-turn markers (tokenizer_is_eog);
 *   sampling  sampler_params_default() (llama.cpp's command-line defaults:
 *             temp 0.8, top-k 40, top-p 0.95, min-p 0.05) on the command
 *             line; sampler_params_openai() (temperature 1, nothing cut)
 *             for requests of the OpenAI-compatible API, whose clients
 *             expect OpenAI's defaults;
 *   length    ENGINE_DEFAULT_MAX_TOKENS generated tokens for a completion
 *             (kvik run -n), ENGINE_DEFAULT_REPLY_TOKENS for a chat reply
 *             (kvik chat -n); the HTTP API's max_tokens defaults to the
 *             rest of the context, as OpenAI's does.
 */
enum {
    ENGINE_MAX_DEFAULT_CTX = 8192,
    ENGINE_DEFAULT_MAX_TOKENS = 128,
    ENGINE_DEFAULT_REPLY_TOKENS = 1024,
};

struct tokenizer;

/* The model's trained context length, at most ENGINE_MAX_DEFAULT_CTX. */
int engine_default_ctx(const struct model *m);
/* The end-of-generation ids of tok's vocabulary (malloc'd, *n of them);
 * NULL when out of memory. */
int32_t *engine_eog_ids(const struct tokenizer *tok, int *n);

enum engine_finish {
    ENGINE_FINISH_NONE = 0,  /* a token event; the choice goes on */
    ENGINE_FINISH_STOP,      /* end-of-generation token, or the callback returned false */
    ENGINE_FINISH_LENGTH,    /* max_tokens reached, or the context is full */
    ENGINE_FINISH_CANCELLED, /* engine_cancel, or engine shutdown */
    ENGINE_FINISH_ERROR,     /* the forward pass failed (message in event.error); the engine
                                goes on with the other requests */
};

enum { ENGINE_MAX_TOP_LOGPROBS = 20 };

struct engine_event {
    uint64_t request_id;
    int choice;              /* 0..n-1 */
    enum engine_finish finish;
    /* token events (finish == NONE): the token; final event: the end-of-generation id that
       ended the choice (finish STOP, not emitted as a token event), else -1 */
    int32_t token;
    int prompt_pos;          /* 0: as above; > 0: a prompt token's event (prompt_logprobs only):
                                token is prompt[prompt_pos], scored from the logits of the
                                positions before it; sent for choice 0, once per position, in
                                order, before any generated token of any choice */
    float logprob;           /* log-softmax of the raw logits (before penalties and temperature);
                                also in the final event of a choice an end-of-generation token
                                ended (with its top alternatives), when top_logprobs >= 0 */
    int n_top;               /* top_logprobs entries filled */
    int32_t top_ids[ENGINE_MAX_TOP_LOGPROBS];
    float top_logprobs[ENGINE_MAX_TOP_LOGPROBS];
    /* final event: counts and timings of this choice */
    int n_prompt;            /* prompt tokens */
    int n_generated;         /* tokens emitted for this choice */
    int n_cached;            /* prompt tokens whose K/V came from the prefix cache when the
                                request was first scheduled */
    const char *error;       /* ENGINE_FINISH_ERROR: one line, valid during the callback only */
};

/* Return false to stop this choice now (finish reason STOP); the return value
 * of the final event is ignored. */
typedef bool (*engine_event_fn)(void *user, const struct engine_event *ev);

/* Constrained decoding (grammar.h behind it): called on the engine
 * thread for each token a choice samples. mask writes the allowed next
 * tokens as bits (bit t of allowed[t / 32], n_vocab bits) and returns
 * false when nothing may follow (the choice then ends with STOP); accept
 * gets the token the choice took (not an end-of-generation one). */
struct engine_constraint {
    bool (*mask)(void *ctx, int choice, uint32_t *allowed);
    void (*accept)(void *ctx, int choice, int32_t token);
    void *ctx;
};

struct engine_request {
    const int32_t *prompt;   /* copied by engine_submit */
    int n_prompt;            /* >= 1 */
    int max_tokens;          /* >= 1 (0 with prompt_logprobs: score the prompt only, every choice
                                then finishes with LENGTH); n_prompt + max_tokens <= n_ctx */
    int n;                   /* choices, 1..max_seqs; they share the prompt's KV blocks */
    struct sampler_params sampling; /* validated; choice i uses seed + i (SAMPLER_SEED_RANDOM: one
                                       seed from the clock, then + i; a sum equal to
                                       SAMPLER_SEED_RANDOM gets 2^32 added) */
    int top_logprobs;        /* 0..ENGINE_MAX_TOP_LOGPROBS; < 0: no logprobs at all */
    bool prompt_logprobs;    /* also a prompt_pos event for every prompt position 1..n_prompt-1,
                                with top_logprobs alternatives (top_logprobs >= 0 then). The
                                prompt is computed in full (no prefix cache attached before its
                                last scored position), so the numbers do not depend on what is
                                cached */
    bool ignore_eos;
    const struct engine_constraint *constraint; /* NULL: none; copied. A constrained request never
                                                   goes through speculation */
    uint64_t cache_key;      /* prefix cache isolation: requests share cached blocks only with
                                requests of the same key (0 is a key like any other) */
    engine_event_fn on_event;
    void *user;
};

struct engine;

/* Creates the engine (KV pool allocated here) and starts its thread.
 * KVIK_ERR_INVALID_ARG for a bad configuration, KVIK_ERR_NOMEM. */
struct engine *engine_new(const struct model *m, const struct engine_config *cfg, struct kvik_err *err);
/* Cancels everything still queued or running (each gets its final event
 * with CANCELLED), stops the thread, frees all. */
void engine_free(struct engine *e);

/*
 * Queues a request; *id receives its id (never 0). Returns
 *   KVIK_OK;
 *   KVIK_ERR_INVALID_ARG: a bad request (n_prompt + max_tokens > n_ctx,
 *     max_tokens 0 without prompt_logprobs,
 *     more KV blocks than the whole pool, token out of range, bad sampling
 *     parameters, n or top_logprobs out of range, no callback), message in
 *     err;
 *   KVIK_ERR_BUSY: max_queue requests are already waiting (the server
 *     answers 503 + Retry-After), or the engine is draining.
 * On success the callback will be called, finally with a finish event for
 * each choice, exactly once each.
 */
kvik_status engine_submit(struct engine *e, const struct engine_request *r, uint64_t *id, struct kvik_err *err);

/* Cancels a request (all its choices); its blocks are freed within one step.
 * Unknown or finished ids are ignored. */
void engine_cancel(struct engine *e, uint64_t id);

/* Stops accepting (engine_submit answers KVIK_ERR_BUSY from now on);
 * requests already in finish normally until deadline_ns (clock_ns() value),
 * then the rest are cancelled. Returns when nothing is left (every final
 * event has been delivered). */
void engine_drain(struct engine *e, int64_t deadline_ns);

/* The most tokens (prompt + output) one choice can hold: the context
 * (n_ctx), or less when the KV pool is smaller. */
int engine_max_seq_tokens(const struct engine *e);

/* Runs kv_paged_consistent on the pool between two steps of the engine
 * thread and returns its answer (tests and debugging; waits for the step
 * in progress). */
bool engine_kv_consistent(struct engine *e);

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
    int requests_running;        /* requests with a choice running */
    int requests_waiting;        /* the other unfinished requests (queued or preempted) */
    int64_t kv_blocks_total;
    int64_t kv_blocks_used;
    /* counters */
    uint64_t prompt_tokens;      /* prompt tokens of scheduled requests, each once (cached ones too;
                                    recomputed ones after preemption not counted twice) */
    uint64_t generation_tokens;  /* sampled tokens (end-of-generation ones included) */
    uint64_t preemptions;
    uint64_t prefix_queries;     /* tokens looked up in the prefix cache (each admission's prompt,
                                    plus generated tokens of a readmitted preempted choice) */
    uint64_t prefix_hits;        /* of those, tokens found */
    uint64_t finished[ENGINE_FINISH_ERROR + 1]; /* choices finished, by reason */
    uint64_t steps;
    uint64_t spec_drafts;        /* drafts verified (steps of a choice with at least one draft token) */
    uint64_t spec_lookup_drafts; /* of them, drafts a draft model's engine took from prompt lookup */
    uint64_t spec_lookup_tokens, spec_lookup_accepted; /* their tokens, and those accepted */
    uint64_t spec_draft_tokens;  /* draft tokens verified */
    uint64_t spec_accepted;      /* draft tokens accepted */
    uint64_t spec_accepted_by_pos[SPEC_MAX_DRAFT]; /* [i]: drafts whose token i (0-based) was accepted */
    /* histograms, seconds */
    struct engine_hist ttft;       /* per request: submit -> first token */
    struct engine_hist itl;        /* per choice: between consecutive tokens */
    struct engine_hist e2e;        /* per request: submit -> last choice finished */
    struct engine_hist queue;      /* per request: submit -> first scheduled */
    struct engine_hist prefill;    /* per request: first scheduled -> first token */
};

/* The statistics as the engine thread last published them (at the end of
 * each of its loops, so a final event may be seen a moment before the step
 * that sent it is counted; once engine_drain has returned they are
 * complete). */
void engine_stats(struct engine *e, struct engine_stats *out);

/* The forward-pass phase times asked for by profile_tokens (the target
 * model's). Complete once engine_drain has returned. */
void engine_profile(struct engine *e, struct model_profile *out);

#endif /* KVIK_ENGINE_H */
