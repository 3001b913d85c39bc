/*
 * test_tokenizer_parity.c — randomized tokenizer parity with Hugging Face
 * tokenizers: every string of tests/data/tokenizer_parity/strings.lps
 * (10,899 of them: many scripts, emoji, whitespace runs, digits, code,
 * contractions, punctuation, long words, invalid UTF-8, text that is not
 * NFC, special-token texts such as "<unk>" and "<|endoftext|>") is encoded by kvik
 * (add_special and parse_special off) and the FNV-1a hash of the ids is
 * compared with the one Hugging Face gave (FAMILY.hash). The data, its
 * format and how the reference is built are described in
 * tests/data/tokenizer_parity/README.md and scripts/gen_tokenizer_parity.py.
 *
 * A family is a vocabulary with a pre-tokenizer:
 *   - the default model's vocabulary (SmolLM2) with tokenizer.ggml.pre
 *     replaced by each pre-tokenizer name kvik may support, written to a
 *     vocab-only GGUF in memory with kvik's gguf writer;
 *   - the GPT-2 fixture vocabulary the same way (it has multi-digit tokens,
 *     which SmolLM2's lacks, so digit grouping shows);
 *   - the shared fixture vocabularies and the default model as they are;
 *   - OpenAI's cl100k_base, imported from its tiktoken ranks file
 *     (scripts/fetch-vocab.sh) by vocab_import_tiktoken, against tiktoken
 *     itself (scripts/gen_tiktoken_parity.py).
 * Families needing the default model, the fixtures or the ranks file skip
 * without them.
 * Each prints "passed/total"; a mismatch fails the family and shows the
 * first strings that differ with kvik's ids (the expected ids are only a
 * hash here: scripts/gen_tokenizer_parity.py --show prints them;
 * KVIK_PARITY_SHOW=N shows N strings instead of 3). One family is also
 * encoded from several threads at once, which must agree.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tools/vocab_import.h"

/* ---- the data ------------------------------------------------------------------ */

#define FLAG_INVALID_UTF8 1u  /* strings.lps record flag */
#define HFLAG_SKIPS_INVALID 1u /* hash file flag */

static const char *const category_names[] = {
    "edge", "latin", "cyrillic", "greek", "arabic", "hebrew", "devanagari", "thai",
    "hangul", "cjk", "other-scripts", "emoji", "whitespace", "digits", "numbers", "code",
    "english", "punctuation", "long-words", "invalid-utf8", "special-text", "mixed",
};

struct pstring {
    const char *p;    /* [len] into parity_data.file */
    uint32_t len;
    uint8_t flags;    /* FLAG_INVALID_UTF8 */
    uint8_t category; /* index into category_names */
};

struct parity_data {
    uint8_t *file;       /* strings.lps */
    size_t size;
    uint32_t file_hash;  /* FNV-1a 32 of the whole file */
    uint32_t n;
    struct pstring *s;   /* [n] */
};

static uint32_t fnv1a_bytes(uint32_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x01000193u;
    return h;
}

/* The hash the data files hold: FNV-1a over the ids as int32 little-endian. */
static uint32_t hash_ids(const int32_t *ids, int64_t n) {
    uint32_t h = 0x811C9DC5u;
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
        h = fnv1a_bytes(h, b, 4);
    }
    return h;
}

/* The part of a hash the files keep. */
static uint32_t stored_hash(uint32_t h) { return h & 0xFFFFFFu; }

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint8_t *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL &&
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = n < 0 ? 0 : (size_t)n;
    return buf;
}

/* strings.lps, read once and kept for the whole run (NULL after a failure,
 * which has been reported). */
