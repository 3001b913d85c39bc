/*
 * cmd_info.c — `kvik info FILE [--json]`: what a GGUF file holds. Prints the
 * version and alignment, one line per metadata key (type and value; arrays
 * as element type, length and their first few elements; long strings cut
 * at 60 characters), a tensor table (name, type, shape, bytes, file offset)
 * and the bytes per tensor type. --json prints the same as one JSON object,
 * with arrays summarised as
 *   {"type":"array","elem_type":"string","length":49152,"head":[first 8]}.
 * The file is validated completely before anything is printed, so a bad
 * file gives one line on stderr and nothing on stdout.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tensor/tensor.h"

#define TEXT_STR_CHARS 60  /* a string value is cut after this many characters */
#define TEXT_ELEM_CHARS 24 /* ... and an array element after this many */
#define TEXT_HEAD 5        /* array elements shown in text (3 when nested) */
#define JSON_HEAD 8        /* array elements shown in JSON */

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik info FILE [--json]\n"
            "\n"
            "Validates a GGUF file and prints its version, alignment, metadata (one line\n"
            "per key: key, type, value; arrays show their element type, length and first\n"
            "elements; long strings are cut at %d characters), a tensor table (name,\n"
            "type, shape, bytes, file offset) and the bytes per tensor type. FILE may\n"
            "also be a model name of `kvik list` (its cached file).\n"
            "\n"
            "  --json      one JSON object instead; arrays appear as\n"
            "              {\"type\":\"array\",\"elem_type\":T,\"length\":N,\"head\":[first %d]}\n"
            "  -h, --help  this text\n",
            TEXT_STR_CHARS, JSON_HEAD);
}

/* A quoted string for the text listing: escapes, invalid UTF-8 as \xNN,
 * cut after max_chars characters with an ellipsis. */
static void text_str(FILE *f, const char *s, uint64_t len, size_t max_chars) {
    const uint8_t *p = (const uint8_t *)s;
    size_t chars = 0;
    uint64_t i = 0;
    fputc('"', f);
    while (i < len && chars < max_chars) {
        size_t k = utf8_valid_seq(p + i, len - i > 4 ? 4 : (size_t)(len - i));
        uint8_t c = p[i];
        if (k == 1 && c == '"') fputs("\\\"", f);
        else if (k == 1 && c == '\\') fputs("\\\\", f);
        else if (k == 1 && c == '\n') fputs("\\n", f);
        else if (k == 1 && c == '\t') fputs("\\t", f);
        else if (k == 1 && c == '\r') fputs("\\r", f);
        else if (k == 0 || (k == 1 && (c < 0x20 || c == 0x7f))) fprintf(f, "\\x%02x", c);
        else fwrite(p + i, 1, k, f);
        i += k ? k : 1;
        chars++;
    }
    if (i < len) fputs("\xe2\x80\xa6", f); /* U+2026 */
    fputc('"', f);
    if (i < len) fprintf(f, " (%llu bytes)", (unsigned long long)len);
}

/* A key or tensor name padded to width: as is when it is plain printable
 * ASCII, else quoted and escaped. */
static void text_name(FILE *f, const char *s, int width) {
    size_t len = strlen(s);
    bool plain = len > 0;
    for (size_t i = 0; i < len && plain; i++) plain = s[i] > 0x20 && s[i] < 0x7f && s[i] != '"';
    if (plain) {
        fprintf(f, "%-*s", width, s);
        return;
    }
    text_str(f, s, len, 200);
    if ((int)len + 2 < width) fprintf(f, "%*s", width - (int)len - 2, "");
}

/* The shortest %g form that reads back as the same float32 / float64. */
static void print_float(FILE *f, double d, bool single) {
    char buf[40];
    for (int prec = single ? 6 : 15; prec <= (single ? 9 : 17); prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (single ? strtof(buf, NULL) == (float)d : strtod(buf, NULL) == d) break;
    }
    fputs(buf, f);
}

/* A scalar (not string, not array) as text; also valid JSON when json is
 * set (non-finite floats become null). */
static void scalar(FILE *f, const struct gguf_value *v, bool json) {
    int64_t i;
    uint64_t u;
    double d;
    if (v->type == GGUF_TYPE_BOOL) {
        fputs(v->p[0] ? "true" : "false", f);
    } else if (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64) {
        gguf_value_to_f64(v, &d);
        if (json && !isfinite(d)) fputs("null", f);
        else print_float(f, d, v->type == GGUF_TYPE_FLOAT32);
    } else if (gguf_value_to_i64(v, &i)) {
        fprintf(f, "%lld", (long long)i);
    } else if (gguf_value_to_u64(v, &u)) {
        fprintf(f, "%llu", (unsigned long long)u);
    }
}

