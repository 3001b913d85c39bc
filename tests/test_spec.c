/*
 * test_spec.c — speculative decoding (engine/spec.h):
 *   acceptance rule   on synthetic distributions, the emitted token follows
 *                     the target distribution p (chi-square), for a draft
 *                     distribution q and for a point-mass draft, over many
 *                     seeds of the uniforms;
 *   sampler_probs     a distribution, zero outside top-k, one-hot greedy,
 *                     and sampler_sample's frequencies follow it;
 *   prompt lookup     longest, latest match and its continuation;
 *   adaptive length   grows on full acceptance, shrinks, pauses on misses;
 *   engine            greedy outputs of several concurrent requests are the
 *                     same with prompt lookup and with the model as its own
 *                     draft as without speculation (the self-draft accepts
 *                     every token); sampled requests with penalties (many
 *                     rejections) leave a consistent pool with no block in
 *                     use; greedy n = 3 requests with prompts around
 *                     max_batch_tokens (one prompt token left for a later
 *                     step) give every choice the plain choice 0's tokens;
 *                     a draft model with another vocabulary is refused;
 *   kvik run          --spec ngram and --spec draft print the same greedy
 *                     ids as plain decoding; bad flags exit 2 and a draft
 *                     model with another vocabulary exits 1 naming it;
 *   kvik serve        --spec ngram answers a greedy completion with the
 *                     plain server's text and counts drafts in /metrics
 *                     (promtool-clean); bad --spec flags exit 2.
 */
#include <pthread.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/spec.h"
#include "model/synth.h"
#include "serve_harness.h"
#include "model_fixture.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* ---- the acceptance rule ---------------------------------------------------- */

/* Pearson's chi-square of counts[n] against probabilities p[n] (total
 * trials); cells with p == 0 must have no counts (else +inf). */
static double chi_square(const long *counts, const double *p, int n, long trials) {
    double x2 = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] == 0) {
            if (counts[i]) return INFINITY;
            continue;
        }
        double e = p[i] * (double)trials, d = (double)counts[i] - e;
        x2 += d * d / e;
    }
    return x2;
}

static double uniform01(uint64_t *st) { return (double)(test_rand_u64(st) >> 11) * 0x1.0p-53; }

enum { NV = 6 };

TEST(spec_accept_keeps_target_distribution) {
    /* p and q overlap partly; q puts mass where p has none (token 5) */
    const float p[NV] = {0.35f, 0.25f, 0.2f, 0.1f, 0.1f, 0.0f};
    const float q[NV] = {0.1f, 0.4f, 0.05f, 0.05f, 0.2f, 0.2f};
    double pd[NV];
    for (int i = 0; i < NV; i++) pd[i] = p[i];
    uint64_t rng = 12345;
    enum { TRIALS = 200000 };
    long counts[NV] = {0}, accepted = 0;
    for (int t = 0; t < TRIALS; t++) {
        int32_t x = spec_draw(q, NV, uniform01(&rng)), y;
        accepted += spec_accept(p, q, NV, x, uniform01(&rng), uniform01(&rng), &y);
        counts[y]++;
    }
    /* 5 degrees of freedom (token 5 must never appear): P(chi2 > 20.5) = 0.001 */
    double x2 = chi_square(counts, pd, NV, TRIALS);
    CHECK_MSG(x2 < 20.5, "chi-square %.2f with q: counts %ld %ld %ld %ld %ld %ld", x2, counts[0], counts[1], counts[2],
              counts[3], counts[4], counts[5]);
    /* acceptance rate is sum(min(p, q)) = 0.1+0.25+0.05+0.05+0.1 = 0.55 */
    double rate = (double)accepted / TRIALS;
    CHECK_MSG(fabs(rate - 0.55) < 0.01, "acceptance %.4f, want 0.55", rate);

    /* point-mass drafts (prompt lookup): whatever token is proposed */
    for (int32_t x = 0; x < NV; x++) {
        long c2[NV] = {0}, acc2 = 0;
        for (int t = 0; t < TRIALS / 4; t++) {
            int32_t y;
            acc2 += spec_accept(p, NULL, NV, x, uniform01(&rng), uniform01(&rng), &y);
            c2[y]++;
        }
        x2 = chi_square(c2, pd, NV, TRIALS / 4);
        CHECK_MSG(x2 < 20.5, "chi-square %.2f with a point mass at %d", x2, x);
        CHECK_MSG(fabs((double)acc2 / (TRIALS / 4) - p[x]) < 0.01, "point mass at %d accepted %ld", x, acc2);
    }
}

