/*
 * test_pretok.c — the pre-tokenizers (src/tokenizer/pretok*.c):
 *  - parity with Hugging Face tokenizers: for every tokenizer.ggml.pre name
 *    in the golden files, loading a vocabulary with that name picks a
 *    pre-tokenizer whose word split equals HF's on the whole corpus
 *    (tests/data/pretok, made by scripts/gen_pretok_golden.py);
 *  - bytes that are not UTF-8 split exactly like a control character;
 *  - random bytes and huge inputs split into contiguous, non-empty pieces
 *    that cover the text and (Falcon's byte stages aside) never cut a
 *    character;
 *  - unknown names are load errors that name them;
 *  - the letter subcategory flags;
 *  - throughput of each pre-tokenizer (printed).
 */
#include <stdlib.h>
#include <time.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer_int.h"
#include "tokenizer/unicode.h"

/* Piece lengths of one split. */
struct pieces {
    size_t *len;
    size_t n, cap, next; /* next: where the following piece must start */
    bool gap;            /* a piece did not start where the last one ended */
};

static bool collect(void *ctx, size_t start, size_t end) {
    struct pieces *p = ctx;
    if (start != p->next || end <= start) p->gap = true;
    p->next = end;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->len = realloc(p->len, p->cap * sizeof *p->len);
    }
    p->len[p->n++] = end - start;
    return true;
}

static void split(enum pretok_kind kind, const uint8_t *s, size_t n, struct pieces *p) {
    p->n = 0;
    p->next = 0;
    p->gap = false;
    CHECK(pretok_split(kind, s, n, collect, p));
    CHECK_MSG(!p->gap && p->next == n, "kind %d: pieces do not tile the text", (int)kind);
}

/* The corpus: one escaped string per line (see gen_pretok_golden.py). */
#define MAX_STRINGS 1024
struct corpus {
    char *file;
    int n;
    uint8_t *str[MAX_STRINGS];
    size_t len[MAX_STRINGS];
};

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static uint32_t hexn(const char *p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) v = v << 4 | (uint32_t)hexval(p[i]);
    return v;
}

/* Unescapes line[0..n) into a new buffer. */
static uint8_t *unescape(const char *line, size_t n, size_t *out_len) {
    uint8_t *o = malloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (line[i] != '\\' || i + 1 >= n) {
            o[k++] = (uint8_t)line[i];
            continue;
        }
        char e = line[++i];
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits && i + (size_t)digits < n) {
            uint32_t v = hexn(line + i + 1, digits);
            if (e == 'x') o[k++] = (uint8_t)v;
            else k += (size_t)utf8_encode(v, o + k);
            i += (size_t)digits;
        } else {
            o[k++] = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : (uint8_t)e;
        }
    }
    *out_len = k;
    return o;
}

static void corpus_free(struct corpus *c) {
    for (int i = 0; i < c->n; i++) free(c->str[i]);
    free(c->file);
    memset(c, 0, sizeof *c);
}

static bool corpus_load(struct corpus *c) {
    memset(c, 0, sizeof *c);
    char path[4096];
    snprintf(path, sizeof path, "%s/pretok/corpus.txt", test_env("KVIK_TEST_DATA"));
    size_t len;
    c->file = test_slurp(path, &len);
    if (!c->file) {
        test_fail(__FILE__, __LINE__, "cannot read %s", path);
        return false;
    }
    for (char *p = c->file, *end = c->file + len; p < end && c->n < MAX_STRINGS;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        c->str[c->n] = unescape(p, (size_t)(nl - p), &c->len[c->n]);
        c->n++;
        p = nl + 1;
    }
    CHECK_MSG(c->n > 400, "%s: only %d strings", path, c->n);
    return c->n > 400;
}

/* s[0..n) for a message: at most 40 bytes, controls as \xHH. */
static const char *printable(const uint8_t *s, size_t n, char out[200]) {
    size_t o = 0;
    for (size_t i = 0; i < n && i < 40 && o < 190; i++) {
        if (s[i] < 0x20 || s[i] == 0x7F) o += (size_t)snprintf(out + o, 200 - o, "\\x%02x", s[i]);
        else out[o++] = (char)s[i];
    }
    out[o] = 0;
    return out;
}

