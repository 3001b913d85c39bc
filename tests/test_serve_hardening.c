/*
 * test_serve_hardening.c — `kvik serve` against clients that starve or
 * smuggle, on raw sockets to 127.0.0.1 (serve_harness.c starts the
 * server). Other loopback source addresses (127.0.0.2, ...) stand for
 * other clients of the per-address connection limit.
 *
 * Covered: the header fields (http_check.c) as pure functions and as the
 * server answers them: two different Content-Lengths, Content-Length with
 * Transfer-Encoding, unknown codings (501), chunked twice, HTTP/1.0 with
 * Transfer-Encoding, a chunk size over 64 bits, a NUL or a control byte
 * in Authorization, a space before the colon, a folded line; 401 before
 * 404 under /v1; deadlines: a body shorter than its Content-Length, a
 * chunk that never ends, a chunked body far over the limit, a silent new
 * connection, an idle kept-alive connection; slow clients dribbling
 * headers at the default connection caps while others are served, and the
 * probe's case (--max-connections 8, eight slow sockets from one address).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve_harness.h"
#include "server/http_check.h"
#include "test.h"

/* ---- the pure checks --------------------------------------------------- */

static int check(const char *const *kv, size_t n, bool http10, struct http_framing *fr) {
    struct http_field f[16];
    for (size_t i = 0; i < n; i++)
        f[i] = (struct http_field){kv[2 * i], strlen(kv[2 * i]), kv[2 * i + 1], strlen(kv[2 * i + 1])};
    const char *why = "";
    return http_check_fields(f, n, http10, fr, &why);
}

TEST(server_http_check_fields) {
    struct http_framing fr;
    const char *ok1[] = {"Host", "x", "Content-Length", "15"};
    CHECK_EQ_INT(check(ok1, 2, false, &fr), 0);
    CHECK(fr.has_length && fr.length == 15 && !fr.chunked);
    const char *same[] = {"content-length", "15", "Content-Length", " 15 "};
    CHECK_EQ_INT(check(same, 2, false, &fr), 0);
    const char *differ[] = {"Content-Length", "15", "Content-Length", "3"};
    CHECK_EQ_INT(check(differ, 2, false, &fr), 400);
    const char *nan[] = {"Content-Length", "1e3"};
    CHECK_EQ_INT(check(nan, 1, false, &fr), 400);
    const char *empty_cl[] = {"Content-Length", ""};
    CHECK_EQ_INT(check(empty_cl, 1, false, &fr), 400);
    const char *huge[] = {"Content-Length", "18446744073709551616"}; /* 2^64 */
    CHECK_EQ_INT(check(huge, 1, false, &fr), 400);
    const char *max[] = {"Content-Length", "18446744073709551615"};
    CHECK_EQ_INT(check(max, 1, false, &fr), 0);
    CHECK(fr.length == UINT64_MAX);
    const char *cl_te[] = {"Content-Length", "15", "Transfer-Encoding", "chunked"};
    CHECK_EQ_INT(check(cl_te, 2, false, &fr), 400);
    const char *te_cl[] = {"Transfer-Encoding", "chunked", "Content-Length", "15"};
    CHECK_EQ_INT(check(te_cl, 2, false, &fr), 400);
    const char *chunked[] = {"transfer-encoding", "Chunked"};
    CHECK_EQ_INT(check(chunked, 1, false, &fr), 0);
    CHECK(fr.chunked && !fr.has_length);
    CHECK_EQ_INT(check(chunked, 1, true, &fr), 400); /* HTTP/1.0 */
    const char *gzip[] = {"Transfer-Encoding", "gzip"};
    CHECK_EQ_INT(check(gzip, 1, false, &fr), 501);
    const char *gzip_chunked[] = {"Transfer-Encoding", "gzip, chunked"};
    CHECK_EQ_INT(check(gzip_chunked, 1, false, &fr), 501);
    const char *twice[] = {"Transfer-Encoding", "chunked", "Transfer-Encoding", "chunked"};
    CHECK_EQ_INT(check(twice, 2, false, &fr), 400);
    const char *list_twice[] = {"Transfer-Encoding", "chunked , chunked"};
    CHECK_EQ_INT(check(list_twice, 1, false, &fr), 400);
    const char *te_empty[] = {"Transfer-Encoding", " , "};
    CHECK_EQ_INT(check(te_empty, 1, false, &fr), 400);
    const char *space_name[] = {"Content-Length ", "15"};
    CHECK_EQ_INT(check(space_name, 1, false, &fr), 400);
    const char *ctl[] = {"Authorization", "Bearer k\x01"};
    CHECK_EQ_INT(check(ctl, 1, false, &fr), 400);
    const char *del[] = {"X-A", "a\x7f"};
    CHECK_EQ_INT(check(del, 1, false, &fr), 400);
    const char *tab_8bit[] = {"X-A", "a\tb \xc3\xa9"};
    CHECK_EQ_INT(check(tab_8bit, 1, false, &fr), 0);
    /* a NUL inside a value's given length */
    struct http_field nul = {"Authorization", 13, "Bearer k\0junk", 13};
    const char *why = "";
    CHECK_EQ_INT(http_check_fields(&nul, 1, false, &fr, &why), 400);
    struct http_field noname = {"", 0, "x", 1};
    CHECK_EQ_INT(http_check_fields(&noname, 1, false, &fr, &why), 400);
}

