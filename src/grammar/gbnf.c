/*
 * gbnf.c — GBNF text to the byte-level grammar of grammar_int.h.
 *
 * The parser builds rules of alternatives of symbols while it reads:
 * literals become one byte symbol a byte, character classes a byte set
 * (ASCII) or a helper rule of UTF-8 byte sequences, groups and repetitions
 * helper rules. Rule names may be used before they are defined; at the end
 * every name must be defined, "root" must exist, and no rule may reach
 * itself before consuming a byte (left recursion, including a repetition
 * of something that can be empty).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"

enum {
    MAX_SYMS = 4 << 20, /* symbols of a compiled grammar */
    MAX_REPEAT = 10000, /* the largest count of {m,n} */
    MAX_DEPTH = 200,    /* nested groups */
};

struct balt { /* an alternative being built */
    struct gsym *s;
    int n, cap;
};

struct brule {
    char *name; /* NULL: a helper */
    bool defined;
    struct balt *alts;
    int n, cap;
};

struct builder {
    struct brule *rules;
    int n_rules, cap_rules;
    struct gset *sets;
    int n_sets, cap_sets;
    long total; /* symbols so far */
    bool oom;
    /* the text */
    const char *src, *p, *end;
    int depth;
    struct kvik_err *err;
    kvik_status st;
};

/* ---- building ------------------------------------------------------------- */

static bool fail(struct builder *b, kvik_status st, const char *fmt, const char *arg) {
    if (b->st) return false;
    int line = 1, col = 1;
    for (const char *q = b->src; q < b->p && q < b->end; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    char msg[200];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    b->st = err_set(b->err, st, "grammar: line %d, column %d: %s", line, col, msg);
    return false;
}

static bool oom(struct builder *b) {
    b->oom = true;
    if (!b->st) b->st = err_set(b->err, KVIK_ERR_NOMEM, "grammar: out of memory");
    return false;
}

static int new_rule(struct builder *b, const char *name, size_t len) {
    if (b->n_rules == b->cap_rules) {
        int cap = b->cap_rules ? 2 * b->cap_rules : 64;
        struct brule *r = realloc(b->rules, (size_t)cap * sizeof *r);
        if (!r) return oom(b), -1;
        b->rules = r;
        b->cap_rules = cap;
    }
    struct brule *r = &b->rules[b->n_rules];
    *r = (struct brule){0};
    if (name && !(r->name = strndup(name, len))) return oom(b), -1;
    return b->n_rules++;
}

static int rule_named(struct builder *b, const char *name, size_t len) {
    for (int i = 0; i < b->n_rules; i++)
        if (b->rules[i].name && strlen(b->rules[i].name) == len && !memcmp(b->rules[i].name, name, len)) return i;
    return new_rule(b, name, len);
}

static struct balt *new_alt(struct builder *b, int rule) {
    struct brule *r = &b->rules[rule];
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 4;
        struct balt *a = realloc(r->alts, (size_t)cap * sizeof *a);
        if (!a) return oom(b), NULL;
        r->alts = a;
        r->cap = cap;
    }
    r->alts[r->n] = (struct balt){0};
    return &r->alts[r->n++];
}

static bool push(struct builder *b, struct balt *a, struct gsym s) {
    if (++b->total > MAX_SYMS) return fail(b, KVIK_ERR_UNSUPPORTED, "the grammar is too large%s", NULL);
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 8;
        struct gsym *n = realloc(a->s, (size_t)cap * sizeof *n);
        if (!n) return oom(b);
        a->s = n;
        a->cap = cap;
    }
    a->s[a->n++] = s;
    return true;
}

static int add_set(struct builder *b, const struct gset *s) {
    for (int i = 0; i < b->n_sets; i++)
        if (!memcmp(&b->sets[i], s, sizeof *s)) return i;
    if (b->n_sets == b->cap_sets) {
        int cap = b->cap_sets ? 2 * b->cap_sets : 64;
        struct gset *n = realloc(b->sets, (size_t)cap * sizeof *n);
        if (!n) return oom(b), -1;
        b->sets = n;
        b->cap_sets = cap;
    }
    b->sets[b->n_sets] = *s;
    return b->n_sets++;
}

