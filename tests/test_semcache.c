/*
 * test_semcache.c — the semantic cache (retrieval/semcache.h), its word
 * guard (retrieval/qmatch.h) and its hard key (server/semantic.h), in
 * process; and `kvik serve --semantic-cache` over HTTP: hits only within
 * one API key, one system prompt and one set of sampling parameters,
 * however similar the question; the opt-out and sampled requests; the
 * X-Kvik-Cache header, a streamed hit and the Prometheus counters.
 */
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>

#include "retrieval/qmatch.h"
#include "retrieval/semcache.h"
#include "serve_harness.h"
#include "server/semantic.h"
#include "test.h"

static bool same(const char *a, const char *b) { return qmatch_same(a, strlen(a), b, strlen(b)); }

TEST(qmatch_same_words_only) {
    /* the same content words: case, punctuation, function words, typos, plurals */
    CHECK(same("What is the Great Barrier Reef?", "tell me what the great barrier reef is"));
    CHECK(same("How do I cancel my Netflix subscription?", "how can i cancle my netflix subscription"));
    CHECK(same("Is a tomato a fruit or a vegetable?", "tomato: fruit or vegetable?"));
    CHECK(same("How many calories in two eggs", "how many calories in 2 egg"));
    CHECK(same("Price in € for 1,000 units", "price in € for 1000 unit"));
    CHECK(same("Don’t I need a visa?", "do not I need a visa"));
    /* near misses that embeddings rate as close */
    CHECK(!same("Which foods are safe for dogs?", "Which foods are not safe for dogs?"));
    CHECK(!same("Which plants don't need sun?", "Which plants need sun?"));
    CHECK(!same("Convert 100 USD to EUR", "Convert 100 EUR to USD"));
    CHECK(!same("Can I run Windows 11 with 4 GB of RAM?", "Can I run Windows 11 with 2 GB of RAM?"));
    CHECK(!same("How do I make pancakes?", "How do I make pancakes without eggs?"));
    CHECK(!same("How do I subscribe to a channel?", "How do I unsubscribe from a channel?"));
    CHECK(!same("What is the capital of Slovakia?", "What is the capital of Slovenia?"));
    CHECK(!same("When does the sale start?", "Where does the sale start?"));
    CHECK(!same("flights to Paris", "flights from Paris"));
    CHECK(!same("Python 2 or 3", "Python 3 or 2"));
    CHECK(!same("", "x"));
    CHECK(same("", "the"));
    /* bytes that are not text, and an over-long word, never crash */
    char junk[600];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 11);
    CHECK(qmatch_same(junk, sizeof junk, junk, sizeof junk) || true);
    CHECK(!qmatch_same(junk, sizeof junk, "x", 1));
}

enum { D = 8 };

static void unit(float *v, int hot, float other) {
    for (int i = 0; i < D; i++) v[i] = i == hot ? 1.0f : other;
    float ss = 0;
    for (int i = 0; i < D; i++) ss += v[i] * v[i];
    for (int i = 0; i < D; i++) v[i] /= sqrtf(ss);
}

TEST(semcache_keys_guard_ttl_and_size) {
    struct semcache_config cfg = {.dim = D, .threshold = 0.8f, .ttl_ns = 1000, .max_entries = 3, .guard = true};
    struct kvik_err err = {0};
    struct semcache *c = semcache_new(&cfg, &err);
    REQUIRE(c);
    uint8_t k1[SEMCACHE_KEY] = {1}, k2[SEMCACHE_KEY] = {2};
    float a[D], near[D], far[D];
    unit(a, 0, 0.0f);
    unit(near, 0, 0.1f); /* cosine 0.93 with a */
    unit(far, 1, 0.0f);
    const char *q = "What is the capital of France?";
    REQUIRE(semcache_put(c, k1, a, q, strlen(q), 0, "Paris.", 6) == KVIK_OK);
    char *ans;
    size_t len;
    struct semcache_probe pb;
    const char *q2 = "what's the capital of france";
    CHECK(semcache_get(c, k1, near, q2, strlen(q2), 10, &ans, &len, &pb));
    CHECK(ans && !strcmp(ans, "Paris.") && len == 6 && pb.same && pb.sim > 0.9f);
    free(ans);
    /* another key never sees it, however close */
    CHECK(!semcache_get(c, k2, a, q, strlen(q), 10, &ans, &len, &pb) && pb.sim == -2.0f && !ans);
    /* close vector, other words: the guard says no */
    const char *q3 = "What is the capital of Spain?";
    CHECK(!semcache_get(c, k1, a, q3, strlen(q3), 10, &ans, &len, &pb) && !pb.same && pb.sim > 0.99f);
    /* same words, far vector: under the threshold */
    CHECK(!semcache_get(c, k1, far, q, strlen(q), 10, &ans, &len, &pb));
    /* past the TTL */
    CHECK(!semcache_get(c, k1, a, q, strlen(q), 1000, &ans, &len, &pb));
    struct semcache_stats st;
    semcache_stats(c, &st);
    CHECK(st.expirations == 1 && st.entries == 0 && st.hits == 1);
    /* at most 3 entries: the oldest goes */
    for (int i = 0; i < 4; i++) {
        char qi[32];
        snprintf(qi, sizeof qi, "question %d", i);
        REQUIRE(semcache_put(c, k1, a, qi, strlen(qi), 2000 + i, "x", 1) == KVIK_OK);
    }
    semcache_stats(c, &st);
    CHECK(st.entries == 3 && st.evictions == 1);
    CHECK(!semcache_get(c, k1, a, "question 0", 10, 2100, &ans, &len, &pb));
    CHECK(semcache_get(c, k1, a, "question 3", 10, 2100, &ans, &len, &pb));
    free(ans);
    semcache_clear(c);
    semcache_stats(c, &st);
    CHECK(st.entries == 0);
    semcache_free(c);
    cfg.ttl_ns = 0;
    CHECK(semcache_new(&cfg, &err) == NULL && err.code == KVIK_ERR_INVALID_ARG);
}

