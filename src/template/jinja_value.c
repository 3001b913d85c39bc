/*
 * jinja_value.c — the template engine's values: the arena, strings with
 * their data ranges, lists and dicts, Python's str/repr/equality/ordering,
 * json.dumps, and conversion from the input JSON.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/json.h"
#include "template/jinja_int.h"

/* ---- arena ----------------------------------------------------------- */

struct arena_chunk {
    struct arena_chunk *next;
    size_t cap;
    _Alignas(16) unsigned char mem[];
};

void *arena_alloc(struct arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (!a->head || a->used + size > a->cap) {
        size_t cap = size > (64u << 10) ? size : (64u << 10);
        struct arena_chunk *ch = malloc(sizeof *ch + cap);
        if (!ch) {
            if (a->oom) longjmp(*a->oom, 2);
            return NULL;
        }
        ch->next = a->head;
        ch->cap = cap;
        a->head = ch;
        a->used = 0;
        a->cap = cap;
    }
    void *p = a->head->mem + a->used;
    a->used += size;
    memset(p, 0, size);
    return p;
}

void arena_free(struct arena *a) {
    for (struct arena_chunk *ch = a->head, *next; ch; ch = next) {
        next = ch->next;
        free(ch);
    }
    a->head = NULL;
    a->used = a->cap = 0;
}

/* ---- scalars --------------------------------------------------------- */

struct jv jv_undef(const char *what) { return (struct jv){.t = JV_UNDEF, .undef = what}; }
struct jv jv_none(void) { return (struct jv){.t = JV_NONE}; }
struct jv jv_bool(bool b) { return (struct jv){.t = JV_BOOL, .b = b}; }
struct jv jv_int(int64_t i) { return (struct jv){.t = JV_INT, .i = i}; }
struct jv jv_float(double f) { return (struct jv){.t = JV_FLOAT, .f = f}; }

/* ---- strings and their data ranges ------------------------------------- */

struct jv jv_str(struct rctx *c, const char *p, size_t n, const struct jtaint *taint) {
    struct jstr *s = arena_alloc(&c->arena, sizeof *s + n + 1);
    if (n) memcpy(s->p, p, n);
    s->n = n;
    s->taint = taint && taint->n ? taint : NULL;
    return (struct jv){.t = JV_STR, .s = s};
}

struct jv jv_cstr(struct rctx *c, const char *s) { return jv_str(c, s, strlen(s), NULL); }

const struct jtaint *jtaint_all(struct rctx *c, size_t n, bool tainted) {
    if (!tainted || !n) return NULL;
    struct jtaint *t = arena_alloc(&c->arena, sizeof *t + sizeof t->r[0]);
    t->n = 1;
    t->r[0] = (struct jinja_span){0, n};
    return t;
}

/* Appends [a, b) to t (capacity cap), merging with the last range. */
static void taint_add(struct jtaint *t, size_t a, size_t b) {
    if (a >= b) return;
    if (t->n && t->r[t->n - 1].end == a) {
        t->r[t->n - 1].end = b;
        return;
    }
    t->r[t->n++] = (struct jinja_span){a, b};
}

struct jv jstr_sub(struct rctx *c, const struct jstr *s, size_t a, size_t b) {
    if (b > s->n) b = s->n;
    if (a > b) a = b;
    struct jtaint *t = NULL;
    if (s->taint) {
        t = arena_alloc(&c->arena, sizeof *t + s->taint->n * sizeof t->r[0]);
        for (size_t i = 0; i < s->taint->n; i++) {
            size_t lo = s->taint->r[i].begin > a ? s->taint->r[i].begin : a;
            size_t hi = s->taint->r[i].end < b ? s->taint->r[i].end : b;
            if (lo < hi) taint_add(t, lo - a, hi - a);
        }
    }
    return jv_str(c, s->p + a, b - a, t);
}

struct jv jstr_cat(struct rctx *c, const struct jstr *a, const struct jstr *b) {
    struct jtaint *t = NULL;
    if (a->taint || b->taint) {
        size_t na = a->taint ? a->taint->n : 0, nb = b->taint ? b->taint->n : 0;
        t = arena_alloc(&c->arena, sizeof *t + (na + nb) * sizeof t->r[0]);
        for (size_t i = 0; i < na; i++) taint_add(t, a->taint->r[i].begin, a->taint->r[i].end);
        for (size_t i = 0; i < nb; i++) taint_add(t, a->n + b->taint->r[i].begin, a->n + b->taint->r[i].end);
    }
    struct jv v = jv_str(c, NULL, 0, NULL);
    struct jstr *s = arena_alloc(&c->arena, sizeof *s + a->n + b->n + 1);
    memcpy(s->p, a->p, a->n);
    memcpy(s->p + a->n, b->p, b->n);
    s->n = a->n + b->n;
    s->taint = t && t->n ? t : NULL;
    v.s = s;
    return v;
}

