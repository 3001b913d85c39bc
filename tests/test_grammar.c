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

TEST(grammar_mask_equals_token_by_token) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct model *model = NULL;
    struct tokenizer *tok = NULL;
    struct kvik_err err = {0};
    REQUIRE(model_load(path, &model, &err) == KVIK_OK && tokenizer_load(model->file, &tok, &err) == KVIK_OK);
    int n_eog = 0;
    int32_t *eog = engine_eog_ids(tok, &n_eog);
    struct grammar_vocab *v = grammar_vocab_from_tokenizer(tok, eog, n_eog, &err);
    REQUIRE(v);
    struct grammar *g = compile("root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws \"}\"\n"
                                "str ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\nws ::= [ \\n]*");
    REQUIRE(g);
    static const char *const prefixes[] = {"", "{", "{ ", "{\"name\"", "{\"name\": \"Ad", "{\"name\": \"Ada\"",
                                           "{\"name\": \"Ada\" }"};
    int64_t allowed[7];
    for (int i = 0; i < 7; i++) check_mask(g, v, tok, prefixes[i], &allowed[i]);
    CHECK(allowed[4] > 1000);                     /* inside the string: most tokens */
    CHECK(allowed[0] < 20 && allowed[0] >= 1);    /* "{" and its kin */
    CHECK_EQ_INT(allowed[6], n_eog);              /* done: only the end */
    grammar_free(g);
    grammar_vocab_free(v);
    free(eog);
    tokenizer_free(tok);
    model_free(model);
}
