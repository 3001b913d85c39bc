/*
 * test_engine_prompt_lp.c — prompt log-probabilities from the serving
 * engine (engine_request.prompt_logprobs) on the real default model:
 *   reference    every prompt position's log-probability and top ids equal
 *                those of one model_forward over the whole prompt with
 *                logits at every position (what kvik perplexity scores),
 *                within float tolerance; the prompt is longer than the
 *                rows one step may spend on it, so it spans steps;
 *   warm cache   the same request again, and one after a plain request
 *                that left the prompt's blocks cached, give the same bits
 *                and report nothing cached;
 *   max_tokens 0 every choice finishes with LENGTH and nothing generated;
 *                with tokens to generate, every prompt event comes before
 *                the first token, and the tokens are those of a request
 *                without prompt log-probabilities;
 *   validation   max_tokens 0 without prompt_logprobs, and prompt_logprobs
 *                without top_logprobs, are refused.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine.h"
#include "model/kv.h"
#include "model/model.h"
#include "tensor/tensor.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tools/ppl.h"

enum { PL_MAX_TOK = 400, PL_TOP = 3, PL_MAX_GEN = 8 };

static struct {
    bool tried, ok;
    struct model *m;
    struct tokenizer *tok;
    int32_t prompt[PL_MAX_TOK];
    int n;
} g_pl;

static const char k_text[] =
    "The river runs north through the valley, past the old mill and the school, and reaches the lake by the "
    "church before it turns east. Farmers on both banks grow wheat, barley and potatoes, and in the autumn the "
    "market in the square sells apples, honey and cheese. Visitors come by train in the summer to walk the hills, "
    "swim in the lake and eat at the inn, which has served trout and dumplings for two hundred years.";

static bool pl_load(void) {
    if (g_pl.tried) {
        if (!g_pl.ok) test_skip("default model not available");
        return g_pl.ok;
    }
    g_pl.tried = true;
    char path[4096];
    if (!test_default_model(path, sizeof path)) return false;
    struct kvik_err err = {0};
    if (model_load(path, &g_pl.m, &err) || tokenizer_load(g_pl.m->file, &g_pl.tok, &err)) {
        test_fail(__FILE__, __LINE__, "loading the default model: %s", err.msg);
        return false;
    }
    /* the text twice: more positions than ENGINE_PROMPT_ROWS (64) twice over */
    int64_t k = tokenizer_encode(g_pl.tok, k_text, strlen(k_text), true, false, g_pl.prompt, PL_MAX_TOK / 2);
    int64_t k2 = k > 0 && k <= PL_MAX_TOK / 2
                     ? tokenizer_encode(g_pl.tok, k_text, strlen(k_text), false, false, g_pl.prompt + k, PL_MAX_TOK / 2)
                     : -1;
    k = k2 > 0 && k2 <= PL_MAX_TOK / 2 ? k + k2 : -1;
    if (k < 150 || k > PL_MAX_TOK) {
        test_fail(__FILE__, __LINE__, "the prompt encodes to %lld tokens", (long long)k);
        return false;
    }
    g_pl.n = (int)k;
    g_pl.ok = true;
    return true;
}

/* ---- collecting events ----------------------------------------------------- */