TEST(spec_accept_greedy_and_edges) {
    /* one-hot p and q decide without randomness */
    const float p[NV] = {0, 0, 1, 0, 0, 0}, q_same[NV] = {0, 0, 1, 0, 0, 0}, q_other[NV] = {0, 1, 0, 0, 0, 0};
    int32_t y = -1;
    CHECK(spec_accept(p, q_same, NV, 2, 0, 0, &y) && y == 2);
    CHECK(!spec_accept(p, q_other, NV, 1, 0, 0, &y) && y == 2);
    CHECK(!spec_accept(p, NULL, NV, 4, 0.999, 0.999, &y) && y == 2);
    /* p == q: the residual is empty, a rejection (only u = 1 - tiny) falls back to p */
    const float u[NV] = {0.5f, 0.5f, 0, 0, 0, 0};
    CHECK(spec_accept(u, u, NV, 0, 0.999, 0.3, &y) && y == 0);
    CHECK_EQ_INT(spec_draw(u, NV, 0.7), 1);
    CHECK_EQ_INT(spec_draw(u, NV, 0.9999999999), 1);
}

/* ---- sampler_probs ------------------------------------------------------------ */

TEST(spec_sampler_probs_match_sampling) {
    enum { V = 8, TRIALS = 100000 };
    float logits[V] = {1.0f, 2.5f, 0.3f, -1.0f, 2.0f, 0.0f, 1.7f, -3.0f};
    struct sampler_params sp = sampler_params_default();
    sp.temp = 0.9f, sp.top_k = 5, sp.top_p = 1.0f, sp.min_p = 0.0f, sp.seed = 7;
    struct sampler *s = sampler_new(&sp, V, NULL);
    REQUIRE(s);
    float p[V];
    sampler_probs(s, logits, p);
    double sum = 0, pd[V];
    int nonzero = 0;
    for (int i = 0; i < V; i++) sum += pd[i] = p[i], nonzero += p[i] > 0;
    CHECK(fabs(sum - 1) < 1e-5);
    CHECK_EQ_INT(nonzero, 5);
    CHECK(p[3] == 0 && p[7] == 0 && p[5] == 0);
    long counts[V] = {0};
    for (int t = 0; t < TRIALS; t++) counts[sampler_sample(s, logits)]++;
    double x2 = chi_square(counts, pd, V, TRIALS);
    CHECK_MSG(x2 < 18.5, "chi-square %.2f (4 dof)", x2); /* P = 0.001 */
    sampler_free(s);

    sp.temp = 0;
    s = sampler_new(&sp, V, NULL);
    REQUIRE(s);
    sampler_probs(s, logits, p);
    CHECK(p[1] == 1.0f && p[0] == 0 && p[4] == 0);
    CHECK(sampler_is_greedy(s));
    sampler_free(s);
}

/* ---- prompt lookup and the adaptive length ------------------------------------- */

TEST(spec_ngram_propose_longest_latest_match) {
    /* ... 1 2 3 9 9 ... 1 2 3 7 8 ... 2 3  -> "2 3" matched latest: 7 8 */
    const int32_t t[] = {1, 2, 3, 9, 9, 5, 1, 2, 3, 7, 8, 4, 2, 3};
    int32_t out[8];
    int n = spec_ngram_propose(t, 14, 3, 1, 4, out);
    CHECK_EQ_INT(n, 4);
    CHECK(out[0] == 7 && out[1] == 8 && out[2] == 4 && out[3] == 2);
    /* a longer match wins over a later shorter one: "1 2 3" -> 7 8 (latest of the two) */
    const int32_t u[] = {1, 2, 3, 7, 8, 5, 3, 6, 1, 2, 3};
    n = spec_ngram_propose(u, 11, 3, 1, 2, out);
    CHECK_EQ_INT(n, 2);
    CHECK(out[0] == 7 && out[1] == 8);
    /* the continuation stops at the end of the tokens */
    const int32_t v[] = {4, 5, 6, 4};
    n = spec_ngram_propose(v, 4, 3, 1, 8, out);
    CHECK_EQ_INT(n, 3);
    CHECK(out[0] == 5 && out[1] == 6 && out[2] == 4);
    /* nothing to match */
    const int32_t w[] = {1, 2, 3, 4};
    CHECK_EQ_INT(spec_ngram_propose(w, 4, 3, 1, 8, out), 0);
    CHECK_EQ_INT(spec_ngram_propose(w, 1, 3, 1, 8, out), 0);
    /* a shortest match of 3: "2 3" at the end of t matches, but no 3-gram does */
    CHECK_EQ_INT(spec_ngram_propose(t, 14, 3, 3, 4, out), 0);
    /* u ends in "1 2 3", which occurs earlier as a whole */
    CHECK_EQ_INT(spec_ngram_propose(u, 11, 3, 3, 2, out), 2);
    CHECK(out[0] == 7 && out[1] == 8);
}

/* The cost model: expected tokens over cost, and the controller pausing a
 * draft model as costly as the target even when it is always right. */
