/*
 * test_model.c — the forward pass on the real default model (skipped when it
 * is not cached): batch invariance and clean errors. Agreement with llama.cpp
 * is checked against golden data in test_golden.c.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "tensor/tensor.h"
#include "test.h"

static struct model *load_default(void) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return NULL;
    struct kvik_err err = {0};
    struct model *m = NULL;
    if (model_load(path, &m, &err)) test_fail(__FILE__, __LINE__, "model_load: %s", err.msg);
    return m;
}

static const int32_t k_prompt[] = {504, 3575, 282, 4649, 314, 7042, 30, 198};
#define PROMPT_LEN ((int)(sizeof k_prompt / sizeof *k_prompt))

TEST(model_hparams_of_smollm2) {
    struct model *m = load_default();
    if (!m) return;
    CHECK_EQ_INT(m->hp.n_layer, 30);
    CHECK_EQ_INT(m->hp.n_embd, 576);
    CHECK_EQ_INT(m->hp.n_head, 9);
    CHECK_EQ_INT(m->hp.n_head_kv, 3);
    CHECK_EQ_INT(m->hp.head_dim, 64);
    CHECK_EQ_INT(m->hp.n_ff, 1536);
    CHECK_EQ_INT(m->hp.n_vocab, 49152);
    CHECK(m->hp.tied_output);
    CHECK(m->hp.rope_base == 100000.0f);
    model_free(m);
}

/* Logits of every prompt position, from one batch or token by token, and
 * with a second sequence sharing the batch, must be identical bit for bit:
 * every product reduces each row in a fixed order whatever the batch. */
TEST(model_batch_invariance) {
    struct model *m = load_default();
    if (!m) return;
    struct kvik_err err = {0};
    int nv = m->hp.n_vocab, kv_dim = m->hp.n_head_kv * m->hp.head_dim;
    struct model_ctx *c = model_ctx_new(m, 2, 2 * PROMPT_LEN, 64, &err);
    REQUIRE(c);
    struct kv_flat kv;
    REQUIRE(kv_flat_init(&kv, m->hp.n_layer, 2, 64, kv_dim, TENSOR_TYPE_F32, &err) == KVIK_OK);
    float *batch = malloc(sizeof(float) * (size_t)nv * 2 * PROMPT_LEN);
    float *single = malloc(sizeof(float) * (size_t)nv);
    int32_t tokens[2 * PROMPT_LEN], pos[2 * PROMPT_LEN], seq[2 * PROMPT_LEN];
    bool want[2 * PROMPT_LEN];
    /* sequence 0: the prompt; sequence 1: the prompt reversed; interleaved */
    for (int i = 0; i < PROMPT_LEN; i++) {
        tokens[2 * i] = k_prompt[i], pos[2 * i] = i, seq[2 * i] = 0;
        tokens[2 * i + 1] = k_prompt[PROMPT_LEN - 1 - i], pos[2 * i + 1] = i, seq[2 * i + 1] = 1;
        want[2 * i] = want[2 * i + 1] = true;
    }
    struct model_batch b = {.n = 2 * PROMPT_LEN, .tokens = tokens, .pos = pos, .seq = seq, .logits = want};
    REQUIRE(model_forward(c, &kv.base, &b, batch, &err) == KVIK_OK);
    /* token by token, sequence 0 only, into a fresh cache */
    struct kv_flat kv1;
    REQUIRE(kv_flat_init(&kv1, m->hp.n_layer, 1, 64, kv_dim, TENSOR_TYPE_F32, &err) == KVIK_OK);
    int mismatches = 0;
    for (int i = 0; i < PROMPT_LEN; i++) {
        int32_t s0 = 0;
        struct model_batch one = {.n = 1, .tokens = &k_prompt[i], .pos = &i, .seq = &s0};
        REQUIRE(model_forward(c, &kv1.base, &one, single, &err) == KVIK_OK);
        if (memcmp(single, batch + (size_t)(2 * i) * nv, sizeof(float) * (size_t)nv)) mismatches++;
    }
    CHECK_EQ_INT(mismatches, 0);
    /* the greedy choice after the prompt is a real token, logits finite */
    int best = 0;
    const float *last = batch + (size_t)(2 * PROMPT_LEN - 2) * nv;
    for (int v = 0; v < nv; v++) {
        CHECK(isfinite(last[v]));
        if (last[v] > last[best]) best = v;
    }
    CHECK(best > 0 && best < nv);
    kv_flat_free(&kv), kv_flat_free(&kv1);
    free(batch), free(single);
    model_ctx_free(c);
    model_free(m);
}

