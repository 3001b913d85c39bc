/*
 * eval.c — the task file parser of `kvik eval`, its reply checks, and the
 * reader of a results file used as a baseline (eval.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/json.h"
#include "tools/eval.h"

const char *eval_check_name(enum eval_check c) {
    switch (c) {
    case EVAL_CHECK_EXACT: return "exact";
    case EVAL_CHECK_CONTAINS: return "contains";
    case EVAL_CHECK_REGEX: return "regex";
    case EVAL_CHECK_JSON: return "json";
    case EVAL_CHECK_CHOICE: return "choice";
    case EVAL_CHECK_JSON_SCHEMA: return "json_schema";
    }
    return "?";
}

static void strs_free(struct eval_strs *s) {
    for (int i = 0; i < s->n; i++) free(s->s[i]);
    free(s->s);
    *s = (struct eval_strs){0};
}

static void case_free(struct eval_case *c) {
    free(c->id);
    strs_free(&c->tags);
    free(c->prompt);
    for (int i = 0; i < c->n_msgs; i++) free(c->msgs[i].role), free(c->msgs[i].content);
    free(c->msgs);
    free(c->value);
    strs_free(&c->all);
    strs_free(&c->any);
    strs_free(&c->none);
    free(c->pattern);
    if (c->has_re) regfree(&c->re);
    strs_free(&c->options);
    if (c->doc) json_free(c->doc);
    free(c->doc);
    *c = (struct eval_case){0};
}

void eval_set_free(struct eval_set *s) {
    for (int i = 0; i < s->n; i++) case_free(&s->cases[i]);
    free(s->cases);
    *s = (struct eval_set){0};
}

/* ---- parsing ---------------------------------------------------------------- */

/* What one line's parse reports: the line, the error text. */
struct pctx {
    int line;
    struct kvik_err *err;
};

static kvik_status bad(struct pctx *p, const char *fmt, const char *a, const char *b) {
    char msg[200];
    snprintf(msg, sizeof msg, fmt, a, b ? b : "");
    return err_set(p->err, KVIK_ERR_FORMAT, "line %d: %s", p->line, msg);
}

static const struct json_value *member(const struct json_value *o, const char *key) {
    for (size_t i = 0; i < o->len; i++)
        if (!strcmp(o->members[i].key, key)) return &o->members[i].value;
    return NULL;
}

/* A copy of string v, named what for errors; NUL bytes are refused. */
static kvik_status str_of(struct pctx *p, const struct json_value *v, const char *what, char **out) {
    if (v->type != JSON_STRING) return bad(p, "%s must be a string, not %s", what, json_type_name(v->type));
    if (strlen(v->str) != v->len) return bad(p, "%s holds a NUL character", what, NULL);
    if (!(*out = strdup(v->str))) return err_set(p->err, KVIK_ERR_NOMEM, "out of memory");
    return KVIK_OK;
}

static kvik_status strs_of(struct pctx *p, const struct json_value *v, const char *what, bool nonempty,
                           struct eval_strs *out) {
    if (v->type != JSON_ARRAY) return bad(p, "%s must be an array of strings", what, NULL);
    if (nonempty && v->len == 0) return bad(p, "%s is empty", what, NULL);
    if (v->len > 100000) return bad(p, "%s is too long", what, NULL);
    if (v->len && !(out->s = calloc(v->len, sizeof(char *)))) return err_set(p->err, KVIK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < v->len; i++) {
        kvik_status st = str_of(p, &v->items[i], what, &out->s[i]);
        if (st) return st;
        out->n++;
    }
    return KVIK_OK;
}

/* A number's value: JSON_UINT exactly, any other number read back from
 * its text at v->at. */
static bool num_of(const char *line, const struct json_value *v, double *out) {
    if (v->type == JSON_UINT) return *out = (double)v->u, true;
    if (v->type != JSON_NUMBER) return false;
    *out = strtod(line + v->at, NULL);
    return true;
}

static bool only_keys(const struct json_value *o, const char *const *keys, const char **unknown) {
    for (size_t i = 0; i < o->len; i++) {
        bool known = false;
        for (const char *const *k = keys; *k && !known; k++) known = !strcmp(o->members[i].key, *k);
        if (!known) return *unknown = o->members[i].key, false;
    }
    return true;
}

