/*
 * unicode_nfc.c — Unicode Normalization Form C (UAX #15) over UTF-8 text,
 * for the byte-level BPE vocabularies whose tokenizer.json normalizes with
 * NFC before pre-tokenizing (tokenizer.c names them).
 *
 * Most text is already NFC, so the work is a scan: a character outside the
 * quick-check set (combining class 0 and NFC_QC Yes; every code point below
 * U+0300, so all ASCII, is outside) neither changes nor interacts with the
 * characters before it. Only a stretch around characters in the set is
 * normalized: from the last character outside the set before them (a
 * starter that may compose with what follows) up to the next character
 * outside the set after them. Such a stretch is
 *   1. fully decomposed (canonical decompositions, Hangul arithmetically),
 *   2. put in canonical order (each run of non-starters stably sorted by
 *      combining class),
 *   3. recomposed: each character that is not blocked from the last
 *      starter (nothing between them, or everything between has a lower,
 *      nonzero class) and forms a primary composite with it replaces it.
 * Bytes that are not UTF-8 end a stretch and pass through unchanged, like
 * a starter that composes with nothing (the tokenizer reads each as a
 * character of its own).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_norm.h"

/* Whether the character at s[0..n) (s[0] >= 0x80; length *len) is in the
 * quick-check set. *len is 1 exactly when s[0] is not UTF-8. */
__attribute__((always_inline)) static inline bool in_set(const uint8_t *s, size_t n, size_t *len) {
    uint8_t b = s[0];
    if (b < 0xCC) { /* below U+0300, or not a lead byte */
        int l = utf8_seq_len(b);
        *len = l == 2 && n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 1;
        return false;
    }
    /* two bytes, U+0300..U+07FF */
    if (b < 0xE0) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) {
            *len = 1;
            return false;
        }
        uint32_t cp = (uint32_t)(b & 0x1F) << 6 | (s[1] & 0x3Fu);
        *len = 2;
        return (unorm_nfc_rows[unorm_nfc_block[cp >> 8]][(cp & 0xFF) >> 3] >> (cp & 7)) & 1;
    }
    /* three bytes from U+1000 up, no surrogates (most scripts, CJK, Hangul):
     * no overlong form or surrogate is possible, so no full decode */
    if (b >= 0xE1 && b != 0xED && b <= 0xEF && n >= 3 && (s[1] & 0xC0) == 0x80 &&
        (s[2] & 0xC0) == 0x80) {
        uint32_t cp = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3Fu);
        *len = 3;
        return (unorm_nfc_rows[unorm_nfc_block[cp >> 8]][(cp & 0xFF) >> 3] >> (cp & 7)) & 1;
    }
    struct ucp u = utf8_decode(s, n);
    *len = u.len;
    return !(u.cp & UCP_INVALID) && unorm_nfc_check(u.cp);
}

size_t unorm_nfc_span(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            /* ASCII: then eight bytes at a time while they are ASCII too */
            i++;
            for (;;) {
                uint64_t v;
                if (i + 8 > n) break;
                memcpy(&v, s + i, 8);
                if (v & 0x8080808080808080ull) break;
                i += 8;
            }
            continue;
        }
        size_t len;
        if (in_set(s + i, n - i, &len)) return i;
        i += len;
    }
    return n;
}

void unorm_nfc_buf_free(struct unorm_nfc_buf *b) {
    free(b->out);
    free(b->cp);
    *b = (struct unorm_nfc_buf){0};
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) {
        if (c > SIZE_MAX / 4 / elem) return false;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* Stable sort of v[0..n) by combining class: insertion sort for short
 * runs, counting sort through tmp[n] for long ones (a long run of marks
 * stays linear). */
static void sort_by_ccc(uint32_t *v, size_t n, uint32_t *tmp) {
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
        return;
    }
    size_t at[257] = {0};
    for (size_t i = 0; i < n; i++) at[unorm_ccc(v[i]) + 1]++;
    for (int k = 1; k <= 256; k++) at[k] += at[k - 1];
    for (size_t i = 0; i < n; i++) tmp[at[unorm_ccc(v[i])]++] = v[i];
    memcpy(v, tmp, n * sizeof *v);
}

/* Normalizes the valid UTF-8 stretch s[0..n) and appends it to b->out at
 * *o. b->cp holds the code points (at most UNORM_MAX_DECOMP per byte, and
 * as many again for the sort). */
static bool normalize_stretch(const uint8_t *s, size_t n, struct unorm_nfc_buf *b, size_t *o) {
    size_t room = n * UNORM_MAX_DECOMP;
    if (!grow((void **)&b->cp, &b->cp_cap, 2 * room, sizeof *b->cp)) return false;
    uint32_t *v = b->cp, *tmp = b->cp + room;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        struct ucp u = utf8_decode(s + i, n - i);
        i += u.len;
        m += (size_t)unorm_decompose(u.cp, v + m);
    }
    for (size_t i = 0; i < m;) {
        if (unorm_ccc(v[i]) == 0) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < m && unorm_ccc(v[j]) != 0) j++;
        if (j - i > 1) sort_by_ccc(v + i, j - i, tmp);
        i = j;
    }
    size_t w = 0, starter = SIZE_MAX;
    uint8_t last = 0; /* class of the last character kept after the starter */
    for (size_t r = 0; r < m; r++) {
        uint32_t c = v[r];
        uint8_t k = unorm_ccc(c);
        if (starter != SIZE_MAX && (w == starter + 1 || (last != 0 && last < k))) {
            uint32_t comp = unorm_compose(v[starter], c);
            if (comp) {
                v[starter] = comp;
                continue;
            }
        }
        if (k == 0) starter = w;
        v[w++] = c;
        last = k;
    }
    if (!grow((void **)&b->out, &b->out_cap, *o + 4 * w, 1)) return false;
    for (size_t i = 0; i < w; i++) *o += (size_t)utf8_encode(v[i], b->out + *o);
    return true;
}

static bool append(struct unorm_nfc_buf *b, size_t *o, const uint8_t *s, size_t n) {
    if (!grow((void **)&b->out, &b->out_cap, *o + n, 1)) return false;
    if (n) memcpy(b->out + *o, s, n);
    *o += n;
    return true;
}

int64_t unorm_nfc(const uint8_t *s, size_t n, struct unorm_nfc_buf *b) {
    size_t o = 0, done = 0; /* s[0..done) is in b->out[0..o) */
    size_t start = 0;       /* where a stretch would start: the last character
                               outside the set, or just past a bad byte */
    for (size_t i = 0; i < n;) {
        size_t len;
        if (s[i] < 0x80) {
            start = i++;
            continue;
        }
        if (!in_set(s + i, n - i, &len)) {
            start = len == 1 ? i + 1 : i; /* one byte from 0x80 up: not UTF-8 */
            i += len;
            continue;
        }
        /* the stretch runs to the next character outside the set */
        size_t end = i + len;
        while (end < n && in_set(s + end, n - end, &len)) end += len;
        if (start < done) start = done;
        if (!append(b, &o, s + done, start - done) || !normalize_stretch(s + start, end - start, b, &o))
            return -1;
        done = start = i = end;
    }
    if (!append(b, &o, s + done, n - done)) return -1;
    return (int64_t)o;
}
