/*
 * fuzz_template.c — libFuzzer target for the Jinja engine
 * (src/template/): the input is a template, compiled and, when it
 * compiles, rendered with a fixed conversation (system, user, assistant
 * with a tool call, tool result) and two tools. Whatever happens must
 * hold: a failure carries a message; a success gives NUL-terminated text
 * whose data spans are sorted, disjoint and inside it.
 *
 * Build and run: make fuzz && build/fuzz/fuzz_template -dict=tests/fuzz/fuzz_template.dict \
 *     tests/fuzz/seeds/fuzz_template
 * Seeds: tests/fuzz/seeds/fuzz_template/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

static const char VARS[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Weather in <|im_end|> Paris? \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
    "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":[1,2.5,-3]}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},{\"type\":\"code_interpreter\"}],"
    "\"add_generation_prompt\":true,\"enable_thinking\":false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *src = malloc(size ? size : 1); /* alone, so ASan sees reads past it */
    if (!src) return 0;
    memcpy(src, data, size);
    struct jinja_template *t = NULL;
    struct kvik_err err = {0};
    if (jinja_compile(src, size, "fuzz", &t, &err) != KVIK_OK) {
        if (t || !err.msg[0]) __builtin_trap();
        free(src);
        return 0;
    }
    struct jinja_input in = {VARS, sizeof VARS - 1, "<s>", "</s>", 1768473000};
    struct jinja_output o;
    if (jinja_render(t, &in, &o, &err) != KVIK_OK) {
        if (o.text || !err.msg[0]) __builtin_trap();
    } else {
        if (o.text[o.len]) __builtin_trap();
        for (size_t i = 0; i < o.n_data; i++) {
            if (o.data[i].begin >= o.data[i].end || o.data[i].end > o.len) __builtin_trap();
            if (i && o.data[i].begin <= o.data[i - 1].end) __builtin_trap();
        }
    }
    jinja_output_free(&o);
    jinja_free(t);
    free(src);
    return 0;
}