/* Header blocks laid out the way libmicrohttpd leaves them: NULs over
 * the separators and the line ends ("\r\n": two NULs). */
TEST(server_http_check_layout) {
    /* "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n\r\n" after parsing */
    char b1[] = "GET\0/\0HTTP/1.1\0\0Host\0 x\0\0Authorization\0 Bearer k\0\0\0";
    size_t len = sizeof b1 - 1;
    struct http_field f[2] = {{b1 + 16, 4, b1 + 22, 1}, {b1 + 25, 13, b1 + 40, 8}};
    CHECK(http_check_layout(b1, len, 14, f, 2));
    /* Bearer k\0junk: bytes after the value's end */
    char b2[] = "GET\0/\0HTTP/1.1\0\0Authorization\0 Bearer k\0junk\0\0\0\0";
    struct http_field g = {b2 + 16, 13, b2 + 31, 8};
    CHECK(!http_check_layout(b2, sizeof b2 - 1, 14, &g, 1));
    /* Bearer k\0 then the line end: one NUL too many */
    char b3[] = "GET\0/\0HTTP/1.1\0\0Authorization\0 Bearer k\0\0\0Host\0 x\0\0\0\0";
    struct http_field h[2] = {{b3 + 16, 13, b3 + 31, 8}, {b3 + 42, 4, b3 + 48, 1}};
    CHECK(!http_check_layout(b3, sizeof b3 - 1, 14, h, 2));
    /* the same with the line end's two NULs passes */
    char b4[] = "GET\0/\0HTTP/1.1\0\0Authorization\0 Bearer k\0\0Host\0 x\0\0\0\0";
    struct http_field k[2] = {{b4 + 16, 13, b4 + 31, 8}, {b4 + 41, 4, b4 + 47, 1}};
    CHECK(http_check_layout(b4, sizeof b4 - 1, 14, k, 2));
    /* a field outside the block (a folded line's copy) or out of order */
    static const char elsewhere[] = "X-Fold";
    struct http_field out[2] = {{b4 + 16, 13, b4 + 31, 8}, {elsewhere, 6, b4 + 47, 1}};
    CHECK(!http_check_layout(b4, sizeof b4 - 1, 14, out, 2));
    struct http_field swapped[2] = {k[1], k[0]};
    CHECK(!http_check_layout(b4, sizeof b4 - 1, 14, swapped, 2));
    /* an empty value: its colon and blanks lie before the next name */
    char b5[] = "GET\0/\0HTTP/1.1\0\0X-E\0  \0\0Host\0 x\0\0\0\0";
    struct http_field e[2] = {{b5 + 16, 3, "", 0}, {b5 + 24, 4, b5 + 30, 1}};
    CHECK(http_check_layout(b5, sizeof b5 - 1, 14, e, 2));
    b5[21] = 'j'; /* X-E:\0j... */
    CHECK(!http_check_layout(b5, sizeof b5 - 1, 14, e, 2));
    /* a NUL in the request line after the version */
    char b6[] = "GET\0/\0HTTP/1.1\0junk\0\0Host\0 x\0\0\0\0";
    struct http_field hh = {b6 + 21, 4, b6 + 27, 1};
    CHECK(!http_check_layout(b6, sizeof b6 - 1, 14, &hh, 1));
}

