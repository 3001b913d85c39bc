/*
 * pretok_deepseek.c — DeepSeek's pre-tokenizers: chains of Split stages
 * (behavior "isolated" each), then ByteLevel(use_regex=false).
 *
 * DeepSeek Coder (deepseek-coder-*-base/instruct):
 *   1. [\r\n]                      every CR and LF alone
 *   2. \s?\p{L}+                   letter runs, with one leading whitespace
 *   3. \s?\p{P}+                   punctuation runs, likewise
 *   4. [一-龥ࠀ-一가-퟿]+            U+0800..U+9FA5 and U+AC00..U+D7FF runs
 *   5. Digits(individual_digits=true)
 *
 * DeepSeek LLM (deepseek-llm-*, DeepSeek-V2, DeepSeek-Coder-V2):
 *   1. [\r\n]
 *   2. \s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽ
 *      ᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ί
 *      ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇ
 *      Ꞌ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+
 *                                  runs of cased letters (k_cased below;
 *                                  some endpoints are compatibility
 *                                  characters such as U+212A KELVIN SIGN
 *                                  and U+1FD3, which text copies tend to
 *                                  normalize away: the table is exact)
 *   3. \s?[!-/:-~！-／：-～‘-‟　-。]+   ASCII punctuation and letters (:-~
 *                                  spans both), fullwidth forms, curly
 *                                  quotes, U+3000..U+3002
 *   4. \s+$                        the piece's trailing whitespace
 *   5. [一-龥ࠀ-一가-퟿]+            as in Coder
 *   6. Digits(individual_digits=true)
 *
 * DeepSeek V3 / R1 (also Hunyuan dense):
 *   1. \p{N}{1,3}
 *   2. [一-龥぀-ゟ゠-ヿ]+            U+4E00..U+9FA5, hiragana, katakana
 *   3. [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
 *      |[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
 *      | ?[\p{P}\p{S}]+[\r\n]*
 *      |\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * Text no stage matches (numbers between letters in stage 2 of Coder, a
 * control character in V3's stage 3, ...) stays in the pieces between
 * matches.
 */
#include "tokenizer/pretok.h"

/* Code point of the character at s[i] and its length; an invalid byte
 * gives UCP_INVALID | byte, which no range below contains. */
static inline uint32_t cp_at(const uint8_t *s, size_t i, size_t end, size_t *len) {
    if (s[i] < 0x80) {
        *len = 1;
        return s[i];
    }
    struct ucp u = utf8_decode(s + i, end - i);
    *len = u.len;
    return u.cp;
}

static inline bool is_space(const uint8_t *s, size_t i, size_t end, size_t *len) {
    return (ucat_at(s, end, i, len) & UCAT_WHITESPACE) != 0;
}

/* \s?X+ where X is the set of characters for which in(s, i, end, &len)
 * holds: the match's end, or i. */
typedef bool (*char_set_fn)(const uint8_t *s, size_t i, size_t end, size_t *len);

static inline size_t space_and_run(const uint8_t *s, size_t i, size_t end, char_set_fn in) {
    size_t l, ls, p = i;
    /* \s? is greedy: a whitespace character leads when the set follows it */
    if (is_space(s, i, end, &ls) && i + ls < end && in(s, i + ls, end, &l)) p = i + ls;
    else if (!in(s, i, end, &l)) return i;
    p += l;
    while (p < end && in(s, p, end, &l)) p += l;
    return p;
}

/* Runs of characters in a set, no leading space. */
static inline size_t run_in(const uint8_t *s, size_t i, size_t end, char_set_fn in) {
    size_t l, p = i;
    while (p < end && in(s, p, end, &l)) p += l;
    return p;
}

/* ---- character sets ----------------------------------------------------- */

static bool in_letter(const uint8_t *s, size_t i, size_t end, size_t *len) {
    return (ucat_at(s, end, i, len) & UCAT_LETTER) != 0;
}

static bool in_punct(const uint8_t *s, size_t i, size_t end, size_t *len) {
    return (ucat_at(s, end, i, len) & UCAT_PUNCT) != 0;
}

