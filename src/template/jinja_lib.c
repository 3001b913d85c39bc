/*
 * jinja_lib.c — what templates call: Jinja2's filters and tests, the
 * Python methods of strings, dicts and lists that the immutable sandbox
 * allows (the mutating ones fail, as the sandbox makes them), and the
 * globals range, dict, namespace, raise_exception, strftime_now, joiner
 * and cycler.
 *
 * Case mapping (upper, lower, title, capitalize) is ASCII only; other
 * characters pass through. docs/templates.md lists everything here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/jinja_int.h"

/* ---- argument helpers ---------------------------------------------------- */

struct call {
    struct rctx *c;
    int line;
    const char *name;
    const struct jv *args;
    int n_args;
    const char *const *kw_names;
    const struct jv *kw;
    int n_kw;
};

/* Argument i, or keyword name, or undefined (absent). */
static struct jv arg(const struct call *k, int i, const char *name) {
    if (i >= 0 && i < k->n_args) return k->args[i];
    for (int j = 0; name && j < k->n_kw; j++)
        if (!strcmp(k->kw_names[j], name)) return k->kw[j];
    return jv_undef(NULL);
}

static bool given(struct jv v) { return v.t != JV_UNDEF; }

static void max_args(const struct call *k, int n) {
    if (k->n_args > n) jfail(k->c, k->line, "%s() takes at most %d arguments (%d given)", k->name, n, k->n_args);
}

static const struct jstr *want_str(const struct call *k, struct jv v, const char *what) {
    if (v.t != JV_STR) jfail(k->c, k->line, "%s: %s must be a string, not %s", k->name, what, jv_type_name(v));
    return v.s;
}

static int64_t want_int(const struct call *k, struct jv v, const char *what) {
    if (v.t == JV_INT) return v.i;
    if (v.t == JV_BOOL) return v.b;
    jfail(k->c, k->line, "%s: %s must be an integer, not %s", k->name, what, jv_type_name(v));
}

static struct jv str_of(struct rctx *c, struct jv v) { return jv_to_str(c, v); }

/* A new string from bytes computed from s (data when s is). */
static struct jv derived(struct rctx *c, const char *p, size_t n, bool tainted) {
    return jv_str(c, p, n, jtaint_all(c, n, tainted));
}

struct jv jv_iter(struct rctx *c, int line, struct jv v) {
    switch (v.t) {
    case JV_LIST: return v;
    case JV_UNDEF: return jv_list(c, 0);
    case JV_DICT: {
        if (v.d->ns) break;
        struct jv l = jv_list(c, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) jlist_push(c, l.l, v.d->k[i]);
        return l;
    }
    case JV_STR: {
        struct jv l = jv_list(c, v.s->n);
        for (size_t i = 0; i < v.s->n;) {
            size_t j = i + 1;
            while (j < v.s->n && ((unsigned char)v.s->p[j] & 0xC0) == 0x80) j++;
            jlist_push(c, l.l, jstr_sub(c, v.s, i, j));
            i = j;
        }
        return l;
    }
    default: break;
    }
    jfail(c, line, "'%s' object is not iterable", jv_type_name(v));
}

/* ---- string helpers ------------------------------------------------------- */

static bool py_space(const char *p, size_t n, size_t i, size_t *len) {
    unsigned char ch = (unsigned char)p[i];
    *len = 1;
    if (ch == ' ' || (ch >= 0x09 && ch <= 0x0d) || (ch >= 0x1c && ch <= 0x1f)) return true;
    /* U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 */
    if (ch == 0xC2 && i + 1 < n && ((unsigned char)p[i + 1] == 0x85 || (unsigned char)p[i + 1] == 0xA0)) {
        *len = 2;
        return true;
    }
    if (i + 2 < n && (ch == 0xE1 || ch == 0xE2 || ch == 0xE3)) {
        unsigned b1 = (unsigned char)p[i + 1], b2 = (unsigned char)p[i + 2];
        uint32_t cp = ((ch & 0x0Fu) << 12) | ((b1 & 0x3Fu) << 6) | (b2 & 0x3Fu);
        *len = 3;
        return cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
               cp == 0x205F || cp == 0x3000;
    }
    return false;
}

/* Length of the code point ending at p[end) (end > 0). */
static size_t cp_before(const char *p, size_t end) {
    size_t b = end - 1;
    while (b > 0 && ((unsigned char)p[b] & 0xC0) == 0x80) b--;
    return end - b;
}

static bool in_chars(const struct jstr *chars, const char *p, size_t len) {
    for (size_t i = 0; i + len <= chars->n;) {
        size_t l = 1;
        while (i + l < chars->n && ((unsigned char)chars->p[i + l] & 0xC0) == 0x80) l++;
        if (l == len && !memcmp(chars->p + i, p, len)) return true;
        i += l;
    }
    return false;
}

/* s stripped on the left and/or right of white space (chars NULL) or of
 * the code points in chars. */
static struct jv strip(struct rctx *c, const struct jstr *s, const struct jstr *chars, bool left, bool right) {
    size_t a = 0, b = s->n;
    while (left && a < b) {
        size_t l;
        if (chars) {
            l = 1;
            while (a + l < b && ((unsigned char)s->p[a + l] & 0xC0) == 0x80) l++;
            if (!in_chars(chars, s->p + a, l)) break;
        } else if (!py_space(s->p, s->n, a, &l)) break;
        a += l;
    }
    while (right && b > a) {
        size_t l = cp_before(s->p, b);
        if (chars) {
            if (!in_chars(chars, s->p + b - l, l)) break;
        } else {
            size_t l2;
            if (!py_space(s->p, s->n, b - l, &l2) || l2 != l) break;
        }
        b -= l;
    }
    return jstr_sub(c, s, a, b);
}

static struct jv case_map(struct rctx *c, const struct jstr *s, int mode) {
    char *d = arena_alloc(&c->arena, s->n + 1);
    bool word_start = true;
    for (size_t i = 0; i < s->n; i++) {
        char ch = s->p[i];
        bool up = ch >= 'a' && ch <= 'z', lo = ch >= 'A' && ch <= 'Z';
        bool alpha = up || lo || ((unsigned char)ch >= 0x80);
        char r = ch;
        switch (mode) {
        case 0: if (up) r = (char)(ch - 32); break;              /* upper */
        case 1: if (lo) r = (char)(ch + 32); break;              /* lower */
        case 2: /* capitalize */
            if (i == 0 && up) r = (char)(ch - 32);
            else if (i > 0 && lo) r = (char)(ch + 32);
            break;
        case 3: /* title */
            if (word_start && up) r = (char)(ch - 32);
            else if (!word_start && lo) r = (char)(ch + 32);
            break;
        }
        word_start = !alpha && !(ch >= '0' && ch <= '9');
        if (mode == 3) word_start = !alpha;
        d[i] = r;
    }
    return derived(c, d, s->n, s->taint != NULL);
}