TEST(server_http_bearer_token_and_key_compare) {
    const char *t;
    size_t n;
    CHECK(http_bearer_token("Bearer abc", 10, &t, &n) && n == 3 && !memcmp(t, "abc", 3));
    CHECK(http_bearer_token("bearer   abc \t", 14, &t, &n) && n == 3 && !memcmp(t, "abc", 3));
    CHECK(http_bearer_token("Bearer ", 7, &t, &n) && n == 0);
    CHECK(!http_bearer_token("Basic abc", 9, &t, &n));
    CHECK(!http_bearer_token("Bearer", 6, &t, &n));
    CHECK(http_key_equal("s3cret", 6, "s3cret", 6));
    CHECK(!http_key_equal("s3cret", 6, "s3cres", 6));
    CHECK(!http_key_equal("s3cre", 5, "s3cret", 6));
    CHECK(!http_key_equal("s3cretx", 7, "s3cret", 6));
    CHECK(!http_key_equal("s3cret\0", 7, "s3cret", 6));
    CHECK(!http_key_equal("", 0, "k", 1));
}

TEST(serve_hardening_cli_flags) {
    static const char *const bad[] = {
        "serve --header-timeout 0", "serve --header-timeout x", "serve --body-timeout -1",
        "serve --body-timeout 1e9", "serve --max-connections-per-ip -1", "serve --max-connections-per-ip 2x",
        "serve --header-timeout",
    };
    char out[8192], err[4096];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int st = test_run_kvik(bad[i], out, sizeof out, err, sizeof err);
        CHECK_MSG(st == 2, "kvik %s: exit %d, want 2", bad[i], st);
    }
    CHECK_EQ_INT(test_run_kvik("serve --help", out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "--header-timeout") && strstr(out, "--body-timeout") && strstr(out, "--max-connections-per-ip"));
}

/* ---- raw sockets -------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A connection to the server from source address src (a 127.x.y.z); -1
 * if it cannot be made. */
