/*
 * vocab.c — a vocabulary as the matcher reads it: a trie of the tokens'
 * bytes, and slices of body-text tokens with the tries of the rest
 * (grammar_int.h). From a tokenizer, each token's bytes are those the
 * detokenizer writes (control tokens none: they are never part of
 * constrained text; end-of-generation tokens are allowed apart, when the
 * grammar may end).
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_int.h"
#include "tokenizer/tokenizer.h"

struct grammar_vocab *grammar_vocab_from_tokenizer(const struct tokenizer *tok, const int32_t *eog, int n_eog,
                                                   struct kvik_err *err) {
    int32_t n = tokenizer_n_vocab(tok);
    char **pieces = calloc((size_t)n, sizeof *pieces);
    uint32_t *lens = calloc((size_t)n, sizeof *lens);
    struct grammar_vocab *v = NULL;
    bool ok = pieces && lens;
    for (int32_t i = 0; ok && i < n; i++) {
        char buf[256];
        int64_t k = tokenizer_decode_piece(tok, i, buf, sizeof buf, false);
        if (k <= 0 || k > (int64_t)sizeof buf) continue;
        ok = (pieces[i] = malloc((size_t)k)) != NULL;
        if (ok) memcpy(pieces[i], buf, (size_t)k), lens[i] = (uint32_t)k;
    }
    if (ok) v = grammar_vocab_new(n, (const char *const *)pieces, lens, eog, n_eog, err);
    else err_set(err, KVIK_ERR_NOMEM, "grammar: out of memory for the vocabulary");
    for (int32_t i = 0; pieces && i < n; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    return v;
}

/* ---- the trie and the slices ---------------------------------------------------- */

