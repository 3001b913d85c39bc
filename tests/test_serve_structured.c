/*
 * test_serve_structured.c — grammar-constrained output through `kvik
 * serve`: the project's 20 schemas (tests/data/schemas/schemas.json)
 * through the official OpenAI client with response_format json_schema,
 * every reply parsed and validated by Python's jsonschema
 * (tests/serve/structured_output_test.py), 3 generations a schema on
 * SmolLM2 (60) and 1 on Qwen2.5-Coder-1.5B, with a pydantic parse (the
 * full 200 a model is the same script with --per-schema 10, run by hand:
 * docs/benchmarks.md); and
 * GBNF in "grammar" on chat and completions, streamed and with n > 1, and
 * the errors of a grammar or schema that does not compile.
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "serve_harness.h"
#include "test.h"

static bool quick(void) {
    const char *q = getenv("KVIK_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

/* Runs structured_output_test.py against a server of model (NULL: the
 * default) with per_schema generations a schema. */
static void run_schemas(const char *model, int per_schema, bool pydantic) {
    char root[1024], python[1024], cmd[4400], args[4200];
    if (!test_repo_root(root, sizeof root)) {
        test_skip("KVIK_TEST_DATA does not name ROOT/tests/data");
        return;
    }
    if (!test_venv_python(root, "serve-venv.sh", python, sizeof python)) return;
    if (model) snprintf(args, sizeof args, "-m %s -t 2 -c 4096", model);
    else snprintf(args, sizeof args, "-t 2 -c 4096");
    struct serve_proc s;
    if (!serve_start(&s, args, 180)) return;
    snprintf(cmd, sizeof cmd,
             "'%s' '%s/tests/serve/structured_output_test.py' --base-url http://127.0.0.1:%d/v1 "
             "--schemas '%s/tests/data/schemas/schemas.json' --per-schema %d%s 2>&1",
             python, root, s.port, root, per_schema, pydantic ? " --pydantic" : "");
    static char out[1 << 17];
    int rc = test_run_cmd(cmd, out, sizeof out);
    printf("%s", out);
    CHECK_MSG(rc == 0 && strstr(out, " 0 failed"), "structured_output_test.py failed");
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}

TEST(serve_structured_output_smollm2) { run_schemas(NULL, quick() ? 1 : 3, true); }

TEST(serve_structured_output_qwen_15b) {
    char model[4096];
    if (!test_registry_model("qwen2.5-coder-1.5b", model, sizeof model)) return;
    run_schemas(model, 1, false);
}

/* The message content (chat) or text (completions) of choice i. */
static const char *choice_text(json_t *root, int i) {
    json_t *c = json_array_get(json_object_get(root, "choices"), (size_t)i);
    json_t *m = json_object_get(c, "message");
    return json_string_value(m ? json_object_get(m, "content") : json_object_get(c, "text"));
}

