/*
 * test_bench_serve_sse.c — the load generator's parsers: the SSE stream fed
 * in pieces split at every byte position (and one byte at a time), several
 * events in one piece, comments and keep-alives, the three line ends,
 * data: [DONE], malformed and truncated streams; the OpenAI chunk reader;
 * the Prometheus text reader; the JSONL and ShareGPT dataset readers; and
 * the request bodies.
 */
#include <jansson.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tools/loadgen/loadgen.h"

struct events {
    char text[4096]; /* the events' data, each followed by '|' */
    size_t len;
    int n;
    int stop_after; /* return false from this event on (0: never) */
};

static bool collect(void *ctx, const char *data, size_t len) {
    struct events *e = ctx;
    if (strlen(data) != len) test_fail(__FILE__, __LINE__, "event data is not NUL-terminated at its length");
    if (e->len + len + 1 < sizeof e->text) {
        memcpy(e->text + e->len, data, len);
        e->len += len;
        e->text[e->len++] = '|';
        e->text[e->len] = 0;
    }
    e->n++;
    return !(e->stop_after && e->n >= e->stop_after);
}

/* Feeds s in pieces cut at the given positions (sorted, < strlen(s)). */
static void feed_cut(const char *s, const size_t *cuts, int ncut, struct events *e, struct sse_parser *p) {
    size_t n = strlen(s), at = 0;
    for (int i = 0; i <= ncut; i++) {
        size_t end = i < ncut ? cuts[i] : n;
        sse_feed(p, s + at, end - at, collect, e);
        at = end;
    }
}

static const char k_stream[] =
    ": ping\n"
    "data: {\"a\":1}\n"
    "\n"
    "event: message\r\n"
    "id: 7\r\n"
    "data:{\"b\":2}\r\n"
    "\r\n"
    "data: line one\r"
    "data: line two\r"
    "\r"
    "retry: 100\n"
    ":keep-alive\n"
    "\n"
    "data\n"
    "data:  two spaces\n"
    "\n"
    "data: [DONE]\n"
    "\n";
static const char k_expected[] = "{\"a\":1}|{\"b\":2}|line one\nline two|\n two spaces|[DONE]|";

TEST(bench_serve_sse_split_everywhere) {
    size_t n = strlen(k_stream);
    /* whole, then cut once at every byte position */
    for (size_t cut = 0; cut <= n; cut++) {
        struct sse_parser p;
        sse_init(&p);
        struct events e = {0};
        size_t cuts[1] = {cut};
        feed_cut(k_stream, cuts, cut < n ? 1 : 0, &e, &p);
        CHECK_MSG(!strcmp(e.text, k_expected), "cut at %zu: got \"%s\"", cut, e.text);
        CHECK_EQ_INT(p.n_events, 5);
        CHECK_EQ_INT(p.n_comments, 2);
        CHECK(!sse_pending(&p));
        sse_free(&p);
    }
    /* cut twice at every pair of positions */
    int bad = 0;
    for (size_t a = 1; a < n && bad < 3; a++)
        for (size_t b = a + 1; b < n && bad < 3; b++) {
            struct sse_parser p;
            sse_init(&p);
            struct events e = {0};
            size_t cuts[2] = {a, b};
            feed_cut(k_stream, cuts, 2, &e, &p);
            if (strcmp(e.text, k_expected) != 0) {
                test_fail(__FILE__, __LINE__, "cuts at %zu, %zu: got \"%s\"", a, b, e.text);
                bad++;
            }
            sse_free(&p);
        }
    /* one byte at a time */
    struct sse_parser p;
    sse_init(&p);
    struct events e = {0};
    for (size_t i = 0; i < n; i++) CHECK(sse_feed(&p, k_stream + i, 1, collect, &e));
    CHECK_STR(e.text, k_expected);
    sse_free(&p);
}