/* A chat request of two messages with the given system prompt and temperature. */
static void chat_req(struct api_request *r, struct chat_msg *m, const char *system, const char *user, float temp) {
    memset(r, 0, sizeof *r);
    m[0] = (struct chat_msg){"system", system};
    m[1] = (struct chat_msg){"user", user};
    r->route = API_ROUTE_CHAT;
    r->msgs = m;
    r->n_msgs = 2;
    r->n = 1;
    r->sp = sampler_params_openai();
    r->sp.temp = temp;
}

TEST(semantic_key_is_hard) {
    struct api_request r;
    struct chat_msg m[2];
    uint8_t t1[16] = {1}, t2[16] = {2};
    uint8_t base[SEMCACHE_KEY], k[SEMCACHE_KEY];
    chat_req(&r, m, "You are terse.", "What is 2+2?", 0);
    semantic_key(&r, t1, "model-a", 42, "chatml", base);
    /* the last user message is not in the key */
    chat_req(&r, m, "You are terse.", "What's 2 plus 2?", 0);
    semantic_key(&r, t1, "model-a", 42, "chatml", k);
    CHECK(!memcmp(base, k, sizeof k));
    /* everything else is */
    semantic_key(&r, t2, "model-a", 42, "chatml", k);
    CHECK(memcmp(base, k, sizeof k));
    semantic_key(&r, t1, "model-b", 42, "chatml", k);
    CHECK(memcmp(base, k, sizeof k));
    semantic_key(&r, t1, "model-a", 43, "chatml", k);
    CHECK(memcmp(base, k, sizeof k));
    semantic_key(&r, t1, "model-a", 42, "llama3", k);
    CHECK(memcmp(base, k, sizeof k));
    chat_req(&r, m, "You are terse!", "What is 2+2?", 0);
    semantic_key(&r, t1, "model-a", 42, "chatml", k);
    CHECK(memcmp(base, k, sizeof k));
    chat_req(&r, m, "You are terse.", "What is 2+2?", 0);
    r.max_tokens = 7;
    semantic_key(&r, t1, "model-a", 42, "chatml", k);
    CHECK(memcmp(base, k, sizeof k));
    chat_req(&r, m, "You are terse.", "What is 2+2?", 0);
    r.sp.top_p = 0.5f;
    semantic_key(&r, t1, "model-a", 42, "chatml", k);
    CHECK(memcmp(base, k, sizeof k));
    /* eligibility: greedy only unless sampled is asked; one choice; the user speaks last */
    chat_req(&r, m, "s", "q", 0.7f);
    CHECK(!semantic_eligible(&r, SEMANTIC_DEFAULT) && semantic_eligible(&r, SEMANTIC_SAMPLED));
    CHECK(!semantic_eligible(&r, SEMANTIC_OFF));
    chat_req(&r, m, "s", "q", 0);
    CHECK(semantic_eligible(&r, SEMANTIC_DEFAULT));
    r.n = 2;
    CHECK(!semantic_eligible(&r, SEMANTIC_DEFAULT));
    r.n = 1;
    r.logprobs = true;
    CHECK(!semantic_eligible(&r, SEMANTIC_DEFAULT));
    CHECK(semantic_mode_of("maybe") == SEMANTIC_BAD && semantic_mode_of("OFF") == SEMANTIC_OFF);
}

/* ---- over HTTP ---------------------------------------------------------------- */

struct cached {
    long status;
    char state[16];   /* X-Kvik-Cache */
    char content[512];
};

