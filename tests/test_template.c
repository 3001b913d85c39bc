/*
 * test_template.c — the Jinja engine against Python's jinja2: every chat
 * template of llama.cpp's models/templates/ (the fetched fixtures) on every
 * conversation of tests/data/templates/cases.json renders to the bytes
 * jinja2 renders (tests/data/templates/golden.jsonl: length and SHA-256,
 * from scripts/gen_template_golden.py), or fails where jinja2 raises. Plus
 * the engine's own cases: data spans, whitespace control, errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/json.h"
#include "template/jinja.h"
#include "test.h"

#define NOW 1768473000 /* the golden data's strftime_now */

static const struct json_value *member(const struct json_value *o, const char *key) {
    for (size_t i = 0; o && o->type == JSON_OBJECT && i < o->len; i++)
        if (!strcmp(o->members[i].key, key)) return &o->members[i].value;
    return NULL;
}

/* Appends the JSON text of v to *buf (a growing string). */
static void dump(const struct json_value *v, char **buf, size_t *n, size_t *cap);

static void put(char **buf, size_t *n, size_t *cap, const char *s, size_t len) {
    if (*n + len + 1 > *cap) {
        *cap = (*n + len + 1) * 2;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *n, s, len);
    *n += len;
    (*buf)[*n] = 0;
}

static void dump_str(const char *s, size_t len, char **buf, size_t *n, size_t *cap) {
    put(buf, n, cap, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            put(buf, n, cap, esc, 2);
        } else if (ch < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            put(buf, n, cap, esc, 6);
        } else put(buf, n, cap, (const char *)&s[i], 1);
    }
    put(buf, n, cap, "\"", 1);
}

static void dump(const struct json_value *v, char **buf, size_t *n, size_t *cap) {
    char num[64];
    switch (v->type) {
    case JSON_NULL: put(buf, n, cap, "null", 4); return;
    case JSON_TRUE: put(buf, n, cap, "true", 4); return;
    case JSON_FALSE: put(buf, n, cap, "false", 5); return;
    case JSON_UINT: snprintf(num, sizeof num, "%llu", (unsigned long long)v->u); break;
    case JSON_NUMBER: snprintf(num, sizeof num, "%.17g", v->num); break;
    case JSON_STRING: dump_str(v->str, v->len, buf, n, cap); return;
    case JSON_ARRAY:
        put(buf, n, cap, "[", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i) put(buf, n, cap, ",", 1);
            dump(&v->items[i], buf, n, cap);
        }
        put(buf, n, cap, "]", 1);
        return;
    case JSON_OBJECT:
        put(buf, n, cap, "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i) put(buf, n, cap, ",", 1);
            dump_str(v->members[i].key, v->members[i].key_len, buf, n, cap);
            put(buf, n, cap, ":", 1);
            dump(&v->members[i].value, buf, n, cap);
        }
        put(buf, n, cap, "}", 1);
        return;
    }
    put(buf, n, cap, num, strlen(num));
}

/* The variables of a case: messages, tools, add_generation_prompt, vars. */
static char *case_vars(const struct json_value *cs) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    put(&buf, &n, &cap, "{\"messages\":", 12);
    dump(member(cs, "messages"), &buf, &n, &cap);
    put(&buf, &n, &cap, ",\"tools\":", 9);
    const struct json_value *tools = member(cs, "tools");
    if (tools) dump(tools, &buf, &n, &cap);
    else put(&buf, &n, &cap, "null", 4);
    const struct json_value *agp = member(cs, "add_generation_prompt");
    put(&buf, &n, &cap, ",\"add_generation_prompt\":", 25);
    put(&buf, &n, &cap, agp && agp->type == JSON_TRUE ? "true" : "false", agp && agp->type == JSON_TRUE ? 4 : 5);
    const struct json_value *vars = member(cs, "vars");
    for (size_t i = 0; vars && vars->type == JSON_OBJECT && i < vars->len; i++) {
        put(&buf, &n, &cap, ",", 1);
        dump_str(vars->members[i].key, vars->members[i].key_len, &buf, &n, &cap);
        put(&buf, &n, &cap, ":", 1);
        dump(&vars->members[i].value, &buf, &n, &cap);
    }
    put(&buf, &n, &cap, "}", 1);
    return buf;
}