TEST(spec_ctl_cost_model) {
    /* a = 0.5, k = 2: (1 + 0.5 + 0.25) / (1 + 2 SPEC_VERIFY_COST) */
    CHECK(fabs(spec_gain(0.5, 2, 0.0) - 1.75 / (1 + 2 * SPEC_VERIFY_COST)) < 1e-12);
    CHECK(fabs(spec_gain(1.0, 3, 0.5) - 4.0 / (1 + 3 * SPEC_VERIFY_COST + 1.5)) < 1e-12);
    for (int k = 1; k <= 16; k++) CHECK(spec_gain(1.0, k, 1.0) < 1.0); /* self-draft never pays */
    struct spec_ctl c;
    spec_ctl_init(&c, 8, 1.0);
    int paused = 0;
    while (spec_ctl_want(&c) == 0 && paused < 1000) paused++;
    CHECK_EQ_INT(paused, 1000); /* never drafts, never probes */
    /* a draft at 0.5 of the target's cost pays only while nearly always right */
    spec_ctl_init(&c, 8, 0.5);
    CHECK(spec_ctl_want(&c) > 0);
    spec_ctl_update(&c, 4, 1);
    CHECK_EQ_INT(spec_ctl_want(&c), 0);
    /* a cheap draft at high acceptance speculates, at the length the model prefers */
    spec_ctl_init(&c, 8, 0.1);
    CHECK_EQ_INT(spec_ctl_want(&c), 4);
    for (int i = 0; i < 6; i++) spec_ctl_update(&c, 8, 8);
    CHECK_EQ_INT(spec_ctl_want(&c), 8);
    /* acceptance falling to ~0.49 (above the rate floor): prompt lookup
     * still pays, a draft at 0.3 of the target's cost no longer does */
    for (int r = 0; r < 2; r++) {
        spec_ctl_init(&c, 8, r ? 0.3 : 0.0);
        spec_ctl_update(&c, 5, 1);
        spec_ctl_update(&c, 5, 1);
        CHECK_MSG((spec_ctl_want(&c) == 0) == (r == 1), "draft cost %g: want %d", r ? 0.3 : 0.0,
                  spec_ctl_want(&c));
    }
}

TEST(spec_ctl_adapts_and_pauses) {
    struct spec_ctl c;
    spec_ctl_init(&c, 8, 0);
    CHECK_EQ_INT(spec_ctl_want(&c), 4);
    spec_ctl_update(&c, 4, 4);
    CHECK_EQ_INT(spec_ctl_want(&c), 6);
    spec_ctl_update(&c, 6, 6);
    spec_ctl_update(&c, 8, 8);
    CHECK_EQ_INT(spec_ctl_want(&c), 8); /* capped at max */
    spec_ctl_update(&c, 8, 2);
    CHECK_EQ_INT(spec_ctl_want(&c), 3); /* just past the rejection */
    /* rate 1 -> 0.7 (2 of 8) -> 0.42 -> 0.25: paused after the third */
    spec_ctl_update(&c, 3, 0);
    CHECK_EQ_INT(spec_ctl_want(&c), 1);
    spec_ctl_update(&c, 1, 0);
    CHECK_EQ_INT(spec_ctl_want(&c), 0);
    int paused = 1;
    while (spec_ctl_want(&c) == 0) paused++;
    CHECK_EQ_INT(paused, 8); /* eight steps without a draft */
    spec_ctl_update(&c, 1, 0); /* 0.5 after the pause -> 0.3: paused again at once, twice as long */
    paused = 0;
    while (spec_ctl_want(&c) == 0) paused++;
    CHECK_EQ_INT(paused, 16);
    spec_ctl_update(&c, 4, 4); /* 0.5 -> 0.7: drafting on */
    CHECK(spec_ctl_want(&c) > 0);
}

/* ---- the engine on the real model ---------------------------------------------- */

enum { N_REQ = 6, MAX_TOK = 40, MAX_P = 96, MAX_EOG = 16 };

struct sfix {
    bool tried, ok;
    struct model *m;
    struct tokenizer *tok;
    int32_t eog[MAX_EOG];
    int n_eog;
    int32_t prompt[N_REQ][MAX_P];
    int np[N_REQ];
};
static struct sfix g_sf;

static const char *const k_prompts[N_REQ] = {
    ("Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. "
     "The quick brown"),
    "int add(int a, int b) { return a + b; }\nint sub(int a, int b) { return a - b; }\nint mul(int a, int b) {",
    "Tell me about the moon.",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
    "Alice: hello Bob.\nBob: hello Alice.\nAlice: how are you Bob?\nBob:",
    "Here is a short poem about the sea:\n",
};

static struct sfix *sfix(void) {
    struct sfix *f = &g_sf;
    if (f->tried) {
        if (!f->ok) test_skip("default model not available");
        return f->ok ? f : NULL;
    }
    f->tried = true;
    if (!test_model_get(&f->m, &f->tok, f->eog, MAX_EOG, &f->n_eog)) return NULL;
    for (int i = 0; i < N_REQ; i++) {
        int64_t n = tokenizer_encode(f->tok, k_prompts[i], strlen(k_prompts[i]), false, false, f->prompt[i], MAX_P);
        if (n < 1 || n > MAX_P) {
            test_fail(__FILE__, __LINE__, "prompt %d encodes to %lld tokens", i, (long long)n);
            return NULL;
        }
        f->np[i] = (int)n;
    }
    f->ok = true;
    return f;
}

