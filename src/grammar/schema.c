/*
 * schema.c — JSON Schema to GBNF (grammar.h), for structured output.
 *
 * Each schema becomes a rule; docs/grammar.md lists the keywords and how
 * each is kept. In short: objects write their properties in the schema's
 * order, required ones always, optional ones or not, and no others unless
 * additionalProperties asks; arrays keep minItems/maxItems; strings
 * minLength/maxLength, a pattern (a regular-expression subset) or a format
 * (date, time, date-time, uuid, email); integers their bounds exactly,
 * numbers theirs by keeping the value between the integers inside them;
 * enum and const their JSON texts; anyOf/oneOf alternatives; $ref to $defs
 * or definitions, recursion included. Annotations (title, description,
 * examples, ...) are ignored; any other keyword is an error naming it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/json.h"
#include "grammar/grammar.h"

enum { MAX_SCHEMA_DEPTH = 64, MAX_RULES = 100000 };

struct sc {
    struct strbuf rules; /* the GBNF being written */
    int n_rules;
    const struct json_value *root;
    struct kvik_err *err;
    kvik_status st;
    /* $ref targets already given a rule: their JSON pointers and rule numbers */
    char **ref_path;
    int *ref_rule;
    int n_refs, cap_refs;
    int depth;
};

static const char VALUE_RULES[] =
    "ws ::= ( \" \" | \"\\n\" [ ]{0,24} )?\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "number ::= \"-\"? int-part frac? exp?\n"
    "int-part ::= \"0\" | [1-9] [0-9]{0,15}\n"
    "frac ::= \".\" [0-9]{1,16}\n"
    "exp ::= [eE] [-+]? [0-9]{1,3}\n";

const char *grammar_json_object_gbnf(void) {
    static char text[sizeof VALUE_RULES + 64];
    if (!text[0]) snprintf(text, sizeof text, "root ::= ws object\n%s", VALUE_RULES);
    return text;
}

static bool bad(struct sc *c, kvik_status st, const char *fmt, const char *a) {
    if (!c->st) c->st = err_set(c->err, st, fmt, a ? a : "");
    return false;
}

static const struct json_value *member(const struct json_value *o, const char *key) {
    if (!o || o->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < o->len; i++)
        if (!strcmp(o->members[i].key, key)) return &o->members[i].value;
    return NULL;
}

static int new_rule(struct sc *c) {
    if (c->n_rules >= MAX_RULES) return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: too large%s", NULL), -1;
    return c->n_rules++;
}

/* Appends s as a GBNF string literal. */
static void put_literal(struct strbuf *b, const char *s, size_t n) {
    strbuf_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        if (ch == '"' || ch == '\\') snprintf(e, sizeof e, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7F) snprintf(e, sizeof e, "\\x%02X", ch);
        else e[0] = (char)ch, e[1] = 0;
        strbuf_puts(b, e);
    }
    strbuf_puts(b, "\"");
}

/* The compact JSON text of v (json.dumps with no spaces). */
static void put_json(struct strbuf *b, const struct json_value *v) {
    switch (v->type) {
    case JSON_NULL: strbuf_puts(b, "null"); break;
    case JSON_TRUE: strbuf_puts(b, "true"); break;
    case JSON_FALSE: strbuf_puts(b, "false"); break;
    case JSON_UINT: {
        char n[32];
        snprintf(n, sizeof n, "%llu", (unsigned long long)v->u);
        strbuf_puts(b, n);
        break;
    }
    case JSON_NUMBER: {
        char n[40];
        if (v->num == floor(v->num) && fabs(v->num) < 1e15) snprintf(n, sizeof n, "%.0f", v->num);
        else snprintf(n, sizeof n, "%.17g", v->num);
        strbuf_puts(b, n);
        break;
    }
    case JSON_STRING: strbuf_json(b, v->str); break;
    case JSON_ARRAY:
        strbuf_puts(b, "[");
        for (size_t i = 0; i < v->len; i++) {
            if (i) strbuf_puts(b, ",");
            put_json(b, &v->items[i]);
        }
        strbuf_puts(b, "]");
        break;
    case JSON_OBJECT:
        strbuf_puts(b, "{");
        for (size_t i = 0; i < v->len; i++) {
            if (i) strbuf_puts(b, ",");
            strbuf_json(b, v->members[i].key);
            strbuf_puts(b, ":");
            put_json(b, &v->members[i].value);
        }
        strbuf_puts(b, "}");
        break;
    }
}

static void rule_head(struct sc *c, int r) {
    char h[32];
    snprintf(h, sizeof h, "r%d ::= ", r);
    strbuf_puts(&c->rules, h);
}

static void rule_ref(struct strbuf *b, int r) {
    char h[24];
    snprintf(h, sizeof h, " r%d ", r);
    strbuf_puts(b, h);
}

static int schema_rule(struct sc *c, const struct json_value *s);

/* ---- integers in a range ------------------------------------------------------ */