size_t utf8_count(const char *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)p[i] & 0xC0) != 0x80;
    return k;
}

size_t utf8_offset(const char *p, size_t n, int64_t i) {
    if (i <= 0) return 0;
    size_t k = 0;
    for (size_t b = 0; b < n; b++)
        if (((unsigned char)p[b] & 0xC0) != 0x80 && k++ == (size_t)i) return b;
    return n;
}

/* ---- lists and dicts --------------------------------------------------- */

struct jv jv_list(struct rctx *c, size_t cap) {
    struct jlist *l = arena_alloc(&c->arena, sizeof *l);
    l->cap = cap ? cap : 4;
    l->v = arena_alloc(&c->arena, l->cap * sizeof *l->v);
    return (struct jv){.t = JV_LIST, .l = l};
}

void jlist_push(struct rctx *c, struct jlist *l, struct jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        struct jv *nv = arena_alloc(&c->arena, cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

struct jv jv_dict(struct rctx *c, size_t cap) {
    struct jdict *d = arena_alloc(&c->arena, sizeof *d);
    d->cap = cap ? cap : 4;
    d->k = arena_alloc(&c->arena, d->cap * sizeof *d->k);
    d->v = arena_alloc(&c->arena, d->cap * sizeof *d->v);
    return (struct jv){.t = JV_DICT, .d = d};
}

struct jv *jdict_get(const struct jdict *d, struct jv k) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}

struct jv *jdict_get_str(const struct jdict *d, const char *k) {
    size_t n = strlen(k);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].s->n == n && !memcmp(d->k[i].s->p, k, n)) return &d->v[i];
    return NULL;
}

void jdict_set(struct rctx *c, struct jdict *d, struct jv k, struct jv v) {
    struct jv *old = jdict_get(d, k);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        struct jv *nk = arena_alloc(&c->arena, cap * sizeof *nk);
        struct jv *nv = arena_alloc(&c->arena, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

/* ---- truth, equality, order -------------------------------------------- */

bool jv_truthy(struct jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.s->n > 0;
    case JV_LIST: return v.gen || v.l->n > 0;
    case JV_DICT: return v.d->n > 0 || v.d->ns;
    default: return true;
    }
}

static bool is_num(struct jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num_f(struct jv v) { return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : v.t == JV_BOOL ? (double)v.b : 0; }
static int64_t num_i(struct jv v) { return v.t == JV_INT ? v.i : v.t == JV_BOOL ? (int64_t)v.b : 0; }

bool jv_equal(struct jv a, struct jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.s->n == b.s->n && !memcmp(a.s->p, b.s->p, a.s->n);
    case JV_LIST:
        if (a.l->n != b.l->n || a.tuple != b.tuple) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_equal(a.l->v[i], b.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a.d == b.d) return true;
        if (a.d->n != b.d->n || a.d->ns || b.d->ns) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            struct jv *o = jdict_get(b.d, a.d->k[i]);
            if (!o || !jv_equal(a.d->v[i], *o)) return false;
        }
        return true;
    case JV_FUNC: return a.fn == b.fn;
    default: return false;
    }
}

const char *jv_type_name(struct jv v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.gen ? "generator" : v.tuple ? "tuple" : "list";
    case JV_DICT: return v.d->ns ? "Namespace" : "dict";
    default: return "function";
    }
}

int jv_compare(struct rctx *c, int line, struct jv a, struct jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
        int r = memcmp(a.s->p, b.s->p, n); /* UTF-8 byte order is code-point order */
        if (r) return r < 0 ? -1 : 1;
        return a.s->n < b.s->n ? -1 : a.s->n > b.s->n;
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (jv_equal(a.l->v[i], b.l->v[i])) continue;
            return jv_compare(c, line, a.l->v[i], b.l->v[i]);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    jfail(c, line, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

/* ---- output buffers ---------------------------------------------------- */

void out_bytes(struct rctx *c, struct outbuf *o, const char *p, size_t n) {
    if (!n) return;
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n + 1) cap *= 2;
        char *np = arena_alloc(&c->arena, cap);
        if (o->n) memcpy(np, o->p, o->n);
        o->p = np;
        o->cap = cap;
    }
    memcpy(o->p + o->n, p, n);
    o->n += n;
    o->p[o->n] = 0;
}

