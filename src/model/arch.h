/*
 * arch.h — the model families kvik runs, as data: one row per value of
 * general.architecture, saying how the forward pass differs from llama's.
 *
 * The keys every family shares are read under the family's own prefix
 * (ARCH.block_count, ARCH.embedding_length, ...); the tensor names are
 * GGUF's (blk.N.attn_q.weight, ...). A row names what the family adds:
 * the RoPE pairing, the activation, which optional tensors it has, where
 * its norms sit, and which layers slide.
 */
#ifndef KVIK_MODEL_ARCH_H
#define KVIK_MODEL_ARCH_H

#include <stdbool.h>

/* How RoPE pairs a head's rotated values: NORM rotates (2i, 2i + 1),
 * as GGUF's llama files expect; NEOX rotates (i, i + rope_dim / 2). Both
 * use the angle pos * base^(-2i / rope_dim) for pair i. */
enum model_rope { MODEL_ROPE_NORM, MODEL_ROPE_NEOX };

/* The gated unit: act(gate) * up. SILU: x / (1 + e^-x). GELU_TANH:
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). */
enum model_act { MODEL_ACT_SILU, MODEL_ACT_GELU_TANH };

struct model_arch {
    const char *name;      /* general.architecture */
    enum model_rope rope;
    enum model_act act;
    bool embd_scale;       /* the embedding rows are multiplied by sqrt(n_embd) */
    bool qkv_bias;         /* blk.N.attn_{q,k,v}.bias may be present (F32, added after the product) */
    bool qk_norm;          /* blk.N.attn_{q,k}_norm: an RMS norm over each Q and K head, before RoPE */
    bool post_norms;       /* blk.N.post_attention_norm and post_ffw_norm: the attention and FFN
                              outputs are normalised before they join the residual stream */
    bool fused_qkv;        /* blk.N.attn_qkv: the Q, K and V rows one after another */
    bool fused_gate_up;    /* blk.N.ffn_up holds the gate rows then the up rows; no ffn_gate */
    /* Sliding-window layers: with swa_period p > 0, layer l slides unless
     * (l + 1) % p == 0; its window is ARCH.attention.sliding_window. 0: no
     * layer slides. */
    int swa_period;
    float swa_rope_base;   /* the sliding layers' RoPE base when the file has no
                              ARCH.rope.freq_base_swa (0: the global layers') */
};

/* The row for an architecture name, or NULL if kvik does not run it. */
const struct model_arch *model_arch_find(const char *name);

/* The names kvik runs, comma-separated ("llama, qwen2, ..."). */
const char *model_arch_names(void);

#endif /* KVIK_MODEL_ARCH_H */
