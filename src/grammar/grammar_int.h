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
    int root;
    /* masks already computed, by parser state (matcher.c): shared by every
     * matcher of the grammar over one vocabulary */
    pthread_mutex_t cache_mu;
    struct gcache *cache;
};

void gcache_free(struct gcache *c); /* matcher.c; NULL is fine */

#endif /* KVIK_GRAMMAR_GRAMMAR_INT_H */