TEST(bench_serve_sse_truncated_and_limits) {
    /* a stream cut in the middle of an event: the event is not dispatched, and pending says so */
    struct sse_parser p;
    sse_init(&p);
    struct events e = {0};
    const char *s = "data: {\"a\":1}\n\ndata: {\"b\":";
    CHECK(sse_feed(&p, s, strlen(s), collect, &e));
    CHECK_STR(e.text, "{\"a\":1}|");
    CHECK(sse_pending(&p));
    sse_free(&p);
    /* a data line without its blank line is pending too */
    sse_init(&p);
    memset(&e, 0, sizeof e);
    s = "data: x\n";
    sse_feed(&p, s, strlen(s), collect, &e);
    CHECK_EQ_INT(e.n, 0);
    CHECK(sse_pending(&p));
    sse_free(&p);
    /* a callback that stops the stream stops it for good */
    sse_init(&p);
    memset(&e, 0, sizeof e);
    e.stop_after = 1;
    s = "data: 1\n\ndata: 2\n\n";
    CHECK(!sse_feed(&p, s, strlen(s), collect, &e));
    CHECK_EQ_INT(e.n, 1);
    CHECK(!sse_feed(&p, "data: 3\n\n", 9, collect, &e));
    CHECK_EQ_INT(e.n, 1);
    sse_free(&p);
    /* a line longer than the limit makes the stream malformed, without growing forever */
    sse_init(&p);
    memset(&e, 0, sizeof e);
    size_t big = (size_t)1 << 20;
    char *junk = malloc(big);
    REQUIRE(junk);
    memset(junk, 'x', big);
    bool ok = true;
    for (int i = 0; i < 6 && ok; i++) ok = sse_feed(&p, junk, big, collect, &e);
    CHECK(!ok);
    CHECK(p.failed);
    CHECK(p.line_cap <= SSE_MAX_EVENT + 1);
    free(junk);
    sse_free(&p);
    /* empty data events are not dispatched */
    sse_init(&p);
    memset(&e, 0, sizeof e);
    s = "data:\n\n\n\n";
    sse_feed(&p, s, strlen(s), collect, &e);
    CHECK_EQ_INT(e.n, 0);
    sse_free(&p);
}

TEST(bench_serve_chunk_parse) {
    struct chunk_info ci;
#define PARSE(s) chunk_parse(s, strlen(s), &ci)
    PARSE("[DONE]");
    CHECK(ci.kind == CHUNK_DONE);
    PARSE(" [DONE] \n");
    CHECK(ci.kind == CHUNK_DONE);
    PARSE("{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}");
    CHECK(ci.kind == CHUNK_DATA && ci.content_bytes == 0 && !ci.has_usage);
    PARSE("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}");
    CHECK(ci.kind == CHUNK_DATA && ci.content_bytes == 5);
    CHECK_STR(ci.finish_reason, "");
    PARSE("{\"choices\":[{\"delta\":{\"content\":null,\"reasoning_content\":\"hmm\"}}]}");
    CHECK(ci.kind == CHUNK_DATA && ci.content_bytes == 3);
    PARSE("{\"choices\":[{\"text\":\" world\",\"finish_reason\":\"length\"}]}");
    CHECK(ci.kind == CHUNK_DATA && ci.content_bytes == 6);
    CHECK_STR(ci.finish_reason, "length");
    PARSE("{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34,\"total_tokens\":46}}");
    CHECK(ci.kind == CHUNK_DATA && ci.has_usage && ci.prompt_tokens == 12 && ci.completion_tokens == 34);
    PARSE("{\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}");
    CHECK(ci.kind == CHUNK_DATA && !ci.has_usage && ci.content_bytes == 1);
    PARSE("{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":\"7\"}}");
    CHECK(ci.kind == CHUNK_DATA && ci.has_usage && ci.prompt_tokens == -1 && ci.completion_tokens == -1);
    PARSE("{\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}");
    CHECK(ci.kind == CHUNK_ERROR);
    CHECK_STR(ci.message, "overloaded");
    PARSE("{\"error\":\"plain\"}");
    CHECK(ci.kind == CHUNK_ERROR);
    CHECK_STR(ci.message, "plain");
    /* malformed */
    static const char *const bad[] = {
        "{\"choices\": [{\"delta\": {\"content\": ",
        "not json",
        "",
        "42",
        "[1,2]",
        "\"[DONE]\"",
        "{\"choices\":{}}",
        "{\"choices\":[7]}",
        "{\"choices\":[{\"delta\":\"x\"}]}",
        "{\"choices\":[{\"delta\":{\"content\":5}}]}",
        "{\"choices\":[{\"text\":[]}]}",
        "{\"usage\":3}",
        "{\"a\":1}{\"b\":2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        PARSE(bad[i]);
        CHECK_MSG(ci.kind == CHUNK_MALFORMED, "'%s' read as kind %d", bad[i], (int)ci.kind);
        CHECK(ci.message[0] != 0);
    }
#undef PARSE
}

