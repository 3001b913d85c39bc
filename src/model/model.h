/*
 * model.h — a loaded model and its forward pass.
 *
 * model_load maps a GGUF file, reads the hyperparameters of its family
 * (arch.h: llama, qwen2, qwen3, gemma3, phi3) and binds every weight into
 * the map with its shape checked. No
 * weight is copied, except that matrices whose type the kernel table keeps
 * in a layout of its own (tensor_repack) are rearranged into it once. A model_ctx holds what one forward pass needs besides
 * the weights: the thread pool, the kernel table and the activation arena,
 * sized once for the largest batch.
 *
 * The forward pass takes a batch of tokens that may belong to several
 * sequences (token id, position, sequence id per token) and reaches the KV
 * cache only through struct kv_cache (kv.h), so the serving engine can page
 * the cache without touching this code. Logits are produced for the tokens
 * the caller marks.
 */
#ifndef KVIK_MODEL_H
#define KVIK_MODEL_H

#include "base/base.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/kv.h"
#include "tensor/tensor.h"

struct model_hparams {
    int n_layer;
    int n_embd;     /* model width */
    int n_ff;       /* feed-forward width */
    int n_head;     /* query heads */
    int n_head_kv;  /* key/value heads (grouped-query attention) */
    int head_dim;   /* per head, of Q, K and V: ARCH.attention.key_length, else n_embd / n_head */
    int n_vocab;
    int n_ctx_train;
    float rope_base;     /* theta (of the global layers) */
    float rope_base_swa; /* theta of the sliding layers */
    int n_swa;           /* the sliding layers' window (0: none slides) */
    float attn_scale;    /* scores are scale * q.k: 1 / sqrt(head_dim) */
    float rope_scale;    /* linear position scaling (1: none) */
    int rope_dim;        /* dimensions rotated per head (head_dim for llama) */
    int n_ctx_orig;      /* ARCH.rope.scaling.original_context_length (default n_ctx_train):
                            longer contexts rotate with rope_long (model_rope_factors) */
    float rope_attn_factor; /* ARCH.rope.scaling.attn_factor: every cosine and sine of the
                               rotation multiplied by it (1: none) */
    float rms_eps;
    bool tied_output;    /* output projection shares token_embd */
};

struct layer_weights {
    int window;                      /* positions attention sees (0: all; else n_swa) */
    int rope_set;                    /* 0: the global layers' angles; 1: the sliding layers' */
    const float *attn_norm;          /* [n_embd] */
    const float *bq, *bk, *bv;       /* optional biases [q_dim], [kv_dim], [kv_dim] (NULL: none) */
    const float *q_norm, *k_norm;    /* optional per-head norms [head_dim] */
    const float *post_attn_norm;     /* optional: attention output normalised before the residual */
    const float *post_ffn_norm;      /* optional: FFN output likewise */
    struct tensor_matrix wq;         /* [n_embd] -> [n_head * head_dim] */
    struct tensor_matrix wk, wv;     /* [n_embd] -> [n_head_kv * head_dim] */
    struct tensor_matrix wo;         /* [n_head * head_dim] -> [n_embd] */
    const float *ffn_norm;           /* [n_embd] */
    struct tensor_matrix w_gate, w_up; /* [n_embd] -> [n_ff] */
    struct tensor_matrix w_down;     /* [n_ff] -> [n_embd] */
};

struct model {
    struct model_hparams hp;
    const struct model_arch *arch;
    const float *rope_freqs;         /* optional [rope_dim / 2]: pair i's angle divided by rope_freqs[i] */
    const float *rope_long;          /* optional [rope_dim / 2] Phi-3 "longrope" factors for contexts
                                        over n_ctx_orig, like rope_freqs; present with rope_short */
    const float *rope_short;         /* optional [rope_dim / 2] the factors for the others */
    struct gguf *file;
    struct tensor_matrix token_embd; /* [n_vocab] rows of [n_embd] */
    const float *output_norm;        /* [n_embd] */
    struct tensor_matrix output;     /* [n_embd] -> [n_vocab] */
    struct layer_weights *layers;    /* [n_layer] */
    uint64_t weight_bytes;           /* bytes of all weights (read once per decode step) */
    void *panels;                    /* the matrices' repacked copies (tensor_matrix.panel), or NULL */
    uint64_t identity;               /* tells this model's K/V apart from another's (prefix cache):
                                        a hash of the file's bytes before the tensor data (header,
                                        metadata, tensor infos), its size, and the first and last
                                        4 KiB of tensor data; computed at load, no full read */
};

/* Loads and validates; on failure *out is NULL and err names the key or
 * tensor at fault. */
