/*
 * engine_int.h — the serving engine's internal layout and the functions
 * its files call in each other. Calls go one way, from the top down:
 *
 *   engine.c       the public face and the engine thread: configuration,
 *                  admission, cancellation, drain, published statistics
 *   sched.c        what one step computes: batch, KV blocks, preemption,
 *                  the forward pass, what is sampled and sent
 *   seq.c          the bookkeeping of choices: the running array, the
 *                  waiting queue, token and final events, ending a choice,
 *                  histograms
 *   spec_engine.c  speculative decoding inside a step: drafts, the decode
 *                  with its draft, verification, rollback
 *   spec.c, sampler.c  no engine state (spec.h, sampler.h)
 *   prefix.c       the prefix cache's side of a step (a leaf: called from
 *                  above, calls no engine file)
 *
 * A file calls only files below it. A lower file tells an upper one what
 * happened through return values and the data (a choice's state, e->done),
 * never by calling up. engine_batch_add below is the one loop that fills a
 * batch.
 *
 * Ownership: a request (struct ereq) is allocated by engine_submit on the
 * caller's thread and handed to the engine thread through the incoming list
 * under e->mu. From then on only the engine thread touches its choices
 * (struct eseq); other threads only read its id and set its cancel flag,
 * under e->mu, through the live list. The engine thread unlinks a finished
 * request from the live list under e->mu and frees it after unlocking.
 *
 * A choice is in one of four states:
 *   PENDING  choices 1..n-1 before choice 0's prompt is done (they own
 *            nothing; choice 0's n_fork counts them)
 *   WAITING  in the FCFS waiting queue (new, or preempted: no KV blocks)
 *   RUNNING  in e->running, owns cache sequence kv; positions
 *            0..n_computed-1 hold K/V; tokens[n_computed..n_tokens) are
 *            still to be fed (the whole prompt at first, then the one token
 *            sampled last)
 *   DONE     its final event was sent
 */
#ifndef KVIK_ENGINE_INT_H
#define KVIK_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/engine.h"
#include "kv/kv_paged.h"

enum eseq_state { ESEQ_PENDING, ESEQ_WAITING, ESEQ_RUNNING, ESEQ_DONE };

/* Logits rows a step may spend on prompt log-probabilities, beyond the
 * sampling rows: a prompt that wants them is prefilled at most this many
 * positions per step. */
enum { ENGINE_PROMPT_ROWS = 64 };

struct ereq;

struct eseq {
    struct ereq *req;
    int choice;
    enum eseq_state state;
    int32_t *tokens;     /* [n_prompt + max_tokens] the prompt, then generated tokens */
    int n_tokens;        /* prompt + generated so far */
    int n_computed;      /* positions with K/V in the cache */
    int n_generated;     /* token events sent */
    int n_fork;          /* choices forked off this one when its prompt is done (choice 0 only) */
    int kv;              /* cache sequence while RUNNING, else -1 */
    int32_t eog_token;   /* the end-of-generation id that ended it; -1: none */
    float eog_logprob;   /* its log-probability and alternatives (top_logprobs >= 0) */
    int eog_n_top;
    int32_t eog_top_ids[ENGINE_MAX_TOP_LOGPROBS];
    float eog_top_logprobs[ENGINE_MAX_TOP_LOGPROBS];
    struct sampler *smp;
    int64_t t_last;      /* ns of the last token (0: none yet) */
    struct eseq *prev, *next; /* waiting queue */
    struct spec_seq *spec; /* speculative decoding state (spec_engine.c); NULL without */
};

struct ereq {
    uint64_t id;         /* also the arrival order */
    int n_prompt, max_tokens, n, top_logprobs;
    bool ignore_eos;
    bool constrained;    /* constraint is set */
    struct engine_constraint constraint;
    bool prompt_lp;      /* prompt log-probability events wanted (engine_request.prompt_logprobs) */
    int prompt_lp_next;  /* the next prompt position whose event is due (1..n_prompt) */
    uint64_t salt;       /* prefix cache salt (engine_prefix_salt of the request's cache_key) */
    int n_cached;        /* prompt positions attached from the cache at the first admission */
    engine_event_fn fn;
    void *user;
    struct eseq *seqs;   /* [n] */
    int n_live;          /* choices not DONE */
    int n_prompt_counted; /* prompt positions counted in stats.prompt_tokens */
    bool started;        /* scheduled at least once (left the max_queue count) */
    bool got_token;      /* first token sent (TTFT recorded) */
    atomic_bool cancel;
    int64_t t_submit, t_sched; /* ns */
    struct ereq *lprev, *lnext; /* live list (e->mu) */
    struct ereq *inext;  /* incoming list (e->mu) */
    struct ereq *dnext;  /* finished, to unlink and free (engine thread) */
};

