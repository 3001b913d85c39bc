/*
 * synth.c — random-weight GGUF files of real model shapes (see synth.h):
 * the shape table, the vocabulary copied from another GGUF and cut or
 * padded to the shape, and the weights, produced row by row over the thread
 * pool while the gguf writer streams them to disk.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "model/synth.h"
#include "tensor/fill.h"
#include "tensor/tensor.h"
#include "tokenizer/tokenizer.h"

/* ---- shapes ----------------------------------------------------------------- */

/* From each model's published config.json. */
#define LLAMA3_ROPE(f) {.factor = (f), .low_freq_factor = 1.0f, .high_freq_factor = 4.0f, .orig_ctx = 8192}
#define LLAMA SYNTH_FAMILY_LLAMA
#define QWEN2 SYNTH_FAMILY_QWEN2
#define GEMMA3 SYNTH_FAMILY_GEMMA3
#define PHI3 SYNTH_FAMILY_PHI3
static const struct synth_shape k_shapes[] = {
    {.name = "smollm2-135m", .model = "SmolLM2-135M", .family = LLAMA, .n_layer = 30, .n_embd = 576, .n_ff = 1536,
     .n_head = 9, .n_head_kv = 3, .n_vocab = 49152, .n_ctx = 8192, .rope_base = 100000.0f, .rms_eps = 1e-5f,
     .tied_output = true},
    {.name = "smollm2-360m", .model = "SmolLM2-360M", .family = LLAMA, .n_layer = 32, .n_embd = 960, .n_ff = 2560,
     .n_head = 15, .n_head_kv = 5, .n_vocab = 49152, .n_ctx = 8192, .rope_base = 100000.0f, .rms_eps = 1e-5f,
     .tied_output = true},
    {.name = "smollm2-1.7b", .model = "SmolLM2-1.7B", .family = LLAMA, .n_layer = 24, .n_embd = 2048, .n_ff = 8192,
     .n_head = 32, .n_head_kv = 32, .n_vocab = 49152, .n_ctx = 8192, .rope_base = 130000.0f, .rms_eps = 1e-5f,
     .tied_output = true},
    {.name = "tinyllama-1.1b", .model = "TinyLlama-1.1B v1.0", .family = LLAMA, .n_layer = 22, .n_embd = 2048,
     .n_ff = 5632, .n_head = 32, .n_head_kv = 4, .n_vocab = 32000, .n_ctx = 2048, .rope_base = 10000.0f,
     .rms_eps = 1e-5f},
    {.name = "llama-3.2-1b", .model = "Llama-3.2-1B", .family = LLAMA, .n_layer = 16, .n_embd = 2048, .n_ff = 8192,
     .n_head = 32, .n_head_kv = 8, .head_dim = 64, .n_vocab = 128256, .n_ctx = 131072, .rope_base = 500000.0f,
     .rms_eps = 1e-5f, .tied_output = true, .rope_llama3 = LLAMA3_ROPE(32.0f)},
    {.name = "llama-3.2-3b", .model = "Llama-3.2-3B", .family = LLAMA, .n_layer = 28, .n_embd = 3072, .n_ff = 8192,
     .n_head = 24, .n_head_kv = 8, .head_dim = 128, .n_vocab = 128256, .n_ctx = 131072, .rope_base = 500000.0f,
     .rms_eps = 1e-5f, .tied_output = true, .rope_llama3 = LLAMA3_ROPE(32.0f)},
    {.name = "llama-2-7b", .model = "Llama-2-7B", .family = LLAMA, .n_layer = 32, .n_embd = 4096, .n_ff = 11008,
     .n_head = 32, .n_head_kv = 32, .n_vocab = 32000, .n_ctx = 4096, .rope_base = 10000.0f, .rms_eps = 1e-5f},
    {.name = "llama-3-8b", .model = "Meta-Llama-3-8B", .family = LLAMA, .n_layer = 32, .n_embd = 4096,
     .n_ff = 14336, .n_head = 32, .n_head_kv = 8, .n_vocab = 128256, .n_ctx = 8192, .rope_base = 500000.0f,
     .rms_eps = 1e-5f},
    {.name = "llama-3.1-8b", .model = "Llama-3.1-8B", .family = LLAMA, .n_layer = 32, .n_embd = 4096,
     .n_ff = 14336, .n_head = 32, .n_head_kv = 8, .n_vocab = 128256, .n_ctx = 131072, .rope_base = 500000.0f,
     .rms_eps = 1e-5f, .rope_llama3 = LLAMA3_ROPE(8.0f)},
    {.name = "mistral-7b", .model = "Mistral-7B-v0.3", .family = LLAMA, .n_layer = 32, .n_embd = 4096,
     .n_ff = 14336, .n_head = 32, .n_head_kv = 8, .n_vocab = 32768, .n_ctx = 32768, .rope_base = 1000000.0f,
     .rms_eps = 1e-5f},
    {.name = "qwen2.5-0.5b", .model = "Qwen2.5-0.5B", .family = QWEN2, .n_layer = 24, .n_embd = 896, .n_ff = 4864,
     .n_head = 14, .n_head_kv = 2, .n_vocab = 151936, .n_ctx = 32768, .rope_base = 1000000.0f, .rms_eps = 1e-6f,
     .tied_output = true},
    {.name = "qwen2.5-1.5b", .model = "Qwen2.5-1.5B", .family = QWEN2, .n_layer = 28, .n_embd = 1536,
     .n_ff = 8960, .n_head = 12, .n_head_kv = 2, .n_vocab = 151936, .n_ctx = 131072, .rope_base = 1000000.0f,
     .rms_eps = 1e-6f, .tied_output = true},
    {.name = "gemma3-270m", .model = "gemma-3-270m", .family = GEMMA3, .n_layer = 18, .n_embd = 640, .n_ff = 2048,
     .n_head = 4, .n_head_kv = 1, .head_dim = 256, .n_vocab = 262144, .n_ctx = 32768, .rope_base = 1000000.0f,
     .rope_base_swa = 10000.0f, .sliding_window = 512, .rms_eps = 1e-6f, .tied_output = true},
    {.name = "gemma3-1b", .model = "gemma-3-1b", .family = GEMMA3, .n_layer = 26, .n_embd = 1152, .n_ff = 6912,
     .n_head = 4, .n_head_kv = 1, .head_dim = 256, .n_vocab = 262144, .n_ctx = 32768, .rope_base = 1000000.0f,
     .rope_base_swa = 10000.0f, .sliding_window = 512, .rms_eps = 1e-6f, .tied_output = true},
    {.name = "phi3-mini-4k", .model = "Phi-3-mini-4k", .family = PHI3, .n_layer = 32, .n_embd = 3072, .n_ff = 8192,
     .n_head = 32, .n_head_kv = 32, .n_vocab = 32064, .n_ctx = 4096, .rope_base = 10000.0f,
     .sliding_window = 2047, .rms_eps = 1e-5f},
    /* Test shapes: a few layers, SmolLM2's vocabulary, grouped-query attention;
     * tiny-gemma3 has 6 layers, so that one (layer 5) attends globally. */
    {.name = "tiny-llama", .model = "test (llama)", .family = LLAMA, .n_layer = 2, .n_embd = 128, .n_ff = 384,
     .n_head = 4, .n_head_kv = 2, .n_vocab = 49152, .n_ctx = 2048, .rope_base = 10000.0f, .rms_eps = 1e-5f,
     .tied_output = true},
    {.name = "tiny-llama3", .model = "test (llama 3)", .family = LLAMA, .n_layer = 3, .n_embd = 128, .n_ff = 384,
     .n_head = 4, .n_head_kv = 2, .head_dim = 32, .n_vocab = 49152, .n_ctx = 131072, .rope_base = 500000.0f,
     .rms_eps = 1e-5f, .tied_output = true,
     .rope_llama3 = {.factor = 32.0f, .low_freq_factor = 1.0f, .high_freq_factor = 4.0f, .orig_ctx = 64},
     .note = "llama3 rope factors for an original context of 64, not 8192, so they matter within 64 tokens"},
    {.name = "tiny-qwen2", .model = "test (qwen2)", .family = QWEN2, .n_layer = 2, .n_embd = 128, .n_ff = 384,
     .n_head = 4, .n_head_kv = 2, .n_vocab = 49152, .n_ctx = 32768, .rope_base = 1000000.0f, .rms_eps = 1e-6f,
     .tied_output = true},
    {.name = "tiny-gemma3", .model = "test (gemma3)", .family = GEMMA3, .n_layer = 6, .n_embd = 128, .n_ff = 256,
     .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_vocab = 49152, .n_ctx = 32768, .rope_base = 1000000.0f,
     .rope_base_swa = 10000.0f, .sliding_window = 16, .rms_eps = 1e-6f, .tied_output = true},
    {.name = "tiny-phi3", .model = "test (phi3)", .family = PHI3, .n_layer = 2, .n_embd = 128, .n_ff = 256,
     .n_head = 4, .n_head_kv = 2, .n_vocab = 49152, .n_ctx = 4096, .rope_base = 10000.0f, .sliding_window = 2047,
     .rms_eps = 1e-5f},
    /* attn_factor: sqrt(1 + ln(16384 / 256) / ln 256) = sqrt(1.75) */
    {.name = "tiny-phi3-longrope", .model = "test (phi3 longrope)", .family = PHI3, .n_layer = 2, .n_embd = 128,
     .n_ff = 256, .n_head = 4, .n_head_kv = 2, .n_vocab = 49152, .n_ctx = 16384, .rope_base = 10000.0f,
     .sliding_window = 2047, .rms_eps = 1e-5f, .longrope = {.orig_ctx = 256, .attn_factor = 1.3228756555f},
     .note = "longrope for an original context of 256 (llama.cpp's smallest context per sequence), not 4096"},
    /* Shapes for the quantizer's tests: a small vocabulary; quant-llama3 has 16
     * layers (every "more bits" layer pattern of the mixes), 256-wide rows and
     * GQA 4; quant-qwen2 rows of 384 (not a multiple of 256) and an FFN of
     * 1000 (not a multiple of 32). */
    {.name = "quant-llama3", .model = "test (quantizer, llama 3)", .family = LLAMA, .n_layer = 16, .n_embd = 256,
     .n_ff = 512, .n_head = 8, .n_head_kv = 2, .n_vocab = 1024, .n_ctx = 8192, .rope_base = 500000.0f,
     .rms_eps = 1e-5f},
    {.name = "quant-qwen2", .model = "test (quantizer, qwen2)", .family = QWEN2, .n_layer = 4, .n_embd = 384,
     .n_ff = 1000, .n_head = 6, .n_head_kv = 3, .n_vocab = 1024, .n_ctx = 32768, .rope_base = 1000000.0f,
     .rms_eps = 1e-6f, .tied_output = true},
    {.name = "quant-gemma3", .model = "test (quantizer, gemma3)", .family = GEMMA3, .n_layer = 6, .n_embd = 256,
     .n_ff = 512, .n_head = 4, .n_head_kv = 1, .head_dim = 64, .n_vocab = 1024, .n_ctx = 32768,
     .rope_base = 1000000.0f, .rope_base_swa = 10000.0f, .sliding_window = 16, .rms_eps = 1e-6f, .tied_output = true},
    {.name = "quant-phi3", .model = "test (quantizer, phi3)", .family = PHI3, .n_layer = 4, .n_embd = 256,
     .n_ff = 512, .n_head = 8, .n_head_kv = 8, .n_vocab = 1024, .n_ctx = 4096, .rope_base = 10000.0f,
     .sliding_window = 2047, .rms_eps = 1e-5f},
};
#undef LLAMA
#undef QWEN2
#undef GEMMA3
#undef PHI3

