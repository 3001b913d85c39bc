/*
 * test_tokenizer_speed.c — the speed machinery of the tokenizer gives the
 * same ids as plain encoding (correctness only, no timings): the per-thread
 * word cache on vs off on the vocabulary fixtures and on random text
 * (evictions included), from many threads at once, with two tokenizers
 * alternating on one thread and with a tokenizer freed and another loaded
 * (likely at the same address); caller-owned scratch; the batch API against
 * one-by-one encoding; `kvik tokenize` / `kvik detokenize` on a fixture
 * vocabulary; `kvik bench tokenizer --json` on a tiny corpus (its token
 * count and CRC-32 against tokenizer_encode's).
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench_tokenizer.h"

/* ---- helpers ------------------------------------------------------------------ */

static const char *const k_vocabs[] = {
    "ggml-vocab-gpt-2", "ggml-vocab-starcoder", "ggml-vocab-refact", "ggml-vocab-mpt",
    "ggml-vocab-deepseek-coder", "ggml-vocab-llama-spm", "ggml-vocab-bert-bge",
};
#define N_VOCABS ((int)(sizeof k_vocabs / sizeof k_vocabs[0]))

/* The fixture's tokenizer, or NULL (quietly) if the vocabulary is absent or
 * of a kind this build does not load. */
static struct tokenizer *load_vocab(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s.gguf", test_env("KVIK_FIXTURES"), name);
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    if (gguf_open(path, &g, NULL) == KVIK_OK) tokenizer_load(g, &tok, NULL);
    gguf_close(g);
    return tok;
}

/* Test strings: the fixture's .inp strings (up to max), pointing into *buf. */
static int load_strings(const char *name, char **buf, const char **str, size_t *len, int max) {
    char path[4096];
    size_t n;
    snprintf(path, sizeof path, "%s/vocab/%s.gguf.inp", test_env("KVIK_FIXTURES"), name);
    *buf = test_slurp(path, &n);
    if (!*buf) return 0;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int k = 0;
    for (char *p = *buf, *q; k < max && (q = strstr(p, sep)); p = q + sizeof sep - 1) {
        str[k] = p;
        len[k++] = (size_t)(q - p);
    }
    return k;
}

/* All ids of s (malloc'd into *ids), cache as `cache` says, through
 * tokenizer_encode or, with sc, tokenizer_encode_scratch. */
static int64_t encode_with(const struct tokenizer *tok, struct tokenizer_scratch *sc, bool cache,
                           const char *s, size_t len, int32_t **ids) {
    bool was = tokenizer_cache_enabled();
    tokenizer_cache_set_enabled(cache);
    int64_t cap = (int64_t)len + 3;
    *ids = malloc((size_t)cap * sizeof **ids);
    int64_t n = sc ? tokenizer_encode_scratch(tok, sc, s, len, false, false, *ids, cap)
                   : tokenizer_encode(tok, s, len, false, false, *ids, cap);
    tokenizer_cache_set_enabled(was);
    return n;
}

