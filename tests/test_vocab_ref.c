/*
 * test_vocab_ref.c — kvik's tokenizer on the real vocabularies of the
 * registry's models (Gemma 3 270M: SentencePiece, 262,144 tokens;
 * Qwen2.5-Coder 0.5B and 1.5B: byte-level BPE, qwen2 pre-tokenizer) against
 * llama.cpp's ids (tests/data/vocab_ref, made by scripts/gen_vocab_ref.py):
 *
 *   texts    a fixed list of texts, encoded with parse_special off and
 *            add_special off and on: the ids must be llama.cpp's exactly;
 *   chat     the golden conversations of tests/data/chat through
 *            chat_detect_gguf and chat_encode on the model file: the
 *            template's control tokens as ids, contents as plain text, BOS
 *            as the vocabulary asks;
 *   strings  the 10,899 strings of tests/data/tokenizer_parity/strings.lps:
 *            the hash of kvik's ids must be the hash of llama.cpp's.
 *
 * Where llama.cpp departs from the model's own tokenizer the reference is
 * llama.cpp with the model's rule applied around it: NFC before encoding
 * for Qwen2, Gemma 3's user-defined "</s>" as its token (README.md there).
 *
 * The models come from the model cache (`make models-test`); a test whose
 * model is not there skips.
 */
#include <stdlib.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

/* ---- the model ------------------------------------------------------------- */

struct ref_model {
    struct gguf *g;
    struct tokenizer *tok;
};

/* Opens the cached FILE and loads its tokenizer; false when skipped (not
 * cached) or failed (reported). */
static bool ref_open(const char *file, struct ref_model *m) {
    *m = (struct ref_model){0};
    char path[4096];
    if (!test_cached_model(file, path, sizeof path)) return false;
    struct kvik_err err = {0};
    if (gguf_open(path, &m->g, &err) != KVIK_OK || tokenizer_load(m->g, &m->tok, &err) != KVIK_OK) {
        test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
        gguf_close(m->g);
        return false;
    }
    return true;
}

static void ref_close(struct ref_model *m) {
    tokenizer_free(m->tok);
    gguf_close(m->g);
}

/* ---- the ids file ------------------------------------------------------------ */

struct ids_list {
    int32_t *v;
    size_t n, cap;
};

static bool ids_push(struct ids_list *l, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        int32_t *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return false;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return true;
}

/* "ids 1 2 3" -> l; false on a malformed line. */
static bool parse_ids(const char *line, struct ids_list *l) {
    l->n = 0;
    if (strncmp(line, "ids", 3) != 0) return false;
    const char *p = line + 3;
    while (*p == ' ') p++;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || !ids_push(l, (int32_t)v)) return false;
        p = end;
        while (*p == ' ') p++;
    }
    return true;
}

/* Hex (or "-" for nothing) -> a malloc'd NUL-terminated buffer, its length
 * in *len; NULL if malformed. */
static char *unhex(const char *h, size_t *len) {
    size_t n = strcspn(h, " \n");
    if (n == 1 && h[0] == '-') n = 0;
    if (n % 2) return NULL;
    char *out = malloc(n / 2 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) {
            free(out);
            return NULL;
        }
        out[i] = (char)v;
    }
    out[n / 2] = 0;
    *len = n / 2;
    return out;
}

/* The ids file as lines (the buffer is cut at each newline). */
struct ref_lines {
    char *buf;
    char **line; // [n]
    size_t n;
};

static bool read_lines(const char *name, const char *ext, struct ref_lines *r) {
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab_ref/%s.%s", test_env("KVIK_TEST_DATA"), name, ext);
    size_t len = 0;
    *r = (struct ref_lines){0};
    r->buf = test_slurp(path, &len);
    if (!r->buf) {
        test_fail(__FILE__, __LINE__, "missing %s", path);
        return false;
    }
    size_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += r->buf[i] == '\n';
    r->line = malloc(cap * sizeof *r->line);
    if (!r->line) {
        free(r->buf);
        return false;
    }
    char *p = r->buf;
    while (*p) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (*p && *p != '#') r->line[r->n++] = p;
        if (!nl) break;
        p = nl + 1;
    }
    return true;
}

static void free_lines(struct ref_lines *r) {
    free(r->line);
    free(r->buf);
}

/* Prints where two id sequences part (a few ids around it). */
static void show_diff(const char *what, const int32_t *got, size_t n_got, const int32_t *want,
                      size_t n_want) {
    size_t k = 0;
    while (k < n_got && k < n_want && got[k] == want[k]) k++;
    size_t from = k > 4 ? k - 4 : 0;
    printf("    %s: %zu ids, llama.cpp %zu; first difference at %zu\n      kvik:     ", what, n_got,
           n_want, k);
    for (size_t i = from; i < n_got && i < from + 16; i++) printf(" %d", got[i]);
    printf("\n      llama.cpp:");
    for (size_t i = from; i < n_want && i < from + 16; i++) printf(" %d", want[i]);
    printf("\n");
}

