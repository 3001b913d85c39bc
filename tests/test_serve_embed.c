/*
 * test_serve_embed.c — POST /v1/embeddings of `kvik serve`, over HTTP: an
 * encoder alone (-m all-minilm-l6-v2) and beside a chat model
 * (--embedding-model). The vectors equal what the encoder gives in
 * process, for text and for token-array input, as floats and as base64;
 * concurrent requests, batched together by the embedder, each get their
 * own; bad input gets OpenAI's error object; the official openai client
 * reads the route (tests/serve/openai_embeddings_test.py).
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/encoder.h"
#include "serve_harness.h"
#include "test.h"

static const char *minilm(char *buf, size_t len) { return test_cached_model("all-MiniLM-L6-v2-F16.gguf", buf, len); }

/* The in-process embedding of a text. */
static void local_embed(const char *path, const char *text, float *out) {
    struct encoder *e = NULL;
    struct kvik_err err = {0};
    REQUIRE(encoder_load(path, &e, &err) == KVIK_OK);
    struct encoder_ctx *c = encoder_ctx_new(e, 1, 512, &err);
    REQUIRE(c);
    int32_t ids[512];
    int n = (int)encoder_tokenize(e, text, strlen(text), ids, 512);
    const int32_t *row = ids;
    REQUIRE(encoder_embed(c, 1, &row, NULL, &n, ENCODER_POOL_NONE, true, out, &err) == KVIK_OK);
    encoder_ctx_free(c);
    encoder_free(e);
}

/* data[i].embedding of a reply, as floats (array or base64), into out[384]. */
static bool reply_vector(const char *body, int i, float *out) {
    json_error_t je;
    json_t *root = json_loads(body, 0, &je);
    json_t *emb = json_object_get(json_array_get(json_object_get(root, "data"), (size_t)i), "embedding");
    bool ok = false;
    if (json_is_array(emb) && json_array_size(emb) == 384) {
        for (size_t k = 0; k < 384; k++) out[k] = (float)json_number_value(json_array_get(emb, k));
        ok = true;
    } else if (json_is_string(emb)) {
        static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *s = json_string_value(emb);
        uint8_t bytes[384 * 4 + 4];
        size_t nb = 0, len = strlen(s);
        for (size_t p = 0; p + 4 <= len && nb < sizeof bytes - 3; p += 4) {
            uint32_t v = 0;
            int pad = 0;
            for (int q = 0; q < 4; q++) {
                const char *f = strchr(A, s[p + q]);
                if (s[p + q] == '=') pad++;
                v = v << 6 | (uint32_t)(f && s[p + q] != '=' ? f - A : 0);
            }
            bytes[nb++] = (uint8_t)(v >> 16);
            if (pad < 2) bytes[nb++] = (uint8_t)(v >> 8);
            if (pad < 1) bytes[nb++] = (uint8_t)v;
        }
        if (nb == 384 * 4) {
            for (int k = 0; k < 384; k++) {
                uint32_t u = (uint32_t)bytes[4 * k] | (uint32_t)bytes[4 * k + 1] << 8 |
                             (uint32_t)bytes[4 * k + 2] << 16 | (uint32_t)bytes[4 * k + 3] << 24;
                memcpy(&out[k], &u, 4);
            }
            ok = true;
        }
    }
    json_decref(root);
    return ok;
}

static bool close_to(const float *a, const float *b) {
    for (int k = 0; k < 384; k++)
        if (fabsf(a[k] - b[k]) > 1e-7f * (1 + fabsf(b[k]))) return false;
    return true;
}

static void expect_error(const struct serve_proc *s, const char *body, long status, const char *code) {
    struct http_reply r;
    http_post(s, "/v1/embeddings", body, &r);
    CHECK_MSG(r.status == status && r.body && strstr(r.body, code), "%s: %ld %s", body, r.status,
              r.body ? r.body : "");
    http_reply_free(&r);
}

struct worker_arg {
    const struct serve_proc *s;
    int id;
    bool ok;
    float want[384];
};

static void *post_worker(void *p) {
    struct worker_arg *a = p;
    char body[256];
    float got[384];
    a->ok = true;
    for (int round = 0; round < 4; round++) {
        snprintf(body, sizeof body, "{\"input\":[\"text number %d\",\"filler %d\"]}", a->id, round);
        struct http_reply r;
        http_post(a->s, "/v1/embeddings", body, &r);
        a->ok = a->ok && r.status == 200 && reply_vector(r.body, 0, got) && close_to(got, a->want);
        http_reply_free(&r);
    }
    return NULL;
}

