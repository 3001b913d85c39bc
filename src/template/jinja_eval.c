/*
 * jinja_eval.c — running a parsed template: scopes, statements and
 * expressions with Jinja2's semantics, and jinja_compile/jinja_render.
 *
 * Scopes: the template's top level is one frame; each iteration of a for
 * loop, each macro call and each with block gets a frame of its own, so
 * `set` inside them is not seen outside (templates carry state out of
 * loops in a namespace()). Lookups walk outward, then to the globals.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/json.h"
#include "template/jinja_int.h"

#define MAX_STEPS 2000000ull
#define MAX_OUTPUT (256u << 20)
#define MAX_CALL_DEPTH 100
#define MAX_EVAL_DEPTH 2000

_Noreturn void jfail(struct rctx *c, int line, const char *fmt, ...) {
    char msg[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) err_set(c->err, KVIK_ERR_FORMAT, "template line %d: %s", line, msg);
    else err_set(c->err, KVIK_ERR_FORMAT, "template: %s", msg);
    c->code = KVIK_ERR_FORMAT;
    longjmp(c->fail, 1);
}

static void step(struct rctx *c, int line) {
    if (++c->steps > MAX_STEPS) jfail(c, line, "the template ran too long (%llu steps)", MAX_STEPS);
    if (c->out->n > MAX_OUTPUT) jfail(c, line, "the template's output is over %u bytes", MAX_OUTPUT);
}

/* ---- scopes -------------------------------------------------------------- */

static struct frame *frame_new(struct rctx *c, struct frame *parent) {
    struct frame *f = arena_alloc(&c->arena, sizeof *f);
    f->parent = parent;
    return f;
}

static void frame_set(struct rctx *c, struct frame *f, const char *name, struct jv v) {
    jdict_set(c, &f->vars, jv_cstr(c, name), v);
}

static struct jv lookup(struct rctx *c, struct frame *f, const char *name) {
    for (; f; f = f->parent) {
        struct jv *v = jdict_get_str(&f->vars, name);
        if (v) return *v;
    }
    struct jv g = find_global(c, name);
    if (g.t != JV_UNDEF) return g;
    size_t n = strlen(name) + 20;
    char *msg = arena_alloc(&c->arena, n);
    snprintf(msg, n, "'%s' is undefined", name);
    return jv_undef(msg);
}

static _Noreturn void undefined_error(struct rctx *c, int line, struct jv v) {
    jfail(c, line, "%s", v.undef ? v.undef : "undefined value");
}

/* ---- attributes and items ------------------------------------------------ */

static struct jv no_attr(struct rctx *c, struct jv obj, const char *name) {
    size_t n = strlen(name) + 48;
    char *msg = arena_alloc(&c->arena, n);
    snprintf(msg, n, "'%s object' has no attribute '%s'", jv_type_name(obj), name);
    return jv_undef(msg);
}

struct jv get_attr(struct rctx *c, int line, struct jv obj, const char *name) {
    if (obj.t == JV_UNDEF) undefined_error(c, line, obj);
    if (obj.t == JV_DICT) {
        struct jv m = obj.d->ns ? jv_undef(NULL) : find_method(c, obj, name);
        if (m.t != JV_UNDEF) return m;
        struct jv *v = jdict_get_str(obj.d, name);
        if (v) return *v;
        return no_attr(c, obj, name);
    }
    struct jv m = find_method(c, obj, name);
    return m.t != JV_UNDEF ? m : no_attr(c, obj, name);
}

/* i as an index into n items (negative from the end); -1 out of range. */
static int64_t norm_index(int64_t i, size_t n) {
    if (i < 0) i += (int64_t)n;
    return i < 0 || i >= (int64_t)n ? -1 : i;
}

struct jv get_item(struct rctx *c, int line, struct jv obj, struct jv key) {
    if (obj.t == JV_UNDEF) undefined_error(c, line, obj);
    if (obj.t == JV_DICT) {
        struct jv *v = jdict_get(obj.d, key);
        if (v) return *v;
    } else if (obj.t == JV_LIST && obj.gen) {
        jfail(c, line, "'generator' object is not subscriptable");
    } else if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t k = key.t == JV_INT ? key.i : key.b;
        if (obj.t == JV_LIST) {
            int64_t i = norm_index(k, obj.l->n);
            if (i >= 0) return obj.l->v[i];
        } else {
            size_t cps = utf8_count(obj.s->p, obj.s->n);
            int64_t i = norm_index(k, cps);
            if (i >= 0) {
                size_t a = utf8_offset(obj.s->p, obj.s->n, i), b = utf8_offset(obj.s->p, obj.s->n, i + 1);
                return jstr_sub(c, obj.s, a, b);
            }
        }
    }
    if (key.t == JV_STR) {
        struct jv m = obj.t == JV_DICT && obj.d->ns ? jv_undef(NULL) : find_method(c, obj, key.s->p);
        if (m.t != JV_UNDEF) return m;
        return no_attr(c, obj, key.s->p);
    }
    return jv_undef("an item that is not there");
}