static void hex32(const uint8_t d[32], char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

TEST(template_llama_cpp_templates_render_as_jinja2) {
    char path[2048];
    const char *fx = test_env("KVIK_FIXTURES");
    snprintf(path, sizeof path, "%s/templates/Qwen-Qwen2.5-7B-Instruct.jinja", fx);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        test_skip("llama.cpp's templates not fetched (make fixtures)");
        return;
    }
    fclose(probe);
    size_t clen, glen;
    snprintf(path, sizeof path, "%s/templates/cases.json", test_env("KVIK_TEST_DATA"));
    char *ctext = test_slurp(path, &clen);
    snprintf(path, sizeof path, "%s/templates/golden.jsonl", test_env("KVIK_TEST_DATA"));
    char *gtext = test_slurp(path, &glen);
    REQUIRE(ctext && gtext);
    struct json_value cases;
    struct kvik_err err = {0};
    REQUIRE(json_parse(ctext, clen, &cases, &err) == KVIK_OK && cases.type == JSON_ARRAY);
    int same = 0, both_fail = 0, wrong = 0, lines = 0;
    char last_tmpl[256] = "";
    struct jinja_template *t = NULL;
    kvik_status compile_st = KVIK_OK;
    char compile_msg[320] = "";
    for (char *line = gtext, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        struct json_value g;
        if (json_parse(line, strlen(line), &g, &err) != KVIK_OK) {
            CHECK_MSG(0, "golden line: %s", err.msg);
            continue;
        }
        const struct json_value *tn = member(&g, "template"), *cn = member(&g, "case"), *ok = member(&g, "ok");
        if (!tn) { /* the header */
            json_free(&g);
            continue;
        }
        lines++;
        if (strcmp(last_tmpl, tn->str)) {
            jinja_free(t);
            t = NULL;
            snprintf(last_tmpl, sizeof last_tmpl, "%s", tn->str);
            snprintf(path, sizeof path, "%s/templates/%s", fx, tn->str);
            size_t slen;
            char *src = test_slurp(path, &slen);
            struct kvik_err cerr = {0};
            compile_st = src ? jinja_compile(src, slen, tn->str, &t, &cerr) : KVIK_ERR_IO;
            snprintf(compile_msg, sizeof compile_msg, "%s", src ? cerr.msg : "missing");
            free(src);
        }
        const struct json_value *cs = NULL;
        for (size_t i = 0; i < cases.len; i++)
            if (!strcmp(member(&cases.items[i], "name")->str, cn->str)) cs = &cases.items[i];
        REQUIRE(cs);
        bool want_ok = ok->type == JSON_TRUE;
        struct jinja_output out = {0};
        struct kvik_err rerr = {0};
        kvik_status st = compile_st;
        if (!st) {
            char *vars = case_vars(cs);
            struct jinja_input in = {vars, strlen(vars), "<s>", "</s>", NOW};
            st = jinja_render(t, &in, &out, &rerr);
            free(vars);
        } else snprintf(rerr.msg, sizeof rerr.msg, "compile: %.300s", compile_msg);
        if (!want_ok) {
            if (st) both_fail++;
            else {
                wrong++;
                CHECK_MSG(0, "%s / %s: jinja2 raises (%s), kvik renders %zu bytes", tn->str, cn->str,
                          member(&g, "error")->str, out.len);
            }
        } else if (st) {
            wrong++;
            CHECK_MSG(0, "%s / %s: jinja2 renders, kvik fails: %s", tn->str, cn->str, rerr.msg);
        } else {
            struct sha256 h;
            uint8_t d[32];
            char hex[65];
            sha256_init(&h);
            sha256_update(&h, out.text, out.len);
            sha256_final(&h, d);
            hex32(d, hex);
            if (out.len == (size_t)member(&g, "len")->u && !strcmp(hex, member(&g, "sha256")->str)) same++;
            else {
                wrong++;
                CHECK_MSG(0, "%s / %s: %zu bytes, jinja2 %llu (scripts/gen_template_golden.py --show '%s' %s)",
                          tn->str, cn->str, out.len, (unsigned long long)member(&g, "len")->u, tn->str, cn->str);
            }
        }
        jinja_output_free(&out);
        json_free(&g);
    }
    jinja_free(t);
    printf("    %d renderings: %d byte-identical, %d failing where jinja2 raises, %d different\n", lines, same,
           both_fail, wrong);
    CHECK(lines >= 700);
    json_free(&cases);
    free(ctext);
    free(gtext);
}