static const struct parity_data *parity_data(void) {
    static struct parity_data d;
    static bool tried;
    if (tried) {
        if (!d.s) test_fail(__FILE__, __LINE__, "strings.lps did not load (see above)");
        return d.s ? &d : NULL;
    }
    tried = true;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_parity/strings.lps", test_env("KVIK_TEST_DATA"));
    d.file = slurp(path, &d.size);
    if (!d.file || d.size < 16 || memcmp(d.file, "KVTPSTR1", 8) != 0) {
        test_fail(__FILE__, __LINE__, "%s: missing or not a strings file", path);
        return NULL;
    }
    d.n = rd32(d.file + 8);
    d.file_hash = fnv1a_bytes(0x811C9DC5u, d.file, d.size);
    struct pstring *s = calloc(d.n ? d.n : 1, sizeof *s);
    size_t pos = 16;
    for (uint32_t i = 0; s && i < d.n; i++) {
        if (d.size - pos < 6) break;
        uint32_t len = rd32(d.file + pos);
        if (d.size - pos - 6 < len) break;
        s[i] = (struct pstring){(const char *)d.file + pos + 6, len, d.file[pos + 4], d.file[pos + 5]};
        pos += 6 + (size_t)len;
    }
    if (!s || pos != d.size) {
        test_fail(__FILE__, __LINE__, "%s: truncated or malformed at byte %zu", path, pos);
        free(s);
        return NULL;
    }
    d.s = s;
    return &d;
}

/* Expected hashes of one family: [n] u32 (24 significant bits), or NULL
 * (failure reported). */
static uint32_t *load_hashes(const struct parity_data *d, const char *stem, uint32_t *flags) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_parity/%s.hash", test_env("KVIK_TEST_DATA"), stem);
    size_t size;
    uint8_t *f = slurp(path, &size);
    uint32_t *h = NULL;
    if (!f || size < 24 || memcmp(f, "KVTPHSH2", 8) != 0) {
        test_fail(__FILE__, __LINE__, "%s: missing or not a hash file", path);
    } else if (rd32(f + 8) != d->n || size != 24 + 3 * (size_t)d->n) {
        test_fail(__FILE__, __LINE__, "%s: %u hashes for %u strings", path, rd32(f + 8), d->n);
    } else if (rd32(f + 12) != d->file_hash) {
        test_fail(__FILE__, __LINE__, "%s: made for another strings.lps (regenerate both)", path);
    } else if ((h = malloc(4 * (size_t)d->n + 4)) != NULL) {
        *flags = rd32(f + 16);
        for (uint32_t i = 0; i < d->n; i++) {
            const uint8_t *p = f + 24 + 3 * (size_t)i;
            h[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
        }
    }
    free(f);
    return h;
}

/* ---- families ------------------------------------------------------------------ */

enum vocab_src {
    SRC_SMOLLM2,  /* the default model's vocabulary, pre replaced */
    SRC_GPT2,     /* the GPT-2 fixture vocabulary, pre replaced */
    SRC_FIXTURE,  /* a fixture vocabulary as it is */
    SRC_MODEL,    /* the default model as it is */
    SRC_TIKTOKEN, /* cl100k_base imported from tiktoken's ranks file */
};

struct family {
    enum vocab_src src;
    const char *pre;  /* SRC_SMOLLM2 / SRC_GPT2: the tokenizer.ggml.pre written */
    const char *file; /* SRC_FIXTURE: ggml-vocab-<file>.gguf */
    const char *hash; /* <hash>.hash: the Hugging Face reference */
};

/* A copy of src's tokenizer.* keys with tokenizer.ggml.pre = pre, loaded. */
static struct tokenizer *load_with_pre(const char *path, const char *pre) {
    struct kvik_err err = {0};
    struct gguf *src = NULL, *copy = NULL;
    struct gguf_writer *w = NULL;
    struct tokenizer *tok = NULL;
    void *mem = NULL;
    size_t mem_size = 0;
    if (gguf_open(path, &src, &err) != KVIK_OK) goto fail;
    if (!(w = gguf_writer_new())) goto fail;
    for (int64_t i = 0; i < gguf_n_kv(src); i++) {
        const char *key = gguf_key(src, i);
        if (strncmp(key, "tokenizer.", 10) != 0 || strcmp(key, "tokenizer.chat_template") == 0)
            continue;
        if (gguf_writer_set_value(w, key, gguf_kv_value(src, i)) != KVIK_OK) goto fail;
    }
    if (gguf_writer_set_str(w, "tokenizer.ggml.pre", pre) != KVIK_OK) goto fail;
    if (gguf_writer_write_memory(w, &mem, &mem_size, &err) != KVIK_OK) goto fail;
    if (gguf_open_memory(mem, mem_size, &copy, &err) != KVIK_OK) goto fail;
    if (tokenizer_load(copy, &tok, &err) != KVIK_OK) goto fail;
    goto done;
fail:
    test_fail(__FILE__, __LINE__, "pre \"%s\" on %s: %s", pre, path, err.msg[0] ? err.msg : "(no memory)");
done:
    gguf_close(copy);
    free(mem);
    gguf_writer_free(w);
    gguf_close(src);
    return tok;
}

