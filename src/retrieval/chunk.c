/*
 * chunk.c — token-count chunking (chunk.h): the text split into pieces,
 * each piece's tokens counted once, then a greedy walk that fills each
 * chunk to max_tokens and steps back overlap tokens for the next.
 */
#include <stdlib.h>

#include "retrieval/chunk.h"
#include "tokenizer/tokenizer.h"

static bool space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

struct piece {
    size_t off, len;
    int tokens;
};

/* The end of the part starting at i: at most CHUNK_MAX_PIECE bytes of
 * non-space, not in the middle of a UTF-8 character. */
static size_t part_end(const char *t, size_t len, size_t i) {
    size_t e = i;
    while (e < len && !space((unsigned char)t[e]) && e - i < CHUNK_MAX_PIECE) e++;
    if (e < len && !space((unsigned char)t[e]) && e - i == CHUNK_MAX_PIECE) {
        size_t back = e; /* step back over continuation bytes */
        while (back > i + 1 && ((unsigned char)t[back] & 0xC0) == 0x80) back--;
        if (back > i) e = back;
    }
    return e;
}

int64_t chunk_text(const struct tokenizer *tok, const char *text, size_t len, int max_tokens, int overlap,
                   struct chunk_span **out, struct kvik_err *err) {
    *out = NULL;
    if (max_tokens < CHUNK_MAX_PIECE || overlap < 0 || overlap > max_tokens / 2)
        return err_set(err, KVIK_ERR_INVALID_ARG, "chunking: %d tokens with %d overlap is not allowed", max_tokens,
                       overlap);
    size_t i = 0;
    while (i < len && space((unsigned char)text[i])) i++; /* leading white space belongs to no chunk */
    struct piece *p = NULL;
    size_t n = 0, cap = 0;
    int32_t ids[4 * CHUNK_MAX_PIECE + 8];
    while (i < len) {
        size_t e = part_end(text, len, i), word_end = e;
        while (e < len && space((unsigned char)text[e])) e++;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            struct piece *np = realloc(p, cap * sizeof *np);
            if (!np) {
                free(p);
                return err_set(err, KVIK_ERR_NOMEM, "chunking: out of memory");
            }
            p = np;
        }
        int64_t k = tokenizer_encode(tok, text + i, word_end - i, false, false, ids, (int64_t)(sizeof ids / sizeof *ids));
        if (k < 0 || k > max_tokens) {
            free(p);
            return err_set(err, KVIK_ERR_FORMAT, "chunking: the text could not be tokenized at byte %zu", i);
        }
        p[n++] = (struct piece){i, e - i, (int)k};
        i = e;
    }
    struct chunk_span *c = NULL;
    size_t nc = 0, ccap = 0;
    for (size_t s = 0; s < n;) {
        size_t e = s;
        int tokens = 0;
        while (e < n && tokens + p[e].tokens <= max_tokens) tokens += p[e++].tokens;
        if (nc == ccap) {
            ccap = ccap ? 2 * ccap : 16;
            struct chunk_span *nc_ = realloc(c, ccap * sizeof *nc_);
            if (!nc_) {
                free(p);
                free(c);
                return err_set(err, KVIK_ERR_NOMEM, "chunking: out of memory");
            }
            c = nc_;
        }
        size_t end = p[e - 1].off + p[e - 1].len;
        while (end > p[s].off && space((unsigned char)text[end - 1])) end--; /* trailing white space dropped */
        c[nc++] = (struct chunk_span){p[s].off, end - p[s].off, tokens};
        if (e == n) break;
        /* the next start: back from e while the shared tokens stay within overlap */
        size_t ns = e;
        int shared = 0;
        while (ns > s + 1 && shared + p[ns - 1].tokens <= overlap) shared += p[--ns].tokens;
        s = ns;
    }
    free(p);
    *out = c;
    return (int64_t)nc;
}
