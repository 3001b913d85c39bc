/*
 * multipart.c — the multipart/form-data reader of multipart.h: the
 * boundary from the Content-Type, then each part's header lines and the
 * bytes up to the next delimiter line.
 */
#include <string.h>
#include <strings.h>

#include "server/multipart.h"

enum { MAX_BOUNDARY = 70, MAX_HEADERS = 16 };

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* True for a byte a bare parameter value (an RFC 7230 token) may hold. */
static bool token_char(unsigned char c) {
    return c > 32 && c < 127 && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/*
 * Reads the parameter list at p[0..n) ("; a=b; c=\"d\"") looking for key;
 * its value (unquoted, escapes resolved) into out[cap]. Returns 1 when
 * found, 0 when not, -1 when the list is malformed or the value too long.
 */
static int find_param(const char *p, size_t n, const char *key, char *out, size_t cap, size_t *out_len) {
    size_t i = 0, kl = strlen(key);
    int found = 0;
    while (i < n) {
        while (i < n && is_space(p[i])) i++;
        if (i == n) break;
        if (p[i] != ';') return -1;
        i++;
        while (i < n && is_space(p[i])) i++;
        size_t k0 = i;
        while (i < n && token_char((unsigned char)p[i]) && p[i] != '=') i++;
        size_t k1 = i;
        while (i < n && is_space(p[i])) i++;
        if (k1 == k0 || i == n || p[i] != '=') return -1;
        i++;
        while (i < n && is_space(p[i])) i++;
        char val[512];
        size_t vl = 0;
        if (i < n && p[i] == '"') {
            i++;
            for (;;) {
                if (i >= n) return -1;
                char c = p[i++];
                if (c == '"') break;
                if (c == '\\') {
                    if (i >= n) return -1;
                    c = p[i++];
                }
                if ((unsigned char)c < 32 && c != '\t') return -1;
                if (vl + 1 >= sizeof val) return -1;
                val[vl++] = c;
            }
        } else {
            while (i < n && token_char((unsigned char)p[i])) {
                if (vl + 1 >= sizeof val) return -1;
                val[vl++] = p[i++];
            }
            if (!vl) return -1;
        }
        if (k1 - k0 == kl && !strncasecmp(p + k0, key, kl)) {
            if (found || vl + 1 > cap) return -1; /* given twice, or too long */
            memcpy(out, val, vl);
            out[vl] = 0;
            if (out_len) *out_len = vl;
            found = 1;
        }
    }
    return found;
}

/* The end of the line starting at i (the index of its '\n'), or n. */
static size_t line_end(const char *b, size_t n, size_t i) {
    const char *nl = memchr(b + i, '\n', n - i);
    return nl ? (size_t)(nl - b) : n;
}

/* The length of line [i, e) without a CR before its LF. */
static size_t trim_cr(const char *b, size_t i, size_t e) { return e > i && b[e - 1] == '\r' ? e - i - 1 : e - i; }

/* One part's header lines from *at; fills the part's names and type. */
static bool read_headers(const char *b, size_t n, size_t *at, struct mp_part *part, const char **why) {
    bool disposition = false;
    for (int h = 0;; h++) {
        if (*at >= n) {
            *why = "a part's headers run to the end of the body";
            return false;
        }
        size_t e = line_end(b, n, *at);
        if (e == n) {
            *why = "a part's headers run to the end of the body";
            return false;
        }
        size_t ll = trim_cr(b, *at, e);
        const char *line = b + *at;
        *at = e + 1;
        if (ll == 0) break;
        if (h >= MAX_HEADERS) {
            *why = "a part has too many header lines";
            return false;
        }
        const char *colon = memchr(line, ':', ll);
        if (!colon || colon == line) {
            *why = "a part's header line has no name";
            return false;
        }
        size_t nl = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vl = ll - nl - 1;
        while (vl && is_space(*v)) v++, vl--;
        while (vl && is_space(v[vl - 1])) vl--;
        if (nl == 19 && !strncasecmp(line, "Content-Disposition", 19)) {
            if (disposition) {
                *why = "a part has two Content-Disposition headers";
                return false;
            }
            disposition = true;
            if (vl < 9 || strncasecmp(v, "form-data", 9)) {
                *why = "a part's Content-Disposition is not form-data";
                return false;
            }
            size_t name_len = 0;
            int r = find_param(v + 9, vl - 9, "name", part->name, sizeof part->name, &name_len);
            int f = r < 0 ? -1 : find_param(v + 9, vl - 9, "filename", part->filename, sizeof part->filename, NULL);
            if (r < 0 || f < 0) {
                *why = "a part's Content-Disposition parameters are malformed";
                return false;
            }
            if (r == 0 || name_len == 0) {
                *why = "a part has no name";
                return false;
            }
            part->has_filename = f == 1;
        } else if (nl == 12 && !strncasecmp(line, "Content-Type", 12)) {
            if (vl >= sizeof part->content_type) {
                *why = "a part's Content-Type is too long";
                return false;
            }
            memcpy(part->content_type, v, vl);
            part->content_type[vl] = 0;
        }
    }
    if (!disposition) {
        *why = "a part has no Content-Disposition";
        return false;
    }
    return true;
}

int multipart_parse(const char *content_type, const char *body, size_t len, struct mp_part *parts, int max,
                    const char **why) {
    static const char media[] = "multipart/form-data";
    size_t ml = sizeof media - 1;
    if (!content_type || strncasecmp(content_type, media, ml)) {
        *why = "the Content-Type is not multipart/form-data";
        return -1;
    }
    char boundary[MAX_BOUNDARY + 3] = "--";
    size_t bl = 0;
    int r = find_param(content_type + ml, strlen(content_type + ml), "boundary", boundary + 2, MAX_BOUNDARY + 1,
                       &bl);
    if (r <= 0 || bl == 0 || bl > MAX_BOUNDARY) {
        *why = "the Content-Type has no usable boundary (1 to 70 bytes)";
        return -1;
    }
    size_t dl = bl + 2; /* "--" + boundary */
    /* the first delimiter: at the start, or at the start of a line */
    size_t at;
    if (len >= dl && !memcmp(body, boundary, dl)) {
        at = 0;
    } else {
        char nlb[MAX_BOUNDARY + 4] = "\n";
        memcpy(nlb + 1, boundary, dl);
        const char *p = memmem(body, len, nlb, dl + 1);
        if (!p) {
            *why = "the body holds no boundary line";
            return -1;
        }
        at = (size_t)(p - body) + 1;
    }
    int n = 0;
    char sep[MAX_BOUNDARY + 4] = "\n";
    memcpy(sep + 1, boundary, dl);
    for (;;) {
        at += dl; /* past "--boundary" */
        if (len - at >= 2 && body[at] == '-' && body[at + 1] == '-') return n; /* the close delimiter */
        while (at < len && is_space(body[at])) at++;
        if (at < len && body[at] == '\r') at++;
        if (at >= len || body[at] != '\n') {
            *why = "a boundary line does not end its line, or the body ends without the closing boundary";
            return -1;
        }
        at++;
        if (n == max) {
            *why = "the body has too many parts";
            return -1;
        }
        struct mp_part *part = &parts[n];
        memset(part, 0, sizeof *part);
        if (!read_headers(body, len, &at, part, why)) return -1;
        const char *end = memmem(body + at, len - at, sep, dl + 1);
        if (!end) {
            *why = "the body ends without the closing boundary";
            return -1;
        }
        size_t e = (size_t)(end - body); /* the '\n' before the delimiter */
        size_t de = e > at && body[e - 1] == '\r' ? e - 1 : e;
        part->data = body + at;
        part->len = de - at;
        n++;
        at = e + 1;
    }
}
