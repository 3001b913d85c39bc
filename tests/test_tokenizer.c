/*
 * test_tokenizer.c — the byte-level BPE tokenizer: exact id parity with
 * Hugging Face tokenizers on the shared vocabulary fixtures (every string
 * of NAME.gguf.inp against NAME.gguf.out), decode(encode(s)) == s, the
 * streaming detokenizer never emitting a partial UTF-8 character, bytes
 * that are not UTF-8, load errors, the Unicode tables, two threads encoding
 * at once, and the real default model when it is cached.
 */
#include <pthread.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

/* ---- helpers ------------------------------------------------------------------ */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* Loads a tokenizer and closes the gguf at once (the tokenizer owns its data). */
static struct tokenizer *load_path(const char *path) {
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    if (gguf_open(path, &g, &err) != KVIK_OK) {
        test_fail(__FILE__, __LINE__, "open %s: %s", path, err.msg);
        return NULL;
    }
    struct tokenizer *tok = NULL;
    if (tokenizer_load(g, &tok, &err) != KVIK_OK)
        test_fail(__FILE__, __LINE__, "load %s: %s", path, err.msg);
    gguf_close(g);
    return tok;
}

/* A vocabulary fixture: its tokenizer and the test strings with their ids. */
#define MAX_CASES 256
struct fixture {
    struct tokenizer *tok;
    char *inp, *outp;           /* file contents; strings point into inp */
    int n;
    const char *str[MAX_CASES];
    size_t len[MAX_CASES];
    int32_t *ids[MAX_CASES];    /* expected */
    int64_t n_ids[MAX_CASES];
};

static void fixture_free(struct fixture *fx) {
    tokenizer_free(fx->tok);
    for (int i = 0; i < fx->n; i++) free(fx->ids[i]);
    free(fx->inp);
    free(fx->outp);
    memset(fx, 0, sizeof *fx);
}

