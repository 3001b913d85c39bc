/*
 * test_bench_serve_e2e.c — the load generator against a fake
 * OpenAI-compatible server started by the test (tests/fake_openai.c, on
 * libmicrohttpd): streamed tokens, injected HTTP errors, malformed events,
 * error objects, streams without [DONE], mid-stream disconnects, slow
 * streams past the timeout and refused connections, each counted as what it
 * is; the concurrency cap; the server view from /metrics; and the command
 * line (serve, sweep, compare) through the kvik binary.
 *
 * Nothing here is timed against a threshold: delays the fake server injects
 * only give lower bounds that the timestamps must respect.
 */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "fake_openai.h"
#include "test.h"
#include "tools/loadgen/loadgen.h"

static char g_url[64];

static struct fake_openai *start_fake(void) {
    signal(SIGPIPE, SIG_IGN);
    struct fake_openai *f = fake_openai_start(0, 0);
    if (f) snprintf(g_url, sizeof g_url, "http://127.0.0.1:%u", fake_openai_port(f));
    return f;
}

/* Writes lines to a temporary JSONL file; its path goes to path. */
static bool write_jsonl(char *path, size_t cap, const char *const *lines, int n) {
    snprintf(path, cap, "/tmp/kvik-test-loadgen-%d-%d.jsonl", (int)getpid(), rand());
    FILE *f = fopen(path, "w");
    if (!f) return false;
    for (int i = 0; i < n; i++) fprintf(f, "%s\n", lines[i]);
    return fclose(f) == 0;
}

static bool load_file_dataset(const char *path, struct lg_dataset *d) {
    struct lg_dataset_params p;
    lg_dataset_default_params(&p);
    p.kind = LG_DATASET_FILE;
    p.path = path;
    p.num_prompts = 0; /* all */
    struct kvik_err err = {0};
    return lg_dataset_build(&p, d, &err) == KVIK_OK;
}

static const char *const k_lines[] = {
    "{\"prompt\": \"hello there world\", \"output_len\": 8}",            /* 0 ok, usage */
    "{\"prompt\": \"#status=503\", \"output_len\": 8}",                  /* 1 http 503 */
    "{\"prompt\": \"#drop=3\", \"output_len\": 8}",                      /* 2 disconnect mid-stream */
    "{\"prompt\": \"#bad=2\", \"output_len\": 8}",                       /* 3 malformed */
    "{\"prompt\": \"#error=1\", \"output_len\": 8}",                     /* 4 stream error */
    "{\"prompt\": \"#nodone\", \"output_len\": 8}",                      /* 5 ends without [DONE] */
    "{\"prompt\": \"#nousage\", \"output_len\": 5}",                     /* 6 ok, tokens counted */
    "{\"prompt\": \"#keepalive #crlf #split\", \"output_len\": 6}",      /* 7 ok */
    "{\"prompt\": \"#first=30 #delay=5\", \"output_len\": 5}",           /* 8 ok, slow */
    "{\"prompt\": \"one token\", \"output_len\": 1}",                    /* 9 ok, no TPOT */
    "{\"prompt\": \"#status=429\", \"output_len\": 8}",                  /* 10 http 429 */
    "{\"prompt\": \"#preempt a b\", \"system\": \"sys\", \"output_len\": 4}", /* 11 ok */
};
#define N_LINES ((int)(sizeof k_lines / sizeof k_lines[0]))

