/*
 * test_chunk.c — token-count chunking (retrieval/chunk.h) with the
 * embedding model's own WordPiece tokenizer (all-MiniLM-L6-v2): every
 * chunk holds at most the allowed tokens, as the tokenizer counts the
 * chunk's whole text; the chunks, less their overlaps, are the text; each
 * overlap stays within its bound; bad sizes are refused.
 */
#include <stdlib.h>
#include <string.h>

#include "model/encoder.h"
#include "retrieval/chunk.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static struct encoder *g_enc;

static const struct tokenizer *minilm(void) {
    if (g_enc) return encoder_tokenizer(g_enc);
    char path[4096];
    if (!test_cached_model("all-MiniLM-L6-v2-F16.gguf", path, sizeof path)) return NULL;
    struct kvik_err err = {0};
    CHECK_MSG(encoder_load(path, &g_enc, &err) == KVIK_OK, "encoder_load: %s", err.msg);
    return g_enc ? encoder_tokenizer(g_enc) : NULL;
}

static int64_t count_tokens(const struct tokenizer *tok, const char *t, size_t n) {
    static int32_t ids[1 << 16];
    return tokenizer_encode(tok, t, n, false, false, ids, 1 << 16);
}

static bool space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Checks the properties chunk.h promises for text[0..len). */
/* exact: each chunk's count must equal its text's (else at least it). */
static void check_chunks(const struct tokenizer *tok, const char *text, size_t len, int max, int overlap,
                         bool exact) {
    struct chunk_span *c = NULL;
    struct kvik_err err = {0};
    int64_t n = chunk_text(tok, text, len, max, overlap, &c, &err);
    REQUIRE_MSG(n >= 0, "chunk_text: %s", err.msg);
    size_t covered = 0; /* the text is covered up to here */
    while (covered < len && space(text[covered])) covered++;
    for (int64_t i = 0; i < n; i++) {
        const struct chunk_span *s = &c[i];
        int64_t real = count_tokens(tok, text + s->off, s->len);
        CHECK_MSG(exact ? real == s->tokens : real <= s->tokens, "chunk %lld: %d tokens counted, %lld in its text", (long long)i, s->tokens,
                  (long long)real);
        CHECK_MSG(s->tokens <= max, "chunk %lld: %d tokens > %d", (long long)i, s->tokens, max);
        CHECK_MSG(s->len > 0 && !space(text[s->off]) && !space(text[s->off + s->len - 1]),
                  "chunk %lld starts or ends with white space", (long long)i);
        CHECK_MSG(s->off <= covered, "chunk %lld starts at %zu, past the covered %zu", (long long)i, s->off, covered);
        if (i > 0) {
            CHECK_MSG(s->off > c[i - 1].off, "chunk %lld does not move forward", (long long)i);
            size_t prev_end = c[i - 1].off + c[i - 1].len;
            if (s->off < prev_end) {
                int64_t shared = count_tokens(tok, text + s->off, prev_end - s->off);
                CHECK_MSG(shared <= overlap, "chunks %lld and %lld share %lld tokens > %d", (long long)i - 1,
                          (long long)i, (long long)shared, overlap);
            }
        }
        size_t end = s->off + s->len;
        if (end > covered) covered = end;
        while (covered < len && space(text[covered])) covered++;
    }
    CHECK_MSG(covered == len, "the chunks cover %zu of %zu bytes", covered, len);
    free(c);
}

TEST(chunk_bounds_cover_and_overlap) {
    const struct tokenizer *tok = minilm();
    if (!tok) return;
    /* prose of ~6,000 words with punctuation, numbers, identifiers and CJK
     * without spaces, so pieces cut at CHUNK_MAX_PIECE bytes too */
    static const char *const words[] = {
        "The",   "warranty", "covers", "NV-TH220", "units,",    "firmware", "v2.4.1",  "(see",
        "§4).",  "Returns",  "within", "30",       "days;",     "e-mail",   "support@example.com.",
        "日本語のテキストはスペースなしで続きますので長い一片になります", "café", "naïve", "—",
        "tokenization-of-hyphenated-compounds", "x",
    };
    enum { N = 6000 };
    size_t cap = (size_t)N * 80, len = 0;
    char *text = malloc(cap);
    REQUIRE(text);
    unsigned r = 7;
    for (int i = 0; i < N; i++) {
        r = r * 1103515245u + 12345u;
        const char *w = words[(r >> 16) % (sizeof words / sizeof *words)];
        len += (size_t)snprintf(text + len, cap - len, "%s%s", w, (r >> 8) % 13 == 0 ? "\n\n" : " ");
    }
    check_chunks(tok, text, len, 800, 400, true);
    check_chunks(tok, text, len, 100, 50, true);
    check_chunks(tok, text, len, 64, 0, true);
    check_chunks(tok, text, len, 4096, 2048, true);
    /* the whole text within one chunk's budget is one chunk, itself */
    struct chunk_span *c = NULL;
    struct kvik_err err = {0};
    const char *small = "  A short text, one chunk.\n";
    CHECK(chunk_text(tok, small, strlen(small), 800, 400, &c, &err) == 1);
    CHECK(c && c[0].off == 2 && c[0].len == strlen(small) - 3);
    free(c);
    /* a run of 10 kB without white space is cut into pieces, and chunked;
     * WordPiece reads a word of over 100 characters as one [UNK], so its
     * pieces count for more than the chunk's text */
    memset(text, 'a', 10000);
    check_chunks(tok, text, 10000, 100, 20, false);
    free(text);
}

TEST(chunk_edge_cases_and_bad_sizes) {
    const struct tokenizer *tok = minilm();
    if (!tok) return;
    struct chunk_span *c = (void *)1;
    struct kvik_err err = {0};
    CHECK(chunk_text(tok, "", 0, 800, 400, &c, &err) == 0 && c == NULL);
    CHECK(chunk_text(tok, " \n\t ", 4, 800, 400, &c, &err) == 0);
    free(c);
    CHECK(chunk_text(tok, "x", 1, 63, 0, &c, &err) == KVIK_ERR_INVALID_ARG);
    CHECK(chunk_text(tok, "x", 1, 800, 401, &c, &err) == KVIK_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "overlap") != NULL);
    CHECK(chunk_text(tok, "x", 1, 800, -1, &c, &err) == KVIK_ERR_INVALID_ARG);
    /* bytes that are not UTF-8 are text like any other */
    const char bad[] = "\xff\xfe abc \xc3 def";
    check_chunks(tok, bad, sizeof bad - 1, 64, 10, true);
}
