/*
 * embedder.c — the encoder's worker thread (embedder.h). Calls queue a job
 * each; the worker takes texts from the oldest jobs first until the token
 * budget is full (at least one text), runs one forward pass, copies each
 * row to its job and wakes the callers whose jobs are complete.
 */
#include "engine/embedder.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct emb_job {
    int n;
    const int32_t *const *ids;
    const uint8_t *const *types; /* NULL: all 0 */
    const int *n_ids;
    float *out;
    int taken;          /* texts handed to the worker */
    int done;           /* texts whose rows are written */
    kvik_status status;
    struct kvik_err err; /* why, when status is not KVIK_OK */
    struct emb_job *next;
};

struct embedder {
    const struct encoder *e;
    struct encoder_ctx *ctx;
    int max_tokens;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the worker: a job came, or stop */
    pthread_cond_t done; /* callers: some job advanced */
    struct emb_job *head, *tail; /* jobs with texts not yet taken */
    bool stop;
    struct embedder_stats stats;
    /* the worker's batch */
    const int32_t **b_ids;
    const uint8_t **b_types;
    bool b_typed; /* some text of the batch has types */
    uint8_t *zero_types; /* n_ctx zeros: the types of an untyped text */
    int *b_n;
    struct emb_job **b_job;
    int *b_row;
    float *b_out;
};

/* The context, the batch arrays and em itself. */
static void free_buffers(struct embedder *em) {
    encoder_ctx_free(em->ctx);
    free(em->b_ids);
    free(em->b_types);
    free(em->zero_types);
    free(em->b_n);
    free(em->b_job);
    free(em->b_row);
    free(em->b_out);
    free(em);
}

struct embedder_config embedder_config_default(void) {
    return (struct embedder_config){.n_threads = 1, .max_batch_tokens = 8192};
}

/* Takes texts for one pass: oldest jobs first, whole texts, within the
 * budget (the first text always). Called with mu held. */
static int take_batch(struct embedder *em, int *tokens) {
    int n = 0;
    *tokens = 0;
    em->b_typed = false;
    while (em->head) {
        struct emb_job *j = em->head;
        int len = j->n_ids[j->taken];
        if (n > 0 && *tokens + len > em->max_tokens) break;
        em->b_ids[n] = j->ids[j->taken];
        em->b_types[n] = j->types ? j->types[j->taken] : em->zero_types;
        em->b_typed |= j->types != NULL;
        em->b_n[n] = len;
        em->b_job[n] = j;
        em->b_row[n] = j->taken;
        n++;
        *tokens += len;
        if (++j->taken == j->n) {
            em->head = j->next;
            if (!em->head) em->tail = NULL;
        }
    }
    return n;
}

static void *worker(void *arg) {
    struct embedder *em = arg;
    size_t dim = (size_t)encoder_out_dim(em->e);
    pthread_mutex_lock(&em->mu);
    for (;;) {
        while (!em->head && !em->stop) pthread_cond_wait(&em->wake, &em->mu);
        if (em->stop) break;
        int tokens, n = take_batch(em, &tokens);
        pthread_mutex_unlock(&em->mu);
        struct kvik_err err = {0};
        kvik_status st = encoder_embed(em->ctx, n, em->b_ids, em->b_typed ? em->b_types : NULL, em->b_n,
                                       ENCODER_POOL_NONE, true, em->b_out, &err);
        pthread_mutex_lock(&em->mu);
        for (int i = 0; i < n; i++) {
            struct emb_job *j = em->b_job[i];
            if (st) {
                j->status = st;
                j->err = err;
            } else {
                memcpy(j->out + (size_t)em->b_row[i] * dim, em->b_out + (size_t)i * dim, dim * sizeof(float));
            }
            j->done++;
        }
        em->stats.texts += (uint64_t)n;
        em->stats.tokens += (uint64_t)tokens;
        em->stats.batches++;
        pthread_cond_broadcast(&em->done);
    }
    /* what is still queued will not run */
    for (struct emb_job *j = em->head; j; j = j->next) {
        j->status = KVIK_ERR_BUSY;
        err_set(&j->err, KVIK_ERR_BUSY, "the embedder is shutting down");
        j->done += j->n - j->taken;
        j->taken = j->n;
    }
    em->head = em->tail = NULL;
    pthread_cond_broadcast(&em->done);
    pthread_mutex_unlock(&em->mu);
    return NULL;
}