/* Loads a tiny vocabulary with tokenizer.ggml.pre = pre; its kind, or -1
 * with the load status in *st. */
static int kind_of(const char *pre, kvik_status *st, struct kvik_err *err) {
    struct gguf_writer *w = gguf_writer_new();
    const char *toks[] = {"a", "b", "ab"}, *merges[] = {"a b"};
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    *st = gguf_writer_write_memory(w, &buf, &size, err);
    if (*st == KVIK_OK) *st = gguf_open_memory(buf, size, &g, err);
    if (*st == KVIK_OK) *st = tokenizer_load(g, &tok, err);
    int kind = tok ? (int)tok->pretok : -1;
    tokenizer_free(tok);
    gguf_close(g);
    free(buf);
    gguf_writer_free(w);
    return kind;
}

/* ---- parity with Hugging Face ------------------------------------------------- */

static const char *const k_golden[] = {
    "gpt2",   "starcoder", "llama3",       "qwen2",          "qwen35",      "gpt4o",  "tekken",
    "falcon", "bloom",     "deepseek-llm", "deepseek-coder", "deepseek-v3", "viking",
};

/* Checks one golden file; returns the kind its names load as, or -1. */
static int check_golden(const struct corpus *c, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/pretok/%s.txt", test_env("KVIK_TEST_DATA"), file);
    size_t len;
    char *text = test_slurp(path, &len);
    if (!text) {
        test_fail(__FILE__, __LINE__, "cannot read %s", path);
        return -1;
    }
    /* header: the names, all of which must load as one kind */
    int kind = -1, n_names = 0;
    char *line = text;
    while (*line == '#') {
        char *nl = strchr(line, '\n');
        if (!nl) break;
        *nl = 0;
        if (strncmp(line, "# names: ", 9) == 0) {
            for (char *name = strtok(line + 9, " "); name; name = strtok(NULL, " ")) {
                kvik_status st;
                struct kvik_err err = {0};
                int k = kind_of(name, &st, &err);
                CHECK_MSG(st == KVIK_OK, "%s: pre-tokenizer \"%s\" does not load: %s", file, name,
                          err.msg);
                if (kind < 0) kind = k;
                CHECK_MSG(k == kind, "%s: \"%s\" loads as kind %d, the others as %d", file, name,
                          k, kind);
                n_names++;
            }
        }
        line = nl + 1;
    }
    if (n_names == 0 || kind < 0) {
        test_fail(__FILE__, __LINE__, "%s: no names that load", file);
        free(text);
        return -1;
    }
    struct pieces got = {0};
    int pass = 0, i = 0;
    for (; i < c->n && *line; i++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        size_t want[4096], nw = 0;
        for (char *q = line; *q && nw < 4096;) {
            char *e;
            want[nw++] = (size_t)strtoul(q, &e, 10);
            if (e == q) break;
            q = e;
        }
        split((enum pretok_kind)kind, c->str[i], c->len[i], &got);
        bool ok = got.n == nw;
        for (size_t k = 0; ok && k < nw; k++) ok = got.len[k] == want[k];
        if (ok) {
            pass++;
        } else {
            char g[200] = "", w[200] = "";
            for (size_t k = 0, o = 0; k < got.n && o < 150; k++)
                o += (size_t)snprintf(g + o, sizeof g - o, " %zu", got.len[k]);
            for (size_t k = 0, o = 0; k < nw && o < 150; k++)
                o += (size_t)snprintf(w + o, sizeof w - o, " %zu", want[k]);
            char shown[200];
            test_fail(__FILE__, __LINE__, "%s: string %d \"%s\": got%s, want%s", file, i + 1,
                      printable(c->str[i], c->len[i], shown), g, w);
        }
        line = nl ? nl + 1 : line + strlen(line);
    }
    CHECK_MSG(i == c->n, "%s: %d lines for %d strings", file, i, c->n);
    printf("    pretok parity %-14s %d/%d strings, %d names\n", file, pass, c->n, n_names);
    free(got.len);
    free(text);
    return kind;
}

