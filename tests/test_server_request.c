/*
 * test_server_request.c — the server's request parsing and validation
 * (src/server/request.c): every field's type and range, the limits,
 * OpenAI's error shape, and the prompt preparation with the real default
 * model's tokenizer and chat template.
 */
#include <jansson.h>
#include <stdlib.h>

#include "model/model.h"
#include "server/request.h"
#include "test.h"

static bool parse(enum api_route route, const char *body, struct api_request *r, struct api_error *e) {
    memset(e, 0, sizeof *e);
    return api_parse_request(route, body, strlen(body), API_MAX_BODY_DEFAULT, r, e);
}

/* The body must be rejected with this status, code and param ("" = null). */
static void expect_error(enum api_route route, const char *body, int status, const char *code,
                         const char *param, int line) {
    struct api_request r;
    struct api_error e;
    bool ok = parse(route, body, &r, &e);
    if (ok) {
        test_fail(__FILE__, line, "accepted: %s", body);
        api_request_free(&r);
        return;
    }
    if (e.status != status) test_fail(__FILE__, line, "%s: status %d, want %d (%s)", body, e.status, status, e.message);
    if (code && (!e.code || strcmp(e.code, code) != 0))
        test_fail(__FILE__, line, "%s: code %s, want %s", body, e.code ? e.code : "null", code);
    if (param && strcmp(e.param, param) != 0)
        test_fail(__FILE__, line, "%s: param '%s', want '%s'", body, e.param, param);
    if (!e.message[0]) test_fail(__FILE__, line, "%s: empty message", body);
    api_request_free(&r);
}
#define EXPECT_ERROR(route, body, status, code, param) expect_error(route, body, status, code, param, __LINE__)

#define CHAT API_ROUTE_CHAT
#define COMPL API_ROUTE_COMPLETIONS

TEST(server_request_chat_fields) {
    struct api_request r;
    struct api_error e;
    const char *body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi \"},{\"type\":\"text\",\"text\":\"there\"}]},"
        "{\"role\":\"assistant\",\"content\":null},{\"role\":\"developer\",\"content\":\"x\"}],"
        "\"max_tokens\":7,\"max_completion_tokens\":9,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,"
        "\"min_p\":0.1,\"seed\":-3,\"stop\":[\"a\",\"bc\"],\"presence_penalty\":1.5,\"frequency_penalty\":-0.5,"
        "\"logprobs\":true,\"top_logprobs\":3,\"n\":2,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"user\":\"u1\",\"some_future_field\":{\"x\":[1,2,3]}}";
    REQUIRE(parse(CHAT, body, &r, &e));
    CHECK_STR(r.model, "m");
    CHECK_EQ_INT(r.n_msgs, 4);
    CHECK_STR(r.msgs[0].role, "system");
    CHECK_STR(r.msgs[1].content, "Hi there");
    CHECK_STR(r.msgs[2].role, "assistant");
    CHECK_STR(r.msgs[2].content, "");
    CHECK_STR(r.msgs[3].role, "system"); /* developer is the new name of system */
    CHECK_EQ_INT(r.max_tokens, 9);       /* max_completion_tokens wins */
    CHECK(fabsf(r.sp.temp - 0.5f) < 1e-6f);
    CHECK(fabsf(r.sp.top_p - 0.9f) < 1e-6f);
    CHECK_EQ_INT(r.sp.top_k, 40);
    CHECK(fabsf(r.sp.min_p - 0.1f) < 1e-6f);
    CHECK(r.sp.seed == (uint64_t)-3);
    CHECK_EQ_INT(r.n_stop, 2);
    CHECK_STR(r.stop[1], "bc");
    CHECK(fabsf(r.sp.presence_penalty - 1.5f) < 1e-6f);
    CHECK(fabsf(r.sp.frequency_penalty + 0.5f) < 1e-6f);
    CHECK(r.logprobs);
    CHECK_EQ_INT(r.top_logprobs, 3);
    CHECK_EQ_INT(r.n, 2);
    CHECK(r.stream && r.include_usage);
    CHECK_STR(r.user, "u1");
    api_request_free(&r);
}

