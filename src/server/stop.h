/*
 * stop.h — stop strings over streamed text.
 *
 * Generated text grows a piece at a time. After each piece, stop_scan says
 * whether a stop string now occurs (the earliest match wins: the text is
 * cut where it starts) and, if not, how much of the text is safe to send:
 * everything but the longest tail that is the start of some stop string
 * (held back until the next piece shows whether the stop completes). Text
 * and stop strings are whole UTF-8 characters, so both cuts fall on
 * character boundaries.
 *
 * Only matches that end inside the new bytes are looked for; a scan costs
 * O(new bytes + longest stop) per stop string.
 */
#ifndef KVIK_SERVER_STOP_H
#define KVIK_SERVER_STOP_H

#include <stdbool.h>
#include <stddef.h>

struct stop_set {
    const char *const *s; /* [n] non-empty strings */
    const size_t *len;    /* [n] */
    int n;
};

struct stop_scan_result {
    bool matched;
    size_t cut;  /* matched: where the text ends now (the match's start) */
    size_t safe; /* not matched: bytes that can be sent (the rest is held) */
};

/* text[0..len) where text[0..old_len) had been scanned (and did not match). */
struct stop_scan_result stop_scan(const struct stop_set *set, const char *text, size_t len,
                                  size_t old_len);

#endif /* KVIK_SERVER_STOP_H */
