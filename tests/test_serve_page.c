/*
 * test_serve_page.c — the chat page at / of `kvik serve`: served without
 * the API key (the page asks for it), byte for byte the file in the
 * repository; and in headless Chromium (tests/serve/chat_page_test.py with
 * selenium): it loads, a message typed and sent streams the reply the
 * server generates, its TTFT and tok/s show, Stop ends a reply. The
 * screenshot is kept in build/test-artifacts/chat-page.png.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve_harness.h"
#include "test.h"

TEST(serve_page_is_served_without_the_key) {
    char root[1024], path[1200], model[4096], args[4200];
    if (!test_repo_root(root, sizeof root)) {
        test_skip("KVIK_TEST_DATA does not name ROOT/tests/data");
        return;
    }
    if (!test_default_model(model, sizeof model)) return;
    snprintf(path, sizeof path, "%s/src/server/chat_page.html", root);
    size_t want_len;
    char *want = test_slurp(path, &want_len);
    REQUIRE(want);
    snprintf(args, sizeof args, "-m %s -t 1 --api-key k1", model);
    struct serve_proc s;
    if (!serve_start(&s, args, 60)) {
        free(want);
        return;
    }
    struct http_reply r;
    CHECK(http_call(&s, "GET", "/", NULL, NULL, false, 10, &r) == 200);
    CHECK(strstr(r.content_type, "text/html") != NULL);
    CHECK_MSG(r.len == want_len && !memcmp(r.body, want, want_len), "GET / is %zu bytes, the file %zu", r.len,
              want_len);
    /* nothing outside: no http(s) URL in the page */
    CHECK(!strstr(r.body, "http://") && !strstr(r.body, "https://"));
    http_reply_free(&r);
    CHECK(http_call(&s, "POST", "/", "{}", NULL, false, 10, &r) == 405);
    http_reply_free(&r);
    CHECK(http_call(&s, "GET", "/v1/models", NULL, NULL, false, 10, &r) == 401);
    http_reply_free(&r);

    /* the browser */
    char python[1024] = "", cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/scripts/page-venv.sh' 2>/dev/null", root);
    FILE *p = access("/usr/bin/chromedriver", X_OK) == 0 ? popen(cmd, "r") : NULL;
    if (!p || !fgets(python, sizeof python, p)) {
        if (p) pclose(p);
        test_skip("no headless browser: chromium-driver (scripts/install-deps.sh test) or the selenium venv "
                  "(scripts/page-venv.sh) missing");
    } else {
        pclose(p);
        python[strcspn(python, "\n")] = 0;
        snprintf(path, sizeof path, "%s/build/test-artifacts", root);
        mkdir(path, 0755);
        snprintf(cmd, sizeof cmd,
                 "'%s' '%s/tests/serve/chat_page_test.py' --url http://127.0.0.1:%d --api-key k1 "
                 "--screenshot '%s/chat-page.png' 2>&1",
                 python, root, s.port, path);
        static char out[1 << 16];
        int st = test_run_cmd(cmd, out, sizeof out);
        printf("%s", out);
        CHECK_MSG(st == 0, "chat_page_test.py failed (exit %d)", st);
        snprintf(cmd, sizeof cmd, "%s/chat-page.png", path);
        struct stat sb;
        CHECK_MSG(stat(cmd, &sb) == 0 && sb.st_size > 1000, "no screenshot at %s", cmd);
    }
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
    free(want);
}
