/*
 * serve_harness.c — the child server and the libcurl client of the
 * end-to-end tests (see serve_harness.h).
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "serve_harness.h"
#include "test.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

char *serve_log(const struct serve_proc *s) {
    size_t n;
    char *t = test_slurp(s->log_path, &n);
    return t ? t : strdup("");
}

/* The child exited: reports it with its log and forgets it. */
static void child_exited(struct serve_proc *s, int st, const char *when) {
    char *log = serve_log(s);
    test_fail(__FILE__, __LINE__, "kvik serve exited (%d) %s: %s", WIFEXITED(st) ? WEXITSTATUS(st) : -1, when, log);
    free(log);
    s->pid = 0;
    remove(s->log_path);
}

bool serve_spawn(struct serve_proc *s, const char *env, const char *args, double timeout_s) {
    static int serial;
    pthread_once(&curl_once, curl_init);
    memset(s, 0, sizeof *s);
    char model[1024] = "";
    if (!strstr(args, "-m ") && !test_default_model(model, sizeof model)) return false;
    snprintf(s->log_path, sizeof s->log_path, "/tmp/kvik-serve-%d-%d.log", (int)getpid(), serial++);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s%sexec '%s' serve --port 0 %s%s%s %s 2>'%s' >/dev/null </dev/null", env ? env : "",
             env ? " " : "", test_env("KVIK_BIN"), model[0] ? "-m '" : "", model, model[0] ? "'" : "", args,
             s->log_path);
    pid_t pid = fork();
    if (pid < 0) {
        test_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    double t0 = now_s();
    while (now_s() - t0 < timeout_s) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            child_exited(s, st, "before it listened");
            return false;
        }
        char *log = serve_log(s);
        const char *p = strstr(log, "listening on http://");
        const char *nl = p ? strchr(p, '\n') : NULL;
        if (nl) {
            const char *colon = nl;
            while (colon > p && *colon != ':') colon--;
            s->port = atoi(colon + 1);
        }
        free(log);
        if (s->port) return true;
        usleep(10000);
    }
    test_fail(__FILE__, __LINE__, "kvik serve not listening after %.0f s", timeout_s);
    serve_stop(s, SIGKILL, 5);
    return false;
}

bool serve_wait_ready(struct serve_proc *s, double timeout_s) {
    double t0 = now_s();
    while (now_s() - t0 < timeout_s) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            child_exited(s, st, "before it was ready");
            return false;
        }
        struct http_reply r;
        long code = http_call(s, "GET", "/health", NULL, NULL, false, 2, &r);
        /* while the model loads: 503 {"status":"loading"}; then 200 {"status":"ok"} */
        if (code == 503) {
            CHECK_MSG(strstr(r.body, "\"loading\"") != NULL, "/health 503 while starting: %s", r.body);
            s->loading_seen++;
        } else if (code == 200) {
            CHECK_MSG(strstr(r.body, "\"ok\"") != NULL, "/health 200: %s", r.body);
        } else if (code != 0) {
            test_fail(__FILE__, __LINE__, "/health answered %ld while starting", code);
        }
        http_reply_free(&r);
        if (code == 200) return true;
        usleep(20000);
    }
    test_fail(__FILE__, __LINE__, "kvik serve not ready after %.0f s", timeout_s);
    serve_stop(s, SIGKILL, 5);
    return false;
}

bool serve_start(struct serve_proc *s, const char *args, double timeout_s) {
    double t0 = now_s();
    return serve_spawn(s, NULL, args, timeout_s) && serve_wait_ready(s, timeout_s - (now_s() - t0));
}

int serve_stop(struct serve_proc *s, int sig, double timeout_s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, sig);
    double t0 = now_s();
    int st = 0, rc = -1;
    for (;;) {
        pid_t w = waitpid(s->pid, &st, WNOHANG);
        if (w == s->pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            break;
        }
        if (w < 0) break;
        if (now_s() - t0 > timeout_s) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            rc = -1;
            break;
        }
        usleep(10000);
    }
    s->pid = 0;
    remove(s->log_path);
    return rc;
}

/* ---- libcurl -------------------------------------------------------- */

struct sink {
    char *p;
    size_t len, cap;
    size_t max; /* hang up past this many bytes (0: never) */
};

static size_t on_data(char *data, size_t size, size_t n, void *user) {
    struct sink *k = user;
    size_t add = size * n;
    if (k->len + add + 1 > k->cap) {
        size_t nc = (k->cap ? k->cap * 2 : 4096) + add + 1;
        char *np = realloc(k->p, nc);
        if (!np) return 0;
        k->p = np;
        k->cap = nc;
    }
    memcpy(k->p + k->len, data, add);
    k->len += add;
    k->p[k->len] = 0;
    if (k->max && k->len >= k->max) return 0; /* abort the transfer: hang up */
    return add;
}