static struct jv replace(struct rctx *c, const struct jstr *s, const struct jstr *old, const struct jstr *new,
                         int64_t count) {
    struct outbuf o = {0};
    size_t i = 0;
    int64_t done = 0;
    if (!old->n) {
        /* Python inserts new between every code point (and at both ends) */
        for (; i <= s->n && (count < 0 || done < count);) {
            out_bytes(c, &o, new->p, new->n);
            done++;
            if (i == s->n) {
                i++;
                break;
            }
            size_t l = 1;
            while (i + l < s->n && ((unsigned char)s->p[i + l] & 0xC0) == 0x80) l++;
            out_bytes(c, &o, s->p + i, l);
            i += l;
        }
        if (i < s->n) out_bytes(c, &o, s->p + i, s->n - i);
    } else {
        while (i < s->n && (count < 0 || done < count)) {
            const char *hit = memmem(s->p + i, s->n - i, old->p, old->n);
            if (!hit) break;
            size_t at = (size_t)(hit - s->p);
            out_bytes(c, &o, s->p + i, at - i);
            out_bytes(c, &o, new->p, new->n);
            i = at + old->n;
            done++;
        }
        out_bytes(c, &o, s->p + i, s->n - i);
    }
    return derived(c, o.p ? o.p : "", o.n, s->taint || new->taint);
}

/* str.split(sep, maxsplit) and rsplit; sep NULL: runs of white space. */
static struct jv split(struct rctx *c, int line, const struct jstr *s, const struct jstr *sep, int64_t max, bool right) {
    struct jv l = jv_list(c, 0);
    if (sep && !sep->n) jfail(c, line, "empty separator");
    if (sep) {
        if (!right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                const char *hit = (max < 0 || done < max) ? memmem(s->p + i, s->n - i, sep->p, sep->n) : NULL;
                if (!hit) break;
                size_t at = (size_t)(hit - s->p);
                jlist_push(c, l.l, jstr_sub(c, s, i, at));
                i = at + sep->n;
                done++;
            }
            jlist_push(c, l.l, jstr_sub(c, s, i, s->n));
            return l;
        }
        /* rsplit: from the right, then reversed */
        struct jv rev = jv_list(c, 0);
        size_t end = s->n;
        int64_t done = 0;
        while (max < 0 || done < max) {
            size_t at = SIZE_MAX;
            for (size_t j = end >= sep->n ? end - sep->n + 1 : 0; j-- > 0;)
                if (!memcmp(s->p + j, sep->p, sep->n)) {
                    at = j;
                    break;
                }
            if (at == SIZE_MAX) break;
            jlist_push(c, rev.l, jstr_sub(c, s, at + sep->n, end));
            end = at;
            done++;
        }
        jlist_push(c, rev.l, jstr_sub(c, s, 0, end));
        for (size_t i = rev.l->n; i-- > 0;) jlist_push(c, l.l, rev.l->v[i]);
        return l;
    }
    /* white-space split (maxsplit from the left; rsplit without sep is rare: same) */
    size_t i = 0, sl;
    int64_t done = 0;
    while (i < s->n) {
        while (i < s->n && py_space(s->p, s->n, i, &sl)) i += sl;
        if (i >= s->n) break;
        if (max >= 0 && done >= max) {
            size_t e = s->n;
            while (e > i) {
                size_t l2 = cp_before(s->p, e), l3;
                if (!py_space(s->p, s->n, e - l2, &l3)) break;
                e -= l2;
            }
            jlist_push(c, l.l, jstr_sub(c, s, i, e));
            break;
        }
        size_t b = i;
        while (i < s->n && !py_space(s->p, s->n, i, &sl)) i++;
        jlist_push(c, l.l, jstr_sub(c, s, b, i));
        done++;
    }
    return l;
}

static struct jv join(struct rctx *c, struct jv seq, const struct jstr *sep) {
    struct jv r = jv_str(c, "", 0, NULL);
    for (size_t i = 0; i < seq.l->n; i++) {
        if (i && sep->n) r = jstr_cat(c, r.s, sep);
        r = jstr_cat(c, r.s, str_of(c, seq.l->v[i]).s);
    }
    return r;
}

static bool has_prefix(const struct jstr *s, const struct jstr *p, bool suffix) {
    if (p->n > s->n) return false;
    return !memcmp(suffix ? s->p + s->n - p->n : s->p, p->p, p->n);
}

/* startswith/endswith: a string or a tuple of strings. */
static bool affix(const struct call *k, const struct jstr *s, struct jv what, bool suffix) {
    if (what.t == JV_LIST) {
        for (size_t i = 0; i < what.l->n; i++)
            if (has_prefix(s, want_str(k, what.l->v[i], "each prefix"), suffix)) return true;
        return false;
    }
    return has_prefix(s, want_str(k, what, "the prefix"), suffix);
}

static int64_t find(const struct jstr *s, const struct jstr *sub, bool right) {
    if (sub->n > s->n) return -1;
    if (!right) {
        const char *hit = memmem(s->p, s->n, sub->p, sub->n);
        return hit ? (int64_t)utf8_count(s->p, (size_t)(hit - s->p)) : -1;
    }
    for (size_t j = s->n - sub->n + 1; j-- > 0;)
        if (!memcmp(s->p + j, sub->p, sub->n)) return (int64_t)utf8_count(s->p, j);
    return -1;
}

/* str.format with "{}", "{0}" and "{name}" fields (no format specs). */
static struct jv str_format(const struct call *k, const struct jstr *f) {
    struct rctx *c = k->c;
    struct jv r = jv_str(c, "", 0, NULL);
    int auto_i = 0;
    size_t i = 0, run = 0;
    while (i < f->n) {
        char ch = f->p[i];
        if ((ch == '{' || ch == '}') && i + 1 < f->n && f->p[i + 1] == ch) {
            r = jstr_cat(c, r.s, jstr_sub(c, f, run, i + 1).s);
            i += 2;
            run = i;
            continue;
        }
        if (ch == '}') jfail(c, k->line, "Single '}' encountered in format string");
        if (ch != '{') {
            i++;
            continue;
        }
        r = jstr_cat(c, r.s, jstr_sub(c, f, run, i).s);
        size_t e = i + 1;
        while (e < f->n && f->p[e] != '}') e++;
        if (e >= f->n) jfail(c, k->line, "Single '{' encountered in format string");
        const char *field = f->p + i + 1;
        size_t fl = e - i - 1;
        if (memchr(field, ':', fl) || memchr(field, '!', fl)) jfail(c, k->line, "format specs are not supported");
        struct jv v;
        if (!fl) v = arg(k, auto_i++, NULL);
        else if (field[0] >= '0' && field[0] <= '9') v = arg(k, atoi(field), NULL);
        else {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)fl, field);
            v = arg(k, -1, name);
        }
        if (!given(v)) jfail(c, k->line, "format: a field without an argument");
        r = jstr_cat(c, r.s, str_of(c, v).s);
        i = e + 1;
        run = i;
    }
    return jstr_cat(c, r.s, jstr_sub(c, f, run, f->n).s);
}