/* Renders src with vars; the output (owned) or NULL with err filled. */
static char *render(const char *src, const char *vars, struct jinja_output *out, struct kvik_err *err) {
    struct jinja_template *t = NULL;
    memset(out, 0, sizeof *out);
    if (jinja_compile(src, strlen(src), "t", &t, err) != KVIK_OK) return NULL;
    struct jinja_input in = {vars, strlen(vars), "<s>", "</s>", NOW};
    kvik_status st = jinja_render(t, &in, out, err);
    jinja_free(t);
    return st ? NULL : out->text;
}

static void expect_render(const char *src, const char *vars, const char *want, int line) {
    struct jinja_output o;
    struct kvik_err err = {0};
    const char *got = render(src, vars, &o, &err);
    if (!got) test_fail(__FILE__, line, "%s: %s", src, err.msg);
    else if (strcmp(got, want)) test_fail(__FILE__, line, "%s: got [%s], want [%s]", src, got, want);
    jinja_output_free(&o);
}
#define EXPECT(src, vars, want) expect_render(src, vars, want, __LINE__)

TEST(template_data_spans_follow_message_text) {
    /* the template writes control tokens around the user's text; only the
     * user's bytes (content, role) are data, through + and trim */
    const char *src = "{% for m in messages %}<|im_start|>{{ m.role + '\\n' + m.content | trim }}<|im_end|>"
                      "{% endfor %}";
    const char *vars = "{\"messages\":[{\"role\":\"user\",\"content\":\"  hi <|im_end|> there \"}]}";
    struct jinja_output o;
    struct kvik_err err = {0};
    const char *text = render(src, vars, &o, &err);
    REQUIRE_MSG(text, "%s", err.msg);
    CHECK_STR(text, "<|im_start|>user\nhi <|im_end|> there<|im_end|>");
    REQUIRE(o.n_data == 2);
    /* "user" and "hi <|im_end|> there" */
    CHECK(o.data[0].begin == 12 && o.data[0].end == 16);
    CHECK(o.data[1].begin == 17 && o.data[1].end == 17 + strlen("hi <|im_end|> there"));
    jinja_output_free(&o);
    /* tojson of data is data; a template literal is not */
    text = render("{{ '<t>' }}{{ tools | tojson }}", "{\"tools\":[{\"a\":1}]}", &o, &err);
    REQUIRE(text);
    CHECK_STR(text, "<t>[{\"a\": 1}]");
    CHECK(o.n_data == 1 && o.data[0].begin == 3 && o.data[0].end == o.len);
    jinja_output_free(&o);
    /* a key of the caller's JSON printed alone is data as well */
    text = render("{% for k in tools[0] %}<{{ k }}>{% endfor %}", "{\"tools\":[{\"<|im_end|>\":1}]}", &o, &err);
    REQUIRE(text);
    CHECK(o.n_data == 1 && o.data[0].begin == 1 && o.data[0].end == 1 + strlen("<|im_end|>"));
    jinja_output_free(&o);
}

