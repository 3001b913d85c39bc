/*
 * test_engine_swa.c — the serving engine on Gemma 3 270M (five sliding
 * layers of window 512 to every global one), whose paged cache releases
 * the sliding layers' blocks before their window as a sequence grows:
 *   same outputs  a prompt of 1500 tokens, three times the window, then
 *                 greedy decoding give bit for bit the tokens and log
 *                 probabilities they give with every block kept
 *                 (kv_keep_all); so does the next turn of the
 *                 conversation, attached from the prefix cache through
 *                 the cached window, and the same run with speculative
 *                 decoding by a draft model (with a pool of its own);
 *                 sampled with prompt lookup, a 700-token prompt gives the
 *                 same tokens with a fixed seed (rejected drafts roll the
 *                 sequence back right after the window it keeps);
 *   bounded       the sliding runs use a pool smaller than what keeping
 *                 every block needs for that one sequence (the kept
 *                 configuration refuses the request in it), and leave it
 *                 consistent and empty.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine.h"
#include "kv/kv_paged.h"
#include "model/model.h"
#include "test.h"

enum { N_PROMPT = 1500, N_SHORT = 700, N_OUT = 24, N_MORE = 40, N_TOP = 5, MAX_SEQ = N_PROMPT + N_OUT + N_MORE + N_OUT };

struct swa_out {
    int32_t tok[N_OUT];
    float lp[N_OUT], top_lp[N_OUT][N_TOP];
    int32_t top_id[N_OUT][N_TOP];
    int n, n_cached;
    bool done, error;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static bool swa_on_event(void *user, const struct engine_event *ev) {
    struct swa_out *o = user;
    pthread_mutex_lock(&g_mu);
    if (ev->finish == ENGINE_FINISH_NONE) {
        if (o->n < N_OUT) {
            o->tok[o->n] = ev->token;
            o->lp[o->n] = ev->logprob;
            for (int i = 0; i < N_TOP; i++) {
                o->top_id[o->n][i] = i < ev->n_top ? ev->top_ids[i] : -1;
                o->top_lp[o->n][i] = i < ev->n_top ? ev->top_logprobs[i] : 0;
            }
        }
        o->n++;
    } else {
        if (ev->finish == ENGINE_FINISH_ERROR) {
            o->error = true;
            printf("    error: %s\n", ev->error ? ev->error : "?");
        }
        o->n_cached = ev->n_cached;
        o->done = true;
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    return true;
}

/* Runs one request to its end, greedy (temp 0) or sampled with a fixed
 * seed; false if it could not. */
