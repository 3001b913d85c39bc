/*
 * stop.c — stop-string matching with hold-back (see stop.h).
 */
#include <string.h>

#include "server/stop.h"

struct stop_scan_result stop_scan(const struct stop_set *set, const char *text, size_t len,
                                  size_t old_len) {
    struct stop_scan_result r = {.matched = false, .cut = len, .safe = len};
    if (old_len > len) old_len = len;
    /* earliest full match that ends after old_len */
    for (int k = 0; k < set->n; k++) {
        size_t sl = set->len[k];
        if (sl == 0 || sl > len) continue;
        size_t from = old_len >= sl ? old_len - sl + 1 : 0;
        for (size_t i = from; i + sl <= len && i < r.cut; i++) {
            if (text[i] == set->s[k][0] && memcmp(text + i, set->s[k], sl) == 0) {
                r.matched = true;
                r.cut = i;
                break;
            }
        }
    }
    if (r.matched) {
        r.safe = r.cut;
        return r;
    }
    /* longest tail of the text that is a proper prefix of some stop string */
    size_t hold = 0;
    for (int k = 0; k < set->n; k++) {
        size_t sl = set->len[k];
        if (sl == 0) continue;
        size_t max = sl - 1 < len ? sl - 1 : len;
        for (size_t t = max; t > hold; t--) {
            if (memcmp(text + len - t, set->s[k], t) == 0) {
                hold = t;
                break;
            }
        }
    }
    r.safe = len - hold;
    return r;
}