static size_t on_header(char *data, size_t size, size_t n, void *user) {
    struct http_reply *r = user;
    size_t len = size * n;
    char line[256];
    size_t m = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, data, m);
    line[m] = 0;
    line[strcspn(line, "\r\n")] = 0;
    if (!strncasecmp(line, "Retry-After:", 12)) snprintf(r->retry_after, sizeof r->retry_after, "%s", line + 12 + strspn(line + 12, " "));
    if (!strncasecmp(line, "Content-Type:", 13)) snprintf(r->content_type, sizeof r->content_type, "%s", line + 13 + strspn(line + 13, " "));
    if (!strncasecmp(line, "X-Kvik-Cache:", 13)) snprintf(r->kvik_cache, sizeof r->kvik_cache, "%s", line + 13 + strspn(line + 13, " "));
    return len;
}

struct upload {
    const char *p;
    size_t left;
};

static size_t on_read(char *buf, size_t size, size_t n, void *user) {
    struct upload *u = user;
    size_t m = size * n < u->left ? size * n : u->left;
    memcpy(buf, u->p, m);
    u->p += m;
    u->left -= m;
    return m;
}

static long do_call(const struct serve_proc *s, const char *method, const char *path, const char *body,
                    const char *const *headers, bool chunked, double timeout_s, struct http_reply *r,
                    size_t hang_up_after) {
    pthread_once(&curl_once, curl_init);
    memset(r, 0, sizeof *r);
    CURL *c = curl_easy_init();
    if (!c) return 0;
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    struct sink k = {.max = hang_up_after};
    struct curl_slist *h = NULL;
    for (int i = 0; headers && headers[i]; i++) h = curl_slist_append(h, headers[i]);
    struct upload up = {body, body ? strlen(body) : 0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    if (timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    if (!strcmp(method, "POST")) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        if (chunked) {
            h = curl_slist_append(h, "Transfer-Encoding: chunked");
            curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(c, CURLOPT_READDATA, &up);
        } else {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? strlen(body) : 0));
        }
        h = curl_slist_append(h, "Content-Type: application/json");
        h = curl_slist_append(h, "Expect:");
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    if (rc == CURLE_OK || (hang_up_after && rc == CURLE_WRITE_ERROR))
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    r->status = code;
    r->body = k.p ? k.p : strdup("");
    r->len = k.len;
    return code;
}

long http_call(const struct serve_proc *s, const char *method, const char *path, const char *body,
               const char *const *headers, bool chunked, double timeout_s, struct http_reply *r) {
    return do_call(s, method, path, body, headers, chunked, timeout_s, r, 0);
}

long http_post(const struct serve_proc *s, const char *path, const char *body, struct http_reply *r) {
    return do_call(s, "POST", path, body, NULL, false, 300, r, 0);
}

size_t http_post_and_hang_up(const struct serve_proc *s, const char *path, const char *body, size_t max_bytes) {
    struct http_reply r;
    do_call(s, "POST", path, body, NULL, false, 300, &r, max_bytes);
    size_t n = r.len;
    http_reply_free(&r);
    return n;
}

void http_reply_free(struct http_reply *r) {
    free(r->body);
    memset(r, 0, sizeof *r);
}

bool metrics_value(const char *text, const char *series, double *out) {
    size_t n = strlen(series);
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, series, n) && p[n] == ' ') {
            *out = strtod(p + n + 1, NULL);
            return true;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    return false;
}

int test_promtool_check(const char *text, char *out, size_t out_len) {
    if (system("command -v promtool >/dev/null 2>&1") != 0) return -1;
    static int serial;
    char path[96];
    snprintf(path, sizeof path, "/tmp/kvik-metrics-%d-%d.txt", (int)getpid(), serial++);
    FILE *f = fopen(path, "w");
    if (!f) return -2;
    fputs(text, f);
    fclose(f);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, out_len - 1, p) : 0;
    out[n] = 0;
    int st = p ? pclose(p) : -1;
    remove(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -3;
}

/* The python of the pinned venv that scripts/SCRIPT builds (once, then
 * cached) into python; false with the test skipped (no python or no PyPI:
 * exit 77) or failed. */
bool test_venv_python(const char *root, const char *script, char *python, size_t len) {
    char cmd[2300], errpath[96];
    snprintf(errpath, sizeof errpath, "/tmp/kvik-venv-%d.err", (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s/scripts/%s' 2>'%s'", root, script, errpath);
    FILE *p = popen(cmd, "r");
    if (!p) {
        test_fail(__FILE__, __LINE__, "popen failed");
        return false;
    }
    if (!fgets(python, (int)len, p)) python[0] = 0;
    int st = pclose(p);
    python[strcspn(python, "\n")] = 0;
    size_t elen;
    char *venv_err = test_slurp(errpath, &elen);
    remove(errpath);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !python[0]) {
        /* the script's own message is the last line of its stderr */
        const char *last = "building the venv failed";
        if (venv_err) {
            size_t n = strlen(venv_err);
            while (n && venv_err[n - 1] == '\n') venv_err[--n] = 0;
            char *nl = strrchr(venv_err, '\n');
            if (n) last = nl ? nl + 1 : venv_err;
        }
        static char why[600]; /* test_skip keeps the pointer */
        snprintf(why, sizeof why, "skipped (%s): %s", script, last);
        free(venv_err);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77) test_skip(why);
        else test_fail(__FILE__, __LINE__, "%s", why);
        return false;
    }
    free(venv_err);
    return true;
}