static const char *const k_family_names[SYNTH_FAMILY_COUNT] = {"llama", "qwen2", "gemma3", "phi3"};

const char *synth_family_name(int family) {
    return family >= 0 && family < SYNTH_FAMILY_COUNT ? k_family_names[family] : NULL;
}

const struct synth_shape *synth_shapes(size_t *n) {
    *n = sizeof k_shapes / sizeof k_shapes[0];
    return k_shapes;
}

const struct synth_shape *synth_shape_find(const char *name) {
    for (size_t i = 0; name && i < sizeof k_shapes / sizeof k_shapes[0]; i++)
        if (!strcmp(k_shapes[i].name, name)) return &k_shapes[i];
    return NULL;
}

int synth_shape_head_dim(const struct synth_shape *s) {
    return s->head_dim ? s->head_dim : s->n_embd / s->n_head;
}

bool synth_layer_is_sliding(const struct synth_shape *s, int il) {
    return s->family == SYNTH_FAMILY_GEMMA3 && il % 6 != 5;
}

/* Each step in float32, as the converter's torch code runs it (x / t there
 * is a reciprocal times x). */
void synth_llama3_rope_factors(const struct synth_shape *s, float *out) {
    const struct synth_llama3_rope *r = &s->rope_llama3;
    int dim = synth_shape_head_dim(s);
    const float two_pi = 6.28318530717958647692f;
    float lo_wavelen = (float)r->orig_ctx / r->low_freq_factor, hi_wavelen = (float)r->orig_ctx / r->high_freq_factor;
    for (int i = 0; i < dim / 2; i++) {
        float freq = 1.0f / powf(s->rope_base, (float)(2 * i) / (float)dim);
        float wavelen = (1.0f / freq) * two_pi;
        if (wavelen < hi_wavelen) out[i] = 1.0f;
        else if (wavelen > lo_wavelen) out[i] = r->factor;
        else {
            float smooth = ((1.0f / wavelen) * (float)r->orig_ctx - r->low_freq_factor) /
                           (r->high_freq_factor - r->low_freq_factor);
            out[i] = 1.0f / ((1.0f - smooth) / r->factor + smooth);
        }
    }
}

