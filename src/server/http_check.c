/*
 * http_check.c — header field checks of a request (see http_check.h).
 */
#include <string.h>
#include <strings.h>

#include "server/http_check.h"

/* tchar of RFC 9110: the bytes of a token. */
static bool is_tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool name_is(const struct http_field *f, const char *name) {
    size_t n = strlen(name);
    return f->name_len == n && !strncasecmp(f->name, name, n);
}

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

/* Content-Length's value: 1*DIGIT that fits 64 bits. */
static bool parse_length(const char *v, size_t len, uint64_t *out) {
    while (len && is_ows(*v)) v++, len--;
    while (len && is_ows(v[len - 1])) len--;
    if (!len) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)v[i] - '0';
        if (d > 9 || x > (UINT64_MAX - d) / 10) return false;
        x = x * 10 + d;
    }
    *out = x;
    return true;
}

/* Counts the codings of one Transfer-Encoding value (comma-separated,
 * empty elements skipped): *chunked the ones that are "chunked", *other
 * the rest. */
static void count_codings(const char *v, size_t len, int *chunked, int *other) {
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && v[j] != ',') j++;
        size_t a = i, b = j;
        while (a < b && is_ows(v[a])) a++;
        while (b > a && is_ows(v[b - 1])) b--;
        if (b > a) {
            if (b - a == 7 && !strncasecmp(v + a, "chunked", 7)) (*chunked)++;
            else (*other)++;
        }
        i = j + 1;
    }
}

int http_check_fields(const struct http_field *f, size_t n, bool http10, struct http_framing *out,
                      const char **why) {
    *out = (struct http_framing){0};
    int n_te = 0, chunked = 0, other = 0;
    for (size_t i = 0; i < n; i++) {
        if (!f[i].name_len) {
            *why = "an empty header name";
            return 400;
        }
        for (size_t k = 0; k < f[i].name_len; k++)
            if (!is_tchar((unsigned char)f[i].name[k])) {
                *why = "a header name with a space or a byte that is not allowed there";
                return 400;
            }
        for (size_t k = 0; k < f[i].value_len; k++) {
            unsigned char c = (unsigned char)f[i].value[k];
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                *why = "a control byte in a header value";
                return 400;
            }
        }
        if (name_is(&f[i], "Content-Length")) {
            uint64_t x;
            if (!parse_length(f[i].value, f[i].value_len, &x)) {
                *why = "a Content-Length that is not a number";
                return 400;
            }
            if (out->has_length && x != out->length) {
                *why = "two different Content-Length headers";
                return 400;
            }
            out->has_length = true;
            out->length = x;
        } else if (name_is(&f[i], "Transfer-Encoding")) {
            n_te++;
            count_codings(f[i].value, f[i].value_len, &chunked, &other);
        }
    }
    if (!n_te) return 0;
    if (http10) {
        *why = "Transfer-Encoding in an HTTP/1.0 request";
        return 400;
    }
    if (out->has_length) {
        *why = "both Content-Length and Transfer-Encoding";
        return 400;
    }
    if (other) {
        *why = "a transfer coding other than chunked";
        return 501;
    }
    if (chunked != 1) {
        *why = chunked ? "chunked applied more than once" : "an empty Transfer-Encoding";
        return 400;
    }
    out->chunked = true;
    return 0;
}

/* buf[a..b) holds only NULs and bytes of allow, and at most max bytes. */
static bool only(const char *buf, size_t a, size_t b, const char *allow, size_t max) {
    if (b - a > max) return false;
    for (size_t i = a; i < b; i++)
        if (buf[i] && !strchr(allow, buf[i])) return false;
    return true;
}

bool http_check_layout(const char *buf, size_t len, size_t line_end, const struct http_field *f, size_t n) {
    /* between at and the next name: a line end ("\r\n" or "\n"), or after
     * a name with an empty value, its colon, blanks and a line end */
    size_t at = line_end, max = 2;
    const char *skip = "\r\n";
    if (at > len) return false;
    for (size_t i = 0; i < n; i++) {
        if (f[i].name < buf || f[i].name > buf + len) return false;
        size_t name = (size_t)(f[i].name - buf);
        if (name < at || f[i].name_len > len - name) return false;
        if (!only(buf, at, name, skip, max)) return false;
        at = name + f[i].name_len;
        skip = ": \t\r\n";
        max = SIZE_MAX;
        if (f[i].value_len) { /* an empty value may point anywhere */
            if (f[i].value < buf || f[i].value > buf + len) return false;
            size_t value = (size_t)(f[i].value - buf);
            if (value < at || f[i].value_len > len - value) return false;
            if (!only(buf, at, value, ": \t", SIZE_MAX)) return false;
            at = value + f[i].value_len;
            skip = "\r\n";
            max = 2;
        }
    }
    /* the last line's end and the empty line */
    return only(buf, at, len, skip, max == 2 ? 4 : max);
}

bool http_bearer_token(const char *v, size_t len, const char **tok, size_t *tok_len) {
    if (len < 7 || strncasecmp(v, "Bearer ", 7) != 0) return false;
    size_t a = 7;
    while (a < len && v[a] == ' ') a++;
    size_t b = len;
    while (b > a && is_ows(v[b - 1])) b--;
    *tok = v + a;
    *tok_len = b - a;
    return true;
}

bool http_key_equal(const char *given, size_t lg, const char *key, size_t lk) {
    unsigned diff = lg != lk;
    for (size_t i = 0; i < lk; i++) {
        unsigned char g = i < lg ? (unsigned char)given[i] : 0;
        diff |= (unsigned)(g ^ (unsigned char)key[i]);
    }
    return diff == 0;
}