TEST(template_python_semantics) {
    EXPECT("{{ [1, 'a', none, true, 1.5] }}", "{}", "[1, 'a', None, True, 1.5]");
    EXPECT("{{ {'k': \"it's\"} }}", "{}", "{'k': \"it's\"}");
    EXPECT("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1e20 }} {{ 0.1 + 0.2 }}", "{}",
           "3 -4 2 3.5 1024 1e+20 0.30000000000000004");
    EXPECT("{{ 'héllo'[1] }}{{ 'héllo'|length }}{{ 'abc'[::-1] }}{{ [1,2,3][-2:] }}", "{}", "é5cba[2, 3]");
    EXPECT("{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' x  y '.split() }}", "{}",
           "a b|['a', 'b', '', 'c']|['x', 'y']");
    EXPECT("{{ 'x' if false }}|{{ undefined_thing }}|{{ none }}", "{}", "||None");
    EXPECT("{% set ns = namespace(n=0) %}{% for i in range(5) if i is odd %}{% set ns.n = ns.n + i %}{% endfor %}"
           "{{ ns.n }}",
           "{}", "4");
    EXPECT("{% for k, v in d | dictsort %}{{ k }}={{ v }}{% if not loop.last %},{% endif %}{% endfor %}",
           "{\"d\":{\"b\":2,\"A\":1}}", "A=1,b=2");
    EXPECT("{% macro f(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}", "{}", "[1B][23]");
    EXPECT("{{ xs | map(attribute='n') | join('+') }} {{ xs | selectattr('n', 'gt', 1) | list | length }}",
           "{\"xs\":[{\"n\":1},{\"n\":2},{\"n\":3}]}", "1+2+3 2");
    EXPECT("{{ {'a': [1, 2]} | tojson(indent=2) }}", "{}", "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
    EXPECT("{{ 'é' | tojson(ensure_ascii=true) }}", "{}", "\"\\u00e9\"");
    EXPECT("{{ strftime_now('%Y-%m-%d') }} {{ bos_token }}{{ eos_token }}", "{}", "2026-01-15 <s></s>");
}

TEST(template_whitespace_control) {
    EXPECT("a\n  {% if true %}\n  b\n  {% endif %}\nc", "{}", "a\n  b\nc");
    EXPECT("a  {{- ' b ' -}}  c", "{}", "a b c");
    EXPECT("{# note #}\nx{#- y -#}   z", "{}", "xz");
    EXPECT("{% raw %}{{ not parsed }}{% endraw %}", "{}", "{{ not parsed }}");
    EXPECT("line\n", "{}", "line"); /* one trailing newline goes, as jinja2's keep_trailing_newline=False */
}

TEST(template_errors_are_clean) {
    static const char *const bad_syntax[] = {
        "{% if x %}", "{{ x ", "{% for %}", "{% endfor %}", "{{ 'unterminated }}", "{% set = 1 %}",
        "{{ x | }}", "{% macro %}{% endmacro %}", "{{ (1, }}", "{% unknown %}", "{{ a[ }}", "{#",
    };
    for (size_t i = 0; i < sizeof bad_syntax / sizeof bad_syntax[0]; i++) {
        struct jinja_template *t = NULL;
        struct kvik_err err = {0};
        CHECK_MSG(jinja_compile(bad_syntax[i], strlen(bad_syntax[i]), "t", &t, &err) == KVIK_ERR_FORMAT,
                  "%s compiled", bad_syntax[i]);
        CHECK(!t && strstr(err.msg, "t:1:"));
    }
    static const char *const bad_run[] = {
        "{{ raise_exception('no system messages') }}", "{{ x.y }}", "{{ 1 + 'a' }}", "{{ none | tojson(1, 2) + 1 }}",
        "{{ [].append(1) }}", "{{ 1 / 0 }}", "{{ nope() }}", "{% for i in range(100000000) %}{% endfor %}",
        "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "{{ 'a' * 1000000000 }}", "{{ {} | map('upper') | tojson }}",
    };
    for (size_t i = 0; i < sizeof bad_run / sizeof bad_run[0]; i++) {
        struct jinja_output o;
        struct kvik_err err = {0};
        CHECK_MSG(!render(bad_run[i], "{}", &o, &err), "%s rendered", bad_run[i]);
        CHECK(err.code == KVIK_ERR_FORMAT && err.msg[0]);
    }
    struct jinja_output o;
    struct kvik_err err = {0};
    CHECK(!render("{{ x }}", "[1]", &o, &err) && err.code == KVIK_ERR_INVALID_ARG);
    CHECK(!render("{{ x }}", "{bad", &o, &err) && err.code == KVIK_ERR_INVALID_ARG);
    CHECK(render("{{ raise_exception('boom') if false }}ok", "{}", &o, &err));
    jinja_output_free(&o);
}

/* Nesting that would overflow the stack fails cleanly instead. */
TEST(template_deep_nesting_fails_cleanly) {
    size_t n = 300000;
    char *src = malloc(8 * n + 64);
    REQUIRE(src);
    static const char *const kinds[] = {"1 + ", "not ", "1 if x else ", "(", "x|string|"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t len = 0;
        len += (size_t)sprintf(src + len, "{{ ");
        size_t reps = k == 3 ? 5000 : n / 4;
        for (size_t i = 0; i < reps; i++) len += (size_t)sprintf(src + len, "%s", kinds[k]);
        len += (size_t)sprintf(src + len, k == 4 ? "trim }}" : "1 }}");
        struct jinja_template *t = NULL;
        struct kvik_err err = {0};
        kvik_status st = jinja_compile(src, len, "t", &t, &err);
        if (st == KVIK_OK) {
            struct jinja_input in = {"{}", 2, NULL, NULL, NOW};
            struct jinja_output o;
            st = jinja_render(t, &in, &o, &err);
            jinja_output_free(&o);
            jinja_free(t);
        }
        CHECK_MSG(st == KVIK_ERR_FORMAT && strstr(err.msg, "deep"), "%s: %d %s", kinds[k], st, err.msg);
    }
    /* a namespace holding itself prints as an error, not a crash */
    struct jinja_output o;
    struct kvik_err err = {0};
    CHECK(!render("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}", "{}", &o, &err));
    CHECK(strstr(err.msg, "nested") != NULL);
    free(src);
}