struct prom_seen {
    int n;
    char names[16][64];
    char labels[16][64];
    double values[16];
};

static void prom_collect(void *ctx, const char *name, size_t name_len, const char *labels, size_t labels_len,
                         double value) {
    struct prom_seen *s = ctx;
    if (s->n >= 16) return;
    snprintf(s->names[s->n], 64, "%.*s", (int)name_len, name);
    snprintf(s->labels[s->n], 64, "%.*s", (int)labels_len, labels);
    s->values[s->n++] = value;
}

TEST(bench_serve_prometheus_text) {
    static const char text[] =
        "# HELP kvik_preemptions_total Sequences preempted.\n"
        "# TYPE kvik_preemptions_total counter\n"
        "kvik_preemptions_total 3\n"
        "kvik_request_queue_time_seconds_bucket{le=\"0.1\"} 4\n"
        "kvik_request_queue_time_seconds_bucket{le=\"+Inf\"} 5\n"
        "kvik_request_queue_time_seconds_sum{model=\"a}b\\\"c\"} 0.25 1700000000000\n"
        "kvik_request_queue_time_seconds_sum{model=\"m2\"} 0.75\r\n"
        "kvik_request_queue_time_seconds_count 5\n"
        "kvik_kv_cache_usage_ratio 4.5e-01\n"
        "weird_inf +Inf\n"
        "weird_nan NaN\n"
        "\n"
        "bad line here\n"
        "bad_value 12abc\n"
        "bad_hex 0x10\n"
        "bad_label{le=\"x} 3\n"
        "9starts_with_digit 1\n"
        "no_value\n"
        "trailing{} 2";
    struct prom_seen s = {0};
    int64_t n = prom_parse(text, strlen(text), prom_collect, &s);
    CHECK_EQ_INT(n, 10);
    CHECK_STR(s.names[0], "kvik_preemptions_total");
    CHECK(s.values[0] == 3);
    CHECK_STR(s.labels[1], "le=\"0.1\"");
    CHECK_STR(s.labels[3], "model=\"a}b\\\"c\"");
    CHECK(s.values[3] == 0.25);
    CHECK(isinf(s.values[7]) && s.values[7] > 0);
    CHECK(isnan(s.values[8]));
    CHECK_STR(s.names[9], "trailing");
    double v;
    CHECK(prom_sum(text, strlen(text), "kvik_request_queue_time_seconds_sum", &v) && v == 1.0);
    CHECK(prom_sum(text, strlen(text), "kvik_kv_cache_usage_ratio", &v) && v == 0.45);
    CHECK(!prom_sum(text, strlen(text), "kvik_missing", &v) && v == 0);
    CHECK(!prom_sum(text, strlen(text), "kvik_preemptions", &v)); /* names match whole */
}

TEST(bench_serve_dataset_jsonl) {
    struct lg_dataset d = {0};
    struct kvik_err err = {0};
    const char *ok = "{\"prompt\": \"hello\", \"output_len\": 12}\n"
                     "\n"
                     "  {\"prompt\": \"x\\ny\", \"system\": \"be brief\"}\r\n"
                     "{\"prompt\": \"\", \"output_len\": 1}";
    REQUIRE(lg_dataset_parse_jsonl(ok, strlen(ok), 64, &d, &err) == KVIK_OK);
    REQUIRE(d.n == 3);
    CHECK_STR(d.items[0].prompt, "hello");
    CHECK_EQ_INT(d.items[0].output_len, 12);
    CHECK(d.items[0].system == NULL);
    CHECK_STR(d.items[1].prompt, "x\ny");
    CHECK_STR(d.items[1].system, "be brief");
    CHECK_EQ_INT(d.items[1].output_len, 64);
    CHECK_EQ_INT(d.items[2].output_len, 1);
    lg_dataset_free(&d);
    static const char *const bad[] = {
        "{\"prompt\": 5}",
        "{\"output_len\": 5}",
        "{\"prompt\": \"a\", \"output_len\": 0}",
        "{\"prompt\": \"a\", \"output_len\": \"3\"}",
        "{\"prompt\": \"a\", \"system\": 1}",
        "{\"prompt\": \"a\"",
        "[\"prompt\"]",
        "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"} junk",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&d, 0, sizeof d);
        CHECK_MSG(lg_dataset_parse_jsonl(bad[i], strlen(bad[i]), 8, &d, &err) == KVIK_ERR_FORMAT, "accepted '%s'",
                  bad[i]);
        CHECK(strstr(err.msg, "line ") != NULL);
        lg_dataset_free(&d);
    }
}