void synth_longrope_factors(const struct synth_shape *s, bool is_long, float *out) {
    for (int i = 0; i < synth_shape_head_dim(s) / 2; i++)
        out[i] = is_long ? 1.0f + (float)(i * i) / 4.0f + (float)(i % 2) / 2.0f
                         : 1.0f + (float)i / 16.0f + (float)(i % 3) / 8.0f;
}

uint64_t synth_shape_params(const struct synth_shape *s) {
    uint64_t embd = (uint64_t)s->n_embd, hd = (uint64_t)synth_shape_head_dim(s), ff = (uint64_t)s->n_ff;
    uint64_t q = hd * (uint64_t)s->n_head, kv = hd * (uint64_t)s->n_head_kv;
    uint64_t layer = embd * (q + 2 * kv) + q * embd + 3 * embd * ff + 2 * embd;
    if (s->family == SYNTH_FAMILY_QWEN2) layer += q + 2 * kv;                /* biases */
    if (s->family == SYNTH_FAMILY_GEMMA3) layer += 2 * hd + 2 * embd;        /* q/k and post norms */
    uint64_t extra = (s->rope_llama3.factor > 0 ? hd / 2 : 0) + (s->longrope.orig_ctx > 0 ? hd : 0);
    return (uint64_t)s->n_vocab * embd * (s->tied_output ? 1 : 2) + (uint64_t)s->n_layer * layer + embd + extra;
}

/* The shape's numbers are ones both loaders accept. */
static bool shape_ok(const struct synth_shape *s) {
    if (!s || !s->name || s->family < 0 || s->family >= SYNTH_FAMILY_COUNT || s->n_layer < 1 ||
        s->n_layer > 1024 || s->n_embd < 1 || s->n_embd > 65536 || s->n_ff < 1 || s->n_ff > 1 << 20 ||
        s->n_head < 1 || s->n_head > 1024 || s->n_head_kv < 1 || s->n_head % s->n_head_kv != 0 ||
        s->n_vocab < 1 || s->n_vocab > INT32_MAX / 2 || s->n_ctx < 1 || !(s->rope_base > 0.0f) ||
        !(s->rms_eps > 0.0f && s->rms_eps < 1.0f) || s->head_dim < 0 || s->head_dim > 4096)
        return false;
    if (!s->head_dim && s->n_embd % s->n_head != 0) return false;
    int hd = synth_shape_head_dim(s);
    if (hd < 2 || hd % 2) return false;
    /* qwen2 and phi3 have no key for another head size (q is n_embd wide) */
    if ((s->family == SYNTH_FAMILY_QWEN2 || s->family == SYNTH_FAMILY_PHI3) && hd * s->n_head != s->n_embd)
        return false;
    if (s->family == SYNTH_FAMILY_GEMMA3 &&
        (!s->tied_output || s->sliding_window < 1 || !(s->rope_base_swa > 0.0f)))
        return false;
    if (s->family == SYNTH_FAMILY_PHI3 && s->sliding_window < 0) return false;
    const struct synth_longrope *lr = &s->longrope;
    if (lr->orig_ctx != 0 && (s->family != SYNTH_FAMILY_PHI3 || lr->orig_ctx < 1 || lr->orig_ctx > s->n_ctx ||
                              !(lr->attn_factor > 0.0f && lr->attn_factor < 1e3f)))
        return false;
    const struct synth_llama3_rope *r = &s->rope_llama3;
    if (r->factor != 0.0f &&
        (s->family != SYNTH_FAMILY_LLAMA || !(r->factor > 0.0f) || !(r->low_freq_factor > 0.0f) ||
         !(r->high_freq_factor > r->low_freq_factor) || r->orig_ctx < 1))
        return false;
    return true;
}

/* ---- types ------------------------------------------------------------------ */

bool synth_type_supported(int type) {
    const struct type_traits *tt = tensor_type_traits(type);
    int offs[2];
    if (!tt || !tt->to_float || !tensor_kernels_get(TENSOR_ISA_SCALAR)->vec_dot[type]) return false;
    return !tt->is_quantized || tensor_scale_fields(type, offs) > 0;
}

int synth_matrix_type(int type, int64_t cols, bool output) {
    const struct type_traits *tt = tensor_type_traits(type);
    if (output && tt && tt->is_quantized && type != TENSOR_TYPE_Q8_0)
        return cols % 256 == 0 ? TENSOR_TYPE_Q6_K : TENSOR_TYPE_Q8_0;
    if (!tt || cols % tt->block_size == 0) return type;
    switch (type) {
    case TENSOR_TYPE_Q2_K: case TENSOR_TYPE_Q3_K: return TENSOR_TYPE_Q4_0;
    case TENSOR_TYPE_Q4_K: return TENSOR_TYPE_Q5_0;
    case TENSOR_TYPE_Q5_K: return TENSOR_TYPE_Q5_1;
    case TENSOR_TYPE_Q6_K: return TENSOR_TYPE_Q8_0;
    default: return type;
    }
}