TEST(server_request_tools) {
    struct api_request r;
    struct api_error e;
    const char *body =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
        "\"function\":{\"name\":\"w\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
        "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"w\",\"arguments\":\"not json\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"17 C\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"w\",\"parameters\":{\"type\":\"object\"}}}],"
        "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"w\"}},\"parallel_tool_calls\":false}";
    REQUIRE(parse(CHAT, body, &r, &e));
    CHECK_EQ_INT(r.n_msgs, 3);
    CHECK_EQ_INT(r.n_tools, 1);
    CHECK_EQ_INT(r.tool_choice, API_TOOLS_NAMED);
    CHECK_STR(r.tool_name, "w");
    CHECK(!r.parallel_tool_calls);
    CHECK(r.msg_extra[0] == NULL);
    CHECK(r.msgs[1].content == NULL);
    CHECK_STR(r.msgs[2].role, "tool");
    /* arguments that parse become an object for the template; others stay a string */
    CHECK_STR(r.msg_extra[1], "\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"w\",\"arguments\":"
                              "{\"city\":\"Paris\"}},\"id\":\"call_1\"},{\"type\":\"function\",\"function\":"
                              "{\"name\":\"w\",\"arguments\":\"not json\"},\"id\":\"call_2\"}]");
    CHECK_STR(r.msg_extra[2], "\"tool_call_id\":\"call_1\"");
    CHECK(r.tools_json && strstr(r.tools_json, "\"name\":\"w\""));
    api_request_free(&r);
    /* defaults, and the string choices */
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[]}", &r, &e));
    CHECK(r.tools_json == NULL && r.tool_choice == API_TOOLS_AUTO && r.parallel_tool_calls);
    api_request_free(&r);
    static const char *const choices[] = {"auto", "none", "required"};
    for (int k = 0; k < 3; k++) {
        char b[512];
        snprintf(b, sizeof b, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"%s\","
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"w\"}}]}", choices[k]);
        REQUIRE(parse(CHAT, b, &r, &e));
        CHECK_EQ_INT(r.tool_choice, k == 0 ? API_TOOLS_AUTO : k == 1 ? API_TOOLS_NONE : API_TOOLS_REQUIRED);
        api_request_free(&r);
    }
    /* what is refused */
#define MSGS "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
#define TOOL "[{\"type\":\"function\",\"function\":{\"name\":\"w\"}}]"
    EXPECT_ERROR(CHAT, MSGS ",\"tools\":{}}", 400, "invalid_type", "tools");
    EXPECT_ERROR(CHAT, MSGS ",\"tools\":[{\"type\":\"retrieval\"}]}", 400, "invalid_value", "tools[0]");
    EXPECT_ERROR(CHAT, MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]}", 400, "invalid_value", "tools[0]");
    EXPECT_ERROR(CHAT, MSGS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"w\",\"parameters\":[]}}]}", 400,
                 "invalid_value", "tools[0]");
    EXPECT_ERROR(CHAT, MSGS ",\"tools\":" TOOL ",\"tool_choice\":\"maybe\"}", 400, "invalid_value", "tool_choice");
    EXPECT_ERROR(CHAT, MSGS ",\"tools\":" TOOL ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"v\"}}}",
                 400, "invalid_value", "tool_choice");
    EXPECT_ERROR(CHAT, MSGS ",\"tool_choice\":\"required\"}", 400, "invalid_value", "tool_choice");
    EXPECT_ERROR(CHAT, MSGS ",\"tools\":" TOOL ",\"parallel_tool_calls\":1}", 400, "invalid_type", "parallel_tool_calls");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", 400, "missing_required_parameter",
                 "messages[0].tool_call_id");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}", 400, "invalid_value",
                 "messages[0].tool_calls");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[]}]}", 400, "invalid_type",
                 "messages[0].tool_calls");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"w\"}}]}]}", 400,
                 "invalid_value", "messages[0].tool_calls[0]");
    EXPECT_ERROR(COMPL, "{\"prompt\":\"x\",\"tools\":" TOOL "}", 400, "unsupported_parameter", "tools");
#undef MSGS
#undef TOOL
}

