/*
 * util.c — errors, logging, clock, aligned memory, peak RSS and the
 * version/status strings of the public API.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

void *mem_alloc_aligned(size_t size) {
    if (size == 0) size = 1;
    size_t rounded;
    if (__builtin_add_overflow(size, (size_t)63, &rounded)) return NULL;
    rounded &= ~(size_t)63;
    void *p = aligned_alloc(64, rounded);
    if (p) memset(p, 0, rounded);
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
