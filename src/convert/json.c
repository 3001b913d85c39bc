/*
 * json.c — the strict JSON parser of json.h: a recursive descent over the
 * buffer with an explicit depth bound, so no input can exhaust the stack.
 */
#include "convert/json.h"

#include <stdlib.h>
#include <string.h>

struct parser {
    const uint8_t *p;   /* input */
    size_t len;
    size_t pos;         /* next byte to read */
    struct kvik_err *err;
};

/* A growable byte buffer for decoded strings. */
struct sbuf {
    char *b;
    size_t n, cap;
};

static kvik_status fail(struct parser *ps, size_t at, const char *what) {
    return err_set(ps->err, KVIK_ERR_FORMAT, "json: %s at byte %zu", what, at);
}

static kvik_status nomem(struct parser *ps) {
    return err_set(ps->err, KVIK_ERR_NOMEM, "json: out of memory at byte %zu", ps->pos);
}

static void skip_ws(struct parser *ps) {
    while (ps->pos < ps->len) {
        uint8_t c = ps->p[ps->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        ps->pos++;
    }
}

static bool sbuf_put(struct sbuf *s, const void *src, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 32;
        while (cap < s->n + n + 1) cap *= 2;
        char *nb = realloc(s->b, cap);
        if (!nb) return false;
        s->b = nb;
        s->cap = cap;
    }
    memcpy(s->b + s->n, src, n);
    s->n += n;
    s->b[s->n] = '\0';
    return true;
}

static int hex4(const uint8_t *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = p[i];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Reads a string starting at its opening quote; *out and *out_len own the
 * decoded bytes on success. */
static kvik_status parse_string(struct parser *ps, char **out, size_t *out_len) {
    struct sbuf s = {0};
    size_t start = ps->pos;
    ps->pos++; /* the opening quote */
    if (!sbuf_put(&s, "", 0)) return nomem(ps);
    for (;;) {
        if (ps->pos >= ps->len) {
            free(s.b);
            return fail(ps, start, "unterminated string");
        }
        uint8_t c = ps->p[ps->pos];
        if (c == '"') {
            ps->pos++;
            break;
        }
        if (c < 0x20) {
            free(s.b);
            return fail(ps, ps->pos, "control character in string");
        }
        if (c == '\\') {
            if (ps->pos + 1 >= ps->len) {
                free(s.b);
                return fail(ps, start, "unterminated string");
            }
            uint8_t e = ps->p[ps->pos + 1];
            char one = 0;
            switch (e) {
            case '"': one = '"'; break;
            case '\\': one = '\\'; break;
            case '/': one = '/'; break;
            case 'b': one = '\b'; break;
            case 'f': one = '\f'; break;
            case 'n': one = '\n'; break;
            case 'r': one = '\r'; break;
            case 't': one = '\t'; break;
            case 'u': break;
            default:
                free(s.b);
                return fail(ps, ps->pos, "invalid escape in string");
            }
            if (e != 'u') {
                if (!sbuf_put(&s, &one, 1)) goto oom;
                ps->pos += 2;
                continue;
            }
            size_t at = ps->pos;
            int hi = ps->pos + 6 <= ps->len ? hex4(ps->p + ps->pos + 2) : -1;
            if (hi < 0) {
                free(s.b);
                return fail(ps, at, "invalid \\u escape");
            }
            ps->pos += 6;
            uint32_t cp = (uint32_t)hi;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(s.b);
                return fail(ps, at, "lone low surrogate in \\u escape");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = -1;
                if (ps->pos + 6 <= ps->len && ps->p[ps->pos] == '\\' && ps->p[ps->pos + 1] == 'u')
                    lo = hex4(ps->p + ps->pos + 2);
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    free(s.b);
                    return fail(ps, at, "high surrogate without a low surrogate in \\u escape");
                }
                ps->pos += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            }
            uint8_t enc[4];
            if (!sbuf_put(&s, enc, utf8_encode(cp, enc))) goto oom;
            continue;
        }
        size_t n = utf8_valid_seq(ps->p + ps->pos, ps->len - ps->pos);
        if (n == 0) {
            free(s.b);
            return fail(ps, ps->pos, "invalid UTF-8 in string");
        }
        if (!sbuf_put(&s, ps->p + ps->pos, n)) goto oom;
        ps->pos += n;
    }
    *out = s.b;
    *out_len = s.n;
    return KVIK_OK;
