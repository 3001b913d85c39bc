/*
 * vocab.c — a tokenizer's vocabulary as the matcher's trie: each token's
 * bytes as the detokenizer writes them (control tokens none: they are
 * never part of constrained text; end-of-generation tokens are allowed
 * apart, when the grammar may end).
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
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