TEST(model_rejects_bad_batches) {
    struct model *m = load_default();
    if (!m) return;
    struct kvik_err err = {0};
    struct model_ctx *c = model_ctx_new(m, 1, 4, 8, &err);
    REQUIRE(c);
    struct kv_flat kv;
    REQUIRE(kv_flat_init(&kv, m->hp.n_layer, 1, 8, m->hp.n_head_kv * m->hp.head_dim, TENSOR_TYPE_F32, &err) == KVIK_OK);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int32_t tok = m->hp.n_vocab, pos = 0, seq = 0;
    struct model_batch b = {.n = 1, .tokens = &tok, .pos = &pos, .seq = &seq};
    CHECK_EQ_INT(model_forward(c, &kv.base, &b, logits, &err), KVIK_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "token id") != NULL);
    tok = 1, pos = 8;
    CHECK_EQ_INT(model_forward(c, &kv.base, &b, logits, &err), KVIK_ERR_INVALID_ARG);
    pos = 0, seq = 1; /* the cache has one sequence */
    CHECK_EQ_INT(model_forward(c, &kv.base, &b, logits, &err), KVIK_ERR_INVALID_ARG);
    b.n = 5;
    CHECK_EQ_INT(model_forward(c, &kv.base, &b, logits, &err), KVIK_ERR_INVALID_ARG);
    free(logits);
    kv_flat_free(&kv);
    model_ctx_free(c);
    model_free(m);
}

TEST(model_load_errors) {
    struct kvik_err err = {0};
    struct model *m = NULL;
    CHECK_EQ_INT(model_load("/nonexistent/model.gguf", &m, &err), KVIK_ERR_IO);
    CHECK(m == NULL);
    /* a vocabulary-only file has no weights */
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", test_env("KVIK_FIXTURES"));
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fclose(f);
    kvik_status st = model_load(path, &m, &err);
    CHECK(st == KVIK_ERR_FORMAT || st == KVIK_ERR_UNSUPPORTED);
    CHECK(m == NULL);
    CHECK(err.msg[0] != 0);
}

