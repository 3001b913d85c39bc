/*
 * engine.c — the serving engine's outside (engine.h): configuration,
 * request admission, the engine thread's loop, cancellation, drain and
 * published statistics. It is the top of the engine's files (engine_int.h
 * has the order): what one step computes is in sched.c, the bookkeeping
 * of choices and their events in seq.c; nothing calls back into this file.
 *
 * Locking: one mutex, e->mu, guards what callers and the engine thread
 * share (the incoming list, the live list, flags, published statistics).
 * The engine thread takes it twice per step, briefly: at the start to take
 * the incoming requests and the cancel flags, at the end to unlink finished
 * requests and publish statistics. Callbacks run with no lock held. All the
 * memory a request needs (token buffers, samplers) is allocated by
 * engine_submit on the caller's thread, and everything a step needs by
 * engine_new, so a step allocates nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine_int.h"
#include "tensor/tensor.h"

/* The largest kv_mem_mib (16 TiB): its bytes fit in 64 bits with room. */
#define ENGINE_MAX_KV_MEM_MIB (INT64_C(1) << 24)

struct engine_config engine_config_default(void) {
    return (struct engine_config){.max_seqs = 64, .max_batch_tokens = 512, .prefill_chunk = 128, .max_queue = 256,
                                  .kv_type = TENSOR_TYPE_F16, .block_tokens = 16};
}

/* ---- requests ---------------------------------------------------------- */

static void req_free(struct ereq *r) {
    if (!r) return;
    if (r->seqs)
        for (int i = 0; i < r->n; i++) {
            free(r->seqs[i].tokens);
            sampler_free(r->seqs[i].smp);
            spec_seq_free(&r->seqs[i]);
        }
    free(r->seqs);
    free(r);
}

static kvik_status validate(const struct engine *e, const struct engine_request *r, struct kvik_err *err) {
    if (!r) return err_set(err, KVIK_ERR_INVALID_ARG, "engine: request is NULL");
    if (!r->on_event) return err_set(err, KVIK_ERR_INVALID_ARG, "engine: request has no event callback");
    if (r->n_prompt < 1 || !r->prompt)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: the prompt is empty (at least one token is needed)");
    if (r->max_tokens < (r->prompt_logprobs ? 0 : 1))
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: max_tokens is %d; it must be at least %d", r->max_tokens,
                       r->prompt_logprobs ? 0 : 1);
    if (r->prompt_logprobs && r->top_logprobs < 0)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: prompt_logprobs needs top_logprobs >= 0");
    if ((int64_t)r->n_prompt + r->max_tokens > e->cfg.n_ctx)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "engine: the prompt (%d tokens) plus max_tokens (%d) exceeds the context of %d tokens",
                       r->n_prompt, r->max_tokens, e->cfg.n_ctx);
    int64_t need = kv_paged_blocks_max(&e->kv, (int64_t)r->n_prompt + r->max_tokens, e->cfg.max_batch_tokens);
    if (need > e->n_blocks)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "engine: the prompt (%d tokens) plus max_tokens (%d) needs %lld KV blocks; the pool has %lld",
                       r->n_prompt, r->max_tokens, (long long)need, (long long)e->n_blocks);
    if (r->n < 1 || r->n > e->cfg.max_seqs)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: n is %d; it must be between 1 and %d", r->n,
                       e->cfg.max_seqs);
    if (r->top_logprobs > ENGINE_MAX_TOP_LOGPROBS)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: top_logprobs is %d; at most %d", r->top_logprobs,
                       ENGINE_MAX_TOP_LOGPROBS);
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= e->n_vocab)
            return err_set(err, KVIK_ERR_INVALID_ARG,
                           "engine: prompt token %d (at index %d) is outside the vocabulary of %d", r->prompt[i], i,
                           e->n_vocab);
    struct kvik_err serr = {0};
    if (sampler_params_validate(&r->sampling, &serr))
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: bad sampling parameters: %s", serr.msg);
    return KVIK_OK;
}