/* Alternatives (into b) for the digit strings pre + x, x from a to z (same
 * length n, compared as numbers; inner digits may be 0). */
static void digits_range(struct strbuf *b, const char *pre, int np, const char *a, const char *z, int n, bool *first) {
    char buf[96];
    if (n == 0) {
        strbuf_puts(b, *first ? " " : " | ");
        put_literal(b, pre, (size_t)np);
        *first = false;
        return;
    }
    char p2[40];
    memcpy(p2, pre, (size_t)np);
    if (a[0] == z[0]) {
        p2[np] = a[0];
        digits_range(b, p2, np + 1, a + 1, z + 1, n - 1, first);
        return;
    }
    bool a_zero = true, z_nine = true;
    for (int i = 1; i < n; i++) a_zero &= a[i] == '0', z_nine &= z[i] == '9';
    char lo_d = a_zero ? a[0] : (char)(a[0] + 1), hi_d = z_nine ? z[0] : (char)(z[0] - 1);
    if (!a_zero) {
        char nines[24];
        memset(nines, '9', (size_t)n - 1);
        p2[np] = a[0];
        digits_range(b, p2, np + 1, a + 1, nines, n - 1, first);
    }
    if (lo_d <= hi_d) {
        strbuf_puts(b, *first ? " " : " | ");
        if (np) put_literal(b, pre, (size_t)np);
        snprintf(buf, sizeof buf, " [%c-%c]", lo_d, hi_d);
        strbuf_puts(b, buf);
        if (n > 1) {
            snprintf(buf, sizeof buf, " [0-9]{%d}", n - 1);
            strbuf_puts(b, buf);
        }
        *first = false;
    }
    if (!z_nine) {
        char zeros[24];
        memset(zeros, '0', (size_t)n - 1);
        p2[np] = z[0];
        digits_range(b, p2, np + 1, zeros, z + 1, n - 1, first);
    }
}

/* GBNF alternatives (into b) for the decimal numbers lo..hi, 0 <= lo <=
 * hi, without leading zeros. */
static void uint_range(struct strbuf *b, unsigned long long lo, unsigned long long hi, bool *first) {
    if (lo > hi) return;
    char a[24], z[24];
    int la = snprintf(a, sizeof a, "%llu", lo), lz = snprintf(z, sizeof z, "%llu", hi);
    if (la < lz) { /* split where the digit count grows */
        unsigned long long p = 1;
        for (int i = 0; i < la; i++) p *= 10;
        uint_range(b, lo, p - 1, first);
        uint_range(b, p, hi, first);
        return;
    }
    digits_range(b, "", 0, a, z, la, first);
}

/* Integers in [lo, hi] (has_lo/has_hi: bounded on that side) as one rule. */
static int int_rule(struct sc *c, bool has_lo, long long lo, bool has_hi, long long hi) {
    int r = new_rule(c);
    if (r < 0) return -1;
    if (has_lo && has_hi && lo > hi) return bad(c, KVIK_ERR_FORMAT, "json schema: no integer lies within the bounds%s", NULL), -1;
    rule_head(c, r);
    struct strbuf *b = &c->rules;
    bool first = true;
    const char *any_pos = " [1-9] [0-9]{0,15}";
    /* negatives: -1 .. -(something) */
    if (!has_lo || lo < 0) {
        unsigned long long nlo = 1, nhi = has_lo ? (unsigned long long)(-(lo + 1)) + 1 : 0; /* |value| range */
        if (has_hi && hi < 0) nlo = (unsigned long long)(-(hi + 1)) + 1;
        strbuf_puts(b, " \"-\" (");
        if (has_lo) {
            bool f = true;
            uint_range(b, nlo, nhi, &f);
        } else {
            /* |v| >= nlo: same-length tail, then any longer number */
            char a[24];
            int la = snprintf(a, sizeof a, "%llu", nlo);
            bool f = true;
            unsigned long long p = 1;
            for (int i = 0; i < la; i++) p *= 10;
            uint_range(b, nlo, p - 1, &f);
            char buf[64];
            snprintf(buf, sizeof buf, " | [1-9] [0-9]{%d,15}", la);
            strbuf_puts(b, buf);
        }
        strbuf_puts(b, " )");
        first = false;
    }
    if (!has_hi || hi >= 0) {
        unsigned long long plo = has_lo && lo > 0 ? (unsigned long long)lo : 0;
        if (has_hi) {
            uint_range(b, plo, (unsigned long long)hi, &first);
        } else {
            if (plo == 0) {
                strbuf_puts(b, first ? " \"0\" |" : " | \"0\" |");
                strbuf_puts(b, any_pos);
            } else {
                char a[24];
                int la = snprintf(a, sizeof a, "%llu", plo);
                unsigned long long p = 1;
                for (int i = 0; i < la; i++) p *= 10;
                uint_range(b, plo, p - 1, &first);
                char buf[64];
                snprintf(buf, sizeof buf, " | [1-9] [0-9]{%d,15}", la);
                strbuf_puts(b, buf);
            }
        }
    }
    strbuf_puts(b, "\n");
    return r;
}

