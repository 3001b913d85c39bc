/*
 * test_tokenizer_spm.c — the SentencePiece BPE ("llama") and WordPiece
 * ("bert") vocabularies: exact id parity with Hugging Face on the shared
 * fixtures (ggml-vocab-llama-spm, ggml-vocab-bert-bge), 3000 random strings
 * checked against Hugging Face ids and decoded text (hashes in
 * tests/data/tok_spm_bert, made by scripts/gen_tokenizer_spm_bert_ref.py),
 * BERT's normalizer on every code point, decoding round trips, the
 * streaming detokenizer on byte-fallback sequences, merges by score and
 * byte fallback on a small hand-made vocabulary, malformed metadata, the
 * Unicode normalization tables, and long inputs.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_int.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_norm.h"

/* The fixture vocabulary NAME.gguf; NULL (test skipped) without fixtures. */
static struct tokenizer *load_vocab(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s.gguf", test_env("KVIK_FIXTURES"), name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return NULL;
    }
    fclose(f);
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    if (gguf_open(path, &g, &err) != KVIK_OK || tokenizer_load(g, &tok, &err) != KVIK_OK)
        test_fail(__FILE__, __LINE__, "load %s: %s", path, err.msg);
    gguf_close(g);
    return tok;
}

/* All ids of s (malloc'ed into *ids); the count. */
static int64_t encode_all(const struct tokenizer *tok, const char *s, size_t len, bool add_special,
                          bool parse_special, int32_t **ids) {
    int64_t n = tokenizer_encode(tok, s, len, add_special, parse_special, NULL, 0);
    *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (n > 0) CHECK_EQ_INT(tokenizer_encode(tok, s, len, add_special, parse_special, *ids, n), n);
    return n;
}

/* The decoded text of ids (malloc'ed, NUL-terminated); its length in *len. */
static char *decode_all(const struct tokenizer *tok, const int32_t *ids, int64_t n, bool special,
                        size_t *len) {
    int64_t m = tokenizer_decode(tok, ids, n, NULL, 0, special);
    CHECK(m >= 0);
    if (m < 0) m = 0;
    char *s = malloc((size_t)m + 1);
    CHECK_EQ_INT(tokenizer_decode(tok, ids, n, s, (size_t)m + 1, special), m);
    s[m] = 0;
    *len = (size_t)m;
    return s;
}

static bool utf8_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        struct ucp c = utf8_decode((const uint8_t *)s + i, n - i);
        if (c.cp & UCP_INVALID) return false;
        i += c.len;
    }
    return true;
}

/* Streams ids (strip_space set as given) checking each chunk is whole
 * UTF-8; the text (malloc'ed) and its length. */
static char *stream_all(const struct tokenizer *tok, const int32_t *ids, int64_t n, bool strip,
                        size_t *len) {
    struct detok_stream st;
    detok_init(&st, tok, false);
    st.strip_space = strip;
    size_t cap = detok_min_cap(tok), o = 0, total = cap * (size_t)(n + 1);
    char *chunk = malloc(cap), *out = malloc(total + 1);
    for (int64_t i = 0; i <= n; i++) {
        int64_t k = i < n ? detok_push(&st, ids[i], chunk, cap) : detok_flush(&st, chunk, cap);
        CHECK(k >= 0);
        if (k < 0) break;
        CHECK_MSG(utf8_ok(chunk, (size_t)k), "token %lld: partial UTF-8 emitted", (long long)i);
        memcpy(out + o, chunk, (size_t)k);
        o += (size_t)k;
    }
    out[o] = 0;
    free(chunk);
    *len = o;
    return out;
}

static uint32_t fnv32(const void *p, size_t n) {
    const uint8_t *s = p;
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x01000193u;
    return h;
}

static uint32_t ids_hash(const int32_t *ids, int64_t n) {
    uint32_t h = 0x811C9DC5u;
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int k = 0; k < 4; k++) h = (h ^ ((v >> (8 * k)) & 0xFF)) * 0x01000193u;
    }
    return h;
}

/* ---- fixture parity ------------------------------------------------------------- */