void out_cstr(struct rctx *c, struct outbuf *o, const char *s) { out_bytes(c, o, s, strlen(s)); }

static void out_span(struct rctx *c, struct outbuf *o, size_t a, size_t b) {
    if (a >= b) return;
    if (o->n_data && o->data[o->n_data - 1].end == a) {
        o->data[o->n_data - 1].end = b;
        return;
    }
    if (o->n_data == o->cap_data) {
        size_t cap = o->cap_data ? 2 * o->cap_data : 16;
        struct jinja_span *nd = arena_alloc(&c->arena, cap * sizeof *nd);
        if (o->n_data) memcpy(nd, o->data, o->n_data * sizeof *nd);
        o->data = nd;
        o->cap_data = cap;
    }
    o->data[o->n_data++] = (struct jinja_span){a, b};
}

void out_str(struct rctx *c, struct outbuf *o, const struct jstr *s) {
    size_t base = o->n;
    out_bytes(c, o, s->p, s->n);
    if (s->taint)
        for (size_t i = 0; i < s->taint->n; i++) out_span(c, o, base + s->taint->r[i].begin, base + s->taint->r[i].end);
}

struct jv out_take(struct rctx *c, struct outbuf *o) {
    struct jtaint *t = NULL;
    if (o->n_data) {
        t = arena_alloc(&c->arena, sizeof *t + o->n_data * sizeof t->r[0]);
        t->n = o->n_data;
        memcpy(t->r, o->data, o->n_data * sizeof t->r[0]);
    }
    return jv_str(c, o->p, o->n, t);
}

/* ---- str and repr ------------------------------------------------------ */

void fmt_float(double f, char *buf, size_t len) {
    if (isnan(f)) {
        snprintf(buf, len, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, len, f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e: [-]d[.ddd]e[+-]XX: the shortest digits that read back as f */
    char digits[24];
    int nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = buf;
    size_t left = len;
#define PUT(...)                                                                                                       \
    do {                                                                                                               \
        int w_ = snprintf(o, left, __VA_ARGS__);                                                                       \
        if (w_ > 0 && (size_t)w_ < left) o += w_, left -= (size_t)w_;                                                  \
    } while (0)
    if (neg) PUT("-");
    if (exp < -4 || exp >= 16) {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%s", digits + 1);
        PUT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        PUT("0.");
        for (int i = -1; i > exp; i--) PUT("0");
        PUT("%s", digits);
    } else {
        for (int i = 0; i <= exp; i++) PUT("%c", i < nd ? digits[i] : '0');
        PUT(".");
        if (nd > exp + 1) PUT("%s", digits + exp + 1);
        else PUT("0");
    }
#undef PUT
}

static void repr_str(struct rctx *c, struct outbuf *o, const struct jstr *s) {
    bool sq = memchr(s->p, '\'', s->n) != NULL, dq = memchr(s->p, '"', s->n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    out_bytes(c, o, &q, 1);
    for (size_t i = 0; i < s->n; i++) {
        unsigned char ch = (unsigned char)s->p[i];
        char esc[8];
        if (ch == '\\') out_cstr(c, o, "\\\\");
        else if (ch == (unsigned char)q) {
            esc[0] = '\\';
            esc[1] = q;
            out_bytes(c, o, esc, 2);
        } else if (ch == '\n') out_cstr(c, o, "\\n");
        else if (ch == '\r') out_cstr(c, o, "\\r");
        else if (ch == '\t') out_cstr(c, o, "\\t");
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", ch);
            out_cstr(c, o, esc);
        } else out_bytes(c, o, (const char *)&s->p[i], 1);
    }
    out_bytes(c, o, &q, 1);
}

static void repr_at(struct rctx *c, struct outbuf *o, struct jv v, int depth);

void jv_repr(struct rctx *c, struct outbuf *o, struct jv v) { repr_at(c, o, v, 0); }

static void repr_at(struct rctx *c, struct outbuf *o, struct jv v, int depth) {
    char buf[64];
    if (depth > 200) jfail(c, 0, "a value nested too deeply to print");
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: out_cstr(c, o, "None"); return;
    case JV_BOOL: out_cstr(c, o, v.b ? "True" : "False"); return;
    case JV_INT: snprintf(buf, sizeof buf, "%lld", (long long)v.i); out_cstr(c, o, buf); return;
    case JV_FLOAT: fmt_float(v.f, buf, sizeof buf); out_cstr(c, o, buf); return;
    case JV_STR: repr_str(c, o, v.s); return;
    case JV_LIST:
        out_cstr(c, o, v.tuple ? "(" : "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) out_cstr(c, o, ", ");
            repr_at(c, o, v.l->v[i], depth + 1);
        }
        out_cstr(c, o, v.tuple ? (v.l->n == 1 ? ",)" : ")") : "]");
        return;
    case JV_DICT:
        if (v.d->ns) {
            out_cstr(c, o, "<Namespace ");
        } else out_cstr(c, o, "{");
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) out_cstr(c, o, ", ");
            repr_at(c, o, v.d->k[i], depth + 1);
            out_cstr(c, o, v.d->ns ? "=" : ": ");
            repr_at(c, o, v.d->v[i], depth + 1);
        }
        out_cstr(c, o, v.d->ns ? ">" : "}");
        return;
    default: snprintf(buf, sizeof buf, "<function %s>", v.fn->name ? v.fn->name : "?"); out_cstr(c, o, buf); return;
    }
}