/* false (test skipped) when the fixtures are absent. */
static bool fixture_load(struct fixture *fx, const char *name) {
    memset(fx, 0, sizeof *fx);
    const char *dir = test_env("KVIK_FIXTURES");
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s.gguf.inp", dir, name);
    size_t n_inp, n_out;
    fx->inp = read_file(path, &n_inp);
    snprintf(path, sizeof path, "%s/vocab/%s.gguf.out", dir, name);
    fx->outp = read_file(path, &n_out);
    if (!fx->inp || !fx->outp) {
        fixture_free(fx);
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return false;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = fx->inp, *end = fx->inp + n_inp;
    while (p < end && fx->n < MAX_CASES) {
        char *q = strstr(p, sep);
        if (!q) { /* a last string with no separator after it (gemma-4's file) */
            fx->str[fx->n] = p;
            fx->len[fx->n++] = (size_t)(end - p);
            break;
        }
        fx->str[fx->n] = p;
        fx->len[fx->n] = (size_t)(q - p);
        fx->n++;
        p = q + sizeof sep - 1;
    }
    char *line = fx->outp;
    for (int i = 0; i < fx->n; i++) {
        char *nl = strchr(line, '\n');
        if (!nl) {
            test_fail(__FILE__, __LINE__, "%s.out: %d lines for %d strings", name, i, fx->n);
            fixture_free(fx);
            return false;
        }
        *nl = 0;
        int64_t cnt = 0;
        for (char *c = line; *c; c++) cnt += (*c == ' ');
        fx->ids[i] = malloc((size_t)(cnt + 1) * sizeof(int32_t));
        char *c = line;
        while (*c) {
            char *e;
            long v = strtol(c, &e, 10);
            if (e == c) break;
            fx->ids[i][fx->n_ids[i]++] = (int32_t)v;
            c = e;
        }
        line = nl + 1;
    }
    if (*line) {
        int extra = 0;
        for (char *c = line; *c; c++) extra += *c == '\n';
        test_fail(__FILE__, __LINE__, "%s.out: %d more lines than the %d strings", name,
                  extra + (line[strlen(line) - 1] != '\n'), fx->n);
        fixture_free(fx);
        return false;
    }
    snprintf(path, sizeof path, "%s/vocab/%s.gguf", dir, name);
    fx->tok = load_path(path);
    if (!fx->tok) {
        fixture_free(fx);
        return false;
    }
    return true;
}

static int64_t encode_all(const struct tokenizer *tok, const char *s, size_t len, int32_t **ids) {
    int64_t n = tokenizer_encode(tok, s, len, false, false, NULL, 0);
    *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (n > 0) CHECK_EQ_INT(tokenizer_encode(tok, s, len, false, false, *ids, n), n);
    return n;
}

/* Exact parity on every string; returns the number that matched. */
static int run_parity(const char *name) {
    struct fixture fx;
    if (!fixture_load(&fx, name)) return -1;
    int pass = 0;
    for (int i = 0; i < fx.n; i++) {
        int32_t *ids;
        int64_t n = encode_all(fx.tok, fx.str[i], fx.len[i], &ids);
        bool ok = n == fx.n_ids[i] && (n == 0 || memcmp(ids, fx.ids[i], (size_t)n * 4) == 0);
        if (ok) {
            pass++;
        } else {
            char got[256] = "", want[256] = "";
            for (int64_t k = 0, o = 0; k < n && o < 200; k++)
                o += snprintf(got + o, sizeof got - (size_t)o, " %d", ids[k]);
            for (int64_t k = 0, o = 0; k < fx.n_ids[i] && o < 200; k++)
                o += snprintf(want + o, sizeof want - (size_t)o, " %d", fx.ids[i][k]);
            test_fail(__FILE__, __LINE__, "%s #%d \"%.40s\": got%s, want%s", name, i, fx.str[i],
                      got, want);
        }
        free(ids);
    }
    printf("    tokenizer parity %s: %d/%d\n", name, pass, fx.n);
    int n = fx.n;
    fixture_free(&fx);
    CHECK_EQ_INT(pass, n);
    return pass;
}

TEST(tokenizer_parity_starcoder) { run_parity("ggml-vocab-starcoder"); }
TEST(tokenizer_parity_refact) { run_parity("ggml-vocab-refact"); }
TEST(tokenizer_parity_gpt2) { run_parity("ggml-vocab-gpt-2"); }
TEST(tokenizer_parity_mpt) { run_parity("ggml-vocab-mpt"); }
TEST(tokenizer_parity_deepseek_coder) { run_parity("ggml-vocab-deepseek-coder"); }
TEST(tokenizer_parity_deepseek_llm) { run_parity("ggml-vocab-deepseek-llm"); }
TEST(tokenizer_parity_command_r) { run_parity("ggml-vocab-command-r"); }
TEST(tokenizer_parity_falcon) { run_parity("ggml-vocab-falcon"); }
TEST(tokenizer_parity_llama_bpe) { run_parity("ggml-vocab-llama-bpe"); }
TEST(tokenizer_parity_qwen2) { run_parity("ggml-vocab-qwen2"); }
TEST(tokenizer_parity_qwen35) { run_parity("ggml-vocab-qwen35"); }
TEST(tokenizer_parity_phi3) { run_parity("ggml-vocab-phi-3"); }
TEST(tokenizer_parity_gemma4) { run_parity("ggml-vocab-gemma-4"); }

/* ---- round trips and streaming ------------------------------------------------- */

/* True if s[0..n) is valid, complete UTF-8. */
static bool utf8_ok(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        struct ucp c = utf8_decode(u + i, n - i);
        if (c.cp & UCP_INVALID) return false;
        i += c.len;
    }
    return true;
}

/* Streams ids one at a time: every chunk must be whole UTF-8; returns the
 * concatenation's length in out. strip: the stream drops the leading space
 * (a vocabulary with a space prefix, decoded from the start). */
static size_t stream_decode(const struct tokenizer *tok, const int32_t *ids, int64_t n, char *out,
                            size_t cap, bool strip) {
    struct detok_stream st;
    detok_init(&st, tok, false);
    st.strip_space = strip;
    size_t chunk_cap = detok_min_cap(tok);
    char *chunk = malloc(chunk_cap);
    size_t o = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = detok_push(&st, ids[i], chunk, chunk_cap);
        CHECK(k >= 0);
        if (k < 0) break;
        CHECK_MSG(utf8_ok(chunk, (size_t)k), "token %lld: partial UTF-8 emitted", (long long)i);
        if (o + (size_t)k <= cap) memcpy(out + o, chunk, (size_t)k);
        o += (size_t)k;
    }
    int64_t k = detok_flush(&st, chunk, chunk_cap);
    CHECK(k >= 0);
    if (k > 0 && o + (size_t)k <= cap) memcpy(out + o, chunk, (size_t)k);
    o += k > 0 ? (size_t)k : 0;
    free(chunk);
    return o;
}