static struct gsym byte_range(struct builder *b, unsigned lo, unsigned hi) {
    struct gset s = {{0}};
    for (unsigned c = lo; c <= hi; c++) s.w[c >> 6] |= 1ull << (c & 63);
    int i = add_set(b, &s);
    return (struct gsym){GSYM_BYTES, (uint32_t)(i < 0 ? 0 : i)};
}

static struct gsym rule_sym(int r) { return (struct gsym){GSYM_RULE, (uint32_t)r}; }

/* ---- code points to UTF-8 byte sequences --------------------------------- */

/* Adds to rule the alternatives whose byte sequences are exactly the UTF-8
 * encodings of code points lo..hi (one length, aligned: see below). */
static void utf8_split(struct builder *b, int rule, unsigned lo, unsigned hi) {
    if (lo > hi || b->st) return;
    static const unsigned top[] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= top[i] && hi > top[i]) {
            utf8_split(b, rule, lo, top[i]);
            utf8_split(b, rule, top[i] + 1, hi);
            return;
        }
    int n = lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
    /* split until each continuation byte ranges over all of 80..BF or is
     * fixed by the bytes before it */
    for (int i = 1; i < n; i++) {
        unsigned m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) {
                utf8_split(b, rule, lo, lo | m);
                utf8_split(b, rule, (lo | m) + 1, hi);
                return;
            }
            if ((hi & m) != m) {
                utf8_split(b, rule, lo, (hi & ~m) - 1);
                utf8_split(b, rule, hi & ~m, hi);
                return;
            }
        }
    }
    uint8_t a[4], z[4];
    utf8_encode(lo, a);
    utf8_encode(hi, z);
    struct balt *alt = new_alt(b, rule);
    for (int k = 0; alt && k < n; k++) push(b, alt, byte_range(b, a[k], z[k]));
}

struct cpr {
    unsigned lo, hi;
};

static int cmp_cpr(const void *x, const void *y) {
    const struct cpr *a = x, *c = y;
    return a->lo < c->lo ? -1 : a->lo > c->lo;
}

/* The symbol of a class of code-point ranges (sorted and merged here;
 * negated: its complement; surrogates never match). */
static bool class_sym(struct builder *b, struct cpr *r, int n, bool negate, struct gsym *out) {
    if (n) qsort(r, (size_t)n, sizeof *r, cmp_cpr);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    struct cpr *c = malloc(((size_t)m + 2) * 2 * sizeof *c);
    if (!c) return oom(b);
    int k = 0;
    if (negate) {
        unsigned at = 0;
        for (int i = 0; i < m; i++) {
            if (r[i].lo > at) c[k++] = (struct cpr){at, r[i].lo - 1};
            at = r[i].hi + 1;
        }
        if (at <= 0x10FFFF) c[k++] = (struct cpr){at, 0x10FFFF};
    } else {
        if (m) memcpy(c, r, (size_t)m * sizeof *c);
        k = m;
    }
    /* cut the surrogates out */
    int k2 = 0;
    struct cpr *d = malloc(((size_t)k + 1) * 2 * sizeof *d);
    if (!d) {
        free(c);
        return oom(b);
    }
    for (int i = 0; i < k; i++) {
        if (c[i].hi < 0xD800 || c[i].lo > 0xDFFF) d[k2++] = c[i];
        else {
            if (c[i].lo < 0xD800) d[k2++] = (struct cpr){c[i].lo, 0xD7FF};
            if (c[i].hi > 0xDFFF) d[k2++] = (struct cpr){0xE000, c[i].hi};
        }
    }
    free(c);
    if (k2 == 0) {
        free(d);
        return fail(b, KVIK_ERR_FORMAT, "a character class that matches nothing%s", NULL);
    }
    if (d[k2 - 1].hi < 0x80) { /* ASCII: one byte set */
        struct gset s = {{0}};
        for (int i = 0; i < k2; i++)
            for (unsigned x = d[i].lo; x <= d[i].hi; x++) s.w[x >> 6] |= 1ull << (x & 63);
        int si = add_set(b, &s);
        free(d);
        *out = (struct gsym){GSYM_BYTES, (uint32_t)(si < 0 ? 0 : si)};
        return si >= 0;
    }
    int rule = new_rule(b, NULL, 0);
    if (rule < 0) {
        free(d);
        return false;
    }
    b->rules[rule].defined = true;
    struct gset ascii = {{0}};
    bool any_ascii = false;
    for (int i = 0; i < k2; i++) {
        unsigned lo = d[i].lo, hi = d[i].hi;
        for (; lo <= hi && lo < 0x80; lo++) ascii.w[lo >> 6] |= 1ull << (lo & 63), any_ascii = true;
        if (lo <= hi) utf8_split(b, rule, lo, hi);
    }
    free(d);
    if (any_ascii) {
        int si = add_set(b, &ascii);
        struct balt *alt = new_alt(b, rule);
        if (si < 0 || !alt || !push(b, alt, (struct gsym){GSYM_BYTES, (uint32_t)si})) return false;
    }
    *out = rule_sym(rule);
    return !b->st;
}