static int raw_connect(const struct serve_proc *s, const char *src) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &me.sin_addr);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool raw_send(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Reads until the server closes (true) or limit_s passes (false); the
 * bytes in out[0..cap) (NUL-terminated, the rest dropped). */
static bool raw_read_to_close(int fd, double limit_s, char *out, size_t cap, size_t *len) {
    double t0 = now_s();
    *len = 0;
    out[0] = 0;
    for (;;) {
        double left = limit_s - (now_s() - t0);
        if (left <= 0) return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        char buf[4096];
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return true; /* EOF, or a reset after the reply */
        size_t m = (size_t)k < cap - 1 - *len ? (size_t)k : cap - 1 - *len;
        memcpy(out + *len, buf, m);
        *len += m;
        out[*len] = 0;
    }
}

/* The status of the first response in text; 0 if none. */
static int status_of(const char *text) {
    if (strncmp(text, "HTTP/1.1 ", 9) != 0) return 0;
    return atoi(text + 9);
}

/* Sends req[0..n) on a new connection from 127.0.0.1 and reads to the
 * close (within 20 s): the status of the reply, 0 if none; -1 when the
 * connection stayed open. The reply's text in out. */
static int raw_request_n(const struct serve_proc *s, const char *req, size_t n, char *out, size_t cap) {
    int fd = raw_connect(s, "127.0.0.1");
    if (fd < 0) return -2;
    size_t len = 0;
    bool closed = raw_send(fd, req, n) && raw_read_to_close(fd, 20, out, cap, &len);
    close(fd);
    return closed ? status_of(out) : -1;
}

static int raw_request(const struct serve_proc *s, const char *req, char *out, size_t cap) {
    return raw_request_n(s, req, strlen(req), out, cap);
}

/* The reply's body is an OpenAI error object with this code. */
static bool error_code_is(const char *reply, const char *code) {
    const char *body = strstr(reply, "\r\n\r\n");
    char want[96];
    snprintf(want, sizeof want, "\"code\":\"%s\"", code);
    return body && strstr(body, "{\"error\":{") && strstr(body, want);
}

#define EXPECT_RAW(s, req, want_status, want_code)                                                        \
    do {                                                                                                  \
        char out_[8192];                                                                                  \
        int st_ = raw_request(s, req, out_, sizeof out_);                                                 \
        CHECK_MSG(st_ == (want_status), "%.60s...: status %d, want %d: %.300s", req, st_, want_status, out_); \
        if (st_ == (want_status) && (want_code))                                                          \
            CHECK_MSG(error_code_is(out_, want_code), "%.60s...: want code %s: %.300s", req, (const char *)(want_code), out_); \
    } while (0)

/* One series of /metrics, asked from 127.0.0.2 (127.0.0.1 may be at its
 * connection limit); -1 if absent. */
static double metric(const struct serve_proc *s, const char *series) {
    static char out[1 << 16];
    double v = -1;
    int fd = raw_connect(s, "127.0.0.2");
    if (fd < 0) return v;
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t len;
    if (raw_send(fd, req, sizeof req - 1) && raw_read_to_close(fd, 20, out, sizeof out, &len) && status_of(out) == 200) {
        const char *body = strstr(out, "\r\n\r\n");
        if (body) metrics_value(body + 4, series, &v);
    }
    close(fd);
    return v;
}

#define H "Host: x\r\nConnection: close\r\n"
#define KEY "Authorization: Bearer k\r\n"
#define TOK "{\"content\":\"x\"}" /* 15 bytes */

TEST(serve_hardening_framing_and_auth) {
    struct serve_proc s;
    if (!serve_start(&s, "-t 1 -c 256 --api-key k --max-body 1024 --header-timeout 1 --body-timeout 1", 120)) return;

    /* framing */
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Content-Length: 15\r\n\r\n" TOK, 200, NULL);
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Content-Length: 15\r\nContent-Length: 3\r\n\r\n" TOK, 400,
               "invalid_header");
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Content-Length: 15\r\nContent-Length: 15\r\n\r\n" TOK, 200, NULL);
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Content-Length: 15\r\nTransfer-Encoding: chunked\r\n\r\n"
               "f\r\n" TOK "\r\n0\r\n\r\n", 400, "invalid_header");
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Transfer-Encoding: chunked\r\n\r\nf\r\n" TOK "\r\n0\r\n\r\n",
               200, NULL);
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Transfer-Encoding: gzip\r\n\r\n" TOK, 501,
               "unsupported_transfer_encoding");
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Transfer-Encoding: gzip, chunked\r\n\r\nf\r\n" TOK "\r\n0\r\n\r\n",
               501, "unsupported_transfer_encoding");
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
               "f\r\n" TOK "\r\n0\r\n\r\n", 400, "invalid_header");
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.0\r\n" H KEY "Transfer-Encoding: chunked\r\n\r\nf\r\n" TOK "\r\n0\r\n\r\n",
               400, "invalid_header");
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Content-Length : 15\r\n\r\n" TOK, 400, "invalid_header");
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Content-Length: 15\r\nTransfer-Encoding:\r\n chunked\r\n\r\n" TOK,
               400, "invalid_header");
    /* a chunk size over 64 bits: libmicrohttpd answers 413 itself, at once */
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Transfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\nabc", 413,
               NULL);
    /* chunk 2^64-1 that never ends: the body deadline (408) */
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc", 408,
               "request_timeout");
    /* ... and with bytes flowing: 413 once past twice the limit (1 KiB here) */
    {
        char req[8192];
        int k = snprintf(req, sizeof req, "POST /tokenize HTTP/1.1\r\n" H KEY "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n");
        memset(req + k, 'a', 3000);
        char out[8192];
        int st = raw_request_n(&s, req, (size_t)k + 3000, out, sizeof out);
        CHECK_MSG(st == 413 && error_code_is(out, "request_too_large"), "endless chunk: %d %.200s", st, out);
    }
    /* a body shorter than its Content-Length: 408 at the body deadline */
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Content-Length: 15\r\n\r\n{\"con", 408, "request_timeout");

    /* Authorization: control bytes and NULs */
    static const char nul_end[] = "GET /v1/models HTTP/1.1\r\n" H "Authorization: Bearer k\0\r\n\r\n";
    static const char nul_junk[] = "GET /v1/models HTTP/1.1\r\n" H "Authorization: Bearer k\0junk\r\n\r\n";
    static const char nul_last[] = "GET /v1/models HTTP/1.1\r\nAuthorization: Bearer k\0\r\n" H "\r\n";
    static const char nul_name[] = "GET /v1/models HTTP/1.1\r\n" H "Authoriz\0ation: Bearer k\r\n" KEY "\r\n";
    char out[8192];
    CHECK_EQ_INT(raw_request_n(&s, nul_end, sizeof nul_end - 1, out, sizeof out), 400);
    CHECK(error_code_is(out, "invalid_header"));
    CHECK_EQ_INT(raw_request_n(&s, nul_junk, sizeof nul_junk - 1, out, sizeof out), 400);
    CHECK_EQ_INT(raw_request_n(&s, nul_last, sizeof nul_last - 1, out, sizeof out), 400);
    CHECK_EQ_INT(raw_request_n(&s, nul_name, sizeof nul_name - 1, out, sizeof out), 400);
    EXPECT_RAW(&s, "GET /v1/models HTTP/1.1\r\n" H "Authorization: Bearer k\x01\r\n\r\n", 400, "invalid_header");
    EXPECT_RAW(&s, "GET /v1/models HTTP/1.1\r\n" H "Authorization: Bearer k\x1b[0m\r\n\r\n", 400, "invalid_header");
    EXPECT_RAW(&s, "GET /v1/models HTTP/1.1\r\n" H "Authorization: Bearer kk\r\n\r\n", 401, "invalid_api_key");
    EXPECT_RAW(&s, "GET /v1/models HTTP/1.1\r\n" H KEY "\r\n", 200, NULL);

    /* 401 before 404 and 405 under /v1; open routes stay open */
    EXPECT_RAW(&s, "GET /v1/nothing HTTP/1.1\r\n" H "\r\n", 401, "invalid_api_key");
    EXPECT_RAW(&s, "GET /v1 HTTP/1.1\r\n" H "\r\n", 401, "invalid_api_key");
    EXPECT_RAW(&s, "DELETE /v1/models HTTP/1.1\r\n" H "\r\n", 401, "invalid_api_key");
    EXPECT_RAW(&s, "GET /v1/chat/completions HTTP/1.1\r\n" H "\r\n", 401, "invalid_api_key");
    EXPECT_RAW(&s, "GET /v1/nothing HTTP/1.1\r\n" H KEY "\r\n", 404, "unknown_url");
    EXPECT_RAW(&s, "GET /v1/chat/completions HTTP/1.1\r\n" H KEY "\r\n", 405, "method_not_allowed");
    EXPECT_RAW(&s, "GET /v1x HTTP/1.1\r\n" H "\r\n", 404, "unknown_url");
    EXPECT_RAW(&s, "GET /nothing HTTP/1.1\r\n" H "\r\n", 404, "unknown_url");
    EXPECT_RAW(&s, "GET /health HTTP/1.1\r\n" H "\r\n", 200, NULL);
    EXPECT_RAW(&s, "GET /metrics HTTP/1.1\r\n" H "\r\n", 200, NULL);

    /* a new connection that sends nothing: 408 at the header deadline */
    int fd = raw_connect(&s, "127.0.0.1");
    REQUIRE(fd >= 0);
    size_t len;
    CHECK(raw_read_to_close(fd, 20, out, sizeof out, &len));
    CHECK_MSG(status_of(out) == 408, "silent connection: %.200s", out);
    close(fd);
    /* a kept-alive connection after its response: closed without a reply */
    fd = raw_connect(&s, "127.0.0.1");
    REQUIRE(fd >= 0);
    static const char ka[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(raw_send(fd, ka, sizeof ka - 1));
    CHECK(raw_read_to_close(fd, 20, out, sizeof out, &len));
    CHECK_MSG(status_of(out) == 200 && !strstr(out + 12, "HTTP/1.1 408"), "kept alive: %.300s", out);
    close(fd);

    CHECK(metric(&s, "kvik_requests_rejected_total{reason=\"timeout\"}") >= 3);
    CHECK(metric(&s, "kvik_requests_rejected_total{reason=\"too_large\"}") >= 1);
    /* still serving */
    EXPECT_RAW(&s, "POST /tokenize HTTP/1.1\r\n" H KEY "Content-Length: 15\r\n\r\n" TOK, 200, NULL);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}