static kvik_status refuse_if_full(struct engine *e, struct kvik_err *err) {
    if (e->draining || e->stop)
        return err_set(err, KVIK_ERR_BUSY, "engine: shutting down, not accepting requests");
    if (atomic_load(&e->n_queued) >= e->cfg.max_queue)
        return err_set(err, KVIK_ERR_BUSY, "engine: %d requests already waiting (the queue limit)",
                       e->cfg.max_queue);
    return KVIK_OK;
}

int engine_max_seq_tokens(const struct engine *e) {
    int step = e->cfg.max_batch_tokens, lo = 0, hi = e->cfg.n_ctx; /* lo fits the pool */
    if (kv_paged_blocks_max(&e->kv, hi, step) <= e->n_blocks) return hi;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (kv_paged_blocks_max(&e->kv, mid, step) <= e->n_blocks) lo = mid;
        else hi = mid;
    }
    return lo;
}

kvik_status engine_submit(struct engine *e, const struct engine_request *r, uint64_t *id, struct kvik_err *err) {
    if (id) *id = 0;
    if (!e) return err_set(err, KVIK_ERR_INVALID_ARG, "engine: engine is NULL");
    kvik_status st = validate(e, r, err);
    if (st) return st;
    pthread_mutex_lock(&e->mu);
    st = refuse_if_full(e, err);
    pthread_mutex_unlock(&e->mu);
    if (st) return st;

    struct ereq *q = calloc(1, sizeof *q);
    if (!q || !(q->seqs = calloc((size_t)r->n, sizeof *q->seqs))) {
        free(q);
        return err_set(err, KVIK_ERR_NOMEM, "engine: out of memory for a request");
    }
    q->n = r->n;
    q->n_prompt = r->n_prompt;
    q->max_tokens = r->max_tokens;
    q->top_logprobs = r->top_logprobs < 0 ? -1 : r->top_logprobs;
    q->ignore_eos = r->ignore_eos;
    q->constrained = r->constraint != NULL;
    if (r->constraint) q->constraint = *r->constraint;
    q->prompt_lp = r->prompt_logprobs;
    q->prompt_lp_next = 1;
    q->salt = engine_prefix_salt(e, r->cache_key);
    q->fn = r->on_event;
    q->user = r->user;
    atomic_init(&q->cancel, false);
    uint64_t seed = r->sampling.seed;
    if (seed == SAMPLER_SEED_RANDOM) {
        uint64_t x = (uint64_t)clock_ns() * 0x9E3779B97F4A7C15ull;
        seed = (x ^ (x >> 29)) & 0xFFFFFFFFull; /* 32 bits, like a user's seed */
        if (seed == SAMPLER_SEED_RANDOM) seed = 0;
    }
    size_t cap = (size_t)r->n_prompt + (size_t)r->max_tokens;
    for (int i = 0; i < r->n; i++) {
        struct eseq *s = &q->seqs[i];
        s->req = q;
        s->choice = i;
        s->kv = -1;
        s->eog_token = -1;
        s->state = ESEQ_PENDING;
        struct sampler_params sp = r->sampling;
        sp.seed = seed + (uint64_t)i;
        if (sp.seed == SAMPLER_SEED_RANDOM) sp.seed += 1ull << 32;
        s->tokens = malloc(cap * sizeof *s->tokens);
        s->smp = sampler_new_shared(&sp, e->n_vocab, e->smp_scratch, NULL);
        if (!s->tokens || !s->smp || (e->spec && !spec_seq_new(e, s, &sp))) {
            req_free(q);
            return err_set(err, KVIK_ERR_NOMEM, "engine: out of memory for a request's %d choices", r->n);
        }
        for (int t = 0; t < r->n_prompt; t++) sampler_accept(s->smp, r->prompt[t]);
    }
    memcpy(q->seqs[0].tokens, r->prompt, (size_t)r->n_prompt * sizeof *r->prompt);
    q->seqs[0].n_tokens = r->n_prompt;
    q->seqs[0].n_fork = r->n - 1;
    q->n_live = r->n;

    pthread_mutex_lock(&e->mu);
    if ((st = refuse_if_full(e, err))) {
        pthread_mutex_unlock(&e->mu);
        req_free(q);
        return st;
    }
    q->id = e->next_id++;
    q->t_submit = clock_ns();
    q->lnext = e->live;
    if (e->live) e->live->lprev = q;
    e->live = q;
    e->n_live++;
    if (e->in_tail) e->in_tail->inext = q;
    else e->in_head = q;
    e->in_tail = q;
    atomic_fetch_add(&e->n_queued, 1);
    if (id) *id = q->id;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return KVIK_OK;
}

