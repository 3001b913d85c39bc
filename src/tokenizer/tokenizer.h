/*
 * tokenizer.h — text <-> token ids, loaded from a GGUF file's tokenizer.*
 * metadata.
 *
 * Supported today (tokenizer.ggml.model):
 *   "gpt2"   byte-level BPE (bpe.c) with the pre-tokenizers (pretok*.c;
 *            tokenizer.ggml.pre, grouped by the split they share):
 *              "default", "gpt-2", "mpt", "olmo", "jais", "phi-2",
 *              "trillion", "gigachat", "a.x-4.0", "mellum",
 *              "granite-docling", "exaone4"           GPT-2's pattern
 *              "smollm", "starcoder", "refact", "command-r", "codeshell",
 *              "exaone", "minerva", "minerva-7b", "mellum2"
 *                                                     every \p{N} alone, then GPT-2's
 *              "llama3", "llama-v3", "llama-bpe", "smaug-bpe", "dbrx",
 *              "chatglm-bpe", "glm4", "falcon3", "falcon-h1", "pixtral",
 *              "midm-2.0", "lfm2"                     cl100k (Llama 3)
 *              "qwen2", "qwen", "deepseek-r1-qwen", "stablelm2", "megrez",
 *              "hunyuan", "solar-open", "kormo"       cl100k with single digits
 *              "qwen35"                               the same, marks joining letters
 *              "gpt-4o", "llama4", "minimax-m2", "kanana2", "talkie"  o200k
 *              "tekken"                               o200k, no contractions,
 *                                                     single digits
 *              "deepseek-llm", "deepseek-coder"       DeepSeek's split chains
 *              "deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"
 *              "falcon"                               punctuation, GPT-2, digits
 *              "bloom", "poro-chat", "gpt3-finnish"   BLOOM's pattern
 *              "viking"                               BLOOM's, digits alone
 *            Two rules of the tokenizer.json that GGUF does not carry are
 *            set by name (tokenizer.c says why): ignore_merges, a word whose
 *            byte-level spelling is a token being that token whatever the
 *            merges ("llama3", "llama-v3", "llama-bpe", "falcon3",
 *            "falcon-h1", "pixtral", "midm-2.0", "lfm2", "tekken", "glm4"),
 *            and Unicode NFC applied to the text between special tokens
 *            before pre-tokenizing ("qwen2", "qwen", "deepseek-r1-qwen",
 *            "mpt", "olmo", "command-r")
 *   "llama"  SentencePiece BPE (spm.c): merges by tokenizer.ggml.scores, "▁"
 *            for spaces, a space prefix, byte fallback to <0xAB> tokens
 *   "gemma4" the same text (no space prefix unless add_space_prefix says
 *            so), pairs merging by their rank in tokenizer.ggml.merges
 *   "bert"   WordPiece (wordpiece.c): BERT's normalizer (lowercase, accents
 *            stripped, CJK ideographs split), whitespace/punctuation words,
 *            greedy longest-match pieces, [UNK] for words with no pieces or
 *            over 100 characters
 * Anything else fails to load with KVIK_ERR_UNSUPPORTED naming the model or
 * (gpt2) pre-tokenizer. More pre-tokenizers are more scanners in pretok.c.
 * Missing or malformed keys (tokens, token types, llama's scores, special
 * ids that name no token in llama and bert vocabularies) are KVIK_ERR_FORMAT.
 *
 * Ownership: tokenizer_load copies everything it needs (token texts, their
 * decoded bytes, the merge table as id pairs) into its own memory, so the
 * gguf may be closed right after loading.
 *
 * Threads: a loaded tokenizer is read-only except for its word-cache id,
 * set once, atomically, by the first encode; any number of threads may
 * encode and decode with it at once. The word cache is per thread. A
 * detok_stream belongs to one thread.
 *
 * Special tokens: tokens of type CONTROL or UNKNOWN ("<|endoftext|>",
 * "<s>", "<unk>") are recognised in the text only when parse_special is
 * true; otherwise their text is plain text, encoded like any other (never
 * to their own ids, not even as a whole word under ignore_merges).
 * USER_DEFINED tokens (added tokens that are not special) are always
 * recognised, as Hugging Face tokenizers does. The longest match at a
 * position wins; the text between matches is pre-tokenized and encoded. Text that is not valid UTF-8 still
 * encodes: each invalid byte is a character of its own and becomes its
 * byte token (llama: see below). Some vocabularies lack tokens for bytes that never occur in
 * UTF-8 (0xC0, 0xF5..0xFF) or for rare control bytes: such a byte encodes
 * as the unknown token, or is dropped when there is none.
 *
 * llama: each stretch of text between special tokens (the first one and
 * every one after a special token, as llama.cpp does) gets the "▁" space
 * prefix when tokenizer.ggml.add_space_prefix is true (the default). Text
 * that is not valid UTF-8 is cut into characters by the lead byte alone,
 * as llama.cpp does (spm.c, step 2): an invalid character falls back to
 * the <0xAB> tokens of all its bytes, which may include bytes after the bad
 * one ("a\xffb" is "a" <0xFF> <0x62>), and a space it takes in decodes as
 * "▁". bert: an invalid byte reads
 * as U+FFFD, which BERT's clean-up drops; the text is processed in chunks
 * cut at ASCII whitespace (64 KiB or more), so memory stays bounded unless
 * the text has no such whitespace. A llama stretch merges word by word
 * when no token has a "▁" after another character (Llama's vocabulary),
 * else whole, with up to 3 bytes of working memory per input byte plus
 * about 40 per character of the longest word; one over 256 MiB fails with
 * KVIK_ERR_NOMEM.
 *
 * Decoding and the space prefix: a llama piece turns "▁" into a space and
 * a byte token into its byte; a bert word-initial piece ("▁hello") reads
 * " hello", a continuation piece ("llo", stored without "##") "llo", and
 * a special token " [CLS]". tokenizer_decode drops one leading space of
 * the text (the first non-empty piece's) for llama vocabularies that add a
 * space prefix and for bert, as Hugging Face's decoders (Strip, WordPiece)
 * do; llama.cpp's llama_detokenize does the same except that it keeps the
 * space after a leading BOS it removes. bert text then gets Hugging Face's
 * clean_up_tokenization (" ." -> ".", " ' " -> "'", " n't" -> "n't", ...).
 * tokenizer_decode_piece gives a piece as is (its leading space included),
 * and a detok_stream keeps every space unless told otherwise (strip_space
 * below): it usually continues a prompt, where " Paris" needs its space,
 * as in llama.cpp's streaming. A stream does no bert clean-up (that needs
 * the next token), and a text starting with a continuation piece decodes
 * without the "##" Hugging Face would show.
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
 * for gpt2 vocabularies, true / false for llama, true / true for bert,
 * where BOS / EOS are [CLS] / [SEP]). parse_special: see above.
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
/* The code point byte-level BPE vocabularies (gpt2) write byte b as: GPT-2's
 * bytes_to_unicode (printable Latin-1 as itself, the others from U+0100). */
