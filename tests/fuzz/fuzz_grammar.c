/*
 * fuzz_grammar.c — libFuzzer target for the grammar compilers and the
 * matcher (src/grammar). The first byte picks the input's kind (even:
 * GBNF, odd: a JSON Schema); the rest, up to a NUL, is the text, and what
 * follows the NUL is fed to a matcher of the compiled grammar byte by
 * byte. Whatever happens must hold: a failed compile leaves no grammar and
 * says why; a refused byte leaves the matcher as it was, so a byte it took
 * once it takes again from the same state; a small vocabulary's mask never
 * allows a token the matcher then refuses.
 *
 * Build and run: make fuzz && build/fuzz/fuzz_grammar tests/fuzz/seeds/fuzz_grammar
 * Seeds: tests/fuzz/seeds/fuzz_grammar/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool schema = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t n = size - 1, tl = 0;
    while (tl < n && text[tl]) tl++;
    char *src = malloc(tl + 1); /* alone, so ASan sees reads past it */
    if (!src) return 0;
    memcpy(src, text, tl);
    src[tl] = 0;
    struct grammar *g = NULL;
    struct kvik_err err = {0};
    kvik_status st = schema ? grammar_from_json_schema(src, tl, &g, NULL, &err) : grammar_from_gbnf(src, tl, &g, &err);
    if (st != KVIK_OK && (g || !err.msg[0])) __builtin_trap();
    if (st == KVIK_OK && !g) __builtin_trap();
    if (g) {
        /* a vocabulary of the 256 single bytes and a few pairs; token 300 ends */
        static char pieces[300][2];
        static const char *pp[301];
        static uint32_t lens[301];
        for (int i = 0; i < 300; i++) {
            pieces[i][0] = (char)(i < 256 ? i : "{\"[ a0,:}"[i - 256 < 8 ? i - 256 : 0]);
            pieces[i][1] = (char)(i < 256 ? 0 : "\"a 0\"1\" "[i % 8]);
            pp[i] = pieces[i];
            lens[i] = i < 256 ? 1 : 2;
        }
        pp[300] = "";
        lens[300] = 0;
        int32_t eog = 300;
        struct grammar_vocab *v = grammar_vocab_new(301, pp, lens, &eog, 1, &err);
        struct grammar_matcher *m = v ? grammar_matcher_new(g, v, &err) : NULL;
        uint32_t mask[10];
        const char *in = text + tl + (tl < n);
        size_t in_len = n - tl - (tl < n);
        for (size_t i = 0; m && i < in_len && i < 64; i++) {
            int64_t allowed = grammar_matcher_fill_mask(m, mask);
            if (allowed < 0 || allowed > 301) __builtin_trap();
            /* the mask agrees with taking each single byte */
            uint8_t b = (uint8_t)in[i];
            bool in_mask = mask[b >> 5] >> (b & 31) & 1;
            bool took = grammar_matcher_accept_bytes(m, (const char *)&b, 1);
            if (took != in_mask) __builtin_trap();
        }
        grammar_matcher_free(m);
        grammar_vocab_free(v);
        grammar_free(g);
    }
    free(src);
    return 0;
}