static bool dup_keys(const struct json_value *o, const char **key) {
    for (size_t i = 0; i < o->len; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(o->members[i].key, o->members[j].key)) return *key = o->members[i].key, true;
    return false;
}

/* ---- the JSON Schema subset ---- */

static const char *const schema_types[] = {"object", "array", "string", "number", "integer", "boolean", "null", NULL};

static bool is_type_name(const struct json_value *v) {
    if (v->type != JSON_STRING) return false;
    for (const char *const *t = schema_types; *t; t++)
        if (!strcmp(v->str, *t)) return true;
    return false;
}

/* Checks that s is a schema of the subset eval.h lists. */
static kvik_status schema_check(struct pctx *p, const struct json_value *s) {
    static const char *const keys[] = {"type", "enum", "required", "properties", "items", "minItems", "maxItems",
                                       "title", "description", "$schema", NULL};
    const char *k;
    kvik_status st;
    if (s->type != JSON_OBJECT) return bad(p, "json_schema: a schema must be an object", NULL, NULL);
    if (!only_keys(s, keys, &k)) return bad(p, "json_schema: keyword \"%s\" is not supported", k, NULL);
    if (dup_keys(s, &k)) return bad(p, "json_schema: keyword \"%s\" given twice", k, NULL);
    const struct json_value *v;
    if ((v = member(s, "type"))) {
        bool ok = is_type_name(v);
        if (v->type == JSON_ARRAY && v->len) {
            ok = true;
            for (size_t i = 0; i < v->len; i++) ok &= is_type_name(&v->items[i]);
        }
        if (!ok) return bad(p, "json_schema: \"type\" must name JSON types (object, array, string, ...)", NULL, NULL);
    }
    if ((v = member(s, "enum"))) {
        if (v->type != JSON_ARRAY || !v->len) return bad(p, "json_schema: \"enum\" must be a non-empty array", NULL, NULL);
        for (size_t i = 0; i < v->len; i++) {
            enum json_type t = v->items[i].type;
            if (t != JSON_STRING && t != JSON_UINT && t != JSON_TRUE && t != JSON_FALSE && t != JSON_NULL)
                return bad(p, "json_schema: \"enum\" takes strings, non-negative integers, booleans and null", NULL,
                           NULL);
        }
    }
    if ((v = member(s, "required"))) {
        bool ok = v->type == JSON_ARRAY;
        for (size_t i = 0; ok && i < v->len; i++) ok = v->items[i].type == JSON_STRING;
        if (!ok) return bad(p, "json_schema: \"required\" must be an array of strings", NULL, NULL);
    }
    if ((v = member(s, "properties"))) {
        if (v->type != JSON_OBJECT) return bad(p, "json_schema: \"properties\" must be an object", NULL, NULL);
        for (size_t i = 0; i < v->len; i++)
            if ((st = schema_check(p, &v->members[i].value))) return st;
    }
    if ((v = member(s, "items")) && (st = schema_check(p, v))) return st;
    if ((v = member(s, "minItems")) && v->type != JSON_UINT)
        return bad(p, "json_schema: \"minItems\" must be a non-negative integer", NULL, NULL);
    if ((v = member(s, "maxItems")) && v->type != JSON_UINT)
        return bad(p, "json_schema: \"maxItems\" must be a non-negative integer", NULL, NULL);
    return KVIK_OK;
}

/* Whether x, parsed from text[0..len), is of JSON type name t. */
static bool type_is(const char *t, const struct json_value *x, const char *text, size_t len) {
    switch (x->type) {
    case JSON_NULL: return !strcmp(t, "null");
    case JSON_TRUE:
    case JSON_FALSE: return !strcmp(t, "boolean");
    case JSON_UINT: return !strcmp(t, "integer") || !strcmp(t, "number");
    case JSON_NUMBER: {
        if (!strcmp(t, "number")) return true;
        if (strcmp(t, "integer")) return false;
        /* an integer is written without a fraction or an exponent */
        size_t i = x->at;
        if (i < len && text[i] == '-') i++;
        while (i < len && text[i] >= '0' && text[i] <= '9') i++;
        return i == len || (text[i] != '.' && text[i] != 'e' && text[i] != 'E');
    }
    case JSON_STRING: return !strcmp(t, "string");
    case JSON_ARRAY: return !strcmp(t, "array");
    case JSON_OBJECT: return !strcmp(t, "object");
    }
    return false;
}

