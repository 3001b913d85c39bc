/*
 * test_eval_url.c — `kvik eval --url`: the task file run against an
 * OpenAI-compatible server instead of a local model.
 *   same results   on a subset of the shipped cases (raw-prompt generation
 *                  and choice cases, chat generation cases), greedy, every
 *                  case passes or fails through `kvik serve` exactly as it
 *                  does in process with the same K/V type, with the same
 *                  reply or option scores; a chat choice case is reported
 *                  as not scorable; the API key is sent;
 *   no echo        against a server that returns no prompt logprobs (the
 *                  fake OpenAI server), choice cases fail with a clear
 *                  reason and generation cases still run;
 *   arguments      -m with --url, and an unreachable server.
 */
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "fake_openai.h"
#include "serve_harness.h"
#include "test.h"

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The subset: every raw-prompt choice case, one chat choice case, and
 * every fourth other case (raw and chat) while fewer than max are taken. */
static bool write_subset(const char *path, int max, int *n_out) {
    char src[4096];
    snprintf(src, sizeof src, "%s/eval/cases.jsonl", test_env("KVIK_TEST_DATA"));
    FILE *in = fopen(src, "r"), *out = fopen(path, "w");
    if (!in || !out) {
        if (in) fclose(in);
        if (out) fclose(out);
        return false;
    }
    static char line[1 << 16];
    int i = 0, n = 0;
    bool chat_choice = false;
    while (fgets(line, sizeof line, in)) {
        json_error_t e;
        json_t *c = json_loads(line, 0, &e);
        if (!c) continue;
        const char *type = json_string_value(json_object_get(json_object_get(c, "check"), "type"));
        bool choice = type && !strcmp(type, "choice"), raw = json_object_get(c, "prompt") != NULL;
        bool take = choice ? (raw || !chat_choice) : i++ % 4 == 0 && n < max;
        if (choice && !raw && take) chat_choice = true;
        json_decref(c);
        if (take) fputs(line, out), n++;
    }
    fclose(in);
    fclose(out);
    *n_out = n;
    return n > 0;
}

static json_t *load_json(const char *path) {
    json_error_t e;
    json_t *r = json_load_file(path, 0, &e);
    if (!r) test_fail(__FILE__, __LINE__, "%s: %s", path, e.text);
    return r;
}