static void run_parity(const char *name) {
    char path[4096];
    const char *dir = test_env("KVIK_FIXTURES");
    size_t n_inp, n_out;
    snprintf(path, sizeof path, "%s/vocab/%s.gguf.inp", dir, name);
    char *inp = test_slurp(path, &n_inp);
    snprintf(path, sizeof path, "%s/vocab/%s.gguf.out", dir, name);
    char *outp = test_slurp(path, &n_out);
    struct tokenizer *tok = inp && outp ? load_vocab(name) : NULL;
    if (!inp || !outp) test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
    if (!tok) {
        free(inp);
        free(outp);
        return;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = inp, *line = outp;
    int n = 0, pass = 0;
    for (char *q; (q = strstr(p, sep)) != NULL; p = q + sizeof sep - 1, n++) {
        char *nl = strchr(line, '\n');
        REQUIRE(nl);
        *nl = 0;
        int32_t want[1024];
        int64_t n_want = 0;
        for (char *c = line, *e; n_want < 1024; c = e) {
            long v = strtol(c, &e, 10);
            if (e == c) break;
            want[n_want++] = (int32_t)v;
        }
        int32_t *ids;
        int64_t got = encode_all(tok, p, (size_t)(q - p), false, false, &ids);
        if (got == n_want && (got == 0 || memcmp(ids, want, (size_t)got * 4) == 0)) {
            pass++;
        } else {
            char g[256] = "";
            for (int64_t k = 0, o = 0; k < got && o < 200; k++)
                o += snprintf(g + o, sizeof g - (size_t)o, " %d", ids[k]);
            test_fail(__FILE__, __LINE__, "%s #%d \"%.30s\": got%s, want%.200s", name, n, p, g, line);
        }
        free(ids);
        line = nl + 1;
    }
    printf("    tokenizer parity %s: %d/%d\n", name, pass, n);
    CHECK(n >= 40);
    CHECK_EQ_INT(pass, n);
    tokenizer_free(tok);
    free(inp);
    free(outp);
}

TEST(tokenizer_spm_parity_llama) { run_parity("ggml-vocab-llama-spm"); }
TEST(tokenizer_wpm_parity_bert) { run_parity("ggml-vocab-bert-bge"); }

/* ---- random strings against Hugging Face ----------------------------------------- */

#define N_RANDOM 3000

struct strings {
    char *buf;
    int n;
    const char *s[N_RANDOM];
    size_t len[N_RANDOM];
};

static bool strings_load(struct strings *ss) {
    char path[4096];
    size_t n;
    snprintf(path, sizeof path, "%s/tok_spm_bert/strings.txt", test_env("KVIK_TEST_DATA"));
    memset(ss, 0, sizeof *ss);
    ss->buf = test_slurp(path, &n);
    if (!ss->buf) {
        test_fail(__FILE__, __LINE__, "%s missing (scripts/gen_tokenizer_spm_bert_ref.py)", path);
        return false;
    }
    char *p = ss->buf, *end = ss->buf + n;
    while (p < end && ss->n < N_RANDOM) {
        char *e;
        unsigned long len = strtoul(p, &e, 10);
        if (e == p || *e != ' ' || (size_t)(end - e - 1) < len + 1) break;
        ss->s[ss->n] = e + 1;
        ss->len[ss->n++] = len;
        p = e + 1 + len + 1;
    }
    CHECK_EQ_INT(ss->n, N_RANDOM);
    return ss->n == N_RANDOM;
}

/* The reference lines of NAME.ref into n/ids/dec (n = -1: no reference). */
static bool ref_load(const char *name, int64_t *n, uint32_t *ids, uint32_t *dec) {
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/tok_spm_bert/%s.ref", test_env("KVIK_TEST_DATA"), name);
    char *buf = test_slurp(path, &len);
    if (!buf) {
        test_fail(__FILE__, __LINE__, "%s missing", path);
        return false;
    }
    int k = 0;
    for (char *line = buf; *line && k < N_RANDOM;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (line[0] == '-') {
            n[k++] = -1;
        } else if (line[0] != '#') {
            long long c;
            unsigned a, b;
            if (sscanf(line, "%lld %x %x", &c, &a, &b) == 3) {
                n[k] = c;
                ids[k] = a;
                dec[k++] = b;
            }
        }
        if (!nl) break;
        line = nl + 1;
    }
    free(buf);
    CHECK_EQ_INT(k, N_RANDOM);
    return k == N_RANDOM;
}

/* Removes the spaces of s[0..n) in place; the new length. */
static size_t squeeze(char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ') s[o++] = s[i];
    return o;
}

static void run_random(const char *vocab, const char *ref, bool bert) {
    struct tokenizer *tok = load_vocab(vocab);
    if (!tok) return;
    static struct strings ss;
    static int64_t n_ref[N_RANDOM];
    static uint32_t h_ids[N_RANDOM], h_dec[N_RANDOM];
    if (!strings_load(&ss) || !ref_load(ref, n_ref, h_ids, h_dec)) {
        free(ss.buf);
        tokenizer_free(tok);
        return;
    }
    int checked = 0, ids_ok = 0, dec_ok = 0, reported = 0;
    for (int i = 0; i < ss.n; i++) {
        if (n_ref[i] < 0) continue;
        checked++;
        int32_t *ids;
        int64_t n = encode_all(tok, ss.s[i], ss.len[i], false, false, &ids);
        bool same = n == n_ref[i] && ids_hash(ids, n) == h_ids[i];
        ids_ok += same;
        size_t dlen, slen;
        char *d = decode_all(tok, ids, n, false, &dlen);
        bool dsame = fnv32(d, dlen) == h_dec[i];
        dec_ok += dsame;
        if ((!same || !dsame) && reported++ < 8) {
            char g[160] = "";
            for (int64_t k = 0, o = 0; k < n && o < 120; k++)
                o += snprintf(g + o, sizeof g - (size_t)o, " %d", ids[k]);
            test_fail(__FILE__, __LINE__,
                      "%s string %d (--show %d) \"%.40s\": ids%s (%lld, want %lld)%s; decoded \"%.60s\"%s",
                      vocab, i, i, ss.s[i], g, (long long)n, (long long)n_ref[i],
                      same ? " match" : " differ", d, dsame ? "" : " differs");
        }
        /* the stream from the start of the text gives the same text (bert:
         * the same apart from the clean-up, which only takes spaces out) */
        char *st = stream_all(tok, ids, n, true, &slen);
        if (bert) {
            slen = squeeze(st, slen);
            dlen = squeeze(d, dlen);
        }
        CHECK_MSG(slen == dlen && memcmp(st, d, dlen) == 0, "%s string %d: stream != decode", vocab, i);
        /* llama round trip: decode(encode(s)) == s unless s has a "▁" */
        if (!bert && !memmem(ss.s[i], ss.len[i], "\xE2\x96\x81", 3))
            CHECK_MSG(dlen == ss.len[i] && memcmp(d, ss.s[i], dlen) == 0,
                      "%s string %d: decode(encode(s)) != s", vocab, i);
        free(st);
        free(d);
        free(ids);
    }
    printf("    %s vs Hugging Face: ids %d/%d, decoded text %d/%d\n", vocab, ids_ok, checked, dec_ok,
           checked);
    CHECK(checked >= (bert ? 2500 : N_RANDOM));
    CHECK_EQ_INT(ids_ok, checked);
    CHECK_EQ_INT(dec_ok, checked);
    free(ss.buf);
    tokenizer_free(tok);
}

TEST(tokenizer_spm_random_vs_hf) { run_random("ggml-vocab-llama-spm", "llama-spm", false); }
TEST(tokenizer_wpm_random_vs_hf) { run_random("ggml-vocab-bert-bge", "bert-bge", true); }

/* BERT's normalizer and pre-tokenizer split on every code point against
 * Hugging Face's, per block of 1024 (bert-unicode.ref). */
TEST(tokenizer_wpm_every_code_point) {
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/tok_spm_bert/bert-unicode.ref", test_env("KVIK_TEST_DATA"));
    char *buf = test_slurp(path, &len);
    REQUIRE(buf);
    uint8_t *skip = calloc(0x110000, 1);
    int blocks = 0, good = 0, reported = 0;
    uint8_t *data = malloc(1024 * 64);
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        unsigned a, b;
        if (sscanf(line, "x %x %x", &a, &b) == 2) {
            for (uint32_t c = a; c <= b && c < 0x110000; c++) skip[c] = 1;
        } else if (sscanf(line, "b %x %x", &a, &b) == 2 && a < 0x110000) {
            size_t o = 0;
            for (uint32_t c = a; c < a + 1024; c++) {
                if ((c >= 0xD800 && c <= 0xDFFF) || skip[c]) continue;
                uint8_t u[4];
                int k = utf8_encode(c, u);
                int64_t m = wpm_normalize(u, (size_t)k, (char *)data + o, 60);
                CHECK(m >= 0 && m <= 58);
                o += (size_t)m;
                data[o++] = 0xFF;
                data[o++] = (ucat(c) & UCAT_WHITESPACE) ? 2 : wpm_is_punct(c) ? 3 : 1;
            }
            blocks++;
            if (fnv32(data, o) == b) good++;
            else if (reported++ < 8) test_fail(__FILE__, __LINE__, "code points %04X..%04X differ", a, a + 1023);
        }
        if (!nl) break;
        line = nl + 1;
    }
    printf("    BERT normalizer vs Hugging Face: %d/%d blocks of 1024 code points\n", good, blocks);
    CHECK_EQ_INT(blocks, 0x110000 / 1024);
    CHECK_EQ_INT(good, blocks);
    free(data);
    free(skip);
    free(buf);
}