/* ---- slow clients -------------------------------------------------------- */

/* The slow clients' own address: the harness's and /metrics's requests
 * come from 127.0.0.1, and a connection of theirs that the server has
 * not yet reaped still counts against 127.0.0.1's per-address cap. */
#define SLOW_ADDR "127.0.0.5"

struct slow {
    int fd;
    bool closed;
    char got[512];
    size_t len;
    int err; /* errno of the recv that ended it (0: an orderly close) */
};

/* Opens n connections from src that send a request line and then one
 * header byte at a time; false if one cannot connect. */
static bool slow_open(const struct serve_proc *s, struct slow *c, int n, const char *src) {
    static const char start[] = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (int i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].fd = raw_connect(s, src);
        if (c[i].fd < 0 || !raw_send(c[i].fd, start, sizeof start - 1)) return false;
    }
    return true;
}

/* One round: each open connection gets one more header byte, and what the
 * server sent is read; a closed one is marked. The number still open. */
static int slow_round(struct slow *c, int n) {
    int open = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].closed) continue;
        char buf[512];
        ssize_t k;
        while ((k = recv(c[i].fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
            size_t m = (size_t)k < sizeof c[i].got - 1 - c[i].len ? (size_t)k : sizeof c[i].got - 1 - c[i].len;
            memcpy(c[i].got + c[i].len, buf, m);
            c[i].len += m;
            c[i].got[c[i].len] = 0;
        }
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            c[i].err = k < 0 ? errno : 0;
            c[i].closed = true;
            close(c[i].fd); /* as a client does at the end of the server's answer */
            c[i].fd = -1;
            continue;
        }
        /* a client stops sending once it has an answer: bytes after the
           server's FIN would draw a reset */
        if (c[i].len == 0) send(c[i].fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        open++;
    }
    return open;
}