struct out {
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *left;
    int32_t tok[MAX_TOK];
    int n, finals, finish;
};

static bool on_ev(void *user, const struct engine_event *ev) {
    struct out *o = user;
    pthread_mutex_lock(o->mu);
    if (ev->finish != ENGINE_FINISH_NONE) {
        o->finals++;
        o->finish = ev->finish;
        (*o->left)--;
        pthread_cond_broadcast(o->cv);
    } else if (o->n < MAX_TOK) {
        o->tok[o->n++] = ev->token;
    }
    pthread_mutex_unlock(o->mu);
    return true;
}

/* Runs every prompt at once (sampling sp, seed + i) on an engine with
 * speculation mode (draft: the model itself); outputs in out[N_REQ], the
 * final statistics in st. */
/* Runs with the prefix cache on too (registration of blocks holding draft
 * tokens, then rollback, must not change any output). */
static bool g_prefix_cache;

static bool run_engine(struct sfix *f, int mode, const struct model *draft, const struct sampler_params *sp,
                       struct out *out, struct engine_stats *st) {
    struct engine_config c = engine_config_default();
    c.n_threads = 1;
    c.max_seqs = 8;
    c.max_batch_tokens = 128;
    c.n_ctx = 160;
    c.kv_blocks = 80;
    c.eog = f->eog;
    c.n_eog = f->n_eog;
    c.spec_mode = mode;
    c.draft = draft;
    c.prefix_cache = g_prefix_cache;
    struct kvik_err err = {0};
    struct engine *e = engine_new(f->m, &c, &err);
    if (!e) {
        test_fail(__FILE__, __LINE__, "engine_new: %s", err.msg);
        return false;
    }
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int left = N_REQ;
    bool ok = true;
    for (int i = 0; i < N_REQ; i++) {
        out[i] = (struct out){.mu = &mu, .cv = &cv, .left = &left};
        struct sampler_params p = *sp;
        p.seed = sp->seed + (uint64_t)i;
        struct engine_request r = {.prompt = f->prompt[i], .n_prompt = f->np[i], .max_tokens = MAX_TOK, .n = 1,
                                   .sampling = p, .top_logprobs = 2, .on_event = on_ev, .user = &out[i]};
        uint64_t id;
        if (engine_submit(e, &r, &id, &err)) {
            test_fail(__FILE__, __LINE__, "submit: %s", err.msg);
            ok = false;
            pthread_mutex_lock(&mu);
            left--;
            pthread_mutex_unlock(&mu);
        }
    }
    pthread_mutex_lock(&mu);
    while (left > 0) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    engine_drain(e, clock_ns() + (int64_t)60e9);
    CHECK(engine_kv_consistent(e));
    engine_stats(e, st);
    engine_free(e);
    return ok;
}

static struct sampler_params greedy(void) {
    struct sampler_params p = sampler_params_default();
    p.temp = 0;
    p.seed = 1;
    return p;
}

static void check_same(const struct out *a, const struct out *b, const char *what) {
    for (int i = 0; i < N_REQ; i++) {
        bool same = a[i].n == b[i].n && a[i].finish == b[i].finish && a[i].finals == 1 && b[i].finals == 1;
        for (int j = 0; same && j < a[i].n; j++) same = a[i].tok[j] == b[i].tok[j];
        CHECK_MSG(same, "%s: request %d: %d tokens (finish %d) vs %d plain (finish %d)", what, i, b[i].n,
                  b[i].finish, a[i].n, a[i].finish);
    }
}

TEST(spec_engine_greedy_same_as_plain) {
    /* the model drafting for itself never pays (spec_ctl): tell the cost
     * model drafts are free, so the self-draft path is exercised */
    setenv("KVIK_SPEC_DRAFT_COST", "0", 1);
    struct sfix *f = sfix();
    if (!f) return;
    struct sampler_params g = greedy();
    static struct out plain[N_REQ], ngram[N_REQ], draft[N_REQ];
    struct engine_stats s0, s1, s2;
    REQUIRE(run_engine(f, SPEC_NONE, NULL, &g, plain, &s0));
    REQUIRE(run_engine(f, SPEC_NGRAM, NULL, &g, ngram, &s1));
    check_same(plain, ngram, "ngram");
    CHECK_MSG(s1.spec_drafts > 0 && s1.spec_accepted > 0, "ngram: %llu drafts, %llu accepted",
              (unsigned long long)s1.spec_drafts, (unsigned long long)s1.spec_accepted);
    CHECK(s1.steps < s0.steps); /* copying prompts take fewer steps */
    CHECK(s1.spec_accepted_by_pos[0] >= s1.spec_accepted_by_pos[1]);
    CHECK_EQ_INT(s1.kv_blocks_used, 0);
    REQUIRE(run_engine(f, SPEC_DRAFT, f->m, &g, draft, &s2));
    check_same(plain, draft, "self-draft");
    /* the model's own drafts are all accepted; the prompt lookup in front
     * of it drafts the copying prompts' repeats */
    CHECK(s2.spec_draft_tokens > s2.spec_lookup_tokens && s2.spec_lookup_drafts > 0);
    CHECK_MSG(s2.spec_accepted - s2.spec_lookup_accepted == s2.spec_draft_tokens - s2.spec_lookup_tokens,
              "self-draft accepted %llu of %llu (lookup %llu of %llu)", (unsigned long long)s2.spec_accepted,
              (unsigned long long)s2.spec_draft_tokens, (unsigned long long)s2.spec_lookup_accepted,
              (unsigned long long)s2.spec_lookup_tokens);
    CHECK_EQ_INT(s2.kv_blocks_used, 0);
    CHECK_EQ_INT(s0.generation_tokens, s2.generation_tokens);
    static struct out cached[N_REQ];
    struct engine_stats s3;
    g_prefix_cache = true;
    bool ran = run_engine(f, SPEC_NGRAM, NULL, &g, cached, &s3);
    g_prefix_cache = false;
    REQUIRE(ran);
    check_same(plain, cached, "ngram with the prefix cache");
    CHECK_EQ_INT(s3.kv_blocks_used, 0);
    unsetenv("KVIK_SPEC_DRAFT_COST");
}

