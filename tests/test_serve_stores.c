/*
 * test_serve_stores.c — /v1/files and /v1/vector_stores of `kvik serve`
 * over HTTP, with all-MiniLM-L6-v2 as the embedding model: the official
 * openai client as an application uses it, with a second API key as
 * another tenant (tests/serve/openai_vector_stores_test.py); bad requests;
 * and durability: the server stopped by SIGTERM, or killed by SIGKILL,
 * while a client adds documents, then started again on the same
 * --data-dir, holds every document whose request was answered 200.
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve_harness.h"
#include "test.h"

static bool start_minilm(struct serve_proc *s, const char *dir, const char *extra) {
    char model[4096], args[8400];
    if (!test_cached_model("all-MiniLM-L6-v2-F16.gguf", model, sizeof model)) return false;
    snprintf(args, sizeof args, "-m %s -t 1 --api-key k1,k2 --data-dir %s %s", model, dir, extra ? extra : "");
    return serve_start(s, args, 60);
}

static const char *const AUTH1[] = {"Authorization: Bearer k1", "Content-Type: application/json", NULL};

/* A JSON reply's string field (static buffer), "" when absent. */
static const char *field(const char *body, const char *name) {
    static char out[256];
    json_error_t je;
    json_t *root = json_loads(body ? body : "", 0, &je);
    const char *v = json_string_value(json_object_get(root, name));
    snprintf(out, sizeof out, "%s", v ? v : "");
    json_decref(root);
    return out;
}