static bool same_ids(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    return na == nb && (na <= 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

/* Random text: words of letters, digits, punctuation, spaces, multi-byte
 * characters and (if raw) arbitrary bytes, from a pool of `distinct` words
 * so that words recur. */
static char *random_text(uint64_t *rng, size_t len, int distinct, bool raw) {
    static const char *const parts[] = {
        " the", " of", "ing", "tion", " 42", "1999", "!!", "...", "\n", "\n\n", "\t", "  ",
        "é", "ü", "日本", "語", "😀", "한국", "ñ", "'s", "'ll", "{", "}", "();", "_x", "Ž",
    };
    char *out = malloc(len + 64);
    size_t o = 0;
    while (o < len) {
        uint64_t w = test_rand_u64(rng) % (uint64_t)distinct;
        uint64_t r = w * 0x9E3779B97F4A7C15ull + 1;
        int n_parts = 1 + (int)(test_rand_u64(&r) % 4);
        for (int k = 0; k < n_parts && o < len; k++) {
            uint64_t pick = test_rand_u64(&r) % 40;
            if (pick < 26) {
                size_t pl = strlen(parts[pick]);
                memcpy(out + o, parts[pick], pl);
                o += pl;
            } else if (raw && pick < 28) {
                out[o++] = (char)(test_rand_u64(&r) & 0xff);
            } else {
                int wl = 1 + (int)(test_rand_u64(&r) % 14);
                if (test_rand_u64(&r) % 2) out[o++] = ' ';
                for (int c = 0; c < wl; c++) out[o++] = (char)('a' + test_rand_u64(&r) % 26);
            }
        }
    }
    out[o] = 0;
    return out;
}

/* ---- the word cache ------------------------------------------------------------ */

/* Cache off, cache on (cold, then warm), with a caller's scratch: one answer. */
static void check_three_ways(const struct tokenizer *tok, const char *s, size_t len, const char *what) {
    struct tokenizer_scratch *sc = tokenizer_scratch_new();
    int32_t *off, *cold, *warm, *scr;
    tokenizer_cache_clear();
    int64_t n_off = encode_with(tok, NULL, false, s, len, &off);
    int64_t n_cold = encode_with(tok, NULL, true, s, len, &cold);
    int64_t n_warm = encode_with(tok, NULL, true, s, len, &warm);
    int64_t n_scr = encode_with(tok, sc, true, s, len, &scr);
    CHECK_MSG(n_off >= 0, "%s: encode failed (%lld)", what, (long long)n_off);
    CHECK_MSG(same_ids(off, n_off, cold, n_cold), "%s \"%.30s\": cache cold differs from off", what, s);
    CHECK_MSG(same_ids(off, n_off, warm, n_warm), "%s \"%.30s\": cache warm differs from off", what, s);
    CHECK_MSG(same_ids(off, n_off, scr, n_scr), "%s \"%.30s\": scratch differs", what, s);
    free(off);
    free(cold);
    free(warm);
    free(scr);
    tokenizer_scratch_free(sc);
}

TEST(speed_cache_fixture_strings) {
    int loaded = 0;
    for (int v = 0; v < N_VOCABS; v++) {
        struct tokenizer *tok = load_vocab(k_vocabs[v]);
        if (!tok) continue;
        loaded++;
        char *buf;
        const char *str[256];
        size_t len[256];
        int n = load_strings(k_vocabs[v], &buf, str, len, 256);
        for (int i = 0; i < n; i++) check_three_ways(tok, str[i], len[i], k_vocabs[v]);
        /* all strings in one text: words recur, hits happen */
        size_t total = 0;
        for (int i = 0; i < n; i++) total += len[i] + 1;
        char *all = malloc(total + 1), *p = all;
        for (int i = 0; i < n; i++) {
            memcpy(p, str[i], len[i]);
            p += len[i];
            *p++ = ' ';
        }
        check_three_ways(tok, all, total, k_vocabs[v]);
        free(all);
        free(buf);
        tokenizer_free(tok);
    }
    if (!loaded) test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
}

TEST(speed_cache_random_text_and_eviction) {
    struct tokenizer *tok = load_vocab("ggml-vocab-gpt-2");
    if (!tok) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return;
    }
    uint64_t rng = 7;
    /* 40000 distinct words: more than the 16384 entries, so sets evict */
    char *big = random_text(&rng, 600000, 40000, false);
    struct tokenizer_cache_stats st;
    tokenizer_cache_clear();
    check_three_ways(tok, big, strlen(big), "random 600 KB");
    tokenizer_cache_get_stats(&st);
    CHECK(st.hits > 0 && st.misses > 16384);
    free(big);
    for (int it = 0; it < 200; it++) {
        char *t = random_text(&rng, 1 + test_rand_u64(&rng) % 2000, 50, true);
        check_three_ways(tok, t, strlen(t), "random bytes");
        free(t);
        if (test_failed()) break;
    }
    tokenizer_free(tok);
}

struct thread_job {
    const struct tokenizer *tok;
    const char *text;
    size_t len;
    const int32_t *want;
    int64_t n_want;
    int mismatches;
};

static void *thread_encode(void *arg) {
    struct thread_job *j = arg;
    for (int rep = 0; rep < 4; rep++) {
        int32_t *ids;
        int64_t n = encode_with(j->tok, NULL, true, j->text, j->len, &ids);
        j->mismatches += !same_ids(ids, n, j->want, j->n_want);
        free(ids);
    }
    return NULL;
}

TEST(speed_cache_many_threads) {
    struct tokenizer *tok = load_vocab("ggml-vocab-starcoder");
    if (!tok) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return;
    }
    enum { T = 8 };
    uint64_t rng = 99;
    char *text[T];
    int32_t *want[T];
    int64_t n_want[T];
    struct thread_job jobs[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        /* half the threads share one text (same words in every cache) */
        text[t] = t % 2 ? random_text(&rng, 60000, 3000 + 500 * t, false) : NULL;
    }
    for (int t = 0; t < T; t++) {
        const char *s = text[t] ? text[t] : text[1];
        n_want[t] = encode_with(tok, NULL, false, s, strlen(s), &want[t]);
        jobs[t] = (struct thread_job){tok, s, strlen(s), want[t], n_want[t], 0};
    }
    for (int t = 0; t < T; t++) REQUIRE(pthread_create(&th[t], NULL, thread_encode, &jobs[t]) == 0);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < T; t++) {
        CHECK_MSG(jobs[t].mismatches == 0, "thread %d: %d mismatches", t, jobs[t].mismatches);
        free(want[t]);
        free(text[t]);
    }
    tokenizer_free(tok);
}