static bool scalar_eq(const struct json_value *a, const struct json_value *b) {
    if (a->type != b->type) return false;
    if (a->type == JSON_UINT) return a->u == b->u;
    if (a->type == JSON_STRING) return a->len == b->len && !memcmp(a->str, b->str, a->len);
    return a->type == JSON_TRUE || a->type == JSON_FALSE || a->type == JSON_NULL;
}

/* Whether schema s (one schema_check accepted) accepts x. */
static bool schema_accepts(const struct json_value *s, const struct json_value *x, const char *text, size_t len) {
    const struct json_value *v;
    if ((v = member(s, "type"))) {
        bool ok = false;
        if (v->type == JSON_STRING) ok = type_is(v->str, x, text, len);
        for (size_t i = 0; v->type == JSON_ARRAY && i < v->len && !ok; i++) ok = type_is(v->items[i].str, x, text, len);
        if (!ok) return false;
    }
    if ((v = member(s, "enum"))) {
        bool ok = false;
        for (size_t i = 0; i < v->len && !ok; i++) ok = scalar_eq(&v->items[i], x);
        if (!ok) return false;
    }
    if (x->type == JSON_OBJECT) {
        if ((v = member(s, "required")))
            for (size_t i = 0; i < v->len; i++)
                if (!member(x, v->items[i].str)) return false;
        if ((v = member(s, "properties")))
            for (size_t i = 0; i < v->len; i++) {
                const struct json_value *xv = member(x, v->members[i].key);
                if (xv && !schema_accepts(&v->members[i].value, xv, text, len)) return false;
            }
    }
    if (x->type == JSON_ARRAY) {
        if ((v = member(s, "minItems")) && x->len < v->u) return false;
        if ((v = member(s, "maxItems")) && x->len > v->u) return false;
        if ((v = member(s, "items")))
            for (size_t i = 0; i < x->len; i++)
                if (!schema_accepts(v, &x->items[i], text, len)) return false;
    }
    return true;
}