static void check_roundtrip_strip(const struct tokenizer *tok, const char *s, size_t len,
                                  bool strip) {
    int32_t *ids;
    int64_t n = encode_all(tok, s, len, &ids);
    char *buf = malloc(len * 3 + 16);
    int64_t m = tokenizer_decode(tok, ids, n, buf, len * 3 + 16, false);
    CHECK_MSG(m == (int64_t)len && memcmp(buf, s, len) == 0, "decode(encode(\"%.40s\")) differs", s);
    if (utf8_ok(s, len)) {
        size_t k = stream_decode(tok, ids, n, buf, len * 3 + 16, strip);
        CHECK_MSG(k == len && memcmp(buf, s, len) == 0, "streamed decode of \"%.40s\" differs", s);
    }
    free(buf);
    free(ids);
}

static void check_roundtrip(const struct tokenizer *tok, const char *s, size_t len) {
    check_roundtrip_strip(tok, s, len, false);
}

static const char *const k_extra[] = {
    "Hello, world!",
    "naïve café — 日本語のテキスト, 한국어, Ελληνικά, русский",
    "emoji: 😀👍🏽 👨‍👩‍👧‍👦 🇩🇪 ✨",
    "numbers ١٢٣ ۴۵۶ ½ Ⅻ 12345",
    "\t\n  \r\n   tabs and\u00a0nbsp\u3000ideographic space  ",
    "can't won't they're we've I'm you'll he'd 'S 'T",
};

TEST(tokenizer_roundtrip_and_stream) {
    struct fixture fx;
    if (!fixture_load(&fx, "ggml-vocab-starcoder")) return;
    for (int i = 0; i < fx.n; i++) check_roundtrip(fx.tok, fx.str[i], fx.len[i]);
    for (size_t i = 0; i < sizeof k_extra / sizeof k_extra[0]; i++)
        check_roundtrip(fx.tok, k_extra[i], strlen(k_extra[i]));
    fixture_free(&fx);
}

/* The same on the other vocabularies of the sdist with test strings;
 * phi-3's stream drops the space its prefix adds. */
TEST(tokenizer_roundtrip_families) {
    static const struct {
        const char *name;
        bool strip;
    } fams[] = {{"ggml-vocab-deepseek-llm", false}, {"ggml-vocab-command-r", false},
                {"ggml-vocab-falcon", false},       {"ggml-vocab-llama-bpe", false},
                {"ggml-vocab-qwen2", false},        {"ggml-vocab-qwen35", false},
                {"ggml-vocab-phi-3", true},         {"ggml-vocab-gemma-4", false}};
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        struct fixture fx;
        if (!fixture_load(&fx, fams[f].name)) return;
        for (int i = 0; i < fx.n; i++) check_roundtrip_strip(fx.tok, fx.str[i], fx.len[i], fams[f].strip);
        for (size_t i = 0; i < sizeof k_extra / sizeof k_extra[0]; i++)
            check_roundtrip_strip(fx.tok, k_extra[i], strlen(k_extra[i]), fams[f].strip);
        fixture_free(&fx);
    }
}

TEST(tokenizer_stream_holds_partial_utf8) {
    struct fixture fx;
    if (!fixture_load(&fx, "ggml-vocab-starcoder")) return;
    const struct tokenizer *tok = fx.tok;
    /* find the single-byte tokens of 😀 (F0 9F 98 80) and feed them one by one */
    const uint8_t emoji[4] = {0xF0, 0x9F, 0x98, 0x80};
    int32_t ids[4];
    for (int k = 0; k < 4; k++) {
        int64_t n = tokenizer_encode(tok, (const char *)emoji + k, 1, false, false, &ids[k], 1);
        CHECK_EQ_INT(n, 1);
    }
    struct detok_stream st;
    detok_init(&st, tok, false);
    size_t cap = detok_min_cap(tok);
    char *out = malloc(cap);
    for (int k = 0; k < 3; k++) CHECK_EQ_INT(detok_push(&st, ids[k], out, cap), 0);
    CHECK_EQ_INT(detok_push(&st, ids[3], out, cap), 4);
    CHECK(memcmp(out, emoji, 4) == 0);
    /* an incomplete sequence at the end flushes as U+FFFD */
    CHECK_EQ_INT(detok_push(&st, ids[0], out, cap), 0);
    CHECK_EQ_INT(detok_push(&st, ids[1], out, cap), 0);
    CHECK_EQ_INT(detok_flush(&st, out, cap), 3);
    CHECK(memcmp(out, "\xEF\xBF\xBD", 3) == 0);
    /* a broken sequence followed by ASCII: U+FFFD then the ASCII */
    int32_t a;
    CHECK_EQ_INT(tokenizer_encode(tok, "a", 1, false, false, &a, 1), 1);
    CHECK_EQ_INT(detok_push(&st, ids[0], out, cap), 0);
    CHECK_EQ_INT(detok_push(&st, a, out, cap), 4);
    CHECK(memcmp(out, "\xEF\xBF\xBD" "a", 4) == 0);
    /* a lone continuation byte */
    CHECK_EQ_INT(detok_push(&st, ids[2], out, cap), 3);
    CHECK_EQ_INT(detok_flush(&st, out, cap), 0);
    /* too small a buffer is refused */
    CHECK(detok_push(&st, a, out, 2) < 0);
    free(out);
    fixture_free(&fx);
}

