/*
 * unicode.c — UTF-8 encoding, and the decoder joined to the category
 * lookup for the pre-tokenizers' non-ASCII characters (decoding and the
 * lookup itself, three table loads and no search, are inline in unicode.h).
 */
#include "tokenizer/unicode.h"

uint16_t ucat_decode(const uint8_t *s, size_t n, size_t *len) {
    struct ucp u = utf8_decode(s, n);
    *len = u.len;
    return (u.cp & UCP_INVALID) ? (uint16_t)UCAT_OTHER : ucat_slow(u.cp);
}

