/*
 * test_toolcall.c — tool calls read from replies (src/server/toolcall.h):
 * the Hermes/Qwen2.5 blocks and Llama 3's JSON, the text before them, the
 * style of real templates (llama.cpp's models/templates), and replies that
 * only look like calls staying text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/toolcall.h"
#include "test.h"

static int parse(enum toolcall_style st, const char *reply, struct toolcall *calls, int max, size_t *content) {
    return toolcall_parse(st, reply, strlen(reply), calls, max, content);
}

TEST(toolcall_hermes_blocks) {
    struct toolcall c[4];
    size_t content;
    const char *r = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                    "\"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                    "{\"tz\": \"Europe/Paris\"}}\n</tool_call>";
    REQUIRE(parse(TOOLCALL_HERMES, r, c, 4, &content) == 2);
    CHECK(content == strlen("Let me check."));
    CHECK_STR(c[0].name, "get_weather");
    CHECK_STR(c[0].arguments, "{\"city\":\"Paris\",\"unit\":\"celsius\"}");
    CHECK_STR(c[1].name, "get_time");
    CHECK_STR(c[1].arguments, "{\"tz\":\"Europe/Paris\"}");
    toolcall_free(c, 2);
    /* the reply cut at the closing tag (the stop came first); arguments as a string */
    r = "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}";
    REQUIRE(parse(TOOLCALL_HERMES, r, c, 4, &content) == 1);
    CHECK(content == 0);
    CHECK_STR(c[0].arguments, "{\"x\":[1,2]}");
    toolcall_free(c, 1);
    /* more calls than room: no calls, all text */
    r = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}"
        "</tool_call>";
    CHECK(parse(TOOLCALL_HERMES, r, c, 1, &content) == 0 && content == strlen(r));
}

TEST(toolcall_text_that_is_not_a_call) {
    static const char *const texts[] = {
        "Just an answer, no tools.",
        "<tool_call>not json</tool_call>",
        "<tool_call>{\"name\": \"f\"}</tool_call>",                          /* no arguments */
        "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",        /* empty name */
        "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",           /* name not a string */
        "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",      /* arguments not an object */
        "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> and then more text",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}",            /* object cut short */
        "<tool_call>",
    };
    struct toolcall c[4];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t content;
        CHECK_MSG(parse(TOOLCALL_HERMES, texts[i], c, 4, &content) == 0, "%s", texts[i]);
        CHECK(content == strlen(texts[i]));
    }
    size_t content;
    CHECK(parse(TOOLCALL_NONE, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", c, 4, &content) == 0);
    CHECK(parse(TOOLCALL_LLAMA3, "The answer is {\"name\": \"f\", \"parameters\": {}}", c, 4, &content) == 0);
    CHECK(parse(TOOLCALL_LLAMA3, "{\"name\": \"f\", \"parameters\": {}} trailing", c, 4, &content) == 0);
}

TEST(toolcall_llama3_json) {
    struct toolcall c[4];
    size_t content;
    REQUIRE(parse(TOOLCALL_LLAMA3, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n", c, 4,
                  &content) == 1);
    CHECK(content == 0);
    CHECK_STR(c[0].name, "get_weather");
    CHECK_STR(c[0].arguments, "{\"city\":\"Paris\"}");
    toolcall_free(c, 1);
    REQUIRE(parse(TOOLCALL_LLAMA3, "<|python_tag|>{\"name\": \"a\", \"arguments\": {\"x\": 1}}; {\"name\": \"b\", "
                  "\"parameters\": {}}", c, 4, &content) == 2);
    CHECK_STR(c[0].name, "a");
    CHECK_STR(c[1].name, "b");
    CHECK_STR(c[1].arguments, "{}");
    toolcall_free(c, 2);
}

TEST(toolcall_style_of_real_templates) {
    static const struct {
        const char *file;
        enum toolcall_style want;
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", TOOLCALL_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", TOOLCALL_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", TOOLCALL_LLAMA3},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", TOOLCALL_LLAMA3},
        {"google-gemma-2-2b-it.jinja", TOOLCALL_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/templates/%s", test_env("KVIK_FIXTURES"), cases[i].file);
        size_t len;
        char *t = test_slurp(path, &len);
        if (!t) {
            test_skip("llama.cpp's templates not fetched (make fixtures)");
            return;
        }
        CHECK_MSG(toolcall_style_of(t) == cases[i].want, "%s: style %d, want %d", cases[i].file,
                  (int)toolcall_style_of(t), (int)cases[i].want);
        free(t);
    }
}

TEST(toolcall_bare_calls_of_declared_functions) {
    static const char TOOLS[] = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}]";
    static const struct {
        const char *reply;
        int want;
        const char *args;
    } cases[] = {
        {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", 1, "{\"city\":\"Paris\"}"},
        {"  \n```json\n{\"name\": \"get_weather\", \"arguments\": {}}\n```\n", 1, "{}"},
        {"```\n{\"name\": \"get_weather\", \"parameters\": {\"a\": [1]}}\n```", 1, "{\"a\":[1]}"},
        {"{\"name\": \"get_time\", \"arguments\": {}}", 0, NULL},           /* not declared */
        {"{\"name\": \"get_weather\", \"arguments\": {}} and more", 0, NULL}, /* not alone */
        {"Here: {\"name\": \"get_weather\", \"arguments\": {}}", 0, NULL},
        {"```json\n{\"name\": \"get_weather\", \"arguments\": {}}", 0, NULL}, /* an open fence */
        {"{\"name\": \"get_weather\"}", 0, NULL},                               /* no arguments */
        {"", 0, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct toolcall c;
        int n = toolcall_parse_bare(cases[k].reply, strlen(cases[k].reply), TOOLS, &c);
        CHECK_MSG(n == cases[k].want, "case %zu: %d", k, n);
        if (n == 1) {
            CHECK_STR(c.name, "get_weather");
            CHECK_STR(c.arguments, cases[k].args);
            toolcall_free(&c, 1);
        }
    }
    struct toolcall c;
    CHECK(toolcall_parse_bare("{\"name\":\"get_weather\",\"arguments\":{}}", 39, NULL, &c) == 0);
}