TEST(bench_serve_dataset_sharegpt) {
    /* two usable conversations, one with a too-short prompt, one starting with gpt, then a cut */
    const char *s = "[\n"
                    "{\"id\":\"a\",\"conversations\":[{\"from\":\"human\",\"value\":\"tell me about the sea please\"},"
                    "{\"from\":\"gpt\",\"value\":\"The sea is large and salty and it covers most of the planet.\"}]},\n"
                    "{\"id\":\"b\",\"conversations\":[{\"from\":\"human\",\"value\":\"hi\"},{\"from\":\"gpt\","
                    "\"value\":\"hello there, how can I help you today?\"}]},\n"
                    "{\"id\":\"c\",\"conversations\":[{\"from\":\"gpt\",\"value\":\"I start\"}]},\n"
                    "{\"id\":\"d\",\"conversations\":[{\"from\":\"user\",\"value\":\"what is two plus two, exactly?\"},"
                    "{\"from\":\"assistant\",\"value\":\"Two plus two is four, exactly four.\"}]},\n"
                    "{\"id\":\"e\",\"conversations\":[{\"from\":\"human\",\"value\":\"this one is cut sho";
    struct lg_dataset d = {0};
    struct kvik_err err = {0};
    REQUIRE(lg_dataset_parse_sharegpt(s, strlen(s), NULL, 1024, 0, &d, &err) == KVIK_OK);
    REQUIRE(d.n == 2);
    CHECK_STR(d.items[0].prompt, "tell me about the sea please");
    CHECK_EQ_INT(d.items[0].output_len, (60 + 3) / 4); /* bytes / 4 without a tokenizer */
    CHECK_STR(d.items[1].prompt, "what is two plus two, exactly?");
    lg_dataset_free(&d);
    /* a limit stops early; a cap shortens long replies */
    REQUIRE(lg_dataset_parse_sharegpt(s, strlen(s), NULL, 5, 1, &d, &err) == KVIK_OK);
    CHECK_EQ_INT(d.n, 1);
    CHECK_EQ_INT(d.items[0].output_len, 5);
    lg_dataset_free(&d);
    /* not an array */
    CHECK(lg_dataset_parse_sharegpt("{\"a\":1}", 7, NULL, 0, 0, &d, &err) == KVIK_ERR_FORMAT);
    CHECK(lg_dataset_parse_sharegpt("", 0, NULL, 0, 0, &d, &err) == KVIK_ERR_FORMAT);
    lg_dataset_free(&d);
}

TEST(bench_serve_dataset_random_and_prefix) {
    struct lg_dataset_params p;
    lg_dataset_default_params(&p);
    p.num_prompts = 50;
    p.input_len = 40;
    p.output_len = 20;
    p.range_ratio = 0.5;
    p.seed = 3;
    struct lg_dataset a, b;
    struct kvik_err err = {0};
    REQUIRE(lg_dataset_build(&p, &a, &err) == KVIK_OK);
    REQUIRE(lg_dataset_build(&p, &b, &err) == KVIK_OK);
    REQUIRE(a.n == 50);
    bool same = true, varied = false;
    for (int64_t i = 0; i < a.n; i++) {
        const struct lg_prompt *x = &a.items[i];
        CHECK(x->prompt_tokens >= 20 && x->prompt_tokens <= 60);
        CHECK(x->output_len >= 10 && x->output_len <= 30);
        /* without a tokenizer a word stands for a token */
        int words = 1;
        for (const char *c = x->prompt; *c; c++) words += *c == ' ';
        CHECK_EQ_INT(words, x->prompt_tokens);
        same = same && !strcmp(x->prompt, b.items[i].prompt) && x->output_len == b.items[i].output_len;
        varied = varied || x->prompt_tokens != a.items[0].prompt_tokens;
    }
    CHECK(same);   /* a seed names a workload */
    CHECK(varied); /* the range ratio spreads lengths */
    lg_dataset_free(&a);
    lg_dataset_free(&b);

    p.kind = LG_DATASET_PREFIX;
    p.num_prefixes = 3;
    p.prefix_len = 30;
    p.question_len = 5;
    REQUIRE(lg_dataset_build(&p, &a, &err) == KVIK_OK);
    REQUIRE(a.n == 50);
    int distinct = 0;
    const char *seen[3] = {NULL, NULL, NULL};
    for (int64_t i = 0; i < a.n; i++) {
        REQUIRE(a.items[i].system);
        CHECK_EQ_INT(a.items[i].prompt_tokens, 35);
        CHECK_EQ_INT(a.items[i].output_len, 20);
        int k = 0;
        while (k < distinct && strcmp(seen[k], a.items[i].system) != 0) k++;
        if (k == distinct) {
            REQUIRE(distinct < 3);
            seen[distinct++] = a.items[i].system;
        }
    }
    CHECK_EQ_INT(distinct, 3);
    lg_dataset_free(&a);

    p.kind = LG_DATASET_FILE;
    p.path = "/nonexistent/kvik/prompts.jsonl";
    CHECK(lg_dataset_build(&p, &a, &err) == KVIK_ERR_IO);
}

