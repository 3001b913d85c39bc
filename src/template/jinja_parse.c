/*
 * jinja_parse.c — the template's lexer and parser.
 *
 * The lexer cuts the source into text and tags with Jinja2's whitespace
 * rules as Hugging Face configures them: trim_blocks (the newline after a
 * block or comment tag goes), lstrip_blocks (spaces and tabs before a block
 * or comment tag on its own line go), "-" on a tag strips the white space
 * on that side, "+" keeps it, one trailing newline of the source goes, and
 * "\r\n" in text becomes "\n". The parser builds the tree of jinja_int.h
 * with Jinja2's operator precedence.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_int.h"

enum tok_kind { TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END, TK_NAME, TK_STRING, TK_INT,
                TK_FLOAT, TK_OP, TK_EOF };

struct tok {
    enum tok_kind kind;
    int line;
    const char *s; /* text, name, string (decoded) or operator; NUL-terminated */
    size_t n;
    int64_t i;
    double f;
};

struct parser {
    struct jinja_template *t;
    struct tok *tk;
    size_t n, cap, pos;
    struct kvik_err *err;
    jmp_buf fail;
    const char *src;
    size_t len;
    int depth;
};

static _Noreturn void perr(struct parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void perr(struct parser *p, int line, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set(p->err, KVIK_ERR_FORMAT, "%s:%d: %s", p->t->name, line, msg);
    longjmp(p->fail, 1);
}

static void *palloc(struct parser *p, size_t n) { return arena_alloc(&p->t->arena, n); }

static char *pstrdup(struct parser *p, const char *s, size_t n) {
    char *d = palloc(p, n + 1);
    memcpy(d, s, n);
    return d;
}

static struct tok *push_tok(struct parser *p, enum tok_kind k, int line) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        struct tok *nt = palloc(p, cap * sizeof *nt);
        if (p->n) memcpy(nt, p->tk, p->n * sizeof *nt);
        p->tk = nt;
        p->cap = cap;
    }
    struct tok *t = &p->tk[p->n++];
    memset(t, 0, sizeof *t);
    t->kind = k;
    t->line = line;
    return t;
}

/* ---- lexer ----------------------------------------------------------- */

static bool is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }
static bool is_name0(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_'; }
static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* Adds the text s[0..n) (newlines already "\n"). */
static void add_text(struct parser *p, const char *s, size_t n, int line) {
    if (!n) return;
    struct tok *t = push_tok(p, TK_TEXT, line);
    t->s = pstrdup(p, s, n);
    t->n = n;
}

/* Decodes a string literal's body (Python escapes) s[0..n). */
static void lex_string(struct parser *p, const char *s, size_t n, int line, struct tok *t) {
    char *d = palloc(p, 4 * n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r') {
            d[k++] = '\n';
            if (i + 1 < n && s[i + 1] == '\n') i++;
            continue;
        }
        if (s[i] != '\\' || i + 1 >= n) {
            d[k++] = s[i];
            continue;
        }
        char e = s[++i];
        uint32_t cp;
        int digits = 0;
        switch (e) {
        case 'n': d[k++] = '\n'; continue;
        case 't': d[k++] = '\t'; continue;
        case 'r': d[k++] = '\r'; continue;
        case 'b': d[k++] = '\b'; continue;
        case 'f': d[k++] = '\f'; continue;
        case 'v': d[k++] = '\v'; continue;
        case 'a': d[k++] = '\a'; continue;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
            cp = 0;
            int m = 0;
            while (m < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), m++;
            i--;
            k += (size_t)utf8_encode(cp, (uint8_t *)d + k);
            continue;
        }
        case '\\': case '\'': case '"': d[k++] = e; continue;
        case '\n': continue;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            d[k++] = '\\';
            d[k++] = e;
            continue;
        }
        cp = 0;
        for (int m = 0; m < digits; m++) {
            char h = i + 1 + (size_t)m < n ? s[i + 1 + (size_t)m] : 0;
            int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (v < 0) perr(p, line, "bad \\%c escape in a string", e);
            cp = cp * 16 + (uint32_t)v;
        }
        i += (size_t)digits;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) perr(p, line, "bad code point in a string escape");
        k += (size_t)utf8_encode(cp, (uint8_t *)d + k);
    }
    t->s = d;
    t->n = k;
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                  "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};

/* Lexes the inside of a tag from s[*i] up to its end marker ("}}" or "%}"),
 * which is left at *i. */