TEST(serve_stores_openai_client) {
    char root[1024], python[1024] = "", cmd[4096];
    if (!test_repo_root(root, sizeof root)) {
        test_skip("KVIK_TEST_DATA does not name ROOT/tests/data");
        return;
    }
    if (!test_venv_python(root, "serve-venv.sh", python, sizeof python)) return;
    char dir[] = "/tmp/kvik-stores-XXXXXX";
    REQUIRE(mkdtemp(dir));
    struct serve_proc s;
    if (!start_minilm(&s, dir, NULL)) return;
    snprintf(cmd, sizeof cmd,
             "'%s' '%s/tests/serve/openai_vector_stores_test.py' --base-url http://127.0.0.1:%d/v1 --api-key k1 "
             "--other-key k2 2>&1",
             python, root, s.port);
    static char out[1 << 16];
    if (test_run_cmd(cmd, out, sizeof out) != 0 || !strstr(out, " 0 failed")) {
        printf("%s", out);
        test_fail(__FILE__, __LINE__, "openai_vector_stores_test.py failed");
    }
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(serve_stores_bad_requests) {
    char dir[] = "/tmp/kvik-stores-XXXXXX";
    REQUIRE(mkdtemp(dir));
    struct serve_proc s;
    if (!start_minilm(&s, dir, "--max-file-size 1000")) return;
    struct http_reply r;
    static const char *const no_key[] = {"Content-Type: application/json", NULL};
    CHECK(http_call(&s, "GET", "/v1/vector_stores", NULL, no_key, false, 10, &r) == 401);
    http_reply_free(&r);
    CHECK(http_call(&s, "POST", "/v1/vector_stores", "{\"name\": 5}", AUTH1, false, 10, &r) == 400);
    CHECK(strstr(r.body, "\"param\":\"name\"") != NULL);
    http_reply_free(&r);
    CHECK(http_call(&s, "POST", "/v1/vector_stores", "{not json", AUTH1, false, 10, &r) == 400);
    http_reply_free(&r);
    CHECK(http_call(&s, "PUT", "/v1/vector_stores", "{}", AUTH1, false, 10, &r) == 405);
    http_reply_free(&r);
    CHECK(http_call(&s, "GET", "/v1/vector_stores/vs_x/nothing", NULL, AUTH1, false, 10, &r) == 404);
    http_reply_free(&r);
    CHECK(http_call(&s, "GET", "/v1/files/file-nope", NULL, AUTH1, false, 10, &r) == 404);
    http_reply_free(&r);
    /* uploads: not multipart, no boundary, no purpose, over the size limit */
    CHECK(http_call(&s, "POST", "/v1/files", "{}", AUTH1, false, 10, &r) == 400);
    http_reply_free(&r);
    static const char *const mp[] = {"Authorization: Bearer k1", "Content-Type: multipart/form-data; boundary=XyZ",
                                     NULL};
    CHECK(http_call(&s, "POST", "/v1/files", "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
                    "filename=\"a.txt\"\r\n\r\nhello\r\n--XyZ--\r\n", mp, false, 10, &r) == 400);
    CHECK(strstr(r.body, "purpose") != NULL);
    http_reply_free(&r);
    CHECK(http_call(&s, "POST", "/v1/files", "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
                    "filename=\"a.txt\"\r\n\r\nhello", mp, false, 10, &r) == 400);
    http_reply_free(&r);
    static char big[4096];
    int n = snprintf(big, sizeof big, "--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nassistants\r\n"
                     "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\n\r\n");
    memset(big + n, 'a', 2000);
    snprintf(big + n + 2000, sizeof big - (size_t)n - 2000, "\r\n--XyZ--\r\n");
    CHECK(http_call(&s, "POST", "/v1/files", big, mp, false, 10, &r) == 413);
    http_reply_free(&r);
    /* a store, then bad searches and chunking */
    REQUIRE(http_call(&s, "POST", "/v1/vector_stores", "{\"name\":\"t\"}", AUTH1, false, 10, &r) == 200);
    char vs[64], path[256];
    snprintf(vs, sizeof vs, "%s", field(r.body, "id"));
    http_reply_free(&r);
    snprintf(path, sizeof path, "/v1/vector_stores/%s/search", vs);
    static const char *const bad[] = {
        "{}", "{\"query\":[]}", "{\"query\":\"x\",\"max_num_results\":51}",
        "{\"query\":\"x\",\"filters\":{\"type\":\"eq\",\"key\":\"a\"}}",
        "{\"query\":\"x\",\"filters\":{\"type\":\"in\",\"key\":\"a\",\"value\":3}}",
        "{\"query\":\"x\",\"ranking_options\":{\"score_threshold\":\"high\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(http_call(&s, "POST", path, bad[i], AUTH1, false, 10, &r) == 400, "%s: %ld", bad[i], r.status);
        http_reply_free(&r);
    }
    /* a filter nested past its depth is refused, not followed */
    static char deep[4096];
    size_t at = 0;
    at += (size_t)snprintf(deep, sizeof deep, "{\"query\":\"x\",\"filters\":");
    for (int i = 0; i < 40; i++) at += (size_t)snprintf(deep + at, sizeof deep - at, "{\"type\":\"and\",\"filters\":[");
    at += (size_t)snprintf(deep + at, sizeof deep - at, "{\"type\":\"eq\",\"key\":\"a\",\"value\":1}");
    for (int i = 0; i < 40; i++) at += (size_t)snprintf(deep + at, sizeof deep - at, "]}");
    snprintf(deep + at, sizeof deep - at, "}");
    CHECK(http_call(&s, "POST", path, deep, AUTH1, false, 10, &r) == 400);
    http_reply_free(&r);
    snprintf(path, sizeof path, "/v1/vector_stores/%s/texts", vs);
    CHECK(http_call(&s, "POST", path, "{\"texts\":[\"a\"],\"chunking_strategy\":{\"type\":\"static\",\"static\":"
                    "{\"max_chunk_size_tokens\":50,\"chunk_overlap_tokens\":0}}}", AUTH1, false, 10, &r) == 400);
    http_reply_free(&r);
    /* the server still answers */
    CHECK(http_call(&s, "GET", "/health", NULL, NULL, false, 10, &r) == 200);
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

struct writer {
    const struct serve_proc *s;
    char path[256];
    char (*acked)[48]; /* the ids of texts answered 200 */
    _Atomic int n_acked;
    int cap;
};

/* Adds one text a request until a request fails (the server has gone). */
static void *write_texts(void *arg) {
    struct writer *w = arg;
    for (int i = 0; i < w->cap; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"texts\":[{\"text\":\"Document %d: the part number is NV-%05d and it ships from warehouse %d.\","
                 "\"attributes\":{\"n\":%d}}]}", i, i * 7, i % 5, i);
        struct http_reply r;
        long st = http_call(w->s, "POST", w->path, body, AUTH1, false, 30, &r);
        if (st == 200) {
            json_error_t je;
            json_t *root = json_loads(r.body, 0, &je);
            const char *id = json_string_value(json_object_get(json_array_get(json_object_get(root, "data"), 0), "id"));
            if (id) snprintf(w->acked[atomic_load(&w->n_acked)], 48, "%s", id);
            json_decref(root);
            if (id) atomic_fetch_add(&w->n_acked, 1);
        }
        http_reply_free(&r);
        if (st != 200) break;
    }
    return NULL;
}

/* Inserts until `after` are acknowledged, stops the server with sig, and
 * checks a restarted server holds every acknowledged text. */
static void stop_mid_insert(int sig) {
    char dir[] = "/tmp/kvik-stores-XXXXXX";
    REQUIRE(mkdtemp(dir));
    struct serve_proc s;
    if (!start_minilm(&s, dir, NULL)) return;
    struct http_reply r;
    REQUIRE(http_call(&s, "POST", "/v1/vector_stores", "{\"name\":\"log\"}", AUTH1, false, 10, &r) == 200);
    char vs[64];
    snprintf(vs, sizeof vs, "%s", field(r.body, "id"));
    http_reply_free(&r);
    struct writer w = {.s = &s, .cap = 5000};
    REQUIRE((w.acked = calloc((size_t)w.cap, sizeof *w.acked)));
    snprintf(w.path, sizeof w.path, "/v1/vector_stores/%s/texts", vs);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, write_texts, &w) == 0);
    for (int i = 0; i < 6000 && atomic_load(&w.n_acked) < 40; i++) usleep(5000);
    if (sig == SIGKILL) {
        kill(s.pid, SIGKILL);
        int status;
        waitpid(s.pid, &status, 0);
        char *log = serve_log(&s);
        free(log);
        unlink(s.log_path);
    } else {
        CHECK_EQ_INT(serve_stop(&s, sig, 60), 0);
    }
    pthread_join(th, NULL);
    int n = atomic_load(&w.n_acked);
    CHECK_MSG(n >= 40, "only %d texts were acknowledged", n);
    /* again on the same folder */
    struct serve_proc s2;
    REQUIRE(start_minilm(&s2, dir, NULL));
    int missing = 0;
    for (int i = 0; i < n; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/vector_stores/%s/files/%s", vs, w.acked[i]);
        if (http_call(&s2, "GET", path, NULL, AUTH1, false, 10, &r) != 200 || !strstr(r.body, "\"completed\""))
            missing++;
        http_reply_free(&r);
    }
    CHECK_MSG(missing == 0, "%d of %d acknowledged texts lost after %s", missing, n,
              sig == SIGKILL ? "SIGKILL" : "SIGTERM");
    /* and they are searchable: the last acknowledged one is found by its part number */
    char path[256], body[256];
    snprintf(path, sizeof path, "/v1/vector_stores/%s/search", vs);
    snprintf(body, sizeof body, "{\"query\":\"NV-%05d\",\"ranking_options\":{\"ranker\":\"bm25\"},"
             "\"max_num_results\":1}", (n - 1) * 7);
    REQUIRE(http_call(&s2, "POST", path, body, AUTH1, false, 10, &r) == 200);
    CHECK_MSG(strstr(r.body, w.acked[n - 1]) != NULL, "%s", r.body);
    http_reply_free(&r);
    CHECK_EQ_INT(serve_stop(&s2, SIGTERM, 60), 0);
    free(w.acked);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(serve_stores_sigterm_mid_insert_loses_nothing) { stop_mid_insert(SIGTERM); }

TEST(serve_stores_sigkill_mid_insert_loses_nothing) { stop_mid_insert(SIGKILL); }
