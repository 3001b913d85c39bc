/*
 * imatrix.h — computing an importance matrix over calibration text, as
 * llama.cpp's llama-imatrix computes it (the file: imatrix_file.h).
 *
 * What is collected: for every weight product of the forward pass whose
 * weight is a layer's (blk.N.*; output.weight too with process_output),
 * the sum over all tokens of x^2 per input column, x the F32 row that
 * enters the product (model_ctx_observe), and the number of tokens. Q, K
 * and V share their input but each weight has its own entry; a tied
 * output (token_embd.weight) is never collected, as llama-imatrix names
 * only output.weight. Sums are F32, added token by token in text order.
 *
 * The text: its tokens (ppl_tokenize_file) are cut into non-overlapping
 * chunks of n_ctx; each chunk runs from an empty cache with its first
 * token replaced by BOS where the vocabulary adds BOS, and every one of
 * its positions counts. The file records chunk_count chunks of
 * chunk_size = n_ctx tokens and the text's path as its dataset.
 */
#ifndef KVIK_TOOLS_IMATRIX_H
#define KVIK_TOOLS_IMATRIX_H

#include "model/model.h"
#include "tools/imatrix_file.h"

enum {
    IMATRIX_MIN_CTX = 16, /* llama-imatrix skips products of fewer rows */
};

/* Accumulates observed product inputs into an importance matrix: pass
 * imatrix_acc_observe and the accumulator to model_ctx_observe. */
struct imatrix_acc {
    struct imatrix m;    /* entries in the order first seen (imatrix_acc_finish sorts them) */
    int64_t cap;         /* entries allocated */
    int64_t hint;        /* the entry after the last one seen (passes repeat their order) */
    bool process_output; /* collect output.weight too */
    kvik_status st;      /* the first failure (KVIK_ERR_NOMEM, or KVIK_ERR_FORMAT for a
                            weight seen with two widths); later calls do nothing */
    char what[160];      /* what failed */
};

void imatrix_acc_init(struct imatrix_acc *a, bool process_output);
/* A model_observe_fn: adds x[n_tok][cols]^2 to weight's sums, n_tok to its count. */
void imatrix_acc_observe(void *acc, const char *weight, const float *x, int n_tok, int64_t cols);
/* Moves the matrix into *out (entries sorted by name, a.st checked by the
 * caller first); a is empty after. */
void imatrix_acc_finish(struct imatrix_acc *a, struct imatrix *out);
void imatrix_acc_free(struct imatrix_acc *a);

struct imatrix_params {
    int n_ctx;           /* tokens per chunk, >= IMATRIX_MIN_CTX */
    int n_batch;         /* tokens per forward pass, IMATRIX_MIN_CTX .. n_ctx (0: n_ctx) */
    int n_chunks;        /* at most this many chunks (0: all the text fills) */
    bool process_output; /* collect output.weight too */
    const char *dataset; /* recorded in the file (may be NULL) */
    /* called after each chunk (may be NULL) */
    void (*progress)(void *arg, int chunk, int n_chunk, double seconds);
    void *progress_arg;
};

/*
 * Runs tokens[0..n_tokens) chunk by chunk through m on ctx (made for
 * batches of at least n_batch tokens and a context of n_ctx) and writes
 * the importance matrix into *out (free with imatrix_free, also after a
 * failure). The text must fill two chunks, as llama-imatrix requires.
 * add_bos / bos: the vocabulary's. Errors: KVIK_ERR_INVALID_ARG (too little
 * text, bad params), KVIK_ERR_NOMEM, the forward pass's.
 */
kvik_status imatrix_compute(const struct model *m, struct model_ctx *ctx, const int32_t *tokens, int64_t n_tokens,
                            bool add_bos, int32_t bos, const struct imatrix_params *p, struct imatrix *out,
                            struct kvik_err *err);

#endif /* KVIK_TOOLS_IMATRIX_H */
