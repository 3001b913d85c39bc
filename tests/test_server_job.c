/*
 * test_server_job.c — stop strings with hold-back (src/server/stop.c), the
 * per-request job that turns engine events into text (job.c) with the
 * default model's tokenizer, and the OpenAI shapes of whole responses and
 * SSE chunks built from it (response.c).
 */
#include <jansson.h>
#include <stdlib.h>

#include "model/model.h"
#include "server/job.h"
#include "server/response.h"
#include "server/stop.h"
#include "test.h"

static struct stop_scan_result scan(const char *const *stops, int n, const char *text, size_t old) {
    size_t lens[8];
    for (int i = 0; i < n; i++) lens[i] = strlen(stops[i]);
    struct stop_set set = {stops, lens, n};
    return stop_scan(&set, text, strlen(text), old);
}

TEST(server_stop_scan_basics) {
    const char *s1[] = {"world"};
    struct stop_scan_result r = scan(s1, 1, "hello wo", 0);
    CHECK(!r.matched);
    CHECK_EQ_INT(r.safe, 6); /* "wo" may start "world" */
    r = scan(s1, 1, "hello world!", 8);
    CHECK(r.matched);
    CHECK_EQ_INT(r.cut, 6);
    r = scan(s1, 1, "hello there", 0);
    CHECK(!r.matched);
    CHECK_EQ_INT(r.safe, 11);
    /* the earliest match wins, whichever stop it is */
    const char *s2[] = {"cd", "bcx", "b"};
    r = scan(s2, 3, "abcde", 0);
    CHECK(r.matched);
    CHECK_EQ_INT(r.cut, 1);
    const char *s3[] = {"cd", "abc"};
    r = scan(s3, 2, "xabcd", 0);
    CHECK(r.matched);
    CHECK_EQ_INT(r.cut, 1);
    /* a match that ended inside the scanned part is not looked for again */
    const char *s4[] = {"ab"};
    r = scan(s4, 1, "zzzz", 4);
    CHECK(!r.matched);
    /* a stop across the old/new boundary */
    r = scan(s4, 1, "xxa" "b", 3);
    CHECK(r.matched);
    CHECK_EQ_INT(r.cut, 2);
    /* multi-byte: hold back a partial character-aligned prefix */
    const char *s5[] = {"\xc3\xa9t\xc3\xa9"};
    r = scan(s5, 1, "un \xc3\xa9t", 0);
    CHECK(!r.matched);
    CHECK_EQ_INT(r.safe, 3);
}

/* Pieces fed one by one give the same text as cutting the whole text at
 * its first match, and what is sent never shrinks. */
TEST(server_stop_scan_random_against_brute_force) {
    uint64_t rng = 12345;
    for (int iter = 0; iter < 3000; iter++) {
        char text[64], stops_buf[4][6];
        const char *stops[4];
        size_t lens[4];
        int n_stop = 1 + (int)(test_rand_u64(&rng) % 3);
        for (int k = 0; k < n_stop; k++) {
            int len = 1 + (int)(test_rand_u64(&rng) % 4);
            for (int i = 0; i < len; i++) stops_buf[k][i] = (char)('a' + test_rand_u64(&rng) % 3);
            stops_buf[k][len] = 0;
            stops[k] = stops_buf[k];
            lens[k] = (size_t)len;
        }
        int tl = (int)(test_rand_u64(&rng) % 40);
        for (int i = 0; i < tl; i++) text[i] = (char)('a' + test_rand_u64(&rng) % 3);
        text[tl] = 0;
        /* brute force after each piece: the earliest stop wholly inside the
         * text so far (generation stops at the first piece that completes one) */
        struct stop_set set = {stops, lens, n_stop};
        size_t len = 0, safe = 0;
        bool matched = false;
        while (len < (size_t)tl && !matched) {
            size_t step = 1 + test_rand_u64(&rng) % 5, old = len;
            len = len + step > (size_t)tl ? (size_t)tl : len + step;
            size_t want = len;
            bool want_match = false;
            for (size_t i = 0; i < len && !want_match; i++)
                for (int k = 0; k < n_stop; k++)
                    if (len - i >= lens[k] && !memcmp(text + i, stops[k], lens[k])) {
                        want = i;
                        want_match = true;
                        break;
                    }
            struct stop_scan_result r = stop_scan(&set, text, len, old);
            CHECK_EQ_INT(r.matched, want_match);
            if (r.matched) {
                matched = true;
                CHECK_EQ_INT(r.cut, want);
                CHECK(safe <= r.cut);
            } else {
                CHECK_MSG(r.safe >= safe, "safe went back: %zu < %zu", r.safe, safe);
                /* what is held back is the start of some stop string */
                bool prefix = r.safe == len;
                for (int k = 0; k < n_stop && !prefix; k++)
                    prefix = len - r.safe < lens[k] && !memcmp(text + r.safe, stops[k], len - r.safe);
                CHECK(prefix);
                safe = r.safe;
            }
            if (test_failed()) break;
        }
        if (test_failed()) {
            test_fail(__FILE__, __LINE__, "text '%s' stops %d: '%s' '%s' '%s'", text, n_stop, stops[0], n_stop > 1 ? stops[1] : "", n_stop > 2 ? stops[2] : "");
            return;
        }
    }
}