/* A bound of s (key), as a number; false when absent. */
static bool bound(const struct json_value *s, const char *key, double *out) {
    const struct json_value *v = member(s, key);
    if (!v || (v->type != JSON_UINT && v->type != JSON_NUMBER)) return false;
    *out = v->num;
    return true;
}

static int numeric_rule(struct sc *c, const struct json_value *s, bool integer) {
    double mn, mx, x;
    bool has_lo = bound(s, "minimum", &mn), has_hi = bound(s, "maximum", &mx);
    long long lo = 0, hi = 0;
    if (has_lo) lo = (long long)ceil(mn);
    if (bound(s, "exclusiveMinimum", &x)) {
        long long l = (long long)floor(x) + 1;
        lo = has_lo && lo > l ? lo : l;
        has_lo = true;
    }
    if (has_hi) hi = (long long)floor(mx);
    if (bound(s, "exclusiveMaximum", &x)) {
        long long h = (long long)ceil(x) - 1;
        hi = has_hi && hi < h ? hi : h;
        has_hi = true;
    }
    if ((has_lo && fabs((double)lo) > 1e15) || (has_hi && fabs((double)hi) > 1e15))
        return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: a bound past 1e15%s", NULL), -1;
    if (integer || (!has_lo && !has_hi)) {
        if (!integer) {
            int r = new_rule(c);
            if (r < 0) return -1;
            rule_head(c, r);
            strbuf_puts(&c->rules, " number\n");
            return r;
        }
        return int_rule(c, has_lo, lo, has_hi, hi);
    }
    /* a number: the integer part inside the bounds, with a fraction only
     * when it lies strictly inside them (so the value stays within) */
    int ends = int_rule(c, has_lo, lo, has_hi, hi);
    bool room = !has_lo || !has_hi || hi - lo >= 2;
    int inner = ends >= 0 && room ? int_rule(c, has_lo, lo + 1, has_hi, hi - 1) : -1;
    int r = ends < 0 || (room && inner < 0) ? -1 : new_rule(c);
    if (r < 0) return -1;
    rule_head(c, r);
    rule_ref(&c->rules, ends);
    if (room) {
        strbuf_puts(&c->rules, " |");
        rule_ref(&c->rules, inner);
        strbuf_puts(&c->rules, " frac");
    }
    strbuf_puts(&c->rules, "\n");
    return r;
}

/* ---- strings ------------------------------------------------------------------ */

/* A character class of JSON-safe characters from a regex class body. */
static bool regex_class(struct sc *c, const char **pp, const char *end, struct strbuf *b) {
    const char *p = *pp; /* after '[' */
    strbuf_puts(b, "[");
    if (p < end && *p == '^') strbuf_puts(b, "^\"\\\\\\x00-\\x1f"), p++;
    while (p < end && *p != ']') {
        if (*p == '\\' && p + 1 < end) {
            char e = p[1];
            if (e == 'd') strbuf_puts(b, "0-9");
            else if (e == 'w') strbuf_puts(b, "a-zA-Z0-9_");
            else if (e == 's') strbuf_puts(b, " \\t");
            else if (strchr(".-[]^$()*+?{}|/", e)) {
                char t[4] = {'\\', e, 0, 0};
                if (e != '-' && e != '[' && e != ']' && e != '^') t[0] = e, t[1] = 0;
                strbuf_puts(b, t);
            } else return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: pattern escape \\%s is not supported", (char[]){e, 0});
            p += 2;
        } else if (*p == '"' || *p == '\\') {
            return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: a pattern class holding %s", *p == '"' ? "a quote" : "a backslash");
        } else {
            strbuf_put(b, p, 1);
            p++;
        }
    }
    if (p >= end) return bad(c, KVIK_ERR_FORMAT, "json schema: a pattern class is not closed%s", NULL);
    strbuf_puts(b, "]");
    *pp = p + 1;
    return true;
}

/* The regex p[0..end) (a subset: literals, escapes, classes, groups,
 * alternation, quantifiers, ^ and $ at the ends) as GBNF. */