static bool all_chars(const struct jstr *s, int kind) {
    if (!s->n) return false;
    bool cased = false;
    for (size_t i = 0; i < s->n; i++) {
        unsigned char ch = (unsigned char)s->p[i];
        bool d = ch >= '0' && ch <= '9', u = ch >= 'A' && ch <= 'Z', l = ch >= 'a' && ch <= 'z';
        switch (kind) {
        case 0: if (!d) return false; break;
        case 1: if (!u && !l && ch < 0x80) return false; break;
        case 2: if (!u && !l && !d && ch < 0x80) return false; break;
        case 3: { size_t sl; if (!py_space(s->p, s->n, i, &sl)) return false; i += sl - 1; break; }
        case 4: if (l) return false; cased |= u; break;
        case 5: if (u) return false; cased |= l; break;
        }
    }
    return kind < 4 || cased;
}

/* ---- methods ----------------------------------------------------------------- */

static struct jv method_call(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                             const char *const *kw_names, const struct jv *kw_vals, int n_kw, const char *name);

#define METHOD(fname)                                                                                                  \
    static struct jv m_##fname(struct rctx *c, struct jv self, const struct jv *args, int n_args,                     \
                               const char *const *kw_names, const struct jv *kw_vals, int n_kw) {                      \
        return method_call(c, self, args, n_args, kw_names, kw_vals, n_kw, #fname);                                    \
    }

static const char *const STR_METHODS[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith",
                                          "endswith", "replace", "upper", "lower", "title", "capitalize", "find",
                                          "rfind", "index", "rindex", "count", "join", "format", "isdigit", "isalpha",
                                          "isalnum", "isspace", "isupper", "islower", "removeprefix", "removesuffix",
                                          "casefold", "swapcase", "center", "ljust", "rjust", "zfill", "partition",
                                          "rpartition", "isnumeric", "isdecimal", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", "pop", "popitem", "update",
                                           "setdefault", "clear", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "copy", "append", "pop", "insert", "extend", "remove",
                                           "sort", "reverse", "clear", NULL};
static const char *const UNSAFE[] = {"pop", "popitem", "update", "setdefault", "clear", "append", "insert", "extend",
                                     "remove", "sort", "reverse", NULL};

static bool listed(const char *const *names, const char *name) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

static struct jv bound_method(struct rctx *c, struct jv self, const char *name);

struct jv find_method(struct rctx *c, struct jv v, const char *name) {
    const char *const *names = v.t == JV_STR ? STR_METHODS : v.t == JV_DICT ? DICT_METHODS : v.t == JV_LIST ? LIST_METHODS : NULL;
    if (!names || !listed(names, name)) return jv_undef(NULL);
    return bound_method(c, v, name);
}

static struct jv method_call(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                             const char *const *kw_names, const struct jv *kw_vals, int n_kw, const char *name) {
    struct call k = {c, 0, name, args, n_args, kw_names, kw_vals, n_kw};
    if (listed(UNSAFE, name))
        jfail(c, 0, "access to attribute '%s' of '%s' object is unsafe", name, jv_type_name(self));
    if (self.t == JV_DICT) {
        struct jdict *d = self.d;
        if (!strcmp(name, "get")) {
            struct jv *v = jdict_get(d, arg(&k, 0, "key"));
            struct jv def = arg(&k, 1, "default");
            return v ? *v : given(def) ? def : jv_none();
        }
        if (!strcmp(name, "copy")) {
            struct jv r = jv_dict(c, d->n);
            for (size_t i = 0; i < d->n; i++) jdict_set(c, r.d, d->k[i], d->v[i]);
            return r;
        }
        struct jv l = jv_list(c, d->n);
        for (size_t i = 0; i < d->n; i++) {
            if (!strcmp(name, "keys")) jlist_push(c, l.l, d->k[i]);
            else if (!strcmp(name, "values")) jlist_push(c, l.l, d->v[i]);
            else {
                struct jv pair = jv_list(c, 2);
                pair.tuple = true;
                jlist_push(c, pair.l, d->k[i]);
                jlist_push(c, pair.l, d->v[i]);
                jlist_push(c, l.l, pair);
            }
        }
        return l;
    }
    if (self.t == JV_LIST) {
        struct jlist *l = self.l;
        if (!strcmp(name, "copy")) {
            struct jv r = jv_list(c, l->n);
            for (size_t i = 0; i < l->n; i++) jlist_push(c, r.l, l->v[i]);
            return r;
        }
        struct jv x = arg(&k, 0, NULL);
        int64_t count = 0;
        for (size_t i = 0; i < l->n; i++)
            if (jv_equal(l->v[i], x)) {
                if (!strcmp(name, "index")) return jv_int((int64_t)i);
                count++;
            }
        if (!strcmp(name, "index")) jfail(c, 0, "value is not in list");
        return jv_int(count);
    }
    /* strings */
    const struct jstr *s = self.s;
    bool t = s->taint != NULL;
    struct jv a0 = arg(&k, 0, NULL);
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        max_args(&k, 1);
        const struct jstr *chars = given(a0) && a0.t != JV_NONE ? want_str(&k, a0, "chars") : NULL;
        return strip(c, s, chars, name[0] != 'r', name[0] != 'l');
    }
    if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
        struct jv sep = arg(&k, 0, "sep"), max = arg(&k, 1, "maxsplit");
        return split(c, 0, s, given(sep) && sep.t != JV_NONE ? want_str(&k, sep, "sep") : NULL,
                     given(max) ? want_int(&k, max, "maxsplit") : -1, name[0] == 'r');
    }
    if (!strcmp(name, "splitlines")) {
        struct jv l = jv_list(c, 0);
        bool keep = jv_truthy(arg(&k, 0, "keepends"));
        size_t b = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (s->p[i] != '\n' && s->p[i] != '\r') continue;
            size_t e = i;
            if (s->p[i] == '\r' && i + 1 < s->n && s->p[i + 1] == '\n') i++;
            jlist_push(c, l.l, jstr_sub(c, s, b, keep ? i + 1 : e));
            b = i + 1;
        }
        if (b < s->n) jlist_push(c, l.l, jstr_sub(c, s, b, s->n));
        return l;
    }
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) return jv_bool(affix(&k, s, a0, name[0] == 'e'));
    if (!strcmp(name, "replace")) {
        struct jv cnt = arg(&k, 2, "count");
        return replace(c, s, want_str(&k, a0, "old"), want_str(&k, arg(&k, 1, NULL), "new"),
                       given(cnt) ? want_int(&k, cnt, "count") : -1);
    }
    if (!strcmp(name, "upper")) return case_map(c, s, 0);
    if (!strcmp(name, "lower") || !strcmp(name, "casefold")) return case_map(c, s, 1);
    if (!strcmp(name, "capitalize")) return case_map(c, s, 2);
    if (!strcmp(name, "title")) return case_map(c, s, 3);
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "rindex")) {
        int64_t r = find(s, want_str(&k, a0, "sub"), name[0] == 'r');
        if (r < 0 && strstr(name, "index")) jfail(c, 0, "substring not found");
        return jv_int(r);
    }
    if (!strcmp(name, "count")) {
        const struct jstr *sub = want_str(&k, a0, "sub");
        if (!sub->n) return jv_int((int64_t)utf8_count(s->p, s->n) + 1);
        int64_t n = 0;
        for (const char *p = s->p; (p = memmem(p, s->n - (size_t)(p - s->p), sub->p, sub->n)); p += sub->n) n++;
        return jv_int(n);
    }
    if (!strcmp(name, "join")) return join(c, jv_iter(c, 0, a0), s);
    if (!strcmp(name, "format")) return str_format(&k, s);
    if (!strcmp(name, "isdigit") || !strcmp(name, "isnumeric") || !strcmp(name, "isdecimal")) return jv_bool(all_chars(s, 0));
    if (!strcmp(name, "isalpha")) return jv_bool(all_chars(s, 1));
    if (!strcmp(name, "isalnum")) return jv_bool(all_chars(s, 2));
    if (!strcmp(name, "isspace")) return jv_bool(all_chars(s, 3));
    if (!strcmp(name, "isupper")) return jv_bool(all_chars(s, 4));
    if (!strcmp(name, "islower")) return jv_bool(all_chars(s, 5));
    if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
        const struct jstr *p = want_str(&k, a0, "affix");
        bool suf = name[6] == 's';
        if (!has_prefix(s, p, suf)) return self;
        return suf ? jstr_sub(c, s, 0, s->n - p->n) : jstr_sub(c, s, p->n, s->n);
    }
    if (!strcmp(name, "partition") || !strcmp(name, "rpartition")) {
        const struct jstr *sep = want_str(&k, a0, "sep");
        int64_t at = find(s, sep, name[0] == 'r');
        struct jv r = jv_list(c, 3);
        r.tuple = true;
        if (at < 0) {
            struct jv e = jv_str(c, "", 0, NULL);
            jlist_push(c, r.l, name[0] == 'r' ? e : self);
            jlist_push(c, r.l, e);
            jlist_push(c, r.l, name[0] == 'r' ? self : e);
            return r;
        }
        size_t b = utf8_offset(s->p, s->n, at);
        jlist_push(c, r.l, jstr_sub(c, s, 0, b));
        jlist_push(c, r.l, jstr_sub(c, s, b, b + sep->n));
        jlist_push(c, r.l, jstr_sub(c, s, b + sep->n, s->n));
        return r;
    }
    if (!strcmp(name, "center") || !strcmp(name, "ljust") || !strcmp(name, "rjust") || !strcmp(name, "zfill")) {
        int64_t width = want_int(&k, a0, "width");
        size_t len = utf8_count(s->p, s->n);
        if (width <= (int64_t)len) return self;
        size_t pad = (size_t)width - len, left = name[0] == 'c' ? pad / 2 + (pad & (size_t)width & 1) : name[0] == 'l' ? 0 : pad;
        struct outbuf o = {0};
        char fill = name[0] == 'z' ? '0' : ' ';
        for (size_t i = 0; i < left; i++) out_bytes(c, &o, &fill, 1);
        out_bytes(c, &o, s->p, s->n);
        for (size_t i = left; i < pad; i++) out_bytes(c, &o, &fill, 1);
        return derived(c, o.p, o.n, t);
    }
    if (!strcmp(name, "swapcase")) {
        char *d = arena_alloc(&c->arena, s->n + 1);
        for (size_t i = 0; i < s->n; i++) {
            char ch = s->p[i];
            d[i] = ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
        }
        return derived(c, d, s->n, t);
    }
    jfail(c, 0, "'%s' object has no method '%s'", jv_type_name(self), name);
}