/* ---- decoding, streaming, specials on the fixtures -------------------------------- */

TEST(tokenizer_spm_stream_byte_fallback) {
    struct tokenizer *tok = load_vocab("ggml-vocab-llama-spm");
    if (!tok) return;
    /* 🦙 has no piece: four byte tokens after "▁" */
    const char *s = "🦙";
    int32_t ids[8];
    REQUIRE(tokenizer_encode(tok, s, strlen(s), false, false, ids, 8) == 5);
    CHECK_EQ_INT(ids[0], 29871);
    for (int k = 0; k < 4; k++) CHECK_EQ_INT(tokenizer_token_type(tok, ids[1 + k]), TOKEN_TYPE_BYTE);
    char piece[16];
    CHECK_EQ_INT(tokenizer_decode_piece(tok, ids[1], piece, sizeof piece, false), 1);
    CHECK_EQ_INT((uint8_t)piece[0], 0xF0);
    size_t cap = detok_min_cap(tok);
    char *out = malloc(cap);
    struct detok_stream st;
    /* continuing a prompt: the space stays */
    detok_init(&st, tok, false);
    CHECK(!st.strip_space);
    CHECK_EQ_INT(detok_push(&st, ids[0], out, cap), 1);
    CHECK_EQ_INT(out[0], ' ');
    for (int k = 1; k < 4; k++) CHECK_EQ_INT(detok_push(&st, ids[k], out, cap), 0);
    CHECK_EQ_INT(detok_push(&st, ids[4], out, cap), 4);
    CHECK(memcmp(out, s, 4) == 0);
    /* from the start of a text: the prefix space goes, as in tokenizer_decode */
    detok_init(&st, tok, false);
    st.strip_space = true;
    CHECK_EQ_INT(detok_push(&st, ids[0], out, cap), 0);
    CHECK(!st.strip_space);
    for (int k = 1; k < 4; k++) CHECK_EQ_INT(detok_push(&st, ids[k], out, cap), 0);
    CHECK_EQ_INT(detok_push(&st, ids[4], out, cap), 4);
    size_t dl;
    char *d = decode_all(tok, ids, 5, false, &dl);
    CHECK_STR(d, "🦙");
    free(d);
    /* cut short, then a normal token: U+FFFD then its text */
    CHECK_EQ_INT(detok_push(&st, ids[1], out, cap), 0);
    CHECK_EQ_INT(detok_push(&st, ids[2], out, cap), 0);
    CHECK_EQ_INT(detok_push(&st, 15043, out, cap), 9); /* "▁Hello" */
    CHECK(memcmp(out, "\xEF\xBF\xBD Hello", 9) == 0);
    /* invalid UTF-8 in: its bytes' tokens out, streamed as U+FFFD */
    const char bad[] = "a\xff\xc3(";
    int32_t *bi;
    int64_t bn = encode_all(tok, bad, 4, false, false, &bi);
    CHECK_EQ_INT(bn, 4); /* "▁a" <0xFF> <0xC3> <0x28>: 0xFF leads a 4-byte character */
    CHECK_EQ_INT(bi[3], tokenizer_find(tok, "<0x28>", 6));
    d = decode_all(tok, bi, bn, false, &dl);
    CHECK(dl == 4 && memcmp(d, bad, 4) == 0);
    free(d);
    d = stream_all(tok, bi, bn, true, &dl);
    CHECK_STR(d, "a\xEF\xBF\xBD\xEF\xBF\xBD(");
    free(d);
    free(bi);
    /* a held byte at the end of the stream flushes as U+FFFD */
    detok_init(&st, tok, false);
    CHECK_EQ_INT(detok_push(&st, ids[1], out, cap), 0);
    CHECK_EQ_INT(detok_flush(&st, out, cap), 3);
    free(out);
    tokenizer_free(tok);
}

