/*
 * pretok.h — what the pre-tokenizer files (pretok.c, pretok_tiktoken.c,
 * pretok_deepseek.c) share: chains of splits, the one splitting loop, and
 * the character tests several patterns use. Internal to those files; the
 * rest of the tokenizer calls pretok_split (tokenizer_int.h).
 *
 * A model's pre-tokenizer is a chain of stages, as in Hugging Face's
 * pre_tokenizers.Sequence: the first stage cuts the text into pieces, each
 * later stage cuts every piece of the one before on its own (a pattern sees
 * only its piece: "$" and "(?!\S)" stop at the piece's end), and the pieces
 * of the last stage are the words. Most stages are one regular expression
 * with behavior "isolated": every leftmost match is a piece, and so is
 * each stretch of text between two matches. Stages call each other
 * directly (depth = number of stages, at most 6): nothing is allocated.
 *
 * Positions are byte offsets into the text given to pretok_split. The unit
 * a pattern steps over is one character: a valid UTF-8 sequence, or a
 * single byte that is not valid UTF-8, whose category is "other" (UCAT_OTHER:
 * not a letter, number, mark, punctuation, symbol or whitespace). Hugging
 * Face never sees such bytes (its input is a Rust string); this rule makes
 * invalid text still split deterministically, each bad byte where a control
 * character would go.
 */
#ifndef KVIK_TOKENIZER_PRETOK_H
#define KVIK_TOKENIZER_PRETOK_H

#include "tokenizer/tokenizer_int.h"
#include "tokenizer/unicode.h"

struct pretok_chain;

/* Cuts piece [start, end) and hands each sub-piece on with pretok_next. */
typedef bool (*pretok_stage_fn)(const struct pretok_chain *ch, int k, size_t start, size_t end);

struct pretok_chain {
    const uint8_t *s;              /* the whole text */
    const pretok_stage_fn *stage;  /* [n_stages] */
    int n_stages;
    pretok_emit_fn emit;           /* receives the last stage's pieces */
    void *ctx;
};

/* Passes piece [start, end) of stage k on to stage k + 1, or to emit. */
static inline bool pretok_next(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    if (k + 1 < ch->n_stages) return ch->stage[k + 1](ch, k + 1, start, end);
    return ch->emit(ch->ctx, start, end);
}

/* A pattern tried at s[i] inside a piece ending at end: the end of its
 * match (leftmost-first, as a backtracking engine picks), or i if it does
 * not match there. Patterns here never match the empty string. */
typedef size_t (*pretok_match_fn)(const uint8_t *s, size_t i, size_t end);

/* Behavior "isolated": every leftmost match of `match` in [start, end) is a
 * piece, and so is each non-empty stretch between matches. Always inlined,
 * so that each stage calls its pattern directly (and may inline it). */
__attribute__((always_inline)) static inline bool
pretok_isolated(const struct pretok_chain *ch, int k, size_t start, size_t end,
                pretok_match_fn match) {
    const uint8_t *s = ch->s;
    size_t gap = start, i = start;
    while (i < end) {
        size_t m = match(s, i, end);
        if (m > i) {
            if (gap < i && !pretok_next(ch, k, gap, i)) return false;
            if (!pretok_next(ch, k, i, m)) return false;
            i = gap = m;
        } else {
            size_t l;
            ucat_at(s, end, i, &l);
            i += l;
        }
    }
    return gap >= end || pretok_next(ch, k, gap, end);
}

/* Stages more than one family uses (pretok.c). */
bool pretok_stage_digits(const struct pretok_chain *ch, int k, size_t start, size_t end);

/* End of the run of characters from i whose flags have a bit of `want`. */
static inline size_t pretok_run_of(const uint8_t *s, size_t i, size_t end, uint16_t want) {
    while (i < end) {
        size_t l;
        if (!(ucat_at(s, end, i, &l) & want)) break;
        i += l;
    }
    return i;
}

/* End of the run of characters from i whose flags have no bit of `avoid`. */
static inline size_t pretok_run_without(const uint8_t *s, size_t i, size_t end, uint16_t avoid) {
    while (i < end) {
        size_t l;
        if (ucat_at(s, end, i, &l) & avoid) break;
        i += l;
    }
    return i;
}

/*
 * The whitespace alternatives that close most patterns, at whitespace
 * s[i]: with newline true
 *     \s*[\r\n]+|\s+(?!\S)|\s+
 * else only the last two. \s*[\r\n]+ backtracks to the last \r or \n of
 * the whitespace run; \s+(?!\S) leaves the run's last character to the
 * next word when a non-space follows; \s+ then takes a lone character.
 */
static inline size_t pretok_space_end(const uint8_t *s, size_t i, size_t end, bool newline) {
    size_t last = i, j = i, nl_end = i;
    while (j < end) {
        size_t l;
        if (!(ucat_at(s, end, j, &l) & UCAT_WHITESPACE)) break;
        if (s[j] == '\r' || s[j] == '\n') nl_end = j + 1;
        last = j;
        j += l;
    }
    if (newline && nl_end > i) return nl_end;
    return (j == end || last == i) ? j : last;
}

/* A model's chain; pretok.c indexes them by enum pretok_kind. */
struct pretok_chain_def {
    const pretok_stage_fn *stage; /* [n_stages] */
    int n_stages;
};
#define PRETOK_CHAIN(stages) {stages, (int)(sizeof stages / sizeof stages[0])}

/* The chains defined in the other files. */
extern const struct pretok_chain_def pretok_chain_llama3, pretok_chain_qwen2, pretok_chain_qwen35,
    pretok_chain_gpt4o, pretok_chain_tekken;                    /* pretok_tiktoken.c */
extern const struct pretok_chain_def pretok_chain_deepseek_llm, pretok_chain_deepseek_coder,
    pretok_chain_deepseek_v3;                                   /* pretok_deepseek.c */

#endif /* KVIK_TOKENIZER_PRETOK_H */