/* The gpt-2 vocabulary has a token for every byte, so any bytes round-trip;
 * starcoder's lacks those that never occur in UTF-8 (0xC0, 0xF5.., ...): they
 * encode as its unknown token, and nothing crashes. */
TEST(tokenizer_invalid_utf8_is_bytes) {
    struct fixture fx;
    if (!fixture_load(&fx, "ggml-vocab-starcoder")) return;
    int32_t ids[16];
    int64_t n = tokenizer_encode(fx.tok, "a\xff", 2, false, false, ids, 16);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(ids[1], tokenizer_unk(fx.tok));
    fixture_free(&fx);
    if (!fixture_load(&fx, "ggml-vocab-gpt-2")) return;
    static const char *const bad[] = {"\xff\xfe abc", "ab\xc3", "\xe2\x82", "\xed\xa0\x80 x",
                                      "\xc0\xaf", "x\x80\x80\x80y", "\xf4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) check_roundtrip(fx.tok, bad[i], strlen(bad[i]));
    uint64_t rng = 42;
    char buf[64];
    for (int it = 0; it < 2000; it++) {
        size_t len = (size_t)(test_rand_u64(&rng) % sizeof buf);
        for (size_t k = 0; k < len; k++) buf[k] = (char)test_rand_u64(&rng);
        check_roundtrip(fx.tok, buf, len);
        if (test_failed()) break;
    }
    fixture_free(&fx);
}

TEST(tokenizer_encode_buffer_and_specials) {
    struct fixture fx;
    if (!fixture_load(&fx, "ggml-vocab-starcoder")) return;
    const struct tokenizer *tok = fx.tok;
    const char *s = "Hello world, this is a test";
    int64_t n = tokenizer_encode(tok, s, strlen(s), false, false, NULL, 0);
    CHECK(n > 3);
    int32_t few[3] = {-7, -7, -7}, all[64];
    CHECK_EQ_INT(tokenizer_encode(tok, s, strlen(s), false, false, few, 2), n);
    CHECK_EQ_INT(few[2], -7);
    CHECK_EQ_INT(tokenizer_encode(tok, s, strlen(s), false, false, all, 64), n);
    CHECK(few[0] == all[0] && few[1] == all[1]);
    CHECK_EQ_INT(tokenizer_encode(tok, "", 0, false, false, all, 64), 0);
    CHECK(tokenizer_encode(tok, s, 3, false, false, NULL, 5) < 0);
    /* control tokens: text unless parse_special */
    int32_t eot = tokenizer_find(tok, "<|endoftext|>", 13);
    REQUIRE(eot >= 0);
    CHECK(tokenizer_is_eog(tok, eot));
    CHECK_EQ_INT(tokenizer_token_type(tok, eot), TOKEN_TYPE_CONTROL);
    const char *t = "a<|endoftext|>b";
    n = tokenizer_encode(tok, t, strlen(t), false, true, all, 64);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(all[1], eot);
    n = tokenizer_encode(tok, t, strlen(t), false, false, all, 64);
    CHECK(n > 3);
    for (int64_t i = 0; i < n && i < 64; i++) CHECK(all[i] != eot);
    char piece[64];
    CHECK_EQ_INT(tokenizer_decode_piece(tok, eot, piece, sizeof piece, false), 0);
    CHECK_EQ_INT(tokenizer_decode_piece(tok, eot, piece, sizeof piece, true), 13);
    CHECK(memcmp(piece, "<|endoftext|>", 13) == 0);
    CHECK(tokenizer_decode_piece(tok, -1, piece, sizeof piece, true) < 0);
    CHECK(tokenizer_decode_piece(tok, tokenizer_n_vocab(tok), piece, sizeof piece, true) < 0);
    CHECK(tokenizer_token_text(tok, -1) == NULL);
    CHECK_STR(tokenizer_pre_name(tok), "starcoder");
    fixture_free(&fx);
}

/* ---- load errors ----------------------------------------------------------------- */

static kvik_status load_mem(const char *model, const char *pre, struct kvik_err *err) {
    struct gguf_writer *w = gguf_writer_new();
    const char *toks[] = {"a", "b", "ab"}, *merges[] = {"a b"};
    gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    if (pre) gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    kvik_status st = gguf_writer_write_memory(w, &buf, &size, err);
    if (st == KVIK_OK) st = gguf_open_memory(buf, size, &g, err);
    if (st == KVIK_OK) st = tokenizer_load(g, &tok, err);
    if (tok) {
        int32_t ids[4];
        CHECK_EQ_INT(tokenizer_encode(tok, "ab", 2, true, false, ids, 4), 1);
        CHECK_EQ_INT(ids[0], 2);
    }
    tokenizer_free(tok);
    gguf_close(g);
    free(buf);
    gguf_writer_free(w);
    return st;
}

TEST(tokenizer_load_errors) {
    struct kvik_err err = {0};
    CHECK_EQ_INT(load_mem("gpt2", NULL, &err), KVIK_OK);
    CHECK_EQ_INT(load_mem("gpt2", "smollm", &err), KVIK_OK);
    CHECK_EQ_INT(load_mem("gemma4", NULL, &err), KVIK_OK);
    CHECK_EQ_INT(load_mem("rwkv", NULL, &err), KVIK_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "rwkv") != NULL);
    CHECK_EQ_INT(load_mem("gpt2", "qwen2-made-up", &err), KVIK_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "qwen2-made-up") != NULL);
}

