/*
 * util.c — errors, logging, clock, aligned memory, growing strings, peak RSS and the
 * version/status strings of the public API.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "base/base.h"

kvik_status err_set(struct kvik_err *err, kvik_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void err_copy_out(const struct kvik_err *err, char *buf, size_t len) {
    if (!buf || len == 0) return;
    snprintf(buf, len, "%s", err->msg);
}

static enum log_level g_log_level = LOG_LEVEL_WARN;

void log_set_level(enum log_level level) { g_log_level = level; }

void log_msg(enum log_level level, const char *fmt, ...) {
    static const char *const tag[] = {"debug", "info", "warn", "error"};
    if (level < g_log_level) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "kvik: %s: %s\n", tag[level], line);
}

int64_t clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t prng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void prng_seed(struct prng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = prng_splitmix64(&x);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t prng_next(struct prng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

double prng_uniform(struct prng *r) { return (double)(prng_next(r) >> 11) * 0x1.0p-53; }

uint64_t hash64(const void *p, size_t n, uint64_t seed) {
    const uint8_t *b = p;
    uint64_t h = seed ^ ((uint64_t)n * 0x9E3779B97F4A7C15ull);
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        w *= 0x87C37B91114253D5ull;
        w = (w << 31) | (w >> 33);
        h ^= w * 0x4CF5AD432745937Full;
        h = ((h << 27) | (h >> 37)) * 5 + 0x52DCE729;
    }
    uint64_t t = 0;
    if (n) memcpy(&t, b, n);
    return hash64_pair(h, t);
}

/* Allocations from this size on are 2 MiB aligned and asked to be backed
 * by transparent huge pages: the weights' repacked copy and the KV pool are
 * read all over at every step, and with 4 KiB pages nearly every K/V block
 * an attention call touches misses the TLB. */
enum { HUGE_FROM = 8 << 20, HUGE_PAGE = 2 << 20 };

void *mem_alloc_aligned(size_t size) {
    if (size == 0) size = 1;
    size_t align = size >= HUGE_FROM ? HUGE_PAGE : 64, rounded;
    if (__builtin_add_overflow(size, align - 1, &rounded)) return NULL;
    rounded &= ~(align - 1);
    void *p = aligned_alloc(align, rounded);
    if (!p) return NULL;
    if (align == HUGE_PAGE) madvise(p, rounded, MADV_HUGEPAGE); /* a hint; without THP it does nothing */
    memset(p, 0, rounded);
    return p;
}

void mem_free(void *p) { free(p); }

uint64_t mem_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024;
}

const char *kvik_version(void) {
#define KVIK_STR2(x) #x
#define KVIK_STR(x) KVIK_STR2(x)
    return KVIK_STR(KVIK_VERSION_MAJOR) "." KVIK_STR(KVIK_VERSION_MINOR) "." KVIK_STR(
        KVIK_VERSION_PATCH);
}

const char *kvik_status_string(kvik_status status) {
    switch (status) {
    case KVIK_OK: return "ok";
    case KVIK_ERR_IO: return "i/o error";
    case KVIK_ERR_FORMAT: return "format error";
    case KVIK_ERR_NOMEM: return "out of memory";
    case KVIK_ERR_INVALID_ARG: return "invalid argument";
    case KVIK_ERR_UNSUPPORTED: return "unsupported";
    case KVIK_ERR_NOT_FOUND: return "not found";
    case KVIK_ERR_BUSY: return "busy";
    }
    return "unknown status";
}

size_t utf8_valid_seq(const uint8_t *p, size_t n) {
    if (n == 0) return 0;
    uint8_t c = p[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

int utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- growing strings -------------------------------------------------- */

void strbuf_put(struct strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void strbuf_puts(struct strbuf *b, const char *s) { strbuf_put(b, s, strlen(s)); }

void strbuf_json(struct strbuf *b, const char *s) {
    strbuf_put(b, "\"", 1);
    size_t run = 0, i = 0;
    for (; s[i]; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            esc[2] = 0;
        } else if (ch < 0x20) snprintf(esc, sizeof esc, "\\u%04x", ch);
        else continue;
        strbuf_put(b, s + run, i - run);
        strbuf_puts(b, esc);
        run = i + 1;
    }
    strbuf_put(b, s + run, i - run);
    strbuf_put(b, "\"", 1);
}