struct engine {
    const struct model *m;
    struct engine_config cfg; /* resolved: no automatic values left */
    int n_vocab;
    int64_t n_blocks;
    struct model_ctx *ctx;
    struct kv_paged kv;
    bool *is_eog;        /* [n_vocab] */
    struct sampler_scratch *smp_scratch; /* shared by every choice's samplers: they sample on the
                                            engine thread only, one after another */
    uint64_t cache_salt; /* model identity, KV type, block size, a random secret (prefix.c) */

    pthread_t thread;
    bool thread_started;
    bool sync_init;      /* mu, wake and idle initialised */
    pthread_mutex_t mu;
    pthread_cond_t wake; /* engine thread: work arrived (e->mu) */
    pthread_cond_t idle; /* callers: nothing live / check answered (e->mu) */

    /* ---- under mu ---- */
    struct ereq *in_head, *in_tail; /* submitted, not yet seen by the engine thread */
    struct ereq *live;   /* every unfinished request */
    int n_live;
    uint64_t next_id;
    bool stop, draining, cancel_all, cancel_pending;
    bool check_req, check_ok;
    uint64_t check_gen;  /* answers given */
    struct engine_stats pub; /* published at the end of each step */
    atomic_int n_queued; /* requests submitted and not yet scheduled */

    /* ---- engine thread only ---- */
    struct eseq *wait_head, *wait_tail; /* FCFS; preempted choices go to the front */
    struct eseq **running; /* [max_seqs] by arrival (request id, then choice) */
    int n_running;
    int n_slots;         /* sequence slots held: running choices + their pending forks */
    struct eseq **by_kv; /* [max_seqs] cache sequence -> its choice */
    struct ereq *done;   /* finished requests, unlinked at the end of the step */
    struct engine_stats st;
    int64_t watermark;   /* free blocks admission leaves for running choices to grow */
    /* one step's batch, sized once */
    int32_t *b_tok, *b_pos, *b_seq; /* [max_batch_tokens] */
    bool *b_logits;      /* [max_batch_tokens] */
    struct eseq **samp;  /* [n_rows + ENGINE_PROMPT_ROWS] the choice logits row i belongs to */
    int32_t *row_ppos;   /* [n_rows + ENGINE_PROMPT_ROWS] > 0: row i scores that prompt position
                            (a prompt log-probability row); 0: row i samples */
    int prompt_rows;     /* this step's prompt log-probability rows so far */
    float *logits;       /* [n_rows + ENGINE_PROMPT_ROWS][n_vocab] */
    uint32_t *allowed;   /* [ceil(n_vocab / 32)] a constraint's mask */
    float *masked_row;   /* [n_vocab] a constrained choice's row */
    int64_t *argmax;     /* [n_rows + ENGINE_PROMPT_ROWS] each row's argmax, found by the forward
                            pass (-1: not found) */
    int n_rows;          /* sampling logits rows a step can ask for: max_seqs, more with
                            speculation */
    struct spec_engine *spec; /* speculative decoding (spec_engine.c); NULL: off */
};

/* Appends toks[0..n) at positions pos.. of cache sequence seq to the
 * step's batch (e->b_tok, b_pos, b_seq, b_logits; *nb entries before, *nb
 * + n after); the last n_logits of them ask for logits. The one loop that
 * fills a batch, for the target model's steps and the draft model's
 * rounds alike. */
static inline void engine_batch_add(struct engine *e, int *nb, int seq, int pos, const int32_t *toks, int n,
                                    int n_logits) {
    for (int j = 0; j < n; j++) {
        int i = (*nb)++;
        e->b_tok[i] = toks[j];
        e->b_pos[i] = pos + j;
        e->b_seq[i] = seq;
        e->b_logits[i] = j >= n - n_logits;
    }
}

/* Counts positions a..a+n-1 of s's request that are prompt positions in
 * stats.prompt_tokens, each once however often it is fed (preemption). */
static inline void engine_count_prompt(struct engine *e, struct ereq *r, int a, int n) {
    int lo = a > r->n_prompt_counted ? a : r->n_prompt_counted, hi = a + n < r->n_prompt ? a + n : r->n_prompt;
    if (hi > lo) {
        e->st.prompt_tokens += (uint64_t)(hi - lo);
        r->n_prompt_counted = hi;
    }
}

/* True when s's decode this step goes through speculation (spec_prepare
 * drafts for it, spec_take adds it): speculation is on and s has no
 * choices left to fork. A choice 0 whose last prompt token is fed as a
 * decode still has them: it decodes without a draft, and the step forks
 * them when it samples that row (sched.c). */
static inline bool engine_spec_decode(const struct engine *e, const struct eseq *s) {
    return e->spec && s->n_fork == 0 && s->req->max_tokens > 0 && !s->req->constrained;
}

/* sched.c: builds and runs one step (batch, forward, sampling, events). */
void sched_step(struct engine *e);