/* ---- the text ------------------------------------------------------------- */

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
}

/* Skips blanks and comments; newlines too when nl is set. */
static void skip_space(struct builder *b, bool nl) {
    while (b->p < b->end) {
        char c = *b->p;
        if (c == ' ' || c == '\t' || c == '\r' || (nl && c == '\n')) b->p++;
        else if (c == '#') {
            while (b->p < b->end && *b->p != '\n') b->p++;
        } else {
            break;
        }
    }
}

static int hex_value(struct builder *b, int digits, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < digits; i++) {
        if (b->p >= b->end) return fail(b, KVIK_ERR_FORMAT, "an escape ends early%s", NULL);
        char c = *b->p++;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail(b, KVIK_ERR_FORMAT, "a bad hexadecimal digit in an escape%s", NULL);
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return true;
}

/* One character of a literal or a class: an escape or a UTF-8 character. */
static bool read_char(struct builder *b, unsigned *out) {
    if (b->p >= b->end) return fail(b, KVIK_ERR_FORMAT, "unexpected end of the grammar%s", NULL);
    unsigned char c = (unsigned char)*b->p;
    if (c == '\\') {
        b->p++;
        if (b->p >= b->end) return fail(b, KVIK_ERR_FORMAT, "an escape ends early%s", NULL);
        char e = *b->p++;
        switch (e) {
        case 'n': *out = '\n'; return true;
        case 't': *out = '\t'; return true;
        case 'r': *out = '\r'; return true;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': *out = (unsigned char)e; return true;
        case 'x': return hex_value(b, 2, out);
        case 'u': return hex_value(b, 4, out);
        case 'U': return hex_value(b, 8, out) && (*out <= 0x10FFFF || fail(b, KVIK_ERR_FORMAT, "a code point past U+10FFFF%s", NULL));
        default: b->p--; return fail(b, KVIK_ERR_FORMAT, "an unknown escape%s", NULL);
        }
    }
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || b->end - b->p < n) return fail(b, KVIK_ERR_FORMAT, "invalid UTF-8%s", NULL);
    unsigned v = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        unsigned char x = (unsigned char)b->p[i];
        if ((x & 0xC0) != 0x80) return fail(b, KVIK_ERR_FORMAT, "invalid UTF-8%s", NULL);
        v = v << 6 | (x & 63);
    }
    b->p += n;
    *out = v;
    return true;
}

static bool parse_alternatives(struct builder *b, int rule, bool nested);