TEST(server_request_response_format_and_grammar) {
    struct api_request r;
    struct api_error e;
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"text\"}}", &r, &e));
    CHECK(r.grammar_kind == API_GRAMMAR_NONE && !r.grammar);
    api_request_free(&r);
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}", &r, &e));
    CHECK(r.grammar_kind == API_GRAMMAR_JSON_OBJECT);
    api_request_free(&r);
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
                        "\"json_schema\":{\"name\":\"n\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{}}}}}", &r, &e));
    CHECK(r.grammar_kind == API_GRAMMAR_JSON_SCHEMA);
    CHECK_STR(r.grammar, "{\"type\":\"object\",\"properties\":{}}");
    api_request_free(&r);
    REQUIRE(parse(COMPL, "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\"}", &r, &e));
    CHECK(r.grammar_kind == API_GRAMMAR_GBNF);
    CHECK_STR(r.grammar, "root ::= \"a\"");
    api_request_free(&r);
#define MSGS "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
    EXPECT_ERROR(CHAT, MSGS ",\"response_format\":{\"type\":\"json_schema\"}}", 400, "invalid_type", "response_format.json_schema");
    EXPECT_ERROR(CHAT, MSGS ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":5}}}", 400, "invalid_type",
                 "response_format.json_schema.schema");
    EXPECT_ERROR(CHAT, MSGS ",\"response_format\":{}}", 400, "invalid_type", "response_format.type");
    EXPECT_ERROR(CHAT, MSGS ",\"grammar\":\"\"}", 400, "invalid_type", "grammar");
    EXPECT_ERROR(CHAT, MSGS ",\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":\"json_object\"}}", 400,
                 "invalid_value", "grammar");
#undef MSGS
}

TEST(server_request_defaults_are_openais) {
    struct api_request r;
    struct api_error e;
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, &e));
    CHECK(r.model == NULL);
    CHECK_EQ_INT(r.max_tokens, 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK(!r.stream && !r.logprobs && !r.include_usage);
    CHECK(r.sp.temp == 1.0f && r.sp.top_p == 1.0f && r.sp.top_k == 0 && r.sp.min_p == 0.0f);
    CHECK(r.sp.seed == SAMPLER_SEED_RANDOM);
    CHECK_EQ_INT(r.n_stop, 0);
    api_request_free(&r);
    /* null reads as "not given" */
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":null,\"stop\":null,"
                        "\"max_tokens\":null,\"stream_options\":null}", &r, &e));
    CHECK(r.sp.temp == 1.0f);
    api_request_free(&r);
    /* top_p 0 keeps one token: greedy */
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"top_p\":0}", &r, &e));
    CHECK(r.sp.temp == 0.0f);
    CHECK(sampler_params_validate(&r.sp, NULL) == KVIK_OK);
    api_request_free(&r);
    /* an integral decimal is an integer */
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":16.0,\"stop\":\"x\"}", &r, &e));
    CHECK_EQ_INT(r.max_tokens, 16);
    CHECK_EQ_INT(r.n_stop, 1);
    api_request_free(&r);
}

