/*
 * test_unicode_nfc.c — NFC (src/tokenizer/unicode_nfc.c) against the
 * Unicode Character Database's own conformance file, NormalizationTest.txt
 * of the version the tables are generated from (15.0.0): for every line,
 * c2 == NFC(c1) == NFC(c2) == NFC(c3) and c4 == NFC(c4) == NFC(c5), and
 * every other code point is its own NFC (Part 1 lists the ones that are
 * not). The file is read from $KVIK_UCD, else /usr/share/unicode (Debian's
 * unicode-data ships it bzip2-compressed; bzcat unpacks it); without it
 * that test skips. Hand-written cases (composition, exclusions, Hangul,
 * reordering, blocking, bytes that are not UTF-8, long runs of marks) need
 * nothing.
 */
#include <stdlib.h>

#include "test.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_norm.h"

/* NFC of s[0..n) as a string (static buffer, NUL-terminated). */
static const char *nfc(const char *s, size_t n) {
    static char out[8192];
    struct unorm_nfc_buf b = {0};
    int64_t m = unorm_nfc((const uint8_t *)s, n, &b);
    if (m < 0 || (size_t)m >= sizeof out) {
        snprintf(out, sizeof out, "(error %lld)", (long long)m);
    } else {
        if (m) memcpy(out, b.out, (size_t)m);
        out[m] = 0;
    }
    unorm_nfc_buf_free(&b);
    return out;
}

#define NFC_IS(in, want) CHECK_STR(nfc(in, sizeof(in) - 1), want)

TEST(tokenizer_nfc_cases) {
    NFC_IS("", "");
    NFC_IS("plain ASCII text, 123!", "plain ASCII text, 123!");
    NFC_IS("e\xCC\x81", "\xC3\xA9");                  /* e + acute -> é */
    NFC_IS("caf\xC3\xA9", "caf\xC3\xA9");              /* already NFC */
    NFC_IS("\xE2\x84\xA6", "\xCE\xA9");                /* OHM SIGN -> GREEK OMEGA (singleton) */
    NFC_IS("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"); /* U+0958: excluded, stays apart */
    NFC_IS("\xE0\xA4\x95\xE0\xA4\xBC", "\xE0\xA4\x95\xE0\xA4\xBC");
    NFC_IS("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"); /* L V T -> 각 */
    NFC_IS("\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81");             /* LV + T */
    /* dot below (220) goes before acute (230); a + dot below composes, the acute stays */
    NFC_IS("a\xCC\x81\xCC\xA3", "\xE1\xBA\xA1\xCC\x81");
    NFC_IS("\xC3\xA1\xCC\xA3", "\xE1\xBA\xA1\xCC\x81"); /* the same from á */
    /* ê + dot below -> ệ (reordered through ê's decomposition) */
    NFC_IS("\xC3\xAA\xCC\xA3", "\xE1\xBB\x87");
    /* é takes no second acute */
    NFC_IS("e\xCC\x81\xCC\x81", "\xC3\xA9\xCC\x81");
    /* blocked: the acute (230) after an overline (230) does not reach the a */
    NFC_IS("a\xCC\x85\xCC\x81", "a\xCC\x85\xCC\x81");
    /* not blocked: after a grave below (220) it does */
    NFC_IS("a\xCC\x96\xCC\x81", "\xC3\xA1\xCC\x96");
    /* a mark with nothing before it, and after a space */
    NFC_IS("\xCC\x81x", "\xCC\x81x");
    NFC_IS(" \xCC\x81", " \xCC\x81");
    /* bytes that are not UTF-8 pass through and compose with nothing */
    NFC_IS("e\xFF\xCC\x81", "e\xFF\xCC\x81");
    NFC_IS("\xC3" "e\xCC\x81\x80", "\xC3\xC3\xA9\x80");
    NFC_IS("\xE0\xA4" "e\xCC\x81", "\xE0\xA4\xC3\xA9");
    /* the quick check: ASCII and precomposed text need no work */
    const char *ok = "The quick brown fox, caf\xC3\xA9, \xE4\xB8\xAD\xE6\x96\x87, \xEA\xB0\x81.";
    CHECK_EQ_INT(unorm_nfc_span((const uint8_t *)ok, strlen(ok)), strlen(ok));
    const char *bad = "abc e\xCC\x81";
    CHECK_EQ_INT(unorm_nfc_span((const uint8_t *)bad, strlen(bad)), 5);
    CHECK(!unorm_nfc_check('a') && !unorm_nfc_check(0xE9) && unorm_nfc_check(0x301));
    CHECK(unorm_nfc_check(0x2126) && unorm_nfc_check(0x1161) && !unorm_nfc_check(0xAC00));
    CHECK_EQ_INT(unorm_compose('e', 0x301), 0xE9);
    CHECK_EQ_INT(unorm_compose(0x915, 0x93C), 0); /* excluded */
    CHECK_EQ_INT(unorm_compose(0x1100, 0x1161), 0xAC00);
    CHECK_EQ_INT(unorm_compose(0xAC00, 0x11A8), 0xAC01);
    CHECK_EQ_INT(unorm_compose(0xAC01, 0x11A8), 0); /* LVT takes no T */
}