/* [一-龥ࠀ-一가-퟿] */
static bool in_cjk(const uint8_t *s, size_t i, size_t end, size_t *len) {
    uint32_t cp = cp_at(s, i, end, len);
    return (cp >= 0x0800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF);
}

/* [一-龥぀-ゟ゠-ヿ] */
static bool in_cjk_kana(const uint8_t *s, size_t i, size_t end, size_t *len) {
    uint32_t cp = cp_at(s, i, end, len);
    return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF);
}

/* DeepSeek LLM's cased letters: the ranges of stage 2, in order. Every
 * character in them is Lu, Ll or Lt in Unicode 15. */
static const uint32_t k_cased[][2] = {
    {0x0041, 0x005A},   {0x0061, 0x007A},   {0x00B5, 0x00B5},   {0x00C0, 0x00D6},
    {0x00D8, 0x00F6},   {0x00F8, 0x01BA},   {0x01BC, 0x01BF},   {0x01C4, 0x0293},
    {0x0295, 0x02AF},   {0x0370, 0x0373},   {0x0376, 0x0377},   {0x037B, 0x037D},
    {0x037F, 0x037F},   {0x0386, 0x0386},   {0x0388, 0x038A},   {0x038C, 0x038C},
    {0x038E, 0x03A1},   {0x03A3, 0x03F5},   {0x03F7, 0x0481},   {0x048A, 0x052F},
    {0x0531, 0x0556},   {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

static bool in_cased(const uint8_t *s, size_t i, size_t end, size_t *len) {
    if (s[i] < 0x80) {
        *len = 1;
        return (ucat_ascii[s[i]] & UCAT_LETTER) != 0; /* A-Z a-z */
    }
    uint32_t cp = cp_at(s, i, end, len);
    /* every range holds only Lu, Ll and Lt: others need no search */
    if ((cp & UCP_INVALID) || !(ucat_slow(cp) & (UCAT_LU | UCAT_LL | UCAT_LT))) return false;
    size_t lo = 0, hi = sizeof k_cased / sizeof k_cased[0]; /* first range ending >= cp */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (k_cased[mid][1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < sizeof k_cased / sizeof k_cased[0] && k_cased[lo][0] <= cp;
}

/* [!-/:-~！-／：-～‘-‟　-。] */
static bool in_ds_punct(const uint8_t *s, size_t i, size_t end, size_t *len) {
    if (s[i] < 0x80) {
        *len = 1;
        return s[i] > 0x20 && s[i] < 0x7F && !(s[i] >= '0' && s[i] <= '9');
    }
    uint32_t cp = cp_at(s, i, end, len);
    return (cp >= 0xFF01 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF5E) ||
           (cp >= 0x2018 && cp <= 0x201F) || (cp >= 0x3000 && cp <= 0x3002);
}

/* ---- matchers and stages ------------------------------------------------ */

static size_t match_letters(const uint8_t *s, size_t i, size_t end) {
    return space_and_run(s, i, end, in_letter);
}
static size_t match_punct(const uint8_t *s, size_t i, size_t end) {
    return space_and_run(s, i, end, in_punct);
}
static size_t match_cased(const uint8_t *s, size_t i, size_t end) {
    return space_and_run(s, i, end, in_cased);
}
static size_t match_ds_punct(const uint8_t *s, size_t i, size_t end) {
    return space_and_run(s, i, end, in_ds_punct);
}
static size_t match_cjk(const uint8_t *s, size_t i, size_t end) {
    return run_in(s, i, end, in_cjk);
}
static size_t match_cjk_kana(const uint8_t *s, size_t i, size_t end) {
    return run_in(s, i, end, in_cjk_kana);
}
static size_t match_numbers3(const uint8_t *s, size_t i, size_t end) {
    size_t j = i;
    for (int k = 0; k < 3 && j < end; k++) {
        size_t l;
        if (!(ucat_at(s, end, j, &l) & UCAT_NUMBER)) break;
        j += l;
    }
    return j;
}

static inline bool ascii_alpha(uint8_t c) { return (uint8_t)((c | 0x20) - 'a') < 26; }

static size_t match_v3(const uint8_t *s, size_t i, size_t end) {
    const uint16_t LM = UCAT_LETTER | UCAT_MARK, PS = UCAT_PUNCT | UCAT_SYMBOL;
    uint8_t c = s[i];
    /* [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ */
    if (c > 0x20 && c < 0x7F && !(ucat_ascii[c] & (UCAT_LETTER | UCAT_NUMBER)) && i + 1 < end &&
        ascii_alpha(s[i + 1])) {
        size_t j = i + 2;
        while (j < end && ascii_alpha(s[j])) j++;
        return j;
    }
    size_t l, l1;
    uint16_t f = ucat_at(s, end, i, &l);
    /* [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ */
    if (!(f & (UCAT_LETTER | PS)) && c != '\r' && c != '\n' && i + l < end &&
        (ucat_at(s, end, i + l, &l1) & LM))
        return pretok_run_of(s, i + l + l1, end, LM);
    if (f & LM) return pretok_run_of(s, i + l, end, LM);
    /* " ?[\p{P}\p{S}]+[\r\n]*" */
    size_t j = i;
    if (f & PS) j = pretok_run_of(s, i + l, end, PS);
    else if (c == ' ' && i + 1 < end && (ucat_at(s, end, i + 1, &l1) & PS))
        j = pretok_run_of(s, i + 1 + l1, end, PS);
    if (j > i) {
        while (j < end && (s[j] == '\r' || s[j] == '\n')) j++;
        return j;
    }
    /* \s*[\r\n]+|\s+(?!\S)|\s+ */
    if (f & UCAT_WHITESPACE) return pretok_space_end(s, i, end, true);
    return i;
}

/* [\r\n], over bytes: those two never occur inside a UTF-8 sequence. */
static bool stage_newline(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    const uint8_t *s = ch->s;
    size_t gap = start;
    for (size_t i = start; i < end; i++) {
        if (s[i] != '\r' && s[i] != '\n') continue;
        if (gap < i && !pretok_next(ch, k, gap, i)) return false;
        if (!pretok_next(ch, k, i, i + 1)) return false;
        gap = i + 1;
    }
    return gap >= end || pretok_next(ch, k, gap, end);
}
static bool stage_letters(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_letters);
}
static bool stage_punct(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_punct);
}
static bool stage_cased(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_cased);
}
static bool stage_ds_punct(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_ds_punct);
}
static bool stage_cjk(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_cjk);
}
static bool stage_cjk_kana(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_cjk_kana);
}
static bool stage_numbers3(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_numbers3);
}
static bool stage_v3(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_v3);
}

