/*
 * test_rerank.c — POST /v1/rerank of `kvik serve` (engine/rerank.h: the
 * chat model judging yes or no): OpenAI-style errors for bad bodies; the
 * results a permutation of the documents, best first, cut at top_n, with
 * the documents when asked; a document's score the same whatever else is
 * in the request (batch invariance) and on a second call (the prefix
 * cache); and, with Qwen2.5-Coder-0.5B, the document that answers ranked
 * first on plain cases.
 */
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>

#include "serve_harness.h"
#include "test.h"

/* The results of a rerank reply: index and score per rank, into idx/score;
 * their count, or -1. */
static int results(const char *body, int *idx, double *score, int max, bool *docs) {
    json_error_t je;
    json_t *root = json_loads(body ? body : "", 0, &je);
    json_t *res = json_object_get(root, "results");
    int n = json_is_array(res) ? (int)json_array_size(res) : -1;
    *docs = n > 0;
    for (int i = 0; i < n && i < max; i++) {
        json_t *x = json_array_get(res, (size_t)i);
        idx[i] = (int)json_integer_value(json_object_get(x, "index"));
        score[i] = json_number_value(json_object_get(x, "relevance_score"));
        *docs = *docs && json_is_object(json_object_get(x, "document"));
    }
    json_decref(root);
    return n;
}

static const char *DOCS =
    "[\"The NV-TH220 thermometer's battery lasts two years.\",\"Sourdough rises because of wild yeast.\","
    "{\"text\":\"Returns are accepted within thirty days.\"},\"The Eiffel Tower is in Paris.\"]";

TEST(serve_rerank_shape_and_invariance) {
    struct serve_proc s;
    if (!serve_start(&s, "-t 2 -c 1024", 120)) return;
    struct http_reply r;
    char body[2048];
    static const char *const bad[] = {
        "{}", "{\"query\":\"x\"}", "{\"query\":\"\",\"documents\":[\"a\"]}", "{\"query\":\"x\",\"documents\":[]}",
        "{\"query\":\"x\",\"documents\":[1]}", "{\"query\":\"x\",\"documents\":[\"a\"],\"top_n\":2}",
        "{\"query\":\"x\",\"documents\":[{\"txt\":\"a\"}]}", "[1,2]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(http_post(&s, "/v1/rerank", bad[i], &r) == 400, "%s: %ld", bad[i], r.status);
        CHECK(r.body && strstr(r.body, "\"error\""));
        http_reply_free(&r);
    }
    snprintf(body, sizeof body, "{\"query\":\"How long does the thermometer battery last?\",\"documents\":%s}", DOCS);
    REQUIRE(http_post(&s, "/v1/rerank", body, &r) == 200);
    int idx[8];
    double sc[8];
    bool docs;
    int n = results(r.body, idx, sc, 8, &docs);
    http_reply_free(&r);
    REQUIRE(n == 4);
    CHECK(!docs);
    int seen = 0;
    for (int i = 0; i < n; i++) {
        CHECK(idx[i] >= 0 && idx[i] < 4 && sc[i] >= 0 && sc[i] <= 1);
        seen |= 1 << idx[i];
        if (i) CHECK(sc[i] <= sc[i - 1]);
    }
    CHECK(seen == 15);
    /* each document alone scores what it scored among the others */
    static const char *const one[4] = {"\"The NV-TH220 thermometer's battery lasts two years.\"",
                                       "\"Sourdough rises because of wild yeast.\"",
                                       "\"Returns are accepted within thirty days.\"", "\"The Eiffel Tower is in Paris.\""};
    for (int d = 0; d < 4; d++) {
        snprintf(body, sizeof body,
                 "{\"query\":\"How long does the thermometer battery last?\",\"documents\":[%s],\"return_documents\":true}",
                 one[d]);
        REQUIRE(http_post(&s, "/v1/rerank", body, &r) == 200);
        int i1;
        double s1;
        CHECK(results(r.body, &i1, &s1, 1, &docs) == 1 && i1 == 0 && docs);
        http_reply_free(&r);
        for (int i = 0; i < n; i++)
            if (idx[i] == d) CHECK_MSG(fabs(sc[i] - s1) < 1e-6, "document %d: %g among others, %g alone", d, sc[i], s1);
    }
    /* top_n */
    snprintf(body, sizeof body, "{\"query\":\"How long does the thermometer battery last?\",\"texts\":%s,\"top_n\":2}",
             DOCS);
    REQUIRE(http_post(&s, "/v1/rerank", body, &r) == 200);
    int idx2[8];
    double sc2[8];
    CHECK(results(r.body, idx2, sc2, 8, &docs) == 2 && idx2[0] == idx[0] && idx2[1] == idx[1]);
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}

TEST(serve_rerank_qwen_ranks_the_answer_first) {
    char model[4096], args[4200];
    if (!test_registry_model("qwen2.5-coder-0.5b", model, sizeof model)) return;
    snprintf(args, sizeof args, "-m %s -t 2 -c 1024", model);
    struct serve_proc s;
    if (!serve_start(&s, args, 120)) return;
    static const struct {
        const char *query;
        int answer; /* its index in DOCS */
    } cases[] = {
        {"How long does the NV-TH220 battery last?", 0},
        {"Why does sourdough bread rise?", 1},
        {"Within how many days can I return a product?", 2},
        {"In which city is the Eiffel Tower?", 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char body[2048];
        snprintf(body, sizeof body, "{\"query\":\"%s\",\"documents\":%s}", cases[c].query, DOCS);
        struct http_reply r;
        REQUIRE(http_post(&s, "/v1/rerank", body, &r) == 200);
        int idx[8];
        double sc[8];
        bool docs;
        CHECK(results(r.body, idx, sc, 8, &docs) == 4);
        CHECK_MSG(idx[0] == cases[c].answer, "'%s': document %d first (%s)", cases[c].query, idx[0], r.body);
        http_reply_free(&r);
    }
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}
