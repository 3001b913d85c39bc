/*
 * test_serve_prefix.c — the prefix cache through `kvik serve`: usage
 * reports prompt_tokens_details.cached_tokens (whole bodies and the
 * streamed usage chunk); a repeated system prompt is a hit for the same
 * API key and never for another key (a hit is visible in time to first
 * token, so tenants must not share entries), nor across cache_salt values;
 * --prefix-cache-shared shares across keys, --no-prefix-cache turns it off;
 * a cache hit gives the same greedy text; the hit counters in /metrics.
 */
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>

#include "serve_harness.h"
#include "test.h"

static const char k_sys[] =
    "You are the help desk of a small railway museum. Visitors ask about opening hours, tickets, the steam "
    "locomotive rides on Sundays, the cafe and accessibility. Answer in one friendly sentence and do not make "
    "up anything that is not stated here. The museum opens at ten and closes at five, tickets cost eight euros.";

struct px_reply {
    long status;
    int cached, prompt;
    char text[512];
};

/* One greedy chat request: k_sys + question q, as key (NULL: none) with
 * cache_salt salt (NULL: none); stream: usage from the usage chunk. */
static struct px_reply ask(const struct serve_proc *s, const char *key, const char *salt, int q, bool stream) {
    static const char *const questions[] = {"When do you open?", "How much is a ticket?", "Is there a cafe?",
                                            "Can I ride the steam train?"};
    struct px_reply out = {.cached = -1, .prompt = -1};
    char body[2048], auth[128], salt_field[96] = "";
    if (salt) snprintf(salt_field, sizeof salt_field, ",\"cache_salt\":\"%s\"", salt);
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"system\",\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"%s\"}],"
             "\"max_tokens\":6,\"temperature\":0%s%s}",
             k_sys, questions[q % 4], salt_field,
             stream ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}" : "");
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key ? key : "");
    const char *hdr[] = {auth, NULL};
    struct http_reply r;
    out.status = http_call(s, "POST", "/v1/chat/completions", body, key ? hdr : NULL, false, 120, &r);
    const char *json = r.body;
    if (stream && r.body) { /* the usage chunk: the last data event before [DONE] */
        const char *u = strstr(r.body, "\"choices\":[]");
        while (u && u > r.body && strncmp(u, "data: ", 6)) u--;
        json = u ? u + 6 : NULL;
    }
    json_error_t je;
    json_t *root = json && out.status == 200 ? json_loads(json, JSON_DISABLE_EOF_CHECK, &je) : NULL;
    json_t *usage = json_object_get(root, "usage");
    json_t *cached = json_object_get(json_object_get(usage, "prompt_tokens_details"), "cached_tokens");
    if (json_is_integer(cached)) out.cached = (int)json_integer_value(cached);
    if (json_is_integer(json_object_get(usage, "prompt_tokens")))
        out.prompt = (int)json_integer_value(json_object_get(usage, "prompt_tokens"));
    json_t *msg = json_object_get(json_array_get(json_object_get(root, "choices"), 0), "message");
    if (json_is_string(json_object_get(msg, "content")))
        snprintf(out.text, sizeof out.text, "%s", json_string_value(json_object_get(msg, "content")));
    json_decref(root);
    http_reply_free(&r);
    return out;
}

