/*
 * spm.c — encoding with a SentencePiece BPE vocabulary
 * (tokenizer.ggml.model "llama": Llama 1 and 2, Mistral 7B v0.1, TinyLlama;
 * "gemma4": Gemma 4, whose merges go by rank).
 *
 * A stretch of text between special tokens is encoded as SentencePiece
 * does, with no pre-tokenizer:
 *  1. Every U+0020 space becomes "▁" (U+2581, bytes E2 96 81), and one "▁"
 *     goes in front when the vocabulary adds a space prefix
 *     (tokenizer.ggml.add_space_prefix): in front of every stretch, the
 *     first one and each one after a special token, as llama.cpp and the
 *     Llama tokenizer.json normalizer (Prepend + Replace) do.
 *  2. The text starts as one symbol per UTF-8 character. Text that is not
 *     valid UTF-8 is cut as llama.cpp cuts it, by the lead byte alone: a
 *     byte 00-BF is one character, C0-DF starts one of 2 bytes, E0-EF of 3,
 *     F0-FF of 4, whatever the bytes that follow (fewer at the end of the
 *     text). Such a character is never a token, so step 4 gives its bytes'
 *     tokens: "a\xffb" is "a" <0xFF> <0x62>. With spm_ranks ("gemma4") a
 *     byte that is not valid UTF-8 is a character of its own.
 *  3. Of the adjacent symbol pairs whose concatenation is a token, the one
 *     whose token has the highest score merges, the leftmost among equal
 *     scores, until no pair forms a token. A character that is not a token
 *     never merges (Hugging Face's BPE, whose merges come from the scores,
 *     only has merges of two tokens). With spm_ranks ("gemma4") the pair
 *     that merges is instead the one of lowest rank in
 *     tokenizer.ggml.merges, the leftmost among equal ranks, and a pair
 *     merges only if the list has it (Hugging Face's BPE with byte
 *     fallback and no pre-tokenizer, over the "▁"-escaped text).
 *  4. Each symbol is its token. A character that has none becomes the byte
 *     tokens "<0xAB>" of its UTF-8 bytes (byte fallback), or the unknown
 *     token if one of those is missing; a run of such characters gives one
 *     unknown token (Hugging Face's fuse_unk); with no unknown token they
 *     are dropped.
 *
 * Step 3 never joins a character to a following "▁" when no token has a
 * "▁" after another character (Llama's vocabulary: "▁" only leads, as in
 * "▁the" or "▁▁▁"; spm_words_split checks this once at load). Then each
 * word, a run of "▁" and the characters up to the next "▁" after a
 * non-"▁", is merged on its own, with the same result: merges in one word
 * never change another's candidates, so their interleaving does not
 * matter. Otherwise the stretch is one word.
 *
 * Symbols are byte ranges of the escaped text in a doubly linked list over
 * an array; candidate pairs wait in a binary max-heap keyed by (score,
 * -position) and are checked when they come out: a pair is stale when
 * either symbol no longer has the length it had when queued. Working
 * memory: the escaped text (up to 3 bytes per input byte) and about 40
 * bytes per character of the longest word, grown as needed.
 */
#include <stdlib.h>

#include "tokenizer/tokenizer_int.h"
#include "tokenizer/unicode.h"

#define SPM_MAX_BYTES ((size_t)1 << 28) /* escaped stretch; symbol indices are int32 */

struct sym {
    int32_t start, len;  /* bytes of the escaped text; len 0 = merged away */
    int32_t prev, next;  /* neighbours, -1 at the ends */
    int32_t id;          /* token of the text, -1 if none */
};

struct bigram {
    float score;  /* of the merged token */
    int32_t left; /* left symbol */
    int32_t len;  /* bytes of both symbols when queued */
    int32_t id;   /* the merged token */
};

struct spm {
    const struct tokenizer *tok;
    const uint8_t *t;     /* escaped text */
    struct sym *sym;      /* [cap] */
    struct bigram *heap;  /* [3 * cap]: n - 1 pairs queued first, at most two per merge */
    size_t cap;           /* characters the arrays hold */
    int64_t n_heap;
};

static inline bool bigram_before(const struct bigram *a, const struct bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(struct spm *m, struct bigram b) {
    int64_t i = m->n_heap++;
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (!bigram_before(&b, &m->heap[up])) break;
        m->heap[i] = m->heap[up];
        i = up;
    }
    m->heap[i] = b;
}

static struct bigram heap_pop(struct spm *m) {
    struct bigram top = m->heap[0], last = m->heap[--m->n_heap];
    int64_t i = 0, n = m->n_heap;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&m->heap[c + 1], &m->heap[c])) c++;
        if (!bigram_before(&m->heap[c], &last)) break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (n > 0) m->heap[i] = last;
    return top;
}

/* Queues the pair (left, its next) if both are tokens and the pair merges:
 * by score when their text is a token, or by rank (spm_ranks) when the
 * merges table has the pair, keyed -rank so that lower ranks come first
 * (ranks below 2^24 are exact in a float). */
static void try_pair(struct spm *m, int32_t left) {
    if (left < 0) return;
    int32_t right = m->sym[left].next;
    if (right < 0 || m->sym[left].id < 0 || m->sym[right].id < 0) return;
    const struct sym *a = &m->sym[left], *b = &m->sym[right];
    if (m->tok->spm_ranks) {
        const struct merge_slot *ms = merge_find(m->tok, a->id, b->id);
        if (ms) heap_push(m, (struct bigram){-(float)ms->rank, left, a->len + b->len, ms->merged});
        return;
    }
    int32_t id = tokenizer_find(m->tok, (const char *)m->t + a->start, (size_t)(a->len + b->len));
    if (id < 0) return;
    heap_push(m, (struct bigram){m->tok->scores[id], left, a->len + b->len, id});
}