/* One item (without its repetition) appended to alt. */
static bool parse_primary(struct builder *b, struct balt *alt) {
    char c = *b->p;
    if (c == '"') {
        b->p++;
        while (b->p < b->end && *b->p != '"') {
            unsigned cp;
            if (!read_char(b, &cp)) return false;
            uint8_t u[4];
            int n = utf8_encode(cp, u);
            for (int i = 0; i < n; i++)
                if (!push(b, alt, byte_range(b, u[i], u[i]))) return false;
        }
        if (b->p >= b->end) return fail(b, KVIK_ERR_FORMAT, "a string is not closed%s", NULL);
        b->p++;
        return true;
    }
    if (c == '[' || c == '.') {
        struct cpr *r = NULL;
        int n = 0, cap = 0;
        bool negate = false;
        if (c == '.') {
            b->p++;
            r = malloc(sizeof *r);
            if (!r) return oom(b);
            r[n++] = (struct cpr){0, 0x10FFFF};
        } else {
            b->p++;
            if (b->p < b->end && *b->p == '^') negate = true, b->p++;
            while (b->p < b->end && *b->p != ']') {
                unsigned lo, hi;
                if (!read_char(b, &lo)) {
                    free(r);
                    return false;
                }
                hi = lo;
                if (b->end - b->p >= 2 && *b->p == '-' && b->p[1] != ']') {
                    b->p++;
                    if (!read_char(b, &hi)) {
                        free(r);
                        return false;
                    }
                    if (hi < lo) {
                        free(r);
                        return fail(b, KVIK_ERR_FORMAT, "a range whose end comes before its start%s", NULL);
                    }
                }
                if (n == cap) {
                    cap = cap ? 2 * cap : 8;
                    struct cpr *nr = realloc(r, (size_t)cap * sizeof *nr);
                    if (!nr) {
                        free(r);
                        return oom(b);
                    }
                    r = nr;
                }
                r[n++] = (struct cpr){lo, hi};
            }
            if (b->p >= b->end) {
                free(r);
                return fail(b, KVIK_ERR_FORMAT, "a character class is not closed%s", NULL);
            }
            b->p++;
            if (!n && !negate) {
                free(r);
                return fail(b, KVIK_ERR_FORMAT, "an empty character class%s", NULL);
            }
        }
        struct gsym s;
        bool ok = class_sym(b, r, n, negate, &s);
        free(r);
        return ok && push(b, alt, s);
    }
    if (c == '(') {
        if (++b->depth > MAX_DEPTH) return fail(b, KVIK_ERR_UNSUPPORTED, "groups nested too deeply%s", NULL);
        b->p++;
        int g = new_rule(b, NULL, 0);
        if (g < 0) return false;
        b->rules[g].defined = true;
        if (!parse_alternatives(b, g, true)) return false;
        skip_space(b, true);
        if (b->p >= b->end || *b->p != ')') return fail(b, KVIK_ERR_FORMAT, "a group is not closed: ')' expected%s", NULL);
        b->p++;
        b->depth--;
        return push(b, alt, rule_sym(g));
    }
    if (is_name_char(c)) {
        const char *s = b->p;
        while (b->p < b->end && is_name_char(*b->p)) b->p++;
        int r = rule_named(b, s, (size_t)(b->p - s));
        return r >= 0 && push(b, alt, rule_sym(r));
    }
    return fail(b, KVIK_ERR_FORMAT, "unexpected character%s", NULL);
}

/* alt[from..) as one symbol: itself when it is one, else a helper rule. */
static bool item_symbol(struct builder *b, struct balt *alt, int from, struct gsym *out) {
    if (alt->n - from == 1) {
        *out = alt->s[from];
        alt->n--;
        return true;
    }
    int r = new_rule(b, NULL, 0);
    if (r < 0) return false;
    b->rules[r].defined = true;
    struct balt *a = new_alt(b, r);
    if (!a) return false;
    for (int i = from; i < alt->n; i++)
        if (!push(b, a, alt->s[i])) return false;
    alt->n = from;
    *out = rule_sym(r);
    return true;
}

/* R ::= s R | (empty): s repeated any number of times. */
static int star_rule(struct builder *b, struct gsym s) {
    int r = new_rule(b, NULL, 0);
    if (r < 0) return -1;
    b->rules[r].defined = true;
    struct balt *a = new_alt(b, r);
    if (!a || !push(b, a, s) || !push(b, a, rule_sym(r))) return -1;
    if (!new_alt(b, r)) return -1;
    return r;
}