/* 'a' then 2000 marks alternating acute (230) and dot below (220): the
 * counting sort puts the 1000 dots first (stably), the first composes. */
TEST(tokenizer_nfc_long_mark_run) {
    enum { PAIRS = 1000 };
    size_t n = 1 + 4 * PAIRS;
    char *s = malloc(n);
    REQUIRE(s != NULL);
    s[0] = 'a';
    for (int i = 0; i < PAIRS; i++) memcpy(s + 1 + 4 * i, "\xCC\x81\xCC\xA3", 4);
    struct unorm_nfc_buf b = {0};
    int64_t m = unorm_nfc((const uint8_t *)s, n, &b);
    REQUIRE(m == (int64_t)(3 + 2 * (2 * PAIRS - 1)));
    CHECK(memcmp(b.out, "\xE1\xBA\xA1", 3) == 0); /* ạ */
    int wrong = 0;
    for (int i = 0; i < 2 * PAIRS - 1; i++)
        wrong += b.out[3 + 2 * i + 1] != (i < PAIRS - 1 ? 0xA3 : 0x81);
    CHECK_EQ_INT(wrong, 0);
    unorm_nfc_buf_free(&b);
    free(s);
}

/* ---- NormalizationTest.txt ---------------------------------------------------------- */

/* The file's lines, from $KVIK_UCD or /usr/share/unicode, plain or .bz2;
 * NULL if neither is there. */
static FILE *open_normalization_test(bool *piped) {
    const char *dir = getenv("KVIK_UCD");
    if (!dir || !*dir) dir = "/usr/share/unicode";
    char path[4096], cmd[4200];
    snprintf(path, sizeof path, "%s/NormalizationTest.txt", dir);
    *piped = false;
    FILE *f = fopen(path, "r");
    if (f) return f;
    snprintf(path, sizeof path, "%s/NormalizationTest.txt.bz2", dir);
    if (!(f = fopen(path, "rb"))) return NULL;
    fclose(f);
    if (strchr(path, '\'')) return NULL;
    snprintf(cmd, sizeof cmd, "bzcat '%s'", path);
    *piped = true;
    return popen(cmd, "r");
}

/* Parses one column ("0044 0307") into UTF-8 at out; its length, or -1. */
static int parse_column(const char *s, const char *end, char *out, size_t cap) {
    size_t o = 0;
    while (s < end) {
        char *e;
        unsigned long cp = strtoul(s, &e, 16);
        if (e == s) break;
        if (cp > 0x10FFFF || o + 4 > cap) return -1;
        o += (size_t)utf8_encode((uint32_t)cp, (uint8_t *)out + o);
        s = e;
        while (s < end && *s == ' ') s++;
    }
    return (int)o;
}

static bool nfc_equals(struct unorm_nfc_buf *b, const char *in, int n_in, const char *want, int n_want) {
    int64_t m = unorm_nfc((const uint8_t *)in, (size_t)n_in, b);
    return m == n_want && (m == 0 || memcmp(b->out, want, (size_t)m) == 0);
}