TEST(server_request_completions_prompt_forms) {
    struct api_request r;
    struct api_error e;
    REQUIRE(parse(COMPL, "{\"prompt\":\"Once upon\",\"logprobs\":2,\"echo\":false}", &r, &e));
    CHECK_STR(r.prompt, "Once upon");
    CHECK_EQ_INT(r.prompt_len, 9);
    CHECK(r.logprobs);
    CHECK_EQ_INT(r.top_logprobs, 2);
    api_request_free(&r);
    REQUIRE(parse(COMPL, "{\"prompt\":[\"single\"]}", &r, &e));
    CHECK_STR(r.prompt, "single");
    api_request_free(&r);
    REQUIRE(parse(COMPL, "{\"prompt\":[1,2,3]}", &r, &e));
    CHECK(r.prompt == NULL);
    CHECK_EQ_INT(r.n_prompt_ids, 3);
    CHECK_EQ_INT(r.prompt_ids[2], 3);
    api_request_free(&r);
    /* a batch: strings, or arrays of ids */
    REQUIRE(parse(COMPL, "{\"prompt\":[\"one\",\"two\",\"three\"]}", &r, &e));
    CHECK_STR(r.prompt, "one");
    REQUIRE(r.n_more == 2);
    CHECK_STR(r.more[0].prompt, "two");
    CHECK_STR(r.more[1].prompt, "three");
    api_request_free(&r);
    REQUIRE(parse(COMPL, "{\"prompt\":[[1,2],[3]]}", &r, &e));
    CHECK_EQ_INT(r.n_prompt_ids, 2);
    REQUIRE(r.n_more == 1);
    CHECK_EQ_INT(r.more[0].n_prompt_ids, 1);
    CHECK_EQ_INT(r.more[0].prompt_ids[0], 3);
    api_request_free(&r);
    REQUIRE(parse(COMPL, "{\"prompt\":[[5,6]],\"echo\":true}", &r, &e));
    CHECK_EQ_INT(r.n_prompt_ids, 2);
    CHECK(r.echo);
    api_request_free(&r);
    /* echo with logprobs (prompt log-probabilities), and max_tokens 0 to score the prompt only */
    REQUIRE(parse(COMPL, "{\"prompt\":\"a b\",\"echo\":true,\"logprobs\":5,\"max_tokens\":0}", &r, &e));
    CHECK(r.echo && r.logprobs && r.score_only);
    CHECK_EQ_INT(r.top_logprobs, 5);
    CHECK_EQ_INT(r.max_tokens, 0);
    api_request_free(&r);
    REQUIRE(parse(COMPL, "{\"prompt\":\"a b\",\"echo\":true,\"logprobs\":0,\"max_tokens\":1}", &r, &e));
    CHECK(r.echo && r.logprobs && !r.score_only);
    api_request_free(&r);
    /* a string with \u escapes, including a pair for one astral character */
    REQUIRE(parse(COMPL, "{\"prompt\":\"caf\\u00e9 \\ud83d\\ude00\"}", &r, &e));
    CHECK_STR(r.prompt, "caf\xc3\xa9 \xf0\x9f\x98\x80");
    api_request_free(&r);
}

TEST(server_request_rejects_malformed_bodies) {
    EXPECT_ERROR(CHAT, "", 400, "invalid_json", "");
    EXPECT_ERROR(CHAT, "{", 400, "invalid_json", "");
    EXPECT_ERROR(CHAT, "{\"messages\":[}", 400, "invalid_json", "");
    EXPECT_ERROR(CHAT, "{\"messages\":[]} trailing", 400, "invalid_json", "");
    EXPECT_ERROR(CHAT, "[1,2]", 400, "invalid_type", "");
    EXPECT_ERROR(CHAT, "\"text\"", 400, NULL, "");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400, "invalid_utf8", "");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\"}]}", 400, "invalid_utf8", "");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}", 400, "invalid_json", "");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", 400, "invalid_json", "");
    EXPECT_ERROR(CHAT, "{\"max_tokens\":99999999999999999999999}", 400, "invalid_json", "");
    /* nesting far deeper than the parser allows */
    char deep[6000];
    size_t k = 0;
    k += (size_t)sprintf(deep, "{\"x\":");
    for (int i = 0; i < 2500; i++) deep[k++] = '[';
    for (int i = 0; i < 2500; i++) deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = 0;
    EXPECT_ERROR(CHAT, deep, 400, "invalid_json", "");
}

TEST(server_request_rejects_wrong_types) {
    EXPECT_ERROR(CHAT, "{}", 400, "missing_required_parameter", "messages");
    EXPECT_ERROR(CHAT, "{\"messages\":\"hi\"}", 400, "invalid_type", "messages");
    EXPECT_ERROR(CHAT, "{\"messages\":[]}", 400, "empty_array", "messages");
    EXPECT_ERROR(CHAT, "{\"messages\":[1]}", 400, "invalid_type", "messages[0]");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"content\":\"x\"}]}", 400, "missing_required_parameter", "messages[0].role");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":7,\"content\":\"x\"}]}", 400, "invalid_type", "messages[0].role");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "invalid_value", "messages[0].role");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", 400, "invalid_value", "messages[0].role");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\"}]}", 400, "missing_required_parameter", "messages[0].content");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "invalid_type", "messages[0].content");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}",
                 400, "unsupported_content", "messages[0].content[0]");
    EXPECT_ERROR(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", 400,
                 "missing_required_parameter", "messages[0].content[0].text");
    const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char body[512];