/* ---- ignore_merges ------------------------------------------------------------------ */

/* A byte-level vocabulary from tokens, their types and merges, loaded with
 * tokenizer.ggml.pre = pre; NULL after reporting a failure. */
static struct tokenizer *tiny_bpe(const char *pre, const char *const *toks, const int32_t *types,
                                  uint64_t n_tok, const char *const *merges, uint64_t n_merges) {
    struct kvik_err err = {0};
    struct gguf_writer *w = gguf_writer_new();
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    kvik_status st = w ? KVIK_OK : KVIK_ERR_NOMEM;
    if (st == KVIK_OK) st = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (st == KVIK_OK) st = gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (st == KVIK_OK) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, n_tok);
    if (st == KVIK_OK)
        st = gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n_tok);
    if (st == KVIK_OK) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, n_merges);
    if (st == KVIK_OK) st = gguf_writer_write_memory(w, &buf, &size, &err);
    if (st == KVIK_OK) st = gguf_open_memory(buf, size, &g, &err);
    if (st == KVIK_OK) st = tokenizer_load(g, &tok, &err);
    if (st != KVIK_OK) test_fail(__FILE__, __LINE__, "tiny vocabulary (%s): %d %s", pre, st, err.msg);
    gguf_close(g);
    free(buf);
    gguf_writer_free(w);
    return tok;
}

/* ids of text (parse_special as given) as a string "3 4 5", for CHECK_STR */
static const char *ids_of(const struct tokenizer *tok, const char *text, bool parse_special) {
    static char out[256];
    int32_t ids[32];
    int64_t n = tokenizer_encode(tok, text, strlen(text), false, parse_special, ids, 32);
    size_t o = 0;
    out[0] = 0;
    for (int64_t i = 0; i < n && i < 32 && o < sizeof out - 16; i++)
        o += (size_t)snprintf(out + o, sizeof out - o, i ? " %d" : "%d", ids[i]);
    if (n < 0) snprintf(out, sizeof out, "error %lld", (long long)n);
    return out;
}

/*
 * A word that is a token whole but that the merges do not build: "abc" is
 * a token, yet the only merge is "a b", so BPE gives "ab" "c". With
 * ignore_merges (llama3, tekken, ...) the word is the token "abc"; " abc"
 * is spelled "Ġabc" in the byte-level alphabet and is looked up that way.
 * A control token's text ("abcd") is not taken from plain text.
 */