/* general.file_type: llama.cpp's llama_ftype for a file mostly of `type`
 * (the K-quants as their _S variants); -1 if it has none. */
static int file_type_of(int type) {
    switch (type) {
    case TENSOR_TYPE_F32: return 0;
    case TENSOR_TYPE_F16: return 1;
    case TENSOR_TYPE_Q4_0: return 2;
    case TENSOR_TYPE_Q4_1: return 3;
    case TENSOR_TYPE_Q8_0: return 7;
    case TENSOR_TYPE_Q5_0: return 8;
    case TENSOR_TYPE_Q5_1: return 9;
    case TENSOR_TYPE_Q2_K: return 10;
    case TENSOR_TYPE_Q3_K: return 11;
    case TENSOR_TYPE_Q4_K: return 14;
    case TENSOR_TYPE_Q5_K: return 16;
    case TENSOR_TYPE_Q6_K: return 18;
    case TENSOR_TYPE_BF16: return 32;
    default: return -1;
    }
}

/* ---- vocabulary ------------------------------------------------------------- */

/* Puts "PREFIX: " (printf-style) before err's message; keeps its code. */
__attribute__((format(printf, 2, 3))) static void err_prefix(struct kvik_err *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[256], msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s", err->msg);
    err_set(err, err->code, "%s: %s", prefix, msg);
}

/* A gguf writer status as an error naming the key. */
static kvik_status writer_status(kvik_status st, const char *key, struct kvik_err *err) {
    if (!st) return KVIK_OK;
    return err_set(err, st, "synth: cannot write %s: %s", key,
                   st == KVIK_ERR_NOMEM ? "out of memory" : "invalid value");
}

/* An open-addressing set of byte strings (pointing into the source file). */
struct text_set {
    uint64_t mask;          /* slots - 1 */
    struct gguf_str *slots; /* [mask + 1]; ptr NULL: empty */
};

static uint64_t text_hash(const char *p, uint64_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001B3ull; /* FNV-1a */
    return h;
}

/* The slot holding p[0..n), or the empty slot where it would go. */
static struct gguf_str *text_set_slot(const struct text_set *s, const char *p, uint64_t n) {
    for (uint64_t i = text_hash(p, n) & s->mask;; i = (i + 1) & s->mask) {
        struct gguf_str *e = &s->slots[i];
        if (!e->ptr || (e->len == n && !memcmp(e->ptr, p, n))) return e;
    }
}

static bool text_set_has(const struct text_set *s, const char *p, uint64_t n) {
    return text_set_slot(s, p, n)->ptr != NULL;
}

/* The set of the first n strings of an array of strings. */
static bool text_set_init(struct text_set *s, const struct gguf_value *strs, int64_t n) {
    uint64_t slots = 16;
    while (slots < 2 * (uint64_t)n) slots *= 2;
    s->mask = slots - 1;
    if (!(s->slots = calloc(slots, sizeof *s->slots))) return false;
    static const char empty[1] = "";
    for (int64_t i = 0; i < n; i++) {
        struct gguf_str t = gguf_arr_str(strs, (uint64_t)i);
        *text_set_slot(s, t.ptr ? t.ptr : empty, t.len) = (struct gguf_str){t.ptr ? t.ptr : empty, t.len};
    }
    return true;
}

/* Source vocabulary -> the shape's: n_src tokens in, n out. */
struct vocab_copy {
    struct gguf_writer *w;
    const char *path;        /* of src, for messages */
    const char *shape;
    int64_t n_src, n;
    struct text_set kept;    /* texts of the tokens kept (ids < min(n_src, n)) */
    struct synth_info *info;
};

/* tokenizer.ggml.tokens: the kept tokens, then "<unused_ID>" names not
 * already taken. */
static kvik_status copy_tokens(struct vocab_copy *vc, const char *key, const struct gguf_value *v,
                               struct kvik_err *err) {
    struct gguf_warr *a = gguf_warr_new(GGUF_TYPE_STRING);
    kvik_status st = a ? KVIK_OK : KVIK_ERR_NOMEM;
    for (int64_t i = 0; !st && i < vc->n; i++) {
        if (i < vc->n_src) {
            struct gguf_str t = gguf_arr_str(v, (uint64_t)i);
            st = gguf_warr_add_str(a, t.ptr, t.len);
            continue;
        }
        char name[64];
        int len = snprintf(name, sizeof name, "<unused_%lld>", (long long)i);
        for (int k = 1; text_set_has(&vc->kept, name, (uint64_t)len); k++)
            len = snprintf(name, sizeof name, "<unused_%lld_%d>", (long long)i, k);
        st = gguf_warr_add_str(a, name, (uint64_t)len);
    }
    if (!st) st = gguf_writer_set_arr(vc->w, key, a);
    gguf_warr_free(a);
    return writer_status(st, key, err);
}

/* A per-token array of 4-byte numbers (token_type, scores), cut or padded
 * with pad. elem_a / elem_b: the element types accepted. */
static kvik_status copy_per_token(struct vocab_copy *vc, const char *key, const struct gguf_value *v,
                                  int elem_a, int elem_b, uint32_t pad, struct kvik_err *err) {
    int et = gguf_arr_type(v);
    if ((et != elem_a && et != elem_b) || (int64_t)gguf_arr_len(v) != vc->n_src)
        return err_set(err, KVIK_ERR_FORMAT, "%s: %s is not %lld values of type %s", vc->path, key,
                       (long long)vc->n_src, gguf_type_name(elem_a));
    int64_t cap = vc->n_src > vc->n ? vc->n_src : vc->n;
    uint32_t *vals = malloc((size_t)cap * sizeof *vals);
    if (!vals) return err_set(err, KVIK_ERR_NOMEM, "synth: out of memory");
    gguf_arr_copy(v, vals, (size_t)vc->n_src * sizeof *vals);
    for (int64_t i = vc->n_src; i < vc->n; i++) vals[i] = pad;
    kvik_status st = gguf_writer_set_arr_data(vc->w, key, (enum gguf_type)et, vals, (uint64_t)vc->n);
    free(vals);
    return writer_status(st, key, err);
}

