/*
 * prom.c — a reader for the Prometheus text exposition format (version
 * 0.0.4), enough to take numbers out of a server's /metrics:
 *
 *   # HELP kvik_preemptions_total Sequences preempted ...
 *   # TYPE kvik_preemptions_total counter
 *   kvik_preemptions_total 3
 *   kvik_request_queue_time_seconds_sum{model="m"} 0.25 1700000000000
 *
 * A sample line is a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), optional labels
 * in braces (quoted values with \\, \" and \n escapes), whitespace, a value
 * (a float, +Inf, -Inf or NaN) and an optional timestamp. Comments and blank
 * lines are skipped, and so is any line that does not parse.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/loadgen/loadgen.h"

static bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

/* Parses one line [p, e); calls fn on success. */
static bool parse_line(const char *p, const char *e, prom_sample_fn fn, void *ctx) {
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    if (p == e || *p == '#') return false;
    const char *name = p;
    if (!name_start(*p)) return false;
    while (p < e && name_char(*p)) p++;
    size_t name_len = (size_t)(p - name);
    const char *labels = p;
    size_t labels_len = 0;
    if (p < e && *p == '{') {
        labels = ++p;
        bool quoted = false;
        while (p < e) {
            if (quoted) {
                if (*p == '\\') {
                    if (++p == e) return false;
                } else if (*p == '"') {
                    quoted = false;
                }
            } else if (*p == '"') {
                quoted = true;
            } else if (*p == '}') {
                break;
            }
            p++;
        }
        if (p == e) return false;
        labels_len = (size_t)(p - labels);
        p++; /* '}' */
    }
    if (p == e || (*p != ' ' && *p != '\t')) return false;
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    char num[64];
    size_t n = 0;
    while (p < e && *p != ' ' && *p != '\t' && n < sizeof num - 1) num[n++] = *p++;
    num[n] = 0;
    if (n == 0 || (p < e && *p != ' ' && *p != '\t')) return false;
    double v;
    if (!strcmp(num, "+Inf") || !strcmp(num, "Inf")) {
        v = INFINITY;
    } else if (!strcmp(num, "-Inf")) {
        v = -INFINITY;
    } else if (!strcmp(num, "NaN")) {
        v = NAN;
    } else {
        char *end;
        v = strtod(num, &end);
        if (*end || end == num) return false;
        /* strtod also takes "inf", "nan(...)", hex: only the spellings above are allowed */
        for (const char *c = num; *c; c++)
            if (!((*c >= '0' && *c <= '9') || *c == '.' || *c == 'e' || *c == 'E' || *c == '+' || *c == '-'))
                return false;
    }
    if (fn) fn(ctx, name, name_len, labels, labels_len, v);
    return true;
}

int64_t prom_parse(const char *text, size_t len, prom_sample_fn fn, void *ctx) {
    int64_t count = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        const char *le = e;
        if (le > p && le[-1] == '\r') le--;
        if (parse_line(p, le, fn, ctx)) count++;
        p = nl ? nl + 1 : end;
    }
    return count;
}

struct sum_ctx {
    const char *name;
    size_t name_len;
    double sum;
    bool found;
};

static void sum_one(void *vctx, const char *name, size_t name_len, const char *labels, size_t labels_len,
                    double value) {
    struct sum_ctx *c = vctx;
    if (name_len != c->name_len || memcmp(name, c->name, name_len) != 0) return;
    c->sum += value;
    c->found = true;
}

bool prom_sum(const char *text, size_t len, const char *name, double *out) {
    struct sum_ctx c = {name, strlen(name), 0, false};
    prom_parse(text, len, sum_one, &c);
    *out = c.sum;
    return c.found;
}