static void lex_expr(struct parser *p, size_t *ip, int *line, const char *end_mark) {
    const char *s = p->src;
    size_t i = *ip, n = p->len;
    while (i < n) {
        char ch = s[i];
        if (is_ws(ch)) {
            *line += ch == '\n';
            i++;
            continue;
        }
        if ((ch == '-' || ch == '+') && i + 2 < n + 1 && i + 1 < n && !strncmp(s + i + 1, end_mark, 2)) break;
        if (!strncmp(s + i, end_mark, 2)) break;
        if (is_name0(ch)) {
            size_t b = i;
            while (i < n && (is_name0(s[i]) || is_digit(s[i]))) i++;
            struct tok *t = push_tok(p, TK_NAME, *line);
            t->s = pstrdup(p, s + b, i - b);
            t->n = i - b;
            continue;
        }
        if (is_digit(ch)) {
            size_t b = i;
            bool flt = false;
            while (i < n && (is_digit(s[i]) || s[i] == '_')) i++;
            if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
                flt = true;
                i++;
                while (i < n && (is_digit(s[i]) || s[i] == '_')) i++;
            }
            if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                size_t j = i + 1;
                if (j < n && (s[j] == '+' || s[j] == '-')) j++;
                if (j < n && is_digit(s[j])) {
                    flt = true;
                    i = j;
                    while (i < n && is_digit(s[i])) i++;
                }
            }
            char num[64];
            size_t k = 0;
            for (size_t j = b; j < i && k + 1 < sizeof num; j++)
                if (s[j] != '_') num[k++] = s[j];
            num[k] = 0;
            struct tok *t = push_tok(p, flt ? TK_FLOAT : TK_INT, *line);
            if (flt) t->f = strtod(num, NULL);
            else t->i = strtoll(num, NULL, 10);
            continue;
        }
        if (ch == '\'' || ch == '"') {
            size_t b = ++i;
            while (i < n && s[i] != ch) {
                if (s[i] == '\\' && i + 1 < n) i++;
                i++;
            }
            if (i >= n) perr(p, *line, "unterminated string");
            struct tok *t = push_tok(p, TK_STRING, *line);
            lex_string(p, s + b, i - b, *line, t);
            *line += count_lines(s + b, i - b);
            i++;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
            if (!strncmp(s + i, OPS[k], strlen(OPS[k]))) break;
        if (k == sizeof OPS / sizeof OPS[0]) perr(p, *line, "unexpected character '%c'", ch);
        struct tok *t = push_tok(p, TK_OP, *line);
        t->s = OPS[k];
        t->n = strlen(OPS[k]);
        i += t->n;
    }
    if (i >= n) perr(p, *line, "a tag is not closed (missing '%s')", end_mark);
    *ip = i;
}

static bool only_blank(const char *s, size_t a, size_t b) {
    for (size_t i = a; i < b; i++)
        if (s[i] != ' ' && s[i] != '\t') return false;
    return true;
}

/* Finds "{% endraw %}" (with optional "-") from i; returns its start or n. */
static size_t find_endraw(const char *s, size_t i, size_t n, size_t *after, bool *strip_before, bool *strip_after) {
    for (; i + 1 < n; i++) {
        if (s[i] != '{' || s[i + 1] != '%') continue;
        size_t j = i + 2;
        bool sb = j < n && (s[j] == '-' || s[j] == '+');
        *strip_before = j < n && s[j] == '-';
        if (sb) j++;
        while (j < n && is_ws(s[j])) j++;
        if (n - j < 6 || strncmp(s + j, "endraw", 6)) continue;
        j += 6;
        while (j < n && is_ws(s[j])) j++;
        *strip_after = j < n && s[j] == '-';
        if (j < n && (s[j] == '-' || s[j] == '+')) j++;
        if (j + 1 < n && s[j] == '%' && s[j + 1] == '}') {
            *after = j + 2;
            return i;
        }
    }
    return n;
}

/* Consumes what a tag's end takes after it: all white space after "-",
 * nothing after "+" or a variable tag's end, else (trim_blocks) one
 * newline. Returns whether the last byte consumed was a newline. */
static bool consume_after(const char *s, size_t n, size_t *ip, char mod, bool block) {
    size_t i = *ip;
    bool nl = false;
    if (mod == '-') {
        while (i < n && is_ws(s[i])) nl = s[i++] == '\n';
    } else if (mod != '+' && block && i < n && s[i] == '\n') {
        i++;
        nl = true;
    }
    *ip = i;
    return nl;
}