static void ask(const struct serve_proc *s, const char *key, const char *system, const char *q, const char *extra,
                const char *cache_hdr, struct cached *out) {
    char auth[128], hdr[128], body[2048];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    snprintf(hdr, sizeof hdr, "X-Kvik-Cache: %s", cache_hdr ? cache_hdr : "on");
    const char *const headers[] = {auth, "Content-Type: application/json", hdr, NULL};
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"system\",\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"%s\"}],"
             "\"max_tokens\":8%s}",
             system, q, extra ? extra : ",\"temperature\":0");
    struct http_reply r;
    out->status = http_call(s, "POST", "/v1/chat/completions", body, headers, false, 60, &r);
    snprintf(out->state, sizeof out->state, "%s", r.kvik_cache);
    out->content[0] = 0;
    json_error_t je;
    json_t *root = json_loads(r.body ? r.body : "", 0, &je);
    const char *c = json_string_value(
        json_object_get(json_object_get(json_array_get(json_object_get(root, "choices"), 0), "message"), "content"));
    snprintf(out->content, sizeof out->content, "%s", c ? c : "");
    json_decref(root);
    http_reply_free(&r);
}

TEST(serve_semantic_cache_never_crosses_keys) {
    char model[4096], emb[4096], args[9000];
    if (!test_default_model(model, sizeof model)) return;
    if (!test_cached_model("all-MiniLM-L6-v2-F16.gguf", emb, sizeof emb)) return;
    snprintf(args, sizeof args, "-m %s --embedding-model %s -t 2 -c 1024 --api-key k1,k2 --semantic-cache", model, emb);
    struct serve_proc s;
    if (!serve_start(&s, args, 120)) return;
    const char *sys1 = "You answer in one short sentence.";
    struct cached a, b;
    ask(&s, "k1", sys1, "What is the capital of France?", NULL, NULL, &a);
    CHECK(a.status == 200 && !strcmp(a.state, "miss"));
    /* the same question again, and a rewording with the same words: hits, the same answer */
    ask(&s, "k1", sys1, "What is the capital of France?", NULL, NULL, &b);
    CHECK_MSG(b.status == 200 && !strcmp(b.state, "hit"), "%ld %s", b.status, b.state);
    CHECK(!strcmp(a.content, b.content));
    ask(&s, "k1", sys1, "what's the capital of france", NULL, NULL, &b);
    CHECK_MSG(!strcmp(b.state, "hit") && !strcmp(a.content, b.content), "%s", b.state);
    /* never across API keys, system prompts or sampling, however similar */
    ask(&s, "k2", sys1, "What is the capital of France?", NULL, NULL, &b);
    CHECK_MSG(!strcmp(b.state, "miss"), "another key: %s", b.state);
    ask(&s, "k1", "You answer in one short sentence!", "What is the capital of France?", NULL, NULL, &b);
    CHECK_MSG(!strcmp(b.state, "miss"), "another system prompt: %s", b.state);
    ask(&s, "k1", sys1, "What is the capital of France?", ",\"temperature\":0,\"top_p\":0.5", NULL, &b);
    CHECK_MSG(!strcmp(b.state, "miss"), "other sampling: %s", b.state);
    /* a near miss in the same key: no hit */
    ask(&s, "k1", sys1, "What is not the capital of France?", NULL, NULL, &b);
    CHECK_MSG(!strcmp(b.state, "miss"), "a negation: %s", b.state);
    /* opted out; sampled without asking; sampled when asked */
    ask(&s, "k1", sys1, "What is the capital of France?", NULL, "off", &b);
    CHECK(!strcmp(b.state, "bypass"));
    ask(&s, "k1", sys1, "What is the capital of France?", ",\"temperature\":0.7", NULL, &b);
    CHECK(!strcmp(b.state, "bypass"));
    ask(&s, "k1", sys1, "What is the capital of France?", NULL, "sometimes", &b);
    CHECK(b.status == 400);
    /* a streamed hit */
    const char *const h1[] = {"Authorization: Bearer k1", "Content-Type: application/json", NULL};
    struct http_reply r;
    char body[512];
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"system\",\"content\":\"%s\"},{\"role\":\"user\","
             "\"content\":\"What is the capital of France?\"}],\"max_tokens\":8,\"temperature\":0,\"stream\":true}", sys1);
    CHECK(http_call(&s, "POST", "/v1/chat/completions", body, h1, false, 60, &r) == 200);
    CHECK(!strcmp(r.kvik_cache, "hit") && strstr(r.content_type, "text/event-stream"));
    CHECK(r.body && strstr(r.body, "chat.completion.chunk") && strstr(r.body, "data: [DONE]"));
    http_reply_free(&r);
    /* the counters */
    REQUIRE(http_call(&s, "GET", "/metrics", NULL, NULL, false, 10, &r) == 200);
    double hits = 0, misses = 0;
    CHECK(metrics_value(r.body, "kvik_semantic_cache_hits_total", &hits) && hits == 3);
    CHECK(metrics_value(r.body, "kvik_semantic_cache_misses_total", &misses) && misses == 5);
    char why[4096];
    CHECK_MSG(test_promtool_check(r.body, why, sizeof why) <= 0, "%s", why);
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}