TEST(kv_flat_rejects_bad_sizes_and_positions) {
    struct kvik_err err = {0};
    struct kv_flat kv;
    CHECK_EQ_INT(kv_flat_init(&kv, 0, 1, 8, 64, TENSOR_TYPE_F32, &err), KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(kv_flat_init(&kv, 1, 1, 8, 48, TENSOR_TYPE_Q8_0, &err), KVIK_ERR_INVALID_ARG); /* not whole blocks */
    CHECK_EQ_INT(kv_flat_init(&kv, 1, 1, 8, 64, TENSOR_TYPE_Q4_0, &err), KVIK_ERR_INVALID_ARG); /* not a cache type */
    CHECK_EQ_INT(kv_flat_init(&kv, 1 << 20, 1 << 20, 1 << 20, 1 << 20, TENSOR_TYPE_F32, &err), KVIK_ERR_INVALID_ARG);
    REQUIRE(kv_flat_init(&kv, 2, 2, 4, 8, TENSOR_TYPE_F32, &err) == KVIK_OK);
    /* every (layer, seq, pos, k/v) row is distinct and inside the block */
    CHECK(kv.base.row(&kv.base, 0, 0, 0, false) == kv.data);
    CHECK(kv.base.row(&kv.base, 1, 1, 3, true) == kv.data + (2 * 2 * 2 * 4 - 1) * 8 * sizeof(float));
    CHECK(kv.base.row(&kv.base, 0, 0, 1, false) != kv.base.row(&kv.base, 0, 0, 1, true));
    /* outside the cache: NULL, which the forward pass turns into an error */
    CHECK(kv.base.row(&kv.base, 2, 0, 0, false) == NULL);
    CHECK(kv.base.row(&kv.base, 0, 2, 0, false) == NULL);
    CHECK(kv.base.row(&kv.base, 0, 0, 4, false) == NULL);
    CHECK(kv.base.row(&kv.base, 0, 0, -1, true) == NULL);
    /* runs of rows: the whole rest of the sequence, clipped to what is asked
     * and to the cache; none outside it */
    const void *k, *v;
    CHECK_EQ_INT(kv.base.span(&kv.base, 1, 0, 1, 10, &k, &v), 3);
    CHECK(k == kv.base.row(&kv.base, 1, 0, 1, false) && v == kv.base.row(&kv.base, 1, 0, 1, true));
    CHECK_EQ_INT(kv.base.span(&kv.base, 1, 0, 1, 2, &k, &v), 2);
    CHECK_EQ_INT(kv.base.span(&kv.base, 0, 0, 4, 1, &k, &v), 0);
    CHECK_EQ_INT(kv.base.span(&kv.base, 0, 2, 0, 1, &k, &v), 0);
    CHECK_EQ_INT(kv.base.span(&kv.base, 0, 0, 0, 0, &k, &v), 0);
    kv_flat_free(&kv);
}

TEST(model_ctx_rejects_bad_sizes) {
    struct model *m = load_default();
    if (!m) return;
    struct kvik_err err = {0};
    CHECK(model_ctx_new(m, 1, 0, 8, &err) == NULL);
    CHECK_EQ_INT(err.code, KVIK_ERR_INVALID_ARG);
    CHECK(model_ctx_new(m, 1, 4, 0, &err) == NULL);
    CHECK(model_ctx_new(m, 0, 4, 8, &err) == NULL); /* no threads */
    /* cache rows of the wrong width are refused, not overrun */
    struct model_ctx *c = model_ctx_new(m, 1, 2, 8, &err);
    REQUIRE(c);
    struct kv_flat kv;
    REQUIRE(kv_flat_init(&kv, m->hp.n_layer, 1, 8, 32, TENSOR_TYPE_F32, &err) == KVIK_OK);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int32_t tok = 1, pos = 0, seq = 0;
    struct model_batch b = {.n = 1, .tokens = &tok, .pos = &pos, .seq = &seq};
    CHECK_EQ_INT(model_forward(c, &kv.base, &b, logits, &err), KVIK_ERR_INVALID_ARG);
    free(logits);
    kv_flat_free(&kv);
    model_ctx_free(c);
    model_free(m);
}

/* F32 weights take F32 activations, which have no quantization to fold the
 * normalisation into: the forward normalises on its own and takes the plain
 * products (the fallback of the fused path). A tiny random F32 model gives
 * finite logits, the same bits from one batch and token by token. */
TEST(model_f32_weights_forward_unfused) {
    char vocab[4096], dir[64] = "/tmp/kvik-model-test-XXXXXX", file[128];
    if (!test_default_model(vocab, sizeof vocab)) return;
    REQUIRE(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/tiny-f32.gguf", dir);
    struct synth_shape shape = {.name = "tiny", .model = "test", .n_layer = 2, .n_embd = 64, .n_ff = 128,
                                .n_head = 4, .n_head_kv = 2, .n_vocab = 512, .n_ctx = 64,
                                .rope_base = 10000.0f, .rms_eps = 1e-5f, .tied_output = false};
    struct synth_params sp = {.shape = &shape, .type = TENSOR_TYPE_F32, .seed = 5, .vocab_path = vocab,
                              .n_threads = 1};
    struct kvik_err err = {0};
    struct model *m = NULL;
    bool made = synth_write(file, &sp, NULL, &err) == KVIK_OK && model_load(file, &m, &err) == KVIK_OK;
    remove(file);
    rmdir(dir);
    CHECK_MSG(made, "tiny F32 model: %s", err.msg);
    if (!made) return;
    CHECK_EQ_INT(m->layers[0].wq.type, TENSOR_TYPE_F32);
    enum { N = 6 };
    int nv = m->hp.n_vocab, kv_dim = m->hp.n_head_kv * m->hp.head_dim;
    struct model_ctx *c = model_ctx_new(m, 2, N, 16, &err);
    float *batch = malloc(sizeof(float) * (size_t)nv * N), *one = malloc(sizeof(float) * (size_t)nv);
    REQUIRE(c && batch && one);
    int32_t tok[N] = {5, 77, 300, 12, 499, 64}, pos[N], sq[N] = {0};
    bool want[N];
    for (int i = 0; i < N; i++) pos[i] = i, want[i] = true;
    for (int pass = 0; pass < 2; pass++) {
        struct kv_flat kv;
        REQUIRE(kv_flat_init(&kv, m->hp.n_layer, 1, 16, kv_dim, TENSOR_TYPE_F16, &err) == KVIK_OK);
        if (pass == 0) {
            struct model_batch b = {.n = N, .tokens = tok, .pos = pos, .seq = sq, .logits = want};
            CHECK_EQ_INT(model_forward(c, &kv.base, &b, batch, &err), KVIK_OK);
            int bad = 0;
            for (size_t i = 0; i < (size_t)nv * N; i++) bad += !isfinite(batch[i]);
            CHECK_EQ_INT(bad, 0);
        } else {
            for (int i = 0; i < N; i++) {
                struct model_batch b = {.n = 1, .tokens = tok + i, .pos = pos + i, .seq = sq};
                CHECK_EQ_INT(model_forward(c, &kv.base, &b, one, &err), KVIK_OK);
                CHECK_MSG(!memcmp(one, batch + (size_t)i * nv, sizeof(float) * (size_t)nv),
                          "token %d: logits differ between the batch and one by one", i);
            }
        }
        kv_flat_free(&kv);
    }
    free(batch), free(one);
    model_ctx_free(c);
    model_free(m);
}

/* A writer holding a one-layer file of family arch (width 64, 2 heads of
 * 32, F32 weights), every tensor the family needs but `skip` (NULL: none);
 * NULL if out of memory. */
static struct gguf_writer *family_writer(const char *arch, const char *skip) {
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return NULL;
    char key[128];
    snprintf(key, sizeof key, "%s.block_count", arch);
    gguf_writer_set_str(w, "general.architecture", arch);
    gguf_writer_set_u32(w, key, 1);
    static const struct { const char *k; uint32_t v; } u[] = {
        {"embedding_length", 64}, {"feed_forward_length", 128}, {"attention.head_count", 2},
        {"attention.head_count_kv", 2}, {"attention.key_length", 32}, {"attention.sliding_window", 8}};
    for (size_t i = 0; i < sizeof u / sizeof *u; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, u[i].k);
        gguf_writer_set_u32(w, key, u[i].v);
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    gguf_writer_set_f32(w, key, 1e-6f);
    static const struct { const char *name; int64_t ne0, ne1; } t[] = {
        {"token_embd.weight", 64, 100}, {"output_norm.weight", 64, 0}, {"blk.0.attn_norm.weight", 64, 0},
        {"blk.0.attn_q.weight", 64, 64}, {"blk.0.attn_k.weight", 64, 64}, {"blk.0.attn_v.weight", 64, 64},
        {"blk.0.attn_output.weight", 64, 64}, {"blk.0.ffn_norm.weight", 64, 0},
        {"blk.0.ffn_gate.weight", 64, 128}, {"blk.0.ffn_up.weight", 64, 128}, {"blk.0.ffn_down.weight", 128, 64},
        {"blk.0.attn_q_norm.weight", 32, 0}, {"blk.0.attn_k_norm.weight", 32, 0},
        {"blk.0.post_attention_norm.weight", 64, 0}, {"blk.0.post_ffw_norm.weight", 64, 0}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (skip && !strcmp(t[i].name, skip)) continue;
        int64_t ne[2] = {t[i].ne0, t[i].ne1};
        gguf_writer_add_tensor(w, t[i].name, TENSOR_TYPE_F32, t[i].ne1 ? 2 : 1, ne, NULL);
    }
    return w;
}

/* Writes w to path and frees it. */
static bool writer_finish(struct gguf_writer *w, const char *path) {
    struct kvik_err err = {0};
    bool ok = w && gguf_writer_write_file(w, path, &err) == KVIK_OK;
    gguf_writer_free(w);
    return ok;
}

/* family_writer's file, written to path. */
static bool write_family_file(const char *path, const char *arch, const char *skip) {
    return writer_finish(family_writer(arch, skip), path);
}

/* A family's file that lacks one of its own tensors, or names a family kvik
 * does not run, is refused with the tensor or the name in the message; the
 * complete file loads. */
TEST(model_load_family_errors) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/kvik-family-%d.gguf", (int)getpid());
    struct kvik_err err = {0};
    struct model *m = NULL;
    REQUIRE(write_family_file(path, "gemma3", NULL));
    CHECK_MSG(model_load(path, &m, &err) == KVIK_OK, "complete gemma3 file: %s", err.msg);
    if (m) {
        CHECK_EQ_INT(m->hp.head_dim, 32);
        CHECK_EQ_INT(m->layers[0].window, 8); /* layer 0 of 6 slides */
        model_free(m), m = NULL;
    }
    static const char *const needed[] = {"blk.0.attn_q_norm.weight", "blk.0.post_ffw_norm.weight",
                                         "blk.0.ffn_gate.weight"};
    for (size_t i = 0; i < sizeof needed / sizeof *needed; i++) {
        REQUIRE(write_family_file(path, "gemma3", needed[i]));
        err = (struct kvik_err){0};
        CHECK_EQ_INT(model_load(path, &m, &err), KVIK_ERR_FORMAT);
        CHECK(m == NULL);
        CHECK_MSG(strstr(err.msg, needed[i]) != NULL, "without %s: %s", needed[i], err.msg);
    }
    REQUIRE(write_family_file(path, "gemma2", NULL));
    err = (struct kvik_err){0};
    CHECK_EQ_INT(model_load(path, &m, &err), KVIK_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "gemma2") && strstr(err.msg, "gemma3"), "message: %s", err.msg);
    remove(path);
}