TEST(spec_engine_sampled_rejections_keep_pool_consistent) {
    /* the model drafting for itself never pays (spec_ctl): tell the cost
     * model drafts are free, so the self-draft path is exercised */
    setenv("KVIK_SPEC_DRAFT_COST", "0", 1);
    struct sfix *f = sfix();
    if (!f) return;
    struct sampler_params p = sampler_params_default();
    p.temp = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0, p.repeat_penalty = 1.3f, p.seed = 99;
    static struct out a[N_REQ], b[N_REQ];
    struct engine_stats s1, s2;
    g_prefix_cache = true; /* rejected drafts' blocks get registered, then rolled back */
    bool ran = run_engine(f, SPEC_NGRAM, NULL, &p, a, &s1);
    g_prefix_cache = false;
    REQUIRE(ran);
    REQUIRE(run_engine(f, SPEC_DRAFT, f->m, &p, b, &s2));
    for (int i = 0; i < N_REQ; i++) {
        CHECK(a[i].finals == 1 && a[i].n <= MAX_TOK);
        CHECK(b[i].finals == 1 && b[i].n <= MAX_TOK);
    }
    CHECK_MSG(s1.spec_draft_tokens > s1.spec_accepted, "ngram: %llu of %llu accepted: no rejection",
              (unsigned long long)s1.spec_accepted, (unsigned long long)s1.spec_draft_tokens);
    /* the draft has no penalties, the target does: some rejections, many acceptances */
    CHECK(s2.spec_accepted > 0 && s2.spec_draft_tokens > s2.spec_accepted);
    CHECK_EQ_INT(s1.kv_blocks_used, 0);
    CHECK_EQ_INT(s2.kv_blocks_used, 0);
    /* sampled without penalties the copying prompts repeat, so the prompt
     * lookup in front of the draft model drafts too (q a point mass) */
    static struct out c[N_REQ];
    struct engine_stats s3;
    p.temp = 0.7f, p.repeat_penalty = 1.0f, p.seed = 7;
    REQUIRE(run_engine(f, SPEC_DRAFT, f->m, &p, c, &s3));
    for (int i = 0; i < N_REQ; i++) CHECK(c[i].finals == 1 && c[i].n <= MAX_TOK);
    CHECK_MSG(s3.spec_lookup_drafts > 0, "lookup: %llu drafts, %llu of %llu tokens accepted",
              (unsigned long long)s3.spec_lookup_drafts, (unsigned long long)s3.spec_lookup_accepted,
              (unsigned long long)s3.spec_lookup_tokens);
    CHECK_EQ_INT(s3.kv_blocks_used, 0);
    unsetenv("KVIK_SPEC_DRAFT_COST");
}

/* ---- n > 1 choices with speculation ------------------------------------------ */

enum { N_CH = 3, CH_TOK = 6, CH_BATCH = 8, N_LEN = 7 };

/* Prompt lengths around max_batch_tokens (CH_BATCH): 9 and 17 leave one
 * prompt token after full chunks, fed in a later step as a decode. */
static const int k_ch_len[N_LEN] = {2, 7, 8, 9, 10, 16, 17};

/* Events of an n-choice request: choice c goes to out[c]. */
static bool on_choice_ev(void *user, const struct engine_event *ev) {
    struct out *o = user;
    return ev->choice >= 0 && ev->choice < N_CH ? on_ev(&o[ev->choice], ev) : true;
}

/* Runs greedy requests of n (1..N_CH) choices on prefixes of prompt 0
 * (lengths k_ch_len), one at a time, on an engine with max_batch_tokens
 * CH_BATCH and speculation mode (draft: the model itself);
 * out[len][choice]. Checks the pool is empty and every prompt was
 * counted once in stats.prompt_tokens. */
