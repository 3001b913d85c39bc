/*
 * synth.h — random-weight GGUF files shaped like real models, for
 * benchmarks that want realistic sizes without downloads (speed does not
 * depend on weight values).
 *
 * A synthetic file follows the llama conventions of GGUF, so kvik and
 * llama.cpp both load it: general.architecture "llama", the llama.* hyper-
 * parameters of the shape, token_embd / output_norm / output (absent when
 * tied) and blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
 * ffn_norm, ffn_gate, ffn_up, ffn_down}, norms F32. The tokenizer is a real
 * one: every tokenizer.* key of another GGUF, with the per-token arrays cut
 * or padded to the shape's vocabulary (see synth_write).
 *
 * Weights are random quant bits (tensor_fill_random's TENSOR_FILL_BITS)
 * with every block scale rescaled so the weights have an RMS of
 * 1/sqrt(fan_in), as in a trained model: a forward pass gives finite,
 * moderate activations in any weight type (llama.cpp's F16 activations
 * included). Norm weights are 1 +- 0.05. Each row is seeded from (seed,
 * tensor, row), so the file is byte-identical for a seed whatever the
 * thread count. Data is produced at write time through a bounded buffer:
 * an 8B model needs a few MB of memory.
 */
#ifndef KVIK_MODEL_SYNTH_H
#define KVIK_MODEL_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* The hyperparameters of a real model. */
struct synth_shape {
    const char *name;   /* "tinyllama-1.1b" */
    const char *model;  /* the model it copies: "TinyLlama-1.1B v1.0" */
    int n_layer;
    int n_embd;         /* model width */
    int n_ff;           /* feed-forward width */
    int n_head;         /* query heads */
    int n_head_kv;      /* key/value heads */
    int n_vocab;        /* tokens (token_embd rows) */
    int n_ctx;          /* llama.context_length written */
    float rope_base;    /* llama.rope.freq_base */
    float rms_eps;      /* llama.attention.layer_norm_rms_epsilon */
    bool tied_output;   /* no output.weight: the output shares token_embd */
    const char *note;   /* what the file leaves out of the real model; NULL: nothing */
};

/* The built-in shapes ([*n]) and one of them by name (NULL if unknown). */
const struct synth_shape *synth_shapes(size_t *n);
const struct synth_shape *synth_shape_find(const char *name);

/* Weights (all tensors' elements) of a shape. */
uint64_t synth_shape_params(const struct synth_shape *s);

/* True for the weight types a file can be written in: those kvik has a
 * kernel for (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K). */
bool synth_type_supported(int type);

/*
 * The type a weight matrix of `cols` inputs gets in a file of `type`, as
 * llama.cpp's quantizer chooses:
 *  - the output projection (output.weight, or token_embd when tied) of a
 *    quantized file other than Q8_0 is Q6_K, or Q8_0 where cols is not a
 *    multiple of 256;
 *  - a K-quant whose 256-weight blocks do not divide cols falls back to a
 *    32-weight type: Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1;
 *    Q6_K -> Q8_0;
 *  - everything else is `type`.
 */
int synth_matrix_type(int type, int64_t cols, bool output);

/* Called after each chunk of tensor data: done of total bytes. */
typedef void (*synth_progress_fn)(void *user, uint64_t done, uint64_t total);

struct synth_params {
    const struct synth_shape *shape; /* a built-in one, or any consistent shape */
    int type;                        /* enum tensor_type, synth_type_supported */
    uint64_t seed;
    const char *vocab_path;          /* GGUF whose tokenizer.* keys are copied */
    int n_threads;                   /* 0: all CPUs */
    synth_progress_fn progress;      /* optional */
    void *progress_user;
};

/* What synth_write did. */
struct synth_info {
    uint64_t file_bytes;
    uint64_t n_params;
    int64_t n_tensors;
    int64_t vocab_src;       /* tokens in the source vocabulary */
    int64_t merges_kept;     /* merges written (of the source's, when cut) */
    int64_t merges_dropped;  /* merges naming a token past the cut */
};

/*
 * Writes the file to path + ".tmp" and renames it to path, so a failed or
 * interrupted run never leaves a partial file at path (a failure removes
 * the .tmp file).
 *
 * The vocabulary: tokenizer.ggml.tokens, .token_type and .scores get
 * exactly shape->n_vocab entries. A smaller source is padded with tokens
 * "<unused_N>" of type UNUSED (score 0); a larger one loses the ids >=
 * n_vocab, and every merge whose parts or result are not among the kept
 * tokens. A *_token_id at or past n_vocab is an error (KVIK_ERR_INVALID_ARG)
 * naming the key, as is any other per-token array. Other tokenizer.* keys
 * are copied unchanged.
 *
 * Errors: KVIK_ERR_INVALID_ARG (bad parameters, shape or vocabulary cut),
 * KVIK_ERR_IO / KVIK_ERR_FORMAT (the vocabulary file, or writing), with a
 * one-line message in err. info may be NULL.
 */
kvik_status synth_write(const char *path, const struct synth_params *p, struct synth_info *info,
                        struct kvik_err *err);

#endif /* KVIK_MODEL_SYNTH_H */
