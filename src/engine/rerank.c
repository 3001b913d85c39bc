/*
 * rerank.c — the rerankers of rerank.h. The chat model's: the answer ids
 * found once, then per call one engine request a document, whose events
 * are gathered under a mutex until every request has finished. The cross-
 * encoder's: the pairs tokenized, one embedder call, the logits mapped.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/embedder.h"
#include "engine/engine.h"
#include "engine/rerank.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

enum { MAX_SPELLINGS = 4 };

static const char SYSTEM[] =
    "Judge whether the Document answers the Query or holds the information it asks for. "
    "Answer only \"yes\" or \"no\".";

struct reranker {
    struct embedder *em;        /* a cross-encoder's (NULL: the chat model judges) */
    const struct encoder *enc;
    struct engine *e;
    const struct tokenizer *tok;
    const struct chat_format *fmt;
    struct reranker_config cfg;
    int32_t yes[MAX_SPELLINGS], no[MAX_SPELLINGS];
    int n_yes, n_no;
};

/* The ids of the one-token spellings of word, into ids (distinct). */
static int spellings(const struct tokenizer *tok, const char *const *words, int32_t *ids) {
    int n = 0;
    for (int i = 0; i < MAX_SPELLINGS; i++) {
        int32_t t[4];
        if (tokenizer_encode(tok, words[i], strlen(words[i]), false, false, t, 4) != 1) continue;
        bool seen = false;
        for (int k = 0; k < n; k++) seen |= ids[k] == t[0];
        if (!seen) ids[n++] = t[0];
    }
    return n;
}

struct reranker *reranker_new(struct engine *e, const struct tokenizer *tok, const struct chat_format *fmt,
                              const struct reranker_config *cfg, struct kvik_err *err) {
    struct reranker *r = calloc(1, sizeof *r);
    if (!r) {
        err_set(err, KVIK_ERR_NOMEM, "reranker: out of memory");
        return NULL;
    }
    *r = (struct reranker){.e = e, .tok = tok, .fmt = fmt, .cfg = *cfg};
    if (!r->cfg.max_doc_bytes) r->cfg.max_doc_bytes = 2048;
    if (!r->cfg.max_query_bytes) r->cfg.max_query_bytes = 1024;
    static const char *const yes[MAX_SPELLINGS] = {"yes", "Yes", " yes", " Yes"};
    static const char *const no[MAX_SPELLINGS] = {"no", "No", " no", " No"};
    r->n_yes = spellings(tok, yes, r->yes);
    r->n_no = spellings(tok, no, r->no);
    if (!r->n_yes || !r->n_no) {
        err_set(err, KVIK_ERR_UNSUPPORTED, "reranker: the vocabulary spells no 'yes' or no 'no' as one token");
        free(r);
        return NULL;
    }
    return r;
}

struct reranker *reranker_new_encoder(struct embedder *em, const struct encoder *e, struct kvik_err *err) {
    if (encoder_hparams(e)->pooling != ENCODER_POOL_RANK || encoder_hparams(e)->n_labels < 1) {
        err_set(err, KVIK_ERR_UNSUPPORTED, "reranker: the encoder has no classification head (not a cross-encoder)");
        return NULL;
    }
    struct reranker *r = calloc(1, sizeof *r);
    if (!r) {
        err_set(err, KVIK_ERR_NOMEM, "reranker: out of memory");
        return NULL;
    }
    r->em = em;
    r->enc = e;
    return r;
}

void reranker_free(struct reranker *r) { free(r); }

/* A cross-encoder's score from its logits y[n]: the sigmoid of one, else
 * the softmax probability of the last. */
static float logits_score(const float *y, int n) {
    if (n == 1) return (float)(1.0 / (1.0 + exp(-(double)y[0])));
    double m = y[0], z = 0;
    for (int i = 1; i < n; i++) m = y[i] > m ? y[i] : m;
    for (int i = 0; i < n; i++) z += exp((double)y[i] - m);
    return (float)(exp((double)y[n - 1] - m) / z);
}

