/*
 * qmatch.c — the content-word comparison of qmatch.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "retrieval/qmatch.h"

enum { MAX_WORDS = 256, MAX_WORD = 48 };

static const char *const STOP[] = {
    "a", "an", "the", "i", "me", "my", "mine", "we", "us", "our", "ours", "you", "your", "yours", "he", "him",
    "his", "she", "her", "it", "its", "they", "them", "their", "theirs", "is", "are", "was", "were", "be", "been",
    "being", "am", "do", "does", "did", "of", "in", "on", "at", "about", "as", "by", "please", "kindly", "just",
    "can", "could", "would", "will", "tell", "give", "show", "explain", "describe", "that", "this", "there",
    "here", "so", "really", "actually",
};
static const char *const NUMBER_WORDS[] = {
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
};
static const char *const NEGATIONS[] = {"not", "no", "never", "none", "nothing", "nobody", "nowhere", "neither",
                                        "nor", "cannot", "without"};

struct words {
    char w[MAX_WORDS][MAX_WORD];
    int n;
    bool overflow;
};

static bool in_list(const char *w, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(w, list[i])) return true;
    return false;
}

static bool is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static void add(struct words *ws, const char *w, size_t n) {
    if (ws->n == MAX_WORDS || n >= MAX_WORD) {
        ws->overflow = true;
        return;
    }
    char buf[MAX_WORD];
    memcpy(buf, w, n);
    buf[n] = 0;
    for (size_t i = 0; i < sizeof NUMBER_WORDS / sizeof *NUMBER_WORDS; i++)
        if (!strcmp(buf, NUMBER_WORDS[i])) {
            n = (size_t)snprintf(buf, sizeof buf, "%zu", i);
            break;
        }
    if (in_list(buf, STOP, sizeof STOP / sizeof *STOP)) return;
    memcpy(ws->w[ws->n++], buf, n + 1);
}

/* The content words of t[0..len). */
static void split(const char *t, size_t len, struct words *ws) {
    ws->n = 0;
    ws->overflow = false;
    /* lowercase, with ’ (E2 80 99) read as ' */
    char *s = malloc(len + 1);
    if (!s) {
        ws->overflow = true;
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == 0xE2 && i + 2 < len && (unsigned char)t[i + 1] == 0x80 && (unsigned char)t[i + 2] == 0x99) {
            s[m++] = '\'';
            i += 2;
            continue;
        }
        s[m++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    s[m] = 0;
    for (size_t i = 0; i < m && !ws->overflow;) {
        unsigned char c = (unsigned char)s[i];
        if (is_digit(c)) {
            char num[MAX_WORD];
            size_t k = 0;
            while (i < m && (is_digit((unsigned char)s[i]) ||
                             ((s[i] == '.' || s[i] == ',') && i + 1 < m && is_digit((unsigned char)s[i + 1])))) {
                if (s[i] != ',' && k + 1 < sizeof num) num[k++] = s[i];
                i++;
            }
            add(ws, num, k);
        } else if (is_letter(c)) {
            size_t j = i;
            while (j < m && is_letter((unsigned char)s[j])) j++;
            size_t n = j - i;
            bool nt = n > 1 && s[j - 1] == 'n' && j + 1 < m && s[j] == '\'' && s[j + 1] == 't' &&
                      (j + 2 >= m || !is_letter((unsigned char)s[j + 2]));
            if (nt) { /* "don't": "do" and "not" */
                add(ws, s + i, n - 1);
                add(ws, "not", 3);
                i = j + 2;
                continue;
            }
            add(ws, s + i, n);
            i = j;
            if (i < m && s[i] == '\'') { /* 's 're 've 'll 'd 'm */
                size_t e = i + 1;
                while (e < m && is_letter((unsigned char)s[e])) e++;
                size_t sl = e - i - 1;
                const char *suf = s + i + 1;
                if ((sl == 1 && (*suf == 's' || *suf == 'd' || *suf == 'm')) ||
                    (sl == 2 && (!memcmp(suf, "re", 2) || !memcmp(suf, "ve", 2) || !memcmp(suf, "ll", 2))))
                    i = e;
            }
        } else {
            if (c == '$' || c == '%' || c == '+' || c == '#') add(ws, s + i, 1);
            else if ((c == 0xE2 && i + 2 < m && (unsigned char)s[i + 1] == 0x82 && (unsigned char)s[i + 2] == 0xAC) ||
                     (c == 0xC2 && i + 1 < m && (unsigned char)s[i + 1] == 0xA3)) {
                size_t n = c == 0xE2 ? 3 : 2; /* € and £ */
                add(ws, s + i, n);
                i += n;
                continue;
            }
            i++;
        }
    }
    free(s);
}

/* Optimal string alignment distance, at most 2 (anything more is 2). */
static int osa(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > m + 1 || m > n + 1) return 2;
    int d[MAX_WORD + 1][MAX_WORD + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int v = d[i - 1][j] + 1, w = d[i][j - 1] + 1, x = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int best = v < w ? v : w;
            if (x < best) best = x;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] > 2 ? 2 : d[n][m];
}

static bool plural_of(const char *a, const char *b) { /* b is a + "s" or a + "es" */
    size_t n = strlen(a), m = strlen(b);
    return (m == n + 1 && !strncmp(a, b, n) && b[n] == 's') ||
           (m == n + 2 && !strncmp(a, b, n) && b[n] == 'e' && b[n + 1] == 's');
}

static bool same_word(const char *x, const char *y) {
    if (!strcmp(x, y)) return true;
    size_t nn = sizeof NEGATIONS / sizeof *NEGATIONS;
    if (is_digit((unsigned char)x[0]) || is_digit((unsigned char)y[0]) || in_list(x, NEGATIONS, nn) ||
        in_list(y, NEGATIONS, nn))
        return false;
    if (plural_of(x, y) || plural_of(y, x)) return true;
    return strlen(x) >= 5 && strlen(y) >= 5 && x[0] == y[0] && osa(x, y) <= 1;
}

bool qmatch_same(const char *a, size_t alen, const char *b, size_t blen) {
    struct words *wa = malloc(sizeof *wa), *wb = malloc(sizeof *wb);
    bool same = false;
    if (wa && wb) {
        split(a, alen, wa);
        split(b, blen, wb);
        same = !wa->overflow && !wb->overflow && wa->n == wb->n;
        for (int i = 0; same && i < wa->n; i++) same = same_word(wa->w[i], wb->w[i]);
    }
    free(wa);
    free(wb);
    return same;
}
