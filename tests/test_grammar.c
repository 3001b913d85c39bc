/*
 * test_grammar.c — the grammar engine (src/grammar): GBNF compiled to byte
 * rules (errors with their line, left recursion refused), which texts a
 * grammar accepts (UTF-8 classes, repetitions, nesting), and the token
 * mask over the default model's vocabulary equal, token for token, to
 * checking every token's bytes one by one.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "grammar/grammar.h"
#include "grammar/grammar_int.h"
#include "model/model.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static struct grammar *compile(const char *src) {
    struct grammar *g = NULL;
    struct kvik_err err = {0};
    kvik_status st = grammar_from_gbnf(src, strlen(src), &g, &err);
    CHECK_MSG(st == KVIK_OK, "%s: %s", src, err.msg);
    return g;
}

/* Whether g accepts the whole of text (a sentence of root). */
static bool accepts(const struct grammar *g, const char *text) {
    struct kvik_err err = {0};
    struct grammar_matcher *m = grammar_matcher_new(g, NULL, &err);
    if (!m) return false;
    bool ok = grammar_matcher_accept_bytes(m, text, strlen(text)) && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    return ok;
}

TEST(grammar_gbnf_errors_are_clean) {
    static const struct {
        const char *src;
        kvik_status st;
        const char *want;
    } cases[] = {
        {"root ::= foo", KVIK_ERR_FORMAT, "'foo' is used but not defined"},
        {"main ::= \"x\"", KVIK_ERR_FORMAT, "no rule 'root'"},
        {"root ::= \"x\"\nroot ::= \"y\"", KVIK_ERR_FORMAT, "line 2"},
        {"root ::= root \"x\"", KVIK_ERR_UNSUPPORTED, "left recursion"},
        {"root ::= a\na ::= b? a \"x\"\nb ::= \"y\"", KVIK_ERR_UNSUPPORTED, "left recursion"},
        {"root ::= (\"x\"?)*", KVIK_ERR_UNSUPPORTED, "left recursion"},
        {"root ::= \"abc", KVIK_ERR_FORMAT, "not closed"},
        {"root ::= [abc", KVIK_ERR_FORMAT, "not closed"},
        {"root ::= (\"a\" | \"b\"", KVIK_ERR_FORMAT, "')' expected"},
        {"root ::= \"\\q\"", KVIK_ERR_FORMAT, "unknown escape"},
        {"root ::= [z-a]", KVIK_ERR_FORMAT, "end comes before"},
        {"root ::= \"a\"{3,2}", KVIK_ERR_FORMAT, "out of range"},
        {"root ::= \"a\"{20000}", KVIK_ERR_FORMAT, "out of range"},
        {"root \"x\"", KVIK_ERR_FORMAT, "'::=' expected"},
        {"root ::= \"x\" @", KVIK_ERR_FORMAT, "unexpected character"},
        {"root ::= []", KVIK_ERR_FORMAT, "empty character class"},
        {"root ::= [^\\x00-\\U0010FFFF]", KVIK_ERR_FORMAT, "matches nothing"},
        {"", KVIK_ERR_FORMAT, "no rule 'root'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct grammar *g = NULL;
        struct kvik_err err = {0};
        kvik_status st = grammar_from_gbnf(cases[i].src, strlen(cases[i].src), &g, &err);
        CHECK_MSG(st == cases[i].st && !g, "%s: status %d", cases[i].src, (int)st);
        CHECK_MSG(strstr(err.msg, cases[i].want), "%s: '%s' lacks '%s'", cases[i].src, err.msg, cases[i].want);
        grammar_free(g);
    }
}

TEST(grammar_accepts_what_the_rules_say) {
    static const struct {
        const char *src;
        const char *yes[6];
        const char *no[6];
    } cases[] = {
        {"root ::= \"yes\" | \"no\"", {"yes", "no"}, {"", "ye", "yess", "No"}},
        {"root ::= [a-c]+ \"!\"?", {"a", "abcab!", "c!"}, {"", "!", "ad", "a!!"}},
        {"root ::= \"x\"{2,4}", {"xx", "xxx", "xxxx"}, {"x", "xxxxx", ""}},
        {"root ::= \"x\"{3}", {"xxx"}, {"xx", "xxxx"}},
        {"root ::= \"x\"{2,} \"y\"", {"xxy", "xxxxxxxy"}, {"xy", "xx"}},
        {"root ::= (\"ab\" | \"c\")* \"d\"", {"d", "abd", "cabcd"}, {"ad", "abc"}},
        /* comments, a rule continued on the next line, names used before their rule */
        {"# a comment\nroot ::= item (\",\" item)*  # trailing\n  | \"none\"\nitem ::= [0-9]", {"1", "1,2,3", "none"}, {"1,", ",", "12"}},
        {"root ::= (\n  \"a\"\n  | \"b\"\n)", {"a", "b"}, {"ab", ""}},
        /* UTF-8 classes: any character but a quote, one at a time */
        {"root ::= \"\\\"\" [^\"\\\\]* \"\\\"\"", {"\"\"", "\"héllo 世界 🎉\"", "\"tab\there\""}, {"\"a\"b\"", "\"a", "\"\\\""}},
        {"root ::= [α-ω]+", {"αβγ", "ω"}, {"a", "Ω", "αa"}},
        {"root ::= [\\u4e00-\\u9fff]{2}", {"中文", "世界"}, {"中", "中文字", "ab"}},
        {"root ::= .", {"a", "é", "🎉", "\n"}, {"", "ab"}},
        {"root ::= \"\\x41\\u00e9\\U0001F389\\n\"", {"Aé🎉\n"}, {"Ae🎉\n"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct grammar *g = compile(cases[i].src);
        if (!g) continue;
        for (int k = 0; k < 6 && cases[i].yes[k]; k++)
            CHECK_MSG(accepts(g, cases[i].yes[k]), "%s should accept '%s'", cases[i].src, cases[i].yes[k]);
        for (int k = 0; k < 6 && cases[i].no[k]; k++)
            CHECK_MSG(!accepts(g, cases[i].no[k]), "%s should refuse '%s'", cases[i].src, cases[i].no[k]);
        grammar_free(g);
    }
    /* invalid UTF-8 is never a character */
    struct grammar *g = compile("root ::= [^x]");
    CHECK(!accepts(g, "\xC3"));
    CHECK(!accepts(g, "\xED\xA0\x80")); /* a surrogate */
    CHECK(!accepts(g, "\xC0\xAF"));     /* overlong */
    CHECK(accepts(g, "\xC3\xA9"));
    grammar_free(g);
}

/* The mask against each token's bytes tried on their own. */
static void check_mask(const struct grammar *g, const struct grammar_vocab *v, const struct tokenizer *tok,
                       const char *prefix, int64_t *allowed_out) {
    struct kvik_err err = {0};
    struct grammar_matcher *m = grammar_matcher_new(g, v, &err);
    REQUIRE(m);
    REQUIRE(grammar_matcher_accept_bytes(m, prefix, strlen(prefix)));
    int32_t n = grammar_vocab_size(v);
    uint32_t *mask = calloc(((size_t)n + 31) / 32, sizeof *mask);
    REQUIRE(mask);
    int64_t allowed = grammar_matcher_fill_mask(m, mask);
    int64_t count = 0, wrong = 0;
    for (int32_t id = 0; id < n; id++) {
        bool in = mask[id >> 5] >> (id & 31) & 1;
        count += in;
        char piece[256];
        int64_t k = tokenizer_decode_piece(tok, id, piece, sizeof piece, false);
        struct grammar_matcher *one = grammar_matcher_new(g, v, &err);
        REQUIRE(one);
        REQUIRE(grammar_matcher_accept_bytes(one, prefix, strlen(prefix)));
        bool want = grammar_matcher_accept_token(one, id);
        (void)k;
        grammar_matcher_free(one);
        if (want != in && wrong++ < 5)
            printf("    after '%s': token %d '%.*s' mask %d, bytes %d\n", prefix, id, (int)(k > 0 ? k : 0), piece, in,
                   want);
    }
    CHECK_MSG(wrong == 0, "after '%s': %lld tokens differ", prefix, (long long)wrong);
    CHECK_EQ_INT(count, allowed);
    *allowed_out = allowed;
    free(mask);
    grammar_matcher_free(m);
}

/* The default model's tokenizer and its vocabulary for the matcher. */
struct vocab_fixture {
    struct model *model;
    struct tokenizer *tok;
    int32_t *eog;
    int n_eog;
    struct grammar_vocab *v;
};

static void vocab_fixture_free(struct vocab_fixture *f);

static bool vocab_fixture_load(struct vocab_fixture *f) {
    char path[4096];
    memset(f, 0, sizeof *f);
    if (!test_default_model(path, sizeof path)) return false;
    struct kvik_err err = {0};
    if (!model_load(path, &f->model, &err) && !tokenizer_load(f->model->file, &f->tok, &err)) {
        f->eog = engine_eog_ids(f->tok, &f->n_eog);
        f->v = grammar_vocab_from_tokenizer(f->tok, f->eog, f->n_eog, &err);
    }
    CHECK_MSG(f->v != NULL, "%s: %s", path, err.msg);
    if (!f->v) vocab_fixture_free(f);
    return f->v != NULL;
}

static void vocab_fixture_free(struct vocab_fixture *f) {
    grammar_vocab_free(f->v);
    free(f->eog);
    tokenizer_free(f->tok);
    model_free(f->model);
}

TEST(grammar_mask_equals_token_by_token) {
    struct vocab_fixture f;
    if (!vocab_fixture_load(&f)) return;
    struct grammar_vocab *v = f.v;
    const struct tokenizer *tok = f.tok;
    int n_eog = f.n_eog;
    struct grammar *g = compile("root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws \"}\"\n"
                                "str ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\nws ::= [ \\n]*");
    REQUIRE(g);
    /* the last two are states met before: their masks come from the grammar's cache */
    static const char *const prefixes[] = {"", "{", "{ ", "{\"name\"", "{\"name\": \"Ad", "{\"name\": \"Ada\"",
                                           "{\"name\": \"Ada\" }", "{\"name\": \"Adaline", "{"};
    int64_t allowed[9];
    for (int i = 0; i < 9; i++) check_mask(g, v, tok, prefixes[i], &allowed[i]);
    CHECK_EQ_INT(allowed[7], allowed[4]);
    CHECK_EQ_INT(allowed[8], allowed[1]);
    CHECK(allowed[4] > 1000);                     /* inside the string: most tokens */
    CHECK(allowed[0] < 20 && allowed[0] >= 1);    /* "{" and its kin */
    CHECK_EQ_INT(allowed[6], n_eog);              /* done: only the end */
    grammar_free(g);
    vocab_fixture_free(&f);
}

/* The masks built from slices (body text exactly up to a length, letters
 * and digits) agree with trying every token: inside counted and unbounded
 * strings, at their ends, mid-character, mid-escape and in an email. */
TEST(grammar_mask_slices_equal_token_by_token) {
    struct vocab_fixture f;
    if (!vocab_fixture_load(&f)) return;
    struct grammar_vocab *v = f.v;
    const struct tokenizer *tok = f.tok;
    static const char schema[] =
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":6},"
        "\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"string\",\"format\":\"email\"},"
        "\"d\":{\"type\":\"string\",\"maxLength\":40}},\"required\":[\"a\",\"b\",\"c\",\"d\"],"
        "\"additionalProperties\":false}";
    struct grammar *g = NULL;
    struct kvik_err err = {0};
    REQUIRE(grammar_from_json_schema(schema, sizeof schema - 1, &g, NULL, &err) == KVIK_OK);
    static const char *const prefixes[] = {
        "{\"a\": \"",                                   /* counted: 0 of 2..6 */
        "{\"a\": \"x",                                  /* below the minimum */
        "{\"a\": \"xyz",                                /* 3 of 6 */
        "{\"a\": \"xyzuv",                              /* 1 left */
        "{\"a\": \"xyzuvw",                             /* none left: the quote */
        "{\"a\": \"xy\\",                               /* mid-escape */
        "{\"a\": \"xy\xc3",                             /* mid-character */
        "{\"a\": \"xy\", \"b\": \"",                    /* unbounded */
        "{\"a\": \"xy\", \"b\": \"\xe2\x82",            /* unbounded, mid-character */
        "{\"a\": \"xy\", \"b\": \"q\", \"c\": \"jo",     /* email, local part */
        "{\"a\": \"xy\", \"b\": \"q\", \"c\": \"jo@ex", /* email, domain */
        "{\"a\": \"xy\", \"b\": \"q\", \"c\": \"j@e.io\", \"d\": \"0123456789012345678901234567890", /* 31 of 40 */
    };
    int64_t allowed[sizeof prefixes / sizeof *prefixes];
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) check_mask(g, v, tok, prefixes[i], &allowed[i]);
    /* a matcher that forgot its automaton gives the same masks on */
    {
        struct grammar_matcher *a = grammar_matcher_new(g, v, &err), *b = grammar_matcher_new(g, v, &err);
        REQUIRE(a && b);
        const char *p = prefixes[11];
        size_t words = ((size_t)grammar_vocab_size(v) + 31) / 32;
        uint32_t *ma = calloc(words, sizeof *ma), *mb = calloc(words, sizeof *mb);
        REQUIRE(ma && mb);
        for (size_t i = 0; p[i]; i++) {
            REQUIRE(grammar_matcher_accept_bytes(a, p + i, 1) && grammar_matcher_accept_bytes(b, p + i, 1));
            if (i % 7 == 3) {
                REQUIRE(grammar_matcher_forget(b));
                int64_t nb = grammar_matcher_fill_mask(b, mb); /* first: b walks, a finds it cached */
                CHECK_EQ_INT(grammar_matcher_fill_mask(a, ma), nb);
                CHECK(!memcmp(ma, mb, words * sizeof *ma));
            }
        }
        free(ma);
        free(mb);
        grammar_matcher_free(a);
        grammar_matcher_free(b);
    }
    CHECK(allowed[7] > 1000);           /* an unbounded string: most tokens */
    CHECK(allowed[2] < allowed[7]);     /* 3 more characters at most */
    CHECK(allowed[3] < allowed[2]);
    CHECK(allowed[4] >= 1 && allowed[4] < 20); /* the closing quote and its kin */
    grammar_free(g);
    vocab_fixture_free(&f);
}

/* ---- JSON Schema ---------------------------------------------------------- */

static struct grammar *from_schema(const char *schema) {
    struct grammar *g = NULL;
    struct kvik_err err = {0};
    char *gbnf = NULL;
    kvik_status st = grammar_from_json_schema(schema, strlen(schema), &g, &gbnf, &err);
    CHECK_MSG(st == KVIK_OK, "%s: %s", schema, err.msg);
    free(gbnf);
    return g;
}

TEST(grammar_schema_integer_bounds_exact) {
    static const long long bounds[][2] = {{0, 0},    {0, 9},      {3, 7},    {7, 123},   {10, 99},  {95, 1050},
                                          {-5, 5},   {-120, -13}, {-1, 0},   {199, 200}, {0, 1000}, {42, 42},
                                          {-999, -1}, {1, 1999}};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        long long lo = bounds[i][0], hi = bounds[i][1];
        char schema[160];
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", lo, hi);
        struct grammar *g = from_schema(schema);
        if (!g) continue;
        int wrong = 0;
        for (long long v = lo - 150; v <= hi + 150; v++) {
            char t[32];
            snprintf(t, sizeof t, "%lld", v);
            bool in = v >= lo && v <= hi;
            if (accepts(g, t) != in && wrong++ < 3) printf("    [%lld, %lld]: %s %s\n", lo, hi, t, in ? "refused" : "accepted");
        }
        CHECK_MSG(wrong == 0, "[%lld, %lld]: %d wrong", lo, hi, wrong);
        CHECK(!accepts(g, "007") && !accepts(g, "-0") && !accepts(g, "1.5"));
        grammar_free(g);
    }
    /* one bound, and exclusive bounds */
    struct grammar *g = from_schema("{\"type\":\"integer\",\"minimum\":18}");
    CHECK(accepts(g, "18") && accepts(g, "99") && accepts(g, "100") && accepts(g, "123456"));
    CHECK(!accepts(g, "17") && !accepts(g, "9") && !accepts(g, "-20") && !accepts(g, "0"));
    grammar_free(g);
    g = from_schema("{\"type\":\"integer\",\"exclusiveMaximum\":0}");
    CHECK(accepts(g, "-1") && accepts(g, "-5000") && !accepts(g, "0") && !accepts(g, "7"));
    grammar_free(g);
    g = from_schema("{\"type\":\"number\",\"minimum\":0,\"maximum\":5}");
    CHECK(accepts(g, "0") && accepts(g, "5") && accepts(g, "2.75") && accepts(g, "4.999"));
    CHECK(!accepts(g, "5.5") && !accepts(g, "-1") && !accepts(g, "6") && !accepts(g, "-0.5"));
    grammar_free(g);
}

TEST(grammar_schema_documents) {
    static const struct {
        const char *schema;
        const char *yes[5];
        const char *no[6];
    } cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},"
         "\"required\":[\"name\"],\"additionalProperties\":false}",
         {"{\"name\":\"Ada\"}", "{\"name\": \"Ada\", \"age\": 36}", "{ \"name\" : \"\\u00e9\\n\" }"},
         {"{}", "{\"name\":\"Ada\"} ", "{\"age\":36}", "{\"age\":36,\"name\":\"Ada\"}", "{\"name\":\"Ada\",\"x\":1}", "{\"name\":\"Ada\",}"}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":3}",
         {"[true,false]", "[ true , false , true ]"},
         {"[]", "[true]", "[true,true,true,true]", "[1,2]"}},
        {"{\"enum\":[\"red\",\"green\",1,null]}", {"\"red\"", "1", "null"}, {"\"blue\"", "\"Red\"", "2"}},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"ab\"", "\"abc\"", "\"é€\""}, {"\"a\"", "\"abcd\""}},
        {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", {"\"AB-123\""}, {"\"ab-123\"", "\"AB-12\"", "\"AB123\""}},
        {"{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\"", "\"1999-12-31\""}, {"\"2024-13-01\"", "\"2024-1-01\"", "\"24-01-01\""}},
        {"{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567e89b12d3a456426614174000\""}},
        {"{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2024-05-01T12:30:00Z\"", "\"2024-05-01T12:30:00.5+02:00\""}, {"\"2024-05-01 12:30:00\""}},
        {"{\"type\":\"string\",\"format\":\"email\"}", {"\"ada@example.org\"", "\"a.b+c@mail.co.uk\""}, {"\"ada@\"", "\"@example.org\"", "\"ada example.org\""}},
        {"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}", {"5", "null"}, {"\"5\"", "true"}},
        {"{\"type\":[\"string\",\"null\"]}", {"\"x\"", "null"}, {"1"}},
        {"{\"const\":{\"a\":[1,2]}}", {"{\"a\":[1,2]}"}, {"{\"a\":[1,2,3]}", "{\"a\": [1,2]}"}},
        {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\","
         "\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}",
         {"{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}"}, {"{\"v\":1,\"kids\":[{}]}", "{\"kids\":[]}"}},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", {"{}", "{\"a\":1,\"b\":2}"}, {"{\"a\":\"x\"}"}},
        {"{}", {"1", "{\"a\":[true,null]}", "\"s\""}, {"tru", "{a:1}"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct grammar *g = from_schema(cases[i].schema);
        if (!g) continue;
        for (int k = 0; k < 5 && cases[i].yes[k]; k++)
            CHECK_MSG(accepts(g, cases[i].yes[k]), "%s should accept %s", cases[i].schema, cases[i].yes[k]);
        for (int k = 0; k < 6 && cases[i].no[k]; k++)
            CHECK_MSG(!accepts(g, cases[i].no[k]), "%s should refuse %s", cases[i].schema, cases[i].no[k]);
        grammar_free(g);
    }
}