struct pl_out {
    float lp[PL_MAX_TOK];          /* [pos] */
    int32_t top[PL_MAX_TOK][PL_TOP];
    int n_prompt_ev;               /* prompt events, in order (checked) */
    bool order_ok;                 /* positions 1, 2, ... each with token prompt[pos] */
    bool after_token;              /* a prompt event came after a generated token */
    int32_t gen[2][PL_MAX_GEN];
    int n_gen[2];
    int finals, n_cached;
    enum engine_finish finish[2];
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_left;

static bool pl_on_event(void *user, const struct engine_event *ev) {
    struct pl_out *o = user;
    pthread_mutex_lock(&g_mu);
    if (ev->finish == ENGINE_FINISH_NONE && ev->prompt_pos > 0) {
        int p = ev->prompt_pos;
        if (p != o->n_prompt_ev + 1 || ev->choice != 0 || p >= g_pl.n || ev->token != g_pl.prompt[p] ||
            ev->n_top != PL_TOP)
            o->order_ok = false;
        else {
            o->lp[p] = ev->logprob;
            for (int k = 0; k < PL_TOP; k++) o->top[p][k] = ev->top_ids[k];
        }
        if (o->n_gen[0] || o->n_gen[1]) o->after_token = true;
        o->n_prompt_ev++;
    } else if (ev->finish == ENGINE_FINISH_NONE) {
        int c = ev->choice & 1;
        if (o->n_gen[c] < PL_MAX_GEN) o->gen[c][o->n_gen[c]++] = ev->token;
    } else {
        if (ev->choice < 2) o->finish[ev->choice] = ev->finish;
        o->n_cached = ev->n_cached;
        o->finals++;
        g_left--;
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    return true;
}

/* Submits the prompt and waits for every final event. */
static bool pl_run(struct engine *e, bool prompt_lp, int max_tokens, int n, struct pl_out *o) {
    memset(o, 0, sizeof *o);
    o->order_ok = true;
    struct sampler_params sp = sampler_params_default();
    sp.temp = 0;
    sp.seed = 1;
    struct engine_request r = {.prompt = g_pl.prompt, .n_prompt = g_pl.n, .max_tokens = max_tokens, .n = n,
                               .sampling = sp, .top_logprobs = prompt_lp ? PL_TOP : -1,
                               .prompt_logprobs = prompt_lp, .ignore_eos = true, .on_event = pl_on_event, .user = o};
    pthread_mutex_lock(&g_mu);
    g_left += n;
    pthread_mutex_unlock(&g_mu);
    struct kvik_err err = {0};
    if (engine_submit(e, &r, NULL, &err) != KVIK_OK) {
        test_fail(__FILE__, __LINE__, "engine_submit: %s", err.msg);
        pthread_mutex_lock(&g_mu);
        g_left -= n;
        pthread_mutex_unlock(&g_mu);
        return false;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 600;
    pthread_mutex_lock(&g_mu);
    int rc = 0;
    while (g_left > 0 && rc == 0) rc = pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    bool ok = g_left == 0;
    pthread_mutex_unlock(&g_mu);
    if (!ok) test_fail(__FILE__, __LINE__, "the request did not finish");
    return ok;
}

static struct engine *pl_engine(bool prefix_cache) {
    struct engine_config cfg = engine_config_default();
    cfg.n_threads = 2;
    cfg.n_ctx = 1024;
    cfg.max_seqs = 4;
    cfg.max_batch_tokens = 256;
    cfg.prefix_cache = prefix_cache;
    struct kvik_err err = {0};
    struct engine *e = engine_new(g_pl.m, &cfg, &err);
    if (!e) test_fail(__FILE__, __LINE__, "engine_new: %s", err.msg);
    return e;
}

/* ---- the reference: one forward pass with logits at every position ---------- */

static bool reference(float *lp, int32_t (*top)[PL_TOP]) {
    const struct model *m = g_pl.m;
    int n = g_pl.n, nv = (int)m->hp.n_vocab;
    struct kvik_err err = {0};
    struct model_ctx *ctx = model_ctx_new(m, 2, n, n, &err);
    struct kv_flat kv = {0};
    float *logits = malloc(sizeof(float) * (size_t)n * (size_t)nv);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n), *seq = calloc((size_t)n, sizeof(int32_t));
    bool *mark = malloc((size_t)n), ok = false;
    if (!ctx || !logits || !pos || !seq || !mark ||
        kv_flat_init(&kv, m->hp.n_layer, 1, n, m->hp.n_head_kv * m->hp.head_dim, TENSOR_TYPE_F16, &err))
        goto out;
    for (int i = 0; i < n; i++) pos[i] = i, mark[i] = true;
    struct model_batch mb = {.n = n, .tokens = g_pl.prompt, .pos = pos, .seq = seq, .logits = mark};
    if (model_forward(ctx, &kv.base, &mb, logits, &err)) goto out;
    for (int p = 1; p < n; p++) {
        const float *row = logits + (size_t)(p - 1) * (size_t)nv;
        struct ppl_row r;
        ppl_score(row, nv, g_pl.prompt[p], &r);
        lp[p] = (float)-r.nll;
        /* the top ids, largest first, lower id first among equal logits */
        for (int k = 0; k < PL_TOP; k++) {
            int best = -1;
            for (int i = 0; i < nv; i++) {
                bool taken = false;
                for (int q = 0; q < k; q++) taken |= top[p][q] == i;
                if (!taken && (best < 0 || row[i] > row[best])) best = i;
            }
            top[p][k] = best;
        }
    }
    ok = true;
out:
    if (!ok) test_fail(__FILE__, __LINE__, "reference forward: %s", err.msg);
    kv_flat_free(&kv);
    model_ctx_free(ctx);
    free(logits);
    free(pos);
    free(seq);
    free(mark);
    return ok;
}

TEST(engine_prompt_logprobs_match_all_position_logits) {
    if (!pl_load()) return;
    static float ref[PL_MAX_TOK];
    static int32_t ref_top[PL_MAX_TOK][PL_TOP];
    if (!reference(ref, ref_top)) return;
    struct engine *e = pl_engine(true);
    if (!e) return;
    static struct pl_out cold, again, after_plain, plain;
    if (!pl_run(e, true, 0, 1, &cold)) goto done;
    CHECK(cold.order_ok);
    CHECK_EQ_INT(cold.n_prompt_ev, g_pl.n - 1);
    CHECK_EQ_INT(cold.n_gen[0], 0);
    CHECK_EQ_INT(cold.finish[0], ENGINE_FINISH_LENGTH);
    double worst = 0;
    int top_same = 0;
    for (int p = 1; p < g_pl.n; p++) {
        double d = fabs((double)cold.lp[p] - ref[p]);
        if (d > worst) worst = d;
        top_same += cold.top[p][0] == ref_top[p][0];
    }
    printf("    %d prompt positions; largest |engine - forward| %.2e; same top-1 at %d\n", g_pl.n - 1, worst, top_same);
    CHECK(worst < 1e-4);
    CHECK(top_same >= g_pl.n - 3); /* near-ties may swap under rounding */

    /* warm: the prompt's blocks are cached now; the numbers are the same bits */
    if (!pl_run(e, true, 0, 1, &again)) goto done;
    CHECK_EQ_INT(again.n_prompt_ev, g_pl.n - 1);
    CHECK_EQ_INT(again.n_cached, 0);
    CHECK(memcmp(again.lp, cold.lp, sizeof cold.lp) == 0);
    /* a plain request (attaches the cached prefix), then prompt log-probabilities again */
    if (!pl_run(e, false, 4, 1, &plain)) goto done;
    CHECK(plain.n_cached > 0);
    CHECK_EQ_INT(plain.n_prompt_ev, 0);
    if (!pl_run(e, true, 4, 2, &after_plain)) goto done;
    CHECK(after_plain.order_ok);
    CHECK(!after_plain.after_token);
    CHECK_EQ_INT(after_plain.n_prompt_ev, g_pl.n - 1);
    CHECK(memcmp(after_plain.lp, cold.lp, sizeof cold.lp) == 0);
    /* generation goes on as without prompt log-probabilities, for both choices */
    CHECK_EQ_INT(after_plain.n_gen[0], 4);
    CHECK_EQ_INT(after_plain.n_gen[1], 4);
    CHECK(memcmp(after_plain.gen[0], plain.gen[0], 4 * sizeof(int32_t)) == 0);
    CHECK(memcmp(after_plain.gen[1], plain.gen[0], 4 * sizeof(int32_t)) == 0);
    CHECK(engine_kv_consistent(e));
done:
    engine_free(e);
}

TEST(engine_prompt_logprobs_same_without_prefix_cache) {
    if (!pl_load()) return;
    struct engine *on = pl_engine(true), *off = pl_engine(false);
    static struct pl_out a, b, c;
    if (on && off && pl_run(on, false, 2, 1, &c) && pl_run(on, true, 0, 1, &a) && pl_run(off, true, 0, 1, &b)) {
        CHECK_EQ_INT(a.n_prompt_ev, g_pl.n - 1);
        CHECK(memcmp(a.lp, b.lp, sizeof a.lp) == 0);
        CHECK(memcmp(a.top, b.top, sizeof a.top) == 0);
    }
    engine_free(on);
    engine_free(off);
}

TEST(engine_prompt_logprobs_validation) {
    if (!pl_load()) return;
    struct engine *e = pl_engine(false);
    if (!e) return;
    struct pl_out o = {0};
    struct engine_request r = {.prompt = g_pl.prompt, .n_prompt = 4, .max_tokens = 0, .n = 1,
                               .sampling = sampler_params_default(), .top_logprobs = 2, .on_event = pl_on_event,
                               .user = &o};
    struct kvik_err err = {0};
    CHECK_EQ_INT(engine_submit(e, &r, NULL, &err), KVIK_ERR_INVALID_ARG); /* max_tokens 0, no prompt_logprobs */
    r.prompt_logprobs = true;
    r.top_logprobs = -1;
    CHECK_EQ_INT(engine_submit(e, &r, NULL, &err), KVIK_ERR_INVALID_ARG); /* no top_logprobs */
    engine_free(e);
}
