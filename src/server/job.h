/*
 * job.h — one request in flight: what the engine thread produces for it and
 * what the HTTP thread sends.
 *
 * The engine calls job_on_event on its thread for every token and once at
 * the end of each choice. The job turns tokens into text there (the
 * UTF-8-safe detokenizer), matches stop strings (a match ends the choice:
 * the callback returns false, the text is cut where the match starts) and
 * keeps one record per token for logprobs. The HTTP thread, holding
 * job->mu, reads what is new: text[sent..safe) and toks[toks_sent..) whose
 * bytes are safe, and waits on job->cv for more.
 *
 * Lifetime: a job starts with two references, the HTTP thread's and the
 * engine's; the engine's goes with the last choice's final event (or at
 * once via job_engine_gone when engine_submit fails). The last
 * job_release frees it.
 */
#ifndef KVIK_SERVER_JOB_H
#define KVIK_SERVER_JOB_H

#include <pthread.h>

#include "engine/engine.h"
#include "server/stop.h"
#include "tokenizer/tokenizer.h"

/* One generated token, for logprobs (or one prompt token: job.ptoks). */
struct job_token {
    int32_t id;
    float logprob;           /* NaN: none (the first prompt token) */
    int n_top;               /* < 0: none (the first prompt token) */
    int32_t top_ids[ENGINE_MAX_TOP_LOGPROBS];
    float top_logprobs[ENGINE_MAX_TOP_LOGPROBS];
    size_t start, end; /* its bytes in the choice's text (end: text length after it) */
};

struct job_choice {
    struct detok_stream ds;
    char *text;            /* [len] generated text, cut at a stop string */
    size_t len, cap;
    size_t safe;           /* text[0..safe) may be sent */
    size_t sent;           /* text[0..sent) was sent (HTTP side) */
    struct job_token *toks; /* [n_toks] when logprobs are wanted */
    int n_toks, cap_toks;
    int toks_sent;         /* HTTP side */
    int toks_final;        /* done: toks[0..toks_final) are reported */
    bool done;
    bool stop_matched;     /* a stop string ended it */
    bool started;          /* HTTP side: the first chunk was sent */
    bool finish_sent;      /* HTTP side */
    enum engine_finish finish;
    int n_generated;
    char error[160];
};

struct job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    uint64_t id;            /* the engine's request id */
    const struct tokenizer *tok;
    char **stop;            /* [n_stop] owned copies */
    size_t *stop_len;
    struct stop_set stops;
    bool logprobs;
    bool prompt_lp;          /* the engine sends prompt log-probabilities (echo with logprobs) */
    struct job_token *ptoks; /* [n_ptoks_all] (prompt_lp, after job_set_prompt) the prompt's tokens;
                                start/end: their bytes in the echoed text; ptoks[0] has no
                                logprob, ptoks[1..n_ptoks) came from the engine */
    int n_ptoks, n_ptoks_all;
    bool prompt_done;        /* every prompt event is in (or none will come) */
    int n;
    struct job_choice *ch;  /* [n] */
    int n_done;
    int n_prompt;
    int n_cached;           /* prompt tokens the engine found in its prefix cache */
    char *piece;            /* engine-thread scratch, detok_min_cap bytes */
    size_t piece_cap;
    bool overflow;          /* out of memory while collecting: ends as an error */
    void *owned;            /* freed with the job by owned_free (a constraint the engine uses) */
    void (*owned_free)(void *);
};

/* strip_space: drop one leading space of each choice's first piece (a chat
 * reply with a vocabulary that writes a space before words). NULL if out
 * of memory. */
struct job *job_new(const struct tokenizer *tok, int n, bool logprobs, char *const *stop,
                    int n_stop, bool strip_space);

/* prompt_lp: takes the prompt's ids (ids[0..n)) before engine_submit; the
 * tokens' offsets are counted in the text of their pieces, at most
 * echo_len. False if out of memory. */
bool job_set_prompt(struct job *j, const int32_t *ids, int n, size_t echo_len);

/* The engine callback (engine_event_fn); user is the job. */
bool job_on_event(void *user, const struct engine_event *ev);

/* engine_submit failed: the engine will never call back. */
void job_engine_gone(struct job *j);

/* Drops one reference; the last frees the job. */
void job_release(struct job *j);

/* Under j->mu: every choice has finished. */
static inline bool job_all_done(const struct job *j) { return j->n_done == j->n; }

/* The bytes a token's piece stands for, as stored for logprobs
 * (render_special: control tokens give their text); *len set. Writes up
 * to cap bytes to buf and returns the full length. */
size_t job_token_bytes(const struct tokenizer *tok, int32_t id, char *buf, size_t cap);

#endif /* KVIK_SERVER_JOB_H */
