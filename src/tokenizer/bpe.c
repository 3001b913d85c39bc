/*
 * bpe.c — encoding text to ids with byte-level BPE.
 *
 * Three stages:
 *  1. Special tokens are cut out of the raw text (longest match first; see
 *     tokenizer.h for which ones).
 *  2. The text between them is split into words by the pre-tokenizer
 *     (pretok.c).
 *  3. Each word starts as one symbol per byte (the byte's token) and the
 *     adjacent pair with the lowest merge rank is merged, the leftmost
 *     first among equal ranks, until no pair merges. Symbols sit in a
 *     doubly linked list over an array; candidate pairs wait in a binary
 *     min-heap keyed by (rank, position) and are checked against the list
 *     when they come out (a stale pair no longer has the same two ids).
 *
 * Working memory is one scratch block per call, grown only for a word
 * longer than any before it; nothing is shared between calls, so encoding
 * is safe from any number of threads.
 */
#include <stdlib.h>

#include "tokenizer/tokenizer_int.h"

struct pair {
    int32_t rank;
    int32_t pos;    /* left symbol's index */
    int32_t left;   /* ids when queued: the pair is stale if they changed */
    int32_t right;
};

struct encoder {
    const struct tokenizer *tok;
    const uint8_t *text; /* the current stretch between special tokens */
    int32_t *out;
    int64_t max, count;
    /* scratch for one word of up to cap bytes */
    size_t cap;
    int32_t *id, *prev, *next; /* [cap] symbols; id -1 = merged away */
    struct pair *heap;         /* [3 * cap] */
    int64_t n_heap;
};

static inline void put(struct encoder *e, int32_t id) {
    if (e->count < e->max) e->out[e->count] = id;
    e->count++;
}

static bool reserve(struct encoder *e, size_t n) {
    if (n <= e->cap) return true;
    size_t cap = e->cap ? e->cap : 64;
    while (cap < n) cap *= 2;
    if (cap > INT32_MAX / 4) return false;
    void *blk = realloc(e->id, cap * (3 * sizeof(int32_t) + 3 * sizeof(struct pair)));
    if (!blk) return false;
    e->id = blk;
    e->prev = e->id + cap;
    e->next = e->prev + cap;
    e->heap = (struct pair *)(e->next + cap);
    e->cap = cap;
    return true;
}

static inline bool pair_less(const struct pair *a, const struct pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct encoder *e, struct pair p) {
    int64_t i = e->n_heap++;
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (!pair_less(&p, &e->heap[up])) break;
        e->heap[i] = e->heap[up];
        i = up;
    }
    e->heap[i] = p;
}

static struct pair heap_pop(struct encoder *e) {
    struct pair top = e->heap[0], last = e->heap[--e->n_heap];
    int64_t i = 0, n = e->n_heap;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!pair_less(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n > 0) e->heap[i] = last;
    return top;
}

/* Queues the pair starting at symbol pos if it merges. */
static void queue_pair(struct encoder *e, int32_t pos) {
    int32_t nx = e->next[pos];
    if (nx < 0) return;
    int32_t a = e->id[pos], b = e->id[nx];
    if (a < 0 || b < 0) return;
    const struct merge_slot *m = merge_find(e->tok, a, b);
    if (m) heap_push(e, (struct pair){m->rank, pos, a, b});
}

/* BPE over bytes [start, end) of e->text. */
static bool encode_word(void *ctx, size_t start, size_t end) {
    struct encoder *e = ctx;
    const struct tokenizer *tok = e->tok;
    const uint8_t *s = e->text + start;
    size_t n = end - start;
    if (n == 1) {
        int32_t id = tok->byte_tok[s[0]];
        if (id < 0) id = tok->unk; /* a byte with no token */
        if (id >= 0) put(e, id);
        return true;
    }
    if (!reserve(e, n)) return false;
    for (size_t i = 0; i < n; i++) {
        e->id[i] = tok->byte_tok[s[i]];
        e->prev[i] = (int32_t)i - 1;
        e->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    e->n_heap = 0;
    for (size_t i = 0; i + 1 < n; i++) queue_pair(e, (int32_t)i);
    while (e->n_heap > 0) {
        struct pair p = heap_pop(e);
        int32_t r = e->next[p.pos];
        if (e->id[p.pos] != p.left || r < 0 || e->id[r] != p.right) continue; /* stale */
        const struct merge_slot *m = merge_find(tok, p.left, p.right);
        /* merge r into p.pos */
        e->id[p.pos] = m->merged;
        e->id[r] = -1;
        e->next[p.pos] = e->next[r];
        if (e->next[r] >= 0) e->prev[e->next[r]] = p.pos;
        if (e->prev[p.pos] >= 0) queue_pair(e, e->prev[p.pos]);
        queue_pair(e, p.pos);
    }
    for (int32_t i = 0; i >= 0; i = e->next[i]) {
        if (e->id[i] >= 0) put(e, e->id[i]);
        else if (tok->unk >= 0) put(e, tok->unk); /* a byte with no token */
    }
    return true;
}

/* Stage 2 and 3 over text[0..n). */
static bool encode_plain(struct encoder *e, const uint8_t *text, size_t n) {
    if (n == 0) return true;
    e->text = text;
    return pretok_split(e->tok->pretok, text, n, encode_word, e);
}

/* Longest special token at text[i..n) that may match; NULL if none. */
static const struct special_tok *special_at(const struct tokenizer *tok, const uint8_t *text,
                                            size_t i, size_t n, bool parse_special) {
    uint8_t c = text[i];
    if (!(tok->special_first[c >> 3] & (1u << (c & 7)))) return NULL;
    for (int32_t k = 0; k < tok->n_specials; k++) {
        const struct special_tok *sp = &tok->specials[k];
        if (sp->len > n - i || (uint8_t)sp->text[0] != c) continue;
        if (sp->control && !parse_special) continue;
        if (memcmp(sp->text, text + i, sp->len) == 0) return sp;
    }
    return NULL;
}

int64_t tokenizer_encode(const struct tokenizer *tok, const char *text, size_t len,
                         bool add_special, bool parse_special, int32_t *out, int64_t max) {
    if (!tok || (!text && len) || (!out && max > 0) || max < 0) return KVIK_ERR_INVALID_ARG;
    struct encoder e = {.tok = tok, .out = out, .max = max};
    const uint8_t *s = (const uint8_t *)text;
    bool ok = true;
    if (add_special && tok->add_bos && tok->bos >= 0) put(&e, tok->bos);
    size_t seg = 0;
    if (tok->n_specials > 0) {
        for (size_t i = 0; i < len && ok;) {
            const struct special_tok *sp = special_at(tok, s, i, len, parse_special);
            if (!sp) {
                i++;
                continue;
            }
            ok = encode_plain(&e, s + seg, i - seg);
            put(&e, sp->id);
            i += sp->len;
            seg = i;
        }
    }
    if (ok) ok = encode_plain(&e, s + seg, len - seg);
    if (add_special && tok->add_eos && tok->eos >= 0) put(&e, tok->eos);
    free(e.id);
    return ok ? e.count : KVIK_ERR_NOMEM;
}