static kvik_status encoder_score(struct reranker *r, const char *query, size_t qlen, int n, const char *const *docs,
                                 const size_t *lens, float *scores, int64_t *tokens, struct kvik_err *err) {
    const struct encoder_hparams *hp = encoder_hparams(r->enc);
    size_t ctx = (size_t)hp->n_ctx;
    int32_t *ids = malloc((size_t)n * ctx * sizeof *ids);
    uint8_t *types = malloc((size_t)n * ctx);
    const int32_t **rows = malloc((size_t)n * sizeof *rows);
    const uint8_t **trows = malloc((size_t)n * sizeof *trows);
    int *n_ids = malloc((size_t)n * sizeof *n_ids);
    float *y = malloc((size_t)n * (size_t)hp->n_labels * sizeof *y);
    kvik_status s = ids && types && rows && trows && n_ids && y ? KVIK_OK
                                                                : err_set(err, KVIK_ERR_NOMEM, "reranker: out of memory");
    for (int i = 0; !s && i < n; i++) {
        int64_t k = encoder_tokenize_pair(r->enc, query, qlen, docs[i], lens[i], ids + (size_t)i * ctx,
                                          types + (size_t)i * ctx, (int64_t)ctx);
        if (k < 0) s = err_set(err, (kvik_status)k, "reranker: a pair could not be tokenized");
        rows[i] = ids + (size_t)i * ctx;
        trows[i] = types + (size_t)i * ctx;
        n_ids[i] = (int)k;
        if (tokens && k > 0) *tokens += k;
    }
    if (!s) s = embedder_embed(r->em, n, rows, trows, n_ids, y, err);
    for (int i = 0; !s && i < n; i++) scores[i] = logits_score(y + (size_t)i * (size_t)hp->n_labels, hp->n_labels);
    free(ids);
    free(types);
    free(rows);
    free(trows);
    free(n_ids);
    free(y);
    return s;
}

/* n bytes of s at most, cut back to a UTF-8 character boundary. */
static size_t cut_utf8(const char *s, size_t len, size_t n) {
    if (len <= n) return len;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    return n;
}

struct call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
    struct reranker *r;
    float *scores;
    bool *failed;
};

struct one {
    struct call *c;
    int index;
};

static float score_of(const struct reranker *r, const struct engine_event *ev) {
    double py = 0, pn = 0;
    for (int i = 0; i < ev->n_top; i++) {
        for (int k = 0; k < r->n_yes; k++)
            if (ev->top_ids[i] == r->yes[k]) py += exp((double)ev->top_logprobs[i]);
        for (int k = 0; k < r->n_no; k++)
            if (ev->top_ids[i] == r->no[k]) pn += exp((double)ev->top_logprobs[i]);
    }
    return py + pn > 0 ? (float)(py / (py + pn)) : 0.0f;
}