TEST(speed_cache_two_tokenizers_on_one_thread) {
    struct tokenizer *a = load_vocab("ggml-vocab-gpt-2"), *b = load_vocab("ggml-vocab-starcoder");
    if (!a || !b) {
        tokenizer_free(a);
        tokenizer_free(b);
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return;
    }
    uint64_t rng = 3;
    char *t = random_text(&rng, 20000, 400, false);
    size_t len = strlen(t);
    int32_t *wa, *wb;
    int64_t na = encode_with(a, NULL, false, t, len, &wa), nb = encode_with(b, NULL, false, t, len, &wb);
    CHECK(!same_ids(wa, na, wb, nb)); /* the vocabularies really differ */
    tokenizer_cache_clear();
    for (int rep = 0; rep < 6; rep++) {
        const struct tokenizer *tok = rep % 2 ? b : a;
        int32_t *ids;
        int64_t n = encode_with(tok, NULL, true, t, len, &ids);
        CHECK_MSG(same_ids(ids, n, rep % 2 ? wb : wa, rep % 2 ? nb : na), "round %d differs", rep);
        free(ids);
    }
    free(wa);
    free(wb);
    free(t);
    tokenizer_free(a);
    tokenizer_free(b);
}

/* A three-token vocabulary built in memory: "a", "b" and "ab" in the order
 * given, so two of them share every text but not the ids. */
static struct tokenizer *tiny_vocab(const char *const toks[3]) {
    struct gguf_writer *w = gguf_writer_new();
    const char *merges[] = {"a b"};
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    if (gguf_writer_write_memory(w, &buf, &size, NULL) == KVIK_OK && gguf_open_memory(buf, size, &g, NULL) == KVIK_OK)
        tokenizer_load(g, &tok, NULL);
    gguf_close(g);
    free(buf);
    gguf_writer_free(w);
    return tok;
}

