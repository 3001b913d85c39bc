/*
 * pretok.c — pre-tokenizers: hand-written scanners over code points that
 * cut text into the words BPE then encodes, each equivalent to the
 * pre-tokenizer its model's tokenizer.json declares (no regex engine).
 * This file holds the chain machinery (pretok.h), the dispatch, and the
 * GPT-2 family: GPT-2 itself, StarCoder, Falcon, BLOOM and Viking. The
 * tiktoken-style patterns (Llama 3, Qwen 2, GPT-4o, Tekken) are in
 * pretok_tiktoken.c, DeepSeek's in pretok_deepseek.c.
 *
 * GPT-2's pattern (ByteLevel with use_regex), tried left to right at each
 * position, first match wins:
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
 * Every character is matched by one alternative, so there are no gaps.
 */
#include "tokenizer/pretok.h"

/* ---- shared stages ------------------------------------------------------ */

/* Digits(individual_digits=true): every \p{N} character (Rust's
 * char::is_numeric: Nd, Nl, No) is a piece of its own. */
bool pretok_stage_digits(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    const uint8_t *s = ch->s;
    size_t gap = start;
    for (size_t i = start; i < end;) {
        size_t l;
        if (!(ucat_at(s, end, i, &l) & UCAT_NUMBER)) {
            i += l;
            continue;
        }
        if (gap < i && !pretok_next(ch, k, gap, i)) return false;
        if (!pretok_next(ch, k, i, i + l)) return false;
        i = gap = i + l;
    }
    return gap >= end || pretok_next(ch, k, gap, end);
}

/* ---- GPT-2 -------------------------------------------------------------- */

/* Length of a contraction ('s 't 're 've 'm 'll 'd) at s[i] == '\'', or 0. */
static size_t contraction_len(const uint8_t *s, size_t i, size_t end) {
    if (i + 1 >= end) return 0;
    uint8_t a = s[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= end) return 0;
    uint8_t b = s[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

static size_t match_gpt2(const uint8_t *s, size_t i, size_t end) {
    const uint16_t NOT_OTHER = UCAT_WHITESPACE | UCAT_LETTER | UCAT_NUMBER;
    if (s[i] == '\'') {
        size_t c = contraction_len(s, i, end);
        if (c) return i + c;
    }
    size_t p = i, l;
    uint16_t f = ucat_at(s, end, i, &l);
    if (s[i] == ' ' && i + 1 < end) {
        /* " ?X+": the space leads whatever non-space follows it */
        size_t l1;
        uint16_t f1 = ucat_at(s, end, i + 1, &l1);
        if (!(f1 & UCAT_WHITESPACE)) {
            p = i + 1;
            f = f1;
            l = l1;
        }
    }
    if (f & UCAT_LETTER) return pretok_run_of(s, p + l, end, UCAT_LETTER);
    if (f & UCAT_NUMBER) return pretok_run_of(s, p + l, end, UCAT_NUMBER);
    if (!(f & UCAT_WHITESPACE)) return pretok_run_without(s, p + l, end, NOT_OTHER);
    return pretok_space_end(s, i, end, false);
}

static bool stage_gpt2(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_gpt2);
}

/* StarCoder, SmolLM, Refact, Command-R, ...:
 *   Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)]
 * every \p{N} character alone, then GPT-2's pattern on the text between,
 * so "a 12" is "a", " ", "1", "2". */
static const pretok_stage_fn k_gpt2[] = {stage_gpt2};
static const pretok_stage_fn k_starcoder[] = {pretok_stage_digits, stage_gpt2};

/* ---- Falcon ------------------------------------------------------------- */

/*
 * Falcon:
 *   Sequence[Punctuation(behavior=contiguous),
 *            ByteLevel(use_regex=true),
 *            Digits(individual_digits=false),
 *            Split("[0-9][0-9][0-9]", isolated)]
 *
 * 1. Each run of punctuation is a piece: Rust's is_ascii_punctuation (so
 *    $ + < = > ^ ` | ~ too) or \p{P} as the Rust crate unicode_categories
 *    knows it, i.e. as of Unicode 8.0 (UCAT_PUNCT_U8).
 * 2. GPT-2's pattern inside each piece.
 * 3. ByteLevel has now turned every byte into one character of its
 *    alphabet, and the last two stages see those: Digits cuts out runs of
 *    characters that are numeric there, i.e. of the bytes '0'..'9' and
 *    0xB2 0xB3 0xB9 0xBC 0xBD 0xBE (which became ² ³ ¹ ¼ ½ ¾), even in
 *    the middle of a UTF-8 sequence ("²" = C2 B2 gives C2 | B2).
 * 4. Runs of ASCII digits are cut into threes from the left ("12345" is
 *    "123", "45").
 */
static size_t match_falcon_punct(const uint8_t *s, size_t i, size_t end) {
    size_t j = i;
    while (j < end) {
        size_t l = 1;
        uint8_t c = s[j];
        bool punct;
        if (c < 0x80)
            punct = c > 0x20 && c < 0x7F && !(ucat_ascii[c] & (UCAT_LETTER | UCAT_NUMBER));
        else
            punct = (ucat_at(s, end, j, &l) & UCAT_PUNCT_U8) != 0;
        if (!punct) break;
        j += l;
    }
    return j;
}

static bool stage_falcon_punct(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_falcon_punct);
}

static inline bool falcon_numeric_byte(uint8_t b) {
    return (b >= '0' && b <= '9') || b == 0xB2 || b == 0xB3 || b == 0xB9 ||
           (b >= 0xBC && b <= 0xBE);
}