TEST(tokenizer_spm_specials_and_prefix) {
    struct tokenizer *tok = load_vocab("ggml-vocab-llama-spm");
    if (!tok) return;
    CHECK(tokenizer_add_bos(tok) && !tokenizer_add_eos(tok));
    CHECK_EQ_INT(tokenizer_bos(tok), 1);
    CHECK_EQ_INT(tokenizer_eos(tok), 2);
    CHECK_EQ_INT(tokenizer_unk(tok), 0);
    CHECK(tokenizer_is_eog(tok, 2));
    CHECK_STR(tokenizer_pre_name(tok), "default");
    int32_t ids[16];
    CHECK_EQ_INT(tokenizer_encode(tok, "Hello", 5, true, false, ids, 16), 2);
    CHECK(ids[0] == 1 && ids[1] == 15043);
    /* parsed specials: the space prefix comes back after each one */
    const char *t = "<s>Hello</s>Hello";
    CHECK_EQ_INT(tokenizer_encode(tok, t, strlen(t), false, true, ids, 16), 4);
    CHECK(ids[0] == 1 && ids[1] == 15043 && ids[2] == 2 && ids[3] == 15043);
    int64_t n = tokenizer_encode(tok, t, strlen(t), false, false, ids, 16);
    CHECK(n > 4 && n <= 16);
    for (int64_t i = 0; i < n && i < 16; i++) CHECK(ids[i] > 2);
    /* decode: specials hidden or shown; the leading space only goes first */
    int32_t seq[] = {1, 15043, 2, 15043};
    size_t len;
    char *d = decode_all(tok, seq, 4, false, &len);
    CHECK_STR(d, "Hello Hello");
    free(d);
    d = decode_all(tok, seq, 4, true, &len);
    CHECK_STR(d, "<s> Hello</s> Hello");
    free(d);
    char piece[32];
    CHECK_EQ_INT(tokenizer_decode_piece(tok, 15043, piece, sizeof piece, false), 6);
    CHECK(memcmp(piece, " Hello", 6) == 0);
    /* snprintf-style decode into a short buffer */
    CHECK_EQ_INT(tokenizer_decode(tok, seq + 1, 1, piece, 3, false), 5);
    CHECK(memcmp(piece, "Hel", 3) == 0);
    tokenizer_free(tok);
}

TEST(tokenizer_wpm_specials_and_decode) {
    struct tokenizer *tok = load_vocab("ggml-vocab-bert-bge");
    if (!tok) return;
    CHECK_EQ_INT(tokenizer_bos(tok), 101);
    CHECK_EQ_INT(tokenizer_eos(tok), 102);
    CHECK_EQ_INT(tokenizer_unk(tok), 100);
    CHECK_EQ_INT(tokenizer_pad(tok), 0);
    CHECK(tokenizer_add_bos(tok) && tokenizer_add_eos(tok));
    int32_t ids[32];
    const char *s = "Hello, World! It's naïve.";
    int64_t n = tokenizer_encode(tok, s, strlen(s), true, false, ids, 32);
    REQUIRE(n > 4 && n <= 32);
    CHECK_EQ_INT(ids[0], 101);
    CHECK_EQ_INT(ids[n - 1], 102);
    size_t len;
    char *d = decode_all(tok, ids, n, false, &len);
    CHECK_STR(d, "hello, world! it's naive.");
    free(d);
    d = decode_all(tok, ids, n, true, &len);
    CHECK_STR(d, "[CLS] hello, world! it's naive. [SEP]");
    free(d);
    /* continuation pieces join without a space */
    n = tokenizer_encode(tok, "dsdfhu", 6, false, false, ids, 32);
    CHECK_EQ_INT(n, 3);
    d = decode_all(tok, ids, n, false, &len);
    CHECK_STR(d, "dsdfhu");
    free(d);
    /* parsed specials */
    const char *t = "[CLS] hi [SEP]";
    CHECK_EQ_INT(tokenizer_encode(tok, t, strlen(t), false, true, ids, 32), 3);
    CHECK(ids[0] == 101 && ids[2] == 102);
    CHECK(tokenizer_encode(tok, t, strlen(t), false, false, ids, 32) > 3);
    /* words over 100 characters, and words with no pieces, are [UNK] */
    char w[256];
    memset(w, 'a', 101);
    w[101] = 0;
    CHECK_EQ_INT(tokenizer_encode(tok, w, 101, false, false, ids, 32), 1);
    CHECK_EQ_INT(ids[0], 100);
    CHECK(tokenizer_encode(tok, w, 100, false, false, ids, 32) >= 1);
    CHECK(ids[0] != 100);
    CHECK_EQ_INT(tokenizer_encode(tok, "x\xE2\x96\x81y", 5, false, false, ids, 32), 1);
    CHECK_EQ_INT(ids[0], 100);
    /* CJK split alone, accents stripped, controls dropped, bad bytes dropped */
    const char *mixed = "\xff" "中文\x01Ábc";
    n = tokenizer_encode(tok, mixed, strlen(mixed), false, false, ids, 32);
    d = decode_all(tok, ids, n, false, &len);
    CHECK_STR(d, "中 文 abc");
    free(d);
    char out[64];
    const char *raw = "H\xC3\xA9llo\xC2\xA0W\xC3\x96RLD\x01\xE4\xB8\xAD";
    CHECK_EQ_INT(wpm_normalize((const uint8_t *)raw, strlen(raw), out, 64), 16);
    CHECK(memcmp(out, "hello world \xE4\xB8\xAD ", 16) == 0);
    tokenizer_free(tok);
}