static bool on_event(void *user, const struct engine_event *ev) {
    struct one *o = user;
    struct call *c = o->c;
    pthread_mutex_lock(&c->mu);
    /* the generated token's event carries the alternatives; an end-of-
     * generation token carries them in the final event instead */
    if (ev->prompt_pos == 0 && ev->n_top > 0 && (ev->finish == ENGINE_FINISH_NONE || ev->token >= 0))
        c->scores[o->index] = score_of(c->r, ev);
    if (ev->finish != ENGINE_FINISH_NONE) {
        if (ev->finish == ENGINE_FINISH_ERROR || ev->finish == ENGINE_FINISH_CANCELLED) c->failed[o->index] = true;
        if (--c->pending == 0) pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return true;
}

/* The prompt of one pair: the chat rendered and tokenized. */
static kvik_status pair_prompt(const struct reranker *r, const char *q, size_t ql, const char *d, size_t dl,
                               int32_t **ids, size_t *n_ids, struct kvik_err *err) {
    ql = cut_utf8(q, ql, r->cfg.max_query_bytes);
    dl = cut_utf8(d, dl, r->cfg.max_doc_bytes);
    size_t cap = ql + dl + 128;
    char *user = malloc(cap);
    if (!user) return err_set(err, KVIK_ERR_NOMEM, "reranker: out of memory");
    snprintf(user, cap, "Query: %.*s\nDocument: %.*s\nDoes the document answer the query? Answer yes or no.",
             (int)ql, q, (int)dl, d);
    struct chat_msg msgs[2] = {{"system", SYSTEM}, {"user", user}};
    kvik_status s = chat_encode(r->fmt, r->tok, msgs, 2, true, ids, n_ids, err);
    if (s == KVIK_ERR_INVALID_ARG) { /* a template without a system role: one user message */
        size_t cap2 = cap + sizeof SYSTEM + 2;
        char *both = malloc(cap2);
        if (!both) {
            free(user);
            return err_set(err, KVIK_ERR_NOMEM, "reranker: out of memory");
        }
        snprintf(both, cap2, "%s\n\n%s", SYSTEM, user);
        struct chat_msg one = {"user", both};
        s = chat_encode(r->fmt, r->tok, &one, 1, true, ids, n_ids, err);
        free(both);
    }
    free(user);
    return s;
}

kvik_status reranker_score(struct reranker *r, const char *query, size_t qlen, int n, const char *const *docs,
                           const size_t *lens, float *scores, int64_t *tokens, struct kvik_err *err) {
    if (tokens) *tokens = 0;
    if (n <= 0) return KVIK_OK;
    if (r->em) return encoder_score(r, query, qlen, n, docs, lens, scores, tokens, err);
    struct call c = {.pending = 0, .r = r, .scores = scores};
    struct one *ones = calloc((size_t)n, sizeof *ones);
    c.failed = calloc((size_t)n, sizeof *c.failed);
    if (!ones || !c.failed) {
        free(ones);
        free(c.failed);
        return err_set(err, KVIK_ERR_NOMEM, "reranker: out of memory");
    }
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    kvik_status s = KVIK_OK;
    int submitted = 0;
    for (int i = 0; i < n && !s; i++) {
        scores[i] = 0;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        s = pair_prompt(r, query, qlen, docs[i], lens[i], &ids, &n_ids, err);
        if (!s && (int64_t)n_ids + 1 > r->cfg.n_ctx)
            s = err_set(err, KVIK_ERR_INVALID_ARG, "reranker: a prompt of %zu tokens does not fit %d positions",
                        n_ids, r->cfg.n_ctx);
        if (!s) {
            ones[i] = (struct one){&c, i};
            struct engine_request req = {.prompt = ids, .n_prompt = (int)n_ids, .max_tokens = 1, .n = 1,
                                         .sampling = sampler_params_default(), .top_logprobs = 20,
                                         .cache_key = r->cfg.cache_key, .on_event = on_event, .user = &ones[i]};
            req.sampling.temp = 0;
            uint64_t id;
            pthread_mutex_lock(&c.mu);
            c.pending++;
            pthread_mutex_unlock(&c.mu);
            s = engine_submit(r->e, &req, &id, err);
            if (s) {
                pthread_mutex_lock(&c.mu);
                c.pending--;
                pthread_mutex_unlock(&c.mu);
            } else {
                submitted++;
                if (tokens) *tokens += (int64_t)n_ids;
            }
        }
        free(ids);
    }
    pthread_mutex_lock(&c.mu); /* every submitted request ends with a final event */
    while (c.pending > 0) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    for (int i = 0; i < submitted && !s; i++)
        if (c.failed[i]) s = err_set(err, KVIK_ERR_IO, "reranker: the engine failed or cancelled a request");
    pthread_cond_destroy(&c.cv);
    pthread_mutex_destroy(&c.mu);
    free(ones);
    free(c.failed);
    return s;
}