oom:
    free(s.b);
    return nomem(ps);
}

/* Reads a number per the JSON grammar; sets v to JSON_UINT or JSON_NUMBER. */
static kvik_status parse_number(struct parser *ps, struct json_value *v) {
    size_t start = ps->pos;
    bool neg = false, integral = true, overflow = false;
    uint64_t u = 0;
    if (ps->p[ps->pos] == '-') {
        neg = true;
        ps->pos++;
    }
    if (ps->pos >= ps->len || ps->p[ps->pos] < '0' || ps->p[ps->pos] > '9')
        return fail(ps, start, "invalid number");
    if (ps->p[ps->pos] == '0') {
        ps->pos++;
        if (ps->pos < ps->len && ps->p[ps->pos] >= '0' && ps->p[ps->pos] <= '9')
            return fail(ps, start, "number with a leading zero");
    } else {
        while (ps->pos < ps->len && ps->p[ps->pos] >= '0' && ps->p[ps->pos] <= '9') {
            uint64_t d = (uint64_t)(ps->p[ps->pos] - '0');
            if (u > (UINT64_MAX - d) / 10) overflow = true;
            else u = u * 10 + d;
            ps->pos++;
        }
    }
    if (ps->pos < ps->len && ps->p[ps->pos] == '.') {
        integral = false;
        ps->pos++;
        size_t digits = ps->pos;
        while (ps->pos < ps->len && ps->p[ps->pos] >= '0' && ps->p[ps->pos] <= '9') ps->pos++;
        if (ps->pos == digits) return fail(ps, start, "invalid number");
    }
    if (ps->pos < ps->len && (ps->p[ps->pos] == 'e' || ps->p[ps->pos] == 'E')) {
        integral = false;
        ps->pos++;
        if (ps->pos < ps->len && (ps->p[ps->pos] == '+' || ps->p[ps->pos] == '-')) ps->pos++;
        size_t digits = ps->pos;
        while (ps->pos < ps->len && ps->p[ps->pos] >= '0' && ps->p[ps->pos] <= '9') ps->pos++;
        if (ps->pos == digits) return fail(ps, start, "invalid number");
    }
    /* The value as a double: strtod over a NUL-terminated copy (the grammar
     * above has already been checked, so strtod reads all of it). */
    size_t n = ps->pos - start;
    char small[64], *text = n < sizeof small ? small : malloc(n + 1);
    if (!text) return nomem(ps);
    memcpy(text, ps->p + start, n);
    text[n] = 0;
    v->num = strtod(text, NULL);
    if (text != small) free(text);
    if (integral && !overflow && !neg) {
        v->type = JSON_UINT;
        v->u = u;
    } else {
        v->type = JSON_NUMBER;
    }
    return KVIK_OK;
}

static bool literal(struct parser *ps, const char *word) {
    size_t n = strlen(word);
    if (ps->len - ps->pos < n || memcmp(ps->p + ps->pos, word, n) != 0) return false;
    ps->pos += n;
    return true;
}

static kvik_status parse_value(struct parser *ps, struct json_value *v, int depth);

static kvik_status parse_array(struct parser *ps, struct json_value *v, int depth) {
    size_t cap = 0;
    v->type = JSON_ARRAY;
    ps->pos++; /* [ */
    skip_ws(ps);
    if (ps->pos < ps->len && ps->p[ps->pos] == ']') {
        ps->pos++;
        return KVIK_OK;
    }
    for (;;) {
        if (v->len == cap) {
            size_t nc = cap ? cap * 2 : 4;
            struct json_value *ni = realloc(v->items, nc * sizeof *ni);
            if (!ni) return nomem(ps);
            v->items = ni;
            cap = nc;
        }
        struct json_value *item = &v->items[v->len];
        memset(item, 0, sizeof *item);
        v->len++; /* a zeroed item is safe for json_free if parsing it fails */
        skip_ws(ps);
        kvik_status st = parse_value(ps, item, depth + 1);
        if (st) return st;
        skip_ws(ps);
        if (ps->pos >= ps->len) return fail(ps, v->at, "unterminated array");
        uint8_t c = ps->p[ps->pos++];
        if (c == ']') return KVIK_OK;
        if (c != ',') return fail(ps, ps->pos - 1, "expected ',' or ']' in array");
    }
}