/* ---- a small hand-made vocabulary ------------------------------------------------- */

enum { SYN_NO_SCORES = 1, SYN_SHORT_SCORES = 2, SYN_INT_SCORES = 4, SYN_SCALAR_SCORES = 8,
       SYN_NO_TOKENS = 16, SYN_INT_TOKENS = 32, SYN_BAD_UNK = 64, SYN_NEG_BOS = 128,
       SYN_NAN = 256, SYN_BAD_PAD = 512, SYN_NO_PREFIX = 1024, SYN_STR_EOS = 2048,
       SYN_SHORT_TYPES = 4096, SYN_MID_MARK = 8192 };

static const char *const k_syn_tok[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c", "ab",
                                        "bc", ("\xE2\x96\x81" "a"), "aa", "<0xC3>", "<0xA9>", "<b>",
                                        "c\xE2\x96\x81"};
static const float k_syn_score[] = {0, 0, 0, -10, -11, -12, -13, -5, -2, -8, -3, 0, 0, 0, -1};
static const int32_t k_syn_type[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 4, 1};
#define SYN_N 14 /* tokens written; the 15th ("c▁") only with SYN_MID_MARK */

/* Loads the vocabulary above (model "llama" unless given) changed by flags. */
static kvik_status syn_load(const char *model, unsigned flags, struct tokenizer **tok,
                            struct kvik_err *err) {
    struct gguf_writer *w = gguf_writer_new();
    float scores[SYN_N + 1];
    memcpy(scores, k_syn_score, sizeof scores);
    if (flags & SYN_NAN) scores[7] = NAN;
    int32_t iscores[SYN_N + 1] = {0};
    uint64_t nt = (flags & SYN_MID_MARK) ? SYN_N + 1 : SYN_N;
    gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    if (flags & SYN_INT_TOKENS) gguf_writer_set_arr_data(w, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, iscores, nt);
    else if (!(flags & SYN_NO_TOKENS)) gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", k_syn_tok, nt);
    if (flags & SYN_INT_SCORES) gguf_writer_set_arr_data(w, "tokenizer.ggml.scores", GGUF_TYPE_INT32, iscores, nt);
    else if (flags & SYN_SCALAR_SCORES) gguf_writer_set_f32(w, "tokenizer.ggml.scores", 1.0f);
    else if (!(flags & SYN_NO_SCORES))
        gguf_writer_set_arr_data(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores,
                                 (flags & SYN_SHORT_SCORES) ? nt - 1 : nt);
    gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, k_syn_type,
                             (flags & SYN_SHORT_TYPES) ? 3 : nt);
    gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (flags & SYN_BAD_UNK) ? 1000000 : 0);
    if (flags & SYN_NEG_BOS) gguf_writer_set_i32(w, "tokenizer.ggml.bos_token_id", -1);
    else gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (flags & SYN_STR_EOS) gguf_writer_set_str(w, "tokenizer.ggml.eos_token_id", "2");
    else gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (flags & SYN_BAD_PAD) gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 4000000000u);
    if (flags & SYN_NO_PREFIX) gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = NULL;
    *tok = NULL;
    kvik_status st = gguf_writer_write_memory(w, &buf, &size, err);
    if (st == KVIK_OK) st = gguf_open_memory(buf, size, &g, err);
    if (st == KVIK_OK) st = tokenizer_load(g, tok, err);
    gguf_close(g);
    free(buf);
    gguf_writer_free(w);
    return st;
}

/* Checks that s encodes (no specials added) to want[0..n). */
static void expect_ids(const struct tokenizer *tok, const char *s, const int32_t *want, int64_t n) {
    int32_t got[32];
    int64_t m = tokenizer_encode(tok, s, strlen(s), false, true, got, 32);
    bool ok = m == n && (n == 0 || memcmp(got, want, (size_t)n * 4) == 0);
    char g[128] = "";
    for (int64_t k = 0, o = 0; k < m && k < 32 && o < 100; k++) o += snprintf(g + o, sizeof g - (size_t)o, " %d", got[k]);
    CHECK_MSG(ok, "\"%s\": got%s", s, g);
}
#define EXPECT(tok, s, ...)                                                    \
    do {                                                                       \
        static const int32_t w_[] = {__VA_ARGS__};                             \
        expect_ids(tok, s, w_, (int64_t)(sizeof w_ / sizeof w_[0]));           \
    } while (0)