struct jv jv_to_str(struct rctx *c, struct jv v) {
    if (v.t == JV_STR) return v;
    if (v.t == JV_UNDEF) return jv_str(c, "", 0, NULL);
    struct outbuf o = {0};
    jv_repr(c, &o, v);
    /* a container holding data is data as a whole */
    bool tainted = false;
    if (v.t == JV_LIST || v.t == JV_DICT) tainted = true;
    return jv_str(c, o.p ? o.p : "", o.n, jtaint_all(c, o.n, tainted));
}

/* ---- json.dumps ---------------------------------------------------------- */

static void json_str(struct rctx *c, struct outbuf *o, const struct jstr *s, bool ascii) {
    out_cstr(c, o, "\"");
    size_t run = 0;
    for (size_t i = 0; i < s->n; i++) {
        unsigned char ch = (unsigned char)s->p[i];
        const char *esc = NULL;
        char u[16];
        if (ascii && ch >= 0x80) {
            size_t l = utf8_valid_seq((const uint8_t *)s->p + i, s->n - i);
            uint32_t cp = 0xFFFD;
            if (l == 2) cp = ((ch & 0x1Fu) << 6) | (s->p[i + 1] & 0x3Fu);
            else if (l == 3) cp = ((ch & 0x0Fu) << 12) | ((s->p[i + 1] & 0x3Fu) << 6) | (s->p[i + 2] & 0x3Fu);
            else if (l == 4)
                cp = ((ch & 0x07u) << 18) | ((s->p[i + 1] & 0x3Fu) << 12) | ((s->p[i + 2] & 0x3Fu) << 6) |
                     (s->p[i + 3] & 0x3Fu);
            if (!l) l = 1;
            if (cp >= 0x10000)
                snprintf(u, sizeof u, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
            else snprintf(u, sizeof u, "\\u%04x", cp);
            out_bytes(c, o, s->p + run, i - run);
            out_cstr(c, o, u);
            i += l - 1;
            run = i + 1;
            continue;
        }
        if (ch == '"') esc = "\\\"";
        else if (ch == '\\') esc = "\\\\";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch == '\b') esc = "\\b";
        else if (ch == '\f') esc = "\\f";
        else if (ch < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", ch);
            esc = u;
        }
        if (!esc) continue;
        out_bytes(c, o, s->p + run, i - run);
        out_cstr(c, o, esc);
        run = i + 1;
    }
    out_bytes(c, o, s->p + run, s->n - run);
    out_cstr(c, o, "\"");
}

static void json_indent(struct rctx *c, struct outbuf *o, int indent, int depth) {
    out_cstr(c, o, "\n");
    for (int i = 0; i < indent * depth; i++) out_cstr(c, o, " ");
}