/* The repetition after the item alt[from..), if any. */
static bool parse_repeat(struct builder *b, struct balt *alt, int from) {
    if (b->p >= b->end) return true;
    char c = *b->p;
    if (c != '*' && c != '+' && c != '?' && c != '{') return true;
    struct gsym s;
    long lo, hi; /* hi < 0: no bound */
    if (c == '{') {
        b->p++;
        skip_space(b, false);
        char *e;
        lo = strtol(b->p, &e, 10);
        if (e == b->p || lo < 0 || lo > MAX_REPEAT) return fail(b, KVIK_ERR_FORMAT, "a count in {m,n} is out of range (0..10000)%s", NULL);
        b->p = e;
        skip_space(b, false);
        hi = lo;
        if (b->p < b->end && *b->p == ',') {
            b->p++;
            skip_space(b, false);
            hi = -1;
            if (b->p < b->end && *b->p != '}') {
                hi = strtol(b->p, &e, 10);
                if (e == b->p || hi < lo || hi > MAX_REPEAT) return fail(b, KVIK_ERR_FORMAT, "a count in {m,n} is out of range (m..10000)%s", NULL);
                b->p = e;
                skip_space(b, false);
            }
        }
        if (b->p >= b->end || *b->p != '}') return fail(b, KVIK_ERR_FORMAT, "'}' expected%s", NULL);
        b->p++;
    } else {
        b->p++;
        lo = c == '+';
        hi = c == '?' ? 1 : -1;
    }
    if (!item_symbol(b, alt, from, &s)) return false;
    for (long i = 0; i < lo; i++)
        if (!push(b, alt, s)) return false;
    if (hi < 0) {
        int r = star_rule(b, s);
        return r >= 0 && push(b, alt, rule_sym(r));
    }
    /* up to hi - lo more: O_k ::= s O_{k-1} | (empty), built inside out */
    int inner = -1;
    for (long k = 0; k < hi - lo; k++) {
        int r = new_rule(b, NULL, 0);
        if (r < 0) return false;
        b->rules[r].defined = true;
        struct balt *a = new_alt(b, r);
        if (!a || !push(b, a, s) || (inner >= 0 && !push(b, a, rule_sym(inner))) || !new_alt(b, r)) return false;
        inner = r;
    }
    return inner < 0 || push(b, alt, rule_sym(inner));
}

/* A sequence of items into a new alternative of rule: up to '|', ')', the
 * end of the rule (a newline outside groups) or of the text. */
static bool parse_sequence(struct builder *b, int rule, bool nested) {
    struct balt *alt = new_alt(b, rule);
    if (!alt) return false;
    int idx = b->rules[rule].n - 1;
    for (;;) {
        skip_space(b, nested);
        if (b->p >= b->end || *b->p == '|' || *b->p == ')' || *b->p == '\n') return true;
        alt = &b->rules[rule].alts[idx]; /* the rules array may have moved */
        int from = alt->n;
        if (!parse_primary(b, alt)) return false;
        alt = &b->rules[rule].alts[idx];
        if (!parse_repeat(b, alt, from)) return false;
    }
}

static bool parse_alternatives(struct builder *b, int rule, bool nested) {
    for (;;) {
        if (!parse_sequence(b, rule, nested)) return false;
        /* a top-level rule goes on on the next line when that starts with '|' */
        const char *save = b->p;
        skip_space(b, true);
        if (b->p < b->end && *b->p == '|') {
            b->p++;
            continue;
        }
        if (!nested) b->p = save;
        return true;
    }
}