TEST(serve_grammar_gbnf_chat_completions_stream) {
    struct serve_proc s;
    if (!serve_start(&s, "-t 2 -c 1024", 120)) return;
    struct http_reply r;
    /* chat: two choices, each only yes or no */
    CHECK_EQ_INT(http_post(&s, "/v1/chat/completions",
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"Is the sky green?\"}],\"n\":2,"
                           "\"temperature\":1,\"seed\":5,\"max_tokens\":8,\"grammar\":\"root ::= \\\"yes\\\" | \\\"no\\\"\"}",
                           &r),
                 200);
    json_t *root = json_loads(r.body ? r.body : "", 0, NULL);
    for (int i = 0; i < 2; i++) {
        const char *t = choice_text(root, i);
        CHECK_MSG(t && (!strcmp(t, "yes") || !strcmp(t, "no")), "choice %d: %s", i, t ? t : "(null)");
        CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(root, "choices"), (size_t)i),
                                                    "finish_reason")), "stop");
    }
    json_decref(root);
    http_reply_free(&r);
    /* completions: three digits, and the reply ends there */
    CHECK_EQ_INT(http_post(&s, "/v1/completions",
                           "{\"prompt\":\"The year was\",\"max_tokens\":10,\"temperature\":0.9,\"seed\":3,"
                           "\"grammar\":\"root ::= \\\" \\\" [1-9] [0-9]{3}\"}",
                           &r),
                 200);
    root = json_loads(r.body ? r.body : "", 0, NULL);
    const char *t = choice_text(root, 0);
    CHECK_MSG(t && strlen(t) == 5 && t[0] == ' ' && t[1] >= '1' && t[1] <= '9' && strspn(t + 2, "0123456789") == 3,
              "completion '%s'", t ? t : "(null)");
    json_decref(root);
    http_reply_free(&r);
    /* streamed: the deltas add up to JSON of the schema */
    CHECK_EQ_INT(http_post(&s, "/v1/chat/completions",
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"A color as JSON.\"}],\"stream\":true,"
                           "\"max_tokens\":60,\"temperature\":0,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                           "{\"name\":\"c\",\"schema\":{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\","
                           "\"green\",\"blue\"]},\"hex\":{\"type\":\"string\",\"pattern\":\"^#[0-9a-f]{6}$\"}},"
                           "\"required\":[\"color\",\"hex\"],\"additionalProperties\":false}}}}",
                           &r),
                 200);
    struct strbuf all = {0};
    for (const char *p = r.body ? r.body : ""; (p = strstr(p, "data: {"));) {
        p += 6;
        const char *e = strstr(p, "\n\n");
        json_t *ev = json_loadb(p, e ? (size_t)(e - p) : strlen(p), 0, NULL);
        const char *c = json_string_value(
            json_object_get(json_object_get(json_array_get(json_object_get(ev, "choices"), 0), "delta"), "content"));
        if (c) strbuf_puts(&all, c);
        json_decref(ev);
    }
    json_t *doc = json_loads(all.p ? all.p : "", 0, NULL);
    const char *color = json_string_value(json_object_get(doc, "color"));
    const char *hex = json_string_value(json_object_get(doc, "hex"));
    CHECK_MSG(color && hex && strlen(hex) == 7 && hex[0] == '#', "streamed: %s", all.p ? all.p : "");
    json_decref(doc);
    free(all.p);
    http_reply_free(&r);
    /* what does not compile is a 400 that says why */
    CHECK_EQ_INT(http_post(&s, "/v1/chat/completions",
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"grammar\":\"root ::= (\\\"a\\\"\"}", &r),
                 400);
    CHECK_MSG(r.body && strstr(r.body, "line 1") && strstr(r.body, "\"grammar\""), "%s", r.body ? r.body : "");
    http_reply_free(&r);
    CHECK_EQ_INT(http_post(&s, "/v1/chat/completions",
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":"
                           "\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"type\":\"array\",\"uniqueItems\":true}}}}",
                           &r),
                 400);
    CHECK_MSG(r.body && strstr(r.body, "uniqueItems") && strstr(r.body, "unsupported_value"), "%s", r.body ? r.body : "");
    http_reply_free(&r);
    /* clients that hang up mid-stream, their next masks queued or under way: the server serves on */
    static const char hang[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Write a long list as JSON.\"}],\"stream\":true,\"n\":2,"
        "\"max_tokens\":200,\"temperature\":1,\"response_format\":{\"type\":\"json_object\"}}";
    for (int i = 0; i < 3; i++) CHECK(http_post_and_hang_up(&s, "/v1/chat/completions", hang, 300 + 200 * (size_t)i) > 0);
    CHECK_EQ_INT(http_post(&s, "/v1/completions",
                           "{\"prompt\":\"The year was\",\"max_tokens\":10,\"grammar\":\"root ::= \\\" \\\" [1-9] [0-9]{3}\"}",
                           &r),
                 200);
    http_reply_free(&r);
    /* the masks the engine applied, how many came from the worker, and their time */
    CHECK_EQ_INT(http_call(&s, "GET", "/metrics", NULL, NULL, false, 20, &r), 200);
    double masks = -1, ahead = -1, secs = -1;
    CHECK(r.body && metrics_value(r.body, "kvik_grammar_masks_total", &masks) &&
          metrics_value(r.body, "kvik_grammar_masks_ahead_total", &ahead) &&
          metrics_value(r.body, "kvik_grammar_mask_seconds_total", &secs));
    CHECK_MSG(masks >= 20 && ahead >= 1 && ahead <= masks && secs > 0, "masks %g, ahead %g, %g s", masks, ahead, secs);
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}