#define FIELD_ERROR(field, code, param)                                         \
    do {                                                                        \
        snprintf(body, sizeof body, "{%s,%s}", m, field);                       \
        EXPECT_ERROR(CHAT, body, 400, code, param);                             \
    } while (0)
    FIELD_ERROR("\"model\":5", "invalid_type", "model");
    FIELD_ERROR("\"temperature\":\"hot\"", "invalid_type", "temperature");
    FIELD_ERROR("\"temperature\":true", "invalid_type", "temperature");
    FIELD_ERROR("\"max_tokens\":1.5", "invalid_type", "max_tokens");
    FIELD_ERROR("\"max_tokens\":\"10\"", "invalid_type", "max_tokens");
    FIELD_ERROR("\"n\":[1]", "invalid_type", "n");
    FIELD_ERROR("\"stream\":1", "invalid_type", "stream");
    FIELD_ERROR("\"stream\":true,\"stream_options\":[]", "invalid_type", "stream_options");
    FIELD_ERROR("\"stream\":true,\"stream_options\":{\"include_usage\":\"yes\"}", "invalid_type", "stream_options.include_usage");
    FIELD_ERROR("\"stop\":5", "invalid_type", "stop");
    FIELD_ERROR("\"stop\":[\"a\",5]", "invalid_type", "stop[1]");
    FIELD_ERROR("\"logprobs\":3", "invalid_type", "logprobs");
    FIELD_ERROR("\"seed\":\"1\"", "invalid_type", "seed");
    FIELD_ERROR("\"user\":{}", "invalid_type", "user");
}

TEST(server_request_rejects_out_of_range_values) {
    const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char body[8192];
    FIELD_ERROR("\"temperature\":2.5", "decimal_above_max_value", "temperature");
    FIELD_ERROR("\"temperature\":-0.1", "decimal_below_min_value", "temperature");
    FIELD_ERROR("\"top_p\":1.1", "decimal_above_max_value", "top_p");
    FIELD_ERROR("\"min_p\":-1", "decimal_below_min_value", "min_p");
    FIELD_ERROR("\"top_k\":-2", "integer_below_min_value", "top_k");
    FIELD_ERROR("\"presence_penalty\":3", "decimal_above_max_value", "presence_penalty");
    FIELD_ERROR("\"frequency_penalty\":-2.5", "decimal_below_min_value", "frequency_penalty");
    FIELD_ERROR("\"max_tokens\":0", "integer_below_min_value", "max_tokens");
    FIELD_ERROR("\"max_tokens\":-5", "integer_below_min_value", "max_tokens");
    FIELD_ERROR("\"max_completion_tokens\":0", "integer_below_min_value", "max_completion_tokens");
    FIELD_ERROR("\"n\":0", "integer_below_min_value", "n");
    FIELD_ERROR("\"n\":17", "integer_above_max_value", "n");
    FIELD_ERROR("\"logprobs\":true,\"top_logprobs\":21", "integer_above_max_value", "top_logprobs");
    FIELD_ERROR("\"top_logprobs\":2", "invalid_value", "top_logprobs"); /* without logprobs */
    FIELD_ERROR("\"stream_options\":{\"include_usage\":true}", "invalid_value", "stream_options");
    FIELD_ERROR("\"stop\":\"\"", "invalid_value", "stop");
    FIELD_ERROR("\"stop\":[\"ok\",\"\"]", "invalid_value", "stop[1]");
    FIELD_ERROR("\"tools\":[{\"type\":\"function\"}]", "invalid_value", "tools[0]");
    FIELD_ERROR("\"logit_bias\":{\"5\":10}", "unsupported_parameter", "logit_bias");
    FIELD_ERROR("\"response_format\":{\"type\":\"xml\"}", "invalid_value", "response_format.type");
    /* a very long stop string */
    char stop[600];
    memset(stop, 'x', 300);
    stop[300] = 0;
    char field[700];
    snprintf(field, sizeof field, "\"stop\":\"%s\"", stop);
    FIELD_ERROR(field, "invalid_value", "stop");
    /* completions: logprobs is a count */
    EXPECT_ERROR(COMPL, "{\"prompt\":\"x\",\"logprobs\":true}", 400, "invalid_type", "logprobs");
    EXPECT_ERROR(COMPL, "{\"prompt\":\"x\",\"logprobs\":21}", 400, "integer_above_max_value", "logprobs");
    /* max_tokens 0 only scores an echoed prompt */
    EXPECT_ERROR(COMPL, "{\"prompt\":\"x\",\"max_tokens\":0}", 400, "invalid_value", "max_tokens");
    EXPECT_ERROR(COMPL, "{\"prompt\":\"x\",\"max_tokens\":-1,\"echo\":true}", 400, "integer_below_min_value", "max_tokens");
    EXPECT_ERROR(COMPL, "{\"prompt\":\"x\",\"logprobs\":-1,\"echo\":true}", 400, "integer_below_min_value", "logprobs");
    EXPECT_ERROR(COMPL, "{\"prompt\":\"x\",\"suffix\":\"y\"}", 400, "unsupported_parameter", "suffix");
    EXPECT_ERROR(COMPL, "{\"prompt\":\"x\",\"best_of\":3}", 400, "unsupported_parameter", "best_of");
    EXPECT_ERROR(COMPL, "{}", 400, "missing_required_parameter", "prompt");
    EXPECT_ERROR(COMPL, "{\"prompt\":[]}", 400, "empty_array", "prompt");
    EXPECT_ERROR(COMPL, "{\"prompt\":[\"a\",\"b\"],\"stream\":true}", 400, "unsupported_value", "stream");
    EXPECT_ERROR(COMPL, "{\"prompt\":[\"a\",[1,2]]}", 400, "invalid_type", "prompt[1]");
    EXPECT_ERROR(COMPL, "{\"prompt\":[[1],\"b\"]}", 400, "invalid_type", "prompt[1]");
    EXPECT_ERROR(COMPL, "{\"prompt\":[[1],[2,-1]]}", 400, "integer_below_min_value", "prompt[1][1]");
    EXPECT_ERROR(COMPL, "{\"prompt\":[1,-2]}", 400, "integer_below_min_value", "prompt[1]");
    EXPECT_ERROR(COMPL, "{\"prompt\":[1,\"x\"]}", 400, "invalid_type", "prompt[1]");
    EXPECT_ERROR(COMPL, "{\"prompt\":[1,3000000000]}", 400, "integer_above_max_value", "prompt[1]");
    EXPECT_ERROR(COMPL, "{\"prompt\":{\"a\":1}}", 400, "invalid_type", "prompt");
}