static kvik_status parse_check(struct pctx *p, const struct json_value *v, struct eval_case *c) {
    if (v->type != JSON_OBJECT) return bad(p, "\"check\" must be an object", NULL, NULL);
    const char *k;
    if (dup_keys(v, &k)) return bad(p, "check: key \"%s\" given twice", k, NULL);
    const struct json_value *t = member(v, "type");
    if (!t || t->type != JSON_STRING) return bad(p, "check: \"type\" (a string) is missing", NULL, NULL);
    kvik_status st = KVIK_OK;
    if (!strcmp(t->str, "exact")) {
        static const char *const keys[] = {"type", "value", NULL};
        if (!only_keys(v, keys, &k)) return bad(p, "check exact: unknown key \"%s\"", k, NULL);
        const struct json_value *s = member(v, "value");
        if (!s) return bad(p, "check exact: \"value\" is missing", NULL, NULL);
        c->check = EVAL_CHECK_EXACT;
        return str_of(p, s, "check exact: \"value\"", &c->value);
    }
    if (!strcmp(t->str, "contains")) {
        static const char *const keys[] = {"type", "value", "all", "any", "none", NULL};
        if (!only_keys(v, keys, &k)) return bad(p, "check contains: unknown key \"%s\"", k, NULL);
        const struct json_value *s = member(v, "value"), *all = member(v, "all"), *any = member(v, "any"),
                                *none = member(v, "none");
        if (!s && !all && !any && !none)
            return bad(p, "check contains: give \"value\", \"all\", \"any\" or \"none\"", NULL, NULL);
        c->check = EVAL_CHECK_CONTAINS;
        if (s && (st = str_of(p, s, "check contains: \"value\"", &c->value))) return st;
        if (all && (st = strs_of(p, all, "check contains: \"all\"", true, &c->all))) return st;
        if (any && (st = strs_of(p, any, "check contains: \"any\"", true, &c->any))) return st;
        if (none && (st = strs_of(p, none, "check contains: \"none\"", true, &c->none))) return st;
        return KVIK_OK;
    }
    if (!strcmp(t->str, "regex")) {
        static const char *const keys[] = {"type", "pattern", NULL};
        if (!only_keys(v, keys, &k)) return bad(p, "check regex: unknown key \"%s\"", k, NULL);
        const struct json_value *s = member(v, "pattern");
        if (!s) return bad(p, "check regex: \"pattern\" is missing", NULL, NULL);
        c->check = EVAL_CHECK_REGEX;
        if ((st = str_of(p, s, "check regex: \"pattern\"", &c->pattern))) return st;
        int rc = regcomp(&c->re, c->pattern, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char why[128];
            regerror(rc, &c->re, why, sizeof why);
            return bad(p, "check regex: bad pattern: %s", why, NULL);
        }
        c->has_re = true;
        return KVIK_OK;
    }
    if (!strcmp(t->str, "json")) {
        static const char *const keys[] = {"type", NULL};
        if (!only_keys(v, keys, &k)) return bad(p, "check json: unknown key \"%s\"", k, NULL);
        c->check = EVAL_CHECK_JSON;
        return KVIK_OK;
    }
    if (!strcmp(t->str, "choice")) {
        static const char *const keys[] = {"type", "options", "answer", NULL};
        if (!only_keys(v, keys, &k)) return bad(p, "check choice: unknown key \"%s\"", k, NULL);
        const struct json_value *o = member(v, "options"), *a = member(v, "answer");
        if (!o || !a) return bad(p, "check choice: \"options\" and \"answer\" are needed", NULL, NULL);
        c->check = EVAL_CHECK_CHOICE;
        if ((st = strs_of(p, o, "check choice: \"options\"", true, &c->options))) return st;
        if (c->options.n < 2) return bad(p, "check choice: give at least 2 options", NULL, NULL);
        for (int i = 0; i < c->options.n; i++)
            if (!c->options.s[i][0]) return bad(p, "check choice: an option is empty", NULL, NULL);
        if (a->type != JSON_UINT || a->u >= (uint64_t)c->options.n)
            return bad(p, "check choice: \"answer\" must be an index into \"options\"", NULL, NULL);
        c->answer = (int)a->u;
        return KVIK_OK;
    }
    if (!strcmp(t->str, "json_schema")) {
        static const char *const keys[] = {"type", "schema", NULL};
        if (!only_keys(v, keys, &k)) return bad(p, "check json_schema: unknown key \"%s\"", k, NULL);
        const struct json_value *sc = member(v, "schema");
        if (!sc) return bad(p, "check json_schema: \"schema\" is missing", NULL, NULL);
        if ((st = schema_check(p, sc))) return st;
        c->check = EVAL_CHECK_JSON_SCHEMA;
        c->schema = sc;
        return KVIK_OK;
    }
    return bad(p, "unknown check type \"%s\" (exact, contains, regex, json, json_schema, choice)", t->str, NULL);
}

