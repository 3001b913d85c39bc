/*
 * test_engine_prefix.c — the serving engine's prefix cache on the real
 * default model, greedy:
 *   same outputs   prompts sharing a long prefix, a multi-turn exchange
 *                  (turn 2 = turn 1's prompt + its reply + a new message)
 *                  and a batch of them all at once give exactly the tokens
 *                  they give with the cache off, while later requests are
 *                  served largely from the cache (n_cached in the final
 *                  event, the engine's hit counters), turn 2 hitting
 *                  every position turn 1 computed, its partly filled last
 *                  block too;
 *   pressure       the same in a pool far too small for everything, where
 *                  cached blocks are evicted and running choices preempted
 *                  (and readmitted onto their own cached blocks): the same
 *                  tokens, a consistent pool, nothing left in use;
 *   isolation      a request with another cache_key gets no hit.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine.h"
#include "model/model.h"
#include "tensor/tensor.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

enum { MAX_TOK = 256, MAX_OUT = 32, N_Q = 6, MAX_EOG = 16 };

static struct {
    bool tried, ok;
    struct model *m;
    struct tokenizer *tok;
    int32_t eog[MAX_EOG];
    int n_eog;
} g_px;

static const char k_system[] =
    "You are a careful assistant for a public library. Answer questions about opening hours, borrowing rules, "
    "late fees and events in two sentences or fewer, politely, and never invent facts you were not given. The "
    "library opens at nine and closes at six on weekdays, and at noon on Saturdays.\n";
static const char *const k_questions[N_Q] = {
    "When does the library open on Saturday?", "How long can I keep a book?", "Is there a fee for a late DVD?",
    "Can children get a card?", "Do you host chess evenings?", "Where can I print a document?"};

static bool px_load(void) {
    if (g_px.tried) {
        if (!g_px.ok) test_skip("default model not available");
        return g_px.ok;
    }
    g_px.tried = true;
    char path[4096];
    if (!test_default_model(path, sizeof path)) return false;
    struct kvik_err err = {0};
    if (model_load(path, &g_px.m, &err) || tokenizer_load(g_px.m->file, &g_px.tok, &err)) {
        test_fail(__FILE__, __LINE__, "loading the default model: %s", err.msg);
        return false;
    }
    int n = 0;
    int32_t *eog = engine_eog_ids(g_px.tok, &n);
    g_px.n_eog = eog ? (n < MAX_EOG ? n : MAX_EOG) : 0;
    if (eog) memcpy(g_px.eog, eog, (size_t)g_px.n_eog * sizeof *eog);
    free(eog);
    g_px.ok = true;
    return true;
}

/* text appended to ids[*n..] */
static bool encode_more(const char *text, int32_t *ids, int *n) {
    int64_t k = tokenizer_encode(g_px.tok, text, strlen(text), false, false, ids + *n, MAX_TOK - *n);
    if (k < 1 || *n + k > MAX_TOK) return false;
    *n += (int)k;
    return true;
}

/* ---- running requests ------------------------------------------------------ */

