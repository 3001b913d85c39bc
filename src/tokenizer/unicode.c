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

int utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
