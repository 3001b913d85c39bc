/*
 * pretok_tiktoken.c — the tiktoken-style split patterns: cl100k's (Llama 3,
 * DBRX, GLM-4; Qwen 2 with single digits; Qwen 3.5 with marks in words) and o200k's (GPT-4o, Llama 4;
 * Tekken without contractions and with single digits). Each is one
 * Split(pattern, behavior="isolated") before ByteLevel(use_regex=false).
 *
 * Llama 3 (cl100k_base), first match wins at each position:
 *
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)     contractions, any case (U+017F "ſ"
 *                                    case-folds to "s", so "'ſ" is one too)
 *   |[^\r\n\p{L}\p{N}]?\p{L}+        letters, led by at most one character
 *                                    that is no newline, letter or number
 *   |\p{N}{1,3}                      numbers in groups of up to three
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*       anything else (marks included), with
 *                                    an optional leading space and the
 *                                    newlines that follow it
 *   |\s*[\r\n]+                      whitespace up to its last newline
 *   |\s+(?!\S)|\s+                   as in GPT-2
 *
 * Qwen 2 is the same with \p{N} (one digit per word). Qwen 3.5 is Qwen 2
 * with marks joining letters: [\p{L}\p{M}]+ for \p{L}+ and
 * [^\s\p{L}\p{M}\p{N}]+ for anything else, so "e\u0301" and "a\u0300a" are
 * one word each. Its leading character is still [^\r\n\p{L}\p{N}]: a mark
 * may lead, but then it is part of the run anyway.
 *
 * GPT-4o (o200k_base), with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
 * W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] ("upper-ish" and "lower-ish"; modifier
 * letters, other letters and marks are both):
 *
 *   [^\r\n\p{L}\p{N}]?U*W+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   |[^\r\n\p{L}\p{N}]?U+W*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   |\p{N}{1,3}
 *   | ?[^\s\p{L}\p{N}]+[\r\n/]*
 *   |\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * Tekken (Mistral NeMo) is the same without the two contraction suffixes
 * and with \p{N}.
 *
 * The letter alternatives need the backtracking spelled out. U*W+ first
 * takes the whole U run; if a W character follows, W+ takes the W run from
 * there ("ABCdef" whole, "HTMLParser" whole). Otherwise U* gives characters
 * back until W+ can start: at the last character of the run that is also W
 * (Lm, Lo or a mark), and the match ends right after it. If the run has no
 * such character the second alternative takes the run alone ("ABC").
 * The optional leading character is tried first consumed, then not, for
 * each alternative in turn — a mark before "ABC" is W, so U*W+ without the
 * leader matches the mark alone before U+W* with the leader would match
 * mark and run.
 */
#include "tokenizer/pretok.h"

#define NOT_OTHER (UCAT_WHITESPACE | UCAT_LETTER | UCAT_NUMBER)
#define UPPERISH (UCAT_LU | UCAT_LT | UCAT_LM | UCAT_LO | UCAT_MARK)
#define LOWERISH (UCAT_LL | UCAT_LM | UCAT_LO | UCAT_MARK)

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i] == '\'': its length, or 0. Only
 * ASCII letters and U+017F fold to those letters (Unicode CaseFolding.txt,
 * simple and full foldings). c | 0x20 lowers an ASCII letter and maps no
 * other byte onto one. */
static size_t contraction_len(const uint8_t *s, size_t i, size_t end) {
    if (i + 1 >= end) return 0;
    uint8_t a = s[i + 1] | 0x20;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= end) return 0;
    if (s[i + 1] == 0xC5 && s[i + 2] == 0xBF) return 3; /* 'ſ */
    uint8_t b = s[i + 2] | 0x20;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* End of up to max \p{N} characters from i (the first, of length l, known). */
static inline size_t numbers_end(const uint8_t *s, size_t i, size_t l, size_t end, int max) {
    size_t j = i + l;
    for (int k = 1; k < max && j < end; k++) {
        size_t lj;
        if (!(ucat_at(s, end, j, &lj) & UCAT_NUMBER)) break;
        j += lj;
    }
    return j;
}

/* " ?[^\s\p{L}\p{N}]+" then the trailing newlines (and '/' when slash):
 * the match's end, or i. c = s[i] has flags f and length l; not_other is
 * the class the run excludes (NOT_OTHER, or it and marks). */
static inline size_t other_end(const uint8_t *s, size_t i, size_t end, uint16_t f, size_t l,
                               bool slash, uint16_t not_other) {
    size_t j;
    if (!(f & not_other)) {
        j = pretok_run_without(s, i + l, end, not_other);
    } else if (s[i] == ' ' && i + 1 < end) {
        size_t l1;
        if (ucat_at(s, end, i + 1, &l1) & not_other) return i;
        j = pretok_run_without(s, i + 1 + l1, end, not_other);
    } else {
        return i;
    }
    while (j < end && (s[j] == '\r' || s[j] == '\n' || (slash && s[j] == '/'))) j++;
    return j;
}