static kvik_status parse_case(struct pctx *p, const char *line, const struct json_value *v, struct eval_case *c) {
    static const char *const keys[] = {"id", "tags", "prompt", "messages", "max_tokens", "temperature", "seed",
                                       "check", NULL};
    const char *k;
    kvik_status st;
    if (v->type != JSON_OBJECT) return bad(p, "a case must be a JSON object, not %s", json_type_name(v->type), NULL);
    if (!only_keys(v, keys, &k)) return bad(p, "unknown key \"%s\"", k, NULL);
    if (dup_keys(v, &k)) return bad(p, "key \"%s\" given twice", k, NULL);
    const struct json_value *id = member(v, "id"), *tags = member(v, "tags"), *prompt = member(v, "prompt"),
                            *msgs = member(v, "messages"), *mt = member(v, "max_tokens"),
                            *temp = member(v, "temperature"), *seed = member(v, "seed"), *check = member(v, "check");
    c->line = p->line;
    c->max_tokens = EVAL_DEFAULT_MAX_TOKENS;
    if (!id) return bad(p, "\"id\" is missing", NULL, NULL);
    if ((st = str_of(p, id, "\"id\"", &c->id))) return st;
    if (!c->id[0]) return bad(p, "\"id\" is empty", NULL, NULL);
    if (tags && (st = strs_of(p, tags, "\"tags\"", false, &c->tags))) return st;
    for (int i = 0; i < c->tags.n; i++)
        if (!c->tags.s[i][0]) return bad(p, "a tag is empty", NULL, NULL);
    if (!prompt == !msgs) return bad(p, "give exactly one of \"prompt\" and \"messages\"", NULL, NULL);
    if (prompt) {
        if ((st = str_of(p, prompt, "\"prompt\"", &c->prompt))) return st;
        if (!c->prompt[0]) return bad(p, "\"prompt\" is empty", NULL, NULL);
    } else {
        if (msgs->type != JSON_ARRAY || msgs->len == 0)
            return bad(p, "\"messages\" must be a non-empty array of {\"role\",\"content\"}", NULL, NULL);
        if (msgs->len > 10000) return bad(p, "\"messages\" is too long", NULL, NULL);
        if (!(c->msgs = calloc(msgs->len, sizeof *c->msgs))) return err_set(p->err, KVIK_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < msgs->len; i++) {
            const struct json_value *m = &msgs->items[i];
            static const char *const mkeys[] = {"role", "content", NULL};
            if (m->type != JSON_OBJECT) return bad(p, "a message must be an object", NULL, NULL);
            if (!only_keys(m, mkeys, &k)) return bad(p, "message: unknown key \"%s\"", k, NULL);
            const struct json_value *r = member(m, "role"), *ct = member(m, "content");
            if (!r || !ct) return bad(p, "a message needs \"role\" and \"content\"", NULL, NULL);
            c->n_msgs++;
            if ((st = str_of(p, r, "message \"role\"", &c->msgs[i].role))) return st;
            if ((st = str_of(p, ct, "message \"content\"", &c->msgs[i].content))) return st;
            const char *role = c->msgs[i].role;
            if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))
                return bad(p, "message role \"%s\" (system, user or assistant)", role, NULL);
        }
    }
    double d;
    if (mt) {
        if (mt->type != JSON_UINT || mt->u < 1 || mt->u > EVAL_MAX_TOKENS)
            return bad(p, "\"max_tokens\" must be an integer in 1..4096", NULL, NULL);
        c->max_tokens = (int)mt->u;
    }
    if (temp) {
        if (!num_of(line, temp, &d) || !(d >= 0 && d <= 100))
            return bad(p, "\"temperature\" must be a number in 0..100", NULL, NULL);
        c->temperature = d;
    }
    if (seed) {
        if (seed->type != JSON_UINT || seed->u >= 0xFFFFFFFFu) /* that one is the sampler's "from the clock" */
            return bad(p, "\"seed\" must be an integer in 0..4294967294", NULL, NULL);
        c->seed = seed->u;
    }
    if (!check) return bad(p, "\"check\" is missing", NULL, NULL);
    return parse_check(p, check, c);
}