TEST(tokenizer_ignore_merges) {
    static const char *const toks[] = {"a", "b", "c", "d", "\xc4\xa0", "ab", "abc",
                                       "\xc4\xa0" "abc", "abcd", "\xc4\xa0" "a"};
    enum { A, B, C, D, SP, AB, ABC, SP_ABC, ABCD, SP_A };
    static const int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 1, TOKEN_TYPE_CONTROL, 1};
    static const char *const merges[] = {"a b", "\xc4\xa0 a"};
    struct tokenizer *plain = tiny_bpe("qwen2", toks, types, 10, merges, 2);
    struct tokenizer *whole = tiny_bpe("llama3", toks, types, 10, merges, 2);
    struct tokenizer *tekken = tiny_bpe("tekken", toks, types, 10, merges, 2);
    if (!plain || !whole || !tekken) goto done;
    char want[64];
    for (int cache = 0; cache < 2; cache++) {
        bool was = tokenizer_cache_enabled();
        tokenizer_cache_set_enabled(cache == 1);
        for (int rep = 0; rep < 2; rep++) { /* the second time from the word cache */
            snprintf(want, sizeof want, "%d %d", AB, C);
            CHECK_STR(ids_of(plain, "abc", false), want);
            snprintf(want, sizeof want, "%d", ABC);
            CHECK_STR(ids_of(whole, "abc", false), want);
            CHECK_STR(ids_of(tekken, "abc", false), want);
            /* " abc": "a b" (rank 0) goes before "Ġ a" (rank 1), leaving Ġ ab c */
            snprintf(want, sizeof want, "%d %d %d", SP, AB, C);
            CHECK_STR(ids_of(plain, " abc", false), want);
            snprintf(want, sizeof want, "%d", SP_ABC);
            CHECK_STR(ids_of(whole, " abc", false), want);
            /* not a token whole: merges as usual */
            snprintf(want, sizeof want, "%d %d %d", SP_A, A, C);
            CHECK_STR(ids_of(whole, " aac", false), want);
            snprintf(want, sizeof want, "%d %d %d", AB, C, A);
            CHECK_STR(ids_of(whole, "abca", false), want);
            /* the control token "abcd" is text only with parse_special */
            snprintf(want, sizeof want, "%d %d %d", AB, C, D);
            CHECK_STR(ids_of(whole, "abcd", false), want);
            snprintf(want, sizeof want, "%d", ABCD);
            CHECK_STR(ids_of(whole, "abcd", true), want);
        }
        tokenizer_cache_set_enabled(was);
    }
done:
    tokenizer_free(plain);
    tokenizer_free(whole);
    tokenizer_free(tekken);
}

/* ---- gemma4: SentencePiece text, merges by rank ---------------------------------- */

/*
 * A "gemma4" vocabulary merges by the rank of tokenizer.ggml.merges, not by
 * score: "b c" (rank 0) goes before "a b", so "abc" is "a" "bc" though "ab"
 * is a token and leftmost. Spaces are "▁" with no prefix (add_space_prefix
 * absent), a character that is no token falls back to its byte tokens, and
 * decoding gives the text back.
 */
TEST(tokenizer_gemma4_ranks) {
    static const char *const toks[] = {"<unk>", "a", "b", "c", "ab", "bc", "\xe2\x96\x81",
                                       ("\xe2\x96\x81" "a"), "<0xC3>", "<0xA9>"};
    enum { UNK, A, B, C, AB, BC, SP, SP_A, XC3, XA9 };
    static const int32_t types[] = {TOKEN_TYPE_UNKNOWN, 1, 1, 1, 1, 1, 1, 1, TOKEN_TYPE_BYTE,
                                    TOKEN_TYPE_BYTE};
    static const char *const merges[] = {"b c", "a b", "\xe2\x96\x81 a"};
    struct kvik_err err = {0};
    struct gguf_writer *w = gguf_writer_new();
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    kvik_status st = w ? KVIK_OK : KVIK_ERR_NOMEM;
    if (st == KVIK_OK) st = gguf_writer_set_str(w, "tokenizer.ggml.model", "gemma4");
    if (st == KVIK_OK) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 10);
    if (st == KVIK_OK)
        st = gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 10);
    if (st == KVIK_OK) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 3);
    if (st == KVIK_OK) st = gguf_writer_write_memory(w, &buf, &size, &err);
    if (st == KVIK_OK) st = gguf_open_memory(buf, size, &g, &err);
    if (st == KVIK_OK) st = tokenizer_load(g, &tok, &err);
    CHECK_MSG(st == KVIK_OK, "gemma4 vocabulary: %d %s", st, err.msg);
    if (tok) {
        char want[64];
        snprintf(want, sizeof want, "%d %d", A, BC);
        CHECK_STR(ids_of(tok, "abc", false), want);
        snprintf(want, sizeof want, "%d %d", AB, A);
        CHECK_STR(ids_of(tok, "aba", false), want);
        snprintf(want, sizeof want, "%d %d %d %d", SP_A, SP, XC3, XA9);
        CHECK_STR(ids_of(tok, " a \xc3\xa9", false), want);
        int32_t ids[8] = {SP_A, SP, XC3, XA9, B};
        char text[32];
        CHECK_EQ_INT(tokenizer_decode(tok, ids, 5, text, sizeof text, false), 6);
        CHECK(memcmp(text, " a \xc3\xa9" "b", 6) == 0);
    }
    tokenizer_free(tok);
    gguf_close(g);
    free(buf);
    gguf_writer_free(w);

    /* without merges it is not a gemma4 vocabulary */
    w = gguf_writer_new();
    buf = NULL;
    g = NULL;
    tok = NULL;
    st = gguf_writer_set_str(w, "tokenizer.ggml.model", "gemma4");
    if (st == KVIK_OK) st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 10);
    if (st == KVIK_OK) st = gguf_writer_write_memory(w, &buf, &size, &err);
    if (st == KVIK_OK) st = gguf_open_memory(buf, size, &g, &err);
    CHECK_EQ_INT(st, KVIK_OK);
    if (st == KVIK_OK) {
        CHECK_EQ_INT(tokenizer_load(g, &tok, &err), KVIK_ERR_FORMAT);
        CHECK(strstr(err.msg, "merges") != NULL);
    }
    tokenizer_free(tok);
    gguf_close(g);
    free(buf);
    gguf_writer_free(w);
}

