/*
 * encoder.h — BERT-family text encoders: a loaded "bert" GGUF and the
 * forward pass that turns texts into embeddings.
 *
 * The encoder reads llama.cpp's "bert" layout (kvik convert writes it):
 * token, position and token-type embeddings summed and LayerNorm'ed, then
 * per layer bidirectional multi-head attention (Q, K, V and output
 * projections with biases), a residual and LayerNorm, a GELU (erf) feed-
 * forward with biases, a residual and LayerNorm. Every text of a batch
 * starts at position 0 with token type 0 and sees only its own tokens, so
 * its embedding does not depend on what else shares the batch. Pooling
 * (mean over all tokens, the first token, or the last) and L2
 * normalisation come last.
 *
 * A cross-encoder (pooling RANK, as kvik convert writes a Hugging Face
 * BertForSequenceClassification) reads a pair of texts, query and
 * document, as one sequence with token types 0 and 1, and its output is a
 * classification head's logits instead of an embedding: the first token's
 * state through the pooler (cls: a dense layer and tanh, when the file has
 * one) and the classifier (cls.output: n_labels rows).
 */
#ifndef KVIK_MODEL_ENCODER_H
#define KVIK_MODEL_ENCODER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "tensor/tensor.h"

struct tokenizer;

/* bert.pooling_type's values (llama.cpp's). */
enum encoder_pooling {
    ENCODER_POOL_NONE = 0,
    ENCODER_POOL_MEAN = 1,
    ENCODER_POOL_CLS = 2,
    ENCODER_POOL_LAST = 3,
    ENCODER_POOL_RANK = 4, /* the classification head's logits */
};

struct encoder_hparams {
    int n_layer, n_embd, n_ff, n_head, head_dim;
    int n_vocab;
    int n_ctx;      /* positions: the longest text, special tokens included */
    int n_types;    /* token types */
    float eps;      /* LayerNorm epsilon */
    int pooling;    /* enum encoder_pooling the file asks for (MEAN when it does not say) */
    int n_labels;   /* the classifier's outputs (RANK files); 0 without a head */
};

struct encoder;

/* Loads and validates a "bert" GGUF and its WordPiece tokenizer. On
 * failure *out is NULL and err names the key or tensor at fault. */
kvik_status encoder_load(const char *path, struct encoder **out, struct kvik_err *err);
void encoder_free(struct encoder *e); /* NULL is fine */

const struct encoder_hparams *encoder_hparams(const struct encoder *e);
const struct tokenizer *encoder_tokenizer(const struct encoder *e);
/* A hash of the file that tells its embeddings apart from another's. */
uint64_t encoder_identity(const struct encoder *e);
/* The width of one output row of encoder_embed with the file's pooling:
 * n_labels for a cross-encoder, else n_embd. */
int encoder_out_dim(const struct encoder *e);

/*
 * Token ids of a text as the encoder reads it: [CLS] text [SEP], the text's
 * tokens cut to the first n_ctx - 2 when longer (Hugging Face's truncation
 * of a single sequence). Text is data: control-token spellings in it are
 * not parsed. Returns the number of ids (<= max, max >= n_ctx), or a
 * negative kvik_status.
 */
int64_t encoder_tokenize(const struct encoder *e, const char *text, size_t len, int32_t *out, int64_t max);

/*
 * A pair of texts as a cross-encoder reads it: [CLS] a [SEP] b [SEP], token
 * types 0 up to the first [SEP] and 1 after it. When longer than n_ctx the
 * pair is cut as Hugging Face's "longest_first" truncation cuts it: with
 * B = n_ctx - 3, the shorter text (a on a tie) keeps its first
 * min(its length, B / 2) tokens and the other its first B less those.
 * Text is data, as in encoder_tokenize. Returns the number of ids written to ids and types (both
 * of at least max >= n_ctx entries), or a negative kvik_status.
 */
int64_t encoder_tokenize_pair(const struct encoder *e, const char *a, size_t alen, const char *b, size_t blen,
                              int32_t *ids, uint8_t *types, int64_t max);

struct encoder_ctx;

/* max_tokens: the most tokens, over all texts, one encoder_embed call is
 * given (at least n_ctx). */
struct encoder_ctx *encoder_ctx_new(const struct encoder *e, int n_threads, int max_tokens, struct kvik_err *err);
void encoder_ctx_free(struct encoder_ctx *ctx);

/*
 * Embeds n texts given as ids: text i is ids[i][0..n_ids[i]) (1..n_ctx
 * ids each, every id < n_vocab, the sum <= max_tokens), with token types
 * types[i][..] (types NULL: all 0; each < n_types). Row i of out gets text
 * i pooled by `pooling` (ENCODER_POOL_NONE: the file's), L2-normalised when
 * normalize is set: n_embd values, or with RANK the n_labels logits (never
 * normalised; KVIK_ERR_INVALID_ARG for a file without a head).
 */
kvik_status encoder_embed(struct encoder_ctx *ctx, int n, const int32_t *const *ids, const uint8_t *const *types,
                          const int *n_ids, int pooling, bool normalize, float *out, struct kvik_err *err);

#endif /* KVIK_MODEL_ENCODER_H */