/* A llama file (rope over 32 dimensions: 16 pairs) with Phi-3's longrope
 * tensors: n_long long factors of type long_type (NULL: no such tensor),
 * 16 short ones (NULL: none); attn_factor and the original context (0: no
 * key); context length 1000. */
static bool write_longrope_file(const char *path, const float *long_f, int64_t n_long, int long_type,
                                const float *short_f, float attn_factor, uint32_t orig) {
    struct gguf_writer *w = family_writer("llama", NULL);
    if (!w) return false;
    gguf_writer_set_u32(w, "llama.context_length", 1000);
    if (orig) gguf_writer_set_u32(w, "llama.rope.scaling.original_context_length", orig);
    if (attn_factor != 0.0f) gguf_writer_set_f32(w, "llama.rope.scaling.attn_factor", attn_factor);
    int64_t n16 = 16;
    if (long_f || long_type != TENSOR_TYPE_F32)
        gguf_writer_add_tensor(w, "rope_factors_long.weight", long_type, 1, &n_long, long_f);
    if (short_f) gguf_writer_add_tensor(w, "rope_factors_short.weight", TENSOR_TYPE_F32, 1, &n16, short_f);
    return writer_finish(w, path);
}

/* Loads path, expecting status want; on an error, that err names `needle`. */
static struct model *load_expect(const char *path, kvik_status want, const char *needle, const char *what) {
    struct kvik_err err = {0};
    struct model *m = NULL;
    kvik_status st = model_load(path, &m, &err);
    CHECK_MSG(st == want, "%s: status %d, want %d (%s)", what, st, want, err.msg);
    if (want != KVIK_OK) {
        CHECK(m == NULL);
        CHECK_MSG(needle && strstr(err.msg, needle), "%s: message '%s' lacks '%s'", what, err.msg, needle);
    }
    return m;
}