static bool run_choices(struct sfix *f, int mode, const struct model *draft, int n,
                        struct out out[N_LEN][N_CH]) {
    struct engine_config c = engine_config_default();
    c.n_threads = 1;
    c.max_seqs = 8;
    c.max_batch_tokens = CH_BATCH;
    c.n_ctx = 64;
    c.kv_blocks = 32;
    c.eog = f->eog;
    c.n_eog = f->n_eog;
    c.spec_mode = mode;
    c.draft = draft;
    struct kvik_err err = {0};
    struct engine *e = engine_new(f->m, &c, &err);
    if (!e) {
        test_fail(__FILE__, __LINE__, "engine_new: %s", err.msg);
        return false;
    }
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    bool ok = true;
    for (int l = 0; l < N_LEN && ok; l++) {
        int left = n;
        for (int ch = 0; ch < N_CH; ch++) out[l][ch] = (struct out){.mu = &mu, .cv = &cv, .left = &left};
        struct engine_request r = {.prompt = f->prompt[0], .n_prompt = k_ch_len[l], .max_tokens = CH_TOK,
                                   .n = n, .sampling = greedy(), .top_logprobs = -1, .ignore_eos = true,
                                   .on_event = on_choice_ev, .user = out[l]};
        uint64_t id;
        if (engine_submit(e, &r, &id, &err)) {
            test_fail(__FILE__, __LINE__, "submit: %s", err.msg);
            ok = false;
            break;
        }
        pthread_mutex_lock(&mu);
        while (left > 0) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
    engine_drain(e, clock_ns() + (int64_t)60e9);
    CHECK(engine_kv_consistent(e));
    struct engine_stats st;
    engine_stats(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    uint64_t prompt = 0; /* each prompt counted once, however its last token was fed */
    for (int l = 0; l < N_LEN; l++) prompt += (uint64_t)k_ch_len[l];
    CHECK_MSG(st.prompt_tokens == prompt, "mode %d: prompt_tokens %llu, want %llu", mode,
              (unsigned long long)st.prompt_tokens, (unsigned long long)prompt);
    engine_free(e);
    return ok;
}

/* Every choice of got has CH_TOK tokens, the tokens of choice 0 of ref. */
static void check_choices(struct out ref[N_LEN][N_CH], struct out got[N_LEN][N_CH], const char *what) {
    for (int l = 0; l < N_LEN; l++)
        for (int ch = 0; ch < N_CH; ch++) {
            const struct out *a = &ref[l][0], *b = &got[l][ch];
            bool same = b->n == CH_TOK && b->finals == 1 && b->finish == ENGINE_FINISH_LENGTH && a->n == b->n;
            for (int j = 0; same && j < b->n; j++) same = a->tok[j] == b->tok[j];
            CHECK_MSG(same, "%s: prompt of %d tokens, choice %d: %d tokens (finish %d), plain choice 0 %d",
                      what, k_ch_len[l], ch, b->n, b->finish, a->n);
        }
}

TEST(spec_engine_n_choices_same_as_plain) {
    setenv("KVIK_SPEC_DRAFT_COST", "0", 1); /* the self-draft drafts (see above) */
    struct sfix *f = sfix();
    if (!f) return;
    REQUIRE(f->np[0] >= k_ch_len[N_LEN - 1]);
    static struct out plain[N_LEN][N_CH], ngram[N_LEN][N_CH], draft[N_LEN][N_CH];
    REQUIRE(run_choices(f, SPEC_NONE, NULL, N_CH, plain));
    check_choices(plain, plain, "plain"); /* greedy choices are choice 0's tokens */
    REQUIRE(run_choices(f, SPEC_NGRAM, NULL, N_CH, ngram));
    check_choices(plain, ngram, "ngram");
    REQUIRE(run_choices(f, SPEC_DRAFT, f->m, N_CH, draft));
    check_choices(plain, draft, "self-draft");
    /* one choice: the last prompt token of 9 and 17 goes through the draft path */
    REQUIRE(run_choices(f, SPEC_NGRAM, NULL, 1, ngram));
    for (int l = 0; l < N_LEN; l++)
        CHECK_MSG(ngram[l][0].n == CH_TOK && memcmp(ngram[l][0].tok, plain[l][0].tok, CH_TOK * sizeof(int32_t)) == 0,
                  "n = 1, prompt %d: other tokens than plain", k_ch_len[l]);
    unsetenv("KVIK_SPEC_DRAFT_COST");
}

/* A 2-layer random model with the default model's vocabulary cut to 512
 * tokens, written to a file (path in buf); NULL on failure. */
static const char *tiny_model_file(char *buf, size_t len) {
    char path[4096], dir[64] = "/tmp/kvik-spec-test-XXXXXX";
    if (!test_default_model(path, sizeof path) || !mkdtemp(dir)) return NULL;
    snprintf(buf, len, "%s/tiny.gguf", dir);
    struct synth_shape shape = {.name = "tiny", .model = "test", .n_layer = 2, .n_embd = 64, .n_ff = 128,
                                .n_head = 4, .n_head_kv = 2, .n_vocab = 512, .n_ctx = 256,
                                .rope_base = 10000.0f, .rms_eps = 1e-5f};
    struct synth_params sp = {.shape = &shape, .type = TENSOR_TYPE_Q8_0, .seed = 3, .vocab_path = path,
                              .n_threads = 1};
    struct kvik_err err = {0};
    if (synth_write(buf, &sp, NULL, &err)) {
        test_fail(__FILE__, __LINE__, "tiny model: %s", err.msg);
        return NULL;
    }
    return buf;
}

static void remove_tiny(const char *file) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    remove(file);
    if (slash) *slash = 0, rmdir(dir);
}

TEST(spec_engine_refuses_other_vocabulary) {
    struct sfix *f = sfix();
    if (!f) return;
    char file[4200];
    if (!tiny_model_file(file, sizeof file)) return;
    struct model *tiny = NULL;
    struct kvik_err err = {0};
    if (model_load(file, &tiny, &err)) test_fail(__FILE__, __LINE__, "tiny: %s", err.msg);
    remove_tiny(file);
    REQUIRE(tiny);
    struct engine_config c = engine_config_default();
    c.n_threads = 1, c.max_seqs = 2, c.n_ctx = 64, c.kv_blocks = 8;
    c.spec_mode = SPEC_DRAFT;
    c.draft = tiny;
    struct engine *e = engine_new(f->m, &c, &err);
    CHECK(e == NULL);
    CHECK_EQ_INT(err.code, KVIK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "vocabulary") != NULL, "message: %s", err.msg);
    engine_free(e);
    CHECK(spec_check_vocab(f->m, f->m, &err) == KVIK_OK);
    c.draft = NULL; /* draft mode without a draft model */
    CHECK((e = engine_new(f->m, &c, &err)) == NULL);
    engine_free(e);
    model_free(tiny);
}

