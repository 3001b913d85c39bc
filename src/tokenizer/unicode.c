/*
 * unicode.c — UTF-8 decoding/encoding and the category lookup over the
 * generated run tables (binary search over 2k runs: ~11 probes; the ASCII
 * fast path in unicode.h skips it for most text).
 */
#include "tokenizer/unicode.h"

uint8_t ucat_slow(uint32_t cp) {
    if (cp > 0x10FFFF) return UCAT_OTHER;
    /* last run whose start <= cp */
    uint32_t lo = 0, hi = ucd_n_runs; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ucd_run_start[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return ucd_run_flags[lo];
}

struct ucp utf8_decode(const uint8_t *s, size_t n) {
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