/* Phi-3's longrope: the long and short factors and the attention factor
 * are read and checked; the long set serves contexts over the original
 * length, the short one the others; rope_freqs, where present, wins. */
TEST(model_load_longrope_factors) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/kvik-longrope-%d.gguf", (int)getpid());
    float lf[16], sf[16], bad[16];
    for (int i = 0; i < 16; i++) lf[i] = 1.0f + (float)(i * i), sf[i] = 1.0f + (float)i / 8.0f;
    REQUIRE(write_longrope_file(path, lf, 16, TENSOR_TYPE_F32, sf, 1.25f, 100));
    struct model *m = load_expect(path, KVIK_OK, NULL, "complete");
    if (m) {
        CHECK_EQ_INT(m->hp.n_ctx_train, 1000);
        CHECK_EQ_INT(m->hp.n_ctx_orig, 100);
        CHECK(m->hp.rope_attn_factor == 1.25f);
        CHECK(m->rope_long && m->rope_long[15] == lf[15] && m->rope_short && m->rope_short[3] == sf[3]);
        CHECK(model_rope_factors(m, 100) == m->rope_short);
        CHECK(model_rope_factors(m, 2) == m->rope_short);
        CHECK(model_rope_factors(m, 101) == m->rope_long);
        model_free(m);
    }
    /* no keys: the original length is the context length, no attention factor */
    REQUIRE(write_longrope_file(path, lf, 16, TENSOR_TYPE_F32, sf, 0.0f, 0));
    if ((m = load_expect(path, KVIK_OK, NULL, "no keys"))) {
        CHECK_EQ_INT(m->hp.n_ctx_orig, 1000);
        CHECK(m->hp.rope_attn_factor == 1.0f);
        CHECK(model_rope_factors(m, 1000) == m->rope_short && model_rope_factors(m, 1001) == m->rope_long);
        model_free(m);
    }
    /* rope_freqs over both */
    struct gguf_writer *w = family_writer("llama", NULL);
    REQUIRE(w);
    int64_t n16 = 16;
    gguf_writer_add_tensor(w, "rope_freqs.weight", TENSOR_TYPE_F32, 1, &n16, sf);
    gguf_writer_add_tensor(w, "rope_factors_long.weight", TENSOR_TYPE_F32, 1, &n16, lf);
    gguf_writer_add_tensor(w, "rope_factors_short.weight", TENSOR_TYPE_F32, 1, &n16, sf);
    REQUIRE(writer_finish(w, path));
    if ((m = load_expect(path, KVIK_OK, NULL, "with rope_freqs"))) {
        CHECK(m->rope_freqs && model_rope_factors(m, 1 << 20) == m->rope_freqs);
        model_free(m);
    }
    /* a file without any factors rotates with none */
    REQUIRE(write_family_file(path, "llama", NULL));
    if ((m = load_expect(path, KVIK_OK, NULL, "none"))) {
        CHECK(!m->rope_long && !m->rope_short && model_rope_factors(m, 1 << 20) == NULL);
        model_free(m);
    }
    /* refused, with the tensor or key named */
    REQUIRE(write_longrope_file(path, lf, 16, TENSOR_TYPE_F32, NULL, 1.25f, 100));
    load_expect(path, KVIK_ERR_FORMAT, "rope_factors_short.weight", "long without short");
    REQUIRE(write_longrope_file(path, NULL, 16, TENSOR_TYPE_F32, sf, 1.25f, 100));
    load_expect(path, KVIK_ERR_FORMAT, "rope_factors_long.weight", "short without long");
    REQUIRE(write_longrope_file(path, lf, 15, TENSOR_TYPE_F32, sf, 1.25f, 100));
    load_expect(path, KVIK_ERR_FORMAT, "rope_factors_long.weight", "15 long factors");
    REQUIRE(write_longrope_file(path, NULL, 16, TENSOR_TYPE_F16, sf, 1.25f, 100));
    load_expect(path, KVIK_ERR_FORMAT, "rope_factors_long.weight", "F16 long factors");
    const float bad_values[] = {0.0f, -2.0f, NAN, INFINITY};
    for (size_t k = 0; k < sizeof bad_values / sizeof *bad_values; k++) {
        memcpy(bad, lf, sizeof bad);
        bad[7] = bad_values[k];
        REQUIRE(write_longrope_file(path, bad, 16, TENSOR_TYPE_F32, sf, 1.25f, 100));
        load_expect(path, KVIK_ERR_FORMAT, "rope_factors_long.weight' value 7", "a bad long factor");
    }
    const float bad_attn[] = {-1.0f, NAN, INFINITY};
    for (size_t k = 0; k < sizeof bad_attn / sizeof *bad_attn; k++) {
        REQUIRE(write_longrope_file(path, lf, 16, TENSOR_TYPE_F32, sf, bad_attn[k], 100));
        load_expect(path, KVIK_ERR_FORMAT, "attn_factor", "a bad attention factor");
    }
    struct gguf_writer *w0 = family_writer("llama", NULL);
    REQUIRE(w0);
    gguf_writer_set_u32(w0, "llama.rope.scaling.original_context_length", 0);
    REQUIRE(writer_finish(w0, path));
    load_expect(path, KVIK_ERR_FORMAT, "original_context_length", "original context 0");
    remove(path);
}