/* ---- jobs over the real tokenizer ----------------------------------------- */

static struct tokenizer *load_tok(struct model **m) {
    char path[1024];
    *m = NULL;
    if (!test_default_model(path, sizeof path)) return NULL;
    struct kvik_err err = {0};
    struct tokenizer *tok = NULL;
    if (model_load(path, m, &err) || tokenizer_load((*m)->file, &tok, &err)) {
        test_fail(__FILE__, __LINE__, "load: %s", err.msg);
        return NULL;
    }
    return tok;
}

/* Feeds text's tokens to choice c as the engine would; returns how many
 * were accepted before the callback said stop. */
static int feed(struct job *j, int c, struct tokenizer *tok, const char *text, bool finish,
                enum engine_finish why) {
    int32_t ids[256];
    int64_t n = tokenizer_encode(tok, text, strlen(text), false, false, ids, 256);
    int used = 0;
    for (int64_t i = 0; i < n; i++) {
        struct engine_event ev = {.choice = c, .finish = ENGINE_FINISH_NONE, .token = ids[i], .logprob = -0.5f,
                                  .n_top = 2, .top_ids = {ids[i], 0}, .top_logprobs = {-0.5f, -3.0f}};
        used++;
        if (!job_on_event(j, &ev)) {
            why = ENGINE_FINISH_STOP;
            finish = true;
            break;
        }
    }
    if (finish) {
        struct engine_event ev = {.choice = c, .finish = why, .n_prompt = 5, .n_generated = used};
        job_on_event(j, &ev);
    }
    return used;
}