TEST(tokenizer_nfc_normalization_test) {
    bool piped;
    FILE *f = open_normalization_test(&piped);
    if (!f) {
        test_skip("NormalizationTest.txt not found ($KVIK_UCD, /usr/share/unicode: Debian unicode-data)");
        return;
    }
    static uint8_t listed[0x110000 / 8]; /* Part 1's code points */
    memset(listed, 0, sizeof listed);
    struct unorm_nfc_buf b = {0};
    char line[1024], col[5][256];
    int len[5], part = -1;
    long lines = 0, bad = 0, shown = 0, quick_wrong = 0;
    bool version_ok = false;
    while (fgets(line, sizeof line, f)) {
        if (lines == 0 && strncmp(line, "# NormalizationTest-", 20) == 0) {
            char want[64];
            snprintf(want, sizeof want, "# NormalizationTest-%s.txt", unorm_ucd_version);
            version_ok = strncmp(line, want, strlen(want)) == 0;
        }
        if (line[0] == '@') {
            part = atoi(line + 5);
            continue;
        }
        if (line[0] == '#' || line[0] == '\n') continue;
        const char *p = line;
        bool ok = true;
        for (int c = 0; c < 5 && ok; c++) {
            const char *semi = strchr(p, ';');
            if (!semi) ok = false;
            else len[c] = parse_column(p, semi, col[c], sizeof col[c]);
            ok = ok && len[c] >= 0;
            if (ok) p = semi + 1;
        }
        if (!ok) {
            test_fail(__FILE__, __LINE__, "NormalizationTest.txt: cannot read \"%s\"", line);
            break;
        }
        lines++;
        if (part == 1) {
            uint32_t cp = (uint32_t)strtoul(line, NULL, 16);
            listed[cp >> 3] |= (uint8_t)(1u << (cp & 7));
        }
        bool good = nfc_equals(&b, col[0], len[0], col[1], len[1]) &&
                    nfc_equals(&b, col[1], len[1], col[1], len[1]) &&
                    nfc_equals(&b, col[2], len[2], col[1], len[1]) &&
                    nfc_equals(&b, col[3], len[3], col[3], len[3]) &&
                    nfc_equals(&b, col[4], len[4], col[3], len[3]);
        /* the quick check never calls a string NFC that is not */
        for (int c = 0; c < 5; c++) {
            bool is_nfc = (c == 1 || c == 3) || (len[c] == len[c < 3 ? 1 : 3] &&
                                                 memcmp(col[c], col[c < 3 ? 1 : 3], (size_t)len[c]) == 0);
            if (unorm_nfc_span((const uint8_t *)col[c], (size_t)len[c]) == (size_t)len[c] && !is_nfc)
                quick_wrong++;
        }
        if (!good) {
            bad++;
            if (shown++ < 5) printf("    NFC wrong on line: %s", line);
        }
    }
    if (piped) pclose(f);
    else fclose(f);
    if (piped && lines == 0 && !version_ok) { /* bzcat missing or failed */
        unorm_nfc_buf_free(&b);
        test_skip("NormalizationTest.txt.bz2 could not be unpacked (bzcat)");
        return;
    }
    /* Part 2: every code point not in Part 1 is its own NFC */
    long self_bad = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || (listed[cp >> 3] >> (cp & 7) & 1)) continue;
        char u[4];
        int n = utf8_encode(cp, (uint8_t *)u);
        if (!nfc_equals(&b, u, n, u, n)) {
            if (self_bad++ < 5) printf("    U+%04X is not its own NFC\n", cp);
        }
    }
    unorm_nfc_buf_free(&b);
    printf("    NormalizationTest.txt (%s): %ld lines, %ld wrong; other code points wrong: %ld\n",
           unorm_ucd_version, lines, bad, self_bad);
    CHECK_MSG(version_ok, "NormalizationTest.txt is not version %s", unorm_ucd_version);
    CHECK(lines > 18000);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(quick_wrong, 0);
    CHECK_EQ_INT(self_bad, 0);
}
