/*
 * test_engine.c — the serving engine on the real default model, greedy
 * unless said otherwise:
 *   batch invariance   32 prompts submitted together each give exactly the
 *                      tokens of the same prompt decoded alone (a plain
 *                      model_forward loop on a flat cache, and the engine
 *                      with one request);
 *   preemption         a pool too small for all requests preempts, and the
 *                      outputs still equal the solo runs;
 *   cancellation       frees every block within a step, pool consistent;
 *   n > 1              choices share the prompt's blocks (no preemption in
 *                      a pool too small for unshared copies), each choice is
 *                      reproducible and equals an n = 1 request with seed + i;
 *   admission          KVIK_ERR_BUSY beyond max_queue and after drain,
 *                      KVIK_ERR_INVALID_ARG with a message for bad requests;
 *   logprobs           the greedy token is the top one, top lists sorted,
 *                      probabilities sum to at most 1, values match the
 *                      reference logits;
 *   drain              finishes what it can by the deadline, cancels the
 *                      rest;
 *   stress             hundreds of small random requests (n, sampling,
 *                      logprobs, ignore_eos random) with random cancels in
 *                      a tiny pool end with no block in use and a
 *                      consistent pool, and every greedy choice equals its
 *                      solo decode (or a prefix of it when cancelled); this
 *                      one runs on a tiny synthetic model (same engine code,
 *                      a thousandth of the time per step).
 * The reference outputs are computed once (a plain greedy loop) and shared.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "model/model.h"
#include "model/synth.h"
#include "tensor/tensor.h"
#include "model_fixture.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

enum { N_PROMPTS = 32, MAX_PROMPT = 48, MAX_GEN = 4, MAX_N = 4, MAX_OUT = 64, MAX_EOG = 16 };

/* ---- the shared fixture: model, tokenizer, prompts, reference outputs ---- */

struct fixture {
    bool tried, ok, refs_done;
    struct model *m;
    struct tokenizer *tok;
    int32_t eog[MAX_EOG];
    int n_eog;
    int32_t prompt[N_PROMPTS][MAX_PROMPT];
    int np[N_PROMPTS];
    int32_t ref[N_PROMPTS][MAX_GEN]; /* greedy tokens alone, up to an end-of-generation token */
    double ref_lp[N_PROMPTS][MAX_GEN]; /* their log-softmax */
    int nref[N_PROMPTS];
    int32_t ref_eog[N_PROMPTS]; /* the end-of-generation id that ended the reference, -1: none */
};
static struct fixture g_fx;

static const char *const k_topics[8] = {"the ocean", "a small cat", "the history of Rome", "quantum physics",
                                        "baking bread", "the moon", "a rainy day in London", "chess openings"};
static const char *const k_forms[4] = {"Tell me about %s.", "Here is a short poem about %s:\n",
                                       "Question: what is the most surprising fact about %s? Answer: The", "%s is"};

/* The model, tokenizer and prompts (loaded once); NULL, the test skipped,
 * without the default model. */
static struct fixture *fixture(void) {
    struct fixture *f = &g_fx;
    if (f->tried) {
        if (!f->ok) test_skip("default model not available");
        return f->ok ? f : NULL;
    }
    f->tried = true;
    if (!test_model_get(&f->m, &f->tok, f->eog, MAX_EOG, &f->n_eog)) return NULL;
    for (int i = 0; i < N_PROMPTS; i++) {
        char text[256];
        snprintf(text, sizeof text, k_forms[i % 4], k_topics[i / 4]);
        int64_t n = tokenizer_encode(f->tok, text, strlen(text), false, false, f->prompt[i], MAX_PROMPT);
        if (n < 1 || n > MAX_PROMPT) {
            test_fail(__FILE__, __LINE__, "prompt %d encodes to %lld tokens", i, (long long)n);
            return NULL;
        }
        f->np[i] = (int)n;
    }
    f->ok = true;
    return f;
}

static bool is_eog(const struct fixture *f, int32_t t) {
    for (int i = 0; i < f->n_eog; i++)
        if (f->eog[i] == t) return true;
    return false;
}

static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static double log_softmax_at(const float *v, int n, int at) {
    double mx = v[argmax(v, n)], s = 0;
    for (int i = 0; i < n; i++) s += exp((double)v[i] - mx);
    return (double)v[at] - mx - log(s);
}

/* Every prompt decoded alone by a plain loop over model_forward with a flat
 * F16 cache (the engine's cache type): greedy, stopping after an
 * end-of-generation token (not kept) or MAX_GEN tokens. */
static bool fixture_refs(struct fixture *f) {
    if (f->refs_done) return true;
    struct kvik_err err = {0};
    int nv = f->m->hp.n_vocab, kv_dim = f->m->hp.n_head_kv * f->m->hp.head_dim;
    struct model_ctx *c = model_ctx_new(f->m, 1, MAX_PROMPT, MAX_PROMPT + MAX_GEN, &err);
    struct kv_flat kv;
    float *logits = malloc(sizeof(float) * (size_t)nv);
    bool ok = c && logits &&
              kv_flat_init(&kv, f->m->hp.n_layer, 1, MAX_PROMPT + MAX_GEN, kv_dim, TENSOR_TYPE_F16, &err) == KVIK_OK;
    for (int i = 0; ok && i < N_PROMPTS; i++) {
        int32_t pos[MAX_PROMPT], seq[MAX_PROMPT] = {0};
        for (int p = 0; p < f->np[i]; p++) pos[p] = p;
        struct model_batch b = {.n = f->np[i], .tokens = f->prompt[i], .pos = pos, .seq = seq};
        ok = model_forward(c, &kv.base, &b, logits, &err) == KVIK_OK;
        f->nref[i] = 0;
        f->ref_eog[i] = -1;
        for (int g = 0; ok && g < MAX_GEN; g++) {
            int32_t t = argmax(logits, nv);
            if (is_eog(f, t)) {
                f->ref_eog[i] = t;
                break;
            }
            f->ref[i][g] = t;
            f->ref_lp[i][g] = log_softmax_at(logits, nv, t);
            f->nref[i]++;
            int32_t p = f->np[i] + g, s = 0;
            struct model_batch one = {.n = 1, .tokens = &t, .pos = &p, .seq = &s};
            if (g + 1 < MAX_GEN) ok = model_forward(c, &kv.base, &one, logits, &err) == KVIK_OK;
        }
    }
    if (!ok) test_fail(__FILE__, __LINE__, "reference decode failed: %s", err.msg);
    if (c) kv_flat_free(&kv);
    model_ctx_free(c);
    free(logits);
    f->refs_done = ok;
    return ok;
}

