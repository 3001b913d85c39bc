/*
 * test_serve_logprobs.c — the prompt's log-probabilities over HTTP
 * (/v1/completions with echo and logprobs), against `kvik serve` on the
 * default model (serve_harness.c):
 *   numbers      the echoed logprobs equal those of one forward pass with
 *                logits at every position, run here in the test process
 *                (what kvik perplexity scores), within float tolerance;
 *   prompt forms a string, the same as token ids and as a one-string
 *                array give the same lists; the first token has null
 *                logprob and top_logprobs; the text is the prompt;
 *   cache        the numbers are the same bits with a cold and a warm
 *                prefix cache (after a plain request over the same text);
 *   generation   max_tokens 1: the prompt's entries, then the token's;
 *                streaming: the first chunk carries the prompt's;
 *   batch        two prompts with n 2: four choices in OpenAI's order,
 *                each with the numbers of the prompt alone;
 *   errors       logprobs above 20, max_tokens 0 without echo, negative
 *                max_tokens: 400, and the server keeps serving.
 */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>

#include "model/kv.h"
#include "model/model.h"
#include "serve_harness.h"
#include "tensor/tensor.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tools/ppl.h"

static const char k_prompt[] =
    "The lighthouse keeper climbed the stairs every evening at dusk, lit the lamp, and wrote the weather in a "
    "small blue notebook before supper.";

enum { SL_MAX = 256 };

/* The completion's "choices"[0]."logprobs" (borrowed from root), NULL if absent. */
static json_t *first_logprobs(json_t *root) {
    json_t *c = json_array_get(json_object_get(root, "choices"), 0);
    return json_object_get(c, "logprobs");
}

static json_t *post_json(const struct serve_proc *s, const char *path, const char *body, long want) {
    struct http_reply r;
    long st = http_post(s, path, body, &r);
    json_error_t e;
    json_t *root = st == want ? json_loads(r.body ? r.body : "", 0, &e) : NULL;
    if (st != want) test_fail(__FILE__, __LINE__, "POST %s: %ld (%s)", path, st, r.body ? r.body : "");
    http_reply_free(&r);
    return root;
}

/* The token_logprobs list as doubles (NaN for null) into lp[0..], its length. */
static int read_lps(json_t *lp, double *out, int cap) {
    json_t *a = json_object_get(lp, "token_logprobs");
    int n = (int)json_array_size(a);
    for (int i = 0; i < n && i < cap; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        out[i] = json_is_null(v) ? NAN : json_number_value(v);
    }
    return n;
}

/* One forward pass over ids with logits everywhere: lp[p] = log p(ids[p] | ids[..p]). */
static bool reference_lps(const int32_t *ids, int n, double *lp) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return false;
    struct kvik_err err = {0};
    struct model *m = NULL;
    if (model_load(path, &m, &err)) {
        test_fail(__FILE__, __LINE__, "model_load: %s", err.msg);
        return false;
    }
    int nv = m->hp.n_vocab;
    struct model_ctx *ctx = model_ctx_new(m, 2, n, n, &err);
    struct kv_flat kv = {0};
    float *logits = malloc(sizeof(float) * (size_t)n * (size_t)nv);
    int32_t pos[SL_MAX], seq[SL_MAX] = {0};
    bool mark[SL_MAX], ok = false;
    if (!ctx || !logits ||
        kv_flat_init(&kv, m->hp.n_layer, 1, n, m->hp.n_head_kv * m->hp.head_dim, TENSOR_TYPE_F16, &err))
        goto out;
    for (int i = 0; i < n; i++) pos[i] = i, mark[i] = true;
    struct model_batch mb = {.n = n, .tokens = ids, .pos = pos, .seq = seq, .logits = mark};
    if (model_forward(ctx, &kv.base, &mb, logits, &err)) goto out;
    for (int p = 1; p < n; p++) {
        struct ppl_row r;
        ppl_score(logits + (size_t)(p - 1) * (size_t)nv, nv, ids[p], &r);
        lp[p] = -r.nll;
    }
    ok = true;
out:
    if (!ok) test_fail(__FILE__, __LINE__, "reference forward: %s", err.msg);
    kv_flat_free(&kv);
    model_ctx_free(ctx);
    model_free(m);
    free(logits);
    return ok;
}