static void lex(struct parser *p) {
    /* newlines normalized to "\n", one trailing newline dropped */
    char *s = palloc(p, p->len + 1);
    size_t n = 0;
    for (size_t i = 0; i < p->len; i++) {
        if (p->src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < p->len && p->src[i + 1] == '\n') i++;
        } else s[n++] = p->src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    p->src = s;
    p->len = n;
    size_t i = 0;
    int line = 1;
    bool line_start = true; /* the last thing consumed ended a line (or nothing was) */
    while (i < n) {
        size_t b = i, e = i;
        while (e < n && !(s[e] == '{' && e + 1 < n && (s[e + 1] == '{' || s[e + 1] == '%' || s[e + 1] == '#'))) e++;
        size_t te = e;
        if (e < n) {
            char kind = s[e + 1], mod = e + 2 < n ? s[e + 2] : 0;
            if (mod == '-') {
                while (te > b && is_ws(s[te - 1])) te--;
            } else if (mod != '+' && kind != '{') { /* lstrip_blocks */
                size_t ls = te;
                while (ls > b && s[ls - 1] != '\n') ls--;
                if ((ls > b || line_start) && only_blank(s, ls, te)) te = ls;
            }
        }
        add_text(p, s + b, te - b, line);
        line += count_lines(s + b, e - b);
        if (e >= n) break;
        char kind = s[e + 1];
        i = e + 2;
        if (i < n && (s[i] == '-' || s[i] == '+')) i++;
        if (kind == '#') {
            size_t j = i;
            while (j + 1 < n && !(s[j] == '#' && s[j + 1] == '}')) j++;
            if (j + 1 >= n) perr(p, line, "a comment is not closed");
            char mod = j > i && (s[j - 1] == '-' || s[j - 1] == '+') ? s[j - 1] : 0;
            line += count_lines(s + i, j - i);
            i = j + 2;
            size_t from = i;
            line_start = consume_after(s, n, &i, mod, true);
            line += count_lines(s + from, i - from);
            continue;
        }
        if (kind == '%') { /* {% raw %} ... {% endraw %} */
            size_t j = i;
            while (j < n && is_ws(s[j])) j++;
            if (n - j >= 3 && !strncmp(s + j, "raw", 3) && (j + 3 >= n || !is_name0(s[j + 3]))) {
                j += 3;
                while (j < n && is_ws(s[j])) j++;
                bool sa = j < n && s[j] == '-';
                if (j < n && (s[j] == '-' || s[j] == '+')) j++;
                if (j + 1 >= n || s[j] != '%' || s[j + 1] != '}') perr(p, line, "bad raw tag");
                j += 2;
                size_t after;
                bool sb2, sa2;
                size_t end = find_endraw(s, j, n, &after, &sb2, &sa2);
                if (end >= n) perr(p, line, "a raw block is not closed");
                size_t rb = j, re = end;
                if (sa)
                    while (rb < re && is_ws(s[rb])) rb++;
                if (sb2)
                    while (re > rb && is_ws(s[re - 1])) re--;
                add_text(p, s + rb, re - rb, line);
                line += count_lines(s + i, after - i);
                i = after;
                size_t from = i;
                line_start = consume_after(s, n, &i, sa2 ? '-' : s[after - 3] == '+' ? '+' : 0, true);
                line += count_lines(s + from, i - from);
                continue;
            }
        }
        const char *end_mark = kind == '{' ? "}}" : "%}";
        push_tok(p, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, line);
        lex_expr(p, &i, &line, end_mark);
        char mod = s[i] == '-' || s[i] == '+' ? s[i] : 0;
        if (mod) i++;
        push_tok(p, kind == '{' ? TK_VAR_END : TK_BLOCK_END, line);
        i += 2;
        size_t from = i;
        line_start = consume_after(s, n, &i, mod, kind == '%');
        line += count_lines(s + from, i - from);
    }
    push_tok(p, TK_EOF, line);
}

/* ---- parser helpers -------------------------------------------------- */

static struct tok *peek(struct parser *p) { return &p->tk[p->pos]; }
static struct tok *peek2(struct parser *p) { return &p->tk[p->pos + 1 < p->n ? p->pos + 1 : p->pos]; }
static struct tok *next(struct parser *p) {
    struct tok *t = &p->tk[p->pos];
    if (t->kind != TK_EOF) p->pos++;
    return t;
}

static bool is_op(const struct tok *t, const char *op) { return t->kind == TK_OP && !strcmp(t->s, op); }
static bool is_name(const struct tok *t, const char *name) { return t->kind == TK_NAME && !strcmp(t->s, name); }

static bool accept_op(struct parser *p, const char *op) {
    if (!is_op(peek(p), op)) return false;
    p->pos++;
    return true;
}
static bool accept_name(struct parser *p, const char *name) {
    if (!is_name(peek(p), name)) return false;
    p->pos++;
    return true;
}

static const char *tok_desc(const struct tok *t) {
    switch (t->kind) {
    case TK_NAME: case TK_OP: return t->s;
    case TK_STRING: return "a string";
    case TK_INT: case TK_FLOAT: return "a number";
    case TK_VAR_END: return "}}";
    case TK_BLOCK_END: return "%}";
    case TK_EOF: return "the end of the template";
    default: return "a tag";
    }
}

static void expect_op(struct parser *p, const char *op) {
    if (!accept_op(p, op)) perr(p, peek(p)->line, "expected '%s', got '%s'", op, tok_desc(peek(p)));
}

static const char *expect_name(struct parser *p) {
    struct tok *t = peek(p);
    if (t->kind != TK_NAME) perr(p, t->line, "expected a name, got '%s'", tok_desc(t));
    p->pos++;
    return t->s;
}