/* Python's slice indices for n items: start, stop, step. */
static void slice_bounds(struct rctx *c, int line, struct jv sv[3], size_t n, int64_t *start, int64_t *stop,
                         int64_t *stp) {
    int64_t st = 1;
    if (sv[2].t != JV_NONE && sv[2].t != JV_UNDEF) {
        if (sv[2].t != JV_INT) jfail(c, line, "slice indices must be integers");
        st = sv[2].i;
        if (!st) jfail(c, line, "slice step cannot be zero");
    }
    int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? (int64_t)n - 1 : (int64_t)n;
    int64_t v[2];
    for (int k = 0; k < 2; k++) {
        if (sv[k].t == JV_NONE || sv[k].t == JV_UNDEF) {
            v[k] = k == 0 ? (st < 0 ? hi : lo) : (st < 0 ? lo : hi);
            continue;
        }
        if (sv[k].t != JV_INT) jfail(c, line, "slice indices must be integers or None");
        int64_t x = sv[k].i;
        if (x < 0) x += (int64_t)n;
        if (x < lo) x = lo;
        if (x > hi) x = hi;
        v[k] = x;
    }
    *start = v[0];
    *stop = v[1];
    *stp = st;
}

static struct jv do_slice(struct rctx *c, int line, struct jv obj, struct jv sv[3]) {
    if (obj.t == JV_UNDEF) undefined_error(c, line, obj);
    int64_t a, b, st;
    if (obj.t == JV_LIST) {
        slice_bounds(c, line, sv, obj.l->n, &a, &b, &st);
        struct jv r = jv_list(c, 0);
        r.tuple = obj.tuple;
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) jlist_push(c, r.l, obj.l->v[i]);
        return r;
    }
    if (obj.t == JV_STR) {
        size_t cps = utf8_count(obj.s->p, obj.s->n);
        slice_bounds(c, line, sv, cps, &a, &b, &st);
        if (st == 1)
            return jstr_sub(c, obj.s, utf8_offset(obj.s->p, obj.s->n, a),
                            b > a ? utf8_offset(obj.s->p, obj.s->n, b) : utf8_offset(obj.s->p, obj.s->n, a));
        struct outbuf o = {0};
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
            size_t x = utf8_offset(obj.s->p, obj.s->n, i), y = utf8_offset(obj.s->p, obj.s->n, i + 1);
            out_bytes(c, &o, obj.s->p + x, y - x);
        }
        return jv_str(c, o.p ? o.p : "", o.n, jtaint_all(c, o.n, obj.s->taint != NULL));
    }
    jfail(c, line, "'%s' object is not subscriptable", jv_type_name(obj));
}

/* ---- operators ------------------------------------------------------------ */

static bool num(struct jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double as_f(struct jv v) { return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : v.t == JV_BOOL ? (double)v.b : 0; }
/* An int or bool as int64 (0 for anything else: callers check the type). */
static int64_t as_i(struct jv v) { return v.t == JV_INT ? v.i : v.t == JV_BOOL ? (int64_t)v.b : 0; }

static const char *const OP_SYM[] = {"+", "-", "*", "/", "//", "%", "**", "~"};

static struct jv repeat(struct rctx *c, int line, struct jv seq, int64_t k) {
    if (k < 0) k = 0;
    if (seq.t == JV_STR) {
        if (seq.s->n && (uint64_t)k > MAX_OUTPUT / seq.s->n) jfail(c, line, "a string repeated too many times");
        struct outbuf o = {0};
        for (int64_t i = 0; i < k; i++) out_bytes(c, &o, seq.s->p, seq.s->n);
        return jv_str(c, o.p ? o.p : "", o.n, jtaint_all(c, o.n, seq.s->taint != NULL));
    }
    if (seq.l->n && (uint64_t)k > 1000000 / seq.l->n) jfail(c, line, "a list repeated too many times");
    struct jv r = jv_list(c, 0);
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < seq.l->n; j++) jlist_push(c, r.l, seq.l->v[j]);
    return r;
}