TEST(tokenizer_spm_merges_by_score) {
    struct kvik_err err = {0};
    struct tokenizer *tok;
    REQUIRE(syn_load("llama", SYN_NO_PREFIX, &tok, &err) == KVIK_OK);
    EXPECT(tok, "abc", 4, 8);        /* "bc" (-2) before "ab" (-5), though "ab" is left */
    EXPECT(tok, "aaa", 10, 4);       /* equal scores: the leftmost pair */
    EXPECT(tok, "a b", 4, 3, 5);     /* a space is "▁" */
    EXPECT(tok, "\xC3\xA9", 11, 12); /* é: no piece, its two byte tokens */
    EXPECT(tok, "\xC3\xBC\xC3\xBC", 0);       /* üü: a byte token missing: one fused <unk> */
    EXPECT(tok, "\xC3\xBCx\xC3\xBC", 0);      /* still one */
    EXPECT(tok, "\xC3\xBC \xC3\xBC", 0, 3, 0);
    EXPECT(tok, "a<b>a", 4, 13, 4);  /* user-defined tokens always split out */
    EXPECT(tok, "<s>ab", 1, 7);      /* control tokens with parse_special */
    tokenizer_free(tok);

    REQUIRE(syn_load("llama", 0, &tok, &err) == KVIK_OK); /* add_space_prefix absent: true */
    EXPECT(tok, "abc", 9, 8);        /* "▁abc": bc, then "▁a" */
    EXPECT(tok, "a<b>a", 9, 13, 9);  /* the prefix comes back after a special token */
    int32_t ids[8];
    CHECK_EQ_INT(tokenizer_encode(tok, "", 0, false, false, ids, 8), 0);
    CHECK_EQ_INT(tokenizer_encode(tok, "abc", 3, true, false, ids, 8), 3);
    CHECK(ids[0] == 1 && ids[1] == 9 && ids[2] == 8);
    size_t len;
    int32_t seq[] = {3, 9, 8};
    char *d = decode_all(tok, seq, 3, false, &len);
    CHECK_STR(d, " abc"); /* one leading space goes */
    free(d);
    d = stream_all(tok, seq, 3, true, &len);
    CHECK_STR(d, " abc");
    free(d);
    d = stream_all(tok, seq, 3, false, &len);
    CHECK_STR(d, "  abc");
    free(d);
    EXPECT(tok, "abc c", 9, 8, 3, 6); /* words merge apart: "▁abc", "▁c" */
    tokenizer_free(tok);

    /* a token with "▁" after another character: the stretch merges whole */
    REQUIRE(syn_load("llama", SYN_NO_PREFIX | SYN_MID_MARK, &tok, &err) == KVIK_OK);
    EXPECT(tok, "abc c", 7, 14, 6); /* "c▁" (-1) first, then "ab" */
    tokenizer_free(tok);
}

TEST(tokenizer_spm_bert_load_errors) {
    struct kvik_err err = {0};
    struct tokenizer *tok = NULL;
    static const struct {
        unsigned flags;
        const char *what;
    } bad[] = {
        {SYN_NO_SCORES, "scores"},      {SYN_SHORT_SCORES, "scores"}, {SYN_INT_SCORES, "scores"},
        {SYN_SCALAR_SCORES, "scores"},  {SYN_NO_TOKENS, "tokens"},    {SYN_INT_TOKENS, "tokens"},
        {SYN_BAD_UNK, "unknown_token"}, {SYN_NEG_BOS, "bos_token"},   {SYN_STR_EOS, "eos_token"},
        {SYN_SHORT_TYPES, "token_type"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        kvik_status st = syn_load("llama", bad[i].flags, &tok, &err);
        CHECK_MSG(st == KVIK_ERR_FORMAT, "flags %u: status %d", bad[i].flags, (int)st);
        CHECK_MSG(strstr(err.msg, bad[i].what) != NULL, "flags %u: \"%s\"", bad[i].flags, err.msg);
        CHECK(tok == NULL);
    }
    /* tolerated: a NaN score (never merges first), a padding id out of range */
    REQUIRE(syn_load("llama", SYN_NAN | SYN_BAD_PAD | SYN_NO_PREFIX, &tok, &err) == KVIK_OK);
    CHECK_EQ_INT(tokenizer_pad(tok), -1);
    EXPECT(tok, "abc", 4, 8);
    EXPECT(tok, "ab", 7);    /* "ab" has a NaN score: read as -inf, still a token */
    tokenizer_free(tok);
    /* bert: absurd [CLS] id; no [UNK] is fine (such words are dropped) */
    CHECK_EQ_INT(syn_load("bert", SYN_BAD_UNK, &tok, &err), KVIK_ERR_FORMAT);
    REQUIRE(syn_load("bert", 0, &tok, &err) == KVIK_OK);
    tokenizer_free(tok);
    CHECK_EQ_INT(syn_load("rwkv", 0, &tok, &err), KVIK_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "rwkv") != NULL);
    /* gpt2 keeps ignoring ids that name no token, as before */
    REQUIRE(syn_load("gpt2", SYN_BAD_UNK, &tok, &err) == KVIK_OK);
    CHECK_EQ_INT(tokenizer_unk(tok), -1);
    tokenizer_free(tok);
}