/* \s+$: the piece's trailing whitespace run, if any, is a piece. One pass
 * (a matcher tried at every position would rescan each inner run). */
static bool stage_trailing_space(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    const uint8_t *s = ch->s;
    size_t run = end; /* start of the current whitespace run; end if none */
    for (size_t i = start; i < end;) {
        size_t l;
        if (is_space(s, i, end, &l)) {
            if (run == end) run = i;
        } else {
            run = end;
        }
        i += l;
    }
    if (run > start && run < end && !pretok_next(ch, k, start, run)) return false;
    return pretok_next(ch, k, run < end ? run : start, end);
}

static const pretok_stage_fn k_coder[] = {stage_newline, stage_letters, stage_punct, stage_cjk,
                                          pretok_stage_digits};
static const pretok_stage_fn k_llm[] = {stage_newline, stage_cased,        stage_ds_punct,
                                        stage_trailing_space, stage_cjk, pretok_stage_digits};
static const pretok_stage_fn k_v3[] = {stage_numbers3, stage_cjk_kana, stage_v3};

const struct pretok_chain_def pretok_chain_deepseek_coder = PRETOK_CHAIN(k_coder),
                              pretok_chain_deepseek_llm = PRETOK_CHAIN(k_llm),
                              pretok_chain_deepseek_v3 = PRETOK_CHAIN(k_v3);
