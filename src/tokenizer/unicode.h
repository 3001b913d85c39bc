/*
 * unicode.h — the little Unicode the tokenizer needs: UTF-8 decoding that
 * never fails (an invalid byte decodes as itself, flagged, so bad input
 * still tokenizes as bytes), UTF-8 encoding, and per-code-point category
 * flags from the generated tables (unicode_tables.c, built by
 * scripts/gen_unicode_tables.py from the Unicode Character Database).
 *
 * Internal to the tokenizer module.
 */
#ifndef KVIK_TOKENIZER_UNICODE_H
#define KVIK_TOKENIZER_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Category flags: exactly one of the first seven (the general category's
 * major class), plus UCAT_WHITESPACE for the White_Space property. */
enum {
    UCAT_LETTER = 1 << 0,     /* \p{L} */
    UCAT_NUMBER = 1 << 1,     /* \p{N} */
    UCAT_PUNCT = 1 << 2,      /* \p{P} */
    UCAT_SYMBOL = 1 << 3,     /* \p{S} */
    UCAT_MARK = 1 << 4,       /* \p{M} */
    UCAT_SEPARATOR = 1 << 5,  /* \p{Z} */
    UCAT_OTHER = 1 << 6,      /* \p{C}, unassigned included */
    UCAT_WHITESPACE = 1 << 7, /* \s (White_Space) */
};

/* Generated tables (unicode_tables.c). */
extern const char ucd_version[];
extern const uint32_t ucd_n_runs;
extern const uint32_t ucd_run_start[];
extern const uint8_t ucd_run_flags[];

/* Flags of U+0000..U+007F (generated too), for the ASCII fast path. */
extern const uint8_t ucat_ascii[128];

/* Category flags of code point cp (UCAT_OTHER for cp > U+10FFFF). */
uint8_t ucat_slow(uint32_t cp);
static inline uint8_t ucat(uint32_t cp) { return cp < 128 ? ucat_ascii[cp] : ucat_slow(cp); }

/* A code point decoded from UTF-8. An invalid or truncated sequence
 * decodes one byte: cp = that byte | UCP_INVALID, len = 1. */
#define UCP_INVALID 0x80000000u
struct ucp {
    uint32_t cp;
    uint32_t len; /* bytes consumed, 1..4 */
};

/* Decodes the code point at s[0..n) (n >= 1). Rejects overlong forms,
 * surrogates and values above U+10FFFF. */
struct ucp utf8_decode(const uint8_t *s, size_t n);

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

/* Writes cp (<= U+10FFFF) as UTF-8 into out[4]; returns the byte count. */
int utf8_encode(uint32_t cp, uint8_t *out);

#endif /* KVIK_TOKENIZER_UNICODE_H */
