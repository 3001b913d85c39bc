/*
 * fuzz_vocab_import.c — libFuzzer target for the tiktoken ranks parser
 * (vocab_import_tiktoken_mem). Each input is a ranks file; when it is
 * accepted, the GGUF it makes is written to memory, read back, loaded as a
 * tokenizer and used to encode and decode a short text, so a file the
 * importer accepts must also be a vocabulary kvik can run.
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_vocab_import/ (the 256 single bytes and a few
 * merged tokens, as scripts/fetch-vocab.sh's cl100k_base file begins).
 */
#include <stdlib.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tools/vocab_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const struct vocab_special sp[] = {{"<|endoftext|>", 300}, {"<|x|>", 4}};
    struct vocab_import_opts o = {.pre = "llama-bpe", .special = sp, .n_special = 1, .bos = -1, .eos = -1};
    if (size && (data[0] & 1)) o.n_special = 2; /* sometimes a clashing special */
    struct gguf_writer *w = gguf_writer_new();
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    void *mem = NULL;
    size_t mem_size = 0;
    struct vocab_import_info info;
    if (!w || vocab_import_tiktoken_mem(data, size, "fuzz", &o, w, &info, NULL) != KVIK_OK) goto done;
    if (info.n_vocab <= 0 || info.n_ranks < 256) __builtin_trap(); /* accepted means every byte is there */
    if (gguf_writer_write_memory(w, &mem, &mem_size, NULL) != KVIK_OK) goto done;
    if (gguf_open_memory(mem, mem_size, &g, NULL) != KVIK_OK) __builtin_trap();
    if (tokenizer_load(g, &tok, NULL) != KVIK_OK) __builtin_trap();
    static const char text[] = "Hello, world! 12345 \xC3\xA9t\xC3\xA9  \n<|endoftext|>";
    int32_t ids[256];
    int64_t n = tokenizer_encode(tok, text, sizeof text - 1, false, true, ids, 256);
    if (n < 0 || n > 256) __builtin_trap(); /* every byte has a token: at most one id per byte */
    char out[1024];
    int64_t got = tokenizer_decode(tok, ids, n, out, sizeof out, true);
    if (got < 0) __builtin_trap();
done:
    tokenizer_free(tok);
    gguf_close(g);
    free(mem);
    gguf_writer_free(w);
    return 0;
}