kvik_status eval_set_parse(const char *buf, size_t len, struct eval_set *out, struct kvik_err *err) {
    *out = (struct eval_set){0};
    struct kvik_err e0 = {0};
    if (!err) err = &e0;
    struct eval_set s = {0};
    int cap = 0;
    struct pctx p = {0, err};
    kvik_status st = KVIK_OK;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - buf) : len, n = end - at;
        const char *line = buf + at;
        at = end + 1;
        p.line++;
        if (p.line == 1 && n >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) line += 3, n -= 3; /* a UTF-8 BOM */
        if (n && line[n - 1] == '\r') n--;
        size_t i = 0;
        while (i < n && (line[i] == ' ' || line[i] == '\t')) i++;
        if (i == n) continue; /* blank */
        if (s.n == cap) {
            int nc = cap ? 2 * cap : 64;
            struct eval_case *g = realloc(s.cases, sizeof *g * (size_t)nc);
            if (!g) {
                st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
                goto fail;
            }
            s.cases = g, cap = nc;
        }
        struct json_value v;
        struct kvik_err je = {0};
        if ((st = json_parse(line, n, &v, &je))) {
            if (st == KVIK_ERR_FORMAT) err_set(err, st, "line %d: not valid JSON: %s", p.line, je.msg);
            else err_set(err, st, "out of memory");
            goto fail;
        }
        struct eval_case *c = &s.cases[s.n++];
        *c = (struct eval_case){0};
        st = parse_case(&p, line, &v, c);
        if (!st && c->schema) { /* the schema points into v: the case keeps it */
            if (!(c->doc = malloc(sizeof *c->doc))) {
                c->schema = NULL;
                st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
            } else {
                *c->doc = v;
            }
        }
        if (!c->doc) json_free(&v);
        if (st) goto fail;
        for (int j = 0; j < s.n - 1; j++)
            if (!strcmp(s.cases[j].id, c->id)) {
                char id[80];
                snprintf(id, sizeof id, "%s", c->id);
                st = err_set(err, KVIK_ERR_FORMAT, "line %d: duplicate id \"%s\" (first on line %d)", p.line, id,
                             s.cases[j].line);
                goto fail;
            }
    }
    if (!s.n) {
        st = err_set(err, KVIK_ERR_FORMAT, "no cases");
        goto fail;
    }
    *out = s;
    return KVIK_OK;
fail:
    eval_set_free(&s);
    return st;
}

/* ---- checks ----------------------------------------------------------------- */

static bool is_space(unsigned char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

static void trim(const char **s, size_t *len) {
    while (*len && is_space((unsigned char)**s)) (*s)++, (*len)--;
    while (*len && is_space((unsigned char)(*s)[*len - 1])) (*len)--;
}

static bool holds(const char *hay, size_t n, const char *needle) {
    size_t m = strlen(needle);
    if (m == 0) return true;
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, m)) return true;
    return false;
}

bool eval_check_reply(const struct eval_case *c, const char *reply, size_t len) {
    switch (c->check) {
    case EVAL_CHECK_EXACT: {
        const char *s = reply;
        size_t n = len;
        trim(&s, &n);
        return n == strlen(c->value) && !memcmp(s, c->value, n);
    }
    case EVAL_CHECK_CONTAINS: {
        if (c->value && !holds(reply, len, c->value)) return false;
        for (int i = 0; i < c->all.n; i++)
            if (!holds(reply, len, c->all.s[i])) return false;
        for (int i = 0; i < c->none.n; i++)
            if (holds(reply, len, c->none.s[i])) return false;
        if (!c->any.n) return true;
        for (int i = 0; i < c->any.n; i++)
            if (holds(reply, len, c->any.s[i])) return true;
        return false;
    }
    case EVAL_CHECK_REGEX: {
        char *z = malloc(len + 1); /* regexec reads a NUL-terminated string */
        if (!z) return false;
        memcpy(z, reply, len);
        z[len] = 0;
        bool ok = strlen(z) == len && regexec(&c->re, z, 0, NULL, 0) == 0;
        free(z);
        return ok;
    }
    case EVAL_CHECK_JSON:
    case EVAL_CHECK_JSON_SCHEMA: {
        const char *s = reply;
        size_t n = len;
        trim(&s, &n);
        struct json_value v;
        if (json_parse(s, n, &v, NULL)) return false;
        bool ok = c->check == EVAL_CHECK_JSON || schema_accepts(c->schema, &v, s, n);
        json_free(&v);
        return ok;
    }
    case EVAL_CHECK_CHOICE: return false;
    }
    return false;
}

bool eval_choice_pass(const struct eval_case *c, const double *scores) {
    double a = scores[c->answer];
    if (a != a) return false;
    for (int i = 0; i < c->options.n; i++)
        if (i != c->answer && !(a > scores[i])) return false;
    return true;
}

/* ---- results ---------------------------------------------------------------- */