/* ---- special-token text ----------------------------------------------------------- */

/* Counts how many of text's ids (parse_special as given) are id. */
static int count_id(const struct tokenizer *tok, const char *text, bool parse_special, int32_t id) {
    int32_t ids[256];
    int64_t n = tokenizer_encode(tok, text, strlen(text), false, parse_special, ids, 256);
    int c = 0;
    for (int64_t i = 0; i < n && i < 256; i++) c += ids[i] == id;
    return n < 0 ? -1 : c;
}

/* Control and unknown tokens' texts ("<unk>", "<s>", "</s>",
 * "<|endoftext|>") are plain text unless parse_special is on; the unknown
 * token itself ("<unk>", type UNKNOWN) is matched like a control token. */
TEST(tokenizer_special_text_is_plain_text) {
    static const char *const names[] = {"ggml-vocab-llama-spm", "ggml-vocab-gpt-2",
                                        "ggml-vocab-starcoder", "ggml-vocab-bert-bge"};
    static const char *const texts[] = {"<unk>", "<s>", "</s>", "<|endoftext|>", "[UNK]",
                                        "[CLS]", "<fim_prefix>", "<pad>"};
    for (size_t f = 0; f < sizeof names / sizeof *names; f++) {
        struct fixture fx;
        if (!fixture_load(&fx, names[f])) return;
        int seen = 0;
        for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
            int32_t id = tokenizer_find(fx.tok, texts[k], strlen(texts[k]));
            if (id < 0) continue;
            int type = tokenizer_token_type(fx.tok, id);
            if (type != TOKEN_TYPE_CONTROL && type != TOKEN_TYPE_UNKNOWN) continue;
            seen++;
            char text[128];
            snprintf(text, sizeof text, "a%s b %s\n%s%s", texts[k], texts[k], texts[k], texts[k]);
            CHECK_MSG(count_id(fx.tok, text, false, id) == 0, "%s: %s read as its token", names[f],
                      texts[k]);
            CHECK_MSG(count_id(fx.tok, text, true, id) == 4, "%s: %s not matched with parse_special",
                      names[f], texts[k]);
        }
        CHECK_MSG(seen > 0, "%s: none of the special texts is a special token", names[f]);
        fixture_free(&fx);
    }
}

/* ---- Unicode tables -------------------------------------------------------------- */

TEST(tokenizer_unicode_tables) {
    CHECK_EQ_INT(ucat('A'), UCAT_LETTER);
    CHECK_EQ_INT(ucat('7'), UCAT_NUMBER);
    CHECK_EQ_INT(ucat(' '), UCAT_SEPARATOR | UCAT_WHITESPACE);
    CHECK_EQ_INT(ucat('\n'), UCAT_OTHER | UCAT_WHITESPACE);
    CHECK_EQ_INT(ucat(0x85), UCAT_OTHER | UCAT_WHITESPACE);
    CHECK_EQ_INT(ucat(0x1F), UCAT_OTHER);
    CHECK_EQ_INT(ucat(0xE9), UCAT_LETTER);
    CHECK_EQ_INT(ucat(0x4E00), UCAT_LETTER);   /* CJK range (First/Last pair) */
    CHECK_EQ_INT(ucat(0xAC01), UCAT_LETTER);   /* Hangul syllable range */
    CHECK_EQ_INT(ucat(0x0661), UCAT_NUMBER);   /* Arabic-Indic one */
    CHECK_EQ_INT(ucat(0x2167), UCAT_NUMBER);   /* Roman numeral eight (Nl) */
    CHECK_EQ_INT(ucat(0x0301), UCAT_MARK);
    CHECK_EQ_INT(ucat(0x3000), UCAT_SEPARATOR | UCAT_WHITESPACE);
    CHECK_EQ_INT(ucat(0x1F600), UCAT_SYMBOL);
    CHECK_EQ_INT(ucat(0x00BF), UCAT_PUNCT);
    CHECK_EQ_INT(ucat(0x10FFFF), UCAT_OTHER);
    CHECK_EQ_INT(ucat(0x110000), UCAT_OTHER);
    for (uint32_t c = 0; c < 128; c++) CHECK_EQ_INT(ucat_ascii[c], ucat_slow(c));
    CHECK(strcmp(ucd_version, "15.0.0") >= 0);
}