void jv_tojson(struct rctx *c, int line, struct outbuf *o, struct jv v, int indent, const char *item_sep,
               const char *key_sep, bool sort_keys, bool ascii, int depth) {
    char buf[64];
    if (depth > 200) jfail(c, line, "tojson: nesting too deep");
    switch (v.t) {
    case JV_NONE: out_cstr(c, o, "null"); return;
    case JV_BOOL: out_cstr(c, o, v.b ? "true" : "false"); return;
    case JV_INT: snprintf(buf, sizeof buf, "%lld", (long long)v.i); out_cstr(c, o, buf); return;
    case JV_FLOAT:
        if (isnan(v.f)) out_cstr(c, o, "NaN");
        else if (isinf(v.f)) out_cstr(c, o, v.f < 0 ? "-Infinity" : "Infinity");
        else {
            fmt_float(v.f, buf, sizeof buf);
            out_cstr(c, o, buf);
        }
        return;
    case JV_STR: json_str(c, o, v.s, ascii); return;
    case JV_LIST:
        if (v.gen) break;
        if (!v.l->n) {
            out_cstr(c, o, "[]");
            return;
        }
        out_cstr(c, o, "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) out_cstr(c, o, item_sep);
            if (indent >= 0) json_indent(c, o, indent, depth + 1);
            jv_tojson(c, line, o, v.l->v[i], indent, item_sep, key_sep, sort_keys, ascii, depth + 1);
        }
        if (indent >= 0) json_indent(c, o, indent, depth);
        out_cstr(c, o, "]");
        return;
    case JV_DICT: {
        if (v.d->ns) break;
        if (!v.d->n) {
            out_cstr(c, o, "{}");
            return;
        }
        size_t n = v.d->n;
        size_t *ord = arena_alloc(&c->arena, n * sizeof *ord);
        for (size_t i = 0; i < n; i++) ord[i] = i;
        if (sort_keys) /* insertion sort: dicts here are small */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && jv_compare(c, line, v.d->k[ord[j - 1]], v.d->k[ord[j]]) > 0; j--) {
                    size_t t = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = t;
                }
        out_cstr(c, o, "{");
        for (size_t k = 0; k < n; k++) {
            size_t i = ord[k];
            if (k) out_cstr(c, o, item_sep);
            if (indent >= 0) json_indent(c, o, indent, depth + 1);
            struct jv key = v.d->k[i];
            if (key.t == JV_STR) json_str(c, o, key.s, ascii);
            else if (key.t == JV_INT || key.t == JV_FLOAT || key.t == JV_BOOL || key.t == JV_NONE) {
                struct outbuf kb = {0};
                jv_tojson(c, line, &kb, key, -1, ", ", ": ", false, ascii, depth + 1);
                out_cstr(c, o, "\"");
                out_bytes(c, o, kb.p, kb.n);
                out_cstr(c, o, "\"");
            } else jfail(c, line, "keys must be str, int, float, bool or None, not %s", jv_type_name(key));
            out_cstr(c, o, key_sep);
            jv_tojson(c, line, o, v.d->v[i], indent, item_sep, key_sep, sort_keys, ascii, depth + 1);
        }
        if (indent >= 0) json_indent(c, o, indent, depth);
        out_cstr(c, o, "}");
        return;
    }
    default: break;
    }
    jfail(c, line, "Object of type %s is not JSON serializable", jv_type_name(v));
}

/* ---- from the input JSON ----------------------------------------------- */

/* True when the number literal at src[at] is written as an integer. */
static bool literal_is_int(const char *src, size_t at) {
    const char *p = src + at;
    if (*p == '-') p++;
    while (*p >= '0' && *p <= '9') p++;
    return *p != '.' && *p != 'e' && *p != 'E';
}

struct jv jv_from_json(struct rctx *c, const struct json_value *j, const char *src) {
    switch (j->type) {
    case JSON_NULL: return jv_none();
    case JSON_FALSE: return jv_bool(false);
    case JSON_TRUE: return jv_bool(true);
    case JSON_UINT:
        if (j->u <= INT64_MAX) return jv_int((int64_t)j->u);
        return jv_float(j->num);
    case JSON_NUMBER:
        if (literal_is_int(src, j->at) && j->num >= -9.2e18 && j->num <= 9.2e18) {
            /* a negative integer: read it exactly */
            return jv_int(strtoll(src + j->at, NULL, 10));
        }
        return jv_float(j->num);
    case JSON_STRING: return jv_str(c, j->str, j->len, jtaint_all(c, j->len, true));
    case JSON_ARRAY: {
        struct jv l = jv_list(c, j->len);
        for (size_t i = 0; i < j->len; i++) jlist_push(c, l.l, jv_from_json(c, &j->items[i], src));
        return l;
    }
    case JSON_OBJECT: {
        struct jv d = jv_dict(c, j->len);
        for (size_t i = 0; i < j->len; i++)
            jdict_set(c, d.d, jv_str(c, j->members[i].key, j->members[i].key_len,
                                     jtaint_all(c, j->members[i].key_len, true)), /* keys are data too */
                      jv_from_json(c, &j->members[i].value, src));
        return d;
    }
    }
    return jv_none();
}