/* ---- Unicode normalization tables ------------------------------------------------- */

TEST(tokenizer_unicode_norm_tables) {
    uint32_t d[UNORM_MAX_DECOMP], l[UNORM_MAX_LOWER];
    CHECK_STR(unorm_ucd_version, ucd_version);
    CHECK_EQ_INT(unorm_decompose(0xE9, d), 2); /* é */
    CHECK(d[0] == 'e' && d[1] == 0x301);
    CHECK_EQ_INT(unorm_decompose(0x1E69, d), 3); /* ṩ: recursive */
    CHECK(d[0] == 's' && d[1] == 0x323 && d[2] == 0x307);
    CHECK_EQ_INT(unorm_decompose(0xAC01, d), 3); /* 각: Hangul LVT */
    CHECK(d[0] == 0x1100 && d[1] == 0x1161 && d[2] == 0x11A8);
    CHECK_EQ_INT(unorm_decompose(0xAC00, d), 2);
    CHECK_EQ_INT(unorm_decompose(0x212B, d), 2); /* Å (angstrom) -> A + ring */
    CHECK_EQ_INT(unorm_decompose('a', d), 1);
    CHECK_EQ_INT(unorm_decompose(0x110000, d), 1);
    CHECK_EQ_INT(unorm_ccc(0x301), 230);
    CHECK_EQ_INT(unorm_ccc(0x323), 220);
    CHECK_EQ_INT(unorm_ccc('a'), 0);
    CHECK_EQ_INT(unorm_ccc(0x1D165), 216);
    CHECK(unorm_is_mn(0x301) && !unorm_is_mn(0x1D165) && !unorm_is_mn('a'));
    CHECK(unorm_is_control(0x01) && unorm_is_control(0xAD) && unorm_is_control(0xE000));
    CHECK(unorm_is_control(0x10FFFD) && !unorm_is_control(0x378) && !unorm_is_control(' '));
    CHECK_EQ_INT(unorm_lower('A', l), 1);
    CHECK_EQ_INT(l[0], 'a');
    CHECK_EQ_INT(unorm_lower(0x130, l), 2); /* İ */
    CHECK(l[0] == 'i' && l[1] == 0x307);
    CHECK_EQ_INT(unorm_lower(0x3A3, l), 1);
    CHECK_EQ_INT(l[0], 0x3C3);
    CHECK_EQ_INT(unorm_lower(0x10400, l), 1); /* Deseret */
    CHECK_EQ_INT(l[0], 0x10428);
    CHECK_EQ_INT(unorm_lower(0x110000, l), 1);
    /* canonical reordering of marks that survive accent stripping (Mc, ccc 226 and 216) */
    char out[32];
    CHECK_EQ_INT(wpm_normalize((const uint8_t *)"x\xF0\x9D\x85\xAD\xF0\x9D\x85\xA5", 9, out, 32), 9);
    CHECK(memcmp(out, "x\xF0\x9D\x85\xA5\xF0\x9D\x85\xAD", 9) == 0);
    /* a long run of such marks: the counting sort, stable */
    uint8_t marks[1 + 800];
    char big[1 + 800];
    marks[0] = 'x';
    for (int i = 0; i < 100; i++) {
        memcpy(marks + 1 + 8 * i, "\xF0\x9D\x85\xAD", 4);
        memcpy(marks + 5 + 8 * i, "\xF0\x9D\x85\xA5", 4);
    }
    CHECK_EQ_INT(wpm_normalize(marks, sizeof marks, big, sizeof big), 801);
    int wrong = 0;
    for (int i = 0; i < 200; i++) wrong += (uint8_t)big[1 + 4 * i + 3] != (i < 100 ? 0xA5 : 0xAD);
    CHECK_EQ_INT(wrong, 0);
}

/* ---- long inputs ------------------------------------------------------------------ */

TEST(tokenizer_spm_wpm_long_inputs) {
    struct tokenizer *spm = load_vocab("ggml-vocab-llama-spm");
    if (!spm) return;
    struct tokenizer *wpm = load_vocab("ggml-vocab-bert-bge");
    if (!wpm) {
        tokenizer_free(spm);
        return;
    }
    size_t n = (size_t)3 << 20;
    char *s = malloc(n);
    uint64_t rng = 7;
    static const char *const bits[] = {"hello ", "wörld ", "中文", "🦙", "\xff", "  ", "x", "\xCC\x81",
                                       "\n", ".", "İ", "ab"};
    for (size_t i = 0; i < n;) {
        const char *b = bits[test_rand_u64(&rng) % 12];
        size_t l = strlen(b);
        if (i + l > n) l = n - i;
        memcpy(s + i, b, l);
        i += l;
    }
    struct tokenizer *toks[2] = {spm, wpm};
    for (int t = 0; t < 2; t++) {
        int64_t a = tokenizer_encode(toks[t], s, n, true, true, NULL, 0);
        CHECK(a > (int64_t)(n / 16));
        int32_t *ids = malloc((size_t)a * sizeof *ids);
        CHECK_EQ_INT(tokenizer_encode(toks[t], s, n, true, true, ids, a), a);
        int64_t bad = 0;
        for (int64_t i = 0; i < a; i++) bad += ids[i] < 0 || ids[i] >= tokenizer_n_vocab(toks[t]);
        CHECK_EQ_INT(bad, 0);
        free(ids);
    }
    /* "a" and 1.5 million accents, no space: one chunk, the accents go, "a" stays */
    s[0] = 'a';
    for (size_t i = 1; i + 2 <= n; i += 2) memcpy(s + i, "\xCC\x81", 2);
    int32_t one[4];
    CHECK_EQ_INT(tokenizer_encode(wpm, s, n - 1, false, false, one, 4), 1);
    CHECK_EQ_INT(one[0], tokenizer_find(wpm, "\xE2\x96\x81" "a", 4));
    free(s);
    tokenizer_free(spm);
    tokenizer_free(wpm);
}