/* prefix.c: the prefix cache's side of a step (no-ops when it is off).
 * engine_prefix_attach: s was just given an empty cache sequence; attaches
 * its cached prefix and returns the positions now there (s->n_computed).
 * engine_prefix_admitted: s is admitted; counts the lookup and the cached
 * prompt tokens. engine_prefix_register: after a forward, registers the
 * newly full blocks of every running choice. engine_prefix_keep_tail: s
 * finished normally and is about to close its cache sequence; its partly
 * filled last block stays in the cache. */
void engine_prefix_init(struct engine *e);
uint64_t engine_prefix_salt(const struct engine *e, uint64_t cache_key);
int engine_prefix_attach(struct engine *e, struct eseq *s);
void engine_prefix_admitted(struct engine *e, struct eseq *s);
void engine_prefix_register(struct engine *e);
void engine_prefix_keep_tail(struct engine *e, struct eseq *s);

/* seq.c: the bookkeeping of choices, for engine.c and sched.c.
 * seq_running_insert: s, given cache sequence s->kv, joins e->running in
 * arrival order (RUNNING). seq_running_remove: s leaves it; its cache
 * sequence (and draft sequence) is closed and n_computed is 0; its
 * slots are given back. seq_wait_push_back / _push_front: s joins the
 * waiting queue at the end (new) or the front (preempted) (WAITING);
 * seq_wait_unlink: s leaves it, its state unchanged. */
void seq_running_insert(struct engine *e, struct eseq *s);
void seq_running_remove(struct engine *e, struct eseq *s);
void seq_wait_push_back(struct engine *e, struct eseq *s);
void seq_wait_push_front(struct engine *e, struct eseq *s);
void seq_wait_unlink(struct engine *e, struct eseq *s);
/* Samples s's next token from row (argmax: the row's argmax if the forward
 * pass found it, else -1), records it in the sampler and sends it
 * (seq_send_token). */
void seq_emit_token(struct engine *e, struct eseq *s, const float *row, int64_t argmax, int64_t now);
/* Sends the prompt log-probability event of prompt position pos of s's
 * request from row, the raw logits of position pos - 1 (a no-op unless
 * pos is the next one due). */
void seq_send_prompt(struct engine *e, struct eseq *s, int pos, const float *row);
/* Sends token tok (already recorded in the sampler; row its raw logits):
 * appends it and calls the request's callback, or ends the choice (DONE)
 * on an end-of-generation token, a callback that returns false, or
 * max_tokens. */
void seq_send_token(struct engine *e, struct eseq *s, int32_t tok, const float *row, int64_t now);
/* Ends s (a no-op if DONE): it leaves the running array or the waiting
 * queue, gets its final event, and so do its still PENDING forks. A
 * request whose last choice ended is on e->done afterwards. */
void seq_finish(struct engine *e, struct eseq *s, enum engine_finish why, const char *error);
/* Counts a duration of ns in h. */
void engine_hist_add(struct engine_hist *h, int64_t ns);

/* spec_engine.c: speculative decoding inside a step (engine/spec.h). */
/* The draft pool and buffers for e->cfg's spec_mode (after e->kv and
 * e->cfg are set; e->spec stays NULL for SPEC_NONE); the logits rows a
 * step needs in *rows. */
kvik_status spec_engine_new(struct engine *e, int *rows, struct kvik_err *err);
void spec_engine_free(struct engine *e);
/* Per-choice state, allocated by engine_submit (false: out of memory). */
bool spec_seq_new(struct engine *e, struct eseq *s, const struct sampler_params *sp);
void spec_seq_free(struct eseq *s);
/* s leaves the running array: its draft-model cache sequence is closed. */
void spec_seq_release(struct engine *e, struct eseq *s);
/* Step start: a draft for every decoding choice that engine_spec_decode
 * lets speculate (prompt lookup, or rounds of the draft model batched over
 * the choices). */
void spec_prepare(struct engine *e);
/* The decode of s with its draft (up to budget tokens in all, blocks for
 * the first already free): the tokens added to the batch, 0 (nothing
 * added) if the cache refused to grow s. */
int spec_take(struct engine *e, struct eseq *s, int budget, int *nb, int *n_samp);
/* Verifies s's draft from logits row `row` on: the tokens to emit (1 or
 * more, already recorded in s's sampler; token t's raw logits are row +
 * t) in *toks[0..*n_toks), valid until the next call; returns the rows the
 * decode used, 0 when row is not a decode of s with speculation. s's
 * n_computed is then the last sampled token plus the accepted drafts. */
int spec_check(struct engine *e, struct eseq *s, int row, const int32_t **toks, int *n_toks);
/* After spec_check's tokens were sent, if s still runs: its target and
 * draft caches drop the positions of rejected draft tokens (past
 * n_computed). */
void spec_rewind(struct engine *e, struct eseq *s);

#endif /* KVIK_ENGINE_INT_H */