static bool regex(struct sc *c, const char **pp, const char *end, struct strbuf *b, int depth) {
    if (depth > 32) return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: a pattern nested too deeply%s", NULL);
    const char *p = *pp;
    strbuf_puts(b, "(");
    while (p < end && *p != ')') {
        char ch = *p;
        if (ch == '|') strbuf_puts(b, " |"), p++;
        else if (ch == '^' || ch == '$') p++; /* the match is whole anyway */
        else if (ch == '(') {
            p++;
            if (end - p >= 2 && p[0] == '?' && p[1] == ':') p += 2;
            else if (p < end && *p == '?') return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: pattern lookaround is not supported%s", NULL);
            strbuf_puts(b, " ");
            if (!regex(c, &p, end, b, depth + 1)) return false;
            if (p >= end || *p != ')') return bad(c, KVIK_ERR_FORMAT, "json schema: a pattern group is not closed%s", NULL);
            p++;
        } else if (ch == '[') {
            p++;
            strbuf_puts(b, " ");
            if (!regex_class(c, &p, end, b)) return false;
        } else if (ch == '.') {
            strbuf_puts(b, " char"), p++;
        } else if (ch == '*' || ch == '+' || ch == '?') {
            strbuf_put(b, p, 1), p++;
        } else if (ch == '{') {
            const char *q = p;
            while (q < end && *q != '}') q++;
            if (q >= end) return bad(c, KVIK_ERR_FORMAT, "json schema: a pattern count is not closed%s", NULL);
            strbuf_put(b, p, (size_t)(q - p + 1));
            p = q + 1;
        } else if (ch == '\\' && p + 1 < end) {
            char e = p[1];
            p += 2;
            if (e == 'd') strbuf_puts(b, " [0-9]");
            else if (e == 'w') strbuf_puts(b, " [a-zA-Z0-9_]");
            else if (e == 's') strbuf_puts(b, " [ \\t]");
            else if (e == 'D') strbuf_puts(b, " [^0-9\"\\\\\\x00-\\x1f]");
            else if (strchr(".-[]^$()*+?{}|/", e)) strbuf_puts(b, " "), put_literal(b, &e, 1);
            else return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: pattern escape \\%s is not supported", (char[]){e, 0});
        } else if (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) {
            return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: a pattern with a quote, backslash or control character%s", NULL);
        } else {
            /* one UTF-8 character as a literal */
            int n = (unsigned char)ch < 0x80 ? 1 : (ch & 0xE0) == 0xC0 ? 2 : (ch & 0xF0) == 0xE0 ? 3 : 4;
            if (end - p < n) n = (int)(end - p);
            strbuf_puts(b, " ");
            put_literal(b, p, (size_t)n);
            p += n;
        }
    }
    strbuf_puts(b, " )");
    *pp = p;
    return true;
}

