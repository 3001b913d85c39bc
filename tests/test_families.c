/*
 * test_families.c — the serving engine on the real models of each family
 * beside llama (qwen2: Qwen2.5-Coder 0.5B; gemma3: Gemma 3 270M, whose
 * sliding layers see 512 positions).
 *
 * Prompts of a few to ~700 tokens (past Gemma's window) are decoded
 * greedily, each alone by a plain loop over model_forward with a flat F16
 * cache; then all at once through the engine (continuous batching over
 * the paged F16 cache), again with the prefix cache holding the first
 * round's blocks (the second round must find them), and again with n-gram
 * speculation. Every round's tokens must equal the plain loop's. Skipped
 * for a model that is not cached (`make test` fetches them).
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine.h"
#include "model/model.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

enum { N_PROMPTS = 5, MAX_PROMPT = 1024, N_GEN = 8 };

struct fam_out {
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *left;
    int32_t tok[N_GEN];
    int n, finals;
};

static bool fam_event(void *user, const struct engine_event *ev) {
    struct fam_out *o = user;
    pthread_mutex_lock(o->mu);
    if (ev->finish != ENGINE_FINISH_NONE) {
        o->finals++;
        (*o->left)--;
        pthread_cond_broadcast(o->cv);
    } else if (o->n < N_GEN) {
        o->tok[o->n++] = ev->token;
    }
    pthread_mutex_unlock(o->mu);
    return true;
}

/* The greedy tokens of prompt p alone (no end-of-generation stop: the
 * engine requests below ignore it too). */
static bool plain_greedy(const struct model *m, const int32_t *p, int np, int32_t *out) {
    struct kvik_err err = {0};
    int nv = m->hp.n_vocab;
    struct model_ctx *c = model_ctx_new(m, 2, 256, np + N_GEN, &err);
    struct kv_flat kv;
    float *logits = malloc(sizeof(float) * (size_t)nv);
    bool ok = c && logits &&
              kv_flat_init(&kv, m->hp.n_layer, 1, np + N_GEN, m->hp.n_head_kv * m->hp.head_dim, TENSOR_TYPE_F16,
                           &err) == KVIK_OK;
    int32_t pos[256], seq[256] = {0};
    for (int s = 0; ok && s < np; s += 256) {
        int n = np - s < 256 ? np - s : 256;
        for (int i = 0; i < n; i++) pos[i] = s + i;
        struct model_batch b = {.n = n, .tokens = p + s, .pos = pos, .seq = seq};
        ok = model_forward(c, &kv.base, &b, logits, &err) == KVIK_OK;
    }
    for (int g = 0; ok && g < N_GEN; g++) {
        int best = 0;
        for (int i = 1; i < nv; i++)
            if (logits[i] > logits[best]) best = i;
        out[g] = best;
        int32_t t = best, at = np + g, s0 = 0;
        struct model_batch one = {.n = 1, .tokens = &t, .pos = &at, .seq = &s0};
        if (g + 1 < N_GEN) ok = model_forward(c, &kv.base, &one, logits, &err) == KVIK_OK;
    }
    if (!ok) test_fail(__FILE__, __LINE__, "plain decode: %s", err.msg);
    if (c) kv_flat_free(&kv);
    model_ctx_free(c);
    free(logits);
    return ok;
}