TEST(server_request_limits) {
    /* thousands of stop strings */
    size_t cap = 64 + 5000 * 6;
    char *body = malloc(cap);
    REQUIRE(body);
    size_t k = (size_t)snprintf(body, cap, "{\"prompt\":\"x\",\"stop\":[");
    for (int i = 0; i < 5000; i++) k += (size_t)snprintf(body + k, cap - k, "%s\"s%d\"", i ? "," : "", i % 100);
    snprintf(body + k, cap - k, "]}");
    EXPECT_ERROR(COMPL, body, 400, "array_above_max_length", "stop");
    free(body);
    /* a body over the limit */
    struct api_request r;
    struct api_error e;
    const char *small = "{\"prompt\":\"0123456789\"}";
    CHECK(!api_parse_request(COMPL, small, strlen(small), 10, &r, &e));
    CHECK_EQ_INT(e.status, 413);
    CHECK_STR(e.code, "request_too_large");
    /* too many messages */
    cap = 64 + 5000 * 40;
    body = malloc(cap);
    REQUIRE(body);
    k = (size_t)snprintf(body, cap, "{\"messages\":[");
    for (int i = 0; i < 5000; i++)
        k += (size_t)snprintf(body + k, cap - k, "%s{\"role\":\"user\",\"content\":\"x\"}", i ? "," : "");
    snprintf(body + k, cap - k, "]}");
    EXPECT_ERROR(CHAT, body, 400, "array_above_max_length", "messages");
    free(body);
}