TEST(server_job_text_stop_and_logprobs) {
    struct model *m;
    struct tokenizer *tok = load_tok(&m);
    if (!tok) {
        model_free(m);
        return;
    }
    char *stops[] = {"STOP", "\n\n"};
    struct job *j = job_new(tok, 2, true, stops, 2, false);
    REQUIRE(j);
    /* choice 0 meets a stop string; choice 1 runs to its length limit */
    int used = feed(j, 0, tok, "The answer is 42. STOP and more text", false, ENGINE_FINISH_NONE);
    feed(j, 1, tok, "Plain text, no stop.", true, ENGINE_FINISH_LENGTH);
    pthread_mutex_lock(&j->mu);
    CHECK(j->ch[0].done && j->ch[0].stop_matched);
    CHECK_EQ_INT(j->ch[0].finish, ENGINE_FINISH_STOP);
    CHECK_EQ_INT(j->ch[0].len, strlen("The answer is 42. "));
    CHECK(!memcmp(j->ch[0].text, "The answer is 42. ", j->ch[0].len));
    CHECK(used < 12); /* the callback said stop at the token that completed "STOP" */
    /* every reported token starts before the cut */
    CHECK(j->ch[0].toks_final > 0);
    for (int i = 0; i < j->ch[0].toks_final; i++) CHECK(j->ch[0].toks[i].start < j->ch[0].len);
    CHECK(j->ch[1].done);
    CHECK_EQ_INT(j->ch[1].finish, ENGINE_FINISH_LENGTH);
    CHECK_EQ_INT(j->ch[1].len, strlen("Plain text, no stop."));
    CHECK_EQ_INT(j->n_done, 2);
    pthread_mutex_unlock(&j->mu);

    /* the whole chat response */
    struct resp_ctx rc = {0};
    resp_ctx_init(&rc, API_ROUTE_CHAT, "smol");
    rc.top_logprobs = 2;
    rc.n_prompt = 5;
    pthread_mutex_lock(&j->mu);
    char *body = resp_full(&rc, j);
    pthread_mutex_unlock(&j->mu);
    REQUIRE(body);
    json_error_t je;
    json_t *root = json_loads(body, 0, &je);
    REQUIRE(root);
    CHECK_STR(json_string_value(json_object_get(root, "object")), "chat.completion");
    CHECK(!strncmp(json_string_value(json_object_get(root, "id")), "chatcmpl-", 9));
    CHECK_STR(json_string_value(json_object_get(root, "model")), "smol");
    json_t *choices = json_object_get(root, "choices");
    REQUIRE(json_array_size(choices) == 2);
    json_t *c0 = json_array_get(choices, 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(c0, "message"), "content")), "The answer is 42. ");
    CHECK_STR(json_string_value(json_object_get(json_object_get(c0, "message"), "role")), "assistant");
    CHECK_STR(json_string_value(json_object_get(c0, "finish_reason")), "stop");
    CHECK_STR(json_string_value(json_object_get(json_array_get(choices, 1), "finish_reason")), "length");
    json_t *content = json_object_get(json_object_get(c0, "logprobs"), "content");
    REQUIRE(json_is_array(content));
    CHECK_EQ_INT(json_array_size(content), j->ch[0].toks_final);
    json_t *t0 = json_array_get(content, 0);
    CHECK_STR(json_string_value(json_object_get(t0, "token")), "The");
    CHECK(fabs(json_real_value(json_object_get(t0, "logprob")) + 0.5) < 1e-6);
    CHECK_EQ_INT(json_array_size(json_object_get(t0, "bytes")), 3);
    CHECK_EQ_INT(json_array_size(json_object_get(t0, "top_logprobs")), 2);
    json_t *usage = json_object_get(root, "usage");
    CHECK_EQ_INT(json_integer_value(json_object_get(usage, "prompt_tokens")), 5);
    CHECK_EQ_INT(json_integer_value(json_object_get(usage, "total_tokens")),
                 5 + json_integer_value(json_object_get(usage, "completion_tokens")));
    json_decref(root);
    free(body);
    job_release(j); /* the engine's reference went with the last final event */
    tokenizer_free(tok);
    model_free(m);
}

/* Split SSE text into its JSON payloads; returns how many, [DONE] excluded;
 * *done when the last event is [DONE]. */
static int sse_events(const char *s, json_t **out, int max, bool *done) {
    int n = 0;
    *done = false;
    while ((s = strstr(s, "data: ")) != NULL) {
        s += 6;
        const char *end = strstr(s, "\n\n");
        if (!end) break;
        if (!strncmp(s, "[DONE]", 6)) {
            *done = true;
        } else if (n < max) {
            json_error_t je;
            out[n] = json_loadb(s, (size_t)(end - s), 0, &je);
            if (!out[n]) test_fail(__FILE__, __LINE__, "bad chunk: %.*s", (int)(end - s), s);
            n++;
        }
        s = end + 2;
    }
    return n;
}

