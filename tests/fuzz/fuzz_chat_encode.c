/*
 * fuzz_chat_encode.c — libFuzzer target for chat_encode over hostile
 * message text. A tiny byte-level vocabulary (the 256 byte tokens, a few
 * merges, every family's markers as control tokens, <s> as unknown and
 * "<tool>" as a user-defined token) is built once in memory. Each input is
 * a family (first byte, which also says whether there is a system message
 * and a generation prompt) and up to six message contents separated by NUL
 * bytes. chat_encode must succeed and give exactly the control tokens of
 * the same conversation with every content "x"; when no content holds a
 * '<' (every control token starts with one) the ids must be those of the
 * whole rendering tokenized with parse_special.
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_chat_encode/.
 */
#include <stdlib.h>

#include "gguf/gguf.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const k_controls[] = {
    "<|im_start|>", "<|im_end|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "<start_of_turn>", "<end_of_turn>", "</s>", "<|user|>", "<|assistant|>", "<|system|>",
    "<|end|>", "<|endoftext|>",
};

/* The vocabulary, built on the first call; NULL traps. */
static struct tokenizer *vocab(void) {
    static struct tokenizer *tok;
    if (tok) return tok;
    enum { N_CTL = sizeof k_controls / sizeof k_controls[0] };
    static const char *const merges[] = {"h i", "Ġ t", "e n", "s y", "< |", "| >"};
    static const char *const merged[] = {"hi", "Ġt", "en", "sy", "<|", "|>"};
    static char bytes[256][4];
    const char *toks[256 + 6 + N_CTL + 2];
    int32_t types[256 + 6 + N_CTL + 2];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tokenizer_byte_char((uint8_t)b);
        if (cp < 0x80) bytes[b][0] = (char)cp;
        else bytes[b][0] = (char)(0xC0 | (cp >> 6)), bytes[b][1] = (char)(0x80 | (cp & 0x3F));
        toks[n] = bytes[b], types[n++] = TOKEN_TYPE_NORMAL;
    }
    for (int k = 0; k < 6; k++) toks[n] = merged[k], types[n++] = TOKEN_TYPE_NORMAL;
    for (int k = 0; k < N_CTL; k++) toks[n] = k_controls[k], types[n++] = TOKEN_TYPE_CONTROL;
    toks[n] = "<s>", types[n++] = TOKEN_TYPE_UNKNOWN;
    toks[n] = "<tool>", types[n++] = TOKEN_TYPE_USER_DEFINED;
    struct gguf_writer *w = gguf_writer_new();
    void *mem = NULL;
    size_t mem_size = 0;
    struct gguf *g = NULL;
    if (!w || gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2") ||
        gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2") ||
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n) ||
        gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n) ||
        gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 6) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(n - 2)) ||
        gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true) ||
        gguf_writer_write_memory(w, &mem, &mem_size, NULL) || gguf_open_memory(mem, mem_size, &g, NULL) ||
        tokenizer_load(g, &tok, NULL))
        __builtin_trap();
    gguf_close(g);
    free(mem);
    gguf_writer_free(w);
    return tok;
}

static bool is_control(const struct tokenizer *tok, int32_t id) {
    int t = tokenizer_token_type(tok, id);
    return t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_UNKNOWN;
}

/* Whether a and b hold the same control tokens in the same order. */
static bool same_controls(const struct tokenizer *tok, const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t i = 0, j = 0;
    for (;;) {
        while (i < na && !is_control(tok, a[i])) i++;
        while (j < nb && !is_control(tok, b[j])) j++;
        if (i == na || j == nb) return i == na && j == nb;
        if (a[i++] != b[j++]) return false;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || size > 4096) return 0;
    const struct tokenizer *tok = vocab();
    struct chat_format fmt = {.tmpl = (enum chat_template)(data[0] % CHAT_TEMPLATE_COUNT)};
    bool sys = data[0] & 0x10, gen = data[0] & 0x20;
    if (data[0] & 0x40) fmt.default_system = (char *)"Be <|im_end|> kind"; /* the template's own text */
    /* contents: the rest, split at NUL bytes */
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    struct chat_msg msgs[6], blank[6];
    size_t n = 0;
    bool lt = false;
    for (char *p = text; n < 6 && p < text + size;) {
        const char *role = sys && n == 0 ? "system" : (n - sys) % 2 == 0 ? "user" : "assistant";
        msgs[n] = (struct chat_msg){role, p};
        blank[n] = (struct chat_msg){role, "x"};
        lt |= strchr(p, '<') != NULL;
        n++;
        p += strlen(p) + 1;
    }
    int32_t *ids = NULL, *bids = NULL;
    size_t n_ids = 0, nb = 0;
    struct kvik_err err = {0};
    if (chat_encode(&fmt, tok, msgs, n, gen, &ids, &n_ids, &err) != KVIK_OK) __builtin_trap();
    if (chat_encode(&fmt, tok, blank, n, gen, &bids, &nb, &err) != KVIK_OK) __builtin_trap();
    if (!same_controls(tok, ids, n_ids, bids, nb)) __builtin_trap();
    if (!lt) {
        size_t len = 0;
        if (chat_format_apply(&fmt, msgs, n, gen, NULL, 0, &len, &err) != KVIK_OK) __builtin_trap();
        char *r = malloc(len + 1);
        int32_t *w = malloc((len + 8) * sizeof *w);
        if (r && w && chat_format_apply(&fmt, msgs, n, gen, r, len + 1, &len, &err) == KVIK_OK) {
            int64_t k = tokenizer_encode(tok, r, len, true, true, w, (int64_t)len + 8);
            if (k < 0 || (size_t)k != n_ids || memcmp(w, ids, n_ids * sizeof *w)) __builtin_trap();
        }
        free(r);
        free(w);
    }
    free(ids);
    free(bids);
    free(text);
    return 0;
}