static int string_rule(struct sc *c, const struct json_value *s) {
    const struct json_value *pat = member(s, "pattern"), *fmt = member(s, "format");
    double mn = 0, mx = -1;
    bool has_min = bound(s, "minLength", &mn), has_max = bound(s, "maxLength", &mx);
    int r = new_rule(c);
    if (r < 0) return -1;
    struct strbuf body = {0};
    if (pat) {
        if (pat->type != JSON_STRING) return bad(c, KVIK_ERR_FORMAT, "json schema: pattern is not a string%s", NULL), -1;
        if (has_min || has_max || fmt) return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: pattern with minLength, maxLength or format%s", NULL), -1;
        const char *p = pat->str;
        if (!regex(c, &p, pat->str + pat->len, &body, 0)) {
            free(body.p);
            return -1;
        }
        if (p != pat->str + pat->len) {
            free(body.p);
            return bad(c, KVIK_ERR_FORMAT, "json schema: a ')' without its '(' in pattern%s", NULL), -1;
        }
    } else if (fmt) {
        static const struct {
            const char *name, *gbnf;
        } formats[] = {
            {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"},
            {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
            {"date-time", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) \"T\" ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
            {"uuid", "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}"},
            {"email", "[a-zA-Z0-9_+-] [a-zA-Z0-9._+-]{0,31} \"@\" [a-zA-Z0-9] [a-zA-Z0-9-]{0,31} ( \".\" [a-zA-Z0-9] [a-zA-Z0-9-]{0,31} ){0,2} \".\" [a-zA-Z]{2,12}"},
        };
        size_t k = 0;
        while (k < sizeof formats / sizeof formats[0] && (fmt->type != JSON_STRING || strcmp(fmt->str, formats[k].name))) k++;
        if (k == sizeof formats / sizeof formats[0])
            return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: format \"%s\" is not supported (date, time, date-time, uuid, email)",
                       fmt->type == JSON_STRING ? fmt->str : "?"), -1;
        if (has_min || has_max) return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: format with minLength or maxLength%s", NULL), -1;
        strbuf_puts(&body, formats[k].gbnf);
    } else {
        if (mn < 0 || mn > 10000 || (has_max && (mx < mn || mx > 10000)))
            return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: minLength/maxLength out of 0..10000%s", NULL), -1;
        char q[64];
        if (has_max) snprintf(q, sizeof q, "char{%d,%d}", (int)mn, (int)mx);
        else if (has_min) snprintf(q, sizeof q, "char{%d,}", (int)mn);
        else snprintf(q, sizeof q, "char*");
        strbuf_puts(&body, q);
    }
    rule_head(c, r);
    strbuf_puts(&c->rules, "\"\\\"\" ");
    if (body.p) strbuf_put(&c->rules, body.p, body.n);
    strbuf_puts(&c->rules, " \"\\\"\"\n");
    free(body.p);
    return r;
}

/* ---- objects and arrays ----------------------------------------------------- */

static bool is_required(const struct json_value *req, const char *name) {
    for (size_t i = 0; req && req->type == JSON_ARRAY && i < req->len; i++)
        if (req->items[i].type == JSON_STRING && !strcmp(req->items[i].str, name)) return true;
    return false;
}

static int object_rule(struct sc *c, const struct json_value *s) {
    const struct json_value *props = member(s, "properties"), *req = member(s, "required");
    const struct json_value *extra = member(s, "additionalProperties");
    if (props && props->type != JSON_OBJECT) return bad(c, KVIK_ERR_FORMAT, "json schema: properties is not an object%s", NULL), -1;
    if (req && req->type != JSON_ARRAY) return bad(c, KVIK_ERR_FORMAT, "json schema: required is not an array%s", NULL), -1;
    for (size_t i = 0; req && i < req->len; i++)
        if (req->items[i].type != JSON_STRING || !member(props, req->items[i].str))
            return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: required names a property that is not in properties%s", NULL), -1;
    size_t n = props ? props->len : 0;
    /* the extra members: none (false, or properties given without it), any value (true), or a schema */
    int extra_rule = -1;
    bool extras = false;
    if (extra && extra->type == JSON_OBJECT) {
        extras = true;
        if ((extra_rule = schema_rule(c, extra)) < 0) return -1;
    } else if ((extra && extra->type == JSON_TRUE) || (!extra && !props)) {
        extras = true;
    }
    int *kv = malloc((n + 1) * sizeof *kv);
    if (!kv) return bad(c, KVIK_ERR_NOMEM, "json schema: out of memory%s", NULL), -1;
    for (size_t i = 0; i < n; i++) {
        int vr = schema_rule(c, &props->members[i].value);
        int r = vr < 0 ? -1 : new_rule(c);
        if (r < 0) {
            free(kv);
            return -1;
        }
        rule_head(c, r);
        struct strbuf key = {0};
        strbuf_json(&key, props->members[i].key);
        put_literal(&c->rules, key.p ? key.p : "\"\"", key.p ? key.n : 2);
        free(key.p);
        strbuf_puts(&c->rules, " ws \":\" ws");
        rule_ref(&c->rules, vr);
        strbuf_puts(&c->rules, "\n");
        kv[i] = r;
    }
    /* rest_i: properties i.. after one was written; first_i: before any */
    int tail = new_rule(c); /* the extras after the known ones (or nothing) */
    if (tail < 0) {
        free(kv);
        return -1;
    }
    char member[64], b[128]; /* one extra member */
    if (extra_rule >= 0) snprintf(member, sizeof member, "string ws \":\" ws r%d ws", extra_rule);
    else snprintf(member, sizeof member, "string ws \":\" ws value ws");
    rule_head(c, tail);
    if (extras) snprintf(b, sizeof b, " ( \",\" ws %s )*\n", member);
    strbuf_puts(&c->rules, extras ? b : "\"\"\n");
    int first_end = new_rule(c); /* first_n: the extras alone, or nothing */
    if (first_end < 0) {
        free(kv);
        return -1;
    }
    rule_head(c, first_end);
    if (extras) {
        snprintf(b, sizeof b, " ( %s r%d )?\n", member, tail);
        strbuf_puts(&c->rules, b);
    } else {
        strbuf_puts(&c->rules, "\"\"\n");
    }
    int next_rest = tail, next_first = first_end;
    for (size_t k = n; k-- > 0;) {
        bool need = is_required(req, props->members[k].key);
        int rest = new_rule(c), first = new_rule(c);
        if (rest < 0 || first < 0) {
            free(kv);
            return -1;
        }
        rule_head(c, rest);
        strbuf_puts(&c->rules, need ? " \",\" ws" : " ( \",\" ws");
        rule_ref(&c->rules, kv[k]);
        strbuf_puts(&c->rules, need ? " ws" : " ws )?");
        rule_ref(&c->rules, next_rest);
        strbuf_puts(&c->rules, "\n");
        rule_head(c, first);
        rule_ref(&c->rules, kv[k]);
        strbuf_puts(&c->rules, " ws");
        rule_ref(&c->rules, next_rest);
        if (!need) {
            strbuf_puts(&c->rules, " |");
            rule_ref(&c->rules, next_first);
        }
        strbuf_puts(&c->rules, "\n");
        next_rest = rest;
        next_first = first;
    }
    free(kv);
    int r = new_rule(c);
    if (r < 0) return -1;
    rule_head(c, r);
    strbuf_puts(&c->rules, " \"{\" ws");
    rule_ref(&c->rules, next_first);
    strbuf_puts(&c->rules, " \"}\"\n");
    return r;
}

static int array_rule(struct sc *c, const struct json_value *s) {
    const struct json_value *items = member(s, "items");
    double mn = 0, mx = -1;
    bound(s, "minItems", &mn);
    bool has_max = bound(s, "maxItems", &mx);
    if (mn < 0 || mn > 1000 || (has_max && (mx < mn || mx > 1000)))
        return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: minItems/maxItems out of 0..1000%s", NULL), -1;
    int item = -1;
    if (items && items->type == JSON_OBJECT) {
        if ((item = schema_rule(c, items)) < 0) return -1;
    } else if (items && items->type != JSON_TRUE) {
        return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: items that is not a schema%s", NULL), -1;
    }
    int r = new_rule(c);
    if (r < 0) return -1;
    char it[24];
    if (item >= 0) snprintf(it, sizeof it, "r%d", item);
    else snprintf(it, sizeof it, "value");
    char b[256];
    int lo = (int)mn, hi = has_max ? (int)mx : -1;
    rule_head(c, r);
    if (hi == 0) {
        strbuf_puts(&c->rules, " \"[\" ws \"]\"\n");
        return r;
    }
    char more[48];
    int mlo = lo > 1 ? lo - 1 : 0;
    if (hi < 0) snprintf(more, sizeof more, "{%d,}", mlo);
    else snprintf(more, sizeof more, "{%d,%d}", mlo, hi - 1);
    snprintf(b, sizeof b, " \"[\" ws ( %s ws ( \",\" ws %s ws )%s )%s \"]\"\n", it, it, more, lo == 0 ? "?" : "");
    strbuf_puts(&c->rules, b);
    return r;
}

/* ---- any schema ---------------------------------------------------------------- */

static const char *const ANNOTATIONS[] = {"title", "description", "examples", "default", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "strict", "name"};
static const char *const KEYWORDS[] = {"type", "properties", "required", "additionalProperties", "items",
                                       "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
                                       "$defs", "definitions", "minLength", "maxLength", "pattern", "format",
                                       "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

static bool check_keywords(struct sc *c, const struct json_value *s) {
    for (size_t i = 0; i < s->len; i++) {
        const char *k = s->members[i].key;
        bool known = false;
        for (size_t j = 0; j < sizeof KEYWORDS / sizeof *KEYWORDS && !known; j++) known = !strcmp(k, KEYWORDS[j]);
        for (size_t j = 0; j < sizeof ANNOTATIONS / sizeof *ANNOTATIONS && !known; j++) known = !strcmp(k, ANNOTATIONS[j]);
        if (!known) return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: the keyword \"%s\" is not supported", k);
    }
    return true;
}

/* The schema a "#/..." JSON pointer names. */
static const struct json_value *resolve(struct sc *c, const char *ref) {
    if (ref[0] != '#') return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: $ref \"%s\" (only \"#/...\" within the schema)", ref), NULL;
    const struct json_value *v = c->root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char key[256];
        if (n >= sizeof key) return bad(c, KVIK_ERR_FORMAT, "json schema: $ref \"%s\" is too long", ref), NULL;
        /* JSON pointer escapes: ~1 is '/', ~0 is '~' */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) key[k++] = p[++i] == '0' ? '~' : '/';
            else key[k++] = p[i];
        }
        key[k] = 0;
        v = member(v, key);
        if (!v) return bad(c, KVIK_ERR_FORMAT, "json schema: $ref \"%s\" names nothing", ref), NULL;
        p += n;
    }
    return v;
}