/* Escapes s[0..n) into t (spaces -> U+2581, the optional prefix); returns its length. */
static size_t escape(const uint8_t *s, size_t n, bool prefix, uint8_t *t) {
    static const uint8_t mark[3] = {0xE2, 0x96, 0x81};
    size_t o = 0;
    if (prefix) {
        memcpy(t, mark, 3);
        o = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(t + o, mark, 3);
            o += 3;
        } else {
            t[o++] = s[i];
        }
    }
    return o;
}

bool spm_words_split(const struct tokenizer *tok) {
    static const char mark[3] = {(char)0xE2, (char)0x96, (char)0x81};
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        const char *t = tokenizer_token_text(tok, id);
        size_t n = strlen(t), i = 0;
        while (i + 3 <= n && memcmp(t + i, mark, 3) == 0) i += 3; /* the leading run */
        for (; i + 3 <= n; i++)
            if (memcmp(t + i, mark, 3) == 0) return false;
    }
    return true;
}

static bool grow(struct spm *m, size_t chars) {
    if (chars <= m->cap) return true;
    size_t cap = m->cap ? m->cap : 64;
    while (cap < chars) cap *= 2;
    void *blk = realloc(m->sym, cap * (sizeof(struct sym) + 3 * sizeof(struct bigram)));
    if (!blk) return false;
    m->sym = blk;
    m->heap = (struct bigram *)(m->sym + cap);
    m->cap = cap;
    return true;
}

/* Bytes of the character that starts at t[i] (i < end), step 2. */
static inline size_t char_len(const struct tokenizer *tok, const uint8_t *t, size_t i, size_t end) {
    static const uint8_t by_lead[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    if (tok->spm_ranks) return utf8_decode(t + i, end - i).len;
    size_t l = by_lead[t[i] >> 4];
    return l < end - i ? l : end - i;
}

/* Steps 2-4 for the word t[start, end). */
static bool encode_word(struct spm *m, size_t start, size_t end, int32_t *out, int64_t max,
                        int64_t *count) {
    const struct tokenizer *tok = m->tok;
    const uint8_t *t = m->t;
    if (!grow(m, end - start)) return false;

    /* one symbol per character */
    int32_t n_sym = 0;
    for (size_t i = start; i < end;) {
        size_t l = char_len(tok, t, i, end);
        m->sym[n_sym] = (struct sym){(int32_t)i, (int32_t)l, n_sym - 1, n_sym + 1,
                                     tokenizer_find(tok, (const char *)t + i, l)};
        n_sym++;
        i += l;
    }
    m->sym[n_sym - 1].next = -1;

    /* merges, best score first */
    m->n_heap = 0;
    for (int32_t i = 0; i + 1 < n_sym; i++) try_pair(m, i);
    while (m->n_heap > 0) {
        struct bigram b = heap_pop(m);
        struct sym *a = &m->sym[b.left];
        if (a->len == 0 || a->next < 0) continue;
        struct sym *r = &m->sym[a->next];
        if (a->len + r->len != b.len) continue; /* stale */
        a->len = b.len;
        a->id = b.id;
        a->next = r->next;
        if (r->next >= 0) m->sym[r->next].prev = b.left;
        r->len = 0;
        try_pair(m, a->prev);
        try_pair(m, b.left);
    }

    /* tokens, byte fallback, fused unknowns */
    bool prev_unk = false;
    for (int32_t i = 0; i >= 0; i = m->sym[i].next) {
        const struct sym *y = &m->sym[i];
        if (y->id >= 0) {
            tok_put(out, max, count, y->id);
            prev_unk = false;
            continue;
        }
        bool all = true;
        for (int32_t k = 0; k < y->len; k++) all = all && tok->byte_tok[t[y->start + k]] >= 0;
        if (all) {
            for (int32_t k = 0; k < y->len; k++) tok_put(out, max, count, tok->byte_tok[t[y->start + k]]);
            prev_unk = false;
        } else if (tok->unk >= 0 && !prev_unk) {
            tok_put(out, max, count, tok->unk);
            prev_unk = true;
        }
    }
    return true;
}

static inline bool is_mark(const uint8_t *t, size_t i, size_t len) {
    return i + 3 <= len && t[i] == 0xE2 && t[i + 1] == 0x96 && t[i + 2] == 0x81;
}

bool spm_encode(const struct tokenizer *tok, const uint8_t *s, size_t n, int32_t *out,
                int64_t max, int64_t *count) {
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    if (n > SPM_MAX_BYTES || spaces > SPM_MAX_BYTES) return false;
    size_t cap = n + 2 * spaces + 3; /* escaped bytes */
    if (cap > SPM_MAX_BYTES) return false;
    uint8_t *t = malloc(cap);
    if (!t) return false;
    size_t len = escape(s, n, tok->space_prefix, t);
    struct spm m = {.tok = tok, .t = t};
    bool ok = true;
    size_t start = 0;
    /* a word ends before a "▁" that follows another character (never
     * inside a character of step 2) */
    bool after_mark = false;
    for (size_t i = 0; i < len && ok;) {
        bool mark = is_mark(t, i, len);
        if (tok->spm_words && i > start && mark && !after_mark) {
            ok = encode_word(&m, start, i, out, max, count);
            start = i;
        }
        after_mark = mark;
        i += char_len(tok, t, i, len);
    }
    if (ok && len > start) ok = encode_word(&m, start, len, out, max, count);
    free(m.sym);
    free(t);
    return ok;
}