TEST(bench_serve_dataset_exact_tokens) {
    char buf[512];
    const char *model = test_default_model(buf, sizeof buf);
    if (!model) return;
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    struct kvik_err err = {0};
    REQUIRE(gguf_open(model, &g, &err) == KVIK_OK);
    REQUIRE(tokenizer_load(g, &tok, &err) == KVIK_OK);
    gguf_close(g);
    struct lg_dataset_params p;
    lg_dataset_default_params(&p);
    p.num_prompts = 30;
    p.input_len = 100;
    p.range_ratio = 0.9;
    p.tok = tok;
    struct lg_dataset d;
    REQUIRE(lg_dataset_build(&p, &d, &err) == KVIK_OK);
    CHECK(d.exact_tokens);
    for (int64_t i = 0; i < d.n; i++) {
        int64_t n = tokenizer_encode(tok, d.items[i].prompt, strlen(d.items[i].prompt), false, false, NULL, 0);
        CHECK_EQ_INT(n, d.items[i].prompt_tokens);
        CHECK(n >= 10 && n <= 190);
    }
    lg_dataset_free(&d);
    tokenizer_free(tok);
}

TEST(bench_serve_request_body) {
    struct lg_config c;
    lg_default_config(&c);
    struct lg_prompt p = {.system = "sys", .prompt = "q \"quoted\"", .prompt_tokens = 3, .output_len = 17};
    char *s = lg_request_body(&c, "m1", &p);
    REQUIRE(s);
    json_t *o = json_loads(s, 0, NULL);
    REQUIRE(o);
    CHECK_STR(json_string_value(json_object_get(o, "model")), "m1");
    CHECK(json_integer_value(json_object_get(o, "max_tokens")) == 17);
    CHECK(json_is_true(json_object_get(o, "stream")));
    CHECK(json_is_true(json_object_get(json_object_get(o, "stream_options"), "include_usage")));
    CHECK(json_is_true(json_object_get(o, "ignore_eos")));
    CHECK(json_object_get(o, "temperature") == NULL);
    json_t *msgs = json_object_get(o, "messages");
    CHECK(json_array_size(msgs) == 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(msgs, 0), "role")), "system");
    CHECK_STR(json_string_value(json_object_get(json_array_get(msgs, 1), "content")), "q \"quoted\"");
    json_decref(o);
    free(s);
    c.endpoint = LG_ENDPOINT_COMPLETIONS;
    c.ignore_eos = false;
    c.temperature = 0;
    s = lg_request_body(&c, "", &p);
    o = json_loads(s, 0, NULL);
    REQUIRE(o);
    CHECK(json_object_get(o, "model") == NULL);
    CHECK_STR(json_string_value(json_object_get(o, "prompt")), "sys\n\nq \"quoted\"");
    CHECK(json_object_get(o, "ignore_eos") == NULL);
    CHECK(json_real_value(json_object_get(o, "temperature")) == 0 && json_object_get(o, "temperature"));
    json_decref(o);
    free(s);
}