kvik_status model_load(const char *path, struct model **out, struct kvik_err *err);
void model_free(struct model *m);

/* The factors pair i's rotation angle is divided by when sequences reach
 * n_ctx tokens (prompt + output): rope_freqs where the file has it; else,
 * as llama.cpp chooses by its context per sequence, rope_long when n_ctx >
 * n_ctx_orig and rope_short otherwise; NULL: none. */
const float *model_rope_factors(const struct model *m, int n_ctx);

/* Bytes of weights one decode step reads (everything but the unused
 * embedding rows). */
uint64_t model_decode_bytes(const struct model *m);

/* ---- forward ---------------------------------------------------------- */

struct model_ctx;

/* max_tokens: the largest batch forward will be given; max_ctx: the
 * largest position + 1 any sequence will reach (it also chooses the RoPE
 * factors: model_rope_factors). */
struct model_ctx *model_ctx_new(const struct model *m, int n_threads, int max_tokens, int max_ctx,
                                struct kvik_err *err);
void model_ctx_free(struct model_ctx *ctx);

struct model_batch {
    int n;                  /* tokens in the batch */
    const int32_t *tokens;  /* [n] */
    const int32_t *pos;     /* [n] position of each token in its sequence */
    const int32_t *seq;     /* [n] sequence id of each token */
    const bool *logits;     /* [n] produce logits for this token; NULL: the last only */
    int64_t *argmax;        /* optional out [marked tokens]: per logits row, the id of its first
                               largest logit as the kernel table's argmax finds it, found while
                               the logits are computed; -1 where a NaN hid it */
};

/*
 * Runs the batch through the model, writing each token's K/V into the cache
 * (which must already hold positions 0..pos-1 of its sequence). Logits of
 * the marked tokens are written in batch order to out ([n_marked][n_vocab]).
 * Tokens must be < n_vocab, positions < cache capacity, n <= max_tokens.
 */
kvik_status model_forward(struct model_ctx *ctx, struct kv_cache *kv, const struct model_batch *b,
                          float *out, struct kvik_err *err);

/* ---- observer ----------------------------------------------------------- */

/*
 * An observer of the weight products: fn(arg, weight, x, n_tok, cols) is
 * called with each product's input as it enters it, in F32 (after the
 * norm, after the gating; before any quantization): rows x[n_tok][cols],
 * row after row, and the GGUF name of the weight tensor
 * ("blk.0.attn_q.weight"; the output product's "output.weight", or
 * "token_embd.weight" where the output is tied). Calls come on the thread
 * that runs model_forward, in the order of the pass, once per tensor: Q,
 * K and V are three calls with the same rows, a fused attn_qkv (or
 * gate/up ffn_up) one. The output product sees only the marked rows. x is
 * valid for the call only.
 */
typedef void (*model_observe_fn)(void *arg, const char *weight, const float *x, int n_tok, int64_t cols);

/* From now on every forward pass of ctx reports to fn (NULL: none, the
 * default; the pass then runs as it would without this call). */
void model_ctx_observe(struct model_ctx *ctx, model_observe_fn fn, void *arg);

/* ---- profile ------------------------------------------------------------ */

/* The forward pass's phases, in order: embeddings and planning; the norm
 * and the Q/K/V products with rope and (F16, F32 cache) the cache store;
 * (a Q8_0 cache's store and) attention; the output
 * projection and residual; the norm and gate/up products; the gated unit
 * (empty where the down product gates its input as it quantizes it); the
 * down product and residual; the final norm and the logits. */
enum model_phase {
    MODEL_PHASE_SETUP,
    MODEL_PHASE_QKV,
    MODEL_PHASE_ATTN,
    MODEL_PHASE_WO,
    MODEL_PHASE_GATE_UP,
    MODEL_PHASE_GLU,
    MODEL_PHASE_DOWN,
    MODEL_PHASE_OUTPUT,
    MODEL_PHASE_COUNT
};

struct model_profile {
    int n_tokens;                         /* batches of this many tokens are timed (0: none) */
    int64_t calls;                        /* forward passes timed */
    double seconds[MODEL_PHASE_COUNT];    /* wall time of each phase, summed over them */
};

/* From now on, times the phases of every forward pass of exactly n_tokens
 * tokens (0: none), counts from zero. Not thread-safe against a running
 * forward pass: set it before, read it after. */
void model_ctx_profile(struct model_ctx *ctx, int n_tokens);
void model_ctx_profile_get(const struct model_ctx *ctx, struct model_profile *out);
const char *model_phase_name(int phase); /* "setup", "qkv", "attention", ... */

#endif /* KVIK_MODEL_H */
