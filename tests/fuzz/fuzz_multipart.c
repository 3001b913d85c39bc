/*
 * fuzz_multipart.c — libFuzzer target for the multipart/form-data reader
 * of POST /v1/files (src/server/multipart.c). The input's first line is
 * the Content-Type, the rest the body. Whatever the reader accepts must
 * hold: at most the parts given room for, each part's bytes inside the
 * body, its name non-empty and NUL-terminated within its buffer.
 *
 * Build and run: make fuzz && build/fuzz/fuzz_multipart tests/fuzz/seeds/fuzz_multipart
 * Seeds: tests/fuzz/seeds/fuzz_multipart/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *nl = memchr(data, '\n', size);
    size_t ctl = nl ? (size_t)(nl - (const char *)data) : size;
    char *ct = malloc(ctl + 1);
    if (!ct) return 0;
    memcpy(ct, data, ctl);
    ct[ctl] = 0;
    const char *body = nl ? nl + 1 : (const char *)data + size;
    size_t len = size - (size_t)(body - (const char *)data);
    char *copy = malloc(len ? len : 1); /* the body alone, so ASan sees reads past it */
    if (!copy) {
        free(ct);
        return 0;
    }
    memcpy(copy, body, len);
    struct mp_part parts[4];
    const char *why = NULL;
    int n = multipart_parse(ct, copy, len, parts, 4, &why);
    if (n < 0 && !why) __builtin_trap();
    if (n > 4) __builtin_trap();
    for (int i = 0; i < n; i++) {
        const struct mp_part *p = &parts[i];
        if (p->data < copy || p->data + p->len > copy + len) __builtin_trap();
        if (!p->name[0] || !memchr(p->name, 0, sizeof p->name) || !memchr(p->filename, 0, sizeof p->filename))
            __builtin_trap();
        volatile char sink = 0;
        for (size_t k = 0; k < p->len; k++) sink ^= p->data[k];
        (void)sink;
    }
    free(copy);
    free(ct);
    return 0;
}