/* The text llama's decoder gives back for in[0..n) (no "▁" in it) with a
 * space prefix: spaces come back, except those whose "▁" (E2 96 81) a
 * character of step 2 of spm.c that is not valid UTF-8 takes in, wholly
 * or partly; that character comes back as its bytes, so they read "▁", as
 * in llama.cpp. Returns the length written to out (3 n + 3 bytes). */
static size_t spm_round_trip(const char *in, size_t n, char *out) {
    static const uint8_t by_lead[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    uint8_t e[3 * 64 + 3];
    size_t m = 0, o = 0;
    memcpy(e, "\xE2\x96\x81", 3);
    m = 3;
    for (size_t i = 0; i < n && m + 3 <= sizeof e; i++) {
        if (in[i] == ' ') memcpy(e + m, "\xE2\x96\x81", 3), m += 3;
        else e[m++] = (uint8_t)in[i];
    }
    for (size_t i = 0; i < m;) {
        size_t l = by_lead[e[i] >> 4];
        if (l > m - i) l = m - i;
        if (l == 3 && memcmp(e + i, "\xE2\x96\x81", 3) == 0) out[o++] = ' ';
        else memcpy(out + o, e + i, l), o += l;
        i += l;
    }
    /* the decoder drops the prefix's space */
    memmove(out, out + 1, --o);
    return o;
}

/* Random bytes, valid UTF-8 or not: ids in range, llama's byte fallback
 * loses nothing but the spaces invalid characters take in (see
 * spm_round_trip), streams stay valid UTF-8 (checked in stream_all). */
TEST(tokenizer_spm_wpm_random_bytes) {
    struct tokenizer *spm = load_vocab("ggml-vocab-llama-spm");
    if (!spm) return;
    struct tokenizer *wpm = load_vocab("ggml-vocab-bert-bge");
    if (!wpm) {
        tokenizer_free(spm);
        return;
    }
    uint64_t rng = 1234;
    char buf[64];
    for (int it = 0; it < 2000 && !test_failed(); it++) {
        size_t len = (size_t)(test_rand_u64(&rng) % sizeof buf);
        for (size_t k = 0; k < len; k++) {
            uint64_t r = test_rand_u64(&rng);
            buf[k] = (char)(r % 4 == 0 ? ' ' : r % 4 == 1 ? 'a' + (int)(r >> 8) % 26 : (int)(r >> 16));
        }
        for (int t = 0; t < 2; t++) {
            const struct tokenizer *tok = t ? wpm : spm;
            int32_t *ids;
            int64_t n = encode_all(tok, buf, len, true, true, &ids);
            CHECK(n >= 0);
            int64_t bad = 0;
            for (int64_t k = 0; k < n; k++) bad += ids[k] < 0 || ids[k] >= tokenizer_n_vocab(tok);
            CHECK_EQ_INT(bad, 0);
            size_t dl, sl;
            char *d = decode_all(tok, ids, n, false, &dl);
            char *st = stream_all(tok, ids, n, true, &sl);
            if (!t && !memmem(buf, len, "\xE2\x96\x81", 3)) {
                char want[3 * sizeof buf + 3];
                size_t wl = spm_round_trip(buf, len, want);
                CHECK_MSG(dl == wl && memcmp(d, want, wl) == 0, "llama: random bytes %d do not round-trip", it);
            }
            free(st);
            free(d);
            free(ids);
        }
    }
    tokenizer_free(spm);
    tokenizer_free(wpm);
}

/* ---- threads ---------------------------------------------------------------------- */

struct job {
    const struct tokenizer *tok;
    int64_t sum;
};

static void *encode_job(void *arg) {
    struct job *j = arg;
    static const char *const texts[] = {"Hello, world! naïve café 中文 🦙", "   spaces\tand\nlines  ",
                                        "state-of-the-art x86_64 ½"};
    for (int rep = 0; rep < 200; rep++)
        for (int i = 0; i < 3; i++) {
            int32_t ids[128];
            int64_t n = tokenizer_encode(j->tok, texts[i], strlen(texts[i]), true, false, ids, 128);
            for (int64_t k = 0; k < n && k < 128; k++) j->sum += ids[k] * (k + 1);
        }
    return NULL;
}

TEST(tokenizer_spm_wpm_two_threads) {
    const char *names[] = {"ggml-vocab-llama-spm", "ggml-vocab-bert-bge"};
    for (int v = 0; v < 2; v++) {
        struct tokenizer *tok = load_vocab(names[v]);
        if (!tok) return;
        struct job one = {tok, 0}, jobs[2] = {{tok, 0}, {tok, 0}};
        encode_job(&one);
        pthread_t th[2];
        for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&th[i], NULL, encode_job, &jobs[i]) == 0);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        CHECK_EQ_INT(jobs[0].sum, one.sum);
        CHECK_EQ_INT(jobs[1].sum, one.sum);
        tokenizer_free(tok);
    }
}