TEST(pretok_parity_hf) {
    struct corpus c;
    if (!corpus_load(&c)) {
        corpus_free(&c);
        return;
    }
    bool seen[PRETOK_COUNT] = {0};
    for (size_t f = 0; f < sizeof k_golden / sizeof k_golden[0]; f++) {
        int kind = check_golden(&c, k_golden[f]);
        if (kind >= 0 && kind < PRETOK_COUNT) {
            CHECK_MSG(!seen[kind], "%s: kind %d already has a golden file", k_golden[f], kind);
            seen[kind] = true;
        }
    }
    for (int k = 0; k < PRETOK_COUNT; k++) CHECK_MSG(seen[k], "kind %d has no golden data", k);
    corpus_free(&c);
}

/* ---- bytes that are not UTF-8 ------------------------------------------------- */

/* A few splits spelled out: the rule is that such a byte is one character
 * of category "other", like U+0001. */
static void expect_split(enum pretok_kind kind, const char *s, const size_t *want, size_t nw) {
    struct pieces p = {0};
    split(kind, (const uint8_t *)s, strlen(s), &p);
    bool ok = p.n == nw;
    for (size_t k = 0; ok && k < nw; k++) ok = p.len[k] == want[k];
    CHECK_MSG(ok, "kind %d: \"%s\" splits into %zu pieces, not as expected", (int)kind, s, p.n);
    free(p.len);
}

TEST(pretok_invalid_utf8_examples) {
    expect_split(PRETOK_GPT2, "a\xff" "b", (size_t[]){1, 1, 1}, 3);
    expect_split(PRETOK_GPT2, " \xff\xfe!", (size_t[]){4}, 1);
    expect_split(PRETOK_LLAMA3, "\xff" "abc", (size_t[]){4}, 1);
    expect_split(PRETOK_LLAMA3, "ab\xc3" "cd", (size_t[]){2, 3}, 2);
    expect_split(PRETOK_QWEN2, "\xe2\x82" "12", (size_t[]){2, 1, 1}, 3);
    expect_split(PRETOK_BLOOM, "ab\xff" "c d", (size_t[]){4, 2}, 2);
    expect_split(PRETOK_DEEPSEEK_V3, "\xff\xff" "ab", (size_t[]){1, 3}, 2);
    expect_split(PRETOK_FALCON, "\xc2\xb2", (size_t[]){1, 1}, 2); /* "²" cut at its numeric byte */
}

/* Every corpus string with U+0001 inserted at some character boundaries
 * splits exactly like the same string with an invalid byte there. */