struct embedder *embedder_new(const struct encoder *e, const struct embedder_config *cfg, struct kvik_err *err) {
    struct embedder_config c = cfg ? *cfg : embedder_config_default();
    const struct encoder_hparams *hp = encoder_hparams(e);
    if (c.n_threads < 1) c.n_threads = 1;
    if (c.max_batch_tokens < hp->n_ctx) c.max_batch_tokens = hp->n_ctx;
    struct embedder *em = calloc(1, sizeof *em);
    if (!em) {
        err_set(err, KVIK_ERR_NOMEM, "embedder: out of memory");
        return NULL;
    }
    em->e = e;
    em->max_tokens = c.max_batch_tokens;
    /* a text has at least one token: the budget bounds the texts too */
    size_t nb = (size_t)c.max_batch_tokens;
    em->b_ids = malloc(nb * sizeof *em->b_ids);
    em->b_types = malloc(nb * sizeof *em->b_types);
    em->zero_types = calloc((size_t)hp->n_ctx, 1);
    em->b_n = malloc(nb * sizeof *em->b_n);
    em->b_job = malloc(nb * sizeof *em->b_job);
    em->b_row = malloc(nb * sizeof *em->b_row);
    em->b_out = malloc(nb * (size_t)encoder_out_dim(e) * sizeof *em->b_out);
    if (!em->b_ids || !em->b_types || !em->zero_types || !em->b_n || !em->b_job || !em->b_row || !em->b_out) {
        err_set(err, KVIK_ERR_NOMEM, "embedder: out of memory");
        goto fail;
    }
    if (!(em->ctx = encoder_ctx_new(e, c.n_threads, c.max_batch_tokens, err))) goto fail;
    pthread_mutex_init(&em->mu, NULL);
    pthread_cond_init(&em->wake, NULL);
    pthread_cond_init(&em->done, NULL);
    if (pthread_create(&em->thread, NULL, worker, em)) {
        err_set(err, KVIK_ERR_NOMEM, "embedder: cannot start its thread");
        pthread_mutex_destroy(&em->mu);
        pthread_cond_destroy(&em->wake);
        pthread_cond_destroy(&em->done);
        goto fail;
    }
    return em;
fail:
    free_buffers(em);
    return NULL;
}

void embedder_free(struct embedder *em) {
    if (!em) return;
    pthread_mutex_lock(&em->mu);
    em->stop = true;
    pthread_cond_signal(&em->wake);
    pthread_mutex_unlock(&em->mu);
    pthread_join(em->thread, NULL);
    pthread_mutex_destroy(&em->mu);
    pthread_cond_destroy(&em->wake);
    pthread_cond_destroy(&em->done);
    free_buffers(em);
}

kvik_status embedder_embed(struct embedder *em, int n, const int32_t *const *ids, const uint8_t *const *types,
                           const int *n_ids, float *out, struct kvik_err *err) {
    const struct encoder_hparams *hp = encoder_hparams(em->e);
    if (n < 1) return err_set(err, KVIK_ERR_INVALID_ARG, "embedder: no texts");
    for (int i = 0; i < n; i++) {
        if (n_ids[i] < 1 || n_ids[i] > hp->n_ctx)
            return err_set(err, KVIK_ERR_INVALID_ARG, "text %d has %d tokens (1..%d)", i, n_ids[i], hp->n_ctx);
        for (int t = 0; t < n_ids[i]; t++)
            if (ids[i][t] < 0 || ids[i][t] >= hp->n_vocab)
                return err_set(err, KVIK_ERR_INVALID_ARG, "text %d: token id %d is out of range (0..%d)", i,
                               ids[i][t], hp->n_vocab - 1);
        for (int t = 0; types && t < n_ids[i]; t++)
            if (types[i][t] >= hp->n_types)
                return err_set(err, KVIK_ERR_INVALID_ARG, "text %d: token type %d is out of range (0..%d)", i,
                               types[i][t], hp->n_types - 1);
    }
    struct emb_job j = {.n = n, .ids = ids, .types = types, .n_ids = n_ids, .out = out};
    pthread_mutex_lock(&em->mu);
    if (em->stop) {
        pthread_mutex_unlock(&em->mu);
        return err_set(err, KVIK_ERR_BUSY, "the embedder is shutting down");
    }
    if (em->tail) em->tail->next = &j;
    else em->head = &j;
    em->tail = &j;
    pthread_cond_signal(&em->wake);
    while (j.done < j.n) pthread_cond_wait(&em->done, &em->mu);
    em->stats.calls++;
    pthread_mutex_unlock(&em->mu);
    if (j.status) {
        if (err) *err = j.err;
        return j.status;
    }
    return KVIK_OK;
}

void embedder_stats(struct embedder *em, struct embedder_stats *out) {
    pthread_mutex_lock(&em->mu);
    *out = em->stats;
    pthread_mutex_unlock(&em->mu);
}