static kvik_status parse_object(struct parser *ps, struct json_value *v, int depth) {
    size_t cap = 0;
    v->type = JSON_OBJECT;
    ps->pos++; /* { */
    skip_ws(ps);
    if (ps->pos < ps->len && ps->p[ps->pos] == '}') {
        ps->pos++;
        return KVIK_OK;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->pos >= ps->len) return fail(ps, v->at, "unterminated object");
        if (ps->p[ps->pos] != '"') return fail(ps, ps->pos, "expected a string key in object");
        if (v->len == cap) {
            size_t nc = cap ? cap * 2 : 4;
            struct json_member *nm = realloc(v->members, nc * sizeof *nm);
            if (!nm) return nomem(ps);
            v->members = nm;
            cap = nc;
        }
        struct json_member *m = &v->members[v->len];
        memset(m, 0, sizeof *m);
        kvik_status st = parse_string(ps, &m->key, &m->key_len);
        if (st) return st;
        v->len++; /* owns the key from here on, for json_free */
        skip_ws(ps);
        if (ps->pos >= ps->len || ps->p[ps->pos] != ':')
            return fail(ps, ps->pos, "expected ':' after object key");
        ps->pos++;
        skip_ws(ps);
        st = parse_value(ps, &m->value, depth + 1);
        if (st) return st;
        skip_ws(ps);
        if (ps->pos >= ps->len) return fail(ps, v->at, "unterminated object");
        uint8_t c = ps->p[ps->pos++];
        if (c == '}') return KVIK_OK;
        if (c != ',') return fail(ps, ps->pos - 1, "expected ',' or '}' in object");
    }
}

static kvik_status parse_value(struct parser *ps, struct json_value *v, int depth) {
    v->at = ps->pos;
    if (depth > JSON_MAX_DEPTH) return fail(ps, ps->pos, "nesting too deep");
    if (ps->pos >= ps->len) return fail(ps, ps->pos, "unexpected end of input");
    uint8_t c = ps->p[ps->pos];
    switch (c) {
    case '{': return parse_object(ps, v, depth);
    case '[': return parse_array(ps, v, depth);
    case '"':
        v->type = JSON_STRING;
        return parse_string(ps, &v->str, &v->len);
    case 't':
        v->type = JSON_TRUE;
        return literal(ps, "true") ? KVIK_OK : fail(ps, v->at, "invalid literal");
    case 'f':
        v->type = JSON_FALSE;
        return literal(ps, "false") ? KVIK_OK : fail(ps, v->at, "invalid literal");
    case 'n':
        v->type = JSON_NULL;
        return literal(ps, "null") ? KVIK_OK : fail(ps, v->at, "invalid literal");
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps, v);
        return fail(ps, ps->pos, "unexpected character");
    }
}

kvik_status json_parse(const char *buf, size_t len, struct json_value *out,
                       struct kvik_err *err) {
    struct parser ps = {(const uint8_t *)buf, len, 0, err};
    memset(out, 0, sizeof *out);
    skip_ws(&ps);
    kvik_status st = parse_value(&ps, out, 1);
    if (!st) {
        skip_ws(&ps);
        if (ps.pos != len) st = fail(&ps, ps.pos, "trailing characters after the value");
    }
    if (st) json_free(out);
    return st;
}

void json_free(struct json_value *v) {
    if (!v) return;
    if (v->type == JSON_STRING) free(v->str);
    if (v->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->len; i++) json_free(&v->items[i]);
        free(v->items);
    }
    if (v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->len; i++) {
            free(v->members[i].key);
            json_free(&v->members[i].value);
        }
        free(v->members);
    }
    memset(v, 0, sizeof *v);
}

const char *json_type_name(enum json_type t) {
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_FALSE:
    case JSON_TRUE: return "a boolean";
    case JSON_UINT: return "an integer";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "?";
}