TEST(pretok_invalid_utf8_is_other) {
    struct corpus c;
    if (!corpus_load(&c)) {
        corpus_free(&c);
        return;
    }
    static const char *const bad[] = {"\xff", "\xc0", "\xc3", "\xe2\x82", "\x80", "\xf4\x90"};
    struct pieces pa = {0}, pb = {0};
    uint8_t *a = malloc(8192), *b = malloc(8192);
    int mismatches = 0;
    for (int kind = 0; kind < PRETOK_COUNT; kind++) {
        for (int i = 0; i < c.n; i++) {
            if (c.len[i] > 2000) continue;
            const char *ins = bad[(size_t)i % (sizeof bad / sizeof bad[0])];
            size_t nins = strlen(ins), na = 0, nb = 0, nchar = 0;
            for (size_t j = 0; j <= c.len[i];) {
                if (nchar++ % 5 == (size_t)i % 5) {
                    for (size_t k = 0; k < nins; k++) a[na++] = 0x01;
                    memcpy(b + nb, ins, nins);
                    nb += nins;
                }
                if (j == c.len[i]) break;
                struct ucp u = utf8_decode(c.str[i] + j, c.len[i] - j);
                memcpy(a + na, c.str[i] + j, u.len);
                memcpy(b + nb, c.str[i] + j, u.len);
                na += u.len;
                nb += u.len;
                j += u.len;
            }
            split((enum pretok_kind)kind, a, na, &pa);
            split((enum pretok_kind)kind, b, nb, &pb);
            bool same = pa.n == pb.n && na == nb;
            for (size_t k = 0; same && k < pa.n; k++) same = pa.len[k] == pb.len[k];
            if (!same && mismatches++ < 5)
                test_fail(__FILE__, __LINE__,
                          "kind %d, string %d: invalid bytes split unlike U+0001", kind, i + 1);
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    free(a);
    free(b);
    free(pa.len);
    free(pb.len);
    corpus_free(&c);
}

/* ---- robustness --------------------------------------------------------------- */

/* True if every piece boundary is a character boundary of s. */
static bool on_char_boundaries(const uint8_t *s, size_t n, const struct pieces *p) {
    size_t at = 0, pos = 0;
    for (size_t k = 0; k < p->n; k++) {
        at += p->len[k];
        while (pos < at) pos += utf8_decode(s + pos, n - pos).len;
        if (pos != at) return false;
    }
    return true;
}

TEST(pretok_random_bytes) {
    static const char *const frags[] = {
        " ", "  ", "\n", "\r\n", "\t", "a", "Z", "'s", "'T", "1", "123", "!", "/",
        "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xcc\x81", "\xe3\x80\x80", "\xc2\xb2",
        "\xff", "\xe2\x82", "\x80", "\x01", "\xef\xbc\x81", "\xc5\xbf",
    };
    uint64_t rng = 7;
    uint8_t buf[256];
    struct pieces p = {0};
    for (int it = 0; it < 3000; it++) {
        size_t n = 0;
        int parts = (int)(test_rand_u64(&rng) % 24);
        for (int k = 0; k < parts; k++) {
            if (test_rand_u64(&rng) % 4 == 0) {
                buf[n++] = (uint8_t)test_rand_u64(&rng);
            } else {
                const char *f = frags[test_rand_u64(&rng) % (sizeof frags / sizeof frags[0])];
                memcpy(buf + n, f, strlen(f));
                n += strlen(f);
            }
        }
        for (int kind = 0; kind < PRETOK_COUNT; kind++) {
            split((enum pretok_kind)kind, buf, n, &p);
            if (kind != PRETOK_FALCON)
                CHECK_MSG(on_char_boundaries(buf, n, &p), "kind %d cuts a character", kind);
        }
        if (test_failed()) break;
    }
    free(p.len);
}

/* Long runs of one kind of character, 1 MiB each: linear time, no crash. */
TEST(pretok_huge_inputs) {
    size_t n = (size_t)1 << 20;
    uint8_t *s = malloc(n + 1);
    struct pieces p = {0};
    static const char fill[] = {' ', '7', 'a', '\n', '!', '\t'};
    for (size_t f = 0; f < sizeof fill; f++) {
        memset(s, fill[f], n);
        s[n] = 'x';
        for (int kind = 0; kind < PRETOK_COUNT; kind++) split((enum pretok_kind)kind, s, n + 1, &p);
    }
    /* 3-byte characters whose last byte Falcon sees as a digit */
    for (size_t i = 0; i + 3 <= n; i += 3) memcpy(s + i, "\xe3\x80\xb2", 3);
    for (int kind = 0; kind < PRETOK_COUNT; kind++) split((enum pretok_kind)kind, s, n - n % 3, &p);
    free(p.len);
    free(s);
}

/* ---- load errors -------------------------------------------------------------- */

TEST(pretok_unknown_names) {
    static const char *const bad[] = {"qwen2-made-up", "GPT-2", "llama3 ", "deepseek", "kimi-k2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvik_status st;
        struct kvik_err err = {0};
        CHECK_EQ_INT(kind_of(bad[i], &st, &err), -1);
        CHECK_EQ_INT(st, KVIK_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, bad[i]) != NULL, "error \"%s\" does not name \"%s\"", err.msg,
                  bad[i]);
    }
}

/* ---- Unicode subcategories ------------------------------------------------------ */

TEST(pretok_unicode_subcategories) {
    CHECK_EQ_INT(ucat_full('A'), UCAT_LETTER | UCAT_LU);
    CHECK_EQ_INT(ucat_full('z'), UCAT_LETTER | UCAT_LL);
    CHECK_EQ_INT(ucat('A'), UCAT_LETTER);             /* class flags only */
    CHECK_EQ_INT(ucat_full(0x01C5), UCAT_LETTER | UCAT_LT); /* ǅ */
    CHECK_EQ_INT(ucat_full(0x02B0), UCAT_LETTER | UCAT_LM); /* ʰ */
    CHECK_EQ_INT(ucat_full(0x4E2D), UCAT_LETTER | UCAT_LO); /* 中 */
    CHECK_EQ_INT(ucat_full(0x20000), UCAT_LETTER | UCAT_LO); /* CJK extension B range */
    CHECK_EQ_INT(ucat_full(0x00DF), UCAT_LETTER | UCAT_LL); /* ß */
    CHECK_EQ_INT(ucat_full(0x212A), UCAT_LETTER | UCAT_LU); /* Kelvin sign */
    CHECK_EQ_INT(ucat_full(0x1D7D8), UCAT_NUMBER);       /* mathematical double-struck zero */
    CHECK_EQ_INT(ucat_full(0x0903), UCAT_MARK);          /* Devanagari visarga (Mc) */
    CHECK_EQ_INT(ucat_full(0x2028), UCAT_SEPARATOR | UCAT_WHITESPACE);
    CHECK_EQ_INT(ucat_full(0x180E), UCAT_OTHER);         /* no longer a space since 6.3 */
    CHECK_EQ_INT(ucat_full(0xF0000), UCAT_OTHER);        /* private use */
    CHECK_EQ_INT(ucat_full(0xE0100), UCAT_MARK);         /* variation selector 17 */
    /* exactly one major class everywhere, a subcategory exactly for letters */
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        uint16_t f = ucat_full(cp), major = f & 0x7F, sub = f & 0x1F00;
        if ((major & (major - 1)) != 0 || major == 0 || ((major == UCAT_LETTER) != (sub != 0)) ||
            (sub & (sub - 1)) != 0) {
            CHECK_MSG(false, "U+%04X has flags 0x%x", cp, f);
            break;
        }
    }
}