/* ---- kvik run ------------------------------------------------------------------- */

/* The "generated_ids" array of kvik run --json's output (a pointer into out). */
static const char *generated_ids(const char *out) {
    const char *p = strstr(out, "\"generated_ids\":");
    return p ? p + 16 : "";
}

TEST(spec_run_greedy_same_ids) {
    /* the model drafting for itself never pays (spec_ctl): tell the cost
     * model drafts are free, so the self-draft path is exercised */
    setenv("KVIK_SPEC_DRAFT_COST", "0", 1);
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    static char plain[65536], spec[65536], err[8192];
    const char *prompt = "'Repeat this list: red, green, blue, yellow, red, green, blue, yellow, red, green,'";
    char cmd[12288];
    snprintf(cmd, sizeof cmd, "run -m %s -p %s --temp 0 -n 48 -t 1 --json", path, prompt);
    REQUIRE(test_run_kvik(cmd, plain, sizeof plain, err, sizeof err) == 0);
    snprintf(cmd, sizeof cmd, "run -m %s -p %s --temp 0 -n 48 -t 1 --json --spec ngram --spec-max 6", path, prompt);
    CHECK_EQ_INT(test_run_kvik(cmd, spec, sizeof spec, err, sizeof err), 0);
    const char *a = generated_ids(plain), *b = generated_ids(spec);
    CHECK_MSG(strncmp(a, b, strcspn(a, "]") + 1) == 0, "ngram: %.200s vs plain %.200s", b, a);
    CHECK(strstr(spec, "\"spec_accepted_tokens\":0,") == NULL); /* the list copies */
    snprintf(cmd, sizeof cmd, "run -m %s -p %s --temp 0 -n 48 -t 1 --json --model-draft %s", path, prompt, path);
    CHECK_EQ_INT(test_run_kvik(cmd, spec, sizeof spec, err, sizeof err), 0);
    b = generated_ids(spec);
    CHECK_MSG(strncmp(a, b, strcspn(a, "]") + 1) == 0, "draft: %.200s vs plain %.200s", b, a);
    /* A prompt the reply does not repeat, so the model drafts (prompt
     * lookup, tried first, proposes nothing): drafting for itself, it has
     * every draft accepted. (The list above drafts by lookup, whose
     * proposals the model may turn down.) */
    const char *prompt2 = "'Explain in two sentences why the sky is blue.'";
    snprintf(cmd, sizeof cmd, "run -m %s -p %s --temp 0 -n 48 -t 1 --json", path, prompt2);
    REQUIRE(test_run_kvik(cmd, plain, sizeof plain, err, sizeof err) == 0);
    snprintf(cmd, sizeof cmd, "run -m %s -p %s --temp 0 -n 48 -t 1 --json --model-draft %s", path, prompt2, path);
    CHECK_EQ_INT(test_run_kvik(cmd, spec, sizeof spec, err, sizeof err), 0);
    a = generated_ids(plain), b = generated_ids(spec);
    CHECK_MSG(strncmp(a, b, strcspn(a, "]") + 1) == 0, "draft: %.200s vs plain %.200s", b, a);
    const char *d = strstr(spec, "\"spec_drafts\":"), *ld = strstr(spec, "\"spec_lookup_drafts\":");
    long drafts = d ? strtol(d + 14, NULL, 10) : 0, lookups = ld ? strtol(ld + 21, NULL, 10) : -1;
    CHECK_MSG(drafts > lookups, "%ld drafts, %ld by lookup: %.300s", drafts, lookups, spec);
    if (lookups == 0) CHECK_MSG(strstr(spec, "\"spec_acceptance\":1.0000") != NULL, "%.400s", spec);
    unsetenv("KVIK_SPEC_DRAFT_COST");
}