TEST(server_request_error_json_shape) {
    struct api_error e;
    api_fail(&e, 400, "invalid_request_error", "invalid_type", "temperature", "Invalid \"quoted\" %s", "caf\xc3\xa9");
    char *s = api_error_json(&e);
    REQUIRE(s);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    REQUIRE(root);
    json_t *err = json_object_get(root, "error");
    REQUIRE(json_is_object(err));
    CHECK_EQ_INT(json_object_size(root), 1);
    CHECK_EQ_INT(json_object_size(err), 4);
    CHECK_STR(json_string_value(json_object_get(err, "message")), "Invalid \"quoted\" caf\xc3\xa9");
    CHECK_STR(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    CHECK_STR(json_string_value(json_object_get(err, "param")), "temperature");
    CHECK_STR(json_string_value(json_object_get(err, "code")), "invalid_type");
    json_decref(root);
    free(s);
    /* no param and no code: JSON nulls */
    api_fail(&e, 500, "server_error", NULL, NULL, "x");
    s = api_error_json(&e);
    REQUIRE(s);
    CHECK(strstr(s, "\"param\":null") && strstr(s, "\"code\":null"));
    free(s);
    /* a message cut by the buffer inside a UTF-8 character stays valid */
    char big[600];
    memset(big, 'a', sizeof big);
    memcpy(big + 508, "\xe2\x82\xac\xe2\x82\xac", 6);
    big[514] = 0;
    api_fail(&e, 400, "invalid_request_error", NULL, NULL, "%s", big);
    size_t n = strlen(e.message);
    for (size_t i = 0; i < n;) {
        size_t q = utf8_valid_seq((const uint8_t *)e.message + i, n - i);
        REQUIRE(q > 0);
        i += q;
    }
}

TEST(server_request_utf8_sanitize) {
    size_t n;
    char *s = api_utf8_sanitize("a\xff" "b\xe2\x82", 5, &n);
    REQUIRE(s);
    CHECK_STR(s, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd");
    CHECK_EQ_INT(n, 11);
    free(s);
    s = api_utf8_sanitize("\xf0\x9f\x98\x80", 4, &n);
    CHECK_STR(s, "\xf0\x9f\x98\x80");
    free(s);
}

TEST(server_request_tokenize_bodies) {
    struct api_tokenize t;
    struct api_detokenize d;
    struct api_error e;
    const char *b1 = "{\"content\":\"hello\",\"add_special\":false}";
    REQUIRE(api_parse_tokenize(b1, strlen(b1), 1 << 20, &t, &e));
    CHECK_STR(t.text, "hello");
    CHECK(!t.add_special && t.parse_special);
    api_tokenize_free(&t);
    const char *b2 = "{\"prompt\":\"x\"}";
    REQUIRE(api_parse_tokenize(b2, strlen(b2), 1 << 20, &t, &e));
    CHECK_STR(t.text, "x");
    CHECK(t.add_special && t.parse_special); /* the documented defaults */
    api_tokenize_free(&t);
    const char *b2p = "{\"content\":\"x\",\"parse_special\":false}";
    REQUIRE(api_parse_tokenize(b2p, strlen(b2p), 1 << 20, &t, &e));
    CHECK(t.add_special && !t.parse_special);
    api_tokenize_free(&t);
    const char *b3 = "{\"content\":1}";
    CHECK(!api_parse_tokenize(b3, strlen(b3), 1 << 20, &t, &e));
    CHECK_EQ_INT(e.status, 400);
    const char *b4 = "{\"tokens\":[1,2,49151]}";
    REQUIRE(api_parse_detokenize(b4, strlen(b4), 1 << 20, &d, &e));
    CHECK_EQ_INT(d.n, 3);
    CHECK_EQ_INT(d.ids[2], 49151);
    api_detokenize_free(&d);
    const char *b5 = "{\"tokens\":[1,-1]}";
    CHECK(!api_parse_detokenize(b5, strlen(b5), 1 << 20, &d, &e));
    CHECK_STR(e.param, "tokens[1]");
    const char *b6 = "{\"tokens\":\"1 2\"}";
    CHECK(!api_parse_detokenize(b6, strlen(b6), 1 << 20, &d, &e));
    CHECK_STR(e.code, "invalid_type");
}

/* ---- prepare: with the default model's tokenizer and template --------- */

struct loaded {
    struct model *m;
    struct tokenizer *tok;
    struct chat_format fmt;
};

static bool load_default(struct loaded *L) {
    char path[1024];
    memset(L, 0, sizeof *L);
    if (!test_default_model(path, sizeof path)) return false;
    struct kvik_err err = {0};
    if (model_load(path, &L->m, &err) || tokenizer_load(L->m->file, &L->tok, &err)) {
        test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return false;
    }
    struct gguf_str t;
    if (gguf_get_str(L->m->file, "tokenizer.chat_template", &t, NULL)) return false;
    char *text = strndup(t.ptr, t.len);
    bool ok = text && chat_detect(text, &L->fmt, &err) == KVIK_OK;
    free(text);
    return ok;
}

static void unload(struct loaded *L) {
    chat_format_free(&L->fmt);
    tokenizer_free(L->tok);
    model_free(L->m);
}

TEST(server_request_prepare_with_default_model) {
    struct loaded L;
    if (!load_default(&L)) {
        unload(&L);
        return;
    }
    struct api_request r;
    struct api_error e;
    struct api_prompt p;
    REQUIRE(parse(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"max_tokens\":8}", &r, &e));
    REQUIRE(api_prepare(&r, L.tok, &L.fmt, 2048, &p, &e));
    CHECK(p.n > 10);
    CHECK_EQ_INT(p.max_tokens, 8);
    /* the template's markers are special tokens, not their text */
    int32_t im_start = tokenizer_find(L.tok, "<|im_start|>", 12);
    REQUIRE(im_start >= 0);
    CHECK_EQ_INT(p.ids[0], im_start);
    api_prompt_free(&p);
    /* no max_tokens: the rest of the context */
    r.max_tokens = 0;
    REQUIRE(api_prepare(&r, L.tok, &L.fmt, 2048, &p, &e));
    CHECK_EQ_INT(p.max_tokens, 2048 - p.n);
    int n_prompt = p.n;
    api_prompt_free(&p);
    /* over the context: 400 context_length_exceeded, also when only max_tokens overflows */
    CHECK(!api_prepare(&r, L.tok, &L.fmt, n_prompt, &p, &e));
    CHECK_EQ_INT(e.status, 400);
    CHECK_STR(e.code, "context_length_exceeded");
    r.max_tokens = 100;
    CHECK(!api_prepare(&r, L.tok, &L.fmt, n_prompt + 99, &p, &e));
    CHECK_STR(e.code, "context_length_exceeded");
    CHECK(strstr(e.message, "maximum context length") != NULL);
    CHECK(api_prepare(&r, L.tok, &L.fmt, n_prompt + 100, &p, &e));
    api_prompt_free(&p);
    /* no template: 400 */
    CHECK(!api_prepare(&r, L.tok, NULL, 2048, &p, &e));
    CHECK_EQ_INT(e.status, 400);
    api_request_free(&r);

    /* completions: special-token text in a prompt stays text */
    REQUIRE(parse(COMPL, "{\"prompt\":\"<|im_start|>\"}", &r, &e));
    REQUIRE(api_prepare(&r, L.tok, NULL, 2048, &p, &e));
    CHECK(p.n > 1);
    for (int i = 0; i < p.n; i++) CHECK(p.ids[i] != im_start);
    api_prompt_free(&p);
    api_request_free(&r);
    /* ids: checked against the vocabulary */
    REQUIRE(parse(COMPL, "{\"prompt\":[1,2,99999999]}", &r, &e));
    CHECK(!api_prepare(&r, L.tok, NULL, 2048, &p, &e));
    CHECK_STR(e.param, "prompt");
    api_request_free(&r);
    REQUIRE(parse(COMPL, "{\"prompt\":[1,2,3]}", &r, &e));
    REQUIRE(api_prepare(&r, L.tok, NULL, 2048, &p, &e));
    CHECK_EQ_INT(p.n, 3);
    api_prompt_free(&p);
    api_request_free(&r);
    /* an empty prompt encodes to nothing (no BOS in this vocabulary) */
    REQUIRE(parse(COMPL, "{\"prompt\":\"\"}", &r, &e));
    CHECK(!api_prepare(&r, L.tok, NULL, 2048, &p, &e));
    CHECK_EQ_INT(e.status, 400);
    api_request_free(&r);
    unload(&L);
}