METHOD(strip) METHOD(lstrip) METHOD(rstrip) METHOD(split) METHOD(rsplit) METHOD(splitlines) METHOD(startswith)
METHOD(endswith) METHOD(replace) METHOD(upper) METHOD(lower) METHOD(title) METHOD(capitalize) METHOD(find)
METHOD(rfind) METHOD(index) METHOD(rindex) METHOD(count) METHOD(join) METHOD(format) METHOD(isdigit)
METHOD(isalpha) METHOD(isalnum) METHOD(isspace) METHOD(isupper) METHOD(islower) METHOD(removeprefix)
METHOD(removesuffix) METHOD(casefold) METHOD(swapcase) METHOD(center) METHOD(ljust) METHOD(rjust) METHOD(zfill)
METHOD(partition) METHOD(rpartition) METHOD(isnumeric) METHOD(isdecimal) METHOD(items) METHOD(keys) METHOD(values)
METHOD(get) METHOD(copy) METHOD(pop) METHOD(popitem) METHOD(update) METHOD(setdefault) METHOD(clear)
METHOD(append) METHOD(insert) METHOD(extend) METHOD(remove) METHOD(sort) METHOD(reverse)

static const struct {
    const char *name;
    jbuiltin fn;
} METHOD_FNS[] = {
#define M(x) {#x, m_##x}
    M(strip), M(lstrip), M(rstrip), M(split), M(rsplit), M(splitlines), M(startswith), M(endswith), M(replace),
    M(upper), M(lower), M(title), M(capitalize), M(find), M(rfind), M(index), M(rindex), M(count), M(join),
    M(format), M(isdigit), M(isalpha), M(isalnum), M(isspace), M(isupper), M(islower), M(removeprefix),
    M(removesuffix), M(casefold), M(swapcase), M(center), M(ljust), M(rjust), M(zfill), M(partition),
    M(rpartition), M(isnumeric), M(isdecimal), M(items), M(keys), M(values), M(get), M(copy), M(pop), M(popitem),
    M(update), M(setdefault), M(clear), M(append), M(insert), M(extend), M(remove), M(sort), M(reverse),
#undef M
};

static struct jv bound_method(struct rctx *c, struct jv self, const char *name) {
    for (size_t i = 0; i < sizeof METHOD_FNS / sizeof METHOD_FNS[0]; i++)
        if (!strcmp(METHOD_FNS[i].name, name)) {
            struct jfunc *fn = arena_alloc(&c->arena, sizeof *fn);
            fn->kind = JF_METHOD;
            fn->name = METHOD_FNS[i].name;
            fn->fn = METHOD_FNS[i].fn;
            fn->self = self;
            return (struct jv){.t = JV_FUNC, .fn = fn};
        }
    return jv_undef(NULL);
}

/* ---- globals ------------------------------------------------------------------ */

static struct jv g_range(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                         const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    (void)self;
    struct call k = {c, 0, "range", args, n_args, kw_names, kw_vals, n_kw};
    if (n_args < 1 || n_args > 3) jfail(c, 0, "range expected 1 to 3 arguments, got %d", n_args);
    int64_t a = 0, b, st = 1;
    if (n_args == 1) b = want_int(&k, args[0], "stop");
    else {
        a = want_int(&k, args[0], "start");
        b = want_int(&k, args[1], "stop");
        if (n_args == 3) st = want_int(&k, args[2], "step");
    }
    if (!st) jfail(c, 0, "range() arg 3 must not be zero");
    struct jv l = jv_list(c, 0);
    for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
        if (l.l->n >= 1000000) jfail(c, 0, "range too big");
        jlist_push(c, l.l, jv_int(i));
    }
    return l;
}