TEST(speed_cache_freed_tokenizer_never_answers) {
    static const char *const v1[3] = {"a", "b", "ab"}, *const v2[3] = {"ab", "b", "a"};
    int same_address = 0;
    for (int round = 0; round < 20; round++) {
        struct tokenizer *t1 = tiny_vocab(v1);
        REQUIRE(t1);
        int32_t ids[8];
        /* "abab" is one word (cached): "ab" "ab", id 2 twice */
        CHECK_EQ_INT(tokenizer_encode(t1, "abab", 4, false, false, ids, 8), 2);
        CHECK(ids[0] == 2 && ids[1] == 2);
        uintptr_t addr = (uintptr_t)t1;
        tokenizer_free(t1);
        struct tokenizer *t2 = tiny_vocab(v2);
        REQUIRE(t2);
        same_address += (uintptr_t)t2 == addr;
        CHECK_EQ_INT(tokenizer_encode(t2, "abab", 4, false, false, ids, 8), 2);
        CHECK(ids[0] == 0 && ids[1] == 0); /* t2's id of "ab", not t1's */
        tokenizer_free(t2);
    }
    printf("    a new tokenizer reused the freed one's address in %d of 20 rounds\n", same_address);
}

TEST(speed_scratch_long_words_and_reuse) {
    struct tokenizer *tok = load_vocab("ggml-vocab-gpt-2");
    if (!tok) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return;
    }
    struct tokenizer_scratch *sc = tokenizer_scratch_new();
    REQUIRE(sc);
    size_t big = 200000; /* one 200 KB word: letters only */
    char *w = malloc(big + 1);
    uint64_t rng = 5;
    for (size_t i = 0; i < big; i++) w[i] = (char)('a' + test_rand_u64(&rng) % 3);
    w[big] = 0;
    const char *texts[] = {"short words first", w, "and after the long one", "x", ""};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        size_t len = k == 1 ? big : strlen(texts[k]);
        int32_t *a, *b, *c;
        int64_t na = encode_with(tok, sc, true, texts[k], len, &a);
        int64_t nb = encode_with(tok, NULL, true, texts[k], len, &b);
        int64_t nc = encode_with(tok, NULL, false, texts[k], len, &c);
        CHECK_MSG(na >= 0 && same_ids(a, na, b, nb) && same_ids(a, na, c, nc), "text %zu differs", k);
        free(a);
        free(b);
        free(c);
    }
    /* snprintf-style counts work with a scratch too */
    CHECK_EQ_INT(tokenizer_encode_scratch(tok, sc, "Hello world", 11, false, false, NULL, 0), 2);
    CHECK(tokenizer_encode_scratch(NULL, sc, "x", 1, false, false, NULL, 0) < 0);
    tokenizer_scratch_free(sc);
    tokenizer_scratch_free(NULL);
    free(w);
    tokenizer_free(tok);
}

/* ---- batches ----------------------------------------------------------------- */

static void check_batch(const struct tokenizer *tok, struct pool *pool, const struct tokenizer_doc *docs, int64_t n,
                        bool add_special, bool parse_special) {
    struct tokenizer_batch b;
    struct kvik_err err = {0};
    REQUIRE(tokenizer_encode_batch(tok, pool, docs, n, add_special, parse_special, &b, &err) == KVIK_OK);
    REQUIRE(b.n == n && b.off[0] == 0);
    for (int64_t i = 0; i < n; i++) {
        int64_t cap = (int64_t)docs[i].len + 3;
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        int64_t k = tokenizer_encode(tok, docs[i].text, docs[i].len, add_special, parse_special, ids, cap);
        CHECK_MSG(same_ids(ids, k, b.ids + b.off[i], b.off[i + 1] - b.off[i]), "document %lld differs", (long long)i);
        free(ids);
        if (test_failed()) break;
    }
    tokenizer_batch_free(&b);
    CHECK(b.ids == NULL && b.off == NULL && b.n == 0);
}