TEST(eval_url_matches_in_process) {
    char model[4096];
    if (!test_default_model(model, sizeof model)) return;
    char tasks[128], a[128], b[128], args[8192];
    snprintf(tasks, sizeof tasks, "/tmp/kvik-eval-url-%d.jsonl", (int)getpid());
    snprintf(a, sizeof a, "/tmp/kvik-eval-url-%d-url.json", (int)getpid());
    snprintf(b, sizeof b, "/tmp/kvik-eval-url-%d-local.json", (int)getpid());
    int n = 0;
    REQUIRE(write_subset(tasks, 40, &n));
    static char out[1 << 16], err[1 << 16];

    struct serve_proc s;
    if (!serve_start(&s, "-t 2 -c 2048 --kv-type f16 --api-key eval-key", 120)) return;
    snprintf(args, sizeof args, "eval --url http://127.0.0.1:%d/v1 --api-key eval-key --tasks %s -o %s", s.port, tasks,
             a);
    int st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 0, "exit %d: %s", st, err);
    /* no key: the server answers 401 and the run stops with one line */
    snprintf(args, sizeof args, "eval --url http://127.0.0.1:%d --tasks %s", s.port, tasks);
    int st2 = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st2 == 1 && strstr(err, "401"), "exit %d: %s", st2, err);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    if (st) return;

    snprintf(args, sizeof args, "eval -m '%s' --kv-type f16 -c 2048 -t 2 --tasks %s -o %s", model, tasks, b);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    REQUIRE_MSG(st == 0, "exit %d: %s", st, err);

    json_t *ra = load_json(a), *rb = load_json(b);
    json_t *ca = json_object_get(ra, "cases"), *cb = json_object_get(rb, "cases");
    CHECK_EQ_INT(json_array_size(ca), n);
    CHECK_EQ_INT(json_array_size(cb), n);
    int same = 0, compared = 0, choice = 0, chat_choice = 0;
    for (size_t i = 0; i < json_array_size(ca) && i < json_array_size(cb); i++) {
        json_t *x = json_array_get(ca, i), *y = json_array_get(cb, i);
        const char *id = json_string_value(json_object_get(x, "id"));
        json_t *sx = json_object_get(x, "scores"), *sy = json_object_get(y, "scores");
        if (!strcmp(json_string_value(json_object_get(x, "check")), "choice") && !sx) {
            /* a chat choice case: not scorable over the completions API */
            CHECK_MSG(json_is_string(json_object_get(x, "error")), "case %s", id);
            chat_choice++;
            continue;
        }
        compared++;
        bool ok = json_equal(json_object_get(x, "pass"), json_object_get(y, "pass"));
        if (sx) {
            choice++;
            for (size_t k = 0; k < json_array_size(sx); k++) {
                double d = json_number_value(json_array_get(sx, k)) - json_number_value(json_array_get(sy, k));
                ok &= d < 1e-4 && d > -1e-4;
            }
        } else {
            ok &= json_equal(json_object_get(x, "reply"), json_object_get(y, "reply"));
        }
        CHECK_MSG(ok, "case %s differs between --url and -m", id);
        same += ok;
    }
    printf("    %d cases: %d compared (%d choice), %d the same; %d chat choice cases not scorable over --url\n", n,
           compared, choice, same, chat_choice);
    CHECK(choice >= 10);
    CHECK_EQ_INT(chat_choice, 1);
    json_decref(ra);
    json_decref(rb);
    remove(tasks), remove(a), remove(b);
}

TEST(eval_url_without_echo_fails_choice_cases_clearly) {
    struct fake_openai *f = fake_openai_start(0, 0);
    REQUIRE(f != NULL);
    char tasks[128], args[1024];
    snprintf(tasks, sizeof tasks, "/tmp/kvik-eval-url-fake-%d.jsonl", (int)getpid());
    write_text(tasks, "{\"id\":\"gen\",\"prompt\":\"hello there\",\"max_tokens\":3,"
                      "\"check\":{\"type\":\"contains\",\"value\":\"w0\"}}\n"
                      "{\"id\":\"pick\",\"prompt\":\"The sky is\",\"check\":{\"type\":\"choice\","
                      "\"options\":[\" blue\",\" green\"],\"answer\":0}}\n"
                      "{\"id\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2,"
                      "\"check\":{\"type\":\"contains\",\"value\":\"w1\"}}\n");
    static char out[16384], err[16384];
    snprintf(args, sizeof args, "eval --url http://127.0.0.1:%u --tasks %s --json", (unsigned)fake_openai_port(f), tasks);
    int st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 0, "exit %d: %s", st, err);
    CHECK_MSG(strstr(err, "pass gen\n") && strstr(err, "pass chat\n"), "%s", err);
    CHECK_MSG(strstr(err, "FAIL pick: the server returns no prompt log-probabilities"), "%s", err);
    CHECK_MSG(strstr(err, "choice cases need them"), "%s", err);
    CHECK(strstr(out, "\"model\":\"http://127.0.0.1:") && strstr(out, "(model fake-model)"));
    fake_openai_stop(f);

    /* nobody listening: one line, exit 1 */
    snprintf(args, sizeof args, "eval --url http://127.0.0.1:1 --tasks %s", tasks);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 1, "exit %d: %s", st, err);
    /* -m and --url together, --model without --url: bad arguments */
    snprintf(args, sizeof args, "eval -m x.gguf --url http://127.0.0.1:1 --tasks %s", tasks);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 2);
    snprintf(args, sizeof args, "eval --model m --tasks %s", tasks);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 2);
    snprintf(args, sizeof args, "eval --url ftp://x --tasks %s", tasks);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 1);
    remove(tasks);
}
