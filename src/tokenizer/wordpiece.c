/*
 * wordpiece.c — encoding with a WordPiece vocabulary
 * (tokenizer.ggml.model "bert": BERT and the embedding models built on it,
 * BGE, MiniLM, ...), as Hugging Face's BertNormalizer(lowercase) +
 * BertPreTokenizer + WordPiece do it.
 *
 * The vocabulary is stored the way llama.cpp's converter writes it: a
 * word-initial piece with a leading "▁" (U+2581: "▁hello" for "hello"), a
 * continuation piece without its "##" ("llo" for "##llo"), and bracketed
 * tokens ("[CLS]", "[unused0]") as they are.
 *
 * A stretch of text between special tokens goes through:
 *  1. Normalization, character by character:
 *     a. NUL, U+FFFD and the characters of category Cc, Cf or Co are
 *        dropped, except \t \n \r; White_Space characters become ' '.
 *     b. CJK ideographs get a space on either side (the ranges of
 *        is_cjk below, Hugging Face's, U+2B920 start included).
 *     c. NFD: full canonical decomposition, then the canonical reordering
 *        of combining marks.
 *     d. Nonspacing marks (Mn) are dropped: accents go ("é" -> "e").
 *     e. Lowercasing, full mapping.
 *     Bytes that are not valid UTF-8 read as U+FFFD, so (a) drops them.
 *     Unicode data is UCD 15.0 (unicode_norm.h, unicode.h); Hugging Face's
 *     tables are older for categories and NFD and newer for case, so the
 *     two differ on characters assigned after Unicode 8.0 and a handful
 *     whose category changed since (U+1734, U+1885, U+1886, U+A9BD,
 *     U+111C9, U+166D).
 *  2. Words: the text splits at whitespace, and every punctuation
 *     character (\p{P}, or ASCII punctuation, which includes $+<=>^`|~) is
 *     a word of its own.
 *  3. Each word: one with more than WPM_MAX_WORD_CHARS characters is the
 *     unknown token. Otherwise the longest prefix that is a word-initial
 *     piece, then repeatedly the longest continuation piece; if some
 *     position has none, the whole word is the unknown token. (A
 *     continuation never starts with "▁": in this vocabulary form such a
 *     text is a word-initial piece.) Without an unknown token such words
 *     are dropped.
 *
 * Steps 1 and 2 run over chunks of about CHUNK bytes cut at an ASCII space,
 * tab or newline: that character is a word boundary and a starter, so the
 * cut changes nothing, and memory stays small for long texts (a text with
 * no such character is one chunk).
 */
#include <stdlib.h>

#include "tokenizer/tokenizer_int.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_norm.h"

#define WPM_MAX_WORD_CHARS 100 /* Hugging Face's max_input_chars_per_word */
#define CHUNK 65536

/* A growable array of code points. */
struct cpbuf {
    uint32_t *v;
    size_t n, cap;
};

static bool cp_reserve(struct cpbuf *b, size_t extra) {
    if (b->n + extra <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) {
        if (cap > SIZE_MAX / 2 / sizeof *b->v) return false;
        cap *= 2;
    }
    uint32_t *v = realloc(b->v, cap * sizeof *v);
    if (!v) return false;
    b->v = v;
    b->cap = cap;
    return true;
}

/* Hugging Face's is_chinese_char. */
static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool wpm_is_punct(uint32_t cp) {
    if (cp < 128) return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
                         (cp >= 123 && cp <= 126);
    return (ucat(cp) & UCAT_PUNCT) != 0;
}

/* Stable sort of v[0..n) by combining class (n >= 2): insertion sort for
 * short runs, counting sort (tmp: n entries) for long ones, so a long run
 * of marks costs linear time. */
static bool sort_by_ccc(uint32_t *v, size_t n, struct cpbuf *tmp) {
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t c = v[i];
            uint8_t k = unorm_ccc(c);
            size_t j = i;
            while (j > 0 && unorm_ccc(v[j - 1]) > k) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = c;
        }
        return true;
    }
    tmp->n = 0;
    if (!cp_reserve(tmp, n)) return false;
    size_t at[257] = {0};
    for (size_t i = 0; i < n; i++) at[unorm_ccc(v[i]) + 1]++;
    for (int k = 1; k <= 256; k++) at[k] += at[k - 1];
    for (size_t i = 0; i < n; i++) tmp->v[at[unorm_ccc(v[i])]++] = v[i];
    memcpy(v, tmp->v, n * sizeof *v);
    return true;
}