static bool same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* Encodes text with kvik into l (grown as needed); false on an error. */
static bool kvik_encode(const struct tokenizer *tok, const char *text, size_t len, bool add_special,
                        struct ids_list *l) {
    for (;;) {
        int64_t n = tokenizer_encode(tok, text, len, add_special, false, l->v, (int64_t)l->cap);
        if (n < 0) return false;
        if ((size_t)n <= l->cap) {
            l->n = (size_t)n;
            return true;
        }
        int32_t *nv = realloc(l->v, (size_t)n * sizeof *nv);
        if (!nv) return false;
        l->v = nv;
        l->cap = (size_t)n;
    }
}

/* The header lines must describe the loaded vocabulary. */
static void check_header(const struct ref_lines *r, const struct tokenizer *tok) {
    long n_vocab = -1, bos = -1, add_bos = -1;
    for (size_t i = 0; i < r->n && i < 4; i++) {
        sscanf(r->line[i], "n_vocab %ld", &n_vocab);
        sscanf(r->line[i], "bos %ld add_bos %ld", &bos, &add_bos);
    }
    CHECK_EQ_INT(n_vocab, tokenizer_n_vocab(tok));
    CHECK_EQ_INT(bos, tokenizer_bos(tok));
    CHECK_EQ_INT(add_bos, tokenizer_add_bos(tok) ? 1 : 0);
}

/* ---- texts and chats ------------------------------------------------------- */

static void run_texts(const char *name, const char *file) {
    struct ref_model m;
    if (!ref_open(file, &m)) return;
    struct ref_lines r;
    if (!read_lines(name, "ids", &r)) {
        ref_close(&m);
        return;
    }
    check_header(&r, m.tok);
    struct ids_list want = {0}, got = {0};
    int compared = 0, passed = 0;
    for (size_t i = 0; i + 1 < r.n; i++) {
        int add_special;
        char hex[2];
        if (sscanf(r.line[i], "text %d %1s", &add_special, hex) != 2) continue;
        const char *h = strchr(r.line[i] + 5, ' ') + 1;
        size_t len = 0;
        char *text = unhex(h, &len);
        bool ok = text && parse_ids(r.line[i + 1], &want);
        CHECK_MSG(ok, "%s.ids line %zu: malformed", name, i + 1);
        if (ok) {
            compared++;
            ok = kvik_encode(m.tok, text, len, add_special != 0, &got);
            CHECK_MSG(ok, "%s: encode failed", name);
            if (ok && same_ids(got.v, got.n, want.v, want.n)) {
                passed++;
            } else if (ok) {
                printf("    text %.60s%s (add_special %d)\n", text, len > 60 ? "..." : "", add_special);
                show_diff(name, got.v, got.n, want.v, want.n);
            }
        }
        free(text);
    }
    printf("    %s texts: %d/%d match the reference\n", name, passed, compared);
    CHECK(compared >= 100);
    CHECK_EQ_INT(passed, compared);
    free(want.v);
    free(got.v);
    free_lines(&r);
    ref_close(&m);
}

static void run_chats(const char *name, const char *file) {
    struct ref_model m;
    if (!ref_open(file, &m)) return;
    struct ref_lines r;
    if (!read_lines(name, "ids", &r)) {
        ref_close(&m);
        return;
    }
    struct kvik_err err = {0};
    struct chat_format fmt;
    kvik_status st = chat_detect_gguf(m.g, &fmt, &err);
    CHECK_MSG(st == KVIK_OK, "%s: %s", name, err.msg);
    CHECK(!fmt.approximate);
    struct ids_list want = {0};
    int compared = 0, passed = 0;
    for (size_t i = 0; st == KVIK_OK && i < r.n; i++) {
        char conv[64];
        int gen, n;
        if (sscanf(r.line[i], "chat %63s %d %d", conv, &gen, &n) != 3) continue;
        if (n < 0 || n > 16 || i + (size_t)n + 1 >= r.n) {
            CHECK_MSG(false, "%s.ids: malformed chat record %s", name, conv);
            break;
        }
        struct chat_msg msgs[16];
        char *roles[16] = {0}, *contents[16] = {0};
        bool ok = true;
        for (int k = 0; k < n; k++) {
            const char *line = r.line[i + 1 + (size_t)k];
            const char *sp = strchr(line + 4, ' ');
            size_t len;
            if (strncmp(line, "msg ", 4) != 0 || !sp) {
                ok = false;
                break;
            }
            roles[k] = strndup(line + 4, (size_t)(sp - (line + 4)));
            contents[k] = unhex(sp + 1, &len);
            ok = ok && roles[k] && contents[k];
            msgs[k] = (struct chat_msg){roles[k], contents[k]};
        }
        ok = ok && parse_ids(r.line[i + 1 + (size_t)n], &want);
        CHECK_MSG(ok, "%s.ids: malformed chat record %s", name, conv);
        if (ok) {
            int32_t *ids = NULL;
            size_t n_ids = 0;
            compared++;
            st = chat_encode(&fmt, m.tok, msgs, (size_t)n, gen != 0, &ids, &n_ids, &err);
            CHECK_MSG(st == KVIK_OK, "%s %s: %s", name, conv, err.msg);
            if (st == KVIK_OK && same_ids(ids, n_ids, want.v, want.n)) {
                passed++;
            } else if (st == KVIK_OK) {
                printf("    chat %s (gen %d)\n", conv, gen);
                show_diff(name, ids, n_ids, want.v, want.n);
            }
            free(ids);
        }
        for (int k = 0; k < n; k++) {
            free(roles[k]);
            free(contents[k]);
        }
        i += (size_t)n + 1;
    }
    printf("    %s chat (%s): %d/%d match the reference\n", name, chat_template_name(fmt.tmpl), passed,
           compared);
    CHECK(compared >= 10);
    CHECK_EQ_INT(passed, compared);
    chat_format_free(&fmt);
    free(want.v);
    free_lines(&r);
    ref_close(&m);
}