/* Stage 3: runs of numeric bytes and the runs between them. */
static bool stage_falcon_digits(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    const uint8_t *s = ch->s;
    size_t i = start;
    while (i < end) {
        bool num = falcon_numeric_byte(s[i]);
        size_t j = i + 1;
        while (j < end && falcon_numeric_byte(s[j]) == num) j++;
        if (!pretok_next(ch, k, i, j)) return false;
        i = j;
    }
    return true;
}

/* Stage 4: [0-9][0-9][0-9], leftmost matches, over bytes. */
static bool stage_falcon_triples(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    const uint8_t *s = ch->s;
    size_t gap = start, i = start;
    while (i + 3 <= end) {
        if (s[i] >= '0' && s[i] <= '9' && s[i + 1] >= '0' && s[i + 1] <= '9' && s[i + 2] >= '0' &&
            s[i + 2] <= '9') {
            if (gap < i && !pretok_next(ch, k, gap, i)) return false;
            if (!pretok_next(ch, k, i, i + 3)) return false;
            i = gap = i + 3;
        } else {
            i++;
        }
    }
    return gap >= end || pretok_next(ch, k, gap, end);
}

static const pretok_stage_fn k_falcon[] = {stage_falcon_punct, stage_gpt2, stage_falcon_digits,
                                           stage_falcon_triples};

/* ---- BLOOM, Viking ------------------------------------------------------ */

/*
 * BLOOM, Poro, GPT-3 Finnish:
 *   Split(" ?[^(\s|[.,!?…。，、।۔،])]+", isolated)
 * The class (a nested class inside a negated one) excludes whitespace and
 * ( | ) . , ! ? … 。 ， 、 । ۔ ،. Everything it does not match — other
 * whitespace, those punctuation marks — is kept in pieces between matches.
 * Viking adds Digits(individual_digits=true) after it.
 */
static bool bloom_word_char(const uint8_t *s, size_t i, size_t end, size_t *len) {
    uint8_t c = s[i];
    if (c < 0x80) {
        *len = 1;
        return !(ucat_ascii[c] & UCAT_WHITESPACE) && c != '(' && c != ')' && c != '|' && c != '.' &&
               c != ',' && c != '!' && c != '?';
    }
    struct ucp u = utf8_decode(s + i, end - i);
    *len = u.len;
    if (u.cp & UCP_INVALID) return true;
    switch (u.cp) {
    case 0x2026: case 0x3002: case 0xFF0C: case 0x3001: case 0x0964: case 0x06D4: case 0x060C:
        return false;
    default:
        return !(ucat_slow(u.cp) & UCAT_WHITESPACE);
    }
}

static size_t match_bloom(const uint8_t *s, size_t i, size_t end) {
    size_t l, p = i;
    if (s[i] == ' ' && i + 1 < end && bloom_word_char(s, i + 1, end, &l)) p = i + 1;
    else if (!bloom_word_char(s, i, end, &l)) return i;
    p += l;
    while (p < end && bloom_word_char(s, p, end, &l)) p += l;
    return p;
}

static bool stage_bloom(const struct pretok_chain *ch, int k, size_t start, size_t end) {
    return pretok_isolated(ch, k, start, end, match_bloom);
}

static const pretok_stage_fn k_bloom[] = {stage_bloom};
static const pretok_stage_fn k_viking[] = {stage_bloom, pretok_stage_digits};

/* ---- dispatch ----------------------------------------------------------- */

static const struct pretok_chain_def k_chain_gpt2 = PRETOK_CHAIN(k_gpt2),
                                     k_chain_starcoder = PRETOK_CHAIN(k_starcoder),
                                     k_chain_falcon = PRETOK_CHAIN(k_falcon),
                                     k_chain_bloom = PRETOK_CHAIN(k_bloom),
                                     k_chain_viking = PRETOK_CHAIN(k_viking);

static const struct pretok_chain_def *const k_chains[PRETOK_COUNT] = {
    [PRETOK_GPT2] = &k_chain_gpt2,
    [PRETOK_STARCODER] = &k_chain_starcoder,
    [PRETOK_LLAMA3] = &pretok_chain_llama3,
    [PRETOK_QWEN2] = &pretok_chain_qwen2,
    [PRETOK_QWEN35] = &pretok_chain_qwen35,
    [PRETOK_GPT4O] = &pretok_chain_gpt4o,
    [PRETOK_TEKKEN] = &pretok_chain_tekken,
    [PRETOK_DEEPSEEK_LLM] = &pretok_chain_deepseek_llm,
    [PRETOK_DEEPSEEK_CODER] = &pretok_chain_deepseek_coder,
    [PRETOK_DEEPSEEK_V3] = &pretok_chain_deepseek_v3,
    [PRETOK_FALCON] = &k_chain_falcon,
    [PRETOK_BLOOM] = &k_chain_bloom,
    [PRETOK_VIKING] = &k_chain_viking,
};

bool pretok_split(enum pretok_kind kind, const uint8_t *s, size_t n, pretok_emit_fn emit,
                  void *ctx) {
    if (n == 0) return true;
    const struct pretok_chain_def *def =
        (unsigned)kind < PRETOK_COUNT && k_chains[kind] ? k_chains[kind] : &k_chain_gpt2;
    struct pretok_chain ch = {s, def->stage, def->n_stages, emit, ctx};
    return def->stage[0](&ch, 0, 0, n);
}