static bool parse_rules(struct builder *b) {
    for (;;) {
        skip_space(b, true);
        if (b->p >= b->end) return true;
        const char *s = b->p;
        while (b->p < b->end && is_name_char(*b->p)) b->p++;
        if (b->p == s) return fail(b, KVIK_ERR_FORMAT, "a rule name expected%s", NULL);
        int r = rule_named(b, s, (size_t)(b->p - s));
        if (r < 0) return false;
        if (b->rules[r].defined) return fail(b, KVIK_ERR_FORMAT, "rule '%s' is defined twice", b->rules[r].name);
        b->rules[r].defined = true;
        skip_space(b, false);
        if (b->end - b->p < 3 || memcmp(b->p, "::=", 3)) return fail(b, KVIK_ERR_FORMAT, "'::=' expected%s", NULL);
        b->p += 3;
        if (!parse_alternatives(b, r, false)) return false;
        skip_space(b, false);
        if (b->p < b->end && *b->p != '\n') return fail(b, KVIK_ERR_FORMAT, "unexpected character%s", NULL);
    }
}

/* ---- checks and the compiled form ------------------------------------------ */

/* Left recursion: a rule that reaches itself through leading symbols that
 * can match nothing. */
static bool check_left_recursion(struct builder *b) {
    int n = b->n_rules;
    bool *nullable = calloc((size_t)n, 1);
    int *state = calloc((size_t)n, sizeof *state);
    int *stack = malloc(((size_t)n + 1) * 2 * sizeof *stack);
    if (!nullable || !state || !stack) {
        free(nullable), free(state), free(stack);
        return oom(b);
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int r = 0; r < n; r++) {
            if (nullable[r]) continue;
            for (int a = 0; a < b->rules[r].n && !nullable[r]; a++) {
                const struct balt *alt = &b->rules[r].alts[a];
                bool all = true;
                for (int i = 0; i < alt->n && all; i++) all = alt->s[i].kind == GSYM_RULE && nullable[alt->s[i].arg];
                if (all) nullable[r] = changed = true;
            }
        }
    }
    bool ok = true;
    int *next = calloc((size_t)n, sizeof *next); /* per rule on the path: the left corner to look at next */
    if (!next) ok = oom(b);
    /* depth-first over the left corners, iteratively */
    for (int root = 0; root < n && ok; root++) {
        if (state[root]) continue;
        int sp = 0;
        stack[sp++] = root;
        state[root] = 1;
        while (sp > 0 && ok) {
            int r = stack[sp - 1];
            /* the k-th left corner of r: walk alternatives and their nullable prefixes */
            int k = next[r]++, seen = 0, corner = -1;
            for (int a = 0; a < b->rules[r].n && corner < 0; a++) {
                const struct balt *alt = &b->rules[r].alts[a];
                for (int i = 0; i < alt->n; i++) {
                    if (alt->s[i].kind != GSYM_RULE) break;
                    if (seen++ == k) {
                        corner = (int)alt->s[i].arg;
                        break;
                    }
                    if (!nullable[alt->s[i].arg]) break;
                }
            }
            if (corner < 0) {
                state[r] = 2;
                sp--;
            } else if (state[corner] == 1) {
                const char *name = b->rules[corner].name;
                ok = fail(b, KVIK_ERR_UNSUPPORTED,
                          name ? "left recursion through rule '%s'" : "left recursion (a repetition of something that can be empty)%s",
                          name);
            } else if (state[corner] == 0) {
                state[corner] = 1;
                stack[sp++] = corner;
            }
        }
    }
    free(next);
    free(nullable);
    free(state);
    free(stack);
    return ok;
}

static void builder_free(struct builder *b) {
    for (int r = 0; r < b->n_rules; r++) {
        for (int a = 0; a < b->rules[r].n; a++) free(b->rules[r].alts[a].s);
        free(b->rules[r].alts);
        free(b->rules[r].name);
    }
    free(b->rules);
    free(b->sets);
}

/* Splits the bytes by each set in turn: after all, two bytes share a
 * class exactly when every set holds both or neither. */
static void byte_classes(struct grammar *g) {
    memset(g->byte_class, 0, sizeof g->byte_class);
    int n = 1;
    for (int s = 0; s < g->n_sets && n < 256; s++) {
        int16_t to[256][2];
        memset(to, 0xFF, sizeof to);
        int m = 0;
        for (int b = 0; b < 256; b++) {
            int c = g->byte_class[b], in = gset_has(&g->sets[s], (uint8_t)b);
            if (to[c][in] < 0) to[c][in] = (int16_t)m++;
            g->byte_class[b] = (uint8_t)to[c][in];
        }
        n = m;
    }
    g->n_classes = n;
    for (int b = 255; b >= 0; b--) g->class_byte[g->byte_class[b]] = (uint8_t)b;
}