static struct tokenizer *load_file(const char *path) {
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    if (gguf_open(path, &g, &err) != KVIK_OK || tokenizer_load(g, &tok, &err) != KVIK_OK)
        test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
    gguf_close(g);
    return tok;
}

static bool fixture_path(const char *name, char *buf, size_t len) {
    snprintf(buf, len, "%s/vocab/ggml-vocab-%s.gguf", test_env("KVIK_FIXTURES"), name);
    FILE *f = fopen(buf, "rb");
    if (!f) {
        test_skip("vocabulary fixtures not found (KVIK_FIXTURES)");
        return false;
    }
    fclose(f);
    return true;
}

/* cl100k_base's ranks imported as `scripts/fetch-vocab.sh` does, to a
 * temporary file, loaded. */
static struct tokenizer *load_cl100k(void) {
    char ranks[4096], out[64];
    const char *dir = getenv("KVIK_VOCAB_DIR");
    if (dir && *dir) snprintf(ranks, sizeof ranks, "%s/cl100k_base.tiktoken", dir);
    else snprintf(ranks, sizeof ranks, "%s/.cache/kvik/vocab/cl100k_base.tiktoken", test_env("HOME"));
    FILE *f = fopen(ranks, "rb");
    if (!f) {
        test_skip("cl100k_base.tiktoken not cached (scripts/fetch-vocab.sh)");
        return NULL;
    }
    fclose(f);
    static const struct vocab_special sp[] = {{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258},
                                              {"<|fim_middle|>", 100259}, {"<|fim_suffix|>", 100260},
                                              {"<|endofprompt|>", 100276}};
    struct vocab_import_opts o = {.pre = "llama-bpe", .special = sp, .n_special = 5, .bos = -1, .eos = 100257};
    struct kvik_err err = {0};
    snprintf(out, sizeof out, "/tmp/kvik-test-cl100k-%d.gguf", (int)getpid());
    struct tokenizer *tok = NULL;
    if (vocab_import_tiktoken(ranks, out, &o, NULL, &err) != KVIK_OK)
        test_fail(__FILE__, __LINE__, "importing %s: %s", ranks, err.msg);
    else
        tok = load_file(out);
    remove(out);
    return tok;
}

/* The family's tokenizer; NULL when skipped or failed (reported). */
static struct tokenizer *family_load(const struct family *fam) {
    char path[4096];
    switch (fam->src) {
    case SRC_SMOLLM2:
        return test_default_model(path, sizeof path) ? load_with_pre(path, fam->pre) : NULL;
    case SRC_GPT2:
        return fixture_path("gpt-2", path, sizeof path) ? load_with_pre(path, fam->pre) : NULL;
    case SRC_FIXTURE:
        return fixture_path(fam->file, path, sizeof path) ? load_file(path) : NULL;
    case SRC_MODEL:
        return test_default_model(path, sizeof path) ? load_file(path) : NULL;
    case SRC_TIKTOKEN:
        return load_cl100k();
    }
    return NULL;
}

/* ---- encoding and reporting ------------------------------------------------------ */

struct ids_buf {
    int32_t *ids;
    int64_t cap;
};

/* Encodes s into b (grown as needed); the count, or a negative status. */
static int64_t encode(const struct tokenizer *tok, const struct pstring *s, struct ids_buf *b) {
    for (;;) {
        int64_t n = tokenizer_encode(tok, s->p, s->len, false, false, b->ids, b->cap);
        if (n <= b->cap) return n;
        int32_t *grown = realloc(b->ids, (size_t)n * sizeof *grown);
        if (!grown) return KVIK_ERR_NOMEM;
        b->ids = grown;
        b->cap = n;
    }
}