static int ref_rule(struct sc *c, const char *ref) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->ref_path[i], ref)) return c->ref_rule[i];
    const struct json_value *target = resolve(c, ref);
    if (!target) return -1;
    /* the rule is named before it is written, so a recursive $ref finds it */
    int r = new_rule(c);
    if (r < 0) return -1;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? 2 * c->cap_refs : 8;
        char **p = realloc(c->ref_path, (size_t)cap * sizeof *p);
        if (p) c->ref_path = p;
        int *q = realloc(c->ref_rule, (size_t)cap * sizeof *q);
        if (q) c->ref_rule = q;
        if (!p || !q) return bad(c, KVIK_ERR_NOMEM, "json schema: out of memory%s", NULL), -1;
        c->cap_refs = cap;
    }
    c->ref_path[c->n_refs] = strdup(ref);
    c->ref_rule[c->n_refs++] = r;
    int body = schema_rule(c, target);
    if (body < 0) return -1;
    rule_head(c, r);
    rule_ref(&c->rules, body);
    strbuf_puts(&c->rules, "\n");
    return r;
}

/* A rule for one type name of s. */
static int typed_rule(struct sc *c, const struct json_value *s, const char *type) {
    int r;
    if (!strcmp(type, "string")) return string_rule(c, s);
    if (!strcmp(type, "integer")) return numeric_rule(c, s, true);
    if (!strcmp(type, "number")) return numeric_rule(c, s, false);
    if (!strcmp(type, "object")) return object_rule(c, s);
    if (!strcmp(type, "array")) return array_rule(c, s);
    const char *lit = !strcmp(type, "boolean") ? "\"true\" | \"false\"" : !strcmp(type, "null") ? "\"null\"" : NULL;
    if (!lit) return bad(c, KVIK_ERR_FORMAT, "json schema: unknown type \"%s\"", type), -1;
    if ((r = new_rule(c)) < 0) return -1;
    rule_head(c, r);
    strbuf_puts(&c->rules, lit);
    strbuf_puts(&c->rules, "\n");
    return r;
}

