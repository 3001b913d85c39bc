/*
 * jinja_int.h — the template engine's insides: the arena, values, the
 * syntax tree and the renderer's state, shared by jinja_value.c (values),
 * jinja_parse.c (lexer and parser), jinja_eval.c (statements and
 * expressions) and jinja_lib.c (filters, tests, methods and globals).
 *
 * Memory: a compiled template lives in one arena, a rendering in another;
 * nothing is freed before its arena. Errors during a rendering unwind with
 * longjmp to jinja_render, which frees the rendering's arena: no value
 * needs a destructor.
 */
#ifndef KVIK_TEMPLATE_JINJA_INT_H
#define KVIK_TEMPLATE_JINJA_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "template/jinja.h"

/* ---- arena ----------------------------------------------------------- */

struct arena_chunk;
struct arena {
    struct arena_chunk *head;
    size_t used, cap;
    jmp_buf *oom; /* when set, an allocation failure longjmps here with 2 */
};

/* size zeroed bytes (8-byte aligned), NULL when out of memory (or a
 * longjmp to a->oom). */
void *arena_alloc(struct arena *a, size_t size);
void arena_free(struct arena *a);

/* ---- values ---------------------------------------------------------- */

enum jv_type { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC };

/* Byte ranges of a string that are data (sorted, disjoint). */
struct jtaint {
    size_t n;
    struct jinja_span r[];
};

struct jstr {
    size_t n;                  /* bytes */
    const struct jtaint *taint; /* NULL: no data bytes */
    char p[];                  /* n bytes + NUL */
};

struct jv;
struct jlist {
    struct jv *v;
    size_t n, cap;
};

/* An insertion-ordered dict (linear lookup: templates' dicts are small).
 * ns: a namespace(), whose attributes `set` may assign. */
struct jdict {
    struct jv *k, *v;
    size_t n, cap;
    bool ns;
};

struct node;
struct frame;
struct jfunc;

struct jv {
    uint8_t t;     /* enum jv_type */
    bool tuple;    /* JV_LIST: a tuple (shown with parentheses) */
    bool gen;      /* JV_LIST: a generator (map, select...): no len(), no JSON, always true */
    bool markup;   /* JV_STR: markupsafe's Markup (|safe, |escape): "+" escapes the other side */
    union {
        bool b;
        int64_t i;
        double f;
        struct jstr *s;
        struct jlist *l;
        struct jdict *d;
        struct jfunc *fn;
        const char *undef; /* JV_UNDEF: what was looked up, for messages (NULL: anonymous) */
    };
};

struct rctx;
typedef struct jv (*jbuiltin)(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                              const char *const *kw_names, const struct jv *kw_vals, int n_kw);

enum jfunc_kind { JF_MACRO, JF_BUILTIN, JF_METHOD };
struct jfunc {
    enum jfunc_kind kind;
    const char *name;
    const struct node *macro; /* JF_MACRO */
    struct frame *closure;    /* JF_MACRO: the frame it was defined in */
    struct jv caller;         /* JF_MACRO: `caller` inside a call block, or undefined */
    jbuiltin fn;              /* JF_BUILTIN and JF_METHOD */
    struct jv self;           /* JF_METHOD: the value it is bound to */
};

/* ---- syntax tree ----------------------------------------------------- */

enum node_kind {
    /* statements */
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SET_ATTR, N_SET_BLOCK, N_MACRO, N_CALL_BLOCK, N_FILTER_BLOCK, N_BREAK,
    N_CONTINUE, N_WITH,
    /* expressions */
    E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NEG, E_POS, E_NOT, E_BIN, E_AND, E_OR,
    E_COND, E_LIST, E_TUPLE, E_DICT, E_COMPARE
};

