/*
 * test_serve_tools.c — tool calling through `kvik serve`: with
 * Qwen2.5-Coder-1.5B (its template asks for Hermes <tool_call> blocks),
 * the official OpenAI client's tool loop and choices
 * (tests/serve/openai_tools_test.py); with the default model, whose
 * template has no tools, a request with tools is a 400 that says so, and
 * tool_choice "none" is served as if there were no tools.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_harness.h"
#include "test.h"

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]";

TEST(serve_tools_openai_client) {
    char root[1024], python[1024] = "", cmd[4096], model[4096], args[4200];
    if (!test_repo_root(root, sizeof root)) {
        test_skip("KVIK_TEST_DATA does not name ROOT/tests/data");
        return;
    }
    if (!test_registry_model("qwen2.5-coder-1.5b", model, sizeof model)) return;
    if (!test_venv_python(root, "serve-venv.sh", python, sizeof python)) return;
    snprintf(args, sizeof args, "-m %s -t 2 -c 4096", model);
    struct serve_proc s;
    if (!serve_start(&s, args, 180)) return;
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/serve/openai_tools_test.py' --base-url http://127.0.0.1:%d/v1 2>&1",
             python, root, s.port);
    static char out[1 << 16];
    int rc = test_run_cmd(cmd, out, sizeof out);
    printf("%s", out);
    CHECK_MSG(rc == 0 && strstr(out, " 0 failed"), "openai_tools_test.py failed");
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}

TEST(serve_tools_refused_by_a_template_without_tools) {
    struct serve_proc s;
    if (!serve_start(&s, "-t 2 -c 1024", 120)) return;
    char body[1024];
    struct http_reply r;
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],\"max_tokens\":4,\"tools\":%s}",
             TOOLS);
    CHECK_EQ_INT(http_post(&s, "/v1/chat/completions", body, &r), 400);
    CHECK_MSG(r.body && strstr(r.body, "model_not_supported") && strstr(r.body, "tools"), "%s", r.body ? r.body : "");
    http_reply_free(&r);
    /* tool_choice none: the tools are not used, the request is served */
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],\"max_tokens\":4,\"tools\":%s,"
             "\"tool_choice\":\"none\",\"temperature\":0}",
             TOOLS);
    CHECK_EQ_INT(http_post(&s, "/v1/chat/completions", body, &r), 200);
    CHECK(r.body && !strstr(r.body, "tool_calls"));
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}