TEST(spec_run_bad_flags_and_vocabulary) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    static char out[8192], err[8192];
    const char *bad[] = {"run -p hi --spec fast", "run -p hi --spec draft", "run -p hi --spec-max 0",
                         "run -p hi --spec-max 17", "run -p hi --spec-ngram x", "run -p hi --spec ngram --model-draft x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(test_run_kvik(bad[i], out, sizeof out, err, sizeof err) == 2, "%s: exit not 2", bad[i]);
        CHECK_MSG(strstr(err, "kvik ") == err && strchr(err, '\n') == err + strlen(err) - 1, "%s: stderr '%s'", bad[i],
                  err);
    }
    char file[4200], cmd[12000];
    if (!tiny_model_file(file, sizeof file)) return;
    snprintf(cmd, sizeof cmd, "run -m %s -p hi -n 4 -t 1 --model-draft %s", path, file);
    int rc = test_run_kvik(cmd, out, sizeof out, err, sizeof err);
    remove_tiny(file);
    CHECK_EQ_INT(rc, 1);
    CHECK_MSG(strstr(err, "vocabulary") != NULL, "stderr: %s", err);
    snprintf(cmd, sizeof cmd, "run -m %s -p hi -n 4 -t 1 --model-draft /nonexistent.gguf", path);
    CHECK_EQ_INT(test_run_kvik(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_MSG(strstr(err, "draft model") != NULL, "stderr: %s", err);
}

/* ---- kvik serve ---------------------------------------------------------------- */

/* The text of a greedy completion from a server started with args; NULL
 * (test failed or skipped) if it does not answer. *metrics gets /metrics. */
static char *serve_completion(const char *args, char **metrics) {
    struct serve_proc s;
    if (!serve_start(&s, args, 120)) return NULL;
    struct http_reply r;
    const char *body = "{\"prompt\":\"Repeat after me: one two three four five six, one two three four five six, "
                       "one two\",\"max_tokens\":32,\"temperature\":0}";
    long st = http_post(&s, "/v1/completions", body, &r);
    CHECK_EQ_INT(st, 200);
    char *text = r.body;
    r.body = NULL;
    http_reply_free(&r);
    http_call(&s, "GET", "/metrics", NULL, NULL, false, 10, &r);
    *metrics = r.body;
    r.body = NULL;
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    return text;
}

static const char *completion_text(const char *json) {
    const char *p = json ? strstr(json, "\"text\":") : NULL;
    return p ? p : "";
}

TEST(spec_serve_ngram_same_text_and_metrics) {
    char *m0 = NULL, *m1 = NULL;
    char *plain = serve_completion("-t 1 -c 512 --max-seqs 4", &m0);
    if (!plain) return;
    char *spec = serve_completion("-t 1 -c 512 --max-seqs 4 --spec ngram --spec-max 6", &m1);
    REQUIRE(spec && m1);
    const char *a = completion_text(plain), *b = completion_text(spec);
    size_t n = strcspn(a, "}");
    CHECK_MSG(strncmp(a, b, n) == 0, "spec %.200s vs plain %.200s", b, a);
    double drafts = 0, acc = 0, pos1 = 0;
    CHECK(metrics_value(m1, "kvik_spec_drafts_total", &drafts) && drafts > 0);
    CHECK(metrics_value(m1, "kvik_spec_accepted_tokens_total", &acc) && acc > 0);
    CHECK(metrics_value(m1, "kvik_spec_accepted_by_position_total{position=\"1\"}", &pos1) && pos1 > 0);
    CHECK(metrics_value(m0, "kvik_spec_drafts_total", &drafts) && drafts == 0);
    char out[4096];
    int rc = test_promtool_check(m1, out, sizeof out);
    CHECK_MSG(rc == 0 || rc == -1, "promtool check metrics: %d: %s", rc, out);
    free(plain), free(spec), free(m0), free(m1);

    static char o[4096], e[4096];
    CHECK_EQ_INT(test_run_kvik("serve --spec draft", o, sizeof o, e, sizeof e), 2);
    CHECK_EQ_INT(test_run_kvik("serve --spec sometimes", o, sizeof o, e, sizeof e), 2);
    CHECK_EQ_INT(test_run_kvik("serve --spec ngram --model-draft x.gguf", o, sizeof o, e, sizeof e), 2);
    CHECK_EQ_INT(test_run_kvik("serve --spec-max 99", o, sizeof o, e, sizeof e), 2);
}
