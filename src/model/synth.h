/*
 * synth.h — random-weight GGUF files shaped like real models: for
 * benchmarks that want realistic sizes without downloads (speed does not
 * depend on weight values), and for tests that run kvik and llama.cpp on the
 * same file of a family no real model on the machine has.
 *
 * A shape names its family; the file follows that family's GGUF
 * conventions as llama.cpp's converter writes them and its loader reads
 * them (llama.cpp 0.3.36), so both programs load it. Common to all: the
 * keys general.architecture (the family's name, ARCH below), general.type
 * "model", general.name ("synthetic SHAPE TYPE (random weights)", with
 * "phi3" written "phi 3": llama.cpp looks up Phi-3's own special tokens in
 * any model whose name holds "phi3" or "phi-3", and fails on another
 * tokenizer), general.file_type (and general.quantization_version 2 when
 * quantized), ARCH.block_count, context_length, embedding_length,
 * feed_forward_length, attention.head_count, attention.head_count_kv,
 * attention.layer_norm_rms_epsilon (F32), rope.freq_base (F32); the tensors
 * token_embd, output_norm and output (absent when tied: the output shares
 * token_embd), and per layer blk.N.attn_norm, attn_output, ffn_norm,
 * ffn_down. Every 1-D tensor (norms, biases, rope factors) is F32. Matrices
 * are [cols] -> [rows] (ne[0] = inputs). Families:
 *
 *  - llama: blk.N.attn_q, attn_k, attn_v, ffn_gate, ffn_up; llama.vocab_size,
 *    llama.rope.dimension_count (= head size); llama.attention.key_length and
 *    value_length only where the shape sets head_dim (Llama 3.2's config
 *    has one). Rope rotates adjacent pairs (llama.cpp's NORM). A shape with
 *    rope_llama3.factor > 0 (Llama 3.1 / 3.2) has the tensor rope_freqs.weight,
 *    F32 [head_dim / 2], first in the file: for pair i of a head, with
 *    f_i = 1 / base^(2i / head_dim) and wavelength w_i = 2 pi / f_i, the
 *    factor is 1 where w_i < orig_ctx / high_freq_factor, factor where
 *    w_i > orig_ctx / low_freq_factor, else 1 / ((1 - s) / factor + s) with
 *    s = (orig_ctx / w_i - low_freq_factor) / (high_freq_factor -
 *    low_freq_factor), each step in float32 as the converter computes it.
 *    llama.cpp divides pair i's rotation angle by factor i, in every layer.
 *  - qwen2: llama's tensors plus blk.N.attn_q.bias [q_dim], attn_k.bias and
 *    attn_v.bias [kv_dim] (added to the products); no vocab_size, no
 *    rope.dimension_count. Rope rotates pairs (j, j + head_dim / 2) (NEOX),
 *    implied by the architecture.
 *  - gemma3: llama's tensors plus blk.N.attn_q_norm and attn_k_norm
 *    ([head_dim], RMS norms of each head's q and k before rope),
 *    post_attention_norm and post_ffw_norm ([n_embd], RMS norms of the
 *    attention and FFN outputs before each residual add; ffn_norm is the
 *    pre-FFN norm). Keys gemma3.attention.key_length = value_length (the head
 *    size, independent of width and heads: attn_q is [n_embd] ->
 *    [n_head * head_dim], attn_output [n_head * head_dim] -> [n_embd]),
 *    gemma3.attention.sliding_window, gemma3.rope.freq_base (global layers)
 *    and gemma3.rope.freq_base_swa (sliding layers; llama.cpp's default
 *    10000 when absent). No sliding_window_pattern key: llama.cpp's pattern
 *    for gemma3 is fixed at 6, layer il slides unless il % 6 == 5 (layers
 *    5, 11, 17, ... attend globally; see synth_layer_is_sliding). A sliding
 *    layer's token at position p sees keys at p - window < p' <= p.
 *    Rope is NEOX. Always tied. Norm weights already hold Gemma's "+ 1"
 *    (llama.cpp multiplies by them as they are). What the file does not
 *    say but llama.cpp does for gemma3: embeddings are scaled by
 *    sqrt(n_embd), q by 1 / sqrt(head_dim), the FFN is GELU (tanh form)
 *    gated, and no final logit soft-capping (no key).
 *  - phi3: blk.N.attn_qkv [n_embd] -> [q_dim + 2 kv_dim] (rows: q, then k,
 *    then v) and blk.N.ffn_up [n_embd] -> [2 n_ff] (rows: the gate, then
 *    the up projection; the FFN is silu(gate) * up), no attn_q/k/v and no
 *    ffn_gate; keys phi3.rope.dimension_count (= head size),
 *    phi3.rope.scaling.original_context_length (= context_length, as
 *    Phi-3-mini-4k has it) and phi3.attention.sliding_window (2047 in
 *    Phi-3-mini-4k; llama.cpp ignores it for phi3 and attends over the
 *    whole context). Rope is NEOX. No rope_factors_long/short tensors (the
 *    4k model has none), except in a shape with longrope.orig_ctx > 0
 *    (Phi-3-mini-128k's rope_scaling of type "longrope", formerly "su"):
 *    then original_context_length is longrope.orig_ctx, the key
 *    phi3.rope.scaling.attn_factor (F32) holds longrope.attn_factor, and
 *    the tensors rope_factors_long.weight and rope_factors_short.weight,
 *    F32 [head_dim / 2], come first in the file (synth_longrope_factors).
 *    llama.cpp divides pair i's rotation angle by long[i] when its context
 *    per sequence exceeds original_context_length, else by short[i], and
 *    multiplies every cosine and sine by attn_factor, in every layer.
 *
 * The tokenizer is a real one: every tokenizer.* key of another GGUF, with
 * the per-token arrays cut or padded to the shape's vocabulary (see
 * synth_write).
 *
 * Weights are random quant bits (tensor_fill_random's TENSOR_FILL_BITS)
 * with every block scale rescaled so the weights have an RMS of
 * 1/sqrt(fan_in), as in a trained model: a forward pass gives finite,
 * moderate activations in any weight type (llama.cpp's F16 activations
 * included). Norm weights are 1 +- 0.05, biases uniform in [-0.5, 0.5].
 * Each row is seeded from (seed, tensor, row), so the file is
 * byte-identical for a seed whatever the thread count. Data is produced at
 * write time through a bounded buffer: an 8B model needs a few MB of
 * memory.
 */