TEST(serve_embeddings_alone) {
    char path[4096], args[4200];
    if (!minilm(path, sizeof path)) return;
    struct serve_proc s;
    snprintf(args, sizeof args, "-m %s -t 1", path);
    if (!serve_start(&s, args, 60)) return;
    float want[384], got[384];
    local_embed(path, "hello world", want);
    struct http_reply r;
    /* text, a list of texts, floats and base64 */
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"hello world\",\"model\":\"any\"}", &r) == 200);
    CHECK(reply_vector(r.body, 0, got) && close_to(got, want));
    CHECK(strstr(r.body, "\"prompt_tokens\":4") && strstr(r.body, "\"object\":\"list\""));
    http_reply_free(&r);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":[\"a b c\",\"hello world\"],\"encoding_format\":\"base64\"}",
                      &r) == 200);
    CHECK(reply_vector(r.body, 1, got) && close_to(got, want));
    CHECK(strstr(r.body, "\"index\":1") != NULL);
    http_reply_free(&r);
    /* token arrays: the text's tokens without [CLS]/[SEP] */
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":[7592,2088]}", &r) == 200);
    CHECK(reply_vector(r.body, 0, got) && close_to(got, want));
    http_reply_free(&r);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":[[7592,2088],[7592]]}", &r) == 200);
    CHECK(reply_vector(r.body, 0, got) && close_to(got, want));
    http_reply_free(&r);
    /* control-token spellings are text */
    float cls[384];
    local_embed(path, "[CLS] hello", cls);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"[CLS] hello\"}", &r) == 200);
    CHECK(reply_vector(r.body, 0, got) && close_to(got, cls) && strstr(r.body, "\"prompt_tokens\":7"));
    http_reply_free(&r);
    /* errors */
    expect_error(&s, "{}", 400, "missing_required_parameter");
    expect_error(&s, "{\"input\":[]}", 400, "invalid_value");
    expect_error(&s, "{\"input\":7}", 400, "invalid_type");
    expect_error(&s, "{\"input\":[[]]}", 400, "invalid_value");
    expect_error(&s, "{\"input\":[\"a\",5]}", 400, "invalid_type");
    expect_error(&s, "{\"input\":[-1]}", 400, "integer_below_min_value");
    expect_error(&s, "{\"input\":[40000]}", 400, "out of range");
    expect_error(&s, "{\"input\":\"x\",\"dimensions\":128}", 400, "dimensions");
    expect_error(&s, "{\"input\":\"x\",\"encoding_format\":\"hex\"}", 400, "encoding_format");
    expect_error(&s, "{\"input\":\"x\"", 400, "invalid_json");
    char *big = malloc(600 * 6 + 64);
    int at = sprintf(big, "{\"input\":[");
    for (int i = 0; i < 511; i++) at += sprintf(big + at, "%s1000", i ? "," : "");
    sprintf(big + at, "]}");
    expect_error(&s, big, 400, "context_length_exceeded");
    free(big);
    expect_error(&s, "{\"messages\":[]}", 400, "missing_required_parameter");
    struct http_reply c;
    http_post(&s, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &c);
    CHECK(c.status == 400 && strstr(c.body, "embedding model"));
    http_reply_free(&c);
    REQUIRE(http_call(&s, "GET", "/v1/models", NULL, NULL, false, 10, &c) == 200);
    CHECK(strstr(c.body, "all-MiniLM-L6-v2-F16") && strstr(c.body, "\"max_model_len\":512"));
    http_reply_free(&c);
    /* concurrent requests, batched together, each get their own vectors */
    enum { W = 4 };
    struct worker_arg wa[W];
    pthread_t th[W];
    for (int i = 0; i < W; i++) {
        char text[64];
        snprintf(text, sizeof text, "text number %d", i);
        wa[i].s = &s;
        wa[i].id = i;
        local_embed(path, text, wa[i].want);
        REQUIRE(pthread_create(&th[i], NULL, post_worker, &wa[i]) == 0);
    }
    for (int i = 0; i < W; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(wa[i].ok, "client %d got its own vectors", i);
    }
    /* the server is still up */
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"hello world\"}", &r) == 200);
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}

TEST(serve_chat_and_embeddings) {
    char path[4096], model[4096], args[4300];
    if (!minilm(path, sizeof path) || !test_default_model(model, sizeof model)) return;
    struct serve_proc s;
    snprintf(args, sizeof args, "-t 1 -c 256 --embedding-model %s", path);
    if (!serve_start(&s, args, 60)) return;
    struct http_reply r;
    REQUIRE(http_call(&s, "GET", "/v1/models", NULL, NULL, false, 10, &r) == 200);
    json_error_t je;
    json_t *root = json_loads(r.body, 0, &je);
    CHECK(json_array_size(json_object_get(root, "data")) == 2);
    json_decref(root);
    http_reply_free(&r);
    REQUIRE(http_call(&s, "GET", "/v1/models/all-MiniLM-L6-v2-F16", NULL, NULL, false, 10, &r) == 200);
    http_reply_free(&r);
    float want[384], got[384];
    local_embed(path, "hello world", want);
    REQUIRE(http_post(&s, "/v1/embeddings", "{\"input\":\"hello world\"}", &r) == 200);
    CHECK(reply_vector(r.body, 0, got) && close_to(got, want));
    CHECK(strstr(r.body, "\"model\":\"all-MiniLM-L6-v2-F16\"") != NULL);
    http_reply_free(&r);
    REQUIRE(http_post(&s, "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4}", &r) == 200);
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}

TEST(serve_embeddings_refused_without_encoder) {
    char model[4096];
    if (!test_default_model(model, sizeof model)) return;
    struct serve_proc s;
    if (!serve_start(&s, "-t 1 -c 256", 60)) return;
    expect_error(&s, "{\"input\":\"x\"}", 400, "model_not_supported");
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}