/* ---- strings.lps ------------------------------------------------------------- */

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t fnv1a(uint32_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x01000193u;
    return h;
}

static uint32_t hash_ids(const int32_t *ids, size_t n) {
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
        h = fnv1a(h, b, 4);
    }
    return h;
}

static void run_strings(const char *name, const char *file) {
    struct ref_model m;
    if (!ref_open(file, &m)) return;
    char path[1024];
    size_t size = 0, hsize = 0;
    snprintf(path, sizeof path, "%s/tokenizer_parity/strings.lps", test_env("KVIK_TEST_DATA"));
    uint8_t *s = (uint8_t *)test_slurp(path, &size);
    snprintf(path, sizeof path, "%s/vocab_ref/%s.hash", test_env("KVIK_TEST_DATA"), name);
    uint8_t *h = (uint8_t *)test_slurp(path, &hsize);
    uint32_t n = s && size >= 16 ? rd32(s + 8) : 0;
    bool ok = s && h && size >= 16 && memcmp(s, "KVTPSTR1", 8) == 0 && hsize == 24 + 3 * (size_t)n &&
              memcmp(h, "KVTPHSH2", 8) == 0 && rd32(h + 8) == n;
    CHECK_MSG(ok, "%s or strings.lps missing or malformed", path);
    if (ok) CHECK_MSG(rd32(h + 12) == fnv1a(0x811C9DC5u, s, size), "%s: made for another strings.lps", path);
    uint32_t flags = ok ? rd32(h + 16) : 0, passed = 0, total = 0, shown = 0;
    struct ids_list got = {0};
    size_t pos = 16;
    for (uint32_t i = 0; ok && i < n; i++) {
        if (size - pos < 6 || size - pos - 6 < rd32(s + pos)) {
            CHECK_MSG(false, "strings.lps truncated at string %u", i);
            break;
        }
        uint32_t len = rd32(s + pos);
        const char *text = (const char *)s + pos + 6;
        bool invalid = s[pos + 4] & 1;
        pos += 6 + (size_t)len;
        if ((flags & 1) && invalid) continue;
        total++;
        const uint8_t *w = h + 24 + 3 * (size_t)i;
        uint32_t want = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16;
        if (kvik_encode(m.tok, text, len, false, &got) && (hash_ids(got.v, got.n) & 0xFFFFFFu) == want) {
            passed++;
        } else if (shown++ < 3) {
            printf("    #%u (%u bytes) %.*s\n      kvik:", i, len, len < 80 ? (int)len : 80, text);
            for (size_t k = 0; k < got.n && k < 24; k++) printf(" %d", got.v[k]);
            printf("\n      reference: python3 scripts/gen_vocab_ref.py --show %s %u\n", name, i);
        }
    }
    printf("    %s strings: %u/%u match the reference\n", name, passed, total);
    CHECK(total >= 10000);
    CHECK_EQ_INT(passed, total);
    free(got.v);
    free(s);
    free(h);
    ref_close(&m);
}

#define GEMMA3 "gemma3-270m", "gemma-3-270m-q4_k_m.gguf"
#define QWEN05 "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
#define QWEN15 "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

TEST(vocab_ref_gemma3_270m_texts) { run_texts(GEMMA3); }
TEST(vocab_ref_gemma3_270m_chat) { run_chats(GEMMA3); }
TEST(vocab_ref_gemma3_270m_strings) { run_strings(GEMMA3); }
TEST(vocab_ref_qwen25_coder_05b_texts) { run_texts(QWEN05); }
TEST(vocab_ref_qwen25_coder_05b_chat) { run_chats(QWEN05); }
TEST(vocab_ref_qwen25_coder_05b_strings) { run_strings(QWEN05); }
TEST(vocab_ref_qwen25_coder_15b_texts) { run_texts(QWEN15); }
TEST(vocab_ref_qwen25_coder_15b_chat) { run_chats(QWEN15); }
TEST(vocab_ref_qwen25_coder_15b_strings) { run_strings(QWEN15); }