TEST(bench_serve_e2e_error_kinds) {
    struct fake_openai *f = start_fake();
    REQUIRE(f);
    char path[256];
    struct lg_dataset ds = {0};
    if (!write_jsonl(path, sizeof path, k_lines, N_LINES) || !load_file_dataset(path, &ds)) {
        test_fail(__FILE__, __LINE__, "cannot make the dataset");
        fake_openai_stop(f);
        return;
    }
    remove(path);
    REQUIRE(ds.n == N_LINES);
    for (int endpoint = 0; endpoint < 2; endpoint++) {
        struct lg_config c;
        lg_default_config(&c);
        c.url = g_url;
        c.endpoint = endpoint ? LG_ENDPOINT_COMPLETIONS : LG_ENDPOINT_CHAT;
        c.quiet = true;
        c.timeout_s = 20;
        c.metrics_interval_s = 0.01;
        int64_t before = fake_openai_requests(f);
        struct lg_result res;
        struct kvik_err err = {0};
        REQUIRE(lg_run(&c, &ds, &res, &err) == KVIK_OK);
        CHECK_EQ_INT(fake_openai_requests(f) - before, N_LINES);
        CHECK_STR(res.model, "fake-model");
        static const enum lg_error want[N_LINES] = {
            LG_ERR_NONE,   LG_ERR_HTTP, LG_ERR_DISCONNECT, LG_ERR_MALFORMED, LG_ERR_STREAM, LG_ERR_DISCONNECT,
            LG_ERR_NONE,   LG_ERR_NONE, LG_ERR_NONE,       LG_ERR_NONE,      LG_ERR_HTTP,   LG_ERR_NONE,
        };
        for (int i = 0; i < N_LINES; i++) {
            const struct lg_record *r = &res.recs[i];
            CHECK_MSG(r->error == want[i], "endpoint %d, request %d (%s): %s, want %s (%s)", endpoint, i,
                      ds.items[i].prompt, lg_error_name(r->error), lg_error_name(want[i]),
                      r->error_msg ? r->error_msg : "");
            CHECK(r->t_end_ns >= r->t_send_ns);
            CHECK(r->t_send_ns >= r->t_arrival_ns);
            if (want[i] != LG_ERR_NONE) CHECK(r->error_msg != NULL);
        }
        const struct lg_record *r = res.recs;
        /* 0: tokens and prompt tokens from usage, 8 events */
        CHECK(r[0].usage_given);
        CHECK_EQ_INT(r[0].output_tokens, 8);
        CHECK_EQ_INT(r[0].n_chunks, 8);
        CHECK_EQ_INT(r[0].prompt_tokens, 3);
        CHECK_EQ_INT(r[0].http_status, 200);
        for (int k = 1; k < r[0].n_chunks; k++) CHECK(r[0].chunk_ns[k] >= r[0].chunk_ns[k - 1]);
        /* 1, 10: the status and the server's message */
        CHECK_EQ_INT(r[1].http_status, 503);
        CHECK_EQ_INT(r[10].http_status, 429);
        CHECK(r[1].error_msg && strstr(r[1].error_msg, "503") && strstr(r[1].error_msg, "injected status"));
        /* 2: three tokens came before the connection broke */
        CHECK_EQ_INT(r[2].n_chunks, 3);
        /* 4: the error object's message */
        CHECK(r[4].error_msg && strstr(r[4].error_msg, "injected failure"));
        /* 6: no usage: tokens are the counted events, prompt tokens unknown */
        CHECK(!r[6].usage_given);
        CHECK_EQ_INT(r[6].output_tokens, 5);
        CHECK_EQ_INT(r[6].prompt_tokens, -1);
        /* 7: keep-alives, CRLF and a stream in small pieces change nothing */
        CHECK_EQ_INT(r[7].output_tokens, 6);
        CHECK_EQ_INT(r[7].n_chunks, 6);
        /* 8: the injected delays are lower bounds: token k cannot arrive before 30 + 5k ms
         * (single gaps can be shorter: the server may send two tokens in one write) */
        CHECK_EQ_INT(r[8].n_chunks, 5);
        CHECK(lg_record_ttft_ms(&r[8]) >= 29.9);
        for (int k = 0; k < r[8].n_chunks; k++)
            CHECK_MSG(r[8].chunk_ns[k] - r[8].t_send_ns >= (int64_t)(30 + 5 * k) * 1000000 - 100000,
                      "token %d at %.2f ms", k, (double)(r[8].chunk_ns[k] - r[8].t_send_ns) * 1e-6);
        CHECK(lg_record_e2e_ms(&r[8]) >= 49.9);
        /* 9: one token: TTFT but no TPOT */
        CHECK_EQ_INT(r[9].output_tokens, 1);
        CHECK(!isnan(lg_record_ttft_ms(&r[9])));
        CHECK(isnan(lg_record_tpot_ms(&r[9])));
        /* the summary counts each kind */
        struct lg_summary s;
        lg_summarize_run(&res, NULL, &s);
        CHECK_EQ_INT(s.n_ok, 6);
        CHECK_EQ_INT(s.n_errors[LG_ERR_HTTP], 2);
        CHECK_EQ_INT(s.n_errors[LG_ERR_DISCONNECT], 2);
        CHECK_EQ_INT(s.n_errors[LG_ERR_MALFORMED], 1);
        CHECK_EQ_INT(s.n_errors[LG_ERR_STREAM], 1);
        CHECK_EQ_INT(s.n_errors[LG_ERR_TIMEOUT], 0);
        CHECK_EQ_INT(s.output_tokens, 8 + 5 + 6 + 5 + 1 + 4);
        CHECK_EQ_INT(s.tpot.n, 5);
        CHECK(s.cpu_user_s + s.cpu_sys_s >= 0);
        /* the server's view: every request counted once, one preemption */
        CHECK(res.server.available);
        CHECK(fabs(res.server.queue_time_count - N_LINES) < 1e-9);
        CHECK(fabs(res.server.queue_time_sum_s - 0.001 * N_LINES) < 1e-6);
        CHECK(fabs(res.server.prefill_time_sum_s - 0.002 * N_LINES) < 1e-6);
        CHECK(fabs(res.server.preemptions - 1) < 1e-9);
        CHECK(res.server.kv_usage_peak >= 0 && res.server.kv_usage_peak <= 1);
        lg_result_free(&res);
    }
    /* the last body asked for what the generator needs */
    char *body = fake_openai_last_body(f);
    json_t *o = body ? json_loads(body, 0, NULL) : NULL;
    CHECK(o != NULL);
    CHECK(json_is_true(json_object_get(o, "stream")));
    CHECK(json_is_true(json_object_get(json_object_get(o, "stream_options"), "include_usage")));
    CHECK(json_is_true(json_object_get(o, "ignore_eos")));
    CHECK(json_is_integer(json_object_get(o, "max_tokens")));
    CHECK_STR(json_string_value(json_object_get(o, "model")), "fake-model");
    json_decref(o);
    free(body);
    lg_dataset_free(&ds);
    fake_openai_stop(f);
}