/* ---- text ------------------------------------------------------------------ */

static void text_value(FILE *f, const struct gguf_value *v, int depth) {
    if (v->type == GGUF_TYPE_STRING) {
        text_str(f, (const char *)v->p, v->n, depth ? TEXT_ELEM_CHARS : TEXT_STR_CHARS);
        return;
    }
    if (v->type != GGUF_TYPE_ARRAY) {
        scalar(f, v, false);
        return;
    }
    uint64_t head = depth ? 3 : TEXT_HEAD;
    fputc('[', f);
    for (uint64_t i = 0; i < v->n && i < head; i++) {
        struct gguf_value e;
        gguf_arr_elem(v, i, &e);
        if (i) fputs(", ", f);
        text_value(f, &e, depth + 1);
    }
    if (v->n > head) fputs(", ...", f);
    fputc(']', f);
}

struct type_total {
    int type;
    int64_t count;
    uint64_t bytes;
};

/* Totals per tensor type, in order of first appearance; returns how many. */
static size_t totals(const struct gguf *g, struct type_total *tt, size_t cap, uint64_t *all) {
    size_t n = 0;
    *all = 0;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        size_t j = 0;
        while (j < n && tt[j].type != t->type) j++;
        if (j == n && n < cap) tt[n++] = (struct type_total){t->type, 0, 0};
        if (j < n) {
            tt[j].count++;
            tt[j].bytes += t->n_bytes;
        }
        *all += t->n_bytes;
    }
    return n;
}

static const char *type_name(int type) {
    const struct type_traits *tt = tensor_type_traits(type);
    return tt && tt->name ? tt->name : "?";
}

static void print_text(FILE *f, const char *path, const struct gguf *g) {
    fprintf(f, "file:        %s\n", path);
    fprintf(f, "version:     %u\n", gguf_version(g));
    fprintf(f, "alignment:   %u\n", gguf_alignment(g));
    fprintf(f, "file size:   %llu bytes\n", (unsigned long long)gguf_file_size(g));
    if (gguf_n_tensors(g))
        fprintf(f, "data offset: %llu\n", (unsigned long long)gguf_data_offset(g));
    else
        fprintf(f, "data offset: none (no tensors)\n");
    fprintf(f, "\nmetadata: %lld keys\n", (long long)gguf_n_kv(g));
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const struct gguf_value *v = gguf_kv_value(g, i);
        char type[32];
        if (v->type == GGUF_TYPE_ARRAY)
            snprintf(type, sizeof type, "array[%s]", gguf_type_name(gguf_arr_type(v)));
        else
            snprintf(type, sizeof type, "%s", gguf_type_name((int)v->type));
        fputs("  ", f);
        text_name(f, gguf_key(g, i), 40);
        fprintf(f, " %-15s ", type);
        if (v->type == GGUF_TYPE_ARRAY) fprintf(f, "len %llu: ", (unsigned long long)v->n);
        text_value(f, v, 0);
        fputc('\n', f);
    }

    int64_t nt = gguf_n_tensors(g);
    fprintf(f, "\ntensors: %lld\n", (long long)nt);
    int width = 4;
    for (int64_t i = 0; i < nt; i++) {
        int len = (int)strlen(gguf_tensor(g, i)->name);
        if (len > width) width = len < 48 ? len : 48;
    }
    if (nt)
        fprintf(f, "  %-*s %-8s %-30s %16s %14s\n", width, "name", "type", "shape", "bytes",
                "file offset");
    for (int64_t i = 0; i < nt; i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        char shape[96];
        int n = 0;
        for (int d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%lld", d ? " x " : "",
                          (long long)t->ne[d]);
        fputs("  ", f);
        text_name(f, t->name, width);
        fprintf(f, " %-8s %-30s %16llu %14llu\n", type_name(t->type), shape,
                (unsigned long long)t->n_bytes, (unsigned long long)t->file_offset);
    }

    struct type_total tt[64];
    uint64_t all;
    size_t n = totals(g, tt, 64, &all);
    fprintf(f, "\nbytes by type:\n");
    for (size_t j = 0; j < n; j++)
        fprintf(f, "  %-8s %8lld tensors %16llu bytes\n", type_name(tt[j].type),
                (long long)tt[j].count, (unsigned long long)tt[j].bytes);
    fprintf(f, "  %-8s %8lld tensors %16llu bytes\n", "total", (long long)nt,
            (unsigned long long)all);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_value(FILE *f, const struct gguf_value *v, bool in_array) {
    if (v->type == GGUF_TYPE_ARRAY) {
        fprintf(f, "{\"type\":\"array\",\"elem_type\":\"%s\",\"length\":%llu,\"head\":[",
                gguf_type_name(gguf_arr_type(v)), (unsigned long long)v->n);
        for (uint64_t i = 0; i < v->n && i < JSON_HEAD; i++) {
            struct gguf_value e;
            gguf_arr_elem(v, i, &e);
            if (i) fputc(',', f);
            json_value(f, &e, true);
        }
        fputs("]}", f);
        return;
    }
    if (!in_array) fprintf(f, "{\"type\":\"%s\",\"value\":", gguf_type_name((int)v->type));
    if (v->type == GGUF_TYPE_STRING) cli_json_str(f, (const char *)v->p, v->n);
    else scalar(f, v, true);
    if (!in_array) fputc('}', f);
}