/* Python's "%" on a string: %s %r %d %i %f %% with a tuple or one value. */
struct jv str_percent(struct rctx *c, int line, struct jv fmt, struct jv args) {
    struct outbuf o = {0};
    size_t ai = 0;
    bool tainted = fmt.s->taint != NULL;
    for (size_t i = 0; i < fmt.s->n; i++) {
        char ch = fmt.s->p[i];
        if (ch != '%') {
            out_bytes(c, &o, &ch, 1);
            continue;
        }
        if (++i >= fmt.s->n) jfail(c, line, "incomplete format");
        char spec = fmt.s->p[i];
        if (spec == '%') {
            out_bytes(c, &o, "%", 1);
            continue;
        }
        struct jv a;
        if (args.t == JV_LIST && args.tuple) {
            if (ai >= args.l->n) jfail(c, line, "not enough arguments for format string");
            a = args.l->v[ai++];
        } else {
            if (ai++) jfail(c, line, "not enough arguments for format string");
            a = args;
        }
        char buf[64];
        if (spec == 's') {
            struct jv s = jv_to_str(c, a);
            tainted |= s.s->taint != NULL;
            out_bytes(c, &o, s.s->p, s.s->n);
        } else if (spec == 'r') {
            jv_repr(c, &o, a);
            tainted = true;
        } else if ((spec == 'd' || spec == 'i') && num(a)) {
            snprintf(buf, sizeof buf, "%lld", (long long)(a.t == JV_FLOAT ? (int64_t)a.f : as_i(a)));
            out_cstr(c, &o, buf);
        } else if (spec == 'f' && num(a)) {
            snprintf(buf, sizeof buf, "%f", as_f(a));
            out_cstr(c, &o, buf);
        } else jfail(c, line, "unsupported format character '%c'", spec);
    }
    if (args.t == JV_LIST && args.tuple && ai < args.l->n)
        jfail(c, line, "not all arguments converted during string formatting");
    return jv_str(c, o.p ? o.p : "", o.n, jtaint_all(c, o.n, tainted));
}

static struct jv binop(struct rctx *c, int line, int op, struct jv a, struct jv b) {
    if (op == OP_CONCAT) {
        struct jv x = jv_to_str(c, a), y = jv_to_str(c, b);
        return jstr_cat(c, x.s, y.s);
    }
    if (a.t == JV_UNDEF) undefined_error(c, line, a);
    if (b.t == JV_UNDEF) undefined_error(c, line, b);
    if (num(a) && num(b)) {
        bool flt = a.t == JV_FLOAT || b.t == JV_FLOAT;
        double x = as_f(a), y = as_f(b);
        int64_t i = as_i(a), j = as_i(b), r;
        switch (op) {
        case OP_ADD:
            if (flt) return jv_float(x + y);
            if (__builtin_add_overflow(i, j, &r)) return jv_float(x + y);
            return jv_int(r);
        case OP_SUB:
            if (flt) return jv_float(x - y);
            if (__builtin_sub_overflow(i, j, &r)) return jv_float(x - y);
            return jv_int(r);
        case OP_MUL:
            if (flt) return jv_float(x * y);
            if (__builtin_mul_overflow(i, j, &r)) return jv_float(x * y);
            return jv_int(r);
        case OP_DIV:
            if (y == 0) jfail(c, line, "division by zero");
            return jv_float(x / y);
        case OP_FLOORDIV:
            if (y == 0) jfail(c, line, "integer division or modulo by zero");
            if (flt) return jv_float(floor(x / y));
            if (i == INT64_MIN && j == -1) return jv_float(-(double)i);
            r = i / j;
            if ((i % j != 0) && ((i < 0) != (j < 0))) r--;
            return jv_int(r);
        case OP_MOD:
            if (y == 0) jfail(c, line, "integer division or modulo by zero");
            if (flt) {
                double m = fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return jv_float(m);
            }
            if (j == -1) return jv_int(0);
            r = i % j;
            if (r != 0 && ((r < 0) != (j < 0))) r += j;
            return jv_int(r);
        case OP_POW:
            if (!flt && j >= 0) {
                int64_t acc = 1;
                for (int64_t k = 0; k < j; k++)
                    if (__builtin_mul_overflow(acc, i, &acc)) return jv_float(pow(x, y));
                return jv_int(acc);
            }
            return jv_float(pow(x, y));
        }
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        if (a.markup == b.markup) {
            struct jv r = jstr_cat(c, a.s, b.s);
            r.markup = a.markup;
            return r;
        }
        struct jv r = a.markup ? jstr_cat(c, a.s, html_escape(c, b).s) : jstr_cat(c, html_escape(c, a).s, b.s);
        r.markup = true;
        return r;
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST) {
        struct jv r = jv_list(c, a.l->n + b.l->n);
        r.tuple = a.tuple;
        for (size_t i = 0; i < a.l->n; i++) jlist_push(c, r.l, a.l->v[i]);
        for (size_t i = 0; i < b.l->n; i++) jlist_push(c, r.l, b.l->v[i]);
        if (a.tuple == b.tuple) return r;
    }
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL))
        return repeat(c, line, a, as_i(b));
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL))
        return repeat(c, line, b, as_i(a));
    if (op == OP_MOD && a.t == JV_STR) return str_percent(c, line, a, b);
    jfail(c, line, "unsupported operand type(s) for %s: '%s' and '%s'", OP_SYM[op], jv_type_name(a),
          jv_type_name(b));
}