TEST(serve_prefix_cache_isolated_per_api_key) {
    struct serve_proc s;
    if (!serve_start(&s, "-t 1 -c 512 --api-key alpha,beta", 120)) return;
    struct px_reply a0 = ask(&s, "alpha", NULL, 0, false);
    REQUIRE(a0.status == 200);
    CHECK_EQ_INT(a0.cached, 0);
    CHECK(a0.prompt > 64);
    /* the same key, another question: the system prompt's blocks */
    struct px_reply a1 = ask(&s, "alpha", NULL, 1, false);
    CHECK_MSG(a1.cached >= 48 && a1.cached < a1.prompt, "alpha again: %d of %d cached", a1.cached, a1.prompt);
    /* the other key: nothing, then its own */
    struct px_reply b0 = ask(&s, "beta", NULL, 0, false);
    CHECK_EQ_INT(b0.cached, 0);
    CHECK_EQ_INT(b0.prompt, a0.prompt);
    CHECK_MSG(!strcmp(a0.text, b0.text), "'%s' vs '%s'", a0.text, b0.text);
    struct px_reply b1 = ask(&s, "beta", NULL, 0, true); /* the streamed usage chunk too */
    CHECK_MSG(b1.cached >= 48, "beta again (stream): %d cached", b1.cached);
    /* an identical request hit almost entirely gives the same text */
    struct px_reply a2 = ask(&s, "alpha", NULL, 0, false);
    CHECK_MSG(a2.cached >= a0.prompt - 16, "alpha repeated: %d of %d", a2.cached, a2.prompt);
    CHECK_MSG(!strcmp(a0.text, a2.text), "'%s' vs '%s'", a0.text, a2.text);
    /* cache_salt narrows further */
    struct px_reply s0 = ask(&s, "alpha", "tenant-7", 2, false);
    CHECK_EQ_INT(s0.cached, 0);
    struct px_reply s1 = ask(&s, "alpha", "tenant-7", 3, false);
    CHECK_MSG(s1.cached >= 48, "salted again: %d cached", s1.cached);
    struct px_reply s2 = ask(&s, "beta", "tenant-7", 3, false);
    CHECK_EQ_INT(s2.cached, 0);
    /* the counters */
    struct http_reply r;
    CHECK_EQ_INT(http_call(&s, "GET", "/metrics", NULL, NULL, false, 10, &r), 200);
    double q = 0, h = 0;
    CHECK(metrics_value(r.body, "kvik_prefix_cache_queries_total", &q));
    CHECK(metrics_value(r.body, "kvik_prefix_cache_hits_total", &h));
    double want_h = a1.cached + b1.cached + a2.cached + s1.cached;
    double want_q = a0.prompt + a1.prompt + b0.prompt + b1.prompt + a2.prompt + s0.prompt + s1.prompt + s2.prompt;
    CHECK_MSG(h == want_h && q == want_q, "hits %g (want %g), queries %g (want %g)", h, want_h, q, want_q);
    char out[4096];
    int rc = test_promtool_check(r.body, out, sizeof out);
    CHECK_MSG(rc == -1 || rc == 0, "promtool: %s", out);
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}

TEST(serve_prefix_cache_shared_and_off) {
    struct serve_proc s;
    if (!serve_start(&s, "-t 1 -c 512 --api-key alpha,beta --prefix-cache-shared", 120)) return;
    CHECK_EQ_INT(ask(&s, "alpha", NULL, 0, false).cached, 0);
    struct px_reply b = ask(&s, "beta", NULL, 1, false);
    CHECK_MSG(b.cached >= 48, "shared across keys: %d cached", b.cached);
    CHECK_EQ_INT(ask(&s, "beta", "x", 1, false).cached, 0); /* a salt still separates */
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    /* no authentication: one key for everybody */
    if (!serve_start(&s, "-t 1 -c 512", 120)) return;
    CHECK_EQ_INT(ask(&s, NULL, NULL, 0, false).cached, 0);
    CHECK_MSG(ask(&s, NULL, NULL, 1, false).cached >= 48, "no auth: no hit");
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    if (!serve_start(&s, "-t 1 -c 512 --no-prefix-cache", 120)) return;
    struct px_reply o0 = ask(&s, NULL, NULL, 0, false), o1 = ask(&s, NULL, NULL, 0, true);
    CHECK(o0.status == 200 && o0.cached == 0 && o1.cached == 0);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    /* bad key lists */
    char out[256], err[512];
    CHECK_EQ_INT(test_run_kvik("serve --port 0 --api-key a,,b", out, sizeof out, err, sizeof err), 2);
    CHECK_EQ_INT(test_run_kvik("serve --port 0 --api-key a,", out, sizeof out, err, sizeof err), 2);
}