TEST(speed_batch_equals_one_by_one) {
    struct tokenizer *tok = load_vocab("ggml-vocab-starcoder");
    if (!tok) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return;
    }
    char *buf;
    const char *str[256];
    size_t len[256];
    int ns = load_strings("ggml-vocab-starcoder", &buf, str, len, 256);
    enum { N = 600 };
    struct tokenizer_doc docs[N];
    char *owned[N] = {0};
    uint64_t rng = 11;
    for (int i = 0; i < N; i++) {
        if (i < ns) {
            docs[i] = (struct tokenizer_doc){str[i], len[i]};
        } else if (i % 7 == 0) {
            docs[i] = (struct tokenizer_doc){"<|endoftext|>a<|endoftext|>", 27};
        } else if (i % 11 == 0) {
            docs[i] = (struct tokenizer_doc){"", 0};
        } else {
            owned[i] = random_text(&rng, 1 + test_rand_u64(&rng) % (i % 50 == 0 ? 30000 : 800), 300, i % 3 == 0);
            docs[i] = (struct tokenizer_doc){owned[i], strlen(owned[i])};
        }
    }
    struct kvik_err err = {0};
    struct pool *pool = pool_create(3, &err);
    REQUIRE(pool);
    check_batch(tok, pool, docs, N, false, false);
    check_batch(tok, pool, docs, N, true, true);
    check_batch(tok, NULL, docs, N, false, false);
    check_batch(tok, pool, docs, 1, false, false);
    check_batch(tok, pool, docs, 0, false, false);
    tokenizer_cache_set_enabled(false);
    check_batch(tok, pool, docs, N, false, false);
    tokenizer_cache_set_enabled(true);
    /* bad arguments */
    struct tokenizer_batch b;
    CHECK_EQ_INT(tokenizer_encode_batch(NULL, pool, docs, N, false, false, &b, &err), KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(tokenizer_encode_batch(tok, pool, NULL, 3, false, false, &b, &err), KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(tokenizer_encode_batch(tok, pool, docs, -1, false, false, &b, &err), KVIK_ERR_INVALID_ARG);
    struct tokenizer_doc bad[2] = {{"ok", 2}, {NULL, 5}};
    CHECK_EQ_INT(tokenizer_encode_batch(tok, pool, bad, 2, false, false, &b, &err), KVIK_ERR_INVALID_ARG);
    CHECK(b.ids == NULL && b.n == 0);
    pool_free(pool);
    for (int i = 0; i < N; i++) free(owned[i]);
    free(buf);
    tokenizer_free(tok);
}

/* ---- the commands ------------------------------------------------------------- */

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

TEST(speed_cli_tokenize_detokenize) {
    char vocab[4096], args[16384], out[8192], err[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-gpt-2.gguf", test_env("KVIK_FIXTURES"));
    if (access(vocab, R_OK) != 0) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return;
    }
    /* ids from the fixture's golden data: "Hello world" -> 15496 995 */
    snprintf(args, sizeof args, "tokenize -m '%s' -p 'Hello world'", vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "15496 995\n");
    snprintf(args, sizeof args, "tokenize -m '%s' -p ' Hello, world!'", vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "18435 11 995 0\n");
    snprintf(args, sizeof args, "tokenize -m '%s' -p ''", vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "\n");
    /* --pieces: one token a line, escaped */
    snprintf(args, sizeof args, "tokenize -m '%s' --pieces -p \"$(printf ' it'\\''s\\tok\\n\\360\\237\\246\\231')\"", vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "\t' it'\n") != NULL);
    CHECK(strstr(out, "\t'\\'s'\n") != NULL);
    CHECK(strstr(out, "\t'\\t'\n") != NULL || strstr(out, "'\\tok'") != NULL);
    CHECK(strstr(out, "\\xf0") != NULL); /* the emoji's bytes are split over byte tokens */
    /* -f FILE gives what -p gives */
    char path[64];
    snprintf(path, sizeof path, "/tmp/kvik-tokspeed-%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("Hello world", f);
    fclose(f);
    snprintf(args, sizeof args, "tokenize -m '%s' -f '%s'", vocab, path);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "15496 995\n");
    remove(path);
    /* detokenize: separate, quoted and comma-separated ids */
    snprintf(args, sizeof args, "detokenize -m '%s' 15496 995", vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "Hello world\n");
    snprintf(args, sizeof args, "detokenize -m '%s' '18435 11 995,0'", vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, " Hello, world!\n");
    /* round trip through a pipe */
    snprintf(args, sizeof args, "tokenize -m '%s' -p 'naïve café 日本語' | '%s' detokenize -m '%s' -", vocab,
             test_env("KVIK_BIN"), vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "naïve café 日本語\n");

    /* special tokens: plain text unless --parse-special; BOS/EOS only with --add-special */
    char sc[4096];
    snprintf(sc, sizeof sc, "%s/vocab/ggml-vocab-starcoder.gguf", test_env("KVIK_FIXTURES"));
    snprintf(args, sizeof args, "tokenize -m '%s' --parse-special -p 'a<|endoftext|>b'", sc);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "102 0 103\n");
    snprintf(args, sizeof args, "tokenize -m '%s' -p 'a<|endoftext|>b'", sc);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, " 0 ") == NULL && lines(out) == 1 && strlen(out) > 8);
    snprintf(args, sizeof args, "detokenize -m '%s' 102 0 103", sc);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "a<|endoftext|>b\n");
    snprintf(args, sizeof args, "detokenize -m '%s' --skip-special 102 0 103", sc);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "ab\n");

    /* bad arguments: exit 2, one line on stderr, nothing on stdout */
    const char *bad[] = {
        "tokenize -m '%s'", "tokenize -m '%s' -p a -f b", "tokenize -m '%s' -p", "tokenize -m '%s' -p a --nope",
        "detokenize -m '%s'", "detokenize -m '%s' 12x", "detokenize -m '%s' -- 1", "detokenize -m '%s' -5",
        "detokenize -m '%s' 99999999", "detokenize -m '%s' 1 --bogus",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char a[8192];
        snprintf(a, sizeof a, bad[i], vocab);
        int st = test_run_kvik(a, out, sizeof out, err, sizeof err);
        CHECK_MSG(st == 2, "kvik %s: exit %d, want 2", bad[i], st);
        CHECK_MSG(lines(err) == 1, "kvik %s: stderr has %d lines: %s", bad[i], lines(err), err);
        CHECK_MSG(out[0] == 0, "kvik %s: wrote to stdout", bad[i]);
    }
    /* runtime errors: exit 1, one line */
    CHECK_EQ_INT(test_run_kvik("tokenize -m /nonexistent.gguf -p x", out, sizeof out, err, sizeof err), 1);
    CHECK_EQ_INT(lines(err), 1);
    snprintf(args, sizeof args, "tokenize -m '%s' -f /nonexistent.txt", vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 1);
    CHECK_EQ_INT(lines(err), 1);
    snprintf(args, sizeof args, "tokenize -m '%s.inp' -p x", vocab); /* not a GGUF */
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 1);
    CHECK_EQ_INT(lines(err), 1);
}

