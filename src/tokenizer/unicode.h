/*
 * unicode.h — the little Unicode the tokenizer needs: UTF-8 decoding that
 * never fails (an invalid byte decodes as itself, flagged, so bad input
 * still tokenizes as bytes), UTF-8 encoding, and per-code-point category
 * flags from the generated tables (unicode_tables.c, built by
 * scripts/gen_unicode_tables.py from the Unicode Character Database 15.0).
 *
 * Internal to the tokenizer module.
 */
#ifndef KVIK_TOKENIZER_UNICODE_H
#define KVIK_TOKENIZER_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Category flags: exactly one of the first seven (the general category's
 * major class), UCAT_WHITESPACE for the White_Space property (= Oniguruma's
 * and PCRE's Unicode \s), for letters exactly one subcategory bit, and
 * UCAT_PUNCT_U8 for the punctuation of Unicode 8.0. */
enum {
    UCAT_LETTER = 1 << 0,     /* \p{L} */
    UCAT_NUMBER = 1 << 1,     /* \p{N} */
    UCAT_PUNCT = 1 << 2,      /* \p{P} */
    UCAT_SYMBOL = 1 << 3,     /* \p{S} */
    UCAT_MARK = 1 << 4,       /* \p{M} */
    UCAT_SEPARATOR = 1 << 5,  /* \p{Z} */
    UCAT_OTHER = 1 << 6,      /* \p{C}, unassigned included */
    UCAT_WHITESPACE = 1 << 7, /* \s (White_Space) */
    UCAT_LU = 1 << 8,         /* \p{Lu} uppercase letter */
    UCAT_LL = 1 << 9,         /* \p{Ll} lowercase letter */
    UCAT_LT = 1 << 10,        /* \p{Lt} titlecase letter */
    UCAT_LM = 1 << 11,        /* \p{Lm} modifier letter */
    UCAT_LO = 1 << 12,        /* \p{Lo} other letter */
    UCAT_PUNCT_U8 = 1 << 13,  /* \p{P} as of Unicode 8.0: what Hugging Face's
                                 Punctuation pre-tokenizer counts (its Rust
                                 crate unicode_categories has 8.0's tables) */
};

/* Generated tables (unicode_tables.c): the flags of cp are
 * ucd_combo[ucd_stage2[ucd_stage1[cp >> 7] * 128 + (cp & 127)]]. */
extern const char ucd_version[];
extern const uint16_t ucd_combo[];
extern const uint8_t ucd_stage1[0x110000 >> 7];
extern const uint8_t ucd_stage2[];

/* Flags of U+0000..U+007F (generated too), for the ASCII fast path. */
extern const uint16_t ucat_ascii[128];

/* All flags of code point cp (UCAT_OTHER for cp > U+10FFFF). */
static inline uint16_t ucat_slow(uint32_t cp) {
    if (cp > 0x10FFFF) return UCAT_OTHER;
    return ucd_combo[ucd_stage2[(size_t)ucd_stage1[cp >> 7] * 128 + (cp & 127)]];
}
static inline uint16_t ucat_full(uint32_t cp) { return cp < 128 ? ucat_ascii[cp] : ucat_slow(cp); }
/* The class flags only (major class and UCAT_WHITESPACE; no subcategory). */
static inline uint8_t ucat(uint32_t cp) { return (uint8_t)ucat_full(cp); }

/* A code point decoded from UTF-8. An invalid or truncated sequence
 * decodes one byte: cp = that byte | UCP_INVALID, len = 1. */
#define UCP_INVALID 0x80000000u
struct ucp {
    uint32_t cp;
    uint32_t len; /* bytes consumed, 1..4 */
};

/* Length a UTF-8 sequence starting with byte b announces (1..4), or 0 if b
 * cannot start one (a continuation byte, 0xC0, 0xC1, 0xF5..0xFF). */
static inline int utf8_seq_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b < 0xC2) return 0;
    if (b < 0xE0) return 2;
    if (b < 0xF0) return 3;
    if (b < 0xF5) return 4;
    return 0;
}

/* Decodes the code point at s[0..n) (n >= 1). Rejects overlong forms,
 * surrogates and values above U+10FFFF. */
static inline struct ucp utf8_decode(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    struct ucp bad = {b | UCP_INVALID, 1};
    int len = utf8_seq_len(b);
    if (len == 1) return (struct ucp){b, 1};
    if (len == 0 || (size_t)len > n) return bad;
    uint32_t cp = b & (0x7Fu >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return bad;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    /* overlong forms, surrogates, beyond U+10FFFF */
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return bad;
    return (struct ucp){cp, (uint32_t)len};
}

/* Flags of the character at s[0..n) (n >= 1) and its length in *len; an
 * invalid byte is a character of its own with flags UCAT_OTHER. */
uint16_t ucat_decode(const uint8_t *s, size_t n, size_t *len);

/* The same for the character at s[i] (i < n), ASCII without a call: what
 * the pre-tokenizers call once per character. */
__attribute__((always_inline)) static inline uint16_t ucat_at(const uint8_t *s, size_t n,
                                                             size_t i, size_t *len) {
    if (s[i] < 0x80) {
        *len = 1;
        return ucat_ascii[s[i]];
    }
    return ucat_decode(s + i, n - i, len);
}

/* utf8_encode (the inverse of utf8_decode) is in base/base.h. */

#endif /* KVIK_TOKENIZER_UNICODE_H */