static void expect_kind(struct parser *p, enum tok_kind k) {
    if (peek(p)->kind != k) perr(p, peek(p)->line, "expected '%s', got '%s'", k == TK_BLOCK_END ? "%}" : "}}", tok_desc(peek(p)));
    p->pos++;
}

static struct node *mk(struct parser *p, enum node_kind k, int line) {
    struct node *n = palloc(p, sizeof *n);
    n->kind = k;
    n->line = line;
    return n;
}

static void nl_push(struct parser *p, struct nlist *l, struct node *n) {
    if ((l->n & (l->n - 1)) == 0) { /* capacity doubles at powers of two */
        struct node **nv = palloc(p, (size_t)(l->n ? 2 * l->n : 1) * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
    }
    l->v[l->n++] = n;
}

static void names_push(struct parser *p, struct node *n, const char *name) {
    const char **nv = palloc(p, (size_t)(n->n_names + 1) * sizeof *nv);
    if (n->n_names) memcpy(nv, n->names, (size_t)n->n_names * sizeof *nv);
    nv[n->n_names++] = name;
    n->names = nv;
}

/* ---- expressions ----------------------------------------------------- */

static struct node *parse_expr(struct parser *p);
static struct node *parse_or(struct parser *p);
static struct node *parse_unary(struct parser *p, bool with_filter);
static struct node *parse_postfix(struct parser *p, struct node *n);

/* Call arguments after "(": positional into l1, keywords into names + l2. */
static void parse_args(struct parser *p, struct node *call) {
    while (!accept_op(p, ")")) {
        if (call->l1.n + call->l2.n) expect_op(p, ",");
        if (accept_op(p, ")")) break;
        struct tok *t = peek(p);
        if (t->kind == TK_NAME && is_op(peek2(p), "=")) {
            p->pos += 2;
            names_push(p, call, t->s);
            nl_push(p, &call->l2, parse_expr(p));
        } else {
            if (call->l2.n) perr(p, t->line, "a positional argument follows a keyword argument");
            if (is_op(t, "*") || is_op(t, "**")) perr(p, t->line, "*args and **kwargs are not supported");
            nl_push(p, &call->l1, parse_expr(p));
        }
    }
}

static struct node *parse_primary(struct parser *p) {
    struct tok *t = next(p);
    struct node *n;
    switch (t->kind) {
    case TK_NAME:
        n = mk(p, E_CONST, t->line);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->value = jv_bool(true);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->value = jv_bool(false);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->value = jv_none();
        else {
            n->kind = E_NAME;
            n->str = t->s;
        }
        return n;
    case TK_STRING: {
        /* adjacent literals join */
        size_t len = t->n;
        const char *s = t->s;
        while (peek(p)->kind == TK_STRING) {
            struct tok *u = next(p);
            char *j = palloc(p, len + u->n + 1);
            memcpy(j, s, len);
            memcpy(j + len, u->s, u->n);
            s = j;
            len += u->n;
        }
        n = mk(p, E_CONST, t->line);
        struct jstr *js = palloc(p, sizeof *js + len + 1);
        memcpy(js->p, s, len);
        js->n = len;
        n->value = (struct jv){.t = JV_STR, .s = js};
        return n;
    }
    case TK_INT:
        n = mk(p, E_CONST, t->line);
        n->value = jv_int(t->i);
        return n;
    case TK_FLOAT:
        n = mk(p, E_CONST, t->line);
        n->value = jv_float(t->f);
        return n;
    case TK_OP:
        if (!strcmp(t->s, "(")) {
            if (accept_op(p, ")")) return mk(p, E_TUPLE, t->line);
            struct node *e = parse_expr(p);
            if (!is_op(peek(p), ",")) {
                expect_op(p, ")");
                return e;
            }
            n = mk(p, E_TUPLE, t->line);
            nl_push(p, &n->l1, e);
            while (accept_op(p, ",")) {
                if (is_op(peek(p), ")")) break;
                nl_push(p, &n->l1, parse_expr(p));
            }
            expect_op(p, ")");
            return n;
        }
        if (!strcmp(t->s, "[")) {
            n = mk(p, E_LIST, t->line);
            while (!accept_op(p, "]")) {
                if (n->l1.n) expect_op(p, ",");
                if (accept_op(p, "]")) break;
                nl_push(p, &n->l1, parse_expr(p));
            }
            return n;
        }
        if (!strcmp(t->s, "{")) {
            n = mk(p, E_DICT, t->line);
            while (!accept_op(p, "}")) {
                if (n->l1.n) expect_op(p, ",");
                if (accept_op(p, "}")) break;
                nl_push(p, &n->l1, parse_expr(p));
                expect_op(p, ":");
                nl_push(p, &n->l2, parse_expr(p));
            }
            return n;
        }
        break;
    default: break;
    }
    perr(p, t->line, "unexpected '%s'", tok_desc(t));
}

/* name(args) after a filter or test name, into n. */
static void parse_callee_args(struct parser *p, struct node *n) {
    if (accept_op(p, "(")) parse_args(p, n);
}

static struct node *parse_filter(struct parser *p, struct node *operand) {
    struct tok *t = peek(p);
    struct node *f = mk(p, E_FILTER, t->line);
    const char *name = expect_name(p);
    while (accept_op(p, ".")) { /* dotted filter names: join them */
        const char *more = expect_name(p);
        size_t a = strlen(name), b = strlen(more);
        char *j = palloc(p, a + b + 2);
        memcpy(j, name, a);
        j[a] = '.';
        memcpy(j + a + 1, more, b);
        name = j;
    }
    f->str = name;
    f->a = operand;
    parse_callee_args(p, f);
    return f;
}

static bool starts_test_arg(const struct tok *t) {
    if (t->kind == TK_NAME)
        return strcmp(t->s, "else") && strcmp(t->s, "or") && strcmp(t->s, "and") && strcmp(t->s, "if") &&
               strcmp(t->s, "in") && strcmp(t->s, "not") && strcmp(t->s, "is");
    if (t->kind == TK_STRING || t->kind == TK_INT || t->kind == TK_FLOAT) return true;
    return is_op(t, "[") || is_op(t, "{") || is_op(t, "-");
}

static struct node *parse_test(struct parser *p, struct node *operand) {
    struct tok *t = peek(p);
    struct node *n = mk(p, E_TEST, t->line);
    n->op = accept_name(p, "not");
    const char *name = peek(p)->kind == TK_NAME ? expect_name(p) : NULL;
    if (!name) {
        /* "is none"/"is true" arrive as names; anything else is a syntax error */
        perr(p, t->line, "expected a test name after 'is'");
    }
    n->str = name;
    n->a = operand;
    if (accept_op(p, "(")) parse_args(p, n);
    else if (starts_test_arg(peek(p))) nl_push(p, &n->l1, parse_postfix(p, parse_primary(p)));
    return n;
}

/* Subscript after "[": an index or a slice. */
static struct node *parse_subscript(struct parser *p, struct node *obj, int line) {
    struct node *parts[3] = {0};
    bool slice = false;
    int k = 0;
    for (;;) {
        if (!is_op(peek(p), ":") && !is_op(peek(p), "]")) parts[k] = parse_expr(p);
        if (accept_op(p, ":")) {
            slice = true;
            if (++k > 2) perr(p, line, "bad slice");
            continue;
        }
        break;
    }
    expect_op(p, "]");
    struct node *n = mk(p, slice ? E_SLICE : E_ITEM, line);
    n->a = obj;
    if (slice) {
        /* l1: start, stop, step (NULL: absent) */
        n->l1.v = palloc(p, 3 * sizeof *n->l1.v);
        n->l1.n = 3;
        for (int i = 0; i < 3; i++) n->l1.v[i] = parts[i];
    } else {
        if (!parts[0]) perr(p, line, "empty subscript");
        n->b = parts[0];
    }
    return n;
}

static struct node *parse_postfix(struct parser *p, struct node *n) {
    for (;;) {
        struct tok *t = peek(p);
        if (is_op(t, ".")) {
            p->pos++;
            struct tok *a = next(p);
            struct node *at = mk(p, E_ATTR, a->line);
            at->a = n;
            if (a->kind == TK_NAME) at->str = a->s;
            else if (a->kind == TK_INT) {
                at->kind = E_ITEM;
                at->b = mk(p, E_CONST, a->line);
                at->b->value = jv_int(a->i);
            } else perr(p, a->line, "expected an attribute name after '.'");
            n = at;
        } else if (is_op(t, "[")) {
            p->pos++;
            n = parse_subscript(p, n, t->line);
        } else if (is_op(t, "(")) {
            p->pos++;
            struct node *call = mk(p, E_CALL, t->line);
            call->a = n;
            parse_args(p, call);
            n = call;
        } else return n;
    }
}

/* Filters and tests after a unary expression. */
static struct node *parse_filter_expr(struct parser *p, struct node *n) {
    for (;;) {
        if (accept_op(p, "|")) n = parse_filter(p, n);
        else if (accept_name(p, "is")) n = parse_test(p, n);
        else if (is_op(peek(p), "(")) {
            struct tok *t = next(p);
            struct node *call = mk(p, E_CALL, t->line);
            call->a = n;
            parse_args(p, call);
            n = call;
        } else return n;
    }
}

static struct node *parse_unary(struct parser *p, bool with_filter) {
    struct tok *t = peek(p);
    struct node *n;
    if (++p->depth > 200) perr(p, t->line, "expression nested too deeply");
    if (is_op(t, "-") || is_op(t, "+")) {
        p->pos++;
        n = mk(p, is_op(t, "-") ? E_NEG : E_POS, t->line);
        n->a = parse_unary(p, false);
    } else n = parse_postfix(p, parse_primary(p));
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static struct node *bin(struct parser *p, int op, struct node *a, struct node *b, int line) {
    struct node *n = mk(p, E_BIN, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct node *parse_pow(struct parser *p) {
    struct node *n = parse_unary(p, true);
    while (is_op(peek(p), "**")) {
        int line = next(p)->line;
        n = bin(p, OP_POW, n, parse_unary(p, true), line);
    }
    return n;
}

static struct node *parse_math2(struct parser *p) {
    struct node *n = parse_pow(p);
    for (;;) {
        struct tok *t = peek(p);
        int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        p->pos++;
        n = bin(p, op, n, parse_pow(p), t->line);
    }
}

static struct node *parse_math1(struct parser *p) {
    struct node *n = parse_math2(p);
    for (;;) {
        struct tok *t = peek(p);
        int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        p->pos++;
        n = bin(p, op, n, parse_math2(p), t->line);
    }
}

static struct node *parse_concat(struct parser *p) {
    struct node *n = parse_math1(p);
    while (is_op(peek(p), "~")) {
        int line = next(p)->line;
        n = bin(p, OP_CONCAT, n, parse_math1(p), line);
    }
    return n;
}

static struct node *parse_compare(struct parser *p) {
    struct node *first = parse_concat(p);
    struct node *n = NULL;
    for (;;) {
        struct tok *t = peek(p);
        int op = -1;
        if (is_op(t, "==")) op = CMP_EQ;
        else if (is_op(t, "!=")) op = CMP_NE;
        else if (is_op(t, "<")) op = CMP_LT;
        else if (is_op(t, "<=")) op = CMP_LE;
        else if (is_op(t, ">")) op = CMP_GT;
        else if (is_op(t, ">=")) op = CMP_GE;
        else if (is_name(t, "in")) op = CMP_IN;
        else if (is_name(t, "not") && is_name(peek2(p), "in")) op = CMP_NOTIN;
        if (op < 0) break;
        p->pos += op == CMP_NOTIN ? 2 : 1;
        if (!n) {
            n = mk(p, E_COMPARE, t->line);
            n->a = first;
        }
        int *ops = palloc(p, (size_t)(n->l1.n + 1) * sizeof *ops);
        if (n->l1.n) memcpy(ops, n->cmp_ops, (size_t)n->l1.n * sizeof *ops);
        ops[n->l1.n] = op;
        n->cmp_ops = ops;
        nl_push(p, &n->l1, parse_concat(p));
    }
    return n ? n : first;
}

static struct node *parse_not(struct parser *p) {
    struct tok *t = peek(p);
    if (is_name(t, "not")) {
        p->pos++;
        if (++p->depth > 200) perr(p, t->line, "expression nested too deeply");
        struct node *n = mk(p, E_NOT, t->line);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static struct node *parse_and(struct parser *p) {
    struct node *n = parse_not(p);
    while (is_name(peek(p), "and")) {
        struct node *a = mk(p, E_AND, next(p)->line);
        a->a = n;
        a->b = parse_not(p);
        n = a;
    }
    return n;
}

static struct node *parse_or(struct parser *p) {
    struct node *n = parse_and(p);
    while (is_name(peek(p), "or")) {
        struct node *o = mk(p, E_OR, next(p)->line);
        o->a = n;
        o->b = parse_and(p);
        n = o;
    }
    return n;
}

/* A conditional expression: "a if cond [else b]". */
static struct node *parse_expr(struct parser *p) {
    struct node *n = parse_or(p);
    while (is_name(peek(p), "if")) {
        struct node *c = mk(p, E_COND, next(p)->line);
        c->b = n;
        c->a = parse_or(p);
        if (++p->depth > 200) perr(p, c->line, "expression nested too deeply");
        if (accept_name(p, "else")) c->c = parse_expr(p);
        p->depth--;
        n = c;
    }
    return n;
}

/* An expression that may be a bare tuple: "a, b". */
static struct node *parse_tuple_expr(struct parser *p) {
    struct node *e = parse_expr(p);
    if (!is_op(peek(p), ",")) return e;
    struct node *t = mk(p, E_TUPLE, e->line);
    nl_push(p, &t->l1, e);
    while (accept_op(p, ",")) {
        if (peek(p)->kind == TK_BLOCK_END || peek(p)->kind == TK_VAR_END) break;
        nl_push(p, &t->l1, parse_expr(p));
    }
    return t;
}

/* ---- statements ------------------------------------------------------ */

/* Parses statements until a block tag whose name is in ends (NULL-ended);
 * returns the index of the end found (the name consumed, not its tag). */
static int parse_body(struct parser *p, struct nlist *body, const char *const *ends);

static const char *block_name(struct parser *p) {
    struct tok *t = peek(p);
    if (t->kind != TK_NAME) perr(p, t->line, "expected a statement name, got '%s'", tok_desc(t));
    return t->s;
}

static void parse_targets(struct parser *p, struct node *n) {
    bool paren = accept_op(p, "(");
    do {
        names_push(p, n, expect_name(p));
    } while (accept_op(p, ","));
    if (paren) expect_op(p, ")");
}

static struct node *parse_if(struct parser *p, int line) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    struct node *n = mk(p, N_IF, line);
    n->a = parse_tuple_expr(p);
    expect_kind(p, TK_BLOCK_END);
    int e = parse_body(p, &n->l1, ends);
    if (e == 0) {
        struct node *elif = parse_if(p, peek(p)->line);
        nl_push(p, &n->l2, elif);
        return n;
    }
    if (e == 1) {
        static const char *const endif[] = {"endif", NULL};
        expect_kind(p, TK_BLOCK_END);
        parse_body(p, &n->l2, endif);
    }
    expect_kind(p, TK_BLOCK_END);
    return n;
}

static struct node *parse_for(struct parser *p, int line) {
    static const char *const ends[] = {"else", "endfor", NULL};
    static const char *const endfor[] = {"endfor", NULL};
    struct node *n = mk(p, N_FOR, line);
    parse_targets(p, n);
    if (!accept_name(p, "in")) perr(p, line, "expected 'in' in a for statement");
    /* the iterable stops before "if" and "recursive" */
    struct node *it = parse_or(p);
    if (is_op(peek(p), ",")) {
        struct node *t = mk(p, E_TUPLE, it->line);
        nl_push(p, &t->l1, it);
        while (accept_op(p, ",")) nl_push(p, &t->l1, parse_or(p));
        it = t;
    }
    n->a = it;
    if (accept_name(p, "if")) n->c = parse_expr(p);
    if (accept_name(p, "recursive")) n->op = 1;
    expect_kind(p, TK_BLOCK_END);
    if (parse_body(p, &n->l1, ends) == 0) {
        expect_kind(p, TK_BLOCK_END);
        parse_body(p, &n->l2, endfor);
    }
    expect_kind(p, TK_BLOCK_END);
    return n;
}

/* Filters of a "set" block or "filter" block: "| f(args) | g" into l2 as
 * E_FILTER nodes with no operand. */
static void parse_filter_chain(struct parser *p, struct nlist *l, bool first_bar_optional) {
    bool first = true;
    while ((first && first_bar_optional) || accept_op(p, "|")) {
        first = false;
        nl_push(p, l, parse_filter(p, NULL));
        if (peek(p)->kind == TK_BLOCK_END) break;
    }
}

static struct node *parse_set(struct parser *p, int line) {
    struct tok *t = peek(p);
    if (t->kind == TK_NAME && is_op(peek2(p), ".")) {
        struct node *n = mk(p, N_SET_ATTR, line);
        n->a = mk(p, E_NAME, line);
        n->a->str = expect_name(p);
        expect_op(p, ".");
        n->str = expect_name(p);
        expect_op(p, "=");
        n->b = parse_tuple_expr(p);
        expect_kind(p, TK_BLOCK_END);
        return n;
    }
    struct node *n = mk(p, N_SET, line);
    parse_targets(p, n);
    if (accept_op(p, "=")) {
        n->b = parse_tuple_expr(p);
        expect_kind(p, TK_BLOCK_END);
        return n;
    }
    static const char *const endset[] = {"endset", NULL};
    if (n->n_names != 1) perr(p, line, "a set block assigns one name");
    n->kind = N_SET_BLOCK;
    parse_filter_chain(p, &n->l2, false);
    expect_kind(p, TK_BLOCK_END);
    parse_body(p, &n->l1, endset);
    expect_kind(p, TK_BLOCK_END);
    return n;
}

/* Parameters "(a, b=1)": names, defaults in l2 (NULL: none). */
static void parse_params(struct parser *p, struct node *n) {
    expect_op(p, "(");
    while (!accept_op(p, ")")) {
        if (n->n_names) expect_op(p, ",");
        if (accept_op(p, ")")) break;
        names_push(p, n, expect_name(p));
        struct node *def = NULL;
        if (accept_op(p, "=")) def = parse_expr(p);
        nl_push(p, &n->l2, def);
    }
}

static struct node *parse_macro(struct parser *p, int line) {
    static const char *const ends[] = {"endmacro", NULL};
    struct node *n = mk(p, N_MACRO, line);
    n->str = expect_name(p);
    parse_params(p, n);
    expect_kind(p, TK_BLOCK_END);
    parse_body(p, &n->l1, ends);
    if (peek(p)->kind == TK_NAME) p->pos++; /* "endmacro name" */
    expect_kind(p, TK_BLOCK_END);
    return n;
}

static struct node *parse_call_block(struct parser *p, int line) {
    static const char *const ends[] = {"endcall", NULL};
    struct node *n = mk(p, N_CALL_BLOCK, line);
    if (is_op(peek(p), "(")) parse_params(p, n); /* the caller's parameters */
    n->a = parse_expr(p);
    if (n->a->kind != E_CALL) perr(p, line, "a call block needs a call");
    expect_kind(p, TK_BLOCK_END);
    /* the body becomes the macro `caller` */
    struct node *m = mk(p, N_MACRO, line);
    m->str = "caller";
    m->names = n->names;
    m->n_names = n->n_names;
    m->l2 = n->l2;
    parse_body(p, &m->l1, ends);
    n->b = m;
    expect_kind(p, TK_BLOCK_END);
    return n;
}

static struct node *parse_statement(struct parser *p) {
    struct tok *t = peek(p);
    int line = t->line;
    const char *name = block_name(p);
    p->pos++;
    if (!strcmp(name, "if")) return parse_if(p, line);
    if (!strcmp(name, "for")) return parse_for(p, line);
    if (!strcmp(name, "set")) return parse_set(p, line);
    if (!strcmp(name, "macro")) return parse_macro(p, line);
    if (!strcmp(name, "call")) return parse_call_block(p, line);
    if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        struct node *n = mk(p, name[0] == 'b' ? N_BREAK : N_CONTINUE, line);
        expect_kind(p, TK_BLOCK_END);
        return n;
    }
    if (!strcmp(name, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        struct node *n = mk(p, N_FILTER_BLOCK, line);
        parse_filter_chain(p, &n->l2, true);
        expect_kind(p, TK_BLOCK_END);
        parse_body(p, &n->l1, ends);
        expect_kind(p, TK_BLOCK_END);
        return n;
    }
    if (!strcmp(name, "with")) {
        static const char *const ends[] = {"endwith", NULL};
        struct node *n = mk(p, N_WITH, line);
        while (peek(p)->kind != TK_BLOCK_END) {
            if (n->n_names) expect_op(p, ",");
            names_push(p, n, expect_name(p));
            expect_op(p, "=");
            nl_push(p, &n->l2, parse_expr(p));
        }
        expect_kind(p, TK_BLOCK_END);
        parse_body(p, &n->l1, ends);
        expect_kind(p, TK_BLOCK_END);
        return n;
    }
    if (!strcmp(name, "generation")) { /* transformers' assistant-mask marker: renders its body */
        static const char *const ends[] = {"endgeneration", NULL};
        struct node *n = mk(p, N_WITH, line);
        expect_kind(p, TK_BLOCK_END);
        parse_body(p, &n->l1, ends);
        expect_kind(p, TK_BLOCK_END);
        return n;
    }
    perr(p, line, "unknown statement '%s'", name);
}

static int parse_body(struct parser *p, struct nlist *body, const char *const *ends) {
    if (++p->depth > 200) perr(p, peek(p)->line, "statements nested too deeply");
    for (;;) {
        struct tok *t = next(p);
        switch (t->kind) {
        case TK_TEXT: {
            struct node *n = mk(p, N_TEXT, t->line);
            n->str = t->s;
            n->len = t->n;
            nl_push(p, body, n);
            break;
        }
        case TK_VAR_BEGIN: {
            struct node *n = mk(p, N_OUT, t->line);
            n->a = parse_tuple_expr(p);
            expect_kind(p, TK_VAR_END);
            nl_push(p, body, n);
            break;
        }
        case TK_BLOCK_BEGIN: {
            const char *name = block_name(p);
            if (ends)
                for (int i = 0; ends[i]; i++)
                    if (!strcmp(name, ends[i])) {
                        p->pos++;
                        p->depth--;
                        return i;
                    }
            if (!strncmp(name, "end", 3) || !strcmp(name, "else") || !strcmp(name, "elif"))
                perr(p, t->line, "unexpected '%s'%s%s", name, ends ? ", expected '" : "", ends ? ends[0] : "");
            nl_push(p, body, parse_statement(p));
            break;
        }
        case TK_EOF:
            if (ends) perr(p, t->line, "unexpected end of template, expected '%s'", ends[0]);
            p->depth--;
            return -1;
        default: perr(p, t->line, "unexpected '%s'", tok_desc(t));
        }
    }
}

kvik_status jinja_parse(struct jinja_template *t, const char *src, size_t len, struct kvik_err *err) {
    struct parser p = {.t = t, .err = err, .src = src, .len = len};
    jmp_buf oom;
    t->arena.oom = &oom;
    int r = setjmp(oom);
    if (r) {
        t->arena.oom = NULL;
        return err_set(err, KVIK_ERR_NOMEM, "%s: out of memory", t->name);
    }
    if (setjmp(p.fail)) {
        t->arena.oom = NULL;
        return KVIK_ERR_FORMAT;
    }
    lex(&p);
    parse_body(&p, &t->body, NULL);
    t->arena.oom = NULL;
    return KVIK_OK;
}