uint32_t tokenizer_byte_char(uint8_t b);

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
 * The raw bytes one token stands for (byte-level decoded, "▁" as a space;
 * see "Decoding" above for the leading spaces). Control and
 * unknown tokens give their text when render_special is true and nothing
 * otherwise; user-defined tokens always give their text. Writes at most len
 * bytes (no NUL) and returns the piece's full length, like snprintf;
 * KVIK_ERR_INVALID_ARG (negative) for an id out of range.
 */
int64_t tokenizer_decode_piece(const struct tokenizer *tok, int32_t id, char *buf, size_t len,
                               bool render_special);

/* The text of n ids, snprintf-style as above: the concatenated pieces,
 * less one leading space and with the bert clean-up (see above).
 * KVIK_ERR_NOMEM (bert only: the clean-up copies the text). */
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
    bool strip_space;  /* drop one leading space of the next non-empty piece, then
                          clear: set it after detok_init to decode ids from the start
                          of a text exactly as tokenizer_decode would (bert clean-up
                          aside); detok_init clears it (continuing a prompt) */
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

/* ---- speed: reusable scratch, the word cache (bpe.c), batches (batch.c) ---------- */

/*
 * Working memory for the merge loop. A caller that keeps one and passes it
 * to every call never has the merge loop allocate (it grows only for a word
 * longer than any before it). One scratch serves one call at a time.
 * tokenizer_encode is tokenizer_encode_scratch with sc NULL: it uses a
 * scratch kept per thread.
 */
struct tokenizer_scratch;
struct tokenizer_scratch *tokenizer_scratch_new(void); /* NULL if out of memory */
void tokenizer_scratch_free(struct tokenizer_scratch *sc); /* NULL is fine */
int64_t tokenizer_encode_scratch(const struct tokenizer *tok, struct tokenizer_scratch *sc,
                                 const char *text, size_t len, bool add_special, bool parse_special,
                                 int32_t *out, int64_t max);

/*
 * The word cache: every thread remembers the ids of the pre-tokenized words
 * (2..30 bytes, up to 6 tokens) it encoded most recently, 16384 of them in
 * 1.1 MiB allocated at its first encode and freed when the thread exits;
 * the least recently used word of a 4-way set makes room. Entries are keyed
 * by the word's bytes and the tokenizer's identity, a number no other
 * tokenizer of the process ever gets, so a freed tokenizer's entries never
 * answer for another one. Nothing is shared between threads (no lock).
 * The ids are the same with the cache on or off: it only saves time.
 */
void tokenizer_cache_set_enabled(bool on); /* process-wide; on unless KVIK_TOKENIZER_CACHE=0 */
bool tokenizer_cache_enabled(void);
void tokenizer_cache_clear(void); /* the calling thread's entries and counters */

/* The calling thread's lookups since it started or last cleared. */
struct tokenizer_cache_stats {
    uint64_t hits, misses;
};
void tokenizer_cache_get_stats(struct tokenizer_cache_stats *out);

/*
 * Encodes n documents on the pool's threads (pool NULL: on the calling
 * thread). Documents are handed out to threads a few at a time, so long
 * and short ones mix; the ids are exactly those tokenizer_encode gives each
 * document alone. On success out->ids holds every document's ids back to
 * back, document i's at ids[off[i] .. off[i+1]); free with
 * tokenizer_batch_free. KVIK_ERR_NOMEM or KVIK_ERR_INVALID_ARG otherwise
 * (out is then empty). Must not run on a pool that is busy.
 */
struct tokenizer_doc {
    const char *text; /* [len] bytes */
    size_t len;
};

struct tokenizer_batch {
    int32_t *ids; /* [off[n]] */
    int64_t *off; /* [n + 1] */
    int64_t n;    /* documents */
};

kvik_status tokenizer_encode_batch(const struct tokenizer *tok, struct pool *pool,
                                   const struct tokenizer_doc *docs, int64_t n, bool add_special,
                                   bool parse_special, struct tokenizer_batch *out,
                                   struct kvik_err *err);
void tokenizer_batch_free(struct tokenizer_batch *b); /* leaves it empty; NULL is fine */

#endif /* KVIK_TOKENIZER_H */
