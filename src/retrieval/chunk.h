/*
 * chunk.h — a file's text cut into chunks for embedding, by token count
 * (OpenAI's static chunking strategy: at most max_tokens tokens a chunk,
 * each chunk sharing about overlap tokens with the one before).
 *
 * Tokens are counted as the embedding model's tokenizer reads the text
 * (where it reads a word cut into pieces as fewer tokens than the pieces,
 * as WordPiece reads a word of over 100 characters as one [UNK], the
 * count is an upper bound).
 * The text is cut only between pieces: a piece is a run of non-space
 * bytes with the white space after it, and a piece longer than
 * CHUNK_MAX_PIECE bytes is cut into parts of at most that many bytes (at
 * UTF-8 character boundaries), so one piece never outgrows a chunk. A
 * chunk's text is a byte range of the input: the chunks read in order,
 * less their overlaps, are the input again.
 */
#ifndef KVIK_RETRIEVAL_CHUNK_H
#define KVIK_RETRIEVAL_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct tokenizer;

enum { CHUNK_MAX_PIECE = 64 };

struct chunk_span {
    size_t off, len; /* the chunk's bytes in the text */
    int tokens;      /* its tokens (no special ones) */
};

/*
 * Cuts text[0..len) into chunks of at most max_tokens (>= CHUNK_MAX_PIECE)
 * tokens of tok, the next one starting as far back as keeps at most
 * overlap (0 .. max_tokens / 2) tokens in common, but always past the
 * previous start. Returns the number of chunks (0 for a text of only white
 * space) with *out malloc'd, or a negative kvik_status with err set.
 */
int64_t chunk_text(const struct tokenizer *tok, const char *text, size_t len, int max_tokens, int overlap,
                   struct chunk_span **out, struct kvik_err *err);

#endif /* KVIK_RETRIEVAL_CHUNK_H */
