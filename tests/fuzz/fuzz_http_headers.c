/*
 * fuzz_http_headers.c — libFuzzer target for the header checks of
 * `kvik serve` (src/server/http_check.c). Each input is a header block:
 * lines split at '\n', each "name:value" (a line without ':' is a name
 * with an empty value). The fields go through http_check_fields, whose
 * verdict must be 0, 400 or 501 and agree with a recount of the framing
 * fields; through http_check_layout, both as split (in order, so the
 * verdict depends only on the bytes between them) and with offsets taken
 * from the input's first bytes (anywhere, so only the bounds are tested,
 * by ASan); and each value through http_bearer_token and http_key_equal,
 * compared with memcmp.
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_http_headers/.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/http_check.h"

enum { MAX_FIELDS = 64 };

/* Splits buf[0..n) into fields (pointers into buf). */
static size_t split(const char *buf, size_t n, struct http_field *f) {
    size_t k = 0, i = 0;
    while (i < n && k < MAX_FIELDS) {
        size_t e = i;
        while (e < n && buf[e] != '\n') e++;
        size_t c = i;
        while (c < e && buf[c] != ':') c++;
        f[k].name = buf + i;
        f[k].name_len = c - i;
        f[k].value = c < e ? buf + c + 1 : buf + e;
        f[k].value_len = c < e ? e - c - 1 : 0;
        k++;
        i = e + 1;
    }
    return k;
}

static bool digits(const char *v, size_t n, unsigned long long *out) {
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    if (!n || n > 19) return false; /* fewer digits than 2^64's 20: no overflow */
    char tmp[24];
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return false;
        tmp[i] = v[i];
    }
    tmp[n] = 0;
    *out = strtoull(tmp, NULL, 10);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    struct http_field f[MAX_FIELDS];
    size_t n = split(buf, size, f);

    for (int http10 = 0; http10 < 2; http10++) {
        struct http_framing fr;
        const char *why = NULL;
        int st = http_check_fields(f, n, http10, &fr, &why);
        if (st != 0 && st != 400 && st != 501) __builtin_trap();
        if (st && (!why || !*why)) __builtin_trap();
        if (st) continue;
        if (fr.chunked && fr.has_length) __builtin_trap();
        if (fr.chunked && http10) __builtin_trap();
        int n_te = 0;
        for (size_t i = 0; i < n; i++) {
            if (f[i].name_len == 17 && !strncasecmp(f[i].name, "Transfer-Encoding", 17)) n_te++;
            for (size_t k = 0; k < f[i].value_len; k++) /* no control byte passed */
                if (((unsigned char)f[i].value[k] < 0x20 && f[i].value[k] != '\t') || f[i].value[k] == 0x7f)
                    __builtin_trap();
            unsigned long long v;
            if (f[i].name_len == 14 && !strncasecmp(f[i].name, "Content-Length", 14) &&
                digits(f[i].value, f[i].value_len, &v) && (!fr.has_length || v != fr.length))
                __builtin_trap();
        }
        if ((n_te > 0) != fr.chunked) __builtin_trap();
    }

    /* in order: any verdict, no reads out of bounds */
    (void)http_check_layout(buf, size, 0, f, n);
    if (size >= 4) {
        /* offsets from the input: fields that lie anywhere, even outside */
        struct http_field g[2];
        for (int i = 0; i < 2; i++) {
            g[i].name = buf + (unsigned char)data[2 * i] % (size + 1);
            g[i].name_len = (unsigned char)data[2 * i + 1] % 8;
            g[i].value = buf + (unsigned char)data[2 * i + 1] % (size + 1);
            g[i].value_len = (unsigned char)data[2 * i] % 8;
        }
        (void)http_check_layout(buf, size, (unsigned char)data[0] % (size + 2), g, 2);
    }

    for (size_t i = 0; i < n; i++) {
        const char *t;
        size_t tl;
        if (http_bearer_token(f[i].value, f[i].value_len, &t, &tl) &&
            (t < f[i].value || t + tl > f[i].value + f[i].value_len))
            __builtin_trap();
        if (i + 1 < n) {
            bool eq = http_key_equal(f[i].value, f[i].value_len, f[i + 1].value, f[i + 1].value_len);
            bool want = f[i].value_len == f[i + 1].value_len && !memcmp(f[i].value, f[i + 1].value, f[i].value_len);
            if (eq != want) __builtin_trap();
        }
    }
    free(buf);
    return 0;
}