TEST(server_job_stream_chunks_hold_back_stop_prefixes) {
    struct model *m;
    struct tokenizer *tok = load_tok(&m);
    if (!tok) {
        model_free(m);
        return;
    }
    char *stops[] = {"<END>"};
    struct job *j = job_new(tok, 1, false, stops, 1, false);
    REQUIRE(j);
    struct resp_ctx rc = {0};
    resp_ctx_init(&rc, API_ROUTE_CHAT, "smol");
    rc.include_usage = true;
    struct sbuf out = {0};
    /* feed token by token, streaming after each; the text "<EN" must not be
     * sent before the stop completes */
    int32_t ids[64];
    const char *text = "Hi <EN there <END> hidden";
    int64_t n = tokenizer_encode(tok, text, strlen(text), false, false, ids, 64);
    bool stopped = false;
    for (int64_t i = 0; i < n && !stopped; i++) {
        struct engine_event ev = {.choice = 0, .token = ids[i]};
        stopped = !job_on_event(j, &ev);
        pthread_mutex_lock(&j->mu);
        resp_stream_step(&rc, j, &out);
        pthread_mutex_unlock(&j->mu);
        REQUIRE(!out.failed);
        CHECK(strstr(out.p ? out.p : "", "hidden") == NULL);
    }
    CHECK(stopped);
    struct engine_event fin = {.choice = 0, .finish = ENGINE_FINISH_STOP, .n_prompt = 3, .n_generated = 9};
    job_on_event(j, &fin);
    pthread_mutex_lock(&j->mu);
    bool complete = resp_stream_step(&rc, j, &out);
    pthread_mutex_unlock(&j->mu);
    CHECK(complete);
    json_t *ev[64];
    bool done;
    int ne = sse_events(out.p, ev, 64, &done);
    CHECK(done);
    REQUIRE(ne >= 3);
    /* first: the role; last: usage with no choices; before it: finish_reason */
    json_t *d0 = json_object_get(json_array_get(json_object_get(ev[0], "choices"), 0), "delta");
    CHECK_STR(json_string_value(json_object_get(d0, "role")), "assistant");
    CHECK_STR(json_string_value(json_object_get(ev[0], "object")), "chat.completion.chunk");
    CHECK(json_is_null(json_object_get(ev[0], "usage")));
    CHECK_EQ_INT(json_array_size(json_object_get(ev[ne - 1], "choices")), 0);
    json_t *usage = json_object_get(ev[ne - 1], "usage");
    CHECK_EQ_INT(json_integer_value(json_object_get(usage, "completion_tokens")), 9);
    json_t *last = json_array_get(json_object_get(ev[ne - 2], "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(last, "finish_reason")), "stop");
    CHECK_EQ_INT(json_object_size(json_object_get(last, "delta")), 0);
    /* the deltas add up to the text before the stop string */
    struct sbuf all = {0};
    for (int i = 0; i < ne; i++) {
        json_t *c = json_array_get(json_object_get(ev[i], "choices"), 0);
        json_t *content = json_object_get(json_object_get(c, "delta"), "content");
        if (json_is_string(content)) sbuf_add(&all, json_string_value(content), json_string_length(content));
        CHECK_STR(json_string_value(json_object_get(ev[i], "id")), rc.id);
    }
    CHECK_STR(all.p, "Hi <EN there ");
    sbuf_free(&all);
    for (int i = 0; i < ne; i++) json_decref(ev[i]);
    sbuf_free(&out);
    job_release(j);
    tokenizer_free(tok);
    model_free(m);
}

/* Streams text through a job, token by token, with rc's tools; returns the
 * SSE text (malloc'd) and, in *full, the whole response's body. */
static char *tool_stream(struct tokenizer *tok, const struct resp_ctx *rc, const char *text, char **full) {
    struct job *j = job_new(tok, 1, false, NULL, 0, false);
    *full = NULL;
    if (!j) return NULL;
    struct sbuf out = {0};
    int32_t ids[256];
    int64_t n = tokenizer_encode(tok, text, strlen(text), false, false, ids, 256);
    for (int64_t i = 0; i < n; i++) {
        struct engine_event ev = {.choice = 0, .token = ids[i]};
        job_on_event(j, &ev);
        pthread_mutex_lock(&j->mu);
        resp_stream_step(rc, j, &out);
        pthread_mutex_unlock(&j->mu);
    }
    struct engine_event fin = {.choice = 0, .finish = ENGINE_FINISH_STOP, .n_prompt = 3, .n_generated = (int)n};
    job_on_event(j, &fin);
    pthread_mutex_lock(&j->mu);
    CHECK(resp_stream_step(rc, j, &out));
    *full = resp_full(rc, j);
    pthread_mutex_unlock(&j->mu);
    job_release(j);
    return out.p;
}

/* The streamed content, the calls (name(args);...) and the finish reason. */
static void stream_parts(const char *sse, struct sbuf *content, struct sbuf *calls, char *finish, size_t flen) {
    json_t *ev[256];
    bool done;
    int ne = sse_events(sse, ev, 256, &done);
    CHECK(done);
    finish[0] = 0;
    for (int i = 0; i < ne; i++) {
        json_t *c = json_array_get(json_object_get(ev[i], "choices"), 0), *d = json_object_get(c, "delta");
        json_t *t = json_object_get(d, "content");
        if (json_is_string(t)) sbuf_add(content, json_string_value(t), json_string_length(t));
        json_t *tc = json_object_get(d, "tool_calls");
        for (size_t k = 0; k < json_array_size(tc); k++) {
            json_t *f = json_object_get(json_array_get(tc, k), "function");
            const char *nm = json_string_value(json_object_get(f, "name")), *a = json_string_value(json_object_get(f, "arguments"));
            CHECK(!strncmp(json_string_value(json_object_get(json_array_get(tc, k), "id")), "call_", 5));
            sbuf_add(calls, nm, strlen(nm));
            sbuf_add(calls, "(", 1);
            sbuf_add(calls, a, strlen(a));
            sbuf_add(calls, ");", 2);
        }
        if (json_is_string(json_object_get(c, "finish_reason")))
            snprintf(finish, flen, "%s", json_string_value(json_object_get(c, "finish_reason")));
        json_decref(ev[i]);
    }
}

TEST(server_job_tool_calls_streamed_and_whole) {
    struct model *m;
    struct tokenizer *tok = load_tok(&m);
    if (!tok) {
        model_free(m);
        return;
    }
    static const char TOOLS[] = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}]";
    static const struct {
        const char *reply;
        bool parallel;
        const char *content; /* streamed; whole: the same, null when empty */
        const char *calls;
        const char *finish;
    } cases[] = {
        {"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
         true, "Let me check.", "get_weather({\"city\":\"Paris\"});", "tool_calls"},
        {"<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":{\"x\":1}}</tool_call>",
         true, "", "a({});b({\"x\":1});", "tool_calls"},
        {"<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call><tool_call>{\"name\":\"b\",\"arguments\":{}}</tool_call>",
         false, "", "a({});", "tool_calls"},
        /* a bare call in a fence, of a declared function */
        {"```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n```", true, "",
         "get_weather({\"city\":\"Oslo\"});", "tool_calls"},
        /* the same shape naming no declared function is text */
        {"```json\n{\"name\": \"other\", \"arguments\": {}}\n```", true,
         "```json\n{\"name\": \"other\", \"arguments\": {}}\n```", "", "stop"},
        /* a malformed block is text, sent whole at the end */
        {"Sure <tool_call>{\"name\": 5}</tool_call>", true, "Sure <tool_call>{\"name\": 5}</tool_call>", "", "stop"},
        {"No tools needed: 4.", true, "No tools needed: 4.", "", "stop"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct resp_ctx rc = {0};
        resp_ctx_init(&rc, API_ROUTE_CHAT, "smol");
        rc.tool_style = TOOLCALL_HERMES;
        rc.parallel_tools = cases[k].parallel;
        rc.tools_json = TOOLS;
        rc.prefill = "";
        char *full = NULL, *sse = tool_stream(tok, &rc, cases[k].reply, &full);
        struct sbuf content = {0}, calls = {0};
        char finish[32];
        stream_parts(sse, &content, &calls, finish, sizeof finish);
        CHECK_MSG(!strcmp(content.p ? content.p : "", cases[k].content), "case %zu: streamed content '%s'", k,
                  content.p ? content.p : "");
        CHECK_MSG(!strcmp(calls.p ? calls.p : "", cases[k].calls), "case %zu: streamed calls '%s'", k,
                  calls.p ? calls.p : "");
        CHECK_MSG(!strcmp(finish, cases[k].finish), "case %zu: finish %s", k, finish);
        /* the whole response says the same */
        json_t *root = json_loads(full ? full : "", 0, NULL);
        json_t *ch = json_array_get(json_object_get(root, "choices"), 0), *msg = json_object_get(ch, "message");
        CHECK_STR(json_string_value(json_object_get(ch, "finish_reason")), cases[k].finish);
        json_t *c = json_object_get(msg, "content");
        if (*cases[k].content) CHECK_STR(json_string_value(c), cases[k].content);
        else CHECK(json_is_null(c));
        struct sbuf wc = {0};
        json_t *tc = json_object_get(msg, "tool_calls");
        CHECK(*cases[k].calls ? json_is_array(tc) : tc == NULL);
        for (size_t i = 0; i < json_array_size(tc); i++) {
            json_t *f = json_object_get(json_array_get(tc, i), "function");
            const char *nm = json_string_value(json_object_get(f, "name")), *a = json_string_value(json_object_get(f, "arguments"));
            sbuf_add(&wc, nm, strlen(nm));
            sbuf_add(&wc, "(", 1);
            sbuf_add(&wc, a, strlen(a));
            sbuf_add(&wc, ");", 2);
        }
        CHECK_MSG(!strcmp(wc.p ? wc.p : "", cases[k].calls), "case %zu: calls '%s'", k, wc.p ? wc.p : "");
        json_decref(root);
        sbuf_free(&wc);
        sbuf_free(&content);
        sbuf_free(&calls);
        free(sse);
        free(full);
    }
    /* a prefill (tool_choice required) holds everything and is parsed with the reply */
    struct resp_ctx rc = {0};
    resp_ctx_init(&rc, API_ROUTE_CHAT, "smol");
    rc.tool_style = TOOLCALL_HERMES;
    rc.parallel_tools = true;
    rc.tools_json = TOOLS;
    rc.prefill = "<tool_call>\n{\"name\": \"";
    char *full = NULL, *sse = tool_stream(tok, &rc, "get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>", &full);
    struct sbuf content = {0}, calls = {0};
    char finish[32];
    stream_parts(sse, &content, &calls, finish, sizeof finish);
    CHECK(content.len == 0);
    CHECK_STR(calls.p ? calls.p : "", "get_weather({\"city\":\"Rome\"});");
    CHECK_STR(finish, "tool_calls");
    sbuf_free(&content);
    sbuf_free(&calls);
    free(sse);
    free(full);
    tokenizer_free(tok);
    model_free(m);
}

TEST(server_job_completions_shape_and_utf8) {
    struct model *m;
    struct tokenizer *tok = load_tok(&m);
    if (!tok) {
        model_free(m);
        return;
    }
    struct job *j = job_new(tok, 1, true, NULL, 0, false);
    REQUIRE(j);
    /* an emoji is several byte tokens: no chunk may carry half of it */
    const char *text = "ok \xf0\x9f\x98\x80 caf\xc3\xa9";
    int32_t ids[64];
    int64_t n = tokenizer_encode(tok, text, strlen(text), false, false, ids, 64);
    struct resp_ctx rc = {0};
    resp_ctx_init(&rc, API_ROUTE_COMPLETIONS, "smol");
    rc.top_logprobs = 1;
    rc.echo = "Say: ";
    rc.echo_len = 5;
    struct sbuf out = {0};
    for (int64_t i = 0; i < n; i++) {
        struct engine_event ev = {.choice = 0, .token = ids[i], .logprob = -1.0f, .n_top = 1, .top_ids = {ids[i]},
                                  .top_logprobs = {-1.0f}};
        CHECK(job_on_event(j, &ev));
        pthread_mutex_lock(&j->mu);
        resp_stream_step(&rc, j, &out);
        pthread_mutex_unlock(&j->mu);
    }
    struct engine_event fin = {.choice = 0, .finish = ENGINE_FINISH_LENGTH, .n_prompt = 2, .n_generated = (int)n};
    job_on_event(j, &fin);
    pthread_mutex_lock(&j->mu);
    CHECK(resp_stream_step(&rc, j, &out));
    char *whole = resp_full(&rc, j);
    pthread_mutex_unlock(&j->mu);
    json_t *ev[64];
    bool done;
    int ne = sse_events(out.p, ev, 64, &done); /* every chunk parses: valid UTF-8 */
    CHECK(done);
    struct sbuf all = {0};
    int n_tok = 0;
    for (int i = 0; i < ne; i++) {
        CHECK_STR(json_string_value(json_object_get(ev[i], "object")), "text_completion");
        json_t *c = json_array_get(json_object_get(ev[i], "choices"), 0);
        json_t *t = json_object_get(c, "text");
        REQUIRE(json_is_string(t));
        sbuf_add(&all, json_string_value(t), json_string_length(t));
        json_t *lp = json_object_get(c, "logprobs");
        if (json_is_object(lp)) n_tok += (int)json_array_size(json_object_get(lp, "tokens"));
        json_decref(ev[i]);
    }
    CHECK_STR(all.p, "Say: ok \xf0\x9f\x98\x80 caf\xc3\xa9");
    CHECK_EQ_INT(n_tok, n);
    sbuf_free(&all);
    sbuf_free(&out);
    /* the whole body: text with echo, the completions logprobs shape */
    REQUIRE(whole);
    json_error_t je;
    json_t *root = json_loads(whole, 0, &je);
    REQUIRE(root);
    json_t *c0 = json_array_get(json_object_get(root, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(c0, "text")), "Say: ok \xf0\x9f\x98\x80 caf\xc3\xa9");
    json_t *lp = json_object_get(c0, "logprobs");
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "tokens")), n);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "token_logprobs")), n);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "top_logprobs")), n);
    json_t *offs = json_object_get(lp, "text_offset");
    CHECK_EQ_INT(json_integer_value(json_array_get(offs, 0)), 5); /* after the echoed prompt */
    CHECK_STR(json_string_value(json_object_get(c0, "finish_reason")), "length");
    json_decref(root);
    free(whole);
    job_release(j);
    tokenizer_free(tok);
    model_free(m);
}
