/*
 * test_real_model.c — the library on the real default model
 * (SmolLM2-135M-Instruct, Q4_1), when it is in the model cache (`make
 * model`; .ci/run fetches it). Without it these tests skip.
 *
 * Checks that the strict reader accepts a file llama.cpp's tools wrote, that
 * the metadata reads as the model card says, that every tensor's byte size
 * matches its type and shape, and that the SIMD kernels agree with the
 * scalar reference on real weights (not only on random bits), and that
 * weights repacked at load give the file layout's logits bit for bit.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/kv.h"
#include "model/model.h"
#include "tensor/kernels.h"
#include "tensor/quants.h"
#include "test.h"

TEST(real_model_metadata_and_tensors) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    REQUIRE(gguf_open(path, &g, &err) == KVIK_OK);
    struct gguf_str arch;
    CHECK(gguf_get_str(g, "general.architecture", &arch, &err) == KVIK_OK);
    CHECK(arch.len == 5 && !memcmp(arch.ptr, "llama", 5));
    uint32_t layers = 0, embd = 0;
    CHECK(gguf_get_u32(g, "llama.block_count", &layers, &err) == KVIK_OK);
    CHECK(gguf_get_u32(g, "llama.embedding_length", &embd, &err) == KVIK_OK);
    CHECK_EQ_INT(layers, 30);
    CHECK_EQ_INT(embd, 576);
    CHECK_EQ_INT(gguf_n_tensors(g), 272); /* 9 per layer + embedding + output norm */
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        size_t row = tensor_row_size(t->type, t->ne[0]);
        CHECK_MSG(row && (uint64_t)row * (uint64_t)(t->n_elems / t->ne[0]) == t->n_bytes,
                  "%s: %llu bytes for its shape", t->name, (unsigned long long)t->n_bytes);
    }
    int64_t emb = gguf_find_tensor(g, "token_embd.weight");
    REQUIRE(emb >= 0);
    CHECK_EQ_INT(gguf_tensor(g, emb)->type, TENSOR_TYPE_Q8_0);
    CHECK_EQ_INT(gguf_tensor(g, emb)->ne[1], 49152);
    gguf_close(g);
}

TEST(real_model_kernels_agree_on_real_weights) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    REQUIRE(gguf_open(path, &g, &err) == KVIK_OK);
    static const char *const names[] = {"blk.0.ffn_up.weight", "blk.29.attn_q.weight", "token_embd.weight"};
    for (size_t ni = 0; ni < sizeof names / sizeof *names; ni++) {
        const struct gguf_tensor *t = gguf_tensor(g, gguf_find_tensor(g, names[ni]));
        REQUIRE(t);
        const struct type_traits *tt = tensor_type_traits(t->type);
        int64_t cols = t->ne[0], rows = 64;
        size_t row_bytes = tensor_row_size(t->type, cols);
        float *x = malloc((size_t)cols * sizeof(float));
        float *w = malloc((size_t)cols * sizeof(float));
        void *xq = mem_alloc_aligned(tensor_row_size(tt->vec_dot_type, cols));
        for (int64_t i = 0; i < cols; i++) x[i] = sinf((float)i * 0.37f);
        tensor_kernels_get(TENSOR_ISA_SCALAR)->quantize[tt->vec_dot_type](x, xq, cols);
        float *xd = malloc((size_t)cols * sizeof(float));
        tensor_type_traits(tt->vec_dot_type)->to_float(xq, xd, cols);
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = (const uint8_t *)t->data + (size_t)r * row_bytes;
            tt->to_float(row, w, cols);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < cols; i++) {
                CHECK(isfinite(w[i]));
                exact += (double)w[i] * xd[i];
                mag += fabs((double)w[i] * xd[i]);
            }
            /* See test_kernels.c for the bound; with Q4_1 the activation
             * block sums are stored as f16, which adds up to half an f16
             * ulp (2^-11 relative) of each block's min term m * s. */
            double tol = 4.0 * (double)(cols / tt->block_size + 8) * FLT_EPSILON * mag;
            if (t->type == TENSOR_TYPE_Q4_1) {
                const block_q4_1 *wb = (const block_q4_1 *)row;
                const block_q8_1 *yb = xq;
                for (int64_t b = 0; b < cols / QK; b++)
                    tol += fabs((double)fp16_to_fp32(wb[b].m) * fp16_to_fp32(yb[b].s)) * ldexp(1.0, -11);
            }
            for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
                const struct tensor_kernels *k = tensor_kernels_get(isa);
                if (!k) continue;
                float got;
                k->vec_dot[t->type](cols, &got, row, xq);
                CHECK_MSG(fabs(got - exact) <= tol, "%s row %lld %s: %g vs %g (tol %g)", names[ni],
                          (long long)r, k->name, got, exact, tol);
            }
        }
        free(x), free(w), free(xd), mem_free(xq);
    }
    gguf_close(g);
}