static struct grammar *compile(struct builder *b) {
    struct grammar *g = calloc(1, sizeof *g);
    if (!g) return oom(b), NULL;
    pthread_mutex_init(&g->cache_mu, NULL);
    pthread_mutex_init(&g->au_mu, NULL);
    int n_alts = 0;
    long n_syms = 0;
    for (int r = 0; r < b->n_rules; r++) {
        n_alts += b->rules[r].n;
        for (int a = 0; a < b->rules[r].n; a++) n_syms += b->rules[r].alts[a].n + 1;
    }
    g->n_rules = b->n_rules;
    g->rule_alt0 = malloc(((size_t)b->n_rules + 1) * sizeof *g->rule_alt0);
    g->alts = malloc(((size_t)n_alts + 1) * sizeof *g->alts);
    g->syms = malloc(((size_t)n_syms + 1) * sizeof *g->syms);
    g->sets = malloc(((size_t)b->n_sets + 1) * sizeof *g->sets);
    if (!g->rule_alt0 || !g->alts || !g->syms || !g->sets) {
        grammar_free(g);
        return oom(b), NULL;
    }
    if (b->n_sets) memcpy(g->sets, b->sets, (size_t)b->n_sets * sizeof *g->sets);
    g->n_sets = b->n_sets;
    int ai = 0, si = 0;
    for (int r = 0; r < b->n_rules; r++) {
        g->rule_alt0[r] = (uint32_t)ai;
        for (int a = 0; a < b->rules[r].n; a++) {
            g->alts[ai++] = (uint32_t)si;
            if (b->rules[r].alts[a].n) /* an empty alternative has no array */
                memcpy(g->syms + si, b->rules[r].alts[a].s, (size_t)b->rules[r].alts[a].n * sizeof *g->syms);
            si += b->rules[r].alts[a].n;
            g->syms[si++] = (struct gsym){GSYM_END, 0};
        }
    }
    g->rule_alt0[b->n_rules] = (uint32_t)ai;
    g->n_alts = ai;
    byte_classes(g);
    g->n_syms = si;
    return g;
}

kvik_status grammar_from_gbnf(const char *src, size_t len, struct grammar **out, struct kvik_err *err) {
    *out = NULL;
    struct builder b = {.src = src, .p = src, .end = src + len, .err = err};
    if (!src) return err_set(err, KVIK_ERR_INVALID_ARG, "grammar: no text");
    bool ok = parse_rules(&b);
    int root = -1;
    for (int r = 0; ok && r < b.n_rules; r++) {
        if (!b.rules[r].defined) {
            b.p = b.end;
            ok = fail(&b, KVIK_ERR_FORMAT, "rule '%s' is used but not defined", b.rules[r].name);
        }
        if (b.rules[r].name && !strcmp(b.rules[r].name, "root")) root = r;
    }
    if (ok && root < 0) ok = fail(&b, KVIK_ERR_FORMAT, "no rule 'root'%s", NULL);
    if (ok) ok = check_left_recursion(&b);
    struct grammar *g = ok ? compile(&b) : NULL;
    if (g) g->root = root;
    kvik_status st = g ? KVIK_OK : b.st ? b.st : KVIK_ERR_NOMEM;
    builder_free(&b);
    *out = g;
    return st;
}

void grammar_free(struct grammar *g) {
    if (!g) return;
    free(g->rule_alt0);
    free(g->alts);
    free(g->syms);
    free(g->sets);
    gcache_free(g->cache);
    grammar_auto_free(g->au);
    pthread_mutex_destroy(&g->cache_mu);
    pthread_mutex_destroy(&g->au_mu);
    free(g);
}

int grammar_n_rules(const struct grammar *g) { return g->n_rules; }
int grammar_n_symbols(const struct grammar *g) { return g->n_syms; }