static struct jv g_dict(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                        const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    (void)self;
    struct jv d = jv_dict(c, (size_t)n_kw);
    if (n_args > 1) jfail(c, 0, "dict expected at most 1 argument");
    if (n_args == 1) {
        if (args[0].t == JV_DICT) {
            for (size_t i = 0; i < args[0].d->n; i++) jdict_set(c, d.d, args[0].d->k[i], args[0].d->v[i]);
        } else {
            struct jv l = jv_iter(c, 0, args[0]);
            for (size_t i = 0; i < l.l->n; i++) {
                struct jv p = l.l->v[i];
                if (p.t != JV_LIST || p.l->n != 2) jfail(c, 0, "dict: a sequence element is not a pair");
                jdict_set(c, d.d, p.l->v[0], p.l->v[1]);
            }
        }
    }
    for (int i = 0; i < n_kw; i++) jdict_set(c, d.d, jv_cstr(c, kw_names[i]), kw_vals[i]);
    return d;
}

static struct jv g_namespace(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                             const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    struct jv d = g_dict(c, self, args, n_args, kw_names, kw_vals, n_kw);
    d.d->ns = true;
    return d;
}

static struct jv g_raise(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                         const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    (void)self, (void)kw_names, (void)kw_vals, (void)n_kw;
    struct jv m = n_args ? jv_to_str(c, args[0]) : jv_cstr(c, "");
    jfail(c, 0, "%.*s", (int)(m.s->n > 200 ? 200 : m.s->n), m.s->p);
}

static struct jv g_strftime(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                            const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    (void)self;
    struct call k = {c, 0, "strftime_now", args, n_args, kw_names, kw_vals, n_kw};
    const struct jstr *f = want_str(&k, arg(&k, 0, "format"), "format");
    time_t t = (time_t)c->now;
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[512];
    size_t n = f->n ? strftime(buf, sizeof buf, f->p, &tm) : 0;
    return jv_str(c, buf, n, NULL);
}

static struct jv joiner_call(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                             const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    (void)args, (void)n_args, (void)kw_names, (void)kw_vals, (void)n_kw;
    struct jv *used = jdict_get_str(self.d, "used");
    if (!used->b) {
        used->b = true;
        return jv_str(c, "", 0, NULL);
    }
    return *jdict_get_str(self.d, "sep");
}

static struct jv g_joiner(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                          const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    (void)self;
    struct call k = {c, 0, "joiner", args, n_args, kw_names, kw_vals, n_kw};
    struct jv sep = arg(&k, 0, "sep");
    struct jv state = jv_dict(c, 2);
    jdict_set(c, state.d, jv_cstr(c, "sep"), given(sep) ? jv_to_str(c, sep) : jv_cstr(c, ", "));
    jdict_set(c, state.d, jv_cstr(c, "used"), jv_bool(false));
    struct jfunc *fn = arena_alloc(&c->arena, sizeof *fn);
    fn->kind = JF_METHOD;
    fn->name = "joiner";
    fn->fn = joiner_call;
    fn->self = state;
    return (struct jv){.t = JV_FUNC, .fn = fn};
}

struct jv find_global(struct rctx *c, const char *name) {
    static const struct {
        const char *name;
        jbuiltin fn;
    } G[] = {{"range", g_range},
             {"dict", g_dict},
             {"namespace", g_namespace},
             {"raise_exception", g_raise},
             {"strftime_now", g_strftime},
             {"joiner", g_joiner}};
    for (size_t i = 0; i < sizeof G / sizeof G[0]; i++)
        if (!strcmp(G[i].name, name)) {
            struct jfunc *fn = arena_alloc(&c->arena, sizeof *fn);
            fn->kind = JF_BUILTIN;
            fn->name = G[i].name;
            fn->fn = G[i].fn;
            return (struct jv){.t = JV_FUNC, .fn = fn};
        }
    return jv_undef(NULL);
}

/* ---- tests --------------------------------------------------------------------- */

static const char *const TESTS[] = {"defined", "undefined", "none", "string", "number", "integer", "float",
                                    "boolean", "true", "false", "mapping", "iterable", "sequence", "callable",
                                    "odd", "even", "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt",
                                    "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in",
                                    "sameas", "lower", "upper", "escaped", "filter", "test", NULL};

bool test_exists(const char *name) { return listed(TESTS, name); }

bool apply_test(struct rctx *c, int line, const char *name, struct jv v, const struct jv *args, int n_args) {
    struct call k = {c, line, name, args, n_args, NULL, NULL, 0};
    struct jv a = arg(&k, 0, NULL);
    if (!strcmp(name, "defined")) return v.t != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == JV_UNDEF;
    if (!strcmp(name, "none")) return v.t == JV_NONE;
    if (!strcmp(name, "string")) return v.t == JV_STR;
    if (!strcmp(name, "number")) return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
    if (!strcmp(name, "integer")) return v.t == JV_INT;
    if (!strcmp(name, "float")) return v.t == JV_FLOAT;
    if (!strcmp(name, "boolean")) return v.t == JV_BOOL;
    if (!strcmp(name, "true")) return v.t == JV_BOOL && v.b;
    if (!strcmp(name, "false")) return v.t == JV_BOOL && !v.b;
    if (!strcmp(name, "mapping")) return v.t == JV_DICT;
    if (!strcmp(name, "iterable")) return v.t == JV_LIST || v.t == JV_STR || (v.t == JV_DICT && !v.d->ns) || v.t == JV_UNDEF;
    if (!strcmp(name, "sequence")) return v.t == JV_LIST || v.t == JV_STR || (v.t == JV_DICT && !v.d->ns);
    if (!strcmp(name, "callable")) return v.t == JV_FUNC;
    if (!strcmp(name, "escaped")) return false;
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v.t == JV_UNDEF) jfail(c, line, "%s", v.undef ? v.undef : "undefined value");
        int64_t i = want_int(&k, v, "the value");
        return (i & 1) == (name[0] == 'o');
    }
    if (!strcmp(name, "divisibleby")) {
        int64_t d = want_int(&k, a, "the divisor");
        if (!d) jfail(c, line, "integer division or modulo by zero");
        return want_int(&k, v, "the value") % d == 0;
    }
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return jv_equal(v, a);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jv_equal(v, a);
    if (!strcmp(name, "sameas")) {
        if (v.t != a.t) return false;
        if (v.t == JV_NONE || v.t == JV_UNDEF) return true;
        if (v.t == JV_BOOL) return v.b == a.b;
        if (v.t == JV_LIST) return v.l == a.l;
        if (v.t == JV_DICT) return v.d == a.d;
        return jv_equal(v, a) && (v.t == JV_INT ? v.i >= -5 && v.i <= 256 : false);
    }
    if (!strcmp(name, "in")) {
        if (a.t == JV_STR && v.t == JV_STR) return memmem(a.s->p, a.s->n, v.s->p, v.s->n) != NULL || !v.s->n;
        struct jv l = jv_iter(c, line, a);
        for (size_t i = 0; i < l.l->n; i++)
            if (jv_equal(l.l->v[i], v)) return true;
        return false;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (v.t != JV_STR) return false;
        struct jv m = case_map(c, v.s, name[0] == 'l' ? 1 : 0);
        return m.s->n == v.s->n && !memcmp(m.s->p, v.s->p, v.s->n);
    }
    int cmp = -2;
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) cmp = 0;
    else if (!strcmp(name, "le") || !strcmp(name, "<=")) cmp = 1;
    else if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) cmp = 2;
    else if (!strcmp(name, "ge") || !strcmp(name, ">=")) cmp = 3;
    if (cmp >= 0) {
        int r = jv_compare(c, line, v, a);
        return cmp == 0 ? r < 0 : cmp == 1 ? r <= 0 : cmp == 2 ? r > 0 : r >= 0;
    }
    if (!strcmp(name, "filter") || !strcmp(name, "test")) {
        if (v.t != JV_STR) return false;
        return !strcmp(name, "test") ? test_exists(v.s->p) : true;
    }
    jfail(c, line, "no test named '%s'", name);
}

