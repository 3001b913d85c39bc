/*
 * pretok.c — pre-tokenizers: hand-written scanners over code points that
 * cut text into the words BPE then encodes, each equivalent to the regular
 * expression its model was trained with (no regex engine).
 *
 * GPT-2's pattern, tried left to right at each position, first match wins:
 *
 *   's|'t|'re|'ve|'m|'ll|'d      English contractions (case-sensitive)
 *   | ?\p{L}+                    letters, with at most one leading space
 *   | ?\p{N}+                    numbers, likewise
 *   | ?[^\s\p{L}\p{N}]+          anything else, likewise
 *   |\s+(?!\S)                   whitespace not followed by a non-space:
 *                                a run before a word gives up its last
 *                                character (which may start the next word)
 *   |\s+                         a lone whitespace character
 *
 * StarCoder / SmolLM / Refact first split every \p{N} character off on its
 * own (Hugging Face's Digits(individual_digits=true)), then apply GPT-2's
 * pattern to the pieces in between — so "a 12" is "a", " ", "1", "2".
 *
 * Bytes that are not valid UTF-8 count as one "other" character each.
 */
#include "tokenizer/tokenizer_int.h"
#include "tokenizer/unicode.h"

/* Category flags of the character at s[i] (i < n) and its length. */
static inline uint8_t char_at(const uint8_t *s, size_t n, size_t i, size_t *len) {
    if (s[i] < 0x80) {
        *len = 1;
        return ucat_ascii[s[i]];
    }
    struct ucp u = utf8_decode(s + i, n - i);
    *len = u.len;
    return (u.cp & UCP_INVALID) ? (uint8_t)UCAT_OTHER : ucat_slow(u.cp);
}

/* End of the run of characters starting at i whose flags match (any bit of
 * `want` set, or none of `avoid` set when want is 0). */
static size_t run_end(const uint8_t *s, size_t n, size_t i, uint8_t want, uint8_t avoid) {
    while (i < n) {
        size_t l;
        uint8_t f = char_at(s, n, i, &l);
        if (want ? !(f & want) : (f & avoid) != 0) break;
        i += l;
    }
    return i;
}

/* Length of a contraction ('s 't 're 've 'm 'll 'd) at s[i] == '\'', or 0. */
static size_t contraction_len(const uint8_t *s, size_t n, size_t i) {
    if (i + 1 >= n) return 0;
    uint8_t a = s[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= n) return 0;
    uint8_t b = s[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* GPT-2's pattern over s[0..n); word offsets are shifted by base. */
static bool split_gpt2(const uint8_t *s, size_t n, size_t base, pretok_emit_fn emit, void *ctx) {
    const uint8_t NOT_OTHER = UCAT_WHITESPACE | UCAT_LETTER | UCAT_NUMBER;
    size_t i = 0;
    while (i < n) {
        size_t end = 0;
        if (s[i] == '\'') end = i + contraction_len(s, n, i);
        if (end <= i) {
            /* " ?X+": a single U+0020 may lead a letter, number or other run */
            size_t p = (s[i] == ' ' && i + 1 < n) ? i + 1 : i;
            size_t l;
            uint8_t f = char_at(s, n, p, &l);
            if (f & UCAT_LETTER) end = run_end(s, n, p + l, UCAT_LETTER, 0);
            else if (f & UCAT_NUMBER) end = run_end(s, n, p + l, UCAT_NUMBER, 0);
            else if (!(f & NOT_OTHER)) end = run_end(s, n, p + l, 0, NOT_OTHER);
        }
        if (end <= i) {
            size_t l;
            uint8_t f = char_at(s, n, i, &l);
            if (f & UCAT_WHITESPACE) {
                /* the run; unless it reaches the end it leaves its last char */
                size_t last = i, j = i;
                while (j < n) {
                    size_t lj;
                    if (!(char_at(s, n, j, &lj) & UCAT_WHITESPACE)) break;
                    last = j;
                    j += lj;
                }
                end = (j == n || last == i) ? j : last;
            } else {
                end = i + l; /* unreachable by the pattern; keeps progress */
            }
        }
        if (!emit(ctx, base + i, base + end)) return false;
        i = end;
    }
    return true;
}

/* Digits alone, GPT-2 in between. */
static bool split_starcoder(const uint8_t *s, size_t n, pretok_emit_fn emit, void *ctx) {
    size_t seg = 0, i = 0;
    while (i < n) {
        size_t l;
        uint8_t f = char_at(s, n, i, &l);
        if (f & UCAT_NUMBER) {
            if (i > seg && !split_gpt2(s + seg, i - seg, seg, emit, ctx)) return false;
            if (!emit(ctx, i, i + l)) return false;
            seg = i + l;
        }
        i += l;
    }
    return seg >= n || split_gpt2(s + seg, n - seg, seg, emit, ctx);
}

bool pretok_split(enum pretok_kind kind, const uint8_t *s, size_t n, pretok_emit_fn emit,
                  void *ctx) {
    switch (kind) {
    case PRETOK_STARCODER: return split_starcoder(s, n, emit, ctx);
    case PRETOK_GPT2:
    default: return split_gpt2(s, n, 0, emit, ctx);
    }
}
