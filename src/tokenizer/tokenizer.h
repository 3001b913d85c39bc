/*
 * tokenizer.h — text <-> token ids, loaded from a GGUF file's tokenizer.*
 * metadata.
 *
 * Supported today: byte-level BPE (tokenizer.ggml.model == "gpt2") with the
 * pre-tokenizers
 *   "gpt-2", "mpt", "olmo", "jais"           the GPT-2 split pattern
 *   "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
 *   "minerva"                                  the same, after every \p{N}
 *                                              character is split off alone
 * Anything else fails to load with KVIK_ERR_UNSUPPORTED naming the model or
 * pre-tokenizer. More pre-tokenizers are more scanners in pretok.c.
 *
 * Ownership: tokenizer_load copies everything it needs (token texts, their
 * decoded bytes, the merge table as id pairs) into its own memory, so the
 * gguf may be closed right after loading.
 *
 * Threads: a loaded tokenizer is never modified; any number of threads may
 * encode and decode with it at once. A detok_stream belongs to one thread.
 *
 * Special tokens: tokens of type CONTROL are recognised in the text only
 * when parse_special is true; USER_DEFINED tokens (added tokens that are not
 * special) are always recognised, as Hugging Face tokenizers does. The
 * longest match at a position wins; the text between matches is
 * pre-tokenized and BPE-encoded. Text that is not valid UTF-8 still
 * encodes: each invalid byte is a character of its own and becomes its
 * byte token. Some vocabularies lack tokens for bytes that never occur in
 * UTF-8 (0xC0, 0xF5..0xFF) or for rare control bytes: such a byte encodes
 * as the unknown token, or is dropped when there is none.
 */
#ifndef KVIK_TOKENIZER_H
#define KVIK_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "gguf/gguf.h"

/* Token types, as stored in tokenizer.ggml.token_type. */
enum token_type {
    TOKEN_TYPE_UNDEFINED = 0,
    TOKEN_TYPE_NORMAL = 1,
    TOKEN_TYPE_UNKNOWN = 2,
    TOKEN_TYPE_CONTROL = 3,
    TOKEN_TYPE_USER_DEFINED = 4,
    TOKEN_TYPE_UNUSED = 5,
    TOKEN_TYPE_BYTE = 6,
};

struct tokenizer;

/* Builds a tokenizer from g's metadata. KVIK_ERR_UNSUPPORTED for a model
 * or pre-tokenizer kvik does not implement, KVIK_ERR_FORMAT for missing or
 * inconsistent keys, KVIK_ERR_NOMEM. On failure *out is NULL. */
kvik_status tokenizer_load(const struct gguf *g, struct tokenizer **out, struct kvik_err *err);
void tokenizer_free(struct tokenizer *tok); /* NULL is fine */

/*
 * Encodes len bytes of text. add_special adds BOS / EOS as the metadata
 * asks (tokenizer.ggml.add_bos_token / add_eos_token; both default to false
 * for gpt2 vocabularies). parse_special: see above.
 *
 * Returns the number of tokens the text encodes to, like snprintf: when it
 * is greater than max only the first max ids were written (call again with
 * a bigger buffer). Returns a negative kvik_status on failure
 * (KVIK_ERR_NOMEM, KVIK_ERR_INVALID_ARG).
 */
int64_t tokenizer_encode(const struct tokenizer *tok, const char *text, size_t len,
                         bool add_special, bool parse_special, int32_t *out, int64_t max);

int32_t tokenizer_n_vocab(const struct tokenizer *tok);
/* Special ids; -1 when the vocabulary has none. */
int32_t tokenizer_bos(const struct tokenizer *tok);
int32_t tokenizer_eos(const struct tokenizer *tok);
int32_t tokenizer_unk(const struct tokenizer *tok);
int32_t tokenizer_pad(const struct tokenizer *tok);
bool tokenizer_add_bos(const struct tokenizer *tok);
bool tokenizer_add_eos(const struct tokenizer *tok);
/* The tokenizer.ggml.pre name it was loaded with ("default" if absent). */
const char *tokenizer_pre_name(const struct tokenizer *tok);

/* End of generation: EOS, EOT/EOM ids from the metadata, and control
 * tokens such as <|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>. */
bool tokenizer_is_eog(const struct tokenizer *tok, int32_t id);

/* A token's text as stored in the vocabulary (byte-level form for normal
 * tokens: "Ġthe"), NUL-terminated; NULL if id is out of range. */
const char *tokenizer_token_text(const struct tokenizer *tok, int32_t id);
/* Its enum token_type; -1 if id is out of range. */
int tokenizer_token_type(const struct tokenizer *tok, int32_t id);
/* The id of the token whose vocabulary text is exactly text[0..len); -1 if none. */
int32_t tokenizer_find(const struct tokenizer *tok, const char *text, size_t len);

/*
 * The raw bytes one token stands for (byte-level decoded). Control and
 * unknown tokens give their text when render_special is true and nothing
 * otherwise; user-defined tokens always give their text. Writes at most len
 * bytes (no NUL) and returns the piece's full length, like snprintf;
 * KVIK_ERR_INVALID_ARG (negative) for an id out of range.
 */
int64_t tokenizer_decode_piece(const struct tokenizer *tok, int32_t id, char *buf, size_t len,
                               bool render_special);

/* The concatenated pieces of n ids, snprintf-style as above. */
int64_t tokenizer_decode(const struct tokenizer *tok, const int32_t *ids, int64_t n, char *buf,
                         size_t len, bool render_special);

/* The longest piece any token decodes to (render_special included). */
size_t tokenizer_max_piece_len(const struct tokenizer *tok);

/*
 * Streaming detokenizer: feed ids one at a time, get only whole UTF-8
 * characters back. An incomplete sequence at the end of a piece is held
 * until the next piece completes it; bytes that can never form a valid
 * sequence come out as U+FFFD (one per maximal invalid subpart), so the
 * output is always valid UTF-8. detok_flush ends the stream: a held
 * incomplete sequence becomes one U+FFFD.
 */
struct detok_stream {
    const struct tokenizer *tok;
    bool render_special;
    uint8_t held[4];   /* [n_held] start of an incomplete UTF-8 sequence */
    int n_held;        /* 0..3 */
};

/* Bytes an output buffer must hold for any detok_push / detok_flush. */
size_t detok_min_cap(const struct tokenizer *tok);

void detok_init(struct detok_stream *st, const struct tokenizer *tok, bool render_special);
/* Appends token id; writes the bytes now complete to out and returns their
 * count. KVIK_ERR_INVALID_ARG (negative) if id is out of range or cap <
 * detok_min_cap (nothing written, state unchanged). */
int64_t detok_push(struct detok_stream *st, int32_t id, char *out, size_t cap);
/* Emits what is held (as U+FFFD) and resets the stream; cap >= 3 suffices. */
int64_t detok_flush(struct detok_stream *st, char *out, size_t cap);

#endif /* KVIK_TOKENIZER_H */