static int alternatives_rule(struct sc *c, const struct json_value *list, const char *what) {
    if (list->type != JSON_ARRAY || !list->len) return bad(c, KVIK_ERR_FORMAT, "json schema: %s is not a non-empty array", what), -1;
    int *alt = malloc(list->len * sizeof *alt);
    if (!alt) return bad(c, KVIK_ERR_NOMEM, "json schema: out of memory%s", NULL), -1;
    for (size_t i = 0; i < list->len; i++)
        if ((alt[i] = schema_rule(c, &list->items[i])) < 0) {
            free(alt);
            return -1;
        }
    int r = new_rule(c);
    if (r >= 0) {
        rule_head(c, r);
        for (size_t i = 0; i < list->len; i++) {
            if (i) strbuf_puts(&c->rules, " |");
            rule_ref(&c->rules, alt[i]);
        }
        strbuf_puts(&c->rules, "\n");
    }
    free(alt);
    return r;
}

static int schema_rule(struct sc *c, const struct json_value *s) {
    if (c->st) return -1;
    if (s->type == JSON_TRUE) {
        int r = new_rule(c);
        if (r >= 0) rule_head(c, r), strbuf_puts(&c->rules, " value\n");
        return r;
    }
    if (s->type != JSON_OBJECT) return bad(c, KVIK_ERR_FORMAT, "json schema: a schema that is not an object%s", NULL), -1;
    if (++c->depth > MAX_SCHEMA_DEPTH) return bad(c, KVIK_ERR_UNSUPPORTED, "json schema: nested too deeply%s", NULL), -1;
    int r = -1;
    const struct json_value *v;
    if (!check_keywords(c, s)) goto out;
    if ((v = member(s, "$ref"))) {
        if (v->type != JSON_STRING) bad(c, KVIK_ERR_FORMAT, "json schema: $ref is not a string%s", NULL);
        else r = ref_rule(c, v->str);
    } else if ((v = member(s, "const"))) {
        if ((r = new_rule(c)) >= 0) {
            struct strbuf t = {0};
            put_json(&t, v);
            rule_head(c, r);
            put_literal(&c->rules, t.p ? t.p : "", t.n);
            strbuf_puts(&c->rules, "\n");
            free(t.p);
        }
    } else if ((v = member(s, "enum"))) {
        if (v->type != JSON_ARRAY || !v->len) bad(c, KVIK_ERR_FORMAT, "json schema: enum is not a non-empty array%s", NULL);
        else if ((r = new_rule(c)) >= 0) {
            rule_head(c, r);
            for (size_t i = 0; i < v->len; i++) {
                struct strbuf t = {0};
                put_json(&t, &v->items[i]);
                if (i) strbuf_puts(&c->rules, " | ");
                put_literal(&c->rules, t.p ? t.p : "", t.n);
                free(t.p);
            }
            strbuf_puts(&c->rules, "\n");
        }
    } else if ((v = member(s, "anyOf")) || (v = member(s, "oneOf"))) {
        r = alternatives_rule(c, v, member(s, "anyOf") ? "anyOf" : "oneOf");
    } else if ((v = member(s, "allOf"))) {
        if (v->type != JSON_ARRAY || v->len != 1) bad(c, KVIK_ERR_UNSUPPORTED, "json schema: allOf with other than one schema%s", NULL);
        else r = schema_rule(c, &v->items[0]);
    } else if ((v = member(s, "type"))) {
        if (v->type == JSON_STRING) r = typed_rule(c, s, v->str);
        else if (v->type == JSON_ARRAY && v->len) {
            int *alt = malloc(v->len * sizeof *alt);
            bool ok = alt != NULL;
            for (size_t i = 0; ok && i < v->len; i++)
                ok = v->items[i].type == JSON_STRING && (alt[i] = typed_rule(c, s, v->items[i].str)) >= 0;
            if (ok && (r = new_rule(c)) >= 0) {
                rule_head(c, r);
                for (size_t i = 0; i < v->len; i++) {
                    if (i) strbuf_puts(&c->rules, " |");
                    rule_ref(&c->rules, alt[i]);
                }
                strbuf_puts(&c->rules, "\n");
            } else if (!c->st) {
                bad(c, KVIK_ERR_FORMAT, "json schema: type is not a name or a list of names%s", NULL);
            }
            free(alt);
        } else {
            bad(c, KVIK_ERR_FORMAT, "json schema: type is not a name or a list of names%s", NULL);
        }
    } else if (member(s, "properties")) {
        r = object_rule(c, s);
    } else if ((r = new_rule(c)) >= 0) { /* no constraint: any value */
        rule_head(c, r);
        strbuf_puts(&c->rules, " value\n");
    }
out:
    c->depth--;
    return c->st ? -1 : r;
}