/* Dribbles until every slow connection is closed by the server (at most
 * limit_s); the number left open. */
static int slow_until_cut(struct slow *c, int n, double limit_s) {
    double t0 = now_s();
    int open = n;
    while ((open = slow_round(c, n)) > 0 && now_s() - t0 < limit_s) usleep(50000);
    return open;
}

static void slow_close(struct slow *c, int n) {
    for (int i = 0; i < n; i++)
        if (c[i].fd >= 0) close(c[i].fd);
}

/* True when a new connection from src is closed by the server with no
 * reply at all (refused by a connection limit). */
static bool refused(const struct serve_proc *s, const char *src) {
    int fd = raw_connect(s, src);
    if (fd < 0) return true;
    static const char req[] = "GET /health HTTP/1.1\r\n" H "\r\n";
    raw_send(fd, req, sizeof req - 1); /* may fail: the server hung up already */
    char out[512];
    size_t len;
    bool closed = raw_read_to_close(fd, 20, out, sizeof out, &len);
    close(fd);
    return closed && len == 0;
}

/* Waits until the server counts no connection open but /metrics's own
 * (or 20 s). */
static bool wait_no_connections(const struct serve_proc *s) {
    double t0 = now_s();
    while (now_s() - t0 < 20) {
        if (metric(s, "kvik_http_connections") <= 1) return true;
        usleep(20000);
    }
    return false;
}