TEST(real_model_kvik_info) {
    char path[4096], cmd[8400];
    if (!test_default_model(path, sizeof path)) return;
    snprintf(cmd, sizeof cmd, "'%s' info '%s' > /dev/null 2>&1", test_env("KVIK_BIN"), path);
    CHECK_EQ_INT(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' info --json '%s' | python3 -c 'import json,sys; d=json.load(sys.stdin); "
             "sys.exit(0 if len(d[\"tensors\"]) == 272 else 1)' 2>/dev/null",
             test_env("KVIK_BIN"), path);
    if (system("python3 -c 'import json' 2>/dev/null") == 0) CHECK_EQ_INT(system(cmd), 0);
}

/* End to end through the command line. The expected ids come from
 * independent implementations: the prompt ids from Hugging Face tokenizers
 * (a BPE built from the file's vocabulary and merges), the greedy first
 * token (7042, " Paris") from llama.cpp (llama-cpp-python 0.3.36) on the same
 * file. The full golden comparison lives in test_golden.c. */
TEST(real_model_kvik_run_greedy) {
    char path[4096], cmd[8400];
    if (!test_default_model(path, sizeof path)) return;
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'The capital of France is' -n 4 --temp 0 --json 2>/dev/null",
             test_env("KVIK_BIN"), path);
    FILE *p = popen(cmd, "r");
    REQUIRE(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    CHECK_EQ_INT(pclose(p), 0);
    CHECK(strstr(out, "\"prompt_ids\":[504,3575,282,4649,314]") != NULL);
    CHECK(strstr(out, "\"generated_ids\":[7042,") != NULL);
    CHECK(strstr(out, "\"text\":\" Paris") != NULL);
}

/* Logits of a 20-token prefill (batched products) and one decode token
 * (mat-vec) through the model loaded as model_load leaves it. */
static bool forward_logits(struct model *m, float *out) {
    const struct model_hparams *hp = &m->hp;
    struct kvik_err err = {0};
    struct model_ctx *c = model_ctx_new(m, 2, 32, 64, &err);
    struct kv_flat kv;
    bool ok = c && kv_flat_init(&kv, hp->n_layer, 1, 64, hp->n_head_kv * hp->head_dim, TENSOR_TYPE_F16, &err) == KVIK_OK;
    if (!ok) {
        test_fail(__FILE__, __LINE__, "context: %s", err.msg);
        model_ctx_free(c);
        return false;
    }
    enum { N = 20 };
    int32_t tok[N + 1], pos[N + 1], seq[N + 1] = {0};
    bool want[N];
    for (int i = 0; i <= N; i++) tok[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab), pos[i] = i;
    for (int i = 0; i < N; i++) want[i] = true;
    struct model_batch b = {.n = N, .tokens = tok, .pos = pos, .seq = seq, .logits = want};
    struct model_batch d = {.n = 1, .tokens = tok + N, .pos = pos + N, .seq = seq};
    ok = model_forward(c, &kv.base, &b, out, &err) == KVIK_OK &&
         model_forward(c, &kv.base, &d, out + (size_t)N * hp->n_vocab, &err) == KVIK_OK;
    if (!ok) test_fail(__FILE__, __LINE__, "model_forward: %s", err.msg);
    kv_flat_free(&kv);
    model_ctx_free(c);
    return ok;
}

/* Weights repacked for the kernel table (tensor_repack) give the same
 * logits, bit for bit, as the file's layout (KVIK_REPACK=0), in prefill and
 * in decode; where the table repacks nothing the two loads are the same. */
TEST(real_model_repacked_weights_same_logits) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct model *packed = NULL, *plain = NULL;
    REQUIRE(model_load(path, &packed, &err) == KVIK_OK);
    setenv("KVIK_REPACK", "0", 1);
    kvik_status st = model_load(path, &plain, &err);
    unsetenv("KVIK_REPACK");
    REQUIRE(st == KVIK_OK);
    CHECK(plain->panels == NULL && plain->layers[0].wq.panel == NULL);
    if (tensor_repack_size(&plain->layers[0].wq)) /* this table repacks Q4_1 */
        CHECK(packed->panels != NULL && packed->layers[0].wq.panel != NULL && packed->output.panel != NULL);
    size_t n = (size_t)21 * (size_t)packed->hp.n_vocab;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    REQUIRE(a && b);
    if (forward_logits(packed, a) && forward_logits(plain, b)) {
        size_t differ = 0;
        for (size_t i = 0; i < n; i++) differ += memcmp(&a[i], &b[i], sizeof *a) != 0;
        CHECK_MSG(differ == 0, "%zu of %zu logits differ between repacked and file-layout weights", differ, n);
    }
    free(a), free(b);
    model_free(packed);
    model_free(plain);
}
