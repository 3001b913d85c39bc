/*
 * test_vocab_import.c — vocab_import_tiktoken (what `kvik vocab-import`
 * runs): a small hand-written ranks file gives the tokens, types and merges
 * the header promises and encodes as tiktoken's rule says; malformed files
 * and options get a clear error, never a crash. Parity on the real
 * cl100k_base against tiktoken is in test_tokenizer_parity.c.
 */
#include <stdlib.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tools/vocab_import.h"

/* A ranks file: the 256 single bytes at rank = byte value, then extra
 * tokens (NUL-separated list, ranks 256...). */
static char *ranks_text(const char *const *extra, int n_extra) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t cap = 64 * 1024, len = 0;
    char *out = malloc(cap);
    for (int r = 0; r < 256 + n_extra; r++) {
        uint8_t tokb[64];
        size_t n;
        if (r < 256) {
            tokb[0] = (uint8_t)r;
            n = 1;
        } else {
            n = strlen(extra[r - 256]);
            memcpy(tokb, extra[r - 256], n);
        }
        for (size_t i = 0; i < n; i += 3) {
            uint32_t w = (uint32_t)tokb[i] << 16 | (i + 1 < n ? (uint32_t)tokb[i + 1] << 8 : 0) |
                         (i + 2 < n ? tokb[i + 2] : 0);
            out[len++] = b64[w >> 18];
            out[len++] = b64[(w >> 12) & 63];
            out[len++] = i + 1 < n ? b64[(w >> 6) & 63] : '=';
            out[len++] = i + 2 < n ? b64[w & 63] : '=';
        }
        len += (size_t)snprintf(out + len, cap - len, " %d\n", r);
    }
    out[len] = 0;
    return out;
}

static kvik_status import(const char *text, const struct vocab_import_opts *o, struct gguf **g,
                          struct vocab_import_info *info, struct kvik_err *err, void **mem) {
    struct gguf_writer *w = gguf_writer_new();
    size_t size = 0;
    *g = NULL;
    *mem = NULL;
    kvik_status st = vocab_import_tiktoken_mem((const uint8_t *)text, strlen(text), "test.tiktoken", o, w, info, err);
    if (!st) st = gguf_writer_write_memory(w, mem, &size, err);
    if (!st) st = gguf_open_memory(*mem, size, g, err);
    gguf_writer_free(w);
    return st;
}

static void check_encode(const struct tokenizer *tok, const char *text, const int32_t *want, int n_want) {
    int32_t ids[32];
    int64_t n = tokenizer_encode(tok, text, strlen(text), false, false, ids, 32);
    bool same = n == n_want;
    for (int i = 0; same && i < n_want; i++) same = ids[i] == want[i];
    CHECK_MSG(same, "'%s': %lld ids, want %d (first %d, want %d)", text, (long long)n, n_want, n > 0 ? ids[0] : -1,
              want[0]);
}

TEST(vocab_import_small) {
    /* 256 "he", 257 "ll", 258 "hell", 259 "hello", 260 "ab", 261 "ba", 262 "aba" */
    static const char *const extra[] = {"he", "ll", "hell", "hello", "ab", "ba", "aba"};
    char *text = ranks_text(extra, 7);
    static const struct vocab_special sp[] = {{"<|end|>", 300}};
    struct vocab_import_opts o = {.pre = "gpt-2", .name = "tiny", .special = sp, .n_special = 1, .bos = -1,
                                  .eos = 300};
    struct vocab_import_info info;
    struct kvik_err err = {0};
    struct gguf *g;
    void *mem;
    REQUIRE(import(text, &o, &g, &info, &err, &mem) == KVIK_OK);
    CHECK_EQ_INT(info.n_ranks, 263);
    CHECK_EQ_INT(info.n_vocab, 301);
    CHECK_EQ_INT(info.n_unused, 300 - 263);
    /* merges: he: h+e; ll: l+l; hell: he+ll; hello: hell+o; ab: a+b; ba: b+a;
     * aba: ab+a then a+ba (left part's rank first) */
    CHECK_EQ_INT(info.n_merges, 8);
    const struct gguf_value *m;
    REQUIRE(gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &m, &err) == KVIK_OK);
    static const char *const want_m[] = {"h e", "l l", "he ll", "hell o", "a b", "b a", "a ba", "ab a"};
    for (uint64_t i = 0; i < 8 && i < gguf_arr_len(m); i++) {
        struct gguf_value e;
        REQUIRE(gguf_arr_elem(m, i, &e));
        CHECK_MSG(e.n == strlen(want_m[i]) && !memcmp(e.p, want_m[i], e.n), "merge %d: '%.*s', want '%s'", (int)i,
                  (int)e.n, (const char *)e.p, want_m[i]);
    }
    struct tokenizer *tok = NULL;
    REQUIRE(tokenizer_load(g, &tok, &err) == KVIK_OK);
    CHECK_STR(tokenizer_token_text(tok, ' '), "\xC4\xA0"); /* U+0120, GPT-2's space */
    CHECK_STR(tokenizer_token_text(tok, 300), "<|end|>");
    CHECK_STR(tokenizer_token_text(tok, 280), "<|unused_280|>");
    CHECK_EQ_INT(tokenizer_eos(tok), 300);
    check_encode(tok, "hello", (const int32_t[]){259}, 1);
    check_encode(tok, "help", (const int32_t[]){256, 'l', 'p'}, 3);
    check_encode(tok, "hell hello", (const int32_t[]){258, ' ', 259}, 3);
    /* tiktoken's rule: a b a b -> (ab 260 is the lowest pair, leftmost) ab a b
     * -> (ab 260 beats aba 262) ab ab -> "abab" is no token: [260, 260] */
    check_encode(tok, "abab", (const int32_t[]){260, 260}, 2);
    check_encode(tok, "aba", (const int32_t[]){262}, 1);
    check_encode(tok, "<|end|>", (const int32_t[]){'<', '|', 'e', 'n', 'd', '|', '>'}, 7);
    tokenizer_free(tok);
    gguf_close(g);
    free(mem);
    free(text);
}

