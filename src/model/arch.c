/*
 * arch.c — the table of model families (arch.h). Facts per family, as
 * GGUF files and llama.cpp define them:
 *   llama    Llama 1-3, Mistral, SmolLM, TinyLlama: NORM RoPE, SiLU;
 *            Llama 3.1+ frequency factors come as the rope_freqs tensor.
 *   qwen2    Qwen2 and Qwen2.5: NEOX RoPE, biases on Q, K and V.
 *   qwen3    Qwen3 dense: NEOX RoPE, RMS norms on Q and K heads.
 * Every family takes its head size from ARCH.attention.key_length where
 * the file has it (Gemma 3, Qwen3, Llama 3.2).
 *   gemma3   Gemma 3: NEOX RoPE, GELU (tanh), embeddings times sqrt(d),
 *            Q/K norms, norms after attention and FFN, five sliding layers (RoPE base 10000) per global
 *            one.
 *   phi3     Phi-3: NEOX RoPE, fused QKV and gate/up matrices.
 */
#include <stddef.h>
#include <string.h>

#include "model/arch.h"

static const struct model_arch ARCHS[] = {
    {.name = "llama", .rope = MODEL_ROPE_NORM, .act = MODEL_ACT_SILU, .qkv_bias = true},
    {.name = "qwen2", .rope = MODEL_ROPE_NEOX, .act = MODEL_ACT_SILU, .qkv_bias = true},
    {.name = "qwen3", .rope = MODEL_ROPE_NEOX, .act = MODEL_ACT_SILU, .qk_norm = true},
    {.name = "gemma3",
     .rope = MODEL_ROPE_NEOX,
     .act = MODEL_ACT_GELU_TANH,
     .embd_scale = true,
     .qk_norm = true,
     .post_norms = true,
     .swa_period = 6,
     .swa_rope_base = 10000.0f},
    {.name = "phi3", .rope = MODEL_ROPE_NEOX, .act = MODEL_ACT_SILU, .fused_qkv = true, .fused_gate_up = true},
};

const struct model_arch *model_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof ARCHS / sizeof *ARCHS; i++)
        if (!strcmp(ARCHS[i].name, name)) return &ARCHS[i];
    return NULL;
}

const char *model_arch_names(void) { return "llama, qwen2, qwen3, gemma3, phi3"; }