void engine_cancel(struct engine *e, uint64_t id) {
    if (!e || !id) return;
    pthread_mutex_lock(&e->mu);
    for (struct ereq *q = e->live; q; q = q->lnext)
        if (q->id == id) {
            atomic_store(&q->cancel, true);
            e->cancel_pending = true;
            pthread_cond_signal(&e->wake);
            break;
        }
    pthread_mutex_unlock(&e->mu);
}

/* Waits on e->idle until deadline_ns (clock_ns() time; < 0: no limit). */
static void idle_wait(struct engine *e, int64_t deadline_ns) {
    if (deadline_ns < 0) {
        pthread_cond_wait(&e->idle, &e->mu);
        return;
    }
    struct timespec ts = {.tv_sec = deadline_ns / 1000000000, .tv_nsec = deadline_ns % 1000000000};
    pthread_cond_timedwait(&e->idle, &e->mu, &ts); /* e->idle runs on CLOCK_MONOTONIC, like clock_ns */
}

void engine_drain(struct engine *e, int64_t deadline_ns) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    while (e->n_live > 0) {
        if (!e->cancel_all && clock_ns() >= deadline_ns) {
            e->cancel_all = true;
            pthread_cond_signal(&e->wake);
        }
        idle_wait(e, e->cancel_all ? -1 : deadline_ns);
    }
    pthread_mutex_unlock(&e->mu);
}

bool engine_kv_consistent(struct engine *e) {
    if (!e) return false;
    pthread_mutex_lock(&e->mu);
    uint64_t gen = e->check_gen;
    e->check_req = true;
    pthread_cond_signal(&e->wake);
    while (e->check_gen == gen) idle_wait(e, -1);
    bool ok = e->check_ok;
    pthread_mutex_unlock(&e->mu);
    return ok;
}

void engine_stats(struct engine *e, struct engine_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    *out = e->pub;
    pthread_mutex_unlock(&e->mu);
}

void engine_profile(struct engine *e, struct model_profile *out) { model_ctx_profile_get(e->ctx, out); }

/* ---- the engine thread ------------------------------------------------- */

/* Cancels every choice of every request whose cancel flag is set (all of
 * them with all). */
static void process_cancels(struct engine *e, bool all) {
    bool again = true;
    while (again) {
        again = false;
        struct ereq *hit = NULL;
        for (int i = 0; i < e->n_running && !hit; i++)
            if (all || atomic_load(&e->running[i]->req->cancel)) hit = e->running[i]->req;
        for (struct eseq *s = e->wait_head; s && !hit; s = s->next)
            if (all || atomic_load(&s->req->cancel)) hit = s->req;
        if (hit) {
            for (int c = 0; c < hit->n; c++) seq_finish(e, &hit->seqs[c], ENGINE_FINISH_CANCELLED, NULL);
            again = true;
        }
    }
}

static void publish(struct engine *e) {
    struct engine_stats *p = &e->pub;
    *p = e->st;
    p->kv_blocks_total = e->n_blocks;
    p->kv_blocks_used = kv_paged_used_blocks(&e->kv);
    int running = 0;
    for (int i = 0; i < e->n_running; i++) running += i == 0 || e->running[i]->req != e->running[i - 1]->req;
    p->requests_running = running;
    p->requests_waiting = e->n_live - running;
}