TEST(bench_serve_e2e_timeout_and_connect) {
    struct fake_openai *f = start_fake();
    REQUIRE(f);
    static const char *const lines[] = {
        "{\"prompt\": \"#delay=200\", \"output_len\": 50}",
        "{\"prompt\": \"fast\", \"output_len\": 3}",
    };
    char path[256];
    struct lg_dataset ds = {0};
    REQUIRE(write_jsonl(path, sizeof path, lines, 2) && load_file_dataset(path, &ds));
    remove(path);
    struct lg_config c;
    lg_default_config(&c);
    c.url = g_url;
    c.quiet = true;
    c.timeout_s = 0.4;
    c.model = "given-model";
    struct lg_result res;
    struct kvik_err err = {0};
    REQUIRE(lg_run(&c, &ds, &res, &err) == KVIK_OK);
    CHECK_STR(res.model, "given-model");
    CHECK_MSG(res.recs[0].error == LG_ERR_TIMEOUT, "slow stream: %s", lg_error_name(res.recs[0].error));
    CHECK(res.recs[0].n_chunks < 50);
    CHECK(lg_record_e2e_ms(&res.recs[0]) >= 399);
    CHECK(res.recs[1].error == LG_ERR_NONE);
    lg_result_free(&res);
    fake_openai_stop(f);

    /* the server is gone: every request is a connect error, and the run still completes */
    c.timeout_s = 5;
    c.metrics_interval_s = 0.01;
    REQUIRE(lg_run(&c, &ds, &res, &err) == KVIK_OK);
    for (int i = 0; i < 2; i++)
        CHECK_MSG(res.recs[i].error == LG_ERR_CONNECT, "request %d: %s", i, lg_error_name(res.recs[i].error));
    CHECK(!res.server.available);
    struct lg_summary s;
    lg_summarize_run(&res, NULL, &s);
    CHECK_EQ_INT(s.n_ok, 0);
    CHECK_EQ_INT(s.n_errors[LG_ERR_CONNECT], 2);
    lg_result_free(&res);
    lg_dataset_free(&ds);

    /* not a URL */
    c.url = "localhost:8080";
    CHECK(lg_run(&c, &ds, &res, &err) == KVIK_ERR_INVALID_ARG);
}