/* ---- throughput --------------------------------------------------------------- */

static bool count_emit(void *ctx, size_t start, size_t end) {
    ++*(size_t *)ctx;
    return end > start;
}

TEST(pretok_throughput) {
    struct corpus c;
    if (!corpus_load(&c)) {
        corpus_free(&c);
        return;
    }
    /* ~1 MiB: English prose and code, with the corpus mixed in */
    static const char prose[] =
        "The quick brown fox jumps over the lazy dog. It's 10:30 and we've got 1,234 items; "
        "don't panic!\n    for (int i = 0; i < n; i++) { sum += a[i] * 2; }\n";
    size_t cap = (size_t)1 << 20, n = 0;
    uint8_t *s = malloc(cap + 8192);
    for (int i = 0; n < cap; i++) {
        memcpy(s + n, prose, sizeof prose - 1);
        n += sizeof prose - 1;
        size_t k = (size_t)i % (size_t)c.n;
        if (i % 4 == 0 && c.len[k] < 4096) {
            memcpy(s + n, c.str[k], c.len[k]);
            n += c.len[k];
        }
    }
    printf("    pretok throughput (MB/s):");
    for (int kind = 0; kind < PRETOK_COUNT; kind++) {
        size_t words = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK(pretok_split((enum pretok_kind)kind, s, n, count_emit, &words));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        CHECK(words > n / 20);
        printf(" %d:%.0f", kind, (double)n / 1e6 / (sec > 0 ? sec : 1e-9));
    }
    printf("\n");
    free(s);
    corpus_free(&c);
}