static bool swa_run(struct engine *e, const int32_t *p, int np, float temp, struct swa_out *o) {
    memset(o, 0, sizeof *o);
    struct sampler_params sp = sampler_params_default();
    sp.temp = temp;
    sp.seed = 7;
    struct engine_request r = {.prompt = p, .n_prompt = np, .max_tokens = N_OUT, .n = 1, .sampling = sp,
                               .top_logprobs = N_TOP, .ignore_eos = true, .on_event = swa_on_event, .user = o};
    struct kvik_err err = {0};
    if (engine_submit(e, &r, NULL, &err)) {
        test_fail(__FILE__, __LINE__, "engine_submit: %s", err.msg);
        return false;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 900;
    pthread_mutex_lock(&g_mu);
    int rc = 0;
    while (!o->done && rc == 0) rc = pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    bool ok = o->done && !o->error && o->n == N_OUT;
    pthread_mutex_unlock(&g_mu);
    return ok;
}

static bool same_outputs(const struct swa_out *a, const struct swa_out *b) {
    bool same = a->n == b->n;
    for (int i = 0; same && i < N_OUT; i++) {
        same = a->tok[i] == b->tok[i] && a->lp[i] == b->lp[i];
        for (int j = 0; same && j < N_TOP; j++) same = a->top_id[i][j] == b->top_id[i][j] && a->top_lp[i][j] == b->top_lp[i][j];
    }
    return same;
}

static struct engine *swa_engine(const struct model *m, bool keep_all, int64_t mib, int spec_mode,
                                 const struct model *draft, struct kvik_err *err) {
    struct engine_config c = engine_config_default();
    c.n_threads = 2;
    c.max_seqs = 2;
    c.n_ctx = MAX_SEQ + 64;
    c.kv_mem_mib = mib;
    c.kv_keep_all = keep_all;
    c.prefix_cache = true;
    c.spec_mode = spec_mode;
    c.draft = draft;
    return engine_new(m, &c, err);
}

TEST(engine_sliding_window_kv_matches_keeping_everything) {
    char path[4096];
    if (!test_registry_model("gemma3-270m", path, sizeof path)) return;
    struct kvik_err err = {0};
    struct model *m = NULL;
    REQUIRE(model_load(path, &m, &err) == KVIK_OK);
    REQUIRE(m->hp.n_swa == 512 && m->hp.n_layer == 18);
    /* a prompt of a 60-token phrase repeated: the model continues it
     * (prompt lookup's drafts of it are accepted often, not always, when
     * sampling) */
    static int32_t prompt[MAX_SEQ], turn2[MAX_SEQ];
    uint64_t rng = 2026;
    for (int i = 0; i < 60; i++) prompt[i] = 1000 + (int32_t)(test_rand_u64(&rng) % 40000);
    for (int i = 60; i < N_PROMPT; i++) prompt[i] = prompt[i % 60];

    /* one sequence of 1500 + 24 positions in blocks of 16 is 96 block
     * positions of 18 layers (288 KiB each in F16) when all are kept: 27
     * MiB. With sliding layers the blocks are of 3 layers (48 KiB): 96 of
     * the global group, at most 65 of each of the 5 sliding groups (the
     * window and a batch of 512), 421 in all; 20 MiB hold 426 (and the
     * next turn, 1588 positions, needs 425) */
    const int64_t tight = 20;
    struct engine *full = swa_engine(m, true, tight, SPEC_NONE, NULL, &err);
    REQUIRE(full);
    struct swa_out ref, got, ref2, got2;
    struct sampler_params sp = sampler_params_default();
    struct engine_request r = {.prompt = prompt, .n_prompt = N_PROMPT, .max_tokens = N_OUT, .n = 1, .sampling = sp,
                               .on_event = swa_on_event, .user = &ref};
    CHECK_EQ_INT(engine_submit(full, &r, NULL, &err), KVIK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "needs 96 KV blocks; the pool has 71") != NULL, "%s", err.msg);
    engine_free(full);

    full = swa_engine(m, true, 64, SPEC_NONE, NULL, &err);
    REQUIRE(full);
    REQUIRE(swa_run(full, prompt, N_PROMPT, 0, &ref));
    /* turn 2: the prompt, the reply, 40 more tokens */
    int n2 = 0;
    memcpy(turn2, prompt, N_PROMPT * sizeof *prompt);
    n2 = N_PROMPT;
    for (int i = 0; i < N_OUT; i++) turn2[n2++] = ref.tok[i];
    for (int i = 0; i < N_MORE; i++) turn2[n2++] = 2000 + i * 37;
    REQUIRE(swa_run(full, turn2, n2, 0, &ref2));
    CHECK(ref2.n_cached >= N_PROMPT + N_OUT - 1);
    engine_free(full);

    struct engine *slide = swa_engine(m, false, tight, SPEC_NONE, NULL, &err);
    REQUIRE(slide);
    struct engine_stats st;
    engine_stats(slide, &st);
    CHECK_EQ_INT(st.kv_blocks_total, 426);
    REQUIRE(swa_run(slide, prompt, N_PROMPT, 0, &got));
    CHECK_MSG(same_outputs(&ref, &got), "sliding: other tokens or log probabilities than with every block kept");
    REQUIRE(swa_run(slide, turn2, n2, 0, &got2));
    CHECK_MSG(same_outputs(&ref2, &got2), "sliding, turn 2: other outputs than with every block kept");
    printf("    turn 2: %d of %d prompt tokens from the cache (every block kept: %d)\n", got2.n_cached, n2,
           ref2.n_cached);
    CHECK_EQ_INT(got2.n_cached, ref2.n_cached);
    CHECK(engine_kv_consistent(slide));
    engine_stats(slide, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    engine_free(slide);

    /* with a draft model (the same file): drafts rejected now and then roll
     * both pools back */
    struct model *dm = NULL;
    REQUIRE(model_load(path, &dm, &err) == KVIK_OK);
    setenv("KVIK_SPEC_DRAFT_COST", "0", 1); /* draft although the draft costs what the target does */
    slide = swa_engine(m, false, tight, SPEC_DRAFT, dm, &err);
    unsetenv("KVIK_SPEC_DRAFT_COST");
    REQUIRE(slide);
    REQUIRE(swa_run(slide, prompt, N_PROMPT, 0, &got));
    CHECK_MSG(same_outputs(&ref, &got), "sliding with a draft model: other outputs than with every block kept");
    CHECK(engine_kv_consistent(slide)); /* also: the statistics of the last step are published */
    engine_stats(slide, &st);
    printf("    draft model: %llu of %llu draft tokens accepted\n", (unsigned long long)st.spec_accepted,
           (unsigned long long)st.spec_draft_tokens);
    CHECK(st.spec_draft_tokens > 0);
    engine_free(slide);
    model_free(dm);

    /* prompt lookup, sampled (the same seed, so the same tokens where the
     * logits are the same): rejected drafts truncate the target's
     * sequence right after the window it keeps */
    full = swa_engine(m, true, 64, SPEC_NGRAM, NULL, &err);
    REQUIRE(full);
    REQUIRE(swa_run(full, prompt, N_SHORT, 1.0f, &ref));
    engine_free(full);
    slide = swa_engine(m, false, tight, SPEC_NGRAM, NULL, &err);
    REQUIRE(slide);
    REQUIRE(swa_run(slide, prompt, N_SHORT, 1.0f, &got));
    CHECK_MSG(same_outputs(&ref, &got), "sliding with prompt lookup: other outputs than with every block kept");
    CHECK(engine_kv_consistent(slide));
    engine_stats(slide, &st);
    printf("    prompt lookup: %llu of %llu draft tokens accepted\n", (unsigned long long)st.spec_accepted,
           (unsigned long long)st.spec_draft_tokens);
    CHECK(st.spec_draft_tokens > st.spec_accepted && st.spec_accepted > 0);
    engine_free(slide);
    model_free(m);
}

/* A pool given in positions is the memory of that many positions of every
 * layer: six blocks of 3 layers per block position for Gemma 3 270M. */
TEST(engine_kv_tokens_is_positions_of_every_layer) {
    char path[4096];
    if (!test_registry_model("gemma3-270m", path, sizeof path)) return;
    struct kvik_err err = {0};
    struct model *m = NULL;
    REQUIRE(model_load(path, &m, &err) == KVIK_OK);
    struct engine_config c = engine_config_default();
    c.n_threads = 1, c.max_seqs = 2, c.n_ctx = 4096, c.kv_tokens = 1600;
    struct engine *e = engine_new(m, &c, &err);
    REQUIRE(e);
    struct engine_stats st;
    engine_stats(e, &st);
    CHECK_EQ_INT(st.kv_blocks_total, 100 * 6);
    /* one sequence of 4096 positions needs 256 + 5 * 65 blocks: it fits */
    CHECK_EQ_INT(engine_max_seq_tokens(e), 4096);
    engine_free(e);
    c.kv_keep_all = true;
    REQUIRE((e = engine_new(m, &c, &err)));
    engine_stats(e, &st);
    CHECK_EQ_INT(st.kv_blocks_total, 100);
    CHECK_EQ_INT(engine_max_seq_tokens(e), 1600);
    engine_free(e);
    model_free(m);
}