TEST(serve_echo_logprobs_prompt) {
    char model[1024];
    if (!test_default_model(model, sizeof model)) return;
    struct serve_proc s;
    if (!serve_start(&s, "-t 2 -c 512", 120)) return;
    char body[16384], ids_json[4096];
    static double a[SL_MAX], b[SL_MAX], c[SL_MAX], warm[SL_MAX], ref[SL_MAX];
    int32_t ids[SL_MAX];
    int n = 0;

    /* the prompt's ids as the server tokenizes it */
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"add_special_tokens\":false}", k_prompt);
    json_t *t = post_json(&s, "/tokenize", body, 200);
    json_t *arr = json_object_get(t, "tokens");
    size_t off = 0;
    ids_json[off++] = '[';
    for (size_t i = 0; i < json_array_size(arr) && n < SL_MAX; i++) {
        ids[n++] = (int32_t)json_integer_value(json_array_get(arr, i));
        off += (size_t)snprintf(ids_json + off, sizeof ids_json - off, "%s%d", i ? "," : "", ids[n - 1]);
    }
    snprintf(ids_json + off, sizeof ids_json - off, "]");
    json_decref(t);
    REQUIRE(n > 10);

    /* a string prompt, scored only */
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"echo\":true,\"logprobs\":5,\"max_tokens\":0}", k_prompt);
    json_t *r = post_json(&s, "/v1/completions", body, 200);
    json_t *lp = first_logprobs(r);
    json_t *ch = json_array_get(json_object_get(r, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(ch, "text")), k_prompt);
    CHECK_STR(json_string_value(json_object_get(ch, "finish_reason")), "length");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(r, "usage"), "completion_tokens")), 0);
    CHECK_EQ_INT(read_lps(lp, a, SL_MAX), n);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "tokens")), n);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "text_offset")), n);
    CHECK(isnan(a[0]));
    CHECK(json_is_null(json_array_get(json_object_get(lp, "top_logprobs"), 0)));
    json_t *tops = json_object_get(lp, "top_logprobs");
    bool tops_ok = true, offs_ok = true;
    for (int i = 1; i < n; i++) {
        json_t *d = json_array_get(tops, (size_t)i);
        tops_ok &= json_is_object(d) && json_object_size(d) >= 1 && json_object_size(d) <= 5 && a[i] <= 0;
        offs_ok &= json_integer_value(json_array_get(json_object_get(lp, "text_offset"), (size_t)i)) >=
                   json_integer_value(json_array_get(json_object_get(lp, "text_offset"), (size_t)i - 1));
    }
    CHECK(tops_ok);
    CHECK(offs_ok);
    json_decref(r);

    /* the same as token ids and as a one-string array */
    snprintf(body, sizeof body, "{\"prompt\":%s,\"echo\":true,\"logprobs\":5,\"max_tokens\":0}", ids_json);
    r = post_json(&s, "/v1/completions", body, 200);
    CHECK_EQ_INT(read_lps(first_logprobs(r), b, SL_MAX), n);
    json_decref(r);
    snprintf(body, sizeof body, "{\"prompt\":[\"%s\"],\"echo\":true,\"logprobs\":1,\"max_tokens\":0}", k_prompt);
    r = post_json(&s, "/v1/completions", body, 200);
    CHECK_EQ_INT(read_lps(first_logprobs(r), c, SL_MAX), n);
    json_decref(r);
    bool same = true;
    for (int i = 1; i < n; i++) same &= a[i] == b[i] && a[i] == c[i];
    CHECK(same);

    /* warm cache: a plain request over the same text first */
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":2,\"temperature\":0}", k_prompt);
    r = post_json(&s, "/v1/completions", body, 200);
    json_decref(r);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":2,\"temperature\":0}", k_prompt);
    r = post_json(&s, "/v1/completions", body, 200);
    long long cached = json_integer_value(
        json_object_get(json_object_get(json_object_get(r, "usage"), "prompt_tokens_details"), "cached_tokens"));
    CHECK(cached > 0); /* the cache is warm for this text */
    json_decref(r);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"echo\":true,\"logprobs\":5,\"max_tokens\":0}", k_prompt);
    r = post_json(&s, "/v1/completions", body, 200);
    CHECK_EQ_INT(read_lps(first_logprobs(r), warm, SL_MAX), n);
    json_decref(r);
    same = true;
    for (int i = 1; i < n; i++) same &= warm[i] == a[i];
    CHECK(same);

    /* max_tokens 1: the prompt's entries, then the generated token's */
    snprintf(body, sizeof body, "{\"prompt\":%s,\"echo\":true,\"logprobs\":1,\"max_tokens\":1,\"temperature\":0}",
             ids_json);
    r = post_json(&s, "/v1/completions", body, 200);
    CHECK_EQ_INT(read_lps(first_logprobs(r), b, SL_MAX), n + 1);
    same = true;
    for (int i = 1; i < n; i++) same &= a[i] == b[i];
    CHECK(same);
    json_decref(r);

    /* streaming: the first chunk is the echo with the prompt's logprobs */
    snprintf(body, sizeof body,
             "{\"prompt\":\"%s\",\"echo\":true,\"logprobs\":2,\"max_tokens\":2,\"temperature\":0,\"stream\":true}",
             k_prompt);
    struct http_reply hr;
    CHECK_EQ_INT(http_post(&s, "/v1/completions", body, &hr), 200);
    const char *d = hr.body ? strstr(hr.body, "data: ") : NULL;
    const char *nl = d ? strstr(d, "\n\n") : NULL;
    if (d && nl) {
        char *chunk = strndup(d + 6, (size_t)(nl - d - 6));
        json_error_t e;
        json_t *cr = json_loads(chunk, 0, &e);
        json_t *cch = json_array_get(json_object_get(cr, "choices"), 0);
        CHECK_STR(json_string_value(json_object_get(cch, "text")), k_prompt);
        CHECK_EQ_INT(read_lps(json_object_get(cch, "logprobs"), c, SL_MAX), n);
        same = true;
        for (int i = 1; i < n; i++) same &= c[i] == a[i];
        CHECK(same);
        json_decref(cr);
        free(chunk);
    } else {
        test_fail(__FILE__, __LINE__, "no SSE chunk in %s", hr.body ? hr.body : "");
    }
    CHECK(hr.body && strstr(hr.body, "data: [DONE]"));
    http_reply_free(&hr);

    /* a batch of prompts (as lm-evaluation-harness sends with batch_size > 1):
     * prompt i's choice c is choice i * n + c, each as its own request gives it */
    snprintf(body, sizeof body,
             "{\"prompt\":[%s,%s],\"echo\":true,\"logprobs\":5,\"max_tokens\":0,\"n\":2}", ids_json, ids_json);
    r = post_json(&s, "/v1/completions", body, 200);
    json_t *bch = json_object_get(r, "choices");
    CHECK_EQ_INT(json_array_size(bch), 4);
    same = true;
    for (size_t k = 0; k < json_array_size(bch); k++) {
        json_t *x = json_array_get(bch, k);
        same &= json_integer_value(json_object_get(x, "index")) == (json_int_t)k;
        same &= read_lps(json_object_get(x, "logprobs"), c, SL_MAX) == n;
        for (int i = 1; i < n; i++) same &= c[i] == a[i];
    }
    CHECK(same);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(r, "usage"), "prompt_tokens")), 2 * n);
    json_decref(r);
    snprintf(body, sizeof body, "{\"prompt\":[\"%s\",\"Hello\"],\"max_tokens\":2,\"temperature\":0}", k_prompt);
    r = post_json(&s, "/v1/completions", body, 200);
    CHECK_EQ_INT(json_array_size(json_object_get(r, "choices")), 2);
    json_decref(r);

    /* bad values: 400, and the server goes on */
    const char *bad[] = {"{\"prompt\":\"x\",\"echo\":true,\"logprobs\":21,\"max_tokens\":0}",
                         "{\"prompt\":\"x\",\"logprobs\":2,\"max_tokens\":0}",
                         "{\"prompt\":\"x\",\"echo\":true,\"logprobs\":2,\"max_tokens\":-1}",
                         "{\"prompt\":\"x\",\"echo\":true,\"logprobs\":\"2\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(http_post(&s, "/v1/completions", bad[i], &hr), 400);
        http_reply_free(&hr);
    }
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"echo\":true,\"logprobs\":5,\"max_tokens\":0}", k_prompt);
    r = post_json(&s, "/v1/completions", body, 200);
    CHECK_EQ_INT(read_lps(first_logprobs(r), b, SL_MAX), n);
    json_decref(r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);

    /* the numbers: one forward pass with logits at every position */
    if (!reference_lps(ids, n, ref)) return;
    double worst = 0;
    for (int i = 1; i < n; i++)
        if (fabs(a[i] - ref[i]) > worst) worst = fabs(a[i] - ref[i]);
    printf("    %d prompt tokens; largest |HTTP - forward pass| %.2e\n", n, worst);
    CHECK(worst < 1e-4);
}