enum bin_op { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT };
enum cmp_op { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

struct nlist {
    struct node **v;
    int n;
};

struct node {
    enum node_kind kind;
    int line;
    int op;          /* enum bin_op; E_TEST: negated; N_FOR: recursive */
    const char *str; /* N_TEXT text; names (E_NAME, E_ATTR, filters, tests, macros, N_SET_ATTR's attribute) */
    size_t len;      /* N_TEXT: bytes */
    struct jv value; /* E_CONST */
    struct node *a, *b, *c;
    struct nlist l1, l2;      /* bodies, arguments, items: see the parser */
    const char **names;       /* targets, parameters, keyword argument names */
    int n_names;
    int *cmp_ops;             /* E_COMPARE: l1.n operators */
};

struct jinja_template {
    struct arena arena;
    struct nlist body;
    char name[64];
};

/* ---- rendering ------------------------------------------------------- */

/* Variables of one scope; lookups walk up through parent. */
struct frame {
    struct jdict vars;
    struct frame *parent;
};

struct outbuf {
    char *p;
    size_t n, cap;
    struct jinja_span *data;
    size_t n_data, cap_data;
};

struct rctx {
    struct arena arena;
    jmp_buf fail;
    struct kvik_err *err;
    kvik_status code;
    struct outbuf *out; /* where output goes now (block set and macros swap it) */
    struct frame *globals;
    int64_t now;
    int depth;         /* macro call depth, bounded */
    int eval_depth;    /* expression nesting, bounded */
    int loop_ctl;      /* 1: break, 2: continue pending */
    uint64_t steps;    /* statements and loop iterations run, bounded */
};

/* Fails the rendering: records the message (with the line if > 0) and
 * longjmps to jinja_render. */
_Noreturn void jfail(struct rctx *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* values (jinja_value.c) */
struct jv jv_undef(const char *what);
struct jv jv_none(void);
struct jv jv_bool(bool b);
struct jv jv_int(int64_t i);
struct jv jv_float(double f);
struct jv jv_str(struct rctx *c, const char *p, size_t n, const struct jtaint *taint);
struct jv jv_cstr(struct rctx *c, const char *s);
struct jv jv_list(struct rctx *c, size_t cap);
struct jv jv_dict(struct rctx *c, size_t cap);
void jlist_push(struct rctx *c, struct jlist *l, struct jv v);
void jdict_set(struct rctx *c, struct jdict *d, struct jv k, struct jv v);
/* The value under key k, or NULL. */
struct jv *jdict_get(const struct jdict *d, struct jv k);
struct jv *jdict_get_str(const struct jdict *d, const char *k);
bool jv_truthy(struct jv v);
bool jv_equal(struct jv a, struct jv b);
/* -1, 0, 1; fails for values Python does not order. */
int jv_compare(struct rctx *c, int line, struct jv a, struct jv b);
const char *jv_type_name(struct jv v);
/* str(v) and repr(v), as Python writes them. */
struct jv jv_to_str(struct rctx *c, struct jv v);
void jv_repr(struct rctx *c, struct outbuf *o, struct jv v); /* fails past 200 levels (a namespace holding itself) */
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys). indent < 0: none. */
void jv_tojson(struct rctx *c, int line, struct outbuf *o, struct jv v, int indent, const char *item_sep,
               const char *key_sep, bool sort_keys, bool ascii, int depth);
/* s with & < > " ' as HTML entities (markupsafe's escape), as Markup. */
struct jv html_escape(struct rctx *c, struct jv s);
/* Python's "fmt % args" on a string. */
struct jv str_percent(struct rctx *c, int line, struct jv fmt, struct jv args);
/* Python's repr of a float. */
void fmt_float(double f, char *buf, size_t len);

/* strings */
size_t utf8_count(const char *p, size_t n);
/* Byte offset of code point index i (clamped to n). */
size_t utf8_offset(const char *p, size_t n, int64_t i);
/* s[a..b) bytes as a string, taint kept. */
struct jv jstr_sub(struct rctx *c, const struct jstr *s, size_t a, size_t b);
/* a + b, taints kept. */
struct jv jstr_cat(struct rctx *c, const struct jstr *a, const struct jstr *b);
/* A taint covering all n bytes when any of the inputs is tainted. */
const struct jtaint *jtaint_all(struct rctx *c, size_t n, bool tainted);

/* output */
void out_bytes(struct rctx *c, struct outbuf *o, const char *p, size_t n);
void out_str(struct rctx *c, struct outbuf *o, const struct jstr *s);
void out_cstr(struct rctx *c, struct outbuf *o, const char *s);
/* The output so far as a string value (taint from its data spans). */
struct jv out_take(struct rctx *c, struct outbuf *o);

/* JSON input (jinja_value.c) */
struct json_value;
struct jv jv_from_json(struct rctx *c, const struct json_value *j, const char *src);

/* parser (jinja_parse.c): body of the template in src. */
kvik_status jinja_parse(struct jinja_template *t, const char *src, size_t len, struct kvik_err *err);

/* evaluator (jinja_eval.c) */
struct jv eval(struct rctx *c, struct frame *f, const struct node *n);
void exec_body(struct rctx *c, struct frame *f, const struct nlist *body);
struct jv call_value(struct rctx *c, int line, struct jv fn, const struct jv *args, int n_args,
                     const char *const *kw_names, const struct jv *kw_vals, int n_kw);
/* Python getattr-then-getitem (attr) or getitem-then-getattr (item). */
struct jv get_attr(struct rctx *c, int line, struct jv obj, const char *name);
struct jv get_item(struct rctx *c, int line, struct jv obj, struct jv key);

/* library (jinja_lib.c) */
struct jv apply_filter(struct rctx *c, int line, const char *name, struct jv v, const struct jv *args, int n_args,
                       const char *const *kw_names, const struct jv *kw_vals, int n_kw);
bool apply_test(struct rctx *c, int line, const char *name, struct jv v, const struct jv *args, int n_args);
bool test_exists(const char *name);
/* The method name of v as a bound function, or an undefined value. */
struct jv find_method(struct rctx *c, struct jv v, const char *name);
/* A global function (range, namespace, ...), or an undefined value. */
struct jv find_global(struct rctx *c, const char *name);
/* v as a list (strings: code points; dicts: keys; undefined: empty). */
struct jv jv_iter(struct rctx *c, int line, struct jv v);

#endif
