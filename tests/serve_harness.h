/*
 * serve_harness.h — `kvik serve` as a child process for the end-to-end
 * tests, and a small libcurl client.
 *
 * serve_start runs `$KVIK_BIN serve --port 0 ARGS` with stderr in a file,
 * reads the port from its "listening on http://HOST:PORT" line
 * (serve_spawn) and waits until /health answers 200 or the child exits
 * (serve_wait_ready). The tests then talk HTTP to 127.0.0.1:PORT as any
 * client would.
 */
#ifndef KVIK_TESTS_SERVE_HARNESS_H
#define KVIK_TESTS_SERVE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct serve_proc {
    pid_t pid;
    int port;
    char log_path[96]; /* the child's stderr */
    int loading_seen;  /* /health answers 503 "loading" seen while starting */
};

/* Starts the server with the default model (-m is added unless args has
 * one). False (the test marked skipped when the model is missing, failed
 * otherwise) when it does not come up within timeout_s. */
bool serve_start(struct serve_proc *s, const char *args, double timeout_s);

/* The first half of serve_start: runs the server with env (shell words
 * NAME=VALUE before the command, NULL: none) and returns once it listens
 * (s->port set), whether or not the model is loaded yet. */
bool serve_spawn(struct serve_proc *s, const char *env, const char *args, double timeout_s);

/* The second half: polls /health until 200 (counting 503 "loading"
 * answers in s->loading_seen). False, the test failed and the child gone,
 * when it exits first or is not ready within timeout_s. */
bool serve_wait_ready(struct serve_proc *s, double timeout_s);

/* Sends sig (SIGTERM, SIGINT), waits up to timeout_s for the exit; the
 * exit status, -1 if it died of a signal or was killed after the timeout.
 * The log file is removed. */
int serve_stop(struct serve_proc *s, int sig, double timeout_s);

/* The server's stderr so far (malloc'd). */
char *serve_log(const struct serve_proc *s);

struct http_reply {
    long status;         /* HTTP status; 0: no response (connection failed) */
    char *body;          /* NUL-terminated, malloc'd */
    size_t len;
    char retry_after[16];/* the Retry-After header, "" if none */
    char content_type[96];
    char kvik_cache[16]; /* the X-Kvik-Cache header, "" if none */
};

/*
 * One request: method "GET"/"POST", path "/v1/...", body (NULL: none),
 * extra headers (NULL-terminated array, may be NULL). chunked: send the
 * body with Transfer-Encoding: chunked (no Content-Length). timeout_s 0:
 * none. Returns status (also in r->status); free r with http_reply_free.
 */
long http_call(const struct serve_proc *s, const char *method, const char *path, const char *body,
               const char *const *headers, bool chunked, double timeout_s, struct http_reply *r);
void http_reply_free(struct http_reply *r);

/* POST path with a JSON body, no extra headers. */
long http_post(const struct serve_proc *s, const char *path, const char *body, struct http_reply *r);

/* Reads a streamed POST until max_bytes have arrived, then hangs up
 * (a client that goes away mid-stream); returns the bytes read. */
size_t http_post_and_hang_up(const struct serve_proc *s, const char *path, const char *body,
                             size_t max_bytes);

/* The value of one sample line of a Prometheus text ("name{labels}");
 * false if absent. */
bool metrics_value(const char *text, const char *series, double *out);

/* Runs `promtool check metrics` on text: its exit status, -1 when promtool
 * is not installed; out gets its output. */
int test_promtool_check(const char *text, char *out, size_t out_len);

/* The python of the pinned venv that ROOT/scripts/SCRIPT builds (once,
 * then cached) into python; false with the test skipped (no python or no
 * PyPI: the script exits 77) or failed. */
bool test_venv_python(const char *root, const char *script, char *python, size_t len);

#endif /* KVIK_TESTS_SERVE_HARNESS_H */
