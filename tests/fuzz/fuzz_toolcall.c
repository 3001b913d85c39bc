/*
 * fuzz_toolcall.c — libFuzzer target for reading tool calls from a reply
 * (src/server/toolcall.c). The first byte picks the style, the rest is the
 * reply. Whatever happens must hold: the count is within [0, max] (or -1),
 * every call has a non-empty name and arguments that are a JSON object's
 * text, and the text before the calls lies inside the reply; read as a
 * bare call, a call names the one declared function.
 *
 * Build and run: make fuzz && build/fuzz/fuzz_toolcall tests/fuzz/seeds/fuzz_toolcall
 * Seeds: tests/fuzz/seeds/fuzz_toolcall/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    enum toolcall_style st = (enum toolcall_style)(data[0] % 3);
    size_t len = size - 1;
    char *reply = malloc(len ? len : 1); /* alone, so ASan sees reads past it */
    if (!reply) return 0;
    memcpy(reply, data + 1, len);
    struct toolcall calls[3];
    size_t content = 0;
    int n = toolcall_parse(st, reply, len, calls, 3, &content);
    if (n < -1 || n > 3 || content > len) __builtin_trap();
    if (n <= 0 && content != len) __builtin_trap();
    for (int i = 0; i < n; i++)
        if (!calls[i].name || !calls[i].name[0] || !calls[i].arguments || calls[i].arguments[0] != '{')
            __builtin_trap();
    if (n > 0) toolcall_free(calls, n);
    /* the same reply as a bare call of a function "f" */
    struct toolcall one;
    int b = toolcall_parse_bare(reply, len, "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", &one);
    if (b < -1 || b > 1) __builtin_trap();
    if (b == 1 && (strcmp(one.name, "f") || one.arguments[0] != '{')) __builtin_trap();
    if (b == 1) toolcall_free(&one, 1);
    free(reply);
    return 0;
}