/* One round: every prompt submitted at once, all outputs compared. */
static void engine_round(const struct model *m, const struct engine_config *cfg, int32_t (*prompt)[MAX_PROMPT],
                         const int *np, int32_t (*ref)[N_GEN], const char *what, int64_t *cached) {
    struct kvik_err err = {0};
    struct engine *e = engine_new(m, cfg, &err);
    REQUIRE_MSG(e, "engine_new: %s", err.msg);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int rounds = cfg->prefix_cache ? 2 : 1;
    for (int r = 0; r < rounds; r++) {
        int left = N_PROMPTS;
        struct fam_out out[N_PROMPTS];
        for (int i = 0; i < N_PROMPTS; i++) {
            out[i] = (struct fam_out){.mu = &mu, .cv = &cv, .left = &left};
            struct engine_request q = {.prompt = prompt[i], .n_prompt = np[i], .max_tokens = N_GEN, .n = 1,
                                       .sampling = sampler_params_default(), .top_logprobs = -1,
                                       .ignore_eos = true, .on_event = fam_event, .user = &out[i]};
            q.sampling.temp = 0;
            uint64_t id;
            REQUIRE_MSG(engine_submit(e, &q, &id, &err) == KVIK_OK, "submit: %s", err.msg);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 600;
        pthread_mutex_lock(&mu);
        int rc = 0;
        while (left > 0 && rc == 0) rc = pthread_cond_timedwait(&cv, &mu, &ts);
        pthread_mutex_unlock(&mu);
        REQUIRE_MSG(left == 0, "%s: requests did not finish", what);
        for (int i = 0; i < N_PROMPTS; i++)
            CHECK_MSG(out[i].n == N_GEN && out[i].finals == 1 && !memcmp(out[i].tok, ref[i], sizeof ref[i]),
                      "%s, round %d: prompt %d (%d tokens) differs from the plain loop", what, r + 1, i, np[i]);
    }
    struct engine_stats st;
    engine_stats(e, &st);
    if (cached) *cached = (int64_t)st.prefix_hits;
    CHECK(engine_kv_consistent(e));
    engine_free(e);
}

static void family_check(const char *name) {
    char path[4096];
    if (!test_registry_model(name, path, sizeof path)) return;
    struct kvik_err err = {0};
    struct model *m = NULL;
    struct tokenizer *tok = NULL;
    REQUIRE(model_load(path, &m, &err) == KVIK_OK);
    REQUIRE(tokenizer_load(m->file, &tok, &err) == KVIK_OK);
    static int32_t prompt[N_PROMPTS][MAX_PROMPT], ref[N_PROMPTS][N_GEN];
    int np[N_PROMPTS];
    static const char *const texts[N_PROMPTS - 1] = {
        "def fibonacci(n):\n", "The three primary colours are", "Q: What is 17 times 3?\nA:",
        "// A C function that returns the larger of two ints\nint max(int a, int b) {"};
    for (int i = 0; i < N_PROMPTS; i++) {
        char text[8192] = "";
        if (i < N_PROMPTS - 1) snprintf(text, sizeof text, "%s", texts[i]);
        else /* a long prompt: past a 512-position window */
            for (int k = 0; k < 40; k++) {
                char line[96];
                snprintf(line, sizeof line, "Item %d of the list is the number %d squared, which is %d.\n", k, k, k * k);
                strcat(text, line);
            }
        int64_t n = tokenizer_encode(tok, text, strlen(text), true, false, prompt[i], MAX_PROMPT);
        REQUIRE(n >= 1 && n <= MAX_PROMPT - N_GEN);
        np[i] = (int)n;
        REQUIRE(plain_greedy(m, prompt[i], np[i], ref[i]));
    }
    CHECK(np[N_PROMPTS - 1] > 600);
    struct engine_config cfg = engine_config_default();
    cfg.n_threads = 2;
    cfg.max_seqs = N_PROMPTS;
    cfg.max_batch_tokens = 256;
    cfg.n_ctx = 1024;
    cfg.kv_blocks = 400;
    engine_round(m, &cfg, prompt, np, ref, "batched", NULL);
    cfg.prefix_cache = true;
    int64_t hits = 0;
    engine_round(m, &cfg, prompt, np, ref, "prefix cache", &hits);
    CHECK_MSG(hits > 600, "the second round found %lld cached tokens", (long long)hits);
    cfg.prefix_cache = false;
    cfg.spec_mode = SPEC_NGRAM;
    engine_round(m, &cfg, prompt, np, ref, "n-gram speculation", NULL);
    printf("    %s: %d prompts (%d to %d tokens) the same alone, batched, from the prefix cache and speculated\n",
           name, N_PROMPTS, np[0] < np[1] ? np[0] : np[1], np[N_PROMPTS - 1]);
    tokenizer_free(tok);
    model_free(m);
}

TEST(family_qwen2_engine_paths_keep_outputs) { family_check("qwen2.5-coder-0.5b"); }

TEST(family_gemma3_engine_paths_keep_outputs) { family_check("gemma3-270m"); }