struct jv html_escape(struct rctx *c, struct jv v) {
    struct jv s = str_of(c, v);
    struct outbuf o = {0};
    for (size_t i = 0; i < s.s->n; i++) {
        char ch = s.s->p[i];
        const char *e = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;" : ch == '\'' ? "&#39;" : NULL;
        if (e) out_cstr(c, &o, e);
        else out_bytes(c, &o, &ch, 1);
    }
    struct jv r = derived(c, o.p ? o.p : "", o.n, s.s->taint != NULL);
    r.markup = true;
    return r;
}

/* ---- filters --------------------------------------------------------------------- */

/* The attribute path "a.b.0" of v (Jinja2's make_attrgetter). */
static struct jv attr_path(struct rctx *c, int line, struct jv v, const struct jstr *path) {
    size_t i = 0;
    while (i <= path->n) {
        size_t e = i;
        while (e < path->n && path->p[e] != '.') e++;
        char part[128];
        snprintf(part, sizeof part, "%.*s", (int)(e - i), path->p + i);
        char *end;
        long long idx = strtoll(part, &end, 10);
        if (*part && !*end) v = get_item(c, line, v, jv_int(idx));
        else v = get_item(c, line, v, jv_cstr(c, part));
        i = e + 1;
        if (v.t == JV_UNDEF) break;
    }
    return v;
}

static int sort_cmp(struct rctx *c, int line, struct jv a, struct jv b, bool case_sensitive) {
    if (!case_sensitive && a.t == JV_STR && b.t == JV_STR) {
        a = case_map(c, a.s, 1);
        b = case_map(c, b.s, 1);
    }
    return jv_compare(c, line, a, b);
}

/* Stable merge sort of v[0..n) by keys[0..n). */
static void sort_by(struct rctx *c, int line, struct jv *v, struct jv *keys, size_t n, bool cs, bool reverse) {
    if (n < 2) return;
    struct jv *tv = arena_alloc(&c->arena, n * sizeof *tv), *tk = arena_alloc(&c->arena, n * sizeof *tk);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int r = sort_cmp(c, line, keys[j], keys[i], cs);
                bool take_j = reverse ? r > 0 : r < 0;
                if (take_j) tv[o] = v[j], tk[o++] = keys[j++];
                else tv[o] = v[i], tk[o++] = keys[i++];
            }
            while (i < mid) tv[o] = v[i], tk[o++] = keys[i++];
            while (j < hi) tv[o] = v[j], tk[o++] = keys[j++];
        }
        memcpy(v, tv, n * sizeof *v);
        memcpy(keys, tk, n * sizeof *keys);
    }
}

static struct jv select_items(struct call *k, struct jv seq, bool by_attr, bool keep_when) {
    struct rctx *c = k->c;
    /* Jinja2 iterates only a true sequence: none and undefined give nothing */
    struct jv l = jv_iter(c, k->line, jv_truthy(seq) ? seq : jv_undef(NULL)), r = jv_list(c, 0);
    int first = by_attr ? 1 : 0;
    const struct jstr *attr = by_attr ? want_str(k, arg(k, 0, NULL), "the attribute") : NULL;
    struct jv tname = arg(k, first, NULL);
    for (size_t i = 0; i < l.l->n; i++) {
        struct jv x = by_attr ? attr_path(c, k->line, l.l->v[i], attr) : l.l->v[i];
        bool ok;
        if (!given(tname)) ok = jv_truthy(x);
        else {
            const struct jstr *tn = want_str(k, tname, "the test");
            ok = apply_test(c, k->line, tn->p, x, k->args + first + 1, k->n_args > first + 1 ? k->n_args - first - 1 : 0);
        }
        if (ok == keep_when) jlist_push(c, r.l, l.l->v[i]);
    }
    return r;
}

static struct jv tojson_filter(struct call *k, struct jv v) {
    struct rctx *c = k->c;
    struct jv ind = arg(k, 0, "indent"), seps = arg(k, -1, "separators"), sk = arg(k, -1, "sort_keys");
    struct jv ascii = arg(k, -1, "ensure_ascii");
    int indent = -1;
    if (given(ind) && ind.t != JV_NONE) indent = (int)want_int(k, ind, "indent");
    const char *item_sep = indent >= 0 ? "," : ", ", *key_sep = ": ";
    if (given(seps) && seps.t == JV_LIST && seps.l->n == 2) {
        item_sep = want_str(k, seps.l->v[0], "the item separator")->p;
        key_sep = want_str(k, seps.l->v[1], "the key separator")->p;
    }
    struct outbuf o = {0};
    jv_tojson(c, k->line, &o, v, indent, item_sep, key_sep, jv_truthy(sk), jv_truthy(ascii), 0);
    return derived(c, o.p ? o.p : "", o.n, true);
}

static struct jv indent_filter(struct call *k, struct jv v) {
    struct rctx *c = k->c;
    struct jv s = str_of(c, v), w = arg(k, 0, "width");
    bool first = jv_truthy(arg(k, 1, "first")), blank = jv_truthy(arg(k, 2, "blank"));
    struct jv pad;
    if (w.t == JV_STR) pad = w;
    else {
        int64_t n = given(w) ? want_int(k, w, "width") : 4;
        char sp[256];
        if (n < 0) n = 0;
        if (n > 255) n = 255;
        memset(sp, ' ', (size_t)n);
        pad = jv_str(c, sp, (size_t)n, NULL);
    }
    struct outbuf o = {0};
    size_t i = 0, ln = 0;
    bool t = s.s->taint != NULL;
    while (i <= s.s->n) {
        size_t e = i;
        while (e < s.s->n && s.s->p[e] != '\n') e++;
        bool empty = e == i;
        if ((ln > 0 || first) && (!empty || blank) && !(e >= s.s->n && empty && ln > 0 && !blank))
            out_bytes(c, &o, pad.s->p, pad.s->n);
        out_bytes(c, &o, s.s->p + i, e - i);
        if (e < s.s->n) out_bytes(c, &o, "\n", 1);
        i = e + 1;
        ln++;
    }
    return derived(c, o.p ? o.p : "", o.n, t);
}