/* Waits until the server counts want connections open (or 20 s). */
static bool wait_connections(const struct serve_proc *s, double want) {
    double t0 = now_s();
    while (now_s() - t0 < 20) {
        /* /metrics's own connection is counted too */
        if (metric(s, "kvik_http_connections") >= want + 1) return true;
        usleep(20000);
    }
    return false;
}

/* A normal client from src: /health and a short completion, both 200. */
static void served(const struct serve_proc *s, const char *src, int line) {
    char out[8192];
    int fd = raw_connect(s, src);
    if (fd < 0) {
        test_fail(__FILE__, line, "cannot connect from %s", src);
        return;
    }
    static const char req[] = "POST /v1/completions HTTP/1.1\r\n" H "Content-Length: 30\r\n\r\n"
                              "{\"prompt\":\"Hi\",\"max_tokens\":2}";
    size_t len;
    bool closed = raw_send(fd, req, sizeof req - 1) && raw_read_to_close(fd, 60, out, sizeof out, &len);
    close(fd);
    if (!closed || status_of(out) != 200) test_fail(__FILE__, line, "client from %s: %.300s", src, out);
}

/* The default caps: 512 connections, 128 from one address. 128 slow
 * clients from one address take its share; a 129th is refused,
 * clients from other addresses are served meanwhile, and every slow one
 * gets 408 at its header deadline, after which that address is served again. */
TEST(serve_hardening_slow_clients_at_default_caps) {
    struct serve_proc s;
    if (!serve_start(&s, "-t 1 -c 256 --header-timeout 4", 120)) return;
    enum { N = 128 };
    struct slow *c = calloc(N, sizeof *c);
    REQUIRE(c);
    bool ok = slow_open(&s, c, N, SLOW_ADDR);
    CHECK_MSG(ok, "could not open %d connections", N);
    if (ok) {
        CHECK(wait_connections(&s, N));
        slow_round(c, N);
        CHECK(refused(&s, SLOW_ADDR));
        served(&s, "127.0.0.2", __LINE__);
        served(&s, "127.0.0.3", __LINE__);
        int open_now = 0;
        for (int i = 0; i < N; i++) open_now += !c[i].closed;
        CHECK_MSG(open_now == N, "slow clients cut before the others were served: %d open", open_now);
        CHECK_EQ_INT(slow_until_cut(c, N, 30), 0);
        int with_408 = 0;
        for (int i = 0; i < N; i++) with_408 += status_of(c[i].got) == 408 && error_code_is(c[i].got, "request_timeout");
        CHECK_EQ_INT(with_408, N);
        CHECK(wait_no_connections(&s));
        served(&s, SLOW_ADDR, __LINE__);
        CHECK(metric(&s, "kvik_requests_rejected_total{reason=\"timeout\"}") == N);
    }
    slow_close(c, N);
    free(c);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}

/* The probe's case: --max-connections 8 and eight slow sockets from one
 * address took every slot. Now that address gets 4 (the per-address cap
 * here), the other four are refused, another address is served, and the
 * slow ones are cut at their deadline. */
TEST(serve_hardening_slow_clients_at_a_small_cap) {
    struct serve_proc s;
    if (!serve_start(&s, "-t 1 -c 256 --max-connections 8 --max-connections-per-ip 4 --header-timeout 2", 120)) return;
    enum { N = 4 };
    struct slow c[N];
    bool ok = slow_open(&s, c, N, SLOW_ADDR);
    CHECK(ok);
    if (ok) {
        CHECK(wait_connections(&s, N));
        for (int i = 0; i < 4; i++) CHECK(refused(&s, SLOW_ADDR));
        served(&s, "127.0.0.2", __LINE__);
        CHECK_EQ_INT(slow_until_cut(c, N, 30), 0);
        for (int i = 0; i < N; i++)
            CHECK_MSG(status_of(c[i].got) == 408, "slow %d: '%.100s' (%s)", i, c[i].got, strerror(c[i].err));
        CHECK(wait_no_connections(&s));
        served(&s, SLOW_ADDR, __LINE__);
        CHECK(metric(&s, "kvik_requests_rejected_total{reason=\"timeout\"}") == N);
    }
    slow_close(c, N);
    CHECK_EQ_INT(serve_stop(&s, SIGTERM, 30), 0);
}