/* Normalization (steps 1a-1e) of s[0..n), appended to out. */
static bool normalize(const uint8_t *s, size_t n, struct cpbuf *out, struct cpbuf *tmp) {
    size_t base = out->n;
    for (size_t i = 0; i < n;) {
        struct ucp u = utf8_decode(s + i, n - i);
        i += u.len;
        uint32_t c = u.cp;
        if ((c & UCP_INVALID) || c == 0 || c == 0xFFFD) continue;
        if (c != '\t' && c != '\n' && c != '\r' && unorm_is_control(c)) continue;
        if (!cp_reserve(out, UNORM_MAX_DECOMP + 2)) return false;
        if (ucat(c) & UCAT_WHITESPACE) {
            out->v[out->n++] = ' ';
            continue;
        }
        bool cjk = is_cjk(c);
        if (cjk) out->v[out->n++] = ' ';
        uint32_t d[UNORM_MAX_DECOMP];
        int nd = unorm_decompose(c, d);
        for (int k = 0; k < nd; k++)
            if (!unorm_is_mn(d[k])) out->v[out->n++] = d[k];
        if (cjk) out->v[out->n++] = ' ';
    }
    /* Canonical reordering of what is left: dropping marks first and sorting
     * after gives the same order as sorting first (the sort is stable). */
    uint32_t *v = out->v + base;
    size_t m = out->n - base;
    for (size_t i = 0; i < m;) {
        if (unorm_ccc(v[i]) == 0) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < m && unorm_ccc(v[j]) != 0) j++;
        if (j - i > 1 && !sort_by_ccc(v + i, j - i, tmp)) return false;
        i = j;
    }
    /* lowercase, in place while every mapping is one code point (all but
     * U+0130's, which NFD has already taken apart) */
    for (size_t i = 0; i < m; i++) {
        uint32_t lo[UNORM_MAX_LOWER];
        int nl = unorm_lower(v[i], lo);
        if (nl == 1) {
            v[i] = lo[0];
            continue;
        }
        if (!cp_reserve(out, (size_t)nl - 1)) return false;
        v = out->v + base;
        memmove(v + i + nl, v + i + 1, (m - i - 1) * sizeof *v);
        for (int k = 0; k < nl; k++) v[i + (size_t)k] = lo[k];
        out->n += (size_t)nl - 1;
        m += (size_t)nl - 1;
        i += (size_t)nl - 1;
    }
    return true;
}

int64_t wpm_normalize(const uint8_t *s, size_t n, char *out, size_t cap) {
    struct cpbuf b = {0}, tmp = {0};
    bool ok = normalize(s, n, &b, &tmp);
    size_t o = 0;
    for (size_t i = 0; ok && i < b.n; i++) {
        uint8_t u[4];
        int k = utf8_encode(b.v[i], u);
        for (int j = 0; j < k; j++, o++)
            if (o < cap) out[o] = (char)u[j];
    }
    free(b.v);
    free(tmp.v);
    return ok ? (int64_t)o : KVIK_ERR_NOMEM;
}

/* Step 3 for the word w[0..n) (n >= 1 code points). */
static void encode_word(const struct tokenizer *tok, const uint32_t *w, size_t n, int32_t *out,
                        int64_t max, int64_t *count) {
    if (n > WPM_MAX_WORD_CHARS) {
        if (tok->unk >= 0) tok_put(out, max, count, tok->unk);
        return;
    }
    /* "▁" + the word's UTF-8; off[k]: where character k starts */
    uint8_t text[3 + 4 * WPM_MAX_WORD_CHARS];
    size_t off[WPM_MAX_WORD_CHARS + 1];
    memcpy(text, "\xE2\x96\x81", 3);
    size_t len = 3;
    for (size_t k = 0; k < n; k++) {
        off[k] = len;
        len += (size_t)utf8_encode(w[k], text + len);
    }
    off[n] = len;

    int32_t ids[WPM_MAX_WORD_CHARS];
    size_t n_ids = 0;
    for (size_t k = 0; k < n;) {
        size_t from = k == 0 ? 0 : off[k]; /* the first piece takes the "▁" */
        int32_t id = -1;
        size_t end = n;
        while (end > k && off[end] - from > tok->max_text) end--;
        for (; end > k; end--) {
            if (k > 0 && w[k] == 0x2581) break; /* would be a word-initial piece */
            id = tokenizer_find(tok, (const char *)text + from, off[end] - from);
            if (id >= 0) break;
        }
        if (id < 0) {
            if (tok->unk >= 0) tok_put(out, max, count, tok->unk);
            return;
        }
        ids[n_ids++] = id;
        k = end;
    }
    for (size_t i = 0; i < n_ids; i++) tok_put(out, max, count, ids[i]);
}

/* Steps 2 and 3 over normalized code points v[0..m). */
static void encode_words(const struct tokenizer *tok, const uint32_t *v, size_t m, int32_t *out,
                         int64_t max, int64_t *count) {
    size_t start = 0;
    for (size_t i = 0; i <= m; i++) {
        bool space = i < m && (ucat(v[i]) & UCAT_WHITESPACE);
        bool punct = i < m && !space && wpm_is_punct(v[i]);
        if (i < m && !space && !punct) continue;
        if (i > start) encode_word(tok, v + start, i - start, out, max, count);
        if (punct) encode_word(tok, v + i, 1, out, max, count);
        start = i + 1;
    }
}

bool wpm_encode(const struct tokenizer *tok, const uint8_t *s, size_t n, int32_t *out,
                int64_t max, int64_t *count) {
    struct cpbuf b = {0}, tmp = {0};
    bool ok = true;
    for (size_t at = 0; at < n && ok;) {
        size_t end = at + CHUNK < n ? at + CHUNK : n;
        while (end < n && s[end] != ' ' && s[end] != '\t' && s[end] != '\n' && s[end] != '\r') end++;
        b.n = 0;
        ok = normalize(s + at, end - at, &b, &tmp);
        if (ok) encode_words(tok, b.v, b.n, out, max, count);
        at = end;
    }
    free(b.v);
    free(tmp.v);
    return ok;
}