/* tokenizer.ggml.merges of a cut vocabulary: only those whose two parts and
 * result are kept tokens. */
static kvik_status copy_merges(struct vocab_copy *vc, const char *key, const struct gguf_value *v,
                               struct kvik_err *err) {
    if (gguf_arr_type(v) != GGUF_TYPE_STRING)
        return err_set(err, KVIK_ERR_FORMAT, "%s: %s is not an array of strings", vc->path, key);
    struct gguf_warr *a = gguf_warr_new(GGUF_TYPE_STRING);
    char *joined = NULL;
    size_t cap = 0;
    kvik_status st = a ? KVIK_OK : KVIK_ERR_NOMEM;
    for (uint64_t i = 0; !st && i < gguf_arr_len(v); i++) {
        struct gguf_str m = gguf_arr_str(v, i);
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        if (!sp) {
            vc->info->merges_dropped++;
            continue;
        }
        size_t la = (size_t)(sp - m.ptr), lb = m.len - la - 1;
        if (la + lb > cap) {
            char *p = realloc(joined, la + lb);
            if (!p) {
                st = KVIK_ERR_NOMEM;
                break;
            }
            joined = p;
            cap = la + lb;
        }
        memcpy(joined, m.ptr, la);
        memcpy(joined + la, sp + 1, lb);
        if (!text_set_has(&vc->kept, m.ptr, la) || !text_set_has(&vc->kept, sp + 1, lb) ||
            !text_set_has(&vc->kept, joined, la + lb)) {
            vc->info->merges_dropped++;
            continue;
        }
        st = gguf_warr_add_str(a, m.ptr, m.len);
        vc->info->merges_kept++;
    }
    if (!st) st = gguf_writer_set_arr(vc->w, key, a);
    free(joined);
    gguf_warr_free(a);
    return writer_status(st, key, err);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* One tokenizer.* key of the source. */
static kvik_status copy_tokenizer_key(struct vocab_copy *vc, const char *key, const struct gguf_value *v,
                                      struct kvik_err *err) {
    bool resize = vc->n_src != vc->n;
    if (!strcmp(key, "tokenizer.ggml.tokens")) return copy_tokens(vc, key, v, err);
    if (!strcmp(key, "tokenizer.ggml.token_type"))
        return copy_per_token(vc, key, v, GGUF_TYPE_INT32, GGUF_TYPE_UINT32, TOKEN_TYPE_UNUSED, err);
    if (!strcmp(key, "tokenizer.ggml.scores"))
        return copy_per_token(vc, key, v, GGUF_TYPE_FLOAT32, GGUF_TYPE_FLOAT32, f32_to_bits(0.0f), err);
    if (!strcmp(key, "tokenizer.ggml.merges") && vc->n_src > vc->n) return copy_merges(vc, key, v, err);
    uint64_t id;
    if (ends_with(key, "_token_id") && gguf_value_to_u64(v, &id) && id >= (uint64_t)vc->n)
        return err_set(err, KVIK_ERR_INVALID_ARG,
                       "%s: %s is %llu, outside the %lld tokens of shape %s (use a smaller vocabulary)",
                       vc->path, key, (unsigned long long)id, (long long)vc->n, vc->shape);
    if (resize && v->type == GGUF_TYPE_ARRAY && (int64_t)gguf_arr_len(v) == vc->n_src &&
        strcmp(key, "tokenizer.ggml.merges") != 0)
        return err_set(err, KVIK_ERR_INVALID_ARG, "%s: %s has a value per token; kvik synth cannot resize it",
                       vc->path, key);
    return writer_status(gguf_writer_set_value(vc->w, key, v), key, err);
}

/* Every tokenizer.* key of src, in its order, resized to n tokens. */
static kvik_status copy_tokenizer(struct gguf_writer *w, const struct gguf *src, const char *path,
                                  const struct synth_shape *shape, struct synth_info *info,
                                  struct kvik_err *err) {
    const struct gguf_value *tokens;
    kvik_status st = gguf_get_arr(src, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err);
    if (st == KVIK_ERR_NOT_FOUND)
        return err_set(err, KVIK_ERR_FORMAT, "%s: no tokenizer (tokenizer.ggml.tokens is missing)", path);
    if (st) {
        err_prefix(err, "%s", path);
        return st;
    }
    struct vocab_copy vc = {.w = w, .path = path, .shape = shape->name,
                            .n_src = (int64_t)gguf_arr_len(tokens), .n = shape->n_vocab, .info = info};
    if (vc.n_src < 1 || vc.n_src > INT32_MAX / 2)
        return err_set(err, KVIK_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %lld tokens", path,
                       (long long)vc.n_src);
    info->vocab_src = vc.n_src;
    if (!text_set_init(&vc.kept, tokens, vc.n_src < vc.n ? vc.n_src : vc.n))
        return err_set(err, KVIK_ERR_NOMEM, "synth: out of memory");
    for (int64_t i = 0; !st && i < gguf_n_kv(src); i++) {
        const char *key = gguf_key(src, i);
        if (strncmp(key, "tokenizer.", 10) != 0) continue;
        st = copy_tokenizer_key(&vc, key, gguf_kv_value(src, i), err);
    }
    free(vc.kept.slots);
    return st;
}

/* ---- weights ---------------------------------------------------------------- */

/* What a tensor holds. */
enum fill_kind {
    FILL_MATRIX, /* weights of RMS 1/sqrt(cols) */
    FILL_NORM,   /* F32, 1 +- 0.05 */
    FILL_BIAS,   /* F32, uniform in [-0.5, 0.5] */
    FILL_ROPE,   /* F32, synth_llama3_rope_factors */
    FILL_ROPE_LONG,  /* F32, synth_longrope_factors (long) */
    FILL_ROPE_SHORT, /* F32, synth_longrope_factors (short) */
};

/* One tensor of the file, filled at write time. */
struct synth_tensor {
    struct synth_run *run;
    int type;
    int64_t cols;      /* ne[0] */
    uint64_t id;       /* its index in the file: part of each row's seed */
    int kind;          /* enum fill_kind */
    float scale;       /* matrices: multiplies every scale field (quantized) or value (float) */
};

/* State of one synth_write. */
struct synth_run {
    struct pool *pool;
    uint64_t seed;
    float *tmp;               /* [threads][max_cols] float rows */
    int64_t max_cols;
    uint64_t done, total;     /* tensor bytes */
    const struct synth_params *p;
};

/* A chunk of rows being filled over the pool. */
struct fill_job {
    const struct synth_tensor *t;
    uint8_t *dst;
    int64_t row0, n_rows;
    size_t row_bytes;
};

/* splitmix64's finalizer: a well-mixed 64-bit value from any input. */
static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void fill_row(const struct synth_tensor *t, uint8_t *dst, uint64_t seed, float *tmp) {
    const struct type_traits *tt = tensor_type_traits(t->type);
    if (t->kind == FILL_ROPE) {
        synth_llama3_rope_factors(t->run->p->shape, (float *)dst);
        return;
    }
    if (t->kind == FILL_ROPE_LONG || t->kind == FILL_ROPE_SHORT) {
        synth_longrope_factors(t->run->p->shape, t->kind == FILL_ROPE_LONG, (float *)dst);
        return;
    }
    if (t->kind != FILL_MATRIX || !tt->is_quantized) { /* float values: uniform in [-1, 1], then scaled */
        bool f32 = t->kind != FILL_MATRIX;
        float *v = f32 ? (float *)dst : tmp;
        tensor_fill_random(TENSOR_TYPE_F32, v, 1, t->cols, (size_t)t->cols * sizeof(float), TENSOR_FILL_BITS,
                           seed);
        for (int64_t i = 0; i < t->cols; i++)
            v[i] = t->kind == FILL_NORM ? 1.0f + 0.05f * v[i] : t->kind == FILL_BIAS ? 0.5f * v[i] : v[i] * t->scale;
        if (!f32) tt->from_float(v, dst, t->cols);
        return;
    }
    /* random quant bits, then every block scale rescaled */
    tensor_fill_random(t->type, dst, 1, t->cols, tensor_row_size(t->type, t->cols), TENSOR_FILL_BITS, seed);
    int offs[2];
    int nf = tensor_scale_fields(t->type, offs);
    for (int64_t b = 0; b < t->cols / tt->block_size; b++) {
        uint8_t *block = dst + (size_t)b * tt->type_size;
        for (int f = 0; f < nf; f++) {
            uint16_t h;
            memcpy(&h, block + offs[f], 2);
            h = fp32_to_fp16(fp16_to_fp32(h) * t->scale);
            memcpy(block + offs[f], &h, 2);
        }
    }
}

static void fill_rows(void *arg, int ith, int nth) {
    const struct fill_job *job = arg;
    const struct synth_tensor *t = job->t;
    int64_t r0 = job->n_rows * ith / nth, r1 = job->n_rows * (ith + 1) / nth;
    float *tmp = t->run->tmp + (size_t)ith * (size_t)t->run->max_cols;
    uint64_t tseed = mix64(mix64(t->run->seed) ^ t->id);
    for (int64_t r = r0; r < r1; r++)
        fill_row(t, job->dst + (size_t)r * job->row_bytes, mix64(tseed ^ (uint64_t)(job->row0 + r)), tmp);
}

/* gguf_tensor_fill_fn */
static kvik_status fill_tensor(void *user, void *dst, int64_t row0, int64_t n_rows, struct kvik_err *err) {
    const struct synth_tensor *t = user;
    struct synth_run *run = t->run;
    struct fill_job job = {t, dst, row0, n_rows, tensor_row_size(t->type, t->cols)};
    pool_run(run->pool, fill_rows, &job);
    run->done += (uint64_t)n_rows * job.row_bytes;
    if (run->p->progress) run->p->progress(run->p->progress_user, run->done, run->total);
    return KVIK_OK;
}

/* RMS of the weights tensor_fill_random's random bits give a type (before
 * rescaling); float types are drawn as F32. 0 if out of memory. */
static double type_rms(int type) {
    enum { ROWS = 64, COLS = 1024 };
    const struct type_traits *tt = tensor_type_traits(type);
    int gen = tt->is_quantized ? type : TENSOR_TYPE_F32;
    size_t row_bytes = tensor_row_size(gen, COLS);
    uint8_t *q = malloc(row_bytes * ROWS);
    float *f = malloc(sizeof(float) * COLS);
    double sum = 0;
    if (q && f && tensor_fill_random(gen, q, ROWS, COLS, row_bytes, TENSOR_FILL_BITS, 0x5EED) == KVIK_OK) {
        for (int r = 0; r < ROWS; r++) {
            tensor_type_traits(gen)->to_float(q + (size_t)r * row_bytes, f, COLS);
            for (int i = 0; i < COLS; i++) sum += (double)f[i] * f[i];
        }
    }
    free(q);
    free(f);
    return sqrt(sum / (ROWS * COLS));
}

/* ---- the file --------------------------------------------------------------- */

/* The file's tensors: rope factors first (where the converter puts its
 * generated tensors), then the embeddings, each layer's, the output. */
struct plan {
    struct synth_tensor *ts;  /* [n] */
    char (*names)[64];        /* [n] */
    int64_t (*ne)[2];         /* [n] ne[0] = cols (inputs), ne[1] = rows (1: a 1-D tensor) */
    int64_t n;
};

/* The most tensors a file of n_layer layers has. */
static size_t plan_max(int n_layer) { return 6 + 13 * (size_t)n_layer; }

/* Adds "NAME.SUFFIX" (layer < 0) or "blk.LAYER.NAME.SUFFIX". */
static void plan_add(struct plan *pl, const char *name, const char *suffix, int layer, int64_t cols, int64_t rows,
                     int type, int kind) {
    if (layer >= 0) snprintf(pl->names[pl->n], 64, "blk.%d.%s.%s", layer, name, suffix);
    else snprintf(pl->names[pl->n], 64, "%s.%s", name, suffix);
    pl->ne[pl->n][0] = cols;
    pl->ne[pl->n][1] = rows;
    pl->ts[pl->n] = (struct synth_tensor){.type = type, .cols = cols, .id = (uint64_t)pl->n, .kind = kind};
    pl->n++;
}

static void plan_matrix(struct plan *pl, const char *name, int layer, int64_t cols, int64_t rows, int type) {
    plan_add(pl, name, "weight", layer, cols, rows, synth_matrix_type(type, cols, false), FILL_MATRIX);
}

static void plan_vector(struct plan *pl, const char *name, const char *suffix, int layer, int64_t n, int kind) {
    plan_add(pl, name, suffix, layer, n, 1, TENSOR_TYPE_F32, kind);
}

static void plan_tensors(struct plan *pl, const struct synth_shape *s, int type) {
    int64_t embd = s->n_embd, ff = s->n_ff, hd = synth_shape_head_dim(s);
    int64_t q = hd * s->n_head, kv = hd * s->n_head_kv;
    int fam = s->family;
    if (s->rope_llama3.factor > 0) plan_vector(pl, "rope_freqs", "weight", -1, hd / 2, FILL_ROPE);
    if (s->longrope.orig_ctx > 0) {
        plan_vector(pl, "rope_factors_long", "weight", -1, hd / 2, FILL_ROPE_LONG);
        plan_vector(pl, "rope_factors_short", "weight", -1, hd / 2, FILL_ROPE_SHORT);
    }
    plan_add(pl, "token_embd", "weight", -1, embd, s->n_vocab, synth_matrix_type(type, embd, s->tied_output),
             FILL_MATRIX);
    for (int l = 0; l < s->n_layer; l++) {
        plan_vector(pl, "attn_norm", "weight", l, embd, FILL_NORM);
        if (fam == SYNTH_FAMILY_PHI3) {
            plan_matrix(pl, "attn_qkv", l, embd, q + 2 * kv, type);
        } else {
            static const char *const qkv[3] = {"attn_q", "attn_k", "attn_v"};
            for (int i = 0; i < 3; i++) {
                plan_matrix(pl, qkv[i], l, embd, i ? kv : q, type);
                if (fam == SYNTH_FAMILY_QWEN2) plan_vector(pl, qkv[i], "bias", l, i ? kv : q, FILL_BIAS);
            }
        }
        if (fam == SYNTH_FAMILY_GEMMA3) {
            plan_vector(pl, "attn_q_norm", "weight", l, hd, FILL_NORM);
            plan_vector(pl, "attn_k_norm", "weight", l, hd, FILL_NORM);
        }
        plan_matrix(pl, "attn_output", l, q, embd, type);
        if (fam == SYNTH_FAMILY_GEMMA3) plan_vector(pl, "post_attention_norm", "weight", l, embd, FILL_NORM);
        plan_vector(pl, "ffn_norm", "weight", l, embd, FILL_NORM);
        if (fam == SYNTH_FAMILY_PHI3) {
            plan_matrix(pl, "ffn_up", l, embd, 2 * ff, type);
        } else {
            plan_matrix(pl, "ffn_gate", l, embd, ff, type);
            plan_matrix(pl, "ffn_up", l, embd, ff, type);
        }
        plan_matrix(pl, "ffn_down", l, ff, embd, type);
        if (fam == SYNTH_FAMILY_GEMMA3) plan_vector(pl, "post_ffw_norm", "weight", l, embd, FILL_NORM);
    }
    plan_vector(pl, "output_norm", "weight", -1, embd, FILL_NORM);
    if (!s->tied_output)
        plan_add(pl, "output", "weight", -1, embd, s->n_vocab, synth_matrix_type(type, embd, true), FILL_MATRIX);
}

/* general.name: "synthetic SHAPE TYPE (random weights)", with every "phi3"
 * or "phi-3" (any case) written "phi 3": llama.cpp's vocabulary loader
 * looks up Phi-3's own special tokens (</s>, <s>, <unk>) in a model whose
 * name holds those, and fails on another tokenizer. */
static void file_name(char *out, size_t len, const struct synth_shape *s, int type) {
    char raw[160];
    snprintf(raw, sizeof raw, "synthetic %s %s (random weights)", s->name, tensor_type_name(type));
    size_t o = 0;
    for (const char *p = raw; *p && o + 1 < len;) {
        if (!strncasecmp(p, "phi3", 4) || !strncasecmp(p, "phi-3", 5)) {
            size_t skip = p[3] == '-' ? 5 : 4;
            if (o + 5 >= len) break;
            memcpy(out + o, p, 3); /* "phi" in its case */
            memcpy(out + o + 3, " 3", 2);
            o += 5;
            p += skip;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = 0;
}

/* general.* and ARCH.* keys, in the order of llama.cpp's converter for the
 * family. */
static kvik_status set_hparams(struct gguf_writer *w, const struct synth_shape *s, int type) {
    const char *arch = synth_family_name(s->family);
    int fam = s->family, hd = synth_shape_head_dim(s);
    char name[160];
    file_name(name, sizeof name, s, type);
    kvik_status st = gguf_writer_set_str(w, "general.architecture", arch);
    if (!st) st = gguf_writer_set_str(w, "general.type", "model");
    if (!st) st = gguf_writer_set_str(w, "general.name", name);
    /* (key suffix, u32 value, or f32 value when is_f32) */
    struct kv {
        const char *key;
        uint32_t u;
        float f;
        bool is_f32;
    } kvs[24];
    int n = 0;
#define U32(k, v) (kvs[n++] = (struct kv){(k), (uint32_t)(v), 0.0f, false})
#define F32(k, v) (kvs[n++] = (struct kv){(k), 0, (v), true})
    U32("block_count", s->n_layer);
    U32("context_length", s->n_ctx);
    if (fam == SYNTH_FAMILY_PHI3)
        U32("rope.scaling.original_context_length", s->longrope.orig_ctx > 0 ? s->longrope.orig_ctx : s->n_ctx);
    U32("embedding_length", s->n_embd);
    U32("feed_forward_length", s->n_ff);
    U32("attention.head_count", s->n_head);
    U32("attention.head_count_kv", s->n_head_kv);
    F32("rope.freq_base", s->rope_base);
    if (fam == SYNTH_FAMILY_GEMMA3) F32("rope.freq_base_swa", s->rope_base_swa);
    F32("attention.layer_norm_rms_epsilon", s->rms_eps);
    if (s->head_dim || fam == SYNTH_FAMILY_GEMMA3) {
        U32("attention.key_length", hd);
        U32("attention.value_length", hd);
    }
    if (fam == SYNTH_FAMILY_GEMMA3 || fam == SYNTH_FAMILY_PHI3) U32("attention.sliding_window", s->sliding_window);
    if (fam == SYNTH_FAMILY_LLAMA) U32("vocab_size", s->n_vocab);
    if (fam == SYNTH_FAMILY_LLAMA || fam == SYNTH_FAMILY_PHI3) U32("rope.dimension_count", hd);
    if (s->longrope.orig_ctx > 0) F32("rope.scaling.attn_factor", s->longrope.attn_factor);
#undef U32
#undef F32
    for (int i = 0; !st && i < n; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s.%s", arch, kvs[i].key);
        st = kvs[i].is_f32 ? gguf_writer_set_f32(w, key, kvs[i].f) : gguf_writer_set_u32(w, key, kvs[i].u);
    }
    if (!st && file_type_of(type) >= 0)
        st = gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type_of(type));
    if (!st && tensor_type_traits(type)->is_quantized)
        st = gguf_writer_set_u32(w, "general.quantization_version", 2);
    return st;
}

/* Adds the planned tensors with their fill callbacks and scales. */
static kvik_status add_tensors(struct gguf_writer *w, struct synth_run *run, struct plan *pl,
                               struct kvik_err *err) {
    double rms[TENSOR_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < pl->n; i++) {
        struct synth_tensor *t = &pl->ts[i];
        t->run = run;
        if (t->kind == FILL_MATRIX) {
            if (rms[t->type] == 0 && (rms[t->type] = type_rms(t->type)) == 0)
                return err_set(err, KVIK_ERR_NOMEM, "synth: out of memory");
            t->scale = (float)(1.0 / sqrt((double)t->cols) / rms[t->type]);
        }
        int n_dims = t->kind == FILL_MATRIX ? 2 : 1;
        kvik_status st = gguf_writer_add_tensor_fn(w, pl->names[i], t->type, n_dims, pl->ne[i], fill_tensor, t);
        if (st == KVIK_ERR_INVALID_ARG)
            return err_set(err, st, "synth: %s: a row of %lld weights is not a whole number of %s blocks",
                           pl->names[i], (long long)t->cols, tensor_type_name(t->type));
        if (st) return err_set(err, st, "synth: out of memory");
        run->total += tensor_row_size(t->type, t->cols) * (uint64_t)pl->ne[i][1];
        if (t->cols > run->max_cols) run->max_cols = t->cols;
    }
    return KVIK_OK;
}

kvik_status synth_write(const char *path, const struct synth_params *p, struct synth_info *info,
                        struct kvik_err *err) {
    struct synth_info local;
    if (!info) info = &local;
    *info = (struct synth_info){0};
    if (!path || !p || !p->vocab_path) return err_set(err, KVIK_ERR_INVALID_ARG, "synth: NULL argument");
    const struct synth_shape *s = p->shape;
    if (!shape_ok(s)) return err_set(err, KVIK_ERR_INVALID_ARG, "synth: inconsistent shape");
    if (!synth_type_supported(p->type))
        return err_set(err, KVIK_ERR_INVALID_ARG, "synth: weight type %s is not supported",
                       tensor_type_name(p->type));

    size_t max_tensors = plan_max(s->n_layer), path_len = strlen(path) + 5;
    struct plan pl = {calloc(max_tensors, sizeof *pl.ts), calloc(max_tensors, sizeof *pl.names),
                      calloc(max_tensors, sizeof *pl.ne), 0};
    struct synth_run run = {.seed = p->seed, .p = p};
    struct gguf *vocab = NULL;
    struct gguf_writer *w = gguf_writer_new();
    char *tmp_path = malloc(path_len);
    bool tmp_written = false;
    int threads = p->n_threads > 0 ? p->n_threads : cpu_count();
    kvik_status st = KVIK_OK;
    if (!pl.ts || !pl.names || !pl.ne || !w || !tmp_path) {
        st = err_set(err, KVIK_ERR_NOMEM, "synth: out of memory");
        goto done;
    }
    snprintf(tmp_path, path_len, "%s.tmp", path);
    if ((st = gguf_open(p->vocab_path, &vocab, err))) {
        if (st == KVIK_ERR_FORMAT) err_prefix(err, "%s: not a usable GGUF file", p->vocab_path);
        goto done;
    }
    if ((st = set_hparams(w, s, p->type))) {
        err_set(err, st, "synth: out of memory");
        goto done;
    }
    if ((st = copy_tokenizer(w, vocab, p->vocab_path, s, info, err))) goto done;
    gguf_close(vocab);
    vocab = NULL;

    plan_tensors(&pl, s, p->type);
    if ((st = add_tensors(w, &run, &pl, err))) goto done;
    if (!(run.pool = pool_create(threads, err))) {
        st = err ? err->code : KVIK_ERR_NOMEM;
        goto done;
    }
    if (!(run.tmp = malloc((size_t)threads * (size_t)run.max_cols * sizeof(float)))) {
        st = err_set(err, KVIK_ERR_NOMEM, "synth: out of memory");
        goto done;
    }
    tmp_written = true;
    if ((st = gguf_writer_write_file(w, tmp_path, err))) goto done;
    if (rename(tmp_path, path) != 0) {
        st = err_set(err, KVIK_ERR_IO, "%s: %s", path, strerror(errno));
        goto done;
    }
    tmp_written = false;
    struct stat sb;
    info->file_bytes = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    info->n_params = synth_shape_params(s);
    info->n_tensors = pl.n;
done:
    if (tmp_written) remove(tmp_path);
    gguf_close(vocab);
    gguf_writer_free(w);
    pool_free(run.pool);
    free(run.tmp);
    free(tmp_path);
    free(pl.ne);
    free(pl.names);
    free(pl.ts);
    return st;
}