static void *engine_main(void *arg) {
    struct engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stop && !e->in_head && !e->cancel_pending && !e->check_req && !(e->cancel_all && e->n_live) &&
               !e->wait_head && e->n_running == 0)
            pthread_cond_wait(&e->wake, &e->mu);
        struct ereq *in = e->in_head;
        e->in_head = e->in_tail = NULL;
        bool all = e->cancel_all || e->stop, cancels = e->cancel_pending || all, check = e->check_req;
        e->cancel_pending = false;
        pthread_mutex_unlock(&e->mu);

        for (struct ereq *q = in, *next; q; q = next) {
            next = q->inext;
            seq_wait_push_back(e, &q->seqs[0]);
        }
        if (cancels) process_cancels(e, all);
        bool ok = check ? kv_paged_consistent(&e->kv) : false;
        if (!all && (e->wait_head || e->n_running)) sched_step(e);

        pthread_mutex_lock(&e->mu);
        struct ereq *done = e->done;
        e->done = NULL;
        for (struct ereq *q = done; q; q = q->dnext) {
            if (q->lprev) q->lprev->lnext = q->lnext;
            else e->live = q->lnext;
            if (q->lnext) q->lnext->lprev = q->lprev;
            e->n_live--;
        }
        publish(e);
        if (check) {
            e->check_ok = ok;
            e->check_req = false;
            e->check_gen++;
        }
        if (check || (done && e->n_live == 0)) pthread_cond_broadcast(&e->idle);
        bool quit = e->stop && e->n_live == 0;
        if (done) {
            pthread_mutex_unlock(&e->mu);
            for (struct ereq *q = done, *next; q; q = next) {
                next = q->dnext;
                req_free(q);
            }
            pthread_mutex_lock(&e->mu);
        }
        if (quit) break;
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- create and free --------------------------------------------------- */

static kvik_status resolve_config(const struct model *m, const struct engine_config *in, struct engine_config *c,
                                  struct kvik_err *err) {
    *c = in ? *in : engine_config_default();
    if (c->n_threads == 0) c->n_threads = cpu_count();
    if (c->n_ctx == 0) c->n_ctx = engine_default_ctx(m);
    if (c->n_threads < 1 || c->n_threads > 1024)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: %d threads (1..1024)", c->n_threads);
    if (c->max_seqs < 1 || c->max_seqs > 4096)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: max_seqs %d (1..4096)", c->max_seqs);
    if (c->prefill_chunk < 0 || c->prefill_chunk > 65536)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: prefill_chunk %d (0..65536)", c->prefill_chunk);
    if (c->max_batch_tokens < c->max_seqs || c->max_batch_tokens > 65536)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "engine: max_batch_tokens %d must be between max_seqs (%d) and 65536 (every running "
                       "sequence decodes one token per step)",
                       c->max_batch_tokens, c->max_seqs);
    if (c->max_queue < 1) return err_set(err, KVIK_ERR_INVALID_ARG, "engine: max_queue %d (>= 1)", c->max_queue);
    if (c->n_ctx < 2 || c->n_ctx > 1 << 20)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: n_ctx %d (2..1048576)", c->n_ctx);
    if (c->block_tokens < 1 || c->block_tokens > 4096)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: block_tokens %d (1..4096)", c->block_tokens);
    if (c->kv_mem_mib < 0 || c->kv_mem_mib > ENGINE_MAX_KV_MEM_MIB)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: kv_mem_mib %lld (0..%lld, 16 TiB)",
                       (long long)c->kv_mem_mib, (long long)ENGINE_MAX_KV_MEM_MIB);
    if (c->kv_blocks < 0 || c->n_eog < 0 || (c->n_eog > 0 && !c->eog))
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: negative kv_blocks or n_eog");
    if (c->kv_tokens < 0 || c->kv_tokens > INT64_C(1) << 40)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: kv_tokens %lld (0..2^40)", (long long)c->kv_tokens);
    if (c->spec_max == 0) c->spec_max = SPEC_DEFAULT_MAX;
    if (c->spec_ngram == 0) c->spec_ngram = SPEC_DEFAULT_NGRAM;
    if (c->spec_mode < SPEC_NONE || c->spec_mode > SPEC_DRAFT || c->spec_max < 1 || c->spec_max > SPEC_MAX_DRAFT ||
        c->spec_ngram < 1 || c->spec_ngram > 8)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: spec_mode %d, spec_max %d (1..%d), spec_ngram %d (1..8)",
                       c->spec_mode, c->spec_max, SPEC_MAX_DRAFT, c->spec_ngram);
    if (c->spec_mode == SPEC_DRAFT && !c->draft)
        return err_set(err, KVIK_ERR_INVALID_ARG, "engine: speculative decoding with a draft model needs the draft model");
    return KVIK_OK;
}

