/*
 * vocab.c — lookups in a loaded vocabulary: the hash of token texts, text
 * -> id (filled once by the loader in tokenizer.c, then read by the
 * encoders), and the text and type of an id. Texts are the strings of
 * tokenizer.ggml.tokens as stored, not the bytes they decode to.
 */

#include "tokenizer/tokenizer_int.h"

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001B3ull; /* FNV-1a */
    return h;
}
#define HASH_SEED 0xCBF29CE484222325ull

int32_t vocab_find2(const struct tokenizer *tok, const char *a, size_t na, const char *b,
                    size_t nb) {
    uint64_t h = hash_bytes(hash_bytes(HASH_SEED, a, na), b, nb);
    for (uint64_t i = h & tok->vocab_mask;; i = (i + 1) & tok->vocab_mask) {
        int32_t id = tok->vocab[i];
        if (id < 0) return -1;
        size_t len;
        const char *t = tok_text(tok, id, &len);
        if (len == na + nb && memcmp(t, a, na) == 0 && memcmp(t + na, b, nb) == 0) return id;
    }
}

int32_t tokenizer_find(const struct tokenizer *tok, const char *text, size_t len) {
    return vocab_find2(tok, text, len, "", 0);
}

void vocab_insert(struct tokenizer *tok, int32_t id) {
    size_t len;
    const char *t = tok_text(tok, id, &len);
    if (vocab_find2(tok, t, len, "", 0) >= 0) return;
    uint64_t h = hash_bytes(HASH_SEED, t, len);
    uint64_t j = h & tok->vocab_mask;
    while (tok->vocab[j] >= 0) j = (j + 1) & tok->vocab_mask;
    tok->vocab[j] = id;
}

const char *tokenizer_token_text(const struct tokenizer *tok, int32_t id) {
    if (id < 0 || id >= tok->n_vocab) return NULL;
    return tok->text + tok->text_off[id];
}

int tokenizer_token_type(const struct tokenizer *tok, int32_t id) {
    return id < 0 || id >= tok->n_vocab ? -1 : tok->type[id];
}