/* Token ids by their bytes (a shorter prefix first), then by id. */
static int cmp_tok(const void *a, const void *b, void *ctx) {
    const struct grammar_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->len[x], ly = v->len[y], n = lx < ly ? lx : ly;
    int c = memcmp(v->piece[x], v->piece[y], n);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void trie_free(struct vtrie *t) {
    free(t->byte);
    free(t->depth);
    free(t->end);
    free(t->tok0);
    free(t->toks);
}

/* The trie of tokens order[0 .. n) (sorted by cmp_tok, none empty). */
static bool trie_build(struct vtrie *t, const struct grammar_vocab *v, const int32_t *order, int32_t n) {
    size_t total = 0;
    for (int32_t k = 0; k < n; k++) total += v->len[order[k]];
    /* nodes: at most the root and one a byte of every token */
    size_t cap = 1 + total;
    t->byte = malloc(cap);
    t->depth = malloc(cap * sizeof *t->depth);
    t->end = malloc(cap * sizeof *t->end);
    t->tok0 = malloc((cap + 1) * sizeof *t->tok0);
    t->toks = malloc(((size_t)n + 1) * sizeof *t->toks);
    int32_t *path = malloc(65537 * sizeof *path); /* the node at each depth of the current path */
    if (!t->byte || !t->depth || !t->end || !t->tok0 || !t->toks || !path) {
        free(path);
        return false;
    }
    int32_t nn = 1, nt = 0;
    t->byte[0] = 0;
    t->depth[0] = 0;
    t->tok0[0] = 0;
    path[0] = 0;
    int pdepth = 0; /* depth of the current path */
    for (int32_t k = 0; k < n; k++) {
        int32_t id = order[k];
        const uint8_t *p = v->piece[id];
        uint32_t l = v->len[id];
        /* the common prefix with the current path */
        int d = 0;
        while (d < pdepth && d < (int)l && t->byte[path[d + 1]] == p[d]) d++;
        /* close the nodes deeper than d */
        for (int x = pdepth; x > d; x--) t->end[path[x]] = nn;
        for (; d < (int)l; d++) {
            t->byte[nn] = p[d];
            t->depth[nn] = (uint16_t)(d + 1);
            t->tok0[nn] = nt;
            path[d + 1] = nn++;
        }
        pdepth = (int)l;
        if (pdepth > t->max_depth) t->max_depth = pdepth;
        /* tokens are appended in preorder: this one ends at the path's last node */
        t->toks[nt++] = id;
    }
    for (int x = pdepth; x >= 1; x--) t->end[path[x]] = nn;
    t->end[0] = nn;
    t->n_nodes = nn;
    t->tok0[nn] = nt;
    free(path);
    return true;
}

/* The characters of p[0..n) when it is text of the kind (grammar_int.h);
 * -1 otherwise. */
static int kind_chars(int kind, const uint8_t *p, uint32_t n) {
    if (kind == GV_ALNUM) {
        for (uint32_t i = 0; i < n; i++)
            if (!((p[i] >= '0' && p[i] <= '9') || ((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'z'))) return -1;
        return (int)n;
    }
    int chars = 0;
    for (uint32_t i = 0; i < n; chars++) {
        uint8_t b = p[i];
        if (b < 0x80) {
            if (b < 0x20 || b == 0x7F || b == '"' || b == '\\') return -1;
            i++;
            continue;
        }
        uint32_t k, cp, lo;
        if (b >= 0xC2 && b <= 0xDF) k = 2, cp = b & 0x1F, lo = 0x80;
        else if (b >= 0xE0 && b <= 0xEF) k = 3, cp = b & 0x0F, lo = 0x800;
        else if (b >= 0xF0 && b <= 0xF4) k = 4, cp = b & 0x07, lo = 0x10000;
        else return -1;
        if (i + k > n) return -1;
        for (uint32_t j = 1; j < k; j++) {
            if ((p[i + j] & 0xC0) != 0x80) return -1;
            cp = cp << 6 | (p[i + j] & 0x3F);
        }
        if (cp < lo || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
        i += k;
    }
    return chars;
}

static const struct {
    int kind, chars;
} slice_def[GV_SLICES] = {
    {GV_BODY, 1}, {GV_BODY, 2}, {GV_BODY, 4}, {GV_BODY, 8}, {GV_BODY, 16}, {GV_BODY, GV_MAX_CHARS},
    {GV_ALNUM, 4}, {GV_ALNUM, 8}, {GV_ALNUM, 16}, {GV_ALNUM, GV_MAX_CHARS},
};

/* Slice sl's bits and its rest: the trie of the tokens of order[0 .. n)
 * (sorted) outside it; rest is scratch for n ids. */
static bool slice_build(struct vslice *sl, const struct grammar_vocab *v, const int8_t *chars, const int32_t *order,
                        int32_t n, int32_t *rest) {
    if (!(sl->bits = calloc(((size_t)v->n_vocab + 31) / 32 + 1, sizeof *sl->bits))) return false;
    int32_t n_rest = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t id = order[k];
        if (chars[id] >= 1 && chars[id] <= sl->chars) sl->bits[id >> 5] |= 1u << (id & 31), sl->count++;
        else rest[n_rest++] = id;
    }
    return trie_build(&sl->rest, v, rest, n_rest);
}

struct grammar_vocab *grammar_vocab_new(int32_t n_vocab, const char *const *pieces, const uint32_t *lens,
                                        const int32_t *eog, int n_eog, struct kvik_err *err) {
    struct grammar_vocab *v = calloc(1, sizeof *v);
    int32_t *order = NULL, *rest = NULL;
    int8_t *chars[GV_KINDS] = {NULL};
    if (!v) goto nomem;
    v->n_vocab = n_vocab;
    size_t total = 0;
    for (int32_t i = 0; i < n_vocab; i++) total += lens[i] > 65535 ? 0 : lens[i];
    v->bytes = malloc(total + 1);
    v->piece = malloc((size_t)n_vocab * sizeof *v->piece);
    v->len = malloc((size_t)n_vocab * sizeof *v->len);
    v->eog = malloc(((size_t)n_eog + 1) * sizeof *v->eog);
    order = malloc(((size_t)n_vocab + 1) * sizeof *order);
    rest = malloc(((size_t)n_vocab + 1) * sizeof *rest);
    for (int k = 0; k < GV_KINDS; k++)
        if (!(chars[k] = malloc((size_t)n_vocab + 1))) goto nomem;
    if (!v->bytes || !v->piece || !v->len || !v->eog || !order || !rest) goto nomem;
    if (n_eog) memcpy(v->eog, eog, (size_t)n_eog * sizeof *eog);
    v->n_eog = n_eog;
    size_t at = 0;
    int32_t n_real = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        uint32_t l = lens[i] > 65535 ? 0 : lens[i];
        if (l) memcpy(v->bytes + at, pieces[i], l);
        v->piece[i] = v->bytes + at;
        v->len[i] = l;
        at += l;
        if (l) order[n_real++] = i;
        for (int k = 0; k < GV_KINDS; k++) {
            int c = l ? kind_chars(k, v->piece[i], l) : -1;
            chars[k][i] = (int8_t)(c < 0 || c > 127 ? -1 : c);
        }
    }
    qsort_r(order, (size_t)n_real, sizeof *order, cmp_tok, v);
    if (!trie_build(&v->all, v, order, n_real)) goto nomem;
    size_t words = ((size_t)n_vocab + 31) / 32;
    if (!(v->body_upto = calloc((GV_BODY_MAX + 1) * words + 1, sizeof *v->body_upto))) goto nomem;
    int32_t n_other = 0;
    for (int32_t k = 0; k < n_real; k++) {
        int32_t id = order[k];
        int c = chars[GV_BODY][id];
        if (c >= 1 && c <= GV_BODY_MAX)
            for (int j = c; j <= GV_BODY_MAX; j++) v->body_upto[j * words + (id >> 5)] |= 1u << (id & 31), v->body_count[j]++;
        else rest[n_other++] = id;
    }
    if (!trie_build(&v->other, v, rest, n_other)) goto nomem;
    for (int s = 0; s < GV_SLICES; s++) {
        v->slice[s].kind = slice_def[s].kind;
        v->slice[s].chars = slice_def[s].chars;
        if (!slice_build(&v->slice[s], v, chars[slice_def[s].kind], order, n_real, rest)) goto nomem;
    }
    free(order);
    free(rest);
    for (int k = 0; k < GV_KINDS; k++) free(chars[k]);
    return v;
nomem:
    free(order);
    free(rest);
    for (int k = 0; k < GV_KINDS; k++) free(chars[k]);
    grammar_vocab_free(v);
    err_set(err, KVIK_ERR_NOMEM, "grammar: out of memory for the vocabulary");
    return NULL;
}

void grammar_vocab_free(struct grammar_vocab *v) {
    if (!v) return;
    trie_free(&v->all);
    trie_free(&v->other);
    free(v->body_upto);
    for (int s = 0; s < GV_SLICES; s++) {
        free(v->slice[s].bits);
        trie_free(&v->slice[s].rest);
    }
    free(v->eog);
    free(v->piece);
    free(v->len);
    free(v->bytes);
    free(v);
}

int32_t grammar_vocab_size(const struct grammar_vocab *v) { return v->n_vocab; }