struct engine *engine_new(const struct model *m, const struct engine_config *cfg, struct kvik_err *err) {
    if (!m) {
        err_set(err, KVIK_ERR_INVALID_ARG, "engine: model is NULL");
        return NULL;
    }
    struct engine *e = calloc(1, sizeof *e);
    if (!e) {
        err_set(err, KVIK_ERR_NOMEM, "engine: out of memory");
        return NULL;
    }
    if (resolve_config(m, cfg, &e->cfg, err)) goto fail;
    const struct engine_config *c = &e->cfg;
    e->m = m;
    e->n_vocab = m->hp.n_vocab;
    e->next_id = 1;
    atomic_init(&e->n_queued, 0);
    /* the layers' sliding windows: their blocks before the window are released */
    int32_t *windows = calloc((size_t)m->hp.n_layer, sizeof *windows);
    if (!windows) {
        err_set(err, KVIK_ERR_NOMEM, "engine: out of memory");
        goto fail;
    }
    for (int l = 0; l < m->hp.n_layer && !c->kv_keep_all; l++) windows[l] = m->layers[l].window;
    struct kv_paged_config kc = {.n_layer = m->hp.n_layer, .row_floats = m->hp.n_head_kv * m->hp.head_dim,
                                 .type = c->kv_type, .block_tokens = c->block_tokens, .max_seqs = c->max_seqs,
                                 .layer_window = windows};
    size_t bb = kv_paged_block_bytes(&kc);
    if (!bb || !kv_type_fits(c->kv_type, kc.row_floats, m->hp.head_dim)) {
        err_set(err, KVIK_ERR_INVALID_ARG, "engine: KV rows of %d values cannot be stored as %s in %d-token blocks",
                kc.row_floats, tensor_type_name(c->kv_type), c->block_tokens);
        free(windows);
        goto fail;
    }
    if (c->kv_blocks > 0) kc.n_blocks = c->kv_blocks;
    else if (c->kv_tokens > 0) /* a block position of every group per block_tokens positions */
        kc.n_blocks = (c->kv_tokens + c->block_tokens - 1) / c->block_tokens * kv_paged_config_groups(&kc, NULL);
    else if (c->kv_mem_mib > 0) kc.n_blocks = (int64_t)((uint64_t)c->kv_mem_mib * (1u << 20) / bb);
    else {
        int64_t per_seq = kv_paged_config_blocks_max(&kc, c->n_ctx / 4, 1);
        kc.n_blocks = per_seq * c->max_seqs;
        if ((uint64_t)kc.n_blocks * bb > (1ull << 30)) kc.n_blocks = (int64_t)((1ull << 30) / bb);
    }
    if (kc.n_blocks < 1) {
        err_set(err, KVIK_ERR_INVALID_ARG, "engine: %lld MiB is less than one KV block (%zu bytes)",
                (long long)c->kv_mem_mib, bb);
        free(windows);
        goto fail;
    }
    kvik_status kst = kv_paged_init(&e->kv, &kc, err);
    free(windows);
    if (kst) goto fail;
    e->n_blocks = kc.n_blocks;
    engine_prefix_init(e);
    e->watermark = e->n_blocks / 100; /* vLLM keeps 1% too */
    if (!kv_paged_reserve_tables(&e->kv, c->n_ctx)) {
        err_set(err, KVIK_ERR_NOMEM, "engine: out of memory for block tables");
        goto fail;
    }
    if (!(e->ctx = model_ctx_new(m, c->n_threads, c->max_batch_tokens, c->n_ctx, err))) goto fail;
    model_ctx_profile(e->ctx, c->profile_tokens);
    e->n_rows = c->max_seqs;
    if (spec_engine_new(e, &e->n_rows, err)) goto fail;
    size_t T = (size_t)c->max_batch_tokens, S = (size_t)c->max_seqs, R = (size_t)e->n_rows + ENGINE_PROMPT_ROWS;
    e->is_eog = calloc((size_t)e->n_vocab, sizeof *e->is_eog);
    e->smp_scratch = sampler_scratch_new(e->n_vocab, NULL);
    e->running = calloc(S, sizeof *e->running);
    e->by_kv = calloc(S, sizeof *e->by_kv);
    e->samp = calloc(R, sizeof *e->samp);
    e->row_ppos = calloc(R, sizeof *e->row_ppos);
    e->b_tok = malloc(T * sizeof *e->b_tok);
    e->b_pos = malloc(T * sizeof *e->b_pos);
    e->b_seq = malloc(T * sizeof *e->b_seq);
    e->b_logits = malloc(T * sizeof *e->b_logits);
    e->logits = mem_alloc_aligned(R * (size_t)e->n_vocab * sizeof(float));
    e->argmax = malloc(R * sizeof *e->argmax);
    e->allowed = malloc(((size_t)e->n_vocab + 31) / 32 * sizeof *e->allowed);
    e->masked_row = malloc((size_t)e->n_vocab * sizeof *e->masked_row);
    if (!e->argmax || !e->allowed || !e->masked_row || !e->is_eog || !e->smp_scratch || !e->running || !e->by_kv || !e->samp || !e->row_ppos || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_logits ||
        !e->logits) {
        err_set(err, KVIK_ERR_NOMEM, "engine: out of memory for step buffers");
        goto fail;
    }
    for (int i = 0; i < c->n_eog; i++)
        if (c->eog[i] >= 0 && c->eog[i] < e->n_vocab) e->is_eog[c->eog[i]] = true;
    e->cfg.eog = NULL; /* not kept */
    e->cfg.n_eog = 0;

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    pthread_cond_init(&e->idle, &ca);
    pthread_condattr_destroy(&ca);
    e->sync_init = true;
    int rc = pthread_create(&e->thread, NULL, engine_main, e);
    if (rc) {
        err_set(err, KVIK_ERR_NOMEM, "engine: cannot start the engine thread (%s)", strerror(rc));
        goto fail;
    }
    e->thread_started = true;
    pthread_mutex_lock(&e->mu);
    publish(e);
    pthread_mutex_unlock(&e->mu);
    return e;
fail:
    engine_free(e);
    return NULL;
}

void engine_free(struct engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stop = true;
        e->draining = true;
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    /* requests the thread never saw (none unless it failed to start) */
    for (struct ereq *q = e->live, *next; q; q = next) {
        next = q->lnext;
        req_free(q);
    }
    if (e->sync_init) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->wake);
        pthread_cond_destroy(&e->idle);
    }
    model_ctx_free(e->ctx);
    spec_engine_free(e);
    kv_paged_free(&e->kv);
    free(e->is_eog);
    sampler_scratch_free(e->smp_scratch); /* after every request's samplers */
    free(e->running);
    free(e->by_kv);
    free(e->samp);
    free(e->row_ppos);
    free(e->b_tok);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_logits);
    mem_free(e->logits);
    free(e->argmax);
    free(e->allowed);
    free(e->masked_row);
    free(e);
}