/* Decodes one UTF-8 sequence at p[0..n): its code point, or -1 (one bad byte). */
static int32_t utf8_at(const uint8_t *p, size_t n, size_t *len) {
    *len = 1;
    if (p[0] < 0x80) return p[0];
    int k = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 0;
    if (k == 0 || p[0] > 0xF4 || (size_t)k > n) return -1;
    int32_t cp = p[0] & (0x7F >> k);
    for (int i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    *len = (size_t)k;
    return cp;
}

/* s, quoted and escaped for a terminal (at most about 240 bytes of it). */
static void print_escaped(const struct pstring *s) {
    const uint8_t *p = (const uint8_t *)s->p;
    size_t i = 0, shown = 0;
    putchar('"');
    while (i < s->len && shown < 240) {
        size_t l;
        int32_t cp = utf8_at(p + i, s->len - i, &l);
        if (cp < 0) printf("\\x%02x", p[i]);
        else if (cp == '\n') printf("\\n");
        else if (cp == '\t') printf("\\t");
        else if (cp == '\r') printf("\\r");
        else if (cp == '"' || cp == '\\') printf("\\%c", (char)cp);
        else if (cp < 0x20 || cp == 0x7F) printf("\\x%02x", (unsigned)cp);
        else if ((cp >= 0x80 && cp <= 0xA0) || cp == 0xAD || (cp >= 0x2000 && cp <= 0x206F) ||
                 cp == 0x3000 || (cp >= 0xFE00 && cp <= 0xFE0F) || cp == 0xFEFF ||
                 (cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xE0000 || (cp >= 0x300 && cp <= 0x36F))
            printf("\\u{%x}", (unsigned)cp);
        else fwrite(p + i, 1, l, stdout);
        shown += l;
        i += l;
    }
    if (i < s->len) printf("\"... (%u bytes)", s->len);
    else putchar('"');
}

/* Failing strings shown per family: 3, or $KVIK_PARITY_SHOW (up to 1000). */
static uint32_t show_failures(void) {
    const char *v = getenv("KVIK_PARITY_SHOW");
    long n = v && *v ? strtol(v, NULL, 10) : 3;
    return n < 0 ? 0 : n > 1000 ? 1000 : (uint32_t)n;
}

static void report_failure(const struct family *fam, const struct tokenizer *tok,
                           const struct parity_data *d, uint32_t i, uint32_t want) {
    const struct pstring *s = &d->s[i];
    struct ids_buf b = {0};
    int64_t n = encode(tok, s, &b);
    printf("      #%u [%s] ", i, s->category < sizeof category_names / sizeof *category_names
                                      ? category_names[s->category] : "?");
    print_escaped(s);
    if (n < 0) {
        printf("\n        kvik: error %lld\n", (long long)n);
    } else {
        printf("\n        kvik (%lld ids, hash 0x%06x):", (long long)n, stored_hash(hash_ids(b.ids, n)));
        for (int64_t k = 0; k < n && k < 48; k++) printf(" %d", b.ids[k]);
        printf("%s\n", n > 48 ? " ..." : "");
    }
    printf("        Hugging Face: hash 0x%06x; its ids: python3 scripts/gen_tokenizer_parity.py "
           "--show %s %u\n", want, fam->hash, i);
    free(b.ids);
}

/* Encodes every string of the family, prints passed/total and fails on any
 * difference, showing the first few. */
static void run_family(const char *name, const struct family *fam) {
    const struct parity_data *d = parity_data();
    if (!d) return;
    struct tokenizer *tok = family_load(fam);
    if (!tok) return;
    uint32_t flags = 0;
    uint32_t *want = load_hashes(d, fam->hash, &flags);
    if (!want) {
        tokenizer_free(tok);
        return;
    }
    struct ids_buf b = {0};
    uint32_t pass = 0, total = 0, errors = 0, shown = 0, max_shown = show_failures();
    uint32_t *bad = calloc(max_shown + 1, sizeof *bad);
    for (uint32_t i = 0; i < d->n; i++) {
        if ((flags & HFLAG_SKIPS_INVALID) && (d->s[i].flags & FLAG_INVALID_UTF8)) continue;
        total++;
        int64_t n = encode(tok, &d->s[i], &b);
        if (n < 0) errors++;
        if (n >= 0 && stored_hash(hash_ids(b.ids, n)) == want[i]) {
            pass++;
        } else if (bad && shown < max_shown) {
            bad[shown++] = i;
        }
    }
    printf("    random parity %-26s %5u/%u  (%s: %s)\n", name, pass, total,
           fam->src == SRC_TIKTOKEN ? "tiktoken" : "Hugging Face", fam->hash);
    for (uint32_t k = 0; k < shown; k++) report_failure(fam, tok, d, bad[k], want[bad[k]]);
    CHECK_MSG(pass == total, "%s: %u of %u strings differ from Hugging Face (%u encode errors)", name,
              total - pass, total, errors);
    free(bad);
    free(b.ids);
    free(want);
    tokenizer_free(tok);
}

#define SMOL(pre, hash) \
    run_family(pre, &(struct family){SRC_SMOLLM2, pre, NULL, "smollm2-" hash})
#define GPT2V(pre, hash) \
    run_family("gpt-2 vocab/" pre, &(struct family){SRC_GPT2, pre, NULL, "gpt2vocab-" hash})
#define FIXTURE(file, hash) \
    run_family("fixture/" file, &(struct family){SRC_FIXTURE, NULL, file, hash})

/* ---- the default model's vocabulary with every pre-tokenizer --------------------- */

/* "default" is GPT-2's pattern, as tokenizer.h documents (llama.cpp's default
 * is a different, falcon-like split that no real tokenizer.json has). */
TEST(random_parity_default) { SMOL("default", "gpt2"); }
TEST(random_parity_gpt2) { SMOL("gpt-2", "gpt2"); }
TEST(random_parity_mpt) { SMOL("mpt", "gpt2-nfc"); }
TEST(random_parity_olmo) { SMOL("olmo", "gpt2-nfc"); }
TEST(random_parity_phi2) { SMOL("phi-2", "gpt2"); }
TEST(random_parity_jais) { SMOL("jais", "gpt2"); }
TEST(random_parity_smollm) { SMOL("smollm", "digits-gpt2"); }
TEST(random_parity_starcoder) { SMOL("starcoder", "digits-gpt2"); }
TEST(random_parity_refact) { SMOL("refact", "digits-gpt2"); }
TEST(random_parity_command_r) { SMOL("command-r", "digits-gpt2-nfc"); }
TEST(random_parity_exaone) { SMOL("exaone", "digits-gpt2"); }
TEST(random_parity_codeshell) { SMOL("codeshell", "digits-gpt2"); }
TEST(random_parity_llama3) { SMOL("llama3", "llama3"); }
TEST(random_parity_llama_bpe) { SMOL("llama-bpe", "llama3"); }
TEST(random_parity_llama_v3) { SMOL("llama-v3", "llama3"); }
TEST(random_parity_dbrx) { SMOL("dbrx", "llama3"); }
TEST(random_parity_smaug_bpe) { SMOL("smaug-bpe", "llama3"); }
TEST(random_parity_chatglm_bpe) { SMOL("chatglm-bpe", "llama3"); }
TEST(random_parity_glm4) { SMOL("glm4", "llama3"); }
TEST(random_parity_falcon3) { SMOL("falcon3", "llama3"); }
TEST(random_parity_pixtral) { SMOL("pixtral", "llama3"); }
TEST(random_parity_qwen2) { SMOL("qwen2", "qwen2-nfc"); }
TEST(random_parity_qwen) { SMOL("qwen", "qwen2-nfc"); }
TEST(random_parity_deepseek_r1_qwen) { SMOL("deepseek-r1-qwen", "qwen2-nfc"); }
TEST(random_parity_stablelm2) { SMOL("stablelm2", "qwen2"); }
TEST(random_parity_falcon) { SMOL("falcon", "falcon"); }
TEST(random_parity_deepseek_llm) { SMOL("deepseek-llm", "deepseek-llm"); }
TEST(random_parity_deepseek_coder) { SMOL("deepseek-coder", "deepseek-coder"); }
TEST(random_parity_deepseek_v3) { SMOL("deepseek-v3", "deepseek-v3"); }
TEST(random_parity_tekken) { SMOL("tekken", "tekken"); }
TEST(random_parity_bloom) { SMOL("bloom", "bloom"); }
TEST(random_parity_poro_chat) { SMOL("poro-chat", "bloom"); }

/* ---- GPT-2's vocabulary (multi-digit tokens) with one name per pipeline ---------- */

TEST(random_parity_gpt2vocab_smollm) { GPT2V("smollm", "digits-gpt2"); }
TEST(random_parity_gpt2vocab_llama_bpe) { GPT2V("llama-bpe", "llama3"); }
TEST(random_parity_gpt2vocab_qwen2) { GPT2V("qwen2", "qwen2-nfc"); }
TEST(random_parity_gpt2vocab_falcon) { GPT2V("falcon", "falcon"); }
TEST(random_parity_gpt2vocab_deepseek_llm) { GPT2V("deepseek-llm", "deepseek-llm"); }
TEST(random_parity_gpt2vocab_deepseek_coder) { GPT2V("deepseek-coder", "deepseek-coder"); }
TEST(random_parity_gpt2vocab_deepseek_v3) { GPT2V("deepseek-v3", "deepseek-v3"); }
TEST(random_parity_gpt2vocab_tekken) { GPT2V("tekken", "tekken"); }
TEST(random_parity_gpt2vocab_bloom) { GPT2V("bloom", "bloom"); }

/* ---- the real vocabularies as they are ------------------------------------------- */

TEST(random_parity_fixture_gpt2) { FIXTURE("gpt-2", "gpt2vocab-gpt2"); }
TEST(random_parity_fixture_starcoder) { FIXTURE("starcoder", "fixture-starcoder"); }
TEST(random_parity_fixture_refact) { FIXTURE("refact", "fixture-refact"); }
TEST(random_parity_fixture_mpt) { FIXTURE("mpt", "fixture-mpt"); }
TEST(random_parity_fixture_deepseek_coder) { FIXTURE("deepseek-coder", "fixture-deepseek-coder"); }
TEST(random_parity_fixture_llama_spm) { FIXTURE("llama-spm", "fixture-llama-spm"); }
TEST(random_parity_fixture_bert_bge) { FIXTURE("bert-bge", "fixture-bert-bge"); }

TEST(random_parity_default_model) {
    run_family("SmolLM2 model file", &(struct family){SRC_MODEL, NULL, NULL, "smollm2-digits-gpt2"});
}

/* ---- OpenAI's cl100k_base against tiktoken ---------------------------------------- */

TEST(random_parity_tiktoken_cl100k) {
    run_family("tiktoken cl100k_base", &(struct family){SRC_TIKTOKEN, NULL, NULL, "tiktoken-cl100k"});
}

/* ---- several threads at once ------------------------------------------------------ */

#define N_THREADS 4

struct thread_job {
    const struct tokenizer *tok;
    const struct parity_data *d;
    uint32_t start;  /* each thread begins elsewhere, so their word caches differ */
    uint32_t *hash;  /* [d->n] out; 0 where encoding failed */
    uint32_t errors;
};

static void *thread_main(void *arg) {
    struct thread_job *job = arg;
    struct ids_buf b = {0};
    for (uint32_t k = 0; k < job->d->n; k++) {
        uint32_t i = (job->start + k) % job->d->n;
        int64_t n = encode(job->tok, &job->d->s[i], &b);
        if (n < 0) job->errors++;
        job->hash[i] = n < 0 ? 0 : hash_ids(b.ids, n);
    }
    free(b.ids);
    return NULL;
}

/* Threads must agree with one thread alone (agreement with Hugging Face is
 * the other tests' business). */
TEST(random_parity_threads) {
    const struct parity_data *d = parity_data();
    if (!d) return;
    const struct family fam = {SRC_MODEL, NULL, NULL, "smollm2-digits-gpt2"};
    struct tokenizer *tok = family_load(&fam);
    if (!tok) return;
    struct thread_job alone = {tok, d, 0, calloc(d->n ? d->n : 1, sizeof(uint32_t)), 0};
    struct thread_job jobs[N_THREADS];
    pthread_t th[N_THREADS];
    int started = 0;
    if (alone.hash) thread_main(&alone);
    for (int t = 0; alone.hash && t < N_THREADS; t++) {
        jobs[t] = (struct thread_job){tok, d, (uint32_t)((uint64_t)d->n * (uint64_t)t / N_THREADS),
                                      calloc(d->n ? d->n : 1, sizeof(uint32_t)), 0};
        if (!jobs[t].hash || pthread_create(&th[t], NULL, thread_main, &jobs[t]) != 0) {
            free(jobs[t].hash);
            test_fail(__FILE__, __LINE__, "could not start thread %d", t);
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    uint32_t differ = 0;
    for (int t = 0; t < started; t++) {
        CHECK_EQ_INT(jobs[t].errors, 0);
        for (uint32_t i = 0; i < d->n; i++) differ += jobs[t].hash[i] != alone.hash[i];
    }
    if (started == N_THREADS)
        printf("    random parity from %d threads at once: %u of %u strings differ from one thread\n",
               N_THREADS, differ, d->n);
    CHECK_EQ_INT(alone.errors, 0);
    CHECK_EQ_INT(started, N_THREADS);
    CHECK_EQ_INT(differ, 0);
    for (int t = 0; t < started; t++) free(jobs[t].hash);
    free(alone.hash);
    tokenizer_free(tok);
}

/* ---- the check itself can fail ----------------------------------------------------- */

/* The hash must see every id and its order, and the data must reject a
 * tokenizer that is off by one token: a wrong pre-tokenizer on a correct
 * vocabulary fails thousands of strings. */
TEST(random_parity_detects_differences) {
    const int32_t ids[] = {1, 2, 3}, swapped[] = {2, 1, 3}, longer[] = {1, 2, 3, 0};
    CHECK(hash_ids(ids, 3) != hash_ids(swapped, 3));
    CHECK(hash_ids(ids, 3) != hash_ids(longer, 4));
    CHECK_EQ_INT(hash_ids(ids, 0), 0x811C9DC5u);
    const struct parity_data *d = parity_data();
    if (!d) return;
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct tokenizer *tok = load_with_pre(path, "gpt-2"); /* not the model's own "smollm" */
    uint32_t flags = 0;
    uint32_t *want = load_hashes(d, "smollm2-digits-gpt2", &flags);
    if (tok && want) {
        struct ids_buf b = {0};
        uint32_t differ = 0;
        for (uint32_t i = 0; i < d->n; i++) {
            int64_t n = encode(tok, &d->s[i], &b);
            if (n < 0 || stored_hash(hash_ids(b.ids, n)) != want[i]) differ++;
        }
        free(b.ids);
        printf("    random parity: GPT-2's pre-tokenizer on SmolLM2 misses %u of %u strings\n", differ,
               d->n);
        CHECK(differ > 100);
    }
    free(want);
    tokenizer_free(tok);
    /* and one without NFC (stablelm2: Qwen2's split alone) misses the NFC family's */
    tok = load_with_pre(path, "stablelm2");
    want = load_hashes(d, "smollm2-qwen2-nfc", &flags);
    if (tok && want) {
        struct ids_buf b = {0};
        uint32_t differ = 0;
        for (uint32_t i = 0; i < d->n; i++) {
            int64_t n = encode(tok, &d->s[i], &b);
            if (n < 0 || stored_hash(hash_ids(b.ids, n)) != want[i]) differ++;
        }
        free(b.ids);
        printf("    random parity: Qwen2's split without NFC misses %u of %u strings\n", differ, d->n);
        CHECK(differ > 100);
    }
    free(want);
    tokenizer_free(tok);
}