TEST(bench_serve_e2e_concurrency_and_rate) {
    struct fake_openai *f = start_fake();
    REQUIRE(f);
    struct lg_dataset_params p;
    lg_dataset_default_params(&p);
    p.num_prompts = 12;
    p.input_len = 8;
    p.output_len = 4;
    struct lg_dataset ds;
    struct kvik_err err = {0};
    REQUIRE(lg_dataset_build(&p, &ds, &err) == KVIK_OK);
    /* slow every token down so requests overlap */
    for (int64_t i = 0; i < ds.n; i++) {
        char *np = malloc(strlen(ds.items[i].prompt) + 16);
        REQUIRE(np);
        sprintf(np, "#delay=10 %s", ds.items[i].prompt);
        free(ds.items[i].prompt);
        ds.items[i].prompt = np;
    }
    struct lg_config c;
    lg_default_config(&c);
    c.url = g_url;
    c.quiet = true;
    c.max_concurrency = 3;
    struct lg_result res;
    REQUIRE(lg_run(&c, &ds, &res, &err) == KVIK_OK);
    CHECK_EQ_INT(res.max_in_flight, 3);
    struct lg_summary s;
    lg_summarize_run(&res, NULL, &s);
    CHECK_EQ_INT(s.n_ok, 12);
    CHECK_EQ_INT(s.output_tokens, 48);
    /* all at once, capped: later requests wait for a slot, so their send is after their arrival (0) */
    int waited = 0;
    for (int i = 0; i < 12; i++) waited += res.recs[i].t_send_ns > 20000000;
    CHECK(waited >= 6);
    lg_result_free(&res);

    /* a rate: nobody is sent before its arrival time, and arrivals follow the seeded schedule */
    c.max_concurrency = 0;
    c.rate = 100;
    c.seed = 5;
    REQUIRE(lg_run(&c, &ds, &res, &err) == KVIK_OK);
    double t[12];
    lg_arrivals(100, 1.0, 5, 12, t);
    for (int i = 0; i < 12; i++) {
        CHECK(res.recs[i].t_arrival_ns == (int64_t)(t[i] * 1e9));
        CHECK(res.recs[i].t_send_ns >= res.recs[i].t_arrival_ns);
        CHECK(res.recs[i].error == LG_ERR_NONE);
    }
    lg_result_free(&res);
    lg_dataset_free(&ds);
    fake_openai_stop(f);
}