TEST(grammar_schema_unsupported_keywords_named) {
    static const struct {
        const char *schema, *want;
        kvik_status st;
    } cases[] = {
        {"{\"type\":\"array\",\"uniqueItems\":true}", "\"uniqueItems\"", KVIK_ERR_UNSUPPORTED},
        {"{\"type\":\"number\",\"multipleOf\":3}", "\"multipleOf\"", KVIK_ERR_UNSUPPORTED},
        {"{\"not\":{\"type\":\"string\"}}", "\"not\"", KVIK_ERR_UNSUPPORTED},
        {"{\"type\":\"object\",\"patternProperties\":{}}", "\"patternProperties\"", KVIK_ERR_UNSUPPORTED},
        {"{\"type\":\"string\",\"format\":\"ipv4\"}", "ipv4", KVIK_ERR_UNSUPPORTED},
        {"{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookaround", KVIK_ERR_UNSUPPORTED},
        {"{\"$ref\":\"https://example.com/s.json\"}", "$ref", KVIK_ERR_UNSUPPORTED},
        {"{\"$ref\":\"#/$defs/missing\"}", "names nothing", KVIK_ERR_FORMAT},
        {"{\"type\":\"strange\"}", "unknown type", KVIK_ERR_FORMAT},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer", KVIK_ERR_FORMAT},
        {"[1,2", "not valid JSON", KVIK_ERR_FORMAT},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "required", KVIK_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct grammar *g = NULL;
        struct kvik_err err = {0};
        kvik_status st = grammar_from_json_schema(cases[i].schema, strlen(cases[i].schema), &g, NULL, &err);
        CHECK_MSG(st == cases[i].st && !g, "%s: status %d (%s)", cases[i].schema, (int)st, err.msg);
        CHECK_MSG(strstr(err.msg, cases[i].want), "%s: '%s' lacks '%s'", cases[i].schema, err.msg, cases[i].want);
        grammar_free(g);
    }
}