static bool contains(struct rctx *c, int line, struct jv hay, struct jv x) {
    switch (hay.t) {
    case JV_STR:
        if (x.t != JV_STR) jfail(c, line, "'in <string>' requires string as left operand, not %s", jv_type_name(x));
        if (!x.s->n) return true;
        return memmem(hay.s->p, hay.s->n, x.s->p, x.s->n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < hay.l->n; i++)
            if (jv_equal(hay.l->v[i], x)) return true;
        return false;
    case JV_DICT: return jdict_get(hay.d, x) != NULL;
    case JV_UNDEF: return false;
    default: jfail(c, line, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}

static bool compare(struct rctx *c, int line, int op, struct jv a, struct jv b) {
    switch (op) {
    case CMP_EQ: return jv_equal(a, b);
    case CMP_NE: return !jv_equal(a, b);
    case CMP_IN: return contains(c, line, b, a);
    case CMP_NOTIN: return !contains(c, line, b, a);
    default: break;
    }
    if (a.t == JV_UNDEF) undefined_error(c, line, a);
    if (b.t == JV_UNDEF) undefined_error(c, line, b);
    int r = jv_compare(c, line, a, b);
    return op == CMP_LT ? r < 0 : op == CMP_LE ? r <= 0 : op == CMP_GT ? r > 0 : r >= 0;
}

/* ---- calls ---------------------------------------------------------------- */

struct args {
    struct jv *pos;
    int n_pos;
    const char *const *kw_names;
    struct jv *kw;
    int n_kw;
};

static struct args eval_args(struct rctx *c, struct frame *f, const struct node *n) {
    struct args a = {0};
    a.n_pos = n->l1.n;
    a.n_kw = n->l2.n;
    a.pos = arena_alloc(&c->arena, (size_t)(a.n_pos + 1) * sizeof *a.pos);
    a.kw = arena_alloc(&c->arena, (size_t)(a.n_kw + 1) * sizeof *a.kw);
    for (int i = 0; i < a.n_pos; i++) a.pos[i] = eval(c, f, n->l1.v[i]);
    for (int i = 0; i < a.n_kw; i++) a.kw[i] = eval(c, f, n->l2.v[i]);
    a.kw_names = n->names;
    return a;
}

static struct jv call_macro(struct rctx *c, int line, const struct jfunc *fn, const struct jv *args, int n_args,
                            const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    const struct node *m = fn->macro;
    if (c->depth >= MAX_CALL_DEPTH) jfail(c, line, "macros nested more than %d deep", MAX_CALL_DEPTH);
    struct frame *f = frame_new(c, fn->closure);
    struct jv varargs = jv_list(c, 0), kwargs = jv_dict(c, 0);
    bool *set = arena_alloc(&c->arena, (size_t)(m->n_names + 1));
    for (int i = 0; i < n_args; i++) {
        if (i < m->n_names) {
            frame_set(c, f, m->names[i], args[i]);
            set[i] = true;
        } else jlist_push(c, varargs.l, args[i]);
    }
    for (int k = 0; k < n_kw; k++) {
        int i = 0;
        while (i < m->n_names && strcmp(m->names[i], kw_names[k])) i++;
        if (i < m->n_names) {
            frame_set(c, f, m->names[i], kw_vals[k]);
            set[i] = true;
        } else jdict_set(c, kwargs.d, jv_cstr(c, kw_names[k]), kw_vals[k]);
    }
    for (int i = 0; i < m->n_names; i++) {
        if (set[i]) continue;
        struct node *def = m->l2.v[i];
        frame_set(c, f, m->names[i], def ? eval(c, f, def) : jv_undef("a macro parameter that was not given"));
    }
    frame_set(c, f, "varargs", varargs);
    frame_set(c, f, "kwargs", kwargs);
    if (fn->caller.t != JV_UNDEF) frame_set(c, f, "caller", fn->caller);
    struct outbuf o = {0}, *saved = c->out;
    int saved_ctl = c->loop_ctl;
    c->out = &o;
    c->depth++;
    exec_body(c, f, &m->l1);
    c->depth--;
    c->out = saved;
    c->loop_ctl = saved_ctl;
    return out_take(c, &o);
}

struct jv call_value(struct rctx *c, int line, struct jv fn, const struct jv *args, int n_args,
                     const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    if (fn.t == JV_UNDEF) undefined_error(c, line, fn);
    if (fn.t != JV_FUNC) jfail(c, line, "'%s' object is not callable", jv_type_name(fn));
    if (fn.fn->kind == JF_MACRO) return call_macro(c, line, fn.fn, args, n_args, kw_names, kw_vals, n_kw);
    c->steps++;
    return fn.fn->fn(c, fn.fn->kind == JF_METHOD ? fn.fn->self : jv_none(), args, n_args, kw_names, kw_vals, n_kw);
}

/* ---- expressions ------------------------------------------------------------ */

static struct jv make_macro(struct rctx *c, struct frame *f, const struct node *m) {
    struct jfunc *fn = arena_alloc(&c->arena, sizeof *fn);
    fn->kind = JF_MACRO;
    fn->name = m->str;
    fn->macro = m;
    fn->closure = f;
    fn->caller = jv_undef(NULL);
    return (struct jv){.t = JV_FUNC, .fn = fn};
}

static struct jv eval_node(struct rctx *c, struct frame *f, const struct node *n);

/* eval_node with its nesting bounded: a chain of 100,000 "+" must fail
 * cleanly, not overflow the stack. */
struct jv eval(struct rctx *c, struct frame *f, const struct node *n) {
    if (++c->eval_depth > MAX_EVAL_DEPTH) jfail(c, n->line, "an expression nested more than %d deep", MAX_EVAL_DEPTH);
    struct jv v = eval_node(c, f, n);
    c->eval_depth--;
    return v;
}

static struct jv eval_node(struct rctx *c, struct frame *f, const struct node *n) {
    switch (n->kind) {
    case E_CONST: return n->value;
    case E_NAME: return lookup(c, f, n->str);
    case E_ATTR: return get_attr(c, n->line, eval(c, f, n->a), n->str);
    case E_ITEM: {
        struct jv obj = eval(c, f, n->a);
        return get_item(c, n->line, obj, eval(c, f, n->b));
    }
    case E_SLICE: {
        struct jv obj = eval(c, f, n->a), sv[3];
        for (int i = 0; i < 3; i++) sv[i] = n->l1.v[i] ? eval(c, f, n->l1.v[i]) : jv_none();
        return do_slice(c, n->line, obj, sv);
    }
    case E_CALL: {
        struct jv fn = eval(c, f, n->a);
        struct args a = eval_args(c, f, n);
        return call_value(c, n->line, fn, a.pos, a.n_pos, a.kw_names, a.kw, a.n_kw);
    }
    case E_FILTER: {
        struct jv v = eval(c, f, n->a);
        struct args a = eval_args(c, f, n);
        return apply_filter(c, n->line, n->str, v, a.pos, a.n_pos, a.kw_names, a.kw, a.n_kw);
    }
    case E_TEST: {
        struct jv v = eval(c, f, n->a);
        struct args a = eval_args(c, f, n);
        bool r = apply_test(c, n->line, n->str, v, a.pos, a.n_pos);
        return jv_bool(n->op ? !r : r);
    }
    case E_NEG:
    case E_POS: {
        struct jv v = eval(c, f, n->a);
        if (v.t == JV_UNDEF) undefined_error(c, n->line, v);
        if (!num(v)) jfail(c, n->line, "bad operand type for unary %c: '%s'", n->kind == E_NEG ? '-' : '+', jv_type_name(v));
        if (n->kind == E_POS) return v.t == JV_BOOL ? jv_int(v.b) : v;
        if (v.t == JV_FLOAT) return jv_float(-v.f);
        return as_i(v) == INT64_MIN ? jv_float(-(double)INT64_MIN) : jv_int(-as_i(v));
    }
    case E_NOT: return jv_bool(!jv_truthy(eval(c, f, n->a)));
    case E_BIN: {
        struct jv a = eval(c, f, n->a);
        return binop(c, n->line, n->op, a, eval(c, f, n->b));
    }
    case E_AND: {
        struct jv a = eval(c, f, n->a);
        return jv_truthy(a) ? eval(c, f, n->b) : a;
    }
    case E_OR: {
        struct jv a = eval(c, f, n->a);
        return jv_truthy(a) ? a : eval(c, f, n->b);
    }
    case E_COND:
        if (jv_truthy(eval(c, f, n->a))) return eval(c, f, n->b);
        return n->c ? eval(c, f, n->c) : jv_undef("the else branch of a conditional expression without one");
    case E_LIST:
    case E_TUPLE: {
        struct jv l = jv_list(c, (size_t)n->l1.n);
        l.tuple = n->kind == E_TUPLE;
        for (int i = 0; i < n->l1.n; i++) jlist_push(c, l.l, eval(c, f, n->l1.v[i]));
        return l;
    }
    case E_DICT: {
        struct jv d = jv_dict(c, (size_t)n->l1.n);
        for (int i = 0; i < n->l1.n; i++) {
            struct jv k = eval(c, f, n->l1.v[i]);
            if (k.t == JV_LIST && !k.tuple) jfail(c, n->line, "unhashable type: 'list'");
            if (k.t == JV_DICT) jfail(c, n->line, "unhashable type: 'dict'");
            jdict_set(c, d.d, k, eval(c, f, n->l2.v[i]));
        }
        return d;
    }
    case E_COMPARE: {
        struct jv a = eval(c, f, n->a);
        for (int i = 0; i < n->l1.n; i++) {
            struct jv b = eval(c, f, n->l1.v[i]);
            if (!compare(c, n->line, n->cmp_ops[i], a, b)) return jv_bool(false);
            a = b;
        }
        return jv_bool(true);
    }
    default: jfail(c, n->line, "a statement where an expression belongs");
    }
}

/* ---- statements -------------------------------------------------------------- */

static void assign_targets(struct rctx *c, int line, struct frame *f, const char **names, int n, struct jv v) {
    if (n == 1) {
        frame_set(c, f, names[0], v);
        return;
    }
    if (v.t == JV_STR) v = jv_iter(c, line, v);
    if (v.t != JV_LIST) jfail(c, line, "cannot unpack a '%s' into %d names", jv_type_name(v), n);
    if (v.l->n != (size_t)n)
        jfail(c, line, "%s values to unpack (expected %d, got %zu)", v.l->n > (size_t)n ? "too many" : "not enough",
              n, v.l->n);
    for (int i = 0; i < n; i++) frame_set(c, f, names[i], v.l->v[i]);
}

static struct jv cycle_fn(struct rctx *c, struct jv self, const struct jv *args, int n_args,
                          const char *const *kw_names, const struct jv *kw_vals, int n_kw) {
    (void)kw_names;
    (void)kw_vals;
    (void)n_kw;
    if (!n_args) jfail(c, 0, "no items for cycling given");
    struct jv *i0 = jdict_get_str(self.d, "index0");
    return args[(i0 ? i0->i : 0) % n_args];
}

static void exec_for(struct rctx *c, struct frame *f, const struct node *n) {
    struct jv seq = jv_iter(c, n->line, eval(c, f, n->a));
    struct jv items = seq;
    if (n->c) { /* the loop's filter runs first: loop.length counts what passes */
        items = jv_list(c, seq.l->n);
        for (size_t i = 0; i < seq.l->n; i++) {
            struct frame *tf = frame_new(c, f);
            assign_targets(c, n->line, tf, n->names, n->n_names, seq.l->v[i]);
            if (jv_truthy(eval(c, tf, n->c))) jlist_push(c, items.l, seq.l->v[i]);
        }
    }
    size_t len = items.l->n;
    if (!len) {
        exec_body(c, f, &n->l2);
        return;
    }
    struct jfunc *cyc = arena_alloc(&c->arena, sizeof *cyc);
    cyc->kind = JF_METHOD;
    cyc->name = "cycle";
    cyc->fn = cycle_fn;
    for (size_t i = 0; i < len; i++) {
        step(c, n->line);
        struct frame *lf = frame_new(c, f);
        struct jv loop = jv_dict(c, 12);
        struct jdict *d = loop.d;
        jdict_set(c, d, jv_cstr(c, "index"), jv_int((int64_t)i + 1));
        jdict_set(c, d, jv_cstr(c, "index0"), jv_int((int64_t)i));
        jdict_set(c, d, jv_cstr(c, "revindex"), jv_int((int64_t)(len - i)));
        jdict_set(c, d, jv_cstr(c, "revindex0"), jv_int((int64_t)(len - i - 1)));
        jdict_set(c, d, jv_cstr(c, "first"), jv_bool(i == 0));
        jdict_set(c, d, jv_cstr(c, "last"), jv_bool(i + 1 == len));
        jdict_set(c, d, jv_cstr(c, "length"), jv_int((int64_t)len));
        jdict_set(c, d, jv_cstr(c, "depth"), jv_int(1));
        jdict_set(c, d, jv_cstr(c, "depth0"), jv_int(0));
        if (i > 0) jdict_set(c, d, jv_cstr(c, "previtem"), items.l->v[i - 1]);
        if (i + 1 < len) jdict_set(c, d, jv_cstr(c, "nextitem"), items.l->v[i + 1]);
        struct jfunc *cf = arena_alloc(&c->arena, sizeof *cf);
        *cf = *cyc;
        cf->self = loop;
        jdict_set(c, d, jv_cstr(c, "cycle"), (struct jv){.t = JV_FUNC, .fn = cf});
        frame_set(c, lf, "loop", loop);
        assign_targets(c, n->line, lf, n->names, n->n_names, items.l->v[i]);
        exec_body(c, lf, &n->l1);
        if (c->loop_ctl == 1) {
            c->loop_ctl = 0;
            break;
        }
        c->loop_ctl = 0;
    }
}

/* Applies a set or filter block's filter chain to the text v. */
static struct jv apply_chain(struct rctx *c, struct frame *f, const struct nlist *chain, struct jv v) {
    for (int i = 0; i < chain->n; i++) {
        const struct node *fl = chain->v[i];
        struct args a = eval_args(c, f, fl);
        v = apply_filter(c, fl->line, fl->str, v, a.pos, a.n_pos, a.kw_names, a.kw, a.n_kw);
    }
    return v;
}

/* Runs body with output into a fresh buffer; the text as a string. */
static struct jv capture(struct rctx *c, struct frame *f, const struct nlist *body) {
    struct outbuf o = {0}, *saved = c->out;
    c->out = &o;
    exec_body(c, f, body);
    c->out = saved;
    return out_take(c, &o);
}

static void exec_stmt(struct rctx *c, struct frame *f, const struct node *n) {
    step(c, n->line);
    switch (n->kind) {
    case N_TEXT: out_bytes(c, c->out, n->str, n->len); return;
    case N_OUT: {
        struct jv v = eval(c, f, n->a);
        if (v.t == JV_STR) out_str(c, c->out, v.s);
        else if (v.t != JV_UNDEF) out_str(c, c->out, jv_to_str(c, v).s);
        return;
    }
    case N_IF:
        exec_body(c, f, jv_truthy(eval(c, f, n->a)) ? &n->l1 : &n->l2);
        return;
    case N_FOR: exec_for(c, f, n); return;
    case N_SET: assign_targets(c, n->line, f, n->names, n->n_names, eval(c, f, n->b)); return;
    case N_SET_ATTR: {
        struct jv ns = lookup(c, f, n->a->str);
        if (ns.t != JV_DICT || !ns.d->ns) jfail(c, n->line, "cannot assign attribute on non-namespace object");
        jdict_set(c, ns.d, jv_cstr(c, n->str), eval(c, f, n->b));
        return;
    }
    case N_SET_BLOCK: frame_set(c, f, n->names[0], apply_chain(c, f, &n->l2, capture(c, f, &n->l1))); return;
    case N_MACRO: frame_set(c, f, n->str, make_macro(c, f, n)); return;
    case N_CALL_BLOCK: {
        const struct node *call = n->a;
        struct jv fn = eval(c, f, call->a);
        if (fn.t != JV_FUNC || fn.fn->kind != JF_MACRO) jfail(c, n->line, "a call block needs a macro");
        struct jfunc *m = arena_alloc(&c->arena, sizeof *m);
        *m = *fn.fn;
        m->caller = make_macro(c, f, n->b);
        struct args a = eval_args(c, f, call);
        struct jv r = call_macro(c, n->line, m, a.pos, a.n_pos, a.kw_names, a.kw, a.n_kw);
        out_str(c, c->out, r.s);
        return;
    }
    case N_FILTER_BLOCK: {
        struct jv v = apply_chain(c, f, &n->l2, capture(c, f, &n->l1));
        out_str(c, c->out, jv_to_str(c, v).s);
        return;
    }
    case N_WITH: {
        struct frame *wf = frame_new(c, f);
        for (int i = 0; i < n->n_names; i++) frame_set(c, wf, n->names[i], eval(c, f, n->l2.v[i]));
        exec_body(c, wf, &n->l1);
        return;
    }
    case N_BREAK: c->loop_ctl = 1; return;
    case N_CONTINUE: c->loop_ctl = 2; return;
    default: jfail(c, n->line, "an expression where a statement belongs");
    }
}

void exec_body(struct rctx *c, struct frame *f, const struct nlist *body) {
    for (int i = 0; i < body->n && !c->loop_ctl; i++) exec_stmt(c, f, body->v[i]);
}

/* ---- the API -------------------------------------------------------------------- */

kvik_status jinja_compile(const char *src, size_t len, const char *name, struct jinja_template **out,
                          struct kvik_err *err) {
    *out = NULL;
    struct jinja_template *t = calloc(1, sizeof *t);
    if (!t) return err_set(err, KVIK_ERR_NOMEM, "template: out of memory");
    snprintf(t->name, sizeof t->name, "%s", name ? name : "template");
    kvik_status st = jinja_parse(t, src, len, err);
    if (st) {
        jinja_free(t);
        return st;
    }
    *out = t;
    return KVIK_OK;
}

void jinja_free(struct jinja_template *t) {
    if (!t) return;
    arena_free(&t->arena);
    free(t);
}

static kvik_status render(struct rctx *c, const struct jinja_template *t, const struct jinja_input *in,
                          struct outbuf *o) {
    struct json_value vars;
    kvik_status st = json_parse(in->vars_json ? in->vars_json : "{}", in->vars_json ? in->vars_len : 2, &vars, c->err);
    if (st) {
        char msg[sizeof c->err->msg];
        snprintf(msg, sizeof msg, "%s", c->err->msg);
        return st == KVIK_ERR_NOMEM ? st : err_set(c->err, KVIK_ERR_INVALID_ARG, "template variables: %s", msg);
    }
    if (vars.type != JSON_OBJECT) {
        json_free(&vars);
        return err_set(c->err, KVIK_ERR_INVALID_ARG, "template variables: not a JSON object");
    }
    struct frame *root = frame_new(c, NULL);
    frame_set(c, root, "bos_token", jv_cstr(c, in->bos_token ? in->bos_token : ""));
    frame_set(c, root, "eos_token", jv_cstr(c, in->eos_token ? in->eos_token : ""));
    for (size_t i = 0; i < vars.len; i++)
        jdict_set(c, &root->vars, jv_str(c, vars.members[i].key, vars.members[i].key_len, NULL),
                  jv_from_json(c, &vars.members[i].value, in->vars_json));
    json_free(&vars);
    c->globals = root;
    c->out = o;
    exec_body(c, root, &t->body);
    return KVIK_OK;
}

kvik_status jinja_render(const struct jinja_template *t, const struct jinja_input *in, struct jinja_output *out,
                         struct kvik_err *err) {
    memset(out, 0, sizeof *out);
    struct rctx *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, KVIK_ERR_NOMEM, "template: out of memory");
    struct kvik_err local;
    c->err = err ? err : &local;
    c->now = in->now;
    jmp_buf oom;
    c->arena.oom = &oom;
    struct outbuf o = {0};
    kvik_status st;
    int r = setjmp(oom);
    if (r) st = err_set(c->err, KVIK_ERR_NOMEM, "template: out of memory");
    else if (setjmp(c->fail)) st = c->code ? c->code : KVIK_ERR_FORMAT;
    else st = render(c, t, in, &o);
    if (!st) {
        out->text = malloc(o.n + 1);
        out->data = malloc((o.n_data ? o.n_data : 1) * sizeof *out->data);
        if (!out->text || !out->data) {
            free(out->text);
            free(out->data);
            memset(out, 0, sizeof *out);
            st = err_set(err, KVIK_ERR_NOMEM, "template: out of memory");
        } else {
            if (o.n) memcpy(out->text, o.p, o.n);
            out->text[o.n] = 0;
            out->len = o.n;
            if (o.n_data) memcpy(out->data, o.data, o.n_data * sizeof *out->data);
            out->n_data = o.n_data;
        }
    }
    arena_free(&c->arena);
    free(c);
    return st;
}

void jinja_output_free(struct jinja_output *o) {
    if (!o) return;
    free(o->text);
    free(o->data);
    memset(o, 0, sizeof *o);
}