/* ---- cl100k ------------------------------------------------------------- */

/* letters: the class of a word's run (UCAT_LETTER, or it and marks). */
static inline size_t match_cl100k(const uint8_t *s, size_t i, size_t end, int max_digits,
                                  uint16_t letters) {
    uint8_t c = s[i];
    if (c == '\'') {
        size_t k = contraction_len(s, i, end);
        if (k) return i + k;
    }
    size_t l;
    uint16_t f = ucat_at(s, end, i, &l);
    if (f & letters) return pretok_run_of(s, i + l, end, letters);
    if (!(f & UCAT_NUMBER) && c != '\r' && c != '\n' && i + l < end) {
        size_t l1;
        if (ucat_at(s, end, i + l, &l1) & letters)
            return pretok_run_of(s, i + l + l1, end, letters);
    }
    if (f & UCAT_NUMBER) return numbers_end(s, i, l, end, max_digits);
    size_t j = other_end(s, i, end, f, l, false, NOT_OTHER | letters);
    if (j > i) return j;
    return pretok_space_end(s, i, end, true);
}

static size_t match_llama3(const uint8_t *s, size_t i, size_t end) {
    return match_cl100k(s, i, end, 3, UCAT_LETTER);
}
static size_t match_qwen2(const uint8_t *s, size_t i, size_t end) {
    return match_cl100k(s, i, end, 1, UCAT_LETTER);
}
static size_t match_qwen35(const uint8_t *s, size_t i, size_t end) {
    return match_cl100k(s, i, end, 1, UCAT_LETTER | UCAT_MARK);
}

/* ---- o200k -------------------------------------------------------------- */

/* The letter alternatives at q: *a = end of U*W+ (q if it fails), *b = end
 * of U+W* for when U*W+ failed (q if it fails too). */
static inline void cased_letters(const uint8_t *s, size_t q, size_t end, size_t *a, size_t *b) {
    size_t j = q, after_w = q; /* after the run's last W character */
    while (j < end) {
        size_t l;
        uint16_t f = ucat_at(s, end, j, &l);
        if (!(f & UPPERISH)) {
            if (f & LOWERISH) { /* a lowercase letter ends the run: W+ from here */
                *a = pretok_run_of(s, j + l, end, LOWERISH);
                *b = q;
                return;
            }
            break;
        }
        if (f & LOWERISH) after_w = j + l;
        j += l;
    }
    *a = after_w;
    *b = j;
}

static inline size_t match_o200k(const uint8_t *s, size_t i, size_t end, int max_digits,
                                 bool contractions) {
    uint8_t c = s[i];
    size_t l;
    uint16_t f = ucat_at(s, end, i, &l);
    size_t q = i + l, e = 0;
    size_t a1 = q, b1 = q, a0 = i, b0 = i;
    bool lead = !(f & (UCAT_LETTER | UCAT_NUMBER)) && c != '\r' && c != '\n' && q < end;
    if (lead) cased_letters(s, q, end, &a1, &b1);
    if (a1 > q) {
        e = a1;
    } else {
        if (f & (UPPERISH | LOWERISH)) cased_letters(s, i, end, &a0, &b0);
        e = a0 > i ? a0 : b1 > q ? b1 : b0 > i ? b0 : 0;
    }
    if (e) {
        if (contractions && e < end && s[e] == '\'') e += contraction_len(s, e, end);
        return e;
    }
    if (f & UCAT_NUMBER) return numbers_end(s, i, l, end, max_digits);
    size_t j = other_end(s, i, end, f, l, true, NOT_OTHER);
    if (j > i) return j;
    return pretok_space_end(s, i, end, true);
}

static size_t match_gpt4o(const uint8_t *s, size_t i, size_t end) {
    return match_o200k(s, i, end, 3, true);
}
static size_t match_tekken(const uint8_t *s, size_t i, size_t end) {
    return match_o200k(s, i, end, 1, false);
}

/* ---- chains ------------------------------------------------------------- */

static bool stage_llama3(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_llama3);
}
static bool stage_qwen2(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_qwen2);
}
static bool stage_qwen35(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_qwen35);
}
static bool stage_gpt4o(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_gpt4o);
}
static bool stage_tekken(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_tekken);
}

static const pretok_stage_fn k_llama3[] = {stage_llama3}, k_qwen2[] = {stage_qwen2},
                             k_qwen35[] = {stage_qwen35}, k_gpt4o[] = {stage_gpt4o},
                             k_tekken[] = {stage_tekken};

const struct pretok_chain_def pretok_chain_llama3 = PRETOK_CHAIN(k_llama3),
                              pretok_chain_qwen2 = PRETOK_CHAIN(k_qwen2),
                              pretok_chain_qwen35 = PRETOK_CHAIN(k_qwen35),
                              pretok_chain_gpt4o = PRETOK_CHAIN(k_gpt4o),
                              pretok_chain_tekken = PRETOK_CHAIN(k_tekken);