TEST(bench_serve_cli_serve_sweep_compare) {
    struct fake_openai *f = start_fake();
    REQUIRE(f);
    static char out[65536], errb[8192];
    char cmd[1024], a[128], b[128], sw[128], svg[128];
    snprintf(a, sizeof a, "/tmp/kvik-test-lg-%d-a.json", (int)getpid());
    snprintf(b, sizeof b, "/tmp/kvik-test-lg-%d-b.json", (int)getpid());
    snprintf(sw, sizeof sw, "/tmp/kvik-test-lg-%d-sweep.json", (int)getpid());
    snprintf(svg, sizeof svg, "/tmp/kvik-test-lg-%d.svg", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "bench serve --url %s/v1/ --num-prompts 10 --input-len 16 --output-len 8 --rate inf "
             "--max-concurrency 4 --slo ttft=100000,tpot=100000 --json %s --plot %s --quiet",
             g_url, a, svg);
    int rc = test_run_kvik(cmd, out, sizeof out, errb, sizeof errb);
    CHECK_MSG(rc == 0, "serve exited %d: %s", rc, errb);
    CHECK(strstr(out, "successful requests            10") != NULL);
    CHECK(strstr(out, "TTFT") && strstr(out, "TPOT") && strstr(out, "ITL") && strstr(out, "E2E"));
    CHECK(strstr(out, "goodput") && strstr(out, "generator CPU") && strstr(out, "peak KV-cache use"));
    json_t *j = json_load_file(a, 0, NULL);
    CHECK(j != NULL);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "summary"), "completed")) == 10);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "summary"), "good")) == 10);
    CHECK(json_array_size(json_object_get(j, "requests")) == 10);
    CHECK(json_array_size(json_object_get(json_array_get(json_object_get(j, "requests"), 0), "itl_ms")) == 7);
    CHECK(json_is_object(json_object_get(j, "server")));
    json_decref(j);
    size_t n = 0;
    char *s = test_slurp(svg, &n);
    CHECK(s && strstr(s, "<svg") && strstr(s, "TTFT CDF") && strstr(s, "</svg>\n"));
    free(s);

    /* a second report, and the comparison of the two */
    snprintf(cmd, sizeof cmd,
             "bench serve --url %s --endpoint completions --num-prompts 6 --output-len 4 --json %s --quiet", g_url, b);
    rc = test_run_kvik(cmd, out, sizeof out, errb, sizeof errb);
    CHECK_MSG(rc == 0, "serve exited %d: %s", rc, errb);
    snprintf(cmd, sizeof cmd, "bench compare %s %s", a, a);
    rc = test_run_kvik(cmd, out, sizeof out, errb, sizeof errb);
    CHECK_MSG(rc == 0, "compare exited %d: %s", rc, errb);
    CHECK(strstr(out, "output throughput tok/s") && strstr(out, "1.000"));
    snprintf(cmd, sizeof cmd, "bench compare %s %s", a, b);
    CHECK(test_run_kvik(cmd, out, sizeof out, errb, sizeof errb) == 0);
    CHECK(strstr(out, "completed requests") != NULL);

    /* a sweep over rates writes one point per rate */
    snprintf(cmd, sizeof cmd,
             "bench sweep --url %s --rates 200,inf --num-prompts 5 --output-len 4 --json %s --plot %s --quiet", g_url,
             sw, svg);
    rc = test_run_kvik(cmd, out, sizeof out, errb, sizeof errb);
    CHECK_MSG(rc == 0, "sweep exited %d: %s", rc, errb);
    j = json_load_file(sw, 0, NULL);
    CHECK(j && json_array_size(json_object_get(j, "points")) == 2);
    CHECK(j && json_is_string(json_object_get(json_array_get(json_object_get(j, "points"), 1), "rate")));
    json_decref(j);
    s = test_slurp(svg, &n);
    CHECK(s && strstr(s, "TTFT against throughput") && strstr(s, "</svg>\n"));
    free(s);
    snprintf(cmd, sizeof cmd, "bench compare %s %s --names x,y --plot %s", sw, sw, svg);
    CHECK(test_run_kvik(cmd, out, sizeof out, errb, sizeof errb) == 0);
    CHECK(strstr(out, "B/A per point") != NULL);
    /* --fresh-prompts: the second point sends prompts of its own (one at a
     * time, so the last body the server saw is the point's last prompt) */
    char *last[2] = {NULL, NULL};
    for (int fresh = 0; fresh < 2; fresh++) {
        int64_t before = fake_openai_requests(f);
        snprintf(cmd, sizeof cmd,
                 "bench sweep --url %s --rates inf,inf --num-prompts 3 --output-len 2 --max-concurrency 1 --quiet%s",
                 g_url, fresh ? " --fresh-prompts" : "");
        rc = test_run_kvik(cmd, out, sizeof out, errb, sizeof errb);
        CHECK_MSG(rc == 0, "sweep exited %d: %s", rc, errb);
        CHECK_EQ_INT(fake_openai_requests(f) - before, 6);
        CHECK(strstr(out, "3 prompts a point") != NULL);
        last[fresh] = fake_openai_last_body(f);
    }
    CHECK(last[0] && last[1] && strcmp(last[0], last[1]) != 0);
    free(last[0]), free(last[1]);
    /* a one-line file cannot give three points prompts of their own */
    char one[256];
    static const char *const one_line[] = {"{\"prompt\": \"hello\", \"output_len\": 2}"};
    if (write_jsonl(one, sizeof one, one_line, 1)) {
        int64_t before = fake_openai_requests(f);
        snprintf(cmd, sizeof cmd,
                 "bench sweep --url %s --rates inf,inf,inf --dataset file --dataset-path %s --quiet --fresh-prompts",
                 g_url, one);
        CHECK_EQ_INT(test_run_kvik(cmd, out, sizeof out, errb, sizeof errb), 1);
        CHECK(strstr(errb, "too few prompts for 3 fresh points") != NULL);
        CHECK_EQ_INT(fake_openai_requests(f) - before, 0);
        remove(one);
    } else {
        test_fail(__FILE__, __LINE__, "cannot write the one-line dataset");
    }
    fake_openai_stop(f);

    /* usage errors and a dead server */
    CHECK(test_run_kvik("bench serve --rate 3", out, sizeof out, errb, sizeof errb) == 2);
    CHECK(strstr(errb, "--url") != NULL);
    CHECK(test_run_kvik("bench serve --url http://x --rate -1", out, sizeof out, errb, sizeof errb) == 2);
    CHECK(test_run_kvik("bench serve --url http://x --slo ttft=oops", out, sizeof out, errb, sizeof errb) == 2);
    CHECK(test_run_kvik("bench serve --url http://x --dataset file", out, sizeof out, errb, sizeof errb) == 2);
    CHECK(test_run_kvik("bench sweep --url http://x", out, sizeof out, errb, sizeof errb) == 2);
    CHECK(test_run_kvik("bench compare /nonexistent.json /nonexistent.json", out, sizeof out, errb, sizeof errb) == 1);
    snprintf(cmd, sizeof cmd, "bench serve --url %s --num-prompts 2 --quiet --timeout 5", g_url);
    CHECK(test_run_kvik(cmd, out, sizeof out, errb, sizeof errb) == 1);
    CHECK(strstr(out, "connect 2") != NULL);
    CHECK(strstr(errb, "every request failed") != NULL);
    remove(a);
    remove(b);
    remove(sw);
    remove(svg);
}