TEST(grammar_forced_tool_calls) {
    static const char TOOLS[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},"
        "\"required\":[\"city\"],\"additionalProperties\":false}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"ping\"}}]";
    struct grammar *g = NULL;
    struct kvik_err err = {0};
    /* any function: the name's rest comes first (the prompt holds {"name": ") */
    REQUIRE(grammar_from_tool_calls(TOOLS, strlen(TOOLS), NULL, false, &g, NULL, &err) == KVIK_OK);
    CHECK(accepts(g, "get_weather\", \"arguments\": {\"city\": \"Paris\"}}"));
    CHECK(accepts(g, "get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3}}"));
    CHECK(accepts(g, "ping\", \"arguments\": {}}"));
    CHECK(!accepts(g, "get_weather\", \"arguments\": {\"days\": 3}}"));             /* city is required */
    CHECK(!accepts(g, "get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 9}}")); /* out of bounds */
    CHECK(!accepts(g, "get_time\", \"arguments\": {}}"));                          /* not a tool */
    grammar_free(g);
    /* one named function, Llama 3's key: the arguments alone */
    REQUIRE(grammar_from_tool_calls(TOOLS, strlen(TOOLS), "get_weather", true, &g, NULL, &err) == KVIK_OK);
    CHECK(accepts(g, "{\"city\": \"Rome\"}}") && !accepts(g, "{}}") && !accepts(g, "ping\", \"parameters\": {}}"));
    grammar_free(g);
    CHECK(grammar_from_tool_calls(TOOLS, strlen(TOOLS), "nope", false, &g, NULL, &err) == KVIK_ERR_FORMAT);
    CHECK(grammar_from_tool_calls("{}", 2, NULL, false, &g, NULL, &err) == KVIK_ERR_FORMAT && !g);
}