/* ---- the benchmark ------------------------------------------------------------- */

static double json_num(const char *s, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(s, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

TEST(speed_bench_corpus_documents) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/kvik-tokspeed-doc-%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("a\n\nb\n\n\nc", f);
    for (int i = 0; i < 2000; i++) fputs("0123456789\n", f); /* one 22 KB paragraph */
    fclose(f);
    struct tokbench_corpus c;
    REQUIRE(tokbench_corpus_load(path, &c, NULL) == KVIK_OK);
    remove(path);
    REQUIRE(c.n_docs == 4);
    CHECK(c.docs[0].len == 3 && memcmp(c.docs[0].text, "a\n\n", 3) == 0);
    CHECK(c.docs[1].len == 3 && memcmp(c.docs[1].text, "b\n\n", 3) == 0);
    /* "\nc" + lines: cut after the first newline at or past 16 KiB */
    CHECK(c.docs[2].text[0] == '\n' && c.docs[2].len > TOKBENCH_DOC_MAX && c.docs[2].len <= TOKBENCH_DOC_MAX + 11);
    CHECK(c.docs[2].text[c.docs[2].len - 1] == '\n');
    CHECK_EQ_INT(c.docs[3].text + c.docs[3].len - c.data, (int64_t)c.size);
    size_t got;
    CHECK_EQ_INT(tokbench_prefix_docs(&c, 4, &got), 2);
    CHECK_EQ_INT(got, 6);
    tokbench_corpus_free(&c);
    CHECK_EQ_INT(tokbench_crc32(0, "123456789", 9), 0xCBF43926); /* the CRC-32 check value */
}

TEST(speed_bench_tokenizer_json) {
    char vocab[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-starcoder.gguf", test_env("KVIK_FIXTURES"));
    struct tokenizer *tok = load_vocab("ggml-vocab-starcoder");
    if (!tok) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/kvik-tokspeed-corpus-%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    uint64_t rng = 17;
    for (int p = 0; p < 40; p++) {
        char *t = random_text(&rng, 300 + test_rand_u64(&rng) % 700, 200, false);
        fprintf(f, "%s\n\n", t);
        free(t);
    }
    fclose(f);
    /* what tokenizer_encode gives, document by document */
    struct tokbench_corpus c;
    REQUIRE(tokbench_corpus_load(path, &c, NULL) == KVIK_OK);
    int64_t tokens = 0;
    uint32_t crc = 0;
    for (int64_t i = 0; i < c.n_docs; i++) {
        int32_t *ids;
        int64_t n = encode_with(tok, NULL, false, c.docs[i].text, c.docs[i].len, &ids);
        for (int64_t k = 0; k < n; k++) {
            uint8_t b[4] = {(uint8_t)ids[k], (uint8_t)(ids[k] >> 8), (uint8_t)(ids[k] >> 16), (uint8_t)(ids[k] >> 24)};
            crc = tokbench_crc32(crc, b, 4);
        }
        tokens += n;
        free(ids);
    }
    char args[8192], out[16384], err[4096];
    snprintf(args, sizeof args, "bench tokenizer -m '%s' -f '%s' -t 2 -r 1 --json --no-peer", vocab, path);
    int st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    remove(path);
    CHECK_MSG(st == 0, "exit %d: %s", st, err);
    CHECK_EQ_INT(lines(out), 1);
    CHECK_EQ_INT((int64_t)json_num(out, "tokens"), tokens);
    CHECK_EQ_INT((uint32_t)json_num(out, "crc32"), crc);
    CHECK_EQ_INT((int64_t)json_num(out, "bytes"), (int64_t)c.size);
    CHECK_EQ_INT((int64_t)json_num(out, "docs"), c.n_docs);
    CHECK(json_num(out, "threads") == 2 && json_num(out, "reps") == 1);
    double hit = json_num(out, "cache_hit_rate");
    CHECK(hit > 0 && hit <= 1);
    static const char *const tests[] = {"stream_1t", "stream_nt", "stream_nocache_1t", "repeat_1t", "repeat_nt"};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\"%s\":{", tests[i]);
        const char *p = strstr(out, pat);
        CHECK_MSG(p && json_num(p, "mb_s") > 0 && json_num(p, "tok_s") > 0, "%s missing or zero", tests[i]);
    }
    const char *fc = strstr(out, "\"first_1t\":{");
    CHECK(fc && json_num(fc, "load_ms") > 0 && json_num(fc, "first_ms") > 0 && json_num(fc, "process_ms") > 0);
    CHECK(strstr(out, "\"peer\":null") != NULL);
    /* bad arguments */
    CHECK_EQ_INT(test_run_kvik("bench tokenizer -t 2", out, sizeof out, err, sizeof err), 2);
    CHECK_EQ_INT(lines(err), 1);
    snprintf(args, sizeof args, "bench tokenizer -m '%s' -f /nonexistent.txt --no-peer", vocab);
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 1);
    CHECK_EQ_INT(lines(err), 1);
    tokbench_corpus_free(&c);
    tokenizer_free(tok);
}