/* ---- collecting events ---------------------------------------------------- */

struct collector {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int finals_left;
};

struct choice_out {
    int32_t final_token; /* the final event's token */
    int32_t tok[MAX_OUT];
    float lp[MAX_OUT];
    int n;
    int finals;
    int finish;
    int n_generated;     /* from the final event */
    int after_final;     /* events after the final one (must stay 0) */
    int lp_bad;          /* top-logprob lists unsorted, over 1, or not containing a greedy token first */
    int n_top_seen;
};

struct req_out {
    struct collector *col;
    uint64_t id;
    int n;
    int stop_after;      /* the callback returns false at this many tokens (0: never) */
    bool greedy;         /* check that each token is its top_ids[0] */
    struct choice_out ch[MAX_N];
};

static void collector_init(struct collector *c) {
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->finals_left = 0;
}

static void collector_free(struct collector *c) {
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static bool on_event(void *user, const struct engine_event *ev) {
    struct req_out *r = user;
    bool go = true;
    pthread_mutex_lock(&r->col->mu);
    struct choice_out *c = ev->choice >= 0 && ev->choice < r->n ? &r->ch[ev->choice] : NULL;
    if (!c) {
        r->ch[0].after_final++;
    } else if (c->finals) {
        c->after_final++;
    } else if (ev->finish != ENGINE_FINISH_NONE) {
        c->finals++;
        c->finish = ev->finish;
        c->final_token = ev->token;
        c->n_generated = ev->n_generated;
        r->col->finals_left--;
        pthread_cond_broadcast(&r->col->cv);
    } else {
        if (c->n < MAX_OUT) {
            c->tok[c->n] = ev->token;
            c->lp[c->n] = ev->logprob;
        }
        c->n++;
        c->n_top_seen += ev->n_top;
        double sum = 0;
        for (int i = 0; i < ev->n_top; i++) {
            sum += exp((double)ev->top_logprobs[i]);
            if (i && ev->top_logprobs[i] > ev->top_logprobs[i - 1]) c->lp_bad++;
        }
        if (sum > 1 + 1e-5 || ev->logprob > 0) c->lp_bad++;
        if (r->greedy && ev->n_top > 0 && (ev->top_ids[0] != ev->token || ev->top_logprobs[0] != ev->logprob))
            c->lp_bad++;
        if (r->stop_after && c->n >= r->stop_after) go = false;
    }
    pthread_mutex_unlock(&r->col->mu);
    return go;
}

/* Waits for every final event the collector expects (false after 300 s). */
static bool collector_wait(struct collector *c) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 300;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while (c->finals_left > 0 && rc == 0) rc = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    bool ok = c->finals_left == 0;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static struct sampler_params greedy_params(void) {
    struct sampler_params p = sampler_params_default();
    p.temp = 0;
    p.seed = 1;
    return p;
}

/* Submits prompt (n choices) with out collecting its events. */
static kvik_status submit(struct engine *e, struct collector *col, struct req_out *out, const int32_t *prompt,
                          int np, int max_tokens, int n, const struct sampler_params *sp, int top_logprobs,
                          bool ignore_eos, struct kvik_err *err) {
    int stop_after = out->stop_after; /* set by the caller before */
    bool greedy = out->greedy;
    memset(out, 0, sizeof *out);
    out->stop_after = stop_after;
    out->greedy = greedy;
    out->col = col;
    out->n = n;
    struct engine_request r = {.prompt = prompt, .n_prompt = np, .max_tokens = max_tokens, .n = n,
                               .sampling = *sp, .top_logprobs = top_logprobs, .ignore_eos = ignore_eos,
                               .on_event = on_event, .user = out};
    pthread_mutex_lock(&col->mu);
    col->finals_left += n;
    pthread_mutex_unlock(&col->mu);
    kvik_status st = engine_submit(e, &r, &out->id, err);
    if (st) {
        pthread_mutex_lock(&col->mu);
        col->finals_left -= n;
        pthread_mutex_unlock(&col->mu);
    }
    return st;
}

static struct engine_config test_config(const struct fixture *f) {
    struct engine_config c = engine_config_default();
    c.n_threads = 1; /* the test machine is shared: one thread avoids pool hand-offs */
    c.max_seqs = N_PROMPTS;
    c.max_batch_tokens = 96;
    c.n_ctx = 128;
    c.kv_blocks = 64;
    c.eog = f->eog;
    c.n_eog = f->n_eog;
    return c;
}

/* The greedy output of prompt i equals its reference (tokens and finish). */
static void check_ref(const struct fixture *f, int i, const struct choice_out *c, const char *what) {
    bool same = c->n == f->nref[i] && c->finals == 1 && c->after_final == 0;
    for (int g = 0; same && g < c->n; g++) same = c->tok[g] == f->ref[i][g];
    int want = f->nref[i] == MAX_GEN ? ENGINE_FINISH_LENGTH : ENGINE_FINISH_STOP;
    /* a STOP at an end-of-generation id names it in the final event */
    int32_t want_eog = want == ENGINE_FINISH_STOP ? f->ref_eog[i] : -1;
    CHECK_MSG(same && c->finish == want && c->n_generated == c->n && c->final_token == want_eog,
              "%s: prompt %d: %d tokens (reference %d), finish %d (want %d), final token %d (want %d), %d finals",
              what, i, c->n, f->nref[i], c->finish, want, c->final_token, want_eog, c->finals);
}

/* Waits until the published statistics show nothing running or waiting
 * (they are published at the end of each engine loop). */
static void stats_idle(struct engine *e, struct engine_stats *st) {
    for (int i = 0; i < 30000; i++) {
        engine_stats(e, st);
        if (st->requests_running == 0 && st->requests_waiting == 0) return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* The engine of most tests: cfg over the fixture's model, with col ready
 * for its requests; NULL (the test marked failed) if it does not start. */
static struct engine *start_engine(const struct fixture *f, const struct engine_config *cfg, struct collector *col) {
    struct kvik_err err = {0};
    struct engine *e = engine_new(f->m, cfg, &err);
    if (!e) {
        test_fail(__FILE__, __LINE__, "engine_new: %s", err.msg);
        return NULL;
    }
    collector_init(col);
    return e;
}

static void stop_engine(struct engine *e, struct collector *col) {
    engine_free(e);
    collector_free(col);
}

/* ---- tests ------------------------------------------------------------------ */

TEST(engine_batch_invariance_32_prompts) {
    struct fixture *f = fixture();
    if (!f || !fixture_refs(f)) return;
    struct engine_config cfg = test_config(f);
    struct kvik_err err = {0};
    struct collector col;
    struct engine *e = start_engine(f, &cfg, &col);
    REQUIRE(e);
    static struct req_out out[N_PROMPTS];
    struct sampler_params sp = greedy_params();
    /* alone through the engine: the same as the plain loop */
    for (int i = 0; i < 2; i++) {
        REQUIRE(submit(e, &col, &out[i], f->prompt[i], f->np[i], MAX_GEN, 1, &sp, -1, false, &err) == KVIK_OK);
        REQUIRE(collector_wait(&col));
        check_ref(f, i, &out[i].ch[0], "alone");
    }
    /* all together */
    uint64_t prompt_tokens = (uint64_t)f->np[0] + (uint64_t)f->np[1];
    for (int i = 0; i < N_PROMPTS; i++) {
        REQUIRE(submit(e, &col, &out[i], f->prompt[i], f->np[i], MAX_GEN, 1, &sp, -1, false, &err) == KVIK_OK);
        prompt_tokens += (uint64_t)f->np[i];
    }
    REQUIRE(collector_wait(&col));
    for (int i = 0; i < N_PROMPTS; i++) check_ref(f, i, &out[i].ch[0], "batched");
    struct engine_stats st;
    stats_idle(e, &st);
    CHECK_EQ_INT(st.prompt_tokens, prompt_tokens);
    CHECK_EQ_INT(st.preemptions, 0);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK_EQ_INT(st.kv_blocks_total, 64);
    CHECK_EQ_INT(st.ttft.count, N_PROMPTS + 2);
    CHECK_EQ_INT(st.e2e.count, N_PROMPTS + 2);
    CHECK_EQ_INT(st.queue.count, N_PROMPTS + 2);
    CHECK_EQ_INT(st.finished[ENGINE_FINISH_LENGTH] + st.finished[ENGINE_FINISH_STOP], N_PROMPTS + 2);
    uint64_t bucket_sum = 0;
    for (int i = 0; i <= ENGINE_HIST_BUCKETS; i++) bucket_sum += st.itl.counts[i];
    CHECK_EQ_INT(bucket_sum, st.itl.count);
    /* 34 requests of at most 6 tokens, in far fewer steps than one per token */
    CHECK_MSG(st.steps < 40, "%llu steps", (unsigned long long)st.steps);
    CHECK(engine_kv_consistent(e));
    stop_engine(e, &col);
}

TEST(engine_preemption_keeps_outputs) {
    struct fixture *f = fixture();
    if (!f || !fixture_refs(f)) return;
    struct engine_config cfg = test_config(f);
    cfg.block_tokens = 4;
    cfg.kv_blocks = 8; /* 12 requests of 3-6 blocks each */
    cfg.max_seqs = 12;
    cfg.max_batch_tokens = 64;
    struct kvik_err err = {0};
    struct collector col;
    struct engine *e = start_engine(f, &cfg, &col);
    REQUIRE(e);
    static struct req_out out[12];
    struct sampler_params sp = greedy_params();
    for (int i = 0; i < 12; i++)
        REQUIRE(submit(e, &col, &out[i], f->prompt[i], f->np[i], MAX_GEN, 1, &sp, -1, false, &err) == KVIK_OK);
    REQUIRE(collector_wait(&col));
    for (int i = 0; i < 12; i++) check_ref(f, i, &out[i].ch[0], "preempted");
    struct engine_stats st;
    stats_idle(e, &st);
    CHECK_MSG(st.preemptions > 0, "no preemption");
    uint64_t prompt_tokens = 0;
    for (int i = 0; i < 12; i++) prompt_tokens += (uint64_t)f->np[i];
    CHECK_EQ_INT(st.prompt_tokens, prompt_tokens); /* recomputed ones not counted */
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK(engine_kv_consistent(e));
    printf("    %llu preemptions in %llu steps\n", (unsigned long long)st.preemptions, (unsigned long long)st.steps);
    stop_engine(e, &col);
}

TEST(engine_cancel_frees_blocks) {
    struct fixture *f = fixture();
    if (!f) return;
    struct engine_config cfg = test_config(f);
    cfg.max_seqs = 4;
    struct kvik_err err = {0};
    struct collector col;
    struct engine *e = start_engine(f, &cfg, &col);
    REQUIRE(e);
    static struct req_out out[5];
    struct sampler_params sp = greedy_params();
    /* a 3-choice request and two more fill the 4 slots... */
    REQUIRE(submit(e, &col, &out[0], f->prompt[0], f->np[0], 64, 3, &sp, -1, true, &err) == KVIK_OK);
    REQUIRE(submit(e, &col, &out[1], f->prompt[1], f->np[1], 64, 1, &sp, -1, true, &err) == KVIK_OK);
    /* ...so these wait */
    REQUIRE(submit(e, &col, &out[2], f->prompt[2], f->np[2], 64, 1, &sp, -1, true, &err) == KVIK_OK);
    REQUIRE(submit(e, &col, &out[3], f->prompt[3], f->np[3], 64, 2, &sp, -1, true, &err) == KVIK_OK);
    /* until the running ones have two tokens (the step of their first is
     * then in the published statistics) */
    for (int i = 0; i < 60000; i++) {
        pthread_mutex_lock(&col.mu);
        bool go = out[0].ch[2].n > 1 && out[1].ch[0].n > 1;
        pthread_mutex_unlock(&col.mu);
        if (go) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct engine_stats st;
    engine_stats(e, &st);
    CHECK(st.kv_blocks_used > 0);
    CHECK_EQ_INT(st.requests_running, 2);
    CHECK_EQ_INT(st.requests_waiting, 2);
    uint64_t steps = st.steps;
    engine_cancel(e, 987654321); /* unknown: ignored */
    for (int i = 0; i < 4; i++) engine_cancel(e, out[i].id);
    REQUIRE(collector_wait(&col));
    stats_idle(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK_MSG(st.steps <= steps + 1, "%llu steps after the cancel", (unsigned long long)(st.steps - steps));
    CHECK_EQ_INT(st.finished[ENGINE_FINISH_CANCELLED], 7);
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < out[i].n; c++) {
            const struct choice_out *o = &out[i].ch[c];
            CHECK(o->finals == 1 && o->after_final == 0 && o->finish == ENGINE_FINISH_CANCELLED);
            CHECK_EQ_INT(o->n_generated, o->n);
            if (i >= 2) CHECK_EQ_INT(o->n, 0);
        }
    CHECK(engine_kv_consistent(e));
    engine_cancel(e, out[0].id); /* finished: ignored */
    /* the engine still serves */
    REQUIRE(submit(e, &col, &out[4], f->prompt[4], f->np[4], 2, 1, &sp, -1, false, &err) == KVIK_OK);
    REQUIRE(collector_wait(&col));
    CHECK_EQ_INT(out[4].ch[0].n, 2);
    stop_engine(e, &col);
}

TEST(engine_n_choices_share_prompt_blocks) {
    struct fixture *f = fixture();
    if (!f) return;
    /* a 40-token prompt: two full 16-token blocks and a half-full one */
    int32_t prompt[MAX_PROMPT * 2];
    int np = 0;
    for (int i = 0; np < 40; i++) {
        int take = f->np[i] < 40 - np ? f->np[i] : 40 - np;
        memcpy(prompt + np, f->prompt[i], (size_t)take * sizeof *prompt);
        np += take;
    }
    struct engine_config cfg = test_config(f);
    cfg.kv_blocks = 8; /* shared: 3 + 3 copies of the last block; unshared: 4 x 3 */
    cfg.max_seqs = 8;
    struct kvik_err err = {0};
    struct collector col;
    struct engine *e = start_engine(f, &cfg, &col);
    REQUIRE(e);
    static struct req_out out[2], one[MAX_N];
    struct sampler_params sp = sampler_params_default();
    sp.seed = 1234;
    for (int k = 0; k < 2; k++) {
        REQUIRE(submit(e, &col, &out[k], prompt, np, 8, MAX_N, &sp, -1, true, &err) == KVIK_OK);
        REQUIRE(collector_wait(&col));
    }
    struct engine_stats st;
    stats_idle(e, &st);
    CHECK_EQ_INT(st.preemptions, 0);
    CHECK_EQ_INT(st.prompt_tokens, 2 * np); /* prefilled once per request */
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK(engine_kv_consistent(e));
    engine_free(e);
    /* each choice alone, as an n = 1 request with seed + i, in a roomy pool */
    cfg.kv_blocks = 64;
    REQUIRE((e = engine_new(f->m, &cfg, &err)));
    for (int i = 0; i < MAX_N; i++) {
        struct sampler_params spi = sp;
        spi.seed = sp.seed + (uint64_t)i;
        REQUIRE(submit(e, &col, &one[i], prompt, np, 8, 1, &spi, -1, true, &err) == KVIK_OK);
    }
    REQUIRE(collector_wait(&col));
    int differ = 0;
    for (int i = 0; i < MAX_N; i++) {
        const struct choice_out *a = &out[0].ch[i], *b = &out[1].ch[i], *c = &one[i].ch[0];
        CHECK(a->finals == 1 && a->finish == ENGINE_FINISH_LENGTH && a->n == 8);
        CHECK_MSG(a->n == b->n && !memcmp(a->tok, b->tok, sizeof(int32_t) * (size_t)a->n),
                  "choice %d differs between two runs", i);
        CHECK_MSG(a->n == c->n && !memcmp(a->tok, c->tok, sizeof(int32_t) * (size_t)a->n),
                  "choice %d differs from an n = 1 request with seed + %d", i, i);
        if (i) differ += memcmp(a->tok, out[0].ch[0].tok, sizeof(int32_t) * 8) != 0;
    }
    CHECK_MSG(differ > 0, "every choice sampled the same tokens");
    stop_engine(e, &col);
}

TEST(engine_admission_busy_and_invalid) {
    struct fixture *f = fixture();
    if (!f) return;
    struct kvik_err err = {0};
    struct engine_config cfg = test_config(f);
    cfg.max_batch_tokens = 8; /* below max_seqs */
    CHECK(engine_new(f->m, &cfg, &err) == NULL && err.code == KVIK_ERR_INVALID_ARG);
    cfg = test_config(f);
    cfg.kv_type = TENSOR_TYPE_Q4_0;
    CHECK(engine_new(f->m, &cfg, &err) == NULL && err.code == KVIK_ERR_INVALID_ARG);
    cfg = test_config(f);
    cfg.max_seqs = 1;
    cfg.max_queue = 2;
    struct collector col;
    struct engine *e = start_engine(f, &cfg, &col);
    REQUIRE(e);
    static struct req_out out[4];
    struct sampler_params sp = greedy_params();
    REQUIRE(submit(e, &col, &out[0], f->prompt[0], f->np[0], 100, 1, &sp, -1, true, &err) == KVIK_OK);
    struct engine_stats st = {0};
    for (int i = 0; i < 60000 && st.requests_running == 0; i++) {
        engine_stats(e, &st);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    REQUIRE(st.requests_running == 1);
    /* one slot, taken: two may wait, the third is refused */
    CHECK_EQ_INT(submit(e, &col, &out[1], f->prompt[1], f->np[1], 4, 1, &sp, -1, true, &err), KVIK_OK);
    CHECK_EQ_INT(submit(e, &col, &out[2], f->prompt[2], f->np[2], 4, 1, &sp, -1, true, &err), KVIK_OK);
    CHECK_EQ_INT(submit(e, &col, &out[3], f->prompt[3], f->np[3], 4, 1, &sp, -1, false, &err), KVIK_ERR_BUSY);
    CHECK_MSG(strstr(err.msg, "waiting") != NULL, "%s", err.msg);
    CHECK_EQ_INT(out[3].id, 0);

    /* bad requests: KVIK_ERR_INVALID_ARG, each with its own message, even when busy */
    int32_t bad_lo[2] = {5, -1}, bad_hi[2] = {5, f->m->hp.n_vocab};
    struct {
        const int32_t *prompt;
        int np, max_tokens, n, top;
        float temp;
        const char *needle;
    } cases[] = {
        {f->prompt[0], f->np[0], 128, 1, -1, 0, "context"},
        {bad_lo, 2, 4, 1, -1, 0, "vocabulary"},
        {bad_hi, 2, 4, 1, -1, 0, "vocabulary"},
        {f->prompt[0], f->np[0], 4, 1, -1, NAN, "sampling"},
        {f->prompt[0], f->np[0], 4, 0, -1, 0, "n is 0"},
        {f->prompt[0], f->np[0], 4, 2, -1, 0, "n is 2"},
        {f->prompt[0], f->np[0], 4, 1, 21, 0, "top_logprobs"},
        {f->prompt[0], 0, 4, 1, -1, 0, "empty"},
        {f->prompt[0], f->np[0], 0, 1, -1, 0, "max_tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct req_out tmp = {0};
        struct sampler_params p = sp;
        p.temp = cases[i].temp;
        err = (struct kvik_err){0};
        kvik_status s = submit(e, &col, &tmp, cases[i].prompt, cases[i].np, cases[i].max_tokens, cases[i].n, &p,
                               cases[i].top, false, &err);
        CHECK_MSG(s == KVIK_ERR_INVALID_ARG && strstr(err.msg, cases[i].needle),
                  "case %zu: status %d, message '%s'", i, s, err.msg);
    }
    struct engine_request no_cb = {.prompt = f->prompt[0], .n_prompt = 1, .max_tokens = 1, .n = 1, .sampling = sp};
    uint64_t id = 7;
    CHECK_EQ_INT(engine_submit(e, &no_cb, &id, &err), KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(id, 0);
    CHECK_EQ_INT(engine_submit(e, NULL, &id, &err), KVIK_ERR_INVALID_ARG);

    engine_cancel(e, out[0].id);
    REQUIRE(collector_wait(&col));
    CHECK(out[0].ch[0].finish == ENGINE_FINISH_CANCELLED);
    CHECK(out[1].ch[0].finish == ENGINE_FINISH_LENGTH && out[1].ch[0].n == 4);
    CHECK(out[2].ch[0].finish == ENGINE_FINISH_LENGTH && out[2].ch[0].n == 4);
    engine_drain(e, clock_ns());
    CHECK_EQ_INT(submit(e, &col, &out[3], f->prompt[3], f->np[3], 4, 1, &sp, -1, false, &err), KVIK_ERR_BUSY);
    stop_engine(e, &col);
}

TEST(engine_logprobs) {
    struct fixture *f = fixture();
    if (!f || !fixture_refs(f)) return;
    struct engine_config cfg = test_config(f);
    struct kvik_err err = {0};
    struct collector col;
    struct engine *e = start_engine(f, &cfg, &col);
    REQUIRE(e);
    static struct req_out out[7];
    struct sampler_params sp = greedy_params();
    for (int i = 0; i < 4; i++) {
        out[i].greedy = true;
        REQUIRE(submit(e, &col, &out[i], f->prompt[i], f->np[i], MAX_GEN, 1, &sp, 5, false, &err) == KVIK_OK);
    }
    REQUIRE(submit(e, &col, &out[4], f->prompt[4], f->np[4], MAX_GEN, 1, &sp, 0, false, &err) == KVIK_OK);
    REQUIRE(submit(e, &col, &out[5], f->prompt[5], f->np[5], MAX_GEN, 1, &sp, -1, false, &err) == KVIK_OK);
    /* a callback that stops after two tokens (a stop string) */
    out[6].stop_after = 2;
    REQUIRE(submit(e, &col, &out[6], f->prompt[6], f->np[6], MAX_GEN, 2, &sp, -1, true, &err) == KVIK_OK);
    REQUIRE(collector_wait(&col));
    for (int i = 0; i < 6; i++) {
        const struct choice_out *c = &out[i].ch[0];
        check_ref(f, i, c, "logprobs");
        CHECK_EQ_INT(c->lp_bad, 0);
        CHECK_EQ_INT(c->n_top_seen, i < 4 ? 5 * c->n : 0);
        for (int g = 0; g < c->n && g < f->nref[i]; g++) {
            double want = i < 5 ? f->ref_lp[i][g] : 0;
            CHECK_MSG(fabs(c->lp[g] - want) < 1e-3, "prompt %d token %d: logprob %g, reference %g", i, g, c->lp[g],
                      want);
        }
    }
    for (int c = 0; c < 2; c++)
        CHECK(out[6].ch[c].finish == ENGINE_FINISH_STOP && out[6].ch[c].n == 2 && out[6].ch[c].n_generated == 2);
    stop_engine(e, &col);
}

TEST(engine_drain_by_deadline) {
    struct fixture *f = fixture();
    if (!f) return;
    struct engine_config cfg = test_config(f);
    cfg.n_ctx = 1100;
    cfg.max_seqs = 4;
    struct kvik_err err = {0};
    struct collector col;
    struct engine *e = start_engine(f, &cfg, &col);
    REQUIRE(e);
    static struct req_out out[6];
    struct sampler_params sp = greedy_params();
    /* a far deadline: everything finishes normally */
    for (int i = 0; i < 3; i++)
        REQUIRE(submit(e, &col, &out[i], f->prompt[i], f->np[i], 3, 1, &sp, -1, false, &err) == KVIK_OK);
    engine_drain(e, clock_ns() + 600 * 1000000000ll);
    for (int i = 0; i < 3; i++) {
        CHECK(out[i].ch[0].finals == 1);
        CHECK(out[i].ch[0].finish == ENGINE_FINISH_LENGTH || out[i].ch[0].finish == ENGINE_FINISH_STOP);
    }
    CHECK_EQ_INT(submit(e, &col, &out[3], f->prompt[3], f->np[3], 3, 1, &sp, -1, false, &err), KVIK_ERR_BUSY);
    engine_free(e);
    /* a near deadline: requests far too long are cancelled, waiting ones too */
    REQUIRE((e = engine_new(f->m, &cfg, &err)));
    for (int i = 0; i < 6; i++)
        REQUIRE(submit(e, &col, &out[i], f->prompt[i], f->np[i], 1000, 1, &sp, -1, true, &err) == KVIK_OK);
    engine_drain(e, clock_ns() + 300 * 1000000ll);
    struct engine_stats st;
    engine_stats(e, &st);
    CHECK_EQ_INT(st.requests_running + st.requests_waiting, 0);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    for (int i = 0; i < 6; i++) {
        const struct choice_out *c = &out[i].ch[0];
        CHECK(c->finals == 1 && c->after_final == 0);
        CHECK(c->finish == ENGINE_FINISH_CANCELLED || c->finish == ENGINE_FINISH_STOP);
        CHECK(c->n < 1000);
    }
    CHECK(engine_kv_consistent(e));
    stop_engine(e, &col);
}

/* A 2-layer random-weight model with the default model's vocabulary cut to
 * 512 tokens (written to a temporary file, unlinked once mapped). */
static struct model *tiny_model(const struct fixture *f) {
    char path[4096], dir[64] = "/tmp/kvik-engine-test-XXXXXX", file[128];
    if (!test_default_model(path, sizeof path) || !mkdtemp(dir)) return NULL;
    snprintf(file, sizeof file, "%s/tiny.gguf", dir);
    struct synth_shape shape = {.name = "tiny", .model = "test", .n_layer = 2, .n_embd = 64, .n_ff = 128,
                                .n_head = 4, .n_head_kv = 2, .n_vocab = 512, .n_ctx = 256,
                                .rope_base = 10000.0f, .rms_eps = 1e-5f, .tied_output = false};
    struct synth_params sp = {.shape = &shape, .type = TENSOR_TYPE_Q8_0, .seed = 11, .vocab_path = path,
                              .n_threads = 1};
    struct kvik_err err = {0};
    struct model *m = NULL;
    if (synth_write(file, &sp, NULL, &err) || model_load(file, &m, &err))
        test_fail(__FILE__, __LINE__, "tiny model: %s", err.msg);
    remove(file);
    rmdir(dir);
    (void)f;
    return m;
}

/* Greedy decode of prompt alone on m (plain loop, flat F16 cache): up to
 * max_tokens tokens, stopping at an end-of-generation token unless
 * ignore_eos. Returns the count, -1 on failure. */
static int solo_greedy(struct model_ctx *c, struct kv_flat *kv, int nv, const struct fixture *f,
                       const int32_t *prompt, int np, int max_tokens, bool ignore_eos, int32_t *out, float *logits) {
    int32_t pos[16], seq[16] = {0};
    for (int p = 0; p < np; p++) pos[p] = p;
    struct model_batch b = {.n = np, .tokens = prompt, .pos = pos, .seq = seq};
    if (model_forward(c, &kv->base, &b, logits, NULL)) return -1;
    int n = 0;
    while (n < max_tokens) {
        int32_t t = argmax(logits, nv);
        if (!ignore_eos && t < nv && is_eog(f, t)) break;
        out[n++] = t;
        int32_t p = np + n - 1, s = 0;
        struct model_batch one = {.n = 1, .tokens = &t, .pos = &p, .seq = &s};
        if (n < max_tokens && model_forward(c, &kv->base, &one, logits, NULL)) return -1;
    }
    return n;
}

TEST(engine_stress_random_requests_and_cancels) {
    struct fixture *f = fixture();
    if (!f) return;
    struct model *m = tiny_model(f);
    REQUIRE(m);
    enum { N_REQ = 400, MAX_NP = 6, MAX_T = 5 };
    struct engine_config cfg = test_config(f);
    cfg.block_tokens = 4;
    cfg.kv_blocks = 10;
    cfg.max_seqs = 12;
    cfg.max_batch_tokens = 24;
    cfg.n_ctx = 40;
    cfg.max_queue = N_REQ;
    cfg.n_threads = 1; /* steps of microseconds: no pool hand-offs */
    struct kvik_err err = {0};
    struct engine *e = engine_new(m, &cfg, &err);
    REQUIRE(e);
    struct collector col;
    collector_init(&col);
    struct req_out *out = calloc(N_REQ, sizeof *out);
    struct spec {
        int32_t prompt[MAX_NP];
        int np, max_tokens;
        bool greedy, ignore_eos;
    } *spec = calloc(N_REQ, sizeof *spec);
    REQUIRE(out && spec);
    uint64_t rng = 42;
    int n_choices = 0, n_cancel = 0;
    for (int i = 0; i < N_REQ; i++) {
        struct spec *q = &spec[i];
        q->np = 1 + (int)(test_rand_u64(&rng) % MAX_NP);
        for (int p = 0; p < q->np; p++) q->prompt[p] = (int32_t)(test_rand_u64(&rng) % (uint64_t)m->hp.n_vocab);
        int n = 1 + (int)(test_rand_u64(&rng) % 3);
        q->max_tokens = 1 + (int)(test_rand_u64(&rng) % MAX_T);
        struct sampler_params sp = sampler_params_default();
        sp.seed = (uint64_t)i;
        q->greedy = test_rand_u64(&rng) % 2;
        if (q->greedy) sp.temp = 0;
        q->ignore_eos = test_rand_u64(&rng) % 2;
        int top = (int)(test_rand_u64(&rng) % 4) - 1;
        struct engine_request r = {.prompt = q->prompt, .n_prompt = q->np, .max_tokens = q->max_tokens, .n = n,
                                   .sampling = sp, .top_logprobs = top, .ignore_eos = q->ignore_eos,
                                   .on_event = on_event, .user = &out[i]};
        out[i].col = &col;
        out[i].n = n;
        out[i].greedy = q->greedy;
        pthread_mutex_lock(&col.mu);
        col.finals_left += n;
        pthread_mutex_unlock(&col.mu);
        REQUIRE(engine_submit(e, &r, &out[i].id, &err) == KVIK_OK);
        n_choices += n;
        /* now and then cancel a random earlier request (finished, running or waiting) */
        if (test_rand_u64(&rng) % 5 == 0) {
            engine_cancel(e, out[test_rand_u64(&rng) % (uint64_t)(i + 1)].id);
            n_cancel++;
        }
        if (i % 50 == 49) { /* let the engine catch up, so cancels hit running requests too */
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    REQUIRE(collector_wait(&col));
    struct engine_stats st;
    stats_idle(e, &st);
    uint64_t finished = 0;
    for (int i = 0; i <= ENGINE_FINISH_ERROR; i++) finished += st.finished[i];
    CHECK_EQ_INT(finished, n_choices);
    CHECK_EQ_INT(st.finished[ENGINE_FINISH_ERROR], 0);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK_EQ_INT(st.requests_running + st.requests_waiting, 0);
    CHECK(engine_kv_consistent(e));
    CHECK_MSG(st.preemptions > 0 && st.finished[ENGINE_FINISH_CANCELLED] > 0, "%llu preemptions, %llu cancelled",
              (unsigned long long)st.preemptions, (unsigned long long)st.finished[ENGINE_FINISH_CANCELLED]);
    engine_free(e);

    /* every event well formed; greedy choices equal their solo decode */
    struct model_ctx *c = model_ctx_new(m, 1, MAX_NP, MAX_NP + MAX_T, &err);
    struct kv_flat kv;
    REQUIRE(c && kv_flat_init(&kv, m->hp.n_layer, 1, MAX_NP + MAX_T, m->hp.n_head_kv * m->hp.head_dim,
                              TENSOR_TYPE_F16, &err) == KVIK_OK);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    REQUIRE(logits);
    int bad = 0, differ = 0, compared = 0;
    for (int i = 0; i < N_REQ; i++) {
        int32_t ref[MAX_T];
        int nref = spec[i].greedy ? solo_greedy(c, &kv, m->hp.n_vocab, f, spec[i].prompt, spec[i].np,
                                                spec[i].max_tokens, spec[i].ignore_eos, ref, logits)
                                  : 0;
        for (int k = 0; k < out[i].n; k++) {
            const struct choice_out *o = &out[i].ch[k];
            bad += o->finals != 1 || o->after_final || o->lp_bad || o->n != o->n_generated;
            if (!spec[i].greedy) continue;
            bool cancelled = o->finish == ENGINE_FINISH_CANCELLED;
            bool same = cancelled ? o->n <= nref : o->n == nref;
            for (int t = 0; same && t < o->n; t++) same = o->tok[t] == ref[t];
            differ += !same;
            compared++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_MSG(differ == 0, "%d of %d greedy choices differ from their solo decode", differ, compared);
    printf("    %d requests (%d choices), %d cancels: %llu choices cancelled, %llu preemptions, %llu steps\n", N_REQ,
           n_choices, n_cancel, (unsigned long long)st.finished[ENGINE_FINISH_CANCELLED],
           (unsigned long long)st.preemptions, (unsigned long long)st.steps);
    kv_flat_free(&kv);
    model_ctx_free(c);
    free(logits);
    collector_free(&col);
    free(out);
    free(spec);
    model_free(m);
}

/* prefill_chunk: a prompt that arrives while another request decodes is
 * prefilled at most prefill_chunk tokens a step (here 4: a prompt of np
 * tokens takes at least np / 4 steps), while with 0 it goes in one step;
 * its output is its solo reference either way. */
TEST(engine_prefill_chunk_caps_prompt_tokens_while_decoding) {
    struct fixture *f = fixture();
    if (!f || !fixture_refs(f)) return;
    int pi = 0;
    for (int i = 0; i < N_PROMPTS; i++)
        if (f->np[i] > f->np[pi]) pi = i;
    int32_t pa[3] = {504, 3575, 282};
    for (int pass = 0; pass < 2; pass++) {
        struct engine_config cfg = test_config(f);
        cfg.prefill_chunk = pass == 0 ? 4 : 0;
        struct collector col;
        struct engine *e = start_engine(f, &cfg, &col);
        REQUIRE(e);
        struct req_out a = {0}, b = {0};
        struct sampler_params sp = greedy_params();
        struct kvik_err err = {0};
        REQUIRE(submit(e, &col, &a, pa, 3, 100, 1, &sp, -1, true, &err) == KVIK_OK);
        for (int i = 0; i < 100000; i++) { /* until a decodes */
            pthread_mutex_lock(&col.mu);
            int n = a.ch[0].n;
            pthread_mutex_unlock(&col.mu);
            if (n > 0) break;
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        struct engine_stats st0, st1;
        engine_stats(e, &st0);
        REQUIRE(submit(e, &col, &b, f->prompt[pi], f->np[pi], MAX_GEN, 1, &sp, -1, false, &err) == KVIK_OK);
        for (int i = 0; i < 300000; i++) { /* until b is done */
            pthread_mutex_lock(&col.mu);
            int fin = b.ch[0].finals;
            pthread_mutex_unlock(&col.mu);
            if (fin) break;
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        engine_stats(e, &st1);
        pthread_mutex_lock(&col.mu);
        int a_done = a.ch[0].finals;
        pthread_mutex_unlock(&col.mu);
        CHECK_MSG(!a_done, "the decoding request ended before the prompt was in (pass %d)", pass);
        check_ref(f, pi, &b.ch[0], pass == 0 ? "chunks of 4" : "no cap");
        /* statistics are published once per engine loop: a step either side */
        uint64_t steps = st1.steps - st0.steps, want = (uint64_t)(f->np[pi] / 4 + f->nref[pi] - 1);
        if (pass == 0)
            CHECK_MSG(steps >= want, "%llu steps for a %d-token prompt in chunks of 4 (at least %llu)",
                      (unsigned long long)steps, f->np[pi], (unsigned long long)want);
        else
            CHECK_MSG(steps <= (uint64_t)f->nref[pi] + 2, "%llu steps for a %d-token prompt without a cap",
                      (unsigned long long)steps, f->np[pi]);
        engine_cancel(e, a.id);
        REQUIRE(collector_wait(&col));
        stop_engine(e, &col);
    }
}

/* A constraint that allows one token a step (ids on both sides of 32-bit
 * word edges) and then nothing. */
struct one_by_one {
    int32_t want[3];
    int step, n_vocab;
    int32_t accepted[8];
    int n_accepted, masks;
};

static bool one_mask(void *ctx, int choice, uint32_t *allowed) {
    struct one_by_one *c = ctx;
    c->masks++;
    memset(allowed, 0, ((size_t)c->n_vocab + 31) / 32 * sizeof *allowed);
    if (choice != 0 || c->step >= 3) return false;
    allowed[c->want[c->step] >> 5] |= 1u << (c->want[c->step] & 31);
    return true;
}

static void one_accept(void *ctx, int choice, int32_t token) {
    struct one_by_one *c = ctx;
    if (c->n_accepted < 8) c->accepted[c->n_accepted++] = token;
    c->step++;
}

/* A constrained choice samples only what the mask allows, hands each token
 * to accept, and ends with STOP when the mask allows nothing; the engine
 * serves on. */
TEST(engine_constraint_masks_then_stops) {
    struct fixture *f = fixture();
    if (!f) return;
    struct engine_config cfg = test_config(f);
    struct collector col;
    struct engine *e = start_engine(f, &cfg, &col);
    REQUIRE(e);
    struct one_by_one oc = {.want = {31, 32, 1000}, .n_vocab = tokenizer_n_vocab(f->tok)};
    for (int i = 0; i < 3; i++) REQUIRE(!is_eog(f, oc.want[i]));
    struct engine_constraint ec = {one_mask, one_accept, &oc};
    static struct req_out out;
    memset(&out, 0, sizeof out);
    out.col = &col;
    out.n = 1;
    struct sampler_params sp = sampler_params_default(); /* sampling too: only the allowed token can come */
    sp.seed = 3;
    struct engine_request r = {.prompt = f->prompt[0], .n_prompt = f->np[0], .max_tokens = 20, .n = 1,
                               .sampling = sp, .top_logprobs = -1, .constraint = &ec, .on_event = on_event,
                               .user = &out};
    pthread_mutex_lock(&col.mu);
    col.finals_left += 1;
    pthread_mutex_unlock(&col.mu);
    struct kvik_err err = {0};
    REQUIRE(engine_submit(e, &r, &out.id, &err) == KVIK_OK);
    REQUIRE(collector_wait(&col));
    const struct choice_out *c = &out.ch[0];
    CHECK_EQ_INT(c->n, 3);
    for (int i = 0; i < 3 && i < c->n; i++) CHECK_EQ_INT(c->tok[i], oc.want[i]);
    CHECK_EQ_INT(oc.n_accepted, 3);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(oc.accepted[i], oc.want[i]);
    CHECK_EQ_INT(oc.masks, 4);
    CHECK(c->finals == 1 && c->finish == ENGINE_FINISH_STOP);
    /* the engine still serves */
    static struct req_out next;
    struct sampler_params g = greedy_params();
    REQUIRE(submit(e, &col, &next, f->prompt[1], f->np[1], 2, 1, &g, -1, true, &err) == KVIK_OK);
    REQUIRE(collector_wait(&col));
    CHECK_EQ_INT(next.ch[0].n, 2);
    CHECK(engine_kv_consistent(e));
    stop_engine(e, &col);
}