kvik_status grammar_from_json_schema(const char *schema, size_t len, struct grammar **out, char **gbnf_out,
                                     struct kvik_err *err) {
    *out = NULL;
    if (gbnf_out) *gbnf_out = NULL;
    struct json_value root;
    struct kvik_err jerr = {0};
    if (json_parse(schema, len, &root, &jerr))
        return err_set(err, KVIK_ERR_FORMAT, "json schema: not valid JSON: %s", jerr.msg);
    kvik_status st = grammar_from_schema_value(&root, out, gbnf_out, err);
    json_free(&root);
    return st;
}

kvik_status grammar_from_tool_calls(const char *tools_json, size_t len, const char *only, bool llama3,
                                    struct grammar **out, char **gbnf_out, struct kvik_err *err) {
    *out = NULL;
    if (gbnf_out) *gbnf_out = NULL;
    struct json_value tools;
    struct kvik_err jerr = {0};
    if (json_parse(tools_json, len, &tools, &jerr) || tools.type != JSON_ARRAY) {
        if (!jerr.code) json_free(&tools);
        return err_set(err, KVIK_ERR_FORMAT, "tools: not a JSON array");
    }
    struct sc c = {.err = err};
    struct strbuf alts = {0};
    int n_alts = 0;
    for (size_t i = 0; i < tools.len && !c.st; i++) {
        const struct json_value *fn = member(&tools.items[i], "function"), *name = member(fn, "name");
        const struct json_value *params = member(fn, "parameters");
        if (!name || name->type != JSON_STRING || (only && strcmp(name->str, only))) continue;
        int args;
        if (params) {
            c.root = params; /* its $refs point into it */
            for (int k = 0; k < c.n_refs; k++) free(c.ref_path[k]);
            c.n_refs = 0;
            args = schema_rule(&c, params);
        } else if ((args = new_rule(&c)) >= 0) {
            rule_head(&c, args);
            strbuf_puts(&c.rules, " object\n");
        }
        if (args < 0) break;
        /* the name's JSON text without its opening quote (the prompt has it) */
        struct strbuf q = {0};
        strbuf_json(&q, name->str);
        strbuf_puts(&q, llama3 ? ", \"parameters\": " : ", \"arguments\": ");
        strbuf_puts(&alts, n_alts++ ? " | " : "");
        if (!only) put_literal(&alts, q.p + 1, q.n - 1);
        rule_ref(&alts, args);
        free(q.p);
    }
    kvik_status st = c.st;
    if (!st && !n_alts) st = err_set(err, KVIK_ERR_FORMAT, "tools: no function%s%s", only ? " named " : "", only ? only : "");
    struct strbuf text = {0};
    if (!st) {
        strbuf_puts(&text, "root ::= ( ");
        strbuf_put(&text, alts.p, alts.n);
        strbuf_puts(&text, " ) ws \"}\"\n");
        strbuf_puts(&text, VALUE_RULES);
        if (c.rules.p) strbuf_put(&text, c.rules.p, c.rules.n);
        if (text.oom || c.rules.oom || alts.oom) st = err_set(err, KVIK_ERR_NOMEM, "tools: out of memory");
    }
    if (!st) st = grammar_from_gbnf(text.p, text.n, out, err);
    if (!st && gbnf_out) *gbnf_out = text.p, text.p = NULL;
    free(text.p);
    free(alts.p);
    free(c.rules.p);
    for (int i = 0; i < c.n_refs; i++) free(c.ref_path[i]);
    free(c.ref_path);
    free(c.ref_rule);
    json_free(&tools);
    return st;
}

kvik_status grammar_from_schema_value(const struct json_value *root, struct grammar **out, char **gbnf_out,
                                      struct kvik_err *err) {
    *out = NULL;
    if (gbnf_out) *gbnf_out = NULL;
    struct sc c = {.root = root, .err = err};
    int top = schema_rule(&c, root);
    kvik_status st = c.st;
    if (!st && top < 0) st = err_set(err, KVIK_ERR_FORMAT, "json schema: cannot be compiled");
    struct strbuf text = {0};
    if (!st) {
        char head[64];
        snprintf(head, sizeof head, "root ::= ws r%d\n", top);
        strbuf_puts(&text, head);
        strbuf_puts(&text, VALUE_RULES);
        if (c.rules.p) strbuf_put(&text, c.rules.p, c.rules.n);
        if (text.oom || c.rules.oom) st = err_set(err, KVIK_ERR_NOMEM, "json schema: out of memory");
    }
    if (!st) st = grammar_from_gbnf(text.p, text.n, out, err);
    if (!st && gbnf_out) *gbnf_out = text.p, text.p = NULL;
    free(text.p);
    free(c.rules.p);
    for (int i = 0; i < c.n_refs; i++) free(c.ref_path[i]);
    free(c.ref_path);
    free(c.ref_rule);
    return st;
}