void eval_results_free(struct eval_results *r) {
    for (int i = 0; i < r->n_cases; i++) free(r->ids[i]);
    for (int i = 0; i < r->n_tags; i++) free(r->tags[i].tag);
    free(r->ids), free(r->pass), free(r->tags);
    *r = (struct eval_results){0};
}

kvik_status eval_results_parse(const char *buf, size_t len, struct eval_results *out, struct kvik_err *err) {
    *out = (struct eval_results){0};
    struct kvik_err e0 = {0};
    if (!err) err = &e0;
    struct json_value v;
    struct kvik_err je = {0};
    kvik_status st = json_parse(buf, len, &v, &je);
    if (st) return st == KVIK_ERR_FORMAT ? err_set(err, st, "not valid JSON: %s", je.msg) : err_set(err, st, "out of memory");
    struct eval_results r = {0};
    const struct json_value *cases = v.type == JSON_OBJECT ? member(&v, "cases") : NULL;
    const struct json_value *tags = v.type == JSON_OBJECT ? member(&v, "tags") : NULL;
    if (!cases || cases->type != JSON_ARRAY || !tags || tags->type != JSON_OBJECT) {
        st = err_set(err, KVIK_ERR_FORMAT, "not a results file: an object with \"cases\" and \"tags\" is expected");
        goto fail;
    }
    r.ids = calloc(cases->len + 1, sizeof(char *));
    r.pass = calloc(cases->len + 1, sizeof(bool));
    r.tags = calloc(tags->len + 1, sizeof *r.tags);
    if (!r.ids || !r.pass || !r.tags) goto nomem;
    for (size_t i = 0; i < cases->len; i++) {
        const struct json_value *c = &cases->items[i];
        const struct json_value *id = c->type == JSON_OBJECT ? member(c, "id") : NULL;
        const struct json_value *pass = c->type == JSON_OBJECT ? member(c, "pass") : NULL;
        if (!id || id->type != JSON_STRING || strlen(id->str) != id->len || !pass ||
            (pass->type != JSON_TRUE && pass->type != JSON_FALSE)) {
            st = err_set(err, KVIK_ERR_FORMAT, "case %zu: a string \"id\" and a boolean \"pass\" are expected", i + 1);
            goto fail;
        }
        if (!(r.ids[r.n_cases] = strdup(id->str))) goto nomem;
        r.pass[r.n_cases++] = pass->type == JSON_TRUE;
    }
    for (size_t i = 0; i < tags->len; i++) {
        const struct json_member *m = &tags->members[i];
        const struct json_value *p = m->value.type == JSON_OBJECT ? member(&m->value, "pass") : NULL;
        const struct json_value *t = m->value.type == JSON_OBJECT ? member(&m->value, "total") : NULL;
        if (!p || !t || p->type != JSON_UINT || t->type != JSON_UINT || p->u > t->u || t->u > INT32_MAX ||
            strlen(m->key) != m->key_len) {
            char k[80];
            snprintf(k, sizeof k, "%s", m->key);
            st = err_set(err, KVIK_ERR_FORMAT, "tag \"%s\": integers \"pass\" <= \"total\" are expected", k);
            goto fail;
        }
        if (!(r.tags[r.n_tags].tag = strdup(m->key))) goto nomem;
        r.tags[r.n_tags].pass = (int)p->u;
        r.tags[r.n_tags++].total = (int)t->u;
    }
    const struct json_value *all = member(&v, "overall");
    if (all) {
        const struct json_value *p = all->type == JSON_OBJECT ? member(all, "pass") : NULL;
        const struct json_value *t = all->type == JSON_OBJECT ? member(all, "total") : NULL;
        if (!p || !t || p->type != JSON_UINT || t->type != JSON_UINT || p->u > t->u || t->u > INT32_MAX) {
            st = err_set(err, KVIK_ERR_FORMAT, "\"overall\": integers \"pass\" <= \"total\" are expected");
            goto fail;
        }
        r.overall = (struct eval_tally){.tag = NULL, .pass = (int)p->u, .total = (int)t->u};
        r.has_overall = true;
    }
    json_free(&v);
    *out = r;
    return KVIK_OK;
nomem:
    st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
fail:
    json_free(&v);
    eval_results_free(&r);
    return st;
}
