/*
 * grammar_int.h — the compiled form of a grammar, shared by the GBNF
 * compiler (gbnf.c) and the matcher (matcher.c).
 *
 * Symbols of all alternatives lie in one array; each alternative ends with
 * a GSYM_END. A position is an index into that array: the next symbol to
 * match. A GSYM_BYTES symbol matches one byte of its set; a GSYM_RULE
 * symbol any alternative of its rule.
 */
#ifndef KVIK_GRAMMAR_GRAMMAR_INT_H
#define KVIK_GRAMMAR_GRAMMAR_INT_H

#include <pthread.h>

#include "grammar/grammar.h"

enum { GSYM_END = 0, GSYM_BYTES = 1, GSYM_RULE = 2 };

struct gsym {
    uint32_t kind : 2;
    uint32_t arg : 30; /* GSYM_BYTES: a set; GSYM_RULE: a rule */
};

struct gset {
    uint64_t w[4]; /* bit b: byte b is in the set */
};

static inline bool gset_has(const struct gset *s, uint8_t b) { return (s->w[b >> 6] >> (b & 63)) & 1; }

struct grammar {
    int n_rules;
    uint32_t *rule_alt0; /* [n_rules + 1]: rule r's alternatives are alts[rule_alt0[r] .. rule_alt0[r + 1]) */
    uint32_t *alts;      /* each alternative's first position */
    int n_alts;
    struct gsym *syms;
    int n_syms;
    struct gset *sets;
    int n_sets;
    /* bytes no set tells apart share a class: class c's transitions are
     * one for all its bytes */
    uint8_t byte_class[256];
    uint8_t class_byte[256]; /* a byte of each class */
    int n_classes;
    int root;
    /* masks already computed, by parser state (matcher.c): shared by every
     * matcher of the grammar over one vocabulary */
    pthread_mutex_t cache_mu;
    struct gcache *cache;
    /* the automaton all matchers of the grammar share (matcher.c) */
    pthread_mutex_t au_mu;
    struct gauto *au;
};

void gcache_free(struct gcache *c);     /* matcher.c; NULL is fine */
void grammar_auto_free(struct gauto *a); /* matcher.c; NULL is fine */

/* Drops the grammar's automaton but the live matchers' current states
 * (done by itself past its size limits; exposed for tests). False when
 * out of memory. */
struct grammar_matcher;
bool grammar_matcher_forget(struct grammar_matcher *m);

/* ---- the vocabulary (vocab.c) ----------------------------------------------- */

/* Tokens as a trie of their bytes, nodes in preorder; node 0 is the root
 * (the empty prefix). */
struct vtrie {
    int32_t n_nodes;
    uint8_t *byte;  /* [n_nodes] the edge byte into the node */
    uint16_t *depth; /* [n_nodes] */
    int32_t *end;   /* [n_nodes] one past the node's subtree */
    int32_t *tok0;  /* [n_nodes + 1] the tokens ending at node k: toks[tok0[k] .. tok0[k + 1]) */
    int32_t *toks;
    int max_depth;
};

/*
 * A slice: the tokens whose bytes are text of 1 to `chars` characters of
 * a kind, as bits, and the trie of every other token. Kinds: the body of
 * a JSON string (valid UTF-8, no '"', no '\\', no control character) and
 * ASCII letters and digits. A parser state that takes every such text
 * (checked on the grammar, matcher.c) allows the whole slice, and only
 * the rest need walking.
 */
enum { GV_BODY, GV_ALNUM, GV_KINDS };
enum { GV_SLICES = 10, GV_MAX_CHARS = 32 };

struct vslice {
    int kind, chars;
    uint32_t *bits; /* ceil(n_vocab / 32) words */
    int64_t count;
    struct vtrie rest;
};

/* Body text (the slices' first kind) by length, up to GV_BODY_MAX
 * characters. A state that takes every body text of j characters and
 * none of j + 1 (or every one of GV_BODY_MAX) allows exactly the tokens
 * of body_upto[j] among them, and only the trie `other` of the remaining
 * tokens needs walking. */
enum { GV_BODY_MAX = 24 };

struct grammar_vocab {
    int32_t n_vocab;
    struct vtrie all;
    uint32_t *body_upto; /* [(GV_BODY_MAX + 1) * words]: j's bits, tokens of 1..j characters */
    int64_t body_count[GV_BODY_MAX + 1];
    struct vtrie other; /* the tokens that are not body text of 1..GV_BODY_MAX characters */
    struct vslice slice[GV_SLICES]; /* by kind, then chars ascending */
    int32_t *eog;
    int n_eog;
    const uint8_t **piece; /* [n_vocab] (owned copies in bytes) */
    uint32_t *len;
    uint8_t *bytes;
};

#endif /* KVIK_GRAMMAR_GRAMMAR_INT_H */