/* One malformed input: the status and a phrase of the message. */
static void check_bad(const char *text, const struct vocab_import_opts *o, kvik_status want, const char *phrase) {
    struct kvik_err err = {0};
    struct gguf *g;
    void *mem;
    kvik_status st = import(text, o, &g, NULL, &err, &mem);
    CHECK_MSG(st == want && strstr(err.msg, phrase), "status %d (want %d), message '%s' (want '%s')", st, want,
              err.msg, phrase);
    gguf_close(g);
    free(mem);
}

TEST(vocab_import_malformed) {
    struct vocab_import_opts o = {.pre = "gpt-2", .bos = -1, .eos = -1};
    char *good = ranks_text(NULL, 0);
    size_t n = strlen(good);
    char *buf = malloc(n + 256);
    check_bad("", &o, KVIK_ERR_FORMAT, "holds no tokens");
    snprintf(buf, n + 256, "%sQUJD\n", good); /* no rank */
    check_bad(buf, &o, KVIK_ERR_FORMAT, "line 257");
    snprintf(buf, n + 256, "%sQU*D 300\n", good); /* not base64 */
    check_bad(buf, &o, KVIK_ERR_FORMAT, "line 257");
    snprintf(buf, n + 256, "%sQUJD 3x\n", good); /* not a number */
    check_bad(buf, &o, KVIK_ERR_FORMAT, "line 257");
    snprintf(buf, n + 256, "%sQUJD 99999999999\n", good); /* too large */
    check_bad(buf, &o, KVIK_ERR_FORMAT, "line 257");
    snprintf(buf, n + 256, "%sQQ== 300\n", good); /* "A" again */
    check_bad(buf, &o, KVIK_ERR_FORMAT, "same bytes appear twice");
    snprintf(buf, n + 256, "%sQUJD 65\n", good); /* rank of "A" again */
    check_bad(buf, &o, KVIK_ERR_FORMAT, "rank 65 is given twice");
    check_bad(strchr(good, '\n') + 1, &o, KVIK_ERR_FORMAT, "single byte 0x00"); /* first line gone */
    struct vocab_special sp[] = {{"<x>", 65}};
    struct vocab_import_opts os = o;
    os.special = sp;
    os.n_special = 1;
    check_bad(good, &os, KVIK_ERR_INVALID_ARG, "clashes");
    os.n_special = 0;
    os.eos = 256;
    check_bad(good, &os, KVIK_ERR_INVALID_ARG, "BOS/EOS");
    free(buf);
    free(good);
}

/* The command: usage errors exit 2, a bad ranks file exits 1 naming its
 * line, a good one writes a vocabulary `kvik tokenize` can use. */
TEST(vocab_import_cli) {
    char out[4096], err[4096], args[512];
    char rpath[64], gpath[64];
    snprintf(rpath, sizeof rpath, "/tmp/kvik-test-ranks-%d.tiktoken", (int)getpid());
    snprintf(gpath, sizeof gpath, "/tmp/kvik-test-ranks-%d.gguf", (int)getpid());
    CHECK_EQ_INT(test_run_kvik("vocab-import --tiktoken x.tiktoken -o y.gguf", out, sizeof out, err, sizeof err),
                 2); /* no --pre */
    CHECK(strstr(err, "--pre") != NULL);
    CHECK_EQ_INT(test_run_kvik("vocab-import --special nope --pre gpt-2", out, sizeof out, err, sizeof err), 2);
    CHECK(strstr(err, "TEXT=ID") != NULL);
    static const char *const extra[] = {"he", "ll", "hell", "hello"};
    char *text = ranks_text(extra, 4);
    FILE *f = fopen(rpath, "w");
    REQUIRE(f);
    fputs(text, f);
    fputs("QUJD\n", f); /* line 261: no rank */
    fclose(f);
    snprintf(args, sizeof args, "vocab-import --tiktoken %s --pre gpt-2 -o %s", rpath, gpath);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 1);
    CHECK_MSG(strstr(err, "line 261") != NULL, "stderr: %s", err);
    f = fopen(rpath, "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
    snprintf(args, sizeof args, "vocab-import --tiktoken %s --pre gpt-2 --special '<|end|>=300' -o %s", rpath, gpath);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "tokenize -m %s -p 'hello help'", gpath);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strncmp(out, "259 32 256 108 112", 18) == 0, "ids: %s", out); /* hello, ' ', he, l, p */
    remove(rpath);
    remove(gpath);
    free(text);
}
