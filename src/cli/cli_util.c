/*
 * cli_util.c — helpers shared by the subcommands: strict number parsing,
 * model path resolution, whole-file reads and JSON output.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "cli/cli.h"

bool cli_parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (!*s || *end || errno || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

int cli_parse_flags(int argc, char **argv, int from, const char *cmd, void (*usage)(FILE *), bool *json,
                    enum cli_flag (*fn)(void *user, const char *flag, const char *value), void *user) {
    for (int i = from; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            *json = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "kvik %s: unknown argument or missing value: '%s'\n", cmd, a);
            return 2;
        }
        enum cli_flag f = fn(user, a, v);
        if (f == CLI_FLAG_UNKNOWN) {
            fprintf(stderr, "kvik %s: unknown argument '%s' (try kvik %s --help)\n", cmd, a, cmd);
            return 2;
        }
        if (f == CLI_FLAG_BAD_VALUE) {
            fprintf(stderr, "kvik %s: bad value '%s' for %s\n", cmd, v, a);
            return 2;
        }
        i++;
    }
    return -1;
}

const char *cli_resolve_model(const char *arg, char *buf, size_t len) {
    const char *env = getenv("KVIK_MODEL");
    if (!arg && env && *env) arg = env;
    if (arg) {
        char err[512];
        if (kvik_model_resolve(arg, buf, len, err, sizeof err) == KVIK_OK) return buf;
        fprintf(stderr, "kvik: %s\n", err);
        return NULL;
    }
    const char *dir = getenv("KVIK_MODELS");
    if (dir && *dir) snprintf(buf, len, "%s/%s", dir, CLI_DEFAULT_MODEL);
    else snprintf(buf, len, "%s/.cache/kvik/models/%s", getenv("HOME") ? getenv("HOME") : ".", CLI_DEFAULT_MODEL);
    return buf;
}

bool cli_model_exists(const char *path, const char *arg, const char *cmd) {
    if (!path) return false; /* cli_resolve_model said why */
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
        return true;
    }
    fprintf(stderr, "kvik %s: model '%s' not found%s\n", cmd, path,
            arg || getenv("KVIK_MODEL") ? "" : " (fetch the default model with `make model`)");
    return false;
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = cap < ((size_t)1 << 30) ? realloc(buf, cap * 2 + 1) : NULL;
        if (!nb) {
            free(buf);
            buf = NULL;
            errno = ENOMEM;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

void cli_json_str(FILE *f, const char *s, uint64_t len) {
    const uint8_t *p = (const uint8_t *)s;
    fputc('"', f);
    for (uint64_t i = 0; i < len;) {
        size_t k = utf8_valid_seq(p + i, len - i > 4 ? 4 : (size_t)(len - i));
        uint8_t c = p[i];
        if (k == 0) fputs("\\ufffd", f);
        else if (c == '"') fputs("\\\"", f);
        else if (c == '\\') fputs("\\\\", f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fwrite(p + i, 1, k, f);
        i += k ? k : 1;
    }
    fputc('"', f);
}

void cli_json_ids(FILE *f, const int32_t *ids, int64_t n) {
    fputc('[', f);
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ids[i]);
    fputc(']', f);
}