/* ---- threads ---------------------------------------------------------------------- */

struct thread_job {
    struct fixture *fx;
    int64_t mismatches;
};

static void *encode_thread(void *arg) {
    struct thread_job *job = arg;
    for (int rep = 0; rep < 5; rep++) {
        for (int i = 0; i < job->fx->n; i++) {
            int32_t ids[4096];
            int64_t n = tokenizer_encode(job->fx->tok, job->fx->str[i], job->fx->len[i], false,
                                         false, ids, 4096);
            if (n != job->fx->n_ids[i] || (n > 0 && memcmp(ids, job->fx->ids[i], (size_t)n * 4)))
                job->mismatches++;
        }
    }
    return NULL;
}

/* Every fixture, encoded by as many threads as the machine has (at least
 * four) at once, five times each: every thread must get the fixture's ids
 * (the word caches are per thread, the tokenizer shared). */
static void all_threads(const char *const *names, size_t n_names) {
    enum { MAX_THREADS = 64 };
    int nt = cpu_count() > 4 ? cpu_count() : 4;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    for (size_t f = 0; f < n_names; f++) {
        struct fixture fx;
        if (!fixture_load(&fx, names[f])) return;
        pthread_t th[MAX_THREADS];
        struct thread_job jobs[MAX_THREADS];
        int started = 0;
        for (int i = 0; i < nt; i++) {
            jobs[i] = (struct thread_job){&fx, 0};
            if (pthread_create(&th[i], NULL, encode_thread, &jobs[i]) != 0) break;
            started++;
        }
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        CHECK_EQ_INT(started, nt);
        for (int i = 0; i < started; i++)
            CHECK_MSG(jobs[i].mismatches == 0, "%s: thread %d of %d got %lld strings wrong", names[f], i, nt,
                      (long long)jobs[i].mismatches);
        fixture_free(&fx);
    }
}

TEST(tokenizer_fixtures_all_threads) {
    static const char *const names[] = {"ggml-vocab-gpt-2", "ggml-vocab-starcoder", "ggml-vocab-refact",
                                        "ggml-vocab-mpt", "ggml-vocab-deepseek-coder", "ggml-vocab-llama-spm",
                                        "ggml-vocab-bert-bge"};
    all_threads(names, sizeof names / sizeof names[0]);
}

/* The same on the two newest families (not among the offline fixtures). */
TEST(tokenizer_fixtures_all_threads_newest) {
    static const char *const names[] = {"ggml-vocab-qwen35", "ggml-vocab-gemma-4"};
    all_threads(names, sizeof names / sizeof names[0]);
}

/* ---- the default model ---------------------------------------------------------- */

TEST(tokenizer_default_model) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct tokenizer *tok = load_path(path);
    REQUIRE(tok);
    CHECK_EQ_INT(tokenizer_n_vocab(tok), 49152);
    CHECK_STR(tokenizer_pre_name(tok), "smollm");
    check_roundtrip(tok, "Hello, world!", 13);
    int32_t ids[64];
    int64_t n = tokenizer_encode(tok, "Hello, world!", 13, true, false, ids, 64);
    CHECK(n >= 3 && n <= 5);
    int32_t im_start = tokenizer_find(tok, "<|im_start|>", 12);
    int32_t im_end = tokenizer_find(tok, "<|im_end|>", 10);
    CHECK(im_start >= 0 && im_end >= 0);
    CHECK(tokenizer_is_eog(tok, im_end));
    CHECK(!tokenizer_is_eog(tok, im_start));
    CHECK(tokenizer_is_eog(tok, tokenizer_eos(tok)));
    const char *chat = "<|im_start|>user\nHi<|im_end|>\n";
    n = tokenizer_encode(tok, chat, strlen(chat), false, true, ids, 64);
    REQUIRE(n > 3 && n < 64);
    CHECK_EQ_INT(ids[0], im_start);
    CHECK_EQ_INT(ids[n - 2], im_end);
    char out[128];
    int64_t m = tokenizer_decode(tok, ids, n, out, sizeof out, true);
    CHECK(m == (int64_t)strlen(chat) && memcmp(out, chat, (size_t)m) == 0);
    tokenizer_free(tok);
}
