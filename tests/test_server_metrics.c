/*
 * test_server_metrics.c — the /metrics exposition (src/server/metrics.c):
 * every required series is there with its # HELP / # TYPE, histogram
 * buckets are cumulative and end at +Inf == _count, and `promtool check
 * metrics` (Debian package prometheus) accepts the text. Without promtool
 * the promtool part skips with a message.
 */
#include <stdlib.h>

#include "serve_harness.h"
#include "server/metrics.h"
#include "test.h"

static void fill_stats(struct engine_stats *st) {
    memset(st, 0, sizeof *st);
    st->requests_running = 3;
    st->requests_waiting = 2;
    st->kv_blocks_total = 400;
    st->kv_blocks_used = 100;
    st->prompt_tokens = 1234;
    st->generation_tokens = 567;
    st->preemptions = 4;
    st->finished[ENGINE_FINISH_STOP] = 10;
    st->finished[ENGINE_FINISH_LENGTH] = 5;
    st->finished[ENGINE_FINISH_CANCELLED] = 1;
    st->steps = 99;
    struct engine_hist *h[] = {&st->ttft, &st->itl, &st->e2e, &st->queue, &st->prefill};
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i <= ENGINE_HIST_BUCKETS; i++) h[k]->counts[i] = (uint64_t)(i % 3);
        h[k]->count = 0;
        for (int i = 0; i <= ENGINE_HIST_BUCKETS; i++) h[k]->count += h[k]->counts[i];
        h[k]->sum = 12.5;
    }
}

TEST(server_metrics_series_and_histograms) {
    struct engine_stats st;
    fill_stats(&st);
    struct metrics_server ms = {.ready = 1, .http_requests = 77};
    ms.rejected[METRICS_REJECT_QUEUE_FULL] = 6;
    size_t len;
    char *text = metrics_render(&st, &ms, &len);
    REQUIRE(text);
    CHECK_EQ_INT(strlen(text), len);
    static const char *const names[] = {
        "kvik_time_to_first_token_seconds", "kvik_inter_token_latency_seconds",
        "kvik_e2e_request_latency_seconds", "kvik_request_queue_time_seconds",
        "kvik_request_prefill_time_seconds"};
    for (int k = 0; k < 5; k++) {
        char line[160];
        snprintf(line, sizeof line, "# TYPE %s histogram\n", names[k]);
        CHECK_MSG(strstr(text, line) != NULL, "no %s", line);
        /* cumulative buckets, +Inf equal to _count */
        double prev = -1, v;
        for (int i = 0; i < ENGINE_HIST_BUCKETS; i++) {
            snprintf(line, sizeof line, "%s_bucket{le=\"%.9g\"}", names[k], engine_hist_bounds[i]);
            REQUIRE(metrics_value(text, line, &v));
            CHECK(v >= prev);
            prev = v;
        }
        snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"}", names[k]);
        double inf, count, sum;
        REQUIRE(metrics_value(text, line, &inf));
        snprintf(line, sizeof line, "%s_count", names[k]);
        REQUIRE(metrics_value(text, line, &count));
        snprintf(line, sizeof line, "%s_sum", names[k]);
        REQUIRE(metrics_value(text, line, &sum));
        CHECK(inf == count && inf >= prev);
        CHECK(sum == 12.5);
    }
    double v;
    CHECK(metrics_value(text, "kvik_requests_running", &v) && v == 3);
    CHECK(metrics_value(text, "kvik_requests_waiting", &v) && v == 2);
    CHECK(metrics_value(text, "kvik_kv_cache_usage_ratio", &v) && v == 0.25);
    CHECK(metrics_value(text, "kvik_kv_cache_blocks", &v) && v == 400);
    CHECK(metrics_value(text, "kvik_prompt_tokens_total", &v) && v == 1234);
    CHECK(metrics_value(text, "kvik_generation_tokens_total", &v) && v == 567);
    CHECK(metrics_value(text, "kvik_preemptions_total", &v) && v == 4);
    CHECK(metrics_value(text, "kvik_requests_total{finish_reason=\"stop\"}", &v) && v == 10);
    CHECK(metrics_value(text, "kvik_requests_total{finish_reason=\"length\"}", &v) && v == 5);
    CHECK(metrics_value(text, "kvik_requests_rejected_total{reason=\"queue_full\"}", &v) && v == 6);
    CHECK(metrics_value(text, "kvik_http_requests_total", &v) && v == 77);
    CHECK(strchr(text, ':') == NULL || strstr(text, "kvik_") != NULL);
    /* no colons in metric names */
    for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
        if (*p != '#') {
            const char *end = p + strcspn(p, " {");
            CHECK(memchr(p, ':', (size_t)(end - p)) == NULL);
        }
        if (!strchr(p, '\n')) break;
    }
    free(text);
    /* no engine yet (loading): zeros, still well-formed */
    ms.ready = 0;
    text = metrics_render(NULL, &ms, &len);
    REQUIRE(text);
    CHECK(metrics_value(text, "kvik_kv_cache_usage_ratio", &v) && v == 0);
    CHECK(metrics_value(text, "kvik_server_ready", &v) && v == 0);
    free(text);
}

TEST(server_metrics_pass_promtool) {
    struct engine_stats st;
    fill_stats(&st);
    struct metrics_server ms = {.ready = 1};
    size_t len;
    char *text = metrics_render(&st, &ms, &len);
    REQUIRE(text);
    char out[4096];
    int rc = test_promtool_check(text, out, sizeof out);
    free(text);
    if (rc == -1) {
        test_skip("promtool not installed (scripts/install-deps.sh test installs prometheus)");
        return;
    }
    CHECK_MSG(rc == 0, "promtool check metrics: exit %d: %s", rc, out);
}