struct jv apply_filter(struct rctx *c, int line, const char *name, struct jv v, const struct jv *args, int n_args,
                       const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    struct call k = {c, line, name, args, n_args, kw_names, kw_vals, n_kw};
    struct jv a0 = arg(&k, 0, NULL);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        struct jv def = arg(&k, 0, "default_value");
        bool boolean = jv_truthy(arg(&k, 1, "boolean"));
        if (v.t == JV_UNDEF || (boolean && !jv_truthy(v))) return given(def) ? def : jv_str(c, "", 0, NULL);
        return v;
    }
    if (!strcmp(name, "safe")) {
        struct jv s = str_of(c, v);
        s.markup = true;
        return s;
    }
    if (!strcmp(name, "e") || !strcmp(name, "escape") || !strcmp(name, "forceescape")) {
        struct jv s = str_of(c, v);
        return s.markup && name[0] != 'f' ? s : html_escape(c, s);
    }
    if (!strcmp(name, "string")) return str_of(c, v);
    if (!strcmp(name, "tojson")) return tojson_filter(&k, v);
    if (!strcmp(name, "pprint")) return str_of(c, v);
    /* an undefined value is "" to string filters and empty to sequence ones;
     * these need a real value */
    if (v.t == JV_UNDEF && (!strcmp(name, "dictsort") || !strcmp(name, "abs") || !strcmp(name, "round") ||
                            !strcmp(name, "attr") || !strcmp(name, "format")))
        jfail(c, line, "%s", v.undef ? v.undef : "undefined value");
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        switch (v.t) {
        case JV_UNDEF: return jv_int(0);
        case JV_STR: return jv_int((int64_t)utf8_count(v.s->p, v.s->n));
        case JV_LIST:
            if (v.gen) jfail(c, line, "object of type 'generator' has no len()");
            return jv_int((int64_t)v.l->n);
        case JV_DICT: return jv_int((int64_t)v.d->n);
        default: jfail(c, line, "object of type '%s' has no len()", jv_type_name(v));
        }
    }
    if (!strcmp(name, "trim")) {
        struct jv s = str_of(c, v);
        return strip(c, s.s, given(a0) && a0.t != JV_NONE ? want_str(&k, a0, "chars") : NULL, true, true);
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") || !strcmp(name, "title")) {
        struct jv s = str_of(c, v);
        int mode = name[0] == 'u' ? 0 : name[0] == 'l' ? 1 : name[0] == 'c' ? 2 : 3;
        return case_map(c, s.s, mode);
    }
    if (!strcmp(name, "replace")) {
        struct jv s = str_of(c, v), cnt = arg(&k, 2, "count");
        return replace(c, s.s, want_str(&k, str_of(c, a0), "old"), want_str(&k, str_of(c, arg(&k, 1, NULL)), "new"),
                       given(cnt) && cnt.t != JV_NONE ? want_int(&k, cnt, "count") : -1);
    }
    if (!strcmp(name, "list")) return v.t == JV_LIST && !v.tuple && !v.gen ? v : ({
        struct jv l = jv_iter(c, line, v), r = jv_list(c, l.l->n);
        for (size_t i = 0; i < l.l->n; i++) jlist_push(c, r.l, l.l->v[i]);
        r;
    });
    if (!strcmp(name, "join")) {
        struct jv sep = arg(&k, 0, "d"), attr = arg(&k, 1, "attribute");
        struct jv l = jv_iter(c, line, v);
        if (given(attr)) {
            struct jv m = jv_list(c, l.l->n);
            for (size_t i = 0; i < l.l->n; i++) jlist_push(c, m.l, attr_path(c, line, l.l->v[i], str_of(c, attr).s));
            l = m;
        }
        return join(c, l, given(sep) ? str_of(c, sep).s : jv_str(c, "", 0, NULL).s);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        struct jv l = jv_iter(c, line, v);
        if (!l.l->n) return jv_undef("No first item, sequence was empty.");
        return l.l->v[name[0] == 'f' ? 0 : l.l->n - 1];
    }
    if (!strcmp(name, "items")) {
        if (v.t == JV_UNDEF) return jv_list(c, 0);
        if (v.t != JV_DICT) jfail(c, line, "items: expected a mapping, got %s", jv_type_name(v));
        return method_call(c, v, NULL, 0, NULL, NULL, 0, "items");
    }
    if (!strcmp(name, "dictsort")) {
        if (v.t != JV_DICT) jfail(c, line, "dictsort: expected a mapping, got %s", jv_type_name(v));
        struct jv items = method_call(c, v, NULL, 0, NULL, NULL, 0, "items");
        bool cs = jv_truthy(arg(&k, 0, "case_sensitive"));
        struct jv by = arg(&k, 1, "by");
        bool rev = jv_truthy(arg(&k, 2, "reverse"));
        int idx = given(by) && by.t == JV_STR && !strcmp(by.s->p, "value") ? 1 : 0;
        size_t n = items.l->n;
        struct jv *keys = arena_alloc(&c->arena, (n + 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++) keys[i] = items.l->v[i].l->v[idx];
        sort_by(c, line, items.l->v, keys, n, cs, rev);
        return items;
    }
    if (!strcmp(name, "sort")) {
        struct jv l = jv_iter(c, line, v), r = jv_list(c, l.l->n);
        for (size_t i = 0; i < l.l->n; i++) jlist_push(c, r.l, l.l->v[i]);
        bool rev = jv_truthy(arg(&k, 0, "reverse")), cs = jv_truthy(arg(&k, 1, "case_sensitive"));
        struct jv attr = arg(&k, 2, "attribute");
        struct jv *keys = arena_alloc(&c->arena, (r.l->n + 1) * sizeof *keys);
        for (size_t i = 0; i < r.l->n; i++)
            keys[i] = given(attr) ? attr_path(c, line, r.l->v[i], str_of(c, attr).s) : r.l->v[i];
        sort_by(c, line, r.l->v, keys, r.l->n, cs, rev);
        return r;
    }
    if (!strcmp(name, "reverse")) {
        if (v.t == JV_STR) {
            struct jv l = jv_iter(c, line, v), r = jv_str(c, "", 0, NULL);
            for (size_t i = l.l->n; i-- > 0;) r = jstr_cat(c, r.s, l.l->v[i].s);
            return r;
        }
        struct jv l = jv_iter(c, line, v), r = jv_list(c, l.l->n);
        for (size_t i = l.l->n; i-- > 0;) jlist_push(c, r.l, l.l->v[i]);
        return r;
    }
    if (!strcmp(name, "unique")) {
        struct jv l = jv_iter(c, line, v), r = jv_list(c, 0);
        for (size_t i = 0; i < l.l->n; i++) {
            bool seen = false;
            for (size_t j = 0; j < r.l->n && !seen; j++) seen = jv_equal(r.l->v[j], l.l->v[i]);
            if (!seen) jlist_push(c, r.l, l.l->v[i]);
        }
        return r;
    }
    if (!strcmp(name, "map")) {
        struct jv l = jv_iter(c, line, jv_truthy(v) ? v : jv_undef(NULL)), r = jv_list(c, l.l->n);
        struct jv attr = arg(&k, -1, "attribute"), def = arg(&k, -1, "default");
        for (size_t i = 0; i < l.l->n; i++) {
            struct jv x;
            if (given(attr)) {
                x = attr_path(c, line, l.l->v[i], str_of(c, attr).s);
                if (x.t == JV_UNDEF && given(def)) x = def;
            } else {
                const struct jstr *fname = want_str(&k, a0, "the filter name");
                x = apply_filter(c, line, fname->p, l.l->v[i], args + 1, n_args > 0 ? n_args - 1 : 0, kw_names,
                                 kw_vals, n_kw);
            }
            jlist_push(c, r.l, x);
        }
        r.gen = true;
        return r;
    }
    if (!strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
        !strcmp(name, "rejectattr")) {
        struct jv r = select_items(&k, v, name[6] == 'a', name[0] == 's');
        r.gen = true;
        return r;
    }
    if (!strcmp(name, "attr")) return get_attr(c, line, v, want_str(&k, a0, "the name")->p);
    if (!strcmp(name, "int")) {
        struct jv def = arg(&k, 0, "default");
        if (v.t == JV_INT) return v;
        if (v.t == JV_BOOL) return jv_int(v.b);
        if (v.t == JV_FLOAT && isfinite(v.f)) return jv_int((int64_t)v.f);
        if (v.t == JV_STR) {
            char *end;
            long long i = strtoll(v.s->p, &end, 10);
            if (end != v.s->p && !*end) return jv_int(i);
            double f = strtod(v.s->p, &end);
            if (end != v.s->p && !*end && isfinite(f)) return jv_int((int64_t)f);
        }
        return given(def) ? def : jv_int(0);
    }
    if (!strcmp(name, "float")) {
        struct jv def = arg(&k, 0, "default");
        if (v.t == JV_FLOAT) return v;
        if (v.t == JV_INT || v.t == JV_BOOL) return jv_float(v.t == JV_INT ? (double)v.i : v.b);
        if (v.t == JV_STR) {
            char *end;
            double f = strtod(v.s->p, &end);
            if (end != v.s->p && !*end) return jv_float(f);
        }
        return given(def) ? def : jv_float(0);
    }
    if (!strcmp(name, "abs")) {
        if (v.t == JV_INT) return jv_int(v.i < 0 ? -v.i : v.i);
        if (v.t == JV_FLOAT) return jv_float(fabs(v.f));
        if (v.t == JV_BOOL) return jv_int(v.b);
        jfail(c, line, "bad operand type for abs(): '%s'", jv_type_name(v));
    }
    if (!strcmp(name, "round")) {
        struct jv prec = arg(&k, 0, "precision"), method = arg(&k, 1, "method");
        double x = v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : 0;
        double m = pow(10, given(prec) ? (double)want_int(&k, prec, "precision") : 0);
        const char *how = given(method) ? want_str(&k, method, "method")->p : "common";
        double r = !strcmp(how, "ceil") ? ceil(x * m) / m : !strcmp(how, "floor") ? floor(x * m) / m : round(x * m) / m;
        return jv_float(r);
    }
    if (!strcmp(name, "sum") || !strcmp(name, "min") || !strcmp(name, "max")) {
        struct jv l = jv_iter(c, line, v);
        struct jv attr = arg(&k, -1, "attribute");
        if (!strcmp(name, "sum")) {
            struct jv start = arg(&k, 1, "start"), acc = given(start) ? start : jv_int(0);
            for (size_t i = 0; i < l.l->n; i++) {
                struct jv x = given(attr) ? attr_path(c, line, l.l->v[i], str_of(c, attr).s) : l.l->v[i];
                if (acc.t == JV_INT && x.t == JV_INT) acc = jv_int(acc.i + x.i);
                else if ((acc.t == JV_INT || acc.t == JV_FLOAT) && (x.t == JV_INT || x.t == JV_FLOAT))
                    acc = jv_float((acc.t == JV_INT ? (double)acc.i : acc.f) + (x.t == JV_INT ? (double)x.i : x.f));
                else jfail(c, line, "sum: unsupported operand types");
            }
            return acc;
        }
        if (!l.l->n) return jv_undef("No aggregated item, sequence was empty.");
        size_t best = 0;
        bool cs = jv_truthy(arg(&k, 0, "case_sensitive"));
        for (size_t i = 1; i < l.l->n; i++) {
            struct jv a = given(attr) ? attr_path(c, line, l.l->v[i], str_of(c, attr).s) : l.l->v[i];
            struct jv b = given(attr) ? attr_path(c, line, l.l->v[best], str_of(c, attr).s) : l.l->v[best];
            int r = sort_cmp(c, line, a, b, cs);
            if (name[1] == 'i' ? r < 0 : r > 0) best = i;
        }
        return l.l->v[best];
    }
    if (!strcmp(name, "indent")) return indent_filter(&k, v);
    if (!strcmp(name, "center")) {
        struct jv s = str_of(c, v), w = arg(&k, 0, "width");
        struct jv wv = given(w) ? w : jv_int(80);
        return method_call(c, s, &wv, 1, NULL, NULL, 0, "center");
    }
    if (!strcmp(name, "wordcount")) {
        struct jv s = str_of(c, v);
        return jv_int((int64_t)split(c, line, s.s, NULL, -1, false).l->n);
    }
    if (!strcmp(name, "format")) {
        struct jv s = str_of(c, v);
        struct jv tuple = jv_list(c, (size_t)n_args);
        tuple.tuple = true;
        for (int i = 0; i < n_args; i++) jlist_push(c, tuple.l, args[i]);
        return str_percent(c, line, s, tuple);
    }
    if (!strcmp(name, "batch")) {
        int64_t n = want_int(&k, a0, "linecount");
        if (n <= 0) jfail(c, line, "batch: linecount must be positive");
        struct jv l = jv_iter(c, line, v), r = jv_list(c, 0), cur = jv_list(c, 0);
        struct jv fill = arg(&k, 1, "fill_with");
        for (size_t i = 0; i < l.l->n; i++) {
            jlist_push(c, cur.l, l.l->v[i]);
            if ((int64_t)cur.l->n == n) {
                jlist_push(c, r.l, cur);
                cur = jv_list(c, 0);
            }
        }
        if (cur.l->n) {
            while (given(fill) && (int64_t)cur.l->n < n) jlist_push(c, cur.l, fill);
            jlist_push(c, r.l, cur);
        }
        return r;
    }
    jfail(c, line, "no filter named '%s'", name);
}