/* Logits of `path` over k_prompt (every position): *out = malloc'ed
 * [PROMPT_LEN][n_vocab]; false (test failed) if it does not load or run. */
static bool prompt_logits(const char *path, float **out_p, int *n_vocab) {
    struct kvik_err err = {0};
    struct model *m = NULL;
    if (model_load(path, &m, &err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
        return false;
    }
    *n_vocab = m->hp.n_vocab;
    float *out = *out_p = malloc(sizeof(float) * PROMPT_LEN * (size_t)m->hp.n_vocab);
    struct model_ctx *c = model_ctx_new(m, 2, PROMPT_LEN, 64, &err);
    struct kv_flat kv;
    bool ok = out && c && kv_flat_init(&kv, m->hp.n_layer, 1, 64, m->hp.n_head_kv * m->hp.head_dim, TENSOR_TYPE_F32,
                                &err) == KVIK_OK;
    if (ok) {
        int32_t pos[PROMPT_LEN], seq[PROMPT_LEN] = {0};
        bool want[PROMPT_LEN];
        for (int i = 0; i < PROMPT_LEN; i++) pos[i] = i, want[i] = true;
        struct model_batch b = {.n = PROMPT_LEN, .tokens = k_prompt, .pos = pos, .seq = seq, .logits = want};
        ok = model_forward(c, &kv.base, &b, out, &err) == KVIK_OK;
        kv_flat_free(&kv);
    }
    if (!ok) test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
    model_ctx_free(c);
    model_free(m);
    return ok;
}

/* Mean over the prompt's positions of KL(softmax(p) || softmax(q)). */
static double mean_kl(const float *p, const float *q, int nv) {
    double sum = 0;
    for (int t = 0; t < PROMPT_LEN; t++) {
        const float *a = p + (size_t)t * nv, *b = q + (size_t)t * nv;
        double ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0, kl = 0;
        for (int v = 0; v < nv; v++) ma = fmax(ma, a[v]), mb = fmax(mb, b[v]);
        for (int v = 0; v < nv; v++) za += exp(a[v] - ma), zb += exp(b[v] - mb);
        for (int v = 0; v < nv; v++) {
            double la = a[v] - ma - log(za), lb = b[v] - mb - log(zb);
            kl += exp(la) * (la - lb);
        }
        sum += kl;
    }
    return sum / PROMPT_LEN;
}

/* llama.cpp's mixes give a layer's Q, K and V types that share no
 * activation quantization (Q4_0 takes Q8_0 rows, Q5_1 Q8_1): each product
 * then runs on its own. A file whose V alone is Q5_1 stays as close to the
 * all-Q4_0 file as one whose V is Q8_0 (which shares Q4_0's rows), so V is
 * computed right, not just computed. */
TEST(model_mixed_activation_types) {
    char src[4096], dir[64] = "/tmp/kvik-mixed-XXXXXX", args[8192], out[4096], errb[4096];
    if (!test_default_model(src, sizeof src)) return;
    REQUIRE(mkdtemp(dir));
    static const char *const name[3] = {"pure", "v_q8_0", "v_q5_1"};
    static const char *const extra[3] = {"", "--tensor-type attn_v=q8_0", "--tensor-type attn_v=q5_1"};
    float *lg[3] = {NULL};
    int nv = 0;
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) {
        snprintf(args, sizeof args, "quantize --allow-requantize --pure %s '%s' '%s/%s.gguf' Q4_0 -t 2", extra[i], src,
                 dir, name[i]);
        int rc = test_run_kvik(args, out, sizeof out, errb, sizeof errb);
        CHECK_MSG(rc == 0, "kvik %s: %s", args, errb);
        snprintf(args, sizeof args, "%s/%s.gguf", dir, name[i]);
        ok = rc == 0 && prompt_logits(args, &lg[i], &nv);
        remove(args);
    }
    rmdir(dir);
    if (ok) {
        double kl_q8 = mean_kl(lg[0], lg[1], nv), kl_q5 = mean_kl(lg[0], lg[2], nv);
        CHECK_MSG(isfinite(kl_q5) && kl_q5 < 3 * kl_q8 + 0.01, "KL against all-Q4_0: V Q5_1 %.5f, V Q8_0 %.5f", kl_q5,
                  kl_q8);
        CHECK(kl_q8 > 0); /* the three files differ */
    }
    for (int i = 0; i < 3; i++) free(lg[i]);
}