static void print_json(FILE *f, const char *path, const struct gguf *g) {
    fputs("{\n  \"file\": ", f);
    cli_json_str(f, path, strlen(path));
    fprintf(f, ",\n  \"version\": %u,\n  \"alignment\": %u,\n  \"file_size\": %llu,\n",
            gguf_version(g), gguf_alignment(g), (unsigned long long)gguf_file_size(g));
    if (gguf_n_tensors(g))
        fprintf(f, "  \"data_offset\": %llu,\n", (unsigned long long)gguf_data_offset(g));
    else
        fputs("  \"data_offset\": null,\n", f);
    fprintf(f, "  \"array_head\": %d,\n  \"metadata\": {", JSON_HEAD);
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        fputs(i ? ",\n    " : "\n    ", f);
        cli_json_str(f, gguf_key(g, i), strlen(gguf_key(g, i)));
        fputs(": ", f);
        json_value(f, gguf_kv_value(g, i), false);
    }
    fputs(gguf_n_kv(g) ? "\n  },\n  \"tensors\": [" : "},\n  \"tensors\": [", f);
    int64_t nt = gguf_n_tensors(g);
    for (int64_t i = 0; i < nt; i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        fputs(i ? ",\n    {\"name\":" : "\n    {\"name\":", f);
        cli_json_str(f, t->name, strlen(t->name));
        fprintf(f, ",\"type\":\"%s\",\"shape\":[", type_name(t->type));
        for (int d = 0; d < t->n_dims; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)t->ne[d]);
        fprintf(f, "],\"bytes\":%llu,\"offset\":%llu,\"file_offset\":%llu}",
                (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
                (unsigned long long)t->file_offset);
    }
    fputs(nt ? "\n  ],\n  \"bytes_by_type\": {" : "],\n  \"bytes_by_type\": {", f);
    struct type_total tt[64];
    uint64_t all;
    size_t n = totals(g, tt, 64, &all);
    for (size_t j = 0; j < n; j++)
        fprintf(f, "%s\"%s\":{\"tensors\":%lld,\"bytes\":%llu}", j ? "," : "",
                type_name(tt[j].type), (long long)tt[j].count, (unsigned long long)tt[j].bytes);
    fprintf(f, "},\n  \"total_bytes\": %llu\n}\n", (unsigned long long)all);
}

/* ---- the command ------------------------------------------------------------- */

/* One line on stderr, control characters (from a path or a file) replaced. */
static void error_line(const char *a, const char *b) {
    fputs("kvik info: ", stderr);
    for (const char *s = a; s && *s; s++) fputc((unsigned char)*s < 0x20 ? '?' : *s, stderr);
    if (b) fputs(": ", stderr);
    for (const char *s = b; s && *s; s++) fputc((unsigned char)*s < 0x20 ? '?' : *s, stderr);
    fputc('\n', stderr);
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kvik info: unknown option '%s' (try kvik info --help)\n", a);
            return 2;
        } else if (path) {
            fprintf(stderr, "kvik info: more than one FILE (usage: kvik info FILE [--json])\n");
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "kvik info: missing FILE (usage: kvik info FILE [--json])\n");
        return 2;
    }
    /* a registry name ("gemma3-270m") where no such file is: its cached file */
    char resolved[4096], why[256];
    if (access(path, F_OK) != 0 && !strchr(path, '/') &&
        kvik_model_resolve(path, resolved, sizeof resolved, why, sizeof why) == KVIK_OK)
        path = resolved;
    struct gguf *g = NULL;
    struct kvik_err err = {KVIK_OK, ""};
    kvik_status st = gguf_open(path, &g, &err);
    if (st) {
        /* I/O messages already name the path; format messages do not. */
        if (st == KVIK_ERR_IO) error_line(err.msg, NULL);
        else error_line(path, err.msg);
        return 1;
    }
    if (json) print_json(stdout, path, g);
    else print_text(stdout, path, g);
    gguf_close(g);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        error_line("write error on stdout", NULL);
        return 1;
    }
    return 0;
}