#ifndef KVIK_MODEL_SYNTH_H
#define KVIK_MODEL_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Model families (general.architecture and the conventions above). */
enum synth_family {
    SYNTH_FAMILY_LLAMA,
    SYNTH_FAMILY_QWEN2,
    SYNTH_FAMILY_GEMMA3,
    SYNTH_FAMILY_PHI3,
    SYNTH_FAMILY_COUNT
};

/* "llama", "qwen2", "gemma3", "phi3"; NULL out of range. */
const char *synth_family_name(int family);

/* Llama 3 rope-frequency scaling (config.json's rope_scaling of type
 * "llama3"); factor 0: none. */
struct synth_llama3_rope {
    float factor;           /* 32 (Llama 3.2), 8 (Llama 3.1) */
    float low_freq_factor;  /* 1 */
    float high_freq_factor; /* 4 */
    int orig_ctx;           /* original_max_position_embeddings: 8192 */
};

/* Phi-3 longrope scaling (config.json's rope_scaling of type "longrope" or
 * "su"); orig_ctx 0: none. */
struct synth_longrope {
    int orig_ctx;      /* original_max_position_embeddings: 4096 in Phi-3-mini-128k */
    float attn_factor; /* sqrt(1 + ln(n_ctx / orig_ctx) / ln(orig_ctx)), as the converter computes it */
};

/* The hyperparameters of a real model. */
struct synth_shape {
    const char *name;   /* "tinyllama-1.1b" */
    const char *model;  /* the model it copies: "TinyLlama-1.1B v1.0" */
    int family;         /* enum synth_family (0: llama) */
    int n_layer;
    int n_embd;         /* model width */
    int n_ff;           /* feed-forward width */
    int n_head;         /* query heads */
    int n_head_kv;      /* key/value heads */
    int head_dim;       /* head size written as attention.key_length/value_length;
                           0: n_embd / n_head, no such key (gemma3 always writes it) */
    int n_vocab;        /* tokens (token_embd rows) */
    int n_ctx;          /* ARCH.context_length written */
    float rope_base;    /* ARCH.rope.freq_base (gemma3: of the global layers) */
    float rope_base_swa; /* gemma3: ARCH.rope.freq_base_swa, of the sliding layers */
    int sliding_window; /* gemma3, phi3: ARCH.attention.sliding_window */
    float rms_eps;      /* ARCH.attention.layer_norm_rms_epsilon */
    bool tied_output;   /* no output.weight: the output shares token_embd */
    struct synth_llama3_rope rope_llama3; /* llama: rope_freqs.weight when factor > 0 */
    struct synth_longrope longrope;       /* phi3: rope_factors_long/short when orig_ctx > 0 */
    const char *note;   /* what the file leaves out of the real model; NULL: nothing */
};

/* The built-in shapes ([*n]) and one of them by name (NULL if unknown). */
const struct synth_shape *synth_shapes(size_t *n);
const struct synth_shape *synth_shape_find(const char *name);

/* Weights (all tensors' elements) of a shape. */
uint64_t synth_shape_params(const struct synth_shape *s);

/* The head size: head_dim, or n_embd / n_head when that is 0. */
int synth_shape_head_dim(const struct synth_shape *s);

/* True for the layers llama.cpp runs with the sliding window: gemma3's
 * layers il with il % 6 != 5; none in other families. */
bool synth_layer_is_sliding(const struct synth_shape *s, int il);

/* The values of rope_freqs.weight ([head_dim / 2], the formula above) of a
 * shape with rope_llama3.factor > 0. */
void synth_llama3_rope_factors(const struct synth_shape *s, float *out);

/* The values of rope_factors_long.weight (is_long) or
 * rope_factors_short.weight of a shape with longrope.orig_ctx > 0, [head_dim
 * / 2]; for pair i: long 1 + i^2 / 4 + (i % 2) / 2 (1 to 57.75 at head size
 * 32), short 1 + i / 16 + (i % 3) / 8 (1 to 2.19): varied values in the
 * ranges of Phi-3-mini-128k's (the file's weights are random anyway), each
 * exact in float32. */
void synth_longrope_factors(const struct synth_shape *s, bool is_long, float *out);

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