struct px_out {
    int32_t tok[MAX_OUT];
    int n, n_cached, finals;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_left;

static bool px_on_event(void *user, const struct engine_event *ev) {
    struct px_out *o = user;
    pthread_mutex_lock(&g_mu);
    if (ev->finish == ENGINE_FINISH_NONE) {
        if (o->n < MAX_OUT) o->tok[o->n] = ev->token;
        o->n++;
    } else {
        o->finals++;
        o->n_cached = ev->n_cached;
        g_left--;
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    return true;
}

static bool px_submit(struct engine *e, const int32_t *p, int np, int max_tokens, uint64_t key, struct px_out *o) {
    memset(o, 0, sizeof *o);
    struct sampler_params sp = sampler_params_default();
    sp.temp = 0;
    sp.seed = 1;
    struct engine_request r = {.prompt = p, .n_prompt = np, .max_tokens = max_tokens, .n = 1, .sampling = sp,
                               .top_logprobs = -1, .ignore_eos = true, .cache_key = key,
                               .on_event = px_on_event, .user = o};
    pthread_mutex_lock(&g_mu);
    g_left++;
    pthread_mutex_unlock(&g_mu);
    struct kvik_err err = {0};
    if (engine_submit(e, &r, NULL, &err) == KVIK_OK) return true;
    test_fail(__FILE__, __LINE__, "engine_submit: %s", err.msg);
    pthread_mutex_lock(&g_mu);
    g_left--;
    pthread_mutex_unlock(&g_mu);
    return false;
}

static bool px_wait(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 600;
    pthread_mutex_lock(&g_mu);
    int rc = 0;
    while (g_left > 0 && rc == 0) rc = pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    bool ok = g_left == 0;
    pthread_mutex_unlock(&g_mu);
    return ok;
}

/* ---- the workload ---------------------------------------------------------- */

struct workload {
    int32_t q[N_Q][MAX_TOK]; /* system prompt + question i */
    int nq[N_Q];
    int32_t turn2[MAX_TOK];  /* q[0] + the reply to it + a follow-up */
    int n2;
    struct px_out seq[N_Q], t2, batch[N_Q], other_key;
};

enum { GEN = 12, GEN_T1 = 24 };

/* Runs everything on one engine: the questions one after another, turn 2,
 * the questions all at once, question 1 under another key. */
static bool run_workload(const struct engine_config *cfg, struct workload *w, struct engine_stats *st,
                         bool *consistent) {
    struct kvik_err err = {0};
    struct engine *e = engine_new(g_px.m, cfg, &err);
    if (!e) {
        test_fail(__FILE__, __LINE__, "engine_new: %s", err.msg);
        return false;
    }
    bool ok = true;
    for (int i = 0; ok && i < N_Q; i++)
        ok = px_submit(e, w->q[i], w->nq[i], i == 0 ? GEN_T1 : GEN, 7, &w->seq[i]) && px_wait();
    /* turn 2: question 0, its reply (as the next prompt would carry it), a follow-up */
    w->n2 = w->nq[0];
    memcpy(w->turn2, w->q[0], sizeof(int32_t) * (size_t)w->nq[0]);
    for (int i = 0; ok && i < w->seq[0].n && i < MAX_OUT; i++) w->turn2[w->n2++] = w->seq[0].tok[i];
    ok = ok && encode_more("\nAnd on Sunday?", w->turn2, &w->n2);
    ok = ok && px_submit(e, w->turn2, w->n2, GEN, 7, &w->t2) && px_wait();
    for (int i = 0; ok && i < N_Q; i++) ok = px_submit(e, w->q[i], w->nq[i], GEN, 7, &w->batch[i]);
    ok = ok && px_wait();
    ok = ok && px_submit(e, w->q[1], w->nq[1], GEN, 8, &w->other_key) && px_wait();
    *consistent = engine_kv_consistent(e);
    engine_drain(e, clock_ns() + 60 * 1000000000ll);
    engine_stats(e, st);
    engine_free(e);
    return ok;
}

static bool same_tokens(const struct px_out *a, const struct px_out *b) {
    if (a->n != b->n || a->finals != 1 || b->finals != 1) return false;
    for (int i = 0; i < a->n && i < MAX_OUT; i++)
        if (a->tok[i] != b->tok[i]) return false;
    return true;
}

static bool build_prompts(struct workload *w) {
    for (int i = 0; i < N_Q; i++) {
        w->nq[i] = 0;
        if (!encode_more(k_system, w->q[i], &w->nq[i]) || !encode_more(k_questions[i], w->q[i], &w->nq[i]))
            return false;
    }
    return true;
}

static struct engine_config px_config(void) {
    struct engine_config c = engine_config_default();
    c.n_threads = 1;
    c.max_seqs = 8;
    c.max_batch_tokens = 48; /* prompts of ~80 tokens take two or more chunks */
    c.n_ctx = 160;
    c.kv_blocks = 96;
    c.block_tokens = 16;
    c.eog = g_px.eog;
    c.n_eog = g_px.n_eog;
    return c;
}

/* Compares a run with the cache on against one with it off. */
static void check_against_off(const struct engine_config *on_cfg, const char *what, bool expect_preempt) {
    static struct workload off, on;
    struct engine_config c = *on_cfg;
    REQUIRE(build_prompts(&off) && build_prompts(&on));
    struct engine_stats st_off, st_on;
    bool cons_off = false, cons_on = false;
    c.prefix_cache = false;
    REQUIRE(run_workload(&c, &off, &st_off, &cons_off));
    c.prefix_cache = true;
    REQUIRE(run_workload(&c, &on, &st_on, &cons_on));
    CHECK(cons_off && cons_on);
    for (int i = 0; i < N_Q; i++) {
        CHECK_MSG(same_tokens(&off.seq[i], &on.seq[i]), "%s: question %d alone differs", what, i);
        CHECK_MSG(same_tokens(&off.batch[i], &on.batch[i]), "%s: question %d batched differs", what, i);
        CHECK_EQ_INT(off.seq[i].n_cached, 0);
    }
    CHECK_MSG(same_tokens(&off.t2, &on.t2), "%s: turn 2 differs", what);
    CHECK_MSG(same_tokens(&off.other_key, &on.other_key), "%s: other key differs", what);
    CHECK_EQ_INT(st_off.prefix_queries, 0);
    CHECK_EQ_INT(on.other_key.n_cached, 0); /* another key: nothing shared */
    CHECK_EQ_INT(on.seq[0].n_cached, 0);    /* the first request finds nothing */
    int sys_blocks = 0;
    for (int n = 0; n < on.nq[0] && on.q[0][n] == on.q[1][n]; n++) sys_blocks = (n + 1) / 16 * 16;
    int min_hit = expect_preempt ? 1 : sys_blocks;
    for (int i = 1; i < N_Q; i++)
        CHECK_MSG(on.seq[i].n_cached >= min_hit, "%s: question %d: %d tokens cached, want >= %d", what, i,
                  on.seq[i].n_cached, min_hit);
    if (!expect_preempt) {
        /* turn 2 hits every position turn 1 computed: its prompt and reply
         * but the last token (sampled, never fed), the partly filled last
         * block included, so it prefills exactly its new tokens */
        CHECK_MSG(on.t2.n_cached == on.nq[0] + GEN_T1 - 1, "%s: turn 2: %d cached, turn 1 had %d + %d", what,
                  on.t2.n_cached, on.nq[0], GEN_T1);
        CHECK_MSG((on.nq[0] + GEN_T1 - 1) % 16 != 0, "%s: turn 1 ends on a block boundary: no tail tested", what);
    }
    CHECK(st_on.prefix_hits > 0 && st_on.prefix_hits < st_on.prefix_queries);
    CHECK_EQ_INT(st_on.prompt_tokens, st_off.prompt_tokens);
    CHECK_EQ_INT(st_on.kv_blocks_used, 0);
    if (expect_preempt) CHECK_MSG(st_on.preemptions > 0, "%s: no preemption", what);
    printf("    %s: hits %llu of %llu tokens, %llu preemptions (off: %llu), steps %llu (off: %llu)\n", what,
           (unsigned long long)st_on.prefix_hits, (unsigned long long)st_on.prefix_queries,
           (unsigned long long)st_on.preemptions, (unsigned long long)st_off.preemptions,
           (unsigned long long)st_on.steps, (unsigned long long)st_off.steps);
}

TEST(engine_prefix_cache_keeps_outputs) {
    if (!px_load()) return;
    struct engine_config c = px_config();
    check_against_off(&c, "roomy pool", false);
}

TEST(engine_prefix_cache_under_pressure_keeps_outputs) {
    if (!px_load()) return;
    struct engine_config c = px_config();
    c.kv_blocks = 14; /* 224 positions: two requests at a time, the cache evicted over and over */
    check_against_off(&c, "tiny pool", true);
}
